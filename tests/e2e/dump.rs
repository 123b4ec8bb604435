//! The panic-time dump and the host tool that reads it.

use boot::qemu::Outcome;
use boot::report;
use e2e::Machine;
use std::process::Command;

/// Boots, records five markers, panics with `panic_command`; returns the machine.
fn panicked(panic_command: &str) -> Machine {
    let mut m = Machine::boot();
    for i in 1..=5 {
        m.run(&format!("echo marker-{i} > trace_marker"));
    }
    assert_eq!(m.run_to_exit(panic_command), Outcome::KernelFailure, "{panic_command}");
    m
}

/// The frames of the panic's call trace in a transcript, the first ones checked to
/// be named with the kernel's symbols (the last may be an address: past an exception
/// on an overflowed stack, the walk can read a word that is not a return address).
fn named_call_trace(transcript: &str) -> Vec<&str> {
    let frames = e2e::call_trace(transcript);
    assert!(frames.len() >= 3, "a call trace:\n{transcript}");
    let named = frames.iter().take_while(|f| f.contains("+0x") && !f.starts_with("0x")).count();
    assert!(named >= 3 && named + 1 >= frames.len(), "{frames:#?}");
    frames
}

/// The one dump of a transcript, checked to be intact.
fn one_dump(m: &Machine) -> trace::dump::Dump {
    let mut dumps = m.dumps();
    assert_eq!(dumps.len(), 1, "one dump expected");
    let dump = dumps.remove(0);
    assert!(dump.problems.is_empty(), "{:?}", dump.problems);
    dump
}

fn top(dump: &trace::dump::Dump) -> trace::dump::Section {
    dump.sections().into_iter().find(|t| t.instance == "top").expect("the top-level instance")
}

