//! `function_graph`'s text: the call lines, nested by depth, with their durations,
//! and the folding of an entry and its return into one `name();` line.

use super::{Layout, StackText, Task, delay_mark, write_stamp};
use crate::context::Context;
use crate::dump::MAX_CPUS;
use core::fmt::{self, Write};

/// What a `function_graph` line shows of a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphCall {
    /// Its entry, when it does not return at once: `name() {`.
    Entry,
    /// Its return, with the time it took (ns): `} /* name */`.
    Return(u64),
    /// An entry followed at once by its return: `name();`, with the time.
    Leaf(u64),
}

/// One `function_graph` line to show.
#[derive(Clone, Copy)]
pub struct GraphLine<'a> {
    /// The CPU that made the call.
    pub cpu: usize,
    /// When: the entry's timestamp (a leaf's too), or the return's ([`super::Line::ts`]).
    pub ts: u64,
    /// What the CPU was running.
    pub context: Context,
    /// The call's depth (calls followed around it).
    pub depth: u64,
    /// The function.
    pub name: &'a dyn fmt::Display,
    /// What the line shows of the call.
    pub call: GraphCall,
}

/// Writes a `function_graph` line as ftrace's nested layout: with `context-info`,
/// the columns `layout` asks for (`TIMESTAMP |`, `CPU)`, `TASK-PID |`, `DURATION
/// |`), then the call indented two spaces per depth.
pub fn write_graph_line(out: &mut dyn Write, layout: &Layout, line: &GraphLine<'_>) -> fmt::Result {
    if layout.context_info {
        if layout.graph_abstime {
            write_stamp(out, line.ts, layout)?;
            out.write_str(" |  ")?;
        }
        if layout.graph_cpu {
            write!(out, "{:>2}) ", line.cpu)?;
        }
        if layout.graph_proc {
            write_graph_task(out, Task::of(line.context, line.cpu))?;
        }
        if layout.graph_duration {
            write_graph_column(out, layout, line.call)?;
        }
    }
    let indent = usize::try_from(line.depth.min(64)).unwrap_or(64) * 2;
    write!(out, "{:indent$}", "")?;
    let name = line.name;
    match line.call {
        GraphCall::Entry => writeln!(out, "{name}() {{"),
        GraphCall::Return(_) if layout.graph_tail => writeln!(out, "}} /* {name} */"),
        GraphCall::Return(_) => writeln!(out, "}}"),
        GraphCall::Leaf(_) => writeln!(out, "{name}();"),
    }
}

/// A `function_graph` record's values, as [`GraphLines`] pairs them: the kernel's
/// from its ring, the host tool's from a dump's decoded events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GraphRecord<F> {
    /// The CPU that recorded it.
    pub cpu: usize,
    /// When.
    pub ts: u64,
    /// What the CPU was running.
    pub context: Context,
    /// Events of this CPU lost just before it.
    pub lost: u64,
    /// A return (`funcgraph_exit`), or an entry (`funcgraph_entry`).
    pub exit: bool,
    /// The function: compared to pair a return with its entry, and shown as the
    /// line's name.
    pub func: F,
    /// The call's depth.
    pub depth: u64,
    /// The time the call took (ns; a return's).
    pub took: u64,
}

impl<F: PartialEq> GraphRecord<F> {
    /// Whether `self`, a return, ends the call `entry` entered, with nothing lost
    /// between them.
    fn returns_from(&self, entry: &GraphRecord<F>) -> bool {
        self.exit
            && self.lost == 0
            && (self.cpu, self.depth) == (entry.cpu, entry.depth)
            && self.func == entry.func
    }
}

impl<F: fmt::Display> GraphRecord<F> {
    /// Writes `call`, this record's, as a `function_graph` line.
    fn write(&self, out: &mut dyn Write, layout: &Layout, call: GraphCall) -> fmt::Result {
        let (cpu, ts, context, depth) = (self.cpu, self.ts, self.context, self.depth);
        let line = GraphLine { cpu, ts, context, depth, name: &self.func, call };
        write_graph_line(out, layout, &line)
    }
}

/// ftrace's `function_graph` layout of a sequence of records, the `function_graph`
/// ones among others: each entry is held back until the next record, and an entry
/// whose return comes next (on its CPU, nothing lost between them) prints as one
/// `name();` line with the return's duration; another entry as `name() {`, a
/// return as `}` (naming its function with `funcgraph-tail`, or when its entry was
/// not written), each after the `CPU:N [LOST M EVENTS]` line of the events lost
/// before it. What the kernel's `trace` files and dump text, and the host tool's
/// text report, print. Allocates nothing.
///
/// For each record, [`GraphLines::before`] first (which may take it), then
/// [`GraphLines::write`] for a `function_graph` one or the caller's own line for
/// another; [`GraphLines::finish`] after the last.
pub struct GraphLines<F> {
    /// The entry held back.
    held: Option<GraphRecord<F>>,
    /// Per CPU, the lowest depth of an entry written so far (`u64::MAX`: none).
    /// Calls nest, so a return that deep or deeper ends a call whose entry was
    /// written; a shallower one, a call entered before the first record.
    entered: [u64; MAX_CPUS],
}

