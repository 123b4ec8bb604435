//! A buffer set: one ring per CPU, with the set's recording switch and mode. Each
//! instance owns one (two with a snapshot spare, in a recorder).

extern crate alloc;

use crate::error::{Error, WriteError};
use crate::platform::Platform;
use crate::ring::clock::Clock;
use crate::ring::per_cpu::{MIN_MAX_PAYLOAD, RecordWriter, Refusal, Ring, words_for};
use crate::ring::reader::{Consumer, Cursor, Merged, ReadScratch, RecordRef, RingIter};
use crate::ring::record::{MAX_EVENT_ID, Mode, Tag};
use crate::ring::stats::RingStats;
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, Ordering::*, fence};
use alloc::sync::Arc;
use alloc::vec::Vec;

/// How to build a buffer set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Number of CPUs (one ring each).
    pub cpus: usize,
    /// Bytes per CPU ring; rounded up to a power of two (at least 64).
    pub bytes_per_cpu: usize,
    /// What a full ring does.
    pub mode: Mode,
}

/// `Buffer::state` bit: recording is on (`tracing_on`).
const RECORDING: u32 = 1;
/// `Buffer::state` bit: a control operation is resetting the set; writes are ignored.
const PAUSED: u32 = 2;
/// `Buffer::state`, above [`PAUSED`]: how many [`Hold`]s keep writes off, in steps of
/// this (at most 63, [`HOLDS`]).
const HOLD: u32 = 4;
/// `Buffer::state`: the bits of the [`HOLD`] count.
const HOLDS: u32 = 0xfc;
/// `Buffer::state`: the bits a writer looks at; it records only when they read
/// exactly [`RECORDING`].
const WRITES: u32 = RECORDING | PAUSED | HOLDS;
/// `Buffer::state`, above [`WRITES`]: how many times [`Buffer::release_holds`] ran, in
/// steps of this (wrapping), so that a hold taken before knows it was counted out.
const RELEASE: u32 = 0x100;

/// A set of per-CPU rings: one instance's buffer.
///
/// Writers call [`Buffer::write`] (or [`Buffer::write_with`]) from any context on the
/// CPU the platform reports; readers on any CPU use [`Buffer::iter`],
/// [`Buffer::consumer`] and the merged forms.
pub struct Buffer<P> {
    platform: P,
    /// One ring per CPU. Shared, so that resizing one CPU's ring builds a new set
    /// that keeps the other CPUs' rings and what they hold.
    rings: Vec<Arc<Ring>>,
    /// [`RECORDING`], [`PAUSED`], the [`HOLD`] count and the [`RELEASE`] count: a
    /// writer records only when its [`WRITES`] bits read exactly `RECORDING`, one load.
    state: AtomicU32,
    overwrite: AtomicBool,
}

impl<P: Platform> Buffer<P> {
    /// Allocates a buffer set (fallibly), recording on, its timestamps from the
    /// local clock.
    pub fn new(platform: P, config: Config) -> Result<Self, Error> {
        Self::clocked(platform, config, Clock::Local)
    }

    /// [`Buffer::new`] with timestamps from `clock`.
    pub(crate) fn clocked(platform: P, config: Config, clock: Clock) -> Result<Self, Error> {
        let rings = alloc_rings(config.cpus, config.bytes_per_cpu, clock)?;
        Ok(Buffer {
            platform,
            rings,
            state: AtomicU32::new(RECORDING),
            overwrite: AtomicBool::new(config.mode == Mode::Overwrite),
        })
    }

    /// A set over lent per-CPU words, one slice per CPU (each a power of two of at
    /// least 64 bytes), recording on. What the words hold is ignored: the rings start
    /// empty. The set cannot be resized nor get a snapshot spare ([`Error::Fixed`]).
    /// Lent words back one ring at a time: words that overlap another's, in this set
    /// or another that lives, are refused ([`Error::Lent`]), as is a ring beyond the
    /// 1024 over lent words at once (`NoMemory`).
    pub fn over(
        platform: P,
        mode: Mode,
        per_cpu: impl IntoIterator<Item = &'static [AtomicU64]>,
    ) -> Result<Self, Error> {
        let mut rings = Vec::new();
        for words in per_cpu {
            rings.try_reserve(1).map_err(|_| Error::NoMemory)?;
            rings.push(Arc::new(Ring::borrowed(words)?));
        }
        Self::with_rings(platform, mode, rings)
    }

