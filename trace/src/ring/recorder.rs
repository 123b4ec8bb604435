//! The recorder: an instance's live buffer set and an optional spare for snapshots,
//! switched under the per-CPU section's grace periods.

use crate::error::{Error, WriteError};
use crate::platform::Platform;
use crate::ring::buffer::{Buffer, Config};
use crate::ring::clock::Clock;
use crate::ring::per_cpu::{RecordWriter, words_for};
use crate::ring::record::Tag;
use crate::ring::section::{Held, Sections};
use crate::sync::{AtomicBool, AtomicUsize, Ordering::*};

extern crate alloc;
use alloc::sync::Arc;

/// A change of a recorder's buffers, which [`Recorder::changed`] makes into a new
/// recorder, and whose size [`Recorder::bytes_after`] gives beforehand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Every CPU's ring `bytes_per_cpu` long, empty ([`Recorder::resized`]).
    Resize(usize),
    /// CPU `cpu`'s ring `bytes` long, empty, the others kept
    /// ([`Recorder::resized_cpu`]).
    ResizeCpu {
        /// The CPU.
        cpu: usize,
        /// Its ring's new length.
        bytes: usize,
    },
    /// Timestamps from another clock, every ring emptied ([`Recorder::with_clock`]).
    Clock(Clock),
    /// A spare set added ([`Recorder::with_spare`]).
    AddSpare,
    /// The spare set freed ([`Recorder::without_spare`]).
    DropSpare,
}

/// A recorder: the live buffer set writers use, and optionally a spare set that
/// [`Recorder::swap`] exchanges with it to take a snapshot (ftrace's `snapshot`).
///
/// Writers use the recorder inside their CPU's section (see `section.rs`). A writer
/// that is mid-record on another CPU during a swap finishes its record in the set it
/// started in (committed and counted there); `swap` returns only after a grace
/// period, when no writer is left in the old live set: the snapshot is then frozen.
pub struct Recorder<P> {
    /// The two sets; `sets[live]` is live, the other is the spare (empty when none).
    /// Shared, so a new recorder (with a spare added or removed) can take over the
    /// live set while writers keep going.
    sets: [Arc<Buffer<P>>; 2],
    live: AtomicUsize,
    sections: Arc<Sections>,
    control: AtomicBool,
    /// Whether its instance has replaced it (with a recorder that may share its
    /// rings): its control operations are refused from then on.
    replaced: AtomicBool,
}

impl<P: Platform> Recorder<P> {
    /// A recorder with a live set built from `config`, and a spare of the same shape if
    /// `spare` is true, with sections of its own.
    pub fn new(platform: P, config: Config, spare: bool) -> Result<Self, Error> {
        let sections = Arc::new(Sections::new(config.cpus)?);
        Self::in_sections(platform, config, spare, sections)
    }

    /// [`Recorder::new`] for writers that enter `sections` (a tracer's).
    pub(crate) fn in_sections(
        platform: P,
        config: Config,
        spare: bool,
        sections: Arc<Sections>,
    ) -> Result<Self, Error> {
        let live = Buffer::new(platform.clone(), config)?;
        let spare = if spare { Buffer::new(platform, config)? } else { Buffer::empty(platform) };
        Ok(Self::with_sets(Arc::new(live), spare, sections))
    }

    /// A recorder whose live set is `live` (no spare), for writers that enter
    /// `sections` (a tracer's).
    pub(crate) fn over(live: Buffer<P>, sections: Arc<Sections>) -> Self {
        let platform = live.platform().clone();
        Self::with_sets(Arc::new(live), Buffer::empty(platform), sections)
    }

    fn with_sets(live: Arc<Buffer<P>>, spare: Buffer<P>, sections: Arc<Sections>) -> Self {
        spare.set_recording(false);
        Recorder {
            sets: [live, Arc::new(spare)],
            live: AtomicUsize::new(0),
            sections,
            control: AtomicBool::new(false),
            replaced: AtomicBool::new(false),
        }
    }

    /// The recorder `change` makes of this one. `Err(Fixed)` if the live set lives
    /// in lent memory (see [`Buffer::over`]) and `change` would reallocate it (a
    /// snapshot freed needs nothing).
    pub fn changed(&self, change: Change) -> Result<Self, Error> {
        match change {
            Change::Resize(bytes_per_cpu) => self.resized(bytes_per_cpu),
            Change::ResizeCpu { cpu, bytes } => self.resized_cpu(cpu, bytes),
            Change::Clock(clock) => self.with_clock(clock),
            Change::AddSpare => self.with_spare(),
            Change::DropSpare => Ok(self.without_spare()),
        }
    }

