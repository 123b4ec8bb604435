//! Unit tests of the buffer set, readers and recorder, single-threaded, including
//! simulated interrupts (nested writers) at every point of the write path.

use super::util::{Probe, buffer, consume, events, nest};
use crate::field::Sink;
use crate::sync::{Point, hook};
use crate::{
    Error, HostPlatform, Mode, Platform, ring::Buffer, ring::Config, ring::MAX_EVENT_ID,
    ring::ReadScratch, ring::Recorder, ring::WriteError,
};
use std::rc::Rc;
use std::vec;
use std::vec::Vec;

#[test]
fn write_then_read_back_in_order() {
    let b = buffer(1, 4096, Mode::Overwrite);
    b.write(7, &1u64.to_le_bytes()).unwrap();
    b.write(8, b"hello, ring").unwrap();
    b.write(9, &[]).unwrap();
    let want = vec![(7, 1u64.to_le_bytes().to_vec()), (8, b"hello, ring".to_vec()), (9, vec![])];
    assert_eq!(events(&b, 0), want);
    // The iterator does not consume: a second pass sees the same.
    assert_eq!(events(&b, 0), want);
    let got = consume(&b, 0);
    assert_eq!(got, want.iter().map(|(i, p)| (*i, p.clone(), 0)).collect::<Vec<_>>());
    assert!(events(&b, 0).is_empty());
    let s = b.stats(0).unwrap();
    assert_eq!((s.written, s.entries, s.read, s.overrun, s.dropped), (3, 0, 3, 0, 0));
    assert!(s.balanced());
}

#[test]
fn timestamps_are_reconstructed_across_hi_changes() {
    let b = buffer(1, 4096, Mode::Overwrite);
    let mut want = Vec::new();
    for (i, t) in [5u64, 6, (1 << 32) - 1, 1 << 32, (3 << 36) + 17, 1 << 50, (1 << 60) - 1]
        .into_iter()
        .enumerate()
    {
        HostPlatform::set_clock(t);
        b.write(i as u16, &[]).unwrap();
        want.push(t);
    }
    let mut it = b.iter(0).unwrap();
    let mut got = Vec::new();
    while let Some(r) = it.next_record() {
        got.push(r.ts);
    }
    assert_eq!(got, want);
    let mut c = b.consumer(0).unwrap();
    for t in want {
        assert_eq!(c.next_record().unwrap().unwrap().ts, t);
    }
}

/// A platform whose context is whatever the test last set.
#[derive(Clone)]
struct Contextual(std::sync::Arc<std::sync::Mutex<crate::Context>>);

impl Platform for Contextual {
    fn cpu(&self) -> usize {
        0
    }

    fn now(&self) -> u64 {
        HostPlatform.now()
    }

    fn may_wait(&self) -> bool {
        true
    }

    fn context(&self) -> crate::Context {
        *self.0.lock().unwrap()
    }
}

#[test]
fn records_keep_the_writers_context() {
    use crate::{Activity, Context};
    let platform = Contextual(std::sync::Arc::new(std::sync::Mutex::new(Context::TASK)));
    let b = Buffer::new(platform, Config { cpus: 1, bytes_per_cpu: 4096, mode: Mode::Overwrite })
        .unwrap();
    let contexts = [
        Context::new(Activity::Idle, false),
        Context::new(Activity::Irq { depth: 2 }, true),
        Context::new(Activity::Nmi { in_irq: true }, true),
        Context::new(Activity::Task, true),
    ];
    for (i, &c) in contexts.iter().enumerate() {
        *b.platform().0.lock().unwrap() = c;
        b.write(i as u16, &[i as u8; 9]).unwrap();
    }
    let mut it = b.iter(0).unwrap();
    let mut seen = Vec::new();
    while let Some(r) = it.next_record() {
        seen.push(r.context);
    }
    assert_eq!(seen, contexts);
    let mut c = b.consumer(0).unwrap();
    for want in contexts {
        assert_eq!(c.next_record().unwrap().unwrap().context, want);
    }
}

