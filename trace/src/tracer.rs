//! The tracer: every event descriptor, numbered at boot, and the instances. It
//! routes each tracepoint's record to the instances that enabled it.
//!
//! Writers find an instance's recorder through a per-CPU table of slots, each slot
//! behind its own reader-writer spin lock. A writer only ever `try_read`s its own
//! CPU's slot, so the fast path writes no cache line shared with other CPUs and never
//! spins; control operations (create, destroy, resize, snapshot allocation) take the
//! slot of every CPU for writing, which waits out the writers inside it. See
//! DESIGN.md, "Instances".

extern crate alloc;

use crate::buffer::Config;
use crate::dispatch::Dispatch;
use crate::event::{DescriptorKind, EventDescriptor};
use crate::field::{Field, FieldKind};
use crate::instance::{Instance, InstanceConfig, InstanceError, InstanceState, valid_name};
use crate::platform::Platform;
use crate::recorder::Recorder;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
use spin::{Mutex, RwLock};

/// Most instances, the top-level one included (one bit each in an event's mask).
pub const MAX_INSTANCES: usize = 64;
/// Slot of the top-level instance.
pub(crate) const TOP_SLOT: usize = 0;

/// The `ftrace:print` event that `trace_marker` writes.
pub static MARKER: EventDescriptor = EventDescriptor::new(
    "ftrace",
    "print",
    "{buf}",
    &[Field { name: "buf", kind: FieldKind::Str }],
    DescriptorKind::Event,
);

/// Descriptors the tracer provides itself, besides those found in the section.
fn builtin() -> [&'static EventDescriptor; 2] {
    [&MARKER, &crate::log::LOG_MESSAGE]
}

/// Limits on what instances may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most instances, the top-level one included (at most [`MAX_INSTANCES`]).
    pub max_instances: usize,
    /// Most bytes of ring buffer across all instances and their snapshots.
    pub max_total_bytes: usize,
}

/// What a CPU's writers see of an instance slot: the recorder, and the instance's
/// name (for a dump taken when the registry's lock cannot be had).
enum Slot<P> {
    Empty,
    Live(Arc<Recorder<P>>, Arc<str>),
}

/// One CPU's view of the instances, and its count of events that found their
/// instance's slot being changed. Cache-line aligned: only its CPU's writers touch it.
#[repr(align(64))]
struct CpuTable<P> {
    slots: [RwLock<Slot<P>>; MAX_INSTANCES],
    missed: [AtomicU64; MAX_INSTANCES],
}

/// The control side: which slots hold which instance, and the memory they use.
struct Registry<P> {
    instances: [Option<Arc<InstanceState<P>>>; MAX_INSTANCES],
    total_bytes: usize,
}

/// The tracer: descriptors and instances. Install it with [`crate::install`] so
/// tracepoints reach it.
pub struct Tracer<P> {
    platform: P,
    cpus: usize,
    limits: Limits,
    events: Vec<&'static EventDescriptor>,
    tables: Vec<CpuTable<P>>,
    registry: Mutex<Registry<P>>,
}

/// Bytes a recorder's buffers take.
fn footprint<P: Platform>(recorder: &Recorder<P>) -> usize {
    let live = recorder.live();
    let sets = if recorder.snapshot().is_some() { 2 } else { 1 };
    live.bytes_per_cpu() * live.cpus() * sets
}

