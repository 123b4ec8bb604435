//! Tracepoints, the linker section, instances and snapshots, on the host.

use std::sync::{Mutex, MutexGuard};
use trace::ring::Buffer;
use trace::tracer::{HistReason, HookError, TriggerError, TriggerReason};
use trace::{
    HostPlatform, InstanceConfig, InstanceError, Limits, Mode, Tracer, event::EventDescriptor,
};

trace::event! {
    /// A test event with two integers.
    pub TICK = "test":"tick" { count: u64, late_ns: u64 } => "count={count} late={late_ns}ns";
    /// A test event with every kind of field.
    pub EVERYTHING = "test":"everything" {
        a: u8, b: i16, c: u32, d: i64, e: bool, f: char, g: [u8; 4], h: &str,
    } => "a={a} b={b} c={c:#x} d={d} e={e} f={f} g={g} h={h}";
    /// A noisy event.
    pub NOISE = "noise":"burst" { n: u32 } => "n={}";
    /// A string, and fields after it.
    pub LONG = "test":"long" { name: &str, n: u64, tail: &str } => "name={name} n={n} tail={tail}";
}

/// The descriptors the linker collected in this test binary.
fn section() -> &'static [&'static EventDescriptor] {
    trace::linked_events!()
}

/// One tracer for the whole test binary (tracepoints dispatch to a global); tests
/// take turns through the lock.
fn tracer() -> MutexGuard<'static, &'static Tracer<HostPlatform>> {
    static TRACER: std::sync::OnceLock<Mutex<&'static Tracer<HostPlatform>>> =
        std::sync::OnceLock::new();
    let cell = TRACER.get_or_init(|| {
        let limits = Limits { max_instances: 8, max_total_bytes: 4 << 20 };
        let top = InstanceConfig { bytes_per_cpu: 4096, mode: Mode::Overwrite, snapshot: false };
        let tracer = Box::leak(Box::new(
            Tracer::new(HostPlatform, 2, section(), limits, top).expect("tracer"),
        ));
        trace::install(tracer).expect("first install");
        Mutex::new(tracer)
    });
    cell.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Renders every record of an instance's live buffer, merged.
fn rendered(
    tracer: &Tracer<HostPlatform>,
    instance: &trace::Instance<'_, HostPlatform>,
) -> Vec<String> {
    rendered_buffer(tracer, instance.recorder().live())
}

/// Renders every record of a buffer set, merged.
fn rendered_buffer(tracer: &Tracer<HostPlatform>, buffer: &Buffer<HostPlatform>) -> Vec<String> {
    let mut merged = buffer.merged_iter().expect("iterator");
    let mut lines = Vec::new();
    while let Some(record) = merged.next_record() {
        let descriptor = tracer.descriptor(record.id).expect("known id");
        let mut text = format!("{}:{}: ", descriptor.system, descriptor.name);
        match descriptor.kind {
            trace::event::DescriptorKind::Event => trace::event::format::render(
                &mut text,
                descriptor.format,
                descriptor.fields,
                record.payload,
                None,
            )
            .unwrap(),
            trace::event::DescriptorKind::Printk => trace::event::format::render_tagged(
                &mut text,
                descriptor.format,
                record.payload,
                None,
            )
            .unwrap(),
        }
        lines.push(text);
    }
    lines
}

#[test]
fn the_section_holds_every_descriptor_and_ids_are_assigned_in_name_order() {
    let tracer = tracer();
    let names: Vec<String> =
        tracer.events().iter().map(|d| format!("{}:{}", d.system, d.name)).collect();
    for name in ["test:tick", "test:everything", "noise:burst", "ftrace:print", "log:message"] {
        assert!(names.contains(&name.to_string()), "{name} not found in {names:?}");
    }
    for (i, descriptor) in tracer.events().iter().enumerate() {
        assert_eq!(usize::from(descriptor.id()), i + 1);
        assert_eq!(
            tracer.descriptor(descriptor.id()).map(|d| d as *const _),
            Some(*descriptor as *const _)
        );
    }
    let mut sorted = tracer.events().to_vec();
    sorted.sort_by_key(|d| (d.system, d.name));
    assert!(sorted.iter().zip(tracer.events()).all(|(a, b)| std::ptr::eq(*a, *b)));
}

#[test]
fn a_disabled_event_evaluates_no_argument() {
    let _tracer = tracer();
    let mut evaluated = false;
    trace::emit!(
        TICK,
        {
            evaluated = true;
            1u64
        },
        2u64
    );
    assert!(!evaluated, "the argument of a disabled event was evaluated");
}

#[test]
fn an_event_is_recorded_only_in_the_instances_that_enabled_it() {
    let tracer = tracer();
    let a = tracer
        .get_or_create("a", InstanceConfig { bytes_per_cpu: 4096, ..Default::default() })
        .unwrap();
    let b = tracer
        .get_or_create("b", InstanceConfig { bytes_per_cpu: 4096, ..Default::default() })
        .unwrap();
    assert_eq!(a.set_event(Some("test"), Some("tick"), true), Ok(1));
    assert_eq!(b.set_event(Some("noise"), None, true), Ok(1));
    trace::emit!(TICK, 7u64, 250u64);
    trace::emit!(NOISE, 3u32);
    assert_eq!(rendered(&tracer, &a), ["test:tick: count=7 late=250ns"]);
    assert_eq!(rendered(&tracer, &b), ["noise:burst: n=3"]);
    assert!(rendered(&tracer, &tracer.top()).is_empty(), "the top-level instance enabled nothing");
    a.set_event(None, None, false).unwrap();
    b.set_event(None, None, false).unwrap();
    tracer.destroy(a).unwrap();
    tracer.destroy(b).unwrap();
}

#[test]
fn a_noisy_event_cannot_overwrite_another_instances_records() {
    let tracer = tracer();
    let quiet = tracer
        .get_or_create("quiet", InstanceConfig { bytes_per_cpu: 4096, ..Default::default() })
        .unwrap();
    let noisy = tracer
        .get_or_create("noisy", InstanceConfig { bytes_per_cpu: 4096, ..Default::default() })
        .unwrap();
    quiet.set_event(Some("test"), Some("tick"), true).unwrap();
    noisy.set_event(Some("noise"), Some("burst"), true).unwrap();
    trace::emit!(TICK, 1u64, 0u64);
    for n in 0..10_000u32 {
        trace::emit!(NOISE, n);
    }
    assert_eq!(rendered(&tracer, &quiet), ["test:tick: count=1 late=0ns"]);
    let stats = noisy.stats(0).unwrap();
    assert!(stats.overrun > 0 && stats.balanced(), "{stats:?}");
    quiet.set_event(None, None, false).unwrap();
    noisy.set_event(None, None, false).unwrap();
    tracer.destroy(quiet).unwrap();
    tracer.destroy(noisy).unwrap();
}

#[test]
fn every_field_kind_round_trips_through_the_format_string() {
    let tracer = tracer();
    let top = tracer.top();
    top.set_event(Some("test"), Some("everything"), true).unwrap();
    trace::emit!(
        EVERYTHING,
        200u8,
        -3i16,
        0xbeefu32,
        -40i64,
        true,
        'λ',
        [1u8, 2, 0xab, 0xff],
        "héllo"
    );
    top.set_event(None, None, false).unwrap();
    let lines = rendered(&tracer, &top);
    top.set_tracing(false);
    top.clear().unwrap();
    top.set_tracing(true);
    assert_eq!(lines, ["test:everything: a=200 b=-3 c=0xbeef d=-40 e=true f=λ g=0102abff h=héllo"]);
}

/// A string longer than the record cuts to leave the fields after it their room:
/// the number after it is kept, the string after it cut to nothing (as `printk!`).
#[test]
fn an_events_long_string_is_cut_and_the_fields_after_it_kept() {
    let tracer = tracer();
    let config = InstanceConfig { bytes_per_cpu: 4096, ..Default::default() };
    let instance = tracer.get_or_create("long", config).unwrap();
    instance.set_event(Some("test"), Some("long"), true).unwrap();
    let long = "y".repeat(400);
    trace::emit!(LONG, long.as_str(), 7u64, "end");
    // The number's 8 bytes and the last string's length take their room first.
    let kept = trace::event::MAX_EVENT_PAYLOAD - (2 + 8 + 2);
    assert_eq!(
        rendered(&tracer, &instance),
        [format!("test:long: name={} n=7 tail=", &long[..kept])]
    );
    trace::emit!(LONG, "short", 8u64, "end");
    assert_eq!(rendered(&tracer, &instance)[1], "test:long: name=short n=8 tail=end");
    tracer.destroy(instance).unwrap();
}

#[test]
fn printk_cuts_a_long_string_and_keeps_the_arguments_after_it() {
    let tracer = tracer();
    let instance = tracer
        .get_or_create("printk-long", InstanceConfig { bytes_per_cpu: 4096, ..Default::default() })
        .unwrap();
    let long = "x".repeat(400);
    let mut evaluated = 0;
    let mut next = || {
        evaluated += 1;
        7u64
    };
    // A temporary `String` lives while every argument is recorded.
    let recorded = trace::printk!(
        instance,
        "{} then {} and {} at {}",
        long.clone().as_str(),
        next(),
        'λ',
        "end".to_string().as_str()
    );
    assert_eq!(evaluated, 1, "each argument is evaluated once");
    // The payload is full: the tags, the fixed values and the last string's length
    // take their bytes first, the long string the rest, and the string after it is
    // cut to nothing (as a message too long is cut at its end).
    assert_eq!(recorded, trace::event::MAX_EVENT_PAYLOAD);
    let kept = trace::event::MAX_EVENT_PAYLOAD - (3 + 9 + 5 + 3);
    let expected = format!("ftrace:bprint: {} then 7 and λ at ", &long[..kept]);
    assert_eq!(rendered(&tracer, &instance), [expected]);
    instance.set_printk(false);
    assert_eq!(trace::printk!(instance, "dropped {}", 1u32), 0, "nothing recorded");
    // A descriptor the caller made, not a linked `printk!` site, records nothing
    // (it was recorded as event 0, which readers named `unknown_event`).
    instance.set_printk(true);
    static MINE: EventDescriptor = EventDescriptor::new(
        "ftrace",
        "bprint",
        "mine {}",
        &[],
        trace::event::DescriptorKind::Printk,
    );
    assert_eq!(instance.printk(&MINE, |e| trace::field::Sink::put_str(e, "x")), 0);
    assert_eq!(rendered(&tracer, &instance).len(), 1, "only the first line");
}

#[test]
fn printk_interns_the_format_and_stores_arguments_raw() {
    let tracer = tracer();
    let instance = tracer
        .get_or_create("printk", InstanceConfig { bytes_per_cpu: 4096, ..Default::default() })
        .unwrap();
    assert!(instance.printk_enabled(), "on when the instance is created");
    trace::printk!(instance, "reconnect {} took {:#x} ns on {}", 3u32, 255u64, "eth0");
    // The trace_printk option off: printk! records nothing there.
    instance.set_printk(false);
    trace::printk!(instance, "dropped {}", 1u32);
    instance.write_marker("hello from the marker").unwrap();
    // With `options/stacktrace`, a stack trace after a printk line, as ftrace's after
    // trace_printk's, and none after a marker (the host has no unwinder: depth 0).
    instance.set_printk(true);
    instance.set_stack_traces(true).unwrap();
    trace::printk!(instance, "stacked {}", 2u32);
    instance.write_marker("not stacked").unwrap();
    instance.set_stack_traces(false).unwrap();
    trace::printk!(instance, "not stacked {}", 3u32);
    assert_eq!(
        rendered(&tracer, &instance),
        [
            "ftrace:bprint: reconnect 3 took 0xff ns on eth0",
            "ftrace:print: hello from the marker",
            "ftrace:bprint: stacked 2",
            "ftrace:kernel_stack: depth=0 0x0 0x0 0x0 0x0 0x0 0x0 0x0 0x0",
            "ftrace:print: not stacked",
            "ftrace:bprint: not stacked 3",
        ]
    );
    tracer.destroy(instance).unwrap();
}

#[test]
fn snapshot_keeps_the_window_while_recording_goes_on() {
    let tracer = tracer();
    let instance = tracer
        .get_or_create("snap", InstanceConfig { bytes_per_cpu: 4096, ..Default::default() })
        .unwrap();
    instance.set_event(Some("test"), Some("tick"), true).unwrap();
    trace::emit!(TICK, 1u64, 0u64);
    trace::emit!(TICK, 2u64, 0u64);
    assert!(!instance.has_snapshot());
    instance.snapshot_take().unwrap();
    assert!(instance.has_snapshot());
    trace::emit!(TICK, 3u64, 0u64);
    let recorder = instance.recorder();
    let snapshot = recorder.snapshot().expect("a snapshot");
    let mut counts = Vec::new();
    let mut iter = snapshot.merged_iter().unwrap();
    while let Some(record) = iter.next_record() {
        counts.push(u64::from_le_bytes(record.payload[..8].try_into().unwrap()));
    }
    assert_eq!(counts, [1, 2], "the snapshot holds the window at the moment it was taken");
    assert_eq!(rendered(&tracer, &instance), ["test:tick: count=3 late=0ns"], "recording went on");
    drop(recorder);
    instance.snapshot_clear().unwrap();
    assert_eq!(instance.recorder().snapshot().unwrap().merged_iter().unwrap().next_record(), None);
    instance.snapshot_free().unwrap();
    assert!(!instance.has_snapshot());
    instance.set_event(None, None, false).unwrap();
    tracer.destroy(instance).unwrap();
}

#[test]
fn misuse_gets_typed_errors_and_changes_nothing() {
    let tracer = tracer();
    let config = InstanceConfig { bytes_per_cpu: 4096, ..Default::default() };
    for bad in ["", ".", "..", "has space", "slash/name", &"x".repeat(33)] {
        assert_eq!(
            tracer.get_or_create(bad, config).err(),
            Some(InstanceError::InvalidName),
            "{bad:?}"
        );
    }
    let held = tracer.get_or_create("held", config).unwrap();
    let again = tracer.get_or_create("held", config).unwrap();
    // A refused destroy gives the reference back, still the caller's to use.
    let refused = tracer.destroy(again).expect_err("a second reference is held");
    assert_eq!(refused.error, InstanceError::Busy);
    assert!(tracer.lookup("held").is_ok(), "a busy destroy changes nothing");
    let again = refused.instance;
    assert_eq!(again.name(), "held");
    assert_eq!(held.set_event(Some("nosuch"), None, true), Err(InstanceError::NoSuchEvent));
    let huge = InstanceConfig { bytes_per_cpu: 64 << 20, ..config };
    assert_eq!(tracer.get_or_create("huge", huge).err(), Some(InstanceError::MemoryLimit));
    assert!(matches!(tracer.lookup("huge"), Err(InstanceError::NotFound)));
    assert_eq!(tracer.destroy(tracer.top()).map_err(|e| e.error), Err(InstanceError::TopLevel));
    assert_eq!(held.resize(64 << 20), Err(InstanceError::MemoryLimit));
    assert_eq!(held.bytes_per_cpu(), 4096, "a refused resize changes nothing");
    drop(held);
    tracer.destroy(again).unwrap();
    assert_eq!(tracer.destroy_by_name("held"), Err(InstanceError::NotFound));
    let (used, _) = tracer.memory().unwrap();
    let names = tracer.instance_names().unwrap();
    let mut made = Vec::new();
    let error = loop {
        match tracer.get_or_create(&format!("n{}", made.len()), config) {
            Ok(instance) => made.push(instance),
            Err(e) => break e,
        }
    };
    assert_eq!(error, InstanceError::TooManyInstances);
    for instance in made {
        tracer.destroy(instance).unwrap();
    }
    assert_eq!(tracer.memory().unwrap().0, used, "destroying returns the memory");
    assert_eq!(tracer.instance_names().unwrap(), names);
}

#[test]
fn the_log_bridge_records_log_calls() {
    let tracer = tracer();
    let _ = log::set_logger(&trace::event::log::LOGGER);
    log::set_max_level(log::LevelFilter::Trace);
    let top = tracer.top();
    top.set_event(Some("log"), None, true).unwrap();
    log::info!(target: "net", "link {} up", 2);
    top.set_event(None, None, false).unwrap();
    let lines = rendered(&tracer, &top);
    top.set_tracing(false);
    top.clear().unwrap();
    top.set_tracing(true);
    assert_eq!(lines, ["log:message: INFO net: link 2 up"]);
}

#[test]
fn string_fields_take_strings_of_any_lifetime() {
    let tracer = tracer();
    let top = tracer.top();
    top.set_event(Some("test"), Some("everything"), true).unwrap();
    let owned = String::from("made at run time");
    trace::emit!(EVERYTHING, 1u8, 2i16, 3u32, 4i64, false, 'x', [0u8; 4], owned.as_str());
    top.set_event(None, None, false).unwrap();
    let lines = rendered(&tracer, &top);
    top.set_tracing(false);
    top.clear().unwrap();
    top.set_tracing(true);
    assert_eq!(
        lines,
        ["test:everything: a=1 b=2 c=0x3 d=4 e=false f=x g=00000000 h=made at run time"]
    );
}

/// trace_marker's event in an instance: recorded whatever `set_event` says (which
/// refuses to turn it off), its filter applied, and its `snapshot` trigger swapping
/// buffers at each marker, as Linux's `trigger-trace-marker-snapshot.tc` expects:
/// the odd markers end in the live buffer, the even ones in the snapshot. The
/// `stacktrace` trigger's event takes no filter.
#[test]
fn markers_are_always_recorded_and_take_filters_and_triggers() {
    let tracer = tracer();
    let event =
        |name| *tracer.events().iter().find(|d| d.system == "ftrace" && d.name == name).unwrap();
    let (marker, stack) = (event("print"), event("kernel_stack"));
    let m = tracer.get_or_create("markers", InstanceConfig::default()).unwrap();
    let markers = |buffer: &Buffer<HostPlatform>| -> Vec<String> {
        let lines = rendered_buffer(&tracer, buffer);
        lines
            .into_iter()
            .filter_map(|l| l.strip_prefix("ftrace:print: ").map(String::from))
            .collect()
    };
    m.write_marker("a").unwrap();
    assert_eq!(
        m.set_event(Some("ftrace"), Some("print"), false),
        Err(InstanceError::WrittenByTracer)
    );
    m.set_event(None, None, false).unwrap();
    m.write_marker("b").unwrap();
    assert_eq!(markers(m.recorder().live()), ["a", "b"]);

    m.set_filter(marker, "buf ~ \"keep*\"").unwrap();
    m.write_marker("keep 1").unwrap();
    m.write_marker("drop 1").unwrap();
    assert_eq!(markers(m.recorder().live()), ["a", "b", "keep 1"]);
    m.set_filter(marker, "0").unwrap();

    m.clear().unwrap();
    m.set_trigger(marker, "snapshot").unwrap();
    assert!(m.has_snapshot());
    (1..=10).for_each(|i| m.write_marker(&format!("hello >{i}<")).unwrap());
    let recorder = m.recorder();
    let odd: Vec<String> = (1..=10).step_by(2).map(|i| format!("hello >{i}<")).collect();
    let even: Vec<String> = (2..=10).step_by(2).map(|i| format!("hello >{i}<")).collect();
    assert_eq!(markers(recorder.live()), odd);
    assert_eq!(markers(recorder.snapshot().unwrap()), even);
    drop(recorder);

    let refused = Err(HookError::Instance(InstanceError::WrittenByTracer));
    assert_eq!(m.set_filter(stack, "depth > 1"), refused);

    // A marker longer than an event holds is split, never cut (multi-byte
    // characters kept whole).
    m.set_trigger(marker, "!snapshot").unwrap();
    m.clear().unwrap();
    let long: String = (0..300).map(|i| if i % 7 == 0 { 'é' } else { 'x' }).collect();
    m.write_marker(&long).unwrap();
    let parts = markers(m.recorder().live());
    assert!(parts.len() > 1, "{parts:?}");
    assert_eq!(parts.concat(), long);
    m.write_marker("").unwrap();
    assert_eq!(markers(m.recorder().live()).last().map(String::as_str), Some(""));

    // Raw markers too: recorded, filtered, the data as hex.
    let raw = event("raw_data");
    m.clear().unwrap();
    m.set_filter(raw, "id == 7").unwrap();
    m.write_marker_raw(7, &[0xab, 0x01]).unwrap();
    m.write_marker_raw(8, &[0xcd]).unwrap();
    let too_long = [0u8; trace::tracer::MAX_RAW_MARKER + 1];
    assert_eq!(m.write_marker_raw(7, &too_long), Err(trace::ring::WriteError::TooLarge));
    assert_eq!(rendered(&tracer, &m), ["ftrace:raw_data: # 7 buf: ab 01"]);
    tracer.destroy(m).unwrap();
}

/// `write_hists` as a string.
fn hists(instance: &trace::Instance<'_, HostPlatform>, event: &EventDescriptor) -> String {
    let mut out = String::new();
    instance.write_hists(event, None, &mut out).unwrap();
    out
}

/// The entry lines of a `hist` file.
fn hist_entries(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.starts_with("{ ")).collect()
}

