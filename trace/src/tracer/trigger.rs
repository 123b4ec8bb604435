//! Event triggers in ftrace's syntax (`Documentation/trace/events.rst`, "Event
//! triggers"): an action run when an event fires in an instance.
//!
//! ```text
//! [!]COMMAND[:COUNT] [if FILTER]
//! COMMAND := traceon | traceoff | snapshot | stacktrace
//!          | enable_event:SYSTEM:EVENT | disable_event:SYSTEM:EVENT
//!          | enable_hist:SYSTEM:EVENT | disable_hist:SYSTEM:EVENT   (event triggers only)
//!          | dump | cpudump            (function commands only)
//! [!]hist:ATTRIBUTES [if FILTER]       (histograms, event triggers only: crate::tracer::hist)
//! ```
//!
//! `enable_hist` and `disable_hist` continue or pause every histogram the target
//! event has in the instance. `COUNT` limits how many times the trigger acts
//! (`traceon`, `traceoff`, `enable_event` and `disable_event` count only the times
//! they change something, as in ftrace); the count is decremented atomically, from any context. `FILTER` is an
//! event filter ([`crate::event::Filter`]) on the triggering event's fields. A leading `!`
//! removes the trigger with the same command (and target event). Read back, each
//! trigger prints as ftrace prints it: `traceoff:count=2 if irq == 48`,
//! `enable_event:sched:sched_switch:unlimited`.
//!
//! Triggers run in the context of the event that fires them, NMIs included, so every
//! action is lock-free: `traceon`/`traceoff` store the instance's recording switch,
//! `enable_event`/`disable_event` flip the target's enable bit, `enable_hist`/
//! `disable_hist` store the target's histograms' pause flags, `snapshot` exchanges
//! the live and snapshot buffers without waiting, `hist` adds to its table, and
//! `stacktrace` records a [`STACK_TRACE`] event with the frames the platform's
//! unwinder gives ([`crate::Platform::stack_trace`]; none without one). A snapshot
//! refused in the event's context is counted in [`Trigger::refused`] and marked in
//! the live buffer: while another snapshot operation of the instance runs; and if
//! the snapshot buffer was freed, as in ftrace, recording stops too, so the window
//! stays in the live buffer.

use crate::event::dispatch::Body;
use crate::event::filter::{Fields, Filter, FilterReason, parse_unsigned};
use crate::event::format_file::Origin;
use crate::event::{DescriptorKind, EventDescriptor};
use crate::field::{Field, FieldKind, Sink};
use crate::symtab::SymbolTable;
use crate::tracer::hist::{Hist, HistError, HistHost, HistOp, HistReason};
use crate::tracer::is_settable;
use alloc::boxed::Box;
use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Most frames a `stacktrace` trigger records.
pub const STACK_FRAMES: usize = 8;

/// The `ftrace:kernel_stack` event a `stacktrace` trigger records: how many frames
/// the unwinder gave, then the return addresses, innermost first (zero past `depth`).
pub static STACK_TRACE: EventDescriptor = EventDescriptor::new(
    "ftrace",
    "kernel_stack",
    "depth={depth} {ip0:#x} {ip1:#x} {ip2:#x} {ip3:#x} {ip4:#x} {ip5:#x} {ip6:#x} {ip7:#x}",
    &[
        Field { name: "depth", kind: FieldKind::U8 },
        Field { name: "ip0", kind: FieldKind::U64 },
        Field { name: "ip1", kind: FieldKind::U64 },
        Field { name: "ip2", kind: FieldKind::U64 },
        Field { name: "ip3", kind: FieldKind::U64 },
        Field { name: "ip4", kind: FieldKind::U64 },
        Field { name: "ip5", kind: FieldKind::U64 },
        Field { name: "ip6", kind: FieldKind::U64 },
        Field { name: "ip7", kind: FieldKind::U64 },
    ],
    DescriptorKind::Event,
);

/// Bytes of a [`STACK_TRACE`] payload.
pub(crate) const STACK_PAYLOAD: usize = 1 + 8 * STACK_FRAMES;

