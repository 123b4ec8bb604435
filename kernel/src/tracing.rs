//! The kernel's side of the `trace` crate: the platform, and the one tracer.

use crate::arch::{irq, membarrier, percpu};
use crate::{barrier, clock};
use core::fmt::{self, Write};
use core::sync::atomic::Ordering::Relaxed;
use spin::Once;
use trace::text::{self, Line};
use trace::{
    Activity, Context, Instance, InstanceConfig, Limits, Mode, Tracer, TracerError,
    event::DescriptorKind, ring::Buffer, ring::RecordRef,
};

/// The top-level instance's buffer: per CPU.
const TOP_BYTES_PER_CPU: usize = 256 * 1024;
/// Ring buffer memory all instances together may use.
const MAX_TRACE_BYTES: usize = 64 << 20;
/// Most instances, the top-level one included.
const MAX_INSTANCES: usize = 16;

static TRACER: Once<Tracer<KernelPlatform>> = Once::new();

/// Builds the tracer over every descriptor the linker collected, installs it as
/// the destination of all tracepoints and of the `log` crate, and enables every
/// event in the top-level instance but the (very noisy) heap events and the
/// benchmark's and stress test's.
pub fn init(cpus: usize) -> Result<&'static Tracer<KernelPlatform>, TracerError> {
    let limits = Limits { max_instances: MAX_INSTANCES, max_total_bytes: MAX_TRACE_BYTES };
    let top =
        InstanceConfig { bytes_per_cpu: TOP_BYTES_PER_CPU, mode: Mode::Overwrite, snapshot: false };
    let tracer = Tracer::new(KernelPlatform, cpus, trace::linked_events!(), limits, top)?;
    let tracer = TRACER.call_once(|| tracer);
    if trace::install(tracer).is_ok() {
        let _ = log::set_logger(&trace::event::log::LOGGER);
        log::set_max_level(log::LevelFilter::Info);
        default_events(&tracer.top());
    }
    Ok(tracer)
}

/// Enables the default events in `instance`: every event but the (very noisy) heap
/// events and the benchmark's and stress test's.
pub fn default_events(instance: &Instance<'_, KernelPlatform>) {
    let _ = instance.set_event(None, None, true);
    let _ = instance.set_event(Some("kmem"), None, false);
    let _ = instance.set_event(Some("bench"), None, false);
    let _ = instance.set_event(Some("stress"), None, false);
}

/// The tracer, once `init` has run.
pub fn tracer() -> Option<&'static Tracer<KernelPlatform>> {
    TRACER.get()
}

/// What `trace` needs from the kernel: the CPU index from per-CPU data (callable from
/// any context), the TSC clock in nanoseconds, the writer's context (handlers open on
/// the CPU, whether its thread is busy, the interrupt flag), and the asymmetric memory
/// barrier: a compiler fence for writers, an IPI to every other CPU for control
/// operations.
#[derive(Clone, Copy, Debug, Default)]
pub struct KernelPlatform;

impl trace::Platform for KernelPlatform {
    #[inline(always)]
    fn cpu(&self) -> usize {
        percpu::index()
    }

    #[inline(always)]
    fn now(&self) -> u64 {
        clock::now_ns()
    }

    #[inline(always)]
    fn light_barrier(&self) {
        membarrier::light();
    }

    fn heavy_barrier(&self) {
        barrier::all_cpus();
    }

    fn may_wait(&self) -> bool {
        irq::may_wait()
    }

    #[inline(always)]
    fn context(&self) -> Context {
        let handlers = irq::handlers();
        let activity = match handlers {
            irq::Handlers { nmi: true, irqs } => Activity::Nmi { in_irq: irqs > 0 },
            irq::Handlers { irqs: 0, .. } if percpu::current().busy.load(Relaxed) => Activity::Task,
            irq::Handlers { irqs: 0, .. } => Activity::Idle,
            irq::Handlers { irqs, .. } => Activity::Irq { depth: irqs.min(3) as u8 },
        };
        Context::new(activity, irq::irqs_off())
    }

    fn stack_trace(&self, frames: &mut [u64]) -> usize {
        crate::arch::stack::stack_trace(frames)
    }
}

/// Writes one record as ftrace's trace line (see [`trace::text`]), the fields
/// formatted now from the event's descriptor (deferred formatting); timestamps in
/// microseconds, or nanoseconds.
pub fn write_record(
    out: &mut dyn Write,
    tracer: &Tracer<KernelPlatform>,
    record: &RecordRef<'_>,
    nanoseconds: bool,
) -> fmt::Result {
    let descriptor = tracer.descriptor(record.id);
    let line = Line {
        cpu: record.cpu,
        ts: record.ts,
        context: record.context,
        name: descriptor.map_or(Some("unknown_event"), |d| text::event_name(d.system, d.name)),
        lost: record.lost,
    };
    text::write_line(out, &line, nanoseconds, |out| match descriptor {
        Some(d) if d.kind == DescriptorKind::Event => {
            trace::event::format::render(out, d.format, d.fields, record.payload)
        }
        Some(d) => trace::event::format::render_tagged(out, d.format, record.payload),
        None => write!(out, "id={}", record.id),
    })
}

