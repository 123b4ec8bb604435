//! End-to-end test harness: boots the real disk image in QEMU (headless, serial line
//! on pipes), waits for the shell's prompt, sends lines, and returns what the shell
//! answered. Every wait has a timeout; nothing sleeps. When a test fails, the serial
//! transcript is printed.

mod qmp;

use boot::qemu::{Config, Outcome};
use qmp::{Listener, Qmp};
use serde_json::json;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};
use wait_timeout::ChildExt;

/// How long a boot may take to reach the prompt: 1.8 s alone, but at twice CI's load
/// (two suites at once, the 1,000-cycle stress tests of both keeping 8 vCPUs busy on
/// 2 cores) two boots took over 60 s, one still in the bootloader then.
pub const BOOT_TIMEOUT: Duration = Duration::from_secs(180);
/// How long one shell step may take.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a guest that keeps writing may take to exit (a panic dump's length).
pub const EXIT_CAP: Duration = Duration::from_secs(300);

/// What the shell prints before each prompt's working directory.
const PROMPT_START: &str = "tracefs:";
/// What ends every prompt.
const PROMPT_END: &str = "# ";

/// Everything the guest wrote to its serial line, shared with the reader thread.
struct Transcript {
    bytes: Mutex<(Vec<u8>, bool)>,
    grown: Condvar,
}

/// A running kernel in QEMU, driven over its serial line.
pub struct Machine {
    child: Child,
    stdin: Option<ChildStdin>,
    transcript: Arc<Transcript>,
    /// Transcript bytes already consumed by waits.
    cursor: usize,
    /// When QEMU was spawned.
    started: Instant,
    /// Time from spawning QEMU to the first prompt (to running, for a restored
    /// machine).
    boot_time: Duration,
    outcome: Option<Outcome>,
}

/// Taken by [`busy_guest`].
static BUSY_GUEST: Mutex<()> = Mutex::new(());

/// Held by a test whose guest keeps all its CPUs busy for minutes (the 1,000-cycle
/// stress tests), so that two such guests never share the host's cores: on two cores
/// the function tracers' and the static keys' tests took 241 s and 202 s side by side,
/// where the first takes about 60 s beside lighter tests.
pub fn busy_guest() -> std::sync::MutexGuard<'static, ()> {
    BUSY_GUEST.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The default machine's state at its first prompt, saved by the test process's first
/// [`Machine::boot`] for the later ones to restore.
static AT_PROMPT: Mutex<Option<Saved>> = Mutex::new(None);

/// A machine's state saved at its prompt, and what it had written by then.
struct Saved {
    /// QEMU's migration stream, in a file already removed: a restore reads it through
    /// this process's descriptor (`/proc/PID/fd/N`), and it goes with the process.
    state: File,
    /// The serial transcript up to the prompt.
    transcript: Vec<u8>,
}

impl Machine {
    /// Boots with the default configuration and waits for the prompt. The first call
    /// in a test process boots and saves the machine at its prompt (QEMU's migration
    /// stream); the later ones restore that state, with the boot's transcript: a
    /// fraction of a second, where a boot takes about 3 s under TCG, nearly all of it
    /// in the firmware and the bootloader. [`Machine::boot_with`] always boots.
    pub fn boot() -> Self {
        let mut saved = AT_PROMPT.lock().unwrap_or_else(PoisonError::into_inner);
        let (state, transcript) = match &*saved {
            Some(saved) => (saved.state.as_raw_fd(), saved.transcript.clone()),
            None => {
                let (machine, state) = Self::boot_and_save();
                *saved = Some(state);
                return machine;
            }
        };
        drop(saved);
        Self::restore(state, transcript)
    }

    /// Boots with `config` (its serial wiring is forced to pipes) and waits for the
    /// prompt.
    pub fn boot_with(config: Config) -> Self {
        Self::boot_within(config, BOOT_TIMEOUT)
    }

    /// [`Machine::boot_with`], waiting up to `timeout` for the prompt.
    pub fn boot_within(mut config: Config, timeout: Duration) -> Self {
        config.serial = boot::qemu::Serial::Pipe;
        let mut machine = Self::start(config.command(boot::BIOS_IMAGE), Vec::new());
        machine.wait_for_prompt(timeout);
        machine.boot_time = machine.started.elapsed();
        machine
    }

