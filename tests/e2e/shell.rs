//! The console shell: boot, commands, line editing, robustness, exceptions, exit.

use boot::qemu::{Config, Outcome};
use boot::report;
use e2e::{Machine, STEP_TIMEOUT, call_trace, trace_lines};

#[test]
fn boots_to_the_prompt_and_reports_the_machine() {
    // `boot_with` boots each time (`boot` restores a saved machine).
    let mut machine = Machine::boot_with(Config::default());
    let transcript = machine.transcript();
    assert!(transcript.contains("flight recorder kernel ("), "no banner");
    assert!(transcript.contains("4 of 4 CPU(s) online"), "no CPU count in the banner");
    // Tracing ran from early boot with the default events: the quiet systems' were
    // never on, not even while the others were turned on.
    for root in ["", "instances/boot_map/"] {
        let trace = machine.run(&format!("cat {root}trace"));
        assert!(trace.contains(" tick: tick="), "{root}: {trace}");
        for quiet in [" kmalloc: ", " kfree: ", " event: a=", " event: apic_id=", " cycled: "] {
            assert!(!trace.contains(quiet), "{root}: {quiet} at boot");
        }
    }
}

/// A machine with more physical memory than 32 GiB: the kernel's physical-memory
/// window maps all of it, and the heap takes the largest range, above 4 GiB. The
/// guest's memory lives in a sparse file (the host need not have it).
#[test]
fn a_40_gib_machine_boots_with_its_memory_in_the_heap() {
    /// Removes the memory file however the test ends.
    struct Removed(String);
    impl Drop for Removed {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let file = std::env::temp_dir().join(format!("e2e-40gib-{}", std::process::id()));
    let file = Removed(file.to_str().expect("a UTF-8 temporary directory").to_string());
    let config =
        Config { memory_mib: 40 << 10, memory_file: Some(file.0.clone()), ..Config::default() };
    let mut machine = Machine::boot_with(config);
    let transcript = machine.transcript();
    let heap = transcript
        .split_once("heap ")
        .and_then(|(_, rest)| rest.split_once(" MiB"))
        .and_then(|(mib, _)| mib.parse::<u64>().ok())
        .expect("the banner gives the heap's size");
    assert!(heap > 36 << 10, "heap of {heap} MiB on a 40 GiB machine");
    let uptime = machine.run("uptime");
    let size = uptime
        .split_once(" of ")
        .and_then(|(_, rest)| rest.split_once(" bytes"))
        .and_then(|(bytes, _)| bytes.parse::<u64>().ok())
        .expect("uptime gives the heap's size");
    assert_eq!(size >> 20, heap, "{uptime}");
}

#[test]
fn help_lists_every_command() {
    let mut machine = Machine::boot();
    let help = machine.run("help");
    for command in ["help", "uptime", "fault", "poweroff"] {
        assert!(
            help.lines().any(|l| l.trim_start().starts_with(command)),
            "help does not list {command}:\n{help}"
        );
    }
}

#[test]
fn unknown_command_is_an_error_and_the_shell_goes_on() {
    let mut machine = Machine::boot();
    let reply = machine.run("frobnicate now");
    assert_eq!(reply.trim(), "frobnicate: command not found (type 'help' for the list)");
    assert!(machine.run("help").contains("poweroff"));
    let usage = machine.run("poweroff now");
    assert!(usage.contains("usage: poweroff"), "extra arguments are refused: {usage}");
}

/// Arguments a command does not take are refused with its usage or the rule, and
/// the shell goes on where it was.
#[test]
fn bad_arguments_get_the_usage_or_the_rule() {
    const FAULT_USAGE: &str = "fault: usage: fault page [ADDR] | gp | ud | de | bp | stack [CPU]";
    let mut machine = Machine::boot();
    machine.run("cd events");
    for (line, said) in [
        ("help x", "help: usage: help (no arguments)"),
        ("pwd x", "pwd: usage: pwd (no arguments)"),
        ("uptime x", "uptime: usage: uptime (no arguments)"),
        ("cpus x", "cpus: usage: cpus (no arguments)"),
        ("reboot x", "reboot: usage: reboot (no arguments)"),
        ("cd a b", "cd: usage: cd [PATH]"),
        ("mkdir", "mkdir: usage: mkdir instances/NAME..."),
        ("rmdir", "rmdir: usage: rmdir instances/NAME..."),
        ("functions a b", "functions: usage: functions [GLOB]"),
        ("keys timer", "keys: usage: keys [SYSTEM:EVENT]"),
        ("panic_reboot 2", "panic_reboot: usage: panic_reboot [0 | 1]"),
        ("scribble x", "scribble: usage: scribble CPU"),
        ("scribble 9", "scribble: no such CPU: the CPUs are 0 to 3"),
        ("fault zz", FAULT_USAGE),
        ("fault page zz", FAULT_USAGE),
        ("fault page 0x8000000000000000", "fault: address is not canonical"),
        ("fault stack 9", "fault: no such CPU: the CPUs are 0 to 3"),
        ("ls | wc", "wc: usage: wc -l"),
        ("echo x > a > b", "syntax error: more than one redirection"),
    ] {
        assert_eq!(machine.run(line).trim_end(), said, "{line}");
    }
    assert_eq!(machine.run("pwd"), "/events\n");
    assert_eq!(machine.run("panic_reboot"), "0\n");
    // `cd` alone goes back to the top.
    assert_eq!(machine.run("cd"), "");
    assert_eq!(machine.run("pwd"), "/\n");
}

#[test]
fn double_quotes_escape_dollars_as_a_posix_shell() {
    // As Linux's scripts write a histogram's variable in double quotes: `\$` is `$`.
    let mut machine = Machine::boot();
    let trigger = "events/irq/irq_handler_entry/trigger";
    let line = r#""hist:keys=irq:ts0=common_timestamp:d=common_timestamp-\$ts0""#;
    assert_eq!(machine.run(&format!("echo {line} > {trigger}")), "", "refused");
    let shown = machine.run(&format!("cat {trigger}"));
    assert!(shown.contains(":ts0=common_timestamp,d=common_timestamp-$ts0:"), "{shown}");
}

#[test]
fn path_arguments_expand_globs_as_a_posix_shell() {
    /// A reply's lines, without their line ends.
    fn lines(reply: &str) -> Vec<String> {
        reply.lines().map(|l| l.trim_end().to_string()).collect()
    }
    let mut machine = Machine::boot();
    let irq = "events/irq";
    assert_eq!(machine.run(&format!("echo 1 > {irq}/irq_handler_entry/enable")), "");
    assert_eq!(machine.run(&format!("echo 0 > {irq}/irq_handler_exit/enable")), "");
    // Each event's enable file in turn, in the order `ls` lists the events.
    let listed = lines(&machine.run(&format!("ls {irq}")));
    let events: Vec<&str> = listed.iter().filter_map(|l| l.strip_suffix('/')).collect();
    assert!(events.len() >= 3, "{listed:?}");
    let each: Vec<String> =
        events.iter().flat_map(|e| lines(&machine.run(&format!("cat {irq}/{e}/enable")))).collect();
    let globbed = lines(&machine.run(&format!("cat {irq}/*/enable")));
    assert_eq!(globbed, each);
    assert!(globbed.contains(&"1".into()) && globbed.contains(&"0".into()), "{globbed:?}");
    // The one directory matched is listed as `ls events/irq` lists it.
    assert_eq!(lines(&machine.run("ls events/ir*")), listed);
    assert_eq!(lines(&machine.run("ls events/i?[pqr]")), listed);
    // A pattern matching nothing is passed on as it is.
    let none = machine.run("cat events/nosuch*/enable");
    assert_eq!(none.trim(), "cat: events/nosuch*/enable: No such file or directory");
    // Quoted, a pattern is literal; the unquoted part of a word still expands.
    let quoted = machine.run(&format!("cat '{irq}/*/enable'"));
    assert_eq!(quoted.trim(), format!("cat: {irq}/*/enable: No such file or directory"));
    assert_eq!(lines(&machine.run("ls \"events/ir\"*")), listed);
    // A redirection to two files is refused, and writes neither.
    let refused = machine.run(&format!("echo 0 > {irq}/irq_handler_*/enable"));
    assert_eq!(
        refused.trim(),
        format!(
            "echo: {irq}/irq_handler_*/enable: ambiguous redirect \
             (a glob in a redirection must match one file; it matches 2)"
        )
    );
    assert_eq!(lines(&machine.run(&format!("cat {irq}/irq_handler_*/enable"))), ["1", "0"]);
    // A redirection to the one file a glob matches writes it.
    assert_eq!(machine.run(&format!("echo 0 > {irq}/irq_handler_en*/enable")), "");
    assert_eq!(lines(&machine.run(&format!("cat {irq}/irq_handler_*/enable"))), ["0", "0"]);
}

#[test]
fn timer_interrupts_flow() {
    let mut machine = Machine::boot();
    let ticks = |out: &str| -> u64 {
        let line =
            out.lines().find(|l| l.starts_with("timer ticks:")).expect("uptime prints the ticks");
        line.split_whitespace().nth(2).and_then(|n| n.parse().ok()).expect("a tick count")
    };
    let first = ticks(&machine.run("uptime"));
    // Each command takes a while under TCG; the tick count must move within a bounded
    // number of them.
    let advanced = (0..200).any(|_| ticks(&machine.run("uptime")) > first);
    assert!(advanced, "the timer tick count never advanced past {first}");
}

#[test]
fn line_editing_backspace_ctrl_u_and_ctrl_c() {
    let mut machine = Machine::boot();
    // Backspace (DEL) and BS remove the character before the cursor.
    machine.send(b"helx\x7fp\r");
    let out = machine.wait_for_prompt(STEP_TIMEOUT);
    assert!(out.contains("poweroff"), "'helx<DEL>p' did not run help:\n{out}");
    machine.send(b"hexx\x08\x08lp\r");
    let out = machine.wait_for_prompt(STEP_TIMEOUT);
    assert!(out.contains("poweroff"), "'hexx<BS><BS>lp' did not run help:\n{out}");
    // Ctrl-U clears the line.
    machine.send(b"frobnicate\x15help\r");
    let out = machine.wait_for_prompt(STEP_TIMEOUT);
    assert!(out.contains("poweroff") && !out.contains("not found"), "Ctrl-U did not clear:\n{out}");
    // Ctrl-C abandons the line: the poweroff typed before it never runs.
    machine.send(b"poweroff\x03");
    let out = machine.wait_for_prompt(STEP_TIMEOUT);
    assert!(out.contains("^C"), "Ctrl-C is not echoed:\n{out}");
    assert!(machine.run("uptime").contains("timer ticks"), "the shell died after Ctrl-C");
    // Other escape sequences (Insert, Delete) are consumed without garbling the line.
    machine.send(b"up\x1b[2~ti\x1b[3~me\r");
    let out = machine.wait_for_prompt(STEP_TIMEOUT);
    assert!(out.contains("timer ticks"), "escape sequences garbled the line:\n{out}");
}

#[test]
fn history_recalls_lines_and_tab_completes_commands_and_paths() {
    let mut machine = Machine::boot();
    machine.run("cpus");
    machine.run("uptime");
    // Up twice: "cpus"; down once: "uptime".
    machine.send(b"\x1b[A\x1b[A\x1b[B\r");
    let out = machine.wait_for_prompt(STEP_TIMEOUT);
    assert!(out.contains("timer ticks") && !out.contains("APIC id"), "history:\n{out}");
    machine.send(b"\x1b[A\x1b[A\x1b[A\r");
    let out = machine.wait_for_prompt(STEP_TIMEOUT);
    assert!(out.contains("APIC id"), "history:\n{out}");
    // Tab completes a command, a file, and a directory path.
    machine.send(b"upt\t\r");
    assert!(machine.wait_for_prompt(STEP_TIMEOUT).contains("timer ticks"));
    machine.send(b"cat available_ev\t\r");
    assert!(machine.wait_for_prompt(STEP_TIMEOUT).contains("timer:tick"));
    machine.send(b"cat events/tim\tti\tid\t\r");
    let out = machine.wait_for_prompt(STEP_TIMEOUT);
    assert!(
        out.lines().last().is_some_and(|l| l.trim().parse::<u16>().is_ok()),
        "events/timer/tick/id:\n{out}"
    );
    // A second Tab lists the candidates when they share no more, then the line
    // again; a Tab before the line's end rings the bell.
    machine.send(b"cat trace_p\t\t");
    machine.wait_for("trace_pipe  trace_pipe_raw  \r\ntracefs:/# cat trace_pipe", STEP_TIMEOUT);
    machine.send(b"\x1b[D\t");
    machine.wait_for("\x07", STEP_TIMEOUT);
    machine.send(b"\x15uptime\r");
    assert!(machine.wait_for_prompt(STEP_TIMEOUT).contains("timer ticks"));
}

#[test]
fn over_long_line_is_refused() {
    let mut machine = Machine::boot();
    let long = "x".repeat(5000);
    let out = machine.run(&long[..4096]);
    assert!(out.contains("command not found"), "a 4096-byte line is refused: {out}");
    machine.send(&long.as_bytes()[..4097]);
    machine.send(b"\r");
    let out = machine.wait_for_prompt(STEP_TIMEOUT);
    assert!(out.contains("error: line too long (at most 4096 characters)"), "{out}");
    assert!(machine.run("help").contains("poweroff"));
}

/// A command line longer than an event holds is recorded cut to the record's room
/// (`shell:command` has one string: 256 bytes less its 2-byte length), in `trace`
/// and in the dump; the next line is recorded whole, and a filter judges the line
/// as the record holds it.
#[test]
fn a_string_longer_than_an_event_holds_is_recorded_cut_to_its_room() {
    let mut m = Machine::boot();
    m.run("mkdir instances/long");
    m.run("echo 1 > instances/long/events/shell/command/enable");
    let long = format!("echo {}", "0123456789".repeat(40));
    m.run(&long);
    m.run("echo short");
    let lines = trace_lines(&m.run("cat instances/long/trace"));
    let recorded: Vec<&str> =
        lines.iter().filter(|l| l.event == "command").map(|l| l.fields.as_str()).collect();
    assert_eq!(recorded[..2], [&long[..254], "echo short"], "{recorded:?}");
    // A filter sees the cut line: its end is what the record holds.
    m.run("echo > instances/long/trace");
    let tail = &long[244..254];
    let filter = format!("echo 'line ~ \"*{tail}\"' > instances/long/events/shell/command/filter");
    m.run(&filter);
    m.run(&long);
    m.run("echo short");
    let lines = trace_lines(&m.run("cat instances/long/trace"));
    let recorded: Vec<&str> =
        lines.iter().filter(|l| l.event == "command").map(|l| l.fields.as_str()).collect();
    // The line that set the filter was recorded before it took effect.
    assert_eq!(recorded, [filter.as_str(), &long[..254]]);
    m.run("dump instance long");
    let dump = m.dumps().pop().expect("the dump");
    let section = dump.sections().into_iter().find(|s| s.instance == "long").unwrap();
    let texts: Vec<String> = section.events.iter().map(|e| section.texts().text(e)).collect();
    assert!(texts.iter().any(|t| t == &long[..254]), "{texts:?}");
}

#[test]
fn the_longest_filter_is_written_from_the_shell() {
    let mut machine = Machine::boot();
    // 25 predicates, about 1000 bytes: near the filter's own limit of 1024.
    let filter = vec!["interval_ns != 1000000000000000000"; 25].join(" && ");
    assert!(filter.len() > 900 && filter.len() <= 1024, "{}", filter.len());
    let out = machine.run(&format!("echo '{filter}' > events/timer/tick/filter"));
    assert!(!out.contains("error"), "{out}");
    let out = machine.run("cat events/timer/tick/filter");
    assert!(out.contains(&filter), "{out}");
    // Three predicates more make it too long: the filter's error, not the line's.
    let over = vec!["interval_ns != 1000000000000000000"; 28].join(" && ");
    let out = machine.run(&format!("echo '{over}' > events/timer/tick/filter"));
    assert!(out.contains("filter too long"), "{out}");
    assert!(machine.run("cat events/timer/tick/filter").contains(&filter));
}

#[test]
fn random_bytes_neither_crash_nor_hang_the_shell() {
    let mut machine = Machine::boot();
    // 10 KiB from a fixed-seed xorshift generator, every byte value possible.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let garbage: Vec<u8> = (0..10 * 1024)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 32) as u8
        })
        .collect();
    machine.send(&garbage);
    // Ctrl-C discards whatever partial line the garbage left.
    machine.send(b"\x03");
    let out = machine.run("uptime");
    assert!(out.contains("timer ticks"), "the shell does not answer after random input:\n{out}");
    assert_eq!(machine.run_to_exit("poweroff"), Outcome::Success);
}