#[test]
fn overwrite_mode_keeps_the_newest_and_counts_overrun() {
    // 64 words; each record 3 words (16-byte payload).
    let b = buffer(1, 512, Mode::Overwrite);
    for i in 0..100u16 {
        b.write(i, &[i as u8; 16]).unwrap();
    }
    let ev = events(&b, 0);
    let s = b.stats(0).unwrap();
    assert_eq!(s.written, 100);
    assert_eq!(s.entries as usize, ev.len());
    assert!(s.overrun > 0 && s.dropped == 0);
    assert!(s.balanced());
    // The newest records survive, contiguous and in order.
    let ids: Vec<u16> = ev.iter().map(|e| e.0).collect();
    let first = ids[0];
    assert_eq!(ids, (first..100).collect::<Vec<_>>());
    assert_eq!(s.overrun, first as u64);
    // The consuming reader reports the overwritten events once, before the first
    // record it returns (like trace_pipe, losses since the last consumption).
    let got = consume(&b, 0);
    assert_eq!(got.len(), ev.len());
    assert_eq!(got[0].2, s.overrun);
    assert!(got[1..].iter().all(|g| g.2 == 0));
}

#[test]
fn consumer_reports_lost_events() {
    let b = buffer(1, 512, Mode::Overwrite);
    let mut c = b.consumer(0).unwrap();
    for i in 0..100u16 {
        b.write(i, &[0; 16]).unwrap();
    }
    let first = c.next_record().unwrap().unwrap();
    assert_eq!(first.lost, first.id as u64);
    assert_eq!(b.stats(0).unwrap().overrun, first.id as u64);
    assert_eq!(c.next_record().unwrap().unwrap().lost, 0);
}

#[test]
fn discard_mode_drops_the_new_and_counts_dropped() {
    let b = buffer(1, 512, Mode::Discard);
    let mut ok = 0;
    for i in 0..100u16 {
        match b.write(i, &[0; 16]) {
            Ok(()) => ok += 1,
            Err(WriteError::Dropped) => {}
            Err(e) => panic!("{e:?}"),
        }
    }
    let ids: Vec<u16> = events(&b, 0).iter().map(|e| e.0).collect();
    assert_eq!(ids, (0..ok).collect::<Vec<_>>());
    let s = b.stats(0).unwrap();
    assert_eq!((s.written, s.entries, s.dropped, s.overrun), (100, ok as u64, 100 - ok as u64, 0));
    // Reading makes room again.
    assert_eq!(consume(&b, 0).len(), ok as usize);
    b.write(500, &[1; 16]).unwrap();
    assert_eq!(events(&b, 0), vec![(500, vec![1; 16])]);
    assert!(b.stats(0).unwrap().balanced());
}

#[test]
fn mode_switches_at_run_time() {
    let b = buffer(1, 512, Mode::Discard);
    while b.write(1, &[0; 16]).is_ok() {}
    b.set_mode(Mode::Overwrite);
    assert_eq!(b.mode(), Mode::Overwrite);
    b.write(2, &[0; 16]).unwrap();
    let s = b.stats(0).unwrap();
    assert_eq!((s.dropped, s.overrun > 0), (1, true));
    assert!(s.balanced());
    assert_eq!(events(&b, 0).last().unwrap().0, 2);
}

