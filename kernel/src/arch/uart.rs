//! COM1's registers, and an emergency writer over them that takes no lock and does
//! not allocate (panics and fatal exceptions, which may strike while the console's
//! lock is held). The console itself (`serial`) is built on [`com1`].

use core::fmt::{self, Write};
use uart_16550::Uart16550;
use uart_16550::backend::PioBackend;

/// I/O port base of COM1.
const COM1_PORT: u16 = 0x3f8;

/// A 16550 UART driven through port I/O.
pub type Uart = Uart16550<PioBackend>;

/// A handle on COM1. The console keeps one under its lock; the emergency writer
/// makes its own.
pub const fn com1() -> Uart {
    // SAFETY: 0x3f8..0x400 are COM1's registers on every PC; the console is their only
    // user apart from the emergency writer, which only polls LSR and writes THR.
    match unsafe { Uart16550::new_port(COM1_PORT) } {
        Ok(uart) => uart,
        Err(_) => panic!("COM1's port range is valid"),
    }
}

/// Formats onto a UART, turning `\n` into `\r\n` as a terminal expects.
pub struct Crlf<'a>(pub &'a mut Uart);

impl Write for Crlf<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for (i, line) in s.split('\n').enumerate() {
            if i > 0 {
                self.0.send_bytes_exact(b"\r\n");
            }
            self.0.send_bytes_exact(line.as_bytes());
        }
        Ok(())
    }
}

/// Prints through a polled COM1 writer of its own that takes no lock and does not
/// allocate. For panics and fatal exceptions only: it may interleave with other
/// output.
pub fn emergency_print_fmt(args: fmt::Arguments<'_>) {
    let _ = Crlf(&mut com1()).write_fmt(args);
}

/// The emergency console as a `fmt::Write` (see [`emergency_print_fmt`]).
pub struct EmergencyConsole;

impl Write for EmergencyConsole {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        Crlf(&mut com1()).write_str(s)
    }
}

/// Prints a line without taking the console lock (panic and exception paths).
#[macro_export]
macro_rules! emergency_println {
    ($($arg:tt)*) => {
        $crate::arch::uart::emergency_print_fmt(format_args!("{}\n", format_args!($($arg)*)))
    };
}
