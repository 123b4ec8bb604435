//! The panic handler: report on the emergency console (no lock, no allocation) with
//! the panicking CPU's call trace, stop the other CPUs (printing where each was),
//! dump the trace, and leave QEMU with the failure code (or, with `panic_reboot` on,
//! save `instances/boot_map` and reset the machine). A panic while reporting the
//! first one (formatting its message, say) still dumps, as the first panic, with
//! the nested one beside it; a panic during the dump gives up with a minimal message
//! (and still resets with `panic_reboot` on: `boot_map` is saved before the dump).

use crate::arch::uart::EmergencyConsole;
use crate::arch::{percpu, qemu};
use crate::smp;
use core::fmt::Write;
use core::panic::PanicInfo;
use core::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering, Ordering::Relaxed};
use trace::dump::{OtherPanic, PanicHeader};

/// Formats into a fixed buffer without allocating, keeping what fits.
struct Truncated {
    bytes: [u8; 256],
    len: usize,
}

impl Truncated {
    const fn new() -> Self {
        Truncated { bytes: [0; 256], len: 0 }
    }

    fn as_str(&self) -> &str {
        core::str::from_utf8(&self.bytes[..self.len]).unwrap_or("")
    }
}

impl Write for Truncated {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let mut end = s.len().min(self.bytes.len() - self.len);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.bytes[self.len..self.len + end].copy_from_slice(&s.as_bytes()[..end]);
        self.len += end;
        Ok(())
    }
}

/// Text a panic keeps as it goes, without a lock, for another to read what it got
/// to: the first panic's report, for a panic nested in it (on the same CPU), and a
/// second CPU's panic, for the first's report.
struct Kept {
    bytes: [AtomicU8; KEPT_BYTES],
    len: AtomicUsize,
}

/// Most bytes [`Kept`] holds: room is left in a [`Truncated`] for a note after them.
const KEPT_BYTES: usize = 216;

impl Kept {
    const fn new() -> Self {
        Kept { bytes: [const { AtomicU8::new(0) }; KEPT_BYTES], len: AtomicUsize::new(0) }
    }

    /// Appends the text it holds to `out`.
    fn copy_to(&self, out: &mut Truncated) {
        let len = self.len.load(Relaxed).min(KEPT_BYTES);
        let bytes = self.bytes[..len].iter().map(|b| b.load(Relaxed));
        // Whole characters only were kept; the copy is checked as any text is.
        let mut copy = [0u8; KEPT_BYTES];
        copy.iter_mut().zip(bytes).for_each(|(to, from)| *to = from);
        let _ = out.write_str(core::str::from_utf8(&copy[..len]).unwrap_or(""));
    }
}

impl Write for &Kept {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let len = self.len.load(Relaxed);
        let mut end = s.len().min(KEPT_BYTES - len);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.bytes[len..len + end].iter().zip(s.as_bytes()).for_each(|(b, &v)| b.store(v, Relaxed));
        self.len.store(len + end, Relaxed);
        Ok(())
    }
}

/// The first panic's location, kept before its report starts.
static FIRST_LOCATION: Kept = Kept::new();
/// The first panic's message, as far as its report formatted it.
static FIRST_MESSAGE: Kept = Kept::new();
/// Whether the first panic's message was formatted to its end.
static MESSAGE_DONE: AtomicBool = AtomicBool::new(false);

/// The first CPU that panicked while another's panic was under way (none: `usize::MAX`).
static OTHER_CPU: AtomicUsize = AtomicUsize::new(usize::MAX);
/// Its panic's location.
static OTHER_LOCATION: Kept = Kept::new();
/// Its panic's message, as far as it got before it was stopped.
static OTHER_MESSAGE: Kept = Kept::new();
/// Whether [`OTHER_MESSAGE`] was written to its end.
static OTHER_DONE: AtomicBool = AtomicBool::new(false);
/// Whether the first panic's report printed it.
static OTHER_PRINTED: AtomicBool = AtomicBool::new(false);

/// Keeps the panic of CPU `cpu`, which lost the race to another CPU's panic, for
/// that one's report (the first such CPU only): it is printed with the CPUs the
/// panic stopped (or after the dump, if it came later) and the dump carries it.
fn keep_other_panic(cpu: usize, info: &PanicInfo<'_>) {
    if OTHER_CPU.compare_exchange(usize::MAX, cpu, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
        let _ = (&OTHER_LOCATION).write_str(location(info).as_str());
        let _ = write!(&OTHER_MESSAGE, "{}", info.message());
        OTHER_DONE.store(true, Ordering::SeqCst);
    }
}

