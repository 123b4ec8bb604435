//! A flight recorder for Rust kernels.
//!
//! `trace` is a `no_std` tracing subsystem in the spirit of Linux's ftrace: per-CPU
//! ring buffers written from any context, static tracepoint descriptors, instances
//! and snapshots. It does not depend on any particular kernel; the kernel supplies a
//! small platform trait.
//!
//! The core is lock-free and free of `unsafe`:
//!
//! - [`Platform`]: what the kernel supplies (current CPU, clock).
//! - [`Buffer`]: a buffer set, one ring per CPU: [`Buffer::write`], [`Buffer::reserve`],
//!   readers ([`Buffer::iter`], [`Buffer::consumer`], [`Buffer::merged_iter`],
//!   [`Buffer::merged_consumer`]), [`Buffer::stats`], clear and resize.
//! - [`Recorder`]: a live set plus a spare, with [`Recorder::swap`] for snapshots.
//! - [`event!`] / [`emit!`]: static tracepoints, collected by the linker in the
//!   `trace_events` section, recorded raw and formatted at read time ([`format`]).
//! - [`Tracer`] and [`Instance`]: the descriptors numbered at boot, and named
//!   instances with the `trace_array_*` API; [`printk!`] and the [`log`] bridge.
//!
//! The ring's design (record format, protocols, memory orderings) is in `DESIGN.md`.
// `no_std` on bare metal; on a host the crate also offers `HostPlatform` (std).
#![cfg_attr(any(target_os = "none", target_os = "uefi"), no_std)]
#![forbid(unsafe_code)]

extern crate alloc;

mod buffer;
mod dispatch;
pub mod dump;
mod error;
mod event;
mod field;
pub mod format;
mod instance;
pub mod log;
mod platform;
mod reader;
mod record;
mod recorder;
mod ring;
mod stats;
mod sync;
mod tracer;

#[cfg(test)]
mod tests;

pub use buffer::{Buffer, Config, Reservation};
pub use dispatch::{Dispatch, install};
pub use error::{Error, WriteError};
pub use event::{Args, DescriptorKind, Event, EventDescriptor, FieldArg, MAX_EVENT_PAYLOAD, glob};
pub use field::{DecodeError, Decoder, Encoder, Field, FieldKind, FieldValue, Value};
pub use instance::{Instance, InstanceConfig, InstanceError, MAX_NAME};
#[cfg(not(any(target_os = "none", target_os = "uefi")))]
pub use platform::HostPlatform;
pub use platform::Platform;
pub use reader::{Consumer, Cursor, Merged, Meta, RecordRef, RingIter};
pub use record::{ANCHOR_ID, MAX_EVENT_ID, MAX_PAYLOAD, Mode, PAD_ID};
pub use recorder::Recorder;
pub use stats::{MAX_DEPTH, RingStats};
pub use tracer::{InstanceView, Limits, MARKER, MAX_INSTANCES, Tracer, TracerError};
