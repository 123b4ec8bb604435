//! Misuse of the instance and reader API that was refused too late or not at all:
//! each test failed before the fix it names and passes after.

use super::util::{DURING_GRACE, MAY_WAIT, Probe};
use crate::field::Sink;
use crate::ring::{Buffer, Config, Cursor, Merged, Meta};
use crate::tracer::InstanceError;
use crate::{Error, HostPlatform, InstanceConfig, Limits, Mode, Tracer};
use std::boxed::Box;
use std::sync::Mutex;
use std::vec::Vec;

const SMALL: Config = Config { cpus: 2, bytes_per_cpu: 4096, mode: Mode::Overwrite };
const CONFIG: InstanceConfig =
    InstanceConfig { bytes_per_cpu: 4096, mode: Mode::Overwrite, snapshot: false };

/// Tracers the tests leaked, kept reachable so that Miri's leak check holds.
static KEPT_TRACERS: Mutex<Vec<&'static Tracer<Probe>>> = Mutex::new(Vec::new());

/// A tracer of two CPUs that lives as long as the test process (in
/// [`KEPT_TRACERS`]).
fn tracer() -> &'static Tracer<Probe> {
    HostPlatform::set_cpu(0);
    let limits = Limits { max_instances: 4, max_total_bytes: 1 << 20 };
    let tracer =
        Box::leak(Box::new(Tracer::new(Probe::default(), 2, &[], limits, CONFIG).unwrap()));
    KEPT_TRACERS.lock().unwrap().push(tracer);
    tracer
}

/// On a CPU beyond the tracer's (the platform's index at or above its count) there
/// is no section to read in: the getters read under the locks instead and give what
/// they give on CPU 0, and the events written there are refused and counted.
#[test]
fn getters_on_a_cpu_beyond_the_tracers_read_under_the_lock() {
    use crate::event::{DescriptorKind, EventDescriptor};
    static EV: EventDescriptor =
        EventDescriptor::new("beyond", "e", "", &[], DescriptorKind::Event);
    let limits = Limits { max_instances: 2, max_total_bytes: 1 << 20 };
    let config = InstanceConfig { snapshot: true, ..CONFIG };
    HostPlatform::set_cpu(0);
    let t = Box::leak(Box::new(Tracer::new(Probe::default(), 2, &[&EV], limits, config).unwrap()));
    let top = t.top();
    top.set_filter(&EV, "common_pid == 1").unwrap();
    top.set_trigger(&EV, "traceoff").unwrap();
    let here = |top: &crate::Instance<'_, Probe>| {
        let sizes = (top.bytes_per_cpu(), top.has_snapshot(), top.mode(), top.clock());
        (top.tracing(), sizes, top.filter(&EV), top.triggers(&EV), top.recorder().live().cpus())
    };
    let on_cpu0 = here(&top);
    HostPlatform::set_cpu(2);
    assert_eq!(here(&top), on_cpu0);
    top.set_tracing(false);
    assert!(!top.tracing(), "set from beyond, under the lock");
    top.set_tracing(true);
    top.write_marker("from beyond").unwrap_err();
    HostPlatform::set_cpu(0);
    assert!(top.tracing());
    let stats = top.stats(0).unwrap();
    assert_eq!((stats.entries, stats.dropped), (0, 1), "{stats:?}");
    KEPT_TRACERS.lock().unwrap().push(t);
}

/// A write through a recorder whose CPU's section is full (2^24 - 1 callers inside:
/// one more would carry into the epoch) is dropped and counted, not written outside
/// the section.
#[test]
fn a_write_past_the_sections_depth_is_dropped_and_counted() {
    HostPlatform::set_cpu(0);
    let recorder = crate::ring::Recorder::new(HostPlatform, SMALL, false).unwrap();
    recorder.sections().set_depth_for_tests(0, (1 << 24) - 1);
    assert_eq!(recorder.write(1, b"deep"), Err(crate::ring::WriteError::Dropped));
    let stats = recorder.live().stats(0).unwrap();
    assert_eq!((stats.written, stats.entries, stats.dropped), (1, 0, 1), "{stats:?}");
    recorder.sections().set_depth_for_tests(0, 0);
    recorder.write(1, b"ok").unwrap();
    assert_eq!(recorder.live().stats(0).unwrap().entries, 1);
}

