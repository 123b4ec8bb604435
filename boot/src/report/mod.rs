//! Output side of `cargo run -- report`: renders a dump's sections
//! ([`trace::dump::Section`], decoded by [`trace::dump::Dump::sections`]) as
//! `trace-cmd report`-style text, a `--stat` summary, Chrome Trace Event JSON or
//! Perfetto's protobuf trace for ui.perfetto.dev, a CTF 1.8 trace directory for
//! babeltrace2, or a trace-cmd `trace.dat` for trace-cmd and KernelShark; stack
//! frames symbolised from the kernel ELF ([`Symbols`]).

pub mod ctf;
pub mod perfetto;
pub mod perfetto_proto;
pub mod select;
pub mod stat;
pub mod symbols;
pub mod text;
pub mod tracedat;

#[cfg(test)]
mod sample;

pub use ctf::{ctf_files, write_ctf};
pub use perfetto::{perfetto_json, perfetto_json_of, write_perfetto, write_perfetto_of};
pub use perfetto_proto::write_perfetto_proto;
pub use select::Selection;
pub use stat::{CpuSummary, Summary, summarize, write_stat};
pub use symbols::Symbols;
pub use text::write_text;
pub use tracedat::{buffer_name, clock_notes, loss_notes, write_tracedat};

use std::collections::BTreeMap;
use trace::dump::Section;

/// Latest timestamp an output writes (2^62 ns, 146 years); later ones are clamped
/// to it. The readers take time as signed nanoseconds: babeltrace2 fails on times
/// near 2^63 ns, trace-cmd misreads them, and Perfetto's trace processor drops
/// those at or past it.
pub const MAX_TS: u64 = 1 << 62;

/// What a section leaves out of its buffer, if anything: the older records the
/// kernel's `last N` cap skipped, the entries its stats count that it does not hold
/// (lost with damaged or cut chunks), and in a stream, those its reader left unread
/// at its end (the entries of its final stats: it holds what it read).
pub(crate) fn left_out(trace: &Section) -> Option<String> {
    let entries = trace.stats.iter().fold(0u64, |e, s| e.saturating_add(s.entries));
    if trace.streamed {
        return (entries > 0).then(|| {
            format!("{entries} entries were left unread in the buffer at the stream's end")
        });
    }
    let held = (trace.events.len() as u64).saturating_add(trace.filtered);
    let (capped, absent) =
        (trace.skipped, entries.saturating_sub(held).saturating_sub(trace.skipped));
    let cap = |n| format!("the dump leaves out {n} older records by its `last N` cap");
    let not_held = |l| {
        format!(
            "{l} of the {entries} entries in the buffer are not in it: lost with damaged or \
             cut chunks"
        )
    };
    match (capped, absent) {
        (0, 0) => None,
        (n, 0) => Some(cap(n)),
        (0, l) => Some(not_held(l)),
        (n, l) => Some(format!("{}, and {}", cap(n), not_held(l))),
    }
}

