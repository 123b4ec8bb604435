//! `cargo run`: boot the kernel in QEMU with the serial line on the terminal.
//! `cargo run -- report LOG`: read the trace dumps in a captured serial log.
//! `cargo run -- record -o FILE`: boot, stream `trace_pipe_raw` and report it.

use boot::log::Log;
use boot::qemu::{Config, Outcome, Serial};
use boot::report;
use clap::{Parser, Subcommand, ValueEnum};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use wait_timeout::ChildExt;

/// Boot the flight-recorder kernel in QEMU (headless; the serial console is this
/// terminal; Ctrl-A x quits, Ctrl-A c toggles the QEMU monitor), or read the trace
/// dumps of a captured serial log.
#[derive(Parser, Debug)]
#[command(version, about, after_help = RUN_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: Run,
    /// Kill QEMU after SECONDS (exit code 3).
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<u64>,
}

/// What `--help` adds after the options of the runner.
const RUN_HELP: &str = "\
The console: Ctrl-A x quits QEMU, Ctrl-A c switches between the kernel's console and
the QEMU monitor, Ctrl-A h lists the other keys; Ctrl-C goes to the kernel.

Exit codes:
  0  the kernel powered off (`poweroff`)
  1  the kernel panicked or hit a fatal exception
  2  QEMU failed (or could not be started)
  3  --timeout expired and QEMU was killed
  4  QEMU ended without a verdict: the guest reset, or Ctrl-A x";

/// What `report --help` adds after its options.
const REPORT_HELP: &str = "\
Exit codes:
  0  every dump was intact
  1  a dump was damaged: its problems are on stderr, the rest was reported
  2  the report failed: no dump in the log, a file that cannot be read or
     written, an --elf file that is not a kernel ELF with a symbol table, no
     such instance, or options that do not go together (a file
     given with -o is then left as it was)";

/// What `record --help` adds after its options.
const RECORD_HELP: &str = "\
The kernel boots headless with its serial line on a pipe; the setup commands run in
its shell, then `cat trace_pipe_raw` (of the instance, or of one CPU) streams the
records until --duration has passed, when a key ends the stream; the kernel is then
powered off and the stream reported as `report` would.

Exit codes:
  0  the stream was recorded intact and reported
  1  the stream was damaged: its problems are on stderr, the rest was reported
  2  the recording failed: QEMU could not run or exited, the kernel refused a
     command or the file to stream, or the report could not be written";

#[derive(Subcommand, Debug)]
enum Command {
    /// Boot the kernel, stream its records live over the serial line
    /// (`trace_pipe_raw`) and write them in any report format.
    #[command(after_help = RECORD_HELP)]
    Record(Record),
    /// Find the trace dumps in a serial log, verify them, and print or convert them.
    #[command(after_help = REPORT_HELP)]
    Report(Report),
}

/// How to boot.
#[derive(Parser, Debug)]
struct Run {
    /// Number of CPUs.
    #[arg(long, default_value_t = 4)]
    smp: u32,
    /// Guest memory in MiB.
    #[arg(long, default_value_t = 256)]
    memory: u32,
    /// Hold the guest's memory in FILE (created sparse, mapped shared): a guest larger
    /// than the host lets one process commit; only what the guest touches takes disk.
    #[arg(long, value_name = "FILE")]
    memory_file: Option<String>,
    /// Use KVM instead of TCG.
    #[arg(long)]
    kvm: bool,
    /// TCG with virtual time: one nanosecond per guest instruction, so the guest's
    /// TSC counts instructions (`bench` reports exact counts) and runs repeat.
    #[arg(long, conflicts_with = "kvm")]
    icount: bool,
    /// Copy everything the kernel writes to the serial line into FILE.
    #[arg(long, value_name = "FILE")]
    serial_log: Option<PathBuf>,
    /// A guest reset (`reboot`, a panic with `panic_reboot 1`, a triple fault) reboots
    /// the guest with its memory kept, so `instances/last_boot` holds the previous
    /// boot's trace; without it a reset ends QEMU (exit code 4).
    #[arg(long)]
    reboot: bool,
}

impl Run {
    /// The QEMU configuration these options ask for, the serial line wired as `serial`.
    fn config(&self, serial: Serial) -> Config {
        Config {
            smp: self.smp,
            memory_mib: self.memory,
            memory_file: self.memory_file.clone(),
            kvm: self.kvm,
            icount: self.icount,
            serial,
            reboot: self.reboot,
        }
    }
}

