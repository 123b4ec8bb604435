//! Leaving QEMU with a verdict through the `isa-debug-exit` device (iobase 0xf4).
//! QEMU exits with status `(code << 1) | 1`; the host runner maps that back.

/// The kernel's verdict as seen by the host runner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ExitCode {
    /// Orderly power-off (`poweroff`): QEMU exits with 33.
    Success = 0x10,
    /// Panic or fatal exception: QEMU exits with 35.
    Failure = 0x11,
}

/// Exits QEMU with `code`. Halts if the debug-exit device is absent (real hardware).
pub fn exit(code: ExitCode) -> ! {
    // SAFETY: port 0xf4 is QEMU's isa-debug-exit device; writing it ends the VM and
    // touches no memory. On a machine without the device the write is ignored.
    unsafe { super::port::outb(0xf4, code as u8) };
    super::halt_forever()
}
