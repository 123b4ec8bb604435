//! A flight recorder for Rust kernels.
//!
//! `trace` is a `no_std` tracing subsystem in the spirit of Linux's ftrace: per-CPU
//! ring buffers written from any context, static tracepoint descriptors, instances
//! and snapshots. It does not depend on any particular kernel; the kernel supplies a
//! small platform trait.
#![cfg_attr(not(test), no_std)]
