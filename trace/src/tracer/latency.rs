//! The `irqsoff` latency tracer: how long each CPU runs with interrupts off. The
//! platform calls [`Tracer::irqs_off`] where it disables interrupts (or a handler
//! starts with them off) and [`Tracer::irqs_on`] where it enables them again. While
//! one instance's `current_tracer` is `irqsoff`, a CPU's region from the first to the
//! second is timed; one longer than that instance's `tracing_max_latency` (or, with
//! `tracing_thresh` set, one at least that long) is reported: recorded in the
//! instance as an `ftrace:irqsoff` event, and the instance's live buffer swapped
//! into its snapshot, which then holds the window that led to it. As ftrace's
//! tracer stops while `tracing_on` is 0, nothing is reported while the instance's
//! recording is off: its maximum and snapshot stay as they were. The instance
//! records the functions called inside a timed region (`ftrace:function`, through
//! the function tracer's entries and lists), as ftrace's `function-trace` option
//! does. As in ftrace, selecting the tracer starts the instance's
//! `tracing_max_latency` again and puts its buffer in overwrite mode (the window is
//! the latest records) until another tracer is selected, which gives the mode it
//! had back; discard mode is refused meanwhile.
//!
//! A CPU's region words are touched only by that CPU with interrupts off, so they
//! need no protocol (NMIs, which do not call the hooks, aside). Reports from several
//! CPUs are serialised by a lock held for the compare, the record and the swap, so
//! the maximum and the snapshot always belong to the same region. See DESIGN.md,
//! "The irqsoff tracer".

use super::function::FunctionError;
use super::instance::Instance;
use super::trigger::Target;
use super::{MAX_INSTANCES, Tracer};
use crate::event::{DescriptorKind, EventDescriptor, Timeline};
use crate::field::{Field, FieldKind};
use crate::platform::Platform;
use crate::ring::Mode;
use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, CachePadded, Ordering::Relaxed, SpinLock};
use alloc::vec::Vec;

/// `ftrace:irqsoff`: a reported irqs-off region: how long it lasted (ns), and where
/// interrupts went off and on again (ELF addresses). On a timeline, the region is
/// an `irqs off` slice ending at the report.
pub static IRQSOFF: EventDescriptor = EventDescriptor::new(
    "ftrace",
    "irqsoff",
    "latency_ns={latency_ns} start={start:sym} end={end:sym}",
    &[
        Field { name: "latency_ns", kind: FieldKind::U64 },
        Field { name: "start", kind: FieldKind::U64 },
        Field { name: "end", kind: FieldKind::U64 },
    ],
    DescriptorKind::Event,
)
.on_timeline(Timeline::Span { label: "irqs off", duration: "latency_ns" });

/// One CPU's irqs-off region.
#[derive(Default)]
struct Region {
    /// Whether a region is being timed.
    open: AtomicBool,
    /// When it began (platform clock, ns).
    since: AtomicU64,
    /// Where interrupts went off.
    start: AtomicU64,
}

/// The irqsoff tracer's state.
pub(super) struct Latency {
    /// The slot of the instance whose `current_tracer` is `irqsoff`, plus one (0:
    /// none).
    owner: AtomicUsize,
    regions: Vec<CachePadded<Region>>,
    /// Each instance's `tracing_max_latency`, in ns (by slot).
    max: [AtomicU64; MAX_INSTANCES],
    /// The owner's mode before it selected the tracer, given back when it selects
    /// another (see [`Instance::irqsoff_changed`]).
    owner_mode: AtomicBool,
    /// Held by the CPU reporting a region.
    report: SpinLock,
}

impl Latency {
    /// No owner, a region per CPU of `cpus`.
    pub(super) fn new(cpus: usize) -> Latency {
        Latency {
            owner: AtomicUsize::new(0),
            regions: (0..cpus).map(|_| CachePadded(Region::default())).collect(),
            max: core::array::from_fn(|_| AtomicU64::new(0)),
            owner_mode: AtomicBool::new(true),
            report: SpinLock::default(),
        }
    }

