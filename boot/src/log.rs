//! The serial log `report` reads: a line at a time, each line's start only, and a
//! log that is not a regular file (a pipe) held in memory up to a bound.

use std::io::{BufRead, BufReader};
use std::path::Path;

/// The most of a LOG that is not a regular file `report` holds in memory.
pub const MAX_HELD_LOG: u64 = 256 << 20;

/// The serial log `report` reads, twice: a regular file is read from disk each time;
/// anything else (a pipe: `/dev/stdin`, `<(...)`) can be read only once, so it is
/// read into memory, at most [`MAX_HELD_LOG`] bytes.
pub struct Log<'a> {
    /// Where it is.
    path: &'a Path,
    /// What was read of it, if it is not a regular file.
    held: Option<Vec<u8>>,
}

impl<'a> Log<'a> {
    /// The log at `path`: a regular file as it is, anything else read now.
    pub fn open(path: &'a Path) -> Result<Self, String> {
        use std::io::Read;
        let read_error = |e: std::io::Error| format!("{}: {e}", path.display());
        if std::fs::metadata(path).map_err(read_error)?.is_file() {
            return Ok(Log { path, held: None });
        }
        let mut held = Vec::new();
        let file = std::fs::File::open(path).map_err(read_error)?;
        file.take(MAX_HELD_LOG + 1).read_to_end(&mut held).map_err(read_error)?;
        if held.len() as u64 > MAX_HELD_LOG {
            return Err(format!(
                "{}: a LOG that is not a regular file (a pipe) is held in memory, and this \
                 one is longer than {} MiB: save it to a file and give that",
                path.display(),
                MAX_HELD_LOG >> 20
            ));
        }
        Ok(Log { path, held: Some(held) })
    }

    /// Calls `each` with every line of the log (invalid UTF-8 replaced), reading one
    /// line at a time, each cut to [`MAX_LINE`] bytes; stops at its first error.
    pub fn for_each_line(
        &self,
        mut each: impl FnMut(&str) -> Result<(), String>,
    ) -> Result<(), String> {
        use std::io::Read;
        let read_error = |e: std::io::Error| format!("{}: {e}", self.path.display());
        let mut lines: Box<dyn BufRead> = match &self.held {
            None => Box::new(BufReader::new(std::fs::File::open(self.path).map_err(read_error)?)),
            Some(bytes) => Box::new(&bytes[..]),
        };
        let mut line = Vec::new();
        loop {
            line.clear();
            let read = lines.by_ref().take(MAX_LINE).read_until(b'\n', &mut line);
            if read.map_err(read_error)? == 0 {
                return Ok(());
            }
            if line.last() != Some(&b'\n') {
                skip_line(&mut lines).map_err(read_error)?;
            }
            each(&String::from_utf8_lossy(&line))?;
        }
    }
}

/// Longest start of a log's line `report` reads, in bytes: a dump's lines are
/// shorter than a kilobyte; the rest of a longer line is skipped, not held.
pub const MAX_LINE: u64 = 1 << 16;

/// Reads past the end of the line `lines` is in, keeping nothing.
fn skip_line(lines: &mut dyn BufRead) -> std::io::Result<()> {
    loop {
        let buf = lines.fill_buf()?;
        if buf.is_empty() {
            return Ok(());
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(end) => {
                lines.consume(end + 1);
                return Ok(());
            }
            None => {
                let len = buf.len();
                lines.consume(len);
            }
        }
    }
}
