//! Interrupt masking with proof: an [`IrqGuard`] exists only while interrupts are off
//! on the current CPU. And interrupt context: every handler holds a [`HandlerGuard`],
//! so code can tell whether it runs inside one ([`may_wait`]). Both tell the hooks
//! set with [`set_irqs_off_hooks`] where interrupts go off and on again.

use super::percpu;
use core::marker::PhantomData;
use core::sync::atomic::{AtomicBool, Ordering::Relaxed};
use spin::Once;
use x86_64::instructions::interrupts;

/// Hooks where interrupts go off (an [`IrqGuard`] made with them on, an interrupt or
/// exception handler entered) and on again, with the address of the code that did
/// it. `off` returns whether to call `on` for this region (it times it). Both run
/// with interrupts off, never from an NMI.
#[derive(Clone, Copy)]
pub struct IrqsOffHooks {
    /// Interrupts went off at the address given.
    pub off: fn(ip: u64) -> bool,
    /// Interrupts go on again at the address given, closing a region `off` timed.
    pub on: fn(ip: u64),
}

static IRQS_OFF_HOOKS: Once<IrqsOffHooks> = Once::new();

/// Whether the `off` hook is called: all an [`IrqGuard`] pays while it is not.
static TIMING: AtomicBool = AtomicBool::new(false);

/// Registers the irqs-off hooks; once per boot (later calls change nothing).
pub fn set_irqs_off_hooks(hooks: IrqsOffHooks) {
    IRQS_OFF_HOOKS.call_once(|| hooks);
}

/// Calls the `off` hook from now on (`true`) or not. A region it timed is still
/// closed with the `on` hook.
pub fn time_irqs_off(on: bool) {
    TIMING.store(on, Relaxed);
}

/// Runs the `off` hook for code at `ip`: whether the region is timed.
#[inline(always)]
fn irqs_went_off(ip: u64) -> bool {
    TIMING.load(Relaxed) && IRQS_OFF_HOOKS.get().is_some_and(|hooks| (hooks.off)(ip))
}

/// Runs the `on` hook for code at `ip`, closing a timed region.
#[inline(always)]
fn irqs_go_on(ip: u64) {
    if let Some(hooks) = IRQS_OFF_HOOKS.get() {
        (hooks.on)(ip);
    }
}

/// The address of the instruction that runs this (inlined into its caller).
#[inline(always)]
fn here() -> u64 {
    let ip: u64;
    // SAFETY: reads the instruction pointer into a register; touches no memory, the
    // stack or the flags.
    unsafe {
        core::arch::asm!("lea {}, [rip]", out(reg) ip, options(nomem, nostack, preserves_flags));
    }
    ip
}

/// Disables interrupts on this CPU for as long as it lives, then restores the state
/// it found (so guards nest). It is `!Send`: the proof is only valid on the CPU that
/// created it.
pub struct IrqGuard {
    was_enabled: bool,
    /// Whether the irqs-off hook times the region this guard opened.
    timed: bool,
    _not_send: PhantomData<*const ()>,
}

impl IrqGuard {
    /// Disables interrupts on this CPU and remembers whether they were enabled.
    /// Inlined always, so that the irqs-off hook is told the caller's address.
    #[inline(always)]
    pub fn new() -> Self {
        let was_enabled = interrupts::are_enabled();
        interrupts::disable();
        let timed = was_enabled && irqs_went_off(here());
        Self { was_enabled, timed, _not_send: PhantomData }
    }
}

impl Default for IrqGuard {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for IrqGuard {
    #[inline(always)]
    fn drop(&mut self) {
        if self.timed {
            irqs_go_on(here());
        }
        if self.was_enabled {
            interrupts::enable();
        }
    }
}

/// Waits for the next interrupt if `idle` says there is nothing to do. The check and
/// the `hlt` happen with interrupts off, and `sti; hlt` re-enables them atomically, so
/// a wake-up that arrives between the check and the halt is never missed.
pub fn wait_for_interrupt_unless(busy: impl FnOnce() -> bool) {
    interrupts::disable();
    if busy() {
        interrupts::enable();
    } else {
        interrupts::enable_and_hlt();
    }
}

/// What one NMI adds to a CPU's handler count (interrupts and exceptions add 1): the
/// count's low 16 bits are the interrupt handlers open, the rest the NMIs.
const NMI_UNIT: u32 = 1 << 16;

/// Marks this CPU as running an interrupt, exception or NMI handler for as long as it
/// lives; every handler takes one first. `!Send`, like [`IrqGuard`].
pub struct HandlerGuard {
    unit: u32,
    /// Whether the irqs-off hook times this handler (it runs with interrupts off).
    timed: bool,
    /// The CPU's `running` code before this handler, restored when it ends.
    was: u8,
    _not_send: PhantomData<*const ()>,
}

impl HandlerGuard {
    /// Counts one more interrupt or exception handler running on this CPU.
    #[inline(always)]
    pub fn enter() -> Self {
        Self::count(1)
    }

