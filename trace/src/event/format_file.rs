//! Event `format` files and the `header_page` / `header_event` texts, in the exact
//! syntax libtraceevent parses (what trace-cmd, KernelShark and perf read), and the
//! record layout they describe.
//!
//! # The ftrace layout
//!
//! A ring record stores an event's fields packed in declaration order with strings
//! inline behind a 2-byte length (see [`crate::field`]), so a field after a string has
//! no fixed offset and libtraceevent cannot describe it. The format files therefore
//! describe the *ftrace layout*, the one Linux's events use, and records are converted
//! to it when they leave the tracer in a binary form meant for those tools (the host's
//! `trace.dat` writer, with [`encode_record`]):
//!
//! | offset | field |
//! |---|---|
//! | 0 | `unsigned short common_type`: the event id |
//! | 2 | `unsigned char common_flags`: Linux's bits from the writer's context (irqs off 0x01, hardirq 0x08, NMI 0x40) |
//! | 3 | `unsigned char common_preempt_count`: the interrupt nesting depth |
//! | 4 | `int common_pid`: the task id of the text's task column ([`crate::text::Task`]) |
//! | 8.. | the fields in declaration order, each at its natural (C) alignment |
//! | end of the fixed part | string bytes, each followed by a NUL |
//!
//! A string field is a `__data_loc char[]`: a 32-bit word in the fixed part holding
//! the offset of the string's bytes in the record (low 16 bits) and their length with
//! the NUL (high 16 bits). `bool` is one byte, a byte array `unsigned char
//! NAME[N]`, signed 8- and 16-bit integers an `int` (libtraceevent does not
//! sign-extend narrower fields), a `char` its UTF-8 bytes in a NUL-padded
//! `char NAME[5]`.
//!
//! The `print fmt:` line is the event's format string in C printf syntax with
//! `REC->field` arguments: integers in decimal or hex as the placeholder asks,
//! `bool` through `__print_symbolic`, strings through `__get_str`, byte arrays
//! through `__print_hex_str`. An event whose format string is empty prints
//! `name=value` for each field, as the tracer's own text does.
//!
//! Records whose contents are not described by fields (printk call sites, whose
//! arguments carry their own types) are written as *text events*: one
//! `__data_loc char[] msg` field holding the rendered text ([`write_text_format`],
//! [`encode_text_record`]).
//!
//! Four of the tracer's events leave in Linux's own layout rather than their
//! fields', so that the tools' displays of them read them ([`Linux`]):
//! `ftrace:funcgraph_exit` (Linux's `calltime` and `rettime` from the record's time
//! and its `duration`), `ftrace:kernel_stack` (`int size` and
//! `unsigned long caller[8]`) and `ftrace:print` (`unsigned long ip`, then the text
//! to the record's end, printed as `%ps: %s`: the ip is [`MARK_WRITE_IP`], which a
//! trace.dat's kallsyms names [`crate::text::MARK_WRITE`]), and `ftrace:raw_data`
//! (`unsigned int id`, then the data's bytes to the record's end).
//! [`write_event_format`]
//! writes every event's format file accordingly.

use crate::context::{Activity, Context};
use crate::event::format::{Piece, Spec, pieces};
use crate::field::{Field, FieldKind, Value};
use crate::text::Task;
use alloc::collections::BTreeSet;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt::{self, Write};

/// Bytes of the common fields at the start of every record.
pub const COMMON_SIZE: usize = 8;

/// The name of a text event's one field.
pub const TEXT_FIELD: &str = "msg";

/// Where a field sits in the ftrace layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// Offset from the start of the record.
    pub offset: usize,
    /// Bytes in the fixed part (4 for a string: its `__data_loc` word).
    pub size: usize,
}

/// Size and alignment of a field kind in the fixed part. Signed 8- and 16-bit
/// integers take an `int` (libtraceevent does not sign-extend narrower fields); a
/// `char` takes its UTF-8 bytes in a NUL-padded `char[5]`, printed with `%s`.
const fn size_align(kind: FieldKind) -> (usize, usize) {
    match kind {
        FieldKind::U8 | FieldKind::Bool => (1, 1),
        FieldKind::U16 => (2, 2),
        FieldKind::U32 | FieldKind::I8 | FieldKind::I16 | FieldKind::I32 | FieldKind::Str => (4, 4),
        FieldKind::U64 | FieldKind::I64 => (8, 8),
        FieldKind::Char => (CHAR_SIZE, 1),
        FieldKind::Bytes(n) => (n as usize, 1),
    }
}

/// Bytes of a `char` field: the longest UTF-8 encoding and a NUL.
const CHAR_SIZE: usize = 5;

