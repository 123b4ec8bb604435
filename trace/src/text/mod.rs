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
//!            <irq>-0       [001] d.h1.    69.267965: irq_handler_entry: irq=48
//!            shell-1       [000] .....    70.000012: tracing_mark_write: hello
//! ```
//!
//! The task and flags columns come from the [`Context`] each record keeps: what the
//! CPU was running and whether interrupts were off when it wrote the record.

mod graph;

pub(crate) use graph::write_graph_duration;
pub use graph::{GraphCall, GraphLine, GraphLines, GraphRecord, write_graph_line};

use crate::context::{Activity, Context};
use crate::ring::Clock;
use core::fmt::{self, Write};

/// A string from a dump as a line of text shows it: its control characters (C0,
/// DEL and C1, [`char::is_control`]) but the tab as the escape `\u{HEX}`
/// ([`char::escape_unicode`], the form the trace.dat writer gives the characters
/// libtraceevent does not parse), the rest as it is, so that none of it ends the
/// line, forges another or drives a terminal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Controls<'a>(pub &'a str);

impl fmt::Display for Controls<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        while let Some(at) = rest.find(|c: char| c.is_control() && c != '\t') {
            f.write_str(&rest[..at])?;
            let c = rest[at..].chars().next().unwrap_or_default();
            write!(f, "{}", c.escape_unicode())?;
            rest = &rest[at + c.len_utf8()..];
        }
        f.write_str(rest)
    }
}

/// A writer that passes what it is given on to its own with control characters
/// escaped as [`Controls`] shows them.
pub struct EscapeControls<W>(pub W);

impl<W: Write> Write for EscapeControls<W> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        write!(self.0, "{}", Controls(s))
    }
}

/// What a dump's text says under a CPU's statistics about writes it could not read
/// ([`crate::ring::RingStats`]'s `stopped`, `unreadable` and `unpublished`): a line
/// each for those that are not zero. The kernel's dump and `report` print the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnreadWrites {
    /// The CPU.
    pub cpu: usize,
    /// Writes a panic stopped before they finished, left out by its seal.
    pub stopped: u64,
    /// Bytes the seal could not read.
    pub unreadable: u64,
    /// Bytes reserved by writes not all finished, unsealed.
    pub unpublished: u64,
}

impl fmt::Display for UnreadWrites {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cpu = self.cpu;
        match self.stopped {
            0 => {}
            1 => {
                writeln!(f, "# cpu{cpu}: 1 write the panic stopped before it finished is left out")?
            }
            n => writeln!(
                f,
                "# cpu{cpu}: {n} writes the panic stopped before they finished are left out"
            )?,
        }
        if self.unreadable > 0 {
            writeln!(
                f,
                "# cpu{cpu}: {} bytes reserved since the last records published are left \
                 out: a write the panic stopped had not stored its header",
                self.unreadable
            )?;
        }
        if self.unpublished > 0 {
            writeln!(
                f,
                "# cpu{cpu}: a write in progress (or stopped) holds {} bytes: it and the \
                 records written after it cannot be read",
                self.unpublished
            )?;
        }
        Ok(())
    }
}

/// How the `trace` files lay out their header and lines: ftrace's display
/// options (an instance's `options/`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The clock the timestamps come from (`trace_clock`): one in nanoseconds
    /// prints seconds, a count prints as it is.
    pub clock: Clock,
    /// Timestamps in nanoseconds (`nanoseconds`); microseconds otherwise.
    pub nanoseconds: bool,
    /// The task, CPU, flags and timestamp columns, and the header's counts and
    /// legend (`context-info`); without them a line is its event alone.
    pub context_info: bool,
    /// The flags column and its legend (`irq-info`).
    pub irq_info: bool,
    /// A function tracer line's caller, `<-caller` (`print-parent`).
    pub print_parent: bool,
    /// A function tracer line's addresses with their offsets in their functions,
    /// `name+0xoffset` (`sym-offset`).
    pub sym_offset: bool,
    /// A function tracer line's addresses also as numbers, `name <address>`
    /// (`sym-addr`).
    pub sym_addr: bool,
    /// A `function_graph` line's timestamp, first (`funcgraph-abstime`).
    pub graph_abstime: bool,
    /// A `function_graph` line's CPU column (`funcgraph-cpu`).
    pub graph_cpu: bool,
    /// A `function_graph` line's task column (`funcgraph-proc`).
    pub graph_proc: bool,
    /// A `function_graph` line's duration column (`funcgraph-duration`).
    pub graph_duration: bool,
    /// The duration's mark for a long call, `+` to `$` (`funcgraph-overhead`).
    pub graph_overhead: bool,
    /// A return's function, `} /* name */` (`funcgraph-tail`).
    pub graph_tail: bool,
    /// In a buffer that overwrote records, a line where each CPU's records start,
    /// after the first record (`annotate`; see [`write_cpu_started`]).
    pub annotate: bool,
    /// A message (a `trace_marker` text, a `printk!` line) is its text alone,
    /// without the columns or the event's name (`printk-msg-only`).
    pub printk_msg_only: bool,
    /// The latency format (`latency-format`): the header tells the latency the
    /// buffer holds, and each line's columns are `cmd-pid CPU FLAGS time(delay)`,
    /// its time counted from a start in µs and marked with the gap to the next
    /// record (see [`Delay`]).
    pub latency_format: bool,
}