/// The panic [`keep_other_panic`] kept, as far as it got: its CPU, location and
/// message (` [cut short]` at its end if it was not written to its end).
fn other_panic() -> Option<(usize, Truncated, Truncated)> {
    let cpu = OTHER_CPU.load(Ordering::SeqCst);
    if cpu == usize::MAX {
        return None;
    }
    // Read before the copy: done, the copy is whole (the writes happened before
    // the flag was set); not done, it may be cut.
    let done = OTHER_DONE.load(Ordering::SeqCst);
    let (mut location, mut message) = (Truncated::new(), Truncated::new());
    OTHER_LOCATION.copy_to(&mut location);
    OTHER_MESSAGE.copy_to(&mut message);
    if !done {
        let _ = message.write_str(" [cut short]");
    }
    Some((cpu, location, message))
}

/// Prints the panic [`keep_other_panic`] kept, if there is one and it was not
/// printed yet.
fn print_other_panic() {
    if let Some((cpu, location, message)) = other_panic()
        && !OTHER_PRINTED.swap(true, Ordering::SeqCst)
    {
        crate::emergency_println!(
            "panic on cpu {cpu} too, at {}: {}",
            location.as_str(),
            message.as_str()
        );
    }
}

/// Writes to the emergency console and keeps a copy in [`FIRST_MESSAGE`].
struct KeepingConsole;

impl Write for KeepingConsole {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let _ = (&FIRST_MESSAGE).write_str(s);
        EmergencyConsole.write_str(s)
    }
}

/// Where the panic path is; a panic's behaviour depends on it.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Stage {
    /// No panic yet.
    Running = 0,
    /// Reporting the panic (formatting it may itself panic).
    Reporting = 1,
    /// Writing the trace dump.
    Dumping = 2,
}

static STAGE: AtomicU8 = AtomicU8::new(Stage::Running as u8);

/// The CPU that owns the panic.
static OWNER: AtomicUsize = AtomicUsize::new(usize::MAX);

fn location(info: &PanicInfo<'_>) -> Truncated {
    let mut location = Truncated::new();
    if let Some(at) = info.location() {
        let _ = write!(location, "{}:{}:{}", at.file(), at.line(), at.column());
    }
    location
}

/// Most frames a panic's call trace shows.
const CALL_TRACE_FRAMES: usize = 24;

/// Prints where a fatal exception struck `cpu` (`RIP: function+0xoffset`), then the
/// CPU's call chain, innermost first, a ` => frame` line each, as Linux's oops does:
/// named with the symbols the image carries, else addresses. Through an exception
/// the chain goes on in the code that faulted (see `arch::stack::stack_trace`); it
/// stops at the end of the stack the panic runs on.
///
/// A CPU that faulted also records the chain from where the fault struck
/// (`ftrace:kernel_stack` in the top-level instance), as the CPUs the panic stops
/// do.
fn print_call_trace(cpu: usize) {
    let mut out = EmergencyConsole;
    let fault = crate::arch::stack::fault_ip(cpu);
    if let Some(ip) = fault {
        let _ = crate::symbols::write_rip(&mut out, ip);
    }
    let mut frames = [0u64; CALL_TRACE_FRAMES];
    let depth = crate::arch::stack::stack_trace(&mut frames);
    let chain = &frames[..depth];
    crate::emergency_println!("Call Trace:");
    let _ = crate::symbols::write_frames(&mut out, chain.iter().copied());
    if let (Some(from), Some(tracer)) =
        (fault.and_then(|ip| chain.iter().position(|&f| f == ip)), crate::tracing::tracer())
    {
        tracer.record_stack(&chain[from..]);
    }
}

/// Prints where the panic's NMI stopped each other CPU, as Linux's NMI backtraces
/// do: `RIP:` the address it interrupted, then its callers, a ` => frame` line each.
fn print_other_cpus(cpu: usize) {
    print_other_panic();
    for other in (0..smp::online()).filter(|&other| other != cpu) {
        if smp::backtrace(other).next().is_some() {
            crate::emergency_println!("NMI backtrace for cpu {other}:");
            let _ = crate::symbols::write_chain(&mut EmergencyConsole, smp::backtrace(other));
        }
    }
}

/// With the stack tracer on, prints the deepest kernel stack it saw, as its
/// `stack_trace` file shows it: after a stack overflow, the chain that came closest.
fn print_stack_max() {
    let Some(tracer) = crate::tracing::tracer().filter(|t| t.stack_tracer()) else { return };
    crate::emergency_println!("Deepest kernel stack the stack tracer saw (stack_trace):");
    let written = tracer.write_stack_max_now(&mut EmergencyConsole, crate::symbols::table());
    if written != Ok(true) {
        crate::emergency_println!("  (not shown: it was being stored when the kernel stopped)");
    }
}

