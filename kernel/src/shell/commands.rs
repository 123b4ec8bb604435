//! The commands of the shell.

use super::pipe::Output;
use super::tracefs::{self, File, Node};
use super::{Command, CommandError, Shell};
use crate::arch::qemu::{self, ExitCode};
use crate::arch::{self, percpu};
use crate::dump::{self, Buffers, Cpus, DumpConfig};
use crate::selftest::{bench, fault, stress};
use crate::{
    barrier, clock, lockup, memory, persist, print, println, serial, smp, symbols, timer, tracing,
    watchdog,
};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;
use shell_core::parse::Redirect;
use trace::Mode;

/// Every command, in the order `help` lists them.
pub static COMMANDS: &[Command] = &[
    Command {
        name: "help",
        usage: "",
        help: "list the commands",
        redirects: false,
        paths: false,
        pipes: true,
        run: help,
    },
    Command {
        name: "ls",
        usage: "[PATH...]",
        help: "list directories of the tracing tree",
        redirects: false,
        paths: true,
        pipes: true,
        run: ls,
    },
    Command {
        name: "cd",
        usage: "[PATH]",
        help: "change directory (default /)",
        redirects: false,
        paths: true,
        pipes: false,
        run: cd,
    },
    Command {
        name: "pwd",
        usage: "",
        help: "print the working directory",
        redirects: false,
        paths: false,
        pipes: true,
        run: pwd,
    },
    Command {
        name: "cat",
        usage: "FILE...",
        help: "print files (trace_pipe streams until a key is pressed)",
        redirects: false,
        paths: true,
        pipes: true,
        run: cat,
    },
    Command {
        name: "echo",
        usage: "[-n] [VALUE...] [> FILE | >> FILE]",
        help: "print VALUE (-n: without the newline), or write it to FILE (>> appends)",
        redirects: true,
        paths: false,
        pipes: true,
        run: echo,
    },
    Command {
        name: "mkdir",
        usage: "instances/NAME...",
        help: "create instances",
        redirects: false,
        paths: true,
        pipes: false,
        run: mkdir,
    },
    Command {
        name: "rmdir",
        usage: "instances/NAME...",
        help: "remove instances",
        redirects: false,
        paths: true,
        pipes: false,
        run: rmdir,
    },
    Command {
        name: "uptime",
        usage: "",
        help: "time since boot, timer ticks, heap use",
        redirects: false,
        paths: false,
        pipes: true,
        run: uptime,
    },
    Command {
        name: "cpus",
        usage: "",
        help: "the CPUs online and their timer ticks",
        redirects: false,
        paths: false,
        pipes: true,
        run: cpus,
    },
    Command {
        name: "functions",
        usage: "[GLOB]",
        help: "the function entry sites: address, nop/call, bytes, name; a hash of them all",
        redirects: false,
        paths: false,
        pipes: true,
        run: functions,
    },
    Command {
        name: "keys",
        usage: "[SYSTEM:EVENT]",
        help: "the tracepoint sites (static keys): address, event, nop/jmp, bytes, where",
        redirects: false,
        paths: false,
        pipes: true,
        run: keys,
    },
    Command {
        name: "stress",
        usage: "[overwrite|discard|both] [MS] [cycle N [functions]] [panic]",
        help: "ring buffer stress test on every CPU (default: both modes, 1000 ms); cycle: \
               arm and disarm a key N times meanwhile (functions: the function tracer too); \
               panic: panic at the end, while every CPU writes",
        redirects: false,
        paths: false,
        pipes: false,
        run: stress,
    },
    Command {
        name: "fault",
        usage: "page [ADDR] | gp | ud | de | bp | stack [CPU]",
        help: "raise a CPU exception on purpose (bp is recoverable)",
        redirects: false,
        paths: false,
        pipes: false,
        run: fault,
    },
    Command {
        name: "panic",
        usage: "[CPU | both CPU | irq | console | heap | nested | dump [CHUNKS]]",
        help: "panic on purpose: here, on CPU, here and on CPU (in an NMI) during this panic, in an interrupt, holding the console or heap lock, nested, or with a dump that panics (after CHUNKS lines of its block; default 0)",
        redirects: false,
        paths: false,
        pipes: false,
        run: panic,
    },
    Command {
        name: "dump",
        usage: "[on-panic] [all|orig_cpu] [live|snapshot|both] [last N] [instance NAME]...",
        help: "print the panic-format trace dump now; 'on-panic' sets (or shows) what a panic dumps",
        redirects: false,
        paths: false,
        pipes: true,
        run: dump,
    },
    Command {
        name: "bench",
        usage: "[ITERATIONS]",
        help: "cost of disabled/enabled tracepoints vs the raw ring write (default 100000)",
        redirects: false,
        paths: false,
        pipes: false,
        run: bench,
    },
    Command {
        name: "barrier",
        usage: "[MS]",
        help: "memory barrier self-test: every CPU runs barriers at once (default 500 ms)",
        redirects: false,
        paths: false,
        pipes: false,
        run: barrier,
    },
    Command {
        name: "nowait",
        usage: "",
        help: "test aid: the tracer's control operations with interrupts off, each refused",
        redirects: false,
        paths: false,
        pipes: false,
        run: nowait,
    },
    Command {
        name: "midpatch",
        usage: "",
        help: "test aid: patches selftest:midpatch's site and midpatch::callee's entry each way, every CPU running both before and after each step of the int3 protocol",
        redirects: false,
        paths: false,
        pipes: false,
        run: midpatch,
    },
    Command {
        name: "latency",
        usage: "[spike MS | threshold MS | rearm | wait MS]",
        help: "the latency watchdog driver: status, provoke a late tick, re-arm, wait for a capture (a key stops the wait)",
        redirects: false,
        paths: false,
        pipes: false,
        run: latency,
    },
    Command {
        name: "lockup",
        usage: "[threshold MS | spin [CPU | all | writing | nmi CPU]]",
        help: "the hard lockup detector: status, threshold (0: off), hang a CPU or every CPU with interrupts off (writing: this CPU, in the middle of a trace write; nmi: another CPU, in an NMI handler)",
        redirects: false,
        paths: false,
        pipes: false,
        run: lockup,
    },
    Command {
        name: "backtrace",
        usage: "",
        help: "every other CPU's call chain, by NMI (sysrq-l)",
        redirects: false,
        paths: false,
        pipes: true,
        run: backtrace,
    },
    Command {
        name: "reboot",
        usage: "",
        help: "warm reset: save instances/boot_map, reset keeping memory",
        redirects: false,
        paths: false,
        pipes: false,
        run: reboot,
    },
    Command {
        name: "panic_reboot",
        usage: "[0 | 1]",
        help: "show or set whether a panic saves boot_map and reboots after its dump",
        redirects: false,
        paths: false,
        pipes: true,
        run: panic_reboot,
    },
    Command {
        name: "scribble",
        usage: "CPU",
        help: "test aid: save boot_map, overwrite CPU's saved ring, reboot",
        redirects: false,
        paths: false,
        pipes: false,
        run: scribble,
    },
    Command {
        name: "poweroff",
        usage: "",
        help: "leave QEMU with success",
        redirects: false,
        paths: false,
        pipes: false,
        run: poweroff,
    },
];