impl Layout {
    /// ftrace's defaults: timestamps in microseconds, every column, callers
    /// shown, functions by name alone; `function_graph` lines with the CPU and the
    /// duration, marked, without the timestamp or the task. Returns name their
    /// function (ftrace's `funcgraph-tail` is off by default).
    pub const DEFAULT: Layout = Layout {
        clock: Clock::Local,
        nanoseconds: false,
        context_info: true,
        irq_info: true,
        print_parent: true,
        sym_offset: false,
        sym_addr: false,
        graph_abstime: false,
        graph_cpu: true,
        graph_proc: false,
        graph_duration: true,
        graph_overhead: true,
        graph_tail: true,
        annotate: true,
        printk_msg_only: false,
        latency_format: false,
    };
}

/// What a `trace` file's header says of the buffer below it.
#[derive(Clone, Copy)]
pub struct Header<'a> {
    /// The current tracer's name.
    pub tracer: &'a str,
    /// Records in the buffer.
    pub entries: u64,
    /// Records written into it.
    pub written: u64,
    /// CPUs (`#P`).
    pub cpus: usize,
    /// The kernel's release, which the latency format names.
    pub release: &'a str,
    /// The latency the buffer holds (the irqsoff tracer's window), which the
    /// latency format tells; `None`: 0 us on CPU 0, as ftrace's for a buffer no
    /// latency tracer filled.
    pub latency: Option<LatencyReport<'a>>,
}

/// A latency tracer's report, as the latency format's header tells it.
#[derive(Clone, Copy)]
pub struct LatencyReport<'a> {
    /// How long (ns).
    pub ns: u64,
    /// On which CPU.
    pub cpu: usize,
    /// In which task.
    pub task: Task,
    /// Where it started (a code location).
    pub started: &'a dyn fmt::Display,
    /// Where it ended.
    pub ended: &'a dyn fmt::Display,
}

/// Writes ftrace's `trace` header: the current tracer's name; with `context-info`,
/// the entries in the buffer and written, the CPU count and the column legend
/// (without the flags' with `irq-info` off). With `latency-format`, ftrace's
/// latency header instead, if the buffer holds records.
pub fn write_header(out: &mut dyn Write, header: &Header<'_>, layout: &Layout) -> fmt::Result {
    let Header { tracer, entries, written, cpus, latency, .. } = *header;
    write!(out, "# tracer: {tracer}\n#\n")?;
    // Without the latency format's header, a latency is told in three lines.
    if let Some(l) = latency.filter(|_| !(layout.latency_format && layout.context_info)) {
        writeln!(out, "# irqsoff latency: {} us, CPU#{}", l.ns / 1000, l.cpu)?;
        writeln!(out, "#  => started at: {}\n#  => ended at:   {}\n#", l.started, l.ended)?;
    }
    if !layout.context_info || (layout.latency_format && entries == 0) {
        return Ok(());
    }
    if layout.latency_format {
        return write_latency_header(out, header);
    }
    writeln!(out, "# entries-in-buffer/entries-written: {entries}/{written}   #P:{cpus}\n#")?;
    out.write_str(if layout.irq_info { LEGEND } else { PLAIN_LEGEND })
}

