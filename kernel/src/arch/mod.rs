//! Everything specific to x86_64: descriptor tables, interrupt controllers, timers,
//! port I/O. This is the kernel's unsafe boundary: code outside `arch` uses the safe
//! functions exported here.

/// Assembly that pushes the nine registers the C ABI lets a callee clobber (rax,
/// rcx, rdx, rsi, rdi, r8-r11), for the naked entries that call Rust.
macro_rules! push_scratch {
    () => {
        "push rax\npush rcx\npush rdx\npush rsi\npush rdi\npush r8\npush r9\npush r10\npush r11"
    };
}

/// Assembly that pops what [`push_scratch!`] pushed.
macro_rules! pop_scratch {
    () => {
        "pop r11\npop r10\npop r9\npop r8\npop rdi\npop rsi\npop rdx\npop rcx\npop rax"
    };
}

use {pop_scratch, push_scratch};

pub mod apic;
pub mod fault;
pub mod ftrace;
pub mod gdt;
pub mod hooks;
pub mod idt;
pub mod irq;
pub mod membarrier;
pub mod patch;
pub mod percpu;
pub mod pic;
pub mod pit;
pub mod port;
pub mod qemu;
pub mod rtc;
pub mod smp;
pub mod stack;
pub mod trace_platform;
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

/// Resets the machine, keeping its memory (a warm reset): the keyboard controller's
/// reset line (port 0x64, command 0xFE), then, if that did nothing, a triple fault.
pub fn reset() -> ! {
    x86_64::instructions::interrupts::disable();
    // SAFETY: 0xFE to the 8042 controller's command port pulses the CPU reset line;
    // no memory is touched, and nothing is expected to run after it.
    unsafe { port::outb(0x64, 0xfe) };
    for _ in 0..1_000_000 {
        core::hint::spin_loop();
    }
    static EMPTY: x86_64::structures::DescriptorTablePointer =
        x86_64::structures::DescriptorTablePointer { limit: 0, base: x86_64::VirtAddr::zero() };
    // SAFETY: loading an empty IDT makes the next exception a triple fault, which
    // resets the CPU: the intended effect. Interrupts are off, so only the `int3`
    // below raises one.
    unsafe {
        x86_64::instructions::tables::lidt(&EMPTY);
        core::arch::asm!("int3");
    }
    halt_forever()
}
