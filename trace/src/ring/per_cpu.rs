//! One per-CPU ring: the lock-free, nesting-safe writer and the reader primitives.
//!
//! Positions are counted in 64-bit words from the ring's creation and never wrap (the
//! slot of position `p` is `p & mask`). Four positions describe a ring:
//!
//! ```text
//!   tail <= commit <= head <= tail + capacity
//!   [tail, commit)  committed records, readable
//!   [commit, head)  reserved by writers on this CPU that have not all finished
//! ```
//!
//! The writer never blocks: it reserves with a compare-and-swap on `head` (only
//! writers of this CPU touch `head`, so the CAS only ever fails because an interrupt
//! on this CPU reserved first). Overwrite mode makes room by claiming the oldest
//! records with a CAS on `tail`; the consuming reader claims records with a CAS on
//! `tail` too, after copying them, so whoever wins the CAS counts the record (overrun
//! or read) and a writer only ever overwrites space whose claim it has seen. All data
//! is accessed with atomic loads and stores, so racing readers are never undefined
//! behaviour; they detect that a copy raced a writer and discard it. See DESIGN.md.

extern crate alloc;

use crate::context::Context;
use crate::error::{Error, WriteError};
use crate::field::Sink;
use crate::platform::Platform;
use crate::ring::clock::Clock;
use crate::ring::record::{
    ANCHOR_ID, ANCHOR_WORDS, Header, MAX_PAYLOAD, Mode, PAD_ID, Tag, header, pack_tail,
    record_words, ts_hi, ts_join, unpack_tail,
};
use crate::ring::stats::{DepthCounters, MAX_DEPTH, Refused, RingStats};
use crate::sync::{
    AtomicBool, AtomicU64, AtomicUsize, CachePadded, Ordering::*, Point, bump, fence,
    preempt_point, signal_fence,
};
use alloc::boxed::Box;
use alloc::vec::Vec;

/// The longest walk from a ring's tail that dates the words a panic's seal reads
/// (2^20 words: 8 MiB); beyond it, the seal trusts none of them.
const STAMP_WALK_WORDS: u64 = 1 << 20;
/// Smallest ring, in words (so that the largest anchor + record pair fits).
pub(crate) const MIN_WORDS: u64 = 8;
/// Largest ring, in words (2^34 words = 128 GiB; within the 36-bit position field's
/// reach of 2^35 words either side).
pub(crate) const MAX_WORDS: u64 = 1 << 34;
/// The largest payload the smallest ring takes: every ring takes a payload this long.
pub(crate) const MIN_MAX_PAYLOAD: usize = max_payload_for(MIN_WORDS);

/// The largest payload a ring of `words` words takes: an anchor and the record must
/// fit in it together.
const fn max_payload_for(words: u64) -> usize {
    let bytes = ((words - ANCHOR_WORDS - 1) * 8) as usize;
    if bytes < MAX_PAYLOAD { bytes } else { MAX_PAYLOAD }
}

/// Whether the rings of platform `P` take one writer at a time: without
/// [`Platform::PROMISE`], callers sharing an index would not nest like a stack (see
/// [`Ring::reserve`]).
const fn one_at_a_time<P: Platform>() -> bool {
    P::PROMISE.is_none()
}

/// State only the writers of the ring's CPU write.
struct WriterLocal {
    /// Reservation position: the end of the last reserved record.
    head: AtomicU64,
    /// How many writers of this CPU are between their reservation's start
    /// (`reserve`) and `leave` (they nest like a stack; at most one without the
    /// platform's promise, see [`Ring::reserve`]).
    nest: AtomicUsize,
    /// The hi of the last anchor reserved (`u64::MAX`: none yet).
    cur_hi: AtomicU64,
    /// A tail seen on this CPU plus the capacity: a record may end there without
    /// looking at `tail`, which only grows, so this never overstates the room.
    limit: AtomicU64,
    /// Writers dropped because they nested deeper than [`MAX_DEPTH`].
    deep_dropped: AtomicU64,
    /// Writes refused before reserving, by reason (see [`Refusal`]); counted as dropped.
    refused: [AtomicU64; Refusal::COUNT],
    /// Set when a reader or writer found the ring's structure inconsistent.
    corrupt: AtomicBool,
    /// Writes a seal found stopped before they finished, left out ([`Ring::seal`]).
    stopped: AtomicU64,
    /// Words a seal left out as padding because it could not read them all as
    /// records (a stopped write had not stored its header).
    unreadable: AtomicU64,
    /// Where the ring's timestamps come from, fixed for its life (read beside `head`).
    clock: Clock,
}

/// State of the consuming reader.
struct ReaderSide {
    /// Events the consuming reader took (single writer: the consumer).
    read: AtomicU64,
    /// Held by the one consuming reader of this ring (and by reset).
    consumer: AtomicBool,
    /// Events lost (`lost()`) that a consumer has reported so far; a new consumer
    /// reports the losses since, as ftrace's `trace_pipe` does across opens.
    lost_reported: AtomicU64,
    /// A stamp no record reserved from now on is older than: that of the last event
    /// consumed, or of the newest one a reset emptied (a panic's seal dates the words
    /// it reads with it, see [`Ring::seal`]).
    floor: AtomicU64,
}

/// Why a write was refused before anything was reserved. Refused writes are counted
/// as written and dropped, so the accounting identity keeps holding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The payload is larger than a record of the ring can hold.
    TooLarge = 0,
    /// The event id is reserved by the record format.
    ReservedId = 1,
    /// The platform reported a CPU beyond the buffer set (counted on CPU 0's ring).
    BadCpu = 2,
    /// The ring was found corrupt earlier.
    Corrupt = 3,
}

impl Refusal {
    const COUNT: usize = 4;
}

/// What a reader found at a position.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Found {
    /// An event: id, payload length (copied to the caller's buffer), full timestamp.
    Event { id: u16, ctx: Context, len: usize, ts: u64, words: u64 },
    /// An anchor: its full timestamp, whose hi is in effect after it.
    Anchor { ts: u64, words: u64 },
    /// Padding (an abandoned or stopped reservation), with its header's stamp.
    Pad { ts: u64, words: u64 },
    /// Not a record: a torn copy or corruption.
    Bad(Malformed),
}

