//! The dump's cost: serial bytes per event in the machine-readable block against
//! the ftrace-style text line for the same event, and the time to dump the
//! top-level instance with every CPU's 256 KiB ring full (4 CPUs).
//! `cargo bench -p e2e --bench dump`

use e2e::{Machine, STEP_TIMEOUT};
use std::time::Instant;

fn main() {
    let mut m = Machine::boot();
    // Fill every CPU's ring of the top-level instance (256 KiB each) with the
    // stress test's events, at full speed from every CPU.
    m.run("echo 1 > events/stress/enable");
    m.run("stress overwrite 3000");
    m.run("echo 0 > tracing_on");
    let start = Instant::now();
    m.send(b"dump instance top\r");
    m.wait_for("dump instance top\r\n", STEP_TIMEOUT);
    let out = m.wait_for_prompt(std::time::Duration::from_secs(600));
    let elapsed = start.elapsed();
    let records: Vec<&str> = out.lines().filter(|l| l.starts_with('[')).collect();
    let text_bytes: usize = records.iter().map(|l| l.len() + 1).sum();
    let block_bytes: usize =
        out.lines().filter(|l| l.starts_with("TD ")).map(|l| l.len() + 1).sum();
    let dump = m.dumps().pop().expect("a dump");
    assert!(dump.problems.is_empty(), "{:?}", dump.problems);
    let events: usize = dump.instances.values().map(|i| i.records.len()).sum();
    assert_eq!(events, records.len(), "both parts carry the same events");
    println!("dump of the top-level instance, 4 CPUs x 256 KiB rings full: {events} events");
    println!(
        "  text lines: {:.1} bytes/event; machine block: {:.1} bytes/event (descriptors and stats included); block/text = {:.2}",
        text_bytes as f64 / events as f64,
        block_bytes as f64 / events as f64,
        block_bytes as f64 / text_bytes as f64
    );
    println!("  time to dump (both parts, TCG, serial on a pipe): {:.2} s", elapsed.as_secs_f64());
}
