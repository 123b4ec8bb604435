//! The kernel's tracepoints, by subsystem (Linux keeps these in
//! `include/trace/events/`). Each is found by the tracer at boot through the
//! `trace_events` linker section. Interrupt handlers and shell commands are slices
//! on a timeline (`begin`/`end`), timer ticks a counter.

/// The systems whose events are off by default: the (very noisy) heap events and
/// the self-tests' (`bench`, `stress`, and `selftest` for `midpatch`).
pub const QUIET_SYSTEMS: [&str; 4] = ["kmem", "bench", "stress", "selftest"];

trace::event! {
    /// A device or IPI interrupt handler starts; `irq` is its vector (the field
    /// Linux's event has, which trace-cmd's `--profile` reads).
    pub IRQ_ENTRY = "irq":"irq_handler_entry" { irq: u8 } => "irq={irq}",
        begin "irq" key irq;
    /// A device or IPI interrupt handler returns.
    pub IRQ_EXIT = "irq":"irq_handler_exit" { irq: u8 } => "irq={irq}",
        end "irq" key irq;
    /// A non-maskable interrupt arrived.
    pub NMI = "irq":"nmi" { stopping: bool } => "stopping={stopping}";
    /// The hard lockup detector found that CPU `cpu` took no timer interrupt for
    /// `stalled_ms` (recorded by the CPU watching it, which then stops it by NMI).
    pub HARD_LOCKUP = "lockup":"hard_lockup" { cpu: u32, stalled_ms: u64 } => "cpu={cpu} stalled={stalled_ms}ms";
    /// A CPU's periodic timer interrupt, with the time since its previous one.
    pub TIMER_TICK = "timer":"tick" { tick: u64, interval_ns: u64 } => "tick={tick} interval={interval_ns}ns",
        counter;
    /// A byte arrived on the serial line.
    pub SERIAL_RX = "serial":"rx" { byte: u8 } => "byte={byte:#x}";
    /// The UART reported a receive overrun (input lost in the hardware).
    pub SERIAL_OVERRUN = "serial":"rx_overrun" { overruns: u64 } => "overruns={overruns}";
    /// A page fault (fatal in this kernel), where it struck as an address in the
    /// kernel ELF.
    pub PAGE_FAULT = "exceptions":"page_fault"
        { address: u64, error_code: u64, ip: u64 } => "address={address:#x} error_code={error_code:#x} ip={ip:sym}";
    /// A CPU exception other than a page fault, where it struck as an address in the
    /// kernel ELF.
    pub EXCEPTION = "exceptions":"exception" { vector: u8, ip: u64 } => "vector={vector} ip={ip:sym}";
    /// A heap allocation.
    pub KMALLOC = "kmem":"kmalloc" { ptr: u64, size: u64, align: u64 } => "ptr={ptr:#x} size={size} align={align}";
    /// A heap free.
    pub KFREE = "kmem":"kfree" { ptr: u64, size: u64 } => "ptr={ptr:#x} size={size}";
    /// An inter-processor interrupt was sent (`target_apic` 4294967295: to every CPU
    /// but the sender).
    pub IPI_SEND = "smp":"ipi_send" { target_apic: u32, kind: &str } => "target_apic={target_apic} kind={kind}";
    /// The shell starts a command.
    pub SHELL_COMMAND = "shell":"command" { line: &str } => "{line}", begin "command";
    /// The `bench` command's event (two integers, the shape the benchmarks measure).
    pub BENCH = "bench":"event" { a: u64, b: u64 } => "a={a} b={b}";
    /// A `stress` command event: the writer's local APIC id, where it was written
    /// from (0 thread, 1 timer, 2 IPI, 3 NMI), and its sequence number there.
    pub STRESS = "stress":"event" { apic_id: u32, source: u8, seq: u64 } => "apic_id={apic_id} source={source} seq={seq}";
    /// Fired with each `stress` event; `stress cycle N` arms and disarms it while the
    /// writers run (its sites are patched under them).
    pub CYCLED = "stress":"cycled" { seq: u64 } => "seq={seq}";
    /// Fired by `midpatch` on every CPU, in thread context and in an NMI, before each
    /// of its four patches and after each step of it (`patch` 0-3, `step` 0-3:
    /// `selftest::midpatch`); its site is the one the first two patch.
    pub MIDPATCH = "selftest":"midpatch" { patch: u8, step: u8 } => "patch={patch} step={step}";
    /// The shell finished a command.
    pub SHELL_DONE = "shell":"command_done" { ok: bool, duration_ns: u64 } => "ok={ok} duration={duration_ns}ns",
        end "command";
}