/// The latency format's header after the tracer's name, as ftrace's: the latency,
/// the counts, the preemption model (`server`: the kernel does not preempt), the
/// task, where the latency started and ended, and the column legend.
fn write_latency_header(out: &mut dyn Write, header: &Header<'_>) -> fmt::Result {
    let Header { tracer, entries, written, cpus, release, latency } = *header;
    let (ns, cpu) = latency.map_or((0, 0), |l| (l.ns, l.cpu));
    writeln!(out, "# {tracer} latency trace v1.1.5 on {release}")?;
    writeln!(out, "# {:-<68}", "")?;
    write!(out, "# latency: {} us, #{entries}/{written}, CPU#{cpu}", ns / 1000)?;
    writeln!(out, " | (M:server VP:0, KP:0, SP:0 HP:0 #P:{cpus})")?;
    writeln!(out, "#    -----------------")?;
    let (name, pid) = latency.map_or((StackText::new(), 0), |l| {
        (StackText::<24>::of(format_args!("{}", l.task)), l.task.pid)
    });
    let name = name.as_str();
    let name = name.char_indices().nth(16).map_or(name, |(cut, _)| &name[..cut]);
    writeln!(out, "#    | task: {name}-{pid} (uid:0 nice:0 policy:0 rt_prio:0)")?;
    writeln!(out, "#    -----------------")?;
    if let Some(report) = latency {
        writeln!(out, "#  => started at: {}", report.started)?;
        writeln!(out, "#  => ended at:   {}\n#", report.ended)?;
    }
    writeln!(out, "#")?;
    out.write_str(LATENCY_LEGEND)
}

/// The column legend of the latency format.
const LATENCY_LEGEND: &str = "\
#                    _------=> CPU#
#                   / _-----=> irqs-off/BH-disabled
#                  | / _----=> need-resched
#                  || / _---=> hardirq/softirq
#                  ||| / _--=> preempt-depth
#                  |||| / _-=> migrate-disable
#                  ||||| /     delay
#  cmd     pid     |||||| time  |   caller
#     \\   /        ||||||  \\    |    /
";

/// The column legend of the header without the flags (`irq-info` off).
const PLAIN_LEGEND: &str = "\
#           TASK-PID     CPU#     TIMESTAMP  FUNCTION
#              | |         |         |         |
";

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

/// The task column of a record: the thread (or handler) that wrote it and its id.
/// The boot CPU's thread is the kernel's console shell (`shell-1`), another CPU's
/// thread the work posted to it (`work/N-N+1`), as in this project's kernel; in an
/// interrupt handler the column names the handler (`<irq>-0`, `<nmi>-0`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Task {
    prefix: &'static str,
    cpu: Option<usize>,
    /// The task's id (ftrace's PID column).
    pub pid: u32,
}

impl Task {
    /// The task that wrote a record in `context` on CPU `cpu`.
    pub fn of(context: Context, cpu: usize) -> Task {
        let (prefix, pid) = match context.activity() {
            Activity::Idle => ("<idle>", 0),
            Activity::Task if cpu == 0 => ("shell", 1),
            Activity::Task => {
                let pid = u32::try_from(cpu).map_or(u32::MAX, |c| c.saturating_add(1));
                return Task { prefix: "work/", cpu: Some(cpu), pid };
            }
            Activity::Irq { .. } => ("<irq>", 0),
            Activity::Nmi { .. } => ("<nmi>", 0),
            Activity::Unknown => ("<...>", 0),
        };
        Task { prefix, cpu: None, pid }
    }

    /// Characters of the name.
    fn name_len(&self) -> usize {
        self.prefix.len() + self.cpu.map_or(0, |c| c.checked_ilog10().unwrap_or(0) as usize + 1)
    }
}

impl fmt::Display for Task {
    /// The task's name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.prefix)?;
        match self.cpu {
            Some(cpu) => write!(f, "{cpu}"),
            None => Ok(()),
        }
    }
}

/// ftrace's five flag characters for `context`: irqs-off (`d`), need-resched
/// (never set here), hardirq (`h`) or NMI (`z`, `Z` over a hardirq), the interrupt
/// nesting depth (hex, `.` for none), migrate-disable (never set here).
pub fn flags(context: Context) -> [char; 5] {
    let level = match context.activity() {
        Activity::Irq { .. } => 'h',
        Activity::Nmi { in_irq: false } => 'z',
        Activity::Nmi { in_irq: true } => 'Z',
        Activity::Idle | Activity::Task | Activity::Unknown => '.',
    };
    let depth = match context.depth() {
        0 => '.',
        d => char::from_digit(u32::from(d), 16).unwrap_or('f'),
    };
    [if context.irqs_off() { 'd' } else { '.' }, '.', level, depth, '.']
}

