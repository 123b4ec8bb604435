//! The periodic tick from each CPU's local APIC timer.

use crate::arch::apic;
use core::sync::atomic::{AtomicU64, Ordering};

/// Timer interrupts per second on each CPU.
pub const HZ: u64 = 100;

static TICKS: AtomicU64 = AtomicU64::new(0);

/// Starts this CPU's periodic tick, given its APIC timer rate from calibration.
pub fn start(apic_timer_hz: u64) {
    apic::start_periodic_timer(u32::try_from(apic_timer_hz / HZ).unwrap_or(u32::MAX));
}

/// The timer interrupt handler's work.
pub fn on_tick() {
    TICKS.fetch_add(1, Ordering::Relaxed);
}

/// Timer interrupts taken since boot.
pub fn ticks() -> u64 {
    TICKS.load(Ordering::Relaxed)
}
