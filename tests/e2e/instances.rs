//! Tracepoints from two crates, instances, snapshots and the latency watchdog
//! driver, in the booted kernel.

use e2e::{Machine, STEP_TIMEOUT, cpu_lines, trace_lines};

#[test]
fn descriptors_of_two_crates_are_found_and_ids_are_stable() {
    let mut m = Machine::boot();
    let banner = m.transcript();
    let line = banner.lines().find(|l| l.starts_with("trace: ")).expect("the tracer reports in");
    let count: usize = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    let events = m.run("cat available_events");
    // The kernel's events and the driver crate's (latency-watchdog).
    assert!(
        events.contains("timer:tick")
            && events.contains("latency:anomaly")
            && events.contains("latency:captured")
    );
    // Every id is distinct, and reading it twice gives the same.
    let mut ids = Vec::new();
    for event in events.lines() {
        let (system, name) = event.split_once(':').unwrap();
        let id = m.run(&format!("cat events/{system}/{name}/id")).trim().parse::<u16>().unwrap();
        assert_eq!(m.run(&format!("cat events/{system}/{name}/id")).trim(), id.to_string());
        ids.push(id);
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), events.lines().count(), "ids are distinct");
    assert!(count >= ids.len(), "the tracer counted {count} descriptors (events and printk sites)");
}

#[test]
fn an_event_enabled_in_one_instance_is_recorded_only_there() {
    let mut m = Machine::boot();
    m.run("mkdir instances/a");
    m.run("mkdir instances/b");
    m.run("echo serial:rx > instances/a/set_event");
    m.run("echo timer:tick > instances/b/set_event");
    m.run("echo zzz");
    let a = trace_lines(&m.run("cat instances/a/trace"));
    let b = trace_lines(&m.run("cat instances/b/trace"));
    assert!(a.iter().any(|l| l.fields == "byte=0x7a"), "a records serial input");
    assert!(a.iter().all(|l| l.event == "rx"), "a records only serial:rx");
    assert!(!b.is_empty() && b.iter().all(|l| l.event == "tick"), "b records only timer:tick");
}

#[test]
fn a_noisy_event_cannot_overwrite_another_instances_records() {
    let mut m = Machine::boot();
    m.run("mkdir instances/quiet");
    m.run("echo shell:command > instances/quiet/set_event");
    m.run("echo keep-me");
    // The top-level instance is flooded by heap events until it wraps many times.
    m.run("echo 8 > buffer_size_kb");
    m.run("echo 1 > events/kmem/enable");
    for _ in 0..5 {
        m.run("cat available_events");
    }
    let overrun: u64 = (0..4).map(|cpu| m.cpu_stat("", cpu, "overrun:")).sum();
    assert!(overrun > 0, "the top-level buffer never wrapped");
    let quiet = trace_lines(&m.run("cat instances/quiet/trace"));
    assert!(quiet.iter().any(|l| l.fields == "echo keep-me"), "the quiet instance lost its record");
    let top = m.run("cat trace");
    assert!(!top.contains("echo keep-me"), "the top-level buffer wrapped past it");
}

#[test]
fn a_snapshot_keeps_its_window_while_recording_goes_on() {
    let mut m = Machine::boot();
    m.run("mkdir instances/s");
    m.run("echo timer:tick > instances/s/set_event");
    m.run("echo marker-before > instances/s/trace_marker");
    m.run("echo 1 > instances/s/snapshot");
    let snapshot = trace_lines(&m.run("cat instances/s/snapshot"));
    let cut = snapshot.last().expect("records in the snapshot").ts;
    // Recording goes on in the live buffer: ticks keep coming.
    let later = (0..300).find_map(|_| {
        let live = trace_lines(&m.run("cat instances/s/trace"));
        live.iter().any(|l| l.event == "tick" && l.ts > cut).then_some(live)
    });
    let live = later.expect("the live buffer records after the snapshot");
    assert!(live.iter().all(|l| l.ts > cut), "the live buffer restarted at the snapshot");
    assert_eq!(
        trace_lines(&m.run("cat instances/s/snapshot")),
        snapshot,
        "the snapshot does not change"
    );
    assert!(snapshot.iter().any(|l| l.fields == "marker-before"));
}

