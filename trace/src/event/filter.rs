//! Event filters in ftrace's syntax (`Documentation/trace/events.rst`, "Event
//! filtering"), compiled when set and evaluated on a record's payload from any context.
//!
//! ```text
//! filter    := or
//! or        := and ( "||" and )*
//! and       := unary ( "&&" unary )*
//! unary     := "!" unary | "(" or ")" | predicate
//! predicate := FIELD [".function"] OP VALUE
//! ```
//!
//! Integer fields (`bool` and `char` count as integers: 0/1 and the scalar value) take
//! `== != < <= > >= &` (`&`: the bitwise and is not zero) and a decimal, `0x` hex or
//! `0` octal value (negative for signed fields). String fields take `==`, `!=` and `~`
//! (a glob: `*` any run, `?` any one character, `[a-z]` or `[!...]` a class) and a value quoted with `"` or `'`, or
//! a bare word. Byte-array fields cannot be filtered. `&&` binds tighter than `||`.
//! An address field (unsigned 64-bit) with `.function` takes `==` or `!=` and a
//! function's name: true where the address is inside that function (looked up when
//! the filter is set, in the kernel's symbol table: one range check when it runs).
//!
//! Besides the event's own fields (which come first when names clash), a filter sees
//! where the event was written, as Linux's generic and common fields: `CPU` (also
//! `cpu`, `common_cpu`), `COMM` (also `comm`: the task column's name, such as `shell`,
//! `work/2` or `<irq>`), `common_pid`, `common_flags` and `common_preempt_count` (as
//! the `format` files describe them).
//!
//! A filter compiles to a flat array of predicates, each naming the predicate to test
//! next when it is true and when it is false (or the verdict): evaluation walks it
//! with no stack, no lock, no allocation, short-circuiting as written. Every integer
//! comparison is one range check (see `Test`). A filter reads an event's values
//! either from an encoded payload or, on a tracepoint's path, from its arguments
//! before anything is encoded (`Fields`); both give the same verdict. A field the
//! payload lacks (cut short) makes its comparison false.

extern crate alloc;

use crate::event::dispatch::{INLINE_WORDS, Inline};
use crate::event::format_file::Origin;
use crate::event::{EventDescriptor, glob};
use crate::field::{Field, FieldKind};
use crate::symtab::SymbolTable;
use crate::text::{StackText, Task};
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;
use core::ops::Range;

/// Longest filter text, in bytes.
pub const MAX_FILTER_LEN: usize = 1024;
/// Most predicates in one filter: more than a [`MAX_FILTER_LEN`] text of usual
/// predicates holds (a list of 40 pids or 70 IRQs fits).
pub const MAX_PREDICATES: usize = 128;
/// Deepest nesting of `(` and `!`.
const MAX_NESTING: usize = 16;
// The refusals name the bounds.
const _: () = assert!(MAX_PREDICATES == 128 && MAX_NESTING == 16);

/// Why a filter was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterReason {
    /// Nothing to parse.
    Empty,
    /// Longer than [`MAX_FILTER_LEN`].
    TooLong,
    /// More than [`MAX_PREDICATES`] predicates.
    TooManyPredicates,
    /// Parentheses and `!` nested too deep.
    TooDeep,
    /// A field name was expected.
    ExpectedField,
    /// The event has no field of that name.
    UnknownField,
    /// The field's type (a byte array) cannot be filtered.
    UnfilterableField,
    /// A comparison operator was expected.
    ExpectedOperator,
    /// `~` compares strings only.
    GlobOnInteger,
    /// `< <= > >= &` compare integers only.
    OrderOnString,
    /// A value was expected.
    ExpectedValue,
    /// Not an integer of the field's signedness.
    BadNumber,
    /// A quoted string has no closing quote.
    UnterminatedString,
    /// A `(` has no matching `)`.
    MissingParen,
    /// Text where `&&`, `||`, `)` or the end was expected.
    UnexpectedText,
    /// No event of the system has every field the filter names.
    NoEventMatches,
    /// A field modifier other than `.function`.
    UnknownModifier,
    /// `.function` on a field that is not an address (unsigned 64-bit).
    FunctionOnNonAddress,
    /// `.function` with an operator other than `==` and `!=`.
    FunctionOrder,
    /// `.function` names no function of the symbol table (or there is none).
    UnknownFunction,
}

