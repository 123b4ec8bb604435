//! Misuse of the public API: inputs and call sequences a driver can reach, checked
//! against the project's rules (nothing reachable from input panics, aborts, hangs
//! or allocates without bound; a refused call changes nothing; misuse gets a clear
//! error). The first tests are of bugs they found (each failed before its fix); the
//! others check areas that held. Its own test binary: a tracer is installed once per
//! process.

#![allow(missing_docs)]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, MutexGuard, OnceLock};
use trace::ring::persist::{HEADER_WORDS, Region};
use trace::ring::{Buffer, Config, WriteError};
use trace::tracer::{HookError, TriggerError, TriggerReason};
use trace::{HostPlatform, Instance, InstanceConfig, InstanceError, Limits, Mode, Tracer};

trace::event! {
    /// Every kind of field.
    pub ALL = "misuse":"all" {
        a: u8, b: i16, c: u32, d: i64, e: bool, f: char, g: [u8; 4], h: &str,
    } => "a={a} b={b} c={c} d={d} e={e} f={f} g={g} h={h}";
    /// A second event, for enable/disable cycles.
    pub PING = "misuse":"ping" { n: u32 } => "n={n}";
    /// A third one.
    pub PONG = "misuse":"pong" { n: u32 } => "n={n}";
}

const CPUS: usize = 2;
const LIMIT: usize = 4 << 20;
const SMALL: InstanceConfig =
    InstanceConfig { bytes_per_cpu: 4096, mode: Mode::Overwrite, snapshot: false };

/// The binary's one tracer (tracepoints dispatch to the installed one), taken in turn
/// by the tests, with every instance but the top level removed.
fn tracer() -> MutexGuard<'static, &'static Tracer<HostPlatform>> {
    static TRACER: OnceLock<Mutex<&'static Tracer<HostPlatform>>> = OnceLock::new();
    let cell = TRACER.get_or_init(|| {
        let limits = Limits { max_instances: 8, max_total_bytes: LIMIT };
        let tracer = Tracer::new(HostPlatform, CPUS, trace::linked_events!(), limits, SMALL)
            .expect("tracer");
        let tracer = Box::leak(Box::new(tracer));
        trace::install(tracer).expect("first install");
        Mutex::new(tracer)
    });
    let guard = cell.lock().unwrap_or_else(|p| p.into_inner());
    // Every test starts from the top-level instance alone.
    for name in guard.instance_names().unwrap() {
        let _ = guard.destroy_by_name(&name);
    }
    HostPlatform::set_cpu(0);
    guard
}

/// The state a refused call must leave alone.
#[derive(Debug, PartialEq)]
struct Observed {
    memory: (usize, usize),
    names: Vec<String>,
    bytes: usize,
    snapshot: bool,
    tracing: bool,
    triggers: Vec<Vec<String>>,
    filters: Vec<Option<String>>,
    enabled: Vec<bool>,
    records: usize,
}

/// What [`Observed`] holds of `i` and `tracer` now.
fn observe(tracer: &Tracer<HostPlatform>, i: &Instance<'_, HostPlatform>) -> Observed {
    let events = [ALL.descriptor(), PING.descriptor(), PONG.descriptor()];
    let records = merged_count(i.recorder().live());
    Observed {
        memory: tracer.memory().unwrap(),
        names: tracer.instance_names().unwrap(),
        bytes: i.bytes_per_cpu(),
        snapshot: i.has_snapshot(),
        tracing: i.tracing(),
        triggers: events.iter().map(|e| i.triggers(e)).collect(),
        filters: events.iter().map(|e| i.filter(e)).collect(),
        enabled: events.iter().map(|e| i.event_enabled(e)).collect(),
        records,
    }
}

/// Runs `f` and fails the test, with the panic's message, if it panicked.
fn no_panic<R>(what: &str, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(e) => {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("{what} panicked: {msg}")
        }
    }
}

/// The records `buffer` holds, all CPUs.
fn merged_count(buffer: &Buffer<HostPlatform>) -> usize {
    let mut it = buffer.merged_iter().expect("iter");
    let mut n = 0;
    while it.next_record().is_some() {
        n += 1;
    }
    n
}

// ============================ found and fixed ====================================

/// A resize the memory limit refuses allocates nothing first: one the heap could
/// never give (64 GiB per CPU) is refused by the limit (`MemoryLimit`), not by the
/// heap (`NoMemory`), and nothing changes.
#[test]
fn resize_beyond_the_memory_limit_is_refused_before_allocating() {
    let tracer = tracer();
    let i = tracer.get_or_create("resize_big", SMALL).unwrap();
    let before = observe(&tracer, &i);
    assert_eq!(i.resize(1 << 36), Err(InstanceError::MemoryLimit));
    assert_eq!(i.resize_cpu(1, 1 << 36), Err(InstanceError::MemoryLimit));
    assert_eq!(i.resize(LIMIT), Err(InstanceError::MemoryLimit));
    assert_eq!(observe(&tracer, &i), before, "a refused resize changes nothing");
}

/// `Region::ring(slot)` of a slot far beyond the region is `None`, as documented (it
/// computed the slot's place before checking the slot, and overflowed).
#[test]
fn region_ring_of_a_huge_slot_is_none() {
    let words: &'static [AtomicU64] =
        Box::leak((0..HEADER_WORDS + 2 * 8).map(|_| AtomicU64::new(0)).collect());
    let region = Region::new(words, 2).expect("region");
    assert_eq!(region.ring_words(), 8);
    let slot = usize::MAX / region.ring_words();
    let ring = no_panic("Region::ring(usize::MAX / 8)", || region.ring(slot).map(<[_]>::len));
    assert_eq!(ring, None);
    assert_eq!(
        no_panic("Region::ring(usize::MAX)", || region.ring(usize::MAX).map(<[_]>::len)),
        None
    );
}

