//! What the kernel supplies: the current CPU, a clock and the caller's context.
//!
//! The writer is lock-free and nests like a stack, so it needs neither interrupt
//! save/restore nor a lock. It does need the caller to stay on one CPU for the
//! duration of a write (preemption or migration disabled, as in any kernel's per-CPU
//! code); interrupts may stay enabled.

use crate::context::Context;
use crate::event::EventDescriptor;
use crate::symtab::SymbolTable;
use core::marker::PhantomData;

/// The kernel's side of the tracer.
///
/// Besides the CPU index and the clock, the platform supplies the two halves of an
/// asymmetric memory barrier that lets control operations wait for writers without
/// writers paying for a fence (see DESIGN.md, "The per-CPU section"): writers call
/// [`Platform::light_barrier`] after entering their section, control operations call
/// [`Platform::heavy_barrier`] after publishing a change, when the platform gives
/// [`Platform::PROMISE`]. The defaults are a full fence on both sides; a kernel that
/// can interrupt every CPU (an IPI) makes the light side a compiler fence.
///
/// A platform is a small value the tracer copies into each buffer (`Clone`) and
/// shares between CPUs (`Send + Sync`), typically a unit struct. A kernel must give
/// [`Platform::cpu`], [`Platform::now`] and [`Platform::may_wait`]; the rest have
/// defaults, though without [`Platform::context`] every record shows a thread with
/// interrupts on, and without [`Platform::PROMISE`] every event pays three compare-and-swaps
/// and a full fence, and an interrupt's write inside another is dropped:
///
/// ```
/// #[derive(Clone, Copy)]
/// struct MyPlatform;
///
/// impl trace::Platform for MyPlatform {
///     // SAFETY: one CPU, whose interrupts nest inside what they interrupt, and the
///     // default barriers (full fences on both sides).
///     const PROMISE: Option<trace::CpuPromise<Self>> = Some(unsafe { trace::CpuPromise::new() });
///
///     fn cpu(&self) -> usize {
///         0 // a single-CPU kernel; an SMP one reads its per-CPU data (GS base)
///     }
///     fn now(&self) -> u64 {
///         // a TSC read scaled to nanoseconds, in a real kernel
///         # 0
///     }
///     fn may_wait(&self) -> bool {
///         true // in a real kernel: thread context with interrupts on
///     }
/// }
/// ```
///
/// **What the tracer relies on.** An instance's old buffers are freed once every CPU
/// has left the section it entered before the change (see DESIGN.md, "The per-CPU
/// section"). How a writer counts itself into its CPU's section depends on
/// [`Platform::PROMISE`]:
/// - without it (the default), with atomic read-modify-writes and full fences,
///   memory-safe whatever [`Platform::cpu`] returns. Callers that share an index
///   still share a ring, which then takes one writer at a time: a write that finds
///   another inside (a sharer's, or one it interrupted) is dropped and counted as
///   nested too deep, and nothing wedges. A control operation may also refuse
///   as if it ran inside a writer, and a grace period waits for a moment when none of
///   the sharers is inside. The tracer reads no freed memory;
/// - with it, with plain loads and stores and the platform's own barriers: the
///   platform promises, in `unsafe` code ([`CpuPromise::new`]), that two callers
///   running at once never get the same index, and that its barriers pair. A ring's
///   writers then nest like a stack (an interrupt's write inside another is kept).
///
/// Either way, a caller stays on its CPU for each call into the tracer (preemption
/// or migration off, as for any per-CPU data; interrupts may stay on), and the index
/// is dense: every CPU below the count the tracer was built for (events from a
/// higher one are refused and counted).
pub trait Platform: Clone + Send + Sync + 'static {
    /// Index of the CPU running the caller, below the buffer's CPU count, and (for
    /// callers to have rings of their own; required with [`Platform::PROMISE`]) no
    /// other running caller's. Callable from any context (thread, IRQ, NMI); must not
    /// change during one call into the tracer.
    fn cpu(&self) -> usize;

    /// Nanoseconds from any fixed origin, monotonic (never decreasing) on each CPU and
    /// below 2^60. Callable from any context; should be cheap (a TSC read and a scale).
    fn now(&self) -> u64;

    /// The CPU's cycle counter, unscaled (x86's TSC), for the `x86-tsc` clock
    /// ([`crate::Clock::X86Tsc`]): monotonic on each CPU and below 2^60. Callable from
    /// any context. The default is [`Platform::now`].
    fn cycles(&self) -> u64 {
        self.now()
    }

    /// The kernel's timer ticks since boot, for the `uptime` clock
    /// ([`crate::Clock::Uptime`], ftrace's jiffies): monotonic across CPUs. Callable
    /// from any context. The default counts 10 ms periods of [`Platform::now`]
    /// (100 Hz).
    fn jiffies(&self) -> u64 {
        self.now() / 10_000_000
    }

    /// The promise that makes the per-CPU section plain loads and stores, given by
    /// `unsafe` code (see [`CpuPromise::new`] for what it promises). The default,
    /// `None`, promises nothing: the section then costs two compare-and-swaps and a
    /// full fence per event, each ring takes one writer at a time (a compare-and-swap
    /// more; a write that finds another inside, an interrupt's among them, is dropped
    /// and counted), and the two barriers below are not called.
    const PROMISE: Option<CpuPromise<Self>> = None;

    /// The writer's half of the asymmetric barrier: orders the writer's store of its
    /// section word before its loads of the tracer's state, as seen by a control
    /// operation that ran [`Platform::heavy_barrier`]. Callable from any context.
    /// Called only if the platform gives [`Platform::PROMISE`].
    #[inline(always)]
    fn light_barrier(&self) {
        core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
    }

    /// The control side's half: returns once every CPU has executed a full memory
    /// barrier after the call began (for example: an IPI to every other CPU, each
    /// handler acknowledging, the caller waiting for all acknowledgements). Called
    /// only where [`Platform::may_wait`] is true, and only if the platform gives
    /// [`Platform::PROMISE`].
    fn heavy_barrier(&self) {
        core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
    }

    /// Fills `frames` with the return addresses of the code that hit the event,
    /// innermost first: the call chain from the tracepoint's caller outward, the
    /// tracer's own frames left out (as ftrace's `stacktrace` trigger starts at the
    /// traced function). Returns how many it wrote; a `stacktrace` trigger records
    /// them. Callable from any context; must not fault on a broken stack. The default
    /// has no unwinder and gives none.
    fn stack_trace(&self, frames: &mut [u64]) -> usize {
        let _ = frames;
        0
    }

    /// What the caller is running (thread, interrupt, NMI) and whether interrupts are
    /// off, kept in each record it writes. Callable from any context; should be a
    /// few instructions. The default says thread context with interrupts on.
    #[inline(always)]
    fn context(&self) -> Context {
        Context::TASK
    }

    /// Whether the caller may wait for other CPUs: thread context with interrupts
    /// enabled. Control operations and the getters that take a lock refuse otherwise
    /// (`Error::WouldDeadlock`) rather than wait with interrupts off. No default: a
    /// kernel whose interrupt handlers call the tracer must say which context they
    /// run in (a host's threads may always wait).
    fn may_wait(&self) -> bool;

    /// Whether tracepoint sites are NOPs until [`Platform::set_key`] patches them
    /// (trace's `static-keys` feature, in a kernel that patches its text). The
    /// default: no, every site tests its event's mask.
    fn has_keys(&self) -> bool {
        false
    }

    /// Makes every keyed site of `event` a jump to its recording path (`armed`) or
    /// the NOP again ([`crate::event::key`]), and returns once every CPU executes the
    /// new bytes. Called only where [`Platform::may_wait`] is true, one call at a
    /// time, and only if [`Platform::has_keys`].
    fn set_key(&self, event: &'static EventDescriptor, armed: bool) {
        let _ = (event, armed);
    }

    /// Prints the trace to the platform's console from the caller's context, as a
    /// panic would (ftrace's `dump` and `cpudump` function commands): every CPU's
    /// records, or only CPU `cpu`'s. Returns whether it did. Callable from any
    /// context; must not wait for other CPUs. The default has no console and
    /// refuses.
    fn dump(&self, cpu: Option<usize>) -> bool {
        let _ = cpu;
        false
    }

    /// Makes the entry of each listed function (its index among those registered
    /// with [`crate::Tracer::set_functions`]) a call to the platform's entry hook
    /// (`true`) or its NOP again, and returns once every CPU executes the new bytes.
    /// A refusal patches nothing. Called only where [`Platform::may_wait`] is true,
    /// one call at a time. The default has no function entries and refuses.
    fn patch_functions(&self, changes: &[(usize, bool)]) -> Result<(), &'static str> {
        let _ = changes;
        Err("this platform does not patch function entries")
    }

    /// Tells the platform whether an instance's tracer is `irqsoff`: while it is
    /// not, its hooks need not call [`crate::Tracer::irqs_off`] (which would return
    /// at once). Called by control operations; must not wait. The default ignores
    /// it.
    fn time_irqs_off(&self, on: bool) {
        let _ = on;
    }

    /// The kernel's function symbols, which filters' `.function` names are looked
    /// up in (when a filter is set, in thread context). The default has none.
    fn symbols(&self) -> Option<&SymbolTable<'_>> {
        None
    }
}