    /// A set of the given rings, recording on (`ZeroSize` without rings).
    pub(crate) fn with_rings(
        platform: P,
        mode: Mode,
        rings: Vec<Arc<Ring>>,
    ) -> Result<Self, Error> {
        if rings.is_empty() {
            return Err(Error::ZeroSize);
        }
        Ok(Buffer {
            platform,
            rings,
            state: AtomicU32::new(RECORDING),
            overwrite: AtomicBool::new(mode == Mode::Overwrite),
        })
    }

    /// The set's rings, one per CPU.
    pub(crate) fn rings(&self) -> &[Arc<Ring>] {
        &self.rings
    }

    /// Whether the set's rings live in lent memory (see [`Buffer::over`]).
    pub fn is_borrowed(&self) -> bool {
        self.rings.iter().any(|r| r.is_borrowed())
    }

    /// A set with no rings (an unallocated spare): writes fail with `BadCpu`.
    pub(crate) fn empty(platform: P) -> Self {
        Buffer {
            platform,
            rings: Vec::new(),
            state: AtomicU32::new(0),
            overwrite: AtomicBool::new(true),
        }
    }

    /// Whether the set has no rings (an unallocated spare).
    pub(crate) fn is_empty(&self) -> bool {
        self.rings.is_empty()
    }

    /// The platform the set was built with.
    pub fn platform(&self) -> &P {
        &self.platform
    }

    /// Where the set's timestamps come from (every ring of a set has the same
    /// clock: another clock is another set, as ftrace resets its buffers when the
    /// clock changes).
    pub fn clock(&self) -> Clock {
        self.rings.first().map_or(Clock::Local, |ring| ring.clock())
    }

    /// Number of CPUs (rings).
    pub fn cpus(&self) -> usize {
        self.rings.len()
    }

    /// Capacity of CPU 0's ring in bytes (every CPU's, unless one was resized alone).
    pub fn bytes_per_cpu(&self) -> usize {
        self.bytes_of(0).unwrap_or(0)
    }

    /// Capacity of CPU `cpu`'s ring in bytes.
    pub fn bytes_of(&self, cpu: usize) -> Option<usize> {
        self.rings.get(cpu).map(|r| (r.words() * 8) as usize)
    }

    /// Capacity of all the rings together, in bytes.
    pub fn total_bytes(&self) -> usize {
        self.rings.iter().map(|r| (r.words() * 8) as usize).sum()
    }

    /// Largest payload one record may carry on every CPU of this set.
    pub fn max_payload(&self) -> usize {
        self.rings.iter().map(|r| r.max_payload()).min().unwrap_or(0)
    }

    /// Turns recording on or off (ftrace's `tracing_on`). Writes while off are ignored
    /// and not counted; a writer already inside its ring (or, the tracer's, its section)
    /// finishes its record.
    pub fn set_recording(&self, on: bool) {
        if on {
            self.state.fetch_or(RECORDING, Relaxed);
        } else {
            self.state.fetch_and(!RECORDING, Relaxed);
        }
    }

    /// Whether recording is on.
    #[inline]
    pub fn is_recording(&self) -> bool {
        self.state.load(Relaxed) & RECORDING != 0
    }

    /// Runs `read` with writes into the set held off, the recording switch untouched:
    /// ftrace's `pause-on-trace`, so that what is being read is not overwritten
    /// meanwhile. Writes are ignored and not counted while held, as while recording
    /// is off; they come in again when `read` returns (a closure, so that no hold can
    /// be left behind). Holds nest, up to 63 at once: `read` is told whether this
    /// one was taken (`false`: it runs unheld, nothing changed). Callable from any
    /// context.
    pub fn with_writes_held<R>(&self, read: impl FnOnce(bool) -> R) -> R {
        let hold = self.hold();
        read(hold.is_some())
    }

    /// Lets writes in again, whatever holds are out (see
    /// [`Buffer::with_writes_held`]): for a panic, whose own records (where each CPU
    /// was) must reach the set although a reader it stopped, or interrupted, holds
    /// writes off and will never return to let them in. A hold taken before and
    /// dropped afterwards counts out nothing (a hold taken since stays). A reset in
    /// progress stays paused: its rings may be half reset.
    pub fn release_holds(&self) {
        // Release: as `set_paused`'s, for a writer that sees the holds gone.
        let mut state = self.state.load(Relaxed);
        loop {
            let released = state & (RECORDING | PAUSED) | (state & !WRITES).wrapping_add(RELEASE);
            match self.state.compare_exchange_weak(state, released, Release, Relaxed) {
                Ok(_) => return,
                Err(now) => state = now,
            }
        }
    }

