//! The function tracers from the tracer's side: each instance's selection, which
//! entries it has the platform patch, where entries and returns are recorded, and
//! what a refusal or a destroyed instance leaves.
//!
//! The function tracers' events are statics every tracer of the process shares, so
//! two tests tracing functions at once would see each other's bits: each test here
//! holds [`exclusive`] throughout.

use crate::tracer::{FUNCGRAPH_ENTRY, FUNCGRAPH_EXIT, FUNCTION, FunctionError, HookError};
use crate::tracer::{FunctionList, FunctionTracer, GraphScope};
use crate::{HostPlatform, InstanceConfig, InstanceError, Limits, Mode, Platform, Tracer};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::vec;
use std::vec::Vec;

/// Held by each test of this module for its whole run (see the module's doc); a
/// test that failed leaves it usable.
fn exclusive() -> MutexGuard<'static, ()> {
    static SHARED_EVENTS: Mutex<()> = Mutex::new(());
    SHARED_EVENTS.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Functions the test registers.
const COUNT: usize = 4;

/// A platform that patches function entries: which are calls, and whether the
/// next patch is refused.
#[derive(Clone)]
struct Patcher {
    calls: Arc<Mutex<Vec<bool>>>,
    refuse: Arc<AtomicBool>,
}

impl Patcher {
    /// [`COUNT`] entries, each a NOP; patches are taken.
    fn new() -> Patcher {
        Patcher {
            calls: Arc::new(Mutex::new(vec![false; COUNT])),
            refuse: Arc::new(AtomicBool::new(false)),
        }
    }
}

impl Platform for Patcher {
    fn cpu(&self) -> usize {
        HostPlatform.cpu()
    }

    fn now(&self) -> u64 {
        HostPlatform.now()
    }

    fn may_wait(&self) -> bool {
        true
    }

    fn patch_functions(&self, changes: &[(usize, bool)]) -> Result<(), &'static str> {
        if self.refuse.load(Relaxed) {
            return Err("refused");
        }
        let mut calls = self.calls.lock().unwrap();
        for &(i, call) in changes {
            assert_ne!(calls[i], call, "a change to entry {i} that changes nothing");
            calls[i] = call;
        }
        Ok(())
    }
}

/// The `u64` fields of each record of `descriptor` in `instance`'s CPU 0 ring (not
/// consumed).
fn records(
    instance: &crate::Instance<'_, Patcher>,
    descriptor: &crate::event::EventDescriptor,
) -> Vec<Vec<u64>> {
    buffer_records(instance.recorder().live(), descriptor)
}

/// [`records`] of one buffer.
fn buffer_records(
    buffer: &crate::ring::Buffer<Patcher>,
    descriptor: &crate::event::EventDescriptor,
) -> Vec<Vec<u64>> {
    let mut records = buffer.iter(0).unwrap();
    let mut out = Vec::new();
    while let Some(record) = records.next_record() {
        if record.id == descriptor.id() {
            let words = record.payload.chunks(8);
            out.push(words.map(|w| u64::from_le_bytes(w.try_into().unwrap())).collect());
        }
    }
    out
}

/// Records function `index`'s entry outside any graph call; returns the
/// `function_graph` instances that recorded it.
fn entry(tracer: &Tracer<Patcher>, index: usize, ip: u64, parent: u64, depth: Option<u64>) -> u64 {
    tracer.record_function_entry(index, ip, parent, depth, GraphScope::default()).0
}