#[test]
fn misuse_gets_typed_errors() {
    HostPlatform::set_cpu(0);
    let cfg = |cpus, bytes| Config { cpus, bytes_per_cpu: bytes, mode: Mode::Overwrite };
    assert_eq!(Buffer::new(HostPlatform, cfg(1, 0)).err(), Some(Error::ZeroSize));
    assert_eq!(Buffer::new(HostPlatform, cfg(0, 64)).err(), Some(Error::ZeroSize));
    assert_eq!(Buffer::new(HostPlatform, cfg(1, usize::MAX)).err(), Some(Error::TooBig));
    let mut b = buffer(2, 256, Mode::Overwrite);
    assert_eq!(b.write(1, &[0; 300]), Err(WriteError::TooLarge));
    assert_eq!(b.write(1, &[0; 5000]), Err(WriteError::TooLarge));
    assert_eq!(b.write(MAX_EVENT_ID + 1, &[]), Err(WriteError::ReservedId));
    assert_eq!(b.iter(2).err(), Some(Error::BadCpu));
    assert_eq!(b.stats(5).err(), Some(Error::BadCpu));
    HostPlatform::set_cpu(2);
    assert_eq!(b.write(1, &[]), Err(WriteError::BadCpu));
    HostPlatform::set_cpu(0);
    {
        let _c = b.consumer(0).unwrap();
        assert_eq!(b.consumer(0).err(), Some(Error::Busy));
    }
    assert!(b.consumer(0).is_ok());
    assert_eq!(b.resize(1024), Err(Error::Recording));
    b.write(3, &[]).unwrap();
    b.set_recording(false);
    assert_eq!(b.write(3, &[]), Err(WriteError::Off));
    assert_eq!(b.resize(0), Err(Error::ZeroSize));
    assert_eq!(events(&b, 0).len(), 1, "a failed resize changes nothing");
    b.resize(1024).unwrap();
    assert_eq!(b.bytes_per_cpu(), 1024);
    assert!(events(&b, 0).is_empty());
    assert_eq!(b.stats(0).unwrap().written, 0, "writes while off are not counted");
}

#[test]
fn largest_record_fits_exactly() {
    let b = buffer(1, 64, Mode::Overwrite); // 8 words: anchor 2 + header 1 + 5 payload
    assert_eq!(b.max_payload(), 40);
    for i in 0..5 {
        b.write(i, &[i as u8; 40]).unwrap();
    }
    assert_eq!(events(&b, 0), vec![(4, vec![4; 40])]);
    assert_eq!(b.write(1, &[0; 41]), Err(WriteError::TooLarge));
    assert!(b.stats(0).unwrap().balanced());
}

#[test]
fn clear_empties_and_zeroes() {
    let mut b = buffer(1, 512, Mode::Overwrite);
    for i in 0..50 {
        b.write(i, &[0; 8]).unwrap();
    }
    b.clear().unwrap();
    assert!(events(&b, 0).is_empty());
    assert_eq!(b.stats(0).unwrap().written, 0);
    b.write(1, b"x").unwrap();
    assert_eq!(events(&b, 0), vec![(1, b"x".to_vec())]);
}

#[test]
fn records_fill_in_place_and_abandon_cleanly() {
    let b = buffer(1, 1024, Mode::Overwrite);
    b.write_with(5, 19, |r| {
        r.put_u64(0x0102_0304_0506_0708);
        r.put(&[9, 10, 11]);
        assert_eq!(r.room(), 8);
        r.put_u64(u64::MAX);
        r.put(&[0; 9]); // nothing fits any more: cut, never past the record
    })
    .unwrap();
    let mut want = 0x0102_0304_0506_0708u64.to_le_bytes().to_vec();
    want.extend([9, 10, 11]);
    want.extend([0xff; 8]);
    // The code filling it unwinds: not an event, not counted, the ring not wedged.
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        b.write_with(6, 8, |r| {
            r.put_u64(1);
            panic!("filling failed");
        })
    }));
    assert!(unwound.is_err());
    // Partly filled: the rest is zero.
    b.write_with(7, 12, |r| r.put(&[1])).unwrap();
    let mut z = vec![0u8; 12];
    z[0] = 1;
    assert_eq!(events(&b, 0), vec![(5, want), (7, z)]);
    let s = b.stats(0).unwrap();
    assert_eq!((s.written, s.entries), (2, 2));
    assert!(s.balanced());
}

