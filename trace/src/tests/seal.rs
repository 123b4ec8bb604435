//! A panic's seal of its CPU's rings (`Ring::seal`): what the writes it stopped hid
//! is published, and the words they left unwritten are never read as records.

use super::util::{buffer, events};
use crate::ring::{Buffer, RingStats};
use crate::sync::{Point, hook};
use crate::{HostPlatform, Mode};
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
fn sealed_at(b: &Rc<Buffer<HostPlatform>>, point: Point) -> Option<Seen> {
    let seen = Rc::new(RefCell::new(None));
    let (inner, out) = (b.clone(), seen.clone());
    hook::once(point, move || {
        inner.write(3, b"nmi").unwrap();
        let stopped = inner.seal_cpu(0);
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
    assert_eq!(b.seal_cpu(0), 0);
    assert_eq!(b.seal_cpu(7), 0, "a CPU beyond the set");
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
fn the_dump_says_what_the_tracers_seal_left_out() {
    let t = super::trigger::tracer(&[]);
    t.top().write_marker("before");
    let text = Rc::new(RefCell::new(std::string::String::new()));
    let out = text.clone();
    hook::once(Point::Reserved, move || {
        t.top().write_marker("nmi");
        assert_eq!(t.seal_cpu(), 1);
        let all = crate::tracer::DumpSelection::all(1);
        t.write_dump(&all, None, &mut *out.borrow_mut());
    });
    t.top().write_marker("stopped");
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
