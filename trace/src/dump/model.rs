//! A dump's sections with their records decoded: what the host tool's outputs (text,
//! statistics, Perfetto, CTF, trace.dat) consume. [`Dump::sections`] decodes every
//! payload once, with the dump's own descriptors.

use super::read::{Dump, DumpDescriptor, DumpInstance, DumpRecord, DumpStats, PanicReport};
use super::{BufferKind, MAX_CPUS};
use crate::context::Context;
use crate::event::DescriptorKind;
use crate::event::filter::{FieldRef, Fields, Filter, FilterError};
use crate::event::format::Compiled;
use crate::event::format_file::Origin;
use crate::field::{self, DecodeError, Decoder, Field};
use crate::ring::Clock;
use crate::symtab::SymbolTable;
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt::Write as _;

/// One section of a dump (an instance's live buffer or its snapshot), decoded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Section {
    /// Instance name, `"top"` for the top-level instance.
    pub instance: String,
    /// Which of the instance's buffers the section holds.
    pub buffer: BufferKind,
    /// The clock of the section's timestamps (`trace_clock`).
    pub clock: Clock,
    /// Number of CPUs the dump covers.
    pub cpus: usize,
    /// Event id -> descriptor, shared by the sections of a dump (`Arc::make_mut` to
    /// change a section's).
    pub descriptors: Arc<BTreeMap<u16, DumpDescriptor>>,
    /// The section's events, in the dump's order (the kernel writes them merged in
    /// time order).
    pub events: Vec<Event>,
    /// Events each CPU lost after its last event in `events` (a stream's reader
    /// lost them, and no record of that CPU came after), by CPU.
    pub lost_after: BTreeMap<usize, u64>,
    /// Older records the kernel left out of the dump (`dump last N`).
    pub skipped: u64,
    /// Events of the dump a reader's filter left out of `events` (the host tool's
    /// `report --filter`); 0 as decoded.
    pub filtered: u64,
    /// One entry per CPU, index = CPU.
    pub stats: Vec<DumpStats>,
    /// The panic that produced the dump; `None` for a live `dump` or a stream.
    pub panic: Option<PanicReport>,
    /// Its statistics came twice, as a whole stream's (`trace_pipe_raw`) do: `stats`
    /// are those at its end, so their entries are what its reader left unread, and
    /// `events` are what it took. (A stream cut before its end reads as a dump.)
    pub streamed: bool,
}

/// One decoded record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// CPU that recorded the event.
    pub cpu: usize,
    /// Timestamp, nanoseconds since boot.
    pub ts: u64,
    /// Event id (key into [`Section::descriptors`]).
    pub id: u16,
    /// What the CPU was running when it recorded the event.
    pub context: Context,
    /// One value per descriptor field, same order (as far as the payload decodes).
    pub values: Vec<Value>,
    /// Events of this CPU a consuming reader lost just before this one (see
    /// [`DumpRecord::lost_before`]).
    pub lost_before: u64,
    /// Why the payload stopped decoding after `values`: what the format's
    /// placeholders past them print ([`DecodeError::Truncated`] where the payload
    /// ended, as it does after a printk call site's last argument). The event's
    /// text is rendered from its values when an output writes it ([`Texts`]), not
    /// kept: a crafted format makes a few bytes of payload kilobytes of text.
    pub error: DecodeError,
}

/// A decoded field value, owning its bytes (an output may rewrite it: stack
/// addresses become symbol names).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Value {
    /// Any unsigned integer field.
    Unsigned(u64),
    /// Any signed integer field.
    Signed(i64),
    /// A boolean field.
    Bool(bool),
    /// A char field.
    Char(char),
    /// A byte-array field.
    Bytes(Vec<u8>),
    /// A string field.
    Str(String),
}

impl From<field::Value<'_>> for Value {
    fn from(value: field::Value<'_>) -> Self {
        match value {
            field::Value::Unsigned(v) => Value::Unsigned(v),
            field::Value::Signed(v) => Value::Signed(v),
            field::Value::Bool(v) => Value::Bool(v),
            field::Value::Char(v) => Value::Char(v),
            field::Value::Bytes(v) => Value::Bytes(v.to_vec()),
            field::Value::Str(v) => Value::Str(v.into()),
        }
    }
}

