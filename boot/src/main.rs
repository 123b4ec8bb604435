//! `cargo run`: boot the kernel in QEMU with the serial line on the terminal.

use boot::qemu::{Config, Outcome, Serial};
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use wait_timeout::ChildExt;

/// Boot the flight-recorder kernel in QEMU (headless; the serial console is this
/// terminal; Ctrl-A x quits, Ctrl-A c toggles the QEMU monitor).
#[derive(Parser, Debug)]
#[command(version, about)]
struct Run {
    /// Number of CPUs.
    #[arg(long, default_value_t = 4)]
    smp: u32,
    /// Guest memory in MiB.
    #[arg(long, default_value_t = 256)]
    memory: u32,
    /// Use KVM instead of TCG.
    #[arg(long)]
    kvm: bool,
    /// Copy everything the kernel writes to the serial line into FILE.
    #[arg(long, value_name = "FILE")]
    serial_log: Option<PathBuf>,
    /// Kill QEMU after SECONDS (exit code 3).
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<u64>,
}

fn main() -> ExitCode {
    let run = Run::parse();
    let config = Config {
        smp: run.smp,
        memory_mib: run.memory,
        kvm: run.kvm,
        serial: Serial::Terminal { log: run.serial_log },
    };
    let outcome = match boot(&config, run.timeout.map(Duration::from_secs)) {
        Ok(outcome) => outcome,
        Err(error) => {
            eprintln!(
                "boot: cannot run qemu-system-x86_64: {error} (run boot/setup.sh to install it)"
            );
            Outcome::QemuError(None)
        }
    };
    if outcome != Outcome::Success {
        eprintln!("boot: {outcome:?}");
    }
    ExitCode::from(outcome.exit_code())
}

fn boot(config: &Config, timeout: Option<Duration>) -> std::io::Result<Outcome> {
    let mut child = config.command(boot::BIOS_IMAGE).spawn()?;
    let status = match timeout {
        None => Some(child.wait()?),
        Some(limit) => child.wait_timeout(limit)?,
    };
    Ok(match status {
        Some(status) => Outcome::from_status(status),
        None => {
            child.kill()?;
            child.wait()?;
            Outcome::Timeout
        }
    })
}
