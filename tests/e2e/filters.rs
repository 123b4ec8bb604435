//! Event filters and triggers through tracefs (`events/SYS/EVENT/filter`,
//! `events/SYS/filter`, `events/SYS/EVENT/trigger`), at the top level and in an
//! instance. Every key typed at the shell raises the serial interrupt (vector 49);
//! the timer's is vector 48.

use boot::report;
use e2e::{Machine, trace_lines};

/// The instance roots each check runs in: the top level and a named instance.
const ROOTS: [&str; 2] = ["", "instances/f/"];

/// Boots and creates the named instance of [`ROOTS`].
fn boot() -> Machine {
    let mut m = Machine::boot();
    m.run("mkdir instances/f");
    m
}

/// The `irq_handler_entry` records of `root`'s trace, as their fields.
fn irq_entries(m: &mut Machine, root: &str) -> Vec<String> {
    let lines = trace_lines(&m.run(&format!("cat {root}trace")));
    lines.into_iter().filter(|l| l.event == "irq_handler_entry").map(|l| l.fields).collect()
}

/// Whether a `timer:tick` record shows up in `root`'s trace (polled: ticks come
/// at the timer's pace).
fn has_tick(m: &mut Machine, root: &str) -> bool {
    (0..300)
        .any(|_| trace_lines(&m.run(&format!("cat {root}trace"))).iter().any(|l| l.event == "tick"))
}

/// The texts of the markers (`tracing_mark_write` lines) a trace file holds.
fn markers(m: &mut Machine, file: &str) -> Vec<String> {
    let lines = trace_lines(&m.run(&format!("cat {file}")));
    lines.into_iter().filter(|l| l.event == "tracing_mark_write").map(|l| l.fields).collect()
}

fn cat(m: &mut Machine, path: &str) -> String {
    m.run(&format!("cat {path}")).trim().to_string()
}

#[test]
fn filters_keep_only_matching_records_and_refuse_bad_text() {
    let mut m = boot();
    for root in ROOTS {
        let entry = format!("{root}events/irq/irq_handler_entry");
        let filter = format!("{entry}/filter");
        assert_eq!(cat(&mut m, &filter), "none", "{root}: no filter at first");

        // Only the serial interrupts (the keys typed) are kept.
        m.run(&format!("echo 'irq == 49' > {filter}"));
        assert_eq!(cat(&mut m, &filter), "irq == 49");
        m.run(&format!("echo 1 > {entry}/enable"));
        m.run(&format!("echo > {root}trace"));
        m.run("echo typed");
        let entries = irq_entries(&mut m, root);
        assert!(!entries.is_empty(), "{root}: the keys typed are recorded");
        assert!(entries.iter().all(|f| f == "irq=49"), "{root}: {entries:?}");

        // A bad filter names the position and reason, is logged with a caret under
        // that position, and leaves the filter as it was.
        let bad = "irq == 49 && irw == 1";
        let out = m.run(&format!("echo '{bad}' > {filter}"));
        assert!(out.contains("parse error at 17: field not found"), "{root}: {out}");
        assert_eq!(cat(&mut m, &filter), "irq == 49", "{root}: the refused filter changed it");
        // Under the operator after the unknown name, named as ftrace names it.
        let log = m.run(&format!("cat {root}error_log"));
        let caret = format!("\n{}^", " ".repeat("  Command: ".len() + 17));
        assert!(log.contains(&format!("  Command: {bad}{caret}")), "{root}: {log}");
        assert!(log.contains("] event filter parse error: error: Invalid argument"), "{log}");

        // A long list (60 predicates, 835 bytes): the last one keeps the keys typed.
        let list: Vec<String> = (100..159).chain([49]).map(|v| format!("irq == {v}")).collect();
        let list = list.join(" || ");
        assert_eq!(m.run(&format!("echo '{list}' > {filter}")), "", "{root}");
        assert_eq!(cat(&mut m, &filter), list);
        m.run(&format!("echo > {root}trace"));
        m.run("echo typed");
        let entries = irq_entries(&mut m, root);
        assert!(!entries.is_empty() && entries.iter().all(|f| f == "irq=49"), "{entries:?}");
        // 129 is one too many, whatever the length.
        let out = m.run(&format!("echo '{}' > {filter}", ["irq&1"; 129].join("||")));
        assert!(out.contains("parse error at 896: too many predicates (at most 128)"), "{out}");
        assert_eq!(cat(&mut m, &filter), list, "{root}: the refused filter changed it");

        // `0` clears it.
        m.run(&format!("echo 0 > {filter}"));
        assert_eq!(cat(&mut m, &filter), "none");

        // A system filter binds to the events of the system it fits (not irq:nmi,
        // which has no `irq`).
        let system = format!("{root}events/irq/filter");
        // Unset, Linux's text.
        let unset = cat(&mut m, &system);
        assert!(unset.starts_with("### global filter ###\n# Use this to set filters"), "{unset}");
        assert!(unset.ends_with("an error message will be displayed here"), "{unset}");
        m.run(&format!("echo 'irq == 48' > {system}"));
        assert_eq!(cat(&mut m, &system), "irq == 48");
        assert_eq!(cat(&mut m, &filter), "irq == 48");
        assert_eq!(cat(&mut m, &format!("{root}events/irq/irq_handler_exit/filter")), "irq == 48");
        assert_eq!(cat(&mut m, &format!("{root}events/irq/nmi/filter")), "none");
        m.run(&format!("echo > {root}trace"));
        // Keys are typed all along, yet only timer interrupts are recorded.
        let entries = (0..300)
            .map(|_| irq_entries(&mut m, root))
            .find(|entries| !entries.is_empty())
            .expect("timer interrupts are recorded");
        assert!(entries.iter().all(|f| f == "irq=48"), "{root}: {entries:?}");
        let out = m.run(&format!("echo 'nosuch == 1' > {system}"));
        assert!(out.contains("parse error"), "{root}: a filter no event fits: {out}");
        assert_eq!(cat(&mut m, &system), "irq == 48", "{root}: the refused filter changed it");
        m.run(&format!("echo 0 > {system}"));
        assert_eq!(cat(&mut m, &system), unset);
        // The tracer's own events take no enable: their system's file affects none.
        assert_eq!(cat(&mut m, &format!("{root}events/ftrace/enable")), "?");
        assert_eq!(cat(&mut m, &filter), "none");
        m.run(&format!("echo 0 > {entry}/enable"));

        // Integer operators: `&`, `!`, `<=`, `&&` on timer:tick.
        let tick = format!("{root}events/timer/tick");
        m.run(&format!("echo 'tick & 1 && !(tick <= 2)' > {tick}/filter"));
        m.run(&format!("echo 1 > {tick}/enable"));
        m.run(&format!("echo > {root}trace"));
        assert!(has_tick(&mut m, root), "{root}: no tick passes");
        let ticks: Vec<u64> = trace_lines(&m.run(&format!("cat {root}trace")))
            .iter()
            .filter(|l| l.event == "tick")
            .map(|l| l.fields.split_whitespace().next().unwrap()["tick=".len()..].parse().unwrap())
            .collect();
        assert!(ticks.iter().all(|&t| t % 2 == 1 && t > 2), "{root}: {ticks:?}");

        // Where the event was written: the CPU, the task, the flags (every CPU ticks).
        let filter = "CPU == 2 && comm == \"<irq>\" && common_flags & 0x08 && common_pid == 0";
        m.run(&format!("echo '{filter}' > {tick}/filter"));
        assert_eq!(cat(&mut m, &format!("{tick}/filter")), filter);
        m.run(&format!("echo > {root}trace"));
        assert!(has_tick(&mut m, root), "{root}: no tick passes");
        let ticks: Vec<_> = trace_lines(&m.run(&format!("cat {root}trace")))
            .into_iter()
            .filter(|l| l.event == "tick")
            .collect();
        assert!(
            ticks.iter().all(|l| l.cpu == 2 && l.task == "<irq>-0" && &l.flags[2..3] == "h"),
            "{root}: {ticks:?}"
        );
        m.run(&format!("echo 0 > {tick}/enable"));
        m.run(&format!("echo 0 > {tick}/filter"));

        // On a string field: a glob, `||` of equalities, `!=` with `&&`.
        let command = format!("{root}events/shell/command");
        m.run(&format!("echo 1 > {command}/enable"));
        for text in [
            "line ~ \"echo [j-l]*\"",
            "line == \"echo kept\" || line == \"echo left\"",
            "line != \"echo dropped\" && line ~ \"echo [a-z]*\"",
        ] {
            m.run(&format!("echo '{text}' > {command}/filter"));
            assert_eq!(cat(&mut m, &format!("{command}/filter")), text);
            m.run(&format!("echo > {root}trace"));
            m.run("echo kept");
            m.run("echo dropped");
            m.run("echo left");
            let commands: Vec<String> = trace_lines(&m.run(&format!("cat {root}trace")))
                .into_iter()
                .filter(|l| l.event == "command")
                .map(|l| l.fields)
                .collect();
            assert_eq!(commands, ["echo kept", "echo left"], "{root}{text}");
        }
        m.run(&format!("echo 0 > {command}/filter"));
    }
    let listing = m.run("ls events/irq/irq_handler_entry");
    assert!(listing.contains("filter") && listing.contains("trigger"), "{listing}");
    assert!(m.run("ls instances/f/events/irq").contains("filter"));
}

