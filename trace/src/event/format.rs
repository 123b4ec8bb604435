//! Deferred formatting: turning a record's raw payload into text with its event's
//! format string, at read time (in the kernel's `trace` files and in the host tool).
//!
//! A format string is text with placeholders: `{name}` prints the field `name`,
//! `{}` the next field in declaration order, and a spec after a colon picks hex,
//! `{addr:x}`, `{addr:#x}`, or a code address, `{ip:sym}`: an unsigned integer
//! printed as `function+0xoffset` where the reader has the kernel's symbols (the
//! kernel's `trace` files, `report --elf`, trace-cmd with the kallsyms `--elf`
//! writes) and as `{:#x}` elsewhere. `{{` and `}}` are literal braces. Integers
//! print in decimal, `bool` as `true`/`false`, byte arrays as hex, strings as they
//! are.

use crate::field::{DecodeError, Decoder, Field, FieldKind, Value};
use crate::symtab::SymbolTable;
use core::fmt::{self, Write};

/// How a placeholder asked for its value.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Spec {
    Plain,
    Hex,
    AltHex,
    /// A code address (`:sym`).
    Symbol,
}

fn write_value(
    out: &mut dyn Write,
    value: Value<'_>,
    spec: Spec,
    symbols: Option<&SymbolTable<'_>>,
) -> fmt::Result {
    match (value, spec) {
        (Value::Unsigned(v), Spec::Symbol) => match symbols {
            Some(table) => table.write_address(out, v),
            None => write!(out, "{v:#x}"),
        },
        (Value::Signed(v), Spec::Symbol) => write!(out, "{v:#x}"),
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
            Some((name, "sym")) => (name, Spec::Symbol),
            Some(_) => return Some(None),
        };
        Some(Some(Piece::Hole(name, spec)))
    })
}

/// A placeholder of a format string ([`next_hole`]).
struct Hole {
    /// The byte range of its name (empty: the next field).
    name: (usize, usize),
    /// Whether its spec is `:sym`.
    symbol: bool,
    /// Where the text after it starts.
    end: usize,
}

const MALFORMED: &str = "malformed placeholder";

/// The first placeholder of `bytes` (a format string) at or after byte `from`, as
/// [`pieces`] reads it; `Ok(None)` if there is none, `Err` if one is malformed. At
/// compile time, as the callers below.
const fn next_hole(bytes: &[u8], from: usize) -> Result<Option<Hole>, &'static str> {
    let mut i = from;
    while i < bytes.len() {
        let escaped = i + 1 < bytes.len() && bytes[i + 1] == bytes[i];
        match bytes[i] {
            b'{' | b'}' if escaped => i += 2,
            b'}' => return Err(MALFORMED),
            b'{' => {
                let mut close = i + 1;
                while close < bytes.len() && bytes[close] != b'}' {
                    close += 1;
                }
                if close == bytes.len() {
                    return Err(MALFORMED);
                }
                let mut colon = i + 1;
                while colon < close && bytes[colon] != b':' {
                    colon += 1;
                }
                if colon < close && !known_spec(bytes, colon + 1, close) {
                    return Err(MALFORMED);
                }
                let symbol = colon < close && close - colon == 4;
                return Ok(Some(Hole { name: (i + 1, colon), symbol, end: close + 1 }));
            }
            _ => i += 1,
        }
    }
    Ok(None)
}

/// How many placeholders `format` has, `None` if one is malformed, as `pieces`
/// reads it, or (without `named`) names a field: at compile time (`printk!`, whose
/// arguments are positional, checks them against it).
pub const fn placeholders(format: &str, named: bool) -> Option<usize> {
    let bytes = format.as_bytes();
    let (mut from, mut count) = (0, 0);
    loop {
        match next_hole(bytes, from) {
            Err(_) => return None,
            Ok(None) => return Some(count),
            Ok(Some(hole)) if !named && hole.name.1 > hole.name.0 => return None,
            Ok(Some(hole)) => (from, count) = (hole.end, count + 1),
        }
    }
}