/// Platform `P`'s promise about its CPU index and its barriers, which lets writers
/// count themselves into their CPU's section with plain loads and stores
/// ([`Platform::PROMISE`]). Only `unsafe` code makes one, and it is of one platform
/// type (another platform cannot take it over): the tracer's memory safety rests on
/// it.
pub struct CpuPromise<P>(PhantomData<fn() -> P>);

impl<P> Clone for CpuPromise<P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P> Copy for CpuPromise<P> {}

impl<P> core::fmt::Debug for CpuPromise<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("CpuPromise")
    }
}

impl<P: Platform> CpuPromise<P> {
    /// The promise, for `P`'s [`Platform::PROMISE`].
    ///
    /// # Safety
    ///
    /// Platform `P` guarantees, for every tracer built on it:
    /// - two callers running at once never get the same [`Platform::cpu`], and a
    ///   caller's index does not change during a call into the tracer (interrupts
    ///   and NMIs on a CPU nest inside its caller, as a stack);
    /// - [`Platform::light_barrier`] on a writer and [`Platform::heavy_barrier`] on a
    ///   control operation order as a full fence on both sides would: once
    ///   `heavy_barrier` returns, every CPU that may write has either had its stores
    ///   before its last `light_barrier` made visible to the caller, or will see the
    ///   caller's stores before it in its loads after its next one.
    ///
    /// If either fails, a grace period can end while a writer still reads the
    /// buffers it frees.
    #[allow(unsafe_code, reason = "declares the contract the platform takes on")]
    pub const unsafe fn new() -> Self {
        CpuPromise(PhantomData)
    }