/// Two tracepoints of one system and name are refused, naming it: tracefs, filters
/// and the dump reached only one of them. One descriptor listed twice is one event.
#[test]
fn two_events_of_one_name_are_refused() {
    use crate::event::{DescriptorKind, EventDescriptor};
    use crate::tracer::TracerError;
    static A: EventDescriptor = EventDescriptor::new("dup", "e", "", &[], DescriptorKind::Event);
    static B: EventDescriptor = EventDescriptor::new("dup", "e", "", &[], DescriptorKind::Event);
    let limits = Limits { max_instances: 2, max_total_bytes: 1 << 20 };
    let new = |events: &[&'static EventDescriptor]| {
        Tracer::new(Probe::default(), 1, events, limits, CONFIG).map(drop)
    };
    for events in [&[&A, &B][..], &[&A, &B, &A]] {
        let refused = new(events).unwrap_err();
        assert!(matches!(refused, TracerError::DuplicateEvent(d) if d.name == "e"), "{refused:?}");
        assert_eq!(
            std::format!("{refused}"),
            "event dup:e is defined twice (an event's system and name name one event)"
        );
    }
    assert!(new(&[&A, &A]).is_ok());
    // `printk!` sites are each an `ftrace:bprint` of their own.
    static P: EventDescriptor =
        EventDescriptor::new("ftrace", "bprint", "p", &[], DescriptorKind::Printk);
    static Q: EventDescriptor =
        EventDescriptor::new("ftrace", "bprint", "q", &[], DescriptorKind::Printk);
    assert!(new(&[&P, &Q]).is_ok());
    // Two tracepoints of that name are refused, whatever sites sort between them.
    static R: EventDescriptor =
        EventDescriptor::new("ftrace", "bprint", "o", &[], DescriptorKind::Event);
    static S: EventDescriptor =
        EventDescriptor::new("ftrace", "bprint", "r", &[], DescriptorKind::Event);
    assert!(matches!(new(&[&P, &Q, &R, &S]), Err(TracerError::DuplicateEvent(_))));
}

/// `destroy` of another tracer's instance is refused: it took the slot of the same
/// number in this tracer, an instance someone held, and its memory count.
#[test]
fn destroying_another_tracers_instance_is_refused() {
    let (a, b) = (tracer(), tracer());
    let net = a.get_or_create("net", CONFIG).unwrap();
    let x = b.get_or_create("x", CONFIG).unwrap();
    assert_eq!(a.destroy(x).map_err(|e| e.error), Err(InstanceError::NotFound));
    assert_eq!(a.instance_names().unwrap(), ["net"]);
    assert_eq!(b.instance_names().unwrap(), ["x"]);
    assert_eq!(a.destroy_by_name("net"), Err(InstanceError::Busy), "`net` is held");
    drop(net);
    a.destroy_by_name("net").unwrap();
    b.destroy_by_name("x").unwrap();
}

