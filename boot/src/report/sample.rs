//! A small hand-built trace shared by the backends' tests.

use std::collections::BTreeMap;

use trace::dump::{
    BufferKind, DumpDescriptor, DumpField, DumpStats, Event, PanicReport, Section, Value,
};
use trace::event::{DescriptorKind, Timeline};
use trace::field::{DecodeError, FieldKind};
use trace::{Activity, Context};

fn field(name: &str, kind: FieldKind) -> DumpField {
    DumpField { name: name.into(), kind }
}

fn descriptor(
    id: u16,
    system: &str,
    name: &str,
    format: &str,
    fields: Vec<DumpField>,
) -> DumpDescriptor {
    // The kernel's declarations: interrupt handlers are slices keyed by vector.
    let vector = || Some("vector".to_string());
    let timeline = match (system, name) {
        ("irq", "irq_handler_entry") => Timeline::Begin { label: "irq".into(), key: vector() },
        ("irq", "irq_handler_exit") => Timeline::End { label: "irq".into(), key: vector() },
        _ => Timeline::Instant,
    };
    DumpDescriptor {
        kind: DescriptorKind::Event,
        id,
        system: system.into(),
        name: name.into(),
        format: format.into(),
        fields,
        timeline,
    }
}

/// An event written by a thread, with no loss before it.
pub(crate) fn task_event(cpu: usize, ts: u64, id: u16, values: Vec<Value>) -> Event {
    Event { context: Context::TASK, cpu, ts, id, values, lost_before: 0, error: TRUNCATED }
}

fn event(cpu: usize, ts: u64, id: u16, values: Vec<Value>, lost_before: u64) -> Event {
    Event { context: context(cpu, id), cpu, ts, id, values, lost_before, error: TRUNCATED }
}

/// What the sample's fields past their values print (they all decode).
const TRUNCATED: DecodeError = DecodeError::Truncated;

/// The sample's contexts: interrupt events in a handler, the rest in CPU 0's thread
/// (the shell) or CPU 1's idle loop.
fn context(cpu: usize, id: u16) -> Context {
    let activity = match (id, cpu) {
        (1 | 4, _) => Activity::Irq { depth: 1 },
        (_, 0) => Activity::Task,
        _ => Activity::Idle,
    };
    Context::new(activity, id == 1 || id == 4)
}

/// Two CPUs, four event types (one without fields), five events, a lost-events
/// marker on CPU 1, and a panic on CPU 1. Interrupt events are written in a handler
/// with interrupts off, CPU 1's others in its idle loop.
///
/// CPU 0: written 10 = entries 3 + read 2 + overrun 5.
/// CPU 1: written 23 = entries 2 + overrun 17 + dropped 4; the 17 overwritten
/// events are the ones the reader reported before the `net:packet` event.
pub fn sample() -> Section {
    let mut descriptors = BTreeMap::new();
    for d in [
        descriptor(
            1,
            "irq",
            "irq_handler_entry",
            "vector={vector} error={error:#x}",
            vec![field("vector", FieldKind::U8), field("error", FieldKind::U64)],
        ),
        descriptor(
            2,
            "demo",
            "message",
            "pid={pid} comm={comm} ok={ok} c={c}",
            vec![
                field("pid", FieldKind::I32),
                field("comm", FieldKind::Str),
                field("ok", FieldKind::Bool),
                field("c", FieldKind::Char),
            ],
        ),
        descriptor(
            3,
            "net",
            "packet",
            "len={len} head={head} delta={delta}",
            vec![
                field("len", FieldKind::U16),
                field("head", FieldKind::Bytes(4)),
                field("delta", FieldKind::I64),
            ],
        ),
        descriptor(4, "irq", "irq_handler_exit", "", vec![]),
    ] {
        descriptors.insert(d.id, d);
    }
    let events = vec![
        event(0, 1_000_000_500, 1, vec![Value::Unsigned(48), Value::Unsigned(2)], 0),
        event(
            1,
            1_000_000_500,
            2,
            vec![
                Value::Signed(-7),
                Value::Str("init \"x\"".into()),
                Value::Bool(true),
                Value::Char('λ'),
            ],
            0,
        ),
        event(
            1,
            1_500_000_000,
            3,
            vec![
                Value::Unsigned(1500),
                Value::Bytes(vec![0xde, 0xad, 0xbe, 0xef]),
                Value::Signed(-42),
            ],
            17,
        ),
        event(0, 2_000_000_000, 1, vec![Value::Unsigned(32), Value::Unsigned(0)], 0),
        event(0, 12_345_678_901, 4, vec![], 0),
    ];
    let stats = vec![
        DumpStats { written: 10, entries: 3, overrun: 5, read: 2, ..DumpStats::default() },
        DumpStats {
            written: 23,
            entries: 2,
            overrun: 17,
            dropped: 4,
            commit_overrun: 1,
            ..DumpStats::default()
        },
    ];
    Section {
        instance: "top".into(),
        buffer: BufferKind::Live,
        clock: trace::Clock::Local,
        cpus: 2,
        descriptors: descriptors.into(),
        events,
        lost_after: Default::default(),
        skipped: 0,
        filtered: 0,
        stats,
        panic: Some(PanicReport {
            cpu: 1,
            message: r#"boom "quoted" \ back"#.into(),
            location: "kernel/src/main.rs:42:5".into(),
            nested: None,
            other: None,
        }),
        streamed: false,
    }
}
