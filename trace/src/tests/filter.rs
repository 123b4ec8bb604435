//! Event filters: the syntax, every operator on every field kind, errors with their
//! positions, and a property test against a direct evaluation of random expressions.

use crate::dump;
use crate::event::Encode;
use crate::event::dispatch::{INLINE_WORDS, Inline, Payload};
use crate::event::filter::{Filter, FilterError, FilterReason, MAX_FILTER_LEN, MAX_PREDICATES};
use crate::event::format_file::Origin;
use crate::field::{Decoder, Encoder, Field, FieldKind, FieldValue};
use crate::tests::util::HERE;
use crate::{Activity, Context};
use crate::{event::DescriptorKind, event::EventDescriptor};
use proptest::prelude::*;
use std::format;
use std::string::{String, ToString};
use std::vec::Vec;

/// `a: u32, b: i16, s: str, c: u64, f: bool, ch: char, raw: [u8; 2]` (`c` and what
/// follows sit after a string: found by walking).
const FIELDS: &[Field<'static>] = &[
    Field { name: "a", kind: FieldKind::U32 },
    Field { name: "b", kind: FieldKind::I16 },
    Field { name: "s", kind: FieldKind::Str },
    Field { name: "c", kind: FieldKind::U64 },
    Field { name: "f", kind: FieldKind::Bool },
    Field { name: "ch", kind: FieldKind::Char },
    Field { name: "raw", kind: FieldKind::Bytes(2) },
];

/// A payload of [`FIELDS`].
fn payload(a: u32, b: i16, s: &str, c: u64) -> Vec<u8> {
    let mut buf = [0u8; 256];
    let mut e = Encoder::new(&mut buf);
    a.encode(&mut e);
    b.encode(&mut e);
    s.encode(&mut e);
    c.encode(&mut e);
    true.encode(&mut e);
    'x'.encode(&mut e);
    [1u8, 2].encode(&mut e);
    e.bytes().to_vec()
}

