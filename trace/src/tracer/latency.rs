//! The `irqsoff` latency tracer: how long each CPU runs with interrupts off. The
//! platform calls [`Tracer::irqs_off`] where it disables interrupts (or a handler
//! starts with them off) and [`Tracer::irqs_on`] where it enables them again. While
//! one instance's `current_tracer` is `irqsoff`, a CPU's region from the first to the
//! second is timed; one longer than `tracing_max_latency` (or, with `tracing_thresh`
//! set, one at least that long) is reported: recorded in the instance as an
//! `ftrace:irqsoff` event, and the instance's live buffer swapped into its snapshot,
//! which then holds the window that led to it. The instance records the functions
//! called inside a timed region (`ftrace:function`, through the function tracer's
//! entries and lists), as ftrace's `function-trace` option does.
//!
//! A CPU's region words are touched only by that CPU with interrupts off, so they
//! need no protocol (NMIs, which do not call the hooks, aside). Reports from several
//! CPUs are serialised by a lock held for the compare, the record and the swap, so
//! the maximum and the snapshot always belong to the same region. See DESIGN.md,
//! "The irqsoff tracer".

use super::Tracer;
use super::function::FunctionError;
use crate::event::{DescriptorKind, EventDescriptor};
use crate::field::{Field, FieldKind};
use crate::platform::Platform;
use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, CachePadded, Ordering::Relaxed, SpinLock};
use alloc::vec::Vec;

/// `ftrace:irqsoff`: a reported irqs-off region: how long it lasted (ns), and where
/// interrupts went off and on again (ELF addresses).
pub static IRQSOFF: EventDescriptor = EventDescriptor::new(
    "ftrace",
    "irqsoff",
    "latency_ns={latency_ns} start={start:#x} end={end:#x}",
    &[
        Field { name: "latency_ns", kind: FieldKind::U64 },
        Field { name: "start", kind: FieldKind::U64 },
        Field { name: "end", kind: FieldKind::U64 },
    ],
    DescriptorKind::Event,
);

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
    /// `tracing_max_latency`, in ns.
    max: AtomicU64,
    /// Held by the CPU reporting a region.
    report: SpinLock,
}

impl Latency {
    /// No owner, a region per CPU of `cpus`.
    pub(super) fn new(cpus: usize) -> Latency {
        Latency {
            owner: AtomicUsize::new(0),
            regions: (0..cpus).map(|_| CachePadded(Region::default())).collect(),
            max: AtomicU64::new(0),
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

    /// Whether a region of `latency` ns is reported: with a threshold, if it is at
    /// least that long; otherwise if it is a new maximum.
    fn reports(&self, latency: u64, threshold: u64) -> bool {
        match threshold {
            0 => latency > self.max.load(Relaxed),
            t => latency >= t,
        }
    }
}

impl<P: Platform + Clone + Send + Sync> Tracer<P> {
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
        if latency.owner.load(Relaxed) != 0 && latency.reports(took, threshold) {
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
        if !latency.reports(took, functions.threshold.load(Relaxed)) {
            return;
        }
        latency.max.store(took, Relaxed);
        let owner = || latency.owner().map_or(0, |slot| 1 << slot);
        self.record_values(&IRQSOFF, &[took, start, end], || owner() & IRQSOFF.enabled_mask());
        // Without a snapshot buffer (it cannot be: the tracer allocates one) or
        // while a control operation holds the buffers, the window is not kept; the
        // record says what happened.
        self.for_each_target(owner, |target| {
            let _ = target.recorder.swap_nowait();
        });
    }

    /// The slot of the instance whose tracer is `irqsoff`, if one's is.
    pub(super) fn irqsoff_owner(&self) -> Option<usize> {
        self.functions.get().and_then(|f| f.latency.owner())
    }

    /// `tracing_max_latency`: the longest irqs-off region reported, in ns (or the
    /// last one reported, with `tracing_thresh` set).
    pub fn max_latency(&self) -> u64 {
        self.functions.get().map_or(0, |f| f.latency.max.load(Relaxed))
    }

    /// Sets `tracing_max_latency` (ns): only a longer region is reported from now on
    /// (`0`: the next one). A report in flight on another CPU may still store its
    /// own. (Not under the report lock: an interrupt on this CPU may report.)
    pub fn set_max_latency(&self, ns: u64) -> Result<(), FunctionError> {
        let functions = self.functions.get().ok_or(FunctionError::Unavailable)?;
        functions.latency.max.store(ns, Relaxed);
        Ok(())
    }
}
