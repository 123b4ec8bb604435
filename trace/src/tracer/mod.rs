//! The tracer: every event descriptor, numbered at boot, and the instances. It
//! routes each tracepoint's record to the instances that enabled it.
//!
//! A writer enters its CPU's section once per event, then finds each enabled
//! instance's recorder through a slot it reads with a single load (an `RcuCell`).
//! Control operations (create, destroy, resize, snapshot allocation) publish a new
//! recorder in the slot and wait for a grace period before the old one can go. See
//! DESIGN.md, "The per-CPU section" and "Instances".
//!
//! Inside: `instance` is the handle a caller works with ([`Instance`]), `rcu` the
//! cell each instance slot is read through, `trigger` ftrace's event triggers,
//! `function` the function tracers and `commands` their `FUNCTION:COMMAND`s,
//! `stack` the stack tracer, `profile` the function profiler, `latency` the irqsoff
//! tracer, `lines` the `trace` file's lines ([`TraceWriter`]), `dump` a panic dump
//! ([`Tracer::write_dump`]).

extern crate alloc;

mod commands;
mod dump;
mod function;
pub(crate) mod hist;
mod instance;
mod keys;
mod latency;
mod lines;
mod profile;
// The one module of the crate with `unsafe` code of its own (its `allow` is inside;
// the macros' expansions are the calling crate's; see DESIGN.md).
mod rcu;
mod stack;
pub(crate) mod trigger;

pub use crate::name::MAX_NAME;
pub use commands::{FunctionCommand, FunctionEditError};
pub use dump::DumpSelection;
pub use function::{
    FUNCGRAPH_ENTRY, FUNCGRAPH_EXIT, FUNCTION, FunctionError, FunctionList, FunctionTracer,
    GraphScope, is_function_event,
};
pub use hist::{
    Hist, HistOp, HistReason, MAX_HIST_BYTES, MAX_HIST_NAME, MAX_KEYS, MAX_OPERATORS, MAX_REFS,
    MAX_SAVED, MAX_SIZE, MAX_VALS, MAX_VARS, MIN_SIZE, STRING_KEY_BYTES,
};
pub use instance::{DestroyError, HookError, Instance, InstanceConfig, InstanceError};
pub use latency::IRQSOFF;
pub use lines::{TraceWriter, write_record};
pub use profile::FunctionStat;
pub use stack::{MAX_STACK_ENTRIES, StackEntry, StackMax};
pub use trigger::{
    Action, MAX_TRIGGER_LEN, MAX_TRIGGERS, STACK_FRAMES, STACK_TRACE, Trigger, TriggerCommand,
    TriggerError, TriggerReason,
};
use trigger::{STACK_PAYLOAD, put_stack};

use crate::event::dispatch::{Body, Dispatch, Inline, Payload, Spill, Words};
use crate::event::filter::Filter;
use crate::event::format_file::Origin;
use crate::event::marker::{MARKER, RAW_MARKER};
use crate::event::{DescriptorKind, EventDescriptor, MAX_EVENT_PAYLOAD};
use crate::field::{Encoder, Sink};
use crate::platform::Platform;
use crate::ring::buffer::{Buffer, Config};
use crate::ring::per_cpu::{RecordWriter, Ring};
use crate::ring::reader::ReadScratch;
use crate::ring::record::Tag;
use crate::ring::recorder::{Change, Recorder};
use crate::ring::section::{Held, Sections};
use crate::tracer::instance::InstanceState;
use crate::tracer::rcu::RcuCell;
use crate::tracer::trigger::Target;
use alloc::string::String;
use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
use spin::Mutex;

/// Most instances, the top-level one included (one bit each in an event's mask).
pub const MAX_INSTANCES: usize = 64;
/// Slot of the top-level instance.
pub(crate) const TOP_SLOT: usize = 0;

/// Most bytes of data a raw marker takes after its id (each is kept as 3 characters
/// of hex text, within an event's payload).
pub const MAX_RAW_MARKER: usize = (crate::event::MAX_EVENT_PAYLOAD - 16) / 3;

/// Whether `set_event` and the `enable` files turn `descriptor` on and off (and
/// `available_events` lists it): not the function tracers' events, which
/// `current_tracer` records, nor those the tracer writes itself: the markers'
/// `ftrace:print` and `ftrace:raw_data`, recorded by every instance always (as in
/// Linux, where they have no `enable` file), and the `stacktrace` trigger's
/// `ftrace:kernel_stack`.
pub fn is_settable(descriptor: &EventDescriptor) -> bool {
    !is_function_event(descriptor) && !is_written_by_tracer(descriptor)
}

/// Whether `descriptor`'s records are messages: `trace_marker`'s `ftrace:print` and
/// the `printk!` sites (the lines `printk-msg-only` leaves as their text alone).
pub fn is_message(descriptor: &EventDescriptor) -> bool {
    core::ptr::eq(descriptor, &MARKER) || descriptor.kind == DescriptorKind::Printk
}

/// The markers' and the `stacktrace` trigger's events.
fn is_written_by_tracer(descriptor: &EventDescriptor) -> bool {
    [&MARKER, &RAW_MARKER, &STACK_TRACE].iter().any(|d| core::ptr::eq(*d, descriptor))
}

/// Whether `options/stacktrace` records a stack trace after `descriptor`'s records:
/// a tracepoint's or a `printk!` line's (as ftrace's after `trace_printk`), not a
/// marker's, a stack trace's or a function tracer's (`options/func_stack_trace` is
/// theirs).
fn takes_stack_traces(descriptor: &EventDescriptor) -> bool {
    !is_written_by_tracer(descriptor) && !function::is_function_event(descriptor)
}

/// Descriptors the tracer provides itself, besides those found in the section.
fn builtin() -> [&'static EventDescriptor; 8] {
    [
        &MARKER,
        &RAW_MARKER,
        &crate::event::log::LOG_MESSAGE,
        &STACK_TRACE,
        &FUNCTION,
        &FUNCGRAPH_ENTRY,
        &FUNCGRAPH_EXIT,
        &IRQSOFF,
    ]
}

/// An event's filter and triggers in one instance.
#[derive(Clone, Default)]
pub(crate) struct EventHooks {
    pub(crate) filter: Option<Arc<Filter>>,
    pub(crate) triggers: Vec<Arc<Trigger>>,
    /// How the triggers act, worked out by [`Tracer::edit_hooks`] as it publishes the
    /// table ([`EventHooks::settle`]): every triggered event reads it.
    order: Order,
    /// Whether triggers that act after the record enable or disable the event
    /// itself: those then act before the record is judged ([`EventHooks::settle`]).
    toggles_itself: bool,
}

/// When an event's triggers act ([`EventHooks::settle`]).
#[derive(Clone, Copy, Default, PartialEq, Eq)]
enum Order {
    /// Before the event is recorded: none needs the record.
    Early,
    /// After it, in the list's order: no post trigger comes before another.
    Listed,
    /// After it, the post triggers after the others.
    #[default]
    PostLast,
}

impl EventHooks {
    /// Whether there is neither a filter nor a trigger.
    pub(crate) fn is_empty(&self) -> bool {
        self.filter.is_none() && self.triggers.is_empty()
    }

    /// Works out when the triggers of `event` act, as ftrace's: before the event is
    /// recorded when none needs the record (none has a condition, `if`, and each
    /// acts without the record: not `traceoff`, `stacktrace` or `hist`), the record
    /// then judged by the event's state before them; otherwise after it,
    /// `traceoff` and `stacktrace` (post triggers) after the others, but for those
    /// that enable or disable `event` itself, which act before the record is judged
    /// (ftrace reads the event's soft-disable flag again after its triggers saw the
    /// record: a `disable_event` on the event itself drops the record that fired it,
    /// an `enable_event` keeps it). Early, a `disable_event` on the event itself
    /// drops its record too (`Tracer::apply_hooks`).
    fn settle(&mut self, event: &EventDescriptor) {
        let post_last = |triggers: &[Arc<Trigger>]| {
            triggers.iter().skip_while(|t| !t.follows_commit()).all(|t| t.follows_commit())
        };
        self.order = match self.triggers.iter().all(|t| t.fires_without_record()) {
            true => Order::Early,
            false if post_last(&self.triggers) => Order::Listed,
            false => Order::PostLast,
        };
        self.toggles_itself =
            self.order != Order::Early && self.triggers.iter().any(|t| t.toggles(event));
    }

    /// Whether the triggers act before the event is recorded ([`EventHooks::settle`]).
    pub(crate) fn fire_early(&self) -> bool {
        self.order == Order::Early
    }