/// From a context that may not wait (an interrupt over the thread that holds the
/// tracer's and the instance's locks), control operations and the registry's
/// getters are refused before they take a lock: they spun on it, forever.
#[test]
fn control_from_a_context_that_may_not_wait_is_refused_before_any_lock() {
    let t = tracer();
    let net = t.get_or_create("net", CONFIG).unwrap();
    let held = (t.registry.lock(), net.state.recorder.lock(), net.state.triggers.lock());
    MAY_WAIT.with(|w| w.set(false));
    let refused = Err(InstanceError::Buffer(Error::WouldDeadlock));
    assert_eq!(t.get_or_create("other", CONFIG).map(|_| ()), refused);
    let lent = Buffer::new(Probe::default(), SMALL).unwrap();
    assert_eq!(t.create_over("other", lent).map(|_| ()), refused);
    assert_eq!(t.keep_armed(None, None).map(|_| ()), refused);
    assert_eq!(t.destroy_by_name("net"), refused);
    assert_eq!(t.lookup("net").map(|_| ()), refused, "lookup");
    assert_eq!(t.instances().map(|_| ()), Err(Error::WouldDeadlock), "instances");
    assert_eq!(t.instance_names().map(|_| ()), Err(Error::WouldDeadlock), "instance_names");
    assert_eq!(t.memory().map(|_| ()), Err(Error::WouldDeadlock), "memory");
    let marker = &crate::event::marker::MARKER;
    let hook_refused = Err(crate::tracer::HookError::from(Error::WouldDeadlock));
    assert_eq!(net.set_filter(marker, "buf == \"x\""), hook_refused, "set_filter");
    // Refused before the text is compiled (it allocates): a bad one too.
    assert_eq!(net.set_system_filter("ftrace", "buf =="), hook_refused.map(|()| 0), "system");
    assert_eq!(net.set_trigger(marker, "traceoff"), hook_refused, "set_trigger");
    assert_eq!(net.event_soft_mode(marker), Err(Error::WouldDeadlock), "event_soft_mode");
    for (what, result) in [
        ("resize", net.resize(8192)),
        ("resize_cpu", net.resize_cpu(0, 8192)),
        ("set_clock", net.set_clock(crate::Clock::Counter)),
        ("snapshot_alloc", net.snapshot_alloc()),
        ("snapshot_clear", net.snapshot_clear()),
        ("snapshot_clear_cpu", net.snapshot_clear_cpu(0)),
        ("snapshot_free", net.snapshot_free()),
        ("clear", net.clear()),
        ("clear_cpu", net.clear_cpu(0)),
        ("set_mode", net.set_mode(Mode::Discard)),
        ("set_cpumask", net.set_cpumask(1)),
        ("set_stack_traces", net.set_stack_traces(true)),
    ] {
        assert_eq!(result, refused, "{what}");
    }
    MAY_WAIT.with(|w| w.set(true));
    drop(held);
    assert_eq!(t.instance_names().unwrap(), ["net"]);
    MAY_WAIT.with(|w| w.set(false));
    assert_eq!(t.destroy(net).map_err(|e| e.error), refused);
    MAY_WAIT.with(|w| w.set(true));
    t.destroy_by_name("net").unwrap();
}

/// Inside a section (in a closure the tracer runs there, as `visit_instances`'),
/// control operations and the registry's getters are refused before they take a
/// lock: a control operation that holds the lock waits for this CPU's section to
/// end, so the caller spun on it for good. `lookup` and the others took the lock;
/// only those that wait for a grace period refused, once they held it.
#[test]
fn control_from_inside_a_section_is_refused_before_any_lock() {
    let t = tracer();
    let net = t.get_or_create("net", CONFIG).unwrap();
    let refused = Err(InstanceError::Buffer(Error::WouldDeadlock));
    let mut inside = Vec::new();
    t.visit_instances(|view| {
        if view.name != "net" {
            return;
        }
        let lent = Buffer::new(Probe::default(), SMALL).unwrap();
        inside = std::vec![
            ("lookup", t.lookup("net").map(drop)),
            ("get_or_create", t.get_or_create("other", CONFIG).map(drop)),
            ("create_over", t.create_over("other", lent).map(drop)),
            ("keep_armed", t.keep_armed(None, None).map(drop)),
            ("destroy_by_name", t.destroy_by_name("net")),
            ("instances", t.instances().map(drop).map_err(InstanceError::from)),
            ("instance_names", t.instance_names().map(drop).map_err(InstanceError::from)),
            ("memory", t.memory().map(drop).map_err(InstanceError::from)),
            ("resize", net.resize(8192)),
            ("set_clock", net.set_clock(crate::Clock::Counter)),
            ("snapshot_alloc", net.snapshot_alloc()),
            ("clear", net.clear()),
            ("set_mode", net.set_mode(Mode::Discard)),
            ("set_cpumask", net.set_cpumask(1)),
        ];
    });
    assert_eq!(inside.len(), 14, "the closure ran for `net`");
    for (what, result) in inside {
        assert_eq!(result, refused, "{what}");
    }
    let hook_refused = Err(crate::tracer::HookError::from(Error::WouldDeadlock));
    let mut hooks = None;
    t.visit_instances(|_| {
        hooks = Some(net.set_filter(&crate::event::marker::MARKER, "buf == \"x\""))
    });
    assert_eq!(hooks, Some(hook_refused), "set_filter");
    assert_eq!(t.instance_names().unwrap(), ["net"], "nothing changed");
    assert_eq!(net.bytes_per_cpu(), 4096);
    drop(net);
    t.destroy_by_name("net").unwrap();
}

