//! The function tracers: every traceable function's entry is a 5-byte NOP until an
//! instance's `current_tracer` turns `function` or `function_graph` on; its filter
//! files choose which functions it traces; once no instance traces a function, its
//! entry is the NOP again, byte for byte.

use e2e::{Machine, STEP_TIMEOUT, cpu_lines, trace_lines};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// `functions`' summary: traceable functions, calls now, the instances' tracers
/// (`none`, or `/=function a=function_graph`), entry bytes hash.
#[derive(Debug, PartialEq)]
struct Summary {
    functions: usize,
    calls: usize,
    tracer: String,
    hash: String,
}

fn summary(machine: &mut Machine) -> Summary {
    let out = machine.run("functions");
    let line = out.lines().find(|l| l.starts_with("# ")).unwrap_or_else(|| panic!("{out}"));
    let words: Vec<&str> = line.split([' ', ',', ';']).filter(|w| !w.is_empty()).collect();
    let at = |word: &str| words.iter().position(|w| *w == word).unwrap_or_else(|| panic!("{line}"));
    Summary {
        functions: words[1].parse().unwrap(),
        calls: words[at("calls") - 1].parse().unwrap(),
        tracer: line.split("tracers: ").nth(1).and_then(|t| t.split(';').next()).unwrap().into(),
        hash: words[at("hash") + 1].into(),
    }
}

/// The names `available_filter_functions` lists.
fn available(machine: &mut Machine) -> Vec<String> {
    machine.run("cat available_filter_functions").lines().map(String::from).collect()
}

#[test]
fn tracers_patch_every_entry_and_nop_restores_each_byte_for_byte() {
    let mut machine = Machine::boot();
    assert!(machine.transcript().contains("entry sites traceable"), "the boot collects the sites");
    let before = summary(&mut machine);
    assert_eq!((before.calls, before.tracer.as_str()), (0, "none"), "{before:?}");
    let names = available(&mut machine);
    assert_eq!(names.len(), before.functions);
    assert!(names.len() > 50, "{names:?}");
    assert!(names.iter().any(|n| n == "kernel::shell::commands::cat"), "{names:?}");
    // The tracer's own code, the patcher, the entry paths and the panic path are
    // never traced.
    for name in &names {
        let path = name.trim_start_matches('<');
        assert!(path.starts_with("kernel::") || path.starts_with("latency_watchdog::"), "{name}");
        for never in ["kernel::arch::", "kernel::tracing::", "kernel::memory::", "kernel::panic"] {
            assert!(!path.starts_with(never), "{name}");
        }
    }
    assert_eq!(machine.run("cat available_tracers"), "function_graph irqsoff function nop\n");
    assert_eq!(machine.run("cat current_tracer"), "nop\n");
    assert_eq!(machine.run("cat set_ftrace_filter"), "#### all functions enabled ####\n");
    assert_eq!(machine.run("cat set_ftrace_notrace"), "#### no functions disabled ####\n");
    assert_eq!(machine.run("cat set_graph_function"), "#### all functions enabled ####\n");
    assert_eq!(machine.run("cat set_graph_notrace"), "#### no functions disabled ####\n");
    for tracer in ["function", "function_graph", "irqsoff"] {
        machine.run(&format!("echo {tracer} > current_tracer"));
        assert_eq!(machine.run("cat current_tracer"), format!("{tracer}\n"));
        let on = summary(&mut machine);
        let expected = (before.functions, format!("/={tracer}"));
        assert_eq!((on.calls, on.tracer.clone()), expected, "{on:?}");
        assert_ne!(on.hash, before.hash, "the entries changed");
        let site = machine.run("functions kernel::shell::commands::cat");
        let words: Vec<&str> = site.lines().next().unwrap().split(' ').collect();
        assert_eq!((words[1], words[2]), ("call", "e8"), "a call rel32: {site}");
        machine.run("echo nop > current_tracer");
        assert_eq!(summary(&mut machine), before, "every entry is its NOP again, byte for byte");
    }
}

#[test]
fn bad_tracer_and_filter_writes_are_refused_and_change_nothing() {
    let mut machine = Machine::boot();
    let before = summary(&mut machine);
    let error = machine.run("echo bogus > current_tracer");
    assert!(error.contains("no such tracer (see available_tracers)"), "{error}");
    assert_eq!(machine.run("cat current_tracer"), "nop\n");
    // `?` and classes as Linux's globs take them.
    machine.run("echo 'kernel::shell::commands::[b-c]a?' > set_ftrace_filter");
    // A glob that matches nothing refuses the whole write, `>` included.
    let error =
        machine.run("echo 'kernel::shell::commands::pwd no_such_function*' > set_ftrace_filter");
    assert!(error.contains("a glob matches no function"), "{error}");
    assert_eq!(machine.run("cat set_ftrace_filter"), "kernel::shell::commands::cat\n");
    // A number is that line of `available_filter_functions` (from 1), as in Linux;
    // one past the list matches nothing.
    let names = available(&mut machine);
    assert_eq!(machine.run("echo '1 3' > set_ftrace_filter"), "");
    assert_eq!(machine.run("cat set_ftrace_filter"), format!("{}\n{}\n", names[0], names[2]));
    assert_eq!(machine.run("echo '!1' >> set_ftrace_filter"), "");
    assert_eq!(machine.run("cat set_ftrace_filter"), format!("{}\n", names[2]));
    for line in [0, names.len() + 1] {
        let error = machine.run(&format!("echo {line} >> set_ftrace_filter"));
        assert!(error.contains("a glob matches no function"), "{line}: {error}");
    }
    assert_eq!(machine.run("cat set_ftrace_filter"), format!("{}\n", names[2]));
    machine.run("echo 'kernel::shell::commands::cat' > set_ftrace_filter");
    let error = machine.run("echo '!nothing' >> set_ftrace_notrace");
    assert!(error.contains("a glob matches no function"), "{error}");
    assert_eq!(machine.run("cat set_ftrace_notrace"), "#### no functions disabled ####\n");
    let error = machine.run("echo 'nothing*' > set_graph_function");
    assert!(error.contains("a glob matches no function"), "{error}");
    assert_eq!(machine.run("cat set_graph_function"), "#### all functions enabled ####\n");
    assert!(machine.run("cat error_log").contains("a glob matches no function"));
    // An instance has its own tracer and lists, refused the same way.
    machine.run("mkdir instances/a");
    let error = machine.run("echo graph > instances/a/current_tracer");
    assert!(error.contains("no such tracer (see available_tracers)"), "{error}");
    assert_eq!(machine.run("cat instances/a/current_tracer"), "nop\n");
    let tracers = machine.run("cat instances/a/available_tracers");
    assert_eq!(tracers, "function_graph irqsoff function nop\n");
    let listing = machine.run("ls instances/a");
    assert!(listing.contains("set_ftrace_filter") && listing.contains("set_ftrace_notrace"));
    assert!(!listing.contains("available_filter_functions"), "top level only: {listing}");
    // `available_filter_functions_addrs`: the same functions, each after its address
    // in hex (the site its entry's NOP is patched at), no two at one address.
    let addrs = machine.run("cat available_filter_functions_addrs");
    let mut seen = std::collections::HashSet::new();
    let names: Vec<String> = addrs
        .lines()
        .map(|line| {
            let (addr, name) = line.split_once(' ').unwrap_or_else(|| panic!("{line}"));
            let addr = u64::from_str_radix(addr, 16).unwrap_or_else(|_| panic!("{line}"));
            assert!(addr != 0 && seen.insert(addr), "{line}");
            name.to_string()
        })
        .collect();
    assert_eq!(names, available(&mut machine));
    // The address `functions` shows for a site, as the patcher knows it.
    let site = machine.run("functions kernel::shell::commands::cat");
    let shown = site.split(' ').next().unwrap_or_default().trim_start_matches("0x");
    let listed = addrs.lines().find(|l| l.ends_with(" kernel::shell::commands::cat"));
    let listed = listed.and_then(|l| l.split(' ').next()).unwrap_or_default();
    let parse = |hex: &str| u64::from_str_radix(hex, 16).ok();
    assert_eq!(parse(listed), parse(shown), "{site}");
    assert!(parse(shown).is_some(), "{site}");
    let error = machine.run("echo 'nothing*' > instances/a/set_ftrace_filter");
    assert!(error.contains("a glob matches no function"), "{error}");
    let filter = machine.run("cat instances/a/set_ftrace_filter");
    assert_eq!(filter, "#### all functions enabled ####\n");
    assert!(machine.run("cat instances/a/error_log").contains("a glob matches no function"));
    assert!(machine.run("echo x > available_filter_functions").contains("Permission denied"));
    // The function tracers' events are recorded by current_tracer, not enabled.
    for file in
        ["events/ftrace/function/enable", "instances/a/events/ftrace/funcgraph_entry/enable"]
    {
        let error = machine.run(&format!("echo 1 > {file}"));
        assert!(error.contains("a function tracer's event: current_tracer records it"), "{error}");
        assert_eq!(machine.run(&format!("cat {file}")), "0\n");
    }
    let listed = machine.run("cat available_events");
    // None of the tracer's own events (as in Linux), the others are.
    assert!(listed.contains("timer:tick") && !listed.contains("ftrace:"), "{listed}");
    let error = machine.run("echo ftrace:function >> set_event");
    assert!(error.contains("a function tracer's event: current_tracer records it"), "{error}");
    assert_eq!(summary(&mut machine), before, "no refused write patched anything");
}