    /// Whether one of the triggers enables or disables `event`.
    pub(crate) fn targets(&self, event: &EventDescriptor) -> bool {
        self.triggers.iter().any(|t| t.action().target().is_some_and(|d| core::ptr::eq(d, event)))
    }
}

/// An instance's hooks, indexed like [`Tracer::events`]. Replaced whole on a change
/// (copy, edit, publish, wait for a grace period), so writers read it with one load.
pub(crate) type HookTable = Vec<Option<Arc<EventHooks>>>;

/// Limits on what instances may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most instances, the top-level one included (at most [`MAX_INSTANCES`]).
    pub max_instances: usize,
    /// Most bytes of ring buffer across all instances and their snapshots.
    pub max_total_bytes: usize,
}

/// The control side: which slots hold which instance, and the memory they use.
pub(crate) struct Registry<P> {
    instances: [Option<Arc<InstanceState<P>>>; MAX_INSTANCES],
    /// Each slot's hook table, as published in [`Tracer::hooks`].
    hooks: [Option<Arc<HookTable>>; MAX_INSTANCES],
    /// The bytes of the instances' rings.
    total_bytes: usize,
    /// Rings an instance let go of (destroyed, resized, its clock or snapshot
    /// changed) with their bytes, which a reader may still hold: they count against
    /// the memory limit until the last holder lets them go.
    retired: Vec<(Weak<Ring>, usize)>,
}

impl<P: Platform> Registry<P> {
    /// The named instances (every one but the top level's), in slot order.
    fn named_instances(&self) -> impl Iterator<Item = &Arc<InstanceState<P>>> {
        self.instances.iter().flatten().filter(|s| s.slot != TOP_SLOT)
    }

    /// The named instance called `name`.
    fn named(&self, name: &str) -> Option<&Arc<InstanceState<P>>> {
        self.named_instances().find(|s| s.name == name)
    }

    /// A free slot for a new instance called `name`: `Busy` if one has that name,
    /// `TooManyInstances` past `max`.
    fn free_slot(&self, name: &str, max: usize) -> Result<usize, InstanceError> {
        if self.named(name).is_some() {
            return Err(InstanceError::Busy);
        }
        if self.instances.iter().flatten().count() >= max {
            return Err(InstanceError::TooManyInstances);
        }
        self.instances.iter().position(Option::is_none).ok_or(InstanceError::TooManyInstances)
    }

    /// The bytes of rings alive: the instances' and the retired rings still held.
    fn in_use(&mut self) -> usize {
        self.retired.retain(|(ring, _)| ring.strong_count() > 0);
        self.retired.iter().fold(self.total_bytes, |sum, (_, bytes)| sum.saturating_add(*bytes))
    }

    /// Counts the rings of `old` that `new` (if any) does not keep as retired, and
    /// takes `old`'s bytes from the instances'.
    fn retire(&mut self, old: &Recorder<P>, new: Option<&Recorder<P>>) {
        self.total_bytes -= footprint(old);
        let kept = |ring: &Arc<Ring>| {
            new.is_some_and(|new| sets(new).any(|s| s.rings().iter().any(|r| Arc::ptr_eq(r, ring))))
        };
        for ring in sets(old).flat_map(Buffer::rings) {
            if !ring.is_borrowed() && !kept(ring) {
                self.retired.push((Arc::downgrade(ring), ring.words() as usize * 8));
            }
        }
    }
}

/// The buffer sets of `recorder`: the live one and the snapshot, if any.
fn sets<P: Platform>(recorder: &Recorder<P>) -> impl Iterator<Item = &Buffer<P>> {
    core::iter::once(recorder.live()).chain(recorder.snapshot())
}

/// The tracer: descriptors and instances. Install it with [`crate::install`] so
/// tracepoints reach it.
pub struct Tracer<P> {
    platform: P,
    cpus: usize,
    limits: Limits,
    events: Vec<&'static EventDescriptor>,
    sections: Arc<Sections>,
    /// Each instance slot's recorder, as writers reach it.
    slots: [RcuCell<Recorder<P>>; MAX_INSTANCES],
    /// Each slot's instance name, for the panic path (which takes no lock).
    names: [RcuCell<String>; MAX_INSTANCES],
    /// Per slot: events written with no section to enter (refused, counted on CPU 0
    /// as dropped): from a CPU beyond the tracer's, or, on any CPU, inside sections
    /// nested past their depth's bits (2^24 - 1).
    bad_cpu: [AtomicU64; MAX_INSTANCES],
    /// Per slot: the CPUs whose events the instance records (`tracing_cpumask`; bit
    /// `c` for CPU `c`, CPUs from 64 on always record), as set.
    cpumask: [AtomicU64; MAX_INSTANCES],
    /// Per CPU: the slots whose cpumask leaves the CPU out (what writers read: one
    /// load per event instead of a test per instance).
    excluded: Vec<AtomicU64>,
    /// Each slot's filters and triggers, as writers reach them.
    hooks: [RcuCell<HookTable>; MAX_INSTANCES],
    /// The slots whose `options/stacktrace` is on: a stack trace after each record of
    /// a tracepoint or `printk!` site ([`takes_stack_traces`]; read on the hooked
    /// path only).
    stacked: AtomicU64,
    /// The slots where an event's triggers enable or disable the event itself before
    /// its record is judged ([`EventHooks::settle`]; read on the triggered path only).
    /// Set before such hooks are published and cleared after they go, so a writer
    /// that finds the hooks has mostly seen the bit; one that has not runs those
    /// triggers with the others, after the record.
    toggling: AtomicU64,
    /// The function tracers' state, once the platform registered its functions.
    functions: spin::Once<function::Functions>,
    /// What [`Tracer::write_dump`] reads records with, allocated with the tracer so
    /// that a panic's dump needs no allocator: two, so that a panic during a live
    /// dump (which holds one, and may be on a CPU the panic stopped) has the other.
    /// Only tried: a dump that finds both in use allocates its own.
    dump_scratch: [Mutex<ReadScratch>; 2],
    pub(crate) registry: Mutex<Registry<P>>,
    /// The top-level instance, which always exists: reached without the registry's
    /// lock, so from any context.
    top: spin::Once<Arc<InstanceState<P>>>,
}

/// Bytes a recorder's buffers take.
fn footprint<P: Platform>(recorder: &Recorder<P>) -> usize {
    sets(recorder).map(Buffer::total_bytes).sum()
}

