//! `boot record` as a user runs it: it boots the kernel in QEMU, streams
//! `trace_pipe_raw` and reports the stream.

mod support;
use std::process::{Command, Output};
use support::{Temp, temp_path};

/// A fresh scratch directory for `name`, removed with its contents when dropped.
fn scratch(name: &str) -> Temp {
    let dir = temp_path(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn record(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_boot")).arg("record").args(args).output().unwrap()
}

/// [`record`] with `dir` as its temporary directory.
fn record_in(dir: &std::path::Path, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_boot"));
    command.arg("record").args(args).env("TMPDIR", dir).output().unwrap()
}

#[test]
fn record_streams_ticks_and_reports_them_as_report_does_from_its_serial_log() {
    let dir = scratch("ticks");
    let (out, log) = (dir.join("ticks.txt"), dir.join("serial.log"));
    let run = record(&[
        "-o",
        out.to_str().unwrap(),
        "--setup",
        "echo timer:tick > set_event",
        "--duration",
        "2",
        "--serial-log",
        log.to_str().unwrap(),
        // The top-level instance, named as `report` names it.
        "--instance",
        "top",
    ]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    let text = std::fs::read_to_string(&out).unwrap();
    let ticks = text.lines().filter(|l| l.contains(": tick: ")).count();
    assert!(ticks > 10, "{ticks} ticks in:\n{text}");
    let stream = std::fs::read_to_string(&log).unwrap();
    assert!(stream.contains("cat trace_pipe_raw"), "the stream was read from the pipe file");
    let dumps = trace::dump::parse(&stream);
    assert_eq!(dumps.len(), 1);
    assert!(dumps[0].problems.is_empty(), "{:?}", dumps[0].problems);
    let again = Command::new(env!("CARGO_BIN_EXE_boot")).arg("report").arg(&log).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&again.stdout), text, "record reports as report does");
}

#[test]
fn record_refuses_what_the_kernel_refuses_with_its_message() {
    let dir = scratch("refused");
    let out = dir.join("out.txt");
    let out = out.to_str().unwrap();
    let run = record_in(&dir, &["-o", out, "--cpu", "99", "--duration", "1"]);
    assert_eq!(run.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("did not stream per_cpu/cpu99/trace_pipe_raw")
            && stderr.contains("No such file or directory"),
        "{stderr}"
    );
    let run = record_in(&dir, &["-o", out, "--setup", "echo nope > set_event", "--duration", "1"]);
    assert_eq!(run.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("the setup command \"echo nope > set_event\" said: "), "{stderr}");
    // Usage errors, before QEMU starts: `--timeout` is the runner's (`--duration` says
    // how long), a duration is at most a day, and an output that cannot be written is
    // refused before the recording it would lose (no serial log is begun).
    let log = dir.join("serial.log");
    let log = log.to_str().unwrap();
    for (args, error) in [
        (&["--timeout", "5"][..], "unexpected argument '--timeout'"),
        (&["--duration", "86401"][..], "86401 is not in 0..=86400"),
        (&["--duration", "18446744073709551615"][..], "is not in 0..=86400"),
    ] {
        let run = record_in(&dir, &[&["-o", out, "--serial-log", log][..], args].concat());
        assert_eq!(run.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&run.stderr).contains(error), "{args:?}");
    }
    let missing = dir.join("no-such-dir").join("out.txt");
    let run = record_in(&dir, &["-o", missing.to_str().unwrap(), "--serial-log", log]);
    assert_eq!(run.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&run.stderr);
    let refused = stderr.contains("out.txt: No such file or directory");
    assert!(refused && stderr.contains("(made first as "), "{stderr}");
    assert!(!std::path::Path::new(log).exists(), "refused before the recording began");
    let run = record_in(&dir, &["-o", dir.to_str().unwrap()]);
    assert_eq!(run.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains(": a directory, where a file is written"), "{stderr}");
    let run = record_in(&dir, &["-o", missing.to_str().unwrap(), "--format", "ctf"]);
    assert_eq!(run.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("out.txt: its parent is not a directory"), "{stderr}");
    assert!(!dir.join("out.txt").exists(), "no output written");
    // Nor is the temporary serial log left behind.
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A `record` killed outright (no chance to clean up) takes its QEMU with it.
#[test]
fn a_killed_record_leaves_no_qemu_behind() {
    let dir = scratch("killed");
    let out = dir.join("out.txt");
    let mut command = Command::new(env!("CARGO_BIN_EXE_boot"));
    command.args(["record", "-o", out.to_str().unwrap(), "--duration", "600"]);
    let mut run = command.env("TMPDIR", &*dir).spawn().unwrap();
    let children = format!("/proc/{0}/task/{0}/children", run.id());
    let is_qemu = |pid: &str| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).starts_with("qemu-system-x86_64"))
    };
    // Its child, once it runs QEMU (waited for, for up to a minute).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let qemu = loop {
        let listed = std::fs::read_to_string(&children).unwrap_or_default();
        if let Some(pid) = listed.split_whitespace().find(|pid| is_qemu(pid)) {
            break pid.to_string();
        }
        assert!(std::time::Instant::now() < deadline, "record started no QEMU");
        // Polled, as nothing tells this process when its grandchild runs.
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    run.kill().unwrap();
    run.wait().unwrap();
    // Gone, or a zombie its new parent has yet to reap: it runs no more.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    // Still QEMU (not a process that took its number since) and not a zombie.
    let running = || {
        let stat = std::fs::read_to_string(format!("/proc/{qemu}/stat")).unwrap_or_default();
        let alive = stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z'));
        alive && is_qemu(&qemu)
    };
    while running() {
        if std::time::Instant::now() > deadline {
            if running() {
                let _ = Command::new("kill").args(["-9", &qemu]).status();
            }
            panic!("QEMU {qemu} still runs 30 s after its record was killed");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// `--elf` names the function tracer's addresses after the kernel `record` booted.
#[test]
fn record_elf_names_functions() {
    let dir = scratch("elf");
    let out = dir.join("functions.txt");
    let run = record(&[
        "-o",
        out.to_str().unwrap(),
        "--setup",
        "echo 'kernel::serial::*' > set_ftrace_filter",
        "--setup",
        "echo function > current_tracer",
        "--duration",
        "1",
        "--elf",
    ]);
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    let text = std::fs::read_to_string(&out).unwrap();
    // The shell polls the serial line while it streams.
    let calls: Vec<&str> = text.lines().filter(|l| l.contains(" <-")).collect();
    assert!(!calls.is_empty(), "{text}");
    assert!(calls.iter().all(|l| l.contains(": kernel::serial::")), "{calls:?}");
}

/// A kernel that stops answering fails the run, and its serial log, which says why,
/// is kept and named (a refusal, which the kernel's message explains, leaves none).
#[test]
fn a_kernel_that_stops_answering_leaves_its_serial_log() {
    let dir = scratch("silent");
    // A device is written in place, and so taken as an output.
    let run = record_in(&dir, &["-o", "/dev/null", "--setup", "poweroff"]);
    assert_eq!(run.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&run.stderr);
    let kept = stderr.split_once("(the serial log is kept: ").map(|(_, rest)| rest);
    let kept = kept.and_then(|rest| rest.trim_end().strip_suffix(')')).expect(&stderr);
    assert!(stderr.contains("QEMU exited while waiting for prompt"), "{stderr}");
    let log = std::fs::read_to_string(kept).unwrap();
    assert!(log.contains("poweroff"), "{log}");
}
