//! Readers: the non-consuming iterator, the consuming reader, and their k-way merge
//! across CPUs in timestamp order. They run on any CPU, concurrently with writers.

extern crate alloc;

use crate::context::Context;
use crate::error::Error;
use crate::ring::per_cpu::{Copied, Found, Peeked, Ring};
use crate::ring::record::MAX_PAYLOAD;
use crate::sync::{Ordering::Acquire, fence};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::ops::Range;

/// One event as a reader returns it; the payload borrows the reader's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// CPU whose ring held the event.
    pub cpu: usize,
    /// Timestamp, in the unit of the set's [`Clock`](crate::Clock): ns for the
    /// platform's clock and its kinds, a count for `counter` and `uptime`, cycles for
    /// `x86-tsc`.
    pub ts: u64,
    /// Event id.
    pub id: u16,
    /// What the CPU was running when it wrote the event.
    pub context: Context,
    /// Events of this CPU lost (overwritten) since the previous record this reader
    /// returned for the CPU (consuming reader only; always 0 for iterators).
    pub lost: u64,
    /// The payload.
    pub payload: &'a [u8],
}

fn scratch() -> Result<Vec<u8>, Error> {
    let mut v = Vec::new();
    v.try_reserve_exact(MAX_PAYLOAD).map_err(|_| Error::NoMemory)?;
    v.resize(MAX_PAYLOAD, 0);
    Ok(v)
}

/// A per-CPU source of records, for [`Merged`].
pub trait Cursor {
    /// Fetches the next event: its metadata, the payload left in [`Cursor::payload`].
    /// A consuming cursor only copies it: [`Cursor::accept`] takes it.
    fn fetch(&mut self) -> Option<Meta>;
    /// Takes the last fetched event: `Some(lost)`, the events lost before it (see
    /// [`RecordRef::lost`]), or `None` if it is gone (a writer reclaimed it) and the
    /// cursor must fetch again.
    fn accept(&mut self) -> Option<u64>;
    /// The payload buffer (valid for the last fetched event): its first
    /// [`Meta::len`] bytes are the event's.
    fn payload(&self) -> &[u8];
}

/// Metadata of a fetched event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    /// CPU of the ring.
    pub cpu: usize,
    /// Timestamp.
    pub ts: u64,
    /// Event id.
    pub id: u16,
    /// The writer's context.
    pub context: Context,
    /// Payload length.
    pub len: usize,
    /// Events lost before this one (see [`RecordRef::lost`]).
    pub lost: u64,
}

impl Meta {
    /// The record this metadata describes, with `lost` events before it and its
    /// payload in `payload`.
    fn record(self, lost: u64, payload: &[u8]) -> RecordRef<'_> {
        RecordRef { cpu: self.cpu, ts: self.ts, id: self.id, context: self.context, lost, payload }
    }
}

/// The index of the earliest of `stamps` (`None` for a source with nothing),
/// ties to the lower index: the next record of a merge in timestamp order.
fn earliest(stamps: impl Iterator<Item = Option<u64>>) -> Option<usize> {
    let mut best: Option<(usize, u64)> = None;
    for (i, ts) in stamps.enumerate() {
        if let Some(ts) = ts
            && best.is_none_or(|(_, b)| ts < b)
        {
            best = Some((i, ts));
        }
    }
    best.map(|(i, _)| i)
}

/// Where a non-consuming read of one ring stands: the position of the next record,
/// the hi in effect there, and the commit position seen at its start. It holds no
/// buffer: [`RingIter`] gives it one, a [`ReadScratch`]'s merge lends one.
#[derive(Clone, Copy, Debug)]
struct Walk {
    pos: u64,
    hi: u64,
    end: u64,
    skipped: bool,
}

impl Walk {
    fn new(ring: &Ring) -> Self {
        let end = ring.commit_pos();
        let (pos, hi) = ring.tail_near(end);
        Walk { pos, hi, end, skipped: false }
    }

    /// The next event of `ring` (CPU `cpu`) and its position, its payload copied into
    /// `out` if given; `None` at the end. Records overwritten under the walk are
    /// skipped (it resynchronises at the new oldest record); a record intact and not
    /// well formed (corruption) ends it.
    fn fetch(
        &mut self,
        ring: &Ring,
        cpu: usize,
        mut out: Option<&mut [u8]>,
    ) -> Option<(Meta, u64)> {
        loop {
            if self.pos >= self.end {
                return None;
            }
            let found = ring.copy(self.pos, self.hi, self.end, out.as_deref_mut());
            // Acquire: orders the copy before the tail check (the writer claims space
            // before its Release fence and its stores; see ring.rs).
            fence(Acquire);
            let (tail, hi) = ring.tail_near(self.pos);
            if tail > self.pos {
                // Claimed (overwritten or consumed) under us: resynchronise.
                (self.pos, self.hi, self.skipped) = (tail, hi, true);
                continue;
            }
            if let Found::Bad(_) = found {
                // Intact and still bad: corrupt. Stop.
                self.pos = self.end;
                return None;
            }
            let at = self.pos;
            (self.pos, self.hi) = found.next(at, self.hi);
            if let Found::Event { id, ctx, len, ts, .. } = found {
                return Some((Meta { cpu, ts, id, context: ctx, len, lost: 0 }, at));
            }
        }
    }

