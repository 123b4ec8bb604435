//! The shell's output: pipes (`head`, `tail`, `grep`, `wc -l`), Ctrl-C stopping
//! long reads whatever the backlog, and the line editor's cursor, Ctrl-W and
//! refusal of non-ASCII input.

use e2e::{Machine, STEP_TIMEOUT, trace_lines};

#[test]
fn pipes_filter_the_output_and_head_stops_the_read() {
    let mut m = Machine::boot();
    let all = m.run("cat available_events");
    let lines: Vec<&str> = all.lines().collect();
    assert!(lines.len() > 12, "{all}");
    let joined = |lines: &[&str]| lines.iter().map(|l| format!("{l}\n")).collect::<String>();
    assert_eq!(m.run("cat available_events | wc -l"), format!("{}\n", lines.len()));
    assert_eq!(m.run("cat available_events | head -n 3"), joined(&lines[..3]));
    assert_eq!(m.run("cat available_events | head"), joined(&lines[..10]));
    assert_eq!(m.run("cat available_events | tail -n 2"), joined(&lines[lines.len() - 2..]));
    assert_eq!(m.run("cat available_events | tail"), joined(&lines[lines.len() - 10..]));
    let irq: Vec<&str> = lines.iter().copied().filter(|l| l.contains("irq")).collect();
    let not_irq: Vec<&str> = lines.iter().copied().filter(|l| !l.contains("irq")).collect();
    assert_eq!(m.run("cat available_events | grep irq"), joined(&irq));
    assert_eq!(m.run("cat available_events | grep -v irq"), joined(&not_irq));
    assert_eq!(m.run("cat available_events | grep irq | wc -l"), format!("{}\n", irq.len()));
    assert_eq!(m.run("cat available_events | grep -v irq | tail -n 1 | wc -l"), "1\n");
    assert_eq!(m.run("cat available_events | head -n 4 | tail -n 1"), joined(&lines[3..4]));
    // The short forms coreutils take.
    assert_eq!(m.run("cat available_events | head -4 | tail -1"), joined(&lines[3..4]));
    assert_eq!(m.run("cat available_events | head -n2"), joined(&lines[..2]));
    // `tail -n +N`: from line N on, as coreutils (a header skipped; `+0` as `+1`).
    assert_eq!(m.run("cat available_events | tail -n +3"), joined(&lines[2..]));
    assert_eq!(m.run("cat available_events | tail -n +1 | wc -l"), format!("{}\n", lines.len()));
    assert_eq!(m.run("cat available_events | tail -n +0 | head -n 1"), joined(&lines[..1]));
    let past = format!("cat available_events | tail -n +{}", lines.len() + 1);
    assert_eq!(m.run(&past), "");
    // Patterns: anchors, `.`, classes and `*` as in grep's basic expressions.
    let matching = |keep: &dyn Fn(&str) -> bool| {
        joined(&lines.iter().copied().filter(|l| keep(l)).collect::<Vec<_>>())
    };
    assert_eq!(m.run("cat available_events | grep ^irq:"), matching(&|l| l.starts_with("irq:")));
    assert_eq!(m.run("cat available_events | grep 'x.t$'"), matching(&|l| l.ends_with("xit")));
    assert_eq!(
        m.run("cat available_events | grep -v '^[a-k][a-z]*:'"),
        matching(&|l| !l.starts_with(|c: char| ('a'..='k').contains(&c)))
    );
    assert_eq!(m.run("cat available_events | grep '^irq:.*_e'"), joined(&irq[..2]));
    assert_eq!(m.run("cat available_events | grep 'irq\\.'"), "", "\\ makes . literal");
    assert_eq!(
        m.run("cat available_events | grep '^irq:nmi$\\|^timer'"),
        matching(&|l| l == "irq:nmi" || l.starts_with("timer"))
    );
    assert!(m.run("cat trace | grep 'a\\(b'").contains(
        "grep: 'a\\(b': at 1: \\ makes one of . * [ ] ^ $ \\ literal, or \\| separates alternatives"
    ));
    assert!(m.run("cat trace | grep '[a-'").contains("grep: '[a-': at 0: [ without its ]"));
    // The options the selftests use: `-c` counts, `-e` gives patterns (any matches).
    assert_eq!(m.run("cat available_events | grep -c irq"), format!("{}\n", irq.len()));
    assert_eq!(m.run("cat available_events | grep -vc irq"), format!("{}\n", not_irq.len()));
    assert_eq!(
        m.run("cat available_events | grep -e ^irq:nmi -e^timer"),
        matching(&|l| l == "irq:nmi" || l.starts_with("timer"))
    );
    assert_eq!(
        m.run("cat available_events | grep -v -e irq -e timer | grep -c -e irq -e timer"),
        "0\n"
    );
    assert_eq!(m.run("echo -x | grep -- -x"), "-x\n");
    // Other commands whose output is text pipe too.
    assert!(m.run("uptime | grep heap").starts_with("heap: "));
    assert_eq!(
        m.run("ls | grep -v /").lines().count(),
        m.run("ls | grep -v / | wc -l").trim().parse::<usize>().unwrap()
    );
    // head ends a trace read early: `cat trace | head` formats one line, where
    // `| wc -l` formats them all (the shell's own command_done events say how long each
    // took).
    assert_eq!(m.run("echo '*:*' > set_event"), "");
    for _ in 0..20 {
        m.run("uptime");
    }
    assert_eq!(m.run("cat trace | head -n 1"), "# tracer: nop\n");
    let total: usize = m.run("cat trace | wc -l").trim().parse().unwrap();
    assert!(total > 500, "{total} lines");
    let durations: Vec<u64> = trace_lines(&m.run("cat trace | grep command"))
        .iter()
        .filter_map(|l| {
            let ns = l.fields.strip_prefix("ok=true duration=")?.strip_suffix("ns")?;
            ns.parse().ok()
        })
        .collect();
    // The last two command_done records: head's read, then wc's.
    let [.., head, wc] = durations[..] else { panic!("no command_done records") };
    assert!(head * 4 < wc, "head took {head} ns, a full read {wc} ns");
    // A consuming read ends as soon as head has its lines, even when the last one
    // waited for the rings to run dry: no key is needed, and none is swallowed.
    assert_eq!(m.run("mkdir instances/p"), "");
    assert_eq!(m.run("echo only-record > instances/p/trace_marker"), "");
    let line = m.run("cat instances/p/trace_pipe | head -n 1");
    assert!(line.ends_with("only-record\n") && line.lines().count() == 1, "{line}");
    assert_eq!(m.run("echo next"), "next\n");
    assert_eq!(m.run("cat instances/p/trace | grep only-record"), "", "consumed");
    assert_eq!(m.run("rmdir instances/p"), "");
    // Errors name the rule.
    assert!(
        m.run("cat trace | sort")
            .contains("sort: not a pipe command (pipes take head, tail, grep, wc -l)")
    );
    assert!(m.run("cat trace | head -n x").contains("head: invalid number of lines: 'x'"));
    assert!(m.run("cat trace | tail -n").contains("tail: usage: tail [-n N | -N | -n +N]"));
    for bad in ["+x", "++5", "+"] {
        let out = m.run(&format!("cat trace | tail -n {bad}"));
        assert!(out.contains(&format!("tail: invalid number of lines: '{bad}'")), "{out}");
    }
    assert!(m.run("cat trace | head 3").contains("head: usage: head [-n N | -N]"));
    assert!(m.run("cat trace | tail -n 99999").contains("tail: at most 10000 lines"));
    assert!(m.run("cat trace |").contains("syntax error: empty command after '|'"));
    assert!(m.run("| head").contains("syntax error: empty command before '|'"));
    let usage = "grep: usage: grep [-v] [-c] [-e PATTERN]... [PATTERN]";
    assert!(m.run("cat trace | grep").contains(usage));
    assert!(m.run("cat trace | grep -v").contains(usage));
    assert!(m.run("cat trace | grep -e").contains(usage));
    assert!(m.run("cat trace | grep -e a b").contains(usage));
    assert!(m.run("cat trace | grep -x tick").contains("grep: unknown option -x"));
    assert!(m.run("stress | head").contains("stress: its output cannot be piped"));
    assert!(m.run("echo 1 > tracing_on | head").contains("cannot both redirect and pipe"));
}

