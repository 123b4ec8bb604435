//! Chrome Trace Event Format JSON, for ui.perfetto.dev (and chrome://tracing).
//!
//! One process "kernel" (pid 0; several buffers: one process each, see
//! [`perfetto_json_of`]) with one thread track per CPU (tid = CPU, named
//! `cpuN`). Paired events become slices (`"ph":"X"` with a duration) on their CPU's
//! track: the events an `event!` declares `begin "LABEL"` and `end "LABEL"`
//! ([`trace::event::Timeline`]; in the kernel `irq:irq_handler_entry`/`irq_handler_exit`
//! with the same `irq`, and `shell:command`/`shell:command_done`); a slice is named
//! after its label and the begin event's text (`irq irq=48`, `command ls`) and
//! carries both events' fields. An event declared a `counter` becomes a counter
//! (`"ph":"C"`, named `system:name cpuN`) of its integer fields. An event declared a
//! `span "LABEL" duration FIELD` (in the kernel `ftrace:irqsoff`) is a slice named
//! after the label that ends at the event and lasts its field's nanoseconds, on a
//! thread of its own per label and CPU (`cpuN LABEL`, tid `MAX_CPUS` times the
//! label's rank plus the CPU), since it need not nest in the CPU's slices. A begin
//! is paired with the nearest later end of the same CPU and key,
//! innermost first; lost events on a CPU close no slice: what is open there stays
//! unpaired. A slice ends at its end event, but a `function_graph` call's lasts the
//! duration its return recorded, from its entry, as the kernel's `trace` shows it
//! (lengthened, if need be, to hold the slices that began inside it: the duration
//! leaves out the tracer's own time at the entry; keyed pairs that interleave, begin
//! 0, begin 1, end 0, end 1, lengthen the first to the second's end, so that slices
//! nest); a return whose entry is not in
//! the dump (overwritten) or an entry whose return is not stays an instant, its
//! other end unknown. Every other event, and a begin or end left unpaired, is a
//! thread-scoped instant (`"ph":"i","s":"t"`) named `system:name` with category
//! `system` and the field values as args. Lost events are `lost events` instants
//! with `{"count": N}`; a panic is a global instant at the last timestamp. Every
//! CPU track's events are in timestamp order.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};

use serde_json::{Map, Value as Json, json};

use trace::dump::{
    BufferKind, Event, MAX_CPUS, PanicReport, Section, Texts, Value, hex_bytes, hex_dump,
};
use trace::event::Timeline;

use super::MAX_TS;

/// The value of field `name` of an event, if its descriptor has one.
fn field<'a>(trace: &Section, ev: &'a Event, name: &str) -> Option<&'a Value> {
    let d = trace.descriptor(ev.id)?;
    ev.values.get(d.fields.iter().position(|f| f.name == name)?)
}

/// A slice, as [`slices`] finds it: the index of the event that ends it, when it
/// ends, and the index of the event at which it closes (its end event, or where the
/// last of the slices that began inside it and ended after it ends).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Slice {
    /// The index of its end event.
    pub end: usize,
    /// Its end time.
    pub until: u64,
    /// The index of the event at which it closes, innermost first.
    pub closed: usize,
}

/// A slice begun and not yet closed on its CPU.
struct Open {
    /// The index of its begin event.
    begin: usize,
    /// Its end time, as its end event gives it.
    until: u64,
    /// The latest end of the slices that began inside it.
    inside: u64,
    /// Whether its end event came.
    ended: bool,
}

/// The slices of a trace, for each event index that begins one: begins paired with
/// ends as the events' descriptors declare them ([`trace::event::Timeline`]), each
/// ending at its end event or, where that event recorded how long the slice lasted
/// ([`recorded_duration`]), that long after its begin (never after its end event),
/// lengthened to hold the slices that began inside it, those that end after it too
/// (keyed pairs that interleave: it closes with them), so that slices nest. Linear
/// in the events.
pub(super) fn slices(trace: &Section) -> BTreeMap<usize, Slice> {
    let paired = pairs(trace);
    let begun: HashMap<usize, usize> = paired.iter().map(|(&b, &e)| (e, b)).collect();
    // Each CPU's open slices, innermost last, and where each begin is among them.
    let mut open: HashMap<usize, Vec<Open>> = HashMap::new();
    let mut at: HashMap<usize, usize> = HashMap::new();
    let mut found = BTreeMap::new();
    for (i, ev) in trace.events.iter().enumerate() {
        if let Some(&end) = paired.get(&i) {
            let last = &trace.events[end];
            let until = recorded_duration(trace, last)
                .map_or(last.ts, |ns| ev.ts.saturating_add(ns).min(last.ts));
            let stack = open.entry(ev.cpu).or_default();
            at.insert(i, stack.len());
            stack.push(Open { begin: i, until, inside: 0, ended: false });
        }
        let Some(begin) = begun.get(&i).and_then(|b| at.remove(b)) else { continue };
        let stack = open.entry(ev.cpu).or_default();
        stack[begin].ended = true;
        while let Some(slice) = stack.pop_if(|o| o.ended) {
            let until = slice.until.max(slice.inside);
            if let Some(outer) = stack.last_mut() {
                outer.inside = outer.inside.max(until);
            }
            found.insert(slice.begin, Slice { end: paired[&slice.begin], until, closed: i });
        }
    }
    found
}

