//! Histogram triggers (`hist`, ftrace's `Documentation/trace/histogram.rst`): each
//! event that fires the trigger adds to a running total in a table keyed on some of
//! its fields.
//!
//! ```text
//! hist:keys=FIELD[.MOD][,FIELD...][:vals=FIELD[,FIELD...]][:sort=FIELD[.ORDER][,FIELD]]
//!     [:size=N][:pause][:cont][:clear] [if FILTER]
//! ```
//!
//! Keys are up to [`MAX_KEYS`] fields: integers (`.hex` prints them in hex, `.log2`
//! keys on the power of two above the value, `.buckets=N` on the multiple of `N` at
//! or below it), strings (their first
//! [`STRING_KEY_BYTES`] bytes) and the common fields (`CPU`, `common_pid`, `COMM`);
//! or, alone, `common_stacktrace` (`stacktrace`): the caller's return addresses, as
//! the platform's unwinder gives them.
//! Values are up to [`MAX_VALS`] integer fields, summed; `hitcount` counts the events
//! and is always kept, and shown first but with `nohitcount` (`NOHC`), which needs
//! another value. A value is shown as it is, in hex (`.hex`), as its share of the
//! entries' total (`.percent`) or as a bar scaled to the largest entry's (`.graph`);
//! `hitcount` with a modifier is such a value, beside the count as it is. `sort` takes at most two of `hitcount`, a key or a value, each
//! `.ascending` (the default) or `.descending`. `size` is the most entries kept, a
//! power of two from [`MIN_SIZE`] to [`MAX_SIZE`] (default 2048).
//!
//! A histogram may define variables (`NAME=EXPR`, [`var`]), which histograms on
//! other events read to measure between two events; `vals=$NAME` sums one.
//!
//! The table events add to from any context is [`table`].

use crate::event::dispatch::Body;
use crate::event::filter::{Encoded, FieldRef, Fields};
use crate::event::format_file::Origin;
use crate::field::{Field, FieldKind};
use crate::symtab::SymbolTable;
use crate::sync::{AtomicBool, Ordering::Relaxed};
use crate::text::{Controls, StackText};
use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt::{self, Write};

pub(crate) mod table;
mod var;
pub use table::MAX_HIST_BYTES;
use table::{Entry, Table};
pub use var::{MAX_OPERATORS, MAX_REFS, MAX_SAVED, MAX_VARS};
use var::{Outcome, Vars};

/// Most key fields.
pub const MAX_KEYS: usize = 3;
/// Most value fields besides `hitcount`.
pub const MAX_VALS: usize = 3;
/// Most sort fields.
const MAX_SORT: usize = 2;
/// Words of key a slot holds (an integer takes one, a string [`STRING_KEY_WORDS`],
/// the caller's stack [`STACK_WORDS`]).
const KEY_WORDS: usize = 8;
/// Return addresses a `common_stacktrace` key keeps (as the `stacktrace` trigger).
const STACK_WORDS: usize = crate::tracer::trigger::STACK_FRAMES;
/// Words a string key takes.
const STRING_KEY_WORDS: usize = 4;
/// Bytes of a string a key keeps (the rest is cut off; shorter ones are zero-padded).
pub const STRING_KEY_BYTES: usize = 8 * STRING_KEY_WORDS;
/// Fewest entries a histogram keeps (`size`).
pub const MIN_SIZE: usize = 128;
/// The least `size` a `hist` line takes: [`MIN_SIZE`], and 2 under loom, so that a
/// model can clear a histogram in a few steps.
const LEAST_SIZE: usize = if cfg!(loom) { 2 } else { MIN_SIZE };
/// Most entries a histogram keeps (`size`).
pub const MAX_SIZE: usize = 16384;
/// Entries kept without `size`.
const DEFAULT_SIZE: usize = 2048;

/// Why a `hist` line was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HistReason {
    /// No `keys=`.
    MissingKeys,
    /// An attribute that is none of `keys`, `vals`, `sort`, `size`, `name`, `pause`,
    /// `cont`, `clear`, `nohitcount`, and no variable (`NAME=EXPR`).
    UnknownAttribute,
    /// An attribute given twice.
    Repeated,
    /// `NAME=` with nothing after it.
    EmptyAssignment,
    /// The event has no such field.
    UnknownField,
    /// A byte-array field, which cannot be a key or a value.
    BytesField,
    /// A value that is a string.
    StringValue,
    /// More than [`MAX_KEYS`] keys.
    TooManyKeys,
    /// The keys take more than 64 bytes (an integer 8, a string 32).
    KeysTooWide,
    /// More than [`MAX_VALS`] values.
    TooManyVals,
    /// A modifier that is not `.hex`, `.sym`, `.sym-offset`, `.log2` or
    /// `.buckets=N` (keys), `.hex`, `.percent` or `.graph` (values).
    BadModifier,
    /// A sort field that is not `hitcount`, a key or a value.
    InvalidSortField,
    /// An empty sort field (`sort=a,`).
    EmptySortField,
    /// A sort modifier that is not `.ascending` or `.descending`.
    InvalidSortModifier,
    /// More than two sort fields.
    TooManySortFields,
    /// A size that is not a number whose next power of two is from [`MIN_SIZE`] to
    /// [`MAX_SIZE`].
    BadSize,
    /// The histograms would take more than [`MAX_HIST_BYTES`].
    NoMemory,
    /// A `name=` that is not 1 to [`MAX_HIST_NAME`] letters, digits and `_`.
    BadName,
    /// A histogram of that name has keys or values of other names, kinds or
    /// modifiers, or other variables.
    IncompatibleName,
    /// A variable's name that is not letters, digits and `_`, or is a keyword.
    BadVariable,
    /// More than [`MAX_VARS`] variables, or more than [`MAX_REFS`] references.
    TooManyVars,
    /// An expression that is not operands joined by `+ - * /` nor `-(EXPR)`, or an
    /// operand that is none of a field, `common_timestamp`, `$NAME` and a number.
    BadExpression,
    /// More than [`MAX_OPERATORS`] operators in an expression.
    TooManyOperators,
    /// A unary minus, `-(EXPR)`, in a sub-expression: anything but an operand of a
    /// later `-` after its `)` (`-(n)+1`, `-(n)*2-1`).
    UnaryMinus,
    /// A division by the constant zero.
    DivisionByZero,
    /// An operator whose operands count time in different units: one in µs
    /// (`common_timestamp.usecs`, or a variable that holds it), the other not.
    TimestampMismatch,
    /// `$NAME` that no histogram of the instance defines.
    UnknownVariable,
    /// `$NAME` that more than one histogram defines (of the host tool's specs: in
    /// an instance a second definition is refused, [`HistReason::VariableDefined`]).
    AmbiguousVariable,
    /// A variable that another histogram of the instance defines already (but one
    /// of the same name, which shares its table).
    VariableDefined,
    /// `$NAME` of a histogram whose keys are not like this one's (its entries are
    /// found by this histogram's key).
    IncompatibleKeys,
    /// `vals=$NAME` that is no variable of this histogram.
    ValueVariable,
    /// Removing a histogram whose variables another histogram reads.
    VariableInUse,
    /// An attribute with `(` that is not `onmax($VAR)` or `onchange($VAR)` with
    /// `.save(FIELD,...)` or `.snapshot()`.
    BadAction,
    /// `onmax($NAME)` or `onchange($NAME)` of no variable this histogram defines.
    HandlerVariable,
    /// A second `save()` or `snapshot()`, or a `save()` of more than [`MAX_SAVED`]
    /// fields.
    TooManyActions,
    /// `common_stacktrace` beside other keys, or with a modifier: it is the only key
    /// when used.
    StackKeyAlone,
    /// `nohitcount` without a value to show instead of the count.
    NothingShown,
}

