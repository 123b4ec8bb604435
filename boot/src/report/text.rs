//! `trace-cmd report`-style text: a `#` header, then one line per event in the
//! layout of the kernel's `trace` file ([`trace::text`]), timestamps in nanoseconds
//! (as `trace-cmd report -t`), as a dump's own text: `function_graph`'s records in
//! the graph's layout ([`GraphLines`]), a call whose return comes next on one line.
//!
//! ```text
//! # instance: top
//! # cpus=2
//! # entries-in-buffer/entries-written: 5/33
//! # panic on cpu 1 at kernel/src/main.rs:42:5: boom
//! # nested panic while reporting it, at kernel/src/fmt.rs:7:9: formatting failed
//! # panic on cpu 0 too, at kernel/src/net.rs:3:1: timeout
//!            <irq>-0       [000] d.h1.     1.000000500: irq_handler_entry: vector=48
//! CPU:1 [LOST 17 EVENTS]
//!           <idle>-0       [001] .....     1.500000000: packet: len=1500
//!  0)               |  kernel::shell::commands::dump() {
//!  0) ! 267.686 us  |    kernel::shell::commands::dump_options();
//!  0) # 1178.832 us |  } /* kernel::shell::commands::dump */
//! ```

use std::borrow::Cow;
use std::fmt;
use std::io::{self, Write};

use trace::dump::{Event, PanicReport, Section, Value, hex_dump};
use trace::event::EventDescriptor;
use trace::text::{self, Controls, GraphLines, GraphRecord, Line, UnreadWrites};
use trace::tracer::{FUNCGRAPH_ENTRY, FUNCGRAPH_EXIT};

/// Writes the `#` lines of a panic: where it happened and its message, a panic
/// while the kernel reported it, if one did, and another CPU's panic meanwhile, if
/// one came (multi-line messages stay in `#` lines; other control characters are
/// escaped, as [`Controls`] shows them).
pub(crate) fn write_panic(p: &PanicReport, out: &mut impl Write) -> io::Result<()> {
    let (at, msg) = (Controls(&p.location), HeaderText(&p.message));
    writeln!(out, "# panic on cpu {} at {at}: {msg}", p.cpu)?;
    if let Some(nested) = &p.nested {
        let (at, msg) = (Controls(&nested.location), HeaderText(&nested.message));
        writeln!(out, "# nested panic while reporting it, at {at}: {msg}")?;
    }
    if let Some(other) = &p.other {
        let (at, msg) = (Controls(&other.location), HeaderText(&other.message));
        writeln!(out, "# panic on cpu {} too, at {at}: {msg}", other.cpu)?;
    }
    Ok(())
}

/// A message in the `#` header: each of its lines escaped as [`Controls`] shows
/// it, the lines after the first continued as `#   `.
struct HeaderText<'a>(&'a str);

impl fmt::Display for HeaderText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, line) in self.0.split('\n').enumerate() {
            if i > 0 {
                f.write_str("\n#   ")?;
            }
            write!(f, "{}", Controls(line))?;
        }
        Ok(())
    }
}

