//! The dump format: round trip, damage, and never panicking on any input.

use proptest::prelude::*;
use trace::dump::{self, DumpWriter, OtherPanic, OtherPanicReport, PanicHeader, Value};
use trace::{Context, event::EventDescriptor, ring::RecordRef, ring::RingStats};

trace::event! {
    /// Integers of every width and sign.
    pub NUMBERS = "dump":"numbers" { a: u8, b: u16, c: u32, d: u64, e: i8, f: i64 } => "{a} {b} {c} {d} {e} {f}";
    /// A string and friends.
    pub TEXT = "dump":"text" { flag: bool, letter: char, bytes: [u8; 3], s: &str } => "{flag} {letter} {bytes} {s}";
}

/// The two test descriptors; the tests number them 1 and 2 themselves (no tracer).
fn descriptors() -> [&'static EventDescriptor; 2] {
    [NUMBERS.descriptor(), TEXT.descriptor()]
}

/// A payload of NUMBERS built by the event's own encoder.
fn numbers(a: u8, b: u16, c: u32, d: u64, e: i8, f: i64) -> Vec<u8> {
    let mut buf = [0u8; 64];
    let mut enc = trace::field::Encoder::new(&mut buf);
    use trace::field::FieldValue;
    a.encode(&mut enc);
    b.encode(&mut enc);
    c.encode(&mut enc);
    d.encode(&mut enc);
    e.encode(&mut enc);
    f.encode(&mut enc);
    enc.bytes().to_vec()
}

fn text(flag: bool, letter: char, bytes: [u8; 3], s: &str) -> Vec<u8> {
    let mut buf = [0u8; 256];
    let mut enc = trace::field::Encoder::new(&mut buf);
    use trace::field::FieldValue;
    flag.encode(&mut enc);
    letter.encode(&mut enc);
    bytes.encode(&mut enc);
    s.encode(&mut enc);
    enc.bytes().to_vec()
}

struct Sample {
    records: Vec<(usize, u64, u16, Vec<u8>)>,
}

/// The symbol table fingerprint [`write`] puts in the header (ten varint bytes).
const SYMBOLS: u64 = 0xfeed_f00d_dead_beef;

/// Writes a dump of `sample`'s records (ids 1 and 2 = NUMBERS and TEXT) with stats.
fn write(sample: &Sample, panic: Option<(usize, &str, &str)>) -> String {
    let panic = panic.map(|(cpu, message, location)| PanicHeader {
        cpu,
        message,
        location,
        nested: None,
        other: None,
    });
    write_panic(sample, panic)
}

/// A dump writer whose lines go into `out`, each ended with a newline, as a serial
/// log holds them.
fn log_writer(out: &mut String) -> DumpWriter<impl FnMut(&str) + '_> {
    DumpWriter::begin(move |line: &str| {
        out.push_str(line);
        out.push('\n');
    })
}

/// [`write`] with a panic that may have a nested one.
fn write_panic(sample: &Sample, panic: Option<PanicHeader<'_>>) -> String {
    let [numbers_d, text_d] = descriptors();
    // Ids as a tracer would give them, without needing one: fixed for this test.
    let ids = [(1u16, numbers_d), (2u16, text_d)];
    let mut out = String::from("boot noise before the dump\n");
    let mut writer = log_writer(&mut out);
    writer.header(2, panic, Some(SYMBOLS));
    for (id, d) in ids {
        writer.descriptor_as(id, d);
    }
    writer.instance(0, "");
    for cpu in 0..2 {
        let stats =
            RingStats { written: 10 + cpu as u64, entries: 3, overrun: 7, ..RingStats::default() };
        writer.cpu_stats(0, cpu, &stats);
    }
    for (cpu, ts, id, payload) in &sample.records {
        let d = ids.iter().find(|(i, _)| i == id).map(|(_, d)| *d);
        let record = RecordRef { id: *id, ..record(*cpu, *ts, payload) };
        writer.record(0, &record, d);
    }
    writer.finish();
    out.push_str("more output after it\n");
    out
}