#[test]
#[cfg_attr(miri, ignore = "single-threaded safe code, run natively (6 s under Miri)")]
fn merge_orders_all_cpus_by_timestamp() {
    let b = buffer(3, 4096, Mode::Overwrite);
    // Interleave CPUs with a shared, increasing clock.
    let mut t = 10;
    let order = [0usize, 2, 1, 1, 0, 2, 2, 0, 1];
    for (i, &cpu) in order.iter().enumerate() {
        HostPlatform::set_cpu(cpu);
        HostPlatform::set_clock(t);
        t += 3;
        b.write(i as u16, &[cpu as u8]).unwrap();
    }
    HostPlatform::set_cpu(0);
    let mut m = b.merged_iter().unwrap();
    let mut got = Vec::new();
    while let Some(r) = m.next_record() {
        assert_eq!(r.payload, &[r.cpu as u8]);
        got.push((r.id, r.cpu));
    }
    let want: Vec<_> = order.iter().enumerate().map(|(i, &c)| (i as u16, c)).collect();
    assert_eq!(got, want);
    // The dump's merge, over one payload buffer, gives the same, all CPUs or one.
    let mut scratch = ReadScratch::new(3).unwrap();
    let mut read = |cpu| {
        let mut got = Vec::new();
        b.for_each_record_with(
            &mut scratch,
            cpu,
            || {},
            |r| {
                assert_eq!(r.payload, &[r.cpu as u8]);
                got.push((r.id, r.cpu));
                true
            },
        )
        .unwrap();
        got
    };
    assert_eq!(read(None), want);
    assert_eq!(read(Some(1)), want.iter().copied().filter(|&(_, c)| c == 1).collect::<Vec<_>>());
    assert_eq!(
        b.for_each_record_with(&mut ReadScratch::new(2).unwrap(), None, || {}, |_| true),
        Err(Error::BadCpu)
    );
    assert_eq!(b.for_each_record_with(&mut scratch, Some(3), || {}, |_| true), Err(Error::BadCpu));
    let mut m = b.merged_consumer().unwrap();
    let mut n = 0;
    let mut last = 0;
    while let Some(r) = m.next_record() {
        assert!(r.ts >= last);
        last = r.ts;
        n += 1;
    }
    assert_eq!(n, order.len());
    assert!(events(&b, 1).is_empty());
}

#[test]
fn the_dumps_merge_skips_a_record_overwritten_after_it_read_its_header() {
    let b = buffer(2, 1024, Mode::Overwrite);
    HostPlatform::set_cpu(1);
    HostPlatform::set_clock(10);
    b.write(1, &[1; 24]).unwrap();
    HostPlatform::set_cpu(0);
    HostPlatform::set_clock(20);
    b.write(2, &[2; 24]).unwrap();
    let mut scratch = ReadScratch::new(2).unwrap();
    let mut got = Vec::new();
    b.for_each_record_with(
        &mut scratch,
        None,
        || {},
        |r| {
            got.push((r.id, r.payload.to_vec()));
            // CPU 0's record, whose header the merge has read to choose this one first,
            // is overwritten before its turn.
            for t in 0..100 {
                HostPlatform::set_clock(30 + t);
                b.write(99, &[0xee; 24]).unwrap();
            }
            true
        },
    )
    .unwrap();
    assert_eq!(got, [(1, vec![1; 24])], "only the record still intact, none torn");
}

/// Every point of the outer writer where an interrupt can land.
const POINTS: [Point; 7] = [
    Point::Entered,
    Point::Reserving,
    Point::Claimed,
    Point::Reserved,
    Point::Filled,
    Point::Publishing,
    Point::Committed,
];

/// Runs `outer` with a simulated interrupt that writes `inner` at the `k`-th point hit
/// (counting every point, so the loops inside reserve are covered too). Returns whether
/// it fired and the point.
fn with_interrupt(
    b: &Rc<Buffer<Probe>>,
    k: usize,
    inner: Vec<(u16, Vec<u8>)>,
    outer: impl FnOnce(),
) -> Option<Point> {
    let fired = Rc::new(std::cell::Cell::new(None));
    let (bb, f) = (b.clone(), fired.clone());
    let mut seen = 0;
    let mut inner = Some(inner);
    hook::set(move |p| {
        if seen == k
            && let Some(ws) = inner.take()
        {
            f.set(Some(p));
            for (id, payload) in ws {
                let _ = bb.write(id, &payload);
            }
        }
        seen += 1;
    });
    outer();
    hook::clear();
    fired.get()
}

