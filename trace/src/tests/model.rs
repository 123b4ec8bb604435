//! Property tests: random sequences of writes, nested writes (simulated interrupts),
//! abandoned reservations, reads, clears, resizes, mode switches and clock jumps, in
//! both modes, checked after every step against a simple model: a `VecDeque` of
//! records with word positions, and the same counters.

use super::util::{Probe, STRUCK_AT, buffer};
use crate::ring::per_cpu::slack_for;
use crate::ring::record::record_words;
use crate::sync::{Point, hook};
use crate::{HostPlatform, Mode, ring::Buffer};
use proptest::prelude::*;
use std::collections::VecDeque;
use std::rc::Rc;
use std::vec::Vec;

#[derive(Clone, Debug)]
enum Op {
    Write(usize),
    /// An outer write of `outer` bytes interrupted at `at` by writes of `inner` bytes.
    Nested {
        at: usize,
        outer: usize,
        inner: Vec<usize>,
    },
    Abandon(usize),
    Consume(usize),
    Clear,
    Resize(usize),
    SetMode(bool),
    TimeJump,
}

const SIZES: [usize; 4] = [64, 128, 256, 512];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0usize..=40).prop_map(Op::Write),
        3 => (0..STRUCK_AT.len(), 0usize..=40, prop::collection::vec(0usize..=24, 1..3))
            .prop_map(|(at, outer, inner)| Op::Nested { at, outer, inner }),
        1 => (0usize..=40).prop_map(Op::Abandon),
        3 => (0usize..6).prop_map(Op::Consume),
        1 => Just(Op::Clear),
        1 => (0..SIZES.len()).prop_map(Op::Resize),
        1 => any::<bool>().prop_map(Op::SetMode),
        1 => Just(Op::TimeJump),
    ]
}

/// A record in the model: its word position and size, and the event (None for
/// anchors and padding).
struct MRec {
    words: u64,
    event: Option<(u16, Vec<u8>)>,
}

#[derive(Default, Debug, PartialEq, Eq)]
struct Counts {
    written: u64,
    dropped: u64,
    commit_overrun: u64,
    overrun: u64,
    read: u64,
}

struct Model {
    cap: u64,
    slack: u64,
    overwrite: bool,
    head: u64,
    commit: u64,
    tail: u64,
    recs: VecDeque<MRec>,
    cur_hi: Option<u64>,
    clock_hi: u64,
    c: Counts,
    /// Losses (overrun + dropped) consumers have reported so far.
    lost_reported: u64,
}

impl Model {
    fn new(bytes: usize, overwrite: bool) -> Self {
        let cap = (bytes as u64 / 8).next_power_of_two();
        Model {
            cap,
            slack: slack_for(cap),
            overwrite,
            head: 0,
            commit: 0,
            tail: 0,
            recs: VecDeque::new(),
            cur_hi: None,
            clock_hi: 0,
            c: Counts::default(),
            lost_reported: 0,
        }
    }

    fn reset(&mut self) {
        self.tail = self.head;
        self.commit = self.head;
        self.recs.clear();
        self.cur_hi = None;
        self.c = Counts::default();
        self.lost_reported = 0;
    }

    /// Makes room for `total` words; false if it cannot (nothing changes then).
    fn room(&mut self, total: u64) -> bool {
        let need = (self.head + total).saturating_sub(self.cap);
        if self.tail >= need {
            return true;
        }
        if !self.overwrite {
            return false;
        }
        let target = need + self.slack;
        let (mut p, mut n, mut events) = (self.tail, 0, 0);
        for r in &self.recs {
            if !(p < target && p < self.commit) {
                break;
            }
            p += r.words;
            n += 1;
            events += r.event.is_some() as u64;
        }
        if p < need {
            return false;
        }
        self.recs.drain(..n);
        self.tail = p;
        self.c.overrun += events;
        true
    }

