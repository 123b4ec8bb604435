//! Static event descriptors and the tracepoint macros.
//!
//! [`event!`](macro@crate::event) declares an event `SYSTEM:NAME` with typed fields and a
//! format string. It emits a static [`Event`] and a pointer to its descriptor in the
//! `trace_events` linker section, so the kernel finds every event of every crate at
//! boot by walking that section: no registration calls. [`emit!`](crate::emit)
//! records one: when no instance has the event enabled it costs one load and a
//! not-taken branch, or with static keys ([`key`]) a 5-byte NOP, and evaluates no
//! argument.
//!
//! Inside: `dispatch` hands each emitted record to the installed tracer, `filter`
//! compiles and evaluates ftrace's event filters on an event's fields, [`format`](mod@format)
//! renders a record with its descriptor's format string, [`format_file`] writes
//! tracefs's `format` files, [`log`] bridges the `log` crate, `marker` holds the
//! `ftrace:print` and `ftrace:raw_data` descriptors the markers write, and
//! [`glob`](fn@glob) matches the names and strings of event selections, filters and
//! function filters.

pub(crate) mod dispatch;
pub(crate) mod filter;
pub mod format;
pub mod format_file;
mod glob;
pub mod inject;
pub mod key;
pub mod log;
pub(crate) mod marker;

pub use filter::{Filter, FilterError, FilterReason, MAX_FILTER_LEN, MAX_PREDICATES};
pub use glob::glob;

use crate::event::dispatch::{INLINE_WORDS, Inline, PAIR_BYTES};
use crate::event::filter::{FieldRef, Fields};
use crate::field::{Encoder, Field, FieldValue, Measure, Sink};

use core::marker::PhantomData;
use core::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering::Relaxed};

/// Most payload bytes an event records (strings are cut to fit).
pub const MAX_EVENT_PAYLOAD: usize = 256;

/// What a descriptor describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DescriptorKind {
    /// A tracepoint: listed in `available_events`, enabled per instance.
    Event,
    /// A `printk!` call site: the format string is interned here, the arguments are
    /// stored raw with a type tag each; written to one instance, never enabled.
    Printk,
}

/// What an event is on a timeline (Perfetto draws it so). `S` is the string type:
/// `&'static str` in a descriptor, `String` where a dump's reader owns it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Timeline<S = &'static str> {
    /// A moment (the default).
    #[default]
    Instant,
    /// Begins a slice named `label`, ended by the next event on the same CPU that
    /// ends `label` with the same value of field `key` (if given); slices nest.
    Begin {
        /// The slice's kind, shared by the begin and end events.
        label: S,
        /// A field both events have, whose values must match.
        key: Option<S>,
    },
    /// Ends the slice `label` (see [`Timeline::Begin`]).
    End {
        /// The slice's kind.
        label: S,
        /// The field whose value must match the begin's.
        key: Option<S>,
    },
    /// Its integer fields are counters: each a value over time, per CPU.
    Counter,
    /// Ends a slice named `label` that began `duration` nanoseconds before it, the
    /// value of its integer field `duration` (a region it measured, such as the
    /// irqsoff tracer's). Drawn on a track of its own beside its CPU's: such a slice
    /// need not nest in the CPU's others.
    Span {
        /// The slice's kind.
        label: S,
        /// The field holding the slice's length in nanoseconds.
        duration: S,
    },
}

/// A static description of an event: who it is, its fields, how to print it, and
/// which instances record it.
#[derive(Debug)]
pub struct EventDescriptor {
    /// The subsystem (`irq`, `sched`, ...).
    pub system: &'static str,
    /// The event's name within its system.
    pub name: &'static str,
    /// The format string, rendered at read time (see [`crate::event::format`]).
    pub format: &'static str,
    /// The fields, in payload order.
    pub fields: &'static [Field<'static>],
    /// Tracepoint or printk call site.
    pub kind: DescriptorKind,
    /// What the event is on a timeline (an instant, a slice's begin or end, a
    /// counter), for tools that draw one.
    pub timeline: Timeline,
    /// Record id, assigned at boot by [`crate::Tracer`] (0: not yet).
    id: AtomicU16,
    /// Bit `s` set: the event fires in the instance in slot `s` (records, or runs
    /// its triggers only if `soft` has the bit too).
    enabled: AtomicU64,
    /// Bit `s` set: the instance in slot `s` has a filter or triggers for this event,
    /// or records a stack trace after it (its writers take the hooked path).
    hooked: AtomicU64,
    /// Bit `s` set: the instance in slot `s` has triggers on this event.
    triggered: AtomicU64,
    /// Bit `s` set: those triggers act before the event is recorded (none needs the
    /// record, as ftrace's unconditional `traceon` or `snapshot`).
    early: AtomicU64,
    /// Bit `s` set: the event fires in slot `s` for its triggers but is not recorded
    /// (ftrace's soft-disabled state: triggers on an event that is off).
    soft: AtomicU64,
    /// The event's keyed sites are jumps to their recording path (see [`key`]).
    armed: AtomicBool,
    /// The event stays armed while off (`Tracer::keep_armed`).
    held: AtomicBool,
}

