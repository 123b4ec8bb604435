//! `boot report` as a user runs it: on logs written with the dump writer.

use std::path::PathBuf;
use std::process::{Command, Output};
use trace::dump::DumpWriter;
use trace::{EventDescriptor, RingStats};

trace::event! {
    /// A test event.
    pub PING = "net":"ping" { seq: u32, host: &str } => "seq={seq} host={host}";
}

/// A log: boot noise, a panic dump of three `net:ping` records, more noise.
fn log() -> String {
    let descriptor: &EventDescriptor = PING.descriptor();
    let mut out = String::from("SeaBIOS noise\nkernel: hello\n");
    let mut writer = DumpWriter::begin(|line: &str| {
        out.push_str(line);
        out.push('\n');
    });
    writer.header(2, Some((1, "oops", "src/net.rs:10:5")));
    writer.descriptor_as(1, descriptor);
    writer.instance(0, "");
    writer.cpu_stats(0, 0, &RingStats { written: 2, entries: 2, ..RingStats::default() });
    writer.cpu_stats(
        0,
        1,
        &RingStats { written: 5, entries: 1, overrun: 4, ..RingStats::default() },
    );
    for (cpu, seq, host) in [(0usize, 1u32, "alpha"), (1, 2, "beta"), (0, 3, "gamma")] {
        let mut buf = [0u8; 64];
        let mut enc = trace::Encoder::new(&mut buf);
        use trace::FieldValue;
        seq.encode(&mut enc);
        host.encode(&mut enc);
        writer.record(0, cpu, 1_000 * u64::from(seq), 1, enc.bytes(), Some(descriptor));
    }
    writer.finish();
    out.push_str("after the dump\n");
    out
}

fn temp(name: &str, contents: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("boot-cli-{}-{name}", std::process::id()));
    std::fs::write(&path, contents).unwrap();
    path
}

fn report(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_boot"))
        .arg("report")
        .args(args)
        .output()
        .expect("the boot binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn report_prints_the_events_like_trace_cmd() {
    let log = temp("ok.log", &log());
    let out = report(&[log.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("# panic on cpu 1 at src/net.rs:10:5: oops"), "{stdout}");
    let events: Vec<&str> = stdout.lines().filter(|l| l.contains(": ping: ")).collect();
    assert_eq!(events.len(), 3, "{stdout}");
    assert!(
        events[0].contains(" [000] ") && events[0].ends_with(" ping: seq=1 host=alpha"),
        "{}",
        events[0]
    );
    assert!(events[2].ends_with("seq=3 host=gamma"));
    let stat = report(&[log.to_str().unwrap(), "--stat"]);
    assert!(stat.status.success());
    assert!(text(&stat.stdout).contains("net:ping"));
}

#[test]
fn report_writes_perfetto_json_and_ctf() {
    let log = temp("convert.log", &log());
    let json = std::env::temp_dir().join(format!("boot-cli-{}.json", std::process::id()));
    let out =
        report(&[log.to_str().unwrap(), "--format", "perfetto", "-o", json.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let parsed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let pings = parsed["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "net:ping")
        .count();
    assert_eq!(pings, 3);
    let no_dir = report(&[log.to_str().unwrap(), "--format", "ctf"]);
    assert_eq!(no_dir.status.code(), Some(2));
    assert!(text(&no_dir.stderr).contains("needs -o DIR"));
    let dir = std::env::temp_dir().join(format!("boot-cli-{}-ctf", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let ctf = report(&[log.to_str().unwrap(), "--format", "ctf", "-o", dir.to_str().unwrap()]);
    assert!(ctf.status.success(), "{}", text(&ctf.stderr));
    assert!(dir.join("metadata").exists());
    let unknown = report(&[log.to_str().unwrap(), "--format", "perfetto", "--instance", "nosuch"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(text(&unknown.stderr).contains("no instance \"nosuch\""), "{}", text(&unknown.stderr));
}

#[test]
fn damaged_and_missing_dumps_get_clear_errors() {
    let mut lines: Vec<String> = log().lines().map(String::from).collect();
    let chunk = lines.iter().position(|l| l.starts_with("TD 0 ")).unwrap();
    lines[chunk] = lines[chunk].replacen("TD 0 ", "TD 0 A", 1);
    let damaged = temp("damaged.log", &lines.join("\n"));
    let out = report(&[damaged.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "a damaged dump exits 1");
    assert!(
        text(&out.stderr).contains(&format!(":{}: chunk 0:", chunk + 1)),
        "{}",
        text(&out.stderr)
    );
    let truncated = temp("truncated.log", &log().lines().take(4).collect::<Vec<_>>().join("\n"));
    let out = report(&[truncated.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("truncated"), "{}", text(&out.stderr));
    let none = temp("none.log", "just a boot log\n");
    let out = report(&[none.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no trace dump found"));
    let out = report(&["/nonexistent/serial.log"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("/nonexistent/serial.log"));
}
