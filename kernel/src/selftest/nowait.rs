//! `nowait`: the tracer's control operations called with interrupts off, where the
//! kernel may not wait for a grace period. Each is refused with the rule it broke,
//! and nothing changes (a test aid for the API's refusals in the real kernel).

use crate::arch::irq::IrqGuard;
use crate::events::TIMER_TICK;
use crate::tracing;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Display;
use trace::InstanceConfig;
use trace::tracer::{FunctionList, FunctionTracer};

/// The name of the instance `nowait` tries to make.
const NAME: &str = "nowait";

/// Runs each control operation on the top level (or, for the first and the stack
/// tracer's, on the tracer)
/// with interrupts off and returns, for each, what it tried and what it gave
/// (`refused: ERROR`, or `done`, which would be a bug).
pub fn run() -> Result<Vec<(&'static str, String)>, &'static str> {
    fn told<E: Display>(result: Result<(), E>) -> String {
        match result {
            Ok(()) => String::from("done"),
            Err(why) => format!("refused: {why}"),
        }
    }
    let tracer = tracing::tracer().ok_or("no tracer")?;
    let top = tracer.top();
    let _irq = IrqGuard::new();
    Ok(Vec::from([
        (
            "create instance nowait",
            told(tracer.get_or_create(NAME, InstanceConfig::default()).map(drop)),
        ),
        ("clear", told(top.clear())),
        ("resize to 8 KB per CPU", told(top.resize(8 << 10))),
        ("allocate the snapshot", told(top.snapshot_alloc())),
        ("set a filter on timer:tick", told(top.set_filter(TIMER_TICK.descriptor(), "tick == 1"))),
        ("read current_tracer", told(top.function_tracer().map(drop))),
        ("set current_tracer to function", told(top.set_function_tracer(FunctionTracer::Function))),
        ("read set_ftrace_filter", told(top.function_list(FunctionList::Filter).map(drop))),
        ("read stack_max_size", told(tracer.stack_max().map(drop))),
        ("set stack_max_size to 0", told(tracer.set_stack_max_size(0))),
    ]))
}
