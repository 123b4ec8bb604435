//! Perfetto's own trace format: a protobuf `Trace` of `TracePacket`s, encoded by hand
//! (varints and length-delimited fields) with the field numbers of Perfetto's
//! `protos/perfetto/trace/` (`trace.proto`, `trace_packet.proto`,
//! `track_event/track_event.proto`, `track_event/track_descriptor.proto`,
//! `track_event/debug_annotation.proto`, `interned_data/interned_data.proto`).
//!
//! The picture is the JSON's ([`super::perfetto`]): a root track `kernel` with one
//! track per CPU (`cpuN`, in CPU order) under it; paired events are slices
//! (`TYPE_SLICE_BEGIN` with the begin event's fields, `TYPE_SLICE_END` at the
//! slice's end with the end event's, `end_`-prefixed where the begin has the same,
//! and the two events' names), every other event an instant named
//! `system:name` in category `system`, an event declared a counter a value on a
//! counter track per CPU and integer field (`system:name field`, under the CPU's
//! track), a span a slice on a track per label under its CPU's (`cpuN LABEL`, begun
//! at the event's time less its duration), lost events `lost events` instants with their
//! `count`, a panic an instant on the root track at the last timestamp. Fields are
//! debug annotations. All packets form one sequence: the first clears its incremental
//! state, and event names, categories and annotation names are interned (each sent
//! once, in the first packet that uses it). A `stacktrace` event also carries its
//! frames as the track event's callstack. Timestamps are nanoseconds.

use std::collections::{HashMap, HashSet};
use std::io::{self, Write};

use super::perfetto::{counters, described, slice_name, slices, span};
use trace::dump::{Event, Section, Value, hex_bytes};

use super::MAX_TS;

/// `Trace.packet`.
const TRACE_PACKET: u32 = 1;

/// `TracePacket` fields.
mod packet {
    pub const TIMESTAMP: u32 = 8;
    pub const TRUSTED_PACKET_SEQUENCE_ID: u32 = 10;
    pub const TRACK_EVENT: u32 = 11;
    pub const INTERNED_DATA: u32 = 12;
    pub const SEQUENCE_FLAGS: u32 = 13;
    pub const TRACK_DESCRIPTOR: u32 = 60;
    /// `SequenceFlags.SEQ_INCREMENTAL_STATE_CLEARED`.
    pub const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
    /// `SequenceFlags.SEQ_NEEDS_INCREMENTAL_STATE`.
    pub const SEQ_NEEDS_INCREMENTAL_STATE: u64 = 2;
}

/// `TrackDescriptor` fields.
mod track {
    pub const UUID: u32 = 1;
    pub const NAME: u32 = 2;
    pub const PARENT_UUID: u32 = 5;
    pub const COUNTER: u32 = 8;
    pub const CHILD_ORDERING: u32 = 11;
    pub const SIBLING_ORDER_RANK: u32 = 12;
    /// `ChildTracksOrdering.EXPLICIT`: by `sibling_order_rank`.
    pub const EXPLICIT: u64 = 3;
}

/// `TrackEvent` fields and types.
mod event {
    pub const CATEGORY_IIDS: u32 = 3;
    pub const DEBUG_ANNOTATIONS: u32 = 4;
    pub const TYPE: u32 = 9;
    pub const NAME_IID: u32 = 10;
    pub const TRACK_UUID: u32 = 11;
    pub const COUNTER_VALUE: u32 = 30;
    pub const CALLSTACK: u32 = 55;
    /// `TrackEvent.Callstack.frames`.
    pub const FRAMES: u32 = 1;
    /// `Frame.function_name`.
    pub const FUNCTION_NAME: u32 = 1;
    /// `TrackEvent.Type` values, for the `TYPE` field.
    pub const SLICE_BEGIN: u64 = 1;
    pub const SLICE_END: u64 = 2;
    pub const INSTANT: u64 = 3;
    pub const COUNTER: u64 = 4;
}