fn no_args(args: &[&str]) -> Result<(), CommandError> {
    if args.is_empty() { Ok(()) } else { Err(CommandError::Usage) }
}

/// `COMMAND: PATH: ERROR` style failure.
fn fs_error(path: &str, error: tracefs::FsError) -> CommandError {
    CommandError::Failed(format!("{path}: {error}"))
}

fn help(
    _: &mut Shell,
    args: &[&str],
    _: Option<&Redirect>,
    out: &mut Output,
) -> Result<(), CommandError> {
    no_args(args)?;
    for command in COMMANDS {
        let synopsis = if command.usage.is_empty() {
            command.name.into()
        } else {
            format!("{} {}", command.name, command.usage)
        };
        let _ = writeln!(out, "  {synopsis:<46} {}", command.help);
    }
    let _ = writeln!(
        out,
        "Files are ftrace's: see Documentation/trace/ftrace.rst. Tab completes paths."
    );
    Ok(())
}

fn ls(
    shell: &mut Shell,
    args: &[&str],
    _: Option<&Redirect>,
    out: &mut Output,
) -> Result<(), CommandError> {
    let paths = if args.is_empty() { &["."][..] } else { args };
    // Several directories are listed each under its name, as coreutils do.
    let titled = paths.len() > 1;
    for (i, path) in paths.iter().enumerate() {
        let located = tracefs::resolve(shell.cwd(), path).map_err(|e| fs_error(path, e))?;
        match located.node {
            Node::File(_) => {
                let _ = writeln!(out, "{path}");
            }
            Node::Dir(_) => {
                let names = tracefs::list(&located).map_err(|e| fs_error(path, e))?;
                if titled {
                    let _ = writeln!(out, "{}{path}:", if i > 0 { "\n" } else { "" });
                }
                for name in names {
                    let _ = writeln!(out, "{name}");
                }
            }
        }
    }
    Ok(())
}

fn cd(
    shell: &mut Shell,
    args: &[&str],
    _: Option<&Redirect>,
    _out: &mut Output,
) -> Result<(), CommandError> {
    let path = match args {
        [] => "/",
        [path] => path,
        _ => return Err(CommandError::Usage),
    };
    let located = tracefs::resolve(shell.cwd(), path).map_err(|e| fs_error(path, e))?;
    match located.node {
        Node::Dir(_) => {
            shell.cwd = located.path;
            Ok(())
        }
        Node::File(_) => Err(fs_error(path, tracefs::FsError::NotDir)),
    }
}

fn pwd(
    shell: &mut Shell,
    args: &[&str],
    _: Option<&Redirect>,
    out: &mut Output,
) -> Result<(), CommandError> {
    no_args(args)?;
    let _ = writeln!(out, "{}", shell.cwd());
    Ok(())
}