impl<P: Platform> Tracer<P> {
    /// A tracer for `cpus` CPUs over `descriptors` (the linker section's contents; the
    /// tracer adds its own), with a top-level instance built from `top`. Numbers every
    /// descriptor: ids follow the order of `system:name`, so they are stable for a
    /// given set of descriptors. Descriptors with a malformed format string are
    /// refused (`Err` names the first). A descriptor keeps its instances' enable bits,
    /// so a kernel builds one tracer: a second tracer over the same descriptors would
    /// share them (tests build several, each over descriptors of its own).
    pub fn new(
        platform: P,
        cpus: usize,
        descriptors: &[&'static EventDescriptor],
        limits: Limits,
        top: InstanceConfig,
    ) -> Result<Self, TracerError> {
        keys::check_keys(crate::event::key::KEYED, platform.has_keys())?;
        let mut events: Vec<&'static EventDescriptor> = Vec::new();
        events
            .try_reserve_exact(descriptors.len() + builtin().len())
            .map_err(|_| TracerError::NoMemory)?;
        events.extend(descriptors.iter().copied().chain(builtin()));
        let key =
            |d: &&'static EventDescriptor| (d.system, d.name, d.format, core::ptr::from_ref(*d));
        events.sort_by(|a, b| key(a).cmp(&key(b)));
        // A descriptor may be listed twice (a section seen through two symbols).
        events.dedup_by(|a, b| core::ptr::eq(*a, *b));
        // Every `printk!` site is an `ftrace:bprint` of its own; two tracepoints of
        // one name are a mistake tracefs could not tell apart. Sorted by name, the
        // tracepoints of one name follow each other, whatever sites sort between.
        let mut last: Option<&EventDescriptor> = None;
        for &d in events.iter().filter(|d| d.kind == DescriptorKind::Event) {
            if last.is_some_and(|l| (l.system, l.name) == (d.system, d.name)) {
                return Err(TracerError::DuplicateEvent(d));
            }
            last = Some(d);
        }
        if events.len() > usize::from(crate::ring::record::MAX_EVENT_ID) {
            return Err(TracerError::TooManyEvents);
        }
        for (i, descriptor) in events.iter().enumerate() {
            if descriptor.kind == DescriptorKind::Event {
                crate::event::format::validate(descriptor.format, descriptor.fields)
                    .map_err(|_| TracerError::BadFormat(descriptor))?;
            }
            descriptor.set_id(i as u16 + 1);
        }
        let sections = Arc::new(Sections::new(cpus).map_err(|_| TracerError::NoMemory)?);
        let mut excluded = Vec::new();
        excluded.try_reserve_exact(cpus).map_err(|_| TracerError::NoMemory)?;
        excluded.resize_with(cpus, || AtomicU64::new(0));
        let tracer = Tracer {
            platform,
            cpus,
            limits: Limits { max_instances: limits.max_instances.min(MAX_INSTANCES), ..limits },
            events,
            sections,
            slots: core::array::from_fn(|_| RcuCell::empty()),
            names: core::array::from_fn(|_| RcuCell::empty()),
            bad_cpu: core::array::from_fn(|_| AtomicU64::new(0)),
            cpumask: core::array::from_fn(|_| AtomicU64::new(u64::MAX)),
            excluded,
            hooks: core::array::from_fn(|_| RcuCell::empty()),
            stacked: AtomicU64::new(0),
            toggling: AtomicU64::new(0),
            functions: spin::Once::new(),
            dump_scratch: [
                Mutex::new(ReadScratch::new(cpus).map_err(|_| TracerError::NoMemory)?),
                Mutex::new(ReadScratch::new(cpus).map_err(|_| TracerError::NoMemory)?),
            ],
            registry: Mutex::new(Registry {
                instances: core::array::from_fn(|_| None),
                hooks: core::array::from_fn(|_| None),
                total_bytes: 0,
                retired: Vec::new(),
            }),
            top: spin::Once::new(),
        };
        let created = tracer.create(&mut tracer.registry.lock(), String::new(), TOP_SLOT, top);
        let top = Arc::clone(&created.map_err(TracerError::TopLevel)?.state);
        tracer.top.call_once(|| top);
        Ok(tracer)
    }

    /// Every descriptor, in id order (id = index + 1).
    pub fn events(&self) -> &[&'static EventDescriptor] {
        &self.events
    }

    /// The descriptor with record id `id`.
    pub fn descriptor(&self, id: u16) -> Option<&'static EventDescriptor> {
        self.events.get(usize::from(id).checked_sub(1)?).copied()
    }

    /// Number of CPUs.
    pub fn cpus(&self) -> usize {
        self.cpus
    }

    /// Bytes of ring buffer all instances use, and the limit. Thread context, as
    /// [`Tracer::lookup`]; `WouldDeadlock` elsewhere.
    pub fn memory(&self) -> Result<(usize, usize), crate::Error> {
        self.may_wait()?;
        Ok((self.registry.lock().in_use(), self.limits.max_total_bytes))
    }

