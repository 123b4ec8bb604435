//! The per-CPU section: how control operations learn that every writer has left.
//!
//! A writer enters its CPU's section once per event, before it reads any of the
//! tracer's state (enable masks, instance slots, the live buffer set), and leaves it
//! when its records are committed. A section is one word per CPU: how many writers
//! are inside, and above them how many times the last one left (the epoch).
//!
//! How writers count themselves depends on the platform's [`Platform::PROMISE`]:
//! - promised (one running caller per index, barriers that pair): plain loads and
//!   stores. Writers of one CPU nest like a stack (thread, IRQ, NMI), so an interrupt
//!   between a load and its store restores the word before it returns; the ordering
//!   between a writer's store and its loads of the state, against the control side's
//!   store of the state and its loads of the words, is the platform's asymmetric
//!   barrier (`Platform::light_barrier` on the writer side,
//!   `Platform::heavy_barrier` on the control side);
//! - not promised: atomic read-modify-writes and full fences, exact whichever
//!   callers share an index.
//!
//! A control operation publishes its change, then waits for a *grace period*
//! ([`Sections::synchronize`]): every CPU has left any section it entered before the
//! publication. Only then does it free, reset or reuse what writers may have seen.
//! See DESIGN.md, "The per-CPU section".

extern crate alloc;

use crate::error::Error;
use crate::platform::Platform;
use crate::sync::{
    AtomicU64, CachePadded, Ordering::*, Point, fence, preempt_point, signal_fence, spin,
};
use alloc::vec::Vec;
use core::marker::PhantomData;

/// One CPU's section word: the writers inside ([`DEPTH`]), and above them the
/// epoch, how many times the count went from one to zero ([`EPOCH`] each). One word,
/// so that the last writer's exit and the epoch it bumps are one change even when
/// callers share an index.
#[derive(Default)]
struct Section {
    word: AtomicU64,
}

/// The bits of a section word that count the writers inside (at most 2^24 - 1 at once).
const DEPTH: u64 = (1 << 24) - 1;
/// One exit of the last writer inside, in a section word.
const EPOCH: u64 = 1 << 24;

/// Replaces `word` by `change` of it, with a compare-and-swap (`Release`): for
/// callers that may share the word. Returns the old value, or `None`, changing
/// nothing, if `change` refuses it.
fn update(word: &AtomicU64, change: impl Fn(u64) -> Option<u64>) -> Option<u64> {
    let mut now = word.load(Relaxed);
    loop {
        match word.compare_exchange_weak(now, change(now)?, Release, Relaxed) {
            Ok(old) => return Some(old),
            Err(seen) => now = seen,
        }
    }
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
    /// What leaving stores, for a promising platform (`None`: leave atomically).
    leave: Option<u64>,
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
    /// CPU, or if 2^24 - 1 callers are inside it already (deeper nesting would carry
    /// into the epoch). Callable from any context; never blocks.
    #[inline(always)]
    pub(crate) fn enter<P: Platform>(&self, platform: &P, cpu: usize) -> Option<SectionGuard<'_>> {
        let section = &**self.cpus.get(cpu)?;
        let leave = if P::PROMISE.is_some() {
            let word = section.word.load(Relaxed);
            if word & DEPTH == DEPTH {
                return None;
            }
            // An exact increment: an interrupt between the load and the store restores
            // the word before it returns (writers nest like a stack), and no other
            // caller has this index (the promise). Release: the word carries the
            // epoch the last writer's exit stored, so a waiter that reads this store
            // must also see what that writer wrote (a plain store on x86).
            section.word.store(word + 1, Release);
            preempt_point(Point::Section);
            // The writer's half of the asymmetric barrier: our store is ordered
            // before every load of the tracer's state that follows, as seen by a
            // control operation after its heavy barrier. Either it sees us inside, or
            // we see its change.
            platform.light_barrier();
            // Nested writers restore the word, so leaving stores it back, one epoch
            // on if we were the only writer inside.
            Some(if word & DEPTH == 0 { word.wrapping_add(EPOCH) } else { word })
        } else {
            // Release: as above (a read-modify-write continues the exit's release
            // sequence anyway).
            let more = |word: u64| (word & DEPTH != DEPTH).then_some(word + 1);
            update(&section.word, more)?;
            preempt_point(Point::Section);
            // Both halves of the barrier are full fences without the promise.
            fence(SeqCst);
            None
        };
        Some(SectionGuard { section, leave, _not_send: PhantomData })
    }

    /// Makes CPU `cpu`'s section look as if `depth` callers were inside it.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn set_depth_for_tests(&self, cpu: usize, depth: u64) {
        self.cpus[cpu].word.store(depth, Relaxed);
    }

    /// Starts a grace period: checks that the caller may wait. `WouldDeadlock` if it
    /// may not (interrupts off, inside an interrupt: `Platform::may_wait`) or is
    /// inside a section itself; nothing was published yet, so nothing changed.
    pub(crate) fn grace<'a, P: Platform>(&'a self, platform: &'a P) -> Result<Grace<'a, P>, Error> {
        self.may_wait(platform)?;
        Ok(Grace { sections: self, platform })
    }

    /// `WouldDeadlock` unless the caller may wait for a grace period: the platform
    /// says it may (`Platform::may_wait`) and it is not inside a section itself (a
    /// closure the tracer runs inside one: it would wait for itself, or spin on a
    /// lock that a control operation holds while it waits for this CPU).
    pub(crate) fn may_wait<P: Platform>(&self, platform: &P) -> Result<(), Error> {
        let inside =
            self.cpus.get(platform.cpu()).is_some_and(|s| s.word.load(Relaxed) & DEPTH != 0);
        match inside || !platform.may_wait() {
            true => Err(Error::WouldDeadlock),
            false => Ok(()),
        }
    }

    /// Publishes nothing itself: waits for a grace period after the caller's change
    /// (see [`Grace::wait`]).
    pub(crate) fn synchronize<P: Platform>(&self, platform: &P) -> Result<(), Error> {
        self.grace(platform)?.wait();
        Ok(())
    }
}