#[test]
#[cfg_attr(miri, ignore = "single-threaded safe code, run natively (12 s under Miri)")]
fn nested_writer_at_every_point_finishes_first_and_both_are_kept() {
    // Until a write passes no more points (every one of them struck once).
    for k in 0.. {
        let b = Rc::new(buffer(1, 4096, Mode::Overwrite));
        b.write(1, b"before").unwrap();
        let at = with_interrupt(&b, k, vec![(3, b"irq".to_vec())], || {
            b.write(2, b"outer").unwrap();
        });
        let Some(at) = at else { break };
        let ids: Vec<u16> = events(&b, 0).iter().map(|e| e.0).collect();
        // An interrupt before the reservation lands first; after it, second.
        let want = match at {
            Point::Entered | Point::Reserving | Point::Reclaiming => vec![1, 3, 2],
            _ => vec![1, 2, 3],
        };
        assert_eq!(ids, want, "interrupt at {at:?}");
        let s = b.stats(0).unwrap();
        assert_eq!((s.written, s.entries), (3, 3), "at {at:?}");
        // Timestamps never decrease in ring order.
        let mut it = b.iter(0).unwrap();
        let mut last = 0;
        while let Some(r) = it.next_record() {
            assert!(r.ts >= last, "at {at:?}");
            last = r.ts;
        }
    }
}

#[test]
fn nested_writer_in_full_ring_counts_commit_overrun() {
    // 16 words. The outer record takes 10 (anchor + 8 payload words); an interrupt
    // after its reservation needs 9 more: only the uncommitted outer record could
    // make room, so the interrupt's event is a commit overrun.
    let b = Rc::new(buffer(1, 128, Mode::Overwrite));
    let at = with_interrupt(&b, 3, vec![(9, vec![0; 64])], || {
        b.write(2, &[1; 56]).unwrap();
    });
    assert_eq!(at, Some(Point::Reserved));
    let s = b.stats(0).unwrap();
    assert_eq!((s.written, s.entries, s.dropped, s.commit_overrun), (2, 1, 1, 1));
    assert!(s.balanced());
    assert_eq!(events(&b, 0), vec![(2, vec![1; 56])]);
}

#[test]
#[cfg_attr(miri, ignore = "single-threaded safe code, run natively (15 s under Miri)")]
fn interrupt_during_reclaim_and_commit_keeps_accounting_exact() {
    // A small full ring: every write reclaims; interrupts at each point also write,
    // until a write passes no more points.
    for k in 0.. {
        let b = Rc::new(buffer(1, 256, Mode::Overwrite));
        for i in 0..40 {
            b.write(i, &[0; 16]).unwrap();
        }
        let irq: Vec<_> = (100..103).map(|i| (i, vec![1; 24])).collect();
        let at = with_interrupt(&b, k, irq, || {
            let _ = b.write(50, &[2; 16]);
        });
        if at.is_none() {
            break;
        }
        let s = b.stats(0).unwrap();
        assert_eq!(s.written, 44, "at {at:?}");
        assert!(s.balanced(), "{s:?} at {at:?}");
        let mut c = b.consumer(0).unwrap();
        let mut n = 0;
        while c.next_record().unwrap().is_some() {
            n += 1;
        }
        assert_eq!(n, s.entries);
        let extra = [Point::Walking, Point::Reclaiming, Point::Bump];
        assert!(POINTS.contains(&at.unwrap()) || extra.contains(&at.unwrap()));
    }
}

/// A consumer whose oldest record is overwritten between its load of the tail and its
/// copy reads bytes that are no header: it must see the tail moved and read the new
/// oldest record, not mark the ring corrupt.
#[test]
fn a_record_overwritten_under_the_consumer_is_skipped_not_taken_for_corruption() {
    let b = Rc::new(buffer(1, 256, Mode::Overwrite));
    for i in 0..20 {
        b.write(i, &[0; 16]).unwrap();
    }
    let bb = b.clone();
    // Longer records, their payload bytes all ones: where the oldest header was, a
    // payload word now lies.
    hook::once(Point::Peeking, move || {
        for i in 100..110 {
            bb.write(i, &[0xff; 40]).unwrap();
        }
    });
    let mut c = b.consumer(0).unwrap();
    let first = c.next_record();
    hook::clear();
    let first = first.expect("the consumer read on, the ring is not corrupt").expect("a record");
    let mut ids = vec![first.id];
    while let Some(r) = c.next_record().unwrap() {
        ids.push(r.id);
    }
    assert!(ids.contains(&109), "the newest record is read: {ids:?}");
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "in write order: {ids:?}");
    drop(c);
    let s = b.stats(0).unwrap();
    assert!(s.balanced(), "{s:?}");
    assert_eq!(s.written, 30);
}

