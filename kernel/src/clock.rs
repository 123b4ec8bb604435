//! Monotonic time in nanoseconds since boot, from the TSC calibrated against the PIT.

use crate::arch::rdtsc;
use core::sync::atomic::{AtomicU64, Ordering};

static TSC_AT_BOOT: AtomicU64 = AtomicU64::new(0);
/// Nanoseconds per TSC tick, as a 32.32 fixed-point number.
static NS_PER_TICK_FP32: AtomicU64 = AtomicU64::new(0);
static TSC_HZ: AtomicU64 = AtomicU64::new(0);

/// Starts the clock at zero, given the TSC frequency measured at boot.
pub fn init(tsc_hz: u64) {
    let tsc_hz = tsc_hz.max(1);
    TSC_HZ.store(tsc_hz, Ordering::Relaxed);
    NS_PER_TICK_FP32
        .store(((1_000_000_000u128 << 32) / u128::from(tsc_hz)) as u64, Ordering::Relaxed);
    TSC_AT_BOOT.store(rdtsc(), Ordering::Relaxed);
}

/// Nanoseconds since `init`.
#[inline]
pub fn now_ns() -> u64 {
    let ticks = rdtsc().wrapping_sub(TSC_AT_BOOT.load(Ordering::Relaxed));
    ((u128::from(ticks) * u128::from(NS_PER_TICK_FP32.load(Ordering::Relaxed))) >> 32) as u64
}

/// Busy-waits `micros` microseconds.
pub fn delay_us(micros: u64) {
    let end = now_ns() + micros * 1000;
    while now_ns() < end {
        // Plain instructions rather than `pause`: under QEMU's instruction counting
        // (`--icount`) time is instructions, and each `pause` leaves translated code.
        for i in 0..64u32 {
            core::hint::black_box(i);
        }
    }
}

/// The TSC frequency measured at boot, in Hz.
pub fn tsc_hz() -> u64 {
    TSC_HZ.load(Ordering::Relaxed)
}