/// `HostPlatform`'s manual clock, set to its last value, wraps at the next reading
/// (it overflowed).
#[test]
fn manual_clock_at_its_end_does_not_panic() {
    let tracer = tracer();
    let top = tracer.top();
    let now = no_panic("clock_now after set_clock(u64::MAX)", || {
        HostPlatform::set_clock(u64::MAX);
        let a = top.clock_now();
        let b = top.clock_now();
        (a, b)
    });
    HostPlatform::set_clock(1_000);
    assert_eq!(now.0, u64::MAX);
}

/// Rings a reader keeps after their instance let them go (destroyed, resized) count
/// against the memory limit until the reader drops them: create, read, destroy in a
/// loop is refused once the kept rings reach the limit, and `memory()` says so.
#[test]
fn readers_cannot_keep_more_than_the_memory_limit() {
    let tracer = tracer();
    let start = tracer.memory().unwrap().0;
    let config = InstanceConfig { bytes_per_cpu: 1 << 20, ..SMALL };
    let mut held = Vec::new();
    let refused = loop {
        assert!(held.len() < 8, "{} instances' rings kept under the limit", held.len());
        match tracer.get_or_create("held", config) {
            Ok(i) => {
                held.push(i.recorder()); // a reader keeps the buffers
                drop(i);
                tracer.destroy_by_name("held").unwrap();
            }
            Err(e) => break e,
        }
    };
    assert_eq!(refused, InstanceError::MemoryLimit);
    let kept: usize = held.iter().map(|r| r.live().total_bytes()).sum();
    assert!(kept > 0 && start + kept <= LIMIT, "{kept} kept beside {start}");
    assert_eq!(tracer.memory().unwrap().0, start + kept, "the kept rings are counted");
    // A resize whose old rings a reader keeps: counted the same way.
    let i = tracer.get_or_create("resized", SMALL).unwrap();
    let old = i.recorder();
    let before = tracer.memory().unwrap().0;
    i.resize(SMALL.bytes_per_cpu * 2).unwrap();
    assert_eq!(tracer.memory().unwrap().0, before + i.recorder().live().total_bytes());
    drop((old, held));
    assert_eq!(tracer.memory().unwrap().0, start + i.recorder().live().total_bytes(), "given back");
    drop(i);
    tracer.destroy_by_name("resized").unwrap();
    assert_eq!(tracer.memory().unwrap().0, start);
}

/// `Region::restore` refuses (`NotSaved`) a `Saved` that `validate` gave for another
/// region, or for this one before it was written again: it restored the region's
/// words with the other trace's positions and counters, and claimed events its rings
/// did not hold.
#[test]
fn restore_refuses_a_saved_trace_of_another_region() {
    let _tracer = tracer();
    let big: &'static [AtomicU64] =
        Box::leak((0..HEADER_WORDS + 1024).map(|_| AtomicU64::new(0)).collect());
    let small: &'static [AtomicU64] =
        Box::leak((0..HEADER_WORDS + 8).map(|_| AtomicU64::new(0)).collect());
    let (a, b) = (Region::new(big, 1).unwrap(), Region::new(small, 1).unwrap());
    let set = Buffer::over(HostPlatform, Mode::Overwrite, a.rings(1)).unwrap();
    HostPlatform::set_cpu(0);
    for n in 0..50u32 {
        set.write(7, &n.to_le_bytes()).unwrap();
    }
    a.save(&set, 1).unwrap();
    let saved = a.validate(1).unwrap();
    assert_eq!(saved.events(), 50);
    let restored =
        no_panic("restore of another region's trace", || b.restore(&saved, HostPlatform));
    assert_eq!(restored.err(), Some(trace::Error::NotSaved));
    // Its own region, as validated: restored whole.
    let buffer = a.restore(&saved, HostPlatform).unwrap();
    assert_eq!(merged_count(&buffer), 50);
    // While the set lives its words back no other ring.
    let again = Buffer::over(HostPlatform, Mode::Overwrite, a.rings(1));
    assert_eq!(again.err(), Some(trace::Error::Lent));
    drop(set);
    // Written again since: refused.
    let set = Buffer::over(HostPlatform, Mode::Overwrite, a.rings(1)).unwrap();
    set.write(7, &51u32.to_le_bytes()).unwrap();
    a.save(&set, 1).unwrap();
    assert_eq!(a.restore(&saved, HostPlatform).err(), Some(trace::Error::NotSaved));
}

// ============================= what holds ========================================