/// A record of event 1 written by CPU `cpu` at `ts`, in the context the sample
/// gives it ([`context_of`]).
fn record(cpu: usize, ts: u64, payload: &[u8]) -> RecordRef<'_> {
    RecordRef { cpu, ts, id: 1, context: context_of(ts), lost: 0, payload }
}

/// The context the sample gives a record at `ts`: every one of the 16 codes.
fn context_of(ts: u64) -> Context {
    Context::from_bits((ts >> 1) as u8 & 0xf)
}

fn sample() -> Sample {
    let mut records = Vec::new();
    for i in 0..200u64 {
        let cpu = (i % 2) as usize;
        let ts = 1_000_000 + i * 1234;
        if i % 3 == 0 {
            records.push((
                cpu,
                ts,
                2,
                text(i % 2 == 0, 'λ', [1, 2, i as u8], &format!("record {i}")),
            ));
        } else {
            records.push((
                cpu,
                ts,
                1,
                numbers(i as u8, 300, 70_000, u64::MAX - i, -5, -(i as i64) * 1_000_000),
            ));
        }
    }
    Sample { records }
}

#[test]
fn a_dump_round_trips_through_text() {
    let sample = sample();
    let log = write(&sample, Some((1, "boom: the kernel\nfell over", "src/main.rs:1:2")));
    let dumps = dump::parse(&log);
    assert_eq!(dumps.len(), 1);
    let d = &dumps[0];
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    assert_eq!(d.cpus, Some(2));
    let panic = d.panic.as_ref().expect("panic report");
    assert_eq!(
        (panic.cpu, panic.message.as_str(), panic.location.as_str()),
        (1, "boom: the kernel\nfell over", "src/main.rs:1:2")
    );
    assert_eq!(d.symbols, Some(SYMBOLS));
    assert_eq!(d.descriptors[&1].name, "numbers");
    assert_eq!(d.descriptors[&2].fields.len(), 4);
    let instance = &d.instances[&0];
    assert_eq!(instance.stats[&1].written, 11);
    let got: Vec<_> =
        instance.records.iter().map(|r| (r.cpu, r.ts, r.id, r.payload.clone())).collect();
    assert_eq!(got, sample.records);
    assert!(instance.records.iter().all(|r| r.context == context_of(r.ts)));
    assert!(instance.records.iter().any(|r| r.context.bits() == 0b1101));
}

/// A record whose id the dump does not describe keeps its payload, for the readers'
/// hex dumps (`unknown_event: id=N 01 02 ...`).
#[test]
fn an_undescribed_record_keeps_its_payload() {
    let sample = Sample { records: vec![(0, 5, 3, vec![1, 2, 0xff]), (1, 6, 3, vec![])] };
    let log = write(&sample, None);
    let section = dump::parse(&log).pop().unwrap().sections().pop().unwrap();
    let values: Vec<&[Value]> = section.events.iter().map(|e| &e.values[..]).collect();
    assert_eq!(values, [&[Value::Bytes(vec![1, 2, 0xff])][..], &[Value::Bytes(vec![])][..]]);
    assert_eq!(dump::hex_dump(&section.events[0].values), "01 02 ff");
}

#[test]
fn the_machine_block_is_far_smaller_than_text_lines() {
    let sample = sample();
    let log = write(&sample, None);
    let block: usize = log.lines().filter(|l| l.starts_with("TD ")).map(|l| l.len() + 1).sum();
    let dumps = dump::parse(&log);
    let d = &dumps[0];
    let mut text_bytes = 0;
    for r in &d.instances[&0].records {
        let desc = &d.descriptors[&r.id];
        let mut line = format!(
            "[{:03}] {:>5}.{:09}: {}:{}: ",
            r.cpu,
            r.ts / 1_000_000_000,
            r.ts % 1_000_000_000,
            desc.system,
            desc.name
        );
        let fields = desc.fields();
        trace::event::format::render(&mut line, &desc.format, &fields, &r.payload, None).unwrap();
        text_bytes += line.len() + 1;
    }
    // The descriptors and stats ride along in the block, so this bounds it from above.
    assert!(block * 2 < text_bytes, "block {block} bytes vs text {text_bytes} bytes");
}