/// The name a marker's records (`ftrace:print`) are shown under: Linux's function
/// that writes them.
pub const MARK_WRITE: &str = "tracing_mark_write";

/// The name a record's event is shown under, as in Linux: the event's name without
/// its system, `tracing_mark_write` for the `trace_marker` event, and none for the
/// `trace_marker_raw` event (`ftrace:raw_data`), whose text follows the timestamp.
pub fn event_name<'a>(system: &str, name: &'a str) -> Option<&'a str> {
    match (system, name) {
        ("ftrace", "print") => Some(MARK_WRITE),
        ("ftrace", "raw_data" | "function") => None,
        _ => Some(name),
    }
}

/// Writes `ns` as ftrace's timestamp: seconds, then microseconds, rounded as
/// Linux's `ns2usecs` rounds them (or, with `nanoseconds`, nanoseconds).
pub fn write_timestamp(out: &mut dyn Write, ns: u64, nanoseconds: bool) -> fmt::Result {
    match nanoseconds {
        true => write!(out, "{:5}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000),
        false => {
            let us = ns.saturating_add(500) / 1000;
            write!(out, "{:5}.{:06}", us / 1_000_000, us % 1_000_000)
        }
    }
}

/// Writes a record's timestamp as `layout` asks: [`write_timestamp`] for a clock in
/// nanoseconds, the count in 12 columns otherwise (as ftrace prints the `counter`
/// clock's).
pub fn write_stamp(out: &mut dyn Write, ts: u64, layout: &Layout) -> fmt::Result {
    match layout.clock.in_ns() {
        true => write_timestamp(out, ts, layout.nanoseconds),
        false => write!(out, "{ts:12}"),
    }
}

/// One record to show as a line.
#[derive(Clone, Copy, Debug)]
pub struct Line<'a> {
    /// The CPU that wrote it.
    pub cpu: usize,
    /// Its timestamp (ns, or a count: [`Layout::clock`]).
    pub ts: u64,
    /// What the CPU was running.
    pub context: Context,
    /// The event's name (see [`event_name`]); `None`: the body follows the
    /// timestamp directly.
    pub name: Option<&'a str>,
    /// Events lost on this CPU just before it.
    pub lost: u64,
    /// The latency format's times: where the line's time counts from and when the
    /// next record came; `None`: both are the line's own time.
    pub delay: Option<Delay>,
}

/// A line's times in the latency format (`latency-format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delay {
    /// The time lines count from: the first record read, or the start of the
    /// latency the buffer holds.
    pub start: u64,
    /// The next record's timestamp, whose gap from this one the line's mark shows.
    pub next: u64,
}

/// Writes a record as ftrace's line, `TASK-PID [CPU] FLAGS TIMESTAMP: NAME: BODY`,
/// preceded by `CPU:N [LOST M EVENTS]` if events were lost before it; `body` writes
/// the event's fields (`NAME: ` even when it writes nothing, as Linux's: an empty
/// marker reads `tracing_mark_write: `). `layout` may leave
/// out the flags, or every column before the name.
pub fn write_line(
    out: &mut dyn Write,
    line: &Line<'_>,
    layout: &Layout,
    body: impl FnOnce(&mut dyn Write) -> fmt::Result,
) -> fmt::Result {
    if line.lost > 0 {
        writeln!(out, "CPU:{} [LOST {} EVENTS]", line.cpu, line.lost)?;
    }
    if layout.context_info && layout.latency_format {
        write_latency_columns(out, line, layout)?;
    } else if layout.context_info {
        let task = Task::of(line.context, line.cpu);
        let pad = 16usize.saturating_sub(task.name_len());
        write!(out, "{:pad$}{task}-{:<7} [{:03}] ", "", task.pid, line.cpu)?;
        if layout.irq_info {
            flags(line.context).iter().try_for_each(|&c| out.write_char(c))?;
        }
        // Linux's timestamp column starts with a space of its own.
        out.write_char(' ')?;
        write_stamp(out, line.ts, layout)?;
        out.write_str(": ")?;
    }
    match line.name {
        Some(name) => {
            out.write_str(name)?;
            out.write_str(": ")?;
            body(out)?;
        }
        None => body(out)?,
    }
    writeln!(out)
}