#[test]
fn instance_names_are_checked_and_refusals_change_nothing() {
    let tracer = tracer();
    let top = tracer.top();
    let before = observe(&tracer, &top);
    let long = "a".repeat(10 * 1024);
    let bad =
        ["", ".", "..", "a/b", "é", "nul\0", "spa ce", "x".repeat(33).as_str(), long.as_str()]
            .map(String::from);
    for name in &bad {
        assert_eq!(
            tracer.get_or_create(name, SMALL).err(),
            Some(InstanceError::InvalidName),
            "{name:?}"
        );
        assert!(matches!(tracer.lookup(name), Err(InstanceError::NotFound)));
        assert_eq!(tracer.destroy_by_name(name), Err(InstanceError::NotFound));
    }
    assert_eq!(observe(&tracer, &top), before);
    let ok = "A-z_0.9".to_string() + &"x".repeat(25);
    assert_eq!(ok.len(), 32);
    let i = tracer.get_or_create(&ok, SMALL).unwrap();
    assert_eq!(i.name(), ok);
    // An existing name gives the existing instance, its configuration kept.
    let again =
        tracer.get_or_create(&ok, InstanceConfig { bytes_per_cpu: 1 << 16, ..SMALL }).unwrap();
    assert_eq!(again.bytes_per_cpu(), i.bytes_per_cpu());
    assert_eq!(tracer.destroy(again).map_err(|e| e.error), Err(InstanceError::Busy), "i is held");
    drop(i);
    assert_eq!(tracer.destroy(tracer.top()).map_err(|e| e.error), Err(InstanceError::TopLevel));
    tracer.destroy_by_name(&ok).unwrap();
    assert_eq!(tracer.destroy_by_name(&ok), Err(InstanceError::NotFound));
    assert_eq!(observe(&tracer, &top), before);
}

#[test]
fn create_destroy_loops_return_memory_and_slots() {
    let tracer = tracer();
    let start = tracer.memory().unwrap();
    for round in 0..100 {
        let snapshot = round % 2 == 0;
        let i = tracer
            .get_or_create(
                "loop",
                InstanceConfig { bytes_per_cpu: 8192, mode: Mode::Discard, snapshot },
            )
            .unwrap();
        i.set_event(Some("misuse"), None, true).unwrap();
        i.set_filter(PING.descriptor(), "n > 3").unwrap();
        i.set_trigger(PING.descriptor(), "hist:keys=n:size=16384").unwrap();
        i.set_trigger(PONG.descriptor(), "snapshot").unwrap();
        i.resize(16384).unwrap();
        i.write_marker("x").unwrap();
        drop(i);
        tracer.destroy_by_name("loop").unwrap();
        assert_eq!(tracer.memory().unwrap(), start, "round {round}");
    }
    assert!(tracer.instance_names().unwrap().is_empty());
    // The slot is clean: a new instance of the name has no hooks or events.
    let i = tracer.get_or_create("loop", SMALL).unwrap();
    assert!(i.triggers(PING.descriptor()).is_empty());
    assert_eq!(i.filter(PING.descriptor()), None);
    assert!(!i.event_enabled(PING.descriptor()));
}

#[test]
fn too_many_instances_and_the_memory_limit_refuse_cleanly() {
    let tracer = tracer();
    let start = tracer.memory().unwrap();
    let mut held = Vec::new();
    for n in 0.. {
        match tracer.get_or_create(&format!("many{n}"), SMALL) {
            Ok(i) => held.push(i),
            Err(e) => {
                assert_eq!(e, InstanceError::TooManyInstances);
                break;
            }
        }
    }
    assert_eq!(held.len(), 7, "8 with the top-level instance");
    let after = tracer.memory().unwrap();
    assert_eq!(
        tracer.get_or_create("one_more", SMALL).err(),
        Some(InstanceError::TooManyInstances)
    );
    assert_eq!(tracer.memory().unwrap(), after);
    drop(held);
    for name in tracer.instance_names().unwrap() {
        tracer.destroy_by_name(&name).unwrap();
    }
    assert_eq!(tracer.memory().unwrap(), start);
    // Checked before allocating: a size the heap could never give is the limit's.
    let huge = InstanceConfig { bytes_per_cpu: 1 << 36, ..SMALL };
    assert_eq!(tracer.get_or_create("huge", huge).err(), Some(InstanceError::MemoryLimit));
    assert_eq!(tracer.memory().unwrap(), start);
}

#[test]
fn buffer_sizes_at_the_extremes_are_refused_or_rounded() {
    let tracer = tracer();
    let start = tracer.memory().unwrap();
    for (bytes, want) in [
        (0, InstanceError::Buffer(trace::Error::ZeroSize)),
        (usize::MAX, InstanceError::Buffer(trace::Error::TooBig)),
        (1usize << 40, InstanceError::Buffer(trace::Error::TooBig)),
    ] {
        let c = InstanceConfig { bytes_per_cpu: bytes, ..SMALL };
        assert_eq!(tracer.get_or_create("sz", c).err(), Some(want), "{bytes}");
        assert_eq!(tracer.memory().unwrap(), start);
    }
    let i = tracer.get_or_create("sz", InstanceConfig { bytes_per_cpu: 1, ..SMALL }).unwrap();
    assert!(i.bytes_per_cpu() >= 64);
    let before = observe(&tracer, &i);
    assert_eq!(i.resize(0), Err(InstanceError::Buffer(trace::Error::ZeroSize)));
    assert_eq!(i.resize(usize::MAX), Err(InstanceError::Buffer(trace::Error::TooBig)));
    assert_eq!(i.resize_cpu(CPUS, 4096), Err(InstanceError::Buffer(trace::Error::BadCpu)));
    assert_eq!(i.resize_cpu(usize::MAX, 4096), Err(InstanceError::Buffer(trace::Error::BadCpu)));
    assert_eq!(observe(&tracer, &i), before);
    // A record larger than the smallest ring holds is refused, the ring intact.
    assert_eq!(i.write_marker(&"y".repeat(200)), Err(trace::ring::WriteError::NotTaken));
    assert!(i.bytes_of_cpu(CPUS).is_none());
    assert!(i.stats(CPUS).is_err());
    assert!(i.clear_cpu(CPUS).is_err());
    assert!(i.snapshot_clear_cpu(CPUS).is_err());
}

