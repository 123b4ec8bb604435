//! Triggers (parsing, read-back, counts, each action) and filters and triggers wired
//! into the tracer's instances.

use crate::event::Encode;
use crate::event::dispatch::Body;
use crate::field::{Field, FieldKind};
use crate::tests::util::{HERE, Probe};
use crate::tracer::trigger::{
    Action, Target, Trigger, TriggerCommand, TriggerError, TriggerReason,
};
use crate::{
    Error, HostPlatform, InstanceConfig, InstanceError, Limits, Mode, Tracer,
    event::DescriptorKind, event::EventDescriptor, event::FilterError, event::FilterReason,
    event::dispatch::Dispatch, tracer::HistReason, tracer::HookError, tracer::STACK_TRACE,
};
use core::cell::{Cell, RefCell};
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::boxed::Box;
use std::string::{String, ToString};
use std::vec::Vec;

const N_FIELDS: &[Field<'static>] = &[Field { name: "n", kind: FieldKind::U32 }];

/// A lookup that knows one event, `sys:target`, and the marker's `ftrace:print`.
fn lookup(system: &str, name: &str) -> Option<&'static EventDescriptor> {
    static TARGET: EventDescriptor =
        EventDescriptor::new("sys", "target", "", &[], DescriptorKind::Event);
    match (system, name) {
        ("sys", "target") => Some(&TARGET),
        ("ftrace", "print") => Some(&crate::event::marker::MARKER),
        _ => None,
    }
}

fn add(line: &str) -> Trigger {
    match Trigger::parse(line, N_FIELDS, lookup, None).unwrap() {
        TriggerCommand::Add(t) => t,
        other => panic!("{line}: not an addition: {other:?}"),
    }
}

fn refused(line: &str) -> TriggerError {
    Trigger::parse(line, N_FIELDS, lookup, None).unwrap_err()
}

#[test]
fn trigger_lines_read_back_as_ftrace_prints_them() {
    for (line, shown) in [
        ("traceoff", "traceoff:unlimited"),
        ("traceon:3", "traceon:count=3"),
        // Counts as Linux's `kstrtoul` base 0 reads them.
        ("traceon:0x10", "traceon:count=16"),
        ("traceon:010", "traceon:count=8"),
        ("traceon:+2", "traceon:count=2"),
        ("  snapshot:1 if n == 2 ", "snapshot:count=1 if n == 2"),
        ("stacktrace if n > 1 && n < 9", "stacktrace:unlimited if n > 1 && n < 9"),
        ("enable_event:sys:target", "enable_event:sys:target:unlimited"),
        ("disable_event:sys:target:5 if n&1", "disable_event:sys:target:count=5 if n&1"),
        ("enable_hist:sys:target", "enable_hist:sys:target:unlimited"),
        ("disable_hist:sys:target:2 if n == 1", "disable_hist:sys:target:count=2 if n == 1"),
    ] {
        assert_eq!(add(line).to_string(), shown, "{line}");
    }
    let TriggerCommand::Remove(t) = Trigger::parse("!traceoff:4", N_FIELDS, lookup, None).unwrap()
    else {
        panic!("not a removal");
    };
    assert_eq!(t.action(), Action::TraceOff);
    assert!(add("enable_event:sys:target:2").same_as(&add("enable_event:sys:target")));
    // One of the two per target, as in Linux.
    assert!(add("enable_event:sys:target").same_as(&add("disable_event:sys:target")));
    assert!(!add("enable_event:sys:target").same_as(&add("traceon")));
    assert!(add("traceon:2").same_as(&add("traceoff if n == 1")));
    assert!(!add("traceon").same_as(&add("snapshot")));
    assert!(add("enable_hist:sys:target").same_as(&add("disable_hist:sys:target:3")));
    assert!(!add("enable_hist:sys:target").same_as(&add("enable_event:sys:target")));
    assert!(!add("disable_hist:sys:target").same_as(&add("disable_event:sys:target")));
}

#[test]
fn trigger_errors_name_the_position_and_reason() {
    use TriggerReason::*;
    for (line, pos, reason) in [
        ("", 0, Empty),
        ("   ", 0, Empty),
        ("nonsense", 0, UnknownCommand),
        ("!nonsense", 1, UnknownCommand),
        ("enable_event", 12, ExpectedEvent),
        ("enable_event:sys", 16, ExpectedEvent),
        ("enable_event:sys:nope", 17, UnknownEvent),
        ("enable_event:ftrace:print", 20, NotTakenEvent),
        ("traceoff:18446744073709551615", 9, BadCount),
        ("traceoff:x", 9, BadCount),
        ("traceoff:-1", 9, BadCount),
        ("traceoff:1:2", 11, UnexpectedText),
        ("traceoff junk", 9, UnexpectedText),
        ("traceoff if", 9, UnexpectedText),
        ("traceoff iff n == 1", 9, UnexpectedText),
        ("traceoff if x == 1", 14, Filter(FilterReason::UnknownField)),
        ("traceoff if n == ", 16, Filter(FilterReason::ExpectedValue)),
    ] {
        assert_eq!(refused(line), TriggerError { pos, reason }, "{line:?}");
    }
    assert_eq!(refused("traceoff if x == 1").to_string(), "parse error at 14: field not found");
    let long = "traceoff if ".to_string() + &"n == 1 || ".repeat(200) + "n == 1";
    assert_eq!(refused(&long).reason, TooLong);
}

/// A target that records what triggers did to it.
#[derive(Default)]
struct Mock {
    tracing: Cell<bool>,
    event: Cell<bool>,
    snapshots: Cell<u32>,
    stacks: Cell<u32>,
    /// Lines written into the trace.
    notes: RefCell<Vec<String>>,
    /// Dumps asked for: (every CPU's, this CPU's).
    dumps: Cell<(u32, u32)>,
    /// Why every snapshot is refused, if it is.
    refuse_snapshots: Option<crate::Error>,
    /// The platform has no console: every dump refused.
    refuse_dumps: bool,
    /// What `enable_hist`/`disable_hist` last did: paused or continued.
    hists_paused: Cell<Option<bool>>,
    /// The instance's clock, as `common_timestamp` reads it.
    clock: Cell<u64>,
}

impl Target for Mock {
    fn tracing(&self) -> bool {
        self.tracing.get()
    }
    fn set_tracing(&self, on: bool) {
        self.tracing.set(on);
    }
    fn snapshot(&self) -> Result<(), crate::Error> {
        if let Some(error) = self.refuse_snapshots {
            return Err(error);
        }
        self.snapshots.set(self.snapshots.get() + 1);
        Ok(())
    }
    fn note(&self, text: &str) {
        self.notes.borrow_mut().push(text.into());
    }
    fn stack_trace(&self) {
        self.stacks.set(self.stacks.get() + 1);
    }
    fn stack_frames(&self, frames: &mut [u64]) {
        frames.fill(0);
    }
    fn now(&self) -> u64 {
        self.clock.get()
    }
    fn dump(&self, this_cpu: bool) -> bool {
        let (all, cpu) = self.dumps.get();
        self.dumps.set(if this_cpu { (all, cpu + 1) } else { (all + 1, cpu) });
        !self.refuse_dumps
    }
    fn event_enabled(&self, _: &EventDescriptor) -> bool {
        self.event.get()
    }
    fn set_event(&self, _: &EventDescriptor, on: bool) {
        self.event.set(on);
    }
    fn set_hists_paused(&self, _: &EventDescriptor, paused: bool) {
        self.hists_paused.set(Some(paused));
    }
}

/// The arguments of an event with [`N_FIELDS`].
fn n(v: u32) -> Encode<(u32,), (u32,)> {
    Encode::new((v,))
}

/// `args` as the tracer hands an event to its triggers (without encoded words, so
/// conditions judge the arguments).
fn body(args: &Encode<(u32,), (u32,)>) -> Body<'_> {
    Body { len: 4, payload: args, words: None }
}

#[test]
fn trigger_counts_run_out_and_state_changes_count_once() {
    let mock = Mock { tracing: Cell::new(true), ..Mock::default() };
    let off = add("traceoff:2");
    off.fire(&body(&n(0)), HERE, &mock);
    assert!(!mock.tracing());
    // Already off: no change, no count taken.
    off.fire(&body(&n(0)), HERE, &mock);
    assert_eq!(off.count(), Some(1));
    mock.tracing.set(true);
    off.fire(&body(&n(0)), HERE, &mock);
    assert_eq!((mock.tracing(), off.count()), (false, Some(0)));
    mock.tracing.set(true);
    off.fire(&body(&n(0)), HERE, &mock);
    assert!(mock.tracing(), "a count of 0 never fires");

    let enable = add("enable_event:sys:target:1 if n == 7");
    enable.fire(&body(&n(6)), HERE, &mock);
    assert!(!mock.event.get(), "the filter rejects n == 6");
    enable.fire(&body(&n(7)), HERE, &mock);
    assert!(mock.event.get());
    assert_eq!(enable.to_string(), "enable_event:sys:target:count=0 if n == 7");

    let snap = add("snapshot:3");
    for _ in 0..5 {
        snap.fire(&body(&n(0)), HERE, &mock);
    }
    assert_eq!((mock.snapshots.get(), snap.count()), (3, Some(0)));
    let stack = add("stacktrace");
    stack.fire(&body(&n(0)), HERE, &mock);
    stack.fire(&body(&n(0)), HERE, &mock);
    assert_eq!((mock.stacks.get(), stack.count()), (2, None));

    // `enable_hist` and `disable_hist` count each run, a change or not, as in ftrace.
    let (on, off) = (add("enable_hist:sys:target:2"), add("disable_hist:sys:target if n == 1"));
    off.fire(&body(&n(0)), HERE, &mock);
    assert_eq!(mock.hists_paused.get(), None, "the filter rejects n == 0");
    off.fire(&body(&n(1)), HERE, &mock);
    assert_eq!(mock.hists_paused.get(), Some(true));
    for _ in 0..3 {
        on.fire(&body(&n(0)), HERE, &mock);
        mock.hists_paused.set(Some(true));
    }
    assert_eq!(on.count(), Some(0));
    on.fire(&body(&n(0)), HERE, &mock);
    assert_eq!(mock.hists_paused.get(), Some(true), "ran out after two runs");
}

/// `enable_hist` and `disable_hist` continue and pause every histogram the target
/// event has in the instance, and only there; they are event triggers only.
#[test]
fn enable_hist_and_disable_hist_drive_the_target_events_histograms() {
    static GO: EventDescriptor =
        EventDescriptor::new("zt10", "go", "n={n}", N_FIELDS, DescriptorKind::Event);
    static STOP: EventDescriptor =
        EventDescriptor::new("zt10", "stop", "n={n}", N_FIELDS, DescriptorKind::Event);
    static DATA: EventDescriptor =
        EventDescriptor::new("zt10", "data", "n={n}", N_FIELDS, DescriptorKind::Event);
    let t = tracer(&[&GO, &STOP, &DATA]);
    let top = t.top();
    let other = t.get_or_create("other", InstanceConfig::default()).unwrap();
    for instance in [&top, &other] {
        // The smallest tables: Miri interprets each slot's creation.
        instance.set_trigger(&DATA, "hist:keys=n:size=128:pause").unwrap();
    }
    top.set_trigger(&DATA, "hist:keys=n:vals=n:size=128:pause").unwrap();
    top.set_trigger(&GO, "enable_hist:zt10:data:1").unwrap();
    top.set_trigger(&STOP, "disable_hist:zt10:data").unwrap();
    let refused = top.set_trigger(&STOP, "enable_hist:zt10:data").unwrap_err();
    assert!(matches!(refused, HookError::Trigger(e) if e.reason == TriggerReason::Exists));
    assert!(top.event_soft_mode(&DATA).unwrap(), "a target, as in ftrace");
    let states = |i: &crate::Instance<'_, Probe>| -> Vec<String> {
        i.triggers(&DATA).iter().map(|t| t.rsplit(' ').next().unwrap().to_string()).collect()
    };
    fire(t, &DATA, 1);
    fire(t, &GO, 0);
    assert_eq!(states(&top), ["[active]", "[active]"], "both of the event's histograms");
    assert_eq!(states(&other), ["[paused]"], "not another instance's");
    fire(t, &DATA, 2);
    fire(t, &STOP, 0);
    assert_eq!(states(&top), ["[paused]", "[paused]"]);
    fire(t, &DATA, 3);
    fire(t, &GO, 0);
    assert_eq!(states(&top), ["[paused]", "[paused]"], "its count ran out");
    let mut text = String::new();
    top.write_hists(&DATA, None, &mut text).unwrap();
    let entries: Vec<&str> = text.lines().filter(|l| l.starts_with('{')).collect();
    assert_eq!(
        entries,
        [
            "{ n:          2 } hitcount:          1",
            "{ n:          2 } hitcount:          1  n:          2"
        ],
        "only what came while they ran"
    );
    assert_eq!(top.triggers(&GO), ["enable_hist:zt10:data:count=0"]);
    t.destroy(other).unwrap();
}

