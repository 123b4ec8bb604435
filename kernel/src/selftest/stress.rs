//! `stress`: tracing under real concurrency, after Linux's ring buffer start-up
//! test. Every application processor fires the `stress:event` tracepoint at full
//! speed from a thread loop; meanwhile the boot CPU consumes every ring, fires events
//! of its own, and hammers the others with IPIs and NMIs whose handlers fire nested
//! events, as does every CPU's timer interrupt. The events go to the `stress`
//! instance (kept afterwards: its `per_cpu/cpuN/stats` show the run). At the end
//! each CPU's statistics are checked against the invariant and against independent
//! counts of what was attempted and consumed.
//!
//! With `cycle N` the boot CPU also arms and disarms the `stress:cycled` event N
//! times during the run (enabled and disabled in the `stress-keys` instance, nothing
//! else enables it), so its sites are patched between NOP and jump while every CPU
//! executes them, in thread, interrupt and NMI context; that instance's accounting
//! must balance too. With `cycle N functions` each cycle turns the function tracer
//! on instead (`function` and `function_graph` in turn, every traceable function)
//! and off again, so every function entry is patched while its function runs
//! (the stress writers and the interrupt hooks are traced too); the top-level
//! instance's accounting must balance and every hooked call must have returned. As
//! it takes the function tracers over, it is refused while one is in use.

use crate::arch::apic::{self, Destination, Ipi};
use crate::arch::{MAX_CPUS, idt, percpu};
use crate::events::{CYCLED, STRESS};
use crate::tracing::functions::{self as ft, Kind};
use crate::tracing::{self, KernelPlatform};
use crate::{clock, println, smp, timer};
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use spin::RwLock;
use trace::{Instance, InstanceConfig, Mode};

/// Bytes per CPU ring: small, so that rings fill and wrap many times.
const RING_BYTES: usize = 16 * 1024;
/// The instance the stress events go to.
pub const INSTANCE: &str = "stress";
/// Longest run accepted, in milliseconds.
pub const MAX_MS: u64 = 10_000;
/// Most arm/disarm cycles one run accepts.
pub const MAX_CYCLES: u32 = 100_000;
/// How long a run may go on past its duration to finish its cycles, in milliseconds:
/// 8 minutes. Each cycle patches every site three times and waits for every CPU each
/// time; under TCG with another 4-CPU guest on the same two host cores, 1,000 cycles
/// of every traceable function have taken over 2 minutes.
const CYCLES_EXTRA_MS: u64 = 480_000;
/// The instance `stress:cycled` is enabled in.
const KEYS_INSTANCE: &str = "stress-keys";
/// The instance that traces functions with the top level in a `cycle N functions`
/// run, with the other tracer.
const FUNCTIONS_INSTANCE: &str = "stress-functions";

/// Why a `cycle N functions` run is refused while the function tracers are in use.
const FUNCTIONS_BUSY: &str = "cycle N functions takes the function tracers over: every \
                              current_tracer must be nop and function_profile_enabled 0";

/// Where a stress event was written from.
#[derive(Clone, Copy)]
#[repr(u8)]
enum Source {
    Thread = 0,
    Timer = 1,
    Ipi = 2,
    Nmi = 3,
}
const SOURCES: usize = 4;

/// Per-CPU counts kept by the test itself, independently of the ring's.
struct CpuCounts {
    /// Writes attempted, per source.
    attempted: [AtomicU64; SOURCES],
}

/// One stress run, shared with the interrupt hooks while it is published.
struct Run {
    instance: Instance<'static, KernelPlatform>,
    stop: AtomicBool,
    writers_done: AtomicUsize,
    counts: [CpuCounts; MAX_CPUS],
}

/// The run in progress. Hooks in interrupt and NMI context only `try_read` it, so
/// they never spin, and never drop the last reference (the shell holds one until the
/// run is unpublished), so they never free. Taking it for writing waits until no hook
/// is inside a write, which makes the end of a run a quiescent point.
static RUN: RwLock<Option<Arc<Run>>> = RwLock::new(None);

impl Run {
    fn record(&self, source: Source) {
        let cpu = percpu::index();
        let counts = &self.counts[cpu];
        let seq = counts.attempted[source as usize].fetch_add(1, Ordering::Relaxed);
        // The writer's local APIC id, read from the hardware, lets the reader check
        // that the ring the platform chose (from GS) is really this CPU's.
        trace::emit!(STRESS, apic::id(), source as u8, seq);
        trace::emit!(CYCLED, seq);
    }
}

fn hook(source: Source) {
    if let Some(guard) = RUN.try_read()
        && let Some(run) = guard.as_ref()
    {
        run.record(source);
    }
}

