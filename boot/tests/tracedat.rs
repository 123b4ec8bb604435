//! `boot report --format tracedat` read back by trace-cmd (Debian's, installed by
//! boot/setup.sh), on the serial log of a real QEMU panic: the parser of trace-cmd
//! and libtraceevent must accept every format file and print every event with its
//! CPU, timestamp and fields as our own report does.

mod support;
use support::{boot, log_writer, temp_path, text};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use trace::dump::BufferKind;

/// A serial log captured from `cargo run` (4 CPUs): events enabled, a few shell
/// commands and markers, then `panic`.
const PANIC_LOG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/panic-serial.txt");

/// `trace-cmd report ARGS FILE`, which must succeed without complaint.
fn trace_cmd_report(file: &Path, args: &[&str]) -> String {
    let out = Command::new("trace-cmd")
        .arg("report")
        .args(args)
        .arg(file)
        .output()
        .expect("trace-cmd runs (boot/setup.sh installs it)");
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "trace-cmd report failed: {stderr}");
    assert!(
        !stderr.contains("ailed") && !stderr.contains("rror") && !stderr.contains("arning"),
        "trace-cmd complained: {stderr}"
    );
    text(&out.stdout)
}

/// One event line of `trace-cmd report -t`:
/// `<idle>-0     [001]    69.267965338: irq_handler_entry:    vector=48`.
#[derive(Debug, PartialEq)]
struct Line {
    cpu: usize,
    ts: u64,
    name: String,
    fields: String,
}

fn parse_line(line: &str) -> Option<Line> {
    let (_, rest) = line.split_once(" [")?;
    let (cpu, rest) = rest.split_once(']')?;
    let (ts, rest) = rest.trim_start().split_once(": ")?;
    let (secs, nanos) = ts.split_once('.')?;
    let (name, fields) = rest.split_once(':').unwrap_or((rest, ""));
    Some(Line {
        cpu: cpu.parse().ok()?,
        ts: secs.parse::<u64>().ok()? * 1_000_000_000 + nanos.parse::<u64>().ok()?,
        name: name.trim().to_string(),
        fields: fields.trim().to_string(),
    })
}

/// The name trace.dat gives event `d`: its own, but `NAME_` for an interrupt event
/// without Linux's `irq` field (this older kernel's carry `vector`), which trace-cmd's
/// profiler would stop at.
fn written_name(d: &trace::dump::DumpDescriptor) -> String {
    let irq = d.system == "irq" && d.name.starts_with("irq_handler_");
    match irq && !d.fields().iter().any(|f| f.name == "irq") {
        true => format!("{}_", d.name),
        false => d.name.clone(),
    }
}