impl Dump {
    /// Every section of the dump, decoded, in the dump's order.
    pub fn sections(&self) -> Vec<Section> {
        let descriptors = Arc::new(self.descriptors.clone());
        self.instances
            .values()
            .map(|instance| {
                let max_cpu = instance
                    .stats
                    .keys()
                    .chain(instance.records.iter().map(|r| &r.cpu))
                    .max()
                    .map_or(0, |c| c.saturating_add(1));
                let cpus = self.cpus.unwrap_or(max_cpu).max(max_cpu);
                // The parser keeps CPU numbers below `MAX_CPUS`; a dump built
                // otherwise loses the stats of CPUs beyond it rather than sizing
                // memory by them.
                let mut stats = alloc::vec![DumpStats::default(); cpus.min(MAX_CPUS)];
                for (&cpu, s) in &instance.stats {
                    if let Some(slot) = stats.get_mut(cpu) {
                        *slot = *s;
                    }
                }
                Section {
                    instance: match instance.name.is_empty() {
                        true => "top".into(),
                        false => instance.name.clone(),
                    },
                    buffer: instance.buffer,
                    clock: instance.clock,
                    cpus,
                    descriptors: Arc::clone(&descriptors),
                    events: instance.records.iter().map(|r| self.event(r)).collect(),
                    lost_after: lost_after(instance),
                    skipped: instance.skipped,
                    filtered: 0,
                    stats,
                    panic: self.panic.clone(),
                    streamed: instance.streamed,
                }
            })
            .collect()
    }

    /// `record` decoded with its descriptor: its values, as far as its payload
    /// decodes, and why they stop there. Without a descriptor: its payload as one
    /// bytes value, for a hex dump.
    fn event(&self, record: &DumpRecord) -> Event {
        let mut event = Event {
            cpu: record.cpu,
            ts: record.ts,
            id: record.id,
            context: record.context,
            values: Vec::new(),
            lost_before: record.lost_before,
            error: DecodeError::Truncated,
        };
        let Some(d) = self.descriptors.get(&record.id) else {
            event.values.push(Value::Bytes(record.payload.clone()));
            return event;
        };
        let mut decoder = Decoder::new(&record.payload);
        let mut fields = d.fields.iter();
        let mut next = || match d.kind {
            DescriptorKind::Event => fields.next().map(|f| decoder.value(f.kind)),
            DescriptorKind::Printk => Some(decoder.tagged().map(|(_, v)| v)),
        };
        while let Some(decoded) = next() {
            match decoded {
                Ok(v) => event.values.push(v.into()),
                Err(e) => {
                    event.error = e;
                    break;
                }
            }
        }
        event
    }
}

impl DumpDescriptor {
    /// Compiles `text` as a filter of this event ([`Filter::compile_with`]:
    /// `.function` names are looked up in `symbols`).
    pub fn filter(
        &self,
        text: &str,
        symbols: Option<&SymbolTable<'_>>,
    ) -> Result<Filter, FilterError> {
        let fields: Vec<Field<'_>> =
            self.fields.iter().map(|f| Field { name: &f.name, kind: f.kind }).collect();
        Filter::compile_with(&fields, text, symbols)
    }
}

impl Event {
    /// Whether the event passes `filter` (compiled for its descriptor's fields): on
    /// its decoded values and where it was written, as the tracer judges a record.
    pub fn passes(&self, filter: &Filter) -> bool {
        filter.eval(&Decoded(&self.values), Origin { context: self.context, cpu: self.cpu })
    }
}

/// An event's decoded values as a filter (or a histogram) reads them.
pub(crate) struct Decoded<'a>(pub(crate) &'a [Value]);

