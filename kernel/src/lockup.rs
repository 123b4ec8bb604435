//! The hard lockup detector: a CPU that takes no timer interrupt for a threshold
//! (interrupts off too long, or stuck in a handler) is stopped by an NMI from the
//! CPU that watches it, and panics in that NMI: the panic names where it was stuck
//! and dumps the trace. Each CPU watches the next one from its own timer interrupt
//! (as Linux's buddy detector does), so it takes two CPUs or more; the threshold
//! counts the watcher's ticks.
//!
//! What buddies cannot see, every CPU hung at once (or the one CPU of a machine that
//! has one), a periodic NMI sees: the RTC's interrupt, routed as an NMI to the boot
//! CPU ([`watch_every_cpu`]), which panics there once no CPU has taken a timer
//! interrupt for the threshold. Its threshold counts those NMIs, two at least: a host
//! that stops the whole machine for a while delivers the first NMI before the timer
//! interrupts that fell due, never two.

use crate::arch::{MAX_CPUS, idt, percpu, rtc, stack};
use crate::timer::{self, Tick};
use crate::{clock, events, smp};
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};

/// The threshold at boot, in ms (Linux's `watchdog_thresh` is 10 s).
const DEFAULT_THRESHOLD_MS: u64 = 10_000;
/// The largest threshold taken, in ms.
const MAX_THRESHOLD_MS: u64 = 600_000;
/// The smallest threshold taken but 0, in ms: five timer periods, so that a tick or
/// two late (a busy host's vCPU) is not a lockup.
const MIN_THRESHOLD_MS: u64 = 5 * 1000 / timer::HZ;
// `set_threshold_ms`'s refusal names the bounds.
const _: () = assert!(MIN_THRESHOLD_MS == 50 && MAX_THRESHOLD_MS == 600_000);
/// How long past the threshold a watcher waits for the CPU it sent the NMI to to
/// panic, in ms: one that does not took no NMI (it hangs in an NMI handler, NMIs
/// blocked), and the watcher panics in its place.
const NMI_GRACE_MS: u64 = 1_000;

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
/// The CPU the periodic NMI goes to ([`NONE`]: there is none).
static NMI_WATCHER: AtomicUsize = AtomicUsize::new(NONE);
/// Every CPU's timer interrupts, summed, at the periodic NMI's last check.
static NMI_SEEN: AtomicU64 = AtomicU64::new(0);
/// Periodic NMIs since that sum last moved.
static NMI_STALLED: AtomicU64 = AtomicU64::new(0);
/// When the periodic NMI last checked, in ns of [`clock::now_ns`].
static NMI_CHECKED_NS: AtomicU64 = AtomicU64::new(0);
/// Set once a panic is under way: neither detector acts any more.
static STOOD_DOWN: AtomicBool = AtomicBool::new(false);

/// Hooks the detector to every CPU's timer interrupt and to the NMI (after the
/// panic path's hook, which parks a CPU the panic stops).
pub fn init() -> Result<(), &'static str> {
    timer::TICK.add(on_tick)?;
    idt::NMI.add(on_nmi)
}

/// Makes this CPU the one that watches every CPU from the RTC's periodic NMI; the
/// caller then routes that interrupt here as an NMI.
pub fn watch_every_cpu() {
    NMI_WATCHER.store(percpu::index(), SeqCst);
}

/// The CPU that watches every CPU by the periodic NMI, if one does.
pub fn every_cpu_watcher() -> Option<usize> {
    Some(NMI_WATCHER.load(SeqCst)).filter(|&cpu| cpu != NONE)
}

/// How long no CPU has taken a timer interrupt, as the periodic NMI counts it, in
/// ms.
pub fn every_cpu_stalled_ms() -> u64 {
    NMI_STALLED.load(Relaxed) * rtc::PERIOD_MS
}