/// Adds the hooks that write from the timer interrupt, the test IPI and the NMI
/// (they write only while a run is published).
pub fn init() -> Result<(), &'static str> {
    timer::TICK.add(|_| hook(Source::Timer))?;
    idt::TEST.add(|| hook(Source::Ipi))?;
    idt::NMI.add(|| hook(Source::Nmi))
}

/// The writer loop each application processor runs.
fn writer() {
    let Some(run) = RUN.read().clone() else { return };
    while !run.stop.load(Ordering::Relaxed) {
        run.record(Source::Thread);
    }
    run.writers_done.fetch_add(1, Ordering::Release);
}

/// What the boot CPU's consumer saw of one CPU's ring.
#[derive(Clone, Copy, Default)]
struct Consumed {
    records: u64,
    lost: u64,
    /// Records found in this ring that another CPU wrote (by local APIC id).
    foreign: u64,
}

/// Runs the stress test in `mode` for `ms` milliseconds, arming and disarming
/// `stress:cycled` `cycles` times meanwhile (going on until they are done, for at
/// most 8 minutes more), with `functions` turning the function tracer on and off
/// with each, and prints the report. Returns whether every check passed. With
/// `panic`, the boot CPU panics at the end instead, while every other CPU still
/// writes: the panic stops them wherever they are, in the middle of writes among it.
pub fn run(
    mode: Mode,
    ms: u64,
    cycles: u32,
    functions: bool,
    panic: bool,
) -> Result<bool, &'static str> {
    let cpus = smp::online();
    let tracer = tracing::tracer().ok_or("tracing is not available")?;
    // The run sets the top level's function tracer and lists itself, and checks that
    // every call its tracers hooked returned: a tracer or the profiler already on
    // would be replaced, and its calls in progress (the shell's own) are not the run's.
    if functions && (tracer.functions_traced() || tracer.function_profile()) {
        return Err(FUNCTIONS_BUSY);
    }
    let config = InstanceConfig { bytes_per_cpu: RING_BYTES, mode, snapshot: false };
    let instance =
        tracer.get_or_create(INSTANCE, config).map_err(|_| "cannot create the stress instance")?;
    // A fresh run: empty rings and zeroed counters, this run's mode, only this event.
    instance.set_tracing(false);
    instance.clear().map_err(|_| "the stress instance is busy (trace_pipe open?)")?;
    instance.set_mode(mode).map_err(|_| "the stress instance's tracer is irqsoff")?;
    let _ = instance.set_event(None, None, false);
    instance.set_event(Some("stress"), Some("event"), true).map_err(|_| "no stress:event")?;
    instance.set_tracing(true);
    let counts = core::array::from_fn(|_| CpuCounts {
        attempted: core::array::from_fn(|_| AtomicU64::new(0)),
    });
    let run = Arc::new(Run {
        instance,
        stop: AtomicBool::new(false),
        writers_done: AtomicUsize::new(0),
        counts,
    });
    let mut keyed = if cycles > 0 {
        let config = InstanceConfig { bytes_per_cpu: RING_BYTES, mode, snapshot: false };
        let name = if functions { FUNCTIONS_INSTANCE } else { KEYS_INSTANCE };
        let keyed = tracer.get_or_create(name, config).map_err(|_| "cannot create the instance")?;
        keyed.set_tracing(false);
        keyed.clear().map_err(|_| "the cycles' instance is busy (trace_pipe open?)")?;
        keyed.set_mode(mode).map_err(|_| "the cycles' instance's tracer is irqsoff")?;
        let _ = keyed.set_event(None, None, false);
        keyed.set_tracing(true);
        Some(keyed)
    } else {
        None
    };
    let (mut cycled, mut armed) = (0, false);
    if let Some(other) = keyed.as_ref().filter(|_| functions) {
        for instance in [&tracer.top(), other] {
            for list in ft::List::ALL {
                ft::write_list(instance, list, "", false)
                    .map_err(|_| "cannot select every function")?;
            }
        }
    }
    let recorder = run.instance.recorder();
    let mut consumers = (0..cpus)
        .map(|cpu| recorder.live().consumer(cpu))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| "cannot open the stress rings' consumers")?;
    {
        let mut slot = RUN.write();
        if slot.is_some() {
            return Err("a stress run is in progress");
        }
        *slot = Some(Arc::clone(&run));
    }
    let mut consumed = [Consumed::default(); MAX_CPUS];
    let mut corrupt = false;
    let posted = smp::post_work(writer);
    let start = clock::now_ns();
    if posted.is_ok() {
        let deadline = start + ms * 1_000_000;
        // Cycles still to run extend the run, up to a bound.
        let last = deadline + CYCLES_EXTRA_MS * 1_000_000;
        let mut round = 0usize;
        while clock::now_ns() < deadline || (cycled < cycles && clock::now_ns() < last) {
            for (cpu, consumer) in consumers.iter_mut().enumerate() {
                corrupt |= drain(consumer, cpu, &mut consumed[cpu], 64).is_err();
            }
            run.record(Source::Thread);
            if cpus > 1 {
                let target =
                    percpu::get(1 + round % (cpus - 1)).expect("online CPUs have per-CPU data");
                let ipi = if round % 8 == 7 { Ipi::Nmi } else { Ipi::Fixed(apic::TEST_VECTOR) };
                apic::send_ipi(Destination::Apic(target.apic_id()), ipi);
            }
            // Armed (or on) for one round, disarmed (off) for the next.
            if cycled < cycles && toggle(&mut keyed, functions, !armed, cycled) {
                armed = !armed;
                cycled += u32::from(!armed);
            }
            round += 1;
        }
        if panic {
            panic!("stress: a panic on purpose while every CPU writes");
        }
    }
    run.stop.store(true, Ordering::Relaxed);
    // Writers that picked the run up finish their loop; a CPU whose work was never
    // posted never starts one.
    let writers = if posted.is_ok() { cpus - 1 } else { 0 };
    while run.writers_done.load(Ordering::Acquire) < writers {
        core::hint::spin_loop();
    }
    // Quiescent point: once the lock is ours, no hook is inside a write, and none
    // starts another.
    RUN.write().take();
    let _ = run.instance.set_event(None, None, false);
    if let Some(keyed) = &keyed {
        if functions && armed {
            let _ = tracer.top().set_function_tracer(Kind::Nop);
            let _ = keyed.set_function_tracer(Kind::Nop);
        }
        let _ = keyed.set_event(None, None, false);
    }
    posted?;
    for (cpu, consumer) in consumers.iter_mut().enumerate() {
        corrupt |= drain(consumer, cpu, &mut consumed[cpu], 0).is_err();
        consumed[cpu].lost += consumer.lost_pending();
    }
    drop(consumers);
    let ms = clock::now_ns().saturating_sub(start) / 1_000_000;
    let pass = report(&run, mode, ms, &consumed[..cpus], corrupt);
    Ok(match keyed {
        Some(other) if functions => report_functions(&other, cpus, cycled, cycles) && pass,
        Some(keyed) => report_cycles(&keyed, cpus, cycled, cycles) && pass,
        None => pass,
    })
}

