//! A histogram's table. Events add to it from their own context, NMIs included, so
//! it takes no lock and allocates nothing once set up: a fixed array of slots (twice `size`, open addressing, linear
//! probing), each a word of tag, the key's words and the sums. A writer that finds an
//! empty slot reserves an entry (`entries`, at most `size`), claims the slot with a
//! compare-and-swap of its tag (the key's hash, marked claimed), stores the key and
//! publishes it with a release store of the tag marked ready; the sums are atomic
//! adds. A writer that meets a slot of the same hash still being claimed waits for
//! it a bounded number of steps (`MAX_SPIN`): the claimer may be the context it
//! interrupted on the same CPU, which cannot finish until it returns. Then, as when
//! the table is full, the event is dropped and counted. A histogram with variables
//! ([`super::var`]) stores them in its entry after the sums, each event's over the
//! last, and sets their bits in the entry's last word with a release; a reference
//! from another histogram finds the entry of its key without making one and reads a
//! variable whose bit is set (clearing the bit, when it reads once: an acquire
//! read-modify-write, so the value stored before the bit is seen). `Hits` is the sum of the
//! hitcounts plus `Dropped`, added up when read: a counter of every hit would be a
//! line every CPU writes. Reading walks the ready slots. Clearing needs no writer
//! inside: the instance pauses the histogram and waits for a grace period first.
//! The slots are allocated when the trigger is set, within a budget all histograms
//! share ([`MAX_HIST_BYTES`]).

use super::var::ACTION_WORDS;
use super::{KEY_WORDS, MAX_VALS};
use crate::sync::{AtomicU64, AtomicUsize, Ordering::*, spin};
use alloc::boxed::Box;
use alloc::vec::Vec;

/// Steps a writer waits for a slot of its key's hash to be published before it
/// drops the event (a few under loom, which explores each step).
const MAX_SPIN: u32 = if cfg!(loom) { 3 } else { 1024 };
/// Most bytes all histograms' tables take together (a table of the largest size
/// with the widest entries takes 3.4 MB; one of the default size with one key, 96
/// KiB).
pub const MAX_HIST_BYTES: usize = 32 << 20;
/// Bytes the histograms' tables take now (every tracer's: the budget is the
/// kernel's). Outside loom's model: a plain atomic.
static HIST_BYTES: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
/// The tag bit of a slot whose key is published.
const READY: u64 = 1 << 63;

/// An entry as read: its key's words, its sums (`hitcount` first) and its action
/// words.
pub(crate) struct Entry {
    pub(crate) key: [u64; KEY_WORDS],
    pub(crate) vals: [u64; 1 + MAX_VALS],
    pub(crate) actions: [u64; ACTION_WORDS],
}

/// The lock-free table (see the module's documentation).
#[derive(Debug)]
pub(crate) struct Table {
    /// The slots, each `stride` words: tag, key, hitcount, sums, then the variables
    /// and their bits, if any, then the words of the histogram's actions.
    words: Box<[AtomicU64]>,
    stride: usize,
    /// Words of key per entry.
    pub(crate) key_words: usize,
    /// Variables per entry.
    vars: usize,
    /// Where an entry's variables start (its sums end).
    vars_at: usize,
    /// Where an entry's action words start (its variables' bits end).
    actions_at: usize,
    /// Slots (a power of two: twice `max`).
    slots: usize,
    /// Most entries.
    pub(crate) max: usize,
    entries: AtomicUsize,
    drops: AtomicU64,
}

impl Table {
    /// A table of at most `max` entries (a power of two), each of `key_words` words
    /// of key, a hitcount, `vals` sums, `vars` variables and `actions` words for the
    /// actions; its slots are allocated by [`Table::allocate`] (until then every
    /// event is dropped).
    pub(crate) fn new(
        max: usize,
        key_words: usize,
        vals: usize,
        vars: usize,
        actions: usize,
    ) -> Table {
        let vars_at = 1 + key_words + 1 + vals;
        let actions_at = vars_at + if vars > 0 { vars + 1 } else { 0 };
        Table {
            words: Box::default(),
            stride: actions_at + actions,
            key_words,
            vars,
            vars_at,
            actions_at,
            slots: 0,
            max,
            entries: AtomicUsize::new(0),
            drops: AtomicU64::new(0),
        }
    }