/// The slots of `fields`, in declaration order.
pub fn slots<'a>(fields: &'a [Field<'a>]) -> impl Iterator<Item = Slot> + 'a {
    let mut at = COMMON_SIZE;
    fields.iter().map(move |field| {
        let (size, align) = size_align(field.kind);
        let offset = at.next_multiple_of(align);
        at = offset + size;
        Slot { offset, size }
    })
}

/// Bytes of the fixed part: the common fields and every field's slot.
pub fn fixed_size(fields: &[Field<'_>]) -> usize {
    slots(fields).last().map_or(COMMON_SIZE, |s| s.offset + s.size)
}

/// The C type of a field as the format file declares it (before the name; byte
/// arrays take `[N]` after it).
fn c_type(kind: FieldKind) -> &'static str {
    match kind {
        FieldKind::U8 | FieldKind::Bytes(_) => "unsigned char",
        FieldKind::U16 => "unsigned short",
        FieldKind::U32 => "unsigned int",
        FieldKind::U64 => "unsigned long long",
        FieldKind::I8 | FieldKind::I16 | FieldKind::I32 => "int",
        FieldKind::Char => "char",
        FieldKind::I64 => "long long",
        FieldKind::Bool => "bool",
        FieldKind::Str => "__data_loc char[]",
    }
}

const fn is_signed(kind: FieldKind) -> bool {
    matches!(kind, FieldKind::I8 | FieldKind::I16 | FieldKind::I32 | FieldKind::I64)
}

/// One `field:` line; `len` is a byte array's length.
fn write_field(
    out: &mut dyn Write,
    ty: &str,
    name: impl fmt::Display,
    len: Option<u16>,
    slot: Slot,
    signed: bool,
) -> fmt::Result {
    write!(out, "\tfield:{ty} {name}")?;
    if let Some(len) = len {
        write!(out, "[{len}]")?;
    }
    writeln!(out, ";\toffset:{};\tsize:{};\tsigned:{};", slot.offset, slot.size, u8::from(signed))
}

/// Every record's common fields, as Linux's: C type, name, offset, size, signed.
const COMMON_FIELDS: [(&str, &str, usize, usize, bool); 4] = [
    ("unsigned short", "common_type", 0, 2, false),
    ("unsigned char", "common_flags", 2, 1, false),
    ("unsigned char", "common_preempt_count", 3, 1, false),
    ("int", "common_pid", 4, 4, true),
];

fn write_head(out: &mut dyn Write, name: &str, id: u16) -> fmt::Result {
    writeln!(out, "name: {name}")?;
    writeln!(out, "ID: {id}")?;
    writeln!(out, "format:")?;
    for (ty, field, offset, size, signed) in COMMON_FIELDS {
        write_field(out, ty, field, None, Slot { offset, size }, signed)?;
    }
    writeln!(out)
}

/// The names of the fields, the common ones left out, that
/// [`write_event_format`] declares for an event of these names and fields: Linux's
/// layout's, or the fields' own as unique C names.
pub fn field_names(system: &str, name: &str, fields: &[Field<'_>]) -> Vec<String> {
    let linux: &[&str] = match Linux::of(system, name, fields) {
        Some(Linux::GraphExit) => &["func", "depth", "overrun", "calltime", "rettime"],
        Some(Linux::Stack(_)) => &["size", "caller"],
        Some(Linux::Print) => &["ip", "buf"],
        Some(Linux::RawData) => &["id", "buf"],
        None => {
            let common = COMMON_FIELDS.map(|(_, name, ..)| name);
            return unique_c_names(fields.iter().map(|f| f.name), &common);
        }
    };
    linux.iter().map(|&name| String::from(name)).collect()
}

/// Writes the `format` file of an event with these fields and format string.
pub fn write_format(
    out: &mut dyn Write,
    name: &str,
    id: u16,
    fields: &[Field<'_>],
    format: &str,
) -> fmt::Result {
    write_head(out, name, id)?;
    let common = COMMON_FIELDS.map(|(_, name, ..)| name);
    let names = unique_c_names(fields.iter().map(|f| f.name), &common);
    for ((field, slot), name) in fields.iter().zip(slots(fields)).zip(&names) {
        let len = match field.kind {
            FieldKind::Bytes(n) => Some(n),
            FieldKind::Char => Some(CHAR_SIZE as u16),
            _ => None,
        };
        let (ty, signed) = (c_type(field.kind), is_signed(field.kind));
        write_field(out, ty, name, len, slot, signed)?;
    }
    write!(out, "\nprint fmt: \"")?;
    let mut args = Vec::new();
    let arg = |i: usize| Arg { field: &fields[i], name: &names[i] };
    if format.is_empty() || crate::event::format::validate(format, fields).is_err() {
        for (i, field) in fields.iter().enumerate() {
            let sep = if i == 0 { "" } else { " " };
            write!(out, "{sep}{}=", escaped(field.name, false))?;
            args.push(conversion(out, arg(i), Spec::Plain)?);
        }
    } else {
        let mut next = 0;
        let mut pieces = pieces(format).flatten().peekable();
        while let Some(piece) = pieces.next() {
            match piece {
                Piece::Text(text) => write!(out, "{}", escaped(text, pieces.peek().is_none()))?,
                Piece::Hole(name, spec) => {
                    let field = if name.is_empty() {
                        next += 1;
                        Some(next - 1).filter(|&i| i < fields.len())
                    } else {
                        fields.iter().position(|f| f.name == name)
                    };
                    match field {
                        Some(i) => args.push(conversion(out, arg(i), spec)?),
                        // More `{}` than fields: printed as the tracer does.
                        None => write!(out, "<no field >")?,
                    }
                }
            }
        }
    }
    write!(out, "\"")?;
    for arg in args {
        write!(out, ", ")?;
        arg.write(out)?;
    }
    writeln!(out)
}

/// An event whose records leave the tracer in Linux's layout instead of its
/// fields', so that the tools' own displays of it read them (trace-cmd's function
/// graph and stack traces): its `format` file describes that layout
/// ([`write_event_format`]) and [`Linux::values`] converts a record's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Linux {
    /// `ftrace:funcgraph_exit`, recorded as `func`, `depth`, `duration`: Linux's
    /// `func`, `depth`, `overrun` (0), `calltime` and `rettime` (the record's time
    /// less the duration, and the record's time).
    GraphExit,
    /// `ftrace:kernel_stack`, recorded as `depth` and `ip0`..`ipN`: Linux's
    /// `int size` and `unsigned long caller[N+1]`, `-1` after the frames recorded
    /// (where trace-cmd's display stops).
    Stack(usize),
    /// `ftrace:print` (`trace_marker`), recorded as `buf`: Linux's `ip`
    /// ([`MARK_WRITE_IP`]) and `char buf[]`, the text and a NUL to the record's end.
    Print,
    /// `ftrace:raw_data` (`trace_marker_raw`), recorded as `id` and `buf`, the data
    /// as text (` HH` a byte): Linux's `unsigned int id` and `unsigned char buf[]`,
    /// the data's bytes to the record's end.
    RawData,
}

/// The `ip` of a marker's record in Linux's layout ([`Linux::Print`]): where a
/// trace.dat's kallsyms puts [`crate::text::MARK_WRITE`], so that `%ps` prints that
/// name. Non-canonical on x86_64, so no function of the kernel is there.
pub const MARK_WRITE_IP: u64 = 0x8000_0000_0000_0000;

/// The names of a `kernel_stack`'s `caller` slots, as [`Linux::fields`] gives them.
const CALLERS: [&str; 8] =
    ["caller0", "caller1", "caller2", "caller3", "caller4", "caller5", "caller6", "caller7"];

impl Linux {
    /// Which, if any, an event of these names and fields is written as.
    pub fn of(system: &str, name: &str, fields: &[Field<'_>]) -> Option<Linux> {
        use FieldKind::{U8, U64};
        let kinds = |kinds: &[FieldKind]| fields.iter().map(|f| f.kind).eq(kinds.iter().copied());
        let names = |names: &[&str]| fields.iter().map(|f| f.name).eq(names.iter().copied());
        match (system, name, fields.split_first()) {
            ("ftrace", "funcgraph_exit", _)
                if names(&["func", "depth", "duration"]) && kinds(&[U64; 3]) =>
            {
                Some(Linux::GraphExit)
            }
            ("ftrace", "kernel_stack", Some((depth, ips)))
                if depth.name == "depth"
                    && depth.kind == U8
                    && (1..=CALLERS.len()).contains(&ips.len())
                    && ips.iter().enumerate().all(|(i, f)| {
                        let n = f.name.strip_prefix("ip").and_then(|n| n.parse::<usize>().ok());
                        f.kind == U64 && n == Some(i)
                    }) =>
            {
                Some(Linux::Stack(ips.len()))
            }
            ("ftrace", "print", _) if names(&["buf"]) && kinds(&[FieldKind::Str]) => {
                Some(Linux::Print)
            }
            ("ftrace", "raw_data", _)
                if names(&["id", "buf"]) && kinds(&[FieldKind::U32, FieldKind::Str]) =>
            {
                Some(Linux::RawData)
            }
            _ => None,
        }
    }

    /// The fixed fields of Linux's layout, in the form [`encode_record`] takes (a
    /// `caller` array as one field per slot; a marker's text follows them, see
    /// [`Linux::encode`]).
    pub fn fields(self) -> Vec<Field<'static>> {
        use FieldKind::{I32, U32, U64};
        match self {
            Linux::GraphExit => {
                let fields = [
                    ("func", U64),
                    ("depth", U64),
                    ("overrun", U32),
                    ("calltime", U64),
                    ("rettime", U64),
                ];
                fields.into_iter().map(|(name, kind)| Field { name, kind }).collect()
            }
            Linux::Stack(frames) => core::iter::once(Field { name: "size", kind: I32 })
                .chain(CALLERS[..frames].iter().map(|&name| Field { name, kind: U64 }))
                .collect(),
            Linux::Print => [Field { name: "ip", kind: U64 }].to_vec(),
            Linux::RawData => [Field { name: "id", kind: U32 }].to_vec(),
        }
    }

    /// A record's values (its fields', as recorded, at time `ts`) in Linux's
    /// layout, those of [`Linux::fields`]; `None` if they are not what the event
    /// records.
    pub fn values<'v>(self, values: &[Value<'v>], ts: u64) -> Option<Vec<Value<'v>>> {
        match self {
            Linux::Print => match values {
                [Value::Str(_)] => Some([Value::Unsigned(MARK_WRITE_IP)].to_vec()),
                _ => None,
            },
            Linux::RawData => match values {
                [id @ Value::Unsigned(_), Value::Str(data)] if raw_data(data).is_some() => {
                    Some([*id].to_vec())
                }
                _ => None,
            },
            Linux::GraphExit => {
                let [Value::Unsigned(func), Value::Unsigned(depth), Value::Unsigned(took)] =
                    *values
                else {
                    return None;
                };
                let linux = [func, depth, 0, ts.saturating_sub(took), ts];
                Some(linux.into_iter().map(Value::Unsigned).collect())
            }
            Linux::Stack(frames) => {
                let (&Value::Unsigned(depth), ips) = values.split_first()? else { return None };
                if ips.len() != frames {
                    return None;
                }
                let depth = usize::try_from(depth).unwrap_or(usize::MAX).min(frames);
                let mut linux = Vec::with_capacity(1 + frames);
                linux.push(Value::Signed(depth as i64));
                for (i, ip) in ips.iter().enumerate() {
                    let &Value::Unsigned(ip) = ip else { return None };
                    linux.push(Value::Unsigned(if i < depth { ip } else { u64::MAX }));
                }
                Some(linux)
            }
        }
    }

    /// Appends the record of event `id` written at `origin` and time `ts` with
    /// `values` (its fields', as recorded) in Linux's layout. Nothing is appended on
    /// error.
    pub fn encode(
        self,
        id: u16,
        origin: Origin,
        values: &[Value<'_>],
        ts: u64,
        out: &mut Vec<u8>,
    ) -> Result<(), LayoutError> {
        let linux = self.values(values, ts).ok_or(LayoutError::Type)?;
        encode_record(id, origin, &self.fields(), &linux, out)?;
        match (self, values) {
            (Linux::Print, [Value::Str(text)]) => {
                out.extend_from_slice(text.as_bytes());
                out.push(0);
            }
            (Linux::RawData, [_, Value::Str(data)]) => {
                out.extend(raw_data(data).into_iter().flatten())
            }
            _ => {}
        }
        Ok(())
    }
}

