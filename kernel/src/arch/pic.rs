//! The legacy 8259 PICs: remapped away from the exception vectors and masked, since
//! the kernel uses the local APIC and the I/O APIC.

use super::port::outb;

/// First vector the PICs would use after remapping (spurious IRQ 7 arrives at +7).
pub const PIC_BASE_VECTOR: u8 = 0x20;

/// Remaps both PICs to vectors 0x20..0x30 and masks every line.
pub fn disable() {
    // SAFETY: ports 0x20/0x21/0xa0/0xa1 are the PICs, which nothing else programs; the
    // ICW sequence only changes which vectors they would raise, and the final mask
    // silences them.
    unsafe {
        outb(0x20, 0x11);
        outb(0xa0, 0x11);
        outb(0x21, PIC_BASE_VECTOR);
        outb(0xa1, PIC_BASE_VECTOR + 8);
        outb(0x21, 4);
        outb(0xa1, 2);
        outb(0x21, 1);
        outb(0xa1, 1);
        outb(0x21, 0xff);
        outb(0xa1, 0xff);
    }
}
