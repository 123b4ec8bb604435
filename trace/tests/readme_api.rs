//! The README's in-kernel API example ("The in-kernel API"), kept compiling and true:
//! its declarations and calls as the README shows them, in the same order, around
//! the host scaffolding they assume (a tracer over `HostPlatform`, the snippet's
//! variables), with each claim its comments make checked. Every line of the README's
//! block must be one of this file's (`every_line_of_the_readme_example_is_here`): when
//! the API changes, the README's code block changes with this file. Its own test
//! binary: a tracer is installed once per process.

use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, MutexGuard, OnceLock};
use trace::ring::persist::{HEADER_WORDS, Rejected};
use trace::ring::{Buffer, WriteError};
use trace::{HostPlatform, InstanceConfig, InstanceError, Limits, Mode, Tracer};

// A tracepoint, in any crate: collected by the linker, numbered at boot.
trace::event! {
    /// A link came up.
    pub LINK_UP = "net":"link_up" { port: u8, speed_mbps: u32, name: &str } => "port={port} {speed_mbps} Mb/s {name}";
    /// A transmit starts (a slice in Perfetto, paired by `queue`)...
    pub TX_START = "net":"tx_start" { queue: u16 } => "queue={queue}", begin "tx" key queue;
    /// ... and ends...
    pub TX_DONE = "net":"tx_done" { queue: u16 } => "queue={queue}", end "tx" key queue;
    /// ... and the queue's depth is a counter.
    pub TX_DEPTH = "net":"tx_depth" { depth: u32 } => "depth={depth}", counter;
    /// A stall the driver measured: a slice that ends here and lasted `ns`.
    pub TX_STALL = "net":"tx_stall" { ns: u64 } => "stalled {ns} ns", span "tx stall" duration ns;
    /// A code address: `{ip:sym}` prints `function+0xoffset` (`trace`, `report --elf`, trace-cmd).
    pub TX_TIMEOUT = "net":"tx_timeout" { ip: u64 } => "timeout armed at {ip:sym}";
}

/// The CPUs the tests' tracer has.
const CPUS: usize = 2;
/// The CPU slots of the persistent region (more than the tracer uses).
const MAX_CPUS: usize = 4;
/// The build id a saved trace carries.
const BUILD_ID: u64 = 0x5eed_cafe;

/// What `?` makes of the API's errors in the snippet's functions: every one of them
/// is a `core::error::Error`, as a driver's own error handling expects.
type Failed = Box<dyn std::error::Error>;

/// The value of a snippet's function, or a panic with the error `?` returned.
fn ok<T>(result: Result<T, Failed>) -> T {
    result.unwrap_or_else(|why| panic!("the README's example failed: {why}"))
}

/// One tracer for the test binary (tracepoints dispatch to a global); the tests take
/// turns through the lock.
fn tracer() -> MutexGuard<'static, &'static Tracer<HostPlatform>> {
    static TRACER: OnceLock<Mutex<&'static Tracer<HostPlatform>>> = OnceLock::new();
    let cell = TRACER.get_or_init(|| {
        let limits = Limits { max_instances: 8, max_total_bytes: 4 << 20 };
        let top = InstanceConfig { bytes_per_cpu: 4096, mode: Mode::Overwrite, snapshot: false };
        let events = trace::linked_events!();
        let tracer = Tracer::new(HostPlatform, CPUS, events, limits, top).expect("valid events");
        let tracer = Box::leak(Box::new(tracer));
        trace::install(tracer).expect("first install");
        Mutex::new(tracer)
    });
    cell.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Every record of `buffer`, merged, as `system:name: text`.
fn record_texts(tracer: &Tracer<HostPlatform>, buffer: &Buffer<HostPlatform>) -> Vec<String> {
    let mut records = buffer.merged_iter().expect("memory");
    let mut lines = Vec::new();
    while let Some(record) = records.next_record() {
        lines.push(line(tracer, record.id, record.payload));
    }
    lines
}

/// A record as `system:name: text`.
fn line(tracer: &Tracer<HostPlatform>, id: u16, payload: &[u8]) -> String {
    let descriptor = tracer.descriptor(id).expect("a known id");
    let mut text = format!("{}:{}: ", descriptor.system, descriptor.name);
    let (format, fields) = (descriptor.format, descriptor.fields);
    match descriptor.kind {
        trace::event::DescriptorKind::Event => {
            trace::event::format::render(&mut text, format, fields, payload, None)
        }
        trace::event::DescriptorKind::Printk => {
            trace::event::format::render_tagged(&mut text, format, payload, None)
        }
    }
    .expect("a valid record");
    text
}

/// The lines of `lines` that start with `prefix`.
fn starting<'a>(lines: &'a [String], prefix: &str) -> Vec<&'a str> {
    lines.iter().map(String::as_str).filter(|l| l.starts_with(prefix)).collect()
}