#[test]
#[cfg_attr(miri, ignore = "single-threaded safe code, run natively (16 s under Miri)")]
fn instances_trace_their_own_functions_and_release_them() {
    let _shared = exclusive();
    HostPlatform::set_cpu(0);
    HostPlatform::set_clock(1);
    let patcher = Patcher::new();
    let calls = || patcher.calls.lock().unwrap().clone();
    let top = InstanceConfig { bytes_per_cpu: 4096, mode: Mode::Overwrite, snapshot: false };
    let limits = Limits { max_instances: 4, max_total_bytes: 1 << 20 };
    let tracer = Tracer::new(patcher.clone(), 1, &[], limits, top).unwrap();
    let top = tracer.top();
    assert_eq!(top.set_function_tracer(FunctionTracer::Function), Err(FunctionError::Unavailable));
    assert_eq!(top.set_function_tracer(FunctionTracer::Nop), Ok(()), "nop needs no functions");
    assert_eq!(tracer.set_graph_threshold(1), Err(FunctionError::Unavailable));
    assert!(tracer.set_functions(COUNT));
    assert!(!tracer.set_functions(COUNT), "registered once");

    // The top level traces every function with `function`: each entry is a call.
    assert_eq!(tracer.enabled_functions(), []);
    assert_eq!(tracer.touched_functions().unwrap(), []);
    top.set_function_tracer(FunctionTracer::Function).unwrap();
    assert_eq!(calls(), [true; COUNT]);
    assert_eq!(tracer.enabled_functions(), [(0, 1), (1, 1), (2, 1), (3, 1)]);
    assert_eq!(entry(&tracer, 0, 0x100, 0x200, Some(0)), 0, "no graph");
    assert_eq!(records(&top, &FUNCTION), [vec![0x100, 0x200]]);
    // `func_stack_trace`: a stack trace after each function record (the host
    // platform has no unwinder: depth 0), while it is on.
    assert!(!top.function_stack_trace());
    top.set_function_stack_trace(true).unwrap();
    assert!(top.function_stack_trace());
    entry(&tracer, 0, 0x100, 0x200, Some(0));
    let stacks = || {
        let recorder = top.recorder();
        let mut records = recorder.live().iter(0).unwrap();
        let mut stacks = 0;
        while let Some(record) = records.next_record() {
            stacks += usize::from(record.id == crate::tracer::STACK_TRACE.id());
        }
        stacks
    };
    assert_eq!((records(&top, &FUNCTION).len(), stacks()), (2, 1));
    top.set_function_stack_trace(false).unwrap();
    entry(&tracer, 0, 0x100, 0x200, Some(0));
    assert_eq!((records(&top, &FUNCTION).len(), stacks()), (3, 1));
    // Back to the one record the rest of the test expects.
    top.clear().unwrap();
    entry(&tracer, 0, 0x100, 0x200, Some(0));

    // An instance traces function 1 with `function_graph`; the top level keeps 0.
    let g = tracer.get_or_create("g", top_config()).unwrap();
    let only = |i: usize| (0..COUNT).map(|j| j == i).collect::<Vec<_>>();
    g.set_function_list(FunctionList::Filter, &only(1)).unwrap();
    g.set_function_tracer(FunctionTracer::Graph).unwrap();
    top.set_function_list(FunctionList::Filter, &only(0)).unwrap();
    assert_eq!(calls(), [true, true, false, false]);
    assert_eq!(tracer.enabled_functions(), [(0, 1), (1, 1)]);
    // Touched once, a function stays listed, with the callbacks it has now.
    assert_eq!(tracer.touched_functions().unwrap(), [(0, 1), (1, 1), (2, 0), (3, 0)]);
    // Both instances on function 1: two callbacks on its entry.
    top.set_function_list(FunctionList::Filter, &[true, true, false, false]).unwrap();
    assert_eq!(tracer.enabled_functions(), [(0, 1), (1, 2)]);
    top.set_function_list(FunctionList::Filter, &only(0)).unwrap();
    assert_eq!(g.function_list(FunctionList::Filter).unwrap(), [1]);
    assert_eq!(top.function_tracer().unwrap(), FunctionTracer::Function);
    assert_eq!(g.function_tracer().unwrap(), FunctionTracer::Graph);
    let graph = entry(&tracer, 1, 0x110, 0x210, Some(3));
    assert_ne!(graph, 0, "g records the return");
    tracer.record_function_return(graph, 0x110, 3, 42);
    assert_eq!(entry(&tracer, 2, 0x120, 0x220, Some(0)), 0, "nobody traces 2");
    assert_eq!(records(&g, &FUNCGRAPH_ENTRY), [vec![0x110, 3]]);
    assert_eq!(records(&g, &FUNCGRAPH_EXIT), [vec![0x110, 3, 42]]);
    assert!(records(&g, &FUNCTION).is_empty());
    assert_eq!(records(&top, &FUNCTION).len(), 1, "the top level does not trace 1 or 2");
    // A call the platform cannot follow is recorded by `function` instances only.
    assert_ne!(entry(&tracer, 1, 0x110, 0x210, None), 0);
    assert_eq!(records(&g, &FUNCGRAPH_ENTRY).len(), 1);
    // `tracing_thresh`: a call is recorded only at its return, if it took as long.
    tracer.set_graph_threshold(40).unwrap();
    assert_eq!(tracer.graph_threshold(), 40);
    let graph = entry(&tracer, 1, 0x110, 0x210, Some(3));
    assert_ne!(graph, 0, "its return is still followed");
    assert_eq!(records(&g, &FUNCGRAPH_ENTRY).len(), 1, "no entry recorded");
    tracer.record_function_return(graph, 0x110, 3, 39);
    tracer.record_function_return(graph, 0x110, 3, 40);
    assert_eq!(records(&g, &FUNCGRAPH_EXIT), [vec![0x110, 3, 42], vec![0x110, 3, 40]]);
    tracer.set_graph_threshold(0).unwrap();
    assert_eq!(entry(&tracer, 1, 0x110, 0x210, Some(3)), graph);
    assert_eq!(records(&g, &FUNCGRAPH_ENTRY).len(), 2, "off: the entry is recorded again");

    // The events are the tracer's, not `set_event`'s.
    let refused = g.set_event(Some("ftrace"), Some("function"), true);
    assert_eq!(refused, Err(InstanceError::FunctionEvent));
    assert_eq!(
        g.set_event(Some("ftrace"), Some("funcgraph_*"), false),
        Err(InstanceError::FunctionEvent)
    );
    // They take filters and triggers: a filter on the caller, and a histogram of the
    // calls by function (a profiler), which counts every call, the filter aside, as
    // any trigger runs whatever the event's filter says.
    top.set_filter(&FUNCTION, "parent_ip != 0x201").unwrap();
    top.set_trigger(&FUNCTION, "hist:keys=ip:vals=parent_ip:size=128").unwrap();
    entry(&tracer, 0, 0x100, 0x201, Some(0));
    entry(&tracer, 0, 0x100, 0x202, Some(0));
    assert_eq!(records(&top, &FUNCTION), [vec![0x100, 0x200], vec![0x100, 0x202]]);
    let mut text = String::new();
    top.write_hists(&FUNCTION, None, &mut text).unwrap();
    let entries: Vec<&str> = text.lines().filter(|l| l.starts_with('{')).collect();
    assert_eq!(entries, ["{ ip:        256 } hitcount:          2  parent_ip:       1027"]);
    top.set_filter(&FUNCTION, "0").unwrap();
    top.clear_triggers(&FUNCTION).unwrap();
    top.clear().unwrap();
    entry(&tracer, 0, 0x100, 0x200, Some(0));

    // A refused patch changes nothing: lists, tracer, masks, entries.
    patcher.refuse.store(true, Relaxed);
    let all = [true; COUNT];
    assert_eq!(
        g.set_function_list(FunctionList::Filter, &all),
        Err(FunctionError::Patch("refused"))
    );
    assert_eq!(top.set_function_tracer(FunctionTracer::Nop), Err(FunctionError::Patch("refused")));
    patcher.refuse.store(false, Relaxed);
    assert_eq!(g.function_list(FunctionList::Filter).unwrap(), [1]);
    assert_eq!(top.function_tracer().unwrap(), FunctionTracer::Function);
    assert_eq!(calls(), [true, true, false, false]);
    assert_eq!(entry(&tracer, 2, 0x120, 0x220, Some(0)), 0);
    assert_eq!(
        g.set_function_list(FunctionList::Notrace, &[true]),
        Err(FunctionError::WrongLength)
    );

    // `notrace` wins over the filter.
    g.set_function_list(FunctionList::Notrace, &only(1)).unwrap();
    assert_eq!(calls(), [true, false, false, false]);
    g.set_function_list(FunctionList::Notrace, &[false; COUNT]).unwrap();

    // Destroying g releases its functions and its hooks on their events; a new "g"
    // starts with `nop`, no lists and no hooks.
    let slot_bit = graph;
    g.set_trigger(&FUNCGRAPH_EXIT, "hist:keys=func:size=128").unwrap();
    g.set_filter(&FUNCGRAPH_ENTRY, "depth < 9").unwrap();
    let hooked = || FUNCGRAPH_EXIT.hooked_mask() | FUNCGRAPH_ENTRY.hooked_mask();
    assert_eq!(hooked() & slot_bit, slot_bit);
    drop(g);
    tracer.destroy_by_name("g").unwrap();
    assert_eq!(hooked() & slot_bit, 0, "no hook bit left in the slot");
    assert_eq!(FUNCGRAPH_EXIT.triggered_mask() & slot_bit, 0);
    assert_eq!(FUNCGRAPH_EXIT.enabled_mask() & slot_bit, 0, "not left firing for a trigger");
    assert_eq!(calls(), [true, false, false, false]);
    assert_eq!(entry(&tracer, 1, 0x110, 0x210, Some(0)), 0);
    let g = tracer.get_or_create("g", top_config()).unwrap();
    assert_eq!(g.function_tracer().unwrap(), FunctionTracer::Nop);
    assert!(g.function_list(FunctionList::Filter).unwrap().is_empty());
    g.set_function_tracer(FunctionTracer::Function).unwrap();
    assert_eq!(calls(), [true; COUNT]);
    assert_eq!(entry(&tracer, 1, 0x110, 0x210, Some(0)), 0);
    assert_eq!(records(&g, &FUNCTION), [vec![0x110, 0x210]], "the new g, in the same slot");
    assert_ne!(slot_bit & FUNCTION.enabled_mask(), 0, "the same slot");

    // `set_graph_function` and `set_graph_notrace`: g graphs every function, only
    // under function 2, and nothing under function 3.
    g.set_function_tracer(FunctionTracer::Graph).unwrap();
    g.set_function_list(FunctionList::GraphFunction, &only(2)).unwrap();
    g.set_function_list(FunctionList::GraphNotrace, &only(3)).unwrap();
    assert_eq!(g.function_list(FunctionList::GraphFunction).unwrap(), [2]);
    let bit = slot_bit;
    let at =
        |index, scope| tracer.record_function_entry(index, 0x100 + index as u64, 0, Some(0), scope);
    let outside = GraphScope::default();
    assert_eq!(at(1, outside), (0, outside), "not under a graph function");
    let (graph, under_2) = at(2, outside);
    assert_eq!((graph, under_2), (bit, GraphScope { inside: bit, muted: 0 }));
    assert_eq!(at(1, under_2), (bit, under_2), "called from function 2");
    let (graph, under_3) = at(3, under_2);
    assert_eq!((graph, under_3.muted), (0, bit), "set_graph_notrace mutes its function");
    assert_eq!(at(1, under_3), (0, under_3), "and what it calls");
    assert_eq!(at(2, under_3).0, 0, "a graph function under a muted one too");
    let before = records(&g, &FUNCGRAPH_ENTRY).len();
    assert_eq!(before, 2, "function 2, and function 1 under it");
    assert!(records(&top, &FUNCGRAPH_ENTRY).is_empty(), "the top level has `function`");
    for list in [FunctionList::GraphFunction, FunctionList::GraphNotrace] {
        g.set_function_list(list, &[false; COUNT]).unwrap();
    }
    assert_eq!(at(1, outside), (bit, outside), "no graph lists: every call");

    // `nop` everywhere: every entry is its NOP again.
    g.set_function_tracer(FunctionTracer::Nop).unwrap();
    top.set_function_tracer(FunctionTracer::Nop).unwrap();
    assert_eq!(calls(), [false; COUNT]);
    assert!(!tracer.functions_traced());
}

