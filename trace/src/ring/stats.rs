//! Per-CPU counters and the statistics a reader sees.

use crate::sync::{AtomicU64, Ordering::Relaxed};

/// Most writers that may nest on one CPU (thread, softirq, IRQ, NMI, and spare levels).
/// A writer nested deeper is dropped and counted.
pub const MAX_DEPTH: usize = 8;

/// The counters of one nesting depth of one ring. Only the writer currently running at
/// that depth on the ring's CPU writes them (writers nest like a stack, so there is one
/// at a time), which makes a plain load and store an exact increment.
#[derive(Default)]
pub(crate) struct DepthCounters {
    /// Events committed.
    pub(crate) committed: AtomicU64,
    /// Events dropped (discard mode full, or commit overrun).
    pub(crate) dropped: AtomicU64,
    /// Of `dropped`: events that found the space held by an interrupted writer's
    /// uncommitted record.
    pub(crate) commit_overrun: AtomicU64,
    /// Events reclaimed (overwritten) by this depth's writers in overwrite mode.
    pub(crate) overrun: AtomicU64,
}

impl DepthCounters {
    pub(crate) fn reset(&self) {
        for c in [&self.committed, &self.dropped, &self.commit_overrun, &self.overrun] {
            c.store(0, Relaxed);
        }
    }
}

/// A ring's statistics (ftrace's `per_cpu/cpuN/stats`). Exact when no writer or reader
/// of the ring is running; otherwise each field is a recent value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingStats {
    /// Events written while recording was on: committed or dropped.
    pub written: u64,
    /// Events in the ring now (committed, neither read nor overwritten).
    pub entries: u64,
    /// Events lost to overwrite mode (the oldest, reclaimed by writers).
    pub overrun: u64,
    /// Events dropped: discard mode with the ring full, commit overruns, writers
    /// nested deeper than [`MAX_DEPTH`], and refused writes.
    pub dropped: u64,
    /// Of `dropped`: writes refused before anything was reserved, by reason.
    pub refused: Refused,
    /// Of `dropped`: a nested writer found the space held by the record an interrupted
    /// writer had reserved but not committed.
    pub commit_overrun: u64,
    /// Events taken by the consuming reader.
    pub read: u64,
    /// Bytes of the ring in use now (headers and anchors included).
    pub bytes: u64,
    /// Bytes reserved by writers of the ring's CPU that have not all finished: a
    /// write in progress, or one a panic stopped on a CPU not sealed since, which
    /// keeps itself and every record written after it (counted in `written`, not in
    /// `entries`) from being read.
    pub unpublished: u64,
    /// Writes a panic stopped before they finished, left out when the panic sealed
    /// the CPU's rings (`Tracer::seal_cpu`); not counted in `written`.
    pub stopped: u64,
    /// Bytes the seal left out because it could not read them all as records (a
    /// write stopped between its reservation and its header's store): every byte
    /// reserved since the CPU last published, records of other writes among them.
    pub unreadable: u64,
    /// Capacity of the ring in bytes.
    pub capacity: u64,
    /// Timestamp of the oldest event in the ring, if any.
    pub oldest_ts: Option<u64>,
}

/// Writes refused before anything was reserved, by reason (each is also counted in
/// [`RingStats::dropped`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Refused {
    /// The payload was larger than a record of the ring can hold.
    pub too_large: u64,
    /// The event id is one the record format reserves.
    pub reserved_id: u64,
    /// The platform reported a CPU beyond the buffer set (counted on CPU 0).
    pub bad_cpu: u64,
    /// The ring had been found corrupt.
    pub corrupt: u64,
}

impl Refused {
    /// All refused writes.
    pub fn total(&self) -> u64 {
        self.too_large + self.reserved_id + self.bad_cpu + self.corrupt
    }
}

impl RingStats {
    /// `written == entries + read + overrun + dropped`: the accounting identity. It
    /// holds exactly at quiescent points, unless a panic's seal left records out
    /// (`unreadable` above 0: records written among the words it could not read).
    pub fn balanced(&self) -> bool {
        self.written == self.entries + self.read + self.overrun + self.dropped
    }
}