    fn anchor_words(&self) -> u64 {
        if self.cur_hi == Some(self.clock_hi) { 0 } else { 2 }
    }

    /// A write (or an abandoned reservation if `event` is None). Not published.
    fn write(&mut self, len: usize, event: Option<(u16, Vec<u8>)>) -> bool {
        let words = record_words(len);
        let anchor = self.anchor_words();
        if !self.room(words + anchor) {
            self.c.written += 1;
            self.c.dropped += 1;
            self.c.commit_overrun += self.overwrite as u64;
            return false;
        }
        if anchor != 0 {
            self.recs.push_back(MRec { words: 2, event: None });
            self.cur_hi = Some(self.clock_hi);
        }
        self.head += anchor;
        self.c.written += event.is_some() as u64;
        self.recs.push_back(MRec { words, event });
        self.head += words;
        true
    }

    fn publish(&mut self) {
        self.commit = self.head;
    }

    fn events(&self) -> Vec<(u16, Vec<u8>)> {
        self.recs.iter().filter_map(|r| r.event.clone()).collect()
    }

    /// The oldest event, with the losses not reported before it.
    fn consume(&mut self) -> Option<(u16, Vec<u8>, u64)> {
        while let Some(r) = self.recs.pop_front() {
            self.tail += r.words;
            if let Some((id, payload)) = r.event {
                self.c.read += 1;
                let lost = self.c.overrun + self.c.dropped;
                let new = lost - self.lost_reported;
                self.lost_reported = lost;
                return Some((id, payload, new));
            }
        }
        None
    }
}

fn payload(seq: &mut u8, len: usize) -> Vec<u8> {
    *seq = seq.wrapping_add(1);
    (0..len).map(|i| seq.wrapping_add(i as u8)).collect()
}

fn check(b: &Buffer<Probe>, m: &Model) -> Result<(), TestCaseError> {
    let mut it = b.iter(0).unwrap();
    let (mut got, mut last) = (Vec::new(), 0);
    while let Some(r) = it.next_record() {
        prop_assert!(r.ts >= last, "timestamps decrease");
        last = r.ts;
        got.push((r.id, r.payload.to_vec()));
    }
    prop_assert_eq!(got, m.events());
    let s = b.stats(0).unwrap();
    let c = Counts {
        written: s.written,
        dropped: s.dropped,
        commit_overrun: s.commit_overrun,
        overrun: s.overrun,
        read: s.read,
    };
    prop_assert_eq!(&c, &m.c);
    prop_assert_eq!(s.entries, m.events().len() as u64);
    prop_assert!(s.balanced(), "{:?}", s);
    prop_assert_eq!(s.bytes, (m.commit - m.tail) * 8);
    Ok(())
}

