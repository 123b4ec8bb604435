//! Events written by hand (`events/SYS/EVENT/inject`, [`Instance::inject`]): a line
//! of `FIELD=VALUE` pairs, encoded as the event's tracepoint encodes its fields, so
//! the record is one the tracepoint could have written.
//!
//! ```text
//! irq=48
//! ptr=0xffff8000 size=64 align=8
//! buf="two words"
//! ```
//!
//! Integers are decimal, `0x` hex or `0` octal (as filters read them), negative for
//! signed fields, and must fit the field; `bool` takes `0`, `1`, `true` or `false`;
//! `char` one character; a string a word or a `"quoted"` text; a byte array up to its
//! size in hex digit pairs (zero-padded). A field not given is zero (empty).
//!
//! [`Instance::inject`]: crate::Instance::inject

use super::MAX_EVENT_PAYLOAD;
use super::filter::{parse_signed, parse_unsigned};
use crate::field::{Encoder, Field, FieldKind, FieldValue, Sink};
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

/// Why an inject line is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InjectReason {
    /// An item that is not `FIELD=VALUE`.
    NotAssignment,
    /// A name that is none of the event's fields.
    UnknownField,
    /// A field given twice.
    Repeated,
    /// A `"` with no closing one.
    Unterminated,
    /// A value that does not fit its field (the rule for the field's kind).
    BadValue(&'static str),
    /// The payload would be longer than an event holds.
    TooLong,
    /// Not a tracepoint one can enable (a `printk!` site, a marker, an event the
    /// function tracers or the tracer itself write), or not one of the tracer's.
    NotInjectable,
    /// The event is not recorded in the instance (not enabled, or soft mode).
    NotEnabled,
}

impl fmt::Display for InjectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            InjectReason::NotAssignment => "expected FIELD=VALUE",
            InjectReason::UnknownField => "no such field of the event (see its format)",
            InjectReason::Repeated => "field given twice",
            InjectReason::Unterminated => "a quoted value has no closing \"",
            InjectReason::BadValue(rule) => rule,
            InjectReason::TooLong => "the values take more than an event holds (256 bytes)",
            InjectReason::NotInjectable => "only tracepoints that set_event takes are injected",
            InjectReason::NotEnabled => "the event is not enabled in this instance",
        })
    }
}

/// A refused inject line: the byte offset in the line where the problem is, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InjectError {
    /// Byte offset into the line as given.
    pub pos: usize,
    /// What is wrong there.
    pub reason: InjectReason,
}

impl core::error::Error for InjectError {}

impl fmt::Display for InjectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason {
            InjectReason::NotInjectable | InjectReason::NotEnabled => write!(f, "{}", self.reason),
            reason => write!(f, "parse error at {}: {reason}", self.pos),
        }
    }
}

/// Encodes `line` as a payload of an event with `fields` into `buf`; returns its
/// length.
pub(crate) fn encode(
    fields: &[Field<'_>],
    line: &str,
    buf: &mut [u8; MAX_EVENT_PAYLOAD],
) -> Result<usize, InjectError> {
    let error = |pos, reason| InjectError { pos, reason };
    // Each field's value and where it starts in the line.
    let mut values: Vec<Option<(usize, &str)>> = vec![None; fields.len()];
    for item in items(line) {
        let (at, name, value) = item?;
        let index = fields.iter().position(|f| f.name == name);
        let slot = index.and_then(|i| values.get_mut(i));
        let slot = slot.ok_or(error(at, InjectReason::UnknownField))?;
        if slot.is_some() {
            return Err(error(at, InjectReason::Repeated));
        }
        *slot = Some((at + name.len() + 1, value));
    }
    let mut encoder = Encoder::new(buf);
    for (field, value) in fields.iter().zip(values) {
        let (at, text) = value.unwrap_or((line.len(), ""));
        put(&mut encoder, field.kind, text, value.is_none()).map_err(|reason| error(at, reason))?;
    }
    Ok(encoder.bytes().len())
}

/// The `FIELD=VALUE` items of `line`: where each starts, its name and its value
/// (a quoted one without its quotes).
fn items(line: &str) -> impl Iterator<Item = Result<(usize, &str, &str), InjectError>> + '_ {
    let mut rest = 0;
    core::iter::from_fn(move || {
        let start = rest + line[rest..].len() - line[rest..].trim_start().len();
        if start == line.len() {
            return None;
        }
        let item = &line[start..];
        let Some((name, value)) = item.split_once('=').filter(|(n, _)| is_name(n)) else {
            rest = line.len();
            return Some(Err(InjectError { pos: start, reason: InjectReason::NotAssignment }));
        };
        let value_at = start + name.len() + 1;
        let (value, end) = match value.strip_prefix('"') {
            Some(quoted) => match quoted.find('"') {
                Some(close) => (&quoted[..close], value_at + close + 2),
                None => {
                    rest = line.len();
                    let reason = InjectReason::Unterminated;
                    return Some(Err(InjectError { pos: value_at, reason }));
                }
            },
            None => {
                let word = value.split(char::is_whitespace).next().unwrap_or("");
                (word, value_at + word.len())
            }
        };
        if line[end..].starts_with(|c: char| !c.is_whitespace()) {
            rest = line.len();
            return Some(Err(InjectError { pos: end, reason: InjectReason::NotAssignment }));
        }
        rest = end;
        Some(Ok((start, name, value)))
    })
}