fn cat(
    shell: &mut Shell,
    args: &[&str],
    _: Option<&Redirect>,
    out: &mut Output,
) -> Result<(), CommandError> {
    if args.is_empty() {
        return Err(CommandError::Usage);
    }
    // As coreutils' `cat`: a file that fails does not stop the others.
    let mut failures = Vec::new();
    for path in args {
        match cat_one(shell, path, out) {
            Ok(()) => {}
            Err(CommandError::Failed(failure)) => failures.push(failure),
            Err(usage) => return Err(usage),
        }
        if out.stopped().is_some() {
            break;
        }
    }
    failed("cat", failures)
}

/// `cat`'s work for one path.
fn cat_one(shell: &mut Shell, path: &str, out: &mut Output) -> Result<(), CommandError> {
    let located = tracefs::resolve(shell.cwd(), path).map_err(|e| fs_error(path, e))?;
    let pipe = match located.node {
        Node::File(File::TracePipe) => Some((None, false)),
        Node::File(File::CpuTracePipe(cpu)) => Some((Some(cpu), false)),
        Node::File(File::TracePipeRaw) => Some((None, true)),
        Node::File(File::CpuTracePipeRaw(cpu)) => Some((Some(cpu), true)),
        _ => None,
    };
    match pipe {
        // A consuming read would empty the previous boot's trace.
        Some(_) if let Err(error) = tracefs::may_change(&located) => Err(fs_error(path, error)),
        Some((cpu, raw)) => {
            // Streams until any key; the key is consumed (Ctrl-C shows as such).
            let layout = tracefs::layout(&located.instance);
            let mut interrupted = false;
            let stop = || match serial::try_read_byte() {
                Some(byte) => {
                    interrupted = byte == 0x03;
                    true
                }
                None => false,
            };
            // Between records: sleep until an interrupt or a key.
            let wait = || crate::arch::irq::wait_for_interrupt_unless(serial::input_pending);
            let read = if raw {
                crate::dump::stream_raw(out, &located.instance, cpu, stop, wait)
            } else {
                tracing::stream_pipe(out, &located.instance, cpu, &layout, stop, wait)
            };
            if interrupted {
                out.interrupt();
            }
            read.map_err(|reason| CommandError::Failed(format!("{path}: {reason}")))
        }
        None => tracefs::read(&located, out).map_err(|e| fs_error(path, e)),
    }
}

fn echo(
    shell: &mut Shell,
    args: &[&str],
    redirect: Option<&Redirect>,
    out: &mut Output,
) -> Result<(), CommandError> {
    // `-n`, as a shell's: no newline after the value (a write to a file never ends
    // with one: the files take the value alone).
    let (newline, args) = match args.split_first() {
        Some((&"-n", rest)) => (false, rest),
        _ => (true, args),
    };
    let value = args.join(" ");
    let Some(redirect) = redirect else {
        let _ = if newline { writeln!(out, "{value}") } else { write!(out, "{value}") };
        return Ok(());
    };
    let path = redirect.path.as_str();
    let located = tracefs::resolve(shell.cwd(), path).map_err(|e| fs_error(path, e))?;
    tracefs::write(&located, &value, redirect.append).map_err(|e| fs_error(path, e))
}

fn mkdir(
    shell: &mut Shell,
    args: &[&str],
    _: Option<&Redirect>,
    _out: &mut Output,
) -> Result<(), CommandError> {
    each_path("mkdir", args, |path| tracefs::mkdir(shell.cwd(), path))
}

fn rmdir(
    shell: &mut Shell,
    args: &[&str],
    _: Option<&Redirect>,
    _out: &mut Output,
) -> Result<(), CommandError> {
    each_path("rmdir", args, |path| tracefs::rmdir(shell.cwd(), path))
}

/// Runs `op` on every path in turn, as coreutils do: one that fails does not stop
/// the others, and each failure is reported on a line of its own (`NAME: PATH: ...`).
fn each_path(
    name: &str,
    paths: &[&str],
    mut op: impl FnMut(&str) -> Result<(), tracefs::FsError>,
) -> Result<(), CommandError> {
    if paths.is_empty() {
        return Err(CommandError::Usage);
    }
    let failures: Vec<String> =
        paths.iter().filter_map(|path| op(path).err().map(|e| format!("{path}: {e}"))).collect();
    failed(name, failures)
}

/// The failures of a command that went on past them, each on a line of its own
/// (`NAME: ...`), or success if there were none.
fn failed(name: &str, failures: Vec<String>) -> Result<(), CommandError> {
    match failures.is_empty() {
        true => Ok(()),
        false => Err(CommandError::Failed(failures.join(&format!("\n{name}: ")))),
    }
}

