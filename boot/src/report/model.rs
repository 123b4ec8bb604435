//! The decoded form of one dump: what the dump parser produces and every output
//! backend (text, stat, Perfetto, CTF) consumes.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// Most CPUs taken from [`Trace::cpus`] alone when choosing per-CPU tracks.
pub const MAX_CPUS: usize = 4096;

/// One decoded dump.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trace {
    /// Instance name, `""` or `"top"` for the top-level instance.
    pub instance: String,
    /// Which of the instance's buffers: live, or its snapshot.
    pub buffer: BufferKind,
    /// Number of CPUs the dump covers.
    pub cpus: usize,
    /// Event id -> descriptor.
    pub descriptors: BTreeMap<u16, Descriptor>,
    /// All events, merged in timestamp order (ties: lower CPU first).
    pub events: Vec<Event>,
    /// Older records the kernel left out of the dump (`dump last N`).
    pub skipped: u64,
    /// One entry per CPU, index = CPU.
    pub stats: Vec<CpuStats>,
    /// The panic that produced the dump; `None` for a live `dump`.
    pub panic: Option<PanicInfo>,
}

/// A tracepoint descriptor, as carried in the dump.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Descriptor {
    /// Event id (the key in [`Trace::descriptors`]).
    pub id: u16,
    /// Event system, e.g. `irq`.
    pub system: String,
    /// Event name, e.g. `irq_handler_entry`.
    pub name: String,
    /// Format string the event's text is rendered with.
    pub format: String,
    /// The event's fields, in record order.
    pub fields: Vec<FieldDesc>,
    /// What the event is on a timeline, as its `event!` declared.
    pub timeline: Timeline,
}

/// A descriptor's timeline role (the dump's own, its strings owned).
pub type Timeline = trace::event::Timeline<String>;

/// One field of a descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldDesc {
    /// Field name.
    pub name: String,
    /// Field type.
    pub kind: FieldKind,
}

/// The type of an event field: the tracer's own.
pub use trace::field::FieldKind;

/// One decoded event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// CPU that recorded the event.
    pub cpu: usize,
    /// Timestamp, nanoseconds since boot.
    pub ts: u64,
    /// Event id (key into [`Trace::descriptors`]).
    pub id: u16,
    /// What the CPU was running when it recorded the event.
    pub context: trace::Context,
    /// One value per descriptor field, same order.
    pub values: Vec<Value>,
    /// Events of this CPU lost just before this one (0 normally).
    pub lost_before: u64,
    /// The fields already rendered with the descriptor's format string.
    pub text: String,
}

/// A decoded field value.
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// Per-CPU ring statistics carried in the dump: the parser's own.
pub use trace::dump::DumpStats as CpuStats;

/// Which buffer of an instance a trace holds: the dump's own.
pub use trace::dump::BufferKind;

/// Where and why the kernel panicked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PanicInfo {
    /// CPU that panicked.
    pub cpu: usize,
    /// Panic message.
    pub message: String,
    /// Source location, `file:line:col`.
    pub location: String,
}

impl Trace {
    /// The instance name for display: `"top"` for the top-level instance.
    pub fn instance_name(&self) -> &str {
        if self.instance.is_empty() { "top" } else { &self.instance }
    }

    /// The instance and buffer for headings: `top`, `latency (snapshot)`.
    pub fn heading(&self) -> String {
        match self.buffer {
            BufferKind::Live => self.instance_name().into(),
            BufferKind::Snapshot => format!("{} (snapshot)", self.instance_name()),
        }
    }

    /// The descriptor of an event id, if the dump carries one.
    pub fn descriptor(&self, id: u16) -> Option<&Descriptor> {
        self.descriptors.get(&id)
    }

    /// The CPUs the outputs give a track (a row, a stream) to, ascending: CPUs
    /// `0..cpus` (at most [`MAX_CPUS`] of them, so a corrupt count cannot blow
    /// up the output), every CPU with a stats entry, and every CPU an event names.
    pub fn cpu_ids(&self) -> Vec<usize> {
        let mut ids: BTreeSet<usize> = (0..self.cpus.min(MAX_CPUS).max(self.stats.len())).collect();
        ids.extend(self.events.iter().map(|e| e.cpu));
        ids.into_iter().collect()
    }

    /// The stats of one CPU (zeroes if the dump has none for it).
    pub fn cpu_stats(&self, cpu: usize) -> CpuStats {
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

impl Descriptor {
    /// `system:name`.
    pub fn full_name(&self) -> String {
        format!("{}:{}", self.system, self.name)
    }
}

impl Value {
    /// The value's bytes, little-endian for numbers (8 bytes for integers, 4 for a
    /// char, 1 for a bool), UTF-8 for strings. Used for hex dumps of events that
    /// have no descriptor.
    pub fn raw_bytes(&self) -> Vec<u8> {
        match self {
            Value::Unsigned(v) => v.to_le_bytes().to_vec(),
            Value::Signed(v) => v.to_le_bytes().to_vec(),
            Value::Bool(b) => vec![u8::from(*b)],
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

    #[test]
    fn hex_dump_is_little_endian_per_value() {
        let v = [
            Value::Unsigned(0x0102),
            Value::Bool(true),
            Value::Bytes(vec![0xab]),
            Value::Str("A".into()),
        ];
        assert_eq!(hex_dump(&v), "02 01 00 00 00 00 00 00 01 ab 41");
        assert_eq!(hex_dump(&[]), "");
    }

    #[test]
    fn cpu_ids_cover_stray_cpus_and_ignore_absurd_counts() {
        let mut t = Trace { cpus: 2, ..Trace::default() };
        assert_eq!(t.cpu_ids(), [0, 1]);
        t.stats = vec![CpuStats::default(); 3];
        assert_eq!(t.cpu_ids(), [0, 1, 2]);
        t.events.push(Event {
            context: trace::Context::TASK,
            cpu: 5000,
            ts: 0,
            id: 0,
            values: vec![],
            lost_before: 0,
            text: String::new(),
        });
        assert_eq!(t.cpu_ids(), [0, 1, 2, 5000]);
        t.cpus = usize::MAX;
        assert_eq!(t.cpu_ids().len(), MAX_CPUS + 1);
        assert_eq!(t.instance_name(), "top");
        assert_eq!(t.cpu_stats(9), CpuStats::default());
    }
}