#[test]
fn a_corrupted_chunk_is_named_and_the_rest_is_reported() {
    let sample = sample();
    let log = write(&sample, None);
    let mut lines: Vec<String> = log.lines().map(String::from).collect();
    let target = lines.iter().position(|l| l.starts_with("TD 3 ")).expect("chunk 3");
    // Flip one base64 character in the middle of chunk 3.
    let mut bytes = lines[target].clone().into_bytes();
    let at = bytes.len() / 2;
    bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
    lines[target] = String::from_utf8(bytes).unwrap();
    let d = &dump::parse(&lines.join("\n"))[0];
    assert_eq!(d.problems.len(), 1, "{:?}", d.problems);
    let problem = &d.problems[0];
    assert_eq!(problem.chunk, Some(3));
    assert_eq!(problem.line, target + 1);
    assert!(problem.what.contains("checksum mismatch"), "{}", problem.what);
    let records = &d.instances[&0].records;
    assert!(records.len() < sample.records.len() && records.len() > sample.records.len() / 2);
    for r in records {
        assert!(
            sample.records.contains(&(r.cpu, r.ts, r.id, r.payload.clone())),
            "a record changed: {r:?}"
        );
    }
}

#[test]
fn truncation_and_interleaved_output_are_handled() {
    let log = write(&sample(), None);
    let cut: String = log
        .lines()
        .take_while(|l| !l.starts_with("TD 5 "))
        .map(|l| format!("{l}\nkernel: some other message\n"))
        .collect();
    let d = &dump::parse(&cut)[0];
    assert_eq!(d.chunks, 5);
    assert!(d.problems.iter().any(|p| p.what.contains("truncated")), "{:?}", d.problems);
    assert!(!d.instances[&0].records.is_empty());
}

#[test]
fn a_missing_chunk_is_named() {
    let log = write(&sample(), None);
    let without: String =
        log.lines().filter(|l| !l.starts_with("TD 2 ")).map(|l| format!("{l}\n")).collect();
    let d = &dump::parse(&without)[0];
    assert!(
        d.problems.iter().any(|p| p.chunk == Some(2) && p.what.contains("chunk 2 is missing")),
        "{:?}",
        d.problems
    );
}

#[test]
fn several_dumps_in_one_log_are_all_found() {
    let one = write(&sample(), None);
    let log = format!("{one}{one}");
    let dumps = dump::parse(&log);
    assert_eq!(dumps.len(), 2);
    assert!(dumps.iter().all(|d| d.problems.is_empty()));
    assert!(dumps[1].line > dumps[0].line);
}

#[test]
fn a_reader_fed_line_by_line_hands_back_each_dump_at_its_end_marker() {
    let one = write(&sample(), None);
    let log = format!("noise\n{one}between\n{one}");
    let mut reader = dump::Reader::new();
    let mut ended_at = Vec::new();
    for (i, line) in log.lines().enumerate() {
        if let Some(d) = reader.line(line) {
            assert!(d.problems.is_empty(), "{:?}", d.problems);
            ended_at.push((i + 1, d));
        }
    }
    assert!(reader.finish().is_none(), "nothing left open");
    let ends: Vec<usize> = log
        .lines()
        .enumerate()
        .filter(|(_, l)| l.starts_with(dump::END))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(ended_at.iter().map(|(line, _)| *line).collect::<Vec<_>>(), ends);
    assert_eq!(ended_at.into_iter().map(|(_, d)| d).collect::<Vec<_>>(), dump::parse(&log));
}

#[test]
fn begin_markers_in_a_row_are_read_in_linear_time_and_constant_stack() {
    // Each marker ends the dump before it: one dump per marker, each truncated.
    let count = 200_000;
    let log = format!("{}\n", dump::BEGIN).repeat(count);
    let dumps = dump::parse(&log);
    assert_eq!(dumps.len(), count);
    assert_eq!(dumps[count - 1].line, count);
    assert!(dumps[0].problems.iter().any(|p| p.what.contains("a new dump begins")));
    assert!(dumps[count - 1].problems.iter().any(|p| p.what.contains("no end marker")));
}

