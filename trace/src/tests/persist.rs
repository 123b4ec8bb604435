//! The persistent region: a trace saved by the real writer validates and restores
//! exactly; randomly damaged copies are either rejected or restore only records
//! that were written.

use crate::ring::Buffer;
use crate::ring::persist::{HEADER_WORDS, Region, Rejected};
use crate::sync::{AtomicU64, Ordering::Relaxed};
use crate::{HostPlatform, Mode};
use std::collections::HashSet;
use std::vec::Vec;

const BUILD: u64 = 0x0123_4567_89ab_cdef;
const CPUS: usize = 2;
const RING_WORDS: usize = 256;

/// A record as written: CPU, id, timestamp, payload.
type Rec = (usize, u16, u64, Vec<u8>);

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Damaged copies the big test checks (fewer under Miri, which is slow).
const DAMAGED: u64 = 100_000;

/// A region that lives as long as the test process (lent memory is `'static`); a
/// static keeps it reachable, so Miri's leak check holds.
fn leaked_region() -> &'static [AtomicU64] {
    static KEPT: std::sync::Mutex<Vec<&'static [AtomicU64]>> = std::sync::Mutex::new(Vec::new());
    let words: Vec<AtomicU64> =
        (0..HEADER_WORDS + CPUS * RING_WORDS).map(|_| AtomicU64::new(0)).collect();
    let words = Vec::leak(words);
    KEPT.lock().unwrap().push(words);
    words
}

/// Records `n` events per CPU (wrapping the rings, crossing 2^32 ns so anchors are
/// written) with the real writer into the region, and saves it.
fn write_and_save(words: &'static [AtomicU64], rng: &mut Rng, n: usize) -> HashSet<Rec> {
    let region = Region::new(words, CPUS).unwrap();
    let buffer = Buffer::over(HostPlatform, Mode::Overwrite, region.rings(CPUS)).unwrap();
    let mut written = HashSet::new();
    let mut clock = (1u64 << 32) - 5_000;
    for _ in 0..n * CPUS {
        let cpu = rng.below(CPUS as u64) as usize;
        clock += 1 + rng.below(300);
        HostPlatform::set_cpu(cpu);
        HostPlatform::set_clock(clock);
        let id = 1 + rng.below(200) as u16;
        let payload: Vec<u8> = (0..rng.below(40)).map(|_| rng.next() as u8).collect();
        buffer.write(id, &payload).unwrap();
        written.insert((cpu, id, clock, payload));
    }
    HostPlatform::set_cpu(0);
    region.save(&buffer, BUILD).unwrap();
    written
}

/// Every record of a restored set, per CPU in order.
fn records(buffer: &Buffer<HostPlatform>) -> Vec<Rec> {
    let mut out = Vec::new();
    for cpu in 0..buffer.cpus() {
        let mut it = buffer.iter(cpu).unwrap();
        while let Some(r) = it.next_record() {
            out.push((r.cpu, r.id, r.ts, r.payload.to_vec()));
        }
    }
    out
}

#[test]
#[cfg_attr(miri, ignore = "single-threaded safe code, run natively (31 s under Miri)")]
fn a_saved_trace_validates_and_restores_what_was_written() {
    let words = leaked_region();
    let written = write_and_save(words, &mut Rng(7), 300);
    let region = Region::new(words, CPUS).unwrap();
    let saved = region.validate(BUILD).unwrap();
    assert_eq!(saved.cpus(), CPUS);
    let restored = region.restore(&saved, HostPlatform).unwrap();
    let got = records(&restored);
    assert_eq!(got.len() as u64, saved.events());
    assert!(got.len() > 50, "the rings hold their newest records: {}", got.len());
    assert!(got.iter().all(|r| written.contains(r)));
    // The newest record of each CPU survived (overwrite mode keeps the newest).
    for cpu in 0..CPUS {
        let newest = written.iter().filter(|r| r.0 == cpu).max_by_key(|r| r.2).unwrap();
        assert_eq!(got.iter().filter(|r| r.0 == cpu).max_by_key(|r| r.2), Some(newest));
        let s = restored.stats(cpu).unwrap();
        assert!(s.balanced(), "{s:?}");
        assert!(s.overrun > 0, "the ring wrapped: {s:?}");
        assert!(!restored.is_recording());
    }
    // Another build, and a forgotten region, say there is no trace.
    assert!(matches!(region.validate(BUILD + 1), Err(Rejected::OtherBuild { saved: BUILD })));
    region.forget();
    assert_eq!(region.validate(BUILD), Err(Rejected::Absent));
    assert!(Rejected::Absent.is_absent());
}

