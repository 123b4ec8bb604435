//! `boot report --format perfetto-proto` read back by `protoc --decode` (Debian's
//! protobuf-compiler, installed by boot/setup.sh) against Perfetto's message
//! definitions (`tests/data/perfetto_trace.proto`, their field numbers and types), on
//! the serial log of a real QEMU panic: every field is one Perfetto defines, every
//! interned id is defined before use, and the slices and instants are the JSON's.

mod support;
use support::{boot, log_writer, temp_path, text};

use std::collections::BTreeMap;
use std::process::{Command, Stdio};

/// A serial log captured from `cargo run` (4 CPUs): events enabled, a few shell
/// commands and markers, then `panic`.
const PANIC_LOG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/panic-timeline.log");
const PROTO_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");

/// `protoc --decode=perfetto.protos.Trace` of `trace`, as text.
fn decode(trace: &[u8]) -> String {
    use std::io::Write;
    let mut child = Command::new("protoc")
        .args(["--decode=perfetto.protos.Trace", "--proto_path", PROTO_DIR, "perfetto_trace.proto"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("protoc runs (boot/setup.sh installs protobuf-compiler)");
    child.stdin.take().unwrap().write_all(trace).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "protoc failed: {}", text(&out.stderr));
    text(&out.stdout)
}

/// The values of `key: VALUE` lines in `text` (indentation ignored).
fn values<'a>(text: &'a str, key: &str) -> Vec<&'a str> {
    text.lines().filter_map(|l| l.trim_start().strip_prefix(key)?.strip_prefix(": ")).collect()
}

