//! Where tracepoints send their records: the one tracer the kernel installed.

use crate::event::EventDescriptor;
use crate::event::filter::{Encoded, Fields, Filter};
use crate::event::format_file::Origin;
use crate::field::FieldKind;
use crate::ring::per_cpu::RecordWriter;
use spin::Once;

/// A payload the tracer writes into each record it reserves for an event.
pub(crate) trait Payload {
    /// Writes the payload into `out`, a record reserved for it.
    fn write(&self, out: &mut RecordWriter<'_>);

    /// Runs `f` on the values the record holds, read through [`Fields`]; `kinds` are
    /// the event's field kinds. Callable from any context.
    fn with_fields(&self, kinds: &[FieldKind], f: &mut dyn FnMut(&dyn Fields));

    /// Whether the payload, written at `origin`, passes `filter` (compiled for the
    /// event's fields), judged on the values the record holds. Callable from any
    /// context.
    fn passes(&self, filter: &Filter, origin: Origin) -> bool {
        let mut pass = false;
        self.with_fields(filter.kinds(), &mut |fields| pass = filter.eval(fields, origin));
        pass
    }
}

impl Payload for &[u8] {
    #[inline]
    fn write(&self, out: &mut RecordWriter<'_>) {
        crate::field::Sink::put(out, self);
    }

    fn with_fields(&self, kinds: &[FieldKind], f: &mut dyn FnMut(&dyn Fields)) {
        f(&Encoded { payload: self, kinds })
    }
}

/// Payloads of at most this many words are encoded once per event and copied into
/// each record, instead of being encoded into each record in place.
pub(crate) const INLINE_WORDS: usize = 4;

/// A small payload encoded into words, zero-padded: [`INLINE_WORDS`] of payload and
/// one more, so that a word read from any byte of the payload stays inside.
pub(crate) type Inline = [[u8; 8]; INLINE_WORDS + 1];

/// An event's payload as the tracer passes it down: its length, the values (for
/// filters, triggers and records written in place), and, for a small payload, its
/// bytes already encoded into words, which each record copies.
#[derive(Clone, Copy)]
pub(crate) struct Body<'a> {
    /// Payload length in bytes.
    pub(crate) len: usize,
    /// The values.
    pub(crate) payload: &'a dyn Payload,
    /// The payload encoded, zero-padded (`None`: larger than [`INLINE_WORDS`],
    /// written in place by `payload`).
    pub(crate) words: Option<&'a Inline>,
}

impl Body<'_> {
    /// Whether the event, written at `origin`, passes `filter`: judged on its
    /// encoded words when it has them (no call through the payload), on its values
    /// otherwise. The two agree: the words are what the record holds.
    #[inline(always)]
    pub(crate) fn passes(&self, filter: &Filter, origin: Origin) -> bool {
        match self.words {
            Some(words) => filter.matches_inline(words, self.len, origin),
            None => self.payload.passes(filter, origin),
        }
    }
}

/// A payload of `N` words, encoded and zero-padded, passed by value: a small event's
/// payload travels to the ring in registers.
#[derive(Clone, Copy)]
pub(crate) struct Words<const N: usize> {
    /// Payload length in bytes: more than `8 * (N - 1)`, at most `8 * N` (so the record
    /// holds `N` payload words).
    pub(crate) len: usize,
    /// The payload's words, little endian.
    pub(crate) words: [u64; N],
}

impl<const N: usize> Words<N> {
    /// The payload as a [`Body`], its words copied into `spill`.
    #[inline(always)]
    pub(crate) fn body<'a>(&self, spill: &'a mut Spill) -> Body<'a> {
        for (out, word) in spill.words.iter_mut().zip(self.words) {
            *out = word.to_le_bytes();
        }
        spill.len = self.len.min(8 * N);
        let spill: &'a Spill = spill;
        Body { len: spill.len, payload: spill, words: Some(&spill.words) }
    }
}