/// Refuses `common_stacktrace` (or `stacktrace`, where the event has no field of
/// that name) among the keys `keys`, at `at`, with others or a modifier.
fn stack_key_alone(keys: &str, at: usize, fields: &[Field<'_>]) -> Result<(), (usize, HistReason)> {
    let mut pos = at;
    for key in keys.split(',') {
        let name = key.split('.').next().unwrap_or_default();
        let stack = name == "common_stacktrace"
            || (name == "stacktrace" && !fields.iter().any(|f| f.name == name));
        if stack {
            return Err((pos, HistReason::StackKeyAlone));
        }
        pos += key.len() + 1;
    }
    Ok(())
}

impl fmt::Display for HistReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HistReason::MissingKeys => "hist needs keys=FIELD[,FIELD...]",
            HistReason::UnknownAttribute => {
                "unknown hist attribute (keys, vals, sort, size, name, pause, cont, clear, \
                 nohitcount, or a variable NAME=EXPR)"
            }
            HistReason::Repeated => "attribute given twice",
            HistReason::EmptyAssignment => "empty assignment",
            HistReason::UnknownField => "no such field",
            HistReason::StackKeyAlone => "common_stacktrace is the only key when used",
            HistReason::NothingShown => "nohitcount needs a value besides hitcount",
            HistReason::BytesField => "a byte-array field cannot be a key or a value",
            HistReason::StringValue => "values must be integer fields",
            HistReason::TooManyKeys => "at most 3 keys",
            HistReason::KeysTooWide => "keys take at most 64 bytes (an integer 8, a string 32)",
            HistReason::TooManyVals => "at most 3 values besides hitcount",
            HistReason::BadModifier => {
                "unknown modifier (keys: .hex, .sym, .sym-offset, .log2, .buckets=N with N \
                 from 1; values: .hex, .percent, .graph)"
            }
            HistReason::InvalidSortField => "sort takes hitcount, a key or a value",
            HistReason::EmptySortField => "empty sort field",
            HistReason::InvalidSortModifier => "sort modifiers are .ascending and .descending",
            HistReason::TooManySortFields => "at most 2 sort fields",
            HistReason::BadSize => {
                "size must be a number from 65 to 16384 (rounded up to a power of two from 128)"
            }
            HistReason::NoMemory => "no memory for the histogram (32 MiB for all at most)",
            HistReason::BadName => "a histogram's name is 1 to 32 letters, digits and _",
            HistReason::IncompatibleName => {
                "a histogram of that name has other keys or values, or other variables \
                 (names, kinds and modifiers must match)"
            }
            HistReason::BadVariable => {
                "a variable is NAME=EXPR, its name letters, digits and _, not a keyword"
            }
            HistReason::TooManyVars => "at most 4 variables and 4 references to others",
            HistReason::BadExpression => {
                "an expression is operands (an integer field, common_timestamp[.usecs], \
                 $VAR or a number) joined by + - * /, or -(EXPR)"
            }
            HistReason::TooManyOperators => "at most 3 operators in an expression",
            HistReason::UnaryMinus => {
                "unary minus not supported in sub-expressions (-(EXPR) starts the expression)"
            }
            HistReason::DivisionByZero => "division by zero",
            HistReason::TimestampMismatch => {
                "an operator's operands count time in different units (one in .usecs)"
            }
            HistReason::UnknownVariable => "no histogram of this instance defines the variable",
            HistReason::AmbiguousVariable => {
                "more than one histogram of this instance defines the variable"
            }
            HistReason::VariableDefined => {
                "another histogram of this instance defines the variable already"
            }
            HistReason::IncompatibleKeys => {
                "the variable's histogram has other keys (the same number, strings in the \
                 same places: its entry is found by this histogram's key)"
            }
            HistReason::ValueVariable => "vals=$NAME takes a variable this histogram defines",
            HistReason::VariableInUse => "another histogram reads a variable of this one",
            HistReason::BadAction => {
                "an action is onmax($VAR) or onchange($VAR), then .save(FIELD,...) or \
                 .snapshot()"
            }
            HistReason::HandlerVariable => {
                "onmax($VAR) and onchange($VAR) track a variable this histogram defines"
            }
            HistReason::TooManyActions => {
                "at most one save() (of at most 4 integer fields) and one snapshot()"
            }
        })
    }
}

/// A refused `hist` line: where (a byte offset into the line) and why.
pub(crate) type HistError = (usize, HistReason);

