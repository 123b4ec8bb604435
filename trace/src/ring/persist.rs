//! A trace that survives a warm reboot: a region of lent memory (the same physical
//! range on every boot) holds a header and one ring per CPU slot.
//!
//! ```text
//!  word 0       magic        "FRTRACE1"
//!       1       layout version
//!       2       build id of the kernel that saved it
//!       3       CPUs saved
//!       4       words per ring
//!       5       checksum of the header (this word counted as 0)
//!       8+8c..  CPU c: tail word, commit, overrun, dropped, read, data checksum
//!  HEADER_WORDS ring of slot 0, then slot 1, ...
//! ```
//!
//! While a boot records, the rings are a [`Buffer`] over the region ([`Buffer::over`])
//! and the header holds no magic. [`Region::save`] (on reboot or panic) stops the set
//! and writes the header: positions, loss counters and a checksum of each ring's
//! records. At the next boot [`Region::validate`] checks everything before anything
//! is trusted; [`Region::restore`] copies a valid trace into a buffer of its own, and
//! [`Region::forget`] clears the magic before the new boot records over the rings.

extern crate alloc;

use crate::error::Error;
use crate::platform::Platform;
use crate::ring::buffer::Buffer;
use crate::ring::per_cpu::{Found, MAX_WORDS, MIN_WORDS, Malformed, Ring, decode};
use crate::ring::record::{Mode, unpack_tail};
use crate::sync::{AtomicU64, Ordering::Relaxed};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;

/// The header's first word: "FRTRACE1", little endian.
pub const MAGIC: u64 = u64::from_le_bytes(*b"FRTRACE1");
/// The layout version this code writes and reads.
pub const VERSION: u64 = 1;
/// Words before the first ring (4 KiB).
pub const HEADER_WORDS: usize = 512;
/// Header words before the per-CPU entries.
const FIXED_WORDS: usize = 8;
/// Words of one CPU's entry in the header.
const CPU_WORDS: usize = 8;
/// Most CPU slots a region may have (their entries fill the header).
pub const MAX_SLOTS: usize = (HEADER_WORDS - FIXED_WORDS) / CPU_WORDS;

/// Header word indices.
const W_MAGIC: usize = 0;
const W_VERSION: usize = 1;
const W_BUILD: usize = 2;
const W_CPUS: usize = 3;
const W_RING_WORDS: usize = 4;
const W_CHECKSUM: usize = 5;

/// One step of the checksum: a bijection of `h` for a given `word`, so a chain that
/// differs in exactly one word always ends differently.
#[inline(always)]
fn mix(h: u64, word: u64) -> u64 {
    (h ^ word).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29)
}

/// A region: a header and `slots` rings of a power-of-two size each.
#[derive(Clone, Copy)]
pub struct Region<'a> {
    words: &'a [AtomicU64],
    slots: usize,
    ring_words: usize,
}

/// Why the region's content was not taken as the previous boot's trace. Nothing of
/// it was trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejected {
    /// No saved trace: a cold boot, a boot that ended without saving, or one that
    /// was already read.
    Absent,
    /// Saved by another kernel build (event ids and formats may differ).
    OtherBuild {
        /// The saving kernel's build id.
        saved: u64,
    },
    /// A layout version this code does not read.
    Version(u64),
    /// The header's checksum does not match its words.
    HeaderChecksum,
    /// The CPU count or ring size does not fit this region.
    Layout {
        /// CPUs saved.
        cpus: u64,
        /// Words per ring saved.
        ring_words: u64,
    },
    /// A ring's tail is after its commit position, or further back than the ring holds.
    Positions {
        /// The CPU.
        cpu: usize,
    },
    /// A ring's records do not match the checksum saved with them.
    DataChecksum {
        /// The CPU.
        cpu: usize,
    },
    /// A record's length runs past the commit position.
    RunsPast {
        /// The CPU.
        cpu: usize,
        /// Words from the tail to the record.
        word: u64,
    },
    /// An anchor record of the wrong length, or whose stamp does not match its
    /// header's.
    BadAnchor {
        /// The CPU.
        cpu: usize,
        /// Words from the tail to the record.
        word: u64,
    },
    /// A timestamp earlier than the one before it on the same CPU.
    Backwards {
        /// The CPU.
        cpu: usize,
        /// Words from the tail to the record.
        word: u64,
    },
}

