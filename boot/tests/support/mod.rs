//! Helpers the host tool's test binaries share: running `boot`, temporary files
//! named after the test binary, and records to write into dumps.
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
