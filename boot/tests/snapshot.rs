//! `report` on dumps that carry snapshots beside live buffers (`--buffer`), and on
//! dumps written before the format had snapshots.

mod support;
use support::{log_writer, record, report, temp, temp_path, text};

use std::path::PathBuf;
use trace::dump::{BufferKind, PanicHeader};
use trace::{event::EventDescriptor, ring::RingStats};

trace::event! {
    /// A test event.
    pub PING = "net":"ping" { seq: u32, host: &str } => "seq={seq} host={host}";
}

/// The panic the dumps here report.
const OOPS: PanicHeader<'static> =
    PanicHeader { cpu: 0, message: "oops", location: "src/main.rs:1:1", nested: None, other: None };

/// A panic dump of two instances: `latency` with a live buffer (pings 10 and 11)
/// and a snapshot (pings 1 to 3, 4 overwritten), and `top` with a live buffer only
/// (ping 20).
fn log() -> String {
    let descriptor: &EventDescriptor = PING.descriptor();
    let mut out = String::from("kernel: noise\n");
    let mut writer = log_writer(&mut out);
    writer.header(2, Some(OOPS), None);
    writer.descriptor_as(1, descriptor);
    writer.instance(0, "");
    writer.cpu_stats(0, 0, &RingStats { written: 1, entries: 1, ..RingStats::default() });
    writer.record(0, &record(0, 20_000, &ping(20)), Some(descriptor));
    writer.instance(1, "latency");
    writer.cpu_stats(1, 0, &RingStats { written: 2, entries: 2, ..RingStats::default() });
    for seq in [10, 11] {
        writer.record(1, &record(0, 1_000 * u64::from(seq), &ping(seq)), Some(descriptor));
    }
    writer.section(2, "latency", BufferKind::Snapshot, trace::Clock::Local);
    let snapshot_stats = RingStats { written: 7, entries: 3, overrun: 4, ..RingStats::default() };
    writer.cpu_stats(2, 1, &snapshot_stats);
    for seq in 1..=3 {
        writer.record(2, &record(1, 1_000 * u64::from(seq), &ping(seq)), Some(descriptor));
    }
    writer.finish();
    out
}

/// The payload of a ping: `seq`, host "host".
fn ping(seq: u32) -> Vec<u8> {
    let mut buf = [0u8; 64];
    let mut enc = trace::field::Encoder::new(&mut buf);
    use trace::field::FieldValue;
    seq.encode(&mut enc);
    "host".encode(&mut enc);
    enc.bytes().to_vec()
}

/// A dump of the top-level instance's live buffer alone (ping 30), as `record`'s
/// `trace_pipe_raw` stream leaves in a serial log.
fn stream() -> String {
    let descriptor: &EventDescriptor = PING.descriptor();
    let mut out = String::new();
    let mut writer = log_writer(&mut out);
    writer.header(2, None, None);
    writer.descriptor_as(1, descriptor);
    writer.instance(0, "");
    writer.cpu_stats(0, 0, &RingStats { written: 1, entries: 1, ..RingStats::default() });
    writer.record(0, &record(0, 30_000, &ping(30)), Some(descriptor));
    writer.finish();
    out
}

/// The 1-based lines of the dumps' begin markers in `log`.
fn begin_lines(log: &str) -> Vec<usize> {
    let begins = log.lines().enumerate().filter(|(_, l)| l.contains(trace::dump::BEGIN));
    begins.map(|(i, _)| i + 1).collect()
}

/// The lines of each `# instance: ` section of a report, by heading.
fn sections(report: &str) -> Vec<(String, Vec<String>)> {
    let mut sections: Vec<(String, Vec<String>)> = Vec::new();
    for line in report.lines() {
        if let Some(heading) = line.strip_prefix("# instance: ") {
            sections.push((heading.into(), Vec::new()));
        } else if let Some((_, lines)) = sections.last_mut() {
            lines.push(line.into());
        }
    }
    sections
}

