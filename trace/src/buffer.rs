//! A buffer set: one ring per CPU, with the set's recording switch and mode. Each
//! instance owns one (two with a snapshot spare, see [`crate::Recorder`]).

extern crate alloc;

use crate::error::{Error, WriteError};
use crate::platform::Platform;
use crate::reader::{Consumer, Merged, RingIter};
use crate::record::{MAX_EVENT_ID, Mode};
use crate::recorder::Gate;
use crate::ring::{Ring, words_for};
use crate::stats::RingStats;
use crate::sync::{AtomicBool, Ordering::Relaxed};
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

/// A set of per-CPU rings: one instance's buffer.
///
/// Writers call [`Buffer::write`] (or [`Buffer::reserve`]) from any context on the
/// CPU the platform reports; readers on any CPU use [`Buffer::iter`],
/// [`Buffer::consumer`] and the merged forms.
pub struct Buffer<P> {
    platform: P,
    rings: Vec<Ring>,
    recording: AtomicBool,
    overwrite: AtomicBool,
}

impl<P: Platform> Buffer<P> {
    /// Allocates a buffer set (fallibly), recording on.
    pub fn new(platform: P, config: Config) -> Result<Self, Error> {
        let rings = alloc_rings(config.cpus, config.bytes_per_cpu)?;
        Ok(Buffer {
            platform,
            rings,
            recording: AtomicBool::new(true),
            overwrite: AtomicBool::new(config.mode == Mode::Overwrite),
        })
    }

    /// A set with no rings (an unallocated spare): writes fail with `BadCpu`.
    pub(crate) fn empty(platform: P) -> Self {
        Buffer {
            platform,
            rings: Vec::new(),
            recording: AtomicBool::new(false),
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

    /// Number of CPUs (rings).
    pub fn cpus(&self) -> usize {
        self.rings.len()
    }

    /// Capacity of each ring in bytes.
    pub fn bytes_per_cpu(&self) -> usize {
        self.rings.first().map_or(0, |r| (r.words() * 8) as usize)
    }

    /// Largest payload one record may carry in this set.
    pub fn max_payload(&self) -> usize {
        self.rings.first().map_or(0, Ring::max_payload)
    }

    /// Turns recording on or off (ftrace's `tracing_on`). Writes while off are ignored
    /// and not counted; a writer already past the check finishes its record.
    pub fn set_recording(&self, on: bool) {
        self.recording.store(on, Relaxed);
    }

    /// Whether recording is on.
    #[inline]
    pub fn is_recording(&self) -> bool {
        self.recording.load(Relaxed)
    }

    /// Switches the mode; takes effect for the next write on each CPU.
    pub fn set_mode(&self, mode: Mode) {
        self.overwrite.store(mode == Mode::Overwrite, Relaxed);
    }

    /// The current mode.
    #[inline]
    pub fn mode(&self) -> Mode {
        if self.overwrite.load(Relaxed) { Mode::Overwrite } else { Mode::Discard }
    }

    #[inline(always)]
    fn check(&self, id: u16, len: usize) -> Result<&Ring, WriteError> {
        if !self.recording.load(Relaxed) {
            return Err(WriteError::Off);
        }
        if id > MAX_EVENT_ID {
            return Err(WriteError::ReservedId);
        }
        let ring = self.rings.get(self.platform.cpu()).ok_or(WriteError::BadCpu)?;
        if len > ring.max_payload() {
            return Err(WriteError::TooLarge);
        }
        Ok(ring)
    }

    /// Records event `id` with `payload` on the current CPU's ring. Lock-free, never
    /// blocks or allocates; callable from any context, including NMI.
    #[inline]
    pub fn write(&self, id: u16, payload: &[u8]) -> Result<(), WriteError> {
        let ring = self.check(id, payload.len())?;
        ring.write(self.mode(), || self.platform.now(), id, payload)
    }

    /// Reserves a record of `len` payload bytes on the current CPU's ring, to be
    /// filled in place and committed. Interrupts may write while it is held; the
    /// reservation must be finished on this CPU (it is `!Send`).
    #[inline]
    pub fn reserve(&self, id: u16, len: usize) -> Result<Reservation<'_>, WriteError> {
        let ring = self.check(id, len)?;
        let (depth, hdr) = ring.reserve(self.mode(), || self.platform.now(), id, len)?;
        Ok(Reservation::new(ring, depth, hdr, len))
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
    /// if it already has one.
    pub fn consumer(&self, cpu: usize) -> Result<Consumer<'_>, Error> {
        Consumer::new(self.ring(cpu)?, cpu)
    }

    /// All CPUs' records in timestamp order, not consuming (ftrace's `trace`).
    pub fn merged_iter(&self) -> Result<Merged<RingIter<'_>>, Error> {
        let mut v = Vec::new();
        v.try_reserve_exact(self.rings.len()).map_err(|_| Error::NoMemory)?;
        for cpu in 0..self.rings.len() {
            v.push(self.iter(cpu)?);
        }
        Ok(Merged::new(v))
    }

