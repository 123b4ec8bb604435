//! Interrupt masking with proof: an [`IrqGuard`] exists only while interrupts are off
//! on the current CPU. And interrupt context: every handler holds a [`HandlerGuard`],
//! so code can tell whether it runs inside one ([`may_wait`]).

use super::percpu;
use core::marker::PhantomData;
use core::sync::atomic::Ordering::Relaxed;
use x86_64::instructions::interrupts;

/// Disables interrupts on this CPU for as long as it lives, then restores the state
/// it found (so guards nest). It is `!Send`: the proof is only valid on the CPU that
/// created it.
pub struct IrqGuard {
    was_enabled: bool,
    _not_send: PhantomData<*const ()>,
}

impl IrqGuard {
    /// Disables interrupts on this CPU and remembers whether they were enabled.
    #[inline]
    pub fn new() -> Self {
        let was_enabled = interrupts::are_enabled();
        interrupts::disable();
        Self { was_enabled, _not_send: PhantomData }
    }
}

impl Default for IrqGuard {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for IrqGuard {
    #[inline]
    fn drop(&mut self) {
        if self.was_enabled {
            interrupts::enable();
        }
    }
}

/// Waits for the next interrupt if `idle` says there is nothing to do. The check and
/// the `hlt` happen with interrupts off, and `sti; hlt` re-enables them atomically, so
/// a wake-up that arrives between the check and the halt is never missed.
pub fn wait_for_interrupt_unless(busy: impl FnOnce() -> bool) {
    interrupts::disable();
    if busy() {
        interrupts::enable();
    } else {
        interrupts::enable_and_hlt();
    }
}

/// What one NMI adds to a CPU's handler count (interrupts and exceptions add 1): the
/// count's low 16 bits are the interrupt handlers open, the rest the NMIs.
const NMI_UNIT: u32 = 1 << 16;

/// Marks this CPU as running an interrupt, exception or NMI handler for as long as it
/// lives; every handler takes one first. `!Send`, like [`IrqGuard`].
pub struct HandlerGuard {
    unit: u32,
    _not_send: PhantomData<*const ()>,
}

impl HandlerGuard {
    /// Counts one more interrupt or exception handler running on this CPU.
    #[inline(always)]
    pub fn enter() -> Self {
        Self::count(1)
    }

    /// Counts one more NMI handler running on this CPU.
    #[inline(always)]
    pub fn enter_nmi() -> Self {
        Self::count(NMI_UNIT)
    }

    #[inline(always)]
    fn count(unit: u32) -> Self {
        let depth = &percpu::current().handler_depth;
        // Plain load and store: handlers nest like a stack, so one that interrupts
        // us between the two has restored the count before we resume; only this
        // CPU touches it.
        depth.store(depth.load(Relaxed) + unit, Relaxed);
        Self { unit, _not_send: PhantomData }
    }
}

impl Drop for HandlerGuard {
    #[inline(always)]
    fn drop(&mut self) {
        let depth = &percpu::current().handler_depth;
        depth.store(depth.load(Relaxed) - self.unit, Relaxed);
    }
}

/// The handlers this CPU is running, as [`handlers_on`] reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handlers {
    /// Interrupt and exception handlers open (nested), NMIs not counted.
    pub irqs: u32,
    /// Whether an NMI handler is running.
    pub nmi: bool,
}

/// The handlers `cpu`, the caller's own ([`percpu::current`]), is running. Callable
/// from any context.
#[inline(always)]
pub fn handlers_on(cpu: &percpu::PerCpu) -> Handlers {
    let depth = cpu.handler_depth.load(Relaxed);
    Handlers { irqs: depth % NMI_UNIT, nmi: depth >= NMI_UNIT }
}

/// Whether interrupts are disabled on this CPU.
#[inline(always)]
pub fn irqs_off() -> bool {
    !interrupts::are_enabled()
}

/// Whether this CPU runs an interrupt, exception or NMI handler.
pub fn in_handler() -> bool {
    percpu::current().handler_depth.load(Relaxed) != 0
}

/// Whether the caller may wait for other CPUs: interrupts are enabled (so requests
/// from CPUs waiting in turn for this one are served) and it is not inside a handler.
pub fn may_wait() -> bool {
    interrupts::are_enabled() && !in_handler()
}