#[test]
fn triggers_act_from_interrupt_context_and_count_down() {
    let mut m = boot();
    for root in ROOTS {
        let trigger = format!("{root}events/irq/irq_handler_entry/trigger");
        let tracing_on = format!("{root}tracing_on");
        let none = cat(&mut m, &trigger);
        assert!(none.starts_with("# Available triggers:"), "{root}: {none}");

        // traceoff, once: the next key typed stops recording.
        m.run(&format!("echo 'traceoff:1 if irq == 49' > {trigger}"));
        assert_eq!(cat(&mut m, &tracing_on), "0", "{root}: traceoff did not fire");
        assert_eq!(cat(&mut m, &trigger), "traceoff:count=0 if irq == 49");
        // Its count is used up: recording stays on. So it is with a count of 0.
        m.run(&format!("echo 1 > {tracing_on}"));
        m.run("echo more keys");
        assert_eq!(cat(&mut m, &tracing_on), "1", "{root}: a used-up traceoff fired");
        m.run(&format!("echo '!traceoff' > {trigger}"));
        assert_eq!(m.run(&format!("echo 'traceoff:0 if irq == 49' > {trigger}")), "");
        m.run("echo more keys");
        assert_eq!(cat(&mut m, &trigger), "traceoff:count=0 if irq == 49");
        assert_eq!(cat(&mut m, &tracing_on), "1", "{root}: traceoff:0 fired");
        // As in Linux, the line the file lists, with `!` before it, removes it.
        m.run(&format!("echo '!traceoff:count=0 if irq == 49' > {trigger}"));
        assert_eq!(cat(&mut m, &trigger), none, "{root}: !traceoff did not remove it");

        // traceon: the next key typed starts recording again.
        m.run(&format!("echo 0 > {tracing_on}"));
        m.run(&format!("echo 'traceon if irq == 49' > {trigger}"));
        assert_eq!(cat(&mut m, &tracing_on), "1", "{root}: traceon did not fire");
        assert_eq!(cat(&mut m, &trigger), "traceon:unlimited if irq == 49");
        m.run(&format!("echo '!traceon' > {trigger}"));

        // Bad lines name the position and reason and change nothing.
        let out = m.run(&format!("echo 'traceof' > {trigger}"));
        assert!(out.contains("parse error at 0: unknown command"), "{root}: {out}");
        let out = m.run(&format!("echo 'traceoff if vectr == 1' > {trigger}"));
        assert!(out.contains("parse error at 18: field not found"), "{root}: {out}");
        let log = m.run(&format!("cat {root}error_log"));
        let caret = format!("\n{}^", " ".repeat("  Command: ".len() + 18));
        assert!(
            log.contains(&format!("  Command: traceoff if vectr == 1{caret}")),
            "{root}: {log}"
        );
        // Removing a trigger the event does not have succeeds and changes nothing, as
        // ftrace's (its selftests' `reset_trigger` relies on it).
        assert_eq!(m.run(&format!("echo '!snapshot' > {trigger}")), "", "{root}");
        assert_eq!(cat(&mut m, &trigger), none, "{root}: a removal of nothing changed them");

        // snapshot, once: the key typed next keeps the window in `snapshot`.
        assert!(m.run(&format!("cat {root}snapshot")).contains("Snapshot is freed"));
        m.run(&format!("echo 1 > {root}events/timer/tick/enable"));
        assert!(has_tick(&mut m, root), "{root}: no tick recorded");
        m.run(&format!("echo 'snapshot:1 if irq == 49' > {trigger}"));
        let snapshot = m.run(&format!("cat {root}snapshot"));
        // Holding records, it reads as `trace` does, as Linux's.
        assert!(snapshot.contains("# entries-in-buffer/entries-written: "), "{root}: {snapshot}");
        assert!(
            trace_lines(&snapshot).iter().any(|l| l.event == "tick"),
            "{root}: the snapshot holds the window: {snapshot}"
        );
        assert_eq!(cat(&mut m, &trigger), "snapshot:count=0 if irq == 49");
        m.run(&format!("echo '!snapshot' > {trigger}"));
        m.run(&format!("echo 0 > {root}snapshot"));

        // disable_event and enable_event flip another event from the interrupt.
        let tick = format!("{root}events/timer/tick/enable");
        m.run(&format!("echo 'disable_event:timer:tick if irq == 49' > {trigger}"));
        // `*`: soft mode, while a trigger acts on the event.
        assert_eq!(cat(&mut m, &tick), "0*", "{root}: disable_event did not fire");
        assert_eq!(cat(&mut m, &trigger), "disable_event:timer:tick:unlimited if irq == 49");
        // Soft mode counts as enabled where Linux's flag does: set_event lists it.
        let listed = m.run(&format!("cat {root}set_event"));
        assert!(listed.lines().any(|l| l == "timer:tick"), "{root}: {listed}");
        m.run(&format!("echo '!disable_event:timer:tick' > {trigger}"));
        m.run(&format!("echo > {root}trace"));
        m.run(&format!("echo 'enable_event:timer:tick:2 if irq == 49' > {trigger}"));
        assert_eq!(cat(&mut m, &tick), "1*", "{root}: enable_event did not fire");
        // It took one of its two: the event was off once.
        assert_eq!(cat(&mut m, &trigger), "enable_event:timer:tick:count=1 if irq == 49");
        assert!(has_tick(&mut m, root), "{root}: no tick recorded after enable_event");
        m.run(&format!("echo '!enable_event:timer:tick:count=1 if irq == 49' > {trigger}"));
        m.run(&format!("echo 0 > {tick}"));
        assert_eq!(cat(&mut m, &trigger), none);
        let listed = m.run(&format!("cat {root}set_event"));
        assert!(!listed.lines().any(|l| l == "timer:tick"), "{root}: {listed}");
    }
}

/// Linux's selftests of triggers (`trigger-eventonoff.tc`, `trigger-traceonoff.tc`,
/// `trigger-filter.tc`), at the top level and in an instance. `enable_event`'s and
/// `disable_event`'s target reads `1*` or `0*` once its trigger fired (the `*` of
/// soft mode while a trigger acts on it, the triggering event's own `enable` too),
/// plain `1` or `0` once the trigger is gone; an unknown target, a malformed
/// command, a second trigger on the same target (either command) and a second of
/// `traceon`/`traceoff` are refused (the second ones with `File exists`, Linux's
/// EEXIST); `!` removes either of a pair; `>` replaces the event's histograms where
/// `>>` adds one; conditions that are not filters of the event are refused.
/// As Linux's, an event's triggers act before it is recorded when none of them
/// needs the record (no `if`, no `traceoff`, `stacktrace` or `hist`): `traceon`
/// records the key that turned recording on, and `snapshot` swaps before the key,
/// which starts the new live buffer. Each key typed is a `serial:rx` event.
#[test]
fn unconditional_traceon_and_snapshot_act_before_their_event() {
    let mut m = boot();
    for root in ROOTS {
        let rx = format!("{root}events/serial/rx");
        let keys = |m: &mut Machine, file: &str| -> Vec<String> {
            let lines = trace_lines(&m.run(&format!("cat {root}{file}")));
            lines.into_iter().filter(|l| l.event == "rx").map(|l| l.fields).collect()
        };
        m.run(&format!("echo 1 > {rx}/enable"));
        m.run(&format!("echo 0 > {root}tracing_on"));
        m.run(&format!("echo > {root}trace"));
        m.run(&format!("echo 'traceon:1' > {rx}/trigger"));
        // `cat`'s `c` turned recording on, and is its first record.
        assert_eq!(cat(&mut m, &format!("{root}tracing_on")), "1", "{root}");
        let recorded = keys(&mut m, "trace");
        assert_eq!(recorded.first().map(String::as_str), Some("byte=0x63"), "{root}{recorded:?}");
        m.run(&format!("echo '!traceon' > {rx}/trigger"));

        m.run(&format!("echo 1 > {root}snapshot"));
        m.run(&format!("echo 2 > {root}snapshot"));
        m.run(&format!("echo > {root}trace"));
        m.run(&format!("echo 'snapshot:1' > {rx}/trigger"));
        // `cat`'s `c` swapped: the snapshot ends with the Enter before it, and the
        // live buffer starts with it.
        let kept = keys(&mut m, "snapshot");
        assert_eq!(kept.last().map(String::as_str), Some("byte=0xd"), "{root}{kept:?}");
        let live = keys(&mut m, "trace");
        assert_eq!(live.first().map(String::as_str), Some("byte=0x63"), "{root}{live:?}");
        m.run(&format!("echo '!snapshot' > {rx}/trigger"));
        m.run(&format!("echo 0 > {root}snapshot"));
        m.run(&format!("echo 0 > {rx}/enable"));
    }
}

