//! Instances: named buffers, each with its own per-CPU rings, enabled events,
//! recording switch, mode, size, optional snapshot and statistics. The API mirrors
//! Linux's `trace_array_*`: get-or-create by name, put (drop the reference), destroy
//! (busy while referenced), set/clear events, tracing on/off, resize, snapshot,
//! printk, readers.

extern crate alloc;

use crate::error::{Error, WriteError};
use crate::event::filter::{Filter, FilterError};
use crate::event::inject::{InjectError, InjectReason};
use crate::event::{DescriptorKind, EventDescriptor};
use crate::field::{Encoder, Sink};
use crate::platform::Platform;
use crate::ring::clock::Clock;
use crate::ring::record::Mode;
use crate::ring::recorder::{Change, Recorder};
use crate::ring::stats::RingStats;
use crate::symtab::SymbolTable;
use crate::sync::{AtomicBool, Ordering::Relaxed};
use crate::tracer::EventHooks;
use crate::tracer::function::{FunctionError, is_function_event};
use crate::tracer::hist::{Hist, HistOp, HistReason};
use crate::tracer::trigger::{
    Action, MAX_TRIGGERS, STACK_TRACE, Trigger, TriggerCommand, TriggerError, TriggerReason,
};
use crate::tracer::{Tracer, is_settable};
use alloc::string::{String, ToString};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use core::sync::atomic::{Ordering::SeqCst, fence};

/// How to create an instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InstanceConfig {
    /// Bytes per CPU ring (rounded up to a power of two).
    pub bytes_per_cpu: usize,
    /// What a full ring does.
    pub mode: Mode,
    /// Allocate the snapshot buffer now (it can also be allocated later).
    pub snapshot: bool,
}

impl Default for InstanceConfig {
    fn default() -> Self {
        InstanceConfig { bytes_per_cpu: 64 * 1024, mode: Mode::Overwrite, snapshot: false }
    }
}

/// Why an instance operation failed. Nothing changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstanceError {
    /// Names are 1 to 32 characters of `A-Z a-z 0-9 _ - .`, not `.`, `..` or `top`
    /// (the top level's name in reports).
    InvalidName,
    /// No instance has that name.
    NotFound,
    /// Another [`Instance`] of it is held (a driver's, or a shell reader's such as
    /// an open `trace_pipe`; a recorder kept from [`Instance::recorder`] does not
    /// count: it keeps its buffers), or the name asked for a new one is taken.
    Busy,
    /// Every instance slot is taken.
    TooManyInstances,
    /// The instances' buffers would exceed the tracer's memory limit.
    MemoryLimit,
    /// The top-level instance cannot be destroyed.
    TopLevel,
    /// No event matches the system/event pattern.
    NoSuchEvent,
    /// An event's tracepoints are not armed (static keys), and arming them needs a
    /// context that may wait: keep it armed first (`Tracer::keep_armed`).
    NotArmed,
    /// The function tracers' events are recorded by the instance's function tracer
    /// ([`Instance::set_function_tracer`]), not enabled (they may be filtered and
    /// triggered).
    FunctionEvent,
    /// The tracer writes this event itself: the markers' (always recorded; they may
    /// be filtered and triggered) or the `stacktrace` trigger's; it is not enabled.
    WrittenByTracer,
    /// The snapshot cannot be taken, cleared or freed: the instance's `irqsoff`
    /// tracer keeps its window there.
    SnapshotInUse,
    /// Discard mode is refused: the instance's `irqsoff` tracer keeps the latest
    /// records (as ftrace, it needs overwrite mode).
    OverwriteInUse,
    /// A buffer operation failed.
    Buffer(Error),
}

impl From<Error> for InstanceError {
    fn from(e: Error) -> Self {
        InstanceError::Buffer(e)
    }
}

impl core::error::Error for InstanceError {}

impl fmt::Display for InstanceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InstanceError::InvalidName => f.write_str("invalid instance name"),
            InstanceError::NotFound => f.write_str("no such instance"),
            InstanceError::Busy => f.write_str("instance busy"),
            InstanceError::TooManyInstances => f.write_str("too many instances"),
            InstanceError::MemoryLimit => f.write_str("tracing memory limit reached"),
            InstanceError::TopLevel => f.write_str("the top-level instance cannot be removed"),
            InstanceError::NoSuchEvent => f.write_str("no such event"),
            InstanceError::NotArmed => {
                f.write_str("event not armed: enabling it here needs a context that may wait")
            }
            InstanceError::FunctionEvent => {
                f.write_str("a function tracer's event: current_tracer records it")
            }
            InstanceError::WrittenByTracer => {
                f.write_str("written by the tracer itself (the markers, the stacktrace trigger)")
            }
            InstanceError::SnapshotInUse => {
                f.write_str("the irqsoff tracer keeps its window in the snapshot")
            }
            InstanceError::OverwriteInUse => {
                f.write_str("the irqsoff tracer needs overwrite mode (the latest records)")
            }
            InstanceError::Buffer(e) => e.fmt(f),
        }
    }
}

/// Why a filter or trigger was not set. Nothing changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HookError {
    /// The instance refused: `NoSuchEvent` (not one of the tracer's tracepoints),
    /// `Buffer(WouldDeadlock)` (a context that may not wait), a snapshot buffer that
    /// could not be allocated.
    Instance(InstanceError),
    /// The filter is refused: where, and why.
    Filter(FilterError),
    /// The trigger line is refused: where, and why.
    Trigger(TriggerError),
    /// The function tracers refused (a function command).
    Function(FunctionError),
}

impl From<FunctionError> for HookError {
    fn from(e: FunctionError) -> Self {
        HookError::Function(e)
    }
}

impl From<InstanceError> for HookError {
    fn from(e: InstanceError) -> Self {
        HookError::Instance(e)
    }
}

impl From<Error> for HookError {
    fn from(e: Error) -> Self {
        HookError::Instance(InstanceError::Buffer(e))
    }
}

impl core::error::Error for HookError {}

impl fmt::Display for HookError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HookError::Instance(e) => e.fmt(f),
            HookError::Filter(e) => e.fmt(f),
            HookError::Trigger(e) => e.fmt(f),
            HookError::Function(e) => e.fmt(f),
        }
    }
}

