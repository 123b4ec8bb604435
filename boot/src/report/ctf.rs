//! A CTF 1.8 trace directory that babeltrace2 reads: a TSDL `metadata` file and
//! one binary stream file per CPU (`stream_0`, ...), little-endian.
//!
//! Every packet has a header (magic `0xC1FC1FC1`, trace UUID, stream id) and a
//! context (`timestamp_begin`, `timestamp_end`, `content_size`, `packet_size`,
//! `events_discarded`, `cpu_id`); every event a header (32-bit id, 64-bit
//! timestamp in ns since boot) and a context with ftrace's common fields, from the
//! context its record keeps: `pid` and `comm` (the text's task column,
//! [`trace::text::Task`]), `flags` (Linux's `common_flags` bits: irqs off 0x01,
//! hardirq 0x08, NMI 0x40) and `preempt_count` (the interrupt nesting depth). Each
//! descriptor is one event class named
//! `system:name`; events without a descriptor, or whose payload did not decode
//! against theirs (too short for its fields), go to an extra class `unknown` (id
//! 65536) holding the original id and the values' bytes, so that an event takes
//! no more room than the dump gave it.
//!
//! Lost events. `events_discarded` is a per-stream running count, and babeltrace2
//! reports its increase between two packets as "discarded N events between the
//! end of the first and the end of the second". A CPU's losses are placed where
//! they happened, as far as the dump tells:
//! - an event with `lost_before` gets a packet of its own whose counter includes
//!   them (reported between the CPU's previous event and it);
//! - overruns not explained by `lost_before` were the oldest events, lost before
//!   the first one kept: the first event gets a packet of its own counting them,
//!   after an empty packet at time 0 with a zero counter (reported between 0 and
//!   the first event; babeltrace2 gives no count for a first packet's counter);
//! - the losses the dump places after the CPU's last event, and drops no loss the
//!   dump places explains, are counted in a trailing empty packet at the CPU's last
//!   event.
//!
//! The CPU's total is `max(overrun + dropped, the losses the dump places)`.

use std::fmt::Write as _;
use std::fs;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{self, ErrorKind};
use std::path::Path;

use trace::dump::{DumpDescriptor, Event, Section, Value};
use trace::event::format_file::{self, Origin};
use trace::field::FieldKind;
use trace::text::Task;

use super::MAX_TS;

/// Event class id of events whose id has no descriptor (above any `u16` id).
pub const UNKNOWN_EVENT_CLASS_ID: u32 = 0x1_0000;
/// A packet is closed once its content reaches this size.
const PACKET_TARGET_BYTES: usize = 1 << 20;
const MAGIC: u32 = 0xC1FC_1FC1;
/// Packet header (magic, uuid, stream_id) + context (5 × u64, cpu_id u32).
const PACKET_HEADER_BYTES: usize = 4 + 16 + 4 + 5 * 8 + 4;

/// Writes the trace as a CTF 1.8 trace into `dir`, which is created if missing
/// and must otherwise be empty (stale stream files would be read as part of it).
pub fn write_ctf(trace: &Section, dir: &Path) -> io::Result<()> {
    fs::create_dir_all(dir).map_err(|e| with_path(e, "cannot create CTF directory", dir))?;
    if fs::read_dir(dir).map_err(|e| with_path(e, "cannot read", dir))?.next().is_some() {
        return Err(io::Error::new(
            ErrorKind::AlreadyExists,
            format!(
                "CTF output directory {} is not empty; remove it or choose another",
                dir.display()
            ),
        ));
    }
    for (name, bytes) in ctf_files(trace) {
        let path = dir.join(name);
        fs::write(&path, bytes).map_err(|e| with_path(e, "cannot write", &path))?;
    }
    Ok(())
}

/// The files of the CTF trace, named and in memory: `metadata`, then one stream
/// file per CPU track (`stream_0`, ...).
pub fn ctf_files(trace: &Section) -> Vec<(String, Vec<u8>)> {
    let uuid = trace_uuid(trace);
    let mut files = vec![(String::from("metadata"), metadata(trace, &uuid).into_bytes())];
    let mut cpus = trace.cpu_ids();
    if cpus.is_empty() {
        cpus.push(0); // babeltrace2 wants at least one stream
    }
    files.extend(cpus.into_iter().map(|cpu| (format!("stream_{cpu}"), stream(trace, cpu, &uuid))));
    files
}

