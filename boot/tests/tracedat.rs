//! `boot report --format tracedat` read back by trace-cmd (Debian's, installed by
//! boot/setup.sh), on the serial log of a real QEMU panic: the parser of trace-cmd
//! and libtraceevent must accept every format file and print every event with its
//! CPU, timestamp and fields as our own report does.

mod support;
use support::{boot, temp_path, text};

use std::path::Path;
use std::process::Command;

/// A serial log captured from `cargo run` (4 CPUs): events enabled, a few shell
/// commands and markers, then `panic`.
const PANIC_LOG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/panic-serial.txt");

/// `trace-cmd report ARGS FILE`, which must succeed without complaint.
fn trace_cmd_report(file: &Path, args: &[&str]) -> String {
    let out = Command::new("trace-cmd")
        .arg("report")
        .args(args)
        .arg(file)
        .output()
        .expect("trace-cmd runs (boot/setup.sh installs it)");
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "trace-cmd report failed: {stderr}");
    assert!(
        !stderr.contains("ailed") && !stderr.contains("rror") && !stderr.contains("arning"),
        "trace-cmd complained: {stderr}"
    );
    text(&out.stdout)
}

/// One event line of `trace-cmd report -t`:
/// `<idle>-0     [001]    69.267965338: irq_handler_entry:    vector=48`.
#[derive(Debug, PartialEq)]
struct Line {
    cpu: usize,
    ts: u64,
    name: String,
    fields: String,
}

fn parse_line(line: &str) -> Option<Line> {
    let (_, rest) = line.split_once(" [")?;
    let (cpu, rest) = rest.split_once(']')?;
    let (ts, rest) = rest.trim_start().split_once(": ")?;
    let (secs, nanos) = ts.split_once('.')?;
    let (name, fields) = rest.split_once(':').unwrap_or((rest, ""));
    Some(Line {
        cpu: cpu.parse().ok()?,
        ts: secs.parse::<u64>().ok()? * 1_000_000_000 + nanos.parse::<u64>().ok()?,
        name: name.trim().to_string(),
        fields: fields.trim().to_string(),
    })
}

#[test]
fn trace_cmd_reads_every_event_of_a_real_panic_with_its_fields() {
    let log = std::fs::read_to_string(PANIC_LOG).unwrap();
    let dump = trace::dump::parse(&log).pop().expect("the log holds a dump");
    assert!(dump.problems.is_empty(), "{:?}", dump.problems);
    let trace =
        dump.sections().into_iter().find(|t| t.instance == "top").expect("the top-level instance");
    assert!(trace.events.len() > 100, "a real trace: {} events", trace.events.len());

    let file = temp_path("panic.dat");
    let out = boot(&["report", "--format", "tracedat", "-o", file.to_str().unwrap(), PANIC_LOG]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = trace_cmd_report(&file, &["-t"]);
    let _ = std::fs::remove_file(&file);

    // Our text report: one line per event after its `#` header.
    let ours = boot(&["report", "--instance", "top", PANIC_LOG]);
    assert!(ours.status.success(), "{}", text(&ours.stderr));
    let ours = text(&ours.stdout);
    let our_events = ours.lines().filter(|l| !l.starts_with('#') && !l.contains("[LOST")).count();
    assert_eq!(our_events, trace.events.len());

    let lines: Vec<Line> = report.lines().filter_map(parse_line).collect();
    assert_eq!(lines.len(), our_events, "trace-cmd lists as many events as our report:\n{report}");
    let mut names = std::collections::BTreeSet::new();
    for (line, ev) in lines.iter().zip(&trace.events) {
        let d = trace.descriptor(ev.id).expect("every event of a real dump has a descriptor");
        let expected =
            Line { cpu: ev.cpu, ts: ev.ts, name: d.name.clone(), fields: ev.text.clone() };
        assert_eq!(*line, expected);
        names.insert(trace.event_name(ev.id));
    }
    for name in ["irq:irq_handler_entry", "shell:command", "ftrace:print", "timer:tick"] {
        assert!(names.contains(name), "the log exercises {name}: {names:?}");
    }
}

#[test]
fn trace_cmd_sees_the_cpus_the_clock_and_the_stats() {
    let file = temp_path("stat.dat");
    let out = boot(&["report", "--format", "tracedat", "-o", file.to_str().unwrap(), PANIC_LOG]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stat = trace_cmd_report(&file, &["--stat"]);
    let _ = std::fs::remove_file(&file);
    assert!(stat.contains("CPU: 3\nentries: "), "{stat}");
    let missing = boot(&["report", "--format", "tracedat", PANIC_LOG]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(text(&missing.stderr).contains("--format tracedat needs -o FILE"));
}
