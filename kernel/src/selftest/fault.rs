//! Fault injection for the panic path's tests: a panic in interrupt context.

use crate::timer::{self, Tick};
use core::sync::atomic::{AtomicBool, Ordering};

/// Set by `panic irq`: the boot CPU's next tick panics (in interrupt context).
static PANIC_ON_TICK: AtomicBool = AtomicBool::new(false);

/// Adds the tick hook that carries out [`panic_on_next_tick`].
pub fn init() -> Result<(), &'static str> {
    timer::TICK.add(on_tick)
}

/// Makes the boot CPU's next timer interrupt panic.
pub fn panic_on_next_tick() {
    PANIC_ON_TICK.store(true, Ordering::Relaxed);
}

fn on_tick(tick: Tick) {
    if tick.cpu == 0 && PANIC_ON_TICK.swap(false, Ordering::Relaxed) {
        panic!("deliberate panic in the timer interrupt (tick {})", tick.count);
    }
}