#[test]
fn function_records_the_filtered_functions_with_their_callers() {
    let mut machine = Machine::boot();
    machine.run("echo 0 > events/enable");
    let names = available(&mut machine);
    let commands: BTreeSet<String> =
        names.iter().filter(|n| n.starts_with("kernel::shell::commands::c")).cloned().collect();
    assert!(commands.contains("kernel::shell::commands::cpus"), "{commands:?}");
    // `GLOB:mod:CRATE`: the functions of one crate (the driver's here).
    machine.run("echo '*:mod:latency_watchdog' > set_ftrace_filter");
    let driver: Vec<String> =
        machine.run("cat set_ftrace_filter").lines().map(String::from).collect();
    let ours = |n: &String| n.trim_start_matches('<').starts_with("latency_watchdog::");
    assert_eq!(driver, names.iter().filter(|n| ours(n)).cloned().collect::<Vec<_>>());
    assert!(!driver.is_empty());
    let error = machine.run("echo 'kernel::*:mod:latency_watchdog' > set_ftrace_filter");
    assert!(error.contains("a glob matches no function"), "{error}");
    // Module globbing, as Linux's: an empty glob is `*`, the crate is a glob, and
    // `!CRATE` is every other crate.
    let listed = |machine: &mut Machine| -> Vec<String> {
        machine.run("cat set_ftrace_filter").lines().map(String::from).collect()
    };
    machine.run("echo ':mod:latency_wat*' > set_ftrace_filter");
    assert_eq!(listed(&mut machine), driver);
    machine.run("echo '*:mod:!latency_watchdog' > set_ftrace_filter");
    let others = listed(&mut machine);
    assert_eq!(others, names.iter().filter(|n| !ours(n)).cloned().collect::<Vec<_>>());
    machine.run("echo '!:mod:' >> set_ftrace_filter");
    assert!(machine.run("cat set_ftrace_filter").contains("#### all functions enabled ####"));
    // `>` sets, `>>` adds, `!` removes.
    machine.run("echo 'kernel::shell::commands::c*' > set_ftrace_filter");
    machine.run("echo kernel::shell::commands::pwd >> set_ftrace_filter");
    machine.run("echo '!kernel::shell::commands::cd' >> set_ftrace_filter");
    let mut expected = commands.clone();
    expected.insert("kernel::shell::commands::pwd".into());
    expected.remove("kernel::shell::commands::cd");
    let listed: BTreeSet<String> =
        machine.run("cat set_ftrace_filter").lines().map(String::from).collect();
    assert_eq!(listed, expected);
    assert_eq!(summary(&mut machine).calls, 0, "no tracer: nothing patched yet");
    machine.run("echo function > current_tracer");
    assert_eq!(summary(&mut machine).calls, expected.len(), "only the filter's sites are calls");
    machine.run("echo > trace");
    machine.run("cpus");
    machine.run("pwd");
    machine.run("cd /");
    // `set_ftrace_notrace` wins over the filter.
    machine.run("echo kernel::shell::commands::pwd > set_ftrace_notrace");
    machine.run("pwd");
    machine.run("echo 0 > tracing_on");
    let trace = machine.run("cat trace");
    assert!(trace.starts_with("# tracer: function"), "{trace}");
    let calls: Vec<(String, String)> = trace_lines(&trace)
        .iter()
        .map(|l| {
            let (function, parent) = l.event.split_once(" <-").unwrap_or_else(|| panic!("{l:?}"));
            assert_eq!(l.task, "shell-1", "{l:?}");
            (function.to_string(), parent.to_string())
        })
        .collect();
    for (function, _) in &calls {
        assert!(expected.contains(function), "{function} is not in the filter:\n{trace}");
    }
    let count = |name: &str| calls.iter().filter(|(f, _)| f == name).count();
    assert_eq!(count("kernel::shell::commands::cpus"), 1, "{trace}");
    assert_eq!(count("kernel::shell::commands::pwd"), 1, "once before notrace:\n{trace}");
    assert_eq!(count("kernel::shell::commands::cd"), 0, "{trace}");
    // Each command is called by the shell's loop.
    let cpus = calls.iter().find(|(f, _)| f == "kernel::shell::commands::cpus").unwrap();
    assert!(cpus.1.starts_with("kernel::shell::run"), "{cpus:?}");

    // options/func_stack_trace: a stack trace after each function recorded, from the
    // function outward.
    machine.run("echo kernel::shell::commands::cpus > set_ftrace_filter");
    assert_eq!(machine.run("cat options/func_stack_trace"), "0\n");
    assert_eq!(machine.run("echo 1 > options/func_stack_trace"), "");
    assert_eq!(machine.run("cat options/func_stack_trace"), "1\n");
    machine.run("echo > trace");
    machine.run("echo 1 > tracing_on");
    machine.run("cpus");
    machine.run("echo 0 > tracing_on");
    assert_eq!(machine.run("echo 0 > options/func_stack_trace"), "");
    let error = machine.run("echo 2 > options/func_stack_trace");
    assert!(error.contains("Invalid argument (0 or 1)"), "{error}");
    let trace = machine.run("cat trace");
    let lines: Vec<&str> = trace.lines().filter(|l| !l.starts_with('#')).collect();
    let at = lines.iter().position(|l| l.contains(" kernel::shell::commands::cpus <-"));
    let at = at.unwrap_or_else(|| panic!("no call of cpus:\n{trace}"));
    assert!(lines[at + 1].contains(" kernel_stack: depth="), "{trace}");
    assert!(lines[at + 2].starts_with(" => kernel::shell::commands::cpus+0x5"), "{trace}");
    assert!(lines[at + 3].starts_with(" => kernel::shell::run+0x"), "{trace}");
}

/// One `function_graph` line: CPU, depth (from the indentation), name, the
/// duration in ns at a return, and whether it is a leaf (`name();`: a call and its
/// return on one line).
#[derive(Debug, PartialEq, Eq)]
struct GraphLine {
    cpu: usize,
    depth: usize,
    name: String,
    duration: Option<u64>,
    leaf: bool,
}

fn graph_lines(trace: &str) -> Vec<GraphLine> {
    trace
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains(") "))
        .map(|line| {
            let (cpu, rest) = line.split_once(") ").unwrap();
            let (time, call) = rest.split_once("|  ").unwrap_or_else(|| panic!("{line}"));
            let depth = (call.len() - call.trim_start().len()) / 2;
            let call = call.trim_start();
            let duration = time.trim().trim_start_matches(['+', '!', '#', '*', '@', '$']).trim();
            let duration = duration.strip_suffix(" us").map(|us| {
                let (whole, frac) = us.trim().split_once('.').unwrap();
                whole.parse::<u64>().unwrap() * 1000 + frac.parse::<u64>().unwrap()
            });
            let leaf = call.strip_suffix("();");
            let name = match duration {
                Some(_) => leaf.or(call.strip_prefix("} /* ").and_then(|c| c.strip_suffix(" */"))),
                None => call.strip_suffix("() {"),
            };
            GraphLine {
                cpu: cpu.trim().parse().unwrap(),
                depth,
                name: name.unwrap_or_else(|| panic!("{line}")).into(),
                duration,
                leaf: leaf.is_some(),
            }
        })
        .collect()
}

/// Functions that nest when a tracefs file is read: `cat` calls `read`, which calls
/// `write_format` for a `format` file.
const NESTED: [&str; 3] = [
    "kernel::shell::commands::cat",
    "kernel::shell::tracefs::read",
    "kernel::shell::tracefs::write_format",
];

/// Runs `commands` under `function_graph` (with the lists set before), then turns
/// recording off (another tracer would empty the buffer, as in ftrace); returns CPU
/// 0's trace and its graph lines.
fn graph_of(machine: &mut Machine, commands: &[&str]) -> (String, Vec<GraphLine>) {
    machine.run("echo function_graph > current_tracer");
    machine.run("echo > trace");
    machine.run("echo 1 > tracing_on");
    for command in commands {
        machine.run(command);
    }
    machine.run("echo 0 > tracing_on");
    let trace = machine.run("cat per_cpu/cpu0/trace");
    let lines = graph_lines(&trace);
    (trace, lines)
}

#[test]
fn function_graph_nests_calls_and_their_durations_add_up() {
    let mut machine = Machine::boot();
    machine.run("echo 0 > events/enable");
    machine.run(&format!("echo '{}' > set_ftrace_filter", NESTED.join(" ")));
    let formats = ["cat events/shell/command/format", "cat events/timer/tick/format"];
    let (trace, lines) = graph_of(&mut machine, &formats);
    // Replay the nesting: each return closes the innermost open call of its name,
    // at the depth it opened, and lasts at least as long as its children together.
    let mut open: Vec<(String, usize, u64)> = Vec::new();
    let (mut nested, mut leaves) = (0, 0);
    for line in &lines {
        assert_eq!(line.cpu, 0, "{line:?}");
        match line.duration {
            None => {
                assert_eq!(line.depth, open.len(), "an entry one level in: {line:?}\n{trace}");
                open.push((line.name.clone(), line.depth, 0));
            }
            Some(took) if line.leaf => {
                assert_eq!(line.depth, open.len(), "a leaf one level in: {line:?}\n{trace}");
                leaves += 1;
                if let Some(parent) = open.last_mut() {
                    parent.2 += took;
                }
            }
            Some(took) => {
                let Some((name, depth, children)) = open.pop() else {
                    // The return of a call entered before the trace was cleared.
                    continue;
                };
                assert_eq!((&name, depth), (&line.name, line.depth), "{trace}");
                assert!(took >= children, "{name}: {took} ns < its children's {children} ns");
                nested += usize::from(children > 0);
                if let Some(parent) = open.last_mut() {
                    parent.2 += took;
                }
            }
        }
    }
    assert!(open.is_empty(), "every call returned: {open:?}\n{trace}");
    let names: BTreeSet<&str> = lines.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, NESTED.into(), "{trace}");
    let formats = lines.iter().filter(|l| l.name.ends_with("write_format") && l.duration.is_some());
    assert_eq!(formats.count(), 2, "{trace}");
    assert!(nested >= 4, "cat > read > write_format twice: {trace}");
    // `write_format` calls nothing traced: each of its calls prints as one line.
    assert_eq!(leaves, 2, "{trace}");
    // The dump's text (the panic dump's too) prints the same lines, leaves included.
    let dumped = machine.run("dump orig_cpu instance top");
    assert_eq!(graph_lines(&dumped), lines, "dump:\n{dumped}\ntrace:\n{trace}");
    // trace_pipe consumes the same records and prints the same lines, leaves included
    // (recording is off: it ends once it has read them).
    let piped = machine.run("cat per_cpu/cpu0/trace_pipe");
    let piped = graph_lines(&piped);
    assert_eq!(piped, lines, "trace_pipe:\n{piped:#?}\ntrace:\n{trace}");
}

#[test]
fn tracers_on_and_off_1000_times_under_stress_on_4_cpus_keep_every_count() {
    let _alone = e2e::busy_guest();
    let mut machine = Machine::boot();
    let before = summary(&mut machine);
    // Every traceable function, the stress writers and their interrupt and NMI hooks
    // among them, goes from NOP to call and back 1000 times while they run.
    let command = "stress overwrite 100 cycle 1000 functions";
    machine.send(format!("{command}\r").as_bytes());
    machine.wait_for(&format!("{command}\r\n"), STEP_TIMEOUT);
    let started = Instant::now();
    let out = machine.wait_for_prompt(Duration::from_secs(600));
    println!("1000 cycles in {:?}", started.elapsed());
    assert!(out.contains("stress overwrite: PASS"), "{out}");
    let report =
        out.lines().find(|l| l.starts_with("functions: ")).unwrap_or_else(|| panic!("{out}"));
    assert!(
        report.starts_with("functions: tracers on and off 1000 of 1000 times")
            && report.contains(" 0 hooked calls left")
            && report.ends_with("| invariant ok"),
        "{report}"
    );
    assert_eq!(summary(&mut machine), before, "every entry is its NOP again");
}

#[test]
fn a_functions_stress_is_refused_while_the_function_tracers_are_in_use() {
    let mut machine = Machine::boot();
    let command = "stress overwrite 100 cycle 2 functions";
    let refusal = "stress: cycle N functions takes the function tracers over: every \
                   current_tracer must be nop and function_profile_enabled 0";
    // A function tracer on in the top level or an instance, or the profiler: the run
    // would replace them, and their calls in progress are not its own.
    machine.run("mkdir instances/g");
    for (on, off) in [
        ("echo function_graph > current_tracer", "echo nop > current_tracer"),
        ("echo function > instances/g/current_tracer", "echo nop > instances/g/current_tracer"),
        ("echo 1 > function_profile_enabled", "echo 0 > function_profile_enabled"),
    ] {
        let before = summary(&mut machine);
        machine.run(on);
        let out = machine.run(command);
        assert_eq!(out.trim_end(), refusal, "{on}");
        machine.run(off);
        assert_eq!(summary(&mut machine), before, "{on}: the refused run changed nothing");
    }
    // All off, it runs, and every call it hooked returned.
    let out = machine.run_within(command, Duration::from_secs(300));
    let report =
        out.lines().find(|l| l.starts_with("functions: ")).unwrap_or_else(|| panic!("{out}"));
    assert!(out.contains("stress overwrite: PASS"), "{out}");
    assert!(report.contains(" 0 hooked calls left") && report.ends_with("| invariant ok"), "{out}");
}