/// The bytes a raw marker's `buf` text holds, ` HH` each; `None` if it is not so.
fn raw_data(text: &str) -> Option<impl Iterator<Item = u8> + '_> {
    let bytes = text.as_bytes();
    let triples = bytes.chunks(3);
    let byte = |triple: &[u8]| match *triple {
        [b' ', high, low] => {
            let digit = |d: u8| char::from(d).to_digit(16);
            Some((digit(high)? << 4 | digit(low)?) as u8)
        }
        _ => None,
    };
    triples.clone().all(|t| byte(t).is_some()).then(|| triples.filter_map(byte))
}

/// Writes an event's `format` file as its records leave the tracer: in Linux's
/// layout for the events of [`Linux`], in its fields' otherwise ([`write_format`]).
pub fn write_event_format(
    out: &mut dyn Write,
    system: &str,
    name: &str,
    id: u16,
    fields: &[Field<'_>],
    format: &str,
) -> fmt::Result {
    match Linux::of(system, name, fields) {
        Some(Linux::Stack(frames)) => write_stack_format(out, name, id, frames),
        Some(Linux::Print) => write_print_format(out, name, id),
        Some(Linux::RawData) => write_raw_data_format(out, name, id),
        Some(linux @ Linux::GraphExit) => {
            let format = "func={func:#x} depth={depth} calltime={calltime} rettime={rettime}";
            write_format(out, name, id, &linux.fields(), format)
        }
        None => write_format(out, name, id, fields, format),
    }
}

/// Writes Linux's `kernel_stack` format file: `int size` (the frames recorded) at
/// offset 8, `unsigned long caller[frames]` at 16, and Linux's `print fmt`.
fn write_stack_format(out: &mut dyn Write, name: &str, id: u16, frames: usize) -> fmt::Result {
    write_head(out, name, id)?;
    write_field(out, "int", "size", None, Slot { offset: COMMON_SIZE, size: 4 }, true)?;
    let callers = Slot { offset: COMMON_SIZE + 8, size: 8 * frames };
    write_field(out, "unsigned long", "caller", Some(frames as u16), callers, false)?;
    write!(out, "\nprint fmt: \"")?;
    (0..frames).try_for_each(|_| write!(out, "\\t=> %ps\\n"))?;
    write!(out, "\"")?;
    (0..frames).try_for_each(|i| write!(out, ", (void *)REC->caller[{i}]"))?;
    writeln!(out)
}

/// Writes Linux's `print` format file: `unsigned long ip` at offset 8, the text as
/// `char buf[]` from 16 to the record's end, and Linux's `print fmt`.
fn write_print_format(out: &mut dyn Write, name: &str, id: u16) -> fmt::Result {
    write_head(out, name, id)?;
    write_field(out, "unsigned long", "ip", None, Slot { offset: COMMON_SIZE, size: 8 }, false)?;
    write_field(out, "char", "buf[]", None, Slot { offset: COMMON_SIZE + 8, size: 0 }, true)?;
    writeln!(out, "\nprint fmt: \"%ps: %s\", (void *)REC->ip, REC->buf")
}

/// Writes Linux's `raw_data` format file: `unsigned int id` at offset 8, the data
/// as `unsigned char buf[]` from 12 to the record's end, and Linux's `print fmt`.
fn write_raw_data_format(out: &mut dyn Write, name: &str, id: u16) -> fmt::Result {
    write_head(out, name, id)?;
    write_field(out, "unsigned int", "id", None, Slot { offset: COMMON_SIZE, size: 4 }, false)?;
    let buf = Slot { offset: COMMON_SIZE + 4, size: 0 };
    write_field(out, "unsigned char", "buf[]", None, buf, false)?;
    writeln!(out, "\nprint fmt: \"id:%04x %08x\", REC->id, (int)REC->buf[0]")
}

/// Writes the `format` file of a text event (one string field, [`TEXT_FIELD`]).
pub fn write_text_format(out: &mut dyn Write, name: &str, id: u16) -> fmt::Result {
    write_head(out, name, id)?;
    let slot = Slot { offset: COMMON_SIZE, size: 4 };
    write_field(out, c_type(FieldKind::Str), TEXT_FIELD, None, slot, false)?;
    writeln!(out, "\nprint fmt: \"%s\", __get_str({TEXT_FIELD})")
}

/// An argument of the `print fmt:` line: a field, and its name in the format file.
struct Arg<'a> {
    field: &'a Field<'a>,
    name: &'a str,
}