#[test]
fn chunk_numbers_at_the_limits_are_damage_not_overflow() {
    // A chunk naming instance 0 (kind 3, length 2, number 0, empty name).
    let chunk = |seq: u64| dump::encode_chunk(seq, &[3, 2, 0, 0]);
    let gap =
        format!("{}\n{}\n{}\n{} chunks=3>>>\n", dump::BEGIN, chunk(0), chunk(u64::MAX), dump::END);
    let d = &dump::parse(&gap)[0];
    let whats: Vec<&str> = d.problems.iter().map(|p| p.what.as_str()).collect();
    assert_eq!(whats, ["chunks from 1 on are missing"]);
    // Many damaged chunks around a few good ones: each reported once, quickly.
    let mut log = format!("{}\n", dump::BEGIN);
    for seq in 0..50_000u64 {
        if seq % 10_000 == 0 {
            log.push_str(&chunk(seq));
        } else {
            log.push_str(&format!("TD {seq} !!!! 00000000"));
        }
        log.push('\n');
    }
    log.push_str(&format!("{}\n{} chunks=50501>>>\n", chunk(50_500), dump::END));
    let d = &dump::parse(&log)[0];
    let missing: Vec<&str> =
        d.problems.iter().map(|p| p.what.as_str()).filter(|w| w.contains("missing")).collect();
    assert_eq!(missing, ["chunks 50000 to 50499 are missing"]);
    assert_eq!(d.problems.iter().filter(|p| p.what.contains("invalid base64")).count(), 49_995);
    // The chunk numbered u64::MAX is read; the end marker's count says 3.
    assert_eq!(dump::decode_chunk(&chunk(u64::MAX)), Ok((u64::MAX, vec![3, 2, 0, 0])));
}

#[test]
fn a_dump_carries_a_snapshot_section_beside_the_live_one_with_its_own_stats() {
    let [numbers_d, _] = descriptors();
    let mut out = String::new();
    let mut writer = log_writer(&mut out);
    writer.header(2, None, None);
    writer.descriptor_as(1, numbers_d);
    writer.instance(0, "latency");
    writer.cpu_stats(0, 0, &RingStats { written: 5, entries: 1, ..RingStats::default() });
    writer.record(0, &record(0, 100, &numbers(1, 2, 3, 4, 5, 6)), Some(numbers_d));
    writer.section(1, "latency", dump::BufferKind::Snapshot, trace::Clock::Counter);
    writer.cpu_stats(
        1,
        1,
        &RingStats { written: 9, entries: 2, overrun: 7, ..RingStats::default() },
    );
    writer.record(1, &record(1, 50, &numbers(7, 8, 9, 10, -1, -2)), Some(numbers_d));
    writer.record(1, &record(1, 60, &numbers(0, 0, 0, 0, 0, 0)), Some(numbers_d));
    writer.finish();
    let d = &dump::parse(&out)[0];
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    assert_eq!(d.version, Some(dump::VERSION));
    let (live, snapshot) = (&d.instances[&0], &d.instances[&1]);
    assert_eq!((live.name.as_str(), live.buffer), ("latency", dump::BufferKind::Live));
    assert_eq!((snapshot.name.as_str(), snapshot.buffer), ("latency", dump::BufferKind::Snapshot));
    assert_eq!((live.clock, snapshot.clock), (trace::Clock::Local, trace::Clock::Counter));
    assert_eq!(live.records.len(), 1);
    assert_eq!(snapshot.records.iter().map(|r| r.ts).collect::<Vec<_>>(), [50, 60]);
    assert_eq!(live.stats.keys().collect::<Vec<_>>(), [&0]);
    assert_eq!(snapshot.stats[&1].overrun, 7, "the snapshot's own statistics");
}