impl fmt::Display for FilterReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FilterReason::Empty => "empty filter",
            FilterReason::TooLong => "filter too long",
            FilterReason::TooManyPredicates => "too many predicates (at most 128)",
            FilterReason::TooDeep => "parentheses or '!' nested too deep (at most 16)",
            FilterReason::ExpectedField => "field name expected",
            FilterReason::UnknownField => "field not found",
            FilterReason::UnfilterableField => "byte-array fields cannot be filtered",
            FilterReason::ExpectedOperator => "comparison operator expected",
            FilterReason::GlobOnInteger => "'~' is for string fields",
            FilterReason::OrderOnString => "string fields take only ==, != and ~",
            FilterReason::ExpectedValue => "value expected",
            FilterReason::BadNumber => "invalid integer for this field",
            FilterReason::UnterminatedString => "unterminated string",
            FilterReason::MissingParen => "missing ')'",
            FilterReason::UnexpectedText => "'&&', '||' or ')' expected",
            FilterReason::NoEventMatches => "no event of the system has these fields",
            FilterReason::UnknownModifier => "unknown field modifier ('.function' only)",
            FilterReason::FunctionOnNonAddress => "'.function' is for address fields (u64)",
            FilterReason::FunctionOrder => "'.function' takes only == and !=",
            FilterReason::UnknownFunction => {
                "no function of that name or at that address (see available_filter_functions)"
            }
        })
    }
}

/// A refused filter: the byte offset in the text where the problem is, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FilterError {
    /// Byte offset into the filter text as given.
    pub pos: usize,
    /// What is wrong there.
    pub reason: FilterReason,
}

impl core::error::Error for FilterError {}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "parse error at {}: {}", self.pos, self.reason)
    }
}

/// An integer comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IntOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    BitAnd,
}

/// A string comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StrOp {
    Eq,
    Ne,
    Glob,
}

/// An operator as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Int(IntOp),
    Str(StrOp),
}

/// What a predicate does with its field.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Test {
    /// Every integer comparison as one range check: the field's value `v` (sign-
    /// extended if signed) passes if `(v & mask) - lo <= span` (wrapping). Signed
    /// ordering is unsigned ordering with the sign bit of both sides flipped, and
    /// flipping the top bit is adding 2^63, so it is folded into `lo`; `&` masks with
    /// its operand; a negated comparison (`!=`, `<`, `>`) swaps the node's targets.
    Int { mask: u64, lo: u64, span: u64 },
    /// The operand is `text[range]`.
    Str(StrOp, Range<usize>),
}

impl Test {
    /// The test of `op` with `value` (sign-extended if `signed`) on an integer field,
    /// and whether its targets are swapped.
    fn int(op: IntOp, value: u64, signed: bool) -> (Test, bool) {
        let flip = if signed { 1 << 63 } else { 0 };
        let x = value ^ flip;
        let (flip, mask, lo, span, negated) = match op {
            // `v & value != 0`: not in [0, 0] after masking.
            IntOp::BitAnd => (0, value, 0, 0, true),
            IntOp::Eq | IntOp::Ne => (flip, u64::MAX, x, 0, op == IntOp::Ne),
            // `v >= x`, or not (`<`).
            IntOp::Ge | IntOp::Lt => (flip, u64::MAX, x, u64::MAX - x, op == IntOp::Lt),
            // `v <= x`, or not (`>`).
            IntOp::Le | IntOp::Gt => (flip, u64::MAX, 0, x, op == IntOp::Gt),
        };
        (Test::Int { mask, lo: lo.wrapping_sub(flip), span }, negated)
    }
}

/// Where a predicate's field is, for each source of values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FieldRef {
    /// The field's index in the event's fields (typed arguments are read by it;
    /// `u16::MAX` for a common field).
    pub(crate) index: u16,
    /// Where it sits in an encoded payload.
    location: Location,
    /// Bytes of an integer field (0 for a string).
    width: u8,
    /// Whether the integer is signed (sign-extended when read).
    signed: bool,
    /// Bits of a word above the integer: `64 - 8 * width` (unused for a string).
    shift: u8,
}

impl FieldRef {
    /// The name a histogram shows the field by where ftrace's differs from how it
    /// was written: `common_cpu` for the CPU (`CPU`, `cpu`), `common_comm` for the
    /// task column's name (`COMM`, `comm`); `None`: as written.
    pub(crate) fn hist_name(&self) -> Option<&'static str> {
        match self.location {
            Location::Common(Common::Cpu) => Some("common_cpu"),
            Location::Comm => Some("common_comm"),
            _ => None,
        }
    }

    /// The field named `name` among an event's `fields` (the event's own first, as
    /// in Linux, then the common fields every event has), and its kind.
    pub(crate) fn resolve(fields: &[Field<'_>], name: &str) -> Option<(FieldRef, FieldKind)> {
        let (index, kind, location) = match fields.iter().position(|f| f.name == name) {
            Some(index) => {
                let mut at = Some(0usize);
                for field in &fields[..index] {
                    at = at.and_then(|at| Some(at + field.kind.fixed_size()?));
                }
                let location = match at {
                    Some(at) if at <= usize::from(u16::MAX) => Location::Fixed(at as u16),
                    _ => Location::Walk,
                };
                (u16::try_from(index).ok()?, fields[index].kind, location)
            }
            None => {
                let (location, kind) = Common::named(name)?;
                (u16::MAX, kind, location)
            }
        };
        let width = kind.fixed_size().unwrap_or(0) as u8;
        let signed =
            matches!(kind, FieldKind::I8 | FieldKind::I16 | FieldKind::I32 | FieldKind::I64);
        let field = FieldRef { index, location, width, shift: 8 * (8 - width.clamp(1, 8)), signed };
        Some((field, kind))
    }

    /// Whether `other` has the same type: a string, or an integer of the same width
    /// and signedness (wherever either lies).
    pub(crate) fn same_type(&self, other: &FieldRef) -> bool {
        (self.width, self.signed) == (other.width, other.signed)
    }

    /// Whether the field is an integer its reader sign-extends.
    pub(crate) fn signed(&self) -> bool {
        self.signed
    }

    /// The integer field's value in an event whose values `fields` gives, written at
    /// `origin` (`None`: the payload lacks it). For an integer field only.
    #[inline(always)]
    pub(crate) fn int<F: Fields + ?Sized>(&self, fields: &F, origin: Origin) -> Option<u64> {
        match self.location {
            Location::Common(common) => Some(common.int(origin)),
            _ => fields.int(self),
        }
    }

    /// Passes the string field's value to `f`, in an event whose values `fields`
    /// gives, written at `origin` (`COMM` is the task column's name, formatted on the
    /// stack); nothing if the payload lacks it or the field is an integer.
    pub(crate) fn with_str<F: Fields + ?Sized>(
        &self,
        fields: &F,
        origin: Origin,
        f: impl FnOnce(&str),
    ) {
        match self.location {
            Location::Comm => f(comm_of(origin).as_str()),
            Location::Common(_) => {}
            _ if self.width != 0 => {}
            _ => {
                if let Some(s) = fields.str(self) {
                    f(s)
                }
            }
        }
    }
}