impl Arg<'_> {
    fn write(&self, out: &mut dyn Write) -> fmt::Result {
        let name = self.name;
        match self.field.kind {
            FieldKind::Str => write!(out, "__get_str({name})"),
            FieldKind::Bytes(n) => write!(out, "__print_hex_str(REC->{name}, {n})"),
            FieldKind::Bool => {
                write!(out, "__print_symbolic(REC->{name}, {{ 0, \"false\" }}, {{ 1, \"true\" }})")
            }
            _ => write!(out, "REC->{name}"),
        }
    }
}

/// Writes the printf conversion of one placeholder and returns its argument.
fn conversion<'a>(out: &mut dyn Write, arg: Arg<'a>, spec: Spec) -> Result<Arg<'a>, fmt::Error> {
    let field = arg.field;
    let long = matches!(field.kind, FieldKind::U64 | FieldKind::I64);
    let ll = if long { "ll" } else { "" };
    match (field.kind, spec) {
        (FieldKind::Str | FieldKind::Bytes(_) | FieldKind::Bool | FieldKind::Char, _) => {
            out.write_str("%s")?
        }
        // libtraceevent names the address from the file's kallsyms:
        // `function+0xoffset`.
        (_, Spec::Symbol) => out.write_str("%pF")?,
        (_, Spec::Hex) => write!(out, "%{ll}x")?,
        (_, Spec::AltHex) => write!(out, "0x%{ll}x")?,
        (kind, Spec::Plain) if is_signed(kind) => write!(out, "%{ll}d")?,
        (_, Spec::Plain) => write!(out, "%{ll}u")?,
    }
    Ok(arg)
}

/// A name as libtraceevent reads one (a field's, an event's, a system's): letters,
/// digits and `_`, anything else `_`; `_` for an empty one.
pub fn c_name(name: &str) -> impl fmt::Display + '_ {
    struct CName<'a>(&'a str);
    impl fmt::Display for CName<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            if self.0.is_empty() {
                return f.write_char('_');
            }
            let clean = |c: char| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' };
            self.0.chars().try_for_each(|c| f.write_char(clean(c)))
        }
    }
    CName(name)
}

