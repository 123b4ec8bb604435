//! `boot report` as a user runs it: on logs written with the dump writer, and on
//! crafted dumps whose checksums are valid but whose contents are absurd.

mod support;
use support::{MEMORY_PER_INPUT_BYTE, SLACK, report_peak};
use support::{log_writer, record, report, temp, temp_path, text};

mod crafted;

use std::path::Path;
use std::process::Command;
use trace::dump::PanicHeader;
use trace::{event::EventDescriptor, ring::RingStats};

trace::event! {
    /// A test event.
    pub PING = "net":"ping" { seq: u32, host: &str } => "seq={seq} host={host}";
}

/// A log: boot noise, a panic dump of three `net:ping` records, more noise.
fn log() -> String {
    log_of([(0, 1, "alpha", 1_000), (1, 2, "beta", 2_000), (0, 3, "gamma", 3_000)])
}

/// [`log`] with its three records (CPU, `seq`, `host`, time) in their place.
fn log_of(records: [(usize, u32, &str, u64); 3]) -> String {
    let descriptor: &EventDescriptor = PING.descriptor();
    let mut out = String::from("SeaBIOS noise\nkernel: hello\n");
    let mut writer = log_writer(&mut out);
    writer.header(
        2,
        Some(PanicHeader {
            cpu: 1,
            message: "oops",
            location: "src/net.rs:10:5",
            nested: None,
            other: None,
        }),
        None,
    );
    writer.descriptor_as(1, descriptor);
    writer.instance(0, "");
    writer.cpu_stats(0, 0, &RingStats { written: 2, entries: 2, ..RingStats::default() });
    writer.cpu_stats(
        0,
        1,
        &RingStats { written: 5, entries: 1, overrun: 4, ..RingStats::default() },
    );
    for (cpu, seq, host, ts) in records {
        let mut buf = [0u8; 64];
        let mut enc = trace::field::Encoder::new(&mut buf);
        use trace::field::FieldValue;
        seq.encode(&mut enc);
        host.encode(&mut enc);
        writer.record(0, &record(cpu, ts, enc.bytes()), Some(descriptor));
    }
    writer.finish();
    out.push_str("after the dump\n");
    out
}