/// `DebugAnnotation` fields.
mod annotation {
    pub const NAME_IID: u32 = 1;
    pub const BOOL_VALUE: u32 = 2;
    pub const UINT_VALUE: u32 = 3;
    pub const INT_VALUE: u32 = 4;
    pub const STRING_VALUE: u32 = 6;
}

/// `InternedData` fields; each entry is `{iid = 1, name = 2}`.
mod interned {
    pub const EVENT_CATEGORIES: u32 = 1;
    pub const EVENT_NAMES: u32 = 2;
    pub const DEBUG_ANNOTATION_NAMES: u32 = 3;
    pub const IID: u32 = 1;
    pub const NAME: u32 = 2;
}

/// The one packet sequence's id.
const SEQUENCE: u64 = 1;
/// The root track's uuid; CPU `n`'s is `CPU_TRACKS + n`.
const ROOT_TRACK: u64 = 1;
const CPU_TRACKS: u64 = 2;

/// A protobuf message being encoded.
#[derive(Default)]
struct Message(Vec<u8>);

impl Message {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    /// A varint field (`uint64`, `uint32`, `bool`, an enum; `int64` as its two's
    /// complement).
    fn uint(&mut self, field: u32, v: u64) {
        self.varint(u64::from(field) << 3);
        self.varint(v);
    }

    /// A length-delimited field.
    fn bytes(&mut self, field: u32, bytes: &[u8]) {
        self.varint(u64::from(field) << 3 | 2);
        self.varint(bytes.len() as u64);
        self.0.extend_from_slice(bytes);
    }

    fn string(&mut self, field: u32, s: &str) {
        self.bytes(field, s.as_bytes());
    }

    fn message(&mut self, field: u32, m: &Message) {
        self.bytes(field, &m.0);
    }
}

/// One table of interned strings: string -> iid (from 1).
#[derive(Default)]
struct Table(HashMap<String, u64>);

impl Table {
    /// The iid of `s`; a string seen for the first time is added to `new`, the
    /// packet's `InternedData`, as field `field`.
    fn iid(&mut self, s: &str, field: u32, new: &mut Message) -> u64 {
        if let Some(&iid) = self.0.get(s) {
            return iid;
        }
        let iid = self.0.len() as u64 + 1;
        self.0.insert(s.to_string(), iid);
        let mut entry = Message::default();
        entry.uint(interned::IID, iid);
        entry.string(interned::NAME, s);
        new.message(field, &entry);
        iid
    }
}

/// What a track event packet says.
struct TrackEvent<'a> {
    ts: u64,
    track: u64,
    kind: u64,
    /// Name and category (none for a slice's end).
    name: Option<(&'a str, &'a str)>,
    args: &'a [(String, Value)],
    /// A stack's frames, outermost first.
    frames: Vec<String>,
}

/// Writes packets to `out`, interning as it goes.
struct Writer<W: Write> {
    out: W,
    names: Table,
    categories: Table,
    arg_names: Table,
}

impl<W: Write> Writer<W> {
    fn packet(&mut self, packet: &Message) -> io::Result<()> {
        let mut framed = Message::default();
        framed.message(TRACE_PACKET, packet);
        self.out.write_all(&framed.0)
    }

    fn track(&mut self, descriptor: &Message, first: bool) -> io::Result<()> {
        let mut p = Message::default();
        p.uint(packet::TRUSTED_PACKET_SEQUENCE_ID, SEQUENCE);
        if first {
            p.uint(packet::SEQUENCE_FLAGS, packet::SEQ_INCREMENTAL_STATE_CLEARED);
        }
        p.message(packet::TRACK_DESCRIPTOR, descriptor);
        self.packet(&p)
    }

    fn counter(&mut self, ts: u64, track: u64, value: i64) -> io::Result<()> {
        let mut te = Message::default();
        te.uint(event::TYPE, event::COUNTER);
        te.uint(event::TRACK_UUID, track);
        te.uint(event::COUNTER_VALUE, value as u64);
        let mut p = Message::default();
        p.uint(packet::TIMESTAMP, ts.min(MAX_TS));
        p.uint(packet::TRUSTED_PACKET_SEQUENCE_ID, SEQUENCE);
        p.message(packet::TRACK_EVENT, &te);
        self.packet(&p)
    }