#[test]
fn dump_and_cpudump_ask_for_their_dump_and_a_refused_one_keeps_its_count() {
    assert_eq!(add("dump").to_string(), "dump:unlimited");
    assert_eq!(add("cpudump:2").to_string(), "cpudump:count=2");
    let mock = Mock::default();
    let (dump, cpudump) = (add("dump:1"), add("cpudump"));
    for _ in 0..3 {
        dump.fire(&body(&n(0)), HERE, &mock);
        cpudump.fire(&body(&n(0)), HERE, &mock);
    }
    assert_eq!(mock.dumps.get(), (1, 3));
    let console_less = Mock { refuse_dumps: true, ..Mock::default() };
    let dump = add("dump:2");
    dump.fire(&body(&n(0)), HERE, &console_less);
    assert_eq!((dump.refused(), dump.count()), (1, Some(2)));
}

#[test]
fn trigger_refused_snapshot_is_counted_marked_and_a_busy_one_keeps_its_count() {
    let busy =
        Mock { tracing: Cell::new(true), refuse_snapshots: Some(Error::Busy), ..Mock::default() };
    let snap = add("snapshot:2");
    snap.fire(&body(&n(0)), HERE, &busy);
    snap.fire(&body(&n(0)), HERE, &busy);
    assert_eq!((snap.refused(), snap.count()), (2, Some(2)));
    assert!(busy.tracing(), "a busy snapshot leaves recording on");
    assert_eq!(busy.notes.borrow().len(), 2);
    assert!(busy.notes.borrow()[0].contains("SNAPSHOT BUSY"));

    // Without a snapshot buffer, as ftrace: marked, and recording stops so the
    // window stays in the live buffer; the count is taken, as ftrace's, so once
    // it is spent, recording turned on again stays on.
    let freed = Mock {
        tracing: Cell::new(true),
        refuse_snapshots: Some(Error::NoSpare),
        ..Mock::default()
    };
    let stop = ["*** SNAPSHOT NOT ALLOCATED ***", "*** stopping trace here!   ***"];
    for left in [1, 0] {
        freed.set_tracing(true);
        snap.fire(&body(&n(0)), HERE, &freed);
        assert!(!freed.tracing());
        assert_eq!(*freed.notes.borrow(), stop);
        assert_eq!((snap.refused(), snap.count()), (4 - left, Some(left)));
        freed.notes.borrow_mut().clear();
    }
    freed.set_tracing(true);
    snap.fire(&body(&n(0)), HERE, &freed);
    assert!(freed.tracing() && freed.notes.borrow().is_empty(), "the count is spent");
}

#[test]
fn trigger_counts_are_exact_across_threads() {
    /// A target counting snapshots from several threads.
    struct Shared(AtomicU64);
    impl Target for Shared {
        fn tracing(&self) -> bool {
            true
        }
        fn set_tracing(&self, _: bool) {}
        fn snapshot(&self) -> Result<(), crate::Error> {
            self.0.fetch_add(1, Relaxed);
            Ok(())
        }
        fn note(&self, _: &str) {}
        fn stack_trace(&self) {}
        fn stack_frames(&self, _: &mut [u64]) {}
        fn now(&self) -> u64 {
            0
        }
        fn dump(&self, _: bool) -> bool {
            false
        }
        fn event_enabled(&self, _: &EventDescriptor) -> bool {
            true
        }
        fn set_event(&self, _: &EventDescriptor, _: bool) {}
        fn set_hists_paused(&self, _: &EventDescriptor, _: bool) {}
    }
    // Fires per thread (fewer under Miri, which interprets every step); the count
    // runs out after half of them.
    let fires: u32 = if cfg!(miri) { 200 } else { 5000 };
    let snap = add(&format!("snapshot:{}", 2 * fires));
    let target = Shared(AtomicU64::new(0));
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| (0..fires).for_each(|_| snap.fire(&body(&n(0)), HERE, &target)));
        }
    });
    assert_eq!((target.0.load(Relaxed), snap.count()), (u64::from(2 * fires), Some(0)));
}

/// A tracer over `events` (whose systems sort after the built-in ones, so that
/// those get the same ids in every test's tracer); one CPU, CPU 0.
/// Named histograms (`name=`): every histogram of one name in an instance, on any
/// event, adds to one table, which each one's `hist` file shows; pause, continue
/// and clear act on it; keys or values of other names, types or modifiers are
/// refused; removing one keeps the table for the others; another instance's name
/// is another table.
#[test]
#[cfg_attr(miri, ignore = "single-threaded safe code, run natively (8 s under Miri)")]
fn named_histograms_share_one_table_across_events() {
    const WIDE: &[Field<'static>] = &[Field { name: "n", kind: FieldKind::U64 }];
    static A: EventDescriptor =
        EventDescriptor::new("zt11", "a", "n={n}", N_FIELDS, DescriptorKind::Event);
    static B: EventDescriptor =
        EventDescriptor::new("zt11", "b", "n={n}", N_FIELDS, DescriptorKind::Event);
    static C: EventDescriptor =
        EventDescriptor::new("zt11", "c", "n={n}", WIDE, DescriptorKind::Event);
    let t = tracer(&[&A, &B, &C]);
    let top = t.top();
    let other = t.get_or_create("other", InstanceConfig::default()).unwrap();
    let entries = |i: &crate::Instance<'_, Probe>, event: &EventDescriptor| {
        let mut text = String::new();
        i.write_hists(event, None, &mut text).unwrap();
        text.lines().filter(|l| l.starts_with('{')).map(String::from).collect::<Vec<_>>()
    };
    let reason = |result: Result<(), HookError>| match result {
        Err(HookError::Trigger(e)) => e.reason,
        other => panic!("{other:?}"),
    };
    // The smallest table (Miri interprets each slot's creation); the second takes
    // the first's, whatever its own size says.
    top.set_trigger(&A, "hist:name=both:keys=n:size=128").unwrap();
    top.set_trigger(&B, "hist:name=both:keys=n").unwrap();
    let line = "hist:name=both:keys=n:vals=hitcount:sort=hitcount:size=128 [active]";
    assert_eq!((top.triggers(&A), top.triggers(&B)), (vec![line.into()], vec![line.into()]));
    fire(t, &A, 1);
    fire(t, &B, 1);
    fire(t, &B, 2);
    let both = ["{ n:          2 } hitcount:          1", "{ n:          1 } hitcount:          2"];
    assert_eq!(entries(&top, &A), both);
    assert_eq!(entries(&top, &B), both);

    // Other keys or values, or a field of another type, under that name: refused.
    for (event, line) in [(&B, "hist:name=both:keys=n.hex"), (&C, "hist:name=both:keys=n")] {
        let refused = reason(top.set_trigger(event, line));
        assert_eq!(refused, TriggerReason::Hist(HistReason::IncompatibleName), "{line}");
    }
    for name in ["a-b", "x.y", &"n".repeat(33)] {
        let refused = reason(top.set_trigger(&C, &format!("hist:name={name}:keys=n")));
        assert_eq!(refused, TriggerReason::Hist(HistReason::BadName), "{name}");
    }
    assert!(top.triggers(&C).is_empty());

    // Pausing through one pauses all of the name; clearing through one empties the
    // table.
    top.set_trigger(&A, "hist:name=both:keys=n:pause").unwrap();
    assert!(top.triggers(&B)[0].ends_with("[paused]"));
    fire(t, &B, 3);
    top.set_trigger(&A, "hist:name=both:keys=n:cont").unwrap();
    assert_eq!(entries(&top, &B), both, "nothing added while paused");
    top.set_trigger(&B, "hist:name=both:keys=n:clear").unwrap();
    assert!(entries(&top, &A).is_empty());

    // Removing one keeps the table for the rest; a new one joins it again.
    fire(t, &A, 5);
    top.set_trigger(&A, "!hist:name=both:keys=n").unwrap();
    assert!(top.triggers(&A).is_empty());
    let five = ["{ n:          5 } hitcount:          1"];
    assert_eq!(entries(&top, &B), five);
    // One that joins with `:pause` pauses the name's table.
    top.set_trigger(&A, "hist:name=both:keys=n:pause").unwrap();
    assert!(top.triggers(&B)[0].ends_with("[paused]"));
    fire(t, &B, 8);
    assert_eq!(entries(&top, &A), five, "nothing added while paused");
    top.set_trigger(&A, "hist:name=both:keys=n:cont").unwrap();
    top.set_trigger(&A, "!hist:name=both:keys=n").unwrap();
    top.set_trigger(&A, "hist:name=both:keys=n").unwrap();
    assert_eq!(entries(&top, &A), five);
    // A histogram without the name is its own.
    top.set_trigger(&A, "hist:keys=n:size=128").unwrap();
    fire(t, &A, 6);
    let mut text = String::new();
    top.write_hists(&A, None, &mut text).unwrap();
    assert_eq!(text.matches("{ n:          6 }").count(), 2, "{text}");
    assert_eq!(text.matches("{ n:          5 }").count(), 1, "{text}");

    // Another instance's name is another table.
    other.set_trigger(&A, "hist:name=both:keys=n:size=128").unwrap();
    fire(t, &A, 7);
    assert_eq!(entries(&other, &A), ["{ n:          7 } hitcount:          1"]);
    t.destroy(other).unwrap();
}

