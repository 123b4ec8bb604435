//! The tracing tree the shell shows, with ftrace's files and meanings
//! (Documentation/trace/ftrace.rst): the top-level instance at `/`, each named
//! instance at `/instances/NAME`, the same files in each.

use crate::tracing::{self, KernelPlatform};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt::{self, Write};
use trace::{
    DescriptorKind, EventDescriptor, Instance, InstanceConfig, InstanceError, Mode, Tracer,
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
    /// EBUSY.
    Busy,
    /// EACCES on a file that cannot be written.
    ReadOnly,
    /// EACCES on a file that cannot be read.
    WriteOnly,
    /// EEXIST.
    Exists,
    /// ENOSPC (no instance slot left).
    NoSpace,
    /// ENOMEM.
    NoMemory,
    /// EPERM (the top-level instance cannot be removed).
    NotPermitted,
    /// Tracing did not start at boot.
    NoTracer,
}

impl fmt::Display for FsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FsError::NotFound => "No such file or directory",
            FsError::NotDir => "Not a directory",
            FsError::IsDir => "Is a directory",
            FsError::Invalid => "Invalid argument",
            FsError::Busy => "Device or resource busy",
            FsError::ReadOnly => "Permission denied (read-only file)",
            FsError::WriteOnly => "Permission denied (write-only file)",
            FsError::Exists => "File exists",
            FsError::NoSpace => "No space left on device (too many instances)",
            FsError::NoMemory => "Cannot allocate memory",
            FsError::NotPermitted => "Operation not permitted",
            FsError::NoTracer => "tracing is not available",
        })
    }
}

impl From<InstanceError> for FsError {
    fn from(error: InstanceError) -> Self {
        match error {
            InstanceError::InvalidName | InstanceError::NoSuchEvent => FsError::Invalid,
            InstanceError::NotFound => FsError::NotFound,
            InstanceError::Busy => FsError::Busy,
            InstanceError::TooManyInstances => FsError::NoSpace,
            InstanceError::MemoryLimit => FsError::NoMemory,
            InstanceError::TopLevel => FsError::NotPermitted,
            InstanceError::Buffer(trace::Error::NoMemory | trace::Error::TooBig) => {
                FsError::NoMemory
            }
            InstanceError::Buffer(trace::Error::ZeroSize) => FsError::Invalid,
            InstanceError::Buffer(_) => FsError::Busy,
        }
    }
}