#[test]
fn the_latency_watchdog_snapshots_the_events_around_an_anomaly() {
    let mut m = Machine::boot();
    // A threshold well above scheduling noise on a busy host, and a spike above it.
    m.watch_latency(200);
    m.run("latency spike 400");
    // The driver records a window of ticks after the anomaly, then snapshots it.
    let status = m.run("latency wait 10000");
    assert!(status.contains("state: Captured"), "the watchdog never captured:\n{status}");
    let snapshot = trace_lines(&m.run("cat instances/latency/snapshot"));
    let anomaly =
        snapshot.iter().position(|l| l.event == "anomaly").expect("the anomaly is in the snapshot");
    let late = &snapshot[anomaly];
    let interval: u64 =
        late.fields.split("interval=").nth(1).unwrap().split("ns").next().unwrap().parse().unwrap();
    assert!(interval >= 400_000_000, "{late:?}");
    // Before it: the flight recorder's baseline; after it: the printk and the window.
    assert!(snapshot[..anomaly].iter().any(|l| l.event == "tick"), "no ticks before the anomaly");
    assert!(
        snapshot[anomaly..].iter().any(|l| l.event == "bprint" && l.fields.contains("ns late"))
    );
    assert!(snapshot[anomaly..].iter().any(|l| l.event == "command"), "window events after it");
    // printk-msg-only: the printk line is its text alone; the events keep their columns.
    let printed = snapshot.iter().find(|l| l.event == "bprint").unwrap().fields.clone();
    assert_eq!(m.run("echo 1 > instances/latency/options/printk-msg-only"), "");
    let short = m.run("cat instances/latency/snapshot");
    assert!(short.lines().any(|l| l == printed), "{printed}:\n{short}");
    assert!(!short.contains(": bprint: "), "{short}");
    let events = snapshot.iter().filter(|l| !["bprint", "tracing_mark_write"].contains(&&*l.event));
    assert_eq!(trace_lines(&short).len(), events.count(), "{short}");
    assert_eq!(m.run("echo noprintk-msg-only > instances/latency/trace_options"), "");
    // The live buffer goes on; the snapshot stays.
    assert!(m.run("cat instances/latency/trace").contains("latency watchdog: snapshot taken"));
    // Re-armed, it watches again. With the instance's trace_printk option off, the
    // driver's printk! records nothing; the anomaly event is recorded still.
    assert!(m.run("latency rearm").contains("state: Watching"));
    assert_eq!(m.run("latency spike 0"), "latency: MS is 1 to 10000\n");
    assert_eq!(m.run("latency wait 10001"), "latency: MS is 1 to 10000\n");
    assert!(m.run("latency wait x").contains("usage"));
    // Nothing to capture: the wait runs out and says so.
    let waited = m.run("latency wait 50");
    assert!(waited.contains("latency: not captured within 50 ms (state: Watching)"), "{waited}");
    // With its snapshot buffer freed, the window closes with nowhere to go: the
    // watchdog says so and waits to be re-armed (it retried at every tick for good).
    assert_eq!(m.run("echo 0 > instances/latency/snapshot"), "");
    m.run("latency spike 400");
    let waited = m.run("latency wait 10000");
    assert!(waited.contains("the window closed with no snapshot to keep it"), "{waited}");
    assert!(m.run("latency").contains("state: NoSnapshot"));
    assert!(m.run("cat instances/latency/trace").contains("latency watchdog: no snapshot to take"));
    assert_eq!(m.run("echo 1 > instances/latency/snapshot"), "");
    assert!(m.run("latency rearm").contains("state: Watching"));
    // A key stops the wait: the status, no error.
    m.send(b"latency wait 10000\r");
    m.wait_for("latency wait 10000\r\n", STEP_TIMEOUT);
    m.send(b"q");
    let stopped = m.wait_for_prompt(STEP_TIMEOUT);
    assert!(stopped.contains("state: Watching") && !stopped.contains("not captured"), "{stopped}");
    assert_eq!(m.run("echo notrace_printk > instances/latency/trace_options"), "");
    assert_eq!(m.run("cat instances/latency/options/trace_printk"), "0\n");
    m.run("latency spike 400");
    let status = m.run("latency wait 10000");
    assert!(status.contains("state: Captured"), "the watchdog never captured:\n{status}");
    let again = trace_lines(&m.run("cat instances/latency/snapshot"));
    assert_eq!(again.iter().filter(|l| l.event == "anomaly").count(), 1, "{again:#?}");
    assert!(!again.iter().any(|l| l.event == "bprint"), "{again:#?}");
    // With `options/stacktrace`, the anomaly event and the driver's printk line, both
    // written in the timer interrupt, are each followed by the chain that wrote them.
    assert!(m.run("latency rearm").contains("state: Watching"));
    assert_eq!(m.run("echo trace_printk > instances/latency/trace_options"), "");
    assert_eq!(m.run("echo 1 > instances/latency/options/stacktrace"), "");
    // Room for the window's events with their stacks.
    assert_eq!(m.run("echo 256 > instances/latency/buffer_size_kb"), "");
    m.run("latency spike 400");
    let status = m.run("latency wait 10000");
    assert!(status.contains("state: Captured"), "the watchdog never captured:\n{status}");
    let text = m.run("cat instances/latency/snapshot");
    for written in [": anomaly: tick=", ": bprint: tick "] {
        let line = text.lines().find(|l| l.contains(written));
        let line = line.unwrap_or_else(|| panic!("{written}:\n{text}"));
        // Its CPU's records alone: others' may fall between, in time order; and
        // without an NMI's (the lockup detector's periodic one), which may strike
        // between an event and its stack trace.
        let mut in_nmi = false;
        let lines: Vec<_> = cpu_lines(&text, trace_lines(line)[0].cpu)
            .into_iter()
            .filter(|l| {
                if !l.starts_with(" => ") {
                    in_nmi = trace_lines(l).first().is_some_and(|t| t.task == "<nmi>-0");
                }
                !in_nmi
            })
            .collect();
        let at = lines.iter().position(|l| *l == line).unwrap();
        let after = &lines[at..lines.len().min(at + 12)];
        assert!(after.get(1).is_some_and(|l| l.contains(": kernel_stack: depth=")), "{after:#?}");
        // The chain starts in the driver's `on_tick`: its own frame, or the kernel's
        // hook's if the build inlined it there (frame pointers show what was built).
        let frames: Vec<_> = lines[at + 2..].iter().take_while(|l| l.starts_with(" => ")).collect();
        let timer = frames.iter().position(|l| l.starts_with(" => kernel::timer::on_tick+"));
        let timer = timer.unwrap_or_else(|| panic!("{written}: no timer frame in {frames:#?}"));
        let own = |l: &&&str| {
            let driver = l.starts_with(" => <latency_watchdog::Watchdog<")
                && l.contains("KernelPlatform>>::on_tick+");
            driver || l.starts_with(" => kernel::watchdog::on_tick+")
        };
        assert!(timer > 0 && frames[..timer].iter().all(own), "{written}: {frames:#?}");
    }
}

