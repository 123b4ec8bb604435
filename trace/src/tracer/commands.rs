//! Function commands, as ftrace's `set_ftrace_filter` takes them
//! (`Documentation/trace/ftrace.rst`, "Filter commands"): `FUNCTION:COMMAND[:COUNT]`,
//! with the commands of event triggers (`traceon`, `traceoff`, `snapshot`,
//! `stacktrace`, `enable_event:SYSTEM:EVENT`, `disable_event:SYSTEM:EVENT`) and
//! `dump` and `cpudump` ([`crate::Platform::dump`]), acting each time the function
//! is called, whatever the instance's `current_tracer`. The
//! platform keeps a function's entry a call while some instance has commands on it.
//!
//! Each function holds its own trigger per command, so each counts down on its own
//! (as each ftrace probe keeps a count per function). An instance's commands are one
//! table, sorted by function, replaced whole on a change and read by writers inside
//! their section through an `RcuCell`, like the instance's event hooks; per
//! function, a mask of the instances with commands on it spares the others the
//! section.

use super::function::{Control, FUNCTION, FunctionError, FunctionList, Functions};
use super::trigger::{Action, MAX_TRIGGERS, Trigger, TriggerCommand, TriggerError, TriggerReason};
use super::{HookError, Instance, Tracer};
use crate::event::EventDescriptor;
use crate::event::dispatch::{Spill, Words};
use crate::platform::Platform;
use crate::sync::Ordering::Relaxed;
use alloc::string::{String, ToString};
use alloc::sync::Arc;
use alloc::vec::Vec;

/// One instance's function commands: each function with some (its index, in
/// ascending order) and its triggers.
pub(crate) type CommandTable = Vec<(usize, Vec<Arc<Trigger>>)>;

/// A function command of one change ([`Instance::edit_functions`]): the functions
/// it names (indices of the platform's functions) and its line.
pub type FunctionCommand<'a> = (&'a [usize], &'a str);

/// Why [`Instance::edit_functions`] refused a change, which changed nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FunctionEditError {
    /// The command refused: its index in the change (`None`: the change as a whole).
    pub command: Option<usize>,
    /// Why.
    pub error: HookError,
}

impl From<FunctionError> for FunctionEditError {
    fn from(error: FunctionError) -> Self {
        FunctionEditError { command: None, error: error.into() }
    }
}

/// Where `index`'s commands are in `table`.
fn find(table: &CommandTable, index: usize) -> Result<usize, usize> {
    table.binary_search_by_key(&index, |&(function, _)| function)
}

impl<P: Platform> Tracer<P> {
    /// Runs the commands on function `index` (at ELF address `ip`, called from
    /// `parent`) of every instance with some. From any context.
    #[cold]
    #[inline(never)]
    pub(super) fn run_function_commands(
        &self,
        functions: &Functions,
        index: usize,
        ip: u64,
        parent: u64,
    ) {
        // The call as a `function` event would hold it: what a trigger is judged on.
        let mut spill = Spill::default();
        let body = Words { len: 16, words: [ip, parent] }.body(&mut spill);
        let commanded = || functions.commanded[index].load(Relaxed);
        self.for_each_target(false, commanded, |target| {
            let Some(table) = functions.commands[target.slot].read(target.section) else { return };
            let Ok(at) = find(table, index) else { return };
            table[at].1.iter().for_each(|trigger| trigger.fire(&body, target.origin, target));
        });
    }

    /// Publishes `table` as `slot`'s commands (`control` is locked): the masks of
    /// the functions that lose every command are cleared before the table changes,
    /// those of the functions that have some set after, and the old table goes
    /// after a grace period.
    fn publish_commands(
        &self,
        functions: &Functions,
        control: &mut Control,
        slot: usize,
        table: Option<Arc<CommandTable>>,
    ) -> Result<(), crate::Error> {
        let grace = self.sections.grace(&self.platform)?;
        let bit = 1 << slot;
        let has = |index: usize| table.as_deref().is_some_and(|t| find(t, index).is_ok());
        for (index, mask) in functions.commanded.iter().enumerate() {
            if !has(index) {
                mask.fetch_and(!bit, Relaxed);
            }
        }
        functions.commands[slot].replace(table.clone(), grace);
        for &(index, _) in table.iter().flat_map(|t| t.iter()) {
            functions.commanded[index].fetch_or(bit, Relaxed);
        }
        control.commands[slot] = table;
        Ok(())
    }

