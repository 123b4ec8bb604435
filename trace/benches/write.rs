//! Write-path benchmarks, each beside its floor and its peers in the same run:
//!
//! - `two_u64`: an event with two `u64` arguments (16-byte payload);
//! - `payload_64`: an event with a 64-byte payload;
//!
//! each measured for: `floor` (read the TSC, store a header word and the payload into
//! a plain array), `trace_buffer` (`Buffer::write`, overwrite mode, ring full so every
//! write also reclaims), `trace_recorder` (`Recorder::write`: the same plus the
//! section a tracer's writers enter), `trace_recorder_unpromised` (the same on a
//! platform that makes no `Platform::PROMISE`: the section's compare-and-swaps and
//! fence), `crossbeam_array_queue` (`ArrayQueue::force_push` of the same
//! timestamped record) and `ringbuf` (`HeapRb::push_overwrite`).
//!
//! `constant_clock`: `Buffer::write` with a constant clock against crossbeam's
//! `ArrayQueue::force_push` of the same record (the ring's own cost, without the TSC).
//!
//! `scaling`: one writer vs two writer threads on two rings (aggregate events/s).
//!
//! Every closure discards its result (`let _ =`): the tracer's `Result`, the peers'
//! displaced element.
//!
//! Run: `cargo bench -p trace-benches --bench write`.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use crossbeam_queue::ArrayQueue;
use ringbuf::HeapRb;
use std::hint::black_box;
use std::time::{Duration, Instant};
use trace::{Mode, ring::Buffer, ring::Config, ring::Recorder};

mod common;
use common::{BenchPlatform, Unpromised, tsc};

/// Bytes per ring (and per floor array / peer queue, in records).
const RING_BYTES: usize = 64 << 10;
const ID: u16 = 42;

fn config(cpus: usize) -> Config {
    Config { cpus, bytes_per_cpu: RING_BYTES, mode: Mode::Overwrite }
}

/// Benchmarks one payload size against its floor and peers.
fn payload_group<const N: usize>(c: &mut Criterion, name: &str) {
    let payload: [u8; N] = core::array::from_fn(|i| i as u8);
    let words = N / 8;
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Elements(1));

    // Floor: TSC + header word + payload words into a plain array.
    let slots = RING_BYTES / 8;
    let mut floor = vec![0u64; slots];
    let mut at = 0usize;
    g.bench_function("floor", |b| {
        b.iter(|| {
            let p = black_box(&payload);
            let ts = tsc();
            floor[at] = (ts << 28) | ((ID as u64) << 12) | N as u64;
            for (i, w) in p.as_chunks::<8>().0.iter().enumerate() {
                floor[(at + 1 + i) & (slots - 1)] = u64::from_le_bytes(*w);
            }
            at = (at + 1 + words) & (slots - 1);
        })
    });
    black_box(&floor);

    let buf = Buffer::new(BenchPlatform, config(1)).unwrap();
    // `black_box` on the array reference: the length stays a compile-time constant,
    // as at a real tracepoint (and as in the floor).
    g.bench_function("trace_buffer", |b| {
        b.iter(|| {
            let p: &[u8; N] = black_box(&payload);
            let _ = buf.write(ID, p);
        })
    });
    // Measured (not filtered out or listed): the ring must have wrapped.
    let s = buf.stats(0).unwrap();
    assert!(s.written == 0 || s.overrun > 0, "the ring must have wrapped");

    let rec = Recorder::new(BenchPlatform, config(1), false).unwrap();
    g.bench_function("trace_recorder", |b| {
        b.iter(|| {
            let p: &[u8; N] = black_box(&payload);
            let _ = rec.write(ID, p);
        })
    });
    let unpromised = Recorder::new(Unpromised, config(1), false).unwrap();
    g.bench_function("trace_recorder_unpromised", |b| {
        b.iter(|| {
            let p: &[u8; N] = black_box(&payload);
            let _ = unpromised.write(ID, p);
        })
    });

    let records = RING_BYTES / (8 + N);
    let q = ArrayQueue::new(records);
    g.bench_function("crossbeam_array_queue", |b| {
        b.iter(|| {
            let _ = q.force_push((tsc(), ID, *black_box(&payload)));
        })
    });

    let mut rb = HeapRb::<(u64, u16, [u8; N])>::new(records);
    g.bench_function("ringbuf", |b| {
        b.iter(|| {
            let _ = rb.push_overwrite((tsc(), ID, *black_box(&payload)));
        })
    });
    g.finish();
}

