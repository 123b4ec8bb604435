//! The tracefs shell: every file of the top-level instance and of a created one,
//! read, written validly, written invalidly (error, state unchanged).

use e2e::{Machine, STEP_TIMEOUT, trace_lines};
use std::collections::BTreeSet;
use std::time::Duration;

/// Roots to test: the top-level instance and a created one.
const ROOTS: [&str; 2] = ["", "instances/t1/"];

fn machine_with_instance() -> Machine {
    let mut m = Machine::boot();
    assert_eq!(m.run("mkdir instances/t1"), "");
    m
}

#[test]
fn available_events_lists_every_event_of_both_crates() {
    let mut m = machine_with_instance();
    for root in ROOTS {
        let events = m.run(&format!("cat {root}available_events"));
        for event in [
            "timer:tick",
            "irq:irq_handler_entry",
            "serial:rx",
            "kmem:kmalloc",
            "latency:anomaly",
            "log:message",
        ] {
            assert!(
                events.lines().any(|l| l == event),
                "{root}available_events lacks {event}:\n{events}"
            );
        }
        assert!(!events.contains("bprint"), "printk sites are not events");
        assert!(!events.contains("ftrace:"), "the tracer's own events are not listed");
        let err = m.run(&format!("echo x > {root}available_events"));
        assert!(err.contains("Permission denied (read-only file)"), "{err}");
    }
}

#[test]
fn set_event_replaces_appends_negates_and_refuses_bad_input() {
    let mut m = machine_with_instance();
    for root in ROOTS {
        let file = format!("{root}set_event");
        assert_eq!(m.run(&format!("echo timer:tick > {file}")), "");
        assert_eq!(m.run(&format!("cat {file}")).trim(), "timer:tick");
        assert_eq!(m.run(&format!("echo 'irq:*' >> {file}")), "");
        let set = m.run(&format!("cat {file}"));
        assert!(
            set.contains("timer:tick")
                && set.contains("irq:irq_handler_entry")
                && set.contains("irq:nmi"),
            "{set}"
        );
        assert_eq!(m.run(&format!("echo '!timer:tick' >> {file}")), "");
        let set = m.run(&format!("cat {file}"));
        assert!(!set.contains("timer:tick") && set.contains("irq:irq_handler_exit"), "{set}");
        // Appending a bad entry is refused whole, even with a good one beside it.
        let err = m.run(&format!("echo 'timer:tick nosuch:event' >> {file}"));
        assert!(err.contains("Invalid argument (no event matches an entry"), "{err}");
        assert_eq!(m.run(&format!("cat {file}")), set, "a refused append changes nothing");
        // Replacing empties the set first (as Linux truncates the file), then refuses.
        let err = m.run(&format!("echo 'timer:tick nosuch:event' > {file}"));
        assert!(err.contains("Invalid argument (no event matches an entry"), "{err}");
        assert_eq!(m.run(&format!("cat {file}")), "", "> cleared the set before the error");
        // A name without `:` is a system's or an event's, as in Linux.
        assert_eq!(m.run(&format!("echo irq > {file}")), "");
        let irq = m.run(&format!("cat {file}"));
        assert!(irq.starts_with("irq:irq_handler_entry\n") && irq.lines().count() == 3, "{irq}");
        assert_eq!(m.run(&format!("echo '!irq tick' >> {file}")), "");
        assert_eq!(m.run(&format!("cat {file}")), "timer:tick\n");
        assert_eq!(m.run(&format!("echo '*:*' > {file}")), "");
        let all = m.run(&format!("cat {file}"));
        assert_eq!(all, m.run(&format!("cat {root}available_events")), "*:* enables every event");
        // A lone `!` names no event (Linux: EINVAL), where `!:` names every one.
        let err = m.run(&format!("echo '!' >> {file}"));
        assert!(err.contains("Invalid argument (no event matches an entry"), "{err}");
        assert_eq!(m.run(&format!("cat {file}")), all, "a refused `!` changes nothing");
        assert_eq!(m.run(&format!("echo '!:' >> {file}")), "");
        assert_eq!(m.run(&format!("cat {file}")), "");
        assert_eq!(m.run(&format!("echo '*:*' > {file}")), "");
        assert_eq!(m.run(&format!("echo > {file}")), "");
        assert_eq!(m.run(&format!("cat {file}")), "");
        assert_eq!(m.run(&format!("cat {root}events/enable")).trim(), "0");
    }
}

#[test]
fn tracing_on_switches_recording_on_any_number_but_zero() {
    let mut m = machine_with_instance();
    for root in ROOTS {
        let file = format!("{root}tracing_on");
        assert_eq!(m.run(&format!("cat {file}")).trim(), "1");
        assert_eq!(m.run(&format!("echo 0 > {file}")), "");
        assert_eq!(m.run(&format!("cat {file}")).trim(), "0");
        assert!(
            m.run(&format!("echo on > {file}"))
                .contains("Invalid argument (0 turns recording off, any other number on)")
        );
        assert_eq!(m.run(&format!("cat {file}")).trim(), "0", "unchanged");
        assert_eq!(m.run(&format!("echo 2 > {file}")), "", "any non-zero number turns it on");
        assert_eq!(m.run(&format!("cat {file}")).trim(), "1");
        assert_eq!(m.run(&format!("echo 0 > {file}")), "");
        // Off: nothing is written, not even a marker.
        let before = m.run(&format!("cat {root}per_cpu/cpu0/stats"));
        m.run(&format!("echo quiet > {root}trace_marker"));
        let written =
            |stats: &str| stats.lines().find(|l| l.starts_with("written:")).map(String::from);
        assert_eq!(written(&m.run(&format!("cat {root}per_cpu/cpu0/stats"))), written(&before));
        assert_eq!(m.run(&format!("echo 1 > {file}")), "");
    }
}

/// The task and flags columns come from the context each record keeps, not from
/// other events: with the interrupt entry/exit events off, ticks and serial input
/// still show as interrupts; `stress` writes from the application processors'
/// posted work, their timer and IPI handlers and NMIs, and each line says which.
#[test]
fn each_line_shows_the_context_its_record_was_written_in() {
    let mut m = Machine::boot();
    assert_eq!(m.run("echo 0 > events/irq/enable"), "");
    assert_eq!(m.run("echo > trace"), "");
    assert_eq!(m.run("mkdir instances/ctx"), "");
    assert_eq!(m.run("echo stress:event > instances/ctx/set_event"), "");
    assert_eq!(m.run("mkdir instances/nmi"), "");
    assert_eq!(m.run("echo irq:nmi > instances/nmi/set_event"), "");
    let report = m.run("stress overwrite 300");
    assert!(report.contains("stress overwrite: PASS"), "{report}");
    for _ in 0..3 {
        m.run("uptime");
    }

    let top = trace_lines(&m.run("cat trace"));
    assert!(top.iter().all(|l| !l.event.starts_with("irq_handler")), "irq events are off");
    let (mut commands, mut interrupts) = (0, 0);
    for line in &top {
        match line.event.as_str() {
            "command" => {
                assert!(
                    line.task == "shell-1" && line.flags == "....." && line.cpu == 0,
                    "{line:?}"
                );
                commands += 1;
            }
            "tick" | "rx" => {
                assert!(line.task == "<irq>-0" && line.flags.starts_with("d.h"), "{line:?}");
                interrupts += 1;
            }
            _ => {}
        }
    }
    assert!(commands >= 4 && interrupts > 10, "commands {commands}, interrupts {interrupts}");

    let mut seen = [0usize; 4];
    for line in trace_lines(&m.run("cat instances/ctx/trace")) {
        let source: usize = line
            .fields
            .split("source=")
            .nth(1)
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("a stress event: {line:?}"));
        let thread = match line.cpu {
            0 => "shell-1".to_string(),
            cpu => format!("work/{cpu}-{}", cpu + 1),
        };
        let ok = match source {
            0 => line.task == thread && line.flags == ".....",
            1 | 2 => line.task == "<irq>-0" && line.flags.starts_with("d.h"),
            3 => line.task == "<nmi>-0" && (line.flags == "d.z1." || line.flags == "d.Z2."),
            _ => false,
        };
        assert!(ok, "source {source} shown as {line:?}");
        seen[source] += 1;
    }
    assert!(seen[0] > 0 && seen[1] + seen[2] > 0, "thread and interrupt writers: {seen:?}");
    // Stress sends NMIs to the application processors; the boot CPU takes the lockup
    // detector's periodic one.
    let nmis = trace_lines(&m.run("cat instances/nmi/trace"));
    assert!(nmis.iter().any(|l| l.cpu > 0), "stress sends NMIs: {nmis:?}");
    for line in nmis {
        assert!(line.task == "<nmi>-0", "{line:?}");
        assert!(line.flags == "d.z1." || line.flags == "d.Z2.", "{line:?}");
    }
}