impl EventDescriptor {
    /// A descriptor, not yet numbered nor enabled anywhere.
    pub const fn new(
        system: &'static str,
        name: &'static str,
        format: &'static str,
        fields: &'static [Field<'static>],
        kind: DescriptorKind,
    ) -> Self {
        EventDescriptor {
            system,
            name,
            format,
            fields,
            kind,
            timeline: Timeline::Instant,
            id: AtomicU16::new(0),
            enabled: AtomicU64::new(0),
            hooked: AtomicU64::new(0),
            triggered: AtomicU64::new(0),
            early: AtomicU64::new(0),
            soft: AtomicU64::new(0),
            armed: AtomicBool::new(false),
            held: AtomicBool::new(false),
        }
    }

    /// The descriptor, drawn as `timeline` on a timeline.
    pub const fn on_timeline(mut self, timeline: Timeline) -> Self {
        self.timeline = timeline;
        self
    }

    /// The record id (0 until the tracer numbered it).
    #[inline(always)]
    pub fn id(&self) -> u16 {
        self.id.load(Relaxed)
    }

    pub(crate) fn set_id(&self, id: u16) {
        self.id.store(id, Relaxed);
    }

    /// Which instance slots the event fires in: those that record it, and those
    /// that only run its triggers.
    #[inline(always)]
    pub fn enabled_mask(&self) -> u64 {
        // Relaxed: a writer that sees a stale mask records into (or skips) an
        // instance whose switch is just changing; both outcomes are counted.
        self.enabled.load(Relaxed)
    }

    /// Which instance slots have a filter or triggers for the event.
    #[inline(always)]
    pub(crate) fn hooked_mask(&self) -> u64 {
        // Relaxed: a writer that sees a stale bit finds the hooks the slot's table
        // holds (published before the bit is set, removed after it is cleared) or
        // none, and records as without.
        self.hooked.load(Relaxed)
    }

    /// Whether the instance in `slot` records the event (enabled, not only for
    /// its triggers).
    #[inline]
    pub(crate) fn recording_in(&self, slot: usize) -> bool {
        self.recording_mask() & (1 << slot) != 0
    }

    /// Which instance slots record the event: enabled, not for triggers only.
    #[inline(always)]
    pub(crate) fn recording_mask(&self) -> u64 {
        self.enabled.load(Relaxed) & !self.soft.load(Relaxed)
    }

    /// Which instance slots have triggers on the event.
    #[inline(always)]
    pub(crate) fn triggered_mask(&self) -> u64 {
        self.triggered.load(Relaxed)
    }

    /// Which instance slots' triggers on the event act before it is recorded.
    #[inline(always)]
    pub(crate) fn early_mask(&self) -> u64 {
        self.early.load(Relaxed)
    }

    /// Records whether the triggers of `slot` on the event act before it is
    /// recorded. The caller serialises hook changes per slot.
    pub(crate) fn set_early(&self, slot: usize, early: bool) {
        match early {
            true => self.early.fetch_or(1 << slot, Relaxed),
            false => self.early.fetch_and(!(1 << slot), Relaxed),
        };
    }

    /// Enables or disables recording in `slot`; lock-free, so an `enable_event`
    /// trigger calls it from any context. An event with triggers in the slot keeps
    /// firing for them when disabled.
    pub(crate) fn set_enabled(&self, slot: usize, on: bool) {
        let bit = 1 << slot;
        if on {
            self.enabled.fetch_or(bit, Relaxed);
            self.soft.fetch_and(!bit, Relaxed);
        } else if self.triggered.load(Relaxed) & bit != 0 {
            self.soft.fetch_or(bit, Relaxed);
        } else {
            self.enabled.fetch_and(!bit, Relaxed);
        }
    }

    /// Records that `slot` now has a filter (`filter`) and triggers (`triggers`) for
    /// the event, or not, and whether it records a stack trace after it
    /// (`stacked`). Triggers on a disabled event make it fire without being recorded.
    /// The caller serialises hook changes per slot.
    pub(crate) fn set_hooks(&self, slot: usize, filter: bool, triggers: bool, stacked: bool) {
        let bit = 1 << slot;
        let hooked = filter || triggers || stacked;
        if hooked {
            self.hooked.fetch_or(bit, Relaxed);
        }
        if triggers {
            self.triggered.fetch_or(bit, Relaxed);
            if self.enabled.load(Relaxed) & bit == 0 {
                self.soft.fetch_or(bit, Relaxed);
                self.enabled.fetch_or(bit, Relaxed);
            }
        } else {
            self.triggered.fetch_and(!bit, Relaxed);
            if self.soft.load(Relaxed) & bit != 0 {
                self.enabled.fetch_and(!bit, Relaxed);
                self.soft.fetch_and(!bit, Relaxed);
            }
        }
        if !hooked {
            self.hooked.fetch_and(!bit, Relaxed);
        }
    }

    /// Whether the event's keyed sites are jumps (the platform patched them), so
    /// that setting a bit of its mask takes effect at once.
    #[inline]
    pub fn is_armed(&self) -> bool {
        self.armed.load(Relaxed)
    }

    pub(crate) fn set_armed(&self, armed: bool) {
        self.armed.store(armed, Relaxed);
    }

    /// Whether the event stays armed while off.
    pub(crate) fn is_held(&self) -> bool {
        self.held.load(Relaxed)
    }

    pub(crate) fn hold(&self) {
        self.held.store(true, Relaxed);
    }

    /// Forgets everything about `slot` (its instance is being destroyed).
    pub(crate) fn clear_slot(&self, slot: usize) {
        let keep = !(1 << slot);
        for word in [&self.enabled, &self.hooked, &self.triggered, &self.early, &self.soft] {
            word.fetch_and(keep, Relaxed);
        }
    }

    /// Whether the `SYSTEM:NAME` pair matches `system` and `event` (`None`: any;
    /// each a [`glob`](fn@glob)).
    pub fn matches(&self, system: Option<&str>, event: Option<&str>) -> bool {
        system.is_none_or(|p| glob(p, self.system)) && event.is_none_or(|p| glob(p, self.name))
    }
}

