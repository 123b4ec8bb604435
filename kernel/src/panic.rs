//! The panic handler: report on the emergency console (no lock, no allocation), then
//! leave QEMU with the failure code. A panic while panicking gives up at once.

use crate::arch::{percpu, qemu};
use crate::smp;
use core::fmt::Write;
use core::panic::PanicInfo;
use core::sync::atomic::{AtomicBool, Ordering};

static PANICKING: AtomicBool = AtomicBool::new(false);

/// Whether a panic is in progress (the heap then never waits for its lock).
pub fn in_progress() -> bool {
    PANICKING.load(Ordering::Relaxed)
}

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

#[panic_handler]
fn panic(info: &PanicInfo<'_>) -> ! {
    x86_64::instructions::interrupts::disable();
    if PANICKING.swap(true, Ordering::Relaxed) {
        crate::emergency_println!("\nnested panic: {}", info.message());
        qemu::exit(qemu::ExitCode::Failure);
    }
    let cpu = percpu::index();
    crate::emergency_println!("\nKERNEL PANIC on cpu {cpu}: {info}");
    let others = smp::online() - 1;
    if others > 0 {
        let stopped = smp::stop_other_cpus();
        crate::emergency_println!("panic: stopped {stopped} of {others} other CPU(s)");
    }
    let mut message = Truncated::new();
    let _ = write!(message, "{}", info.message());
    let mut location = Truncated::new();
    if let Some(at) = info.location() {
        let _ = write!(location, "{}:{}:{}", at.file(), at.line(), at.column());
    }
    crate::dump::panic_dump(cpu, message.as_str(), location.as_str());
    qemu::exit(qemu::ExitCode::Failure)
}
