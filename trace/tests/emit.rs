//! `emit!` end to end on the host, through the installed tracer: every payload size
//! class the tracer routes on its own path (none, one word, two words, up to four
//! words copied, larger ones written in place) is recorded with its exact length and
//! bytes, in each instance that enables it, and judged by a filter on its values.
//! Its own test binary: a tracer is installed once per process.

use trace::{HostPlatform, InstanceConfig, Limits, Mode, Tracer};

trace::event! {
    /// No payload.
    pub EMPTY = "emit":"empty" {} => "empty";
    /// One byte.
    pub BYTE = "emit":"byte" { a: u8 } => "a={a}";
    /// Eight bytes: one word, full.
    pub WORD = "emit":"word" { a: u64 } => "a={a}";
    /// Nine bytes: two words, the second holding one byte.
    pub NINE = "emit":"nine" { a: u64, b: u8 } => "a={a} b={b}";
    /// Sixteen bytes: two words, full.
    pub PAIR = "emit":"pair" { a: u64, b: u64 } => "a={a} b={b}";
    /// Seventeen bytes: past two words.
    pub SEVENTEEN = "emit":"seventeen" { a: u64, b: u64, c: u8 } => "a={a} b={b} c={c}";
    /// Forty bytes: past the four words copied by value.
    pub FIVE = "emit":"five" { a: u64, b: u64, c: u64, d: u64, e: u64 } => "{a} {b} {c} {d} {e}";
    /// A string: a length prefix and its bytes, so every size class by its length.
    pub TEXT = "emit":"text" { s: &str } => "s={s}";
}

/// Every record of `instance`'s live buffer: its text and its payload's length.
fn records(
    tracer: &Tracer<HostPlatform>,
    instance: &trace::Instance<'_, HostPlatform>,
) -> Vec<(String, usize)> {
    let recorder = instance.recorder();
    let mut iter = recorder.live().merged_iter().expect("memory");
    let mut out = Vec::new();
    while let Some(record) = iter.next_record() {
        let descriptor = tracer.descriptor(record.id).expect("a known id");
        let mut text = String::new();
        let (format, fields) = (descriptor.format, descriptor.fields);
        trace::event::format::render(&mut text, format, fields, record.payload, None)
            .expect("valid");
        out.push((text, record.payload.len()));
    }
    out
}

#[test]
fn every_payload_size_is_recorded_whole_in_every_instance_and_filtered_on_its_values() {
    let limits = Limits { max_instances: 4, max_total_bytes: 4 << 20 };
    let config = InstanceConfig { bytes_per_cpu: 64 << 10, mode: Mode::Discard, snapshot: false };
    let tracer =
        Tracer::new(HostPlatform, 1, trace::linked_events!(), limits, config).expect("tracer");
    let tracer: &'static Tracer<HostPlatform> = Box::leak(Box::new(tracer));
    HostPlatform::set_cpu(0);
    trace::install(tracer).expect("first install");
    let instances = ["a", "b"].map(|name| {
        let instance = tracer.get_or_create(name, config).expect("room");
        instance.set_event(Some("emit"), None, true).expect("known events");
        instance
    });
    // The filter is judged on the values each path passes (words by value, words
    // copied, the payload itself): every event of "b" passes but the last of each.
    let b = &instances[1];
    b.set_filter(WORD.descriptor(), "a != 7").unwrap();
    b.set_filter(NINE.descriptor(), "b != 7").unwrap();
    b.set_filter(PAIR.descriptor(), "b != 7").unwrap();
    b.set_filter(SEVENTEEN.descriptor(), "c != 7").unwrap();
    b.set_filter(FIVE.descriptor(), "e != 7").unwrap();
    b.set_filter(TEXT.descriptor(), "s != \"xxxxxxx\"").unwrap();

    let mut expected = Vec::new();
    let mut rejected_by_b = Vec::new();
    trace::emit!(EMPTY);
    expected.push(("empty".to_string(), 0));
    trace::emit!(BYTE, 255);
    expected.push(("a=255".to_string(), 1));
    for last in [1 << 63, 7] {
        trace::emit!(WORD, last);
        trace::emit!(NINE, u64::MAX, last as u8);
        trace::emit!(PAIR, 3, last);
        trace::emit!(SEVENTEEN, 4, 5, last as u8);
        trace::emit!(FIVE, 1, 2, 3, 4, last);
        let lines = [
            (format!("a={last}"), 8),
            (format!("a={} b={}", u64::MAX, last as u8), 9),
            (format!("a=3 b={last}"), 16),
            (format!("a=4 b=5 c={}", last as u8), 17),
            (format!("1 2 3 4 {last}"), 40),
        ];
        if last == 7 {
            rejected_by_b.extend(lines.iter().cloned());
        }
        expected.extend(lines);
    }
    let text: String = "x".repeat(40);
    for len in 0..=40 {
        trace::emit!(TEXT, &text[..len]);
        expected.push((format!("s={}", &text[..len]), 2 + len));
    }
    rejected_by_b.push(("s=xxxxxxx".to_string(), 9));

    assert_eq!(records(tracer, &instances[0]), expected, "instance a: every event, whole");
    let passed: Vec<_> = expected.iter().filter(|e| !rejected_by_b.contains(e)).cloned().collect();
    assert_eq!(records(tracer, b), passed, "instance b: the events its filters pass, whole");
}