    /// Boots the default machine with a QMP monitor, waits for its prompt, saves its
    /// state and lets it run on.
    fn boot_and_save() -> (Self, Saved) {
        let monitor = Listener::bind("qmp");
        let mut machine = Self::start(with_monitor(&monitor), Vec::new());
        machine.wait_for_prompt(BOOT_TIMEOUT);
        machine.boot_time = machine.started.elapsed();
        let mut qmp = Qmp::new(monitor.accept(STEP_TIMEOUT));
        let events = json!([{ "capability": "events", "state": true }]);
        qmp.execute("migrate-set-capabilities", json!({ "capabilities": events }));
        let stream = Listener::bind("state");
        let uri = format!("unix:{}", stream.path().display());
        qmp.execute("migrate", json!({ "uri": uri }));
        let mut state = Vec::new();
        stream.accept(STEP_TIMEOUT).read_to_end(&mut state).expect("the machine's state");
        let ended = qmp.event("MIGRATION", |data| {
            matches!(data["status"].as_str(), Some("completed" | "failed" | "cancelled"))
        });
        assert_eq!(ended["status"], "completed", "saving the machine at its prompt");
        // The machine stops when its state is saved.
        qmp.execute("cont", json!({}));
        let name = format!("e2e-at-prompt-{}.state", std::process::id());
        let path = std::env::temp_dir().join(name);
        std::fs::write(&path, &state).expect("the saved state written");
        let file = File::open(&path).expect("the saved state");
        std::fs::remove_file(&path).expect("the saved state's name removed");
        let transcript = machine.transcript.bytes.lock().expect("transcript lock").0.clone();
        (machine, Saved { state: file, transcript })
    }

    /// Starts the default machine from the state in this process's descriptor
    /// `state`, its transcript `transcript`, and waits until it runs.
    fn restore(state: RawFd, transcript: Vec<u8>) -> Self {
        let monitor = Listener::bind("qmp");
        let mut command = with_monitor(&monitor);
        let source = format!("exec:cat /proc/{}/fd/{state}", std::process::id());
        command.args(["-incoming", &source]);
        let mut machine = Self::start(command, transcript);
        let mut qmp = Qmp::new(monitor.accept(BOOT_TIMEOUT));
        // QEMU runs the machine once the state is in, and says so with RESUME. Events
        // come only after the capabilities, so ask first.
        if qmp.execute("query-status", json!({}))["running"] != true {
            qmp.event("RESUME", |_| true);
        }
        machine.boot_time = machine.started.elapsed();
        machine
    }