/// `hist` triggers, as `Documentation/trace/histogram.rst` and Linux's
/// `trigger-hist.tc` use them: a key, compound keys, string keys, values summed,
/// sort, `.hex` and `.log2`, a filter, pause, continue, clear, removal; on an event
/// the instance does not record, as a histogram on a disabled event in Linux.
#[test]
fn hist_triggers_count_by_key_and_read_as_ftrace_shows_them() {
    let tracer = tracer();
    let h = tracer.get_or_create("hist", InstanceConfig::default()).unwrap();
    h.set_event(None, None, false).unwrap();
    let tick = |count: u64, late_ns: u64| trace::emit!(TICK, count, late_ns);
    let everything = |c: u32, d: i64, h: &str| {
        trace::emit!(EVERYTHING, 1u8, 2i16, c, d, false, 'x', [0u8; 4], h)
    };

    h.set_trigger(TICK.descriptor(), "hist:keys=count:vals=late_ns").unwrap();
    assert_eq!(
        h.triggers(TICK.descriptor()),
        ["hist:keys=count:vals=hitcount,late_ns:sort=hitcount:size=2048 [active]"]
    );
    for (count, late) in [(3, 10), (1, 5), (3, 20), (2, 1), (3, 30), (1, 5)] {
        tick(count, late);
    }
    let text = hists(&h, TICK.descriptor());
    assert!(text.starts_with(
        "# event histogram\n#\n# trigger info: \
         hist:keys=count:vals=hitcount,late_ns:sort=hitcount:size=2048 [active]\n#\n\n"
    ));
    assert_eq!(
        hist_entries(&text),
        [
            "{ count:          2 } hitcount:          1  late_ns:          1",
            "{ count:          1 } hitcount:          2  late_ns:         10",
            "{ count:          3 } hitcount:          3  late_ns:         60",
        ]
    );
    assert!(text.ends_with("\nTotals:\n    Hits: 6\n    Entries: 3\n    Dropped: 0\n"), "{text}");
    assert!(rendered(&tracer, &h).is_empty(), "the event fired for its trigger only");

    // The same histogram again is refused; with `:pause`, `:cont` and `:clear` it
    // acts on the one there.
    let exists = h.set_trigger(TICK.descriptor(), "hist:keys=count:vals=late_ns").unwrap_err();
    assert!(matches!(exists, HookError::Trigger(e) if e.reason == TriggerReason::Exists));
    h.set_trigger(TICK.descriptor(), "hist:keys=count:vals=late_ns:pause").unwrap();
    assert!(h.triggers(TICK.descriptor())[0].ends_with(" [paused]"));
    tick(9, 9);
    assert!(!hists(&h, TICK.descriptor()).contains("count:          9"), "paused");
    h.set_trigger(TICK.descriptor(), "hist:keys=count:vals=late_ns:cont").unwrap();
    tick(9, 9);
    assert!(hists(&h, TICK.descriptor()).contains("{ count:          9 } hitcount:          1"));
    h.set_trigger(TICK.descriptor(), "hist:keys=count:vals=late_ns:clear").unwrap();
    let text = hists(&h, TICK.descriptor());
    assert!(hist_entries(&text).is_empty() && text.contains("Hits: 0\n"), "{text}");
    assert!(h.triggers(TICK.descriptor())[0].ends_with(" [active]"));

    // A second histogram on the same event: compound keys, `.hex`, `.log2`, sorted
    // on a key descending, with a filter; the file shows both, in the order set.
    h.set_trigger(
        TICK.descriptor(),
        "hist:keys=count.hex,late_ns.log2:sort=count.descending if count > 1",
    )
    .unwrap();
    for (count, late) in [(16, 1000), (255, 3), (16, 1024), (1, 7)] {
        tick(count, late);
    }
    let text = hists(&h, TICK.descriptor());
    let (first, second) = text.split_once("\n\n\n# event histogram").unwrap();
    assert_eq!(hist_entries(first).len(), 3, "{first}");
    assert!(second.contains(
        "# trigger info: hist:keys=count.hex,late_ns.log2:vals=hitcount\
         :sort=count.descending:size=2048 if count > 1 [active]"
    ));
    assert_eq!(
        hist_entries(second),
        [
            "{ count: ff, late_ns: ~ 2^2  } hitcount:          1",
            "{ count: 10, late_ns: ~ 2^10 } hitcount:          2",
        ]
    );
    assert!(second.ends_with("Hits: 3\n    Entries: 2\n    Dropped: 0\n"), "{second}");

    // `.buckets=N` keys on the multiple of N at or below the value.
    h.set_trigger(TICK.descriptor(), "hist:keys=late_ns.buckets=100:vals=count").unwrap();
    let text = hists(&h, TICK.descriptor());
    let third = text.rsplit("\n\n\n# event histogram").next().unwrap();
    assert!(third.contains("hist:keys=late_ns.buckets=100:vals=hitcount,count:"), "{third}");
    assert_eq!(hist_entries(third), Vec::<&str>::new());
    tick(7, 1050);
    tick(9, 1099);
    tick(1, 3);
    let text = hists(&h, TICK.descriptor());
    let third = text.rsplit("\n\n\n# event histogram").next().unwrap();
    assert_eq!(
        hist_entries(third),
        [
            "{ late_ns: ~ 0-99 } hitcount:          1  count:          1",
            "{ late_ns: ~ 1000-1099 } hitcount:          2  count:         16",
        ]
    );
    let refused = h.set_trigger(TICK.descriptor(), "hist:keys=late_ns.buckets=0").unwrap_err();
    let bad = TriggerError { pos: 18, reason: TriggerReason::Hist(HistReason::BadModifier) };
    assert_eq!(refused, HookError::Trigger(bad));
    h.set_trigger(TICK.descriptor(), "!hist:keys=late_ns.buckets=100:vals=count").unwrap();

    // `.sym` and `.sym-offset` show an address and the function holding it, named
    // from a symbol table (without one, the address alone).
    let long = format!("core::ptr::drop_in_place<{}>", "alloc::vec::Vec<u8>,".repeat(8));
    let table = trace::symtab::encode([
        (0x1000, 0x1100, "alpha"),
        (0x2000, 0x2010, "beta"),
        (0x4000, 0x4100, long.as_str()),
    ]);
    let table = trace::symtab::SymbolTable::parse(&table).unwrap();
    h.set_trigger(TICK.descriptor(), "hist:keys=count.sym,late_ns.sym-offset:sort=count").unwrap();
    tick(0x1010, 0x2004);
    tick(0x3000, 0x1000);
    tick(0x4000, 0x40ff);
    let mut text = String::new();
    h.write_hists(TICK.descriptor(), Some(&table), &mut text).unwrap();
    let fourth = text.rsplit("\n\n\n# event histogram").next().unwrap();
    let line = |ip: &str, sym: &str, late: &str, off: &str| {
        format!("{{ count: [{ip}] {sym:<45}, late_ns: [{late}] {off:<45} }} hitcount:          1")
    };
    assert_eq!(
        hist_entries(fourth),
        [
            line("0000000000001010", "alpha", "0000000000002004", "beta+0x4"),
            line("0000000000003000", "", "0000000000001000", "alpha+0x0"),
            // A long name is written whole, its offset after it.
            line("0000000000004000", &long, "00000000000040ff", &format!("{long}+0xff")),
        ]
    );
    let plain = hists(&h, TICK.descriptor());
    assert!(plain.contains(&line("0000000000003000", "", "0000000000001000", "")), "{plain}");
    h.set_trigger(TICK.descriptor(), "!hist:keys=count.sym,late_ns.sym-offset:sort=count").unwrap();

    // `.percent` shows a value as its share of the entries' total, `.graph` as a bar
    // scaled to the largest entry's (`hitcount` too, a value beside the count), as
    // Linux since 6.1.
    let line = "hist:keys=count:vals=hitcount.percent,late_ns.graph:sort=hitcount,count";
    h.set_trigger(TICK.descriptor(), line).unwrap();
    for (count, late) in [(1, 40), (2, 10), (2, 10), (3, 0)] {
        tick(count, late);
    }
    let text = hists(&h, TICK.descriptor());
    let fifth = text.rsplit("\n\n\n# event histogram").next().unwrap();
    let shown = "hist:keys=count:vals=hitcount,hitcount.percent,late_ns.graph:\
                 sort=hitcount,count:size=2048 [active]";
    assert!(fifth.contains(shown), "{fifth}");
    let entry = |count, hits, share, bar: &str| {
        format!(
            "{{ count: {count:>10} }} hitcount: {hits:>10}  hitcount (%): {share}  late_ns: {bar:<20}"
        )
    };
    assert_eq!(
        hist_entries(fifth),
        [
            entry(1, 1, " 25.00", &"#".repeat(20)),
            entry(3, 1, " 25.00", ""),
            entry(2, 2, " 50.00", &"#".repeat(10)),
        ]
    );
    let refused = h.set_trigger(TICK.descriptor(), "hist:keys=count.percent").unwrap_err();
    let bad = TriggerError { pos: 16, reason: TriggerReason::Hist(HistReason::BadModifier) };
    assert_eq!(refused, HookError::Trigger(bad), "values only");
    // `!` of a histogram the event does not have succeeds and removes nothing, as
    // ftrace's (its selftests' `reset_trigger` relies on it).
    let before = h.triggers(TICK.descriptor());
    let shown_otherwise = "!hist:keys=count:vals=hitcount,late_ns.graph:sort=hitcount,count";
    assert_eq!(h.set_trigger(TICK.descriptor(), shown_otherwise), Ok(()));
    assert_eq!(h.triggers(TICK.descriptor()), before);
    h.set_trigger(TICK.descriptor(), &format!("!{line}")).unwrap();

    // `!` removes the histogram with those keys, values, sort and filter.
    let before = h.triggers(TICK.descriptor());
    h.set_trigger(TICK.descriptor(), "!hist:keys=count.hex,late_ns.log2").unwrap();
    assert_eq!(h.triggers(TICK.descriptor()), before, "not the same keys: kept");
    h.set_trigger(
        TICK.descriptor(),
        "!hist:keys=count.hex,late_ns.log2:sort=count.descending if count > 1",
    )
    .unwrap();
    h.set_trigger(TICK.descriptor(), "!hist:keys=count:vals=late_ns").unwrap();
    assert!(h.triggers(TICK.descriptor()).is_empty() && hists(&h, TICK.descriptor()).is_empty());

    // String keys (an event too large to travel as words: the arguments are read as
    // they are), signed values, a common field, sort on a value; `size` rounds up.
    h.set_trigger(EVERYTHING.descriptor(), "hist:keys=h,CPU:vals=d:sort=d:size=200").unwrap();
    everything(1, -5, "alpha");
    everything(2, 7, "a string longer than a key keeps: cut");
    everything(3, -10, "alpha");
    let text = hists(&h, EVERYTHING.descriptor());
    // The CPU reads back, and shows, as Linux's: `common_cpu`, however written.
    let line = "hist:keys=h,common_cpu:vals=hitcount,d:sort=d:size=256 [active]";
    assert!(text.contains(line), "{text}");
    let alpha = format!(
        "{{ h: {:<50}, common_cpu:          0 }} hitcount:          2  d:        -15",
        "alpha"
    );
    let long = format!(
        "{{ h: {:<50}, common_cpu:          0 }} hitcount:          1  d:          7",
        "a string longer than a key keeps"
    );
    assert_eq!(hist_entries(&text), [alpha.as_str(), long.as_str()]);
    h.clear_triggers(EVERYTHING.descriptor()).unwrap();
    // Sorted by any of its spellings; removed by the line as written.
    h.set_trigger(EVERYTHING.descriptor(), "hist:keys=cpu,COMM:sort=CPU").unwrap();
    let line = "hist:keys=common_cpu,common_comm:vals=hitcount:sort=common_cpu:size=2048 [active]";
    assert_eq!(h.triggers(EVERYTHING.descriptor()), [line]);
    h.set_trigger(EVERYTHING.descriptor(), "!hist:keys=CPU,comm:sort=common_cpu").unwrap();
    assert!(h.triggers(EVERYTHING.descriptor()).is_empty());

    // Sorted on a string key: as the bytes compare ("ab" before "b", "b" before "ba").
    h.set_trigger(EVERYTHING.descriptor(), "hist:keys=h:sort=h.descending").unwrap();
    for word in ["b", "ab", "ba", "a", "b"] {
        everything(0, 0, word);
    }
    let text = hists(&h, EVERYTHING.descriptor());
    let order: Vec<&str> = hist_entries(&text)
        .iter()
        .map(|l| l.trim_start_matches("{ h: ").split_whitespace().next().unwrap())
        .collect();
    assert_eq!(order, ["ba", "b", "ab", "a"], "{text}");
    h.clear_triggers(EVERYTHING.descriptor()).unwrap();
    tracer.destroy(h).unwrap();
}