#[test]
fn trace_shows_real_kernel_events_merged_in_time_order() {
    let mut m = Machine::boot();
    // Interrupts, serial input and commands on the boot CPU; timer ticks everywhere.
    for _ in 0..5 {
        m.run("uptime");
    }
    let out = m.run("cat trace");
    assert!(out.starts_with("# tracer: nop"), "{out}");
    assert!(out.contains("#P:4"), "{out}");
    let lines = trace_lines(&out);
    assert!(lines.len() > 50, "too few events:\n{out}");
    assert!(lines.windows(2).all(|w| w[0].ts <= w[1].ts), "not in time order");
    let cpus: std::collections::BTreeSet<usize> = lines.iter().map(|l| l.cpu).collect();
    assert_eq!(cpus.len(), 4, "events of every CPU: {cpus:?}");
    let has = |event: &str, field: &str| {
        lines.iter().any(|l| l.event == event && l.fields.contains(field))
    };
    assert!(has("irq_handler_entry", "irq=48"), "timer interrupts");
    assert!(has("tick", "interval="), "timer ticks with fields");
    // One CPU's file: its records only, under a header that counts every CPU, as
    // Linux's (`#P` is the CPUs online, whichever file).
    let cpu2 = m.run("cat per_cpu/cpu2/trace");
    assert!(cpu2.contains("#P:4"), "{cpu2}");
    let lines = trace_lines(&cpu2);
    assert!(!lines.is_empty() && lines.iter().all(|l| l.cpu == 2), "{cpu2}");
    assert!(has("rx", "byte=0x75"), "serial input ('u')");
    assert!(has("command", "uptime"), "shell commands");
    // ftrace's header, and the context of each line: the shell's commands in thread
    // context on the boot CPU, ticks and serial input in interrupts.
    assert!(out.contains("#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION"), "{out}");
    for line in &lines {
        let (task, flags) = (line.task.as_str(), line.flags.as_str());
        match line.event.as_str() {
            "command" => {
                assert!(task == "shell-1" && flags == "....." && line.cpu == 0, "{line:?}")
            }
            "tick" | "rx" => {
                assert!(task == "<irq>-0" && flags.starts_with("d.h"), "{line:?}")
            }
            _ => {}
        }
        assert!(!line.event.contains(':'), "names without the system: {line:?}");
    }
    // Microseconds by default, nanoseconds with options/nanoseconds.
    let stamp = |out: &str| {
        let line = out.lines().rfind(|l| l.contains(": command: "))?;
        let stamp = line.split("] ").nth(1)?.split_whitespace().nth(1)?;
        stamp.trim_end_matches(':').split_once('.').map(|(_, fraction)| fraction.len())
    };
    assert_eq!(stamp(&out), Some(6), "{out}");
    assert_eq!(m.run("echo 1 > options/nanoseconds"), "");
    assert_eq!(m.run("cat options/nanoseconds").trim(), "1");
    assert_eq!(stamp(&m.run("cat trace")), Some(9));
    assert_eq!(m.run("echo 0 > options/nanoseconds"), "");
    let header = out.lines().find(|l| l.contains("entries-in-buffer/entries-written")).unwrap();
    let counts: Vec<u64> = header
        .split(':')
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .split('/')
        .map(|n| n.parse().unwrap())
        .collect();
    assert!(counts[0] as usize >= lines.len() && counts[1] >= counts[0], "{header}");
    // Clearing empties the buffer.
    assert_eq!(m.run("echo > trace"), "");
    let after = trace_lines(&m.run("cat trace"));
    assert!(
        after.iter().all(|l| l.ts > lines.last().unwrap().ts),
        "events from before the clear remain"
    );
    assert!(!after.iter().any(|l| l.event == "command" && l.fields == "uptime"));
}

/// `trace` shows each record's time in microseconds rounded to the nearest, as
/// Linux's `ns2usecs`; the dump keeps the nanoseconds. With recording off, both show
/// the same records: each CPU's, in order, side by side.
#[test]
fn trace_shows_microseconds_rounded_from_the_records_nanoseconds() {
    let mut m = Machine::boot();
    m.run("echo 1 > events/timer/tick/enable");
    for i in 1..=20 {
        m.run(&format!("echo round-{i} > trace_marker"));
    }
    m.run("echo 0 > tracing_on");
    let text = trace_lines(&m.run("cat trace"));
    m.run("dump live instance top");
    let dump = m.dumps().pop().expect("the dump");
    let section = dump.sections().into_iter().find(|s| s.instance == "top").unwrap();
    assert_eq!(text.len(), section.events.len(), "the same records");
    let (mut up, mut down) = (0, 0);
    for cpu in 0..4 {
        let lines = text.iter().filter(|l| l.cpu == cpu);
        let events = section.events.iter().filter(|e| e.cpu == cpu);
        for (line, event) in lines.zip(events) {
            assert_eq!(line.ts, (event.ts + 500) / 1000 * 1000, "{line:?} of {event:?}");
            match event.ts % 1000 >= 500 {
                true => up += 1,
                false => down += 1,
            }
        }
    }
    // Both ways were seen (nanoseconds fall anywhere in a microsecond).
    assert!(up > 0 && down > 0, "rounded up {up}, down {down}");
}

/// The tracer's control operations called where the kernel may not wait (interrupts
/// off: `nowait`) are each refused with the rule, and nothing changes.
#[test]
fn control_operations_where_the_kernel_may_not_wait_are_refused_and_change_nothing() {
    let mut m = Machine::boot();
    m.run("echo kept > trace_marker");
    let state = |m: &mut Machine| {
        [
            "ls instances",
            "cat buffer_size_kb",
            "cat events/timer/tick/filter",
            "cat current_tracer",
            "cat stack_max_size",
        ]
        .map(|command| m.run(command))
    };
    let before = state(&mut m);
    let out = m.run("nowait");
    let context = "a context that may wait (thread context, interrupts on, not inside a writer)";
    let rule = format!("needs {context}");
    let tracers = format!("the function tracers need {context}");
    let refused = [
        ("create instance nowait", &rule),
        ("clear", &rule),
        ("resize to 8 KB per CPU", &rule),
        ("allocate the snapshot", &rule),
        ("set a filter on timer:tick", &rule),
        ("read current_tracer", &tracers),
        ("set current_tracer to function", &tracers),
        ("read set_ftrace_filter", &tracers),
        ("read stack_max_size", &tracers),
        ("set stack_max_size to 0", &tracers),
    ];
    for (tried, why) in refused {
        let line = format!("{tried}: refused: {why}");
        assert!(out.lines().any(|l| l == line), "{line}:\n{out}");
    }
    assert_eq!(state(&mut m), before);
    assert!(m.run("cat snapshot").contains("Snapshot is freed"));
    let markers = trace_lines(&m.run("cat trace"));
    assert!(markers.iter().any(|l| l.fields == "kept"), "the trace was not cleared");
    assert!(m.run("nowait now").contains("usage"));
}