    /// The bytes of rings (live and spare) the recorder `change` makes would hold,
    /// found without allocating anything, so that a memory limit refuses first; the
    /// error the change would give for a size or a CPU it refuses.
    pub fn bytes_after(&self, change: Change) -> Result<usize, Error> {
        if change != Change::DropSpare {
            self.resizable()?;
        }
        let live = self.live();
        let sets = match change {
            Change::AddSpare => 2,
            Change::DropSpare => 1,
            _ if self.snapshot().is_some() => 2,
            _ => 1,
        };
        let ring = |bytes| words_for(bytes).map(|words| words as usize * 8);
        let live_bytes = match change {
            Change::Resize(bytes) => ring(bytes)?.saturating_mul(live.cpus()),
            Change::ResizeCpu { cpu, bytes } => {
                let old = live.bytes_of(cpu).ok_or(Error::BadCpu)?;
                live.total_bytes() - old + ring(bytes)?
            }
            Change::Clock(_) | Change::AddSpare | Change::DropSpare => live.total_bytes(),
        };
        Ok(live_bytes.saturating_mul(sets))
    }

    fn resizable(&self) -> Result<(), Error> {
        if self.live().is_borrowed() { Err(Error::Fixed) } else { Ok(()) }
    }

    fn config(&self) -> Config {
        let live = self.live();
        Config { cpus: live.cpus(), bytes_per_cpu: live.bytes_per_cpu(), mode: live.mode() }
    }

    /// A recorder sharing this one's live set and sections, with a new spare shaped
    /// like it (recording off). Writers may keep using this recorder's live set
    /// meanwhile; the caller switches them over.
    pub fn with_spare(&self) -> Result<Self, Error> {
        self.resizable()?;
        let live = Arc::clone(self.live_set());
        let spare = live.empty_like(live.clock())?;
        Ok(Self::with_sets(live, spare, Arc::clone(&self.sections)))
    }

    /// A recorder sharing this one's live set, without a spare (the snapshot is freed
    /// when the last recorder holding it goes).
    pub fn without_spare(&self) -> Self {
        let live = Arc::clone(self.live_set());
        let platform = live.platform().clone();
        Self::with_sets(live, Buffer::empty(platform), Arc::clone(&self.sections))
    }

    /// A recorder whose live set (and spare, if any) keeps this one's rings but CPU
    /// `cpu`'s, which is new, empty and `bytes` long. On error nothing was allocated.
    pub fn resized_cpu(&self, cpu: usize, bytes: usize) -> Result<Self, Error> {
        self.resizable()?;
        let live = Arc::new(self.live().with_ring_resized(cpu, bytes)?);
        let spare = match self.snapshot() {
            Some(spare) => spare.with_ring_resized(cpu, bytes)?,
            None => Buffer::empty(live.platform().clone()),
        };
        Ok(Self::with_sets(live, spare, Arc::clone(&self.sections)))
    }

    /// A recorder like this one with rings of `bytes_per_cpu` (and a spare if this one
    /// has one), empty, keeping the recording switch and mode. On error nothing was
    /// allocated.
    pub fn resized(&self, bytes_per_cpu: usize) -> Result<Self, Error> {
        self.resizable()?;
        let config = Config { bytes_per_cpu, ..self.config() };
        let live = self.live();
        self.replaced_by(Buffer::clocked(live.platform().clone(), config, live.clock())?)
    }

    /// A recorder like this one, empty, whose sets take their timestamps from
    /// `clock`: each CPU's ring as long as here, a spare if this one has one, the
    /// recording switch and mode kept. On error nothing was allocated.
    pub fn with_clock(&self, clock: Clock) -> Result<Self, Error> {
        self.resizable()?;
        self.replaced_by(self.live().empty_like(clock)?)
    }

    /// A recorder whose live set is `new_live` (empty), with this one's recording
    /// switch, and a spare shaped like it if this one has a spare.
    fn replaced_by(&self, new_live: Buffer<P>) -> Result<Self, Error> {
        new_live.set_recording(self.live().is_recording());
        let spare = match self.snapshot() {
            Some(_) => new_live.empty_like(new_live.clock())?,
            None => Buffer::empty(new_live.platform().clone()),
        };
        Ok(Self::with_sets(Arc::new(new_live), spare, Arc::clone(&self.sections)))
    }
}

