//! The readers behind the `trace`, `snapshot`, `per_cpu/*/stats` and `trace_pipe`
//! files: ftrace's text from an instance's rings, and the consuming reader the
//! pipes (text and raw) share.

use super::KernelPlatform;
use crate::arch::MAX_CPUS;
use crate::symbols;
use alloc::vec::Vec;
use core::fmt::{self, Write};
use trace::field::{Decoder, FieldKind, Value};
use trace::ring::{Buffer, RecordRef, RingStats};
use trace::text::{self, Delay, GraphCall, GraphLine, LatencyReport, Layout, Line, Task};
use trace::tracer::{
    FUNCGRAPH_ENTRY, FUNCGRAPH_EXIT, FUNCTION, IRQSOFF, STACK_FRAMES, STACK_TRACE, is_message,
};
use trace::{Instance, Tracer, event::DescriptorKind};

/// Writes one record as ftrace's trace line (see [`trace::text`]), the fields
/// formatted now from the event's descriptor (deferred formatting), laid out as
/// `layout` says.
fn write_record(
    out: &mut dyn Write,
    tracer: &Tracer<KernelPlatform>,
    record: &RecordRef<'_>,
    layout: &Layout,
    delay: Option<Delay>,
) -> fmt::Result {
    let descriptor = tracer.descriptor(record.id);
    let mut line = Line {
        cpu: record.cpu,
        ts: record.ts,
        context: record.context,
        name: descriptor.map_or(Some("unknown_event"), |d| text::event_name(d.system, d.name)),
        lost: record.lost,
        delay,
    };
    let message_only = layout.printk_msg_only && descriptor.is_some_and(is_message);
    let layout = if message_only {
        line.name = None;
        &Layout { context_info: false, ..*layout }
    } else {
        layout
    };
    text::write_line(out, &line, layout, |out| match descriptor {
        Some(d) if core::ptr::eq(d, &STACK_TRACE) && write_stack(out, record.payload)? => Ok(()),
        Some(d) if core::ptr::eq(d, &FUNCTION) && write_function(out, record.payload, layout)? => {
            Ok(())
        }
        Some(d) if d.kind == DescriptorKind::Event => {
            trace::event::format::render(out, d.format, d.fields, record.payload, symbols::table())
        }
        Some(d) => {
            trace::event::format::render_tagged(out, d.format, record.payload, symbols::table())
        }
        None => write!(out, "id={}", record.id),
    })
}

/// Writes a `stacktrace` trigger's record with the kernel's symbols (see
/// [`trace::symtab::SymbolTable::write_stack`]); `false`, with nothing written,
/// without symbols or if the payload does not decode.
fn write_stack(out: &mut dyn Write, payload: &[u8]) -> Result<bool, fmt::Error> {
    let Some(table) = symbols::table() else { return Ok(false) };
    let mut decoder = Decoder::new(payload);
    let Ok(Value::Unsigned(depth)) = decoder.value(FieldKind::U8) else { return Ok(false) };
    let mut frames = [0; STACK_FRAMES];
    for frame in &mut frames {
        let Ok(Value::Unsigned(ret)) = decoder.value(FieldKind::U64) else { return Ok(false) };
        *frame = ret;
    }
    table.write_stack(out, depth as usize, &frames)?;
    Ok(true)
}

/// A `function_graph` record's values.
#[derive(Clone, Copy, PartialEq, Eq)]
struct GraphRecord {
    cpu: usize,
    ts: u64,
    context: trace::Context,
    /// A return (`funcgraph_exit`), or an entry.
    exit: bool,
    func: u64,
    depth: u64,
    /// The time the call took (ns; a return's).
    took: u64,
}

impl GraphRecord {
    /// `record`'s values, if it is a `function_graph` record that decodes.
    fn of(tracer: &Tracer<KernelPlatform>, record: &RecordRef<'_>) -> Option<GraphRecord> {
        let d = tracer.descriptor(record.id)?;
        let exit = core::ptr::eq(d, &FUNCGRAPH_EXIT);
        if !exit && !core::ptr::eq(d, &FUNCGRAPH_ENTRY) {
            return None;
        }
        let mut values = [0u64; 3];
        decode_u64s(record.payload, &mut values[..d.fields.len()]).then_some(())?;
        let [func, depth, took] = values;
        let (cpu, ts, context) = (record.cpu, record.ts, record.context);
        Some(GraphRecord { cpu, ts, context, exit, func, depth, took })
    }