/// The stack tracer: the entries it checks are patched while it is on, beside the
/// function tracers'; only a deeper stack than the maximum is stored, with its
/// chain; `stack_max_size` and `stack_trace_filter` act as in ftrace; a store never
/// waits; a refused patch changes nothing.
#[test]
fn the_stack_tracer_keeps_the_deepest_stack_of_the_functions_it_checks() {
    use crate::tracer::{StackEntry, StackMax};
    let _shared = exclusive();
    HostPlatform::set_cpu(0);
    let patcher = Patcher::new();
    let calls = || patcher.calls.lock().unwrap().clone();
    let limits = Limits { max_instances: 2, max_total_bytes: 1 << 20 };
    let tracer = Tracer::new(patcher.clone(), 1, &[], limits, top_config()).unwrap();
    assert_eq!(tracer.set_stack_tracer(true), Err(FunctionError::Unavailable));
    assert!(tracer.set_functions(COUNT));
    // A chain of two callers, each return address at a depth.
    let chain = |entries: &mut [StackEntry]| {
        let callers = [StackEntry { ip: 0x210, depth: 500 }, StackEntry { ip: 0x320, depth: 380 }];
        entries.iter_mut().zip(callers).map(|(entry, caller)| *entry = caller).count()
    };
    let unwalked = |_: &mut [StackEntry]| -> usize { panic!("walked for no new maximum") };
    let check = |index: usize, depth: u64| tracer.check_stack(index, 0x100, || Some(depth), chain);

    // Off: nothing is checked, and stack_trace says how to turn it on.
    check(1, 500);
    assert_eq!(tracer.stack_max().unwrap(), StackMax::default());
    let mut text = String::new();
    tracer.stack_max().unwrap().write(&mut text, None).unwrap();
    assert!(text.contains("(0 entries)") && text.contains("Stack tracer disabled"), "{text}");

    tracer.set_stack_tracer(true).unwrap();
    assert!(tracer.stack_tracer());
    assert_eq!(calls(), [true; COUNT], "every function is checked");
    assert_eq!(tracer.enabled_functions(), [(0, 1), (1, 1), (2, 1), (3, 1)]);
    check(1, 500);
    let deepest = |size: u64| StackMax {
        on: true,
        size,
        entries: vec![
            StackEntry { ip: 0x100, depth: size },
            StackEntry { ip: 0x210, depth: 500 },
            StackEntry { ip: 0x320, depth: 380 },
        ],
    };
    assert_eq!(tracer.stack_max().unwrap(), deepest(500));
    let mut text = String::new();
    tracer.stack_max().unwrap().write(&mut text, None).unwrap();
    assert_eq!(
        text,
        "        Depth    Size   Location    (3 entries)\n\
        \x20       -----    ----   --------\n\
        \x20 0)      500       0   0x100\n\
        \x20 1)      500     120   0x210\n\
        \x20 2)      380     380   0x320\n"
    );
    // Not deeper: no walk, nothing changes; off a kernel stack: nothing either.
    tracer.check_stack(2, 0x100, || Some(500), unwalked);
    tracer.check_stack(2, 0x100, || None, unwalked);
    assert_eq!(tracer.stack_max().unwrap(), deepest(500));
    check(2, 620);
    assert_eq!(tracer.stack_max().unwrap(), deepest(620));

    // A check interrupted during its walk by a deeper one (an interrupt on the same
    // CPU): the walk holds no lock, the deeper one is stored, and the interrupted
    // one, no longer a maximum, gives up.
    tracer.check_stack(
        1,
        0x100,
        || Some(900),
        |entries| {
            check(1, 1000);
            chain(entries)
        },
    );
    assert_eq!(tracer.stack_max().unwrap(), deepest(1000), "the deeper, nested check is kept");

    // A deeper check striking while the chain is read (an interrupt on the CPU
    // reading `stack_trace`) gives its sample up rather than wait: the reader's
    // lock is never waited for, and what it reads stays whole.
    struct Interrupted<F: FnMut()>(F, String);
    impl<F: FnMut()> core::fmt::Write for Interrupted<F> {
        fn write_str(&mut self, s: &str) -> core::fmt::Result {
            (self.0)();
            self.1.push_str(s);
            Ok(())
        }
    }
    let mut reader = Interrupted(|| check(1, 1100), String::new());
    assert_eq!(tracer.write_stack_max_now(&mut reader, None), Ok(true));
    assert!(reader.1.contains("(3 entries)") && reader.1.contains("1000"), "{}", reader.1);
    assert_eq!(tracer.stack_max().unwrap(), deepest(1000), "the check given up stored nothing");
    check(1, 1100);
    assert_eq!(tracer.stack_max().unwrap(), deepest(1100), "the next one is stored");

    // `stack_max_size`: set to 0, the next check stores; the chain stays until then.
    tracer.set_stack_max_size(0).unwrap();
    assert_eq!(tracer.stack_max().unwrap().size, 0);
    assert_eq!(tracer.stack_max().unwrap().entries, deepest(1100).entries);
    check(3, 100);
    assert_eq!(tracer.stack_max().unwrap(), deepest(100));

    // `stack_trace_filter`: only function 2 is checked and patched; a function
    // tracer's entries stay patched beside it, and go with it.
    let only = |i: usize| (0..COUNT).map(|j| j == i).collect::<Vec<_>>();
    tracer.set_stack_filter(&only(2)).unwrap();
    assert_eq!(tracer.stack_filter().unwrap(), [2]);
    assert_eq!(calls(), [false, false, true, false]);
    tracer.set_stack_max_size(0).unwrap();
    check(1, 700);
    assert_eq!(tracer.stack_max().unwrap().size, 0, "function 1 is not checked");
    check(2, 700);
    assert_eq!(tracer.stack_max().unwrap().size, 700);
    let top = tracer.top();
    top.set_function_list(FunctionList::Filter, &only(0)).unwrap();
    top.set_function_tracer(FunctionTracer::Function).unwrap();
    assert_eq!(calls(), [true, false, true, false]);
    assert_eq!(tracer.set_stack_filter(&[true]), Err(FunctionError::WrongLength));

    // A refused patch: the stack tracer stays on, with its filter and entries.
    patcher.refuse.store(true, Relaxed);
    assert_eq!(tracer.set_stack_tracer(false), Err(FunctionError::Patch("refused")));
    assert_eq!(tracer.set_stack_filter(&only(3)), Err(FunctionError::Patch("refused")));
    assert!(tracer.stack_tracer());
    assert_eq!(tracer.stack_filter().unwrap(), [2]);
    assert_eq!(calls(), [true, false, true, false]);
    check(2, 800);
    assert_eq!(tracer.stack_max().unwrap().size, 800, "function 2 is still checked");
    patcher.refuse.store(false, Relaxed);

    // Off: only the function tracer's entry stays a call; nothing is checked.
    tracer.set_stack_tracer(false).unwrap();
    assert_eq!(calls(), [true, false, false, false]);
    check(2, 900);
    assert_eq!(tracer.stack_max().unwrap().size, 800);
    top.set_function_tracer(FunctionTracer::Nop).unwrap();
    assert_eq!(calls(), [false; COUNT]);
}

