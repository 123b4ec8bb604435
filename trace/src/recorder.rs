//! The recorder: an instance's live buffer set, an optional spare for snapshots, and
//! per-CPU writer gates that let a swap wait for writers still in the old set.

use crate::buffer::{Buffer, Config, Reservation};
use crate::error::{Error, WriteError};
use crate::platform::Platform;
use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, CachePadded, Ordering::*, fence, spin};

extern crate alloc;
use alloc::sync::Arc;
use alloc::vec::Vec;

/// Per-CPU count of writers inside the recorder, and how many times the outermost one
/// left. Only the CPU's own writers store to it (nesting like a stack).
#[derive(Default)]
pub(crate) struct Gate {
    depth: AtomicUsize,
    epoch: AtomicU64,
}

impl Gate {
    #[inline(always)]
    pub(crate) fn enter(&self) -> usize {
        let d = self.depth.load(Relaxed);
        // Exact increment: an interrupt in between restores `depth` before returning.
        self.depth.store(d + 1, Relaxed);
        // SeqCst fence: store-buffering pair with the fence in `Recorder::swap`. Either
        // the swapper sees our `depth` (and waits for us) or we see its new `live`.
        fence(SeqCst);
        d
    }

    #[inline(always)]
    pub(crate) fn leave(&self, d: usize) {
        if d == 0 {
            // Release: a swapper that Acquire-loads the new epoch sees our records.
            self.epoch.store(self.epoch.load(Relaxed) + 1, Release);
        }
        // Release: as above, for a swapper that sees `depth` drop.
        self.depth.store(d, Release);
    }
}

/// A recorder: the live buffer set writers use, and optionally a spare set that
/// [`Recorder::swap`] exchanges with it to take a snapshot (ftrace's `snapshot`).
///
/// A writer that is mid-record on another CPU during a swap finishes its record in the
/// set it started in (committed and counted there); `swap` returns only once no writer
/// is left in the old live set, so the snapshot is then frozen.
pub struct Recorder<P> {
    /// The two sets; `sets[live]` is live, the other is the spare (empty when none).
    /// Shared, so a new recorder (with a spare added or removed) can take over the
    /// live set while writers keep going.
    sets: [Arc<Buffer<P>>; 2],
    live: AtomicUsize,
    gates: Vec<CachePadded<Gate>>,
    control: AtomicBool,
}

impl<P: Platform + Clone> Recorder<P> {
    /// A recorder with a live set built from `config`, and a spare of the same shape if
    /// `spare` is true.
    pub fn new(platform: P, config: Config, spare: bool) -> Result<Self, Error> {
        let live = Buffer::new(platform.clone(), config)?;
        let spare = if spare { Buffer::new(platform, config)? } else { Buffer::empty(platform) };
        Self::with_sets(Arc::new(live), spare)
    }

    fn with_sets(live: Arc<Buffer<P>>, spare: Buffer<P>) -> Result<Self, Error> {
        spare.set_recording(false);
        let mut gates = Vec::new();
        gates.try_reserve_exact(live.cpus()).map_err(|_| Error::NoMemory)?;
        gates.resize_with(live.cpus(), Default::default);
        Ok(Recorder {
            sets: [live, Arc::new(spare)],
            live: AtomicUsize::new(0),
            gates,
            control: AtomicBool::new(false),
        })
    }

    fn config(&self) -> Config {
        let live = self.live();
        Config { cpus: live.cpus(), bytes_per_cpu: live.bytes_per_cpu(), mode: live.mode() }
    }

    /// A recorder sharing this one's live set, with a new spare shaped like it
    /// (recording off). Writers may keep using this recorder's live set meanwhile;
    /// the caller switches them over. Returns a copy without spare change if one is
    /// present already.
    pub fn with_spare(&self) -> Result<Self, Error> {
        let live = Arc::clone(&self.sets[self.live_index() & 1]);
        let spare = match self.snapshot() {
            Some(spare) => Buffer::new(spare.platform().clone(), self.config())?,
            None => Buffer::new(live.platform().clone(), self.config())?,
        };
        Self::with_sets(live, spare)
    }

    /// A recorder sharing this one's live set, without a spare (the snapshot is freed
    /// when the last recorder holding it goes).
    pub fn without_spare(&self) -> Result<Self, Error> {
        let live = Arc::clone(&self.sets[self.live_index() & 1]);
        let platform = live.platform().clone();
        Self::with_sets(live, Buffer::empty(platform))
    }

    /// A recorder like this one with rings of `bytes_per_cpu` (and a spare if this one
    /// has one), empty, keeping the recording switch and mode. On error nothing was
    /// allocated.
    pub fn resized(&self, bytes_per_cpu: usize) -> Result<Self, Error> {
        let config = Config { bytes_per_cpu, ..self.config() };
        let live = self.live();
        let new_live = Buffer::new(live.platform().clone(), config)?;
        new_live.set_recording(live.is_recording());
        let spare = if self.snapshot().is_some() {
            Buffer::new(live.platform().clone(), config)?
        } else {
            Buffer::empty(live.platform().clone())
        };
        Self::with_sets(Arc::new(new_live), spare)
    }
}

