//! The kernel's side of the `trace` crate.

use crate::arch::percpu;
use crate::clock;

/// What `trace` needs from the kernel: the CPU index from per-CPU data (callable from
/// any context) and the TSC clock in nanoseconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct KernelPlatform;

impl trace::Platform for KernelPlatform {
    #[inline(always)]
    fn cpu(&self) -> usize {
        percpu::index()
    }

    #[inline(always)]
    fn now(&self) -> u64 {
        clock::now_ns()
    }
}