    /// Spawns `command` (QEMU, serial line on standard input and output) and reads its
    /// output into a transcript that begins with `transcript`, all of it read.
    fn start(mut command: Command, transcript: Vec<u8>) -> Self {
        let started = Instant::now();
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("qemu-system-x86_64 runs (boot/setup.sh installs it)");
        let stdin = child.stdin.take();
        let mut stdout = child.stdout.take().expect("stdout is piped");
        let cursor = transcript.len();
        let transcript =
            Arc::new(Transcript { bytes: Mutex::new((transcript, false)), grown: Condvar::new() });
        let sink = Arc::clone(&transcript);
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            loop {
                let n = stdout.read(&mut chunk).unwrap_or(0);
                let mut state = sink.bytes.lock().expect("transcript lock");
                if n == 0 {
                    state.1 = true;
                } else {
                    state.0.extend_from_slice(&chunk[..n]);
                }
                sink.grown.notify_all();
                if n == 0 {
                    return;
                }
            }
        });
        Self { child, stdin, transcript, cursor, started, boot_time: Duration::ZERO, outcome: None }
    }

    /// Time from starting QEMU to the first prompt (to running, for a machine
    /// [`Machine::boot`] restored).
    pub fn boot_time(&self) -> Duration {
        self.boot_time
    }

    /// Everything the guest has written so far, with CRLF turned into LF.
    pub fn transcript(&self) -> String {
        let state = self.transcript.bytes.lock().expect("transcript lock");
        String::from_utf8_lossy(&state.0).replace("\r\n", "\n")
    }

    /// Waits until `check` returns something for the transcript (bytes, whether the
    /// serial line closed); panics after `timeout`, or if the line closed first.
    fn wait<R>(
        &self,
        what: &str,
        timeout: Duration,
        mut check: impl FnMut(&[u8], bool) -> Option<R>,
    ) -> R {
        let deadline = Instant::now() + timeout;
        let mut state = self.transcript.bytes.lock().expect("transcript lock");
        loop {
            if let Some(result) = check(&state.0, state.1) {
                return result;
            }
            let now = Instant::now();
            if state.1 {
                drop(state);
                panic!("the serial line closed (QEMU exited) while waiting for {what}");
            }
            if now >= deadline {
                drop(state);
                panic!("timed out after {timeout:?} waiting for {what}");
            }
            state = self
                .transcript
                .grown
                .wait_timeout(state, deadline - now)
                .expect("transcript lock")
                .0;
        }
    }

    /// Waits until `found` accepts the unread transcript, consuming it up to the end
    /// that `found` returns.
    fn wait_until(
        &mut self,
        what: &str,
        timeout: Duration,
        found: impl Fn(&[u8]) -> Option<usize>,
    ) -> String {
        let cursor = self.cursor;
        let (text, end) = self.wait(what, timeout, |bytes, _| {
            let end = found(&bytes[cursor..])?;
            Some((String::from_utf8_lossy(&bytes[cursor..cursor + end]).replace("\r\n", "\n"), end))
        });
        self.cursor += end;
        text
    }

    /// Waits for `pattern` in the unread transcript; returns the text up to and
    /// including it.
    pub fn wait_for(&mut self, pattern: &str, timeout: Duration) -> String {
        let needle = pattern.as_bytes();
        self.wait_until(&format!("{pattern:?}"), timeout, |unread| {
            find(unread, needle).map(|at| at + needle.len())
        })
    }

    /// Waits until `done` accepts the unread transcript (CRLF as LF); returns it,
    /// consumed.
    pub fn wait_for_text(
        &mut self,
        what: &str,
        timeout: Duration,
        done: impl Fn(&str) -> bool,
    ) -> String {
        self.wait_until(what, timeout, |unread| {
            done(&String::from_utf8_lossy(unread).replace("\r\n", "\n")).then_some(unread.len())
        })
    }

    /// Waits for the shell's prompt; returns the text before it.
    pub fn wait_for_prompt(&mut self, timeout: Duration) -> String {
        let text = self.wait_until("the prompt", timeout, |unread| {
            // The first line holding the prompt's start and then its end (output
            // may hold the start alone: `kernel::shell::tracefs::read`).
            let mut from = 0;
            loop {
                let start = from + find(&unread[from..], PROMPT_START.as_bytes())?;
                let line_end = unread[start..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(unread.len(), |p| start + p);
                if let Some(at) = find(&unread[start..line_end], PROMPT_END.as_bytes()) {
                    return Some(start + at + PROMPT_END.len());
                }
                from = start + 1;
            }
        });
        let prompt_at = text.rfind(PROMPT_START).unwrap_or(text.len());
        text[..prompt_at].to_string()
    }

    /// Sends raw bytes to the serial line.
    pub fn send(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("QEMU's stdin is open");
        stdin.write_all(bytes).and_then(|()| stdin.flush()).expect("writing to QEMU's serial line");
    }

    /// Types `line` and Enter, waits for the command to finish (the next prompt), and
    /// returns its output (without the echoed command line), LF line ends.
    pub fn run(&mut self, line: &str) -> String {
        self.run_within(line, STEP_TIMEOUT)
    }

    /// Sets the latency watchdog's threshold to `ms` and has it watch again: a host
    /// stall since boot may have exceeded the boot's threshold and started a capture,
    /// which only ends after its window of ticks, so one in progress is waited for
    /// first. Returns the status once it watches.
    pub fn watch_latency(&mut self, ms: u64) -> String {
        let set = self.run(&format!("latency threshold {ms}"));
        assert!(set.contains(&format!("threshold: {}000000 ns", ms)), "{set}");
        for _ in 0..3 {
            let status = self.run("latency rearm");
            if status.contains("state: Watching") {
                return status;
            }
            self.run("latency wait 10000");
        }
        panic!("the watchdog does not watch again: {}", self.run("latency"));
    }

    /// [`Machine::run`] allowing `timeout` for the echo and for the prompt (a guest
    /// slower than TCG's, such as one under nested KVM).
    pub fn run_within(&mut self, line: &str, timeout: Duration) -> String {
        self.send(line.as_bytes());
        self.send(b"\r");
        self.wait_for(&format!("{line}\r\n"), timeout);
        self.wait_for_prompt(timeout)
    }

    /// Types `line` and Enter, and waits for the kernel to boot again to its prompt (a
    /// machine booted with `reboot` set in its configuration); returns everything
    /// from the command's output to the new prompt, boot lines included.
    pub fn run_to_reboot(&mut self, line: &str) -> String {
        self.send(line.as_bytes());
        self.send(b"\r");
        self.wait_for(&format!("{line}\r\n"), STEP_TIMEOUT);
        self.wait_for_prompt(BOOT_TIMEOUT)
    }

    /// Types `line` and Enter, and waits for QEMU to exit; returns the outcome.
    pub fn run_to_exit(&mut self, line: &str) -> Outcome {
        self.send(line.as_bytes());
        self.send(b"\r");
        self.wait_exit(STEP_TIMEOUT)
    }

    /// Waits for QEMU to exit on its own; returns the outcome (Timeout if it had to
    /// be killed: the guest wrote nothing for `quiet`, or still wrote after
    /// [`EXIT_CAP`]). The wait goes on while the guest writes: a panic dump takes
    /// as long as its records take on the serial line, longer on a loaded host.
    pub fn wait_exit(&mut self, quiet: Duration) -> Outcome {
        if let Some(outcome) = self.outcome {
            return outcome;
        }
        let left = if self.wait_closed_while_writing(quiet) { quiet } else { Duration::ZERO };
        let outcome = match self.child.wait_timeout(left).expect("waiting for QEMU") {
            Some(status) => Outcome::from_status(status),
            None => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                Outcome::Timeout
            }
        };
        self.outcome = Some(outcome);
        self.wait_for_close(STEP_TIMEOUT);
        outcome
    }

    /// Whether QEMU's output ended (it exited) before the guest had written nothing
    /// for `quiet`, and within [`EXIT_CAP`].
    fn wait_closed_while_writing(&self, quiet: Duration) -> bool {
        let cap = Instant::now() + EXIT_CAP;
        let mut state = self.transcript.bytes.lock().expect("transcript lock");
        let (mut seen, mut last) = (state.0.len(), Instant::now());
        loop {
            if state.1 {
                return true;
            }
            let now = Instant::now();
            if state.0.len() != seen {
                (seen, last) = (state.0.len(), now);
            }
            let until = (last + quiet).min(cap);
            if now >= until {
                return false;
            }
            let waited = self.transcript.grown.wait_timeout(state, until - now);
            state = waited.expect("transcript lock").0;
        }
    }

    /// Waits until the reader thread has seen the end of QEMU's output, so the
    /// transcript is complete.
    fn wait_for_close(&self, timeout: Duration) {
        self.wait("the end of QEMU's output", timeout, |_, closed| closed.then_some(()));
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        if self.outcome.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if std::thread::panicking() {
            eprintln!(
                "----- serial transcript -----\n{}\n----- end of transcript -----",
                self.transcript()
            );
        }
    }
}

