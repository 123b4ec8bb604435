//! The latency watchdog driver (crate `latency-watchdog`), wired to the boot CPU's
//! timer.

use crate::clock;
use crate::timer::{self, Tick};
use crate::tracing::KernelPlatform;
use latency_watchdog::{Events, Watchdog};
use spin::Once;

/// A tick later than this many timer periods is an anomaly.
const THRESHOLD_PERIODS: u64 = 5;
/// Ticks recorded after an anomaly before the snapshot.
const WINDOW_TICKS: u64 = 20;
/// The kernel's events the driver records: ticks and interrupts all the time, the
/// console, the shell and the cross-CPU calls in the window after an anomaly.
const EVENTS: Events = Events {
    baseline: &[("timer", "tick"), ("irq", "*")],
    window: &[("serial", "*"), ("shell", "*"), ("smp", "*")],
};

static WATCHDOG: Once<Watchdog<KernelPlatform>> = Once::new();

/// Probes the driver once tracing is up (thread context), then hooks it to the
/// timer.
pub fn init() -> Result<(), trace::InstanceError> {
    let tracer = crate::tracing::tracer().ok_or(trace::InstanceError::NotFound)?;
    let threshold = THRESHOLD_PERIODS * 1_000_000_000 / timer::HZ;
    let watchdog = Watchdog::probe(tracer, threshold, WINDOW_TICKS, EVENTS)?;
    WATCHDOG.call_once(|| watchdog);
    if timer::TICK.add(on_tick).is_err() {
        crate::println!("latency watchdog: no room for its hook; it will not run");
    }
    Ok(())
}

/// The driver, once probed.
pub fn get() -> Option<&'static Watchdog<KernelPlatform>> {
    WATCHDOG.get()
}

/// A timer interrupt: the driver watches the boot CPU's.
fn on_tick(tick: Tick) {
    if tick.cpu == 0
        && let Some(watchdog) = WATCHDOG.get()
    {
        watchdog.on_tick(tick.count, tick.interval_ns);
    }
}

/// Makes the boot CPU's next tick late by `ms` milliseconds: interrupts off, busy.
pub fn spike(ms: u64) {
    let _irq = crate::arch::irq::IrqGuard::new();
    clock::delay_us(ms * 1000);
}