#[test]
fn the_watchdogs_job_is_done_from_the_shell_with_a_filter_and_triggers() {
    let mut m = Machine::boot();
    let tick = "instances/wd/events/timer/tick";
    // A late tick of CPU 0 (where `latency spike` turns interrupts off).
    let late = "if interval_ns > 200000000 && CPU == 0";
    for line in [
        "mkdir instances/wd".to_string(),
        "echo 'timer:tick irq:*' > instances/wd/set_event".to_string(),
        format!("echo 'snapshot:1 {late}' > {tick}/trigger"),
        format!("echo 'enable_event:shell:command:1 {late}' >> {tick}/trigger"),
    ] {
        assert_eq!(m.run(&line), "", "{line}");
    }
    m.run("latency spike 400");
    // Both fire from the late tick's interrupt (polled: the tick comes when it comes).
    let fired =
        (0..500).any(|_| m.run(&format!("cat {tick}/trigger")).matches("count=0").count() == 2);
    assert!(fired, "{}", m.run(&format!("cat {tick}/trigger")));
    // The snapshot froze the flight recorder at the late tick, recorded before it.
    let snapshot = trace_lines(&m.run("cat instances/wd/snapshot"));
    let last = snapshot.iter().rev().find(|l| l.event == "tick" && l.cpu == 0).expect("ticks");
    let interval: u64 =
        last.fields.split("interval=").nth(1).unwrap().split("ns").next().unwrap().parse().unwrap();
    assert!(interval >= 400_000_000, "{last:?}");
    assert!(snapshot.iter().filter(|l| l.event == "tick").count() > 1, "no baseline ticks");
    assert!(snapshot.iter().any(|l| l.event == "irq_handler_entry"), "no baseline interrupts");
    assert!(snapshot.iter().all(|l| l.event != "command"), "a command before the anomaly");
    // From then on the live buffer records the shell's commands too.
    // `*`: the tick's enable_event trigger still acts on it (soft mode, as in Linux).
    assert_eq!(m.run("cat instances/wd/events/shell/command/enable").trim(), "1*");
    m.run("uptime");
    let live = trace_lines(&m.run("cat instances/wd/trace"));
    assert!(live.iter().any(|l| l.event == "command" && l.fields.contains("uptime")), "{live:?}");
}

