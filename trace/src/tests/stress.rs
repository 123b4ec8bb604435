//! Multi-threaded stress: one writer thread per ring (pinned to its CPU index) with an
//! "interrupt hammer" (simulated interrupts writing nested records at points that
//! cycle through the write path), a concurrent consuming reader per ring, and a
//! concurrent non-consuming iterator; then the accounting is checked exactly. A second
//! test does the same through a `Recorder` while another thread keeps swapping.

use super::util::{Probe, STRUCK_AT};
use crate::sync::{Point, hook};
use crate::{HostPlatform, Mode, ring::Buffer, ring::Config, ring::Recorder, ring::WriteError};
use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::{Arc, Barrier};
use std::vec::Vec;

/// Outer writes per writer thread (the hammer adds one nested write per 8). Under
/// Miri (whose data-race detector checks the same code) a hundred.
const PER_WRITER: u64 = if cfg!(miri) { 100 } else { 1_000_000 };
const CPUS: usize = 2;

type WriteFn = Arc<dyn Fn(u16, &[u8]) -> Result<(), WriteError> + Send + Sync>;

/// A self-checking payload: a torn copy fails [`check`].
fn payload(cpu: usize, seq: u64) -> [u8; 24] {
    let mut p = [0u8; 24];
    p[..8].copy_from_slice(&seq.to_le_bytes());
    p[8..16].copy_from_slice(&(!seq).to_le_bytes());
    p[16..].copy_from_slice(&(seq.rotate_left(17) ^ cpu as u64).to_le_bytes());
    p
}

fn check(cpu: usize, p: &[u8]) -> u64 {
    assert_eq!(p.len(), 24, "torn length");
    let seq = u64::from_le_bytes(p[..8].try_into().unwrap());
    assert_eq!(p, &payload(cpu, seq), "torn payload on cpu {cpu}");
    seq
}

fn counted(r: Result<(), WriteError>) -> u64 {
    match r {
        Ok(()) | Err(WriteError::Dropped) => 1,
        Err(e) => panic!("write failed: {e:?}"),
    }
}

/// `PER_WRITER` writes on `cpu`; every 8th is interrupted by a nested write at a point
/// that cycles through the write path. Returns the events attempted (all counted).
fn writer(write: WriteFn, cpu: usize) -> u64 {
    HostPlatform::set_cpu(cpu);
    let mut attempts = 0;
    let mut seq = 0u64;
    for i in 0..PER_WRITER {
        let nested = Rc::new(Cell::new(0u64));
        if i % 8 == 0 {
            let (w, n, at) = (
                write.clone(),
                nested.clone(),
                STRUCK_AT[(i / 8 % STRUCK_AT.len() as u64) as usize],
            );
            let p = payload(cpu, seq + 1);
            hook::set(move |point| {
                if point == at && n.get() == 0 {
                    n.set(counted(w(2, &p)));
                }
            });
        }
        attempts += counted(write(1, &payload(cpu, seq)));
        hook::clear();
        attempts += nested.get();
        seq += 2;
    }
    attempts
}

/// Consumes `cpu` until `done` and empty; checks payloads and that no sequence number
/// is seen twice. Returns (records read, lost reported + pending).
fn consumer(b: &Buffer<Probe>, cpu: usize, done: &AtomicBool, start: &Barrier) -> (u64, u64) {
    let mut c = b.consumer(cpu).unwrap();
    start.wait();
    let mut seen = std::vec![false; (2 * PER_WRITER) as usize];
    let (mut n, mut lost) = (0, 0);
    loop {
        // Read `done` before draining: if it was set, the final drain sees everything.
        let finished = done.load(Acquire);
        while let Some(r) = c.next_record().unwrap() {
            let seq = check(cpu, r.payload) as usize;
            assert!(!seen[seq], "record {seq} read twice");
            seen[seq] = true;
            n += 1;
            lost += r.lost;
        }
        if finished {
            return (n, lost + c.lost_pending());
        }
        std::thread::yield_now();
    }
}

/// Iterates all CPUs (merged) until `done`, checking every record it returns is intact,
/// and reads the statistics of busy rings (which must not livelock).
fn iterator(b: &Buffer<Probe>, done: &AtomicBool) -> u64 {
    let mut n = 0;
    while !done.load(Acquire) {
        for cpu in 0..CPUS {
            let s = b.stats(cpu).unwrap();
            assert!(s.entries * 32 <= s.capacity, "entries beyond what the ring holds");
            assert!(s.entries <= s.written, "entries beyond those written: {s:?}");
        }
        let mut m = b.merged_iter().unwrap();
        let mut last = 0;
        while let Some(r) = m.next_record() {
            check(r.cpu, r.payload);
            assert!(r.ts >= last, "merge out of order");
            last = r.ts;
            n += 1;
        }
    }
    n
}