#[test]
#[cfg_attr(miri, ignore = "single-threaded safe code, run natively (15 s under Miri)")]
fn hist_variables_measure_between_two_events_and_read_once() {
    static START: EventDescriptor =
        EventDescriptor::new("zt12", "start", "n={n}", N_FIELDS, DescriptorKind::Event);
    static END: EventDescriptor =
        EventDescriptor::new("zt12", "end", "n={n}", N_FIELDS, DescriptorKind::Event);
    static OTHER: EventDescriptor =
        EventDescriptor::new("zt12", "other", "n={n}", N_FIELDS, DescriptorKind::Event);
    let t = tracer(&[&START, &END, &OTHER]);
    let top = t.top();
    let entries = |event: &EventDescriptor| {
        let mut text = String::new();
        top.write_hists(event, None, &mut text).unwrap();
        let hits = text.lines().find_map(|l| l.trim().strip_prefix("Hits: ")).map(String::from);
        let lines = text.lines().filter(|l| l.starts_with('{')).map(String::from);
        (lines.collect::<Vec<_>>(), hits.unwrap_or_default())
    };
    let refused = |event: &EventDescriptor, line: &str| match top.set_trigger(event, line) {
        Err(HookError::Trigger(e)) => (e.pos, e.reason),
        other => panic!("{line}: {other:?}"),
    };
    top.set_trigger(&START, "hist:keys=n:ts0=common_timestamp:size=128").unwrap();
    let end = "hist:keys=n:vals=$lat:lat=common_timestamp-$ts0:sort=n:size=128";
    top.set_trigger(&END, end).unwrap();
    // Read back as ftrace writes them: values, then the variables.
    let shown = "hist:keys=n:vals=hitcount,$lat:lat=common_timestamp-$ts0:sort=n:size=128 [active]";
    assert_eq!(top.triggers(&END), [shown]);
    HostPlatform::set_clock(1000);
    fire(t, &START, 1);
    HostPlatform::set_clock(1500);
    fire(t, &START, 2);
    HostPlatform::set_clock(4000);
    fire(t, &END, 1);
    // The start was read once: a second end of key 1 pairs with nothing.
    fire(t, &END, 1);
    HostPlatform::set_clock(4100);
    fire(t, &END, 2);
    // No start of key 3 at all.
    fire(t, &END, 3);
    let lat = [
        "{ n:          1 } hitcount:          1  lat:       3000",
        "{ n:          2 } hitcount:          1  lat:       2600",
    ];
    assert_eq!(entries(&END), (lat.map(String::from).to_vec(), "2".into()));
    // A new start pairs again.
    HostPlatform::set_clock(5000);
    fire(t, &START, 1);
    HostPlatform::set_clock(5007);
    fire(t, &END, 1);
    assert_eq!(entries(&END).0[0], "{ n:          1 } hitcount:          2  lat:       3007");
    assert_eq!(entries(&START).1, "3", "the defining histogram counts its events");
    // A variable named twice in one line is read once per event.
    let twice = "hist:keys=n:vals=$d:a=$ts0+1,d=$ts0-$a:size=128";
    top.set_trigger(&OTHER, twice).unwrap();
    HostPlatform::set_clock(6000);
    fire(t, &START, 5);
    fire(t, &OTHER, 5);
    let row = "{ n:          5 } hitcount:          1  d: 18446744073709551615";
    assert_eq!(entries(&OTHER).0, [row]);
    top.set_trigger(&OTHER, &format!("!{twice}")).unwrap();

    // Its own variables, in µs, and constants: summed as values, in any order.
    let own = "hist:keys=n:vals=$us,$twice:twice=n*2:us=common_timestamp.usecs:size=128";
    top.set_trigger(&OTHER, own).unwrap();
    HostPlatform::set_clock(7_000_999);
    fire(t, &OTHER, 4);
    let row = "{ n:          4 } hitcount:          1  us:       7000  twice:          8";
    assert_eq!(entries(&OTHER).0, [row]);

    // A histogram whose variable another reads is not removed; once the reader is
    // gone, it is.
    let start = "!hist:keys=n:ts0=common_timestamp:size=128";
    let in_use = TriggerReason::Hist(HistReason::VariableInUse);
    assert_eq!(refused(&START, start).1, in_use);
    assert_eq!(top.triggers(&START).len(), 1);
    top.set_trigger(&END, &format!("!{end}")).unwrap();
    top.set_trigger(&START, start).unwrap();
    top.set_trigger(&OTHER, &format!("!{own}")).unwrap();
    // Two numbers are computed once, and read back as their result (as ftrace's).
    top.set_trigger(&OTHER, "hist:keys=n:vals=$c:c=16-8:size=128").unwrap();
    let folded = "hist:keys=n:vals=hitcount,$c:c=8:sort=hitcount:size=128 [active]";
    assert_eq!(top.triggers(&OTHER), [folded]);
    fire(t, &OTHER, 4);
    fire(t, &OTHER, 4);
    assert_eq!(entries(&OTHER).0, ["{ n:          4 } hitcount:          2  c:         16"]);
    top.set_trigger(&OTHER, "!hist:keys=n:vals=$c:c=8:size=128").unwrap();

    // Refused, at the rule's place, and nothing set.
    top.set_trigger(&START, "hist:keys=n:ts0=common_timestamp:size=128").unwrap();
    let hist = |reason| TriggerReason::Hist(reason);
    for (line, pos, reason) in [
        ("hist:keys=n:x=common_timestamp-$nope", 31, HistReason::UnknownVariable),
        // Time in µs against time in ns or a plain number, at the line's start as
        // ftrace has it: when set, and when a reference binds.
        ("hist:keys=n:x=common_timestamp.usecs-$ts0", 0, HistReason::TimestampMismatch),
        ("hist:keys=n:x=common_timestamp.usecs*2", 0, HistReason::TimestampMismatch),
        ("hist:keys=n:x=n+common_timestamp.usecs", 0, HistReason::TimestampMismatch),
        ("hist:keys=n:u=common_timestamp.usecs,x=$u-n", 0, HistReason::TimestampMismatch),
        ("hist:keys=n:x=-(common_timestamp.usecs/2)", 0, HistReason::TimestampMismatch),
        ("hist:keys=common_stacktrace:x=$ts0", 30, HistReason::IncompatibleKeys),
        ("hist:keys=n:vals=$y:x=n", 17, HistReason::ValueVariable),
        ("hist:keys=n:x=n+n+n+n+n", 14, HistReason::TooManyOperators),
        ("hist:keys=n:x=n/0", 16, HistReason::DivisionByZero),
        ("hist:keys=n:x=n.hex", 16, HistReason::BadModifier),
        ("hist:keys=n:x=nope", 14, HistReason::UnknownField),
        ("hist:keys=n:sort=x", 17, HistReason::InvalidSortField),
        ("hist:keys=n:a-b=n", 12, HistReason::BadVariable),
        ("hist:keys=n:hitcount=n", 12, HistReason::BadVariable),
        ("hist:keys=n:x=n:x=n", 16, HistReason::Repeated),
        ("hist:keys=n:a=n,b=n,c=n,d=n,e=n", 28, HistReason::TooManyVars),
        ("hist:keys=n:x=", 12, HistReason::EmptyAssignment),
        ("hist:keys=n:x=$", 14, HistReason::BadExpression),
        ("hist:keys=n,common_stacktrace", 12, HistReason::StackKeyAlone),
        ("hist:keys=common_stacktrace.hex", 10, HistReason::StackKeyAlone),
        ("hist:keys=stacktrace,n", 10, HistReason::StackKeyAlone),
    ] {
        assert_eq!(refused(&END, line), (pos, hist(reason)), "{line}");
    }
    assert!(top.triggers(&END).is_empty());
    // A second definition of a variable is refused where it is written.
    let defined = refused(&OTHER, "hist:keys=n:ts0=n:size=128");
    assert_eq!(defined, (12, hist(HistReason::VariableDefined)));
    assert!(top.triggers(&OTHER).is_empty());
    top.set_trigger(&END, "hist:keys=n:x=common_timestamp-$ts0").unwrap();
    // Alike units are taken; an expression is in the unit its first operand is
    // written in, a variable read counting as not in µs (ftrace's rule).
    let alike = "hist:keys=n:u=common_timestamp.usecs,d=common_timestamp.usecs-$u,e=$d-$u,\
                 f=$u-common_timestamp.usecs+1";
    top.set_trigger(&OTHER, alike).unwrap();
    let mixed =
        refused(&OTHER, "hist:keys=n:u=common_timestamp.usecs,d=common_timestamp.usecs-$u+1");
    assert_eq!(mixed, (0, hist(HistReason::TimestampMismatch)));
}

/// `hitcount` with a modifier is a value beside the count, which `nohitcount`
/// (`NOHC`) hides, as Linux's (`hitcount.hex` was refused); `nohitcount` needs a
/// value to show instead.
#[test]
fn hitcount_with_a_modifier_is_a_value_and_nohitcount_hides_the_count() {
    static EVENT: EventDescriptor =
        EventDescriptor::new("zt17", "count", "n={n}", N_FIELDS, DescriptorKind::Event);
    let t = tracer(&[&EVENT]);
    let top = t.top();
    let hist = || {
        let mut text = String::new();
        top.write_hists(&EVENT, None, &mut text).unwrap();
        text
    };
    let hex = "hist:keys=n:vals=hitcount.hex:size=128";
    top.set_trigger(&EVENT, hex).unwrap();
    let shown = "hist:keys=n:vals=hitcount,hitcount.hex:sort=hitcount:size=128 [active]";
    assert_eq!(top.triggers(&EVENT), [shown]);
    (0..26).for_each(|_| fire(t, &EVENT, 1));
    let text = hist();
    assert!(
        text.contains("{ n:          1 } hitcount:         26  hitcount:         1a\n"),
        "{text}"
    );
    top.set_trigger(&EVENT, &format!("!{hex}")).unwrap();

    let shares = "hist:keys=n:vals=hitcount.percent:NOHC:size=128";
    top.set_trigger(&EVENT, shares).unwrap();
    let shown = "hist:keys=n:vals=hitcount.percent:sort=hitcount:size=128:nohitcount [active]";
    assert_eq!(top.triggers(&EVENT), [shown]);
    [1, 1, 1, 2].into_iter().for_each(|n| fire(t, &EVENT, n));
    let text = hist();
    assert!(text.contains("{ n:          1 }  hitcount (%):  75.00\n"), "{text}");
    // Matched as ftrace matches histograms, `nohitcount` aside: the same line
    // without it is a duplicate, and removes it.
    let plain = "hist:keys=n:vals=hitcount.percent:size=128";
    match top.set_trigger(&EVENT, plain) {
        Err(HookError::Trigger(e)) => assert_eq!(e.reason, TriggerReason::Exists),
        other => panic!("{other:?}"),
    }
    top.set_trigger(&EVENT, &format!("!{plain}")).unwrap();
    assert!(top.triggers(&EVENT).is_empty());

    match top.set_trigger(&EVENT, "hist:keys=n:nohitcount") {
        Err(HookError::Trigger(e)) => {
            assert_eq!((e.pos, e.reason), (0, TriggerReason::Hist(HistReason::NothingShown)));
        }
        other => panic!("{other:?}"),
    }
}

/// Expressions as ftrace parses them (its selftest `trigger-hist-expressions.tc`):
/// `*` and `/` first, each operator from the left, at most three, a unary minus
/// only at the start (split off by a later `-`); numbers are computed when the line
/// is set.
#[test]
#[cfg_attr(miri, ignore = "single-threaded safe code, run natively (17 s under Miri)")]
fn hist_expressions_apply_precedence_from_the_left() {
    static EVENT: EventDescriptor =
        EventDescriptor::new("zt16", "calc", "n={n}", N_FIELDS, DescriptorKind::Event);
    let t = tracer(&[&EVENT]);
    let top = t.top();
    let shown = |expr: &str| {
        top.set_trigger(&EVENT, &format!("hist:keys=n:x={expr}:size=128")).unwrap();
        let line = top.triggers(&EVENT).remove(0);
        top.set_trigger(&EVENT, &format!("!{}", line.strip_suffix(" [active]").unwrap())).unwrap();
        line.split(":x=").nth(1).and_then(|rest| rest.split(':').next()).unwrap().to_string()
    };
    for (expr, value) in [
        ("123", "123"),
        ("16-8-4-2", "2"),
        ("64/8/4/2", "1"),
        ("16-8+4+2", "14"),
        ("4*3/2*2", "12"),
        ("4+3*2-2", "8"),
        ("4+6/2-2", "5"),
    ] {
        assert_eq!(shown(expr), value, "{expr}");
    }
    // Fields are computed per event, and read back as written.
    for expr in ["n*3-n/2", "n-2*n+1", "-(n+1)", "-(n*n/2)", "n/2*n", "-(n)-1", "-(n)-n*2"] {
        assert_eq!(shown(expr), expr);
    }
    let line = "hist:keys=n:vals=$x,$y,$z:x=n*3-n/2,y=n-2*n+1,z=-(n+1):size=128";
    top.set_trigger(&EVENT, line).unwrap();
    fire(t, &EVENT, 4);
    let mut text = String::new();
    top.write_hists(&EVENT, None, &mut text).unwrap();
    let row = "{ n:          4 } hitcount:          1  x:         10  y: 18446744073709551613  \
               z: 18446744073709551611";
    assert!(text.contains(row), "{text}");
    top.set_trigger(&EVENT, &format!("!{line}")).unwrap();

    // Refused where ftrace puts its caret.
    let refused = |expr: &str| match top.set_trigger(&EVENT, &format!("hist:keys=n:x={expr}")) {
        Err(HookError::Trigger(e)) => (e.pos - "hist:keys=n:x=".len(), e.reason),
        other => panic!("{expr}: {other:?}"),
    };
    let hist = TriggerReason::Hist;
    for (expr, pos, reason) in [
        ("32+10*3/20-4", 3, HistReason::TooManyOperators),
        ("1+2+3+4+5", 0, HistReason::TooManyOperators),
        ("-(n+n)+n+n", 2, HistReason::UnaryMinus),
        ("-(1)+2", 2, HistReason::UnaryMinus),
        ("-(n)*2-1", 2, HistReason::UnaryMinus),
        ("-(n)-n-n-n", 0, HistReason::TooManyOperators),
        ("n*-(n)", 2, HistReason::BadExpression),
        ("-n", 1, HistReason::BadExpression),
        ("-(n", 3, HistReason::BadExpression),
        ("3/0", 2, HistReason::DivisionByZero),
        ("n/0*5", 2, HistReason::DivisionByZero),
        ("n+", 2, HistReason::BadExpression),
    ] {
        assert_eq!(refused(expr), (pos, hist(reason)), "{expr}");
    }
    assert!(top.triggers(&EVENT).is_empty());
}