    /// Writes `call`, this record's, as a `function_graph` line.
    fn write(&self, out: &mut dyn Write, layout: &Layout, call: GraphCall) -> fmt::Result {
        let (cpu, ts, context, depth) = (self.cpu, self.ts, self.context, self.depth);
        let line = GraphLine { cpu, ts, context, depth, name: &Symbol(self.func), call };
        text::write_graph_line(out, layout, &line)
    }

    /// Whether `self`, a return, ends the call `entry` entered.
    fn returns_from(&self, entry: &GraphRecord) -> bool {
        self.exit && (self.cpu, self.func, self.depth) == (entry.cpu, entry.func, entry.depth)
    }
}

/// Writes records as trace lines, holding each `function_graph` entry back until
/// the next record: an entry whose return comes next prints as one `name();` line,
/// as ftrace's graph output does. With `latency-format`, each other record is held
/// back too, until the next one's time gives its delay mark. Allocates nothing
/// without `latency-format` (the panic dump's layout has it off).
pub struct TraceWriter<'a> {
    tracer: &'a Tracer<KernelPlatform>,
    layout: Layout,
    held: Option<GraphRecord>,
    /// With `latency-format`: the time lines count from (the first record's unless
    /// set), and the record held back.
    start: Option<u64>,
    latency_held: Option<HeldRecord>,
    /// With `annotate`: the CPUs whose records were written (bit N: CPU N).
    started: Option<u64>,
    /// Per CPU, the lowest depth of a `function_graph` entry written so far
    /// (`u64::MAX`: none). Calls nest, so a return that deep or deeper ends a call
    /// whose entry was written; a shallower one, a call entered before the first
    /// record.
    entered: [u64; MAX_CPUS],
}

impl<'a> TraceWriter<'a> {
    /// A writer of `tracer`'s records, laid out as `layout` says, without
    /// annotations.
    pub fn new(tracer: &'a Tracer<KernelPlatform>, layout: Layout) -> Self {
        TraceWriter {
            tracer,
            layout,
            held: None,
            start: None,
            latency_held: None,
            started: None,
            entered: [u64::MAX; MAX_CPUS],
        }
    }

    /// The same, the latency format's times counting from `start` (the latency's).
    fn counting_from(self, start: Option<u64>) -> Self {
        TraceWriter { start, ..self }
    }

    /// The same, announcing where each CPU's records start (after the first
    /// record) if the layout's `annotate` is on and the buffer `overran`, as
    /// ftrace's `trace` file does.
    fn annotating(tracer: &'a Tracer<KernelPlatform>, layout: Layout, overran: bool) -> Self {
        let started = (layout.annotate && overran).then_some(0);
        TraceWriter { started, ..Self::new(tracer, layout) }
    }

    /// Writes `record` (after the entry held back, unless it returns from it).
    pub fn write(&mut self, out: &mut dyn Write, record: &RecordRef<'_>) -> fmt::Result {
        let start = *self.start.get_or_insert(record.ts);
        if let Some(held) = self.latency_held.take() {
            let delay = Delay { start, next: record.ts };
            write_record(out, self.tracer, &held.record(), &self.layout, Some(delay))?;
        }
        let graph = GraphRecord::of(self.tracer, record);
        if let Some(entry) = self.held.take() {
            if let Some(ret) = graph.filter(|g| g.returns_from(&entry)) {
                // The leaf's line is the entry's, with the return's duration.
                return entry.write(out, &self.layout, GraphCall::Leaf(ret.took));
            }
            entry.write(out, &self.layout, GraphCall::Entry)?;
        }
        self.announce(out, record.cpu)?;
        match graph {
            Some(ret) if ret.exit => {
                // Without `funcgraph-tail`, a `}` names its function only if its
                // entry was not written, as ftrace's does.
                let entered = self.entered.get(ret.cpu).is_some_and(|d| ret.depth >= *d);
                let tail = self.layout.graph_tail || !entered;
                ret.write(
                    out,
                    &Layout { graph_tail: tail, ..self.layout },
                    GraphCall::Return(ret.took),
                )
            }
            Some(entry) => {
                if let Some(depth) = self.entered.get_mut(entry.cpu) {
                    *depth = (*depth).min(entry.depth);
                }
                self.held = Some(entry);
                Ok(())
            }
            None if self.layout.latency_format && self.layout.context_info => {
                match HeldRecord::of(record) {
                    Some(held) => self.latency_held = Some(held),
                    // No memory to hold it: written now, without its delay mark.
                    None => write_record(out, self.tracer, record, &self.layout, None)?,
                }
                Ok(())
            }
            None => write_record(out, self.tracer, record, &self.layout, None),
        }
    }

