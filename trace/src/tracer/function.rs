//! The function tracers, per instance. A platform that patches function entries
//! (the kernel) registers its traceable functions with [`Tracer::set_functions`] and
//! patches them when asked ([`Platform::patch_functions`]). Each instance selects a
//! tracer ([`FunctionTracer`], `current_tracer`) and the functions it traces
//! ([`FunctionList`]: `set_ftrace_filter`, `set_ftrace_notrace`). The tracer keeps,
//! per function, the mask of the instances tracing it, and has the platform make the
//! function's entry a call while some instance traces it, its NOP otherwise. The
//! platform's entry hook records through [`Tracer::record_function_entry`] and
//! [`Tracer::record_function_return`]: addresses are the kernel image's (ELF)
//! addresses, which its symbol table names.
//!
//! The events ([`FUNCTION`], [`FUNCGRAPH_ENTRY`], [`FUNCGRAPH_EXIT`]) are enabled in
//! an instance by its tracer, never through `set_event`. A function's mask is read
//! inside the writer's section, and destroying an instance clears its bit from every
//! mask before the grace period that frees its slot, so a bit a writer sees names
//! the instance that set it.

use super::commands::CommandTable;
use super::latency::{IRQSOFF, Latency};
use super::profile::Profile;
use super::rcu::RcuCell;
use super::stack::StackTracer;
use super::trigger::Target;
use super::{MAX_INSTANCES, TOP_SLOT, Tracer};
use crate::event::dispatch::Words;
use crate::event::{DescriptorKind, EventDescriptor, Timeline};
use crate::field::{Field, FieldKind};
use crate::platform::Platform;
use crate::sync::{AtomicU64, Ordering::Relaxed};
use crate::tracer::{Instance, InstanceError};
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

/// `ftrace:function`: a traced function's entry, and where it was called from.
pub static FUNCTION: EventDescriptor = EventDescriptor::new(
    "ftrace",
    "function",
    "{ip:#x} <-{parent_ip:#x}",
    &[
        Field { name: "ip", kind: FieldKind::U64 },
        Field { name: "parent_ip", kind: FieldKind::U64 },
    ],
    DescriptorKind::Event,
);

/// `ftrace:funcgraph_entry`: a traced function's entry, at a call depth. On a
/// timeline it begins a `call` slice, which its return ends.
pub static FUNCGRAPH_ENTRY: EventDescriptor = EventDescriptor::new(
    "ftrace",
    "funcgraph_entry",
    "func={func:#x} depth={depth}",
    &[Field { name: "func", kind: FieldKind::U64 }, Field { name: "depth", kind: FieldKind::U64 }],
    DescriptorKind::Event,
)
.on_timeline(Timeline::Begin { label: "call", key: Some("func") });

/// `ftrace:funcgraph_exit`: a traced function's return, with the time it took in
/// nanoseconds. On a timeline it ends its entry's `call` slice.
pub static FUNCGRAPH_EXIT: EventDescriptor = EventDescriptor::new(
    "ftrace",
    "funcgraph_exit",
    "func={func:#x} depth={depth} duration={duration}",
    &[
        Field { name: "func", kind: FieldKind::U64 },
        Field { name: "depth", kind: FieldKind::U64 },
        Field { name: "duration", kind: FieldKind::U64 },
    ],
    DescriptorKind::Event,
)
.on_timeline(Timeline::End { label: "call", key: Some("func") });

/// Whether `descriptor` is one of the `current_tracer` tracers' events (which their
/// tracer enables, not `set_event`).
pub fn is_function_event(descriptor: &EventDescriptor) -> bool {
    let events = [&FUNCTION, &FUNCGRAPH_ENTRY, &FUNCGRAPH_EXIT, &IRQSOFF];
    events.iter().any(|d| core::ptr::eq(*d, descriptor))
}

/// An instance's `current_tracer`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FunctionTracer {
    /// No function tracing.
    #[default]
    Nop,
    /// Each traced function's entry, with its caller.
    Function,
    /// Each traced function's entry and return, nested, with durations.
    Graph,
    /// The longest irqs-off region, with the functions called inside it (see
    /// [`Tracer::irqs_off`](crate::Tracer::irqs_off)).
    Irqsoff,
}