/// The latency format's columns, as ftrace's: the task's name (right-aligned, cut
/// to 8 characters), its id, the CPU, the flags, then the time from the start (µs
/// for a clock in nanoseconds, rounded, with the [`delay_mark`] of the gap to the
/// next record; a count otherwise).
fn write_latency_columns(out: &mut dyn Write, line: &Line<'_>, layout: &Layout) -> fmt::Result {
    let task = Task::of(line.context, line.cpu);
    let name = StackText::<24>::of(format_args!("{task}"));
    write!(out, "{:>8.8}-{:<7} {:3}", name.as_str(), task.pid, line.cpu)?;
    flags(line.context).iter().try_for_each(|&c| out.write_char(c))?;
    let Delay { start, next } = line.delay.unwrap_or(Delay { start: line.ts, next: line.ts });
    let since = i128::from(line.ts) - i128::from(start);
    match layout.clock.in_ns() {
        true => {
            let mark = delay_mark(next.saturating_sub(line.ts));
            write!(out, " {:4}us{mark}: ", (since + 500).div_euclid(1000))
        }
        false => write!(out, " {since:4}: "),
    }
}

/// ftrace's mark for a time `ns` long: over 10 us `+`, 100 us `!`, 1 ms `#`, 10 ms
/// `*`, 100 ms `@`, 1 s `$`; a space otherwise.
pub fn delay_mark(ns: u64) -> char {
    let marks = [(1_000_000_000, '$'), (100_000_000, '@'), (10_000_000, '*')];
    let more = [(1_000_000, '#'), (100_000, '!'), (10_000, '+')];
    marks.iter().chain(&more).find(|(over, _)| ns > *over).map_or(' ', |m| m.1)
}

/// Writes ftrace's `annotate` line: CPU `cpu`'s records start here (its oldest
/// were overwritten later than another CPU's, so its records begin after theirs).
pub fn write_cpu_started(out: &mut dyn Write, cpu: usize) -> fmt::Result {
    writeln!(out, "##### CPU {cpu} buffer started ####")
}

/// Text formatted into a buffer on the stack (no allocation: usable from any
/// context), dropping what does not fit; a cut falls on a character boundary.
pub(crate) struct StackText<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> StackText<N> {
    /// Empty text.
    pub(crate) fn new() -> Self {
        StackText { bytes: [0; N], len: 0 }
    }

    /// `args` formatted, as much as fits.
    pub(crate) fn of(args: fmt::Arguments<'_>) -> Self {
        let mut text = Self::new();
        let _ = text.write_fmt(args);
        text
    }

    /// The text.
    pub(crate) fn as_str(&self) -> &str {
        // Only whole characters are ever copied in.
        core::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }
}

