//! ftrace's text lines from a tracer's records: each record formatted from its
//! event's descriptor when it is read (deferred formatting), `function` lines with
//! the platform's symbols, and the `function_graph` layout, whose entry and return
//! fold into one `name();` line when nothing came between them. What the `trace`,
//! `snapshot` and `trace_pipe` files, and a panic dump's text, print.

use super::{
    FUNCGRAPH_ENTRY, FUNCGRAPH_EXIT, FUNCTION, STACK_FRAMES, STACK_TRACE, Tracer, is_message,
};
use crate::context::Context;
use crate::event::{DescriptorKind, format};
use crate::field::{Decoder, FieldKind, Value};
use crate::platform::Platform;
use crate::ring::RecordRef;
use crate::symtab::SymbolTable;
use crate::text::{self, Delay, GraphLines, GraphRecord, Layout, Line};
use alloc::vec::Vec;
use core::fmt::{self, Write};

/// Writes one record as ftrace's trace line (see [`crate::text`]), the fields
/// formatted now from the event's descriptor (deferred formatting), laid out as
/// `layout` says.
pub fn write_record<P: Platform>(
    out: &mut dyn Write,
    tracer: &Tracer<P>,
    record: &RecordRef<'_>,
    layout: &Layout,
    delay: Option<Delay>,
) -> fmt::Result {
    let descriptor = tracer.descriptor(record.id);
    let symbols = tracer.platform.symbols();
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
        Some(d) if core::ptr::eq(d, &STACK_TRACE) && write_stack(out, record.payload, symbols)? => {
            Ok(())
        }
        Some(d)
            if core::ptr::eq(d, &FUNCTION)
                && write_function(out, record.payload, layout, symbols)? =>
        {
            Ok(())
        }
        Some(d) if d.kind == DescriptorKind::Event => {
            format::render(out, d.format, d.fields, record.payload, symbols)
        }
        Some(d) => format::render_tagged(out, d.format, record.payload, symbols),
        None => write!(out, "id={}", record.id),
    })
}

/// Writes a `stacktrace` trigger's record with the platform's symbols (see
/// [`SymbolTable::write_stack`]); `false`, with nothing written, without symbols or
/// if the payload does not decode.
fn write_stack(
    out: &mut dyn Write,
    payload: &[u8],
    symbols: Option<&SymbolTable<'_>>,
) -> Result<bool, fmt::Error> {
    let Some(table) = symbols else { return Ok(false) };
    let mut decoder = Decoder::new(payload);
    let Ok(Value::Unsigned(depth)) = decoder.value(FieldKind::U8) else { return Ok(false) };
    let mut frames = [0; STACK_FRAMES];
    if !decoder.u64s(&mut frames) {
        return Ok(false);
    }
    table.write_stack(out, depth as usize, &frames)?;
    Ok(true)
}

/// `record`'s values, if it is a `function_graph` record that decodes, its function
/// named from `symbols`.
fn graph_record<'a, P: Platform>(
    tracer: &Tracer<P>,
    record: &RecordRef<'_>,
    symbols: Option<&'a SymbolTable<'a>>,
) -> Option<GraphRecord<Symbol<'a>>> {
    let d = tracer.descriptor(record.id)?;
    let exit = core::ptr::eq(d, &FUNCGRAPH_EXIT);
    if !exit && !core::ptr::eq(d, &FUNCGRAPH_ENTRY) {
        return None;
    }
    let mut values = [0u64; 3];
    Decoder::new(record.payload).u64s(&mut values[..d.fields.len()]).then_some(())?;
    let [func, depth, took] = values;
    let (cpu, ts, context, lost) = (record.cpu, record.ts, record.context, record.lost);
    Some(GraphRecord { cpu, ts, context, lost, exit, func: Symbol(func, symbols), depth, took })
}

