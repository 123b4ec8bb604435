//! Loom models of the concurrent protocols (run with `RUSTFLAGS="--cfg loom"`):
//! writer against consuming reader (the tail CAS race), nested writer against outer
//! writer with a concurrent reader, the merge that reads ahead against an overwriting
//! writer, a panic's seal against a consuming reader, the per-depth counters,
//! snapshot swap, clear,
//! instance swap and destroy-and-recreate against (nested) writers. `DESIGN.md`
//! names, for each model, a mutation it catches.
//!
//! Loom explores the interleavings of its threads; an interrupt is not a thread (it
//! runs to completion inside the interrupted writer), so nesting is modelled with the
//! write-path hook at a chosen point, one model per point.

use crate::sync::{Point, hook};
use crate::{
    CpuPromise, Mode, Platform, ring::Buffer, ring::Config, ring::Recorder, ring::WriteError,
};
use loom::cell::Cell;
use loom::sync::Arc;
use std::vec::Vec;

loom::thread_local! {
    static CPU: Cell<usize> = Cell::new(0);
    static CLOCK: Cell<u64> = Cell::new(1);
}

/// The loom platform: per-thread CPU index and clock.
#[derive(Clone, Copy)]
struct LoomPlatform;

impl Platform for LoomPlatform {
    // Each model's threads take indices of their own: the models check the kernel's
    // section, plain loads and stores.
    const PROMISE: Option<CpuPromise<Self>> = Some(CpuPromise::for_tests());

    fn cpu(&self) -> usize {
        CPU.with(|c| c.get())
    }
    // Loom sees only its own fences: both halves of the asymmetric barrier are full
    // fences here (the platform default, through loom).
    fn light_barrier(&self) {
        loom::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    }
    fn heavy_barrier(&self) {
        loom::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    }
    fn now(&self) -> u64 {
        CLOCK.with(|c| {
            let t = c.get();
            c.set(t + 1);
            t
        })
    }

    fn may_wait(&self) -> bool {
        true
    }
    // Function entries "patched" at once: the models check the masks, not the text.
    fn patch_functions(&self, _: &[(usize, bool)]) -> Result<(), &'static str> {
        Ok(())
    }
}

/// Explores every interleaving with at most `bound` preemptions.
fn model(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(bound);
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = runs.clone();
    b.check(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        f()
    });
    std::println!("{} executions", runs.load(std::sync::atomic::Ordering::Relaxed));
}

fn small(mode: Mode) -> Buffer<LoomPlatform> {
    // 8 words: an anchor (2) and three 8-byte-payload records (2 each) fit.
    Buffer::new(LoomPlatform, Config { cpus: 1, bytes_per_cpu: 64, mode }).unwrap()
}

fn counted(r: Result<(), WriteError>) -> u64 {
    match r {
        Ok(()) | Err(WriteError::Dropped) => 1,
        Err(e) => panic!("{e:?}"),
    }
}

/// Consumes everything with `c`; checks payloads (the id repeated) and returns the
/// ids read and the events lost (reported, plus pending at the end).
fn drain_with(c: &mut crate::ring::Consumer<'_>) -> (Vec<u16>, u64) {
    let (mut ids, mut lost) = (Vec::new(), 0);
    while let Some(r) = c.next_record().unwrap() {
        assert_eq!(r.payload, &u64::from(r.id).to_le_bytes(), "torn record");
        ids.push(r.id);
        lost += r.lost;
    }
    (ids, lost)
}

/// Consumes everything with a fresh consumer.
fn drain<P: Platform>(b: &Buffer<P>) -> (Vec<u16>, u64) {
    drain_with(&mut b.consumer(0).unwrap())
}

#[test]
fn loom_writer_vs_consumer() {
    for mode in [Mode::Overwrite, Mode::Discard] {
        model(3, move || {
            hook::clear();
            let b = Arc::new(small(mode));
            // Fill the ring so that the concurrent writes must reclaim (or drop).
            for id in 1..=3u16 {
                b.write(id, &u64::from(id).to_le_bytes()).unwrap();
            }
            let w = {
                let b = b.clone();
                loom::thread::spawn(move || {
                    (4..=5u16)
                        .map(|id| counted(b.write(id, &u64::from(id).to_le_bytes())))
                        .sum::<u64>()
                })
            };
            let mut c = b.consumer(0).unwrap();
            let (first, lost_r) = drain_with(&mut c);
            let written = 3 + w.join().unwrap();
            let (rest, lost_rest) = drain_with(&mut c);
            let lost_rest = lost_rest + c.lost_pending();
            drop(c);
            let s = b.stats(0).unwrap();
            assert_eq!(s.written, written);
            assert_eq!(s.read, (first.len() + rest.len()) as u64);
            assert!(s.balanced(), "{s:?}");
            assert_eq!(s.entries, 0);
            if mode == Mode::Overwrite {
                assert_eq!(lost_r + lost_rest, s.overrun);
            }
            // Records come out in write order, each at most once.
            let all: Vec<u16> = first.iter().chain(rest.iter()).copied().collect();
            assert!(all.windows(2).all(|w| w[0] < w[1]), "{all:?}");
        });
    }
}