/// A trigger that disables its own event drops the record that fired it, with a
/// condition or without, as ftrace's (which reads the event's soft-disable flag
/// again as it commits); one that enables it with a condition keeps that record.
/// Each command line is a `shell:command` event.
#[test]
fn a_conditional_trigger_on_its_own_event_decides_the_record_that_fired_it() {
    let mut m = boot();
    for root in ROOTS {
        let command = format!("{root}events/shell/command");
        let lines = |m: &mut Machine| -> Vec<String> {
            let lines = trace_lines(&m.run(&format!("cat {root}trace")));
            lines.into_iter().filter(|l| l.event == "command").map(|l| l.fields).collect()
        };
        m.run(&format!("echo > {root}trace"));
        m.run(&format!("echo 1 > {command}/enable"));
        m.run(&format!(
            "echo 'disable_event:shell:command if line ~ \"echo stop*\"' > {command}/trigger"
        ));
        for line in ["echo go", "echo stop-here", "echo after"] {
            m.run(line);
        }
        assert_eq!(cat(&mut m, &format!("{command}/enable")), "0*", "{root}");
        m.run(&format!("echo '!disable_event:shell:command' > {command}/trigger"));
        m.run(&format!(
            "echo 'enable_event:shell:command if line ~ \"echo start*\"' > {command}/trigger"
        ));
        for line in ["echo quiet", "echo start-here", "echo later"] {
            m.run(line);
        }
        m.run(&format!("echo '!enable_event:shell:command' > {command}/trigger"));
        m.run(&format!("echo 'disable_event:shell:command' > {command}/trigger"));
        m.run("echo dropped-too");
        assert_eq!(cat(&mut m, &format!("{command}/enable")), "0*", "{root}");
        let recorded = lines(&mut m);
        let shown = |line: &str| recorded.iter().any(|l| l == line);
        assert!(
            shown("echo go") && shown("echo start-here") && shown("echo later"),
            "{root}{recorded:?}"
        );
        for line in ["echo stop-here", "echo after", "echo quiet", "echo dropped-too"] {
            assert!(!shown(line), "{root}: {line} was recorded: {recorded:?}");
        }
        m.run(&format!("echo '!disable_event:shell:command' > {command}/trigger"));
        m.run(&format!("echo 0 > {command}/enable"));
    }
}

#[test]
fn triggers_read_and_refuse_as_linux_selftests_expect() {
    let mut m = boot();
    for root in ROOTS {
        let tick = format!("{root}events/timer/tick/enable");
        let command = format!("{root}events/shell/command/enable");
        let trigger = format!("{root}events/shell/command/trigger");
        let none = cat(&mut m, &trigger);
        let recorded = cat(&mut m, &command);
        // Every shell command fires `shell:command` first: the `cat` that reads the
        // file fires the trigger.
        m.run(&format!("echo 0 > {tick}"));
        m.run(&format!("echo 'enable_event:timer:tick' > {trigger}"));
        assert_eq!(cat(&mut m, &tick), "1*", "{root}");
        assert_eq!(cat(&mut m, &command), format!("{recorded}*"), "{root}");
        m.run(&format!("echo '!enable_event:timer:tick' > {trigger}"));
        assert_eq!(cat(&mut m, &tick), "1", "{root}");
        assert_eq!(cat(&mut m, &command), recorded, "{root}");

        m.run(&format!("echo 'disable_event:timer:tick' > {trigger}"));
        assert_eq!(cat(&mut m, &tick), "0*", "{root}");
        m.run(&format!("echo '!disable_event:timer:tick' > {trigger}"));
        assert_eq!(cat(&mut m, &tick), "0", "{root}");

        for bad in ["enable_event:nogroup:noevent", "disable_event+1"] {
            let out = m.run(&format!("echo '{bad}' > {trigger}"));
            assert!(out.contains("Invalid argument"), "{root}{bad}: {out}");
        }
        m.run(&format!("echo 'enable_event:timer:tick' > {trigger}"));
        for again in ["enable_event:timer:tick", "disable_event:timer:tick"] {
            let out = m.run(&format!("echo '{again}' > {trigger}"));
            assert!(
                out.contains(": File exists (") && out.contains("already"),
                "{root}{again}: {out}"
            );
        }
        assert_eq!(cat(&mut m, &trigger), "enable_event:timer:tick:unlimited", "{root}");
        m.run(&format!("echo '!disable_event:timer:tick' > {trigger}"));
        assert_eq!(cat(&mut m, &trigger), none, "{root}: `!` removes either of the pair");
        m.run(&format!("echo 0 > {tick}"));

        // `>` opens the file truncated, as Linux's does: the event's histograms go
        // and the line applies; other triggers stay; `>>` adds. A refused line
        // removes nothing; a blank one only removes.
        m.run(&format!("echo 'hist:keys=line:size=128' > {trigger}"));
        m.run(&format!("echo 'traceon' >> {trigger}"));
        m.run(&format!("echo 'hist:keys=common_pid:size=128' >> {trigger}"));
        assert_eq!(cat(&mut m, &trigger).lines().count(), 3, "{root}");
        m.run(&format!("echo 'hist:keys=common_cpu:size=128' > {trigger}"));
        let replaced = "traceon:unlimited\n\
                        hist:keys=common_cpu:vals=hitcount:sort=hitcount:size=128 [active]";
        assert_eq!(cat(&mut m, &trigger), replaced, "{root}");
        // `val=` names the values as `vals=` does; a size rounds up to a power of two.
        m.run(&format!("echo 'hist:keys=common_cpu:val=hitcount:size=200' > {trigger}"));
        let rounded = replaced.replace("size=128", "size=256");
        assert_eq!(cat(&mut m, &trigger), rounded, "{root}");
        m.run(&format!("echo 'hist:keys=common_cpu:size=128' > {trigger}"));
        assert_eq!(cat(&mut m, &trigger), replaced, "{root}");
        let out = m.run(&format!("echo 'hist:keys=nope' > {trigger}"));
        assert!(out.contains("Invalid argument"), "{root}: {out}");
        assert_eq!(cat(&mut m, &trigger), replaced, "{root}: a refused line removes nothing");
        m.run(&format!("echo '' > {trigger}"));
        assert_eq!(cat(&mut m, &trigger), "traceon:unlimited", "{root}");
        m.run(&format!("echo '!traceon' > {trigger}"));
        assert_eq!(cat(&mut m, &trigger), none, "{root}");

        // traceon and traceoff: one of the two.
        m.run(&format!("echo 'traceon' > {trigger}"));
        for again in ["traceon", "traceoff"] {
            let out = m.run(&format!("echo '{again}' > {trigger}"));
            assert!(
                out.contains(": File exists (") && out.contains("already"),
                "{root}{again}: {out}"
            );
        }
        m.run(&format!("echo '!traceoff' > {trigger}"));
        assert_eq!(cat(&mut m, &trigger), none, "{root}");

        // Conditions: a field alone, `=`, a word for a number, a field for a value.
        for bad in ["if a", "if common_pid=0", "if common_pid==b", "if common_pid == line"] {
            let out = m.run(&format!("echo 'traceoff {bad}' > {trigger}"));
            assert!(out.contains("Invalid argument"), "{root}{bad}: {out}");
        }
        // The shell's `common_pid` is 1: these never fire.
        for good in ["common_pid == 0", "common_pid <= 0", "common_pid >= 2 && line ~ \"x*\""] {
            m.run(&format!("echo 'traceoff if {good}' > {trigger}"));
            assert_eq!(cat(&mut m, &trigger), format!("traceoff:unlimited if {good}"), "{root}");
            m.run(&format!("echo '!traceoff' > {trigger}"));
        }
        assert_eq!(cat(&mut m, &trigger), none, "{root}");
        assert_eq!(cat(&mut m, &format!("{root}tracing_on")), "1", "{root}");
    }
}

/// `show_event_filters` and `show_event_triggers` list, per instance, every event
/// that has a filter or triggers: `system:event`, a tab, then a line of what the
/// event's own `filter` or `trigger` file shows. An instance lists its own only;
/// a filter or trigger removed leaves the list; writes are refused.
#[test]
fn show_event_filters_and_triggers_list_every_events_settings() {
    let mut m = boot();
    for root in ROOTS {
        assert_eq!(m.run(&format!("cat {root}show_event_filters")), "", "{root}");
        assert_eq!(m.run(&format!("cat {root}show_event_triggers")), "", "{root}");
    }
    let entry = "instances/f/events/irq/irq_handler_entry";
    m.run(&format!("echo 'irq == 48' > {entry}/filter"));
    m.run("echo 'tick > 5' > instances/f/events/timer/tick/filter");
    // A marker's event takes a filter too, though `set_event` does not list it.
    m.run("echo 'buf ~ \"x*\"' > instances/f/events/ftrace/print/filter");
    m.run(&format!("echo 'stacktrace:2 if irq == 241' > {entry}/trigger"));
    m.run(&format!("echo 'hist:keys=irq' >> {entry}/trigger"));
    m.run("echo 'traceoff' > instances/f/events/irq/irq_handler_exit/trigger");
    let filters = m.run("cat instances/f/show_event_filters");
    let mut expected = String::new();
    for (event, file) in [
        ("irq:irq_handler_entry", format!("{entry}/filter")),
        ("timer:tick", "instances/f/events/timer/tick/filter".into()),
        ("ftrace:print", "instances/f/events/ftrace/print/filter".into()),
    ] {
        expected.push_str(&format!("{event}\t{}\n", cat(&mut m, &file)));
    }
    let sorted = |text: &str| {
        let mut lines: Vec<&str> = text.lines().collect();
        lines.sort();
        lines.join("\n")
    };
    assert_eq!(sorted(&filters), sorted(&expected));
    let mut expected = String::new();
    for (event, file) in [
        ("irq:irq_handler_entry", format!("{entry}/trigger")),
        ("irq:irq_handler_exit", "instances/f/events/irq/irq_handler_exit/trigger".into()),
    ] {
        for line in m.run(&format!("cat {file}")).lines() {
            expected.push_str(&format!("{event}\t{line}\n"));
        }
    }
    let triggers = m.run("cat instances/f/show_event_triggers");
    assert_eq!(triggers.lines().count(), 3, "{triggers}");
    assert_eq!(triggers, expected);
    // The top level has none of the instance's.
    assert_eq!(m.run("cat show_event_filters"), "");
    assert_eq!(m.run("cat show_event_triggers"), "");
    // Removed, they leave the lists.
    m.run(&format!("echo 0 > {entry}/filter"));
    m.run(&format!("echo '!stacktrace:2 if irq == 241' >> {entry}/trigger"));
    m.run("echo '!traceoff' >> instances/f/events/irq/irq_handler_exit/trigger");
    m.run("echo 0 > instances/f/events/ftrace/print/filter");
    let filters = m.run("cat instances/f/show_event_filters");
    assert!(filters.starts_with("timer:tick\t") && filters.lines().count() == 1, "{filters}");
    let triggers = m.run("cat instances/f/show_event_triggers");
    assert!(triggers.starts_with("irq:irq_handler_entry\thist:keys=irq"), "{triggers}");
    assert_eq!(triggers.lines().count(), 1, "{triggers}");
    for file in ["show_event_filters", "instances/f/show_event_triggers"] {
        let out = m.run(&format!("echo x > {file}"));
        assert!(out.contains("Permission denied"), "{file}: {out}");
    }
    let listing = m.run("ls instances/f");
    assert!(listing.contains("show_event_filters") && listing.contains("show_event_triggers"));
}

