//! The latency watchdog driver (crate `latency-watchdog`), wired to the boot CPU's
//! timer and to thread context.

use crate::tracing::KernelPlatform;
use crate::{clock, timer};
use latency_watchdog::Watchdog;
use spin::Once;

/// A tick later than this many timer periods is an anomaly.
const THRESHOLD_PERIODS: u64 = 5;
/// Ticks recorded after an anomaly before the snapshot.
const WINDOW_TICKS: u64 = 20;

static WATCHDOG: Once<Watchdog<KernelPlatform>> = Once::new();

/// Probes the driver once tracing is up (thread context).
pub fn init() -> Result<(), trace::InstanceError> {
    let tracer = crate::tracing::tracer().ok_or(trace::InstanceError::NotFound)?;
    let threshold = THRESHOLD_PERIODS * 1_000_000_000 / timer::HZ;
    let watchdog = Watchdog::probe(tracer, threshold, WINDOW_TICKS)?;
    WATCHDOG.call_once(|| watchdog);
    Ok(())
}

/// The driver, once probed.
pub fn get() -> Option<&'static Watchdog<KernelPlatform>> {
    WATCHDOG.get()
}

/// The boot CPU's timer interrupt.
pub fn on_tick(tick: u64, interval_ns: u64) {
    if let Some(watchdog) = WATCHDOG.get() {
        watchdog.on_tick(tick, interval_ns);
    }
}

/// Thread-context work, from idle loops.
pub fn run_deferred() {
    if let Some(watchdog) = WATCHDOG.get().filter(|w| w.has_deferred_work()) {
        watchdog.run_deferred();
    }
}

/// Makes the boot CPU's next tick late by `ms` milliseconds: interrupts off, busy.
pub fn spike(ms: u64) {
    let _irq = crate::arch::irq::IrqGuard::new();
    clock::delay_us(ms * 1000);
}
