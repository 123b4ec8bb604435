//! What the shell keeps per instance beyond the tracer's state (the display options,
//! `trace_marker`'s and the pause's switches, the error log, the system filters'
//! text), and the `options/` files read and set over it and the tracer.

use super::{File, FsError, Located, Node};
use crate::tracing::KernelPlatform;
use crate::tracing::functions::Kind;
use alloc::collections::VecDeque;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;
use shell_core::tree::TraceOption;
use trace::text::Layout;
use trace::tracer::{HookError, TriggerReason};
use trace::{Instance, InstanceError, Mode};

/// Most entries `error_log` keeps per instance, the newest (Linux's
/// `TRACING_LOG_ERRS_MAX`).
pub(super) const ERROR_LOG_ENTRIES: usize = 8;

/// What the shell keeps per instance beyond the tracer's state: the display
/// options, whether `trace_marker` takes writes, whether reading `trace` pauses
/// writes, the error log and the system filters' text.
pub(super) struct Extras {
    pub(super) layout: Layout,
    pub(super) markers: bool,
    /// `copy_trace_marker`, if set (by default on at the top level only).
    pub(super) copy_markers: Option<bool>,
    /// `pause-on-trace`: writes are held off while `trace` is read.
    pub(super) pause_on_trace: bool,
    pub(super) errors: VecDeque<String>,
    /// The filter last set on each system (`events/SYS/filter` reads it back).
    pub(super) system_filters: Vec<(&'static str, String)>,
    /// While the irqsoff tracer is selected: `latency-format` as it was before.
    pub(super) latency_format_before: Option<bool>,
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
pub(super) static EXTRAS: spin::Mutex<Vec<(String, Extras)>> = spin::Mutex::new(Vec::new());

/// Runs `f` on the extras of `instance`, created if need be.
pub(super) fn with_extras<R>(
    instance: &Instance<'_, KernelPlatform>,
    f: impl FnOnce(&mut Extras) -> R,
) -> R {
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
pub(super) fn read_extras<R>(
    instance: &Instance<'_, KernelPlatform>,
    read: impl FnOnce(&Extras) -> R,
) -> R {
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
pub(super) fn latency_format_for(instance: &Instance<'_, KernelPlatform>, before: Kind, now: Kind) {
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
pub(super) fn markers(instance: &Instance<'_, KernelPlatform>) -> bool {
    read_extras(instance, |extras| extras.markers)
}

/// Whether the top level's marker writes go into `instance` too
/// (`options/copy_trace_marker`; by default, into the top level only).
pub(super) fn copies_markers(instance: &Instance<'_, KernelPlatform>) -> bool {
    read_extras(instance, |extras| extras.copy_markers).unwrap_or(instance.name().is_empty())
}

/// Whether reading `instance`'s `trace` files holds its writes off
/// (`options/pause-on-trace`).
pub(super) fn pauses(instance: &Instance<'_, KernelPlatform>) -> bool {
    read_extras(instance, |extras| extras.pause_on_trace)
}

/// Whether `error` refused `value`, a trigger line, in the `hist` command: its parse,
/// or a histogram the event has already.
fn hist_refused(error: &FsError, value: &str) -> bool {
    match error {
        FsError::Parse(HookError::Trigger(e)) => matches!(e.reason, TriggerReason::Hist(_)),
        FsError::Duplicate(_) => value.trim_start().starts_with("hist"),
        _ => false,
    }
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
        // A `hist` line refused, or one the event has already, as ftrace logs them.
        (Node::File(File::EventTrigger(event)), error) if hist_refused(error, value) => {
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

/// Whether `option` is on in `instance`.
pub(super) fn option(instance: &Instance<'_, KernelPlatform>, option: TraceOption) -> bool {
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
pub(super) fn set_option(
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