/// trace_marker's event, at the top level and in an instance (where no event is
/// enabled): every marker is recorded, `set_event` cannot turn it off, its filter
/// applies, and a `snapshot` trigger swaps buffers at each marker, as Linux's
/// `trigger-trace-marker-snapshot.tc` expects: the odd markers end in the live
/// buffer, the even ones in the snapshot; once the snapshot is freed, the trigger
/// marks the trace and stops recording.
#[test]
fn markers_are_always_recorded_and_take_filters_and_triggers() {
    let mut m = boot();
    for root in ROOTS {
        let print = format!("{root}events/ftrace/print");
        assert_eq!(cat(&mut m, &format!("{print}/enable")), "1", "{root}");
        let out = m.run(&format!("echo 0 > {print}/enable"));
        assert!(out.contains("written by the tracer itself"), "{root}: {out}");
        m.run(&format!("echo 'buf ~ \"keep*\"' > {print}/filter"));
        m.run(&format!("echo 'keep 1' > {root}trace_marker"));
        m.run(&format!("echo 'drop 1' > {root}trace_marker"));
        assert_eq!(markers(&mut m, &format!("{root}trace")), ["keep 1"], "{root}");
        m.run(&format!("echo 0 > {print}/filter"));

        m.run(&format!("echo > {root}trace"));
        m.run(&format!("echo snapshot > {print}/trigger"));
        assert!(m.run(&format!("cat {root}snapshot")).contains("Snapshot is allocated"));
        for i in 1..=10 {
            m.run(&format!("echo 'hello >{i}<' > {root}trace_marker"));
        }
        let text = |i: u32| format!("hello >{i}<");
        let odd: Vec<String> = (1..=10).filter(|i| i % 2 == 1).map(text).collect();
        let even: Vec<String> = (1..=10).filter(|i| i % 2 == 0).map(text).collect();
        assert_eq!(markers(&mut m, &format!("{root}trace")), odd, "{root}");
        assert_eq!(markers(&mut m, &format!("{root}snapshot")), even, "{root}");

        // The snapshot freed under its trigger: as ftrace, the trigger marks the
        // trace and stops recording, so the window stays in the live buffer.
        m.run(&format!("echo 0 > {root}snapshot"));
        m.run(&format!("echo 'hello >11<' > {root}trace_marker"));
        m.run(&format!("echo 'hello >12<' > {root}trace_marker"));
        let mut expected = odd.clone();
        expected.extend(
            ["hello >11<", "*** SNAPSHOT NOT ALLOCATED ***", "*** stopping trace here!   ***"]
                .map(String::from),
        );
        assert_eq!(markers(&mut m, &format!("{root}trace")), expected, "{root}");
        assert_eq!(cat(&mut m, &format!("{root}tracing_on")), "0", "{root}");
        m.run(&format!("echo '!snapshot' > {print}/trigger"));
        m.run(&format!("echo 0 > {root}snapshot"));
        m.run(&format!("echo 1 > {root}tracing_on"));
        // Counted, its count is spent as ftrace's: it stops recording once, and
        // recording turned on again stays on.
        m.run(&format!("echo > {root}trace"));
        assert_eq!(m.run(&format!("echo snapshot:1 > {print}/trigger")), "");
        m.run(&format!("echo 0 > {root}snapshot"));
        m.run(&format!("echo 'hello >13<' > {root}trace_marker"));
        assert_eq!(cat(&mut m, &format!("{root}tracing_on")), "0", "{root}");
        assert_eq!(cat(&mut m, &format!("{print}/trigger")), "snapshot:count=0", "{root}");
        m.run(&format!("echo 1 > {root}tracing_on"));
        m.run(&format!("echo 'hello >14<' > {root}trace_marker"));
        assert_eq!(cat(&mut m, &format!("{root}tracing_on")), "1", "{root}");
        let stopped =
            ["hello >13<", "*** SNAPSHOT NOT ALLOCATED ***", "*** stopping trace here!   ***"];
        let mut expected = stopped.map(String::from).to_vec();
        expected.push("hello >14<".to_string());
        assert_eq!(markers(&mut m, &format!("{root}trace")), expected, "{root}");
        m.run(&format!("echo '!snapshot:1' > {print}/trigger"));
        m.run(&format!("echo 0 > {root}snapshot"));
    }
}

/// `options/copy_trace_marker`: a marker written at the top level goes into every
/// instance with the option on (the top level's is on by default, an instance's
/// off), in turn; with none on the write is refused with ENODEV. An instance's own
/// `trace_marker` writes only there.
#[test]
fn copy_trace_marker_sends_the_top_levels_markers_into_instances() {
    let mut m = boot();
    let marks = |m: &mut Machine, root: &str| markers(m, &format!("{root}trace"));
    let option = "options/copy_trace_marker";
    assert_eq!(cat(&mut m, option), "1");
    assert_eq!(cat(&mut m, &format!("instances/f/{option}")), "0");
    assert!(m.run("cat instances/f/trace_options").contains("nocopy_trace_marker\n"));
    m.run("echo 'top only' > trace_marker");
    m.run(&format!("echo 1 > instances/f/{option}"));
    m.run("echo 'both' > trace_marker");
    m.run("echo 'f alone' > instances/f/trace_marker");
    m.run(&format!("echo 0 > {option}"));
    m.run("echo 'copied only' > trace_marker");
    assert_eq!(marks(&mut m, ""), ["top only", "both"]);
    assert_eq!(marks(&mut m, "instances/f/"), ["both", "f alone", "copied only"]);
    // The raw marker is copied as well.
    m.run("echo 'abcdraw' > trace_marker_raw");
    let raw = |m: &mut Machine, root: &str| {
        let trace = m.run(&format!("cat {root}trace"));
        trace.lines().any(|l| l.ends_with(": # 64636261 buf: 72 61 77"))
    };
    assert!(raw(&mut m, "instances/f/") && !raw(&mut m, ""));
    // An instance copying markers with its recording off refuses the write.
    m.run("echo 0 > instances/f/tracing_on");
    let out = m.run("echo 'off' > trace_marker");
    assert!(out.contains("Bad file descriptor"), "{out}");
    m.run("echo 1 > instances/f/tracing_on");
    // No instance copies them: refused, nothing recorded.
    m.run("echo nocopy_trace_marker > instances/f/trace_options");
    let out = m.run("echo 'nowhere' > trace_marker");
    assert!(out.contains("No such device"), "{out}");
    assert_eq!(marks(&mut m, "instances/f/").last().map(String::as_str), Some("copied only"));
    assert_eq!(marks(&mut m, ""), ["top only", "both"]);
    m.run("echo copy_trace_marker > trace_options");
    m.run("echo 'back' > trace_marker");
    assert_eq!(marks(&mut m, ""), ["top only", "both", "back"]);
}