/// Where a predicate's field sits in the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Location {
    /// At this byte offset (every field before it has a fixed size).
    Fixed(u16),
    /// After a string: found by decoding the fields before it, in order.
    Walk,
    /// Not in the payload: an integer of where the event was written.
    Common(Common),
    /// Not in the payload: `COMM`, `comm`, the name of the writer's task column.
    Comm,
}

/// An integer field every event has: where it was written ([`Origin`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Common {
    /// `CPU`, `cpu`, `common_cpu`: the writer's CPU.
    Cpu,
    /// `common_pid`: the id of the task column.
    Pid,
    /// `common_flags`: Linux's flag bits for the writer's context.
    Flags,
    /// `common_preempt_count`: the interrupt nesting depth.
    PreemptCount,
}

impl Common {
    /// Where the common field named `name` is, and its kind.
    fn named(name: &str) -> Option<(Location, FieldKind)> {
        let (common, kind) = match name {
            "COMM" | "comm" | "common_comm" => return Some((Location::Comm, FieldKind::Str)),
            "CPU" | "cpu" | "common_cpu" => (Common::Cpu, FieldKind::I32),
            "common_pid" => (Common::Pid, FieldKind::I32),
            "common_flags" => (Common::Flags, FieldKind::U8),
            "common_preempt_count" => (Common::PreemptCount, FieldKind::U8),
            _ => return None,
        };
        Some((Location::Common(common), kind))
    }

    /// An integer field's value for an event written at `origin` (sign-extended).
    #[inline(always)]
    fn int(self, origin: Origin) -> u64 {
        match self {
            Common::Cpu => i64::try_from(origin.cpu).unwrap_or(i64::MAX) as u64,
            Common::Pid => i64::from(origin.pid()) as u64,
            Common::Flags => u64::from(origin.flags()),
            Common::PreemptCount => u64::from(origin.preempt_count()),
        }
    }
}

/// A task name, written on the stack (the longest is `work/` and a CPU index).
type Comm = StackText<32>;

/// The name of the task at `origin`.
fn comm_of(origin: Origin) -> Comm {
    StackText::of(format_args!("{}", Task::of(origin.context, origin.cpu)))
}

/// Verdict targets: past every node index.
const ACCEPT: u16 = u16::MAX;
const REJECT: u16 = u16::MAX - 1;

/// One compiled predicate: test the field, then go to `on_true` or `on_false` (a node
/// of lower index, or a verdict).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Node {
    field: FieldRef,
    test: Test,
    on_true: u16,
    on_false: u16,
    /// Where a payload that lacks the field goes (the comparison as written is
    /// false: for a negated one, `on_true`).
    on_missing: u16,
}

/// An event's values as a filter reads them: from an encoded payload, or from the
/// arguments of a tracepoint before anything is encoded. Both give what the record
/// holds (or would hold).
pub(crate) trait Fields {
    /// The integer field's value: sign-extended if signed, zero-extended otherwise
    /// (`None`: the payload lacks it).
    fn int(&self, field: &FieldRef) -> Option<u64>;
    /// The string field (`None`: the payload lacks it).
    fn str(&self, field: &FieldRef) -> Option<&str>;
}

/// A compiled filter for one event's fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filter {
    /// The filter as set (trimmed), for reading back; string operands point into it.
    text: Box<str>,
    nodes: Box<[Node]>,
    entry: u16,
    /// The event's field kinds, to find fields located after a string.
    kinds: Box<[FieldKind]>,
    /// The nodes as steps over a small payload's words, when there are at most
    /// [`MAX_STEPS`] and every one compares an integer at a fixed place among them.
    steps: Option<Steps>,
}