#[test]
fn trace_marker_writes_and_cannot_be_read() {
    let mut m = machine_with_instance();
    for root in ROOTS {
        assert_eq!(m.run(&format!("echo \"hello from {root}marker\" > {root}trace_marker")), "");
        let lines = trace_lines(&m.run(&format!("cat {root}trace")));
        assert!(
            lines.iter().any(|l| l.event == "tracing_mark_write"
                && l.fields == format!("hello from {root}marker"))
        );
        assert!(
            m.run(&format!("cat {root}trace_marker"))
                .contains("Permission denied (write-only file)")
        );
        // With recording off the write fails, as Linux's (EBADF), and records nothing.
        m.run(&format!("echo 0 > {root}tracing_on"));
        for file in ["trace_marker", "trace_marker_raw"] {
            let error = m.run(&format!("echo abcdefgh > {root}{file}"));
            assert!(error.contains("Bad file descriptor (the buffer took no"), "{file}: {error}");
        }
        m.run(&format!("echo 1 > {root}tracing_on"));
        assert!(!m.run(&format!("cat {root}trace")).contains("abcdefgh"), "{root}");
    }
    // The shell runs on CPU 0: outside tracing_cpumask its markers are refused too.
    m.run("echo e > instances/t1/tracing_cpumask");
    let error = m.run("echo masked > instances/t1/trace_marker");
    assert!(error.contains("Bad file descriptor"), "{error}");
    m.run("echo f > instances/t1/tracing_cpumask");
    assert!(!m.run("cat instances/t1/trace").contains("masked"));
    // A full ring in discard mode refuses the marker that does not fit, and counts it.
    m.run("echo 0 > instances/t1/options/overwrite");
    m.run("echo 1 > instances/t1/buffer_size_kb");
    m.run("echo 0 > instances/t1/events/enable");
    let text = "x".repeat(100);
    let refused = (1..=40).find(|_| {
        m.run(&format!("echo {text} > instances/t1/trace_marker")).contains("Bad file descriptor")
    });
    let stats = m.run("cat instances/t1/per_cpu/cpu0/stats");
    assert!(refused.is_some_and(|n| n > 1), "a 1 KiB ring refuses within 40 markers: {stats}");
    assert!(stats.lines().any(|l| l.trim() == "dropped events: 1"), "counted: {stats}");
    m.run("echo 1 > instances/t1/options/overwrite");
    assert_eq!(m.run(&format!("echo {text} > instances/t1/trace_marker")), "");
    // A leading `-n` is echo's option, not text; a later one is text.
    assert_eq!(m.run("echo -n hello -n > trace_marker"), "");
    let trace = m.run("cat trace");
    assert!(trace.lines().any(|l| l.ends_with(": tracing_mark_write: hello -n")), "{trace}");
    // An empty marker keeps its name's `: `, as Linux's.
    m.run("echo 0 > events/enable");
    m.run("echo > trace");
    assert_eq!(m.run("echo > trace_marker"), "");
    let trace = m.run("cat trace");
    assert!(trace.lines().any(|l| l.ends_with(": tracing_mark_write: ")), "{trace}");
    // Appending to `trace` (whole or a CPU's) or `error_log` empties nothing, as
    // Linux's (O_APPEND); writing does.
    m.run("echo kept-on-append > trace_marker");
    m.run("echo 'bad == 1' > events/timer/tick/filter");
    for file in ["trace", "per_cpu/cpu0/trace", "error_log"] {
        assert_eq!(m.run(&format!("echo >> {file}")), "", "{file}");
    }
    assert!(m.run("cat trace").contains("kept-on-append"));
    assert!(m.run("cat error_log").contains("Command: bad == 1"));
    m.run("echo > error_log");
    assert_eq!(m.run("cat error_log"), "");
}

#[test]
fn refusals_give_linuxs_errno_and_say_why() {
    let mut m = machine_with_instance();
    // The events the tracer writes itself are named as such, not as missing.
    let error = m.run("echo ftrace:print > set_event");
    assert!(error.contains("written by the tracer itself"), "{error}");
    let error = m.run("echo 'enable_event:ftrace:print' > events/timer/tick/trigger");
    assert!(error.contains("the tracer writes that event itself"), "{error}");
    assert_eq!(
        m.run("cat events/timer/tick/trigger").lines().next(),
        Some("# Available triggers:")
    );
    // Its reason, where a key beside the stack was taken for an unknown field.
    let error = m.run("echo 'hist:keys=common_cpu,common_stacktrace' > events/timer/tick/trigger");
    assert!(error.contains("common_stacktrace is the only key when used"), "{error}");
    // A function command takes no filter: text after its count is refused as such.
    let error = m.run("echo 'kernel::shell::commands::pwd:traceoff:2:3' >> set_ftrace_filter");
    assert!(error.contains("the end expected (a function command takes no filter)"), "{error}");
    assert!(!m.run("cat set_ftrace_filter").contains("traceoff"));
    // What the irqsoff tracer holds is busy (EBUSY), as Linux's.
    assert_eq!(m.run("echo irqsoff > current_tracer"), "");
    let error = m.run("echo 1 > snapshot");
    assert!(error.contains("Device or resource busy (the irqsoff tracer keeps"), "{error}");
    let error = m.run("echo irqsoff > instances/t1/current_tracer");
    assert!(error.contains("Device or resource busy (another instance's tracer"), "{error}");
    assert_eq!(m.run("cat instances/t1/current_tracer"), "nop\n");
    assert_eq!(m.run("echo nop > current_tracer"), "");
    // A switch Linux reads as a number takes any number.
    assert_eq!(m.run("echo 2 > function_profile_enabled"), "");
    assert_eq!(m.run("cat function_profile_enabled"), "1\n");
    assert_eq!(m.run("echo 0 > function_profile_enabled"), "");
}

#[test]
fn snapshot_allocates_takes_clears_and_frees() {
    let mut m = machine_with_instance();
    for root in ROOTS {
        let file = format!("{root}snapshot");
        // As Linux's without records: the tracer, the state, the commands.
        let freed = "# tracer: nop\n#\n#\n# * Snapshot is freed *\n#\n# Snapshot commands:\n\
                     # echo 0 > snapshot : Clears and frees snapshot buffer\n";
        let help = m.run(&format!("cat {file}"));
        assert!(help.starts_with(freed), "{root}");
        assert!(
            help.ends_with(
                "works with any number that\n#                       is not a '0' or '1')\n"
            ),
            "{help}"
        );
        // Linux accepts 2 or more without a snapshot, and does nothing.
        assert_eq!(m.run(&format!("echo 2 > {file}")), "", "clearing a freed snapshot");
        assert_eq!(m.run(&format!("echo 7 > {file}")), "");
        assert!(
            m.run(&format!("echo x > {file}"))
                .contains("Invalid argument (0 frees, 1 takes a snapshot, 2 or more clears it)")
        );
        assert!(m.run(&format!("cat {file}")).contains("Snapshot is freed"), "unchanged");
        let size: usize = m.run(&format!("cat {root}buffer_size_kb")).trim().parse().unwrap();
        m.run(&format!("echo timer:tick >> {root}set_event"));
        // Each CPU ticks before the snapshot (100 Hz: within a few commands).
        let ticked = |m: &mut Machine, cpu| {
            trace_lines(&m.run(&format!("cat {root}per_cpu/cpu{cpu}/trace")))
                .iter()
                .any(|l| l.event == "tick")
        };
        assert!((0..500).any(|_| (1..4).all(|cpu| ticked(&mut m, cpu))), "{root}: no ticks");
        m.run(&format!("echo before-snapshot > {root}trace_marker"));
        assert_eq!(m.run(&format!("echo 1 > {file}")), "");
        m.run(&format!("echo after-snapshot > {root}trace_marker"));
        let snap = m.run(&format!("cat {file}"));
        assert!(
            snap.starts_with("# tracer: nop\n#\n# entries-in-buffer/entries-written: ")
                && snap.contains("before-snapshot")
                && !snap.contains("after-snapshot"),
            "{snap}"
        );
        let live = m.run(&format!("cat {root}trace"));
        assert!(live.contains("after-snapshot") && !live.contains("before-snapshot"), "{live}");
        // The live rings only, snapshot allocated or not (as Linux).
        assert_eq!(
            m.run(&format!("cat {root}buffer_total_size_kb")).trim(),
            format!("{}", size * 4)
        );
        // per_cpu/cpuN/snapshot: that CPU's records; `2` clears that CPU's alone; one
        // CPU cannot be swapped, nor its snapshot freed.
        let cpu_file = |cpu| format!("{root}per_cpu/cpu{cpu}/snapshot");
        let cpu_lines =
            |m: &mut Machine, cpu| trace_lines(&m.run(&format!("cat {}", cpu_file(cpu))));
        let one = m.run(&format!("cat {}", cpu_file(1)));
        assert!(one.contains("# entries-in-buffer/entries-written: "), "{one}");
        let lines = trace_lines(&one);
        assert!(!lines.is_empty() && lines.iter().all(|l| l.cpu == 1), "{one}");
        for (value, rule) in [
            ("1", "a snapshot takes every CPU's buffer"),
            ("0", "0 is invalid for a per-CPU snapshot file"),
            ("x", "2 or more clears this CPU's snapshot"),
        ] {
            let error = m.run(&format!("echo {value} > {}", cpu_file(1)));
            assert!(error.contains(rule), "{value}: {error}");
        }
        assert_eq!(cpu_lines(&mut m, 1).len(), lines.len(), "refusals change nothing");
        assert_eq!(m.run(&format!("echo 2 > {}", cpu_file(1))), "");
        assert!(cpu_lines(&mut m, 1).is_empty(), "{root}: cpu1's snapshot cleared");
        assert!(!cpu_lines(&mut m, 2).is_empty(), "{root}: cpu2's kept");
        assert!(m.run(&format!("cat {file}")).contains("before-snapshot"));
        assert_eq!(m.run(&format!("echo 2 > {file}")), "");
        let cleared = m.run(&format!("cat {file}"));
        assert!(
            cleared.contains("Snapshot is allocated") && !cleared.contains("before-snapshot"),
            "{cleared}"
        );
        assert_eq!(m.run(&format!("echo 0 > {file}")), "");
        assert!(m.run(&format!("cat {file}")).contains("Snapshot is freed"));
        assert_eq!(
            m.run(&format!("cat {root}buffer_total_size_kb")).trim(),
            format!("{}", size * 4)
        );
    }
}