/// A directory of the tree.
#[derive(Clone, Copy, Debug)]
pub enum Dir {
    /// An instance's root.
    Root,
    /// `instances/` (top level only).
    Instances,
    /// `options/`.
    Options,
    /// `per_cpu/`.
    PerCpu,
    /// `per_cpu/cpuN/`.
    Cpu,
    /// `events/`.
    Events,
    /// `events/SYS/`.
    System(&'static str),
    /// `events/SYS/EVENT/`.
    Event,
}

/// A file of the tree.
#[derive(Clone, Copy, Debug)]
pub enum File {
    /// `available_events`.
    AvailableEvents,
    /// `set_event`.
    SetEvent,
    /// `tracing_on`.
    TracingOn,
    /// `trace` (non-consuming).
    Trace,
    /// `trace_pipe` (consuming).
    TracePipe,
    /// `snapshot`.
    Snapshot,
    /// `buffer_size_kb`.
    BufferSizeKb,
    /// `buffer_total_size_kb`.
    BufferTotalSizeKb,
    /// `trace_marker`.
    TraceMarker,
    /// `trace_clock`.
    TraceClock,
    /// `options/overwrite`.
    Overwrite,
    /// `per_cpu/cpuN/stats`.
    CpuStats(usize),
    /// `per_cpu/cpuN/trace`.
    CpuTrace(usize),
    /// `per_cpu/cpuN/trace_pipe`.
    CpuTracePipe(usize),
    /// `events/enable`, `events/SYS/enable`.
    Enable(Option<&'static str>),
    /// `events/SYS/EVENT/enable`.
    EventEnable(&'static EventDescriptor),
    /// `events/SYS/EVENT/format`.
    EventFormat(&'static EventDescriptor),
    /// `events/header_page`.
    HeaderPage,
    /// `events/header_event`.
    HeaderEvent,
    /// `events/SYS/EVENT/id`.
    EventId(&'static EventDescriptor),
}

/// What a path names.
#[derive(Clone, Copy, Debug)]
pub enum Node {
    /// A directory.
    Dir(Dir),
    /// A file.
    File(File),
}

/// A resolved path: the instance it lies in, and the node.
pub struct Located {
    /// The instance (a reference: it cannot be removed while held).
    pub instance: Instance<'static, KernelPlatform>,
    /// The node within the instance.
    pub node: Node,
    /// The absolute path, normalised.
    pub path: String,
}

/// The tracer, or the error every tracefs operation gives without one.
pub fn tracer() -> Result<&'static Tracer<KernelPlatform>, FsError> {
    tracing::tracer().ok_or(FsError::NoTracer)
}

/// Joins `path` to `cwd` and removes `.`, `..` and empty components.
pub fn normalize(cwd: &str, path: &str) -> Vec<String> {
    let mut parts: Vec<String> = Vec::new();
    let joined = if path.starts_with('/') { path.to_string() } else { format!("{cwd}/{path}") };
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part.to_string()),
        }
    }
    parts
}

/// The events of the tracer that tracefs shows (printk sites are not events).
pub fn events(
    tracer: &Tracer<KernelPlatform>,
) -> impl Iterator<Item = &'static EventDescriptor> + '_ {
    tracer.events().iter().copied().filter(|d| d.kind == DescriptorKind::Event)
}

fn system(tracer: &Tracer<KernelPlatform>, name: &str) -> Option<&'static str> {
    events(tracer).find(|d| d.system == name).map(|d| d.system)
}

fn parse_cpu(name: &str, cpus: usize) -> Option<usize> {
    name.strip_prefix("cpu")?.parse().ok().filter(|&cpu| cpu < cpus)
}

/// Resolves `path` (relative to `cwd`).
pub fn resolve(cwd: &str, path: &str) -> Result<Located, FsError> {
    let tracer = tracer()?;
    let parts = normalize(cwd, path);
    let mut absolute = String::new();
    for part in &parts {
        absolute.push('/');
        absolute.push_str(part);
    }
    if absolute.is_empty() {
        absolute.push('/');
    }
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    let (instance, rest) = match parts.as_slice() {
        ["instances", name, rest @ ..] => (tracer.lookup(name).ok_or(FsError::NotFound)?, rest),
        rest => (tracer.top(), rest),
    };
    let top = instance.is_top_level();
    let cpus = tracer.cpus();
    let node = match rest {
        [] => Node::Dir(Dir::Root),
        ["instances"] if top => Node::Dir(Dir::Instances),
        ["available_events"] => Node::File(File::AvailableEvents),
        ["set_event"] => Node::File(File::SetEvent),
        ["tracing_on"] => Node::File(File::TracingOn),
        ["trace"] => Node::File(File::Trace),
        ["trace_pipe"] => Node::File(File::TracePipe),
        ["snapshot"] => Node::File(File::Snapshot),
        ["buffer_size_kb"] => Node::File(File::BufferSizeKb),
        ["buffer_total_size_kb"] => Node::File(File::BufferTotalSizeKb),
        ["trace_marker"] => Node::File(File::TraceMarker),
        ["trace_clock"] => Node::File(File::TraceClock),
        ["options"] => Node::Dir(Dir::Options),
        ["options", "overwrite"] => Node::File(File::Overwrite),
        ["per_cpu"] => Node::Dir(Dir::PerCpu),
        ["per_cpu", cpu, rest @ ..] => {
            let cpu = parse_cpu(cpu, cpus).ok_or(FsError::NotFound)?;
            match rest {
                [] => Node::Dir(Dir::Cpu),
                ["stats"] => Node::File(File::CpuStats(cpu)),
                ["trace"] => Node::File(File::CpuTrace(cpu)),
                ["trace_pipe"] => Node::File(File::CpuTracePipe(cpu)),
                _ => return Err(FsError::NotFound),
            }
        }
        ["events"] => Node::Dir(Dir::Events),
        ["events", "enable"] => Node::File(File::Enable(None)),
        ["events", "header_page"] => Node::File(File::HeaderPage),
        ["events", "header_event"] => Node::File(File::HeaderEvent),
        ["events", sys, rest @ ..] => {
            let sys = system(tracer, sys).ok_or(FsError::NotFound)?;
            match rest {
                [] => Node::Dir(Dir::System(sys)),
                ["enable"] => Node::File(File::Enable(Some(sys))),
                [event, rest @ ..] => {
                    let event = events(tracer)
                        .find(|d| d.system == sys && d.name == *event)
                        .ok_or(FsError::NotFound)?;
                    match rest {
                        [] => Node::Dir(Dir::Event),
                        ["enable"] => Node::File(File::EventEnable(event)),
                        ["format"] => Node::File(File::EventFormat(event)),
                        ["id"] => Node::File(File::EventId(event)),
                        _ => return Err(FsError::NotFound),
                    }
                }
            }
        }
        _ => return Err(FsError::NotFound),
    };
    Ok(Located { instance, node, path: absolute })
}

