//! One test per loss or wedge found in the ring and its readers: each failed before
//! the fix it names and passes after.

use super::util::{buffer, consume};
use crate::field::Sink;
use crate::sync::{Point, hook};
use crate::{HostPlatform, Mode, ring::Buffer, ring::Config, ring::Recorder, ring::WriteError};
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
    let (bb, mut fired) = (b.clone(), false);
    hook::set(move |p| {
        if p == Point::Walking && !fired {
            fired = true;
            // Records of odd sizes shift the boundaries under the outer walk.
            for (i, len) in [(200, 40), (201, 8), (202, 56), (203, 24)] {
                bb.write(i, &vec![0xee; len]).unwrap();
            }
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

/// Writes one record at each `Reserved` point, `level` deep and below, up to `last`.
fn nest(b: Rc<Buffer<HostPlatform>>, level: u16, last: u16) {
    let mut fired = false;
    hook::set(move |p| {
        if p == Point::Reserved && !fired && level <= last {
            fired = true;
            nest(b.clone(), level + 1, last);
            let _ = b.write(100 + level, &[level as u8]);
        }
    });
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
    let r = Recorder::new(HostPlatform, cfg, true).unwrap();
    for i in 0..10 {
        r.write(i, b"x").unwrap();
    }
    r.clear().unwrap();
    r.write(11, b"y").unwrap();
    let s = r.live().stats(0).unwrap();
    assert_eq!((s.written, s.entries), (1, 1));
    assert!(s.balanced());
}

/// One CPU's ring is resized or emptied alone; the others keep their records.
#[test]
fn one_cpus_ring_is_resized_or_cleared_alone() {
    use crate::{InstanceConfig, Limits, Tracer};
    HostPlatform::set_cpu(0);
    let cfg = InstanceConfig { bytes_per_cpu: 1024, mode: Mode::Overwrite, snapshot: true };
    let limits = Limits { max_instances: 2, max_total_bytes: 1 << 20 };
    let t = Tracer::new(HostPlatform, 2, &[], limits, cfg).unwrap();
    let top = t.top();
    for cpu in 0..2 {
        HostPlatform::set_cpu(cpu);
        top.write_marker("a");
        top.write_marker("b");
    }
    HostPlatform::set_cpu(0);
    let before = t.memory().0;
    top.resize_cpu(1, 4096).unwrap();
    assert_eq!((top.bytes_of_cpu(0), top.bytes_of_cpu(1)), (Some(1024), Some(4096)));
    assert_eq!(t.memory().0, before + 2 * 3072, "live and snapshot ring of CPU 1");
    assert_eq!(top.stats(0).unwrap().entries, 2, "CPU 0 keeps its records");
    assert_eq!(top.stats(1).unwrap().entries, 0);
    top.clear_cpu(0).unwrap();
    assert_eq!(top.stats(0).unwrap().entries, 0);
    HostPlatform::set_cpu(1);
    top.write_marker("c");
    HostPlatform::set_cpu(0);
    assert_eq!(top.stats(1).unwrap().entries, 1);
    top.set_cpumask(0b01);
    HostPlatform::set_cpu(1);
    top.write_marker("masked");
    HostPlatform::set_cpu(0);
    top.write_marker("kept");
    let s1 = top.stats(1).unwrap();
    assert_eq!((s1.entries, s1.written), (1, 1), "CPU 1 is masked: not recorded, not counted");
    assert_eq!(top.stats(0).unwrap().entries, 1);
    assert_eq!(top.cpumask(), 1);
    assert!(top.resize_cpu(2, 4096).is_err(), "no CPU 2");
    assert!(top.clear_cpu(2).is_err());
}