/// One step of a cycle: arms or disarms `stress:cycled` in `keyed`, or with
/// `functions` turns the function tracers on (`function` in the top level and
/// `function_graph` in `keyed` in even cycles, the other way round in odd ones) or
/// off; in even cycles `keyed` is turned off by destroying it, its tracer on, and
/// creating it again. Returns whether it took effect.
fn toggle(
    keyed: &mut Option<Instance<'static, KernelPlatform>>,
    functions: bool,
    on: bool,
    cycle: u32,
) -> bool {
    let Some(instance) = keyed.as_ref() else { return false };
    if !functions {
        return instance.set_event(Some("stress"), Some("cycled"), on).is_ok();
    }
    let tracer = instance.tracer();
    let (top, other) = match (on, cycle % 2) {
        (false, _) => (Kind::Nop, Kind::Nop),
        (true, 0) => (Kind::Function, Kind::Graph),
        (true, _) => (Kind::Graph, Kind::Function),
    };
    let top = tracer.top().set_function_tracer(top).is_ok();
    if on || cycle % 2 == 1 {
        return top && instance.set_function_tracer(other).is_ok();
    }
    // Destroyed while it traces: its slot's functions are released under the
    // running CPUs, and the instance comes back with `nop` and empty lists.
    let Some(instance) = keyed.take() else { return false };
    let name = String::from(instance.name());
    let config = InstanceConfig {
        bytes_per_cpu: instance.bytes_per_cpu(),
        mode: instance.mode(),
        snapshot: false,
    };
    let destroyed = tracer.destroy(instance).is_ok();
    *keyed = tracer.get_or_create(&name, config).ok();
    let fresh = keyed.as_ref().is_some_and(|i| i.function_tracer() == Ok(Kind::Nop));
    top && destroyed && fresh
}

