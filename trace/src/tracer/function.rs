//! The function tracer's events. A platform that patches function entries (the
//! kernel's `function` and `function_graph` tracers) records them with
//! [`Tracer::record_function`], into the top-level instance: addresses are the
//! kernel image's (ELF) addresses, which its symbol table names.

use super::{TOP_SLOT, Tracer};
use crate::event::dispatch::Body;
use crate::event::{DescriptorKind, EventDescriptor};
use crate::field::{Field, FieldKind};
use crate::platform::Platform;

/// `ftrace:function`: a traced function's entry, and where it was called from.
pub static FUNCTION: EventDescriptor = EventDescriptor::new(
    "ftrace",
    "function",
    "{ip:#x} <-{parent_ip:#x}",
    &[
        Field { name: "ip", kind: FieldKind::U64 },
        Field { name: "parent_ip", kind: FieldKind::U64 },
    ],
    DescriptorKind::Event,
);

/// `ftrace:funcgraph_entry`: a traced function's entry, at a call depth.
pub static FUNCGRAPH_ENTRY: EventDescriptor = EventDescriptor::new(
    "ftrace",
    "funcgraph_entry",
    "func={func:#x} depth={depth}",
    &[Field { name: "func", kind: FieldKind::U64 }, Field { name: "depth", kind: FieldKind::U64 }],
    DescriptorKind::Event,
);

/// `ftrace:funcgraph_exit`: a traced function's return, with the time it took in
/// nanoseconds.
pub static FUNCGRAPH_EXIT: EventDescriptor = EventDescriptor::new(
    "ftrace",
    "funcgraph_exit",
    "func={func:#x} depth={depth} duration={duration}",
    &[
        Field { name: "func", kind: FieldKind::U64 },
        Field { name: "depth", kind: FieldKind::U64 },
        Field { name: "duration", kind: FieldKind::U64 },
    ],
    DescriptorKind::Event,
);

/// Most values a function tracer's event holds.
const MAX_VALUES: usize = 3;

impl<P: Platform + Clone + Send + Sync> Tracer<P> {
    /// Records one of this module's events with its field values (`values[i]` for
    /// field `i`) into the top-level instance, whatever the event's enable state:
    /// the platform decides which calls it records. From any context; a descriptor
    /// of another event, or values that do not match its fields, record nothing.
    pub fn record_function(&self, descriptor: &'static EventDescriptor, values: &[u64]) {
        let ours = [&FUNCTION, &FUNCGRAPH_ENTRY, &FUNCGRAPH_EXIT];
        if !ours.iter().any(|d| core::ptr::eq(*d, descriptor))
            || values.len() != descriptor.fields.len()
        {
            return;
        }
        let mut words = [[0u8; 8]; MAX_VALUES];
        for (word, value) in words.iter_mut().zip(values) {
            *word = value.to_le_bytes();
        }
        let words = &words[..values.len()];
        let bytes = words.as_flattened();
        let body = Body { len: bytes.len(), payload: &bytes, words: Some(words) };
        self.record_into(|| 1 << TOP_SLOT, descriptor, body);
    }
}
