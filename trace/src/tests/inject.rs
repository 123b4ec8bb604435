//! Injected events: a line of `FIELD=VALUE` pairs encodes as the tracepoint encodes
//! its fields (a property test over every kind), refusals name the position and the
//! reason, and `Instance::inject` records into its instance through its filter and
//! triggers.

use super::trigger::{fire, recorded, tracer};
use crate::event::MAX_EVENT_PAYLOAD;
use crate::event::inject::{InjectError, InjectReason, encode};
use crate::field::{Encoder, Field, FieldKind, FieldValue, Sink};
use crate::tests::util::cases;
use crate::{event::DescriptorKind, event::EventDescriptor, tracer::STACK_TRACE};
use proptest::prelude::*;
use std::format;
use std::string::String;
use std::vec::Vec;

/// A field of every kind.
const FIELDS: &[Field<'static>] = &[
    Field { name: "u8", kind: FieldKind::U8 },
    Field { name: "u16", kind: FieldKind::U16 },
    Field { name: "u32", kind: FieldKind::U32 },
    Field { name: "u64", kind: FieldKind::U64 },
    Field { name: "i8", kind: FieldKind::I8 },
    Field { name: "i16", kind: FieldKind::I16 },
    Field { name: "i32", kind: FieldKind::I32 },
    Field { name: "i64", kind: FieldKind::I64 },
    Field { name: "flag", kind: FieldKind::Bool },
    Field { name: "ch", kind: FieldKind::Char },
    Field { name: "raw", kind: FieldKind::Bytes(3) },
    Field { name: "s", kind: FieldKind::Str },
];

/// Values of [`FIELDS`], in order.
#[derive(Clone, Debug, Default)]
struct Values {
    u8: u8,
    u16: u16,
    u32: u32,
    u64: u64,
    i8: i8,
    i16: i16,
    i32: i32,
    i64: i64,
    flag: bool,
    ch: char,
    raw: [u8; 3],
    s: String,
}

impl Values {
    /// The payload the tracepoint would write.
    fn payload(&self) -> Vec<u8> {
        let mut buf = [0u8; MAX_EVENT_PAYLOAD];
        let mut e = Encoder::new(&mut buf);
        self.u8.encode(&mut e);
        self.u16.encode(&mut e);
        self.u32.encode(&mut e);
        self.u64.encode(&mut e);
        self.i8.encode(&mut e);
        self.i16.encode(&mut e);
        self.i32.encode(&mut e);
        self.i64.encode(&mut e);
        self.flag.encode(&mut e);
        self.ch.encode(&mut e);
        self.raw.encode(&mut e);
        e.put_str(&self.s);
        e.bytes().to_vec()
    }

    /// Each field's value as inject reads it, in the `style` given (0-2: decimal,
    /// hex or octal for integers; quoted or not for words).
    fn texts(&self, style: u8) -> [String; 12] {
        let unsigned = |v: u64| match style % 3 {
            0 => format!("{v}"),
            1 => format!("{v:#x}"),
            _ if v == 0 => String::from("0"),
            _ => format!("0{v:o}"),
        };
        let signed = |v: i64| match v < 0 {
            true => format!("-{}", unsigned(v.unsigned_abs())),
            false => unsigned(v.unsigned_abs()),
        };
        let raw: String = self.raw.iter().map(|b| format!("{b:02x}")).collect();
        let quoted = self.s.is_empty() || self.s.contains(' ') || style % 2 == 1;
        [
            unsigned(self.u8.into()),
            unsigned(self.u16.into()),
            unsigned(self.u32.into()),
            unsigned(self.u64),
            signed(self.i8.into()),
            signed(self.i16.into()),
            signed(self.i32.into()),
            signed(self.i64),
            String::from(if self.flag { ["1", "true"][usize::from(style % 2)] } else { "false" }),
            format!("{}", self.ch),
            raw,
            if quoted { format!("\"{}\"", self.s) } else { self.s.clone() },
        ]
    }
}

