//! What a CPU's thread does when it has nothing to do: wait for the next interrupt.

use crate::arch::irq;

/// Waits for the next interrupt unless `busy` says there is something to do
/// (checked with interrupts off: see [`irq::wait_for_interrupt_unless`]).
pub fn wait_unless(busy: impl FnOnce() -> bool) {
    irq::wait_for_interrupt_unless(busy);
}