#[test]
fn resize_and_clock_changes_while_recording_and_holding_a_snapshot() {
    let tracer = tracer();
    let i = tracer
        .get_or_create(
            "rs",
            InstanceConfig { bytes_per_cpu: 4096, mode: Mode::Overwrite, snapshot: true },
        )
        .unwrap();
    i.set_event(Some("misuse"), Some("ping"), true).unwrap();
    for n in 0..100u32 {
        trace::emit!(PING, n);
    }
    i.snapshot_take().unwrap();
    let reader = i.recorder();
    let held = merged_count(reader.snapshot().unwrap());
    assert!(held > 0);
    i.resize(8192).unwrap();
    assert!(i.has_snapshot() && i.bytes_per_cpu() == 8192);
    i.set_clock(trace::Clock::Counter).unwrap();
    i.resize_cpu(1, 65536).unwrap();
    assert_eq!(merged_count(reader.snapshot().unwrap()), held, "the old reader keeps its window");
    let start = tracer.memory().unwrap();
    HostPlatform::set_clock(10_000);
    trace::emit!(PING, 1);
    HostPlatform::set_clock(5); // backwards
    trace::emit!(PING, 2);
    HostPlatform::set_clock(u64::MAX / 2);
    trace::emit!(PING, 3);
    HostPlatform::set_clock(1_000);
    assert_eq!(merged_count(i.recorder().live()), 3);
    assert_eq!(tracer.memory().unwrap(), start);
    i.set_event(None, None, false).unwrap();
}

#[test]
fn snapshot_calls_in_odd_orders() {
    let tracer = tracer();
    let i = tracer.get_or_create("snap", SMALL).unwrap();
    let start = tracer.memory().unwrap();
    assert_eq!(i.snapshot_free(), Ok(()), "nothing to free");
    assert_eq!(i.snapshot_clear(), Err(InstanceError::Buffer(trace::Error::NoSpare)));
    assert_eq!(i.snapshot_clear_cpu(0), Err(InstanceError::Buffer(trace::Error::NoSpare)));
    assert_eq!(tracer.memory().unwrap(), start);
    i.snapshot_take().unwrap();
    i.snapshot_take().unwrap();
    i.snapshot_alloc().unwrap();
    let with = tracer.memory().unwrap();
    assert_eq!(with.0, start.0 + 4096 * CPUS);
    i.snapshot_clear().unwrap();
    i.snapshot_free().unwrap();
    i.snapshot_free().unwrap();
    assert_eq!(tracer.memory().unwrap(), start);
    assert!(!i.has_snapshot());
}

#[test]
fn snapshot_trigger_refused_at_the_memory_limit_changes_nothing() {
    let tracer = tracer();
    let start = tracer.memory().unwrap().0;
    let big = (LIMIT - start) / CPUS / 2;
    let i =
        tracer.get_or_create("snaplimit", InstanceConfig { bytes_per_cpu: big, ..SMALL }).unwrap();
    let before = observe(&tracer, &i);
    for line in ["snapshot", "snapshot:3 if n > 1", "hist:keys=n:v=n:onmax($v).snapshot()"] {
        let r = i.set_trigger(PING.descriptor(), line);
        assert_eq!(r, Err(HookError::Instance(InstanceError::MemoryLimit)), "{line}");
        assert_eq!(observe(&tracer, &i), before, "{line}");
    }
}

#[test]
fn filters_with_pathological_text_are_refused_cleanly() {
    let tracer = tracer();
    let i = tracer.get_or_create("filters", SMALL).unwrap();
    i.set_filter(ALL.descriptor(), "a == 1").unwrap();
    let before = observe(&tracer, &i);
    let deep = format!("{}a == 1{}", "(".repeat(10_000), ")".repeat(10_000));
    let nots = format!("{}a == 1", "!".repeat(10_000));
    let huge = "a == 1 || ".repeat(10_000) + "a == 2";
    let bad = [
        deep.as_str(),
        nots.as_str(),
        huge.as_str(),
        "",
        "   ",
        "a == 99999999999999999999999999",
        "d == -9223372036854775809",
        "a == \0",
        "h == \"unterminated",
        "g == 1",
        "a ==",
        "== 1",
        "(a == 1",
        "a == 1)",
        "a == 1 &&",
        "é == 1",
        "a.function == foo",
        "ip.function == nosuch",
        "ip.function > 0",
        "h < \"x\"",
        "a ~ \"x\"",
        "common_pid.hex == 1",
    ];
    let mut taken = Vec::new();
    for text in bad {
        let r = no_panic("set_filter", || i.set_filter(ALL.descriptor(), text));
        if r.is_ok() {
            taken.push(text);
            i.set_filter(ALL.descriptor(), "a == 1").unwrap();
            continue;
        }
        assert!(matches!(r, Err(HookError::Filter(_))), "{:.60}: {r:?}", text);
        let message = r.unwrap_err().to_string();
        assert!(!message.is_empty());
        assert_eq!(observe(&tracer, &i), before, "{:.60}", text);
    }
    assert!(taken.is_empty(), "{taken:?}");
    // Unicode and NUL inside strings are values, not errors; an integer beyond the
    // field's range is taken (as ftrace: it never matches), an unquoted glob too.
    let values = ["h == \"é\u{0}\"", "h ~ \"*\u{1F600}*\"", "f == 'é'", "a == 256", "b == -32769"];
    for text in values.into_iter().chain(["c == 0x1ffffffff", "h ~ é*"]) {
        let _ = no_panic("set_filter", || i.set_filter(ALL.descriptor(), text));
    }
    i.set_filter(ALL.descriptor(), "0").unwrap();
    assert_eq!(i.filter(ALL.descriptor()), None);
    assert!(i.set_system_filter("nosuch", "a == 1").is_err());
    assert!(i.set_system_filter("misuse", &deep).is_err());
}