    /// Copies into `out` the payload of the event [`Walk::fetch`] found at `at`
    /// without copying it, and returns its length. `None` if the event is gone since
    /// (overwritten: skipped; the next fetch resynchronises) or is not well formed
    /// (corrupt: the walk ends).
    fn copy_payload(&mut self, ring: &Ring, at: u64, out: &mut [u8]) -> Option<usize> {
        let found = ring.copy(at, self.hi, self.end, Some(out));
        // Acquire: as in `fetch`.
        fence(Acquire);
        if ring.tail_near(at).0 > at {
            self.skipped = true;
            return None;
        }
        match found {
            Found::Event { len, .. } => Some(len),
            _ => {
                self.pos = self.end;
                None
            }
        }
    }
}

/// A non-consuming iterator over one ring (ftrace's `trace` file). It walks from the
/// oldest record to the commit position seen at creation; records overwritten under it
/// are skipped (it resynchronises at the new oldest record), never returned torn.
pub struct RingIter<'a> {
    ring: &'a Ring,
    cpu: usize,
    walk: Walk,
    buf: Vec<u8>,
}

impl<'a> RingIter<'a> {
    pub(crate) fn new(ring: &'a Ring, cpu: usize) -> Result<Self, Error> {
        Ok(RingIter { ring, cpu, walk: Walk::new(ring), buf: scratch()? })
    }

    /// Whether records were overwritten under the iterator and skipped.
    pub fn skipped(&self) -> bool {
        self.walk.skipped
    }

    /// The next event, or `None` at the end.
    pub fn next_record(&mut self) -> Option<RecordRef<'_>> {
        let m = self.fetch()?;
        Some(m.record(0, &self.buf[..m.len]))
    }
}

impl Cursor for RingIter<'_> {
    fn accept(&mut self) -> Option<u64> {
        Some(0)
    }

    fn fetch(&mut self) -> Option<Meta> {
        self.walk.fetch(self.ring, self.cpu, Some(&mut self.buf)).map(|(meta, _)| meta)
    }

    fn payload(&self) -> &[u8] {
        &self.buf
    }
}

/// What reading a buffer's records takes, allocated ahead of the read, so that a
/// reader that must not allocate (a panic's dump) has it: a place per CPU and one
/// record's payload, where [`RingIter`]s take a payload buffer per CPU.
pub struct ReadScratch {
    heads: Vec<Head>,
    payload: Vec<u8>,
}

/// One CPU's walk in a [`ReadScratch`] merge, and the event it found next (not yet
/// returned, its payload not yet copied).
#[derive(Clone, Copy, Debug)]
struct Head {
    cpu: usize,
    walk: Walk,
    next: Option<(Meta, u64)>,
}

impl ReadScratch {
    /// Room to read up to `cpus` CPUs' records at once; `NoMemory` if the allocator
    /// cannot give it.
    pub fn new(cpus: usize) -> Result<Self, Error> {
        let mut heads = Vec::new();
        heads.try_reserve_exact(cpus).map_err(|_| Error::NoMemory)?;
        Ok(ReadScratch { heads, payload: scratch()? })
    }

    /// Calls `each` with the events of the rings of `cpus`, merged in timestamp order
    /// (ties: lower CPU first), while it returns true; `start` runs once every walk's
    /// end is fixed, before the first event. Not consuming; allocates nothing:
    /// `BadCpu` if `cpus` is not within `rings` or holds more CPUs than the scratch
    /// has room for. Each event's metadata is read ahead without its payload, which
    /// is copied into the one buffer when the event is returned (an event overwritten
    /// in between is skipped, as an iterator skips it).
    pub(crate) fn merge(
        &mut self,
        rings: &[Arc<Ring>],
        cpus: Range<usize>,
        start: impl FnOnce(),
        mut each: impl FnMut(&RecordRef<'_>) -> bool,
    ) -> Result<(), Error> {
        let rings = rings.get(cpus.clone()).ok_or(Error::BadCpu)?;
        if rings.len() > self.heads.capacity() {
            return Err(Error::BadCpu);
        }
        self.heads.clear();
        // Within the capacity reserved: no allocation.
        self.heads.extend(cpus.zip(rings).map(|(cpu, ring)| Head {
            cpu,
            walk: Walk::new(ring),
            next: None,
        }));
        start();
        loop {
            // One pass: each head fetches its next record if it has none, then offers
            // its stamp.
            let stamps = self.heads.iter_mut().zip(rings).map(|(head, ring)| {
                if head.next.is_none() {
                    head.next = head.walk.fetch(ring, head.cpu, None);
                }
                head.next.map(|(meta, _)| meta.ts)
            });
            let Some(i) = earliest(stamps) else { return Ok(()) };
            let head = &mut self.heads[i];
            let Some((meta, at)) = head.next.take() else { continue };
            // The length copied: within the buffer, as `copy` checks.
            let Some(len) = head.walk.copy_payload(&rings[i], at, &mut self.payload) else {
                continue;
            };
            if !each(&meta.record(0, &self.payload[..len])) {
                return Ok(());
            }
        }
    }
}

/// The consuming reader of one ring (ftrace's `trace_pipe`). One per ring at a time.
/// Each record carries the number of events lost (overwritten or dropped) since the
/// previous record consumed from the ring, by this consumer or an earlier one.
pub struct Consumer<'a> {
    ring: &'a Ring,
    cpu: usize,
    overrun_seen: u64,
    buf: Vec<u8>,
    /// The event fetched for a merge, copied, not yet taken.
    pending: Option<Peeked>,
}

