//! One test per loss or wedge found in the ring and its readers: each failed before
//! the fix it names and passes after.

use super::util::{Probe, buffer, consume, nest};
use crate::field::Sink;
use crate::sync::{Point, hook};
use crate::{HostPlatform, Mode, ring::Config, ring::Recorder, ring::WriteError};
use std::rc::Rc;
use std::vec::Vec;

/// A nested writer reclaims from the tail the outer writer's reclaim walk started
/// from and writes over those records; the outer writer's walk read them stale. The
/// outer writer must walk again (re-check the tail), not mark the ring corrupt.
#[test]
fn reclaim_walk_raced_by_a_nested_reclaim_walks_again() {
    let b = Rc::new(buffer(1, 256, Mode::Overwrite)); // 32 words: every write reclaims
    for i in 0..20 {
        b.write(i, &[0; 16]).unwrap();
    }
    let bb = b.clone();
    hook::once(Point::Walking, move || {
        // Records of odd sizes shift the boundaries under the outer walk.
        for (i, len) in [(200, 40), (201, 8), (202, 56), (203, 24)] {
            bb.write(i, &vec![0xee; len]).unwrap();
        }
    });
    b.write(50, &[7; 56]).unwrap(); // walks several records
    hook::clear();
    assert!(!b.is_corrupt(), "a raced walk concluded corruption");
    b.write(51, &[8; 16]).unwrap();
    let s = b.stats(0).unwrap();
    assert_eq!(s.written, 26);
    assert!(s.balanced(), "{s:?}");
    let ids: Vec<u16> = consume(&b, 0).iter().map(|e| e.0).collect();
    assert_eq!(ids.last(), Some(&51));
}

/// An interrupt that reserves after the outermost writer loaded the head it
/// publishes, before it left, finds it still inside and leaves its record to it: the
/// outer writer must load the head again and publish that record too. (Without the
/// re-check it stays unpublished until the next write on the CPU.)
#[test]
fn an_interrupt_between_the_publish_and_the_leave_is_published() {
    for mode in [Mode::Overwrite, Mode::Discard] {
        let b = Rc::new(buffer(1, 1024, mode));
        let bb = b.clone();
        hook::once(Point::Publishing, move || bb.write(90, &[1; 16]).unwrap());
        b.write(1, &[0; 16]).unwrap();
        hook::clear();
        let ids: Vec<u16> = consume(&b, 0).iter().map(|e| e.0).collect();
        assert_eq!(ids, [1, 90], "{mode:?}");
        let s = b.stats(0).unwrap();
        assert!(s.balanced(), "{mode:?}: {s:?}");
    }
}

/// A write outside any section that finds recording off once inside its ring
/// leaves without writing, and publishes the record an interrupt wrote meanwhile.
#[test]
fn a_write_refused_inside_its_ring_publishes_an_interrupts_record() {
    let b = Rc::new(buffer(1, 1024, Mode::Overwrite));
    let bb = b.clone();
    hook::once(Point::Entered, move || {
        bb.write(90, &[1; 16]).unwrap();
        bb.set_recording(false);
    });
    assert_eq!(b.write(1, &[0; 16]), Err(WriteError::Off));
    hook::clear();
    let ids: Vec<u16> = consume(&b, 0).iter().map(|e| e.0).collect();
    assert_eq!(ids, [90]);
    let s = b.stats(0).unwrap();
    assert_eq!((s.written, s.read), (1, 1));
    assert!(s.balanced(), "{s:?}");
}