/// The entries of a directory: names, directories with a trailing `/`.
pub fn list(located: &Located) -> Result<Vec<String>, FsError> {
    let Node::Dir(dir) = located.node else { return Err(FsError::NotDir) };
    let tracer = tracer()?;
    let names: Vec<String> = match dir {
        Dir::Root => {
            let mut names: Vec<String> = [
                "available_events",
                "buffer_size_kb",
                "buffer_total_size_kb",
                "events/",
                "options/",
                "per_cpu/",
                "set_event",
                "snapshot",
                "trace",
                "trace_clock",
                "trace_marker",
                "trace_pipe",
                "tracing_on",
            ]
            .map(String::from)
            .into();
            if located.instance.is_top_level() {
                names.insert(3, "instances/".into());
            }
            names
        }
        Dir::Instances => tracer.instance_names().into_iter().map(|n| n + "/").collect(),
        Dir::Options => ["overwrite".into()].into(),
        Dir::PerCpu => (0..tracer.cpus()).map(|cpu| format!("cpu{cpu}/")).collect(),
        Dir::Cpu => ["stats", "trace", "trace_pipe"].map(String::from).into(),
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
            let mut names: Vec<String> = ["enable".into()].into();
            names
                .extend(events(tracer).filter(|d| d.system == sys).map(|d| format!("{}/", d.name)));
            names
        }
        Dir::Event => ["enable", "format", "id"].map(String::from).into(),
    };
    Ok(names)
}

/// `0`, `1`, or `X` (mixed) for a set of events' enable state in `instance`.
fn enable_state<'a>(
    instance: &Instance<'_, KernelPlatform>,
    set: impl Iterator<Item = &'a EventDescriptor>,
) -> char {
    let (mut on, mut off) = (false, false);
    for d in set {
        if instance.event_enabled(d) {
            on = true;
        } else {
            off = true;
        }
    }
    match (on, off) {
        (true, true) => 'X',
        (true, false) => '1',
        _ => '0',
    }
}

/// Writes the `format` file of an event (libtraceevent's syntax; see
/// [`trace::format_file`] for the record layout it describes).
fn write_format(out: &mut dyn Write, d: &EventDescriptor) -> fmt::Result {
    trace::format_file::write_format(out, d.name, d.id(), d.fields, d.format)
}

/// Bytes of a ring page as `events/header_page` describes it.
const PAGE_SIZE: usize = 4096;