#[test]
fn writers_nest_several_levels_deep() {
    let b = Rc::new(buffer(1, 4096, Mode::Overwrite));
    let levels = crate::ring::MAX_DEPTH as u16; // the outer writer is depth 0
    nest(b.clone(), 1, levels);
    b.write(1, b"outer").unwrap();
    hook::clear();
    let s = b.stats(0).unwrap();
    // Depths 0..MAX_DEPTH write; the one nested deeper is dropped and counted.
    assert_eq!((s.written, s.entries, s.dropped), (levels as u64 + 1, levels as u64, 1));
    assert!(s.balanced());
    // Each interrupt landed after its outer writer's reservation: ring order is
    // outermost first.
    let ids: Vec<u16> = events(&b, 0).iter().map(|e| e.0).collect();
    let mut want = vec![1];
    want.extend(101..100 + levels);
    assert_eq!(ids, want);
}

#[test]
fn recorder_swap_takes_a_snapshot() {
    HostPlatform::set_cpu(0);
    HostPlatform::set_clock(1);
    let cfg = Config { cpus: 2, bytes_per_cpu: 1024, mode: Mode::Overwrite };
    let r = Recorder::new(Probe::default(), cfg, false).unwrap();
    r.write(1, b"a").unwrap();
    assert_eq!(r.swap(), Err(Error::NoSpare));
    assert!(r.snapshot().is_none());
    // A recorder with a spare takes over the live set (and its record).
    let r = r.with_spare().unwrap();
    r.write(2, b"b").unwrap();
    r.swap().unwrap();
    r.write(3, b"c").unwrap();
    let snap = r.snapshot().unwrap();
    assert_eq!(events(snap, 0), vec![(1, b"a".to_vec()), (2, b"b".to_vec())]);
    assert_eq!(events(r.live(), 0), vec![(3, b"c".to_vec())]);
    assert!(r.live().is_recording());
    r.clear_snapshot(None).unwrap();
    assert!(events(r.snapshot().unwrap(), 0).is_empty());
    // Clearing needs no recording switch: writes pause for the grace period.
    r.clear().unwrap();
    assert!(events(r.live(), 0).is_empty());
    assert!(r.live().is_recording());
    r.live().set_recording(false);
    assert_eq!(r.write_with(4, 8, |_| ()), Err(WriteError::Off));
    assert_eq!(r.write(4, &[]), Err(WriteError::Off));
    r.live().set_recording(true);
    // Swapping or clearing from inside a write on this CPU would wait for itself.
    r.write_with(4, 8, |_| {
        assert_eq!(r.swap(), Err(Error::WouldDeadlock));
        assert_eq!(r.clear(), Err(Error::WouldDeadlock));
    })
    .unwrap();
    let r = r.resized(4096).unwrap();
    assert_eq!(r.live().bytes_per_cpu(), 4096);
    assert_eq!(r.snapshot().unwrap().bytes_per_cpu(), 4096);
    assert!(r.live().is_recording(), "a resize keeps the recording switch");
    assert!(events(r.live(), 0).is_empty(), "a resize starts empty");
    let r = r.without_spare();
    assert!(r.snapshot().is_none());
    assert_eq!(HostPlatform.cpu(), 0);
}

/// Runs `innermost` inside `n` nested holds of `buffer`, each but the innermost
/// checked taken; `innermost` is told whether its own was.
fn nested_holds(buffer: &Buffer<Probe>, n: usize, innermost: &mut dyn FnMut(bool)) {
    buffer.with_writes_held(|held| {
        if n == 1 {
            innermost(held);
        } else {
            assert!(held);
            nested_holds(buffer, n - 1, innermost);
        }
    });
}

