//! Everything specific to x86_64: descriptor tables, interrupt controllers, timers,
//! port I/O. This is the kernel's unsafe boundary: code outside `arch` uses the safe
//! functions exported here.

pub mod apic;
pub mod fault;
pub mod gdt;
pub mod hooks;
pub mod idt;
pub mod irq;
pub mod membarrier;
pub mod percpu;
pub mod pic;
pub mod pit;
pub mod port;
pub mod qemu;
pub mod smp;
pub mod stack;
pub mod uart;

/// Reads the CPU's time-stamp counter.
#[inline(always)]
pub fn rdtsc() -> u64 {
    // SAFETY: `rdtsc` has no side effects and is available on every x86_64 CPU.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Stops this CPU for good: interrupts off, then `hlt` forever.
pub fn halt_forever() -> ! {
    loop {
        x86_64::instructions::interrupts::disable();
        x86_64::instructions::hlt();
    }
}

/// The most CPUs the kernel brings up; per-CPU tables are sized by it.
pub const MAX_CPUS: usize = 16;
