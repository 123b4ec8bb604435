//! `bench`: the cost of tracing, measured in the kernel with the TSC, all in one run:
//! an empty loop, a disabled tracepoint, the ring's raw write of the same record, and
//! the enabled tracepoint (two `u64` arguments) through the tracer into an instance,
//! then into two, then recorded nowhere but added to a `hist` trigger's table (keyed
//! on one of 64 values, summing the other); then a call to a small function, with the function tracer off (its entry NOP),
//! and traced by `function` and by `function_graph` (records go to the top-level
//! instance).

use crate::arch::irq::IrqGuard;
use crate::arch::rdtsc;
use crate::events::BENCH;
use crate::tracing::functions::{self, Kind};
use crate::{clock, println, tracing};
use core::hint::black_box;
use trace::{InstanceConfig, Mode};

/// Names of the temporary instances the enabled tracepoint records into.
const INSTANCES: [&str; 2] = ["bench", "bench2"];
/// Rounds of each measurement; the fastest round counts (least disturbed).
const ROUNDS: usize = 5;
/// Iterations timed with interrupts off at a time: a few milliseconds at most (a
/// call traced by `function_graph` under TCG), so timer ticks, and the hard lockup
/// detector's watch, go on between batches however many iterations are asked for.
const BATCH: u64 = 4096;

/// Cycles per iteration of `body`, best of [`ROUNDS`], each timed in batches of
/// [`BATCH`] with interrupts off (the time between batches not counted).
fn cycles_per(iterations: u64, mut body: impl FnMut(u64)) -> f64 {
    (0..ROUNDS)
        .map(|_| {
            let mut cycles = 0;
            let mut done = 0;
            while done < iterations {
                let end = iterations.min(done + BATCH);
                let _irq = IrqGuard::new();
                cycles += batch(done..end, &mut body);
                done = end;
            }
            cycles as f64 / iterations as f64
        })
        .fold(f64::INFINITY, f64::min)
}

/// Cycles `body` takes over `iterations`: a loop of its own, out of line, so that
/// the code measured is the same loop whatever the batching around it.
#[inline(never)]
fn batch(iterations: core::ops::Range<u64>, body: &mut impl FnMut(u64)) -> u64 {
    let start = rdtsc();
    for i in iterations {
        body(black_box(i));
    }
    rdtsc() - start
}

/// The call the function tracer figures time: traceable, never inlined.
#[inline(never)]
fn leaf(x: u64) -> u64 {
    black_box(x).wrapping_mul(3)
}

/// Cycles per call of [`leaf`], with the function tracer off, then traced by
/// `function` and by `function_graph` (`None`: the tracer refused).
fn call_costs(iterations: u64) -> [(&'static str, Option<f64>); 3] {
    let call = || {
        cycles_per(iterations, |i| {
            black_box(leaf(i));
        })
    };
    let off = call();
    let traced = |kind| {
        let mut cycles = None;
        functions::with_only(leaf as *const () as usize, kind, || cycles = Some(call())).ok()?;
        cycles
    };
    [
        ("call, function tracer off (entry NOP)", Some(off)),
        ("call, traced by function", traced(Kind::Function)),
        ("call, traced by function_graph", traced(Kind::Graph)),
    ]
}

/// Runs the benchmark with `iterations` per measurement and prints the figures.
pub fn run(iterations: u64) -> Result<(), &'static str> {
    let tracer = tracing::tracer().ok_or("tracing is not available")?;
    if BENCH.is_enabled() {
        return Err("bench:event is enabled in an instance; disable it first");
    }
    // The instances are removed afterwards: never take over one somebody made.
    if INSTANCES.iter().any(|name| tracer.lookup(name).is_ok()) {
        return Err("an instance named bench or bench2 exists; remove it first");
    }
    let config =
        InstanceConfig { bytes_per_cpu: 256 * 1024, mode: Mode::Overwrite, snapshot: false };
    let instance = tracer
        .get_or_create(INSTANCES[0], config)
        .map_err(|_| "cannot create the bench instance")?;
    let ns_per_cycle = 1e9 / clock::tsc_hz() as f64;

    let empty = cycles_per(iterations, |i| {
        black_box(i);
    });
    let disabled = cycles_per(iterations, |i| trace::emit!(BENCH, i, i));
    let recorder = instance.recorder();
    let id = BENCH.descriptor().id();
    let raw = cycles_per(iterations, |i| {
        let mut payload = [0u8; 16];
        payload[..8].copy_from_slice(&i.to_le_bytes());
        payload[8..].copy_from_slice(&i.to_le_bytes());
        let _ = recorder.live().write(id, &payload);
    });
    let _ = instance.set_event(Some("bench"), Some("event"), true);
    let enabled = cycles_per(iterations, |i| trace::emit!(BENCH, i, i));
    let written: u64 =
        (0..tracer.cpus()).filter_map(|cpu| instance.stats(cpu).ok()).map(|s| s.written).sum();
    // The second instance's figure, and whether it was removed again.
    let second = tracer.get_or_create(INSTANCES[1], config).ok().map(|second| {
        let _ = second.set_event(Some("bench"), Some("event"), true);
        let two = cycles_per(iterations, |i| trace::emit!(BENCH, i, i));
        (two, tracer.destroy(second).is_ok())
    });
    let _ = instance.set_event(None, None, false);
    // The histogram alone: the event fires for its trigger only.
    let line = "hist:keys=a:vals=b";
    let hist = instance.set_trigger(BENCH.descriptor(), line).ok().map(|()| {
        let cycles = cycles_per(iterations, |i| trace::emit!(BENCH, i % 64, i));
        let _ = instance.set_trigger(BENCH.descriptor(), &alloc::format!("!{line}"));
        cycles
    });
    drop(recorder);
    tracer.destroy(instance).map_err(|_| "cannot remove the bench instance")?;
    if second.is_some_and(|(_, removed)| !removed) {
        return Err("cannot remove the second bench instance");
    }
    let two = second.map(|(two, _)| two);

    println!(
        "bench: {iterations} iterations x {ROUNDS} rounds, best round, interrupts off (in \
         batches of {BATCH}), cpu0"
    );
    for (what, cycles) in [
        ("empty loop", empty),
        ("tracepoint, disabled", disabled),
        ("ring write, raw (16-byte payload)", raw),
        ("tracepoint, enabled (2 x u64)", enabled),
    ] {
        println!("  {what:<36} {cycles:>8.1} cycles {:>8.1} ns", cycles * ns_per_cycle);
    }
    println!("  enabled / raw ring write: {:.2}", enabled / raw);
    println!("  events recorded by the instance: {written}");
    match two {
        Some(two) => {
            let what = "tracepoint, enabled in two instances";
            println!("  {what:<36} {two:>8.1} cycles {:>8.1} ns", two * ns_per_cycle);
            println!("  the second instance / raw ring write: {:.2}", (two - enabled) / raw);
        }
        None => println!("  tracepoint, enabled in two instances:    n/a (no room for a second)"),
    }
    match hist {
        Some(c) => {
            let what = "tracepoint, hist trigger only";
            println!("  {what:<36} {c:>8.1} cycles {:>8.1} ns", c * ns_per_cycle);
        }
        None => println!("  tracepoint, hist trigger only:           n/a (refused)"),
    }
    for (what, cycles) in call_costs(iterations) {
        match cycles {
            Some(c) => println!("  {what:<36} {c:>8.1} cycles {:>8.1} ns", c * ns_per_cycle),
            None => println!("  {what:<36}      n/a (no function tracer, or one is on)"),
        }
    }
    Ok(())
}
