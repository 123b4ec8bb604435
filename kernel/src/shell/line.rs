//! The shell's line editor: printable input with echo, a cursor moved by the left and
//! right arrows, backspace, Ctrl-W (erase the word before the cursor), Ctrl-C
//! (abandon the line), Ctrl-U (clear it), CR/LF/CRLF line ends, a bounded length,
//! history (up and down arrows), tab completion, and other escape sequences consumed
//! without garbling the line. Bytes outside printable ASCII are refused with a bell.

use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

/// Longest line the shell accepts, in bytes.
pub const MAX_LINE: usize = 256;
/// Lines kept in the history.
const HISTORY: usize = 64;

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

/// Moves the terminal's cursor `n` places left.
fn back(echo: &mut impl Write, n: usize) {
    for _ in 0..n {
        let _ = echo.write_char('\x08');
    }
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

/// A line being typed, and the lines typed before.
pub struct LineEditor {
    line: String,
    /// The cursor: a byte index into `line` (all ASCII).
    cursor: usize,
    overflowed: bool,
    escape: Escape,
    after_cr: bool,
    history: VecDeque<String>,
    /// Position while browsing the history (`history.len()`: the new line).
    browsing: usize,
    /// The new line, kept while browsing the history.
    draft: String,
    /// The line just submitted.
    submitted: String,
}

impl LineEditor {
    /// An empty line and history.
    pub fn new() -> Self {
        LineEditor {
            line: String::new(),
            cursor: 0,
            overflowed: false,
            escape: Escape::None,
            after_cr: false,
            history: VecDeque::new(),
            browsing: 0,
            draft: String::new(),
            submitted: String::new(),
        }
    }

    /// Erases the line on the terminal and shows `text` instead, the cursor at its
    /// end.
    fn replace_line(&mut self, text: String, echo: &mut impl Write) {
        let _ = echo.write_str(&self.line[self.cursor..]);
        for _ in 0..self.line.len() {
            let _ = echo.write_str("\x08 \x08");
        }
        self.line = text;
        self.cursor = self.line.len();
        let _ = echo.write_str(&self.line);
    }

    /// Removes `start..cursor` and redraws the rest of the line, the cursor at `start`.
    fn erase_before_cursor(&mut self, start: usize, echo: &mut impl Write) {
        let erased = self.cursor - start;
        if erased == 0 {
            return;
        }
        self.line.replace_range(start..self.cursor, "");
        self.cursor = start;
        let tail = &self.line[start..];
        back(echo, erased);
        let _ = write!(echo, "{tail}{:erased$}", "");
        back(echo, tail.len() + erased);
    }

    /// Inserts a printable byte at the cursor.
    fn insert(&mut self, byte: u8, echo: &mut impl Write) {
        self.line.insert(self.cursor, char::from(byte));
        let tail = &self.line[self.cursor..];
        let _ = echo.write_str(tail);
        back(echo, tail.len() - 1);
        self.cursor += 1;
    }

    /// Moves the cursor one place left or right.
    fn step(&mut self, right: bool, echo: &mut impl Write) {
        if right && self.cursor < self.line.len() {
            let _ = echo.write_str(&self.line[self.cursor..=self.cursor]);
            self.cursor += 1;
        } else if !right && self.cursor > 0 {
            let _ = echo.write_char('\x08');
            self.cursor -= 1;
        }
    }

    fn browse(&mut self, up: bool, echo: &mut impl Write) {
        let target = match up {
            true if self.browsing > 0 => self.browsing - 1,
            false if self.browsing < self.history.len() => self.browsing + 1,
            _ => return,
        };
        if self.browsing == self.history.len() {
            self.draft = self.line.clone();
        }
        self.browsing = target;
        let text =
            self.history.get(target).cloned().unwrap_or_else(|| core::mem::take(&mut self.draft));
        self.replace_line(text, echo);
    }

    fn complete(
        &mut self,
        echo: &mut impl Write,
        complete: &dyn Fn(&str) -> Vec<String>,
        prompt: &str,
    ) {
        if self.cursor != self.line.len() {
            let _ = echo.write_char('\x07');
            return;
        }
        let candidates = complete(&self.line);
        let word_start = self.line.rfind(' ').map_or(0, |i| i + 1);
        let Some(first) = candidates.first() else { return };
        let mut common = first.len();
        for candidate in &candidates[1..] {
            common = common
                .min(first.bytes().zip(candidate.bytes()).take_while(|(a, b)| a == b).count());
        }
        let typed = self.line.len() - word_start;
        let mut extension = String::from(&first[typed.min(common)..common]);
        if candidates.len() == 1 && !first.ends_with('/') {
            extension.push(' ');
        }
        if !extension.is_empty() {
            if self.line.len() + extension.len() <= MAX_LINE {
                let _ = echo.write_str(&extension);
                self.line.push_str(&extension);
                self.cursor = self.line.len();
            }
        } else if candidates.len() > 1 {
            let _ = echo.write_char('\n');
            for candidate in &candidates {
                let name = candidate
                    .rsplit_once('/')
                    .filter(|(_, n)| !n.is_empty())
                    .map_or(candidate.as_str(), |(_, n)| n);
                let _ = write!(echo, "{name}  ");
            }
            let _ = write!(echo, "\n{prompt}{}", self.line);
        }
    }

    fn finish(&mut self) {
        self.line.clear();
        self.cursor = 0;
        self.overflowed = false;
        self.browsing = self.history.len();
    }

    /// Takes one byte of input, writing its echo to `echo`; `complete` lists the
    /// completions of a line and `prompt` is shown again after listing them.
    pub fn feed(
        &mut self,
        byte: u8,
        echo: &mut impl Write,
        complete: &dyn Fn(&str) -> Vec<String>,
        prompt: &str,
    ) -> Input<'_> {
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
                    match byte {
                        b'A' => self.browse(true, echo),
                        b'B' => self.browse(false, echo),
                        b'C' => self.step(true, echo),
                        b'D' => self.step(false, echo),
                        _ => {}
                    }
                }
                return Input::Pending;
            }
            Escape::None => {}
        }
        match byte {
            b'\n' if after_cr => Input::Pending,
            b'\r' | b'\n' => {
                let _ = echo.write_str("\n");
                let overflowed = self.overflowed;
                self.submitted = core::mem::take(&mut self.line);
                self.finish();
                if overflowed {
                    return Input::TooLong;
                }
                if !self.submitted.trim().is_empty() && self.history.back() != Some(&self.submitted)
                {
                    if self.history.len() == HISTORY {
                        self.history.pop_front();
                    }
                    self.history.push_back(self.submitted.clone());
                    self.browsing = self.history.len();
                }
                Input::Line(&self.submitted)
            }
            0x03 => {
                let _ = echo.write_str("^C\n");
                self.finish();
                Input::Cancelled
            }
            0x15 => {
                self.replace_line(String::new(), echo);
                self.overflowed = false;
                Input::Pending
            }
            0x08 | 0x7f => {
                self.erase_before_cursor(self.cursor.saturating_sub(1), echo);
                Input::Pending
            }
            0x17 => {
                let before = self.line[..self.cursor].trim_end_matches(' ');
                let start = before.rfind(' ').map_or(0, |i| i + 1);
                self.erase_before_cursor(start, echo);
                Input::Pending
            }
            b'\t' => {
                self.complete(echo, complete, prompt);
                Input::Pending
            }
            0x1b => {
                self.escape = Escape::Start;
                Input::Pending
            }
            0x20..=0x7e => {
                if self.line.len() < MAX_LINE {
                    self.insert(byte, echo);
                } else {
                    self.overflowed = true;
                    let _ = echo.write_char('\x07');
                }
                Input::Pending
            }
            // Not ASCII (the shell's files and commands are ASCII): refused with a
            // bell rather than dropped unnoticed.
            0x80..=0xff => {
                let _ = echo.write_char('\x07');
                Input::Pending
            }
            _ => Input::Pending,
        }
    }
}
