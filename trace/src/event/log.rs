//! A `log` crate bridge: existing `log::info!` (and friends) calls become
//! `log:message` events of the tracer, recorded where that event is enabled. The
//! message is formatted when logged (a `log::Record` carries only borrowed
//! arguments), cut to fit one record.

use crate::event::{DescriptorKind, EventDescriptor, MAX_EVENT_PAYLOAD};
use crate::field::{Encoder, Field, FieldKind, Sink};
use core::fmt::{self, Write};

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

/// The bridge: install it with `log::set_logger(&trace::log::LOGGER)`.
pub struct Logger;

/// The one logger.
pub static LOGGER: Logger = Logger;

/// Formats into a fixed buffer, dropping what does not fit.
struct Truncating<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl Write for Truncating<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.buf.len() - self.len;
        let mut end = s.len().min(room);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.buf[self.len..self.len + end].copy_from_slice(&s.as_bytes()[..end]);
        self.len += end;
        Ok(())
    }
}

impl log::Log for Logger {
    fn enabled(&self, _metadata: &log::Metadata<'_>) -> bool {
        LOG_MESSAGE.enabled_mask() != 0
    }

    fn log(&self, record: &log::Record<'_>) {
        if LOG_MESSAGE.enabled_mask() == 0 {
            return;
        }
        let mut text = [0u8; MAX_EVENT_PAYLOAD];
        let mut message = Truncating { buf: &mut text, len: 0 };
        let _ = write!(message, "{}", record.args());
        let len = message.len;
        let message = core::str::from_utf8(&text[..len]).unwrap_or("<not UTF-8>");
        let mut buf = [0u8; MAX_EVENT_PAYLOAD];
        let mut encoder = Encoder::new(&mut buf);
        encoder.put_str(record.level().as_str());
        encoder.put_str(record.target());
        encoder.put_str(message);
        crate::event::dispatch::record(&LOG_MESSAGE, encoder.bytes().len(), &encoder.bytes());
    }

    fn flush(&self) {}
}
