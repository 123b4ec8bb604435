//! Event fields: their types, how a value is stored in a record's payload (raw,
//! little endian, in declaration order), and how a payload is decoded again.
//!
//! | kind        | stored as                                  |
//! |-------------|--------------------------------------------|
//! | `u8`..`u64`, `i8`..`i64` | 1, 2, 4 or 8 bytes            |
//! | `bool`      | 1 byte (0 or 1)                            |
//! | `char`      | 4 bytes (the scalar value)                 |
//! | `[u8; N]`   | N bytes                                    |
//! | `str`       | 2-byte length, then that many UTF-8 bytes  |
//!
//! A string that does not fit the record is cut at a character boundary.

/// The type of an event field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldKind {
    /// `u8`.
    U8,
    /// `u16`.
    U16,
    /// `u32`.
    U32,
    /// `u64` (and `usize`).
    U64,
    /// `i8`.
    I8,
    /// `i16`.
    I16,
    /// `i32`.
    I32,
    /// `i64` (and `isize`).
    I64,
    /// `bool`.
    Bool,
    /// `char`.
    Char,
    /// A fixed-size byte array of this many bytes.
    Bytes(u16),
    /// A string, copied into the record.
    Str,
}

/// Every kind but byte arrays (which carry a length).
const SCALARS: [FieldKind; 11] = [
    FieldKind::U8,
    FieldKind::U16,
    FieldKind::U32,
    FieldKind::U64,
    FieldKind::I8,
    FieldKind::I16,
    FieldKind::I32,
    FieldKind::I64,
    FieldKind::Bool,
    FieldKind::Char,
    FieldKind::Str,
];

impl FieldKind {
    /// The fewest bytes a field of this kind takes untagged: its fixed size, or a
    /// string's 2-byte length.
    pub const fn min_size(self) -> usize {
        match self.fixed_size() {
            Some(n) => n,
            None => 2,
        }
    }

    /// Size in the payload of a fixed-size kind; `None` for strings.
    pub const fn fixed_size(self) -> Option<usize> {
        Some(match self {
            FieldKind::U8 | FieldKind::I8 | FieldKind::Bool => 1,
            FieldKind::U16 | FieldKind::I16 => 2,
            FieldKind::U32 | FieldKind::I32 | FieldKind::Char => 4,
            FieldKind::U64 | FieldKind::I64 => 8,
            FieldKind::Bytes(n) => n as usize,
            FieldKind::Str => return None,
        })
    }

    /// The kind of a one-byte tag (byte arrays excepted: their tag carries a length).
    pub(crate) fn from_tag(tag: u8) -> Option<Self> {
        SCALARS.into_iter().find(|k| k.tag() == tag)
    }

    /// A one-byte tag for self-describing payloads (printk arguments).
    pub(crate) fn tag(self) -> u8 {
        match self {
            FieldKind::U8 => 1,
            FieldKind::U16 => 2,
            FieldKind::U32 => 3,
            FieldKind::U64 => 4,
            FieldKind::I8 => 5,
            FieldKind::I16 => 6,
            FieldKind::I32 => 7,
            FieldKind::I64 => 8,
            FieldKind::Bool => 9,
            FieldKind::Char => 10,
            FieldKind::Str => 11,
            // Byte arrays carry their length after the tag.
            FieldKind::Bytes(_) => 12,
        }
    }
}

/// A named field of an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field<'a> {
    /// The field's name, as the format string refers to it.
    pub name: &'a str,
    /// Its type.
    pub kind: FieldKind,
}

/// Where field values are written: a byte buffer ([`Encoder`]), a record reserved in
/// a ring, or a count of the bytes a payload will take. Every sink cuts the same way
/// (by [`Sink::room`]), so a payload measured first is written identically after.
pub trait Sink {
    /// Bytes that still fit.
    fn room(&self) -> usize;

    /// Appends `bytes`, as many as fit.
    fn put(&mut self, bytes: &[u8]);

    /// Appends a little-endian `u64` (a sink may store an aligned word at once).
    #[inline(always)]
    fn put_u64(&mut self, v: u64) {
        self.put(&v.to_le_bytes());
    }

    /// Appends a string as a 2-byte length and its bytes, cut at a character
    /// boundary to what fits.
    #[inline]
    fn put_str(&mut self, s: &str) {
        self.put_str_keeping(s, 0);
    }

    /// [`Sink::put_str`] leaving the last `keep` bytes of room free (for the fields
    /// after it).
    #[inline]
    fn put_str_keeping(&mut self, s: &str, keep: usize) {
        let room = self.room().saturating_sub(keep).saturating_sub(2).min(u16::MAX as usize);
        let mut end = s.len().min(room);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.put(&(end as u16).to_le_bytes());
        self.put(&s.as_bytes()[..end]);
    }

    /// Appends a self-describing value: its type tag, then the value.
    fn put_tagged<T: FieldValue + ?Sized>(&mut self, value: &T)
    where
        Self: Sized,
    {
        self.put(&[T::KIND.tag()]);
        if let FieldKind::Bytes(n) = T::KIND {
            self.put(&n.to_le_bytes());
        }
        value.encode(self);
    }
}