/// An argument passed for a field declared as `Decl`. The same type as declared,
/// except that a `&str` field (declared `&'static str` in the event's static) takes a
/// string of any lifetime: it is copied into the record.
pub trait FieldArg<Decl>: FieldValue {
    /// Appends the value's raw representation.
    fn encode_arg<S: Sink>(&self, out: &mut S);

    /// [`FieldArg::encode_arg`], a string leaving the last `keep` bytes of room free
    /// for the fields after it (a fixed-size value takes its size whatever `keep`).
    #[inline(always)]
    fn encode_arg_keeping<S: Sink>(&self, out: &mut S, keep: usize) {
        let _ = keep;
        self.encode_arg(out);
    }
}

macro_rules! same_type_arg {
    ($($ty:ty),*) => {$(
        impl FieldArg<$ty> for $ty {
            #[inline(always)]
            fn encode_arg<S: Sink>(&self, out: &mut S) {
                self.encode(out);
            }
        }
    )*};
}

same_type_arg!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize, bool, char);

impl<const N: usize> FieldArg<[u8; N]> for [u8; N] {
    #[inline(always)]
    fn encode_arg<S: Sink>(&self, out: &mut S) {
        self.encode(out);
    }
}

impl FieldArg<&'static str> for &str {
    #[inline(always)]
    fn encode_arg<S: Sink>(&self, out: &mut S) {
        self.encode(out);
    }

    #[inline(always)]
    fn encode_arg_keeping<S: Sink>(&self, out: &mut S, keep: usize) {
        out.put_str_keeping(self, keep);
    }
}

/// A tuple of arguments for an event whose fields are declared as `Decl` (a tuple of
/// the same length), recorded in order.
pub trait Args<Decl> {
    /// Appends every value.
    fn encode<S: Sink>(&self, out: &mut S);