fn values() -> impl Strategy<Value = Values> {
    let ints = (any::<u8>(), any::<u16>(), any::<u32>(), any::<u64>());
    let signed = (any::<i8>(), any::<i16>(), any::<i32>(), any::<i64>());
    let rest = (any::<bool>(), proptest::char::range('!', '~'), any::<[u8; 3]>(), "[a-z ]{0,40}");
    (ints, signed, rest).prop_map(
        |((u8, u16, u32, u64), (i8, i16, i32, i64), (flag, ch, raw, s))| {
            // A bare word cannot hold `"`; quoted, none is needed.
            let ch = if ch == '"' { '\'' } else { ch };
            Values { u8, u16, u32, u64, i8, i16, i32, i64, flag, ch, raw, s }
        },
    )
}

/// `line` encoded for [`FIELDS`].
fn encoded(line: &str) -> Result<Vec<u8>, InjectError> {
    let mut buf = [0u8; MAX_EVENT_PAYLOAD];
    encode(FIELDS, line, &mut buf).map(|len| buf[..len].to_vec())
}

proptest! {
    #![proptest_config(cases(if cfg!(miri) { 8 } else { 500 }))]

    /// Any subset of the fields, in any order, any spacing and number style: the
    /// payload is the tracepoint's, with the fields not given zero or empty.
    #[test]
    #[cfg_attr(miri, ignore = "single-threaded safe code, run natively (17 s under Miri)")]
    fn a_line_encodes_as_the_tracepoint_would(
        given in values(),
        shown in proptest::collection::vec(any::<bool>(), 12),
        order in Just((0..12).collect::<Vec<usize>>()).prop_shuffle(),
        style in any::<u8>(),
        spaces in proptest::collection::vec(prop_oneof![Just(" "), Just("  "), Just("\t")], 13),
    ) {
        let texts = given.texts(style);
        let mut line = String::from(spaces[12]);
        for &i in order.iter().filter(|&&i| shown[i]) {
            line += &format!("{}={}{}", FIELDS[i].name, texts[i], spaces[i]);
        }
        let d = Values::default();
        let kept = Values {
            u8: if shown[0] { given.u8 } else { d.u8 },
            u16: if shown[1] { given.u16 } else { d.u16 },
            u32: if shown[2] { given.u32 } else { d.u32 },
            u64: if shown[3] { given.u64 } else { d.u64 },
            i8: if shown[4] { given.i8 } else { d.i8 },
            i16: if shown[5] { given.i16 } else { d.i16 },
            i32: if shown[6] { given.i32 } else { d.i32 },
            i64: if shown[7] { given.i64 } else { d.i64 },
            flag: shown[8] && given.flag,
            ch: if shown[9] { given.ch } else { '\0' },
            raw: if shown[10] { given.raw } else { d.raw },
            s: if shown[11] { given.s.clone() } else { d.s },
        };
        prop_assert_eq!(encoded(&line), Ok(kept.payload()), "{}", line);
    }
}

