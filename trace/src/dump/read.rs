//! Reading dumps back from a captured serial log (host side; allocates).

use super::codec::{base64_decode, crc32, get_varint, unzigzag};
use super::{BEGIN, BufferKind, CHUNK_BYTES, END, MAX_CPUS, MAX_SECTIONS, VERSION, VERSIONS, kind};
use crate::context::Context;
use crate::event::{DescriptorKind, Timeline};
use crate::field::{Decoder, Encoder, Field, FieldKind, Sink};
use crate::ring::{Clock, MAX_PAYLOAD};
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// Where the panic happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PanicReport {
    /// The panicking CPU.
    pub cpu: usize,
    /// The panic message.
    pub message: String,
    /// `file:line:column`.
    pub location: String,
    /// A panic on the same CPU while this one was being reported (absent in dumps
    /// written before the header carried it).
    pub nested: Option<NestedPanic>,
    /// A panic on another CPU while this one was under way (absent in dumps
    /// written before they carried it).
    pub other: Option<OtherPanicReport>,
}

/// A panic on another CPU while the reported one was under way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OtherPanicReport {
    /// The CPU.
    pub cpu: usize,
    /// Its message.
    pub message: String,
    /// `file:line:column`.
    pub location: String,
}

/// A panic while another was being reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NestedPanic {
    /// Its message.
    pub message: String,
    /// `file:line:column`.
    pub location: String,
}

/// An event descriptor carried by the dump.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DumpDescriptor {
    /// Record id.
    pub id: u16,
    /// Event or printk call site.
    pub kind: DescriptorKind,
    /// Subsystem.
    pub system: String,
    /// Event name.
    pub name: String,
    /// Format string.
    pub format: String,
    /// Fields in payload order.
    pub fields: Vec<DumpField>,
    /// What the event is on a timeline (an instant in dumps that do not say).
    pub timeline: Timeline<String>,
}

/// A field of a [`DumpDescriptor`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DumpField {
    /// Field name.
    pub name: String,
    /// Field type.
    pub kind: FieldKind,
}

impl DumpDescriptor {
    /// The fields as [`Field`]s, for [`crate::event::format::render`].
    pub fn fields(&self) -> Vec<Field<'_>> {
        self.fields.iter().map(|f| Field { name: &f.name, kind: f.kind }).collect()
    }

    /// `system:name`.
    pub fn full_name(&self) -> String {
        format!("{}:{}", self.system, self.name)
    }
}

/// One CPU's statistics as the dump recorded them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DumpStats {
    /// Events written.
    pub written: u64,
    /// Events in the buffer.
    pub entries: u64,
    /// Events overwritten.
    pub overrun: u64,
    /// Events dropped.
    pub dropped: u64,
    /// Events consumed by a reader.
    pub read: u64,
    /// Of dropped: commit overruns.
    pub commit_overrun: u64,
    /// Writes a panic stopped before they finished, left out by its seal (0 in dumps
    /// before it).
    pub stopped: u64,
    /// Bytes the seal left out because it could not read them all as records.
    pub unreadable: u64,
    /// Bytes reserved by writes not all finished, unsealed: they and every record
    /// after them were not read.
    pub unpublished: u64,
}

/// A record from the dump, its payload in the ring's format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DumpRecord {
    /// CPU.
    pub cpu: usize,
    /// Timestamp, ns.
    pub ts: u64,
    /// Event id.
    pub id: u16,
    /// What the CPU was running when it wrote the record.
    pub context: Context,
    /// Events of this CPU a consuming reader lost just before this record (a
    /// stream's lost items; 0 in a panic or `dump` dump).
    pub lost_before: u64,
    /// The payload.
    pub payload: Vec<u8>,
}

/// One section of a dump: one buffer (live or snapshot) of an instance.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DumpInstance {
    /// The instance's name (empty: the top-level instance).
    pub name: String,
    /// Which of the instance's buffers this is.
    pub buffer: BufferKind,
    /// The clock of its timestamps (`Local` in dumps written before clocks).
    pub clock: Clock,
    /// Statistics per CPU.
    pub stats: BTreeMap<usize, DumpStats>,
    /// Records, oldest first.
    pub records: Vec<DumpRecord>,
    /// Older records left out by the dump's cap.
    pub skipped: u64,
    /// Events lost per CPU (overwritten before a consuming reader got them): the
    /// lost items of a stream, summed.
    pub lost: BTreeMap<usize, u64>,
    /// Whether its statistics came again at its end, as a stream's do: `stats` are
    /// then those at the end, and `records` are what its reader took.
    pub streamed: bool,
}