#[test]
fn breakpoint_is_reported_and_execution_continues() {
    let mut machine = Machine::boot();
    let out = machine.run("fault bp");
    assert!(out.contains("EXCEPTION: BREAKPOINT (vector 3)"), "{out}");
    assert!(out.contains("back from the breakpoint handler"), "{out}");
}

#[test]
fn page_fault_is_reported_with_vector_and_address() {
    let mut machine = Machine::boot();
    let outcome = machine.run_to_exit("fault page");
    let transcript = machine.transcript();
    assert_eq!(outcome, Outcome::KernelFailure, "a kernel page fault is fatal");
    let report = transcript
        .lines()
        .find(|l| l.contains("EXCEPTION: PAGE FAULT"))
        .expect("a page-fault report");
    assert!(report.contains("(vector 14)"), "{report}");
    assert!(report.contains("cr2=0xdeadbeef000"), "{report}");
    assert!(report.contains("rip=0x"), "{report}");
    assert!(report.contains("error_code=0x"), "{report}");
    // Where it struck, named: the shell's probe of an unmapped address; and the call
    // trace goes on through the handler (past its error code) into the code that
    // faulted and its callers.
    let rip = transcript.lines().find_map(|l| l.strip_prefix("RIP: ")).expect("a RIP line");
    assert!(rip.starts_with("kernel::memory::read_unmapped") && rip.contains("+0x"), "{rip}");
    let frames = call_trace(&transcript);
    let at = |name: &str| frames.iter().position(|f| f.starts_with(name));
    let handler = at("kernel::arch::idt::page_fault+").expect("the handler");
    assert_eq!(frames.get(handler + 1), Some(&rip), "{frames:#?}");
    assert!(at("kernel::shell::run+").is_some_and(|shell| shell > handler), "{frames:#?}");
    // The crash dump's `exceptions:page_fault` event holds the place as an address
    // in the kernel ELF (`{ip:sym}`), which `report --elf` names as the panic did.
    let dump = machine.dumps().pop().expect("the panic dump");
    let symbols = report::Symbols::read(std::path::Path::new(boot::KERNEL_ELF)).unwrap();
    symbols.check(dump.symbols).unwrap();
    let mut top = dump.sections().into_iter().find(|t| t.instance == "top").unwrap();
    symbols.symbolize(&mut top);
    let fault = top
        .events
        .iter()
        .rev()
        .find(|e| top.descriptor(e.id).is_some_and(|d| d.name == "page_fault"));
    let fault = top.texts().text(fault.expect("the page fault's event"));
    assert!(fault.starts_with("address=0xdeadbeef000 "), "{fault}");
    assert!(fault.ends_with(&format!(" ip={rip}")), "{fault} vs {rip}");
    // And the CPU recorded the chain from there, as the panic printed it.
    let stack = top
        .events
        .iter()
        .rev()
        .find(|e| e.cpu == 0 && top.descriptor(e.id).is_some_and(|d| d.name == "kernel_stack"));
    let stack = stack.expect("the faulting CPU's stack");
    let text = top.texts().text(stack);
    let recorded: Vec<&str> = text.lines().skip(1).map(|l| &l[4..]).collect();
    assert_eq!(recorded[..], frames[handler + 1..(handler + 9).min(frames.len())], "{stack:?}");
}

