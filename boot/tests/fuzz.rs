//! Mutation fuzzing of the report tool's whole path, from a serial log to every
//! output format: real panic logs (`tests/data/*.log`) and the crafted dumps are
//! mutated (chunk bytes changed and checksummed again so that the decoders see
//! them; lines dropped, repeated, swapped, renumbered, cut; markers added) and each
//! result goes through the dump reader, the conversion, and every writer, each
//! section as it is and symbolized (`report --elf`) with the ELF of the kernel that
//! wrote the seed with the function tracers. Nothing may panic, and no execution may
//! raise the process's peak memory by more than a constant times its input.
//!
//! About 60 s by default. `REPORT_FUZZ_SECS=N` runs N seconds, `REPORT_FUZZ_EXECS=N`
//! stops after N executions, `REPORT_FUZZ_SEED=S` varies the inputs. A failing
//! input is written to `report-fuzz-failure.log` in the target directory, for
//! `cargo run -- report FILE`. A failed allocation aborts the process before
//! that: `REPORT_FUZZ_KEEP=1` with the same seed writes every input to
//! `report-fuzz-current.log` before running it, so the last one is left behind.

mod crafted;
mod support;
use support::{MEMORY_PER_INPUT_BYTE, SLACK};

use boot::report::Symbols;
use std::io::{self, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use trace::dump::{BEGIN, Dump, END, Reader, Section, decode_chunk, encode_chunk};

/// Numbers that sit on limits: varint widths, integer widths, CPU and instance
/// bounds, and the values that once crashed the tool.
const INTERESTING: &[u64] = &[
    0,
    1,
    2,
    3,
    4,
    5,
    6,
    7,
    15,
    16,
    127,
    128,
    255,
    256,
    257,
    16_383,
    16_384,
    65_535,
    65_536,
    10_000_000,
    1 << 31,
    1 << 32,
    1 << 40,
    1 << 63,
    u64::MAX - 1,
    u64::MAX,
];

/// xorshift64*: fast, and the same sequence for the same seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (`n` > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn number(&mut self) -> u64 {
        match self.below(4) {
            0 => self.next(),
            1 => self.next() >> self.below(64),
            _ => INTERESTING[self.below(INTERESTING.len())],
        }
    }
}

/// The inputs mutations start from, as lines.
fn seeds() -> Vec<Vec<String>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut logs: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "log"))
        .map(|path| String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned())
        .collect();
    assert!(!logs.is_empty(), "no real panic logs in {}", dir.display());
    let snapshot = |log: &String| {
        trace::dump::parse(log)
            .iter()
            .any(|d| d.instances.values().any(|s| s.buffer == trace::dump::BufferKind::Snapshot))
    };
    assert!(logs.iter().any(snapshot), "no real log in {} has a snapshot section", dir.display());
    // The events `--elf` rewrites, so that symbolization meets them mutated.
    for event in ["kernel_stack", "irqsoff", "function", "funcgraph_entry", "funcgraph_exit"] {
        let holds = |log: &String| {
            trace::dump::parse(log).iter().flat_map(|d| d.sections()).any(|s| {
                s.events.iter().any(|e| s.descriptors.get(&e.id).is_some_and(|d| d.name == event))
            })
        };
        assert!(logs.iter().any(holds), "no real log in {} holds ftrace:{event}", dir.display());
    }
    logs.extend(crafted::crashers().into_iter().map(|c| c.log));
    logs.into_iter().map(|log| log.lines().map(String::from).collect()).collect()
}

/// Where the number after `at` ends (a varint: bytes with the top bit set, then
/// one without), or the end of `bytes`.
fn varint_end(bytes: &[u8], at: usize) -> usize {
    bytes[at..].iter().position(|b| b & 0x80 == 0).map_or(bytes.len(), |n| at + n + 1)
}

/// Where the first numbers of each item's body start: the instance, CPU, counts
/// and ids the decoders check. An item is a kind byte, a varint length, a body.
fn item_numbers(bytes: &[u8]) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut at = 0;
    while at + 1 < bytes.len() {
        let body = varint_end(bytes, at + 1);
        let mut len = 0u64;
        for (i, b) in bytes[at + 1..body].iter().enumerate().take(9) {
            len |= u64::from(b & 0x7f) << (7 * i);
        }
        let end = body.saturating_add(len as usize).min(bytes.len());
        let mut number = body;
        while number < end && starts.len() < 4096 {
            starts.push(number);
            number = varint_end(bytes, number);
            if number - body > 24 {
                break;
            }
        }
        at = end;
    }
    starts
}