/// What a `hist` line ending in `:pause`, `:cont` or `:clear` asks of the histogram
/// the event has already with the same keys, values, sort and filter (a new one
/// starts paused with `Pause`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HistOp {
    /// Stop adding events.
    Pause,
    /// Add events again.
    Continue,
    /// Empty the table.
    Clear,
}

/// How a key is shown (and, for `log2`, what it keys on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Modifier {
    Plain,
    Hex,
    Log2,
    /// Keys on the multiple of this size at or below the value.
    Buckets(u64),
    /// Shows the value as an address and the function holding it.
    Sym,
    /// Shows the value as an address and `function+0xoffset`.
    SymOffset,
    /// Shows a value as its share of the entries' total, in percent.
    Percent,
    /// Shows a value as a bar of up to [`GRAPH_WIDTH`] `#`, the largest entry's full.
    Graph,
}

/// Characters of a `.graph` bar.
const GRAPH_WIDTH: usize = 20;

impl fmt::Display for Modifier {
    /// The modifier as written after its field (nothing for `Plain`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Modifier::Plain => Ok(()),
            Modifier::Hex => f.write_str(".hex"),
            Modifier::Log2 => f.write_str(".log2"),
            Modifier::Buckets(size) => write!(f, ".buckets={size}"),
            Modifier::Sym => f.write_str(".sym"),
            Modifier::SymOffset => f.write_str(".sym-offset"),
            Modifier::Percent => f.write_str(".percent"),
            Modifier::Graph => f.write_str(".graph"),
        }
    }
}

/// Where a key's or value's number comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    /// A field of the event.
    Field(FieldRef),
    /// A variable the histogram defines, by index (`vals=$NAME`).
    Var(usize),
    /// The event itself, counted (`vals=hitcount.MOD`, beside the plain count).
    Hitcount,
}

impl Source {
    /// Whether the number is a signed field's.
    fn signed(&self) -> bool {
        matches!(self, Source::Field(field) if field.signed())
    }

    /// Whether `other` is of the same type (the same variable, for a variable).
    fn same_type(&self, other: &Source) -> bool {
        match (self, other) {
            (Source::Field(a), Source::Field(b)) => a.same_type(b),
            (a, b) => a == b,
        }
    }
}

/// A key or value field.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Column {
    name: Box<str>,
    field: Source,
    string: bool,
    modifier: Modifier,
    /// Its first word in the key (keys only).
    at: usize,
}

impl Column {
    fn words(&self) -> usize {
        if self.string { STRING_KEY_WORDS } else { 1 }
    }

    /// Whether `other` (of a histogram on another event) reads a field of the same
    /// name and type into the same place, shown the same way.
    fn compatible(&self, other: &Column) -> bool {
        (self.name == other.name && self.string == other.string)
            && (self.modifier == other.modifier && self.at == other.at)
            && self.field.same_type(&other.field)
    }
}