/// A grace period the caller may wait for (see [`Sections::grace`]); a copy waits
/// for another, later one (the caller's right to wait does not change).
pub(crate) struct Grace<'a, P> {
    sections: &'a Sections,
    platform: &'a P,
}

impl<P> Clone for Grace<'_, P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P> Copy for Grace<'_, P> {}

impl<P: Platform> Grace<'_, P> {
    /// Returns once every CPU has left every section it was in when this call
    /// began. The caller published its change before calling.
    pub(crate) fn wait(self) {
        if P::PROMISE.is_some() {
            self.platform.heavy_barrier();
        } else {
            fence(SeqCst);
        }
        for section in &self.sections.cpus {
            // Acquire (every load): pairs with the Release stores of leaving writers,
            // so what the writers we wait for wrote is visible once they are gone.
            let first = section.word.load(Acquire);
            if first & DEPTH == 0 {
                continue;
            }
            // Waiting for "no writer inside, or one more exit of the last" cannot
            // starve while a promising platform's CPU keeps writing: every writer
            // inside at the publication is inside the current outermost one.
            loop {
                let now = section.word.load(Acquire);
                if now & DEPTH == 0 || now & !DEPTH != first & !DEPTH {
                    break;
                }
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
        let section = &self.section.word;
        signal_fence();
        // Release (both ways): a waiter that sees us gone sees our records.
        if let Some(word) = self.leave {
            section.store(word, Release);
        } else {
            // The last writer out moves the epoch on, in the same change.
            let left = |word: u64| {
                Some(if word & DEPTH == 1 { (word - 1).wrapping_add(EPOCH) } else { word - 1 })
            };
            update(section, left);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::HostPlatform;
    use crate::tests::util::Probe;

    /// One more caller than the depth counts is refused, on either path: its entry
    /// would carry into the epoch, and a waiter would take the CPU for empty while
    /// every caller is still inside.
    fn refuses_entry_when_full<P: Platform>(platform: P) {
        let sections = Sections::new(1).unwrap();
        // As if 2^24 - 2 callers were inside, one epoch on.
        sections.set_depth_for_tests(0, EPOCH + DEPTH - 1);
        let last = sections.enter(&platform, 0).expect("room for one more");
        assert!(sections.enter(&platform, 0).is_none(), "entered past the depth's bits");
        assert_eq!(sections.cpus[0].word.load(Relaxed), EPOCH + DEPTH);
        drop(last);
        assert_eq!(sections.cpus[0].word.load(Relaxed), EPOCH + DEPTH - 1);
    }

    #[test]
    fn a_full_section_refuses_entry_rather_than_carry_into_the_epoch() {
        // `Probe` promises; `HostPlatform` does not.
        refuses_entry_when_full(Probe::default());
        refuses_entry_when_full(HostPlatform);
    }
}