#[test]
fn buffer_size_kb_resizes_within_limits() {
    let mut m = machine_with_instance();
    for root in ROOTS {
        let file = format!("{root}buffer_size_kb");
        let before = m.run(&format!("cat {file}"));
        for bad in ["0", "abc", "-4", ""] {
            assert!(
                m.run(&format!("echo '{bad}' > {file}"))
                    .contains("Invalid argument (a size in KB, at least 1)"),
                "{bad:?}"
            );
        }
        // Past what a number holds: too large, not malformed.
        let err = m.run(&format!("echo 18446744073709551616 > {file}"));
        assert!(err.contains("Invalid argument (the size is too large)"), "{err}");
        // The error names the limit and what is in use.
        let err = m.run(&format!("echo 99999999 > {file}"));
        assert!(
            err.contains("Cannot allocate memory (")
                && err.contains(
                    "the rings of all instances and snapshots may take 65536 KB together"
                )
                && err.contains("KB are in use)"),
            "{err}"
        );
        assert_eq!(m.run(&format!("cat {file}")), before, "unchanged");
        assert_eq!(m.run(&format!("echo 128 > {file}")), "");
        assert_eq!(m.run(&format!("cat {file}")).trim(), "128");
        assert_eq!(m.run(&format!("cat {root}buffer_total_size_kb")).trim(), "512");
        assert!(m.run(&format!("echo 1 > {root}buffer_total_size_kb")).contains("read-only"));
        // Recording goes on in the new buffer.
        m.run(&format!("echo resized > {root}trace_marker"));
        assert!(m.run(&format!("cat {root}trace")).contains("resized"));
    }
}

