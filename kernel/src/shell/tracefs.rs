//! The tracing tree the shell shows, with ftrace's files and meanings
//! (Documentation/trace/ftrace.rst): the top-level instance at `/`, each named
//! instance at `/instances/NAME`, the same files in each.

use crate::tracing::functions::{self, FunctionError, Kind, List};
use crate::tracing::{self, KernelPlatform};
use alloc::collections::VecDeque;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::{self, Write};
use shell_core::path::normalize;
use shell_core::tree::{self, TraceOption, Tree};
use trace::event::inject::InjectError;
use trace::ring::WriteError;
use trace::text::Layout;
use trace::{
    Clock, Instance, InstanceConfig, InstanceError, Mode, Tracer, event::DescriptorKind,
    event::EventDescriptor, tracer::FunctionError as TracerFunctionError, tracer::HookError,
    tracer::TriggerError, tracer::TriggerReason, tracer::is_function_event, tracer::is_settable,
};

/// A file-system error, printed as the errno text a Linux shell would show.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsError {
    /// ENOENT.
    NotFound,
    /// ENOTDIR.
    NotDir,
    /// EISDIR.
    IsDir,
    /// EINVAL.
    Invalid,
    /// EINVAL, with the rule the value broke.
    Rule(&'static str),
    /// EINVAL for an instance name, with the rule for names.
    InvalidName,
    /// EINVAL for the name of one of the persistent region's instances, which
    /// `mkdir` does not make.
    ReservedName,
    /// EINVAL for a filter or trigger: the position and the reason
    /// (`HookError::Filter` or `HookError::Trigger`).
    Parse(HookError),
    /// EINVAL for an `inject` line: the position and the reason.
    Inject(InjectError),
    /// ENOMEM: the rings would exceed the tracer's memory limit (KB in use, KB
    /// allowed).
    MemoryLimit(usize, usize),
    /// ENOMEM: the kernel heap had no room for the rings (heap KB in use, heap KB,
    /// ring KB in use, ring KB allowed).
    HeapFull(usize, usize, usize, usize),
    /// EBUSY, with what holds the file.
    Busy(&'static str),
    /// EACCES on a file that cannot be written.
    ReadOnly,
    /// EACCES on a file that cannot be read.
    WriteOnly,
    /// EEXIST.
    Exists,
    /// EEXIST for a trigger the event has already, as Linux's registration refuses
    /// it: the position and the rule.
    Duplicate(TriggerError),
    /// ENOSPC (no instance slot left).
    NoSpace,
    /// EPERM, with the rule (only `instances/NAME` is made or removed).
    NotPermitted(&'static str),
    /// Tracing did not start at boot.
    NoTracer,
    /// EACCES: the instance holds the previous boot's trace and is read-only.
    PreviousBoot,
    /// EPERM: the instance records into the persistent region.
    Persistent,
    /// EBADF: a marker the instance's buffer did not take.
    NotTaken,
    /// ENODEV: a top-level marker written while no instance copies them.
    NoMarkerCopies,
}

impl fmt::Display for FsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FsError::NotFound => "No such file or directory",
            FsError::NotDir => "Not a directory",
            FsError::IsDir => "Is a directory",
            FsError::Invalid => "Invalid argument",
            FsError::Rule(rule) => return write!(f, "Invalid argument ({rule})"),
            FsError::Parse(error) => return write!(f, "Invalid argument ({error})"),
            FsError::Inject(error) => return write!(f, "Invalid argument ({error})"),
            FsError::InvalidName => {
                return write!(
                    f,
                    "Invalid argument (instance names are 1 to {} characters of A-Z a-z 0-9 _ - ., \
                     not . or ..)",
                    trace::tracer::MAX_NAME
                );
            }
            FsError::ReservedName => {
                return write!(
                    f,
                    "Invalid argument ({} and {} are the persistent region's instances: \
                     this boot's recording and the previous boot's trace)",
                    crate::persist::BOOT_MAP,
                    crate::persist::LAST_BOOT
                );
            }
            FsError::MemoryLimit(used, max) => {
                return write!(
                    f,
                    "Cannot allocate memory (the rings of all instances and snapshots may take \
                     {max} KB together, each CPU's rounded up to a power of two; {used} KB are in use)"
                );
            }
            FsError::HeapFull(heap_used, heap, used, max) => {
                return write!(
                    f,
                    "Cannot allocate memory (the kernel heap has {heap_used} of {heap} KB in use; \
                     the rings of all instances and snapshots may take {max} KB together, \
                     {used} KB are in use)"
                );
            }
            FsError::Busy(holder) => return write!(f, "Device or resource busy ({holder})"),
            FsError::ReadOnly => "Permission denied (read-only file)",
            FsError::WriteOnly => "Permission denied (write-only file)",
            FsError::Exists => "File exists",
            FsError::Duplicate(error) => return write!(f, "File exists ({error})"),
            FsError::NoSpace => "No space left on device (too many instances)",
            FsError::NotPermitted(rule) => return write!(f, "Operation not permitted ({rule})"),
            FsError::NoTracer => "tracing is not available",
            FsError::PreviousBoot => {
                "Permission denied (last_boot holds the previous boot's trace: read-only)"
            }
            FsError::Persistent => {
                "Operation not permitted (boot_map records into the persistent region: it \
                 stays, with its size and the local clock, and has no snapshot)"
            }
            FsError::NotTaken => {
                "Bad file descriptor (the buffer took no record: tracing_on is 0, this CPU is \
                 outside tracing_cpumask, or the ring is full with options/overwrite off)"
            }
            FsError::NoMarkerCopies => {
                "No such device (no instance has options/copy_trace_marker on, the top level \
                 included)"
            }
        })
    }
}

/// KB of ring buffer the instances use, and the limit (0 where the tracer cannot
/// say), for the refusals that name them.
fn tracing_kb() -> (usize, usize) {
    let (used, max) = tracer().ok().and_then(|t| t.memory().ok()).unwrap_or_default();
    (used / 1024, max / 1024)
}

impl From<InstanceError> for FsError {
    fn from(error: InstanceError) -> Self {
        match error {
            InstanceError::InvalidName => FsError::InvalidName,
            InstanceError::NoSuchEvent => FsError::Rule("no event matches"),
            InstanceError::NotFound => FsError::NotFound,
            InstanceError::Busy => FsError::Busy(
                "the instance is in use: a driver records into it or a reader holds it",
            ),
            InstanceError::TooManyInstances => FsError::NoSpace,
            InstanceError::MemoryLimit => {
                let (used, max) = tracing_kb();
                FsError::MemoryLimit(used, max)
            }
            InstanceError::TopLevel => FsError::NotPermitted(INSTANCES_ONLY),
            InstanceError::NotArmed => {
                FsError::Rule("the event is not armed, and arming it needs a context that may wait")
            }
            InstanceError::FunctionEvent => FsError::Rule(
                "a function tracer's event: current_tracer records it (see available_tracers)",
            ),
            InstanceError::WrittenByTracer => FsError::Rule(
                "written by the tracer itself: ftrace:print and ftrace:raw_data by every \
                 write to trace_marker and trace_marker_raw, ftrace:kernel_stack by the \
                 stacktrace trigger",
            ),
            InstanceError::SnapshotInUse => FsError::Busy(
                "the irqsoff tracer keeps its window in the snapshot (set current_tracer first)",
            ),
            InstanceError::OverwriteInUse => {
                FsError::Rule("the irqsoff tracer needs overwrite mode (set current_tracer first)")
            }
            InstanceError::Buffer(trace::Error::NoMemory | trace::Error::TooBig) => {
                let (heap_used, heap) = crate::memory::heap::usage();
                let (used, max) = tracing_kb();
                FsError::HeapFull(heap_used / 1024, heap / 1024, used, max)
            }
            InstanceError::Buffer(trace::Error::ZeroSize) => {
                FsError::Rule("the size must be above 0")
            }
            InstanceError::Buffer(trace::Error::Fixed) => FsError::Persistent,
            InstanceError::Buffer(error) => FsError::Busy(match error {
                trace::Error::Recording => "recording must be off",
                trace::Error::WouldDeadlock => "it needs a context that may wait",
                trace::Error::Corrupt => "a ring is corrupt and tracing turned itself off",
                _ => "another reader or control operation holds the buffer",
            }),
        }
    }
}

impl From<TracerFunctionError> for FsError {
    fn from(error: TracerFunctionError) -> Self {
        FunctionError::from(error).into()
    }
}

