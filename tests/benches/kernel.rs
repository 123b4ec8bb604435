//! Runs the kernel's own `bench` command (tracepoint cost measured with the TSC
//! inside the guest, under TCG) and prints its report.
//! `cargo bench -p e2e --bench kernel`

use e2e::Machine;

fn main() {
    let mut m = Machine::boot();
    let report = m.run("bench 200000");
    print!("{report}");
    assert!(report.contains("enabled / raw ring write"), "the bench command failed:\n{report}");
}
