//! Where tracepoints send their records: the one tracer the kernel installed.

use crate::event::EventDescriptor;
use spin::Once;

/// What records events for tracepoints (implemented by [`crate::Tracer`]).
pub trait Dispatch: Sync {
    /// Records `payload` as an event of `descriptor` in every instance that has it
    /// enabled. Callable from any context; never blocks or allocates.
    fn record(&self, descriptor: &EventDescriptor, payload: &[u8]);
}

static DISPATCH: Once<&'static dyn Dispatch> = Once::new();

/// Makes `tracer` the destination of every tracepoint. Once per boot: a second call
/// fails and changes nothing.
pub fn install(tracer: &'static dyn Dispatch) -> Result<(), &'static str> {
    let mut installed = false;
    DISPATCH.call_once(|| {
        installed = true;
        tracer
    });
    if installed { Ok(()) } else { Err("a tracer is installed already") }
}

/// Sends one record to the installed tracer, if any.
#[inline]
pub(crate) fn record(descriptor: &EventDescriptor, payload: &[u8]) {
    if let Some(tracer) = DISPATCH.get() {
        tracer.record(descriptor, payload);
    }
}