/// Writes field values into a payload buffer, never past its end.
pub struct Encoder<'a> {
    buf: &'a mut [u8],
    len: usize,
    cut: bool,
}

impl<'a> Encoder<'a> {
    /// An encoder filling `buf` from the start.
    #[inline]
    pub fn new(buf: &'a mut [u8]) -> Self {
        Encoder { buf, len: 0, cut: false }
    }

    /// Whether something did not fit (a value was cut or left out).
    pub fn was_cut(&self) -> bool {
        self.cut
    }

    /// The bytes written so far.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Sink for Encoder<'_> {
    #[inline]
    fn room(&self) -> usize {
        self.buf.len() - self.len
    }

    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(self.buf.len() - self.len);
        self.cut |= n < bytes.len();
        self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
    }

    #[inline]
    fn put_u64(&mut self, v: u64) {
        match self.buf.get_mut(self.len..self.len + 8) {
            Some(word) => {
                word.copy_from_slice(&v.to_le_bytes());
                self.len += 8;
            }
            None => self.put(&v.to_le_bytes()),
        }
    }
}

/// An [`Encoder`] that keeps its last bytes free for the values after the current
/// one ([`Encoder::keeping`]).
pub struct Keeping<'e, 'a> {
    encoder: &'e mut Encoder<'a>,
    keep: usize,
}

impl<'a> Encoder<'a> {
    /// A sink writing into this encoder that leaves its last `keep` bytes free: what
    /// the values after the next one take at least (`printk!`'s arguments, so a long
    /// string is cut rather than the values after it left out).
    pub fn keeping(&mut self, keep: usize) -> Keeping<'_, 'a> {
        Keeping { encoder: self, keep }
    }
}

impl Sink for Keeping<'_, '_> {
    fn room(&self) -> usize {
        self.encoder.room().saturating_sub(self.keep)
    }

    fn put(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(self.room());
        self.encoder.cut |= n < bytes.len();
        self.encoder.put(&bytes[..n]);
    }
}

/// The fewest bytes a value of `value`'s type takes in a self-describing payload
/// ([`Sink::put_tagged`]): its tag, a byte array's length, and its fixed size, or
/// an empty string's length.
pub const fn min_tagged_len<T: FieldValue + ?Sized>(_value: &T) -> usize {
    1 + match T::KIND {
        FieldKind::Bytes(n) => 2 + n as usize,
        FieldKind::Str => 2,
        kind => match kind.fixed_size() {
            Some(n) => n,
            None => 0,
        },
    }
}

/// A sink that only counts: the payload length a value sequence takes under a limit.
pub(crate) struct Measure {
    pub(crate) len: usize,
    pub(crate) limit: usize,
}

impl Sink for Measure {
    #[inline(always)]
    fn room(&self) -> usize {
        self.limit - self.len
    }

    #[inline(always)]
    fn put(&mut self, bytes: &[u8]) {
        self.len += bytes.len().min(self.limit - self.len);
    }
}

/// A type that can be an event field.
pub trait FieldValue {
    /// The field kind of this type.
    const KIND: FieldKind;
    /// Appends the value's raw representation.
    fn encode<S: Sink>(&self, out: &mut S);
    /// An integer's value, sign-extended if signed and zero-extended otherwise
    /// (`bool` and `char` included): what a filter compares. `None` for strings and
    /// byte arrays.
    fn int_value(&self) -> Option<u64>;
    /// A string, as a filter compares it. `None` for every other kind.
    fn str_value(&self) -> Option<&str>;
}

macro_rules! integer_field {
    ($($ty:ty => $kind:ident as $wire:ty),* $(,)?) => {$(
        impl FieldValue for $ty {
            const KIND: FieldKind = FieldKind::$kind;
            #[inline(always)]
            fn encode<S: Sink>(&self, out: &mut S) {
                let v = *self as $wire;
                if size_of::<$wire>() == 8 {
                    out.put_u64(v as u64);
                } else {
                    out.put(&v.to_le_bytes());
                }
            }
            #[inline(always)]
            fn int_value(&self) -> Option<u64> {
                Some(*self as $wire as i128 as u64)
            }
            #[inline(always)]
            fn str_value(&self) -> Option<&str> {
                None
            }
        }
    )*};
}

integer_field!(
    u8 => U8 as u8, u16 => U16 as u16, u32 => U32 as u32, u64 => U64 as u64, usize => U64 as u64,
    i8 => I8 as i8, i16 => I16 as i16, i32 => I32 as i32, i64 => I64 as i64, isize => I64 as i64,
);

impl FieldValue for bool {
    const KIND: FieldKind = FieldKind::Bool;
    fn encode<S: Sink>(&self, out: &mut S) {
        out.put(&[u8::from(*self)]);
    }
    fn int_value(&self) -> Option<u64> {
        Some(u64::from(*self))
    }
    fn str_value(&self) -> Option<&str> {
        None
    }
}