/// Writes the trace as `trace-cmd report`-style text.
///
/// Events whose id has no descriptor are printed as `unknown_event: id=N <hex of
/// the values>`; a lost-events count is printed before the event it precedes, in
/// ftrace's `CPU:N [LOST M EVENTS]` form (after the last line, for those a CPU lost
/// after its last event). `ftrace:funcgraph_entry` and
/// `funcgraph_exit` print as the kernel's dump text prints them ([`GraphLines`]),
/// their functions named if `--elf` named them, addresses otherwise.
pub fn write_text(trace: &Section, out: &mut impl Write) -> io::Result<()> {
    let out = &mut io::BufWriter::new(out);
    writeln!(out, "# instance: {}", Controls(&trace.heading()))?;
    writeln!(out, "# cpus={}", trace.cpus)?;
    // The counts cover the events listed: a dump that holds only the last N
    // records (or lost some with a damaged chunk) says how many it left out.
    let written = trace.stats.iter().fold(0u64, |w, s| w.saturating_add(s.written));
    let listed = trace.events.len() as u64;
    writeln!(out, "# entries-in-buffer/entries-written: {listed}/{}", written.max(listed))?;
    for (cpu, s) in trace.stats.iter().enumerate() {
        let (stopped, unreadable, unpublished) = (s.stopped, s.unreadable, s.unpublished);
        write!(out, "{}", UnreadWrites { cpu, stopped, unreadable, unpublished })?;
    }
    if let Some(note) = super::left_out(trace) {
        writeln!(out, "# ({note})")?;
    }
    // What the dump holds: those listed and those a filter left out.
    let held = listed.saturating_add(trace.filtered);
    if trace.filtered > 0 {
        writeln!(out, "# (the filter leaves out {} of the {held} the dump holds)", trace.filtered)?;
    }
    if let Some(p) = &trace.panic {
        write_panic(p, out)?;
    }
    let mut line = String::new();
    let layout = text::Layout { clock: trace.clock, nanoseconds: true, ..text::Layout::DEFAULT };
    let mut graph = GraphLines::new();
    let (texts, mut text) = (trace.texts().escaping_controls(), String::new());
    for ev in &trace.events {
        line.clear();
        let call = trace.descriptor(ev.id).and_then(|d| graph_record(&d.system, &d.name, ev));
        let written = match graph.before(&mut line, &layout, call.as_ref()) {
            Ok(true) => Ok(()),
            Ok(false) => match call {
                Some(call) => graph.write(&mut line, &layout, call),
                None => {
                    texts.render(ev, &mut text);
                    write_event(&mut line, trace, ev, &text, &layout)
                }
            },
            Err(e) => Err(e),
        };
        written.map_err(|_| io::Error::other("formatting a trace line"))?;
        out.write_all(line.as_bytes())?;
    }
    line.clear();
    graph.finish(&mut line, &layout).map_err(|_| io::Error::other("formatting a trace line"))?;
    out.write_all(line.as_bytes())?;
    for (cpu, lost) in &trace.lost_after {
        writeln!(out, "CPU:{cpu} [LOST {lost} EVENTS]")?;
    }
    out.flush()
}

/// Writes `ev`, an event of `trace`, as its trace line, its text `text` (rendered
/// with its control characters escaped); its name's control characters are escaped
/// too ([`Controls`]).
fn write_event(
    out: &mut dyn fmt::Write,
    trace: &Section,
    ev: &Event,
    text: &str,
    layout: &text::Layout,
) -> fmt::Result {
    let descriptor = trace.descriptor(ev.id);
    let (system, name) = descriptor.map_or(("", ""), |d| (d.system.as_str(), d.name.as_str()));
    let name = descriptor.map_or(Some("unknown_event"), |_| text::event_name(system, name));
    let name = name.map(|name| match name.contains(char::is_control) {
        true => Cow::Owned(Controls(name).to_string()),
        false => Cow::Borrowed(name),
    });
    let line = Line {
        cpu: ev.cpu,
        ts: ev.ts,
        context: ev.context,
        name: name.as_deref(),
        lost: ev.lost_before,
        delay: None,
    };
    let body = |out: &mut dyn fmt::Write| match descriptor {
        Some(_) => out.write_str(text),
        None => {
            write!(out, "id={}", ev.id)?;
            let hex = hex_dump(&ev.values);
            if hex.is_empty() { Ok(()) } else { write!(out, " {hex}") }
        }
    };
    text::write_line(out, &line, layout, body)
}

/// `ev`'s values as a `function_graph` record, if it is one (an event of the
/// function tracers' `funcgraph_entry` or `funcgraph_exit`, named `system:name`)
/// and its values are whole: its function is its `func` value, an address or, once
/// `--elf` named it, a name.
fn graph_record<'a>(system: &str, name: &str, ev: &'a Event) -> Option<GraphRecord<Func<'a>>> {
    let is = |d: &EventDescriptor| (d.system, d.name) == (system, name);
    let exit = is(&FUNCGRAPH_EXIT);
    if !exit && !is(&FUNCGRAPH_ENTRY) {
        return None;
    }
    let (func, depth, took) = match (exit, ev.values.as_slice()) {
        (false, [func, Value::Unsigned(depth)]) => (func, *depth, 0),
        (true, [func, Value::Unsigned(depth), Value::Unsigned(took)]) => (func, *depth, *took),
        _ => return None,
    };
    let func = match func {
        Value::Unsigned(_) | Value::Str(_) => Func(func),
        _ => return None,
    };
    let (cpu, ts, context, lost) = (ev.cpu, ev.ts, ev.context, ev.lost_before);
    Some(GraphRecord { cpu, ts, context, lost, exit, func, depth, took })
}

/// A `function_graph` record's function as its line names it: the name `--elf`
/// gave it, or its address in hex, as the kernel shows one no symbol covers.
#[derive(PartialEq)]
struct Func<'a>(&'a Value);

