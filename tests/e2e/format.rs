//! `events/header_page`, `events/header_event` and every event's `format` file, in
//! libtraceevent's syntax: the kernel's are those the host's trace.dat carries for
//! the same descriptors, and trace-cmd (libtraceevent) parses that trace.dat.

use boot::qemu::Outcome;
use e2e::Machine;

/// Shell output as text: the serial line's CRLFs as newlines.
fn unix(text: &str) -> String {
    text.replace("\r\n", "\n")
}

#[test]
fn format_and_header_files_are_what_trace_dat_carries() {
    let mut m = Machine::boot();
    assert_eq!(m.run("mkdir instances/t1"), "");
    let events = unix(&m.run("cat available_events"));
    let events: Vec<&str> = events.lines().collect();
    assert!(events.len() > 10, "{events:?}");
    let mut formats = Vec::new();
    for root in ["", "instances/t1/"] {
        let mut page = String::new();
        trace::event::format_file::write_header_page(&mut page, 4096).unwrap();
        assert_eq!(unix(&m.run(&format!("cat {root}events/header_page"))), page);
        let mut header = String::new();
        trace::event::format_file::write_header_event(&mut header).unwrap();
        assert_eq!(unix(&m.run(&format!("cat {root}events/header_event"))), header);
        let listing = m.run(&format!("ls {root}events"));
        assert!(listing.contains("header_page") && listing.contains("header_event"), "{listing}");
        assert!(m.run(&format!("echo 1 > {root}events/header_page")).contains("read-only"));
        for event in &events {
            let (system, name) = event.split_once(':').unwrap();
            let text = unix(&m.run(&format!("cat {root}events/{system}/{name}/format")));
            formats.push((*event, text));
        }
    }
    assert_eq!(m.run_to_exit("panic"), Outcome::KernelFailure);
    let dump = m.dumps().pop().expect("a panic dump");
    for (event, text) in formats {
        let d = dump
            .descriptors
            .values()
            .find(|d| format!("{}:{}", d.system, d.name) == event)
            .unwrap_or_else(|| panic!("the dump describes {event}"));
        let mut expected = String::new();
        let fields = d.fields();
        trace::event::format_file::write_event_format(
            &mut expected,
            &d.system,
            &d.name,
            d.id,
            &fields,
            &d.format,
        )
        .unwrap();
        assert_eq!(text, expected, "{event}");
        assert!(text.contains("\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"));
        assert!(text.contains("\nprint fmt: \""), "{text}");
    }
    // The real parser: trace-cmd reads a trace.dat carrying exactly these files.
    let trace = dump.sections().into_iter().find(|t| t.instance == "top").unwrap();
    let out = e2e::trace_cmd_report(std::slice::from_ref(&trace), &[]);
    let events = out.lines().filter(|l| l.contains("] ")).count();
    assert_eq!(events, trace.events.len());
    // Its profiler times the interrupt handlers, each entry paired with its exit
    // by Linux's `irq` field: the timer's (0x30) and the serial line's (0x31).
    let profile = e2e::trace_cmd_report(std::slice::from_ref(&trace), &["--profile"]);
    for irq in ["0x30", "0x31"] {
        let timed = profile.lines().any(|l| {
            l.trim_start().starts_with(&format!("Event: irq_handler_entry:{irq} ("))
                && l.contains(" Total: ")
        });
        assert!(timed, "irq {irq}:\n{profile}");
    }
}