/// Whether `bytes[from..to]` is a spec [`pieces`] takes: `x`, `#x` or `sym`.
const fn known_spec(bytes: &[u8], from: usize, to: usize) -> bool {
    match to - from {
        1 => bytes[from] == b'x',
        2 => bytes[from] == b'#' && bytes[from + 1] == b'x',
        3 => bytes[from] == b's' && bytes[from + 1] == b'y' && bytes[from + 2] == b'm',
        _ => false,
    }
}

/// The index of the field named `bytes[from..to]`, if one is.
const fn named_field(
    fields: &[Field<'_>],
    bytes: &[u8],
    (from, to): (usize, usize),
) -> Option<usize> {
    let mut f = 0;
    while f < fields.len() {
        let name = fields[f].name.as_bytes();
        if name.len() == to - from {
            let mut k = 0;
            while k < name.len() && name[k] == bytes[from + k] {
                k += 1;
            }
            if k == name.len() {
                return Some(f);
            }
        }
        f += 1;
    }
    None
}

/// The index of the field the placeholder `name` prints, the `next` positional one
/// for an empty name (then advanced).
fn field_index(fields: &[Field<'_>], name: &str, next: &mut usize) -> Option<usize> {
    if name.is_empty() {
        *next += 1;
        Some(*next - 1).filter(|&i| i < fields.len())
    } else {
        fields.iter().position(|f| f.name == name)
    }
}

/// Whether a field of `kind` holds what `:sym` prints: an unsigned integer.
const fn is_address(kind: FieldKind) -> bool {
    matches!(kind, FieldKind::U8 | FieldKind::U16 | FieldKind::U32 | FieldKind::U64)
}

/// Checks that a format string is well formed, names only fields that exist, and
/// asks `:sym` of unsigned integer fields only: when `event!` compiles (a const
/// assertion), and for each descriptor a tracer is built over.
pub const fn validate(format: &str, fields: &[Field<'_>]) -> Result<(), &'static str> {
    let bytes = format.as_bytes();
    let (mut from, mut next) = (0, 0);
    loop {
        let hole = match next_hole(bytes, from) {
            Err(why) => return Err(why),
            Ok(None) => return Ok(()),
            Ok(Some(hole)) => hole,
        };
        let field = match hole.name.1 > hole.name.0 {
            true => match named_field(fields, bytes, hole.name) {
                None => return Err("placeholder names no field"),
                found => found,
            },
            false => {
                next += 1;
                if next - 1 < fields.len() { Some(next - 1) } else { None }
            }
        };
        if let (true, Some(f)) = (hole.symbol, field)
            && !is_address(fields[f].kind)
        {
            return Err("`:sym` takes an unsigned integer field (a code address)");
        }
        from = hole.end;
    }
}

/// The indices of the fields a format string prints as code addresses (`:sym`).
pub fn address_fields(format: &str, fields: &[Field<'_>]) -> alloc::vec::Vec<usize> {
    let mut next = 0;
    let mut found = alloc::vec::Vec::new();
    for piece in pieces(format).flatten() {
        if let Piece::Hole(name, spec) = piece {
            let index = field_index(fields, name, &mut next);
            if let Some(i) = index.filter(|_| spec == Spec::Symbol) {
                found.push(i);
            }
        }
    }
    found
}

/// A piece of a format string with its placeholder resolved against the fields.
#[derive(Clone, Copy)]
enum Part<'f> {
    Text(&'f str),
    /// The field at this index, printed so.
    Field(usize, Spec),
    /// A placeholder that names no field.
    NoField(&'f str),
    Malformed,
}

/// The parts of `format`, its placeholders resolved against `fields`.
fn parts<'f>(format: &'f str, fields: &[Field<'_>]) -> impl Iterator<Item = Part<'f>> {
    let mut next = 0;
    pieces(format).map(move |piece| match piece {
        Some(Piece::Text(text)) => Part::Text(text),
        Some(Piece::Hole(name, spec)) => match field_index(fields, name, &mut next) {
            Some(index) => Part::Field(index, spec),
            None => Part::NoField(name),
        },
        None => Part::Malformed,
    })
}

/// Writes `parts` with the value of each field from `value_of`; stops at a
/// malformed one.
fn write_parts<'f, 'v>(
    out: &mut dyn Write,
    parts: impl IntoIterator<Item = Part<'f>>,
    value_of: &dyn Fn(usize) -> Result<Value<'v>, DecodeError>,
    symbols: Option<&SymbolTable<'_>>,
) -> fmt::Result {
    for part in parts {
        match part {
            Part::Text(text) => out.write_str(text)?,
            Part::Field(index, spec) => match value_of(index) {
                Ok(value) => write_value(out, value, spec, symbols)?,
                Err(error) => write!(out, "<{error}>")?,
            },
            Part::NoField(name) => write!(out, "<no field {name}>")?,
            Part::Malformed => return out.write_str("<malformed format>"),
        }
    }
    Ok(())
}

/// Renders a payload whose fields are `fields` (declared order) with `format`,
/// code addresses (`:sym`) named from `symbols` if given. A payload that does not
/// decode renders what it can and says what is wrong. Each placeholder decodes
/// the fields up to its own (no allocation); [`Compiled`] renders many records of
/// one format in time linear in each.
pub fn render(
    out: &mut dyn Write,
    format: &str,
    fields: &[Field<'_>],
    payload: &[u8],
    symbols: Option<&SymbolTable<'_>>,
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
    write_parts(out, parts(format, fields), &value_of, symbols)
}

/// A format string with its placeholders resolved against its fields once, to
/// render the records of its event from their decoded values.
pub struct Compiled<'f> {
    parts: alloc::vec::Vec<Part<'f>>,
}

impl<'f> Compiled<'f> {
    /// `format` resolved against `fields` (declared order).
    pub fn new(format: &'f str, fields: &[Field<'_>]) -> Self {
        Compiled { parts: parts(format, fields).collect() }
    }

    /// Renders a record as [`render`] does, from `values`, its fields decoded in
    /// order until the first that did not decode, which failed with `error` (the
    /// fields from it on print it).
    pub fn render(
        &self,
        out: &mut dyn Write,
        values: &[Value<'_>],
        error: DecodeError,
        symbols: Option<&SymbolTable<'_>>,
    ) -> fmt::Result {
        let value_of = |index: usize| values.get(index).copied().ok_or(error);
        write_parts(out, self.parts.iter().copied(), &value_of, symbols)
    }
}

/// Renders a self-describing payload (printk arguments, each with a type tag): `{}`
/// placeholders take the arguments in order.
pub fn render_tagged(
    out: &mut dyn Write,
    format: &str,
    payload: &[u8],
    symbols: Option<&SymbolTable<'_>>,
) -> fmt::Result {
    let mut decoder = Decoder::new(payload);
    write_arguments(out, format, &mut || decoder.tagged().map(|(_, value)| value), symbols)
}

/// Renders a printk call site's arguments as [`render_tagged`] renders its payload,
/// from `values`, its arguments decoded in order until the first that did not,
/// which failed with `error` (the placeholders from it on print it).
pub fn render_arguments(
    out: &mut dyn Write,
    format: &str,
    values: &[Value<'_>],
    error: DecodeError,
    symbols: Option<&SymbolTable<'_>>,
) -> fmt::Result {
    let mut values = values.iter();
    write_arguments(out, format, &mut || values.next().copied().ok_or(error), symbols)
}

/// Writes `format` with each placeholder, in order, taking the argument `next`
/// gives; stops at a malformed placeholder.
fn write_arguments<'v>(
    out: &mut dyn Write,
    format: &str,
    next: &mut dyn FnMut() -> Result<Value<'v>, DecodeError>,
    symbols: Option<&SymbolTable<'_>>,
) -> fmt::Result {
    for piece in pieces(format) {
        match piece {
            Some(Piece::Text(text)) => out.write_str(text)?,
            Some(Piece::Hole(_, spec)) => match next() {
                Ok(value) => write_value(out, value, spec, symbols)?,
                Err(error) => write!(out, "<{error}>")?,
            },
            None => return out.write_str("<malformed format>"),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::Encoder;
    use crate::symtab::encode;
    use alloc::string::String;

    const FIELDS: [Field<'static>; 3] = [
        Field { name: "ip", kind: FieldKind::U64 },
        Field { name: "n", kind: FieldKind::I64 },
        Field { name: "s", kind: FieldKind::Str },
    ];

    fn payload(ip: u64) -> alloc::vec::Vec<u8> {
        let mut buf = [0u8; 64];
        let mut enc = Encoder::new(&mut buf);
        crate::field::FieldValue::encode(&ip, &mut enc);
        crate::field::FieldValue::encode(&-1i64, &mut enc);
        crate::field::FieldValue::encode(&"x", &mut enc);
        enc.bytes().to_vec()
    }

    /// The placeholders as [`pieces`] reads them: their number, `None` if one is
    /// malformed.
    fn holes(format: &str) -> Option<usize> {
        pieces(format).try_fold(0, |n, piece| match piece? {
            Piece::Hole(..) => Some(n + 1),
            Piece::Text(_) => Some(n),
        })
    }

    #[test]
    fn placeholders_are_counted_at_compile_time_as_they_are_read() {
        for (format, expected) in [
            ("plain", Some(0)),
            ("{} and {:x} and {name:#x} at {ip:sym}", Some(4)),
            ("{{literal}} {}", Some(1)),
            ("{", None),
            ("}", None),
            ("{:d}", None),
            ("{a{b}", Some(1)),
            ("}}{}}}", Some(1)),
        ] {
            assert_eq!(placeholders(format, true), expected, "{format}");
            assert_eq!(holes(format), expected, "{format}");
        }
        // Positional only: a name is refused.
        assert_eq!(placeholders("{} {:x} {{}}", false), Some(2));
        assert_eq!(placeholders("{ip:sym}", false), None);
    }

    proptest::proptest! {
        #[test]
        #[cfg_attr(miri, ignore = "single-threaded safe code, run natively")]
        fn placeholders_agree_with_the_reader(format in "[{}:x#symab ]{0,12}") {
            proptest::prop_assert_eq!(placeholders(&format, true), holes(&format));
        }
    }

    #[test]
    fn sym_prints_a_code_address_by_name_where_symbols_are_known() {
        let table = encode([(0x100, 0x120, "f")]);
        let table = SymbolTable::parse(&table).unwrap();
        let render_to = |format: &str, ip: u64, symbols| {
            let mut text = String::new();
            render(&mut text, format, &FIELDS, &payload(ip), symbols).unwrap();
            text
        };
        assert_eq!(render_to("at {ip:sym}", 0x104, Some(&table)), "at f+0x4");
        assert_eq!(render_to("at {:sym}", 0x104, Some(&table)), "at f+0x4");
        assert_eq!(render_to("at {ip:sym}", 0x120, Some(&table)), "at 0x120");
        assert_eq!(render_to("at {ip:sym}", 0x104, None), "at 0x104");
        assert_eq!(render_to("at {ip:#x}", 0x104, Some(&table)), "at 0x104");
        let values = [Value::Unsigned(0x104), Value::Signed(-1), Value::Str("x")];
        let compiled = Compiled::new("{ip:sym} {n} {s} {t}", &FIELDS);
        let mut text = String::new();
        compiled.render(&mut text, &values, DecodeError::Truncated, Some(&table)).unwrap();
        assert_eq!(text, "f+0x4 -1 x <no field t>");
        text.clear();
        compiled.render(&mut text, &values[..1], DecodeError::Invalid, None).unwrap();
        assert_eq!(text, "0x104 <invalid field value> <invalid field value> <no field t>");
    }

    #[test]
    fn sym_takes_unsigned_integer_fields_only() {
        assert_eq!(validate("{ip:sym} {n} {s}", &FIELDS), Ok(()));
        assert_eq!(validate("{:sym} {:sym}", &FIELDS[..1]), Ok(()));
        let refusal = Err("`:sym` takes an unsigned integer field (a code address)");
        assert_eq!(validate("{n:sym}", &FIELDS), refusal);
        assert_eq!(validate("{s:sym}", &FIELDS), refusal);
        assert_eq!(validate("{ip} {:sym}", &FIELDS), Ok(()));
        assert_eq!(validate("{:x} {:sym}", &FIELDS), refusal);
        assert_eq!(validate("{ip:syms}", &FIELDS), Err("malformed placeholder"));
        assert_eq!(address_fields("{n} {ip:sym} {s}", &FIELDS), [0]);
        assert_eq!(address_fields("{:sym} {n:x} {ip:sym}", &FIELDS), [0, 0]);
        assert!(address_fields("{ip:#x}", &FIELDS).is_empty());
    }
}