#[test]
fn protoc_reads_a_real_panic_with_perfettos_field_numbers() {
    let file = temp_path("panic.pftrace");
    let path = file.to_str().unwrap();
    let out = boot(&["report", "--format", "perfetto-proto", "-o", path, PANIC_LOG]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let bytes = std::fs::read(&file).unwrap();
    let decoded = decode(&bytes);

    // A field protoc does not know prints as its number.
    let unknown: Vec<&str> = decoded
        .lines()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    assert!(unknown.is_empty(), "fields Perfetto does not define: {unknown:?}");

    // The first packet clears the sequence's state; the tracks follow.
    let packets: Vec<&str> = decoded.split("packet {").skip(1).collect();
    assert_eq!(values(packets[0], "sequence_flags"), ["1"]);
    assert_eq!(values(packets[0], "name"), ["\"kernel\""]);
    let tracks: Vec<&str> = packets[1..5].iter().flat_map(|p| values(p, "name")).collect();
    assert_eq!(tracks, ["\"cpu0\"", "\"cpu1\"", "\"cpu2\"", "\"cpu3\""]);

    // Every interned id is defined once, in or before the first packet using it:
    // the track event's own fields are indented by 4, its annotations' by 6.
    let tables = [
        ("event_categories {", "    category_iids: "),
        ("event_names {", "    name_iid: "),
        ("debug_annotation_names {", "      name_iid: "),
    ];
    let mut defined: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for packet in &packets {
        let (event, interned) = packet.split_once("interned_data {").unwrap_or((packet, ""));
        for (table, used) in tables {
            let names = defined.entry(table).or_default();
            for block in interned.split(table).skip(1) {
                assert_eq!(values(block, "iid")[0], (names.len() + 1).to_string(), "iids count up");
                let name = values(block, "name")[0];
                assert!(!names.contains(&name), "{name} is sent once");
                names.push(name);
            }
            let most = event
                .lines()
                .filter_map(|l| l.strip_prefix(used)?.parse::<usize>().ok())
                .max()
                .unwrap_or(0);
            assert!(most <= names.len(), "{table} {most} used before defined: {packet}");
        }
    }
    assert!(defined["event_names {"].contains(&"\"irq vector=48\""), "{defined:?}");
    assert!(defined["event_names {"].contains(&"\"serial:rx\""), "{defined:?}");

    // The same slices and instants as the JSON.
    let json = boot(&["report", "--format", "perfetto", PANIC_LOG]);
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let count =
        |ph: &str| doc["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] == ph).count();
    let types = values(&decoded, "type");
    let kind = |t: &str| types.iter().filter(|&&v| v == t).count();
    assert!(count("X") > 100, "a real trace has slices");
    assert_eq!(kind("TYPE_SLICE_BEGIN"), count("X"));
    assert_eq!(kind("TYPE_SLICE_END"), count("X"));
    assert_eq!(kind("TYPE_INSTANT"), count("i"));
    // Each tick's two fields are two counter values (one counter track each).
    assert!(count("C") > 100, "the ticks are counters");
    assert_eq!(kind("TYPE_COUNTER"), 2 * count("C"));
    assert_eq!(values(&decoded, "counter_value").len(), 2 * count("C"));
    let counter_tracks = decoded.matches("counter {").count();
    assert_eq!(counter_tracks, 2 * 4, "a track per CPU and field: {counter_tracks}");
    assert!(
        bytes.len() < json.stdout.len() / 2,
        "{} vs {} bytes of JSON",
        bytes.len(),
        json.stdout.len()
    );
}

#[test]
fn perfetto_proto_needs_an_output_file() {
    let out = boot(&["report", "--format", "perfetto-proto", PANIC_LOG]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--format perfetto-proto needs -o FILE"));
}

/// A real log with `function_graph` records (`tests/data/panic-tracers.log`).
const TRACERS_LOG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/panic-tracers.log");
/// The symbols of the kernel that wrote [`TRACERS_LOG`] (its split debug file).
const TRACERS_ELF: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/panic-tracers.elf");

/// `report --elf --format perfetto --instance INSTANCE` of [`TRACERS_LOG`].
fn tracers_json(instance: &str) -> serde_json::Value {
    let args = ["report", "--elf", TRACERS_ELF, "--format", "perfetto", "--instance", instance];
    let out = boot(&[&args[..], &[TRACERS_LOG]].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `function_graph` in Perfetto: each traced call is a `call` slice from its entry
/// lasting the duration its return recorded (as the kernel's `trace` shows it),
/// named after the function (`--elf`), nested as the calls were.
#[test]
fn function_graph_calls_are_nested_slices() {
    let doc = tracers_json("graph");
    let events = doc["traceEvents"].as_array().unwrap();
    let slices: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    let log = std::fs::read_to_string(TRACERS_LOG).unwrap();
    let dump = trace::dump::parse(&log).pop().expect("the log holds a dump");
    let graph = dump
        .sections()
        .into_iter()
        .find(|t| t.instance == "graph" && t.buffer == trace::dump::BufferKind::Live)
        .expect("the graph instance");
    let named = |name: &str| {
        graph
            .events
            .iter()
            .filter(|e| graph.descriptor(e.id).is_some_and(|d| d.name == name))
            .count()
    };
    let (entries, exits) = (named("funcgraph_entry"), named("funcgraph_exit"));
    assert!(exits >= 10 && entries >= exits, "{entries} entries, {exits} returns");
    // A call whose return the dump holds is a slice; one still running is not.
    assert_eq!(slices.len(), exits, "{slices:?}");
    let mut open: Vec<(f64, f64)> = Vec::new();
    for slice in &slices {
        let name = slice["name"].as_str().unwrap();
        assert!(name.starts_with("call func=kernel::shell::commands::"), "{name}");
        let (ts, dur) = (slice["ts"].as_f64().unwrap(), slice["dur"].as_f64().unwrap());
        assert!(dur > 0.0, "{slice}");
        let recorded = slice["args"]["duration"].as_u64().expect("the return's duration");
        assert!((dur - recorded as f64 / 1e3).abs() < 1e-3, "{name} lasts {recorded} ns: {slice}");
        while open.last().is_some_and(|&(_, end)| end <= ts) {
            open.pop();
        }
        if let Some(&(_, end)) = open.last() {
            assert!(ts + dur <= end, "{name} overlaps the call it is inside");
        }
        open.push((ts, ts + dur));
    }
    assert!(slices.iter().any(|s| s["name"].as_str().unwrap().ends_with(" depth=1")), "nested");
}

/// The irqsoff tracer's reports in Perfetto: each region a slice `irqs off` that
/// ends at the report and lasts its `latency_ns`, on a track of its own beside its
/// CPU's (`cpuN irqs off`: it need not nest in the CPU's slices); the protobuf
/// trace has the same tracks and slices.
#[test]
fn irqsoff_regions_are_slices_on_tracks_of_their_own() {
    let doc = tracers_json("irq");
    let events = doc["traceEvents"].as_array().unwrap();
    let log = std::fs::read_to_string(TRACERS_LOG).unwrap();
    let dump = trace::dump::parse(&log).pop().expect("the log holds a dump");
    let mut reports = Vec::new();
    for (pid, section) in dump.sections().iter().filter(|t| t.instance == "irq").enumerate() {
        for ev in &section.events {
            if section.descriptor(ev.id).is_some_and(|d| d.name == "irqsoff") {
                let trace::dump::Value::Unsigned(ns) = ev.values[0] else { panic!("{ev:?}") };
                reports.push((pid as u64, ev.cpu as u64, ev.ts, ns));
            }
        }
    }
    assert!(!reports.is_empty(), "the log's irqsoff instance reported regions");
    let spans: Vec<&serde_json::Value> =
        events.iter().filter(|e| e["name"] == "irqs off").collect();
    assert_eq!(spans.len(), reports.len(), "{spans:?}");
    let cpus = trace::dump::MAX_CPUS as u64;
    for (span, &(pid, cpu, ts, ns)) in spans.iter().zip(&reports) {
        assert_eq!((span["ph"].as_str(), span["pid"].as_u64()), (Some("X"), Some(pid)), "{span}");
        let tid = cpus + cpu;
        assert_eq!(span["tid"].as_u64(), Some(tid), "{span}");
        let (start, dur) = (span["ts"].as_f64().unwrap(), span["dur"].as_f64().unwrap());
        assert!((dur - ns as f64 / 1e3).abs() < 1e-3, "{span}");
        assert!((start + dur - ts as f64 / 1e3).abs() < 1e-3, "ends at the report: {span}");
        let track = events.iter().find(|e| {
            e["name"] == "thread_name"
                && e["pid"].as_u64() == Some(pid)
                && e["tid"].as_u64() == Some(tid)
        });
        assert_eq!(
            track.map(|t| &t["args"]["name"]),
            Some(&serde_json::json!(format!("cpu{cpu} irqs off")))
        );
    }
    // The protobuf trace of the snapshot: its spans' tracks and slices.
    let file = temp_path("irqsoff.pftrace");
    let path = file.to_str().unwrap();
    let args =
        ["report", "--format", "perfetto-proto", "--instance", "irq", "--buffer", "snapshot"];
    let out = boot(&[&args[..], &["-o", path, TRACERS_LOG]].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let decoded = decode(&std::fs::read(&file).unwrap());
    let snapshot: Vec<_> = reports.iter().filter(|r| r.0 == 1).collect();
    assert!(!snapshot.is_empty(), "the window kept in the snapshot has a report");
    for &&(_, cpu, ..) in &snapshot {
        assert!(decoded.contains(&format!("name: \"cpu{cpu} irqs off\"")), "{decoded}");
    }
    assert!(decoded.contains("name: \"irqs off\""), "interned as an event name: {decoded}");
}

trace::event! {
    /// Begins an operation keyed by `k`.
    pub OP_BEGIN = "t":"op_begin" { k: u32 } => "k={k}", begin "op" key k;
}
trace::event! {
    /// Ends the operation keyed by `k`.
    pub OP_END = "t":"op_end" { k: u32 } => "k={k}", end "op" key k;
}

/// Keyed pairs that interleave on one CPU (begin 0, begin 1, end 0, end 1) nest:
/// the first slice is lengthened to hold the second, which began inside it, and
/// closes after it; the protobuf's ends come in that order, each at its slice's end.
#[test]
fn interleaved_keyed_pairs_nest() {
    use trace::event::EventDescriptor;
    let mut log = String::new();
    let mut writer = log_writer(&mut log);
    writer.header(1, None, None);
    let (begin, end): (&EventDescriptor, &EventDescriptor) =
        (OP_BEGIN.descriptor(), OP_END.descriptor());
    writer.descriptor_as(1, begin);
    writer.descriptor_as(2, end);
    writer.instance(0, "");
    for (ts, id, k) in [(1_000, 1, 0u32), (2_000, 1, 1), (3_000, 2, 0), (4_000, 2, 1)] {
        let payload = k.to_le_bytes();
        let mut record = support::record(0, ts, &payload);
        record.id = id;
        writer.record(0, &record, Some(if id == 1 { begin } else { end }));
    }
    writer.finish();
    let log = support::temp("interleaved.log", log);
    let json = boot(&["report", "--format", "perfetto", log.to_str().unwrap()]);
    assert!(json.status.success(), "{}", text(&json.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let slices: Vec<(f64, f64)> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap()))
        .collect();
    assert_eq!(slices, [(1.0, 3.0), (2.0, 2.0)]);
    let file = temp_path("interleaved.pftrace");
    let out = boot(
        &["report", "--format", "perfetto-proto", "-o", file.to_str().unwrap()]
            .into_iter()
            .chain([log.to_str().unwrap()])
            .collect::<Vec<_>>(),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let decoded = decode(&std::fs::read(&file).unwrap());
    let slices: Vec<(&str, &str)> = decoded
        .split("packet {")
        .filter_map(|p| Some((values(p, "type").first().copied()?, values(p, "timestamp")[0])))
        .filter(|(kind, _)| kind.starts_with("TYPE_SLICE"))
        .collect();
    assert_eq!(
        slices,
        [
            ("TYPE_SLICE_BEGIN", "1000"),
            ("TYPE_SLICE_BEGIN", "2000"),
            ("TYPE_SLICE_END", "4000"),
            ("TYPE_SLICE_END", "4000"),
        ]
    );
}