/// `lost()` (what `trace_pipe` reports) covers every kind of loss: drops for depth
/// and refused writes too.
#[test]
fn consumer_reports_every_loss() {
    let b = Rc::new(buffer(1, 4096, Mode::Discard));
    // A writer nested deeper than MAX_DEPTH: dropped.
    let depth = crate::ring::MAX_DEPTH;
    nest(b.clone(), 1, depth as u16);
    b.write(1, b"outer").unwrap();
    hook::clear();
    // Refused: too large, reserved id.
    assert_eq!(b.write(2, &vec![0; 5000]), Err(WriteError::TooLarge));
    assert_eq!(b.write(0xffff, b"x"), Err(WriteError::ReservedId));
    b.write(3, b"last").unwrap();
    let s = b.stats(0).unwrap();
    assert_eq!(s.dropped, 3);
    assert_eq!((s.refused.too_large, s.refused.reserved_id), (1, 1));
    assert!(s.balanced(), "{s:?}");
    let records = consume(&b, 0);
    let lost: u64 = records.iter().map(|r| r.2).sum();
    assert_eq!(lost, s.dropped + s.overrun);
}

/// Every write the ring refuses is counted as written and dropped, with its reason,
/// so the identity holds; nothing refused is silent.
#[test]
fn refused_writes_are_counted_with_their_reason() {
    let b = buffer(2, 1024, Mode::Overwrite);
    assert_eq!(b.write(1, &[0; 2000]), Err(WriteError::TooLarge));
    assert_eq!(b.write(0xfffe, b""), Err(WriteError::ReservedId));
    HostPlatform::set_cpu(7);
    assert_eq!(b.write(1, b"x"), Err(WriteError::BadCpu));
    HostPlatform::set_cpu(0);
    let s = b.stats(0).unwrap();
    assert_eq!((s.refused.too_large, s.refused.reserved_id, s.refused.bad_cpu), (1, 1, 1));
    assert_eq!((s.written, s.dropped, s.entries), (3, 3, 0));
    assert!(s.balanced());
    b.set_recording(false);
    assert_eq!(b.write(1, &[0; 2000]), Err(WriteError::Off));
    assert_eq!(b.stats(0).unwrap().written, 3, "recording off: not counted");
}

/// A consuming merge dropped after looking ahead on every CPU loses nothing: what
/// it did not return is still in the rings, and `read` counts only what it returned.
#[test]
fn dropping_a_consuming_merge_keeps_what_it_looked_ahead_at() {
    let b = buffer(3, 1024, Mode::Overwrite);
    for cpu in 0..3 {
        HostPlatform::set_cpu(cpu);
        for i in 0..4 {
            b.write(10 * cpu as u16 + i, b"e").unwrap();
        }
    }
    HostPlatform::set_cpu(0);
    let mut merged = b.merged_consumer().unwrap();
    let first = merged.next_record().map(|r| r.id);
    assert_eq!(first, Some(0));
    drop(merged);
    let read: u64 = (0..3).map(|c| b.stats(c).unwrap().read).sum();
    assert_eq!(read, 1, "only the returned record counts as read");
    let rest: usize = (0..3).map(|c| consume(&b, c).len()).sum();
    assert_eq!(rest, 11);
    for cpu in 0..3 {
        assert!(b.stats(cpu).unwrap().balanced());
    }
}

/// A record cannot be left half-made by safe code: the filling closure may nest
/// other writes (in stack order by construction), and one that unwinds leaves
/// padding, not a wedged ring.
#[test]
fn records_cannot_wedge_the_ring() {
    let b = buffer(1, 1024, Mode::Overwrite);
    b.write_with(1, 8, |outer| {
        b.write_with(2, 8, |inner| inner.put_u64(2)).unwrap();
        outer.put_u64(1);
    })
    .unwrap();
    for _ in 0..3 {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            b.write_with(3, 8, |_| panic!("abandoned"))
        }));
    }
    b.write(4, b"after").unwrap();
    let ids: Vec<u16> = consume(&b, 0).iter().map(|e| e.0).collect();
    assert_eq!(ids, [1, 2, 4]);
    let s = b.stats(0).unwrap();
    assert_eq!((s.written, s.read), (3, 3));
    assert!(s.balanced());
}