fn uptime(
    _: &mut Shell,
    args: &[&str],
    _: Option<&Redirect>,
    out: &mut Output,
) -> Result<(), CommandError> {
    no_args(args)?;
    let ns = clock::now_ns();
    let (used, size) = memory::heap::usage();
    let _ = writeln!(out, "up {}.{:09} s", ns / 1_000_000_000, ns % 1_000_000_000);
    let _ = writeln!(out, "timer ticks: {} on cpu0 ({} Hz per CPU)", timer::ticks(0), timer::HZ);
    let _ = writeln!(out, "tsc: {} kHz", clock::tsc_hz() / 1000);
    let _ = writeln!(out, "heap: {used} of {size} bytes in use");
    let _ = writeln!(out, "serial receive overruns: {}", serial::rx_overruns());
    Ok(())
}

fn cpus(
    _: &mut Shell,
    args: &[&str],
    _: Option<&Redirect>,
    out: &mut Output,
) -> Result<(), CommandError> {
    no_args(args)?;
    for cpu in 0..smp::online() {
        let apic_id = percpu::get(cpu).map_or(0, |c| c.apic_id());
        let _ = writeln!(out, "cpu{cpu}: APIC id {apic_id}, {} timer ticks", timer::ticks(cpu));
    }
    Ok(())
}

