//! Model-based property test of the instance API: sequences of resizes (all CPUs or
//! one), snapshot operations, clears, mode, cpumask, recording and clock changes,
//! instances created and destroyed, and markers written between them, checked after
//! each step against a model of what the instance shows.

use crate::{Clock, HostPlatform, Instance, InstanceConfig, Limits, Mode, Tracer};
use proptest::prelude::*;
use std::vec::Vec;

const CPUS: usize = 2;
/// Sizes asked for: too small, odd, the limit's order and beyond it.
const SIZES: &[usize] = &[0, 1, 64, 100, 1024, 4096, 1 << 16, 1 << 20, usize::MAX];

#[derive(Debug, Clone)]
enum Op {
    Resize(usize),
    ResizeCpu(usize, usize),
    SnapshotAlloc,
    SnapshotTake,
    SnapshotClear,
    SnapshotClearCpu(usize),
    SnapshotFree,
    Clear,
    ClearCpu(usize),
    SetMode(Mode),
    SetCpumask(u64),
    SetTracing(bool),
    SetClock(Clock),
    /// Markers written on a CPU.
    Write(usize, u8),
    /// Another instance created with a buffer of this size, or destroyed.
    Other(Option<usize>),
}

fn op() -> impl Strategy<Value = Op> {
    let size = prop::sample::select(SIZES);
    let cpu = 0..CPUS + 1;
    prop_oneof![
        1 => size.clone().prop_map(Op::Resize),
        1 => (cpu.clone(), size.clone()).prop_map(|(c, s)| Op::ResizeCpu(c, s)),
        1 => Just(Op::SnapshotAlloc),
        1 => Just(Op::SnapshotTake),
        1 => Just(Op::SnapshotClear),
        1 => cpu.clone().prop_map(Op::SnapshotClearCpu),
        1 => Just(Op::SnapshotFree),
        1 => Just(Op::Clear),
        1 => cpu.clone().prop_map(Op::ClearCpu),
        1 => prop::sample::select(&[Mode::Overwrite, Mode::Discard][..]).prop_map(Op::SetMode),
        1 => (0u64..4).prop_map(Op::SetCpumask),
        1 => prop::bool::ANY.prop_map(Op::SetTracing),
        1 => prop::sample::select(&Clock::ALL[..]).prop_map(Op::SetClock),
        3 => (0..CPUS, 1u8..40).prop_map(|(c, n)| Op::Write(c, n)),
        1 => prop::option::of(size).prop_map(Op::Other),
    ]
}

/// What the instance shows of itself.
#[derive(Debug, Clone, PartialEq)]
struct Shown {
    live: Vec<usize>,
    snapshot: Option<Vec<usize>>,
    mode: Mode,
    cpumask: u64,
    tracing: bool,
    clock: Clock,
}

fn shown(i: &Instance<'_, HostPlatform>) -> Shown {
    let recorder = i.recorder();
    let sizes = |b: &crate::ring::Buffer<HostPlatform>| {
        (0..CPUS).map(|c| b.bytes_of(c).unwrap()).collect::<Vec<_>>()
    };
    Shown {
        live: sizes(recorder.live()),
        snapshot: recorder.snapshot().map(sizes),
        mode: i.mode(),
        cpumask: i.cpumask(),
        tracing: i.tracing(),
        clock: i.clock(),
    }
}

/// A ring's size for `bytes` asked: a power of two of at least 64 bytes.
fn ring_size(bytes: usize) -> usize {
    bytes.max(64).next_power_of_two()
}

/// What a taken operation leaves the instance showing, from what it showed.
fn expected(op: &Op, mut s: Shown) -> Shown {
    match *op {
        Op::Resize(bytes) => {
            s.live = vec![ring_size(bytes); CPUS];
            s.snapshot = s.snapshot.map(|_| s.live.clone());
        }
        Op::ResizeCpu(cpu, bytes) => {
            s.live[cpu] = ring_size(bytes);
            if let Some(spare) = &mut s.snapshot {
                spare[cpu] = ring_size(bytes);
            }
        }
        Op::SnapshotAlloc | Op::SnapshotTake => s.snapshot = Some(s.live.clone()),
        Op::SnapshotFree => s.snapshot = None,
        Op::SetMode(mode) => s.mode = mode,
        Op::SetCpumask(mask) => s.cpumask = mask,
        Op::SetTracing(on) => s.tracing = on,
        Op::SetClock(clock) => s.clock = clock,
        _ => {}
    }
    s
}