/// A `hist` line that breaks a rule is refused with the position and the reason,
/// as Linux's `trigger-hist-syntax-errors.tc` expects, and changes nothing.
#[test]
fn hist_errors_name_the_position_and_nothing_changes() {
    let tracer = tracer();
    let top = tracer.top();
    let refused = |line: &str| match top.set_trigger(EVERYTHING.descriptor(), line) {
        Err(HookError::Trigger(e)) => (e.pos, e.reason),
        other => panic!("{line}: {other:?}"),
    };
    use trace::tracer::HistReason::*;
    for (line, pos, reason) in [
        ("hist:keys=c:vals=d:sort=c,junk", 26, InvalidSortField),
        ("hist:keys=c:vals=d:sort=", 19, EmptyAssignment),
        ("hist:keys=c:vals=d:sort=c,", 19, EmptySortField),
        ("hist:keys=c:vals=d:sort=c.junk", 26, InvalidSortModifier),
        ("hist:keys=c:vals=d,a:sort=c,d,a", 21, TooManySortFields),
        ("hist:vals=d", 0, MissingKeys),
        ("hist:keys=nope", 10, UnknownField),
        ("hist:keys=g", 10, BytesField),
        ("hist:keys=c:vals=h", 17, StringValue),
        ("hist:keys=a,b,c,d", 16, TooManyKeys),
        ("hist:keys=h,h,a", 14, KeysTooWide),
        ("hist:keys=c:vals=a,b,d,e", 23, TooManyVals),
        ("hist:keys=c.execname", 12, BadModifier),
        ("hist:keys=h.hex", 12, BadModifier),
        ("hist:keys=c:size=64", 17, BadSize),
        ("hist:keys=c:size=lots", 17, BadSize),
        ("hist:keys=c:junk", 12, UnknownAttribute),
        ("hist:keys=c:nohitcount", 0, NothingShown),
        ("hist:keys=c:name=a.b", 17, BadName),
        ("hist:keys=c:name=", 12, EmptyAssignment),
        ("hist:keys=c:keys=d", 12, Repeated),
    ] {
        assert_eq!(refused(line), (pos, TriggerReason::Hist(reason)), "{line}");
    }
    assert!(top.triggers(EVERYTHING.descriptor()).is_empty());
}