    /// All CPUs' records in timestamp order, consuming (ftrace's `trace_pipe`).
    pub fn merged_consumer(&self) -> Result<Merged<Consumer<'_>>, Error> {
        let mut v = Vec::new();
        v.try_reserve_exact(self.rings.len()).map_err(|_| Error::NoMemory)?;
        for cpu in 0..self.rings.len() {
            v.push(self.consumer(cpu)?);
        }
        Ok(Merged::new(v))
    }

    /// Empties every ring and zeroes the counters.
    pub fn clear(&mut self) -> Result<(), Error> {
        self.reset()
    }

    /// Empties every ring; the caller guarantees no writer is inside the set. `Busy`
    /// (and nothing changed) while any ring has a consuming reader.
    pub(crate) fn reset(&self) -> Result<(), Error> {
        for (i, ring) in self.rings.iter().enumerate() {
            if let Err(e) = ring.acquire_consumer() {
                self.rings[..i].iter().for_each(Ring::release_consumer);
                return Err(e);
            }
        }
        for ring in &self.rings {
            ring.reset_locked();
            ring.release_consumer();
        }
        Ok(())
    }

    /// Reallocates every ring with `bytes_per_cpu` bytes. The records are discarded and
    /// the counters zeroed. Recording must be off; on error nothing changed.
    pub fn resize(&mut self, bytes_per_cpu: usize) -> Result<(), Error> {
        if self.is_recording() {
            return Err(Error::Recording);
        }
        self.rings = alloc_rings(self.rings.len(), bytes_per_cpu)?;
        Ok(())
    }

    /// Whether any ring was found corrupt (tracing then stops writing to it).
    pub fn is_corrupt(&self) -> bool {
        self.rings.iter().any(Ring::is_corrupt)
    }

    pub(crate) fn ring(&self, cpu: usize) -> Result<&Ring, Error> {
        self.rings.get(cpu).ok_or(Error::BadCpu)
    }
}

fn alloc_rings(cpus: usize, bytes: usize) -> Result<Vec<Ring>, Error> {
    if cpus == 0 {
        return Err(Error::ZeroSize);
    }
    let words = words_for(bytes)?;
    let mut rings = Vec::new();
    rings.try_reserve_exact(cpus).map_err(|_| Error::NoMemory)?;
    for _ in 0..cpus {
        rings.push(Ring::new(words)?);
    }
    Ok(rings)
}

/// A reserved record being filled in place. Commit it with [`Reservation::commit`];
/// dropping it uncommitted abandons it (the space becomes padding, not an event).
/// `!Send`: it must be finished on the CPU that reserved it.
pub struct Reservation<'a> {
    ring: &'a Ring,
    depth: usize,
    hdr: u64,
    len: usize,
    filled: usize,
    partial: u64,
    gate: Option<(&'a Gate, usize)>,
    _not_send: core::marker::PhantomData<*const ()>,
}

impl<'a> Reservation<'a> {
    pub(crate) fn new(ring: &'a Ring, depth: usize, hdr: u64, len: usize) -> Self {
        Reservation {
            ring,
            depth,
            hdr,
            len,
            filled: 0,
            partial: 0,
            gate: None,
            _not_send: Default::default(),
        }
    }

    /// Makes the reservation leave the recorder's writer gate when it finishes.
    pub(crate) fn with_gate(mut self, gate: &'a Gate, depth: usize) -> Self {
        self.gate = Some((gate, depth));
        self
    }

    /// Payload bytes not filled yet.
    pub fn remaining(&self) -> usize {
        self.len - self.filled
    }

    /// Appends `bytes` to the payload; `TooLarge` if they do not fit (nothing written).
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), WriteError> {
        if bytes.len() > self.remaining() {
            return Err(WriteError::TooLarge);
        }
        for &b in bytes {
            let shift = (self.filled % 8) * 8;
            self.partial |= (b as u64) << shift;
            self.filled += 1;
            if self.filled.is_multiple_of(8) {
                self.flush();
            }
        }
        Ok(())
    }

    /// Appends a little-endian `u64`.
    pub fn push_u64(&mut self, v: u64) -> Result<(), WriteError> {
        if self.filled.is_multiple_of(8) && self.remaining() >= 8 {
            self.ring.fill_word(self.hdr, (self.filled / 8) as u64, v);
            self.filled += 8;
            Ok(())
        } else {
            self.push(&v.to_le_bytes())
        }
    }

    fn flush(&mut self) {
        let index = (self.filled - 1) / 8;
        self.ring.fill_word(self.hdr, index as u64, self.partial);
        self.partial = 0;
    }

    /// Commits the record (bytes not pushed are zero).
    pub fn commit(mut self) {
        if !self.filled.is_multiple_of(8) {
            self.flush();
        }
        // Zero the words never pushed: the ring's old contents must not leak through.
        let words = self.len.div_ceil(8);
        for i in self.filled.div_ceil(8)..words {
            self.ring.fill_word(self.hdr, i as u64, 0);
        }
        self.ring.commit_event(self.depth);
        if let Some((gate, depth)) = self.gate {
            gate.leave(depth);
        }
        core::mem::forget(self);
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        self.ring.abandon(self.depth, self.hdr);
        if let Some((gate, depth)) = self.gate {
            gate.leave(depth);
        }
    }
}
