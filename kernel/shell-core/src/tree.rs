//! The shape of the tracefs tree: which paths name which directories and files.
//! The kernel supplies what exists (instances, CPUs, event systems and events)
//! through [`Tree`]; [`resolve`] does the rest.

use crate::path::normalize;
use alloc::string::String;
use alloc::vec::Vec;

/// What the tree holds, as far as resolving a path needs to know.
pub trait Tree {
    /// An instance (the top level or a named one).
    type Instance;
    /// An event system, as the tree names it.
    type System: Copy;
    /// An event, as the tree names it.
    type Event: Copy;
    /// The top-level instance.
    fn top(&self) -> Self::Instance;
    /// The named instance `name`, if it exists.
    fn instance(&self, name: &str) -> Option<Self::Instance>;
    /// Whether `instance` is the top-level instance.
    fn is_top(&self, instance: &Self::Instance) -> bool;
    /// The number of CPUs (`per_cpu/cpu0` to `cpuN-1`).
    fn cpus(&self) -> usize;
    /// The event system `name`, if an event has it.
    fn system(&self, name: &str) -> Option<Self::System>;
    /// The event `name` of `system`, if it exists.
    fn event(&self, system: Self::System, name: &str) -> Option<Self::Event>;
}

/// A directory of the tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir<S> {
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
    System(S),
    /// `events/SYS/EVENT/`.
    Event,
    /// `trace_stat/` (top level only).
    TraceStat,
}

/// A file of `options/`: one of ftrace's trace options, on or off per instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceOption {
    /// `annotate`: a line where each CPU's records start, in a buffer that
    /// overwrote records.
    Annotate,
    /// `context-info`: the task, CPU, flags and timestamp columns.
    ContextInfo,
    /// `copy_trace_marker`: the top level's marker writes go into the instance too
    /// (on by default at the top level only).
    CopyTraceMarker,
    /// `func_stack_trace`: a stack trace after each function the tracer records.
    FuncStackTrace,
    /// `funcgraph-abstime`: a `function_graph` line's timestamp.
    GraphAbstime,
    /// `funcgraph-cpu`: a `function_graph` line's CPU.
    GraphCpu,
    /// `funcgraph-duration`: a `function_graph` line's duration.
    GraphDuration,
    /// `funcgraph-overhead`: a long call's mark beside its duration.
    GraphOverhead,
    /// `funcgraph-proc`: a `function_graph` line's task.
    GraphProc,
    /// `funcgraph-tail`: a return names its function.
    GraphTail,
    /// `irq-info`: the flags column.
    IrqInfo,
    /// `latency-format`: the latency header and columns.
    LatencyFormat,
    /// `markers`: `trace_marker` and `trace_marker_raw` take writes.
    Markers,
    /// `nanoseconds`: timestamps in ns rather than µs.
    Nanoseconds,
    /// `overwrite`: a full buffer overwrites its oldest events.
    Overwrite,
    /// `pause-on-trace`: reading `trace` holds writes off.
    PauseOnTrace,
    /// `print-parent`: a function tracer line names the caller.
    PrintParent,
    /// `printk-msg-only`: a message's line is its text alone.
    PrintkMsgOnly,
    /// `stacktrace`: a stack trace after each tracepoint the instance records.
    StackTrace,
    /// `sym-addr`: a function tracer line shows addresses too.
    SymAddr,
    /// `sym-offset`: a function tracer line shows offsets in functions.
    SymOffset,
    /// `trace_printk`: `printk!` records into the instance.
    TracePrintk,
}

impl TraceOption {
    /// Every option, in the order `options/` and `trace_options` list them.
    pub const ALL: [TraceOption; 22] = [
        TraceOption::Annotate,
        TraceOption::ContextInfo,
        TraceOption::CopyTraceMarker,
        TraceOption::FuncStackTrace,
        TraceOption::GraphAbstime,
        TraceOption::GraphCpu,
        TraceOption::GraphDuration,
        TraceOption::GraphOverhead,
        TraceOption::GraphProc,
        TraceOption::GraphTail,
        TraceOption::IrqInfo,
        TraceOption::LatencyFormat,
        TraceOption::Markers,
        TraceOption::Nanoseconds,
        TraceOption::Overwrite,
        TraceOption::PauseOnTrace,
        TraceOption::PrintParent,
        TraceOption::PrintkMsgOnly,
        TraceOption::StackTrace,
        TraceOption::SymAddr,
        TraceOption::SymOffset,
        TraceOption::TracePrintk,
    ];