impl FieldValue for char {
    const KIND: FieldKind = FieldKind::Char;
    fn encode<S: Sink>(&self, out: &mut S) {
        out.put(&u32::from(*self).to_le_bytes());
    }
    fn int_value(&self) -> Option<u64> {
        Some(u64::from(*self))
    }
    fn str_value(&self) -> Option<&str> {
        None
    }
}

impl<const N: usize> FieldValue for [u8; N] {
    const KIND: FieldKind = FieldKind::Bytes(N as u16);
    fn encode<S: Sink>(&self, out: &mut S) {
        out.put(self);
    }
    fn int_value(&self) -> Option<u64> {
        None
    }
    fn str_value(&self) -> Option<&str> {
        None
    }
}

impl FieldValue for &str {
    const KIND: FieldKind = FieldKind::Str;
    fn encode<S: Sink>(&self, out: &mut S) {
        out.put_str(self);
    }
    fn int_value(&self) -> Option<u64> {
        None
    }
    fn str_value(&self) -> Option<&str> {
        Some(self)
    }
}

/// A decoded field value, borrowing from the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value<'a> {
    /// Any unsigned integer field.
    Unsigned(u64),
    /// Any signed integer field.
    Signed(i64),
    /// A `bool` field.
    Bool(bool),
    /// A `char` field.
    Char(char),
    /// A byte-array field.
    Bytes(&'a [u8]),
    /// A string field.
    Str(&'a str),
}

/// Why a payload does not match its fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The payload ends inside this field.
    Truncated,
    /// A string field is not UTF-8, a `bool` is not 0 or 1, or a `char` is invalid.
    Invalid,
    /// An unknown type tag in a self-describing payload.
    BadTag,
}

impl core::error::Error for DecodeError {}

impl core::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            DecodeError::Truncated => "payload too short for its fields",
            DecodeError::Invalid => "invalid field value",
            DecodeError::BadTag => "unknown argument type tag",
        })
    }
}

/// Reads values off a payload, front to back.
#[derive(Clone)]
pub struct Decoder<'a> {
    rest: &'a [u8],
}

impl<'a> Decoder<'a> {
    /// A decoder over `payload`.
    pub fn new(payload: &'a [u8]) -> Self {
        Decoder { rest: payload }
    }

    /// Whether the whole payload has been read.
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.rest.len() < n {
            return Err(DecodeError::Truncated);
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(head)
    }

    fn int<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut bytes = [0u8; N];
        bytes.copy_from_slice(self.take(N)?);
        Ok(bytes)
    }

    /// Reads `values.len()` `u64` fields into `values`; `false` if the payload does
    /// not hold them.
    pub fn u64s(&mut self, values: &mut [u64]) -> bool {
        values.iter_mut().all(|v| match self.value(FieldKind::U64) {
            Ok(Value::Unsigned(value)) => {
                *v = value;
                true
            }
            _ => false,
        })
    }

    /// Reads one value of `kind`.
    pub fn value(&mut self, kind: FieldKind) -> Result<Value<'a>, DecodeError> {
        Ok(match kind {
            FieldKind::U8 => Value::Unsigned(u64::from(self.int::<1>()?[0])),
            FieldKind::U16 => Value::Unsigned(u64::from(u16::from_le_bytes(self.int()?))),
            FieldKind::U32 => Value::Unsigned(u64::from(u32::from_le_bytes(self.int()?))),
            FieldKind::U64 => Value::Unsigned(u64::from_le_bytes(self.int()?)),
            FieldKind::I8 => Value::Signed(i64::from(i8::from_le_bytes(self.int()?))),
            FieldKind::I16 => Value::Signed(i64::from(i16::from_le_bytes(self.int()?))),
            FieldKind::I32 => Value::Signed(i64::from(i32::from_le_bytes(self.int()?))),
            FieldKind::I64 => Value::Signed(i64::from_le_bytes(self.int()?)),
            FieldKind::Bool => match self.int::<1>()?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                _ => return Err(DecodeError::Invalid),
            },
            FieldKind::Char => Value::Char(
                char::from_u32(u32::from_le_bytes(self.int()?)).ok_or(DecodeError::Invalid)?,
            ),
            FieldKind::Bytes(n) => Value::Bytes(self.take(usize::from(n))?),
            FieldKind::Str => {
                let len = u16::from_le_bytes(self.int()?);
                let bytes = self.take(usize::from(len))?;
                Value::Str(core::str::from_utf8(bytes).map_err(|_| DecodeError::Invalid)?)
            }
        })
    }

    /// Reads one self-describing value (a type tag, then the value).
    pub fn tagged(&mut self) -> Result<(FieldKind, Value<'a>), DecodeError> {
        let tag = self.int::<1>()?[0];
        let kind = match tag {
            12 => FieldKind::Bytes(u16::from_le_bytes(self.int()?)),
            tag => FieldKind::from_tag(tag).ok_or(DecodeError::BadTag)?,
        };
        Ok((kind, self.value(kind)?))
    }
}