/// The `trace` file header: ftrace's, with the entries in the buffer and written.
fn write_header(
    out: &mut dyn Write,
    instance: &Instance<'_, KernelPlatform>,
    cpu: Option<usize>,
) -> fmt::Result {
    let cpus = instance.tracer().cpus();
    let (mut entries, mut written) = (0, 0);
    for stats in (0..cpus)
        .filter(|c| cpu.is_none_or(|only| only == *c))
        .filter_map(|c| instance.stats(c).ok())
    {
        entries += stats.entries;
        written += stats.written;
    }
    text::write_header(out, entries, written, cpus)
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
fn write_records(
    out: &mut dyn Write,
    tracer: &Tracer<KernelPlatform>,
    buffer: &Buffer<KernelPlatform>,
    cpu: Option<usize>,
    nanoseconds: bool,
    header: impl FnOnce(&mut dyn Write) -> fmt::Result,
) -> fmt::Result {
    let out = core::cell::RefCell::new(out);
    let result = core::cell::Cell::new(Ok(()));
    let read = for_each_record(
        buffer,
        cpu,
        || result.set(header(&mut **out.borrow_mut())),
        |record| {
            let out = &mut **out.borrow_mut();
            result.set(result.get().and_then(|()| write_record(out, tracer, record, nanoseconds)));
            result.get().is_ok()
        },
    );
    result.get()?;
    match read {
        Ok(()) => Ok(()),
        Err(error) => writeln!(out.borrow_mut(), "# (records unreadable: {error})"),
    }
}

/// The `trace` file (all CPUs merged in time order, or one CPU): header and every
/// record of the live buffer, not consumed. The header's counts are taken once the
/// records to list are fixed, so they cover them all.
pub fn write_trace(
    out: &mut dyn Write,
    instance: &Instance<'_, KernelPlatform>,
    cpu: Option<usize>,
    nanoseconds: bool,
) -> fmt::Result {
    let recorder = instance.recorder();
    write_records(out, instance.tracer(), recorder.live(), cpu, nanoseconds, |out| {
        write_header(out, instance, cpu)
    })
}

/// The snapshot buffer's records, merged in time order.
pub fn write_snapshot(
    out: &mut dyn Write,
    instance: &Instance<'_, KernelPlatform>,
    nanoseconds: bool,
) -> fmt::Result {
    match instance.recorder().snapshot() {
        Some(snapshot) => {
            write_records(out, instance.tracer(), snapshot, None, nanoseconds, |_| Ok(()))
        }
        None => Ok(()),
    }
}

/// `per_cpu/cpuN/stats`, ftrace's fields (timestamps in µs) plus `written`.
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
    write!(out, "oldest event ts: ")?;
    text::write_timestamp(out, stats.oldest_ts.unwrap_or(0), false)?;
    write!(out, "\nnow ts: ")?;
    text::write_timestamp(out, clock::now_ns(), false)?;
    writeln!(out, "\ndropped events: {}", stats.dropped)?;
    writeln!(out, "read events: {}", stats.read)?;
    writeln!(out, "written: {}", stats.written)
}

/// Streams `trace_pipe` (all CPUs, or one): consumes and prints records as they come,
/// until `stop` says so (checked between records: the shell stops on a key press) or
/// a write fails (a pipe that has all it wants). Returns an error text if the rings
/// cannot be read.
pub fn stream_pipe(
    out: &mut dyn Write,
    instance: &Instance<'_, KernelPlatform>,
    cpu: Option<usize>,
    nanoseconds: bool,
    stop: impl FnMut() -> bool,
) -> Result<(), &'static str> {
    let tracer = instance.tracer();
    let each = |record: &RecordRef<'_>| write_record(out, tracer, record, nanoseconds).is_ok();
    for (cpu, lost) in consume(instance, cpu, stop, each, || {})? {
        let _ = writeln!(out, "CPU:{cpu} [LOST {lost} EVENTS]");
    }
    Ok(())
}

/// The consuming reader behind the pipes: takes the records of `instance` (all
/// CPUs, or one) in time order as they come and hands each to `each` (which returns
/// false to end), calling `idle` before it waits for more, until `stop` says so
/// (checked between records). Returns each CPU's events lost after the last record
/// returned (a writer that raced the end), or an error text if the rings cannot be
/// read (another consuming reader has them).
pub fn consume(
    instance: &Instance<'_, KernelPlatform>,
    cpu: Option<usize>,
    mut stop: impl FnMut() -> bool,
    mut each: impl FnMut(&RecordRef<'_>) -> bool,
    mut idle: impl FnMut(),
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
        if stopped {
            let lost = merged.cursors_mut().map(|c| (c.cpu(), c.take_lost()));
            return Ok(lost.filter(|&(_, count)| count > 0).collect());
        }
        idle();
        crate::arch::irq::wait_for_interrupt_unless(crate::serial::input_pending);
    }
}