    /// The option's file name (ftrace's).
    pub fn name(self) -> &'static str {
        match self {
            TraceOption::Annotate => "annotate",
            TraceOption::ContextInfo => "context-info",
            TraceOption::CopyTraceMarker => "copy_trace_marker",
            TraceOption::FuncStackTrace => "func_stack_trace",
            TraceOption::GraphAbstime => "funcgraph-abstime",
            TraceOption::GraphCpu => "funcgraph-cpu",
            TraceOption::GraphDuration => "funcgraph-duration",
            TraceOption::GraphOverhead => "funcgraph-overhead",
            TraceOption::GraphProc => "funcgraph-proc",
            TraceOption::GraphTail => "funcgraph-tail",
            TraceOption::IrqInfo => "irq-info",
            TraceOption::LatencyFormat => "latency-format",
            TraceOption::Markers => "markers",
            TraceOption::Nanoseconds => "nanoseconds",
            TraceOption::Overwrite => "overwrite",
            TraceOption::PauseOnTrace => "pause-on-trace",
            TraceOption::PrintParent => "print-parent",
            TraceOption::PrintkMsgOnly => "printk-msg-only",
            TraceOption::StackTrace => "stacktrace",
            TraceOption::SymAddr => "sym-addr",
            TraceOption::SymOffset => "sym-offset",
            TraceOption::TracePrintk => "trace_printk",
        }
    }

    /// Whether a new instance starts with the top level's value, as Linux's copies
    /// the top level's trace flags: all but the one it zeroes for an instance
    /// (`copy_trace_marker`) and the tracers' own options (`funcgraph-*`,
    /// `func_stack_trace`), which start at their defaults. (`trace_printk`, which
    /// gates `printk!` into the instance, starts as the top level's, as Linux's
    /// `trace_array_printk` follows the top level's option.)
    pub fn inherited(self) -> bool {
        !matches!(
            self,
            TraceOption::CopyTraceMarker
                | TraceOption::FuncStackTrace
                | TraceOption::GraphAbstime
                | TraceOption::GraphCpu
                | TraceOption::GraphDuration
                | TraceOption::GraphOverhead
                | TraceOption::GraphProc
                | TraceOption::GraphTail
        )
    }

    /// The option whose file is `name`.
    pub fn named(name: &str) -> Option<TraceOption> {
        Self::ALL.into_iter().find(|option| option.name() == name)
    }
}