/// Histograms' tables share a memory budget: one that would take it past
/// `MAX_HIST_BYTES` is refused, and nothing changes; a removed one gives its bytes
/// back (after the grace period that frees it).
#[test]
fn hist_tables_share_a_bounded_budget() {
    let tracer = tracer();
    let event = EVERYTHING.descriptor();
    let (a, b) = (
        tracer.get_or_create("budget-a", InstanceConfig::default()).unwrap(),
        tracer.get_or_create("budget-b", InstanceConfig::default()).unwrap(),
    );
    // Each the largest there is: 2 x 16384 slots of 13 words.
    let bytes = 2 * trace::tracer::MAX_SIZE * 13 * 8;
    let fits = trace::tracer::MAX_HIST_BYTES / bytes;
    let sorts = ["a", "b", "c", "hitcount", "a.descending", "b.descending", "c.descending", "h"];
    let lines: Vec<String> =
        sorts.iter().map(|s| format!("hist:keys=h,h:vals=a,b,c:size=16384:sort={s}")).collect();
    let mut taken = Vec::new();
    let refusal = 'fill: {
        for instance in [&a, &b] {
            for line in &lines {
                match instance.set_trigger(event, line) {
                    Ok(()) => taken.push((instance, line)),
                    Err(e) => break 'fill e,
                }
            }
        }
        panic!("never refused");
    };
    let no_memory = TriggerError { pos: 0, reason: TriggerReason::Hist(HistReason::NoMemory) };
    assert_eq!(refusal, HookError::Trigger(no_memory));
    assert_eq!(taken.len(), fits);
    assert_eq!(b.triggers(event).len(), fits - lines.len(), "the refused one is not there");
    let (instance, line) = taken.pop().unwrap();
    instance.set_trigger(event, &format!("!{line}")).unwrap();
    instance.set_trigger(event, line).unwrap();
    a.clear_triggers(event).unwrap();
    b.clear_triggers(event).unwrap();
    drop((a, b));
    tracer.destroy_by_name("budget-a").unwrap();
    tracer.destroy_by_name("budget-b").unwrap();
}