/// Why words are not a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Malformed {
    /// Its length runs past the end of what may be read.
    RunsPast,
    /// An anchor of the wrong length, or whose stamp does not match its header's.
    BadAnchor,
    /// A payload longer than the reader's buffer.
    TooLong,
}

impl Found {
    /// Position after this record, and the hi in effect there.
    pub(crate) fn next(&self, pos: u64, hi: u64) -> (u64, u64) {
        match *self {
            Found::Event { words, .. } | Found::Pad { words, .. } => (pos + words, hi),
            Found::Anchor { ts, words } => (pos + words, ts_hi(ts)),
            Found::Bad(_) => (pos, hi),
        }
    }
}

/// The record at `pos` of a ring whose words `word` reads by position, with hi `hi`
/// in effect there, if it ends by `limit`: the one reading of the record format
/// that readers, statistics, the panic's seal and a saved trace's check share
/// (each adds its own checks).
pub(crate) fn decode(word: impl Fn(u64) -> u64, pos: u64, hi: u64, limit: u64) -> Found {
    let h = Header::decode(word(pos));
    let words = h.words();
    // Checked: a saved trace's positions come from memory a crash left, and a record
    // must not end past 2^64 (its end is the next record's position).
    if pos.checked_add(words).is_none_or(|end| end > limit) {
        return Found::Bad(Malformed::RunsPast);
    }
    match h.id {
        ANCHOR_ID if h.len != 8 => Found::Bad(Malformed::BadAnchor),
        ANCHOR_ID => {
            let ts = word(pos + 1);
            if ts & 0xffff_ffff != h.ts_lo {
                return Found::Bad(Malformed::BadAnchor);
            }
            Found::Anchor { ts, words }
        }
        PAD_ID => Found::Pad { ts: ts_join(hi, h.ts_lo), words },
        id => Found::Event { id, ctx: h.ctx, len: h.len, ts: ts_join(hi, h.ts_lo), words },
    }
}

/// What a walk over a ring's committed records found ([`Ring::walk_committed`]).
#[derive(Clone, Copy, Debug, Default)]
struct Walked {
    /// Events walked.
    entries: u64,
    /// The first event's stamp.
    oldest: Option<u64>,
    /// The newest stamp of an event or anchor (0 if none).
    newest: u64,
    /// The hi in effect where the walk stopped.
    hi: u64,
    /// The walk stopped at words that are no record.
    bad: bool,
}

/// The oldest record as [`Ring::peek`] copied it, and the claim that takes it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Peeked {
    /// The tail word the copy started from.
    old: u64,
    /// The tail word after the record.
    new: u64,
    /// The event, if the record is one (anchors and padding are claimed silently).
    pub(crate) event: Option<Copied>,
}

/// One event a reader copied out: id, context, payload length, full timestamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Copied {
    pub(crate) id: u16,
    pub(crate) ctx: Context,
    pub(crate) len: usize,
    pub(crate) ts: u64,
}

/// One CPU's ring. See the module documentation.
pub(crate) struct Ring {
    w: CachePadded<WriterLocal>,
    counters: CachePadded<[DepthCounters; MAX_DEPTH]>,
    commit: CachePadded<AtomicU64>,
    tail: CachePadded<AtomicU64>,
    reader: CachePadded<ReaderSide>,
    data: Words,
    mask: u64,
    /// Extra words an overwriting writer reclaims beyond its need, to amortise the CAS.
    slack: u64,
    /// Largest payload: an anchor and the record must fit in the ring together.
    max_payload: usize,
}

/// The slot of position `pos` (the slice's length is a power of two, at least
/// [`MIN_WORDS`], so the mask keeps the index in bounds).
#[inline(always)]
fn at(data: &[AtomicU64], pos: u64) -> &AtomicU64 {
    &data[(pos as usize) & (data.len().wrapping_sub(1))]
}

/// Reclaim slack for a ring of `words`: 1/16 of it, at most 128 words (1 KiB).
pub(crate) const fn slack_for(words: u64) -> u64 {
    let s = words / 16;
    if s > 128 { 128 } else { s }
}

/// Ring size in words for a request of `bytes` (rounded up to a power of two).
pub(crate) fn words_for(bytes: usize) -> Result<u64, Error> {
    if bytes == 0 {
        return Err(Error::ZeroSize);
    }
    let words = (bytes as u64).div_ceil(8).max(MIN_WORDS);
    if words > MAX_WORDS {
        return Err(Error::TooBig);
    }
    Ok(words.next_power_of_two())
}

/// A ring's data words: its own allocation, or memory the caller lends for the
/// program's lifetime (a region reserved at a fixed physical address, say).
pub(crate) enum Words {
    /// Allocated by the ring.
    Owned(Box<[AtomicU64]>),
    /// Lent by the caller, and the slot of [`LENT`] that records them.
    Borrowed(&'static [AtomicU64], usize),
}

/// Most rings over lent words at once (see [`LENT`]).
const MAX_LENT: usize = 1024;

/// Lent words a ring is built over: the address of the first (0: a free slot) and
/// their length in bytes. Plain `core` atomics, outside the loom models.
struct LentSlot {
    start: core::sync::atomic::AtomicUsize,
    bytes: core::sync::atomic::AtomicUsize,
}

/// The lent words rings are built over now: lent words back one ring at a time
/// (see [`Error::Lent`]). A lender (a control operation, in thread context) fills a
/// free slot under [`LENDING`]; a ring's drop frees its slot with one store, so
/// from any context (the last reference to a set may go in an interrupt handler).
static LENT: [LentSlot; MAX_LENT] = [const {
    LentSlot {
        start: core::sync::atomic::AtomicUsize::new(0),
        bytes: core::sync::atomic::AtomicUsize::new(0),
    }
}; MAX_LENT];

/// Lenders one at a time, so that two cannot both find the same words free.
static LENDING: spin::Mutex<()> = spin::Mutex::new(());

impl Words {
    /// Words lent for a ring: refused with `Lent` if any of them backs another, and
    /// with `NoMemory` if [`MAX_LENT`] rings are over lent words already.
    fn lend(words: &'static [AtomicU64]) -> Result<Words, Error> {
        use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
        let range = words.as_ptr_range();
        let (start, end) = (range.start.addr(), range.end.addr());
        let _lending = LENDING.lock();
        let mut free = None;
        for (index, slot) in LENT.iter().enumerate() {
            // Acquire: the slot's length, stored before its start, is its own.
            let lent = slot.start.load(Acquire);
            if lent == 0 {
                free = free.or(Some(index));
            } else if lent < end && start < lent + slot.bytes.load(Relaxed) {
                return Err(Error::Lent);
            }
        }
        let index = free.ok_or(Error::NoMemory)?;
        LENT[index].bytes.store(end - start, Relaxed);
        LENT[index].start.store(start, Release);
        Ok(Words::Borrowed(words, index))
    }
}

impl Drop for Words {
    /// Lent words are free to back another ring once this one is gone.
    fn drop(&mut self) {
        if let Words::Borrowed(_, index) = self {
            LENT[*index].start.store(0, core::sync::atomic::Ordering::Release);
        }
    }
}

impl core::ops::Deref for Words {
    type Target = [AtomicU64];