/// Writes a [`STACK_TRACE`] payload of `frames` (innermost first; the first
/// [`STACK_FRAMES`] kept) into `out`.
pub(crate) fn put_stack(out: &mut impl Sink, frames: &[u64]) {
    let frames = &frames[..frames.len().min(STACK_FRAMES)];
    out.put(&[frames.len() as u8]);
    (0..STACK_FRAMES).for_each(|i| out.put_u64(frames.get(i).copied().unwrap_or(0)));
}

/// Longest trigger line, in bytes (the filter included).
pub const MAX_TRIGGER_LEN: usize = 1024;
/// Most triggers on one event in one instance.
pub const MAX_TRIGGERS: usize = 8;

/// A count that never runs out.
const UNLIMITED: u64 = u64::MAX;

/// What a trigger does. Two actions are equal when they are the same command on
/// the same target event (which triggers an event may hold together:
/// [`Trigger::same_as`]).
#[derive(Clone, Copy, Debug)]
pub enum Action {
    /// Turns recording on in the instance.
    TraceOn,
    /// Turns recording off in the instance.
    TraceOff,
    /// Swaps the instance's live and snapshot buffers.
    Snapshot,
    /// Records the caller's stack as a [`STACK_TRACE`] event.
    StackTrace,
    /// Prints the trace to the platform's console (a function command only), every
    /// CPU's records (`dump`) or the calling CPU's (`cpudump`).
    Dump {
        /// Only the calling CPU's records.
        this_cpu: bool,
    },
    /// Enables this event in the instance.
    EnableEvent(&'static EventDescriptor),
    /// Disables this event in the instance.
    DisableEvent(&'static EventDescriptor),
    /// Continues this event's histograms in the instance.
    EnableHist(&'static EventDescriptor),
    /// Pauses this event's histograms in the instance.
    DisableHist(&'static EventDescriptor),
    /// Adds the event to a histogram ([`Trigger::hist`]).
    Hist,
}

impl Action {
    /// The command's name.
    fn name(self) -> &'static str {
        match self {
            Action::TraceOn => "traceon",
            Action::TraceOff => "traceoff",
            Action::Snapshot => "snapshot",
            Action::StackTrace => "stacktrace",
            Action::Dump { this_cpu: false } => "dump",
            Action::Dump { this_cpu: true } => "cpudump",
            Action::EnableEvent(_) => "enable_event",
            Action::DisableEvent(_) => "disable_event",
            Action::EnableHist(_) => "enable_hist",
            Action::DisableHist(_) => "disable_hist",
            Action::Hist => "hist",
        }
    }
}

impl Action {
    /// The event `enable_event`, `disable_event`, `enable_hist` or `disable_hist`
    /// acts on (which is then in soft mode, as in ftrace).
    pub fn target(self) -> Option<&'static EventDescriptor> {
        match self {
            Action::EnableEvent(event)
            | Action::DisableEvent(event)
            | Action::EnableHist(event)
            | Action::DisableHist(event) => Some(event),
            _ => None,
        }
    }

    /// Whether the command is taken by events only, not as a function command (as
    /// in ftrace).
    pub(crate) fn event_only(self) -> bool {
        matches!(self, Action::Hist | Action::EnableHist(_) | Action::DisableHist(_))
    }

    /// The action with its pair, of which an event holds one per target: `traceon`
    /// for `traceoff`, `enable_X` for `disable_X` (in ftrace each pair is one type).
    fn kind(self) -> Action {
        match self {
            Action::TraceOff => Action::TraceOn,
            Action::DisableEvent(event) => Action::EnableEvent(event),
            Action::DisableHist(event) => Action::EnableHist(event),
            action => action,
        }
    }
}

impl PartialEq for Action {
    fn eq(&self, other: &Action) -> bool {
        match (self, other) {
            (Action::EnableEvent(a), Action::EnableEvent(b))
            | (Action::DisableEvent(a), Action::DisableEvent(b))
            | (Action::EnableHist(a), Action::EnableHist(b))
            | (Action::DisableHist(a), Action::DisableHist(b)) => core::ptr::eq(*a, *b),
            (Action::Dump { this_cpu: a }, Action::Dump { this_cpu: b }) => a == b,
            (a, b) => core::mem::discriminant(a) == core::mem::discriminant(b),
        }
    }
}

impl Eq for Action {}

/// Why a trigger line was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TriggerReason {
    /// Nothing to parse.
    Empty,
    /// Longer than [`MAX_TRIGGER_LEN`].
    TooLong,
    /// Not one of the commands.
    UnknownCommand,
    /// `enable_event`, `disable_event`, `enable_hist`, `disable_hist` need
    /// `:SYSTEM:EVENT`.
    ExpectedEvent,
    /// The tracer has no such event.
    UnknownEvent,
    /// The event exists, but the tracer writes it itself: no trigger turns it on or
    /// off (`enable_event` takes the events `set_event` takes).
    NotTakenEvent,
    /// The count is not a number below 2^64 - 1 (0 is a trigger that never fires,
    /// as in ftrace).
    BadCount,
    /// Text where `if FILTER` or the end was expected.
    UnexpectedText,
    /// Text after a function command (`FUNCTION:COMMAND[:COUNT]`), which takes no
    /// filter.
    CommandEnd,
    /// The filter after `if` is refused.
    Filter(FilterReason),
    /// The event has this trigger already (see [`Trigger::same_as`]: `traceon` or
    /// `traceoff`, one of `enable_event`/`disable_event` and one of
    /// `enable_hist`/`disable_hist` per target, one `hist` per definition).
    Exists,
    /// The event has no histogram for `:cont` or `:clear` to act on.
    NotFound,
    /// The event has [`MAX_TRIGGERS`] triggers already.
    TooMany,
    /// The `hist` command is refused.
    Hist(HistReason),
}

/// A refused trigger line: the byte offset where the problem is, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TriggerError {
    /// Byte offset into the line as given.
    pub pos: usize,
    /// What is wrong there.
    pub reason: TriggerReason,
}