impl<P: Platform + Clone + Send + Sync> Tracer<P> {
    /// A tracer for `cpus` CPUs over `descriptors` (the linker section's contents; the
    /// tracer adds its own), with a top-level instance built from `top`. Numbers every
    /// descriptor: ids follow the order of `system:name`, so they are stable for a
    /// given set of descriptors. Descriptors with a malformed format string are
    /// refused (`Err` names the first).
    pub fn new(
        platform: P,
        cpus: usize,
        descriptors: &[&'static EventDescriptor],
        limits: Limits,
        top: InstanceConfig,
    ) -> Result<Self, TracerError> {
        let mut events: Vec<&'static EventDescriptor> = Vec::new();
        events.try_reserve_exact(descriptors.len() + 2).map_err(|_| TracerError::NoMemory)?;
        events.extend(descriptors.iter().copied().chain(builtin()));
        events.sort_by(|a, b| (a.system, a.name, a.format).cmp(&(b.system, b.name, b.format)));
        // A descriptor may be listed twice (a section seen through two symbols).
        events.dedup_by(|a, b| core::ptr::eq(*a, *b));
        if events.len() > usize::from(crate::record::MAX_EVENT_ID) {
            return Err(TracerError::TooManyEvents);
        }
        for (i, descriptor) in events.iter().enumerate() {
            if descriptor.kind == DescriptorKind::Event {
                crate::format::validate(descriptor.format, descriptor.fields)
                    .map_err(|_| TracerError::BadFormat(descriptor))?;
            }
            descriptor.set_id(i as u16 + 1);
        }
        let mut tables = Vec::new();
        tables.try_reserve_exact(cpus).map_err(|_| TracerError::NoMemory)?;
        for _ in 0..cpus {
            tables.push(CpuTable {
                slots: core::array::from_fn(|_| RwLock::new(Slot::Empty)),
                missed: core::array::from_fn(|_| AtomicU64::new(0)),
            });
        }
        let tracer = Tracer {
            platform,
            cpus,
            limits: Limits { max_instances: limits.max_instances.min(MAX_INSTANCES), ..limits },
            events,
            tables,
            registry: Mutex::new(Registry {
                instances: core::array::from_fn(|_| None),
                total_bytes: 0,
            }),
        };
        tracer.create(String::new(), TOP_SLOT, top).map_err(TracerError::TopLevel)?;
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

    /// Bytes of ring buffer all instances use, and the limit.
    pub fn memory(&self) -> (usize, usize) {
        (self.registry.lock().total_bytes, self.limits.max_total_bytes)
    }

    /// The top-level instance.
    pub fn top(&self) -> Instance<'_, P> {
        let state = self.registry.lock().instances[TOP_SLOT]
            .clone()
            .expect("the top-level instance always exists");
        Instance { tracer: self, state }
    }

    /// The named instance, if it exists (a new reference).
    pub fn lookup(&self, name: &str) -> Option<Instance<'_, P>> {
        let registry = self.registry.lock();
        let state =
            registry.instances.iter().flatten().find(|s| s.slot != TOP_SLOT && s.name == name)?;
        Some(Instance { tracer: self, state: Arc::clone(state) })
    }

    /// The names of the named instances, in slot order.
    pub fn instance_names(&self) -> Vec<String> {
        let registry = self.registry.lock();
        registry
            .instances
            .iter()
            .flatten()
            .filter(|s| s.slot != TOP_SLOT)
            .map(|s| s.name.clone())
            .collect()
    }