    /// Announces CPU `cpu`'s first record, unless it is the first record of all.
    fn announce(&mut self, out: &mut dyn Write, cpu: usize) -> fmt::Result {
        let Some(cpus) = &mut self.started else { return Ok(()) };
        let bit = 1u64.checked_shl(cpu as u32).unwrap_or(0);
        let announce = bit != 0 && *cpus & bit == 0 && *cpus != 0;
        *cpus |= bit;
        if announce { text::write_cpu_started(out, cpu) } else { Ok(()) }
    }

    /// Writes the record held back, if any: an entry as `name() {`, another with
    /// no delay after it (after the last record).
    pub fn finish(&mut self, out: &mut dyn Write) -> fmt::Result {
        if let Some(held) = self.latency_held.take() {
            let delay = self.start.map(|start| Delay { start, next: held.ts });
            write_record(out, self.tracer, &held.record(), &self.layout, delay)?;
        }
        let entry = self.held.take();
        entry.map_or(Ok(()), |entry| entry.write(out, &self.layout, GraphCall::Entry))
    }
}

/// A record copied out of its reader's buffer, held back by [`TraceWriter`].
struct HeldRecord {
    cpu: usize,
    ts: u64,
    id: u16,
    context: trace::Context,
    lost: u64,
    payload: Vec<u8>,
}

impl HeldRecord {
    /// A copy of `record`; `None` if there is no memory for its payload.
    fn of(record: &RecordRef<'_>) -> Option<HeldRecord> {
        let mut payload = Vec::new();
        payload.try_reserve_exact(record.payload.len()).ok()?;
        payload.extend_from_slice(record.payload);
        let RecordRef { cpu, ts, id, context, lost, .. } = *record;
        Some(HeldRecord { cpu, ts, id, context, lost, payload })
    }

    /// The record, as its reader returned it.
    fn record(&self) -> RecordRef<'_> {
        let HeldRecord { cpu, ts, id, context, lost, .. } = *self;
        RecordRef { cpu, ts, id, context, lost, payload: &self.payload }
    }
}

/// Decodes a payload of `u64` fields into `values`; `false` if it does not hold them.
fn decode_u64s(payload: &[u8], values: &mut [u64]) -> bool {
    let mut decoder = Decoder::new(payload);
    values.iter_mut().all(|v| match decoder.value(FieldKind::U64) {
        Ok(Value::Unsigned(value)) => {
            *v = value;
            true
        }
        _ => false,
    })
}

/// A function's address, shown as its name when the kernel's symbols hold it (a
/// return address is looked up one byte earlier, inside its call's function).
struct Symbol(u64);

impl fmt::Display for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match symbols::table().and_then(|t| t.lookup(self.0)) {
            Some((name, _)) => f.write_str(name),
            None => write!(f, "{:#x}", self.0),
        }
    }
}

/// Writes a `function` tracer's record as ftrace does, `function <-caller` (the
/// caller with `print-parent`; each address as [`write_code`] does); `false`, with
/// nothing written, if the payload does not decode.
fn write_function(
    out: &mut dyn Write,
    payload: &[u8],
    layout: &Layout,
) -> Result<bool, fmt::Error> {
    let mut values = [0u64; 2];
    if !decode_u64s(payload, &mut values) {
        return Ok(false);
    }
    let [ip, parent] = values;
    write_code(out, ip, false, layout)?;
    if layout.print_parent {
        out.write_str(" <-")?;
        write_code(out, parent, true, layout)?;
    }
    Ok(true)
}

