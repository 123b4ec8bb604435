//! `midpatch`: the int3 protocol (`arch::patch`) watched from every CPU between its
//! steps. A tracepoint site ([`MIDPATCH`]'s, in [`fire`]) and a function entry
//! ([`callee`]'s) are each patched both ways by the patcher itself, with a `sync`
//! that, after the real barrier, makes every CPU run both once in thread context and
//! once in an NMI it sends itself, and counts the `int3`s they met. Which instruction
//! each CPU ran at each step shows in the trace of an instance that records the event
//! and traces the function: before the patch the old one; once the `int3` is in, the
//! new one, by the breakpoint handler's emulation; after, the new one. A test aid:
//! the end-to-end test reads that trace.

use crate::arch::{idt, patch, percpu};
use crate::events::MIDPATCH;
use crate::memory::text::{self, ENTRY_NOP};
use crate::{barrier, clock, keys, smp};
use alloc::vec::Vec;
use core::cell::{Cell, RefCell};
use core::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use trace::event::key::KeySite;

/// The steps each CPU runs the sites at: before the patch, then after each of the
/// protocol's three `sync`s (`int3` written; the other bytes written; the first byte
/// written).
pub const STEPS: usize = 4;

/// How long the CPUs get to run the sites at one step.
const TIMEOUT_NS: u64 = 10_000_000_000;

/// One patch of the four [`run`] makes, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Patch {
    /// The tracepoint site, its jump back to the NOP.
    Disarm,
    /// The tracepoint site, the NOP into its jump.
    Arm,
    /// The function entry, its call back to the NOP.
    Untrace,
    /// The function entry, the NOP into its call.
    Retrace,
}

impl Patch {
    /// The four, in the order [`run`] makes them; each one's index is the event's
    /// `patch` field.
    pub const ALL: [Patch; 4] = [Patch::Disarm, Patch::Arm, Patch::Untrace, Patch::Retrace];

    /// What it patches, for the command's output.
    pub fn describe(self) -> &'static str {
        match self {
            Patch::Disarm => "selftest:midpatch's site, jmp -> nop",
            Patch::Arm => "selftest:midpatch's site, nop -> jmp",
            Patch::Untrace => "callee's entry, call -> nop",
            Patch::Retrace => "callee's entry, nop -> call",
        }
    }
}

/// What one patch saw: the `int3`s met at each step (during the patch, or, at step
/// 0, before it), and how many of the calls of [`callee`] returned a wrong value.
#[derive(Clone, Copy, Debug)]
pub struct Seen {
    /// The patch.
    pub patch: Patch,
    /// `int3`s met by every CPU at each step.
    pub traps: [u64; STEPS],
    /// Calls of [`callee`] that returned a wrong value (an emulated call that went
    /// back to the wrong place).
    pub wrong: usize,
}

/// Set while a run's CPUs run the sites; a run whose CPUs did not all finish leaves
/// it set (their late counts would corrupt the next run's).
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// The patch the CPUs run the sites for (its index in [`Patch::ALL`]).
static PATCH: AtomicU8 = AtomicU8::new(0);
/// The step the CPUs run the sites at.
static STEP: AtomicU8 = AtomicU8::new(0);
/// CPUs whose NMI did not come at this step.
static NO_NMI: AtomicUsize = AtomicUsize::new(0);
/// Calls of [`callee`] that returned a wrong value in this run.
static WRONG: AtomicUsize = AtomicUsize::new(0);
/// The CPUs (a bit per index) whose next NMI runs the sites.
static IN_NMI: AtomicU64 = AtomicU64::new(0);

/// Adds the NMI hook that runs the sites where [`IN_NMI`] asks.
pub fn init() -> Result<(), &'static str> {
    idt::NMI.add(on_nmi)
}

fn on_nmi() {
    let bit = 1 << percpu::index();
    if IN_NMI.load(Ordering::Relaxed) & bit != 0 {
        fire(PATCH.load(Ordering::Relaxed), STEP.load(Ordering::Relaxed));
        IN_NMI.fetch_and(!bit, Ordering::Relaxed);
    }
}

/// The traced function: its entry is patched under the CPUs that call it.
#[inline(never)]
pub fn callee(x: u64) -> u64 {
    core::hint::black_box(x).wrapping_mul(3).wrapping_add(1)
}

/// Records [`MIDPATCH`] (its site is the one patched) and calls [`callee`], checking
/// what it returns.
#[inline(never)]
fn fire(patch: u8, step: u8) {
    trace::emit!(MIDPATCH, patch, step);
    let x = u64::from(step);
    if callee(x) != x * 3 + 1 {
        WRONG.fetch_add(1, Ordering::Relaxed);
    }
}

