//! The memory barrier on every CPU online (the tracer's heavy barrier), and `barrier`,
//! its self-test: every CPU runs barriers at the same time, so CPUs wait for each
//! other's acknowledgements while they are waiting themselves.

use crate::arch::{MAX_CPUS, irq, membarrier};
use crate::{clock, println, smp};
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// After this long without every acknowledgement, the wait names the late CPU.
const WARN_AFTER_NS: u64 = 2_000_000_000;
/// Longest self-test accepted, in milliseconds.
pub const MAX_MS: u64 = 10_000;
/// How long the self-test waits for the CPUs beyond its duration.
const FINISH_TIMEOUT_NS: u64 = 10_000_000_000;

/// Returns once every CPU online has executed a full memory barrier after the call
/// began. Thread context with interrupts on (`irq::may_wait`): other CPUs' barriers
/// are served meanwhile. A CPU that keeps interrupts off delays it; after 2 s the wait
/// says which CPU it waits for, and goes on waiting (returning early would let the
/// tracer free or reuse what a writer on that CPU may still use).
pub fn all_cpus() {
    let barrier = membarrier::start(smp::online());
    let start = clock::now_ns();
    let mut warned = false;
    while let Some(cpu) = barrier.pending() {
        if !warned && clock::now_ns().saturating_sub(start) > WARN_AFTER_NS {
            warned = true;
            println!(
                "barrier: cpu{cpu} has not acknowledged a memory barrier for 2 s \
                 (interrupts off?); still waiting"
            );
        }
        core::hint::spin_loop();
    }
}

/// Whether a self-test runs (its CPUs share the statics below). A run whose CPUs did
/// not all finish leaves it set: their late counts would corrupt the next run's.
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// When the self-test's CPUs stop starting barriers (ns since boot).
static DEADLINE_NS: AtomicU64 = AtomicU64::new(0);
/// Barriers each CPU completed in the self-test.
static COMPLETED: [AtomicU64; MAX_CPUS] = [const { AtomicU64::new(0) }; MAX_CPUS];

/// One CPU's part of the self-test: barriers back to back until the deadline.
fn worker() {
    let deadline = DEADLINE_NS.load(Ordering::Acquire);
    let mut completed = 0;
    while clock::now_ns() < deadline {
        all_cpus();
        completed += 1;
    }
    COMPLETED[crate::arch::percpu::index()].store(completed, Ordering::Relaxed);
}

/// The `barrier` self-test: every CPU online runs barriers back to back for `ms`
/// milliseconds; prints what each completed. Fails unless every CPU finished in time
/// and completed at least one barrier.
pub fn selftest(ms: u64) -> Result<(), &'static str> {
    if !irq::may_wait() {
        return Err("the barrier self-test needs interrupts on");
    }
    if ACTIVE.swap(true, Ordering::Acquire) {
        return Err("a previous barrier self-test did not finish");
    }
    let cpus = smp::online();
    for count in &COMPLETED {
        count.store(0, Ordering::Relaxed);
    }
    // Release: the reset counts above come before any worker's count.
    DEADLINE_NS.store(clock::now_ns() + ms * 1_000_000, Ordering::Release);
    // This CPU's part ends at the deadline; the others get the timeout after it.
    let finished = smp::run_everywhere(worker, FINISH_TIMEOUT_NS);
    println!("barrier: {cpus} CPU(s), {ms} ms, every CPU starting barriers back to back");
    let mut idle = 0;
    for (cpu, count) in COMPLETED.iter().enumerate().take(cpus) {
        let count = count.load(Ordering::Relaxed);
        idle += usize::from(count == 0);
        println!("  cpu{cpu}: {count} barriers completed");
    }
    // On failure (a CPU had work pending, or did not finish within 10 s of the end)
    // a CPU that took the work may still finish later: the run stays marked active.
    finished?;
    ACTIVE.store(false, Ordering::Release);
    if idle > 0 {
        return Err("FAILED: a CPU completed no barrier");
    }
    println!("barrier: ok");
    Ok(())
}