/// A file of the tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum File<S, E> {
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
    /// A file of `options/`.
    TraceOption(TraceOption),
    /// `trace_options`: every file of `options/` as one list.
    TraceOptions,
    /// `tracing_cpumask`.
    CpuMask,
    /// `README` (top level).
    Readme,
    /// `available_tracers`.
    AvailableTracers,
    /// `current_tracer`.
    CurrentTracer,
    /// `available_filter_functions` (top level).
    AvailableFilterFunctions,
    /// `available_filter_functions_addrs` (top level): each function with its address.
    AvailableFilterFunctionsAddrs,
    /// `show_event_filters`: every event with a filter, and the filter.
    ShowEventFilters,
    /// `show_event_triggers`: every event with triggers, a line per trigger.
    ShowEventTriggers,
    /// `enabled_functions` (top level): the functions whose entries are calls.
    EnabledFunctions,
    /// `touched_functions` (top level): the functions whose entries have been calls.
    TouchedFunctions,
    /// `dyn_ftrace_total_info` (top level): how many functions may be traced.
    DynFtraceTotalInfo,
    /// `set_ftrace_filter`.
    SetFtraceFilter,
    /// `set_ftrace_notrace`.
    SetFtraceNotrace,
    /// `set_graph_function`.
    SetGraphFunction,
    /// `set_graph_notrace`.
    SetGraphNotrace,
    /// `max_graph_depth` (top level).
    MaxGraphDepth,
    /// `tracing_thresh` (top level).
    TracingThresh,
    /// `tracing_max_latency`.
    TracingMaxLatency,
    /// `function_profile_enabled` (top level).
    FunctionProfileEnabled,
    /// `trace_stat/functionN` (top level): CPU N's function profile.
    FunctionStat(usize),
    /// `stack_tracer_enabled` (top level).
    StackTracerEnabled,
    /// `stack_max_size` (top level).
    StackMaxSize,
    /// `stack_trace` (top level).
    StackTrace,
    /// `stack_trace_filter` (top level).
    StackTraceFilter,
    /// `trace_marker_raw`.
    TraceMarkerRaw,
    /// `buffer_subbuf_size_kb`.
    SubbufSizeKb,
    /// `printk_formats` (top level).
    PrintkFormats,
    /// `error_log`.
    ErrorLog,
    /// `per_cpu/cpuN/buffer_size_kb`.
    CpuBufferSizeKb(usize),
    /// `per_cpu/cpuN/stats`.
    CpuStats(usize),
    /// `per_cpu/cpuN/trace`.
    CpuTrace(usize),
    /// `trace_pipe_raw` (consuming, the records as a growing dump).
    TracePipeRaw,
    /// `per_cpu/cpuN/trace_pipe_raw`.
    CpuTracePipeRaw(usize),
    /// `per_cpu/cpuN/snapshot`.
    CpuSnapshot(usize),
    /// `per_cpu/cpuN/trace_pipe`.
    CpuTracePipe(usize),
    /// `events/enable`, `events/SYS/enable`.
    Enable(Option<S>),
    /// `events/SYS/EVENT/enable`.
    EventEnable(E),
    /// `events/SYS/EVENT/format`.
    EventFormat(E),
    /// `events/header_page`.
    HeaderPage,
    /// `events/header_event`.
    HeaderEvent,
    /// `events/SYS/EVENT/id`.
    EventId(E),
    /// `events/SYS/EVENT/filter`.
    EventFilter(E),
    /// `events/SYS/filter`.
    SystemFilter(S),
    /// `events/SYS/EVENT/trigger`.
    EventTrigger(E),
    /// `events/SYS/EVENT/hist`.
    EventHist(E),
    /// `events/SYS/EVENT/inject`: records the event written by hand.
    EventInject(E),
}

/// What a path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Node<S, E> {
    /// A directory.
    Dir(Dir<S>),
    /// A file.
    File(File<S, E>),
}

/// A path resolved in a [`Tree`].
pub struct Resolved<T: Tree> {
    /// The instance the path lies in.
    pub instance: T::Instance,
    /// The node within the instance.
    pub node: Node<T::System, T::Event>,
    /// The absolute path, normalised (`/` for the root).
    pub path: String,
}