    /// The payload's length in bytes, strings cut to [`MAX_EVENT_PAYLOAD`] in all.
    /// A constant after inlining when every field has a fixed size.
    #[inline(always)]
    fn payload_len(&self) -> usize {
        let mut measure = Measure { len: 0, limit: MAX_EVENT_PAYLOAD };
        self.encode(&mut measure);
        measure.len
    }

    /// Field `index`'s integer, as a filter compares it ([`FieldValue::int_value`]).
    fn int_value(&self, index: usize) -> Option<u64>;

    /// Field `index`'s string, as a filter compares it ([`FieldValue::str_value`]).
    fn str_value(&self, index: usize) -> Option<&str>;
}

macro_rules! tuple_args {
    ($(($($arg:ident : $decl:ident),*)),* $(,)?) => {$(
        impl<$($arg: FieldArg<$decl>, $decl: FieldValue),*> Args<($($decl,)*)> for ($($arg,)*) {
            #[allow(non_snake_case, unused_assignments, reason = "the type parameters name the values")]
            #[inline(always)]
            fn encode<S: Sink>(&self, _out: &mut S) {
                let ($($arg,)*) = self;
                // Each string leaves room for the fewest bytes the fields after it
                // take (constants: a fixed-size event pays nothing), so that a long
                // one is cut and the fields after it are kept.
                let mut _after = 0 $(+ $decl::KIND.min_size())*;
                $(
                    _after -= $decl::KIND.min_size();
                    $arg.encode_arg_keeping(_out, _after);
                )*
            }

            #[allow(non_snake_case, unused_assignments, reason = "the type parameters name the values")]
            #[inline(always)]
            fn int_value(&self, _index: usize) -> Option<u64> {
                let ($($arg,)*) = self;
                let mut _at = 0;
                $(
                    if _index == _at {
                        return $arg.int_value();
                    }
                    _at += 1;
                )*
                None
            }

            #[allow(non_snake_case, unused_assignments, reason = "the type parameters name the values")]
            #[inline(always)]
            fn str_value(&self, _index: usize) -> Option<&str> {
                let ($($arg,)*) = self;
                let mut _at = 0;
                $(
                    if _index == _at {
                        return $arg.str_value();
                    }
                    _at += 1;
                )*
                None
            }
        }
    )*};
}

tuple_args!(
    (),
    (A: Da),
    (A: Da, B: Db),
    (A: Da, B: Db, C: Dc),
    (A: Da, B: Db, C: Dc, D: Dd),
    (A: Da, B: Db, C: Dc, D: Dd, E: De),
    (A: Da, B: Db, C: Dc, D: Dd, E: De, F: Df),
    (A: Da, B: Db, C: Dc, D: Dd, E: De, F: Df, G: Dg),
    (A: Da, B: Db, C: Dc, D: Dd, E: De, F: Df, G: Dg, H: Dh),
);

/// A typed tracepoint: its descriptor and the types of its arguments. `repr(C)`:
/// the descriptor is at the event's address (a keyed site names it so).
#[repr(C)]
pub struct Event<A> {
    descriptor: EventDescriptor,
    _args: PhantomData<fn(A)>,
}

impl<A> Event<A> {
    /// Wraps a descriptor (used by [`event!`](macro@crate::event)).
    pub const fn new(descriptor: EventDescriptor) -> Self {
        Event { descriptor, _args: PhantomData }
    }

    /// The descriptor.
    pub const fn descriptor(&self) -> &EventDescriptor {
        &self.descriptor
    }

    /// Whether any instance records this event: one relaxed load.
    #[inline(always)]
    pub fn is_enabled(&self) -> bool {
        self.descriptor.enabled_mask() != 0
    }