/// Output formats of `report`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Format {
    /// trace-cmd report style text.
    Text,
    /// Chrome Trace Event JSON for ui.perfetto.dev.
    Perfetto,
    /// Perfetto's protobuf trace format for ui.perfetto.dev (smaller than the JSON).
    PerfettoProto,
    /// A CTF 1.8 trace directory for babeltrace2.
    Ctf,
    /// A trace-cmd trace.dat (file format 6) for trace-cmd and KernelShark.
    Tracedat,
}

/// Which buffers of an instance `report` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Buffers {
    /// The live buffer.
    Live,
    /// The snapshot the instance kept.
    Snapshot,
    /// Both: the live buffer and the snapshot, each apart.
    All,
}

impl Buffers {
    fn wants(self, buffer: trace::dump::BufferKind) -> bool {
        match self {
            Buffers::All => true,
            Buffers::Live => buffer == trace::dump::BufferKind::Live,
            Buffers::Snapshot => buffer == trace::dump::BufferKind::Snapshot,
        }
    }
}

/// `record` options.
#[derive(Parser, Debug)]
struct Record {
    /// Output file (text, perfetto, tracedat) or directory (ctf).
    #[arg(short, long, value_name = "PATH")]
    output: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// The instance to stream; default the top-level one.
    #[arg(long, value_name = "NAME")]
    instance: Option<String>,
    /// Stream one CPU's records only.
    #[arg(long, value_name = "N")]
    cpu: Option<usize>,
    /// A shell command to run before streaming (repeatable, in order), e.g.
    /// 'echo 1 > events/enable'.
    #[arg(long, value_name = "COMMAND")]
    setup: Vec<String>,
    /// How long to stream, in seconds (at most a day).
    #[arg(long, value_name = "SECONDS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(..=MAX_DURATION))]
    duration: u64,
    /// Name code addresses (stack frames, the function tracers' records) after the
    /// functions of the kernel it boots, as `report --elf` does.
    #[arg(long)]
    elf: bool,
    /// How to boot (its --serial-log keeps the run's serial log, which `report`
    /// reads again).
    #[command(flatten)]
    run: Run,
}

/// The longest `record --duration`, in seconds: a day.
const MAX_DURATION: u64 = 24 * 60 * 60;

/// `report` options.
#[derive(Parser, Debug)]
struct Report {
    /// The captured serial log (other output around the dumps is fine).
    log: PathBuf,
    /// Summarise instead of listing events (text only: an error with another format).
    #[arg(long)]
    stat: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Output file (text, perfetto, default stdout; perfetto-proto, tracedat, required)
    /// or directory (ctf; required).
    #[arg(short, long, value_name = "PATH")]
    output: Option<PathBuf>,
    /// The instance to convert (perfetto, perfetto-proto, ctf); default the top-level
    /// one. Text and tracedat report every instance unless this is given.
    #[arg(long, value_name = "NAME")]
    instance: Option<String>,
    /// Which buffers of each instance: its live buffer, the snapshot it kept, or all
    /// (each apart: a section each in text, a process each in perfetto, a buffer
    /// instance each in tracedat). Default all for text and perfetto, live for
    /// tracedat; ctf and perfetto-proto hold one buffer: default live.
    #[arg(long, value_enum, value_name = "BUFFER")]
    buffer: Option<Buffers>,
    /// The kernel ELF the dump's kernel ran: stack frames print as `function+0xoffset`
    /// (addresses otherwise). Without PATH, the kernel this build boots.
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = boot::KERNEL_ELF)]
    elf: Option<PathBuf>,
    /// Shows only the events named here (repeatable, as trace-cmd report's -F):
    /// `EVENTS[: FILTER]`, EVENTS comma-separated `SYSTEM/EVENT` or `EVENT` globs,
    /// FILTER in the kernel's filter syntax (its fields and `CPU`, `comm`,
    /// `common_pid`, ...), e.g. 'irq/irq_handler_entry: irq == 49 && CPU == 0'.
    /// The stack trace recorded right after an event shown is shown too.
    #[arg(long, value_name = "SPEC")]
    filter: Vec<String>,
    /// Shows histograms of the dump's events instead of the events (repeatable;
    /// text only): `EVENT:hist:ATTRIBUTES[ if FILTER]`, EVENT `SYSTEM/EVENT` or
    /// `EVENT`, the rest a line the kernel's `trigger` files take (keys, values,
    /// sort, variables with `common_timestamp` the record's time, `onmax`/`onchange`
    /// with `save`), e.g. 'irq/irq_handler_entry:hist:keys=irq,CPU'. Specs see
    /// each other's variables; --filter applies first.
    #[arg(long, value_name = "SPEC")]
    hist: Vec<String>,
}