/// The function profiler: it profiles what the top level's filter and notrace
/// lists select (patched while it is on, beside the function tracers' entries);
/// per CPU, the calls counted at entry and their times at return, exact beyond 64
/// bits of squares; its table as ftrace's `trace_stat`; on again, it starts from
/// zero; a refused patch changes nothing.
#[test]
fn the_function_profiler_counts_calls_and_their_times_per_cpu() {
    use crate::tracer::FunctionStat;
    let _shared = exclusive();
    let patcher = Patcher::new();
    let calls = || patcher.calls.lock().unwrap().clone();
    let limits = Limits { max_instances: 2, max_total_bytes: 1 << 20 };
    let tracer = Tracer::new(patcher.clone(), 2, &[], limits, top_config()).unwrap();
    assert_eq!(tracer.set_function_profile(true), Err(FunctionError::Unavailable));
    assert!(tracer.set_functions(COUNT));
    let top = tracer.top();
    let only = |set: &[usize]| (0..COUNT).map(|j| set.contains(&j)).collect::<Vec<_>>();
    top.set_function_list(FunctionList::Filter, &only(&[0, 1])).unwrap();
    top.set_function_list(FunctionList::Notrace, &only(&[1])).unwrap();
    HostPlatform::set_cpu(0);
    assert!(!tracer.profile_entry(0), "off");
    assert_eq!(calls(), [false; COUNT]);

    tracer.set_function_profile(true).unwrap();
    assert!(tracer.function_profile());
    assert_eq!(calls(), [true, false, false, false], "the filter, less notrace");
    assert_eq!(tracer.enabled_functions(), [(0, 1)], "the profiler's callback");
    assert!(tracer.profile_entry(0) && !tracer.profile_entry(1) && !tracer.profile_entry(2));
    tracer.profile_return(0, 10_000);
    assert!(tracer.profile_entry(0));
    tracer.profile_return(0, 30_000);
    let stat = |hits, time, time_squared| FunctionStat { index: 0, hits, time, time_squared };
    assert_eq!(tracer.function_stats(0), [stat(2, 40_000, 1_000_000_000)]);
    // Another CPU has its own counts; squares carry past 64 bits.
    HostPlatform::set_cpu(1);
    let long = u64::from(u32::MAX);
    for _ in 0..2 {
        assert!(tracer.profile_entry(0));
        tracer.profile_return(0, long);
    }
    let squares = 2 * u128::from(long) * u128::from(long);
    assert!(squares > u128::from(u64::MAX));
    assert_eq!(tracer.function_stats(1), [stat(2, 2 * long, squares)]);
    assert_eq!(tracer.function_stats(0).len(), 1, "CPU 0's counts are its own");
    assert!(tracer.function_stats(2).is_empty(), "no such CPU");
    HostPlatform::set_cpu(0);

    // The table: calls, time, average and s^2 (10 and 30 us: 200 us^2), the
    // longest total first; a long name widens the name column.
    let names =
        |index: usize| ["f0", "kernel::a_function_with_a_forty_char_nam"].get(index).copied();
    let mut text = String::new();
    let two = [stat(2, 40_000, 1_000_000_000), FunctionStat { index: 1, ..stat(1, 5_000, 0) }];
    FunctionStat::write_table(&mut text, &two[..1], &names).unwrap();
    assert_eq!(
        text,
        "  Function                               Hit    Time            Avg             s^2\n\
        \x20 --------                               ---    ----            ---             ---\n\
        \x20 f0                                       2    40.000 us       20.000 us       200.000 us  \n"
    );
    let mut text = String::new();
    FunctionStat::write_table(&mut text, &two, &names).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let hits_end = |line: &str| line.find(" Hit").map(|at| at + 4);
    assert_eq!(hits_end(lines[0]), Some(lines[2].find(" 2 ").unwrap() + 2), "{text}");
    assert!(lines[3].starts_with("  kernel::a_function_with_a_forty_char_nam  "), "{text}");
    assert_eq!(lines[2].find(" 2 "), lines[3].find(" 1 "), "aligned:\n{text}");

    // The top level's lists change what is profiled; a function tracer's entries
    // stay calls beside it.
    top.set_function_list(FunctionList::Filter, &only(&[2])).unwrap();
    assert_eq!(calls(), [false, false, true, false]);
    assert!(!tracer.profile_entry(0) && tracer.profile_entry(2));
    let g = tracer.get_or_create("g", top_config()).unwrap();
    g.set_function_list(FunctionList::Filter, &only(&[3])).unwrap();
    g.set_function_tracer(FunctionTracer::Function).unwrap();
    assert_eq!(calls(), [false, false, true, true]);
    assert!(!tracer.profile_entry(3), "g's functions are not profiled");

    // A refused patch changes nothing; off keeps the counts; on starts from zero.
    patcher.refuse.store(true, Relaxed);
    assert_eq!(tracer.set_function_profile(false), Err(FunctionError::Patch("refused")));
    patcher.refuse.store(false, Relaxed);
    assert!(tracer.function_profile() && tracer.profile_entry(2));
    tracer.set_function_profile(false).unwrap();
    assert_eq!(calls(), [false, false, false, true]);
    assert!(!tracer.profile_entry(2));
    tracer.profile_return(2, 7);
    let kept = tracer.function_stats(0);
    patcher.refuse.store(true, Relaxed);
    assert_eq!(tracer.set_function_profile(true), Err(FunctionError::Patch("refused")));
    patcher.refuse.store(false, Relaxed);
    assert!(!tracer.function_profile() && !tracer.profile_entry(2));
    assert_eq!(tracer.function_stats(0), kept, "a refused start keeps the counts");
    assert_eq!(
        kept.iter().map(|s| (s.index, s.hits, s.time)).collect::<Vec<_>>(),
        [(0, 2, 40_000), (2, 2, 0)]
    );
    tracer.set_function_profile(true).unwrap();
    assert!(tracer.function_stats(0).is_empty() && tracer.function_stats(1).is_empty());
    tracer.set_function_profile(false).unwrap();
    g.set_function_tracer(FunctionTracer::Nop).unwrap();
    assert_eq!(calls(), [false; COUNT]);
}

fn top_config() -> InstanceConfig {
    InstanceConfig { bytes_per_cpu: 4096, mode: Mode::Overwrite, snapshot: false }
}