/// How long the slice an event ends lasted, as the event recorded it: a
/// `function_graph` return's `duration`.
fn recorded_duration(trace: &Section, ev: &Event) -> Option<u64> {
    let d = trace.descriptor(ev.id)?;
    let exit = &trace::tracer::FUNCGRAPH_EXIT;
    if (d.system.as_str(), d.name.as_str()) != (exit.system, exit.name) {
        return None;
    }
    match field(trace, ev, "duration")? {
        Value::Unsigned(ns) => Some(*ns),
        _ => None,
    }
}

/// Pairs begins with ends, as the events' descriptors declare them
/// ([`trace::event::Timeline`]): for each event index that begins a slice, the index of
/// the event that ends it.
fn pairs(trace: &Section) -> BTreeMap<usize, usize> {
    // Each CPU's begins not yet ended, by label and key value, innermost last.
    type Begins<'t> = HashMap<(&'t str, Option<Option<&'t Value>>), Vec<usize>>;
    let mut open: HashMap<usize, Begins<'_>> = HashMap::new();
    let mut paired = BTreeMap::new();
    for (i, ev) in trace.events.iter().enumerate() {
        if ev.lost_before > 0 {
            open.remove(&ev.cpu);
        }
        let Some(d) = trace.descriptor(ev.id) else { continue };
        let key = |key: &Option<String>| key.as_ref().map(|k| field(trace, ev, k));
        match &d.timeline {
            Timeline::Begin { label, key: name } => {
                let begins = open.entry(ev.cpu).or_default();
                begins.entry((label, key(name))).or_default().push(i);
            }
            Timeline::End { label, key: name } => {
                let begins = open.get_mut(&ev.cpu).and_then(|o| o.get_mut(&(label, key(name))));
                if let Some(begin) = begins.and_then(Vec::pop) {
                    paired.insert(begin, i);
                }
            }
            Timeline::Instant | Timeline::Counter | Timeline::Span { .. } => {}
        }
    }
    paired
}

/// The slice an event its descriptor declares a span ([`Timeline::Span`]) ends:
/// its label and length in nanoseconds (at most its time: it began at or after 0);
/// `None` for other events, or one whose duration field is not an unsigned integer.
pub(super) fn span<'t>(trace: &'t Section, ev: &Event) -> Option<(&'t str, u64)> {
    let Timeline::Span { label, duration } = &trace.descriptor(ev.id)?.timeline else {
        return None;
    };
    match field(trace, ev, duration)? {
        Value::Unsigned(ns) => Some((label, (*ns).min(ev.ts))),
        _ => None,
    }
}

/// The span labels the trace's descriptors declare, in order: each has a track per
/// CPU, beside the CPU's own ([`span`]).
pub(super) fn span_labels(trace: &Section) -> Vec<&str> {
    let labels = trace.descriptors.values().filter_map(|d| match &d.timeline {
        Timeline::Span { label, .. } => Some(label.as_str()),
        _ => None,
    });
    let mut labels: Vec<&str> = labels.collect();
    labels.sort_unstable();
    labels.dedup();
    labels
}

/// The integer fields of an event its descriptor declares a counter
/// ([`trace::event::Timeline::Counter`]), as (field name, value); `None` for other events.
pub(super) fn counters(trace: &Section, ev: &Event) -> Option<Vec<(String, i64)>> {
    let d = trace.descriptor(ev.id).filter(|d| d.timeline == Timeline::Counter)?;
    let values = d.fields.iter().zip(&ev.values).filter_map(|(f, v)| match v {
        Value::Unsigned(u) => Some((f.name.clone(), i64::try_from(*u).unwrap_or(i64::MAX))),
        Value::Signed(i) => Some((f.name.clone(), *i)),
        _ => None,
    });
    Some(values.collect())
}

