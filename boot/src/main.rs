//! `cargo run`: boot the kernel in QEMU with the serial line on the terminal.
//! `cargo run -- report LOG`: read the trace dumps in a captured serial log.

use boot::qemu::{Config, Outcome, Serial};
use boot::report;
use clap::{Parser, Subcommand, ValueEnum};
use std::io::{BufRead, BufReader, BufWriter, Write};
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

#[derive(Subcommand, Debug)]
enum Command {
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
    /// Use KVM instead of TCG.
    #[arg(long)]
    kvm: bool,
    /// Copy everything the kernel writes to the serial line into FILE.
    #[arg(long, value_name = "FILE")]
    serial_log: Option<PathBuf>,
    /// A guest reset (`reboot`, a panic with `panic_reboot 1`, a triple fault) reboots
    /// the guest with its memory kept, so `instances/last_boot` holds the previous
    /// boot's trace; without it a reset ends QEMU (exit code 4).
    #[arg(long)]
    reboot: bool,
    /// Kill QEMU after SECONDS (exit code 3).
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<u64>,
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
    fn wants(self, buffer: report::BufferKind) -> bool {
        match self {
            Buffers::All => true,
            Buffers::Live => buffer == report::BufferKind::Live,
            Buffers::Snapshot => buffer == report::BufferKind::Snapshot,
        }
    }
}

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
    /// The instance to convert (perfetto, perfetto-proto, ctf, tracedat); default the
    /// top-level one. Text reports every instance unless this is given.
    #[arg(long, value_name = "NAME")]
    instance: Option<String>,
    /// Which buffers of each instance: its live buffer, the snapshot it kept, or all
    /// (each apart: a section each in text, a process each in perfetto). Default all
    /// for text and perfetto; ctf, tracedat and perfetto-proto hold one buffer:
    /// default live.
    #[arg(long, value_enum, value_name = "BUFFER")]
    buffer: Option<Buffers>,
    /// The kernel ELF the dump's kernel ran: stack frames print as `function+0xoffset`
    /// (addresses otherwise). Without PATH, the kernel this build boots.
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = boot::KERNEL_ELF)]
    elf: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Report(options)) => match report(&options) {
            Ok(clean) => ExitCode::from(if clean { 0 } else { 1 }),
            Err(error) => {
                eprintln!("report: {error}");
                ExitCode::from(2)
            }
        },
        None => boot(&cli.run),
    }
}