#[test]
fn loom_nested_writer_vs_outer_writer_with_reader() {
    for at in
        [Point::Reserving, Point::Reserved, Point::Filled, Point::Publishing, Point::Committed]
    {
        model(4, move || {
            hook::clear();
            let b = Arc::new(small(Mode::Overwrite));
            b.write(1, &1u64.to_le_bytes()).unwrap();
            b.write(2, &2u64.to_le_bytes()).unwrap();
            let w = {
                let b = b.clone();
                loom::thread::spawn(move || {
                    let nested = Arc::new(loom::sync::atomic::AtomicU64::new(0));
                    let (bb, n) = (b.clone(), nested.clone());
                    hook::set(move |p| {
                        if p == at && n.load(loom::sync::atomic::Ordering::Relaxed) == 0 {
                            let r = bb.write(9, &9u64.to_le_bytes());
                            n.store(counted(r), loom::sync::atomic::Ordering::Relaxed);
                        }
                    });
                    let outer = counted(b.write(3, &3u64.to_le_bytes()));
                    hook::clear();
                    outer + nested.load(loom::sync::atomic::Ordering::Relaxed)
                })
            };
            let mut c = b.consumer(0).unwrap();
            let (first, lost1) = drain_with(&mut c);
            let written = 2 + w.join().unwrap();
            let (rest, lost2) = drain_with(&mut c);
            let lost2 = lost2 + c.lost_pending();
            drop(c);
            let s = b.stats(0).unwrap();
            assert_eq!(s.written, written, "at {at:?}");
            assert_eq!(s.read, (first.len() + rest.len()) as u64);
            assert_eq!(lost1 + lost2, s.overrun);
            assert!(s.balanced(), "{s:?}");
        });
    }
}

/// The `trace` file's and the dump's merge ([`crate::ring::ReadScratch`]) against an
/// overwriting writer: it reads each record's header ahead and its payload at its
/// turn, and every record it returns is whole (its payload is its id's), in order,
/// though the writer overwrites records of the same size in the same places.
#[test]
fn loom_merge_vs_overwriting_writer() {
    model(3, || {
        hook::clear();
        let b = Arc::new(small(Mode::Overwrite));
        for id in 1..=3u16 {
            b.write(id, &u64::from(id).to_le_bytes()).unwrap();
        }
        let w = {
            let b = b.clone();
            loom::thread::spawn(move || {
                for id in 4..=5u16 {
                    b.write(id, &u64::from(id).to_le_bytes()).unwrap();
                }
            })
        };
        let mut scratch = crate::ring::ReadScratch::new(1).unwrap();
        let mut seen = Vec::new();
        let read = b.for_each_record_with(
            &mut scratch,
            None,
            || {},
            |r| {
                assert_eq!(r.payload, u64::from(r.id).to_le_bytes(), "record {} is torn", r.id);
                seen.push(r.id);
                true
            },
        );
        read.unwrap();
        w.join().unwrap();
        assert!(seen.is_sorted(), "{seen:?}");
    });
}

/// A panic's seal ([`Buffer::seal_cpu`]) against a consuming reader on another CPU.
/// The write on CPU 0 is stopped once its record is reserved: the "NMI" there
/// records one event, seals, and the CPU never comes back to the write (the hook
/// panics, so the write never fills its record). The reader takes every record
/// whole, never the stopped write's, and gets the NMI's once it has taken the rest.
#[test]
fn loom_seal_vs_consumer() {
    model(3, || {
        hook::clear();
        let b = Arc::new(small(Mode::Overwrite));
        b.write(1, &1u64.to_le_bytes()).unwrap();
        let w = {
            let b = b.clone();
            loom::thread::spawn(move || {
                let bb = b.clone();
                hook::once(Point::Reserved, move || {
                    bb.write(9, &9u64.to_le_bytes()).unwrap();
                    assert_eq!(bb.seal_cpu(0, |id| id < 100), 1);
                    std::panic::resume_unwind(std::boxed::Box::new("the CPU stops here"));
                });
                let stopped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let _ = b.write(3, &3u64.to_le_bytes());
                }));
                hook::clear();
                assert!(stopped.is_err());
            })
        };
        let mut c = b.consumer(0).unwrap();
        let (mut ids, _) = drain_with(&mut c);
        w.join().unwrap();
        ids.extend(drain_with(&mut c).0);
        assert_eq!(ids, [1, 9], "the stopped write's record is never an event");
    });
}