/// The state of one instance, shared by the tracer and the references to it.
pub(crate) struct InstanceState<P> {
    pub(crate) name: String,
    pub(crate) slot: usize,
    /// The current recorder. Replaced whole by resize and snapshot (de)allocation.
    pub(crate) recorder: spin::Mutex<Arc<Recorder<P>>>,
    /// Whether `printk!` records into the instance (`options/trace_printk`).
    pub(crate) printk: AtomicBool,
    /// Held by `set_trigger` throughout: what it checks of the other triggers (the
    /// histogram a reference binds to, the readers of one removed, a named
    /// histogram's table) holds until its edit is in place.
    pub(crate) triggers: spin::Mutex<()>,
}

/// A refused [`Tracer::destroy`](crate::Tracer::destroy): why, and the instance,
/// which stays the caller's (nothing changed). `?` turns it into its
/// [`InstanceError`], dropping the reference.
pub struct DestroyError<'t, P: Platform> {
    /// Why the instance was not removed.
    pub error: InstanceError,
    /// The reference the call was given.
    pub instance: Instance<'t, P>,
}

impl<P: Platform> From<DestroyError<'_, P>> for InstanceError {
    fn from(refused: DestroyError<'_, P>) -> Self {
        refused.error
    }
}

impl<P: Platform> fmt::Debug for DestroyError<'_, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DestroyError")
            .field("error", &self.error)
            .field("instance", &self.instance.name())
            .finish()
    }
}

impl<P: Platform> fmt::Display for DestroyError<'_, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot remove instance {}: {}", self.instance.name(), self.error)
    }
}

/// A reference to an instance (`struct trace_array *` with a reference held).
/// Dropping it is `trace_array_put`. While any reference other than the tracer's own
/// exists, the instance cannot be destroyed.
pub struct Instance<'t, P: Platform> {
    pub(crate) tracer: &'t Tracer<P>,
    pub(crate) state: Arc<InstanceState<P>>,
}

impl<P: Platform> Clone for Instance<'_, P> {
    fn clone(&self) -> Self {
        Instance { tracer: self.tracer, state: Arc::clone(&self.state) }
    }
}

impl<'t, P: Platform> Instance<'t, P> {
    /// The instance's name (empty for the top-level instance).
    pub fn name(&self) -> &str {
        &self.state.name
    }

    /// Whether this is the top-level instance.
    pub fn is_top_level(&self) -> bool {
        self.state.slot == crate::tracer::TOP_SLOT
    }