/// What a sort field names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SortBy {
    Hitcount,
    Key(usize),
    Val(usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Sort {
    by: SortBy,
    descending: bool,
}

/// Longest `name=` of a named histogram.
pub const MAX_HIST_NAME: usize = 32;

/// What the histograms of one name share (each histogram has its own otherwise):
/// the table events add to, and whether adding is paused.
#[derive(Debug)]
struct Shared {
    paused: AtomicBool,
    table: Table,
}

/// A histogram: its keys, values and sort, and its table (shared with the other
/// histograms of its name, if it has one).
#[derive(Debug)]
pub struct Hist {
    /// `name=`: histograms of one name, on any events of the instance, share a table.
    name: Option<Box<str>>,
    /// The keys, or none when the key is the caller's stack (`common_stacktrace`).
    keys: Box<[Column]>,
    /// Whether the key is the caller's stack: [`STACK_WORDS`] return addresses.
    stack: bool,
    vals: Box<[Column]>,
    /// `nohitcount`: the plain count is not shown (another value is).
    nohitcount: bool,
    sort: Box<[Sort]>,
    /// The event's field kinds, to read fields after a string.
    kinds: Box<[FieldKind]>,
    /// The variables it defines and those of others it reads.
    vars: Vars,
    shared: Arc<Shared>,
}

impl Hist {
    /// Parses a trigger line's command, `hist:keys=...` up to the filter, which
    /// starts at byte `at` of the line, for an event with `fields`: the histogram,
    /// and what the line asks of one the event has already, if anything. Errors are
    /// at positions in the line.
    pub(crate) fn parse(
        attrs: &str,
        at: usize,
        fields: &[Field<'_>],
    ) -> Result<(Hist, Option<HistOp>), HistError> {
        let mut keys: Option<Vec<Column>> = None;
        let mut vals: Option<(&str, usize)> = None;
        let mut sort_text: Option<(&str, usize)> = None;
        let mut size = None;
        let mut hist_name = None;
        let mut op = None;
        let mut nohitcount = false;
        let mut vars = Vars::default();
        let mut actions = Vec::new();
        let mut pos = at;
        for attr in attrs.split(':') {
            let attr_at = pos;
            pos += attr.len() + 1;
            if attr_at == at {
                // What precedes the first `:` is `hist` itself.
                continue;
            }
            let (name, value) = match attr.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (attr, None),
            };
            let value_at = attr_at + name.len() + 1;
            if value == Some("") {
                return Err((attr_at, HistReason::EmptyAssignment));
            }
            let repeated =
                |set: bool| if set { Err((attr_at, HistReason::Repeated)) } else { Ok(()) };
            match (name, value) {
                ("keys" | "key", Some("common_stacktrace" | "stacktrace")) => {
                    repeated(keys.is_some())?;
                    keys = Some(Vec::new());
                }
                ("keys" | "key", Some(value)) => {
                    repeated(keys.is_some())?;
                    stack_key_alone(value, value_at, fields)?;
                    keys = Some(columns(value, value_at, fields, true, &Vars::default())?);
                }
                ("vals" | "values" | "val", Some(value)) => {
                    repeated(vals.is_some())?;
                    vals = Some((value, value_at));
                }
                ("sort", Some(value)) => {
                    repeated(sort_text.is_some())?;
                    sort_text = Some((value, attr_at));
                }
                ("size", Some(value)) => {
                    repeated(size.is_some())?;
                    // Rounded up to a power of two first, as ftrace's.
                    let n = value
                        .parse::<usize>()
                        .ok()
                        .and_then(usize::checked_next_power_of_two)
                        .filter(|n| (LEAST_SIZE..=MAX_SIZE).contains(n))
                        .ok_or((value_at, HistReason::BadSize))?;
                    size = Some(n);
                }
                ("name", Some(value)) => {
                    repeated(hist_name.is_some())?;
                    let valid = value.len() <= MAX_HIST_NAME
                        && value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
                    hist_name =
                        Some(valid.then_some(value).ok_or((value_at, HistReason::BadName))?);
                }
                ("pause", None) => op = Some(HistOp::Pause),
                ("cont" | "continue", None) => op = Some(HistOp::Continue),
                ("clear", None) => op = Some(HistOp::Clear),
                ("nohitcount" | "NOHC", None) => nohitcount = true,
                (_, Some(_)) => vars.parse(attr, attr_at, fields)?,
                // After the variables, which an action may name wherever they are.
                (_, None) if attr.contains('(') => actions.push((attr, attr_at)),
                _ => return Err((attr_at, HistReason::UnknownAttribute)),
            }
        }
        let keys = keys.ok_or((at, HistReason::MissingKeys))?;
        // Values after the variables, which `vals=$NAME` may name wherever they are.
        let vals = match vals {
            Some((text, value_at)) => columns(text, value_at, fields, false, &vars)?,
            None => Vec::new(),
        };
        if nohitcount && vals.is_empty() {
            return Err((at, HistReason::NothingShown));
        }
        for (attr, attr_at) in actions {
            vars.parse_action(attr, attr_at, fields)?;
        }
        let sort = match sort_text {
            None => [Sort { by: SortBy::Hitcount, descending: false }].into(),
            Some((text, attr_at)) => sorts(text, attr_at, fields, &keys, &vals)?,
        };
        let stack = keys.is_empty();
        let key_words = if stack { STACK_WORDS } else { keys.iter().map(Column::words).sum() };
        let size = size.unwrap_or(DEFAULT_SIZE);
        let table = Table::new(size, key_words, vals.len(), vars.defs.len(), vars.action_words());
        let hist = Hist {
            name: hist_name.map(Box::from),
            stack,
            keys: keys.into(),
            vals: vals.into(),
            nohitcount,
            sort,
            kinds: fields.iter().map(|f| f.kind).collect(),
            vars,
            shared: Arc::new(Shared { paused: AtomicBool::new(op == Some(HistOp::Pause)), table }),
        };
        Ok((hist, op))
    }

    /// Allocates the table (a parsed line has none: a removal, or `:pause` for a
    /// histogram there, needs none); false, with nothing allocated, if it would take
    /// the histograms past [`MAX_HIST_BYTES`].
    pub(crate) fn allocate(&mut self) -> bool {
        // A table shared with a histogram of the same name is allocated already.
        Arc::get_mut(&mut self.shared).is_none_or(|shared| shared.table.allocate())
    }

    /// Whether `other` has the same name, keys, values and sort (the filter aside),
    /// as ftrace matches histograms: what only changes how it is shown or sized does
    /// not count, so `!hist:keys=x` removes a histogram set with `size=` or
    /// `nohitcount`, and setting one that differs only so is refused as a duplicate.
    pub fn same_as(&self, other: &Hist) -> bool {
        (self.name == other.name)
            && (self.keys == other.keys && self.stack == other.stack)
            && self.vals == other.vals
            && self.sort == other.sort
            && self.vars.same_as(&other.vars)
    }

    /// `name=`, if the histogram has one.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Makes this histogram (not set yet) share the table and pause state of
    /// `named`, a histogram of the same name: refused unless their keys and values
    /// have the same names, kinds and modifiers, in order (their events may differ,
    /// and their fields' places).
    pub(crate) fn share(&mut self, named: &Hist) -> Result<(), HistReason> {
        let columns = |a: &[Column], b: &[Column]| {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.compatible(y))
        };
        let compatible = (self.name == named.name && self.stack == named.stack)
            && columns(&self.keys, &named.keys)
            && (columns(&self.vals, &named.vals) && self.nohitcount == named.nohitcount)
            && self.vars.same_as(&named.vars);
        if !compatible {
            return Err(HistReason::IncompatibleName);
        }
        self.shared = Arc::clone(&named.shared);
        Ok(())
    }

    /// Whether events are not added (for every histogram of its name).
    pub fn paused(&self) -> bool {
        self.shared.paused.load(Relaxed)
    }

    /// Stops or resumes adding events (to every histogram of its name).
    pub fn set_paused(&self, paused: bool) {
        self.shared.paused.store(paused, Relaxed);
    }

    /// Empties the table (every histogram of its name shows it empty). Only while no
    /// writer can be adding to it (paused, then a grace period): a writer inside
    /// would add to a slot being emptied.
    pub(crate) fn reset(&self) {
        self.shared.table.reset();
        self.vars.reset();
    }

    /// Whether an action takes snapshots (the instance needs its snapshot buffer).
    pub(crate) fn takes_snapshots(&self) -> bool {
        self.vars.takes_snapshots()
    }

    /// Adds the event (`values`, written at `origin`) to the table, unless paused;
    /// `host` gives the caller's return addresses (for a `common_stacktrace` key),
    /// the instance's clock (for `common_timestamp`) and snapshots (for an action's
    /// `snapshot()`). Callable from any context: no lock, no allocation, a bounded
    /// wait.
    pub(crate) fn record(
        &self,
        values: &(impl Values + ?Sized),
        origin: Origin,
        host: &impl HistHost,
    ) {
        if self.paused() {
            return;
        }
        // Two copies: one without the variables' steps for the histograms without.
        if self.vars.is_empty() {
            values.add_to::<false>(self, origin, host)
        } else {
            values.add_to::<true>(self, origin, host)
        }
    }

    /// Whether the key is the caller's stack (`common_stacktrace`).
    pub(crate) fn keys_stack(&self) -> bool {
        self.stack
    }

    /// [`Hist::record`] of a tracepoint's record past the pause: `VARS` says
    /// whether there are variables.
    #[inline(always)]
    fn add<const VARS: bool>(&self, body: &Body<'_>, origin: Origin, host: &impl HistHost) {
        match body.words {
            // A small payload's words, read in line.
            Some(words) => {
                let bytes = words.as_flattened();
                let payload = bytes.get(..body.len).unwrap_or(bytes);
                let fields = Encoded { payload, kinds: &self.kinds };
                self.add_fields::<_, VARS>(&fields, origin, host)
            }
            None => {
                let mut added = false;
                body.payload.with_fields(&self.kinds, &mut |fields| {
                    added = true;
                    self.add_fields::<_, VARS>(fields, origin, host);
                });
                if !added {
                    self.shared.table.drop_one();
                }
            }
        }
    }

    /// Adds an event whose values `fields` gives: its key, values and variables
    /// read, then added, left out or dropped, then its actions.
    #[inline(always)]
    fn add_fields<F: Fields + ?Sized, const VARS: bool>(
        &self,
        fields: &F,
        origin: Origin,
        host: &impl HistHost,
    ) {
        let mut key = [0u64; KEY_WORDS];
        let mut vals = [0u64; MAX_VALS];
        let mut vars = [0u64; MAX_VARS];
        let mut saved = [0u64; MAX_SAVED];
        if self.stack {
            host.stack_frames(&mut key[..STACK_WORDS]);
        }
        let now = if VARS && self.vars.timestamp { host.now() } else { 0 };
        let mut out = (&mut key, &mut vals, &mut vars, &mut saved);
        let outcome = self.read::<F, VARS>(fields, origin, now, &mut out);
        let key = &key[..self.shared.table.key_words];
        let vars = &vars[..if VARS { self.vars.defs.len() } else { 0 }];
        let vals = &vals[..self.vals.len()];
        match outcome {
            Outcome::Matched => self.shared.table.add(key, vals, vars, |words| {
                if VARS {
                    self.vars.act(words, vars, &saved, key, || host.snapshot());
                }
            }),
            Outcome::Unmatched => {}
            Outcome::Incomplete => self.shared.table.drop_one(),
        }
    }

    /// Reads the event's key, values and variables (`now`: `common_timestamp`).
    #[inline(always)]
    fn read<F: Fields + ?Sized, const VARS: bool>(
        &self,
        fields: &F,
        origin: Origin,
        now: u64,
        (key, vals, vars, saved): &mut Row<'_>,
    ) -> Outcome {
        let mut complete = true;
        for column in &self.keys {
            complete &= column.key_into(fields, origin, key);
        }
        for (column, out) in self.vals.iter().zip(vals.iter_mut()) {
            match &column.field {
                Source::Field(field) => match field.int(fields, origin) {
                    Some(v) => *out = v,
                    None => complete = false,
                },
                Source::Hitcount => *out = 1,
                Source::Var(_) => {}
            }
        }
        if !complete {
            return Outcome::Incomplete;
        }
        if !VARS {
            return Outcome::Matched;
        }
        let key = &key[..self.shared.table.key_words];
        if !self.vars.read_saved(fields, origin, saved) {
            return Outcome::Incomplete;
        }
        let outcome = self.vars.compute(fields, origin, now, key, vars);
        for (column, out) in self.vals.iter().zip(vals.iter_mut()) {
            if let Source::Var(i) = column.field {
                *out = vars.get(i).copied().unwrap_or_default();
            }
        }
        outcome
    }

    /// The references to other histograms' variables not bound yet: their names
    /// and where the line writes them.
    pub(crate) fn unbound_vars(&self) -> Vec<(Box<str>, usize)> {
        self.vars.unbound().map(|(name, at)| (name.into(), at)).collect()
    }

    /// Whether this histogram defines variable `name`.
    pub(crate) fn defines(&self, name: &str) -> bool {
        self.vars.own(name).is_some()
    }

    /// The names of the variables this histogram defines.
    pub(crate) fn var_names(&self) -> impl Iterator<Item = &str> {
        self.vars.names()
    }

    /// Whether `other` keeps its entries in this histogram's table (both are of
    /// one name).
    pub(crate) fn shares_table(&self, other: &Hist) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// Of `hists` (each with its position), the one histogram that defines
    /// variable `name`, which a reference binds to: `UnknownVariable` if none does,
    /// `AmbiguousVariable` if several do.
    pub(crate) fn definer<'h>(
        hists: impl IntoIterator<Item = (usize, &'h Hist)>,
        name: &str,
    ) -> Result<(usize, &'h Hist), HistReason> {
        let mut defining = hists.into_iter().filter(|(_, h)| h.defines(name));
        let first = defining.next().ok_or(HistReason::UnknownVariable)?;
        match defining.next() {
            Some(_) => Err(HistReason::AmbiguousVariable),
            None => Ok(first),
        }
    }

    /// Binds this histogram's references to `name` (not set yet, the first written
    /// at byte `at`) to `definer`'s variable: refused, at `at`, unless `definer`'s
    /// entries are keyed as this histogram's (as many keys, strings in the same
    /// places), since its entry is found by this histogram's key; refused, at the
    /// line's start as ftrace has it, unless its unit of time suits the expressions
    /// that read it ([`HistReason::TimestampMismatch`]).
    pub(crate) fn bind_var(
        &mut self,
        name: &str,
        at: usize,
        definer: &Hist,
    ) -> Result<(), HistError> {
        let index = definer.vars.own(name).ok_or((at, HistReason::UnknownVariable))?;
        let alike = |a: &Column, b: &Column| (a.string, a.at) == (b.string, b.at);
        let keyed = !self.stack && !definer.stack && self.keys.len() == definer.keys.len();
        if !keyed || !self.keys.iter().zip(&definer.keys[..]).all(|(a, b)| alike(a, b)) {
            return Err((at, HistReason::IncompatibleKeys));
        }
        self.vars.bind(name, &definer.vars, &definer.shared, index).map_err(|reason| (0, reason))
    }

    /// Whether this histogram reads a variable of `other`.
    pub(crate) fn reads_vars_of(&self, other: &Hist) -> bool {
        self.vars.reads(&other.shared)
    }

    /// Writes the histogram as ftrace's `hist` file shows it: the trigger line, the
    /// entries sorted, and the totals. `line` is the trigger as it reads back;
    /// `symbols` names the `.sym` keys (without it they show their address only).
    pub fn write(
        &self,
        line: &dyn fmt::Display,
        symbols: Option<&SymbolTable<'_>>,
        out: &mut dyn Write,
    ) -> fmt::Result {
        writeln!(out, "# event histogram\n#\n# trigger info: {line}\n#\n")?;
        let mut entries = self.shared.table.entries();
        entries.sort_by(|a, b| {
            self.sort.iter().fold(core::cmp::Ordering::Equal, |order, sort| {
                order.then_with(|| {
                    let (x, y) = (self.sort_value(a, sort.by), self.sort_value(b, sort.by));
                    if sort.descending { y.cmp(&x) } else { x.cmp(&y) }
                })
            })
        });
        // The total and largest of each value, for `.percent` and `.graph`.
        let mut stats = [(0u64, 0u64); 1 + MAX_VALS];
        for entry in &entries {
            for (stat, &v) in stats.iter_mut().zip(&entry.vals) {
                *stat = (stat.0.wrapping_add(v), stat.1.max(v));
            }
        }
        for entry in &entries {
            out.write_str("{ ")?;
            self.write_keys(&entry.key, symbols, out)?;
            out.write_str(" }")?;
            if !self.nohitcount {
                write_val("hitcount", Modifier::Plain, false, entry.vals[0], stats[0], out)?;
            }
            for (i, val) in self.vals.iter().enumerate() {
                out.write_char(' ')?;
                let (sum, stat) = (entry.vals[1 + i], stats[1 + i]);
                write_val(&val.name, val.modifier, val.field.signed(), sum, stat, out)?;
            }
            self.vars.write_entry(&entry.actions, out)?;
            out.write_char('\n')?;
        }
        self.vars.write_snapshot(|key, out| self.write_keys(key, symbols, out), out)?;
        let (hits, drops) = self.shared.table.totals(&entries);
        write!(
            out,
            "\nTotals:\n    Hits: {hits}\n    Entries: {}\n    Dropped: {drops}\n",
            entries.len()
        )
    }

    /// Writes an entry's key (`key`: its words) as ftrace does, without the braces.
    fn write_keys(
        &self,
        key: &[u64],
        symbols: Option<&SymbolTable<'_>>,
        out: &mut dyn Write,
    ) -> fmt::Result {
        if self.stack {
            write_stack(key.get(..STACK_WORDS).unwrap_or(key), symbols, out)?;
        }
        for (i, column) in self.keys.iter().enumerate() {
            if i > 0 {
                out.write_str(", ")?;
            }
            column.write_key(key, symbols, out)?;
        }
        Ok(())
    }

    /// The value an entry is sorted on (keys by their words: a signed key as signed).
    fn sort_value(&self, entry: &Entry, by: SortBy) -> SortValue {
        match by {
            SortBy::Hitcount => SortValue::Int(i128::from(entry.vals[0])),
            SortBy::Val(i) => self.vals[i].int_value(entry.vals[1 + i]),
            SortBy::Key(i) => {
                let key = &self.keys[i];
                if key.string {
                    let mut words = [0; STRING_KEY_WORDS];
                    let key_words = &entry.key[key.at..key.at + STRING_KEY_WORDS];
                    words.iter_mut().zip(key_words).for_each(|(w, k)| *w = k.swap_bytes());
                    SortValue::Words(words)
                } else {
                    key.int_value(entry.key[key.at])
                }
            }
        }
    }
}