/// The entry lines of a `hist` file.
fn hist_entries(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.starts_with("{ ")).collect()
}

/// The stack trace `options/stacktrace` records after an event (the host platform
/// walks no stack: depth 0).
const STACK: &str = "ftrace:kernel_stack: depth=0 0x0 0x0 0x0 0x0 0x0 0x0 0x0 0x0";

/// Moves the thread's manual clock `ns` on.
fn advance(ns: u64) {
    HostPlatform::set_clock(HostPlatform::clock().expect("the manual clock") + ns);
}

/// The first half of the README's example, from the tracepoint to the instance's
/// removal, each step followed by the check of what its comment says. Not formatted:
/// the README's lines are kept as it shows them.
#[rustfmt::skip]
fn net_driver(tracer: &'static Tracer<HostPlatform>) -> Result<(), Failed> {
    let (port, speed, name) = (1u8, 100u32, "eth0");
    let mut text = String::new();
    let (attempt, micros) = (2u32, 1500u64);
    let bytes = [0xde, 0xad, 0xbe, 0xef];

    let mut evaluated = false;
    trace::emit!(LINK_UP, port, speed, name);   // disabled: a 5-byte NOP (static keys), no argument evaluated
    trace::emit!(LINK_UP, { evaluated = true; port }, speed, name);
    assert!(!evaluated, "a disabled event evaluated an argument");
    assert!(record_texts(tracer, tracer.top().recorder().live()).is_empty(), "nothing recorded");

    // Instances, as Linux's trace_array_*: a driver keeps its own buffer.
    let tr = tracer.get_or_create("net", InstanceConfig { bytes_per_cpu: 64 << 10, mode: Mode::Overwrite, snapshot: true })?;
    assert!(tr.has_snapshot() && tr.bytes_per_cpu() == 64 << 10);
    tr.set_event(Some("net"), None, true)?;        // None = all; globs allowed
    assert!(tracer.events().iter().filter(|d| d.system == "net").all(|d| tr.event_enabled(d)));
    assert_eq!(tr.set_event(Some("n?t"), Some("tx_*"), true), Ok(5), "globs: the five tx_ events");
    let live = |tr: &trace::Instance<'_, HostPlatform>| record_texts(tracer, tr.recorder().live());
    let snapshot = |tr: &trace::Instance<'_, HostPlatform>| {
        record_texts(tracer, tr.recorder().snapshot().expect("a snapshot buffer"))
    };

    tr.set_filter(LINK_UP.descriptor(), "speed_mbps < 1000 && name ~ \"eth*\"")?;  // ftrace's filter syntax
    trace::emit!(LINK_UP, port, speed, name);
    trace::emit!(LINK_UP, 2u8, 1000u32, "eth1");
    trace::emit!(LINK_UP, 4u8, 10u32, "wlan0");
    trace::emit!(LINK_UP, 5u8, 999u32, "eth5");
    assert_eq!(
        live(&tr),
        ["net:link_up: port=1 100 Mb/s eth0", "net:link_up: port=5 999 Mb/s eth5"],
        "the filter keeps the LINK_UP events it matches, only"
    );

    tr.set_trigger(LINK_UP.descriptor(), "snapshot:1 if port == 3")?;              // ftrace's trigger syntax
    trace::emit!(LINK_UP, 2u8, 10u32, "eth2");
    assert!(snapshot(&tr).is_empty(), "port 2: no snapshot");
    tr.inject(LINK_UP.descriptor(), "port=3 speed_mbps=100 name=eth0")?;   // the event by hand (its `inject` file)
    let window = [
        "net:link_up: port=1 100 Mb/s eth0",
        "net:link_up: port=5 999 Mb/s eth5",
        "net:link_up: port=2 10 Mb/s eth2",
        "net:link_up: port=3 100 Mb/s eth0",
    ];
    assert_eq!(snapshot(&tr), window, "the injected event was recorded, and port 3 snapshot");
    assert!(live(&tr).is_empty(), "recording went on in the other buffer");
    assert_eq!(tr.triggers(LINK_UP.descriptor()), ["snapshot:count=0 if port == 3"]);
    tr.inject(LINK_UP.descriptor(), "port=4 speed_mbps=10 name=wlan0")?;
    assert!(live(&tr).is_empty(), "the filter judges an injected event too");
    trace::emit!(LINK_UP, 3u8, 10u32, "eth3");
    assert_eq!(snapshot(&tr), window, "snapshot:1 snapshots once");
    assert_eq!(live(&tr), ["net:link_up: port=3 10 Mb/s eth3"]);

    tr.set_stack_traces(true)?;                     // options/stacktrace: who hit each event
    assert!(tr.stack_traces());
    trace::emit!(LINK_UP, 6u8, 10u32, "eth6");
    trace::emit!(LINK_UP, 6u8, 10u32, "wlan6");
    assert_eq!(
        live(&tr)[1..],
        ["net:link_up: port=6 10 Mb/s eth6", STACK],
        "a stack trace after each event recorded (none after one filtered out)"
    );

    tr.set_trigger(LINK_UP.descriptor(), "hist:keys=port:vals=speed_mbps")?;      // a histogram...
    for (port, speed, name) in [(7u8, 100u32, "eth7"), (8, 10, "eth8"), (7, 200, "eth7")] {
        trace::emit!(LINK_UP, port, speed, name);
    }
    tr.write_hists(LINK_UP.descriptor(), None, &mut text)?;   // ...as its `hist` file shows it (None: no symbols)
    assert!(text.contains("# trigger info: hist:keys=port:vals=hitcount,speed_mbps:"), "{text}");
    assert_eq!(
        hist_entries(&text),
        [
            "{ port:          8 } hitcount:          1  speed_mbps:         10",
            "{ port:          7 } hitcount:          2  speed_mbps:        300",
        ],
        "{text}"
    );

    tr.set_trigger(TX_START.descriptor(), "hist:keys=queue:t0=common_timestamp")?;    // a variable per queue...
    tr.set_trigger(TX_DONE.descriptor(), "hist:keys=queue:tx=common_timestamp-$t0:vals=$tx:onmax($tx).snapshot()")?;  // ...each transmit's time, the slowest kept
    for (queue, ns) in [(0u16, 100), (1, 5000), (0, 200)] {
        trace::emit!(TX_START, queue);
        advance(ns);
        trace::emit!(TX_DONE, queue);
    }
    let mut tx = String::new();
    tr.write_hists(TX_DONE.descriptor(), None, &mut tx)?;
    // The manual clock moves on by one at each reading: a transmit takes its time,
    // and the three readings of its two events.
    assert_eq!(
        tx.lines().filter(|l| l.starts_with("{ ") || l.starts_with("\tmax:")).collect::<Vec<_>>(),
        [
            "{ queue:          1 } hitcount:          1  tx:       5003",
            "\tmax:       5003",
            "{ queue:          0 } hitcount:          2  tx:        306",
            "\tmax:        203",
        ],
        "an entry per queue, its transmits' time summed, the longest kept: {tx}"
    );
    assert!(tx.contains("\ttriggering value { onmax($tx) }:       5003\ttriggered by event with key: { queue:          1 }\n"), "{tx}");
    let slowest = starting(&snapshot(&tr), "net:tx_").into_iter().map(String::from).collect::<Vec<_>>();
    assert_eq!(
        slowest,
        ["net:tx_start: queue=1", "net:tx_done: queue=1"],
        "the onmax snapshot holds the slowest transmit's events"
    );

    trace::printk!(tr, "reconnect {} took {} us", attempt, micros);   // format interned, args raw
    tr.write_marker("reset done")?;                 // trace_marker (a long text is split, never cut)
    tr.write_marker_raw(0x42, &bytes)?;             // trace_marker_raw: an id and up to 80 bytes
    let recent = live(&tr);
    assert_eq!(
        recent[recent.len() - 4..],
        [
            "ftrace:bprint: reconnect 2 took 1500 us",
            STACK,
            "ftrace:print: reset done",
            "ftrace:raw_data: # 42 buf: de ad be ef",
        ]
    );
    let long: String = (0..600).map(|i| if i % 5 == 0 { 'é' } else { 'x' }).collect();
    tr.write_marker(&long)?;
    let recent = live(&tr);
    let parts: Vec<&str> = recent[recent.len() - 3..]
        .iter()
        .map(|l| l.strip_prefix("ftrace:print: ").expect("a marker"))
        .collect();
    assert!(parts.iter().all(|p| !p.is_empty()));
    assert_eq!(parts.concat(), long, "a long marker is split, never cut");
    assert_eq!(tr.write_marker_raw(0x42, &[0xff; 81]), Err(WriteError::TooLarge), "81 bytes");
    assert_eq!(live(&tr), recent, "a refused raw marker records nothing");
    tr.write_marker_raw(0x42, &[0xff; 80])?;
    let full = format!("ftrace:raw_data: # 42 buf:{}", " ff".repeat(80));
    assert_eq!(live(&tr).last(), Some(&full), "80 bytes are taken");

    tr.set_event(None, None, false)?;               // at the right moment...
    let before = live(&tr);
    tr.snapshot_take()?;                            // ...keep the window; recording goes on
    assert_eq!(snapshot(&tr), before, "the snapshot holds the window");
    tr.write_marker("after the snapshot")?;
    assert_eq!(snapshot(&tr), before, "the window stays");
    assert_eq!(live(&tr).last().map(String::as_str), Some("ftrace:print: after the snapshot"));
    let now = live(&tr);
    trace::emit!(LINK_UP, 1u8, 10u32, "eth1");
    assert_eq!(live(&tr), now, "the events are off");

    let mut read = Vec::new();
    let recorder = tr.recorder();                   // readers: iterators and consumers
    let mut it = recorder.snapshot().unwrap().merged_iter()?;
    while let Some(r) = it.next_record() { /* r.cpu, r.ts, r.id, r.payload */ read.push((r.cpu, r.ts, line(tracer, r.id, r.payload))); }
    assert_eq!(read.iter().map(|r| r.2.clone()).collect::<Vec<_>>(), before, "every record");
    assert!(read.is_sorted_by_key(|r| r.1), "in timestamp order");
    assert!(read.iter().all(|r| r.0 < CPUS));
    let mut out = String::new();
    let mut lines = trace::tracer::TraceWriter::new(tracer, trace::text::Layout::DEFAULT);  // or as the `trace` file's lines
    let mut it = recorder.live().merged_iter()?;
    while let Some(r) = it.next_record() { lines.write(&mut out, &r)?; }
    lines.finish(&mut out)?;                        // a function_graph entry waits for its return: finish writes it
    assert_eq!(out.lines().count(), live(&tr).len(), "a line per record:\n{out}");
    let last = out.lines().last().unwrap_or_default();
    assert!(last.contains("] ....") && last.ends_with(": tracing_mark_write: after the snapshot"), "{out}");

    assert_eq!(tracer.destroy_by_name("net"), Err(InstanceError::Busy), "tr is held");
    assert!(tracer.lookup("net").is_ok(), "a busy destroy changes nothing");
    drop(tr);                                       // trace_array_put
    tracer.destroy_by_name("net")?;                 // Busy while an Instance of it is held (readers keep their buffers)
    assert!(matches!(tracer.lookup("net"), Err(InstanceError::NotFound)));
    let kept = record_texts(tracer, recorder.snapshot().unwrap());
    assert_eq!(kept, before, "a reader keeps its buffers past the instance");
    Ok(())
}