#[test]
fn a_stream_flushes_partial_chunks_and_carries_lost_counts_per_cpu() {
    let [numbers_d, _] = descriptors();
    let lines = std::cell::RefCell::new(Vec::<String>::new());
    let mut writer = DumpWriter::begin(|line: &str| lines.borrow_mut().push(line.into()));
    writer.header(2, None, None);
    writer.descriptor_as(1, numbers_d);
    writer.instance(0, "");
    writer.record(0, &record(0, 100, &numbers(1, 2, 3, 4, 5, 6)), Some(numbers_d));
    writer.flush();
    // A flushed chunk is whole on the line already: it decodes before the end.
    let flushed = lines.borrow().len();
    assert_eq!(flushed, 2, "the begin line and one chunk");
    writer.lost(0, 1, 0);
    writer.lost(0, 1, 7);
    writer.record(0, &record(1, 120, &numbers(0, 0, 0, 0, 0, 0)), Some(numbers_d));
    writer.lost(0, 1, 3);
    writer.flush();
    writer.flush();
    assert_eq!(lines.borrow().len(), flushed + 1, "an empty flush writes nothing");
    writer.finish();
    let log = lines.borrow().join("\n");
    let d = &dump::parse(&log)[0];
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    let top = &d.instances[&0];
    assert_eq!(top.records.iter().map(|r| (r.cpu, r.ts)).collect::<Vec<_>>(), [(0, 100), (1, 120)]);
    assert_eq!(top.lost.iter().collect::<Vec<_>>(), [(&1, &10)], "lost counts summed per CPU");
    // The losses reported before a record are its `lost_before`; those after the
    // last record of a CPU are in the total only.
    assert_eq!(top.records.iter().map(|r| r.lost_before).collect::<Vec<_>>(), [0, 7]);
    let section = &d.sections()[0];
    assert_eq!(section.instance, "top");
    assert_eq!(section.events.iter().map(|e| e.lost_before).collect::<Vec<_>>(), [0, 7]);
    assert_eq!(section.events[1].values.len(), 6, "decoded with the dump's descriptor");
}

#[test]
fn a_long_panic_message_is_cut_so_that_the_header_keeps_its_fingerprint() {
    let message = "x".repeat(4000);
    let log = write(&Sample { records: Vec::new() }, Some((0, &message, "src/lib.rs:9:9")));
    let d = &dump::parse(&log)[0];
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    let panic = d.panic.as_ref().expect("the header");
    assert!(message.starts_with(&panic.message) && panic.message.len() > 200, "{panic:?}");
    assert_eq!((panic.location.as_str(), d.symbols), ("src/lib.rs:9:9", Some(SYMBOLS)));
}

#[test]
fn a_nested_panic_reads_back_beside_the_first_and_long_messages_share_the_header() {
    let first = PanicHeader {
        cpu: 1,
        message: "the first",
        location: "src/a.rs:1:2",
        nested: Some(("the second", "src/b.rs:3:4")),
        other: None,
    };
    let d = &dump::parse(&write_panic(&sample(), Some(first)))[0];
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    let panic = d.panic.as_ref().expect("the header");
    let nested = panic.nested.as_ref().expect("the nested panic");
    assert_eq!(
        (panic.cpu, panic.message.as_str(), panic.location.as_str()),
        (1, "the first", "src/a.rs:1:2")
    );
    assert_eq!((nested.message.as_str(), nested.location.as_str()), ("the second", "src/b.rs:3:4"));
    assert_eq!(d.symbols, Some(SYMBOLS));
    // Two long messages: both cut, the first keeping more, the header whole.
    let (long, longer) = ("y".repeat(4000), "z".repeat(4000));
    let both = PanicHeader { message: &long, nested: Some((&longer, "src/b.rs:3:4")), ..first };
    let d = &dump::parse(&write_panic(&Sample { records: Vec::new() }, Some(both)))[0];
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    let panic = d.panic.as_ref().expect("the header");
    let nested = panic.nested.as_ref().expect("the nested panic");
    assert!(panic.message.len() > 150 && long.starts_with(&panic.message), "{panic:?}");
    assert!(nested.message.len() > 50 && longer.starts_with(&nested.message), "{panic:?}");
    assert_eq!((nested.location.as_str(), d.symbols), ("src/b.rs:3:4", Some(SYMBOLS)));
    // Two long locations (paths into a registry, say): each cut, the header whole.
    let (far, farther) = ("a/".repeat(150), "b/".repeat(150));
    let places = PanicHeader { location: &far, nested: Some(("the second", &farther)), ..first };
    let d = &dump::parse(&write_panic(&Sample { records: Vec::new() }, Some(places)))[0];
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    let panic = d.panic.as_ref().expect("the header, whatever its locations");
    let nested = panic.nested.as_ref().expect("the nested panic");
    assert_eq!(panic.message, "the first");
    assert!(panic.location.len() > 50 && far.starts_with(&panic.location), "{panic:?}");
    assert!(farther.starts_with(&nested.location) && nested.location.len() > 50, "{panic:?}");
}