/// Where an event's key, values, variables and saved fields are read into.
type Row<'a> = (
    &'a mut [u64; KEY_WORDS],
    &'a mut [u64; MAX_VALS],
    &'a mut [u64; MAX_VARS],
    &'a mut [u64; MAX_SAVED],
);

/// Where the values a histogram adds come from: a tracepoint's record ([`Body`]),
/// or values decoded already (any [`Fields`]: a dump's record, on the host).
pub(crate) trait Values {
    /// Adds the event to `hist`, past its pause; `VARS`: whether it has variables.
    fn add_to<const VARS: bool>(&self, hist: &Hist, origin: Origin, host: &impl HistHost);
}

impl Values for Body<'_> {
    #[inline(always)]
    fn add_to<const VARS: bool>(&self, hist: &Hist, origin: Origin, host: &impl HistHost) {
        hist.add::<VARS>(self, origin, host)
    }
}

impl<F: Fields + ?Sized> Values for F {
    #[inline(always)]
    fn add_to<const VARS: bool>(&self, hist: &Hist, origin: Origin, host: &impl HistHost) {
        hist.add_fields::<F, VARS>(self, origin, host)
    }
}

/// What a histogram asks of the instance it adds to, from the event's context.
pub(crate) trait HistHost {
    /// Fills `frames` with the caller's return addresses, innermost first.
    fn stack_frames(&self, frames: &mut [u64]);
    /// A reading of the instance's clock.
    fn now(&self) -> u64;
    /// Swaps the instance's snapshot in; whether it did.
    fn snapshot(&self) -> bool;
}