/// A writer of CPU 0 on its own thread (a `HostPlatform` thread that never called
/// `set_cpu`, sharing the index with every other such thread), and what it says.
struct Sharer<'s> {
    /// The write's result.
    done: std::thread::ScopedJoinHandle<'s, Result<(), WriteError>>,
    /// `true` when the write stopped at the point it was given, `false` when it
    /// returned without reaching it.
    said: std::sync::mpsc::Receiver<bool>,
    /// Lets a stopped write go on.
    go: std::sync::mpsc::Sender<()>,
}

/// Starts a [`Sharer`] writing `id` at clock `ns` to `b`, which stops at `point`.
fn sharer<'s>(
    s: &'s std::thread::Scope<'s, '_>,
    b: &'s crate::ring::Buffer<HostPlatform>,
    id: u16,
    ns: u64,
    point: Point,
) -> Sharer<'s> {
    let (said_tx, said) = std::sync::mpsc::channel();
    let (go, stopped) = std::sync::mpsc::channel::<()>();
    let done = s.spawn(move || {
        HostPlatform::set_clock(ns);
        let told = said_tx.clone();
        hook::once(point, move || {
            told.send(true).unwrap();
            stopped.recv().unwrap();
        });
        let r = b.write(id, &[id as u8]);
        hook::clear();
        let _ = said_tx.send(false);
        r
    });
    Sharer { done, said, go }
}

/// The ids of the events in CPU 0's ring of `b`, oldest first.
fn ids_in(b: &crate::ring::Buffer<HostPlatform>) -> Vec<u16> {
    super::util::events(b, 0).iter().map(|e| e.0).collect()
}

/// A ring of one CPU on `HostPlatform`, which makes no promise about CPU indices;
/// the caller is CPU 0 too.
fn shared_ring() -> crate::ring::Buffer<HostPlatform> {
    HostPlatform::set_cpu(0);
    let cfg = Config { cpus: 1, bytes_per_cpu: 1024, mode: Mode::Overwrite };
    crate::ring::Buffer::new(HostPlatform, cfg).unwrap()
}

/// Two callers that share a CPU index on a platform that makes no promise about
/// it write at once, out of stack order: the second enters while the first is
/// inside, and the first leaves first. Counting them as nested left the ring's depth
/// raised for good, so nothing written after was published. The ring now takes one
/// writer at a time: the second is dropped and counted, and the ring goes on.
#[test]
fn writers_sharing_an_index_cannot_wedge_the_ring() {
    let b = &shared_ring();
    std::thread::scope(|s| {
        let first = sharer(s, b, 1, 10, Point::Reserved);
        assert!(first.said.recv().unwrap());
        let second = sharer(s, b, 2, 20, Point::Reserved);
        // The second is either refused at once or inside beside the first; the first
        // leaves before it either way.
        let entered = second.said.recv().unwrap();
        first.go.send(()).unwrap();
        assert_eq!(first.done.join().unwrap(), Ok(()));
        if entered {
            second.go.send(()).unwrap();
        }
        assert_eq!(second.done.join().unwrap(), Err(WriteError::Dropped), "the second got in");
    });
    HostPlatform::set_clock(30);
    b.write(3, b"after").unwrap();
    let ids = ids_in(b);
    assert_eq!(ids, [1, 3], "the write after them was published");
    let s = b.stats(0).unwrap();
    assert_eq!((s.written, s.entries, s.dropped), (3, 2, 1));
    assert!(s.balanced(), "{s:?}");
}

/// A sharer enters just as the writer before it leaves (after its depth went back
/// to zero, before it looked for records reserved meanwhile): that writer must not
/// publish the sharer's unfinished record and let a third writer in beside it.
#[test]
fn a_sharer_entering_as_the_last_writer_leaves_is_left_alone() {
    let b = &shared_ring();
    std::thread::scope(|s| {
        let first = sharer(s, b, 1, 10, Point::Committed);
        assert!(first.said.recv().unwrap());
        let second = sharer(s, b, 2, 20, Point::Reserved);
        assert!(second.said.recv().unwrap(), "the ring was free");
        first.go.send(()).unwrap();
        assert_eq!(first.done.join().unwrap(), Ok(()));
        // The second is still inside: a third is refused, nothing of the second's
        // shows, and its reservation is not published.
        HostPlatform::set_clock(30);
        assert_eq!(b.write(3, b"third"), Err(WriteError::Dropped), "a third got in");
        let ids = ids_in(b);
        assert_eq!(ids, [1]);
        assert_eq!(b.stats(0).unwrap().unpublished, 16, "the second's record is unpublished");
        second.go.send(()).unwrap();
        assert_eq!(second.done.join().unwrap(), Ok(()));
    });
    let ids = ids_in(b);
    assert_eq!(ids, [1, 2]);
    let s = b.stats(0).unwrap();
    assert_eq!((s.written, s.entries, s.dropped, s.unpublished), (3, 2, 1, 0));
    assert!(s.balanced(), "{s:?}");
}