impl From<FunctionError> for FsError {
    fn from(error: FunctionError) -> Self {
        match error {
            FunctionError::Tracer(TracerFunctionError::Unavailable) => {
                FsError::Rule("no function can be traced (see the boot's functions: line)")
            }
            FunctionError::NoMatch => {
                FsError::Rule("a glob matches no function (see available_filter_functions)")
            }
            // The buffers' own refusal, with its errno: ENOMEM for the snapshot
            // `irqsoff` needs, EBUSY for a reader holding what a tracer empties.
            FunctionError::Tracer(
                TracerFunctionError::Snapshot(error) | TracerFunctionError::Buffers(error),
            ) => FsError::from(error),
            FunctionError::Tracer(error @ TracerFunctionError::IrqsoffBusy) => {
                FsError::Busy(error.reason())
            }
            FunctionError::Tracer(error) => FsError::Rule(error.reason()),
            FunctionError::Busy => FsError::Busy("a function tracer is in use"),
            FunctionError::CommandElsewhere => {
                FsError::Rule("commands (FUNCTION:COMMAND) are written to set_ftrace_filter")
            }
            FunctionError::Command(HookError::Trigger(error)) => match error.reason {
                TriggerReason::UnknownCommand => FsError::Rule(
                    "unknown command (mod, traceon, traceoff, snapshot, stacktrace, \
                     enable_event, disable_event, dump, cpudump)",
                ),
                TriggerReason::NotFound => {
                    FsError::Rule("no function the glob names has this command")
                }
                TriggerReason::TooMany => FsError::Rule("a function holds at most 8 commands"),
                _ => FsError::Parse(HookError::Trigger(error)),
            },
            FunctionError::Command(error) => error.into(),
        }
    }
}

impl From<HookError> for FsError {
    fn from(error: HookError) -> Self {
        match error {
            HookError::Instance(error) => error.into(),
            HookError::Function(error) => FunctionError::Tracer(error).into(),
            HookError::Trigger(error) if error.reason == TriggerReason::Exists => {
                FsError::Duplicate(error)
            }
            error => FsError::Parse(error),
        }
    }
}

impl FsError {
    /// The byte offset into the written value an error points at (the caret of
    /// `error_log`): a filter's or trigger's position, else 0.
    fn position(&self) -> usize {
        match self {
            FsError::Parse(HookError::Filter(e)) => e.pos,
            FsError::Parse(HookError::Trigger(e)) | FsError::Duplicate(e) => e.pos,
            FsError::Inject(e) => e.pos,
            _ => 0,
        }
    }
}

/// A directory of the tree.
pub type Dir = tree::Dir<&'static str>;
/// A file of the tree.
pub type File = tree::File<&'static str, &'static EventDescriptor>;
/// What a path names.
pub type Node = tree::Node<&'static str, &'static EventDescriptor>;

/// A resolved path: the instance it lies in (a reference: it cannot be removed while
/// held), the node, and the absolute path.
pub type Located = tree::Resolved<Kernel>;

/// The tracer, or the error every tracefs operation gives without one.
pub fn tracer() -> Result<&'static Tracer<KernelPlatform>, FsError> {
    tracing::tracer().ok_or(FsError::NoTracer)
}

/// The events of the tracer that tracefs shows (printk sites are not events).
pub fn events(
    tracer: &Tracer<KernelPlatform>,
) -> impl Iterator<Item = &'static EventDescriptor> + '_ {
    tracer.events().iter().copied().filter(|d| d.kind == DescriptorKind::Event)
}

/// The events `set_event` and the `enable` files turn on and off, as
/// `available_events` lists them (`trace::tracer::is_settable`).
fn settable(
    tracer: &Tracer<KernelPlatform>,
) -> impl Iterator<Item = &'static EventDescriptor> + '_ {
    events(tracer).filter(|d| is_settable(d))
}

/// The kernel's tracer as the tree [`tree::resolve`] walks.
pub struct Kernel(&'static Tracer<KernelPlatform>);

impl Tree for Kernel {
    type Instance = Instance<'static, KernelPlatform>;
    type System = &'static str;
    type Event = &'static EventDescriptor;
    fn top(&self) -> Self::Instance {
        self.0.top()
    }
    fn instance(&self, name: &str) -> Option<Self::Instance> {
        self.0.lookup(name).ok()
    }
    fn is_top(&self, instance: &Self::Instance) -> bool {
        instance.is_top_level()
    }
    fn cpus(&self) -> usize {
        self.0.cpus()
    }
    fn system(&self, name: &str) -> Option<&'static str> {
        events(self.0).find(|d| d.system == name).map(|d| d.system)
    }
    fn event(&self, system: &'static str, name: &str) -> Option<&'static EventDescriptor> {
        events(self.0).find(|d| d.system == system && d.name == name)
    }
}

/// Resolves `path` (relative to `cwd`).
pub fn resolve(cwd: &str, path: &str) -> Result<Located, FsError> {
    tree::resolve(&Kernel(tracer()?), cwd, path).ok_or(FsError::NotFound)
}

/// The entries of an instance's root, and whether only the top level has them.
const ROOT_FILES: [(&str, bool); 44] = [
    ("README", true),
    ("available_events", false),
    ("available_filter_functions", true),
    ("available_filter_functions_addrs", true),
    ("available_tracers", false),
    ("buffer_size_kb", false),
    ("buffer_subbuf_size_kb", false),
    ("buffer_total_size_kb", false),
    ("current_tracer", false),
    ("dyn_ftrace_total_info", true),
    ("enabled_functions", true),
    ("error_log", false),
    ("events/", false),
    ("function_profile_enabled", true),
    ("instances/", true),
    ("max_graph_depth", true),
    ("options/", false),
    ("per_cpu/", false),
    ("printk_formats", true),
    ("set_event", false),
    ("set_ftrace_filter", false),
    ("set_ftrace_notrace", false),
    ("set_graph_function", false),
    ("set_graph_notrace", false),
    ("show_event_filters", false),
    ("show_event_triggers", false),
    ("snapshot", false),
    ("stack_max_size", true),
    ("stack_trace", true),
    ("stack_trace_filter", true),
    ("stack_tracer_enabled", true),
    ("touched_functions", true),
    ("trace", false),
    ("trace_clock", false),
    ("trace_marker", false),
    ("trace_marker_raw", false),
    ("trace_options", false),
    ("trace_pipe", false),
    ("trace_pipe_raw", false),
    ("trace_stat/", true),
    ("tracing_cpumask", false),
    ("tracing_max_latency", false),
    ("tracing_on", false),
    ("tracing_thresh", true),
];

/// The entries of a directory: names, directories with a trailing `/`.
pub fn list(located: &Located) -> Result<Vec<String>, FsError> {
    let Node::Dir(dir) = located.node else { return Err(FsError::NotDir) };
    let tracer = tracer()?;
    let names: Vec<String> = match dir {
        Dir::Root => {
            let top = located.instance.is_top_level();
            ROOT_FILES
                .iter()
                .filter(|(_, top_only)| top || !top_only)
                .map(|(name, _)| String::from(*name))
                .collect()
        }
        Dir::Instances => {
            let names = tracer.instance_names().map_err(InstanceError::from)?;
            names.into_iter().map(|n| n + "/").collect()
        }
        Dir::Options => TraceOption::ALL.iter().map(|option| String::from(option.name())).collect(),
        Dir::PerCpu => (0..tracer.cpus()).map(|cpu| format!("cpu{cpu}/")).collect(),
        Dir::TraceStat => (0..tracer.cpus()).map(|cpu| format!("function{cpu}")).collect(),
        Dir::Cpu => {
            ["buffer_size_kb", "snapshot", "stats", "trace", "trace_pipe", "trace_pipe_raw"]
                .map(String::from)
                .into()
        }
        Dir::Events => {
            let mut names: Vec<String> =
                ["enable", "header_event", "header_page"].map(String::from).into();
            for d in events(tracer) {
                let name = format!("{}/", d.system);
                if !names.contains(&name) {
                    names.push(name);
                }
            }
            names
        }
        Dir::System(sys) => {
            let mut names: Vec<String> = ["enable", "filter"].map(String::from).into();
            names
                .extend(events(tracer).filter(|d| d.system == sys).map(|d| format!("{}/", d.name)));
            names
        }
        Dir::Event => ["enable", "filter", "format", "hist", "id", "inject", "trigger"]
            .map(String::from)
            .into(),
    };
    Ok(names)
}

/// Whether `d` counts as enabled in `set_event` and the `enable` files of its
/// system and of `events/`: recording, or in soft mode (its triggers, or a trigger
/// that enables or disables it, keep it armed), as Linux's `EVENT_FILE_FL_ENABLED`.
fn on_or_soft(instance: &Instance<'_, KernelPlatform>, d: &EventDescriptor) -> bool {
    instance.event_enabled(d) || instance.event_soft_mode(d).unwrap_or(false)
}

/// What a system's `filter` file reads while no filter was set through it (Linux's
/// text, which it shows whatever was set).
const SYSTEM_FILTER_UNSET: &str = "### global filter ###
# Use this to set filters for multiple events.
# Only events with the given fields will be affected.
# If no events are modified, an error message will be displayed here";

/// `0`, `1`, `X` (mixed), or `?` (no event: the file affects none) for a set of
/// events' enable state in `instance`, as Linux's.
fn enable_state<'a>(
    instance: &Instance<'_, KernelPlatform>,
    set: impl Iterator<Item = &'a EventDescriptor>,
) -> char {
    let (mut on, mut off) = (false, false);
    for d in set {
        if on_or_soft(instance, d) {
            on = true;
        } else {
            off = true;
        }
    }
    match (on, off) {
        (true, true) => 'X',
        (true, false) => '1',
        (false, true) => '0',
        (false, false) => '?',
    }
}