#[test]
fn another_cpus_panic_reads_back_beside_the_first_whatever_its_length() {
    let other = OtherPanic { cpu: 0, message: "the other", location: "src/c.rs:5:6" };
    let first = PanicHeader {
        cpu: 1,
        message: "the first",
        location: "src/a.rs:1:2",
        nested: Some(("the second", "src/b.rs:3:4")),
        other: Some(other),
    };
    let d = &dump::parse(&write_panic(&sample(), Some(first)))[0];
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    let panic = d.panic.as_ref().expect("the header");
    assert_eq!((panic.message.as_str(), d.symbols), ("the first", Some(SYMBOLS)));
    assert!(panic.nested.is_some(), "{panic:?}");
    let expected =
        OtherPanicReport { cpu: 0, message: "the other".into(), location: "src/c.rs:5:6".into() };
    assert_eq!(panic.other.as_ref(), Some(&expected));
    assert_eq!(d.instances[&0].records.len(), sample().records.len(), "the records");
    // Long ones are cut, and read back all the same.
    let (long, far) = ("m".repeat(4000), "p/".repeat(300));
    let other = OtherPanic { message: &long, location: &far, ..other };
    let d =
        &dump::parse(&write_panic(&sample(), Some(PanicHeader { other: Some(other), ..first })))[0];
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    let read = d.panic.as_ref().and_then(|p| p.other.as_ref()).expect("the other panic");
    assert!(read.message.len() > 150 && long.starts_with(&read.message), "{read:?}");
    assert!(read.location.len() > 50 && far.starts_with(&read.location), "{read:?}");
    // Absurd ones are refused with a reason, and the rest of the dump stays.
    for (body, reason) in [
        (&[1u8, 1, b'x', 1, b'y'][..], "the header's panic's own"),
        (&[7, 1, b'x', 1, b'y'][..], "out of range"),
    ] {
        let log = crafted_dump(&[(1, &[2, 2, 1, 1, 1, b'a', 1, b'b']), (9, body)]);
        let d = &dump::parse(&log)[0];
        assert!(d.problems.iter().any(|p| p.what.contains(reason)), "{:?}", d.problems);
        assert_eq!(d.panic.as_ref().map(|p| p.message.as_str()), Some("a"));
    }
    let good: &[u8] = &[0, 1, b'x', 1, b'y'];
    let log = crafted_dump(&[(1, &[2, 2, 1, 1, 1, b'a', 1, b'b']), (9, good), (9, &[0, 0, 0])]);
    let d = &dump::parse(&log)[0];
    assert!(d.problems.iter().any(|p| p.what.contains("a second panic")), "{:?}", d.problems);
    let other = d.panic.as_ref().and_then(|p| p.other.as_ref()).expect("the first one");
    assert_eq!((other.cpu, other.message.as_str()), (0, "x"));
}

/// A one-chunk dump of `items` (kind, body), as an older writer could have written it.
fn crafted_dump(items: &[(u8, &[u8])]) -> String {
    let mut chunk = Vec::new();
    for (kind, body) in items {
        chunk.push(*kind);
        chunk.push(body.len() as u8);
        chunk.extend_from_slice(body);
    }
    format!("{}\n{}\n{} chunks=1>>>\n", dump::BEGIN, dump::encode_chunk(0, &chunk), dump::END)
}

