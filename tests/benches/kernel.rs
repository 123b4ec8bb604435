//! Runs the kernel's own `bench` command (tracepoint cost measured with the TSC
//! inside the guest) and prints its reports: first under virtual time (QEMU's
//! `-icount shift=0`: one nanosecond per guest instruction, so the figures count
//! instructions and repeat run to run), then under plain TCG (time, noisy).
//! `cargo bench -p e2e --bench kernel`

use boot::qemu::Config;
use e2e::Machine;

fn main() {
    for (icount, iterations, what) in [
        (true, 20_000, "virtual time: cycles and ns count guest instructions"),
        (false, 200_000, "TCG time"),
    ] {
        let mut m = Machine::boot_with(Config { icount, ..Config::default() });
        let report = m.run(&format!("bench {iterations}"));
        println!("== {what}");
        print!("{report}");
        assert!(report.contains("enabled / raw ring write"), "the bench command failed:\n{report}");
    }
}