/// Writes the `format` file of an event (libtraceevent's syntax; see
/// [`trace::event::format_file`] for the record layout it describes).
fn write_format(out: &mut dyn Write, d: &EventDescriptor) -> fmt::Result {
    trace::event::format_file::write_event_format(out, d.system, d.name, d.id(), d.fields, d.format)
}

/// What an event's `trigger` file reads without triggers (as ftrace's).
const AVAILABLE_TRIGGERS: &str = "\
# Available triggers:
# traceon traceoff snapshot stacktrace enable_event disable_event enable_hist disable_hist hist
";

/// Bytes of a ring page as `events/header_page` describes it.
const PAGE_SIZE: usize = 4096;

const SNAPSHOT_HELP: &str = "\
# Snapshot commands:
# echo 0 > snapshot : Clears and frees snapshot buffer
# echo 1 > snapshot : Allocates snapshot buffer, if not already allocated.
#                      Takes a snapshot of the main buffer.
# echo 2 > snapshot : Clears snapshot buffer (but does not allocate or free)
#                      (Doesn't have to be '2' works with any number that
#                       is not a '0' or '1')
";

/// `per_cpu/cpuN/snapshot`'s help, as Linux words it for a kernel that cannot swap
/// one CPU's buffer.
const CPU_SNAPSHOT_HELP: &str = "\
# Snapshot commands:
# echo 0 > snapshot : Invalid for per_cpu snapshot file.
# echo 1 > snapshot : Not supported with this kernel.
#                     Must use main snapshot file to allocate.
# echo 2 > snapshot : Clears this cpu's snapshot buffer (but does not allocate)
#                      (Doesn't have to be '2' works with any number that
#                       is not a '0' or '1')
";

/// `snapshot` (`cpu` `None`) or `per_cpu/cpuN/snapshot`, as ftrace's: the header and
/// the records (those of CPU `cpu`), or, without any, whether a snapshot is
/// allocated and the commands.
fn write_snapshot(
    out: &mut dyn Write,
    instance: &trace::Instance<'_, KernelPlatform>,
    cpu: Option<usize>,
    layout: &Layout,
) -> Result<fmt::Result, FunctionError> {
    let tracer = instance.function_tracer()?;
    Ok(tracing::write_snapshot(out, instance, tracer, cpu, layout, |out| {
        let state = if instance.has_snapshot() { "allocated" } else { "freed" };
        let help = if cpu.is_some() { CPU_SNAPSHOT_HELP } else { SNAPSHOT_HELP };
        write!(out, "#\n# * Snapshot is {state} *\n#\n{help}")
    }))
}

/// The `README` file: a mini-HOWTO of this tree.
const README: &str = "\
tracing mini-HOWTO:

# echo 0 > tracing_on : quick way to disable tracing
# echo 1 > tracing_on : quick way to re-enable tracing

 Important files:
  README\t\t- This file
  trace\t\t\t- The static contents of the buffer
\t\t\t  To clear the buffer write into this file: echo > trace
  trace_pipe\t\t- A consuming read to see the contents of the buffer
  trace_pipe_raw\t- A consuming read streaming the records as a dump (report reads it)
\t\t\t  (cat stops at a key press)
  current_tracer\t- function tracers: function, function_graph; irqsoff (the
\t\t\t  longest irqs-off region, kept in the snapshot); or nop
  available_tracers\t- list of configured tracers for current_tracer
  available_filter_functions - list of functions that can be traced
  available_filter_functions_addrs - the same list, each after its address in the kernel ELF
  enabled_functions\t- functions whose entries are calls, with the callbacks on each
\t\t\t  (instances tracing it or with commands on it, the stack tracer,
\t\t\t  the profiler)
  touched_functions\t- functions whose entries have been calls since boot, with
\t\t\t  the callbacks on each now
  dyn_ftrace_total_info\t- number of functions that can be traced
  set_ftrace_filter\t- echo function name (globs) in here to only trace these