impl Report {
    /// The instance to report: the one named, or the top-level one where the format
    /// holds one; `None`: every instance (text and tracedat).
    fn instance(&self) -> Option<&str> {
        match self.instance.as_deref() {
            None if matches!(self.format, Format::Text | Format::Tracedat) => None,
            name => Some(name.unwrap_or("top")),
        }
    }

    /// The buffers to report of each instance: those named, or the format's default.
    fn buffers(&self) -> Buffers {
        self.buffer.unwrap_or(match self.format {
            Format::Text | Format::Perfetto => Buffers::All,
            _ => Buffers::Live,
        })
    }

    /// The error of a failed write of the report, naming where it went; a reader
    /// that went away (`report LOG | head`) stops the tool quietly, as Unix tools do.
    fn write_error(&self, e: std::io::Error) -> String {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        match &self.output {
            Some(path) => format!("{}: {e}", path.display()),
            None => format!("writing the report: {e}"),
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::try_parse().unwrap_or_else(|error| {
        if error.kind() == clap::error::ErrorKind::MissingRequiredArgument
            && let Some(taken) = log_taken()
        {
            eprintln!("report: no LOG given: {taken}");
            std::process::exit(2);
        }
        error.exit()
    });
    match cli.command {
        Some(Command::Report(options)) => match report(&options, None) {
            Ok(clean) => ExitCode::from(if clean { 0 } else { 1 }),
            Err(error) => {
                eprintln!("report: {error}");
                ExitCode::from(2)
            }
        },
        Some(Command::Record(options)) => match record(&options) {
            Ok(clean) => ExitCode::from(if clean { 0 } else { 1 }),
            Err(error) => {
                eprintln!("record: {error}");
                ExitCode::from(2)
            }
        },
        None => boot(&cli.run, cli.timeout),
    }
}

/// Why a `report` command line has no LOG, when an option of it took a file as its
/// value (`report --elf serial.log`: `--elf`'s PATH is optional, so it took the log):
/// the option and the file; `None` otherwise.
fn log_taken() -> Option<String> {
    use clap::CommandFactory;
    let loose =
        Cli::command().mut_subcommand("report", |c| c.mut_arg("log", |a| a.required(false)));
    let matches = loose.try_get_matches().ok()?;
    let ("report", report) = matches.subcommand()? else { return None };
    let options = [("elf", "--elf"), ("output", "-o"), ("instance", "--instance")];
    let options = options.into_iter().chain([("filter", "--filter"), ("hist", "--hist")]);
    let (flag, file) = options.into_iter().find_map(|(id, flag)| {
        let file = report.get_raw(id)?.find(|v| Path::new(v).is_file())?;
        Some((flag, Path::new(file).display().to_string()))
    })?;
    let rule = match flag {
        "--elf" => {
            "--elf's PATH is optional: give LOG first (`report LOG --elf PATH`) or \
                    write --elf=PATH"
        }
        _ => "an option with a value takes the word after it: give LOG as well",
    };
    Some(format!("{flag} took {file:?} as its value, and LOG is required ({rule})"))
}

/// Runs `record`: boots, streams, reports; `Ok(false)` when the stream was damaged.
fn record(options: &Record) -> Result<bool, String> {
    let mut file = String::new();
    // `top` names the top-level instance, as in `report`.
    if let Some(name) = options.instance.as_deref().filter(|&name| name != "top") {
        file += &format!("instances/{name}/");
    }
    if let Some(cpu) = options.cpu {
        file += &format!("per_cpu/cpu{cpu}/");
    }
    file += "trace_pipe_raw";
    writable(options.format, &options.output)?;
    // The ELF is read before the kernel boots: a missing one is refused first.
    let symbols = options.elf.then(|| report::Symbols::read(Path::new(boot::KERNEL_ELF)));
    let symbols = symbols.transpose()?;
    let mut command = options.run.config(Serial::Pipe).command(boot::BIOS_IMAGE);
    boot::qemu::end_with_this_thread(&mut command);
    let child = command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run qemu-system-x86_64: {e} (run boot/setup.sh)"))?;
    // Killed however the run ends (an error, a panic).
    let mut child = Killed(child);
    // The serial log: the one asked for, or a temporary one, removed once the run
    // has reported or failed.
    let log = options.run.serial_log.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("record-{}.serial", std::process::id()))
    });
    let streamed = stream(options, &file, &mut child.0, &log);
    drop(child);
    let reported = streamed.and_then(|()| {
        let options = Report {
            log: log.clone(),
            stat: false,
            format: options.format,
            output: Some(options.output.clone()),
            instance: options.instance.clone().or_else(|| Some("top".into())),
            buffer: None,
            elf: options.elf.then(|| PathBuf::from(boot::KERNEL_ELF)),
            filter: Vec::new(),
            hist: Vec::new(),
        };
        report(&options, symbols).map_err(Failure::Logged)
    });
    // A temporary log is kept when it says what went wrong.
    match reported {
        Err(Failure::Logged(e)) if options.run.serial_log.is_none() && log.exists() => {
            Err(format!("{e} (the serial log is kept: {})", log.display()))
        }
        reported => {
            if options.run.serial_log.is_none() {
                let _ = std::fs::remove_file(&log);
            }
            reported.map_err(|(Failure::Refused(e) | Failure::Logged(e))| e)
        }
    }
}