    /// The tracer the instance belongs to.
    pub fn tracer(&self) -> &'t Tracer<P> {
        self.tracer
    }

    /// The current recorder: the live buffer set for readers, and the snapshot. A
    /// reader holding it keeps its buffers alive across a resize (but a resize, a
    /// clock change or a snapshot allocated or freed installs a new one: ask again
    /// after those). From any context but an NMI: it takes no lock, but dropping the
    /// last reference frees the buffers.
    pub fn recorder(&self) -> Arc<Recorder<P>> {
        self.tracer.published(&self.state)
    }

    /// Enables (`enable`) or disables the events whose system and name match
    /// (`None`: any; globs allowed). Returns how many events matched. From any
    /// context; with static keys, enabling where the platform may not wait is refused
    /// (`NotArmed`, nothing changed) for an event that is not armed (see
    /// [`Tracer::keep_armed`]).
    pub fn set_event(
        &self,
        system: Option<&str>,
        event: Option<&str>,
        enable: bool,
    ) -> Result<usize, InstanceError> {
        let named = || {
            let events = self.tracer.events().iter().copied();
            events.filter(|d| d.kind == DescriptorKind::Event && d.matches(system, event))
        };
        let matching = || named().filter(|d| is_settable(d));
        if matching().next().is_none() {
            return Err(match named().next() {
                Some(d) if is_function_event(d) => InstanceError::FunctionEvent,
                Some(_) => InstanceError::WrittenByTracer,
                None => InstanceError::NoSuchEvent,
            });
        }
        if enable && !matching().all(|d| self.tracer.may_enable(d)) {
            return Err(InstanceError::NotArmed);
        }
        let matched = matching().map(|d| d.set_enabled(self.state.slot, enable)).count();
        let platform = &self.tracer.platform;
        if self.tracer.may_wait().is_ok() {
            self.tracer.settle();
            self.tracer.sync_keys_now();
        } else if enable && platform.has_keys() {
            // Pairs with the fence in `Tracer::sync_keys`: an event disarmed since
            // the check above (its last instance turned it off) is turned off here
            // too, or seen enabled there and kept armed.
            fence(SeqCst);
            let lost: usize = matching()
                .filter(|d| !d.is_armed())
                .map(|d| d.set_enabled(self.state.slot, false))
                .count();
            if lost > 0 {
                return Err(InstanceError::NotArmed);
            }
        }
        Ok(matched)
    }

    /// Whether this instance records `descriptor` (an event that fires only for its
    /// triggers is not recorded).
    pub fn event_enabled(&self, descriptor: &EventDescriptor) -> bool {
        descriptor.recording_in(self.state.slot)
    }

    /// Records `event` in this instance as if its tracepoint fired here now, its
    /// fields given by `line` (`FIELD=VALUE ...`, see [`crate::event::inject`]), as
    /// ftrace's `inject` file: the instance's filter and triggers for the event
    /// apply. Refused, with nothing recorded, if the line does not parse, the event
    /// is not one `set_event` takes, or it is not recorded here (`NotEnabled`).
    pub fn inject(&self, event: &EventDescriptor, line: &str) -> Result<(), InjectError> {
        let refuse = |reason| InjectError { pos: 0, reason };
        if self.event_index(event).is_err() || !is_settable(event) {
            return Err(refuse(InjectReason::NotInjectable));
        }
        if !self.event_enabled(event) {
            return Err(refuse(InjectReason::NotEnabled));
        }
        let mut buf = [0u8; crate::event::MAX_EVENT_PAYLOAD];
        let len = crate::event::inject::encode(event.fields, line, &mut buf)?;
        self.tracer.write_to(self.state.slot, event, &buf[..len]);
        Ok(())
    }

    /// Whether `descriptor` is in ftrace's soft mode here: it has triggers in this
    /// instance, or a trigger of this instance enables or disables it (its `enable`
    /// file then reads `0*` or `1*`, as in Linux). Thread context (it takes the
    /// registry's lock); `WouldDeadlock` elsewhere.
    pub fn event_soft_mode(&self, descriptor: &EventDescriptor) -> Result<bool, crate::Error> {
        self.tracer.may_wait()?;
        let index = self.event_index(descriptor);
        Ok(index.is_ok_and(|index| self.tracer.soft_mode(self.state.slot, index)))
    }

    /// The index of `event` among the tracer's events, if it is a tracepoint of it
    /// that takes filters and triggers ([`takes_hooks`]).
    fn event_index(&self, event: &EventDescriptor) -> Result<usize, HookError> {
        self.tracer
            .index_of(event)
            .filter(|_| event.kind == DescriptorKind::Event)
            .ok_or(HookError::Instance(InstanceError::NoSuchEvent))
            .and_then(|index| match takes_hooks(event) {
                true => Ok(index),
                false => Err(HookError::Instance(InstanceError::WrittenByTracer)),
            })
    }

    /// Sets the filter of `event` in this instance (`events/SYSTEM/EVENT/filter`):
    /// only events it passes are recorded. `"0"` clears it. Compiled here; a refused
    /// filter (`HookError::Filter`, with the position and reason) changes
    /// nothing. Safe while writers run: the new filter is published and the old one
    /// freed after a grace period, so this needs a context that may wait.
    pub fn set_filter(&self, event: &EventDescriptor, text: &str) -> Result<(), HookError> {
        // Before the filter is compiled (it allocates).
        self.tracer.may_wait()?;
        let index = self.event_index(event)?;
        let filter = match text.trim() {
            "0" => None,
            _ => {
                let symbols = self.tracer.platform.symbols();
                let filter = Filter::compile_with(event.fields, text, symbols);
                Some(Arc::new(filter.map_err(HookError::Filter)?))
            }
        };
        self.tracer.edit_hooks(self.state.slot, |table| {
            set_entry_filter(&mut table[index], filter);
            Ok(())
        })
    }

    /// Sets the filter of every event of `system` whose fields it fits
    /// (`events/SYSTEM/filter`); the others keep theirs. `"0"` clears every event's
    /// filter in the system. Returns how many events got the filter. A syntax error,
    /// or a filter no event fits, changes nothing. The events that take no filter
    /// (`ftrace:kernel_stack`) are left out. Needs a context that may wait, as
    /// [`Instance::set_filter`].
    pub fn set_system_filter(&self, system: &str, text: &str) -> Result<usize, HookError> {
        // Before the filter is compiled (it allocates).
        self.tracer.may_wait()?;
        let events = || {
            let events = self.tracer.events().iter().copied();
            events.filter(move |d| d.kind == DescriptorKind::Event && d.system == system)
        };
        let hookable = || events().filter(|d| takes_hooks(d));
        if events().next().is_none() {
            return Err(InstanceError::NoSuchEvent.into());
        }
        let filters: Vec<(usize, Option<Arc<Filter>>)> = if text.trim() == "0" {
            hookable().filter_map(|d| Some((self.tracer.index_of(d)?, None))).collect()
        } else {
            Filter::compile_for_system(hookable(), text, self.tracer.platform.symbols())
                .map_err(HookError::Filter)?
                .into_iter()
                .filter_map(|(d, f)| Some((self.tracer.index_of(d)?, Some(Arc::new(f)))))
                .collect()
        };
        self.tracer.edit_hooks(self.state.slot, |table| {
            for (index, filter) in filters.iter().cloned() {
                set_entry_filter(&mut table[index], filter);
            }
            Ok(filters.len())
        })
    }

    /// The filter of `event` in this instance, as set (`None`: no filter; ftrace's
    /// file reads `none`).
    pub fn filter(&self, event: &EventDescriptor) -> Option<String> {
        let hooks = self.tracer.hooks_of(self.state.slot, self.event_index(event).ok()?)?;
        Some(hooks.filter.as_ref()?.text().to_string())
    }

    /// Adds a trigger to `event` in this instance, or removes one with a leading `!`
    /// (a line written to `events/SYSTEM/EVENT/trigger`; see [`crate::tracer::Trigger`]). A
    /// trigger on an event this instance does not record makes the event fire for
    /// its triggers without being recorded. A `snapshot` trigger, or a histogram
    /// whose action is `snapshot()`, allocates the snapshot buffer. Refused lines
    /// (`HookError::Trigger`, with the position and reason) change nothing. Calls
    /// are serialised per instance. Needs a context that may wait.
    pub fn set_trigger(&self, event: &EventDescriptor, line: &str) -> Result<(), HookError> {
        self.write_trigger(event, line, false)
    }

    /// [`Instance::set_trigger`] for a line written with `>`, which opens ftrace's
    /// file truncated: the event's `hist`, `enable_hist` and `disable_hist` triggers
    /// go (none of them if another histogram reads a variable of one of its
    /// histograms) and the line applies, in one change. A blank line only removes;
    /// a refused line removes nothing.
    pub fn set_trigger_truncating(
        &self,
        event: &EventDescriptor,
        line: &str,
    ) -> Result<(), HookError> {
        self.write_trigger(event, line, true)
    }

    /// [`Instance::set_trigger`], and with `truncate` [`Instance::set_trigger_truncating`].
    fn write_trigger(
        &self,
        event: &EventDescriptor,
        line: &str,
        truncate: bool,
    ) -> Result<(), HookError> {
        // Before the lock a `set_trigger` this call interrupted may hold.
        self.tracer.may_wait()?;
        let _edit = self.state.triggers.lock();
        let index = self.event_index(event)?;
        let existing = self.tracer.hooks_of(self.state.slot, index);
        let all = existing.as_ref().map_or(&[][..], |h| &h.triggers);
        let doomed = if truncate { self.truncated(all) } else { Vec::new() };
        let kept = |t: &&Arc<Trigger>| !listed(t, &doomed);
        if truncate && line.trim().is_empty() {
            if doomed.is_empty() {
                return Ok(());
            }
            return self.tracer.edit_hooks(self.state.slot, |table| {
                let mut hooks = table[index].as_deref().cloned().unwrap_or_default();
                hooks.triggers.retain(|t| !listed(t, &doomed));
                table[index] = Some(Arc::new(hooks)).filter(|h| !h.is_empty());
                Ok(())
            });
        }
        let tracer = self.tracer;
        let lookup = |system: &str, name: &str| {
            tracer.events().iter().copied().find(|d| d.system == system && d.name == name)
        };
        let trigger_error = |reason| HookError::Trigger(TriggerError { pos: 0, reason });
        let symbols = tracer.platform.symbols();
        let command =
            Trigger::parse(line, event.fields, lookup, symbols).map_err(HookError::Trigger)?;
        if matches!(command.trigger().action(), Action::Dump { .. }) {
            // A function command only, as in ftrace.
            return Err(HookError::Trigger(TriggerError::unknown_command(line)));
        }
        let hist_op = match command {
            TriggerCommand::Hist(_, op) => Some(op),
            _ => None,
        };
        match command {
            TriggerCommand::Add(trigger) | TriggerCommand::Hist(trigger, _) => {
                let triggers: Vec<&Arc<Trigger>> = all.iter().filter(kept).collect();
                if let Some(same) = triggers.iter().find(|t| t.same_as(&trigger)) {
                    return match (same.hist(), hist_op) {
                        (Some(hist), Some(op)) => self.apply_hist_op(hist, op),
                        _ => Err(trigger_error(TriggerReason::Exists)),
                    };
                }
                // As ftrace: `cont` and `clear` act on a histogram the event has (`pause`
                // makes one, paused).
                if matches!(hist_op, Some(HistOp::Continue | HistOp::Clear)) {
                    return Err(trigger_error(TriggerReason::NotFound));
                }
                if triggers.len() == MAX_TRIGGERS {
                    return Err(trigger_error(TriggerReason::TooMany));
                }
                let mut trigger = trigger;
                // A named histogram shares the table of the one of its name, if any.
                let name = trigger.hist().and_then(Hist::name);
                let named = name.and_then(|name| self.named_hist(name, &doomed));
                if let Some(hist) = named.as_deref().and_then(Trigger::hist) {
                    trigger.share_hist(hist).map_err(trigger_error)?;
                }
                self.refuse_defined_vars(&trigger, line, &doomed)?;
                self.bind_vars(&mut trigger, &doomed)?;
                trigger.allocate().map_err(trigger_error)?;
                if trigger.action() == Action::Snapshot
                    || trigger.hist().is_some_and(Hist::takes_snapshots)
                {
                    self.snapshot_alloc()?;
                }
                let trigger = Arc::new(trigger);
                self.tracer.edit_hooks(self.state.slot, |table| {
                    let mut hooks = table[index].as_deref().cloned().unwrap_or_default();
                    hooks.triggers.retain(|t| !listed(t, &doomed));
                    if hooks.triggers.iter().any(|t| t.same_as(&trigger)) {
                        return Err(trigger_error(TriggerReason::Exists));
                    }
                    if hooks.triggers.len() == MAX_TRIGGERS {
                        return Err(trigger_error(TriggerReason::TooMany));
                    }
                    // `:pause` on one that joins a name pauses the name's table, which
                    // it shares with the others.
                    if hist_op == Some(HistOp::Pause) {
                        trigger.hist().inspect(|hist| hist.set_paused(true));
                    }
                    // As ftrace's list: a histogram after the others, any other
                    // trigger first (it runs, and is listed, before those there).
                    match trigger.hist() {
                        Some(_) => hooks.triggers.push(trigger),
                        None => hooks.triggers.insert(0, trigger),
                    }
                    table[index] = Some(Arc::new(hooks));
                    Ok(())
                })
            }
            TriggerCommand::Remove(trigger) => {
                // A histogram whose variables another reads stays, as in ftrace.
                let same = all.iter().find(|t| t.same_as(&trigger));
                if let Some(hist) = same.filter(kept).and_then(|t| t.hist()) {
                    let hists = self.hists(&doomed);
                    if hists.iter().filter_map(|t| t.hist()).any(|h| h.reads_vars_of(hist)) {
                        return Err(trigger_error(TriggerReason::Hist(HistReason::VariableInUse)));
                    }
                }
                self.remove_trigger(index, &trigger, &doomed)
            }
        }
    }

    /// Removes the trigger of the event at `index` that is the same as `trigger`, if
    /// it has one (as ftrace's, removing one it does not have succeeds), and those of
    /// `doomed` (a truncating write's), in one change.
    fn remove_trigger(
        &self,
        index: usize,
        trigger: &Trigger,
        doomed: &[Arc<Trigger>],
    ) -> Result<(), HookError> {
        self.tracer.edit_hooks(self.state.slot, |table| {
            let mut hooks = table[index].as_deref().cloned().unwrap_or_default();
            hooks.triggers.retain(|t| !t.same_as(trigger) && !listed(t, doomed));
            table[index] = Some(Arc::new(hooks)).filter(|h| !h.is_empty());
            Ok(())
        })
    }

    /// Which of `triggers` (one event's) a truncating write removes: the histograms
    /// and the `enable_hist` and `disable_hist` triggers, or none of them if another
    /// histogram of the instance reads a variable of one of those histograms.
    fn truncated(&self, triggers: &[Arc<Trigger>]) -> Vec<Arc<Trigger>> {
        let hist_family = |t: &&Arc<Trigger>| {
            t.hist().is_some()
                || matches!(t.action(), Action::EnableHist(_) | Action::DisableHist(_))
        };
        let doomed: Vec<Arc<Trigger>> = triggers.iter().filter(hist_family).cloned().collect();
        let hists = self.hists(&[]);
        let read = doomed.iter().filter_map(|d| Some((d, d.hist()?))).any(|(d, hist)| {
            hists
                .iter()
                .any(|t| !Arc::ptr_eq(t, d) && t.hist().is_some_and(|h| h.reads_vars_of(hist)))
        });
        if read { Vec::new() } else { doomed }
    }

    /// The `hist` triggers of this instance, on every event, but those of `except`.
    fn hists(&self, except: &[Arc<Trigger>]) -> Vec<Arc<Trigger>> {
        let slot = self.state.slot;
        let hooks = (0..self.tracer.events().len()).filter_map(|i| self.tracer.hooks_of(slot, i));
        let triggers = hooks.flat_map(|hooks| hooks.triggers.clone());
        triggers.filter(|t| t.hist().is_some() && !listed(t, except)).collect()
    }

    /// The `hist` trigger of this instance whose histogram is named `name`, on any
    /// event (the first found: all of one name share one table), but those of `except`.
    fn named_hist(&self, name: &str, except: &[Arc<Trigger>]) -> Option<Arc<Trigger>> {
        self.hists(except).into_iter().find(|t| t.hist().and_then(Hist::name) == Some(name))
    }

    /// Refuses `trigger` (written as `line`) if its histogram defines a variable that
    /// another histogram of the instance (those of `except` left out) defines, but
    /// one of its name: a reference must find one definer.
    fn refuse_defined_vars(
        &self,
        trigger: &Trigger,
        line: &str,
        except: &[Arc<Trigger>],
    ) -> Result<(), HookError> {
        let Some(hist) = trigger.hist() else { return Ok(()) };
        let others = self.hists(except);
        let others: Vec<&Hist> = others.iter().filter_map(|t| t.hist()).collect();
        for name in hist.var_names() {
            if others.iter().any(|h| h.defines(name) && !h.shares_table(hist)) {
                let pos = line.find(&alloc::format!(":{name}=")).map_or(0, |at| at + 1);
                let reason = TriggerReason::Hist(HistReason::VariableDefined);
                return Err(HookError::Trigger(TriggerError { pos, reason }));
            }
        }
        Ok(())
    }

    /// Binds each reference of `trigger`'s histogram (not set yet) to another
    /// histogram's variable to the one histogram of the instance that defines it
    /// (those of `except` left out): refused, at the reference, if none or several
    /// do, or if its keys differ.
    fn bind_vars(&self, trigger: &mut Trigger, except: &[Arc<Trigger>]) -> Result<(), HookError> {
        let unbound = trigger.hist().map(Hist::unbound_vars).unwrap_or_default();
        if unbound.is_empty() {
            return Ok(());
        }
        let hists = self.hists(except);
        let error = |(pos, reason)| {
            let reason = TriggerReason::Hist(reason);
            HookError::Trigger(TriggerError { pos, reason })
        };
        for (name, pos) in unbound {
            let all = hists.iter().filter_map(|t| t.hist()).enumerate();
            let (_, definer) = Hist::definer(all, &name).map_err(|reason| error((pos, reason)))?;
            trigger.bind_var(&name, pos, definer).map_err(error)?;
        }
        Ok(())
    }

    /// Pauses, continues or clears a histogram of this instance. Clearing pauses it
    /// and waits for a grace period, so that no writer is adding to it, then empties
    /// it and restores its state.
    fn apply_hist_op(&self, hist: &Hist, op: HistOp) -> Result<(), HookError> {
        match op {
            HistOp::Pause => hist.set_paused(true),
            HistOp::Continue => hist.set_paused(false),
            HistOp::Clear => {
                let paused = hist.paused();
                hist.set_paused(true);
                let waited = self.tracer.sections.synchronize(&self.tracer.platform);
                if waited.is_ok() {
                    hist.reset();
                }
                hist.set_paused(paused);
                waited?;
            }
        }
        Ok(())
    }

    /// Writes the histograms of `event` in this instance as ftrace's `hist` file
    /// shows them (nothing without `hist` triggers); `symbols` names `.sym` keys.
    pub fn write_hists(
        &self,
        event: &EventDescriptor,
        symbols: Option<&SymbolTable<'_>>,
        out: &mut dyn fmt::Write,
    ) -> fmt::Result {
        let Ok(index) = self.event_index(event) else { return Ok(()) };
        let Some(hooks) = self.tracer.hooks_of(self.state.slot, index) else { return Ok(()) };
        let hists = hooks.triggers.iter().filter_map(|t| Some((t, t.hist()?)));
        for (n, (trigger, hist)) in hists.enumerate() {
            if n > 0 {
                out.write_str("\n\n")?;
            }
            hist.write(trigger, symbols, out)?;
        }
        Ok(())
    }

    /// Removes every trigger of `event` in this instance.
    pub fn clear_triggers(&self, event: &EventDescriptor) -> Result<(), HookError> {
        let index = self.event_index(event)?;
        self.tracer.edit_hooks(self.state.slot, |table| {
            if let Some(hooks) = table[index].as_deref() {
                let hooks = EventHooks { filter: hooks.filter.clone(), ..EventHooks::default() };
                table[index] = Some(Arc::new(hooks)).filter(|h| !h.is_empty());
            }
            Ok(())
        })
    }

    /// The triggers of `event` in this instance, as ftrace's `trigger` file lists
    /// them (with the counts left).
    pub fn triggers(&self, event: &EventDescriptor) -> Vec<String> {
        let Ok(index) = self.event_index(event) else { return Vec::new() };
        let hooks = self.tracer.hooks_of(self.state.slot, index);
        hooks.map_or(Vec::new(), |h| h.triggers.iter().map(|t| t.to_string()).collect())
    }

    /// Turns recording on or off (`tracing_on`). Events are not recorded nor counted
    /// while off. From a context that may wait, no writer records into the instance
    /// once it returned off.
    /// From any context, NMIs included: it takes no lock (but the instance's, where
    /// the platform reports a CPU beyond the tracer's).
    pub fn set_tracing(&self, on: bool) {
        self.tracer.with_published(&self.state, |recorder| recorder.live().set_recording(on));
        self.tracer.settle();
    }

    /// Whether recording is on. From any context.
    pub fn tracing(&self) -> bool {
        self.tracer.with_published(&self.state, |recorder| recorder.live().is_recording())
    }

    /// Switches between overwrite (flight recorder) and discard (producer/consumer).
    /// `OverwriteInUse` for discard while the instance's tracer is `irqsoff`.
    pub fn set_mode(&self, mode: Mode) -> Result<(), InstanceError> {
        self.tracer.may_wait()?;
        // Under the function tracers' lock, which a change of tracer holds.
        let functions = self.tracer.functions.get();
        let _tracers = functions.map(|f| f.control.lock());
        if mode == Mode::Discard && self.tracer.irqsoff_owner() == Some(self.state.slot) {
            return Err(InstanceError::OverwriteInUse);
        }
        self.apply_mode(mode);
        Ok(())
    }

    /// Sets the mode, unchecked.
    pub(super) fn apply_mode(&self, mode: Mode) {
        self.state.recorder.lock().live().set_mode(mode);
        self.tracer.settle();
    }

    /// The current mode. From any context.
    pub fn mode(&self) -> Mode {
        self.tracer.with_published(&self.state, |recorder| recorder.live().mode())
    }

    /// Bytes per CPU ring. From any context.
    pub fn bytes_per_cpu(&self) -> usize {
        self.tracer.with_published(&self.state, |recorder| recorder.live().bytes_per_cpu())
    }

    /// Whether a snapshot buffer is allocated. From any context.
    pub fn has_snapshot(&self) -> bool {
        self.tracer.with_published(&self.state, |recorder| recorder.snapshot().is_some())
    }

    /// Resizes every CPU ring (and the snapshot buffer, if any) to `bytes_per_cpu`.
    /// The recorded events are discarded; recording state and mode are kept. A size
    /// every ring has already changes nothing, as in ftrace.
    pub fn resize(&self, bytes_per_cpu: usize) -> Result<(), InstanceError> {
        self.tracer.may_wait()?;
        if self.sized_already(0..self.tracer.cpus, bytes_per_cpu) {
            return Ok(());
        }
        self.tracer.replace_recorder(&self.state, Change::Resize(bytes_per_cpu)).map(drop)
    }

    /// Resizes CPU `cpu`'s ring (and its snapshot ring, if any) to `bytes`, keeping
    /// the other CPUs' rings and what they hold (`per_cpu/cpuN/buffer_size_kb`). The
    /// size the ring has already changes nothing.
    pub fn resize_cpu(&self, cpu: usize, bytes: usize) -> Result<(), InstanceError> {
        self.tracer.may_wait()?;
        if self.sized_already(cpu..cpu.saturating_add(1), bytes) {
            return Ok(());
        }
        self.tracer.replace_recorder(&self.state, Change::ResizeCpu { cpu, bytes }).map(drop)
    }

    /// Whether the rings of `cpus` have the size `bytes` asks for (false for a size
    /// or a CPU refused: the resize says why).
    fn sized_already(&self, mut cpus: core::ops::Range<usize>, bytes: usize) -> bool {
        let Ok(words) = crate::ring::per_cpu::words_for(bytes) else { return false };
        let recorder = self.state.recorder.lock();
        let live = recorder.live();
        !cpus.is_empty() && cpus.all(|cpu| live.bytes_of(cpu) == Some(words as usize * 8))
    }

    /// Takes timestamps from `clock` from now on (`trace_clock`): as in ftrace, the
    /// buffers (live and snapshot) are emptied, so that no buffer mixes two clocks;
    /// each CPU's size, the recording switch and the mode are kept. Setting the clock
    /// the instance has changes nothing. Needs a context that may wait.
    pub fn set_clock(&self, clock: Clock) -> Result<(), InstanceError> {
        self.tracer.may_wait()?;
        if self.clock() == clock {
            return Ok(());
        }
        self.tracer.replace_recorder(&self.state, Change::Clock(clock)).map(drop)
    }

    /// Where the instance's timestamps come from. From any context.
    pub fn clock(&self) -> Clock {
        self.tracer.with_published(&self.state, |recorder| recorder.live().clock())
    }

    /// A reading of the instance's clock that records nothing (ftrace's `now ts`).
    /// From any context.
    pub fn clock_now(&self) -> u64 {
        self.clock().now(&self.tracer.platform)
    }

    /// Records events of the CPUs in `mask` only (bit `c` for CPU `c`;
    /// `tracing_cpumask`): the others' events are neither recorded nor counted, as
    /// with recording off. CPUs from 64 on always record. A bit for a CPU the tracer
    /// does not have is refused (`Buffer(BadCpu)`). Needs a context that may wait (it
    /// takes the registry's lock): `Buffer(WouldDeadlock)` elsewhere.
    pub fn set_cpumask(&self, mask: u64) -> Result<(), InstanceError> {
        self.tracer.may_wait()?;
        if mask & !self.all_cpus() != 0 {
            return Err(Error::BadCpu.into());
        }
        self.tracer.set_cpumask(self.state.slot, mask);
        Ok(())
    }

    /// The CPUs whose events the instance records (bits of the tracer's CPUs only,
    /// so that it can be written back).
    pub fn cpumask(&self) -> u64 {
        self.tracer.cpumask(self.state.slot) & self.all_cpus()
    }

    /// The mask of every CPU the tracer has (all 64 bits from 64 CPUs on).
    fn all_cpus(&self) -> u64 {
        let cpus = self.tracer.cpus();
        if cpus < 64 { (1 << cpus) - 1 } else { u64::MAX }
    }

    /// Bytes of CPU `cpu`'s ring.
    pub fn bytes_of_cpu(&self, cpu: usize) -> Option<usize> {
        self.tracer.with_published(&self.state, |recorder| recorder.live().bytes_of(cpu))
    }

    /// Allocates the snapshot buffer if there is none.
    pub fn snapshot_alloc(&self) -> Result<(), InstanceError> {
        self.snapshot_added().map(drop)
    }

    /// [`Instance::snapshot_alloc`], saying whether it allocated the snapshot (false:
    /// the instance had one).
    pub(crate) fn snapshot_added(&self) -> Result<bool, InstanceError> {
        self.tracer.replace_recorder(&self.state, Change::AddSpare)
    }

    /// `SnapshotInUse` while the instance's tracer is `irqsoff`, whose window the
    /// snapshot holds: as in ftrace, it cannot be taken, cleared or freed then.
    fn check_snapshot_free(&self) -> Result<(), InstanceError> {
        match self.tracer.irqsoff_owner() == Some(self.state.slot) {
            true => Err(InstanceError::SnapshotInUse),
            false => Ok(()),
        }
    }

    /// Takes a snapshot: allocates the snapshot buffer if needed, then swaps it with
    /// the live buffer, so the snapshot holds what was recorded until now while
    /// recording goes on in the (previous snapshot's) buffer. From a context that
    /// may not wait (an interrupt handler, an NMI) it swaps as a `snapshot` trigger
    /// does, without waiting: the snapshot buffer must be allocated already
    /// (`Buffer(NoSpare)` otherwise), and `Buffer(Busy)` while a control operation
    /// changes the buffers; nothing changed then.
    pub fn snapshot_take(&self) -> Result<(), InstanceError> {
        self.check_snapshot_free()?;
        if self.tracer.may_wait().is_err() {
            return Ok(self.tracer.with_published(&self.state, Recorder::swap_nowait)?);
        }
        self.snapshot_alloc()?;
        Ok(self.state.recorder.lock().swap()?)
    }

    /// Empties the snapshot buffer (keeps it allocated).
    pub fn snapshot_clear(&self) -> Result<(), InstanceError> {
        self.tracer.may_wait()?;
        self.check_snapshot_free()?;
        Ok(self.state.recorder.lock().clear_snapshot(None)?)
    }

    /// Empties CPU `cpu`'s ring of the snapshot buffer (`per_cpu/cpuN/snapshot`).
    /// `Buffer(NoSpare)` without a snapshot buffer, `Buffer(BadCpu)` for a CPU
    /// beyond the tracer's.
    pub fn snapshot_clear_cpu(&self, cpu: usize) -> Result<(), InstanceError> {
        self.tracer.may_wait()?;
        self.check_snapshot_free()?;
        Ok(self.state.recorder.lock().clear_snapshot(Some(cpu))?)
    }

    /// Frees the snapshot buffer and what it holds.
    pub fn snapshot_free(&self) -> Result<(), InstanceError> {
        self.tracer.may_wait()?;
        if !self.has_snapshot() {
            return Ok(());
        }
        self.check_snapshot_free()?;
        self.tracer.replace_recorder(&self.state, Change::DropSpare).map(drop)
    }

    /// Empties the live buffer and zeroes its statistics, recording on or off.
    pub fn clear(&self) -> Result<(), InstanceError> {
        self.tracer.may_wait()?;
        self.state.recorder.lock().clear()?;
        self.tracer.reset_bad_cpu(self.state.slot);
        Ok(())
    }

    /// Empties CPU `cpu`'s ring of the live buffer (`echo > per_cpu/cpuN/trace`).
    pub fn clear_cpu(&self, cpu: usize) -> Result<(), InstanceError> {
        self.tracer.may_wait()?;
        Ok(self.state.recorder.lock().clear_cpu(cpu)?)
    }

    /// CPU `cpu`'s statistics: the ring's, plus (on CPU 0) events refused because
    /// the platform reported a CPU beyond the tracer's. From any context but an NMI
    /// (as [`Instance::recorder`]).
    pub fn stats(&self, cpu: usize) -> Result<RingStats, Error> {
        // Counting the entries walks the ring: on a reference of its own, outside the
        // section, so that grace periods do not wait for the walk.
        let recorder = &*self.tracer.published(&self.state);
        let (tracer, slot, name) = (self.tracer, self.state.slot, &self.state.name);
        crate::tracer::InstanceView { tracer, slot, name, recorder }.stats(cpu)
    }

    /// Writes a text marker (`trace_marker`), as the `ftrace:print` event. A text
    /// longer than one event holds is written as several, cut at character
    /// boundaries, as Linux splits a long marker: their texts, in order, give it back.
    /// `Err(NotTaken)` if the buffer took none (or, for a long text, not the next
    /// part): recording is off, this CPU is outside the instance's cpumask, or the
    /// ring is full in discard mode (counted there as dropped). Linux's `EBADF`.
    pub fn write_marker(&self, text: &str) -> Result<(), WriteError> {
        // An event's payload holds the string's 2-byte length and its bytes.
        const MOST: usize = crate::event::MAX_EVENT_PAYLOAD - 2;
        let mut rest = text;
        loop {
            let mut end = rest.len().min(MOST);
            while !rest.is_char_boundary(end) {
                end -= 1;
            }
            let (chunk, tail) = rest.split_at(end);
            let mut buf = [0u8; crate::event::MAX_EVENT_PAYLOAD];
            let mut encoder = Encoder::new(&mut buf);
            encoder.put_str(chunk);
            if !self.tracer.write_to(
                self.state.slot,
                &crate::event::marker::MARKER,
                encoder.bytes(),
            ) {
                return Err(WriteError::NotTaken);
            }
            rest = tail;
            if rest.is_empty() {
                return Ok(());
            }
        }
    }

    /// Writes a raw marker (`trace_marker_raw`), as the `ftrace:raw_data` event: `id`,
    /// and `data` as hex text. `Err(TooLarge)` (nothing written) for more than
    /// [`MAX_RAW_MARKER`](crate::tracer::MAX_RAW_MARKER) bytes of data, `Err(NotTaken)`
    /// as [`Instance::write_marker`].
    pub fn write_marker_raw(&self, id: u32, data: &[u8]) -> Result<(), WriteError> {
        if data.len() > crate::tracer::MAX_RAW_MARKER {
            return Err(WriteError::TooLarge);
        }
        let mut hex = [[0u8; 3]; crate::tracer::MAX_RAW_MARKER];
        for (out, byte) in hex.iter_mut().zip(data) {
            let digit = |n: u8| b"0123456789abcdef"[usize::from(n)];
            *out = [b' ', digit(byte >> 4), digit(byte & 0xf)];
        }
        let hex = core::str::from_utf8(&hex.as_flattened()[..3 * data.len()]).unwrap_or_default();
        let mut buf = [0u8; crate::event::MAX_EVENT_PAYLOAD];
        let mut encoder = Encoder::new(&mut buf);
        crate::field::FieldValue::encode(&id, &mut encoder);
        encoder.put_str(hex);
        match self.tracer.write_to(
            self.state.slot,
            &crate::event::marker::RAW_MARKER,
            encoder.bytes(),
        ) {
            true => Ok(()),
            false => Err(WriteError::NotTaken),
        }
    }

    /// Records a `printk!` call site's arguments (use the macro); nothing while the
    /// instance refuses them ([`Instance::set_printk`]), nor for a site that is not
    /// one of the tracer's `printk!` sites (a descriptor of its own a caller made,
    /// which readers could not name). Returns the payload's bytes recorded: 0 if
    /// nothing was.
    pub fn printk(
        &self,
        site: &'static EventDescriptor,
        encode: impl FnOnce(&mut Encoder<'_>),
    ) -> usize {
        let known = site.kind == DescriptorKind::Printk && self.tracer.index_of(site).is_some();
        if !known || !self.printk_enabled() {
            return 0;
        }
        let mut buf = [0u8; crate::event::MAX_EVENT_PAYLOAD];
        let mut encoder = Encoder::new(&mut buf);
        encode(&mut encoder);
        match self.tracer.write_to(self.state.slot, site, encoder.bytes()) {
            true => encoder.bytes().len(),
            false => 0,
        }
    }

    /// Lets `printk!` record into the instance, or not (ftrace's `trace_printk`
    /// option; on when the instance is created). Callable from any context.
    pub fn set_printk(&self, on: bool) {
        self.state.printk.store(on, Relaxed);
    }

    /// Whether `printk!` records into the instance.
    pub fn printk_enabled(&self) -> bool {
        self.state.printk.load(Relaxed)
    }

    /// Records a stack trace (an `ftrace:kernel_stack` event, as the `stacktrace`
    /// trigger records) after each tracepoint and `printk!` line the instance
    /// records, from the caller outward, or stops (ftrace's `stacktrace` option; off
    /// when the instance is created). Markers and the function tracers' records take
    /// none (`func_stack_trace` is theirs). Costs an event nothing while
    /// off; while on, every tracepoint of the instance takes the path of events with
    /// filters. Needs a context that may wait (it takes the registry's lock):
    /// `Buffer(WouldDeadlock)` elsewhere.
    pub fn set_stack_traces(&self, on: bool) -> Result<(), InstanceError> {
        self.tracer.may_wait()?;
        self.tracer.set_stack_traces(self.state.slot, on);
        Ok(())
    }

    /// Whether the instance records a stack trace after each tracepoint.
    pub fn stack_traces(&self) -> bool {
        self.tracer.stack_traces(self.state.slot)
    }
}

