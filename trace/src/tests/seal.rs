//! A panic's seal of its CPU's rings (`Ring::seal`): what the writes it stopped hid
//! is published, and the words they left unwritten are never read as records.

use super::util::{Probe, buffer, events};
use crate::ring::{Buffer, RingStats};
use crate::sync::{Point, hook};
use crate::{HostPlatform, Mode};
use proptest::prelude::*;
use std::cell::RefCell;
use std::rc::Rc;
use std::vec;
use std::vec::Vec;

/// What an interrupt that sealed the ring saw: the writes the seal left out, the
/// events and the statistics.
type Seen = (u64, Vec<(u16, Vec<u8>)>, RingStats);

/// Writes id 2 with an interrupt at `point` that writes id 3 and seals, as a panic's
/// NMI records where the CPU was and seals. The seal is looked at inside the
/// interrupt: a panic never returns to the write it stopped. `None` if the write
/// passed no `point`.
fn sealed_at(b: &Rc<Buffer<Probe>>, point: Point) -> Option<Seen> {
    sealed_at_time(b, point, Some(b"nmi"), None)
}

/// [`sealed_at`], the interrupt writing `nmi` (if any) at clock reading `at` (if
/// given).
fn sealed_at_time(
    b: &Rc<Buffer<Probe>>,
    point: Point,
    nmi: Option<&'static [u8]>,
    at: Option<u64>,
) -> Option<Seen> {
    let seen = Rc::new(RefCell::new(None));
    let (inner, out) = (b.clone(), seen.clone());
    hook::once(point, move || {
        if let Some(at) = at {
            HostPlatform::set_clock(at);
        }
        if let Some(nmi) = nmi {
            inner.write(3, nmi).unwrap();
        }
        let stopped = inner.seal_cpu(0, |id| id < 100);
        *out.borrow_mut() = Some((stopped, events(&inner, 0), inner.stats(0).unwrap()));
    });
    b.write(2, b"stopped").unwrap();
    hook::clear();
    seen.take()
}

#[test]
fn a_seal_publishes_what_a_stopped_write_hid_and_leaves_the_write_out() {
    let b = Rc::new(buffer(1, 4096, Mode::Overwrite));
    b.write(1, b"before").unwrap();
    let (stopped, seen, s) = sealed_at(&b, Point::Reserved).unwrap();
    assert_eq!(stopped, 1);
    assert_eq!(seen, vec![(1, b"before".to_vec()), (3, b"nmi".to_vec())]);
    assert_eq!((s.written, s.entries, s.stopped, s.unreadable, s.unpublished), (2, 2, 1, 0, 0));
    assert!(s.balanced(), "{s:?}");
}

#[test]
fn a_seal_before_the_reservation_publishes_the_interrupts_records() {
    let b = Rc::new(buffer(1, 4096, Mode::Overwrite));
    b.write(1, b"before").unwrap();
    let (stopped, seen, s) = sealed_at(&b, Point::Entered).unwrap();
    assert_eq!(stopped, 0);
    assert_eq!(seen, vec![(1, b"before".to_vec()), (3, b"nmi".to_vec())]);
    assert!(s.balanced() && s.unpublished == 0, "{s:?}");
}

#[test]
fn a_seal_with_no_write_in_progress_changes_nothing() {
    let b = buffer(1, 4096, Mode::Overwrite);
    b.write(1, b"one").unwrap();
    assert_eq!(b.seal_cpu(0, |_| true), 0);
    assert_eq!(b.seal_cpu(7, |_| true), 0, "a CPU beyond the set");
    assert_eq!(events(&b, 0), vec![(1, b"one".to_vec())]);
    b.write(2, b"two").unwrap();
    assert_eq!(events(&b, 0).len(), 2);
    assert_eq!(b.stats(0).unwrap().stopped, 0);
}

/// A write stopped between its reservation and its header's store leaves the words
/// as they were. In a fresh ring they are zero: read as headers, they would be
/// empty events of id 0 (and with no record before them, no stamp says they are
/// older).
#[test]
fn a_seal_never_reads_the_zeroes_a_write_stopped_before_its_header_left() {
    let b = Rc::new(buffer(1, 4096, Mode::Overwrite));
    let (stopped, seen, s) = sealed_at(&b, Point::Claimed).unwrap();
    assert_eq!(stopped, 1);
    // The interrupt's record comes after the unreadable words: it is lost with them.
    assert_eq!(seen, vec![]);
    // Each of the two records has an anchor before it (the first of the ring, and
    // one the interrupt wrote because the stopped write had not noted its own): 2 + 2
    // words each.
    assert_eq!((s.unreadable, s.unpublished), (64, 0), "{s:?}");
    assert!(!b.is_corrupt());
}

