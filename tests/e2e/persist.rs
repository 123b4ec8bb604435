//! The trace that survives a warm reboot: `instances/boot_map` records into the
//! persistent region, `reboot` (or a panic with `panic_reboot 1`) saves it, and the
//! next boot validates it into the read-only `instances/last_boot`.

use boot::qemu::{Config, Outcome};
use e2e::{Machine, trace_lines};

/// A machine whose resets reboot the guest with its memory kept.
fn rebooting() -> Machine {
    Machine::boot_with(Config { reboot: true, ..Config::default() })
}

/// The boot line about the previous boot's trace, from a boot's output.
fn previous_line(boot: &str) -> &str {
    boot.lines()
        .find(|l| {
            l.starts_with("trace: previous boot's trace") || l.starts_with("trace: no previous")
        })
        .unwrap_or_else(|| panic!("no boot line about the previous trace in:\n{boot}"))
}

/// Checks `last_boot`'s per-CPU statistics: balanced, and with events on every CPU.
fn stats_balanced_on_every_cpu(m: &mut Machine) {
    for cpu in 0..4 {
        let root = "instances/last_boot/";
        let written = m.cpu_stat(root, cpu, "written:");
        let entries = m.cpu_stat(root, cpu, "entries:");
        let overrun = m.cpu_stat(root, cpu, "overrun:");
        let dropped = m.cpu_stat(root, cpu, "dropped events:");
        let read = m.cpu_stat(root, cpu, "read events:");
        assert!(entries > 0, "cpu{cpu} of last_boot holds events");
        assert_eq!(written, entries + overrun + dropped + read, "cpu{cpu}'s stats balance");
    }
}

#[test]
fn a_marker_survives_a_reboot_in_last_boot_on_every_cpu() {
    let mut m = rebooting();
    let first = m.transcript();
    assert!(previous_line(&first).starts_with("trace: no previous boot's trace"), "{first}");
    assert!(!m.run("ls instances").contains("last_boot"));
    assert!(m.run("ls instances").contains("boot_map"));
    m.run("echo hello-before-reboot > instances/boot_map/trace_marker");
    let boot = m.run_to_reboot("reboot");
    let line = previous_line(&boot);
    assert!(line.starts_with("trace: previous boot's trace: "), "{line}");
    assert!(line.contains("on 4 CPU(s)") && line.contains("instances/last_boot"), "{line}");
    let trace = m.run("cat instances/last_boot/trace");
    let lines = trace_lines(&trace);
    let marker = lines
        .iter()
        .position(|l| l.fields.contains("hello-before-reboot"))
        .unwrap_or_else(|| panic!("the marker is in last_boot:\n{trace}"));
    assert!(marker > 0, "events before the marker are kept");
    for cpu in 0..4 {
        assert!(lines.iter().any(|l| l.cpu == cpu), "cpu{cpu} has events in last_boot");
        let per_cpu = m.run(&format!("cat instances/last_boot/per_cpu/cpu{cpu}/trace"));
        assert!(trace_lines(&per_cpu).iter().all(|l| l.cpu == cpu));
        assert!(!trace_lines(&per_cpu).is_empty());
    }
    stats_balanced_on_every_cpu(&mut m);
    // The format files work, the control files refuse writes.
    assert!(m.run("cat instances/last_boot/events/ftrace/print/format").contains("ID:"));
    let refused = m.run("echo 1 > instances/last_boot/tracing_on");
    assert!(refused.contains("last_boot holds the previous boot's trace: read-only"), "{refused}");
    let refused = m.run("echo hi > instances/last_boot/trace_marker");
    assert!(refused.contains("read-only"), "{refused}");
    // Nor is it cleared, whole or by CPU, or swapped into a snapshot.
    for file in ["trace", "per_cpu/cpu0/trace", "snapshot"] {
        let refused = m.run(&format!("echo 1 > instances/last_boot/{file}"));
        assert!(refused.contains("read-only"), "{file}: {refused}");
    }
    // A consuming read would empty it: the pipes refuse, and every record stays.
    for pipe in ["trace_pipe", "trace_pipe_raw", "per_cpu/cpu0/trace_pipe"] {
        let refused = m.run(&format!("cat instances/last_boot/{pipe}"));
        assert!(refused.contains("read-only"), "{pipe}: {refused}");
    }
    assert_eq!(trace_lines(&m.run("cat instances/last_boot/trace")).len(), lines.len());
    // boot_map records this boot from its start, and stays put.
    let now = m.run("cat instances/boot_map/trace");
    assert!(!now.contains("hello-before-reboot"));
    assert!(!trace_lines(&now).is_empty(), "boot_map records the new boot");
    // Its rings are the region's: they take no other size, clock or snapshot.
    for write in [
        "echo 1024 > instances/boot_map/buffer_size_kb",
        "echo 64 > instances/boot_map/per_cpu/cpu1/buffer_size_kb",
        "echo global > instances/boot_map/trace_clock",
        "echo 1 > instances/boot_map/snapshot",
    ] {
        let refused = m.run(write);
        assert!(refused.contains("persistent region"), "{write}: {refused}");
    }
    assert!(m.run("cat instances/boot_map/trace_clock").contains("[local]"));
    assert!(m.run("rmdir instances/boot_map").contains("persistent region"));
    // The dump includes last_boot.
    let dump = m.run("dump instance last_boot");
    assert!(dump.contains("hello-before-reboot"), "{dump}");
    // Removing it lets the previous boot's trace go; this boot's recording goes on.
    assert_eq!(m.run("rmdir instances/last_boot"), "");
    assert!(!m.run("ls instances").contains("last_boot"));
    m.run("echo after-last-boot > instances/boot_map/trace_marker");
    assert!(m.run("cat instances/boot_map/trace").contains("after-last-boot"));
}