/// Most nodes a filter tested as [`Steps`] has: one bit each in an index of a `u64`.
const MAX_STEPS: usize = 6;

/// A filter's nodes as [`Step`]s, all tested at once ([`Filter::matches_inline`]):
/// no test waits for another's result. Bit `i` of an index is node `i`'s result,
/// and bit `index` of `verdicts` is the filter's verdict on those results.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Steps {
    steps: Box<[Step]>,
    verdicts: u64,
}

impl Steps {
    /// The steps of `nodes` (entered at `entry`), if there are few enough and each
    /// is one.
    fn of(nodes: &[Node], entry: u16) -> Option<Steps> {
        if nodes.len() > MAX_STEPS {
            return None;
        }
        let steps = nodes.iter().map(Step::of).collect::<Option<Box<[Step]>>>()?;
        let mut verdicts = 0;
        for index in 0..1u64 << nodes.len() {
            let mut at = entry;
            // Every jump goes to a lower index or to a verdict, past every index.
            while let Some(node) = nodes.get(usize::from(at)) {
                at = if index >> at & 1 != 0 { node.on_true } else { node.on_false };
            }
            verdicts |= u64::from(at == ACCEPT) << index;
        }
        Some(Steps { steps, verdicts })
    }
}

/// A node that compares an integer at a fixed place of a small payload
/// ([`Filter::matches_inline`]): a word is read at `at`, and the bytes beyond the
/// integer are masked off (`mask` holds the field's width when it is unsigned) or,
/// for a signed field, shifted out with its sign.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Step {
    mask: u64,
    lo: u64,
    span: u64,
    at: u8,
    shift: u8,
    signed: bool,
}

impl Step {
    /// The step of `node`, if it is one.
    fn of(node: &Node) -> Option<Step> {
        let Node { field, test, .. } = node;
        match (field.location, test) {
            (Location::Fixed(at), &Test::Int { mask, lo, span })
                if usize::from(at) < 8 * INLINE_WORDS =>
            {
                // An unsigned field needs no extension: the bytes beyond it are
                // masked off with the test's own mask.
                let mask = if field.signed { mask } else { mask & (u64::MAX >> field.shift) };
                Some(Step {
                    mask,
                    lo,
                    span,
                    at: at as u8,
                    shift: field.shift,
                    signed: field.signed,
                })
            }
            _ => None,
        }
    }
}

/// Whether integer `v` passes the range check of a [`Test::Int`].
#[inline(always)]
fn in_range(v: u64, mask: u64, lo: u64, span: u64) -> bool {
    (v & mask).wrapping_sub(lo) <= span
}

/// The integer in the low bytes of `word`, the `shift` bits above it dropped:
/// sign-extended if `signed`, zero-extended otherwise.
#[inline(always)]
fn extend(word: u64, shift: u8, signed: bool) -> u64 {
    let v = word << shift;
    if signed { ((v as i64) >> shift) as u64 } else { v >> shift }
}

/// A parsed predicate, before it is bound to an event's fields.
#[derive(Clone, Debug)]
struct Predicate {
    field: Range<usize>,
    /// The field is written `FIELD.function`: the value names a function.
    function: bool,
    op: Op,
    op_pos: usize,
    value: Range<usize>,
    quoted: bool,
}

/// A parsed filter expression.
#[derive(Clone, Debug)]
enum Ast {
    Pred(usize),
    Not(Box<Ast>),
    And(Box<Ast>, Box<Ast>),
    Or(Box<Ast>, Box<Ast>),
}

/// A filter parsed but not bound to fields: what a system filter shares among its
/// events.
struct Parsed<'t> {
    /// The trimmed text, and where it starts in the text as given.
    text: &'t str,
    offset: usize,
    preds: Vec<Predicate>,
    ast: Ast,
}

