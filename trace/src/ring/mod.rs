//! The low-level layer: per-CPU rings of raw records, for users who want buffers
//! without the tracer.
//!
//! - [`Buffer`]: a buffer set, one ring per CPU: [`Buffer::write`], [`Buffer::write_with`],
//!   readers ([`Buffer::iter`], [`Buffer::consumer`], [`Buffer::merged_iter`],
//!   [`Buffer::merged_consumer`]), [`Buffer::stats`], clear and resize.
//! - [`Recorder`]: a live set plus a spare, with [`Recorder::swap`] for snapshots.
//! - [`RecordRef`], [`Consumer`], [`Merged`]: the records as readers see them.
//!
//! Inside: `per_cpu` is one CPU's lock-free ring, `record` its header format,
//! `clock` where its timestamps come from, `buffer` one ring per CPU, `recorder` a
//! live set and its snapshot spare (swapped under the per-CPU `section`), `reader`
//! the iterators and consumers, `stats` the counters. The design (record format,
//! protocols, memory orderings) is in `DESIGN.md`.
//!
//! ```
//! use trace::Platform;
//! use trace::field::Sink;
//! use trace::ring::{Config, Mode, Recorder};
//!
//! use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
//!
//! /// The kernel's platform: here a single CPU and a counter for a clock.
//! #[derive(Clone)]
//! struct Kernel;
//! static TICKS: AtomicU64 = AtomicU64::new(0);
//! impl Platform for Kernel {
//!     fn cpu(&self) -> usize { 0 } // e.g. read from the GS-based per-CPU area
//!     fn now(&self) -> u64 { TICKS.fetch_add(1, Relaxed) + 1 } // e.g. scaled TSC
//!     fn may_wait(&self) -> bool { true } // e.g. thread context, interrupts on
//! }
//!
//! let cfg = Config { cpus: 1, bytes_per_cpu: 4096, mode: Mode::Overwrite };
//! let rec = Recorder::new(Kernel, cfg, true)?;
//! rec.write(7, &[1, 2, 3]).unwrap(); // from any context: thread, IRQ, NMI
//! rec.write_with(8, 16, |r| { // or fill the record in place
//!     r.put_u64(0xdead);
//!     r.put_u64(0xbeef);
//! }).unwrap();
//!
//! rec.swap()?; // snapshot: the old live set is now frozen in `rec.snapshot()`
//! let snap = rec.snapshot().unwrap();
//! let mut it = snap.merged_iter()?; // all CPUs, in timestamp order
//! while let Some(e) = it.next_record() {
//!     println!("cpu{} {} id={} {:?}", e.cpu, e.ts, e.id, e.payload);
//! }
//! let mut pipe = rec.live().consumer(0)?; // trace_pipe: consuming, with lost counts
//! assert!(pipe.next_record()?.is_none());
//! assert!(snap.stats(0)?.balanced());
//! # Ok::<(), trace::Error>(())
//! ```

pub(crate) mod buffer;
pub(crate) mod clock;
pub(crate) mod per_cpu;
pub mod persist;
pub(crate) mod reader;
pub(crate) mod record;
pub(crate) mod recorder;
pub(crate) mod section;
pub(crate) mod stats;

pub use crate::error::WriteError;
pub use buffer::{Buffer, Config};
pub use clock::Clock;
pub use per_cpu::RecordWriter;
pub use reader::{Consumer, Cursor, Merged, Meta, ReadScratch, RecordRef, RingIter};
pub use record::{MAX_EVENT_ID, MAX_PAYLOAD, Mode};
pub use recorder::{Change, Recorder};
pub use stats::{MAX_DEPTH, Refused, RingStats};
