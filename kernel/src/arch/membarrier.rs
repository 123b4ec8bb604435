//! A memory barrier on every CPU, for the asymmetric fence pairing of the tracer's
//! per-CPU section (Linux's `membarrier(2)` pattern): the hot side orders its
//! accesses with a compiler fence only ([`light`]); the rare side makes every other
//! CPU execute a full fence at an instruction boundary, with an IPI that each CPU
//! acknowledges ([`start`], then [`Barrier::pending`] until `None`).
//!
//! Why this pairs: an interrupt is taken between two instructions, so the interrupted
//! code's accesses are split into those before the handler and those after it. Each
//! CPU acknowledges barrier `n` only after it has seen barrier `n` started (so every
//! store the caller made before starting it) and executed `mfence` (so every store of
//! the interrupted code before the handler is visible before the acknowledgement).
//! `iret` serialises too. A caller that has every acknowledgement thus sees all the
//! stores the other CPUs made before their handler, and the other CPUs' loads after
//! it see the caller's stores.

use super::apic::{self, Destination, Ipi};
use super::irq::HandlerGuard;
use super::{MAX_CPUS, percpu};
use core::marker::PhantomData;
use core::sync::atomic::{AtomicU64, Ordering, compiler_fence};
use x86_64::structures::idt::InterruptStackFrame;

/// Vector of the barrier IPI (with the other IPIs, in the top priority class).
pub const VECTOR: u8 = 0xf2;

/// How many barriers were started; barrier `n` is the `n`-th.
static STARTED: AtomicU64 = AtomicU64::new(0);

/// One CPU's acknowledgement, alone on its cache line.
#[repr(align(64))]
struct Acknowledged(AtomicU64);

/// Per CPU: every barrier up to this number saw this CPU execute a full fence after
/// it started. Only the CPU itself raises it.
static ACKNOWLEDGED: [Acknowledged; MAX_CPUS] =
    [const { Acknowledged(AtomicU64::new(0)) }; MAX_CPUS];

/// The hot side's half: orders the caller's accesses in program order against a
/// CPU that runs a barrier, at no cost but to the compiler's freedom. Callable from
/// any context.
#[inline(always)]
pub fn light() {
    compiler_fence(Ordering::SeqCst);
}

/// A full fence on this CPU.
#[inline(always)]
fn mfence() {
    // SAFETY: `mfence` only orders this CPU's memory accesses; it touches no memory,
    // registers or flags, and exists on every x86_64 CPU.
    unsafe { core::arch::asm!("mfence", options(nostack, preserves_flags)) };
}

/// Acknowledges, for this CPU, every barrier started so far: in a handler (the
/// interrupted code is split there), or in a caller waiting for a barrier (which is
/// not in the middle of a light-ordered sequence of its own).
fn acknowledge() {
    // Acquire: pairs with the barrier's start (a SeqCst read-modify-write): the
    // caller's stores before it are visible to everything this CPU loads after this.
    let started = STARTED.load(Ordering::Acquire);
    mfence();
    // Release (after the fence): every store this CPU made before is visible to a
    // caller that sees the acknowledgement. `fetch_max`: a handler that interrupts a
    // waiting CPU between its load and here may have acknowledged a later barrier.
    ACKNOWLEDGED[percpu::index()].0.fetch_max(started, Ordering::Release);
}

/// The barrier IPI's handler.
pub(super) extern "x86-interrupt" fn interrupt(_frame: InterruptStackFrame) {
    let _handler = HandlerGuard::enter();
    acknowledge();
    apic::eoi();
}

/// A barrier in progress on CPUs `0..cpus` (see [`start`]). `!Send`: it is waited
/// for on the CPU that started it.
pub struct Barrier {
    number: u64,
    cpus: usize,
    _not_send: PhantomData<*const ()>,
}

/// Starts a barrier on the CPUs `0..cpus` (those online; the caller is one of them):
/// sends the IPI to every other CPU. The caller then polls [`Barrier::pending`]
/// until it returns `None`.
pub fn start(cpus: usize) -> Barrier {
    // SeqCst read-modify-write (a locked instruction, a full fence): the caller's
    // earlier stores (what it publishes) are visible to any CPU that sees this number.
    let number = STARTED.fetch_add(1, Ordering::SeqCst) + 1;
    if cpus > 1 {
        apic::send_ipi(Destination::AllButSelf, Ipi::Fixed(VECTOR));
    }
    Barrier { number, cpus: cpus.min(MAX_CPUS), _not_send: PhantomData }
}

impl Barrier {
    /// The first CPU that has not acknowledged the barrier yet, or `None` once all
    /// have. Acknowledges pending barriers for this CPU first, so two CPUs waiting
    /// for each other's barrier both finish, even with interrupts off.
    pub fn pending(&self) -> Option<usize> {
        acknowledge();
        // Acquire: pairs with the Release of each acknowledgement.
        (0..self.cpus).find(|&cpu| ACKNOWLEDGED[cpu].0.load(Ordering::Acquire) < self.number)
    }
}
