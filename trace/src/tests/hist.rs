//! The histogram table under concurrent writers: every hit is counted once, in its
//! key's entry or as a drop, and no key has two entries.

use crate::tracer::hist::table::Table;
use std::collections::HashMap;
use std::vec::Vec;

/// Adds per thread in the threaded tests (under Miri, which interprets every step,
/// just enough keys to fill a table of 128).
const ADDS: u64 = if cfg!(miri) { 160 } else { 50_000 };
/// Fresh tables in the racing test.
const ROUNDS: u64 = if cfg!(miri) { 1 } else { 2000 };

/// What the histograms of the property test ask of an instance: a stack of
/// `0x1234`s, a clock at 0, no snapshot.
pub(super) struct Host;

impl crate::tracer::hist::HistHost for Host {
    fn stack_frames(&self, frames: &mut [u64]) {
        frames.fill(0x1234);
    }
    fn now(&self) -> u64 {
        0
    }
    fn snapshot(&self) -> bool {
        false
    }
}

/// An allocated table.
fn table(max: usize, key_words: usize, vals: usize) -> Table {
    let mut table = Table::new(max, key_words, vals, 0, 0);
    assert!(table.allocate());
    table
}

/// Adds key `i % keys` with value `i` from each of `threads` threads, `n` times each.
fn hammer(table: &Table, threads: u64, n: u64, keys: u64) {
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(move || (0..n).for_each(|i| table.add(&[i % keys], &[i], &[], |_| {})));
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
    let table = table(128, 1, 1);
    hammer(&table, 4, ADDS, 100);
    let entries = by_key(&table);
    assert_eq!(entries.len(), 100);
    for (key, (hits, sum)) in entries {
        let mine: Vec<u64> = (0..ADDS).filter(|i| i % 100 == key).collect();
        assert_eq!((hits, sum), (4 * mine.len() as u64, 4 * mine.iter().sum::<u64>()), "key {key}");
    }
    assert_eq!(table.drops(), 0);
}

#[test]
#[cfg_attr(miri, ignore = "single-threaded safe code, run natively (5 s under Miri)")]
fn hist_table_full_drops_and_counts_what_it_cannot_keep() {
    let table = table(128, 1, 1);
    hammer(&table, 4, ADDS, 300);
    let entries = by_key(&table);
    assert_eq!(entries.len(), 128, "the table keeps `size` entries");
    let counted: u64 = entries.values().map(|(n, _)| n).sum();
    assert_eq!(counted + table.drops(), 4 * ADDS, "every hit counted once");
    assert!(table.drops() > 0);
}