    /// The top-level instance. From any context, NMIs included: it takes no lock.
    pub fn top(&self) -> Instance<'_, P> {
        let state = self.top.get().expect("`Tracer::new` sets the top-level instance");
        Instance { tracer: self, state: Arc::clone(state) }
    }

    /// The named instance (a new reference), or `NotFound`. Thread context: it takes
    /// the registry's lock, which control operations hold while they wait for every
    /// CPU, so elsewhere it refuses (`Buffer(WouldDeadlock)`): an interrupt handler
    /// keeps the [`Instance`] it needs.
    pub fn lookup(&self, name: &str) -> Result<Instance<'_, P>, InstanceError> {
        self.may_wait()?;
        let registry = self.registry.lock();
        let state = Arc::clone(registry.named(name).ok_or(InstanceError::NotFound)?);
        Ok(Instance { tracer: self, state })
    }

    /// The named instances (new references), in slot order. Thread context, as
    /// [`Tracer::lookup`]; `WouldDeadlock` elsewhere.
    pub fn instances(&self) -> Result<Vec<Instance<'_, P>>, crate::Error> {
        self.may_wait()?;
        let registry = self.registry.lock();
        let named = registry.named_instances();
        Ok(named.map(|state| Instance { tracer: self, state: Arc::clone(state) }).collect())
    }

    /// The names of the named instances, in slot order. Thread context, as
    /// [`Tracer::lookup`]; `WouldDeadlock` elsewhere.
    pub fn instance_names(&self) -> Result<Vec<String>, crate::Error> {
        self.may_wait()?;
        let registry = self.registry.lock();
        Ok(registry.named_instances().map(|s| s.name.clone()).collect())
    }

    /// `trace_array_get_by_name`: the instance called `name`, created with `config`
    /// if it does not exist (an existing one keeps its own configuration). One
    /// instance of a name, however many callers ask at once. Thread context:
    /// `Buffer(WouldDeadlock)` elsewhere.
    pub fn get_or_create(
        &self,
        name: &str,
        config: InstanceConfig,
    ) -> Result<Instance<'_, P>, InstanceError> {
        if !crate::name::valid(name) {
            return Err(InstanceError::InvalidName);
        }
        self.may_wait()?;
        let mut registry = self.registry.lock();
        if let Some(state) = registry.named(name) {
            return Ok(Instance { tracer: self, state: Arc::clone(state) });
        }
        let slot = registry.free_slot(name, self.limits.max_instances)?;
        self.create(&mut registry, String::from(name), slot, config)
    }

    /// Makes an instance in free slot `slot`, within the memory limit.
    fn create(
        &self,
        registry: &mut Registry<P>,
        name: String,
        slot: usize,
        config: InstanceConfig,
    ) -> Result<Instance<'_, P>, InstanceError> {
        let buffer =
            Config { cpus: self.cpus, bytes_per_cpu: config.bytes_per_cpu, mode: config.mode };
        let words = crate::ring::per_cpu::words_for(config.bytes_per_cpu)?;
        let ring_bytes = usize::try_from(words * 8).map_err(|_| crate::Error::TooBig)?;
        let sets = 1 + usize::from(config.snapshot);
        let wanted = ring_bytes.saturating_mul(self.cpus).saturating_mul(sets);
        if registry.in_use().saturating_add(wanted) > self.limits.max_total_bytes {
            return Err(InstanceError::MemoryLimit);
        }
        let recorder = Arc::new(Recorder::in_sections(
            self.platform.clone(),
            buffer,
            config.snapshot,
            Arc::clone(&self.sections),
        )?);
        Ok(self.install(registry, name, slot, recorder))
    }

    /// `trace_array_destroy`: removes the instance, which must not be referenced by
    /// anyone else (readers, drivers): `Busy` otherwise; `NotFound` for another
    /// tracer's instance. A refusal changes nothing and gives the reference back
    /// ([`DestroyError`]). Thread context: `Buffer(WouldDeadlock)` elsewhere.
    pub fn destroy<'t>(&self, instance: Instance<'t, P>) -> Result<(), DestroyError<'t, P>> {
        let refuse = |error, instance| Err(DestroyError { error, instance });
        if !core::ptr::eq(instance.tracer, self) {
            return refuse(InstanceError::NotFound, instance);
        }
        let slot = instance.state.slot;
        if slot == TOP_SLOT {
            return refuse(InstanceError::TopLevel, instance);
        }
        if let Err(error) = self.may_wait() {
            return refuse(error.into(), instance);
        }
        let mut registry = self.registry.lock();
        // The registry's reference and the caller's: any other is a user.
        if Arc::strong_count(&instance.state) > 2 {
            return refuse(InstanceError::Busy, instance);
        }
        match self.remove(&mut registry, slot) {
            Ok(()) => Ok(()),
            Err(error) => refuse(error.into(), instance),
        }
    }

    /// [`Tracer::destroy`]'s work, once the instance in `slot` may go. A caller that
    /// may not wait is refused before anything changes; the grace periods after
    /// that cannot be refused (a writer that shares the caller's CPU index and is
    /// inside then is waited for).
    fn remove(&self, registry: &mut Registry<P>, slot: usize) -> Result<(), crate::Error> {
        let grace = self.sections.grace(&self.platform)?;
        let hooks = registry.hooks[slot].as_deref().map_or(&[][..], |t| &t[..]);
        for (index, descriptor) in self.events.iter().enumerate() {
            if !is_function_event(descriptor) {
                descriptor.clear_slot(slot);
            } else if hooks.get(index).is_some_and(Option::is_some) {
                // The function tracer's bits are `release_functions`'; the hooks'
                // go here, so that its `set_enabled` finds no trigger to keep for.
                descriptor.set_hooks(slot, false, false, false);
            }
        }
        self.stacked.fetch_and(!(1 << slot), Relaxed);
        self.toggling.fetch_and(!(1 << slot), Relaxed);
        self.release_functions(slot);
        // Each replacement waits for a grace period: no writer still holds the old
        // recorder (or name, or hooks), and none can see this slot's bit in a stale
        // mask.
        self.slots[slot].replace(None, grace);
        self.names[slot].replace(None, grace);
        self.hooks[slot].replace(None, grace);
        // An `enable_event` trigger or command that ran meanwhile may have set the
        // slot's bit again; none can now, and the next instance here starts without.
        for descriptor in self.events.iter().filter(|d| !is_function_event(d)) {
            descriptor.clear_slot(slot);
        }
        registry.hooks[slot] = None;
        if let Some(state) = registry.instances[slot].take() {
            registry.retire(&state.recorder.lock(), None);
        }
        self.sync_keys(registry);
        Ok(())
    }

    /// Runs `act` on the instance's recorder as writers reach it: inside this CPU's
    /// section, without a lock, so from any context. `act` is short: grace periods
    /// wait for it. Where there is no section (a CPU beyond the tracer's, when a
    /// platform reports more CPUs than it built the tracer for; or sections nested
    /// past their depth's bits), under the instance's lock: from thread context
    /// only, there.
    pub(crate) fn with_published<R>(
        &self,
        state: &InstanceState<P>,
        act: impl FnOnce(&Recorder<P>) -> R,
    ) -> R {
        let section = self.sections.enter(&self.platform, self.platform.cpu());
        if let Some(recorder) = section.as_ref().and_then(|s| self.slots[state.slot].read(s.held()))
        {
            return act(recorder);
        }
        drop(section);
        act(&state.recorder.lock())
    }

    /// The instance's recorder as writers reach it, as a reference of its own (see
    /// [`Tracer::with_published`]).
    pub(crate) fn published(&self, state: &InstanceState<P>) -> Arc<Recorder<P>> {
        let section = self.sections.enter(&self.platform, self.platform.cpu());
        let published = section.as_ref().and_then(|s| self.slots[state.slot].get(s.held()));
        drop(section);
        published.unwrap_or_else(|| Arc::clone(&state.recorder.lock()))
    }

    /// `Buffer(WouldDeadlock)` unless the caller may wait: checked before a control
    /// operation takes a lock that the code it interrupted, or a control operation
    /// waiting for the caller's section to end, may hold.
    pub(crate) fn may_wait(&self) -> Result<(), crate::Error> {
        self.sections.may_wait(&self.platform)
    }

    /// Removes the instance called `name` (see [`Tracer::destroy`]).
    pub fn destroy_by_name(&self, name: &str) -> Result<(), InstanceError> {
        Ok(self.destroy(self.lookup(name)?)?)
    }

    /// Creates the instance `name` over `live`, a buffer set built by the caller (over
    /// lent memory, or restored from it), one ring per CPU of the tracer, within the
    /// memory limit. `Busy` if the name is taken.
    pub fn create_over(
        &self,
        name: &str,
        live: Buffer<P>,
    ) -> Result<Instance<'_, P>, InstanceError> {
        if !crate::name::valid(name) {
            return Err(InstanceError::InvalidName);
        }
        if live.cpus() != self.cpus {
            return Err(InstanceError::Buffer(crate::Error::BadCpu));
        }
        self.may_wait()?;
        let mut registry = self.registry.lock();
        let slot = registry.free_slot(name, self.limits.max_instances)?;
        if registry.in_use().saturating_add(live.total_bytes()) > self.limits.max_total_bytes {
            return Err(InstanceError::MemoryLimit);
        }
        let recorder = Arc::new(Recorder::over(live, Arc::clone(&self.sections)));
        Ok(self.install(&mut registry, String::from(name), slot, recorder))
    }

    /// Puts a new instance's recorder in its (empty) slot.
    fn install(
        &self,
        registry: &mut Registry<P>,
        name: String,
        slot: usize,
        recorder: Arc<Recorder<P>>,
    ) -> Instance<'_, P> {
        registry.total_bytes += footprint(&recorder);
        self.bad_cpu[slot].store(0, Relaxed);
        self.store_cpumask(slot, u64::MAX);
        // The slot is empty (destroy emptied it after a grace period, and no event has
        // its bit): installing needs no wait.
        self.names[slot].install(Arc::new(name.clone()));
        self.slots[slot].install(Arc::clone(&recorder));
        // Every instance records the markers written to it; their filters and triggers
        // apply.
        MARKER.set_enabled(slot, true);
        RAW_MARKER.set_enabled(slot, true);
        let recorder = spin::Mutex::new(recorder);
        let printk = crate::sync::AtomicBool::new(true);
        let triggers = spin::Mutex::new(());
        let state = Arc::new(InstanceState { name, slot, recorder, printk, triggers });
        registry.instances[slot] = Some(Arc::clone(&state));
        Instance { tracer: self, state }
    }

    /// Replaces an instance's recorder with the one `change` makes of it, within the
    /// memory limit, which is checked before anything is allocated. The slot switches
    /// to the new recorder, and the old one is dropped only after a grace period,
    /// when no writer can still be in it. Returns whether it replaced it: a spare
    /// added to a recorder that has one (found under the instance's lock) changes
    /// nothing.
    pub(crate) fn replace_recorder(
        &self,
        state: &InstanceState<P>,
        change: Change,
    ) -> Result<bool, InstanceError> {
        self.may_wait()?;
        let mut registry = self.registry.lock();
        let mut current = state.recorder.lock();
        if change == Change::AddSpare && current.snapshot().is_some() {
            return Ok(false);
        }
        // A trigger's swap is refused until the old recorder is unreachable: one after
        // its sets were taken for the new one would not reach it.
        let old = Arc::clone(&current);
        // The current recorder: never replaced yet.
        let _swaps = old.lock_waiting()?;
        let bytes = current.bytes_after(change)?;
        // The old recorder's rings counted as gone (those it shares with the new one
        // are in `bytes`); a reader that keeps them makes them count again, retired.
        let total = (registry.in_use() - footprint(&current)).saturating_add(bytes);
        if total > self.limits.max_total_bytes {
            return Err(InstanceError::MemoryLimit);
        }
        let new = Arc::new(current.changed(change)?);
        debug_assert_eq!(footprint(&new), bytes, "{change:?}: the size found beforehand");
        let copied = new.live().is_recording();
        let grace = self.sections.grace(&self.platform)?;
        // The old recorder is dropped here, after the grace period, unless a reader
        // holds it (then it goes with the reader).
        self.slots[state.slot].replace(Some(Arc::clone(&new)), grace);
        // Recording turned on or off in the old recorder since its state was copied
        // (a `traceoff` trigger, `set_tracing` from an interrupt): none can be now,
        // and the new one takes that last word.
        // (A change to the new one in the same grace period, which a boolean cannot
        // tell from none, gives way to it.)
        let last = old.live().is_recording();
        if last != copied {
            new.live().set_recording(last);
        }
        old.retire();
        *current = Arc::clone(&new);
        registry.retire(&old, Some(&new));
        registry.total_bytes += bytes;
        Ok(true)
    }

    /// Records the return addresses `frames` (innermost first; the first
    /// [`STACK_FRAMES`] kept) as an `ftrace:kernel_stack` event into the top-level
    /// instance, on this CPU, from any context: Linux's `trace_dump_stack`, for a
    /// platform that walks its stacks itself (the kernel records where each CPU its
    /// panic stops was). Nothing while the instance is not recording.
    pub fn record_stack(&self, frames: &[u64]) {
        let mut buf = [0u8; STACK_PAYLOAD];
        let mut encoder = Encoder::new(&mut buf);
        put_stack(&mut encoder, frames);
        self.write_to(TOP_SLOT, &STACK_TRACE, encoder.bytes());
    }

    /// Records `payload` as an event of `descriptor` into the instance in `slot`, on
    /// this CPU (its filter and triggers apply). `false` if its buffer took no record
    /// (recording off, the CPU outside its cpumask, the ring refusing it); an event its
    /// filter rejects counts as taken.
    pub(crate) fn write_to(
        &self,
        slot: usize,
        descriptor: &EventDescriptor,
        payload: &[u8],
    ) -> bool {
        let body = Body { len: payload.len(), payload: &payload, words: None };
        self.record_into(|| 1 << slot, descriptor, body) == 0
    }

    /// Records an event (`body`) into every instance of the mask `mask` gives: one
    /// section, the CPU read once, each record given the payload's encoded words or
    /// filled in place. Instances with a filter or triggers for the event are judged
    /// first ([`Tracer::apply_hooks`]). Returns the instances whose buffer took no
    /// record of an event they admitted (the callers of tracepoints ignore it, and the
    /// compiler drops it).
    #[inline(always)]
    fn record_into<S: Source>(
        &self,
        mask: impl FnOnce() -> u64,
        descriptor: &EventDescriptor,
        source: S,
    ) -> u64 {
        let cpu = self.platform.cpu();
        let Some(section) = self.sections.enter(&self.platform, cpu) else {
            let mask = mask();
            self.refuse_bad_cpu(mask);
            return mask;
        };
        // The mask is read inside the section: destroy clears a slot's bits and waits
        // for a grace period before the slot can hold another instance, so a bit seen
        // here names the instance that set it.
        let mut mask = mask();
        // The writer's context, read once for every instance's record and filter.
        let tag = Tag { id: descriptor.id(), ctx: self.platform.context() };
        // The one check an event without filters or triggers pays.
        let hooked = descriptor.hooked_mask() & mask;
        if hooked != 0 {
            core::hint::cold_path();
            let mut spill = Spill::default();
            let body = source.body(&mut spill);
            match self.apply_hooks(section.held(), cpu, tag, mask, hooked, descriptor, body) {
                Ok(0) => return 0,
                Ok(left) => mask = left,
                Err(refused) => return refused,
            }
        }
        mask & !source.record_each(self, section.held(), cpu, tag, mask).written
    }

    /// [`Tracer::record_into`] when the instances in `hooked` have a filter or
    /// triggers for the event (`tag` written on `cpu`): judges the event in each (on
    /// its values: nothing is encoded before that) and returns the instances of
    /// `mask` left to record it. With triggers to run or stack traces to follow,
    /// records it and runs them (triggers that need no record first, as ftrace's),
    /// and returns `Err` with the instances whose buffer took no record of it.
    #[inline(always)]
    #[allow(clippy::too_many_arguments, reason = "the record path's state, kept in registers")]
    fn apply_hooks(
        &self,
        section: Held<'_>,
        cpu: usize,
        tag: Tag,
        mask: u64,
        hooked: u64,
        descriptor: &EventDescriptor,
        body: Body<'_>,
    ) -> Result<u64, u64> {
        let origin = Origin { context: tag.ctx, cpu };
        // Instances where some event's triggers toggle the event itself: this one's,
        // if they are among them, act first (kept out of the loop below, which the
        // filtered path shares).
        let toggling = self.toggling.load(Relaxed) & mask;
        let toggled = match toggling {
            0 => 0,
            toggling => self.toggle_itself(section, toggling, descriptor, &body, origin),
        };
        let mut record = mask & !hooked;
        let mut rest = hooked;
        while rest != 0 {
            let slot = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            if self.admits(section, slot, descriptor, &body, origin) {
                record |= 1 << slot;
            }
        }
        let triggered = descriptor.triggered_mask() & mask;
        if triggered == 0 {
            if self.stacked.load(Relaxed) & record == 0 {
                return Ok(record);
            }
            let placed = self.record_admitted(section, cpu, tag, record, descriptor, body);
            return Err(record & !placed.written);
        }
        // An instance whose triggers all act without the record fires them first
        // (`traceon` then records the event that turned it on, and `snapshot` swaps
        // before it, so the event starts the new live buffer), as ftrace does; the
        // others' triggers act after the event is recorded (and its stack traces).
        // A marker's triggers act after it, as Linux's: its early bits are never set.
        let early = descriptor.early_mask() & triggered;
        if early != 0 {
            let placed = Placed::default();
            self.fire_triggers(section, cpu, tag, early, descriptor, &body, placed, toggled);
            // As ftrace, which reads the event's soft-disable flag again as it
            // commits: an early `disable_event` on the event itself drops the record
            // that fired it (an early `enable_event` does not bring one in: the
            // record was judged by the state before).
            if descriptor.kind != DescriptorKind::Printk {
                record &= !(early & !descriptor.recording_mask());
            }
        }
        let placed = match record {
            0 => Placed::default(),
            _ => self.record_admitted(section, cpu, tag, record, descriptor, body),
        };
        let refused = record & !placed.written;
        // A marker a buffer did not take is refused there (EBADF), as Linux's, whose
        // marker triggers then do not run.
        let late = match is_written_by_tracer(descriptor) {
            true => triggered & !refused,
            false => triggered & !early,
        };
        self.fire_triggers(section, cpu, tag, late, descriptor, &body, placed, toggled);
        Err(refused)
    }

    /// [`Tracer::record_each`] for the instances that admitted an event with
    /// triggers or a stack trace to follow it (`options/stacktrace`): records it,
    /// then the stack traces.
    #[inline(never)]
    fn record_admitted(
        &self,
        section: Held<'_>,
        cpu: usize,
        tag: Tag,
        mask: u64,
        descriptor: &EventDescriptor,
        body: Body<'_>,
    ) -> Placed {
        let placed = body.record_each(self, section, cpu, tag, mask);
        let stacked = self.stacked.load(Relaxed) & mask;
        if stacked != 0 && takes_stack_traces(descriptor) {
            self.record_stacks(section, Origin { context: tag.ctx, cpu }, stacked);
        }
        placed
    }

    /// Records a stack trace, from the event's caller outward, in each instance of
    /// `mask` (those whose `options/stacktrace` is on and that recorded the event
    /// written at `origin`).
    #[cold]
    #[inline(never)]
    fn record_stacks(&self, section: Held<'_>, origin: Origin, mut mask: u64) {
        mask &= !self.excluded_on(origin.cpu);
        while mask != 0 {
            let slot = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            if let Some(recorder) = self.slots[slot].read(section) {
                FireTarget { tracer: self, section, origin, slot, recorder, set: None }
                    .stack_trace();
            }
        }
    }

    /// Whether the instance in `slot` records a stack trace after `descriptor`'s
    /// records.
    fn stacks(&self, slot: usize, descriptor: &EventDescriptor) -> bool {
        self.stacked.load(Relaxed) & (1 << slot) != 0 && takes_stack_traces(descriptor)
    }

    /// Sets `options/stacktrace` in `slot`'s instance: every tracepoint and `printk!`
    /// site takes the hooked path there while on, where its stack trace is recorded
    /// after it. The mask changes first: a writer on the hooked path that finds the
    /// instance's bit clear records the event without a stack, as without hooks.
    pub(crate) fn set_stack_traces(&self, slot: usize, on: bool) {
        let registry = self.registry.lock();
        let bit = 1 << slot;
        match on {
            true => self.stacked.fetch_or(bit, Relaxed),
            false => self.stacked.fetch_and(!bit, Relaxed),
        };
        let table = registry.hooks[slot].as_deref();
        for (i, event) in self.events.iter().enumerate().filter(|(_, e)| takes_stack_traces(e)) {
            let hooks = table.and_then(|t| t.get(i)?.as_deref());
            let filter = hooks.is_some_and(|h| h.filter.is_some());
            let triggers = hooks.is_some_and(|h| !h.triggers.is_empty());
            event.set_hooks(slot, filter, triggers, on);
        }
    }

    /// Whether `slot`'s instance has `options/stacktrace` on.
    pub(crate) fn stack_traces(&self, slot: usize) -> bool {
        self.stacked.load(Relaxed) & (1 << slot) != 0
    }

    /// Whether the instance in `slot`, which has hooks for the event, records it: the
    /// event is not enabled there for its triggers only (a `printk!` line, written
    /// to one instance, is never enabled), and the filter passes (for the event
    /// written at `origin`).
    #[inline(always)]
    fn admits(
        &self,
        section: Held<'_>,
        slot: usize,
        descriptor: &EventDescriptor,
        body: &Body<'_>,
        origin: Origin,
    ) -> bool {
        if !descriptor.recording_in(slot) && descriptor.kind != DescriptorKind::Printk {
            return false;
        }
        // No hooks (the table changed since the bit was read): recorded as without.
        let filter = self.hooks_in(section, slot, descriptor).and_then(|h| h.filter.as_deref());
        filter.is_none_or(|f| body.passes(f, origin))
    }

    /// Runs, in each instance of `toggling` where the event has triggers, those that
    /// enable or disable the event itself when they follow the record
    /// ([`EventHooks::settle`]): before the record is judged, which then reads the
    /// state they leave. Returns the instances where they ran, whose later pass
    /// leaves them out.
    #[cold]
    #[inline(never)]
    fn toggle_itself(
        &self,
        section: Held<'_>,
        toggling: u64,
        descriptor: &EventDescriptor,
        body: &Body<'_>,
        origin: Origin,
    ) -> u64 {
        let mut toggled = 0;
        let triggered = toggling & descriptor.triggered_mask();
        self.each_hooked(section, triggered, descriptor, |slot, recorder, hooks| {
            if hooks.toggles_itself {
                let target =
                    FireTarget { tracer: self, section, origin, slot, recorder, set: None };
                let toggles = hooks.triggers.iter().filter(|t| t.toggles(descriptor));
                toggles.for_each(|trigger| trigger.fire(body, origin, &target));
                toggled |= 1 << slot;
            }
        });
        toggled
    }

    /// Calls `visit` with each instance of `mask` (its slot, recorder and hooks) that
    /// has hooks for `descriptor`.
    #[inline(always)]
    fn each_hooked<'a>(
        &'a self,
        section: Held<'a>,
        mut mask: u64,
        descriptor: &EventDescriptor,
        mut visit: impl FnMut(usize, &'a Recorder<P>, &'a EventHooks),
    ) {
        while mask != 0 {
            let slot = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            if let (Some(recorder), Some(hooks)) =
                (self.slots[slot].read(section), self.hooks_in(section, slot, descriptor))
            {
                visit(slot, recorder, hooks);
            }
        }
    }

    /// Runs the triggers of the event (`tag` written on `cpu`) in each instance of
    /// `mask`; `placed` says which set took each instance's record (a snapshot
    /// trigger keeps the event in the snapshot). In the instances of `toggled`, those
    /// that enable or disable the event itself ran before the record: not again.
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments, reason = "the record path's state")]
    fn fire_triggers(
        &self,
        section: Held<'_>,
        cpu: usize,
        tag: Tag,
        mask: u64,
        descriptor: &EventDescriptor,
        body: &Body<'_>,
        placed: Placed,
        toggled: u64,
    ) {
        // As ftrace's, triggers run on a CPU outside the instance's cpumask too; only
        // what they record (a stack trace, a note) is kept out.
        let origin = Origin { context: tag.ctx, cpu };
        self.each_hooked(section, mask, descriptor, |slot, recorder, hooks| {
            let set = placed.set(slot);
            let target = FireTarget { tracer: self, section, origin, slot, recorder, set };
            // As ftrace's: those that act once the record is committed (`traceoff`,
            // `stacktrace`) after the others, each group in the list's order.
            let fire = |trigger: &Arc<Trigger>| trigger.fire(body, origin, &target);
            // Those that toggle the event itself may have acted before the record.
            let before = toggled & 1 << slot != 0;
            let triggers =
                hooks.triggers.iter().filter(move |t| !(before && t.toggles(descriptor)));
            match hooks.order {
                Order::PostLast => {
                    triggers.clone().filter(|t| !t.follows_commit()).for_each(fire);
                    triggers.filter(|t| t.follows_commit()).for_each(fire);
                }
                Order::Early | Order::Listed => triggers.for_each(fire),
            }
        });
    }

    /// The hooks of `slot`'s instance for `descriptor`, as writers reach them.
    #[inline(always)]
    fn hooks_in<'a>(
        &'a self,
        section: Held<'a>,
        slot: usize,
        descriptor: &EventDescriptor,
    ) -> Option<&'a EventHooks> {
        let table = self.hooks[slot].read(section)?;
        table.get(self.index_of(descriptor)?)?.as_deref()
    }

    /// Records an event of `len` bytes, tagged `tag`, into each instance of `mask`:
    /// `fill` writes each record's payload. Returns where the records went (for the
    /// event's snapshot triggers; the record path without triggers drops it).
    #[inline(always)]
    fn record_each(
        &self,
        section: Held<'_>,
        cpu: usize,
        tag: Tag,
        mask: u64,
        len: usize,
        fill: impl Fn(&mut RecordWriter<'_>),
    ) -> Placed {
        // A CPU outside the instance's cpumask: not recorded, not counted.
        let mut rest = mask & !self.excluded_on(cpu);
        let mut placed = Placed::default();
        // The slot is counted up while the mask shifts down, not computed from the
        // mask (`trailing_zeros`): the instance's loads (its recorder, its ring, the
        // reservation that waits on them) then need not wait for the mask's, and on
        // the host an enabled event takes 32 ns instead of 36 (`trace/DESIGN.md`,
        // "Performance"). Each slot below costs a test and a predicted branch.
        let mut slot = 0;
        while rest != 0 && slot < MAX_INSTANCES {
            if rest & 1 != 0
                && let Some(recorder) = self.slots[slot].read(section)
            {
                // Refusals and drops are counted by the ring; `Off` is not an error.
                if let Ok(set) = recorder.write_in(section, cpu, tag, len, MAX_EVENT_PAYLOAD, &fill)
                {
                    placed.written |= 1 << slot;
                    placed.second |= (set as u64) << slot;
                }
            }
            rest >>= 1;
            slot += 1;
        }
        placed
    }

    /// The index of `descriptor` in [`Tracer::events`], if it is one of them.
    pub(crate) fn index_of(&self, descriptor: &EventDescriptor) -> Option<usize> {
        let index = usize::from(descriptor.id()).checked_sub(1)?;
        core::ptr::eq(*self.events.get(index)?, descriptor).then_some(index)
    }

    /// Changes the hooks of the instance in `slot`: `edit` gets a copy of its table
    /// (every event's entry) and returns `Err` to change nothing. The new table is
    /// published, the events' bits follow, and the old table goes after a grace
    /// period. Needs a context that may wait (`WouldDeadlock` otherwise).
    pub(crate) fn edit_hooks<R, E: From<crate::Error>>(
        &self,
        slot: usize,
        edit: impl FnOnce(&mut HookTable) -> Result<R, E>,
    ) -> Result<R, E> {
        self.may_wait()?;
        let mut registry = self.registry.lock();
        let grace = self.sections.grace(&self.platform)?;
        let old = registry.hooks[slot].clone();
        let mut table: HookTable =
            old.as_deref().cloned().unwrap_or_else(|| alloc::vec![None; self.events.len()]);
        let result = edit(&mut table)?;
        let changed = |i: usize| {
            let before = old.as_ref().and_then(|t| t[i].as_ref());
            match (before, &table[i]) {
                (Some(a), Some(b)) => !Arc::ptr_eq(a, b),
                (a, b) => a.is_some() != b.is_some(),
            }
        };
        let changed: Vec<usize> = (0..table.len()).filter(|&i| changed(i)).collect();
        for &i in &changed {
            if let Some(hooks) = &mut table[i] {
                Arc::make_mut(hooks).settle(self.events[i]);
            }
        }
        let table = Arc::new(table);
        let toggling = table.iter().flatten().any(|hooks| hooks.toggles_itself);
        if toggling {
            self.toggling.fetch_or(1 << slot, Relaxed);
        }
        // Bits of events that lose every hook are cleared before the table changes,
        // those of events that keep or gain some set after: a writer that sees a bit
        // finds the hooks or none, and records as without.
        for &i in &changed {
            if table[i].is_none() {
                self.events[i].set_hooks(slot, false, false, self.stacks(slot, self.events[i]));
            }
        }
        self.hooks[slot].replace(Some(Arc::clone(&table)), grace);
        if !toggling {
            self.toggling.fetch_and(!(1 << slot), Relaxed);
        }
        for &i in &changed {
            // A marker's triggers act after it, as Linux's.
            let early = table[i].as_ref().is_some_and(|hooks| hooks.fire_early())
                && !is_written_by_tracer(self.events[i]);
            self.events[i].set_early(slot, early);
            if let Some(hooks) = &table[i] {
                let (filter, triggers) = (hooks.filter.is_some(), !hooks.triggers.is_empty());
                self.events[i].set_hooks(slot, filter, triggers, self.stacks(slot, self.events[i]));
            }
        }
        registry.hooks[slot] = Some(table);
        self.sync_keys(&registry);
        Ok(result)
    }

    /// The hooks of `slot`'s instance for the event at `index`.
    pub(crate) fn hooks_of(&self, slot: usize, index: usize) -> Option<Arc<EventHooks>> {
        // As `with_published`: with no section, under the registry's lock.
        let section = self.sections.enter(&self.platform, self.platform.cpu());
        match section {
            Some(section) => self.hooks[slot].read(section.held())?.get(index)?.clone(),
            None => self.registry.lock().hooks[slot].as_ref()?.get(index)?.clone(),
        }
    }

    /// Whether the event at `index` is in ftrace's soft mode in `slot`'s instance: it
    /// has triggers there, or a trigger or function command there enables or
    /// disables it.
    pub(crate) fn soft_mode(&self, slot: usize, index: usize) -> bool {
        let registry = self.registry.lock();
        let event = self.events[index];
        let table = registry.hooks[slot].iter().flat_map(|table| table.iter().enumerate());
        table
            .filter_map(|(i, hooks)| Some((i, hooks.as_deref()?)))
            .any(|(i, hooks)| (i == index && !hooks.triggers.is_empty()) || hooks.targets(event))
            || self.commands_target(Some(slot), event)
    }

    #[cold]
    fn refuse_bad_cpu(&self, mut mask: u64) {
        while mask != 0 {
            let slot = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            self.bad_cpu[slot].fetch_add(1, Relaxed);
        }
    }

    /// Calls `visit` with a view of every instance, in slot order, without taking any
    /// lock that could be held: it reads the slots inside the calling CPU's section
    /// (for the panic path, where the registry's lock may be held by a stopped CPU).
    pub fn visit_instances(&self, mut visit: impl FnMut(InstanceView<'_, P>)) {
        let Some(section) = self.sections.enter(&self.platform, self.platform.cpu()) else {
            return;
        };
        for slot in 0..MAX_INSTANCES {
            if let (Some(recorder), Some(name)) =
                (self.slots[slot].read(section.held()), self.names[slot].read(section.held()))
            {
                visit(InstanceView { tracer: self, slot, name, recorder });
            }
        }
    }

    /// Turns recording off in every instance (the panic path; lock-free like
    /// [`Tracer::visit_instances`]).
    pub fn stop_all(&self) {
        self.visit_instances(|view| view.recorder.live().set_recording(false));
    }

    /// Lets writes into every instance's live buffer in again, whatever readers hold
    /// them off (the panic path, before it records where each CPU was: a live dump
    /// or a `trace` read it stopped never ends; lock-free like
    /// [`Tracer::visit_instances`]). See [`Buffer::release_holds`].
    pub fn release_holds(&self) {
        self.visit_instances(|view| view.recorder.live().release_holds());
    }

    /// Seals this CPU's rings for a panic, in every instance's live set and snapshot:
    /// the writes in progress on this CPU, which the caller interrupted and will
    /// never return to, are left out, and what was recorded after they began is
    /// published (without it, a stopped write hides its CPU's later records, the
    /// panic's own among them). Call it on the panicking CPU, and on each CPU the
    /// panic stops (from the code that stops it), once before recording what the
    /// panic records there and once after: a seal publishes only what was recorded
    /// before it, and one that cannot read a stopped write's words leaves out every
    /// word since the last publication. Lock-free like [`Tracer::visit_instances`].
    /// Returns how many writes were left out (words a ring's seal could not read
    /// count as one there; `RingStats::unreadable` has their size).
    ///
    /// Only for code that never returns to what it interrupted: a write of this CPU
    /// that resumed after a seal could store into words the seal published. Its
    /// second half needs [`Platform::PROMISE`]: without it a ring takes one writer at
    /// a time, and the write a seal stopped keeps it, so what the panic records
    /// there is dropped and counted (and another caller sharing the index must not
    /// be writing: its write would be taken for a stopped one).
    pub fn seal_cpu(&self) -> u64 {
        let cpu = self.platform.cpu();
        let known = |id| self.descriptor(id).is_some();
        let mut stopped = 0;
        self.visit_instances(|view| {
            stopped += view.recorder.live().seal_cpu(cpu, known);
            stopped += view.recorder.snapshot().map_or(0, |set| set.seal_cpu(cpu, known));
        });
        stopped
    }

    /// Events written into `slot` with no section to enter (see `Tracer::bad_cpu`'s
    /// field).
    pub(crate) fn bad_cpu(&self, slot: usize) -> u64 {
        self.bad_cpu[slot].load(Relaxed)
    }

    /// Sets which CPUs `slot`'s instance records.
    pub(crate) fn set_cpumask(&self, slot: usize, mask: u64) {
        {
            let _registry = self.registry.lock();
            self.store_cpumask(slot, mask);
        }
        self.settle();
    }

    /// The slots whose cpumask leaves CPU `cpu` out.
    #[inline(always)]
    fn excluded_on(&self, cpu: usize) -> u64 {
        self.excluded.get(cpu).map_or(0, |w| w.load(Relaxed))
    }

    /// Stores `slot`'s cpumask and the per-CPU words writers read. With the registry
    /// locked: two stores into one slot do not interleave their per-CPU words.
    fn store_cpumask(&self, slot: usize, mask: u64) {
        self.cpumask[slot].store(mask, Relaxed);
        for (cpu, word) in self.excluded.iter().enumerate() {
            if cpu < 64 && mask & (1 << cpu) == 0 {
                word.fetch_or(1 << slot, Relaxed);
            } else {
                word.fetch_and(!(1 << slot), Relaxed);
            }
        }
    }

    /// Which CPUs `slot`'s instance records.
    pub(crate) fn cpumask(&self, slot: usize) -> u64 {
        self.cpumask[slot].load(Relaxed)
    }

    /// Forgets `slot`'s refused events (the instance was cleared).
    pub(crate) fn reset_bad_cpu(&self, slot: usize) {
        self.bad_cpu[slot].store(0, Relaxed);
    }

    /// Waits for a grace period if the caller may wait: after it, no writer acts on
    /// a state changed before the call. From a context that may not wait, the change
    /// reaches writers that start after it.
    pub(crate) fn settle(&self) {
        let _ = self.sections.synchronize(&self.platform);
    }
}

impl<P: Platform> Dispatch for Tracer<P> {
    #[inline]
    fn record_words(
        &self,
        descriptor: &EventDescriptor,
        len: usize,
        payload: &dyn Payload,
        words: Option<&Inline>,
    ) {
        self.record_into(|| descriptor.enabled_mask(), descriptor, Body { len, payload, words });
    }

    #[inline]
    fn record_pair(&self, descriptor: &EventDescriptor, len: usize, lo: u64, hi: u64) {
        let words = Words { len, words: [lo, hi] };
        self.record_into(|| descriptor.enabled_mask(), descriptor, words);
    }

    #[inline]
    fn record_word(&self, descriptor: &EventDescriptor, len: usize, word: u64) {
        let words = Words { len, words: [word] };
        self.record_into(|| descriptor.enabled_mask(), descriptor, words);
    }
}

/// An event's payload as [`Tracer::record_into`] takes it: a [`Body`], or a small
/// payload's [`Words`] by value. Each kind runs the record loop itself, with a fill
/// of its own: one loop whose fill matches on the kind cost 3 to 44 instructions per
/// event (`benches/count.sh`, 2026-11-27).
trait Source: Copy {
    /// The payload as a [`Body`] (for filters and triggers); a payload passed by
    /// value is copied into `spill`.
    fn body<'a>(&'a self, spill: &'a mut Spill) -> Body<'a>;

    /// Records the payload, tagged `tag`, into each instance of `mask`
    /// ([`Tracer::record_each`]), and returns where the records went.
    fn record_each<P: Platform>(
        &self,
        tracer: &Tracer<P>,
        section: Held<'_>,
        cpu: usize,
        tag: Tag,
        mask: u64,
    ) -> Placed;
}

impl Source for Body<'_> {
    #[inline(always)]
    fn body<'a>(&'a self, _spill: &'a mut Spill) -> Body<'a> {
        *self
    }

    #[inline(always)]
    fn record_each<P: Platform>(
        &self,
        tracer: &Tracer<P>,
        section: Held<'_>,
        cpu: usize,
        tag: Tag,
        mask: u64,
    ) -> Placed {
        // Two calls, so that the copy of encoded words keeps its writer in registers.
        match self.words {
            Some(words) => {
                let fill = |w: &mut RecordWriter<'_>| w.put_words(words);
                tracer.record_each(section, cpu, tag, mask, self.len, fill)
            }
            None => {
                let fill = |w: &mut RecordWriter<'_>| self.payload.write(w);
                tracer.record_each(section, cpu, tag, mask, self.len, fill)
            }
        }
    }
}