impl Fields for Decoded<'_> {
    fn int(&self, field: &FieldRef) -> Option<u64> {
        self.0.get(usize::from(field.index))?.integer()
    }

    fn str(&self, field: &FieldRef) -> Option<&str> {
        match self.0.get(usize::from(field.index))? {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// Most bytes of an event's text (Linux's `trace_seq`, a page, is as long): a
/// crafted format that repeats its fields cannot make one event's text large.
pub const MAX_EVENT_TEXT: usize = 4096;

/// A writer into an event's text that keeps [`MAX_EVENT_TEXT`] bytes and, once one
/// more is written, ends the text with `[...]` and refuses the rest.
struct Capped<'a> {
    text: &'a mut String,
    cut: bool,
}

impl<'a> Capped<'a> {
    fn new(text: &'a mut String) -> Self {
        Capped { text, cut: false }
    }
}

impl core::fmt::Write for Capped<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        const MARK: &str = "[...]";
        if self.cut {
            return Err(core::fmt::Error);
        }
        if self.text.len() + s.len() <= MAX_EVENT_TEXT {
            self.text.push_str(s);
            return Ok(());
        }
        let limit = MAX_EVENT_TEXT - MARK.len();
        let mut keep = limit.saturating_sub(self.text.len()).min(s.len());
        while !s.is_char_boundary(keep) {
            keep -= 1;
        }
        self.text.push_str(&s[..keep]);
        let mut end = self.text.len().min(limit);
        while !self.text.is_char_boundary(end) {
            end -= 1;
        }
        self.text.truncate(end);
        self.text.push_str(MARK);
        self.cut = true;
        Err(core::fmt::Error)
    }
}

/// Renders the text of a section's events when an output writes it: their values
/// with their descriptor's format (a printk call site's arguments with its
/// format), as the kernel's `trace` file shows them; an `ftrace:kernel_stack`
/// whose frames were named (strings, as `report --elf` makes them) lists them one
/// ` => frame` line each, as ftrace does. Each event format is compiled once.
pub struct Texts<'a> {
    /// The section's descriptors.
    descriptors: &'a BTreeMap<u16, DumpDescriptor>,
    /// The formats of its event descriptors (not printk call sites), compiled.
    formats: BTreeMap<u16, Compiled<'a>>,
    /// The ids of its `ftrace:kernel_stack` descriptors whose frames are names:
    /// fields after the first (the depth) strings, as `report --elf` makes them.
    stacks: BTreeSet<u16>,
    /// Whether what comes from the dump is written with its control characters
    /// escaped ([`crate::text::Controls`]).
    escape: bool,
}

impl Section {
    /// The renderer of this section's events' text ([`Texts`]).
    pub fn texts(&self) -> Texts<'_> {
        Texts {
            descriptors: &self.descriptors,
            formats: self
                .descriptors
                .iter()
                .filter(|(_, d)| d.kind == DescriptorKind::Event)
                .map(|(&id, d)| (id, Compiled::new(&d.format, &d.fields())))
                .collect(),
            // The events of `stacktrace` triggers (as the format files know them).
            stacks: (self.ids_of("ftrace", "kernel_stack").into_iter())
                .filter(|id| {
                    let frames = self.descriptors[id].fields.iter().skip(1);
                    frames.map(|f| f.kind).all(|kind| kind == field::FieldKind::Str)
                })
                .collect(),
            escape: false,
        }
    }
}