/// A hold (`pause-on-trace`) keeps writes out, uncounted, while its closure runs;
/// holds nest, the recording switch is untouched, a 64th hold is refused, and a
/// snapshot swap leaves the hold with the set it was taken on.
#[test]
fn a_hold_keeps_writes_out_while_its_closure_runs() {
    HostPlatform::set_cpu(0);
    let cfg = Config { cpus: 1, bytes_per_cpu: 1024, mode: Mode::Overwrite };
    let r = Recorder::new(Probe::default(), cfg, true).unwrap();
    r.write(1, b"a").unwrap();
    r.live().with_writes_held(|held| {
        assert!(held);
        assert_eq!(r.write(2, b"b"), Err(WriteError::Off));
        assert!(r.live().is_recording(), "the switch is untouched");
        r.live().with_writes_held(|held| assert!(held));
        assert_eq!(r.write(2, b"b"), Err(WriteError::Off), "the outer hold is left");
        // The switch off and back on while held: still held.
        r.live().set_recording(false);
        r.live().set_recording(true);
        assert_eq!(r.write(2, b"b"), Err(WriteError::Off));
    });
    r.write(3, b"c").unwrap();
    assert_eq!(events(r.live(), 0), vec![(1, b"a".to_vec()), (3, b"c".to_vec())]);
    assert_eq!(r.live().stats(0).unwrap().written, 2, "held writes are not counted");
    // 63 at once; the 64th is refused and changes nothing.
    nested_holds(r.live(), 64, &mut |held| {
        assert!(!held, "a 64th hold");
        assert_eq!(r.write(4, b"d"), Err(WriteError::Off), "63 holds are still out");
    });
    r.write(5, b"e").unwrap();
    // A swap: the hold stays with the old live set, now the snapshot.
    r.live().with_writes_held(|_| {
        r.swap().unwrap();
        r.write(6, b"f").unwrap();
    });
    assert_eq!(events(r.live(), 0), vec![(6, b"f".to_vec())]);
    r.write(7, b"g").unwrap();
    assert_eq!(r.live().stats(0).unwrap().written, 2);
}

/// A panic lets writes in whatever holds are out (the readers holding them never
/// return); a hold taken before and dropped afterwards counts out nothing, the
/// switch stays as it was, and holds taken later work as before.
#[test]
fn released_holds_let_writes_in_and_count_out_nothing_when_dropped() {
    HostPlatform::set_cpu(0);
    let cfg = Config { cpus: 1, bytes_per_cpu: 1024, mode: Mode::Overwrite };
    let r = Recorder::new(Probe::default(), cfg, true).unwrap();
    nested_holds(r.live(), 3, &mut |held| {
        assert!(held);
        assert_eq!(r.write(1, b"a"), Err(WriteError::Off));
        r.live().release_holds();
        r.write(2, b"b").unwrap();
        r.live().with_writes_held(|held| {
            assert!(held);
            assert_eq!(r.write(3, b"c"), Err(WriteError::Off), "a new hold keeps them out");
        });
        r.write(4, b"d").unwrap();
    });
    assert!(r.live().is_recording());
    r.write(5, b"e").unwrap();
    r.live().with_writes_held(|_| assert_eq!(r.write(6, b"f"), Err(WriteError::Off)));
    r.write(7, b"g").unwrap();
    let written: Vec<u16> = events(r.live(), 0).into_iter().map(|(id, _)| id).collect();
    assert_eq!(written, [2, 4, 5, 7]);
    // Off stays off.
    r.live().set_recording(false);
    r.live().with_writes_held(|_| r.live().release_holds());
    assert_eq!(r.write(8, b"h"), Err(WriteError::Off));
    // A hold taken before the release and dropped after a later one was taken (two
    // readers, not nested) leaves the later one in place.
    r.live().set_recording(true);
    let before = r.live().hold().unwrap();
    r.live().release_holds();
    let since = r.live().hold().unwrap();
    drop(before);
    assert_eq!(r.write(9, b"i"), Err(WriteError::Off), "the hold taken since stays");
    drop(since);
    r.write(10, b"j").unwrap();
}