impl<P: Platform> Recorder<P> {
    #[inline(always)]
    fn live_set(&self) -> &Arc<Buffer<P>> {
        &self.sets[self.live_index()]
    }

    /// Which of the two sets is live.
    #[inline(always)]
    fn live_index(&self) -> usize {
        // Acquire: pairs with the Release store in `swap`, so a writer that sees the
        // new live set also sees the recording switch and mode `swap` gave it.
        self.live.load(Acquire) & 1
    }

    /// The sections its writers enter, for tests that fill one.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn sections(&self) -> &Sections {
        &self.sections
    }

    /// The live buffer set (for control and readers).
    #[inline(always)]
    pub fn live(&self) -> &Buffer<P> {
        self.live_set()
    }

    /// The spare set: after [`Recorder::swap`], the snapshot.
    pub fn snapshot(&self) -> Option<&Buffer<P>> {
        let spare = &self.sets[1 - (self.live.load(Acquire) & 1)];
        if spare.is_empty() { None } else { Some(spare) }
    }

    /// Records an event on the current CPU in the live set. See [`Buffer::write`].
    #[inline]
    pub fn write(&self, id: u16, payload: &[u8]) -> Result<(), WriteError> {
        self.write_with(id, payload.len(), |w| crate::field::Sink::put(w, payload))
    }

    /// Records an event filled in place in the live set. See [`Buffer::write_with`].
    #[inline]
    pub fn write_with(
        &self,
        id: u16,
        len: usize,
        fill: impl FnOnce(&mut RecordWriter<'_>),
    ) -> Result<(), WriteError> {
        let platform = self.sets[0].platform();
        let cpu = platform.cpu();
        let Some(_section) = self.sections.enter(platform, cpu) else {
            return Err(self.live().refuse_outside_section(cpu));
        };
        // Inside a section, which a clear's grace period waits for.
        self.live().write_on(cpu, id, len, len, || true, fill)
    }

    /// Writes an event tagged by the tracer (see [`Buffer::write_event`]) into the
    /// live set, from inside the caller's section on CPU `cpu`. Returns which set
    /// took it, for [`Recorder::swap_nowait_keeping`].
    #[inline(always)]
    pub(crate) fn write_in(
        &self,
        _section: Held<'_>,
        cpu: usize,
        tag: Tag,
        len: usize,
        limit: usize,
        fill: impl FnOnce(&mut RecordWriter<'_>),
    ) -> Result<usize, WriteError> {
        let set = self.live_index();
        // Inside a section, which a clear's grace period waits for: nothing to
        // look at again.
        self.sets[set].write_event(cpu, tag, len, limit, || true, fill).map(|()| set)
    }

    /// [`Recorder::lock`], waiting for the control operation that runs (a trigger's
    /// swap takes a few instructions; another thread's operation, its grace period).
    /// For a context that may wait.
    pub(crate) fn lock_waiting(&self) -> Result<ControlGuard<'_>, Error> {
        loop {
            match self.lock() {
                Err(Error::Busy) => crate::sync::spin(),
                taken => return taken,
            }
        }
    }

    /// Holds the recorder's control operations (swaps included) off until the guard
    /// drops: `Busy` while one runs, `Replaced` once its instance has replaced it.
    pub(crate) fn lock(&self) -> Result<ControlGuard<'_>, Error> {
        // Acquire/Release: control operations are serialised like a lock's sections.
        match self.control.compare_exchange(false, true, Acquire, Relaxed) {
            Ok(_) => {
                let guard = ControlGuard(&self.control);
                match self.replaced.load(Relaxed) {
                    true => Err(Error::Replaced),
                    false => Ok(guard),
                }
            }
            Err(_) => Err(Error::Busy),
        }
    }

    /// Marks the recorder replaced by its instance (the caller holds its lock, and
    /// published the new one): a clear or swap through a reference kept from before
    /// would reach rings the new recorder writes, past its writers' pause.
    pub(crate) fn retire(&self) {
        self.replaced.store(true, Relaxed);
    }

    /// Exchanges the spare and the live set: the old live set becomes the snapshot,
    /// frozen to the recorder's writers ([`Recorder::write`] and the tracer's, which
    /// enter a section) when this returns; a write through a set reference taken
    /// before ([`Recorder::live`], then [`Buffer::write`]) still goes to that set. The
    /// new live set takes over the old one's recording switch and mode. Writers on
    /// other CPUs keep going throughout. Needs a context
    /// that may wait for the other CPUs (`WouldDeadlock` otherwise); `Replaced` once
    /// the recorder's instance has replaced it.
    pub fn swap(&self) -> Result<(), Error> {
        let grace = self.sections.grace(self.sets[0].platform())?;
        let _guard = self.lock_waiting()?;
        self.exchange()?;
        grace.wait();
        Ok(())
    }

    /// [`Recorder::swap`] from any context (an event's trigger, an NMI): exchanges
    /// the sets without waiting. Writers already in the old live set on other CPUs
    /// finish their records there, so the snapshot settles within one grace period
    /// (the time those writes take); what reads it meanwhile sees those records
    /// appear, as any reader of a live ring does. `Busy` while another control
    /// operation runs, `NoSpare` without a snapshot buffer, `Replaced` once the
    /// recorder's instance has replaced it; nothing changed then.
    pub fn swap_nowait(&self) -> Result<(), Error> {
        let _guard = self.lock()?;
        self.exchange()
    }

    /// [`Recorder::swap_nowait`] for a snapshot that must hold an event written into
    /// set `set` ([`Recorder::write_in`]): if another swap has made that set the
    /// snapshot since, the event is in it already and nothing changes (swapping
    /// again would make the snapshot the set without it).
    pub(crate) fn swap_nowait_keeping(&self, set: usize) -> Result<(), Error> {
        let _guard = self.lock()?;
        if self.live.load(Relaxed) & 1 != set {
            return Ok(());
        }
        self.exchange()
    }

    /// Makes the spare live, with the live set's switch and mode.
    fn exchange(&self) -> Result<(), Error> {
        let old = self.live.load(Relaxed) & 1;
        let (live, spare) = (&self.sets[old], &self.sets[1 - old]);
        if spare.is_empty() {
            return Err(Error::NoSpare);
        }
        spare.set_mode(live.mode());
        spare.set_recording(live.is_recording());
        // Release: publishes the new live set's switch and mode (see `live_set`).
        self.live.store(1 - old, Release);
        Ok(())
    }

    /// Empties the live set and zeroes its counters, recording on or off: writes
    /// are paused for a grace period, the rings reset, then writes resume. Events
    /// that arrive meanwhile are ignored, as while recording is off. `Busy` while a
    /// consuming reader is open, `Replaced` once the recorder's instance has
    /// replaced it (the same for the other clears).
    pub fn clear(&self) -> Result<(), Error> {
        self.clear_set(false, None)
    }

    /// Empties CPU `cpu`'s ring of the live set, as [`Recorder::clear`] does all.
    pub fn clear_cpu(&self, cpu: usize) -> Result<(), Error> {
        self.clear_set(false, Some(cpu))
    }

    /// `Busy` while a consuming reader holds a ring of either set, which a clear
    /// would then refuse; holds nothing.
    pub(crate) fn claim_all(&self) -> Result<(), Error> {
        self.live().claim(None)?;
        self.snapshot().map_or(Ok(()), |spare| spare.claim(None).map(drop))
    }

    /// Empties the snapshot (spare) set, or only CPU `cpu`'s ring of it. `NoSpare` if
    /// there is none.
    pub fn clear_snapshot(&self, cpu: Option<usize>) -> Result<(), Error> {
        self.clear_set(true, cpu)
    }

    /// Empties the live set or the snapshot (all rings, or CPU `cpu`'s).
    fn clear_set(&self, snapshot: bool, cpu: Option<usize>) -> Result<(), Error> {
        let grace = self.sections.grace(self.sets[0].platform())?;
        let _guard = self.lock_waiting()?;
        // Chosen under the lock: no swap moves it meanwhile.
        let set = match snapshot {
            true => self.snapshot().ok_or(Error::NoSpare)?,
            false => self.live(),
        };
        // Refused (a bad CPU, a consuming reader) before writes pause: nothing changes.
        let rings = set.claim(cpu)?;
        // The tracer's writers enter only the live set, in a section the grace period
        // waits for; writes through the set itself are paused and waited for.
        set.set_paused(true);
        grace.wait();
        let drained = rings.wait_for_writers(set.platform().cpu());
        if drained.is_ok() {
            rings.reset();
        }
        set.set_paused(false);
        drained
    }
}

/// A recorder's control operations held off ([`Recorder::lock`]).
pub(crate) struct ControlGuard<'a>(&'a AtomicBool);

impl Drop for ControlGuard<'_> {
    fn drop(&mut self) {
        // Release: see `Recorder::lock`.
        self.0.store(false, Release);
    }
}
