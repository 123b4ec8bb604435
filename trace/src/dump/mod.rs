//! The trace dump: what a panic (or the `dump` command) writes to the serial line,
//! the parser the host tool reads it back with ([`parse`], [`Reader`]), and the
//! decoded sections its outputs consume ([`Dump::sections`]). One definition of the
//! format and one model of its contents, used on both sides.
//!
//! # Format
//!
//! A dump is a block of text lines, robust to other output around it:
//!
//! ```text
//! <<<TRACE-DUMP v1 BEGIN>>>
//! TD 0 <base64 of chunk 0> <crc32 of chunk 0, 8 hex digits>
//! TD 1 ...
//! <<<TRACE-DUMP v1 END chunks=N>>>
//! ```
//!
//! Lines that do not start with `TD ` between the markers are ignored. Each chunk is
//! at most [`CHUNK_BYTES`] bytes and holds whole *items*, so a chunk that is lost or
//! corrupted (its CRC does not match) costs only its own items: the parser names it
//! and reports everything else. An item is a kind byte, a varint length and a body
//! (integers are LEB128 varints, strings a varint length and UTF-8):
//!
//! | kind | item | body |
//! |---|---|---|
//! | 1 | header | version, CPU count, panic flag, then if set: CPU, message, location; then (absent in dumps before it) a symbols flag, then if set the fingerprint of the kernel's symbol table ([`crate::symtab::SymbolTable::fingerprint`]), then (absent in dumps before it) a nested panic flag, then if set the message and location of a panic while the first was reported |
//! | 2 | descriptor | id, kind (0 event, 1 printk), system, name, format, field count, fields (name, type tag, for byte arrays the length), then (absent in dumps before it: an instant) the [`crate::event::Timeline`]: 0 instant, 1 begin or 2 end followed by label and key (empty: none), 3 counter, 4 span followed by label and duration field |
//! | 3 | section | section number, instance name, buffer (0 live, 1 snapshot; absent in version 1: live), then (absent in dumps before it: local) the clock of its timestamps ([`crate::ring::Clock`]): 0 local, 1 global, 2 counter, 3 x86-tsc, 4 uptime, 5 perf, 6 mono, 7 mono_raw, 8 boot |
//! | 4 | CPU statistics | section, CPU, written, entries, overrun, dropped, read, commit overrun, then (absent in dumps before them: 0) the writes a panic's seal left out, the bytes it could not read, and the bytes of writes in progress, unsealed ([`crate::ring::RingStats`]) |
//! | 5 | records (without context) | section, then records to the end of the item: CPU, timestamp (the first absolute, then zigzag deltas from the previous record), `id << 1 \| compact`, payload |
//! | 6 | skipped | section, number of older records left out by the cap on the last N |
//! | 7 | records | as kind 5, each record's tag being `id << 5 \| context << 1 \| compact` (the writer's [`crate::Context`], four bits) |
//! | 8 | lost | section, CPU, number of that CPU's events lost (overwritten before a consuming reader got them) |
//! | 9 | another CPU's panic | CPU, message, location of a panic on another CPU while the header's was under way (in a chunk of its own, after the header's) |
//!
//! Writers write kind 7; dumps written before records kept their context have kind 5,
//! whose records read back with [`crate::Context::UNKNOWN`].
//!
//! A *stream* (`trace_pipe_raw`) is a dump written while a consuming reader runs: the
//! header, descriptors and sections first, then records and lost items chunk by chunk
//! as events arrive, with partial chunks flushed whenever the reader waits.
//!
//! A *section* is one buffer of one instance: its live buffer, or the snapshot it
//! keeps (ftrace's `snapshot` file). Each has its own number, statistics and
//! records, so an instance with a snapshot takes two sections, both under its name.
//!
//! The markers' `v1` is the version of the line framing (markers and chunk lines);
//! the version of the items is the header's ([`VERSION`]); the reader takes every
//! version in [`VERSIONS`]:
//!
//! | version | change |
//! |---|---|
//! | 1 | the first |
//! | 2 | a section item ends with its buffer: snapshots are dumped beside live buffers; records carry their writer's context (kind 7) |
//!
//! A writer may repeat descriptors (the kernel writes them before and after the
//! records) so that one damaged chunk costs no record; the parser keeps one of each.
//!
//! A *compact* payload stores an event's fields in field order with integers as
//! varints (signed ones zigzagged), `char` as a varint, byte arrays raw and strings
//! with a varint length; the parser expands it back to the record format using the
//! dump's own descriptors, so the dump is self-describing. Other payloads are stored
//! raw (varint length, bytes).

mod codec;
mod model;
mod read;
mod write;

pub(crate) use model::Decoded;
pub use model::{Event, MAX_EVENT_TEXT, Section, Texts, Value, format_ts, hex_bytes, hex_dump};
pub use read::{
    Dump, DumpDescriptor, DumpField, DumpInstance, DumpRecord, DumpStats, NestedPanic,
    OtherPanicReport, PanicReport, Problem, Reader, decode_chunk, parse,
};
pub use write::{DumpWriter, OtherPanic, PanicHeader, encode_chunk};

/// Largest chunk, in bytes before base64.
pub const CHUNK_BYTES: usize = 384;
/// The line that starts a dump.
pub const BEGIN: &str = "<<<TRACE-DUMP v1 BEGIN>>>";
/// The start of the line that ends a dump.
pub const END: &str = "<<<TRACE-DUMP v1 END";
/// Most CPUs a dump covers: a larger count in a header, or a CPU number at or
/// above it, is refused as damage.
pub const MAX_CPUS: usize = 256;
/// Most instances a dump holds.
pub const MAX_INSTANCES: u64 = 64;
/// Most sections a dump holds (each instance's live buffer and snapshot): a larger
/// section number is refused as damage.
pub const MAX_SECTIONS: u64 = 2 * MAX_INSTANCES;
/// The format version writers write.
pub const VERSION: u64 = 2;
/// The format versions the reader takes (see the table above).
pub const VERSIONS: core::ops::RangeInclusive<u64> = 1..=VERSION;

/// Which buffer of an instance a section holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BufferKind {
    /// The live buffer, where writers record.
    #[default]
    Live,
    /// The snapshot: the buffer a snapshot swapped out of recording.
    Snapshot,
}

impl BufferKind {
    /// Its code in a section item.
    const fn code(self) -> u64 {
        match self {
            BufferKind::Live => 0,
            BufferKind::Snapshot => 1,
        }
    }

    /// The buffer of code `code`, if there is one.
    const fn from_code(code: u64) -> Option<Self> {
        match code {
            0 => Some(BufferKind::Live),
            1 => Some(BufferKind::Snapshot),
            _ => None,
        }
    }

    /// Its name: `live` or `snapshot`.
    pub const fn name(self) -> &'static str {
        match self {
            BufferKind::Live => "live",
            BufferKind::Snapshot => "snapshot",
        }
    }
}

/// Item kinds.
mod kind {
    pub const HEADER: u8 = 1;
    pub const DESCRIPTOR: u8 = 2;
    pub const SECTION: u8 = 3;
    pub const CPU_STATS: u8 = 4;
    pub const RECORDS_WITHOUT_CONTEXT: u8 = 5;
    pub const SKIPPED: u8 = 6;
    pub const RECORDS: u8 = 7;
    pub const LOST: u8 = 8;
    pub const OTHER_PANIC: u8 = 9;
}