/// `trace_pipe` reads the instance's live buffer whichever it is: a snapshot taken
/// while it reads (a function command on the pipe's own output, after its first
/// line) sends it on into the new live buffer, and the records it had not read stay
/// in the snapshot, as ftrace's pipe leaves them.
#[test]
fn trace_pipe_follows_the_live_buffer_across_a_snapshot() {
    let mut m = Machine::boot();
    assert_eq!(m.run("mkdir instances/p"), "");
    assert_eq!(m.run("echo 1 > instances/p/snapshot"), "");
    for i in 1..=3 {
        assert_eq!(m.run(&format!("echo before-{i} > instances/p/trace_marker")), "");
    }
    let command = "'<kernel::shell::pipe::Output>::pass:snapshot:1'";
    assert_eq!(m.run(&format!("echo {command} > instances/p/set_ftrace_filter")), "");
    assert_eq!(m.run("echo timer:tick > instances/p/set_event"), "");
    let piped = m.run("cat instances/p/trace_pipe | head -n 3");
    let lines = trace_lines(&piped);
    assert_eq!(lines.len(), 3, "{piped}");
    assert!(lines[0].fields.ends_with("before-1"), "{piped}");
    assert!(lines[1..].iter().all(|l| l.event == "tick"), "the new live buffer's:\n{piped}");
    let kept = m.run("cat instances/p/snapshot | grep before");
    assert!(kept.contains("before-2") && kept.contains("before-3"), "{kept}");
    assert!(m.run("cat instances/p/set_ftrace_filter").contains("snapshot:count=0"));
}