/// What entries are sorted on.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum SortValue {
    Int(i128),
    /// A string key's words, byte order made big-endian so that words compare as
    /// the bytes do.
    Words([u64; STRING_KEY_WORDS]),
}

impl Column {
    /// Stores this key's value into `key`; false if the event lacks the field.
    #[inline(always)]
    fn key_into<F: Fields + ?Sized>(
        &self,
        fields: &F,
        origin: Origin,
        key: &mut [u64; KEY_WORDS],
    ) -> bool {
        let Source::Field(field) = &self.field else { return false };
        if !self.string {
            let Some(v) = field.int(fields, origin) else { return false };
            key[self.at] = match self.modifier {
                Modifier::Log2 => log2_bucket(v),
                Modifier::Buckets(size) => v - v % size,
                _ => v,
            };
            return true;
        }
        let mut found = false;
        field.with_str(fields, origin, |s| {
            found = true;
            let mut bytes = [0u8; STRING_KEY_BYTES];
            let n = s.len().min(STRING_KEY_BYTES);
            bytes[..n].copy_from_slice(&s.as_bytes()[..n]);
            let words = key[self.at..self.at + STRING_KEY_WORDS].iter_mut();
            for (word, chunk) in words.zip(bytes.as_chunks::<8>().0) {
                *word = u64::from_le_bytes(*chunk);
            }
        });
        found
    }