#[test]
fn writers_readers_and_interrupts_account_exactly() {
    // Under Miri a ring of one page, which its few hundred writes fill.
    let bytes_per_cpu = if cfg!(miri) { 4 << 10 } else { 16 << 10 };
    for mode in [Mode::Overwrite, Mode::Discard] {
        let b = Arc::new(
            Buffer::new(Probe::default(), Config { cpus: CPUS, bytes_per_cpu, mode }).unwrap(),
        );
        let done = AtomicBool::new(false);
        let start = Barrier::new(2 * CPUS + 1);
        std::thread::scope(|s| {
            let readers: Vec<_> = (0..CPUS)
                .map(|cpu| {
                    s.spawn({
                        let (b, done, start) = (&b, &done, &start);
                        move || consumer(b, cpu, done, start)
                    })
                })
                .collect();
            let iter = s.spawn(|| iterator(&b, &done));
            let writers: Vec<_> = (0..CPUS)
                .map(|cpu| {
                    let bb = b.clone();
                    let w: WriteFn = Arc::new(move |id, p| bb.write(id, p));
                    let start = &start;
                    s.spawn(move || {
                        start.wait();
                        writer(w, cpu)
                    })
                })
                .collect();
            start.wait();
            let written: Vec<u64> = writers.into_iter().map(|w| w.join().unwrap()).collect();
            done.store(true, Release);
            let read: Vec<(u64, u64)> = readers.into_iter().map(|r| r.join().unwrap()).collect();
            let iterated = iter.join().unwrap();
            let mut total = 0;
            for cpu in 0..CPUS {
                let st = b.stats(cpu).unwrap();
                assert_eq!(st.written, written[cpu], "{mode:?} cpu {cpu}: {st:?}");
                assert_eq!(st.read, read[cpu].0, "{mode:?} cpu {cpu}");
                assert_eq!(
                    st.overrun + st.dropped,
                    read[cpu].1,
                    "{mode:?} cpu {cpu}: lost reported"
                );
                assert_eq!(st.entries, 0, "{mode:?} cpu {cpu}: drained");
                assert!(st.balanced(), "{mode:?} cpu {cpu}: {st:?}");
                if mode == Mode::Discard {
                    assert_eq!(st.overrun, 0);
                }
                total += st.written;
            }
            assert!(total >= 2 * PER_WRITER);
            std::println!("{mode:?}: {total} events, {:?} read, {iterated} iterated", read);
        });
    }
}

#[test]
fn swaps_under_writers_lose_nothing_uncounted() {
    // One more CPU index than writers: the swapper's (its gate is never entered).
    let cfg = Config { cpus: CPUS + 1, bytes_per_cpu: 8 << 10, mode: Mode::Overwrite };
    let r = Arc::new(Recorder::new(Probe::default(), cfg, true).unwrap());
    let done = AtomicBool::new(false);
    let start = Barrier::new(CPUS + 1);
    std::thread::scope(|s| {
        let writers: Vec<_> = (0..CPUS)
            .map(|cpu| {
                let rr = r.clone();
                let w: WriteFn = Arc::new(move |id, p| rr.write(id, p));
                let start = &start;
                s.spawn(move || {
                    start.wait();
                    writer(w, cpu)
                })
            })
            .collect();
        let swapper = s.spawn(|| {
            HostPlatform::set_cpu(CPUS);
            start.wait();
            let mut swaps = 0u64;
            while !done.load(Acquire) {
                r.swap().unwrap();
                swaps += 1;
                // Frozen now: the snapshot's accounting is exact, and every record in
                // it is intact.
                let snap = r.snapshot().unwrap();
                for cpu in 0..CPUS {
                    let st = snap.stats(cpu).unwrap();
                    assert!(st.balanced(), "snapshot cpu {cpu}: {st:?}");
                    let mut it = snap.iter(cpu).unwrap();
                    let mut n = 0;
                    while let Some(rec) = it.next_record() {
                        check(cpu, rec.payload);
                        n += 1;
                    }
                    assert!(!it.skipped() && n == st.entries, "snapshot changed under us");
                }
            }
            swaps
        });
        let written: Vec<u64> = writers.into_iter().map(|w| w.join().unwrap()).collect();
        done.store(true, Release);
        let swaps = swapper.join().unwrap();
        assert!(swaps > 0);
        for (cpu, &written) in written.iter().enumerate() {
            // Every event attempted is counted in exactly one of the two sets.
            let a = r.live().stats(cpu).unwrap();
            let b = r.snapshot().unwrap().stats(cpu).unwrap();
            assert!(a.balanced() && b.balanced());
            assert_eq!(a.written + b.written, written, "cpu {cpu}");
        }
        std::println!("{swaps} swaps, written {written:?}");
    });
}

