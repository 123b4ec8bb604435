//! The `ftrace` system's marker events, which `trace_marker` and
//! `trace_marker_raw` write: descriptors of the event layer, since the section
//! anchor of [`linked_events!`](crate::linked_events) is one of them.

use crate::event::{DescriptorKind, EventDescriptor};
use crate::field::{Field, FieldKind};

/// The `ftrace:print` event that `trace_marker` writes.
pub(crate) static MARKER: EventDescriptor = EventDescriptor::new(
    "ftrace",
    "print",
    "{buf}",
    &[Field { name: "buf", kind: FieldKind::Str }],
    DescriptorKind::Event,
);

/// The `ftrace:raw_data` event that `trace_marker_raw` writes: the data's 4-byte id,
/// and its bytes as hex text (as Linux prints raw markers).
pub(crate) static RAW_MARKER: EventDescriptor = EventDescriptor::new(
    "ftrace",
    "raw_data",
    "# {id:x} buf:{buf}",
    &[Field { name: "id", kind: FieldKind::U32 }, Field { name: "buf", kind: FieldKind::Str }],
    DescriptorKind::Event,
);