/// Something wrong with a dump, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line of the log.
    pub line: usize,
    /// The chunk concerned, if known.
    pub chunk: Option<u64>,
    /// What is wrong.
    pub what: String,
}

/// One dump found in a log: whatever of it could be read, and what could not.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dump {
    /// 1-based line of its begin marker.
    pub line: usize,
    /// Format version (from the header).
    pub version: Option<u64>,
    /// CPU count (from the header).
    pub cpus: Option<usize>,
    /// Where the kernel panicked; `None` for a live dump.
    pub panic: Option<PanicReport>,
    /// The [`crate::symtab::SymbolTable::fingerprint`] of the kernel that wrote the
    /// dump; `None` when it had no symbol table (or wrote the dump before the header
    /// carried one).
    pub symbols: Option<u64>,
    /// Descriptors by id.
    pub descriptors: BTreeMap<u16, DumpDescriptor>,
    /// Sections (instances' buffers), by their number in the dump.
    pub instances: BTreeMap<u64, DumpInstance>,
    /// Chunks read and verified.
    pub chunks: u64,
    /// Everything that was wrong; empty for an intact dump.
    pub problems: Vec<Problem>,
}

/// Every dump in `log`, in order. Never fails: a damaged dump comes back with its
/// problems listed and everything intact decoded.
pub fn parse(log: &str) -> Vec<Dump> {
    let mut reader = Reader::new();
    let mut dumps: Vec<Dump> = log.lines().filter_map(|line| reader.line(line)).collect();
    dumps.extend(reader.finish());
    dumps
}

/// A verified chunk: its line in the log, its number, its bytes.
type Chunk = (usize, u64, Vec<u8>);

/// Finds and decodes the dumps of a log fed to it one line at a time, so a long log
/// need not be held in memory: each dump is handed back as soon as its end marker
/// (or the next dump's begin marker) has been read. Memory is that of the dump
/// being read; time is linear in the log's length.
#[derive(Debug, Default)]
pub struct Reader {
    /// Lines read so far.
    line: usize,
    /// The dump being read, and its verified chunks (line, number, bytes).
    open: Option<(Dump, Vec<Chunk>)>,
}

impl Reader {
    /// A reader at the start of a log.
    pub fn new() -> Self {
        Reader::default()
    }

    /// Reads the next line of the log (its line ending may be left on); returns
    /// the dump this line ends, if any.
    pub fn line(&mut self, text: &str) -> Option<Dump> {
        self.line += 1;
        let line = self.line;
        let text = text.trim_end_matches(['\r', '\n']);
        if text.contains(BEGIN) {
            let ended = self.open.take().map(|(mut dump, chunks)| {
                dump.problems.push(Problem {
                    line,
                    chunk: None,
                    what: "a new dump begins before this one ended".into(),
                });
                finish(dump, chunks, None)
            });
            self.open = Some((Dump { line, ..Dump::default() }, Vec::new()));
            return ended;
        }
        let (dump, chunks) = self.open.as_mut()?;
        if let Some(tail) = text.split(END).nth(1) {
            let count = tail
                .trim()
                .strip_prefix("chunks=")
                .and_then(|t| t.strip_suffix(">>>"))
                .and_then(|n| n.parse::<u64>().ok());
            let (dump, chunks) = self.open.take()?;
            return Some(finish(dump, chunks, Some((line, count))));
        }
        let at = text.find("TD ")?;
        match chunk_line(&text[at + 3..]) {
            Ok((seq, bytes)) => chunks.push((line, seq, bytes)),
            Err((seq, what)) => dump.problems.push(Problem { line, chunk: seq, what }),
        }
        None
    }

    /// Ends the log: the dump still open (it has no end marker), if any.
    pub fn finish(self) -> Option<Dump> {
        self.open.map(|(dump, chunks)| finish(dump, chunks, None))
    }
}

/// The number and bytes of a chunk line (`TD <seq> <base64> <crc32>`, anything
/// before `TD ` ignored), its checksum verified; the inverse of
/// [`super::encode_chunk`].
pub fn decode_chunk(line: &str) -> Result<(u64, Vec<u8>), String> {
    let at = line.find("TD ").ok_or_else(|| String::from("not a chunk line (no \"TD \")"))?;
    chunk_line(&line[at + 3..]).map_err(|(_, what)| what)
}

