//! The panic handler: report on the emergency console (no lock, no allocation), then
//! leave QEMU with the failure code. A panic while panicking gives up at once.

use crate::arch::{percpu, qemu};
use crate::smp;
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
    let cpu = percpu::index();
    crate::emergency_println!("\nKERNEL PANIC on cpu {cpu}: {info}");
    let others = smp::online() - 1;
    if others > 0 {
        let stopped = smp::stop_other_cpus();
        crate::emergency_println!("panic: stopped {stopped} of {others} other CPU(s)");
    }
    qemu::exit(qemu::ExitCode::Failure)
}