impl FunctionTracer {
    /// Every tracer, as `available_tracers` lists them.
    pub const ALL: [FunctionTracer; 4] = [
        FunctionTracer::Graph,
        FunctionTracer::Irqsoff,
        FunctionTracer::Function,
        FunctionTracer::Nop,
    ];

    /// The tracer's name in `current_tracer`.
    pub fn name(self) -> &'static str {
        match self {
            FunctionTracer::Nop => "nop",
            FunctionTracer::Function => "function",
            FunctionTracer::Graph => "function_graph",
            FunctionTracer::Irqsoff => "irqsoff",
        }
    }

    /// The tracer named `name`.
    pub fn parse(name: &str) -> Option<FunctionTracer> {
        FunctionTracer::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// Which of an instance's function lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FunctionList {
    /// `set_ftrace_filter`: only these are traced (none: all).
    Filter,
    /// `set_ftrace_notrace`: these are never traced.
    Notrace,
    /// `set_graph_function`: `function_graph` records only these and what they
    /// call (none: everything).
    GraphFunction,
    /// `set_graph_notrace`: `function_graph` records nothing from one of these
    /// until it returns.
    GraphNotrace,
}

impl FunctionList {
    /// Every list.
    pub const ALL: [FunctionList; 4] = [
        FunctionList::Filter,
        FunctionList::Notrace,
        FunctionList::GraphFunction,
        FunctionList::GraphNotrace,
    ];
}

/// Where a CPU is among its open `function_graph` calls, per instance slot: the
/// platform keeps it per CPU, passes it to each entry
/// ([`Tracer::record_function_entry`] returns the callee's), and restores it when
/// the call returns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GraphScope {
    /// Instances inside a call of one of their `set_graph_function` functions.
    pub inside: u64,
    /// Instances inside a call of one of their `set_graph_notrace` functions.
    pub muted: u64,
}

/// Why a function tracer change was refused. Nothing changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FunctionError {
    /// The platform registered no traceable functions.
    Unavailable,
    /// A list does not have one entry per registered function.
    WrongLength,
    /// A function index beyond the registered functions.
    NoSuchFunction,
    /// Patching, and reading what patching changes, need a context that may wait
    /// (thread context, interrupts on, not inside a writer).
    WouldDeadlock,
    /// The platform's patcher refused, and patched nothing.
    Patch(&'static str),
    /// Another instance's `current_tracer` is `irqsoff` (one at a time).
    IrqsoffBusy,
    /// `irqsoff` keeps its window in the snapshot buffer, which could not be
    /// allocated.
    Snapshot(InstanceError),
    /// Another tracer empties the buffer, and leaving `irqsoff` frees the snapshot
    /// ([`Instance::select_function_tracer`]), which a consuming reader holds.
    Buffers(InstanceError),
}

impl FunctionError {
    /// The rule the refused change broke.
    pub fn reason(self) -> &'static str {
        match self {
            FunctionError::Unavailable => "no function can be traced",
            FunctionError::WrongLength => "a list needs one entry per function",
            FunctionError::NoSuchFunction => "no such function",
            FunctionError::WouldDeadlock => {
                "the function tracers need a context that may wait (thread context, interrupts on, not inside a writer)"
            }
            FunctionError::Patch(reason) => reason,
            FunctionError::IrqsoffBusy => "another instance's tracer is irqsoff (one at a time)",
            FunctionError::Snapshot(_) => "irqsoff needs a snapshot buffer, which was refused",
            FunctionError::Buffers(_) => {
                "another tracer empties the buffers, which a consuming reader holds"
            }
        }
    }
}

impl core::error::Error for FunctionError {}

impl fmt::Display for FunctionError {
    /// The rule, and for a refusal of the buffers' the buffers' reason.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FunctionError::Snapshot(why) | FunctionError::Buffers(why) => {
                write!(f, "{} ({why})", self.reason())
            }
            _ => f.write_str(self.reason()),
        }
    }
}