#[test]
fn report_prints_the_events_like_trace_cmd() {
    let log = temp("ok.log", log());
    let out = report(&[log.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("# panic on cpu 1 at src/net.rs:10:5: oops"), "{stdout}");
    let events: Vec<&str> = stdout.lines().filter(|l| l.contains(": ping: ")).collect();
    assert_eq!(events.len(), 3, "{stdout}");
    assert!(
        events[0].contains(" [000] ") && events[0].ends_with(" ping: seq=1 host=alpha"),
        "{}",
        events[0]
    );
    assert!(events[2].ends_with("seq=3 host=gamma"));
    let stat = report(&[log.to_str().unwrap(), "--stat"]);
    assert!(stat.status.success());
    assert!(text(&stat.stdout).contains("net:ping"));
}

#[test]
fn report_writes_perfetto_json_and_ctf() {
    let log = temp("convert.log", log());
    let json = temp_path("out.json");
    let out =
        report(&[log.to_str().unwrap(), "--format", "perfetto", "-o", json.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let parsed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let pings = parsed["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "net:ping")
        .count();
    assert_eq!(pings, 3);
    let no_dir = report(&[log.to_str().unwrap(), "--format", "ctf"]);
    assert_eq!(no_dir.status.code(), Some(2));
    assert!(text(&no_dir.stderr).contains("needs -o DIR"));
    let dir = temp_path("ctf");
    let ctf = report(&[log.to_str().unwrap(), "--format", "ctf", "-o", dir.to_str().unwrap()]);
    assert!(ctf.status.success(), "{}", text(&ctf.stderr));
    assert!(dir.join("metadata").exists());
    let unknown = report(&[log.to_str().unwrap(), "--format", "perfetto", "--instance", "nosuch"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(text(&unknown.stderr).contains("no instance \"nosuch\""), "{}", text(&unknown.stderr));
}

/// A CPU's time going backwards (which no ring writes) is said where CTF and
/// trace.dat cannot show it as it is; text shows the times as they are.
#[test]
fn time_going_backwards_on_a_cpu_is_reported() {
    let backwards = temp(
        "backwards.log",
        log_of([(0, 1, "alpha", 5_000), (1, 2, "beta", 2_000), (0, 3, "gamma", 3_000)]),
    );
    let dir = temp_path("backwards.ctf");
    let ctf =
        report(&[backwards.to_str().unwrap(), "--format", "ctf", "-o", dir.to_str().unwrap()]);
    assert!(ctf.status.success(), "{}", text(&ctf.stderr));
    assert_eq!(
        text(&ctf.stderr),
        "report: buffer top, CPU 0: 1 record(s) earlier than the one before (the first: \
         3000 ns after 5000 ns); CTF shows each at the time before it\n"
    );
    let dat = temp_path("backwards.dat");
    let out =
        report(&[backwards.to_str().unwrap(), "--format", "tracedat", "-o", dat.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(
            "CPU 0: 1 record(s) earlier than the one before (the first: \
             3000 ns after 5000 ns); trace.dat puts each CPU's records in time order"
        ),
        "{}",
        text(&out.stderr)
    );
    let plain = report(&[backwards.to_str().unwrap()]);
    assert!(plain.status.success() && plain.stderr.is_empty(), "{}", text(&plain.stderr));
    // In order (equal times are), no note.
    let ordered = temp(
        "ordered.log",
        log_of([(0, 1, "alpha", 1_000), (1, 2, "beta", 2_000), (0, 3, "gamma", 1_000)]),
    );
    let dir = temp_path("ordered.ctf");
    let ctf = report(&[ordered.to_str().unwrap(), "--format", "ctf", "-o", dir.to_str().unwrap()]);
    assert!(ctf.status.success() && ctf.stderr.is_empty(), "{}", text(&ctf.stderr));
}

#[test]
fn damaged_and_missing_dumps_get_clear_errors() {
    let mut lines: Vec<String> = log().lines().map(String::from).collect();
    let chunk = lines.iter().position(|l| l.starts_with("TD 0 ")).unwrap();
    lines[chunk] = lines[chunk].replacen("TD 0 ", "TD 0 A", 1);
    let damaged = temp("damaged.log", lines.join("\n"));
    let out = report(&[damaged.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "a damaged dump exits 1");
    assert!(
        text(&out.stderr).contains(&format!(":{}: chunk 0:", chunk + 1)),
        "{}",
        text(&out.stderr)
    );
    let truncated = temp("truncated.log", log().lines().take(4).collect::<Vec<_>>().join("\n"));
    let out = report(&[truncated.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("truncated"), "{}", text(&out.stderr));
    let none = temp("none.log", "just a boot log\n");
    let out = report(&[none.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no trace dump found"));
    let out = report(&["/nonexistent/serial.log"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("/nonexistent/serial.log"));
    // An output in no directory is named as given, not as the file written first.
    let good = temp("good.log", log());
    let out = report(&[good.to_str().unwrap(), "-o", "/nonexistent/x.txt"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.starts_with("report: /nonexistent/x.txt: No such file"), "{stderr}");
}

/// Every output `report` writes, as arguments (the CTF directory is `dir`, the
/// Perfetto protobuf file beside it).
fn every_format(dir: &std::path::Path) -> Vec<Vec<String>> {
    let _ = std::fs::remove_dir_all(dir);
    let proto = dir.with_extension("perfetto-trace");
    vec![
        vec![],
        vec!["--stat".into()],
        vec!["--format".into(), "perfetto".into()],
        vec![
            "--format".into(),
            "perfetto-proto".into(),
            "-o".into(),
            proto.to_str().unwrap().into(),
        ],
        vec!["--format".into(), "ctf".into(), "-o".into(), dir.to_str().unwrap().into()],
    ]
}

#[test]
fn crafted_dumps_with_absurd_numbers_are_refused_by_rule_in_every_format() {
    for (i, crasher) in crafted::crashers().into_iter().enumerate() {
        let log = temp(&format!("crafted-{i}.log"), &crasher.log);
        let dir = temp_path("crafted-ctf");
        for args in every_format(&dir) {
            let mut all = vec![log.to_str().unwrap().to_string()];
            all.extend(args.iter().cloned());
            let out = report(&all.iter().map(String::as_str).collect::<Vec<_>>());
            let stderr = text(&out.stderr);
            // 1: the damage is reported, the rest converted; 2: nothing was left to
            // convert (the instance list was refused).
            assert!(
                matches!(out.status.code(), Some(1 | 2)),
                "{}: {args:?}: {:?}\n{stderr}",
                crasher.name,
                out.status
            );
            assert!(stderr.contains(crasher.refused), "{}: {args:?}: {stderr}", crasher.name);
            assert!(!stderr.contains("panicked"), "{}: {args:?}: {stderr}", crasher.name);
        }
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_file(dir.with_extension("perfetto-trace"));
    }
}

#[test]
fn text_goes_to_the_output_file_and_stat_refuses_other_formats() {
    let log = temp("papercuts.log", log());
    let file = temp_path("out.txt");
    let out = report(&[log.to_str().unwrap(), "-o", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    let written = std::fs::read_to_string(&file).unwrap();
    assert_eq!(written.lines().filter(|l| l.contains(" ping: ")).count(), 3, "{written}");
    let out = report(&[log.to_str().unwrap(), "--stat", "-o", file.to_str().unwrap()]);
    assert!(out.status.success() && out.stdout.is_empty());
    assert!(std::fs::read_to_string(&file).unwrap().contains("Total events: 3"));
    // A report that fails changes nothing: the old file stays, no partial one.
    let out =
        report(&[log.to_str().unwrap(), "--instance", "nosuch", "-o", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(std::fs::read_to_string(&file).unwrap().contains("Total events: 3"));
    let partial = format!("{}.partial", file.display());
    assert!(!std::path::Path::new(&partial).exists());
    // What is not a regular file is written in place, never replaced by one: a link
    // stays a link (so would /dev/null stay a device), and a pipe is written into.
    let link = temp_path("out-link.txt");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    let out = report(&[log.to_str().unwrap(), "-o", link.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert!(std::fs::read_to_string(&file).unwrap().contains(" ping: "));
    let fifo = temp_path("out.fifo");
    assert!(std::process::Command::new("mkfifo").arg(&*fifo).status().unwrap().success());
    let reader = {
        let fifo = fifo.to_path_buf();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let out = report(&[log.to_str().unwrap(), "-o", fifo.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(reader.join().unwrap().matches(" ping: ").count(), 3);
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(
        &std::fs::symlink_metadata(&fifo).unwrap().file_type()
    ));
    for format in ["perfetto", "ctf"] {
        let out = report(&[log.to_str().unwrap(), "--stat", "--format", format, "-o", "x"]);
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(
            text(&out.stderr).trim(),
            format!("report: --stat is a text summary; it does not go with --format {format}")
        );
    }
}

#[test]
fn a_dump_of_the_last_records_says_how_many_it_left_out() {
    // The buffer holds 2 + 1 entries of 7 written; the dump lists the last 2.
    let descriptor: &EventDescriptor = PING.descriptor();
    let mut log = String::new();
    let mut writer = log_writer(&mut log);
    writer.header(2, None, None);
    writer.descriptor_as(1, descriptor);
    writer.instance(0, "");
    writer.cpu_stats(0, 0, &RingStats { written: 2, entries: 2, ..RingStats::default() });
    writer.cpu_stats(0, 1, &RingStats { written: 5, entries: 1, ..RingStats::default() });
    writer.record(0, &record(0, 10, &[]), None);
    writer.record(0, &record(1, 20, &[]), None);
    writer.skipped(0, 1);
    writer.finish();
    let path = temp("last.log", &log);
    let out = report(&[path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let header: Vec<&str> = stdout.lines().filter(|l| l.starts_with('#')).collect();
    assert_eq!(
        header,
        [
            "# instance: top",
            "# cpus=2",
            "# entries-in-buffer/entries-written: 2/7",
            "# (the dump leaves out 1 older records by its `last N` cap)",
        ],
        "{stdout}"
    );
    assert_eq!(stdout.lines().filter(|l| l.contains(" ping: ")).count(), 2, "{stdout}");
}

#[test]
fn a_dump_without_instances_or_their_names_gets_a_sentence() {
    // The first chunk (header, instance name, first records) lost: records remain.
    let mut log = String::new();
    let mut writer = log_writer(&mut log);
    writer.header(1, None, None);
    writer.instance(0, "");
    for ts in 0..200 {
        writer.record(0, &record(0, ts, &[0; 16]), None);
    }
    writer.finish();
    let lines: Vec<&str> = log.lines().filter(|l| !l.starts_with("TD 0 ")).collect();
    assert!(lines.iter().any(|l| l.starts_with("TD 2 ")), "records in several chunks");
    let path = temp("nameless.log", lines.join("\n"));
    let out = report(&[path.to_str().unwrap(), "--format", "perfetto"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("the name and buffer of section 0 were lost"), "{stderr}");
    assert!(stderr.contains("has no instance \"top\" (it has \"#0\")"), "{stderr}");
    let converted = report(&[path.to_str().unwrap(), "--format", "perfetto", "--instance", "#0"]);
    assert_eq!(converted.status.code(), Some(1), "{}", text(&converted.stderr));
    // Every chunk lost: no instance at all.
    let empty =
        temp("empty.log", format!("{}\n{} chunks=0>>>\n", trace::dump::BEGIN, trace::dump::END));
    let out = report(&[empty.to_str().unwrap(), "--format", "perfetto"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("holds no instance (the kernel dumped none)"),
        "{}",
        text(&out.stderr)
    );
    // So for every format, text too: an undamaged dump of nothing is not a report.
    for format in ["text", "tracedat", "ctf"] {
        let file = temp_path(&format!("empty-out-{format}"));
        let out =
            report(&[empty.to_str().unwrap(), "--format", format, "-o", file.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{format}");
        assert!(text(&out.stderr).contains("the kernel dumped none"), "{format}");
    }
}

#[test]
fn help_names_the_console_keys_and_the_exit_codes() {
    let help = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_boot")).args(args).output().unwrap();
        assert!(out.status.success());
        text(&out.stdout)
    };
    let run = help(&["--help"]);
    assert!(run.contains("Ctrl-A x quits QEMU"), "{run}");
    for code in ["0  the kernel powered off", "1  the kernel panicked", "3  --timeout expired"] {
        assert!(run.contains(code), "{run}");
    }
    let report = help(&["report", "--help"]);
    assert!(report.contains("1  a dump was damaged"), "{report}");
    // Instruction counting is TCG's: with KVM it is refused before QEMU runs.
    let both =
        Command::new(env!("CARGO_BIN_EXE_boot")).args(["--icount", "--kvm"]).output().unwrap();
    assert_eq!(both.status.code(), Some(2));
    let error = text(&both.stderr);
    assert!(error.contains("'--icount' cannot be used with '--kvm'"), "{error}");
}

#[test]
fn the_runner_reports_its_outcome_as_a_sentence() {
    // No QEMU run needed: the outcome's words are what the runner prints.
    use boot::qemu::Outcome;
    assert_eq!(
        Outcome::KernelFailure.to_string(),
        "the kernel panicked or hit a fatal exception (its report is above)"
    );
    for outcome in [
        Outcome::Success,
        Outcome::KernelFailure,
        Outcome::NoVerdict,
        Outcome::QemuError(Some(1)),
        Outcome::QemuError(None),
        Outcome::Timeout,
    ] {
        let words = outcome.to_string();
        assert!(words.contains(' ') && !words.contains(&format!("{outcome:?}")), "{words}");
    }
}

/// A dump written before records kept their writer's context (item kind 5) still
/// reads, every line saying the context is unknown; a new one shows each record's.
#[test]
fn an_old_dump_reads_with_its_context_unknown() {
    let old = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/panic-shell.log");
    let out = report(&[old]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> =
        stdout.lines().filter(|l| !l.starts_with('#') && !l.starts_with("CPU:")).collect();
    assert!(lines.len() > 10, "{stdout}");
    assert!(lines.iter().all(|l| l.trim_start().starts_with("<...>-0 ")), "{stdout}");
    let new = temp("context.log", log());
    let stdout = text(&report(&[new.to_str().unwrap()]).stdout);
    assert!(stdout.lines().any(|l| l.trim_start().starts_with("shell-1 ")), "{stdout}");
}

/// The kernel ELF's functions with code, as its symbol table lists them: demangled
/// name, address, size.
fn kernel_functions() -> Vec<(String, u64, u64)> {
    use object::{Object, ObjectSymbol, SymbolKind};
    let data = std::fs::read(boot::KERNEL_ELF).expect("the build's kernel ELF");
    let elf = object::read::elf::ElfFile64::<object::Endianness>::parse(&*data).unwrap();
    elf.symbols()
        .filter(|s| s.kind() == SymbolKind::Text && s.size() > 0)
        .map(|s| {
            (format!("{:#}", rustc_demangle::demangle(s.name().unwrap())), s.address(), s.size())
        })
        .collect()
}

/// A log holding one `ftrace:kernel_stack` record of the frames `ips`, written by
/// a kernel whose symbol table has the fingerprint `symbols`.
fn stack_log(ips: &[u64], symbols: Option<u64>) -> String {
    use trace::field::FieldValue;
    let mut out = String::new();
    let mut writer = log_writer(&mut out);
    writer.header(1, None, symbols);
    writer.descriptor_as(1, &trace::tracer::STACK_TRACE);
    writer.instance(0, "");
    writer.cpu_stats(0, 0, &RingStats { written: 1, entries: 1, ..RingStats::default() });
    let mut buf = [0u8; 128];
    let mut enc = trace::field::Encoder::new(&mut buf);
    (ips.len() as u8).encode(&mut enc);
    for i in 0..trace::tracer::STACK_FRAMES {
        ips.get(i).copied().unwrap_or(0).encode(&mut enc);
    }
    writer.record(0, &record(0, 1_000, enc.bytes()), Some(&trace::tracer::STACK_TRACE));
    writer.finish();
    out
}

#[test]
fn the_kernel_elf_names_every_function_and_only_its_bytes() {
    let symbols = boot::report::Symbols::read(std::path::Path::new(boot::KERNEL_ELF)).unwrap();
    let functions = kernel_functions();
    assert!(functions.len() > 500, "{} functions", functions.len());
    let mut starts: Vec<u64> = functions.iter().map(|f| f.1).collect();
    starts.sort_unstable();
    for (name, address, size) in &functions {
        // Aliases share an address: any of their names will do, but one that is
        // alone at its address must be the one found.
        let alone = starts.iter().filter(|&&s| s == *address).count() == 1;
        let (found, offset) = symbols.lookup(address + size - 1).expect(name);
        assert_eq!(offset, size - 1, "{name}");
        if alone {
            assert_eq!(found, name);
            assert_eq!(symbols.frame(address + size), format!("{name}+{size:#x}"));
        }
    }
    // Nothing below the first function; its first byte, where an interrupt may have
    // struck, is its own.
    assert_eq!(symbols.lookup(starts[0] - 1), None);
    assert_eq!(symbols.frame(starts[0] - 1), format!("{:#x}", starts[0] - 1));
    assert!(symbols.frame(starts[0]).ends_with("+0x0"), "{}", symbols.frame(starts[0]));
}

#[test]
fn report_elf_prints_stack_frames_as_functions() {
    let functions = kernel_functions();
    let (name, serial, _) = functions
        .iter()
        .find(|f| f.0 == "kernel::arch::idt::serial")
        .expect("the serial interrupt's handler");
    let kernel = boot::report::Symbols::read(std::path::Path::new(boot::KERNEL_ELF)).unwrap();
    let log = temp("stack.log", stack_log(&[serial + 0x1a, 0x10], Some(kernel.fingerprint())));
    let log = log.to_str().unwrap();

    let out = report(&[log]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let plain = text(&out.stdout);
    assert!(
        plain.contains(&format!("kernel_stack: depth=2 {:#x} 0x10 0x0", serial + 0x1a)),
        "{plain}"
    );

    let out = report(&[log, "--elf", boot::KERNEL_ELF]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let symbolised = text(&out.stdout);
    let lines: Vec<&str> = symbolised.lines().skip_while(|l| !l.contains("kernel_stack")).collect();
    assert!(lines[0].ends_with("kernel_stack: depth=2"), "{symbolised}");
    assert_eq!(lines[1..], [format!(" => {name}+0x1a"), " => 0x10".to_string()], "{symbolised}");
    // Without a path, `--elf` takes the kernel this build boots.
    let default = report(&[log, "--elf"]);
    assert!(default.status.success(), "{}", text(&default.stderr));
    assert_eq!(text(&default.stdout), symbolised);

    let out = report(&[log, "--elf", boot::KERNEL_ELF, "--format", "perfetto"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let stack = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "ftrace:kernel_stack")
        .expect("the stack event");
    assert_eq!(stack["args"]["ip0"], format!("{name}+0x1a"));
    assert_eq!(stack["args"]["ip1"], "0x10");
    assert_eq!(stack["args"]["ip2"], "");

    // Perfetto's protobuf carries them as the event's callstack, outermost first
    // (protoc, installed by boot/setup.sh, decodes it).
    let pf = temp_path("stack.pftrace");
    let pf = pf.to_str().unwrap();
    let out = report(&[log, "--elf", boot::KERNEL_ELF, "--format", "perfetto-proto", "-o", pf]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = Command::new("protoc")
        .args(["--decode=perfetto.protos.Trace", "perfetto_trace.proto", "--proto_path"])
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data"))
        .stdin(std::fs::File::open(pf).unwrap())
        .output()
        .expect("protoc runs");
    let decoded = text(&out.stdout);
    let frames: Vec<&str> =
        decoded.lines().filter_map(|l| l.trim().strip_prefix("function_name: ")).collect();
    assert_eq!(frames, ["\"0x10\"".to_string(), format!("\"{name}+0x1a\"")], "{decoded}");

    // trace-cmd (boot/setup.sh installs it) reads the frames from a trace.dat, in
    // Linux's layout, and names them from the kallsyms `--elf` puts there.
    let dat = temp_path("stack.dat");
    let dat = dat.to_str().unwrap();
    let out = report(&[log, "--elf", boot::KERNEL_ELF, "--format", "tracedat", "-o", dat]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = Command::new("trace-cmd").args(["report", dat]).output().expect("trace-cmd runs");
    let read = text(&out.stdout);
    let lines: Vec<&str> = read.lines().skip_while(|l| !l.contains(" kernel_stack: ")).collect();
    assert!(lines.first().is_some_and(|l| l.ends_with("<stack trace >")), "{read}");
    assert_eq!(lines[1..], [format!("=> {name} ({:x})", serial + 0x1a), "=> 10".into()], "{read}");
}

/// A dump carries the fingerprint of its kernel's functions; an ELF whose functions
/// are not those is refused (its names would be wrong), and nothing is written. A
/// dump without one (older, or from a kernel without symbols) is named as it is.
#[test]
fn the_elf_of_another_kernel_is_refused_and_nothing_is_written() {
    let kernel = boot::report::Symbols::read(std::path::Path::new(boot::KERNEL_ELF)).unwrap();
    let ip = kernel.functions()[100].0 + 1;
    let output = temp_path("other.txt");
    let named = |fingerprint: Option<u64>| {
        let log = temp("other.log", stack_log(&[ip], fingerprint));
        let out = report(&[log.to_str().unwrap(), "--elf", "-o", output.to_str().unwrap()]);
        (out, std::fs::read_to_string(&output).ok(), std::fs::remove_file(&output))
    };
    let (out, written, _) = named(Some(kernel.fingerprint()));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(written.is_some_and(|w| w.contains(&format!(" => {}", kernel.frame(ip)))));
    let (out, written, _) = named(None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(written.is_some_and(|w| w.contains(&format!(" => {}", kernel.frame(ip)))));
    let other = kernel.fingerprint() ^ 1;
    let (out, written, _) = named(Some(other));
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{}: the ELF is not the kernel that wrote this dump: its functions' fingerprint is \
             {:#018x}, the dump's kernel's {other:#018x}",
            boot::KERNEL_ELF,
            kernel.fingerprint()
        )),
        "{stderr}"
    );
    assert_eq!(written, None, "nothing is written");
    // Of a log with two dumps, perfetto converts the last alone: only its kernel
    // counts. Text reports the dump the ELF names and leaves the other out, said on
    // both outputs (exit 1, the report partial); the other formats convert the last
    // dump the ELF names, and say why a later one is not it.
    let both = stack_log(&[ip], Some(other)) + &stack_log(&[ip], Some(kernel.fingerprint()));
    let log = temp("two-kernels.log", both);
    let log = log.to_str().unwrap();
    let json = output.to_str().unwrap();
    let out = report(&[log, "--elf", "--format", "perfetto", "-o", json]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let _ = std::fs::remove_file(&output);
    let out = report(&[log, "--elf"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("the ELF is not the kernel that wrote this dump"), "{stderr}");
    let left_out = "# dump 1 of 2 (line 1) was written by another kernel than the ELF's: left out
";
    assert!(stdout.starts_with(left_out), "{stdout}");
    assert!(stdout.contains(&format!(" => {}", kernel.frame(ip))), "{stdout}");
    let later = stack_log(&[ip], Some(kernel.fingerprint())) + &stack_log(&[ip], Some(other));
    let log = temp("two-kernels-later.log", later);
    let out = report(&[log.to_str().unwrap(), "--elf", "--format", "perfetto", "-o", json]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("the ELF is not the kernel that wrote this dump"), "{stderr}");
    assert!(stderr.contains("converting dump 1 (line 1), the last that has"), "{stderr}");
    let converted = std::fs::read_to_string(&output).unwrap_or_default();
    assert!(converted.contains(&kernel.frame(ip)), "the first dump, the ELF's: {converted}");
    let _ = std::fs::remove_file(&output);
    // None the ELF's: an error, nothing written.
    let neither = stack_log(&[ip], Some(other)) + &stack_log(&[ip], Some(other));
    let log = temp("two-other-kernels.log", neither);
    let out = report(&[log.to_str().unwrap(), "--elf", "-o", json]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("none of the 2 dumps has it"), "{}", text(&out.stderr));
    assert!(std::fs::read(&output).is_err(), "nothing is written");
}

#[test]
fn a_bad_elf_is_refused_with_the_reason_and_nothing_is_written() {
    let log = temp("elf.log", stack_log(&[0x1234], None));
    let kernel = std::fs::read(boot::KERNEL_ELF).unwrap();
    let mut class32 = kernel[..64].to_vec();
    class32[4] = 1;
    // Stripped: the symbol table's section header made SHT_NULL (its sh_type, the
    // header's second word).
    let mut stripped = kernel.clone();
    {
        use object::read::elf::{FileHeader, SectionHeader};
        let header = object::elf::FileHeader64::<object::Endianness>::parse(&*kernel).unwrap();
        let endian = header.endian().unwrap();
        let sections = header.sections(endian, &*kernel).unwrap();
        let (index, _) = sections
            .iter()
            .enumerate()
            .find(|(_, s)| s.sh_type(endian) == object::elf::SHT_SYMTAB)
            .expect("the kernel has a symbol table");
        let at = header.e_shoff(endian) as usize + index * usize::from(header.e_shentsize(endian));
        stripped[at + 4..at + 8].fill(0);
    }
    let stripped = temp("elf-stripped", &stripped);
    let empty = temp("elf-empty", b"");
    let class32 = temp("elf-32", &class32);
    let header = temp("elf-header", &kernel[..40]);
    let half = temp("elf-half", &kernel[..kernel.len() / 2]);
    let missing = temp_path("no-such-elf");
    let cases: [(&Path, &str); 7] = [
        (&stripped, "no symbol table"),
        (&log, "not an ELF file"),
        (&empty, "not an ELF file"),
        (&class32, "not a 64-bit ELF file"),
        (&header, "truncated: 40 bytes"),
        (&half, "damaged ELF64 file"),
        (&missing, "No such file"),
    ];
    let output = temp_path("elf-out.txt");
    for (elf, reason) in &cases {
        let out = report(&[
            log.to_str().unwrap(),
            "--elf",
            elf.to_str().unwrap(),
            "-o",
            output.to_str().unwrap(),
        ]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{elf:?}: {stderr}");
        assert!(
            stderr.starts_with(&format!("report: --elf {}: ", elf.display()))
                && stderr.contains(reason),
            "{elf:?}: {stderr}"
        );
        assert!(!output.exists(), "{elf:?}: an output was written");
    }
}

/// An option that takes the log as its value leaves `report` without LOG: the error
/// names the option and the rule (`--elf`'s PATH is optional), not only the missing
/// LOG; an `--elf` value that is not an ELF is named as `--elf`'s; `-o` naming the
/// log or the ELF is refused, and either is left as it was.
#[test]
fn an_option_that_takes_the_log_is_named_with_the_rule() {
    let contents = log();
    let log = temp("taken.log", &contents);
    let elf = temp("taken.elf", std::fs::read(boot::KERNEL_ELF).unwrap());
    let (path, elf_path) = (log.to_str().unwrap(), elf.to_str().unwrap());
    let cases: [(&[&str], String); 6] = [
        (
            &["--elf", path],
            format!(
                "report: no LOG given: --elf took {path:?} as its value, and LOG is required \
                 (--elf's PATH is optional: give LOG first (`report LOG --elf PATH`) or write \
                 --elf=PATH)"
            ),
        ),
        (&["-o", path], format!("report: no LOG given: -o took {path:?} as its value")),
        (
            &["--stat", "--instance", path],
            format!("report: no LOG given: --instance took {path:?}"),
        ),
        (&["--elf", path, path], format!("report: --elf {path}: not an ELF file")),
        (&[path, "-o", path], format!("report: -o {path} is LOG, which the report reads")),
        (
            &[path, "--elf", elf_path, "-o", elf_path],
            format!("report: -o {elf_path} is the --elf file, which the report reads"),
        ),
    ];
    let kernel = std::fs::read(&elf).unwrap();
    for (args, said) in cases {
        let out = report(args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.starts_with(&said), "{args:?}: {stderr}");
        assert_eq!(std::fs::read_to_string(&log).unwrap(), contents, "{args:?}: the log changed");
        assert!(std::fs::read(&elf).unwrap() == kernel, "{args:?}: the ELF changed");
    }
}

/// `-o X` is written as `X.partial` until it is complete: LOG or the `--elf` file
/// being that file is refused with the rule, and left as it was.
#[test]
fn an_output_whose_partial_file_is_an_input_is_refused() {
    let contents = log();
    let kernel = std::fs::read(boot::KERNEL_ELF).unwrap();
    let (log, other) = (temp("log.partial", &contents), temp("other.log", &contents));
    let elf = temp("elf.partial", &kernel);
    let (path, elf_path) = (log.to_str().unwrap(), elf.to_str().unwrap());
    let (out, elf_out) =
        (path.strip_suffix(".partial").unwrap(), elf_path.strip_suffix(".partial").unwrap());
    let cases: [(&[&str], String); 2] = [
        (
            &[path, "-o", out],
            format!("-o {out} is written as {path} until it is complete, and that is LOG"),
        ),
        (
            &[other.to_str().unwrap(), "--elf", elf_path, "-o", elf_out],
            format!(
                "-o {elf_out} is written as {elf_path} until it is complete, and that is the --elf file"
            ),
        ),
    ];
    for (args, said) in cases {
        let out = report(args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with(&format!("report: {said}, which the report reads")),
            "{args:?}: {stderr}"
        );
        assert_eq!(std::fs::read_to_string(&log).unwrap(), contents, "{args:?}: the log changed");
        assert!(std::fs::read(&elf).unwrap() == kernel, "{args:?}: the ELF changed");
    }
}

/// A LOG that is a pipe (`report /dev/stdin`, `report <(cat LOG)`) can be read only
/// once: it is reported as the file would be.
/// A line of the log longer than a dump's is read only in part: a 256 MiB line
/// (sparse zeros, no newline) before the dump is read within 200 MiB of address
/// space, and the dump after it is reported.
#[test]
fn a_huge_line_is_not_held_in_memory() {
    use std::io::{Seek, SeekFrom, Write};
    let path = std::env::temp_dir().join(format!("huge-line-{}.log", std::process::id()));
    let mut file = std::fs::File::create(&path).unwrap();
    file.set_len(256 << 20).unwrap();
    file.seek(SeekFrom::End(0)).unwrap();
    file.write_all(format!("\n{}", log()).as_bytes()).unwrap();
    drop(file);
    let binary = env!("CARGO_BIN_EXE_boot");
    let command = format!("ulimit -v 204800; exec {binary} report {}", path.display());
    let out = Command::new("sh").args(["-c", &command]).output().unwrap();
    let _ = std::fs::remove_file(&path);
    assert!(out.status.success(), "{:?}: {}", out.status, text(&out.stderr));
    assert!(text(&out.stdout).contains("ping: seq=3 host=gamma"), "{}", text(&out.stdout));
}

#[test]
fn a_piped_log_is_reported_as_its_file() {
    use std::io::Write;
    use std::process::Stdio;
    let contents = log();
    let file = temp("piped.log", &contents);
    let expected = report(&[file.to_str().unwrap()]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_boot"))
        .args(["report", "/dev/stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(contents.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("ping: seq=3 host=gamma"), "{}", text(&out.stdout));
    assert_eq!(text(&out.stdout), text(&expected.stdout));
}

#[test]
fn report_filter_keeps_the_events_named_whose_filter_passes() {
    let log = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/panic-latency-snapshot.log");
    let events = |out: &std::process::Output| -> Vec<String> {
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout).lines().filter(|l| !l.starts_with('#')).map(str::to_string).collect()
    };
    let all = events(&report(&[log, "--instance", "top"]));
    let on = |l: &String, event: &str, cpu: &str| l.contains(event) && l.contains(cpu);
    // An event's field and a common field.
    let out = report(&[log, "--instance", "top", "--filter", "timer/tick: CPU == 2 && tick > 0"]);
    let ticks: Vec<String> = all.iter().filter(|l| on(l, ": tick: ", "[002]")).cloned().collect();
    assert!(!ticks.is_empty() && ticks.len() < all.len());
    assert_eq!(events(&out), ticks);
    let held = all.len();
    let note =
        format!("# (the filter leaves out {} of the {held} the dump holds)", held - ticks.len());
    assert!(text(&out.stdout).contains(&note), "{}", text(&out.stdout));
    // Several specs are a union; an event without a filter is kept whole.
    let out =
        report(&[log, "--instance", "top", "--filter", "irq/*: vector == 49", "--filter", "rx"]);
    let kept: Vec<String> = all
        .iter()
        .filter(|l| l.contains(": rx: ") || (l.contains(": irq_handler_") && l.contains("=49")))
        .cloned()
        .collect();
    assert!(kept.iter().any(|l| l.contains(": rx: ")) && kept.iter().any(|l| l.contains("=49")));
    assert_eq!(events(&out), kept);
    // Every format reports the same selection.
    let json = temp_path("filter.json");
    let out =
        report(&[log, "--format", "perfetto", "--filter", "tick", "-o", json.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let written = std::fs::read_to_string(&json).unwrap();
    assert!(written.contains("\"tick\"") && !written.contains("irq_handler_entry"), "{written}");
    std::fs::remove_file(&json).unwrap();
    // A bad spec is refused with the rule, and nothing is written.
    for (spec, error) in [
        ("nosuch", "--filter 'nosuch': no event of the dump is named so"),
        (
            "tick: tik > 1",
            "--filter 'tick: tik > 1': timer:tick: parse error at 4: field not found",
        ),
        ("a/b/c", "--filter 'a/b/c': an event is SYSTEM/EVENT or EVENT"),
    ] {
        let out = report(&[log, "--filter", spec]);
        assert_eq!(out.status.code(), Some(2), "{spec}");
        assert!(text(&out.stderr).contains(error), "{spec}: {}", text(&out.stderr));
        assert!(out.stdout.is_empty(), "{spec}");
    }
    // `.function`: an address inside a function of the ELF `--elf` reads (only
    // with it).
    let tracers = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/panic-tracers.log");
    // The kernel that wrote it, as its split debug file.
    let elf = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/panic-tracers.elf");
    let symbols = boot::report::Symbols::read(std::path::Path::new(elf)).unwrap();
    // A function record prints `IP <-PARENT` after its time.
    fn call(line: &str) -> Option<&str> {
        line.split_once(" <-")?.0.rsplit(' ').next()
    }
    let calls = events(&report(&[tracers, "--instance", "top"]));
    let ips =
        calls.iter().filter_map(|l| u64::from_str_radix(call(l)?.strip_prefix("0x")?, 16).ok());
    let (name, _) = ips.filter_map(|ip| symbols.lookup(ip)).next().expect("a function record");
    let spec = format!("function: ip.function == \"{name}\"");
    let kept = events(&report(&[tracers, "--instance", "top", "--elf", elf, "--filter", &spec]));
    assert!(!kept.is_empty());
    assert!(kept.iter().all(|l| call(l) == Some(name)), "{kept:?}");
    // So do histograms and trace.dat (which keeps the addresses).
    let named = [tracers, "--instance", "top", "--elf", elf, "--filter", &spec];
    let hist = report(&[&named[..], &["--hist", "ftrace/function:hist:keys=CPU"]].concat());
    let hits = format!("Totals:\n    Hits: {}\n", kept.len());
    assert!(text(&hist.stdout).contains(&hits), "{}", text(&hist.stderr));
    let dat = temp_path("function-filter.dat");
    let out =
        report(&[&named[..], &["--format", "tracedat", "-o", dat.to_str().unwrap()]].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    std::fs::remove_file(&dat).unwrap();
    let out = report(&[tracers, "--instance", "top", "--filter", &spec]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no function of that name"), "{}", text(&out.stderr));
}

/// A stream's statistics come again at its end: their entries are then what its
/// reader left unread, and text and `--stat` say so (its events are what it read). A
/// dump's stats come once: entries it does not hold were lost with damaged chunks.
#[test]
fn a_stream_says_what_its_reader_left_unread() {
    let log_with = |end: Option<RingStats>| {
        let descriptor: &EventDescriptor = PING.descriptor();
        let mut log = String::new();
        let mut writer = log_writer(&mut log);
        writer.header(1, None, None);
        writer.descriptor_as(1, descriptor);
        writer.instance(0, "");
        writer.cpu_stats(0, 0, &RingStats { written: 10, entries: 10, ..RingStats::default() });
        for seq in 0..2u32 {
            let mut buf = [0u8; 64];
            let mut enc = trace::field::Encoder::new(&mut buf);
            use trace::field::FieldValue;
            seq.encode(&mut enc);
            "host".encode(&mut enc);
            writer.record(0, &record(0, 1_000 + u64::from(seq), enc.bytes()), Some(descriptor));
        }
        if let Some(end) = end {
            writer.cpu_stats(0, 0, &end);
        }
        writer.finish();
        log
    };
    let end = RingStats { written: 12, entries: 4, read: 8, ..RingStats::default() };
    let stream = temp("stream-unread.log", log_with(Some(end)));
    let note = "4 entries were left unread in the buffer at the stream's end";
    for args in [&[][..], &["--stat"][..]] {
        let out = report(&[&[stream.to_str().unwrap()][..], args].concat());
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(text(&out.stdout).contains(note), "{args:?}: {}", text(&out.stdout));
    }
    let dump = temp("dump-damaged.log", log_with(None));
    let out = report(&[dump.to_str().unwrap()]);
    let lost =
        "# (8 of the 10 entries in the buffer are not in it: lost with damaged or cut chunks)";
    assert!(text(&out.stdout).contains(lost), "{}", text(&out.stdout));
}

/// Of a log with several dumps, one whose events a `--filter` or `--hist` spec does
/// not fit is left out, said so before anything of it is written, as a dump without
/// the instance asked; it is an error only when no dump fits.
#[test]
fn report_filter_and_hist_leave_out_a_dump_they_do_not_fit() {
    let data = |name: &str| {
        std::fs::read_to_string(format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR")))
            .unwrap()
    };
    // The first dump's kernel has no `ftrace:irqsoff` event; the second's recorded some.
    let (older, tracers) = (data("panic-shell.log"), data("panic-tracers.log"));
    let log = temp("filter-two-kernels.log", older.clone() + &tracers);
    let log = log.to_str().unwrap();
    let second = older.lines().count()
        + 1
        + tracers.lines().position(|l| l.contains(trace::dump::BEGIN)).unwrap();
    let first = 1 + older.lines().position(|l| l.contains(trace::dump::BEGIN)).unwrap();
    for (option, spec, error) in [
        ("--filter", "ftrace/irqsoff", "no event of the dump is named so"),
        ("--hist", "ftrace/irqsoff:hist:keys=CPU", "no event of the dump is named ftrace/irqsoff"),
    ] {
        let out = report(&[log, option, spec]);
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{spec}: {}", text(&out.stderr));
        let left_out = format!(
            "# dump 1 of 2 (line {first}): {option} '{spec}': {error}\n# dump 2 of 2 (line {second})\n"
        );
        assert!(stdout.starts_with(&left_out), "{spec}: {stdout}");
        assert!(
            stdout.contains(if option == "--hist" { "hist:keys=CPU" } else { " irqsoff: " }),
            "{spec}: {stdout}"
        );
    }
    // The other formats convert the last dump it fits (its instance `irq`'s snapshot
    // holds the records).
    let json = temp_path("filter-two-kernels.json");
    let reversed = temp("filter-two-kernels-reversed.log", tracers + &older);
    let out = report(&[
        reversed.to_str().unwrap(),
        "--instance",
        "irq",
        "--filter",
        "ftrace/irqsoff",
        "--format",
        "perfetto",
        "-o",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("converting dump 1 (line"), "{}", text(&out.stderr));
    let converted = std::fs::read_to_string(&json).unwrap();
    assert!(converted.contains("\"event\":\"ftrace:irqsoff\""), "{converted}");
    std::fs::remove_file(&json).unwrap();
    // Fitting none of them: an error naming the last, nothing written.
    let file = temp_path("filter-two-kernels.txt");
    let out = report(&[log, "--filter", "lockup/hard_lockup", "-o", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(std::fs::read(&file).is_err(), "nothing is written");
    let error = format!(
        "none of the 2 dumps has it: the dump at line {second}: --filter 'lockup/hard_lockup': no event of the dump is named so"
    );
    assert!(text(&out.stderr).contains(&error), "{}", text(&out.stderr));
}

#[test]
fn report_filter_keeps_the_stack_traces_of_the_events_it_shows() {
    // Instance `stk`: `timer:tick` with a `stacktrace:4` trigger, each stack recorded
    // right after its tick on the tick's CPU.
    let log = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/panic-tracers.log");
    let events = |args: &[&str]| -> Vec<String> {
        let out = report(&[&[log, "--instance", "stk"], args].concat());
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout).lines().filter(|l| !l.starts_with('#')).map(str::to_string).collect()
    };
    let all = events(&[]);
    let cpu = |l: &str| l.split_once('[').map(|(_, rest)| rest[..3].to_string());
    // What trace-cmd report -F shows: the events the filter passes, and each stack
    // whose CPU's event before it is shown.
    let expected = |passes: &dyn Fn(&str) -> bool| -> Vec<String> {
        let mut last_shown = std::collections::BTreeMap::new();
        let mut kept = Vec::new();
        for line in &all {
            let shown = if line.contains(": kernel_stack: ") {
                last_shown.get(&cpu(line)).copied().unwrap_or(false)
            } else {
                passes(line)
            };
            last_shown.insert(cpu(line), shown);
            if shown {
                kept.push(line.clone());
            }
        }
        kept
    };
    let ticks = events(&["--filter", "tick"]);
    assert_eq!(ticks, expected(&|l: &str| l.contains(": tick: ")));
    assert_eq!(ticks.iter().filter(|l| l.contains(": kernel_stack: ")).count(), 4, "{ticks:?}");
    // A stack whose event the filter leaves out goes with it.
    let cpu0 = events(&["--filter", "tick: CPU == 0"]);
    assert_eq!(cpu0, expected(&|l: &str| l.contains(": tick: ") && l.contains("[000]")));
    assert_eq!(cpu0.iter().filter(|l| l.contains(": kernel_stack: ")).count(), 1, "{cpu0:?}");
}

#[test]
fn report_hist_builds_the_kernels_histograms_from_a_dumps_records() {
    let log = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/panic-latency-snapshot.log");
    let top = [log, "--instance", "top", "--buffer", "live"];
    // By hand, from the text report: entries per (vector, CPU), and each exit's time
    // since its key's latest entry not yet paired.
    let out = report(&top);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut starts = std::collections::BTreeMap::<(u64, usize), u64>::new();
    let mut open = std::collections::BTreeMap::<(u64, usize), u64>::new();
    let mut pairs = std::collections::BTreeMap::<(u64, usize), (u64, u64)>::new();
    for line in text(&out.stdout).lines().filter(|l| l.contains(": irq_handler_")) {
        let cpu = line.split_once(" [").unwrap().1[..3].parse().unwrap();
        let stamp = line.split("] ").nth(1).unwrap().split_whitespace().nth(1).unwrap();
        let (secs, ns) = stamp.trim_end_matches(':').split_once('.').unwrap();
        let ts = secs.parse::<u64>().unwrap() * 1_000_000_000 + ns.parse::<u64>().unwrap();
        let vector: u64 = line.rsplit_once("vector=").unwrap().1.trim().parse().unwrap();
        if line.contains(": irq_handler_entry: ") {
            *starts.entry((vector, cpu)).or_default() += 1;
            open.insert((vector, cpu), ts);
        } else if let Some(t0) = open.remove(&(vector, cpu)) {
            let pair = pairs.entry((vector, cpu)).or_default();
            *pair = (pair.0 + 1, pair.1 + ts - t0);
        }
    }
    assert!(!pairs.is_empty());
    let entry = "irq/irq_handler_entry:hist:keys=vector,CPU:ts0=common_timestamp";
    let exit = "irq_handler_exit:hist:keys=vector,CPU:vals=$lat:lat=common_timestamp-$ts0";
    let out = report(&[&top[..], &["--hist", entry, "--hist", exit]].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let hists = text(&out.stdout);
    assert!(hists.starts_with("# instance: top\n# event histogram\n"), "{hists}");
    let row =
        |(vector, cpu): &(u64, usize)| format!("{{ vector: {vector:>10}, common_cpu: {cpu:>10} }}");
    for (key, n) in &starts {
        assert!(hists.contains(&format!("{} hitcount: {n:>10}\n", row(key))), "{key:?}: {hists}");
    }
    for (key, (n, sum)) in &pairs {
        let line = format!("{} hitcount: {n:>10}  lat: {sum:>10}\n", row(key));
        assert!(hists.contains(&line), "{line}{hists}");
    }
    // Refused: with another output, and a spec that breaks a rule (exit code 2).
    for (args, error) in [
        (&["--stat", "--hist", entry][..], "--hist prints histograms as text"),
        (&["--hist", exit][..], "at 69: no other spec defines $ts0"),
        (&["--hist", "irq_handler_exit:hist:keys=vectr"][..], "parse error at 27: no such field"),
    ] {
        let out = report(&[&top[..], args].concat());
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(text(&out.stderr).contains(error), "{args:?}: {}", text(&out.stderr));
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn report_text_prints_function_graph_as_the_kernels_dump_text() {
    // Instance `graph`: `function_graph` on `kernel::shell::commands::*`, its calls
    // leaves (`name();`), a call with a nested one (`name() {` ... `}`), and the
    // `panic` still running when the kernel dumped (an entry without its return).
    let log = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/panic-tracers.log");
    let elf = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/panic-tracers.elf");
    // The kernel's text part of the dump: the section's lines after its `#` lines,
    // up to the next section's heading.
    let dump = std::fs::read_to_string(log).unwrap();
    let kernel: Vec<&str> = dump
        .lines()
        .skip_while(|l| *l != "# instance graph")
        .skip(1)
        .take_while(|l| !l.starts_with("# instance ") && !l.starts_with("<<<TRACE-DUMP"))
        .filter(|l| !l.starts_with('#'))
        .collect();
    assert_eq!(kernel.len(), 15, "{kernel:#?}");
    let lines = |args: &[&str]| -> Vec<String> {
        let out = report(&[&[log, "--instance", "graph"], args].concat());
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout).lines().filter(|l| !l.starts_with('#')).map(str::to_string).collect()
    };
    // With the kernel's ELF: its names, line by line.
    let named = lines(&["--elf", elf]);
    for (i, (ours, theirs)) in named.iter().zip(&kernel).enumerate() {
        assert_eq!(ours, theirs, "line {i}");
    }
    assert_eq!(named.len(), kernel.len(), "{named:#?}");
    // Without it: the same lines, each function an address the ELF names.
    let symbols = boot::report::Symbols::read(Path::new(elf)).unwrap();
    let addressed = lines(&[]);
    assert_eq!(addressed.len(), kernel.len(), "{addressed:#?}");
    for (i, (ours, theirs)) in addressed.iter().zip(&kernel).enumerate() {
        let named: String = ours
            .split_inclusive([' ', '('])
            .map(|word| {
                let (addr, rest) = word.split_at(word.find([' ', '(']).unwrap_or(word.len()));
                let name = addr.strip_prefix("0x").and_then(|hex| {
                    symbols.lookup(u64::from_str_radix(hex, 16).ok()?).map(|(name, _)| name)
                });
                format!("{}{rest}", name.unwrap_or(addr))
            })
            .collect();
        assert_ne!(ours, theirs, "line {i}: an address, not a name");
        assert_eq!(&named, theirs, "line {i}");
    }
}

/// A stream's losses after a CPU's last record (a reader that lost events, and no
/// record of that CPU came after) are told after the last line, and by the other
/// formats, where they were read and then dropped; a filter that leaves out a
/// CPU's last events tells theirs there too.
#[test]
fn losses_after_a_cpus_last_record_are_reported() {
    let mut log = String::new();
    let mut writer = log_writer(&mut log);
    writer.header(2, None, None);
    let descriptor: &EventDescriptor = PING.descriptor();
    writer.descriptor_as(1, descriptor);
    writer.instance(0, "");
    let ping = |seq: u32| {
        let mut buf = [0u8; 16];
        let mut enc = trace::field::Encoder::new(&mut buf);
        use trace::field::FieldValue;
        seq.encode(&mut enc);
        "h".encode(&mut enc);
        let len = enc.bytes().len();
        (buf, len)
    };
    let ((first, n), (second, m)) = (ping(1), ping(2));
    writer.record(0, &record(0, 10, &first[..n]), Some(descriptor));
    writer.lost(0, 1, 3);
    writer.record(0, &record(1, 20, &second[..m]), Some(descriptor));
    writer.lost(0, 0, 5);
    writer.lost(0, 1, 2);
    writer.finish();
    let path = temp("lost-after.log", &log);
    let out = report(&[path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(lines.len(), 5, "{stdout}");
    assert_eq!(lines[1], "CPU:1 [LOST 3 EVENTS]");
    assert_eq!(lines[3..], ["CPU:0 [LOST 5 EVENTS]", "CPU:1 [LOST 2 EVENTS]"], "{stdout}");
    // A filter that leaves CPU 1's event out tells its loss with the later one's.
    let out = report(&[path.to_str().unwrap(), "--filter", "ping: seq == 1"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lost: Vec<&str> = stdout.lines().filter(|l| l.contains("LOST")).collect();
    assert_eq!(lost, ["CPU:0 [LOST 5 EVENTS]", "CPU:1 [LOST 5 EVENTS]"], "{stdout}");
    let out = report(&[path.to_str().unwrap(), "--format", "perfetto"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let counts: Vec<(u64, u64)> = json["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "lost events")
        .map(|e| (e["tid"].as_u64().unwrap(), e["args"]["count"].as_u64().unwrap()))
        .collect();
    assert_eq!(counts, [(1, 3), (0, 5), (1, 2)]);
}

/// A log of one dump of `records` records with empty payloads, of an event whose
/// format prints its one field 100 times: each record, about 5 bytes of the log,
/// renders as 3.4 KB of text (`<payload too short for its fields>` each time).
fn amplifying_log(records: usize) -> String {
    use trace::event::DescriptorKind;
    use trace::field::{Field, FieldKind};
    let format: &'static str = "{a}".repeat(100).leak();
    const FIELDS: &[Field<'static>] = &[Field { name: "a", kind: FieldKind::U64 }];
    let descriptor = EventDescriptor::new("s", "e", format, FIELDS, DescriptorKind::Event);
    let mut log = String::new();
    let mut writer = log_writer(&mut log);
    writer.header(1, None, None);
    writer.descriptor_as(1, &descriptor);
    writer.instance(0, "");
    for _ in 0..records {
        writer.record(0, &record(0, 1_000, &[]), None);
    }
    writer.finish();
    log
}

/// A report's peak memory grows with its log by at most a constant times the log
/// ([`MEMORY_PER_INPUT_BYTE`], as the fuzz test allows), in the formats below: a
/// 1 MB log of records whose text is kilobytes each took 800 MB (`--stat`, text)
/// and 1.2 GB (perfetto) when the decoded events kept their text, and trace.dat
/// 780 MB more while it built its pages in memory.
#[test]
fn a_reports_memory_stays_proportional_to_its_log() {
    let log = amplifying_log(190_000);
    assert!((900_000..1_200_000).contains(&log.len()), "{}", log.len());
    let (big, small) =
        (temp("amplifying.log", &log), temp("amplifying-small.log", amplifying_log(10)));
    let allowed = MEMORY_PER_INPUT_BYTE * log.len() as u64 + SLACK;
    // trace.dat's output is as large as its records' text: 770 MB, to /dev/null.
    let formats: [&[&str]; 6] = [
        &["-o", "/dev/null"],
        &["--stat"],
        &["--format", "perfetto", "-o"],
        &["--format", "perfetto-proto", "-o"],
        &["--format", "ctf", "-o"],
        &["--format", "tracedat", "-o", "/dev/null"],
    ];
    for format in formats {
        let peak = |log: &Path| {
            // A fresh output each run (CTF writes a directory).
            let out = temp_path("amplifying.out");
            let mut args: Vec<&std::ffi::OsStr> = vec![log.as_os_str()];
            args.extend(format.iter().map(std::ffi::OsStr::new));
            if format.last() == Some(&"-o") {
                args.push(out.as_os_str());
            }
            let (ok, peak) = report_peak(&args);
            assert!(ok, "report {format:?} failed");
            peak
        };
        let growth = peak(&big).saturating_sub(peak(&small));
        assert!(
            growth <= allowed,
            "report {format:?}: peak memory grew by {} MiB on a {} byte log (at most {} MiB)",
            growth >> 20,
            log.len(),
            allowed >> 20
        );
    }
}
