//! Writing a dump: the writer takes no allocation and no lock, so it can run on the panic path.

use super::codec::{base64_encode, crc32, put_varint, zigzag};
use super::{BEGIN, BufferKind, CHUNK_BYTES, END, VERSION, kind};
use crate::event::{DescriptorKind, EventDescriptor, Timeline};
use crate::field::{Decoder, FieldKind, Value};
use crate::ring::Clock;
use crate::ring::reader::RecordRef;
use crate::ring::stats::RingStats;

/// Most bytes one item takes: a record with the largest payload and its framing.
const ITEM_BYTES: usize = CHUNK_BYTES - 8;

/// Builds one item's body.
struct Item {
    bytes: [u8; ITEM_BYTES],
    len: usize,
    overflow: bool,
}

impl Item {
    fn new() -> Self {
        Item { bytes: [0; ITEM_BYTES], len: 0, overflow: false }
    }

    fn put(&mut self, bytes: &[u8]) {
        match self.bytes.get_mut(self.len..self.len + bytes.len()) {
            Some(room) => {
                room.copy_from_slice(bytes);
                self.len += bytes.len();
            }
            None => self.overflow = true,
        }
    }

    fn varint(&mut self, v: u64) {
        let mut buf = [0u8; 10];
        let n = put_varint(&mut buf, v).unwrap_or(0);
        self.put(&buf[..n]);
    }

    fn str(&mut self, s: &str) {
        self.varint(s.len() as u64);
        self.put(s.as_bytes());
    }
}

/// A panic, as a dump's header carries it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PanicHeader<'a> {
    /// The panicking CPU.
    pub cpu: usize,
    /// The panic's message.
    pub message: &'a str,
    /// Where it panicked, `file:line:column`.
    pub location: &'a str,
    /// A panic on the same CPU while this one was being reported: its message and
    /// location.
    pub nested: Option<(&'a str, &'a str)>,
    /// A panic on another CPU while this one was under way (the first such).
    pub other: Option<OtherPanic<'a>>,
}

/// A panic on another CPU than the one that reports, while its panic was under way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OtherPanic<'a> {
    /// The CPU.
    pub cpu: usize,
    /// Its message.
    pub message: &'a str,
    /// Where it panicked, `file:line:column`.
    pub location: &'a str,
}