/// A `trace_pipe` read that has had records ends, as Linux's, once its instance's
/// recording is off and the rings are dry: here a function command on the pipe's own
/// output turns it off after the first line.
#[test]
fn trace_pipe_ends_when_recording_goes_off_after_it_read() {
    let mut m = Machine::boot();
    assert_eq!(m.run("mkdir instances/p"), "");
    for i in 1..=3 {
        assert_eq!(m.run(&format!("echo mark-{i} > instances/p/trace_marker")), "");
    }
    let command = "'<kernel::shell::pipe::Output>::pass:traceoff:1'";
    assert_eq!(m.run(&format!("echo {command} > instances/p/set_ftrace_filter")), "");
    let piped = m.run("cat instances/p/trace_pipe");
    let marks: Vec<String> = trace_lines(&piped).into_iter().map(|l| l.fields).collect();
    assert_eq!(marks, ["mark-1", "mark-2", "mark-3"], "what was there, then the end:\n{piped}");
    assert_eq!(m.run("cat instances/p/tracing_on"), "0\n");
}

/// A CPU's `trace_pipe` consumes that CPU's records only.
#[test]
fn a_cpus_trace_pipe_consumes_that_cpus_records_only() {
    let mut m = Machine::boot();
    assert_eq!(m.run("echo 0 > tracing_on"), "");
    let others: Vec<u64> = [0, 2, 3].iter().map(|&cpu| m.cpu_stat("", cpu, "entries:")).collect();
    assert!(m.cpu_stat("", 1, "entries:") > 0);
    let piped = m.run("cat per_cpu/cpu1/trace_pipe");
    let lines = trace_lines(&piped);
    assert!(!lines.is_empty() && lines.iter().all(|l| l.cpu == 1), "{piped}");
    assert_eq!(m.cpu_stat("", 1, "entries:"), 0);
    let after: Vec<u64> = [0, 2, 3].iter().map(|&cpu| m.cpu_stat("", cpu, "entries:")).collect();
    assert_eq!(after, others, "the other CPUs' records stay");
}

/// Fills every CPU's ring of the top-level instance and of instance t1 with stress
/// events (tens of thousands of lines to print); returns the top level's entries.
fn backlog(m: &mut Machine) -> u64 {
    assert_eq!(m.run("echo '*:*' > set_event"), "");
    assert_eq!(m.run("mkdir instances/t1"), "");
    assert_eq!(m.run("echo stress:event > instances/t1/set_event"), "");
    m.run("stress overwrite 300");
    assert_eq!(m.run("echo 0 > tracing_on"), "");
    assert_eq!(m.run("echo 0 > instances/t1/tracing_on"), "");
    (0..4).map(|cpu| m.cpu_stat("", cpu, "entries:")).sum()
}