/// One instance's selection.
#[derive(Clone)]
struct Selection {
    tracer: FunctionTracer,
    /// Each [`FunctionList`] (in [`FunctionList::ALL`]'s order), one entry per
    /// function.
    lists: [Vec<bool>; 4],
}

impl Selection {
    /// A selection of `nop` and empty lists over `count` functions.
    fn empty(count: usize) -> Selection {
        Selection {
            tracer: FunctionTracer::Nop,
            lists: core::array::from_fn(|_| vec![false; count]),
        }
    }

    /// One of its lists.
    fn list(&self, list: FunctionList) -> &Vec<bool> {
        &self.lists[list as usize]
    }
}

/// The control side, behind [`Functions::control`].
pub(super) struct Control {
    /// Each instance slot's selection (reset when its instance is destroyed).
    slots: Vec<Selection>,
    /// Each instance slot's function commands, as published in
    /// [`Functions::commands`] (`None`: none).
    pub(super) commands: Vec<Option<Arc<CommandTable>>>,
    /// Which functions' entries are calls now.
    patched: Vec<bool>,
    /// Which functions' entries have been calls at some time (ftrace's
    /// `touched_functions`).
    touched: Vec<bool>,
    /// `stack_trace_filter`, one entry per function (none set: every function).
    pub(super) stack_filter: Vec<bool>,
}

/// The indices of the functions `bits` sets, in order.
pub(super) fn listed(bits: &[bool]) -> Vec<usize> {
    bits.iter().enumerate().filter(|(_, on)| **on).map(|(i, _)| i).collect()
}

impl Control {
    /// The top-level instance's `set_ftrace_filter` and `set_ftrace_notrace`, which
    /// the profiler follows.
    pub(super) fn top_lists(&self) -> (Vec<bool>, Vec<bool>) {
        let top = &self.slots[TOP_SLOT];
        (top.list(FunctionList::Filter).clone(), top.list(FunctionList::Notrace).clone())
    }
}

/// The registered functions: each one's masks of instances, as writers read them,
/// and the control state.
pub(crate) struct Functions {
    /// The instances tracing each function.
    masks: Vec<AtomicU64>,
    /// The instances whose `set_graph_function` lists each function.
    roots: Vec<AtomicU64>,
    /// The instances whose `set_graph_notrace` lists each function.
    mutes: Vec<AtomicU64>,
    /// The instances with a `set_graph_function`.
    rooted: AtomicU64,
    /// The instances whose `options/func_stack_trace` is on: a stack trace after
    /// each `function` record.
    stacked: AtomicU64,
    /// `tracing_thresh` in nanoseconds (0: off): `function_graph` records only the
    /// returns of calls that took at least this long.
    pub(super) threshold: AtomicU64,
    /// The instances with commands on each function ([`super::commands`]).
    pub(super) commanded: Vec<AtomicU64>,
    /// Each instance slot's function commands, as writers read them.
    pub(super) commands: [RcuCell<CommandTable>; MAX_INSTANCES],
    /// The stack tracer.
    pub(super) stack: StackTracer,
    /// The function profiler.
    pub(super) profile: Profile,
    /// The irqsoff tracer.
    pub(super) latency: Latency,
    pub(super) control: spin::Mutex<Control>,
}