#[test]
fn text_and_stat_show_a_section_per_buffer() {
    let log = temp("text.log", log());
    let out = report(&[log.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let found = sections(&stdout);
    let headings: Vec<&str> = found.iter().map(|(h, _)| h.as_str()).collect();
    assert_eq!(headings, ["top", "latency", "latency (snapshot)"], "{stdout}");
    let pings = |lines: &[String]| -> Vec<String> {
        lines
            .iter()
            .filter_map(|l| l.split(" ping: ").nth(1))
            .map(|rest| rest.split(' ').next().unwrap().to_string())
            .collect()
    };
    assert_eq!(pings(&found[1].1), ["seq=10", "seq=11"]);
    assert_eq!(pings(&found[2].1), ["seq=1", "seq=2", "seq=3"]);
    assert!(
        found[2].1.iter().any(|l| l == "# entries-in-buffer/entries-written: 3/7"),
        "the snapshot's own statistics: {stdout}"
    );
    let stat = report(&[log.to_str().unwrap(), "--stat"]);
    assert!(stat.status.success());
    let stat = text(&stat.stdout);
    let found = sections(&stat);
    assert_eq!(found.len(), 3, "{stat}");
    assert_eq!(found[2].0, "latency (snapshot)");
    assert!(found[2].1.iter().any(|l| l.contains("Total events: 3")), "{stat}");
    assert!(found[1].1.iter().any(|l| l.contains("Total events: 2")), "{stat}");
    // One buffer only.
    let only = report(&[log.to_str().unwrap(), "--buffer", "snapshot"]);
    assert!(only.status.success());
    let headings: Vec<String> = sections(&text(&only.stdout)).into_iter().map(|s| s.0).collect();
    assert_eq!(headings, ["latency (snapshot)"]);
    let live = report(&[log.to_str().unwrap(), "--buffer", "live", "--instance", "latency"]);
    let headings: Vec<String> = sections(&text(&live.stdout)).into_iter().map(|s| s.0).collect();
    assert_eq!(headings, ["latency"]);
}

#[test]
fn perfetto_shows_each_buffer_as_a_process_and_ctf_takes_one() {
    let log = temp("perfetto.log", log());
    let log = log.to_str().unwrap();
    let processes = |args: &[&str]| -> Vec<(u64, String)> {
        let out = report(&[&[log, "--format", "perfetto", "--instance", "latency"], args].concat());
        assert!(out.status.success(), "{}", text(&out.stderr));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let events = doc["traceEvents"].as_array().unwrap();
        // Every event of each process is one of its pings (or metadata, the panic).
        for e in events.iter().filter(|e| e["name"] == "net:ping") {
            let seq = e["args"]["seq"].as_u64().unwrap();
            assert_eq!(e["pid"].as_u64().unwrap(), u64::from(seq < 10), "{e}");
        }
        events
            .iter()
            .filter(|e| e["name"] == "process_name")
            .map(|e| (e["pid"].as_u64().unwrap(), e["args"]["name"].as_str().unwrap().into()))
            .collect()
    };
    assert_eq!(
        processes(&[]),
        [(0, "kernel".to_string()), (1, "kernel (snapshot)".to_string())],
        "perfetto holds every buffer by default"
    );
    assert_eq!(processes(&["--buffer", "live"]), [(0, "kernel".to_string())]);
    let dir = temp_path("ctf");
    let dir_arg = dir.to_str().unwrap();
    let ctf = |buffer: &str| {
        report(&[
            log,
            "--format",
            "ctf",
            "--instance",
            "latency",
            "--buffer",
            buffer,
            "-o",
            dir_arg,
        ])
    };
    let all = ctf("all");
    assert_eq!(all.status.code(), Some(2));
    assert_eq!(
        text(&all.stderr).trim(),
        "report: --format ctf holds one buffer; choose --buffer live or --buffer snapshot"
    );
    assert!(!dir.exists(), "a refused report writes nothing");
    let snapshot = ctf("snapshot");
    assert!(snapshot.status.success(), "{}", text(&snapshot.stderr));
    let metadata = std::fs::read_to_string(dir.join("metadata")).unwrap();
    assert!(metadata.contains("buffer = \"snapshot\";"), "{metadata}");
    let _ = std::fs::remove_dir_all(&dir);
    // An instance without a snapshot.
    let none = report(&[log, "--format", "perfetto", "--buffer", "snapshot"]);
    assert_eq!(none.status.code(), Some(2));
    assert!(
        text(&none.stderr).contains(
            "has no snapshot of instance \"top\" (it has \"top\", \"latency\", \"latency (snapshot)\")"
        ),
        "{}",
        text(&none.stderr)
    );
}

#[test]
fn text_shows_each_dump_and_a_line_for_one_without_what_was_asked() {
    let both = stream() + &log();
    let begins = begin_lines(&both);
    let log = temp("several.log", &both);
    let asked = [log.to_str().unwrap(), "--instance", "latency", "--buffer", "snapshot"];
    let out = report(&asked);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let dumps: Vec<&str> = stdout.lines().filter(|l| l.starts_with("# dump ")).collect();
    let lacks = "has no snapshot of instance \"latency\" (it has \"top\")";
    assert_eq!(
        dumps,
        [
            format!("# dump 1 of 2 (line {}) {lacks}", begins[0]),
            format!("# dump 2 of 2 (line {})", begins[1]),
        ],
        "{stdout}"
    );
    let found = sections(&stdout);
    assert_eq!(found.len(), 1, "{stdout}");
    assert_eq!(found[0].0, "latency (snapshot)");
    assert_eq!(found[0].1.iter().filter(|l| l.contains(" ping: ")).count(), 3, "{stdout}");
    // Only a log none of whose dumps has it is an error.
    let streams = stream() + &stream();
    let last = begin_lines(&streams)[1];
    let none = temp("streams.log", streams);
    let out = report(&[&[none.to_str().unwrap()], &asked[1..]].concat());
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr).trim(),
        format!("report: none of the 2 dumps has it: the dump at line {last} {lacks}")
    );
}