/// `set_ftrace_filter`'s `FUNCTION:COMMAND`s: patched entries whatever the tracer,
/// actions when the function is called, a count per function, read-back, removal,
/// refusals that change nothing, and a destroyed instance's commands gone.
#[test]
#[cfg_attr(miri, ignore = "single-threaded safe code, run natively (8 s under Miri)")]
fn function_commands_act_when_their_functions_are_called() {
    static TARGET: crate::event::EventDescriptor = crate::event::EventDescriptor::new(
        "sys",
        "target",
        "",
        &[],
        crate::event::DescriptorKind::Event,
    );
    let _shared = exclusive();
    HostPlatform::set_cpu(0);
    HostPlatform::set_clock(1);
    let patcher = Patcher::new();
    let calls = || patcher.calls.lock().unwrap().clone();
    let limits = Limits { max_instances: 4, max_total_bytes: 1 << 20 };
    let tracer = Tracer::new(patcher.clone(), 1, &[&TARGET], limits, top_config()).unwrap();
    let top = tracer.top();
    let refused = top.set_function_command(&[0], "traceoff");
    assert_eq!(refused, Err(HookError::Function(FunctionError::Unavailable)));
    assert!(tracer.set_functions(COUNT));
    let call = |index: usize| {
        tracer.record_function_entry(index, 0x100, 0x200, Some(0), GraphScope::default())
    };

    // `traceoff:2` on functions 1 and 2: their entries become calls with `nop`, and
    // each function turns tracing off twice.
    top.set_function_command(&[1, 2], "traceoff:2").unwrap();
    assert_eq!(calls(), [false, true, true, false]);
    assert_eq!(tracer.enabled_functions(), [(1, 1), (2, 1)]);
    assert_eq!(top.function_tracer().unwrap(), FunctionTracer::Nop);
    let listed = |i: &crate::Instance<'_, Patcher>| i.function_commands().unwrap();
    let both = |n: &str| vec![(1, n.to_string()), (2, n.to_string())];
    assert_eq!(listed(&top), both("traceoff:count=2"));
    let tracing = || top.recorder().live().is_recording();
    call(0);
    assert!(tracing(), "function 0 has no command");
    call(1);
    assert!(!tracing());
    assert_eq!(listed(&top)[0], (1, "traceoff:count=1".to_string()));
    call(1);
    assert_eq!(listed(&top)[0], (1, "traceoff:count=1".to_string()), "off already: kept");
    for _ in 0..2 {
        top.set_tracing(true);
        call(2);
        assert!(!tracing());
    }
    top.set_tracing(true);
    call(2);
    assert!(tracing(), "function 2's count ran out, function 1's did not");
    assert_eq!(listed(&top), [(1, "traceoff:count=1".into()), (2, "traceoff:count=0".into())]);

    // The same command again keeps the one there, with its count.
    top.set_function_command(&[1], "traceoff:9").unwrap();
    assert_eq!(listed(&top)[0], (1, "traceoff:count=1".to_string()));

    // enable_event, stacktrace and snapshot; the target is in soft mode meanwhile.
    top.set_function_command(&[3], "enable_event:sys:target:1").unwrap();
    assert!(top.event_soft_mode(&TARGET).unwrap());
    assert!(!TARGET.recording_in(0));
    call(3);
    assert!(TARGET.recording_in(0));
    top.set_function_command(&[3], "stacktrace").unwrap();
    top.set_function_command(&[3], "snapshot:1").unwrap();
    assert!(top.has_snapshot(), "a snapshot command allocates the snapshot buffer");
    call(3);
    // The stack trace was recorded, then the snapshot taken: it holds the record.
    let recorder = top.recorder();
    let mut kept = recorder.snapshot().unwrap().iter(0).unwrap();
    let stack = crate::tracer::STACK_TRACE.id();
    let mut found = false;
    while let Some(record) = kept.next_record() {
        found |= record.id == stack;
    }
    assert!(found, "no stack trace in the snapshot");
    assert_eq!(
        listed(&top)[2..],
        [
            (3, "enable_event:sys:target:count=0".to_string()),
            (3, "stacktrace:unlimited".to_string()),
            (3, "snapshot:count=0".to_string()),
        ]
    );

    // Refusals change nothing.
    let before = listed(&top);
    let trigger = |reason| Err(HookError::Trigger(crate::tracer::TriggerError { pos: 0, reason }));
    assert!(matches!(top.set_function_command(&[0], "bogus"), Err(HookError::Trigger(_))));
    let reason = crate::tracer::TriggerReason::UnknownCommand;
    for (line, pos) in [("hist:keys=ip", 0), ("!hist:keys=ip", 1)] {
        let unknown = Err(HookError::Trigger(crate::tracer::TriggerError { pos, reason }));
        assert_eq!(top.set_function_command(&[0], line), unknown, "{line}: an event trigger");
    }
    for (line, pos) in
        [("traceoff if ip == 1", 9), ("traceoff:2:3", 11), ("!traceoff if ip == 1", 10)]
    {
        assert_eq!(
            top.set_function_command(&[0], line),
            Err(HookError::Trigger(crate::tracer::TriggerError {
                pos,
                reason: crate::tracer::TriggerReason::CommandEnd
            })),
            "{line}: function commands take no filter"
        );
    }
    assert_eq!(
        top.set_function_command(&[0, 2], "!traceon"),
        trigger(crate::tracer::TriggerReason::NotFound)
    );
    let refused = top.set_function_command(&[COUNT], "traceoff");
    assert_eq!(refused, Err(HookError::Function(FunctionError::NoSuchFunction)));
    patcher.refuse.store(true, Relaxed);
    let refused = top.set_function_command(&[0], "traceon");
    assert_eq!(refused, Err(HookError::Function(FunctionError::Patch("refused"))));
    patcher.refuse.store(false, Relaxed);
    assert_eq!(listed(&top), before);
    assert_eq!(calls(), [false, true, true, true]);

    // `dump` and `cpudump` are two commands, as in ftrace.
    top.set_function_command(&[0], "dump").unwrap();
    top.set_function_command(&[0], "cpudump").unwrap();
    assert_eq!(listed(&top)[..2], [(0, "dump:unlimited".into()), (0, "cpudump:unlimited".into())]);
    top.set_function_command(&[0], "!cpudump").unwrap();
    assert_eq!(listed(&top)[0], (0, "dump:unlimited".to_string()));
    top.set_function_command(&[0], "!dump").unwrap();

    // Removal: a count after it is ignored, in any form the file lists; entries
    // without commands are NOPs again.
    top.set_function_command(&[1], "!traceoff:0").unwrap();
    top.set_function_command(&[2], "!traceoff:count=0").unwrap();
    assert_eq!(calls(), [false, false, false, true]);
    for command in ["!enable_event:sys:target:unlimited", "!stacktrace", "!snapshot"] {
        top.set_function_command(&[3], command).unwrap();
    }
    assert!(listed(&top).is_empty());
    assert!(!top.event_soft_mode(&TARGET).unwrap());
    assert_eq!(calls(), [false; COUNT]);

    // An instance's commands go with it; a new instance in its slot has none.
    let g = tracer.get_or_create("g", top_config()).unwrap();
    g.set_function_command(&[0], "traceoff").unwrap();
    assert_eq!(calls(), [true, false, false, false]);
    drop(g);
    tracer.destroy_by_name("g").unwrap();
    assert_eq!(calls(), [false; COUNT]);
    let g = tracer.get_or_create("g", top_config()).unwrap();
    assert!(g.function_commands().unwrap().is_empty());
    call(0);
    assert!(g.recorder().live().is_recording());
}

