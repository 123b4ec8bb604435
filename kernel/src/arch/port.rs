//! Port I/O for the few legacy devices the kernel programs directly.

use x86_64::instructions::port::Port;

/// Writes a byte to an I/O port.
///
/// # Safety
/// The port must belong to a device whose state the caller owns; the write must not
/// break memory safety (for example by reprogramming a DMA engine).
pub unsafe fn outb(port: u16, value: u8) {
    // SAFETY: forwarded to the caller.
    unsafe { Port::<u8>::new(port).write(value) }
}

/// Reads a byte from an I/O port.
///
/// # Safety
/// As for [`outb`]: reading some ports has side effects on the device.
pub unsafe fn inb(port: u16) -> u8 {
    // SAFETY: forwarded to the caller.
    unsafe { Port::<u8>::new(port).read() }
}