impl Machine {
    /// One counter of `cat ROOTper_cpu/cpuCPU/stats` (`root` is `""` or
    /// `"instances/NAME/"`, `field` e.g. `"overrun:"`).
    pub fn cpu_stat(&mut self, root: &str, cpu: usize, field: &str) -> u64 {
        let stats = self.run(&format!("cat {root}per_cpu/cpu{cpu}/stats"));
        stats
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {field} in:\n{stats}"))
    }

    /// Every trace dump in the transcript so far, parsed.
    pub fn dumps(&self) -> Vec<trace::dump::Dump> {
        trace::dump::parse(&self.transcript())
    }
}

/// One line of a `trace` file: task, CPU, flags, timestamp (ns), event name, fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceLine {
    /// The task column, `NAME-PID` (`<idle>-0`, `shell-1`, `<irq>-0`, `<nmi>-0`).
    pub task: String,
    /// The CPU.
    pub cpu: usize,
    /// The five flag characters (irqs-off, need-resched, hardirq/NMI, depth,
    /// migrate-disable).
    pub flags: String,
    /// The timestamp in nanoseconds (from microseconds or nanoseconds), or the count
    /// of a clock that is not in ns (`counter`).
    pub ts: u64,
    /// The event's name as shown (no system; `tracing_mark_write` for markers).
    pub event: String,
    /// The rendered fields.
    pub fields: String,
}