#[test]
fn a_panic_under_function_graph_names_the_callers_the_tracer_hooked() {
    let mut machine = Machine::boot();
    machine.run("echo function_graph > current_tracer");
    assert_eq!(machine.run_to_exit("panic"), boot::qemu::Outcome::KernelFailure);
    let transcript = machine.transcript();
    // The call trace, the other CPUs' NMI backtraces and the stacks they recorded
    // in the dump name where each hooked call returns, not the trampoline.
    assert!(!transcript.contains("return_trampoline"), "{transcript}");
    let frames = e2e::call_trace(&transcript);
    let command = frames.iter().position(|f| f.starts_with("kernel::shell::commands::panic+"));
    let command = command.unwrap_or_else(|| panic!("{frames:#?}"));
    let caller = frames.get(command + 1).copied().unwrap_or_default();
    assert!(caller.starts_with("kernel::shell::run+"), "{frames:#?}");
}

/// As ftrace: another tracer in `current_tracer` empties the buffer and keeps the
/// snapshot, in an instance too; the tracer there already changes nothing.
#[test]
fn another_tracer_empties_the_buffer_and_keeps_the_snapshot() {
    let mut m = Machine::boot();
    m.run("mkdir instances/c");
    for root in ["", "instances/c/"] {
        m.run(&format!("echo kept > {root}trace_marker"));
        assert_eq!(m.run(&format!("echo 1 > {root}snapshot")), "");
        m.run(&format!("echo live > {root}trace_marker"));
        assert_eq!(m.run(&format!("echo nop > {root}current_tracer")), "");
        let grep = |m: &mut Machine, file: &str, text: &str| {
            m.run(&format!("cat {root}{file} | grep -c {text}"))
        };
        assert_eq!(grep(&mut m, "trace", "'write: [l]ive'"), "1\n", "{root}: the same tracer");
        assert_eq!(grep(&mut m, "snapshot", "'write: [k]ept'"), "1\n", "{root}");
        m.run(&format!("echo kernel::shell::commands::pwd > {root}set_ftrace_filter"));
        assert_eq!(m.run(&format!("echo function > {root}current_tracer")), "");
        assert_eq!(grep(&mut m, "trace", "'write: [l]ive'"), "0\n", "{root}: another tracer");
        assert_eq!(grep(&mut m, "snapshot", "'write: [k]ept'"), "1\n", "{root}");
        m.run("pwd");
        assert_eq!(m.run(&format!("echo nop > {root}current_tracer")), "");
        assert_eq!(grep(&mut m, "trace", "'commands::[p]wd'"), "0\n", "{root}: nop again");
    }
}

#[test]
fn report_elf_names_the_functions_the_kernel_names() {
    let mut machine = Machine::boot();
    machine.run("echo 0 > events/enable");
    machine.run("echo 'kernel::shell::commands::*' > set_ftrace_filter");
    machine.run("echo function > current_tracer");
    machine.run("echo > trace");
    machine.run("cpus");
    machine.run("pwd");
    machine.run("echo 0 > tracing_on");
    let kernel = machine.run("cat trace");
    let host = crate::filters::top_level_report_with_elf(&mut machine);
    // The same calls with the same names: the kernel's `function <-caller` bodies.
    let bodies = |text: &str| -> Vec<String> {
        trace_lines(text).into_iter().filter(|l| l.event.contains(" <-")).map(|l| l.event).collect()
    };
    let (on_host, in_kernel) = (bodies(&host), bodies(&kernel));
    assert!(
        in_kernel.iter().any(|b| b.starts_with("kernel::shell::commands::cpus <-")),
        "{kernel}"
    );
    assert_eq!(on_host, in_kernel, "host:\n{host}\nkernel:\n{kernel}");
}

#[test]
fn instances_trace_their_own_functions_and_rmdir_restores_their_entries() {
    let mut machine = Machine::boot();
    let before = summary(&mut machine);
    assert_eq!(machine.run("cat touched_functions"), "", "no entry has been a call yet");
    machine.run("echo 0 > events/enable");
    machine.run("mkdir instances/a");
    // The top level graphs `cpus`; instance a records `pwd` with `function`.
    machine.run("echo kernel::shell::commands::cpus > set_ftrace_filter");
    machine.run("echo function_graph > current_tracer");
    machine.run("echo kernel::shell::commands::pwd > instances/a/set_ftrace_filter");
    machine.run("echo function > instances/a/current_tracer");
    assert_eq!(machine.run("cat instances/a/current_tracer"), "function\n");
    assert_eq!(machine.run("cat current_tracer"), "function_graph\n");
    let on = summary(&mut machine);
    assert_eq!((on.calls, on.tracer.as_str()), (2, "/=function_graph a=function"), "{on:?}");
    // `enabled_functions`: the two entries, one callback each (by address); instance
    // a on `cpus` too makes two there.
    let enabled = |m: &mut Machine| {
        let mut lines: Vec<String> =
            m.run("cat enabled_functions").lines().map(String::from).collect();
        lines.sort();
        lines
    };
    let (cpus, pwd) = ("kernel::shell::commands::cpus", "kernel::shell::commands::pwd");
    assert_eq!(enabled(&mut machine), [format!("{cpus} (1)"), format!("{pwd} (1)")]);
    machine.run(&format!("echo {cpus} >> instances/a/set_ftrace_filter"));
    assert_eq!(enabled(&mut machine), [format!("{cpus} (2)"), format!("{pwd} (1)")]);
    machine.run(&format!("echo '!{cpus}' >> instances/a/set_ftrace_filter"));
    assert_eq!(enabled(&mut machine), [format!("{cpus} (1)"), format!("{pwd} (1)")]);
    let total: usize = machine.run("cat dyn_ftrace_total_info").trim().parse().unwrap();
    assert_eq!(total, available(&mut machine).len());
    assert!(machine.run("echo 1 > enabled_functions").contains("read-only"));
    assert!(machine.run("cat instances/a/enabled_functions").contains("No such file"));
    machine.run("echo > trace");
    machine.run("cpus");
    machine.run("pwd");
    let mine = machine.run("cat instances/a/trace");
    assert!(mine.starts_with("# tracer: function\n"), "{mine}");
    let calls: Vec<String> = trace_lines(&mine).into_iter().map(|l| l.event).collect();
    assert_eq!(calls.len(), 1, "{mine}");
    assert!(calls[0].starts_with("kernel::shell::commands::pwd <-kernel::shell::run"), "{mine}");
    let top = machine.run("cat trace");
    assert!(top.starts_with("# tracer: function_graph\n"), "{top}");
    let graphed: BTreeSet<String> = graph_lines(&top).into_iter().map(|l| l.name).collect();
    assert_eq!(graphed, BTreeSet::from(["kernel::shell::commands::cpus".to_string()]), "{top}");
    // Removing a tracing instance restores the entries only it traced.
    machine.run("rmdir instances/a");
    let after = summary(&mut machine);
    assert_eq!((after.calls, after.tracer.as_str()), (1, "/=function_graph"), "{after:?}");
    // A new instance of the same name starts with `nop` and empty lists.
    machine.run("mkdir instances/a");
    assert_eq!(machine.run("cat instances/a/current_tracer"), "nop\n");
    let filter = machine.run("cat instances/a/set_ftrace_filter");
    assert_eq!(filter, "#### all functions enabled ####\n");
    machine.run("echo nop > current_tracer");
    assert_eq!(summary(&mut machine), before, "every entry is its NOP again, byte for byte");
    assert_eq!(machine.run("cat enabled_functions"), "");
    // `touched_functions`: the two whose entries were calls, no callback left.
    let mut touched: Vec<String> =
        machine.run("cat touched_functions").lines().map(String::from).collect();
    touched.sort();
    assert_eq!(touched, [format!("{cpus} (0)"), format!("{pwd} (0)")]);
    assert!(machine.run("cat instances/a/touched_functions").contains("No such file"));
}

#[test]
fn set_graph_function_and_set_graph_notrace_choose_the_call_graphs() {
    let mut machine = Machine::boot();
    let before = summary(&mut machine);
    machine.run("echo 0 > events/enable");
    let cat = "kernel::shell::commands::cat";
    machine.run(&format!("echo {cat} > set_graph_function"));
    assert_eq!(machine.run("cat set_graph_function"), format!("{cat}\n"));
    // Every function is traced; only what runs under `cat` is recorded.
    machine.run("echo function_graph > current_tracer");
    let graphs = |machine: &mut Machine| {
        machine.run("echo > trace");
        machine.run("pwd");
        machine.run("cat events/shell/command/id");
        graph_lines(&machine.run("cat per_cpu/cpu0/trace"))
    };
    let lines = graphs(&mut machine);
    let names: BTreeSet<&str> = lines.iter().map(|l| l.name.as_str()).collect();
    assert!(lines.iter().filter(|l| l.depth == 0).all(|l| l.name == cat), "{lines:#?}");
    assert!(names.contains(cat) && names.contains("kernel::shell::tracefs::read"), "{names:?}");
    assert!(!names.contains("kernel::shell::commands::pwd"), "{names:?}");
    // Nothing from `read` down, while `cat` still is.
    machine.run("echo kernel::shell::tracefs::read > set_graph_notrace");
    let lines = graphs(&mut machine);
    let names: BTreeSet<&str> = lines.iter().map(|l| l.name.as_str()).collect();
    assert!(names.contains(cat), "{names:?}");
    assert!(!names.contains("kernel::shell::tracefs::read"), "{names:?}");
    assert!(lines.iter().filter(|l| l.depth == 0).all(|l| l.name == cat), "{lines:#?}");
    assert_eq!(machine.run("cat set_graph_notrace"), "kernel::shell::tracefs::read\n");
    // An instance's graph lists are its own.
    machine.run("mkdir instances/g");
    let theirs = machine.run("cat instances/g/set_graph_function");
    assert_eq!(theirs, "#### all functions enabled ####\n");
    machine.run("echo nop > current_tracer");
    assert_eq!(summary(&mut machine), before, "every entry is its NOP again, byte for byte");
}