fn with_path(e: io::Error, what: &str, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}

/// A UUID derived from the trace's content (so equal dumps give equal traces),
/// with the RFC 4122 version-4 and variant bits set.
fn trace_uuid(trace: &Section) -> [u8; 16] {
    let mut bytes = [0u8; 16];
    for (half, chunk) in bytes.chunks_mut(8).enumerate() {
        let mut h = DefaultHasher::new();
        half.hash(&mut h);
        trace.instance.hash(&mut h);
        trace.buffer.hash(&mut h);
        trace.cpus.hash(&mut h);
        for d in trace.descriptors.values() {
            (d.id, &d.system, &d.name).hash(&mut h);
        }
        for e in &trace.events {
            (e.cpu, e.ts, e.id, e.lost_before).hash(&mut h);
        }
        chunk.copy_from_slice(&h.finish().to_le_bytes());
    }
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    bytes
}

fn uuid_string(u: &[u8; 16]) -> String {
    let mut s = String::new();
    for (i, b) in u.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// A TSDL string literal: quotes and backslashes escaped, control characters
/// replaced by spaces.
fn tsdl_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// TSDL field names of a descriptor: `_` + its unique C name
/// ([`format_file::unique_c_names`], as trace.dat's but for the common fields' names,
/// which CTF keeps in a context of their own; babeltrace2 strips the leading `_`,
/// which also keeps names clear of TSDL keywords). babeltrace2 refuses the whole
/// trace when a name, stripped or not, is another's stripped (`_a` beside `a`, as
/// `__a` and `_a`): a C name that is one with `_` before it, or without, takes
/// `_2`, `_3`, ... after it.
fn field_names(d: &DumpDescriptor) -> Vec<String> {
    let names = format_file::unique_c_names(d.fields.iter().map(|f| f.name.as_str()), &[]);
    // Every name kept, and each with `_` before it.
    let mut taken = std::collections::BTreeSet::new();
    let mut out = Vec::with_capacity(names.len());
    for base in names {
        let mut name = base.clone();
        let mut n = 2u64;
        while taken.contains(&name) || taken.contains(&format!("_{name}")) {
            name = format!("{base}_{n}");
            n += 1;
        }
        let written = format!("_{name}");
        taken.insert(name);
        taken.insert(written.clone());
        out.push(written);
    }
    out
}

fn tsdl_type(kind: FieldKind) -> &'static str {
    match kind {
        FieldKind::U8 => "uint8_t",
        FieldKind::U16 => "uint16_t",
        FieldKind::U32 => "uint32_t",
        FieldKind::U64 => "uint64_t",
        FieldKind::I8 => "int8_t",
        FieldKind::I16 => "int16_t",
        FieldKind::I32 => "int32_t",
        FieldKind::I64 => "int64_t",
        FieldKind::Bool => "uint8_t",
        FieldKind::Char => "uint32_t",
        FieldKind::Bytes(_) => "byte_t",
        FieldKind::Str => "string",
    }
}