/// Once the ring has wrapped, the words a stopped write left are an older record's:
/// of the same length here, so its header fits exactly. It is older than the record
/// before it, which no record reserved later is: the seal does not read it.
#[test]
fn a_seal_never_reads_an_older_record_a_write_stopped_before_its_header_left() {
    // 64 words; each record 2 words (no anchors: the clock stays below 2^32).
    let b = Rc::new(buffer(1, 512, Mode::Overwrite));
    for i in 0..100u8 {
        b.write(1, &[i; 7]).unwrap();
    }
    let (stopped, seen, s) = sealed_at(&b, Point::Claimed).unwrap();
    assert_eq!(stopped, 1);
    assert!(seen.iter().all(|(id, _)| *id == 1), "{seen:?}");
    let last: Vec<u8> = seen.iter().map(|(_, p)| p[0]).collect();
    assert_eq!(last.last(), Some(&99), "{last:?}");
    // Ring order is write order: no older record among the newest.
    assert!(last.windows(2).all(|w| w[0] < w[1]), "{last:?}");
    assert_eq!(s.unreadable, 32, "{s:?}");
}

/// After a seal the ring goes on: a later write is published by the writer that
/// makes it (had the stopped write resumed, as a panic's never does, its record is
/// kept too).
#[test]
fn a_ring_goes_on_after_a_seal() {
    let b = Rc::new(buffer(1, 4096, Mode::Overwrite));
    sealed_at(&b, Point::Reserved).unwrap();
    b.write(4, b"after").unwrap();
    let ids: Vec<u16> = events(&b, 0).iter().map(|e| e.0).collect();
    assert_eq!(ids, vec![2, 3, 4]);
    assert!(!b.is_corrupt());
}

/// Through the tracer, as the panic path uses it: `Tracer::seal_cpu` seals the
/// instance's ring of this CPU, the dump's text says what it left out, and its block
/// carries the figures for `report` (whose text says the same).
#[test]
#[cfg_attr(miri, ignore = "single-threaded safe code, run natively (18 s under Miri)")]
fn the_dump_says_what_the_tracers_seal_left_out() {
    let t = super::trigger::tracer(&[]);
    t.top().write_marker("before").unwrap();
    let text = Rc::new(RefCell::new(std::string::String::new()));
    let out = text.clone();
    hook::once(Point::Reserved, move || {
        t.top().write_marker("nmi").unwrap();
        assert_eq!(t.seal_cpu(), 1);
        let all = crate::tracer::DumpSelection::all(1);
        t.write_dump(&all, None, &mut *out.borrow_mut());
    });
    t.top().write_marker("stopped").unwrap();
    hook::clear();
    let text = text.borrow();
    let note = "# cpu0: 1 write the panic stopped before it finished is left out\n";
    assert!(text.contains(note), "{text}");
    assert!(text.contains("tracing_mark_write: nmi") && !text.contains("holds"), "{text}");
    assert!(!text.contains("tracing_mark_write: stopped"), "{text}");
    let dump = crate::dump::parse(&text).pop().expect("the block");
    let stats = dump.instances.values().next().expect("the top level").stats[&0];
    assert_eq!((stats.stopped, stats.unreadable, stats.unpublished), (1, 0, 0));
    let notes = crate::text::UnreadWrites { cpu: 0, stopped: 1, unreadable: 0, unpublished: 0 };
    assert_eq!(std::format!("{notes}"), note);
}

/// The words a write stopped before its header left may be an older record's
/// payload, which can read as a header of a known event that fits exactly, stamped
/// in the past or the future. In a ring a consumer emptied, no record below
/// `commit` dates the past: the consumer's newest event does (nothing reserved
/// later is older); the clock now bounds the future.
#[test]
fn a_seal_never_reads_an_older_payload_that_reads_as_a_header() {
    for stamp in [500, 2_000_000_000] {
        // 64 words. Each record's payload word reads as a header: id 1, 8 bytes.
        let b = Rc::new(buffer(1, 512, Mode::Overwrite));
        let fake = crate::ring::record::header(
            crate::ring::record::Tag { id: 1, ctx: crate::Context::TASK },
            8,
            stamp,
        );
        for _ in 0..40 {
            b.write(1, &fake.to_le_bytes()).unwrap();
        }
        // One word (a header alone): the next reservation starts where a payload was.
        b.write(1, &[]).unwrap();
        assert!(super::util::consume(&b, 0).len() > 10);
        // The interrupt seals without writing: the stopped write's words are the last.
        let (stopped, seen, s) = sealed_at_time(&b, Point::Claimed, None, None).unwrap();
        assert_eq!((stopped, seen), (1, vec![]), "stamp {stamp}: nothing read as a record");
        assert_eq!((s.unreadable, s.entries), (16, 0), "{s:?}");
        assert!(s.balanced(), "{s:?}");
    }
}

