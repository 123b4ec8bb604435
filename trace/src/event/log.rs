//! A `log` crate bridge: existing `log::info!` (and friends) calls become
//! `log:message` events of the tracer, recorded where that event is enabled. The
//! message is formatted when logged (a `log::Record` carries only borrowed
//! arguments), cut to fit one record.

use crate::event::{DescriptorKind, EventDescriptor, MAX_EVENT_PAYLOAD};
use crate::field::{Encoder, Field, FieldKind, Sink};
use crate::text::StackText;

/// The `log:message` event.
pub static LOG_MESSAGE: EventDescriptor = EventDescriptor::new(
    "log",
    "message",
    "{level} {target}: {message}",
    &[
        Field { name: "level", kind: FieldKind::Str },
        Field { name: "target", kind: FieldKind::Str },
        Field { name: "message", kind: FieldKind::Str },
    ],
    DescriptorKind::Event,
);

/// The bridge: install it with `log::set_logger(&trace::event::log::LOGGER)`.
pub struct Logger;

/// The one logger.
pub static LOGGER: Logger = Logger;

impl log::Log for Logger {
    fn enabled(&self, _metadata: &log::Metadata<'_>) -> bool {
        LOG_MESSAGE.enabled_mask() != 0
    }

    fn log(&self, record: &log::Record<'_>) {
        if LOG_MESSAGE.enabled_mask() == 0 {
            return;
        }
        let message = StackText::<MAX_EVENT_PAYLOAD>::of(*record.args());
        let mut buf = [0u8; MAX_EVENT_PAYLOAD];
        let mut encoder = Encoder::new(&mut buf);
        encoder.put_str(record.level().as_str());
        encoder.put_str(record.target());
        encoder.put_str(message.as_str());
        crate::event::dispatch::record(&LOG_MESSAGE, encoder.bytes().len(), &encoder.bytes());
    }

    fn flush(&self) {}
}
