//! The 8254 PIT, used once at boot as a known-frequency reference to calibrate the TSC
//! and the local APIC timer. Channel 2 is polled (no interrupt).

use super::port::{inb, outb};

/// The PIT's input clock in Hz.
const PIT_HZ: u64 = 1_193_182;

/// Loop iterations between two reads of the PIT's output while waiting for it.
const POLL_SPINS: u32 = 1000;

/// Busy-waits `micros` microseconds (at most 54 ms) on PIT channel 2, calling `start`
/// when the countdown begins and returning `start`'s value with `end()`'s.
pub fn measure<T>(micros: u64, start: impl FnOnce() -> T, end: impl FnOnce() -> T) -> (T, T) {
    let count = (PIT_HZ * micros / 1_000_000).clamp(1, 0xffff) as u16;
    // SAFETY: port 0x61 (gate/speaker), 0x43 (PIT command) and 0x42 (channel 2) belong
    // to the PIT, which only this boot-time calibration uses. The speaker stays off.
    unsafe {
        let gate = inb(0x61);
        outb(0x61, (gate & !0x02) | 0x01); // gate on, speaker off
        outb(0x43, 0b1011_0000); // channel 2, lobyte/hibyte, mode 0, binary
        outb(0x42, count as u8);
        outb(0x42, (count >> 8) as u8);
        // Restart the count by toggling the gate.
        let gate = inb(0x61) & !0x01;
        outb(0x61, gate);
        outb(0x61, gate | 0x01);
    }
    let a = start();
    // SAFETY: reading port 0x61 has no side effect; bit 5 is channel 2's output.
    while unsafe { inb(0x61) } & 0x20 == 0 {
        // About a microsecond between reads, without `pause`: under QEMU's
        // instruction counting the wait is a count of instructions, and a read of
        // the port or a `pause` leaves translated code, which made it take seconds.
        for i in 0..POLL_SPINS {
            core::hint::black_box(i);
        }
    }
    let b = end();
    (a, b)
}