/// Once `destroy` has begun, a grace period it waits for later cannot refuse it: a
/// platform whose answer changes meanwhile (as when a writer that shares the
/// caller's CPU index, without the promise, is inside at the moment of the check)
/// left the instance half destroyed, unpublished but still registered, its name
/// taken for good.
#[test]
fn a_destroy_that_began_completes() {
    let t = tracer();
    drop(t.get_or_create("net", CONFIG).unwrap());
    DURING_GRACE
        .with(|hook| *hook.borrow_mut() = Some(Box::new(|| MAY_WAIT.with(|w| w.set(false)))));
    let destroyed = t.destroy_by_name("net");
    DURING_GRACE.with(|hook| hook.borrow_mut().take());
    MAY_WAIT.with(|w| w.set(true));
    assert_eq!(destroyed, Ok(()));
    assert_eq!(t.instance_names().unwrap(), Vec::<std::string::String>::new());
    let again = t.get_or_create("net", CONFIG).unwrap();
    again.write_marker("back").unwrap();
    assert_eq!(again.stats(0).unwrap().entries, 1, "the new instance records");
}

/// A clear refused (a bad CPU, a consuming reader open) changes nothing: it paused
/// every CPU's writes for a grace period first, and what they wrote meanwhile was
/// neither recorded nor counted.
#[test]
fn a_refused_clear_pauses_no_writer() {
    let t = tracer();
    let top = t.top();
    let recorder = top.recorder();
    let _reader = recorder.live().consumer(1).unwrap();
    // Read without the instance's lock, which a clear holds.
    let kept = top.recorder();
    let written = move || kept.live().stats(0).unwrap().written;
    static LOST: Mutex<u64> = Mutex::new(0);
    DURING_GRACE.with(|hook| {
        *hook.borrow_mut() = Some(Box::new(move || {
            let before = written();
            t.top().write_marker("x").unwrap();
            *LOST.lock().unwrap() += u64::from(written() == before);
        }))
    });
    assert_eq!(top.clear_cpu(2), Err(InstanceError::Buffer(Error::BadCpu)));
    assert_eq!(top.clear(), Err(InstanceError::Buffer(Error::Busy)));
    DURING_GRACE.with(|hook| hook.borrow_mut().take());
    assert_eq!(*LOST.lock().unwrap(), 0, "markers lost during a refused clear");
}

/// A `Cursor` of the caller's whose payload is shorter than the length it fetched:
/// the merge gives the payload there is, where it panicked.
#[test]
fn a_cursor_whose_payload_falls_short_does_not_panic_the_merge() {
    struct Short(bool);
    impl Cursor for Short {
        fn fetch(&mut self) -> Option<Meta> {
            let fetched = core::mem::replace(&mut self.0, true);
            let context = crate::Context::TASK;
            (!fetched).then_some(Meta { cpu: 0, ts: 1, id: 1, context, len: 100, lost: 0 })
        }

        fn accept(&mut self) -> Option<u64> {
            Some(0)
        }

        fn payload(&self) -> &[u8] {
            &[1, 2]
        }
    }
    let mut merged = Merged::new(std::vec![Short(false)]);
    assert_eq!(merged.next_record().map(|r| r.payload.to_vec()), Some(std::vec![1, 2]));
    assert!(merged.next_record().is_none());
}

/// An instance's getters, and the top-level instance, take no lock: an interrupt
/// (here another CPU's thread, as on one it cannot run) over a control operation
/// that holds the tracer's and the instance's locks while it waits for every CPU
/// reads them. They spun on those locks, and the wait never ended.
#[test]
fn getters_take_no_lock_a_control_operation_holds() {
    let t = tracer();
    let net = t.get_or_create("net", CONFIG).unwrap();
    let event = t.events()[0];
    net.set_trigger(event, "traceon:3").unwrap();
    net.set_filter(event, "common_pid == 0").unwrap();
    let held = (t.registry.lock(), net.state.recorder.lock());
    let (done, read) = std::sync::mpsc::channel();
    let reader = net.clone();
    std::thread::spawn(move || {
        HostPlatform::set_cpu(1);
        MAY_WAIT.with(|w| w.set(false));
        let got = (
            (reader.mode(), reader.bytes_per_cpu(), reader.has_snapshot(), reader.clock()),
            (reader.recorder().live().bytes_per_cpu(), reader.stats(1).map(|s| s.written)),
            (reader.triggers(event), reader.filter(event), t.top().is_top_level()),
        );
        reader.clock_now();
        // Let go before saying so: the instance is destroyed next.
        drop(reader);
        let _ = done.send(got);
    });
    let got = read.recv_timeout(std::time::Duration::from_secs(60));
    let got = got.expect("a getter waited for a lock the control operation holds");
    drop(held);
    let expected = (
        (Mode::Overwrite, 4096, false, crate::Clock::Local),
        (4096, Ok(0)),
        (std::vec!["traceon:count=3".into()], Some("common_pid == 0".into()), true),
    );
    assert_eq!(got, expected);
    drop(net);
    t.destroy_by_name("net").unwrap();
}

