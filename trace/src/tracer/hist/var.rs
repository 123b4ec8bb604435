//! Histogram variables (ftrace's inter-event histograms, `histogram.rst` 2.2.1): a
//! `hist` trigger may define variables, `NAME=EXPR`, saved in its table's entry for
//! the event's key; a histogram on another event of the instance reads one as
//! `$NAME` in its own expressions, in the entry of the same key. So a latency is
//! measured between two events:
//!
//! ```text
//! hist:keys=irq:ts0=common_timestamp.usecs                (irq_handler_entry)
//! hist:keys=irq:lat=common_timestamp.usecs-$ts0:vals=$lat (irq_handler_exit)
//! ```
//!
//! An expression is operands joined by `+ - * /`, at most [`MAX_OPERATORS`] of
//! them, `*` and `/` before `+` and `-`, each from the left (`16-8-4-2` is 2), or
//! `-(EXPR)`, a unary minus, which starts the expression (an expression splits at
//! its last `-` unless that is its first character: `-(n)-1` is `(-(n))-1`, and
//! `-(n)+1` is refused); an operand is an integer
//! field, `common_timestamp` (the instance's clock when the event fired, ns;
//! `.usecs`: µs), `$NAME` (a variable defined before it in the same histogram, or
//! one of another histogram of the instance) or a decimal number. Numbers joined
//! are one, computed when the trigger is set. The two operands of an operator
//! count time alike, as ftrace checks: both in µs or neither. `common_timestamp.usecs`
//! is in µs; a field, a number and `common_timestamp` are not; `$NAME` is as its
//! variable is; an expression is as its first operand is, a `$NAME` there counting
//! as not (ftrace's rule, so `$ts0-common_timestamp.usecs` is not in µs, though
//! `$ts0` holds µs). Arithmetic wraps on 64 bits; a
//! division by zero gives `-1` (all bits set), as ftrace's. A reference to another
//! histogram's variable in an expression with an operator reads it once: the read
//! leaves it unset, so that one start pairs with one end. An event whose references
//! find no entry of its key, or an unset variable, is not added.
//!
//! Actions (ftrace's `handler.action` pairs, 2.2.3) act on an added event:
//! `onmax($NAME)` when the variable exceeds the entry's largest so far,
//! `onchange($NAME)` when it differs from the entry's last; `.save(FIELD,...)` keeps
//! the event's fields in the entry beside that value, `.snapshot()` swaps the
//! instance's snapshot in (for `onmax`, at a value above the last snapshot's; the
//! `hist` file shows the value and key of the snapshot taken).

use super::{HistError, HistReason};
use crate::event::filter::{FieldRef, Fields};
use crate::event::format_file::Origin;
use crate::field::{Field, FieldKind};
use crate::sync::{AtomicBool, AtomicU64, Ordering::Relaxed};
use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;

/// Most variables a histogram defines.
pub const MAX_VARS: usize = 4;
/// Most references a histogram makes to other histograms' variables.
pub const MAX_REFS: usize = 4;
/// Most operators in an expression (ftrace's "subexpressions"), the unary minus
/// among them.
pub const MAX_OPERATORS: usize = 3;
/// Most operands of an expression, each an entry of its evaluation's stack.
const MAX_OPERANDS: usize = MAX_OPERATORS + 1;
/// Most fields one `save()` keeps.
pub const MAX_SAVED: usize = 4;
/// Words an entry keeps for its actions: a `save()`'s tracked value and fields, and
/// a `snapshot()`'s tracked value.
pub(super) const ACTION_WORDS: usize = 1 + MAX_SAVED + 1;

/// The names a variable may not take: the attributes, `hitcount` and
/// `common_timestamp`.
const KEYWORDS: [&str; 13] = [
    "keys",
    "key",
    "vals",
    "values",
    "sort",
    "size",
    "name",
    "pause",
    "cont",
    "continue",
    "clear",
    "hitcount",
    "common_timestamp",
];