/// The event lines of `trace`-style output, ftrace's layout
/// (`TASK-PID [CPU] FLAGS SECONDS.FRACTION: NAME: FIELDS`, or `COUNT` for the time).
pub fn trace_lines(output: &str) -> Vec<TraceLine> {
    output
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (task, rest) = line.split_once(" [")?;
            let (cpu, rest) = rest.split_once("] ")?;
            let (flags, rest) = rest.split_once(' ')?;
            let (stamp, rest) = rest.trim_start().split_once(": ")?;
            let ts = match stamp.split_once('.') {
                Some((secs, fraction)) => {
                    let scale = 10u64.checked_pow(9u32.checked_sub(fraction.len() as u32)?)?;
                    secs.trim().parse::<u64>().ok()? * 1_000_000_000
                        + fraction.parse::<u64>().ok()? * scale
                }
                // A clock that is not in ns (`counter`): the count.
                None => stamp.trim().parse().ok()?,
            };
            let (event, fields) = rest.split_once(": ").unwrap_or((rest, ""));
            Some(TraceLine {
                task: task.trim().into(),
                cpu: cpu.parse().ok()?,
                flags: flags.into(),
                ts,
                event: event.into(),
                fields: fields.into(),
            })
        })
        .collect()
}

/// The lines of `trace`-style output that belong to `cpu`'s records: each event line
/// with the ` => ` frame lines under it. A trace merges its CPUs in time order, so
/// another CPU's record may fall between an event and the stack trace recorded
/// right after it; this view has only the one CPU's.
pub fn cpu_lines(output: &str, cpu: usize) -> Vec<&str> {
    let mut current = None;
    let mut own = |line: &&str| {
        if !line.starts_with(" => ") {
            current = trace_lines(line).first().map(|l| l.cpu);
        }
        current == Some(cpu)
    };
    output.lines().filter(|line| own(line)).collect()
}

/// Writes `sections` as one trace.dat (no kernel symbols), runs `trace-cmd report`
/// on it with `options` and returns what it prints; panics unless trace-cmd
/// succeeds with nothing on stderr (no warning either).
pub fn trace_cmd_report(sections: &[trace::dump::Section], options: &[&str]) -> String {
    let unique = NEXT_FILE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("e2e-{}-{unique}.dat", std::process::id());
    let path = std::env::temp_dir().join(name);
    let file = &mut std::fs::File::create(&path).expect("a temporary file");
    boot::report::write_tracedat(sections, None, file).expect("trace.dat written");
    let out =
        std::process::Command::new("trace-cmd").arg("report").args(options).arg(&path).output();
    let _ = std::fs::remove_file(&path);
    let out = out.expect("trace-cmd runs (boot/setup.sh installs it)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.trim().is_empty(), "trace-cmd report: {stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Numbers [`trace_cmd_report`]'s files apart within one test process.
static NEXT_FILE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The default machine's QEMU command, its QMP monitor connected to `monitor`.
fn with_monitor(monitor: &Listener) -> Command {
    let mut command = Config::default().command(boot::BIOS_IMAGE);
    let chardev = format!("socket,id=qmp,path={}", monitor.path().display());
    command.args(["-chardev", &chardev, "-mon", "chardev=qmp,mode=control"]);
    command
}

/// Position of `needle` in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}

/// The frames of a panic's call trace in a transcript: the ` => ` lines after
/// `Call Trace:`, innermost first.
pub fn call_trace(transcript: &str) -> Vec<&str> {
    transcript
        .lines()
        .skip_while(|l| *l != "Call Trace:")
        .skip(1)
        .map_while(|l| l.strip_prefix(" => "))
        .collect()
}

/// The frames of a stack overflow's call trace past its double fault's handler,
/// checked to be the recursion that overflowed the stack (`fault stack`), at least
/// 8 of them and nothing else: from the double fault's own stack, the walk goes on
/// into the kernel stack it overflowed, up to the trace's length.
pub fn overflow_frames(transcript: &str) -> Vec<&str> {
    let frames = call_trace(transcript);
    let handler = frames.iter().position(|f| f.starts_with("kernel::arch::idt::double_fault+"));
    let handler = handler.unwrap_or_else(|| panic!("{frames:#?}"));
    let interrupted = frames[handler + 1..].to_vec();
    let recursing =
        interrupted.iter().filter(|f| f.starts_with("kernel::shell::commands::recurse+")).count();
    assert!(recursing >= 8 && recursing == interrupted.len(), "{frames:#?}");
    interrupted
}