    /// Allocates the slots, unless they would take the histograms past
    /// [`MAX_HIST_BYTES`] or the heap cannot supply them (false, nothing allocated),
    /// or they are there already.
    pub(crate) fn allocate(&mut self) -> bool {
        if self.slots != 0 {
            return true;
        }
        let slots = 2 * self.max;
        let bytes = slots * self.stride * 8;
        let budget = HIST_BYTES.try_update(Relaxed, Relaxed, |used| {
            used.checked_add(bytes).filter(|&total| total <= MAX_HIST_BYTES)
        });
        if budget.is_err() {
            return false;
        }
        let mut words = Vec::new();
        if words.try_reserve_exact(slots * self.stride).is_err() {
            HIST_BYTES.fetch_sub(bytes, Relaxed);
            return false;
        }
        words.extend((0..slots * self.stride).map(|_| AtomicU64::new(0)));
        self.words = words.into();
        self.slots = slots;
        true
    }

    fn slot(&self, index: usize) -> &[AtomicU64] {
        let start = (index & (self.slots - 1)) * self.stride;
        &self.words[start..start + self.stride]
    }

    /// Counts an event that was not added.
    pub(crate) fn drop_one(&self) {
        self.drops.fetch_add(1, Relaxed);
    }

    /// Adds one hit and `vals` to `key`'s entry, made if it is new, stores its
    /// variables `vars` there, and passes the entry's action words to `act`, unless
    /// the event was dropped.
    #[inline(always)]
    pub(crate) fn add(
        &self,
        key: &[u64],
        vals: &[u64],
        vars: &[u64],
        act: impl FnOnce(&[AtomicU64]),
    ) {
        if self.slots == 0 {
            return self.drop_one();
        }
        let hash = hash(key);
        let claimed = (hash | 1) & !READY;
        let ready = claimed | READY;
        for probe in 0..self.slots {
            let slot = self.slot((hash as usize).wrapping_add(probe));
            let (tag, keys) = (&slot[0], &slot[1..=self.key_words]);
            // Acquire: a ready tag's key is visible.
            let mut seen = tag.load(Acquire);
            if seen == 0 {
                if self.entries.fetch_add(1, Relaxed) >= self.max {
                    self.entries.fetch_sub(1, Relaxed);
                    break;
                }
                match tag.compare_exchange(0, claimed, Relaxed, Acquire) {
                    Ok(_) => {
                        keys.iter().zip(key).for_each(|(word, &k)| word.store(k, Relaxed));
                        // Release: the key before the tag that says it is there.
                        tag.store(ready, Release);
                        self.accumulate(slot, vals, vars);
                        return act(&slot[self.actions_at..]);
                    }
                    Err(now) => {
                        self.entries.fetch_sub(1, Relaxed);
                        seen = now;
                    }
                }
            }
            if seen | READY != ready {
                continue;
            }
            let mut spins = 0;
            while seen & READY == 0 {
                if spins == MAX_SPIN {
                    return self.drop_one();
                }
                spin();
                spins += 1;
                seen = tag.load(Acquire);
            }
            if keys.iter().zip(key).all(|(word, &k)| word.load(Relaxed) == k) {
                self.accumulate(slot, vals, vars);
                return act(&slot[self.actions_at..]);
            }
        }
        self.drop_one();
    }

    #[inline(always)]
    fn accumulate(&self, slot: &[AtomicU64], vals: &[u64], vars: &[u64]) {
        // The hitcount, then as many sums as `vals` (the variables' words after them).
        let sums = &slot[1 + self.key_words..];
        sums[0].fetch_add(1, Relaxed);
        sums[1..].iter().zip(vals).for_each(|(sum, &v)| {
            sum.fetch_add(v, Relaxed);
        });
        if self.vars > 0 {
            self.store_vars(slot, vars);
        }
    }

    /// Stores an entry's variables, then sets their bits (out of line: a histogram
    /// without variables does not carry this code in its add).
    #[inline(never)]
    fn store_vars(&self, slot: &[AtomicU64], vars: &[u64]) {
        let (values, bits) = slot[self.vars_at..self.actions_at].split_at(self.vars);
        values.iter().zip(vars).for_each(|(word, &v)| word.store(v, Relaxed));
        // Release: a reader that sees a bit sees the value stored before it.
        bits[0].fetch_or((1 << self.vars) - 1, Release);
    }