#[test]
fn max_graph_depth_and_tracing_thresh_limit_what_function_graph_records() {
    let mut machine = Machine::boot();
    assert_eq!(machine.run("cat max_graph_depth"), "0\n");
    for bad in ["-1", "two", "1 2", ""] {
        let out = machine.run(&format!("echo '{bad}' > max_graph_depth"));
        assert!(out.contains("a decimal number of calls (0: no limit)"), "{bad}: {out}");
    }
    assert_eq!(machine.run("cat max_graph_depth"), "0\n", "a refused write changes nothing");
    machine.run("mkdir instances/d");
    assert!(machine.run("cat instances/d/max_graph_depth").contains("No such file or directory"));
    machine.run("echo 0 > events/enable");
    machine.run(&format!("echo '{}' > set_ftrace_filter", NESTED.join(" ")));
    // cat > read > write_format: each limit keeps that many levels.
    for (limit, expected) in [(1, &NESTED[..1]), (2, &NESTED[..2]), (0, &NESTED[..])] {
        assert_eq!(machine.run(&format!("echo {limit} > max_graph_depth")), "");
        assert_eq!(machine.run("cat max_graph_depth"), format!("{limit}\n"));
        let (trace, lines) = graph_of(&mut machine, &["cat events/shell/command/format"]);
        let names: BTreeSet<&str> = lines.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, expected.iter().copied().collect(), "limit {limit}:\n{trace}");
        let deepest = lines.iter().map(|l| l.depth).max().unwrap();
        assert_eq!(deepest + 1, expected.len(), "limit {limit}:\n{trace}");
        // A call at the deepest level followed is a leaf: its callees are not.
        if limit == 1 {
            assert!(lines.iter().all(|l| l.leaf), "limit 1:\n{trace}");
        }
    }

    // `tracing_thresh` (µs, top level): `function_graph` records a call only at its
    // return, and only if it took at least that long.
    assert_eq!(machine.run("cat tracing_thresh"), "0\n");
    assert!(machine.run("cat instances/d/tracing_thresh").contains("No such file or directory"));
    for (bad, rule) in [
        ("-1", "a decimal number of microseconds (0: off)"),
        ("1.5", "a decimal number of microseconds (0: off)"),
        ("18446744073709551615", "the threshold is too large"),
    ] {
        let out = machine.run(&format!("echo '{bad}' > tracing_thresh"));
        assert!(out.contains(rule), "{bad}: {out}");
    }
    assert_eq!(machine.run("cat tracing_thresh"), "0\n", "a refused write changes nothing");
    assert_eq!(machine.run("echo 1 > tracing_thresh"), "");
    assert_eq!(machine.run("cat tracing_thresh"), "1\n");
    let (trace, lines) = graph_of(&mut machine, &["cat events/shell/command/format"]);
    // Each call is one `}` line at its depth, innermost first: no entry is recorded.
    let names: Vec<&str> = lines.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, [NESTED[2], NESTED[1], NESTED[0]], "{trace}");
    for (line, depth) in lines.iter().zip([2, 1, 0]) {
        assert!(!line.leaf && line.duration.is_some_and(|ns| ns >= 1000), "{line:?}\n{trace}");
        assert_eq!(line.depth, depth, "{trace}");
    }
    // No call takes 10 s; 0 records every call again, entries included.
    machine.run("echo 10000000 > tracing_thresh");
    let (trace, lines) = graph_of(&mut machine, &["cat events/shell/command/format"]);
    assert!(lines.is_empty(), "{trace}");
    machine.run("echo 0 > tracing_thresh");
    let (trace, lines) = graph_of(&mut machine, &["cat events/shell/command/format"]);
    let entries = lines.iter().filter(|l| l.duration.is_none()).count();
    assert_eq!((lines.len(), entries), (5, 2), "cat and read open, write_format a leaf:\n{trace}");
}

/// `set_ftrace_filter`'s commands (`FUNCTION:COMMAND[:COUNT]`), at the top level and
/// in an instance, as Linux's `func_traceonoff_triggers.tc` expects them: `traceoff`
/// stops recording when the function is called, whatever the tracer; `!` removes
/// it (tracing stays off); `traceon` starts it again; `traceoff:3` acts three times.
/// Then `stacktrace` records the call chain from the function, `enable_event` turns
/// an event on, `snapshot` takes a snapshot; the file lists each command with the
/// count left; refusals name the rule and change nothing; an entry is a call while
/// it has a command, its NOP again after.
#[test]
fn function_commands_act_when_their_function_is_called() {
    let mut m = Machine::boot();
    let pwd = "kernel::shell::commands::pwd";
    let cd = "kernel::shell::commands::cd";
    let entry = |m: &mut Machine, f: &str| m.run(&format!("functions {f}"));
    let nop_before = entry(&mut m, pwd);
    assert!(nop_before.contains(&format!(" nop 0f 1f 44 00 08 {pwd}\n")), "{nop_before}");
    m.run("mkdir instances/c");
    for root in ["", "instances/c/"] {
        let filter = format!("{root}set_ftrace_filter");
        let cat = |m: &mut Machine, file: &str| m.run(&format!("cat {root}{file}"));
        let all = "#### all functions enabled ####\n";
        assert_eq!(m.run(&format!("echo timer:tick >> {root}set_event")), "");

        assert_eq!(m.run(&format!("echo '{pwd}:traceoff' > {filter}")), "");
        assert_eq!(cat(&mut m, "set_ftrace_filter"), format!("{all}{pwd}:traceoff:unlimited\n"));
        assert_eq!(cat(&mut m, "current_tracer"), "nop\n");
        assert!(entry(&mut m, pwd).contains(" call e8 "), "a call while commanded");
        assert_eq!(cat(&mut m, "tracing_on"), "1\n");
        m.run("pwd");
        assert_eq!(cat(&mut m, "tracing_on"), "0\n", "{root}");
        let stopped = cat(&mut m, "trace");
        m.run("uptime");
        assert_eq!(cat(&mut m, "trace"), stopped, "{root}: the trace stopped moving");
        assert_eq!(m.run(&format!("echo '!{pwd}:traceoff' >> {filter}")), "");
        assert_eq!(cat(&mut m, "set_ftrace_filter"), all);
        assert_eq!(cat(&mut m, "tracing_on"), "0\n", "removing it turns nothing on");
        assert_eq!(m.run(&format!("echo '{pwd}:traceon' > {filter}")), "");
        m.run("pwd");
        assert_eq!(cat(&mut m, "tracing_on"), "1\n");
        assert_eq!(m.run(&format!("echo '!{pwd}:traceon' >> {filter}")), "");

        // A count: off three times (each time tracing is turned on again), then kept.
        assert_eq!(m.run(&format!("echo '{pwd}:traceoff:3' > {filter}")), "");
        for left in [2, 1, 0] {
            m.run("pwd");
            assert_eq!(cat(&mut m, "tracing_on"), "0\n", "{root}: count {left}");
            let listed = cat(&mut m, "set_ftrace_filter");
            assert!(listed.contains(&format!("{pwd}:traceoff:count={left}\n")), "{listed}");
            m.run(&format!("echo 1 > {root}tracing_on"));
        }
        m.run("pwd");
        assert_eq!(cat(&mut m, "tracing_on"), "1\n", "{root}: the count ran out");
        assert_eq!(m.run(&format!("echo '!{pwd}:traceoff:0' > {filter}")), "");
        assert_eq!(cat(&mut m, "set_ftrace_filter"), all);

        // stacktrace: the chain starts in the function, then its caller.
        m.run(&format!("echo > {root}trace"));
        assert_eq!(m.run(&format!("echo '{pwd}:stacktrace:1' >> {filter}")), "");
        m.run("pwd");
        let trace = cat(&mut m, "trace");
        let frames: Vec<&str> = trace.lines().filter_map(|l| l.strip_prefix(" => ")).collect();
        assert!(frames.len() >= 3, "{trace}");
        assert!(frames[0].starts_with(&format!("{pwd}+0x5")), "{trace}");
        assert!(frames[1].starts_with("kernel::shell::"), "the caller: {trace}");
        assert!(frames.iter().all(|f| !f.contains("ftrace") && !f.starts_with("trace::")));
        // disable_event and enable_event with a count, as `func_event_triggers.tc`:
        // the target is soft-disabled (`1*`/`0*`) meanwhile; each call of cd switches
        // it back three times, then no more.
        let kmalloc = "events/kmem/kmalloc/enable";
        for (command, set, then) in [("disable", "1", "0"), ("enable", "0", "1")] {
            let line = format!("{cd}:{command}_event:kmem:kmalloc:3");
            assert_eq!(m.run(&format!("echo '{line}' >> {filter}")), "");
            for _ in 0..3 {
                m.run(&format!("echo {set} > {root}{kmalloc}"));
                assert_eq!(cat(&mut m, kmalloc), format!("{set}*\n"), "{root}{command}");
                m.run("cd /");
                assert_eq!(cat(&mut m, kmalloc), format!("{then}*\n"), "{root}{command}");
            }
            m.run(&format!("echo {set} > {root}{kmalloc}"));
            m.run("cd /");
            assert_eq!(cat(&mut m, kmalloc), format!("{set}*\n"), "{root}{command}: ran out");
            if command == "disable" {
                assert_eq!(m.run(&format!("echo '!{line}' >> {filter}")), "");
            }
        }
        assert_eq!(cat(&mut m, kmalloc), "0*\n");
        m.run("cd /");
        assert_eq!(cat(&mut m, kmalloc), "0*\n", "enable_event's count ran out");
        // snapshot: the live buffer, with the marker written before, becomes the
        // snapshot.
        assert_eq!(m.run(&format!("echo '{pwd}:snapshot:1' >> {filter}")), "");
        m.run(&format!("echo before-{} > {root}trace_marker", root.len()));
        m.run("pwd");
        let snapshot = cat(&mut m, "snapshot");
        assert!(snapshot.contains(&format!("before-{}", root.len())), "{snapshot}");
        let listed = cat(&mut m, "set_ftrace_filter");
        for line in [
            format!("{cd}:enable_event:kmem:kmalloc:count=0"),
            format!("{pwd}:stacktrace:count=0"),
            format!("{pwd}:snapshot:count=0"),
        ] {
            assert!(listed.lines().any(|l| l == line), "{line} in\n{listed}");
        }

        // Refusals name the rule and change nothing.
        for (line, rule) in [
            (format!("{pwd}:bogus"), "unknown command (mod, traceon, traceoff, snapshot"),
            (format!("{pwd}:hist:keys=ip"), "unknown command (mod, traceon, traceoff, snapshot"),
            (format!("!{pwd}:traceon"), "no function the glob names has this command"),
            (format!("{pwd}:traceoff:x"), "count must be a number below 2^64 - 1"),
            (format!("{pwd}:enable_event:kmem:nope"), "no such event"),
            ("nosuch:traceoff".into(), "a glob matches no function"),
            // One write is one change: its second removal finds the command gone.
            (format!("{cd} !{pwd}:stacktrace !{pwd}:stacktrace"), "no function the glob names"),
        ] {
            let error = m.run(&format!("echo '{line}' >> {filter}"));
            assert!(error.contains(rule), "{line}: {error}");
            assert_eq!(cat(&mut m, "set_ftrace_filter"), listed, "{line} changed the list");
        }
        // error_log's caret is under the count, in the value as written.
        let bad = format!("{pwd} {pwd}:traceoff:x");
        m.run(&format!("echo > {root}error_log"));
        m.run(&format!("echo '{bad}' >> {filter}"));
        let log = cat(&mut m, "error_log");
        let caret = log.lines().last().unwrap_or_default();
        assert_eq!(caret.find('^'), Some("  Command: ".len() + bad.find('x').unwrap()), "{log}");
        let error = m.run(&format!("echo '{pwd}:traceoff' >> {root}set_ftrace_notrace"));
        assert!(error.contains("commands (FUNCTION:COMMAND) are written to set_ftrace_filter"));

        for command in [format!("{cd}:enable_event:kmem:kmalloc"), format!("{pwd}:stacktrace")] {
            assert_eq!(m.run(&format!("echo '!{command}' >> {filter}")), "");
        }
        assert_eq!(m.run(&format!("echo '!{pwd}:snapshot' >> {filter}")), "");
        assert_eq!(cat(&mut m, "set_ftrace_filter"), all);
        assert_eq!(cat(&mut m, kmalloc), "0\n", "no longer soft-disabled");
        m.run(&format!("echo 0 > {root}{kmalloc}"));
        assert_eq!(entry(&mut m, pwd), nop_before, "{root}: the NOP again");
    }

    // cpudump: the call prints the dump a panic would, of its CPU's records; every
    // instance stops recording; the host tool reads the dump. Not an event trigger.
    // dump: the same, of every CPU's records.
    for (n, (command, cpus)) in [("cpudump", "0..0"), ("dump", "0..3")].into_iter().enumerate() {
        let marker = format!("before-{command}");
        m.run(&format!("echo {marker} > trace_marker"));
        assert_eq!(m.run(&format!("echo '{pwd}:{command}:1' >> set_ftrace_filter")), "");
        let out = m.run("pwd");
        let header = format!("# trace dump: 4 CPU(s), records of CPU(s) {cpus}");
        assert!(out.contains(&header), "{out}");
        for root in ["", "instances/c/"] {
            assert_eq!(m.run(&format!("cat {root}tracing_on")), "0\n", "{root}");
            m.run(&format!("echo 1 > {root}tracing_on"));
        }
        let dumps = m.dumps();
        assert_eq!(dumps.len(), n + 1);
        let dump = &dumps[n];
        assert!(dump.problems.is_empty() && dump.panic.is_none(), "{:?}", dump.problems);
        let sections = dump.sections();
        let top = sections.iter().find(|s| s.instance == "top").expect("the top level");
        assert!(top.events.iter().any(|e| top.texts().text(e) == marker));
        let elsewhere = sections.iter().flat_map(|s| &s.events).any(|e| e.cpu != 0);
        assert_eq!(elsewhere, command == "dump", "{command}: other CPUs' records");
        assert!(m.run("cat set_ftrace_filter").contains(&format!("{pwd}:{command}:count=0")));
        assert_eq!(m.run(&format!("echo '!{pwd}:{command}' >> set_ftrace_filter")), "");
    }
    let error = m.run("echo dump > events/irq/irq_handler_entry/trigger");
    assert!(error.contains("parse error at 0: unknown command"), "{error}");

    // A glob puts the command on each function it matches, and a removal takes it
    // from those its glob matches (`func_set_ftrace_file.tc`). `traceon` while on
    // does nothing, whoever calls these.
    assert_eq!(m.run("echo '*::commands::p*:traceon' > set_ftrace_filter"), "");
    let named = |m: &mut Machine, pattern: &str| -> Vec<String> {
        let functions = m.run(&format!("cat available_filter_functions | grep '{pattern}'"));
        functions.lines().map(|f| format!("{f}:traceon:unlimited")).collect()
    };
    let listed = |m: &mut Machine| -> Vec<String> {
        let filter = m.run("cat set_ftrace_filter");
        filter.lines().filter(|l| !l.starts_with("####")).map(String::from).collect()
    };
    let all_p = named(&mut m, "::commands::p");
    assert!(all_p.len() >= 3, "{all_p:?}");
    assert_eq!(listed(&mut m), all_p);
    assert_eq!(m.run("echo '!*::commands::pw*:traceon' >> set_ftrace_filter"), "");
    assert_eq!(listed(&mut m), named(&mut m, "::commands::p[^w]"));
    assert_eq!(m.run("echo '!*:traceon' >> set_ftrace_filter"), "");
    assert!(listed(&mut m).is_empty());
}