#[test]
fn triggers_with_pathological_text_are_refused_cleanly() {
    let tracer = tracer();
    let i = tracer.get_or_create("triggers", SMALL).unwrap();
    i.set_trigger(PING.descriptor(), "traceon:5").unwrap();
    let before = observe(&tracer, &i);
    let long = "traceon ".to_string() + &" ".repeat(100_000);
    let deep = format!("traceoff if {}n == 1{}", "(".repeat(10_000), ")".repeat(10_000));
    let bad = [
        "",
        "   ",
        "!",
        long.as_str(),
        deep.as_str(),
        "traceon",    // exists (traceon/traceoff are one)
        "traceoff:3", // exists
        "traceoff:0:1",
        "snapshot:-1",
        "snapshot:18446744073709551615",
        "snapshot:18446744073709551616",
        "snapshot:1e3",
        "snapshot:",
        "snapshot if",
        "snapshot iff n == 1",
        "snapshot if n == \0",
        "stacktrace:1:2",
        "enable_event",
        "enable_event:misuse",
        "enable_event:misuse:nosuch",
        "enable_event:ftrace:print",
        "enable_event:ftrace:kernel_stack",
        "enable_hist:ftrace:kernel_stack",
        "dump",
        "cpudump",
        "trac\u{e9}on",
        "hist",
        "hist:keys=",
        "hist:keys=nosuch",
        "hist:keys=n:size=0",
        "hist:keys=n:size=1",
        "hist:keys=n:size=16385",
        "hist:keys=n:size=99999999999999999999999",
        "hist:keys=n:size=-1",
        "hist:keys=n.buckets=0",
        "hist:keys=n.buckets=-1",
        "hist:keys=n.buckets=99999999999999999999999",
        "hist:keys=n:vals=nosuch",
        "hist:keys=n:sort=nosuch",
        "hist:keys=n:v=$v",
        "hist:keys=n:v=n/0:w=$w",
        "hist:keys=n:onmax(n).save(n)",
        "hist:keys=n:name=bad-name",
        "hist:keys=n:keys=n",
        "hist:keys=n:cont",
        "hist:keys=n:clear",
    ];
    for line in bad {
        let r = no_panic("set_trigger", || i.set_trigger(PING.descriptor(), line));
        assert!(r.is_err(), "{:.60} was taken", line);
        assert!(!r.unwrap_err().to_string().is_empty());
        assert_eq!(observe(&tracer, &i), before, "{:.60}", line);
    }
    // Removing what the event does not have is taken, as ftrace's, and changes nothing.
    for line in ["!snapshot", "!hist:keys=n"] {
        assert_eq!(i.set_trigger(PING.descriptor(), line), Ok(()), "{line}");
        assert_eq!(observe(&tracer, &i), before, "{line}");
    }
    let r = i.set_trigger(PING.descriptor(), "traceon");
    assert_eq!(r, Err(HookError::Trigger(TriggerError { pos: 0, reason: TriggerReason::Exists })));
    i.clear_triggers(PING.descriptor()).unwrap();
    // The extremes that are valid.
    for line in [
        "hist:keys=n:size=16384",
        "hist:keys=n.buckets=18446744073709551615:vals=hitcount",
        "hist:keys=n.log2:vals=n.percent",
        "hist:keys=n.hex:vals=n.graph:sort=n.descending",
        "snapshot:18446744073709551614",
    ] {
        i.set_trigger(PING.descriptor(), line).unwrap_or_else(|e| panic!("{line}: {e}"));
    }
    i.set_event(Some("misuse"), Some("ping"), true).unwrap();
    for n in [0u32, 1, u32::MAX, u32::MAX - 1, 7] {
        trace::emit!(PING, n);
    }
    let mut out = String::new();
    i.write_hists(PING.descriptor(), None, &mut out).unwrap();
    assert!(out.contains("hitcount"), "{out}");
    i.set_event(None, None, false).unwrap();
    i.clear_triggers(PING.descriptor()).unwrap();
    i.snapshot_free().unwrap();
}

#[test]
fn hist_keys_and_vals_on_every_field_kind() {
    let tracer = tracer();
    let i = tracer.get_or_create("hists", SMALL).unwrap();
    i.set_event(Some("misuse"), Some("all"), true).unwrap();
    for field in ["a", "b", "c", "d", "e", "f", "g", "h", "common_pid", "common_cpu"] {
        for line in [
            format!("hist:keys={field}"),
            format!("hist:keys={field}.log2"),
            format!("hist:keys={field}.buckets=3"),
            format!("hist:keys={field}.sym"),
            format!("hist:keys=a:vals={field}"),
            format!("hist:keys=a:vals={field}.percent"),
            format!("hist:keys=a:x={field}*{field}-1/0:vals=$x"),
        ] {
            let r = no_panic(&line, || i.set_trigger(ALL.descriptor(), &line));
            if r.is_ok() {
                no_panic(&line, || {
                    trace::emit!(
                        ALL,
                        255u8,
                        -1i16,
                        u32::MAX,
                        i64::MIN,
                        true,
                        'é',
                        [0xff; 4],
                        "é\0x"
                    );
                    trace::emit!(ALL, 0u8, i16::MIN, 0u32, i64::MAX, false, '\0', [0; 4], "");
                    let mut out = String::new();
                    i.write_hists(ALL.descriptor(), None, &mut out).unwrap();
                });
                i.clear_triggers(ALL.descriptor()).unwrap();
            }
        }
    }
    i.set_event(None, None, false).unwrap();
}