/// `trace_array_printk`: records a formatted message into an instance, with the
/// format string interned in a static descriptor (found by the linker like events)
/// and the arguments stored raw. Formatting happens when the trace is read; the
/// format's placeholders are checked against the arguments when the call compiles.
/// Each argument is evaluated once, and only while the instance takes `printk!`
/// lines. Strings longer than the record holds are cut, so every argument after
/// them is still recorded. Returns the payload's bytes recorded (0: none).
///
/// ```
/// fn report(instance: &trace::Instance<'_, trace::HostPlatform>, tick: u64, late: u32) {
///     trace::printk!(instance, "tick {} late by {:#x} ns", tick, late);
/// }
/// ```
///
/// A placeholder more or less than there are arguments, a malformed one, or one
/// that names a field (they are positional) does not compile:
///
/// ```compile_fail
/// fn report(instance: &trace::Instance<'_, trace::HostPlatform>, tick: u64, late: u32) {
///     trace::printk!(instance, "tick {} late by {} ns", tick);
/// }
/// ```
#[macro_export]
macro_rules! printk {
    ($instance:expr, $format:literal $(, $arg:expr)* $(,)?) => {{
        static SITE: $crate::event::EventDescriptor = $crate::event::EventDescriptor::new(
            "ftrace",
            "bprint",
            $format,
            &[],
            $crate::event::DescriptorKind::Printk,
        );
        const _: () = {
            #[used]
            #[unsafe(link_section = "trace_events")]
            static DESCRIPTOR: &$crate::event::EventDescriptor = &SITE;
        };
        const _: () = assert!(
            matches!(
                $crate::event::format::placeholders($format, false),
                Some(n) if n == 0 $(+ { let _ = stringify!($arg); 1 })*
            ),
            "printk!: the format is malformed, names a field (its placeholders are positional), or its placeholders and the arguments differ in number"
        );
        $instance.printk(&SITE, |encoder| $crate::__printk_args!(encoder [] $($arg),*))
    }};
}