/// The arguments of a tracepoint with [`FIELDS`], as the tracer hands them to filters
/// before encoding.
type Decl = (u32, i16, &'static str, u64, bool, char, [u8; 2]);

/// Whether `filter` passes the arguments `a, b, s, c` (and the constant rest) as a
/// tracepoint's filter judges them (typed), asserting that the encoded payload gets
/// the same verdict.
fn judge(filter: &Filter, a: u32, b: i16, s: &str, c: u64) -> bool {
    judge_at(filter, HERE, a, b, s, c)
}

/// [`judge`] for an event written at `origin`.
fn judge_at(filter: &Filter, origin: Origin, a: u32, b: i16, s: &str, c: u64) -> bool {
    let typed = Encode::<_, Decl>::new((a, b, s, c, true, 'x', [1u8, 2]));
    let verdict = typed.passes(filter, origin);
    let encoded = payload(a, b, s, c);
    let at = format!("{filter} on a={a} b={b} s={s:?} c={c} at {origin:?}");
    assert_eq!(verdict, filter.matches(&encoded, origin), "{at}");
    if let Some(words) = inline(&encoded) {
        let fast = filter.matches_inline(&words, encoded.len(), origin);
        assert_eq!(verdict, fast, "{at}, inline");
    }
    // The host tool's: the values a dump's record decodes to.
    let mut decoder = Decoder::new(&encoded);
    let values = FIELDS.iter().map_while(|f| decoder.value(f.kind).ok().map(Into::into)).collect();
    let event = dump::Event {
        cpu: origin.cpu,
        ts: 0,
        id: 1,
        context: origin.context,
        values,
        lost_before: 0,
        error: crate::field::DecodeError::Truncated,
    };
    assert_eq!(verdict, event.passes(filter), "{at}, decoded");
    verdict
}

/// `encoded` as a tracepoint hands a small payload to filters, if it is one.
fn inline(encoded: &[u8]) -> Option<Inline> {
    let mut words = Inline::default();
    words.as_flattened_mut()[..8 * INLINE_WORDS].get_mut(..encoded.len())?.copy_from_slice(encoded);
    Some(words)
}

fn passes(filter: &str, a: u32, b: i16, s: &str, c: u64) -> bool {
    judge(&Filter::compile(FIELDS, filter).unwrap(), a, b, s, c)
}

fn refused(filter: &str) -> FilterError {
    Filter::compile(FIELDS, filter).unwrap_err()
}

#[test]
fn filter_integer_operators() {
    for (filter, a, expected) in [
        ("a == 5", 5, true),
        ("a == 5", 6, false),
        ("a != 5", 6, true),
        ("a < 5", 4, true),
        ("a < 5", 5, false),
        ("a <= 5", 5, true),
        ("a > 5", 5, false),
        ("a > 5", 6, true),
        ("a >= 5", 5, true),
        ("a & 4", 6, true),
        ("a & 8", 6, false),
        ("a == 0x10", 16, true),
        ("a == 010", 8, true),
        ("a == 0", 0, true),
        ("a == +7", 7, true),
    ] {
        assert_eq!(passes(filter, a, 0, "", 0), expected, "{filter} with a={a}");
    }
    assert!(passes("b == -3", 0, -3, "", 0));
    assert!(passes("b == +3", 0, 3, "", 0));
    assert!(passes("b < -2 && b > -4", 0, -3, "", 0));
    assert!(!passes("b >= 0", 0, -3, "", 0));
    assert!(passes("c == 7", 0, 0, "after a string", 7));
    assert!(passes("c & 0x4", 0, 0, "", 7));
    assert!(passes("f == 1 && ch == 120", 0, 0, "", 0));
}

#[test]
fn filter_string_operators_and_globs() {
    for (filter, s, expected) in [
        ("s == \"foo\"", "foo", true),
        ("s == foo", "foo", true),
        ("s == 'foo bar'", "foo bar", true),
        ("s == foo", "foobar", false),
        ("s != foo", "foobar", true),
        ("s ~ \"foo*\"", "foobar", true),
        ("s ~ \"*bar\"", "foobar", true),
        ("s ~ \"*oba*\"", "foobar", true),
        ("s ~ \"f?o\"", "foo", true),
        ("s ~ \"f?o\"", "fooo", false),
        ("s ~ \"*\"", "", true),
    ] {
        assert_eq!(passes(filter, 0, 0, s, 0), expected, "{filter} with s={s:?}");
    }
}

#[test]
fn filter_logic_precedence_and_parentheses() {
    // `&&` binds tighter than `||`.
    assert!(passes("a == 1 || a == 2 && b == 9", 1, 0, "", 0));
    assert!(!passes("(a == 1 || a == 2) && b == 9", 1, 0, "", 0));
    assert!(passes("!(a == 1)", 2, 0, "", 0));
    assert!(!passes("!a == 1", 1, 0, "", 0));
    assert!(passes("!!(a == 1)", 1, 0, "", 0));
    assert!(passes("((a == 1) && ((b == 2)))", 1, 2, "", 0));
    assert!(passes("a==1&&b==2||s~\"x*\"", 0, 0, "xy", 0));
}

#[test]
fn filter_reads_back_as_set() {
    let f = Filter::compile(FIELDS, "  a == 1 && s ~ \"x*\"\n").unwrap();
    assert_eq!(f.text(), "a == 1 && s ~ \"x*\"");
    assert_eq!(f.to_string(), f.text());
}

#[test]
fn filter_on_a_short_payload_is_false_not_a_panic() {
    let f = Filter::compile(FIELDS, "c == 0 || a != 0").unwrap();
    let full = payload(0, 0, "abc", 0);
    // `a` (4 bytes) is missing below 4 bytes, `c` below 4 + 2 + 5 + 8.
    for len in 0..=full.len() {
        assert_eq!(f.matches(&full[..len], HERE), len >= 19, "{len} bytes");
    }
    let not_c = Filter::compile(FIELDS, "!(c == 0)").unwrap();
    // `c` missing: its comparison is false, so its negation passes.
    assert!(not_c.matches(&payload(0, 0, "abc", 0)[..6], HERE));
    assert!(!Filter::compile(FIELDS, "a == 0").unwrap().matches(&[], HERE));
}

#[test]
fn filter_sees_where_the_event_was_written() {
    let at = |activity, irqs_off, cpu| Origin { context: Context::new(activity, irqs_off), cpu };
    let shell = at(Activity::Task, false, 0);
    let work2 = at(Activity::Task, false, 2);
    let irq = at(Activity::Irq { depth: 2 }, true, 3);
    let nmi = at(Activity::Nmi { in_irq: false }, true, 1);
    let bytes = payload(5, -1, "abc", 9);
    let words = inline(&bytes).unwrap();
    let typed = Encode::<_, Decl>::new((5, -1, "abc", 9, true, 'x', [1u8, 2]));
    for (text, origin, expected) in [
        ("CPU == 2", work2, true),
        ("cpu == 2", shell, false),
        ("common_cpu >= 3", irq, true),
        ("CPU == 2 && a == 5", work2, true),
        ("CPU == 2 && a == 6", work2, false),
        ("a == 6 || !(CPU < 3)", irq, true),
        ("comm == shell", shell, true),
        ("comm == shell", work2, false),
        ("COMM ~ \"work/*\"", work2, true),
        ("comm == \"work/2\"", work2, true),
        ("common_comm == \"work/2\"", work2, true),
        ("comm != \"<irq>\"", irq, false),
        ("common_pid == 1", shell, true),
        ("common_pid == 3", work2, true),
        ("common_pid == 0", irq, true),
        ("common_flags & 0x08", irq, true),
        ("common_flags & 0x01", shell, false),
        ("common_flags == 0x41", nmi, true),
        ("common_preempt_count == 2", irq, true),
        ("common_preempt_count == 0", shell, true),
    ] {
        let f = Filter::compile(FIELDS, text).unwrap();
        assert_eq!(f.matches(&bytes, origin), expected, "{text} at {origin:?}");
        assert_eq!(f.matches_inline(&words, bytes.len(), origin), expected, "{text}, inline");
        assert_eq!(typed.passes(&f, origin), expected, "{text} at {origin:?}, typed");
    }
    // The event's own field comes first.
    let own = &[Field { name: "cpu", kind: FieldKind::U8 }];
    assert!(Filter::compile(own, "cpu == 7").unwrap().matches(&[7], shell));
    assert_eq!(refused("comm > 5").reason, FilterReason::OrderOnString);
    assert_eq!(refused("CPU ~ 1").reason, FilterReason::GlobOnInteger);
    assert_eq!(refused("CPUS == 1"), FilterError { pos: 5, reason: FilterReason::UnknownField });
}

#[test]
fn filter_errors_name_the_position_and_reason() {
    use FilterReason::*;
    for (filter, pos, reason) in [
        ("", 0, Empty),
        ("   ", 0, Empty),
        ("x == 1", 2, UnknownField),
        ("a == 1 && zz > 2", 13, UnknownField),
        ("raw == 1", 0, UnfilterableField),
        ("a = 1", 2, ExpectedOperator),
        ("a 1", 2, ExpectedOperator),
        ("a ~ \"1\"", 2, GlobOnInteger),
        ("s < foo", 2, OrderOnString),
        ("s & 1", 2, OrderOnString),
        ("a ==", 4, ExpectedValue),
        ("a == )", 5, ExpectedValue),
        ("a == -1", 5, BadNumber),
        ("a == 12x", 5, BadNumber),
        ("a == 0x", 5, BadNumber),
        ("a == 99999999999999999999", 5, BadNumber),
        ("b == -9223372036854775809", 5, BadNumber),
        ("b == -+3", 5, BadNumber),
        ("a == \"1\"", 6, BadNumber),
        ("s == \"foo", 5, UnterminatedString),
        ("(a == 1", 7, MissingParen),
        ("a == 1)", 6, UnexpectedText),
        ("a == 1 b == 2", 7, UnexpectedText),
        ("a == 1 &&", 9, ExpectedField),
        ("&& a == 1", 0, ExpectedField),
        ("  x == 1", 4, UnknownField),
        ("x.function == f", 11, UnknownField),
    ] {
        assert_eq!(refused(filter), FilterError { pos, reason }, "{filter:?}");
    }
    assert_eq!(refused("a == 1 && zz > 2").to_string(), "parse error at 13: field not found");
}

#[test]
#[cfg_attr(miri, ignore = "single-threaded safe code, run natively (9 s under Miri)")]
fn filter_limits_are_errors() {
    let long = "a == 1 || ".repeat(MAX_FILTER_LEN / 10) + "a == 1";
    assert_eq!(refused(&long).reason, FilterReason::TooLong);
    let many = ["a==1"; MAX_PREDICATES + 1].join("||");
    assert!(many.len() <= MAX_FILTER_LEN);
    assert_eq!(refused(&many).reason, FilterReason::TooManyPredicates);
    // The most there may be: the last one decides.
    let fine = ["a==1"; MAX_PREDICATES - 1].join("&&") + "&&b==3";
    let fine = Filter::compile(FIELDS, &fine).unwrap();
    assert!(judge(&fine, 1, 3, "", 0) && !judge(&fine, 1, 4, "", 0));
    let deep = "(".repeat(100) + "a == 1" + &")".repeat(100);
    assert_eq!(refused(&deep).reason, FilterReason::TooDeep);
    assert_eq!(refused(&"!".repeat(100)).reason, FilterReason::TooDeep);
}

static SYS_A: EventDescriptor = EventDescriptor::new(
    "sys",
    "a",
    "{x}",
    &[Field { name: "x", kind: FieldKind::U8 }],
    DescriptorKind::Event,
);
static SYS_B: EventDescriptor = EventDescriptor::new(
    "sys",
    "b",
    "{y}",
    &[Field { name: "y", kind: FieldKind::U8 }],
    DescriptorKind::Event,
);

/// Integers of every width and signedness at fixed places of a 32-byte payload, some
/// across a word boundary: `x: u8, y: u64, z: i32, w: i8, v: u16, p: u64, q: i64`.
const PACKED: &[Field<'static>] = &[
    Field { name: "x", kind: FieldKind::U8 },
    Field { name: "y", kind: FieldKind::U64 },
    Field { name: "z", kind: FieldKind::I32 },
    Field { name: "w", kind: FieldKind::I8 },
    Field { name: "v", kind: FieldKind::U16 },
    Field { name: "p", kind: FieldKind::U64 },
    Field { name: "q", kind: FieldKind::I64 },
];

/// A value of each [`PACKED`] field, as `i128`, and its payload.
fn packed(values: &[i128; 7]) -> Vec<u8> {
    let widths = [1, 8, 4, 1, 2, 8, 8];
    let mut out = Vec::new();
    for (v, width) in values.iter().zip(widths) {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
    out
}

/// A random `FIELD OP VALUE` over [`PACKED`], with its direct evaluation.
fn packed_leaf() -> impl Strategy<Value = (usize, &'static str, i128)> {
    let ranges: [(i128, i128); 7] = [
        (0, u8::MAX as i128),
        (0, u64::MAX as i128),
        (i32::MIN as i128, i32::MAX as i128),
        (i8::MIN as i128, i8::MAX as i128),
        (0, u16::MAX as i128),
        (0, u64::MAX as i128),
        (i64::MIN as i128, i64::MAX as i128),
    ];
    (0..7usize, prop::sample::select(&INT_OPS[..])).prop_flat_map(move |(field, op)| {
        let (lo, hi) = ranges[field];
        (Just(field), Just(op), prop_oneof![lo..=hi, Just(lo), Just(hi), -2i128..3])
            .prop_filter("in range", move |(_, _, v)| (lo..=hi).contains(v))
    })
}

proptest! {
    #![proptest_config(crate::tests::util::cases(300))]

    /// A small payload's integers read as words (`matches_inline`) give the verdict
    /// of the encoded payload and of the values themselves.
    #[test]
    #[cfg_attr(miri, ignore = "single-threaded safe code, run natively")]
    fn filter_on_words_agrees_with_the_payload(
        // Up to 8 leaves: more than a filter tested all at once has (6).
        leaves in prop::collection::vec(packed_leaf(), 1..9),
        ors in prop::collection::vec(any::<bool>(), 8),
        values in prop::collection::vec(
            (any::<u8>(), any::<u64>(), any::<i32>(), any::<i8>(), any::<u16>(), any::<u64>(),
             any::<i64>()), 6),
    ) {
        let names = ["x", "y", "z", "w", "v", "p", "q"];
        let mut text = String::new();
        for (i, (field, op, v)) in leaves.iter().enumerate() {
            if i > 0 {
                text.push_str(if ors[i] { " || " } else { " && " });
            }
            text.push_str(&format!("{} {op} {v}", names[*field]));
        }
        let filter = Filter::compile(PACKED, &text).unwrap();
        for (x, y, z, w, v, p, q) in values {
            let values = [x.into(), y.into(), z.into(), w.into(), v.into(), p.into(), q.into()];
            // `&&` binds tighter than `||`: an `||` of `&&` runs.
            let mut direct = false;
            let mut run = true;
            for (i, (field, op, x)) in leaves.iter().enumerate() {
                if i > 0 && ors[i] {
                    direct |= run;
                    run = true;
                }
                run &= int_op(op, values[*field], *x);
            }
            direct |= run;
            let encoded = packed(&values);
            prop_assert_eq!(filter.matches(&encoded, HERE), direct, "{}", text);
            let words = inline(&encoded).unwrap();
            prop_assert_eq!(filter.matches_inline(&words, encoded.len(), HERE), direct, "{} inline", text);
        }
    }
}

/// `FIELD.function`: `c` (a `u64`) inside a function of the symbol table the
/// filter was set with, by name or by an address in it; `==` and `!=` only, on
/// address fields only.
#[test]
fn filter_function_modifier_matches_addresses_inside_a_function() {
    use crate::symtab::{SymbolTable, encode};
    let bytes = encode([(0x100, 0x180, "a::f"), (0x200, 0x240, "<b as c>::g")]);
    let table = SymbolTable::parse(&bytes).unwrap();
    let compile = |text: &str| Filter::compile_with(FIELDS, text, Some(&table));
    let inside = compile("c.function == \"a::f\"").unwrap();
    for (c, expected) in
        [(0xff, false), (0x100, true), (0x17f, true), (0x180, false), (0x200, false)]
    {
        assert_eq!(judge(&inside, 1, 2, "s", c), expected, "{c:#x}");
    }
    let outside = compile("c.function != '<b as c>::g' && a == 1").unwrap();
    assert!(judge(&outside, 1, 2, "s", 0x100) && !judge(&outside, 1, 2, "s", 0x23f));
    assert_eq!(outside.text(), "c.function != '<b as c>::g' && a == 1", "reads back as set");
    // An address, unquoted, stands for the function that holds it.
    for address in ["0x100", "0x17f", "256"] {
        let by_address = compile(&format!("c.function == {address}")).unwrap();
        for c in [0xff, 0x100, 0x17f, 0x180] {
            let by_name = judge(&inside, 1, 2, "s", c);
            assert_eq!(judge(&by_address, 1, 2, "s", c), by_name, "{address}: {c:#x}");
        }
    }
    for (text, pos, reason) in [
        ("c.function == 0x180", 14, FilterReason::UnknownFunction),
        ("c.function == '0x100'", 15, FilterReason::UnknownFunction),
        ("c.function < \"a::f\"", 11, FilterReason::FunctionOrder),
        ("a.function == \"a::f\"", 0, FilterReason::FunctionOnNonAddress),
        ("c.func == \"a::f\"", 1, FilterReason::UnknownModifier),
        ("c.function == nope", 14, FilterReason::UnknownFunction),
    ] {
        assert_eq!(compile(text).unwrap_err(), FilterError { pos, reason }, "{text}");
    }
    let refused = |text: &str| compile(text).unwrap_err();
    assert_eq!(refused(".function == x").reason, FilterReason::ExpectedField);
    let none = Filter::compile(FIELDS, "c.function == \"a::f\"").unwrap_err();
    assert_eq!(none.reason, FilterReason::UnknownFunction, "no symbol table");
}

#[test]
fn filter_for_a_system_goes_to_the_events_it_fits() {
    let got = Filter::compile_for_system([&SYS_A, &SYS_B], "x == 3", None).unwrap();
    assert_eq!(got.len(), 1);
    assert!(core::ptr::eq(got[0].0, &SYS_A));
    assert!(got[0].1.matches(&[3], HERE));
    // Every event refusing for the same reason: that reason.
    let none = Filter::compile_for_system([&SYS_A, &SYS_B], "z == 3", None).unwrap_err();
    assert_eq!(none, FilterError { pos: 2, reason: FilterReason::UnknownField });
    let big = "x == 99999999999999999999";
    let err = Filter::compile_for_system([&SYS_A], big, None).unwrap_err();
    assert_eq!(err, FilterError { pos: 5, reason: FilterReason::BadNumber });
    // For different reasons (a bad number in one, an unknown field in the other).
    let none = Filter::compile_for_system([&SYS_A, &SYS_B], big, None).unwrap_err();
    assert_eq!(none, FilterError { pos: 5, reason: FilterReason::NoEventMatches });
    let syntax = Filter::compile_for_system([&SYS_A, &SYS_B], "x == ", None).unwrap_err();
    assert_eq!(syntax.reason, FilterReason::ExpectedValue);
}

/// A random filter expression over [`FIELDS`].
#[derive(Clone, Debug)]
enum Expr {
    A(&'static str, u32),
    B(&'static str, i16),
    S(&'static str, &'static str),
    C(&'static str, u64),
    /// The common field `CPU`.
    Cpu(&'static str, i32),
    /// The common field `comm`.
    Comm(&'static str, &'static str),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
}

const INT_OPS: [&str; 7] = ["==", "!=", "<", "<=", ">", ">=", "&"];
const STR_OPS: [&str; 3] = ["==", "!=", "~"];
const STRINGS: [&str; 5] = ["", "foo", "foobar", "bar", "*o*"];
/// Task names ([`crate::text::Task`] of a thread: `shell` on CPU 0, `work/N` on N).
const COMMS: [&str; 5] = ["shell", "work/1", "work/2", "work/*", "*l"];

fn int_op<T: PartialOrd + Copy + Into<i128>>(op: &str, v: T, x: T) -> bool {
    match op {
        "==" => v == x,
        "!=" => v != x,
        "<" => v < x,
        "<=" => v <= x,
        ">" => v > x,
        ">=" => v >= x,
        _ => v.into() & x.into() != 0,
    }
}

/// A string comparison as filters make it.
fn str_op(op: &str, s: &str, x: &str) -> bool {
    match op {
        "==" => s == x,
        "!=" => s != x,
        _ => crate::event::glob(x, s),
    }
}

impl Expr {
    /// The expression's value for an event of a thread on `cpu` (`cpu < 10`).
    fn eval(&self, a: u32, b: i16, s: &str, c: u64, cpu: i32) -> bool {
        let comm = if cpu == 0 { "shell".to_string() } else { format!("work/{cpu}") };
        match self {
            Expr::A(op, x) => int_op(op, a, *x),
            Expr::B(op, x) => int_op(op, b, *x),
            Expr::C(op, x) => int_op(op, c, *x),
            Expr::S(op, x) => str_op(op, s, x),
            Expr::Cpu(op, x) => int_op(op, cpu, *x),
            Expr::Comm(op, x) => str_op(op, &comm, x),
            Expr::Not(e) => !e.eval(a, b, s, c, cpu),
            Expr::And(l, r) => l.eval(a, b, s, c, cpu) && r.eval(a, b, s, c, cpu),
            Expr::Or(l, r) => l.eval(a, b, s, c, cpu) || r.eval(a, b, s, c, cpu),
        }
    }

    /// The expression as text, with only the parentheses precedence needs.
    fn text(&self, out: &mut String) {
        let wrapped = |e: &Expr, out: &mut String, wrap: bool| {
            if wrap {
                out.push('(');
            }
            e.text(out);
            if wrap {
                out.push(')');
            }
        };
        match self {
            Expr::A(op, x) => out.push_str(&format!("a {op} {x}")),
            Expr::B(op, x) => out.push_str(&format!("b {op} {x}")),
            Expr::C(op, x) => out.push_str(&format!("c{op}{x:#x}")),
            Expr::S(op, x) => out.push_str(&format!("s {op} \"{x}\"")),
            Expr::Cpu(op, x) => out.push_str(&format!("CPU {op} {x}")),
            Expr::Comm(op, x) => out.push_str(&format!("comm {op} \"{x}\"")),
            Expr::Not(e) => {
                out.push('!');
                wrapped(e, out, matches!(**e, Expr::And(..) | Expr::Or(..)) || e.is_leaf());
            }
            Expr::And(l, r) => {
                wrapped(l, out, matches!(**l, Expr::Or(..)));
                out.push_str(" && ");
                wrapped(r, out, matches!(**r, Expr::Or(..) | Expr::And(..)));
            }
            Expr::Or(l, r) => {
                l.text(out);
                out.push_str(" || ");
                wrapped(r, out, matches!(**r, Expr::Or(..)));
            }
        }
    }

    fn is_leaf(&self) -> bool {
        matches!(
            self,
            Expr::A(..) | Expr::B(..) | Expr::C(..) | Expr::S(..) | Expr::Cpu(..) | Expr::Comm(..)
        )
    }
}

/// Small values (likely to be equal to an operand) and the extremes of each type.
fn a_value() -> impl Strategy<Value = u32> {
    prop_oneof![0u32..6, Just(u32::MAX), Just(u32::MAX - 1), any::<u32>()]
}

fn b_value() -> impl Strategy<Value = i16> {
    prop_oneof![-3i16..3, Just(i16::MIN), Just(i16::MAX), any::<i16>()]
}

fn c_value() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..6, Just(u64::MAX), Just(1 << 63), any::<u64>()]
}

fn expr() -> impl Strategy<Value = Expr> {
    let leaf = prop_oneof![
        (prop::sample::select(&INT_OPS[..]), a_value()).prop_map(|(op, x)| Expr::A(op, x)),
        (prop::sample::select(&INT_OPS[..]), b_value()).prop_map(|(op, x)| Expr::B(op, x)),
        (prop::sample::select(&INT_OPS[..]), c_value()).prop_map(|(op, x)| Expr::C(op, x)),
        (prop::sample::select(&STR_OPS[..]), prop::sample::select(&STRINGS[..]))
            .prop_map(|(op, x)| Expr::S(op, x)),
        (prop::sample::select(&INT_OPS[..]), prop_oneof![-1i32..4, any::<i32>()])
            .prop_map(|(op, x)| Expr::Cpu(op, x)),
        (prop::sample::select(&STR_OPS[..]), prop::sample::select(&COMMS[..]))
            .prop_map(|(op, x)| Expr::Comm(op, x)),
    ];
    leaf.prop_recursive(4, 24, 2, |inner| {
        prop_oneof![
            inner.clone().prop_map(|e| Expr::Not(Box::new(e))),
            (inner.clone(), inner.clone()).prop_map(|(l, r)| Expr::And(Box::new(l), Box::new(r))),
            (inner.clone(), inner).prop_map(|(l, r)| Expr::Or(Box::new(l), Box::new(r))),
        ]
    })
}

proptest! {
    #![proptest_config(crate::tests::util::cases(500))]

    #[test]
    #[cfg_attr(miri, ignore = "single-threaded safe code, run natively (36 s under Miri)")]
    fn filter_agrees_with_direct_evaluation(
        e in expr(),
        values in prop::collection::vec(
            (a_value(), b_value(), prop::sample::select(&STRINGS[..3]), c_value(), 0i32..4), 8),
    ) {
        let mut text = String::new();
        e.text(&mut text);
        let filter = Filter::compile(FIELDS, &text).unwrap();
        for (a, b, s, c, cpu) in values {
            let origin = Origin { context: Context::TASK, cpu: cpu as usize };
            prop_assert_eq!(
                judge_at(&filter, origin, a, b, s, c), e.eval(a, b, s, c, cpu),
                "{} with a={} b={} s={:?} c={} on CPU {}", text, a, b, s, c, cpu
            );
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "single-threaded safe code, run natively (532 s under Miri)")]
    fn filter_never_panics_on_any_text_or_payload(
        text in "[ a-c!&|=<>~()\"'0-9x*-]{0,40}",
        bytes in prop::collection::vec(any::<u8>(), 0..40),
    ) {
        match Filter::compile(FIELDS, &text) {
            Ok(f) => {
                f.matches(&bytes, HERE);
                prop_assert_eq!(f.text(), text.trim());
            }
            Err(e) => prop_assert!(e.pos <= text.len(), "{:?} for {:?}", e, text),
        }
    }
}

#[test]
#[cfg_attr(miri, ignore = "single-threaded safe code, run natively (15 s under Miri)")]
fn filter_integer_comparisons_hold_at_the_extremes() {
    let unsigned = [0, 1, 2, u64::MAX / 2, 1 << 63, u64::MAX - 1, u64::MAX];
    let signed = [i16::MIN, i16::MIN + 1, -2, -1, 0, 1, i16::MAX - 1, i16::MAX];
    for op in INT_OPS {
        for &x in &unsigned {
            let filter = Filter::compile(FIELDS, &format!("c {op} {x}")).unwrap();
            for &c in &unsigned {
                assert_eq!(judge(&filter, 0, 0, "", c), int_op(op, c, x), "c={c} {op} {x}");
            }
        }
        for &x in &signed {
            let filter = Filter::compile(FIELDS, &format!("b {op} {x}")).unwrap();
            for &b in &signed {
                assert_eq!(judge(&filter, 0, b, "", 0), int_op(op, b, x), "b={b} {op} {x}");
            }
        }
    }
}

#[test]
fn filter_text_with_any_unicode_is_refused_cleanly() {
    for text in ["a == ü", "ü == 1", "s == \"ü\"", "a == 1 ∧ b == 2", "s ~ é*"] {
        if let Err(e) = Filter::compile(FIELDS, text) {
            assert!(e.pos <= text.len());
            assert!(text.is_char_boundary(e.pos), "{text:?}: {e:?}");
        }
    }
    assert!(passes("s == \"ü\"", 0, 0, "ü", 0));
    assert!(passes("s ~ é*", 0, 0, "één", 0));
    let _ = ToString::to_string(&refused("ü == 1"));
}
