//! A flight recorder for Rust kernels.
//!
//! `trace` is a `no_std` tracing subsystem in the spirit of Linux's ftrace: per-CPU
//! ring buffers written from any context, static tracepoint descriptors, instances
//! and snapshots. It does not depend on any particular kernel; the kernel supplies a
//! small platform trait.
//!
//! The core is lock-free and safe Rust but for one small module (the read-copy-update
//! cell writers read instance slots through; see `DESIGN.md`).
//!
//! The root holds what a driver author and the kernel need; the rest sits in its
//! module, each layer using only those below it:
//!
//! - [`event!`] / [`emit!`] / [`printk!`]: static tracepoints, collected by the linker
//!   in the `trace_events` section ([`linked_events!`]) and recorded raw; [`event`](mod@event)
//!   has the descriptors, filters, dispatch, and read-time formatting.
//! - [`Tracer`], [`install`], [`Instance`]: the descriptors numbered at boot, and named
//!   instances with the `trace_array_*` API; [`tracer`] has triggers and the rest.
//! - [`Platform`]: what the kernel supplies (current CPU, clock, context, the two
//!   halves of an asymmetric barrier).
//! - [`ring`]: the low-level per-CPU rings and snapshot recorder, usable alone.
//! - [`field`]: the payload encoding; [`dump`]: the crash dump format, its parser and
//!   its decoded model; [`text`]: the trace line format, shared by the kernel and the
//!   host; [`symtab`]: the kernel's function symbols as a table both sides search;
//!   [`histograms`]: `hist` triggers run over a dump's records, on the host.
//!
//! A driver's path: declare a tracepoint, build the tracer over every linked
//! descriptor, install it, emit, and read an instance:
//!
//! ```
//! use trace::{HostPlatform, InstanceConfig, Limits, Mode, Tracer};
//!
//! trace::event! {
//!     /// A packet arrived.
//!     pub RX = "net":"rx" { queue: u8, len: u32 } => "queue={queue} len={len}";
//! }
//!
//! let cpus = 1;
//! let limits = Limits { max_instances: 4, max_total_bytes: 1 << 20 };
//! let top = InstanceConfig { bytes_per_cpu: 4096, mode: Mode::Overwrite, snapshot: false };
//! let events = trace::linked_events!(); // every `event!` linked into this binary
//! let tracer = Tracer::new(HostPlatform, cpus, events, limits, top).expect("valid events");
//! let tracer = Box::leak(Box::new(tracer)); // the kernel keeps it in a static
//! trace::install(tracer).expect("first install");
//!
//! let net = tracer.get_or_create("net", top).expect("room"); // like instances/net
//! net.set_event(Some("net"), Some("rx"), true).expect("a known event");
//! trace::emit!(RX, 0, 1500); // one load and a branch when no instance enabled it
//!
//! let recorder = net.recorder();
//! let mut records = recorder.live().merged_iter().expect("memory");
//! let record = records.next_record().expect("one record");
//! let descriptor = tracer.descriptor(record.id).expect("a known id");
//! let mut text = String::new();
//! let (format, fields) = (descriptor.format, descriptor.fields);
//! trace::event::format::render(&mut text, format, fields, record.payload, None).expect("valid");
//! assert_eq!(text, "queue=0 len=1500");
//! ```
// `no_std` on bare metal; on a host the crate also offers `HostPlatform` (std).
#![cfg_attr(any(target_os = "none", target_os = "uefi"), no_std)]
// Safe Rust but for one module, `tracer::rcu`, the declaration of
// `CpuPromise::new`, and what the event and key macros expand to in the calling
// crate (the linker-section walks, `link_section`, `asm goto`): DESIGN.md says why.
#![deny(unsafe_code)]

extern crate alloc;

mod context;
pub mod dump;
mod error;
pub mod event;
pub mod field;
pub mod histograms;
pub mod name;
mod platform;
pub mod ring;
pub mod symtab;
mod sync;
pub mod text;
pub mod tracer;

#[cfg(test)]
mod tests;

pub use context::{Activity, Context};
pub use error::Error;
#[cfg(not(any(target_os = "none", target_os = "uefi")))]
pub use platform::HostPlatform;
pub use platform::{CpuPromise, Platform};
pub use ring::{Clock, Mode};
pub use tracer::{
    DestroyError, Instance, InstanceConfig, InstanceError, Limits, Tracer, TracerError, install,
};
