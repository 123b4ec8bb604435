//! The benchmarks' platform: CPU index from a thread-local, clock = raw TSC (as a
//! kernel's would be, without the cost of `std::time`).

use core::arch::x86_64::_rdtsc;
use std::cell::Cell;
use trace::{CpuPromise, Platform};

thread_local! {
    static CPU: Cell<usize> = const { Cell::new(0) };
}

/// CPU index from a thread-local, clock = raw TSC.
#[derive(Clone, Copy)]
pub struct BenchPlatform;

impl BenchPlatform {
    /// Makes the calling thread "CPU" `cpu`.
    #[allow(dead_code, reason = "not every benchmark has several writers")]
    pub fn set_cpu(cpu: usize) {
        CPU.with(|c| c.set(cpu));
    }
}

impl Platform for BenchPlatform {
    // The kernel's section, plain loads and stores, is what the figures measure.
    // SAFETY: every benchmark thread that writes takes an index of its own
    // (`set_cpu`), and the benchmarks run their control operations on a thread while
    // no other thread is in a tracer's section (before or after its writers run), so
    // a compiler fence on the writer's side pairs with the fence on the control side.
    const PROMISE: Option<CpuPromise<Self>> = Some(unsafe { CpuPromise::new() });

    #[inline(always)]
    fn cpu(&self) -> usize {
        CPU.with(|c| c.get())
    }
    #[inline(always)]
    fn now(&self) -> u64 {
        tsc()
    }

    fn may_wait(&self) -> bool {
        true
    }
    /// As a kernel's: a compiler fence, the heavy side doing the work. No control
    /// operation runs while another thread is in a section (see `PROMISE`), so a
    /// fence on the heavy side is enough here.
    #[inline(always)]
    fn light_barrier(&self) {
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
    }
}

/// [`BenchPlatform`] without its promise: the section every event enters is then
/// compare-and-swaps and a full fence (what a kernel that makes none pays).
#[derive(Clone, Copy)]
#[allow(dead_code, reason = "not every benchmark measures the section without the promise")]
pub struct Unpromised;

impl Platform for Unpromised {
    #[inline(always)]
    fn cpu(&self) -> usize {
        BenchPlatform.cpu()
    }
    #[inline(always)]
    fn now(&self) -> u64 {
        tsc()
    }
    fn may_wait(&self) -> bool {
        true
    }
}

/// Reads the TSC.
#[inline(always)]
pub fn tsc() -> u64 {
    // SAFETY: `rdtsc` has no preconditions on x86_64.
    unsafe { _rdtsc() }
}