#[test]
fn loom_swap_vs_writer() {
    model(4, || {
        hook::clear();
        let cfg = Config { cpus: 2, bytes_per_cpu: 64, mode: Mode::Overwrite };
        let r = Arc::new(Recorder::new(LoomPlatform, cfg, true).unwrap());
        let w = {
            let r = r.clone();
            loom::thread::spawn(move || {
                CPU.with(|c| c.set(0));
                (1..=2u16).map(|id| counted(r.write(id, &u64::from(id).to_le_bytes()))).sum::<u64>()
            })
        };
        CPU.with(|c| c.set(1));
        r.swap().unwrap();
        // After swap returns the snapshot is frozen: exact accounting, intact records.
        let snap = r.snapshot().unwrap();
        let s = snap.stats(0).unwrap();
        assert!(s.balanced(), "{s:?}");
        let (ids, _) = drain(snap);
        assert_eq!(ids.len() as u64, s.entries);
        let written = w.join().unwrap();
        assert_eq!(snap.stats(0).unwrap().written, s.written, "a write landed after the swap");
        let live = r.live().stats(0).unwrap();
        // Each write landed, committed and counted, in exactly one of the two sets.
        assert_eq!(live.written + s.written, written);
        assert!(live.balanced());
    });
}

/// A platform that promises nothing about its CPU index: the section is then atomic
/// read-modify-writes and full fences.
#[derive(Clone, Copy)]
struct Unpromised;

impl Platform for Unpromised {
    fn cpu(&self) -> usize {
        LoomPlatform.cpu()
    }
    fn now(&self) -> u64 {
        LoomPlatform.now()
    }
    fn may_wait(&self) -> bool {
        true
    }
}

/// Two writers on one CPU index at once, on a platform that does not promise
/// otherwise, against a control operation's grace period: a writer that saw the
/// old state is still inside when the other leaves, and the grace period must wait
/// for it before the old state is freed.
#[test]
fn loom_writers_sharing_an_index_vs_grace_period() {
    use crate::ring::section::Sections;
    use loom::sync::atomic::{AtomicBool, Ordering::*};
    model(3, || {
        let sections = Arc::new(Sections::new(2).unwrap());
        // The state writers read, and whether its old value was freed.
        let published = Arc::new(AtomicBool::new(false));
        let freed = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..2)
            .map(|_| {
                let (sections, published, freed) =
                    (sections.clone(), published.clone(), freed.clone());
                loom::thread::spawn(move || {
                    let guard = sections.enter(&Unpromised, 0).unwrap();
                    if !published.load(Acquire) {
                        assert!(!freed.load(Acquire), "the old state was freed under a writer");
                    }
                    drop(guard);
                })
            })
            .collect();
        CPU.with(|c| c.set(1));
        published.store(true, Release);
        sections.grace(&Unpromised).unwrap().wait();
        freed.store(true, Release);
        writers.into_iter().for_each(|w| w.join().unwrap());
    });
}

/// Two writers on one ring at once, on a platform that does not promise that
/// callers have CPU indices of their own: the ring takes one writer at a time, so
/// each write is kept or counted as dropped, and the write after them is published
/// (the ring is not left wedged with its depth raised). The ring is full first, so
/// the writer that gets in reclaims the oldest record.
#[test]
fn loom_writers_sharing_a_ring() {
    model(3, || {
        hook::clear();
        let cfg = Config { cpus: 1, bytes_per_cpu: 64, mode: Mode::Overwrite };
        let b = Arc::new(Buffer::new(Unpromised, cfg).unwrap());
        for id in 4..=6u16 {
            b.write(id, &u64::from(id).to_le_bytes()).unwrap();
        }
        let other = {
            let b = b.clone();
            loom::thread::spawn(move || counted(b.write(2, &2u64.to_le_bytes())))
        };
        let mine = counted(b.write(1, &1u64.to_le_bytes()));
        let written = 3 + mine + other.join().unwrap();
        b.write(3, &3u64.to_le_bytes()).unwrap();
        let s = b.stats(0).unwrap();
        assert_eq!(s.written, written + 1, "{s:?}");
        assert!(s.balanced(), "{s:?}");
        let (ids, lost) = drain(&b);
        assert_eq!(ids.last(), Some(&3), "the last write was not published: {ids:?}");
        assert_eq!(lost, s.overrun + s.dropped, "{s:?}");
    });
}

