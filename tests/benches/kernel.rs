//! Runs the kernel's own `bench` command (tracepoint cost measured with the TSC
//! inside the guest) and prints its report: under TCG, or under KVM with `--kvm`
//! (where `/dev/kvm` opens), whose timings are the host CPU's.
//! `cargo bench -p e2e --bench kernel [-- --kvm]`

use boot::qemu::Config;
use e2e::Machine;
use std::time::Duration;

/// Boot under nested KVM can take minutes on a loaded machine.
const KVM_BOOT_TIMEOUT: Duration = Duration::from_secs(300);

fn main() {
    let kvm = std::env::args().any(|a| a == "--kvm");
    let mut m = if kvm {
        Machine::boot_within(Config { kvm: true, ..Config::default() }, KVM_BOOT_TIMEOUT)
    } else {
        Machine::boot()
    };
    let report = m.run("bench 200000");
    print!("{report}");
    assert!(report.contains("enabled / raw ring write"), "the bench command failed:\n{report}");
}
