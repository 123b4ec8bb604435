//! The panic handler: report on the emergency console (no lock, no allocation), then
//! leave QEMU with the failure code. A panic while panicking gives up at once.

use crate::arch::{apic, qemu};
use core::panic::PanicInfo;
use core::sync::atomic::{AtomicBool, Ordering};

static PANICKING: AtomicBool = AtomicBool::new(false);

#[panic_handler]
fn panic(info: &PanicInfo<'_>) -> ! {
    x86_64::instructions::interrupts::disable();
    if PANICKING.swap(true, Ordering::Relaxed) {
        crate::emergency_println!("\nnested panic: {}", info.message());
        qemu::exit(qemu::ExitCode::Failure);
    }
    crate::emergency_println!("\nKERNEL PANIC on cpu {}: {info}", apic::id());
    qemu::exit(qemu::ExitCode::Failure)
}