impl<F> Default for GraphLines<F> {
    fn default() -> Self {
        GraphLines { held: None, entered: [u64::MAX; MAX_CPUS] }
    }
}

impl<F: PartialEq + fmt::Display> GraphLines<F> {
    /// Nothing held, no entry written.
    pub fn new() -> Self {
        Self::default()
    }

    /// Writes the entry held back, if any, before `next` (a `function_graph`
    /// record, or `None` for another record or none): with `next`'s duration as
    /// `name();` if `next` returns from it, which is then written (`true`: nothing
    /// more to write of `next`), or else as `name() {`.
    pub fn before(
        &mut self,
        out: &mut dyn Write,
        layout: &Layout,
        next: Option<&GraphRecord<F>>,
    ) -> Result<bool, fmt::Error> {
        let Some(entry) = self.held.take() else { return Ok(false) };
        match next.filter(|next| next.returns_from(&entry)) {
            // The leaf's line is the entry's, with the return's duration.
            Some(ret) => entry.write(out, layout, GraphCall::Leaf(ret.took)).map(|()| true),
            None => entry.write(out, layout, GraphCall::Entry).map(|()| false),
        }
    }

    /// Writes `record`, which [`GraphLines::before`] did not take: a return as its
    /// `}` line, an entry held back until the next record.
    pub fn write(
        &mut self,
        out: &mut dyn Write,
        layout: &Layout,
        record: GraphRecord<F>,
    ) -> fmt::Result {
        if record.lost > 0 {
            writeln!(out, "CPU:{} [LOST {} EVENTS]", record.cpu, record.lost)?;
        }
        if record.exit {
            // Without `funcgraph-tail`, a `}` names its function only if its entry
            // was not written, as ftrace's does.
            let entered = self.entered.get(record.cpu).is_some_and(|d| record.depth >= *d);
            let layout = Layout { graph_tail: layout.graph_tail || !entered, ..*layout };
            return record.write(out, &layout, GraphCall::Return(record.took));
        }
        if let Some(depth) = self.entered.get_mut(record.cpu) {
            *depth = (*depth).min(record.depth);
        }
        self.held = Some(record);
        Ok(())
    }

    /// Writes the entry held back, if any, as `name() {` (after the last record).
    pub fn finish(&mut self, out: &mut dyn Write, layout: &Layout) -> fmt::Result {
        self.before(out, layout, None).map(drop)
    }
}

/// The `funcgraph-proc` column: the task, `NAME-PID` (the name cut to 7
/// characters), centred in 14 characters, then ` | `, as ftrace's.
pub(super) fn write_graph_task(out: &mut dyn Write, task: Task) -> fmt::Result {
    let name = StackText::<24>::of(format_args!("{task}"));
    let name = name.as_str();
    let name = name.char_indices().nth(7).map_or(name, |(cut, _)| &name[..cut]);
    let text = StackText::<40>::of(format_args!("{name}-{}", task.pid));
    let spaces = 14usize.saturating_sub(text.as_str().chars().count());
    let (before, after) = (spaces / 2, spaces - spaces / 2);
    write!(out, "{:before$}{}{:after$} | ", "", text.as_str(), "")
}

/// The duration column: blank on an entry; on a return, ftrace's mark for a long
/// call ([`delay_mark`], with `funcgraph-overhead`) and the time.
fn write_graph_column(out: &mut dyn Write, layout: &Layout, call: GraphCall) -> fmt::Result {
    let (GraphCall::Return(ns) | GraphCall::Leaf(ns)) = call else {
        return out.write_str("              |  ");
    };
    let mark = if layout.graph_overhead { delay_mark(ns) } else { ' ' };
    write!(out, "{mark} ")?;
    write_graph_duration(out, u128::from(ns))?;
    out.write_str("|  ")
}

/// Writes `ns` as Linux's `trace_print_graph_duration` (the function graph's and
/// the profiler's times): microseconds, then up to three digits of nanoseconds
/// (cut, not rounded) while the number has at most 7 digits, ` us `, padded to 8
/// characters before the unit. Allocates nothing.
pub(crate) fn write_graph_duration(out: &mut dyn Write, ns: u128) -> fmt::Result {
    let (us, rem) = (ns / 1000, ns % 1000);
    let digits = StackText::<40>::of(format_args!("{us}"));
    let mut width = digits.as_str().len();
    out.write_str(digits.as_str())?;
    if width < 7 {
        let keep = (7 - width).min(3);
        let decimals = StackText::<4>::of(format_args!("{rem:03}"));
        write!(out, ".{}", &decimals.as_str()[..keep])?;
        width += 1 + keep;
    }
    write!(out, " us {:pad$}", "", pad = 8usize.saturating_sub(width))
}
