//! The trace dump: on panic (and on the `dump` command) the recorded events go to
//! the serial line twice: as human-readable lines merged in time order, then as the
//! compact, checksummed machine-readable block (`trace::dump`) that
//! `cargo run -- report LOG` reads. Each instance's live buffer is a section of the
//! dump, and its snapshot (when one holds data) another beside it, as
//! [`DumpConfig::buffers`] chooses. The panic path takes no lock that another CPU
//! may hold and writes through the emergency console.

use crate::sync::IrqMutex;
use crate::tracing::{self, KernelPlatform};
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Acquire, Ordering::Release};
use trace::dump::{BufferKind, DumpWriter, PanicHeader};
use trace::tracer::DumpSelection;
use trace::{Tracer, ring::Buffer};

/// Which CPUs' records a dump carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cpus {
    /// Every CPU's.
    All,
    /// Only the panicking (or dumping) CPU's, like `ftrace_dump_on_oops=orig_cpu`.
    Origin,
}

impl Cpus {
    /// The words that choose the CPUs, as the shell takes them.
    const NAMES: [(&str, Cpus); 2] = [("all", Cpus::All), ("orig_cpu", Cpus::Origin)];

    /// The CPUs word `name` chooses, if any.
    pub fn from_name(name: &str) -> Option<Cpus> {
        Self::NAMES.iter().find(|(n, _)| *n == name).map(|(_, cpus)| *cpus)
    }

    /// The word for these CPUs.
    pub fn name(self) -> &'static str {
        Self::NAMES.iter().find(|(_, c)| *c == self).map_or("all", |(name, _)| name)
    }
}

/// Which buffers of each instance a dump carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buffers {
    /// The live buffers only.
    Live,
    /// The snapshots only (of the instances that have one holding data).
    Snapshot,
    /// Both: each instance's live buffer, then its snapshot if it holds data.
    Both,
}

impl Buffers {
    /// The words that choose the buffers, as the shell takes them.
    const NAMES: [(&str, Buffers); 3] =
        [("live", Buffers::Live), ("snapshot", Buffers::Snapshot), ("both", Buffers::Both)];

    /// The buffers word `name` chooses, if any.
    pub fn from_name(name: &str) -> Option<Buffers> {
        Self::NAMES.iter().find(|(n, _)| *n == name).map(|(_, buffers)| *buffers)
    }

    /// The word for these buffers.
    pub fn name(self) -> &'static str {
        Self::NAMES.iter().find(|(_, b)| *b == self).map_or("both", |(name, _)| name)
    }
}

/// What a dump carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DumpConfig {
    /// Which CPUs.
    pub cpus: Cpus,
    /// Which buffers of each instance.
    pub buffers: Buffers,
    /// At most this many of the newest records per section (`None`: all).
    pub last: Option<u64>,
    /// Only these instances (`None`: all; the top-level one is named `top`).
    pub instances: Option<Vec<String>>,
}

impl DumpConfig {
    const DEFAULT: DumpConfig =
        DumpConfig { cpus: Cpus::All, buffers: Buffers::Both, last: None, instances: None };

    /// Whether the dump carries instance `name`: the ones named, or without names
    /// every instance but `boot_map` (the top level's events again, already in
    /// memory that survives the reboot; `dump instance boot_map` dumps it).
    fn wants(&self, name: &str) -> bool {
        let name = if name.is_empty() { "top" } else { name };
        match &self.instances {
            Some(names) => names.iter().any(|n| n == name),
            None => name != crate::persist::BOOT_MAP,
        }
    }
}

/// The configuration the panic path uses.
static ON_PANIC: IrqMutex<DumpConfig> = IrqMutex::new(DumpConfig::DEFAULT);

/// Sets what a panic dumps.
pub fn set_on_panic(config: DumpConfig) {
    *ON_PANIC.lock() = config;
}

/// What a panic dumps.
pub fn on_panic() -> DumpConfig {
    ON_PANIC.lock().clone()
}