#[test]
fn a_version_1_dump_still_parses_its_sections_as_live_buffers() {
    // Header: version 1, 2 CPUs, no panic. Section 0 named "a", no buffer field.
    // Records of section 0: CPU 1, timestamp 7, id 3 raw, empty payload.
    let log = crafted_dump(&[(1, &[1, 2, 0]), (3, &[0, 1, b'a']), (5, &[0, 1, 7, 6, 0])]);
    let d = &dump::parse(&log)[0];
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    assert_eq!(d.version, Some(1));
    assert_eq!(d.symbols, None, "a header without the symbols' fingerprint");
    assert_eq!(d.instances[&0].name, "a");
    assert_eq!(d.instances[&0].buffer, dump::BufferKind::Live);
    assert_eq!(d.instances[&0].records.len(), 1);
}

#[test]
fn cpu_statistics_read_the_seals_figures_when_present_and_zero_before_them() {
    // Header: version 2, 1 CPU, no panic. Section 0 "a", live. Statistics of CPU 0:
    // written 5, entries 4, overrun 0, dropped 0, read 0, commit overrun 0, then the
    // seal's figures (stopped 1, unreadable 16, unpublished 24) or none of them.
    let head: [(u8, &[u8]); 2] = [(1, &[2, 1, 0]), (3, &[0, 1, b'a', 0])];
    let stats = |body: &'static [u8]| {
        let log = crafted_dump(&[head[0], head[1], (4, body)]);
        dump::parse(&log).remove(0)
    };
    let d = stats(&[0, 0, 5, 4, 0, 0, 0, 0, 1, 16, 24]);
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    let s = d.instances[&0].stats[&0];
    assert_eq!((s.written, s.stopped, s.unreadable, s.unpublished), (5, 1, 16, 24));
    let d = stats(&[0, 0, 5, 4, 0, 0, 0, 0]);
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    let s = d.instances[&0].stats[&0];
    assert_eq!((s.written, s.stopped, s.unreadable, s.unpublished), (5, 0, 0, 0));
    // A seventh value cut short is named damage, and the item is not taken.
    let d = stats(&[0, 0, 5, 4, 0, 0, 0, 0, 0x80]);
    assert!(!d.problems.is_empty());
    assert!(d.instances.get(&0).is_none_or(|i| i.stats.is_empty()));
}

#[test]
fn dump_versions_and_buffers_out_of_range_are_named_damage() {
    let future = dump::VERSION as u8 + 1;
    let d = &dump::parse(&crafted_dump(&[(1, &[future, 2, 0])]))[0];
    let expected =
        format!("dump format version {future}; this tool reads versions 1 to {}", dump::VERSION);
    assert!(d.problems.iter().any(|p| p.what.contains(&expected)), "{:?}", d.problems);
    assert_eq!(d.cpus, None, "nothing of a header it cannot read is taken");
    let d = &dump::parse(&crafted_dump(&[(3, &[0, 0, 2])]))[0];
    assert!(
        d.problems.iter().any(|p| p.what.contains("unknown buffer 2 (0 live, 1 snapshot)")),
        "{:?}",
        d.problems
    );
    // The first section number beyond the bound, 128: a two-byte varint.
    let beyond = dump::MAX_SECTIONS;
    assert_eq!(beyond, 128);
    let d = &dump::parse(&crafted_dump(&[(3, &[0x80, 0x01, 0, 1])]))[0];
    assert!(
        d.problems
            .iter()
            .any(|p| p.what.contains(&format!("section number {beyond} out of range"))),
        "{:?}",
        d.problems
    );
    assert!(d.instances.is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: if cfg!(miri) { 4 } else { 256 }, ..ProptestConfig::default() })]

    #[test]
    fn the_parser_never_panics_on_arbitrary_text(noise in ".{0,400}", cut in 0usize..4000, flips in proptest::collection::vec((0usize..4000, any::<u8>()), 0..8)) {
        let log = write(&sample(), Some((0, "x", "y")));
        let mut bytes = log.into_bytes();
        bytes.truncate(cut.max(40).min(bytes.len()));
        for (at, value) in flips {
            if let Some(b) = bytes.get_mut(at) {
                *b = value;
            }
        }
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        text.push_str(&noise);
        let _ = dump::parse(&text);
    }

    #[test]
    // CPUs below the header's count of 2: a record of another CPU is damage.
    fn records_round_trip(records in proptest::collection::vec((0usize..2, 0u64..1 << 40, any::<u64>(), any::<i64>(), ".{0,40}"), 0..60)) {
        let mut sorted: Vec<_> = records.into_iter().map(|(cpu, ts, d, f, s)| {
            if s.len() % 2 == 0 {
                (cpu, ts, 1u16, numbers(d as u8, d as u16, d as u32, d, f as i8, f))
            } else {
                (cpu, ts, 2u16, text(d % 2 == 0, char::from_u32(d as u32 % 0xd000).unwrap_or('?'), [d as u8; 3], &s))
            }
        }).collect();
        sorted.sort_by_key(|r| r.1);
        let sample = Sample { records: sorted };
        let d = &dump::parse(&write(&sample, None))[0];
        prop_assert!(d.problems.is_empty(), "{:?}", d.problems);
        let got: Vec<_> = d.instances.get(&0).map(|i| i.records.iter().map(|r| (r.cpu, r.ts, r.id, r.payload.clone())).collect()).unwrap_or_default();
        prop_assert_eq!(got, sample.records);
    }
}