impl<P: Platform> Recorder<P> {
    #[inline(always)]
    fn live_index(&self) -> usize {
        // Acquire: pairs with the Release store in `swap`, so a writer that sees the
        // new live set also sees the recording switch and mode `swap` gave it. (The
        // gate's SeqCst fence orders this load after the gate's `depth` store.)
        self.live.load(Acquire)
    }

    /// The live buffer set (for control and readers).
    #[inline(always)]
    pub fn live(&self) -> &Buffer<P> {
        &self.sets[self.live_index() & 1]
    }

    /// The spare set: after [`Recorder::swap`], the snapshot.
    pub fn snapshot(&self) -> Option<&Buffer<P>> {
        let spare = &self.sets[1 - (self.live_index() & 1)];
        if spare.is_empty() { None } else { Some(spare) }
    }

    /// Records an event on the current CPU in the live set. See [`Buffer::write`].
    #[inline]
    pub fn write(&self, id: u16, payload: &[u8]) -> Result<(), WriteError> {
        let live = self.live();
        let gate = self.gates.get(live.platform().cpu()).ok_or(WriteError::BadCpu)?;
        let d = gate.enter();
        let r = self.live().write(id, payload);
        gate.leave(d);
        r
    }

    /// Reserves a record in the live set. See [`Buffer::reserve`].
    pub fn reserve(&self, id: u16, len: usize) -> Result<Reservation<'_>, WriteError> {
        // A reservation keeps its gate until it finishes, so `swap` waits for it too.
        let cpu = self.live().platform().cpu();
        let gate = self.gates.get(cpu).ok_or(WriteError::BadCpu)?;
        let depth = gate.enter();
        match self.live().reserve(id, len) {
            Ok(r) => Ok(r.with_gate(gate, depth)),
            Err(e) => {
                gate.leave(depth);
                Err(e)
            }
        }
    }

    fn lock(&self) -> Result<ControlGuard<'_>, Error> {
        // Acquire/Release: control operations are serialised like a lock's sections.
        match self.control.compare_exchange(false, true, Acquire, Relaxed) {
            Ok(_) => Ok(ControlGuard(&self.control)),
            Err(_) => Err(Error::Busy),
        }
    }

    /// Exchanges the spare and the live set: the old live set becomes the snapshot,
    /// frozen when this returns. The new live set takes over the old one's recording
    /// switch and mode. Writers on other CPUs keep going throughout. Must not be
    /// called from a context that interrupted a writer of this recorder on its CPU
    /// (`WouldDeadlock`).
    pub fn swap(&self) -> Result<(), Error> {
        let _guard = self.lock()?;
        let old = self.live_index() & 1;
        let (live, spare) = (&self.sets[old], &self.sets[1 - old]);
        if spare.is_empty() {
            return Err(Error::NoSpare);
        }
        let me = live.platform().cpu();
        if self.gates.get(me).is_some_and(|g| g.depth.load(Relaxed) != 0) {
            return Err(Error::WouldDeadlock);
        }
        spare.set_mode(live.mode());
        spare.set_recording(live.is_recording());
        // Release: publishes the new live set's switch and mode (see `live_index`).
        self.live.store(1 - old, Release);
        // SeqCst fence: pairs with the one in `Gate::enter` (see there).
        fence(SeqCst);
        self.drain();
        Ok(())
    }

    /// Waits until every writer that might be inside a set other than the live one
    /// has left: each CPU's gate is seen empty, or its outermost writer left once.
    fn drain(&self) {
        for gate in &self.gates {
            // Acquire (both loads): see the records of the writers we wait for.
            let epoch = gate.epoch.load(Acquire);
            while gate.depth.load(Acquire) != 0 && gate.epoch.load(Acquire) == epoch {
                spin();
            }
        }
    }

    /// Empties the live set and zeroes its counters. Recording must be off (writers
    /// that were already past the switch are waited for).
    pub fn clear(&self) -> Result<(), Error> {
        let _guard = self.lock()?;
        let live = self.live();
        if live.is_recording() {
            return Err(Error::Recording);
        }
        let me = live.platform().cpu();
        if self.gates.get(me).is_some_and(|g| g.depth.load(Relaxed) != 0) {
            return Err(Error::WouldDeadlock);
        }
        // SeqCst fence: a writer that saw recording on is in the gate and visible to
        // `drain` (same store-buffering argument as `swap`).
        fence(SeqCst);
        self.drain();
        live.reset()
    }

    /// Empties the snapshot (spare) set. `NoSpare` if there is none.
    pub fn clear_snapshot(&self) -> Result<(), Error> {
        let _guard = self.lock()?;
        // The spare is quiescent: `swap` drained it, and writers only enter the live set.
        self.snapshot().ok_or(Error::NoSpare)?.reset()
    }
}

struct ControlGuard<'a>(&'a AtomicBool);

impl Drop for ControlGuard<'_> {
    fn drop(&mut self) {
        // Release: see `Recorder::lock`.
        self.0.store(false, Release);
    }
}