/// Set by [`panic_in_the_dump`]: how many lines of its block the next panic's dump
/// writes before it panics (a test aid); `usize::MAX`: it does not panic.
static PANIC_IN_DUMP: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Makes the next panic's dump panic, as it starts (`chunks` 0) or once its block
/// holds `chunks` chunk lines (a test aid for the panic path's way out when its dump
/// fails, and for what the host tool makes of a dump cut short).
pub fn panic_in_the_dump(chunks: usize) {
    PANIC_IN_DUMP.store(chunks, Release);
}

/// The panic [`panic_in_the_dump`] asks for.
fn deliberate_panic() -> ! {
    panic!("deliberate panic in the trace dump")
}

/// The console for a dump that must panic at chunk line `chunks_left` of its block
/// (see [`panic_in_the_dump`]): the block's lines are each one piece, so a piece
/// that starts a chunk line after the begin marker counts one.
struct PanicsPartWay<'a> {
    out: &'a mut dyn Write,
    in_block: bool,
    chunks_left: usize,
}

impl Write for PanicsPartWay<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        if self.in_block && s.starts_with("TD ") {
            if self.chunks_left == 0 {
                deliberate_panic();
            }
            self.chunks_left -= 1;
        }
        self.in_block |= s == trace::dump::BEGIN;
        self.out.write_str(s)
    }
}

/// The panic handler's dump of `panic`: recording stops everywhere, then the dump
/// is written with the panic configuration (the default if its lock cannot be had),
/// read in place: a copy of its instance names would allocate, which a panic holding
/// the heap's lock cannot.
pub fn panic_dump(panic: PanicHeader<'_>) {
    let Some(tracer) = tracing::tracer() else { return };
    tracer.stop_all();
    let console = &mut crate::arch::uart::EmergencyConsole;
    let mut failing;
    let console: &mut dyn Write = match PANIC_IN_DUMP.load(Acquire) {
        usize::MAX => console,
        0 => deliberate_panic(),
        chunks_left => {
            failing = PanicsPartWay { out: console, in_block: false, chunks_left };
            &mut failing
        }
    };
    match ON_PANIC.try_lock() {
        Some(config) => write(tracer, &config, Some(panic), console),
        None => write(tracer, &DumpConfig::DEFAULT, Some(panic), console),
    }
}

/// The dump a `dump` or `cpudump` function command prints (CPU `cpu`'s records
/// only, or every CPU's), from the hooked function's context: as a panic's, it
/// turns recording off in every instance (as ftrace's dump turns tracing off),
/// takes no lock another CPU may hold and writes through the emergency console.
/// One at a time: a command that meets another's dump prints nothing (`false`).
fn command_dump(cpu: Option<usize>) -> bool {
    static RUNNING: AtomicBool = AtomicBool::new(false);
    let Some(tracer) = tracing::tracer() else { return false };
    if RUNNING.swap(true, Acquire) {
        return false;
    }
    tracer.stop_all();
    let cpus = if cpu.is_some() { Cpus::Origin } else { Cpus::All };
    let config = DumpConfig { cpus, ..DumpConfig::DEFAULT };
    write(tracer, &config, None, &mut crate::arch::uart::EmergencyConsole);
    RUNNING.store(false, Release);
    true
}

/// Makes [`command_dump`] what the `dump` and `cpudump` function commands print.
pub fn init() {
    tracing::set_dump(command_dump);
}

/// A live dump to `out` (the `dump` command). Writes into the buffers it dumps are
/// held off until it ends (as `pause-on-trace` holds them while `trace` is read; a
/// ftrace dump turns tracing off), so that its text and its block hold the same
/// records, those of the moment it began.
pub fn live_dump(config: &DumpConfig, out: &mut dyn Write) -> Result<(), &'static str> {
    let tracer = tracing::tracer().ok_or("tracing is not available")?;
    let named = tracer.instances().map_err(|_| "the dump needs thread context")?;
    let dumped = core::iter::once(tracer.top()).chain(named).filter(|i| config.wants(i.name()));
    let recorders: Vec<_> = dumped.map(|instance| instance.recorder()).collect();
    let buffers: Vec<&Buffer<KernelPlatform>> = recorders
        .iter()
        .flat_map(|recorder| [Some(recorder.live()), recorder.snapshot()])
        .flatten()
        .collect();
    with_writes_held(&buffers, &mut || write(tracer, config, None, out));
    Ok(())
}

