//! The `--stat` summary: events per type and per CPU, lost counts, time span.

use std::collections::BTreeMap;
use std::io::{self, Write};

use trace::dump::{Section, format_ts};
use trace::text::Controls;

/// Counts of one CPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuSummary {
    /// The CPU.
    pub cpu: usize,
    /// Events of this CPU in the dump.
    pub events: u64,
    /// Sum of the events' `lost_before` (losses the reader saw between records).
    pub lost_reported: u64,
    /// Events overwritten (from the dump's stats).
    pub overrun: u64,
    /// Events dropped (from the dump's stats).
    pub dropped: u64,
    /// Events lost to nested-writer commit overruns (from the dump's stats).
    pub commit_overrun: u64,
    /// Events a consuming reader (`trace_pipe`) took before the dump (from the dump's
    /// stats).
    pub read: u64,
    /// Events written (from the dump's stats).
    pub written: u64,
}

/// The numbers `--stat` prints.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// `(system:name, count)`, most frequent first, then by name. Events without a
    /// descriptor count as `unknown event id N`.
    pub by_type: Vec<(String, u64)>,
    /// One entry per CPU track (see [`Section::cpu_ids`]), ascending.
    pub per_cpu: Vec<CpuSummary>,
    /// Earliest and latest timestamp (ns), `None` without events.
    pub span: Option<(u64, u64)>,
    /// Number of events in the dump.
    pub total: u64,
}

/// Computes the summary of a trace.
pub fn summarize(trace: &Section) -> Summary {
    let mut types: BTreeMap<String, u64> = BTreeMap::new();
    let cpus = trace.cpu_ids();
    let mut per_cpu: Vec<CpuSummary> = cpus
        .iter()
        .map(|&cpu| {
            let s = trace.cpu_stats(cpu);
            CpuSummary {
                cpu,
                overrun: s.overrun,
                dropped: s.dropped,
                commit_overrun: s.commit_overrun,
                read: s.read,
                written: s.written,
                ..CpuSummary::default()
            }
        })
        .collect();
    for (&cpu, &lost) in &trace.lost_after {
        if let Ok(i) = cpus.binary_search(&cpu) {
            per_cpu[i].lost_reported = per_cpu[i].lost_reported.saturating_add(lost);
        }
    }
    let mut span: Option<(u64, u64)> = None;
    for ev in &trace.events {
        *types.entry(trace.event_name(ev.id)).or_default() += 1;
        // cpu_ids() holds every event's CPU.
        let Ok(i) = cpus.binary_search(&ev.cpu) else { continue };
        let c = &mut per_cpu[i];
        c.events += 1;
        c.lost_reported = c.lost_reported.saturating_add(ev.lost_before);
        span = Some(match span {
            None => (ev.ts, ev.ts),
            Some((lo, hi)) => (lo.min(ev.ts), hi.max(ev.ts)),
        });
    }
    let mut by_type: Vec<(String, u64)> = types.into_iter().collect();
    by_type.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Summary { by_type, per_cpu, span, total: trace.events.len() as u64 }
}