/// `events/SYS/EVENT/inject`, at the top level and in an instance: a line of
/// `FIELD=VALUE` records the event there alone, as its tracepoint would (fields not
/// named are 0), through its filter and triggers; refused with the position and the
/// reason (in `error_log` too) for bad lines, and while the event is not enabled;
/// the file cannot be read.
#[test]
fn inject_records_an_event_by_hand_through_its_filter_and_triggers() {
    let mut m = boot();
    let bench = |m: &mut Machine, root: &str| -> Vec<String> {
        let lines = trace_lines(&m.run(&format!("cat {root}trace")));
        lines.into_iter().filter(|l| l.event == "event").map(|l| l.fields).collect()
    };
    for root in ROOTS {
        let other = if root.is_empty() { ROOTS[1] } else { ROOTS[0] };
        let inject = format!("{root}events/bench/event/inject");
        let elsewhere = bench(&mut m, other);
        let out = m.run(&format!("echo 'a=1' > {inject}"));
        assert!(out.contains("(the event is not enabled in this instance)"), "{root}: {out}");
        assert_eq!(m.run(&format!("echo bench:event > {root}set_event")), "");
        assert_eq!(m.run(&format!("echo 'a=1 b=0x10' > {inject}")), "");
        assert_eq!(m.run(&format!("echo 'b=2' > {inject}")), "");
        assert_eq!(bench(&mut m, root), ["a=1 b=16", "a=0 b=2"], "{root}");
        assert_eq!(bench(&mut m, other), elsewhere, "{root}: this instance alone");
        let out = m.run(&format!("cat {inject}"));
        assert!(out.contains("Permission denied (write-only file)"), "{out}");
        for (line, error) in [
            ("a=x", "parse error at 2: an unsigned integer that fits the field"),
            ("a=1 c=2", "parse error at 4: no such field of the event (see its format)"),
            ("a=1 a=2", "parse error at 4: field given twice"),
            ("a", "parse error at 0: expected FIELD=VALUE"),
        ] {
            let out = m.run(&format!("echo '{line}' > {inject}"));
            assert!(out.contains(&format!("Invalid argument ({error})")), "{line}: {out}");
        }
        let log = m.run(&format!("cat {root}error_log"));
        assert!(log.contains("  Command: a=1 c=2\n               ^"), "{log}");
        // Its filter and its triggers apply.
        m.run(&format!("echo 'a > 5' > {root}events/bench/event/filter"));
        m.run(&format!("echo 'traceoff if b == 9' > {root}events/bench/event/trigger"));
        assert_eq!(m.run(&format!("echo 'a=3' > {inject}")), "");
        assert_eq!(m.run(&format!("echo 'a=7 b=8' > {inject}")), "");
        assert_eq!(cat(&mut m, &format!("{root}tracing_on")), "1");
        assert_eq!(m.run(&format!("echo 'a=8 b=9' > {inject}")), "");
        assert_eq!(cat(&mut m, &format!("{root}tracing_on")), "0", "{root}: the trigger fired");
        let all = ["a=1 b=16", "a=0 b=2", "a=7 b=8", "a=8 b=9"];
        assert_eq!(bench(&mut m, root), all, "{root}: the bad lines recorded nothing");
        m.run(&format!("echo '!traceoff if b == 9' > {root}events/bench/event/trigger"));
        m.run(&format!("echo 0 > {root}events/bench/event/filter"));
        m.run(&format!("echo 1 > {root}tracing_on"));
        m.run(&format!("echo '!bench:event' >> {root}set_event"));
    }
    // A string field takes a word or a quoted text; events set_event does not take
    // are refused.
    let inject = "events/shell/command/inject";
    m.run("echo 1 > events/shell/command/enable");
    assert_eq!(m.run(&format!("echo 'line=\"a b\"' > {inject}")), "");
    let commands = trace_lines(&m.run("cat trace"));
    assert!(commands.iter().any(|l| l.event == "command" && l.fields == "a b"));
    for (line, file, error) in [
        ("line=\"open", inject, "parse error at 5: a quoted value has no closing \""),
        ("buf=x", "events/ftrace/print/inject", "only tracepoints that set_event takes"),
    ] {
        let out = m.run(&format!("echo '{line}' > {file}"));
        assert!(out.contains(&format!("Invalid argument ({error}")), "{line}: {out}");
    }
}

/// The first `kernel_stack` event of a trace's text: its depth and its ` => `
/// frame lines.
fn stack_frames(text: &str) -> (usize, Vec<&str>) {
    let mut lines = text.lines().skip_while(|l| !l.contains(": kernel_stack: depth="));
    let head = lines.next().unwrap_or_else(|| panic!("no stack in:\n{text}"));
    let depth = head.rsplit_once("depth=").unwrap().1.parse().unwrap();
    (depth, lines.take_while(|l| l.starts_with(" => ")).map(|l| &l[4..]).collect())
}

/// Every frame is code of the kernel (none left as an address), none is the
/// tracer's own, and the first is the handler of the serial interrupt, where the
/// event was hit.
fn assert_serial_interrupt_stack(text: &str) {
    let (depth, frames) = stack_frames(text);
    // The serial interrupt's handler and the code it interrupted.
    assert!(depth >= 2, "{text}");
    assert_eq!(frames.len(), depth, "{text}");
    assert!(frames.iter().all(|f| f.contains("+0x") && !f.starts_with("0x")), "{text}");
    assert!(
        frames.iter().all(|f| !f.starts_with("trace::") && !f.starts_with("<trace::")),
        "the tracer's frames are left out:\n{text}"
    );
    assert!(
        frames[0].starts_with("kernel::arch::idt::serial+0x"),
        "the stack starts at the serial handler, which hit the event:\n{text}"
    );
}

#[test]
fn stacktrace_records_the_interrupted_call_chain_with_symbols() {
    let mut m = boot();
    for root in ROOTS {
        let trigger = format!("{root}events/irq/irq_handler_entry/trigger");
        m.run(&format!("echo 'stacktrace:1 if irq == 49' > {trigger}"));
        // The kernel prints the frames with the symbol table the image carries.
        assert_serial_interrupt_stack(&m.run(&format!("cat {root}trace")));
        assert_eq!(cat(&mut m, &trigger), "stacktrace:count=0 if irq == 49");
    }
}

/// `options/stacktrace`: while on, each event the instance records is followed by
/// the call chain that hit it (the shell's commands here, a string field's event:
/// the path of events larger than two words), with the tracer's own frames left
/// out; a marker takes none, another instance none, and off, none.
#[test]
fn the_stacktrace_option_follows_each_event_with_the_chain_that_hit_it() {
    let mut m = boot();
    for (root, other) in [(ROOTS[0], ROOTS[1]), (ROOTS[1], ROOTS[0])] {
        assert_eq!(cat(&mut m, &format!("{root}options/stacktrace")), "0", "{root}");
        m.run(&format!("echo shell:command > {root}set_event"));
        m.run(&format!("echo shell:command > {other}set_event"));
        m.run(&format!("echo > {root}trace"));
        m.run(&format!("echo > {other}trace"));
        assert_eq!(m.run(&format!("echo 1 > {root}options/stacktrace")), "");
        assert_eq!(cat(&mut m, &format!("{root}options/stacktrace")), "1", "{root}");
        m.run(&format!("echo stacked > {root}trace_marker"));
        m.run("cd events");
        m.run("cd /");
        assert_eq!(m.run(&format!("echo 0 > {root}options/stacktrace")), "");
        m.run("pwd");
        let error = m.run(&format!("echo 2 > {root}options/stacktrace"));
        assert!(error.contains("Invalid argument (0 or 1)"), "{error}");

        let text = m.run(&format!("cat {root}trace"));
        let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        let after = |what: &str| {
            let at = lines.iter().position(|l| l.ends_with(what));
            let at = at.unwrap_or_else(|| panic!("{root}: no `{what}` line:\n{text}"));
            lines.get(at + 1).copied().unwrap_or_default()
        };
        // Each command recorded while the option was on, and only those.
        for command in ["echo stacked > trace_marker", "cd events", "cd /"] {
            let command = command.replace("trace_marker", &format!("{root}trace_marker"));
            assert!(after(&format!("command: {command}")).contains(": kernel_stack: depth="));
        }
        assert!(!after("tracing_mark_write: stacked").contains("kernel_stack"), "{text}");
        assert!(!after("command: pwd").contains("kernel_stack"), "{text}");
        let (depth, frames) = stack_frames(&text);
        assert!(depth >= 2 && frames.len() == depth, "{text}");
        assert!(frames.iter().all(|f| f.contains("+0x") && !f.starts_with("0x")), "{text}");
        assert!(
            frames.iter().all(|f| !f.starts_with("trace::") && !f.starts_with("<trace::")),
            "the tracer's frames are left out:\n{text}"
        );
        assert!(frames.iter().any(|f| f.starts_with("kernel::shell::run+0x")), "{text}");
        let elsewhere = m.run(&format!("cat {other}trace"));
        assert!(elsewhere.contains("command: cd events"), "{other}: {elsewhere}");
        assert!(!elsewhere.contains("kernel_stack"), "the option is {root}'s:\n{elsewhere}");
    }
}