#[test]
fn enable_event_cycles_do_not_loop() {
    let tracer = tracer();
    let i = tracer.get_or_create("cycle", SMALL).unwrap();
    i.set_event(Some("misuse"), Some("ping"), true).unwrap();
    i.set_trigger(PING.descriptor(), "enable_event:misuse:pong").unwrap();
    i.set_trigger(PONG.descriptor(), "disable_event:misuse:ping").unwrap();
    // A trigger that enables its own event, and one that disables its own.
    i.set_trigger(ALL.descriptor(), "disable_event:misuse:all").unwrap();
    i.set_trigger(PING.descriptor(), "traceoff:1 if n == 99").unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let tracer_ref: &'static Tracer<HostPlatform> = *tracer;
    std::thread::spawn(move || {
        let i = tracer_ref.lookup("cycle").unwrap();
        for n in 0..10u32 {
            trace::emit!(PING, n);
            trace::emit!(PONG, n);
            let _ = i.inject(PING.descriptor(), "n=1");
            let _ = i.inject(PONG.descriptor(), "n=1");
        }
        tx.send(()).unwrap();
    });
    rx.recv_timeout(std::time::Duration::from_secs(20)).expect("the cycle ended");
    assert!(i.event_enabled(PONG.descriptor()));
    assert!(!i.event_enabled(PING.descriptor()));
    for e in [PING.descriptor(), PONG.descriptor(), ALL.descriptor()] {
        i.clear_triggers(e).unwrap();
    }
    i.set_event(None, None, false).unwrap();
}

#[test]
fn inject_lines_with_odd_values() {
    let tracer = tracer();
    let i = tracer.get_or_create("inject", SMALL).unwrap();
    assert!(i.inject(ALL.descriptor(), "a=1").is_err(), "not enabled");
    i.set_event(Some("misuse"), Some("all"), true).unwrap();
    let before = merged_count(i.recorder().live());
    let long = format!("h={}", "x".repeat(100_000));
    let quoted = format!("h=\"{}\"", "é".repeat(50_000));
    for line in [
        "a=256",
        "a=-1",
        "b=32768",
        "d=-9223372036854775809",
        "c=0x100000000",
        "e=2",
        "f=ab",
        "g=0x0102030405",
        "g=0xzz",
        "g=123",
        "h=\"open",
        "a=1 a=1",
        "nosuch=1",
        "=1",
        "a",
        "a=1x=2",
        long.as_str(),
        quoted.as_str(),
        "c=18446744073709551616",
    ] {
        let r = no_panic("inject", || i.inject(ALL.descriptor(), line));
        assert!(r.is_err(), "{:.40} was taken", line);
        assert!(!r.unwrap_err().to_string().is_empty());
    }
    assert_eq!(merged_count(i.recorder().live()), before, "refused lines record nothing");
    for line in ["", "f=é h=\"a b\u{0}\" g=0xffffffff d=-9223372036854775808", "  a=0   "] {
        no_panic("inject", || i.inject(ALL.descriptor(), line))
            .unwrap_or_else(|e| panic!("{line}: {e}"));
    }
    assert!(i.inject(&trace::tracer::STACK_TRACE, "depth=1").is_err());
    i.set_event(None, None, false).unwrap();
}

#[test]
fn markers_of_every_size() {
    let tracer = tracer();
    let i = tracer
        .get_or_create("markers", InstanceConfig { bytes_per_cpu: 1 << 20, ..SMALL })
        .unwrap();
    let start = tracer.memory().unwrap();
    let big: String = (0..(1 << 20)).map(|n| if n % 7 == 0 { 'é' } else { 'm' }).collect();
    no_panic("1 MB marker", || i.write_marker(&big)).unwrap();
    let recorder = i.recorder();
    let mut it = recorder.live().merged_iter().unwrap();
    let mut text = String::new();
    while let Some(r) = it.next_record() {
        let d = tracer.descriptor(r.id).unwrap();
        trace::event::format::render(&mut text, d.format, d.fields, r.payload, None).unwrap();
    }
    assert!(text.len() > big.len() / 2 && big.ends_with(&text), "the latest parts, in order");
    i.write_marker("").unwrap();
    let max = trace::tracer::MAX_RAW_MARKER;
    for n in [0, 1, max] {
        i.write_marker_raw(u32::MAX, &vec![0xab; n]).unwrap();
    }
    for n in [max + 1, 1 << 20] {
        assert_eq!(i.write_marker_raw(0, &vec![0; n]), Err(WriteError::TooLarge));
    }
    assert_eq!(tracer.memory().unwrap(), start);
}