    /// A `lost events` instant on `track` at `ts`, its count its argument.
    fn lost(&mut self, ts: u64, track: u64, count: u64) -> io::Result<()> {
        let args = [("count".to_string(), Value::Unsigned(count))];
        let name = Some(("lost events", "lost"));
        self.event(&TrackEvent {
            ts,
            track,
            kind: event::INSTANT,
            name,
            args: &args,
            frames: vec![],
        })
    }

    fn event(&mut self, e: &TrackEvent<'_>) -> io::Result<()> {
        let mut new = Message::default();
        let mut te = Message::default();
        te.uint(event::TYPE, e.kind);
        te.uint(event::TRACK_UUID, e.track);
        if let Some((name, category)) = e.name {
            let cat = self.categories.iid(category, interned::EVENT_CATEGORIES, &mut new);
            te.uint(event::CATEGORY_IIDS, cat);
            te.uint(event::NAME_IID, self.names.iid(name, interned::EVENT_NAMES, &mut new));
        }
        for (key, value) in e.args {
            let mut a = Message::default();
            let iid = self.arg_names.iid(key, interned::DEBUG_ANNOTATION_NAMES, &mut new);
            a.uint(annotation::NAME_IID, iid);
            match value {
                Value::Unsigned(v) => a.uint(annotation::UINT_VALUE, *v),
                Value::Signed(v) => a.uint(annotation::INT_VALUE, *v as u64),
                Value::Bool(v) => a.uint(annotation::BOOL_VALUE, u64::from(*v)),
                Value::Char(c) => a.string(annotation::STRING_VALUE, c.encode_utf8(&mut [0; 4])),
                Value::Bytes(b) => a.string(annotation::STRING_VALUE, &hex_bytes(b)),
                Value::Str(s) => a.string(annotation::STRING_VALUE, s),
            }
            te.message(event::DEBUG_ANNOTATIONS, &a);
        }
        if !e.frames.is_empty() {
            let mut callstack = Message::default();
            for f in &e.frames {
                let mut frame = Message::default();
                frame.string(event::FUNCTION_NAME, f);
                callstack.message(event::FRAMES, &frame);
            }
            te.message(event::CALLSTACK, &callstack);
        }
        let mut p = Message::default();
        p.uint(packet::TIMESTAMP, e.ts.min(MAX_TS));
        p.uint(packet::TRUSTED_PACKET_SEQUENCE_ID, SEQUENCE);
        p.uint(packet::SEQUENCE_FLAGS, packet::SEQ_NEEDS_INCREMENTAL_STATE);
        if !new.0.is_empty() {
            p.message(packet::INTERNED_DATA, &new);
        }
        p.message(packet::TRACK_EVENT, &te);
        self.packet(&p)
    }
}

/// The frames of a `stacktrace` event (`ftrace:kernel_stack`), outermost first as
/// Perfetto orders a callstack: `function+0xoffset` once symbolised
/// ([`super::Symbols::symbolize`]), the address otherwise. None for other events.
fn stack_frames(trace: &Section, ev: &Event) -> Vec<String> {
    let stack = (trace::tracer::STACK_TRACE.system, trace::tracer::STACK_TRACE.name);
    match trace.descriptor(ev.id) {
        Some(d) if (d.system.as_str(), d.name.as_str()) == stack => {}
        _ => return Vec::new(),
    }
    let depth = match ev.values.first() {
        Some(Value::Unsigned(d)) => usize::try_from(*d).unwrap_or(usize::MAX),
        _ => 0,
    };
    let mut frames: Vec<String> = ev
        .values
        .iter()
        .skip(1)
        .take(depth)
        .filter_map(|v| match v {
            Value::Unsigned(ip) => Some(format!("{ip:#x}")),
            Value::Str(s) if !s.is_empty() => Some(s.clone()),
            _ => None,
        })
        .collect();
    frames.reverse();
    frames
}

