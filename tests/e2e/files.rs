//! The tracefs files besides the basic ones, at the top level and in an instance:
//! `README`, `available_tracers`, `current_tracer`, `buffer_subbuf_size_kb`,
//! `printk_formats`, `tracing_cpumask`, `per_cpu/cpuN/buffer_size_kb`,
//! `trace_marker_raw` and `error_log`, with ftrace's semantics.

use e2e::{Machine, trace_lines};

/// Roots to test: the top-level instance and a created one.
const ROOTS: [&str; 2] = ["", "instances/t1/"];

fn machine_with_instance() -> Machine {
    let mut m = Machine::boot();
    assert_eq!(m.run("mkdir instances/t1"), "");
    m
}

#[test]
fn readme_tracers_subbuf_size_and_printk_formats() {
    let mut m = machine_with_instance();
    // README and printk_formats are top-level files, as in Linux.
    let readme = m.run("cat README");
    assert!(readme.starts_with("tracing mini-HOWTO:"), "{readme}");
    for entry in m.run("ls").lines() {
        let name = entry.trim_end_matches('/');
        assert!(readme.contains(name), "README does not mention {name}:\n{readme}");
    }
    // The lines Linux's ftrace selftests look for before testing a feature.
    for feature in [
        "accepts: func_full_name or glob-matching-pattern",
        "<var1>=<field|var_ref|numeric_literal>",
    ] {
        assert!(readme.contains(feature), "README does not say {feature:?}:\n{readme}");
    }
    assert!(m.run("echo x > README").contains("Permission denied (read-only file)"));
    let formats = m.run("cat printk_formats");
    assert!(
        formats
            .lines()
            .any(|l| l.starts_with("0x") && l.ends_with(" : \"tick {} arrived {} ns late\"")),
        "{formats}"
    );
    for file in ["README", "printk_formats"] {
        assert!(m.run(&format!("cat instances/t1/{file}")).contains("No such file or directory"));
        assert!(!m.run("ls instances/t1").lines().any(|l| l == file));
    }
    for root in ROOTS {
        // Every instance has the function tracers (tests/e2e/functions.rs).
        let tracers = "function_graph irqsoff function nop\n";
        assert_eq!(m.run(&format!("cat {root}available_tracers")), tracers);
        assert_eq!(m.run(&format!("cat {root}current_tracer")), "nop\n");
        assert_eq!(m.run(&format!("echo nop > {root}current_tracer")), "");
        assert!(
            m.run(&format!("echo wakeup > {root}current_tracer"))
                .contains("Invalid argument (no such tracer (see available_tracers))")
        );
        assert_eq!(m.run(&format!("cat {root}current_tracer")), "nop\n");
        assert!(m.run(&format!("echo nop > {root}available_tracers")).contains("read-only"));
        assert_eq!(m.run(&format!("cat {root}buffer_subbuf_size_kb")), "4\n");
        assert_eq!(m.run(&format!("echo 4 > {root}buffer_subbuf_size_kb")), "");
        assert!(m.run(&format!("echo 8 > {root}buffer_subbuf_size_kb")).contains(
            "Invalid argument (the rings have no sub-buffers; a record is at most 4 KB, so only 4)"
        ));
        assert_eq!(m.run(&format!("cat {root}buffer_subbuf_size_kb")), "4\n");
    }
}

/// Runs `uptime` until `root`'s trace has timer ticks (they come every few ms on
/// every CPU), and returns the trace's lines.
fn ticks(m: &mut Machine, root: &str) -> Vec<e2e::TraceLine> {
    for _ in 0..100 {
        m.run("uptime");
        let lines = trace_lines(&m.run(&format!("cat {root}trace")));
        if lines.iter().filter(|l| l.event == "tick").count() >= 8 {
            return lines;
        }
    }
    panic!("{root}trace never showed timer ticks");
}