fn functions(
    _: &mut Shell,
    args: &[&str],
    _: Option<&Redirect>,
    out: &mut Output,
) -> Result<(), CommandError> {
    use crate::tracing::functions as ft;
    let glob = match args {
        [] => None,
        [glob] => Some(*glob),
        _ => return Err(CommandError::Usage),
    };
    // FNV-1a over every traceable entry's bytes, in address order.
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    let (mut calls, mut unreadable) = (0, 0);
    for function in ft::functions() {
        let Some(bytes) = memory::text::site_bytes(function.site) else {
            unreadable += 1;
            continue;
        };
        bytes.iter().for_each(|&b| hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
        let state = if bytes == memory::text::ENTRY_NOP { "nop" } else { "call" };
        calls += usize::from(state == "call");
        if glob.is_some_and(|g| trace::event::glob(g, function.name)) {
            // The ELF's address, as traces and filters take it.
            let site = arch::stack::elf_address(function.site as u64);
            let _ = write!(out, "{site:#x} {state}");
            for byte in bytes {
                let _ = write!(out, " {byte:02x}");
            }
            let _ = writeln!(out, " {}", function.name);
        }
    }
    let total = ft::functions().len();
    let mut tracers = String::new();
    if let Some(tracer) = crate::tracing::tracer() {
        let named = tracer.instances().unwrap_or_default();
        for instance in core::iter::once(tracer.top()).chain(named) {
            let current = instance.function_tracer().unwrap_or(ft::Kind::Nop);
            if current != ft::Kind::Nop {
                let name = if instance.is_top_level() { "/" } else { instance.name() };
                let _ = write!(tracers, " {name}={}", current.name());
            }
        }
        if tracer.stack_tracer() {
            tracers.push_str(" stack");
        }
        if tracer.function_profile() {
            tracers.push_str(" profile");
        }
    }
    let _ = writeln!(
        out,
        "# {total} traceable functions, {calls} calls, {unreadable} unreadable; tracers:{}; \
         entry bytes hash {hash:016x}; shadow stack full {} times",
        if tracers.is_empty() { " none" } else { &tracers },
        ft::overflows()
    );
    Ok(())
}

fn keys(
    _: &mut Shell,
    args: &[&str],
    _: Option<&Redirect>,
    out: &mut Output,
) -> Result<(), CommandError> {
    let (system, name) = match args {
        [] => (None, None),
        [event] => {
            let (system, name) = event.split_once(':').ok_or(CommandError::Usage)?;
            // A pattern no event fits is a typo, not an event without sites (the
            // tracer's events; without a tracer, the sites are listed as they are).
            let fits = |t: &trace::Tracer<_>| {
                t.events().iter().any(|e| e.matches(Some(system), Some(name)))
            };
            if !crate::tracing::tracer().is_none_or(fits) {
                return Err(CommandError::Failed(format!(
                    "no event matches {event} (SYSTEM:EVENT, each may be a glob)"
                )));
            }
            (Some(system), Some(name))
        }
        _ => return Err(CommandError::Usage),
    };
    let sites = crate::keys::sites().iter().filter(|s| s.event.matches(system, name));
    let (mut shown, mut jumps) = (0, 0);
    for site in sites {
        let bytes = memory::text::site_bytes(site.site);
        let state = match bytes {
            Some(b) if b == trace::event::key::NOP => "nop",
            Some(b) if Some(b) == site.jump() => "jmp",
            _ => "?",
        };
        let _ = write!(out, "{:#x} {}:{} {state}", site.site, site.event.system, site.event.name);
        for byte in bytes.unwrap_or_default() {
            let _ = write!(out, " {byte:02x}");
        }
        if let Some(table) = crate::symbols::table() {
            let _ = out.write_str(" ");
            let _ = table.write_address(out, arch::stack::elf_address(site.site as u64));
            let _ = out.write_str(" -> ");
            let _ = table.write_address(out, arch::stack::elf_address(site.target as u64));
        }
        let _ = writeln!(out);
        shown += 1;
        jumps += usize::from(state == "jmp");
    }
    let (during, after) = arch::patch::traps();
    let _ = writeln!(
        out,
        "# {shown} sites, {jumps} armed; int3 met {during} times during a patch, {after} after"
    );
    Ok(())
}

/// `arg` as a number within `range`: not a number is a usage error, one outside the
/// range is refused with `rule`, which names the range.
fn number_in(
    arg: &str,
    range: core::ops::RangeInclusive<u64>,
    rule: &'static str,
) -> Result<u64, CommandError> {
    let n = arg.parse().map_err(|_| CommandError::Usage)?;
    if range.contains(&n) { Ok(n) } else { Err(rule.into()) }
}

fn stress(
    _: &mut Shell,
    args: &[&str],
    _: Option<&Redirect>,
    _out: &mut Output,
) -> Result<(), CommandError> {
    const BOTH: &[Mode] = &[Mode::Overwrite, Mode::Discard];
    let (args, panic) = match args {
        [rest @ .., "panic"] => (rest, true),
        _ => (args, false),
    };
    let (args, functions) = match args {
        [rest @ .., "cycle", _, "functions"] => (&args[..rest.len() + 2], true),
        _ => (args, false),
    };
    let (args, cycles) = match args {
        [rest @ .., "cycle", n] => {
            (rest, Some(number_in(n, 1..=stress::MAX_CYCLES.into(), "cycles are 1 to 100000")?))
        }
        _ => (args, None),
    };
    let (modes, ms): (&[Mode], &str) = match args {
        [] => (BOTH, "1000"),
        [ms] if ms.parse::<u64>().is_ok() => (BOTH, ms),
        [mode, rest @ ..] if rest.len() <= 1 => {
            let ms = rest.first().copied().unwrap_or("1000");
            match *mode {
                "overwrite" => (&[Mode::Overwrite], ms),
                "discard" => (&[Mode::Discard], ms),
                "both" => (BOTH, ms),
                _ => return Err(CommandError::Usage),
            }
        }
        _ => return Err(CommandError::Usage),
    };
    let ms = number_in(ms, 1..=stress::MAX_MS, "a duration is 1 to 10000 ms")?;
    // Below `MAX_CYCLES`, a `u32`.
    let cycles = cycles.map_or(0, |n| n as u32);
    for &mode in modes {
        stress::run(mode, ms, cycles, functions, panic).map_err(CommandError::from)?;
    }
    Ok(())
}

/// Parses dump options over `base`: `all`/`orig_cpu`, `live`/`snapshot`/`both`,
/// `last N`, `instance NAME`. An unknown word is refused, naming the options, and so
/// are two different words of one choice (`live snapshot`).
fn dump_options<'a>(mut args: &[&'a str], base: DumpConfig) -> Result<DumpConfig, CommandError> {
    let mut config = base;
    let mut names: Vec<String> = Vec::new();
    // The words given for each choice, to refuse a second that differs.
    let (mut buffers_given, mut cpus_given) = (None, None);
    let contradicts = |given: &mut Option<&'a str>, word: &'a str, choice| match *given {
        Some(first) if first != word => {
            Err(CommandError::Failed(format!("{first:?} and {word:?}: choose one of {choice}")))
        }
        _ => {
            *given = Some(word);
            Ok(())
        }
    };
    while let Some((&word, rest)) = args.split_first() {
        args = rest;
        if let Some(buffers) = Buffers::from_name(word) {
            contradicts(&mut buffers_given, word, "live, snapshot or both")?;
            config.buffers = buffers;
            continue;
        }
        if let Some(cpus) = Cpus::from_name(word) {
            contradicts(&mut cpus_given, word, "all or orig_cpu")?;
            config.cpus = cpus;
            continue;
        }
        match word {
            "last" | "instance" => {
                let (&value, rest) = args.split_first().ok_or(CommandError::Usage)?;
                args = rest;
                if word == "last" {
                    let rule = || CommandError::Failed("last takes N, 1 or more, or all".into());
                    config.last = match value {
                        "all" => None,
                        n => Some(n.parse().ok().filter(|&n| n > 0).ok_or_else(rule)?),
                    };
                } else {
                    // An instance that does not exist would leave the dump empty.
                    let tracer = crate::tracing::tracer();
                    if value != "top" && tracer.is_none_or(|t| t.lookup(value).is_err()) {
                        return Err(CommandError::Failed(format!(
                            "no instance {value:?} (top, or a directory of instances/)"
                        )));
                    }
                    names.push(value.into());
                }
            }
            _ => {
                return Err(CommandError::Failed(format!(
                    "unknown option {word:?} (accepted: all or orig_cpu; live, snapshot or both; last N; instance NAME)"
                )));
            }
        }
    }
    if !names.is_empty() {
        config.instances = Some(names);
    }
    Ok(config)
}