#[test]
#[cfg_attr(miri, ignore = "single-threaded safe code, run natively (14 s under Miri)")]
fn the_region_records_again_after_a_restore() {
    let words = leaked_region();
    write_and_save(words, &mut Rng(9), 50);
    let region = Region::new(words, CPUS).unwrap();
    let saved = region.validate(BUILD).unwrap();
    let restored = region.restore(&saved, HostPlatform).unwrap();
    let before = records(&restored);
    region.forget();
    let written = write_and_save(words, &mut Rng(10), 20);
    // The copy is unaffected by the new boot's records.
    assert_eq!(records(&restored), before);
    let again = region.restore(&region.validate(BUILD).unwrap(), HostPlatform).unwrap();
    assert!(records(&again).iter().all(|r| written.contains(r)));
}

/// An anchor whose stamp disagrees with its header's low bits (the checksums
/// recomputed over it) is malformed for the saved trace's check as for every reader
/// of a ring: the one decoder of the record format rejects it.
#[test]
fn a_saved_anchor_whose_stamp_disagrees_with_its_header_is_rejected() {
    use crate::ring::record::{ANCHOR_ID, Header};
    let words = leaked_region();
    write_and_save(words, &mut Rng(11), 40);
    let region = Region::new(words, CPUS).unwrap();
    let ring = &words[HEADER_WORDS..HEADER_WORDS + RING_WORDS];
    let mut rejected = 0;
    for p in 0..RING_WORDS - 1 {
        let (h, ts) = (Header::decode(ring[p].load(Relaxed)), ring[p + 1].load(Relaxed));
        if h.id != ANCHOR_ID || h.len != 8 || ts & 0xffff_ffff != h.ts_lo || h.ts_lo == 0 {
            continue;
        }
        // One nanosecond earlier: the same hi, still after the record before it.
        ring[p + 1].store(ts - 1, Relaxed);
        region.reseal();
        match region.validate(BUILD) {
            Err(Rejected::BadAnchor { cpu: 0, .. }) => rejected += 1,
            // An anchor outside the saved records is not read.
            Ok(_) => {}
            other => panic!("word {p}: {other:?}"),
        }
        ring[p + 1].store(ts, Relaxed);
    }
    region.reseal();
    assert!(region.validate(BUILD).is_ok());
    assert!(rejected > 0, "no altered anchor among the saved records was rejected");
}

/// A saved commit position at the top of the position space, with a record there
/// whose length would carry it past 2^64 (the checksums recomputed over it): the
/// check says the record runs past the commit position, and never wraps.
#[test]
fn a_record_whose_end_would_pass_2_64_is_rejected() {
    use crate::ring::record::pack_tail;
    let words = leaked_region();
    write_and_save(words, &mut Rng(12), 40);
    let region = Region::new(words, CPUS).unwrap();
    let commit = u64::MAX;
    words[8].store(pack_tail(commit - 1, 0), Relaxed);
    words[9].store(commit, Relaxed);
    // Event 1 with a 4095-byte payload: 513 words from one below 2^64.
    let slot = HEADER_WORDS + ((commit - 1) as usize & (RING_WORDS - 1));
    words[slot].store(4095 | (1 << 12), Relaxed);
    region.reseal();
    assert_eq!(region.validate(BUILD), Err(Rejected::RunsPast { cpu: 0, word: 0 }));
}

#[test]
fn a_set_over_other_memory_is_not_saved() {
    let words = leaked_region();
    let region = Region::new(words, CPUS).unwrap();
    let elsewhere = Region::new(leaked_region(), CPUS).unwrap();
    let other = Buffer::over(HostPlatform, Mode::Overwrite, elsewhere.rings(CPUS)).unwrap();
    assert_eq!(region.save(&other, BUILD), Err(crate::Error::BadCpu));
    assert_eq!(region.validate(BUILD), Err(Rejected::Absent));
}