impl Functions {
    /// Sets or clears `slot`'s bit in every mask, and in the function events, as
    /// `selection` wants. The function events' bits are this module's alone: a
    /// destroy leaves them to [`Tracer::release_functions`], so a tracer without
    /// functions never touches them.
    fn publish(&self, slot: usize, selection: &Selection) {
        let bit = 1 << slot;
        let set = |mask: &AtomicU64, on: bool| match on {
            true => mask.fetch_or(bit, Relaxed),
            false => mask.fetch_and(!bit, Relaxed),
        };
        let on = selection.tracer != FunctionTracer::Nop;
        let filter = selection.list(FunctionList::Filter);
        let all = !filter.contains(&true);
        let notrace = selection.list(FunctionList::Notrace);
        let roots = selection.list(FunctionList::GraphFunction);
        let mutes = selection.list(FunctionList::GraphNotrace);
        for (i, mask) in self.masks.iter().enumerate() {
            set(mask, on && (all || filter[i]) && !notrace[i]);
            set(&self.roots[i], roots[i]);
            set(&self.mutes[i], mutes[i]);
        }
        set(&self.rooted, roots.contains(&true));
        // The profiler follows the top level's lists.
        if slot == TOP_SLOT {
            self.profile.publish(self.profile.is_on(), filter, notrace);
        }
        let irqsoff = selection.tracer == FunctionTracer::Irqsoff;
        FUNCTION.set_enabled(slot, selection.tracer == FunctionTracer::Function || irqsoff);
        for event in [&FUNCGRAPH_ENTRY, &FUNCGRAPH_EXIT] {
            event.set_enabled(slot, selection.tracer == FunctionTracer::Graph);
        }
        IRQSOFF.set_enabled(slot, irqsoff);
        self.latency.set_owner(slot, irqsoff);
    }
}

impl<P: Platform> Tracer<P> {
    /// Registers `count` traceable functions (the platform's indices `0..count`),
    /// each entry a NOP now. Once; a second call is refused (`false`).
    pub fn set_functions(&self, count: usize) -> bool {
        let mut fresh = false;
        self.functions.call_once(|| {
            fresh = true;
            let masks = || (0..count).map(|_| AtomicU64::new(0)).collect();
            Functions {
                masks: masks(),
                roots: masks(),
                mutes: masks(),
                rooted: AtomicU64::new(0),
                stacked: AtomicU64::new(0),
                threshold: AtomicU64::new(0),
                commanded: masks(),
                commands: core::array::from_fn(|_| RcuCell::empty()),
                stack: StackTracer::new(count),
                profile: Profile::new(count, self.cpus),
                latency: Latency::new(self.cpus),
                control: spin::Mutex::new(Control {
                    slots: (0..MAX_INSTANCES).map(|_| Selection::empty(count)).collect(),
                    commands: vec![None; MAX_INSTANCES],
                    patched: vec![false; count],
                    touched: vec![false; count],
                    stack_filter: vec![false; count],
                }),
            }
        });
        fresh
    }

    /// Whether some instance traces functions.
    pub fn functions_traced(&self) -> bool {
        self.functions.get().is_some_and(|f| f.masks.iter().any(|m| m.load(Relaxed) != 0))
    }