/// Stops both detectors for good: a panic is under way (its dump keeps interrupts
/// off, and the CPUs it stops take no timer interrupt).
pub fn stand_down() {
    STOOD_DOWN.store(true, SeqCst);
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

/// Sets the threshold in ms (0 turns the detector off). Fails outside
/// [`MIN_THRESHOLD_MS`]..=[`MAX_THRESHOLD_MS`], changing nothing.
pub fn set_threshold_ms(ms: u64) -> Result<(), &'static str> {
    if ms != 0 && !(MIN_THRESHOLD_MS..=MAX_THRESHOLD_MS).contains(&ms) {
        return Err("a threshold is 0 (off) or 50 to 600000 ms (at least five timer ticks)");
    }
    STALLED.iter().for_each(|s| s.store(0, Relaxed));
    NMI_STALLED.store(0, Relaxed);
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
    let off = threshold == 0 || STOOD_DOWN.load(Relaxed);
    if off || count == 0 || count != seen.load(Relaxed) {
        seen.store(count, Relaxed);
        stalled.store(0, Relaxed);
        return;
    }
    let ticks = stalled.load(Relaxed) + 1;
    stalled.store(ticks, Relaxed);
    let ms = ticks * 1000 / timer::HZ;
    if ms < threshold {
        return;
    }
    match LOCKED.compare_exchange(NONE, buddy, SeqCst, SeqCst) {
        Ok(_) => {
            LOCKED_MS.store(ms, SeqCst);
            trace::emit!(events::HARD_LOCKUP, buddy as u32, ms);
            if smp::nmi(buddy).is_err() {
                LOCKED.store(NONE, SeqCst);
            }
        }
        // The NMI sent did not stop it: the watcher panics, as Linux's buddy
        // detector does, rather than leave the detector claimed for good.
        Err(locked) if locked == buddy && ms >= threshold.saturating_add(NMI_GRACE_MS) => {
            panic!(
                "hard LOCKUP on cpu {buddy}: no timer interrupt for {ms} ms, and it took no NMI \
                 (NMIs blocked there): cpu {} panics in its place",
                tick.cpu
            );
        }
        Err(_) => {}
    }
}

/// An NMI: the one the watcher sends a CPU it found locked up panics there; on the
/// CPU that watches every CPU, it may be the periodic one.
fn on_nmi() {
    let cpu = percpu::index();
    if LOCKED.load(SeqCst) == cpu && !STOOD_DOWN.load(SeqCst) {
        stack::record_nmi_as_fault();
        panic!("hard LOCKUP on cpu {cpu}: no timer interrupt for {} ms", LOCKED_MS.load(SeqCst));
    }
    if NMI_WATCHER.load(Relaxed) == cpu {
        check_every_cpu(cpu);
    }
}

/// The periodic NMI's check, on the CPU it goes to (`cpu`): has any CPU taken a
/// timer interrupt since the last? Every NMI there acknowledges the RTC (which NMI
/// is the RTC's cannot be told), but one that comes less than half a period after
/// the last check (another NMI) checks nothing, so a burst of NMIs does not count
/// as time. NMIs do not nest: this is the one writer of what it keeps.
fn check_every_cpu(cpu: usize) {
    rtc::acknowledge();
    let now = clock::now_ns();
    if now.wrapping_sub(NMI_CHECKED_NS.load(Relaxed)) < rtc::PERIOD_MS * 1_000_000 / 2 {
        return;
    }
    NMI_CHECKED_NS.store(now, Relaxed);
    let threshold = THRESHOLD_MS.load(Relaxed);
    let ticks: u64 = (0..smp::online()).map(timer::ticks).sum();
    if threshold == 0 || STOOD_DOWN.load(SeqCst) || ticks != NMI_SEEN.swap(ticks, Relaxed) {
        NMI_STALLED.store(0, Relaxed);
        return;
    }
    let stalled = NMI_STALLED.load(Relaxed) + 1;
    NMI_STALLED.store(stalled, Relaxed);
    let ms = stalled * rtc::PERIOD_MS;
    // A claim by a buddy does not hold this back: every CPU has stopped since, the
    // buddy too (and the CPU it claimed may take no NMI).
    if stalled >= 2 && ms >= threshold {
        LOCKED.store(cpu, SeqCst);
        LOCKED_MS.store(ms, SeqCst);
        trace::emit!(events::HARD_LOCKUP, cpu as u32, ms);
        stack::record_nmi_as_fault();
        panic!("hard LOCKUP on every cpu: no timer interrupt on any for {ms} ms");
    }
}

/// Hangs this CPU as [`spin()`] does, but in the middle of a write into the top-level
/// instance (a `lockup:hard_lockup` record reserved, never filled), as a CPU stopped
/// while it traced: a test aid for the panic's seal (`Tracer::seal_cpu`), which must
/// still publish what the CPU records afterwards, the panic's own records.
pub fn spin_writing() -> ! {
    x86_64::instructions::interrupts::disable();
    if let Some(tracer) = crate::tracing::tracer() {
        let id = events::HARD_LOCKUP.descriptor().id();
        let _ = tracer.top().recorder().live().write_with(id, 16, |_| spin());
    }
    spin()
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