#[test]
fn other_exceptions_are_reported() {
    for (kind, name, function) in [
        ("ud", "INVALID OPCODE (vector 6)", "invalid_opcode"),
        ("gp", "GENERAL PROTECTION FAULT (vector 13)", "general_protection"),
        ("de", "DIVIDE ERROR (vector 0)", "divide_error"),
    ] {
        let mut machine = Machine::boot();
        assert_eq!(machine.run_to_exit(&format!("fault {kind}")), Outcome::KernelFailure);
        let transcript = machine.transcript();
        assert!(transcript.contains(&format!("EXCEPTION: {name}")), "fault {kind}");
        let rip = transcript.lines().find_map(|l| l.strip_prefix("RIP: ")).expect("a RIP line");
        let expected = format!("kernel::arch::fault::{function}+0x");
        assert!(rip.starts_with(&expected), "fault {kind}: {rip}");
        // With or without an error code, the trace goes from the handler to the
        // faulting code and on to the shell.
        let frames = call_trace(&transcript);
        let faulted = frames.iter().position(|f| *f == rip).expect("the faulting frame");
        assert!(frames[faulted - 1].starts_with("kernel::arch::idt::"), "{frames:#?}");
        let callers = &frames[faulted + 1..];
        assert!(callers.iter().any(|f| f.starts_with("kernel::shell::run+")), "{frames:#?}");
    }
}