/// The node of an instance's root that `rest` names, for an instance at the top
/// level (`top`) or not; `None`: no such node.
fn node<T: Tree>(tree: &T, rest: &[&str], top: bool) -> Option<Node<T::System, T::Event>> {
    use File::*;
    let file = |f| Some(Node::File(f));
    let dir = |d| Some(Node::Dir(d));
    match rest {
        [] => dir(Dir::Root),
        ["instances"] if top => dir(Dir::Instances),
        ["available_events"] => file(AvailableEvents),
        ["set_event"] => file(SetEvent),
        ["tracing_on"] => file(TracingOn),
        ["trace"] => file(Trace),
        ["trace_pipe"] => file(TracePipe),
        ["trace_pipe_raw"] => file(TracePipeRaw),
        ["snapshot"] => file(Snapshot),
        ["buffer_size_kb"] => file(BufferSizeKb),
        ["buffer_total_size_kb"] => file(BufferTotalSizeKb),
        ["trace_marker"] => file(TraceMarker),
        ["trace_clock"] => file(TraceClock),
        ["trace_options"] => file(TraceOptions),
        ["options"] => dir(Dir::Options),
        ["options", name] => file(TraceOption(self::TraceOption::named(name)?)),
        ["tracing_cpumask"] => file(CpuMask),
        ["README"] if top => file(Readme),
        ["available_tracers"] => file(AvailableTracers),
        ["current_tracer"] => file(CurrentTracer),
        ["available_filter_functions"] if top => file(AvailableFilterFunctions),
        ["available_filter_functions_addrs"] if top => file(AvailableFilterFunctionsAddrs),
        ["show_event_filters"] => file(ShowEventFilters),
        ["show_event_triggers"] => file(ShowEventTriggers),
        ["enabled_functions"] if top => file(EnabledFunctions),
        ["touched_functions"] if top => file(TouchedFunctions),
        ["dyn_ftrace_total_info"] if top => file(DynFtraceTotalInfo),
        ["set_ftrace_filter"] => file(SetFtraceFilter),
        ["set_ftrace_notrace"] => file(SetFtraceNotrace),
        ["set_graph_function"] => file(SetGraphFunction),
        ["set_graph_notrace"] => file(SetGraphNotrace),
        ["max_graph_depth"] if top => file(MaxGraphDepth),
        ["tracing_thresh"] if top => file(TracingThresh),
        ["tracing_max_latency"] => file(TracingMaxLatency),
        ["function_profile_enabled"] if top => file(FunctionProfileEnabled),
        ["trace_stat"] if top => dir(Dir::TraceStat),
        ["trace_stat", name] if top => {
            file(FunctionStat(cpu_number(name.strip_prefix("function")?, tree.cpus())?))
        }
        ["stack_tracer_enabled"] if top => file(StackTracerEnabled),
        ["stack_max_size"] if top => file(StackMaxSize),
        ["stack_trace"] if top => file(StackTrace),
        ["stack_trace_filter"] if top => file(StackTraceFilter),
        ["trace_marker_raw"] => file(TraceMarkerRaw),
        ["buffer_subbuf_size_kb"] => file(SubbufSizeKb),
        ["printk_formats"] if top => file(PrintkFormats),
        ["error_log"] => file(ErrorLog),
        ["per_cpu"] => dir(Dir::PerCpu),
        ["per_cpu", cpu, rest @ ..] => {
            let cpu = parse_cpu(cpu, tree.cpus())?;
            match rest {
                [] => dir(Dir::Cpu),
                ["stats"] => file(CpuStats(cpu)),
                ["trace"] => file(CpuTrace(cpu)),
                ["trace_pipe"] => file(CpuTracePipe(cpu)),
                ["trace_pipe_raw"] => file(CpuTracePipeRaw(cpu)),
                ["snapshot"] => file(CpuSnapshot(cpu)),
                ["buffer_size_kb"] => file(CpuBufferSizeKb(cpu)),
                _ => None,
            }
        }
        ["events"] => dir(Dir::Events),
        ["events", "enable"] => file(Enable(None)),
        ["events", "header_page"] => file(HeaderPage),
        ["events", "header_event"] => file(HeaderEvent),
        ["events", sys, rest @ ..] => {
            let sys = tree.system(sys)?;
            match rest {
                [] => dir(Dir::System(sys)),
                ["enable"] => file(Enable(Some(sys))),
                ["filter"] => file(SystemFilter(sys)),
                [event, rest @ ..] => {
                    let event = tree.event(sys, event)?;
                    match rest {
                        [] => dir(Dir::Event),
                        ["enable"] => file(EventEnable(event)),
                        ["format"] => file(EventFormat(event)),
                        ["id"] => file(EventId(event)),
                        ["filter"] => file(EventFilter(event)),
                        ["trigger"] => file(EventTrigger(event)),
                        ["hist"] => file(EventHist(event)),
                        ["inject"] => file(EventInject(event)),
                        _ => None,
                    }
                }
            }
        }
        _ => None,
    }
}

/// `cpuN` with `N` below `cpus` (decimal digits only: `cpu+1` and `cpu01` name
/// nothing, as in tracefs).
fn parse_cpu(name: &str, cpus: usize) -> Option<usize> {
    cpu_number(name.strip_prefix("cpu")?, cpus)
}

/// A CPU number below `cpus`, in decimal without leading zeros.
fn cpu_number(digits: &str, cpus: usize) -> Option<usize> {
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    digits.parse().ok().filter(|&cpu| canonical && cpu < cpus)
}