/// Why a recording failed.
enum Failure {
    /// The kernel refused a command or the file to stream, with its message.
    Refused(String),
    /// Where the serial log, if any, says more: the kernel did not answer (no prompt,
    /// QEMU exited), the run could not go on (a pipe or the log failed), or the
    /// report of the whole recording failed.
    Logged(String),
}

impl From<String> for Failure {
    fn from(what: String) -> Failure {
        Failure::Logged(what)
    }
}

impl From<&str> for Failure {
    fn from(what: &str) -> Failure {
        Failure::Logged(what.into())
    }
}

/// A child process killed and waited for when dropped.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Refuses, before a recording, an output `record` could not write once it is done:
/// a file (made first as its `.partial`, as `report` writes a regular file) that
/// cannot be created, a directory given for a file, anything else (a device, a
/// pipe, a link: written in place) that cannot be opened for writing, or a directory
/// (CTF) whose parent is not one.
fn writable(format: Format, output: &Path) -> Result<(), String> {
    let refused = |why: &dyn std::fmt::Display| format!("-o {}: {why}", output.display());
    if format == Format::Ctf {
        let parent = output.parent().filter(|p| !p.as_os_str().is_empty());
        return match parent.is_none_or(Path::is_dir) {
            true => Ok(()),
            false => Err(refused(&"its parent is not a directory")),
        };
    }
    match std::fs::symlink_metadata(output) {
        Ok(m) if m.is_dir() => return Err(refused(&"a directory, where a file is written")),
        Ok(m) if !m.is_file() => {
            let opened = std::fs::OpenOptions::new().write(true).open(output);
            return opened.map(drop).map_err(|e| refused(&e));
        }
        _ => {}
    }
    let partial = partial(output);
    if partial.exists() {
        return Ok(());
    }
    std::fs::File::create(&partial)
        .and_then(|_| std::fs::remove_file(&partial))
        .map_err(|e| format!("{}: {e} (made first as {})", output.display(), partial.display()))
}