/// Each nesting depth has its own counters: a writer interrupted between the load
/// and the store of a counter by one that bumps the same kind of counter loses
/// nothing. (Sharing one counter across depths loses the interrupt's update.)
#[test]
fn an_interrupt_between_a_counters_load_and_store_loses_no_count() {
    for mode in [Mode::Overwrite, Mode::Discard] {
        let b = Rc::new(buffer(1, 256, mode));
        for i in 0..40 {
            let _ = b.write(i, &[0; 16]);
        }
        let fired = Rc::new(std::cell::Cell::new(0));
        let (bb, f) = (b.clone(), fired.clone());
        hook::set(move |p| {
            if p == Point::Bump {
                f.set(f.get() + 1);
                let _ = bb.write(90, &[1; 16]);
            }
        });
        for i in 0..3 {
            let _ = b.write(50 + i, &[2; 16]);
        }
        hook::clear();
        assert!(fired.get() >= 3, "the hook fired between a counter's load and store");
        let s = b.stats(0).unwrap();
        assert_eq!(s.written, 43 + fired.get(), "{mode:?}: {s:?}");
        assert!(s.balanced(), "{mode:?}: {s:?}");
    }
}

/// A snapshot taken while this CPU's recorder has writers in flight elsewhere is
/// frozen and balanced; clearing with recording on empties it.
#[test]
fn clear_while_recording_is_exact() {
    HostPlatform::set_cpu(0);
    let cfg = Config { cpus: 1, bytes_per_cpu: 1024, mode: Mode::Overwrite };
    let r = Recorder::new(Probe::default(), cfg, true).unwrap();
    for i in 0..10 {
        r.write(i, b"x").unwrap();
    }
    r.clear().unwrap();
    r.write(11, b"y").unwrap();
    let s = r.live().stats(0).unwrap();
    assert_eq!((s.written, s.entries), (1, 1));
    assert!(s.balanced());
}

/// A tracer of two CPUs and no events whose top level has 1 KiB rings in `mode`
/// (and a snapshot buffer if `snapshot`), within 1 MiB; the caller is CPU 0.
fn two_cpus(mode: Mode, snapshot: bool) -> crate::Tracer<Probe> {
    use crate::{InstanceConfig, Limits, Tracer};
    HostPlatform::set_cpu(0);
    let cfg = InstanceConfig { bytes_per_cpu: 1024, mode, snapshot };
    let limits = Limits { max_instances: 2, max_total_bytes: 1 << 20 };
    Tracer::new(Probe::default(), 2, &[], limits, cfg).unwrap()
}

