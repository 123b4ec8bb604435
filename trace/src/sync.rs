//! The atomics facade: `core` atomics normally, loom's under `cfg(loom)` (as in
//! hawkw/thingbuf's `src/loom.rs`), plus cache-line padding and the test hook that
//! simulates an interrupt arriving at a chosen point of the write path.

#[cfg(all(loom, test))]
pub(crate) use loom::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};

#[cfg(not(all(loom, test)))]
pub(crate) use core::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};

/// Orders this CPU's accesses against an interrupt handler that runs on the same CPU
/// (a signal fence: it constrains the compiler only; a CPU sees its own accesses in
/// program order). Loom has no interrupts, so it is a no-op there.
#[inline(always)]
pub(crate) fn signal_fence() {
    #[cfg(not(all(loom, test)))]
    core::sync::atomic::compiler_fence(Ordering::SeqCst);
}

/// One step of a bounded busy-wait (loom must be told to schedule another thread).
#[inline]
pub(crate) fn spin() {
    #[cfg(all(loom, test))]
    loom::thread::yield_now();
    #[cfg(not(all(loom, test)))]
    core::hint::spin_loop();
}

/// Aligns (and so pads) its content to 128 bytes: two 64-byte lines, because x86's
/// adjacent-line prefetcher pulls lines in pairs (crossbeam's `CachePadded` does the same).
#[repr(align(128))]
#[derive(Default)]
pub(crate) struct CachePadded<T>(pub(crate) T);

impl<T> core::ops::Deref for CachePadded<T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        &self.0
    }
}

/// A spin lock over the facade's atomics (so loom sees it), for a short section
/// that callers on different CPUs run one at a time. Never taken twice on one CPU.
#[derive(Default)]
pub(crate) struct SpinLock(AtomicBool);

/// Holding a [`SpinLock`]; dropping it releases the lock.
pub(crate) struct SpinGuard<'a>(&'a AtomicBool);

impl SpinLock {
    /// Waits for the lock and takes it.
    pub(crate) fn lock(&self) -> SpinGuard<'_> {
        // Acquire: what the previous holder wrote is visible to this one.
        while self
            .0
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spin();
        }
        SpinGuard(&self.0)
    }
}

impl Drop for SpinGuard<'_> {
    fn drop(&mut self) {
        // Release: pairs with the next holder's Acquire.
        self.0.store(false, Ordering::Release);
    }
}

/// Adds `n` to a counter that has a single writer at a time (a per-nesting-depth
/// counter, or the consuming reader's counter): a load and a store, no RMW instruction.
#[inline(always)]
pub(crate) fn bump(counter: &AtomicU64, n: u64) {
    let v = counter.load(Ordering::Relaxed);
    preempt_point(Point::Bump);
    counter.store(v.wrapping_add(n), Ordering::Relaxed);
}

/// The points of the write path where a test may simulate an interrupt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Point {
    /// The writer has raised its nesting depth.
    Entered,
    /// In overwrite mode, during the walk over the records to reclaim, after each.
    Walking,
    /// In overwrite mode, just before the compare-and-swap that reclaims old records.
    Reclaiming,
    /// Just before the compare-and-swap that reserves space.
    Reserving,
    /// Space is reserved; nothing is written into it yet.
    Claimed,
    /// Space is reserved and its header written (as padding's); the payload is not.
    Reserved,
    /// The payload and the event's header are written; the record is not counted.
    Filled,
    /// The outermost writer has loaded the head it will publish, and has not left.
    Publishing,
    /// The outermost writer has published the commit position and left.
    Committed,
    /// Between the load and the store of a single-writer counter.
    Bump,
    /// A writer has entered its CPU's section (see `ring/section.rs`).
    Section,
    /// A consuming reader has loaded the tail and the commit position, and has not
    /// copied the oldest record yet.
    Peeking,
}

/// Calls the test's simulated interrupt, if one is armed on this thread.
#[cfg(test)]
#[inline(never)]
pub(crate) fn preempt_point(p: Point) {
    hook::fire(p);
}

/// Production builds have no hook: this is nothing.
#[cfg(not(test))]
#[inline(always)]
pub(crate) fn preempt_point(_p: Point) {}

#[cfg(test)]
pub(crate) mod hook {
    //! A thread-local "interrupt": a closure the write path calls at its [`Point`]s.
    use super::Point;
    use std::boxed::Box;
    use std::cell::RefCell;

    type Hook = Box<dyn FnMut(Point)>;

    // Under loom, each model thread its own: its threads share one OS thread, and an
    // interrupt strikes the thread that armed it only.
    #[cfg(loom)]
    loom::thread_local! {
        static HOOK: RefCell<Option<Hook>> = RefCell::new(None);
    }
    #[cfg(not(loom))]
    std::thread_local! {
        static HOOK: RefCell<Option<Hook>> = const { RefCell::new(None) };
    }

    /// Arms `f`; it is called at every point until [`clear`] (never re-entered: the
    /// writes it makes run without the hook, like a handler that is not interrupted).
    pub(crate) fn set(f: impl FnMut(Point) + 'static) {
        HOOK.with(|h| *h.borrow_mut() = Some(Box::new(f)));
    }

    /// Arms `f` to run once, at the next `point` (a simulated interrupt that strikes
    /// there once).
    pub(crate) fn once(point: Point, f: impl FnOnce() + 'static) {
        let mut f = Some(f);
        set(move |p| {
            if p == point
                && let Some(f) = f.take()
            {
                f();
            }
        });
    }

    /// Disarms the hook.
    pub(crate) fn clear() {
        HOOK.with(|h| *h.borrow_mut() = None);
    }

    pub(super) fn fire(p: Point) {
        let taken = HOOK.with(|h| h.borrow_mut().take());
        if let Some(mut f) = taken {
            f(p);
            HOOK.with(|h| {
                let mut slot = h.borrow_mut();
                if slot.is_none() {
                    *slot = Some(f);
                }
            });
        }
    }
}