/// Events per writer thread for the tracer stress (`TRACE_STRESS_EVENTS` overrides:
/// 50_000_000 per writer gives the 10^8-event run).
fn tracer_events() -> u64 {
    if cfg!(miri) {
        return 60;
    }
    std::env::var("TRACE_STRESS_EVENTS").ok().and_then(|v| v.parse().ok()).unwrap_or(300_000)
}

/// Tracepoints from two CPUs, each also firing a nested event from a simulated
/// interrupt, while a control thread loops create, resize, clear, destroy of one
/// instance and snapshot swaps of another. Every snapshot is checked frozen and
/// balanced when its swap returns (a quiescent point), and every event written to
/// the kept instance is counted in exactly one snapshot or the live set. The
/// platform promises its CPU indices (`Probe`), so the writers' section is the
/// kernel's: plain loads and stores.
#[test]
fn tracer_control_operations_under_nested_writers_account_exactly() {
    use crate::event::DescriptorKind;
    use crate::{InstanceConfig, Limits, Tracer, event::EventDescriptor};
    static EV: EventDescriptor = EventDescriptor::new("s", "e", "", &[], DescriptorKind::Event);
    let limits = Limits { max_instances: 4, max_total_bytes: 64 << 20 };
    let cfg = InstanceConfig { bytes_per_cpu: 4096, mode: Mode::Overwrite, snapshot: true };
    let tracer: &'static Tracer<Probe> =
        Box::leak(Box::new(Tracer::new(Probe::default(), CPUS, &[&EV], limits, cfg).unwrap()));
    tracer.top().set_tracing(false);
    let keep = tracer.get_or_create("keep", cfg).unwrap();
    keep.set_event(Some("s"), None, true).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let per = tracer_events();
    crate::install(tracer).unwrap();
    let writers: Vec<_> = (0..CPUS)
        .map(|cpu| {
            std::thread::spawn(move || {
                HostPlatform::set_cpu(cpu);
                let mut events = 0u64;
                for i in 0..per {
                    if i % 4 == 0 {
                        hook::once(Point::Section, || {
                            crate::event::dispatch::record(&EV, 8, &&[3u8; 8][..]);
                        });
                        events += 1;
                    }
                    crate::event::dispatch::record(&EV, 8, &&i.to_le_bytes()[..]);
                    hook::clear();
                    events += 1;
                }
                events
            })
        })
        .collect();
    let control = {
        let done = done.clone();
        std::thread::spawn(move || {
            HostPlatform::set_cpu(CPUS); // not a writer's CPU
            let keep = tracer.lookup("keep").unwrap();
            let (mut snapshots, mut ops) = (0u64, 0u64);
            // At least this many rounds of every operation (a few under Miri).
            let rounds = if cfg!(miri) { 3 } else { 20 };
            while !done.load(Relaxed) || ops < rounds {
                let churn = tracer.get_or_create("churn", cfg).unwrap();
                churn.set_event(Some("s"), None, true).unwrap();
                churn.resize(8192).unwrap();
                churn.clear().unwrap();
                churn.snapshot_free().unwrap();
                drop(churn);
                tracer.destroy_by_name("churn").unwrap();
                keep.snapshot_take().unwrap();
                let rec = keep.recorder();
                let snap = rec.snapshot().unwrap();
                for cpu in 0..CPUS {
                    let s = snap.stats(cpu).unwrap();
                    assert!(s.balanced(), "snapshot cpu {cpu}: {s:?}");
                    snapshots += s.written;
                }
                keep.snapshot_clear().unwrap();
                ops += 1;
            }
            snapshots
        })
    };
    let written: u64 = writers.into_iter().map(|w| w.join().unwrap()).sum();
    done.store(true, Relaxed);
    let snapshots = control.join().unwrap();
    let live: u64 = (0..CPUS)
        .map(|cpu| {
            let s = keep.stats(cpu).unwrap();
            assert!(s.balanced(), "live cpu {cpu}: {s:?}");
            s.written
        })
        .sum();
    assert!(written >= per * CPUS as u64);
    assert_eq!(snapshots + live, written, "every event counted exactly once");
}
