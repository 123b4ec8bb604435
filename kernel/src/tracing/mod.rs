//! The kernel's side of the `trace` crate: the platform, the one tracer and its
//! default events; the trace files' readers are in [`files`].

mod files;
pub mod functions;

pub use files::{consume, stream_pipe, write_cpu_stats, write_snapshot, write_trace};

use crate::arch::irq::{self, Running};
use crate::arch::{membarrier, percpu, trace_platform};
use crate::events::QUIET_SYSTEMS;
use crate::{barrier, clock};
use spin::Once;
use trace::{Activity, Context, Instance, InstanceConfig, Limits, Mode, Tracer, TracerError};

/// The top-level instance's buffer: per CPU.
const TOP_BYTES_PER_CPU: usize = 256 * 1024;
/// Ring buffer memory all instances together may use.
const MAX_TRACE_BYTES: usize = 64 << 20;
/// Most instances, the top-level one included.
const MAX_INSTANCES: usize = 16;

static TRACER: Once<Tracer<KernelPlatform>> = Once::new();

/// What prints the trace for a `dump` or `cpudump` function command (registered by
/// the dump module above this one).
static DUMP: Once<fn(Option<usize>) -> bool> = Once::new();

/// Registers what prints the trace for a `dump` (`None`) or `cpudump` (the calling
/// CPU) function command: from any context, without waiting for other CPUs, and
/// returning whether it printed. Once per boot.
pub fn set_dump(dump: fn(Option<usize>) -> bool) {
    DUMP.call_once(|| dump);
}

/// Builds the tracer over every descriptor the linker collected, installs it as
/// the destination of all tracepoints and of the `log` crate, and enables every
/// event in the top-level instance but the (very noisy) heap events and the
/// benchmark's and stress test's.
pub fn init(cpus: usize) -> Result<&'static Tracer<KernelPlatform>, TracerError> {
    let limits = Limits { max_instances: MAX_INSTANCES, max_total_bytes: MAX_TRACE_BYTES };
    let top =
        InstanceConfig { bytes_per_cpu: TOP_BYTES_PER_CPU, mode: Mode::Overwrite, snapshot: false };
    let tracer = Tracer::new(KernelPlatform, cpus, trace::linked_events!(), limits, top)?;
    let tracer = TRACER.call_once(|| tracer);
    if trace::install(tracer).is_ok() {
        let _ = log::set_logger(&trace::event::log::LOGGER);
        log::set_max_level(log::LevelFilter::Info);
        default_events(&tracer.top());
        // Each CPU a panic stops records where it was, its last event in the dump.
        let _ = crate::smp::STOP.add(on_stopped);
    }
    Ok(tracer)
}

/// On a CPU a panic stops (the stop NMI's hook): seals this CPU's rings, since a
/// write the NMI interrupted never finishes, then records the call chain `chain` as
/// an `ftrace:kernel_stack` event in the top-level instance and seals again, which
/// publishes that record whatever the first seal had to leave out.
fn on_stopped(chain: &[u64]) {
    if let Some(tracer) = tracer() {
        tracer.seal_cpu();
        tracer.record_stack(chain);
        tracer.seal_cpu();
    }
}

/// Enables the default events in `instance`: every event but those of
/// [`QUIET_SYSTEMS`], system by system, so that none of those is on for a moment.
pub fn default_events(instance: &Instance<'_, KernelPlatform>) {
    let mut systems: alloc::vec::Vec<&str> =
        instance.tracer().events().iter().map(|d| d.system).collect();
    systems.sort_unstable();
    systems.dedup();
    for system in systems.into_iter().filter(|s| !QUIET_SYSTEMS.contains(s)) {
        // A system of markers or tracers' events only is refused: nothing to do.
        let _ = instance.set_event(Some(system), None, true);
    }
}

/// The tracer, once `init` has run.
pub fn tracer() -> Option<&'static Tracer<KernelPlatform>> {
    TRACER.get()
}

/// Each [`Running`] code and the activity a record written there shows. The codes
/// are the activities' context bits (checked at compile time below), so a writer's
/// context is its CPU's code and the interrupt flag, with no table to read.
const ACTIVITIES: [(Running, Activity); 7] = [
    (Running::Idle, Activity::Idle),
    (Running::Thread, Activity::Task),
    (Running::Irq1, Activity::Irq { depth: 1 }),
    (Running::Irq2, Activity::Irq { depth: 2 }),
    (Running::Irq3, Activity::Irq { depth: 3 }),
    (Running::Nmi, Activity::Nmi { in_irq: false }),
    (Running::NmiOverIrq, Activity::Nmi { in_irq: true }),
];

