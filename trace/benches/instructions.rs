//! Exact instruction counts per event (timing on a shared VM is too noisy for small
//! differences). Runs one loop of `N` iterations of one mode; run it twice under
//! cachegrind with two `N` and divide the difference of the totals by the difference
//! of the `N`s (start-up cancels out). `trace/benches/count.sh` does that for every
//! mode.
//!
//! Modes: `floor` (TSC read + header and two payload words into a plain array),
//! `disabled` (a disabled tracepoint), `raw` (`Buffer::write` of the 16-byte record),
//! `enabled` (a tracepoint with two `u64` into one instance), `enabled2` (into two),
//! `filter-pass` / `filter-reject` (`enabled` with a two-term integer filter that
//! passes / fails at its first term), `trigger-idle` (`enabled` with a `traceon`
//! trigger while recording is on: it has nothing to do), `hist` (a `hist` trigger
//! keyed on `a % 64`'s field, summing `b`, on the event recorded in no instance: the
//! histogram's cost alone), `unpromised` (`enabled` on a platform that makes no
//! [`trace::Platform::PROMISE`]).

use std::hint::black_box;
mod common;
use common::{BenchPlatform, Unpromised, tsc};
use trace::{InstanceConfig, Limits, Mode, Platform, Tracer};

trace::event! {
    /// Two integers, the reference shape.
    pub BENCH = "bench":"event" { a: u64, b: u64 } => "a={a} b={b}";
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().expect("usage: instructions MODE N");
    let n: u64 = args.next().and_then(|n| n.parse().ok()).expect("usage: instructions MODE N");
    BenchPlatform::set_cpu(0);
    match mode.as_str() {
        "unpromised" => run(Unpromised, "enabled", n),
        mode => run(BenchPlatform, mode, n),
    }
}

/// Runs `n` iterations of `mode` with a tracer on `platform`.
fn run<P: Platform>(platform: P, mode: &str, n: u64) {
    let limits = Limits { max_instances: 4, max_total_bytes: 64 << 20 };
    let config = InstanceConfig { bytes_per_cpu: 64 << 10, mode: Mode::Overwrite, snapshot: false };
    let tracer: &'static Tracer<P> = Box::leak(Box::new(
        Tracer::new(platform, 1, trace::linked_events!(), limits, config).expect("tracer"),
    ));
    trace::install(tracer).expect("install");
    let instance = tracer.get_or_create("bench", config).expect("instance");
    let recorder = instance.recorder();
    let id = BENCH.descriptor().id();
    match mode {
        "floor" => {
            let mut ring = vec![0u64; 8192];
            for i in 0..n {
                let at = (i as usize * 3) & 8191;
                ring[at] = (tsc() << 28) | (u64::from(id) << 12) | 16;
                ring[(at + 1) & 8191] = black_box(i);
                ring[(at + 2) & 8191] = i;
            }
            black_box(&ring);
        }
        "disabled" => (0..n).for_each(|i| trace::emit!(BENCH, black_box(i), i)),
        "raw" => {
            for i in 0..n {
                let mut payload = [0u8; 16];
                payload[..8].copy_from_slice(&black_box(i).to_le_bytes());
                payload[8..].copy_from_slice(&i.to_le_bytes());
                let _ = black_box(recorder.live().write(id, &payload));
            }
        }
        "enabled" | "enabled2" => {
            instance.set_event(Some("bench"), None, true).expect("enable");
            if mode == "enabled2" {
                let second = tracer.get_or_create("second", config).expect("instance");
                second.set_event(Some("bench"), None, true).expect("enable");
            }
            (0..n).for_each(|i| trace::emit!(BENCH, black_box(i), i));
        }
        "filter-pass" | "filter-reject" => {
            instance.set_event(Some("bench"), None, true).expect("enable");
            // Both terms evaluated and true / the first one false.
            let filter = match mode {
                "filter-pass" => "a < 0xffffffffff && b != 0xffffffffff",
                _ => "a == 0xffffffffff && b == 0",
            };
            instance.set_filter(BENCH.descriptor(), filter).expect("filter");
            (0..n).for_each(|i| trace::emit!(BENCH, black_box(i), i));
        }
        "trigger-idle" => {
            instance.set_event(Some("bench"), None, true).expect("enable");
            instance.set_trigger(BENCH.descriptor(), "traceon").expect("trigger");
            (0..n).for_each(|i| trace::emit!(BENCH, black_box(i), i));
        }
        "hist" => {
            instance.set_trigger(BENCH.descriptor(), "hist:keys=a:vals=b").expect("trigger");
            (0..n).for_each(|i| trace::emit!(BENCH, black_box(i) % 64, i));
        }
        other => panic!("unknown mode {other}"),
    }
}