/// Writes records as trace lines, holding each `function_graph` entry back until
/// the next record: an entry whose return comes next prints as one `name();` line,
/// as ftrace's graph output does ([`GraphLines`]). With `latency-format`, each other record is held
/// back too, until the next one's time gives its delay mark. Allocates nothing
/// without `latency-format` (a panic dump's layout has it off).
pub struct TraceWriter<'a, P: Platform> {
    tracer: &'a Tracer<P>,
    layout: Layout,
    /// The `function_graph` layout: the entry held back.
    graph: GraphLines<Symbol<'a>>,
    /// With `latency-format`: the time lines count from (the first record's unless
    /// set), and the record held back.
    start: Option<u64>,
    latency_held: Option<HeldRecord>,
    /// With `annotate`: the CPUs whose records were written (bit N: CPU N).
    started: Option<u64>,
}

impl<'a, P: Platform> TraceWriter<'a, P> {
    /// A writer of `tracer`'s records, laid out as `layout` says, without
    /// annotations.
    pub fn new(tracer: &'a Tracer<P>, layout: Layout) -> Self {
        TraceWriter {
            tracer,
            layout,
            graph: GraphLines::new(),
            start: None,
            latency_held: None,
            started: None,
        }
    }

    /// The same, the latency format's times counting from `start` (the latency's).
    pub fn counting_from(self, start: Option<u64>) -> Self {
        TraceWriter { start, ..self }
    }

    /// The same, announcing where each CPU's records start (after the first
    /// record) if the layout's `annotate` is on and the buffer `overran`, as
    /// ftrace's `trace` file does.
    pub fn annotating(tracer: &'a Tracer<P>, layout: Layout, overran: bool) -> Self {
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
        let graph = graph_record(self.tracer, record, self.symbols());
        if self.graph.before(out, &self.layout, graph.as_ref())? {
            return Ok(());
        }
        self.announce(out, record.cpu)?;
        match graph {
            Some(graph) => self.graph.write(out, &self.layout, graph),
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
        self.graph.finish(out, &self.layout)
    }

    /// The platform's symbols, which name functions.
    fn symbols(&self) -> Option<&'a SymbolTable<'a>> {
        self.tracer.platform.symbols()
    }
}

/// A record copied out of its reader's buffer, held back by [`TraceWriter`].
struct HeldRecord {
    cpu: usize,
    ts: u64,
    id: u16,
    context: Context,
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

/// A function's address, shown as its name when the platform's symbols hold it (a
/// return address is looked up one byte earlier, inside its call's function).
struct Symbol<'s>(u64, Option<&'s SymbolTable<'s>>);

/// Two are the same function if their addresses are.
impl PartialEq for Symbol<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl fmt::Display for Symbol<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.1.and_then(|t| t.lookup(self.0)) {
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
    symbols: Option<&SymbolTable<'_>>,
) -> Result<bool, fmt::Error> {
    let mut values = [0u64; 2];
    if !Decoder::new(payload).u64s(&mut values) {
        return Ok(false);
    }
    let [ip, parent] = values;
    write_code(out, ip, false, layout, symbols)?;
    if layout.print_parent {
        out.write_str(" <-")?;
        write_code(out, parent, true, layout, symbols)?;
    }
    Ok(true)
}

/// Writes the code address `addr` (`ret`: a return address, named after the byte
/// before it) as a function tracer line shows it: its function's name, with
/// `sym-offset` its offset in it (`name+0xoffset`), with `sym-addr` the address
/// after it (` <addr>`, 16 hex digits).
fn write_code(
    out: &mut dyn Write,
    addr: u64,
    ret: bool,
    layout: &Layout,
    symbols: Option<&SymbolTable<'_>>,
) -> fmt::Result {
    match symbols.filter(|_| layout.sym_offset) {
        Some(table) if ret => table.write_frame(out, addr)?,
        Some(table) => table.write_address(out, addr)?,
        None => {
            let named = Symbol(if ret { addr.saturating_sub(1) } else { addr }, symbols);
            write!(out, "{named}")?
        }
    }
    if layout.sym_addr {
        write!(out, " <{addr:016x}>")?;
    }
    Ok(())
}
