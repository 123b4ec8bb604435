//! Fuzzes what tracefs files take, through the in-kernel API on a host tracer: an
//! event's `filter`, `trigger` (`>>` and `>`; histograms among them), `inject` and
//! `hist`, and an instance's buffer size, mode, clock, cpumask, snapshot,
//! `tracing_on`, `trace`, `trace_pipe` and the instance itself being removed and
//! made again, with events emitted between, on either of two CPUs.
//! Each input line is one operation: its first byte the operation, its second the
//! event (low bits) and the instance (top bit: `x` instead of the top level), the
//! rest the text written. Nothing may panic; a refused filter or trigger must leave
//! every event's filter and triggers as they were; after each operation every live
//! buffer must balance (`written == entries + read + overrun + dropped`) and hold as
//! many records as its `entries` count, and a `trace_pipe` reader dropped after some
//! records must have taken exactly those.
#![no_main]

use std::sync::OnceLock;
use trace::event::EventDescriptor;
use trace::ring::Clock;
use trace::{HostPlatform, Instance, InstanceConfig, Limits, Mode, Tracer};

trace::event! {
    /// Integers of two widths, one signed.
    pub SMALL = "fz":"small" { n: u32, m: i64 } => "n={n} m={m}";
    /// Two words: the by-value path.
    pub PAIR = "fz":"pair" { a: u64, b: u64 } => "a={a} b={b}";
    /// A string before an integer: the path through the payload.
    pub TEXT = "fz":"text" { s: &str, k: u16 } => "s={s} k={k}";
}

const EVENTS: [&EventDescriptor; 3] = [SMALL.descriptor(), PAIR.descriptor(), TEXT.descriptor()];

const CPUS: usize = 2;

const CONFIG: InstanceConfig =
    InstanceConfig { bytes_per_cpu: 4096, mode: Mode::Overwrite, snapshot: false };

fn tracer() -> &'static Tracer<HostPlatform> {
    static TRACER: OnceLock<&'static Tracer<HostPlatform>> = OnceLock::new();
    TRACER.get_or_init(|| {
        HostPlatform::set_cpu(0);
        let limits = Limits { max_instances: 4, max_total_bytes: 4 << 20 };
        let tracer = Tracer::new(HostPlatform, CPUS, trace::linked_events!(), limits, CONFIG);
        let tracer: &'static Tracer<HostPlatform> = Box::leak(Box::new(tracer.expect("tracer")));
        trace::install(tracer).expect("installed once");
        tracer
    })
}

/// Every event's filter and triggers as their files read them back.
fn hooks(instance: &Instance<'_, HostPlatform>) -> Vec<(Option<String>, Vec<String>)> {
    EVENTS.iter().map(|e| (instance.filter(e), instance.triggers(e))).collect()
}

/// A word from up to eight bytes of `text` from `at`.
fn word(text: &[u8], at: usize) -> u64 {
    let mut bytes = [0u8; 8];
    for (out, b) in bytes.iter_mut().zip(text.iter().skip(at)) {
        *out = *b;
    }
    u64::from_le_bytes(bytes)
}

fn emit(event: usize, text: &[u8]) {
    let (a, b) = (word(text, 0), word(text, 8));
    match event {
        0 => trace::emit!(SMALL, a as u32, b as i64),
        1 => trace::emit!(PAIR, a, b),
        _ => trace::emit!(TEXT, &*String::from_utf8_lossy(text), a as u16),
    }
}

/// The live buffer's events held and read, summed over its CPUs.
fn held_and_read(instance: &Instance<'_, HostPlatform>) -> (u64, u64) {
    (0..CPUS)
        .map(|cpu| instance.stats(cpu).expect("a CPU of the tracer"))
        .fold((0, 0), |(entries, read), s| (entries + s.entries, read + s.read))
}

/// Takes up to `n` records from `instance`'s live buffer as `trace_pipe` does, then
/// drops the reader: exactly the records returned leave the buffer, as read.
fn consume(instance: &Instance<'_, HostPlatform>, n: u64) {
    let (entries, read) = held_and_read(instance);
    let recorder = instance.recorder();
    let Ok(mut reader) = recorder.live().merged_consumer() else { return };
    let mut taken = 0;
    while taken < n && reader.next_record().is_some() {
        taken += 1;
    }
    drop(reader);
    assert_eq!(held_and_read(instance), (entries - taken, read + taken), "{taken} taken");
}