/// Types `command`, waits for `first` (the first record line), sends Ctrl-C, and
/// returns what was printed until the prompt came back.
fn interrupt(m: &mut Machine, command: &str, first: &str) -> String {
    m.send(format!("{command}\r").as_bytes());
    let start = m.wait_for(first, STEP_TIMEOUT);
    m.send(b"\x03");
    let rest = m.wait_for_prompt(STEP_TIMEOUT);
    assert!(rest.trim_end().ends_with("^C"), "{command}: no ^C:\n{rest}");
    start + &rest
}

#[test]
fn ctrl_c_stops_every_long_read_whatever_the_backlog() {
    let mut m = Machine::boot();
    let entries = backlog(&mut m);
    assert!(entries > 10_000, "{entries} entries");
    for command in ["cat trace", "cat per_cpu/cpu1/trace"] {
        let printed = interrupt(&mut m, command, " event: apic_id=");
        let lines = printed.lines().count() as u64;
        assert!(lines < entries / 10, "{command}: {lines} of {entries} lines printed");
    }
    assert_eq!(m.run("echo 1 > snapshot"), "");
    let printed = interrupt(&mut m, "cat snapshot", " event: apic_id=");
    assert!((printed.lines().count() as u64) < entries / 10);
    // trace_pipe looks at the key between records: the backlog is left unread.
    assert_eq!(m.run("echo 1 > snapshot"), "", "the backlog back in the live buffer");
    let live: u64 = (0..4).map(|cpu| m.cpu_stat("", cpu, "entries:")).sum();
    assert!(live > 10_000, "{live} entries back in the live buffer");
    let printed = interrupt(&mut m, "cat trace_pipe", " event: apic_id=");
    let read: u64 = (0..4).map(|cpu| m.cpu_stat("", cpu, "read events:")).sum();
    assert!(read < live / 10, "trace_pipe read {read} of {live} records:\n{printed}");
    let printed = interrupt(&mut m, "cat per_cpu/cpu2/trace_pipe", " event: apic_id=");
    assert!((printed.lines().count() as u64) < entries / 10);
    // The same in an instance.
    let entries: u64 = (0..4).map(|cpu| m.cpu_stat("instances/t1/", cpu, "entries:")).sum();
    assert!(entries > 4_000, "{entries} entries in instances/t1");
    for command in ["cat instances/t1/trace", "cat instances/t1/trace_pipe"] {
        let printed = interrupt(&mut m, command, " event: apic_id=");
        let lines = printed.lines().count() as u64;
        assert!(lines < entries / 4, "{command}: {lines} of {entries} lines printed");
    }
    assert_eq!(m.run("cat instances/t1/trace | head -n 1"), "# tracer: nop\n");
    assert_eq!(m.run("cat instances/t1/trace | grep apic_id | head -n 3 | wc -l"), "3\n");
    assert!(m.run("uptime").contains("timer ticks"), "the shell goes on");
}

#[test]
fn line_editor_moves_the_cursor_erases_words_and_refuses_non_ascii() {
    let mut m = Machine::boot();
    // Left arrow twice, then insert: "uptme" becomes "uptime".
    m.send(b"uptme\x1b[D\x1b[Di\r");
    assert!(m.wait_for_prompt(STEP_TIMEOUT).contains("timer ticks"));
    // To the start, insert, then right to the end and append.
    m.send(b"ptim\x1b[D\x1b[D\x1b[D\x1b[Du\x1b[C\x1b[C\x1b[C\x1b[C\x1b[Ce\r");
    assert!(m.wait_for_prompt(STEP_TIMEOUT).contains("timer ticks"));
    // Backspace in the middle of the line.
    m.send(b"uptixme\x1b[D\x1b[D\x7f\r");
    assert!(m.wait_for_prompt(STEP_TIMEOUT).contains("timer ticks"));
    // Ctrl-W erases the word before the cursor (and the blanks after it).
    m.send(b"echo one two\x17three\r");
    assert!(m.wait_for_prompt(STEP_TIMEOUT).ends_with("\none three\n"));
    m.send(b"echo one two  \x17\x17four\r");
    assert!(m.wait_for_prompt(STEP_TIMEOUT).ends_with("\nfour\n"));
    // Bytes beyond ASCII ring the bell and are left out.
    m.send(b"echo caf\xc3\xa9s\r");
    let out = m.wait_for_prompt(STEP_TIMEOUT);
    assert_eq!(out.matches('\x07').count(), 2, "{out:?}");
    assert!(out.ends_with("\ncafs\n"), "{out:?}");
}
