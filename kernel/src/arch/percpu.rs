//! Per-CPU data, found through the GS base: each CPU's GS points at its own
//! [`PerCpu`]. Everything in it is immutable after start-up or atomic, so any context
//! (thread, IRQ, NMI, panic) on any CPU may read it.

use super::MAX_CPUS;
use core::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};
use x86_64::VirtAddr;
use x86_64::registers::model_specific::GsBase;

/// One CPU's data. `index` must stay the first field: [`index`] reads it at `gs:[0]`.
#[repr(C, align(64))]
pub struct PerCpu {
    index: usize,
    apic_id: AtomicU32,
    /// Timer interrupts taken on this CPU.
    pub ticks: AtomicU64,
    /// When the last timer interrupt arrived (ns since boot).
    pub last_tick_ns: AtomicU64,
    /// A request posted by another CPU, taken by the call IPI handler (0: none).
    pub request: AtomicU32,
    /// Work posted by another CPU, run by this CPU's idle loop in thread context.
    /// Never touched by interrupt handlers, so a plain spin lock is enough.
    pub work: spin::Mutex<Option<fn()>>,
    /// Posted work this CPU has finished (only this CPU's idle loop adds to it).
    pub works_done: AtomicU64,
    /// Interrupt, exception and NMI handlers this CPU is running (nested); only this
    /// CPU touches it (`irq::HandlerGuard`).
    pub(super) handler_depth: AtomicU32,
    /// Whether this CPU's thread is doing work (the boot CPU's shell, or work posted
    /// to an application processor) rather than idling; only this CPU writes it
    /// (`irq::set_busy`).
    pub(super) busy: AtomicBool,
    /// What this CPU runs now, an `irq::Running` code kept from the two above by
    /// this CPU's handlers and `irq::set_busy`; read at `gs:` by [`running`].
    pub(super) running: AtomicU8,
}

static CPUS: [PerCpu; MAX_CPUS] = {
    let mut cpus = [const {
        PerCpu {
            index: 0,
            apic_id: AtomicU32::new(0),
            ticks: AtomicU64::new(0),
            last_tick_ns: AtomicU64::new(0),
            request: AtomicU32::new(0),
            work: spin::Mutex::new(None),
            works_done: AtomicU64::new(0),
            handler_depth: AtomicU32::new(0),
            busy: AtomicBool::new(false),
            running: AtomicU8::new(0),
        }
    }; MAX_CPUS];
    let mut i = 0;
    while i < MAX_CPUS {
        cpus[i].index = i;
        i += 1;
    }
    cpus
};

/// Points this CPU's GS base at `CPUS[index]`. The very first thing each CPU does.
pub fn init_this_cpu(index: usize, apic_id: u32) {
    let cpu = &CPUS[index];
    cpu.apic_id.store(apic_id, Ordering::Relaxed);
    GsBase::write(VirtAddr::from_ptr(cpu));
}

/// Index of the CPU running this code (0 is the boot CPU). Callable from any context
/// once `init_this_cpu` has run on this CPU; code never migrates between CPUs.
#[inline(always)]
pub fn index() -> usize {
    let index: usize;
    // SAFETY: GS points at this CPU's `PerCpu` (set first thing on every CPU), whose
    // first field is the immutable `index`; the load has no other effect.
    unsafe {
        core::arch::asm!("mov {}, gs:[0]", out(reg) index, options(nostack, readonly, preserves_flags))
    };
    index
}

/// This CPU's `running` code, read through GS (no index, no bounds check): one load,
/// callable from any context once `init_this_cpu` has run on this CPU.
#[inline(always)]
pub(super) fn running() -> u8 {
    let code: u8;
    // SAFETY: GS points at this CPU's `PerCpu` (set first thing on every CPU); the
    // offset is its `running` field, an `AtomicU8` only this CPU stores to, and the
    // byte load has no other effect.
    unsafe {
        core::arch::asm!(
            "mov {}, byte ptr gs:[{offset}]",
            out(reg_byte) code,
            offset = const core::mem::offset_of!(PerCpu, running),
            options(nostack, readonly, preserves_flags)
        )
    };
    code
}

/// This CPU's data.
pub fn current() -> &'static PerCpu {
    &CPUS[index()]
}

/// CPU `index`'s data.
pub fn get(index: usize) -> Option<&'static PerCpu> {
    CPUS.get(index)
}

impl PerCpu {
    /// This CPU's local APIC id.
    pub fn apic_id(&self) -> u32 {
        self.apic_id.load(Ordering::Relaxed)
    }
}
