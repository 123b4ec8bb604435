//! `trace_pipe_raw`: the consuming reader that streams records as a growing dump.

use e2e::{Machine, STEP_TIMEOUT, trace_lines};
use trace::dump::{self, Dump};

/// The dump a stream's text holds so far (intact or not, ended or not).
fn stream(text: &str) -> Option<Dump> {
    let mut reader = dump::Reader::new();
    let mut dumps: Vec<Dump> = text.lines().filter_map(|line| reader.line(line)).collect();
    dumps.extend(reader.finish());
    dumps.pop()
}

/// Records of the stream's one section.
fn records(dump: &Dump) -> usize {
    dump.instances.values().map(|s| s.records.len()).sum()
}

/// Runs `cat FILE`, waits until its stream holds what `enough` wants, stops it with
/// a key and returns the whole stream, checked to be intact and ended.
fn cat_raw(m: &mut Machine, file: &str, enough: impl Fn(&Dump) -> bool) -> Dump {
    m.send(format!("cat {file}\r").as_bytes());
    let mut text = m.wait_for(&format!("cat {file}\r\n"), STEP_TIMEOUT);
    text += &m.wait_for_text(&format!("enough of {file}"), STEP_TIMEOUT, |unread| {
        stream(unread).as_ref().is_some_and(&enough)
    });
    m.send(b"q");
    text += &m.wait_for_prompt(STEP_TIMEOUT);
    let dump = stream(&text).unwrap_or_else(|| panic!("no stream from {file}:\n{text}"));
    assert!(dump.problems.is_empty(), "{file}: {:?}", dump.problems);
    assert_eq!(dump.instances.len(), 1, "{file}: one section");
    dump
}

#[test]
fn trace_pipe_raw_streams_consumed_records_with_their_lost_counts() {
    let mut m = Machine::boot();
    assert_eq!(m.run("mkdir instances/t1"), "");
    // A small discard-mode buffer: a marker first, then timer ticks of every CPU
    // until it overflows.
    m.run("echo 4 > instances/t1/buffer_size_kb");
    m.run("echo 0 > instances/t1/options/overwrite");
    m.run("echo first > instances/t1/trace_marker");
    m.run("echo timer:tick > instances/t1/set_event");
    let dropped = |m: &mut Machine| -> u64 {
        (0..4).map(|cpu| m.cpu_stat("instances/t1/", cpu, "dropped events:")).sum()
    };
    assert!((0..500).any(|_| dropped(&mut m) > 0), "the buffer never overflowed");
    m.run("echo 0 > instances/t1/tracing_on");
    let entries: u64 = (0..4).map(|cpu| m.cpu_stat("instances/t1/", cpu, "entries:")).sum();
    let lost = dropped(&mut m);
    // Everything the rings hold reaches the host before the key is pressed: the
    // stream flushes its partial chunk when it waits.
    let d = cat_raw(&mut m, "instances/t1/trace_pipe_raw", |d| records(d) as u64 == entries);
    let section = &d.instances[&0];
    assert_eq!((section.name.as_str(), section.buffer), ("t1", dump::BufferKind::Live));
    assert_eq!(d.cpus, Some(4));
    // It names its kernel, as a panic dump does: `report --elf` takes this ELF.
    let kernel = boot::report::Symbols::read(std::path::Path::new(boot::KERNEL_ELF)).unwrap();
    assert_eq!(d.symbols, Some(kernel.fingerprint()));
    assert_eq!(section.records.len() as u64, entries);
    assert_eq!(section.lost.values().sum::<u64>(), lost, "every dropped event counted once");
    // The report's text tells each, before the record it preceded or after the
    // CPU's last.
    let mut text = Vec::new();
    boot::report::write_text(&d.sections()[0], &mut text).unwrap();
    let told: u64 = String::from_utf8(text)
        .unwrap()
        .lines()
        .filter_map(|l| l.split(" [LOST ").nth(1)?.strip_suffix(" EVENTS]")?.parse::<u64>().ok())
        .sum();
    assert_eq!(told, lost, "every loss in the report's text");
    assert!(section.records.windows(2).all(|w| w[0].ts <= w[1].ts), "merged in time order");
    let name = |r: &dump::DumpRecord| d.descriptors.get(&r.id).map(|x| x.name.clone());
    let first = section.records.first().expect("records");
    assert_eq!(name(first).as_deref(), Some("print"), "the marker comes first");
    assert!(section.records[1..].iter().all(|r| name(r).as_deref() == Some("tick")));
    assert_eq!(section.stats.len(), 4, "statistics of every CPU");
    // They were consumed: the buffer is empty now.
    assert!(trace_lines(&m.run("cat instances/t1/trace")).is_empty());
    let again = cat_raw(&mut m, "instances/t1/trace_pipe_raw", |_| true);
    assert_eq!(records(&again), 0, "consumed records came back");
}

#[test]
fn trace_pipe_raw_streams_live_events_of_all_cpus_or_one() {
    let mut m = Machine::boot();
    m.run("echo timer:tick > set_event");
    // Live: records keep arriving while the stream runs.
    let ticks = |d: &Dump| -> Vec<usize> {
        let records = d.instances.values().flat_map(|s| s.records.iter());
        records
            .filter(|r| d.descriptors.get(&r.id).is_some_and(|x| x.name == "tick"))
            .map(|r| r.cpu)
            .collect()
    };
    let d = cat_raw(&mut m, "trace_pipe_raw", |d| {
        let cpus = ticks(d);
        cpus.len() >= 200 && cpus.iter().collect::<std::collections::BTreeSet<_>>().len() == 4
    });
    assert_eq!(d.instances[&0].name, "", "the top-level instance");
    assert!(ticks(&d).len() >= 200, "the ticks seen before the key are in the ended stream");
    // One CPU's.
    let d = cat_raw(&mut m, "per_cpu/cpu1/trace_pipe_raw", |d| records(d) >= 20);
    let section = &d.instances[&0];
    assert!(section.records.iter().all(|r| r.cpu == 1), "only CPU 1's records");
    assert_eq!(section.stats.keys().collect::<Vec<_>>(), [&1], "only CPU 1's statistics");
    // Bad paths and writes.
    assert!(
        m.run("cat per_cpu/cpu99/trace_pipe_raw")
            .contains("cat: per_cpu/cpu99/trace_pipe_raw: No such file or directory")
    );
    assert!(m.run("echo 1 > trace_pipe_raw").contains("read-only"));
    assert!(m.run("ls per_cpu/cpu0").lines().any(|l| l == "trace_pipe_raw"));
    assert!(m.run("ls").lines().any(|l| l == "trace_pipe_raw"));
}
