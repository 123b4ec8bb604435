//! The MC146818 real-time clock's periodic interrupt: a tick that goes on whatever
//! the CPUs do, which the hard lockup detector takes as an NMI. Nothing else uses
//! the RTC, so its two ports (0x70, the register index; 0x71, the data) are this
//! module's alone.

use super::port::{inb, outb};

/// The RTC's ISA interrupt line.
pub const IRQ: u8 = 8;
/// The periodic interrupt's period in ms: rate 15 of register A, 32768 Hz >> 14.
pub const PERIOD_MS: u64 = 500;

const INDEX: u16 = 0x70;
const DATA: u16 = 0x71;
/// Register A: the divider and, in its low 4 bits, the periodic rate.
const REG_A: u8 = 0x0A;
/// Register B: the interrupt enables (bit 6: periodic).
const REG_B: u8 = 0x0B;
/// Register C: the interrupt flags; reading it acknowledges them.
const REG_C: u8 = 0x0C;
const RATE_2_HZ: u8 = 15;
const PERIODIC_ENABLE: u8 = 1 << 6;

fn read(register: u8) -> u8 {
    // SAFETY: ports 0x70/0x71 belong to the RTC, which only this module programs;
    // the index's bit 7 stays clear, so NMIs stay enabled. The two accesses are not
    // interleaved with another's: `start_periodic` runs once at boot before the
    // interrupt is routed, and `acknowledge` only in the NMI handler of the one CPU
    // the interrupt goes to (NMIs do not nest).
    unsafe {
        outb(INDEX, register);
        inb(DATA)
    }
}

fn write(register: u8, value: u8) {
    // SAFETY: as in `read`; registers A and B only select the periodic rate and the
    // interrupt enables, nothing that touches memory.
    unsafe {
        outb(INDEX, register);
        outb(DATA, value);
    }
}

/// Starts the periodic interrupt, every [`PERIOD_MS`]. Once, at boot, before the
/// interrupt is routed to a CPU.
pub fn start_periodic() {
    write(REG_A, (read(REG_A) & 0xF0) | RATE_2_HZ);
    write(REG_B, read(REG_B) | PERIODIC_ENABLE);
    acknowledge();
}

/// Acknowledges the periodic interrupt, so that the RTC raises the next one. Only
/// from the NMI handler of the CPU the interrupt is routed to.
pub fn acknowledge() {
    read(REG_C);
}