const SNAPSHOT_HELP: &str = "\
# Snapshot commands:
# echo 0 > snapshot : Clears and frees snapshot buffer
# echo 1 > snapshot : Allocates snapshot buffer, if not already allocated.
#                      Takes a snapshot of the main buffer.
# echo 2 > snapshot : Clears snapshot buffer (but does not allocate or free)
";

/// Reads a file into `out`. The `trace_pipe` files are read by the shell's
/// streaming reader, not here.
pub fn read(located: &Located, out: &mut dyn Write) -> Result<(), FsError> {
    let Node::File(file) = located.node else { return Err(FsError::IsDir) };
    let tracer = tracer()?;
    let instance = &located.instance;
    let result = match file {
        File::AvailableEvents => {
            events(tracer).try_for_each(|d| writeln!(out, "{}:{}", d.system, d.name))
        }
        File::SetEvent => events(tracer)
            .filter(|d| instance.event_enabled(d))
            .try_for_each(|d| writeln!(out, "{}:{}", d.system, d.name)),
        File::TracingOn => writeln!(out, "{}", u8::from(instance.tracing())),
        File::Trace => tracing::write_trace(out, instance, None),
        File::CpuTrace(cpu) => tracing::write_trace(out, instance, Some(cpu)),
        File::Snapshot => {
            if instance.has_snapshot() {
                writeln!(out, "# * Snapshot is allocated *\n#")
                    .and_then(|()| out.write_str(SNAPSHOT_HELP))
                    .and_then(|()| tracing::write_snapshot(out, instance))
            } else {
                writeln!(out, "# * Snapshot is freed *\n#")
                    .and_then(|()| out.write_str(SNAPSHOT_HELP))
            }
        }
        File::BufferSizeKb => writeln!(out, "{}", instance.bytes_per_cpu() / 1024),
        File::BufferTotalSizeKb => {
            let sets = if instance.has_snapshot() { 2 } else { 1 };
            writeln!(out, "{}", instance.bytes_per_cpu() / 1024 * tracer.cpus() * sets)
        }
        File::TraceMarker => return Err(FsError::WriteOnly),
        File::TraceClock => writeln!(out, "[local]"),
        File::Overwrite => writeln!(out, "{}", u8::from(instance.mode() == Mode::Overwrite)),
        File::CpuStats(cpu) => tracing::write_cpu_stats(out, instance, cpu),
        File::Enable(sys) => {
            let state = enable_state(
                instance,
                events(tracer).filter(|d| sys.is_none_or(|s| d.system == s)),
            );
            writeln!(out, "{state}")
        }
        File::EventEnable(d) => writeln!(out, "{}", u8::from(instance.event_enabled(d))),
        File::EventFormat(d) => write_format(out, d),
        File::HeaderPage => trace::format_file::write_header_page(out, PAGE_SIZE),
        File::HeaderEvent => trace::format_file::write_header_event(out),
        File::EventId(d) => writeln!(out, "{}", d.id()),
        File::TracePipe | File::CpuTracePipe(_) => return Err(FsError::Invalid),
    };
    // The console never fails a write; a formatting error would be a bug.
    result.map_err(|_| FsError::Invalid)
}

/// Parses a `0`/`1` switch value.
fn switch(value: &str) -> Result<bool, FsError> {
    match value.trim() {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err(FsError::Invalid),
    }
}

/// A pattern, or `None` for "any" (`*` or empty).
fn any_pattern(pattern: Option<&str>) -> Option<&str> {
    pattern.filter(|p| !p.is_empty() && *p != "*")
}

/// One `set_event` entry, `[!]SYSTEM:EVENT` or `[!]EVENT` (`*` or empty: any):
/// whether it enables, and the system and event patterns.
fn set_event_entry(entry: &str) -> (bool, Option<&str>, Option<&str>) {
    let (enable, spec) = match entry.strip_prefix('!') {
        Some(spec) => (false, spec),
        None => (true, entry),
    };
    let (system, event) =
        spec.split_once(':').map_or((None, Some(spec)), |(s, e)| (Some(s), Some(e)));
    (enable, any_pattern(system), any_pattern(event))
}