/// An event's name, category and fields as (name, value): the descriptor's fields,
/// or for an id without one its `id` and the hex of its `data`.
pub(super) fn described(trace: &Section, ev: &Event) -> (String, String, Vec<(String, Value)>) {
    match trace.descriptor(ev.id) {
        Some(d) => {
            let args = ev
                .values
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    let key = d.fields.get(i).map_or_else(|| format!("arg{i}"), |f| f.name.clone());
                    (key, v.clone())
                })
                .collect();
            (d.full_name(), d.system.clone(), args)
        }
        None => (
            format!("unknown event id {}", ev.id),
            "unknown".to_string(),
            vec![
                ("id".into(), Value::Unsigned(u64::from(ev.id))),
                ("data".into(), Value::Str(hex_dump(&ev.values))),
            ],
        ),
    }
}

/// The name of the slice that the event `begin` begins: its label and its text
/// (`irq irq=48`, `command ls`), rendered by `texts` (the trace's).
pub(super) fn slice_name(trace: &Section, texts: &Texts<'_>, begin: &Event) -> String {
    let label = match trace.descriptor(begin.id).map(|d| &d.timeline) {
        Some(Timeline::Begin { label, .. }) => label.as_str(),
        _ => "",
    };
    let text = texts.text(begin);
    if text.is_empty() { label.to_string() } else { format!("{label} {text}") }
}

/// An event's name, category and args as JSON.
fn described_json(trace: &Section, ev: &Event) -> (String, String, Map<String, Json>) {
    let (name, cat, fields) = described(trace, ev);
    (name, cat, fields.into_iter().map(|(k, v)| (k, value_json(&v))).collect())
}

/// Builds the Chrome Trace Event JSON document of a trace.
pub fn perfetto_json(trace: &Section) -> Json {
    perfetto_json_of(std::slice::from_ref(trace))
}

/// Builds one document of several buffers of an instance (its live buffer and its
/// snapshot), as [`write_perfetto_of`] writes it: each is its own process, pid its
/// position, named `kernel` for the live buffer and `kernel (snapshot)` for the
/// snapshot, so the viewer shows them apart. `otherData` holds the first's
/// statistics as `cpu_stats` and every buffer's under `buffers` (with what a
/// panic's seal left out: `stopped`, `unreadable`, and `unpublished`).
pub fn perfetto_json_of(traces: &[Section]) -> Json {
    let mut written = Vec::new();
    write_perfetto_of(traces, &mut written).expect("writing to memory");
    serde_json::from_slice(&written).expect("the written document reads back")
}

/// The document's `otherData`: the instance, the CPU count and the buffers'
/// statistics (see [`perfetto_json_of`]).
fn other_data(traces: &[Section]) -> Json {
    let stats = |trace: &Section| -> Vec<Json> {
        trace
            .stats
            .iter()
            .map(|s| {
                json!({
                    "written": s.written, "entries": s.entries, "overrun": s.overrun,
                    "dropped": s.dropped, "read": s.read, "commit_overrun": s.commit_overrun,
                    "stopped": s.stopped, "unreadable": s.unreadable,
                    "unpublished": s.unpublished
                })
            })
            .collect()
    };
    let buffers: Vec<Json> =
        traces.iter().map(|t| json!({"buffer": t.buffer.name(), "cpu_stats": stats(t)})).collect();
    let first = traces.first();
    json!({
        "instance": first.map_or("top", |t| t.instance.as_str()),
        "cpus": traces.iter().map(|t| t.cpus).max().unwrap_or(0),
        "cpu_stats": first.map(stats).unwrap_or_default(),
        "buffers": buffers
    })
}