#[test]
fn trace_clock_chooses_local_global_counter_or_tsc_and_a_change_empties_the_buffers() {
    let mut m = machine_with_instance();
    for root in ROOTS {
        let clock = format!("{root}trace_clock");
        assert_eq!(
            m.run(&format!("cat {clock}")),
            "[local] global counter uptime perf mono mono_raw boot x86-tsc\n"
        );
        assert_eq!(m.run(&format!("echo 'timer:tick' > {root}set_event")), "");
        assert_eq!(m.run(&format!("echo before > {root}trace_marker")), "");
        // The counter: one step per record, shared by the CPUs, printed as a count.
        assert_eq!(m.run(&format!("echo counter > {clock}")), "");
        assert_eq!(
            m.run(&format!("cat {clock}")),
            "local global [counter] uptime perf mono mono_raw boot x86-tsc\n"
        );
        assert_eq!(m.run(&format!("echo after > {root}trace_marker")), "");
        // Until every CPU ticked (each read is a command, during which they tick).
        let mut ticks: Vec<e2e::TraceLine> = Vec::new();
        for _ in 0..100 {
            let trace = m.run(&format!("cat {root}trace"));
            assert!(!trace.contains("before"), "the change emptied the buffer:\n{trace}");
            assert!(trace.contains("after"), "{trace}");
            for line in trace.lines().filter(|l| !l.starts_with('#')) {
                let stamp = line.split_once("] ").and_then(|(_, r)| r.split_once(' '));
                let stamp = stamp.and_then(|(_, r)| r.trim_start().split_once(": "));
                assert!(stamp.is_some_and(|(s, _)| !s.contains('.')), "a count: {line}");
            }
            ticks = trace_lines(&trace).into_iter().filter(|l| l.event == "tick").collect();
            if ticks.iter().map(|l| l.cpu).collect::<BTreeSet<_>>().len() == 4 {
                break;
            }
        }
        assert_eq!(ticks.iter().map(|l| l.cpu).collect::<BTreeSet<_>>().len(), 4, "every CPU");
        let stamps: Vec<u64> = ticks.iter().map(|l| l.ts).collect();
        assert!(stamps.windows(2).all(|w| w[0] < w[1]), "counts, in order: {stamps:?}");
        let stats = m.run(&format!("cat {root}per_cpu/cpu1/stats"));
        let now = stats.lines().find_map(|l| l.strip_prefix("now ts: ")).unwrap().trim();
        assert!(now.parse::<u64>().unwrap() >= stamps[0], "{stats}");
        // A dump says which clock, and the report prints counts.
        let name = if root.is_empty() { "top" } else { "t1" };
        m.run(&format!("dump instance {name}"));
        let dump = m.dumps().pop().unwrap();
        let section = dump.sections().into_iter().find(|s| s.instance == name).unwrap();
        assert_eq!(section.clock, trace::Clock::Counter);
        let mut text = Vec::new();
        boot::report::write_text(&section, &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(trace_lines(&text).iter().any(|l| l.ts == stamps[0]), "{text}");
        // trace-cmd reads the clock from the trace.dat and prints counts too.
        let stdout = e2e::trace_cmd_report(std::slice::from_ref(&section), &[]);
        let first = format!(" {}: tick:", stamps[0]);
        assert!(stdout.contains(&first), "{first:?} in:\n{stdout}");
        // A refused clock changes nothing.
        let out = m.run(&format!("echo tai > {clock}"));
        let rule = "no such clock (local, global, counter, uptime, perf, mono, mono_raw, boot \
                    or x86-tsc)";
        assert!(out.contains(&format!("Invalid argument ({rule})")), "{out}");
        assert_eq!(
            m.run(&format!("cat {clock}")),
            "local global [counter] uptime perf mono mono_raw boot x86-tsc\n"
        );
        // Global: nanoseconds again.
        assert_eq!(m.run(&format!("echo global > {clock}")), "");
        assert_eq!(
            m.run(&format!("cat {clock}")),
            "local [global] counter uptime perf mono mono_raw boot x86-tsc\n"
        );
        let mut trace = String::new();
        for _ in 0..100 {
            trace = m.run(&format!("cat {root}trace"));
            if !trace_lines(&trace).is_empty() {
                break;
            }
        }
        let lines = trace_lines(&trace);
        assert!(!lines.is_empty() && !trace.contains("after"), "{trace}");
        assert!(lines.iter().all(|l| l.ts > 1_000_000), "seconds again: {trace}");
        // The TSC's cycles: counts again, of the order of the TSC's rate per second.
        assert_eq!(m.run(&format!("echo x86-tsc > {clock}")), "");
        assert_eq!(
            m.run(&format!("cat {clock}")),
            "local global counter uptime perf mono mono_raw boot [x86-tsc]\n"
        );
        let mut cycles = Vec::new();
        for _ in 0..100 {
            cycles = trace_lines(&m.run(&format!("cat {root}trace")));
            if !cycles.is_empty() {
                break;
            }
        }
        let (first, last) = (stamps[0], *stamps.last().unwrap());
        assert!(!cycles.is_empty() && cycles.iter().all(|l| l.ts > last), "{cycles:?}");
        assert!(first < 1_000_000, "the counter counts records, not time: {first}");
        // uptime: the timer's ticks since boot (100 a second), a count; mono, boot,
        // perf and mono_raw: ns since boot.
        let since_boot = |m: &mut Machine| {
            let up = m.run("uptime");
            let secs = up.split_whitespace().find_map(|w| w.parse::<f64>().ok());
            secs.unwrap_or_else(|| panic!("{up}"))
        };
        let since_boot_clocks =
            [("uptime", 100.0), ("mono", 1e9), ("boot", 1e9), ("perf", 1e9), ("mono_raw", 1e9)];
        for (name, scale) in since_boot_clocks {
            assert_eq!(m.run(&format!("echo {name} > {clock}")), "");
            let before = since_boot(&mut m);
            let mut lines = Vec::new();
            for _ in 0..100 {
                lines = trace_lines(&m.run(&format!("cat {root}trace")));
                if !lines.is_empty() {
                    break;
                }
            }
            let after = since_boot(&mut m);
            let (low, high) = ((before - 1.0) * scale, (after + 1.0) * scale);
            let within = |l: &e2e::TraceLine| (low..high).contains(&(l.ts as f64));
            assert!(!lines.is_empty() && lines.iter().all(within), "{name}: {lines:?}");
        }
        assert_eq!(m.run(&format!("echo local > {clock}")), "");
        assert_eq!(m.run(&format!("echo > {root}set_event")), "");
    }
}

#[test]
fn overwrite_and_trace_options() {
    let mut m = machine_with_instance();
    for root in ROOTS {
        let file = format!("{root}options/overwrite");
        assert_eq!(m.run(&format!("cat {file}")).trim(), "1");
        assert_eq!(m.run(&format!("echo 0 > {file}")), "");
        assert_eq!(m.run(&format!("cat {file}")).trim(), "0");
        assert!(m.run(&format!("echo yes > {file}")).contains("Invalid argument (0 or 1)"));
        assert_eq!(m.run(&format!("cat {file}")).trim(), "0");
        assert_eq!(m.run(&format!("echo 1 > {file}")), "");
        // `trace_options`: every option, `noNAME` when off; `echo [no]NAME` sets one.
        let options = format!("{root}trace_options");
        let listed = options_listed(root, &[]);
        assert_eq!(m.run(&format!("cat {options}")), listed);
        let files = m.run(&format!("ls {root}options"));
        let names: Vec<&str> = listed.lines().map(|l| l.strip_prefix("no").unwrap_or(l)).collect();
        assert_eq!(files.lines().collect::<Vec<_>>(), names, "options/ has a file per option");
        assert_eq!(m.run(&format!("echo nooverwrite > {options}")), "");
        assert_eq!(m.run(&format!("cat {file}")).trim(), "0");
        assert_eq!(m.run(&format!("echo nanoseconds > {options}")), "");
        assert_eq!(m.run(&format!("cat {root}options/nanoseconds")).trim(), "1");
        let listed = options_listed(root, &["overwrite", "nanoseconds"]);
        assert_eq!(m.run(&format!("cat {options}")), listed);
        for bad in ["verbose", "nofoo", "no", "overwrite=1", ""] {
            let out = m.run(&format!("echo '{bad}' > {options}"));
            assert!(out.contains("no such option (see trace_options)"), "{bad}: {out}");
        }
        assert_eq!(m.run(&format!("cat {options}")), listed, "refused writes change nothing");
        m.run(&format!("echo overwrite > {options}"));
        m.run(&format!("echo nonanoseconds > {options}"));
        assert_eq!(m.run(&format!("cat {options}")), options_listed(root, &[]));
    }
}

/// `trace_options` of the instance at `root` as it reads with ftrace's defaults but
/// for the options `flipped` (`copy_trace_marker` is on at the top level only).
fn options_listed(root: &str, flipped: &[&str]) -> String {
    let defaults = [
        ("annotate", true),
        ("context-info", true),
        ("copy_trace_marker", root.is_empty()),
        ("func_stack_trace", false),
        ("funcgraph-abstime", false),
        ("funcgraph-cpu", true),
        ("funcgraph-duration", true),
        ("funcgraph-overhead", true),
        ("funcgraph-proc", false),
        ("funcgraph-tail", true),
        ("irq-info", true),
        ("latency-format", false),
        ("markers", true),
        ("nanoseconds", false),
        ("overwrite", true),
        ("pause-on-trace", false),
        ("print-parent", true),
        ("printk-msg-only", false),
        ("stacktrace", false),
        ("sym-addr", false),
        ("sym-offset", false),
        ("trace_printk", true),
    ];
    let line = |&(name, on): &(&str, bool)| {
        let on = on != flipped.contains(&name);
        format!("{}{name}\n", if on { "" } else { "no" })
    };
    defaults.iter().map(line).collect()
}

/// The display options, per instance, as ftrace's: `irq-info` off drops the flags
/// column and its legend, `context-info` off every column before the event and the
/// header's counts; `trace`, a CPU's `trace` and `snapshot` follow them; `markers`
/// off refuses marker writes, and records nothing. The panic dump's text keeps
/// every column whatever they say. Bad values are refused and change nothing.
#[test]
fn display_options_lay_out_lines_as_ftraces() {
    let mut m = machine_with_instance();
    for root in ROOTS {
        let other = if root.is_empty() { ROOTS[1] } else { ROOTS[0] };
        m.run(&format!("echo > {root}trace"));
        assert_eq!(m.run(&format!("echo hello > {root}trace_marker")), "");
        let full = m.run(&format!("cat {root}trace"));
        let marker = trace_lines(&full).into_iter().find(|l| l.fields == "hello").unwrap();
        assert_eq!((marker.task.as_str(), marker.flags.as_str()), ("shell-1", "....."), "{full}");

        assert_eq!(m.run(&format!("echo 0 > {root}options/irq-info")), "");
        let plain = m.run(&format!("cat {root}trace"));
        assert!(!plain.contains("irqs-off") && !plain.contains("|||||"), "{plain}");
        assert!(
            plain.contains("#           TASK-PID     CPU#     TIMESTAMP  FUNCTION\n"),
            "{plain}"
        );
        let line = plain.lines().find(|l| l.ends_with(": tracing_mark_write: hello")).unwrap();
        let (columns, _) = line.split_once(": tracing_mark_write").unwrap();
        let stamp = columns.rsplit(' ').next().unwrap();
        assert_eq!(columns, format!("           shell-1       [000]     {stamp:>9}"), "{plain}");
        assert_eq!(m.run(&format!("cat {other}options/irq-info")), "1\n", "per instance");

        assert_eq!(m.run(&format!("echo nocontext-info > {root}trace_options")), "");
        let bare = m.run(&format!("cat {root}trace"));
        let header = "# tracer: nop\n#\n";
        assert!(bare.starts_with(header) && !bare.contains("entries-in-buffer"), "{bare}");
        assert!(bare.lines().any(|l| l == "tracing_mark_write: hello"), "{bare}");
        let cpu0 = m.run(&format!("cat {root}per_cpu/cpu0/trace"));
        assert!(cpu0.lines().any(|l| l == "tracing_mark_write: hello"), "{cpu0}");
        // A snapshot takes the live buffer's records (the marker is written again).
        m.run(&format!("echo 1 > {root}snapshot"));
        let snapshot = m.run(&format!("cat {root}snapshot"));
        assert!(snapshot.lines().any(|l| l == "tracing_mark_write: hello"), "{snapshot}");
        m.run(&format!("echo 0 > {root}snapshot"));
        m.run(&format!("echo hello > {root}trace_marker"));
        for bad in ["2", "on", ""] {
            let out = m.run(&format!("echo '{bad}' > {root}options/context-info"));
            assert!(out.contains("Invalid argument (0 or 1)"), "{bad}: {out}");
        }
        assert_eq!(m.run(&format!("cat {root}options/context-info")), "0\n");

        // The panic dump's text (`dump` writes the same) keeps every column.
        if root.is_empty() {
            let dump = m.run("dump");
            let kept = trace_lines(&dump).into_iter().find(|l| l.fields == "hello");
            assert!(kept.is_some_and(|l| l.flags == "....."), "{dump}");
        }
        m.run(&format!("echo 1 > {root}options/context-info"));
        m.run(&format!("echo irq-info > {root}trace_options"));
        let again = m.run(&format!("cat {root}trace"));
        let marker = trace_lines(&again).into_iter().find(|l| l.fields == "hello");
        assert!(marker.is_some_and(|l| l.flags == "....."), "every column back:\n{again}");

        // markers: off refuses writes to both marker files, and records nothing.
        assert_eq!(m.run(&format!("echo 0 > {root}options/markers")), "");
        for file in ["trace_marker", "trace_marker_raw"] {
            let out = m.run(&format!("echo 'abcdlost' > {root}{file}"));
            assert!(out.contains("Invalid argument (options/markers is off)"), "{file}: {out}");
        }
        // Neither the marker nor the raw one (id "abcd") was recorded.
        let trace = m.run(&format!("cat {root}trace"));
        assert!(!trace.contains("tracing_mark_write: abcdlost"), "{trace}");
        assert!(!trace.contains(": # 64636261 buf:"), "{trace}");
        assert_eq!(m.run(&format!("echo 'kept' > {other}trace_marker")), "", "per instance");
        assert_eq!(m.run(&format!("echo 1 > {root}options/markers")), "");
        assert_eq!(m.run(&format!("echo again > {root}trace_marker")), "");
        assert!(m.run(&format!("cat {root}trace")).contains("tracing_mark_write: again"));

        // printk-msg-only: a marker's line is its text alone, whatever the columns;
        // the other lines keep theirs (a dump's text too).
        assert_eq!(m.run(&format!("echo printk-msg-only > {root}trace_options")), "");
        let short = m.run(&format!("cat {root}trace"));
        assert!(short.lines().any(|l| l == "again"), "{short}");
        assert!(!short.contains("tracing_mark_write"), "{short}");
        assert!(short.starts_with("# tracer: nop\n#\n# entries-in-buffer"), "{short}");
        if root.is_empty() {
            let command = trace_lines(&short).into_iter().find(|l| l.event == "command");
            assert!(command.is_some_and(|l| l.task == "shell-1"), "{short}");
            let dump = m.run("dump");
            assert!(trace_lines(&dump).iter().any(|l| l.fields == "again"), "{dump}");
        }
        assert_eq!(m.run(&format!("cat {other}options/printk-msg-only")), "0\n", "per instance");
        assert_eq!(m.run(&format!("echo 0 > {root}options/printk-msg-only")), "");
        assert!(m.run(&format!("cat {root}trace")).contains("tracing_mark_write: again"));
    }
}

/// `latency-format`, as ftrace's: nothing but the tracer's name over an empty
/// buffer; else the latency header (the counts, the CPUs, the task) and the
/// latency legend, then lines `cmd-pid CPU FLAGS time(delay)`, their times in µs
/// from the first record, each marked by the gap to the next record (the last by
/// none); `trace`, a CPU's `trace` and `snapshot` follow it, per instance, and
/// `context-info` off leaves it out. The irqsoff tracer turns it on while selected
/// and gives back the setting it found.
#[test]
fn latency_format_heads_the_buffer_and_times_lines_as_ftraces() {
    let mut m = machine_with_instance();
    let root = ROOTS[1];
    m.run(&format!("echo > {root}trace"));
    assert_eq!(m.run(&format!("echo 1 > {root}options/latency-format")), "");
    assert_eq!(m.run("cat options/latency-format"), "0\n", "per instance");
    assert_eq!(m.run(&format!("cat {root}trace")), "# tracer: nop\n#\n");
    for text in ["one", "two", "three"] {
        assert_eq!(m.run(&format!("echo {text} > {root}trace_marker")), "");
    }
    let text = m.run(&format!("cat {root}trace"));
    let header = text.lines().take_while(|l| l.starts_with('#')).collect::<Vec<_>>().join("\n");
    assert!(header.starts_with("# tracer: nop\n#\n# nop latency trace v1.1.5 on "), "{text}");
    for line in [
        "# latency: 0 us, #3/3, CPU#0 | (M:server VP:0, KP:0, SP:0 HP:0 #P:4)",
        "#    | task: -0 (uid:0 nice:0 policy:0 rt_prio:0)",
        "#                    _------=> CPU#",
        "#  cmd     pid     |||||| time  |   caller",
    ] {
        assert!(header.lines().any(|l| l == line), "{line}:\n{text}");
    }
    // `   shell-1         0.....  123us!: tracing_mark_write: one`
    let lines: Vec<(u64, char, &str)> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (columns, event) = l.split_once("us").expect(l);
            let (prefix, time) = columns.rsplit_once(' ').expect(l);
            assert_eq!(prefix.trim_end(), "   shell-1         0.....", "{text}");
            let mark = event.chars().next().expect(l);
            (time.parse().expect(l), mark, &event[1..])
        })
        .collect();
    let events: Vec<&str> = lines.iter().map(|l| l.2).collect();
    let expected = [": tracing_mark_write: one", ": tracing_mark_write: two"];
    assert_eq!(events, [expected[0], expected[1], ": tracing_mark_write: three"], "{text}");
    assert_eq!(lines[0].0, 0, "from the first record:\n{text}");
    for pair in lines.windows(2) {
        let (gap_us, mark) = (pair[1].0 - pair[0].0, pair[0].1);
        // Each time is rounded to the µs: the gap is within one of the true one.
        let marks =
            [gap_us.saturating_sub(1), gap_us + 1].map(|us| trace::text::delay_mark(us * 1000));
        assert!(pair[1].0 > pair[0].0 && marks.contains(&mark), "{pair:?}:\n{text}");
    }
    assert_eq!(lines[2].1, ' ', "the last record has no next one:\n{text}");
    let cpu0 = m.run(&format!("cat {root}per_cpu/cpu0/trace"));
    assert!(cpu0.contains("# latency: 0 us, #3/3, CPU#0"), "{cpu0}");
    assert!(cpu0.contains("   shell-1         0.....    0us"), "{cpu0}");
    assert_eq!(m.run(&format!("echo nocontext-info > {root}trace_options")), "");
    let bare = m.run(&format!("cat {root}trace"));
    assert!(bare.starts_with("# tracer: nop\n#\ntracing_mark_write: one\n"), "{bare}");
    assert_eq!(m.run(&format!("echo context-info > {root}trace_options")), "");
    // A snapshot takes the live buffer's records.
    m.run(&format!("echo 1 > {root}snapshot"));
    let snapshot = m.run(&format!("cat {root}snapshot"));
    assert!(snapshot.starts_with("# tracer: nop\n#\n# nop latency trace v1.1.5 on "), "{snapshot}");
    assert!(snapshot.contains("   shell-1         0.....    0us"), "{snapshot}");
    m.run(&format!("echo 0 > {root}snapshot"));
    assert_eq!(m.run(&format!("echo nolatency-format > {root}trace_options")), "");
    assert_eq!(m.run(&format!("echo four > {root}trace_marker")), "");
    let back = m.run(&format!("cat {root}trace"));
    assert!(back.contains("# entries-in-buffer/entries-written: 1/1"), "{back}");
    assert_eq!(trace_lines(&back).len(), 1, "{back}");
    for bad in ["2", "yes", ""] {
        let out = m.run(&format!("echo '{bad}' > {root}options/latency-format"));
        assert!(out.contains("Invalid argument (0 or 1)"), "{bad}: {out}");
    }
    assert_eq!(m.run(&format!("cat {root}options/latency-format")), "0\n");

    // trace_pipe: the same lines, each printed once the next record has come (or
    // with no mark when the rings ran dry first).
    assert_eq!(m.run(&format!("echo 1 > {root}options/latency-format")), "");
    assert_eq!(m.run(&format!("echo five > {root}trace_marker")), "");
    m.send(format!("cat {root}trace_pipe\r").as_bytes());
    let mut piped = m.wait_for(": tracing_mark_write: five\r\n", STEP_TIMEOUT);
    m.send(b"q");
    piped += &m.wait_for_prompt(STEP_TIMEOUT);
    let line = |text: &str| {
        let end = format!(": tracing_mark_write: {text}");
        piped.lines().find(|l| l.ends_with(&end)).map(|l| l.replace(&end, ""))
    };
    let four = line("four").unwrap_or_default();
    assert!(four.starts_with("   shell-1         0.....    0us"), "{piped}");
    // Printed when the rings ran dry: no next record to mark the gap to.
    let five = line("five").unwrap_or_default();
    assert!(five.starts_with("   shell-1         0..... ") && five.ends_with("us "), "{piped}");
    assert_eq!(m.run(&format!("echo 0 > {root}options/latency-format")), "");

    // irqsoff: on while selected, then as found.
    let option = "instances/t1/options/latency-format";
    for (before, set_during) in [("0", None), ("1", Some("0")), ("0", Some("1"))] {
        m.run(&format!("echo {before} > {option}"));
        assert_eq!(m.run("echo irqsoff > instances/t1/current_tracer"), "");
        assert_eq!(m.run(&format!("cat {option}")), "1\n");
        if let Some(value) = set_during {
            m.run(&format!("echo {value} > {option}"));
            assert_eq!(m.run(&format!("cat {option}")), format!("{value}\n"));
        }
        assert_eq!(m.run("echo function > instances/t1/current_tracer"), "");
        assert_eq!(m.run(&format!("cat {option}")), format!("{before}\n"), "as found");
        assert_eq!(m.run("echo nop > instances/t1/current_tracer"), "");
        assert_eq!(m.run(&format!("cat {option}")), format!("{before}\n"));
    }
}