impl Rejected {
    /// Whether there simply was no trace to read (rather than a damaged one).
    pub fn is_absent(&self) -> bool {
        matches!(self, Rejected::Absent | Rejected::OtherBuild { .. })
    }
}

impl core::error::Error for Rejected {}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Rejected::Absent => f.write_str("no trace was saved (cold boot, or not saved)"),
            Rejected::OtherBuild { saved } => {
                write!(f, "saved by another kernel build ({saved:#018x})")
            }
            Rejected::Version(v) => write!(f, "layout version {v}, this kernel reads {VERSION}"),
            Rejected::HeaderChecksum => f.write_str("the header's checksum does not match"),
            Rejected::Layout { cpus, ring_words } => {
                write!(f, "{cpus} CPU(s) of {ring_words} words do not fit the region")
            }
            Rejected::Positions { cpu } => {
                write!(f, "cpu{cpu} ring: tail and commit positions inconsistent")
            }
            Rejected::DataChecksum { cpu } => {
                write!(f, "cpu{cpu} ring: records do not match their checksum")
            }
            Rejected::RunsPast { cpu, word } => {
                write!(f, "cpu{cpu} ring: record at word {word} runs past the commit position")
            }
            Rejected::BadAnchor { cpu, word } => {
                write!(f, "cpu{cpu} ring: timestamp anchor at word {word} is malformed")
            }
            Rejected::Backwards { cpu, word } => {
                write!(f, "cpu{cpu} ring: timestamp at word {word} goes backwards")
            }
        }
    }
}

/// One ring of a valid saved trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SavedRing {
    /// Tail word, commit, overrun, dropped, read (see `Ring::saved_state`).
    state: [u64; 5],
    /// Events between tail and commit.
    entries: u64,
}

/// A saved trace that [`Region::validate`] found consistent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Saved {
    rings: Vec<SavedRing>,
    /// The build id it was validated with.
    build_id: u64,
}

impl Saved {
    /// CPUs saved.
    pub fn cpus(&self) -> usize {
        self.rings.len()
    }

    /// Events held, all CPUs together.
    pub fn events(&self) -> u64 {
        self.rings.iter().map(|r| r.entries).sum()
    }
}

impl<'a> Region<'a> {
    /// A region over `words`: the header, then `slots` rings of the largest power of
    /// two that fits. `Err(TooBig)` for more than [`MAX_SLOTS`] slots; `Err(ZeroSize)`
    /// for no slot, or rings that would be smaller than a ring's minimum.
    pub fn new(words: &'a [AtomicU64], slots: usize) -> Result<Self, Error> {
        if slots == 0 {
            return Err(Error::ZeroSize);
        }
        if slots > MAX_SLOTS {
            return Err(Error::TooBig);
        }
        let per_slot = (words.len().saturating_sub(HEADER_WORDS) / slots) as u64;
        if per_slot < MIN_WORDS {
            return Err(Error::ZeroSize);
        }
        let ring_words = (1u64 << per_slot.ilog2()).min(MAX_WORDS) as usize;
        Ok(Region { words, slots, ring_words })
    }