/// `printk!`'s arguments: binds each once, then encodes each leaving room for the
/// fewest bytes the ones after it take.
#[doc(hidden)]
#[macro_export]
macro_rules! __printk_args {
    ($encoder:ident []) => {};
    ($encoder:ident [$($bound:ident)*]) => {{
        let mut _after = 0 $(+ $crate::field::min_tagged_len($bound))*;
        $(
            _after -= $crate::field::min_tagged_len($bound);
            $crate::field::Sink::put_tagged(&mut $encoder.keeping(_after), $bound);
        )*
    }};
    // `match` keeps the argument's temporaries (a `String` it borrows from) alive
    // while the rest is encoded, where `let` would drop them.
    ($encoder:ident [$($bound:ident)*] $head:expr $(, $rest:expr)*) => {
        match &$head {
            arg => $crate::__printk_args!($encoder [$($bound)* arg] $($rest),*),
        }
    };
}

/// Whether `trigger` is one of `among` (the same allocation, not an equal line).
fn listed(trigger: &Arc<Trigger>, among: &[Arc<Trigger>]) -> bool {
    among.iter().any(|t| Arc::ptr_eq(t, trigger))
}

/// Whether `event` takes filters and triggers in an instance: not
/// `ftrace:kernel_stack`, whose records a trigger (or the platform's
/// `Tracer::record_stack`) writes past every hook.
fn takes_hooks(event: &EventDescriptor) -> bool {
    !core::ptr::eq(event, &STACK_TRACE)
}

/// Replaces the filter in a hook table entry, dropping the entry once it is empty.
fn set_entry_filter(entry: &mut Option<Arc<EventHooks>>, filter: Option<Arc<Filter>>) {
    let mut hooks = entry.as_deref().cloned().unwrap_or_default();
    hooks.filter = filter;
    *entry = Some(Arc::new(hooks)).filter(|h| !h.is_empty());
}
