//! The text of ftrace's `trace` file: its header and one line per record, in
//! ftrace's default layout, shared by the kernel's tracefs and the host tool.
//!
//! ```text
//! # tracer: nop
//! #
//! # entries-in-buffer/entries-written: 2/2   #P:2
//! #
//! #                                _-----=> irqs-off/BH-disabled
//! #                               / _----=> need-resched
//! #                              | / _---=> hardirq/softirq
//! #                              || / _--=> preempt-depth
//! #                              ||| / _-=> migrate-disable
//! #                              |||| /     delay
//! #           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
//! #              | |         |   |||||     |         |
//!           <idle>-0       [001] d.h1.    69.267965: irq_handler_entry: vector=48
//!            shell-1       [000] .....    70.000012: tracing_mark_write: hello
//! ```
//!
//! Records carry no context of their own, so the context is derived while reading,
//! oldest first, by [`ContextTracker`]: between a CPU's `irq:irq_handler_entry` and
//! `irq:irq_handler_exit` records the CPU is in a hard interrupt (nested entries
//! count the depth); `irq:nmi` is written in an NMI; anything else runs in thread
//! context. The boot CPU's thread is the kernel's console shell (`shell-1`), the
//! other CPUs' their idle loop (`<idle>-0`), as in this project's kernel.

use core::fmt::{self, Write};

/// Writes ftrace's `trace` header: the tracer (`nop`), the entries in the buffer
/// and written, the CPU count and the column legend.
pub fn write_header(out: &mut dyn Write, entries: u64, written: u64, cpus: usize) -> fmt::Result {
    out.write_str("# tracer: nop\n#\n")?;
    writeln!(out, "# entries-in-buffer/entries-written: {entries}/{written}   #P:{cpus}\n#")?;
    out.write_str(LEGEND)
}

/// The column legend of the header.
const LEGEND: &str = "\
#                                _-----=> irqs-off/BH-disabled
#                               / _----=> need-resched
#                              | / _---=> hardirq/softirq
#                              || / _--=> preempt-depth
#                              ||| / _-=> migrate-disable
#                              |||| /     delay
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
#              | |         |   |||||     |         |
";

/// What a CPU was running when it wrote a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    /// Thread context (interrupts enabled).
    Thread,
    /// A hard interrupt handler, `depth` interrupts deep (1: not nested).
    Irq {
        /// Interrupt handlers open on the CPU.
        depth: u8,
    },
    /// A non-maskable interrupt, over `depth` open interrupt handlers.
    Nmi {
        /// Interrupt handlers open on the CPU when the NMI arrived.
        depth: u8,
    },
}

impl Context {
    /// The task column: name and id.
    fn task(self, cpu: usize) -> (&'static str, u32) {
        match self {
            Context::Thread if cpu == 0 => ("shell", 1),
            Context::Thread => ("<idle>", 0),
            Context::Irq { .. } => ("<irq>", 0),
            Context::Nmi { .. } => ("<nmi>", 0),
        }
    }

    /// ftrace's five flag characters: irqs-off, need-resched, hardirq/NMI,
    /// nesting depth (hex, `.` for none), migrate-disable.
    pub fn flags(self) -> [char; 5] {
        let digit = |depth: u8| match depth {
            0 => '.',
            d => char::from_digit(u32::from(d.min(15)), 16).unwrap_or('f'),
        };
        match self {
            Context::Thread => ['.'; 5],
            Context::Irq { depth } => ['d', '.', 'h', digit(depth), '.'],
            Context::Nmi { depth: 0 } => ['d', '.', 'z', '1', '.'],
            Context::Nmi { depth } => ['d', '.', 'Z', digit(depth.saturating_add(1)), '.'],
        }
    }
}

/// Derives each record's [`Context`] from the interrupt entry and exit records of
/// its CPU, fed in each CPU's order (see the module documentation).
#[derive(Clone, Debug, Default)]
pub struct ContextTracker {
    /// Open interrupt handlers per CPU (a map: CPU numbers read from a damaged
    /// dump may be anything).
    depth: alloc::collections::BTreeMap<usize, u8>,
}

impl ContextTracker {
    /// A tracker with no interrupt open on any CPU.
    pub fn new() -> Self {
        Self::default()
    }

    /// The context of CPU `cpu`'s next record, an event `system:name`; `lost`
    /// events before it on that CPU forget what was open.
    pub fn next(&mut self, cpu: usize, system: &str, name: &str, lost: u64) -> Context {
        let depth = self.depth.entry(cpu).or_insert(0);
        if lost > 0 {
            *depth = 0;
        }
        match (system, name) {
            ("irq", "irq_handler_entry") => {
                *depth = depth.saturating_add(1);
                Context::Irq { depth: *depth }
            }
            ("irq", "irq_handler_exit") if *depth > 0 => {
                let context = Context::Irq { depth: *depth };
                *depth -= 1;
                context
            }
            ("irq", "irq_handler_exit") => Context::Irq { depth: 1 },
            ("irq", "nmi") => Context::Nmi { depth: *depth },
            _ if *depth > 0 => Context::Irq { depth: *depth },
            _ => Context::Thread,
        }
    }
}

/// The name a record's event is shown under, as in Linux: the event's name without
/// its system, `tracing_mark_write` for the `trace_marker` event, and none for the
/// `trace_marker_raw` event (`ftrace:raw_data`), whose text follows the timestamp.
pub fn event_name<'a>(system: &str, name: &'a str) -> Option<&'a str> {
    match (system, name) {
        ("ftrace", "print") => Some("tracing_mark_write"),
        ("ftrace", "raw_data") => None,
        _ => Some(name),
    }
}