/// Many fresh tables, each filled at once by threads with keys of their own: a slot
/// claimed by two writers at the same time would lose a key or give it another's
/// hits.
#[test]
fn hist_table_writers_racing_for_empty_slots_keep_each_key_once() {
    let threads = 4;
    for round in 0..ROUNDS {
        let table = table(128, 1, 1);
        let start = std::sync::Barrier::new(threads);
        std::thread::scope(|s| {
            for t in 0..threads as u64 {
                let (table, start) = (&table, &start);
                s.spawn(move || {
                    start.wait();
                    (0..32).for_each(|j| {
                        table.add(&[(round << 32) | (t << 8) | j], &[t], &[], |_| {})
                    });
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

/// A host whose snapshot swaps are taken or refused as `taken` says, counting them.
struct Swaps {
    taken: std::cell::Cell<bool>,
    asked: std::cell::Cell<u32>,
}

impl crate::tracer::hist::HistHost for Swaps {
    fn stack_frames(&self, frames: &mut [u64]) {
        frames.fill(0);
    }
    fn now(&self) -> u64 {
        0
    }
    fn snapshot(&self) -> bool {
        self.asked.set(self.asked.get() + 1);
        self.taken.get()
    }
}

/// `onmax(...).snapshot()`: the `hist` file's details are those of the snapshot
/// the buffer holds; a refused swap changes nothing, and the next value above the
/// last snapshot's tries again.
#[test]
fn hist_snapshot_details_are_the_snapshot_taken() {
    use crate::event::dispatch::Body;
    use crate::field::{Field, FieldKind};
    use crate::tracer::trigger::{Trigger, TriggerCommand};
    let fields = [Field { name: "n", kind: FieldKind::U32 }];
    let line = "hist:keys=n:v=n:onmax($v).snapshot():size=128";
    let Ok(TriggerCommand::Add(mut trigger)) = Trigger::parse(line, &fields, |_, _| None, None)
    else {
        panic!("{line}: not taken")
    };
    trigger.allocate().unwrap();
    let hist = trigger.hist().unwrap();
    let host = Swaps { taken: false.into(), asked: 0.into() };
    let add = |n: u32, taken: bool| {
        host.taken.set(taken);
        let payload = n.to_le_bytes();
        hist.record(
            &Body { len: 4, payload: &&payload[..], words: None },
            super::util::HERE,
            &host,
        );
        let mut text = std::string::String::new();
        hist.write(&trigger, None, &mut text).unwrap();
        let details =
            text.lines().find_map(|l| l.strip_prefix("\ttriggering value { onmax($v) }: "));
        details.map(|d| d.split_whitespace().collect::<Vec<_>>().join(" "))
    };
    let at = |v: u32| Some(std::format!("{v} triggered by event with key: {{ n: {v} }}"));
    assert_eq!(add(5, false), None, "refused: no details");
    assert_eq!(add(6, true), at(6));
    assert_eq!(add(9, false), at(6), "refused: the last snapshot's details");
    assert_eq!(add(7, true), at(7), "above the last snapshot's value");
    assert_eq!(add(7, true), at(7));
    assert_eq!(add(4, true), at(7), "not above the last snapshot's value");
    assert_eq!(host.asked.get(), 4, "swaps asked for: 5, 6, 9 and the first 7");
}

mod lines {
    use crate::event::dispatch::Body;
    use crate::field::{Field, FieldKind};
    use crate::tests::util::HERE;
    use crate::tracer::trigger::{Trigger, TriggerCommand};
    use proptest::prelude::*;
    use std::string::{String, ToString};

    const FIELDS: &[Field<'static>] = &[
        Field { name: "n", kind: FieldKind::U32 },
        Field { name: "s", kind: FieldKind::Str },
        Field { name: "d", kind: FieldKind::I64 },
        Field { name: "g", kind: FieldKind::Bytes(4) },
    ];

    /// Attributes, good and bad, that a `hist` line is made of.
    const ATTRS: &[&str] = &[
        "keys=n",
        "keys=s,n.hex",
        "keys=d.log2,CPU",
        "key=COMM",
        "keys=g",
        "keys=",
        "keys=n,",
        "vals=d",
        "values=n,d",
        "val=d",
        "vals=s",
        "vals=hitcount",
        "vals=hitcount.percent,d.graph",
        "vals=hitcount.graph,n.percent,d.hex",
        "vals=hitcount.hex",
        "nohitcount",
        "NOHC",
        "keys=n.percent",
        "sort=n",
        "sort=hitcount.descending",
        "sort=d,n.ascending",
        "sort=",
        "sort=n,",
        "sort=x",
        "sort=a,b,c",
        "size=128",
        "size=300",
        "size=65",
        "size=64",
        "size=7",
        "size=",
        "pause",
        "cont",
        "continue",
        "clear",
        "name=x",
        "t0=common_timestamp.usecs",
        "x=n*2,y=d-$x",
        "vals=$x",
        "w=n/0",
        "v=s",
        "q=1+2+3",
        "hitcount=1",
        "onmax($x).save(n,CPU)",
        "onchange($y).snapshot()",
        "onmax($nope).save(n)",
        "onmax($x).save(s)",
        "",
        "junk",
        "keys=n.é",
    ];

    fn parse(line: &str) -> Result<Trigger, usize> {
        match Trigger::parse(line, FIELDS, |_, _| None, None) {
            Ok(TriggerCommand::Add(t) | TriggerCommand::Hist(t, _)) => Ok(t),
            Ok(TriggerCommand::Remove(_)) => panic!("{line}: a removal"),
            Err(e) => Err(e.pos),
        }
    }

    /// As ftrace's: `val=` names the values as `vals=` does, and a size is rounded
    /// up to a power of two before its range is checked.
    #[test]
    fn val_names_the_values_and_a_size_rounds_up_first() {
        let shown = |line: &str| parse(line).map(|t| t.to_string());
        let vals = "hist:keys=n:vals=hitcount,d:sort=hitcount:size=2048 [active]";
        assert_eq!(shown("hist:keys=n:val=d"), Ok(vals.to_string()));
        let sized = |size| format!("hist:keys=n:vals=hitcount:sort=hitcount:size={size} [active]");
        assert_eq!(shown("hist:keys=n:size=100"), Ok(sized(128)));
        assert_eq!(shown("hist:keys=n:size=65"), Ok(sized(128)));
        assert_eq!(shown("hist:keys=n:size=16384"), Ok(sized(16384)));
        for refused in ["64", "16385", "0", "18446744073709551615"] {
            let line = format!("hist:keys=n:size={refused}");
            assert_eq!(shown(&line), Err("hist:keys=n:size=".len()), "{line}");
        }
    }

    proptest! {
        #![proptest_config(crate::tests::util::cases(2000))]

        /// Any line is taken or refused at a position inside it, never a panic; one
        /// taken reads back as a line that parses to the same histogram and reads
        /// back the same; any payload, even one that does not fit the fields, is
        /// added or counted as dropped.
        #[test]
        #[cfg_attr(miri, ignore = "single-threaded safe code, run natively (2,000 cases)")]
        fn hist_lines_round_trip_and_any_payload_is_counted(
            attrs in prop::collection::vec(prop::sample::select(ATTRS), 0..6),
            filter in prop::sample::select(&["", " if n > 3", " if s ~ \"a*\"", " if"][..]),
            payloads in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..24), 0..8),
        ) {
            let mut line = String::from("hist");
            for attr in &attrs {
                line.push(':');
                line.push_str(attr);
            }
            line.push_str(filter);
            match parse(&line) {
                Err(pos) => prop_assert!(pos <= line.len(), "{} at {}", line, pos),
                Ok(mut trigger) => {
                    prop_assert!(trigger.allocate().is_ok());
                    let shown = trigger.to_string();
                    let back = shown.strip_suffix(" [active]").or(shown.strip_suffix(" [paused]"));
                    let again = parse(back.unwrap()).unwrap();
                    prop_assert!(again.same_as(&trigger), "{} -> {}", line, shown);
                    let shown_again = again.to_string();
                    let strip = |s: &str| s.rsplit_once(' ').unwrap().0.to_string();
                    prop_assert_eq!(strip(&shown_again), strip(&shown));
                    let hist = trigger.hist().unwrap();
                    for payload in &payloads {
                        let body = Body { len: payload.len(), payload: &&payload[..], words: None };
                        hist.record(&body, HERE, &super::Host);
                    }
                    // Every event added is in a hitcount or in `Dropped`: `Hits`.
                    let mut text = String::new();
                    hist.write(&trigger, None, &mut text).unwrap();
                    let hits = text.lines().find_map(|l| l.trim().strip_prefix("Hits: "));
                    let added = if hist.paused() { 0 } else { payloads.len() }.to_string();
                    prop_assert_eq!(hits, Some(added.as_str()), "{}", text);
                }
            }
        }
    }
}