    /// Records the event into every instance that has it enabled: a payload of one
    /// word or of two goes to the tracer in registers, an empty one or one of at
    /// most four words is encoded once and copied into each record, a larger one is
    /// encoded straight into each ring. Called by [`emit!`](crate::emit) after
    /// [`Event::is_enabled`]; safe from any context.
    #[cold]
    #[inline(never)]
    pub fn record<T: Args<A>>(&'static self, args: T) {
        let len = args.payload_len();
        // A payload of one or two words (known at compile time when every field has
        // a fixed size) goes to the tracer by value.
        if (1..=PAIR_BYTES).contains(&len) {
            let mut buf = [0u8; PAIR_BYTES];
            args.encode(&mut Encoder::new(&mut buf));
            let (lo, hi) = buf.split_at(8);
            let [lo, hi] = [lo, hi].map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()));
            return crate::event::dispatch::record_small(&self.descriptor, len, lo, hi);
        }
        let payload = Encode::<T, A>::new(args);
        // A payload of up to four words is encoded once, here, and copied word by
        // word into each record.
        let mut buf: Inline = Default::default();
        let mut words = None;
        if len <= INLINE_WORDS * 8 {
            let mut encoder = Encoder::new(&mut buf.as_flattened_mut()[..INLINE_WORDS * 8]);
            payload.0.encode(&mut encoder);
            words = Some(&buf);
        }
        crate::event::dispatch::record_words(&self.descriptor, len, &payload, words);
    }
}

/// An event's arguments as the tracer sees them: written into each reserved record,
/// and read by filters as they are, before anything is encoded.
pub(crate) struct Encode<T, A>(T, PhantomData<fn(A)>);

impl<T: Args<A>, A> Encode<T, A> {
    /// Wraps `args`.
    pub(crate) fn new(args: T) -> Self {
        Encode(args, PhantomData)
    }
}

impl<T: Args<A>, A> crate::event::dispatch::Payload for Encode<T, A> {
    #[inline]
    fn write(&self, out: &mut crate::ring::per_cpu::RecordWriter<'_>) {
        self.0.encode(out);
    }

    fn with_fields(&self, kinds: &[crate::field::FieldKind], f: &mut dyn FnMut(&dyn Fields)) {
        // A payload that fits whole (a constant check when every field has a fixed
        // size) holds the arguments as they are; one cut short is read as recorded.
        if self.0.payload_len() < MAX_EVENT_PAYLOAD {
            return f(self);
        }
        let mut buf = [0u8; MAX_EVENT_PAYLOAD];
        let mut encoder = Encoder::new(&mut buf);
        self.0.encode(&mut encoder);
        f(&crate::event::filter::Encoded { payload: encoder.bytes(), kinds })
    }
}

impl<T: Args<A>, A> Fields for Encode<T, A> {
    #[inline(always)]
    fn int(&self, field: &FieldRef) -> Option<u64> {
        self.0.int_value(usize::from(field.index))
    }

    #[inline(always)]
    fn str(&self, field: &FieldRef) -> Option<&str> {
        self.0.str_value(usize::from(field.index))
    }
}