#[test]
fn kernel_stack_overflow_is_a_double_fault_on_its_own_stack() {
    let mut machine = Machine::boot();
    assert_eq!(machine.run_to_exit("fault stack"), Outcome::KernelFailure);
    assert!(machine.transcript().contains("EXCEPTION: DOUBLE FAULT (vector 8)"));
}

#[test]
fn poweroff_exits_qemu_with_success() {
    let mut machine = Machine::boot();
    assert_eq!(machine.run_to_exit("poweroff"), Outcome::Success);
}

#[test]
fn bench_reports_every_figure_and_leaves_no_instance_behind() {
    // Virtual time (one nanosecond per guest instruction): the figures count
    // instructions, and repeat (TCG's own timing is too noisy to order them: an
    // image's enabled tracepoint has measured from 690 to 1,740 cycles minutes apart).
    let mut machine = Machine::boot_with(Config { icount: true, ..Config::default() });
    let report = machine.run("bench 1000");
    let cycles = |what: &str| -> f64 {
        let line = report
            .lines()
            .find(|l| l.trim_start().starts_with(what))
            .unwrap_or_else(|| panic!("no '{what}' line in:\n{report}"));
        let figure = line[line.find(what).unwrap() + what.len()..].split_whitespace().next();
        figure.and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("no cycles in {line:?}"))
    };
    let raw = cycles("ring write, raw (16-byte payload)");
    let enabled = cycles("tracepoint, enabled (2 x u64)");
    let two = cycles("tracepoint, enabled in two instances");
    let disabled = cycles("tracepoint, disabled");
    assert!(cycles("empty loop") > 0.0 && disabled > 0.0, "{report}");
    // Recording costs more than not recording, by far; an event more than the raw
    // write it makes, and a second instance more again.
    assert!(4.0 * disabled < raw && raw < enabled && enabled < two, "{report}");
    // A histogram's add costs more than the disabled site it sits behind.
    assert!(cycles("tracepoint, hist trigger only") > 4.0 * disabled, "{report}");
    // Five rounds of 1000 raw writes and five of 1000 events, all into the instance.
    assert!(report.contains("events recorded by the instance: 10000"), "{report}");
    assert!(report.contains("the second instance / raw ring write:"), "{report}");
    // The temporary instances are gone and the event is off again.
    let instances = machine.run("ls instances");
    assert!(!instances.contains("bench"), "bench left an instance:\n{instances}");
    let enable = machine.run("cat events/bench/event/enable");
    assert_eq!(enable.trim(), "0", "bench left its event enabled");
    assert_eq!(machine.run("bench 0"), "bench: iterations are 1 to 10000000\n");
    assert!(machine.run("bench x").contains("usage: bench"));
    // An instance of the user's with one of bench's names is neither taken nor removed.
    machine.run("mkdir instances/bench2");
    let refused = machine.run("bench 1000");
    assert!(refused.contains("an instance named bench or bench2 exists"), "{refused}");
    assert!(machine.run("ls instances").contains("bench2"), "bench removed a user's instance");
}

