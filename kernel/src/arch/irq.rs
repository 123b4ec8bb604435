//! Interrupt masking with proof: an [`IrqGuard`] exists only while interrupts are off
//! on the current CPU.

use core::marker::PhantomData;
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