#[test]
fn clear_is_all_or_nothing_while_a_consumer_reads() {
    HostPlatform::set_cpu(0);
    let cfg = Config { cpus: 2, bytes_per_cpu: 1024, mode: Mode::Overwrite };
    let r = Recorder::new(Probe::default(), cfg, true).unwrap();
    r.write(1, b"cpu0").unwrap();
    HostPlatform::set_cpu(1);
    r.write(2, b"cpu1").unwrap();
    HostPlatform::set_cpu(0);
    r.live().set_recording(false);
    let c = r.live().consumer(1).unwrap();
    assert_eq!(r.clear(), Err(Error::Busy));
    // Nothing changed on either CPU.
    assert_eq!(events(r.live(), 0), vec![(1, b"cpu0".to_vec())]);
    assert_eq!(events(r.live(), 1), vec![(2, b"cpu1".to_vec())]);
    drop(c);
    r.clear().unwrap();
    assert!(events(r.live(), 0).is_empty() && events(r.live(), 1).is_empty());
    // An iterator made before a clear ends cleanly.
    r.live().set_recording(true);
    r.write(3, b"x").unwrap();
    let mut it = r.live().iter(0).unwrap();
    r.live().set_recording(false);
    r.clear().unwrap();
    assert!(it.next_record().is_none());
}

#[test]
fn stats_report_bytes_and_oldest_timestamp() {
    let b = buffer(1, 1024, Mode::Overwrite);
    HostPlatform::set_clock(500);
    b.write(1, &[0; 16]).unwrap(); // anchor 2 + 3 words
    b.write(2, &[0; 3]).unwrap(); // 2 words
    let s = b.stats(0).unwrap();
    assert_eq!((s.bytes, s.capacity, s.oldest_ts), (7 * 8, 1024, Some(500)));
    assert!(s.balanced());
}

#[test]
fn corruption_turns_the_ring_off_and_says_so() {
    let mut b = buffer(1, 1024, Mode::Overwrite);
    b.write(1, &[1; 16]).unwrap();
    b.write(2, &[2; 16]).unwrap();
    // Break the second record's header (an anchor precedes the first record: 2 + 3
    // words): make it claim a payload running past the commit position.
    let ring = b.ring(0).unwrap();
    ring.slot(5).store(
        crate::ring::record::header(
            crate::ring::record::Tag { id: 2, ctx: crate::Context::TASK },
            4000,
            0,
        ),
        crate::sync::Ordering::Relaxed,
    );
    let mut c = b.consumer(0).unwrap();
    assert_eq!(c.next_record().unwrap().map(|r| r.id), Some(1));
    assert_eq!(c.next_record().err(), Some(Error::Corrupt));
    drop(c);
    assert!(b.is_corrupt());
    assert_eq!(b.write(3, &[]), Err(WriteError::Corrupt));
    let mut it = b.iter(0).unwrap();
    assert!(it.next_record().is_none());
    // Clearing repairs it.
    b.clear().unwrap();
    assert!(!b.is_corrupt());
    b.write(4, b"ok").unwrap();
    assert_eq!(events(&b, 0), vec![(4, b"ok".to_vec())]);
}

/// A dump taken while a write on its CPU has reserved and not committed (a CPU a
/// panic stopped there) says what that write holds: the statistics count it as
/// written, and neither it nor what follows it can be read.
#[test]
#[cfg_attr(miri, ignore = "single-threaded safe code, run natively (9 s under Miri)")]
fn a_dump_inside_a_write_says_what_the_write_holds() {
    let t = super::trigger::tracer(&[]);
    t.top().write_marker("before").unwrap();
    let text = Rc::new(core::cell::RefCell::new(std::string::String::new()));
    let out = text.clone();
    hook::once(Point::Reserved, move || {
        let all = crate::tracer::DumpSelection::all(1);
        t.write_dump(&all, None, &mut *out.borrow_mut());
    });
    t.top().write_marker("stopped").unwrap();
    hook::clear();
    let text = text.borrow();
    let held = "# cpu0: a write in progress (or stopped) holds 24 bytes: it and the records \
                written after it cannot be read";
    assert!(text.contains(held), "{text}");
    assert!(text.contains("tracing_mark_write: before") && !text.contains("stopped\n"), "{text}");
    // Finished, it is read, and nothing is held.
    let mut after = std::string::String::new();
    t.write_dump(&crate::tracer::DumpSelection::all(1), None, &mut after);
    assert!(after.contains("tracing_mark_write: stopped") && !after.contains("holds"), "{after}");
}