#[test]
fn the_in_kernel_api_example_does_what_its_comments_say() {
    let tracer = tracer();
    HostPlatform::set_clock(1_000);
    ok(net_driver(&tracer));
}

/// One boot of the README's persistent region, over `words` (the same on every boot).
/// Returns the instance `boot_map`'s records as this boot saved them. Not formatted,
/// as [`net_driver`].
#[rustfmt::skip]
fn boot(tracer: &'static Tracer<HostPlatform>, words: &'static [AtomicU64], markers: &[&str]) -> Result<Vec<String>, Failed> {
    let (platform, cpus) = (HostPlatform, tracer.cpus());

    // A trace that survives a warm reboot, over memory the kernel lends ('static words).
    let region = trace::ring::persist::Region::new(words, MAX_CPUS)?;
    match region.validate(BUILD_ID) {                // never panics, whatever the words hold
        Ok(saved) => { tracer.create_over("last_boot", region.restore(&saved, platform)?)?; }
        Err(why) => println!("previous trace: {why}"),  // why.is_absent(): nothing was saved
    }
    region.forget();
    let boot_map = tracer.create_over("boot_map", Buffer::over(platform, Mode::Overwrite, region.rings(cpus))?)?;
    assert_eq!(Buffer::over(platform, Mode::Overwrite, region.rings(cpus)).err(), Some(trace::Error::Lent));  // lent words back one ring at a time
    markers.iter().try_for_each(|m| boot_map.write_marker(m))?;
    boot_map.set_event(Some("net"), Some("link_up"), true)?;
    trace::emit!(LINK_UP, 9u8, 40u32, "boot");
    let recorded = record_texts(tracer, boot_map.recorder().live());
    region.save(boot_map.recorder().live(), BUILD_ID)?;   // at reboot or panic, other CPUs stopped

    assert!(!boot_map.tracing(), "saving stops the set");
    let saved = region.validate(BUILD_ID).map_err(|why| format!("just saved: {why}"))?;
    assert_eq!(saved.events(), recorded.len() as u64);
    boot_map.set_event(None, None, false)?;
    drop(boot_map);
    // The reboot: the instance goes, the words stay.
    tracer.destroy_by_name("boot_map")?;
    Ok(recorded)
}