fn dump(
    _: &mut Shell,
    args: &[&str],
    _: Option<&Redirect>,
    out: &mut Output,
) -> Result<(), CommandError> {
    match args {
        ["on-panic", rest @ ..] => {
            let config = dump_options(rest, dump::on_panic())?;
            let instances = config.instances.as_ref().map_or(String::from("all"), |n| n.join(" "));
            let last = config.last.map_or(String::from("all"), |n| format!("{n}"));
            println!(
                "on panic: cpus {}, last {last} records, instances {instances}, buffers {}",
                config.cpus.name(),
                config.buffers.name()
            );
            dump::set_on_panic(config);
            Ok(())
        }
        options => {
            let config = dump_options(options, dump::on_panic())?;
            dump::live_dump(&config, out).map_err(CommandError::from)
        }
    }
}

fn bench(
    _: &mut Shell,
    args: &[&str],
    _: Option<&Redirect>,
    _out: &mut Output,
) -> Result<(), CommandError> {
    let iterations = match args {
        [] => 100_000,
        [n] => number_in(n, 1..=10_000_000, "iterations are 1 to 10000000")?,
        _ => return Err(CommandError::Usage),
    };
    bench::run(iterations).map_err(CommandError::from)
}

fn barrier(
    _: &mut Shell,
    args: &[&str],
    _: Option<&Redirect>,
    _out: &mut Output,
) -> Result<(), CommandError> {
    let ms = match args {
        [] => 500,
        [ms] => number_in(ms, 1..=barrier::MAX_MS, "a duration is 1 to 10000 ms")?,
        _ => return Err(CommandError::Usage),
    };
    barrier::selftest(ms).map_err(CommandError::from)
}

fn nowait(
    _: &mut Shell,
    args: &[&str],
    _: Option<&Redirect>,
    _out: &mut Output,
) -> Result<(), CommandError> {
    no_args(args)?;
    for (tried, gave) in crate::selftest::nowait::run().map_err(CommandError::from)? {
        println!("{tried}: {gave}");
    }
    Ok(())
}

fn midpatch(
    _: &mut Shell,
    args: &[&str],
    _: Option<&Redirect>,
    _out: &mut Output,
) -> Result<(), CommandError> {
    no_args(args)?;
    for seen in crate::selftest::midpatch::run().map_err(CommandError::from)? {
        let [before, int3, tail, after] = seen.traps;
        println!(
            "{}: int3 met {before} {int3} {tail} {after} times at steps 0-3; {} wrong returns",
            seen.patch.describe(),
            seen.wrong
        );
    }
    Ok(())
}

fn latency(
    _: &mut Shell,
    args: &[&str],
    _: Option<&Redirect>,
    out: &mut Output,
) -> Result<(), CommandError> {
    let watchdog = watchdog::get().ok_or(CommandError::from("the watchdog is not running"))?;
    let ms = |arg: &str| number_in(arg, 1..=10_000, "MS is 1 to 10000");
    match args {
        [] => {}
        ["spike", arg] => {
            let ms = ms(arg)?;
            println!("interrupts off on cpu{} for {ms} ms", percpu::index());
            watchdog::spike(ms);
        }
        ["threshold", arg] => watchdog.set_threshold(ms(arg)? * 1_000_000),
        ["rearm"] => watchdog.rearm(),
        ["wait", arg] => {
            let ms = ms(arg)?;
            // Stopped by a key: the status, as after any other subcommand.
            match wait_for_capture(watchdog, ms, out) {
                Waited::TimedOut => {
                    return Err(CommandError::Failed(format!(
                        "not captured within {ms} ms (state: {:?})",
                        watchdog.state()
                    )));
                }
                Waited::NoSnapshot => {
                    return Err(CommandError::Failed(format!(
                        "the window closed with no snapshot to keep it (instances/{}'s \
                         snapshot buffer freed, or the irqsoff tracer's); then rearm",
                        latency_watchdog::INSTANCE
                    )));
                }
                Waited::Captured | Waited::Stopped => {}
            }
        }
        _ => return Err(CommandError::Usage),
    }
    let (anomalies, tick, worst, threshold) = watchdog.counters();
    println!("state: {:?}", watchdog.state());
    println!(
        "threshold: {threshold} ns, anomalies: {anomalies}, last at tick {tick}, worst interval {worst} ns"
    );
    println!("instance: instances/{}", latency_watchdog::INSTANCE);
    Ok(())
}

/// How a wait for the watchdog's capture ended.
enum Waited {
    /// The window is captured.
    Captured,
    /// The window closed with no snapshot to go into.
    NoSnapshot,
    /// The time ran out first.
    TimedOut,
    /// A key stopped it.
    Stopped,
}

/// Sleeps until the watchdog has captured its window (or closed it with no
/// snapshot to go into), `ms` milliseconds have passed or a key is pressed
/// (consumed; Ctrl-C shows as such). The wait records nothing of its own: polling
/// from the host would fill the window with keystrokes.
fn wait_for_capture(
    watchdog: &latency_watchdog::Watchdog<tracing::KernelPlatform>,
    ms: u64,
    out: &mut Output,
) -> Waited {
    use latency_watchdog::State;
    let captured = || matches!(watchdog.state(), State::Captured | State::NoSnapshot);
    let deadline = clock::now_ns().saturating_add(ms * 1_000_000);
    while !captured() {
        if clock::now_ns() >= deadline {
            return Waited::TimedOut;
        }
        if let Some(byte) = serial::try_read_byte() {
            if byte == 0x03 {
                out.interrupt();
            }
            return Waited::Stopped;
        }
        // The boot CPU's timer tick wakes the wait at least once a period.
        crate::arch::irq::wait_for_interrupt_unless(|| serial::input_pending() || captured());
    }
    match watchdog.state() {
        State::NoSnapshot => Waited::NoSnapshot,
        _ => Waited::Captured,
    }
}

