//! `Tracer::write_dump`: what a kernel's panic handler calls. The dump's text and its
//! block carry the buffers chosen, and the block reads back as written.

use trace::dump::{self, BufferKind, PanicHeader};
use trace::text::Layout;
use trace::tracer::DumpSelection;
use trace::{HostPlatform, InstanceConfig, Limits, Mode, Tracer};

/// A tracer of two CPUs: markers in the top level, and in `net` markers before and
/// after a snapshot.
fn traced() -> Tracer<HostPlatform> {
    let limits = Limits { max_instances: 4, max_total_bytes: 1 << 20 };
    let config = InstanceConfig { bytes_per_cpu: 4096, mode: Mode::Overwrite, snapshot: false };
    let tracer = Tracer::new(HostPlatform, 2, trace::linked_events!(), limits, config).unwrap();
    for (cpu, text) in [(0, "top-0"), (1, "top-1"), (0, "top-2")] {
        HostPlatform::set_cpu(cpu);
        tracer.top().write_marker(text).unwrap();
    }
    HostPlatform::set_cpu(0);
    let net = tracer.get_or_create("net", InstanceConfig { snapshot: true, ..config }).unwrap();
    net.write_marker("before").unwrap();
    net.snapshot_take().unwrap();
    net.write_marker("after").unwrap();
    tracer
}

/// `(instance, buffer, marker texts)` of every section of the one dump in `out`.
fn sections(out: &str) -> Vec<(String, BufferKind, Vec<String>)> {
    let dumps = dump::parse(out);
    assert_eq!(dumps.len(), 1, "{out}");
    assert!(dumps[0].problems.is_empty(), "{:?}", dumps[0].problems);
    let texts = |s: &dump::Section| s.events.iter().map(|e| s.texts().text(e)).collect();
    dumps[0].sections().iter().map(|s| (s.instance.clone(), s.buffer, texts(s))).collect()
}

#[test]
fn a_dump_carries_every_buffer_chosen_as_text_and_as_a_block() {
    let tracer = traced();
    let all = DumpSelection { layout: Layout::DEFAULT, ..DumpSelection::all(tracer.cpus()) };
    let panic =
        PanicHeader { cpu: 1, message: "boom", location: "a.rs:1:2", nested: None, other: None };
    let mut out = String::new();
    tracer.write_dump(&all, Some(panic), &mut out);
    let text = out.split(dump::BEGIN).next().unwrap();
    assert!(text.contains("# trace dump: 2 CPU(s), records of CPU(s) 0..1"), "{text}");
    assert!(text.contains("# panic on cpu 1 at a.rs:1:2: boom"), "{text}");
    assert!(text.contains("# instance net (snapshot)"), "{text}");
    let lines = text.lines().filter(|l| l.contains("tracing_mark_write: ")).count();
    assert_eq!(lines, 5, "a line per record:\n{text}");
    let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        sections(&out),
        [
            ("top".into(), BufferKind::Live, strings(&["top-0", "top-1", "top-2"])),
            ("net".into(), BufferKind::Live, strings(&["after"])),
            ("net".into(), BufferKind::Snapshot, strings(&["before"])),
        ]
    );
    assert_eq!(dump::parse(&out)[0].panic.as_ref().map(|p| p.message.as_str()), Some("boom"));
}

#[test]
fn a_dump_leaves_out_what_it_is_not_asked_for() {
    let tracer = traced();
    let net = |name: &str| name == "net";
    let newest_of_cpu0 = DumpSelection {
        cpus: 0..1,
        live: true,
        snapshot: false,
        last: Some(1),
        instances: &net,
        layout: Layout::DEFAULT,
    };
    let mut out = String::new();
    tracer.write_dump(&newest_of_cpu0, None, &mut out);
    assert_eq!(sections(&out), [("net".into(), BufferKind::Live, vec!["after".to_string()])]);
    let every = |_: &str| true;
    let last_of_top = DumpSelection { instances: &every, snapshot: true, ..newest_of_cpu0 };
    let mut out = String::new();
    tracer.write_dump(&last_of_top, None, &mut out);
    let got = sections(&out);
    assert_eq!(
        got[0],
        ("top".into(), BufferKind::Live, vec!["top-2".to_string()]),
        "CPU 0's newest"
    );
    assert!(out.contains("# (1 older records left out)"), "{out}");
    assert_eq!(dump::parse(&out)[0].sections()[0].skipped, 1);
}

#[test]
fn cpus_the_tracer_does_not_have_dump_no_record() {
    let tracer = traced();
    let beyond = DumpSelection { cpus: 5..9, ..DumpSelection::all(tracer.cpus()) };
    let mut out = String::new();
    tracer.write_dump(&beyond, None, &mut out);
    assert!(out.starts_with("# trace dump: 2 CPU(s), records of none\n"), "{out}");
    assert!(sections(&out).iter().all(|(.., texts)| texts.is_empty()), "{out}");
}
