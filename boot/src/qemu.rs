//! Running the kernel image in QEMU.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, ExitStatus};

/// Where the guest's serial line (COM1) goes.
#[derive(Clone, Debug)]
pub enum Serial {
    /// Interactive: the terminal, with QEMU's monitor multiplexed behind Ctrl-A c;
    /// Ctrl-C goes to the guest; Ctrl-A x quits QEMU. Optionally logged to a file.
    Terminal {
        /// Copy of everything the guest writes to the serial line.
        log: Option<PathBuf>,
    },
    /// Standard input and output of the QEMU process, nothing else (for tests).
    Pipe,
}

/// How to run the kernel.
#[derive(Clone, Debug)]
pub struct Config {
    /// Number of CPUs.
    pub smp: u32,
    /// Guest memory in MiB.
    pub memory_mib: u32,
    /// A file to hold the guest's memory (QEMU creates it, sparse, and maps it
    /// shared): the guest may then be larger than the host lets one process commit,
    /// and only what the guest touches takes disk space. A path in UTF-8, as QEMU's
    /// option syntax takes it.
    pub memory_file: Option<String>,
    /// Use KVM instead of TCG (TCG is the default: nested KVM boots slowly).
    pub kvm: bool,
    /// TCG only: virtual time advances one nanosecond per guest instruction (QEMU's
    /// `-icount shift=0`), so the guest's TSC and timers count instructions and a run
    /// is repeatable; the CPUs then share one host thread.
    pub icount: bool,
    /// Serial line wiring.
    pub serial: Serial,
    /// A guest reset reboots the guest, its memory kept (QEMU's default), instead of
    /// ending QEMU (`-no-reboot`, the runner's default).
    pub reboot: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            smp: 4,
            memory_mib: 256,
            memory_file: None,
            kvm: false,
            icount: false,
            serial: Serial::Pipe,
            reboot: false,
        }
    }
}

/// The `isa-debug-exit` port the kernel writes its verdict to.
pub const DEBUG_EXIT_PORT: u16 = 0xf4;

impl Config {
    /// The QEMU command that boots `image` headless with this configuration.
    pub fn command(&self, image: &str) -> Command {
        let mut command = Command::new("qemu-system-x86_64");
        command
            .arg("-drive")
            .arg(format!("format=raw,file={image},snapshot=on"))
            .args(["-display", "none", "-nic", "none"])
            .args(if self.reboot { &[][..] } else { &["-no-reboot"][..] })
            .arg("-device")
            .arg(format!("isa-debug-exit,iobase={DEBUG_EXIT_PORT:#x},iosize=0x04"))
            .args(["-smp", &self.smp.to_string()])
            .args(["-m", &format!("{}M", self.memory_mib)])
            .args(["-accel", if self.kvm { "kvm" } else { "tcg" }])
            .args(if self.icount { &["-icount", "shift=0"][..] } else { &[][..] });
        if let Some(file) = &self.memory_file {
            // QEMU's option syntax escapes a comma by doubling it.
            let path = file.replace(',', ",,");
            command.arg("-object").arg(format!(
                "memory-backend-file,id=ram,size={}M,mem-path={path},share=on",
                self.memory_mib
            ));
            command.args(["-machine", "memory-backend=ram"]);
        }
        match &self.serial {
            Serial::Terminal { log } => {
                let mut chardev = OsString::from("stdio,id=console,mux=on,signal=off");
                if let Some(log) = log {
                    chardev.push(",logfile=");
                    chardev.push(log);
                }
                command.arg("-chardev").arg(chardev);
                command.args(["-serial", "chardev:console", "-mon", "chardev=console"]);
            }
            Serial::Pipe => {
                command.args(["-chardev", "stdio,id=console,signal=off"]);
                command.args(["-serial", "chardev:console", "-monitor", "none"]);
            }
        }
        command
    }
}

/// What a run of the kernel came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The kernel powered off (`poweroff`).
    Success,
    /// The kernel reported failure: a panic or a fatal exception.
    KernelFailure,
    /// QEMU exited without a verdict from the kernel: the guest reset (a triple
    /// fault, with `-no-reboot`) or the user quit QEMU.
    NoVerdict,
    /// QEMU failed (bad arguments, missing image, crash) with this status.
    QemuError(Option<i32>),
    /// The run outlived its time limit and was killed.
    Timeout,
}

/// A sentence for the user: what the run came to.
impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Success => write!(f, "the kernel powered off"),
            Self::KernelFailure => {
                write!(f, "the kernel panicked or hit a fatal exception (its report is above)")
            }
            Self::NoVerdict => write!(
                f,
                "QEMU ended without a verdict from the kernel: the guest reset, or QEMU was quit"
            ),
            Self::QemuError(Some(code)) => write!(f, "QEMU failed with exit status {code}"),
            Self::QemuError(None) => write!(f, "QEMU was killed by a signal"),
            Self::Timeout => write!(f, "the run outlived its time limit and QEMU was killed"),
        }
    }
}

impl Outcome {
    /// Interprets QEMU's exit status: the kernel writes `v` to the debug-exit port and
    /// QEMU exits with `(v << 1) | 1`.
    pub fn from_status(status: ExitStatus) -> Self {
        match status.code() {
            Some(33) => Self::Success,
            Some(35) => Self::KernelFailure,
            Some(0) => Self::NoVerdict,
            code => Self::QemuError(code),
        }
    }

    /// The runner's process exit code: each outcome its own.
    pub fn exit_code(self) -> u8 {
        match self {
            Self::Success => 0,
            Self::KernelFailure => 1,
            Self::QemuError(_) => 2,
            Self::Timeout => 3,
            Self::NoVerdict => 4,
        }
    }
}

/// Has the process `command` starts get SIGKILL when the thread that starts it ends,
/// however it ends (a signal that kills this tool included), so that no QEMU
/// outlives a `record` run. Linux's `PR_SET_PDEATHSIG` (the tool runs on Linux); the
/// thread must outlive the child.
pub fn end_with_this_thread(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id();
    // SAFETY: the closure runs in the child between fork and exec, where only what
    // takes no lock and allocates nothing is safe: it makes two raw system calls
    // (`prctl`, `getppid`), reads `errno` and builds an `io::Error` from its number,
    // none of which allocates or locks.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // A parent gone before the call above: the signal will never come.
            match libc::getppid() as u32 == parent {
                true => Ok(()),
                false => Err(std::io::Error::from_raw_os_error(libc::ESRCH)),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The arguments `config` gives QEMU.
    fn args(config: &Config) -> Vec<String> {
        config.command("disk.img").get_args().map(|a| a.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn a_memory_file_backs_all_of_the_guests_memory_with_commas_escaped() {
        let plain = args(&Config::default());
        assert!(!plain.iter().any(|a| a.contains("memory-backend")), "{plain:?}");
        let config = Config {
            memory_mib: 40 << 10,
            memory_file: Some("/tmp/a,b".into()),
            ..Config::default()
        };
        let args = args(&config);
        let object = args.iter().position(|a| a == "-object").expect("an -object argument");
        assert_eq!(
            args[object + 1],
            "memory-backend-file,id=ram,size=40960M,mem-path=/tmp/a,,b,share=on"
        );
        let machine = args.iter().position(|a| a == "-machine").expect("a -machine argument");
        assert_eq!(args[machine + 1], "memory-backend=ram");
        let m = args.iter().position(|a| a == "-m").expect("a -m argument");
        assert_eq!(args[m + 1], "40960M");
    }
}