    #[inline(always)]
    fn deref(&self) -> &[AtomicU64] {
        match self {
            Words::Owned(words) => words,
            Words::Borrowed(words, _) => words,
        }
    }
}

impl Ring {
    /// A ring of `words` words (a power of two, from [`words_for`]), allocated fallibly.
    pub(crate) fn new(words: u64) -> Result<Ring, Error> {
        let n = usize::try_from(words).map_err(|_| Error::TooBig)?;
        let mut data = Vec::new();
        data.try_reserve_exact(n).map_err(|_| Error::NoMemory)?;
        data.resize_with(n, || AtomicU64::new(0));
        Ok(Ring::over(Words::Owned(data.into_boxed_slice())))
    }

    /// A ring over lent words; their length must be a power of two
    /// (`Err(NotPowerOfTwo)`) of at least [`MIN_WORDS`] (`Err(ZeroSize)`) and at most
    /// [`MAX_WORDS`] (`Err(TooBig)`), none backing another ring (`Err(Lent)`). What
    /// the words hold is ignored: the ring starts empty.
    pub(crate) fn borrowed(data: &'static [AtomicU64]) -> Result<Ring, Error> {
        let words = data.len() as u64;
        if words < MIN_WORDS {
            return Err(Error::ZeroSize);
        }
        if words > MAX_WORDS {
            return Err(Error::TooBig);
        }
        if !words.is_power_of_two() {
            return Err(Error::NotPowerOfTwo);
        }
        Ok(Ring::over(Words::lend(data)?))
    }

    fn over(data: Words) -> Ring {
        let words = data.len() as u64;
        Ring {
            w: CachePadded(WriterLocal {
                head: AtomicU64::new(0),
                nest: AtomicUsize::new(0),
                cur_hi: AtomicU64::new(u64::MAX),
                limit: AtomicU64::new(0),
                deep_dropped: AtomicU64::new(0),
                refused: Default::default(),
                corrupt: AtomicBool::new(false),
                stopped: AtomicU64::new(0),
                unreadable: AtomicU64::new(0),
                clock: Clock::Local,
            }),
            counters: CachePadded(Default::default()),
            commit: CachePadded(AtomicU64::new(0)),
            tail: CachePadded(AtomicU64::new(pack_tail(0, 0))),
            reader: CachePadded(ReaderSide {
                read: AtomicU64::new(0),
                consumer: AtomicBool::new(false),
                lost_reported: AtomicU64::new(0),
                floor: AtomicU64::new(0),
            }),
            data,
            mask: words - 1,
            slack: slack_for(words),
            max_payload: max_payload_for(words),
        }
    }

    /// This ring, its timestamps from `clock` (a ring not written yet).
    pub(crate) fn with_clock(mut self, clock: Clock) -> Ring {
        self.w.0.clock = clock;
        self
    }

    /// Where the ring's timestamps come from.
    pub(crate) fn clock(&self) -> Clock {
        self.w.clock
    }

    /// Whether the ring's words are lent (see [`Ring::borrowed`]).
    pub(crate) fn is_borrowed(&self) -> bool {
        matches!(self.data, Words::Borrowed(..))
    }

    /// The ring's data words (slot `p & mask` holds position `p`).
    pub(crate) fn data(&self) -> &[AtomicU64] {
        &self.data
    }

    /// The positions and loss counters a quiescent ring would save: the tail word,
    /// the commit position, and the events overwritten, dropped and read.
    pub(crate) fn saved_state(&self) -> [u64; 5] {
        let s = self.counts();
        [self.tail.load(Relaxed), self.commit.load(Relaxed), s.overrun, s.dropped, s.read]
    }

    /// A ring of `src.len()` words holding a copy of `src`, with the positions and loss
    /// counters of [`Ring::saved_state`] and `entries` events between tail and commit,
    /// so that its statistics balance. Nobody writes to it (its writers would find it
    /// as it was saved, and go on from there).
    pub(crate) fn restored(
        src: &[AtomicU64],
        state: [u64; 5],
        entries: u64,
    ) -> Result<Ring, Error> {
        let ring = Ring::new(src.len() as u64)?;
        for (dst, word) in ring.data.iter().zip(src) {
            dst.store(word.load(Relaxed), Relaxed);
        }
        let [tail, commit, overrun, dropped, read] = state;
        ring.w.head.store(commit, Relaxed);
        ring.commit.store(commit, Relaxed);
        ring.tail.store(tail, Relaxed);
        let counters = &ring.counters[0];
        counters.committed.store(entries + overrun + read, Relaxed);
        counters.overrun.store(overrun, Relaxed);
        counters.dropped.store(dropped, Relaxed);
        ring.reader.read.store(read, Relaxed);
        Ok(ring)
    }

    /// Capacity in words.
    #[inline]
    pub(crate) fn words(&self) -> u64 {
        self.mask + 1
    }

    /// Largest payload a record of this ring may carry: an anchor and the record must
    /// fit in the ring together.
    #[inline]
    pub(crate) fn max_payload(&self) -> usize {
        self.max_payload
    }