/// A snapshot taken from an interrupt handler (over a control operation that
/// holds the locks) swaps as a `snapshot` trigger does, without a lock or a wait,
/// into the snapshot buffer allocated before; without one it is refused, with
/// nothing changed. It was refused always.
#[test]
fn a_snapshot_from_an_interrupt_swaps_without_waiting() {
    let t = tracer();
    let net = t.get_or_create("net", CONFIG).unwrap();
    let interrupt = |net: &crate::Instance<'_, Probe>| {
        let held = (t.registry.lock(), net.state.recorder.lock());
        MAY_WAIT.with(|w| w.set(false));
        let taken = net.snapshot_take();
        MAY_WAIT.with(|w| w.set(true));
        drop(held);
        taken
    };
    net.write_marker("before").unwrap();
    assert_eq!(interrupt(&net), Err(InstanceError::Buffer(Error::NoSpare)));
    assert!(!net.has_snapshot());
    assert_eq!(net.stats(0).unwrap().entries, 1, "the live buffer is as it was");
    net.snapshot_alloc().unwrap();
    assert_eq!(interrupt(&net), Ok(()));
    let recorder = net.recorder();
    let snapshot = recorder.snapshot().expect("the snapshot buffer");
    assert_eq!(snapshot.stats(0).unwrap().entries, 1, "the snapshot holds the marker");
    assert_eq!(net.stats(0).unwrap().entries, 0, "recording goes on in the other buffer");
    drop((recorder, net));
    t.destroy_by_name("net").unwrap();
}

/// `set_tracing` and `tracing` take no lock, so an interrupt over a control
/// operation that holds the instance's lock can call them: they spun on it.
#[test]
fn set_tracing_from_an_interrupt_takes_no_lock() {
    let t = tracer();
    let net = t.get_or_create("net", CONFIG).unwrap();
    let held = net.state.recorder.lock();
    MAY_WAIT.with(|w| w.set(false));
    net.set_tracing(false);
    assert!(!net.tracing());
    MAY_WAIT.with(|w| w.set(true));
    drop(held);
    net.set_tracing(true);
    drop(net);
    t.destroy_by_name("net").unwrap();
}

/// Recording turned off in the recorder a resize replaces, after the resize copied
/// its state (a `traceoff` trigger in a section that began before the new one was
/// published): the new recorder keeps it off, where it recorded on.
#[test]
fn traceoff_during_a_resize_is_kept() {
    let t = tracer();
    let top = t.top();
    let mut old = Some(top.recorder());
    DURING_GRACE.with(|hook| {
        *hook.borrow_mut() = Some(Box::new(move || {
            old.take().inspect(|old| old.live().set_recording(false));
        }))
    });
    top.resize(8192).unwrap();
    DURING_GRACE.with(|hook| hook.borrow_mut().take());
    assert!(!top.tracing(), "the traceoff was undone by the resize");
    top.set_tracing(true);
}

/// A trigger's snapshot swap in the recorder a snapshot free replaces is refused
/// until the old recorder is out of reach: made after the new recorder took the
/// old one's live set, it made the spare live in a recorder about to go, and what
/// was written there went with it.
#[test]
fn a_swap_during_a_snapshot_free_is_refused() {
    let t = tracer();
    let top = t.top();
    top.snapshot_alloc().unwrap();
    let mut old = Some(top.recorder());
    static SWAPPED: Mutex<Option<Result<(), Error>>> = Mutex::new(None);
    DURING_GRACE.with(|hook| {
        *hook.borrow_mut() = Some(Box::new(move || {
            if let Some(old) = old.take() {
                *SWAPPED.lock().unwrap() = Some(old.swap_nowait());
            }
        }))
    });
    top.snapshot_free().unwrap();
    DURING_GRACE.with(|hook| hook.borrow_mut().take());
    assert_eq!(*SWAPPED.lock().unwrap(), Some(Err(Error::Busy)));
    top.write_marker("kept").unwrap();
    assert_eq!(top.stats(0).unwrap().entries, 1, "written into the live set");
}