#[test]
#[cfg_attr(miri, ignore = "single-threaded safe code, run natively (8 s under Miri)")]
fn hist_actions_keep_the_largest_with_its_fields_and_snapshot_it() {
    static START: EventDescriptor =
        EventDescriptor::new("zt13", "start", "n={n}", N_FIELDS, DescriptorKind::Event);
    static END: EventDescriptor =
        EventDescriptor::new("zt13", "end", "n={n}", N_FIELDS, DescriptorKind::Event);
    static MARK: EventDescriptor =
        EventDescriptor::new("zt13", "mark", "n={n}", N_FIELDS, DescriptorKind::Event);
    let t = tracer(&[&START, &END, &MARK]);
    let top = t.top();
    let text = |event: &EventDescriptor| {
        let mut text = String::new();
        top.write_hists(event, None, &mut text).unwrap();
        text
    };
    let in_snapshot = || {
        let recorder = top.recorder();
        let mut kept = recorder.snapshot().unwrap().iter(0).unwrap();
        let mut marks = Vec::new();
        while let Some(record) = kept.next_record() {
            if record.id == MARK.id() {
                marks.push(u32::from_le_bytes(record.payload[..4].try_into().unwrap()));
            }
        }
        marks
    };
    top.set_event(Some("zt13"), Some("mark"), true).unwrap();
    top.set_trigger(&START, "hist:keys=n:ts0=common_timestamp:size=128").unwrap();
    let end = "hist:keys=n:lat=common_timestamp-$ts0:onmax($lat).save(n,CPU):\
               onmax($lat).snapshot():size=128";
    top.set_trigger(&END, end).unwrap();
    assert!(top.has_snapshot(), "snapshot() allocates the snapshot buffer");
    let shown = "hist:keys=n:vals=hitcount:lat=common_timestamp-$ts0:sort=hitcount:size=128:\
                 onmax($lat).save(n,CPU):onmax($lat).snapshot() [active]";
    assert_eq!(top.triggers(&END), [shown]);
    let pair = |n: u32, start: u64, end: u64| {
        HostPlatform::set_clock(start);
        fire(t, &START, n);
        HostPlatform::set_clock(end);
        fire(t, &END, n);
    };
    fire(t, &MARK, 1);
    pair(1, 1000, 4000);
    // The first largest took a snapshot: the mark before it is there.
    assert_eq!(in_snapshot(), [1]);
    fire(t, &MARK, 2);
    pair(1, 5000, 5500);
    pair(2, 6000, 9000);
    // Not above the histogram's largest (3000): no snapshot; each entry keeps its own.
    assert_eq!(in_snapshot(), [1]);
    fire(t, &MARK, 3);
    pair(2, 10_000, 14_000);
    assert_eq!(in_snapshot(), [2, 3]);
    let hist = text(&END);
    for entry in [
        "{ n:          1 } hitcount:          2\n\tmax:       3000  n:          1  CPU:          0\n\tmax:       3000\n",
        "{ n:          2 } hitcount:          2\n\tmax:       4000  n:          2  CPU:          0\n\tmax:       4000\n",
    ] {
        assert!(hist.contains(entry), "{entry}\n{hist}");
    }
    let details = "\nSnapshot taken (see tracing/snapshot).  Details:\n\ttriggering value \
                   { onmax($lat) }:       4000\ttriggered by event with key: { n:          2 }\n";
    assert!(hist.contains(details), "{hist}");

    // onchange: each change of the entry's value.
    let watch = "hist:keys=n:v=n*10:onchange($v).save(CPU):size=128";
    top.set_trigger(&MARK, watch).unwrap();
    fire(t, &MARK, 4);
    assert!(text(&MARK).contains(
        "{ n:          4 } hitcount:          1\n\tchanged:         40  CPU:          0\n"
    ));

    // Refused, at the rule's place.
    let hist = |reason| TriggerReason::Hist(reason);
    for (line, pos, reason) in [
        ("hist:keys=n:onmax($nope).save(n)", 18, HistReason::HandlerVariable),
        ("hist:keys=n:x=n:onmin($x).save(n)", 16, HistReason::BadAction),
        ("hist:keys=n:x=n:onmax($x).keep(n)", 16, HistReason::BadAction),
        ("hist:keys=n:x=n:onmax($x).save()", 16, HistReason::BadAction),
        ("hist:keys=n:x=n:onmax($x).save(nope)", 31, HistReason::UnknownField),
        ("hist:keys=n:x=n:onmax($x).save(n,n,n,n,n)", 16, HistReason::TooManyActions),
        (
            "hist:keys=n:x=n:onmax($x).snapshot():onchange($x).snapshot()",
            37,
            HistReason::TooManyActions,
        ),
    ] {
        match top.set_trigger(&START, line) {
            Err(HookError::Trigger(e)) => {
                assert_eq!((e.pos, e.reason), (pos, hist(reason)), "{line}")
            }
            other => panic!("{line}: {other:?}"),
        }
    }
}

pub(super) fn tracer(events: &[&'static EventDescriptor]) -> &'static Tracer<Probe> {
    tracer_on(1, events)
}

/// Instance `name` of `t`, with a snapshot buffer, recording `system`'s events.
fn snapshot_instance<'t>(
    t: &'t Tracer<Probe>,
    name: &str,
    system: &str,
) -> crate::Instance<'t, Probe> {
    let config = InstanceConfig { snapshot: true, ..InstanceConfig::default() };
    let i = t.get_or_create(name, config).unwrap();
    i.set_event(Some(system), None, true).unwrap();
    i
}

