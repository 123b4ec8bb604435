//! COM1, the console. Output goes through a lock shared with interrupt handlers;
//! input arrives by interrupt into a bounded queue that the shell drains. (The
//! emergency writer, which takes no lock, is `arch::uart`'s.)

use crate::arch::uart::{Crlf, Uart, com1};
use crate::arch::{idt, irq};
use crate::sync::IrqMutex;
use core::fmt::{self, Write};
use uart_16550::spec::registers::{IER, LSR};
use uart_16550::{BaudRate, Config};

/// Bytes of input buffered. When the queue is full the receive interrupt is turned
/// off, so further input waits in the UART (and QEMU holds it back) instead of being
/// dropped; it is turned on again once the shell has read half the queue.
const RX_CAPACITY: usize = 4096;

static PORT: IrqMutex<Uart> = IrqMutex::new(com1());
static RX: IrqMutex<RxQueue> = IrqMutex::new(RxQueue::new());

/// Received bytes not yet read by the shell.
struct RxQueue {
    bytes: [u8; RX_CAPACITY],
    head: usize,
    len: usize,
    /// The receive interrupt is off because the queue filled up.
    throttled: bool,
    /// Receive overruns the UART reported (input lost in the hardware).
    overruns: u64,
}

impl RxQueue {
    const fn new() -> Self {
        Self { bytes: [0; RX_CAPACITY], head: 0, len: 0, throttled: false, overruns: 0 }
    }

    /// Appends a byte; the caller checks there is room.
    fn push(&mut self, byte: u8) {
        self.bytes[(self.head + self.len) % RX_CAPACITY] = byte;
        self.len += 1;
    }

    fn pop(&mut self) -> Option<u8> {
        if self.len == 0 {
            return None;
        }
        let byte = self.bytes[self.head];
        self.head = (self.head + 1) % RX_CAPACITY;
        self.len -= 1;
        Some(byte)
    }
}

/// Programs COM1 (115200 8N1, FIFOs on) with the receive interrupt enabled. The
/// interrupt is routed to a CPU separately (see `main`).
pub fn init() {
    let config =
        Config { baud_rate: BaudRate::Baud115200, interrupts: IER::DATA_READY, ..Config::DEFAULT };
    if PORT.lock().init(config).is_err() {
        crate::emergency_println!("serial: COM1 did not initialise; input may not work");
    }
    if let Err(error) = idt::SERIAL.add(on_receive_interrupt) {
        crate::emergency_println!("serial: {error}; input will not work");
    }
}

/// The COM1 interrupt: moves the bytes the UART holds into the input queue, as many
/// as fit; when it is full, turns the receive interrupt off (see [`RX_CAPACITY`]).
fn on_receive_interrupt() {
    let mut port = PORT.lock();
    let mut rx = RX.lock();
    while rx.len < RX_CAPACITY {
        let Ok(byte) = port.try_receive_byte() else { break };
        trace::emit!(crate::events::SERIAL_RX, byte);
        rx.push(byte);
    }
    if rx.len == RX_CAPACITY && !rx.throttled {
        port.disable_interrupts(IER::DATA_READY);
        rx.throttled = true;
    }
    if port.lsr().contains(LSR::OVERRUN_ERROR) {
        rx.overruns += 1;
        trace::emit!(crate::events::SERIAL_OVERRUN, rx.overruns);
    }
}

/// Waits for and returns the next input byte, halting the CPU while there is none.
pub fn read_byte() -> u8 {
    loop {
        if let Some(byte) = try_read_byte() {
            return byte;
        }
        irq::wait_for_interrupt_unless(input_pending);
    }
}

/// Whether input is waiting.
pub fn input_pending() -> bool {
    RX.lock().len != 0
}

/// Takes the next input byte if there is one; turns the receive interrupt back on
/// once a throttled queue is half empty.
pub fn try_read_byte() -> Option<u8> {
    let (byte, resume) = {
        let mut rx = RX.lock();
        let byte = rx.pop();
        let resume = rx.throttled && rx.len <= RX_CAPACITY / 2;
        rx.throttled &= !resume;
        (byte, resume)
    };
    if resume {
        PORT.lock().enable_interrupts(IER::DATA_READY);
        // Take what waited in the UART now: it raised no interrupt while off.
        on_receive_interrupt();
    }
    byte
}

/// Whether Ctrl-C (0x03) is waiting in the input; if so, it is taken with the input
/// typed before it (as a terminal flushes type-ahead on an interrupt).
pub fn take_interrupt() -> bool {
    let mut rx = RX.lock();
    let Some(at) = (0..rx.len).find(|i| rx.bytes[(rx.head + i) % RX_CAPACITY] == 0x03) else {
        return false;
    };
    rx.head = (rx.head + at + 1) % RX_CAPACITY;
    rx.len -= at + 1;
    true
}

/// Receive overruns the UART reported (input lost in the hardware).
pub fn rx_overruns() -> u64 {
    RX.lock().overruns
}

/// Prints to the console under its lock, so lines from different CPUs do not mix.
pub fn print_fmt(args: fmt::Arguments<'_>) {
    let _ = Crlf(&mut PORT.lock()).write_fmt(args);
}

/// Panics while holding the console lock (tests that the panic path never waits for
/// it).
pub fn panic_holding_console() -> ! {
    let _console = PORT.lock();
    panic!("deliberate panic while holding the console lock")
}

/// The console as a `fmt::Write`, for code that writes piecemeal (the line editor).
pub struct Console;

impl Write for Console {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        Crlf(&mut PORT.lock()).write_str(s)
    }
}

/// Prints to the console.
#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => { $crate::serial::print_fmt(format_args!($($arg)*)) };
}

/// Prints a line to the console.
#[macro_export]
macro_rules! println {
    () => { $crate::print!("\n") };
    ($($arg:tt)*) => { $crate::serial::print_fmt(format_args!("{}\n", format_args!($($arg)*))) };
}
