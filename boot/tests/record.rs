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
    let run = record(&["-o", out, "--timeout", "5"]);
    assert_eq!(run.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&run.stderr).contains("--duration says how long"));
    assert!(!dir.join("out.txt").exists(), "no output written");
    // Nor is the temporary serial log left behind.
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "{left:?}");
}