impl<const N: usize> Source for Words<N> {
    #[inline(always)]
    fn body<'a>(&'a self, spill: &'a mut Spill) -> Body<'a> {
        Words::body(self, spill)
    }

    #[inline(always)]
    fn record_each<P: Platform>(
        &self,
        tracer: &Tracer<P>,
        section: Held<'_>,
        cpu: usize,
        tag: Tag,
        mask: u64,
    ) -> Placed {
        let words = self.words.map(u64::to_le_bytes);
        let fill = |w: &mut RecordWriter<'_>| w.put_words(&words);
        // The length brought within its bounds (a no-op for a valid one): the compiler
        // then knows the record's size, and stores its words without a test.
        const { assert!(N >= 1) };
        let len = (self.len.wrapping_sub(1) & 7) + (8 * N - 7);
        tracer.record_each(section, cpu, tag, mask, len, fill)
    }
}

/// Makes `tracer` the destination of every tracepoint ([`emit!`](crate::emit),
/// [`log`](crate::event::log)). Once per boot: a second call fails and changes nothing.
pub fn install<P: Platform>(tracer: &'static Tracer<P>) -> Result<(), &'static str> {
    crate::event::dispatch::install(tracer)
}

impl<P: Platform> Tracer<P> {
    /// Runs `act` on each instance of `mask` as a trigger's target, from the caller's
    /// context, in this CPU's section: the mask is read inside it (destroy clears a
    /// slot's bits before the grace period that frees the slot, so a bit seen there
    /// names the instance that set it), less the instances whose cpumask leaves this
    /// CPU out if `cpumask` says so (what a target records is kept out either way).
    fn for_each_target(
        &self,
        cpumask: bool,
        mask: impl FnOnce() -> u64,
        mut act: impl FnMut(&FireTarget<'_, P>),
    ) {
        let cpu = self.platform.cpu();
        let Some(section) = self.sections.enter(&self.platform, cpu) else { return };
        let excluded = if cpumask { self.excluded_on(cpu) } else { 0 };
        let mut mask = mask() & !excluded;
        let origin = Origin { context: self.platform.context(), cpu };
        while mask != 0 {
            let slot = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            if let Some(recorder) = self.slots[slot].read(section.held()) {
                act(&FireTarget {
                    tracer: self,
                    section: section.held(),
                    origin,
                    slot,
                    recorder,
                    set: None,
                });
            }
        }
    }
}

/// Where an event's records went ([`Tracer::record_each`]): the slots whose record
/// was written, and of those the ones whose recorder's second set took it.
#[derive(Clone, Copy, Default)]
struct Placed {
    written: u64,
    second: u64,
}

impl Placed {
    /// The set `slot`'s record went into, if it was written.
    fn set(self, slot: usize) -> Option<usize> {
        (self.written >> slot & 1 != 0).then_some((self.second >> slot & 1) as usize)
    }
}

/// What a trigger fired in the instance in `slot` acts on, from the event's context.
struct FireTarget<'a, P> {
    tracer: &'a Tracer<P>,
    section: Held<'a>,
    /// The event's CPU and context, which the stack trace's record keeps too.
    origin: Origin,
    slot: usize,
    recorder: &'a Recorder<P>,
    /// The recorder's set that took the event's record, if it was written: what a
    /// snapshot must hold.
    set: Option<usize>,
}

impl<P: Platform> FireTarget<'_, P> {
    /// Whether the instance's cpumask leaves the event's CPU out: nothing is recorded.
    fn excluded(&self) -> bool {
        self.tracer.excluded_on(self.origin.cpu) & (1 << self.slot) != 0
    }
}