/// A hex digit's value.
fn hex_digit(digit: u8) -> Option<u8> {
    char::from(digit).to_digit(16).and_then(|d| u8::try_from(d).ok())
}

/// Whether `name` can be a field's name: letters, digits and `_`.
fn is_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Encodes `text` as a value of `kind` (`absent`: the field was not given, its zero).
fn put(
    out: &mut Encoder<'_>,
    kind: FieldKind,
    text: &str,
    absent: bool,
) -> Result<(), InjectReason> {
    // A tracepoint's string is cut to what fits: an injected one is refused.
    if kind == FieldKind::Str && text.len() + 2 > out.room() {
        return Err(InjectReason::TooLong);
    }
    put_value(out, kind, text, absent).map_err(InjectReason::BadValue)?;
    if out.was_cut() { Err(InjectReason::TooLong) } else { Ok(()) }
}

/// [`put`], refusing with the rule a value broke.
fn put_value(
    out: &mut Encoder<'_>,
    kind: FieldKind,
    text: &str,
    absent: bool,
) -> Result<(), &'static str> {
    const UNSIGNED: &str = "an unsigned integer that fits the field";
    const SIGNED: &str = "an integer that fits the field";
    let text = if absent && !matches!(kind, FieldKind::Str) { "0" } else { text };
    let unsigned = || parse_unsigned(text).ok_or(UNSIGNED);
    let signed = || parse_signed(text).ok_or(SIGNED);
    match kind {
        FieldKind::U8 => u8::try_from(unsigned()?).map_err(|_| UNSIGNED)?.encode(out),
        FieldKind::U16 => u16::try_from(unsigned()?).map_err(|_| UNSIGNED)?.encode(out),
        FieldKind::U32 => u32::try_from(unsigned()?).map_err(|_| UNSIGNED)?.encode(out),
        FieldKind::U64 => unsigned()?.encode(out),
        FieldKind::I8 => i8::try_from(signed()?).map_err(|_| SIGNED)?.encode(out),
        FieldKind::I16 => i16::try_from(signed()?).map_err(|_| SIGNED)?.encode(out),
        FieldKind::I32 => i32::try_from(signed()?).map_err(|_| SIGNED)?.encode(out),
        FieldKind::I64 => signed()?.encode(out),
        FieldKind::Bool => match text {
            "0" | "false" => false.encode(out),
            "1" | "true" => true.encode(out),
            _ => return Err("0, 1, true or false"),
        },
        FieldKind::Char => {
            let mut chars = text.chars();
            let one =
                if absent { Some('\0') } else { chars.next().filter(|_| chars.next().is_none()) };
            one.ok_or("one character")?.encode(out)
        }
        FieldKind::Bytes(n) => {
            const RULE: &str = "hex digit pairs, at most the field's size";
            let n = usize::from(n);
            let text = if absent { "" } else { text };
            let digits = text.strip_prefix("0x").unwrap_or(text).as_bytes();
            if digits.len() % 2 != 0 || digits.len() / 2 > n {
                return Err(RULE);
            }
            for i in 0..n {
                let byte = match digits.get(2 * i..2 * i + 2) {
                    Some(&[hi, lo]) => hex_digit(hi).zip(hex_digit(lo)).ok_or(RULE)?,
                    _ => (0, 0),
                };
                let byte = byte.0 << 4 | byte.1;
                out.put(&[byte]);
            }
        }
        FieldKind::Str => out.put_str(text),
    }
    Ok(())
}
