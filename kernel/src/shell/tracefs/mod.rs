//! The tracing tree the shell shows, with ftrace's files and meanings
//! (Documentation/trace/ftrace.rst): the top-level instance at `/`, each named
//! instance at `/instances/NAME`, the same files in each.

mod error;
mod options;
mod readme;

pub use error::FsError;
use options::{
    EXTRAS, copies_markers, latency_format_for, markers, option, pauses, set_option, with_extras,
};
pub use options::{layout, log_error};
use readme::README;

use crate::tracing::functions::{self, FunctionError, Kind, List};
use crate::tracing::{self, KernelPlatform};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::{self, Write};
use shell_core::path::normalize;
use shell_core::tree::{self, TraceOption, Tree};
use trace::ring::WriteError;
use trace::text::Layout;
use trace::{
    Clock, Instance, InstanceConfig, InstanceError, Tracer, event::DescriptorKind,
    event::EventDescriptor, tracer::is_function_event, tracer::is_settable,
};

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
    writeln!(out, "{mask:0digits$x}")
}

/// A `tracing_cpumask` with bits for CPUs that do not exist.
const ABSENT: FsError = FsError::Rule("the mask has bits for CPUs that do not exist");

/// Parses a hex CPU mask, in 32-bit groups between commas as Linux writes and reads
/// them beyond 32 CPUs (`1,00000002`: CPUs 1 and 32), or one group of up to 64
/// bits (a mask wider than 64 bits is [`ABSENT`]; the instance refuses bits for
/// CPUs it does not have).
fn parse_cpumask(value: &str) -> Result<u64, FsError> {
    const RULE: &str =
        "a hex mask with a bit per CPU, e.g. 3 for CPUs 0 and 1 (8 digits between commas)";
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
    Ok(mask)
}

/// The sizes of `instance`'s CPU rings in KB.
fn cpu_kb<'a>(instance: &'a Instance<'_, KernelPlatform>) -> impl Iterator<Item = usize> + 'a {
    (0..instance.tracer().cpus()).map(|cpu| instance.bytes_of_cpu(cpu).unwrap_or(0) / 1024)
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

/// One `set_event` entry, `[!]SYSTEM:EVENT` or `[!]NAME` (a `*` or empty SYSTEM or
/// EVENT: any): whether it enables, and the (system, event) patterns it selects. As
/// in Linux, a `NAME` without `:` selects the events of that name and the events of
/// the system of that name, and an empty one (a lone `!`) selects none.
fn set_event_entry(entry: &str) -> (bool, Selectors<'_>) {
    let (enable, spec) = match entry.strip_prefix('!') {
        Some(spec) => (false, spec),
        None => (true, entry),
    };
    let selectors = match spec.split_once(':') {
        Some((system, event)) => alloc::vec![(any_pattern(Some(system)), any_pattern(Some(event)))],
        None if spec.is_empty() => Vec::new(),
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
    const TOO_LARGE: FsError = FsError::Rule("the size is too large");
    let kb: usize = value.trim().parse().map_err(|e: core::num::ParseIntError| match e.kind() {
        core::num::IntErrorKind::PosOverflow => TOO_LARGE,
        _ => FsError::Rule(RULE),
    })?;
    match kb {
        0 => Err(FsError::Rule(RULE)),
        kb => kb.checked_mul(1024).ok_or(TOO_LARGE),
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
        File::CpuMask => instance.set_cpumask(parse_cpumask(value)?).map_err(|e| match e {
            InstanceError::Buffer(trace::Error::BadCpu) => ABSENT,
            e => e.into(),
        }),
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
