//! The type of the kernel's `trace::Platform`, and the promise it makes the tracer
//! about its CPU index and barriers ([`PROMISE`]). The trait's methods are the
//! tracing layer's (`crate::tracing`); the promise holds while they keep `cpu` as
//! [`percpu::index`], `light_barrier` as [`membarrier::light`] and `heavy_barrier`
//! as `barrier::all_cpus` (built on [`membarrier::start`]).

#[cfg(doc)]
use super::{membarrier, percpu};

/// What `trace` needs from the kernel: the CPU index from per-CPU data (callable from
/// any context), the TSC clock in nanoseconds, the writer's context (what the CPU
/// runs, kept per CPU by its handlers: `irq::Running`; and the interrupt flag), and
/// the asymmetric memory barrier: a compiler fence for writers, an IPI to every other
/// CPU for control operations. The `trace::Platform` impl is `crate::tracing`'s.
#[derive(Clone, Copy, Debug, Default)]
pub struct KernelPlatform;

/// The tracer's promise for [`KernelPlatform`] (`trace::Platform::PROMISE`): its
/// per-CPU section is then plain loads and stores, ordered by [`membarrier::light`]
/// against the tracer's heavy barrier.
// SAFETY: what `trace::CpuPromise::new` asks for holds for `KernelPlatform`, whose
// methods are those this module names.
// - The CPU index (`percpu::index`) is read through GS, which each CPU points at its
//   own `PerCpu` once, first thing, with the index `smp` gave it alone (a CPU that
//   arrives after the boot CPU gave up on it stops before that). Code never
//   migrates: there is no scheduler, and interrupts and NMIs run on the interrupted
//   CPU, nested inside what they interrupt.
// - The barriers pair: `light` is a compiler fence, so the writer's accesses stay in
//   program order, and the heavy barrier returns once every other online CPU has
//   executed `mfence` in the barrier IPI's handler, at an instruction boundary of
//   whatever it was running (the argument at the top of `membarrier`). A CPU that
//   is not online yet writes only while the boot CPU waits for it to come online
//   (`smp::start_application_processors`, which `kernel_main` calls once, before
//   the shell, the persistent trace and the watchdog start: nothing runs a control
//   operation, or a barrier that could miss a CPU coming online, meanwhile).
pub const PROMISE: trace::CpuPromise<KernelPlatform> = unsafe { trace::CpuPromise::new() };
