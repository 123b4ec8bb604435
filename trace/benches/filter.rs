//! Filter and trigger cost on the host, in one criterion run: the same tracepoint
//! (two `u64` arguments, one instance) enabled without a filter, with a two-term
//! integer filter it passes, with one it fails, and with a trigger whose action has
//! nothing to do (`traceon` while recording is on: filter-free, count-free).
//!
//! `cargo bench -p trace-benches --bench filter`

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
mod common;
use common::BenchPlatform;
use trace::{InstanceConfig, Limits, Mode, Tracer};

trace::event! {
    /// Two integers, the reference shape.
    pub BENCH = "bench":"event" { a: u64, b: u64 } => "a={a} b={b}";
}

/// The filters measured: two integer terms, passing (the arguments are `i, i` with
/// `i` from 1 on) and failing at the first term.
const PASS: &str = "a > 0 && b != 0";
const REJECT: &str = "a == 0 && b == 0";

fn filters(c: &mut Criterion) {
    let limits = Limits { max_instances: 4, max_total_bytes: 64 << 20 };
    BenchPlatform::set_cpu(0);
    let top = InstanceConfig { bytes_per_cpu: 4096, mode: Mode::Overwrite, snapshot: false };
    let tracer: &'static Tracer<BenchPlatform> = Box::leak(Box::new(
        Tracer::new(BenchPlatform, 1, trace::linked_events!(), limits, top).expect("tracer"),
    ));
    trace::install(tracer).expect("install");
    let config = InstanceConfig { bytes_per_cpu: 1 << 20, mode: Mode::Overwrite, snapshot: false };
    let instance = tracer.get_or_create("bench", config).expect("instance");
    instance.set_event(Some("bench"), Some("event"), true).expect("enable");
    let event = BENCH.descriptor();

    let mut group = c.benchmark_group("filter");
    group.throughput(Throughput::Elements(1));
    let mut run = |name: &str| {
        group.bench_function(name, |b| {
            let mut i = 0u64;
            b.iter(|| {
                i += 1;
                trace::emit!(BENCH, black_box(i), i);
            })
        });
    };
    run("enabled, no filter");
    instance.set_filter(event, PASS).expect("filter");
    run("enabled, filter passes (2 terms)");
    instance.set_filter(event, REJECT).expect("filter");
    run("enabled, filter rejects");
    instance.set_filter(event, "0").expect("clear");
    instance.set_trigger(event, "traceon").expect("trigger");
    run("enabled, idle trigger");
    instance.clear_triggers(event).expect("clear");
    run("enabled, no filter (again)");
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = filters
}
criterion_main!(benches);
