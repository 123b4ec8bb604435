//! A command's output on its way to the console: through the filters of a pipeline
//! (`| head [-n N | -N]`, `| tail [-n N | -N | -n +N]`, `| grep [-v] [-c] [-e PATTERN]...
//! [PATTERN]`, `| wc -l`; `grep` takes basic regular expressions without groups,
//! [`shell_core::pattern`]), line by line as it is written, and stopped by Ctrl-C
//! between any two lines.
//!
//! A write fails once the output wants no more (Ctrl-C, or `head` has its lines), so
//! a long read stops early rather than format what nobody will see.

use crate::serial;
use alloc::collections::VecDeque;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt::{self, Write};
use shell_core::pattern::Pattern;

/// Most lines `tail -n N` keeps (its memory is bounded by N lines).
const MAX_TAIL: usize = 10_000;
/// Lines `head` and `tail` take without `-n`.
const DEFAULT_LINES: usize = 10;

/// One filter of a pipeline.
enum Stage {
    /// Passes `left` more lines, then ends the output.
    Head { left: usize },
    /// Keeps the last `keep` lines; passes them on at the end.
    Tail { keep: usize, lines: VecDeque<String> },
    /// Drops `skip` more lines, then passes every line (`tail -n +N`).
    From { skip: usize },
    /// Passes lines holding a match of one of `patterns` (or, `invert`, those
    /// without); with `count`, counts them instead and passes the count on at the end.
    Grep { patterns: Vec<Pattern>, invert: bool, count: Option<u64> },
    /// Counts lines; passes the count on at the end.
    Count { lines: u64 },
}

impl Stage {
    /// Parses one pipeline command, `NAME ARGS...`.
    fn parse(words: &[String]) -> Result<Stage, String> {
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let count = |n: &str| -> Result<usize, String> {
            n.parse().map_err(|_| alloc::format!("{}: invalid number of lines: '{n}'", words[0]))
        };
        let usage = |name: &str| match name {
            "tail" => "tail: usage: tail [-n N | -N | -n +N]".to_string(),
            _ => alloc::format!("{name}: usage: {name} [-n N | -N]"),
        };
        match words.as_slice() {
            [name @ ("head" | "tail"), args @ ..] => {
                // `-n N`, `-nN` or `-N`, as coreutils take them.
                let n = match args {
                    [] => None,
                    ["-n", n] => Some(*n),
                    [flag] => Some(
                        flag.strip_prefix("-n")
                            .or(flag.strip_prefix('-'))
                            .filter(|n| !n.is_empty())
                            .ok_or_else(|| usage(name))?,
                    ),
                    _ => return Err(usage(name)),
                };
                // `tail -n +N`, as coreutils: from line N on (`+0` as `+1`); N digits
                // alone (a number's own `+` is not taken twice).
                if let Some(plus) = n.filter(|n| *name == "tail" && n.starts_with('+')) {
                    let from = &plus[1..];
                    if from.is_empty() || !from.bytes().all(|b| b.is_ascii_digit()) {
                        return Err(alloc::format!("tail: invalid number of lines: '{plus}'"));
                    }
                    return Ok(Stage::From { skip: count(from)?.saturating_sub(1) });
                }
                let lines = n.map_or(Ok(DEFAULT_LINES), count)?;
                match *name {
                    "head" => Ok(Stage::Head { left: lines }),
                    _ if lines <= MAX_TAIL => {
                        Ok(Stage::Tail { keep: lines, lines: VecDeque::new() })
                    }
                    _ => Err(alloc::format!("tail: at most {MAX_TAIL} lines")),
                }
            }
            ["grep", args @ ..] => grep_stage(args),
            ["wc", "-l"] => Ok(Stage::Count { lines: 0 }),
            ["wc", ..] => Err("wc: usage: wc -l".into()),
            [name, ..] => Err(alloc::format!(
                "{name}: not a pipe command (pipes take head, tail, grep, wc -l)"
            )),
            [] => Err("syntax error: empty command in a pipe".into()),
        }
    }
}

/// `grep`'s usage.
const GREP_USAGE: &str = "grep: usage: grep [-v] [-c] [-e PATTERN]... [PATTERN]";

/// Parses `grep`'s arguments: flags `-v` (invert), `-c` (count), together or apart
/// (`-vc`), `-e PATTERN` (or `-ePATTERN`) any number of times, then the pattern
/// unless `-e` gave one; `--` ends the flags.
fn grep_stage(args: &[&str]) -> Result<Stage, String> {
    let (mut invert, mut count, mut patterns) = (false, false, Vec::new());
    let mut rest = args;
    while let [flag, tail @ ..] = rest {
        if *flag == "--" {
            rest = tail;
            break;
        }
        let Some(letters) = flag.strip_prefix('-').filter(|l| !l.is_empty()) else { break };
        rest = tail;
        for (i, letter) in letters.char_indices() {
            match letter {
                'v' => invert = true,
                'c' => count = true,
                'e' => {
                    let pattern = match &letters[i + 1..] {
                        "" => {
                            let [pattern, tail @ ..] = rest else { return Err(GREP_USAGE.into()) };
                            rest = tail;
                            *pattern
                        }
                        attached => attached,
                    };
                    patterns.push(grep(pattern)?);
                    break;
                }
                _ => return Err(alloc::format!("grep: unknown option -{letter} ({GREP_USAGE})")),
            }
        }
    }
    match rest {
        [] if !patterns.is_empty() => {}
        [pattern] if patterns.is_empty() => patterns.push(grep(pattern)?),
        _ => return Err(GREP_USAGE.into()),
    }
    Ok(Stage::Grep { patterns, invert, count: count.then_some(0) })
}