/// Numbers, good and bad, for the files that take one.
const NUMBERS: &[&str] = &["0", "1", "2", "-1", "4", "16", "f", "18446744073709551616", "''"];
/// Lines for `set_event`.
const EVENTS: &[&str] =
    &["'timer:*'", "'!timer:tick'", "'shell:command'", "'irq:*'", "'*'", "nope"];
/// Filters, good and bad.
const FILTERS: &[&str] = &[
    "'cpu == 1'",
    "'cpu == 1 && (cpu < 3 || !(cpu & 2))'",
    "'line ~ \"up*\"'",
    "'COMM == \"shell-1\"'",
    "'(cpu'",
    "'cpu == 99999999999999999999'",
    "0",
];
/// Trigger lines, good and bad. No `dump` or `cpudump`: each hit prints a dump.
const TRIGGERS: &[&str] = &[
    "'hist:keys=cpu'",
    "'hist:keys=cpu:pause'",
    "'hist:keys=cpu:clear'",
    "'!hist:keys=cpu'",
    "'hist:keys=common_stacktrace:vals=hitcount:size=128'",
    "'hist:keys=cpu:t0=common_timestamp'",
    "'hist:keys=cpu:vals=$lat:lat=common_timestamp-$t0'",
    "'hist:keys=cpu:vals=$lat:lat=common_timestamp.usecs-$t0'",
    "'!hist:keys=cpu:t0=common_timestamp'",
    "'hist:keys=cpu:x=cpu/0'",
    "'hist:keys=cpu:x=cpu*3-cpu/2+1'",
    "'hist:keys=cpu:x=-(cpu+1)'",
    "'hist:keys=cpu:vals=hitcount.graph:NOHC'",
    "'hist:keys=cpu:nohitcount'",
    "'hist:keys=cpu:x=1+2+3+4+5'",
    "'hist:keys=cpu:v=cpu:onchange($v).save(cpu):onmax($v).snapshot()'",
    "'traceoff:1'",
    "'!traceoff'",
    "'traceon'",
    "'snapshot if cpu == 2'",
    "'!snapshot'",
    "'stacktrace:2'",
    "'enable_event:irq:nmi'",
    "'disable_event:timer:tick:1'",
    "'enable_event:no:such'",
    "'traceon if'",
];
/// Lines for the function filter files (commands go to `set_ftrace_filter` only).
const FUNCTIONS: &[&str] = &[
    "'kernel::shell::*'",
    "'kernel::shell::*:traceoff:2'",
    "'kernel::shell::run:stacktrace'",
    "'!kernel::shell::run:stacktrace'",
    "'kernel::shell::run:snapshot:1'",
    "':mod:trace'",
    "'*:mod:nope'",
    "'!*'",
];
const TRACERS: &[&str] = &["nop", "function", "function_graph", "irqsoff", "wakeup"];
const OPTIONS: &[&str] = &[
    "nooverwrite",
    "overwrite",
    "stacktrace",
    "nostacktrace",
    "latency-format",
    "nocopy_trace_marker",
    "copy_trace_marker",
    "bogus",
];
/// `inject` lines, good and bad.
const INJECTS: &[&str] = &[
    "tick=1",
    "'interval_ns=0x10 tick=2'",
    "'line=\"a b\"'",
    "line=x",
    "tick=-1",
    "'tick=1 tick=2'",
    "nope=1",
    "'line=\"open'",
];
/// Anything: the values above, and a few that fit no file.
const ANY: &[&[&str]] = &[
    NUMBERS,
    EVENTS,
    FILTERS,
    TRIGGERS,
    FUNCTIONS,
    TRACERS,
    INJECTS,
    OPTIONS,
    &["global", "'\"'", "'a b'"],
];