    /// The region's words.
    pub fn words(&self) -> &'a [AtomicU64] {
        self.words
    }

    /// Words per ring.
    pub fn ring_words(&self) -> usize {
        self.ring_words
    }

    /// The words of slot `slot`'s ring (`None` beyond the slots).
    pub fn ring(&self, slot: usize) -> Option<&'a [AtomicU64]> {
        let words: &'a [AtomicU64] = self.words;
        (slot < self.slots).then(|| {
            let start = HEADER_WORDS + slot * self.ring_words;
            &words[start..start + self.ring_words]
        })
    }

    /// The rings of the first `cpus` slots, for [`Buffer::over`] (fewer if there are
    /// fewer slots).
    pub fn rings(&self, cpus: usize) -> impl Iterator<Item = &'a [AtomicU64]> + use<'a> {
        let region = *self;
        (0..cpus.min(self.slots)).filter_map(move |slot| region.ring(slot))
    }

    fn header(&self, index: usize) -> u64 {
        self.words[index].load(Relaxed)
    }

    fn entry(&self, cpu: usize, field: usize) -> u64 {
        self.header(FIXED_WORDS + cpu * CPU_WORDS + field)
    }

    /// The header's checksum over its words and the first `cpus` CPU entries.
    fn header_checksum(&self, cpus: usize) -> u64 {
        let fixed = (0..FIXED_WORDS).map(|i| if i == W_CHECKSUM { 0 } else { self.header(i) });
        let entries = (FIXED_WORDS..FIXED_WORDS + cpus * CPU_WORDS).map(|i| self.header(i));
        fixed.chain(entries).fold(MAGIC, mix)
    }

    /// The checksum of ring `cpu`'s words at positions `[tail, commit)`.
    fn data_checksum(ring: &[AtomicU64], cpu: usize, tail: u64, commit: u64) -> u64 {
        let mask = ring.len() as u64 - 1;
        let seed = mix(mix(mix(MAGIC, cpu as u64), tail), commit);
        (tail..commit).fold(seed, |h, p| mix(h, ring[(p & mask) as usize].load(Relaxed)))
    }

    /// Saves `buffer`, which must be a set over this region's rings (else
    /// `Err(BadCpu)`): turns its recording off, then writes the header (positions,
    /// loss counters, checksums) with `build_id`. Writers still inside the set on other
    /// CPUs must have been stopped (or must finish) first; records they commit later
    /// are not part of the saved trace, and records they overwrite make it invalid.
    pub fn save<P: Platform>(&self, buffer: &Buffer<P>, build_id: u64) -> Result<(), Error> {
        let cpus = buffer.cpus();
        for cpu in 0..cpus {
            let ours = self.ring(cpu).ok_or(Error::BadCpu)?;
            if !core::ptr::eq(buffer.ring(cpu)?.data(), ours) {
                return Err(Error::BadCpu);
            }
        }
        buffer.set_recording(false);
        self.forget();
        for cpu in 0..cpus {
            let ring = buffer.ring(cpu)?;
            let state = ring.saved_state();
            let (tail, _) = unpack_tail(state[1], state[0]);
            let sum = Self::data_checksum(ring.data(), cpu, tail, state[1]);
            let base = FIXED_WORDS + cpu * CPU_WORDS;
            for (i, word) in state.into_iter().chain([sum]).enumerate() {
                self.words[base + i].store(word, Relaxed);
            }
        }
        let fixed = [VERSION, build_id, cpus as u64, self.ring_words as u64];
        for (i, word) in fixed.into_iter().enumerate() {
            self.words[W_VERSION + i].store(word, Relaxed);
        }
        self.words[W_MAGIC].store(MAGIC, Relaxed);
        self.words[W_CHECKSUM].store(self.header_checksum(cpus), Relaxed);
        Ok(())
    }

    /// Test aid: recomputes the saved checksums (records and header) over whatever the
    /// region holds now, so that tests can put arbitrary content past them and before
    /// the structural checks.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn reseal(&self) {
        let cpus = (self.header(W_CPUS) as usize).min(self.slots);
        for cpu in 0..cpus {
            let Some(ring) = self.ring(cpu) else { return };
            let commit = self.entry(cpu, 1);
            let (tail, _) = unpack_tail(commit, self.entry(cpu, 0));
            if tail <= commit && commit - tail <= ring.len() as u64 {
                let sum = Self::data_checksum(ring, cpu, tail, commit);
                self.words[FIXED_WORDS + cpu * CPU_WORDS + 5].store(sum, Relaxed);
            }
        }
        self.words[W_CHECKSUM].store(self.header_checksum(cpus), Relaxed);
    }

    /// Clears the magic: the region holds no saved trace any more.
    pub fn forget(&self) {
        self.words[W_MAGIC].store(0, Relaxed);
    }

    /// Checks the saved trace: magic, version, `build_id`, header checksum, layout,
    /// then every ring: positions, checksum of its records, and a walk from tail to
    /// commit (each record within bounds, anchors well formed, timestamps never
    /// decreasing). Reads only; never panics, whatever the words hold.
    pub fn validate(&self, build_id: u64) -> Result<Saved, Rejected> {
        if self.header(W_MAGIC) != MAGIC {
            return Err(Rejected::Absent);
        }
        if self.header(W_VERSION) != VERSION {
            return Err(Rejected::Version(self.header(W_VERSION)));
        }
        if self.header(W_BUILD) != build_id {
            return Err(Rejected::OtherBuild { saved: self.header(W_BUILD) });
        }
        let (cpus, ring_words) = (self.header(W_CPUS), self.header(W_RING_WORDS));
        if cpus == 0 || cpus > self.slots as u64 || ring_words != self.ring_words as u64 {
            return Err(Rejected::Layout { cpus, ring_words });
        }
        let cpus = cpus as usize;
        if self.header(W_CHECKSUM) != self.header_checksum(cpus) {
            return Err(Rejected::HeaderChecksum);
        }
        let mut rings = Vec::with_capacity(cpus);
        for cpu in 0..cpus {
            rings.push(self.validate_ring(cpu)?);
        }
        Ok(Saved { rings, build_id })
    }

    fn validate_ring(&self, cpu: usize) -> Result<SavedRing, Rejected> {
        let ring = self.ring(cpu).ok_or(Rejected::Positions { cpu })?;
        let state = core::array::from_fn(|i| self.entry(cpu, i));
        let commit = state[1];
        let (tail, mut hi) = unpack_tail(commit, state[0]);
        if tail > commit || commit - tail > ring.len() as u64 {
            return Err(Rejected::Positions { cpu });
        }
        if Self::data_checksum(ring, cpu, tail, commit) != self.entry(cpu, 5) {
            return Err(Rejected::DataChecksum { cpu });
        }
        let slot = |p: u64| ring[(p & (ring.len() as u64 - 1)) as usize].load(Relaxed);
        let (mut p, mut last, mut entries) = (tail, 0, 0);
        while p < commit {
            let word = p - tail;
            let found = decode(slot, p, hi, commit);
            let ts = match found {
                Found::Anchor { ts, .. } => ts,
                Found::Pad { .. } => last,
                Found::Event { ts, .. } => {
                    entries += 1;
                    ts
                }
                Found::Bad(Malformed::BadAnchor) => return Err(Rejected::BadAnchor { cpu, word }),
                Found::Bad(_) => return Err(Rejected::RunsPast { cpu, word }),
            };
            if ts < last {
                return Err(Rejected::Backwards { cpu, word });
            }
            last = ts;
            (p, hi) = found.next(p, hi);
        }
        Ok(SavedRing { state, entries })
    }

    /// A buffer set of its own holding a copy of the saved trace `saved` (from
    /// [`Region::validate`] of this region), recording off; its statistics carry the
    /// saved loss counters. `NotSaved` if the region does not hold `saved` (validated
    /// again here): another region's, or one written since.
    pub fn restore<P: Platform>(&self, saved: &Saved, platform: P) -> Result<Buffer<P>, Error> {
        if self.validate(saved.build_id).as_ref() != Ok(saved) {
            return Err(Error::NotSaved);
        }
        let mut rings = Vec::new();
        rings.try_reserve_exact(saved.rings.len()).map_err(|_| Error::NoMemory)?;
        for (cpu, r) in saved.rings.iter().enumerate() {
            let words = self.ring(cpu).ok_or(Error::BadCpu)?;
            rings.push(Arc::new(Ring::restored(words, r.state, r.entries)?));
        }
        let buffer = Buffer::with_rings(platform, Mode::Overwrite, rings)?;
        buffer.set_recording(false);
        Ok(buffer)
    }
}
