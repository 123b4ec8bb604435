//! Tracepoint cost on the host, in one criterion run: an empty loop, a disabled
//! tracepoint, the ring's raw write of the same 16-byte record, and the enabled
//! tracepoint (two `u64` arguments) through the tracer into one instance, then two.
//!
//! `cargo bench -p trace-benches --bench tracepoint`

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
mod common;
use common::BenchPlatform;
use trace::{InstanceConfig, Limits, Mode, Tracer};

trace::event! {
    /// Two integers, the reference shape.
    pub BENCH = "bench":"event" { a: u64, b: u64 } => "a={a} b={b}";
}

fn tracepoints(c: &mut Criterion) {
    let limits = Limits { max_instances: 4, max_total_bytes: 64 << 20 };
    BenchPlatform::set_cpu(0);
    let top = InstanceConfig { bytes_per_cpu: 4096, mode: Mode::Overwrite, snapshot: false };
    let tracer: &'static Tracer<BenchPlatform> = Box::leak(Box::new(
        Tracer::new(BenchPlatform, 1, trace::linked_events!(), limits, top).expect("tracer"),
    ));
    trace::install(tracer).expect("install");
    let config = InstanceConfig { bytes_per_cpu: 1 << 20, mode: Mode::Overwrite, snapshot: false };
    let instance = tracer.get_or_create("bench", config).expect("instance");
    let recorder = instance.recorder();
    let id = BENCH.descriptor().id();

    let mut group = c.benchmark_group("tracepoint");
    group.throughput(Throughput::Elements(1));
    group.bench_function("empty loop", |b| {
        let mut i = 0u64;
        b.iter(|| {
            i += 1;
            black_box(i)
        })
    });
    group.bench_function("disabled", |b| {
        let mut i = 0u64;
        b.iter(|| {
            i += 1;
            trace::emit!(BENCH, black_box(i), i);
        })
    });
    group.bench_function("ring write (raw)", |b| {
        let mut i = 0u64;
        b.iter(|| {
            i += 1;
            let mut payload = [0u8; 16];
            payload[..8].copy_from_slice(&black_box(i).to_le_bytes());
            payload[8..].copy_from_slice(&i.to_le_bytes());
            black_box(recorder.live().write(id, &payload))
        })
    });
    instance.set_event(Some("bench"), Some("event"), true).expect("enable");
    group.bench_function("enabled (2 x u64)", |b| {
        let mut i = 0u64;
        b.iter(|| {
            i += 1;
            trace::emit!(BENCH, black_box(i), i);
        })
    });
    let second = tracer.get_or_create("second", config).expect("instance");
    second.set_event(Some("bench"), Some("event"), true).expect("enable");
    group.bench_function("enabled (2 x u64), two instances", |b| {
        let mut i = 0u64;
        b.iter(|| {
            i += 1;
            trace::emit!(BENCH, black_box(i), i);
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = tracepoints
}
criterion_main!(benches);
