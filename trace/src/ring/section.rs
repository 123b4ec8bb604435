//! The per-CPU section: how control operations learn that every writer has left.
//!
//! A writer enters its CPU's section once per event, before it reads any of the
//! tracer's state (enable masks, instance slots, the live buffer set), and leaves it
//! when its records are committed. Entering and leaving are plain loads and stores of
//! per-CPU words: writers of one CPU nest like a stack (thread, IRQ, NMI), so an
//! interrupt between a load and its store restores the word before it returns.
//!
//! A control operation publishes its change, then waits for a *grace period*
//! ([`Sections::synchronize`]): every CPU has left any section it entered before the
//! publication. Only then does it free, reset or reuse what writers may have seen.
//! The ordering between a writer's store of its depth and its loads of the state,
//! against the control side's store of the state and its loads of the depths, is
//! the platform's asymmetric barrier (`Platform::light_barrier` on the writer side,
//! `Platform::heavy_barrier` on the control side). See DESIGN.md, "The per-CPU
//! section".

extern crate alloc;

use crate::error::Error;
use crate::platform::Platform;
use crate::sync::{
    AtomicU64, AtomicUsize, CachePadded, Ordering::*, Point, preempt_point, signal_fence, spin,
};
use alloc::vec::Vec;
use core::marker::PhantomData;

/// One CPU's section words. Only the CPU's own writers store to them.
#[derive(Default)]
struct Section {
    /// Writers of this CPU inside the section (nested).
    depth: AtomicUsize,
    /// How many times the outermost writer left.
    epoch: AtomicU64,
}

/// Proof that the caller is inside its CPU's section for `'a`, borrowed from its
/// [`SectionGuard`]: what readers of section-protected state take. Zero-sized and
/// `Copy`, so passing it costs nothing and keeps the guard out of memory; `!Send`,
/// as the guard is.
#[derive(Clone, Copy)]
pub(crate) struct Held<'a>(PhantomData<&'a SectionGuard<'a>>);

/// The sections of every CPU.
pub(crate) struct Sections {
    cpus: Vec<CachePadded<Section>>,
}

/// Being inside a CPU's section; leaving is dropping it. `!Send`: it is left on the
/// CPU that entered.
pub(crate) struct SectionGuard<'a> {
    section: &'a Section,
    depth: usize,
    _not_send: PhantomData<*const ()>,
}

impl Sections {
    /// Sections for `cpus` CPUs.
    pub(crate) fn new(cpus: usize) -> Result<Self, Error> {
        let mut v = Vec::new();
        v.try_reserve_exact(cpus).map_err(|_| Error::NoMemory)?;
        v.resize_with(cpus, Default::default);
        Ok(Sections { cpus: v })
    }

    /// Enters CPU `cpu`'s section (the caller runs on it). `None` if there is no such
    /// CPU. Callable from any context; never blocks.
    #[inline(always)]
    pub(crate) fn enter<P: Platform>(&self, platform: &P, cpu: usize) -> Option<SectionGuard<'_>> {
        let section = &**self.cpus.get(cpu)?;
        let depth = section.depth.load(Relaxed);
        // An exact increment: an interrupt between the load and the store restores
        // `depth` before it returns (writers nest like a stack).
        section.depth.store(depth + 1, Relaxed);
        preempt_point(Point::Section);
        // The writer's half of the asymmetric barrier: our `depth` store is ordered
        // before every load of the tracer's state that follows, as seen by a control
        // operation after its heavy barrier. Either it sees us inside, or we see its
        // change.
        platform.light_barrier();
        Some(SectionGuard { section, depth, _not_send: PhantomData })
    }

    /// Starts a grace period: checks that the caller may wait. `WouldDeadlock` if it
    /// may not (interrupts off, inside an interrupt: `Platform::may_wait`) or is
    /// inside a section itself; nothing was published yet, so nothing changed.
    pub(crate) fn grace<'a, P: Platform>(&'a self, platform: &'a P) -> Result<Grace<'a, P>, Error> {
        let inside = self.cpus.get(platform.cpu()).is_some_and(|s| s.depth.load(Relaxed) != 0);
        if inside || !platform.may_wait() {
            return Err(Error::WouldDeadlock);
        }
        Ok(Grace { sections: self, platform })
    }

    /// Publishes nothing itself: waits for a grace period after the caller's change
    /// (see [`Grace::wait`]).
    pub(crate) fn synchronize<P: Platform>(&self, platform: &P) -> Result<(), Error> {
        self.grace(platform)?.wait();
        Ok(())
    }
}

/// A grace period the caller may wait for (see [`Sections::grace`]).
pub(crate) struct Grace<'a, P> {
    sections: &'a Sections,
    platform: &'a P,
}

impl<P: Platform> Grace<'_, P> {
    /// Returns once every CPU has left every section it was in when this call
    /// began. The caller published its change before calling.
    pub(crate) fn wait(self) {
        self.platform.heavy_barrier();
        for section in &self.sections.cpus {
            // Acquire (both loads): pairs with the Release stores in the guard's drop,
            // so what the writers we wait for wrote is visible once they are gone.
            let epoch = section.epoch.load(Acquire);
            while section.depth.load(Acquire) != 0 && section.epoch.load(Acquire) == epoch {
                spin();
            }
        }
    }
}

impl SectionGuard<'_> {
    /// The proof of being inside the section, for as long as the guard is borrowed.
    #[inline(always)]
    pub(crate) fn held(&self) -> Held<'_> {
        Held(PhantomData)
    }
}

impl Drop for SectionGuard<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        let section = self.section;
        signal_fence();
        if self.depth == 0 {
            // Waiting for "depth 0 or one more outermost exit" cannot starve while
            // the CPU keeps writing: every writer inside at the publication is inside
            // the current outermost one. Release: a waiter that sees the new epoch
            // sees our records.
            section.epoch.store(section.epoch.load(Relaxed).wrapping_add(1), Release);
        }
        // Release: as above, for a waiter that sees `depth` drop.
        section.depth.store(self.depth, Release);
    }
}