/// The per-depth counters: an interrupt that writes between the outer writer's load
/// and store of its `committed` counter, while a reader sums the counters. Each depth
/// has its own counter, so nothing is lost and the reader never sees the total fall.
#[test]
fn loom_per_depth_counters_vs_nested_writer_and_stats_reader() {
    model(4, || {
        hook::clear();
        let b = Arc::new(small(Mode::Overwrite));
        let w = {
            let b = b.clone();
            loom::thread::spawn(move || {
                let bb = b.clone();
                hook::once(Point::Bump, move || bb.write(9, &9u64.to_le_bytes()).unwrap());
                b.write(1, &1u64.to_le_bytes()).unwrap();
                hook::clear();
            })
        };
        let seen = b.stats(0).unwrap().written;
        w.join().unwrap();
        let s = b.stats(0).unwrap();
        assert!(s.written >= seen, "the total fell from {seen} to {}", s.written);
        assert_eq!(s.written, 2, "{s:?}");
        assert!(s.balanced(), "{s:?}");
    });
}

#[test]
fn loom_clear_vs_writer_with_nested_writer() {
    model(3, || {
        hook::clear();
        let cfg = Config { cpus: 2, bytes_per_cpu: 64, mode: Mode::Overwrite };
        let r = Arc::new(Recorder::new(LoomPlatform, cfg, false).unwrap());
        let w = {
            let r = r.clone();
            loom::thread::spawn(move || {
                CPU.with(|c| c.set(0));
                // An interrupt writes inside the outer write, in the same section.
                let rr = r.clone();
                hook::once(Point::Reserved, move || {
                    let _ = rr.write(9, &9u64.to_le_bytes());
                });
                let _ = r.write(1, &1u64.to_le_bytes());
                hook::clear();
            })
        };
        CPU.with(|c| c.set(1));
        r.clear().unwrap();
        w.join().unwrap();
        // Each event is either wiped by the clear (with its count) or recorded after
        // it; the counters and the ring agree.
        let s = r.live().stats(0).unwrap();
        assert!(s.balanced(), "{s:?}");
        let (ids, _) = drain(r.live());
        assert_eq!(ids.len() as u64, s.written, "{ids:?} {s:?}");
    });
}

/// A clear while a writer that enters no section (`Buffer::write` on the recorder's
/// live buffer, as a kernel's own ring user would) writes: the clear waits for it to
/// leave its ring (`writing`, an Acquire load of `nest` pairing with the writer's
/// Release store) and then sees its record and counts, so it wipes both or neither.
#[test]
fn loom_clear_vs_raw_writer() {
    clear_vs_raw_writer(LoomPlatform);
}

/// [`loom_clear_vs_raw_writer`] on a platform without the promise: the writer's
/// barrier is a full fence, and its ring takes one writer at a time.
#[test]
fn loom_clear_vs_raw_writer_unpromised() {
    clear_vs_raw_writer(Unpromised);
}

fn clear_vs_raw_writer<P: Platform + Copy + Send + Sync + 'static>(platform: P) {
    model(3, move || {
        let cfg = Config { cpus: 2, bytes_per_cpu: 64, mode: Mode::Overwrite };
        let r = Arc::new(Recorder::new(platform, cfg, false).unwrap());
        let w = {
            let r = r.clone();
            loom::thread::spawn(move || {
                CPU.with(|c| c.set(0));
                let _ = r.live().write(1, &1u64.to_le_bytes());
            })
        };
        CPU.with(|c| c.set(1));
        r.clear().unwrap();
        w.join().unwrap();
        let s = r.live().stats(0).unwrap();
        assert!(s.balanced(), "{s:?}");
        let (ids, _) = drain(r.live());
        assert_eq!(ids.len() as u64, s.written, "{ids:?} {s:?}");
    });
}

mod tracer {
    use super::*;
    use crate::{InstanceConfig, Limits, Tracer, event::DescriptorKind};

    static EV: crate::event::EventDescriptor =
        crate::event::EventDescriptor::new("t", "e", "", &[], DescriptorKind::Event);