fn metadata(trace: &Section, uuid: &[u8; 16]) -> String {
    let uuid = uuid_string(uuid);
    let mut m = String::from("/* CTF 1.8 */\n\n");
    for (bits, signed) in [(8, false), (16, false), (32, false), (64, false)].into_iter().chain([
        (8, true),
        (16, true),
        (32, true),
        (64, true),
    ]) {
        let name = if signed { format!("int{bits}_t") } else { format!("uint{bits}_t") };
        let _ = writeln!(
            m,
            "typealias integer {{ size = {bits}; align = 8; signed = {signed}; }} := {name};"
        );
    }
    m.push_str(
        "typealias integer { size = 8; align = 8; signed = false; base = 16; } := byte_t;\n\n",
    );
    let _ = write!(
        m,
        "trace {{\n\
         \tmajor = 1;\n\
         \tminor = 8;\n\
         \tuuid = \"{uuid}\";\n\
         \tbyte_order = le;\n\
         \tpacket.header := struct {{\n\
         \t\tuint32_t magic;\n\
         \t\tuint8_t uuid[16];\n\
         \t\tuint32_t stream_id;\n\
         \t}};\n\
         }};\n\n"
    );
    m.push_str("env {\n\tdomain = \"kernel\";\n\ttracer_name = \"flight-recorder\";\n");
    let _ = writeln!(m, "\tinstance = {};", tsdl_string(trace.instance.as_str()));
    let _ = writeln!(m, "\tbuffer = {};", tsdl_string(trace.buffer.name()));
    let _ = writeln!(m, "\tcpus = {};", trace.cpus);
    if let Some(p) = &trace.panic {
        let _ = writeln!(m, "\tpanic_cpu = {};", p.cpu);
        let _ = writeln!(m, "\tpanic_location = {};", tsdl_string(&p.location));
        let _ = writeln!(m, "\tpanic_message = {};", tsdl_string(&p.message));
        if let Some(nested) = &p.nested {
            let _ = writeln!(m, "\tnested_panic_location = {};", tsdl_string(&nested.location));
            let _ = writeln!(m, "\tnested_panic_message = {};", tsdl_string(&nested.message));
        }
        if let Some(other) = &p.other {
            let _ = writeln!(m, "\tother_panic_cpu = {};", other.cpu);
            let _ = writeln!(m, "\tother_panic_location = {};", tsdl_string(&other.location));
            let _ = writeln!(m, "\tother_panic_message = {};", tsdl_string(&other.message));
        }
    }
    m.push_str("};\n\n");
    let _ = write!(
        m,
        "clock {{\n\
         \tname = \"monotonic\";\n\
         \tuuid = \"{uuid}\";\n\
         \tdescription = \"nanoseconds since boot\";\n\
         \tfreq = 1000000000;\n\
         \toffset = 0;\n\
         }};\n\n\
         typealias integer {{ size = 64; align = 8; signed = false; map = clock.monotonic.value; }} \
         := uint64_clock_monotonic_t;\n\n\
         stream {{\n\
         \tid = 0;\n\
         \tpacket.context := struct {{\n\
         \t\tuint64_clock_monotonic_t timestamp_begin;\n\
         \t\tuint64_clock_monotonic_t timestamp_end;\n\
         \t\tuint64_t content_size;\n\
         \t\tuint64_t packet_size;\n\
         \t\tuint64_t events_discarded;\n\
         \t\tuint32_t cpu_id;\n\
         \t}};\n\
         \tevent.header := struct {{\n\
         \t\tuint32_t id;\n\
         \t\tuint64_clock_monotonic_t timestamp;\n\
         \t}};\n\
         \tevent.context := struct {{\n\
         \t\tint32_t pid;\n\
         \t\tstring comm;\n\
         \t\tbyte_t flags;\n\
         \t\tuint8_t preempt_count;\n\
         \t}};\n\
         }};\n\n"
    );
    // Keyed by the map's id, the one events are looked up (and written) with.
    for (id, d) in trace.descriptors.iter() {
        let _ = write!(
            m,
            "event {{\n\tname = {};\n\tid = {id};\n\tstream_id = 0;\n\tfields := struct {{\n",
            tsdl_string(&d.full_name()),
        );
        for (f, name) in d.fields.iter().zip(field_names(d)) {
            match f.kind {
                FieldKind::Bytes(n) => {
                    let _ = writeln!(m, "\t\tbyte_t {name}[{n}];");
                }
                k => {
                    let _ = writeln!(m, "\t\t{} {name};", tsdl_type(k));
                }
            }
        }
        m.push_str("\t};\n};\n\n");
    }
    if trace.events.iter().any(|e| class(trace, e).is_none()) {
        let _ = write!(
            m,
            "event {{\n\
             \tname = \"unknown\";\n\
             \tid = {UNKNOWN_EVENT_CLASS_ID};\n\
             \tstream_id = 0;\n\
             \tfields := struct {{\n\
             \t\tuint16_t _event_id;\n\
             \t\tuint32_t _length;\n\
             \t\tbyte_t _data[_length];\n\
             \t}};\n\
             }};\n\n"
        );
    }
    m
}

/// The value as the low bits of a 64-bit integer (two's complement for signed).
fn as_bits(v: Option<&Value>) -> u64 {
    if let Some(n) = v.and_then(Value::integer) {
        return n;
    }
    match v {
        Some(Value::Bytes(b)) => {
            let mut le = [0u8; 8];
            let n = b.len().min(8);
            le[..n].copy_from_slice(&b[..n]);
            u64::from_le_bytes(le)
        }
        _ => 0,
    }
}

