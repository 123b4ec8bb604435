//! `cargo run`: boot the kernel in QEMU with the serial line on the terminal.
//! `cargo run -- report LOG`: read the trace dumps in a captured serial log.

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
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: Run,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Find the trace dumps in a serial log, verify them, and print or convert them.
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
    /// A CTF 1.8 trace directory for babeltrace2.
    Ctf,
    /// A trace-cmd trace.dat (file format 6) for trace-cmd and KernelShark.
    Tracedat,
}

/// `report` options.
#[derive(Parser, Debug)]
struct Report {
    /// The captured serial log (other output around the dumps is fine).
    log: PathBuf,
    /// Summarise instead of listing events (text only).
    #[arg(long)]
    stat: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Output file (perfetto, default stdout; tracedat, required) or directory (ctf;
    /// required).
    #[arg(short, long, value_name = "PATH")]
    output: Option<PathBuf>,
    /// The instance to convert (perfetto, ctf, tracedat); default the top-level one. Text
    /// reports every instance unless this is given.
    #[arg(long, value_name = "NAME")]
    instance: Option<String>,
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
    };
    let outcome = match run_qemu(&config, run.timeout.map(Duration::from_secs)) {
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
/// of the output written all the same).
fn report(options: &Report) -> Result<bool, String> {
    let log = std::fs::read(&options.log).map_err(|e| format!("{}: {e}", options.log.display()))?;
    let log = String::from_utf8_lossy(&log);
    let dumps = trace::dump::parse(&log);
    if dumps.is_empty() {
        return Err(format!("{}: no trace dump found", options.log.display()));
    }
    let mut clean = true;
    for dump in &dumps {
        for problem in &dump.problems {
            clean = false;
            eprintln!("report: {}:{}: {}", options.log.display(), problem.line, problem.what);
        }
    }
    let write_error = |e: std::io::Error| {
        // The reader went away (`report LOG | head`): stop quietly, as Unix tools do.
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        format!("writing the report: {e}")
    };
    match options.format {
        Format::Text => {
            let stdout = std::io::stdout();
            let mut out = BufWriter::new(stdout.lock());
            for (n, dump) in dumps.iter().enumerate() {
                if dumps.len() > 1 {
                    writeln!(out, "# dump {} of {} (line {})", n + 1, dumps.len(), dump.line)
                        .map_err(write_error)?;
                }
                for trace in chosen(dump, options.instance.as_deref())? {
                    if options.stat {
                        report::write_stat(&trace, &mut out).map_err(write_error)?;
                    } else {
                        report::write_text(&trace, &mut out).map_err(write_error)?;
                    }
                }
            }
            out.flush().map_err(write_error)?;
        }
        Format::Perfetto | Format::Ctf | Format::Tracedat => {
            let dump = dumps.last().expect("not empty");
            if dumps.len() > 1 {
                eprintln!(
                    "report: {} dumps in the log; converting the last (line {})",
                    dumps.len(),
                    dump.line
                );
            }
            let name = options.instance.as_deref().unwrap_or("top");
            let trace = chosen(dump, Some(name))?.pop().expect("chosen returns one when named");
            match (options.format, &options.output) {
                (Format::Ctf, None) => return Err("--format ctf needs -o DIR".into()),
                (Format::Tracedat, None) => return Err("--format tracedat needs -o FILE".into()),
                (Format::Tracedat, Some(file)) => {
                    write_file(file, |out| report::write_tracedat(&trace, out))?
                }
                (Format::Ctf, Some(dir)) => {
                    report::write_ctf(&trace, dir).map_err(|e| format!("{}: {e}", dir.display()))?
                }
                (_, Some(file)) => write_file(file, |out| report::write_perfetto(&trace, out))?,
                (_, None) => report::write_perfetto(&trace, &mut std::io::stdout().lock())
                    .map_err(write_error)?,
            }
        }
    }
    Ok(clean)
}

/// The instances of `dump` to report: all, or the one named.
fn chosen(dump: &trace::dump::Dump, name: Option<&str>) -> Result<Vec<report::Trace>, String> {
    let traces = report::traces(dump);
    match name {
        None => Ok(traces),
        Some(name) => {
            let known: Vec<String> = traces.iter().map(|t| t.instance.clone()).collect();
            let found: Vec<_> = traces.into_iter().filter(|t| t.instance == name).collect();
            if found.is_empty() {
                Err(format!(
                    "the dump at line {} has no instance {name:?} (it has: {})",
                    dump.line,
                    known.join(", ")
                ))
            } else {
                Ok(found)
            }
        }
    }
}

fn write_file(
    path: &Path,
    write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> Result<(), String> {
    let mut file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    write(&mut file).map_err(|e| format!("{}: {e}", path.display()))
}