const _: () = {
    let mut i = 0;
    while i < ACTIVITIES.len() {
        let (running, activity) = ACTIVITIES[i];
        assert!(Context::new(activity, false).bits() == running as u8);
        assert!(Context::new(activity, true).bits() == running as u8 | Context::IRQS_OFF_BIT);
        i += 1;
    }
};

/// Frames a stack trace walks: the tracer's own (at most a handful) and those it keeps.
const WALKED_FRAMES: usize = 32;

/// The `trace` crate's code (its functions and the generic ones the kernel
/// instantiates).
const TRACER_CODE: &[&str] = &["trace::", "<trace::"];
/// The hooks into the tracer: the function tracers' entry hook and its trampoline,
/// and the irqs-off hooks.
const HOOKS: &[&str] = &["kernel::tracing::functions::", "kernel::arch::ftrace::"];

/// Whether the return address `ret` (an ELF address) lies in a function whose name
/// starts with one of `prefixes`. Without a symbol table, none does.
fn returns_into(ret: u64, prefixes: &[&str]) -> bool {
    // The call sits just before the return address.
    let name = crate::symbols::table().and_then(|t| t.lookup(ret.wrapping_sub(1)));
    name.is_some_and(|(name, _)| prefixes.iter().any(|p| name.starts_with(p)))
}

pub use crate::arch::trace_platform::KernelPlatform;

/// The kernel's side of the tracer. `cpu`, `light_barrier` and `heavy_barrier` are
/// what `arch::trace_platform::PROMISE` promises about: keep them so.
impl trace::Platform for KernelPlatform {
    const PROMISE: Option<trace::CpuPromise<Self>> = Some(trace_platform::PROMISE);

    #[inline(always)]
    fn cpu(&self) -> usize {
        percpu::index()
    }

    fn symbols(&self) -> Option<&trace::symtab::SymbolTable<'_>> {
        crate::symbols::table()
    }

    #[inline(always)]
    fn now(&self) -> u64 {
        clock::now_ns()
    }

    fn cycles(&self) -> u64 {
        crate::arch::rdtsc()
    }

    fn jiffies(&self) -> u64 {
        clock::now_ns() / (1_000_000_000 / crate::timer::HZ)
    }

    #[inline(always)]
    fn light_barrier(&self) {
        membarrier::light();
    }

    fn heavy_barrier(&self) {
        barrier::all_cpus();
    }

    fn may_wait(&self) -> bool {
        // Alone, the boot CPU waits for no one, interrupts on or off.
        irq::may_wait() || (crate::smp::online() == 1 && !irq::in_handler())
    }

    fn has_keys(&self) -> bool {
        trace::event::key::KEYED && crate::keys::ready()
    }

    fn set_key(&self, event: &'static trace::event::EventDescriptor, armed: bool) {
        crate::keys::set(event, armed);
    }

    fn patch_functions(&self, changes: &[(usize, bool)]) -> Result<(), &'static str> {
        functions::patch(changes)
    }

    fn time_irqs_off(&self, on: bool) {
        irq::time_irqs_off(on);
    }

    #[inline(always)]
    fn context(&self) -> Context {
        let off = if irq::irqs_off() { Context::IRQS_OFF_BIT } else { 0 };
        Context::from_bits(irq::running_code() | off)
    }

    fn dump(&self, cpu: Option<usize>) -> bool {
        DUMP.get().is_some_and(|dump| dump(cpu))
    }

    fn stack_trace(&self, frames: &mut [u64]) -> usize {
        // The walk starts here (its first frame is this function's), then goes
        // through the tracer (the trigger, the dispatcher, the event's record): those
        // frames are walked too, then left out.
        let mut chain = [0u64; WALKED_FRAMES];
        let depth = crate::arch::stack::stack_trace(&mut chain);
        let chain = chain[..depth].get(1..).unwrap_or_default();
        let ours = chain.iter().take_while(|&&ret| returns_into(ret, TRACER_CODE)).count();
        // The hooks' frames (the entry hook's, the irqs-off hooks') are the tracer's
        // too. A function command's: they give way to the call the entry hook
        // hooks, which the walk cannot see (its frame does not exist yet).
        let kept = &chain[ours..];
        let hook = kept.iter().take_while(|&&ret| returns_into(ret, HOOKS)).count();
        let call = functions::hooked_call().filter(|_| hook > 0);
        let walked = call.iter().flatten().chain(&kept[hook..]);
        frames.iter_mut().zip(walked).map(|(frame, &ret)| *frame = ret).count()
    }
}