impl Filter {
    /// Compiles `text` for an event with `fields`. A bad filter gets the position
    /// and the reason.
    pub fn compile(fields: &[Field<'_>], text: &str) -> Result<Filter, FilterError> {
        Filter::compile_with(fields, text, None)
    }

    /// [`Filter::compile`], with `.function` names looked up in `symbols`.
    pub fn compile_with(
        fields: &[Field<'_>],
        text: &str,
        symbols: Option<&SymbolTable<'_>>,
    ) -> Result<Filter, FilterError> {
        Parsed::new(text)?.bind(fields, symbols)
    }

    /// Compiles `text` for every event of `events` whose fields it fits (ftrace's
    /// `events/SYSTEM/filter`: the others keep their filter). A syntax error, or a
    /// filter that fits no event, is an error: the one every event gave if they all
    /// gave the same (a value out of a field's range, say), `NoEventMatches`
    /// otherwise. `.function` names are looked up in `symbols`.
    pub fn compile_for_system<'e>(
        events: impl IntoIterator<Item = &'e EventDescriptor>,
        text: &str,
        symbols: Option<&SymbolTable<'_>>,
    ) -> Result<Vec<(&'e EventDescriptor, Filter)>, FilterError> {
        let parsed = Parsed::new(text)?;
        // The first event's error, and whether every other event gave the same.
        let mut refused: Option<(FilterError, bool)> = None;
        let mut out = Vec::new();
        for event in events {
            match parsed.bind(event.fields, symbols) {
                Ok(filter) => out.push((event, filter)),
                Err(e) => match &mut refused {
                    Some((first, same)) => *same &= *first == e,
                    None => refused = Some((e, true)),
                },
            }
        }
        if out.is_empty() {
            return Err(match refused {
                Some((e, true)) => e,
                Some((e, false)) => {
                    FilterError { pos: e.pos, reason: FilterReason::NoEventMatches }
                }
                None => FilterError { pos: parsed.offset, reason: FilterReason::NoEventMatches },
            });
        }
        Ok(out)
    }

    /// The filter's text, as ftrace's `filter` file reads it back.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The field kinds of the event the filter was compiled for.
    pub(crate) fn kinds(&self) -> &[FieldKind] {
        &self.kinds
    }

    /// Whether a payload of the event the filter was compiled for, written at
    /// `origin`, passes. Callable from any context: no lock, no allocation.
    pub fn matches(&self, payload: &[u8], origin: Origin) -> bool {
        self.eval(&Encoded { payload, kinds: &self.kinds }, origin)
    }

    /// Whether a small payload of `len` bytes, encoded into `words`, written at
    /// `origin`, passes: [`Filter::matches`] with each integer at a fixed place read
    /// as one word. Callable from any context: no lock, no allocation.
    #[inline(always)]
    pub(crate) fn matches_inline(&self, words: &Inline, len: usize, origin: Origin) -> bool {
        let Some(Steps { steps, verdicts }) = &self.steps else {
            let bytes = words.as_flattened();
            return self.matches(bytes.get(..len).unwrap_or(bytes), origin);
        };
        let bytes = words.as_flattened();
        let mut index = 0;
        // The last step first: each result shifts the ones before it up a bit.
        for step in steps.iter().rev() {
            // `step.at` is below 8 * INLINE_WORDS (the remainder changes nothing; it
            // shows the compiler that the word lies inside `words`, one word longer).
            let from = usize::from(step.at) % (8 * INLINE_WORDS);
            let word: [u8; 8] = bytes[from..from + 8].try_into().unwrap_or([0; 8]);
            let word = u64::from_le_bytes(word);
            let v = if step.signed { extend(word, step.shift, true) } else { word };
            index = index << 1 | u64::from(in_range(v, step.mask, step.lo, step.span));
        }
        verdicts >> index & 1 != 0
    }

    /// Whether the event whose values `fields` gives, written at `origin`, passes: a
    /// walk of the nodes, short-circuiting as written, each integer comparison a few
    /// instructions without a branch. Callable from any context: no lock, no
    /// allocation.
    #[inline(always)]
    pub(crate) fn eval<F: Fields + ?Sized>(&self, fields: &F, origin: Origin) -> bool {
        let mut at = self.entry;
        // Every jump goes to a lower index or to a verdict, past every index.
        while let Some(node) = self.nodes.get(usize::from(at)) {
            let location = node.field.location;
            let pass = match &node.test {
                &Test::Int { mask, lo, span } => match node.field.int(fields, origin) {
                    Some(v) => in_range(v, mask, lo, span),
                    None => {
                        at = node.on_missing;
                        continue;
                    }
                },
                Test::Str(op, range) if location == Location::Comm => {
                    self.comm_test(*op, range, origin)
                }
                Test::Str(op, range) => match fields.str(&node.field) {
                    Some(s) => self.str_test(*op, range, s),
                    None => {
                        at = node.on_missing;
                        continue;
                    }
                },
            };
            at = if pass { node.on_true } else { node.on_false };
        }
        at == ACCEPT
    }

    /// A comparison of the name of the task at `origin` with `text[operand]`.
    #[inline(never)]
    fn comm_test(&self, op: StrOp, operand: &Range<usize>, origin: Origin) -> bool {
        self.str_test(op, operand, comm_of(origin).as_str())
    }

    /// A string comparison with the operand `text[operand]`.
    #[inline(never)]
    fn str_test(&self, op: StrOp, operand: &Range<usize>, s: &str) -> bool {
        let operand = self.text.get(operand.clone()).unwrap_or_default();
        match op {
            StrOp::Eq => s == operand,
            StrOp::Ne => s != operand,
            StrOp::Glob => glob(operand, s),
        }
    }
}

/// An encoded payload of an event whose fields have `kinds`.
pub(crate) struct Encoded<'a> {
    pub(crate) payload: &'a [u8],
    pub(crate) kinds: &'a [FieldKind],
}