/// Declares a tracepoint. After its format it may say what it is on a timeline
/// ([`Timeline`]): `begin "LABEL"` / `end "LABEL"`, optionally `key FIELD` (the two
/// events of a slice), `span "LABEL" duration FIELD` (the end of a slice that lasted
/// FIELD ns), or `counter`.
///
/// ```text
/// trace::event! {
///     /// An interrupt handler starts.
///     pub IRQ_ENTRY = "irq":"irq_handler_entry" { irq: u8 } => "irq={irq}",
///         begin "irq" key irq;
///     /// It returns.
///     pub IRQ_EXIT = "irq":"irq_handler_exit" { irq: u8 } => "irq={irq}",
///         end "irq" key irq;
///     /// A queue's depth, drawn as a counter.
///     pub DEPTH = "net":"queue" { depth: u32 } => "depth={depth}", counter;
/// }
/// trace::emit!(IRQ_ENTRY, irq);
/// ```
///
/// The format is checked when the event compiles, as a tracer checks it (`BadFormat`):
/// a malformed placeholder, one that names no field, or `:sym` on a field that is not
/// an unsigned integer is a compile error.
///
/// ```
/// trace::event! { pub LINK = "net":"link" { speed: u32 } => "speed={speed}"; }
/// ```
///
/// ```compile_fail
/// trace::event! { pub LINK = "net":"link" { speed: u32 } => "speed={sped}"; }
/// ```
///
/// A string takes what room the record has left (256 bytes in all) less the fewest
/// bytes the fields after it take, so a long one is cut and they are kept.
#[macro_export]
macro_rules! event {
    ($(
        $(#[$meta:meta])*
        $vis:vis $ident:ident = $system:literal : $name:literal { $($field:ident : $ty:ty),* $(,)? }
            => $format:literal $(, $timeline:ident $($label:literal $($which:ident $key:ident)?)?)?;
    )*) => {$(
        $(#[$meta])*
        $vis static $ident: $crate::event::Event<($($ty,)*)> = $crate::event::Event::new($crate::event::EventDescriptor::new(
            $system,
            $name,
            $format,
            &[$($crate::field::Field { name: stringify!($field), kind: <$ty as $crate::field::FieldValue>::KIND }),*],
            $crate::event::DescriptorKind::Event,
        ).on_timeline($crate::timeline!($($timeline $($label $($which $key)?)?)?)));
        const _: () = {
            #[used]
            #[unsafe(link_section = "trace_events")]
            static DESCRIPTOR: &$crate::event::EventDescriptor = $ident.descriptor();
        };
        // A format a tracer would refuse (`Tracer::new`, `BadFormat`) does not compile.
        const _: () = if let Err(why) = $crate::event::format::validate(
            $format,
            &[$($crate::field::Field { name: stringify!($field), kind: <$ty as $crate::field::FieldValue>::KIND }),*],
        ) {
            panic!("{}", why);
        };
    )*};
}

/// The [`Timeline`] an [`event!`](crate::event) declares after its format:
/// nothing (an instant), `begin "LABEL"`, `end "LABEL"` (each optionally followed by
/// `key FIELD`), `span "LABEL" duration FIELD`, or `counter`.
#[doc(hidden)]
#[macro_export]
macro_rules! timeline {
    () => {
        $crate::event::Timeline::Instant
    };
    (counter) => {
        $crate::event::Timeline::Counter
    };
    (begin $label:literal $(key $key:ident)?) => {
        $crate::event::Timeline::Begin { label: $label, key: $crate::timeline!(@key $($key)?) }
    };
    (end $label:literal $(key $key:ident)?) => {
        $crate::event::Timeline::End { label: $label, key: $crate::timeline!(@key $($key)?) }
    };
    (span $label:literal duration $field:ident) => {
        $crate::event::Timeline::Span { label: $label, duration: stringify!($field) }
    };
    (@key) => {
        None
    };
    (@key $key:ident) => {
        Some(stringify!($key))
    };
}

/// A descriptor the tracer has anyway (`ftrace:print`), which
/// [`linked_events!`](crate::linked_events) puts in the caller's `trace_events`
/// section, so that the section and its bounds exist before any `event!` does.
#[doc(hidden)]
pub static SECTION_ANCHOR: &EventDescriptor = &marker::MARKER;

/// The descriptors the linker collected in the `trace_events` section of the
/// calling binary: every [`event!`](macro@crate::event) and [`printk!`](crate::printk) of
/// every crate linked in (and one of the tracer's own, so that a binary with none
/// yet links). Expands to the one `unsafe` walk of the section, in the caller's
/// crate (the kernel's), since it relies on the linker's `__start_`/`__stop_`
/// symbols. A linker script that names the section must keep it an output section
/// of its own, 8-aligned (`. = ALIGN(8); trace_events : { KEEP(*(trace_events)) }`):
/// the linker defines those symbols only then.
#[macro_export]
macro_rules! linked_events {
    () => {{
        #[used]
        #[unsafe(link_section = "trace_events")]
        static ANCHOR: &$crate::event::EventDescriptor = $crate::event::SECTION_ANCHOR;
        unsafe extern "C" {
            static __start_trace_events: u8;
            static __stop_trace_events: u8;
        }
        let start =
            (&raw const __start_trace_events).cast::<&'static $crate::event::EventDescriptor>();
        let stop =
            (&raw const __stop_trace_events).cast::<&'static $crate::event::EventDescriptor>();
        // SAFETY: the linker places every `&'static EventDescriptor` that `event!` and
        // `printk!` put in the `trace_events` section contiguously (each is pointer
        // sized and aligned, and nothing else goes there) between these two symbols;
        // the section is read-only and lives as long as the program.
        unsafe { core::slice::from_raw_parts(start, stop.offset_from(start) as usize) }
    }};
}

/// Records a tracepoint declared with [`event!`](macro@crate::event), with its arguments
/// in declaration order. The arguments are evaluated only if the event is enabled.
/// With static keys the site is a NOP until the event is armed ([`key`]).
#[macro_export]
macro_rules! emit {
    ($event:path $(, $arg:expr)* $(,)?) => {
        $crate::key_site!($event, {
            if $event.is_enabled() {
                $event.record(($($arg,)*));
            }
        })
    };
}