/// `panic_reboot 0` takes the reboot back: a panic then ends the machine.
#[test]
fn panic_reboot_off_again_lets_a_panic_end_the_machine() {
    let mut m = rebooting();
    assert_eq!(m.run("panic_reboot 1"), "1\n");
    assert_eq!(m.run("panic_reboot 0"), "0\n");
    assert_eq!(m.run_to_exit("panic"), Outcome::KernelFailure);
    assert!(!m.transcript().contains("panic: trace saved"));
}

#[test]
fn a_panic_with_panic_reboot_leaves_its_events_in_last_boot() {
    let mut m = rebooting();
    assert_eq!(m.run("panic_reboot").trim(), "0");
    assert_eq!(m.run("panic_reboot 1").trim(), "1");
    m.run("echo just-before-the-panic > instances/boot_map/trace_marker");
    let boot = m.run_to_reboot("panic");
    assert!(boot.contains("panic: trace saved; rebooting"), "{boot}");
    let line = previous_line(&boot);
    assert!(line.starts_with("trace: previous boot's trace: "), "{line}");
    let trace = m.run("cat instances/last_boot/trace");
    let lines = trace_lines(&trace);
    let marker = lines.iter().position(|l| l.fields.contains("just-before-the-panic"));
    let marker = marker.unwrap_or_else(|| panic!("the marker is in last_boot:\n{trace}"));
    // The shell command that panicked was recorded after the marker.
    assert!(
        lines[marker..].iter().any(|l| l.event == "command" && l.fields.contains("panic")),
        "{trace}"
    );
    stats_balanced_on_every_cpu(&mut m);
    // After a reboot nothing was saved again: a panic without the setting ends QEMU.
    assert_eq!(m.run("panic_reboot").trim(), "0");
    assert_eq!(m.run_to_exit("panic"), Outcome::KernelFailure);
    // That panic's dump carries last_boot, which the host tool reads like any instance.
    let dumps = m.dumps();
    let dump = dumps.last().expect("the second panic's dump");
    let traces = dump.sections();
    let last_boot = traces.iter().find(|t| t.instance == "last_boot");
    assert!(last_boot.is_some_and(|t| !t.events.is_empty()), "last_boot is in the dump");
}