/// Appends one event's fields in the layout the metadata declares. Values that
/// do not match their field's kind are coerced, so a malformed event still yields
/// a readable stream.
fn encode_fields(buf: &mut Vec<u8>, d: &DumpDescriptor, values: &[Value]) {
    for (i, f) in d.fields.iter().enumerate() {
        let v = values.get(i);
        let bits = as_bits(v);
        match f.kind {
            FieldKind::U8 | FieldKind::I8 => buf.push(bits as u8),
            FieldKind::U16 | FieldKind::I16 => buf.extend_from_slice(&(bits as u16).to_le_bytes()),
            FieldKind::U32 | FieldKind::I32 | FieldKind::Char => {
                buf.extend_from_slice(&(bits as u32).to_le_bytes());
            }
            FieldKind::U64 | FieldKind::I64 => buf.extend_from_slice(&bits.to_le_bytes()),
            FieldKind::Bool => buf.push(u8::from(bits != 0)),
            FieldKind::Bytes(n) => {
                let raw = v.map(Value::raw_bytes).unwrap_or_default();
                let start = buf.len();
                buf.extend(raw.iter().take(usize::from(n)));
                buf.resize(start + usize::from(n), 0);
            }
            FieldKind::Str => {
                let s = match v {
                    Some(Value::Str(s)) => s.clone(),
                    Some(Value::Bytes(b)) => String::from_utf8_lossy(b).into_owned(),
                    _ => String::new(),
                };
                // A NUL would end the string early and desynchronise the stream.
                buf.extend(s.bytes().filter(|&b| b != 0));
                buf.push(0);
            }
        }
    }
}

/// Appends an event's header (its class `id`, `ts`) and its context (the common
/// fields of where it was written).
fn encode_head(buf: &mut Vec<u8>, id: u32, ev: &Event, ts: u64) {
    buf.extend_from_slice(&id.to_le_bytes());
    buf.extend_from_slice(&ts.to_le_bytes());
    let origin = Origin { context: ev.context, cpu: ev.cpu };
    buf.extend_from_slice(&origin.pid().to_le_bytes());
    buf.extend_from_slice(Task::of(ev.context, ev.cpu).to_string().as_bytes());
    buf.push(0);
    buf.extend_from_slice(&[origin.flags(), origin.preempt_count()]);
}

/// The event class `ev` is written in: its descriptor, unless its payload decoded
/// to fewer values than the descriptor has fields (then `unknown`).
fn class<'a>(trace: &'a Section, ev: &Event) -> Option<&'a DumpDescriptor> {
    trace.descriptor(ev.id).filter(|d| ev.values.len() >= d.fields.len())
}

fn encode_event(buf: &mut Vec<u8>, trace: &Section, ev: &Event, ts: u64) {
    match class(trace, ev) {
        Some(d) => {
            encode_head(buf, u32::from(ev.id), ev, ts);
            encode_fields(buf, d, &ev.values);
        }
        None => {
            let data: Vec<u8> = ev.values.iter().flat_map(Value::raw_bytes).collect();
            let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
            encode_head(buf, UNKNOWN_EVENT_CLASS_ID, ev, ts);
            buf.extend_from_slice(&ev.id.to_le_bytes());
            buf.extend_from_slice(&len.to_le_bytes());
            buf.extend(data.iter().take(len as usize));
        }
    }
}

/// One packet under construction.
struct Packet {
    begin: u64,
    end: u64,
    body: Vec<u8>,
}

/// Writes one stream's packets.
struct StreamWriter<'a> {
    out: Vec<u8>,
    uuid: &'a [u8; 16],
    cpu: usize,
    first: bool,
}