/// Writes the `--stat` summary of a trace as aligned tables.
pub fn write_stat(trace: &Section, out: &mut impl Write) -> io::Result<()> {
    let out = &mut io::BufWriter::new(out);
    let s = summarize(trace);
    writeln!(out, "# instance: {}", Controls(&trace.heading()))?;
    writeln!(out, "# cpus={}", trace.cpus)?;
    if let Some(note) = super::left_out(trace) {
        writeln!(out, "# {note}")?;
    }
    if trace.filtered > 0 {
        writeln!(out, "# the filter leaves out {} of the dump's events", trace.filtered)?;
    }
    if let Some(p) = &trace.panic {
        super::text::write_panic(p, out)?;
    }

    writeln!(out, "\nEvents by type:")?;
    let mut rows = vec![row(["EVENT", "COUNT"])];
    let by_type = s.by_type.iter();
    rows.extend(by_type.map(|(name, n)| vec![Controls(name).to_string(), n.to_string()]));
    rows.push(vec!["total".into(), s.total.to_string()]);
    write_table(out, &rows)?;

    writeln!(out, "\nEvents by CPU:")?;
    let mut rows = vec![row([
        "CPU",
        "EVENTS",
        "LOST(reported)",
        "OVERRUN",
        "DROPPED",
        "COMMIT_OVERRUN",
        "READ",
        "WRITTEN",
    ])];
    for (cpu, c) in s.per_cpu.iter().enumerate() {
        rows.push(
            [
                cpu as u64,
                c.events,
                c.lost_reported,
                c.overrun,
                c.dropped,
                c.commit_overrun,
                c.read,
                c.written,
            ]
            .iter()
            .map(u64::to_string)
            .collect(),
        );
    }
    let sum = |f: fn(&CpuSummary) -> u64| s.per_cpu.iter().map(f).fold(0u64, u64::saturating_add);
    rows.push(vec![
        "total".into(),
        sum(|c| c.events).to_string(),
        sum(|c| c.lost_reported).to_string(),
        sum(|c| c.overrun).to_string(),
        sum(|c| c.dropped).to_string(),
        sum(|c| c.commit_overrun).to_string(),
        sum(|c| c.read).to_string(),
        sum(|c| c.written).to_string(),
    ]);
    write_table(out, &rows)?;
    writeln!(
        out,
        "  (LOST(reported): losses the reader reported, the [LOST N EVENTS] lines;\n   \
         the other columns are the ring's own counters from the dump)"
    )?;

    // In seconds, or in counts for a clock that is not in ns (`counter`).
    writeln!(out, "\nTime span ({} clock):", trace.clock.name())?;
    let time = |ts: u64| if trace.clock.in_ns() { format_ts(ts) } else { ts.to_string() };
    let rows = match s.span {
        Some((first, last)) => vec![
            row(["first", &time(first)]),
            row(["last", &time(last)]),
            row(["duration", &time(last - first)]),
        ],
        None => vec![row(["first", "-"]), row(["last", "-"]), row(["duration", "-"])],
    };
    write_table(out, &rows)?;
    writeln!(out, "\nTotal events: {}", s.total)?;
    out.flush()
}

fn row<const N: usize>(cells: [&str; N]) -> Vec<String> {
    cells.iter().map(|c| c.to_string()).collect()
}