#[test]
fn the_persistent_region_gives_the_next_boot_what_this_one_saved() {
    let tracer = tracer();
    let words: &'static [AtomicU64] =
        Box::leak((0..HEADER_WORDS + MAX_CPUS * 1024).map(|_| AtomicU64::new(0)).collect());
    let region = ok(trace::ring::persist::Region::new(words, MAX_CPUS).map_err(Failed::from));
    let never_saved = region.validate(BUILD_ID);
    assert_eq!(never_saved, Err(Rejected::Absent));
    assert!(never_saved.unwrap_err().is_absent());

    let first = ok(boot(&tracer, words, &["first boot"]));
    assert_eq!(first, ["ftrace:print: first boot", "net:link_up: port=9 40 Mb/s boot"]);
    assert!(
        matches!(tracer.lookup("last_boot"), Err(InstanceError::NotFound)),
        "nothing was saved before the first boot"
    );
    assert_eq!(
        region.validate(BUILD_ID + 1).unwrap_err(),
        Rejected::OtherBuild { saved: BUILD_ID },
        "another build's trace"
    );

    let second = ok(boot(&tracer, words, &["second boot"]));
    let last_boot = tracer.lookup("last_boot").expect("the previous boot's trace");
    assert_eq!(
        record_texts(&tracer, last_boot.recorder().live()),
        first,
        "the first boot's records"
    );
    assert!(!last_boot.tracing(), "a restored trace records nothing more");
    assert_eq!(second, ["ftrace:print: second boot", "net:link_up: port=9 40 Mb/s boot"]);
    drop(last_boot);
    ok(tracer.destroy_by_name("last_boot").map_err(Failed::from));

    // A damaged trace is refused, not absent, and reading it never panics.
    words[HEADER_WORDS].fetch_xor(1, std::sync::atomic::Ordering::Relaxed);
    let damaged = region.validate(BUILD_ID).unwrap_err();
    assert!(!damaged.is_absent(), "{damaged}");
}

/// Every line of the README's example is one of this file's (leading spaces aside;
/// the loop's `/* ... */` body stands for what the test does with each record): the
/// example cannot drift from the code the tests above run.
#[test]
fn every_line_of_the_readme_example_is_here() {
    let readme = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"));
    let this = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/readme_api.rs"));
    let (_, section) = readme.split_once("\n## The in-kernel API\n").expect("the section");
    let (_, block) = section.split_once("```rust\n").expect("its code block");
    let (example, _) = block.split_once("```").expect("the block's end");
    let ours: Vec<&str> = this.lines().map(str::trim).collect();
    let missing: Vec<&str> = example
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .filter(|line| match line.strip_suffix("*/ }") {
            Some(open) => !ours.iter().any(|l| l.starts_with(open) && l.contains("*/")),
            None => !ours.contains(line),
        })
        .collect();
    assert!(missing.is_empty(), "README lines this test does not run: {missing:#?}");
}