    /// Counts one more NMI handler running on this CPU.
    #[inline(always)]
    pub fn enter_nmi() -> Self {
        Self::count(NMI_UNIT)
    }

    #[inline(always)]
    fn count(unit: u32) -> Self {
        let cpu = percpu::current();
        // Plain loads and stores: handlers nest like a stack, so one that interrupts
        // us between a load and its store has restored both words before we
        // resume; only this CPU touches them.
        let depth = cpu.handler_depth.load(Relaxed) + unit;
        cpu.handler_depth.store(depth, Relaxed);
        let was = cpu.running.load(Relaxed);
        cpu.running.store(Running::of(depth, cpu.busy.load(Relaxed)) as u8, Relaxed);
        // NMIs are not timed: they may strike inside the hooks.
        let timed = unit != NMI_UNIT && irqs_went_off(here());
        Self { unit, timed, was, _not_send: PhantomData }
    }
}

impl Drop for HandlerGuard {
    #[inline(always)]
    fn drop(&mut self) {
        if self.timed {
            irqs_go_on(here());
        }
        let cpu = percpu::current();
        cpu.running.store(self.was, Relaxed);
        cpu.handler_depth.store(cpu.handler_depth.load(Relaxed) - self.unit, Relaxed);
    }
}

/// What a CPU runs: its thread (idle or doing work), 1, 2, or 3 or more interrupt
/// or exception handlers deep, or an NMI over its thread or over a handler. Kept per
/// CPU as one code as handlers enter and leave, so that a reader (the tracer, on
/// every event) pays one load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Running {
    /// The thread, idle.
    Idle = 0,
    /// The thread, doing work.
    Thread = 1,
    /// One interrupt or exception handler.
    Irq1 = 2,
    /// Two nested.
    Irq2 = 3,
    /// Three or more nested.
    Irq3 = 4,
    /// An NMI over the thread.
    Nmi = 5,
    /// An NMI over an interrupt or exception handler.
    NmiOverIrq = 6,
}

impl Running {
    /// What runs with `depth` handlers open (NMIs in units of `NMI_UNIT`) over a
    /// thread that is `busy` or not.
    fn of(depth: u32, busy: bool) -> Running {
        match (depth / NMI_UNIT, depth % NMI_UNIT) {
            (0, 0) if busy => Running::Thread,
            (0, 0) => Running::Idle,
            (0, 1) => Running::Irq1,
            (0, 2) => Running::Irq2,
            (0, _) => Running::Irq3,
            (_, 0) => Running::Nmi,
            (_, _) => Running::NmiOverIrq,
        }
    }
}

/// What this CPU runs, as its [`Running`] code (`Running as u8`: the store never
/// holds another value). One load; callable from any context.
#[inline(always)]
pub fn running_code() -> u8 {
    percpu::running()
}

/// Marks this CPU's thread as doing work or idling (thread context, on this CPU).
pub fn set_busy(busy: bool) {
    let cpu = percpu::current();
    cpu.busy.store(busy, Relaxed);
    // A handler that runs between the two stores restores the code it found, which
    // this store then replaces.
    cpu.running.store(Running::of(cpu.handler_depth.load(Relaxed), busy) as u8, Relaxed);
}

/// Whether interrupts are disabled on this CPU.
#[inline(always)]
pub fn irqs_off() -> bool {
    !interrupts::are_enabled()
}

/// Whether this CPU runs an interrupt, exception or NMI handler.
pub fn in_handler() -> bool {
    percpu::current().handler_depth.load(Relaxed) != 0
}

/// Whether the caller may wait for other CPUs: interrupts are enabled (so requests
/// from CPUs waiting in turn for this one are served) and it is not inside a handler.
pub fn may_wait() -> bool {
    interrupts::are_enabled() && !in_handler()
}