/// A CPU a command names: a number below the CPUs running, or the error naming them.
fn cpu_arg(word: &str) -> Result<usize, CommandError> {
    let cpu: usize = word.parse().map_err(|_| CommandError::Usage)?;
    match smp::online() {
        online if cpu < online => Ok(cpu),
        1 => Err(CommandError::Failed("no such CPU: the only CPU is 0".into())),
        online => {
            Err(CommandError::Failed(format!("no such CPU: the CPUs are 0 to {}", online - 1)))
        }
    }
}

fn lockup(
    _: &mut Shell,
    args: &[&str],
    _: Option<&Redirect>,
    _out: &mut Output,
) -> Result<(), CommandError> {
    match args {
        [] => {}
        ["threshold", ms] => {
            let ms = ms.parse::<u64>().map_err(|_| CommandError::Usage)?;
            lockup::set_threshold_ms(ms).map_err(CommandError::from)?;
        }
        ["spin", "all"] => {
            let here = percpu::index();
            for cpu in (0..smp::online()).filter(|&cpu| cpu != here) {
                smp::spin(cpu).map_err(CommandError::from)?;
            }
            println!("every cpu: interrupts off, spinning");
            lockup::spin()
        }
        ["spin", "nmi", cpu] => {
            let cpu = cpu_arg(cpu)?;
            smp::spin_in_nmi(cpu, false).map_err(CommandError::from)?;
            println!("cpu{cpu}: spinning in an NMI handler, NMIs blocked");
            return Ok(());
        }
        ["spin", "writing"] => {
            println!("cpu{}: interrupts off, spinning in a trace write", percpu::index());
            lockup::spin_writing()
        }
        ["spin", cpu @ ..] if cpu.len() <= 1 => {
            let here = percpu::index();
            let cpu = match cpu {
                [cpu] => cpu_arg(cpu)?,
                _ => here,
            };
            if cpu != here {
                smp::spin(cpu).map_err(CommandError::from)?;
            }
            println!("cpu{cpu}: interrupts off, spinning");
            if cpu == here {
                lockup::spin()
            }
            return Ok(());
        }
        _ => return Err(CommandError::Usage),
    }
    match lockup::threshold_ms() {
        0 => println!("threshold: off"),
        ms => println!("threshold: {ms} ms"),
    }
    for cpu in 0..smp::online() {
        match lockup::buddy(cpu) {
            Some(buddy) => println!(
                "cpu{cpu} watches cpu{buddy}: no timer interrupt for {} ms",
                lockup::stalled_ms(cpu)
            ),
            None => println!("cpu{cpu}: no CPU to watch (it takes two)"),
        }
    }
    match lockup::every_cpu_watcher() {
        Some(cpu) => println!(
            "cpu{cpu} watches every cpu by NMI: no timer interrupt on any for {} ms",
            lockup::every_cpu_stalled_ms()
        ),
        None => println!("no CPU watches every cpu (the RTC's interrupt is not an NMI)"),
    }
    Ok(())
}

fn backtrace(
    _: &mut Shell,
    args: &[&str],
    _: Option<&Redirect>,
    out: &mut Output,
) -> Result<(), CommandError> {
    no_args(args)?;
    let answered = smp::request_backtraces();
    let this = percpu::index();
    for cpu in (0..smp::online()).filter(|&cpu| cpu != this) {
        if smp::backtrace(cpu).next().is_none() {
            let _ = writeln!(out, "cpu {cpu}: no answer");
            continue;
        }
        let _ = writeln!(out, "NMI backtrace for cpu {cpu}:");
        let _ = symbols::write_chain(out, smp::backtrace(cpu));
    }
    let _ = writeln!(out, "{answered} of {} other CPU(s) answered", smp::online() - 1);
    Ok(())
}

fn poweroff(
    _: &mut Shell,
    args: &[&str],
    _: Option<&Redirect>,
    _out: &mut Output,
) -> Result<(), CommandError> {
    no_args(args)?;
    println!("powering off");
    qemu::exit(ExitCode::Success)
}

/// A value whose formatting panics, for a nested panic.
struct PanicsWhenShown;

impl core::fmt::Display for PanicsWhenShown {
    fn fmt(&self, _: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        panic!("formatting the panic message panicked")
    }
}

fn reboot(
    _: &mut Shell,
    args: &[&str],
    _: Option<&Redirect>,
    _out: &mut Output,
) -> Result<(), CommandError> {
    no_args(args)?;
    persist::reboot()
}