/// Changes the bytes of a chunk; `donor` is another chunk to take bytes from.
fn mutate_bytes(rng: &mut Rng, bytes: &mut Vec<u8>, donor: &[u8]) {
    let at = rng.below(bytes.len() + 1);
    match rng.below(9) {
        7 | 8 => {
            // A number at the front of an item replaced: what the decoders check.
            let starts = item_numbers(bytes);
            if !starts.is_empty() {
                let at = starts[rng.below(starts.len())];
                let mut number = Vec::new();
                crafted::varint(&mut number, rng.number());
                bytes.splice(at..varint_end(bytes, at), number);
            }
        }
        0 if at < bytes.len() => bytes[at] ^= 1 << rng.below(8),
        1 if at < bytes.len() => bytes[at] = INTERESTING[rng.below(12)] as u8,
        2 => {
            // Replace the varint starting here (if any) with another number.
            let mut number = Vec::new();
            crafted::varint(&mut number, rng.number());
            bytes.splice(at..varint_end(bytes, at).min(at + 10), number);
        }
        3 => {
            let mut number = Vec::new();
            crafted::varint(&mut number, rng.number());
            bytes.splice(at..at, number);
        }
        4 => {
            let end = (at + 1 + rng.below(16)).min(bytes.len());
            bytes.drain(at..end);
        }
        5 => {
            let end = (at + 1 + rng.below(32)).min(bytes.len());
            let copy = bytes[at..end].to_vec();
            let to = rng.below(bytes.len() + 1);
            bytes.splice(to..to, copy);
        }
        _ if !donor.is_empty() => {
            let from = rng.below(donor.len());
            let end = (from + 1 + rng.below(64)).min(donor.len());
            let len = rng.below(8).min(bytes.len() - at);
            bytes.splice(at..at + len, donor[from..end].iter().copied());
        }
        _ => bytes.truncate(at),
    }
}

/// One random change to a log.
fn mutate(rng: &mut Rng, lines: &mut Vec<String>, seeds: &[Vec<String>]) {
    let chunk_lines: Vec<usize> =
        lines.iter().enumerate().filter(|(_, l)| l.contains("TD ")).map(|(i, _)| i).collect();
    let any = |rng: &mut Rng, lines: &Vec<String>| rng.below(lines.len().max(1));
    match rng.below(14) {
        0..=5 if !chunk_lines.is_empty() => {
            let i = chunk_lines[rng.below(chunk_lines.len())];
            let Ok((seq, mut bytes)) = decode_chunk(&lines[i]) else { return };
            let donor_log = &seeds[rng.below(seeds.len())];
            let donor = donor_log
                .get(rng.below(donor_log.len().max(1)))
                .and_then(|l| decode_chunk(l).ok())
                .map_or_else(Vec::new, |(_, b)| b);
            for _ in 0..1 + rng.below(3) {
                mutate_bytes(rng, &mut bytes, &donor);
            }
            lines[i] = encode_chunk(seq, &bytes);
        }
        6 if !chunk_lines.is_empty() => {
            let i = chunk_lines[rng.below(chunk_lines.len())];
            if let Ok((_, bytes)) = decode_chunk(&lines[i]) {
                lines[i] = encode_chunk(rng.number(), &bytes);
            }
        }
        7 if !lines.is_empty() => {
            let i = any(rng, lines);
            lines.remove(i);
        }
        8 if !lines.is_empty() => {
            let (from, to) = (any(rng, lines), any(rng, lines));
            let line = lines[from].clone();
            lines.insert(to, line);
        }
        9 if !lines.is_empty() => {
            let (a, b) = (any(rng, lines), any(rng, lines));
            lines.swap(a, b);
        }
        10 => lines.truncate(any(rng, lines)),
        11 => {
            let marker = match rng.below(4) {
                0 => BEGIN.to_string(),
                1 => format!("{END} chunks={}>>>", rng.number()),
                2 => format!("{END} chunks=x"),
                _ => format!("noise {BEGIN} TD {} AAAA 00000000", rng.number()),
            };
            let at = rng.below(lines.len() + 1);
            lines.insert(at, marker);
        }
        12 if !lines.is_empty() => {
            // A character changed: the checksum catches it.
            let i = any(rng, lines);
            let mut bytes = std::mem::take(&mut lines[i]).into_bytes();
            if !bytes.is_empty() {
                let at = rng.below(bytes.len());
                bytes[at] = b"A/+=9 \x7f\xff"[rng.below(8)];
            }
            lines[i] = String::from_utf8_lossy(&bytes).into_owned();
        }
        _ => {
            // Lines of another log spliced in.
            let donor = &seeds[rng.below(seeds.len())];
            let from = rng.below(donor.len().max(1));
            let end = (from + 1 + rng.below(64)).min(donor.len());
            let at = rng.below(lines.len() + 1);
            lines.splice(at..at, donor[from.min(end)..end].iter().cloned());
        }
    }
}