/// CPU 1's timer ticks as `trace` lists them: each tick's number, in order.
fn cpu1_ticks(m: &mut Machine) -> Vec<u64> {
    let trace = m.run("cat per_cpu/cpu1/trace");
    let ticks = trace_lines(&trace).into_iter().filter(|l| l.event == "tick");
    let number = |fields: &str| fields.strip_prefix("tick=")?.split(' ').next()?.parse().ok();
    ticks.map(|l| number(&l.fields).unwrap_or_else(|| panic!("{}", l.fields))).collect()
}

/// `pause-on-trace`: while `trace` is read, no event is recorded into the instance
/// (CPU 1's ticks meanwhile are missing from it), `tracing_on` still reads 1, and
/// recording goes on after the read; off (the default), every tick is recorded
/// through a read.
#[test]
fn pause_on_trace_holds_writes_off_while_trace_is_read() {
    let mut m = machine_with_instance();
    // 300 ms of `stress` (its IPIs recorded here) make `trace` long: reading it
    // takes many ticks' time.
    assert!(m.run("stress 300").contains("stress"));
    m.run("cat trace");
    let ticks = cpu1_ticks(&mut m);
    assert!(ticks.len() > 20, "{ticks:?}");
    assert!(ticks.windows(2).all(|w| w[1] == w[0] + 1), "no tick missing: {ticks:?}");

    let before = *ticks.last().unwrap();
    assert_eq!(m.run("cat instances/t1/options/pause-on-trace"), "0\n");
    assert_eq!(m.run("echo 1 > options/pause-on-trace"), "");
    assert_eq!(m.run("cat instances/t1/options/pause-on-trace"), "0\n", "per instance");
    let read = m.run("cat trace");
    assert!(read.lines().count() > 100, "{read}");
    assert_eq!(m.run("cat tracing_on"), "1\n");
    assert_eq!(m.run("echo 0 > options/pause-on-trace"), "");
    let ticks = cpu1_ticks(&mut m);
    let gaps: Vec<&[u64]> = ticks.windows(2).filter(|w| w[1] != w[0] + 1).collect();
    // One gap, after the last tick seen before: the ticks while `trace` was read.
    assert_eq!(gaps.len(), 1, "{ticks:?}");
    let gap = gaps[0];
    assert!(gap[0] >= before && gap[1] > gap[0] + 1, "{before}: {gap:?}");
    assert!(*ticks.last().unwrap() > gap[1], "recording goes on after the read: {ticks:?}");
}