/// `current_tracer` as ftrace's (`select_function_tracer`): another tracer empties
/// the live buffer and keeps the snapshot, but leaving `irqsoff` frees it; the
/// tracer there already, a refused change, or one a consuming reader refuses,
/// keeps both.
#[test]
fn selecting_another_tracer_empties_the_buffers_and_a_refusal_keeps_them() {
    let _shared = exclusive();
    let patcher = Patcher::new();
    let limits = Limits { max_instances: 3, max_total_bytes: 1 << 20 };
    let tracer = Tracer::new(patcher.clone(), 1, &[], limits, top_config()).unwrap();
    assert!(tracer.set_functions(COUNT));
    let (top, g) = (tracer.top(), tracer.get_or_create("g", top_config()).unwrap());
    let held = |i: &crate::Instance<'_, Patcher>| {
        let recorder = i.recorder();
        let spare = recorder.snapshot().map(|s| s.stats(0).unwrap().entries);
        (recorder.live().stats(0).unwrap().entries, spare)
    };
    for i in [&top, &g] {
        i.write_marker("kept").unwrap();
        i.snapshot_take().unwrap();
        i.write_marker("live").unwrap();
        assert_eq!(held(i), (1, Some(1)));
    }
    top.select_function_tracer(FunctionTracer::Irqsoff).unwrap();
    assert_eq!(held(&top), (0, Some(1)), "the snapshot is irqsoff's, as it was");
    let refused = g.select_function_tracer(FunctionTracer::Irqsoff);
    assert_eq!(refused, Err(FunctionError::IrqsoffBusy));
    assert_eq!(held(&g), (1, Some(1)), "refused: both kept");
    g.select_function_tracer(FunctionTracer::Nop).unwrap();
    assert_eq!(held(&g), (1, Some(1)), "the tracer there already");
    {
        let recorder = g.recorder();
        let _reader = recorder.live().consumer(0).unwrap();
        let busy = InstanceError::Buffer(crate::Error::Busy);
        let refused = g.select_function_tracer(FunctionTracer::Function);
        assert_eq!(refused, Err(FunctionError::Buffers(busy)));
        assert_eq!(g.function_tracer().unwrap(), FunctionTracer::Nop);
    }
    assert_eq!(held(&g), (1, Some(1)), "a reader: both kept");
    g.select_function_tracer(FunctionTracer::Function).unwrap();
    assert_eq!(held(&g), (0, Some(1)));
    for i in [&top, &g] {
        i.select_function_tracer(FunctionTracer::Nop).unwrap();
    }
    assert_eq!(held(&g), (0, Some(1)));
    assert_eq!(held(&top), (0, None), "leaving irqsoff freed its snapshot");
}

/// One `set_ftrace_filter` write is one change: each command is judged against what
/// those before it leave, and a refusal (which names the command) leaves the list,
/// the commands and the snapshot buffer as they were.
#[test]
fn a_refused_function_edit_changes_nothing() {
    static A: crate::event::EventDescriptor = crate::event::EventDescriptor::new(
        "sys",
        "a",
        "",
        &[],
        crate::event::DescriptorKind::Event,
    );
    static B: crate::event::EventDescriptor = crate::event::EventDescriptor::new(
        "sys",
        "b",
        "",
        &[],
        crate::event::DescriptorKind::Event,
    );
    let _shared = exclusive();
    let patcher = Patcher::new();
    let limits = Limits { max_instances: 2, max_total_bytes: 1 << 20 };
    let tracer = Tracer::new(patcher.clone(), 1, &[&A, &B], limits, top_config()).unwrap();
    assert!(tracer.set_functions(COUNT));
    let top = tracer.top();
    top.set_function_command(&[0], "traceoff").unwrap();
    let state = |i: &crate::Instance<'_, Patcher>| {
        (
            i.function_list(FunctionList::Filter).unwrap(),
            i.function_commands().unwrap(),
            i.has_snapshot(),
        )
    };
    let before = state(&top);
    let filter = Some((FunctionList::Filter, &[false, true, false, false][..]));
    let refused = |command, reason| {
        let error = HookError::Trigger(crate::tracer::TriggerError { pos: 0, reason });
        Err(crate::tracer::FunctionEditError { command: Some(command), error })
    };
    use crate::tracer::TriggerReason::{NotFound, TooMany};
    // The second removal finds nothing: the first one was the change's.
    let twice = [(&[0][..], "!traceoff"), (&[0][..], "!traceoff")];
    assert_eq!(top.edit_functions(filter, &twice), refused(1, NotFound));
    // The limit counts the commands of the same change: seven more make eight, the
    // snapshot among them; a ninth is refused.
    let lines = ["traceon", "stacktrace", "dump", "cpudump", "snapshot", "enable_event:sys:a"];
    let mut change: Vec<(&[usize], &str)> = lines.iter().map(|&l| (&[0][..], l)).collect();
    change.push((&[0, 1], "disable_event:sys:a"));
    change.push((&[0], "enable_event:sys:b"));
    assert_eq!(top.edit_functions(filter, &change), refused(7, TooMany));
    assert_eq!(state(&top), before, "nothing changed, no snapshot allocated");
    assert_eq!(*patcher.calls.lock().unwrap(), [true, false, false, false]);
    // Accepted, it is applied whole.
    top.edit_functions(filter, &change[..7]).unwrap();
    assert_eq!(top.function_list(FunctionList::Filter).unwrap(), [1]);
    assert_eq!(top.function_commands().unwrap().len(), 9);
    assert!(top.has_snapshot());
}

proptest::proptest! {
    #![proptest_config(crate::tests::util::cases(200))]

    /// Whatever is written as a function command, the tracer answers without
    /// panicking, and a refused one leaves the commands and entries as they were.
    #[test]
    #[cfg_attr(miri, ignore = "single-threaded safe code, run natively")]
    fn any_function_command_is_taken_or_refused_whole(
        lines in proptest::collection::vec(
            "!?(traceon|traceoff|snapshot|stacktrace|enable_event|disable_event|hist|enable_hist:s:e|[a-z]{0,3})\
             (:[a-z0-9é]{0,4}){0,4}( if [a-z=0-9 ]{0,6})?",
            1..6,
        ),
        functions in proptest::collection::vec(0..COUNT + 1, 0..4),
    ) {
        let _shared = exclusive();
        let patcher = Patcher::new();
        let limits = Limits { max_instances: 2, max_total_bytes: 1 << 20 };
        let tracer = Tracer::new(patcher.clone(), 1, &[], limits, top_config()).unwrap();
        assert!(tracer.set_functions(COUNT));
        let top = tracer.top();
        for line in &lines {
            let (before, entries) = (top.function_commands().unwrap(), patcher.calls.lock().unwrap().clone());
            if top.set_function_command(&functions, line).is_err() {
                proptest::prop_assert_eq!(top.function_commands().unwrap(), before, "{}", line);
                proptest::prop_assert_eq!(patcher.calls.lock().unwrap().clone(), entries);
            }
            tracer.record_function_entry(0, 1, 2, Some(0), GraphScope::default());
        }
    }
}

