//! The tree's errors: each printed as the errno text a Linux shell would show, with
//! the rule that refused the operation, and made from the tracer's errors.

use super::{INSTANCES_ONLY, tracer};
use crate::tracing::functions::FunctionError;
use core::fmt;
use trace::InstanceError;
use trace::event::inject::InjectError;
use trace::tracer::{FunctionError as TracerFunctionError, HookError, TriggerError, TriggerReason};

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
                    "Invalid argument ({})",
                    trace::name::RULE
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
    pub(super) fn position(&self) -> usize {
        match self {
            FsError::Parse(HookError::Filter(e)) => e.pos,
            FsError::Parse(HookError::Trigger(e)) | FsError::Duplicate(e) => e.pos,
            FsError::Inject(e) => e.pos,
            _ => 0,
        }
    }
}