\t\t\t  functions ('>' sets, '>>' adds, '!glob' removes;
\t\t\t  'glob:mod:crate' keeps to one crate's functions)
\t\t\t  Commands: <function>:<command>[:count], acting when the function
\t\t\t  is called, whatever the tracer: traceon, traceoff, snapshot,
\t\t\t  stacktrace, enable_event:<system>:<event>,
\t\t\t  disable_event:<system>:<event>, dump, cpudump;
\t\t\t  '!<function>:<command>' removes
  set_ftrace_notrace\t- echo function name (globs) in here to never trace
  set_graph_function\t- function_graph records only these functions and what they call
  set_graph_notrace\t- function_graph records nothing from these functions until they return
  max_graph_depth\t- Trace a limited depth with function_graph (0: no limit)
  function_profile_enabled - 1: count each call of the functions set_ftrace_filter
\t\t\t  selects, and its time (counts start from 0; 0 stops)
  trace_stat/functionN\t- CPU N's function profile: calls, time, average, s^2
  tracing_thresh\t- function_graph records only calls that took at least this
\t\t\t  many microseconds, at their return (0: every call); irqsoff
\t\t\t  reports every region at least that long
  tracing_max_latency\t- irqsoff: the longest irqs-off region the instance reported (us); only
\t\t\t  a longer one is reported (echo 0 > tracing_max_latency starts again)
  stack_tracer_enabled\t- 1: the stack tracer checks the kernel stack at each
\t\t\t  function entry (those stack_trace_filter lists, or all)
  stack_max_size\t- the most kernel stack in use seen at a function entry, in
\t\t\t  bytes (echo 0 > stack_max_size starts again)
  stack_trace\t\t- the call chain of that deepest stack, with each frame's size
  stack_trace_filter\t- functions the stack tracer checks (globs, as set_ftrace_filter)
  error_log\t- error log for failed commands (that support it)
  buffer_size_kb\t- view and modify size of per cpu buffer
  buffer_total_size_kb  - view total size of all cpu buffers
  buffer_subbuf_size_kb\t- the largest record: 4 KB (the rings have no sub-buffers)
  trace_clock\t\t- change the clock used to order events
       local:   each CPU's clock in ns (the TSC), the cheapest
      global:   ns, never behind a reading of another CPU (costs an atomic)
     counter:   a count shared by every CPU, one step per event (not ns)
      uptime:   the timer's ticks since boot, 100 a second (not ns)
        perf:   as local
        mono:   the kernel's monotonic clock (the TSC in ns; nothing adjusts it)
    mono_raw:   as mono
        boot:   as mono (the kernel never suspends)
     x86-tsc:   the TSC's cycles as they are (not ns)
  tracing_on\t\t- Enable or disable writing to the ring buffer (0 off, else on)
  tracing_cpumask\t- Limit which CPUs to trace (a hex mask)
  instances\t\t- Make sub-buffers with: mkdir instances/foo
\t\t\t  Remove sub-buffer with rmdir
  trace_options\t\t- every option of options/, as NAME (on) or noNAME (off);
\t\t\t  echo NAME or echo noNAME sets it
  options/overwrite\t- 1: overwrite the oldest events when full, 0: drop new ones
  options/nanoseconds\t- 1: timestamps in nanoseconds, 0: microseconds
  options/annotate\t- 1: '##### CPU N buffer started ####' where a CPU's records
\t\t\t  start, in a buffer that overwrote some
  options/context-info\t- 0: lines without the task, CPU, flags and timestamp
  options/irq-info\t- 0: lines without the flags column
  options/latency-format - 1: the latency header, and lines as 'cmd-pid CPU FLAGS
\t\t\t  time(delay)': µs from the first record (in an irqsoff snapshot,
\t\t\t  from the region's start), marked by the gap to the next
  options/print-parent\t- 0: function lines without the caller
  options/sym-offset\t- 1: function lines with offsets (name+0x1c)
  options/sym-addr\t- 1: function lines with addresses (name <ffff...>)
  options/markers\t- 0: trace_marker and trace_marker_raw refuse writes
  options/copy_trace_marker - 1: the top level's marker writes go into this
\t\t\t  instance too (on at the top level, off in an instance)
  options/trace_printk\t- 0: printk! records nothing into the instance
  options/printk-msg-only - 1: trace_marker and printk! lines show their text alone
  options/pause-on-trace - 1: no events are recorded while trace is read
  options/funcgraph-*\t- function_graph columns: abstime, cpu, proc, duration,
\t\t\t  overhead (marks), tail (the function after a return's })
  options/func_stack_trace - 1: a stack trace after each function the
\t\t\t  function tracer records (keep set_ftrace_filter short)
  options/stacktrace\t- 1: a stack trace after each event the instance records
  trace_marker\t\t- Writes into this file writes into the kernel buffer
  trace_marker_raw\t- Writes into this file writes binary data into the kernel buffer
\t\t\t  (a 4-byte id, then the data)
  printk_formats\t- the format strings of the kernel's trace::printk! sites
  snapshot\t\t- Like 'trace' but shows the content of the static
\t\t\t  snapshot buffer. Read the contents for more information
  per_cpu/cpuN/\t\t- trace, trace_pipe(_raw), snapshot, stats and buffer_size_kb of one CPU
\t\t\t  (echo > per_cpu/cpuN/trace empties that CPU's buffer)
  events/\t\t- Directory containing all trace event subsystems:
      enable\t\t- Write 0/1 to enable/disable tracing of all events
  events/name/\t\t- Each subsystem has its own enable and filter files and a
\t\t\t  directory per event: enable, filter, format, hist, id, inject,
\t\t\t  trigger
      filter\t\t- If set, only events passing filter are traced
\t\t\t  (echo 'irq == 48' > filter; echo 0 > filter clears it)
      trigger\t\t- If set, a command to perform when event is hit
\t\t\t  Format: <trigger>[:count][if <filter>]
\t\t\t  trigger: traceon, traceoff, snapshot, stacktrace,
\t\t\t           enable_event:<system>:<event>,
\t\t\t           disable_event:<system>:<event>,
\t\t\t           enable_hist:<system>:<event>,
\t\t\t           disable_hist:<system>:<event>,
\t\t\t           hist:keys=<field>[,...][:vals=<field>][:sort=<field>]
\t\t\t                [:size=N][:name=<name>][:pause|:cont|:clear]
\t\t\t                [:<var>=<expr>[,...]] (vals=$<var> sums one)
\t\t\t                [:onmax|onchange($<var>).save(<field>,...)]
\t\t\t                [:onmax|onchange($<var>).snapshot()]
\t\t\t  expr: <operand>[+-*/<operand>], operand: a field,
\t\t\t        common_timestamp[.usecs], $<var> or a number
\t\t\t  To remove a trigger: echo '!<trigger>' > trigger
      hist\t\t- The event's histograms (hist triggers), sorted
      inject\t\t- Records the event as if it fired, its fields written
\t\t\t  by name (echo 'irq=48' > inject; unnamed ones are 0):
\t\t\t  its filter and triggers apply (the event must be enabled)
  available_events\t- list of all events the kernel has
  show_event_filters\t- every event with a filter: system:event, a tab, the filter
  show_event_triggers\t- every event's triggers: system:event, a tab, the trigger
  set_event\t\t- Enables events by name written into it ([!]system:event,
\t\t\t  or [!]name for a system or an event; globs allowed;
\t\t\t  > replaces the set, >> adds to it)

 Commands besides the files: help lists them (dump, stress, bench, ...).
 Output of cat, ls, echo, ... can be piped: | head [-n N | -N], | tail [-n N | -N],
 | grep [-v] [-c] [-e PATTERN]... [PATTERN] (^ $ . * [...]), | wc -l. Ctrl-C stops a long read.
";

/// Most entries `error_log` keeps per instance, the newest (Linux's
/// `TRACING_LOG_ERRS_MAX`).
const ERROR_LOG_ENTRIES: usize = 8;

/// What the shell keeps per instance beyond the tracer's state: the display
/// options, whether `trace_marker` takes writes, whether reading `trace` pauses
/// writes, the error log and the system filters' text.
struct Extras {
    layout: Layout,
    markers: bool,
    /// `copy_trace_marker`, if set (by default on at the top level only).
    copy_markers: Option<bool>,
    /// `pause-on-trace`: writes are held off while `trace` is read.
    pause_on_trace: bool,
    errors: VecDeque<String>,
    /// The filter last set on each system (`events/SYS/filter` reads it back).
    system_filters: Vec<(&'static str, String)>,
    /// While the irqsoff tracer is selected: `latency-format` as it was before.
    latency_format_before: Option<bool>,
}

impl Default for Extras {
    /// ftrace's defaults: its display options', and markers on.
    fn default() -> Self {
        Extras {
            layout: Layout::DEFAULT,
            markers: true,
            copy_markers: None,
            pause_on_trace: false,
            errors: VecDeque::new(),
            system_filters: Vec::new(),
            latency_format_before: None,
        }
    }
}

/// [`Extras`] by instance name (empty: the top level). Entries of instances that
/// no longer exist are dropped whenever one is added, so there are at most as many
/// as instances.
static EXTRAS: spin::Mutex<Vec<(String, Extras)>> = spin::Mutex::new(Vec::new());

/// Runs `f` on the extras of `instance`, created if need be.
fn with_extras<R>(instance: &Instance<'_, KernelPlatform>, f: impl FnOnce(&mut Extras) -> R) -> R {
    let mut extras = EXTRAS.lock();
    let name = instance.name();
    let index = match extras.iter().position(|(n, _)| n == name) {
        Some(index) => index,
        None => {
            let tracer = instance.tracer();
            let gone = |n: &str| matches!(tracer.lookup(n), Err(InstanceError::NotFound));
            extras.retain(|(n, _)| n.is_empty() || !gone(n));
            extras.push((name.into(), Extras::default()));
            extras.len() - 1
        }
    };
    f(&mut extras[index].1)
}

/// Reads `instance`'s extras with `read` (the defaults if it has none yet).
fn read_extras<R>(instance: &Instance<'_, KernelPlatform>, read: impl FnOnce(&Extras) -> R) -> R {
    let extras = EXTRAS.lock();
    match extras.iter().find(|(n, _)| n == instance.name()) {
        Some((_, found)) => read(found),
        None => read(&Extras::default()),
    }
}

/// How `instance`'s `trace` files lay out their lines (its display options).
pub fn layout(instance: &Instance<'_, KernelPlatform>) -> Layout {
    Layout { clock: instance.clock(), ..read_extras(instance, |extras| extras.layout) }
}

/// As ftrace's latency tracers do: selecting irqsoff turns `latency-format` on, and
/// leaving it gives back the setting it found.
fn latency_format_for(instance: &Instance<'_, KernelPlatform>, before: Kind, now: Kind) {
    let irqsoff = |kind| kind == Kind::Irqsoff;
    if irqsoff(before) == irqsoff(now) {
        return;
    }
    with_extras(instance, |extras| {
        if irqsoff(now) {
            extras.latency_format_before = Some(extras.layout.latency_format);
            extras.layout.latency_format = true;
        } else if let Some(found) = extras.latency_format_before.take() {
            extras.layout.latency_format = found;
        }
    });
}

/// Whether `instance`'s `trace_marker` files take writes (`options/markers`).
fn markers(instance: &Instance<'_, KernelPlatform>) -> bool {
    read_extras(instance, |extras| extras.markers)
}

/// Whether the top level's marker writes go into `instance` too
/// (`options/copy_trace_marker`; by default, into the top level only).
fn copies_markers(instance: &Instance<'_, KernelPlatform>) -> bool {
    read_extras(instance, |extras| extras.copy_markers).unwrap_or(instance.name().is_empty())
}

/// Whether reading `instance`'s `trace` files holds its writes off
/// (`options/pause-on-trace`).
fn pauses(instance: &Instance<'_, KernelPlatform>) -> bool {
    read_extras(instance, |extras| extras.pause_on_trace)
}

/// Adds a failed write to `instance`'s `error_log`, in Linux's layout.
pub fn log_error(located: &Located, value: &str, error: FsError) {
    let file = located.path.rsplit('/').next().unwrap_or("");
    let mut entry = String::from("[");
    let _ = trace::text::write_timestamp(&mut entry, crate::clock::now_ns(), false);
    let caret = error.position().min(value.len());
    // Where the error arose, named as ftrace names it where it logs one.
    let location = match (located.node, &error) {
        (Node::File(File::EventFilter(_) | File::SystemFilter(_)), FsError::Parse(_)) => {
            String::from("event filter parse error")
        }
        (Node::File(File::EventTrigger(event)), FsError::Parse(HookError::Trigger(e)))
            if matches!(e.reason, TriggerReason::Hist(_)) =>
        {
            format!("hist:{}:{}", event.system, event.name)
        }
        _ => String::from(file),
    };
    let _ = write!(
        entry,
        "] {location}: error: {error}\n  Command: {value}\n           {:caret$}^",
        ""
    );
    with_extras(&located.instance, |extras| {
        if extras.errors.len() == ERROR_LOG_ENTRIES {
            extras.errors.pop_front();
        }
        extras.errors.push_back(entry);
    });
}

/// The function list a filter file holds.
fn function_list(file: File) -> List {
    match file {
        File::SetFtraceNotrace => List::Notrace,
        File::SetGraphFunction => List::GraphFunction,
        File::SetGraphNotrace => List::GraphNotrace,
        _ => List::Filter,
    }
}

/// Writes one of `instance`'s function lists as ftrace reads it: the functions (or
/// the line saying there are none), then for `set_ftrace_filter` the commands.
fn write_function_list(
    out: &mut dyn Write,
    instance: &trace::Instance<'_, KernelPlatform>,
    list: List,
) -> Result<fmt::Result, FunctionError> {
    let none = match list {
        List::Filter | List::GraphFunction => ALL_FUNCTIONS,
        List::Notrace | List::GraphNotrace => "#### no functions disabled ####",
    };
    let commands = match list {
        List::Filter => functions::commands(instance)?,
        _ => Vec::new(),
    };
    let names = write_names(out, &functions::listed(instance, list)?, none);
    Ok(names.and_then(|()| {
        commands.iter().try_for_each(|(f, command)| writeln!(out, "{}:{command}", f.name))
    }))
}

/// What a filter file that selects every function reads.
const ALL_FUNCTIONS: &str = "#### all functions enabled ####";

/// Writes the name of each of `functions`, a line each, or the line `none` if there
/// are none.
fn write_names(out: &mut dyn Write, functions: &[&functions::Function], none: &str) -> fmt::Result {
    if functions.is_empty() {
        return writeln!(out, "{none}");
    }
    functions.iter().try_for_each(|f| writeln!(out, "{}", f.name))
}

/// Writes a CPU mask as Linux does: hex, as many digits as the CPUs need.
fn write_cpumask(out: &mut dyn Write, mask: u64, cpus: usize) -> fmt::Result {
    let digits = cpus.div_ceil(4).max(1);
    let mask = if cpus < 64 { mask & ((1 << cpus) - 1) } else { mask };
    writeln!(out, "{mask:0digits$x}")
}

/// Parses a hex CPU mask, in 32-bit groups between commas as Linux writes and reads
/// them beyond 32 CPUs (`1,00000002`: CPUs 1 and 32), or one group of up to 64
/// bits; bits only for existing CPUs.
fn parse_cpumask(value: &str, cpus: usize) -> Result<u64, FsError> {
    const RULE: &str =
        "a hex mask with a bit per CPU, e.g. 3 for CPUs 0 and 1 (8 digits between commas)";
    const ABSENT: FsError = FsError::Rule("the mask has bits for CPUs that do not exist");
    let value = value.trim();
    let grouped = value.contains(',');
    let most_digits = if grouped { 8 } else { 16 };
    let mut mask: u64 = 0;
    for group in value.split(',') {
        if group.is_empty() || !group.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(FsError::Rule(RULE));
        }
        let digits = group.trim_start_matches('0');
        // A group shifts the ones before it up 32 bits: none may be lost.
        if digits.len() > most_digits || mask >> 32 != 0 {
            return Err(ABSENT);
        }
        let bits = match digits {
            "" => 0,
            digits => u64::from_str_radix(digits, 16).map_err(|_| FsError::Rule(RULE))?,
        };
        mask = if grouped { mask << 32 | bits } else { bits };
    }
    if cpus < 64 && mask >> cpus != 0 {
        return Err(ABSENT);
    }
    Ok(mask)
}

/// The sizes of `instance`'s CPU rings in KB.
fn cpu_kb<'a>(instance: &'a Instance<'_, KernelPlatform>) -> impl Iterator<Item = usize> + 'a {
    (0..instance.tracer().cpus()).map(|cpu| instance.bytes_of_cpu(cpu).unwrap_or(0) / 1024)
}

/// Whether `option` is on in `instance`.
fn option(instance: &Instance<'_, KernelPlatform>, option: TraceOption) -> bool {
    let layout = layout(instance);
    match option {
        TraceOption::Annotate => layout.annotate,
        TraceOption::ContextInfo => layout.context_info,
        TraceOption::CopyTraceMarker => copies_markers(instance),
        TraceOption::FuncStackTrace => instance.function_stack_trace(),
        TraceOption::GraphAbstime => layout.graph_abstime,
        TraceOption::GraphCpu => layout.graph_cpu,
        TraceOption::GraphDuration => layout.graph_duration,
        TraceOption::GraphOverhead => layout.graph_overhead,
        TraceOption::GraphProc => layout.graph_proc,
        TraceOption::GraphTail => layout.graph_tail,
        TraceOption::IrqInfo => layout.irq_info,
        TraceOption::LatencyFormat => layout.latency_format,
        TraceOption::Markers => markers(instance),
        TraceOption::Nanoseconds => layout.nanoseconds,
        TraceOption::Overwrite => instance.mode() == Mode::Overwrite,
        TraceOption::PauseOnTrace => pauses(instance),
        TraceOption::PrintParent => layout.print_parent,
        TraceOption::PrintkMsgOnly => layout.printk_msg_only,
        TraceOption::StackTrace => instance.stack_traces(),
        TraceOption::SymAddr => layout.sym_addr,
        TraceOption::SymOffset => layout.sym_offset,
        TraceOption::TracePrintk => instance.printk_enabled(),
    }
}

/// Turns `option` on or off in `instance`.
fn set_option(
    instance: &Instance<'_, KernelPlatform>,
    option: TraceOption,
    on: bool,
) -> Result<(), FsError> {
    let display = |set: fn(&mut Extras, bool)| with_extras(instance, |extras| set(extras, on));
    match option {
        TraceOption::Annotate => display(|e, on| e.layout.annotate = on),
        TraceOption::ContextInfo => display(|e, on| e.layout.context_info = on),
        TraceOption::CopyTraceMarker => display(|e, on| e.copy_markers = Some(on)),
        TraceOption::FuncStackTrace => instance.set_function_stack_trace(on)?,
        TraceOption::GraphAbstime => display(|e, on| e.layout.graph_abstime = on),
        TraceOption::GraphCpu => display(|e, on| e.layout.graph_cpu = on),
        TraceOption::GraphDuration => display(|e, on| e.layout.graph_duration = on),
        TraceOption::GraphOverhead => display(|e, on| e.layout.graph_overhead = on),
        TraceOption::GraphProc => display(|e, on| e.layout.graph_proc = on),
        TraceOption::GraphTail => display(|e, on| e.layout.graph_tail = on),
        TraceOption::IrqInfo => display(|e, on| e.layout.irq_info = on),
        TraceOption::LatencyFormat => display(|e, on| e.layout.latency_format = on),
        TraceOption::Markers => display(|e, on| e.markers = on),
        TraceOption::Nanoseconds => display(|e, on| e.layout.nanoseconds = on),
        TraceOption::Overwrite => {
            instance.set_mode(if on { Mode::Overwrite } else { Mode::Discard })?
        }
        TraceOption::PauseOnTrace => display(|e, on| e.pause_on_trace = on),
        TraceOption::PrintParent => display(|e, on| e.layout.print_parent = on),
        TraceOption::PrintkMsgOnly => display(|e, on| e.layout.printk_msg_only = on),
        TraceOption::StackTrace => instance.set_stack_traces(on)?,
        TraceOption::SymAddr => display(|e, on| e.layout.sym_addr = on),
        TraceOption::SymOffset => display(|e, on| e.layout.sym_offset = on),
        TraceOption::TracePrintk => instance.set_printk(on),
    }
    Ok(())
}

/// Reads a file into `out`. The `trace_pipe` files are read by the shell's
/// streaming reader, not here.
pub fn read(located: &Located, out: &mut dyn Write) -> Result<(), FsError> {
    let Node::File(file) = located.node else { return Err(FsError::IsDir) };
    let tracer = tracer()?;
    let instance = &located.instance;
    let layout = layout(instance);
    let result = match file {
        File::AvailableEvents => {
            settable(tracer).try_for_each(|d| writeln!(out, "{}:{}", d.system, d.name))
        }
        File::SetEvent => settable(tracer)
            .filter(|d| on_or_soft(instance, d))
            .try_for_each(|d| writeln!(out, "{}:{}", d.system, d.name)),
        File::TracingOn => writeln!(out, "{}", u8::from(instance.tracing())),
        File::Trace | File::CpuTrace(_) => {
            let only = if let File::CpuTrace(cpu) = file { Some(cpu) } else { None };
            let current = instance.function_tracer()?;
            tracing::write_trace(out, instance, current, only, &layout, pauses(instance))
        }
        File::Snapshot => write_snapshot(out, instance, None, &layout)?,
        File::CpuSnapshot(cpu) => write_snapshot(out, instance, Some(cpu), &layout)?,
        File::BufferSizeKb => {
            // Linux shows X when the CPUs' sizes differ.
            let mut sizes = cpu_kb(instance);
            let first = sizes.next().unwrap_or(0);
            match sizes.all(|kb| kb == first) {
                true => writeln!(out, "{first}"),
                false => writeln!(out, "X"),
            }
        }
        File::CpuBufferSizeKb(cpu) => {
            writeln!(out, "{}", instance.bytes_of_cpu(cpu).unwrap_or(0) / 1024)
        }
        // The live rings only, as Linux counts them (a snapshot is not included).
        File::BufferTotalSizeKb => writeln!(out, "{}", cpu_kb(instance).sum::<usize>()),
        File::TraceMarker | File::TraceMarkerRaw | File::EventInject(_) => {
            return Err(FsError::WriteOnly);
        }
        File::TraceClock => {
            let current = instance.clock();
            let names = Clock::ALL.into_iter().enumerate().try_for_each(|(i, clock)| {
                let space = if i == 0 { "" } else { " " };
                match clock == current {
                    true => write!(out, "{space}[{}]", clock.name()),
                    false => write!(out, "{space}{}", clock.name()),
                }
            });
            names.and_then(|()| writeln!(out))
        }
        File::TraceOption(o) => writeln!(out, "{}", u8::from(option(instance, o))),
        File::TraceOptions => TraceOption::ALL.iter().try_for_each(|&o| {
            let no = if option(instance, o) { "" } else { "no" };
            writeln!(out, "{no}{}", o.name())
        }),
        File::CpuMask => write_cpumask(out, instance.cpumask(), tracer.cpus()),
        File::Readme => out.write_str(README),
        File::AvailableTracers => {
            let names: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
            writeln!(out, "{}", names.join(" "))
        }
        File::CurrentTracer => {
            writeln!(out, "{}", instance.function_tracer()?.name())
        }
        File::AvailableFilterFunctions => {
            functions::functions().iter().try_for_each(|f| writeln!(out, "{}", f.name))
        }
        // The kernel ELF's addresses, as records and the `functions` command give them.
        File::AvailableFilterFunctionsAddrs => functions::functions().iter().try_for_each(|f| {
            writeln!(out, "{:x} {}", crate::arch::stack::elf_address(f.site as u64), f.name)
        }),
        // `system:event`, a tab, then what the event's own file shows: every event of
        // `events/`, those `set_event` does not take (markers, the tracers') too.
        File::ShowEventFilters => events(tracer).try_for_each(|d| match instance.filter(d) {
            Some(filter) => writeln!(out, "{}:{}\t{filter}", d.system, d.name),
            None => Ok(()),
        }),
        File::ShowEventTriggers => events(tracer).try_for_each(|d| {
            let triggers = instance.triggers(d);
            triggers.iter().try_for_each(|t| writeln!(out, "{}:{}\t{t}", d.system, d.name))
        }),
        File::EnabledFunctions => write_callbacks(out, tracer.enabled_functions()),
        File::TouchedFunctions => write_callbacks(out, tracer.touched_functions()?),
        File::DynFtraceTotalInfo => writeln!(out, "{}", functions::functions().len()),
        File::SetFtraceFilter
        | File::SetFtraceNotrace
        | File::SetGraphFunction
        | File::SetGraphNotrace => write_function_list(out, instance, function_list(file))?,
        File::MaxGraphDepth => writeln!(out, "{}", functions::max_graph_depth()),
        File::TracingThresh => writeln!(out, "{}", tracer.graph_threshold() / 1000),
        File::TracingMaxLatency => writeln!(out, "{}", instance.max_latency() / 1000),
        File::FunctionProfileEnabled => writeln!(out, "{}", u8::from(tracer.function_profile())),
        File::FunctionStat(cpu) => {
            let name = |index: usize| functions::functions().get(index).map(|f| f.name);
            trace::tracer::FunctionStat::write_table(out, &tracer.function_stats(cpu), &name)
        }
        File::StackTracerEnabled => writeln!(out, "{}", u8::from(tracer.stack_tracer())),
        File::StackMaxSize => {
            writeln!(out, "{}", tracer.stack_max()?.size)
        }
        File::StackTrace => tracer.stack_max()?.write(out, crate::symbols::table()),
        File::StackTraceFilter => write_names(out, &functions::stack_filtered()?, ALL_FUNCTIONS),
        File::SubbufSizeKb => writeln!(out, "4"),
        File::PrintkFormats => tracer
            .events()
            .iter()
            .filter(|d| d.kind == DescriptorKind::Printk)
            .try_for_each(|d| writeln!(out, "{:#x} : \"{}\"", d.id(), d.format.escape_debug())),
        File::ErrorLog => with_extras(instance, |extras| {
            extras.errors.iter().try_for_each(|entry| writeln!(out, "{entry}"))
        }),
        File::CpuStats(cpu) => tracing::write_cpu_stats(out, instance, cpu),
        File::Enable(sys) => {
            let state = enable_state(
                instance,
                settable(tracer).filter(|d| sys.is_none_or(|s| d.system == s)),
            );
            writeln!(out, "{state}")
        }
        File::EventEnable(d) => {
            // `*`: the event's triggers, or another's that enable or disable it, keep
            // it in soft mode (ftrace's notation).
            let soft =
                if instance.event_soft_mode(d).map_err(InstanceError::from)? { "*" } else { "" };
            writeln!(out, "{}{soft}", u8::from(instance.event_enabled(d)))
        }
        File::EventFormat(d) => write_format(out, d),
        File::HeaderPage => trace::event::format_file::write_header_page(out, PAGE_SIZE),
        File::HeaderEvent => trace::event::format_file::write_header_event(out),
        File::EventId(d) => writeln!(out, "{}", d.id()),
        File::EventFilter(d) => {
            writeln!(out, "{}", instance.filter(d).as_deref().unwrap_or("none"))
        }
        File::SystemFilter(sys) => with_extras(instance, |extras| {
            let text = extras.system_filters.iter().find(|(s, _)| *s == sys).map(|(_, t)| t);
            writeln!(out, "{}", text.map_or(SYSTEM_FILTER_UNSET, String::as_str))
        }),
        File::EventTrigger(d) => {
            let triggers = instance.triggers(d);
            if triggers.is_empty() {
                out.write_str(AVAILABLE_TRIGGERS)
            } else {
                triggers.iter().try_for_each(|t| writeln!(out, "{t}"))
            }
        }
        File::EventHist(d) => instance.write_hists(d, crate::symbols::table(), out),
        File::TracePipe | File::CpuTracePipe(_) | File::TracePipeRaw | File::CpuTracePipeRaw(_) => {
            return Err(FsError::Invalid);
        }
    };
    // The console never fails a write: a write fails only when the reader stopped
    // (Ctrl-C, or a pipe that has all it wants), which is no error of the file.
    let _ = result;
    Ok(())
}

/// Writes `enabled_functions`' lines, `name (callbacks)`, for functions by index.
fn write_callbacks(out: &mut dyn Write, listed: Vec<(usize, u32)>) -> fmt::Result {
    let mut named =
        listed.into_iter().filter_map(|(i, n)| Some((functions::functions().get(i)?, n)));
    named.try_for_each(|(f, n)| writeln!(out, "{} ({n})", f.name))
}

/// A marker write with `write`: into `instance`, or, written at the top level, into
/// every instance whose `options/copy_trace_marker` is on (the top level first), in
/// turn, stopping at the first that refuses it, one whose recording is off among
/// them (as Linux's, whose ring then takes no write).
fn write_markers(
    instance: &Instance<'_, KernelPlatform>,
    write: impl Fn(&Instance<'_, KernelPlatform>) -> Result<(), FsError>,
) -> Result<(), FsError> {
    if !instance.name().is_empty() {
        return write(instance);
    }
    let tracer = instance.tracer();
    let named = tracer.instances().map_err(InstanceError::from)?;
    let targets: Vec<_> =
        core::iter::once(tracer.top()).chain(named).filter(copies_markers).collect();
    if targets.is_empty() {
        return Err(FsError::NoMarkerCopies);
    }
    targets.iter().try_for_each(write)
}

/// Parses a `0`/`1` switch value (options and `enable` files).
fn switch(value: &str) -> Result<bool, FsError> {
    match value.trim() {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err(FsError::Rule("0 or 1")),
    }
}

/// A switch Linux reads as a number, `tracing_on` and `function_profile_enabled`:
/// 0 is off, any other number on; anything else is refused with `rule`.
fn any_number(value: &str, rule: &'static str) -> Result<bool, FsError> {
    value.trim().parse::<u64>().map(|n| n != 0).map_err(|_| FsError::Rule(rule))
}

/// A pattern, or `None` for "any" (`*` or empty).
fn any_pattern(pattern: Option<&str>) -> Option<&str> {
    pattern.filter(|p| !p.is_empty() && *p != "*")
}

/// The (system, event) patterns of one `set_event` entry.
type Selectors<'a> = Vec<(Option<&'a str>, Option<&'a str>)>;

/// One `set_event` entry, `[!]SYSTEM:EVENT` or `[!]NAME` (`*` or empty: any): whether
/// it enables, and the (system, event) patterns it selects. As in Linux, a `NAME`
/// without `:` selects the events of that name and the events of the system of that
/// name.
fn set_event_entry(entry: &str) -> (bool, Selectors<'_>) {
    let (enable, spec) = match entry.strip_prefix('!') {
        Some(spec) => (false, spec),
        None => (true, entry),
    };
    let selectors = match spec.split_once(':') {
        Some((system, event)) => alloc::vec![(any_pattern(Some(system)), any_pattern(Some(event)))],
        None => match any_pattern(Some(spec)) {
            None => alloc::vec![(None, None)],
            name => alloc::vec![(None, name), (name, None)],
        },
    };
    (enable, selectors)
}

/// Parses a size in KB for a ring: a positive number.
fn size_kb(value: &str) -> Result<usize, FsError> {
    const RULE: &str = "a size in KB, at least 1";
    let kb: usize = value.trim().parse().map_err(|_| FsError::Rule(RULE))?;
    match kb {
        0 => Err(FsError::Rule(RULE)),
        kb => kb.checked_mul(1024).ok_or(FsError::Rule("the size is too large")),
    }
}

const _: () = assert!(
    trace::tracer::MAX_TRIGGERS == 8,
    "the error text of function commands names the limit"
);

const _: () = assert!(
    trace::tracer::MAX_RAW_MARKER == 80,
    "the error text of trace_marker_raw names the limit"
);

/// Writes `value` to a file (`append` for `>>`). On error nothing changed, but for
/// `set_event` written with `>`, which is emptied first (as Linux truncates it on
/// open); the error is added to the instance's `error_log`.
pub fn write(located: &Located, value: &str, append: bool) -> Result<(), FsError> {
    let result = write_file(located, value, append);
    if let Err(error) = result {
        log_error(located, value, error);
    }
    result
}

/// Refuses what would change `located`'s instance (a write, a consuming read) where
/// it is the previous boot's trace, `last_boot`, which is read-only.
pub fn may_change(located: &Located) -> Result<(), FsError> {
    match located.instance.name() {
        crate::persist::LAST_BOOT => Err(FsError::PreviousBoot),
        _ => Ok(()),
    }
}

fn write_file(located: &Located, value: &str, append: bool) -> Result<(), FsError> {
    let Node::File(file) = located.node else { return Err(FsError::IsDir) };
    let tracer = tracer()?;
    let instance = &located.instance;
    may_change(located)?;
    match file {
        File::SetEvent => {
            if !append {
                instance.set_event(None, None, false)?;
            }
            let mut entries: Vec<_> = value.split_ascii_whitespace().map(set_event_entry).collect();
            // Every entry is checked first, so a bad one enables none of them.
            for (_, selectors) in &mut entries {
                let named = selectors.clone();
                selectors.retain(|&(sys, ev)| settable(tracer).any(|d| d.matches(sys, ev)));
                if selectors.is_empty() {
                    // An entry that names only events the tracer writes says why.
                    let mut named = events(tracer)
                        .filter(|d| named.iter().any(|&(sys, ev)| d.matches(sys, ev)));
                    return Err(match named.next() {
                        Some(d) if is_function_event(d) => InstanceError::FunctionEvent.into(),
                        Some(_) => InstanceError::WrittenByTracer.into(),
                        None => FsError::Rule(
                            "no event matches an entry ([!]system:event or [!]system or \
                             [!]event, globs allowed)",
                        ),
                    });
                }
            }
            for (enable, selectors) in entries {
                for (system, event) in selectors {
                    instance.set_event(system, event, enable)?;
                }
            }
            Ok(())
        }
        File::TracingOn => {
            instance.set_tracing(any_number(value, "0 turns recording off, any other number on")?);
            Ok(())
        }
        File::CpuTrace(cpu) => {
            // Opening for writing (not appending) empties the CPU's ring.
            if !append {
                instance.clear_cpu(cpu)?;
            }
            Ok(())
        }
        File::Trace => {
            // Opening `trace` for writing (not appending) empties the buffer.
            if append {
                return Ok(());
            }
            let on = instance.tracing();
            instance.set_tracing(false);
            let result = instance.clear();
            instance.set_tracing(on);
            Ok(result?)
        }
        File::Snapshot => match value.trim().parse::<u64>() {
            Ok(0) => Ok(instance.snapshot_free()?),
            Ok(1) => Ok(instance.snapshot_take()?),
            // Linux: any other number clears an allocated snapshot, and is accepted
            // (doing nothing) without one.
            Ok(_) if instance.has_snapshot() => Ok(instance.snapshot_clear()?),
            Ok(_) => Ok(()),
            Err(_) => Err(FsError::Rule("0 frees, 1 takes a snapshot, 2 or more clears it")),
        },
        // As Linux's per-CPU file where one CPU's buffer cannot be swapped.
        File::CpuSnapshot(cpu) => match value.trim().parse::<u64>() {
            Ok(0) => Err(FsError::Rule("0 is invalid for a per-CPU snapshot file")),
            Ok(1) => Err(FsError::Rule(
                "a snapshot takes every CPU's buffer: echo 1 > snapshot in the instance",
            )),
            Ok(_) if instance.has_snapshot() => Ok(instance.snapshot_clear_cpu(cpu)?),
            Ok(_) => Ok(()),
            Err(_) => Err(FsError::Rule("2 or more clears this CPU's snapshot")),
        },
        File::BufferSizeKb => Ok(instance.resize(size_kb(value)?)?),
        File::CpuBufferSizeKb(cpu) => Ok(instance.resize_cpu(cpu, size_kb(value)?)?),
        File::TraceMarker | File::TraceMarkerRaw if !markers(instance) => {
            Err(FsError::Rule("options/markers is off"))
        }
        File::TraceMarker => {
            write_markers(instance, |i| i.write_marker(value).map_err(|_| FsError::NotTaken))
        }
        File::TraceMarkerRaw => {
            let bytes = value.as_bytes();
            if bytes.len() < 4 {
                return Err(FsError::Rule("a 4-byte id, then the data"));
            }
            let (id, data) = bytes.split_at(4);
            let id = u32::from_le_bytes([id[0], id[1], id[2], id[3]]);
            write_markers(instance, |i| match i.write_marker_raw(id, data) {
                Err(WriteError::TooLarge) => {
                    Err(FsError::Rule("the data after the id is too long (at most 80 bytes)"))
                }
                result => result.map_err(|_| FsError::NotTaken),
            })
        }
        File::TraceClock => match Clock::from_name(value.trim()) {
            Some(clock) => Ok(instance.set_clock(clock)?),
            None => Err(FsError::Rule(
                "no such clock (local, global, counter, uptime, perf, mono, mono_raw, boot or \
                 x86-tsc)",
            )),
        },
        File::TraceOption(o) => set_option(instance, o, switch(value)?),
        File::TraceOptions => {
            let word = value.trim();
            let (name, on) = match word.strip_prefix("no") {
                Some(name) => (name, false),
                None => (word, true),
            };
            let option = TraceOption::named(name);
            set_option(
                instance,
                option.ok_or(FsError::Rule("no such option (see trace_options)"))?,
                on,
            )
        }
        File::CpuMask => Ok(instance.set_cpumask(parse_cpumask(value, tracer.cpus())?)?),
        File::CurrentTracer => match Kind::parse(value.trim()) {
            Some(kind) => {
                let before = instance.function_tracer()?;
                let selected = instance.select_function_tracer(kind);
                // Also when the tracer changed but its buffers could not be emptied.
                let after = instance.function_tracer()?;
                latency_format_for(instance, before, after);
                Ok(selected?)
            }
            None => Err(FsError::Rule("no such tracer (see available_tracers)")),
        },
        File::SetFtraceFilter
        | File::SetFtraceNotrace
        | File::SetGraphFunction
        | File::SetGraphNotrace => {
            Ok(functions::write_list(instance, function_list(file), value, append)?)
        }
        File::MaxGraphDepth => {
            let depth = value
                .trim()
                .parse()
                .map_err(|_| FsError::Rule("a decimal number of calls (0: no limit)"))?;
            functions::set_max_graph_depth(depth);
            Ok(())
        }
        File::TracingThresh => {
            const RULE: &str = "a decimal number of microseconds (0: off)";
            let us: u64 = value.trim().parse().map_err(|_| FsError::Rule(RULE))?;
            let ns = us.checked_mul(1000).ok_or(FsError::Rule("the threshold is too large"))?;
            Ok(tracer.set_graph_threshold(ns)?)
        }
        File::TracingMaxLatency => {
            const RULE: &str = "a decimal number of microseconds";
            let us: u64 = value.trim().parse().map_err(|_| FsError::Rule(RULE))?;
            let ns = us.checked_mul(1000).ok_or(FsError::Rule("the latency is too large"))?;
            Ok(instance.set_max_latency(ns)?)
        }
        File::StackTracerEnabled => Ok(tracer.set_stack_tracer(switch(value)?)?),
        File::FunctionProfileEnabled => {
            let on = any_number(value, "0 turns the profiler off, any other number on")?;
            Ok(tracer.set_function_profile(on)?)
        }
        File::StackMaxSize => {
            let size =
                value.trim().parse().map_err(|_| FsError::Rule("a decimal number of bytes"))?;
            Ok(tracer.set_stack_max_size(size)?)
        }
        File::StackTraceFilter => Ok(functions::write_stack_filter(value, append)?),
        File::SubbufSizeKb => match value.trim() {
            "4" => Ok(()),
            _ => Err(FsError::Rule(
                "the rings have no sub-buffers; a record is at most 4 KB, so only 4",
            )),
        },
        File::ErrorLog => {
            // Opening for writing (not appending) empties the log.
            if !append {
                with_extras(instance, |extras| extras.errors.clear());
            }
            Ok(())
        }
        File::Enable(sys) => Ok(instance.set_event(sys, None, switch(value)?).map(drop)?),
        File::EventEnable(d) => {
            Ok(instance.set_event(Some(d.system), Some(d.name), switch(value)?).map(drop)?)
        }
        File::EventFilter(d) => Ok(instance.set_filter(d, value)?),
        File::SystemFilter(sys) => {
            instance.set_system_filter(sys, value)?;
            let text = value.trim();
            with_extras(instance, |extras| {
                extras.system_filters.retain(|(s, _)| *s != sys);
                if text != "0" {
                    extras.system_filters.push((sys, text.into()));
                }
            });
            Ok(())
        }
        // As ftrace: `>>` adds one trigger (`!` removes) and an empty write does
        // nothing; `>` first removes the event's histograms and `enable_hist` and
        // `disable_hist` triggers, in the same change (a refused line removes none).
        File::EventTrigger(d) if append => match value.trim() {
            "" => Ok(()),
            _ => Ok(instance.set_trigger(d, value)?),
        },
        File::EventTrigger(d) => Ok(instance.set_trigger_truncating(d, value)?),
        File::EventInject(d) => instance.inject(d, value).map_err(FsError::Inject),
        File::AvailableEvents
        | File::TracePipe
        | File::BufferTotalSizeKb
        | File::CpuStats(_)
        | File::CpuTracePipe(_)
        | File::TracePipeRaw
        | File::CpuTracePipeRaw(_)
        | File::EventFormat(_)
        | File::EventHist(_)
        | File::HeaderPage
        | File::HeaderEvent
        | File::EventId(_)
        | File::Readme
        | File::AvailableTracers
        | File::AvailableFilterFunctions
        | File::AvailableFilterFunctionsAddrs
        | File::ShowEventFilters
        | File::ShowEventTriggers
        | File::EnabledFunctions
        | File::TouchedFunctions
        | File::DynFtraceTotalInfo
        | File::StackTrace
        | File::FunctionStat(_)
        | File::PrintkFormats => Err(FsError::ReadOnly),
    }
}

/// Why a `mkdir` or `rmdir` elsewhere is refused.
const INSTANCES_ONLY: &str = "only instances/NAME is made or removed";

/// `mkdir instances/NAME`.
pub fn mkdir(cwd: &str, path: &str) -> Result<(), FsError> {
    let tracer = tracer()?;
    let parts = normalize(cwd, path);
    let ["instances", name] = parts.iter().map(String::as_str).collect::<Vec<_>>()[..] else {
        return Err(if resolve(cwd, path).is_ok() {
            FsError::Exists
        } else {
            FsError::NotPermitted(INSTANCES_ONLY)
        });
    };
    if tracer.lookup(name).is_ok() {
        return Err(FsError::Exists);
    }
    // Writes to `last_boot` are refused, and `rmdir boot_map` is: an instance of
    // either name that the region did not make would be neither.
    if [crate::persist::BOOT_MAP, crate::persist::LAST_BOOT].contains(&name) {
        return Err(FsError::ReservedName);
    }
    // As Linux's, it starts with the top level's trace options (those inherited).
    let top = tracer.top();
    let config = InstanceConfig { mode: top.mode(), ..InstanceConfig::default() };
    let instance = tracer.get_or_create(name, config)?;
    // The mode is the config's.
    let copied = |o: &TraceOption| o.inherited() && *o != TraceOption::Overwrite;
    let mut copied = TraceOption::ALL.into_iter().filter(copied);
    if let Err(error) = copied.try_for_each(|o| set_option(&instance, o, option(&top, o))) {
        // Nothing changes: the instance goes again (no reader can hold it yet).
        let _ = tracer.destroy(instance);
        EXTRAS.lock().retain(|(n, _)| n != name);
        return Err(error);
    }
    Ok(())
}

/// `rmdir instances/NAME`.
pub fn rmdir(cwd: &str, path: &str) -> Result<(), FsError> {
    let tracer = tracer()?;
    let parts = normalize(cwd, path);
    match parts.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["instances", crate::persist::BOOT_MAP] => Err(FsError::Persistent),
        ["instances", name] => {
            tracer.destroy_by_name(name).map_err(FsError::from)?;
            EXTRAS.lock().retain(|(n, _)| n != name);
            Ok(())
        }
        _ => Err(match resolve(cwd, path) {
            Ok(_) => FsError::NotPermitted(INSTANCES_ONLY),
            Err(_) => FsError::NotFound,
        }),
    }
}