impl TriggerError {
    /// `line`'s command, valid but not taken where it was written (`dump` on an
    /// event, `hist` on a function, ...): refused at the command.
    pub(crate) fn unknown_command(line: &str) -> TriggerError {
        let pos = line.len() - line.trim_start().trim_start_matches('!').len();
        TriggerError { pos, reason: TriggerReason::UnknownCommand }
    }
}

impl core::error::Error for TriggerError {}

impl fmt::Display for TriggerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let reason = match self.reason {
            TriggerReason::Empty => "empty trigger",
            TriggerReason::TooLong => "trigger too long",
            TriggerReason::UnknownCommand => {
                "unknown command (traceon, traceoff, snapshot, stacktrace, enable_event, \
                 disable_event, enable_hist, disable_hist, hist)"
            }
            TriggerReason::ExpectedEvent => "SYSTEM:EVENT expected",
            TriggerReason::UnknownEvent => "no such event",
            TriggerReason::NotTakenEvent => {
                "the tracer writes that event itself: no trigger turns it on or off (see \
                 available_events)"
            }
            TriggerReason::BadCount => "count must be a number below 2^64 - 1",
            TriggerReason::UnexpectedText => "'if FILTER' or the end expected",
            TriggerReason::CommandEnd => "the end expected (a function command takes no filter)",
            TriggerReason::Filter(reason) => {
                return write!(f, "parse error at {}: {reason}", self.pos);
            }
            TriggerReason::Hist(reason) => {
                return write!(f, "parse error at {}: {reason}", self.pos);
            }
            TriggerReason::Exists => {
                "the event has this trigger already (traceon and traceoff: one of the two; \
                 enable_event and disable_event, enable_hist and disable_hist: one per target; \
                 hist: one per name, keys, values, sort, variables and filter)"
            }
            TriggerReason::NotFound => "no such trigger on the event",
            TriggerReason::TooMany => "too many triggers on the event",
        };
        write!(f, "parse error at {}: {reason}", self.pos)
    }
}

/// A trigger: an action, how many times it may still act, and an optional filter.
#[derive(Debug)]
pub struct Trigger {
    action: Action,
    /// Times left ([`UNLIMITED`]: no limit).
    count: AtomicU64,
    filter: Option<Filter>,
    /// Times the action could not run in the event's context.
    refused: AtomicU64,
    /// The histogram of a `hist` trigger.
    hist: Option<Box<Hist>>,
}