    /// An integer column's value as shown and sorted (signed fields as signed).
    fn int_value(&self, v: u64) -> SortValue {
        SortValue::Int(if self.field.signed() { i128::from(v as i64) } else { i128::from(v) })
    }

    /// Writes this key's part of an entry, as ftrace does.
    fn write_key(
        &self,
        key: &[u64],
        symbols: Option<&SymbolTable<'_>>,
        out: &mut dyn Write,
    ) -> fmt::Result {
        let name = &self.name;
        if self.string {
            let mut bytes = [0u8; STRING_KEY_BYTES];
            let words = &key[self.at..self.at + STRING_KEY_WORDS];
            for (chunk, word) in bytes.as_chunks_mut::<8>().0.iter_mut().zip(words) {
                *chunk = word.to_le_bytes();
            }
            let len = bytes.iter().position(|&b| b == 0).unwrap_or(STRING_KEY_BYTES);
            // A string cut inside a character shows the whole characters before it.
            let text = match core::str::from_utf8(&bytes[..len]) {
                Ok(text) => text,
                Err(e) => core::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default(),
            };
            // Control characters escaped, so that a key cannot forge a line.
            let text = alloc::string::ToString::to_string(&Controls(text));
            return write!(out, "{name}: {text:<50}");
        }
        let v = key[self.at];
        match self.modifier {
            Modifier::Hex => write!(out, "{name}: {v:x}"),
            Modifier::Log2 => write!(out, "{name}: ~ 2^{v:<2}"),
            Modifier::Buckets(size) => write!(out, "{name}: ~ {v}-{}", v.saturating_add(size - 1)),
            Modifier::Sym | Modifier::SymOffset => {
                write!(out, "{name}: [{v:016x}] ")?;
                let found = symbols.and_then(|t| t.lookup(v));
                let function = found.map_or("", |(function, _)| function);
                let offset = match (found, self.modifier) {
                    (Some((_, offset)), Modifier::SymOffset) => {
                        StackText::<24>::of(format_args!("+{offset:#x}"))
                    }
                    _ => StackText::new(),
                };
                // The name whole, however long, then padded as ftrace pads it.
                let offset = offset.as_str();
                let pad = 45usize.saturating_sub(function.len() + offset.len());
                write!(out, "{function}{offset}{:pad$}", "")
            }
            // Plain (`.percent` and `.graph` are values' only).
            _ if self.field.signed() => write!(out, "{name}: {:>10}", v as i64),
            _ => write!(out, "{name}: {v:>10}"),
        }
    }
}

/// Writes a value of an entry as ftrace does (after a space): `stat` is the total
/// and the largest of the value over the entries, for `.percent` and `.graph`.
fn write_val(
    name: &str,
    modifier: Modifier,
    signed: bool,
    v: u64,
    (total, max): (u64, u64),
    out: &mut dyn Write,
) -> fmt::Result {
    // Hundredths of a percent of `of`; `None` for a share of nothing.
    let share = |of: u64| match of {
        0 if v == 0 => Some(0),
        0 => None,
        of => Some((u128::from(v) * 10_000 / u128::from(of)) as u64),
    };
    match modifier {
        Modifier::Percent => match share(total) {
            Some(pc) => write!(out, " {name} (%): {:>3}.{:02}", pc / 100, pc % 100),
            None => write!(out, " {name} (%):[ERROR]"),
        },
        Modifier::Graph => match share(max) {
            Some(pc) => {
                let len = (pc as usize * GRAPH_WIDTH / 10_000).min(GRAPH_WIDTH);
                let bar = [b'#'; GRAPH_WIDTH];
                let bar = core::str::from_utf8(&bar[..len]).unwrap_or_default();
                write!(out, " {name}: {bar:<GRAPH_WIDTH$}")
            }
            None => write!(out, " {name}: {:>GRAPH_WIDTH$}", "[ERROR]"),
        },
        Modifier::Hex => write!(out, " {name}: {v:>10x}"),
        _ if signed => write!(out, " {name}: {:>10}", v as i64),
        _ => write!(out, " {name}: {v:>10}"),
    }
}

/// Writes a stack key as ftrace does: a line per return address, innermost first,
/// named from `symbols` (`function+0xoffset`) or as addresses, up to the first zero.
fn write_stack(
    frames: &[u64],
    symbols: Option<&SymbolTable<'_>>,
    out: &mut dyn Write,
) -> fmt::Result {
    out.write_str("common_stacktrace:")?;
    for &ret in frames.iter().take_while(|&&ret| ret != 0) {
        out.write_str("\n         ")?;
        match symbols {
            Some(table) => table.write_frame(out, ret)?,
            None => write!(out, "{ret:#x}")?,
        }
    }
    out.write_char('\n')
}

/// The `log2` bucket of `v`: the power of two at or above it (0 for 0 and 1).
fn log2_bucket(v: u64) -> u64 {
    if v <= 1 { 0 } else { u64::from(64 - (v - 1).leading_zeros()) }
}