/// One operand of an expression.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Operand {
    /// An integer field of the event (its name as written).
    Field(Box<str>, FieldRef),
    /// `common_timestamp`: the instance's clock, in µs with `.usecs`.
    Timestamp { usecs: bool },
    /// A variable this histogram defines, by index.
    Own(usize),
    /// Another histogram's variable: the index of the reference.
    Ref(usize),
    /// A number.
    Const(u64),
}

/// The operators of an expression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Add,
    Sub,
    Mul,
    Div,
}

impl Op {
    const ALL: [(char, Op); 4] = [('+', Op::Add), ('-', Op::Sub), ('*', Op::Mul), ('/', Op::Div)];

    fn apply(self, a: u64, b: u64) -> u64 {
        match self {
            Op::Add => a.wrapping_add(b),
            Op::Sub => a.wrapping_sub(b),
            Op::Mul => a.wrapping_mul(b),
            Op::Div => a.checked_div(b).unwrap_or(u64::MAX),
        }
    }

    fn symbol(self) -> char {
        Op::ALL.iter().find(|(_, op)| *op == self).map_or('?', |(c, _)| *c)
    }
}

/// One step of an expression, which is kept in postfix order.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    /// Push the operand's value.
    Operand(Operand),
    /// Replace the two values on top by the operator's result.
    Binary(Op),
    /// Negate the value on top (`-(EXPR)`).
    Negate,
}

/// The values an expression's evaluation holds.
#[derive(Default)]
struct Stack {
    values: [u64; MAX_OPERANDS],
    depth: usize,
}

impl Stack {
    /// Pushes `value`; `None` when full.
    fn push(&mut self, value: u64) -> Option<()> {
        *self.values.get_mut(self.depth)? = value;
        self.depth += 1;
        Some(())
    }

    /// Pops the value on top; `None` when empty.
    fn pop(&mut self) -> Option<u64> {
        self.depth = self.depth.checked_sub(1)?;
        self.values.get(self.depth).copied()
    }
}

/// A variable: its name and how its value is computed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Var {
    name: Box<str>,
    /// The expression in postfix order: at most [`MAX_OPERANDS`] operands, each
    /// operator after its operands.
    steps: Box<[Step]>,
    /// Whether it is in µs (see [`units`]).
    usecs: bool,
}

/// A reference to a variable of another histogram of the instance, bound when the
/// trigger is set.
#[derive(Debug)]
pub(super) struct Ref {
    name: Box<str>,
    /// Where it is written in the trigger line (for errors when it is bound).
    at: usize,
    /// Read once (in an expression with an operator): the read unsets it.
    once: bool,
    /// The defining histogram's table and the variable's index in it.
    bound: Option<(Arc<super::Shared>, usize)>,
    /// Whether the variable is in µs (see [`units`]); known once bound.
    usecs: Option<bool>,
}

/// What decides when an action acts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Handler {
    /// `onmax`: the variable exceeds the entry's largest so far.
    OnMax,
    /// `onchange`: the variable differs from the entry's last.
    OnChange,
}

/// An action: `HANDLER($VAR).save(FIELD,...)` or `HANDLER($VAR).snapshot()`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Action {
    handler: Handler,
    /// The variable it tracks: one of the histogram's own.
    var: usize,
    /// `save()`'s fields, as written and where they are; none for `snapshot()`.
    saved: Box<[(Box<str>, FieldRef)]>,
    snapshot: bool,
    /// Its first word among an entry's action words.
    at: usize,
}

/// The largest value (or last change) that took a snapshot, and the key of its
/// event, for the `hist` file.
#[derive(Debug, Default)]
struct Snapshot {
    value: AtomicU64,
    key: [AtomicU64; super::KEY_WORDS],
    taken: AtomicBool,
}