fn boot(run: &Run) -> ExitCode {
    let config = Config {
        smp: run.smp,
        memory_mib: run.memory,
        kvm: run.kvm,
        serial: Serial::Terminal { log: run.serial_log.clone() },
        reboot: run.reboot,
    };
    let outcome = match run_qemu(&config, run.timeout.map(Duration::from_secs)) {
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
/// holds one dump, not the log.
fn report(options: &Report) -> Result<bool, String> {
    if options.stat && options.format != Format::Text {
        return Err(format!(
            "--stat is a text summary; it does not go with --format {}",
            format_name(options.format)
        ));
    }
    if matches!(options.format, Format::Ctf | Format::Tracedat | Format::PerfettoProto)
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
    let symbols = options.elf.as_deref().map(report::Symbols::read).transpose()?;
    let log = options.log.display();
    let mut total = 0usize;
    for_each_line(&options.log, |line| {
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
            // Written beside its name and renamed into place once complete: a report
            // that fails leaves no file behind and an older one as it was.
            let mut partial = path.clone().into_os_string();
            partial.push(".partial");
            let partial = PathBuf::from(partial);
            let file = std::fs::File::create(&partial)
                .map_err(|e| format!("{}: {e}", partial.display()))?;
            let result = convert(options, symbols.as_ref(), total, &mut BufWriter::new(file))
                .and_then(|clean| {
                    std::fs::rename(&partial, path)
                        .map_err(|e| format!("{}: {e}", path.display()))?;
                    Ok(clean)
                });
            if result.is_err() {
                let _ = std::fs::remove_file(&partial);
            }
            result
        }
        _ => {
            convert(options, symbols.as_ref(), total, &mut BufWriter::new(std::io::stdout().lock()))
        }
    }
}

/// Decodes the `total` dumps of the log one after the other and writes the report
/// to `out` (CTF: to its directory), stack frames symbolised with `symbols`.
fn convert(
    options: &Report,
    symbols: Option<&report::Symbols>,
    total: usize,
    out: &mut impl Write,
) -> Result<bool, String> {
    let log = options.log.display();
    let write_error = |e: std::io::Error| {
        // The reader went away (`report LOG | head`): stop quietly, as Unix tools do.
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        match &options.output {
            Some(path) => format!("{}: {e}", path.display()),
            None => format!("writing the report: {e}"),
        }
    };
    let mut clean = true;
    let mut reader = trace::dump::Reader::new();
    let mut seen = 0;
    let mut each = |dump: trace::dump::Dump| -> Result<(), String> {
        seen += 1;
        for problem in &dump.problems {
            clean = false;
            eprintln!("report: {log}:{}: {}", problem.line, problem.what);
        }
        match options.format {
            Format::Text => {
                if total > 1 {
                    writeln!(out, "# dump {seen} of {total} (line {})", dump.line)
                        .map_err(write_error)?;
                }
                let buffers = options.buffer.unwrap_or(Buffers::All);
                for trace in chosen(&dump, options.instance.as_deref(), buffers, symbols)? {
                    if options.stat {
                        report::write_stat(&trace, out).map_err(write_error)?;
                    } else {
                        report::write_text(&trace, out).map_err(write_error)?;
                    }
                }
            }
            Format::Perfetto | Format::PerfettoProto | Format::Ctf | Format::Tracedat
                if seen == total =>
            {
                if total > 1 {
                    eprintln!(
                        "report: {total} dumps in the log; converting the last (line {})",
                        dump.line
                    );
                }
                let name = options.instance.as_deref().unwrap_or("top");
                let buffers = options.buffer.unwrap_or(match options.format {
                    Format::Perfetto => Buffers::All,
                    _ => Buffers::Live,
                });
                let traces = chosen(&dump, Some(name), buffers, symbols)?;
                match (options.format, &options.output) {
                    (Format::Ctf, Some(dir)) => report::write_ctf(&traces[0], dir)
                        .map_err(|e| format!("{}: {e}", dir.display()))?,
                    (Format::Tracedat, _) => {
                        report::write_tracedat(&traces[0], out).map_err(write_error)?
                    }
                    (Format::PerfettoProto, _) => {
                        report::write_perfetto_proto(&traces[0], out).map_err(write_error)?
                    }
                    _ => report::write_perfetto_of(&traces, out).map_err(write_error)?,
                }
            }
            Format::Perfetto | Format::PerfettoProto | Format::Ctf | Format::Tracedat => {}
        }
        Ok(())
    };
    for_each_line(&options.log, |line| reader.line(line).map_or(Ok(()), &mut each))?;
    if let Some(dump) = reader.finish() {
        each(dump)?;
    }
    out.flush().map_err(write_error)?;
    Ok(clean)
}

/// Calls `each` with every line of the file at `path` (invalid UTF-8 replaced),
/// reading one line at a time; stops at its first error.
fn for_each_line(
    path: &Path,
    mut each: impl FnMut(&str) -> Result<(), String>,
) -> Result<(), String> {
    let read_error = |e: std::io::Error| format!("{}: {e}", path.display());
    let mut file = BufReader::new(std::fs::File::open(path).map_err(read_error)?);
    let mut line = Vec::new();
    while file.read_until(b'\n', &mut line).map_err(read_error)? > 0 {
        each(&String::from_utf8_lossy(&line))?;
        line.clear();
    }
    Ok(())
}

/// The name of a format, as `--format` takes it.
fn format_name(format: Format) -> String {
    format.to_possible_value().map_or_else(String::new, |v| v.get_name().into())
}

/// The sections of `dump` to report: the buffers chosen of every instance, or of
/// the one named (then never none), their stacks symbolised with `symbols` if given.
fn chosen(
    dump: &trace::dump::Dump,
    name: Option<&str>,
    buffers: Buffers,
    symbols: Option<&report::Symbols>,
) -> Result<Vec<report::Trace>, String> {
    let mut traces = report::traces(dump);
    if let Some(symbols) = symbols {
        traces.iter_mut().for_each(|t| symbols.symbolize(t));
    }
    let Some(name) = name else {
        return Ok(traces.into_iter().filter(|t| buffers.wants(t.buffer)).collect());
    };
    if traces.is_empty() {
        return Err(format!(
            "the dump at line {} holds no instance: the chunks that held them were lost",
            dump.line
        ));
    }
    let known: Vec<String> = traces.iter().map(|t| format!("{:?}", t.heading())).collect();
    let found: Vec<_> =
        traces.into_iter().filter(|t| t.instance == name && buffers.wants(t.buffer)).collect();
    if found.is_empty() {
        let what = match buffers {
            Buffers::Snapshot => format!("no snapshot of instance {name:?}"),
            Buffers::Live => format!("no live buffer of instance {name:?}"),
            Buffers::All => format!("no instance {name:?}"),
        };
        return Err(format!(
            "the dump at line {} has {what} (it has {})",
            dump.line,
            known.join(", ")
        ));
    }
    Ok(found)
}