/// Writes one section (an instance's live buffer or snapshot) in every format:
/// text, `--stat`, Perfetto JSON and protobuf, trace.dat (with `symbols` as its
/// kallsyms), CTF files, and `--hist` histograms.
fn write_section(trace: &Section, symbols: Option<&Symbols>) {
    boot::report::write_text(trace, &mut io::sink()).unwrap();
    boot::report::write_stat(trace, &mut io::sink()).unwrap();
    boot::report::write_perfetto(trace, &mut io::sink()).unwrap();
    boot::report::write_perfetto_proto(trace, &mut io::sink()).unwrap();
    boot::report::write_tracedat(std::slice::from_ref(trace), symbols, &mut io::sink()).unwrap();
    let files = boot::report::ctf_files(trace);
    assert!(files.len() >= 2, "metadata and at least one stream");
    // `--hist`: built and written, or refused with a reason.
    let specs = [
        "irq_handler_entry:hist:keys=vector,CPU:t0=common_timestamp",
        "irq_handler_exit:hist:keys=vector,CPU:vals=$l:l=common_timestamp-$t0:onmax($l).save(CPU)",
        "tick:hist:keys=interval_ns.log2:vals=tick:sort=hitcount.descending if CPU < 2",
    ]
    .map(String::from);
    if let Ok(hists) = trace::histograms::Histograms::new(trace, &specs, None) {
        hists.add(trace);
        hists.write(None, &mut String::new()).unwrap();
    }
}

/// What `report` does to a log, every format at once: reads its dumps one at a
/// time and writes each section in every format, as it is (trace.dat with
/// `symbols`) and symbolized with `symbols` (as `--elf` does the other formats),
/// and all of them as one Perfetto document and one trace.dat.
/// Returns the number of events converted.
fn report_everything(log: &str, symbols: &Symbols) -> usize {
    let mut events = 0;
    let mut convert = |dump: Dump| {
        let traces = dump.sections();
        boot::report::write_perfetto_of(&traces, &mut io::sink()).unwrap();
        boot::report::write_tracedat(&traces, Some(symbols), &mut io::sink()).unwrap();
        for mut trace in traces {
            events += trace.events.len();
            write_section(&trace, Some(symbols));
            symbols.symbolize(&mut trace);
            write_section(&trace, None);
        }
    };
    let mut reader = Reader::new();
    for line in log.lines() {
        if let Some(dump) = reader.line(line) {
            convert(dump);
        }
    }
    if let Some(dump) = reader.finish() {
        convert(dump);
    }
    events
}

/// The process's peak memory, with a way to restart the peak (Linux's
/// `clear_refs`); `None` where that is not available.
struct PeakMemory;

impl PeakMemory {
    /// Restarts the peak at the current use; returns the current use, in bytes.
    fn restart() -> Option<u64> {
        std::fs::write("/proc/self/clear_refs", "5").ok()?;
        Self::field("VmRSS:")
    }

    /// The peak since the last restart, in bytes.
    fn peak() -> Option<u64> {
        Self::field("VmHWM:")
    }