impl Encoded<'_> {
    /// Where a field starts: fixed, or past the strings before it.
    #[inline(always)]
    fn offset(&self, field: &FieldRef) -> Option<usize> {
        match field.location {
            Location::Fixed(at) => Some(usize::from(at)),
            Location::Walk => {
                let mut at = 0;
                for kind in self.kinds.get(..usize::from(field.index))? {
                    at += match kind.fixed_size() {
                        Some(size) => size,
                        None => 2 + usize::from(u16::from_le_bytes(array_at(self.payload, at)?)),
                    };
                }
                Some(at)
            }
            Location::Common(_) | Location::Comm => None,
        }
    }
}

impl Fields for Encoded<'_> {
    #[inline(always)]
    fn int(&self, field: &FieldRef) -> Option<u64> {
        let v = int_at(self.payload, self.offset(field)?, field.width)?;
        Some(extend(v, field.shift, field.signed))
    }

    #[inline(always)]
    fn str(&self, field: &FieldRef) -> Option<&str> {
        str_at(self.payload, self.offset(field)?)
    }
}

/// `N` bytes of `payload` at `at`, if it has them.
#[inline(always)]
fn array_at<const N: usize>(payload: &[u8], at: usize) -> Option<[u8; N]> {
    payload.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// The little-endian integer of `width` (1, 2, 4 or 8) bytes at `at`.
#[inline(always)]
fn int_at(payload: &[u8], at: usize, width: u8) -> Option<u64> {
    Some(match width {
        1 => u64::from(*payload.get(at)?),
        2 => u64::from(u16::from_le_bytes(array_at(payload, at)?)),
        4 => u64::from(u32::from_le_bytes(array_at(payload, at)?)),
        _ => u64::from_le_bytes(array_at(payload, at)?),
    })
}

/// The string field (2-byte length, UTF-8 bytes) at `at`.
fn str_at(payload: &[u8], at: usize) -> Option<&str> {
    let len = usize::from(u16::from_le_bytes(array_at(payload, at)?));
    core::str::from_utf8(payload.get(at + 2..at + 2 + len)?).ok()
}

impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Tokens of the filter language.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token {
    Word,
    Quoted,
    Op(Op),
    And,
    Or,
    Not,
    Open,
    Close,
    End,
    Bad(FilterReason),
}

/// A recursive-descent parser over the trimmed text; positions are in the text as
/// given.
struct Parser<'t> {
    text: &'t str,
    offset: usize,
    at: usize,
    depth: usize,
    preds: Vec<Predicate>,
}

fn word_byte(b: u8) -> bool {
    !b.is_ascii_whitespace() && !b"()&|!=<>~\"'".contains(&b)
}

impl<'t> Parsed<'t> {
    fn new(given: &'t str) -> Result<Self, FilterError> {
        let text = given.trim();
        let offset = given.len() - given.trim_start().len();
        if given.len() > MAX_FILTER_LEN {
            return Err(FilterError { pos: MAX_FILTER_LEN, reason: FilterReason::TooLong });
        }
        if text.is_empty() {
            return Err(FilterError { pos: 0, reason: FilterReason::Empty });
        }
        let mut parser = Parser { text, offset, at: 0, depth: 0, preds: Vec::new() };
        let ast = parser.or()?;
        match parser.next_token() {
            (Token::End, _) => {}
            (_, range) => return Err(parser.error(range.start, FilterReason::UnexpectedText)),
        }
        Ok(Parsed { text, offset, preds: parser.preds, ast })
    }

