//! Chrome Trace Event Format JSON, for ui.perfetto.dev (and chrome://tracing).
//!
//! One process "kernel" (pid 0) with one thread track per CPU (tid = CPU, named
//! `cpuN`); every event is a thread-scoped instant (`"ph":"i","s":"t"`) named
//! `system:name` with category `system` and the field values as args. Lost events
//! are `lost events` instants with `{"count": N}`; a panic is a global instant at
//! the last timestamp.

use std::io::{self, Write};

use serde_json::{Map, Value as Json, json};

use super::model::{Trace, Value, hex_bytes, hex_dump};

/// Builds the Chrome Trace Event JSON document of a trace.
pub fn perfetto_json(trace: &Trace) -> Json {
    let cpus = trace.cpu_ids();
    let mut events = Vec::with_capacity(trace.events.len() + 2 * cpus.len() + 2);
    events.push(json!({
        "ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "kernel"}
    }));
    for cpu in cpus {
        events.push(json!({
            "ph": "M", "name": "thread_name", "pid": 0, "tid": cpu, "args": {"name": format!("cpu{cpu}")}
        }));
        events.push(json!({
            "ph": "M", "name": "thread_sort_index", "pid": 0, "tid": cpu, "args": {"sort_index": cpu}
        }));
    }
    for ev in &trace.events {
        let ts = micros(ev.ts);
        if ev.lost_before > 0 {
            events.push(json!({
                "ph": "i", "s": "t", "name": "lost events", "cat": "lost", "pid": 0, "tid": ev.cpu,
                "ts": ts, "args": {"count": ev.lost_before}
            }));
        }
        let (name, cat, args) = match trace.descriptor(ev.id) {
            Some(d) => {
                let mut args = Map::new();
                for (i, v) in ev.values.iter().enumerate() {
                    let key = d.fields.get(i).map_or_else(|| format!("arg{i}"), |f| f.name.clone());
                    args.insert(key, value_json(v));
                }
                (d.full_name(), d.system.clone(), args)
            }
            None => {
                let mut args = Map::new();
                args.insert("id".into(), json!(ev.id));
                args.insert("data".into(), json!(hex_dump(&ev.values)));
                (format!("unknown event id {}", ev.id), "unknown".to_string(), args)
            }
        };
        events.push(json!({
            "ph": "i", "s": "t", "name": name, "cat": cat, "pid": 0, "tid": ev.cpu, "ts": ts,
            "args": args
        }));
    }
    if let Some(p) = &trace.panic {
        let last = trace.events.iter().map(|e| e.ts).max().unwrap_or(0);
        events.push(json!({
            "ph": "i", "s": "g", "name": "panic", "cat": "panic", "pid": 0, "tid": p.cpu,
            "ts": micros(last), "args": {"cpu": p.cpu, "message": p.message, "location": p.location}
        }));
    }
    let stats: Vec<Json> = trace
        .stats
        .iter()
        .map(|s| {
            json!({
                "written": s.written, "entries": s.entries, "overrun": s.overrun,
                "dropped": s.dropped, "read": s.read, "commit_overrun": s.commit_overrun
            })
        })
        .collect();
    json!({
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {"instance": trace.instance_name(), "cpus": trace.cpus, "cpu_stats": stats}
    })
}

/// Writes the Chrome Trace Event JSON of a trace.
pub fn write_perfetto(trace: &Trace, out: &mut impl Write) -> io::Result<()> {
    let mut out = io::BufWriter::new(out);
    serde_json::to_writer(&mut out, &perfetto_json(trace))?;
    writeln!(out)?;
    out.flush()
}

/// Nanoseconds as microseconds, a double as viewers read it. The JSON writer
/// prints the shortest decimal that reads back as the same double, which is the
/// exact `us.nnn` value below 10^15 ns (11 days of uptime); later times may be
/// off by a nanosecond or so.
fn micros(ns: u64) -> f64 {
    ns as f64 / 1000.0
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
    use crate::report::model::Event;
    use crate::report::sample::sample;

    /// Round-trips through text, as a viewer would read it.
    fn parsed(trace: &Trace) -> Json {
        let mut out = Vec::new();
        write_perfetto(trace, &mut out).unwrap();
        serde_json::from_slice(&out).unwrap()
    }

    fn with_ph<'a>(doc: &'a Json, ph: &str) -> Vec<&'a Json> {
        doc["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] == ph).collect()
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
            cpu: 0,
            ts: 13_000_000_000,
            id: 99,
            values: vec![Value::Bytes(vec![1, 2])],
            lost_before: 0,
            text: String::new(),
        });
        // More values than the descriptor has fields.
        t.events.push(Event {
            cpu: 0,
            ts: 13_000_000_001,
            id: 4,
            values: vec![Value::Unsigned(5)],
            lost_before: 0,
            text: String::new(),
        });
        let doc = parsed(&t);
        let instants = with_ph(&doc, "i");
        let unknown = instants.iter().find(|e| e["name"] == "unknown event id 99").unwrap();
        assert_eq!(unknown["args"], json!({"id": 99, "data": "01 02"}));
        let extra =
            instants.iter().find(|e| e["name"] == "irq:irq_handler_exit" && e["args"] != json!({}));
        assert_eq!(extra.unwrap()["args"], json!({"arg0": 5}));
        parsed(&Trace::default());
    }
}