/// Files of an instance the grammar below reads and writes (relative to the
/// instance's directory), each with the values it takes.
const INSTANCE_FILES: &[(&str, &[&str])] = &[
    ("buffer_size_kb", NUMBERS),
    ("buffer_total_size_kb", NUMBERS),
    ("current_tracer", TRACERS),
    ("error_log", NUMBERS),
    ("set_event", EVENTS),
    ("set_ftrace_filter", FUNCTIONS),
    ("set_ftrace_notrace", FUNCTIONS),
    ("set_graph_function", FUNCTIONS),
    ("show_event_filters", FILTERS),
    ("show_event_triggers", TRIGGERS),
    ("snapshot", NUMBERS),
    ("trace", NUMBERS),
    ("trace_clock", &["local", "global", "counter", "x86-tsc", "uptime"]),
    ("trace_marker", EVENTS),
    ("trace_marker_raw", NUMBERS),
    ("trace_options", OPTIONS),
    ("tracing_cpumask", NUMBERS),
    ("tracing_max_latency", NUMBERS),
    ("tracing_on", NUMBERS),
    ("events/enable", NUMBERS),
    ("events/timer/enable", NUMBERS),
    ("events/timer/filter", FILTERS),
    ("events/timer/tick/enable", NUMBERS),
    ("events/timer/tick/filter", FILTERS),
    ("events/timer/tick/trigger", TRIGGERS),
    ("events/timer/tick/hist", TRIGGERS),
    ("events/shell/command/trigger", TRIGGERS),
    ("events/shell/command/filter", FILTERS),
    ("events/irq/nmi/trigger", TRIGGERS),
    ("events/timer/tick/inject", INJECTS),
    ("events/shell/command/inject", INJECTS),
    ("events/nope/enable", NUMBERS),
    ("options/overwrite", NUMBERS),
    ("options/stacktrace", NUMBERS),
    ("options/latency-format", NUMBERS),
    ("per_cpu/cpu1/buffer_size_kb", NUMBERS),
    ("per_cpu/cpu1/snapshot", NUMBERS),
    ("per_cpu/cpu2/stats", NUMBERS),
    ("per_cpu/cpu7/trace", NUMBERS),
];