    /// Records the entry of function `index` (at ELF address `ip`, called from
    /// `parent`) in every instance tracing it: `function` instances get its entry and
    /// caller; `function_graph` instances get its entry at `depth`, where `scope`
    /// (the CPU's, see [`GraphScope`]) and their `set_graph_function` and
    /// `set_graph_notrace` allow it. Returns the `function_graph` instances that
    /// recorded it, which the platform hands to [`Tracer::record_function_return`]
    /// when the call returns, and the callee's scope, which the platform keeps until
    /// then. With `depth` `None` (the platform cannot follow the call's return: its
    /// shadow stack is full) only `function` instances record it, the scope stays,
    /// and the instances returned are those that missed it. From any context.
    pub fn record_function_entry(
        &self,
        index: usize,
        ip: u64,
        parent: u64,
        depth: Option<u64>,
        scope: GraphScope,
    ) -> (u64, GraphScope) {
        let Some(functions) = self.functions.get().filter(|f| index < f.masks.len()) else {
            return (0, scope);
        };
        let mask = &functions.masks[index];
        // The irqsoff tracer's instance records only calls made inside a timed
        // irqs-off region.
        let outside = functions.latency.outside_region(|| self.platform.cpu());
        // Each record's instances are read again inside its section; these reads
        // only spare a section no instance records in.
        let traced = || mask.load(Relaxed) & FUNCTION.enabled_mask() & !outside;
        let tracing = traced();
        if tracing != 0 {
            self.record_values(&FUNCTION, [ip, parent], traced);
            if functions.stacked.load(Relaxed) & tracing != 0 {
                self.record_function_stacks(functions, traced);
            }
        }
        let graphed = || mask.load(Relaxed) & FUNCGRAPH_ENTRY.enabled_mask();
        let recorded = 'graph: {
            if graphed() == 0 {
                break 'graph (0, scope);
            }
            let (mut graph, mut callee) = (0, scope);
            let mut judge = || {
                let candidates = graphed();
                let inside = scope.inside | (functions.roots[index].load(Relaxed) & candidates);
                let muted = scope.muted | (functions.mutes[index].load(Relaxed) & candidates);
                callee = GraphScope { inside, muted };
                graph = candidates & (!functions.rooted.load(Relaxed) | inside) & !muted;
                graph
            };
            let Some(depth) = depth else {
                break 'graph (judge(), scope);
            };
            // With a threshold only the return is recorded, if the call took long.
            if functions.threshold.load(Relaxed) != 0 {
                let graph = judge();
                break 'graph (graph, callee);
            }
            self.record_values(&FUNCGRAPH_ENTRY, [ip, depth], judge);
            (graph, callee)
        };
        // The call is recorded before its commands act.
        if functions.commanded[index].load(Relaxed) != 0 {
            self.run_function_commands(functions, index, ip, parent);
        }
        recorded
    }

    /// Records a traced call's return (function at ELF address `ip`, at `depth`,
    /// after `duration` ns) in the `graph` instances [`Tracer::record_function_entry`]
    /// returned, those still tracing with `function_graph`, unless the call was
    /// quicker than `tracing_thresh`. From any context.
    pub fn record_function_return(&self, graph: u64, ip: u64, depth: u64, duration: u64) {
        let threshold = self.functions.get().map_or(0, |f| f.threshold.load(Relaxed));
        if graph == 0 || duration < threshold {
            return;
        }
        let mask = || graph & FUNCGRAPH_EXIT.enabled_mask();
        self.record_values(&FUNCGRAPH_EXIT, [ip, depth, duration], mask);
    }

    /// Records `values` (one per field) as an event of `descriptor` into the
    /// instances `mask` gives.
    pub(super) fn record_values<const N: usize>(
        &self,
        descriptor: &EventDescriptor,
        values: [u64; N],
        mask: impl FnOnce() -> u64,
    ) {
        self.record_into(mask, descriptor, Words { len: 8 * N, words: values });
    }

    /// Records a stack trace after a `function` record in each instance of `mask`
    /// whose `func_stack_trace` is on.
    #[cold]
    #[inline(never)]
    fn record_function_stacks(&self, functions: &Functions, mask: impl FnOnce() -> u64) {
        let stacked = || mask() & functions.stacked.load(Relaxed);
        self.for_each_target(true, stacked, |target| target.stack_trace());
    }

    /// `tracing_thresh`, in nanoseconds (0: off).
    pub fn graph_threshold(&self) -> u64 {
        self.functions.get().map_or(0, |f| f.threshold.load(Relaxed))
    }

    /// Sets `tracing_thresh` (ns; 0: off): above 0, `function_graph` records a call
    /// only at its return, and only if it took at least that long, in every
    /// instance. Takes effect at the next entry and the next return. From any
    /// context.
    pub fn set_graph_threshold(&self, ns: u64) -> Result<(), FunctionError> {
        let functions = self.functions.get().ok_or(FunctionError::Unavailable)?;
        functions.threshold.store(ns, Relaxed);
        Ok(())
    }

    /// Publishes `slot`'s selection ([`Functions::publish`]) and tells the platform
    /// whether irqs-off regions are timed now.
    fn publish_selection(&self, functions: &Functions, slot: usize, selection: &Selection) {
        functions.publish(slot, selection);
        self.platform.time_irqs_off(functions.latency.owner().is_some());
    }

    /// Forgets the selection of the instance in `slot` (it is being destroyed): its
    /// bit leaves every function's mask and its events, and entries no instance
    /// traces any more go back to their NOP (where the caller may wait).
    pub(super) fn release_functions(&self, slot: usize) {
        let Some(functions) = self.functions.get() else { return };
        let mut control = functions.control.lock();
        control.slots[slot] = Selection::empty(functions.masks.len());
        self.publish_selection(functions, slot, &control.slots[slot]);
        functions.latency.forget(slot);
        functions.stacked.fetch_and(!(1 << slot), Relaxed);
        self.release_function_commands(functions, &mut control, slot);
        if self.may_wait().is_ok() {
            let _ = self.sync_entries(functions, &mut control);
        }
    }

    /// Changes what the entry hook sees and patches the entries that change needs:
    /// `change` publishes its change (under the control lock) and returns how to undo
    /// it, which runs if patching is refused, so a refusal changes nothing. Needs a
    /// context that may wait.
    pub(super) fn change_patched<E: From<FunctionError>, U: FnOnce(&Functions, &mut Control)>(
        &self,
        change: impl FnOnce(&Functions, &mut Control) -> Result<U, E>,
    ) -> Result<(), E> {
        let functions = self.waitable_functions()?.ok_or(FunctionError::Unavailable)?;
        let mut control = functions.control.lock();
        let undo = change(functions, &mut control)?;
        self.sync_entries(functions, &mut control)
            .inspect_err(|_| undo(functions, &mut control))?;
        Ok(())
    }

    /// Patches the entries whose state differs from what the masks want.
    pub(super) fn sync_entries(
        &self,
        functions: &Functions,
        control: &mut Control,
    ) -> Result<(), FunctionError> {
        let wanted: Vec<bool> =
            (0..functions.masks.len()).map(|i| functions.callbacks(i) != 0).collect();
        let changes: Vec<(usize, bool)> = wanted
            .iter()
            .zip(&control.patched)
            .enumerate()
            .filter(|(_, (want, is))| want != is)
            .map(|(i, (&want, _))| (i, want))
            .collect();
        if !changes.is_empty() {
            self.platform.patch_functions(&changes).map_err(FunctionError::Patch)?;
        }
        for (touched, &call) in control.touched.iter_mut().zip(&wanted) {
            *touched |= call;
        }
        control.patched = wanted;
        Ok(())
    }
}