    /// The models below share descriptors (statics whose masks every tracer sets and
    /// a destroy clears), so they run one at a time: a model that another changes
    /// under it explores a different execution each time.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
        ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn tracer() -> &'static Tracer<LoomPlatform> {
        let limits = Limits { max_instances: 3, max_total_bytes: 1 << 20 };
        let top = InstanceConfig { bytes_per_cpu: 64, mode: Mode::Overwrite, snapshot: false };
        let t = Tracer::new(LoomPlatform, 2, &[&EV], limits, top).unwrap();
        // Loom checks each execution's leaks; the tracer lives for the model only.
        std::boxed::Box::leak(std::boxed::Box::new(t))
    }

    /// Runs `record` as a writer on CPU 0 and returns once that writer is inside its
    /// section, the caller now on CPU 1. The descriptors' enable and hooked masks are
    /// statics with `core` atomics, which loom cannot see: without this the control
    /// side's race with the writer's mask load is never explored.
    fn writer_in_section(record: impl FnOnce() + Send + 'static) -> loom::thread::JoinHandle<()> {
        let entered = Arc::new(loom::sync::atomic::AtomicBool::new(false));
        let w = {
            let entered = entered.clone();
            loom::thread::spawn(move || {
                CPU.with(|c| c.set(0));
                hook::set(move |p| {
                    if p == Point::Section {
                        entered.store(true, loom::sync::atomic::Ordering::Release);
                    }
                });
                record();
                hook::clear();
            })
        };
        CPU.with(|c| c.set(1));
        while !entered.load(loom::sync::atomic::Ordering::Acquire) {
            loom::thread::yield_now();
        }
        w
    }

    /// A writer records into instance "a" while the control side destroys it and
    /// creates "b" in the same slot: the writer's event lands in "a" (counted there)
    /// or nowhere, never in "b", which did not enable it.
    #[test]
    fn loom_destroy_and_recreate_vs_writer() {
        let _serial = one_at_a_time();
        model(3, || {
            hook::clear();
            let t = tracer();
            let cfg = InstanceConfig { bytes_per_cpu: 64, mode: Mode::Overwrite, snapshot: false };
            let a = t.get_or_create("a", cfg).unwrap();
            a.set_event(Some("t"), None, true).unwrap();
            let slot = a.state.slot;
            drop(a);
            let w = writer_in_section(move || {
                crate::event::dispatch::Dispatch::record(t, &EV, 8, &&[1u8; 8][..]);
            });
            t.destroy_by_name("a").unwrap();
            let b = t.get_or_create("b", cfg).unwrap();
            assert_eq!(b.state.slot, slot, "the slot is reused");
            w.join().unwrap();
            let s = b.stats(0).unwrap();
            assert_eq!(s.written, 0, "an event of a destroyed instance landed in its successor");
        });
    }

    /// A writer records the entry of function 0, which instance "a" traces, while
    /// the control side destroys "a" and creates "b" in the same slot, tracing only
    /// function 1 with `function`: the entry lands in "a" or nowhere, never in "b".
    /// The functions' masks are loom atomics, so the writer's mask load races
    /// with destroy's release and with b's publication.
    #[test]
    fn loom_function_destroy_and_recreate_vs_writer() {
        let _serial = one_at_a_time();
        use crate::tracer::{FunctionList, FunctionTracer};
        model(3, || {
            let t = tracer();
            let b = recreated_while_function_0_runs(
                t,
                2,
                |a| a.set_function_tracer(FunctionTracer::Function).unwrap(),
                |b| {
                    b.set_function_list(FunctionList::Filter, &[false, true]).unwrap();
                    b.set_function_tracer(FunctionTracer::Function).unwrap();
                },
            );
            let s = b.stats(0).unwrap();
            b.set_function_tracer(FunctionTracer::Nop).unwrap();
            assert_eq!(s.written, 0, "a function of a destroyed instance landed in its successor");
        });
    }

    /// With `functions` registered, instance "a" is set up by `arm`; then, while a
    /// writer records function 0's entry, "a" is destroyed and "b" created in its
    /// slot and set up by `then`. Returns "b" once the writer is done.
    fn recreated_while_function_0_runs(
        t: &'static Tracer<LoomPlatform>,
        functions: usize,
        arm: impl FnOnce(&crate::Instance<'_, LoomPlatform>),
        then: impl FnOnce(&crate::Instance<'_, LoomPlatform>),
    ) -> crate::Instance<'static, LoomPlatform> {
        hook::clear();
        assert!(t.set_functions(functions));
        let cfg = InstanceConfig { bytes_per_cpu: 64, mode: Mode::Overwrite, snapshot: false };
        let a = t.get_or_create("a", cfg).unwrap();
        arm(&a);
        let slot = a.state.slot;
        drop(a);
        let w = loom::thread::spawn(move || {
            CPU.with(|c| c.set(0));
            t.record_function_entry(0, 0x100, 0x200, Some(0), Default::default());
        });
        CPU.with(|c| c.set(1));
        t.destroy_by_name("a").unwrap();
        let b = t.get_or_create("b", cfg).unwrap();
        assert_eq!(b.state.slot, slot, "the slot is reused");
        then(&b);
        w.join().unwrap();
        b
    }

    /// A function command (`traceoff`) of instance "a" runs in a writer while the
    /// control side destroys "a" and creates "b" in the same slot: the command acts
    /// on "a" or not at all, never on "b" (destroy clears its bits and table before
    /// the slot is reused).
    #[test]
    fn loom_function_command_destroy_and_recreate_vs_writer() {
        let _serial = one_at_a_time();
        model(3, || {
            let arm = |a: &crate::Instance<'_, LoomPlatform>| {
                a.set_function_command(&[0], "traceoff").unwrap();
            };
            let b = recreated_while_function_0_runs(tracer(), 1, arm, |_| {});
            assert!(b.tracing(), "a command of a destroyed instance acted on its successor");
            assert!(b.function_commands().unwrap().is_empty());
        });
    }

    /// The profiler's counters: two counts of a call on one CPU (an interrupt's
    /// count between the steps of the one it interrupted), each a call and its
    /// time, whose squares carry past 64 bits: both are there, exact, once done.
    #[test]
    fn loom_profile_counts_vs_nested_count() {
        let _serial = one_at_a_time();
        model(3, || {
            let t = tracer();
            assert!(t.set_functions(1));
            t.set_function_profile(true).unwrap();
            let long = u64::from(u32::MAX);
            let count = move || {
                CPU.with(|c| c.set(0));
                assert!(t.profile_entry(0));
                t.profile_return(0, long);
            };
            let w = loom::thread::spawn(count);
            count();
            w.join().unwrap();
            let squares = 2 * u128::from(long) * u128::from(long);
            let stat = crate::tracer::FunctionStat {
                index: 0,
                hits: 2,
                time: 2 * long,
                time_squared: squares,
            };
            assert_eq!(t.function_stats(0), [stat], "a count was lost");
        });
    }

    /// The irqsoff tracer: two CPUs close irqs-off regions of 500 and 900 ns at
    /// once. Whatever the order, the maximum is 900 and the snapshot holds that
    /// region's record: the reports' compare, record and swap are one step each.
    #[test]
    fn loom_irqsoff_reports_on_two_cpus() {
        let _serial = one_at_a_time();
        use crate::tracer::{FunctionTracer, IRQSOFF};
        model(3, || {
            let t = tracer();
            assert!(t.set_functions(1));
            let cfg = InstanceConfig { bytes_per_cpu: 64, mode: Mode::Overwrite, snapshot: false };
            let lat = t.get_or_create("lat", cfg).unwrap();
            lat.set_function_tracer(FunctionTracer::Irqsoff).unwrap();
            let region = move |cpu: usize, ip: u64, ns: u64| {
                CPU.with(|c| c.set(cpu));
                CLOCK.with(|c| c.set(1000));
                assert!(t.irqs_off(ip));
                CLOCK.with(|c| c.set(1000 + ns));
                t.irqs_on(ip + 0x80);
            };
            let w = loom::thread::spawn(move || region(0, 0x100, 500));
            region(1, 0x200, 900);
            w.join().unwrap();
            assert_eq!(lat.max_latency(), 900, "a shorter region's report overtook the longer's");
            let recorder = lat.recorder();
            let mut kept = recorder.snapshot().unwrap().iter(1).unwrap();
            let mut last = None;
            while let Some(record) = kept.next_record() {
                if record.id == IRQSOFF.id() {
                    last = Some(u64::from_le_bytes(record.payload[..8].try_into().unwrap()));
                }
            }
            assert_eq!(last, Some(900), "the snapshot is not the longest region's window");
            lat.set_function_tracer(FunctionTracer::Nop).unwrap();
        });
    }

    /// A snapshot swap through an instance while a writer records into it and a
    /// nested writer interrupts it: the snapshot is frozen when the swap returns.
    #[test]
    fn loom_instance_swap_vs_nested_writer() {
        let _serial = one_at_a_time();
        model(3, || {
            hook::clear();
            let t = tracer();
            let cfg = InstanceConfig { bytes_per_cpu: 64, mode: Mode::Overwrite, snapshot: true };
            let a = t.get_or_create("a", cfg).unwrap();
            a.set_event(Some("t"), None, true).unwrap();
            let w = loom::thread::spawn(move || {
                CPU.with(|c| c.set(0));
                hook::once(Point::Section, move || {
                    crate::event::dispatch::Dispatch::record(t, &EV, 8, &&[2u8; 8][..]);
                });
                crate::event::dispatch::Dispatch::record(t, &EV, 8, &&[1u8; 8][..]);
                hook::clear();
            });
            CPU.with(|c| c.set(1));
            a.snapshot_take().unwrap();
            let rec = a.recorder();
            let snap = rec.snapshot().unwrap();
            let frozen = snap.stats(0).unwrap();
            assert!(frozen.balanced(), "{frozen:?}");
            w.join().unwrap();
            assert_eq!(snap.stats(0).unwrap().written, frozen.written, "written after the swap");
            let live = a.stats(0).unwrap();
            assert_eq!(live.written + frozen.written, 2);
        });
    }

    /// A histogram cleared (`hist:...:clear`) while a writer inside its section adds
    /// its event's hit: the clear pauses the histogram and waits for a grace period,
    /// which waits for that writer, before it empties the table, so the table ends
    /// empty: never a key half-written, or kept with its hits zeroed.
    #[test]
    fn loom_hist_clear_vs_writer() {
        let _serial = one_at_a_time();
        static EVH: crate::event::EventDescriptor = event_with_n("h");
        model(2, || {
            hook::clear();
            let t = tracer_recording(&EVH);
            let a = t.lookup("a").unwrap();
            a.set_trigger(&EVH, "hist:keys=n:size=2").unwrap();
            drop(a);
            let w = writer_in_section(move || record_n(t, &EVH, 7));
            let a = t.lookup("a").unwrap();
            a.set_trigger(&EVH, "hist:keys=n:size=2:clear").unwrap();
            w.join().unwrap();
            let mut text = std::string::String::new();
            a.write_hists(&EVH, None, &mut text).unwrap();
            assert!(!text.lines().any(|l| l.starts_with('{')), "{text}");
            let counted = text.lines().find_map(|l| l.trim().strip_prefix("Entries:"));
            assert_eq!(counted.map(str::trim), Some("0"), "{text}");
        });
    }

    /// A filter replaced while a writer records the event it filters: the writer
    /// uses the old filter or the new one, never a freed one (the old hook table goes
    /// after a grace period), and once `set_filter` returns the new one applies.
    #[test]
    fn loom_filter_replaced_vs_writer() {
        let _serial = one_at_a_time();
        static EVF: crate::event::EventDescriptor = event_with_n("f");
        model(3, || {
            hook::clear();
            let t = tracer_recording(&EVF);
            let a = t.lookup("a").unwrap();
            a.set_filter(&EVF, "n == 1").unwrap();
            drop(a);
            let w = writer_in_section(move || record_n(t, &EVF, 2));
            let a = t.lookup("a").unwrap();
            a.set_filter(&EVF, "n == 2").unwrap();
            w.join().unwrap();
            let before = a.stats(0).unwrap().written;
            assert!(before <= 1, "{before}");
            // After `set_filter` returned, the new filter applies.
            CPU.with(|c| c.set(0));
            record_n(t, &EVF, 2);
            assert_eq!(a.stats(0).unwrap().written, before + 1);
            assert_eq!(a.filter(&EVF).as_deref(), Some("n == 2"));
        });
    }

    /// An event with one `u32` field, `n`, for [`tracer_recording`] (one per model:
    /// a descriptor's masks are statics that outlive a model, so a model whose
    /// descriptor another model changed explores other executions).
    const fn event_with_n(system: &'static str) -> crate::event::EventDescriptor {
        crate::event::EventDescriptor::new(
            system,
            "e",
            "n={n}",
            &[crate::field::Field { name: "n", kind: crate::field::FieldKind::U32 }],
            DescriptorKind::Event,
        )
    }

    /// A tracer of `event` alone, whose instance "a" records it.
    fn tracer_recording(
        event: &'static crate::event::EventDescriptor,
    ) -> &'static Tracer<LoomPlatform> {
        let limits = Limits { max_instances: 3, max_total_bytes: 1 << 20 };
        let cfg = InstanceConfig { bytes_per_cpu: 64, mode: Mode::Overwrite, snapshot: false };
        let t = Tracer::new(LoomPlatform, 2, &[event], limits, cfg).unwrap();
        let t: &'static Tracer<LoomPlatform> = std::boxed::Box::leak(std::boxed::Box::new(t));
        t.get_or_create("a", cfg).unwrap().set_event(Some(event.system), None, true).unwrap();
        t
    }

    /// Records `event` (an [`event_with_n`]) with `n` on the caller's CPU, as its
    /// tracepoint would.
    fn record_n(
        t: &'static Tracer<LoomPlatform>,
        event: &'static crate::event::EventDescriptor,
        n: u32,
    ) {
        crate::event::dispatch::Dispatch::record(t, event, 4, &&n.to_le_bytes()[..]);
    }
}