/// A constant clock: the ring's own cost without the TSC read that dominates the
/// floor, against crossbeam's queue storing the same record.
#[derive(Clone, Copy)]
struct ConstClock;

impl trace::Platform for ConstClock {
    fn cpu(&self) -> usize {
        0
    }
    fn now(&self) -> u64 {
        1_000
    }
    fn may_wait(&self) -> bool {
        true
    }
    fn light_barrier(&self) {
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
    }
}

fn constant_clock(c: &mut Criterion) {
    let mut g = c.benchmark_group("constant_clock");
    g.throughput(Throughput::Elements(1));
    let payload = [7u8; 16];
    let buf = Buffer::new(ConstClock, config(1)).unwrap();
    g.bench_function("trace_buffer", |b| {
        b.iter(|| {
            let p: &[u8; 16] = black_box(&payload);
            let _ = buf.write(ID, p);
        })
    });
    let q = ArrayQueue::new(RING_BYTES / 24);
    g.bench_function("crossbeam_array_queue", |b| {
        b.iter(|| {
            let _ = q.force_push((black_box(1_000u64), ID, *black_box(&payload)));
        })
    });
    g.finish();
}

fn write_two_u64(c: &mut Criterion) {
    payload_group::<16>(c, "two_u64");
}

fn write_64(c: &mut Criterion) {
    payload_group::<64>(c, "payload_64");
}

/// Wall time for `threads` writers, each writing `iters` events to its own ring.
fn run_writers(buf: &Buffer<BenchPlatform>, threads: usize, iters: u64) -> Duration {
    let payload = [7u8; 16];
    let start = std::sync::Barrier::new(threads + 1);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|cpu| {
                let start = &start;
                s.spawn(move || {
                    BenchPlatform::set_cpu(cpu);
                    start.wait();
                    let t = Instant::now();
                    for _ in 0..iters {
                        let p: &[u8; 16] = black_box(&payload);
                        let _ = buf.write(ID, p);
                    }
                    t.elapsed()
                })
            })
            .collect();
        start.wait();
        // The slowest writer's time is the wall time of the batch.
        hs.into_iter().map(|h| h.join().unwrap()).max().unwrap()
    })
}

/// The same for the floor (TSC + stores into a per-thread array): the machine's own
/// scaling, as a control measured in the same run.
fn run_floor(threads: usize, iters: u64) -> Duration {
    let start = std::sync::Barrier::new(threads + 1);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                let start = &start;
                s.spawn(move || {
                    let mut arr = vec![0u64; RING_BYTES / 8];
                    let mask = arr.len() - 1;
                    let mut at = 0;
                    start.wait();
                    let t = Instant::now();
                    for _ in 0..iters {
                        let p: &[u8; 16] = black_box(&[7u8; 16]);
                        arr[at] = tsc() << 28 | 16;
                        arr[(at + 1) & mask] =
                            u64::from_le_bytes(*p.as_chunks::<8>().0.first().unwrap());
                        arr[(at + 2) & mask] =
                            u64::from_le_bytes(*p.as_chunks::<8>().0.last().unwrap());
                        at = (at + 3) & mask;
                    }
                    let e = t.elapsed();
                    black_box(&arr);
                    e
                })
            })
            .collect();
        start.wait();
        hs.into_iter().map(|h| h.join().unwrap()).max().unwrap()
    })
}

fn scaling(c: &mut Criterion) {
    let mut g = c.benchmark_group("scaling");
    let buf = Buffer::new(BenchPlatform, config(2)).unwrap();
    for threads in [1usize, 2] {
        // Elements = events per iteration across all writers: events/s is aggregate.
        g.throughput(Throughput::Elements(threads as u64));
        g.bench_with_input(BenchmarkId::new("writers", threads), &threads, |b, &t| {
            b.iter_custom(|iters| run_writers(&buf, t, iters))
        });
        g.bench_with_input(BenchmarkId::new("floor", threads), &threads, |b, &t| {
            b.iter_custom(|iters| run_floor(t, iters))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30);
    targets = write_two_u64, write_64, constant_clock, scaling
}
criterion_main!(benches);