#[test]
fn trace_cmd_reads_every_event_of_a_real_panic_with_its_fields() {
    let log = std::fs::read_to_string(PANIC_LOG).unwrap();
    let dump = trace::dump::parse(&log).pop().expect("the log holds a dump");
    assert!(dump.problems.is_empty(), "{:?}", dump.problems);
    let trace =
        dump.sections().into_iter().find(|t| t.instance == "top").expect("the top-level instance");
    assert!(trace.events.len() > 100, "a real trace: {} events", trace.events.len());

    let file = temp_path("panic.dat");
    let path = file.to_str().unwrap();
    let out = boot(&["report", "--format", "tracedat", "--instance", "top", "-o", path, PANIC_LOG]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = trace_cmd_report(&file, &["-t"]);

    // Our text report: one line per event after its `#` header.
    let ours = boot(&["report", "--instance", "top", PANIC_LOG]);
    assert!(ours.status.success(), "{}", text(&ours.stderr));
    let ours = text(&ours.stdout);
    let our_events = ours.lines().filter(|l| !l.starts_with('#') && !l.contains("[LOST")).count();
    assert_eq!(our_events, trace.events.len());

    let lines: Vec<Line> = report.lines().filter_map(parse_line).collect();
    assert_eq!(lines.len(), our_events, "trace-cmd lists as many events as our report:\n{report}");
    let (mut names, texts) = (std::collections::BTreeSet::new(), trace.texts());
    for (line, ev) in lines.iter().zip(&trace.events) {
        let d = trace.descriptor(ev.id).expect("every event of a real dump has a descriptor");
        // A marker prints as a Linux one does: `print: tracing_mark_write: TEXT`.
        let fields = match d.name.as_str() {
            "print" => format!("tracing_mark_write: {}", texts.text(ev)),
            _ => texts.text(ev),
        };
        let expected = Line { cpu: ev.cpu, ts: ev.ts, name: written_name(d), fields };
        assert_eq!(*line, expected);
        names.insert(trace.event_name(ev.id));
    }
    for name in ["irq:irq_handler_entry", "shell:command", "ftrace:print", "timer:tick"] {
        assert!(names.contains(name), "the log exercises {name}: {names:?}");
    }
}

#[test]
fn trace_cmd_sees_the_cpus_the_clock_and_the_stats() {
    let file = temp_path("stat.dat");
    let path = file.to_str().unwrap();
    let out = boot(&["report", "--format", "tracedat", "--instance", "top", "-o", path, PANIC_LOG]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stat = trace_cmd_report(&file, &["--stat"]);
    assert!(stat.contains("CPU: 3\nentries: "), "{stat}");
    // Every format names only fields it declares: a printk site's is its text (the
    // log holds none of its records), not its format string over no fields.
    let formats = Command::new("trace-cmd").args(["dump", "--ftrace"]).arg(&file).output();
    let formats = text(&formats.expect("trace-cmd runs").stdout);
    assert!(formats.contains("name: printk"), "{formats}");
    assert!(!formats.contains("<no field"), "{formats}");
    let missing = boot(&["report", "--format", "tracedat", PANIC_LOG]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(text(&missing.stderr).contains("--format tracedat needs -o FILE"));
}

/// A real log with the function tracers' records (`tests/data/panic-tracers.log`).
const TRACERS_LOG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/panic-tracers.log");
/// The symbols of the kernel that wrote [`TRACERS_LOG`]: its split debug file
/// (`objcopy --only-keep-debug`), as a rebuilt kernel moves its functions.
const TRACERS_ELF: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/panic-tracers.elf");

/// A function's name as trace.dat's kallsyms carry it (trace-cmd reads a name up to
/// its first space).
fn kallsyms_name(name: &str) -> String {
    name.replace(", ", ",").replace(' ', "_")
}

/// The name trace-cmd gives `addr` from the kallsyms of the kernel ELF `--elf`
/// reads: the function starting last at or below it (libtraceevent's rule, which
/// also names a return address just past its function's end).
fn name_of(symbols: &boot::report::Symbols, addr: u64) -> Option<String> {
    let functions = symbols.functions();
    let (_, name) = functions.iter().rev().find(|(start, _)| *start <= addr)?;
    Some(kallsyms_name(name))
}

/// `report --elf --format tracedat` of an instance of [`TRACERS_LOG`] read by
/// `trace-cmd report ARGS`, and that instance's live buffer as we decode it.
fn tracers_report(instance: &str, args: &[&str]) -> (String, trace::dump::Section) {
    let file = temp_path(&format!("tracers-{instance}.dat"));
    let path = file.to_str().unwrap();
    let out = boot(&[
        "report",
        "--elf",
        TRACERS_ELF,
        "--format",
        "tracedat",
        "--instance",
        instance,
        "-o",
        path,
        TRACERS_LOG,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = trace_cmd_report(&file, args);
    let log = std::fs::read_to_string(TRACERS_LOG).unwrap();
    let dump = trace::dump::parse(&log).pop().expect("the log holds a dump");
    let live = |t: &trace::dump::Section| {
        t.instance == instance && t.buffer == trace::dump::BufferKind::Live
    };
    (report, dump.sections().into_iter().find(live).expect("the instance's live buffer"))
}

/// The values of `section`'s events named `name`, in order.
fn values_of(section: &trace::dump::Section, name: &str) -> Vec<Vec<u64>> {
    let unsigned = |v: &trace::dump::Value| match v {
        trace::dump::Value::Unsigned(v) => *v,
        other => panic!("{other:?}"),
    };
    section
        .events
        .iter()
        .filter(|e| section.descriptor(e.id).is_some_and(|d| d.name == name))
        .map(|e| e.values.iter().map(unsigned).collect())
        .collect()
}

/// trace-cmd's function graph display reads our `function_graph` records: each
/// call with its duration (`calltime`, `rettime` from our `duration`) and the
/// function's name from the kallsyms `--elf` writes.
#[test]
fn trace_cmd_shows_function_graph_calls_with_durations_and_names() {
    let symbols = boot::report::Symbols::read(Path::new(TRACERS_ELF)).unwrap();
    let (report, graph) = tracers_report("graph", &[]);
    let exits = values_of(&graph, "funcgraph_exit");
    assert!(exits.len() >= 10, "a real function graph: {exits:?}");
    // `| name();` for a call whose return is the next record, `| name() {` ...
    // `| }` otherwise; the duration on the line that ends the call.
    let durations: Vec<&str> = report
        .lines()
        .filter_map(|l| l.split_once(" us |").map(|(head, _)| head.rsplit(' ').next().unwrap()))
        .collect();
    let ours: Vec<String> =
        exits.iter().map(|e| format!("{}.{:03}", e[2] / 1000, e[2] % 1000)).collect();
    assert_eq!(durations, ours, "{report}");
    let called: Vec<&str> = report
        .lines()
        .filter_map(|l| {
            let call = l.split_once(" |  ")?.1.trim_start();
            call.strip_suffix("();").or(call.strip_suffix("() {"))
        })
        .collect();
    let entries = values_of(&graph, "funcgraph_entry");
    let names: Vec<String> = entries
        .iter()
        .map(|e| name_of(&symbols, e[0]).unwrap_or_else(|| format!("{:x}", e[0])))
        .collect();
    assert_eq!(called, names, "{report}");
}

/// trace-cmd's profiler reads each buffer: an event of a name whose fields it reads,
/// but without them (this older kernel's `irq_handler_entry` carries `vector`, not
/// Linux's `irq`), is written under another name, where the profiler stopped at it.
#[test]
fn trace_cmd_profiles_events_that_lack_the_fields_it_reads() {
    let (top, _) = tracers_report("top", &["--profile"]);
    let listed = |profile: &str, event: &str| {
        profile.lines().any(|l| l.trim_start().starts_with(&format!("Event: {event}")))
    };
    assert!(listed(&top, "irq_handler_entry_:0x30 ("), "{top}");
    // The function graph's calls, timed from entry to exit.
    let (graph, _) = tracers_report("graph", &["--profile"]);
    let timed = graph.lines().filter(|l| l.contains("Event: func: ") && l.contains(" Total: "));
    assert!(timed.count() >= 5, "{graph}");
}

/// trace-cmd names the function tracer's calls and callers from the kallsyms
/// `--elf` writes (with `-O parent`, as Linux's `function` tracer prints them).
#[test]
fn trace_cmd_names_the_function_tracers_calls_from_the_elf() {
    let symbols = boot::report::Symbols::read(Path::new(TRACERS_ELF)).unwrap();
    let (report, top) = tracers_report("top", &["-O", "parent"]);
    let calls = values_of(&top, "function");
    assert!(calls.len() >= 100, "a real function trace: {}", calls.len());
    let lines: Vec<&str> = report.lines().filter(|l| l.contains(" function: ")).collect();
    assert_eq!(lines.len(), calls.len(), "{report}");
    for (line, call) in lines.iter().zip(&calls) {
        let fields = line.split_once(" function: ").unwrap().1.trim();
        let (ip, parent) = fields.split_once(" <-- ").unwrap_or_else(|| panic!("{line}"));
        assert_eq!(Some(ip.to_string()), name_of(&symbols, call[0]), "{line}");
        assert_eq!(Some(parent.to_string()), name_of(&symbols, call[1]), "{line}");
    }
}

/// trace-cmd prints our `stacktrace` records as Linux's (`<stack trace >`, then
/// `=> name (address)` per frame), named from the kallsyms `--elf` writes.
#[test]
fn trace_cmd_prints_stack_traces_with_names_from_the_elf() {
    let symbols = boot::report::Symbols::read(Path::new(TRACERS_ELF)).unwrap();
    let (report, stk) = tracers_report("stk", &[]);
    let stacks = values_of(&stk, "kernel_stack");
    assert!(stacks.len() >= 4, "the trigger's stacks: {stacks:?}");
    let heads = report.lines().filter(|l| l.ends_with(" kernel_stack:         <stack trace >"));
    assert_eq!(heads.count(), stacks.len(), "{report}");
    let frames: Vec<&str> = report.lines().filter(|l| l.starts_with("=> ")).collect();
    let ours: Vec<u64> = stacks.iter().flat_map(|s| s[1..=s[0] as usize].to_vec()).collect();
    assert_eq!(frames.len(), ours.len(), "each stack's frames, to its depth:\n{report}");
    for (line, &ip) in frames.iter().zip(&ours) {
        let expected = match name_of(&symbols, ip) {
            Some(name) => format!("=> {name} ({ip:x})"),
            None => format!("=> {ip:x}"),
        };
        assert_eq!(*line, expected);
    }
}

/// A line's words, one space apart: trace-cmd's function display indents a call by
/// the depth it tracks per CPU, over every buffer of the file.
fn words(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Without `--instance`, trace.dat holds every instance, as `trace-cmd record -B`
/// saves them: the top level's live buffer as the file's own, every other buffer
/// (with `--buffer all` the snapshots too, `NAME:snapshot`) as a buffer instance.
/// trace-cmd prints each buffer's records after its name, merged in time, each
/// buffer's exactly as it prints that buffer converted alone.
#[test]
fn trace_cmd_reads_every_instance_and_snapshot_as_buffer_instances() {
    let convert = |args: &[&str]| -> String {
        let file = temp_path(&format!("tracers-{}.dat", args.join("-")));
        let path = file.to_str().unwrap();
        let common = ["report", "--elf", TRACERS_ELF, "--format", "tracedat", "-o", path];
        let out = boot(&[&common[..], args, &[TRACERS_LOG]].concat());
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        trace_cmd_report(&file, &[])
    };
    let log = std::fs::read_to_string(TRACERS_LOG).unwrap();
    let sections = trace::dump::parse(&log).pop().expect("the log holds a dump").sections();
    assert_eq!((sections[0].instance.as_str(), sections[0].buffer), ("top", BufferKind::Live));
    assert!(sections.iter().any(|s| s.buffer == BufferKind::Snapshot), "a snapshot to show");
    let names: Vec<String> = sections.iter().skip(1).map(boot::report::buffer_name).collect();
    // The whole file's lines by buffer (the top level's: none): a line that starts
    // with `NAME: ` is that buffer's, a stack trace's `=>` line its record's.
    let mut grouped: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current = String::new();
    for line in convert(&["--buffer", "all"]).lines().skip(1) {
        let line = line.trim_start();
        if !line.starts_with("=>") {
            let named = names.iter().find(|n| line.starts_with(&format!("{n}: ")));
            current = named.cloned().unwrap_or_default();
        }
        let rest = line.strip_prefix(&format!("{current}: ")).unwrap_or(line);
        grouped.entry(current.clone()).or_default().push(words(rest));
    }
    assert_eq!(grouped.len(), sections.len(), "{:?}", grouped.keys());
    for (i, section) in sections.iter().enumerate() {
        let buffer = match section.buffer {
            BufferKind::Live => "live",
            BufferKind::Snapshot => "snapshot",
        };
        let alone = convert(&["--instance", &section.instance, "--buffer", buffer]);
        let alone: Vec<String> = alone.lines().skip(1).map(words).collect();
        assert!(!alone.is_empty(), "{section:?}");
        let key = if i == 0 { String::new() } else { names[i - 1].clone() };
        assert_eq!(grouped[&key], alone, "buffer {key:?}");
    }
    // `--stat` shows every buffer's statistics, each after its name.
    let file = temp_path("tracers-stat.dat");
    let path = file.to_str().unwrap();
    let common = ["report", "--elf", TRACERS_ELF, "--format", "tracedat", "--buffer", "all"];
    assert!(boot(&[&common[..], &["-o", path, TRACERS_LOG]].concat()).status.success());
    let stat = trace_cmd_report(&file, &["--stat"]);
    for (name, section) in names.iter().zip(&sections[1..]) {
        let (_, after) = stat.split_once(&format!("\nBuffer: {name}\n")).expect(name);
        let first = section.stats.iter().find(|s| s.entries > 0).expect("a CPU with entries");
        assert!(after.contains(&format!("entries: {}\n", first.entries)), "{name}: {stat}");
    }
    // Without `--buffer`, the live buffers only.
    let live = convert(&[]);
    assert!(!live.contains(":snapshot: ") && live.contains("\n  graph: "), "{live}");
}

/// A code address an event prints with `:sym` (`ftrace:irqsoff`'s `start` and
/// `end`) is a `%pF` in its format file: trace-cmd names it from the kallsyms
/// `--elf` writes, as `report --elf` names it, and prints it in hex without them.
#[test]
fn trace_cmd_names_code_addresses_as_report_elf_does() {
    // Spaces as `_` (kallsyms' names have none), between the fields too.
    let fields = |report: &str| -> Vec<String> {
        let lines = report.lines().filter_map(|l| Some(l.split_once(" irqsoff: ")?.1.trim()));
        lines.map(kallsyms_name).collect()
    };
    let snapshot = ["--instance", "irq", "--buffer", "snapshot", TRACERS_LOG];
    let ours = boot(&[&["report", "--elf", TRACERS_ELF][..], &snapshot].concat());
    assert!(ours.status.success(), "{}", text(&ours.stderr));
    let ours = fields(&text(&ours.stdout));
    assert!(!ours.is_empty() && ours.iter().all(|f| f.contains("_start=kernel::")), "{ours:?}");
    for (elf, named) in [(&["--elf", TRACERS_ELF][..], true), (&[][..], false)] {
        let file = temp_path(&format!("irqsoff-{named}.dat"));
        let path = file.to_str().unwrap();
        let args = [&["report"][..], elf, &["--format", "tracedat", "-o", path], &snapshot];
        let out = boot(&args.concat());
        assert!(out.status.success(), "{}", text(&out.stderr));
        let theirs = fields(&trace_cmd_report(&file, &[]));
        if named {
            assert_eq!(theirs, ours);
        } else {
            assert_eq!(theirs.len(), ours.len());
            assert!(theirs.iter().all(|f| f.contains("_start=0x")), "{theirs:?}");
        }
    }
}

/// An event whose field names are not C names, or are the same C name, or a
/// common field's, and whose format has a NUL, control characters and non-ASCII
/// text.
static ODD: trace::event::EventDescriptor = trace::event::EventDescriptor::new(
    "odd",
    "e",
    "v={a b} w={a_b} p={common_pid} \0\u{1}\u{7f} λ 100%",
    &[
        trace::field::Field { name: "a b", kind: trace::field::FieldKind::U32 },
        trace::field::Field { name: "a_b", kind: trace::field::FieldKind::U32 },
        trace::field::Field { name: "common_pid", kind: trace::field::FieldKind::U32 },
    ],
    trace::event::DescriptorKind::Event,
);

/// A dump whose names and format libtraceevent would not parse as they are, and
/// whose times go back and forth and reach past 2^63 ns: trace-cmd reads it, each
/// field by a C name of its own, the format's odd characters as `\u{HEX}`, times from 2^62
/// ns clamped to it (as CTF's), each CPU's records in time order on few pages.
#[test]
fn trace_cmd_reads_odd_names_formats_and_times() {
    let mut log = String::new();
    let mut writer = log_writer(&mut log);
    writer.header(1, None, None);
    writer.descriptor_as(1, &ODD);
    writer.instance(0, "");
    // 2 000 records alternating between two times, then two past 2^63 ns.
    let times = (0..2_000u64).map(|i| 1_000 + 1_000 * (i % 2)).chain([u64::MAX - 1, 1 << 63]);
    for (i, ts) in times.enumerate() {
        let values = [i as u32, 1_000_000 + i as u32, 7];
        let payload: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        writer.record(0, &support::record(0, ts, &payload), Some(&ODD));
    }
    writer.finish();
    let log = support::temp("odd.log", log);
    let file = temp_path("odd.dat");
    let out = boot(&[
        "report",
        "--format",
        "tracedat",
        "-o",
        file.to_str().unwrap(),
        log.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(std::fs::metadata(&file).unwrap().len() < 64 * 1024, "a page per record");
    let report = trace_cmd_report(&file, &["-t"]);
    let lines: Vec<Line> = report.lines().filter_map(parse_line).collect();
    assert_eq!(lines.len(), 2_002, "{report}");
    assert!(lines.windows(2).all(|w| w[0].ts <= w[1].ts), "{report}");
    let first = &lines[0];
    assert_eq!(first.ts, 1_000);
    assert_eq!(first.fields, r"v=0 w=1000000 p=7 \u{0}\u{1}\u{7f} \u{3bb} 100%");
    let last = &lines[2_001];
    let fields = r"v=2001 w=1002001 p=7 \u{0}\u{1}\u{7f} \u{3bb} 100%";
    assert_eq!((last.ts, last.fields.as_str()), (1 << 62, fields));
}

/// `tests/kernelshark/load.c`, compiled once per test process against KernelShark's
/// library (boot/setup.sh installs a C compiler and libkshark): built under a name of
/// the process's own, then renamed over the shared one, so runs side by side neither
/// race nor leave copies behind.
fn kernelshark_loader() -> &'static Path {
    static LOADER: OnceLock<PathBuf> = OnceLock::new();
    LOADER.get_or_init(|| {
        let source = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kernelshark/load.c");
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let built = dir.join(format!("kernelshark-load-{}", std::process::id()));
        let out = Command::new("cc")
            .args(["-Wall", "-Wextra", "-o"])
            .arg(&built)
            .args([source, "-lkshark"])
            .output()
            .expect("cc runs (boot/setup.sh installs it)");
        assert!(out.status.success(), "the loader does not build: {}", text(&out.stderr));
        let binary = dir.join("kernelshark-load");
        std::fs::rename(&built, &binary).expect("the loader moves into place");
        binary
    })
}

/// One entry as KernelShark loads it: CPU, time (ns), `SYSTEM/EVENT`, task.
type Entry = (usize, u64, String, String);

/// The file `path` as KernelShark loads it: each buffer's name (the file's own
/// buffer's empty) and entries, in the file's order of buffers and KernelShark's
/// order of entries.
fn kernelshark_entries(path: &Path) -> Vec<(String, Vec<Entry>)> {
    let out = Command::new(kernelshark_loader()).arg(path).output().expect("the loader runs");
    assert!(out.status.success(), "KernelShark's library refused the file: {}", text(&out.stderr));
    let mut buffers: Vec<(String, Vec<Entry>, usize)> = Vec::new();
    for line in text(&out.stdout).lines() {
        match line.split('\t').collect::<Vec<_>>()[..] {
            ["buffer", name, count] => {
                buffers.push((name.into(), Vec::new(), count.parse().unwrap()))
            }
            [cpu, ts, event, task, _info] => {
                let (_, entries, _) = buffers.last_mut().expect("a buffer's line first");
                entries.push((
                    cpu.parse().unwrap(),
                    ts.parse().unwrap(),
                    event.into(),
                    task.into(),
                ));
            }
            _ => panic!("not a loader line: {line:?}"),
        }
    }
    buffers
        .into_iter()
        .map(|(name, entries, count)| {
            assert_eq!(entries.len(), count, "buffer {name:?}: the entries it announced");
            (name, entries)
        })
        .collect()
}

/// KernelShark opens what `--format tracedat` writes: its library (libkshark, what
/// KernelShark loads a file with; its plugins aside) reads the file's own buffer
/// and, as KernelShark's streams, every buffer instance, and each holds every event
/// of its section, in time order, with its CPU, time in ns, event and task: `shell`
/// for CPU 0's thread, `work/N` for CPU N's, `<idle>` for the rest (pid 0, as
/// trace-cmd shows it). On a real panic's log, and on one with the function tracers,
/// the stack tracer and a snapshot.
#[test]
fn kernelshark_loads_every_buffer_with_every_event_of_its_section() {
    let logs = [
        (PANIC_LOG, None, &["", "latency"][..]),
        (TRACERS_LOG, Some(TRACERS_ELF), &["", "latency", "graph", "irq", "irq:snapshot", "stk"]),
    ];
    for (log, elf, buffers) in logs {
        let file = temp_path("kernelshark.dat");
        let path = file.to_str().unwrap();
        let mut args = vec!["report", "--format", "tracedat", "--buffer", "all", "-o", path];
        args.extend(elf.map(|elf| ["--elf", elf]).iter().flatten());
        args.push(log);
        let out = boot(&args);
        assert!(out.status.success(), "{log}: {}", text(&out.stderr));
        let loaded = kernelshark_entries(&file);
        let names: Vec<&str> = loaded.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, buffers, "{log}");
        let text_log = std::fs::read_to_string(log).unwrap();
        let sections = trace::dump::parse(&text_log).pop().expect("a dump").sections();
        assert_eq!(sections.len(), loaded.len(), "{log}");
        let mut tasks = std::collections::BTreeSet::new();
        for (section, (name, entries)) in sections.iter().zip(&loaded) {
            assert!(!entries.is_empty(), "{log}: buffer {name:?} is empty");
            assert!(entries.is_sorted_by_key(|e| e.1), "{log}: buffer {name:?} in time order");
            let mut expected: Vec<Entry> = section
                .events
                .iter()
                .map(|e| {
                    let task = match (e.context.activity(), e.cpu) {
                        (trace::Activity::Task, 0) => "shell".into(),
                        (trace::Activity::Task, cpu) => format!("work/{cpu}"),
                        _ => "<idle>".into(),
                    };
                    let d = section.descriptor(e.id).expect("a real dump's events are described");
                    (e.cpu, e.ts, format!("{}/{}", d.system, written_name(d)), task)
                })
                .collect();
            let mut got = entries.clone();
            // Among equal times KernelShark's order may differ from the dump's.
            expected.sort();
            got.sort();
            assert_eq!(got, expected, "{log}: buffer {name:?}");
            tasks.extend(got.into_iter().map(|(_, _, _, task)| task));
        }
        if elf.is_some() {
            assert!(tasks.contains("shell"), "{log}: a task of its own: {tasks:?}");
        }
    }
}