/// Resolves `path` (relative to `cwd` unless absolute) in `tree`; `None`: the path
/// names nothing.
pub fn resolve<T: Tree>(tree: &T, cwd: &str, path: &str) -> Option<Resolved<T>> {
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
        ["instances", name, rest @ ..] => (tree.instance(name)?, rest),
        rest => (tree.top(), rest),
    };
    let node = node(tree, rest, tree.is_top(&instance))?;
    Some(Resolved { instance, node, path: absolute })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two CPUs, an instance `foo`, and the events `sched:switch` and `irq:entry`.
    struct Fake;

    impl Tree for Fake {
        type Instance = &'static str;
        type System = &'static str;
        type Event = (&'static str, &'static str);
        fn top(&self) -> &'static str {
            ""
        }
        fn instance(&self, name: &str) -> Option<&'static str> {
            (name == "foo").then_some("foo")
        }
        fn is_top(&self, instance: &&'static str) -> bool {
            instance.is_empty()
        }
        fn cpus(&self) -> usize {
            2
        }
        fn system(&self, name: &str) -> Option<&'static str> {
            ["sched", "irq"].into_iter().find(|s| *s == name)
        }
        fn event(&self, system: &'static str, name: &str) -> Option<Self::Event> {
            [("sched", "switch"), ("irq", "entry")]
                .into_iter()
                .find(|&(s, n)| s == system && n == name)
        }
    }

    type N = Node<&'static str, (&'static str, &'static str)>;

    fn at(cwd: &str, path: &str) -> Option<(&'static str, N, String)> {
        resolve(&Fake, cwd, path).map(|r| (r.instance, r.node, r.path))
    }

    fn node_at(cwd: &str, path: &str) -> Option<N> {
        at(cwd, path).map(|(_, node, _)| node)
    }

    #[test]
    fn top_level_files_and_directories() {
        assert_eq!(at("/", ""), Some(("", Node::Dir(Dir::Root), "/".into())));
        assert_eq!(at("/", "trace"), Some(("", Node::File(File::Trace), "/trace".into())));
        let overwrite = Some(Node::File(File::TraceOption(TraceOption::Overwrite)));
        assert_eq!(node_at("/", "options/overwrite"), overwrite);
        let context = Some(Node::File(File::TraceOption(TraceOption::ContextInfo)));
        assert_eq!(node_at("/", "options/context-info"), context);
        assert_eq!(node_at("/", "options/context_info"), None);
        assert_eq!(node_at("/", "options"), Some(Node::Dir(Dir::Options)));
        assert_eq!(node_at("/", "README"), Some(Node::File(File::Readme)));
        assert_eq!(node_at("/", "instances"), Some(Node::Dir(Dir::Instances)));
        assert_eq!(node_at("/", "printk_formats"), Some(Node::File(File::PrintkFormats)));
        let filters = Some(Node::File(File::ShowEventFilters));
        assert_eq!(node_at("/instances/foo", "show_event_filters"), filters);
        let triggers = Some(Node::File(File::ShowEventTriggers));
        assert_eq!(node_at("/instances/foo", "show_event_triggers"), triggers);
        assert_eq!(node_at("/", "stack_trace"), Some(Node::File(File::StackTrace)));
        assert_eq!(node_at("/", "trace_stat"), Some(Node::Dir(Dir::TraceStat)));
        let stat = |path: &str| node_at("/", path);
        assert_eq!(stat("trace_stat/function1"), Some(Node::File(File::FunctionStat(1))));
        for bad in ["function4", "function01", "function", "functionx", "cpu0", "function-1"] {
            assert_eq!(stat(&alloc::format!("trace_stat/{bad}")), None, "{bad}");
        }
    }

    #[test]
    fn instances_have_the_same_files_but_not_the_top_level_ones() {
        let foo = |path: &str| at("/", path).map(|(i, node, _)| (i, node));
        assert_eq!(foo("instances/foo"), Some(("foo", Node::Dir(Dir::Root))));
        assert_eq!(foo("instances/foo/trace"), Some(("foo", Node::File(File::Trace))));
        assert_eq!(foo("/instances/foo/snapshot"), Some(("foo", Node::File(File::Snapshot))));
        let stack = ["stack_tracer_enabled", "stack_max_size", "stack_trace", "stack_trace_filter"];
        let stack = stack.into_iter().chain(["tracing_thresh", "function_profile_enabled"]);
        let stack = stack.chain(["trace_stat", "trace_stat/function0"]);
        let stack = stack.chain(["available_filter_functions_addrs", "touched_functions"]);
        for top_only in ["README", "instances", "printk_formats"].into_iter().chain(stack) {
            assert_eq!(foo(&alloc::format!("instances/foo/{top_only}")), None, "{top_only}");
        }
        assert_eq!(at("/", "instances/bar/trace"), None, "no such instance");
        assert_eq!(at("/", "instances/foo/instances/foo"), None, "instances do not nest");
    }

    #[test]
    fn per_cpu_files_take_cpus_in_range_only() {
        assert_eq!(node_at("/", "per_cpu"), Some(Node::Dir(Dir::PerCpu)));
        assert_eq!(node_at("/", "per_cpu/cpu1"), Some(Node::Dir(Dir::Cpu)));
        assert_eq!(node_at("/", "per_cpu/cpu1/stats"), Some(Node::File(File::CpuStats(1))));
        assert_eq!(node_at("/", "per_cpu/cpu0/trace"), Some(Node::File(File::CpuTrace(0))));
        let snapshot = Some(Node::File(File::CpuSnapshot(1)));
        assert_eq!(node_at("/instances/foo", "per_cpu/cpu1/snapshot"), snapshot);
        assert_eq!(
            node_at("/instances/foo", "per_cpu/cpu1/trace_pipe_raw"),
            Some(Node::File(File::CpuTracePipeRaw(1)))
        );
        for bad in
            ["cpu2", "cpu", "cpu-1", "cpu+1", "cpu01", "cpux", "1", "cpu99999999999999999999"]
        {
            assert_eq!(node_at("/", &alloc::format!("per_cpu/{bad}")), None, "{bad}");
        }
        assert_eq!(node_at("/", "per_cpu/cpu0/nonesuch"), None);
        assert_eq!(node_at("/", "per_cpu/cpu0/stats/deeper"), None);
    }

    #[test]
    fn event_directories_and_their_files() {
        let ev = ("sched", "switch");
        assert_eq!(node_at("/", "events"), Some(Node::Dir(Dir::Events)));
        assert_eq!(node_at("/", "events/enable"), Some(Node::File(File::Enable(None))));
        assert_eq!(node_at("/", "events/sched"), Some(Node::Dir(Dir::System("sched"))));
        assert_eq!(
            node_at("/", "events/sched/enable"),
            Some(Node::File(File::Enable(Some("sched"))))
        );
        assert_eq!(node_at("/", "events/irq/filter"), Some(Node::File(File::SystemFilter("irq"))));
        assert_eq!(node_at("/", "events/sched/switch"), Some(Node::Dir(Dir::Event)));
        assert_eq!(
            node_at("/", "events/sched/switch/enable"),
            Some(Node::File(File::EventEnable(ev)))
        );
        assert_eq!(
            node_at("/", "events/sched/switch/filter"),
            Some(Node::File(File::EventFilter(ev)))
        );
        assert_eq!(
            node_at("/", "events/sched/switch/trigger"),
            Some(Node::File(File::EventTrigger(ev)))
        );
        assert_eq!(node_at("/", "events/sched/switch/hist"), Some(Node::File(File::EventHist(ev))));
        assert_eq!(
            node_at("/", "events/sched/switch/format"),
            Some(Node::File(File::EventFormat(ev)))
        );
        assert_eq!(node_at("/", "events/sched/switch/id"), Some(Node::File(File::EventId(ev))));
        assert_eq!(node_at("/", "events/header_page"), Some(Node::File(File::HeaderPage)));
        assert_eq!(node_at("/", "events/nosys"), None);
        assert_eq!(node_at("/", "events/irq/switch"), None, "an event of another system");
        assert_eq!(node_at("/", "events/sched/switch/nonesuch"), None);
        assert_eq!(node_at("/", "events/sched/switch/enable/deeper"), None);
    }

    #[test]
    fn relative_paths_and_dots() {
        assert_eq!(
            at("/instances/foo/events", "sched/switch/../switch/./enable"),
            Some((
                "foo",
                Node::File(File::EventEnable(("sched", "switch"))),
                "/instances/foo/events/sched/switch/enable".into()
            ))
        );
        assert_eq!(
            at("/instances/foo", "../../trace"),
            Some(("", Node::File(File::Trace), "/trace".into()))
        );
        assert_eq!(at("/instances/foo", "/../../.."), Some(("", Node::Dir(Dir::Root), "/".into())));
        assert_eq!(
            at("/events", "..//per_cpu//cpu0/"),
            Some(("", Node::Dir(Dir::Cpu), "/per_cpu/cpu0".into()))
        );
        assert_eq!(at("/", "nonesuch"), None);
        assert_eq!(at("/", "trace/deeper"), None);
    }
}