/// A ring a consumer emptied: the stopped write's words are the previous lap's
/// record, which the consumer's newest event dates as older.
#[test]
fn a_seal_never_reads_a_record_older_than_what_a_consumer_took() {
    let b = Rc::new(buffer(1, 512, Mode::Overwrite));
    for i in 0..40u8 {
        b.write(1, &[i; 7]).unwrap();
    }
    assert_eq!(super::util::consume(&b, 0).len(), 40 - 8, "the ring wrapped");
    let (stopped, seen, s) = sealed_at(&b, Point::Claimed).unwrap();
    assert_eq!((stopped, seen), (1, vec![]), "{s:?}");
}

/// A cleared ring keeps its words: the clear dates them, as older than anything
/// written after it.
#[test]
fn a_seal_never_reads_a_record_a_clear_emptied() {
    let mut b = buffer(1, 512, Mode::Overwrite);
    for i in 0..40u8 {
        b.write(1, &[i; 7]).unwrap();
    }
    b.clear().unwrap();
    let b = Rc::new(b);
    let (stopped, seen, s) = sealed_at(&b, Point::Claimed).unwrap();
    assert_eq!((stopped, seen), (1, vec![]), "{s:?}");
}

/// Stamps are compared whole: records seconds apart (more than 2^31 ns, where the
/// low 32 bits a header keeps wrap) are in order.
#[test]
fn a_seal_keeps_records_seconds_apart() {
    // The last pair crosses 2^32 ns between the stopped write and the interrupt,
    // which writes an anchor.
    for (before_gap, nmi_gap) in
        [(0, 3_000_000_000), (3_000_000_000, 0), (4_200_000_000, 3_000_000_000)]
    {
        let b = Rc::new(buffer(1, 4096, Mode::Overwrite));
        b.write(1, b"before").unwrap();
        HostPlatform::set_clock(1_010 + before_gap);
        let at = Some(1_020 + before_gap + nmi_gap);
        let (stopped, seen, s) = sealed_at_time(&b, Point::Reserved, Some(b"nmi"), at).unwrap();
        assert_eq!(seen, vec![(1, b"before".to_vec()), (3, b"nmi".to_vec())], "{s:?}");
        assert_eq!((stopped, s.unreadable), (1, 0), "{s:?}");
    }
}

/// A lap slower than 2^31 ns: the previous lap's header, whose low stamp bits read
/// as newer across their wrap, is older as a whole stamp.
#[test]
fn a_seal_never_reads_a_header_from_a_slow_lap() {
    let b = Rc::new(buffer(1, 512, Mode::Overwrite));
    for i in 0..31u8 {
        b.write(1, &[i; 7]).unwrap();
    }
    HostPlatform::set_clock(3_000_000_000);
    for i in 0..31u8 {
        b.write(4, &[i; 7]).unwrap();
    }
    let (_, seen, s) = sealed_at(&b, Point::Claimed).unwrap();
    assert!(seen.iter().all(|(id, _)| *id == 4), "{seen:?} {s:?}");
}

/// An older payload word that reads as a header of an event the ring's writers do
/// not write (id 0x1234), fitting exactly and stamped between the record before it
/// and the interrupt's.
#[test]
fn a_seal_never_reads_a_payload_word_as_an_unknown_event() {
    let b = Rc::new(buffer(1, 512, Mode::Overwrite));
    let mut payload = [0u8; 16];
    payload[..8].copy_from_slice(&((5_000u64 << 32) | (0x1234 << 12) | 8).to_le_bytes());
    for _ in 0..21 {
        b.write(1, &payload).unwrap();
    }
    // The next reservation starts where record 1's first payload word was.
    b.write(5, &[0; 7]).unwrap();
    HostPlatform::set_clock(5_000);
    let (_, seen, s) = sealed_at(&b, Point::Claimed).unwrap();
    assert!(seen.iter().all(|(id, _)| *id == 1 || *id == 5), "{seen:?} {s:?}");
}