    #[inline(always)]
    pub(crate) fn slot(&self, pos: u64) -> &AtomicU64 {
        at(&self.data, pos)
    }

    /// Whether the ring was found corrupt.
    #[inline]
    pub(crate) fn is_corrupt(&self) -> bool {
        self.w.corrupt.load(Relaxed)
    }

    fn mark_corrupt(&self) {
        self.w.corrupt.store(true, Relaxed);
    }

    // ----------------------------------------------------------------------------
    // Writer side. Runs only on the ring's CPU, from any context; nests like a stack
    // (one writer at a time without the platform's promise).
    // ----------------------------------------------------------------------------

    /// Writes one event of `len` payload bytes, which `fill` writes in place. `set`
    /// is (`mode`, `open`): `mode` gives the set's mode, read only if the write must
    /// make room; `open` is asked once the writer is inside the ring (`nest` raised):
    /// `false` leaves it, nothing written (`WriteError::Off`). `platform` gives
    /// the ring's clock its readings ([`Clock`]), `limit` the room a [`RecordWriter`]
    /// reports at its start (at least `len`: the limit the payload was measured under,
    /// so strings are cut the same way). Bytes `fill` leaves unwritten are zero.
    #[inline]
    pub(crate) fn write_with<P: Platform>(
        &self,
        (mode, open): (impl Fn() -> Mode, impl Fn() -> bool),
        platform: &P,
        tag: Tag,
        len: usize,
        limit: usize,
        fill: impl FnOnce(&mut RecordWriter<'_>),
    ) -> Result<(), WriteError> {
        // Read before the reservation's atomics, so it is read once.
        let data = &*self.data;
        let (depth, at_hdr, hdr) = self.reserve(mode, open, platform, tag, len)?;
        let alone = one_at_a_time::<P>();
        // If `fill` unwinds (host builds), the reservation stays padding rather than
        // leaving the ring's nesting depth raised.
        let abandon = Abandon { ring: self, depth, alone };
        let mut writer = RecordWriter {
            data,
            pos: at_hdr + 1,
            end: at_hdr + record_words(len),
            partial: 0,
            fill: 0,
            written: 0,
            len,
            limit: limit.max(len),
        };
        fill(&mut writer);
        writer.finish();
        // The record becomes an event only now: a write a panic stops before this
        // point stays padding (see `seal`).
        at(data, at_hdr).store(hdr, Relaxed);
        core::mem::forget(abandon);
        self.commit_event(depth, alone);
        Ok(())
    }

    /// Counts a write dropped for nesting too deep, found before it reached the ring
    /// (its section could not count it). Rare: a real read-modify-write.
    pub(crate) fn drop_too_deep(&self) {
        self.w.deep_dropped.fetch_add(1, Relaxed);
    }

    /// Counts a refused write (see [`Refusal`]). Rare: a real read-modify-write.
    pub(crate) fn refuse(&self, why: Refusal) {
        self.w.refused[why as usize].fetch_add(1, Relaxed);
    }

    /// Reserves space for a record of `len` payload bytes tagged `tag` and writes
    /// its header as padding's (and an anchor before it if needed). Returns the
    /// writer's depth, the header's position and the event's header; the caller
    /// fills the payload, stores the event's header and calls [`Ring::commit_event`],
    /// or leaves the padding ([`Abandon`]). On error nothing is reserved and the depth
    /// is left.
    ///
    /// Writers nest like a stack only on a platform that gives [`Platform::PROMISE`].
    /// Without it, two callers sharing a CPU index may write at once, so the ring
    /// takes one writer at a time: entry is a compare-and-swap of `nest` from 0 to 1,
    /// and a write that finds another inside (another caller's, or one it interrupted)
    /// is dropped and counted as nested too deep.
    #[inline]
    pub(crate) fn reserve<P: Platform>(
        &self,
        mode: impl Fn() -> Mode,
        open: impl Fn() -> bool,
        platform: &P,
        tag: Tag,
        len: usize,
    ) -> Result<(usize, u64, u64), WriteError> {
        let w = &self.w;
        let data = &*self.data;
        let depth = w.nest.load(Relaxed);
        let alone = one_at_a_time::<P>();
        // Acquire, without the promise: the writer that left before us may have run
        // on another thread, and we go on from its `head` and counters.
        if depth >= MAX_DEPTH
            || alone && (depth != 0 || w.nest.compare_exchange(0, 1, Acquire, Relaxed).is_err())
        {
            // Several depths above MAX_DEPTH (or sharers of the index) may race here,
            // hence a real RMW.
            w.deep_dropped.fetch_add(1, Relaxed);
            return Err(WriteError::Dropped);
        }
        if !alone {
            // Load and store are an exact increment: an interrupt that arrives in
            // between restores `nest` before it returns (writers nest like a stack).
            w.nest.store(depth + 1, Relaxed);
        }
        signal_fence();
        preempt_point(Point::Entered);
        if !open() {
            self.leave(depth, alone);
            return Err(WriteError::Off);
        }
        if w.corrupt.load(Relaxed) {
            self.leave(depth, alone);
            self.refuse(Refusal::Corrupt);
            return Err(WriteError::Corrupt);
        }
        let words = record_words(len);
        let clock = w.clock;
        let (pos, ts, anchor) = loop {
            let pos = w.head.load(Relaxed);
            // The clock is read inside the loop: if an interrupt reserves between this
            // read and our CAS, the CAS fails and we read it again, so timestamps never
            // decrease in position order.
            let ts = clock.stamp(platform);
            let anchor = ts_hi(ts) != w.cur_hi.load(Relaxed);
            let end = pos + words + if anchor { ANCHOR_WORDS } else { 0 };
            if end > w.limit.load(Relaxed) {
                if !self.make_room(mode(), pos, end, depth) {
                    bump(&self.counters[depth].dropped, 1);
                    self.leave(depth, alone);
                    return Err(WriteError::Dropped);
                }
            } else {
                #[cfg(test)]
                self.check_limit(pos, end);
            }
            preempt_point(Point::Reserving);
            if w.head.compare_exchange(pos, end, Relaxed, Relaxed).is_ok() {
                break (pos, ts, anchor);
            }
        };
        preempt_point(Point::Claimed);
        if anchor {
            w.cur_hi.store(ts_hi(ts), Relaxed);
        }
        // Release fence (write side of the seqlock-style validation): every claim of
        // space we observed above (loads of `tail`, our reclaim CAS) is ordered before
        // the stores into that space below. A reader that copies a word we store and
        // then runs fence(Acquire) therefore sees `tail` past the slot, and discards
        // its copy (iterator) or fails its claim (consumer).
        fence(Release);
        let mut p = pos;
        if anchor {
            at(data, p).store(header(Tag { id: ANCHOR_ID, ..tag }, 8, ts), Relaxed);
            at(data, p + 1).store(ts, Relaxed);
            p += ANCHOR_WORDS;
        }
        // Padding's header until the record is filled: a write a panic stops stays
        // padding (see `seal`).
        at(data, p).store(header(Tag { id: PAD_ID, ..tag }, len, ts), Relaxed);
        preempt_point(Point::Reserved);
        Ok((depth, p, header(tag, len, ts)))
    }

    /// Counts the reserved event as committed and finishes it (`alone`: the ring takes
    /// one writer at a time, see [`Ring::reserve`]).
    #[inline]
    fn commit_event(&self, depth: usize, alone: bool) {
        preempt_point(Point::Filled);
        bump(&self.counters[depth].committed, 1);
        self.leave(depth, alone);
    }

    /// Leaves the write path at `depth`. The outermost writer (depth 0) publishes
    /// everything reserved so far, including records of writers that interrupted it
    /// (none if `alone`: it then publishes its own and lets the next writer in).
    #[inline]
    fn leave(&self, depth: usize, alone: bool) {
        let w = &self.w;
        signal_fence();
        if depth != 0 {
            w.nest.store(depth, Relaxed);
            return;
        }
        loop {
            let h = w.head.load(Relaxed);
            preempt_point(Point::Publishing);
            // Release: pairs with the readers' Acquire load of `commit`; the records
            // below `h` (all stored by this CPU, in program order before this) are
            // complete when a reader sees `h`.
            self.commit.store(h, Release);
            signal_fence();
            // Release: a clear that sees no writer (`writing`, Acquire) sees every
            // record and count this CPU's writers made (a plain store on x86).
            w.nest.store(0, Release);
            signal_fence();
            preempt_point(Point::Committed);
            // Alone, no one reserved while we were inside; a writer reserving now is
            // the next one in, which publishes its own record.
            if alone {
                return;
            }
            // An interrupt that reserved after our load of `head` saw nest == 1 and left
            // its record for us to publish: go round again.
            if w.head.load(Relaxed) == h {
                return;
            }
            w.nest.store(1, Relaxed);
            signal_fence();
        }
    }

    /// Seals the ring for a panic: the writes of this CPU in progress (those the
    /// caller interrupted) will never finish, so their records stay padding and
    /// everything reserved so far is published, the records of the writers that
    /// interrupted them among it (they finished). Runs on the ring's CPU, from a
    /// context that never returns to the writes it interrupted (a panic, or the NMI
    /// that stops a CPU for one); returns how many writes it found stopped. `now` is
    /// the ring's clock now; `known` tells the event ids its writers use. When it
    /// cannot read the words (below), it counts them as one stopped write and returns
    /// 1; [`RingStats::unreadable`] says how much was left out.
    ///
    /// A write stores its header as padding's right after its reservation, and the
    /// event's once the payload is in (`reserve`, `write_with`). One stopped in
    /// between left the words as they were: an older record's, or zero, or payload.
    /// So every word from `commit` on must read as a record written there since:
    /// padding, an anchor, or a known event, fitting below `head`, stamped no earlier
    /// than the record before it and no later than `now`. If one does not, none of
    /// them is trusted: they become padding, lost and counted
    /// ([`RingStats::unreadable`]).
    pub(crate) fn seal(&self, now: u64, known: &dyn Fn(u16) -> bool) -> u64 {
        let w = &self.w;
        // Relaxed: only this CPU's writers store these, and they are below us.
        let head = w.head.load(Relaxed);
        let commit = self.commit.load(Relaxed);
        if head == commit {
            return 0;
        }
        let stopped = match self.stopped_writes(commit, head, now, known) {
            Some(stopped) => stopped,
            None => {
                w.unreadable.fetch_add(head - commit, Relaxed);
                let mut p = commit;
                while p < head {
                    let words = (head - p).min(MAX_PAYLOAD as u64 / 8 + 1);
                    let len = (words - 1) as usize * 8;
                    let pad = header(Tag { id: PAD_ID, ctx: Context::UNKNOWN }, len, 0);
                    self.slot(p).store(pad, Relaxed);
                    p += words;
                }
                // The lost words may hold the anchor of the hi writers now assume.
                w.cur_hi.store(u64::MAX, Relaxed);
                1
            }
        };
        w.stopped.fetch_add(stopped, Relaxed);
        // Release: as in `leave`, the records below `head` are complete for a reader
        // that sees it.
        self.commit.store(head, Release);
        stopped
    }

    /// The seal's walk over `[commit, head)` (see [`Ring::seal`]): how many records
    /// are padding, or `None` if a word there is not a record written since `commit`,
    /// or if the records below `commit` cannot be dated ([`Ring::stamp_at`]).
    fn stopped_writes(
        &self,
        commit: u64,
        head: u64,
        now: u64,
        known: &dyn Fn(u16) -> bool,
    ) -> Option<u64> {
        let (mut hi, mut before) = self.stamp_at(commit)?;
        let (mut p, mut stopped) = (commit, 0);
        while p < head {
            let word = self.slot(p).load(Relaxed);
            if word == 0 || Header::decode(word).len > self.max_payload {
                return None;
            }
            let found = decode(|q| self.slot(q).load(Relaxed), p, hi, head);
            let ts = match found {
                Found::Anchor { ts, .. } => ts,
                Found::Pad { ts, .. } => {
                    stopped += 1;
                    ts
                }
                Found::Event { id, ts, .. } if known(id) => ts,
                _ => return None,
            };
            if ts < before || ts > now {
                return None;
            }
            before = ts;
            (p, hi) = found.next(p, hi);
        }
        Some(stopped)
    }

    /// The hi in effect at `commit` and the newest stamp of an event or anchor below
    /// it, or the ring's floor if that is newer, by a walk from the tail validated
    /// as a reader's; `None` if the tail moved under every try, if a validated walk
    /// met words that are no record, or if more than [`STAMP_WALK_WORDS`] lie between
    /// the tail and `commit` (the seal runs in the NMI that stops a CPU, while the
    /// panicking one waits).
    fn stamp_at(&self, commit: u64) -> Option<(u64, u64)> {
        if commit - self.tail_near(commit).0 > STAMP_WALK_WORDS {
            return None;
        }
        for _ in 0..4 {
            match self.walk_committed(commit) {
                (walked, true) if walked.bad => return None,
                (walked, true) => {
                    return Some((walked.hi, walked.newest.max(self.reader.floor.load(Relaxed))));
                }
                _ => {}
            }
        }
        None
    }

    /// Test builds: a record the limit let through without looking at `tail` has the
    /// room `tail` gives it (the limit never overstates the room, `tail` only grows).
    #[cfg(test)]
    fn check_limit(&self, pos: u64, end: u64) {
        let (tail, _) = unpack_tail(pos, self.tail.load(Relaxed));
        assert!(end <= tail + self.words(), "the limit overstated the room: {end} > {tail} + cap");
    }

    /// Whether a record reserved from `pos` may end at `end`: `tail` leaves room, or
    /// (overwrite mode) the oldest records are reclaimed to make it. Keeps the tail
    /// it found in `limit`. Counts a commit overrun, not the drop.
    fn make_room(&self, mode: Mode, pos: u64, end: u64, depth: usize) -> bool {
        let cap = self.words();
        let need = end.saturating_sub(cap);
        // Relaxed: the fence(Release) after the reservation orders this observation
        // before our stores (see `reserve`).
        let (mut tail, _) = unpack_tail(pos, self.tail.load(Relaxed));
        if tail < need {
            if mode == Mode::Discard {
                return false;
            }
            match self.reclaim(pos, need, depth) {
                Ok(reclaimed) => tail = reclaimed,
                Err(()) => {
                    bump(&self.counters[depth].commit_overrun, 1);
                    return false;
                }
            }
        }
        self.w.limit.store(tail + cap, Relaxed);
        true
    }

    /// Overwrite mode: claims the oldest records until `tail >= need` (plus slack),
    /// and returns the tail then. `Err` when the space is held by uncommitted records
    /// (a commit overrun).
    fn reclaim(&self, pos: u64, need: u64, depth: usize) -> Result<u64, ()> {
        loop {
            // Relaxed: the fence(Release) after the reservation orders this observation
            // before our stores (see `reserve`).
            let old = self.tail.load(Relaxed);
            let (tail, mut hi) = unpack_tail(pos, old);
            if tail >= need {
                return Ok(tail);
            }
            // Relaxed: `commit` is stored only by writers of this CPU (program order).
            let commit = self.commit.load(Relaxed);
            let target = need + self.slack;
            let (mut p, mut events) = (tail, 0);
            let end = target.min(commit);
            while p < end {
                let h = Header::decode(self.slot(p).load(Relaxed));
                // Events first: the reserved ids (padding, anchors) are the largest.
                if h.id < PAD_ID {
                    events += 1;
                } else if h.id == ANCHOR_ID {
                    hi = ts_hi(self.slot(p + 1).load(Relaxed));
                }
                p += h.words();
                preempt_point(Point::Walking);
            }
            // Conclude nothing from a walk whose start was claimed meanwhile: a nested
            // writer may have reclaimed from the same tail and written over the
            // records we read, so our headers may be its payload. Walk again.
            if self.tail.load(Relaxed) != old {
                continue;
            }
            if p > commit {
                // A committed header pointed past the commit position: the structure
                // is broken. Stop writing to this ring instead of making it worse.
                self.mark_corrupt();
                return Err(());
            }
            if p < need {
                return Err(());
            }
            preempt_point(Point::Reclaiming);
            // Relaxed CAS: whoever wins owns the records in [tail, p). The consumer
            // copies before its own CAS; the fence(Release) in `reserve` orders this
            // CAS before our overwriting stores.
            if self.tail.compare_exchange(old, pack_tail(p, hi), Relaxed, Relaxed).is_ok() {
                bump(&self.counters[depth].overrun, events);
                return Ok(p);
            }
        }
    }

    // ----------------------------------------------------------------------------
    // Reader side. Any CPU, concurrently with the writers.
    // ----------------------------------------------------------------------------

    /// The published commit position. Acquire: pairs with the Release store in
    /// `leave`, so the records below it are complete in this reader's view.
    #[inline]
    pub(crate) fn commit_pos(&self) -> u64 {
        self.commit.load(Acquire)
    }

    /// The tail: position of the oldest record and the hi in effect there.
    #[inline]
    pub(crate) fn tail_near(&self, near: u64) -> (u64, u64) {
        // Relaxed: readers validate copies with a fence(Acquire) before this load (see
        // `copy`), and use the value only as a bound.
        unpack_tail(near, self.tail.load(Relaxed))
    }

    /// Copies the record at `pos` (below `limit`, the commit position the caller
    /// loaded) into `out`. The copy may race a writer; the caller must validate it
    /// (fence(Acquire), then check the tail) before trusting it.
    pub(crate) fn copy(&self, pos: u64, hi: u64, limit: u64, out: Option<&mut [u8]>) -> Found {
        let found = decode(|p| self.slot(p).load(Relaxed), pos, hi, limit);
        let (Found::Event { len, .. }, Some(out)) = (found, out) else { return found };
        let Some(dst) = out.get_mut(..len) else { return Found::Bad(Malformed::TooLong) };
        let mut p = pos + 1;
        let (chunks, rest) = dst.as_chunks_mut::<8>();
        for c in chunks {
            *c = self.slot(p).load(Relaxed).to_le_bytes();
            p += 1;
        }
        if !rest.is_empty() {
            let n = rest.len();
            rest.copy_from_slice(&self.slot(p).load(Relaxed).to_le_bytes()[..n]);
        }
        found
    }

    /// Copies the oldest record into `out` without claiming it (the consuming
    /// reader's first step). `Err(Corrupt)` marks the ring corrupt.
    pub(crate) fn peek(&self, out: &mut [u8]) -> Result<Option<Peeked>, Error> {
        loop {
            let old = self.tail.load(Relaxed);
            let commit = self.commit_pos();
            let (tail, hi) = unpack_tail(commit, old);
            if tail >= commit {
                return Ok(None);
            }
            preempt_point(Point::Peeking);
            let found = self.copy(tail, hi, commit, Some(out));
            // Acquire fence (read side of the validation): the copy above is ordered
            // before the claim (`claim`). A writer overwrites only after its own claim
            // (CAS on `tail`) and a Release fence; had we copied any of its stores,
            // its claim would be visible to our CAS, which would then fail.
            fence(Acquire);
            if let Found::Bad(_) = found {
                if self.tail.load(Relaxed) == old {
                    // Nobody claimed the record, so the copy was of committed data.
                    self.mark_corrupt();
                    return Err(Error::Corrupt);
                }
                continue;
            }
            let (next, next_hi) = found.next(tail, hi);
            let event = match found {
                Found::Event { id, ctx, len, ts, .. } => Some(Copied { id, ctx, len, ts }),
                _ => None,
            };
            return Ok(Some(Peeked { old, new: pack_tail(next, next_hi), event }));
        }
    }

    /// Claims a record [`Ring::peek`] copied: `true` if it was still the oldest, so
    /// the copy is intact and the record is the consumer's (an event counts as read);
    /// `false` if a writer reclaimed it meanwhile.
    pub(crate) fn claim(&self, peeked: &Peeked) -> bool {
        // Relaxed CAS: the fences order the copy; winning it means the record was
        // intact and is ours, losing means a writer took it.
        let won = self.tail.compare_exchange(peeked.old, peeked.new, Relaxed, Relaxed).is_ok();
        if won && let Some(event) = peeked.event {
            bump(&self.reader.read, 1);
            self.reader.floor.store(event.ts, Relaxed);
        }
        won
    }

    /// Takes the oldest event (the consuming reader). Anchors and padding on the way
    /// are consumed silently. `Err(Corrupt)` marks the ring corrupt.
    pub(crate) fn consume(&self, out: &mut [u8]) -> Result<Option<Copied>, Error> {
        while let Some(peeked) = self.peek(out)? {
            if self.claim(&peeked)
                && let Some(event) = peeked.event
            {
                return Ok(Some(event));
            }
        }
        Ok(None)
    }

    /// Tries to become the ring's one consuming reader.
    pub(crate) fn acquire_consumer(&self) -> Result<(), Error> {
        // Acquire: orders after the previous consumer's Release in `release_consumer`,
        // whose `read` count this consumer continues.
        match self.reader.consumer.compare_exchange(false, true, Acquire, Relaxed) {
            Ok(_) => Ok(()),
            Err(_) => Err(Error::Busy),
        }
    }

    /// Gives up the consuming-reader role.
    pub(crate) fn release_consumer(&self) {
        // Release: the next consumer continues our `read` count (see acquire).
        self.reader.consumer.store(false, Release);
    }

    /// Events lost so far: overwritten (overwrite mode) or dropped (discard mode,
    /// commit overruns). What a consuming reader reports as gaps.
    pub(crate) fn lost(&self) -> u64 {
        let s = self.counts();
        s.overrun + s.dropped
    }

    /// Counts the events in the ring by walking it, and finds the oldest event's
    /// timestamp. Exact when the ring is quiescent; otherwise a recent value: a walk
    /// raced by writers is retried a few times, then its count is returned as is (so
    /// a busy ring cannot keep a reader of the statistics walking forever). A
    /// validated walk that meets words that are no record marks the ring corrupt.
    pub(crate) fn count_entries(&self) -> (u64, Option<u64>) {
        const ATTEMPTS: usize = 4;
        let mut walked = Walked::default();
        for _ in 0..ATTEMPTS {
            let valid;
            (walked, valid) = self.walk_committed(self.commit_pos());
            if valid {
                if walked.bad {
                    self.mark_corrupt();
                }
                break;
            }
        }
        (walked.entries, walked.oldest)
    }

    /// One walk over the committed records from the tail to `commit`, validated as a
    /// reader's: what it found, and whether the tail stayed where the walk began (no
    /// writer claimed a record walked, so what it found was there).
    fn walk_committed(&self, commit: u64) -> (Walked, bool) {
        let (tail, mut hi) = self.tail_near(commit);
        let (mut p, mut walked) = (tail, Walked::default());
        while p < commit {
            let found = self.copy(p, hi, commit, None);
            match found {
                Found::Bad(_) => {
                    walked.bad = true;
                    break;
                }
                Found::Event { ts, .. } => {
                    walked.entries += 1;
                    walked.oldest.get_or_insert(ts);
                    walked.newest = walked.newest.max(ts);
                }
                Found::Anchor { ts, .. } => walked.newest = walked.newest.max(ts),
                Found::Pad { .. } => {}
            }
            (p, hi) = found.next(p, hi);
        }
        walked.hi = hi;
        // Acquire: validates the walk, as in `consume`: unchanged tail means no
        // writer claimed any of the records walked.
        fence(Acquire);
        (walked, self.tail_near(commit).0 == tail)
    }

    /// The counters, summed over the nesting depths, without walking the ring.
    fn counts(&self) -> RingStats {
        let mut s = RingStats::default();
        for c in self.counters.iter() {
            s.dropped += c.dropped.load(Relaxed);
            s.commit_overrun += c.commit_overrun.load(Relaxed);
            s.overrun += c.overrun.load(Relaxed);
            s.written += c.committed.load(Relaxed);
        }
        let r = |why: Refusal| self.w.refused[why as usize].load(Relaxed);
        s.refused = Refused {
            too_large: r(Refusal::TooLarge),
            reserved_id: r(Refusal::ReservedId),
            bad_cpu: r(Refusal::BadCpu),
            corrupt: r(Refusal::Corrupt),
        };
        s.dropped += self.w.deep_dropped.load(Relaxed) + s.refused.total();
        s.written += s.dropped;
        s.read = self.reader.read.load(Relaxed);
        s
    }

    /// The ring's statistics.
    pub(crate) fn stats(&self) -> RingStats {
        // Entries first, then the counters: each record the walk counts was counted as
        // written before its commit was published (and the walk's Acquire saw that), so
        // `entries <= written` even while writers run. The other order let events
        // written between the two reads show as entries never written.
        let (entries, oldest) = self.count_entries();
        let mut s = self.counts();
        s.entries = entries;
        s.oldest_ts = oldest;
        let commit = self.commit_pos();
        let (tail, _) = self.tail_near(commit);
        s.bytes = commit.saturating_sub(tail) * 8;
        // Relaxed: a recent value, as every field of a ring with writers.
        s.unpublished = self.w.head.load(Relaxed).saturating_sub(commit) * 8;
        s.stopped = self.w.stopped.load(Relaxed);
        s.unreadable = self.w.unreadable.load(Relaxed) * 8;
        s.capacity = self.words() * 8;
        s
    }

    /// Whether a writer is between its reservation and its commit (from any CPU).
    /// Acquire: once it says no, the records and counts of the writer that left are
    /// seen (pairs with the Release store of `nest` in `leave`).
    pub(crate) fn writing(&self) -> bool {
        self.w.nest.load(Acquire) != 0
    }

    /// Empties the ring and zeroes its counters. The caller guarantees that no writer
    /// is inside this ring (exclusive access, or recording off and writers drained)
    /// and holds the consumer role (see [`Ring::acquire_consumer`]), so no consuming
    /// reader runs. Positions keep increasing, so concurrent iterators stay safe.
    pub(crate) fn reset_locked(&self) {
        // The words stay: a panic's seal must not take them for records written
        // after this (see `floor`).
        if let Some((_, newest)) = self.stamp_at(self.commit.load(Relaxed)) {
            self.reader.floor.store(newest, Relaxed);
        }
        let head = self.w.head.load(Relaxed);
        // Relaxed: no writer or consumer runs; iterators only need positions to keep
        // increasing, which they do.
        self.commit.store(head, Relaxed);
        // The next record gets an anchor (cur_hi reset), so the hi stored here is moot.
        self.tail.store(pack_tail(head, 0), Relaxed);
        self.w.cur_hi.store(u64::MAX, Relaxed);
        self.w.deep_dropped.store(0, Relaxed);
        self.w.refused.iter().for_each(|c| c.store(0, Relaxed));
        self.w.corrupt.store(false, Relaxed);
        self.w.stopped.store(0, Relaxed);
        self.w.unreadable.store(0, Relaxed);
        for c in self.counters.iter() {
            c.reset();
        }
        self.reader.read.store(0, Relaxed);
        self.reader.lost_reported.store(0, Relaxed);
    }

    /// Losses already reported by consumers (see `ReaderSide::lost_reported`).
    pub(crate) fn lost_reported(&self) -> u64 {
        self.reader.lost_reported.load(Relaxed)
    }

    /// Records that consumers have reported losses up to `lost` (the one consumer).
    pub(crate) fn set_lost_reported(&self, lost: u64) {
        self.reader.lost_reported.store(lost, Relaxed);
    }
}

/// Abandons a reservation if the code filling it unwinds: its header is still
/// padding's, so the write just leaves.
struct Abandon<'a> {
    ring: &'a Ring,
    depth: usize,
    alone: bool,
}

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        self.ring.leave(self.depth, self.alone);
    }
}