/// Reports the function tracers' on/off cycles and checks the accounting of the
/// top-level instance and of `other`, and that every hooked call returned; returns
/// whether all held.
fn report_functions(
    other: &Instance<'static, KernelPlatform>,
    cpus: usize,
    cycled: u32,
    cycles: u32,
) -> bool {
    let mut balanced = true;
    let mut written = [0; 2];
    for (instance, written) in [other.tracer().top(), other.clone()].iter().zip(&mut written) {
        // The top level records the default events all the time: its counts hold
        // still (a quiescent point) only with recording off, after a grace period.
        let on = instance.tracing();
        instance.set_tracing(false);
        let stats: Vec<_> = (0..cpus).map(|cpu| instance.stats(cpu)).collect();
        instance.set_tracing(on);
        for (cpu, stats) in stats.iter().enumerate() {
            if !stats.as_ref().is_ok_and(|s| s.balanced()) {
                balanced = false;
                println!("functions: {:?} cpu{cpu} does not balance: {stats:?}", instance.name());
            }
        }
        *written = stats.iter().flatten().map(|s| s.written).sum();
    }
    let hooked = ft::hooked_calls();
    let off =
        [other.tracer().top(), other.clone()].iter().all(|i| i.function_tracer() == Ok(Kind::Nop));
    let pass = balanced && hooked == 0 && cycled == cycles && off;
    println!(
        "functions: tracers on and off {cycled} of {cycles} times over {} functions, {hooked} \
         hooked calls left, top level {} written, {FUNCTIONS_INSTANCE} {} | {}",
        ft::functions().len(),
        written[0],
        written[1],
        if pass { "invariant ok" } else { "FAILED" }
    );
    pass
}

/// Reports the arm/disarm cycles of `stress:cycled` and checks its instance's
/// accounting; returns whether every cycle ran and every CPU balances.
fn report_cycles(
    keyed: &Instance<'static, KernelPlatform>,
    cpus: usize,
    cycled: u32,
    cycles: u32,
) -> bool {
    let mut written = 0;
    let mut balanced = true;
    for cpu in 0..cpus {
        match keyed.stats(cpu) {
            Ok(stats) => {
                written += stats.written;
                balanced &= stats.balanced();
            }
            Err(_) => balanced = false,
        }
    }
    let pass = balanced && cycled == cycles;
    println!(
        "keys: stress:cycled armed and disarmed {cycled} of {cycles} times, {written} recorded \
         while armed | {}",
        if pass { "invariant ok" } else { "FAILED" }
    );
    pass
}

/// Consumes up to `limit` records (0: all) from one ring, checking each.
fn drain(
    consumer: &mut trace::ring::Consumer<'_>,
    cpu: usize,
    seen: &mut Consumed,
    limit: usize,
) -> Result<(), ()> {
    let mut taken = 0;
    while limit == 0 || taken < limit {
        match consumer.next_record() {
            Ok(Some(record)) => {
                seen.records += 1;
                seen.lost += record.lost;
                let apic_id = record.payload.first_chunk::<4>().map(|id| u32::from_le_bytes(*id));
                let own = percpu::get(cpu).map(|c| c.apic_id());
                if record.cpu != cpu || apic_id.is_none() || apic_id != own {
                    seen.foreign += 1;
                }
                taken += 1;
            }
            Ok(None) => return Ok(()),
            Err(_) => return Err(()),
        }
    }
    Ok(())
}

fn report(run: &Run, mode: Mode, ms: u64, consumed: &[Consumed], corrupt: bool) -> bool {
    let name = mode_name(mode);
    println!(
        "stress {name}: {} CPU(s), {ms} ms, {} KiB per CPU ring",
        consumed.len(),
        RING_BYTES / 1024
    );
    let mut pass = !corrupt;
    for (cpu, seen) in consumed.iter().enumerate() {
        let Ok(stats) = run.instance.stats(cpu) else {
            pass = false;
            continue;
        };
        let counts = &run.counts[cpu];
        let by_source: [u64; SOURCES] =
            core::array::from_fn(|s| counts.attempted[s].load(Ordering::Relaxed));
        let attempted: u64 = by_source.iter().sum();
        let checks = [
            ("invariant", stats.balanced()),
            ("written==attempted", stats.written == attempted),
            ("read==consumed", stats.read == seen.records),
            ("lost==overrun+dropped", seen.lost == stats.overrun + stats.dropped),
            ("own-cpu", seen.foreign == 0),
        ];
        let failed: Vec<&str> =
            checks.iter().filter(|(_, ok)| !ok).map(|(what, _)| *what).collect();
        pass &= failed.is_empty();
        println!(
            "cpu{cpu}: written {} entries {} read {} overrun {} dropped {} | thread {} timer {} ipi {} nmi {} | {}",
            stats.written,
            stats.entries,
            stats.read,
            stats.overrun,
            stats.dropped,
            by_source[Source::Thread as usize],
            by_source[Source::Timer as usize],
            by_source[Source::Ipi as usize],
            by_source[Source::Nmi as usize],
            if failed.is_empty() {
                "invariant ok".into()
            } else {
                alloc::format!("FAILED {failed:?}")
            },
        );
    }
    if corrupt {
        println!("stress {name}: a ring reported corruption");
    }
    println!("stress {name}: {}", if pass { "PASS" } else { "FAIL" });
    pass
}

/// The name of a mode as the shell spells it.
fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Overwrite => "overwrite",
        Mode::Discard => "discard",
    }
}