#[test]
fn per_cpu_files_and_event_directories() {
    let mut m = machine_with_instance();
    for root in ROOTS {
        for cpu in 0..4 {
            let stats = m.run(&format!("cat {root}per_cpu/cpu{cpu}/stats"));
            for field in [
                "entries:",
                "overrun:",
                "commit overrun:",
                "bytes:",
                "oldest event ts:",
                "now ts:",
                "dropped events:",
                "read events:",
                "written:",
            ] {
                assert!(stats.contains(field), "{field} missing:\n{stats}");
            }
            assert!(m.run(&format!("cat {root}per_cpu/cpu{cpu}/trace")).contains("# tracer: nop"));
        }
        assert!(
            m.run(&format!("cat {root}per_cpu/cpu4/stats")).contains("No such file or directory")
        );
        assert!(m.run(&format!("echo 1 > {root}per_cpu/cpu0/stats")).contains("read-only"));
        for file in ["trace_pipe", "per_cpu/cpu1/trace_pipe", "events/timer/tick/format"] {
            assert!(m.run(&format!("echo 1 > {root}{file}")).contains("read-only"), "{root}{file}");
        }
        // Emptying one CPU's ring (the shell's marker is on CPU 0) keeps the others'.
        assert_eq!(m.run(&format!("echo timer:tick >> {root}set_event")), "");
        let cpu1 = |m: &mut Machine| trace_lines(&m.run(&format!("cat {root}per_cpu/cpu1/trace")));
        assert!((0..100).any(|_| !cpu1(&mut m).is_empty()), "CPU 1 records no ticks");
        m.run(&format!("echo gone > {root}trace_marker"));
        let marker = trace_lines(&m.run(&format!("cat {root}trace")))
            .into_iter()
            .find(|l| l.event == "tracing_mark_write" && l.fields == "gone")
            .expect("the marker");
        assert_eq!(m.run(&format!("echo > {root}per_cpu/cpu0/trace")), "");
        assert!(!m.run(&format!("cat {root}trace")).contains("tracing_mark_write: gone"));
        assert!(
            cpu1(&mut m).first().is_some_and(|l| l.ts < marker.ts),
            "CPU 1's records from before the clear are gone too"
        );
        // events/enable, per system and per event: 0, 1 and X.
        assert_eq!(m.run(&format!("echo 0 > {root}events/enable")), "");
        assert_eq!(m.run(&format!("cat {root}events/enable")).trim(), "0");
        assert_eq!(m.run(&format!("echo 1 > {root}events/timer/tick/enable")), "");
        assert_eq!(m.run(&format!("cat {root}events/timer/tick/enable")).trim(), "1");
        assert_eq!(m.run(&format!("cat {root}events/enable")).trim(), "X");
        assert_eq!(m.run(&format!("echo 1 > {root}events/irq/enable")), "");
        assert_eq!(m.run(&format!("cat {root}events/irq/enable")).trim(), "1");
        assert!(m.run(&format!("echo 5 > {root}events/irq/enable")).contains("Invalid argument"));
        assert_eq!(m.run(&format!("cat {root}events/irq/enable")).trim(), "1");
        assert_eq!(m.run(&format!("echo 1 > {root}events/enable")), "");
        assert_eq!(m.run(&format!("cat {root}events/enable")).trim(), "1");
        let format = m.run(&format!("cat {root}events/timer/tick/format"));
        assert!(
            format.contains("name: tick")
                && format.contains("field:unsigned long long tick;\toffset:8;\tsize:8;\tsigned:0;")
                && format.contains(
                    "print fmt: \"tick=%llu interval=%lluns\", REC->tick, REC->interval_ns"
                ),
            "{format}"
        );
        let id: u16 =
            m.run(&format!("cat {root}events/timer/tick/id")).trim().parse().expect("numeric id");
        assert_eq!(
            m.run(&format!("cat {root}events/timer/tick/id")).trim(),
            id.to_string(),
            "ids are stable"
        );
        assert!(m.run(&format!("echo 3 > {root}events/timer/tick/id")).contains("read-only"));
        assert!(
            m.run(&format!("cat {root}events/timer/nosuch/enable"))
                .contains("No such file or directory")
        );
        let systems = m.run(&format!("ls {root}events"));
        assert!(
            systems.lines().any(|l| l == "latency/") && systems.lines().any(|l| l == "timer/"),
            "{systems}"
        );
    }
}

#[test]
fn ls_cd_pwd_and_file_system_errors() {
    let mut m = machine_with_instance();
    let root = m.run("ls");
    for entry in [
        "available_events",
        "set_event",
        "tracing_on",
        "trace",
        "trace_pipe",
        "snapshot",
        "buffer_size_kb",
        "buffer_total_size_kb",
        "trace_marker",
        "trace_clock",
        "options/",
        "per_cpu/",
        "events/",
        "instances/",
    ] {
        assert!(root.lines().any(|l| l == entry), "ls lacks {entry}:\n{root}");
    }
    assert_eq!(m.run("cd instances/t1"), "");
    assert_eq!(m.run("pwd").trim(), "/instances/t1");
    let inside = m.run("ls");
    assert!(inside.contains("trace_pipe") && !inside.contains("instances/"), "{inside}");
    assert_eq!(m.run("cd ../.."), "");
    assert_eq!(m.run("pwd").trim(), "/");
    assert!(m.run("cd nowhere").contains("No such file or directory"));
    assert!(m.run("cd trace").contains("Not a directory"));
    assert_eq!(m.run("pwd").trim(), "/", "a failed cd changes nothing");
    assert!(m.run("cat nothing_here").contains("cat: nothing_here: No such file or directory"));
    assert!(m.run("cat events").contains("Is a directory"));
    // As coreutils' `cat`: a file that fails does not stop the others.
    assert_eq!(
        m.run("cat nothing_here tracing_on events"),
        "1\ncat: nothing_here: No such file or directory\ncat: events: Is a directory\n"
    );
    assert!(m.run("echo 1 > events").contains("Is a directory"));
    assert!(m.run("ls trace").contains("trace"));
    assert!(m.run("cat").contains("usage: cat FILE"));
    assert!(m.run("ls \"unterminated").contains("unterminated quote"));
    assert!(m.run("echo 1 >").contains("missing file"));
    assert!(m.run("uptime > trace").contains("redirection is not supported"));
}