/// Writes the events of one buffer as process `pid`, each through `emit`.
fn buffer_events(
    trace: &Section,
    pid: usize,
    emit: &mut dyn FnMut(Json) -> io::Result<()>,
) -> io::Result<()> {
    let cpus = trace.cpu_ids();
    let process = match trace.buffer {
        BufferKind::Live => "kernel",
        BufferKind::Snapshot => "kernel (snapshot)",
    };
    emit(json!({
        "ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": process}
    }))?;
    let thread = |emit: &mut dyn FnMut(Json) -> io::Result<()>, tid: usize, name: String, cpu| {
        emit(json!({
            "ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}
        }))?;
        emit(json!({
            "ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": cpu}
        }))
    };
    for cpu in cpus {
        thread(emit, cpu, format!("cpu{cpu}"), cpu)?;
    }
    // A span's track: a thread of its own per label and CPU, after the CPUs'.
    let labels: HashMap<&str, usize> =
        span_labels(trace).into_iter().enumerate().map(|(rank, l)| (l, rank)).collect();
    let span_tid =
        |label: &str, cpu: usize| MAX_CPUS * (1 + labels.get(label).copied().unwrap_or(0)) + cpu;
    let tracks: std::collections::BTreeSet<(&str, usize)> =
        trace.events.iter().filter_map(|ev| Some((span(trace, ev)?.0, ev.cpu))).collect();
    for &(label, cpu) in &tracks {
        thread(emit, span_tid(label, cpu), format!("cpu{cpu} {label}"), cpu)?;
    }
    let paired = slices(trace);
    let texts = trace.texts();
    let ends: std::collections::BTreeSet<usize> = paired.values().map(|s| s.end).collect();
    for (i, ev) in trace.events.iter().enumerate() {
        let ts = micros(ev.ts);
        if ev.lost_before > 0 {
            emit(json!({
                "ph": "i", "s": "t", "name": "lost events", "cat": "lost", "pid": pid, "tid": ev.cpu,
                "ts": ts, "args": {"count": ev.lost_before}
            }))?;
        }
        if ends.contains(&i) {
            continue;
        }
        if let Some((label, ns)) = span(trace, ev) {
            let (name, cat, mut args) = described_json(trace, ev);
            args.insert("event".into(), json!(name));
            emit(json!({
                "ph": "X", "name": label, "cat": cat, "pid": pid, "tid": span_tid(label, ev.cpu),
                "ts": micros(ev.ts - ns), "dur": micros(ns), "args": args
            }))?;
            continue;
        }
        if let Some(values) = counters(trace, ev) {
            // One counter per CPU: Chrome's counters are keyed by process and name.
            let name = trace.descriptor(ev.id).map_or_else(String::new, |d| d.full_name());
            let args: Map<String, Json> = values.into_iter().map(|(k, v)| (k, json!(v))).collect();
            emit(json!({
                "ph": "C", "name": format!("{name} cpu{}", ev.cpu), "pid": pid, "tid": ev.cpu,
                "ts": ts, "args": args
            }))?;
            continue;
        }
        let (name, cat, mut args) = described_json(trace, ev);
        if let Some(&Slice { end, until, .. }) = paired.get(&i) {
            let end = &trace.events[end];
            let slice = slice_name(trace, &texts, ev);
            let (end_name, _, end_args) = described_json(trace, end);
            for (key, value) in end_args {
                let key = if args.contains_key(&key) { format!("end_{key}") } else { key };
                args.insert(key, value);
            }
            args.insert("begin".into(), json!(name));
            args.insert("end".into(), json!(end_name));
            emit(json!({
                "ph": "X", "name": slice, "cat": cat, "pid": pid, "tid": ev.cpu, "ts": ts,
                "dur": micros(until.saturating_sub(ev.ts)), "args": args
            }))?;
            continue;
        }
        emit(json!({
            "ph": "i", "s": "t", "name": name, "cat": cat, "pid": pid, "tid": ev.cpu, "ts": ts,
            "args": args
        }))?;
    }
    for (cpu, ts, lost) in trace.losses_after() {
        emit(json!({
            "ph": "i", "s": "t", "name": "lost events", "cat": "lost", "pid": pid, "tid": cpu,
            "ts": micros(ts), "args": {"count": lost}
        }))?;
    }
    Ok(())
}

/// Writes the Chrome Trace Event JSON of a trace.
pub fn write_perfetto(trace: &Section, out: &mut impl Write) -> io::Result<()> {
    write_perfetto_of(std::slice::from_ref(trace), out)
}