    /// `trace_array_get_by_name`: the instance called `name`, created with `config`
    /// if it does not exist (an existing one keeps its own configuration).
    pub fn get_or_create(
        &self,
        name: &str,
        config: InstanceConfig,
    ) -> Result<Instance<'_, P>, InstanceError> {
        if !valid_name(name) {
            return Err(InstanceError::InvalidName);
        }
        if let Some(instance) = self.lookup(name) {
            return Ok(instance);
        }
        let slot = {
            let registry = self.registry.lock();
            if registry.instances.iter().flatten().count() >= self.limits.max_instances {
                return Err(InstanceError::TooManyInstances);
            }
            registry
                .instances
                .iter()
                .position(Option::is_none)
                .ok_or(InstanceError::TooManyInstances)?
        };
        self.create(String::from(name), slot, config)
    }

    /// `trace_array_destroy`: removes the instance, which must not be referenced by
    /// anyone else (readers, drivers): `Busy` otherwise, and nothing changes.
    pub fn destroy(&self, instance: Instance<'_, P>) -> Result<(), InstanceError> {
        let slot = instance.state.slot;
        if slot == TOP_SLOT {
            return Err(InstanceError::TopLevel);
        }
        let mut registry = self.registry.lock();
        // The registry's reference and the caller's: any other is a user.
        if Arc::strong_count(&instance.state) > 2 {
            return Err(InstanceError::Busy);
        }
        for descriptor in &self.events {
            descriptor.set_enabled(slot, false);
        }
        for table in &self.tables {
            *table.slots[slot].write() = Slot::Empty;
        }
        if let Some(state) = registry.instances[slot].take() {
            registry.total_bytes -= footprint(&state.recorder.lock());
        }
        Ok(())
    }

    /// Removes the instance called `name` (see [`Tracer::destroy`]).
    pub fn destroy_by_name(&self, name: &str) -> Result<(), InstanceError> {
        self.destroy(self.lookup(name).ok_or(InstanceError::NotFound)?)
    }

    fn create(
        &self,
        name: String,
        slot: usize,
        config: InstanceConfig,
    ) -> Result<Instance<'_, P>, InstanceError> {
        let buffer =
            Config { cpus: self.cpus, bytes_per_cpu: config.bytes_per_cpu, mode: config.mode };
        let mut registry = self.registry.lock();
        let ring_bytes = crate::ring::words_for(config.bytes_per_cpu)? as usize * 8;
        let wanted = ring_bytes * self.cpus * (1 + usize::from(config.snapshot));
        if registry.total_bytes + wanted > self.limits.max_total_bytes {
            return Err(InstanceError::MemoryLimit);
        }
        if registry.instances[slot].is_some() {
            return Err(InstanceError::Busy);
        }
        let recorder = Arc::new(Recorder::new(self.platform.clone(), buffer, config.snapshot)?);
        registry.total_bytes += footprint(&recorder);
        let shared_name: Arc<str> = Arc::from(name.as_str());
        for table in &self.tables {
            table.missed[slot].store(0, Relaxed);
            *table.slots[slot].write() =
                Slot::Live(Arc::clone(&recorder), Arc::clone(&shared_name));
        }
        let state = Arc::new(InstanceState { name, slot, recorder: spin::Mutex::new(recorder) });
        registry.instances[slot] = Some(Arc::clone(&state));
        Ok(Instance { tracer: self, state })
    }

    /// Replaces an instance's recorder with `build(old)`, within the memory limit.
    /// Each CPU's slot switches under its write lock, so no writer is in the old
    /// recorder's slot when it changes.
    pub(crate) fn replace_recorder(
        &self,
        state: &InstanceState<P>,
        build: impl FnOnce(&Recorder<P>) -> Result<Recorder<P>, crate::Error>,
    ) -> Result<(), InstanceError> {
        let mut registry = self.registry.lock();
        let mut current = state.recorder.lock();
        let new = Arc::new(build(&current)?);
        let total = registry.total_bytes - footprint(&current) + footprint(&new);
        if total > self.limits.max_total_bytes {
            return Err(InstanceError::MemoryLimit);
        }
        let name: Arc<str> = Arc::from(state.name.as_str());
        for table in &self.tables {
            *table.slots[state.slot].write() = Slot::Live(Arc::clone(&new), Arc::clone(&name));
        }
        *current = new;
        registry.total_bytes = total;
        Ok(())
    }

    /// Records `payload` as event `id` into the instance in `slot`, on this CPU.
    pub(crate) fn write_to(&self, slot: usize, id: u16, payload: &[u8]) {
        let Some(table) = self.tables.get(self.platform.cpu()) else { return };
        match table.slots[slot].try_read() {
            Some(guard) => {
                if let Slot::Live(recorder, _) = &*guard {
                    // Errors are counted by the ring (dropped) or mean recording off.
                    let _ = recorder.write(id, payload);
                }
            }
            // The slot is being switched by a control operation (possibly one this
            // context interrupted): the event is counted as missed, never waited on.
            None => {
                table.missed[slot].fetch_add(1, Relaxed);
            }
        }
    }

    /// Calls `visit` with a view of every instance, in slot order, without taking any
    /// lock that could be held: it reads the calling CPU's own slot table (for the
    /// panic path, where the registry's lock may be held by a stopped CPU). An
    /// instance whose slot is being switched at that moment is left out.
    pub fn visit_instances(&self, mut visit: impl FnMut(InstanceView<'_, P>)) {
        let Some(table) = self.tables.get(self.platform.cpu()) else { return };
        for (slot, entry) in table.slots.iter().enumerate() {
            if let Some(guard) = entry.try_read()
                && let Slot::Live(recorder, name) = &*guard
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

    /// Events CPU `cpu` could not record into `slot` because it was being switched.
    pub(crate) fn missed(&self, cpu: usize, slot: usize) -> u64 {
        self.tables.get(cpu).map_or(0, |t| t.missed[slot].load(Relaxed))
    }

    pub(crate) fn reset_missed(&self, slot: usize) {
        for table in &self.tables {
            table.missed[slot].store(0, Relaxed);
        }
    }
}

impl<P: Platform + Clone + Send + Sync> Dispatch for Tracer<P> {
    #[inline]
    fn record(&self, descriptor: &EventDescriptor, payload: &[u8]) {
        let mut mask = descriptor.enabled_mask();
        let id = descriptor.id();
        while mask != 0 {
            let slot = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            self.write_to(slot, id, payload);
        }
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

impl<P: Platform + Clone + Send + Sync> InstanceView<'_, P> {
    /// CPU `cpu`'s statistics, as [`crate::Instance::stats`] gives them.
    pub fn stats(&self, cpu: usize) -> Result<crate::RingStats, crate::Error> {
        let mut stats = self.recorder.live().stats(cpu)?;
        let missed = self.tracer.missed(cpu, self.slot);
        stats.written += missed;
        stats.dropped += missed;
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
    /// The top-level instance could not be created.
    TopLevel(InstanceError),
}

impl core::fmt::Display for TracerError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            TracerError::NoMemory => f.write_str("out of memory"),
            TracerError::TooManyEvents => f.write_str("too many event descriptors"),
            TracerError::BadFormat(d) => {
                write!(f, "event {}:{} has a bad format string", d.system, d.name)
            }
            TracerError::TopLevel(e) => write!(f, "top-level instance: {e}"),
        }
    }
}