    fn field(name: &str) -> Option<u64> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let line = status.lines().find(|l| l.starts_with(name))?;
        let kib: u64 = line[name.len()..].trim().trim_end_matches("kB").trim().parse().ok()?;
        Some(kib * 1024)
    }
}

fn env(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| v.parse().unwrap_or_else(|_| panic!("{name}={v}: a number")))
}

/// Saves a failing input where the user can rerun it; returns its path.
fn save_failure(log: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report-fuzz-failure.log");
    std::fs::write(&path, log).unwrap();
    path
}

#[test]
fn no_mutated_log_crashes_or_bloats_the_report() {
    let seeds = seeds();
    // The kernel that wrote the tracers' seed: its addresses are named.
    let elf = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/panic-tracers.elf");
    let symbols = Symbols::read(std::path::Path::new(elf)).unwrap();
    let budget = Duration::from_secs(env("REPORT_FUZZ_SECS").unwrap_or(60));
    let max_execs = env("REPORT_FUZZ_EXECS").unwrap_or(u64::MAX);
    let seed = env("REPORT_FUZZ_SEED").unwrap_or(0x5eed_f00d);
    let keep = std::env::var_os("REPORT_FUZZ_KEEP")
        .map(|_| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report-fuzz-current.log"));
    // Not captured by the test harness, so it outlives an abort.
    let _ = writeln!(
        io::stderr().lock(),
        "report fuzz: seed {seed:#x}; should this abort, REPORT_FUZZ_SEED={seed} \
         REPORT_FUZZ_KEEP=1 keeps the input that did it"
    );
    let mut rng = Rng(seed | 1);
    let start = Instant::now();
    let (mut execs, mut events, mut measured) = (0u64, 0usize, 0u64);
    let mut worst: Option<(f64, u64, usize)> = None; // (growth per input byte, growth, input)
    let mut slowest = (Duration::ZERO, 0usize);
    while execs < max_execs && start.elapsed() < budget {
        let mut lines = seeds[rng.below(seeds.len())].clone();
        let rounds = if rng.below(8) == 0 { 1 + rng.below(16) } else { 1 + rng.below(4) };
        for _ in 0..rounds {
            mutate(&mut rng, &mut lines, &seeds);
        }
        let log = lines.join("\n");
        if let Some(path) = &keep {
            std::fs::write(path, &log).unwrap();
        }
        let before = PeakMemory::restart();
        let began = Instant::now();
        let result = catch_unwind(AssertUnwindSafe(|| report_everything(&log, &symbols)));
        let took = began.elapsed();
        let Ok(converted) = result else {
            panic!(
                "execution {execs} (seed {seed:#x}) panicked; input saved to {}",
                save_failure(&log).display()
            );
        };
        events += converted;
        if took > slowest.0 {
            slowest = (took, log.len());
        }
        if let (Some(before), Some(peak)) = (before, PeakMemory::peak()) {
            measured += 1;
            let growth = peak.saturating_sub(before);
            let allowed = MEMORY_PER_INPUT_BYTE * log.len() as u64 + SLACK;
            assert!(
                growth <= allowed,
                "execution {execs} (seed {seed:#x}) raised peak memory by {growth} bytes on \
                 {} bytes of input (at most {allowed}); input saved to {}",
                log.len(),
                save_failure(&log).display()
            );
            let ratio = growth as f64 / log.len().max(1) as f64;
            if worst.is_none_or(|(r, _, _)| ratio > r) {
                worst = Some((ratio, growth, log.len()));
            }
        }
        execs += 1;
        if execs.is_multiple_of(100_000) {
            let _ = writeln!(
                io::stderr().lock(),
                "report fuzz: {execs} executions in {:.0} s, 0 crashes",
                start.elapsed().as_secs_f64()
            );
        }
    }
    let mut stderr = io::stderr().lock();
    let _ = writeln!(
        stderr,
        "report fuzz: {execs} executions in {:.1} s (seed {seed:#x}), {events} events \
         converted, 0 crashes; memory checked on {measured}; largest peak growth {:?} \
         (ratio to input, bytes, input bytes); slowest execution {:?} on {} bytes",
        start.elapsed().as_secs_f64(),
        worst,
        slowest.0,
        slowest.1,
    );
    assert!(execs > 0 && events > 0, "the fuzzer ran and reached the writers");
}
