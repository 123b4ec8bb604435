//! Multi-processor bring-up and the panic stop.

use boot::qemu::{Config, Outcome};
use e2e::Machine;

fn boot_with_cpus(cpus: u32) -> Machine {
    Machine::boot_with(Config { smp: cpus, ..Config::default() })
}

#[test]
fn every_cpu_reports_in_with_1_2_and_4_cpus() {
    for cpus in [1, 2, 4] {
        let mut machine = boot_with_cpus(cpus);
        let banner = machine.transcript();
        assert!(banner.contains(&format!("{cpus} of {cpus} CPU(s) online")), "{cpus} CPUs: banner");
        for cpu in 0..cpus {
            assert!(
                banner.contains(&format!("cpu{cpu}: online")),
                "cpu{cpu} of {cpus} did not report in"
            );
        }
        let listing = machine.run("cpus");
        assert_eq!(
            listing.lines().filter(|l| l.starts_with("cpu")).count(),
            cpus as usize,
            "{listing}"
        );
        assert_eq!(machine.run_to_exit("poweroff"), Outcome::Success);
    }
}

#[test]
fn every_cpu_takes_its_own_timer_interrupts() {
    let mut machine = boot_with_cpus(4);
    let ticks = |listing: &str| -> Vec<u64> {
        listing
            .lines()
            .filter(|l| l.starts_with("cpu"))
            .map(|l| {
                l.split(", ").nth(1).and_then(|t| t.split(' ').next()?.parse().ok()).expect("ticks")
            })
            .collect()
    };
    let first = ticks(&machine.run("cpus"));
    assert_eq!(first.len(), 4);
    // Bounded: each command takes a while under TCG, so every CPU's count must move.
    let advanced = (0..300)
        .any(|_| ticks(&machine.run("cpus")).iter().zip(&first).all(|(now, then)| now > then));
    assert!(advanced, "some CPU's timer never ticked: {first:?}");
}

#[test]
fn a_panic_on_an_application_processor_stops_every_other_cpu() {
    let mut machine = boot_with_cpus(4);
    assert_eq!(machine.run_to_exit("panic 2"), Outcome::KernelFailure);
    let transcript = machine.transcript();
    assert!(transcript.contains("KERNEL PANIC on cpu 2:"), "the panic is not reported from cpu 2");
    assert!(
        transcript.contains("panic: stopped 3 of 3 other CPU(s)"),
        "the other CPUs were not all stopped"
    );
}

#[test]
fn a_panic_request_to_a_missing_cpu_is_refused() {
    let mut machine = boot_with_cpus(2);
    assert_eq!(machine.run("panic 7").trim(), "panic: no such CPU");
    assert_eq!(machine.run("panic two").trim(), "panic: usage: panic [CPU]");
    assert_eq!(machine.run_to_exit("poweroff"), Outcome::Success);
}