impl StreamWriter<'_> {
    /// Appends a packet whose `events_discarded` snapshot is `discarded`.
    ///
    /// babeltrace2 reports a nonzero counter in a stream's first packet only as
    /// "may have discarded events", without the count: such a packet is preceded
    /// by an empty one at time 0 with a zero counter, so the count is reported.
    fn packet(&mut self, p: &Packet, discarded: u64) {
        if self.first && discarded > 0 {
            self.raw_packet(&Packet { begin: 0, end: 0, body: Vec::new() }, 0);
        }
        self.first = false;
        self.raw_packet(p, discarded);
    }

    fn raw_packet(&mut self, p: &Packet, discarded: u64) {
        let bits = ((PACKET_HEADER_BYTES + p.body.len()) as u64) * 8;
        let out = &mut self.out;
        out.extend_from_slice(&MAGIC.to_le_bytes());
        out.extend_from_slice(self.uuid);
        out.extend_from_slice(&0u32.to_le_bytes()); // stream_id
        out.extend_from_slice(&p.begin.to_le_bytes());
        out.extend_from_slice(&p.end.to_le_bytes());
        out.extend_from_slice(&bits.to_le_bytes()); // content_size
        out.extend_from_slice(&bits.to_le_bytes()); // packet_size
        // babeltrace2 takes an all-ones counter for "no counter" (and asserts).
        out.extend_from_slice(&discarded.min(u64::MAX - 1).to_le_bytes());
        out.extend_from_slice(&(self.cpu as u32).to_le_bytes());
        out.extend_from_slice(&p.body);
    }
}

