//! A flight recorder for Rust kernels.
//!
//! `trace` is a `no_std` tracing subsystem in the spirit of Linux's ftrace: per-CPU
//! ring buffers written from any context, static tracepoint descriptors, instances
//! and snapshots. It does not depend on any particular kernel; the kernel supplies a
//! small platform trait.
//!
//! The core is lock-free and safe Rust but for one small module (the read-copy-update
//! cell writers read instance slots through; see `DESIGN.md`):
//!
//! - [`Platform`]: what the kernel supplies (current CPU, clock, the two halves of an
//!   asymmetric barrier).
//! - [`Buffer`]: a buffer set, one ring per CPU: [`Buffer::write`], [`Buffer::write_with`],
//!   readers ([`Buffer::iter`], [`Buffer::consumer`], [`Buffer::merged_iter`],
//!   [`Buffer::merged_consumer`]), [`Buffer::stats`], clear and resize.
//! - [`Recorder`]: a live set plus a spare, with [`Recorder::swap`] for snapshots.
//! - [`event!`] / [`emit!`]: static tracepoints, collected by the linker in the
//!   `trace_events` section, recorded raw and formatted at read time ([`format`]).
//! - [`Tracer`] and [`Instance`]: the descriptors numbered at boot, and named
//!   instances with the `trace_array_*` API; [`printk!`] and the [`log`] bridge.
//! - [`Filter`] and [`Trigger`]: ftrace's event filters and triggers, per event per
//!   instance ([`Instance::set_filter`], [`Instance::set_trigger`]), compiled when set
//!   and evaluated from any context.
//!
//! The ring's design (record format, protocols, memory orderings) is in `DESIGN.md`.
//!
//! ```
//! use trace::{Buffer, Config, Mode, Platform, Recorder, Sink};
//!
//! /// The kernel's platform: here a single CPU and a counter for a clock.
//! #[derive(Clone)]
//! struct Kernel(core::cell::Cell<u64>);
//! impl Platform for Kernel {
//!     fn cpu(&self) -> usize { 0 } // e.g. read from the GS-based per-CPU area
//!     fn now(&self) -> u64 { let t = self.0.get() + 1; self.0.set(t); t } // e.g. scaled TSC
//! }
//!
//! let cfg = Config { cpus: 1, bytes_per_cpu: 4096, mode: Mode::Overwrite };
//! let rec = Recorder::new(Kernel(Default::default()), cfg, true)?;
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
// `no_std` on bare metal; on a host the crate also offers `HostPlatform` (std).
#![cfg_attr(any(target_os = "none", target_os = "uefi"), no_std)]
// Safe Rust but for one module, `rcu` (see there and DESIGN.md for why).
#![deny(unsafe_code)]

extern crate alloc;

mod buffer;
mod context;
mod dispatch;
pub mod dump;
mod error;
mod event;
mod field;
mod filter;
pub mod format;
pub mod format_file;
mod instance;
pub mod log;
pub mod persist;
mod platform;
mod rcu;
mod reader;
mod record;
mod recorder;
mod ring;
mod section;
mod stats;
mod sync;
pub mod text;
mod tracer;
mod trigger;

#[cfg(test)]
mod tests;

pub use buffer::{Buffer, Config};
pub use context::{Activity, Context};
pub use dispatch::{Dispatch, Payload, install};
pub use error::{Error, WriteError};
pub use event::{
    Args, DescriptorKind, Event, EventDescriptor, FieldArg, MAX_EVENT_PAYLOAD, Timeline, glob,
};
pub use field::{DecodeError, Decoder, Encoder, Field, FieldKind, FieldValue, Sink, Value};
pub use filter::{Filter, FilterError, FilterReason, MAX_FILTER_LEN, MAX_PREDICATES};
pub use instance::{HookError, Instance, InstanceConfig, InstanceError, MAX_NAME};
#[cfg(not(any(target_os = "none", target_os = "uefi")))]
pub use platform::HostPlatform;
pub use platform::Platform;
pub use reader::{Consumer, Cursor, Merged, Meta, RecordRef, RingIter};
pub use record::{ANCHOR_ID, MAX_EVENT_ID, MAX_PAYLOAD, Mode, PAD_ID};
pub use recorder::Recorder;
pub use ring::RecordWriter;
pub use stats::{MAX_DEPTH, Refused, RingStats};
pub use tracer::{InstanceView, Limits, MARKER, MAX_INSTANCES, Tracer, TracerError};
pub use trigger::{
    Action, MAX_TRIGGER_LEN, MAX_TRIGGERS, STACK_FRAMES, STACK_TRACE, Trigger, TriggerCommand,
    TriggerError, TriggerReason,
};