/// The function tracers' events take filters and triggers like any event's: a `hist`
/// trigger keyed on `ip.sym` counts the calls of each function (ftrace's function
/// profiler's hit counts), one on `funcgraph_exit` sums their durations, and a filter
/// on the caller keeps `function` records out of the trace.
#[test]
fn hist_triggers_on_function_events_profile_the_calls() {
    let mut machine = Machine::boot();
    let pwd = "kernel::shell::commands::pwd";
    let cat = "kernel::shell::commands::cat";
    machine.run(&format!("echo '{pwd} {cat}' > set_ftrace_filter"));
    machine.run("echo function > current_tracer");
    machine.run("echo 'hist:keys=ip.sym:sort=ip' > events/ftrace/function/trigger");
    for command in ["pwd", "pwd", "pwd", "cat tracing_on", "cat tracing_on"] {
        machine.run(command);
    }
    // The `cat` that reads the file is the third.
    let hist = machine.run("cat events/ftrace/function/hist");
    let counts: Vec<(String, u64)> = hist
        .lines()
        .filter_map(|l| {
            let (key, hits) = l.strip_prefix("{ ip: [")?.split_once(" } hitcount:")?;
            let name = key.split_once("] ")?.1.trim().to_string();
            Some((name, hits.trim().parse().ok()?))
        })
        .collect();
    let mut expected = vec![(pwd.to_string(), 3), (cat.to_string(), 3)];
    expected.sort_by_key(|(name, _)| hist.find(&format!("] {name}")).unwrap_or(usize::MAX));
    assert_eq!(counts, expected, "{hist}");

    // A filter on the caller: no `function` record, the histogram still counts.
    // (The pattern does not match the `shell:command` record of its own command.)
    let records = "cat trace | grep -c 'commands::pwd [<]-'";
    let before = machine.run(records);
    machine.run("echo 'parent_ip == 0' > events/ftrace/function/filter");
    machine.run("pwd");
    assert_eq!(machine.run(records), before);
    assert_ne!(before, "0\n");
    assert!(machine.run("cat events/ftrace/function/hist").contains("hitcount:          4"));
    machine.run("echo 0 > events/ftrace/function/filter");

    // Durations per function, summed from `function_graph`'s returns.
    machine.run("echo function_graph > current_tracer");
    machine.run("echo 'hist:keys=func.sym:vals=duration' > events/ftrace/funcgraph_exit/trigger");
    machine.run("pwd");
    machine.run("pwd");
    let hist = machine.run("cat events/ftrace/funcgraph_exit/hist");
    let line =
        hist.lines().find(|l| l.contains(&format!("] {pwd} "))).unwrap_or_else(|| panic!("{hist}"));
    let (_, rest) = line.split_once("hitcount:").unwrap();
    let words: Vec<&str> = rest.split_whitespace().collect();
    assert_eq!((words[0], words[1]), ("2", "duration:"), "{line}");
    assert!(words[2].parse::<u64>().unwrap() > 0, "{line}");
    machine.run("echo nop > current_tracer");
}

/// A row of `stack_trace`: index, depth, size, location.
#[derive(Debug)]
struct StackRow {
    depth: u64,
    size: u64,
    location: String,
}

/// The rows of `stack_trace`, after checking its header names their count.
fn stack_rows(machine: &mut Machine) -> (String, Vec<StackRow>) {
    let text = machine.run("cat stack_trace");
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default();
    assert_eq!(lines.next(), Some("        -----    ----   --------"), "{text}");
    let rows: Vec<StackRow> = lines
        .filter(|l| !l.starts_with('#'))
        .enumerate()
        .map(|(i, line)| {
            let (index, rest) = line.split_once(')').unwrap_or_else(|| panic!("{text}"));
            assert_eq!(index.trim().parse::<usize>().ok(), Some(i), "{text}");
            // The location may hold spaces (`<T as Trait>::f+0x0`).
            let words: Vec<&str> = rest.split_whitespace().collect();
            let number = |i: usize| words.get(i).and_then(|w| w.parse().ok());
            let (Some(depth), Some(size)) = (number(0), number(1)) else { panic!("{line}") };
            StackRow { depth, size, location: words[2..].join(" ") }
        })
        .collect();
    let count = format!("        Depth    Size   Location    ({} entries)", rows.len());
    assert_eq!(header, count, "{text}");
    // Each row's size is its depth less the next one's; the last row's, its depth.
    for (i, row) in rows.iter().enumerate() {
        let next = rows.get(i + 1).map_or(0, |r| r.depth);
        assert!(row.depth >= next, "depths fall outward:\n{text}");
        assert_eq!(row.size, row.depth - next, "row {i}:\n{text}");
    }
    (text, rows)
}

/// The stack tracer (`stack_tracer_enabled`, `stack_max_size`, `stack_trace`,
/// `stack_trace_filter`), as ftrace's: the functions it checks are calls while it is
/// on, beside a function tracer's; `stack_trace` is the deepest chain seen, from the
/// checked function outward, each frame's size the difference of the depths;
/// `stack_max_size` is its depth, and writing 0 starts again; the filter limits
/// which entries are checked; refusals change nothing; off, every entry is its NOP
/// again, byte for byte.
#[test]
fn the_stack_tracer_shows_the_deepest_stack_of_the_functions_it_checks() {
    let mut machine = Machine::boot();
    let before = summary(&mut machine);
    assert_eq!(machine.run("cat stack_tracer_enabled"), "0\n");
    assert_eq!(machine.run("cat stack_max_size"), "0\n");
    assert_eq!(machine.run("cat stack_trace_filter"), "#### all functions enabled ####\n");
    let (text, rows) = stack_rows(&mut machine);
    assert!(rows.is_empty() && text.contains("Stack tracer disabled"), "{text}");
    machine.run("mkdir instances/s");
    for top_only in ["stack_tracer_enabled", "stack_max_size", "stack_trace", "stack_trace_filter"]
    {
        let out = machine.run(&format!("cat instances/s/{top_only}"));
        assert!(out.contains("No such file or directory"), "{top_only}: {out}");
    }

    // On, every function is checked: a read through cat > read > write_format
    // leaves a chain at least that deep, cat's caller (the shell) further out.
    assert_eq!(machine.run("echo 1 > stack_tracer_enabled"), "");
    assert_eq!(machine.run("cat stack_tracer_enabled"), "1\n");
    let on = summary(&mut machine);
    assert_eq!((on.calls, on.tracer.as_str()), (before.functions, "stack"), "{on:?}");
    // Enabling patched every entry, waiting on every CPU: a tick taken there may hold
    // the deepest stack so far (seen once). Measure from the read alone.
    assert_eq!(machine.run("echo 0 > stack_max_size"), "");
    machine.run("cat events/shell/command/format");
    let (text, rows) = stack_rows(&mut machine);
    let max: u64 = machine.run("cat stack_max_size").trim().parse().unwrap();
    assert!(rows.len() >= 4, "{text}");
    assert!(rows[0].location.ends_with("+0x0"), "the checked function's entry:\n{text}");
    assert_eq!((rows[0].size, rows[0].depth), (0, rows[1].depth), "no frame yet:\n{text}");
    assert!(max >= rows[0].depth, "stack_max_size {max}:\n{text}");
    let at = |name: &str| rows.iter().position(|r| r.location.starts_with(&format!("{name}+")));
    let (cat, run) = (at(NESTED[0]), at("kernel::shell::run"));
    assert!(cat.is_some() && run.is_some() && cat < run, "cat called from the shell:\n{text}");

    // The filter: only write_format is checked (one call); from 0, the next read
    // through it is the maximum, and the chain is exactly cat > read > write_format.
    assert_eq!(machine.run(&format!("echo {} > stack_trace_filter", NESTED[2])), "");
    assert_eq!(machine.run("cat stack_trace_filter"), format!("{}\n", NESTED[2]));
    assert_eq!(summary(&mut machine).calls, 1);
    assert_eq!(machine.run("echo 0 > stack_max_size"), "");
    assert_eq!(machine.run("cat stack_max_size"), "0\n", "nothing checked ran since");
    machine.run("cat events/shell/command/format");
    let (text, rows) = stack_rows(&mut machine);
    let names: Vec<&str> =
        rows.iter().map(|r| r.location.split('+').next().unwrap_or_default()).collect();
    assert_eq!(names[..3], [NESTED[2], NESTED[1], NESTED[0]], "{text}");
    assert_eq!(rows[0].location, format!("{}+0x0", NESTED[2]), "{text}");
    let max = machine.run("cat stack_max_size");
    assert_eq!(max, format!("{}\n", rows[0].depth), "{text}");
    // Only a deeper stack is stored: the same read again changes nothing.
    machine.run("cat events/shell/command/format");
    assert_eq!(machine.run("cat stack_max_size"), max);
    assert_eq!(stack_rows(&mut machine).0, text);
    // `>>` adds; `>` with nothing is every function again.
    let pwd = "kernel::shell::commands::pwd";
    assert_eq!(machine.run(&format!("echo {pwd} >> stack_trace_filter")), "");
    assert_eq!(machine.run("cat stack_trace_filter").lines().count(), 2);
    assert_eq!(summary(&mut machine).calls, 2);

    // Refusals name the rule and change nothing.
    for (file, value, rule) in [
        ("stack_tracer_enabled", "2", "0 or 1"),
        ("stack_max_size", "big", "a decimal number of bytes"),
        ("stack_max_size", "-1", "a decimal number of bytes"),
        ("stack_trace_filter", "no_such_function", "a glob matches no function"),
        ("stack_trace_filter", "kernel::shell::commands::pwd:traceon", "set_ftrace_filter"),
        ("stack_trace", "1", "read-only"),
    ] {
        let out = machine.run(&format!("echo '{value}' > {file}"));
        assert!(out.contains(rule), "{file} {value}: {out}");
    }
    assert_eq!(machine.run("cat stack_tracer_enabled"), "1\n");
    assert_eq!(machine.run("cat stack_max_size"), max);
    assert_eq!(machine.run("cat stack_trace_filter").lines().count(), 2);
    assert_eq!(summary(&mut machine).calls, 2);

    // Beside a function tracer: its entries stay calls when the stack tracer goes.
    machine.run(&format!("echo {pwd} > set_ftrace_filter"));
    machine.run("echo function > current_tracer");
    assert_eq!(machine.run("echo > stack_trace_filter"), "");
    assert_eq!(summary(&mut machine).calls, before.functions);
    assert_eq!(machine.run("echo 0 > stack_tracer_enabled"), "");
    let (kept, kept_max) = (stack_rows(&mut machine).0, machine.run("cat stack_max_size"));
    let traced = summary(&mut machine);
    assert_eq!((traced.calls, traced.tracer.as_str()), (1, "/=function"), "{traced:?}");
    machine.run("echo nop > current_tracer");
    assert_eq!(summary(&mut machine), before, "every entry is its NOP again, byte for byte");
    // Off, nothing is checked, and the deepest chain stays to be read.
    machine.run("cat events/shell/command/format");
    assert_eq!(machine.run("cat stack_max_size"), kept_max);
    assert_eq!(stack_rows(&mut machine).0, kept);
    assert!(!kept.contains("disabled"), "{kept}");

    // The crash day: a stack overflow's panic report shows the deepest stack the
    // stack tracer saw, here the recursion that filled the 256 KiB stack.
    machine.run("echo kernel::shell::commands::recurse > stack_trace_filter");
    machine.run("echo 1 > stack_tracer_enabled");
    assert_eq!(machine.run_to_exit("fault stack"), boot::qemu::Outcome::KernelFailure);
    let transcript = machine.transcript();
    let report =
        transcript.split("Deepest kernel stack the stack tracer saw (stack_trace):").nth(1);
    let report = report.unwrap_or_else(|| panic!("{transcript}"));
    let first = report.lines().map(str::trim).find(|l| l.starts_with("0)")).unwrap_or_default();
    let words: Vec<&str> = first.split_whitespace().collect();
    let depth: u64 =
        words.get(1).and_then(|w| w.parse().ok()).unwrap_or_else(|| panic!("{report}"));
    assert!(depth > 250 * 1024 && depth <= 256 * 1024, "{report}");
    assert_eq!(words.get(3), Some(&"kernel::shell::commands::recurse+0x0"), "{report}");
}

