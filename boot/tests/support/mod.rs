//! Helpers the host tool's test binaries share: running `boot`, temporary files
//! named after the test binary, and records to write into dumps.
#![allow(dead_code, reason = "each test binary uses part of it")]

use std::path::PathBuf;
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

/// A path in the temporary directory for `name`, distinct per test binary and
/// process.
pub fn temp_path(name: &str) -> PathBuf {
    let binary = env!("CARGO_CRATE_NAME");
    std::env::temp_dir().join(format!("boot-{binary}-{}-{name}", std::process::id()))
}

/// [`temp_path`] of `name`, written with `contents`.
pub fn temp(name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
    let path = temp_path(name);
    std::fs::write(&path, contents).unwrap();
    path
}

/// A record of event 1 written by CPU `cpu`'s thread at `ts`.
pub fn record(cpu: usize, ts: u64, payload: &[u8]) -> RecordRef<'_> {
    RecordRef { cpu, ts, id: 1, context: Context::TASK, lost: 0, payload }
}