/// What a trigger line asks for.
#[derive(Debug)]
pub enum TriggerCommand {
    /// Add this trigger.
    Add(Trigger),
    /// Remove the trigger with this one's action (`!COMMAND`).
    Remove(Trigger),
    /// A `hist` line ending in `:pause`, `:cont` or `:clear`: do that to the event's
    /// histogram that is the same as this one, or, if it has none, add this one
    /// (paused, for `:pause`).
    Hist(Trigger, HistOp),
}

impl TriggerCommand {
    /// The trigger the line describes.
    pub fn trigger(&self) -> &Trigger {
        match self {
            TriggerCommand::Add(trigger)
            | TriggerCommand::Remove(trigger)
            | TriggerCommand::Hist(trigger, _) => trigger,
        }
    }
}

/// What a firing trigger acts on: the instance the event fired in.
pub(crate) trait Target {
    /// Whether the instance records.
    fn tracing(&self) -> bool;
    /// Turns the instance's recording on or off.
    fn set_tracing(&self, on: bool);
    /// Swaps the live and snapshot buffers, from the event's context.
    fn snapshot(&self) -> Result<(), crate::Error>;
    /// Whether the snapshot is the instance's `irqsoff` window, which a `snapshot`
    /// trigger leaves alone.
    fn snapshot_kept(&self) -> bool {
        false
    }
    /// Writes a line of text into the instance's live buffer, as a marker is.
    fn note(&self, text: &str);
    /// Records the caller's stack.
    fn stack_trace(&self);
    /// Pauses or continues every histogram `event` has in the instance.
    fn set_hists_paused(&self, event: &EventDescriptor, paused: bool);
    /// Fills `frames` with the caller's return addresses, innermost first (zero past
    /// the last the unwinder gives).
    fn stack_frames(&self, frames: &mut [u64]);
    /// A reading of the instance's clock (a histogram's `common_timestamp`).
    fn now(&self) -> u64;
    /// Prints the trace to the platform's console (only the calling CPU's records:
    /// `this_cpu`); whether it did.
    fn dump(&self, this_cpu: bool) -> bool;
    /// Whether the instance records `event`.
    fn event_enabled(&self, event: &EventDescriptor) -> bool;
    /// Enables or disables `event` in the instance.
    fn set_event(&self, event: &EventDescriptor, on: bool);
}