/// A histogram's variables, its references to other histograms' variables and its
/// actions.
#[derive(Debug, Default)]
pub(super) struct Vars {
    pub(super) defs: Box<[Var]>,
    pub(super) refs: Box<[Ref]>,
    pub(super) actions: Box<[Action]>,
    /// Whether an expression reads `common_timestamp`.
    pub(super) timestamp: bool,
    snapshot: Snapshot,
}

/// What reading an event's variables found.
pub(super) enum Outcome {
    /// Every reference found its value.
    Matched,
    /// A reference found no entry of the key, or its variable unset: the event is
    /// not added.
    Unmatched,
    /// The payload lacks a field: the event is dropped.
    Incomplete,
}

impl Vars {
    /// Parses one `NAME=EXPR[,NAME=EXPR...]` attribute starting at byte `at` into
    /// this histogram's variables.
    pub(super) fn parse(
        &mut self,
        attr: &str,
        at: usize,
        fields: &[Field<'_>],
    ) -> Result<(), HistError> {
        let mut defs = core::mem::take(&mut self.defs).into_vec();
        let mut refs = core::mem::take(&mut self.refs).into_vec();
        let mut pos = at;
        for item in attr.split(',') {
            let item_at = pos;
            pos += item.len() + 1;
            let (name, expr) = item.split_once('=').ok_or((item_at, HistReason::BadVariable))?;
            let valid = !name.is_empty()
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                && !KEYWORDS.contains(&name);
            if !valid {
                return Err((item_at, HistReason::BadVariable));
            }
            if defs.iter().any(|d: &Var| &*d.name == name) {
                return Err((item_at, HistReason::Repeated));
            }
            if defs.len() == MAX_VARS {
                return Err((item_at, HistReason::TooManyVars));
            }
            let expr_at = item_at + name.len() + 1;
            let var = parse_expr(name, expr, expr_at, fields, &defs, &mut refs)?;
            self.timestamp |=
                var.steps.iter().any(|s| matches!(s, Step::Operand(Operand::Timestamp { .. })));
            defs.push(var);
        }
        self.defs = defs.into();
        self.refs = refs.into();
        Ok(())
    }

    /// The index of the variable `name` this histogram defines.
    pub(super) fn own(&self, name: &str) -> Option<usize> {
        self.defs.iter().position(|d| &*d.name == name)
    }

    /// The names of the variables this histogram defines.
    pub(super) fn names(&self) -> impl Iterator<Item = &str> {
        self.defs.iter().map(|d| &*d.name)
    }

    /// Whether there is nothing to compute.
    pub(super) fn is_empty(&self) -> bool {
        self.defs.is_empty()
    }

    /// The references not bound yet: their names and where they are written.
    pub(super) fn unbound(&self) -> impl Iterator<Item = (&str, usize)> {
        self.refs.iter().filter(|r| r.bound.is_none()).map(|r| (&*r.name, r.at))
    }

    /// Binds the references named `name` to variable `index` of `definer`, whose
    /// table is `shared`: refused if an operator then has operands in different
    /// units of time ([`units`]).
    pub(super) fn bind(
        &mut self,
        name: &str,
        definer: &Vars,
        shared: &Arc<super::Shared>,
        index: usize,
    ) -> Result<(), HistReason> {
        let usecs = definer.defs.get(index).map(|d| d.usecs);
        for r in self.refs.iter_mut().filter(|r| &*r.name == name) {
            r.bound = Some((Arc::clone(shared), index));
            r.usecs = usecs;
        }
        self.defs.iter().try_for_each(|d| units(&d.steps, &self.defs, &self.refs).map(drop))
    }

    /// Whether a reference reads a variable of the table `shared`.
    pub(super) fn reads(&self, shared: &Arc<super::Shared>) -> bool {
        self.refs.iter().any(|r| r.bound.as_ref().is_some_and(|(s, _)| Arc::ptr_eq(s, shared)))
    }

    /// Whether `other` defines the same variables, makes the same references and
    /// has the same actions.
    pub(super) fn same_as(&self, other: &Vars) -> bool {
        self.defs == other.defs
            && self.actions == other.actions
            && self.refs.len() == other.refs.len()
            && self.refs.iter().zip(&other.refs[..]).all(|(a, b)| a.name == b.name)
    }

    /// Computes the variables of an event whose key is `key` into `out`: the
    /// references are read from their tables' entries of that key (`now` is
    /// `common_timestamp`, read once if any expression uses it).
    #[inline(always)]
    pub(super) fn compute<F: Fields + ?Sized>(
        &self,
        fields: &F,
        origin: Origin,
        now: u64,
        key: &[u64],
        out: &mut [u64; MAX_VARS],
    ) -> Outcome {
        let mut refs = [0u64; MAX_REFS];
        for (r, value) in self.refs.iter().zip(&mut refs) {
            let Some((shared, index)) = &r.bound else { return Outcome::Unmatched };
            match shared.table.read_var(key, *index, r.once) {
                Some(v) => *value = v,
                None => return Outcome::Unmatched,
            }
        }
        for i in 0..self.defs.len() {
            // The parser keeps every operator after its operands and the stack
            // within its size; a step that finds otherwise leaves the event out.
            let mut stack = Stack::default();
            for step in &self.defs[i].steps {
                let value = match step {
                    Step::Operand(Operand::Field(_, field)) => field.int(fields, origin),
                    Step::Operand(Operand::Timestamp { usecs }) => {
                        Some(if *usecs { now / 1000 } else { now })
                    }
                    Step::Operand(Operand::Own(j)) => out.get(*j).copied(),
                    Step::Operand(Operand::Ref(j)) => refs.get(*j).copied(),
                    Step::Operand(Operand::Const(c)) => Some(*c),
                    Step::Binary(op) => {
                        let (b, a) = (stack.pop(), stack.pop());
                        a.zip(b).map(|(a, b)| op.apply(a, b))
                    }
                    Step::Negate => stack.pop().map(u64::wrapping_neg),
                };
                if value.and_then(|v| stack.push(v)).is_none() {
                    return Outcome::Incomplete;
                }
            }
            out[i] = stack.pop().unwrap_or_default();
        }
        Outcome::Matched
    }
}

impl Vars {
    /// Parses an action attribute at byte `at` (after every variable is known).
    pub(super) fn parse_action(
        &mut self,
        attr: &str,
        at: usize,
        fields: &[Field<'_>],
    ) -> Result<(), HistError> {
        let bad = (at, HistReason::BadAction);
        let (handler, rest) = match attr.split_once('(') {
            Some(("onmax", rest)) => (Handler::OnMax, rest),
            Some(("onchange", rest)) => (Handler::OnChange, rest),
            _ => return Err(bad),
        };
        let (var, rest) = rest.split_once(").").ok_or(bad)?;
        let var_at = at + attr.len() - rest.len() - 2 - var.len();
        let var = var.strip_prefix('$').and_then(|name| self.own(name));
        let var = var.ok_or((var_at, HistReason::HandlerVariable))?;
        let args = rest.strip_suffix(')').ok_or(bad)?;
        let (snapshot, list) = match args.split_once('(') {
            Some(("snapshot", "")) => (true, None),
            Some(("save", list)) if !list.is_empty() => (false, Some(list)),
            _ => return Err(bad),
        };
        let taken = self.actions.iter().any(|a| a.snapshot == snapshot);
        let too_many = list.is_some_and(|l| l.split(',').count() > MAX_SAVED);
        if taken || too_many {
            return Err((at, HistReason::TooManyActions));
        }
        let mut saved = Vec::new();
        let mut pos = at + attr.len() - list.map_or(0, |l| l.len() + 1);
        for name in list.iter().flat_map(|l| l.split(',')) {
            let (field, kind) =
                FieldRef::resolve(fields, name).ok_or((pos, HistReason::UnknownField))?;
            match kind {
                FieldKind::Bytes(_) => return Err((pos, HistReason::BytesField)),
                FieldKind::Str => return Err((pos, HistReason::StringValue)),
                _ => saved.push((Box::from(name), field)),
            }
            pos += name.len() + 1;
        }
        let at = self.actions.iter().map(|a| 1 + a.saved.len()).sum();
        let action = Action { handler, var, saved: saved.into(), snapshot, at };
        let mut actions = core::mem::take(&mut self.actions).into_vec();
        actions.push(action);
        self.actions = actions.into();
        Ok(())
    }

    /// Words an entry keeps for the actions.
    pub(super) fn action_words(&self) -> usize {
        self.actions.iter().map(|a| 1 + a.saved.len()).sum()
    }

    /// Whether an action takes snapshots.
    pub(super) fn takes_snapshots(&self) -> bool {
        self.actions.iter().any(|a| a.snapshot)
    }

    /// Reads the fields `save()` keeps into `out`; false if the payload lacks one.
    #[inline(always)]
    pub(super) fn read_saved<F: Fields + ?Sized>(
        &self,
        fields: &F,
        origin: Origin,
        out: &mut [u64; MAX_SAVED],
    ) -> bool {
        let saved = self.actions.iter().flat_map(|a| a.saved.iter());
        for ((_, field), out) in saved.zip(out) {
            match field.int(fields, origin) {
                Some(v) => *out = v,
                None => return false,
            }
        }
        true
    }

    /// Runs the actions for an event added to an entry whose action words are
    /// `words`: `vars` are its variables, `saved` the fields `save()` keeps, `key`
    /// its key; `snapshot` swaps the snapshot in and says whether it did.
    pub(super) fn act(
        &self,
        words: &[AtomicU64],
        vars: &[u64],
        saved: &[u64; MAX_SAVED],
        key: &[u64],
        mut snapshot: impl FnMut() -> bool,
    ) {
        for action in &self.actions {
            let (Some(&value), Some(track)) = (vars.get(action.var), words.get(action.at)) else {
                continue;
            };
            let acted = match action.handler {
                Handler::OnMax => track.fetch_max(value, Relaxed) < value,
                Handler::OnChange => track.swap(value, Relaxed) != value,
            };
            if !acted {
                continue;
            }
            let kept = words.get(action.at + 1..).unwrap_or_default();
            kept.iter().zip(&saved[..action.saved.len()]).for_each(|(w, &v)| w.store(v, Relaxed));
            if action.snapshot {
                // `onmax`: above the largest that took a snapshot. The details are
                // those of the snapshot taken: a refused swap changes nothing, and
                // the next largest tries again (two swaps on two CPUs at once may
                // leave one's value beside the other's key).
                let state = &self.snapshot;
                let taken = state.taken.load(Relaxed);
                if action.handler == Handler::OnMax && taken && state.value.load(Relaxed) >= value {
                    continue;
                }
                if snapshot() {
                    state.value.store(value, Relaxed);
                    state.key.iter().zip(key).for_each(|(w, &k)| w.store(k, Relaxed));
                    state.taken.store(true, Relaxed);
                }
            }
        }
    }

    /// Writes an entry's action lines (`words`: its action words) as ftrace does.
    pub(super) fn write_entry(&self, words: &[u64], out: &mut dyn fmt::Write) -> fmt::Result {
        for action in &self.actions {
            let name = match action.handler {
                Handler::OnMax => "max",
                Handler::OnChange => "changed",
            };
            write!(out, "\n\t{name}: {:>10}", words.get(action.at).copied().unwrap_or(0))?;
            for (i, (field, _)) in action.saved.iter().enumerate() {
                let v = words.get(action.at + 1 + i).copied().unwrap_or(0);
                write!(out, "  {field}: {v:>10}")?;
            }
        }
        Ok(())
    }

    /// Writes, if an action took a snapshot, what took it: the value and (through
    /// `key`, which writes a key's words) the key.
    pub(super) fn write_snapshot(
        &self,
        key: impl FnOnce(&[u64], &mut dyn fmt::Write) -> fmt::Result,
        out: &mut dyn fmt::Write,
    ) -> fmt::Result {
        let Some(action) = self.actions.iter().find(|a| a.snapshot) else { return Ok(()) };
        if !self.snapshot.taken.load(Relaxed) {
            return Ok(());
        }
        let handler = if action.handler == Handler::OnMax { "onmax" } else { "onchange" };
        let value = self.snapshot.value.load(Relaxed);
        let name = &self.defs[action.var].name;
        out.write_str("\nSnapshot taken (see tracing/snapshot).  Details:\n")?;
        write!(out, "\ttriggering value {{ {handler}(${name}) }}: {value:>10}\t")?;
        out.write_str("triggered by event with key: { ")?;
        let words: Vec<u64> = self.snapshot.key.iter().map(|w| w.load(Relaxed)).collect();
        key(&words, out)?;
        out.write_str(" }\n")
    }

    /// Forgets the snapshot's value and key (the table was cleared).
    pub(super) fn reset(&self) {
        self.snapshot.value.store(0, Relaxed);
        self.snapshot.taken.store(false, Relaxed);
    }
}

/// Parses variable `name`'s expression `expr` (at byte `at`) as ftrace does: `defs`
/// are the variables defined before it; references to others are added to `refs`.
fn parse_expr(
    name: &str,
    expr: &str,
    at: usize,
    fields: &[Field<'_>],
    defs: &[Var],
    refs: &mut Vec<Ref>,
) -> Result<Var, HistError> {
    let once = root(expr).is_some();
    let mut parser = Parser { fields, defs, refs, once, operators: 0, steps: Vec::new() };
    parser.expr(expr, at)?;
    // ftrace places this error at the line's start.
    let steps = parser.steps;
    let usecs = units(&steps, defs, refs).map_err(|reason| (0, reason))?;
    Ok(Var { name: name.into(), steps: steps.into(), usecs })
}

/// What a part of an expression says of its unit of time, as ftrace checks it.
#[derive(Clone, Copy)]
struct Unit {
    /// In µs as the first operand of a larger expression makes it: a variable
    /// read is not.
    written: bool,
    /// In µs as an operand, where the operands are compared: a variable read is
    /// as its variable is; `None`: another histogram's, not bound yet.
    read: Option<bool>,
}

/// Whether the expression `steps` is in µs, after checking, as ftrace does, that
/// each operator's operands count time alike: both in µs (`common_timestamp.usecs`,
/// or a variable that holds it) or neither; references not bound yet are checked
/// when they are. `defs` are the variables it may read of its own histogram,
/// `refs` those of others.
fn units(steps: &[Step], defs: &[Var], refs: &[Ref]) -> Result<bool, HistReason> {
    let mut stack: Vec<Unit> = Vec::with_capacity(MAX_OPERANDS);
    let of = |written: bool| Unit { written, read: Some(written) };
    for step in steps {
        let unit = match step {
            Step::Operand(Operand::Timestamp { usecs }) => of(*usecs),
            Step::Operand(Operand::Field(..) | Operand::Const(_)) => of(false),
            Step::Operand(Operand::Own(i)) => {
                Unit { written: false, read: defs.get(*i).map(|d| d.usecs) }
            }
            Step::Operand(Operand::Ref(i)) => {
                Unit { written: false, read: refs.get(*i).and_then(|r| r.usecs) }
            }
            Step::Negate => of(stack.pop().ok_or(HistReason::BadExpression)?.written),
            Step::Binary(_) => {
                let b = stack.pop().ok_or(HistReason::BadExpression)?;
                let a = stack.pop().ok_or(HistReason::BadExpression)?;
                if let (Some(x), Some(y)) = (a.read, b.read)
                    && x != y
                {
                    return Err(HistReason::TimestampMismatch);
                }
                of(a.written)
            }
        };
        stack.push(unit);
    }
    Ok(stack.pop().is_some_and(|u| u.written))
}

/// The operator an expression splits at.
enum Root {
    /// A unary minus, the expression's first character.
    Negate,
    /// A binary operator at this byte.
    Binary(usize, Op),
}

/// Where `expr` splits, as ftrace chooses: at the last `+` or `-`, else at the last
/// `*` or `/`, so that each applies from the left, `*` and `/` first; a last `-`
/// that is also the first character is a unary minus. `None`: an operand.
fn root(expr: &str) -> Option<Root> {
    if expr.rfind('-') == Some(0) {
        return Some(Root::Negate);
    }
    let last = |ops: &[Op]| {
        ops.iter().filter_map(|&op| Some((expr.rfind(op.symbol())?, op))).max_by_key(|&(i, _)| i)
    };
    let (i, op) = last(&[Op::Add, Op::Sub]).or_else(|| last(&[Op::Mul, Op::Div]))?;
    Some(Root::Binary(i, op))
}

/// An expression being parsed into postfix steps.
struct Parser<'a, 'f> {
    fields: &'a [Field<'f>],
    defs: &'a [Var],
    refs: &'a mut Vec<Ref>,
    /// Whether references read once: the expression has an operator.
    once: bool,
    /// The operators met so far.
    operators: usize,
    steps: Vec<Step>,
}

impl Parser<'_, '_> {
    /// Parses `text`, at byte `at`, onto the steps: an operand, `-(EXPR)`, or two
    /// expressions and the operator between them, numbers joined computed at once.
    fn expr(&mut self, text: &str, at: usize) -> Result<(), HistError> {
        if self.operators > MAX_OPERATORS {
            return Err((at, HistReason::TooManyOperators));
        }
        match root(text) {
            None => {
                let (fields, defs) = (self.fields, self.defs);
                let operand = operand(text, at, fields, defs, self.refs, self.once)?;
                self.steps.push(Step::Operand(operand));
            }
            Some(Root::Negate) => {
                // Counted, and refused, at the minus, as ftrace does.
                self.operators += 1;
                if self.operators > MAX_OPERATORS {
                    return Err((at, HistReason::TooManyOperators));
                }
                let inner =
                    text[1..].strip_prefix('(').ok_or((at + 1, HistReason::BadExpression))?;
                let close = inner.rfind(')').ok_or((at + text.len(), HistReason::BadExpression))?;
                // The parentheses hold the rest of this part: nothing follows them.
                if close + 1 < inner.len() {
                    return Err((at + 2, HistReason::UnaryMinus));
                }
                self.expr(&inner[..close], at + 2)?;
                self.steps.push(Step::Negate);
            }
            Some(Root::Binary(i, op)) => {
                self.operators += 1;
                let start = self.steps.len();
                self.expr(&text[..i], at)?;
                let middle = self.steps.len();
                self.expr(&text[i + 1..], at + i + 1)?;
                match (&self.steps[start..middle], &self.steps[middle..]) {
                    (_, [Step::Operand(Operand::Const(0))]) if op == Op::Div => {
                        return Err((at + i + 1, HistReason::DivisionByZero));
                    }
                    ([Step::Operand(Operand::Const(a))], [Step::Operand(Operand::Const(b))]) => {
                        let folded = Operand::Const(op.apply(*a, *b));
                        self.steps.truncate(start);
                        self.steps.push(Step::Operand(folded));
                    }
                    _ => self.steps.push(Step::Binary(op)),
                }
            }
        }
        Ok(())
    }
}

/// Parses one operand at byte `at`.
fn operand(
    text: &str,
    at: usize,
    fields: &[Field<'_>],
    defs: &[Var],
    refs: &mut Vec<Ref>,
    once: bool,
) -> Result<Operand, HistError> {
    if text.is_empty() {
        return Err((at, HistReason::BadExpression));
    }
    if let Some(name) = text.strip_prefix('$') {
        if let Some(i) = defs.iter().position(|d| &*d.name == name) {
            return Ok(Operand::Own(i));
        }
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err((at, HistReason::BadExpression));
        }
        // One read per event of each variable, however often the line names it.
        if let Some(i) = refs.iter().position(|r| &*r.name == name) {
            refs[i].once |= once;
            return Ok(Operand::Ref(i));
        }
        if refs.len() == MAX_REFS {
            return Err((at, HistReason::TooManyVars));
        }
        refs.push(Ref { name: name.into(), at, once, bound: None, usecs: None });
        return Ok(Operand::Ref(refs.len() - 1));
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        return text.parse().map(Operand::Const).map_err(|_| (at, HistReason::BadExpression));
    }
    match text {
        "common_timestamp" => return Ok(Operand::Timestamp { usecs: false }),
        "common_timestamp.usecs" => return Ok(Operand::Timestamp { usecs: true }),
        _ => {}
    }
    if let Some((_, modifier)) = text.split_once('.') {
        return Err((at + text.len() - modifier.len(), HistReason::BadModifier));
    }
    let (field, kind) = FieldRef::resolve(fields, text).ok_or((at, HistReason::UnknownField))?;
    match kind {
        FieldKind::Bytes(_) => Err((at, HistReason::BytesField)),
        FieldKind::Str => Err((at, HistReason::StringValue)),
        _ => Ok(Operand::Field(text.into(), field)),
    }
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operand::Field(name, _) => f.write_str(name),
            Operand::Timestamp { usecs: false } => f.write_str("common_timestamp"),
            Operand::Timestamp { usecs: true } => f.write_str("common_timestamp.usecs"),
            // Written by the histogram, which knows the names.
            Operand::Own(_) | Operand::Ref(_) => Ok(()),
            Operand::Const(c) => write!(f, "{c}"),
        }
    }
}