/// Writes the trace as a Perfetto protobuf trace (`.perfetto-trace`).
pub fn write_perfetto_proto(trace: &Section, out: &mut impl Write) -> io::Result<()> {
    let mut w = Writer {
        out: io::BufWriter::new(out),
        names: Table::default(),
        categories: Table::default(),
        arg_names: Table::default(),
    };
    let mut root = Message::default();
    root.uint(track::UUID, ROOT_TRACK);
    root.string(track::NAME, "kernel");
    root.uint(track::CHILD_ORDERING, track::EXPLICIT);
    w.track(&root, true)?;
    let cpu_track = |cpu: usize| CPU_TRACKS.saturating_add(cpu as u64);
    for cpu in trace.cpu_ids() {
        let mut t = Message::default();
        t.uint(track::UUID, cpu_track(cpu));
        t.uint(track::PARENT_UUID, ROOT_TRACK);
        t.string(track::NAME, &format!("cpu{cpu}"));
        t.uint(track::SIBLING_ORDER_RANK, i32::try_from(cpu).unwrap_or(i32::MAX) as u64);
        w.track(&t, false)?;
    }
    // Counter tracks, made when first used: (CPU, event id, field) -> uuid, after
    // the CPU tracks' uuids.
    let mut counter_tracks: HashMap<(usize, u16, String), u64> = HashMap::new();
    // Span tracks likewise, beside their CPU's: (CPU, label) -> uuid.
    let mut span_tracks: HashMap<(usize, String), u64> = HashMap::new();
    let first_counter = cpu_track(trace.cpu_ids().last().copied().unwrap_or(0)).saturating_add(1);
    let paired = slices(trace);
    let texts = trace.texts();
    let ends: HashSet<usize> = paired.values().map(|s| s.end).collect();
    // Event index -> the begins of the slices that close there, innermost first.
    let mut closes: HashMap<usize, Vec<usize>> = HashMap::new();
    for (&begin, slice) in paired.iter().rev() {
        closes.entry(slice.closed).or_default().push(begin);
    }
    // A slice's begin index -> its begin event's name and field names.
    let mut begun: HashMap<usize, (String, Vec<String>)> = HashMap::new();
    for (i, ev) in trace.events.iter().enumerate() {
        let track = cpu_track(ev.cpu);
        if ev.lost_before > 0 {
            w.lost(ev.ts, track, ev.lost_before)?;
        }
        let tracks = counter_tracks.len() + span_tracks.len();
        if let Some((label, ns)) = span(trace, ev) {
            let uuid = match span_tracks.entry((ev.cpu, label.to_string())) {
                std::collections::hash_map::Entry::Occupied(e) => *e.get(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    let next = first_counter.saturating_add(tracks as u64);
                    let mut t = Message::default();
                    t.uint(track::UUID, next);
                    t.uint(track::PARENT_UUID, track);
                    t.string(track::NAME, &format!("cpu{} {label}", ev.cpu));
                    w.track(&t, false)?;
                    *e.insert(next)
                }
            };
            let (name, cat, mut args) = described(trace, ev);
            args.push(("event".into(), Value::Str(name)));
            let (begin, end) = (ev.ts - ns, ev.ts);
            let name = Some((label, cat.as_str()));
            let slice = |ts, kind, name, args| TrackEvent {
                ts,
                track: uuid,
                kind,
                name,
                args,
                frames: vec![],
            };
            w.event(&slice(begin, event::SLICE_BEGIN, name, &args))?;
            w.event(&slice(end, event::SLICE_END, None, &[]))?;
            continue;
        }
        if let Some(values) = counters(trace, ev) {
            let name = trace.descriptor(ev.id).map_or_else(String::new, |d| d.full_name());
            for (field, value) in values {
                let next =
                    first_counter.saturating_add((counter_tracks.len() + span_tracks.len()) as u64);
                let uuid = match counter_tracks.entry((ev.cpu, ev.id, field.clone())) {
                    std::collections::hash_map::Entry::Occupied(e) => *e.get(),
                    std::collections::hash_map::Entry::Vacant(e) => {
                        let mut t = Message::default();
                        t.uint(track::UUID, next);
                        t.uint(track::PARENT_UUID, track);
                        t.string(track::NAME, &format!("{name} {field}"));
                        t.message(track::COUNTER, &Message::default());
                        w.track(&t, false)?;
                        *e.insert(next)
                    }
                };
                w.counter(ev.ts, uuid, value)?;
            }
            continue;
        }
        let (name, cat, args) = described(trace, ev);
        if ends.contains(&i) {
            // A slice's end is written where it closes, here or at the end of those
            // that began inside it.
            for begin in closes.remove(&i).unwrap_or_default() {
                let (Some((begin_name, begin_keys)), Some(slice)) =
                    (begun.remove(&begin), paired.get(&begin))
                else {
                    continue;
                };
                let (end_name, _, mut args) = described(trace, &trace.events[slice.end]);
                // The viewer merges the two events' args, as the JSON's slice has them.
                for arg in &mut args {
                    if begin_keys.contains(&arg.0) {
                        arg.0.insert_str(0, "end_");
                    }
                }
                args.push(("begin".into(), Value::Str(begin_name)));
                args.push(("end".into(), Value::Str(end_name)));
                w.event(&TrackEvent {
                    ts: slice.until,
                    track,
                    kind: event::SLICE_END,
                    name: None,
                    args: &args,
                    frames: vec![],
                })?;
            }
        } else if paired.contains_key(&i) {
            let keys = args.iter().map(|a| a.0.clone()).collect();
            begun.insert(i, (name, keys));
            let slice = slice_name(trace, &texts, ev);
            let name = Some((slice.as_str(), cat.as_str()));
            w.event(&TrackEvent {
                ts: ev.ts,
                track,
                kind: event::SLICE_BEGIN,
                name,
                args: &args,
                frames: vec![],
            })?;
        } else {
            let name = Some((name.as_str(), cat.as_str()));
            let frames = stack_frames(trace, ev);
            w.event(&TrackEvent {
                ts: ev.ts,
                track,
                kind: event::INSTANT,
                name,
                args: &args,
                frames,
            })?;
        }
    }
    for (cpu, ts, lost) in trace.losses_after() {
        w.lost(ts, cpu_track(cpu), lost)?;
    }
    if let Some(p) = &trace.panic {
        let last = trace.events.iter().map(|e| e.ts).max().unwrap_or(0);
        let mut args = vec![
            ("cpu".to_string(), Value::Unsigned(p.cpu as u64)),
            ("message".to_string(), Value::Str(p.message.clone())),
            ("location".to_string(), Value::Str(p.location.clone())),
        ];
        if let Some(nested) = &p.nested {
            args.push(("nested_message".to_string(), Value::Str(nested.message.clone())));
            args.push(("nested_location".to_string(), Value::Str(nested.location.clone())));
        }
        if let Some(other) = &p.other {
            args.push(("other_cpu".to_string(), Value::Unsigned(other.cpu as u64)));
            args.push(("other_message".to_string(), Value::Str(other.message.clone())));
            args.push(("other_location".to_string(), Value::Str(other.location.clone())));
        }
        let name = Some(("panic", "panic"));
        w.event(&TrackEvent {
            ts: last,
            track: ROOT_TRACK,
            kind: event::INSTANT,
            name,
            args: &args,
            frames: vec![],
        })?;
    }
    w.out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_fields_are_encoded_as_protobuf_does() {
        let mut m = Message::default();
        m.uint(1, 0);
        m.uint(1, 300);
        m.uint(4, -1i64 as u64);
        m.string(2, "hi");
        assert_eq!(
            m.0,
            [
                0x08, 0x00, 0x08, 0xac, 0x02, 0x20, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                0xff, 0x01, 0x12, 0x02, b'h', b'i'
            ]
        );
        let mut big = Message::default();
        big.uint(60, u64::MAX);
        assert_eq!(big.0[..2], [0xe0, 0x03]);
        assert_eq!(big.0.len(), 2 + 10);
    }

    #[test]
    fn a_stack_is_the_events_callstack_outermost_first() {
        use trace::dump::{DumpDescriptor, DumpField};
        use trace::event::Timeline;
        let stack = &trace::tracer::STACK_TRACE;
        let mut t = Section { cpus: 1, ..Section::default() };
        let fields = stack.fields.iter().map(|f| DumpField { name: f.name.into(), kind: f.kind });
        let d = DumpDescriptor {
            kind: trace::event::DescriptorKind::Event,
            id: 7,
            system: stack.system.into(),
            name: stack.name.into(),
            format: String::new(),
            fields: fields.collect(),
            timeline: Timeline::Instant,
        };
        std::sync::Arc::make_mut(&mut t.descriptors).insert(7, d);
        let mut values = vec![Value::Unsigned(2), Value::Str("a+0x1".into()), Value::Unsigned(0xb)];
        values.resize(9, Value::Unsigned(0));
        t.events.push(Event {
            context: trace::Context::TASK,
            cpu: 0,
            ts: 5,
            id: 7,
            values,
            lost_before: 0,
            error: trace::field::DecodeError::Truncated,
        });
        let mut out = Vec::new();
        write_perfetto_proto(&t, &mut out).unwrap();
        // callstack (55) { frames (1) { function_name (1): "0xb" } frames { "a+0x1" } }
        let frame = |name: &str| {
            let mut f = Message::default();
            f.string(event::FUNCTION_NAME, name);
            f
        };
        let mut callstack = Message::default();
        callstack.message(event::FRAMES, &frame("0xb"));
        callstack.message(event::FRAMES, &frame("a+0x1"));
        let mut expected = Message::default();
        expected.message(event::CALLSTACK, &callstack);
        assert_eq!(expected.0[..3], [0xba, 0x03, 16]);
        assert!(out.windows(expected.0.len()).any(|w| w == expected.0), "{out:x?}");
    }

    /// Times at or past 2^63 ns, which Perfetto's trace processor takes as negative
    /// and drops (an event, and the panic marker placed at the last time), are
    /// clamped to [`MAX_TS`], as the other outputs clamp them.
    #[test]
    fn times_are_clamped() {
        let mut t = Section { cpus: 1, ..Section::default() };
        t.events.push(Event {
            context: trace::Context::TASK,
            cpu: 0,
            ts: u64::MAX,
            id: 9,
            values: vec![],
            lost_before: 0,
            error: trace::field::DecodeError::Truncated,
        });
        let mut out = Vec::new();
        write_perfetto_proto(&t, &mut out).unwrap();
        let stamp = |ts: u64| {
            let mut m = Message::default();
            m.uint(packet::TIMESTAMP, ts);
            m.0
        };
        let has = |bytes: &[u8]| out.windows(bytes.len()).any(|w| w == bytes);
        assert!(has(&stamp(MAX_TS)), "{out:x?}");
        assert!(!has(&stamp(u64::MAX)), "{out:x?}");
    }

    #[test]
    fn each_string_is_interned_once() {
        let mut table = Table::default();
        let mut new = Message::default();
        assert_eq!(table.iid("irq", interned::EVENT_CATEGORIES, &mut new), 1);
        assert_eq!(table.iid("timer", interned::EVENT_CATEGORIES, &mut new), 2);
        let sent = new.0.len();
        assert_eq!(table.iid("irq", interned::EVENT_CATEGORIES, &mut new), 1);
        assert_eq!(new.0.len(), sent, "a known string is not sent again");
        // {1: {1: 1, 2: "irq"}}
        assert_eq!(new.0[..9], [0x0a, 0x07, 0x08, 0x01, 0x12, 0x03, b'i', b'r', b'q']);
    }
}