#[test]
fn a_panic_dump_holds_the_last_events_in_order_and_agrees_with_its_stats() {
    let m = panicked("panic");
    let dump = one_dump(&m);
    let panic = dump.panic.as_ref().expect("a panic report");
    assert_eq!(panic.cpu, 0);
    assert_eq!(panic.message, "deliberate panic from the shell");
    assert!(panic.location.starts_with("kernel/src/shell/commands.rs:"), "{}", panic.location);
    assert_eq!(dump.cpus, Some(4));
    let trace = top(&dump);
    let texts = trace.texts();
    let markers: Vec<String> = trace
        .events
        .iter()
        .filter(|e| trace.event_name(e.id) == "ftrace:print")
        .map(|e| texts.text(e))
        .collect();
    assert_eq!(markers, ["marker-1", "marker-2", "marker-3", "marker-4", "marker-5"]);
    // The last event of the boot CPU before the panic: the panic command itself.
    let last = trace
        .events
        .iter()
        .rev()
        .find(|e| e.cpu == 0 && trace.event_name(e.id) == "shell:command")
        .unwrap();
    assert_eq!(texts.text(last), "panic");
    assert!(trace.events.windows(2).all(|w| w[0].ts <= w[1].ts), "merged in time order");
    // Counts agree with the stats in the dump.
    for cpu in 0..4 {
        let events = trace.events.iter().filter(|e| e.cpu == cpu).count() as u64;
        assert_eq!(events, trace.stats[cpu].entries, "cpu{cpu}");
        let s = trace.stats[cpu];
        assert_eq!(s.written, s.entries + s.read + s.overrun + s.dropped, "cpu{cpu}: {s:?}");
    }
    // The human-readable part carries the same events.
    let transcript = m.transcript();
    assert!(transcript.contains("# panic on cpu 0 at kernel/src/shell/commands.rs:"));
    assert!(transcript.lines().any(|l| l.ends_with("tracing_mark_write: marker-5")));
    // The call trace names the command that panicked, and where the shell called it.
    let frames = named_call_trace(&transcript);
    assert!(
        frames.iter().any(|f| f.starts_with("kernel::shell::commands::panic+0x")),
        "{frames:#?}"
    );
    assert!(frames.iter().any(|f| f.starts_with("kernel::shell::")), "{frames:#?}");
    // The text report.
    let mut text = Vec::new();
    report::write_text(&trace, &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(
        text.contains("# panic on cpu 0") && text.contains("tracing_mark_write: marker-3"),
        "{text}"
    );
    let mut stat = Vec::new();
    report::write_stat(&trace, &mut stat).unwrap();
    assert!(String::from_utf8(stat).unwrap().contains("ftrace:print"));
}

#[test]
fn panics_in_an_interrupt_holding_the_console_nested_and_on_stack_overflow_dump() {
    // The handler each call trace goes through (none for the nested panic, whose
    // report is plain).
    for (command, message, through) in [
        ("panic irq", "deliberate panic in the timer interrupt", Some("kernel::arch::idt::timer+")),
        ("panic console", "deliberate panic while holding the console lock", None),
        // The dump allocates nothing, so the heap's lock held does not stop it.
        ("panic heap", "deliberate panic while holding the heap lock", None),
        ("panic nested", "[formatting the message panicked]", None),
        (
            "fault stack",
            "EXCEPTION: DOUBLE FAULT (vector 8)",
            Some("kernel::arch::idt::double_fault+"),
        ),
    ] {
        let m = panicked(command);
        if let Some(handler) = through {
            let transcript = m.transcript();
            let frames = named_call_trace(&transcript);
            assert!(frames.iter().any(|f| f.starts_with(handler)), "{command}: {frames:#?}");
        }
        let dump = one_dump(&m);
        let panic = dump.panic.as_ref().unwrap_or_else(|| panic!("{command}: no panic report"));
        assert!(panic.message.contains(message), "{command}: {}", panic.message);
        let trace = top(&dump);
        let texts = trace.texts();
        let markers = trace.events.iter().filter(|e| texts.text(e).starts_with("marker-")).count();
        assert_eq!(markers, 5, "{command}: the markers are in the dump");
    }
}

/// A panic holding the heap's lock dumps the instances `dump on-panic` names: the
/// setting is read where it is kept (a copy of its names would allocate).
#[test]
fn a_panic_holding_the_heap_lock_dumps_the_instances_named_for_it() {
    let mut m = Machine::boot();
    assert_eq!(m.run("mkdir instances/kept"), "");
    m.run("echo named > instances/kept/trace_marker");
    m.run("echo top > trace_marker");
    assert!(m.run("dump on-panic live instance kept").contains("instances kept"));
    assert_eq!(m.run_to_exit("panic heap"), Outcome::KernelFailure);
    let dump = one_dump(&m);
    let panic = dump.panic.as_ref().expect("a panic report");
    assert!(panic.message.contains("while holding the heap lock"), "{}", panic.message);
    let sections = dump.sections();
    let names: Vec<&str> = sections.iter().map(|s| s.instance.as_str()).collect();
    assert_eq!(names, ["kept"], "the named instance alone");
    assert!(sections[0].events.iter().any(|e| sections[0].texts().text(e) == "named"));
}

/// A CPU that panics while another's panic is under way is stopped, and its panic is
/// reported with the CPUs the first one stopped.
#[test]
fn a_panic_on_another_cpu_during_a_panic_is_reported_too() {
    let mut m = Machine::boot();
    assert_eq!(m.run_to_exit("panic both 2"), Outcome::KernelFailure);
    let transcript = m.transcript();
    let first = "KERNEL PANIC on cpu 0: ";
    assert!(transcript.lines().any(|l| l.starts_with(first)), "{transcript}");
    let line = transcript.lines().find_map(|l| l.strip_prefix("panic on cpu 2 too, at "));
    let line = line.unwrap_or_else(|| panic!("{transcript}"));
    let message = ": deliberate panic on cpu 2, in an NMI, during another's panic";
    assert!(line.starts_with("kernel/src/smp.rs:") && line.ends_with(message), "{line}");
    // It was in an NMI, which the stop's could not interrupt: the others stopped.
    assert!(transcript.contains("panic: stopped 2 of 3 other CPU(s)"), "{transcript}");
    // The dump carries it beside the first: the kernel's text of the dump, then the
    // host tool's reading of the block, in text and in Perfetto's panic marker.
    let other_line = format!("# panic on cpu 2 too, at {line}");
    let kernel = transcript.lines().skip_while(|l| !l.starts_with("# panic on cpu 0 at "));
    assert_eq!(kernel.clone().nth(1), Some(other_line.as_str()), "{transcript}");
    let dump = one_dump(&m);
    assert_eq!(dump.panic.as_ref().map(|p| p.cpu), Some(0));
    let mut text = Vec::new();
    report::write_text(&top(&dump), &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.lines().any(|l| l == other_line), "{text}");
    let json = report::perfetto_json(&top(&dump));
    let marker = json["traceEvents"].as_array().and_then(|events| {
        events.iter().find(|e| e["name"] == "panic" && e["args"]["other_cpu"] == 2)
    });
    let other = marker.map(|m| m["args"]["other_message"].clone());
    assert_eq!(other, Some(serde_json::json!(message.trim_start_matches(": "))), "{json}");
}

/// Where in `kernel/src/shell/commands.rs` the line holding `code` calls `panic!`, as
/// a panic's location reads (`file:line:column`).
fn panic_location(code: &str) -> String {
    let source = include_str!("../../kernel/src/shell/commands.rs");
    let (number, line) = source.lines().enumerate().find(|(_, l)| l.contains(code)).unwrap();
    let column = line.find("panic!").expect("a panic! on the line") + 1;
    format!("kernel/src/shell/commands.rs:{}:{column}", number + 1)
}

#[test]
fn a_nested_panic_keeps_the_first_panics_place_and_is_reported_as_nested() {
    // `panic nested` panics with a message whose formatting panics in turn.
    let first = panic_location(r#"["nested"] => panic!("#);
    let nested = panic_location(r#"panic!("formatting the panic message panicked")"#);
    let m = panicked("panic nested");
    let dump = one_dump(&m);
    let panic = dump.panic.as_ref().expect("a panic report");
    assert_eq!((panic.cpu, panic.location.as_str()), (0, first.as_str()), "{panic:?}");
    // The first message could not be formatted: the report says so, and does not
    // pass the nested panic's message off as it.
    assert_eq!(panic.message, "[formatting the message panicked]", "{panic:?}");
    let nested_line = format!(
        "# nested panic while reporting it, at {nested}: formatting the panic message panicked"
    );
    // The kernel's text, then the host tool's reading of the block.
    let transcript = m.transcript();
    let kernel = transcript.split_once(&format!("# panic on cpu 0 at {first}: ")).map(|(_, t)| t);
    let kernel = kernel.unwrap_or_else(|| panic!("{transcript}"));
    assert!(kernel.lines().nth(1) == Some(nested_line.as_str()), "{transcript}");
    let (mut text, mut stat) = (Vec::new(), Vec::new());
    report::write_text(&top(&dump), &mut text).unwrap();
    report::write_stat(&top(&dump), &mut stat).unwrap();
    for text in [text, stat] {
        let text = String::from_utf8(text).unwrap();
        let panic_line = format!("# panic on cpu 0 at {first}: [formatting the message panicked]");
        assert!(text.contains(&format!("{panic_line}\n{nested_line}\n")), "{text}");
    }
}

/// A panic whose dump panics part way (`panic dump N`: once its block holds N chunk
/// lines) gives up plainly, and QEMU still exits with the failure code. The host
/// tool reads the block up to the cut: the panic, the cut named, and events the
/// kernel recorded, as a live dump of the same buffer just before shows them.
#[test]
fn a_dump_cut_short_by_a_panic_reads_up_to_the_cut() {
    let mut m = Machine::boot();
    // Enough records for several chunks: every CPU's timer ticks, for a while.
    m.run("echo 1 > events/timer/tick/enable");
    let entries = |m: &mut Machine| -> u64 {
        let stats = m.run("cat per_cpu/cpu0/stats");
        let line = stats.lines().find_map(|l| l.strip_prefix("entries: "));
        line.and_then(|n| n.trim().parse().ok()).unwrap_or(0)
    };
    while entries(&mut m) < 100 {}
    m.run("echo 0 > events/timer/tick/enable");
    // The live dump and the panic's: the top level's live buffer alone.
    m.run("dump on-panic live instance top");
    m.run("dump live instance top");
    let transcript = m.transcript();
    let (_, block) = transcript.rsplit_once(trace::dump::BEGIN).expect("the live dump");
    let live = m.dumps().pop().expect("the live dump");
    assert!(live.problems.is_empty(), "{:?}", live.problems);
    let live = top(&live);
    // Cut the panic's dump after the middle one of the chunks that hold records.
    let records: Vec<u64> = block
        .lines()
        .take_while(|l| !l.starts_with(trace::dump::END))
        .filter_map(|l| trace::dump::decode_chunk(l).ok())
        .filter(|(_, bytes)| holds_records(bytes))
        .map(|(seq, _)| seq)
        .collect();
    assert!(records.len() >= 3, "chunks of records: {records:?}");
    let chunks = records[records.len() / 2] + 1;
    assert_eq!(m.run_to_exit(&format!("panic dump {chunks}")), Outcome::KernelFailure);
    let transcript = m.transcript();
    let (_, cut_block) = transcript.rsplit_once(trace::dump::BEGIN).expect("the panic's block");
    assert!(
        cut_block.contains("panic while saving or dumping the trace; giving up"),
        "{cut_block}"
    );
    let cut = m.dumps().pop().expect("the cut dump");
    let panic = cut.panic.as_ref().expect("the panic, from the first chunk");
    assert_eq!(panic.message, "deliberate panic whose dump panics");
    assert_eq!(cut.chunks, chunks);
    let named: Vec<&str> = cut.problems.iter().map(|p| p.what.as_str()).collect();
    let truncated = format!("dump truncated: no end marker after chunk {}", chunks - 1);
    assert_eq!(named, [truncated.as_str()]);
    // What it decodes: some of the records, each one the live dump showed or one
    // written since.
    let trace = top(&cut);
    let n = trace.events.len();
    assert!(n > 0 && n < live.events.len(), "{n} of {} records", live.events.len());
    let newest = live.events.iter().map(|e| e.ts).max();
    let (texts, live_texts) = (trace.texts(), live.texts());
    for e in &trace.events {
        let text = texts.text(e);
        let shown = live
            .events
            .iter()
            .any(|l| (l.cpu, l.ts, l.id, live_texts.text(l)) == (e.cpu, e.ts, e.id, text.clone()));
        assert!(shown || newest.is_some_and(|t| e.ts > t), "not a recorded event: {e:?}");
    }
    let mut text = Vec::new();
    report::write_text(&trace, &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    let panic_line = "# panic on cpu 0 at kernel/src/shell/commands.rs:";
    assert!(text.lines().any(|l| l.starts_with(panic_line)), "{text}");
}

/// Whether a dump chunk holds an item of records (kind 5 or 7; each item is a kind
/// byte, a LEB128 length and its body, `trace::dump`'s format).
fn holds_records(chunk: &[u8]) -> bool {
    let mut at = 0;
    while let Some(&kind) = chunk.get(at) {
        if kind == 5 || kind == 7 {
            return true;
        }
        let (mut len, mut shift) = (0usize, 0);
        at += 1;
        while let Some(&byte) = chunk.get(at) {
            at += 1;
            len |= usize::from(byte & 0x7f) << shift;
            shift += 7;
            if byte & 0x80 == 0 {
                break;
            }
        }
        at += len;
    }
    false
}

#[test]
fn a_stack_overflows_call_trace_goes_on_into_the_overflowed_stack() {
    let m = panicked("fault stack");
    let transcript = m.transcript();
    let interrupted = e2e::overflow_frames(&transcript);
    // The faulting CPU's chain in the dump: the same frames.
    let dump = one_dump(&m);
    let symbols = report::Symbols::read(std::path::Path::new(boot::KERNEL_ELF)).unwrap();
    let mut top = top(&dump);
    symbols.symbolize(&mut top);
    let stack = top
        .events
        .iter()
        .rfind(|e| e.cpu == 0 && top.descriptor(e.id).is_some_and(|d| d.name == "kernel_stack"));
    let stack = stack.unwrap_or_else(|| panic!("the faulting CPU's stack"));
    let text = top.texts().text(stack);
    let recorded: Vec<&str> = text.lines().skip(1).map(|l| &l[4..]).collect();
    assert_eq!(recorded[..], interrupted[..8], "{stack:?}");
}

#[test]
fn a_corrupted_chunk_is_named_and_the_rest_is_still_reported() {
    let m = panicked("panic");
    let transcript = m.transcript();
    let intact = one_dump(&m);
    let mut lines: Vec<String> = transcript.lines().map(String::from).collect();
    // A chunk in the middle: records (the descriptors come first and last).
    let chunks = lines.iter().filter(|l| l.starts_with("TD ")).count() as u64;
    let middle = chunks / 2;
    let target = lines
        .iter()
        .position(|l| l.starts_with(&format!("TD {middle} ")))
        .expect("the middle chunk");
    lines[target] = lines[target].replacen('A', "B", 1).replacen('Q', "R", 1);
    let damaged = &trace::dump::parse(&lines.join("\n"))[0];
    assert_eq!(damaged.problems.len(), 1, "{:?}", damaged.problems);
    assert_eq!(damaged.problems[0].chunk, Some(middle));
    assert_eq!(damaged.problems[0].line, target + 1, "the problem names the line");
    assert!(damaged.problems[0].what.contains(&format!("chunk {middle}: checksum mismatch")));
    // Every instance's events: the chunk may hold any instance's.
    let events = |dump: &trace::dump::Dump| {
        dump.sections().into_iter().flat_map(|t| t.events).collect::<Vec<_>>()
    };
    let (before, after) = (events(&intact), events(damaged));
    assert!(
        after.len() < before.len() && after.len() > before.len() / 2,
        "intact {}, after damage {}",
        before.len(),
        after.len()
    );
    assert!(after.iter().all(|e| before.contains(e)), "what is reported is intact");
}

#[test]
fn the_live_dump_command_takes_options() {
    let mut m = Machine::boot();
    for i in 1..=3 {
        m.run(&format!("echo live-{i} > trace_marker"));
    }
    // The text and the block show one moment: writes are held off while the dump
    // prints, though every CPU's timer ticks are recorded meanwhile.
    let text = m.run("dump");
    let (text, _) = text.split_once(trace::dump::BEGIN).expect("a dump block");
    let top_text = text.split("\n# instance ").nth(1).expect("the top level's text");
    let counted = |word: &str| -> Vec<u64> {
        let numbers = top_text.lines().filter_map(|l| l.strip_prefix("# cpu")?.split_once(": "));
        let values = numbers.filter_map(|(_, rest)| rest.split(word).nth(1)?.split(' ').nth(1));
        values.map(|v| v.parse().unwrap()).collect()
    };
    // After its heading's line (`top`), the CPUs' counts and the records.
    let records = top_text.lines().skip(1).filter(|l| !l.starts_with('#') && !l.is_empty());
    let records = records.count();
    m.run("dump orig_cpu last 4 instance top");
    assert!(
        m.run("dump sideways").contains(
            "dump: unknown option \"sideways\" (accepted: all or orig_cpu; live, snapshot or both; last N; instance NAME)"
        )
    );
    for last in ["0", "-1", "x"] {
        let out = m.run(&format!("dump last {last}"));
        assert!(out.contains("dump: last takes N, 1 or more, or all"), "{last}: {out}");
    }
    assert!(m.run("dump last").contains("usage"));
    // Two words of one choice that differ are refused, for a panic too, which then
    // keeps its setting; the same word twice is the word.
    let setting = m.run("dump on-panic");
    let out = m.run("dump live snapshot");
    assert!(out.contains("dump: \"live\" and \"snapshot\": choose one of live, snapshot or both"));
    let out = m.run("dump on-panic all orig_cpu");
    assert!(out.contains("dump: \"all\" and \"orig_cpu\": choose one of all or orig_cpu"), "{out}");
    assert_eq!(m.run("dump on-panic"), setting);
    assert!(m.run("dump on-panic snapshot snapshot").contains("buffers snapshot"));
    m.run("dump on-panic both");
    // An instance that does not exist is refused, live or for a panic, and the
    // panic setting stays as it was.
    let setting = m.run("dump on-panic");
    for command in ["dump instance nosuch", "dump on-panic instance nosuch"] {
        let out = m.run(command);
        assert!(
            out.contains("no instance \"nosuch\" (top, or a directory of instances/)"),
            "{out}"
        );
    }
    assert_eq!(m.run("dump on-panic"), setting);
    // Two instances named: their sections only.
    m.run("dump instance top instance latency both");
    let dumps = m.dumps();
    assert_eq!(dumps.len(), 3);
    let two: Vec<String> = dumps[2].sections().into_iter().map(|s| s.instance).collect();
    assert!(two.iter().all(|i| i == "top" || i == "latency"), "{two:?}");
    assert!(two.contains(&"top".into()) && two.contains(&"latency".into()), "{two:?}");
    assert!(dumps.iter().all(|d| d.problems.is_empty() && d.panic.is_none()));
    let full = dumps[0].sections();
    assert!(full.iter().any(|t| t.instance == "latency"), "every instance by default");
    let block = top(&dumps[0]);
    assert_eq!(counted("written"), block.stats.iter().map(|s| s.written).collect::<Vec<_>>());
    assert_eq!(counted("entries"), block.stats.iter().map(|s| s.entries).collect::<Vec<_>>());
    assert_eq!(records, block.events.len(), "the text's records are the block's");
    assert!(block.events.iter().any(|e| block.texts().text(e) == "live-3"));
    let small = dumps[1].sections();
    assert_eq!(small.len(), 1, "only the top-level instance");
    assert_eq!(small[0].events.len(), 4, "the last 4 records");
    assert!(small[0].events.iter().all(|e| e.cpu == 0), "only the dumping CPU");
    assert!(dumps[1].instances.values().next().unwrap().skipped > 0);
    // `all`, `last all` and `both` set back what orig_cpu and last 10 change.
    m.run("dump on-panic orig_cpu last 10");
    assert_eq!(
        m.run("dump on-panic all last all both"),
        "on panic: cpus all, last all records, instances all, buffers both\n"
    );
    assert!(
        m.run("dump on-panic orig_cpu last 10")
            .contains("on panic: cpus orig_cpu, last 10 records")
    );
    assert_eq!(m.run_to_exit("panic"), Outcome::KernelFailure);
    let panic_dump = m.dumps().pop().unwrap();
    let trace = top(&panic_dump);
    assert_eq!(trace.events.len(), 10);
    assert!(trace.events.iter().all(|e| e.cpu == 0));
}

#[test]
fn babeltrace2_reads_the_ctf_output_and_perfetto_json_parses() {
    let m = panicked("panic");
    let trace = top(&one_dump(&m));
    let dir = std::env::temp_dir().join(format!("e2e-ctf-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    report::write_ctf(&trace, &dir).expect("CTF written");
    let out = Command::new("babeltrace2")
        .arg(&dir)
        .output()
        .expect("babeltrace2 runs (boot/setup.sh installs it)");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let events: Vec<&str> = stdout.lines().filter(|l| l.contains(": {")).collect();
    assert_eq!(events.len(), trace.events.len(), "babeltrace2 sees every event");
    let marker = events.iter().find(|l| l.contains("ftrace:print")).expect("a marker event");
    assert!(marker.contains("buf = \"marker-1\""), "{marker}");
    let _ = std::fs::remove_dir_all(&dir);
    let json = report::perfetto_json(&trace);
    let events = json["traceEvents"].as_array().unwrap();
    assert!(events.iter().any(|e| e["name"] == "ftrace:print" && e["args"]["buf"] == "marker-2"));
}

/// Boots, sets the latency watchdog's threshold, spikes the boot CPU's tick by
/// 300 ms and waits until the watchdog has frozen its window in its snapshot.
fn captured() -> Machine {
    let mut m = Machine::boot();
    // A threshold well above scheduling noise on a busy host, and a spike above it.
    m.watch_latency(200);
    m.run("latency spike 300");
    // The window records serial and shell events: the wait types nothing while it
    // lasts, so no keystroke of the test's can push the anomaly out of the ring.
    let status = m.run("latency wait 10000");
    assert!(status.contains("state: Captured"), "the watchdog never captured:\n{status}");
    m
}

/// The report of one section as `report` prints it.
fn text_of(trace: &trace::dump::Section) -> String {
    let mut text = Vec::new();
    report::write_text(trace, &mut text).unwrap();
    String::from_utf8(text).unwrap()
}

/// The interval the watchdog's anomaly line gives, in ns (`... interval=Nns ...`).
fn anomaly_interval(line: &str) -> u64 {
    line.split("interval=").nth(1).unwrap().split("ns").next().unwrap().parse().unwrap()
}

#[test]
fn the_crash_day_a_panic_dump_keeps_the_watchdogs_snapshot_and_report_shows_it() {
    let mut m = captured();
    assert!(m.run("dump on-panic").contains("buffers both"), "both buffers by default");
    // The live dump of the snapshot alone.
    m.run("dump instance latency snapshot");
    assert_eq!(m.run_to_exit("panic"), Outcome::KernelFailure);
    let dumps = m.dumps();
    assert_eq!(dumps.len(), 2);
    assert!(dumps.iter().all(|d| d.problems.is_empty()), "{:?}", dumps[1].problems);
    let live_dump = dumps[0].sections();
    assert_eq!(
        live_dump.iter().map(|t| (t.instance.as_str(), t.buffer)).collect::<Vec<_>>(),
        [("latency", trace::dump::BufferKind::Snapshot)]
    );
    // The panic dump: every instance's live buffer and the latency snapshot beside.
    let sections = dumps[1].sections();
    let snapshot = sections
        .iter()
        .find(|t| t.instance == "latency" && t.buffer == trace::dump::BufferKind::Snapshot)
        .expect("the panic dump carries the latency instance's snapshot");
    assert!(
        sections
            .iter()
            .any(|t| t.instance == "latency" && t.buffer == trace::dump::BufferKind::Live)
    );
    assert_eq!(snapshot.events, live_dump[0].events, "the snapshot is frozen");
    // The snapshot's own statistics agree with its records.
    for cpu in 0..4 {
        let events = snapshot.events.iter().filter(|e| e.cpu == cpu).count() as u64;
        assert_eq!(events, snapshot.stats[cpu].entries, "cpu{cpu}");
    }
    // What the report prints: a section headed as the snapshot, the anomaly in it,
    // the flight recorder's ticks before it, the printk and the window after it.
    let text = text_of(snapshot);
    assert!(text.starts_with("# instance: latency (snapshot)\n"), "{text}");
    assert!(text.contains("# panic on cpu 0"), "{text}");
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    let anomaly = lines
        .iter()
        .position(|l| l.contains(": anomaly: tick="))
        .unwrap_or_else(|| panic!("the anomaly is in the snapshot's report:\n{text}"));
    assert!(anomaly_interval(lines[anomaly]) >= 300_000_000, "{}", lines[anomaly]);
    assert!(lines[..anomaly].iter().any(|l| l.contains(": tick: ")), "ticks before it:\n{text}");
    assert!(
        lines[anomaly..].iter().any(|l| l.contains(": bprint: ") && l.contains("ns late")),
        "the watchdog's printk after it:\n{text}"
    );
    assert!(
        lines[anomaly..].iter().any(|l| l.contains(": command: ")),
        "the window's shell commands after it:\n{text}"
    );
    // The live buffer's section says the snapshot was taken; it is not the window.
    let live = sections
        .iter()
        .find(|t| t.instance == "latency" && t.buffer == trace::dump::BufferKind::Live)
        .unwrap();
    let live_text = text_of(live);
    assert!(live_text.starts_with("# instance: latency\n"), "{live_text}");
    assert!(live_text.contains("latency watchdog: snapshot taken"), "{live_text}");
    assert!(!live_text.contains(": anomaly: "), "{live_text}");
    // The human-readable part of the dump heads the snapshot too.
    assert!(m.transcript().contains("# instance latency (snapshot)\n"));
    // `--stat` heads it the same way.
    let mut stat = Vec::new();
    report::write_stat(snapshot, &mut stat).unwrap();
    let stat = String::from_utf8(stat).unwrap();
    assert!(stat.starts_with("# instance: latency (snapshot)\n"), "{stat}");
    assert!(stat.contains("latency:anomaly"), "{stat}");
    // Perfetto shows both buffers apart; the anomaly is in the snapshot's process.
    let latency: Vec<trace::dump::Section> =
        sections.iter().filter(|t| t.instance == "latency").cloned().collect();
    let json = report::perfetto_json_of(&latency);
    let events = json["traceEvents"].as_array().unwrap();
    let snapshot_pid = events
        .iter()
        .find(|e| e["name"] == "process_name" && e["args"]["name"] == "kernel (snapshot)")
        .map(|e| e["pid"].clone())
        .expect("a process for the snapshot");
    assert!(events.iter().any(|e| e["name"] == "latency:anomaly" && e["pid"] == snapshot_pid));
    // babeltrace2 reads the snapshot's CTF, anomaly included.
    let dir = std::env::temp_dir().join(format!("e2e-snapshot-ctf-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    report::write_ctf(snapshot, &dir).expect("CTF written");
    let out = Command::new("babeltrace2").arg(&dir).output().expect("babeltrace2 runs");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().filter(|l| l.contains(": {")).count(), snapshot.events.len());
    assert!(stdout.contains("latency:anomaly"), "{stdout}");
}

#[test]
fn dump_on_panic_live_leaves_the_snapshots_out_and_a_bad_value_changes_nothing() {
    let mut m = captured();
    assert!(m.run("dump on-panic live").contains("buffers live"));
    let refused = m.run("dump on-panic spare");
    assert!(
        refused.contains("dump: unknown option \"spare\" (accepted: all or orig_cpu; live, snapshot or both; last N; instance NAME)"),
        "{refused}"
    );
    assert!(m.run("dump on-panic").contains("buffers live"), "the refusal changed nothing");
    assert_eq!(m.run_to_exit("panic"), Outcome::KernelFailure);
    let dump = m.dumps().pop().unwrap();
    assert!(dump.problems.is_empty(), "{:?}", dump.problems);
    assert!(dump.instances.values().all(|s| s.buffer == trace::dump::BufferKind::Live));
    assert!(dump.instances.values().any(|s| s.name == "latency"), "its live buffer is there");
    assert!(!m.transcript().contains("(snapshot)"));
}

/// The boot CPU hangs in the middle of a trace write (its record reserved, never
/// filled), and panics when the lockup detector's NMI finds it there. The panic
/// seals the CPU's rings: what it recorded after the write began (the NMI, where it
/// was stuck, the stop IPI) is in the dump, and the write is left out, and said so.
#[test]
fn a_panic_on_a_cpu_stopped_in_the_middle_of_a_write_still_dumps_what_it_recorded_after() {
    let mut m = Machine::boot();
    // Half a second: a host that stalls another vCPU for 100 ms makes no false one.
    m.run("lockup threshold 500");
    assert_eq!(m.run_to_exit("lockup spin writing"), Outcome::KernelFailure);
    let transcript = m.transcript();
    let top_text = transcript.split("# instance top\n").nth(1).unwrap_or_default();
    let top_text = top_text.split("# instance ").next().unwrap_or_default();
    assert!(
        top_text.contains("# cpu0: 1 write the panic stopped before it finished is left out\n"),
        "{}",
        &top_text[..top_text.len().min(600)]
    );
    assert!(!top_text.contains("a write in progress"), "nothing is held back");
    let dump = m.dumps().into_iter().rfind(|d| d.panic.is_some()).expect("the panic dump");
    assert!(dump.problems.is_empty(), "{:?}", dump.problems);
    assert_eq!(dump.panic.as_ref().unwrap().cpu, 0);
    let symbols = report::Symbols::read(std::path::Path::new(boot::KERNEL_ELF)).unwrap();
    let mut top = top(&dump);
    symbols.symbolize(&mut top);
    let name = |e: &trace::dump::Event| top.descriptor(e.id).map_or("", |d| d.name.as_str());
    let cpu0: Vec<&str> = top.events.iter().filter(|e| e.cpu == 0).map(name).collect();
    // The NMI that found it, then where it was stuck, then the IPI that stopped the
    // others: each recorded after the stopped write began.
    let tail = &cpu0[cpu0.len().saturating_sub(3)..];
    assert_eq!(tail, ["nmi", "kernel_stack", "ipi_send"], "cpu0's last events");
    let stack = top.events.iter().rfind(|e| e.cpu == 0 && name(e) == "kernel_stack");
    let stack = stack.map(|e| top.texts().text(e)).unwrap_or_default();
    assert!(stack.contains("kernel::lockup::spin+"), "{stack}");
    assert!(!cpu0.contains(&"hard_lockup"), "the stopped write's record stays out");
    // The host tool says what the kernel's text says.
    let mut text = Vec::new();
    report::write_text(&top, &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("# cpu0: 1 write the panic stopped before it finished is left out\n"));
    for (cpu, s) in top.stats.iter().enumerate() {
        assert_eq!(s.written, s.entries + s.read + s.overrun + s.dropped, "cpu{cpu}: {s:?}");
    }
}

/// The boot CPU panics while every other CPU writes at full speed (`stress ...
/// panic`): the panic's NMI stops them wherever they are, now and then in the middle
/// of a write. Every stopped CPU's stack is in the dump, no CPU's records are held
/// back, no record is of an event that does not exist, and each CPU's statistics
/// balance where the seal left nothing out. A filter on the `ftrace` system, which
/// `kernel_stack` is in, leaves the stacks alone (it dropped them all).
#[test]
fn a_panic_while_every_cpu_writes_dumps_where_each_was() {
    let _alone = e2e::busy_guest();
    let mut m = Machine::boot();
    assert_eq!(m.run("echo 'depth < 100' > events/ftrace/filter"), "");
    assert_eq!(m.run("cat events/ftrace/kernel_stack/filter"), "none\n");
    assert_eq!(m.run_to_exit("stress overwrite 300 panic"), Outcome::KernelFailure);
    let transcript = m.transcript();
    assert!(transcript.contains("stress: a panic on purpose while every CPU writes"));
    assert!(!transcript.contains("a write in progress"), "every CPU was stopped and sealed");
    let dump = m.dumps().into_iter().rfind(|d| d.panic.is_some()).expect("the panic dump");
    assert!(dump.problems.is_empty(), "{:?}", dump.problems);
    for section in dump.sections() {
        let name = section.heading();
        assert!(section.events.iter().all(|e| section.descriptor(e.id).is_some()), "{name}");
        for (cpu, s) in section.stats.iter().enumerate().filter(|(_, s)| s.stopped == 0) {
            let accounted = s.entries + s.read + s.overrun + s.dropped;
            assert_eq!(s.written, accounted, "{name} cpu{cpu}: {s:?}");
        }
    }
    let top = top(&dump);
    for cpu in 1..4 {
        let stack = top.events.iter().rfind(|e| {
            e.cpu == cpu && top.descriptor(e.id).is_some_and(|d| d.name == "kernel_stack")
        });
        assert!(stack.is_some(), "where cpu{cpu} was");
    }
}

#[test]
fn a_panic_during_a_live_dump_still_records_where_each_cpu_was() {
    let mut m = Machine::boot();
    // Records enough that the live dump lasts well past the threshold (the tracer
    // stays: another would empty the buffer).
    m.run("echo function > current_tracer");
    m.run("ls");
    m.run("help");
    // CPU 2 hangs; its watcher panics it within the threshold, while the boot CPU
    // prints a live dump, which holds writes off until it ends: it never ends.
    m.run("lockup threshold 100");
    m.run("lockup spin 2");
    assert_eq!(m.run_to_exit("dump"), Outcome::KernelFailure);
    let transcript = m.transcript();
    let stopped = transcript.split("NMI backtrace for cpu 0:\n").nth(1).unwrap_or_default();
    let stopped: Vec<&str> = stopped.lines().take_while(|l| !l.starts_with("NMI ")).collect();
    assert!(
        stopped.iter().any(|l| l.contains("kernel::dump::live_dump")),
        "the panic stopped the boot CPU in its live dump: {stopped:#?}"
    );
    let dump = m.dumps().into_iter().rfind(|d| d.panic.is_some()).expect("the panic dump");
    assert!(dump.problems.is_empty(), "{:?}", dump.problems);
    assert_eq!(dump.panic.as_ref().unwrap().cpu, 2);
    let symbols = report::Symbols::read(std::path::Path::new(boot::KERNEL_ELF)).unwrap();
    let mut top = top(&dump);
    symbols.symbolize(&mut top);
    // The stacks the panic recorded went in: the hung CPU's, from where it was stuck,
    // and the boot CPU's, in the live dump the panic stopped.
    let stack = |cpu: usize| {
        let last = top.events.iter().rfind(|e| {
            e.cpu == cpu && top.descriptor(e.id).is_some_and(|d| d.name == "kernel_stack")
        });
        last.map(|e| top.texts().text(e)).unwrap_or_default()
    };
    assert!(stack(2).contains("kernel::smp::on_call_interrupt+"), "{}", stack(2));
    let printed: Vec<&str> = stopped
        .iter()
        .map(|l| l.strip_prefix("RIP: ").or_else(|| l.strip_prefix(" => ")).unwrap_or(l))
        .collect();
    let recorded = stack(0);
    let recorded: Vec<&str> = recorded.lines().skip(1).map(|l| &l[4..]).collect();
    assert!(
        !recorded.is_empty() && printed.starts_with(&recorded),
        "the boot CPU's stack as its NMI backtrace printed it: {recorded:#?} {printed:#?}"
    );
    for (cpu, s) in top.stats.iter().enumerate() {
        assert_eq!(s.written, s.entries + s.read + s.overrun + s.dropped, "cpu{cpu}: {s:?}");
    }
}

#[test]
fn the_nmi_that_stops_the_other_cpus_is_recorded_as_sent_to_every_other_cpu() {
    let m = panicked("panic 2");
    let dump = one_dump(&m);
    let trace = top(&dump);
    // The panicking CPU's last IPI: the NMI to every CPU but itself, not to CPU 0.
    let sent = trace
        .events
        .iter()
        .rfind(|e| e.cpu == 2 && trace.descriptor(e.id).is_some_and(|d| d.name == "ipi_send"));
    let sent = sent.unwrap_or_else(|| panic!("the panicking CPU's NMI"));
    assert_eq!(trace.texts().text(sent), "target_apic=4294967295 kind=nmi", "{sent:?}");
    let stacks = trace.events.iter().filter(|e| {
        e.ts > sent.ts && trace.descriptor(e.id).is_some_and(|d| d.name == "kernel_stack")
    });
    let mut stopped: Vec<usize> = stacks.map(|e| e.cpu).collect();
    stopped.sort();
    assert_eq!(stopped, [0, 1, 3], "every other CPU took it");
}