/// `grep`'s pattern, compiled, or the error naming where it breaks a rule.
fn grep(pattern: &str) -> Result<Pattern, String> {
    Pattern::parse(pattern).map_err(|e| alloc::format!("grep: '{pattern}': {e}"))
}

/// Why the output ended before the command did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// Ctrl-C was typed.
    Interrupted,
    /// A `head` had all its lines.
    Satisfied,
}

/// A command's output: a `fmt::Write` that feeds the pipeline, then the console.
pub struct Output {
    stages: Vec<Stage>,
    /// The line being written (not yet ended by a newline).
    partial: String,
    stopped: Option<Stopped>,
}

impl Output {
    /// Output through the pipeline `commands` (each `NAME ARGS...`), or an error
    /// naming what is wrong with one of them.
    pub fn new(commands: &[Vec<String>]) -> Result<Self, String> {
        let stages = commands.iter().map(|words| Stage::parse(words)).collect::<Result<_, _>>()?;
        Ok(Output { stages, partial: String::new(), stopped: None })
    }

    /// Ends the output as Ctrl-C does (for a reader that saw the key itself).
    pub fn interrupt(&mut self) {
        self.stopped = Some(Stopped::Interrupted);
    }

    /// Why the output stopped early, if it did.
    pub fn stopped(&self) -> Option<Stopped> {
        self.stopped
    }

    /// Passes `line` through the stages from `from` on; false once the output wants
    /// no more.
    fn pass(&mut self, line: &str, from: usize) -> bool {
        if self.stopped.is_some() {
            return false;
        }
        // A head that gives its last line ends the output after it, so the writer
        // stops before formatting another line.
        let mut last = false;
        let mut deliver = true;
        for stage in &mut self.stages[from..] {
            match stage {
                Stage::Head { left: 0 } => {
                    self.stopped = Some(Stopped::Satisfied);
                    return false;
                }
                Stage::Head { left } => {
                    *left -= 1;
                    last |= *left == 0;
                }
                Stage::Tail { keep, lines } => {
                    if *keep > 0 {
                        if lines.len() == *keep {
                            lines.pop_front();
                        }
                        lines.push_back(line.into());
                    }
                    deliver = false;
                }
                Stage::From { skip } => {
                    if *skip > 0 {
                        *skip -= 1;
                        deliver = false;
                    }
                }
                Stage::Grep { patterns, invert, count } => {
                    deliver = patterns.iter().any(|p| p.matches(line)) != *invert;
                    if let Some(n) = count {
                        *n += u64::from(deliver);
                        deliver = false;
                    }
                }
                Stage::Count { lines } => {
                    *lines += 1;
                    deliver = false;
                }
            }
            if !deliver {
                break;
            }
        }
        if deliver {
            let _ = writeln!(serial::Console, "{line}");
        }
        if last {
            self.stopped = Some(Stopped::Satisfied);
        }
        true
    }

    /// Ends the output: writes an unterminated last line, and what `tail`, `wc -l`
    /// and `grep -c` kept, through the stages after them.
    pub fn finish(&mut self) {
        if !self.partial.is_empty() {
            let line = core::mem::take(&mut self.partial);
            self.pass(&line, 0);
        }
        if self.stopped == Some(Stopped::Interrupted) {
            return;
        }
        for index in 0..self.stages.len() {
            // A head that ended the read does not stop what later stages kept.
            self.stopped = None;
            let kept: Vec<String> = match &mut self.stages[index] {
                Stage::Tail { lines, .. } => lines.drain(..).collect(),
                Stage::Count { lines } | Stage::Grep { count: Some(lines), .. } => {
                    [lines.to_string()].into()
                }
                _ => continue,
            };
            for line in kept {
                if !self.pass(&line, index + 1) {
                    break;
                }
            }
        }
    }
}

impl Write for Output {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if self.stopped.is_some() {
            return Err(fmt::Error);
        }
        let mut rest = s;
        while let Some(end) = rest.find('\n') {
            if serial::take_interrupt() {
                self.stopped = Some(Stopped::Interrupted);
                return Err(fmt::Error);
            }
            self.partial.push_str(&rest[..end]);
            let mut line = core::mem::take(&mut self.partial);
            let more = self.pass(&line, 0);
            line.clear();
            self.partial = line;
            if !more {
                return Err(fmt::Error);
            }
            rest = &rest[end + 1..];
        }
        // An unterminated piece waits for the rest of its line (bounded by the
        // longest line a writer produces: one record or one file line).
        self.partial.push_str(rest);
        Ok(())
    }
}