    /// The promise the crate's own test platforms make: each thread that writes to a
    /// tracer takes an index of its own, and the barriers are full fences.
    #[cfg(test)]
    pub(crate) const fn for_tests() -> Self {
        CpuPromise(PhantomData)
    }
}

#[cfg(not(any(target_os = "none", target_os = "uefi")))]
pub use host::HostPlatform;

#[cfg(not(any(target_os = "none", target_os = "uefi")))]
mod host {
    extern crate std;
    use super::Platform;
    use std::cell::Cell;
    use std::time::Instant;

    std::thread_local! {
        static CPU: Cell<usize> = const { Cell::new(0) };
        static CLOCK: Cell<Option<u64>> = const { Cell::new(None) };
    }

    /// A host platform for tests and tools: each thread says which "CPU" it is with
    /// [`HostPlatform::set_cpu`] (every thread starts as CPU 0: threads that write to
    /// one tracer must each take an index of their own for the rings to stay whole,
    /// see [`Platform`]). It makes no [`Platform::PROMISE`], so two threads on one
    /// index are memory-safe, and their ring takes one writer at a time (a write that
    /// finds another inside is dropped and counted). The clock is
    /// `std::time::Instant`, or a per-thread manual clock that advances by one on each
    /// read once [`HostPlatform::set_clock`] was called (deterministic timestamps for
    /// tests). Every thread may wait.
    #[derive(Clone, Copy, Debug, Default)]
    pub struct HostPlatform;

    impl HostPlatform {
        /// Pins the calling thread to CPU index `cpu` (for this platform's purposes).
        pub fn set_cpu(cpu: usize) {
            CPU.with(|c| c.set(cpu));
        }

        /// Switches the calling thread to the manual clock, starting at `ns`; each
        /// reading moves it on by one (wrapping).
        pub fn set_clock(ns: u64) {
            CLOCK.with(|c| c.set(Some(ns)));
        }

        /// The manual clock's next value, if the thread uses it.
        pub fn clock() -> Option<u64> {
            CLOCK.with(|c| c.get())
        }
    }

    impl Platform for HostPlatform {
        fn cpu(&self) -> usize {
            CPU.with(|c| c.get())
        }

        fn now(&self) -> u64 {
            if let Some(t) = CLOCK.with(|c| c.get()) {
                CLOCK.with(|c| c.set(Some(t.wrapping_add(1))));
                return t;
            }
            static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
            START.get_or_init(Instant::now).elapsed().as_nanos() as u64
        }

        fn may_wait(&self) -> bool {
            true
        }
    }
}