/// One CPU's ring is resized or emptied alone; the others keep their records.
#[test]
fn one_cpus_ring_is_resized_or_cleared_alone() {
    let t = two_cpus(Mode::Overwrite, true);
    let top = t.top();
    for cpu in 0..2 {
        HostPlatform::set_cpu(cpu);
        top.write_marker("a").unwrap();
        top.write_marker("b").unwrap();
    }
    HostPlatform::set_cpu(0);
    let before = t.memory().unwrap().0;
    top.resize_cpu(1, 4096).unwrap();
    assert_eq!((top.bytes_of_cpu(0), top.bytes_of_cpu(1)), (Some(1024), Some(4096)));
    assert_eq!(t.memory().unwrap().0, before + 2 * 3072, "live and snapshot ring of CPU 1");
    assert_eq!(top.stats(0).unwrap().entries, 2, "CPU 0 keeps its records");
    assert_eq!(top.stats(1).unwrap().entries, 0);
    top.clear_cpu(0).unwrap();
    assert_eq!(top.stats(0).unwrap().entries, 0);
    HostPlatform::set_cpu(1);
    top.write_marker("c").unwrap();
    HostPlatform::set_cpu(0);
    assert_eq!(top.stats(1).unwrap().entries, 1);
    top.set_cpumask(0b01).unwrap();
    HostPlatform::set_cpu(1);
    assert_eq!(top.write_marker("masked"), Err(WriteError::NotTaken), "EBADF");
    HostPlatform::set_cpu(0);
    top.write_marker("kept").unwrap();
    let s1 = top.stats(1).unwrap();
    assert_eq!((s1.entries, s1.written), (1, 1), "CPU 1 is masked: not recorded, not counted");
    assert_eq!(top.stats(0).unwrap().entries, 1);
    assert_eq!(top.cpumask(), 1);
    let absent = Err(crate::InstanceError::Buffer(crate::Error::BadCpu));
    assert_eq!(top.set_cpumask(0b101), absent, "a bit for CPU 2, which does not exist");
    assert_eq!(top.cpumask(), 1, "refused: unchanged");
    assert!(top.resize_cpu(2, 4096).is_err(), "no CPU 2");
    assert!(top.clear_cpu(2).is_err());
    // The size a ring has already (asked as it is, or as a size it rounds to) keeps
    // what it holds, as ftrace's resize does.
    top.resize_cpu(1, 4000).unwrap();
    top.resize_cpu(0, 1024).unwrap();
    assert_eq!((top.stats(0).unwrap().entries, top.stats(1).unwrap().entries), (1, 1));
    top.resize(4096).unwrap();
    top.write_marker("after").unwrap();
    top.resize(4096).unwrap();
    assert_eq!(top.stats(0).unwrap().entries, 1, "the same size again: kept");
}

/// A snapshot buffer allocated after one CPU's ring was resized takes every CPU's
/// size from the live buffer, so a snapshot leaves each CPU's size as it was (the
/// spare once took the instance's size for every CPU, and a swap changed them).
#[test]
fn a_snapshot_allocated_after_one_cpus_resize_keeps_each_cpus_size() {
    let t = two_cpus(Mode::Overwrite, false);
    let top = t.top();
    top.resize_cpu(1, 4096).unwrap();
    let before = t.memory().unwrap().0;
    top.snapshot_alloc().unwrap();
    assert_eq!(
        t.memory().unwrap().0,
        before + 1024 + 4096,
        "the spare is shaped like the live set"
    );
    for _ in 0..2 {
        top.snapshot_take().unwrap();
        assert_eq!((top.bytes_of_cpu(0), top.bytes_of_cpu(1)), (Some(1024), Some(4096)));
    }
}