/// Decodes `SEQ BASE64 CRC`.
fn chunk_line(text: &str) -> Result<(u64, Vec<u8>), (Option<u64>, String)> {
    let mut words = text.split_ascii_whitespace();
    let seq = words
        .next()
        .and_then(|w| w.parse::<u64>().ok())
        .ok_or((None, String::from("malformed chunk line (no chunk number)")))?;
    let (Some(data), Some(crc), None) = (words.next(), words.next(), words.next()) else {
        return Err((
            Some(seq),
            format!("chunk {seq}: malformed line (expected: number, base64, checksum)"),
        ));
    };
    let crc = u32::from_str_radix(crc, 16)
        .ok()
        .filter(|_| crc.len() == 8)
        .ok_or((Some(seq), format!("chunk {seq}: malformed checksum {crc:?}")))?;
    // Base64 takes 4 characters for every 3 bytes.
    if data.len() > CHUNK_BYTES.div_ceil(3) * 4 {
        return Err((
            Some(seq),
            format!("chunk {seq}: longer than a chunk can be ({CHUNK_BYTES} bytes); chunk skipped"),
        ));
    }
    let bytes = base64_decode(data).ok_or((Some(seq), format!("chunk {seq}: invalid base64")))?;
    let actual = crc32(&bytes);
    if actual != crc {
        return Err((
            Some(seq),
            format!(
                "chunk {seq}: checksum mismatch (line says {crc:08x}, data gives {actual:08x}); chunk skipped"
            ),
        ));
    }
    Ok((seq, bytes))
}

fn finish(mut dump: Dump, mut chunks: Vec<Chunk>, ended: Option<(usize, Option<u64>)>) -> Dump {
    chunks.sort_by_key(|(_, seq, _)| *seq);
    // Chunks already reported as damaged are not reported again as missing.
    let damaged: BTreeSet<u64> = dump.problems.iter().filter_map(|p| p.chunk).collect();
    let mut seen = 0u64;
    let last_line = chunks.last().map_or(dump.line, |(line, _, _)| *line);
    for (line, seq, _) in &chunks {
        if *seq > seen {
            if let Some(problem) = missing(&damaged, *line, seen, *seq) {
                dump.problems.push(problem);
            }
        } else if *seq < seen {
            dump.problems.push(Problem {
                line: *line,
                chunk: Some(*seq),
                what: format!("chunk {seq} appears twice; the second is ignored"),
            });
            continue;
        }
        seen = seq.saturating_add(1);
    }
    chunks.dedup_by_key(|(_, seq, _)| *seq);
    match ended {
        None => dump.problems.push(Problem {
            line: last_line,
            chunk: None,
            what: format!("dump truncated: no end marker after chunk {}", seen.saturating_sub(1)),
        }),
        Some((line, Some(count))) if count > seen => {
            let what = if seen.saturating_add(1) == count {
                format!("chunk {seen} (the last) is missing")
            } else {
                format!("chunks {seen} to {} (the last) are missing", count - 1)
            };
            dump.problems.push(Problem { line, chunk: Some(seen), what });
        }
        Some((line, None)) => {
            dump.problems.push(Problem { line, chunk: None, what: "malformed end marker".into() })
        }
        Some(_) => {}
    }
    dump.chunks = chunks.len() as u64;
    // The header and descriptors first, wherever they are, so that records can be
    // expanded and CPU numbers checked against the CPU count.
    let mut named = BTreeSet::new();
    let mut pending = Pending::new();
    for pass in [Pass::Definitions, Pass::Rest] {
        for (line, seq, bytes) in &chunks {
            // What an item breaks that leaves the rest of the chunk readable, then
            // what stopped the chunk, if anything.
            let mut noted = Vec::new();
            let stopped = items(&mut dump, &mut named, &mut pending, &mut noted, bytes, pass);
            for what in noted.into_iter().chain(stopped.err()) {
                let (line, chunk, what) = (*line, Some(*seq), format!("chunk {seq}: {what}"));
                dump.problems.push(Problem { line, chunk, what });
            }
        }
    }
    // A section whose name was lost is named by its number, so that it cannot
    // pass for the top-level instance (whose name is empty).
    for (index, instance) in &mut dump.instances {
        if !named.contains(index) {
            instance.name = format!("#{index}");
            dump.problems.push(Problem {
                line: dump.line,
                chunk: None,
                what: format!(
                    "the name and buffer of section {index} were lost with a damaged chunk; its records are reported as instance \"#{index}\" (live)"
                ),
            });
        }
    }
    dump
}