/// The irqsoff tracer: one instance at a time, which gets a snapshot buffer, its
/// `tracing_max_latency` at 0 and overwrite mode (discard refused; its mode back
/// after); a region longer than its `tracing_max_latency` is recorded and swapped
/// into the snapshot, a shorter one is not; with `tracing_thresh`, every region at
/// least that long is; none while recording is off; a region inside an open one
/// (an exception's) times nothing of its own.
#[test]
#[cfg_attr(miri, ignore = "single-threaded safe code, run natively (14 s under Miri)")]
fn the_irqsoff_tracer_keeps_the_longest_irqs_off_region() {
    use crate::tracer::IRQSOFF;
    let _shared = exclusive();
    HostPlatform::set_cpu(0);
    let patcher = Patcher::new();
    let config = InstanceConfig { bytes_per_cpu: 4096, mode: Mode::Overwrite, snapshot: false };
    let limits = Limits { max_instances: 4, max_total_bytes: 1 << 20 };
    let tracer = Tracer::new(patcher.clone(), 1, &[], limits, config).unwrap();
    // Interrupts off for `ns` from `start` to `end`; whether the region was timed.
    let region = |start: u64, end: u64, ns: u64| {
        HostPlatform::set_clock(1_000_000);
        let opened = tracer.irqs_off(start);
        HostPlatform::set_clock(1_000_000 + ns);
        tracer.irqs_on(end);
        opened
    };
    let top = tracer.top();
    assert!(!region(0x10, 0x20, 500), "no functions registered: nothing is timed");
    assert_eq!(top.set_max_latency(1), Err(FunctionError::Unavailable));
    assert!(tracer.set_functions(COUNT));
    assert!(!region(0x10, 0x20, 500), "no instance's tracer is irqsoff");
    assert_eq!(top.max_latency(), 0);

    let lat = tracer.get_or_create("lat", config).unwrap();
    lat.set_mode(Mode::Discard).unwrap();
    lat.set_max_latency(700).unwrap();
    // A refused patch changes nothing: mode and maximum as they were.
    patcher.refuse.store(true, Relaxed);
    let refused = lat.set_function_tracer(FunctionTracer::Irqsoff);
    assert_eq!(refused, Err(FunctionError::Patch("refused")));
    patcher.refuse.store(false, Relaxed);
    assert_eq!((lat.function_tracer().unwrap(), lat.mode()), (FunctionTracer::Nop, Mode::Discard));
    assert_eq!(lat.max_latency(), 700);
    lat.set_function_tracer(FunctionTracer::Irqsoff).unwrap();
    assert_eq!(lat.function_tracer().unwrap(), FunctionTracer::Irqsoff);
    assert_eq!((lat.mode(), lat.max_latency()), (Mode::Overwrite, 0), "as ftrace starts it");
    assert_eq!(lat.set_mode(Mode::Discard), Err(InstanceError::OverwriteInUse));
    assert_eq!(lat.mode(), Mode::Overwrite, "the refusal changed nothing");
    lat.set_mode(Mode::Overwrite).unwrap();
    assert!(lat.has_snapshot(), "irqsoff keeps its window in the snapshot");
    for refused in [lat.snapshot_free(), lat.snapshot_take(), lat.snapshot_clear()] {
        assert_eq!(refused, Err(InstanceError::SnapshotInUse), "the window is irqsoff's");
    }
    assert_eq!(lat.snapshot_clear_cpu(0), Err(InstanceError::SnapshotInUse));
    assert!(lat.has_snapshot());
    assert_eq!(patcher.calls.lock().unwrap().clone(), [true; COUNT], "it traces functions");
    let busy = top.set_function_tracer(FunctionTracer::Irqsoff);
    assert_eq!(busy, Err(FunctionError::IrqsoffBusy));
    assert!(!top.has_snapshot(), "the refusal allocated nothing");
    assert_eq!(top.function_tracer().unwrap(), FunctionTracer::Nop);
    let set_event = lat.set_event(Some("ftrace"), Some("irqsoff"), true);
    assert_eq!(set_event, Err(InstanceError::FunctionEvent), "its tracer enables it");

    // The first region is the longest yet: recorded, then swapped into the snapshot.
    let recorder = lat.recorder();
    // The snapshot holds the live buffer as it was at the last report (after the
    // records of the window before the previous report): its last record is that
    // report's.
    let snapshot = || buffer_records(recorder.snapshot().unwrap(), &IRQSOFF).pop();
    assert!(region(0x100, 0x180, 500));
    assert_eq!(lat.max_latency(), 500);
    assert_eq!(snapshot(), Some(vec![500, 0x100, 0x180]));
    assert_eq!(records(&lat, &IRQSOFF), [[0u64; 0]; 0], "the live buffer goes on");
    assert_eq!(records(&top, &IRQSOFF), [[0u64; 0]; 0], "only the tracer's instance");
    // Shorter or as long: nothing.
    assert!(region(0x200, 0x280, 400) && region(0x200, 0x280, 500));
    assert_eq!(lat.max_latency(), 500);
    assert_eq!(snapshot(), Some(vec![500, 0x100, 0x180]));
    // Longer: the new window replaces the old one.
    assert!(region(0x300, 0x380, 900));
    assert_eq!((lat.max_latency(), snapshot()), (900, Some(vec![900, 0x300, 0x380])));
    // A `snapshot` trigger leaves the window alone and says so, in ftrace's words,
    // and spends its count as ftrace's: counted, it says so once.
    let marker = &crate::event::marker::MARKER;
    lat.set_trigger(marker, "snapshot:1").unwrap();
    lat.write_marker("x").unwrap();
    lat.write_marker("y").unwrap();
    assert_eq!(snapshot(), Some(vec![900, 0x300, 0x380]));
    let mut live = recorder.live().iter(0).unwrap();
    let mut notes = Vec::new();
    while let Some(record) = live.next_record() {
        if record.id == marker.id() {
            notes.push(String::from_utf8_lossy(&record.payload[2..]).into_owned());
        }
    }
    let active = ["*** LATENCY TRACER ACTIVE ***", "*** Can not use snapshot (sorry) ***"];
    assert_eq!(notes, [&["x"], &active[..], &["y"]].concat());
    assert_eq!(lat.triggers(marker), ["snapshot:count=0"]);
    lat.set_trigger(marker, "!snapshot").unwrap();

    // Functions called inside a timed region are recorded, those outside are not.
    entry(&tracer, 1, 0x1000, 0x2000, Some(0));
    assert_eq!(records(&lat, &FUNCTION), [[0u64; 0]; 0], "interrupts are on");
    HostPlatform::set_clock(1_500_000);
    assert!(tracer.irqs_off(0x310));
    entry(&tracer, 2, 0x1100, 0x2100, Some(0));
    HostPlatform::set_clock(1_502_000);
    tracer.irqs_on(0x390);
    let kept = buffer_records(recorder.snapshot().unwrap(), &FUNCTION);
    assert_eq!(kept.last(), Some(&vec![0x1100, 0x2100]), "the call is in the window");
    assert_eq!(snapshot(), Some(vec![2000, 0x310, 0x390]));
    assert_eq!(records(&top, &FUNCTION), [[0u64; 0]; 0], "only the tracer's instance");

    // A region that opens inside an open one (an exception taken with interrupts
    // off) is not timed: its close does not end the outer one. (The bar at 0: the
    // next region is reported.)
    lat.set_max_latency(0).unwrap();
    HostPlatform::set_clock(2_000_000);
    assert!(tracer.irqs_off(0x400));
    assert!(!tracer.irqs_off(0x500), "already open");
    HostPlatform::set_clock(2_001_000);
    tracer.irqs_on(0x480);
    assert_eq!(snapshot(), Some(vec![1000, 0x400, 0x480]));
    assert_eq!(lat.max_latency(), 1000);
    // A close without an open region (the tracer was turned on inside one) is none.
    tracer.irqs_on(0x490);
    assert_eq!(lat.max_latency(), 1000);

    // `tracing_max_latency` written: only longer ones from there.
    lat.set_max_latency(5000).unwrap();
    assert!(region(0x600, 0x680, 4000));
    assert_eq!(lat.max_latency(), 5000);
    // Recording off (`tracing_on` 0): nothing is reported, however long.
    lat.set_tracing(false);
    assert!(region(0x650, 0x6a0, 9000));
    assert_eq!((lat.max_latency(), snapshot()), (5000, Some(vec![1000, 0x400, 0x480])));
    lat.set_tracing(true);
    assert!(region(0x650, 0x6a0, 9000));
    assert_eq!((lat.max_latency(), snapshot()), (9000, Some(vec![9000, 0x650, 0x6a0])));
    // `tracing_thresh`: every region at least that long, the last one's latency kept.
    tracer.set_graph_threshold(300).unwrap();
    assert!(region(0x700, 0x780, 300) && region(0x800, 0x880, 299));
    assert_eq!((lat.max_latency(), snapshot()), (300, Some(vec![300, 0x700, 0x780])));
    tracer.set_graph_threshold(0).unwrap();

    // Back to nop: nothing is timed, the mode is back; another instance may take
    // the tracer, and has its own maximum.
    lat.set_function_tracer(FunctionTracer::Nop).unwrap();
    assert_eq!(lat.mode(), Mode::Discard, "the mode it had before irqsoff");
    lat.set_mode(Mode::Overwrite).unwrap();
    assert!(!region(0x900, 0x980, 1 << 20));
    top.set_function_tracer(FunctionTracer::Irqsoff).unwrap();
    assert!(region(0x900, 0x980, 1 << 20));
    assert_eq!((top.max_latency(), lat.max_latency()), (1 << 20, 300));
    assert_eq!(
        buffer_records(top.recorder().snapshot().unwrap(), &IRQSOFF),
        [[1 << 20, 0x900, 0x980]]
    );
    // Destroying the owner leaves none.
    let other = tracer.get_or_create("other", config).unwrap();
    assert_eq!(other.set_function_tracer(FunctionTracer::Irqsoff), Err(FunctionError::IrqsoffBusy));
    top.set_function_tracer(FunctionTracer::Nop).unwrap();
    other.set_function_tracer(FunctionTracer::Irqsoff).unwrap();
    tracer.destroy(other).unwrap();
    assert!(!region(0xa00, 0xa80, 1 << 30), "its destroy left no owner");
    top.set_function_tracer(FunctionTracer::Irqsoff).unwrap();
    top.set_function_tracer(FunctionTracer::Nop).unwrap();
}