/// The static keys' handshake between disarming an event (`Tracer::sync_keys`, which
/// saw its mask zero) and enabling it where patching cannot wait
/// (`Instance::set_event`, which saw it armed): a model of the two sequences over
/// loom's atomics (the descriptor's are `core`'s, for its `const fn new`). Whatever
/// the interleaving, an enabled event never ends behind a NOP, and the enabling
/// reports a refusal exactly when it undid its bit.
#[test]
fn loom_disarm_vs_enable_where_patching_cannot_wait() {
    use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed, Ordering::SeqCst, fence};
    model(3, || {
        let mask = Arc::new(AtomicU64::new(0));
        let armed = Arc::new(AtomicBool::new(true));
        // The sites jump (true) or are NOPs.
        let jumps = Arc::new(AtomicBool::new(true));
        let disarm = {
            let (mask, armed, jumps) = (mask.clone(), armed.clone(), jumps.clone());
            loom::thread::spawn(move || {
                armed.store(false, Relaxed);
                fence(SeqCst);
                if mask.load(Relaxed) != 0 {
                    armed.store(true, Relaxed);
                } else {
                    jumps.store(false, Relaxed);
                }
            })
        };
        let refused = if !armed.load(Relaxed) {
            true
        } else {
            mask.fetch_or(1, Relaxed);
            fence(SeqCst);
            let lost = !armed.load(Relaxed);
            if lost {
                mask.fetch_and(!1, Relaxed);
            }
            lost
        };
        disarm.join().unwrap();
        let enabled = mask.load(Relaxed) != 0;
        assert!(!enabled || jumps.load(Relaxed), "an enabled event behind a NOP");
        assert_eq!(refused, !enabled);
    });
}

