//! The readers behind the `trace`, `snapshot`, `per_cpu/*/stats` and `trace_pipe`
//! files: ftrace's text from an instance's rings, and the consuming reader the
//! pipes (text and raw) share.

use super::KernelPlatform;
use crate::symbols;
use core::fmt::{self, Write};
use trace::field::Decoder;
use trace::ring::{Buffer, RecordRef, RingStats};
use trace::text::{self, LatencyReport, Layout, Task};
use trace::tracer::{FunctionTracer, IRQSOFF, TraceWriter};
use trace::{Instance, Tracer};

/// The records in a buffer and written into it, all `cpus`' (a CPU's file heads its
/// records with every CPU's counts too, as Linux's), from each CPU's `stats`.
fn counts(cpus: usize, stats: impl Fn(usize) -> Result<RingStats, trace::Error>) -> (u64, u64) {
    (0..cpus)
        .filter_map(|c| stats(c).ok())
        .fold((0, 0), |(entries, written), s| (entries + s.entries, written + s.written))
}

/// A `trace` file's header: ftrace's, for a buffer of `instance` holding
/// `entries` of the `written` records, with the latency `report` says it holds
/// (the latency format tells it).
fn write_header(
    out: &mut dyn Write,
    instance: &Instance<'_, KernelPlatform>,
    tracer: FunctionTracer,
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
        tracer: tracer.name(),
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

/// Writes every record of `buffer` (see [`Buffer::for_each_record`]) as trace lines, after
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
    let read = buffer.for_each_record(
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
    tracer: FunctionTracer,
    cpu: Option<usize>,
    layout: &Layout,
    pause: bool,
) -> fmt::Result {
    let recorder = instance.recorder();
    let live = recorder.live();
    let mut list = |_held| {
        write_records(out, instance.tracer(), live, cpu, layout, None, |out| {
            // The instance's counts: the live buffer's, and the events it refused.
            let counts = counts(live.cpus(), |c| instance.stats(c));
            write_header(out, instance, tracer, counts, layout, None)
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
    tracer: FunctionTracer,
    cpu: Option<usize>,
    layout: &Layout,
    empty: impl FnOnce(&mut dyn Write) -> fmt::Result,
) -> fmt::Result {
    let recorder = instance.recorder();
    // Whether the snapshot holds records (CPU `cpu`'s, if one).
    let held = |s: &&Buffer<KernelPlatform>| {
        let mut shown = (0..s.cpus()).filter(|c| cpu.is_none_or(|only| only == *c));
        shown.any(|c| s.stats(c).is_ok_and(|stats| stats.entries > 0))
    };
    let Some(snapshot) = recorder.snapshot().filter(held) else {
        write!(out, "# tracer: {}\n#\n", tracer.name())?;
        return empty(out);
    };
    let report = irqsoff_report(snapshot, cpu);
    let latency_format = layout.latency_format && layout.context_info;
    let start = report.as_ref().filter(|_| latency_format).map(|r| r.ts.saturating_sub(r.ns));
    write_records(out, instance.tracer(), snapshot, cpu, layout, start, |out| {
        let counts = counts(snapshot.cpus(), |c| snapshot.stats(c));
        write_header(out, instance, tracer, counts, layout, report.as_ref())
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
    let _ = buffer.for_each_record(
        cpu,
        || (),
        |record| {
            let mut values = [0u64; 3];
            if record.id == IRQSOFF.id() && Decoder::new(record.payload).u64s(&mut values) {
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
/// until `stop` says so (checked between records: the shell stops on a key press), a
/// write fails (a pipe that has all it wants), or, once it has printed records, the
/// instance's recording is off and the rings are dry; `wait` waits for more (see
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
    let read = core::cell::Cell::new(false);
    let each = |record: &RecordRef<'_>| {
        read.set(true);
        writer.borrow_mut().write(&mut **out.borrow_mut(), record).is_ok()
    };
    // The output may want no more once the pending line is out (a `head` that has
    // its lines): an empty write says so, and the read ends without waiting. As
    // Linux's, a read that has had records ends once its instance's recording is
    // off and the rings are dry; one that has had none waits for recording to start.
    let drained = || {
        flush();
        if read.get() && !instance.tracing() {
            return false;
        }
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
/// `stop` says so (checked between records). It reads the instance's live buffer
/// whichever that is: after a snapshot swap (checked before each record) or a new
/// buffer (a resize, a snapshot allocated or freed: checked when the rings run dry),
/// the new one, leaving what the old one holds to the snapshot, as ftrace's pipe
/// does. Returns each CPU's events lost after the last record returned (a writer
/// that raced the end), or an error text if the rings cannot be read (another
/// consuming reader has them).
pub fn consume(
    instance: &Instance<'_, KernelPlatform>,
    cpu: Option<usize>,
    mut stop: impl FnMut() -> bool,
    mut each: impl FnMut(&RecordRef<'_>) -> bool,
    mut wait: impl FnMut() -> bool,
) -> Result<alloc::vec::Vec<(usize, u64)>, &'static str> {
    let tracer = instance.tracer();
    let cpus: alloc::vec::Vec<usize> = match cpu {
        Some(cpu) => alloc::vec![cpu],
        None => (0..tracer.cpus()).collect(),
    };
    loop {
        let recorder = instance.recorder();
        let live = recorder.live();
        let mut consumers = alloc::vec::Vec::new();
        for &cpu in &cpus {
            consumers.push(live.consumer(cpu).map_err(|_| "trace_pipe is open already")?);
        }
        let mut merged = trace::ring::Merged::new(consumers);
        let moved = || !core::ptr::eq(recorder.live(), live);
        let ended = 'read: loop {
            let mut stopped = stop();
            while !stopped && !moved() {
                let Some(record) = merged.next_record() else { break };
                stopped = !each(&record);
                stopped |= stop();
            }
            if stopped || moved() {
                break 'read stopped;
            }
            if !wait() {
                break 'read true;
            }
            if !alloc::sync::Arc::ptr_eq(&instance.recorder(), &recorder) {
                break 'read false;
            }
        };
        if ended {
            let lost = merged.cursors_mut().map(|c| (c.cpu(), c.take_lost()));
            return Ok(lost.filter(|&(_, count)| count > 0).collect());
        }
    }
}