impl Vars {
    /// Writes the definitions as they read back, as Linux's trigger line has them:
    /// `:NAME=EXPR,NAME=EXPR` (nothing without any).
    pub(super) fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, var) in self.defs.iter().enumerate() {
            write!(f, "{}{}=", if i > 0 { "," } else { ":" }, var.name)?;
            // Infix again, as written: the parser splits where no parentheses are
            // needed to read it back the same.
            let mut stack: Vec<String> = Vec::new();
            for step in &var.steps {
                let text = match step {
                    Step::Operand(Operand::Own(i)) => format!("${}", self.defs[*i].name),
                    Step::Operand(Operand::Ref(i)) => format!("${}", self.refs[*i].name),
                    Step::Operand(other) => format!("{other}"),
                    Step::Binary(op) => {
                        let (b, a) =
                            (stack.pop().unwrap_or_default(), stack.pop().unwrap_or_default());
                        format!("{a}{}{b}", op.symbol())
                    }
                    Step::Negate => format!("-({})", stack.pop().unwrap_or_default()),
                };
                stack.push(text);
            }
            f.write_str(&stack.concat())?;
        }
        Ok(())
    }

    /// Writes the actions as they read back, `:HANDLER($VAR).ACTION(...)` each,
    /// which Linux's trigger line has after `:size=N`.
    pub(super) fn write_actions(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for action in &self.actions {
            let handler = if action.handler == Handler::OnMax { "onmax" } else { "onchange" };
            write!(f, ":{handler}(${})", self.defs[action.var].name)?;
            if action.snapshot {
                f.write_str(".snapshot()")?;
            } else {
                f.write_str(".save(")?;
                for (i, (name, _)) in action.saved.iter().enumerate() {
                    write!(f, "{}{name}", if i > 0 { "," } else { "" })?;
                }
                f.write_str(")")?;
            }
        }
        Ok(())
    }
}