impl Texts<'_> {
    /// The same renderer, writing the dump's strings and format text with their
    /// control characters escaped ([`crate::text::Controls`]), as a line of text
    /// shows them; the layout's own line breaks (a named stack's) stay.
    pub fn escaping_controls(self) -> Self {
        Texts { escape: true, ..self }
    }

    /// Replaces `text` with `event`'s text: at most [`MAX_EVENT_TEXT`] bytes (a
    /// longer one is cut at a character and ends with `[...]`), empty for an event
    /// without a descriptor.
    pub fn render(&self, event: &Event, text: &mut String) {
        text.clear();
        let _ = self.write(event, &mut Capped::new(text));
    }

    /// `event`'s text, as [`Texts::render`] writes it.
    pub fn text(&self, event: &Event) -> String {
        let mut text = String::new();
        self.render(event, &mut text);
        text
    }

    /// Writes `event`'s text to `out`.
    fn write(&self, event: &Event, out: &mut dyn core::fmt::Write) -> core::fmt::Result {
        let Some(d) = self.descriptors.get(&event.id) else { return Ok(()) };
        if let Some((depth, frames)) = self.named_stack(event) {
            let frame = |out: &mut dyn core::fmt::Write, name: &&str| match self.escape {
                true => write!(out, "{}", crate::text::Controls(name)),
                false => out.write_str(name),
            };
            return crate::symtab::write_stack_lines(out, depth, &frames, frame);
        }
        let mut escaped = crate::text::EscapeControls(&mut *out);
        let out: &mut dyn core::fmt::Write = if self.escape { &mut escaped } else { out };
        let values: Vec<field::Value<'_>> = event.values.iter().map(Value::borrowed).collect();
        match (d.kind, self.formats.get(&event.id)) {
            (DescriptorKind::Event, Some(format)) => format.render(out, &values, event.error, None),
            (DescriptorKind::Event, None) => Ok(()),
            (DescriptorKind::Printk, _) => {
                crate::event::format::render_arguments(out, &d.format, &values, event.error, None)
            }
        }
    }

    /// The depth and frames of `event` if it is an `ftrace:kernel_stack` whose
    /// frames are names and its values decoded: its first the depth, every other a
    /// string.
    fn named_stack<'e>(&self, event: &'e Event) -> Option<(usize, Vec<&'e str>)> {
        if !self.stacks.contains(&event.id) {
            return None;
        }
        let (Value::Unsigned(depth), frames) = event.values.split_first()? else { return None };
        let names = frames.iter().map(|v| match v {
            Value::Str(name) => Some(name.as_str()),
            _ => None,
        });
        let names: Option<Vec<&str>> = names.collect();
        Some((usize::try_from(*depth).unwrap_or(usize::MAX), names?))
    }
}

/// The events each CPU of `instance` lost after its last record: its lost items'
/// total less those attached to its records.
fn lost_after(instance: &DumpInstance) -> BTreeMap<usize, u64> {
    let mut after = instance.lost.clone();
    for record in &instance.records {
        if let Some(lost) = after.get_mut(&record.cpu) {
            *lost = lost.saturating_sub(record.lost_before);
        }
    }
    after.retain(|_, lost| *lost > 0);
    after
}

impl Section {
    /// The instance and buffer for headings: `top`, `latency (snapshot)`.
    pub fn heading(&self) -> String {
        match self.buffer {
            BufferKind::Live => self.instance.clone(),
            BufferKind::Snapshot => format!("{} (snapshot)", self.instance),
        }
    }

    /// The ids of the section's descriptors named `system:name`.
    pub fn ids_of(&self, system: &str, name: &str) -> Vec<u16> {
        let named = |d: &&DumpDescriptor| d.system == system && d.name == name;
        self.descriptors.values().filter(named).map(|d| d.id).collect()
    }

    /// The descriptor of an event id, if the dump carries one.
    pub fn descriptor(&self, id: u16) -> Option<&DumpDescriptor> {
        self.descriptors.get(&id)
    }

    /// The CPUs the outputs give a track (a row, a stream) to, ascending: CPUs
    /// `0..cpus` (at most [`MAX_CPUS`] of them, so a corrupt count cannot blow up
    /// the output), every CPU with a stats entry, and every CPU an event names.
    pub fn cpu_ids(&self) -> Vec<usize> {
        let mut ids: BTreeSet<usize> = (0..self.cpus.min(MAX_CPUS).max(self.stats.len())).collect();
        ids.extend(self.events.iter().map(|e| e.cpu));
        ids.extend(self.lost_after.keys());
        ids.into_iter().collect()
    }

    /// Each CPU's [`Section::lost_after`] with the time of its last event (0 if it
    /// has none), where an output places them: `(cpu, time, lost)`.
    pub fn losses_after(&self) -> impl Iterator<Item = (usize, u64, u64)> + '_ {
        self.lost_after.iter().map(|(&cpu, &lost)| {
            let last = self.events.iter().rev().find(|e| e.cpu == cpu).map_or(0, |e| e.ts);
            (cpu, last, lost)
        })
    }

    /// The stats of one CPU (zeroes if the dump has none for it).
    pub fn cpu_stats(&self, cpu: usize) -> DumpStats {
        self.stats.get(cpu).copied().unwrap_or_default()
    }

    /// The display name of an event: `system:name`, or `unknown event id N`.
    pub fn event_name(&self, id: u16) -> String {
        match self.descriptor(id) {
            Some(d) => d.full_name(),
            None => format!("unknown event id {id}"),
        }
    }
}