    /// Seals CPU `cpu`'s ring for a panic ([`Tracer::seal_cpu`](crate::Tracer::seal_cpu)):
    /// the writes in progress there, which the caller interrupted and will never
    /// return to, are left out, and the records reserved after them are published.
    /// `known` tells the event ids written into the set (words a stopped write left
    /// that read as another id are not trusted as records). Runs on CPU `cpu`.
    /// Returns how many writes were left out (0 for a CPU beyond the set; words it
    /// could not read count as one, see [`RingStats::unreadable`]). Without
    /// [`Platform::PROMISE`], the stopped write keeps the ring (one writer at a time):
    /// later writes there are dropped and counted.
    pub fn seal_cpu(&self, cpu: usize, known: impl Fn(u16) -> bool) -> u64 {
        let now = self.clock().stamp(&self.platform);
        self.ring(cpu).map_or(0, |ring| ring.seal(now, &known))
    }

    /// Counts a hold into the state, if there is room for one (see
    /// [`Buffer::with_writes_held`]); dropping it counts it out.
    pub(crate) fn hold(&self) -> Option<Hold<'_, P>> {
        let mut state = self.state.load(Relaxed);
        loop {
            if state & HOLDS == HOLDS {
                return None;
            }
            match self.state.compare_exchange_weak(state, state + HOLD, Relaxed, Relaxed) {
                Ok(_) => return Some(Hold { buffer: self, releases: state & !WRITES }),
                Err(now) => state = now,
            }
        }
    }

    /// Pauses (or resumes) writes while a control operation resets the set,
    /// independently of the recording switch.
    pub(crate) fn set_paused(&self, paused: bool) {
        if paused {
            self.state.fetch_or(PAUSED, Relaxed);
        } else {
            // Release: a writer that sees writes resumed (Acquire, in `write_on`) sees
            // the reset done while they were paused, and writes after it.
            self.state.fetch_and(!PAUSED, Release);
        }
    }

    /// Switches the mode; a write that must make room from now on follows it.
    pub fn set_mode(&self, mode: Mode) {
        self.overwrite.store(mode == Mode::Overwrite, Relaxed);
    }

    /// The current mode.
    #[inline]
    pub fn mode(&self) -> Mode {
        if self.overwrite.load(Relaxed) { Mode::Overwrite } else { Mode::Discard }
    }

    /// Records event `id` with `payload` on the current CPU's ring. Lock-free, never
    /// blocks or allocates; callable from any context, including NMI.
    #[inline]
    pub fn write(&self, id: u16, payload: &[u8]) -> Result<(), WriteError> {
        self.write_with(id, payload.len(), |w| crate::field::Sink::put(w, payload))
    }

    /// Records event `id` with a payload of `len` bytes that `fill` writes in place
    /// (through [`crate::field::Sink`]); bytes it leaves unwritten are zero. The record is
    /// committed when `fill` returns: a reservation cannot outlive it. Interrupts may
    /// write meanwhile (kept if the platform gives [`crate::Platform::PROMISE`];
    /// without it a ring takes one writer at a time, and a write inside another,
    /// `fill`'s own among them, is dropped and counted). Callable from any context,
    /// including NMI.
    #[inline]
    pub fn write_with(
        &self,
        id: u16,
        len: usize,
        fill: impl FnOnce(&mut RecordWriter<'_>),
    ) -> Result<(), WriteError> {
        self.write_on(self.platform.cpu(), id, len, len, || self.still_recording(), fill)
    }

    /// A writer outside any section, once inside its ring (`nest` raised), looks at
    /// the state again: a clear pauses the set, then waits for `nest` to fall, so
    /// either it sees this writer inside or the writer sees the pause (the barrier
    /// pair, as a section's entry).
    #[inline(always)]
    fn still_recording(&self) -> bool {
        match P::PROMISE {
            Some(_) => self.platform.light_barrier(),
            None => fence(SeqCst),
        }
        self.state.load(Acquire) & WRITES == RECORDING
    }

    /// [`Buffer::write_with`] on CPU `cpu` (the caller's, read once per event), with
    /// strings in the payload measured under `limit`; `open` is asked once the writer
    /// is inside the ring (see [`Ring::write_with`]). Refused writes are counted as
    /// dropped, with their reason.
    #[inline(always)]
    pub(crate) fn write_on(
        &self,
        cpu: usize,
        id: u16,
        len: usize,
        limit: usize,
        open: impl Fn() -> bool,
        fill: impl FnOnce(&mut RecordWriter<'_>),
    ) -> Result<(), WriteError> {
        if id > MAX_EVENT_ID {
            return Err(self.refuse_id(cpu));
        }
        let tag = Tag { id, ctx: self.platform.context() };
        self.write_event(cpu, tag, len, limit, open, fill)
    }

    /// A write of a reserved id: ignored while recording is off, refused otherwise.
    #[cold]
    fn refuse_id(&self, cpu: usize) -> WriteError {
        if self.state.load(Relaxed) & WRITES != RECORDING {
            return WriteError::Off;
        }
        self.refuse(cpu, Refusal::ReservedId)
    }

    /// [`Buffer::write_on`] for a tag the tracer made: its id is one the tracer
    /// assigned, below the reserved ids (`Tracer::new` refuses more events than
    /// that), so it is not checked; its context is the writer's, read once per event.
    #[inline(always)]
    pub(crate) fn write_event(
        &self,
        cpu: usize,
        tag: Tag,
        len: usize,
        limit: usize,
        open: impl Fn() -> bool,
        fill: impl FnOnce(&mut RecordWriter<'_>),
    ) -> Result<(), WriteError> {
        debug_assert!(tag.id <= MAX_EVENT_ID);
        // Acquire: pairs with the Release in `set_paused` (loom found this: a writer
        // that saw writes resumed but not the reset before it could publish into the
        // ring as it was, and have its counts zeroed). A plain load on x86.
        if self.state.load(Acquire) & WRITES != RECORDING {
            return Err(WriteError::Off);
        }
        let Some(ring) = self.rings.get(cpu) else {
            return Err(self.refuse(0, Refusal::BadCpu));
        };
        // Every ring takes a payload of MIN_MAX_PAYLOAD: a small event's check folds.
        if len > MIN_MAX_PAYLOAD && len > ring.max_payload() {
            return Err(self.refuse(cpu, Refusal::TooLarge));
        }
        ring.write_with((|| self.mode(), open), &self.platform, tag, len, limit, fill)
    }

    /// Refuses a write that found no section to enter on CPU `cpu`: a CPU beyond the
    /// set (`BadCpu`), or sections nested past their depth's bits there (dropped,
    /// counted as a write nested too deep).
    #[cold]
    pub(crate) fn refuse_outside_section(&self, cpu: usize) -> WriteError {
        match self.rings.get(cpu) {
            Some(ring) => {
                ring.drop_too_deep();
                WriteError::Dropped
            }
            None => self.refuse(0, Refusal::BadCpu),
        }
    }

    #[cold]
    fn refuse(&self, cpu: usize, why: Refusal) -> WriteError {
        if let Some(ring) = self.rings.get(cpu) {
            ring.refuse(why);
        }
        match why {
            Refusal::TooLarge => WriteError::TooLarge,
            Refusal::ReservedId => WriteError::ReservedId,
            Refusal::BadCpu => WriteError::BadCpu,
            Refusal::Corrupt => WriteError::Corrupt,
        }
    }

    /// Statistics of CPU `cpu`'s ring.
    pub fn stats(&self, cpu: usize) -> Result<RingStats, Error> {
        Ok(self.ring(cpu)?.stats())
    }

    /// A non-consuming iterator over CPU `cpu`'s ring (ftrace's `per_cpu/cpuN/trace`).
    pub fn iter(&self, cpu: usize) -> Result<RingIter<'_>, Error> {
        RingIter::new(self.ring(cpu)?, cpu)
    }

    /// The consuming reader of CPU `cpu`'s ring (`per_cpu/cpuN/trace_pipe`); `Busy`
    /// if it already has one. Dropping it frees the ring for the next; one forgotten
    /// (`mem::forget`) keeps it, as a leaked `trace_pipe` descriptor keeps Linux's:
    /// clears and other consumers are refused until the ring is replaced (a resize
    /// to another size, or a change of clock: each makes new rings).
    pub fn consumer(&self, cpu: usize) -> Result<Consumer<'_>, Error> {
        Consumer::new(self.ring(cpu)?, cpu)
    }

    /// All CPUs' records in timestamp order, not consuming (ftrace's `trace`).
    pub fn merged_iter(&self) -> Result<Merged<RingIter<'_>>, Error> {
        self.merged(|cpu| self.iter(cpu))
    }

    /// Calls `each` with every record, oldest first, while it returns true: CPU
    /// `cpu`'s, or (`None`) every CPU's merged in time order. `start` runs once the
    /// window to read is fixed, before the first record (so counts taken there cover
    /// every record listed). Fails if the records cannot be read (no memory, no such
    /// CPU). Not consuming. Allocates a [`ReadScratch`] for the read; see
    /// [`Buffer::for_each_record_with`].
    pub fn for_each_record(
        &self,
        cpu: Option<usize>,
        start: impl FnOnce(),
        each: impl FnMut(&RecordRef<'_>) -> bool,
    ) -> Result<(), Error> {
        let mut scratch = ReadScratch::new(self.rings.len())?;
        self.for_each_record_with(&mut scratch, cpu, start, each)
    }

    /// [`Buffer::for_each_record`] with `scratch` allocated beforehand: allocates
    /// nothing (for a panic's dump). Fails if there is no such CPU or the scratch has
    /// room for fewer CPUs than the read.
    pub fn for_each_record_with(
        &self,
        scratch: &mut ReadScratch,
        cpu: Option<usize>,
        start: impl FnOnce(),
        each: impl FnMut(&RecordRef<'_>) -> bool,
    ) -> Result<(), Error> {
        let cpus = match cpu {
            Some(cpu) => cpu..cpu.saturating_add(1),
            None => 0..self.rings.len(),
        };
        scratch.merge(&self.rings, cpus, start, each)
    }

    /// All CPUs' records in timestamp order, consuming (ftrace's `trace_pipe`).
    pub fn merged_consumer(&self) -> Result<Merged<Consumer<'_>>, Error> {
        self.merged(|cpu| self.consumer(cpu))
    }

    /// A merge of `open(cpu)` over every CPU (the vector's memory reserved first).
    fn merged<C: Cursor>(
        &self,
        open: impl Fn(usize) -> Result<C, Error>,
    ) -> Result<Merged<C>, Error> {
        let mut v = Vec::new();
        v.try_reserve_exact(self.rings.len()).map_err(|_| Error::NoMemory)?;
        for cpu in 0..self.rings.len() {
            v.push(open(cpu)?);
        }
        Ok(Merged::new(v))
    }

    /// Empties every ring and zeroes the counters.
    pub fn clear(&mut self) -> Result<(), Error> {
        self.reset(None)
    }

    /// Empties every ring (`None`) or CPU `cpu`'s; the caller guarantees no writer is
    /// inside them. `Busy` (and nothing changed) while one has a consuming reader.
    pub(crate) fn reset(&self, cpu: Option<usize>) -> Result<(), Error> {
        self.claim(cpu)?.reset();
        Ok(())
    }

    /// Holds every ring (`None`) or CPU `cpu`'s for a reset, so that no consuming
    /// reader opens them meanwhile: `BadCpu`, or `Busy` while one has a consuming
    /// reader, with nothing held.
    pub(crate) fn claim(&self, cpu: Option<usize>) -> Result<Claimed<'_>, Error> {
        let rings = match cpu {
            None => &self.rings[..],
            Some(cpu) => core::slice::from_ref(self.rings.get(cpu).ok_or(Error::BadCpu)?),
        };
        for (i, ring) in rings.iter().enumerate() {
            if let Err(e) = ring.acquire_consumer() {
                rings[..i].iter().for_each(|r| r.release_consumer());
                return Err(e);
            }
        }
        Ok(Claimed { rings, first: cpu.unwrap_or(0) })
    }

    /// Reallocates every ring with `bytes_per_cpu` bytes. The records are discarded and
    /// the counters zeroed. Recording must be off; on error nothing changed.
    pub fn resize(&mut self, bytes_per_cpu: usize) -> Result<(), Error> {
        if self.is_recording() {
            return Err(Error::Recording);
        }
        self.rings = alloc_rings(self.rings.len(), bytes_per_cpu, self.clock())?;
        Ok(())
    }

    /// Whether any ring was found corrupt (tracing then stops writing to it).
    pub fn is_corrupt(&self) -> bool {
        self.rings.iter().any(|r| r.is_corrupt())
    }

    pub(crate) fn ring(&self, cpu: usize) -> Result<&Ring, Error> {
        self.rings.get(cpu).map(|r| &**r).ok_or(Error::BadCpu)
    }
}