/// A row of `trace_stat/functionN`: name, calls, and the three durations in ns.
#[derive(Debug)]
struct ProfileRow {
    name: String,
    hits: u64,
    time: u64,
    avg: u64,
}

/// The rows of CPU `cpu`'s function profile, after checking its header.
fn profile_rows(machine: &mut Machine, cpu: usize) -> (String, Vec<ProfileRow>) {
    let text = machine.run(&format!("cat trace_stat/function{cpu}"));
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default();
    assert!(
        header.starts_with("  Function ")
            && header.ends_with("Hit    Time            Avg             s^2"),
        "{text}"
    );
    assert!(lines.next().is_some_and(|l| l.starts_with("  --------")), "{text}");
    let ns = |us: &str| -> u64 {
        let (whole, frac) = us.split_once('.').unwrap_or((us, ""));
        let frac = format!("{frac:0<3}");
        whole.parse::<u64>().unwrap() * 1000 + frac[..3].parse::<u64>().unwrap()
    };
    let rows = lines
        .map(|line| {
            // The name, then: hits, time "us", avg "us", s^2 "us".
            let words: Vec<&str> = line.split_whitespace().collect();
            let n = words.len();
            assert!(
                n >= 8 && words[n - 1] == "us" && words[n - 3] == "us" && words[n - 5] == "us",
                "{line}"
            );
            ProfileRow {
                name: words[..n - 7].join(" "),
                hits: words[n - 7].parse().unwrap_or_else(|_| panic!("{line}")),
                time: ns(words[n - 6]),
                avg: ns(words[n - 4]),
            }
        })
        .collect();
    (text, rows)
}

/// The function profiler (`function_profile_enabled`, `trace_stat/functionN`), as
/// ftrace's: it profiles the functions the top level's `set_ftrace_filter` selects,
/// per CPU: calls, total and average time; interrupt handlers on every CPU count
/// on theirs; on again starts from zero, off keeps the counts; refusals change
/// nothing; off, every entry is its NOP again, byte for byte.
#[test]
fn the_function_profiler_counts_each_call_and_its_time_per_cpu() {
    let mut machine = Machine::boot();
    let before = summary(&mut machine);
    assert_eq!(machine.run("cat function_profile_enabled"), "0\n");
    assert_eq!(machine.run("ls trace_stat"), "function0\nfunction1\nfunction2\nfunction3\n");
    assert!(profile_rows(&mut machine, 0).1.is_empty());
    machine.run("mkdir instances/p");
    for file in ["function_profile_enabled", "trace_stat"] {
        let out = machine.run(&format!("cat instances/p/{file}"));
        assert!(out.contains("No such file or directory"), "{file}: {out}");
    }

    let (pwd, cd) = ("kernel::shell::commands::pwd", "kernel::shell::commands::cd");
    machine.run(&format!("echo '{pwd} {cd}' > set_ftrace_filter"));
    assert_eq!(machine.run("echo 1 > function_profile_enabled"), "");
    assert_eq!(machine.run("cat function_profile_enabled"), "1\n");
    let on = summary(&mut machine);
    assert_eq!((on.calls, on.tracer.as_str()), (2, "profile"), "{on:?}");
    for _ in 0..5 {
        machine.run("pwd");
    }
    machine.run("cd /events");
    machine.run("cd /");
    let (text, rows) = profile_rows(&mut machine, 0);
    let mut counted: Vec<(&str, u64)> = rows.iter().map(|r| (r.name.as_str(), r.hits)).collect();
    counted.sort();
    assert_eq!(counted, [(cd, 2), (pwd, 5)], "{text}");
    for row in &rows {
        assert!(row.time > 0 && row.avg * row.hits <= row.time, "{row:?}\n{text}");
        assert!(row.time < (row.avg + 1) * row.hits, "the average is time / calls: {row:?}");
    }
    let times: Vec<u64> = rows.iter().map(|r| r.time).collect();
    assert!(times.is_sorted_by(|a, b| a >= b), "the longest total first:\n{text}");
    for cpu in 1..4 {
        assert!(profile_rows(&mut machine, cpu).1.is_empty(), "the shell runs on CPU 0");
    }

    // Refusals name the rule and change nothing.
    for (file, value, rule) in [
        ("function_profile_enabled", "-1", "0 turns the profiler off, any other number on"),
        ("function_profile_enabled", "on", "0 turns the profiler off, any other number on"),
        ("trace_stat/function0", "0", "read-only"),
    ] {
        let out = machine.run(&format!("echo '{value}' > {file}"));
        assert!(out.contains(rule), "{file} {value}: {out}");
    }
    assert!(machine.run("cat trace_stat/function4").contains("No such file or directory"));
    assert_eq!(profile_rows(&mut machine, 0).0, text);

    // Off keeps the counts; on again starts from zero.
    assert_eq!(machine.run("echo 0 > function_profile_enabled"), "");
    machine.run("pwd");
    assert_eq!(profile_rows(&mut machine, 0).0, text);
    assert_eq!(summary(&mut machine), before, "every entry is its NOP again, byte for byte");
    machine.run("echo 1 > function_profile_enabled");
    machine.run("pwd");
    let (text, rows) = profile_rows(&mut machine, 0);
    assert_eq!(
        rows.iter().map(|r| (r.name.as_str(), r.hits)).collect::<Vec<_>>(),
        [(pwd, 1)],
        "{text}"
    );

    // The timer's handler runs on every CPU: each CPU counts its own calls.
    let tick = "kernel::timer::on_tick";
    for step in [
        format!("echo {tick} > set_ftrace_filter"),
        "echo 0 > function_profile_enabled".into(),
        "echo 1 > function_profile_enabled".into(),
    ] {
        assert_eq!(machine.run(&step), "", "{step}");
    }
    let enabled = machine.run("cat enabled_functions");
    assert_eq!(enabled, format!("{tick} (1)\n"));
    let ticks_before = machine.run("cpus");
    let out = machine.run_within("stress overwrite 200", Duration::from_secs(300));
    assert!(out.contains("stress overwrite: PASS"), "{out}");
    assert_eq!(machine.run("echo 0 > function_profile_enabled"), "");
    let ticks_after = machine.run("cpus");
    let tables: Vec<_> = (0..4).map(|cpu| profile_rows(&mut machine, cpu)).collect();
    // Where a CPU met a site's `int3` (a stale block under TCG meets it after the
    // patch too: the call must then be emulated, or the profiler counts nothing).
    let traps = machine.run("keys | grep int3");
    for (cpu, (_, rows)) in tables.iter().enumerate() {
        assert!(
            rows.len() == 1 && rows[0].name == tick && rows[0].hits > 0,
            "CPU {cpu} counted no {tick}: tables {tables:#?}\nticks before {ticks_before}, \
             after {ticks_after}\nstress: {out}\n{traps}"
        );
    }
    machine.run("echo > set_ftrace_filter");
    assert_eq!(summary(&mut machine), before);
}

/// The `latency_ns=` of an `irqsoff` line.
fn irqsoff_ns(line: &str) -> u64 {
    let ns = line.split("latency_ns=").nth(1).and_then(|s| s.split(' ').next());
    ns.and_then(|ns| ns.parse().ok()).unwrap_or_else(|| panic!("no latency in {line}"))
}