#[test]
fn refusals_name_the_position_and_the_reason() {
    use InjectReason::*;
    let unsigned = BadValue("an unsigned integer that fits the field");
    let signed = BadValue("an integer that fits the field");
    for (line, pos, reason) in [
        ("u8", 0, NotAssignment),
        ("u8=1 =2", 5, NotAssignment),
        ("u8=1 u-8=2", 5, NotAssignment),
        ("nope=1", 0, UnknownField),
        ("u8=1 u8=2", 5, Repeated),
        ("u8=256", 3, unsigned),
        ("u8=-1", 3, unsigned),
        ("u16=0x10000", 4, unsigned),
        ("u64=18446744073709551616", 4, unsigned),
        ("u32=09", 4, unsigned),
        ("u32=", 4, unsigned),
        ("i8=128", 3, signed),
        ("i8=-129", 3, signed),
        ("i64=-9223372036854775809", 4, signed),
        ("flag=2", 5, BadValue("0, 1, true or false")),
        ("ch=ab", 3, BadValue("one character")),
        ("ch=", 3, BadValue("one character")),
        ("raw=abc", 4, BadValue("hex digit pairs, at most the field's size")),
        ("raw=0a0b0c0d", 4, BadValue("hex digit pairs, at most the field's size")),
        ("raw=+f", 4, BadValue("hex digit pairs, at most the field's size")),
        ("s=\"open", 2, Unterminated),
        ("s=\"a\"u8=1", 5, NotAssignment),
    ] {
        assert_eq!(encoded(line), Err(InjectError { pos, reason }), "{line}");
    }
    let long = format!("s=\"{}\"", "x".repeat(300));
    assert_eq!(encoded(&long), Err(InjectError { pos: 2, reason: TooLong }));
    let wide = format!("u64=1 s={} i8=-1", "y".repeat(MAX_EVENT_PAYLOAD - 30));
    assert_eq!(encoded(&wide), Err(InjectError { pos: 8, reason: TooLong }));
    // Exactly full: taken.
    let full = format!("s={}", "z".repeat(MAX_EVENT_PAYLOAD - 40));
    assert_eq!(encoded(&full).map(|p| p.len()), Ok(MAX_EVENT_PAYLOAD));
    assert_eq!(encoded(""), Ok(Values::default().payload().into_iter().collect()));
    let shown = format!("{}", InjectError { pos: 3, reason: Repeated });
    assert_eq!(shown, "parse error at 3: field given twice");
    let shown = format!("{}", InjectError { pos: 0, reason: NotEnabled });
    assert_eq!(shown, "the event is not enabled in this instance");
}

#[test]
#[cfg_attr(miri, ignore = "single-threaded safe code, run natively (6 s under Miri)")]
fn an_injected_event_is_recorded_in_its_instance_through_its_filter_and_triggers() {
    static EV: EventDescriptor = EventDescriptor::new(
        "zi1",
        "ev",
        "n={n}",
        &[Field { name: "n", kind: FieldKind::U32 }],
        DescriptorKind::Event,
    );
    static PRINTK: EventDescriptor =
        EventDescriptor::new("zi1", "site", "x", &[], DescriptorKind::Printk);
    let t = tracer(&[&EV, &PRINTK]);
    let (top, other) = (t.top(), t.get_or_create("other", Default::default()).unwrap());
    let refused = |reason| Err(InjectError { pos: 0, reason });
    assert_eq!(top.inject(&EV, "n=1"), refused(InjectReason::NotEnabled));
    assert_eq!(top.inject(&PRINTK, ""), refused(InjectReason::NotInjectable));
    assert_eq!(top.inject(&STACK_TRACE, ""), refused(InjectReason::NotInjectable));
    top.set_event(Some("zi1"), None, true).unwrap();
    other.set_event(Some("zi1"), None, true).unwrap();
    // As the tracepoint records it, in this instance alone.
    top.inject(&EV, "n=5").unwrap();
    fire(t, &EV, 5);
    assert_eq!(recorded(top.recorder().live(), EV.id()), [5, 5]);
    assert_eq!(recorded(other.recorder().live(), EV.id()), [5]);
    let payloads = crate::tests::util::events(top.recorder().live(), 0);
    assert_eq!(payloads[0], payloads[1], "the same record");
    // Refused: nothing recorded.
    let bad = top.inject(&EV, "n=x");
    let rule = InjectReason::BadValue("an unsigned integer that fits the field");
    assert_eq!(bad, Err(InjectError { pos: 2, reason: rule }));
    // Its filter and triggers apply.
    top.set_filter(&EV, "n > 10").unwrap();
    top.set_trigger(&EV, "traceoff if n == 12").unwrap();
    top.inject(&EV, "n=7").unwrap();
    top.inject(&EV, "n=11").unwrap();
    assert!(top.tracing());
    top.inject(&EV, "n=12").unwrap();
    assert!(!top.tracing(), "the trigger fired");
    assert_eq!(recorded(top.recorder().live(), EV.id()), [5, 5, 11, 12]);
    assert!(top.recorder().live().stats(0).unwrap().balanced());
}
