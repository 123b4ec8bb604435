//! The shell's line editor: printable input with echo, a cursor moved by the left and
//! right arrows, backspace, Ctrl-W (erase the word before the cursor), Ctrl-C
//! (abandon the line), Ctrl-U (clear it), CR/LF/CRLF line ends, a bounded length,
//! history (up and down arrows), tab completion, and other escape sequences consumed
//! without garbling the line. Bytes outside printable ASCII are refused with a bell.

use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

/// Longest line the shell accepts, in bytes: a page, as a write to a tracefs file, so
/// that the longest filter or trigger fits with the `echo '...' > FILE` around it.
pub const MAX_LINE: usize = 4096;
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

impl Default for LineEditor {
    fn default() -> Self {
        Self::new()
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use alloc::vec;

    /// Feeds `bytes` to `editor`, returning what the last byte amounted to (as an
    /// owned line) and the echo.
    fn feed(editor: &mut LineEditor, bytes: &[u8]) -> (Option<String>, String) {
        let mut echo = String::new();
        let complete = |line: &str| -> Vec<String> {
            ["cat", "cd", "echo"]
                .iter()
                .filter(|c| c.starts_with(line))
                .map(|c| c.to_string())
                .collect()
        };
        let mut last = None;
        for &byte in bytes {
            last = match editor.feed(byte, &mut echo, &complete, "$ ") {
                Input::Line(line) => Some(line.to_string()),
                Input::Cancelled => Some("<cancelled>".into()),
                Input::TooLong => Some("<too long>".into()),
                Input::Pending => None,
            };
        }
        (last, echo)
    }

    fn line(bytes: &[u8]) -> Option<String> {
        feed(&mut LineEditor::new(), bytes).0
    }

    #[test]
    fn typing_and_editing() {
        assert_eq!(line(b"uptime\r").as_deref(), Some("uptime"));
        assert_eq!(line(b"uptx\x7fime\n").as_deref(), Some("uptime"));
        // Left twice, insert, right, end of line.
        assert_eq!(line(b"ac\x1b[D\x1b[Db\r").as_deref(), Some("bac"));
        assert_eq!(line(b"ac\x1b[Db\x1b[Cd\r").as_deref(), Some("abcd"));
        // Ctrl-W erases the word before the cursor; Ctrl-U the line.
        assert_eq!(line(b"echo hello\x17world\r").as_deref(), Some("echo world"));
        assert_eq!(line(b"junk\x15ls\r").as_deref(), Some("ls"));
        assert_eq!(line(b"cat tr\x03").as_deref(), Some("<cancelled>"));
    }

    #[test]
    fn crlf_is_one_line_end_and_bytes_beyond_ascii_ring_the_bell() {
        let mut editor = LineEditor::new();
        assert_eq!(feed(&mut editor, b"a\r").0.as_deref(), Some("a"));
        // The LF of a CRLF submits nothing more.
        assert_eq!(feed(&mut editor, b"\n").0, None);
        let (got, echo) = feed(&mut editor, "é\r".as_bytes());
        assert_eq!(got.as_deref(), Some(""));
        assert!(echo.contains('\x07'), "{echo:?}");
    }

    #[test]
    fn history_and_completion() {
        let mut editor = LineEditor::new();
        feed(&mut editor, b"first\r");
        feed(&mut editor, b"second\r");
        assert_eq!(feed(&mut editor, b"\x1b[A\x1b[A\r").0.as_deref(), Some("first"));
        assert_eq!(feed(&mut editor, b"\x1b[A\x1b[B\r").0.as_deref(), Some(""));
        assert_eq!(feed(&mut editor, b"ec\t\r").0.as_deref(), Some("echo "));
        // Two candidates: listed, the line kept.
        let (got, echo) = feed(&mut editor, b"c\t\r");
        assert_eq!(got.as_deref(), Some("c"));
        assert!(echo.contains("cat") && echo.contains("cd"), "{echo:?}");
    }

    #[test]
    fn a_line_over_the_limit_is_discarded() {
        let mut bytes = vec![b'x'; MAX_LINE + 1];
        bytes.push(b'\r');
        assert_eq!(line(&bytes).as_deref(), Some("<too long>"));
        let mut bytes = vec![b'y'; MAX_LINE];
        bytes.push(b'\r');
        assert_eq!(line(&bytes).map(|l| l.len()), Some(MAX_LINE));
    }
}