impl fmt::Display for Func<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Value::Str(name) => write!(f, "{}", Controls(name)),
            Value::Unsigned(addr) => write!(f, "{addr:#x}"),
            other => write!(f, "{other:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample::sample;

    fn render(trace: &Section) -> String {
        let mut out = Vec::new();
        write_text(trace, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn header_and_event_lines() {
        let text = render(&sample());
        let lines: Vec<&str> = text.lines().collect();
        // Sample: the largest timestamp is 12.x s, so seconds take two columns.
        assert_eq!(lines[0], "# instance: top");
        assert_eq!(lines[1], "# cpus=2");
        // entries 3 + 2, written 10 + 23 (see sample()).
        assert_eq!(lines[2], "# entries-in-buffer/entries-written: 5/33");
        assert_eq!(
            lines[3],
            r#"# panic on cpu 1 at kernel/src/main.rs:42:5: boom "quoted" \ back"#
        );
        // Each line shows the context its record keeps (see sample()).
        assert_eq!(
            lines[4],
            "           <irq>-0       [000] d.h1.     1.000000500: irq_handler_entry: vector=48 error=0x2"
        );
        assert_eq!(
            lines[5],
            "          <idle>-0       [001] .....     1.000000500: message: pid=-7 comm=init \"x\" ok=true c=λ"
        );
        // The lost-events line precedes the event it was reported with.
        assert_eq!(lines[6], "CPU:1 [LOST 17 EVENTS]");
        assert_eq!(
            lines[7],
            "          <idle>-0       [001] .....     1.500000000: packet: len=1500 head=deadbeef delta=-42"
        );
        assert_eq!(
            lines[8],
            "           <irq>-0       [000] d.h1.     2.000000000: irq_handler_entry: vector=32 error=0x0"
        );
        assert_eq!(
            lines[9],
            "           <irq>-0       [000] d.h1.    12.345678901: irq_handler_exit: "
        );
        assert_eq!(lines.len(), 10);
    }

    #[test]
    fn unknown_event_id_is_hex_dumped() {
        let mut t = sample();
        t.panic = None;
        t.events = vec![
            Event {
                context: trace::Context::new(trace::Activity::Idle, false),
                cpu: 1,
                ts: 3,
                id: 99,
                values: vec![Value::Bytes(vec![1, 2, 0xff])],
                lost_before: 0,
                error: trace::field::DecodeError::Truncated,
            },
            Event {
                context: trace::Context::TASK,
                cpu: 0,
                ts: 4,
                id: 98,
                values: vec![],
                lost_before: 2,
                error: trace::field::DecodeError::Truncated,
            },
        ];
        let text = render(&t);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 7, "{text}");
        // The counts cover the two events listed; the sample's stats say 5 entries.
        assert_eq!(lines[2], "# entries-in-buffer/entries-written: 2/33");
        let why = "lost with damaged or cut chunks";
        assert_eq!(lines[3], format!("# (3 of the 5 entries in the buffer are not in it: {why})"));
        assert_eq!(
            lines[4],
            "          <idle>-0       [001] .....     0.000000003: unknown_event: id=99 01 02 ff"
        );
        assert_eq!(lines[5], "CPU:0 [LOST 2 EVENTS]");
        assert_eq!(
            lines[6],
            "           shell-1       [000] .....     0.000000004: unknown_event: id=98"
        );
    }

    /// A dump's strings cannot forge a line or drive the terminal: control
    /// characters in an event's text, its name and the instance's name print as
    /// `\u{..}`.
    #[test]
    fn control_characters_from_the_dump_are_escaped() {
        let mut t = sample();
        t.panic = None;
        t.instance = "evil\ninstance".into();
        std::sync::Arc::make_mut(&mut t.descriptors).get_mut(&2).unwrap().name = "mess\rage".into();
        t.events.truncate(2);
        t.events[1].values[1] = Value::Str("x\n  forged-0 [000] .....\r\x1b[2J".into());
        let text = render(&t);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "# instance: evil\\u{a}instance");
        assert_eq!(lines.len(), 6, "{text}");
        assert_eq!(
            lines[5],
            "          <idle>-0       [001] .....     1.000000500: mess\\u{d}age: pid=-7 \
             comm=x\\u{a}  forged-0 [000] .....\\u{d}\\u{1b}[2J ok=true c=λ"
        );
        assert!(!text.contains(['\r', '\x1b']), "{text:?}");
    }

    /// A function name `--elf` gave a `function_graph` record (which a crafted
    /// dump can give too, as a string) prints escaped as well.
    #[test]
    fn a_graph_records_function_name_is_escaped() {
        use trace::dump::{DumpDescriptor, DumpField};
        use trace::field::FieldKind;
        let mut t = sample();
        t.panic = None;
        for (id, d, fields) in [
            (10, &FUNCGRAPH_ENTRY, &["func", "depth"][..]),
            (11, &FUNCGRAPH_EXIT, &["func", "depth", "duration"][..]),
        ] {
            let kind = |name| if name == "func" { FieldKind::Str } else { FieldKind::U64 };
            let fields =
                fields.iter().map(|&name| DumpField { name: name.into(), kind: kind(name) });
            let descriptor = DumpDescriptor {
                id,
                kind: d.kind,
                system: d.system.into(),
                name: d.name.into(),
                format: String::new(),
                fields: fields.collect(),
                timeline: trace::event::Timeline::Instant,
            };
            std::sync::Arc::make_mut(&mut t.descriptors).insert(id, descriptor);
        }
        let func = || Value::Str("f\n  forged-0 [000] .....\x1b[2J\tg".into());
        t.events = vec![
            crate::report::sample::task_event(0, 10, 10, vec![func(), Value::Unsigned(0)]),
            crate::report::sample::task_event(
                0,
                20,
                11,
                vec![func(), Value::Unsigned(0), Value::Unsigned(10)],
            ),
        ];
        let text = render(&t);
        assert!(!text.contains(['\x1b']), "{text:?}");
        let calls: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(calls.len(), 1, "{text}");
        assert!(calls[0].ends_with("f\\u{a}  forged-0 [000] .....\\u{1b}[2J\tg();"), "{text}");
    }

    #[test]
    fn multi_line_panic_message_stays_in_the_header() {
        let mut t = sample();
        t.events.clear();
        t.panic.as_mut().unwrap().message = "first\nsecond".into();
        let text = render(&t);
        assert!(text.lines().all(|l| l.starts_with('#')), "{text}");
        assert!(text.contains("# panic on cpu 1 at kernel/src/main.rs:42:5: first\n#   second\n"));
    }

    /// A panic's message and location cannot forge a line or drive the terminal
    /// either: a carriage return or an escape prints as `\u{..}`, a new line
    /// continues the header.
    #[test]
    fn a_panics_control_characters_are_escaped() {
        let mut t = sample();
        t.events.clear();
        let p = t.panic.as_mut().unwrap();
        p.message = "one\r\x1b[2Jtwo\nthree\x07".into();
        p.location = "src/\x1b[31mmain.rs:1:1".into();
        p.other = Some(trace::dump::OtherPanicReport {
            cpu: 0,
            message: "\x1b]0;title\x07".into(),
            location: "src/\rnet.rs:3:1".into(),
        });
        let text = render(&t);
        assert!(!text.contains(['\r', '\x1b', '\x07']), "{text:?}");
        assert!(text.lines().all(|l| l.starts_with('#')), "{text}");
        assert!(text.contains(
            "# panic on cpu 1 at src/\\u{1b}[31mmain.rs:1:1: one\\u{d}\\u{1b}[2Jtwo\n#   three\\u{7}\n"
        ), "{text}");
        assert!(
            text.contains("# panic on cpu 0 too, at src/\\u{d}net.rs:3:1: \\u{1b}]0;title\\u{7}\n")
        );
    }

    #[test]
    fn a_nested_panic_follows_the_first_as_nested() {
        let mut t = sample();
        t.panic.as_mut().unwrap().nested = Some(trace::dump::NestedPanic {
            message: "formatting\nfailed".into(),
            location: "kernel/src/fmt.rs:7:9".into(),
        });
        let text = render(&t);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[3],
            r#"# panic on cpu 1 at kernel/src/main.rs:42:5: boom "quoted" \ back"#
        );
        assert_eq!(
            lines[4],
            "# nested panic while reporting it, at kernel/src/fmt.rs:7:9: formatting"
        );
        assert_eq!(lines[5], "#   failed");
    }

    #[test]
    fn another_cpus_panic_follows_the_first() {
        let mut t = sample();
        t.panic.as_mut().unwrap().other = Some(trace::dump::OtherPanicReport {
            cpu: 0,
            message: "timed\nout".into(),
            location: "kernel/src/net.rs:3:1".into(),
        });
        let text = render(&t);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[4], "# panic on cpu 0 too, at kernel/src/net.rs:3:1: timed");
        assert_eq!(lines[5], "#   out");
    }
}