impl Functions {
    /// The callbacks on function `index`'s entry (ftrace's `enabled_functions`
    /// count): each instance tracing it, each with commands on it, the stack
    /// tracer's check and the profiler's count. Its entry is a call while there is one.
    fn callbacks(&self, index: usize) -> u32 {
        let instances =
            |masks: &[AtomicU64]| masks.get(index).map_or(0, |m| m.load(Relaxed).count_ones());
        instances(&self.masks)
            + instances(&self.commanded)
            + u32::from(self.stack.checks(index))
            + u32::from(self.profile.profiles(index))
    }
}

impl<P: Platform> Tracer<P> {
    /// ftrace's `enabled_functions`: each function with callbacks on its entry (its
    /// index among the functions registered) and their number, by index.
    pub fn enabled_functions(&self) -> Vec<(usize, u32)> {
        let Some(functions) = self.functions.get() else { return Vec::new() };
        let callbacks = (0..functions.masks.len()).map(|i| (i, functions.callbacks(i)));
        callbacks.filter(|&(_, n)| n != 0).collect()
    }

    /// ftrace's `touched_functions`: each function whose entry has been a call at
    /// some time since boot (by index), with its callbacks now (0 once none is left).
    /// Needs a context that may wait (it takes the lock patching holds).
    pub fn touched_functions(&self) -> Result<Vec<(usize, u32)>, FunctionError> {
        let Some(functions) = self.waitable_functions()? else { return Ok(Vec::new()) };
        let control = functions.control.lock();
        let touched = listed(&control.touched).into_iter();
        Ok(touched.map(|i| (i, functions.callbacks(i))).collect())
    }

    /// The function tracers' state, if functions were registered, where the caller
    /// may take the locks patching holds while it waits for every CPU:
    /// `WouldDeadlock` elsewhere.
    pub(super) fn waitable_functions(&self) -> Result<Option<&Functions>, FunctionError> {
        self.may_wait().map_err(|_| FunctionError::WouldDeadlock)?;
        Ok(self.functions.get())
    }
}