/// The function tracers' display options, as ftrace's: `print-parent` off drops
/// the caller, `sym-offset` adds offsets in the functions, `sym-addr` the addresses
/// (the kernel ELF's, as `report --elf` names them); with `context-info` off a
/// `function_graph` line is the call alone.
#[test]
fn function_lines_follow_the_symbol_options() {
    let mut m = Machine::boot();
    // The function tracers' records alone: no event of another CPU comes between
    // a call's entry and its return, which then print as one line.
    assert_eq!(m.run("echo > set_event"), "");
    let pwd = "kernel::shell::commands::pwd";
    m.run(&format!("echo {pwd} > set_ftrace_filter"));
    m.run("echo function > current_tracer");
    m.run("pwd");
    m.run("echo 0 > tracing_on");
    let call = |m: &mut Machine| {
        let trace = m.run("cat trace");
        let found = trace_lines(&trace).into_iter().find(|l| l.event.starts_with(pwd));
        found.unwrap_or_else(|| panic!("no {pwd}:\n{trace}")).event
    };
    let caller = "kernel::shell::run";
    let plain = call(&mut m);
    assert_eq!(plain, format!("{pwd} <-{caller}"));
    assert_eq!(m.run("echo 0 > options/print-parent"), "");
    assert_eq!(call(&mut m), pwd);
    assert_eq!(m.run("echo print-parent > trace_options"), "");
    assert_eq!(m.run("echo 1 > options/sym-offset"), "");
    let offsets = call(&mut m);
    let offset = offsets.strip_prefix(&format!("{pwd}+0x0 <-{caller}+0x")).unwrap_or_else(|| {
        panic!("{offsets}");
    });
    let offset = u64::from_str_radix(offset, 16).unwrap();
    assert_eq!(m.run("echo 1 > options/sym-addr"), "");
    let both = call(&mut m);
    let words: Vec<&str> = both.split(' ').collect();
    let address = |word: &str| {
        let hex = word.strip_prefix('<').and_then(|w| w.strip_suffix('>')).unwrap();
        assert_eq!(hex.len(), 16, "{both}");
        u64::from_str_radix(hex, 16).unwrap()
    };
    assert_eq!(words.len(), 4, "{both}");
    assert_eq!(words[2], format!("<-{caller}+{offset:#x}"), "{both}");
    let symbols = boot::report::Symbols::read(std::path::Path::new(boot::KERNEL_ELF)).unwrap();
    assert_eq!(symbols.lookup(address(words[1])), Some((pwd, 0)), "{both}");
    assert_eq!(symbols.lookup(address(words[3]) - 1), Some((caller, offset - 1)), "{both}");
    assert_eq!(m.run("echo 0 > options/sym-offset"), "");
    let numbers = call(&mut m);
    assert_eq!(numbers, format!("{pwd} {} <-{caller} {}", words[1], words[3]));

    // Another tracer empties the buffer, as in ftrace.
    m.run("echo function_graph > current_tracer");
    assert_eq!(trace_lines(&m.run("cat trace")), []);
    m.run("echo 1 > tracing_on");
    m.run("pwd");
    m.run("echo 0 > tracing_on");
    let graph = m.run("cat trace");
    let leaf = format!("{pwd}();");
    assert!(graph.lines().any(|l| l.starts_with(" 0) ") && l.ends_with(&format!("|  {leaf}"))));
    assert_eq!(m.run("echo 0 > options/context-info"), "");
    let bare = m.run("cat trace");
    assert!(bare.lines().any(|l| l == leaf), "{bare}");
    // trace_pipe too (with recording off, it ends once it has read what there is).
    let piped = m.run("cat per_cpu/cpu0/trace_pipe");
    assert!(piped.lines().any(|l| l == leaf), "{piped}");
    // The funcgraph-* options: the timestamp, the CPU, the task, the duration (the
    // pipe consumed the call: it is made again).
    m.run("echo 1 > tracing_on");
    m.run("pwd");
    m.run("echo 0 > tracing_on");
    assert_eq!(m.run("echo 1 > options/context-info"), "");
    for (option, value) in [("abstime", 1), ("proc", 1), ("duration", 0)] {
        assert_eq!(m.run(&format!("echo {value} > options/funcgraph-{option}")), "");
    }
    let columns = |m: &mut Machine| {
        let trace = m.run("cat trace");
        let line = trace.lines().find(|l| l.ends_with(&leaf)).map(String::from);
        let line = line.unwrap_or_else(|| panic!("{trace}"));
        let (stamp, rest) = line.split_once(" |  ").unwrap_or_else(|| panic!("{line}"));
        let (secs, us) = stamp.trim().split_once('.').unwrap_or_else(|| panic!("{line}"));
        assert!(secs.parse::<u64>().is_ok() && us.len() == 6, "{line}");
        rest.to_string()
    };
    assert_eq!(columns(&mut m), format!(" 0)    shell-1     | {leaf}"));
    assert_eq!(m.run("echo nofuncgraph-cpu > trace_options"), "");
    assert_eq!(columns(&mut m), format!("   shell-1     | {leaf}"));

    // funcgraph-tail and funcgraph-overhead on calls that nest: `echo` clears the
    // trace from inside itself, so its return has no entry in the buffer.
    let echo = "kernel::shell::commands::echo";
    m.run(&format!("echo '{echo} {}' > set_ftrace_filter", NESTED.join(" ")));
    m.run("echo 1 > tracing_on");
    m.run("echo > trace");
    m.run("cat events/shell/command/format");
    m.run("echo 0 > tracing_on");
    for (option, value) in [("abstime", 0), ("proc", 0), ("duration", 1), ("cpu", 1)] {
        assert_eq!(m.run(&format!("echo {value} > options/funcgraph-{option}")), "");
    }
    let cat = NESTED[0];
    let tailed = m.run("cat per_cpu/cpu0/trace");
    let lines = graph_lines(&tailed);
    let calls: Vec<(&str, usize, bool)> =
        lines.iter().map(|l| (l.name.as_str(), l.depth, l.duration.is_some())).collect();
    let expected = [
        (echo, 0, true),
        (cat, 0, false),
        (NESTED[1], 1, false),
        (NESTED[2], 2, true),
        (NESTED[1], 1, true),
        (cat, 0, true),
        (echo, 0, false),
    ];
    assert_eq!(calls, expected, "{tailed}");
    // funcgraph-overhead (on by default): each duration carries its bucket's mark.
    let mark_of = |ns: u64| {
        let marks = [(1_000_000_000, '$'), (100_000_000, '@'), (10_000_000, '*')];
        let more = [(1_000_000, '#'), (100_000, '!'), (10_000, '+')];
        marks.iter().chain(&more).find(|(over, _)| ns > *over).map_or(' ', |m| m.1)
    };
    let body = |line: &str| line.split_once(") ").map(|(_, rest)| rest.to_string());
    let bodies = |trace: &str| -> Vec<String> {
        trace.lines().filter(|l| !l.starts_with('#')).filter_map(body).collect()
    };
    let marked = bodies(&tailed);
    for (line, body) in lines.iter().zip(&marked) {
        let mark = line.duration.map_or(' ', mark_of);
        assert!(body.starts_with(mark), "{body}: {line:?}\n{tailed}");
    }
    // `cat` runs for more than 10 us under QEMU: a mark is seen.
    assert!(marked.iter().any(|b| !b.starts_with(' ')), "{tailed}");
    assert_eq!(m.run("echo 0 > options/funcgraph-overhead"), "");
    let plain = bodies(&m.run("cat per_cpu/cpu0/trace"));
    let unmarked: Vec<String> = marked.iter().map(|b| format!(" {}", &b[1..])).collect();
    assert_eq!(plain, unmarked, "{tailed}");
    // funcgraph-tail off: a `}` names its function only where its entry is not in
    // the buffer (`echo`'s), as ftrace's does.
    assert_eq!(m.run("echo nofuncgraph-tail > trace_options"), "");
    let untailed = bodies(&m.run("cat per_cpu/cpu0/trace"));
    let closed = |b: &String| match b.split_once("|  ") {
        Some((head, call)) if call.trim_start().starts_with("} /* ") => {
            let indent = call.len() - call.trim_start().len();
            format!("{head}|  {:indent$}}}", "")
        }
        _ => b.clone(),
    };
    let expected: Vec<String> = unmarked
        .iter()
        .enumerate()
        .map(|(i, b)| if i == 0 { b.clone() } else { closed(b) })
        .collect();
    assert_eq!(untailed, expected, "{tailed}");
    assert!(untailed[0].ends_with(&format!("}} /* {echo} */")), "{tailed}");
}