/// [`tracer`] with `cpus` CPUs.
fn tracer_on(cpus: usize, events: &[&'static EventDescriptor]) -> &'static Tracer<Probe> {
    HostPlatform::set_cpu(0);
    HostPlatform::set_clock(1);
    let limits = Limits { max_instances: 4, max_total_bytes: 1 << 20 };
    let cfg = InstanceConfig { bytes_per_cpu: 4096, mode: Mode::Overwrite, snapshot: false };
    // Each tracer lives as long as the test process (the descriptors it numbers are
    // statics); a static keeps it reachable, so Miri's leak check holds.
    static KEPT: std::sync::Mutex<Vec<&'static Tracer<Probe>>> = std::sync::Mutex::new(Vec::new());
    let tracer =
        Box::leak(Box::new(Tracer::new(Probe::default(), cpus, events, limits, cfg).unwrap()));
    KEPT.lock().unwrap().push(tracer);
    tracer
}

/// Whether `event` fires in `slot` (records, or runs triggers).
fn fires_in(event: &EventDescriptor, slot: usize) -> bool {
    event.enabled_mask() & (1 << slot) != 0
}

/// Fires `event` with a `u32` payload, as a tracepoint would.
pub(super) fn fire(t: &Tracer<Probe>, event: &EventDescriptor, v: u32) {
    t.record(event, 4, &&v.to_le_bytes()[..]);
}

/// The `u32` payloads of `id` recorded in `buffer`, oldest first.
pub(super) fn recorded(buffer: &crate::ring::Buffer<Probe>, id: u16) -> Vec<u32> {
    crate::tests::util::events(buffer, 0)
        .into_iter()
        .filter(|(i, _)| *i == id)
        .map(|(_, p)| u32::from_le_bytes(p[..4].try_into().unwrap()))
        .collect()
}

#[test]
#[cfg_attr(miri, ignore = "single-threaded safe code, run natively (6 s under Miri)")]
fn filter_in_an_instance_records_only_what_passes() {
    static EV: EventDescriptor =
        EventDescriptor::new("zf1", "ev", "n={n}", N_FIELDS, DescriptorKind::Event);
    let t = tracer(&[&EV]);
    let i = t.get_or_create("i", InstanceConfig::default()).unwrap();
    let top = t.top();
    i.set_event(Some("zf1"), None, true).unwrap();
    top.set_event(Some("zf1"), None, true).unwrap();
    i.set_filter(&EV, "n > 2 && n != 4").unwrap();
    assert_eq!(i.filter(&EV).as_deref(), Some("n > 2 && n != 4"));
    assert_eq!(top.filter(&EV), None);
    (1..=5).for_each(|v| fire(t, &EV, v));
    assert_eq!(recorded(i.recorder().live(), EV.id()), [3, 5]);
    assert_eq!(recorded(top.recorder().live(), EV.id()), [1, 2, 3, 4, 5]);

    // A refused filter changes nothing.
    let err = i.set_filter(&EV, "n > 2 &&").unwrap_err();
    let expected = FilterError { pos: 8, reason: FilterReason::ExpectedField };
    assert_eq!(err, HookError::Filter(expected));
    assert_eq!(i.filter(&EV).as_deref(), Some("n > 2 && n != 4"));
    fire(t, &EV, 4);
    assert_eq!(recorded(i.recorder().live(), EV.id()), [3, 5]);

    // "0" clears it; the event is recorded as before, through the unfiltered path.
    i.set_filter(&EV, "0").unwrap();
    assert_eq!(i.filter(&EV), None);
    assert_eq!(EV.hooked_mask(), 0);
    fire(t, &EV, 4);
    assert_eq!(recorded(i.recorder().live(), EV.id()), [3, 5, 4]);
    assert!(i.recorder().live().stats(0).unwrap().balanced());
}

#[test]
fn filters_and_trigger_conditions_see_the_writers_cpu() {
    static EV: EventDescriptor =
        EventDescriptor::new("zf3", "ev", "n={n}", N_FIELDS, DescriptorKind::Event);
    let t = tracer_on(2, &[&EV]);
    let top = t.top();
    top.set_event(Some("zf3"), None, true).unwrap();
    top.set_filter(&EV, "CPU == 1 || n == 7").unwrap();
    top.set_trigger(&EV, "traceoff if cpu == 1 && n == 3").unwrap();
    let on = |cpu| top.stats(cpu).unwrap().written;
    for (cpu, v) in [(0, 1), (1, 2), (0, 7), (0, 3)] {
        HostPlatform::set_cpu(cpu);
        fire(t, &EV, v);
    }
    assert_eq!((on(0), on(1)), (1, 1), "CPU 0's 7 and CPU 1's 2 pass");
    assert!(top.tracing(), "n == 3 on CPU 0 does not turn tracing off");
    HostPlatform::set_cpu(1);
    fire(t, &EV, 3);
    HostPlatform::set_cpu(0);
    assert!(!top.tracing(), "n == 3 on CPU 1 does");
    assert_eq!(on(1), 2, "and is recorded before");
}

#[test]
fn filter_for_a_system_sets_the_events_it_fits() {
    static A: EventDescriptor =
        EventDescriptor::new("zf2", "a", "n={n}", N_FIELDS, DescriptorKind::Event);
    static B: EventDescriptor = EventDescriptor::new(
        "zf2",
        "b",
        "m={m}",
        &[Field { name: "m", kind: FieldKind::U32 }],
        DescriptorKind::Event,
    );
    let t = tracer(&[&A, &B]);
    let top = t.top();
    top.set_filter(&B, "m == 1").unwrap();
    assert_eq!(top.set_system_filter("zf2", "n == 2"), Ok(1));
    assert_eq!(top.filter(&A).as_deref(), Some("n == 2"));
    assert_eq!(top.filter(&B).as_deref(), Some("m == 1"), "B keeps its own");
    let err = top.set_system_filter("zf2", "q == 2").unwrap_err();
    assert_eq!(err, HookError::Filter(FilterError { pos: 2, reason: FilterReason::UnknownField }));
    let err = top.set_system_filter("zf2", "n == 2 && m == 1").unwrap_err();
    assert_eq!(
        err,
        HookError::Filter(FilterError { pos: 12, reason: FilterReason::NoEventMatches }),
        "each event lacks the other's field (the first event's error is at 12)"
    );
    assert_eq!(
        top.set_system_filter("nope", "n == 2"),
        Err(HookError::Instance(InstanceError::NoSuchEvent))
    );
    assert_eq!(top.set_system_filter("zf2", "0"), Ok(2));
    assert_eq!((top.filter(&A), top.filter(&B)), (None, None));
}

/// An instance's cpumask keeps the other CPUs' events out of its buffer, and what
/// its triggers would record there (a stack trace); its triggers run on every CPU,
/// as ftrace's do.
#[test]
#[cfg_attr(miri, ignore = "single-threaded safe code, run natively (8 s under Miri)")]
fn an_instances_cpumask_keeps_other_cpus_records_out_but_not_its_triggers() {
    static EV: EventDescriptor =
        EventDescriptor::new("zc1", "ev", "n={n}", N_FIELDS, DescriptorKind::Event);
    let t = tracer_on(2, &[&EV]);
    let (top, i) = (t.top(), t.get_or_create("i", InstanceConfig::default()).unwrap());
    for inst in [&top, &i] {
        inst.set_event(Some("zc1"), None, true).unwrap();
        inst.set_filter(&EV, "n != 9").unwrap();
    }
    i.set_trigger(&EV, "traceoff if n == 2").unwrap();
    i.set_trigger(&EV, "stacktrace").unwrap();
    i.set_cpumask(0b01).unwrap();
    HostPlatform::set_cpu(1);
    fire(t, &EV, 1);
    assert!(i.tracing(), "the trigger's condition is false");
    fire(t, &EV, 2);
    assert!(!i.tracing(), "CPU 1 is outside i's cpumask: its trigger fires all the same");
    let on = |inst: &crate::Instance<'_, Probe>, cpu| inst.stats(cpu).unwrap().written;
    assert_eq!((on(&i, 1), on(&top, 1)), (0, 2), "the events and stack traces are not recorded");
    i.set_tracing(true);
    HostPlatform::set_cpu(0);
    (1..=2).for_each(|v| fire(t, &EV, v));
    assert!(!i.tracing(), "CPU 0 is inside: the trigger fires");
    assert_eq!(recorded(i.recorder().live(), EV.id()), [1, 2]);
    // `stacktrace`, added last, is listed and runs first, as in ftrace: before
    // `traceoff` turns recording off.
    assert_eq!(i.triggers(&EV), ["stacktrace:unlimited", "traceoff:unlimited if n == 2"]);
    assert_eq!(on(&i, 0), 4, "each event, and each one's stack trace");
    // The slot's next instance records on every CPU again.
    t.destroy(i).unwrap();
    let j = t.get_or_create("j", InstanceConfig::default()).unwrap();
    j.set_event(Some("zc1"), None, true).unwrap();
    HostPlatform::set_cpu(1);
    fire(t, &EV, 5);
    HostPlatform::set_cpu(0);
    assert_eq!((j.cpumask(), on(&j, 1)), (0b11, 1));
}

#[test]
fn trigger_traceoff_stops_recording_after_the_event() {
    static EV: EventDescriptor =
        EventDescriptor::new("zt1", "ev", "n={n}", N_FIELDS, DescriptorKind::Event);
    let t = tracer(&[&EV]);
    let top = t.top();
    top.set_event(Some("zt1"), None, true).unwrap();
    top.set_trigger(&EV, "traceoff:1 if n == 3").unwrap();
    (1..=5).for_each(|v| fire(t, &EV, v));
    assert!(!top.tracing());
    assert_eq!(recorded(top.recorder().live(), EV.id()), [1, 2, 3]);
    assert_eq!(top.triggers(&EV), ["traceoff:count=0 if n == 3"]);
    top.set_tracing(true);
    fire(t, &EV, 3);
    assert!(top.tracing(), "the count ran out");
    // Duplicates and bad lines are refused and change nothing; removing a trigger
    // the event does not have succeeds and changes nothing, as ftrace's.
    let exists = top.set_trigger(&EV, "traceoff").unwrap_err();
    assert_eq!(exists, HookError::Trigger(TriggerError { pos: 0, reason: TriggerReason::Exists }));
    assert_eq!(top.set_trigger(&EV, "!snapshot"), Ok(()));
    assert!(top.set_trigger(&EV, "traceon:zz").is_err());
    assert_eq!(top.triggers(&EV), ["traceoff:count=0 if n == 3"]);
    top.set_trigger(&EV, "!traceoff").unwrap();
    assert!(top.triggers(&EV).is_empty());
    assert_eq!(EV.hooked_mask(), 0);
}

#[test]
#[cfg_attr(miri, ignore = "single-threaded safe code, run natively (5 s under Miri)")]
fn trigger_on_a_disabled_event_fires_without_recording_it() {
    static EV: EventDescriptor =
        EventDescriptor::new("zt2", "ev", "n={n}", N_FIELDS, DescriptorKind::Event);
    static OTHER: EventDescriptor =
        EventDescriptor::new("zt2", "other", "n={n}", N_FIELDS, DescriptorKind::Event);
    let t = tracer(&[&EV, &OTHER]);
    let i = t.get_or_create("i", InstanceConfig::default()).unwrap();
    assert!(!i.event_soft_mode(&EV).unwrap() && !i.event_soft_mode(&OTHER).unwrap());
    i.set_trigger(&EV, "enable_event:zt2:other:1").unwrap();
    assert!(!i.event_enabled(&EV) && fires_in(&EV, 1));
    // Soft mode (`0*` in `enable`): the event with the trigger, and its target.
    assert!(i.event_soft_mode(&EV).unwrap() && i.event_soft_mode(&OTHER).unwrap());
    assert!(!t.top().event_soft_mode(&EV).unwrap(), "another instance's triggers do not count");
    fire(t, &OTHER, 1);
    fire(t, &EV, 2);
    fire(t, &OTHER, 3);
    assert!(i.event_enabled(&OTHER));
    assert_eq!(recorded(i.recorder().live(), EV.id()), Vec::<u32>::new());
    assert_eq!(recorded(i.recorder().live(), OTHER.id()), [3]);
    assert_eq!(i.triggers(&EV), ["enable_event:zt2:other:count=0"]);
    // Enabling the event records it; disabling keeps it firing for its trigger.
    i.set_event(Some("zt2"), Some("ev"), true).unwrap();
    fire(t, &EV, 4);
    i.set_event(Some("zt2"), Some("ev"), false).unwrap();
    assert!(fires_in(&EV, 1));
    // One of enable_event and disable_event per target, as in Linux: the spent
    // enable_event is removed first.
    let exists = TriggerError { pos: 0, reason: TriggerReason::Exists };
    assert_eq!(i.set_trigger(&EV, "disable_event:zt2:other"), Err(HookError::Trigger(exists)));
    assert_eq!(i.triggers(&EV), ["enable_event:zt2:other:count=0"]);
    i.set_trigger(&EV, "!disable_event:zt2:other").unwrap();
    assert!(i.triggers(&EV).is_empty(), "`!` removes either command of the target");
    i.set_trigger(&EV, "disable_event:zt2:other").unwrap();
    fire(t, &EV, 5);
    assert!(!i.event_enabled(&OTHER));
    assert_eq!(recorded(i.recorder().live(), EV.id()), [4]);
    i.clear_triggers(&EV).unwrap();
    assert!(!fires_in(&EV, 1), "no trigger left: the event is off");
    assert!(!i.event_soft_mode(&EV).unwrap() && !i.event_soft_mode(&OTHER).unwrap());
}

/// A trigger that disables its own event drops the record that fired it, as
/// ftrace's, which reads the event's soft-disable flag again as it commits. One
/// that enables its own event keeps that record if it sees the record (it has a
/// condition, or the event has a trigger that has one), and otherwise acts for the
/// next event: ftrace judged the record by the state before it ran.
#[test]
#[cfg_attr(miri, ignore = "single-threaded safe code, run natively (6 s under Miri)")]
fn a_trigger_toggling_its_own_event_decides_the_record_that_fired_it() {
    static EV: EventDescriptor =
        EventDescriptor::new("zt9", "ev", "n={n}", N_FIELDS, DescriptorKind::Event);
    let t = tracer(&[&EV]);
    let i = t.get_or_create("i", InstanceConfig::default()).unwrap();
    let kept = |i: &crate::Instance<'_, Probe>| recorded(i.recorder().live(), EV.id());
    let set = |line: &str| i.set_trigger(&EV, line).unwrap();
    i.set_event(Some("zt9"), Some("ev"), true).unwrap();
    set("disable_event:zt9:ev if n == 2");
    (1..=3).for_each(|n| fire(t, &EV, n));
    assert_eq!(kept(&i), [1], "2 disabled the event and was dropped with it");
    set("!disable_event:zt9:ev");
    set("enable_event:zt9:ev if n == 5");
    assert!(!i.event_enabled(&EV));
    (4..=6).for_each(|n| fire(t, &EV, n));
    assert_eq!(kept(&i), [1, 5, 6], "5 enabled the event and was kept");
    // Unconditional, beside a trigger with a condition: it sees the record too.
    set("!enable_event:zt9:ev");
    set("disable_event:zt9:ev");
    set("traceoff if n == 100");
    i.set_event(Some("zt9"), Some("ev"), true).unwrap();
    fire(t, &EV, 7);
    assert_eq!(kept(&i), [1, 5, 6]);
    // Alone, they need no record and act before it is written: `disable_event`
    // still drops the record that fired it ...
    set("!traceoff");
    i.set_event(Some("zt9"), Some("ev"), true).unwrap();
    fire(t, &EV, 8);
    assert!(!i.event_enabled(&EV));
    // ... and `enable_event` acts for the next event.
    set("!disable_event:zt9:ev");
    set("enable_event:zt9:ev");
    fire(t, &EV, 9);
    assert!(i.event_enabled(&EV));
    fire(t, &EV, 10);
    assert_eq!(kept(&i), [1, 5, 6, 10]);
    assert!(i.recorder().live().stats(0).unwrap().balanced());
}

#[test]
#[cfg_attr(miri, ignore = "single-threaded safe code, run natively (7 s under Miri)")]
fn trigger_snapshot_keeps_the_window_up_to_the_event() {
    static EV: EventDescriptor =
        EventDescriptor::new("zt3", "ev", "n={n}", N_FIELDS, DescriptorKind::Event);
    let t = tracer(&[&EV]);
    let i = t.get_or_create("i", InstanceConfig::default()).unwrap();
    i.set_event(Some("zt3"), None, true).unwrap();
    assert!(!i.has_snapshot());
    i.set_trigger(&EV, "snapshot:1 if n == 7").unwrap();
    assert!(i.has_snapshot(), "a snapshot trigger allocates the buffer");
    (1..=10).for_each(|v| fire(t, &EV, v));
    let recorder = i.recorder();
    assert_eq!(recorded(recorder.snapshot().unwrap(), EV.id()), [1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(recorded(recorder.live(), EV.id()), [8, 9, 10]);
    i.snapshot_clear().unwrap();
    assert_eq!(recorded(recorder.snapshot().unwrap(), EV.id()), Vec::<u32>::new());
    // Without the buffer the trigger is refused and counted, and spends its count
    // as ftrace's.
    i.set_trigger(&EV, "!snapshot").unwrap();
    i.set_trigger(&EV, "snapshot:2").unwrap();
    i.snapshot_free().unwrap();
    fire(t, &EV, 11);
    assert_eq!(i.triggers(&EV), ["snapshot:count=1"]);
    // Unconditional, it acted before the event: recording stopped, and the event
    // that fired it is not recorded (as in ftrace).
    assert_eq!(recorded(i.recorder().live(), EV.id()), [8, 9, 10]);
    assert!(!i.tracing());
}

#[test]
fn dump_is_a_function_command_not_an_event_trigger() {
    static EV: EventDescriptor =
        EventDescriptor::new("zt9", "ev", "n={n}", N_FIELDS, DescriptorKind::Event);
    let t = tracer(&[&EV]);
    for (line, pos) in [("dump", 0), (" cpudump:1", 1), ("!dump", 1)] {
        let refused = t.top().set_trigger(&EV, line);
        let reason = TriggerReason::UnknownCommand;
        assert_eq!(refused, Err(HookError::Trigger(TriggerError { pos, reason })), "{line}");
    }
    assert!(t.top().triggers(&EV).is_empty());
}

#[test]
fn trigger_stacktrace_records_a_stack_event() {
    static EV: EventDescriptor =
        EventDescriptor::new("zt4", "ev", "n={n}", N_FIELDS, DescriptorKind::Event);
    let t = tracer(&[&EV]);
    let top = t.top();
    top.set_event(Some("zt4"), None, true).unwrap();
    top.set_trigger(&EV, "stacktrace:1").unwrap();
    fire(t, &EV, 1);
    fire(t, &EV, 2);
    let events = crate::tests::util::events(top.recorder().live(), 0);
    let ids: Vec<u16> = events.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, [EV.id(), STACK_TRACE.id(), EV.id()]);
    // The host platform has no unwinder: depth 0, no frames.
    let mut text = String::new();
    let (format, fields) = (STACK_TRACE.format, STACK_TRACE.fields);
    crate::event::format::render(&mut text, format, fields, &events[1].1, None).unwrap();
    assert_eq!(text, "depth=0 0x0 0x0 0x0 0x0 0x0 0x0 0x0 0x0");
}

/// A marker its buffer does not take (recording off) is refused, and its triggers do
/// not run, as Linux's: a `traceon` on the marker leaves recording off.
#[test]
fn a_refused_marker_runs_no_trigger() {
    let t = tracer(&[]);
    let top = t.top();
    top.set_trigger(&crate::event::marker::MARKER, "traceon").unwrap();
    top.set_tracing(false);
    assert_eq!(top.write_marker("refused"), Err(crate::ring::WriteError::NotTaken));
    assert!(!top.tracing(), "the refused marker's traceon ran");
    top.set_tracing(true);
    top.write_marker("taken").unwrap();
    assert!(top.tracing());
}

#[test]
#[cfg_attr(miri, ignore = "single-threaded safe code, run natively (6 s under Miri)")]
fn the_stacktrace_option_records_a_stack_after_each_tracepoint_its_instance_records() {
    static EV: EventDescriptor =
        EventDescriptor::new("zt9", "ev", "n={n}", N_FIELDS, DescriptorKind::Event);
    let t = tracer(&[&EV]);
    let top = t.top();
    let other = t.get_or_create("other", InstanceConfig::default()).unwrap();
    top.set_event(Some("zt9"), None, true).unwrap();
    other.set_event(Some("zt9"), None, true).unwrap();
    assert!(!top.stack_traces());
    top.set_stack_traces(true).unwrap();
    assert!(top.stack_traces() && !other.stack_traces());
    fire(t, &EV, 1);
    top.write_marker("no stack after a marker").unwrap();
    // A filter's rejection takes no stack; the filter's removal keeps the option's.
    top.set_filter(&EV, "n != 2").unwrap();
    fire(t, &EV, 2);
    fire(t, &EV, 3);
    top.set_filter(&EV, "0").unwrap();
    fire(t, &EV, 4);
    // A trigger's stack comes after the option's.
    top.set_trigger(&EV, "stacktrace:1").unwrap();
    fire(t, &EV, 5);
    top.clear_triggers(&EV).unwrap();
    top.set_stack_traces(false).unwrap();
    fire(t, &EV, 6);
    assert_eq!(EV.hooked_mask(), 0, "off, the event takes the plain path again");
    let ids = |i: &crate::Instance<'_, Probe>| -> Vec<u16> {
        let events = crate::tests::util::events(i.recorder().live(), 0);
        events.iter().map(|(id, _)| *id).collect()
    };
    let (ev, st, m) = (EV.id(), STACK_TRACE.id(), crate::event::marker::MARKER.id());
    assert_eq!(ids(&top), [ev, st, m, ev, st, ev, st, ev, st, st, ev]);
    assert_eq!(ids(&other), [ev; 6], "the option is the instance's");
    assert_eq!(recorded(top.recorder().live(), ev), [1, 3, 4, 5, 6]);
    drop(other);
    t.destroy_by_name("other").unwrap();
}

/// As Linux's `hist_register_trigger`: `:cont` and `:clear` act on a histogram the
/// event has, and without one are refused (changing nothing); `:pause` makes one,
/// paused.
#[test]
fn hist_cont_and_clear_need_the_histogram_and_pause_makes_one() {
    static EV: EventDescriptor =
        EventDescriptor::new("zt14", "ev", "n={n}", N_FIELDS, DescriptorKind::Event);
    let t = tracer(&[&EV]);
    let top = t.top();
    for op in ["cont", "clear"] {
        let refused = top.set_trigger(&EV, &format!("hist:keys=n:size=128:{op}"));
        let reason = TriggerReason::NotFound;
        assert_eq!(refused, Err(HookError::Trigger(TriggerError { pos: 0, reason })), "{op}");
        assert_eq!(top.triggers(&EV), Vec::<String>::new(), "{op}");
    }
    top.set_trigger(&EV, "hist:keys=n:size=128:pause").unwrap();
    let paused = "hist:keys=n:vals=hitcount:sort=hitcount:size=128 [paused]";
    assert_eq!(top.triggers(&EV), [paused]);
    top.set_trigger(&EV, "hist:keys=n:size=128:cont").unwrap();
    assert_eq!(top.triggers(&EV), [paused.replace("paused", "active")]);
    top.set_trigger(&EV, "hist:keys=n:size=128:clear").unwrap();
}

/// Linux's selftests reset an event's triggers by writing `!` and each listed line
/// with `>`: the first write's truncation removes every histogram, and the later
/// lines, whose histograms are gone, are taken as ftrace takes them.
#[test]
fn the_selftests_reset_of_two_histograms_succeeds() {
    static EV: EventDescriptor =
        EventDescriptor::new("zt15", "ev", "n={n}", N_FIELDS, DescriptorKind::Event);
    let t = tracer(&[&EV]);
    let top = t.top();
    top.set_trigger(&EV, "hist:keys=n:size=128").unwrap();
    top.set_trigger(&EV, "hist:keys=common_pid:size=128").unwrap();
    let listed = top.triggers(&EV);
    assert_eq!(listed.len(), 2);
    for line in &listed {
        let line = format!("!{}", line.split('[').next().unwrap_or_default());
        assert_eq!(top.set_trigger_truncating(&EV, &line), Ok(()), "{line}");
    }
    assert!(top.triggers(&EV).is_empty());
}

/// A line written with `>` (ftrace opens the file truncated) first removes the
/// event's histograms and `enable_hist`/`disable_hist` triggers, in the same change:
/// other triggers stay, a refused line removes nothing, a blank line only removes,
/// and a histogram whose variable another reads keeps them all.
#[test]
#[cfg_attr(miri, ignore = "single-threaded safe code, run natively (6 s under Miri)")]
fn a_truncating_trigger_write_replaces_the_events_histograms() {
    static EV: EventDescriptor =
        EventDescriptor::new("zt13", "ev", "n={n}", N_FIELDS, DescriptorKind::Event);
    static END: EventDescriptor =
        EventDescriptor::new("zt13", "end", "n={n}", N_FIELDS, DescriptorKind::Event);
    let t = tracer(&[&EV, &END]);
    let top = t.top();
    top.set_trigger(&EV, "hist:keys=n:size=128").unwrap();
    top.set_trigger(&EV, "traceoff:3").unwrap();
    top.set_trigger(&EV, "disable_hist:zt13:end").unwrap();
    top.set_trigger_truncating(&EV, "hist:keys=n:vals=n:size=128").unwrap();
    let kept = ["traceoff:count=3", "hist:keys=n:vals=hitcount,n:sort=hitcount:size=128 [active]"];
    assert_eq!(top.triggers(&EV), kept);
    // Refused: nothing removed.
    let refused = top.set_trigger_truncating(&EV, "hist:keys=nope").unwrap_err();
    assert!(matches!(refused, HookError::Trigger(_)), "{refused:?}");
    assert_eq!(top.triggers(&EV), kept);
    // Removing the histogram the write removes anyway, or another trigger.
    top.set_trigger_truncating(&EV, "!hist:keys=n:vals=n:size=128").unwrap();
    assert_eq!(top.triggers(&EV), ["traceoff:count=3"]);
    top.set_trigger(&EV, "hist:keys=n:size=128").unwrap();
    top.set_trigger_truncating(&EV, "!traceoff").unwrap();
    assert_eq!(top.triggers(&EV), Vec::<String>::new());
    // A blank line only removes.
    top.set_trigger(&EV, "hist:keys=n:size=128").unwrap();
    top.set_trigger(&EV, "traceon").unwrap();
    top.set_trigger_truncating(&EV, " ").unwrap();
    assert_eq!(top.triggers(&EV), ["traceon:unlimited"]);
    // A histogram whose variable another reads: none removed, the line applies.
    top.set_trigger(&EV, "hist:keys=n:ts0=common_timestamp:size=128").unwrap();
    top.set_trigger(&END, "hist:keys=n:vals=$lat:lat=common_timestamp-$ts0:size=128").unwrap();
    top.set_trigger_truncating(&EV, "hist:keys=n:vals=n:size=128").unwrap();
    assert_eq!(top.triggers(&EV).len(), 3, "{:?}", top.triggers(&EV));
    // Once nothing reads it, the histograms go.
    top.set_trigger_truncating(&END, "").unwrap();
    top.set_trigger_truncating(&EV, "").unwrap();
    assert_eq!(top.triggers(&EV), ["traceon:unlimited"]);
    // `>>` adds, as it always did.
    top.set_trigger(&EV, "hist:keys=n:size=128").unwrap();
    top.set_trigger(&EV, "hist:keys=n:vals=n:size=128").unwrap();
    assert_eq!(top.triggers(&EV).len(), 3);
}

#[test]
fn filter_and_triggers_go_with_their_instance() {
    static EV: EventDescriptor =
        EventDescriptor::new("zt5", "ev", "n={n}", N_FIELDS, DescriptorKind::Event);
    let t = tracer(&[&EV]);
    let i = t.get_or_create("i", InstanceConfig::default()).unwrap();
    i.set_filter(&EV, "n == 1").unwrap();
    i.set_trigger(&EV, "traceoff").unwrap();
    assert_eq!(
        i.set_filter(&crate::event::log::LOG_MESSAGE, "nope == 1").unwrap_err(),
        HookError::Filter(FilterError { pos: 5, reason: FilterReason::UnknownField })
    );
    drop(i);
    t.destroy_by_name("i").unwrap();
    assert_eq!((EV.hooked_mask(), EV.enabled_mask()), (0, 0));
    let again = t.get_or_create("i", InstanceConfig::default()).unwrap();
    assert_eq!((again.filter(&EV), again.triggers(&EV)), (None, Vec::<String>::new()));
    static STRANGER: EventDescriptor =
        EventDescriptor::new("zt5", "stranger", "", &[], DescriptorKind::Event);
    assert_eq!(
        again.set_filter(&STRANGER, "0"),
        Err(HookError::Instance(InstanceError::NoSuchEvent))
    );
    assert_eq!(
        again.set_trigger(&STRANGER, "traceon"),
        Err(HookError::Instance(InstanceError::NoSuchEvent))
    );
}

#[test]
fn filter_and_trigger_run_in_a_nested_writer() {
    use crate::sync::{Point, hook};
    static EV: EventDescriptor =
        EventDescriptor::new("zt6", "ev", "n={n}", N_FIELDS, DescriptorKind::Event);
    let t = tracer(&[&EV]);
    let top = t.top();
    top.set_event(Some("zt6"), None, true).unwrap();
    top.set_filter(&EV, "n != 1").unwrap();
    top.set_trigger(&EV, "stacktrace:1 if n == 5").unwrap();
    for point in [Point::Section, Point::Reserved] {
        // An "interrupt" at `point` of the outer writer fires the event twice.
        hook::once(point, move || {
            fire(t, &EV, 1);
            fire(t, &EV, 5);
        });
        fire(t, &EV, 3);
        hook::clear();
    }
    let recorder = top.recorder();
    let ids: Vec<u16> =
        crate::tests::util::events(recorder.live(), 0).iter().map(|e| e.0).collect();
    let (ev, stack) = (EV.id(), STACK_TRACE.id());
    // Interrupted before it read the hooks, the outer event comes after the nested ones;
    // interrupted with its record reserved, before them. `n == 1` is filtered out; the
    // stack trace fires once (its count is 1).
    assert_eq!(ids, [ev, stack, ev, ev, ev]);
    assert_eq!(recorded(recorder.live(), ev), [5, 3, 3, 5]);
    assert_eq!(top.triggers(&EV), ["stacktrace:count=0 if n == 5"]);
    assert!(recorder.live().stats(0).unwrap().balanced());
}

#[test]
fn trigger_count_per_event_is_bounded() {
    static EV: EventDescriptor =
        EventDescriptor::new("zt7", "ev", "n={n}", N_FIELDS, DescriptorKind::Event);
    static A: EventDescriptor = EventDescriptor::new("zt7", "a", "", &[], DescriptorKind::Event);
    static B: EventDescriptor = EventDescriptor::new("zt7", "b", "", &[], DescriptorKind::Event);
    static C: EventDescriptor = EventDescriptor::new("zt7", "c", "", &[], DescriptorKind::Event);
    static D: EventDescriptor = EventDescriptor::new("zt7", "d", "", &[], DescriptorKind::Event);
    static E: EventDescriptor = EventDescriptor::new("zt7", "e", "", &[], DescriptorKind::Event);
    static F: EventDescriptor = EventDescriptor::new("zt7", "f", "", &[], DescriptorKind::Event);
    let t = tracer(&[&EV, &A, &B, &C, &D, &E, &F]);
    let top = t.top();
    let lines = [
        "traceon",
        "enable_event:zt7:e",
        "snapshot",
        "stacktrace",
        "enable_event:zt7:a",
        "enable_event:zt7:b",
        "disable_event:zt7:c",
        "disable_event:zt7:d",
    ];
    for line in lines {
        top.set_trigger(&EV, line).unwrap();
    }
    assert_eq!(crate::tracer::trigger::MAX_TRIGGERS, lines.len());
    let too_many = top.set_trigger(&EV, "enable_event:zt7:f").unwrap_err();
    let expected = TriggerError { pos: 0, reason: TriggerReason::TooMany };
    assert_eq!(too_many, HookError::Trigger(expected));
    assert_eq!(top.triggers(&EV).len(), lines.len());
}

/// A filter written to `events/ftrace/filter` leaves `ftrace:kernel_stack` alone, as
/// its own `filter` file refuses one: it got the filter, which marked it hooked, and
/// then every stack the platform recorded (the panic's, of each CPU) was dropped,
/// since the event is enabled in no instance.
#[test]
fn a_system_filter_leaves_the_stack_event_alone() {
    let t = tracer(&[]);
    let top = t.top();
    assert!(top.set_system_filter("ftrace", "ip0 != 0").is_err(), "it fits kernel_stack only");
    let fitted = top.set_system_filter("ftrace", "depth < 100").unwrap();
    assert_eq!(top.filter(&STACK_TRACE), None);
    t.record_stack(&[0x10]);
    let events = crate::tests::util::events(top.recorder().live(), 0);
    assert_eq!(events.iter().filter(|(id, _)| *id == STACK_TRACE.id()).count(), 1);
    assert!(fitted > 0, "the function graph's events have a depth");
}

#[test]
fn record_stack_records_the_frames_given_in_the_top_level_instance() {
    let t = tracer(&[]);
    let top = t.top();
    t.record_stack(&[0x10, 0x20, 0x30]);
    let long: Vec<u64> = (1..=12).collect();
    t.record_stack(&long);
    top.set_tracing(false);
    t.record_stack(&[0x40]);
    top.set_tracing(true);
    let events = crate::tests::util::events(top.recorder().live(), 0);
    let stacks: Vec<String> = events
        .iter()
        .filter(|(id, _)| *id == STACK_TRACE.id())
        .map(|(_, payload)| {
            let mut text = String::new();
            let (format, fields) = (STACK_TRACE.format, STACK_TRACE.fields);
            crate::event::format::render(&mut text, format, fields, payload, None).unwrap();
            text
        })
        .collect();
    // At most eight frames are kept; nothing is recorded while tracing is off.
    assert_eq!(
        stacks,
        ["depth=3 0x10 0x20 0x30 0x0 0x0 0x0 0x0 0x0", "depth=8 0x1 0x2 0x3 0x4 0x5 0x6 0x7 0x8"]
    );
}

/// Sequences of `trigger` and `filter` writes, good and bad, on two events of an
/// instance, with events fired in between: nothing panics, a refused write changes
/// nothing an instance shows (triggers, filter, the event's masks, tracing, the
/// snapshot buffer), a taken one changes the trigger list as its kind says, and the
/// ring's counts balance at the end.
mod writes {
    use super::*;
    use crate::tracer::trigger::TriggerCommand;
    use proptest::prelude::*;

    const FIELDS: &[Field<'static>] =
        &[Field { name: "n", kind: FieldKind::U32 }, Field { name: "s", kind: FieldKind::Str }];
    static A: EventDescriptor =
        EventDescriptor::new("zp", "a", "n={n} s={s}", FIELDS, DescriptorKind::Event);
    static B: EventDescriptor =
        EventDescriptor::new("zp", "b", "n={n} s={s}", FIELDS, DescriptorKind::Event);
    const EVENTS: [&EventDescriptor; 2] = [&A, &B];

    const COMMANDS: &[&str] = &[
        "traceon",
        "traceoff",
        "snapshot",
        "stacktrace",
        "enable_event:zp:b",
        "disable_event:zp:a",
        "enable_event:zp:nope",
        "enable_event:zp",
        "enable_hist:zp:b",
        "disable_hist:zp:a",
        "hist:keys=n",
        "hist:keys=s:vals=n:sort=n.descending:size=128",
        "hist:keys=n.log2:name=h",
        "hist:keys=n:vals=s",
        "hist:keys=",
        "dump",
        "cpudump",
        "nonsense",
        "",
    ];
    const COUNTS: &[&str] = &["", "", ":1", ":3", ":0", ":x", ":pause", ":cont", ":clear", ":1:2"];
    const CONDITIONS: &[&str] = &[
        "",
        "",
        " if n > 3",
        " if s ~ \"a*\"",
        " if (n == 1 || n == 2) && !(n & 4)",
        " if",
        " if n ==",
        " if q == 1",
        " junk",
        " ",
    ];
    const FILTERS: &[&str] = &[
        "n == 1",
        "n > 2 && s != \"x\"",
        "!(n < 3) || s ~ \"*b\"",
        "0",
        " 0 ",
        "",
        "n ==",
        "q == 1",
        "(n == 1",
        "n == 99999999999999999999",
        "s < 3",
        "n ~ \"a\"",
    ];

    /// One write, or an event fired.
    #[derive(Debug, Clone)]
    enum Op {
        Trigger(usize, String),
        /// Removes the event's `n`th trigger (modulo how many it has) as listed.
        Remove(usize, usize),
        Filter(usize, String),
        /// A write to the system's `filter` (both events).
        SystemFilter(String),
        Fire(usize, u32, &'static str),
    }

    fn op() -> impl Strategy<Value = Op> {
        let line = (
            prop::bool::weighted(0.2),
            prop::sample::select(COMMANDS),
            prop::sample::select(COUNTS),
            prop::sample::select(CONDITIONS),
        )
            .prop_map(|(remove, c, n, f)| format!("{}{c}{n}{f}", if remove { "!" } else { "" }));
        let any_text = "[ a-z_!:=<>&|()0-9\"~*.,-]{0,30}";
        prop_oneof![
            4 => (0..2usize, line).prop_map(|(e, l)| Op::Trigger(e, l)),
            1 => (0..2usize, any_text).prop_map(|(e, l)| Op::Trigger(e, l)),
            2 => (0..2usize, 0..8usize).prop_map(|(e, n)| Op::Remove(e, n)),
            2 => (0..2usize, prop::sample::select(FILTERS))
                .prop_map(|(e, f)| Op::Filter(e, f.into())),
            1 => (0..2usize, any_text).prop_map(|(e, f)| Op::Filter(e, f)),
            1 => prop::sample::select(FILTERS).prop_map(|f| Op::SystemFilter(f.into())),
            3 => (0..2usize, 0..8u32, prop::sample::select(&["a", "b", "ab", ""][..]))
                .prop_map(|(e, n, s)| Op::Fire(e, n, s)),
        ]
    }

    /// What an instance shows of one event, and of itself.
    #[derive(Debug, PartialEq)]
    struct Shown {
        triggers: Vec<String>,
        filter: Option<String>,
        masks: (u64, u64, u64),
        tracing: bool,
        snapshot: bool,
    }

    fn shown(i: &crate::Instance<'_, Probe>, e: &EventDescriptor) -> Shown {
        Shown {
            triggers: i.triggers(e),
            filter: i.filter(e),
            masks: (e.enabled_mask(), e.hooked_mask(), e.triggered_mask()),
            tracing: i.tracing(),
            snapshot: i.has_snapshot(),
        }
    }

    /// The line that removes the trigger listed as `listed`, made as Linux's
    /// selftests make it (`reset_trigger_file`): `!` and the listed line up to its
    /// state, count and condition included.
    fn removal(listed: &str) -> String {
        format!("!{}", listed.split('[').next().unwrap_or_default())
    }

    /// The change in the trigger list a taken line makes: +1, -1, or 0 (a `hist`
    /// line's `pause`, `cont` or `clear` on a histogram the event has, or a removal of
    /// a trigger it does not have, which ftrace takes and ignores).
    fn change(line: &str, before: &[String]) -> i64 {
        // A target resolved as the instance resolves it: by its name.
        let event = |system: &str, name: &str| {
            EVENTS.into_iter().find(|e| (e.system, e.name) == (system, name))
        };
        // Each listed trigger as its removal line names it.
        let has = |t: &Trigger| {
            before.iter().any(|b| {
                matches!(
                    Trigger::parse(&removal(b), FIELDS, event, None),
                    Ok(TriggerCommand::Remove(o)) if o.same_as(t)
                )
            })
        };
        match Trigger::parse(line, FIELDS, event, None) {
            Ok(TriggerCommand::Add(_)) => 1,
            Ok(TriggerCommand::Remove(t)) => -i64::from(has(&t)),
            Ok(TriggerCommand::Hist(t, _)) => i64::from(!has(&t)),
            Err(e) => panic!("{line:?} was taken but does not parse: {e}"),
        }
    }

    proptest! {
        #![proptest_config(crate::tests::util::cases(300))]

        #[test]
        #[cfg_attr(miri, ignore = "single-threaded safe code, run natively (300 sequences)")]
        fn refused_writes_change_nothing_and_taken_ones_change_what_they_say(
            ops in prop::collection::vec(op(), 1..24),
        ) {
            let t = tracer(&EVENTS);
            let i = t.get_or_create("p", InstanceConfig::default()).unwrap();
            i.set_event(Some("zp"), Some("a"), true).unwrap();
            for op in &ops {
                match op {
                    Op::Fire(e, n, s) => {
                        let len = (s.len() as u16).to_le_bytes();
                        let payload = [&n.to_le_bytes()[..], &len, s.as_bytes()].concat();
                        t.record(EVENTS[*e], payload.len(), &&payload[..]);
                    }
                    Op::Remove(e, n) => {
                        let event = EVENTS[*e];
                        let listed = i.triggers(event);
                        if let Some(victim) = listed.get(n % listed.len().max(1)) {
                            let line = removal(victim);
                            prop_assert_eq!(i.set_trigger(event, &line), Ok(()), "{:?}", line);
                            let left = i.triggers(event).len();
                            prop_assert_eq!(left + 1, listed.len(), "{:?}", line);
                        }
                    }
                    Op::Trigger(e, line) => {
                        let event = EVENTS[*e];
                        let before = shown(&i, event);
                        match i.set_trigger(event, line) {
                            Err(err) => {
                                let after = shown(&i, event);
                                prop_assert_eq!(&after, &before, "{:?} refused ({:?})", line, err);
                                if let HookError::Trigger(e) = err {
                                    prop_assert!(e.pos <= line.len(), "{:?}: {:?}", line, e);
                                }
                            }
                            Ok(()) => {
                                let after = i.triggers(event).len() as i64;
                                let change = change(line, &before.triggers);
                                let expected = before.triggers.len() as i64 + change;
                                let listed = &before.triggers;
                                prop_assert_eq!(after, expected, "{:?} after {:?}", line, listed);
                            }
                        }
                    }
                    Op::Filter(e, text) => {
                        let event = EVENTS[*e];
                        let before = shown(&i, event);
                        let taken = i.set_filter(event, text);
                        if let Err(err) = taken {
                            let after = shown(&i, event);
                            prop_assert_eq!(&after, &before, "{:?} refused ({:?})", text, err);
                        } else {
                            let expected = (text.trim() != "0").then(|| text.trim().to_string());
                            prop_assert_eq!(i.filter(event), expected);
                        }
                    }
                    Op::SystemFilter(text) => {
                        let before = EVENTS.map(|e| shown(&i, e));
                        match i.set_system_filter("zp", text) {
                            Err(err) => {
                                let after = EVENTS.map(|e| shown(&i, e));
                                prop_assert_eq!(&after, &before, "{:?} refused ({:?})", text, err);
                            }
                            Ok(n) => {
                                // The two events have the same fields: both take it.
                                prop_assert_eq!(n, 2);
                                let text = text.trim();
                                let expected = (text != "0").then(|| text.to_string());
                                for e in EVENTS {
                                    prop_assert_eq!(i.filter(e), expected.clone());
                                }
                            }
                        }
                    }
                }
            }
            prop_assert!(i.stats(0).unwrap().balanced(), "{:?}", i.stats(0));
            prop_assert!(t.destroy(i).is_ok());
        }
    }
}

/// Setting a histogram that reads another's variable while that one is removed,
/// from two threads at once: one of the two is refused, so no histogram is left
/// reading a variable of one that is gone.
#[test]
#[cfg_attr(miri, ignore = "a race of two threads, 2,000 rounds: run natively")]
fn hist_reference_and_removal_of_its_definer_race_to_one_outcome() {
    static DEF: EventDescriptor =
        EventDescriptor::new("zt14", "def", "n={n}", N_FIELDS, DescriptorKind::Event);
    static USE: EventDescriptor =
        EventDescriptor::new("zt14", "use", "n={n}", N_FIELDS, DescriptorKind::Event);
    let t = tracer(&[&DEF, &USE]);
    let top = t.top();
    let definer = "hist:keys=n:t=n:size=128";
    let reader = "hist:keys=n:d=n-$t:size=128";
    for round in 0..2000 {
        top.set_trigger(&DEF, definer).unwrap();
        let start = std::sync::Barrier::new(2);
        std::thread::scope(|s| {
            s.spawn(|| {
                start.wait();
                let _ = top.set_trigger(&USE, reader);
            });
            start.wait();
            let _ = top.set_trigger(&DEF, &std::format!("!{definer}"));
        });
        let (defined, read) = (top.triggers(&DEF).len(), top.triggers(&USE).len());
        assert!(read == 0 || defined == 1, "round {round}: a reader without its definer");
        let _ = top.set_trigger(&USE, &std::format!("!{reader}"));
        let _ = top.set_trigger(&DEF, &std::format!("!{definer}"));
    }
}

/// A conditional `snapshot` trigger keeps the event that fired it: when another
/// snapshot swaps the sets between the event's record and its trigger (another
/// CPU's trigger, here a simulated interrupt once the record is committed), the
/// event is already in the snapshot and the trigger does not swap it out again.
#[test]
#[cfg_attr(miri, ignore = "single-threaded safe code, run natively (6 s under Miri)")]
fn a_snapshot_trigger_keeps_its_event_when_another_swap_comes_between() {
    static EV: EventDescriptor =
        EventDescriptor::new("zsw", "ev", "n={n}", N_FIELDS, DescriptorKind::Event);
    let t = tracer(&[&EV]);
    let i = snapshot_instance(t, "i", "zsw");
    i.set_trigger(&EV, "snapshot if n > 0").unwrap();
    fire(t, &EV, 1);
    let recorder = i.recorder();
    let snapshot = || recorded(recorder.snapshot().unwrap(), EV.id());
    assert_eq!(snapshot(), [1]);
    let other = i.recorder();
    crate::sync::hook::once(crate::sync::Point::Committed, move || {
        other.swap_nowait().unwrap();
    });
    fire(t, &EV, 2);
    crate::sync::hook::clear();
    // The other swap made the set holding 2 the snapshot; the trigger kept it.
    assert_eq!(snapshot(), [2]);
    // Without a swap in between, the trigger swaps as before.
    fire(t, &EV, 3);
    assert_eq!(snapshot(), [1, 3]);
}

/// As ftrace's, an event whose triggers all act without its record (no `if`; not
/// `traceoff`, `stacktrace` or `hist`) fires them before it is recorded: `traceon`
/// records the event that turned it on, and `snapshot` swaps first, so the event
/// starts the new live buffer. One trigger that needs the record (a condition,
/// here) makes them all act after it, and the snapshot then holds the event.
#[test]
#[cfg_attr(miri, ignore = "single-threaded safe code, run natively (8 s under Miri)")]
fn triggers_that_need_no_record_act_before_it() {
    static EV: EventDescriptor =
        EventDescriptor::new("zpre", "ev", "n={n}", N_FIELDS, DescriptorKind::Event);
    let t = tracer(&[&EV]);
    let i = snapshot_instance(t, "i", "zpre");
    let recorder = i.recorder();
    let (live, snapshot) =
        (|| recorded(recorder.live(), EV.id()), || recorded(recorder.snapshot().unwrap(), EV.id()));

    i.set_tracing(false);
    i.set_trigger(&EV, "traceon:1").unwrap();
    fire(t, &EV, 1);
    assert!(i.tracing());
    assert_eq!(live(), [1], "the event that turned recording on is recorded");
    i.set_trigger(&EV, "!traceon").unwrap();

    i.set_trigger(&EV, "snapshot:1").unwrap();
    fire(t, &EV, 2);
    assert_eq!((snapshot(), live()), (vec![1], vec![2]), "swapped before the event");
    i.set_trigger(&EV, "!snapshot").unwrap();

    // A condition on one of the event's triggers: every one acts after it.
    i.set_trigger(&EV, "snapshot:1").unwrap();
    i.set_trigger(&EV, "traceoff:1 if n == 0").unwrap();
    fire(t, &EV, 3);
    assert_eq!((snapshot(), live()), (vec![2, 3], vec![1]), "swapped after the event");
}

/// As ftrace's, `traceoff` and `stacktrace` act once the record is committed,
/// after the event's other triggers whatever the list's order: a `stacktrace`
/// added after a conditional `snapshot` (so listed first) records its stack after
/// the swap, into the new live buffer, and the snapshot holds the event alone.
#[test]
#[cfg_attr(miri, ignore = "single-threaded safe code, run natively (5 s under Miri)")]
fn post_triggers_act_after_the_others_whatever_the_order() {
    static EV: EventDescriptor =
        EventDescriptor::new("zpost", "ev", "n={n}", N_FIELDS, DescriptorKind::Event);
    let t = tracer(&[&EV]);
    let i = snapshot_instance(t, "i", "zpost");
    i.set_trigger(&EV, "snapshot:1 if n == 1").unwrap();
    i.set_trigger(&EV, "stacktrace:1").unwrap();
    assert_eq!(i.triggers(&EV), ["stacktrace:count=1", "snapshot:count=1 if n == 1"]);
    fire(t, &EV, 1);
    let recorder = i.recorder();
    let ids = |buffer| -> Vec<u16> {
        crate::tests::util::events(buffer, 0).into_iter().map(|(id, _)| id).collect()
    };
    assert_eq!(ids(recorder.snapshot().unwrap()), [EV.id()]);
    assert_eq!(ids(recorder.live()), [STACK_TRACE.id()]);
}

/// One event, two instances: the one whose triggers need no record acts before
/// the event is recorded, the other after, in the same firing.
#[test]
#[cfg_attr(miri, ignore = "single-threaded safe code, run natively (9 s under Miri)")]
fn an_event_fires_early_in_one_instance_and_late_in_another() {
    static EV: EventDescriptor =
        EventDescriptor::new("zmix", "ev", "n={n}", N_FIELDS, DescriptorKind::Event);
    let t = tracer(&[&EV]);
    let (early, late) =
        (snapshot_instance(t, "early", "zmix"), snapshot_instance(t, "late", "zmix"));
    early.set_trigger(&EV, "snapshot:1").unwrap();
    late.set_trigger(&EV, "snapshot:1 if n > 0").unwrap();
    fire(t, &EV, 1);
    let (e, l) = (early.recorder(), late.recorder());
    assert_eq!(
        (recorded(e.snapshot().unwrap(), EV.id()), recorded(e.live(), EV.id())),
        (vec![], vec![1])
    );
    assert_eq!(
        (recorded(l.snapshot().unwrap(), EV.id()), recorded(l.live(), EV.id())),
        (vec![1], vec![])
    );
}