/// The problem of chunks `from..to` being absent, those reported as damaged aside.
/// Linear in the damaged chunks within the range.
fn missing(damaged: &BTreeSet<u64>, line: usize, from: u64, to: u64) -> Option<Problem> {
    let absent = (to - from) - damaged.range(from..to).count() as u64;
    if absent == 0 {
        return None;
    }
    // There is an absent chunk in the range: neither walk leaves it.
    let mut first = from;
    for &s in damaged.range(from..to) {
        if s != first {
            break;
        }
        first += 1;
    }
    let mut last = to - 1;
    for &s in damaged.range(from..to).rev() {
        if s != last {
            break;
        }
        last -= 1;
    }
    let what = match absent {
        1 => format!("chunk {first} is missing"),
        2..=1000 => format!("chunks {first} to {last} are missing"),
        _ => format!("chunks from {first} on are missing"),
    };
    Some(Problem { line, chunk: Some(first), what })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// The header and the descriptors.
    Definitions,
    /// Everything else.
    Rest,
}

fn varint(input: &mut &[u8]) -> Result<u64, String> {
    get_varint(input).ok_or_else(|| String::from("truncated or malformed number"))
}

fn string(input: &mut &[u8]) -> Result<String, String> {
    let len = length(input)?;
    if input.len() < len {
        return Err("truncated string".into());
    }
    let (bytes, rest) = input.split_at(len);
    *input = rest;
    core::str::from_utf8(bytes).map(String::from).map_err(|_| String::from("string is not UTF-8"))
}

/// Events lost per (section, CPU) since that CPU's last record in the section: the
/// lost items not yet attached to a record.
type Pending = BTreeMap<(u64, usize), u64>;