/// A record reserved in a ring, filled in place: payload bytes go straight into the
/// ring's words. It exists only while the write that reserved it runs (the closure of
/// [`crate::ring::Buffer::write_with`], or a tracepoint's encoder), so it cannot be kept,
/// leaked or finished out of order.
pub struct RecordWriter<'a> {
    data: &'a [AtomicU64],
    /// Position of the next word to store.
    pos: u64,
    /// Position after the record's last word.
    end: u64,
    /// Bytes of the next word gathered so far, little endian.
    partial: u64,
    /// How many bytes `partial` holds (0 to 7).
    fill: usize,
    /// Payload bytes written.
    written: usize,
    /// Payload bytes reserved.
    len: usize,
    /// The room reported at the start (see [`Ring::write_with`]).
    limit: usize,
}

impl RecordWriter<'_> {
    #[inline(always)]
    fn store(&mut self, word: u64) {
        at(self.data, self.pos).store(word, Relaxed);
        self.pos += 1;
    }

    /// Stores a whole payload, encoded and zero-padded to whole words, into a record
    /// nothing was written into yet; words beyond the record are left out.
    #[inline(always)]
    pub(crate) fn put_words(&mut self, words: &[[u8; 8]]) {
        for word in words {
            if self.pos == self.end {
                break;
            }
            self.store(u64::from_le_bytes(*word));
        }
        self.written = self.len;
    }

    /// Stores the last partial word and zeroes the words never written.
    #[inline]
    fn finish(&mut self) {
        if self.fill > 0 {
            let word = self.partial;
            self.store(word);
        }
        while self.pos < self.end {
            self.store(0);
        }
    }
}

impl Sink for RecordWriter<'_> {
    #[inline(always)]
    fn room(&self) -> usize {
        self.limit - self.written
    }

    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(self.len - self.written);
        self.written += n;
        let mut bytes = &bytes[..n];
        if self.fill == 0 {
            let (words, rest) = bytes.as_chunks::<8>();
            for w in words {
                self.store(u64::from_le_bytes(*w));
            }
            bytes = rest;
        }
        for &b in bytes {
            self.partial |= u64::from(b) << (self.fill * 8);
            self.fill += 1;
            if self.fill == 8 {
                let word = self.partial;
                self.store(word);
                (self.partial, self.fill) = (0, 0);
            }
        }
    }

    #[inline(always)]
    fn put_u64(&mut self, v: u64) {
        if self.fill == 0 && self.len - self.written >= 8 {
            self.written += 8;
            self.store(v);
        } else {
            self.put(&v.to_le_bytes());
        }
    }
}