#[test]
fn the_other_formats_convert_the_last_dump_with_what_was_asked() {
    let both = log() + &stream();
    let begins = begin_lines(&both);
    let log = temp("last-lacks.log", &both);
    let log = log.to_str().unwrap();
    let pings = |args: &[&str]| -> (Vec<u64>, String) {
        let out = report(&[&[log, "--format", "perfetto"], args].concat());
        assert!(out.status.success(), "{}", text(&out.stderr));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let events = doc["traceEvents"].as_array().unwrap();
        let pings = events.iter().filter(|e| e["name"] == "net:ping");
        (pings.map(|e| e["args"]["seq"].as_u64().unwrap()).collect(), text(&out.stderr))
    };
    let (seqs, note) = pings(&["--instance", "latency", "--buffer", "snapshot"]);
    assert_eq!(seqs, [1, 2, 3]);
    assert_eq!(
        note.trim(),
        format!(
            "report: 2 dumps in the log; converting dump 1 (line {}), the last that has what \
             was asked",
            begins[0]
        )
    );
    let (seqs, note) = pings(&[]);
    assert_eq!(seqs, [30], "the top-level instance: the last dump has it");
    assert!(note.contains(&format!("converting the last (line {})", begins[1])), "{note}");
    let dir = temp_path("last-lacks-ctf");
    let out = temp_path("last-lacks.dat");
    for (format, path) in [("ctf", &dir), ("tracedat", &out), ("perfetto-proto", &out)] {
        let args = [log, "--format", format, "--instance", "latency", "-o", path.to_str().unwrap()];
        let converted = report(&args);
        assert!(converted.status.success(), "{format}: {}", text(&converted.stderr));
    }
    assert!(dir.join("metadata").exists());
    let streams = temp("last-lacks-streams.log", stream() + &stream());
    let streams = streams.to_str().unwrap();
    let none = report(&[streams, "--format", "perfetto", "--instance", "latency"]);
    assert_eq!(none.status.code(), Some(2));
    assert!(
        text(&none.stderr).contains("none of the 2 dumps has it: the dump at line "),
        "{}",
        text(&none.stderr)
    );
}