/// Writes the code address `addr` (`ret`: a return address, named after the byte
/// before it) as a function tracer line shows it: its function's name, with
/// `sym-offset` its offset in it (`name+0xoffset`), with `sym-addr` the address
/// after it (` <addr>`, 16 hex digits).
fn write_code(out: &mut dyn Write, addr: u64, ret: bool, layout: &Layout) -> fmt::Result {
    match symbols::table().filter(|_| layout.sym_offset) {
        Some(table) if ret => table.write_frame(out, addr)?,
        Some(table) => table.write_address(out, addr)?,
        None => write!(out, "{}", Symbol(if ret { addr.saturating_sub(1) } else { addr }))?,
    }
    if layout.sym_addr {
        write!(out, " <{addr:016x}>")?;
    }
    Ok(())
}

/// The records in a buffer and written into it, CPU `cpu`'s or all `cpus`', from
/// each CPU's `stats`.
fn counts(
    cpus: usize,
    cpu: Option<usize>,
    stats: impl Fn(usize) -> Result<RingStats, trace::Error>,
) -> (u64, u64) {
    let each = (0..cpus).filter(|c| cpu.is_none_or(|only| only == *c));
    each.filter_map(|c| stats(c).ok())
        .fold((0, 0), |(entries, written), s| (entries + s.entries, written + s.written))
}

/// A `trace` file's header: ftrace's, for a buffer of `instance` holding
/// `entries` of the `written` records, with the latency `report` says it holds
/// (the latency format tells it).
fn write_header(
    out: &mut dyn Write,
    instance: &Instance<'_, KernelPlatform>,
    (entries, written): (u64, u64),
    layout: &Layout,
    report: Option<&IrqsoffReport>,
) -> fmt::Result {
    let (started, ended) = report.map_or((Code(0), Code(0)), |r| (Code(r.start), Code(r.end)));
    let latency = report.map(|r| LatencyReport {
        ns: r.ns,
        cpu: r.cpu,
        task: Task::of(r.context, r.cpu),
        started: &started,
        ended: &ended,
    });
    let header = text::Header {
        tracer: instance.function_tracer().name(),
        entries,
        written,
        cpus: instance.tracer().cpus(),
        release: env!("CARGO_PKG_VERSION"),
        latency,
    };
    text::write_header(out, &header, layout)
}

/// A code address shown as `function+0xoffset` (or the address).
struct Code(u64);

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        symbols::write_address(f, self.0)
    }
}