/// Two-space indented table: first column left-aligned, the others right-aligned.
fn write_table(out: &mut impl Write, rows: &[Vec<String>]) -> io::Result<()> {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|i| rows.iter().filter_map(|r| r.get(i)).map(|c| c.chars().count()).max().unwrap_or(0))
        .collect();
    for r in rows {
        let mut line = String::from(" ");
        for (i, cell) in r.iter().enumerate() {
            let w = widths[i];
            if i == 0 {
                line.push_str(&format!(" {cell:<w$}"));
            } else {
                line.push_str(&format!("  {cell:>w$}"));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample::sample;
    use trace::dump::{Event, Value};

    #[test]
    fn numbers_of_the_sample() {
        let s = summarize(&sample());
        assert_eq!(s.total, 5);
        assert_eq!(
            s.by_type,
            vec![
                ("irq:irq_handler_entry".to_string(), 2),
                ("demo:message".to_string(), 1),
                ("irq:irq_handler_exit".to_string(), 1),
                ("net:packet".to_string(), 1),
            ]
        );
        assert_eq!(s.per_cpu.len(), 2);
        assert_eq!(
            s.per_cpu[0],
            CpuSummary {
                cpu: 0,
                events: 3,
                lost_reported: 0,
                overrun: 5,
                dropped: 0,
                commit_overrun: 0,
                read: 2,
                written: 10
            }
        );
        assert_eq!(
            s.per_cpu[1],
            CpuSummary {
                cpu: 1,
                events: 2,
                lost_reported: 17,
                overrun: 17,
                dropped: 4,
                commit_overrun: 1,
                read: 0,
                written: 23
            }
        );
        assert_eq!(s.span, Some((1_000_000_500, 12_345_678_901)));
        // Losses after a CPU's last record are the reader's too, as is a CPU that
        // has only those.
        let mut t = sample();
        t.lost_after.extend([(1, 4), (2, 6)]);
        let s = summarize(&t);
        let lost: Vec<(usize, u64)> = s.per_cpu.iter().map(|c| (c.cpu, c.lost_reported)).collect();
        assert_eq!(lost, [(0, 0), (1, 21), (2, 6)]);
    }

    /// An event's name from the dump cannot forge a row: its control characters
    /// print as `\u{..}`.
    #[test]
    fn an_event_names_control_characters_are_escaped() {
        let mut t = sample();
        let descriptors = std::sync::Arc::make_mut(&mut t.descriptors);
        descriptors.values_mut().for_each(|d| d.name = format!("{}\ntotal 99\x1b", d.name));
        let mut out = Vec::new();
        write_stat(&t, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains('\x1b') && !text.contains("\ntotal 99"), "{text}");
        assert!(text.contains("  irq:irq_handler_entry\\u{a}total 99\\u{1b}      2\n"), "{text}");
    }

    #[test]
    fn printed_tables_are_aligned() {
        let mut out = Vec::new();
        write_stat(&sample(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let at = |title: &str| lines.iter().position(|l| *l == title).unwrap();

        let types = &lines[at("Events by type:") + 1..at("Events by type:") + 7];
        assert_eq!(types[0], "  EVENT                  COUNT");
        assert_eq!(types[1], "  irq:irq_handler_entry      2");
        assert_eq!(types[5], "  total                      5");

        let cpus = &lines[at("Events by CPU:") + 1..at("Events by CPU:") + 5];
        // Every row is as wide as the header: right-aligned columns.
        assert!(cpus.iter().all(|l| l.len() == cpus[0].len()), "{cpus:#?}");
        let cells = |l: &str| l.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        // A CPU's events, overwritten, dropped and read add up to what it wrote.
        assert_eq!(cells(cpus[1]), ["0", "3", "0", "5", "0", "0", "2", "10"]);
        assert_eq!(cells(cpus[2]), ["1", "2", "17", "17", "4", "1", "0", "23"]);
        assert_eq!(cells(cpus[3]), ["total", "5", "17", "22", "4", "1", "2", "33"]);

        let span = &lines[at("Time span (local clock):") + 1..at("Time span (local clock):") + 4];
        assert_eq!(cells(span[0]), ["first", "1.000000500"]);
        assert_eq!(cells(span[1]), ["last", "12.345678901"]);
        assert_eq!(cells(span[2]), ["duration", "11.345678401"]);
        assert_eq!(lines.last(), Some(&"Total events: 5"));
    }

    #[test]
    fn records_the_cap_or_damage_left_out_are_shown() {
        let mut t = sample();
        let stat = |t: &Section| {
            let mut out = Vec::new();
            write_stat(t, &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        assert!(!stat(&t).contains("leaves out"));
        t.skipped = 7;
        assert!(stat(&t).contains("# the dump leaves out 7 older records by its `last N` cap"));
        // Entries the stats count beyond those held and those the cap skipped were in
        // chunks lost: 16 entries, 5 events held, 7 skipped, so 4 lost.
        let entries: u64 = t.stats.iter().map(|s| s.entries).sum();
        t.stats[0].entries += 16 - entries;
        let why = "lost with damaged or cut chunks";
        let note = format!(
            "# the dump leaves out 7 older records by its `last N` cap, and 4 of the 16 entries \
             in the buffer are not in it: {why}\n"
        );
        assert!(stat(&t).contains(&note), "{}", stat(&t));
        t.skipped = 0;
        let note = format!("# 11 of the 16 entries in the buffer are not in it: {why}\n");
        assert!(stat(&t).contains(&note), "{}", stat(&t));
    }

    #[test]
    fn unknown_ids_and_stray_cpus_are_counted() {
        let mut t = sample();
        t.events.push(Event {
            context: trace::Context::TASK,
            cpu: 3,
            ts: 5,
            id: 77,
            values: vec![Value::Bytes(vec![9])],
            lost_before: 1,
            error: trace::field::DecodeError::Truncated,
        });
        let s = summarize(&t);
        assert_eq!(s.total, 6);
        assert!(s.by_type.contains(&("unknown event id 77".to_string(), 1)));
        assert_eq!(s.per_cpu.len(), 3);
        assert_eq!(s.per_cpu[2].cpu, 3);
        assert_eq!(s.per_cpu[2].events, 1);
        assert_eq!(s.per_cpu[2].lost_reported, 1);
        assert_eq!(s.span, Some((5, 12_345_678_901)));
        write_stat(&t, &mut Vec::new()).unwrap();
        write_stat(&Section::default(), &mut Vec::new()).unwrap();
    }
}