/// Files that only writes to them change (not triggers, nor time), by their path's end.
const STABLE: &[&str] = &[
    "buffer_size_kb",
    "current_tracer",
    "trace_clock",
    "trace_options",
    "tracing_cpumask",
    "/filter",
    "overwrite",
    "options/stacktrace",
    "max_graph_depth",
    "tracing_thresh",
    "stack_tracer_enabled",
    "function_profile_enabled",
];

/// Top-level files besides an instance's.
const TOP_FILES: &[(&str, &[&str])] = &[
    ("function_profile_enabled", NUMBERS),
    ("max_graph_depth", NUMBERS),
    ("stack_trace", NUMBERS),
    ("stack_trace_filter", FUNCTIONS),
    ("stack_tracer_enabled", NUMBERS),
    ("tracing_thresh", NUMBERS),
    ("trace_stat/function0", NUMBERS),
    ("enabled_functions", NUMBERS),
    ("available_filter_functions_addrs", FUNCTIONS),
    ("touched_functions", FUNCTIONS),
];

/// Tracefs reads and writes drawn from a grammar with a fixed seed (files of the top
/// level and of instances, existing or not; values for each, and values for other
/// files), with `mkdir`/`rmdir` of an instance, a ring stress on every CPU, a late
/// tick, NMI backtraces and live dumps between them: every command comes back to the
/// prompt, none panics the kernel, the stresses pass, a refused write to a file only
/// writes change leaves it as it was, the shell answers at the end, every dump
/// decodes whole, and so does a panic's, which every report backend then reads.
#[test]
fn tracefs_commands_from_a_grammar_neither_crash_nor_hang_the_kernel() {
    let mut m = Machine::boot();
    // `SHELL_FUZZ_SEED` and `SHELL_FUZZ_LINES` vary the run (for longer ones by hand).
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let mut state = env("SHELL_FUZZ_SEED").unwrap_or(0x2545_f491_4f6c_dd1d) | 1;
    let lines = env("SHELL_FUZZ_LINES").unwrap_or(3000);
    let mut pick = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 33) as usize % n
    };
    // Small rings, so that a `cat trace` of full ones stays short.
    assert_eq!(m.run("echo 16 > buffer_size_kb"), "");
    assert_eq!(m.run("mkdir instances/fz"), "");
    let mut taken = 0;
    for _ in 0..lines {
        let dir = ["", "instances/fz/", "instances/latency/"][pick(3)];
        let (file, values) = match pick(4) {
            0 if dir.is_empty() => TOP_FILES[pick(TOP_FILES.len())],
            _ => INSTANCE_FILES[pick(INSTANCE_FILES.len())],
        };
        let values = if pick(4) == 0 { ANY[pick(ANY.len())] } else { values };
        let value = values[pick(values.len())];
        let path = format!("{dir}{file}");
        let line = match pick(44) {
            0 => "mkdir instances/fz".to_string(),
            1 => "rmdir instances/fz".to_string(),
            40 => "stress both 30".to_string(),
            41 => "latency spike 20".to_string(),
            42 => "backtrace".to_string(),
            43 => "dump both last 4 instance fz instance latency".to_string(),
            2..14 => format!("cat {path} | tail -n 3"),
            14..18 => format!("echo {value} >> {path}"),
            _ => format!("echo {value} > {path}"),
        };
        // A file only writes change: read before and after a write it refuses.
        let stable = line.starts_with("echo") && STABLE.iter().any(|s| path.ends_with(s));
        let before = stable.then(|| m.run(&format!("cat {path}")));
        let out = m.run(&line);
        // A dump's chunk lines are base64, which may spell either word by chance.
        let said = |word| out.lines().any(|l| !l.starts_with("TD ") && l.contains(word));
        assert!(!said("panicked"), "{line}:\n{out}");
        assert!(!said("FAIL"), "{line}:\n{out}");
        if let Some(before) = before.filter(|_| !out.is_empty()) {
            assert!(out.starts_with("echo: "), "{line}: an error names the file: {out}");
            assert_eq!(m.run(&format!("cat {path}")), before, "{line} refused ({out}) changed it");
        }
        taken += usize::from(out.is_empty());
    }
    // Most lines are refused (values for other files, files of a removed instance);
    // enough are taken that the kernel's state keeps changing.
    assert!(taken * 10 > lines as usize, "{taken} lines taken");
    assert!(m.run("uptime").contains("timer ticks"), "the shell answers");
    m.run("dump");
    // The crash day, in whatever state the lines left: the panic's dump decodes, and
    // every backend of the report tool reads each of its sections (trace-cmd the
    // trace.dat of them all).
    assert_eq!(m.run_to_exit("panic"), Outcome::KernelFailure);
    let dumps = m.dumps();
    for dump in &dumps {
        assert!(dump.problems.is_empty(), "{:?}", dump.problems);
    }
    let [.., live, crash] = &dumps[..] else { panic!("{} dumps", dumps.len()) };
    assert!(live.panic.is_none() && crash.panic.is_some(), "the live dump, then the panic's");
    let sections = crash.sections();
    assert!(sections.iter().any(|s| s.instance == "top"), "the top level is dumped");
    let dir = std::env::temp_dir().join(format!("e2e-grammar-{}", std::process::id()));
    for section in &sections {
        report::write_text(section, &mut Vec::new()).unwrap();
        report::write_stat(section, &mut Vec::new()).unwrap();
        report::write_perfetto(section, &mut Vec::new()).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        report::write_ctf(section, &dir).unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
    e2e::trace_cmd_report(&sections, &[]);
}