fn items(
    dump: &mut Dump,
    named: &mut BTreeSet<u64>,
    pending: &mut Pending,
    noted: &mut Vec<String>,
    mut chunk: &[u8],
    pass: Pass,
) -> Result<(), String> {
    while let Some((&kind, rest)) = chunk.split_first() {
        chunk = rest;
        let len = length(&mut chunk)?;
        if chunk.len() < len {
            return Err(format!("item of kind {kind} runs past the chunk's end"));
        }
        let (mut body, rest) = chunk.split_at(len);
        chunk = rest;
        match (pass, kind) {
            (Pass::Definitions, kind::DESCRIPTOR) => {
                let d = descriptor(&mut body)?;
                match dump.descriptors.get(&d.id) {
                    // A stream describes its events again at its end.
                    Some(first) if *first == d => {}
                    Some(first) => noted.push(format!(
                        "event {} described again as {}:{}, differently; the first, {}:{}, is kept",
                        d.id, d.system, d.name, first.system, first.name
                    )),
                    None => {
                        dump.descriptors.insert(d.id, d);
                    }
                }
            }
            (Pass::Definitions, kind::HEADER) => header(dump, &mut body)?,
            (Pass::Definitions, _) => {}
            (Pass::Rest, kind::DESCRIPTOR | kind::HEADER) => {}
            (Pass::Rest, kind::OTHER_PANIC) => other_panic(dump, &mut body)?,
            (Pass::Rest, kind::SECTION) => {
                let index = instance(&mut body)?;
                let name = string(&mut body)?;
                // Version 1 has no buffer: its sections are live buffers. Sections
                // written before clocks have no clock: theirs is the local clock.
                let buffer = if body.is_empty() {
                    BufferKind::Live
                } else {
                    let code = varint(&mut body)?;
                    BufferKind::from_code(code)
                        .ok_or_else(|| format!("unknown buffer {code} (0 live, 1 snapshot)"))?
                };
                let clock = if body.is_empty() {
                    Clock::Local
                } else {
                    let code = varint(&mut body)?;
                    Clock::from_code(code).ok_or_else(|| {
                        let known = (0..).map_while(Clock::from_code);
                        let known: Vec<String> =
                            known.map(|c| format!("{} {}", c.code(), c.name())).collect();
                        format!("unknown clock {code} ({})", known.join(", "))
                    })?
                };
                let same = |s: &DumpInstance| s.name == name && s.buffer == buffer;
                let taken = |o: &&u64| **o != index && dump.instances.get(o).is_some_and(same);
                let twin = named.iter().find(taken).copied();
                let renamed = named.contains(&index)
                    && dump.instances.get(&index).is_some_and(|s| !same(s) || s.clock != clock);
                named.insert(index);
                let section = dump.instances.entry(index).or_default();
                // A name the kernel gives no instance (`top` names the top level in
                // reports; a `:` would pass for a buffer's name in trace.dat).
                let foreign = !name.is_empty() && !crate::name::valid(&name);
                if twin.is_some() || renamed || foreign {
                    // Reported apart, under its number: nothing passes for the other.
                    let what = match twin {
                        Some(other) => format!("as section {other} does"),
                        None if foreign => format!("({})", crate::name::RULE),
                        None => String::from("after it named another"),
                    };
                    let kind = buffer.name();
                    section.name = format!("#{index}");
                    noted.push(format!(
                        "section {index} names the {kind} buffer of {name:?} {what}; its records are reported as instance \"#{index}\""
                    ));
                } else {
                    section.name = name;
                }
                section.buffer = buffer;
                section.clock = clock;
            }
            (Pass::Rest, kind::CPU_STATS) => {
                let index = instance(&mut body)?;
                let cpu = cpu(dump, &mut body)?;
                let mut v = [0u64; 9];
                for (i, slot) in v.iter_mut().enumerate() {
                    // The last three are absent in dumps before them.
                    if i < 6 || !body.is_empty() {
                        *slot = varint(&mut body)?;
                    }
                }
                let stats = DumpStats {
                    written: v[0],
                    entries: v[1],
                    overrun: v[2],
                    dropped: v[3],
                    read: v[4],
                    commit_overrun: v[5],
                    stopped: v[6],
                    unreadable: v[7],
                    unpublished: v[8],
                };
                let section = dump.instances.entry(index).or_default();
                section.streamed |= section.stats.insert(cpu, stats).is_some();
            }
            (Pass::Rest, kind::RECORDS) => records(dump, pending, &mut body, true)?,
            (Pass::Rest, kind::RECORDS_WITHOUT_CONTEXT) => {
                records(dump, pending, &mut body, false)?;
            }
            (Pass::Rest, kind::SKIPPED) => {
                let index = instance(&mut body)?;
                let count = varint(&mut body)?;
                let skipped = &mut dump.instances.entry(index).or_default().skipped;
                *skipped = skipped
                    .checked_add(count)
                    .ok_or_else(|| String::from("the count of records left out overflows"))?;
            }
            (Pass::Rest, kind::LOST) => {
                let index = instance(&mut body)?;
                let cpu = cpu(dump, &mut body)?;
                let count = varint(&mut body)?;
                let lost = dump.instances.entry(index).or_default().lost.entry(cpu).or_default();
                *lost = lost
                    .checked_add(count)
                    .ok_or_else(|| String::from("the count of lost events overflows"))?;
                // Not above the total just checked: cannot overflow.
                *pending.entry((index, cpu)).or_default() += count;
            }
            (Pass::Rest, other) => return Err(format!("unknown item kind {other}")),
        }
    }
    Ok(())
}

/// A length, which must fit in memory (the caller checks it against the input).
fn length(input: &mut &[u8]) -> Result<usize, String> {
    usize::try_from(varint(input)?).map_err(|_| String::from("length out of range"))
}

/// A section number, below [`MAX_SECTIONS`].
fn instance(input: &mut &[u8]) -> Result<u64, String> {
    let index = varint(input)?;
    if index >= MAX_SECTIONS {
        return Err(format!(
            "section number {index} out of range (a dump holds at most {MAX_SECTIONS})"
        ));
    }
    Ok(index)
}

/// A CPU number, below the header's CPU count (or [`MAX_CPUS`] without a header).
fn cpu(dump: &Dump, input: &mut &[u8]) -> Result<usize, String> {
    let cpu = varint(input)?;
    let limit = dump.cpus.unwrap_or(MAX_CPUS);
    match usize::try_from(cpu) {
        Ok(cpu) if cpu < limit => Ok(cpu),
        _ if dump.cpus.is_some() => {
            Err(format!("CPU {cpu} out of range (the header says the dump covers {limit} CPUs)"))
        }
        _ => Err(format!("CPU {cpu} out of range (a dump covers at most {MAX_CPUS} CPUs)")),
    }
}

