//! The shell's line editor: printable input with echo, backspace, Ctrl-C (abandon the
//! line), Ctrl-U (clear it), CR/LF/CRLF line ends, a bounded length, and escape
//! sequences (arrow keys and the like) consumed without garbling the line.

/// Longest line the shell accepts, in bytes.
pub const MAX_LINE: usize = 256;

/// What a byte of input amounted to.
#[derive(Debug, PartialEq, Eq)]
pub enum Input<'a> {
    /// Nothing to act on yet.
    Pending,
    /// A complete line.
    Line(&'a str),
    /// The line was abandoned with Ctrl-C.
    Cancelled,
    /// The line exceeded [`MAX_LINE`]; it was discarded.
    TooLong,
}

/// Where in an escape sequence the editor is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Escape {
    None,
    /// After ESC.
    Start,
    /// Inside a CSI (`ESC [`) or SS3 (`ESC O`) sequence, waiting for its final byte.
    Sequence,
}

/// A line being typed.
pub struct LineEditor {
    bytes: [u8; MAX_LINE],
    len: usize,
    overflowed: bool,
    escape: Escape,
    after_cr: bool,
}

impl LineEditor {
    /// An empty line.
    pub const fn new() -> Self {
        Self {
            bytes: [0; MAX_LINE],
            len: 0,
            overflowed: false,
            escape: Escape::None,
            after_cr: false,
        }
    }

    /// Takes one byte of input, writing its echo to `echo`.
    pub fn feed(&mut self, byte: u8, echo: &mut impl core::fmt::Write) -> Input<'_> {
        let after_cr = core::mem::replace(&mut self.after_cr, byte == b'\r');
        match self.escape {
            // A control byte aborts a half-received escape sequence and counts as
            // itself, as on a terminal, so Ctrl-C always gets through.
            Escape::Start | Escape::Sequence if byte < 0x20 => self.escape = Escape::None,
            Escape::Start => {
                self.escape =
                    if matches!(byte, b'[' | b'O') { Escape::Sequence } else { Escape::None };
                return Input::Pending;
            }
            Escape::Sequence => {
                if (0x40..=0x7e).contains(&byte) {
                    self.escape = Escape::None;
                }
                return Input::Pending;
            }
            Escape::None => {}
        }
        match byte {
            b'\n' if after_cr => Input::Pending,
            b'\r' | b'\n' => {
                let _ = echo.write_str("\n");
                let (len, overflowed) = (self.len, self.overflowed);
                self.len = 0;
                self.overflowed = false;
                if overflowed {
                    return Input::TooLong;
                }
                // Only printable ASCII is ever stored, so this cannot fail.
                Input::Line(core::str::from_utf8(&self.bytes[..len]).unwrap_or(""))
            }
            0x03 => {
                let _ = echo.write_str("^C\n");
                self.len = 0;
                self.overflowed = false;
                Input::Cancelled
            }
            0x15 => {
                for _ in 0..self.len {
                    let _ = echo.write_str("\x08 \x08");
                }
                self.len = 0;
                self.overflowed = false;
                Input::Pending
            }
            0x08 | 0x7f => {
                if self.len > 0 {
                    self.len -= 1;
                    let _ = echo.write_str("\x08 \x08");
                }
                Input::Pending
            }
            0x1b => {
                self.escape = Escape::Start;
                Input::Pending
            }
            0x20..=0x7e => {
                if self.len < MAX_LINE {
                    self.bytes[self.len] = byte;
                    self.len += 1;
                    let _ = echo.write_char(char::from(byte));
                } else {
                    self.overflowed = true;
                    let _ = echo.write_char('\x07');
                }
                Input::Pending
            }
            _ => Input::Pending,
        }
    }
}