/// Records of the property test: a sequence number first, then bytes of its choice.
fn record(seq: u64, len: usize, fill: &[u8]) -> Vec<u8> {
    let mut payload = seq.to_le_bytes().to_vec();
    payload.extend(fill.iter().cycle().take(len));
    payload
}

/// One case of [`a_seal_publishes_only_records_written`]: `earlier` records (their
/// lengths past the sequence number, bytes from `fill`), maybe consumed or cleared,
/// then a write stopped at its `point`-th hook point, where an "NMI" writes `nested`
/// records and seals. Checked there, as the CPU never comes back to the write.
fn seal_case(
    earlier: &[usize],
    fill: &[u8],
    then: u8,
    point: usize,
    nested: &[usize],
) -> Result<(), TestCaseError> {
    let mut b = buffer(1, 512, Mode::Overwrite);
    // Every record written, by sequence number (its first 8 bytes): id and payload.
    let mut written = std::collections::BTreeMap::new();
    for (i, &len) in earlier.iter().enumerate() {
        let (seq, id) = (written.len() as u64 + 1, 1 + i as u16 % 5);
        written.insert(seq, (id, record(seq, len, fill)));
        b.write(id, &written[&seq].1).unwrap();
    }
    match then {
        0 => {}
        1 => drop(super::util::consume(&b, 0)),
        _ => b.clear().unwrap(),
    }
    // The stopped write's record may be read whole (stopped once its header is in).
    let seq = written.len() as u64 + 1;
    let stopped = record(seq, 13, fill);
    written.insert(seq, (7, stopped.clone()));
    let mut inner = Vec::new();
    for &len in nested {
        let seq = written.len() as u64 + 1;
        written.insert(seq, (9, record(seq, len, fill)));
        inner.push(written[&seq].clone());
    }
    let b = Rc::new(b);
    let seen = Rc::new(RefCell::new(None));
    let (bb, out) = (b.clone(), seen.clone());
    let mut hit = 0;
    hook::set(move |_| {
        hit += 1;
        if hit == point {
            for (id, payload) in &inner {
                bb.write(*id, payload).unwrap();
            }
            bb.seal_cpu(0, |id| id <= 9);
            *out.borrow_mut() = Some((events(&bb, 0), bb.stats(0).unwrap(), bb.is_corrupt()));
            // The CPU never comes back to the write it was stopped in.
            std::panic::resume_unwind(std::boxed::Box::new(()));
        }
    });
    let resumed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| b.write(7, &stopped)));
    hook::clear();
    let Some((seen, s, corrupt)) = seen.take() else {
        prop_assert!(resumed.is_ok());
        return Ok(());
    };
    prop_assert!(!corrupt, "{s:?}");
    let mut last = 0;
    for (id, payload) in &seen {
        let key = u64::from_le_bytes(payload[..8].try_into().unwrap());
        prop_assert_eq!(
            written.get(&key),
            Some(&(*id, payload.clone())),
            "not written: {:?}",
            seen
        );
        prop_assert!(key > last, "out of order or twice: {:?}", seen);
        last = key;
    }
    if s.unreadable == 0 {
        let read = |k: &u64| seen.iter().any(|(id, p)| *id == 9 && p[..8] == k.to_le_bytes());
        let keys: Vec<u64> = written.iter().filter(|(_, v)| v.0 == 9).map(|(k, _)| *k).collect();
        prop_assert!(keys.iter().all(read), "an interrupt's record is missing: {seen:?} {s:?}");
    }
    Ok(())
}

proptest! {
    #![proptest_config(super::util::cases(if cfg!(miri) { 4 } else { 2000 }))]

    /// Whatever point a write is stopped at, over whatever a small ring held
    /// (wrapped, consumed, cleared; payloads of any bytes, which the stopped write's
    /// words may be): the seal publishes only records that were written, each once
    /// and in order, and never marks the ring corrupt; it keeps the interrupt's
    /// records unless it says it left words out.
    #[test]
    #[cfg_attr(miri, ignore = "single-threaded safe code, run natively (9 s under Miri)")]
    fn a_seal_publishes_only_records_written(
        earlier in prop::collection::vec(0usize..48, 0..80),
        fill in prop::collection::vec(any::<u8>(), 1..64),
        then in 0u8..3,
        point in 1usize..12,
        nested in prop::collection::vec(0usize..24, 0..3),
    ) {
        seal_case(&earlier, &fill, then, point, &nested)?;
    }
}