    /// Forgets `slot`'s function commands (its instance is being destroyed).
    pub(super) fn release_function_commands(
        &self,
        functions: &Functions,
        control: &mut Control,
        slot: usize,
    ) {
        if control.commands[slot].is_some() {
            // Destroy has waited for a grace period already: this one can too.
            let _ = self.publish_commands(functions, control, slot, None);
        }
    }

    /// Whether a function command of `slot`'s instance (of any instance: `None`)
    /// enables or disables `event`.
    pub(super) fn commands_target(&self, slot: Option<usize>, event: &EventDescriptor) -> bool {
        let Some(functions) = self.functions.get() else { return false };
        let control = functions.control.lock();
        let tables = control.commands.iter().enumerate();
        let tables = tables.filter(|&(s, _)| slot.is_none_or(|slot| slot == s));
        let triggers = tables.filter_map(|(_, t)| t.as_deref()).flatten().flat_map(|(_, t)| t);
        triggers.map(|t| t.action().target()).any(|d| d.is_some_and(|d| core::ptr::eq(d, event)))
    }
}

impl<P: Platform> Instance<'_, P> {
    /// Adds a command to each function of `functions` (indices of the platform's
    /// functions), or with a leading `!` removes it from each. `line` is what
    /// follows `FUNCTION:` in `set_ftrace_filter`: `traceoff`, `snapshot:1`, `cpudump`,
    /// `enable_event:irq:nmi:2`, `!traceoff` (a count after a removal is ignored:
    /// `!traceoff:0` removes the command, counted or not). A function that has the
    /// command already keeps it as it is. Refused whole, with nothing changed: a bad
    /// line, text after the command (function commands take no filter), a removal
    /// that finds the command on none of the functions, more than [`MAX_TRIGGERS`]
    /// commands on a function. Needs a context that may wait; the functions' entries
    /// are patched as needed.
    pub fn set_function_command(&self, functions: &[usize], line: &str) -> Result<(), HookError> {
        self.edit_functions(None, &[(functions, line)]).map_err(|refused| refused.error)
    }

    /// One `set_ftrace_filter` write as one change: replaces one of the instance's
    /// lists (`None`: none) as [`Instance::set_function_list`] does, and applies
    /// `commands` in order as [`Instance::set_function_command`] does, each judged
    /// against the commands those before it leave; then patches once. Refused whole,
    /// with nothing changed: the error says which command (if one) and why. A
    /// `snapshot` command's buffer is allocated once the whole change is judged
    /// good, and stays if patching then refuses.
    pub fn edit_functions(
        &self,
        list: Option<(FunctionList, &[bool])>,
        commands: &[FunctionCommand<'_>],
    ) -> Result<(), FunctionEditError> {
        let whole = |error: HookError| FunctionEditError { command: None, error };
        let state = self.functions_state().map_err(whole)?;
        if list.is_some_and(|(_, selected)| selected.len() != state.commanded.len()) {
            return Err(FunctionError::WrongLength.into());
        }
        let slot = self.state.slot;
        let current = state.control.lock().commands[slot].clone();
        self.edited_commands(current.as_deref(), commands)?;
        let adds_snapshot = |line: &str| {
            matches!(self.parse_function_command(line),
                Ok(TriggerCommand::Add(t)) if t.action() == Action::Snapshot)
        };
        if commands.iter().any(|&(_, line)| adds_snapshot(line)) {
            self.snapshot_alloc().map_err(|e| whole(e.into()))?;
        }
        let tracer = self.tracer;
        tracer.change_patched::<FunctionEditError, _>(|state, control| {
            let old = control.commands[slot].clone();
            let table = self.edited_commands(old.as_deref(), commands)?;
            let table = Some(Arc::new(table)).filter(|t| !t.is_empty());
            let undo_list = list
                .map(|(list, selected)| self.set_list_locked(state, control, list, selected))
                .transpose()?;
            if let Err(error) = tracer.publish_commands(state, control, slot, table) {
                if let Some(undo) = undo_list {
                    undo(state, control);
                }
                return Err(whole(error.into()));
            }
            Ok(move |state: &Functions, control: &mut Control| {
                // Cannot fail: its grace period's conditions held a moment ago.
                let _ = tracer.publish_commands(state, control, slot, old);
                if let Some(undo) = undo_list {
                    undo(state, control);
                }
            })
        })?;
        // An `enable_event` target is armed while the command exists.
        tracer.sync_keys_now();
        Ok(())
    }

    /// The function tracers' state, where the caller may patch.
    fn functions_state(&self) -> Result<&Functions, HookError> {
        Ok(self.tracer.waitable_functions()?.ok_or(FunctionError::Unavailable)?)
    }

    /// Parses a function command (see [`Instance::set_function_command`]).
    fn parse_function_command(&self, line: &str) -> Result<TriggerCommand, HookError> {
        let lookup = |system: &str, name: &str| {
            self.tracer.events().iter().copied().find(|d| d.system == system && d.name == name)
        };
        let symbols = self.tracer.platform.symbols();
        // Nothing may follow the command (an event trigger's condition, which a
        // removal does not read): a function command takes no filter.
        let text = line.trim();
        if let Some(end) = text.find(|c: char| c.is_ascii_whitespace()) {
            let rest = &text[end..];
            let pos =
                line.len() - line.trim_start().len() + end + rest.len() - rest.trim_start().len();
            let reason = TriggerReason::CommandEnd;
            return Err(HookError::Trigger(TriggerError { pos, reason }));
        }
        let command = Trigger::parse(line, FUNCTION.fields, lookup, symbols)
            // Text after the command's count: a function command takes no filter.
            .map_err(|error| match error.reason {
                TriggerReason::UnexpectedText => {
                    TriggerError { reason: TriggerReason::CommandEnd, ..error }
                }
                _ => error,
            })
            .map_err(HookError::Trigger)?;
        let trigger = command.trigger();
        if trigger.action().event_only() {
            return Err(HookError::Trigger(TriggerError::unknown_command(line)));
        }
        Ok(command)
    }

    /// `current` with `commands` applied in order (see
    /// [`Instance::edit_functions`]), or which one is refused and why.
    fn edited_commands(
        &self,
        current: Option<&CommandTable>,
        commands: &[FunctionCommand<'_>],
    ) -> Result<CommandTable, FunctionEditError> {
        let mut table = current.cloned().unwrap_or_default();
        for (at, &(functions, line)) in commands.iter().enumerate() {
            self.edit_commands(&mut table, functions, line)
                .map_err(|error| FunctionEditError { command: Some(at), error })?;
        }
        Ok(table)
    }

    /// Applies `line` to `functions` in `table` (see
    /// [`Instance::set_function_command`]), or says why it is refused.
    fn edit_commands(
        &self,
        table: &mut CommandTable,
        functions: &[usize],
        line: &str,
    ) -> Result<(), HookError> {
        let count = self.tracer.functions.get().map_or(0, |f| f.commanded.len());
        if functions.iter().any(|&index| index >= count) {
            return Err(FunctionError::NoSuchFunction.into());
        }
        let refuse = |reason| HookError::Trigger(TriggerError { pos: 0, reason });
        match self.parse_function_command(line)? {
            // (No `TriggerCommand::Hist`: refused by the parse.)
            TriggerCommand::Add(trigger) | TriggerCommand::Hist(trigger, _) => {
                for &index in functions {
                    let at = find(table, index).unwrap_or_else(|at| {
                        table.insert(at, (index, Vec::new()));
                        at
                    });
                    let triggers = &mut table[at].1;
                    if triggers.iter().any(|t| t.action() == trigger.action()) {
                        continue;
                    }
                    if triggers.len() == MAX_TRIGGERS {
                        return Err(refuse(TriggerReason::TooMany));
                    }
                    // Each function its own trigger, with its own count.
                    let TriggerCommand::Add(own) = self.parse_function_command(line)? else {
                        continue;
                    };
                    triggers.push(Arc::new(own));
                }
            }
            TriggerCommand::Remove(trigger) => {
                let mut removed = false;
                for &index in functions {
                    if let Ok(at) = find(table, index) {
                        let triggers = &mut table[at].1;
                        let before = triggers.len();
                        triggers.retain(|t| t.action() != trigger.action());
                        removed |= triggers.len() != before;
                    }
                }
                if !removed {
                    return Err(refuse(TriggerReason::NotFound));
                }
            }
        }
        table.retain(|(_, triggers)| !triggers.is_empty());
        Ok(())
    }

    /// The instance's function commands in function order: each function's index
    /// and its command as ftrace lists it (`traceoff:count=2`,
    /// `enable_event:irq:nmi:unlimited`), with the counts left. Needs a context that
    /// may wait (it takes the lock patching holds).
    pub fn function_commands(&self) -> Result<Vec<(usize, String)>, FunctionError> {
        let Some(functions) = self.tracer.waitable_functions()? else { return Ok(Vec::new()) };
        let control = functions.control.lock();
        let table = control.commands[self.state.slot].as_deref();
        let commands = table.into_iter().flatten();
        Ok(commands.flat_map(|(index, t)| t.iter().map(|t| (*index, t.to_string()))).collect())
    }
}