/// The histogram table: two writers add keys whose first slot is the same (one key
/// each, or the same key), while the main thread adds a third. Whatever the
/// interleaving, every hit is in its key's entry or counted as dropped (a writer
/// that met a slot of its hash still being claimed for too long), and no key has
/// two entries.
#[test]
fn loom_hist_writers_same_and_colliding_keys() {
    use crate::tracer::hist::table::{Table, hash};
    // Two keys whose first slot is the same in a table of 4 slots (2 entries), and a
    // third that starts elsewhere.
    let a = 1u64;
    let b = (2..).find(|&k| hash(&[k]) & 3 == hash(&[a]) & 3).unwrap();
    let c = (2..).find(|&k| hash(&[k]) & 3 != hash(&[a]) & 3).unwrap();
    for (first, second) in [(a, b), (a, a)] {
        model(2, move || {
            let table = {
                let mut table = Table::new(2, 1, 0, 0, 0);
                assert!(table.allocate());
                Arc::new(table)
            };
            let writers: Vec<_> = [first, second]
                .into_iter()
                .map(|key| {
                    let table = table.clone();
                    loom::thread::spawn(move || table.add(&[key], &[], &[], |_| {}))
                })
                .collect();
            table.add(&[c], &[], &[], |_| {});
            writers.into_iter().for_each(|w| w.join().unwrap());
            let mut seen = Vec::new();
            let mut counted = 0;
            for (key, sums) in table.contents() {
                assert!(!seen.contains(&key[0]), "key {} has two entries", key[0]);
                seen.push(key[0]);
                let added = [first, second, c].iter().filter(|&&k| k == key[0]).count() as u64;
                assert!(sums[0] <= added, "key {}: {} hits of {added}", key[0], sums[0]);
                counted += sums[0];
            }
            assert_eq!(counted + table.drops(), 3, "every hit counted once");
        });
    }
}

/// A histogram's variable: a writer adds its key's entry with the variable set to
/// 7 (its value stored, then its bit set with a release), while a reader from
/// another histogram reads it once (the bit cleared with an acquire, then the
/// value loaded), twice. Whatever the interleaving, a read that finds the bit sees
/// 7, never the slot's zero, and the two reads take the one value at most once.
#[test]
fn loom_hist_variable_read_once_sees_what_was_stored() {
    use crate::tracer::hist::table::Table;
    model(2, || {
        let table = {
            let mut table = Table::new(2, 1, 0, 1, 0);
            assert!(table.allocate());
            Arc::new(table)
        };
        let writer = {
            let table = table.clone();
            loom::thread::spawn(move || table.add(&[5], &[], &[7], |_| {}))
        };
        let reader = {
            let table = table.clone();
            loom::thread::spawn(move || [0, 1].map(|_| table.read_var(&[5], 0, true)))
        };
        writer.join().unwrap();
        let reads = reader.join().unwrap();
        let found: Vec<u64> = reads.iter().flatten().copied().collect();
        assert!(found.iter().all(|&v| v == 7), "read {found:?}");
        assert!(found.len() <= 1, "read once, found twice: {found:?}");
    });
}