/// A small payload's words in memory, where filters and triggers read it.
#[derive(Default)]
pub(crate) struct Spill {
    words: Inline,
    len: usize,
}

impl Spill {
    fn bytes(&self) -> &[u8] {
        let bytes = self.words.as_flattened();
        bytes.get(..self.len).unwrap_or(bytes)
    }
}

impl Payload for Spill {
    #[inline]
    fn write(&self, out: &mut RecordWriter<'_>) {
        out.put_words(&self.words);
    }

    fn with_fields(&self, kinds: &[FieldKind], f: &mut dyn FnMut(&dyn Fields)) {
        f(&Encoded { payload: self.bytes(), kinds })
    }
}

/// Payloads of at most this many bytes reach the tracer as [`Words`] of two, those
/// of at most 8 as [`Words`] of one.
pub(crate) const PAIR_BYTES: usize = 16;

/// What records events for tracepoints (implemented by [`crate::Tracer`], installed by [`crate::install`]).
pub(crate) trait Dispatch: Sync {
    /// Records an event of `descriptor` with a payload of `len` bytes in every
    /// instance that has it enabled: each record holds `words` (the payload encoded,
    /// zero-padded) or, without them, what `payload` writes in place. Callable from
    /// any context; never blocks or allocates.
    fn record_words(
        &self,
        descriptor: &EventDescriptor,
        len: usize,
        payload: &dyn Payload,
        words: Option<&Inline>,
    );

    /// [`Dispatch::record_words`] for a payload of 9 to [`PAIR_BYTES`] bytes, passed
    /// by value as its two words (`lo` first).
    fn record_pair(&self, descriptor: &EventDescriptor, len: usize, lo: u64, hi: u64);

    /// [`Dispatch::record_words`] for a payload of 1 to 8 bytes, passed by value as
    /// its word.
    fn record_word(&self, descriptor: &EventDescriptor, len: usize, word: u64);

    /// Records an event of `descriptor` with a payload of `len` bytes, which
    /// `payload` writes in place into each record.
    #[cfg(test)]
    fn record(&self, descriptor: &EventDescriptor, len: usize, payload: &dyn Payload) {
        self.record_words(descriptor, len, payload, None);
    }
}

static DISPATCH: Once<&'static dyn Dispatch> = Once::new();

/// Makes `tracer` the destination of every tracepoint. Once per boot: a second call
/// fails and changes nothing.
pub(crate) fn install(tracer: &'static dyn Dispatch) -> Result<(), &'static str> {
    let mut installed = false;
    DISPATCH.call_once(|| {
        installed = true;
        tracer
    });
    if installed { Ok(()) } else { Err("a tracer is installed already") }
}

/// Sends one event to the installed tracer, if any.
#[inline]
pub(crate) fn record(descriptor: &EventDescriptor, len: usize, payload: &dyn Payload) {
    record_words(descriptor, len, payload, None);
}

/// Sends one small event (1 to [`PAIR_BYTES`] bytes) to the installed tracer, if any
/// ([`Dispatch::record_word`] or [`Dispatch::record_pair`]: the record's size is then
/// known where it is written).
#[inline(always)]
pub(crate) fn record_small(descriptor: &EventDescriptor, len: usize, lo: u64, hi: u64) {
    if let Some(tracer) = DISPATCH.get() {
        if len <= 8 {
            tracer.record_word(descriptor, len, lo);
        } else {
            tracer.record_pair(descriptor, len, lo, hi);
        }
    }
}

/// Sends one event to the installed tracer, if any (see [`Dispatch::record_words`]).
#[inline]
pub(crate) fn record_words(
    descriptor: &EventDescriptor,
    len: usize,
    payload: &dyn Payload,
    words: Option<&Inline>,
) {
    if let Some(tracer) = DISPATCH.get() {
        tracer.record_words(descriptor, len, payload, words);
    }
}