/// Writes `ns` as ftrace's timestamp: seconds, then microseconds (or, with
/// `nanoseconds`, nanoseconds).
pub fn write_timestamp(out: &mut dyn Write, ns: u64, nanoseconds: bool) -> fmt::Result {
    let (secs, sub) = (ns / 1_000_000_000, ns % 1_000_000_000);
    match nanoseconds {
        true => write!(out, "{secs:5}.{sub:09}"),
        false => write!(out, "{secs:5}.{:06}", sub / 1000),
    }
}

/// One record to show as a line.
#[derive(Clone, Copy, Debug)]
pub struct Line<'a> {
    /// The CPU that wrote it.
    pub cpu: usize,
    /// Its timestamp (ns).
    pub ts: u64,
    /// What the CPU was running.
    pub context: Context,
    /// The event's name (see [`event_name`]); `None`: the body follows the
    /// timestamp directly.
    pub name: Option<&'a str>,
    /// Events lost on this CPU just before it.
    pub lost: u64,
}

/// Writes a record as ftrace's line, `TASK-PID [CPU] FLAGS TIMESTAMP: NAME: BODY`,
/// preceded by `CPU:N [LOST M EVENTS]` if events were lost before it; `body` writes
/// the event's fields (nothing written: no `: ` after the name).
pub fn write_line(
    out: &mut dyn Write,
    line: &Line<'_>,
    nanoseconds: bool,
    body: impl FnOnce(&mut dyn Write) -> fmt::Result,
) -> fmt::Result {
    if line.lost > 0 {
        writeln!(out, "CPU:{} [LOST {} EVENTS]", line.cpu, line.lost)?;
    }
    let (task, pid) = line.context.task(line.cpu);
    let flags: [char; 5] = line.context.flags();
    write!(out, "{task:>16}-{pid:<7} [{:03}] ", line.cpu)?;
    flags.iter().try_for_each(|&c| out.write_char(c))?;
    out.write_char(' ')?;
    write_timestamp(out, line.ts, nanoseconds)?;
    out.write_str(": ")?;
    match line.name {
        Some(name) => {
            out.write_str(name)?;
            body(&mut BodyStart { out, started: false })?;
        }
        None => body(out)?,
    }
    writeln!(out)
}

/// Writes `: ` before the first text of a body, so an empty body leaves none.
struct BodyStart<'a> {
    out: &'a mut dyn Write,
    started: bool,
}

impl Write for BodyStart<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if !self.started && !s.is_empty() {
            self.started = true;
            self.out.write_str(": ")?;
        }
        self.out.write_str(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;

    fn line(context: Context, cpu: usize, body: &str, nanoseconds: bool) -> String {
        let mut out = String::new();
        let line =
            Line { cpu, ts: 69_267_965_338, context, name: Some("irq_handler_entry"), lost: 0 };
        write_line(&mut out, &line, nanoseconds, |o| o.write_str(body)).unwrap();
        out
    }

    #[test]
    fn lines_have_ftrace_columns() {
        assert_eq!(
            line(Context::Irq { depth: 1 }, 1, "vector=48", false),
            "           <irq>-0       [001] d.h1.    69.267965: irq_handler_entry: vector=48\n"
        );
        assert_eq!(
            line(Context::Thread, 0, "", true),
            "           shell-1       [000] .....    69.267965338: irq_handler_entry\n"
        );
        assert_eq!(
            line(Context::Nmi { depth: 2 }, 3, "x", false),
            "           <nmi>-0       [003] d.Z3.    69.267965: irq_handler_entry: x\n"
        );
    }

    #[test]
    fn context_follows_interrupt_nesting_per_cpu() {
        let mut t = ContextTracker::new();
        assert_eq!(t.next(1, "timer", "tick", 0), Context::Thread);
        assert_eq!(t.next(1, "irq", "irq_handler_entry", 0), Context::Irq { depth: 1 });
        assert_eq!(t.next(0, "shell", "command", 0), Context::Thread);
        assert_eq!(t.next(1, "irq", "irq_handler_entry", 0), Context::Irq { depth: 2 });
        assert_eq!(t.next(1, "irq", "nmi", 0), Context::Nmi { depth: 2 });
        assert_eq!(t.next(1, "irq", "irq_handler_exit", 0), Context::Irq { depth: 2 });
        assert_eq!(t.next(1, "timer", "tick", 0), Context::Irq { depth: 1 });
        assert_eq!(t.next(1, "irq", "irq_handler_exit", 0), Context::Irq { depth: 1 });
        assert_eq!(t.next(1, "timer", "tick", 0), Context::Thread);
        // An exit whose entry was overwritten is still an interrupt.
        assert_eq!(t.next(1, "irq", "irq_handler_exit", 0), Context::Irq { depth: 1 });
        assert_eq!(t.next(1, "irq", "irq_handler_entry", 0), Context::Irq { depth: 1 });
        // Lost events forget what was open.
        assert_eq!(t.next(1, "timer", "tick", 3), Context::Thread);
        assert_eq!(t.next(usize::MAX, "irq", "irq_handler_entry", 0), Context::Irq { depth: 1 });
    }

    #[test]
    fn header_and_names_are_linux_ones() {
        let mut out = String::new();
        write_header(&mut out, 2, 5, 4).unwrap();
        assert!(
            out.starts_with(
                "# tracer: nop\n#\n# entries-in-buffer/entries-written: 2/5   #P:4\n#\n"
            )
        );
        assert!(out.contains("#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION\n"));
        assert_eq!(event_name("ftrace", "print"), Some("tracing_mark_write"));
        assert_eq!(event_name("ftrace", "raw_data"), None);
        assert_eq!(event_name("irq", "nmi"), Some("nmi"));
    }
}