#[test]
fn instances_are_made_and_removed_with_mkdir_and_rmdir() {
    let mut m = machine_with_instance();
    assert!(m.run("mkdir instances/t1").contains("File exists"));
    let rule = "Invalid argument (instance names are 1 to 32 characters of A-Z a-z 0-9 _ - ., not \
                . or .., nor top, which names the top level in reports)";
    assert!(m.run("mkdir instances/bad!name").contains(rule));
    assert!(m.run("mkdir instances/top").contains(rule));
    assert!(m.run("mkdir trace").contains("File exists"));
    let eperm = "Operation not permitted (only instances/NAME is made or removed)";
    assert!(m.run("mkdir elsewhere").contains(eperm));
    assert!(m.run(&format!("mkdir instances/{}", "n".repeat(40))).contains(rule));
    let listing = m.run("ls instances");
    assert!(
        listing.lines().any(|l| l == "t1/") && listing.lines().any(|l| l == "latency/"),
        "{listing}"
    );
    // The watchdog driver holds its instance: busy.
    let busy = m.run("rmdir instances/latency");
    assert!(busy.contains("Device or resource busy (the instance is in use: a driver"), "{busy}");
    assert!(m.run("ls instances").contains("latency/"));
    assert_eq!(m.run("rmdir instances/t1"), "");
    assert!(!m.run("ls instances").contains("t1/"));
    assert!(m.run("rmdir instances/t1").contains("No such file or directory"));
    assert!(m.run("rmdir trace").contains(eperm));
    // Several names at once, as Linux's instance selftest does (`mkdir x y z` in
    // `instances/`): each is made or removed, and each failure has its own line.
    assert_eq!(m.run("cd instances"), "");
    assert_eq!(m.run("mkdir x y z"), "");
    let listed = m.run("ls x z");
    assert!(
        listed.starts_with("x:\navailable_events\n") && listed.contains("\n\nz:\n"),
        "{listed}"
    );
    assert_eq!(
        m.run("mkdir y w latency"),
        "mkdir: y: File exists\nmkdir: latency: File exists\n",
        "w is made between the two refusals"
    );
    assert_eq!(m.run("rmdir x y z w"), "");
    assert_eq!(m.run("rmdir x"), "rmdir: x: No such file or directory\n");
    assert_eq!(m.run("cd /"), "");
    let mut made = 0;
    let error = loop {
        let out = m.run(&format!("mkdir instances/many{made}"));
        if !out.is_empty() {
            break out;
        }
        made += 1;
    };
    assert!(
        error.contains("No space left on device") || error.contains("Cannot allocate memory"),
        "{error}"
    );
    assert!(made >= 8, "made {made} instances");
    for i in 0..made {
        assert_eq!(m.run(&format!("rmdir instances/many{i}")), "");
    }
}

#[test]
fn trace_pipe_consumes_and_reports_lost_events_in_discard_mode() {
    let mut m = machine_with_instance();
    // A small discard-mode buffer fed by timer ticks of every CPU fills up.
    m.run("echo 4 > instances/t1/buffer_size_kb");
    m.run("echo 0 > instances/t1/options/overwrite");
    m.run("echo timer:tick > instances/t1/set_event");
    let dropped = |m: &mut Machine| -> u64 {
        (0..4).map(|cpu| m.cpu_stat("instances/t1/", cpu, "dropped events:")).sum()
    };
    let filled = (0..500).any(|_| dropped(&mut m) > 0);
    assert!(filled, "the buffer never overflowed");
    m.run("echo 0 > instances/t1/tracing_on");
    // Everything the rings hold, with the losses: recording is off, so the read ends
    // once the rings are dry, as Linux's.
    let entries: u64 = (0..4).map(|cpu| m.cpu_stat("instances/t1/", cpu, "entries:")).sum();
    let first = m.run("cat instances/t1/trace_pipe");
    assert_eq!(trace_lines(&first).len() as u64, entries, "{first}");
    assert!(first.contains("[LOST "), "no lost-events line:\n{first}");
    let lost: u64 = first
        .lines()
        .filter_map(|l| l.split("[LOST ").nth(1)?.split(' ').next()?.parse::<u64>().ok())
        .sum();
    assert_eq!(lost, dropped(&mut m), "every dropped event is reported once");
    let consumed = trace_lines(&first);
    assert!(!consumed.is_empty());
    // A second read does not repeat them: the buffer is empty now. Having read
    // nothing, it waits (for recording to start again) until a key.
    m.send(b"cat instances/t1/trace_pipe\r");
    m.wait_for("trace_pipe\r\n", STEP_TIMEOUT);
    m.send(b"q");
    let second = m.wait_for_prompt(STEP_TIMEOUT);
    assert!(trace_lines(&second).is_empty(), "consumed events came back:\n{second}");
    let stats = m.run("cat instances/t1/per_cpu/cpu0/stats");
    assert!(stats.contains("entries: 0"), "{stats}");
}

#[test]
fn per_cpu_stats_balance_after_stress_in_both_modes() {
    let mut m = Machine::boot();
    for (mode, lost_field) in [("overwrite", "overrun:"), ("discard", "dropped events:")] {
        assert!(m.run(&format!("stress {mode} 500")).contains(&format!("stress {mode}: PASS")));
        assert_eq!(
            m.run("cat instances/stress/options/overwrite").trim(),
            if mode == "overwrite" { "1" } else { "0" }
        );
        for cpu in 0..4 {
            let stats = m.run(&format!("cat instances/stress/per_cpu/cpu{cpu}/stats"));
            let field = |name: &str| -> u64 {
                stats
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .unwrap_or_else(|| panic!("{name} in {stats}"))
                    .trim()
                    .parse()
                    .unwrap()
            };
            let (written, entries, read, overrun, dropped) = (
                field("written:"),
                field("entries:"),
                field("read events:"),
                field("overrun:"),
                field("dropped events:"),
            );
            assert_eq!(written, entries + read + overrun + dropped, "{mode} cpu{cpu}:\n{stats}");
            assert!(written > 0 && read > 0, "{mode} cpu{cpu}:\n{stats}");
            if cpu > 0 {
                assert!(field(lost_field) > 0, "{mode}: cpu{cpu}'s ring never filled:\n{stats}");
            }
        }
    }
}

/// `annotate` (on by default, as ftrace's): in a buffer that overwrote records,
/// `trace` marks where each CPU's records start, except the first record's CPU;
/// off, or in one CPU's file, no mark, and the same records.
#[test]
fn annotate_marks_where_each_cpus_records_start() {
    let mut m = machine_with_instance();
    // CPU 1's ring holds under half a second of ticks; the others' the whole run.
    assert_eq!(m.run("echo 1 > instances/t1/per_cpu/cpu1/buffer_size_kb"), "");
    assert_eq!(m.run("echo timer:tick > instances/t1/set_event"), "");
    let out = m.run_within("stress overwrite 2000", Duration::from_secs(300));
    assert!(out.contains("stress overwrite: PASS"), "{out}");
    assert_eq!(m.run("echo 0 > instances/t1/tracing_on"), "");
    let stats = m.run("cat instances/t1/per_cpu/cpu1/stats");
    let overrun = stats.lines().find_map(|l| l.strip_prefix("overrun: ")?.parse::<u64>().ok());
    assert!(overrun.is_some_and(|n| n > 0), "CPU 1 overwrote records: {stats}");
    // The event lines and the marks, header aside.
    let body = |m: &mut Machine, file: &str| -> Vec<String> {
        let text = m.run(&format!("cat instances/t1/{file}"));
        let kept = text.lines().filter(|l| !l.starts_with('#') || l.starts_with("#####"));
        kept.map(String::from).collect()
    };
    let annotated = body(&mut m, "trace");
    let cpu_of = |line: &str| line.split(" [").nth(1).and_then(|r| r[..3].parse::<usize>().ok());
    let first = cpu_of(&annotated[0]).unwrap_or_else(|| panic!("{annotated:#?}"));
    let mut marked = Vec::new();
    for (i, line) in annotated.iter().enumerate() {
        if let Some(cpu) = line.strip_prefix("##### CPU ") {
            let cpu: usize = cpu.strip_suffix(" buffer started ####").unwrap().parse().unwrap();
            assert_eq!(cpu_of(&annotated[i + 1]), Some(cpu), "the mark precedes its CPU's first");
            let earlier = annotated[..i].iter().any(|l| cpu_of(l) == Some(cpu));
            assert!(!earlier, "CPU {cpu} marked after its records began: {annotated:#?}");
            marked.push(cpu);
        }
    }
    let mut expected: Vec<usize> = (0..4).filter(|&cpu| cpu != first).collect();
    marked.sort();
    expected.retain(|cpu| annotated.iter().any(|l| cpu_of(l) == Some(*cpu)));
    assert_eq!(marked, expected, "every CPU but the first record's, once");
    assert!(marked.contains(&1), "CPU 1's window starts late: {annotated:#?}");
    assert_eq!(m.run("echo 0 > instances/t1/options/annotate"), "");
    let plain = body(&mut m, "trace");
    let records: Vec<&String> = annotated.iter().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(plain.iter().collect::<Vec<_>>(), records, "the same records, unmarked");
    assert_eq!(m.run("echo 1 > instances/t1/options/annotate"), "");
    let one = body(&mut m, "per_cpu/cpu1/trace");
    assert!(!one.is_empty() && one.iter().all(|l| !l.starts_with('#')), "{one:#?}");
}