fn run(size: usize, overwrite: bool, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mode = if overwrite { Mode::Overwrite } else { Mode::Discard };
    let mut b = Rc::new(buffer(1, SIZES[size], mode));
    let mut m = Model::new(SIZES[size], overwrite);
    let (mut seq, mut id, mut jumps) = (0u8, 0u16, 0u64);
    for op in ops {
        id = (id + 1) % 1000;
        match op {
            Op::Write(len) => {
                let p = payload(&mut seq, len);
                let ok = b.write(id, &p).is_ok();
                prop_assert_eq!(ok, m.write(len, Some((id, p))));
                m.publish();
            }
            Op::Abandon(len) => {
                // The filling code unwinds: the reservation becomes padding.
                let mut reserved = false;
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    b.write_with(id, len, |_| {
                        reserved = true;
                        std::panic::resume_unwind(Box::new("abandon"));
                    })
                }));
                prop_assert_eq!(reserved, m.write(len, None));
                m.publish();
            }
            Op::Nested { at, outer, inner } => {
                let at = STRUCK_AT[at];
                let po = payload(&mut seq, outer);
                let inner: Vec<_> = inner
                    .into_iter()
                    .enumerate()
                    .map(|(i, len)| (2000 + id * 4 + i as u16, payload(&mut seq, len)))
                    .collect();
                let fired = Rc::new(std::cell::Cell::new(false));
                let (bb, f, ws) = (b.clone(), fired.clone(), inner.clone());
                let mut ws = Some(ws);
                hook::set(move |p| {
                    if p == at
                        && let Some(ws) = ws.take()
                    {
                        f.set(true);
                        for (i, w) in ws {
                            let _ = bb.write(i, &w);
                        }
                    }
                });
                let ok = b.write(id, &po).is_ok();
                hook::clear();
                // The model, by where the interrupt landed.
                let inner_writes = |m: &mut Model| {
                    for (i, w) in &inner {
                        m.write(w.len(), Some((*i, w.clone())));
                    }
                };
                let (mok, mfired) = match at {
                    Point::Entered => {
                        inner_writes(&mut m);
                        (m.write(outer, Some((id, po))), true)
                    }
                    Point::Reserving => {
                        // The outer made room (first attempt), then was interrupted
                        // before its CAS, and retried after the interrupt.
                        let total = record_words(outer) + m.anchor_words();
                        if m.room(total) {
                            inner_writes(&mut m);
                            // The retry: nothing counted for the first attempt.
                            (m.write(outer, Some((id, po))), true)
                        } else {
                            m.c.written += 1;
                            m.c.dropped += 1;
                            m.c.commit_overrun += m.overwrite as u64;
                            // The drop path still passes the Publishing and
                            // Committed points only.
                            (false, false)
                        }
                    }
                    Point::Reserved | Point::Filled => {
                        let ok = m.write(outer, Some((id, po)));
                        if ok {
                            inner_writes(&mut m);
                        }
                        (ok, ok)
                    }
                    // The outer is still inside (a dropped write leaves too): the
                    // interrupt's writes nest, and the outer publishes them.
                    Point::Publishing => {
                        let ok = m.write(outer, Some((id, po)));
                        inner_writes(&mut m);
                        (ok, true)
                    }
                    _ => {
                        let ok = m.write(outer, Some((id, po)));
                        m.publish();
                        inner_writes(&mut m);
                        (ok, true)
                    }
                };
                m.publish();
                prop_assert_eq!(ok, mok);
                prop_assert_eq!(fired.get(), mfired);
            }
            Op::Consume(n) => {
                let mut c = b.consumer(0).unwrap();
                for _ in 0..n {
                    let got = c.next_record().unwrap().map(|r| (r.id, r.payload.to_vec(), r.lost));
                    prop_assert_eq!(got, m.consume());
                }
            }
            Op::Clear => {
                Rc::get_mut(&mut b).unwrap().clear().unwrap();
                m.reset();
            }
            Op::Resize(s) => {
                let bb = Rc::get_mut(&mut b).unwrap();
                bb.set_recording(false);
                bb.resize(SIZES[s]).unwrap();
                bb.set_recording(true);
                m = Model {
                    overwrite: m.overwrite,
                    clock_hi: m.clock_hi,
                    ..Model::new(SIZES[s], m.overwrite)
                };
            }
            Op::SetMode(o) => {
                b.set_mode(if o { Mode::Overwrite } else { Mode::Discard });
                m.overwrite = o;
            }
            Op::TimeJump => {
                jumps += 1;
                HostPlatform::set_clock((jumps << 36) + 5);
                m.clock_hi = jumps;
            }
        }
        check(&b, &m)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(crate::tests::util::cases(400))]

    #[test]
    #[cfg_attr(miri, ignore = "single-threaded safe code, run natively (30 s under Miri)")]
    fn ring_matches_model(
        size in 0..SIZES.len(),
        overwrite in any::<bool>(),
        ops in prop::collection::vec(op(), 1..120),
    ) {
        run(size, overwrite, ops)?;
    }
}