impl<P: Platform> Target for FireTarget<'_, P> {
    fn tracing(&self) -> bool {
        self.recorder.live().is_recording()
    }

    fn set_tracing(&self, on: bool) {
        self.recorder.live().set_recording(on);
    }

    fn snapshot(&self) -> Result<(), crate::Error> {
        match self.set {
            Some(set) => self.recorder.swap_nowait_keeping(set),
            None => self.recorder.swap_nowait(),
        }
    }

    fn snapshot_kept(&self) -> bool {
        self.tracer.irqsoff_owner() == Some(self.slot)
    }

    fn note(&self, text: &str) {
        if self.excluded() {
            return;
        }
        let len = 2 + text.len();
        let tag = Tag { id: MARKER.id(), ctx: self.origin.context };
        let fill = |w: &mut RecordWriter<'_>| w.put_str(text);
        let _ = self.recorder.write_in(self.section, self.origin.cpu, tag, len, len, fill);
    }

    fn set_hists_paused(&self, event: &EventDescriptor, paused: bool) {
        let hooks = self.tracer.hooks_in(self.section, self.slot, event);
        let triggers = hooks.iter().flat_map(|hooks| &hooks.triggers);
        triggers.filter_map(|t| t.hist()).for_each(|hist| hist.set_paused(paused));
    }

    fn now(&self) -> u64 {
        self.recorder.live().clock().now(&self.tracer.platform)
    }

    fn stack_frames(&self, frames: &mut [u64]) {
        let depth = self.tracer.platform.stack_trace(frames).min(frames.len());
        frames[depth..].fill(0);
    }

    fn stack_trace(&self) {
        if self.excluded() {
            return;
        }
        let mut frames = [0u64; STACK_FRAMES];
        let depth = self.tracer.platform.stack_trace(&mut frames).min(STACK_FRAMES);
        let len = STACK_PAYLOAD;
        let fill = |w: &mut RecordWriter<'_>| put_stack(w, &frames[..depth]);
        let tag = Tag { id: STACK_TRACE.id(), ctx: self.origin.context };
        let _ = self.recorder.write_in(self.section, self.origin.cpu, tag, len, len, fill);
    }

    fn dump(&self, this_cpu: bool) -> bool {
        self.tracer.platform.dump(this_cpu.then_some(self.origin.cpu))
    }

    fn event_enabled(&self, event: &EventDescriptor) -> bool {
        event.recording_in(self.slot)
    }

    fn set_event(&self, event: &EventDescriptor, on: bool) {
        event.set_enabled(self.slot, on);
    }
}