/// Runs `body` with writes into each of `buffers` held off.
fn with_writes_held(buffers: &[&Buffer<KernelPlatform>], body: &mut dyn FnMut()) {
    match buffers {
        [] => body(),
        [first, rest @ ..] => first.with_writes_held(|_| with_writes_held(rest, body)),
    }
}

/// Writes the dump `config` chooses of `tracer` to `out`, with `panic` in its
/// header (see [`Tracer::write_dump`]).
fn write(
    tracer: &Tracer<KernelPlatform>,
    config: &DumpConfig,
    panic: Option<PanicHeader<'_>>,
    out: &mut dyn Write,
) {
    let cpus = match config.cpus {
        Cpus::All => 0..tracer.cpus(),
        Cpus::Origin => {
            let cpu = crate::arch::percpu::index();
            cpu..cpu + 1
        }
    };
    let selection = DumpSelection {
        cpus,
        live: config.buffers != Buffers::Snapshot,
        snapshot: config.buffers != Buffers::Live,
        last: config.last,
        instances: &|name| config.wants(name),
        // ftrace's default columns, timestamps in nanoseconds, whatever the
        // instances' display options: the text is read beside the block `report`
        // decodes, and must not depend on a shell setting.
        ..DumpSelection::all(tracer.cpus())
    };
    tracer.write_dump(&selection, panic, out);
}

/// Streams `trace_pipe_raw` (all CPUs of `instance`, or one) to `out` as a dump that
/// grows while it is read: the header, descriptors, the instance's section and its
/// statistics first, so the stream describes itself, then its records chunk by
/// chunk as a consuming reader takes them (as `trace_pipe` does), each CPU's lost
/// events as lost items. The partial chunk is flushed whenever the reader waits, so
/// events reach the host promptly; `wait` then waits for more (see
/// [`tracing::consume`]). Ends when `stop` says so (the shell stops on a key
/// press) or a write fails, with the final statistics, the descriptors again and
/// the end marker. Returns an error text if the rings cannot be read.
pub fn stream_raw(
    out: &mut dyn Write,
    instance: &trace::Instance<'_, KernelPlatform>,
    cpu: Option<usize>,
    stop: impl FnMut() -> bool,
    mut wait: impl FnMut(),
) -> Result<(), &'static str> {
    let tracer = instance.tracer();
    let cpus = cpu.map_or(0..tracer.cpus(), |cpu| cpu..cpu + 1);
    let failed = core::cell::Cell::new(false);
    let writer = core::cell::RefCell::new(DumpWriter::begin(|line: &str| {
        failed.set(failed.get() || writeln!(out, "{line}").is_err());
    }));
    let stats = |writer: &mut DumpWriter<_>| {
        for cpu in cpus.clone() {
            if let Ok(stats) = instance.stats(cpu) {
                writer.cpu_stats(0, cpu, &stats);
            }
        }
    };
    {
        let mut w = writer.borrow_mut();
        w.header(tracer.cpus(), None, crate::symbols::fingerprint());
        for descriptor in tracer.events() {
            w.descriptor(descriptor);
        }
        w.section(0, instance.name(), BufferKind::Live, instance.clock());
        stats(&mut w);
        w.flush();
    }
    let read = tracing::consume(
        instance,
        cpu,
        stop,
        |record| {
            let mut w = writer.borrow_mut();
            w.lost(0, record.cpu, record.lost);
            w.record(0, record, tracer.descriptor(record.id));
            !failed.get()
        },
        || {
            writer.borrow_mut().flush();
            if !failed.get() {
                wait();
            }
            !failed.get()
        },
    );
    let mut writer = writer.into_inner();
    for &(cpu, lost) in read.as_deref().unwrap_or_default() {
        writer.lost(0, cpu, lost);
    }
    stats(&mut writer);
    for descriptor in tracer.events() {
        writer.descriptor(descriptor);
    }
    writer.finish();
    read.map(drop)
}