/// Stops the other CPUs (once), writes the dump of `panic` (with another CPU's
/// panic beside it, if one came), leaves QEMU.
fn stop_dump_and_exit(panic: PanicHeader<'_>) -> ! {
    STAGE.store(Stage::Dumping as u8, Ordering::SeqCst);
    let others = smp::online() - 1;
    if others > 0 {
        let stopped = smp::stop_other_cpus();
        crate::emergency_println!("panic: stopped {stopped} of {others} other CPU(s)");
        print_other_cpus(panic.cpu);
    }
    // What this CPU recorded since the panic began (its call trace, the stop
    // IPI) is published.
    if let Some(tracer) = crate::tracing::tracer() {
        tracer.seal_cpu();
    }
    if crate::persist::panic_reboot() {
        crate::persist::panic_save();
    }
    let other = other_panic();
    let other = other.as_ref().map(|(cpu, location, message)| OtherPanic {
        cpu: *cpu,
        message: message.as_str(),
        location: location.as_str(),
    });
    crate::dump::panic_dump(PanicHeader { other, ..panic });
    // A panic on another CPU after they were printed (one the stop did not reach).
    print_other_panic();
    leave()
}

/// The panic path's end: a reset with `panic_reboot` on (the trace was saved),
/// otherwise QEMU's exit with the failure code.
fn leave() -> ! {
    if crate::persist::panic_reboot() {
        crate::arch::reset()
    }
    qemu::exit(qemu::ExitCode::Failure)
}

#[panic_handler]
fn panic(info: &PanicInfo<'_>) -> ! {
    x86_64::instructions::interrupts::disable();
    crate::lockup::stand_down();
    crate::tracing::functions::stop();
    // The heap's lock may be held by this code or by a CPU about to be stopped.
    crate::memory::heap::stop_waiting();
    let cpu = percpu::index();
    let first = STAGE.compare_exchange(
        Stage::Running as u8,
        Stage::Reporting as u8,
        Ordering::SeqCst,
        Ordering::SeqCst,
    );
    match first {
        Ok(_) => {
            OWNER.store(cpu, Ordering::SeqCst);
            // A live dump or a `trace` read holding writes off, on this CPU or one
            // about to be stopped, never ends: the stacks the panic records go in.
            // Nor does a write the panic interrupted on this CPU: the seal leaves it
            // out now, so that what the panic records next is published by the
            // seal before the dump.
            if let Some(tracer) = crate::tracing::tracer() {
                tracer.release_holds();
                tracer.seal_cpu();
            }
        }
        // Another CPU panics at the same time: it stops this one, and reports this
        // panic with the CPUs it stopped.
        Err(_) if OWNER.load(Ordering::SeqCst) != cpu => {
            keep_other_panic(cpu, info);
            crate::arch::halt_forever()
        }
        Err(stage) if stage == Stage::Reporting as u8 => {
            // Reporting the first panic panicked (formatting its message, say):
            // report this one plainly, and dump the first with this one beside it.
            let nested = location(info);
            let nested_message = info.message().as_str().unwrap_or("(message not shown)");
            let mut first = Truncated::new();
            FIRST_LOCATION.copy_to(&mut first);
            let mut message = Truncated::new();
            FIRST_MESSAGE.copy_to(&mut message);
            if !MESSAGE_DONE.load(Relaxed) {
                let _ = message.write_str("[formatting the message panicked]");
            }
            crate::emergency_println!(
                "\nnested panic on cpu {cpu} at {}: {nested_message}\n\
                 (while reporting the panic at {}; the dump reports that one)",
                nested.as_str(),
                first.as_str()
            );
            stop_dump_and_exit(PanicHeader {
                cpu,
                message: message.as_str(),
                location: first.as_str(),
                nested: Some((nested_message, nested.as_str())),
                other: None,
            });
        }
        Err(_) => {
            // The dump itself panicked: give up with a minimal message (with
            // `panic_reboot` on, the trace was saved before the dump began).
            crate::emergency_println!("\npanic while saving or dumping the trace; giving up");
            leave();
        }
    }
    // Kept before anything of the report that may panic: a nested panic reads them.
    let location = location(info);
    let _ = (&FIRST_LOCATION).write_str(location.as_str());
    crate::emergency_println!("\nKERNEL PANIC on cpu {cpu}: panicked at {}:", location.as_str());
    let _ = write!(KeepingConsole, "{}", info.message());
    MESSAGE_DONE.store(true, Relaxed);
    let _ = EmergencyConsole.write_str("\n");
    print_call_trace(cpu);
    print_stack_max();
    let mut message = Truncated::new();
    FIRST_MESSAGE.copy_to(&mut message);
    stop_dump_and_exit(PanicHeader {
        cpu,
        message: message.as_str(),
        location: location.as_str(),
        nested: None,
        other: None,
    })
}
