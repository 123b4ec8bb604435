//! The hard lockup detector: a CPU that takes no timer interrupt for a threshold
//! (interrupts off too long, or stuck in a handler) is stopped by an NMI from the
//! CPU that watches it, and panics in that NMI: the panic names where it was stuck
//! and dumps the trace. Each CPU watches the next one from its own timer interrupt
//! (as Linux's buddy detector does), so it takes two CPUs or more; the threshold
//! counts the watcher's ticks.

use crate::arch::{MAX_CPUS, idt, percpu, stack};
use crate::timer::{self, Tick};
use crate::{events, smp};
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};

/// The threshold at boot, in ms (Linux's `watchdog_thresh` is 10 s).
pub const DEFAULT_THRESHOLD_MS: u64 = 10_000;
/// The largest threshold taken, in ms.
pub const MAX_THRESHOLD_MS: u64 = 600_000;

/// The threshold in ms; 0: the detector is off.
static THRESHOLD_MS: AtomicU64 = AtomicU64::new(DEFAULT_THRESHOLD_MS);
/// Per watching CPU: the timer interrupts its buddy had taken when they last moved.
static SEEN: [AtomicU64; MAX_CPUS] = [const { AtomicU64::new(0) }; MAX_CPUS];
/// Per watching CPU: its own ticks since its buddy's count last moved.
static STALLED: [AtomicU64; MAX_CPUS] = [const { AtomicU64::new(0) }; MAX_CPUS];
/// No CPU (in [`LOCKED`]).
const NONE: usize = usize::MAX;
/// The CPU found locked up: the NMI it takes panics.
static LOCKED: AtomicUsize = AtomicUsize::new(NONE);
/// How long it had taken no timer interrupt, in ms, when it was found.
static LOCKED_MS: AtomicU64 = AtomicU64::new(0);

/// Hooks the detector to every CPU's timer interrupt and to the NMI (after the
/// panic path's hook, which parks a CPU the panic stops).
pub fn init() -> Result<(), &'static str> {
    timer::TICK.add(on_tick)?;
    idt::NMI.add(on_nmi)
}

/// The CPU `cpu` watches: the next one online; none with one CPU.
pub fn buddy(cpu: usize) -> Option<usize> {
    let online = smp::online();
    (online >= 2).then(|| (cpu + 1) % online)
}

/// The threshold in ms (0: off).
pub fn threshold_ms() -> u64 {
    THRESHOLD_MS.load(Relaxed)
}

/// Sets the threshold in ms (0 turns the detector off). Fails beyond
/// [`MAX_THRESHOLD_MS`], changing nothing.
pub fn set_threshold_ms(ms: u64) -> Result<(), &'static str> {
    if ms > MAX_THRESHOLD_MS {
        return Err("a threshold is at most 600000 ms");
    }
    STALLED.iter().for_each(|s| s.store(0, Relaxed));
    THRESHOLD_MS.store(ms, Relaxed);
    Ok(())
}

/// How long CPU `cpu`'s buddy has taken no timer interrupt, as `cpu` counts it,
/// in ms.
pub fn stalled_ms(cpu: usize) -> u64 {
    STALLED.get(cpu).map_or(0, |s| s.load(Relaxed)) * 1000 / timer::HZ
}

/// A timer interrupt of the watching CPU: has its buddy taken one since the last?
fn on_tick(tick: Tick) {
    let threshold = THRESHOLD_MS.load(Relaxed);
    let (Some(buddy), Some(seen), Some(stalled)) =
        (buddy(tick.cpu), SEEN.get(tick.cpu), STALLED.get(tick.cpu))
    else {
        return;
    };
    let count = timer::ticks(buddy);
    // A buddy whose timer has not started yet is not watched.
    if threshold == 0 || count == 0 || count != seen.load(Relaxed) {
        seen.store(count, Relaxed);
        stalled.store(0, Relaxed);
        return;
    }
    let ticks = stalled.load(Relaxed) + 1;
    stalled.store(ticks, Relaxed);
    let ms = ticks * 1000 / timer::HZ;
    if ms >= threshold && LOCKED.compare_exchange(NONE, buddy, SeqCst, SeqCst).is_ok() {
        LOCKED_MS.store(ms, SeqCst);
        trace::emit!(events::HARD_LOCKUP, buddy as u32, ms);
        if smp::nmi(buddy).is_err() {
            LOCKED.store(NONE, SeqCst);
        }
    }
}

/// An NMI: the one the watcher sends a CPU it found locked up panics there.
fn on_nmi() {
    let cpu = percpu::index();
    if LOCKED.load(SeqCst) == cpu {
        stack::record_nmi_as_fault();
        panic!("hard LOCKUP on cpu {cpu}: no timer interrupt for {} ms", LOCKED_MS.load(SeqCst));
    }
}

/// Hangs this CPU with interrupts off, for good: only the detector's NMI gets it
/// out (a test aid; `smp::Request::Spin` does it on another CPU). Never inlined:
/// the panic names it as where the CPU was stuck.
#[inline(never)]
pub fn spin() -> ! {
    x86_64::instructions::interrupts::disable();
    loop {
        core::hint::spin_loop();
    }
}
