//! The histogram table under concurrent writers: every hit is counted once, in its
//! key's entry or as a drop, and no key has two entries.

use crate::tracer::hist::Table;
use std::collections::HashMap;
use std::vec::Vec;

/// Adds key `i % keys` with value `i` from each of `threads` threads, `n` times each.
fn hammer(table: &Table, threads: u64, n: u64, keys: u64) {
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(move || (0..n).for_each(|i| table.add(&[i % keys], &[i])));
        }
    });
}

/// The entries by key; panics on a key with two entries.
fn by_key(table: &Table) -> HashMap<u64, (u64, u64)> {
    let mut map = HashMap::new();
    for (key, sums) in table.contents() {
        assert!(map.insert(key[0], (sums[0], sums[1])).is_none(), "key {} twice", key[0]);
    }
    map
}

#[test]
fn hist_table_counts_every_hit_exactly_from_many_threads() {
    let table = Table::new(128, 1, 1);
    hammer(&table, 4, 50_000, 100);
    let entries = by_key(&table);
    assert_eq!(entries.len(), 100);
    for (key, (hits, sum)) in entries {
        let mine: Vec<u64> = (0..50_000).filter(|i| i % 100 == key).collect();
        assert_eq!((hits, sum), (4 * mine.len() as u64, 4 * mine.iter().sum::<u64>()), "key {key}");
    }
    assert_eq!(table.drops(), 0);
}

#[test]
fn hist_table_full_drops_and_counts_what_it_cannot_keep() {
    let table = Table::new(128, 1, 1);
    hammer(&table, 4, 30_000, 300);
    let entries = by_key(&table);
    assert_eq!(entries.len(), 128, "the table keeps `size` entries");
    let counted: u64 = entries.values().map(|(n, _)| n).sum();
    assert_eq!(counted + table.drops(), 120_000, "every hit counted once");
    assert!(table.drops() > 0);
}

/// Many fresh tables, each filled at once by threads with keys of their own: a slot
/// claimed by two writers at the same time would lose a key or give it another's
/// hits.
#[test]
fn hist_table_writers_racing_for_empty_slots_keep_each_key_once() {
    let threads = 4;
    for round in 0..2000u64 {
        let table = Table::new(128, 1, 1);
        let start = std::sync::Barrier::new(threads);
        std::thread::scope(|s| {
            for t in 0..threads as u64 {
                let (table, start) = (&table, &start);
                s.spawn(move || {
                    start.wait();
                    (0..32).for_each(|j| table.add(&[(round << 32) | (t << 8) | j], &[t]));
                });
            }
        });
        let entries = by_key(&table);
        assert_eq!(entries.len(), 128, "round {round}");
        for (key, (hits, sum)) in entries {
            assert_eq!((hits, sum), (1, (key >> 8) & 0xff), "round {round}: key {key:#x}");
        }
        assert_eq!(table.drops(), 0);
    }
}