/// The trace is saved before the panic's dump: a dump that panics in turn still
/// leaves the events in the next boot's `last_boot`.
#[test]
fn a_panic_whose_dump_fails_still_saves_the_trace() {
    let mut m = rebooting();
    assert_eq!(m.run("panic_reboot 1").trim(), "1");
    m.run("echo before-a-failed-dump > instances/boot_map/trace_marker");
    let boot = m.run_to_reboot("panic dump");
    let saved = boot.find("panic: trace saved; rebooting after the dump");
    let gave_up = boot.find("panic while saving or dumping the trace; giving up");
    assert!(saved.is_some() && saved < gave_up, "{boot}");
    let trace = m.run("cat instances/last_boot/trace");
    assert!(trace.contains("before-a-failed-dump"), "{trace}");
}

#[test]
fn a_cold_boot_has_no_previous_trace() {
    let mut m = Machine::boot();
    let boot = m.transcript();
    let line = previous_line(&boot);
    assert!(line.starts_with("trace: no previous boot's trace: no trace was saved"), "{line}");
    let instances = m.run("ls instances");
    assert!(!instances.contains("last_boot") && instances.contains("boot_map"), "{instances}");
    // The region's names are not made by mkdir: a `last_boot` made so would refuse
    // every write as the previous boot's trace.
    let refused = m.run("mkdir instances/last_boot");
    assert!(refused.contains("Invalid argument (boot_map and last_boot are"), "{refused}");
    assert!(!m.run("ls instances").contains("last_boot"));
    // Without --reboot, a reset ends QEMU, as before.
    assert_eq!(m.run_to_exit("reboot"), Outcome::NoVerdict);
}

#[test]
fn a_scribbled_region_is_discarded_with_the_reason() {
    let mut m = rebooting();
    m.run("echo scribbled-over > instances/boot_map/trace_marker");
    // CPU 2's saved ring must hold records for the scribble to change them (its first
    // tick comes within a few commands).
    let recorded = |m: &mut Machine| m.cpu_stat("instances/boot_map/", 2, "entries:") > 0;
    assert!((0..500).any(|_| recorded(&mut m)), "CPU 2 recorded nothing in boot_map");
    let boot = m.run_to_reboot("scribble 2");
    let line = previous_line(&boot);
    assert!(
        line.starts_with("trace: previous boot's trace discarded: cpu2 ring: records do not match"),
        "{line}"
    );
    assert!(!m.run("ls instances").contains("last_boot"));
    // The next reboot saves and restores again.
    let boot = m.run_to_reboot("reboot");
    assert!(previous_line(&boot).starts_with("trace: previous boot's trace: "), "{boot}");
}

/// Fills boot_map's four rings (the stress events), reboots: the whole region is
/// validated and kept. The boot line gives the validation time (`--nocapture`).
#[test]
fn a_full_region_is_validated_and_kept_whole() {
    let mut m = rebooting();
    m.run("echo 1 > instances/boot_map/events/stress/enable");
    let root = "instances/boot_map/";
    let capacity = 256 * 1024;
    // CPU 0 also consumes the stress instance's rings, so it writes less: run until
    // every ring is full (each run adds to every ring).
    for _ in 0..10 {
        let out = m.run("stress overwrite 300");
        assert!(!out.contains("FAIL"), "{out}");
        if (0..4).all(|cpu| m.cpu_stat(root, cpu, "bytes:") * 10 >= capacity * 9) {
            break;
        }
    }
    for cpu in 0..4 {
        let bytes = m.cpu_stat(root, cpu, "bytes:");
        assert!(bytes * 10 >= capacity * 9, "cpu{cpu}'s ring is full: {bytes} bytes");
    }
    let boot = m.run_to_reboot("reboot");
    let line = previous_line(&boot);
    assert!(line.starts_with("trace: previous boot's trace: "), "{line}");
    println!("{line}");
    for cpu in 0..4 {
        let bytes = m.cpu_stat("instances/last_boot/", cpu, "bytes:");
        assert!(bytes * 10 >= 256 * 1024 * 9, "cpu{cpu}'s saved ring is whole: {bytes} bytes");
    }
    stats_balanced_on_every_cpu(&mut m);
}