/// Calls `each` with every record of `buffer`, oldest first, while it returns true:
/// one CPU's, or (`None`) all CPUs' merged in time order. `start` runs once the
/// window to read is fixed, before the first record (so counts taken there cover
/// every record listed). Fails if the records cannot be read (no memory, no such CPU).
pub fn for_each_record(
    buffer: &Buffer<KernelPlatform>,
    cpu: Option<usize>,
    start: impl FnOnce(),
    mut each: impl FnMut(&RecordRef<'_>) -> bool,
) -> Result<(), trace::Error> {
    match cpu {
        None => {
            let mut records = buffer.merged_iter()?;
            start();
            while let Some(record) = records.next_record() {
                if !each(&record) {
                    break;
                }
            }
        }
        Some(cpu) => {
            let mut records = buffer.iter(cpu)?;
            start();
            while let Some(record) = records.next_record() {
                if !each(&record) {
                    break;
                }
            }
        }
    }
    Ok(())
}

/// Writes every record of `buffer` (see [`for_each_record`]) as trace lines, after
/// `header`; stops at the first write that fails (the reader stopped: Ctrl-C, or a
/// pipe that has all it wants).
#[allow(clippy::too_many_arguments, reason = "one reader's whole setting")]
fn write_records(
    out: &mut dyn Write,
    tracer: &Tracer<KernelPlatform>,
    buffer: &Buffer<KernelPlatform>,
    cpu: Option<usize>,
    layout: &Layout,
    start: Option<u64>,
    header: impl FnOnce(&mut dyn Write) -> fmt::Result,
) -> fmt::Result {
    let out = core::cell::RefCell::new(out);
    let result = core::cell::Cell::new(Ok(()));
    let overran = (0..buffer.cpus()).filter_map(|c| buffer.stats(c).ok()).any(|s| s.overrun > 0);
    let writer = TraceWriter::annotating(tracer, *layout, overran).counting_from(start);
    let writer = core::cell::RefCell::new(writer);
    let read = for_each_record(
        buffer,
        cpu,
        || result.set(header(&mut **out.borrow_mut())),
        |record| {
            let out = &mut **out.borrow_mut();
            result.set(result.get().and_then(|()| writer.borrow_mut().write(out, record)));
            result.get().is_ok()
        },
    );
    result.get()?;
    writer.borrow_mut().finish(&mut **out.borrow_mut())?;
    match read {
        Ok(()) => Ok(()),
        Err(error) => writeln!(out.borrow_mut(), "# (records unreadable: {error})"),
    }
}

/// The `trace` file (all CPUs merged in time order, or one CPU): header and every
/// record of the live buffer, not consumed. The header's counts are taken once the
/// records to list are fixed, so they cover them all. With `pause`
/// (`pause-on-trace`), writes into the buffer are held off until the read ends (it
/// goes on unheld if 63 holds are out already).
pub fn write_trace(
    out: &mut dyn Write,
    instance: &Instance<'_, KernelPlatform>,
    cpu: Option<usize>,
    layout: &Layout,
    pause: bool,
) -> fmt::Result {
    let recorder = instance.recorder();
    let live = recorder.live();
    let mut list = |_held| {
        write_records(out, instance.tracer(), live, cpu, layout, None, |out| {
            // The instance's counts: the live buffer's, and the events it refused.
            let counts = counts(live.cpus(), cpu, |c| instance.stats(c));
            write_header(out, instance, counts, layout, None)
        })
    };
    if pause { live.with_writes_held(list) } else { list(false) }
}

/// The snapshot buffer, as ftrace's `snapshot` file reads (CPU `cpu`'s part, or every
/// CPU's records merged in time order): the tracer's name, then, if the snapshot
/// holds records, the header and the records; if not (or it is freed), what
/// `empty` writes. If the irqsoff tracer reported into it, the header tells the
/// latency: with `latency-format`, ftrace's latency header, whose times count from
/// the start of the latency; without, the latency, its CPU and where it started
/// and ended, in three lines.
pub fn write_snapshot(
    out: &mut dyn Write,
    instance: &Instance<'_, KernelPlatform>,
    cpu: Option<usize>,
    layout: &Layout,
    empty: impl FnOnce(&mut dyn Write) -> fmt::Result,
) -> fmt::Result {
    let recorder = instance.recorder();
    let held = |s: &&Buffer<KernelPlatform>| counts(s.cpus(), cpu, |c| s.stats(c)).0 > 0;
    let Some(snapshot) = recorder.snapshot().filter(held) else {
        write!(out, "# tracer: {}\n#\n", instance.function_tracer().name())?;
        return empty(out);
    };
    let report = irqsoff_report(snapshot, cpu);
    let latency_format = layout.latency_format && layout.context_info;
    let start = report.as_ref().filter(|_| latency_format).map(|r| r.ts.saturating_sub(r.ns));
    write_records(out, instance.tracer(), snapshot, cpu, layout, start, |out| {
        let counts = counts(snapshot.cpus(), cpu, |c| snapshot.stats(c));
        write_header(out, instance, counts, layout, report.as_ref())
    })
}

/// An `ftrace:irqsoff` report: where and when it was written, the latency (ns), and
/// where interrupts went off and on.
struct IrqsoffReport {
    cpu: usize,
    ts: u64,
    context: trace::Context,
    ns: u64,
    start: u64,
    end: u64,
}

/// The last irqsoff report among the records of `buffer` (of `cpu`, or all).
fn irqsoff_report(buffer: &Buffer<KernelPlatform>, cpu: Option<usize>) -> Option<IrqsoffReport> {
    let mut last = None;
    let _ = for_each_record(
        buffer,
        cpu,
        || (),
        |record| {
            let mut values = [0u64; 3];
            if record.id == IRQSOFF.id() && decode_u64s(record.payload, &mut values) {
                let [ns, start, end] = values;
                let (cpu, ts, context) = (record.cpu, record.ts, record.context);
                last = Some(IrqsoffReport { cpu, ts, context, ns, start, end });
            }
            true
        },
    );
    last
}

/// `per_cpu/cpuN/stats`, ftrace's fields (timestamps in µs, or counts) plus `written`.
pub fn write_cpu_stats(
    out: &mut dyn Write,
    instance: &Instance<'_, KernelPlatform>,
    cpu: usize,
) -> fmt::Result {
    let Ok(stats) = instance.stats(cpu) else { return writeln!(out, "no such CPU") };
    writeln!(out, "entries: {}", stats.entries)?;
    writeln!(out, "overrun: {}", stats.overrun)?;
    writeln!(out, "commit overrun: {}", stats.commit_overrun)?;
    writeln!(out, "bytes: {}", stats.bytes)?;
    // In the instance's clock: seconds, or a count.
    let layout = text::Layout { clock: instance.clock(), ..text::Layout::DEFAULT };
    write!(out, "oldest event ts: ")?;
    text::write_stamp(out, stats.oldest_ts.unwrap_or(0), &layout)?;
    write!(out, "\nnow ts: ")?;
    text::write_stamp(out, instance.clock_now(), &layout)?;
    writeln!(out, "\ndropped events: {}", stats.dropped)?;
    writeln!(out, "read events: {}", stats.read)?;
    writeln!(out, "written: {}", stats.written)
}

/// Streams `trace_pipe` (all CPUs, or one): consumes and prints records as they come,
/// until `stop` says so (checked between records: the shell stops on a key press) or
/// a write fails (a pipe that has all it wants); `wait` waits for more (see
/// [`consume`]). A `function_graph` entry whose return is the next record prints as
/// one `name();` line, as in `trace`; one still waiting for its next record when the
/// rings run dry prints as `name() {`. Returns an error text if the rings cannot be
/// read.
pub fn stream_pipe(
    out: &mut dyn Write,
    instance: &Instance<'_, KernelPlatform>,
    cpu: Option<usize>,
    layout: &Layout,
    stop: impl FnMut() -> bool,
    mut wait: impl FnMut(),
) -> Result<(), &'static str> {
    let tracer = instance.tracer();
    let out = core::cell::RefCell::new(out);
    let writer = core::cell::RefCell::new(TraceWriter::new(tracer, *layout));
    let flush = || {
        let _ = writer.borrow_mut().finish(&mut **out.borrow_mut());
    };
    let each =
        |record: &RecordRef<'_>| writer.borrow_mut().write(&mut **out.borrow_mut(), record).is_ok();
    // The output may want no more once the pending line is out (a `head` that has
    // its lines): an empty write says so, and the read ends without waiting.
    let drained = || {
        flush();
        let wanted = out.borrow_mut().write_str("").is_ok();
        if wanted {
            wait();
        }
        wanted
    };
    let lost = consume(instance, cpu, stop, each, drained)?;
    flush();
    for (cpu, lost) in lost {
        let _ = writeln!(out.borrow_mut(), "CPU:{cpu} [LOST {lost} EVENTS]");
    }
    Ok(())
}