    /// Variable `index` of `key`'s entry, if the entry exists and the variable is
    /// set; `once` unsets it. Makes no entry; callable from any context.
    pub(crate) fn read_var(&self, key: &[u64], index: usize, once: bool) -> Option<u64> {
        let slot = self.find(key)?;
        let (value, bits) = (slot.get(self.vars_at + index)?, slot.get(self.vars_at + self.vars)?);
        let bit = 1u64 << index;
        // Acquire: the value stored before the bit was set is visible.
        let set = if once { bits.fetch_and(!bit, Acquire) } else { bits.load(Acquire) };
        (set & bit != 0).then(|| value.load(Relaxed))
    }

    /// `key`'s published entry, if there is one.
    fn find(&self, key: &[u64]) -> Option<&[AtomicU64]> {
        if self.slots == 0 || key.len() != self.key_words {
            return None;
        }
        let hash = hash(key);
        let ready = (hash | 1) | READY;
        for probe in 0..self.slots {
            let slot = self.slot((hash as usize).wrapping_add(probe));
            // Acquire: a ready tag's key is visible.
            match slot[0].load(Acquire) {
                0 => return None,
                tag if tag == ready => {
                    let keys = &slot[1..=self.key_words];
                    if keys.iter().zip(key).all(|(word, &k)| word.load(Relaxed) == k) {
                        return Some(slot);
                    }
                }
                _ => {}
            }
        }
        None
    }

    /// The published entries.
    pub(crate) fn entries(&self) -> Vec<Entry> {
        (0..self.slots)
            .map(|i| self.slot(i))
            .filter(|slot| slot[0].load(Acquire) & READY != 0)
            .map(|slot| {
                let mut entry = Entry {
                    key: [0; KEY_WORDS],
                    vals: [0; 1 + MAX_VALS],
                    actions: [0; ACTION_WORDS],
                };
                let (keys, sums) = slot[1..self.vars_at].split_at(self.key_words);
                entry.key.iter_mut().zip(keys).for_each(|(k, w)| *k = w.load(Relaxed));
                entry.vals.iter_mut().zip(sums).for_each(|(v, w)| *v = w.load(Relaxed));
                let actions = &slot[self.actions_at..];
                entry.actions.iter_mut().zip(actions).for_each(|(v, w)| *v = w.load(Relaxed));
                entry
            })
            .collect()
    }

    /// Events that fired the histogram, and those of them not added: the hitcounts
    /// of `entries` (the table's, as read) plus the drops, and the drops. No counter
    /// of every hit is kept: each CPU would write it.
    pub(crate) fn totals(&self, entries: &[Entry]) -> (u64, u64) {
        let drops = self.drops.load(Relaxed);
        (entries.iter().map(|e| e.vals[0]).sum::<u64>() + drops, drops)
    }

    /// Empties the table. Only while no writer can be adding to it.
    pub(crate) fn reset(&self) {
        self.words.iter().for_each(|w| w.store(0, Relaxed));
        self.entries.store(0, Relaxed);
        self.drops.store(0, Relaxed);
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        HIST_BYTES.fetch_sub(self.words.len() * 8, Relaxed);
    }
}

/// A key's hash (a multiply-xorshift mix of its words).
pub(crate) fn hash(key: &[u64]) -> u64 {
    let mut h = 0x9e37_79b9_7f4a_7c15u64;
    for &w in key {
        h = (h ^ w).wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 32;
    }
    h
}

#[cfg(test)]
impl Table {
    /// The entries as plain data: `(key words, sums)`, `hitcount` first.
    pub(crate) fn contents(&self) -> Vec<(Vec<u64>, Vec<u64>)> {
        let sums = self.vars_at - 1 - self.key_words;
        self.entries()
            .into_iter()
            .map(|e| (e.key[..self.key_words].to_vec(), e.vals[..sums].to_vec()))
            .collect()
    }

    /// Events not added.
    pub(crate) fn drops(&self) -> u64 {
        self.drops.load(Relaxed)
    }
}
