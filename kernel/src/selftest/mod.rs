//! Self-tests the shell runs: `stress` (the ring under real concurrency), `bench`
//! (tracepoint costs), fault injection (`panic irq`), `nowait` (control operations
//! where the kernel may not wait) and `midpatch` (the patcher's protocol watched
//! between its steps). They add their hooks at start-up; nothing below them knows
//! them.

pub mod bench;
pub mod fault;
pub mod midpatch;
pub mod nowait;
pub mod stress;

/// Adds the self-tests' hooks to the timer, the test IPI and the NMI.
pub fn init() -> Result<(), &'static str> {
    stress::init()?;
    midpatch::init()?;
    fault::init()
}