/// A clear called from inside a write through the live set itself (which enters no
/// section) is refused: it reset the ring under the write, which was then counted
/// as written and was nowhere.
#[test]
fn a_clear_inside_a_direct_write_is_refused() {
    let t = tracer();
    let top = t.top();
    let recorder = top.recorder();
    let mut refused = None;
    recorder
        .live()
        .write_with(1, 8, |w| {
            refused = Some(top.clear());
            w.put_u64(7);
        })
        .unwrap();
    assert_eq!(refused, Some(Err(InstanceError::Buffer(Error::WouldDeadlock))));
    let stats = top.stats(0).unwrap();
    assert_eq!((stats.written, stats.entries), (1, 1), "{stats:?}");
    assert!(stats.balanced(), "{stats:?}");
    top.write_marker("after").unwrap();
    assert_eq!(top.stats(0).unwrap().entries, 2, "writes resumed");
}

/// A recorder kept from before its instance replaced it (a resize of one CPU, whose
/// other rings the new one shares) takes no clear or swap: its clear reset rings the
/// new recorder's writers were writing, without pausing them.
#[test]
fn a_replaced_recorder_takes_no_control_operation() {
    let t = tracer();
    let net = t.get_or_create("net", InstanceConfig { snapshot: true, ..CONFIG }).unwrap();
    let old = net.recorder();
    net.write_marker("kept").unwrap();
    net.resize_cpu(1, 8192).unwrap();
    assert_eq!(old.clear(), Err(Error::Replaced));
    assert_eq!(old.clear_cpu(0), Err(Error::Replaced));
    assert_eq!(old.clear_snapshot(None), Err(Error::Replaced));
    assert_eq!(old.swap(), Err(Error::Replaced));
    assert_eq!(old.swap_nowait(), Err(Error::Replaced));
    assert_eq!(net.stats(0).unwrap().entries, 1, "CPU 0's ring, which both share, kept");
    // The current one takes them.
    net.recorder().clear().unwrap();
    assert_eq!(net.stats(0).unwrap().entries, 0);
    drop(old);
    drop(net);
    t.destroy_by_name("net").unwrap();
}

/// Lent words that are no ring are refused with the rule they break: too few, or
/// not a power of two (both said "buffer too big"); a region of no slot likewise.
#[test]
fn lent_words_that_are_no_ring_are_refused_by_rule() {
    use core::sync::atomic::AtomicU64;
    // Lent memory is `'static`: a static keeps it reachable, for Miri's leak check.
    static KEPT: Mutex<Vec<&'static [AtomicU64]>> = Mutex::new(Vec::new());
    let lent = |n: usize| -> &'static [AtomicU64] {
        let words = Vec::leak((0..n).map(|_| AtomicU64::new(0)).collect::<Vec<_>>());
        KEPT.lock().unwrap().push(words);
        words
    };
    let over = |n| Buffer::over(Probe::default(), Mode::Overwrite, [lent(n)]).map(drop);
    assert_eq!(over(7), Err(Error::ZeroSize));
    assert_eq!(over(12), Err(Error::NotPowerOfTwo));
    assert_eq!(over(16), Ok(()));
    assert_eq!(crate::ring::persist::Region::new(lent(64), 0).map(drop), Err(Error::ZeroSize));
    // Words back one ring at a time: the same slice twice, or overlapping slices, in
    // one set or in two, are refused while the first ring lives.
    let words = lent(32);
    let set = |rings: &[&'static [AtomicU64]]| {
        Buffer::over(Probe::default(), Mode::Overwrite, rings.iter().copied())
    };
    assert_eq!(set(&[words, words]).err(), Some(Error::Lent));
    assert_eq!(set(&[&words[..16], &words[8..24]]).err(), Some(Error::Lent));
    let halves = set(&[&words[..16], &words[16..]]).unwrap();
    assert_eq!(set(&[&words[16..24]]).err(), Some(Error::Lent), "another set");
    drop(halves);
    assert!(set(&[words]).is_ok(), "free again once the set is gone");
}