/// The consuming reader behind the pipes: takes the records of `instance` (all
/// CPUs, or one) in time order as they come and hands each to `each` (which returns
/// false to end), calling `wait` when none is left (it returns false to end, or
/// true when there may be more, or when `stop` may have changed its mind), until
/// `stop` says so (checked between records). Returns each CPU's events lost after
/// the last record returned (a writer that raced the end), or an error text if the
/// rings cannot be read (another consuming reader has them).
pub fn consume(
    instance: &Instance<'_, KernelPlatform>,
    cpu: Option<usize>,
    mut stop: impl FnMut() -> bool,
    mut each: impl FnMut(&RecordRef<'_>) -> bool,
    mut wait: impl FnMut() -> bool,
) -> Result<alloc::vec::Vec<(usize, u64)>, &'static str> {
    let tracer = instance.tracer();
    let recorder = instance.recorder();
    let cpus: alloc::vec::Vec<usize> = match cpu {
        Some(cpu) => alloc::vec![cpu],
        None => (0..tracer.cpus()).collect(),
    };
    let mut consumers = alloc::vec::Vec::new();
    for &cpu in &cpus {
        consumers.push(recorder.live().consumer(cpu).map_err(|_| "trace_pipe is open already")?);
    }
    let mut merged = trace::ring::Merged::new(consumers);
    loop {
        let mut stopped = stop();
        while !stopped {
            let Some(record) = merged.next_record() else { break };
            stopped = !each(&record);
            stopped |= stop();
        }
        if stopped || !wait() {
            let lost = merged.cursors_mut().map(|c| (c.cpu(), c.take_lost()));
            return Ok(lost.filter(|&(_, count)| count > 0).collect());
        }
    }
}
