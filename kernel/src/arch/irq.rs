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

/// Marks this CPU as running an interrupt, exception or NMI handler for as long as it
/// lives; every handler takes one first. `!Send`, like [`IrqGuard`].
pub struct HandlerGuard {
    _not_send: PhantomData<*const ()>,
}

impl HandlerGuard {
    /// Counts one more handler running on this CPU.
    #[inline(always)]
    pub fn enter() -> Self {
        let depth = &percpu::current().handler_depth;
        // Plain load and store: handlers nest like a stack, so one that interrupts
        // us between the two has restored the count before we resume; only this
        // CPU touches it.
        depth.store(depth.load(Relaxed) + 1, Relaxed);
        Self { _not_send: PhantomData }
    }
}

impl Drop for HandlerGuard {
    #[inline(always)]
    fn drop(&mut self) {
        let depth = &percpu::current().handler_depth;
        depth.store(depth.load(Relaxed) - 1, Relaxed);
    }
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