/// An instance as [`Tracer::visit_instances`] shows it.
pub struct InstanceView<'a, P> {
    pub(crate) tracer: &'a Tracer<P>,
    pub(crate) slot: usize,
    /// The instance's name (empty: the top-level instance).
    pub name: &'a str,
    /// Its recorder.
    pub recorder: &'a Recorder<P>,
}

impl<P: Platform> InstanceView<'_, P> {
    /// CPU `cpu`'s statistics, as [`crate::Instance::stats`] gives them.
    pub fn stats(&self, cpu: usize) -> Result<crate::ring::RingStats, crate::Error> {
        let mut stats = self.recorder.live().stats(cpu)?;
        if cpu == 0 {
            let bad_cpu = self.tracer.bad_cpu(self.slot);
            stats.refused.bad_cpu += bad_cpu;
            stats.written += bad_cpu;
            stats.dropped += bad_cpu;
        }
        Ok(stats)
    }
}

/// Why a tracer could not be built.
#[derive(Clone, Copy, Debug)]
pub enum TracerError {
    /// Out of memory.
    NoMemory,
    /// More descriptors than record ids.
    TooManyEvents,
    /// This descriptor's format string is malformed or names a missing field.
    BadFormat(&'static EventDescriptor),
    /// Another tracepoint has this one's system and name (two `event!`s of one name,
    /// in two crates, say): tracefs, filters and the dump would reach one of them.
    /// (`printk!` sites share `ftrace:bprint`, as Linux's do.)
    DuplicateEvent(&'static EventDescriptor),
    /// The top-level instance could not be created.
    TopLevel(InstanceError),
    /// The build's `emit!` sites are NOPs that only [`Platform::set_key`] arms (trace's
    /// `static-keys` feature, which Cargo turns on for the whole build if any crate
    /// asks for it), but the platform's [`Platform::has_keys`] says it cannot patch
    /// them: no event could ever be recorded.
    KeysNotPatched,
}

impl core::error::Error for TracerError {}

impl core::fmt::Display for TracerError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            TracerError::NoMemory => f.write_str("out of memory"),
            TracerError::TooManyEvents => f.write_str("too many event descriptors"),
            TracerError::BadFormat(d) => {
                write!(f, "event {}:{} has a bad format string", d.system, d.name)
            }
            TracerError::DuplicateEvent(d) => write!(
                f,
                "event {}:{} is defined twice (an event's system and name name one event)",
                d.system, d.name
            ),
            TracerError::TopLevel(e) => write!(f, "top-level instance: {e}"),
            TracerError::KeysNotPatched => f.write_str(
                "trace's static-keys feature is on but the platform cannot patch sites \
                 (has_keys is false): every emit! would stay a NOP",
            ),
        }
    }
}