impl Value {
    /// The value as the field codec's [`field::Value`], borrowing its bytes.
    pub fn borrowed(&self) -> field::Value<'_> {
        match self {
            Value::Unsigned(v) => field::Value::Unsigned(*v),
            Value::Signed(v) => field::Value::Signed(*v),
            Value::Bool(v) => field::Value::Bool(*v),
            Value::Char(v) => field::Value::Char(*v),
            Value::Bytes(v) => field::Value::Bytes(v),
            Value::Str(v) => field::Value::Str(v),
        }
    }

    /// An integer, bool or char as the low bits of a 64-bit integer (two's complement
    /// for signed; bools 0/1, chars their scalar value), as filters compare it.
    /// `None` for bytes and strings.
    pub fn integer(&self) -> Option<u64> {
        match self {
            Value::Unsigned(v) => Some(*v),
            Value::Signed(v) => Some(*v as u64),
            Value::Bool(v) => Some(u64::from(*v)),
            Value::Char(v) => Some(u64::from(u32::from(*v))),
            Value::Bytes(_) | Value::Str(_) => None,
        }
    }

    /// The value's bytes, little-endian for numbers (8 bytes for integers, 4 for a
    /// char, 1 for a bool), UTF-8 for strings. Used for hex dumps of events that
    /// have no descriptor.
    pub fn raw_bytes(&self) -> Vec<u8> {
        match self {
            Value::Unsigned(v) => v.to_le_bytes().to_vec(),
            Value::Signed(v) => v.to_le_bytes().to_vec(),
            Value::Bool(b) => alloc::vec![u8::from(*b)],
            Value::Char(c) => u32::from(*c).to_le_bytes().to_vec(),
            Value::Bytes(b) => b.clone(),
            Value::Str(s) => s.as_bytes().to_vec(),
        }
    }
}

/// Space-separated lowercase hex of the values' raw bytes (see [`Value::raw_bytes`]).
pub fn hex_dump(values: &[Value]) -> String {
    hex_bytes(&values.iter().flat_map(Value::raw_bytes).collect::<Vec<_>>())
}