impl Trigger {
    /// Parses one line written to an event's `trigger` file. `fields` are the
    /// triggering event's (for `if FILTER`, whose `.function` names `symbols` has);
    /// `lookup` finds `SYSTEM:EVENT` targets.
    pub fn parse(
        line: &str,
        fields: &[Field<'_>],
        lookup: impl Fn(&str, &str) -> Option<&'static EventDescriptor>,
        symbols: Option<&SymbolTable<'_>>,
    ) -> Result<TriggerCommand, TriggerError> {
        let err = |pos: usize, reason| TriggerError { pos, reason };
        if line.len() > MAX_TRIGGER_LEN {
            return Err(err(MAX_TRIGGER_LEN, TriggerReason::TooLong));
        }
        let start = line.len() - line.trim_start().len();
        let text = line.trim_end();
        if start >= text.len() {
            return Err(err(0, TriggerReason::Empty));
        }
        let (remove, command_at) = match text[start..].strip_prefix('!') {
            Some(_) => (true, start + 1),
            None => (false, start),
        };
        let command_end = text[command_at..]
            .find(|c: char| c.is_ascii_whitespace())
            .map_or(text.len(), |i| command_at + i);
        let command = &text[command_at..command_end];
        let mut parts = command.split(':');
        let name = parts.next().unwrap_or_default();
        // Where each `:`-separated part starts.
        let mut at = command_at + name.len() + 1;
        let mut next_part = || {
            let part = parts.next()?;
            let part_at = at;
            at += part.len() + 1;
            Some((part, part_at))
        };
        let (mut hist_of, mut hist_op) = (None, None);
        let action = match name {
            "traceon" => Action::TraceOn,
            "traceoff" => Action::TraceOff,
            "snapshot" => Action::Snapshot,
            "stacktrace" => Action::StackTrace,
            "dump" => Action::Dump { this_cpu: false },
            "cpudump" => Action::Dump { this_cpu: true },
            "enable_event" | "disable_event" | "enable_hist" | "disable_hist" => {
                let (Some((system, _)), Some((event, event_at))) = (next_part(), next_part())
                else {
                    return Err(err(command_end, TriggerReason::ExpectedEvent));
                };
                // `enable_event` needs an event `set_event` takes; `enable_hist`, one
                // that can hold a histogram (the markers' and function events too).
                let takes = |d: &EventDescriptor| match name {
                    "enable_hist" | "disable_hist" => !core::ptr::eq(d, &STACK_TRACE),
                    _ => is_settable(d),
                };
                let target = lookup(system, event)
                    .filter(|d| d.kind == DescriptorKind::Event)
                    .ok_or(err(event_at, TriggerReason::UnknownEvent))?;
                if !takes(target) {
                    return Err(err(event_at, TriggerReason::NotTakenEvent));
                }
                match name {
                    "enable_event" => Action::EnableEvent(target),
                    "disable_event" => Action::DisableEvent(target),
                    "enable_hist" => Action::EnableHist(target),
                    _ => Action::DisableHist(target),
                }
            }
            "hist" => {
                let (hist, op) = Hist::parse(command, command_at, fields)
                    .map_err(|(pos, reason)| err(pos, TriggerReason::Hist(reason)))?;
                // The attributes are the histogram's: no count.
                while next_part().is_some() {}
                (hist_of, hist_op) = (Some(Box::new(hist)), op);
                Action::Hist
            }
            _ => return Err(err(command_at, TriggerReason::UnknownCommand)),
        };
        // As in Linux, a removal names the trigger by its command and target alone
        // (a histogram's, by its attributes and condition): the count and condition
        // the `trigger` file lists with it are not read, so the listed line with `!`
        // before it removes it.
        if remove && hist_of.is_none() {
            let trigger = Trigger {
                action,
                count: AtomicU64::new(UNLIMITED),
                filter: None,
                refused: AtomicU64::new(0),
                hist: None,
            };
            return Ok(TriggerCommand::Remove(trigger));
        }
        let count = match next_part() {
            None => UNLIMITED,
            // As Linux's `kstrtoul` base 0: decimal, `0x` hex or `0` octal.
            Some((count, count_at)) => parse_unsigned(count)
                .filter(|&n| n != UNLIMITED)
                .ok_or(err(count_at, TriggerReason::BadCount))?,
        };
        if let Some((_, extra_at)) = next_part() {
            return Err(err(extra_at, TriggerReason::UnexpectedText));
        }
        let rest = &text[command_end..];
        let rest_at = command_end + (rest.len() - rest.trim_start().len());
        let rest = rest.trim_start();
        let filter = if rest.is_empty() {
            None
        } else {
            let condition = rest
                .strip_prefix("if")
                .filter(|c| c.starts_with(|ch: char| ch.is_ascii_whitespace()))
                .ok_or(err(rest_at, TriggerReason::UnexpectedText))?;
            let filter_at = rest_at + 2;
            Some(
                Filter::compile_with(fields, condition, symbols)
                    .map_err(|e| err(filter_at + e.pos, TriggerReason::Filter(e.reason)))?,
            )
        };
        let trigger = Trigger {
            action,
            count: AtomicU64::new(count),
            filter,
            refused: AtomicU64::new(0),
            hist: hist_of,
        };
        Ok(match (remove, hist_op) {
            (true, _) => TriggerCommand::Remove(trigger),
            (false, Some(op)) => TriggerCommand::Hist(trigger, op),
            (false, None) => TriggerCommand::Add(trigger),
        })
    }

    /// The action.
    pub fn action(&self) -> Action {
        self.action
    }

    /// How many more times the trigger acts (`None`: no limit).
    pub fn count(&self) -> Option<u64> {
        Some(self.count.load(Relaxed)).filter(|&n| n != UNLIMITED)
    }

    /// The filter after `if`, if any.
    pub fn filter(&self) -> Option<&Filter> {
        self.filter.as_ref()
    }

    /// Times the action could not run in the event's context (a `snapshot` while
    /// another snapshot operation of the instance ran, or without a snapshot buffer;
    /// a dump the platform refused).
    pub fn refused(&self) -> u64 {
        self.refused.load(Relaxed)
    }

    /// Allocates what the trigger needs to act (a histogram's table), before it is
    /// set; refused if the histograms' memory is used up.
    pub(crate) fn allocate(&mut self) -> Result<(), TriggerReason> {
        match self.hist.as_mut().map(|hist| hist.allocate()) {
            Some(false) => Err(TriggerReason::Hist(HistReason::NoMemory)),
            _ => Ok(()),
        }
    }

    /// The histogram of a `hist` trigger.
    pub fn hist(&self) -> Option<&Hist> {
        self.hist.as_deref()
    }

    /// Binds a `hist` trigger's references to variable `name` (not set yet, the
    /// first written at byte `at`) to `definer`'s (see [`Hist::bind_var`]).
    pub(crate) fn bind_var(
        &mut self,
        name: &str,
        at: usize,
        definer: &Hist,
    ) -> Result<(), HistError> {
        self.hist.as_mut().map_or(Ok(()), |hist| hist.bind_var(name, at, definer))
    }

    /// Makes a `hist` trigger's histogram (not set yet) share the table of `named`,
    /// a histogram of the same name (see [`Hist::share`]).
    pub(crate) fn share_hist(&mut self, named: &Hist) -> Result<(), TriggerReason> {
        match self.hist.as_mut() {
            Some(hist) => hist.share(named).map_err(TriggerReason::Hist),
            None => Ok(()),
        }
    }

    /// Whether `other` is the same trigger, of which an event holds one: the same
    /// command, except that `traceon` and `traceoff` are one, and so are
    /// `enable_event` and `disable_event`, and `enable_hist` and `disable_hist`, per
    /// target event (in Linux each pair is one trigger type: the second is refused,
    /// and `!` removes either); histograms are the same with the same keys, values,
    /// sort and filter.
    pub fn same_as(&self, other: &Trigger) -> bool {
        if let (Some(a), Some(b)) = (self.hist(), other.hist()) {
            let (x, y) = (self.filter.as_ref(), other.filter.as_ref());
            return a.same_as(b) && x.map(Filter::text) == y.map(Filter::text);
        }
        self.action.kind() == other.action.kind()
    }

    /// Whether it acts without the event's record: no condition, and an action that
    /// neither follows the record (`traceoff`, `stacktrace`, as ftrace's post
    /// triggers) nor reads it (`hist`).
    pub(crate) fn fires_without_record(&self) -> bool {
        self.filter.is_none()
            && matches!(
                self.action,
                Action::TraceOn
                    | Action::Snapshot
                    | Action::EnableEvent(_)
                    | Action::DisableEvent(_)
                    | Action::EnableHist(_)
                    | Action::DisableHist(_)
            )
    }

    /// Whether it enables or disables `event`.
    pub(crate) fn toggles(&self, event: &EventDescriptor) -> bool {
        match self.action {
            Action::EnableEvent(target) | Action::DisableEvent(target) => {
                core::ptr::eq(target, event)
            }
            _ => false,
        }
    }

    /// Whether it acts once the event's record is committed, after the event's other
    /// triggers (ftrace's post triggers: `traceoff`, `stacktrace`).
    pub(crate) fn follows_commit(&self) -> bool {
        matches!(self.action, Action::TraceOff | Action::StackTrace)
    }

    /// Takes one from the count: false once it ran out. Lock-free (a CAS loop),
    /// callable from any context.
    fn take(&self) -> bool {
        if self.count.load(Relaxed) == UNLIMITED {
            return true;
        }
        self.count.try_update(Relaxed, Relaxed, |n| n.checked_sub(1)).is_ok()
    }

    /// Runs the trigger for an event (`body`, written at `origin`) fired in `target`.
    /// Its condition is judged as filters are ([`Body::passes`]).
    pub(crate) fn fire(&self, body: &Body<'_>, origin: Origin, target: &impl Target) {
        if self.filter.as_ref().is_some_and(|f| !body.passes(f, origin)) {
            return;
        }
        match self.action {
            Action::TraceOn | Action::TraceOff => {
                let on = self.action == Action::TraceOn;
                if target.tracing() != on && self.take() {
                    target.set_tracing(on);
                }
            }
            Action::EnableEvent(event) | Action::DisableEvent(event) => {
                let on = matches!(self.action, Action::EnableEvent(_));
                if target.event_enabled(event) != on && self.take() {
                    target.set_event(event, on);
                }
            }
            // Counted on each run, as in ftrace.
            Action::EnableHist(event) | Action::DisableHist(event) => {
                let paused = matches!(self.action, Action::DisableHist(_));
                if self.take() {
                    target.set_hists_paused(event, paused);
                }
            }
            Action::Snapshot => {
                if !self.take() {
                    return;
                }
                if target.snapshot_kept() {
                    // ftrace's words, where a latency tracer holds the snapshot; the
                    // count stays taken, as ftrace's.
                    target.note("*** LATENCY TRACER ACTIVE ***");
                    target.note("*** Can not use snapshot (sorry) ***");
                    self.count_refusal(false);
                    return;
                }
                match target.snapshot() {
                    Ok(()) => {}
                    // As ftrace: the window the snapshot was to keep stays in the
                    // live buffer, marked, and nothing overwrites it. The count
                    // stays taken, as ftrace's, so a counted trigger stops
                    // recording that many times, not at every event after.
                    Err(crate::Error::NoSpare) => {
                        target.note("*** SNAPSHOT NOT ALLOCATED ***");
                        target.note("*** stopping trace here!   ***");
                        target.set_tracing(false);
                        self.count_refusal(false);
                    }
                    Err(_) => {
                        target.note("*** SNAPSHOT BUSY: another snapshot operation runs ***");
                        self.count_refusal(true);
                    }
                }
            }
            Action::StackTrace => {
                if self.take() {
                    target.stack_trace();
                }
            }
            Action::Hist => {
                if let Some(hist) = &self.hist {
                    hist.record(body, origin, &HostOf(target));
                }
            }
            Action::Dump { this_cpu } => {
                if self.take() && !target.dump(this_cpu) {
                    self.count_refusal(true);
                }
            }
        }
    }

    /// Runs a `hist` trigger (its filter, then its histogram) for an event whose
    /// values `fields` gives (a dump's decoded record, on the host).
    pub(crate) fn fire_fields<F: Fields + ?Sized>(
        &self,
        fields: &F,
        origin: Origin,
        host: &impl HistHost,
    ) {
        if self.filter.as_ref().is_some_and(|f| !f.eval(fields, origin)) {
            return;
        }
        if let Some(hist) = &self.hist {
            hist.record(fields, origin, host);
        }
    }

    /// Counts a refusal in the event's context; `give_back` returns the count taken
    /// (the refusal passes: a later event may act), as ftrace does not when the
    /// snapshot buffer is missing or a latency tracer holds it.
    fn count_refusal(&self, give_back: bool) {
        self.refused.fetch_add(1, Relaxed);
        if give_back && self.count.load(Relaxed) != UNLIMITED {
            self.count.fetch_add(1, Relaxed);
        }
    }
}

/// What a histogram asks of the instance, from a trigger's target.
struct HostOf<'a, T>(&'a T);

impl<T: Target> HistHost for HostOf<'_, T> {
    fn stack_frames(&self, frames: &mut [u64]) {
        self.0.stack_frames(frames);
    }

    fn now(&self) -> u64 {
        self.0.now()
    }

    /// As the `snapshot` trigger, but quietly: an irqsoff window is kept, and a
    /// snapshot that cannot be taken is not.
    fn snapshot(&self) -> bool {
        !self.0.snapshot_kept() && self.0.snapshot().is_ok()
    }
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(hist) = &self.hist {
            write!(f, "{hist}")?;
            if let Some(filter) = &self.filter {
                write!(f, " if {filter}")?;
            }
            return f.write_str(if hist.paused() { " [paused]" } else { " [active]" });
        }
        f.write_str(self.action.name())?;
        if let Some(event) = self.action.target() {
            write!(f, ":{}:{}", event.system, event.name)?;
        }
        match self.count() {
            None => f.write_str(":unlimited")?,
            Some(n) => write!(f, ":count={n}")?,
        }
        if let Some(filter) = &self.filter {
            write!(f, " if {filter}")?;
        }
        Ok(())
    }
}