/// Dumps the top-level instance now and returns what `report --elf` prints of it
/// (with the kernel ELF the image was built from).
pub(crate) fn top_level_report_with_elf(m: &mut Machine) -> String {
    m.run("dump instance top");
    let dumps = m.dumps();
    let dump = dumps.last().expect("the dump");
    assert!(dump.problems.is_empty(), "{:?}", dump.problems);
    let symbols = report::Symbols::read(std::path::Path::new(boot::KERNEL_ELF)).unwrap();
    // The dump names its kernel, and the ELF is that kernel.
    assert!(dump.symbols.is_some(), "the dump carries its kernel's fingerprint");
    symbols.check(dump.symbols).unwrap();
    let mut trace = dump.sections().into_iter().find(|t| t.instance == "top").unwrap();
    symbols.symbolize(&mut trace);
    let mut out = Vec::new();
    report::write_text(&trace, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn report_elf_names_the_frames_the_kernel_names() {
    let mut m = Machine::boot();
    let trigger = "events/irq/irq_handler_entry/trigger";
    // The key typed next records the serial interrupt's stack.
    m.run(&format!("echo 'stacktrace:1 if irq == 49' > {trigger}"));
    assert_eq!(cat(&mut m, trigger), "stacktrace:count=0 if irq == 49");
    let kernel = m.run("cat trace");
    let host = top_level_report_with_elf(&mut m);
    assert_serial_interrupt_stack(&host);
    assert_eq!(stack_frames(&host), stack_frames(&kernel), "host:\n{host}\nkernel:\n{kernel}");
}

/// The first entries the `hist` file at `path` shows, read again (a bounded number
/// of times: each read is a command, during which events come) until it has some.
fn first_entries(m: &mut Machine, path: &str) -> Vec<(String, u64)> {
    let entries = (0..300).map(|_| hist(m, path).0).find(|entries| !entries.is_empty());
    entries.unwrap_or_else(|| panic!("{path}: no entry"))
}

/// A `hist` file's entries, as (key text, hitcount), and its totals (hits, entries,
/// dropped).
fn hist(m: &mut Machine, path: &str) -> (Vec<(String, u64)>, [u64; 3]) {
    let text = m.run(&format!("cat {path}"));
    let entries = text
        .lines()
        .filter_map(|l| {
            let (key, rest) = l.strip_prefix("{ ")?.split_once(" } hitcount:")?;
            let hits = rest.split_whitespace().next()?.parse().ok()?;
            Some((key.split_whitespace().collect::<Vec<_>>().join(" "), hits))
        })
        .collect();
    let total = |name: &str| -> u64 {
        let line = text.lines().find_map(|l| l.trim().strip_prefix(name));
        line.and_then(|v| v.trim().parse().ok()).unwrap_or_else(|| panic!("{name}: {text}"))
    };
    (entries, [total("Hits:"), total("Entries:"), total("Dropped:")])
}

/// `hist` triggers, at the top level and in an instance, as Linux's
/// `trigger-hist.tc` and `trigger-hist-syntax-errors.tc` use them: counts per key
/// from interrupt context (the serial and timer interrupts), compound keys with a
/// common field, string keys on trace_marker's event, sort, pause, continue,
/// clear, removal, and refusals that name the position in `error_log`.
/// Named histograms: `shell:command` and `ftrace:print` keyed on `COMM` under one
/// name add to one table, which both `hist` files show; another key under that
/// name is refused; in an instance the name is the instance's own.
#[test]
fn named_histograms_share_one_table_across_events() {
    let mut m = boot();
    for root in ROOTS {
        let (command, print) =
            (format!("{root}events/shell/command"), format!("{root}events/ftrace/print"));
        let line = "hist:name=by_task:keys=COMM";
        m.run(&format!("echo '{line}' > {command}/trigger"));
        m.run(&format!("echo '{line}' > {print}/trigger"));
        let read_back =
            "hist:name=by_task:keys=common_comm:vals=hitcount:sort=hitcount:size=2048 [active]";
        assert_eq!(cat(&mut m, &format!("{print}/trigger")), read_back, "{root}");
        // A command line fires shell:command: one hit for each line since the first
        // trigger (the second trigger's, the `cat`); a marker write fires
        // ftrace:print too: two hits each; then one for the `cat` reading the table.
        for _ in 0..2 {
            m.run(&format!("echo marked > {root}trace_marker"));
        }
        let (entries, [hits, ..]) = hist(&mut m, &format!("{command}/hist"));
        assert_eq!((entries, hits), (vec![("common_comm: shell".to_string(), 7)], 7), "{root}");
        let (entries, _) = hist(&mut m, &format!("{print}/hist"));
        assert_eq!(entries, [("common_comm: shell".to_string(), 8)], "{root}: the same table");
        let out = m.run(&format!("echo 'hist:name=by_task:keys=CPU' > {print}/trigger"));
        assert!(out.contains("a histogram of that name has other keys or values"), "{root}: {out}");
        let out = m.run(&format!("echo 'hist:name=by-task:keys=COMM' > {print}/trigger"));
        assert!(out.contains("letters, digits and _"), "{root}: {out}");
        m.run(&format!("echo '!{line}' > {command}/trigger"));
        m.run(&format!("echo '!{line}' > {print}/trigger"));
        assert_eq!(m.run(&format!("cat {print}/hist")).trim(), "", "{root}");
    }
}

/// Inter-event histograms, as Linux's `trigger-inter-event` selftests use them
/// (without synthetic events): `irq_handler_entry` saves the time per vector and
/// CPU in a variable, `irq_handler_exit` subtracts it and sums each handler's time
/// from interrupt context; each end pairs with the start of its key, once, and
/// `onmax` keeps each key's longest with the CPU that ran it and snapshots the trace
/// at the longest of all. A histogram whose variable another reads is not removed;
/// a reference to a variable no histogram defines is refused with the rule in
/// `error_log`.
#[test]
fn hist_variables_time_each_interrupt_handler() {
    let mut m = boot();
    for root in ROOTS {
        let entry = format!("{root}events/irq/irq_handler_entry");
        let exit = format!("{root}events/irq/irq_handler_exit");
        let start = "hist:keys=irq,CPU:ts0=common_timestamp";
        let end = "hist:keys=irq,CPU:vals=$lat:lat=common_timestamp-$ts0:sort=irq:\
                   onmax($lat).save(common_pid):onmax($lat).snapshot()";
        assert_eq!(m.run(&format!("echo '{start}' > {entry}/trigger")), "", "{root}");
        // Time in µs less the start's, in ns: refused, as ftrace's.
        let mixed = "hist:keys=irq,CPU:lat=common_timestamp.usecs-$ts0";
        let said = m.run(&format!("echo '{mixed}' > {exit}/trigger"));
        assert!(said.contains("operands count time in different units"), "{root}{said}");
        assert_eq!(m.run(&format!("echo '{end}' > {exit}/trigger")), "", "{root}");
        let shown = "hist:keys=irq,common_cpu:vals=hitcount,$lat:lat=common_timestamp-$ts0:\
                     sort=irq:size=2048:onmax($lat).save(common_pid):onmax($lat).snapshot() \
                     [active]";
        assert_eq!(cat(&mut m, &format!("{exit}/trigger")), shown, "{root}");
        // Polled: ticks come at the timer's pace.
        let timed = (0..300)
            .map(|_| m.run(&format!("cat {exit}/hist")))
            .find(|text| text.contains("{ irq:         48, common_cpu:"))
            .unwrap_or_else(|| panic!("{root}: no timer interrupt timed"));
        let (starts, _) = hist(&mut m, &format!("{entry}/hist"));
        let mut rows = 0;
        let mut longest = 0;
        let lines: Vec<&str> = timed.lines().collect();
        for (i, line) in lines.iter().enumerate().filter(|(_, l)| l.starts_with("{ irq:")) {
            let (key, rest) = line[2..].split_once(" } hitcount:").unwrap();
            let key = key.split_whitespace().collect::<Vec<_>>().join(" ");
            let (hits, sum) = rest.split_once("lat:").unwrap();
            let (hits, sum): (u64, u64) =
                (hits.trim().parse().unwrap(), sum.trim().parse().unwrap());
            // A handler's time: above nothing, and a duration, not a timestamp (a
            // tick is 10 ms; a loaded host may stop a virtual CPU for some).
            assert!(hits > 0 && sum >= hits && sum / hits < 100_000_000, "{root}{line}");
            // Each end paired with a start of its key, counted before it.
            let started = starts.iter().find(|(k, _)| *k == key).map(|(_, n)| *n);
            assert!(started.is_some_and(|n| n >= hits), "{root}{line}: {starts:?}");
            // The key's longest, with the task that ran it (the handler: pid 0).
            let max = lines[i + 1].strip_prefix("\tmax: ");
            let max = max.and_then(|m| m.trim_start().split_once("  "));
            let (max, saved) = max.unwrap_or_else(|| panic!("{root}: {timed}"));
            let max: u64 = max.trim().parse().unwrap();
            assert!(max > 0 && max <= sum && saved.trim() == "common_pid:          0", "{line}");
            longest = longest.max(max);
            rows += 1;
        }
        assert!(rows > 0, "{root}: {timed}");
        let taken = "\nSnapshot taken (see tracing/snapshot).  Details:\n\ttriggering value \
                     { onmax($lat) }:";
        let value = timed.split(taken).nth(1).unwrap_or_else(|| panic!("{root}: {timed}"));
        let value: u64 = value.split('\t').next().unwrap().trim().parse().unwrap();
        // The longest of all, as read before the file was (a later one may have
        // come between).
        assert!(value >= longest || timed.contains(&format!("max: {value:>10}")), "{timed}");
        // The snapshot holds the interrupts up to it.
        let snapshot = m.run(&format!("cat {root}snapshot"));
        assert!(!root.is_empty() || snapshot.contains(": irq_handler_exit: irq="), "{snapshot}");
        let out = m.run(&format!("echo '!{start}' > {entry}/trigger"));
        assert!(out.contains("another histogram reads a variable of this one"), "{root}{out}");
        let kept = "hist:keys=irq,common_cpu:vals=hitcount:ts0=common_timestamp:sort=hitcount";
        assert!(cat(&mut m, &format!("{entry}/trigger")).starts_with(kept), "{root}");
        // A second definition of ts0, on another event or with `>` on its own (the
        // first stays while it is read), is refused where it is written.
        let again = "hist:keys=irq:ts0=common_timestamp";
        for (file, redirect) in [(&exit, ">>"), (&entry, ">")] {
            let out = m.run(&format!("echo '{again}' {redirect} {file}/trigger"));
            assert!(out.contains("another histogram of this instance defines the variable"));
            let log = m.run(&format!("cat {root}error_log"));
            assert!(log.contains(&format!(
                "  Command: {again}\n{}^",
                " ".repeat(again.find(":ts0").unwrap() + 12)
            )));
        }
        assert_eq!(m.run(&format!("cat {entry}/trigger | grep -c hist:")), "1\n", "{root}");
        let nope = "hist:keys=irq,CPU:x=common_timestamp-$nope";
        let out = m.run(&format!("echo '{nope}' >> {exit}/trigger"));
        assert!(out.contains("no histogram of this instance defines the variable"), "{out}");
        let log = m.run(&format!("cat {root}error_log"));
        let caret = format!("  Command: {nope}\n{}^", " ".repeat(nope.find('$').unwrap() + 11));
        assert!(log.contains(&caret), "{root}: {log}");
        m.run(&format!("echo '!{end}' > {exit}/trigger"));
        assert_eq!(m.run(&format!("echo '!{start}' > {entry}/trigger")), "", "{root}");
        assert!(!m.run(&format!("cat {entry}/trigger {exit}/trigger")).contains("hist:"));
        // Two numbers are one, computed when the trigger is set, as ftrace's.
        assert_eq!(m.run(&format!("echo 'hist:keys=irq:c=16-8' > {entry}/trigger")), "");
        let folded = "hist:keys=irq:vals=hitcount:c=8:sort=hitcount";
        assert!(cat(&mut m, &format!("{entry}/trigger")).starts_with(folded), "{root}");
        assert_eq!(m.run(&format!("echo '!hist:keys=irq:c=8' > {entry}/trigger")), "");
        // As ftrace's selftest of expressions has them: `*` and `/` first, each
        // operator from the left, and errors where its caret is.
        for (expr, value) in [("16-8-4-2", 2), ("4+3*2-2", 8), ("4*3/2*2", 12)] {
            assert_eq!(m.run(&format!("echo 'hist:keys=irq:x={expr}' > {entry}/trigger")), "");
            let set = format!("hist:keys=irq:vals=hitcount:x={value}:sort=hitcount");
            assert!(cat(&mut m, &format!("{entry}/trigger")).starts_with(&set), "{root}{expr}");
            m.run(&format!("echo '!hist:keys=irq:x={value}' > {entry}/trigger"));
        }
        let dynamic = "hist:keys=irq:vals=$x:x=-(irq*2+1)";
        assert_eq!(m.run(&format!("echo '{dynamic}' > {entry}/trigger")), "");
        let shown = "hist:keys=irq:vals=hitcount,$x:x=-(irq*2+1):sort=hitcount";
        assert!(cat(&mut m, &format!("{entry}/trigger")).starts_with(shown), "{root}");
        m.run(&format!("echo '!{dynamic}' > {entry}/trigger"));
        for (expr, at, rule) in [
            ("32+10*3/20-4", "10*3", "at most 3 operators in an expression"),
            ("1+2+3+4+5", "1+2", "at most 3 operators in an expression"),
            ("-(1)+2", "1)", "unary minus not supported in sub-expressions"),
            ("3/0", "0", "division by zero"),
        ] {
            let line = format!("hist:keys=irq:x={expr}");
            assert!(m.run(&format!("echo '{line}' > {entry}/trigger")).contains(rule), "{expr}");
            let log = m.run(&format!("cat {root}error_log"));
            let pos = line.len() - expr.len() + expr.find(at).unwrap();
            let caret = format!("  Command: {line}\n{}^", " ".repeat(pos + 11));
            assert!(log.contains(&caret), "{root}{expr}: {log}");
        }
        // Time in µs against a number, which is not: at the line's start, as ftrace's.
        let line = "hist:keys=irq:x=common_timestamp.usecs-1";
        let said = m.run(&format!("echo '{line}' > {entry}/trigger"));
        assert!(said.contains("operands count time in different units"), "{root}{said}");
        let log = m.run(&format!("cat {root}error_log"));
        let caret = format!("  Command: {line}\n{}^", " ".repeat(11));
        assert!(log.contains(&caret), "{root}: {log}");
        assert!(!m.run(&format!("cat {entry}/trigger")).contains("hist:"), "{root}");
    }
}

/// A histogram's trigger line reads in Linux's order: its variables after the
/// values, joined by commas under one colon, then `sort` and `size`, then the
/// actions, then the filter; the `hist` file's header shows the same line, and
/// the line as read, after `!`, removes the histogram.
#[test]
fn hist_trigger_lines_list_variables_then_sort_size_and_actions() {
    let mut m = boot();
    for root in ROOTS {
        let entry = format!("{root}events/irq/irq_handler_entry");
        let exit = format!("{root}events/irq/irq_handler_exit");
        let start = "hist:keys=irq:ts0=common_timestamp.usecs,t1=common_timestamp";
        let end = "hist:keys=irq:lat=common_timestamp.usecs-$ts0:onmax($lat).save(common_pid):\
                   onchange($lat).snapshot() if irq == 48";
        assert_eq!(m.run(&format!("echo '{start}' > {entry}/trigger")), "", "{root}");
        assert_eq!(m.run(&format!("echo '{end}' > {exit}/trigger")), "", "{root}");
        let started = "hist:keys=irq:vals=hitcount:ts0=common_timestamp.usecs,t1=common_timestamp:\
                       sort=hitcount:size=2048";
        assert_eq!(cat(&mut m, &format!("{entry}/trigger")), format!("{started} [active]"));
        let ended = "hist:keys=irq:vals=hitcount:lat=common_timestamp.usecs-$ts0:\
                     sort=hitcount:size=2048:onmax($lat).save(common_pid):\
                     onchange($lat).snapshot() if irq == 48";
        assert_eq!(cat(&mut m, &format!("{exit}/trigger")), format!("{ended} [active]"));
        let hist = m.run(&format!("cat {exit}/hist"));
        assert!(hist.contains(&format!("# trigger info: {ended} [active]\n")), "{root}{hist}");
        assert_eq!(m.run(&format!("echo '!{ended}' >> {exit}/trigger")), "", "{root}");
        assert_eq!(m.run(&format!("echo '!{started}' >> {entry}/trigger")), "", "{root}");
        assert_eq!(cat(&mut m, &format!("{exit}/hist")), "", "{root}");
        assert_eq!(cat(&mut m, &format!("{entry}/hist")), "", "{root}");
        m.run(&format!("echo 0 > {root}snapshot"));
    }
}

#[test]
fn hist_triggers_count_by_key_from_any_context() {
    let mut m = boot();
    for root in ROOTS {
        let entry = format!("{root}events/irq/irq_handler_entry");
        m.run(&format!("echo 'hist:keys=irq,CPU:sort=irq' > {entry}/trigger"));
        // Polled: ticks come at the timer's pace.
        let ticked = (0..300).any(|_| {
            hist(&mut m, &format!("{entry}/hist")).0.iter().any(|(k, _)| k.starts_with("irq: 48,"))
        });
        assert!(ticked, "{root}");
        assert_eq!(
            cat(&mut m, &format!("{entry}/trigger")),
            "hist:keys=irq,common_cpu:vals=hitcount:sort=irq:size=2048 [active]"
        );
        let (entries, [hits, count, dropped]) = hist(&mut m, &format!("{entry}/hist"));
        // Keys typed raise vector 49 on CPU 0; every CPU's timer raises 48.
        assert!(entries.iter().any(|(k, _)| k == "irq: 49, common_cpu: 0"), "{root}{entries:?}");
        let irqs: Vec<&str> = entries.iter().filter_map(|(k, _)| k.split(',').next()).collect();
        assert!(irqs.is_sorted(), "{root}: sorted on irq: {irqs:?}");
        assert_eq!(count as usize, entries.len());
        assert_eq!(hits, entries.iter().map(|(_, n)| n).sum::<u64>() + dropped, "{root}");
        m.run(&format!("echo '!hist:keys=irq,CPU:sort=irq' > {entry}/trigger"));
        assert!(!m.run(&format!("cat {entry}/trigger")).contains("hist:"), "{root}");
        assert_eq!(m.run(&format!("cat {entry}/hist")).trim(), "", "{root}");

        // Tick intervals in buckets of 1 ms (the timer runs at 100 Hz: about 10 ms).
        let tick = format!("{root}events/timer/tick");
        m.run(&format!("echo 'hist:keys=interval_ns.buckets=1000000' > {tick}/trigger"));
        let ticks = first_entries(&mut m, &format!("{tick}/hist"));
        for (key, _) in &ticks {
            let range = key.strip_prefix("interval_ns: ~ ").unwrap_or_else(|| panic!("{key}"));
            let (lo, hi) = range.split_once('-').unwrap();
            let (lo, hi): (u64, u64) = (lo.parse().unwrap(), hi.parse().unwrap());
            assert_eq!((lo % 1_000_000, hi), (0, lo + 999_999), "{root}{key}");
        }
        m.run(&format!("echo '!hist:keys=interval_ns.buckets=1000000' > {tick}/trigger"));
        // The same intervals by power of two (10 ms reads 2^23; a loaded host stretches
        // some far past it, and the timer's next tick then comes early, as the
        // timer keeps its grid, so only the form is checked), and vectors in hex.
        m.run(&format!("echo 'hist:keys=interval_ns.log2' > {tick}/trigger"));
        let ticks = first_entries(&mut m, &format!("{tick}/hist"));
        for (key, _) in &ticks {
            let power = key.strip_prefix("interval_ns: ~ 2^").and_then(|p| p.parse::<u32>().ok());
            assert!(power.is_some(), "{root}{key}");
        }
        m.run(&format!("echo '!hist:keys=interval_ns.log2' > {tick}/trigger"));
        m.run(&format!("echo 'hist:keys=irq.hex' > {entry}/trigger"));
        let hexed = (0..300)
            .map(|_| hist(&mut m, &format!("{entry}/hist")).0)
            .find(|entries| entries.iter().any(|(k, _)| k == "irq: 30"));
        assert!(hexed.is_some(), "{root}: vector 48 as 30");
        m.run(&format!("echo '!hist:keys=irq.hex' > {entry}/trigger"));

        // The caller's stack as the key: where `shell:command` is emitted from,
        // named from the kernel's symbols.
        let command = format!("{root}events/shell/command");
        m.run(&format!("echo 'hist:keys=common_stacktrace' > {command}/trigger"));
        m.run("pwd");
        let text = m.run(&format!("cat {command}/hist"));
        let block = text.split("{ common_stacktrace:").nth(1).unwrap_or_else(|| panic!("{text}"));
        let (frames, hits) = block.split_once(" } hitcount:").unwrap();
        let frames: Vec<&str> = frames.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        assert!(frames[0].starts_with("kernel::shell::run+0x"), "{root}: {text}");
        assert_eq!(hits.split_whitespace().next(), Some("2"), "{root}: pwd, then this cat: {text}");
        m.run(&format!("echo '!hist:keys=common_stacktrace' > {command}/trigger"));

        // String keys on the markers, most frequent first.
        let print = format!("{root}events/ftrace/print");
        let spec = "hist:keys=buf:sort=hitcount.descending";
        m.run(&format!("echo '{spec}' > {print}/trigger"));
        for text in ["hello", "hello", "world", "hello"] {
            m.run(&format!("echo {text} > {root}trace_marker"));
        }
        let (entries, totals) = hist(&mut m, &format!("{print}/hist"));
        let expected = [("buf: hello".to_string(), 3), ("buf: world".to_string(), 1)];
        assert_eq!((entries, totals), (expected.to_vec(), [4, 2, 0]), "{root}");
        m.run(&format!("echo '{spec}:pause' >> {print}/trigger"));
        assert!(cat(&mut m, &format!("{print}/trigger")).ends_with("[paused]"), "{root}");
        m.run(&format!("echo world > {root}trace_marker"));
        assert_eq!(hist(&mut m, &format!("{print}/hist")).1, [4, 2, 0], "{root}: paused");
        m.run(&format!("echo '{spec}:cont' >> {print}/trigger"));
        m.run(&format!("echo world > {root}trace_marker"));
        assert_eq!(hist(&mut m, &format!("{print}/hist")).1, [5, 2, 0], "{root}");
        m.run(&format!("echo '{spec}:clear' >> {print}/trigger"));
        assert_eq!(hist(&mut m, &format!("{print}/hist")), (vec![], [0, 0, 0]), "{root}");
        let out = m.run(&format!("echo '{spec}' >> {print}/trigger"));
        assert!(out.contains(": File exists (") && out.contains("already"), "{root}: {out}");
        // Logged where ftrace logs it: under the histogram's event.
        let log = m.run(&format!("cat {root}error_log"));
        let logged = "] hist:ftrace:print: error: File exists (parse error at 0: the event \
                      has this trigger already";
        assert!(log.contains(logged), "{root}: {log}");
        m.run(&format!("echo '!{spec}' >> {print}/trigger"));
        // Without the histogram, `cont` and `clear` are refused, as Linux's.
        for op in ["cont", "clear"] {
            let out = m.run(&format!("echo '{spec}:{op}' >> {print}/trigger"));
            assert!(out.contains("no such trigger on the event"), "{root}{op}: {out}");
        }
        assert!(!cat(&mut m, &format!("{print}/trigger")).contains("hist:"), "{root}");

        // `.percent` and `.graph` show each entry's share and a bar, beside the
        // count but with `nohitcount`.
        let spec = "hist:keys=buf:vals=hitcount.percent:sort=hitcount.descending:nohitcount";
        m.run(&format!("echo '{spec}' > {print}/trigger"));
        for text in ["one", "three", "three", "three"] {
            m.run(&format!("echo {text} > {root}trace_marker"));
        }
        let text = m.run(&format!("cat {print}/hist"));
        let shares: Vec<&str> =
            text.lines().filter_map(|l| l.split_once("} ")).map(|l| l.1).collect();
        assert_eq!(shares, [" hitcount (%):  75.00", " hitcount (%):  25.00"], "{root}{text}");
        m.run(&format!("echo '!{spec}' >> {print}/trigger"));
        let spec = "hist:keys=buf:vals=hitcount.graph:sort=hitcount.descending";
        m.run(&format!("echo '{spec}' > {print}/trigger"));
        for text in ["one", "three", "three", "three", "three"] {
            m.run(&format!("echo {text} > {root}trace_marker"));
        }
        let text = m.run(&format!("cat {print}/hist"));
        let bars: Vec<&str> =
            text.lines().filter_map(|l| l.split_once("} ")).map(|l| l.1).collect();
        let bar = |counted, n| format!("hitcount: {counted:>10}  hitcount: {:<20}", "#".repeat(n));
        assert_eq!(bars, [bar(4, 20), bar(1, 5)], "{root}{text}");
        m.run(&format!("echo '!{spec}' >> {print}/trigger"));

        // `enable_hist` and `disable_hist`: each shell command continues, then
        // pauses, the markers' histogram (the command's event comes before it runs).
        m.run(&format!("echo 'hist:keys=buf:pause' > {print}/trigger"));
        m.run(&format!("echo before > {root}trace_marker"));
        m.run(&format!("echo 'enable_hist:ftrace:print:1' > {command}/trigger"));
        m.run(&format!("echo during > {root}trace_marker"));
        assert_eq!(cat(&mut m, &format!("{command}/trigger")), "enable_hist:ftrace:print:count=0");
        m.run(&format!("echo '!enable_hist:ftrace:print' > {command}/trigger"));
        m.run(&format!("echo 'disable_hist:ftrace:print' > {command}/trigger"));
        m.run(&format!("echo after > {root}trace_marker"));
        let expected = (vec![("buf: during".to_string(), 1)], [1, 1, 0]);
        assert_eq!(hist(&mut m, &format!("{print}/hist")), expected, "{root}");
        assert!(cat(&mut m, &format!("{print}/trigger")).ends_with("[paused]"), "{root}");
        m.run(&format!("echo '!disable_hist:ftrace:print' > {command}/trigger"));
        m.run(&format!("echo '!hist:keys=buf' > {print}/trigger"));

        // Refusals name the position, as the syntax-error selftest checks them.
        let kmalloc = format!("{root}events/kmem/kmalloc/trigger");
        for (bad, pos) in [
            ("hist:keys=common_pid:vals=size:sort=common_pid,junk", 47),
            ("hist:keys=common_pid:vals=size:sort=", 31),
            ("hist:keys=common_pid:vals=size:sort=common_pid,", 31),
            ("hist:keys=common_pid:vals=size:sort=common_pid.junk", 47),
            ("hist:keys=common_pid:vals=size,align:sort=common_pid,size,align", 37),
        ] {
            let out = m.run(&format!("echo '{bad}' > {kmalloc}"));
            assert!(out.contains("Invalid argument"), "{root}{bad}: {out}");
            let log = m.run(&format!("cat {root}error_log"));
            let lines: Vec<&str> = log.lines().collect();
            let at = lines.iter().rposition(|l| l.trim() == format!("Command: {bad}"));
            let at = at.unwrap_or_else(|| panic!("{root}{bad}: {log}"));
            let start = lines[at].find("hist:").unwrap();
            assert_eq!(lines[at + 1].find('^'), Some(start + pos), "{root}{bad}: {log}");
            assert!(lines[at - 1].contains("] hist:kmem:kmalloc: error: "), "{log}");
        }
        assert!(!m.run(&format!("cat {kmalloc}")).contains("hist:"), "{root}");
    }
}

/// `FIELD.function`: an address field filtered by the function it is in, looked up
/// by name in the kernel's symbols when the filter is set; in a trigger's condition
/// too. Bad names and operators are refused and change nothing.
#[test]
fn function_modifier_filters_addresses_by_their_function() {
    let mut m = boot();
    m.run("echo 0 > events/enable");
    let pwd = "kernel::shell::commands::pwd";
    m.run(&format!("echo {pwd} > set_ftrace_filter"));
    m.run("echo kernel::shell::commands::cpus >> set_ftrace_filter");
    assert_eq!(m.run("echo function > current_tracer"), "");
    let filter = "events/ftrace/function/filter";
    // With the filter `ip.function == VALUE`, `cpus` then `pwd` record `pwd` only.
    let only_pwd = |m: &mut Machine, value: &str| {
        assert_eq!(m.run(&format!("echo 'ip.function == {value}' > {filter}")), "");
        m.run("echo > trace");
        m.run("cpus");
        m.run("pwd");
        let trace = m.run("cat trace");
        let calls: Vec<&str> = trace.lines().filter(|l| l.contains(" <-")).collect();
        assert!(
            !calls.is_empty() && calls.iter().all(|l| l.contains(&format!(": {pwd} <-"))),
            "{value}: {trace}"
        );
    };
    // An address in the function stands for it: the entry site `functions` shows.
    let site = m.run(&format!("functions {pwd}"));
    let address = site.split_whitespace().next().unwrap_or_else(|| panic!("{site}"));
    only_pwd(&mut m, &format!("0x{}", address.trim_start_matches("0x")));
    only_pwd(&mut m, &format!("\"{pwd}\""));
    assert_eq!(cat(&mut m, filter), format!("ip.function == \"{pwd}\""));
    for (bad, reason) in [
        ("ip.function == 0x1", "no function of that name or at that address"),
        ("ip.function == \"kernel::nowhere\"", "no function of that name"),
        ("ip.function > \"kernel::shell::commands::pwd\"", "'.function' takes only == and !="),
        ("ip.sym == 1", "unknown field modifier"),
    ] {
        let out = m.run(&format!("echo '{bad}' > {filter}"));
        assert!(out.contains(reason), "{bad}: {out}");
        assert_eq!(cat(&mut m, filter), format!("ip.function == \"{pwd}\""), "{bad} changed it");
    }
    assert_eq!(m.run(&format!("echo 0 > {filter}")), "");
    // A trigger's condition: tracing stops when `cpus` is called, not `pwd`.
    let trigger = "traceoff if ip.function == \"kernel::shell::commands::cpus\"";
    assert_eq!(m.run(&format!("echo '{trigger}' > events/ftrace/function/trigger")), "");
    m.run("pwd");
    assert_eq!(cat(&mut m, "tracing_on"), "1");
    m.run("cpus");
    assert_eq!(cat(&mut m, "tracing_on"), "0");
    m.run("echo nop > current_tracer");
}