proptest! {
    #![proptest_config(crate::tests::util::cases(200))]

    /// After each operation the instance shows what the model says (a refused one
    /// changes nothing; the snapshot buffer is always shaped like the live one), the
    /// memory the tracer counts is what the instances' buffers hold, every ring's
    /// counts balance, and each marker written is counted on its CPU exactly when
    /// recording is on there.
    #[test]
    #[cfg_attr(miri, ignore = "single-threaded safe code, run natively (200 sequences)")]
    fn instance_operations_do_what_the_model_says(ops in prop::collection::vec(op(), 1..30)) {
        HostPlatform::set_cpu(0);
        let limits = Limits { max_instances: 3, max_total_bytes: 1 << 21 };
        let cfg = InstanceConfig { bytes_per_cpu: 1024, mode: Mode::Overwrite, snapshot: false };
        let t = Tracer::new(HostPlatform, CPUS, &[], limits, cfg).unwrap();
        let top = t.top();
        let mut other: Option<Instance<'_, HostPlatform>> = None;
        for op in &ops {
            let before = shown(&top);
            let counted = |cpu| top.stats(cpu).map(|s| s.written).unwrap();
            let taken = match *op {
                Op::Resize(bytes) => top.resize(bytes).is_ok(),
                Op::ResizeCpu(cpu, bytes) => top.resize_cpu(cpu, bytes).is_ok(),
                Op::SnapshotAlloc => top.snapshot_alloc().is_ok(),
                Op::SnapshotTake => top.snapshot_take().is_ok(),
                Op::SnapshotClear => top.snapshot_clear().is_ok(),
                Op::SnapshotClearCpu(cpu) => top.snapshot_clear_cpu(cpu).is_ok(),
                Op::SnapshotFree => top.snapshot_free().is_ok(),
                Op::Clear => top.clear().is_ok(),
                Op::ClearCpu(cpu) => top.clear_cpu(cpu).is_ok(),
                Op::SetMode(mode) => top.set_mode(mode).is_ok(),
                Op::SetCpumask(mask) => {
                    top.set_cpumask(mask).unwrap();
                    true
                }
                Op::SetTracing(on) => {
                    top.set_tracing(on);
                    true
                }
                Op::SetClock(clock) => {
                    let taken = top.set_clock(clock).is_ok();
                    if taken && clock != before.clock {
                        let entries = |cpu| top.stats(cpu).unwrap().entries;
                        prop_assert!((0..CPUS).all(|cpu| entries(cpu) == 0), "emptied");
                    }
                    taken
                }
                Op::Write(cpu, n) => {
                    let was = counted(cpu);
                    HostPlatform::set_cpu(cpu);
                    let taken = (0..n).filter(|_| top.write_marker("m").is_ok()).count();
                    HostPlatform::set_cpu(0);
                    let on = before.tracing && before.cpumask & (1 << cpu) != 0;
                    let expect = was + if on { u64::from(n) } else { 0 };
                    prop_assert_eq!(counted(cpu), expect, "{:?} with {:?}", op, before);
                    // Each write says whether the buffer took it: none while off, each
                    // in overwrite mode (discard mode refuses some once full).
                    match (on, before.mode) {
                        (false, _) => prop_assert_eq!(taken, 0),
                        (true, Mode::Overwrite) => prop_assert_eq!(taken, usize::from(n)),
                        (true, _) => prop_assert!(taken <= usize::from(n)),
                    }
                    true
                }
                Op::Other(Some(bytes)) => {
                    let config = InstanceConfig { bytes_per_cpu: bytes, ..cfg };
                    if let Some(o) = other.take() {
                        prop_assert!(t.destroy(o).is_ok());
                    }
                    other = t.get_or_create("o", config).ok();
                    true
                }
                Op::Other(None) => {
                    if let Some(o) = other.take() {
                        prop_assert!(t.destroy(o).is_ok());
                    }
                    true
                }
            };
            let now = shown(&top);
            let model = if taken { expected(op, before.clone()) } else { before.clone() };
            prop_assert_eq!(&now, &model, "{:?} ({}) from {:?}", op, taken, before);
            let held = |i: &Instance<'_, HostPlatform>| {
                let s = shown(i);
                s.live.iter().chain(s.snapshot.iter().flatten()).sum::<usize>()
            };
            let total = held(&top) + other.as_ref().map_or(0, held);
            prop_assert_eq!(t.memory().unwrap().0, total, "after {:?}", op);
            prop_assert!(t.memory().unwrap().0 <= limits.max_total_bytes);
            for cpu in 0..CPUS {
                let stats = top.stats(cpu).unwrap();
                prop_assert!(stats.balanced(), "CPU {}: {:?} after {:?}", cpu, stats, op);
            }
        }
    }
}