/// Parses a comma-separated list of keys (`keys`) or values, each `FIELD[.MOD]`
/// (a value may be `$NAME`, one of `vars`, or `hitcount` with a modifier; the first
/// plain `hitcount` is the count, always kept).
fn columns(
    list: &str,
    at: usize,
    fields: &[Field<'_>],
    keys: bool,
    vars: &Vars,
) -> Result<Vec<Column>, HistError> {
    let mut columns: Vec<Column> = Vec::new();
    let mut counted = false;
    let mut words = 0;
    let mut pos = at;
    for item in list.split(',') {
        let item_at = pos;
        pos += item.len() + 1;
        let (name, modifier) = match item.split_once('.') {
            Some((name, modifier)) => (name, Some((modifier, item_at + name.len() + 1))),
            None => (item, None),
        };
        if !keys && item == "hitcount" && !counted {
            counted = true;
            continue;
        }
        let (field, kind, name) = match name.strip_prefix('$') {
            // A variable this histogram defines.
            Some(var) if !keys => {
                let own = vars.own(var).ok_or((item_at, HistReason::ValueVariable))?;
                (Source::Var(own), FieldKind::U64, var)
            }
            None if !keys && name == "hitcount" => (Source::Hitcount, FieldKind::U64, name),
            _ => {
                let (field, kind) =
                    FieldRef::resolve(fields, name).ok_or((item_at, HistReason::UnknownField))?;
                (Source::Field(field), kind, field.hist_name().unwrap_or(name))
            }
        };
        let string = kind == FieldKind::Str;
        match kind {
            FieldKind::Bytes(_) => return Err((item_at, HistReason::BytesField)),
            FieldKind::Str if !keys => return Err((item_at, HistReason::StringValue)),
            _ => {}
        }
        let modifier = match modifier {
            None => Modifier::Plain,
            Some(("hex", _)) if !string => Modifier::Hex,
            Some(("percent", _)) if !keys => Modifier::Percent,
            Some(("graph", _)) if !keys => Modifier::Graph,
            Some(("log2", _)) if keys && !string => Modifier::Log2,
            Some(("sym", _)) if keys && !string => Modifier::Sym,
            Some(("sym-offset", _)) if keys && !string => Modifier::SymOffset,
            Some((m, mod_at)) if keys && !string && m.starts_with("buckets=") => {
                let size = m["buckets=".len()..].parse::<u64>().ok().filter(|&n| n > 0);
                Modifier::Buckets(size.ok_or((mod_at, HistReason::BadModifier))?)
            }
            Some((_, mod_at)) => return Err((mod_at, HistReason::BadModifier)),
        };
        let limit = if keys { MAX_KEYS } else { MAX_VALS };
        if columns.len() == limit {
            let reason = if keys { HistReason::TooManyKeys } else { HistReason::TooManyVals };
            return Err((item_at, reason));
        }
        let column = Column { name: name.into(), field, string, modifier, at: words };
        words += column.words();
        if words > KEY_WORDS {
            return Err((item_at, HistReason::KeysTooWide));
        }
        columns.push(column);
    }
    Ok(columns)
}

/// Parses `sort=`'s list (the attribute starts at `attr_at`): a column is named as
/// the histogram shows it, or as any spelling of its field (`CPU` for
/// `common_cpu`).
fn sorts(
    list: &str,
    attr_at: usize,
    fields: &[Field<'_>],
    keys: &[Column],
    vals: &[Column],
) -> Result<Box<[Sort]>, HistError> {
    let mut sorts = Vec::new();
    let mut pos = attr_at + "sort=".len();
    if list.split(',').count() > MAX_SORT {
        return Err((attr_at, HistReason::TooManySortFields));
    }
    for item in list.split(',') {
        let item_at = pos;
        pos += item.len() + 1;
        if item.is_empty() {
            return Err((attr_at, HistReason::EmptySortField));
        }
        let (name, order) = match item.split_once('.') {
            Some((name, order)) => (name, Some((order, item_at + name.len() + 1))),
            None => (item, None),
        };
        let descending = match order {
            None | Some(("ascending", _)) => false,
            Some(("descending", _)) => true,
            Some((_, order_at)) => return Err((order_at, HistReason::InvalidSortModifier)),
        };
        let shown = FieldRef::resolve(fields, name).and_then(|(field, _)| field.hist_name());
        let name = shown.unwrap_or(name);
        let by = if name == "hitcount" {
            SortBy::Hitcount
        } else if let Some(i) = keys.iter().position(|k| &*k.name == name) {
            SortBy::Key(i)
        } else if let Some(i) = vals.iter().position(|v| &*v.name == name) {
            SortBy::Val(i)
        } else {
            return Err((item_at, HistReason::InvalidSortField));
        };
        sorts.push(Sort { by, descending });
    }
    Ok(sorts.into())
}

impl fmt::Display for Hist {
    /// The histogram's part of its trigger line, in Linux's order:
    /// `hist:keys=...:vals=...[:VAR=EXPR,...]:sort=...:size=N[:ACTION...]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("hist:")?;
        if let Some(name) = &self.name {
            write!(f, "name={name}:")?;
        }
        f.write_str("keys=")?;
        if self.stack {
            f.write_str("common_stacktrace")?;
        }
        for (i, key) in self.keys.iter().enumerate() {
            write!(f, "{}{}{}", if i > 0 { "," } else { "" }, key.name, key.modifier)?;
        }
        f.write_str(":vals=")?;
        if !self.nohitcount {
            f.write_str("hitcount")?;
        }
        for (i, val) in self.vals.iter().enumerate() {
            let comma = if i > 0 || !self.nohitcount { "," } else { "" };
            let dollar = if let Source::Var(_) = val.field { "$" } else { "" };
            write!(f, "{comma}{dollar}{}{}", val.name, val.modifier)?;
        }
        self.vars.write(f)?;
        f.write_str(":sort=")?;
        for (i, sort) in self.sort.iter().enumerate() {
            let name = match sort.by {
                SortBy::Hitcount => "hitcount",
                SortBy::Key(i) => &self.keys[i].name,
                SortBy::Val(i) => &self.vals[i].name,
            };
            let order = if sort.descending { ".descending" } else { "" };
            write!(f, "{}{name}{order}", if i > 0 { "," } else { "" })?;
        }
        write!(f, ":size={}", self.shared.table.max)?;
        if self.nohitcount {
            f.write_str(":nohitcount")?;
        }
        self.vars.write_actions(f)
    }
}