trace::event! {
    /// A test slice's begin.
    pub OPEN = "io":"open" { fd: u32 } => "fd={fd}", begin "io" key fd;
    /// Its end.
    pub CLOSE = "io":"close" { fd: u32 } => "fd={fd}", end "io" key fd;
    /// A test counter.
    pub DEPTH = "io":"depth" { depth: u64 } => "depth={depth}", counter;
    /// A plain event.
    pub NOTE = "io":"note" { n: u8 } => "n={n}";
    /// A wait that lasted `ns`, reported at its end.
    pub WAITED = "io":"waited" { ns: u64 } => "ns={ns}", span "wait" duration ns;
}

#[test]
fn descriptors_carry_their_timeline_through_a_dump() {
    use trace::event::Timeline;
    let mut out = String::new();
    let mut writer = log_writer(&mut out);
    writer.header(1, None, None);
    for (id, event) in [
        (1, OPEN.descriptor()),
        (2, CLOSE.descriptor()),
        (3, DEPTH.descriptor()),
        (4, NOTE.descriptor()),
        (5, WAITED.descriptor()),
    ] {
        writer.descriptor_as(id, event);
    }
    writer.finish();
    let d = &dump::parse(&out)[0];
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    let key = Some("fd".to_string());
    assert_eq!(
        d.descriptors[&1].timeline,
        Timeline::Begin { label: "io".into(), key: key.clone() }
    );
    assert_eq!(d.descriptors[&2].timeline, Timeline::End { label: "io".into(), key });
    assert_eq!(d.descriptors[&3].timeline, Timeline::Counter);
    assert_eq!(d.descriptors[&4].timeline, Timeline::Instant);
    let span = Timeline::Span { label: "wait".into(), duration: "ns".into() };
    assert_eq!(d.descriptors[&5].timeline, span);
    assert_eq!(OPEN.descriptor().timeline, Timeline::Begin { label: "io", key: Some("fd") });
}

/// A section naming a buffer another section names is reported and kept apart,
/// under its number, with its own buffer and clock (its records were read as the
/// other's, or vanished from the formats that convert one buffer).
#[test]
fn a_section_naming_another_sections_buffer_is_kept_apart_as_it_is() {
    use trace::Clock;
    let mut out = String::new();
    let mut writer = log_writer(&mut out);
    writer.header(1, None, None);
    writer.section(0, "net", dump::BufferKind::Snapshot, Clock::Local);
    writer.section(1, "net", dump::BufferKind::Snapshot, Clock::Counter);
    writer.record(1, &record(0, 5, &[]), None);
    writer.finish();
    let d = &dump::parse(&out)[0];
    let what: Vec<&str> = d.problems.iter().map(|p| p.what.as_str()).collect();
    assert_eq!(
        what,
        ["chunk 0: section 1 names the snapshot buffer of \"net\" as section 0 does; its \
          records are reported as instance \"#1\""]
    );
    let twin = &d.instances[&1];
    assert_eq!(
        (twin.name.as_str(), twin.buffer, twin.clock),
        ("#1", dump::BufferKind::Snapshot, Clock::Counter)
    );
    assert_eq!(twin.records.len(), 1);
}
