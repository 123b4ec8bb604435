//! The panic handler: report on the emergency console (no lock, no allocation) with
//! the panicking CPU's call trace, stop the other CPUs (printing where each was),
//! dump the trace, and leave QEMU with the failure code (or, with `panic_reboot` on,
//! save `instances/boot_map` and reset the machine). A panic while reporting the
//! first one still dumps; a panic during the dump gives up with a minimal message.

use crate::arch::uart::EmergencyConsole;
use crate::arch::{percpu, qemu};
use crate::smp;
use core::fmt::Write;
use core::panic::PanicInfo;
use core::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

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

/// Stops the other CPUs (once), writes the dump, leaves QEMU.
fn stop_dump_and_exit(cpu: usize, message: &str, location: &str) -> ! {
    STAGE.store(Stage::Dumping as u8, Ordering::SeqCst);
    let others = smp::online() - 1;
    if others > 0 {
        let stopped = smp::stop_other_cpus();
        crate::emergency_println!("panic: stopped {stopped} of {others} other CPU(s)");
        print_other_cpus(cpu);
    }
    crate::dump::panic_dump(cpu, message, location);
    if crate::persist::panic_reboot() {
        crate::persist::panic_save_and_reset();
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
        Ok(_) => OWNER.store(cpu, Ordering::SeqCst),
        // Another CPU panics at the same time: it stops this one.
        Err(_) if OWNER.load(Ordering::SeqCst) != cpu => crate::arch::halt_forever(),
        Err(stage) if stage == Stage::Reporting as u8 => {
            // Reporting the first panic panicked (its message could not be
            // formatted): report this one plainly, and still dump.
            let location = location(info);
            let message = info.message().as_str().unwrap_or("(message not shown)");
            crate::emergency_println!(
                "\nnested panic on cpu {cpu} at {}: {message}",
                location.as_str()
            );
            stop_dump_and_exit(cpu, "nested panic while reporting a panic", location.as_str());
        }
        Err(_) => {
            // The dump itself panicked: give up with a minimal message.
            crate::emergency_println!("\npanic during the trace dump; halting");
            qemu::exit(qemu::ExitCode::Failure);
        }
    }
    crate::emergency_println!("\nKERNEL PANIC on cpu {cpu}: {info}");
    print_call_trace(cpu);
    print_stack_max();
    let mut message = Truncated::new();
    let _ = write!(message, "{}", info.message());
    stop_dump_and_exit(cpu, message.as_str(), location(info).as_str())
}