/// One CPU's part of a step: the sites in thread context, then in an NMI this CPU
/// sends itself.
fn fire_here() {
    fire(PATCH.load(Ordering::Relaxed), STEP.load(Ordering::Relaxed));
    let cpu = percpu::index();
    IN_NMI.fetch_or(1 << cpu, Ordering::Relaxed);
    let give_up = clock::now_ns() + TIMEOUT_NS;
    let mut sent = smp::nmi(cpu).is_ok();
    // The NMI interrupts this CPU: once it cleared the bit, it has returned.
    while sent && IN_NMI.load(Ordering::Relaxed) & 1 << cpu != 0 {
        sent = clock::now_ns() < give_up;
        core::hint::spin_loop();
    }
    if !sent {
        NO_NMI.fetch_add(1, Ordering::Relaxed);
    }
}

/// Every CPU online runs the sites for `patch`'s `step`; returns the `int3`s they met.
fn everywhere(patch: u8, step: u8) -> Result<u64, &'static str> {
    let before = traps();
    PATCH.store(patch, Ordering::Relaxed);
    STEP.store(step, Ordering::Relaxed);
    // The work's posting (a lock the CPU takes it under) orders the stores above
    // before its run.
    smp::run_everywhere(fire_here, TIMEOUT_NS)?;
    if NO_NMI.swap(0, Ordering::Relaxed) > 0 {
        return Err("a CPU's NMI did not come within 10 s");
    }
    Ok(traps() - before)
}

/// Every `int3` met at a patch site so far.
fn traps() -> u64 {
    let (during, after) = patch::traps();
    during + after
}

/// Makes the four patches of [`Patch::ALL`], each with every CPU running the sites
/// before it and after each of its `sync`s, and returns what each saw. The sites
/// must start as an instance's tracing leaves them, [`MIDPATCH`] enabled and
/// [`callee`] traced, and end so: once a step fails, the CPUs no longer run the
/// sites, but the patches are all made. Thread context, interrupts on; nothing else
/// may patch these sites meanwhile (the shell runs one command at a time).
pub fn run() -> Result<Vec<Seen>, &'static str> {
    if !crate::arch::irq::may_wait() {
        return Err("needs thread context with interrupts on");
    }
    let sites = keys::sites_of(MIDPATCH.descriptor());
    let armed = |s: &&KeySite| text::site_bytes(s.site) == s.jump();
    if sites.is_empty() || !sites.iter().all(armed) {
        return Err("enable selftest:midpatch in an instance first");
    }
    let entry = (callee as fn(u64) -> u64) as usize;
    if text::site_bytes(entry) == Some(ENTRY_NOP) {
        return Err("trace kernel::selftest::midpatch::callee in an instance first");
    }
    if ACTIVE.swap(true, Ordering::Acquire) {
        return Err("a previous run's CPUs did not finish");
    }
    WRONG.store(0, Ordering::Relaxed);
    let mut seen = Vec::new();
    let failed = Cell::new(None);
    for (index, patch) in Patch::ALL.into_iter().enumerate() {
        let index = index as u8;
        let steps = RefCell::new(Vec::new());
        let step = || {
            let mut steps = steps.borrow_mut();
            let taken = match failed.get() {
                None => everywhere(index, steps.len() as u8),
                Some(why) => Err(why),
            };
            failed.set(failed.get().or(taken.err()));
            steps.push(taken.unwrap_or_default());
        };
        step();
        let sync = || {
            barrier::all_cpus();
            step();
        };
        let patched = match patch {
            Patch::Disarm | Patch::Arm => text::patch_keys(&sites, patch == Patch::Arm, sync),
            Patch::Untrace | Patch::Retrace => {
                text::patch_entries(&[(entry, patch == Patch::Retrace)], sync)
            }
        };
        // A refused patch (the sites were checked above) changed nothing, and stops
        // the run; the run stays active only if a CPU may still run the sites.
        if let Err(why) = patched {
            if failed.get().is_none() {
                ACTIVE.store(false, Ordering::Release);
            }
            return Err(why);
        }
        let mut traps = [0; STEPS];
        traps.iter_mut().zip(steps.into_inner()).for_each(|(slot, taken)| *slot = taken);
        seen.push(Seen { patch, traps, wrong: WRONG.swap(0, Ordering::Relaxed) });
    }
    match failed.get() {
        // A CPU that did not finish may still run the sites: the run stays active.
        Some(why) => Err(why),
        None => {
            ACTIVE.store(false, Ordering::Release);
            Ok(seen)
        }
    }
}