/// `names` as C names ([`c_name`]), each unique among them and `taken`: a name
/// that is a C name already keeps it, if it is the first to (so that a filter's
/// name for a field is its name in the format file); another gets the first of
/// `_2`, `_3`, ... after its C name that is free.
pub fn unique_c_names<'a>(names: impl Iterator<Item = &'a str>, taken: &[&str]) -> Vec<String> {
    let names: Vec<&str> = names.collect();
    let mut seen: BTreeSet<String> = taken.iter().map(|&t| t.into()).collect();
    let kept: Vec<bool> = names
        .iter()
        .map(|&name| c_name(name).to_string() == name && seen.insert(name.into()))
        .collect();
    let unique = |(&name, kept): (&&str, bool)| {
        if kept {
            return String::from(name);
        }
        let base = c_name(name).to_string();
        let mut unique = base.clone();
        let mut n = 2u64;
        while !seen.insert(unique.clone()) {
            unique = format!("{base}_{n}");
            n += 1;
        }
        unique
    };
    names.iter().zip(kept).map(unique).collect()
}

/// Text of a format string as a C string literal's contents, `%` doubled, and
/// printable ASCII only: other characters (control characters, NUL, non-ASCII),
/// which libtraceevent does not parse, as the text `\u{HEX}` (its backslash
/// escaped, so that trace-cmd prints it so). With `closing` (the literal's quote
/// follows), a last backslash is written so too: libtraceevent reads `\\"` as a
/// backslash and a quote that does not close the literal.
fn escaped(text: &str, closing: bool) -> impl fmt::Display + '_ {
    struct Escaped<'a>(&'a str, bool);
    impl fmt::Display for Escaped<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            let mut chars = self.0.chars().peekable();
            while let Some(c) = chars.next() {
                match c {
                    '%' => f.write_str("%%")?,
                    '"' => f.write_str("\\\"")?,
                    '\\' if self.1 && chars.peek().is_none() => f.write_str("\\\\u{5c}")?,
                    '\\' => f.write_str("\\\\")?,
                    '\n' => f.write_str("\\n")?,
                    '\t' => f.write_str("\\t")?,
                    ' '..='~' => f.write_char(c)?,
                    c => write!(f, "\\\\u{{{:x}}}", u32::from(c))?,
                }
            }
            Ok(())
        }
    }
    Escaped(text, closing)
}

/// Why values cannot be written in an event's ftrace layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutError {
    /// There are not as many values as fields.
    Count,
    /// A value's type does not match its field's (or does not fit it).
    Type,
    /// The strings make the record longer than a `__data_loc` can address (64 KiB).
    TooLong,
}

impl core::error::Error for LayoutError {}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LayoutError::Count => "the values do not match the event's fields in number",
            LayoutError::Type => "a value does not match its field's type",
            LayoutError::TooLong => "the record's strings exceed 64 KiB",
        })
    }
}

/// Where a record was written, for its common fields: the writer's context and CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The writer's context.
    pub context: Context,
    /// The writer's CPU.
    pub cpu: usize,
}

/// Linux's `common_flags` bits.
const FLAG_IRQS_OFF: u8 = 0x01;
const FLAG_HARDIRQ: u8 = 0x08;
const FLAG_NMI: u8 = 0x40;

impl Origin {
    /// `common_flags`: Linux's bits for the writer's context.
    pub fn flags(self) -> u8 {
        let context = self.context;
        (match context.activity() {
            Activity::Irq { .. } => FLAG_HARDIRQ,
            Activity::Nmi { in_irq: false } => FLAG_NMI,
            Activity::Nmi { in_irq: true } => FLAG_NMI | FLAG_HARDIRQ,
            Activity::Idle | Activity::Task | Activity::Unknown => 0,
        }) | if context.irqs_off() { FLAG_IRQS_OFF } else { 0 }
    }

    /// `common_preempt_count`: the interrupt nesting depth.
    pub fn preempt_count(self) -> u8 {
        self.context.depth()
    }

    /// `common_pid`: the id of the text's task column.
    pub fn pid(self) -> i32 {
        i32::try_from(Task::of(self.context, self.cpu).pid).unwrap_or(i32::MAX)
    }
}

fn common(id: u16, origin: Origin, out: &mut Vec<u8>) {
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&[origin.flags(), origin.preempt_count()]);
    out.extend_from_slice(&origin.pid().to_le_bytes());
}

/// The bytes of a fixed-size value (little endian, signed ones sign-extended), or
/// `None` if it is not of `kind` or does not fit it.
fn scalar_bytes(kind: FieldKind, value: &Value<'_>) -> Option<[u8; 8]> {
    let bits = |size: u32| 8 * size;
    let raw = match (kind, *value) {
        (FieldKind::U8 | FieldKind::U16 | FieldKind::U32 | FieldKind::U64, Value::Unsigned(v)) => {
            let size = kind.fixed_size()? as u32;
            (size == 8 || v >> bits(size) == 0).then_some(v)?
        }
        (FieldKind::I8 | FieldKind::I16 | FieldKind::I32 | FieldKind::I64, Value::Signed(v)) => {
            let size = kind.fixed_size()? as u32;
            let top = v >> (bits(size) - 1);
            (size == 8 || top == 0 || top == -1).then_some(v as u64)?
        }
        (FieldKind::Bool, Value::Bool(b)) => u64::from(b),
        (FieldKind::Char, Value::Char(c)) => {
            let mut bytes = [0; 8];
            c.encode_utf8(&mut bytes);
            return Some(bytes);
        }
        _ => return None,
    };
    Some(raw.to_le_bytes())
}