/// Drives the kernel's shell over the serial pipe of `child`: setup commands, then
/// `cat FILE` for the duration, the serial line written to `log_path`.
fn stream(
    options: &Record,
    file: &str,
    child: &mut std::process::Child,
    log_path: &Path,
) -> Result<(), Failure> {
    use std::io::Read;
    let mut stdin = child.stdin.take().ok_or("QEMU's serial input is not a pipe")?;
    let mut stdout = child.stdout.take().ok_or("QEMU's serial output is not a pipe")?;
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = stdout.read(&mut buf) {
            if tx.send(buf[..n].to_vec()).is_err() {
                return;
            }
        }
    });
    let log_error = |e: std::io::Error| format!("{}: {e}", log_path.display());
    let mut log = BufWriter::new(std::fs::File::create(log_path).map_err(log_error)?);
    let mut text = String::new();
    // Reads the serial line (into the log) until `done` accepts the text read since
    // the last call, which it returns; `None` when `limit` passed first.
    let mut until = |what: &str,
                     limit: Duration,
                     done: &dyn Fn(&str) -> bool|
     -> Result<Option<String>, String> {
        let deadline = std::time::Instant::now() + limit;
        loop {
            if done(&text) {
                return Ok(Some(std::mem::take(&mut text)));
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                Ok(bytes) => {
                    log.write_all(&bytes).map_err(log_error)?;
                    text.push_str(&String::from_utf8_lossy(&bytes).replace("\r\n", "\n"));
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) if left.is_zero() => {
                    return Ok(None);
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(_) => return Err(format!("QEMU exited while waiting for {what}")),
            }
        }
    };
    let prompt = |t: &str| {
        t.ends_with("# ") && t.rsplit('\n').next().is_some_and(|l| l.starts_with("tracefs:"))
    };
    let step = Duration::from_secs(60);
    let got = |read: Option<String>, what: &str| {
        read.ok_or_else(|| format!("no {what} after {}s", step.as_secs()))
    };
    got(until("shell prompt", step, &prompt)?, "shell prompt")?;
    let mut send = |line: &str| {
        stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("writing to QEMU: {e}"))
    };
    for command in &options.setup {
        send(&format!("{command}\r"))?;
        let output = got(
            until("prompt after the setup command", step, &prompt)?,
            "prompt after the setup command",
        )?;
        // The echoed command line, what it printed, the next prompt.
        let printed = output.split_once('\n').map_or("", |(_, rest)| rest);
        let printed = printed.rsplit_once('\n').map_or("", |(shown, _)| shown);
        if !printed.trim().is_empty() {
            let said = format!("the setup command {command:?} said: {}", printed.trim());
            return Err(Failure::Refused(said));
        }
    }
    send(&format!("cat {file}\r"))?;
    let begun = got(
        until("stream", step, &|t: &str| t.contains(trace::dump::BEGIN) || prompt(t))?,
        "stream",
    )?;
    if !begun.contains(trace::dump::BEGIN) {
        let said = begun.lines().nth(1).unwrap_or("nothing");
        return Err(Failure::Refused(format!("the kernel did not stream {file}: {said}")));
    }
    until("the end of the duration", Duration::from_secs(options.duration), &|_| false)?;
    send("q")?;
    got(
        until("end of the stream", step, &|t: &str| t.contains(trace::dump::END))?,
        "end of the stream",
    )?;
    send("poweroff\r")?;
    // QEMU exits when the kernel is off: the line closes.
    let _ = until("power off", step, &|_| false);
    Ok(log.flush().map_err(log_error)?)
}

fn boot(run: &Run, timeout: Option<u64>) -> ExitCode {
    let config = run.config(Serial::Terminal { log: run.serial_log.clone() });
    let outcome = match run_qemu(&config, timeout.map(Duration::from_secs)) {
        Ok(outcome) => outcome,
        Err(error) => {
            eprintln!(
                "boot: cannot run qemu-system-x86_64: {error} (run boot/setup.sh to install it)"
            );
            return ExitCode::from(Outcome::QemuError(None).exit_code());
        }
    };
    if outcome != Outcome::Success {
        eprintln!("boot: {outcome} (exit code {})", outcome.exit_code());
    }
    ExitCode::from(outcome.exit_code())
}