/// The stream file of one CPU.
///
/// Packets are cut so that babeltrace2's discarded-events ranges are tight: an
/// event with `lost_before` (and the first event, when overruns precede it) is a
/// packet of its own, so its losses are reported between the previous event and
/// it.
fn stream(trace: &Section, cpu: usize, uuid: &[u8; 16]) -> Vec<u8> {
    let stats = trace.cpu_stats(cpu);
    let events: Vec<&Event> = trace.events.iter().filter(|e| e.cpu == cpu).collect();
    // The losses the dump places: before events, and after the CPU's last one.
    let after = trace.lost_after.get(&cpu).copied().unwrap_or(0);
    let reported = events.iter().map(|e| e.lost_before).fold(0u64, u64::saturating_add);
    let placed = reported.saturating_add(after);
    let head = stats.overrun.saturating_sub(placed);
    let tail =
        after.saturating_add(stats.dropped.saturating_sub(placed.saturating_sub(stats.overrun)));

    let mut w = StreamWriter { out: Vec::new(), uuid, cpu, first: true };
    let mut discarded = head;
    let mut packet: Option<Packet> = None;
    let mut last_ts = 0u64;
    for (i, ev) in events.iter().enumerate() {
        // babeltrace2 needs time to move forward within a stream, and times it
        // can express as signed nanoseconds (all-ones means "no time" to it).
        let ts = ev.ts.min(MAX_TS).max(last_ts);
        last_ts = ts;
        let full = packet.as_ref().is_some_and(|p| p.body.len() >= PACKET_TARGET_BYTES);
        if (ev.lost_before > 0 || full)
            && let Some(p) = packet.take()
        {
            w.packet(&p, discarded);
        }
        discarded = discarded.saturating_add(ev.lost_before);
        let p = packet.get_or_insert_with(|| Packet { begin: ts, end: ts, body: Vec::new() });
        p.end = ts;
        encode_event(&mut p.body, trace, ev, ts);
        if (ev.lost_before > 0 || (i == 0 && head > 0))
            && let Some(p) = packet.take()
        {
            w.packet(&p, discarded);
        }
    }
    if let Some(p) = packet.take() {
        w.packet(&p, discarded);
    }
    if tail > 0 || w.first {
        // Drops after the last kept event; or a CPU without events.
        w.packet(
            &Packet { begin: last_ts, end: last_ts, body: Vec::new() },
            discarded.saturating_add(tail),
        );
    }
    w.out
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::process::{Command, Output};
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::report::sample::{sample, task_event};
    use trace::dump::{DumpField, PanicReport};

    /// A fresh, unique path under the system temp directory, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> TempDir {
            static N: AtomicUsize = AtomicUsize::new(0);
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            let n = N.fetch_add(1, Ordering::Relaxed);
            let name = format!("boot-report-ctf-{tag}-{}-{nanos}-{n}", std::process::id());
            TempDir(std::env::temp_dir().join(name))
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn babeltrace2(args: &[&str], dir: &Path) -> Output {
        match Command::new("babeltrace2").args(args).arg(dir).output() {
            Ok(out) => out,
            Err(e) if e.kind() == ErrorKind::NotFound => panic!(
                "babeltrace2 is not installed (not on PATH): boot/setup.sh installs it \
                 (Debian package babeltrace2)"
            ),
            Err(e) => panic!("cannot run babeltrace2: {e}"),
        }
    }

    fn text(bytes: &[u8]) -> String {
        String::from_utf8_lossy(bytes).into_owned()
    }

    /// The `(stream, count, from, to)` of babeltrace2's discarded-events notices;
    /// panics on any other stderr line.
    fn discarded_notices(stderr: &str) -> Vec<(String, u64, String, String)> {
        stderr
            .lines()
            .map(|l| {
                let rest = l
                    .strip_prefix("WARNING: Tracer discarded ")
                    .unwrap_or_else(|| panic!("unexpected babeltrace2 stderr line: {l}"));
                let (count, rest) = rest.split_once(" events between [").unwrap();
                let (from, rest) = rest.split_once("] and [").unwrap();
                let (to, rest) = rest.split_once(']').unwrap();
                let stream = rest.split("within stream \"").nth(1).unwrap();
                let stream = stream.split('"').next().unwrap();
                let stream = Path::new(stream).file_name().unwrap().to_string_lossy().into_owned();
                (stream, count.parse().unwrap(), from.to_string(), to.to_string())
            })
            .collect()
    }

    #[test]
    fn babeltrace2_reads_events_fields_and_discarded_counts() {
        let dir = TempDir::new("sample");
        let trace = sample();
        write_ctf(&trace, &dir.0).unwrap();
        let out = babeltrace2(&["--clock-seconds", "--no-delta"], &dir.0);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert!(out.status.success(), "babeltrace2 failed: {stderr}");

        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(lines.len(), trace.events.len(), "{stdout}");
        // Same order and names as the dump.
        for (line, ev) in lines.iter().zip(&trace.events) {
            let name = trace.event_name(ev.id);
            assert!(line.contains(&format!("] {name}: {{ cpu_id = {} }}", ev.cpu)), "{line}");
        }
        // Each event's context: ftrace's common fields, here a handler's (irqs off,
        // hardirq, one deep) and the idle loop's.
        let (irq, idle) = (
            r#"{ pid = 0, comm = "<irq>", flags = 0x9, preempt_count = 1 }"#,
            r#"{ pid = 0, comm = "<idle>", flags = 0x0, preempt_count = 0 }"#,
        );
        assert_eq!(
            lines[0],
            format!(
                "[1.000000500] irq:irq_handler_entry: {{ cpu_id = 0 }}, {irq}, {{ vector = 48, error = 2 }}"
            )
        );
        assert_eq!(
            lines[2],
            format!(
                "[1.500000000] net:packet: {{ cpu_id = 1 }}, {idle}, {{ len = 1500, head = [ [0] = \
                 0xDE, [1] = 0xAD, [2] = 0xBE, [3] = 0xEF ], delta = -42 }}"
            )
        );
        // 'λ' is U+03BB = 955; bool true is 1.
        assert_eq!(
            lines[1],
            format!(
                r#"[1.000000500] demo:message: {{ cpu_id = 1 }}, {idle}, {{ pid = -7, comm = "init \"x\"", ok = 1, c = 955 }}"#
            )
        );
        assert_eq!(
            lines[4],
            format!("[12.345678901] irq:irq_handler_exit: {{ cpu_id = 0 }}, {irq}, {{ }}")
        );

        // The only stderr lines are the discarded-event notices, with the counts of
        // the dump: CPU 0's 5 overruns before its first event, CPU 1's 17 reported
        // before net:packet, and its 4 drops after its last event.
        assert_eq!(
            discarded_notices(&stderr),
            [
                ("stream_0".to_string(), 5, "0.000000000".to_string(), "1.000000500".to_string()),
                ("stream_1".to_string(), 17, "1.000000500".to_string(), "1.500000000".to_string()),
                ("stream_1".to_string(), 4, "1.500000000".to_string(), "1.500000000".to_string()),
            ]
        );
    }

    /// Losses the dump places after a CPU's last event are counted there, once: of
    /// CPU 0's 5 overruns, 3 come after its last event and the other 2 before its
    /// first (they were counted at both ends, 8 in all); CPU 1's 4 drops after its
    /// last event are those the dump places there.
    #[test]
    fn losses_after_the_last_event_are_counted_there_once() {
        let dir = TempDir::new("after");
        let mut trace = sample();
        trace.lost_after.insert(0, 3);
        trace.lost_after.insert(1, 4);
        write_ctf(&trace, &dir.0).unwrap();
        let out = babeltrace2(&["--clock-seconds", "--no-delta"], &dir.0);
        let stderr = text(&out.stderr);
        assert!(out.status.success(), "babeltrace2 failed: {stderr}");
        let notices = discarded_notices(&stderr);
        let count = |stream: &str| -> Vec<u64> {
            notices.iter().filter(|n| n.0 == stream).map(|n| n.1).collect()
        };
        assert_eq!(count("stream_0"), [2, 3], "{notices:?}");
        assert_eq!(count("stream_1"), [17, 4], "{notices:?}");
    }

    #[test]
    fn babeltrace2_details_show_no_warnings() {
        let dir = TempDir::new("details");
        write_ctf(&sample(), &dir.0).unwrap();
        let out = babeltrace2(&["-c", "sink.text.details"], &dir.0);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert!(out.status.success(), "babeltrace2 failed: {stderr}");
        assert_eq!(stderr, "", "babeltrace2 warned");
        assert_eq!(stdout.matches("\nEvent `").count(), 5);
        let discarded: u64 = stdout
            .lines()
            .filter_map(|l| l.strip_prefix("Discarded events ("))
            .map(|l| l.trim_end_matches(" events)").parse::<u64>().unwrap())
            .sum();
        assert_eq!(discarded, 5 + 17 + 4);
        assert!(stdout.contains("Frequency (Hz): 1,000,000,000"), "{stdout}");
        assert!(stdout.contains("Offset (s): 0\n"));
        assert!(stdout.contains(r#"panic_message: boom "quoted" \ back"#));
        assert!(stdout.contains("instance: top"));
        let metadata = fs::read_to_string(dir.0.join("metadata")).unwrap();
        assert!(metadata.starts_with("/* CTF 1.8 */\n"));
    }

    #[test]
    fn unknown_ids_and_malformed_events_stay_readable() {
        let mut t = sample();
        let odd = DumpDescriptor {
            kind: trace::event::DescriptorKind::Event,
            id: 7,
            system: "odd".into(),
            name: "names".into(),
            format: String::new(),
            fields: ["a-b", "a_b", "", "struct", "_a", "a", "__"]
                .iter()
                .map(|n| DumpField { name: n.to_string(), kind: FieldKind::U8 })
                .collect(),
            timeline: Default::default(),
        };
        std::sync::Arc::make_mut(&mut t.descriptors).insert(7, odd);
        // A descriptor whose own id disagrees with its key: the key wins.
        std::sync::Arc::make_mut(&mut t.descriptors).get_mut(&4).unwrap().id = 1;
        let ev = |cpu, ts, id, values| task_event(cpu, ts, id, values);
        t.events.extend([
            ev(0, 13_000_000_000, 99, vec![Value::Bytes(vec![1, 2, 3])]),
            // Wrong kinds, a NUL inside a string.
            ev(0, 13_000_000_001, 1, vec![Value::Str("x".into()), Value::Bool(true)]),
            ev(
                1,
                13_000_000_002,
                2,
                vec![
                    Value::Signed(1),
                    Value::Str("a\0b".into()),
                    Value::Str("y".into()),
                    Value::Unsigned(0),
                ],
            ),
            ev(
                1,
                13_000_000_003,
                3,
                vec![Value::Bytes(vec![9; 10]), Value::Bytes(vec![1]), Value::Str("z".into())],
            ),
            ev(0, 13_000_000_004, 7, [1, 2, 0, 0, 5, 6, 7].map(Value::Unsigned).to_vec()),
            // A payload that decoded to fewer values than its descriptor has fields.
            ev(1, 13_000_000_007, 1, vec![Value::Unsigned(0x105)]),
            // An NMI that struck a handler with interrupts on.
            Event {
                context: trace::Context::new(trace::Activity::Nmi { in_irq: true }, false),
                ..ev(2, 13_000_000_006, 4, vec![])
            },
            // A CPU beyond `cpus`, and time going backwards on CPU 0.
            ev(3, 13_000_000_005, 4, vec![]),
            ev(0, 12_000_000_000, 4, vec![]),
            // Extremes: babeltrace2 takes all-ones as "unset" and cannot place
            // times near 2^63 ns; both are clamped.
            Event { lost_before: u64::MAX, ..ev(1, u64::MAX, 4, vec![]) },
        ]);
        t.stats[0].dropped = u64::MAX;
        t.panic = Some(PanicReport {
            cpu: 0,
            message: "multi\nline\t\"msg\"".into(),
            location: "x".into(),
            nested: Some(trace::dump::NestedPanic {
                message: "again \"quoted\"".into(),
                location: "y".into(),
            }),
            other: Some(trace::dump::OtherPanicReport {
                cpu: 1,
                message: "back\\slash".into(),
                location: "z".into(),
            }),
        });
        let dir = TempDir::new("unknown");
        write_ctf(&t, &dir.0).unwrap();
        assert!(dir.0.join("stream_3").exists());

        let out = babeltrace2(&["-c", "sink.text.details"], &dir.0);
        assert!(out.status.success(), "babeltrace2 failed: {}", text(&out.stderr));
        assert_eq!(text(&out.stderr), "", "babeltrace2 warned");
        let details = text(&out.stdout);
        for entry in ["other_panic_cpu: 1", r#"other_panic_message: back\slash"#] {
            assert!(details.contains(entry), "{entry}: {details}");
        }

        let out = babeltrace2(&["--clock-seconds", "--no-delta"], &dir.0);
        let stdout = text(&out.stdout);
        assert!(out.status.success());
        assert_eq!(stdout.lines().count(), t.events.len(), "{stdout}");
        let find = |needle: &str| {
            stdout
                .lines()
                .find(|l| l.contains(needle))
                .unwrap_or_else(|| panic!("no {needle} in {stdout}"))
        };
        assert!(find("unknown:").ends_with(
            "{ event_id = 99, length = 3, data = [ [0] = 0x1, [1] = 0x2, [2] = 0x3 ] }"
        ));
        assert!(find("[13.000000007]").ends_with(
            "{ event_id = 1, length = 8, data = [ [0] = 0x5, [1] = 0x1, [2] = 0x0, [3] = 0x0, \
             [4] = 0x0, [5] = 0x0, [6] = 0x0, [7] = 0x0 ] }"
        ));
        assert!(find("[13.000000001]").ends_with("{ vector = 0, error = 1 }"));
        assert!(find("[13.000000002]").ends_with(r#"{ pid = 1, comm = "ab", ok = 0, c = 0 }"#));
        assert!(find("[13.000000003]").ends_with(
            "{ len = 2313, head = [ [0] = 0x1, [1] = 0x0, [2] = 0x0, [3] = 0x0 ], delta = 0 }"
        ));
        assert!(find("odd:names").ends_with(
            r#"{ pid = 1, comm = "shell", flags = 0x0, preempt_count = 0 }, { a_b_2 = 1, a_b = 2, _ = 0, struct = 0, _a = 5, a_2 = 6, ___2 = 7 }"#
        ));
        assert!(find("{ cpu_id = 2 }").contains(r#"{ pid = 0, comm = "<nmi>", flags = 0x48, "#));
        assert!(find("{ cpu_id = 3 }").contains("irq:irq_handler_exit"));
        // 2^62 ns, the latest time written.
        assert!(stdout.contains("[4611686018.427387904] irq:irq_handler_exit: { cpu_id = 1 }"));
        // The backwards timestamp is clamped to the CPU's previous one.
        assert_eq!(stdout.matches("[13.000000004] ").count(), 2, "{stdout}");
    }

    #[test]
    fn empty_trace_is_readable() {
        let dir = TempDir::new("empty");
        write_ctf(&Section::default(), &dir.0).unwrap();
        assert!(dir.0.join("stream_0").exists());
        let out = babeltrace2(&["-c", "sink.text.details"], &dir.0);
        assert!(out.status.success(), "babeltrace2 failed: {}", text(&out.stderr));
        assert_eq!(text(&out.stderr), "");
        assert_eq!(text(&out.stdout).matches("\nEvent `").count(), 0);
    }

    #[test]
    fn refuses_a_non_empty_directory_and_leaves_it_alone() {
        let dir = TempDir::new("busy");
        fs::create_dir_all(&dir.0).unwrap();
        fs::write(dir.0.join("stream_9"), b"old").unwrap();
        let err = write_ctf(&sample(), &dir.0).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::AlreadyExists);
        assert!(err.to_string().contains("is not empty"), "{err}");
        let names: Vec<_> = fs::read_dir(&dir.0).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["stream_9"]);
    }
}