/// Every CPU of `instance`'s live buffer balances, and holds as many records as it
/// counts.
fn check(tracer: &Tracer<HostPlatform>, instance: &Instance<'_, HostPlatform>, line: &[u8]) {
    let mut entries = 0;
    for cpu in 0..CPUS {
        let stats = instance.stats(cpu).expect("a CPU of the tracer");
        assert!(stats.balanced(), "{stats:?} after {line:?}");
        entries += stats.entries;
    }
    let recorder = instance.recorder();
    let Ok(mut iter) = recorder.live().merged_iter() else { return };
    let mut records = 0;
    while let Some(record) = iter.next_record() {
        records += 1;
        let Some(d) = tracer.descriptor(record.id) else { continue };
        let mut out = String::new();
        let _ = trace::event::format::render(&mut out, d.format, d.fields, record.payload, None);
    }
    assert_eq!(records, entries, "records read against entries after {line:?}");
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let tracer = tracer();
    HostPlatform::set_cpu(0);
    // The top level as it was made, so that an input replays alone.
    let top = tracer.top();
    for e in EVENTS {
        top.clear_triggers(e).expect("a known event");
        top.set_filter(e, "0").expect("clearing a filter");
    }
    let _ = top.snapshot_free();
    top.set_mode(CONFIG.mode).expect("a mode");
    top.resize(CONFIG.bytes_per_cpu).expect("room");
    top.set_clock(Clock::Local).expect("a clock");
    top.set_cpumask((1 << CPUS) - 1).expect("thread context");
    top.set_stack_traces(false).expect("thread context");
    top.set_printk(true);
    top.set_tracing(true);
    top.clear().expect("a top-level clear");
    top.set_event(Some("fz"), None, true).expect("known events");
    let x = tracer.get_or_create("x", CONFIG).expect("room for x");
    x.set_event(Some("fz"), None, true).expect("known events");
    drop(x);
    for line in data.split(|&b| b == b'\n') {
        let [op, selector, rest @ ..] = line else { continue };
        let event = usize::from(selector & 0x7f) % EVENTS.len();
        let descriptor = EVENTS[event];
        let instance = match selector & 0x80 {
            0 => tracer.top(),
            _ => match tracer.lookup("x") {
                Ok(x) => x,
                Err(_) if *op == b'N' => tracer.get_or_create("x", CONFIG).expect("room for x"),
                Err(_) => continue,
            },
        };
        let text = String::from_utf8_lossy(rest);
        let (w, on) = (word(rest, 0), rest.first().is_some_and(|b| b & 1 == 1));
        let before = hooks(&instance);
        match op {
            b'f' | b'g' | b't' | b'>' => {
                let refused = match op {
                    b'f' => instance.set_filter(descriptor, &text).is_err(),
                    b'g' => instance.set_system_filter("fz", &text).is_err(),
                    b't' => instance.set_trigger(descriptor, &text).is_err(),
                    _ => instance.set_trigger_truncating(descriptor, &text).is_err(),
                };
                if refused {
                    assert_eq!(hooks(&instance), before, "refused {line:?} changed hooks");
                }
            }
            b'i' => {
                let _ = instance.inject(descriptor, &text);
            }
            b'h' => {
                let mut out = String::new();
                instance.write_hists(descriptor, None, &mut out).expect("a String takes it");
            }
            b'm' => {
                let _ = instance.write_marker(&text);
            }
            b'z' => {
                let _ = instance.resize((w % (1 << 16)) as usize);
            }
            b'Z' => {
                let _ =
                    instance.resize_cpu((w >> 32) as usize % (CPUS + 1), (w % (1 << 16)) as usize);
            }
            b'o' => {
                let _ = instance.set_mode(if on { Mode::Overwrite } else { Mode::Discard });
            }
            b'k' => {
                if let Some(clock) = Clock::from_name(&text) {
                    let _ = instance.set_clock(clock);
                }
            }
            b'u' => {
                let _ = instance.set_cpumask(w);
            }
            b'a' => {
                let _ = instance.snapshot_alloc();
            }
            b'w' => {
                let _ = instance.snapshot_take();
            }
            b'l' => {
                let _ = instance.snapshot_clear();
            }
            b'x' => {
                let _ = instance.snapshot_free();
            }
            b'c' => {
                let _ = instance.clear_cpu(w as usize % (CPUS + 1));
            }
            b'T' => instance.set_tracing(on),
            b'P' => {
                let _ = instance.set_stack_traces(on);
            }
            b'p' => instance.set_printk(on),
            b'D' => {
                let is_x = !instance.is_top_level();
                drop(instance);
                if is_x {
                    tracer.destroy_by_name("x").expect("x exists");
                }
                continue;
            }
            b'C' => HostPlatform::set_cpu(w as usize % CPUS),
            b'q' => consume(&instance, w % 8),
            _ => emit(event, rest),
        }
        check(tracer, &instance, line);
    }
    HostPlatform::set_cpu(0);
    if tracer.lookup("x").is_ok() {
        tracer.destroy_by_name("x").expect("x exists");
    }
});
