//! Deferred formatting: turning a record's raw payload into text with its event's
//! format string, at read time (in the kernel's `trace` files and in the host tool).
//!
//! A format string is text with placeholders: `{name}` prints the field `name`,
//! `{}` the next field in declaration order, and a spec after a colon picks hex:
//! `{addr:x}`, `{addr:#x}`. `{{` and `}}` are literal braces. Integers print in
//! decimal, `bool` as `true`/`false`, byte arrays as hex, strings as they are.

use crate::field::{DecodeError, Decoder, Field, Value};
use core::fmt::{self, Write};

/// How a placeholder asked for its value.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Spec {
    Plain,
    Hex,
    AltHex,
}

fn write_value(out: &mut dyn Write, value: Value<'_>, spec: Spec) -> fmt::Result {
    match (value, spec) {
        (Value::Unsigned(v), Spec::Hex) => write!(out, "{v:x}"),
        (Value::Unsigned(v), Spec::AltHex) => write!(out, "{v:#x}"),
        (Value::Unsigned(v), Spec::Plain) => write!(out, "{v}"),
        (Value::Signed(v), Spec::Hex) => write!(out, "{v:x}"),
        (Value::Signed(v), Spec::AltHex) => write!(out, "{v:#x}"),
        (Value::Signed(v), Spec::Plain) => write!(out, "{v}"),
        (Value::Bool(v), _) => write!(out, "{v}"),
        (Value::Char(v), _) => write!(out, "{v}"),
        (Value::Bytes(bytes), _) => bytes.iter().try_for_each(|b| write!(out, "{b:02x}")),
        (Value::Str(s), _) => out.write_str(s),
    }
}

/// One piece of a parsed format string.
pub(crate) enum Piece<'f> {
    Text(&'f str),
    /// A placeholder: field name (empty: the next field) and spec.
    Hole(&'f str, Spec),
}

/// Splits a format string into text and placeholders; `None` for a malformed one.
pub(crate) fn pieces(format: &str) -> impl Iterator<Item = Option<Piece<'_>>> {
    let mut rest = format;
    core::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let special = rest.find(['{', '}']).unwrap_or(rest.len());
        if special > 0 {
            let (text, tail) = rest.split_at(special);
            rest = tail;
            return Some(Some(Piece::Text(text)));
        }
        for escaped in ["{{", "}}"] {
            if let Some(tail) = rest.strip_prefix(escaped) {
                rest = tail;
                return Some(Some(Piece::Text(&escaped[..1])));
            }
        }
        let Some(close) = rest.find('}').filter(|_| rest.starts_with('{')) else {
            rest = "";
            return Some(None);
        };
        let inner = &rest[1..close];
        rest = &rest[close + 1..];
        let (name, spec) = match inner.split_once(':') {
            None => (inner, Spec::Plain),
            Some((name, "x")) => (name, Spec::Hex),
            Some((name, "#x")) => (name, Spec::AltHex),
            Some(_) => return Some(None),
        };
        Some(Some(Piece::Hole(name, spec)))
    })
}

/// Checks that a format string is well formed and names only fields that exist.
pub fn validate(format: &str, fields: &[Field<'_>]) -> Result<(), &'static str> {
    for piece in pieces(format) {
        match piece {
            None => return Err("malformed placeholder"),
            Some(Piece::Hole(name, _))
                if !name.is_empty() && !fields.iter().any(|f| f.name == name) =>
            {
                return Err("placeholder names no field");
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// Renders a payload whose fields are `fields` (declared order) with `format`.
/// A payload that does not decode renders what it can and says what is wrong.
pub fn render(
    out: &mut dyn Write,
    format: &str,
    fields: &[Field<'_>],
    payload: &[u8],
) -> fmt::Result {
    let value_of = |index: usize| -> Result<Value<'_>, DecodeError> {
        let mut decoder = Decoder::new(payload);
        let mut value = Err(DecodeError::Truncated);
        for field in &fields[..=index] {
            value = decoder.value(field.kind);
            value?;
        }
        value
    };
    let mut next = 0;
    for piece in pieces(format) {
        match piece {
            Some(Piece::Text(text)) => out.write_str(text)?,
            Some(Piece::Hole(name, spec)) => {
                let index = if name.is_empty() {
                    next += 1;
                    Some(next - 1).filter(|&i| i < fields.len())
                } else {
                    fields.iter().position(|f| f.name == name)
                };
                match index.map(value_of) {
                    Some(Ok(value)) => write_value(out, value, spec)?,
                    Some(Err(error)) => write!(out, "<{error}>")?,
                    None => write!(out, "<no field {name}>")?,
                }
            }
            None => return out.write_str("<malformed format>"),
        }
    }
    Ok(())
}

/// Renders a self-describing payload (printk arguments, each with a type tag): `{}`
/// placeholders take the arguments in order.
pub fn render_tagged(out: &mut dyn Write, format: &str, payload: &[u8]) -> fmt::Result {
    let mut decoder = Decoder::new(payload);
    for piece in pieces(format) {
        match piece {
            Some(Piece::Text(text)) => out.write_str(text)?,
            Some(Piece::Hole(_, spec)) => match decoder.tagged() {
                Ok((_, value)) => write_value(out, value, spec)?,
                Err(error) => write!(out, "<{error}>")?,
            },
            None => return out.write_str("<malformed format>"),
        }
    }
    Ok(())
}

/// Writes every field as `name=value`, space separated (for events whose format
/// string is empty).
pub fn render_fields(out: &mut dyn Write, fields: &[Field<'_>], payload: &[u8]) -> fmt::Result {
    let mut decoder = Decoder::new(payload);
    for (i, field) in fields.iter().enumerate() {
        if i > 0 {
            out.write_char(' ')?;
        }
        write!(out, "{}=", field.name)?;
        match decoder.value(field.kind) {
            Ok(value) => write_value(out, value, Spec::Plain)?,
            Err(error) => return write!(out, "<{error}>"),
        }
    }
    Ok(())
}
