//! The crate's one module of `unsafe` code of its own (the event and key macros'
//! expansions, and `CpuPromise::new`'s contract, are listed in DESIGN.md): a pointer that writers read inside their
//! section and control operations replace, freeing the old value only after a grace
//! period (read-copy-update). Its argument rests on the grace period, and so on the
//! section: on the platform's `CpuPromise` where it gives one (see
//! `Platform::PROMISE`), on atomic read-modify-writes otherwise.
//!
//! Why `unsafe` here: a writer must reach an instance's recorder with nothing but
//! loads (no reference count, no lock: it runs in NMIs and on every event), while a
//! control operation may replace or remove that recorder at any time. Safe Rust has
//! no reference whose lifetime is "until the next grace period"; the per-CPU section
//! provides exactly that, and this module turns it into a borrow: [`RcuCell::read`]
//! ties the reference to the section's [`Held`] proof, a borrow of its guard, and [`RcuCell::replace`] drops the
//! old value only after [`Grace::wait`]. The loom model `loom_destroy_and_recreate_vs_writer`
//! and the Miri run of the tracer's tests check it.

#![allow(unsafe_code)]

extern crate alloc;

use crate::platform::Platform;
use crate::ring::section::{Grace, Held};
use crate::sync::{AtomicPtr, Ordering::*};
use alloc::sync::Arc;
use core::marker::PhantomData;

/// An optional `Arc<T>` that writers borrow inside their section.
pub(crate) struct RcuCell<T> {
    /// Null, or a pointer from `Arc::into_raw` that the cell owns (one count).
    ptr: AtomicPtr<T>,
    _owns: PhantomData<Arc<T>>,
}

impl<T> RcuCell<T> {
    /// An empty cell.
    pub(crate) fn empty() -> Self {
        RcuCell { ptr: AtomicPtr::new(core::ptr::null_mut()), _owns: PhantomData }
    }

    /// The current value, borrowed for as long as the caller stays in its section.
    #[inline(always)]
    pub(crate) fn read<'a>(&'a self, _section: Held<'a>) -> Option<&'a T> {
        // Acquire: pairs with the Release swap in `replace`, so the value's
        // initialisation is visible (on x86 a plain load).
        let ptr = self.ptr.load(Acquire);
        // SAFETY: `ptr` is null or came from `Arc::into_raw` in `replace`, and the cell
        // holds that count until `replace` swaps the pointer out. `replace` releases the
        // count only after a grace period, which begins after the swap and ends once
        // every CPU has left every section it was in at the swap. The caller loaded
        // `ptr` inside the section `_section` proves, and the returned borrow cannot
        // outlive that section, so the count it relies on is still held until then.
        unsafe { ptr.cast_const().as_ref() }
    }

    /// The current value as a reference of its own, which outlives the section:
    /// dropping it may free the value (not in an NMI, then, where the platform's
    /// allocator may not run).
    pub(crate) fn get(&self, _section: Held<'_>) -> Option<Arc<T>> {
        // Acquire: as in `read`.
        let ptr = self.ptr.load(Acquire).cast_const();
        if ptr.is_null() {
            return None;
        }
        // SAFETY: as in `read`: `ptr` came from `Arc::into_raw`, and the count the cell
        // holds on it lasts at least until the section `_section` proves has ended, so
        // the value is alive while a count of its own is taken for the caller.
        unsafe {
            Arc::increment_strong_count(ptr);
            Some(Arc::from_raw(ptr))
        }
    }

    /// Publishes `new` in an empty cell; no wait is needed, since nothing is freed.
    /// A cell that is not empty keeps its value and `new` is dropped (the caller
    /// serialises changes, so this does not happen).
    pub(crate) fn install(&self, new: Arc<T>) {
        let new = Arc::into_raw(new).cast_mut();
        // Release: publishes the value's initialisation to `read`.
        if self.ptr.compare_exchange(core::ptr::null_mut(), new, Release, Relaxed).is_err() {
            // SAFETY: `new` came from `Arc::into_raw` just above and was not published.
            drop(unsafe { Arc::from_raw(new.cast_const()) });
        }
    }

    /// Publishes `new`, waits for the grace period `grace`, and returns the old value,
    /// which no writer can reach any more. The caller serialises replacements.
    pub(crate) fn replace<P: Platform>(
        &self,
        new: Option<Arc<T>>,
        grace: Grace<'_, P>,
    ) -> Option<Arc<T>> {
        let new = new.map_or(core::ptr::null_mut(), |v| Arc::into_raw(v).cast_mut());
        // Release: publishes the new value's initialisation to `read`. Acquire: the old
        // value's count is ours from here.
        let old = self.ptr.swap(new, AcqRel);
        grace.wait();
        // SAFETY: `old` is null or came from `Arc::into_raw` (a count this cell owned,
        // now unreachable through the cell), and the grace period has ended, so no
        // writer still holds a borrow from `read` of it.
        (!old.is_null()).then(|| unsafe { Arc::from_raw(old.cast_const()) })
    }
}

impl<T> Drop for RcuCell<T> {
    fn drop(&mut self) {
        let ptr = self.ptr.load(Relaxed);
        if !ptr.is_null() {
            // SAFETY: `&mut self`: no borrow from `read` is alive, and the pointer came
            // from `Arc::into_raw` with a count the cell owns.
            drop(unsafe { Arc::from_raw(ptr.cast_const()) });
        }
    }
}