    /// The instance slot that owns the tracer, if one does.
    pub(super) fn owner(&self) -> Option<usize> {
        self.owner.load(Relaxed).checked_sub(1)
    }

    /// Makes `slot` the owner (`on`) or, if it is the owner, leaves none.
    pub(super) fn set_owner(&self, slot: usize, on: bool) {
        if on {
            self.owner.store(slot + 1, Relaxed);
        } else if self.owner() == Some(slot) {
            self.owner.store(0, Relaxed);
        }
    }

    /// The owner's bit while the CPU `cpu` gives is outside a timed region (the
    /// owner records no function called there), else 0.
    #[inline(always)]
    pub(super) fn outside_region(&self, cpu: impl FnOnce() -> usize) -> u64 {
        match self.owner.load(Relaxed) {
            0 => 0,
            owner => self.owner_outside(owner - 1, cpu()),
        }
    }

    /// [`Latency::outside_region`] while `owner` owns the tracer.
    #[cold]
    #[inline(never)]
    fn owner_outside(&self, owner: usize, cpu: usize) -> u64 {
        match self.regions.get(cpu).is_some_and(|region| region.open.load(Relaxed)) {
            true => 0,
            false => 1 << owner,
        }
    }

    /// The instance in `slot` is gone: the next one there starts with a
    /// `tracing_max_latency` of 0.
    pub(super) fn forget(&self, slot: usize) {
        self.max[slot].store(0, Relaxed);
    }

    /// Whether a region of `latency` ns is reported in the instance in `owner`:
    /// with a threshold, if it is at least that long; otherwise if it is a new
    /// maximum there.
    fn reports(&self, latency: u64, threshold: u64, owner: usize) -> bool {
        match threshold {
            0 => self.max.get(owner).is_some_and(|max| latency > max.load(Relaxed)),
            t => latency >= t,
        }
    }
}

impl<P: Platform> Tracer<P> {
    /// The irqsoff tracer's hook where this CPU disables interrupts, at `ip`, or a
    /// handler starts with them off. Returns whether it opened the CPU's region: the
    /// platform then calls [`Tracer::irqs_on`] where it enables them again (a call
    /// inside an open region, as an exception's, returns `false`). Costs one load
    /// while no instance uses the tracer. With interrupts off, never from an NMI.
    #[inline]
    pub fn irqs_off(&self, ip: u64) -> bool {
        let Some(latency) = self.functions.get().map(|f| &f.latency) else { return false };
        if latency.owner.load(Relaxed) == 0 {
            return false;
        }
        let Some(region) = latency.regions.get(self.platform.cpu()) else { return false };
        if region.open.load(Relaxed) {
            return false;
        }
        region.start.store(ip, Relaxed);
        region.since.store(self.platform.now(), Relaxed);
        region.open.store(true, Relaxed);
        true
    }

    /// The irqsoff tracer's hook where this CPU is about to enable interrupts, at
    /// `ip`, closing the region [`Tracer::irqs_off`] opened: reports it if it is
    /// long enough (see the module). With interrupts off, on the CPU that opened it.
    #[inline]
    pub fn irqs_on(&self, ip: u64) {
        let Some(functions) = self.functions.get() else { return };
        let latency = &functions.latency;
        let Some(region) = latency.regions.get(self.platform.cpu()) else { return };
        if !region.open.load(Relaxed) {
            return;
        }
        let took = self.platform.now().saturating_sub(region.since.load(Relaxed));
        let threshold = functions.threshold.load(Relaxed);
        if latency.owner().is_some_and(|owner| latency.reports(took, threshold, owner)) {
            self.report_irqsoff(region.start.load(Relaxed), ip, took);
        }
        // Closed after the report: an exception inside it finds the region open and
        // opens (and reports) none of its own.
        region.open.store(false, Relaxed);
    }