/// The longest start of `text` of at most `len` bytes that ends on a character.
fn cut(text: &str, len: usize) -> &str {
    let mut end = text.len().min(len);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Writes a dump, chunk by chunk, through `out` (called with whole lines).
pub struct DumpWriter<W: FnMut(&str)> {
    out: W,
    chunk: [u8; CHUNK_BYTES],
    len: usize,
    seq: u64,
    /// The open records item: instance, timestamp of its last record, where it
    /// starts in the chunk.
    run: Option<(u64, u64, usize)>,
}

impl<W: FnMut(&str)> DumpWriter<W> {
    /// Starts a dump: writes the begin line.
    pub fn begin(mut out: W) -> Self {
        out(BEGIN);
        DumpWriter { out, chunk: [0; CHUNK_BYTES], len: 0, seq: 0, run: None }
    }

    /// Writes the pending partial chunk now (a stream does so when it waits for
    /// events, so they reach the reader promptly).
    pub fn flush(&mut self) {
        self.close_run();
        if self.len == 0 {
            return;
        }
        let mut line = [0u8; line_bytes(CHUNK_BYTES)];
        (self.out)(write_chunk(self.seq, &self.chunk[..self.len], &mut line));
        self.seq += 1;
        self.len = 0;
    }

    /// Appends a finished item (kind, length, body), starting a new chunk if needed.
    fn item(&mut self, kind: u8, body: &Item) {
        self.close_run();
        if body.overflow {
            return;
        }
        let mut head = [0u8; 11];
        head[0] = kind;
        let n = 1 + put_varint(&mut head[1..], body.len as u64).unwrap_or(0);
        if self.len + n + body.len > CHUNK_BYTES {
            self.flush();
        }
        self.chunk[self.len..self.len + n].copy_from_slice(&head[..n]);
        self.chunk[self.len + n..self.len + n + body.len].copy_from_slice(&body.bytes[..body.len]);
        self.len += n + body.len;
    }

    /// Writes the header: CPU count, for a panic where it happened (and a panic
    /// while reporting it), and the fingerprint of the kernel's symbol table
    /// ([`crate::symtab::SymbolTable::fingerprint`]) if it has one; then, in a chunk
    /// of its own, another CPU's panic, if the panic has one.
    pub fn header(&mut self, cpus: usize, panic: Option<PanicHeader<'_>>, symbols: Option<u64>) {
        let mut item = Item::new();
        item.varint(VERSION);
        item.varint(cpus as u64);
        // The locations keep at most a quarter of the item each; the messages,
        // which may be long, what fits beside them, the lengths (10 bytes each at
        // most), the flags and the fingerprint (11 bytes), the first message first,
        // the nested one at least a quarter of it.
        let mut messages = ("", "");
        let mut locations = ("", "");
        if let Some(panic) = &panic {
            let (nested, nested_location) = panic.nested.unwrap_or_default();
            locations = (cut(panic.location, ITEM_BYTES / 4), cut(nested_location, ITEM_BYTES / 4));
            let fixed = item.len + 3 + 4 * 10 + 11 + locations.0.len() + locations.1.len();
            let room = ITEM_BYTES.saturating_sub(fixed);
            let first = cut(panic.message, room - nested.len().min(room / 4));
            messages = (first, cut(nested, room - first.len()));
        }
        match &panic {
            None => item.varint(0),
            Some(panic) => {
                item.varint(1);
                item.varint(panic.cpu as u64);
                item.str(messages.0);
                item.str(locations.0);
            }
        }
        match symbols {
            None => item.varint(0),
            Some(fingerprint) => {
                item.varint(1);
                item.varint(fingerprint);
            }
        }
        match panic.and_then(|p| p.nested) {
            None => item.varint(0),
            Some(_) => {
                item.varint(1);
                item.str(messages.1);
                item.str(locations.1);
            }
        }
        self.item(kind::HEADER, &item);
        if let Some(other) = panic.and_then(|p| p.other) {
            let mut item = Item::new();
            item.varint(other.cpu as u64);
            let location = cut(other.location, ITEM_BYTES / 4);
            // The CPU and the two lengths take 30 bytes at most.
            item.str(cut(other.message, ITEM_BYTES - 30 - location.len()));
            item.str(location);
            // Alone in its chunk: a reader that does not know the item loses only it.
            self.flush();
            self.item(kind::OTHER_PANIC, &item);
            self.flush();
        }
    }

    /// Writes an event descriptor, so the dump describes its own records.
    pub fn descriptor(&mut self, d: &EventDescriptor) {
        self.descriptor_as(d.id(), d);
    }

    /// Writes a descriptor under record id `id` (a tracer's ids are `d.id()`).
    pub fn descriptor_as(&mut self, id: u16, d: &EventDescriptor) {
        let mut item = Item::new();
        item.varint(u64::from(id));
        item.varint(match d.kind {
            DescriptorKind::Event => 0,
            DescriptorKind::Printk => 1,
        });
        item.str(d.system);
        item.str(d.name);
        item.str(d.format);
        item.varint(d.fields.len() as u64);
        for field in d.fields {
            item.str(field.name);
            item.varint(u64::from(field.kind.tag()));
            if let FieldKind::Bytes(n) = field.kind {
                item.varint(u64::from(n));
            }
        }
        match d.timeline {
            Timeline::Instant => item.varint(0),
            Timeline::Begin { label, key } | Timeline::End { label, key } => {
                item.varint(if matches!(d.timeline, Timeline::Begin { .. }) { 1 } else { 2 });
                item.str(label);
                item.str(key.unwrap_or(""));
            }
            Timeline::Counter => item.varint(3),
            Timeline::Span { label, duration } => {
                item.varint(4);
                item.str(label);
                item.str(duration);
            }
        }
        self.item(kind::DESCRIPTOR, &item);
    }

    /// Makes section number `index` of this dump instance `name`'s live buffer, its
    /// timestamps from the local clock.
    pub fn instance(&mut self, index: usize, name: &str) {
        self.section(index, name, BufferKind::Live, Clock::Local);
    }

    /// Makes section number `index` of this dump buffer `buffer` of instance `name`,
    /// its timestamps from `clock`.
    pub fn section(&mut self, index: usize, name: &str, buffer: BufferKind, clock: Clock) {
        let mut item = Item::new();
        item.varint(index as u64);
        item.str(name);
        item.varint(buffer.code());
        item.varint(clock.code());
        self.item(kind::SECTION, &item);
    }

    /// Writes one CPU's statistics for section `instance`.
    pub fn cpu_stats(&mut self, instance: usize, cpu: usize, s: &RingStats) {
        let mut item = Item::new();
        for v in [
            instance as u64,
            cpu as u64,
            s.written,
            s.entries,
            s.overrun,
            s.dropped,
            s.read,
            s.commit_overrun,
            s.stopped,
            s.unreadable,
            s.unpublished,
        ] {
            item.varint(v);
        }
        self.item(kind::CPU_STATS, &item);
    }

    /// Notes that `count` older records of a section were left out (the cap).
    pub fn skipped(&mut self, instance: usize, count: u64) {
        let mut item = Item::new();
        item.varint(instance as u64);
        item.varint(count);
        self.item(kind::SKIPPED, &item);
    }

    fn close_run(&mut self) {
        if let Some((_, _, start)) = self.run.take() {
            // The item's length is a fixed two-byte varint written when it opened.
            let len = self.len - start - 3;
            self.chunk[start + 1] = (len & 0x7f) as u8 | 0x80;
            self.chunk[start + 2] = (len >> 7) as u8;
        }
    }

    /// Writes that `count` events of CPU `cpu` in section `instance` were lost
    /// (overwritten before a consuming reader got them); a zero count writes nothing.
    pub fn lost(&mut self, instance: usize, cpu: usize, count: u64) {
        if count == 0 {
            return;
        }
        let mut item = Item::new();
        item.varint(instance as u64);
        item.varint(cpu as u64);
        item.varint(count);
        self.item(kind::LOST, &item);
    }

    /// Writes one record of section `instance` (its `lost` count is not kept: see
    /// [`DumpWriter::lost`]);
    /// `descriptor` (if known) lets its payload be stored compactly. A record too
    /// large for a chunk is left out.
    pub fn record(
        &mut self,
        instance: usize,
        record: &RecordRef<'_>,
        descriptor: Option<&EventDescriptor>,
    ) {
        let &RecordRef { cpu, ts, id, context, payload, .. } = record;
        let mut body = Item::new();
        let tag = u64::from(id) << 5 | u64::from(context.bits()) << 1;
        match descriptor
            .filter(|d| d.kind == DescriptorKind::Event)
            .and_then(|d| compact(d, payload))
        {
            Some(fields) => {
                body.varint(tag | 1);
                body.put(&fields.bytes[..fields.len]);
            }
            None => {
                body.varint(tag);
                body.varint(payload.len() as u64);
                body.put(payload);
            }
        }
        if body.overflow {
            return;
        }
        // Append to the open run of this instance if it fits: CPU, delta, body.
        if let Some((open, last_ts, start)) = self.run
            && open == instance as u64
        {
            let mut record = Item::new();
            record.varint(cpu as u64);
            record.varint(zigzag(ts.wrapping_sub(last_ts) as i64));
            record.put(&body.bytes[..body.len]);
            if !record.overflow && self.len + record.len <= CHUNK_BYTES {
                self.chunk[self.len..self.len + record.len]
                    .copy_from_slice(&record.bytes[..record.len]);
                self.len += record.len;
                self.run = Some((open, ts, start));
                return;
            }
        }
        // Open a new run (in a new chunk if this one is full): instance, CPU, the
        // absolute timestamp, body. Its two length bytes are filled in when it closes.
        self.close_run();
        let mut record = Item::new();
        record.varint(instance as u64);
        record.varint(cpu as u64);
        record.varint(ts);
        record.put(&body.bytes[..body.len]);
        if record.overflow {
            return;
        }
        if self.len + 3 + record.len > CHUNK_BYTES {
            self.flush();
        }
        let start = self.len;
        self.chunk[start] = kind::RECORDS;
        self.len += 3;
        self.chunk[self.len..self.len + record.len].copy_from_slice(&record.bytes[..record.len]);
        self.len += record.len;
        self.run = Some((instance as u64, ts, start));
    }

    /// Ends the dump: flushes the last chunk and writes the end line.
    pub fn finish(mut self) {
        self.flush();
        let mut line = [0u8; 64];
        let mut n = END.len();
        line[..n].copy_from_slice(END.as_bytes());
        for part in [&b" chunks="[..], decimal(self.seq, &mut [0u8; 20]), b">>>"] {
            line[n..n + part.len()].copy_from_slice(part);
            n += part.len();
        }
        (self.out)(core::str::from_utf8(&line[..n]).unwrap_or(END));
    }
}

/// Most bytes of the line of a chunk of `len` bytes.
const fn line_bytes(len: usize) -> usize {
    "TD ".len() + 20 + 1 + len.div_ceil(3) * 4 + 1 + 8
}

/// Writes the line of chunk number `seq` holding `chunk` into `line` (at least
/// [`line_bytes`] of the chunk's length): `TD <seq> <base64> <crc32>`.
fn write_chunk<'a>(seq: u64, chunk: &[u8], line: &'a mut [u8]) -> &'a str {
    let mut n = 0;
    let mut push = |bytes: &[u8]| {
        line[n..n + bytes.len()].copy_from_slice(bytes);
        n += bytes.len();
    };
    push(b"TD ");
    push(decimal(seq, &mut [0u8; 20]));
    push(b" ");
    let mut text = [0u8; 4 * 128];
    for part in chunk.chunks(3 * 128) {
        let t = base64_encode(part, &mut text);
        push(&text[..t]);
    }
    push(b" ");
    let crc = crc32(chunk);
    let mut hex = [0u8; 8];
    for (i, h) in hex.iter_mut().enumerate() {
        *h = b"0123456789abcdef"[(crc >> (28 - 4 * i)) as usize & 15];
    }
    push(&hex);
    // Only ASCII was written.
    core::str::from_utf8(&line[..n]).unwrap_or("TD ?")
}

/// The line of chunk number `seq` holding `chunk` (of any length), exactly as a
/// dump writer would write it: for tools and tests that craft dumps.
pub fn encode_chunk(seq: u64, chunk: &[u8]) -> alloc::string::String {
    let mut line = alloc::vec![0u8; line_bytes(chunk.len())];
    write_chunk(seq, chunk, &mut line).into()
}

fn decimal(mut v: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            return &buf[i..];
        }
    }
}

/// An event's payload with integers as varints; `None` if it does not decode.
fn compact(d: &EventDescriptor, payload: &[u8]) -> Option<Item> {
    let mut item = Item::new();
    let mut decoder = Decoder::new(payload);
    for field in d.fields {
        match decoder.value(field.kind).ok()? {
            Value::Unsigned(v) => item.varint(v),
            Value::Signed(v) => item.varint(zigzag(v)),
            Value::Bool(v) => item.varint(u64::from(v)),
            Value::Char(c) => item.varint(u64::from(c)),
            Value::Bytes(bytes) => item.put(bytes),
            Value::Str(s) => item.str(s),
        }
    }
    (decoder.is_empty() && !item.overflow).then_some(item)
}