impl<'t, P: Platform> Instance<'t, P> {
    /// The instance's `current_tracer`. Needs a context that may wait (it takes the
    /// lock patching holds).
    pub fn function_tracer(&self) -> Result<FunctionTracer, FunctionError> {
        let functions = self.tracer.waitable_functions()?;
        Ok(functions
            .map_or(FunctionTracer::Nop, |f| f.control.lock().slots[self.state.slot].tracer))
    }

    /// Whether the instance records a stack trace after each `function` record
    /// (`options/func_stack_trace`).
    pub fn function_stack_trace(&self) -> bool {
        let functions = self.tracer.functions.get();
        functions.is_some_and(|f| f.stacked.load(Relaxed) & (1 << self.state.slot) != 0)
    }

    /// Sets `options/func_stack_trace`: with the `function` tracer, a stack trace
    /// (an `ftrace:kernel_stack` event, as the `stacktrace` trigger records) after
    /// each function's record, from the function outward. As in ftrace, keep the
    /// functions traced few first. Takes effect at the next call.
    pub fn set_function_stack_trace(&self, on: bool) -> Result<(), FunctionError> {
        let functions = self.tracer.functions.get().ok_or(FunctionError::Unavailable)?;
        let bit = 1 << self.state.slot;
        match on {
            true => functions.stacked.fetch_or(bit, Relaxed),
            false => functions.stacked.fetch_and(!bit, Relaxed),
        };
        Ok(())
    }

    /// The functions on one of the instance's lists (indices, in order). Needs a
    /// context that may wait (it takes the lock patching holds).
    pub fn function_list(&self, list: FunctionList) -> Result<Vec<usize>, FunctionError> {
        let Some(functions) = self.tracer.waitable_functions()? else { return Ok(Vec::new()) };
        let control = functions.control.lock();
        Ok(listed(control.slots[self.state.slot].list(list)))
    }

    /// Sets `current_tracer`: the entries the instance now traces become calls once
    /// it records them; those no instance traces any more become NOPs again after
    /// it stopped. Needs a context that may wait. `nop` is accepted (and changes
    /// nothing) where no functions were registered. `irqsoff` also allocates the
    /// snapshot, zeroes [`Instance::max_latency`] and makes the buffer overwrite
    /// until another tracer gives its mode back.
    pub fn set_function_tracer(&self, tracer: FunctionTracer) -> Result<(), FunctionError> {
        if tracer == FunctionTracer::Nop && self.tracer.functions.get().is_none() {
            return Ok(());
        }
        let allocated = match tracer {
            FunctionTracer::Irqsoff => {
                // Checked again under the lock; first here, to allocate nothing for a
                // refusal.
                self.tracer.may_wait().map_err(|_| FunctionError::WouldDeadlock)?;
                self.check_irqsoff_owner()?;
                self.snapshot_added().map_err(FunctionError::Snapshot)?
            }
            _ => false,
        };
        let changed = self.change_functions(|selection| {
            selection.tracer = tracer;
            Ok(())
        });
        if changed.is_err() && allocated {
            // A refusal changes nothing: the snapshot allocated for it goes again
            // (nothing can hold it yet but a reader opened meanwhile, which keeps it).
            let _ = self.snapshot_free();
        }
        changed
    }