/// Appends the record of event `id` written at `origin` in its ftrace layout: the
/// common fields, the values in their slots, then the strings. Nothing is appended
/// on error.
pub fn encode_record(
    id: u16,
    origin: Origin,
    fields: &[Field<'_>],
    values: &[Value<'_>],
    out: &mut Vec<u8>,
) -> Result<(), LayoutError> {
    if fields.len() != values.len() {
        return Err(LayoutError::Count);
    }
    let start = out.len();
    let result = encode_into(id, origin, fields, values, start, out);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

fn encode_into(
    id: u16,
    origin: Origin,
    fields: &[Field<'_>],
    values: &[Value<'_>],
    start: usize,
    out: &mut Vec<u8>,
) -> Result<(), LayoutError> {
    let fixed = fixed_size(fields);
    common(id, origin, out);
    out.resize(start + fixed, 0);
    let mut dynamic = fixed;
    for ((field, slot), value) in fields.iter().zip(slots(fields)).zip(values) {
        let at = start + slot.offset;
        match (field.kind, value) {
            (FieldKind::Str, Value::Str(s)) => {
                let len = s.len() + 1;
                let loc = u32::try_from(dynamic)
                    .ok()
                    .filter(|_| dynamic <= 0xffff && len <= 0xffff)
                    .ok_or(LayoutError::TooLong)?;
                let word = loc | ((len as u32) << 16);
                out[at..at + 4].copy_from_slice(&word.to_le_bytes());
                out.extend_from_slice(s.as_bytes());
                out.push(0);
                dynamic += len;
            }
            (FieldKind::Bytes(n), Value::Bytes(b)) if b.len() == usize::from(n) => {
                out[at..at + b.len()].copy_from_slice(b);
            }
            (kind, value) => {
                let bytes = scalar_bytes(kind, value).ok_or(LayoutError::Type)?;
                out[at..at + slot.size].copy_from_slice(&bytes[..slot.size]);
            }
        }
    }
    Ok(())
}

/// Appends the record of text event `id` written at `origin` holding `text` (cut at
/// a character boundary to what a `__data_loc` can address).
pub fn encode_text_record(id: u16, origin: Origin, text: &str, out: &mut Vec<u8>) {
    let mut end = text.len().min(0xffff - COMMON_SIZE - 5);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let start = out.len();
    common(id, origin, out);
    let loc = (COMMON_SIZE + 4) as u32 | ((end as u32 + 1) << 16);
    out.extend_from_slice(&loc.to_le_bytes());
    out.extend_from_slice(&text.as_bytes()[..end]);
    out.push(0);
    debug_assert_eq!(out.len() - start, COMMON_SIZE + 4 + end + 1);
}

/// Writes `events/header_page`: the header of a ring page of `page_size` bytes as
/// trace.dat carries them (64-bit timestamp, 64-bit commit, then the data).
pub fn write_header_page(out: &mut dyn Write, page_size: usize) -> fmt::Result {
    writeln!(out, "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;")?;
    writeln!(out, "\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;")?;
    writeln!(out, "\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;")?;
    writeln!(
        out,
        "\tfield: char data;\toffset:16;\tsize:{};\tsigned:1;",
        page_size.saturating_sub(16)
    )
}

/// Writes `events/header_event`: the 32-bit header of each record on a page.
pub fn write_header_event(out: &mut dyn Write) -> fmt::Result {
    out.write_str(
        "# compressed entry header\n\
         \ttype_len    :    5 bits\n\
         \ttime_delta  :   27 bits\n\
         \tarray       :   32 bits\n\
         \n\
         \tpadding     : type == 29\n\
         \ttime_extend : type == 30\n\
         \ttime_stamp : type == 31\n\
         \tdata max type_len  == 28\n",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;

    const FIELDS: [Field<'static>; 5] = [
        Field { name: "vector", kind: FieldKind::U8 },
        Field { name: "ip", kind: FieldKind::U64 },
        Field { name: "kind", kind: FieldKind::Str },
        Field { name: "delta", kind: FieldKind::I16 },
        Field { name: "head", kind: FieldKind::Bytes(3) },
    ];

    /// `field_names` is what each kind of format file declares, the common fields
    /// left out: an array's name without its length.
    #[test]
    fn field_names_are_those_the_format_file_declares() {
        let u64s = |names: &'static [&'static str]| -> Vec<Field<'static>> {
            names.iter().map(|&name| Field { name, kind: FieldKind::U64 }).collect()
        };
        let stack = [
            Field { name: "depth", kind: FieldKind::U8 },
            Field { name: "ip0", kind: FieldKind::U64 },
        ];
        let cases: [(&str, &str, Vec<Field<'static>>); 5] = [
            ("demo", "e", FIELDS.to_vec()),
            ("demo", "e", u64s(&["a-b", "a_b", "common_pid"])),
            ("ftrace", "funcgraph_exit", u64s(&["func", "depth", "duration"])),
            ("ftrace", "kernel_stack", stack.to_vec()),
            ("ftrace", "print", [Field { name: "buf", kind: FieldKind::Str }].to_vec()),
        ];
        for (system, name, fields) in cases {
            let mut text = String::new();
            write_event_format(&mut text, system, name, 1, &fields, "").unwrap();
            let declared: Vec<&str> = text
                .lines()
                .filter_map(|l| l.trim().strip_prefix("field:")?.split(';').next())
                .filter_map(|decl| decl.rsplit(' ').next())
                .map(|n| n.split('[').next().unwrap_or(n))
                .skip(COMMON_FIELDS.len())
                .collect();
            assert_eq!(field_names(system, name, &fields), declared, "{text}");
        }
    }

    #[test]
    fn fields_sit_at_natural_alignment_after_the_common_ones() {
        let offsets: Vec<(usize, usize)> = slots(&FIELDS).map(|s| (s.offset, s.size)).collect();
        assert_eq!(offsets, [(8, 1), (16, 8), (24, 4), (28, 4), (32, 3)]);
        assert_eq!(fixed_size(&FIELDS), 35);
        assert_eq!(fixed_size(&[]), COMMON_SIZE);
    }

    #[test]
    fn format_file_has_common_fields_c_types_and_a_printf_format() {
        let mut text = String::new();
        let format = "v={vector} ip={ip:#x} {kind} d={delta:x} 100% {head}";
        write_format(&mut text, "exception", 7, &FIELDS, format).unwrap();
        let expected = "name: exception\nID: 7\nformat:\n\
            \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
            \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
            \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
            \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
            \tfield:unsigned char vector;\toffset:8;\tsize:1;\tsigned:0;\n\
            \tfield:unsigned long long ip;\toffset:16;\tsize:8;\tsigned:0;\n\
            \tfield:__data_loc char[] kind;\toffset:24;\tsize:4;\tsigned:0;\n\
            \tfield:int delta;\toffset:28;\tsize:4;\tsigned:1;\n\
            \tfield:unsigned char head[3];\toffset:32;\tsize:3;\tsigned:0;\n\n\
            print fmt: \"v=%u ip=0x%llx %s d=%x 100%% %s\", REC->vector, REC->ip, \
            __get_str(kind), REC->delta, __print_hex_str(REC->head, 3)\n";
        assert_eq!(text, expected);
    }

    #[test]
    fn each_field_has_a_c_name_of_its_own_and_a_c_name_keeps_it() {
        let names = ["a b", "a_b", "", "common_pid", "x", "x", "a_b_2"];
        let unique = unique_c_names(names.into_iter(), &["common_pid"]);
        assert_eq!(unique, ["a_b_3", "a_b", "_", "common_pid_2", "x", "x_2", "a_b_2"]);
        // The print format names each by its own.
        let fields = [
            Field { name: "a-b", kind: FieldKind::U8 },
            Field { name: "a_b", kind: FieldKind::U8 },
        ];
        let mut text = String::new();
        write_format(&mut text, "e", 1, &fields, "{a-b} {a_b}").unwrap();
        assert!(text.contains("\tfield:unsigned char a_b_2;\toffset:8;"), "{text}");
        assert!(text.ends_with("\", REC->a_b_2, REC->a_b\n"), "{text}");
    }

    #[test]
    fn a_code_address_is_printed_by_libtraceevent_from_the_kallsyms() {
        let mut text = String::new();
        write_format(&mut text, "irqsoff", 3, &FIELDS, "at {ip:sym}").unwrap();
        assert!(text.ends_with("print fmt: \"at %pF\", REC->ip\n"), "{text}");
    }

    #[test]
    fn empty_or_broken_formats_print_every_field() {
        let fields = [
            Field { name: "ok", kind: FieldKind::Bool },
            Field { name: "c", kind: FieldKind::Char },
            Field { name: "n", kind: FieldKind::I64 },
        ];
        for format in ["", "{nope}", "{ok"] {
            let mut text = String::new();
            write_format(&mut text, "e", 1, &fields, format).unwrap();
            let fmt = text.lines().last().unwrap();
            assert_eq!(
                fmt,
                "print fmt: \"ok=%s c=%s n=%lld\", __print_symbolic(REC->ok, { 0, \"false\" }, \
                 { 1, \"true\" }), REC->c, REC->n"
            );
        }
        let mut text = String::new();
        write_format(&mut text, "q", 2, &[], "say \"hi\"\\\n{{}}").unwrap();
        assert!(text.ends_with("print fmt: \"say \\\"hi\\\"\\\\\\n{}\"\n"), "{text}");
    }

    #[test]
    fn records_follow_the_layout_the_format_file_describes() {
        let values = [
            Value::Unsigned(48),
            Value::Unsigned(0x1122_3344_5566_7788),
            Value::Str("ipi"),
            Value::Signed(-2),
            Value::Bytes(&[0xde, 0xad, 0xbe]),
        ];
        let mut out = vec![0xaa];
        let origin = Origin { context: Context::new(Activity::Irq { depth: 2 }, true), cpu: 1 };
        encode_record(9, origin, &FIELDS, &values, &mut out).unwrap();
        let rec = &out[1..];
        assert_eq!(rec.len(), 35 + 4);
        // Irqs off and hardirq, two handlers deep, pid 0 (the handler's).
        assert_eq!(&rec[..8], &[9, 0, 0x09, 2, 0, 0, 0, 0]);
        assert_eq!(rec[8], 48);
        assert_eq!(&rec[16..24], &0x1122_3344_5566_7788u64.to_le_bytes());
        let loc = u32::from_le_bytes(rec[24..28].try_into().unwrap());
        let (at, len) = ((loc & 0xffff) as usize, (loc >> 16) as usize);
        assert_eq!(&rec[at..at + len], b"ipi\0");
        assert_eq!(&rec[28..32], &(-2i32).to_le_bytes());
        assert_eq!(&rec[32..35], &[0xde, 0xad, 0xbe]);

        let mut text = Vec::new();
        let origin = Origin { context: Context::new(Activity::Task, false), cpu: 2 };
        encode_text_record(3, origin, "hello", &mut text);
        assert_eq!(&text[..8], &[3, 0, 0, 0, 3, 0, 0, 0], "thread context, pid 3 (work/2)");
        let loc = u32::from_le_bytes(text[8..12].try_into().unwrap());
        assert_eq!(loc, 12 | (6 << 16));
        assert_eq!(&text[12..], b"hello\0");
    }

    const ORIGIN: Origin = Origin { context: Context::TASK, cpu: 0 };

    #[test]
    fn mismatched_values_are_refused_and_append_nothing() {
        let mut out = vec![1, 2];
        let fields = &FIELDS[..1];
        assert_eq!(encode_record(1, ORIGIN, fields, &[], &mut out), Err(LayoutError::Count));
        let bad = [Value::Signed(1), Value::Unsigned(256), Value::Str("x"), Value::Bytes(&[1, 2])];
        for value in bad {
            assert_eq!(
                encode_record(1, ORIGIN, fields, &[value], &mut out),
                Err(LayoutError::Type)
            );
        }
        let head = [Field { name: "h", kind: FieldKind::Bytes(3) }];
        assert_eq!(
            encode_record(1, ORIGIN, &head, &[Value::Bytes(&[1])], &mut out),
            Err(LayoutError::Type)
        );
        let small = [Field { name: "s", kind: FieldKind::I8 }];
        assert_eq!(
            encode_record(1, ORIGIN, &small, &[Value::Signed(-129)], &mut out),
            Err(LayoutError::Type)
        );
        assert!(encode_record(1, ORIGIN, &small, &[Value::Signed(-128)], &mut out).is_ok());
        assert_eq!(out[..2], [1, 2]);
        let long = "x".repeat(70_000);
        let text = [Field { name: "s", kind: FieldKind::Str }];
        let mut out = Vec::new();
        assert_eq!(
            encode_record(1, ORIGIN, &text, &[Value::Str(&long)], &mut out),
            Err(LayoutError::TooLong)
        );
        assert!(out.is_empty());
        encode_text_record(1, ORIGIN, &long, &mut out);
        let loc = u32::from_le_bytes(out[8..12].try_into().unwrap()) as usize;
        assert_eq!((loc & 0xffff) + (loc >> 16), out.len());
    }

    #[test]
    fn header_files_match_linux_on_64_bit() {
        let mut page = String::new();
        write_header_page(&mut page, 4096).unwrap();
        assert!(page.contains("\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n"));
        assert!(page.ends_with("\tfield: char data;\toffset:16;\tsize:4080;\tsigned:1;\n"));
        let mut event = String::new();
        write_header_event(&mut event).unwrap();
        assert!(event.starts_with("# compressed entry header\n\ttype_len    :    5 bits\n"));
        assert!(event.contains("\ttime_extend : type == 30\n"));
    }

    #[test]
    fn markers_leave_in_linux_layout_printed_after_their_ip() {
        use crate::event::marker::MARKER;
        assert_eq!(Linux::of(MARKER.system, MARKER.name, MARKER.fields), Some(Linux::Print));
        let mut text = String::new();
        write_event_format(&mut text, "ftrace", "print", 5, MARKER.fields, MARKER.format).unwrap();
        assert!(text.ends_with(
            "\tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;\n\
             \tfield:char buf[];\toffset:16;\tsize:0;\tsigned:1;\n\n\
             print fmt: \"%ps: %s\", (void *)REC->ip, REC->buf\n"
        ));
        let mut record = vec![0xaa];
        Linux::Print.encode(5, ORIGIN, &[Value::Str("hello")], 7, &mut record).unwrap();
        assert_eq!(record[1..9], [5, 0, 0, 0, 1, 0, 0, 0], "shell-1 in a thread");
        assert_eq!(record[9..17], MARK_WRITE_IP.to_le_bytes());
        assert_eq!(&record[17..], b"hello\0");
        let wrong = Linux::Print.encode(5, ORIGIN, &[Value::Unsigned(1)], 7, &mut record);
        assert_eq!((wrong, record.len()), (Err(LayoutError::Type), 17 + 6));
    }

    #[test]
    fn graph_returns_and_stacks_leave_in_linux_layout() {
        use crate::tracer::{FUNCGRAPH_EXIT, STACK_TRACE};
        let of = |d: &crate::event::EventDescriptor| Linux::of(d.system, d.name, d.fields);
        assert_eq!(of(&FUNCGRAPH_EXIT), Some(Linux::GraphExit));
        assert_eq!(of(&STACK_TRACE), Some(Linux::Stack(8)));
        assert_eq!(Linux::of("ftrace", "funcgraph_exit", &FIELDS), None, "other fields");
        assert_eq!(Linux::of("other", "kernel_stack", STACK_TRACE.fields), None);

        // A return: its call `duration` before the record's time.
        let graph = [Value::Unsigned(0x1234), Value::Unsigned(2), Value::Unsigned(300)];
        let linux = Linux::GraphExit.values(&graph, 1000).unwrap();
        let expected = [0x1234, 2, 0, 700, 1000].map(Value::Unsigned);
        assert_eq!(linux, expected);
        assert_eq!(Linux::GraphExit.values(&graph[..2], 1000), None);
        let mut text = String::new();
        write_event_format(&mut text, "ftrace", "funcgraph_exit", 10, FUNCGRAPH_EXIT.fields, "")
            .unwrap();
        assert!(text.contains("\tfield:unsigned long long calltime;\toffset:32;\tsize:8;"));
        assert!(text.contains("\tfield:unsigned long long rettime;\toffset:40;\tsize:8;"));

        // A stack: `size` then the callers, -1 after the frames recorded; a depth
        // beyond the slots is cut to them.
        let mut stack = [Value::Unsigned(2)].to_vec();
        stack.extend((1..=8).map(|ip| Value::Unsigned(ip * 0x10)));
        let linux = Linux::Stack(8).values(&stack, 0).unwrap();
        assert_eq!(
            linux[..4],
            [
                Value::Signed(2),
                Value::Unsigned(0x10),
                Value::Unsigned(0x20),
                Value::Unsigned(u64::MAX)
            ]
        );
        stack[0] = Value::Unsigned(u64::MAX);
        assert_eq!(Linux::Stack(8).values(&stack, 0).unwrap()[0], Value::Signed(8));
        assert_eq!(Linux::Stack(8).values(&stack[..8], 0), None, "a frame missing");
        let mut record = Vec::new();
        encode_record(4, ORIGIN, &Linux::Stack(8).fields(), &linux, &mut record).unwrap();
        assert_eq!(record.len(), 16 + 64);
        assert_eq!(record[8..12], 2i32.to_le_bytes());
        assert_eq!(record[16..24], 0x10u64.to_le_bytes());
        let mut text = String::new();
        write_event_format(&mut text, "ftrace", "kernel_stack", 4, STACK_TRACE.fields, "").unwrap();
        assert!(text.contains("\tfield:int size;\toffset:8;\tsize:4;\tsigned:1;\n"), "{text}");
        assert!(
            text.contains("\tfield:unsigned long caller[8];\toffset:16;\tsize:64;\tsigned:0;\n")
        );
        assert!(text.contains("print fmt: \"\\t=> %ps\\n\\t=> %ps\\n"), "{text}");
        assert!(text.trim_end().ends_with("(void *)REC->caller[7]"), "{text}");
    }
}