impl<'a> Consumer<'a> {
    pub(crate) fn new(ring: &'a Ring, cpu: usize) -> Result<Self, Error> {
        let buf = scratch()?;
        ring.acquire_consumer()?;
        Ok(Consumer { ring, cpu, overrun_seen: ring.lost_reported(), buf, pending: None })
    }

    /// Takes the oldest event, or `None` if the ring is empty. `Err(Corrupt)` if the
    /// ring's structure is broken (the ring then takes no more writes).
    pub fn next_record(&mut self) -> Result<Option<RecordRef<'_>>, Error> {
        Ok(self.take()?.map(|m| m.record(m.lost, &self.buf[..m.len])))
    }

    /// Events lost since the last record returned, not yet reported with a record
    /// (for a reader that reached the end: ftrace prints them as a final gap).
    pub fn lost_pending(&self) -> u64 {
        self.ring.lost().wrapping_sub(self.overrun_seen)
    }

    /// Takes [`Consumer::lost_pending`]: reports those losses now, so no later
    /// record (of this consumer or the next) reports them again. Each record taken
    /// carries the same count: a writer on another CPU increments its counter just
    /// after its claim, so an in-flight increment is reported with the next record;
    /// the sum is exact.
    pub fn take_lost(&mut self) -> u64 {
        let lost_now = self.ring.lost();
        let lost = lost_now.wrapping_sub(self.overrun_seen);
        self.overrun_seen = lost_now;
        self.ring.set_lost_reported(lost_now);
        lost
    }

    /// The CPU of the ring.
    pub fn cpu(&self) -> usize {
        self.cpu
    }

    fn take(&mut self) -> Result<Option<Meta>, Error> {
        self.pending = None;
        let Some(Copied { id, ctx, len, ts }) = self.ring.consume(&mut self.buf)? else {
            return Ok(None);
        };
        Ok(Some(Meta { cpu: self.cpu, ts, id, context: ctx, len, lost: self.take_lost() }))
    }
}

impl Drop for Consumer<'_> {
    fn drop(&mut self) {
        self.ring.release_consumer();
    }
}

impl Cursor for Consumer<'_> {
    /// Copies the oldest event without taking it, so a merge dropped before
    /// returning it leaves it in the ring.
    fn fetch(&mut self) -> Option<Meta> {
        loop {
            let peeked = self.ring.peek(&mut self.buf).ok().flatten()?;
            let Some(Copied { id, ctx, len, ts }) = peeked.event else {
                // An anchor or padding: take it and look further.
                self.ring.claim(&peeked);
                continue;
            };
            self.pending = Some(peeked);
            return Some(Meta { cpu: self.cpu, ts, id, context: ctx, len, lost: 0 });
        }
    }

    fn accept(&mut self) -> Option<u64> {
        let peeked = self.pending.take()?;
        self.ring.claim(&peeked).then(|| self.take_lost())
    }

    fn payload(&self) -> &[u8] {
        &self.buf
    }
}

/// A k-way merge of per-CPU cursors in timestamp order (ties: lower CPU first).
pub struct Merged<C> {
    sources: Vec<(C, Option<Meta>)>,
}

impl<C: Cursor> Merged<C> {
    /// Merges `cursors` (one per CPU) in timestamp order.
    pub fn new(cursors: Vec<C>) -> Self {
        Merged { sources: cursors.into_iter().map(|c| (c, None)).collect() }
    }

    /// The merged cursors, for what they report besides records (lost events).
    pub fn cursors_mut(&mut self) -> impl Iterator<Item = &mut C> {
        self.sources.iter_mut().map(|(cursor, _)| cursor)
    }

    /// The next event across all CPUs, or `None` when every source is empty. A
    /// consuming merge takes only the event it returns: dropping the merge leaves
    /// the events it looked ahead at in their rings.
    pub fn next_record(&mut self) -> Option<RecordRef<'_>> {
        loop {
            for (c, peeked) in self.sources.iter_mut() {
                if peeked.is_none() {
                    *peeked = c.fetch();
                }
            }
            let best = earliest(self.sources.iter().map(|(_, peeked)| peeked.map(|m| m.ts)))?;
            let (c, peeked) = &mut self.sources[best];
            let m = peeked.take()?;
            // Reclaimed by a writer since it was fetched: fetch that source again.
            let Some(lost) = c.accept() else { continue };
            let payload = self.sources[best].0.payload();
            // A cursor's payload shorter than the length it fetched is given whole.
            return Some(m.record(lost, payload.get(..m.len).unwrap_or(payload)));
        }
    }
}