fn panic_reboot(
    _: &mut Shell,
    args: &[&str],
    _: Option<&Redirect>,
    out: &mut Output,
) -> Result<(), CommandError> {
    match args {
        [] => {}
        ["0"] => persist::set_panic_reboot(false),
        ["1"] => persist::set_panic_reboot(true),
        _ => return Err(CommandError::Usage),
    }
    let _ = writeln!(out, "{}", u8::from(persist::panic_reboot()));
    Ok(())
}

fn scribble(
    _: &mut Shell,
    args: &[&str],
    _: Option<&Redirect>,
    _out: &mut Output,
) -> Result<(), CommandError> {
    let [cpu] = args else { return Err(CommandError::Usage) };
    match persist::scribble_and_reboot(cpu_arg(cpu)?)? {}
}

fn panic(
    _: &mut Shell,
    args: &[&str],
    _: Option<&Redirect>,
    _out: &mut Output,
) -> Result<(), CommandError> {
    match args {
        [] => panic!("deliberate panic from the shell"),
        ["irq"] => {
            println!("the next timer interrupt on cpu{} panics", percpu::index());
            fault::panic_on_next_tick();
            loop {
                x86_64::instructions::hlt();
            }
        }
        ["console"] => serial::panic_holding_console(),
        ["dump", rest @ ..] if rest.len() <= 1 => {
            let chunks = rest.first().map_or(Ok(0), |n| n.parse::<usize>());
            let chunks = chunks.ok().filter(|&n| n != usize::MAX).ok_or(CommandError::Usage)?;
            dump::panic_in_the_dump(chunks);
            panic!("deliberate panic whose dump panics")
        }
        ["heap"] => memory::heap::panic_holding_lock(),
        ["nested"] => panic!("{}", PanicsWhenShown),
        ["both", cpu] => {
            let cpu = cpu_arg(cpu)?;
            smp::spin_in_nmi(cpu, true).map_err(CommandError::from)?;
            panic!("deliberate panic from the shell, beside cpu{cpu}'s")
        }
        [cpu] => {
            let cpu = cpu_arg(cpu)?;
            if cpu == percpu::index() {
                panic!("deliberate panic from the shell");
            }
            smp::call(cpu, smp::Request::Panic).map_err(CommandError::from)?;
            // The other CPU's panic stops this one; wait for it here.
            loop {
                core::hint::spin_loop();
            }
        }
        _ => Err(CommandError::Usage),
    }
}

/// Default address for `fault page`: canonical, in the lower half, never mapped.
const UNMAPPED_ADDRESS: u64 = 0x0dea_dbee_f000;

fn fault(
    _: &mut Shell,
    args: &[&str],
    _: Option<&Redirect>,
    _out: &mut Output,
) -> Result<(), CommandError> {
    match args {
        ["page"] => page_fault(UNMAPPED_ADDRESS),
        ["page", addr] => {
            let digits = addr.strip_prefix("0x").unwrap_or(addr);
            let addr = u64::from_str_radix(digits, 16).map_err(|_| CommandError::Usage)?;
            page_fault(addr)
        }
        ["gp"] => {
            println!("reading non-canonical address 0x8000000000000000");
            arch::fault::general_protection();
            Ok(())
        }
        ["ud"] => {
            println!("executing ud2");
            arch::fault::invalid_opcode();
            Ok(())
        }
        ["de"] => {
            println!("dividing by zero");
            arch::fault::divide_error();
            Ok(())
        }
        ["bp"] => {
            println!("executing int3");
            x86_64::instructions::interrupts::int3();
            println!("back from the breakpoint handler");
            Ok(())
        }
        ["stack"] => overflow_this_stack(),
        ["stack", cpu] => {
            let cpu = cpu_arg(cpu)?;
            if cpu == percpu::index() {
                return overflow_this_stack();
            }
            // Said before the work is posted: that CPU's panic report must not be
            // cut by this line.
            println!("overflowing cpu {cpu}'s kernel stack");
            smp::post_work_to(cpu, || {
                recurse(0);
            })
            .map_err(CommandError::from)?;
            // That CPU's panic stops this one; wait for it here.
            loop {
                core::hint::spin_loop();
            }
        }
        _ => Err(CommandError::Usage),
    }
}

/// Overflows this CPU's kernel stack (`fault stack`).
fn overflow_this_stack() -> Result<(), CommandError> {
    println!("overflowing the kernel stack");
    print!("unreachable: {}", recurse(0));
    Ok(())
}

fn page_fault(addr: u64) -> Result<(), CommandError> {
    let announce = |addr: x86_64::VirtAddr| println!("reading unmapped address {:#x}", addr);
    memory::read_unmapped(addr, announce).map_err(CommandError::from)
}

/// Recurses until the stack's guard page stops it (a double fault on the IST stack).
#[allow(unconditional_recursion, reason = "overflowing the stack is the point")]
fn recurse(depth: u64) -> u64 {
    let frame = [depth; 64];
    core::hint::black_box(&frame);
    recurse(depth + 1) + core::hint::black_box(frame[0])
}