#[test]
fn tracing_cpumask_masks_recording_per_cpu() {
    let mut m = machine_with_instance();
    for root in ROOTS {
        let file = format!("{root}tracing_cpumask");
        assert_eq!(m.run(&format!("cat {file}")), "f\n", "four CPUs, all traced");
        assert_eq!(m.run(&format!("echo timer:tick > {root}set_event")), "");
        assert_eq!(m.run(&format!("echo 1 > {file}")), "");
        assert_eq!(m.run(&format!("cat {file}")), "1\n");
        assert_eq!(m.run(&format!("echo > {root}trace")), "");
        let lines = ticks(&mut m, root);
        assert!(lines.iter().all(|l| l.cpu == 0), "CPUs outside the mask recorded: {lines:?}");
        // Bad masks are refused with the rule; the mask stays.
        assert!(
            m.run(&format!("echo 10 > {file}"))
                .contains("Invalid argument (the mask has bits for CPUs that do not exist)")
        );
        // Not hex, however long (17 letters read as too many CPUs).
        for bad in ["zz", "zzzzzzzzzzzzzzzzz"] {
            let out = m.run(&format!("echo {bad} > {file}"));
            assert!(
                out.contains("Invalid argument (a hex mask with a bit per CPU"),
                "{bad}: {out}"
            );
        }
        assert_eq!(m.run(&format!("cat {file}")), "1\n");
        // Commas part 32-bit groups, as Linux's: `1,0` is CPU 32, which does not
        // exist; `0,0000000a` is CPUs 1 and 3; a group of more than 8 digits or an
        // empty one is refused.
        for bad in ["1,0", "0,100000000", "a,,0"] {
            let out = m.run(&format!("echo {bad} > {file}"));
            assert!(out.contains("Invalid argument ("), "{bad}: {out}");
        }
        assert_eq!(m.run(&format!("cat {file}")), "1\n");
        assert_eq!(m.run(&format!("echo 0,0000000a > {file}")), "");
        assert_eq!(m.run(&format!("cat {file}")), "a\n");
        // CPUs 1 and 3 only (hex a).
        assert_eq!(m.run(&format!("echo a > {file}")), "");
        assert_eq!(m.run(&format!("echo > {root}trace")), "");
        let lines = ticks(&mut m, root);
        assert!(lines.iter().all(|l| l.cpu == 1 || l.cpu == 3), "{lines:?}");
        assert!(lines.iter().any(|l| l.cpu == 1) && lines.iter().any(|l| l.cpu == 3));
        // Triggers run on every CPU, as ftrace's: a tick on CPU 2, outside the mask,
        // turns recording off.
        let trigger = format!("{root}events/timer/tick/trigger");
        assert_eq!(m.run(&format!("echo 'traceoff if CPU == 2' > {trigger}")), "");
        let off = (0..1000).any(|_| m.run(&format!("cat {root}tracing_on")) == "0\n");
        assert!(off, "{root}: the trigger never fired on CPU 2");
        assert_eq!(m.run(&format!("echo '!traceoff' > {trigger}")), "");
        assert_eq!(m.run(&format!("echo 1 > {root}tracing_on")), "");
        assert_eq!(m.run(&format!("echo f > {file}")), "");
    }
}