impl<P: Platform> Buffer<P> {
    /// An empty set of this one's shape, its timestamps from `clock`: each CPU's ring
    /// as long as here, the same mode, recording on (with this set's clock, a
    /// snapshot spare: a swap then leaves every CPU's size as it was, as ftrace sizes
    /// its snapshot buffer like the trace buffer).
    pub(crate) fn empty_like(&self, clock: Clock) -> Result<Self, Error> {
        let mut rings = Vec::new();
        rings.try_reserve_exact(self.rings.len()).map_err(|_| Error::NoMemory)?;
        for ring in &self.rings {
            rings.push(Arc::new(Ring::new(ring.words())?.with_clock(clock)));
        }
        Self::with_rings(self.platform.clone(), self.mode(), rings)
    }

    /// A set sharing this one's rings but CPU `cpu`'s, which is new, empty and
    /// `bytes` long; same recording switch and mode. On error nothing was allocated.
    pub(crate) fn with_ring_resized(&self, cpu: usize, bytes: usize) -> Result<Self, Error> {
        if cpu >= self.rings.len() {
            return Err(Error::BadCpu);
        }
        let ring = Arc::new(Ring::new(words_for(bytes)?)?.with_clock(self.clock()));
        let mut rings = Vec::new();
        rings.try_reserve_exact(self.rings.len()).map_err(|_| Error::NoMemory)?;
        rings.extend(self.rings.iter().cloned());
        rings[cpu] = ring;
        Ok(Buffer {
            platform: self.platform.clone(),
            rings,
            state: AtomicU32::new(self.state.load(Relaxed) & RECORDING),
            overwrite: AtomicBool::new(self.mode() == Mode::Overwrite),
        })
    }
}