fn header(dump: &mut Dump, body: &mut &[u8]) -> Result<(), String> {
    if dump.version.is_some() {
        return Err("a second header item (a dump has one); it is ignored".into());
    }
    let version = varint(body)?;
    if !VERSIONS.contains(&version) {
        return Err(format!(
            "dump format version {version}; this tool reads versions {} to {VERSION}",
            VERSIONS.start()
        ));
    }
    dump.version = Some(version);
    let cpus = varint(body)?;
    match usize::try_from(cpus) {
        Ok(n @ 1..=MAX_CPUS) => dump.cpus = Some(n),
        _ => {
            return Err(format!("the header gives {cpus} CPUs; a dump covers 1 to {MAX_CPUS}"));
        }
    }
    if varint(body)? == 1 {
        let cpu = cpu(dump, body)?;
        let (message, location) = (string(body)?, string(body)?);
        dump.panic = Some(PanicReport { cpu, message, location, nested: None, other: None });
    }
    // Absent in dumps written before the header carried them.
    if !body.is_empty() && varint(body)? == 1 {
        dump.symbols = Some(varint(body)?);
    }
    if !body.is_empty() && varint(body)? == 1 {
        let nested = NestedPanic { message: string(body)?, location: string(body)? };
        let no_panic = || String::from("the header has a nested panic but no panic");
        let panic = dump.panic.as_mut().ok_or_else(no_panic)?;
        panic.nested = Some(nested);
    }
    Ok(())
}

/// Another CPU's panic, for the header's (read in the pass after the header's).
fn other_panic(dump: &mut Dump, body: &mut &[u8]) -> Result<(), String> {
    let cpu = cpu(dump, body)?;
    let other = OtherPanicReport { cpu, message: string(body)?, location: string(body)? };
    let no_panic = || String::from("another CPU's panic, but the header has no panic");
    let panic = dump.panic.as_mut().ok_or_else(no_panic)?;
    if panic.cpu == cpu {
        return Err(format!("another CPU's panic on cpu {cpu}, the header's panic's own"));
    }
    if panic.other.is_some() {
        return Err("a second panic on another CPU (a dump has one); it is ignored".into());
    }
    panic.other = Some(other);
    Ok(())
}

fn descriptor(body: &mut &[u8]) -> Result<DumpDescriptor, String> {
    let id = u16::try_from(varint(body)?).map_err(|_| String::from("event id out of range"))?;
    let kind = match varint(body)? {
        0 => DescriptorKind::Event,
        1 => DescriptorKind::Printk,
        other => return Err(format!("unknown descriptor kind {other}")),
    };
    let (system, name, format) = (string(body)?, string(body)?, string(body)?);
    let count = varint(body)?;
    let mut fields = Vec::new();
    for _ in 0..count.min(256) {
        let field = string(body)?;
        let tag = varint(body)?;
        let kind = match tag {
            12 => FieldKind::Bytes(
                u16::try_from(varint(body)?).map_err(|_| String::from("byte array too long"))?,
            ),
            tag => u8::try_from(tag)
                .ok()
                .and_then(FieldKind::from_tag)
                .ok_or_else(|| format!("unknown field type tag {tag}"))?,
        };
        fields.push(DumpField { name: field, kind });
    }
    // A record no larger than the ring takes holds them all (an output that lays
    // fields out, CTF's, then takes no more room per record than the record had).
    let least: usize = fields.iter().map(|f| f.kind.min_size()).sum();
    if least > MAX_PAYLOAD {
        return Err(format!(
            "event {id}'s fields take at least {least} bytes, more than a record holds ({MAX_PAYLOAD})"
        ));
    }
    // Dumps written before descriptors said it end here: an instant.
    let timeline = match body.is_empty() {
        true => Timeline::Instant,
        false => match varint(body)? {
            0 => Timeline::Instant,
            code @ (1 | 2) => {
                let label = string(body)?;
                let key = Some(string(body)?).filter(|k| !k.is_empty());
                if code == 1 {
                    Timeline::Begin { label, key }
                } else {
                    Timeline::End { label, key }
                }
            }
            3 => Timeline::Counter,
            4 => Timeline::Span { label: string(body)?, duration: string(body)? },
            other => return Err(format!("unknown timeline kind {other}")),
        },
    };
    Ok(DumpDescriptor { id, kind, system, name, format, fields, timeline })
}