#[test]
fn per_cpu_buffer_size_kb_resizes_one_cpu() {
    let mut m = machine_with_instance();
    for root in ROOTS {
        let size: usize = m.run(&format!("cat {root}buffer_size_kb")).trim().parse().unwrap();
        for cpu in 0..4 {
            assert_eq!(
                m.run(&format!("cat {root}per_cpu/cpu{cpu}/buffer_size_kb")),
                format!("{size}\n")
            );
        }
        m.run(&format!("echo kept > {root}trace_marker"));
        assert_eq!(m.run(&format!("echo 32 > {root}per_cpu/cpu1/buffer_size_kb")), "");
        assert_eq!(m.run(&format!("cat {root}per_cpu/cpu1/buffer_size_kb")), "32\n");
        assert_eq!(m.run(&format!("cat {root}per_cpu/cpu0/buffer_size_kb")), format!("{size}\n"));
        // Sizes differ: Linux shows X; the total adds them up.
        assert_eq!(m.run(&format!("cat {root}buffer_size_kb")), "X\n");
        assert_eq!(
            m.run(&format!("cat {root}buffer_total_size_kb")),
            format!("{}\n", size * 3 + 32)
        );
        assert!(
            m.run(&format!("cat {root}trace")).contains("tracing_mark_write: kept"),
            "CPU 0's records survive CPU 1's resize"
        );
        assert!(
            m.run(&format!("echo 0 > {root}per_cpu/cpu1/buffer_size_kb"))
                .contains("Invalid argument (a size in KB, at least 1)")
        );
        assert!(
            m.run(&format!("echo 99999999 > {root}per_cpu/cpu1/buffer_size_kb"))
                .contains("the rings of all instances and snapshots may take 65536 KB together")
        );
        assert_eq!(m.run(&format!("cat {root}per_cpu/cpu1/buffer_size_kb")), "32\n");
        assert_eq!(m.run(&format!("echo {size} > {root}buffer_size_kb")), "");
        assert_eq!(m.run(&format!("cat {root}buffer_size_kb")), format!("{size}\n"));
        // The size the rings have already: what they hold stays, as in ftrace.
        m.run(&format!("echo same-size > {root}trace_marker"));
        assert_eq!(m.run(&format!("echo {size} > {root}buffer_size_kb")), "");
        assert_eq!(m.run(&format!("echo {size} > {root}per_cpu/cpu0/buffer_size_kb")), "");
        assert!(m.run(&format!("cat {root}trace")).contains("tracing_mark_write: same-size"));
    }
}

#[test]
fn trace_marker_raw_and_error_log() {
    let mut m = machine_with_instance();
    for root in ROOTS {
        assert_eq!(m.run(&format!("cat {root}error_log")), "");
        // A 4-byte id (little endian, as Linux reads it), then the data.
        assert_eq!(m.run(&format!("echo abcdef > {root}trace_marker_raw")), "");
        let trace = m.run(&format!("cat {root}trace"));
        assert!(trace.lines().any(|l| l.ends_with(": # 64636261 buf: 65 66")), "{trace}");
        assert!(m.run(&format!("cat {root}trace_marker_raw")).contains("write-only"));
        let err = m.run(&format!("echo ab > {root}trace_marker_raw"));
        assert!(err.contains("Invalid argument (a 4-byte id, then the data)"), "{err}");
        let long = "x".repeat(90);
        assert!(
            m.run(&format!("echo {long} > {root}trace_marker_raw")).contains(
                "Invalid argument (the data after the id is too long (at most 80 bytes))"
            )
        );
        // Failed writes land in the instance's error_log, in Linux's layout.
        let log = m.run(&format!("cat {root}error_log"));
        let lines: Vec<&str> = log.lines().collect();
        assert_eq!(lines.len(), 6, "{log}");
        assert!(
            lines[0].starts_with('[')
                && lines[0].ends_with(
                    "] trace_marker_raw: error: Invalid argument (a 4-byte id, then the data)"
                ),
            "{log}"
        );
        assert_eq!(lines[1], "  Command: ab");
        assert_eq!(lines[2], "           ^");
        // Opening for writing empties it.
        assert_eq!(m.run(&format!("echo > {root}error_log")), "");
        assert_eq!(m.run(&format!("cat {root}error_log")), "");
        // It keeps the last 8 errors, as Linux's.
        for i in 0..10 {
            assert!(m.run(&format!("echo bad{i} > {root}tracing_on")).contains("Invalid"));
        }
        let log = m.run(&format!("cat {root}error_log"));
        let commands: Vec<&str> =
            log.lines().filter_map(|l| l.strip_prefix("  Command: ")).collect();
        assert_eq!(commands, (2..10).map(|i| format!("bad{i}")).collect::<Vec<_>>(), "{log}");
        assert_eq!(m.run(&format!("echo > {root}error_log")), "");
    }
    // Each instance has its own log.
    m.run("echo bad > instances/t1/tracing_on");
    assert!(m.run("cat instances/t1/error_log").contains("tracing_on: error"));
    assert_eq!(m.run("cat error_log"), "");
}