/// The function tracers' getters take the lock patching holds while it waits for
/// every CPU: from inside a section (in a closure the tracer runs there) they are
/// refused, as the setters are, where they took the lock (a patch on another CPU,
/// waiting for this one, then never ended).
#[test]
fn the_function_tracers_getters_are_refused_inside_a_section() {
    let _shared = exclusive();
    HostPlatform::set_cpu(0);
    let top = InstanceConfig { bytes_per_cpu: 4096, mode: Mode::Overwrite, snapshot: false };
    let limits = Limits { max_instances: 2, max_total_bytes: 1 << 20 };
    let tracer = Tracer::new(Patcher::new(), 1, &[], limits, top).unwrap();
    assert!(tracer.set_functions(COUNT));
    let top = tracer.top();
    top.set_function_list(FunctionList::Filter, &[true, false, false, false]).unwrap();
    let refused = Err(FunctionError::WouldDeadlock);
    let mut inside = Vec::new();
    tracer.visit_instances(|_| {
        inside = vec![
            ("function_tracer", top.function_tracer().map(drop)),
            ("function_list", top.function_list(FunctionList::Filter).map(drop)),
            ("function_commands", top.function_commands().map(drop)),
            ("touched_functions", tracer.touched_functions().map(drop)),
            ("stack_filter", tracer.stack_filter().map(drop)),
            ("stack_max", tracer.stack_max().map(drop)),
            ("set_stack_max_size", tracer.set_stack_max_size(1)),
            ("set_function_tracer", top.set_function_tracer(FunctionTracer::Function)),
        ];
    });
    assert_eq!(inside.len(), 8, "the closure ran");
    for (what, result) in inside {
        assert_eq!(result, refused, "{what}");
    }
    assert_eq!(top.function_list(FunctionList::Filter).unwrap(), [0], "nothing changed");
    assert_eq!(top.function_tracer().unwrap(), FunctionTracer::Nop);
    assert_eq!(tracer.stack_max().unwrap().size, 0);
}

/// `irqsoff` refused (the patcher refuses, or the caller may not wait) leaves no
/// snapshot behind: the one it allocated for its window stayed, and counted against
/// the memory limit.
#[test]
fn irqsoff_refused_leaves_no_snapshot() {
    let _shared = exclusive();
    HostPlatform::set_cpu(0);
    let patcher = Patcher::new();
    let top = InstanceConfig { bytes_per_cpu: 4096, mode: Mode::Overwrite, snapshot: false };
    let limits = Limits { max_instances: 2, max_total_bytes: 1 << 20 };
    let tracer = Tracer::new(patcher.clone(), 1, &[], limits, top).unwrap();
    assert!(tracer.set_functions(COUNT));
    let top = tracer.top();
    let memory = tracer.memory().unwrap();
    patcher.refuse.store(true, Relaxed);
    let refused = top.set_function_tracer(FunctionTracer::Irqsoff);
    assert_eq!(refused, Err(FunctionError::Patch("refused")));
    assert!(!top.has_snapshot(), "the snapshot allocated for it went again");
    assert_eq!(tracer.memory().unwrap(), memory);
    let mut inside = None;
    tracer.visit_instances(|_| inside = Some(top.set_function_tracer(FunctionTracer::Irqsoff)));
    assert_eq!(inside, Some(Err(FunctionError::WouldDeadlock)));
    assert!(!top.has_snapshot());
    // A snapshot the instance had stays.
    top.snapshot_alloc().unwrap();
    assert_eq!(
        top.set_function_tracer(FunctionTracer::Irqsoff),
        Err(FunctionError::Patch("refused"))
    );
    assert!(top.has_snapshot(), "the instance's own snapshot stays");
    patcher.refuse.store(false, Relaxed);
    top.set_function_tracer(FunctionTracer::Irqsoff).unwrap();
    assert_eq!(top.function_tracer().unwrap(), FunctionTracer::Irqsoff);
    top.set_function_tracer(FunctionTracer::Nop).unwrap();
    // A refusal of the buffers' says the buffers' reason too.
    assert_eq!(
        FunctionError::Snapshot(InstanceError::MemoryLimit).to_string(),
        "irqsoff needs a snapshot buffer, which was refused (tracing memory limit reached)"
    );
}