    /// `current_tracer` as ftrace's file sets it: another tracer also empties the
    /// instance's live buffer once the previous one has stopped (the snapshot keeps
    /// what it holds, but leaving `irqsoff`, which kept its window there, frees it,
    /// as ftrace frees a latency tracer's), and then starts `irqsoff`'s
    /// [`Instance::max_latency`] from 0 (a window reported while the entries were
    /// patched held the previous tracer's records); the tracer there already
    /// changes nothing. Refused as [`Instance::set_function_tracer`]
    /// is, or with `Buffers` while a consuming reader holds the buffers, with nothing
    /// changed (`Buffers` after the change: a reader that opened meanwhile; the
    /// tracer changed, the buffers kept).
    pub fn select_function_tracer(&self, tracer: FunctionTracer) -> Result<(), FunctionError> {
        self.tracer.may_wait().map_err(|_| FunctionError::WouldDeadlock)?;
        if self.function_tracer()? == tracer {
            return Ok(());
        }
        let buffers = |e: crate::Error| FunctionError::Buffers(e.into());
        self.state.recorder.lock().claim_all().map_err(buffers)?;
        let leaving_irqsoff = self.function_tracer()? == FunctionTracer::Irqsoff;
        self.set_function_tracer(tracer)?;
        self.state.recorder.lock().clear().map_err(buffers)?;
        if leaving_irqsoff {
            self.snapshot_free().map_err(FunctionError::Buffers)?;
        }
        self.tracer.reset_bad_cpu(self.state.slot);
        if tracer == FunctionTracer::Irqsoff {
            self.set_max_latency(0)?;
        }
        Ok(())
    }

    /// Replaces one of the instance's lists with `selected` (one entry per
    /// function), and patches what that changes if the instance traces functions.
    /// Needs a context that may wait.
    pub fn set_function_list(
        &self,
        list: FunctionList,
        selected: &[bool],
    ) -> Result<(), FunctionError> {
        self.tracer.change_patched(|functions, control| {
            self.set_list_locked(functions, control, list, selected)
        })
    }

    /// `IrqsoffBusy` if another instance's tracer is `irqsoff`.
    fn check_irqsoff_owner(&self) -> Result<(), FunctionError> {
        let functions = self.tracer.functions.get().ok_or(FunctionError::Unavailable)?;
        match functions.latency.owner() {
            Some(owner) if owner != self.state.slot => Err(FunctionError::IrqsoffBusy),
            _ => Ok(()),
        }
    }

    /// Edits the instance's selection, updates the function masks and the
    /// instance's events, and patches; if patching is refused, everything is as it
    /// was.
    fn change_functions(
        &self,
        edit: impl FnOnce(&mut Selection) -> Result<(), FunctionError>,
    ) -> Result<(), FunctionError> {
        self.tracer.change_patched(|functions, control| {
            let mut after = control.slots[self.state.slot].clone();
            edit(&mut after)?;
            self.publish_edit(functions, control, after)
        })
    }

    /// Sets one of the instance's lists, as [`Instance::set_function_list`] does,
    /// within a change the caller patches (`control` is locked); returns how to undo it.
    pub(super) fn set_list_locked(
        &self,
        functions: &Functions,
        control: &mut Control,
        list: FunctionList,
        selected: &[bool],
    ) -> Result<impl FnOnce(&Functions, &mut Control) + use<'_, 't, P>, FunctionError> {
        let mut after = control.slots[self.state.slot].clone();
        let bits = &mut after.lists[list as usize];
        if bits.len() != selected.len() {
            return Err(FunctionError::WrongLength);
        }
        bits.copy_from_slice(selected);
        self.publish_edit(functions, control, after)
    }

    /// Publishes `after` as the instance's selection (`control` is locked), before
    /// the caller patches; returns how to undo it.
    fn publish_edit(
        &self,
        functions: &Functions,
        control: &mut Control,
        after: Selection,
    ) -> Result<impl FnOnce(&Functions, &mut Control) + use<'_, 't, P>, FunctionError> {
        let slot = self.state.slot;
        if after.tracer == FunctionTracer::Irqsoff {
            self.check_irqsoff_owner()?;
        }
        let tracer = self.tracer;
        let irqsoff = |s: &Selection| s.tracer == FunctionTracer::Irqsoff;
        let (was, now) = (irqsoff(&control.slots[slot]), irqsoff(&after));
        tracer.publish_selection(functions, slot, &after);
        let undo_mode = self.irqsoff_changed(&functions.latency, was, now);
        let before = core::mem::replace(&mut control.slots[slot], after);
        Ok(move |functions: &Functions, control: &mut Control| {
            undo_mode(&functions.latency);
            tracer.publish_selection(functions, slot, &before);
            control.slots[slot] = before;
        })
    }
}