/// A records item; `with_context`: each tag carries the writer's context (kind 7).
fn records(
    dump: &mut Dump,
    pending: &mut Pending,
    body: &mut &[u8],
    with_context: bool,
) -> Result<(), String> {
    let index = instance(body)?;
    let mut ts = None::<u64>;
    while !body.is_empty() {
        let cpu = cpu(dump, body)?;
        let stamp = varint(body)?;
        let now = match ts {
            None => stamp,
            Some(last) => last.wrapping_add(unzigzag(stamp) as u64),
        };
        ts = Some(now);
        let tagged = varint(body)?;
        let (id, context) = match with_context {
            true => (tagged >> 5, Context::from_bits((tagged >> 1) as u8)),
            false => (tagged >> 1, Context::UNKNOWN),
        };
        let id = u16::try_from(id).map_err(|_| String::from("event id out of range"))?;
        let payload = if tagged & 1 == 1 {
            let d = dump.descriptors.get(&id).ok_or_else(|| {
                format!("compact record of event id {id}, whose descriptor is missing")
            })?;
            expand(d, body)?
        } else {
            let len = length(body)?;
            if body.len() < len {
                return Err("truncated record payload".into());
            }
            let (payload, rest) = body.split_at(len);
            *body = rest;
            payload.to_vec()
        };
        let lost_before = pending.remove(&(index, cpu)).unwrap_or(0);
        dump.instances.entry(index).or_default().records.push(DumpRecord {
            cpu,
            ts: now,
            id,
            context,
            lost_before,
            payload,
        });
    }
    Ok(())
}

/// The refusal of a compact record of `d` that expands past an event's payload.
fn too_long(d: &DumpDescriptor) -> String {
    let max = crate::event::MAX_EVENT_PAYLOAD;
    format!("record of {}:{}: its fields take more than an event's {max} bytes", d.system, d.name)
}

/// Turns a compact payload back into the record format.
fn expand(d: &DumpDescriptor, body: &mut &[u8]) -> Result<Vec<u8>, String> {
    let mut buf = [0u8; crate::event::MAX_EVENT_PAYLOAD];
    let mut out = Encoder::new(&mut buf);
    for &DumpField { kind, .. } in &d.fields {
        let narrow = |v: u64, bytes: usize| -> Result<u64, String> {
            if bytes < 8 && v >> (8 * bytes) != 0 {
                Err("field value out of range".into())
            } else {
                Ok(v)
            }
        };
        match kind {
            FieldKind::U8 | FieldKind::U16 | FieldKind::U32 | FieldKind::U64 => {
                let size = kind.fixed_size().unwrap_or(8);
                out.put(&narrow(varint(body)?, size)?.to_le_bytes()[..size]);
            }
            FieldKind::I8 | FieldKind::I16 | FieldKind::I32 | FieldKind::I64 => {
                let size = kind.fixed_size().unwrap_or(8);
                out.put(&unzigzag(varint(body)?).to_le_bytes()[..size]);
            }
            FieldKind::Bool => out.put(&[
                u8::try_from(varint(body)?).map_err(|_| String::from("bool out of range"))?
            ]),
            FieldKind::Char => out.put(
                &u32::try_from(varint(body)?)
                    .map_err(|_| String::from("char out of range"))?
                    .to_le_bytes(),
            ),
            FieldKind::Bytes(n) => {
                let n = usize::from(n);
                if body.len() < n {
                    return Err("truncated byte array".into());
                }
                out.put(&body[..n]);
                *body = &body[n..];
            }
            FieldKind::Str => {
                let s = string(body)?;
                // A string is cut to what fits: one that does not fit is refused here.
                if s.len() + 2 > out.room() {
                    return Err(too_long(d));
                }
                out.put_str(&s);
            }
        }
    }
    if out.was_cut() {
        return Err(too_long(d));
    }
    let payload = out.bytes().to_vec();
    // A payload that does not decode with its own descriptor is damaged.
    let mut check = Decoder::new(&payload);
    for field in &d.fields {
        check.value(field.kind).map_err(|e| format!("record of {}:{}: {e}", d.system, d.name))?;
    }
    Ok(payload)
}
