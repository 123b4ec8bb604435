//! Hook lists: how code above `arch` asks to be called from an interrupt vector (or
//! from any other place below it) without that place knowing who it calls. Hooks
//! are added once, at start-up, and never removed; running them takes no lock, so
//! any context (NMIs included) may run a list while another CPU adds to it.

use core::sync::atomic::{AtomicUsize, Ordering};
use spin::Once;

/// Up to `N` hooks of type `F` (a function pointer), run in the order added.
pub struct Hooks<F, const N: usize> {
    added: AtomicUsize,
    slots: [Once<F>; N],
}

impl<F: Copy, const N: usize> Hooks<F, N> {
    /// An empty list.
    pub const fn new() -> Self {
        Self { added: AtomicUsize::new(0), slots: [const { Once::new() }; N] }
    }

    /// Adds `hook` at the end. Fails (and adds nothing) when the list is full.
    pub fn add(&self, hook: F) -> Result<(), &'static str> {
        let slot = self.added.fetch_add(1, Ordering::Relaxed);
        match self.slots.get(slot) {
            Some(once) => {
                once.call_once(|| hook);
                Ok(())
            }
            None => Err("no room for another hook"),
        }
    }

    /// Calls `run` with every hook added so far (one being added meanwhile may be
    /// left out).
    #[inline]
    pub fn for_each(&self, mut run: impl FnMut(F)) {
        self.slots.iter().map_while(Once::get).for_each(|hook| run(*hook));
    }
}

impl<F: Copy, const N: usize> Default for Hooks<F, N> {
    fn default() -> Self {
        Self::new()
    }
}