    /// Reports an irqs-off region (see the module).
    #[cold]
    #[inline(never)]
    fn report_irqsoff(&self, start: u64, end: u64, took: u64) {
        let Some(functions) = self.functions.get() else { return };
        let latency = &functions.latency;
        let _report = latency.report.lock();
        // Again under the lock: another CPU may have reported a longer one.
        let Some(slot) = latency.owner() else { return };
        if !latency.reports(took, functions.threshold.load(Relaxed), slot) {
            return;
        }
        // As ftrace's tracer stops with `tracing_on`: nothing reported while off.
        let mut tracing = false;
        self.for_each_target(false, || 1 << slot, |target| tracing = target.tracing());
        if !tracing {
            return;
        }
        latency.max[slot].store(took, Relaxed);
        let owner = || latency.owner().map_or(0, |slot| 1 << slot);
        self.record_values(&IRQSOFF, [took, start, end], || owner() & IRQSOFF.enabled_mask());
        // Without a snapshot buffer (it cannot be: the tracer allocates one) or
        // while a control operation holds the buffers, the window is not kept; the
        // record says what happened.
        self.for_each_target(true, owner, |target| {
            let _ = target.recorder.swap_nowait();
        });
    }

    /// The slot of the instance whose tracer is `irqsoff`, if one's is.
    pub(super) fn irqsoff_owner(&self) -> Option<usize> {
        self.functions.get().and_then(|f| f.latency.owner())
    }
}

impl<'t, P: Platform> Instance<'t, P> {
    /// `tracing_max_latency`: the longest irqs-off region the instance's `irqsoff`
    /// tracer reported, in ns (the last one, with `tracing_thresh` set); 0 again
    /// each time the instance selects the tracer.
    pub fn max_latency(&self) -> u64 {
        let functions = self.tracer.functions.get();
        functions.map_or(0, |f| f.latency.max[self.state.slot].load(Relaxed))
    }

    /// Sets `tracing_max_latency` (ns): only a longer region is reported from now on
    /// (`0`: the next one). A report in flight on another CPU may still store its
    /// own. (Not under the report lock: an interrupt on this CPU may report.)
    pub fn set_max_latency(&self, ns: u64) -> Result<(), FunctionError> {
        let functions = self.tracer.functions.get().ok_or(FunctionError::Unavailable)?;
        functions.latency.max[self.state.slot].store(ns, Relaxed);
        Ok(())
    }

    /// After the instance's tracer changed from `was` to `now` (`irqsoff` or not;
    /// under the function tracers' lock): taking the tracer starts
    /// `tracing_max_latency` again and makes the buffer overwrite, the mode kept for
    /// when the instance leaves the tracer, which gives it back; both as ftrace
    /// does. Returns how to undo that.
    pub(super) fn irqsoff_changed<'s>(
        &'s self,
        latency: &Latency,
        was: bool,
        now: bool,
    ) -> impl FnOnce(&Latency) + use<'s, 't, P> {
        let slot = self.state.slot;
        // What the change touches, kept for the undo (nothing if it is no change).
        let before = (was != now).then(|| {
            (latency.max[slot].load(Relaxed), self.mode(), latency.owner_mode.load(Relaxed))
        });
        if let Some((_, mode, kept)) = before {
            if now {
                latency.owner_mode.store(mode == Mode::Overwrite, Relaxed);
                latency.max[slot].store(0, Relaxed);
                self.apply_mode(Mode::Overwrite);
            } else {
                self.apply_mode(if kept { Mode::Overwrite } else { Mode::Discard });
            }
        }
        move |latency: &Latency| {
            if let Some((max, mode, kept)) = before {
                latency.max[slot].store(max, Relaxed);
                latency.owner_mode.store(kept, Relaxed);
                self.apply_mode(mode);
            }
        }
    }
}