/// Notes on the records of `traces` that are earlier than the record before them on
/// their CPU, in the dump's order: a ring's times only grow, so a dump that says
/// otherwise was made by hand or damaged, and the writer named by `shown` cannot
/// show those times as they are (`shown` says what it does instead).
pub fn backwards_notes(traces: &[Section], shown: &str) -> Vec<String> {
    /// A CPU's records so far: the last one's time, the backward steps, the first
    /// step (the time before it, its time).
    #[derive(Default)]
    struct Steps {
        last: u64,
        count: u64,
        first: Option<(u64, u64)>,
    }
    let mut notes = Vec::new();
    for trace in traces {
        let mut cpus: BTreeMap<usize, Steps> = BTreeMap::new();
        for ev in &trace.events {
            let cpu = cpus.entry(ev.cpu).or_default();
            if ev.ts < cpu.last {
                cpu.count += 1;
                cpu.first.get_or_insert((cpu.last, ev.ts));
            }
            cpu.last = ev.ts;
        }
        for (cpu, steps) in cpus {
            if let Some((before, after)) = steps.first {
                notes.push(format!(
                    "buffer {}, CPU {cpu}: {} record(s) earlier than the one before \
                     (the first: {after} ns after {before} ns); {shown}",
                    buffer_name(trace),
                    steps.count
                ));
            }
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace::dump::{DumpStats, Event, Section, Value};

    /// Every backend accepts whatever a parser might hand it: unknown ids, values
    /// that do not match their descriptor, extreme numbers, CPUs beyond `cpus`,
    /// missing stats, an absurd CPU count.
    #[test]
    fn no_backend_panics_on_odd_traces() {
        let ev = |cpu, ts, id, values, lost_before| Event {
            context: trace::Context::TASK,
            cpu,
            ts,
            id,
            values,
            lost_before,
            error: trace::field::DecodeError::Truncated,
        };
        let mut odd = sample::sample();
        odd.stats = vec![DumpStats {
            written: u64::MAX,
            entries: u64::MAX,
            overrun: u64::MAX,
            dropped: u64::MAX,
            read: u64::MAX,
            commit_overrun: u64::MAX,
            stopped: u64::MAX,
            unreadable: u64::MAX,
            unpublished: u64::MAX,
        }];
        odd.stats.push(odd.stats[0]);
        odd.events.extend([
            ev(0, u64::MAX, 65535, vec![Value::Str("\0\n".into()), Value::Char('\u{10FFFF}')], 0),
            ev(9, 0, 1, vec![], u64::MAX),
            ev(9, 1, 3, vec![Value::Bool(true); 9], u64::MAX),
            ev(1, 2, 2, vec![Value::Unsigned(u64::MAX); 4], 0),
        ]);
        let mut huge = Section { cpus: usize::MAX, ..Section::default() };
        huge.events.push(ev(3, 1, 0, vec![Value::Bytes(vec![0; 3])], 1));

        for (i, trace) in [odd, huge, Section::default()].iter().enumerate() {
            let mut out = Vec::new();
            write_text(trace, &mut out).unwrap();
            assert_eq!(
                String::from_utf8(out)
                    .unwrap()
                    .lines()
                    .filter(|l| !l.starts_with('#') && !l.starts_with("CPU:"))
                    .count(),
                trace.events.len()
            );
            let mut out = Vec::new();
            write_stat(trace, &mut out).unwrap();
            assert!(
                String::from_utf8(out)
                    .unwrap()
                    .contains(&format!("Total events: {}", trace.events.len()))
            );
            let mut out = Vec::new();
            write_tracedat(std::slice::from_ref(trace), None, &mut out).unwrap();
            assert!(out.starts_with(b"\x17\x08\x44tracing6\0"));
            let mut out = Vec::new();
            write_perfetto_proto(trace, &mut out).unwrap();
            // A packet per track and per event at least, each `0x0a LEN PACKET`.
            let (mut at, mut packets) = (0, 0);
            while at < out.len() {
                assert_eq!(out[at], 0x0a);
                let (mut len, mut shift) = (0usize, 0);
                at += 1;
                while out[at] & 0x80 != 0 {
                    len |= usize::from(out[at] & 0x7f) << shift;
                    (at, shift) = (at + 1, shift + 7);
                }
                len |= usize::from(out[at]) << shift;
                at += 1 + len;
                packets += 1;
            }
            assert_eq!(at, out.len());
            assert!(packets >= 1 + trace.cpu_ids().len() + trace.events.len());
            let mut out = Vec::new();
            write_perfetto(trace, &mut out).unwrap();
            let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
            assert!(doc["traceEvents"].as_array().unwrap().len() >= trace.events.len());
            let dir = std::env::temp_dir().join(format!(
                "boot-report-odd-{}-{i}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let _ = std::fs::remove_dir_all(&dir);
            let written = write_ctf(trace, &dir);
            let streams = std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0);
            let _ = std::fs::remove_dir_all(&dir);
            written.unwrap();
            // metadata + one stream per CPU track (at least one).
            assert_eq!(streams, 1 + trace.cpu_ids().len().max(1));
        }
    }
}