/// The `irqsoff` tracer: `latency spike` keeps interrupts off on purpose; the longest
/// region is reported in the owner instance's snapshot, with where interrupts went
/// off and on, and its `tracing_max_latency` shows it (started again, with overwrite
/// mode kept while the tracer is selected); `tracing_thresh` reports every
/// region at least that long; one instance at a time; bad writes are refused and
/// change nothing. On the crash day the panic dump carries the window and `report
/// --elf` names the places.
#[test]
fn irqsoff_keeps_the_longest_irqs_off_region_in_the_snapshot() {
    let mut m = Machine::boot();
    let tracers = m.run("cat available_tracers");
    assert_eq!(tracers, "function_graph irqsoff function nop\n");
    m.run("mkdir instances/lat");
    // Each instance has its `tracing_max_latency`; selecting the tracer starts it
    // again and puts the buffer in overwrite mode, as ftrace does.
    assert_eq!(m.run("echo 0 > instances/lat/options/overwrite"), "");
    assert_eq!(m.run("echo 100000000 > instances/lat/tracing_max_latency"), "");
    assert_eq!(m.run("echo 7 > tracing_max_latency"), "");
    assert_eq!(m.run("echo irqsoff > instances/lat/current_tracer"), "");
    // From 0, the shell's own regions have been reported since.
    let started: u64 = m.run("cat instances/lat/tracing_max_latency").trim().parse().unwrap();
    assert!(started < 100_000_000, "{started}");
    assert_eq!(m.run("cat instances/lat/options/overwrite"), "1\n");
    // As ftrace's latency tracers do, it turns `latency-format` on.
    assert_eq!(m.run("cat instances/lat/options/latency-format"), "1\n");
    for discard in [
        "echo 0 > instances/lat/options/overwrite",
        "echo nooverwrite > instances/lat/trace_options",
    ] {
        let out = m.run(discard);
        assert!(out.contains("the irqsoff tracer needs overwrite mode"), "{discard}: {out}");
    }
    assert_eq!(m.run("cat instances/lat/options/overwrite"), "1\n", "refused: as it was");
    // Every traceable function's entry is a call, to record those called inside.
    assert!(m.run("functions").contains("tracers: lat=irqsoff"));
    assert_eq!(m.run("cat instances/lat/current_tracer"), "irqsoff\n");
    // Allocated with the tracer: its help, or, once a window is in it, its header.
    let allocated = |s: &str| s.starts_with("# tracer: irqsoff\n#\n") && !s.contains("freed");
    let snapshot = m.run("cat instances/lat/snapshot");
    assert!(allocated(&snapshot), "with the tracer:\n{snapshot}");
    // As in ftrace, the snapshot is the tracer's: not freed, taken or cleared.
    for write in ["0", "1", "2"] {
        let out = m.run(&format!("echo {write} > instances/lat/snapshot"));
        assert!(out.contains("the irqsoff tracer keeps its window in the snapshot"), "{out}");
    }
    assert!(allocated(&m.run("cat instances/lat/snapshot")));
    let busy = m.run("echo irqsoff > current_tracer");
    assert!(busy.contains("another instance's tracer is irqsoff (one at a time)"), "{busy}");
    assert_eq!(m.run("cat current_tracer"), "nop\n");
    assert!(m.run("ls instances/lat").split_whitespace().any(|f| f == "tracing_max_latency"));

    // A high bar first: bad writes leave it as it is.
    let max_latency = "instances/lat/tracing_max_latency";
    assert_eq!(m.run(&format!("echo 100000000 > {max_latency}")), "");
    for bad in ["x", "-1", "1.5", "99999999999999999999"] {
        let out = m.run(&format!("echo '{bad}' > {max_latency}"));
        assert!(out.contains("Invalid argument ("), "{bad}: {out}");
    }
    assert_eq!(m.run(&format!("cat {max_latency}")), "100000000\n");
    assert!(
        m.run("echo 1 > instances/lat/events/ftrace/irqsoff/enable").contains("current_tracer")
    );

    // The spike: interrupts off on CPU 0 for 30 ms, the longest region by far.
    // A `stacktrace` trigger on the reports: the chain where interrupts went on,
    // from the function that enabled them (the tracer's hooks left out).
    let stacktrace = "instances/lat/events/ftrace/irqsoff/trigger";
    assert_eq!(m.run(&format!("echo stacktrace > {stacktrace}")), "");
    m.run(&format!("echo 0 > {max_latency}"));
    m.run("latency spike 30");
    // Recording off keeps the window: as ftrace's tracer stops with `tracing_on`, no
    // region is reported meanwhile, so a longer one (a host stall that keeps the
    // console's interrupts off while the snapshot prints) cannot replace it.
    m.run("echo 0 > instances/lat/tracing_on");
    m.run(&format!("echo '!stacktrace' > {stacktrace}"));
    let max: u64 = m.run(&format!("cat {max_latency}")).trim().parse().unwrap();
    m.run("latency spike 40");
    assert_eq!(m.run(&format!("cat {max_latency}")), format!("{max}\n"), "not while off");
    assert_eq!(m.run("cat tracing_max_latency"), "7\n", "the top level's is its own");
    assert!((30_000..1_000_000).contains(&max), "{max}");
    // Headed as Linux's latency trace is; the lines timed from the region's start,
    // so the report's time is its latency.
    let latency = m.run("cat instances/lat/snapshot");
    let start = "# tracer: irqsoff\n#\n# irqsoff latency trace v1.1.5 on ";
    assert!(latency.starts_with(start), "{latency}");
    for head in [
        format!("\n# latency: {max} us, #"),
        ", CPU#0 | (M:server VP:0, KP:0, SP:0 HP:0 #P:4)\n".to_string(),
        "\n#    | task: shell-1 (uid:0 nice:0 policy:0 rt_prio:0)\n".to_string(),
        "\n#  => started at: kernel::watchdog::spike+0x".to_string(),
        "\n#  => ended at:   kernel::watchdog::spike+0x".to_string(),
    ] {
        assert!(latency.contains(&head), "{head}:\n{latency}");
    }
    let report = latency.lines().rfind(|l| l.contains(": irqsoff: ")).unwrap_or_default();
    let columns = "   shell-1         0d.... ";
    let us = report.strip_prefix(columns).and_then(|r| r.trim_start().split("us").next());
    let us: Option<u64> = us.and_then(|us| us.parse().ok());
    assert!(us.is_some_and(|us| us.abs_diff(max) <= 1), "{max}: {report}\n{latency}");
    assert_eq!(m.run("echo 0 > instances/lat/options/latency-format"), "");
    let snapshot = m.run("cat instances/lat/snapshot");
    let reports: Vec<&str> = snapshot.lines().filter(|l| l.contains(": irqsoff: ")).collect();
    let last = reports.last().unwrap_or_else(|| panic!("no report in\n{snapshot}"));
    assert_eq!(irqsoff_ns(last) / 1000, max, "{last}");
    assert!(last.contains("shell-1 ") && last.contains("[000] d...."), "{last}");
    let spike = "start=kernel::watchdog::spike+0x";
    assert!(last.contains(spike) && last.contains(" end=kernel::watchdog::spike+0x"), "{last}");
    // CPU 0's next record is the report's stack trace.
    let cpu0 = cpu_lines(&snapshot, 0);
    let at = cpu0.iter().rposition(|l| l == last).unwrap_or_default();
    let after = cpu0.get(at + 1..at + 4).unwrap_or_default();
    assert!(after.len() == 3 && after[0].contains(": kernel_stack: depth="), "{snapshot}");
    assert!(after[1].starts_with(" => kernel::watchdog::spike+0x"), "{snapshot}");
    assert!(after[2].starts_with(" => kernel::shell::commands::latency+0x"), "{snapshot}");
    // Headed as Linux's latency trace is, shortened, after the tracer's name.
    let head = format!(
        "# tracer: irqsoff\n#\n# irqsoff latency: {max} us, CPU#0\n\
         #  => started at: kernel::watchdog::spike+0x"
    );
    assert!(snapshot.starts_with(&head), "{snapshot}");
    assert!(snapshot.contains("\n#  => ended at:   kernel::watchdog::spike+0x"), "{snapshot}");
    // The live buffer went on after the swap: the report is not there.
    assert!(!m.run("cat instances/lat/trace").contains(spike));

    // `tracing_thresh`: a region at least that long is reported, however high the
    // maximum. (The spike's length is the guest's time: a host that stalls the vCPU
    // can stretch a 15 ms spike past the 30 ms one, so the bar is set far above both.)
    m.run("echo 10000 > tracing_thresh");
    assert_eq!(m.run(&format!("echo 100000000 > {max_latency}")), "");
    m.run("echo 1 > instances/lat/tracing_on");
    m.run("latency spike 15");
    m.run("echo 0 > instances/lat/tracing_on");
    // At least the threshold (the spike's report, or a later region of 10 ms or
    // more before recording went off), far below the bar.
    let thresh: u64 = m.run(&format!("cat {max_latency}")).trim().parse().unwrap();
    assert!((10_000..1_000_000).contains(&thresh), "{thresh} (max {max})");
    m.run("echo 0 > tracing_thresh");
    m.run("echo 1 > instances/lat/tracing_on");

    // Interrupt handlers run with interrupts off: with `tracing_thresh` at 1 µs every
    // region is reported, among them the serial interrupt's, which each key typed
    // raises. A `hist` trigger on the reports profiles where interrupts are held off.
    let trigger = "instances/lat/events/ftrace/irqsoff/trigger";
    let hist = "hist:keys=start.sym-offset:vals=latency_ns:sort=latency_ns.descending";
    assert_eq!(m.run(&format!("echo '{hist}' > {trigger}")), "");
    m.run("echo 1 > tracing_thresh");
    m.run("latency spike 5");
    // Every CPU's handlers report at once (the timer, IPIs) while every CPU writes
    // at full speed: the reports serialise and the rings' accounting holds.
    let stress = m.run("stress both 200");
    assert!(stress.contains("stress overwrite: PASS"), "{stress}");
    assert!(stress.contains("stress discard: PASS"), "{stress}");
    m.run("cpus");
    m.run("echo 0 > tracing_thresh");
    // Nothing more is reported while the buffers are read. Each report swaps them,
    // so a record may be in either: both are read.
    m.run(&format!("echo 100000000 > {max_latency}"));
    let windows = m.run("cat instances/lat/snapshot") + &m.run("cat instances/lat/trace");
    let profile = m.run("cat instances/lat/events/ftrace/irqsoff/hist");
    m.run(&format!("echo '!{hist}' > {trigger}"));
    // A counted `snapshot` trigger cannot take the tracer's snapshot: each time it
    // fires it says so in the live buffer, in ftrace's words, and spends its count,
    // so `snapshot:1` says it once, not at every event after. (No region is
    // reported meanwhile, under the bar: no swap moves the lines.)
    let print = "instances/lat/events/ftrace/print/trigger";
    assert_eq!(m.run(&format!("echo 'snapshot:1' > {print}")), "");
    for _ in 0..3 {
        m.run("echo x > instances/lat/trace_marker");
    }
    assert_eq!(m.run(&format!("cat {print}")), "snapshot:count=0\n");
    let live = m.run("cat instances/lat/trace");
    assert_eq!(live.matches("*** LATENCY TRACER ACTIVE ***").count(), 1, "{live}");
    assert_eq!(live.matches("*** Can not use snapshot (sorry) ***").count(), 1, "{live}");
    m.run(&format!("echo '!snapshot:1' > {print}"));
    let rows: Vec<&str> = profile.lines().filter(|l| l.starts_with("{ start: ")).collect();
    let spike_row = rows.iter().find(|r| r.contains("] kernel::watchdog::spike+0x"));
    let spike_ns = spike_row.and_then(|r| r.split("latency_ns:").nth(1)?.trim().parse().ok());
    assert!(spike_ns.is_some_and(|ns: u64| ns >= 5_000_000), "{profile}");
    assert!(rows.iter().any(|r| r.contains("] kernel::arch::idt::serial+0x")), "{profile}");
    let serial = |l: &str| l.contains("<irq>-0 ") && l.contains("start=kernel::arch::idt::serial+");
    assert!(windows.lines().any(serial), "{windows}");
    let others = |l: &str| l.contains(" irqsoff: ") && !l.contains("[000]");
    assert!(windows.lines().any(others), "reports from the other CPUs:\n{windows}");
    // With the functions called inside the regions (those the function tracer may
    // trace): the serial handler's.
    let call = "kernel::serial::on_receive_interrupt <-kernel::arch::idt::serial";
    assert!(windows.lines().any(|l| l.contains("<irq>-0 ") && l.contains(call)), "{windows}");

    // Off: nothing more is reported, the buffer discards again as before the
    // tracer; another instance may take the tracer.
    assert_eq!(m.run("echo nop > instances/lat/current_tracer"), "");
    let freed = m.run("cat instances/lat/snapshot");
    assert!(freed.contains("# * Snapshot is freed *"), "as ftrace frees irqsoff's:\n{freed}");
    assert_eq!(m.run("cat instances/lat/options/overwrite"), "0\n");
    assert_eq!(m.run("cat instances/lat/options/latency-format"), "0\n", "as found");
    assert_eq!(m.run("echo 1 > instances/lat/options/overwrite"), "");
    m.run(&format!("echo 0 > {max_latency}"));
    m.run("latency spike 5");
    assert_eq!(m.run(&format!("cat {max_latency}")), "0\n", "nop times nothing");
    assert_eq!(m.run("echo irqsoff > current_tracer"), "");
    assert_eq!(m.run("echo nop > current_tracer"), "");

    // The crash day: the window survives a panic in the dump, which the host names.
    assert_eq!(m.run("echo irqsoff > instances/lat/current_tracer"), "");
    m.run("latency spike 30");
    m.run("echo 0 > instances/lat/tracing_on");
    assert_eq!(m.run_to_exit("panic"), boot::qemu::Outcome::KernelFailure);
    let dumps = m.dumps();
    let dump = dumps.last().expect("the panic dump");
    assert!(dump.problems.is_empty(), "{:?}", dump.problems);
    let mut snapshot = dump
        .sections()
        .into_iter()
        .find(|t| t.instance == "lat" && t.buffer == trace::dump::BufferKind::Snapshot)
        .expect("the panic dump carries the irqsoff window");
    let symbols = boot::report::Symbols::read(std::path::Path::new(boot::KERNEL_ELF)).unwrap();
    symbols.symbolize(&mut snapshot);
    let mut text = Vec::new();
    boot::report::write_text(&snapshot, &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    let last = text.lines().rfind(|l| l.contains(": irqsoff: ")).unwrap_or("");
    assert!(last.contains(spike) && irqsoff_ns(last) >= 30_000_000, "{text}");
    // In Perfetto the region is a slice of its own, `irqs off` on CPU 0's track for
    // it, named where interrupts went off.
    let doc = boot::report::perfetto_json(&snapshot);
    let events = doc["traceEvents"].as_array().unwrap();
    let region = events.iter().rfind(|e| e["name"] == "irqs off" && e["ph"] == "X");
    let region = region.unwrap_or_else(|| panic!("no irqs-off slice: {doc}"));
    assert!(region["dur"].as_f64().is_some_and(|us| us >= 30_000.0), "{region}");
    let start = region["args"]["start"].as_str().unwrap_or("");
    assert!(start.starts_with("kernel::watchdog::spike+0x"), "{region}");
    let tid = region["tid"].as_u64().unwrap();
    let track =
        events.iter().find(|e| e["name"] == "thread_name" && e["tid"].as_u64() == Some(tid));
    assert_eq!(track.map(|t| t["args"]["name"].as_str()), Some(Some("cpu0 irqs off")));
}