/// A dump of one snapshot alone (`dump on-panic instance a snapshot`) has no live
/// buffer: trace.dat without `--buffer` is refused, naming what the dump has (it
/// wrote a file trace-cmd could not read), and `--buffer snapshot` converts it.
#[test]
fn a_dump_of_a_snapshot_alone_needs_buffer_snapshot() {
    let descriptor: &EventDescriptor = PING.descriptor();
    let mut dump = String::new();
    let mut writer = log_writer(&mut dump);
    writer.header(2, Some(OOPS), None);
    writer.descriptor_as(1, descriptor);
    writer.section(0, "a", BufferKind::Snapshot, trace::Clock::Local);
    writer.cpu_stats(0, 0, &RingStats { written: 1, entries: 1, ..RingStats::default() });
    writer.record(0, &record(0, 5_000, &ping(5)), Some(descriptor));
    writer.finish();
    let log = temp("snapshot-alone.log", dump);
    let file = temp_path("snapshot-alone.dat");
    let convert = |args: &[&str]| {
        let common = [log.to_str().unwrap(), "--format", "tracedat", "-o", file.to_str().unwrap()];
        report(&[&common[..], args].concat())
    };
    let out = convert(&[]);
    assert_eq!(out.status.code(), Some(2));
    let expected = "has no live buffer of any instance (it has \"a (snapshot)\")";
    assert!(text(&out.stderr).contains(expected), "{}", text(&out.stderr));
    assert!(!file.exists(), "no file written");
    let out = convert(&["--buffer", "snapshot"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(std::fs::metadata(&file).unwrap().len() > 4096);
}

#[test]
fn a_bad_buffer_is_a_usage_error_naming_the_buffers() {
    let log = temp("bad.log", log());
    let out = report(&[log.to_str().unwrap(), "--buffer", "spare"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("invalid value 'spare' for '--buffer <BUFFER>'"), "{stderr}");
    assert!(stderr.contains("[possible values: live, snapshot, all]"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn dumps_of_format_version_1_still_read_as_live_buffers() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut read = 0;
    for name in ["panic-shell.log", "dump-last-and-panic-irq.log", "panic-serial.txt"] {
        let path = dir.join(name);
        let log = std::fs::read_to_string(&path).unwrap();
        let dumps = trace::dump::parse(&log);
        assert!(!dumps.is_empty(), "{name}");
        for dump in &dumps {
            assert!(dump.problems.is_empty(), "{name}: {:?}", dump.problems);
            assert_eq!(dump.version, Some(1), "{name}");
            assert!(dump.instances.values().all(|i| i.buffer == BufferKind::Live), "{name}");
            assert!(dump.instances.values().any(|i| !i.records.is_empty()), "{name}");
            read += 1;
        }
        let out = report(&[path.to_str().unwrap()]);
        assert!(out.status.success(), "{name}: {}", text(&out.stderr));
        assert!(!text(&out.stdout).contains("(snapshot)"), "{name}");
    }
    assert_eq!(read, 4, "one dump, two dumps, one dump");
}

#[test]
fn a_real_panic_dump_of_version_2_carries_the_latency_snapshot() {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/panic-latency-snapshot.log");
    let dump = trace::dump::parse(&std::fs::read_to_string(&path).unwrap()).remove(0);
    assert!(dump.problems.is_empty(), "{:?}", dump.problems);
    assert_eq!(dump.version, Some(2));
    let out = report(&[path.to_str().unwrap(), "--stat"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let headings: Vec<String> = sections(&text(&out.stdout)).into_iter().map(|s| s.0).collect();
    assert_eq!(headings, ["top", "latency", "latency (snapshot)"]);
}
