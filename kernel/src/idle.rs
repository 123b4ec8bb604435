//! What a CPU's thread does when it has nothing to do: the idle work registered by
//! drivers (work their interrupt handlers deferred to thread context), then a wait
//! for the next interrupt.

use crate::arch::hooks::Hooks;
use crate::arch::irq;

/// Work for idle time, run by every CPU's idle loop and by the shell's wait for input.
pub static WORK: Hooks<fn(), 2> = Hooks::new();

/// Runs the idle work, then waits for the next interrupt unless `busy` says there is
/// something to do (checked with interrupts off: see
/// [`irq::wait_for_interrupt_unless`]).
pub fn wait_unless(busy: impl FnOnce() -> bool) {
    WORK.for_each(|work| work());
    irq::wait_for_interrupt_unless(busy);
}