#[test]
fn cpus_and_cpumasks_beyond_the_tracer() {
    let tracer = tracer();
    let i = tracer.get_or_create("cpus", SMALL).unwrap();
    i.set_event(Some("misuse"), Some("ping"), true).unwrap();
    // Bits for CPUs the tracer does not have are refused; the mask stays.
    let absent = Err(trace::InstanceError::Buffer(trace::Error::BadCpu));
    assert_eq!(i.set_cpumask(u64::MAX << CPUS), absent);
    assert_eq!(i.set_cpumask(u64::MAX), absent);
    assert_eq!(i.cpumask(), (1 << CPUS) - 1, "every CPU, as made");
    assert_eq!(i.set_cpumask(i.cpumask()), Ok(()), "what it reads can be written back");
    i.set_cpumask(0).unwrap();
    trace::emit!(PING, 1);
    assert_eq!(merged_count(i.recorder().live()), 0, "no CPU of the tracer is in the mask");
    i.set_cpumask((1 << CPUS) - 1).unwrap();
    for cpu in [CPUS, 63, 64, 1000, usize::MAX] {
        HostPlatform::set_cpu(cpu);
        no_panic("emit on a bad CPU", || {
            trace::emit!(PING, 2);
            assert_eq!(i.write_marker("bad cpu"), Err(WriteError::NotTaken));
            let _ = i.inject(PING.descriptor(), "n=3");
            tracer.record_stack(&[1, 2, 3]);
        });
    }
    HostPlatform::set_cpu(0);
    assert_eq!(merged_count(i.recorder().live()), 0);
    assert!(i.stats(0).unwrap().refused.bad_cpu >= 5);
    i.clear().unwrap();
    assert_eq!(i.stats(0).unwrap().refused.bad_cpu, 0);
    i.set_event(None, None, false).unwrap();
}

#[test]
fn readers_survive_destroy_and_resize() {
    let tracer = tracer();
    let i = tracer.get_or_create("readers", SMALL).unwrap();
    for n in 0..200 {
        i.write_marker(&format!("m{n}")).unwrap();
    }
    let recorder = i.recorder();
    let mut consumer = recorder.live().merged_consumer().unwrap();
    let mut iter = recorder.live().merged_iter().unwrap();
    assert!(consumer.next_record().is_some());
    assert!(iter.next_record().is_some());
    // A second consumer of the same ring is refused while one is open.
    assert!(recorder.live().consumer(0).is_err());
    i.resize(8192).unwrap();
    drop(i);
    tracer.destroy_by_name("readers").unwrap();
    let mut n = 0;
    while consumer.next_record().is_some() && n < 10_000 {
        n += 1;
    }
    assert!(n > 0 && n < 10_000);
    while iter.next_record().is_some() {}
    assert!(recorder.live().iter(CPUS).is_err());
}

#[test]
fn ring_buffer_alone_refuses_misuse() {
    let _tracer = tracer();
    let cfg = |cpus, bytes_per_cpu| Config { cpus, bytes_per_cpu, mode: Mode::Discard };
    assert_eq!(Buffer::new(HostPlatform, cfg(0, 4096)).err(), Some(trace::Error::ZeroSize));
    assert_eq!(Buffer::new(HostPlatform, cfg(1, 0)).err(), Some(trace::Error::ZeroSize));
    assert_eq!(Buffer::new(HostPlatform, cfg(1, usize::MAX)).err(), Some(trace::Error::TooBig));
    let r = Buffer::new(HostPlatform, cfg(usize::MAX, 64)).err();
    assert_eq!(r, Some(trace::Error::NoMemory));
    assert!(Buffer::over(HostPlatform, Mode::Overwrite, std::iter::empty()).is_err());
    let odd: &'static [AtomicU64] = Box::leak((0..12).map(|_| AtomicU64::new(0)).collect());
    assert!(Buffer::over(HostPlatform, Mode::Overwrite, [odd]).is_err());
    let mut b = Buffer::new(HostPlatform, cfg(1, 64)).unwrap();
    HostPlatform::set_cpu(0);
    assert_eq!(b.write(trace::ring::MAX_EVENT_ID + 1, &[]), Err(WriteError::ReservedId));
    assert_eq!(b.write(u16::MAX, &[]), Err(WriteError::ReservedId));
    assert_eq!(b.write(1, &[0; 4096]), Err(WriteError::TooLarge));
    assert_eq!(b.write_with(1, usize::MAX, |_| {}), Err(WriteError::TooLarge));
    // A fill that writes more than it reserved is cut.
    no_panic("overfill", || b.write_with(1, 1, |w| trace::field::Sink::put(w, &[7; 64]))).unwrap();
    HostPlatform::set_cpu(1);
    assert_eq!(b.write(1, &[1]), Err(WriteError::BadCpu));
    HostPlatform::set_cpu(0);
    assert_eq!(b.resize(4096), Err(trace::Error::Recording));
    b.set_recording(false);
    assert_eq!(b.resize(0), Err(trace::Error::ZeroSize));
    assert_eq!(merged_count(&b), 1, "a refused resize keeps the records");
    b.resize(4096).unwrap();
    assert_eq!(merged_count(&b), 0);
}

#[test]
fn persistent_regions_of_odd_shapes() {
    let leak = |n: usize| -> &'static [AtomicU64] {
        Box::leak((0..n).map(|_| AtomicU64::new(0)).collect())
    };
    assert!(Region::new(leak(0), 1).is_err());
    assert!(Region::new(leak(HEADER_WORDS), 1).is_err());
    assert!(Region::new(leak(HEADER_WORDS + 7), 1).is_err());
    assert!(Region::new(leak(HEADER_WORDS + 64), 0).is_err());
    assert!(Region::new(leak(HEADER_WORDS + 64), usize::MAX).is_err());
    assert!(Region::new(leak(HEADER_WORDS + 64), trace::ring::persist::MAX_SLOTS + 1).is_err());
    let r = Region::new(leak(HEADER_WORDS + 100), 3).unwrap();
    assert_eq!(r.ring_words(), 32);
    assert_eq!(r.rings(usize::MAX).count(), 3);
    assert!(r.ring(3).is_none());
    // Garbage in every word: validate never panics.
    let words = leak(HEADER_WORDS + 64);
    let r = Region::new(words, 2).unwrap();
    for seed in 0..2000u64 {
        for (n, w) in words.iter().enumerate() {
            let x = (seed ^ n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            w.store(
                if n % 3 == 0 { x >> (seed % 64) } else { x },
                std::sync::atomic::Ordering::Relaxed,
            );
        }
        let _ = no_panic("validate", || r.validate(seed));
    }
    // A buffer over other words than the region's cannot be saved into it.
    let other = Buffer::over(HostPlatform, Mode::Overwrite, [leak(64)]).unwrap();
    assert_eq!(r.save(&other, 1), Err(trace::Error::BadCpu));
}

