//! The text of the tree's `README` file.

/// The `README` file: a mini-HOWTO of this tree.
pub const README: &str = "\
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
\t     accepts: func_full_name or glob-matching-pattern
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
\t\t\t                [:nohitcount]
\t\t\t                [:<var1>=<field|var_ref|numeric_literal>[,<var2>=...]]
\t\t\t                (a variable may be an expr; vals=$<var> sums one)
\t\t\t                [:onmax|onchange($<var>).save(<field>,...)]
\t\t\t                [:onmax|onchange($<var>).snapshot()]
\t\t\t  expr: <operand>[+-*/<operand>...] (3 operators at most,
\t\t\t        * / first, from the left) or -(<expr>);
\t\t\t        operand: a field, common_timestamp[.usecs], $<var>
\t\t\t        or a number; an operator's two operands are both
\t\t\t        in .usecs (or a variable holding it) or neither
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
 Output of cat, ls, echo, ... can be piped: | head [-n N | -N], | tail [-n N | -N | -n +N],
 | grep [-v] [-c] [-e PATTERN]... [PATTERN] (^ $ . * [...]), | wc -l. Ctrl-C stops a long read.
";