/// 10^5 damaged copies of a saved region (200 under Miri): flipped bits, overwritten words, words
/// copied from elsewhere, in the header, the per-CPU entries and the records. The
/// validator never panics, and whatever it accepts restores only written records.
#[test]
#[cfg_attr(miri, ignore = "10^5 damaged copies: safe code, run natively")]
fn damaged_regions_are_rejected_or_hold_only_written_records() {
    let words = leaked_region();
    let mut rng = Rng(0x5eed);
    let written = write_and_save(words, &mut rng, 400);
    let pristine: Vec<u64> = words.iter().map(|w| w.load(Relaxed)).collect();
    let damaged: Vec<AtomicU64> = pristine.iter().map(|&w| AtomicU64::new(w)).collect();
    let region = Region::new(&damaged, CPUS).unwrap();
    let (mut accepted, mut rejected) = (0u64, 0u64);
    for _ in 0..DAMAGED {
        for (d, &p) in damaged.iter().zip(&pristine) {
            d.store(p, Relaxed);
        }
        for _ in 0..1 + rng.below(3) {
            let at = match rng.below(4) {
                0 => rng.below(8 + 8 * CPUS as u64) as usize,
                _ => HEADER_WORDS + rng.below((CPUS * RING_WORDS) as u64) as usize,
            };
            let old = damaged[at].load(Relaxed);
            let new = match rng.below(4) {
                0 => old ^ (1 << rng.below(64)),
                1 => rng.next(),
                2 => pristine[rng.below(pristine.len() as u64) as usize],
                _ => rng.below(4096),
            };
            damaged[at].store(new, Relaxed);
        }
        match region.validate(BUILD) {
            Ok(saved) => {
                accepted += 1;
                let restored = region.restore(&saved, HostPlatform).unwrap();
                for r in records(&restored) {
                    assert!(written.contains(&r), "accepted a record never written: {r:?}");
                }
            }
            Err(_) => rejected += 1,
        }
    }
    // Damage outside the live records is harmless; inside, it must be caught.
    std::eprintln!("accepted {accepted}, rejected {rejected}");
    assert!(accepted > 0 && rejected > DAMAGED / 2, "accepted {accepted}, rejected {rejected}");
}

/// Damaged copies whose checksums are then recomputed, so that the damage meets the
/// structural checks (positions, record bounds, anchors, timestamps) alone: they never
/// panic, and an accepted copy reads back whole (every saved event, in timestamp
/// order per CPU, no ring found corrupt).
#[test]
#[cfg_attr(miri, ignore = "10^5 damaged copies: safe code, run natively")]
fn resealed_damage_meets_the_structural_checks() {
    let words = leaked_region();
    let mut rng = Rng(0xfeed);
    write_and_save(words, &mut rng, 400);
    let pristine: Vec<u64> = words.iter().map(|w| w.load(Relaxed)).collect();
    let damaged: Vec<AtomicU64> = pristine.iter().map(|&w| AtomicU64::new(w)).collect();
    let region = Region::new(&damaged, CPUS).unwrap();
    let (mut accepted, mut rejected) = (0u64, 0u64);
    for _ in 0..DAMAGED {
        for (d, &p) in damaged.iter().zip(&pristine) {
            d.store(p, Relaxed);
        }
        let at = match rng.below(8) {
            // The per-CPU positions (tail word, commit).
            0 => 8 + 8 * rng.below(CPUS as u64) as usize + rng.below(2) as usize,
            _ => HEADER_WORDS + rng.below((CPUS * RING_WORDS) as u64) as usize,
        };
        let old = damaged[at].load(Relaxed);
        let new = match rng.below(3) {
            0 => old ^ (1 << rng.below(64)),
            1 => rng.next(),
            _ => old.wrapping_add(rng.below(16)).wrapping_sub(8),
        };
        damaged[at].store(new, Relaxed);
        region.reseal();
        let Ok(saved) = region.validate(BUILD) else {
            rejected += 1;
            continue;
        };
        accepted += 1;
        let restored = region.restore(&saved, HostPlatform).unwrap();
        let mut events = 0;
        for cpu in 0..CPUS {
            let mut it = restored.iter(cpu).unwrap();
            let mut last = 0;
            while let Some(r) = it.next_record() {
                assert!(r.ts >= last, "cpu{cpu}: timestamps in order");
                last = r.ts;
                events += 1;
            }
        }
        assert!(!restored.is_corrupt(), "an accepted copy reads without corruption");
        assert_eq!(events, saved.events(), "an accepted copy reads back whole");
    }
    std::eprintln!("resealed: accepted {accepted}, rejected {rejected}");
    assert!(accepted > 0 && rejected > 0, "accepted {accepted}, rejected {rejected}");
}
