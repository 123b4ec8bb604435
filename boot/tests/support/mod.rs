//! Helpers the host tool's test binaries share: running `boot`, temporary files
//! named after the test binary, records to write into dumps, and the memory a
//! report may take.
#![allow(dead_code, reason = "each test binary uses part of it")]

use std::ffi::OsStr;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use trace::{Context, ring::RecordRef};

/// `boot ARGS`, run to completion.
pub fn boot(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_boot")).args(args).output().expect("the boot binary runs")
}

/// `boot report ARGS`, run to completion.
pub fn report(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_boot"))
        .arg("report")
        .args(args)
        .output()
        .expect("the boot binary runs")
}

/// Output bytes as text (invalid UTF-8 replaced).
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A path in the temporary directory, removed (file or directory, whatever is
/// there) when dropped: a test leaves nothing behind, pass or fail.
pub struct Temp(PathBuf);

impl Temp {
    /// Removes what is at the path, if anything.
    fn remove(&self) {
        let _ = std::fs::remove_file(&self.0).or_else(|_| std::fs::remove_dir_all(&self.0));
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        self.remove();
    }
}

impl Deref for Temp {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Temp {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<OsStr> for Temp {
    fn as_ref(&self) -> &OsStr {
        self.0.as_os_str()
    }
}

/// A path in the temporary directory for `name`, distinct per test binary and
/// process, nothing there yet.
pub fn temp_path(name: &str) -> Temp {
    let binary = env!("CARGO_CRATE_NAME");
    let path =
        Temp(std::env::temp_dir().join(format!("boot-{binary}-{}-{name}", std::process::id())));
    // What an earlier process with the same id left goes first.
    path.remove();
    path
}

/// [`temp_path`] of `name`, written with `contents`.
pub fn temp(name: &str, contents: impl AsRef<[u8]>) -> Temp {
    let path = temp_path(name);
    std::fs::write(&path, contents).unwrap();
    path
}

/// A record of event 1 written by CPU `cpu`'s thread at `ts`.
pub fn record(cpu: usize, ts: u64, payload: &[u8]) -> RecordRef<'_> {
    RecordRef { cpu, ts, id: 1, context: Context::TASK, lost: 0, payload }
}

/// A dump writer whose lines go to `log`, each ended by a newline, as a serial log
/// holds them.
pub fn log_writer(log: &mut String) -> trace::dump::DumpWriter<impl FnMut(&str) + '_> {
    trace::dump::DumpWriter::begin(move |line: &str| {
        log.push_str(line);
        log.push('\n');
    })
}

/// Peak memory a report may add: this many times its log, plus [`SLACK`] (the rule:
/// nothing reachable from the input allocates without bound).
pub const MEMORY_PER_INPUT_BYTE: u64 = 64;
/// Fixed allowance on top of [`MEMORY_PER_INPUT_BYTE`] (allocator and output buffers).
pub const SLACK: u64 = 64 << 20;

/// `boot report ARGS` run to completion, its output discarded: whether it
/// succeeded, and its peak resident memory in bytes (the child's own high-water
/// mark, its `VmHWM`, as `wait4` reports it in `ru_maxrss`).
#[allow(clippy::zombie_processes, reason = "`wait4` reaps the child")]
pub fn report_peak(args: &[&OsStr]) -> (bool, u64) {
    use std::process::Stdio;
    let child = Command::new(env!("CARGO_BIN_EXE_boot"))
        .arg("report")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the boot binary runs");
    let pid = libc::pid_t::try_from(child.id()).expect("a pid");
    let mut status = 0;
    // SAFETY: `rusage` is plain data, all zeroes a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is this process's child, not yet waited for (`child` is not
    // waited on after this); `status` and `usage` are valid for writes.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4: {}", std::io::Error::last_os_error());
    let kib = u64::try_from(usage.ru_maxrss).expect("a size");
    (libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, kib * 1024)
}