/// Writes into a set kept off (see [`Buffer::with_writes_held`]); dropping it lets
/// them in again, even if the reader unwinds (host builds).
pub(crate) struct Hold<'a, P> {
    buffer: &'a Buffer<P>,
    /// The [`RELEASE`] count when it was taken: once it moved on, `release_holds`
    /// counted this hold out.
    releases: u32,
}

impl<P> Drop for Hold<'_, P> {
    fn drop(&mut self) {
        // Release: as `set_paused`'s, for a writer that sees the hold gone. None to
        // count out once `release_holds` let writes in (the same word: a release
        // between the load and the exchange fails the exchange).
        let state = &self.buffer.state;
        let mut now = state.load(Relaxed);
        while now & !WRITES == self.releases && now & HOLDS != 0 {
            match state.compare_exchange_weak(now, now - HOLD, Release, Relaxed) {
                Ok(_) => return,
                Err(seen) => now = seen,
            }
        }
    }
}

fn alloc_rings(cpus: usize, bytes: usize, clock: Clock) -> Result<Vec<Arc<Ring>>, Error> {
    if cpus == 0 {
        return Err(Error::ZeroSize);
    }
    let words = words_for(bytes)?;
    let mut rings = Vec::new();
    rings.try_reserve_exact(cpus).map_err(|_| Error::NoMemory)?;
    for _ in 0..cpus {
        rings.push(Arc::new(Ring::new(words)?.with_clock(clock)));
    }
    Ok(rings)
}