#[test]
fn crafted_symbol_tables_and_dumps_do_not_panic() {
    use trace::symtab::{SymbolTable, encode};
    let good = encode([(0x1000, 0x1100, "a"), (0x1100, 0x1200, "b")]);
    let table = SymbolTable::parse(&good).unwrap();
    assert_eq!(table.lookup(0x10ff), Some(("a", 0xff)));
    for cut in 0..good.len() {
        let _ = no_panic("parse cut", || SymbolTable::parse(&good[..cut]).map(|t| t.len()));
    }
    for i in 0..good.len() {
        for v in [0u8, 0x7f, 0xff] {
            let mut b = good.clone();
            b[i] = v;
            no_panic("parse flipped", || {
                if let Ok(t) = SymbolTable::parse(&b) {
                    let mut s = String::new();
                    for addr in [0, 0xfff, 0x1000, 0x1150, u64::MAX] {
                        let _ = t.lookup(addr);
                        let _ = t.write_frame(&mut s, addr);
                    }
                    let _ = t.write_stack(&mut s, usize::MAX, &[0, 1, u64::MAX]);
                    let _ = t.functions().count();
                    let _ = t.range_of("a");
                }
            });
        }
    }
    let long = encode([(0, u64::MAX, &*"n".repeat(100_000))]);
    assert!(SymbolTable::parse(&long).is_ok());
    let lines = [
        "<<<TRACE-DUMP v1 BEGIN>>>",
        "TD 18446744073709551615 AAAA 00000000",
        "TD 0 AAAA 00000000",
        "TD 99999999999999999999 AAAA 00000000",
        "TD 1 !!!! 00000000",
        "TD 2 AAAA zzzzzzzz",
        "TD 3",
        "TD é é é",
        "<<<TRACE-DUMP v1 END chunks=18446744073709551615>>>",
        "<<<TRACE-DUMP v1 END chunks=0>>>",
    ];
    for a in lines {
        for b in lines {
            let text = format!("{a}\n{b}\n{a}\n");
            let _ = no_panic("dump::parse", || trace::dump::parse(&text));
        }
    }
}

#[test]
fn hist_variable_chains_and_truncating_writes() {
    let tracer = tracer();
    let i = tracer.get_or_create("vars", SMALL).unwrap();
    i.set_event(Some("misuse"), None, true).unwrap();
    let lines = [
        (PING.descriptor(), "hist:keys=n:t0=common_timestamp:z=n-n"),
        (
            PONG.descriptor(),
            "hist:keys=n:d=common_timestamp-$t0:q=$d/$z:vals=$d,$q:onmax($d).save(n):onchange($q).snapshot()",
        ),
    ];
    for (e, line) in lines {
        i.set_trigger(e, line).unwrap_or_else(|err| panic!("{line}: {err}"));
    }
    HostPlatform::set_clock(u64::MAX - 10);
    for n in [0u32, u32::MAX, 0] {
        no_panic("chain", || {
            trace::emit!(PING, n);
            trace::emit!(PONG, n);
            HostPlatform::set_clock(5); // backwards: the difference wraps
            trace::emit!(PONG, n);
        });
    }
    HostPlatform::set_clock(1_000);
    let mut out = String::new();
    i.write_hists(PONG.descriptor(), None, &mut out).unwrap();
    assert!(out.contains("hitcount"), "{out}");
    // The definer cannot go while read; a truncating write keeps it then.
    let before = observe(&tracer, &i);
    assert!(i.set_trigger(PING.descriptor(), "!hist:keys=n:t0=common_timestamp:z=n-n").is_err());
    assert!(i.set_trigger_truncating(PING.descriptor(), "   ").is_ok());
    assert!(i.set_trigger_truncating(PING.descriptor(), "hist:keys=nosuch").is_err());
    assert_eq!(observe(&tracer, &i).triggers, before.triggers);
    i.set_trigger_truncating(PONG.descriptor(), "").unwrap();
    i.set_trigger_truncating(PING.descriptor(), "").unwrap();
    assert!(i.triggers(PING.descriptor()).is_empty() && i.triggers(PONG.descriptor()).is_empty());
    i.set_event(None, None, false).unwrap();
}

#[test]
fn the_histogram_budget_comes_back() {
    let tracer = tracer();
    for round in 0..40 {
        let i = tracer.get_or_create("budget", SMALL).unwrap();
        i.set_trigger(ALL.descriptor(), "hist:keys=h,d,c:vals=a,b,c:size=16384")
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        if round % 2 == 0 {
            i.clear_triggers(ALL.descriptor()).unwrap();
        }
        drop(i);
        tracer.destroy_by_name("budget").unwrap();
    }
}