/// Writes `value` to a file (`append` for `>>`). On error nothing changed.
pub fn write(located: &Located, value: &str, append: bool) -> Result<(), FsError> {
    let Node::File(file) = located.node else { return Err(FsError::IsDir) };
    let tracer = tracer()?;
    let instance = &located.instance;
    match file {
        File::SetEvent => {
            let entries: Vec<_> = value.split_ascii_whitespace().map(set_event_entry).collect();
            // Validate every entry first, so a bad one changes nothing.
            if !entries.iter().all(|&(_, sys, ev)| events(tracer).any(|d| d.matches(sys, ev))) {
                return Err(FsError::Invalid);
            }
            if !append {
                instance.set_event(None, None, false)?;
            }
            for (enable, system, event) in entries {
                instance.set_event(system, event, enable)?;
            }
            Ok(())
        }
        File::TracingOn => {
            instance.set_tracing(switch(value)?);
            Ok(())
        }
        // Emptying one CPU's ring alone is not supported: refused, nothing changes.
        File::CpuTrace(_) => Err(FsError::Invalid),
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
        File::Snapshot => match value.trim() {
            "0" => Ok(instance.snapshot_free()?),
            "1" => Ok(instance.snapshot_take()?),
            "2" => match instance.has_snapshot() {
                true => Ok(instance.snapshot_clear()?),
                false => Err(FsError::Invalid),
            },
            _ => Err(FsError::Invalid),
        },
        File::BufferSizeKb => {
            let kb: usize = value.trim().parse().map_err(|_| FsError::Invalid)?;
            if kb == 0 {
                return Err(FsError::Invalid);
            }
            Ok(instance.resize(kb.checked_mul(1024).ok_or(FsError::NoMemory)?)?)
        }
        File::TraceMarker => {
            instance.write_marker(value);
            Ok(())
        }
        File::TraceClock => match value.trim() {
            "local" => Ok(()),
            _ => Err(FsError::Invalid),
        },
        File::Overwrite => {
            instance.set_mode(if switch(value)? { Mode::Overwrite } else { Mode::Discard });
            Ok(())
        }
        File::Enable(sys) => Ok(instance.set_event(sys, None, switch(value)?).map(drop)?),
        File::EventEnable(d) => {
            Ok(instance.set_event(Some(d.system), Some(d.name), switch(value)?).map(drop)?)
        }
        File::AvailableEvents
        | File::TracePipe
        | File::BufferTotalSizeKb
        | File::CpuStats(_)
        | File::CpuTracePipe(_)
        | File::EventFormat(_)
        | File::HeaderPage
        | File::HeaderEvent
        | File::EventId(_) => Err(FsError::ReadOnly),
    }
}

/// `mkdir instances/NAME`.
pub fn mkdir(cwd: &str, path: &str) -> Result<(), FsError> {
    let tracer = tracer()?;
    let parts = normalize(cwd, path);
    let ["instances", name] = parts.iter().map(String::as_str).collect::<Vec<_>>()[..] else {
        return Err(if resolve(cwd, path).is_ok() {
            FsError::Exists
        } else {
            FsError::NotPermitted
        });
    };
    if tracer.lookup(name).is_some() {
        return Err(FsError::Exists);
    }
    tracer.get_or_create(name, InstanceConfig::default()).map(drop).map_err(FsError::from)
}

/// `rmdir instances/NAME`.
pub fn rmdir(cwd: &str, path: &str) -> Result<(), FsError> {
    let tracer = tracer()?;
    let parts = normalize(cwd, path);
    match parts.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["instances", name] => tracer.destroy_by_name(name).map_err(FsError::from),
        _ => {
            Err(if resolve(cwd, path).is_ok() { FsError::NotPermitted } else { FsError::NotFound })
        }
    }
}