/// Rings a reset holds ([`Buffer::claim`]): released when dropped.
pub(crate) struct Claimed<'a> {
    rings: &'a [Arc<Ring>],
    /// The CPU of the first ring.
    first: usize,
}

impl Claimed<'_> {
    /// Waits until no writer is between its reservation and its commit in any of the
    /// rings: a write through [`Buffer::write_with`] enters no section, so a grace
    /// period does not wait for it (new writes are refused meanwhile: the set is
    /// paused). `WouldDeadlock` if one is on CPU `here`, the caller's: the caller is
    /// inside that write.
    pub(crate) fn wait_for_writers(&self, here: usize) -> Result<(), Error> {
        for (cpu, ring) in (self.first..).zip(self.rings) {
            if cpu == here && ring.writing() {
                return Err(Error::WouldDeadlock);
            }
            while ring.writing() {
                crate::sync::spin();
            }
        }
        Ok(())
    }

    /// Empties the rings and zeroes their counters; the caller guarantees no writer
    /// is inside them.
    pub(crate) fn reset(self) {
        self.rings.iter().for_each(|ring| ring.reset_locked());
    }
}

impl Drop for Claimed<'_> {
    fn drop(&mut self) {
        self.rings.iter().for_each(|ring| ring.release_consumer());
    }
}