/// Run in both profiles (`tests/run.sh` also runs it with `--release`): the kernel is
/// built in the test's profile, and the linker keeps the tracepoint section.
#[test]
fn the_tracepoint_section_survives_the_build_profile() {
    let mut m = Machine::boot();
    let profile = if cfg!(debug_assertions) { "debug" } else { "release" };
    assert!(
        m.transcript().contains(&format!("flight recorder kernel ({profile} build)")),
        "the kernel is a {profile} build"
    );
    let events = m.run("cat available_events");
    assert!(events.lines().count() > 15, "{events}");
    assert!(events.contains("latency:anomaly") && events.contains("irq:irq_handler_entry"));
    m.run("echo marker > trace_marker");
    assert!(m.run("cat trace").contains("tracing_mark_write: marker"));
}

/// As Linux's, a new instance starts with the top level's trace options, its ring
/// made in the top level's mode, except the one Linux zeroes for an instance
/// (`copy_trace_marker`: off) and the tracers' own options (at their defaults);
/// they are its own from then on.
#[test]
fn a_new_instance_starts_with_the_top_levels_trace_options() {
    let mut m = Machine::boot();
    let top = [
        ("overwrite", "0"),
        ("sym-offset", "1"),
        ("stacktrace", "1"),
        ("context-info", "0"),
        ("funcgraph-proc", "1"),
        ("trace_printk", "0"),
    ];
    for (option, value) in top {
        assert_eq!(m.run(&format!("echo {value} > options/{option}")), "", "{option}");
    }
    assert_eq!(m.run("mkdir instances/inh"), "");
    let read = |m: &mut Machine, option: &str| {
        m.run(&format!("cat instances/inh/options/{option}")).trim().to_string()
    };
    let expected = [
        ("overwrite", "0"),
        ("sym-offset", "1"),
        ("stacktrace", "1"),
        ("context-info", "0"),
        ("funcgraph-proc", "0"),
        ("copy_trace_marker", "0"),
        ("trace_printk", "0"),
        ("markers", "1"),
    ];
    for (option, value) in expected {
        assert_eq!(read(&mut m, option), value, "{option}");
    }
    assert_eq!(m.run("echo 1 > options/overwrite"), "");
    assert_eq!(read(&mut m, "overwrite"), "0", "its own once made");
}