/// `trace_clock`: a clock change empties the buffers (live and snapshot) and keeps
/// each CPU's size, the mode and the recording switch; `global` never goes behind a
/// reading of another CPU where `local` follows each CPU's own clock; `counter`
/// orders the records of every CPU exactly; `x86-tsc` is the platform's cycles.
#[test]
#[cfg_attr(miri, ignore = "single-threaded safe code, run natively (19 s under Miri)")]
fn clocks_stamp_records_as_they_say_and_a_change_empties_the_buffers() {
    use crate::Clock;
    let t = two_cpus(Mode::Discard, true);
    let top = t.top();
    top.resize_cpu(1, 4096).unwrap();
    // Each CPU's own clock: CPU 1's runs 1,000 ns behind CPU 0's.
    let write_on = |cpu, ns| {
        HostPlatform::set_cpu(cpu);
        HostPlatform::set_clock(ns);
        top.write_marker("m").unwrap();
        HostPlatform::set_cpu(0);
    };
    let stamps = || {
        let live = top.recorder();
        let mut it = live.live().merged_iter().unwrap();
        let mut out = Vec::new();
        while let Some(r) = it.next_record() {
            out.push((r.cpu, r.ts));
        }
        out
    };
    assert_eq!(top.clock(), Clock::Local);
    write_on(0, 2000);
    write_on(1, 1000);
    assert_eq!(stamps(), [(1, 1000), (0, 2000)], "local: each CPU's own clock");

    top.set_tracing(false);
    top.set_clock(Clock::Global).unwrap();
    assert_eq!(top.clock(), Clock::Global);
    assert!(stamps().is_empty(), "the change empties the live buffer");
    assert_eq!((top.bytes_of_cpu(0), top.bytes_of_cpu(1)), (Some(1024), Some(4096)));
    assert_eq!(top.mode(), Mode::Discard);
    assert!(!top.tracing(), "the recording switch is kept");
    top.set_tracing(true);
    write_on(0, 3000);
    write_on(1, 2500);
    // CPU 1's record, written after CPU 0's, is not stamped behind it (its own clock
    // is). The global clock's word is the process's: tests running alongside may
    // have raised it, which moves both stamps up.
    let global = stamps();
    let on = |cpu| global.iter().find(|&&(c, _)| c == cpu).map(|&(_, ts)| ts).unwrap();
    assert_eq!(global.len(), 2);
    assert!(on(0) >= 3000 && on(1) >= on(0), "global: never behind: {global:?}");

    top.snapshot_take().unwrap();
    top.set_clock(Clock::Counter).unwrap();
    let recorder = top.recorder();
    let spare = recorder.snapshot().unwrap();
    assert!((0..2).all(|cpu| spare.stats(cpu).unwrap().entries == 0), "the snapshot too");
    assert_eq!(spare.clock(), Clock::Counter);
    for cpu in [1, 0, 0, 1, 0] {
        write_on(cpu, 5);
    }
    let counted = stamps();
    let cpus: Vec<usize> = counted.iter().map(|&(cpu, _)| cpu).collect();
    assert_eq!(cpus, [1, 0, 0, 1, 0], "counter: the order written, across CPUs");
    // Strictly increasing (with gaps if tests alongside count too).
    assert!(counted.windows(2).all(|w| w[0].1 < w[1].1), "{counted:?}");
    assert!(top.clock_now() >= counted[4].1, "now reads the count");
    // The same clock again changes nothing.
    top.set_clock(Clock::Counter).unwrap();
    assert_eq!(stamps(), counted);
    // The cycle counter (the host platform's is its clock): counts, unscaled.
    top.set_clock(Clock::X86Tsc).unwrap();
    write_on(1, 777);
    assert_eq!(stamps(), [(1, 777)]);
    // The jiffies clock: the host platform's counts 10 ms periods of its clock.
    top.set_clock(Clock::Uptime).unwrap();
    write_on(0, 2_345_000_000);
    assert_eq!(stamps(), [(0, 234)]);
    // Its aliases of the platform's clock read it as `local` does.
    for clock in [Clock::Perf, Clock::Mono, Clock::MonoRaw, Clock::Boot] {
        top.set_clock(clock).unwrap();
        write_on(1, 4_000 + clock.code());
        assert_eq!(stamps(), [(1, 4_000 + clock.code())], "{clock:?}");
    }
    let in_ns = [true, true, false, false, true, true, true, true, false];
    assert!(Clock::ALL.iter().map(|c| c.in_ns()).eq(in_ns));
    let codes = [0, 1, 2, 4, 5, 6, 7, 8, 3];
    assert!(Clock::ALL.iter().map(|c| c.code()).eq(codes), "a dump's codes keep their meaning");
    let names = Clock::ALL.map(Clock::name);
    assert!(names.iter().all(|n| Clock::from_name(n).is_some_and(|c| c.name() == *n)));
    assert!(Clock::ALL.iter().all(|&c| Clock::from_code(c.code()) == Some(c)));
}