/// Writes the Chrome Trace Event JSON of several buffers (see [`perfetto_json_of`]),
/// an event at a time: what it holds at once is a buffer's pairing of slices, not
/// the document. Its keys are in the order a whole document's would be written
/// (sorted), `traceEvents` last.
pub fn write_perfetto_of(traces: &[Section], out: &mut impl Write) -> io::Result<()> {
    let mut out = io::BufWriter::new(out);
    out.write_all(br#"{"displayTimeUnit":"ns","otherData":"#)?;
    serde_json::to_writer(&mut out, &other_data(traces))?;
    out.write_all(br#","traceEvents":["#)?;
    let mut first = true;
    let mut emit = |event: Json| -> io::Result<()> {
        if !std::mem::take(&mut first) {
            out.write_all(b",")?;
        }
        serde_json::to_writer(&mut out, &event).map_err(io::Error::from)
    };
    for (pid, trace) in traces.iter().enumerate() {
        buffer_events(trace, pid, &mut emit)?;
    }
    // One panic marker: every buffer of a dump carries the same panic.
    if let Some(trace) = traces.iter().find(|t| t.panic.is_some())
        && let Some(p) = &trace.panic
    {
        let last = traces.iter().flat_map(|t| &t.events).map(|e| e.ts).max().unwrap_or(0);
        emit(json!({
            "ph": "i", "s": "g", "name": "panic", "cat": "panic", "pid": 0, "tid": p.cpu,
            "ts": micros(last), "args": panic_args(p)
        }))?;
    }
    out.write_all(b"]}\n")?;
    out.flush()
}

/// A panic marker's arguments: where and why, a panic while it was reported, and
/// another CPU's panic meanwhile.
fn panic_args(p: &PanicReport) -> Json {
    let mut args = json!({"cpu": p.cpu, "message": p.message, "location": p.location});
    if let Some(nested) = &p.nested {
        args["nested_message"] = json!(nested.message);
        args["nested_location"] = json!(nested.location);
    }
    if let Some(other) = &p.other {
        args["other_cpu"] = json!(other.cpu);
        args["other_message"] = json!(other.message);
        args["other_location"] = json!(other.location);
    }
    args
}

/// Nanoseconds as microseconds, a double as viewers read it. The JSON writer
/// prints the shortest decimal that reads back as the same double, which is the
/// exact `us.nnn` value below 10^15 ns (11 days of uptime); later times may be
/// off by a nanosecond or so. Clamped at [`MAX_TS`].
fn micros(ns: u64) -> f64 {
    ns.min(MAX_TS) as f64 / 1000.0
}

fn value_json(v: &Value) -> Json {
    match v {
        Value::Unsigned(n) => json!(n),
        Value::Signed(n) => json!(n),
        Value::Bool(b) => json!(b),
        Value::Char(c) => json!(c.to_string()),
        Value::Bytes(b) => json!(hex_bytes(b)),
        Value::Str(s) => json!(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample::{sample, task_event};
    use std::collections::BTreeMap;
    use trace::dump::Event;

    /// Round-trips through text, as a viewer would read it.
    fn parsed(trace: &Section) -> Json {
        let mut out = Vec::new();
        write_perfetto(trace, &mut out).unwrap();
        serde_json::from_slice(&out).unwrap()
    }

    fn with_ph<'a>(doc: &'a Json, ph: &str) -> Vec<&'a Json> {
        doc["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] == ph).collect()
    }

    /// What a panic's seal left out (and what stayed unpublished) is in the CPU's
    /// statistics, as the kernel's dump text says it.
    #[test]
    fn cpu_stats_carry_what_the_seal_left_out() {
        let mut trace = sample();
        (trace.stats[1].stopped, trace.stats[1].unreadable) = (1, 16);
        trace.stats[0].unpublished = 24;
        let doc = parsed(&trace);
        let stats = &doc["otherData"]["cpu_stats"];
        assert_eq!((&stats[1]["stopped"], &stats[1]["unreadable"]), (&json!(1), &json!(16)));
        assert_eq!((&stats[0]["unpublished"], &stats[0]["stopped"]), (&json!(24), &json!(0)));
    }

    #[test]
    fn tracks_events_markers_and_panic() {
        let doc = parsed(&sample());
        assert_eq!(doc["displayTimeUnit"], "ns");

        let meta = with_ph(&doc, "M");
        let names: Vec<(u64, &str)> = meta
            .iter()
            .filter(|m| m["name"] == "thread_name")
            .map(|m| (m["tid"].as_u64().unwrap(), m["args"]["name"].as_str().unwrap()))
            .collect();
        assert_eq!(names, [(0, "cpu0"), (1, "cpu1")]);
        assert!(meta.iter().any(|m| m["name"] == "process_name" && m["args"]["name"] == "kernel"));

        let instants = with_ph(&doc, "i");
        // 5 events + 1 lost marker + 1 panic.
        assert_eq!(instants.len(), 7);
        assert!(instants.iter().all(|e| e["pid"] == 0));
        let events: Vec<&&Json> = instants
            .iter()
            .filter(|e| e["name"] != "lost events" && e["name"] != "panic")
            .collect();
        assert_eq!(events.len(), 5);
        assert!(events.iter().all(|e| e["s"] == "t"));

        let irq = events[0];
        assert_eq!(irq["name"], "irq:irq_handler_entry");
        assert_eq!(irq["cat"], "irq");
        assert_eq!(irq["tid"], 0);
        assert_eq!(irq["ts"].as_f64().unwrap(), 1_000_000.5);
        assert_eq!(irq["args"], json!({"vector": 48, "error": 2}));

        let msg = events[1];
        assert_eq!(msg["tid"], 1);
        assert_eq!(msg["args"], json!({"pid": -7, "comm": "init \"x\"", "ok": true, "c": "λ"}));
        let pkt = events[2];
        assert_eq!(pkt["args"], json!({"len": 1500, "head": "de ad be ef", "delta": -42}));
        assert_eq!(events[4]["args"], json!({}));

        let lost = instants.iter().find(|e| e["name"] == "lost events").unwrap();
        assert_eq!(lost["tid"], 1);
        assert_eq!(lost["ts"], pkt["ts"]);
        assert_eq!(lost["args"], json!({"count": 17}));

        let panic = instants.iter().find(|e| e["name"] == "panic").unwrap();
        assert_eq!(panic["s"], "g");
        assert_eq!(panic["ts"].as_f64().unwrap(), 12_345_678.901);
        assert_eq!(panic["args"]["message"], r#"boom "quoted" \ back"#);
    }

    /// Checks what a viewer relies on: every event has a phase it knows, every
    /// track's timestamps are non-decreasing in file order, every slice has a
    /// duration of zero or more and nests in the slices open before it on its
    /// track; returns the slices as (tid, name, ts, dur).
    pub(crate) fn check_structure(doc: &Json) -> Vec<(u64, String, f64, f64)> {
        let mut last: BTreeMap<u64, f64> = BTreeMap::new();
        let mut open: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
        let mut slices = Vec::new();
        for e in doc["traceEvents"].as_array().unwrap() {
            let ph = e["ph"].as_str().unwrap();
            assert!(["M", "i", "X", "C"].contains(&ph), "unexpected phase {e}");
            if ph == "M" {
                continue;
            }
            let (tid, ts) = (e["tid"].as_u64().unwrap(), e["ts"].as_f64().unwrap());
            if e["s"] != "g" {
                let prev = last.insert(tid, ts).unwrap_or(f64::MIN);
                assert!(prev <= ts, "track {tid} goes back in time at {e}");
            }
            let stack = open.entry(tid).or_default();
            while stack.last().is_some_and(|&end| end <= ts) {
                stack.pop();
            }
            if ph == "X" {
                let dur = e["dur"].as_f64().unwrap();
                assert!(dur >= 0.0, "{e}");
                if let Some(&end) = stack.last() {
                    assert!(ts + dur <= end, "slice {e} overlaps its parent ending at {end}");
                }
                stack.push(ts + dur);
                slices.push((tid, e["name"].as_str().unwrap().to_string(), ts, dur));
            }
        }
        slices
    }

    #[test]
    fn paired_events_become_nested_slices_and_the_rest_stay_instants() {
        use trace::dump::{DumpDescriptor, DumpField};
        use trace::field::FieldKind;
        let mut t = Section { cpus: 2, ..Section::default() };
        let d =
            |id, system: &str, name: &str, fields: &[(&str, FieldKind)], timeline| DumpDescriptor {
                kind: trace::event::DescriptorKind::Event,
                id,
                system: system.into(),
                name: name.into(),
                format: (fields.iter())
                    .map(|&(field, _)| match field {
                        "line" => "{line}".to_string(),
                        field => format!("{field}={{{field}}}"),
                    })
                    .collect::<Vec<_>>()
                    .join(" "),
                fields: fields
                    .iter()
                    .map(|&(name, kind)| DumpField { name: name.into(), kind })
                    .collect(),
                timeline,
            };
        let irq = || Some("vector".to_string());
        let (begin, end) = (
            Timeline::Begin { label: "irq".into(), key: irq() },
            Timeline::End { label: "irq".into(), key: irq() },
        );
        let command = |begins| match begins {
            true => Timeline::Begin { label: "command".into(), key: None },
            false => Timeline::End { label: "command".into(), key: None },
        };
        for desc in [
            d(1, "irq", "irq_handler_entry", &[("vector", FieldKind::U8)], begin),
            d(2, "irq", "irq_handler_exit", &[("vector", FieldKind::U8)], end),
            d(3, "shell", "command", &[("line", FieldKind::Str)], command(true)),
            d(
                4,
                "shell",
                "command_done",
                &[("ok", FieldKind::Bool), ("duration_ns", FieldKind::U64)],
                command(false),
            ),
            d(5, "timer", "tick", &[], Timeline::Instant),
        ] {
            std::sync::Arc::make_mut(&mut t.descriptors).insert(desc.id, desc);
        }
        let ev = task_event;
        let v = |n| vec![Value::Unsigned(n)];
        t.events = vec![
            ev(0, 1_000, 3, vec![Value::Str("ls".into())]),
            ev(0, 2_000, 1, v(32)),
            ev(1, 2_500, 2, v(48)), // an exit whose entry is not in the dump
            ev(0, 3_000, 1, v(48)), // nested: a second vector
            ev(0, 3_500, 5, vec![]),
            ev(0, 4_000, 2, v(48)),
            ev(0, 5_000, 2, v(32)),
            ev(0, 9_000, 4, vec![Value::Bool(true), Value::Unsigned(8_000)]),
            ev(1, 9_500, 1, v(33)), // an entry still open at the end
            ev(1, 9_600, 3, vec![Value::Str("x".into())]),
        ];
        let mut lost = ev(1, 9_700, 4, vec![Value::Bool(false), Value::Unsigned(1)]);
        lost.lost_before = 3; // the command's end may be another's: not paired
        t.events.push(lost);
        let doc = parsed(&t);
        let slices = check_structure(&doc);
        assert_eq!(
            slices,
            [
                (0, "command ls".to_string(), 1.0, 8.0),
                (0, "irq vector=32".to_string(), 2.0, 3.0),
                (0, "irq vector=48".to_string(), 3.0, 1.0),
            ]
        );
        let command = with_ph(&doc, "X")[0];
        assert_eq!(
            command["args"],
            json!({"line": "ls", "ok": true, "duration_ns": 8000,
                   "begin": "shell:command", "end": "shell:command_done"})
        );
        let instants: Vec<(u64, &str)> = with_ph(&doc, "i")
            .iter()
            .map(|e| (e["tid"].as_u64().unwrap(), e["name"].as_str().unwrap()))
            .collect();
        assert_eq!(
            instants,
            [
                (1, "irq:irq_handler_exit"),
                (0, "timer:tick"),
                (1, "irq:irq_handler_entry"),
                (1, "shell:command"),
                (1, "lost events"),
                (1, "shell:command_done"),
            ]
        );
    }

    /// A `function_graph` call's slice starts at its entry and lasts the duration
    /// its return recorded, lengthened to hold a slice that began inside it; a
    /// return without its entry and an entry without its return stay instants.
    #[test]
    fn graph_calls_last_their_recorded_durations() {
        use trace::dump::{DumpDescriptor, DumpField};
        let mut t = sample();
        t.panic = None;
        let call = || ("call".to_string(), Some("func".to_string()));
        let (begin, end) = (
            Timeline::Begin { label: call().0, key: call().1 },
            Timeline::End { label: call().0, key: call().1 },
        );
        for (id, name, fields, timeline) in [
            (10, "funcgraph_entry", &["func", "depth"][..], begin),
            (11, "funcgraph_exit", &["func", "depth", "duration"][..], end),
        ] {
            let fields: Vec<DumpField> = fields
                .iter()
                .map(|&name| DumpField { name: name.into(), kind: trace::field::FieldKind::U64 })
                .collect();
            let format = fields.iter().map(|f| format!("{0}={{{0}}}", f.name));
            let format = format.collect::<Vec<_>>().join(" ").replace("{func}", "{func:#x}");
            let (system, name) = ("ftrace".into(), name.into());
            let kind = trace::event::DescriptorKind::Event;
            std::sync::Arc::make_mut(&mut t.descriptors)
                .insert(id, DumpDescriptor { id, kind, system, name, format, fields, timeline });
        }
        let v = |values: &[u64]| values.iter().map(|&n| Value::Unsigned(n)).collect();
        let irq = |ts, id| task_event(0, ts, id, v(&[32, 0]));
        t.events = vec![
            task_event(0, 1_000, 10, v(&[1, 0])),
            task_event(0, 2_000, 10, v(&[2, 1])),
            task_event(0, 2_600, 11, v(&[2, 1, 400])),
            irq(4_000, 1),
            Event { values: v(&[32]), ..irq(4_900, 4) },
            task_event(0, 5_200, 11, v(&[1, 0, 3_800])),
            task_event(0, 6_000, 11, v(&[3, 0, 500])),
            task_event(0, 7_000, 10, v(&[4, 0])),
        ];
        std::sync::Arc::make_mut(&mut t.descriptors).get_mut(&4).unwrap().fields =
            t.descriptors[&1].fields[..1].to_vec();
        let doc = parsed(&t);
        let slices = check_structure(&doc);
        assert_eq!(
            slices,
            [
                (0, "call func=0x1 depth=0".to_string(), 1.0, 3.9),
                (0, "call func=0x2 depth=1".to_string(), 2.0, 0.4),
                (0, "irq vector=32 error=0x0".to_string(), 4.0, 0.9),
            ]
        );
        let instants: Vec<&str> =
            with_ph(&doc, "i").iter().map(|e| e["name"].as_str().unwrap()).collect();
        assert_eq!(instants, ["ftrace:funcgraph_exit", "ftrace:funcgraph_entry"]);
    }

    /// The serial log of a real QEMU panic: every event pair its descriptors declare
    /// becomes a slice, and the timer ticks counters.
    #[test]
    fn a_real_panic_gives_slices_for_its_paired_events() {
        let log = include_str!("../../tests/data/panic-timeline.log");
        let dump = trace::dump::parse(log).pop().expect("a dump");
        let trace = dump.sections().into_iter().find(|t| t.instance == "top").unwrap();
        let slices = check_structure(&parsed(&trace));
        let count =
            |name: &str| trace.events.iter().filter(|e| trace.event_name(e.id) == name).count();
        let (entries, exits) = (count("irq:irq_handler_entry"), count("irq:irq_handler_exit"));
        let irqs = slices.iter().filter(|s| s.1.starts_with("irq vector=")).count();
        // The dump starts and ends mid-handler on a CPU at most once each.
        let cpus = trace.cpu_ids().len();
        assert!(irqs <= entries.min(exits) && irqs + cpus >= entries.max(exits), "{irqs} slices");
        assert!(irqs > 0);
        let commands = slices.iter().filter(|s| s.1.starts_with("command ")).count();
        assert_eq!(commands, count("shell:command_done"), "every finished command is a slice");
        assert_eq!(count("shell:command"), commands + 1, "all but the panic command finished");
        let doc = perfetto_json(&trace);
        let counters = doc["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] == "C");
        let ticks = counters.filter(|e| e["args"]["interval_ns"].as_i64().is_some()).count();
        assert_eq!(ticks, count("timer:tick"), "every tick is a counter value");
    }

    /// A dump written before descriptors declared their timeline draws instants only.
    #[test]
    fn an_old_dump_has_no_slices() {
        let log = include_str!("../../tests/data/panic-serial.txt");
        let dump = trace::dump::parse(log).pop().expect("a dump");
        let trace = dump.sections().into_iter().find(|t| t.instance == "top").unwrap();
        assert!(trace.descriptors.values().all(|d| d.timeline == Timeline::Instant));
        assert!(check_structure(&parsed(&trace)).is_empty());
    }

    #[test]
    fn timestamps_keep_nanoseconds_in_the_text() {
        let mut out = Vec::new();
        write_perfetto(&sample(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains(r#""ts":12345678.901"#), "{text}");
        assert!(text.contains(r#""ts":1000000.5"#), "{text}");
    }

    #[test]
    fn unknown_ids_and_mismatched_values_do_not_panic() {
        let mut t = sample();
        t.events.push(Event {
            context: trace::Context::TASK,
            cpu: 0,
            ts: 13_000_000_000,
            id: 99,
            values: vec![Value::Bytes(vec![1, 2])],
            lost_before: 0,
            error: trace::field::DecodeError::Truncated,
        });
        // More values than the descriptor has fields.
        t.events.push(Event {
            context: trace::Context::TASK,
            cpu: 0,
            ts: 13_000_000_001,
            id: 4,
            values: vec![Value::Unsigned(5)],
            lost_before: 0,
            error: trace::field::DecodeError::Truncated,
        });
        let doc = parsed(&t);
        let instants = with_ph(&doc, "i");
        let unknown = instants.iter().find(|e| e["name"] == "unknown event id 99").unwrap();
        assert_eq!(unknown["args"], json!({"id": 99, "data": "01 02"}));
        let extra =
            instants.iter().find(|e| e["name"] == "irq:irq_handler_exit" && e["args"] != json!({}));
        assert_eq!(extra.unwrap()["args"], json!({"arg0": 5}));
        parsed(&Section::default());
    }
}