impl<const N: usize> Write for StackText<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut end = s.len().min(N - self.len);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.bytes[self.len..self.len + end].copy_from_slice(&s.as_bytes()[..end]);
        self.len += end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::graph::write_graph_task;
    use super::*;
    use alloc::format;
    use alloc::string::String;

    /// A line's values the tests leave as they are.
    const LINE: Line<'_> =
        Line { cpu: 0, ts: 0, context: Context::TASK, name: None, lost: 0, delay: None };

    /// The header of a buffer of 2 records (5 written) on 4 CPUs, no latency in it.
    fn header(layout: &Layout) -> String {
        let mut out = String::new();
        let header = Header {
            tracer: "nop",
            entries: 2,
            written: 5,
            cpus: 4,
            release: "0.1.0",
            latency: None,
        };
        write_header(&mut out, &header, layout).unwrap();
        out
    }

    fn line(context: Context, cpu: usize, body: &str, nanoseconds: bool) -> String {
        let mut out = String::new();
        let line =
            Line { cpu, ts: 69_267_965_338, context, name: Some("irq_handler_entry"), ..LINE };
        let layout = Layout { nanoseconds, ..Layout::DEFAULT };
        write_line(&mut out, &line, &layout, |o| o.write_str(body)).unwrap();
        out
    }

    /// As Linux's `ns2usecs`: microseconds rounded to the nearest, not cut.
    #[test]
    fn timestamps_round_to_the_microsecond() {
        let stamp = |ns: u64| {
            let mut out = String::new();
            write_timestamp(&mut out, ns, false).unwrap();
            out
        };
        assert_eq!(stamp(69_267_965_499), "   69.267965");
        assert_eq!(stamp(69_267_965_500), "   69.267966");
        assert_eq!(stamp(1_999_999_999), "    2.000000");
        assert_eq!(stamp(u64::MAX), "18446744073.709551", "saturated, not wrapped");
    }

    /// As Linux's `trace_print_graph_duration`: at most 7 digits with the decimals
    /// (cut, not rounded), padded to 8 characters before the unit.
    #[test]
    fn durations_print_as_linux_prints_them() {
        let duration = |ns: u128| {
            let mut out = String::new();
            write_graph_duration(&mut out, ns).unwrap();
            out
        };
        assert_eq!(duration(5), "0.005 us    ");
        assert_eq!(duration(40_000), "40.000 us   ");
        assert_eq!(duration(123_456_789), "123456.7 us ");
        assert_eq!(duration(1_234_567_890), "1234567 us  ");
        assert_eq!(duration(89_627_450_000), "89627450 us ");
    }

    #[test]
    fn lines_have_ftrace_columns() {
        let irq = Context::new(Activity::Irq { depth: 1 }, true);
        assert_eq!(
            line(irq, 1, "irq=48", false),
            "           <irq>-0       [001] d.h1.    69.267965: irq_handler_entry: irq=48\n"
        );
        assert_eq!(
            line(Context::TASK, 0, "", true),
            "           shell-1       [000] .....    69.267965338: irq_handler_entry: \n",
            "an empty body keeps the name's `: `, as Linux's"
        );
        let nmi = Context::new(Activity::Nmi { in_irq: true }, true);
        assert_eq!(
            line(nmi, 3, "x", false),
            "           <nmi>-0       [003] d.Z2.    69.267965: irq_handler_entry: x\n"
        );
        let work = Context::new(Activity::Task, false);
        assert!(line(work, 12, "", false).starts_with("         work/12-13      [012] ....."));
        let idle = Context::new(Activity::Idle, true);
        assert!(line(idle, 2, "", false).starts_with("          <idle>-0       [002] d...."));
        assert!(
            line(Context::UNKNOWN, 2, "", false)
                .starts_with("           <...>-0       [002] .....")
        );
    }

    #[test]
    fn flags_show_each_context() {
        let f = |a, off| flags(Context::new(a, off)).iter().collect::<String>();
        assert_eq!(f(Activity::Irq { depth: 3 }, true), "d.h3.");
        assert_eq!(f(Activity::Irq { depth: 2 }, false), "..h2.");
        assert_eq!(f(Activity::Nmi { in_irq: false }, true), "d.z1.");
        assert_eq!(f(Activity::Task, true), "d....");
    }

    #[test]
    fn header_and_names_are_linux_ones() {
        let out = header(&Layout::DEFAULT);
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

    /// `irq-info` off drops the flags column and its legend; `context-info` off
    /// every column before the event, and the header's counts and legend, as
    /// ftrace's options do.
    #[test]
    fn display_options_drop_columns_as_ftraces_do() {
        let irq = Context::new(Activity::Irq { depth: 1 }, true);
        let line =
            Line { cpu: 1, ts: 69_267_965_338, context: irq, name: Some("tick"), lost: 2, ..LINE };
        let write = |layout: Layout| {
            let mut out = String::new();
            write_line(&mut out, &line, &layout, |o| o.write_str("n=1")).unwrap();
            (out, header(&layout))
        };
        let (plain, header) = write(Layout { irq_info: false, ..Layout::DEFAULT });
        let lost = "CPU:1 [LOST 2 EVENTS]\n";
        assert_eq!(
            plain,
            format!("{lost}           <irq>-0       [001]     69.267965: tick: n=1\n")
        );
        assert!(header.ends_with(
            "#\n#           TASK-PID     CPU#     TIMESTAMP  FUNCTION\n\
             #              | |         |         |         |\n"
        ));
        assert!(!header.contains("irqs-off"), "{header}");
        let (bare, header) = write(Layout { context_info: false, ..Layout::DEFAULT });
        assert_eq!(bare, format!("{lost}tick: n=1\n"));
        assert_eq!(header, "# tracer: nop\n#\n");
        let layout = Layout { context_info: false, ..Layout::DEFAULT };
        assert_eq!(graph(&layout, 2, GraphCall::Leaf(567)), "    f();\n");
    }

    /// `latency-format`: ftrace's latency header, with the latency a tracer
    /// reported, and lines whose time counts from a start in µs, marked with the
    /// gap to the next record.
    #[test]
    fn the_latency_format_is_ftraces() {
        let layout = Layout { latency_format: true, ..Layout::DEFAULT };
        let plain = header(&layout);
        assert!(
            plain
                .starts_with("# tracer: nop\n#\n# nop latency trace v1.1.5 on 0.1.0\n# ----------")
        );
        assert!(plain.contains(
            "\n# latency: 0 us, #2/5, CPU#0 | (M:server VP:0, KP:0, SP:0 HP:0 #P:4)\n\
             #    -----------------\n\
             #    | task: -0 (uid:0 nice:0 policy:0 rt_prio:0)\n\
             #    -----------------\n#\n\
             #                    _------=> CPU#\n"
        ));
        assert!(plain.ends_with(
            "#  cmd     pid     |||||| time  |   caller\n#     \\   /        ||||||  \\    |    /\n"
        ));
        let irq = Context::new(Activity::Irq { depth: 1 }, true);
        let report = LatencyReport {
            ns: 259_999,
            cpu: 2,
            task: Task::of(Context::TASK, 2),
            started: &"spike+0x26",
            ended: &"spike+0x6c",
        };
        let mut out = String::new();
        let head = Header {
            tracer: "irqsoff",
            latency: Some(report),
            release: "0.1.0",
            entries: 4,
            written: 4,
            cpus: 4,
        };
        write_header(&mut out, &head, &layout).unwrap();
        assert!(
            out.contains(
                "# latency: 259 us, #4/4, CPU#2 | (M:server VP:0, KP:0, SP:0 HP:0 #P:4)\n\
             #    -----------------\n\
             #    | task: work/2-3 (uid:0 nice:0 policy:0 rt_prio:0)\n\
             #    -----------------\n\
             #  => started at: spike+0x26\n\
             #  => ended at:   spike+0x6c\n#\n#\n"
            ),
            "{out}"
        );
        // Empty: the tracer's name alone, as ftrace's.
        let empty = Header { entries: 0, ..head };
        let mut out = String::new();
        write_header(&mut out, &empty, &layout).unwrap();
        assert_eq!(out, "# tracer: irqsoff\n#\n");
        let at = |ts, next| {
            let mut out = String::new();
            let delay = Some(Delay { start: 1_000_000, next });
            let line = Line { cpu: 2, ts, context: irq, name: Some("tick"), delay, ..LINE };
            write_line(&mut out, &line, &layout, |o| o.write_str("n=1")).unwrap();
            out
        };
        assert_eq!(at(1_000_000, 1_000_000), "   <irq>-0         2d.h1.    0us : tick: n=1\n");
        assert_eq!(at(1_259_600, 1_270_000), "   <irq>-0         2d.h1.  260us+: tick: n=1\n");
        assert_eq!(at(1_000_000, 3_000_000), "   <irq>-0         2d.h1.    0us#: tick: n=1\n");
        assert_eq!(at(900_000, 900_000), "   <irq>-0         2d.h1. -100us : tick: n=1\n");
        let work = Line { cpu: 11, ts: 5, context: Context::TASK, name: Some("x"), ..LINE };
        let mut out = String::new();
        let counted = Layout { clock: Clock::Counter, ..layout };
        write_line(&mut out, &work, &counted, |_| Ok(())).unwrap();
        assert_eq!(out, " work/11-12       11.....    0: x: \n");
        assert_eq!(delay_mark(10_000), ' ');
        assert_eq!(delay_mark(10_001), '+');
        assert_eq!(delay_mark(1_000_000_001), '$');
    }

    /// A `function_graph` line of `f` on CPU 1 at 2.5 s, in its thread (`work/1-2`).
    fn graph(layout: &Layout, depth: u64, call: GraphCall) -> String {
        let mut out = String::new();
        let (cpu, ts, context) = (1, 2_500_000_000, Context::TASK);
        let line = GraphLine { cpu, ts, context, depth, name: &"f", call };
        write_graph_line(&mut out, layout, &line).unwrap();
        out
    }

    #[test]
    fn graph_lines_are_ftraces_nested_layout() {
        let line = |depth, call| graph(&Layout::DEFAULT, depth, call);
        assert_eq!(line(1, GraphCall::Entry), " 1)               |    f() {\n");
        assert_eq!(line(0, GraphCall::Leaf(567)), " 1)   0.567 us    |  f();\n");
        assert_eq!(line(1, GraphCall::Return(45_974)), " 1) + 45.974 us   |    } /* f */\n");
        assert_eq!(line(0, GraphCall::Return(2_000_000)), " 1) # 2000.000 us |  } /* f */\n");
    }

    /// The `funcgraph-*` options add or drop columns, marks and the tail as
    /// ftrace's do: the timestamp first, then the CPU, the task centred in 14
    /// characters, the duration.
    #[test]
    fn graph_options_add_and_drop_columns() {
        let d = Layout::DEFAULT;
        let call = GraphCall::Return(45_974);
        let all = Layout { graph_abstime: true, graph_proc: true, ..d };
        assert_eq!(
            graph(&all, 1, call),
            "    2.500000 |   1)    work/1-2    | + 45.974 us   |    } /* f */\n"
        );
        let ns = Layout { nanoseconds: true, ..all };
        assert!(graph(&ns, 0, call).starts_with("    2.500000000 |   1) "));
        assert_eq!(
            graph(&Layout { graph_cpu: false, ..d }, 0, call),
            "+ 45.974 us   |  } /* f */\n"
        );
        assert_eq!(graph(&Layout { graph_duration: false, ..d }, 1, call), " 1)   } /* f */\n");
        assert_eq!(
            graph(&Layout { graph_overhead: false, ..d }, 0, call),
            " 1)   45.974 us   |  } /* f */\n"
        );
        assert_eq!(graph(&Layout { graph_tail: false, ..d }, 0, call), " 1) + 45.974 us   |  }\n");
        let entry = graph(&Layout { graph_proc: true, ..d }, 0, GraphCall::Entry);
        assert_eq!(entry, " 1)    work/1-2    |               |  f() {\n");
        let mut task = String::new();
        write_graph_task(&mut task, Task::of(Context::new(Activity::Task, false), 12)).unwrap();
        assert_eq!(task, "  work/12-13   | ", "the name cut to 7 characters, centred");
    }

    /// An entry folds with its return when that is the next record of all, on its
    /// CPU, with nothing lost between them; otherwise each prints its own line, a
    /// loss first.
    #[test]
    fn graph_lines_fold_a_call_that_returns_at_once() {
        let layout = Layout { graph_tail: false, ..Layout::DEFAULT };
        let record = |cpu, exit, func, depth, lost| GraphRecord {
            cpu,
            ts: 0,
            context: Context::TASK,
            lost,
            exit,
            func,
            depth,
            took: if exit { 1_500 } else { 0 },
        };
        let mut out = String::new();
        let mut lines = GraphLines::<&'static str>::new();
        let mut push = |out: &mut String, r: Option<GraphRecord<&'static str>>| {
            if !lines.before(out, &layout, r.as_ref()).unwrap() {
                match r {
                    Some(r) => lines.write(out, &layout, r).unwrap(),
                    None => out.push_str("other\n"),
                }
            }
        };
        push(&mut out, Some(record(0, true, "e", 1, 0))); // entered before the first
        push(&mut out, Some(record(0, false, "f", 0, 0)));
        push(&mut out, Some(record(0, false, "g", 1, 0)));
        push(&mut out, Some(record(0, true, "g", 1, 0))); // g's return: a leaf
        push(&mut out, Some(record(0, false, "h", 1, 0)));
        push(&mut out, Some(record(1, true, "h", 1, 0))); // another CPU's
        push(&mut out, Some(record(0, false, "i", 1, 0)));
        push(&mut out, None); // another event between
        push(&mut out, Some(record(0, true, "i", 1, 0)));
        push(&mut out, Some(record(0, false, "j", 1, 0)));
        push(&mut out, Some(record(0, true, "j", 1, 3))); // lost between
        push(&mut out, Some(record(0, false, "k", 1, 0)));
        lines.finish(&mut out, &layout).unwrap();
        let expected = [
            " 0)   1.500 us    |    } /* e */",
            " 0)               |  f() {",
            " 0)   1.500 us    |    g();",
            " 0)               |    h() {",
            " 1)   1.500 us    |    } /* h */",
            " 0)               |    i() {",
            "other",
            " 0)   1.500 us    |    }",
            " 0)               |    j() {",
            "CPU:0 [LOST 3 EVENTS]",
            " 0)   1.500 us    |    }",
            " 0)               |    k() {",
        ];
        assert_eq!(out.lines().collect::<alloc::vec::Vec<_>>(), expected, "{out}");
    }
}