fn run_qemu(config: &Config, timeout: Option<Duration>) -> std::io::Result<Outcome> {
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

/// Runs `report`; `Ok(false)` when a dump had problems (reported on stderr, the rest
/// of the output written all the same). The log is read twice, a line at a time:
/// once to count the dumps, once to decode them one after the other, so memory
/// holds one dump (converting, also the sections kept of the last that has what was
/// asked), not the log; a log that is not a regular file is held ([`Log`]).
/// `symbols` are `--elf`'s, when the caller has read them already (`record` does,
/// to refuse a bad ELF before it boots).
fn report(options: &Report, symbols: Option<report::Symbols>) -> Result<bool, String> {
    if !options.hist.is_empty() && (options.stat || options.format != Format::Text) {
        return Err("--hist prints histograms as text; it goes with neither --stat nor \
                    another --format"
            .into());
    }
    if options.stat && options.format != Format::Text {
        return Err(format!(
            "--stat is a text summary; it does not go with --format {}",
            format_name(options.format)
        ));
    }
    if matches!(options.format, Format::Ctf | Format::PerfettoProto)
        && options.buffer == Some(Buffers::All)
    {
        return Err(format!(
            "--format {} holds one buffer; choose --buffer live or --buffer snapshot",
            format_name(options.format)
        ));
    }
    match (options.format, &options.output) {
        (Format::Ctf, None) => return Err("--format ctf needs -o DIR".into()),
        (Format::Tracedat, None) => return Err("--format tracedat needs -o FILE".into()),
        (Format::PerfettoProto, None) => {
            return Err("--format perfetto-proto needs -o FILE".into());
        }
        _ => {}
    }
    let symbols = match (symbols, options.elf.as_deref()) {
        (Some(symbols), _) => Some(symbols),
        (None, elf) => {
            elf.map(report::Symbols::read).transpose().map_err(|e| format!("--elf {e}"))?
        }
    };
    for (name, input) in [("LOG", Some(&options.log)), ("the --elf file", options.elf.as_ref())] {
        let Some((output, input)) = options.output.as_ref().zip(input) else { continue };
        if same_file(output, input) {
            return Err(format!(
                "-o {} is {name}, which the report reads: it would be overwritten; choose \
                 another output",
                output.display()
            ));
        }
        let partial = partial(output);
        if same_file(&partial, input) {
            return Err(format!(
                "-o {} is written as {} until it is complete, and that is {name}, which the \
                 report reads: it would be overwritten; choose another output",
                output.display(),
                partial.display()
            ));
        }
    }
    let selection = report::Selection::parse(&options.filter)?;
    let log = options.log.display();
    let input = Log::open(&options.log)?;
    let mut total = 0usize;
    input.for_each_line(|line| {
        total += usize::from(line.contains(trace::dump::BEGIN));
        Ok(())
    })?;
    if total == 0 {
        return Err(format!("{log}: no trace dump found"));
    }
    match (options.format, &options.output) {
        (
            Format::Text | Format::Perfetto | Format::PerfettoProto | Format::Tracedat,
            Some(path),
        ) => {
            // Anything but a regular file (a device such as /dev/null, a pipe, a
            // link) is written in place: a rename would put a file where it stood.
            let regular = std::fs::symlink_metadata(path).map_or(true, |m| m.is_file());
            if !regular {
                let file =
                    std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
                let out = &mut BufWriter::new(file);
                return convert(options, &input, symbols.as_ref(), &selection, total, out);
            }
            // A file is written beside its name and renamed into place once complete:
            // a report that fails leaves no file behind and an older one as it was.
            let partial = partial(path);
            // Named as asked, then the `.partial` file, which the tool makes first.
            let file = std::fs::File::create(&partial).map_err(|e| {
                format!("{}: {e} (made first as {})", path.display(), partial.display())
            })?;
            let result = convert(
                options,
                &input,
                symbols.as_ref(),
                &selection,
                total,
                &mut BufWriter::new(file),
            )
            .and_then(|clean| {
                std::fs::rename(&partial, path).map_err(|e| format!("{}: {e}", path.display()))?;
                Ok(clean)
            });
            if result.is_err() {
                let _ = std::fs::remove_file(&partial);
            }
            result
        }
        _ => {
            let stdout = &mut BufWriter::new(std::io::stdout().lock());
            convert(options, &input, symbols.as_ref(), &selection, total, stdout)
        }
    }
}

/// Decodes the `total` dumps of `input` one after the other and writes the report
/// to `out` (CTF: to its directory), stack frames symbolised with `symbols`. Text
/// reports every dump, one without what was asked as a line saying what it lacks;
/// the other formats convert the last dump that has it. No dump with it is an error.
fn convert(
    options: &Report,
    input: &Log,
    symbols: Option<&report::Symbols>,
    selection: &report::Selection,
    total: usize,
    out: &mut impl Write,
) -> Result<bool, String> {
    let log = options.log.display();
    let text = options.format == Format::Text;
    let (mut clean, mut found) = (true, false);
    let mut reader = trace::dump::Reader::new();
    let mut seen = 0;
    // The last dump with what was asked, by its number (the formats but text convert
    // it), and what the last without it lacks.
    let (mut last, mut lacking) = (None, None);
    let mut each = |dump: trace::dump::Dump| -> Result<(), String> {
        seen += 1;
        for problem in &dump.problems {
            clean = false;
            eprintln!("report: {log}:{}: {}", problem.line, problem.what);
        }
        let heading = format!("# dump {seen} of {total} (line {})", dump.line);
        let shown = match chosen(&dump, options.instance(), options.buffers()) {
            Ok(shown) => shown,
            Err(what) => {
                if text && total > 1 {
                    writeln!(out, "{heading} {what}").map_err(|e| options.write_error(e))?;
                }
                // A damaged dump's text is what is left of it, reported (exit 1).
                found |= text && !dump.problems.is_empty();
                lacking = Some(format!("the dump at line {} {what}", dump.line));
                return Ok(());
            }
        };
        if let Err(e) = elf_fits(options, symbols, &shown) {
            // One dump of several from another kernel is left out, and said so (in
            // text, the report is then partial: exit 1).
            if total == 1 {
                return Err(e);
            }
            eprintln!("report: {e}");
            let what = "was written by another kernel than the ELF's";
            if text {
                clean = false;
                writeln!(out, "{heading} {what}: left out").map_err(|e| options.write_error(e))?;
            }
            lacking = Some(format!("the dump at line {} {what}", dump.line));
            return Ok(());
        }
        let line = shown.line;
        // What `--filter` and `--hist` ask of the dump's events, before any of it is
        // written: a dump they do not fit (one of several) is left out, as above.
        let ready = match Ready::new(options, symbols, selection, shown) {
            Ok(ready) => ready,
            Err(e) if total == 1 => return Err(e),
            Err(e) => {
                if text {
                    writeln!(out, "{heading}: {e}").map_err(|e| options.write_error(e))?;
                }
                lacking = Some(format!("the dump at line {line}: {e}"));
                return Ok(());
            }
        };
        found = true;
        if !text {
            last = Some((seen, line, ready));
            return Ok(());
        }
        if total > 1 {
            writeln!(out, "{heading}").map_err(|e| options.write_error(e))?;
        }
        write_text(options, symbols, ready, out)
    };
    input.for_each_line(|line| reader.line(line).map_or(Ok(()), &mut each))?;
    if let Some(dump) = reader.finish() {
        each(dump)?;
    }
    if let (false, Some(what)) = (found, lacking) {
        return Err(match total {
            1 => what,
            _ => format!("none of the {total} dumps has it: {what}"),
        });
    }
    if let Some((number, line, ready)) = last {
        if total > 1 && number == total {
            eprintln!("report: {total} dumps in the log; converting the last (line {line})");
        } else if total > 1 {
            eprintln!(
                "report: {total} dumps in the log; converting dump {number} (line {line}), the \
                 last that has what was asked"
            );
        }
        write_converted(options, symbols, ready.traces, out)?;
    }
    out.flush().map_err(|e| options.write_error(e))?;
    Ok(clean)
}

/// What `report` shows of one dump: the sections chosen, as decoded, and the line and
/// kernel fingerprint of the dump.
struct Shown {
    /// 1-based line of the dump's begin marker.
    line: usize,
    /// The fingerprint of the dump's kernel's functions, if it carries one.
    fingerprint: Option<u64>,
    /// The sections chosen.
    traces: Vec<trace::dump::Section>,
}

/// One dump's sections as a report writes them: their events those `--filter` keeps,
/// stacks symbolised where the output names them, and the `--hist` tables of each.
struct Ready {
    /// The sections.
    traces: Vec<trace::dump::Section>,
    /// Per section, its histograms (`--hist`; none without it).
    hists: Vec<trace::histograms::Histograms>,
}

impl Ready {
    /// Readies the sections of `shown` (the ELF checked already, [`elf_fits`]); an
    /// error: a `--filter` or `--hist` spec that does not fit the dump's events.
    fn new(
        options: &Report,
        symbols: Option<&report::Symbols>,
        selection: &report::Selection,
        shown: Shown,
    ) -> Result<Ready, String> {
        let mut traces = shown.traces;
        // Filters judge the values as recorded, before stack addresses become names.
        for trace in &mut traces {
            selection.apply(trace, symbols)?;
        }
        // Histograms read the values as recorded, `.sym` keys named as they are
        // written; trace.dat keeps the addresses, and carries the symbols for
        // trace-cmd to name them.
        let hists = match options.hist.is_empty() {
            true => Vec::new(),
            false => {
                let table = symbols.and_then(report::Symbols::table);
                let new = |t| trace::histograms::Histograms::new(t, &options.hist, table.as_ref());
                traces.iter().map(new).collect::<Result<_, _>>()?
            }
        };
        if let Some(names) =
            symbols.filter(|_| options.hist.is_empty() && options.format != Format::Tracedat)
        {
            traces.iter_mut().for_each(|t| names.symbolize(t));
        }
        Ok(Ready { traces, hists })
    }
}

/// Whether `options.elf` (as `symbols`) is the kernel that wrote the dump `shown`:
/// the error names the log's line and the ELF.
fn elf_fits(
    options: &Report,
    symbols: Option<&report::Symbols>,
    shown: &Shown,
) -> Result<(), String> {
    let (Some(symbols), Some(elf)) = (symbols, &options.elf) else { return Ok(()) };
    symbols
        .check(shown.fingerprint)
        .map_err(|e| format!("{}:{}: {}: {e}", options.log.display(), shown.line, elf.display()))
}

/// Writes one dump's report as text to `out`: its sections' events, statistics
/// (`--stat`) or histograms (`--hist`).
fn write_text(
    options: &Report,
    symbols: Option<&report::Symbols>,
    ready: Ready,
    out: &mut impl Write,
) -> Result<(), String> {
    if options.hist.is_empty() {
        for trace in &ready.traces {
            if options.stat {
                report::write_stat(trace, out).map_err(|e| options.write_error(e))?;
            } else {
                report::write_text(trace, out).map_err(|e| options.write_error(e))?;
            }
        }
        return Ok(());
    }
    let table = symbols.and_then(report::Symbols::table);
    for (trace, hists) in ready.traces.iter().zip(&ready.hists) {
        hists.add(trace);
        let mut text = format!("# instance: {}\n", trace::text::Controls(&trace.heading()));
        hists.write(table.as_ref(), &mut text).map_err(|_| "formatting a histogram")?;
        writeln!(out, "{text}").map_err(|e| options.write_error(e))?;
    }
    Ok(())
}

/// Converts one dump to `options.format`, not text, written to `out` (CTF: to its
/// directory).
fn write_converted(
    options: &Report,
    symbols: Option<&report::Symbols>,
    traces: Vec<trace::dump::Section>,
    out: &mut impl Write,
) -> Result<(), String> {
    let write_error = |e| options.write_error(e);
    match (options.format, &options.output) {
        (Format::Ctf, Some(dir)) => {
            let shown = "CTF shows each at the time before it";
            report::backwards_notes(&traces[..1], shown)
                .iter()
                .for_each(|n| eprintln!("report: {n}"));
            report::write_ctf(&traces[0], dir).map_err(|e| format!("{}: {e}", dir.display()))
        }
        (Format::Tracedat, _) => {
            let notes = report::clock_notes(&traces).into_iter().chain(report::loss_notes(&traces));
            notes.for_each(|note| eprintln!("report: {note}"));
            let shown = "trace.dat puts each CPU's records in time order";
            report::backwards_notes(&traces, shown).iter().for_each(|n| eprintln!("report: {n}"));
            report::write_tracedat(&traces, symbols, out).map_err(write_error)
        }
        (Format::PerfettoProto, _) => {
            report::write_perfetto_proto(&traces[0], out).map_err(write_error)
        }
        _ => report::write_perfetto_of(&traces, out).map_err(write_error),
    }
}

/// Where a report to the file `path` is written until it is complete, then renamed
/// to `path`: `PATH.partial`.
fn partial(path: &Path) -> PathBuf {
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    PathBuf::from(partial)
}

/// Whether `a` and `b` name one existing file.
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// The name of a format, as `--format` takes it.
fn format_name(format: Format) -> String {
    format.to_possible_value().map_or_else(String::new, |v| v.get_name().into())
}

/// What `report` shows of `dump`: the buffers chosen of every instance, or of the one
/// named; never none. The error says what the dump lacks and what it has: `has no
/// snapshot of instance "latency" (it has "top")`, `has no live buffer of any instance
/// (it has "a (snapshot)")`.
fn chosen(dump: &trace::dump::Dump, name: Option<&str>, buffers: Buffers) -> Result<Shown, String> {
    let shown = |traces| Shown { line: dump.line, fingerprint: dump.symbols, traces };
    let traces = dump.sections();
    if traces.is_empty() {
        return Err(match dump.problems.is_empty() {
            true => "holds no instance (the kernel dumped none)".into(),
            false => "holds no instance: the chunks that held them were lost".into(),
        });
    }
    let known: Vec<String> = traces.iter().map(|t| format!("{:?}", t.heading())).collect();
    let wanted = |t: &trace::dump::Section| name.is_none_or(|name| t.instance == name);
    let found: Vec<_> =
        traces.into_iter().filter(|t| wanted(t) && buffers.wants(t.buffer)).collect();
    if found.is_empty() {
        let of = name.map_or(String::from("any instance"), |name| format!("instance {name:?}"));
        let what = match buffers {
            Buffers::Snapshot => format!("no snapshot of {of}"),
            Buffers::Live => format!("no live buffer of {of}"),
            Buffers::All => format!("no {of}"),
        };
        return Err(format!("has {what} (it has {})", known.join(", ")));
    }
    Ok(shown(found))
}