/// Space-separated lowercase hex of `bytes`, e.g. `01 ab ff`.
pub fn hex_bytes(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 3);
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// A nanosecond timestamp as `seconds.nanoseconds`, e.g. `12.000345678`.
pub fn format_ts(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_keep_all_nanoseconds() {
        assert_eq!(format_ts(0), "0.000000000");
        assert_eq!(format_ts(12_000_345_678), "12.000345678");
        assert_eq!(format_ts(u64::MAX), "18446744073.709551615");
    }

    /// An event's text keeps at most [`MAX_EVENT_TEXT`] bytes, cut at a character
    /// and marked: a crafted format repeating a field made each 4-byte record of a
    /// dump hundreds of times its size in text.
    #[test]
    #[cfg_attr(miri, ignore = "single-threaded safe code, run natively (18 s under Miri)")]
    fn an_events_text_is_capped() {
        use super::super::read::{DumpField, DumpInstance};
        use crate::field::FieldKind;
        let text_of = |format: String, payload: Vec<u8>| {
            let descriptor = DumpDescriptor {
                id: 1,
                kind: DescriptorKind::Event,
                system: "s".into(),
                name: "e".into(),
                format,
                fields: alloc::vec![DumpField { name: "s".into(), kind: FieldKind::Str }],
                timeline: crate::event::Timeline::Instant,
            };
            let record = DumpRecord {
                cpu: 0,
                ts: 0,
                id: 1,
                context: Context::TASK,
                lost_before: 0,
                payload,
            };
            let mut dump = Dump { cpus: Some(1), ..Dump::default() };
            dump.descriptors.insert(1, descriptor);
            let instance = DumpInstance { records: alloc::vec![record], ..DumpInstance::default() };
            dump.instances.insert(0, instance);
            let section = &dump.sections()[0];
            section.texts().text(&section.events[0])
        };
        // 2-byte characters: 1000 placeholders of 10 bytes each.
        let lambdas = "λ".repeat(5);
        let mut payload = (lambdas.len() as u16).to_le_bytes().to_vec();
        payload.extend(lambdas.as_bytes());
        let text = text_of("{s}".repeat(1000), payload.clone());
        assert!(text.len() <= MAX_EVENT_TEXT && text.len() > MAX_EVENT_TEXT - 8, "{}", text.len());
        assert!(text.ends_with("λ[...]"), "cut at a character: {}", &text[text.len() - 12..]);
        // What fits is whole; undecodable payloads are capped alike.
        assert_eq!(text_of("{s}".repeat(3), payload), lambdas.repeat(3));
        let short = text_of("{s}".repeat(1000), Vec::new());
        assert!(short.len() <= MAX_EVENT_TEXT && short.ends_with("[...]"));
    }

    #[test]
    fn hex_dump_is_little_endian_per_value() {
        let v = [
            Value::Unsigned(0x0102),
            Value::Bool(true),
            Value::Bytes(alloc::vec![0xab]),
            Value::Str("A".into()),
        ];
        assert_eq!(hex_dump(&v), "02 01 00 00 00 00 00 00 01 ab 41");
        assert_eq!(hex_dump(&[]), "");
    }

    /// The sections of a dump share its descriptors, and each record's text is the
    /// one [`crate::event::format::render`] gives, where its payload does not
    /// decode too.
    #[test]
    fn sections_share_descriptors_and_render_as_the_kernel_does() {
        use super::super::read::DumpField;
        use crate::field::FieldKind;
        let fields = [("a", FieldKind::U8), ("s", FieldKind::Str), ("b", FieldKind::U8)];
        let descriptor = DumpDescriptor {
            id: 1,
            kind: DescriptorKind::Event,
            system: "s".into(),
            name: "e".into(),
            format: "{b} {s} {a:#x} {} {c}".into(),
            fields: fields.iter().map(|&(n, kind)| DumpField { name: n.into(), kind }).collect(),
            timeline: crate::event::Timeline::Instant,
        };
        // Whole; a string that is not UTF-8; cut inside the string; empty.
        let payloads = [&[7, 2, 0, b'h', b'i', 9][..], &[7, 1, 0, 0xff, 9], &[7, 5, 0, b'h'], &[]];
        let record = |payload: &[u8]| DumpRecord {
            cpu: 0,
            ts: 0,
            id: 1,
            context: Context::TASK,
            lost_before: 0,
            payload: payload.to_vec(),
        };
        let instance = DumpInstance {
            records: payloads.iter().map(|p| record(p)).collect(),
            ..DumpInstance::default()
        };
        let mut dump = Dump { cpus: Some(1), ..Dump::default() };
        dump.descriptors.insert(1, descriptor.clone());
        dump.instances.insert(0, instance.clone());
        dump.instances.insert(1, instance);
        let sections = dump.sections();
        assert!(Arc::ptr_eq(&sections[0].descriptors, &sections[1].descriptors));
        let texts = sections[1].texts();
        for (event, payload) in sections[1].events.iter().zip(payloads) {
            let mut text = String::new();
            let fields = descriptor.fields();
            crate::event::format::render(&mut text, &descriptor.format, &fields, payload, None)
                .unwrap();
            assert_eq!(texts.text(event), text);
        }
        assert_eq!(sections[0].texts().text(&sections[0].events[0]), "9 hi 0x7 7 <no field c>");
    }

    #[test]
    fn cpu_ids_cover_stray_cpus_and_ignore_absurd_counts() {
        let mut t = Section { cpus: 2, ..Section::default() };
        assert_eq!(t.cpu_ids(), [0, 1]);
        t.stats = alloc::vec![DumpStats::default(); 3];
        assert_eq!(t.cpu_ids(), [0, 1, 2]);
        t.events.push(Event {
            context: Context::TASK,
            cpu: 5000,
            ts: 0,
            id: 0,
            values: Vec::new(),
            lost_before: 0,
            error: DecodeError::Truncated,
        });
        assert_eq!(t.cpu_ids(), [0, 1, 2, 5000]);
        t.cpus = usize::MAX;
        assert_eq!(t.cpu_ids().len(), MAX_CPUS + 1);
        assert_eq!(t.cpu_stats(9), DumpStats::default());
    }
}