    /// Binds the parsed filter to `fields` and compiles it.
    fn bind(
        &self,
        fields: &[Field<'_>],
        symbols: Option<&SymbolTable<'_>>,
    ) -> Result<Filter, FilterError> {
        let err = |pos: usize, reason| FilterError { pos: self.offset + pos, reason };
        let mut bound = Vec::with_capacity(self.preds.len());
        for pred in &self.preds {
            let name = &self.text[pred.field.clone()];
            // At the operator after the name, as ftrace places it.
            let (field, kind) = FieldRef::resolve(fields, name)
                .ok_or(err(pred.op_pos, FilterReason::UnknownField))?;
            let value = &self.text[pred.value.clone()];
            let bad_number = err(pred.value.start, FilterReason::BadNumber);
            if pred.function {
                bound.push((
                    field,
                    Self::function_test(pred, kind, value, symbols, err)?,
                    pred.op == Op::Int(IntOp::Ne),
                ));
                continue;
            }
            let (test, negated) = match (kind, pred.op) {
                (FieldKind::Bytes(_), _) => {
                    return Err(err(pred.field.start, FilterReason::UnfilterableField));
                }
                (FieldKind::Str, Op::Str(op)) => (Test::Str(op, pred.value.clone()), false),
                (FieldKind::Str, Op::Int(IntOp::Eq)) => {
                    (Test::Str(StrOp::Eq, pred.value.clone()), false)
                }
                (FieldKind::Str, Op::Int(IntOp::Ne)) => {
                    (Test::Str(StrOp::Ne, pred.value.clone()), false)
                }
                (FieldKind::Str, Op::Int(_)) => {
                    return Err(err(pred.op_pos, FilterReason::OrderOnString));
                }
                (_, Op::Str(_)) => return Err(err(pred.op_pos, FilterReason::GlobOnInteger)),
                (_, Op::Int(_)) if pred.quoted => return Err(bad_number),
                (FieldKind::I8 | FieldKind::I16 | FieldKind::I32 | FieldKind::I64, Op::Int(op)) => {
                    Test::int(op, parse_signed(value).ok_or(bad_number)? as u64, true)
                }
                (_, Op::Int(op)) => Test::int(op, parse_unsigned(value).ok_or(bad_number)?, false),
            };
            bound.push((field, test, negated));
        }
        let mut nodes = Vec::with_capacity(bound.len());
        let entry = emit(&self.ast, &bound, &mut nodes, ACCEPT, REJECT);
        Ok(Filter {
            text: self.text.into(),
            steps: Steps::of(&nodes, entry),
            nodes: nodes.into_boxed_slice(),
            entry,
            kinds: fields.iter().map(|f| f.kind).collect(),
        })
    }
}

impl Parsed<'_> {
    /// The test of a `FIELD.function` predicate on a field of `kind`: the address
    /// is inside the function `name` names in `symbols` (`!=` negates it).
    fn function_test(
        pred: &Predicate,
        kind: FieldKind,
        name: &str,
        symbols: Option<&SymbolTable<'_>>,
        err: impl Fn(usize, FilterReason) -> FilterError,
    ) -> Result<Test, FilterError> {
        if kind != FieldKind::U64 {
            return Err(err(pred.field.start, FilterReason::FunctionOnNonAddress));
        }
        if !matches!(pred.op, Op::Int(IntOp::Eq | IntOp::Ne)) {
            return Err(err(pred.op_pos, FilterReason::FunctionOrder));
        }
        let unknown = err(pred.value.start, FilterReason::UnknownFunction);
        // A name, or an address in the function (unquoted), as ftrace takes them.
        let address = if pred.quoted { None } else { parse_unsigned(name) };
        let range = |s: &SymbolTable<'_>| match address {
            Some(address) => s.range_at(address),
            None => s.range_of(name),
        };
        let (start, end) = symbols.and_then(range).ok_or(unknown)?;
        Ok(Test::Int {
            mask: u64::MAX,
            lo: start,
            span: end.saturating_sub(start).saturating_sub(1),
        })
    }
}

/// Compiles `ast` so that it continues at `on_true` or `on_false`; returns its entry.
/// The right operand is emitted first, so every jump goes to a lower index (or a
/// verdict): evaluation ends. Each predicate is emitted once.
fn emit(
    ast: &Ast,
    bound: &[(FieldRef, Test, bool)],
    nodes: &mut Vec<Node>,
    on_true: u16,
    on_false: u16,
) -> u16 {
    match ast {
        Ast::Pred(i) => {
            let (field, test, negated) = bound[*i].clone();
            // A field the payload lacks makes the comparison as written false.
            let on_missing = on_false;
            let (on_true, on_false) =
                if negated { (on_false, on_true) } else { (on_true, on_false) };
            nodes.push(Node { field, test, on_true, on_false, on_missing });
            (nodes.len() - 1) as u16
        }
        Ast::Not(inner) => emit(inner, bound, nodes, on_false, on_true),
        Ast::And(a, b) => {
            let b = emit(b, bound, nodes, on_true, on_false);
            emit(a, bound, nodes, b, on_false)
        }
        Ast::Or(a, b) => {
            let b = emit(b, bound, nodes, on_true, on_false);
            emit(a, bound, nodes, on_true, b)
        }
    }
}

/// An unsigned integer: an optional `+`, then decimal, `0x` hex or `0` octal (as
/// `kstrtoull` base 0).
pub(crate) fn parse_unsigned(s: &str) -> Option<u64> {
    let s = s.strip_prefix('+').unwrap_or(s);
    let (digits, radix) = if let Some(hex) = s.strip_prefix("0x").or(s.strip_prefix("0X")) {
        (hex, 16)
    } else if s.len() > 1 && s.starts_with('0') {
        (&s[1..], 8)
    } else {
        (s, 10)
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// A signed integer: an optional `-` or `+`, then as [`parse_unsigned`], within
/// `i64` (as `kstrtoll`: not both signs).
pub(crate) fn parse_signed(s: &str) -> Option<i64> {
    match s.strip_prefix('-') {
        Some(magnitude) if magnitude.starts_with('+') => None,
        Some(magnitude) => 0i64.checked_sub_unsigned(parse_unsigned(magnitude)?),
        None => i64::try_from(parse_unsigned(s)?).ok(),
    }
}

impl Parser<'_> {
    fn error(&self, at: usize, reason: FilterReason) -> FilterError {
        FilterError { pos: self.offset + at, reason }
    }

    fn skip_space(&mut self) {
        let rest = &self.text[self.at..];
        self.at += rest.len() - rest.trim_start().len();
    }

    fn peek(&mut self) -> (Token, Range<usize>) {
        let at = self.at;
        let token = self.next_token();
        self.at = at;
        token
    }

    /// The next token and its range: an operator, punctuation, a word or a quoted
    /// string.
    fn next_token(&mut self) -> (Token, Range<usize>) {
        self.skip_space();
        let start = self.at;
        let rest = &self.text.as_bytes()[start..];
        let two = |a: u8, b: u8| rest.len() >= 2 && rest[0] == a && rest[1] == b;
        let (token, len) = match rest.first() {
            None => (Token::End, 0),
            _ if two(b'&', b'&') => (Token::And, 2),
            _ if two(b'|', b'|') => (Token::Or, 2),
            _ if two(b'=', b'=') => (Token::Op(Op::Int(IntOp::Eq)), 2),
            _ if two(b'!', b'=') => (Token::Op(Op::Int(IntOp::Ne)), 2),
            _ if two(b'<', b'=') => (Token::Op(Op::Int(IntOp::Le)), 2),
            _ if two(b'>', b'=') => (Token::Op(Op::Int(IntOp::Ge)), 2),
            Some(b'<') => (Token::Op(Op::Int(IntOp::Lt)), 1),
            Some(b'>') => (Token::Op(Op::Int(IntOp::Gt)), 1),
            Some(b'&') => (Token::Op(Op::Int(IntOp::BitAnd)), 1),
            Some(b'~') => (Token::Op(Op::Str(StrOp::Glob)), 1),
            Some(b'!') => (Token::Not, 1),
            Some(b'(') => (Token::Open, 1),
            Some(b')') => (Token::Close, 1),
            Some(&q @ (b'"' | b'\'')) => match rest[1..].iter().position(|&b| b == q) {
                Some(end) => (Token::Quoted, end + 2),
                None => (Token::Bad(FilterReason::UnterminatedString), rest.len()),
            },
            Some(&b) if word_byte(b) => {
                (Token::Word, rest.iter().position(|&b| !word_byte(b)).unwrap_or(rest.len()))
            }
            Some(_) => (Token::Bad(FilterReason::ExpectedOperator), 1),
        };
        self.at = start + len;
        (token, start..start + len)
    }

    fn or(&mut self) -> Result<Ast, FilterError> {
        let mut left = self.and()?;
        while self.peek().0 == Token::Or {
            self.next_token();
            left = Ast::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Ast, FilterError> {
        let mut left = self.unary()?;
        while self.peek().0 == Token::And {
            self.next_token();
            left = Ast::And(Box::new(left), Box::new(self.unary()?));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Ast, FilterError> {
        let (token, range) = self.peek();
        match token {
            Token::Not | Token::Open => {
                self.next_token();
                if self.depth == MAX_NESTING {
                    return Err(self.error(range.start, FilterReason::TooDeep));
                }
                self.depth += 1;
                let inner = if token == Token::Not {
                    Ast::Not(Box::new(self.unary()?))
                } else {
                    let inner = self.or()?;
                    let (close, at) = self.next_token();
                    if close != Token::Close {
                        return Err(self.error(at.start, FilterReason::MissingParen));
                    }
                    inner
                };
                self.depth -= 1;
                Ok(inner)
            }
            _ => self.predicate(),
        }
    }

    fn predicate(&mut self) -> Result<Ast, FilterError> {
        let (token, field) = self.next_token();
        match token {
            Token::Word => {}
            Token::End => return Err(self.error(field.start, FilterReason::ExpectedField)),
            Token::Bad(reason @ FilterReason::UnterminatedString) => {
                return Err(self.error(field.start, reason));
            }
            _ => return Err(self.error(field.start, FilterReason::ExpectedField)),
        }
        let name = |text: &str| {
            !text.is_empty() && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        };
        let (field, function) = match self.text[field.clone()].split_once('.') {
            None if name(&self.text[field.clone()]) => (field, false),
            Some((base, modifier)) if name(base) => {
                if modifier != "function" {
                    let at = field.start + base.len();
                    return Err(self.error(at, FilterReason::UnknownModifier));
                }
                (field.start..field.start + base.len(), true)
            }
            _ => return Err(self.error(field.start, FilterReason::ExpectedField)),
        };
        let (token, op_range) = self.next_token();
        let Token::Op(op) = token else {
            return Err(self.error(op_range.start, FilterReason::ExpectedOperator));
        };
        let (token, value) = self.next_token();
        let (value, quoted) = match token {
            Token::Word => (value, false),
            Token::Quoted => (value.start + 1..value.end - 1, true),
            Token::Bad(reason @ FilterReason::UnterminatedString) => {
                return Err(self.error(value.start, reason));
            }
            _ => return Err(self.error(value.start, FilterReason::ExpectedValue)),
        };
        if self.preds.len() == MAX_PREDICATES {
            return Err(self.error(field.start, FilterReason::TooManyPredicates));
        }
        self.preds.push(Predicate { field, function, op, op_pos: op_range.start, value, quoted });
        Ok(Ast::Pred(self.preds.len() - 1))
    }
}
