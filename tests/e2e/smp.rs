//! Multi-processor bring-up and the panic stop.

use boot::qemu::{Config, Outcome};
use e2e::{Machine, call_trace};

fn boot_with_cpus(cpus: u32) -> Machine {
    Machine::boot_with(Config { smp: cpus, ..Config::default() })
}

/// Each CPU's timer ticks, as the `cpus` command lists them.
fn ticks(machine: &mut Machine) -> Vec<u64> {
    let listing = machine.run("cpus");
    let count = |l: &str| l.split(", ").nth(1).and_then(|t| t.split(' ').next()?.parse().ok());
    listing.lines().filter(|l| l.starts_with("cpu")).map(|l| count(l).expect("ticks")).collect()
}

/// Waits (a bounded number of `cpus` commands) until every CPU has taken a timer
/// interrupt: a CPU brought up late on a loaded host may not have yet, and a test
/// that hangs the CPUs reads each one's last tick from the trace.
fn wait_for_every_cpus_tick(machine: &mut Machine) {
    let ticked = (0..300).any(|_| ticks(machine).iter().all(|&n| n > 0));
    assert!(ticked, "some CPU's timer never ticked");
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
        // The hard lockup detector needs a CPU to watch each: none with one CPU.
        let lockup = machine.run("lockup");
        let alone = lockup.contains("cpu0: no CPU to watch (it takes two)");
        assert_eq!(alone, cpus == 1, "{lockup}");
        assert_eq!(machine.run_to_exit("poweroff"), Outcome::Success);
    }
}

/// A machine with more CPUs than the kernel runs: the boot says so, the tracer and
/// the persistent region cover the CPUs that run, and `boot_map` records.
#[test]
fn cpus_beyond_the_kernels_sixteen_are_left_off_and_said() {
    let mut machine = boot_with_cpus(17);
    let banner = machine.transcript();
    for line in [
        "smp: 17 CPUs found; this kernel runs at most 16 and leaves the others off",
        "16 of 17 CPU(s) online",
        "instances/boot_map records this boot",
    ] {
        assert!(banner.contains(line), "{line}:\n{banner}");
    }
    assert!(banner.lines().any(|l| l.starts_with("trace: ") && l.ends_with(" events, 16 CPU(s)")));
    assert!(machine.run("ls instances").contains("boot_map/"));
    let listing = machine.run("cpus");
    assert_eq!(listing.lines().filter(|l| l.starts_with("cpu")).count(), 16, "{listing}");
}

#[test]
fn every_cpu_takes_its_own_timer_interrupts() {
    let mut machine = boot_with_cpus(4);
    let first = ticks(&mut machine);
    assert_eq!(first.len(), 4);
    // Bounded: each command takes a while under TCG, so every CPU's count must move.
    let advanced =
        (0..300).any(|_| ticks(&mut machine).iter().zip(&first).all(|(now, then)| now > then));
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
    let symbols = boot::report::Symbols::read(std::path::Path::new(boot::KERNEL_ELF)).unwrap();
    let mut top = machine.dumps().pop().expect("the panic dump").sections().remove(0);
    assert_eq!(top.instance, "top");
    symbols.symbolize(&mut top);
    // Where each was stopped, as Linux's NMI backtraces: the shell's CPU in its
    // loop (waiting for a key or just back from posting the request), the others
    // idle.
    for cpu in [0, 1, 3] {
        let at = transcript.find(&format!("\nNMI backtrace for cpu {cpu}:\nRIP: "));
        let trace = &transcript[at.unwrap_or_else(|| panic!("cpu {cpu}: {transcript}"))..];
        let mut lines = trace.lines().skip(2);
        let rip = lines.next().and_then(|l| l.strip_prefix("RIP: "));
        let frames = lines.map_while(|l| l.strip_prefix(" => "));
        let chain: Vec<&str> = rip.into_iter().chain(frames).collect();
        let caller = if cpu == 0 { "kernel::shell::run+" } else { "kernel::smp::ap_main+" };
        assert!(chain.iter().any(|f| f.starts_with(caller)), "cpu {cpu}: {chain:#?}");
        // The CPU recorded the same chain as its last event: a stack trace in the dump.
        let last = top.events.iter().rfind(|e| e.cpu == cpu).expect("the CPU's events");
        let text = top.texts().text(last);
        let recorded: Vec<&str> = text.lines().skip(1).map(|l| &l[4..]).collect();
        assert!(text.starts_with("depth="), "cpu {cpu}: {last:?}");
        assert_eq!(recorded, chain[..chain.len().min(8)], "cpu {cpu}");
    }
    assert!(!transcript.contains("NMI backtrace for cpu 2:"), "the panicking CPU's is its own");
}

#[test]
fn an_application_processors_stack_overflow_is_a_double_fault_on_its_own_stack() {
    let mut machine = boot_with_cpus(4);
    assert_eq!(machine.run_to_exit("fault stack 2"), Outcome::KernelFailure);
    let transcript = machine.transcript();
    // The unmapped space below the stack stops the recursion: the page fault cannot
    // be delivered on the overflowed stack, so it is a double fault, on cpu 2's IST
    // stack, and the heap the stack's memory came from is untouched.
    assert!(transcript.contains("KERNEL PANIC on cpu 2:"), "{transcript}");
    assert!(transcript.contains("EXCEPTION: DOUBLE FAULT (vector 8)"), "{transcript}");
    assert!(transcript.contains("panic: stopped 3 of 3 other CPU(s)"), "{transcript}");
    e2e::overflow_frames(&transcript);
}

#[test]
fn a_panic_request_to_a_missing_cpu_is_refused() {
    let mut machine = boot_with_cpus(2);
    assert_eq!(machine.run("panic 7").trim(), "panic: no such CPU: the CPUs are 0 to 1");
    let usage =
        "panic: usage: panic [CPU | both CPU | irq | console | heap | nested | dump [CHUNKS]]";
    assert_eq!(machine.run("panic two").trim(), usage);
    // A count of chunk lines that is not one is refused too, and nothing panics.
    for line in ["panic dump many", "panic dump 18446744073709551615", "panic dump 1 2"] {
        assert_eq!(machine.run(line).trim(), usage, "{line}");
    }
    // `both` needs another CPU that exists.
    assert_eq!(machine.run("panic both 7").trim(), "panic: no such CPU: the CPUs are 0 to 1");
    assert_eq!(machine.run_to_exit("poweroff"), Outcome::Success);
}

/// One CPU's line of a `stress` report: `cpuN: written W entries E read R overrun O
/// dropped D | thread T timer T ipi I nmi N | verdict`.
fn stress_counts(line: &str) -> std::collections::HashMap<String, u64> {
    let words: Vec<&str> = line.split_whitespace().collect();
    words.windows(2).filter_map(|w| Some((w[0].to_string(), w[1].parse().ok()?))).collect()
}

#[test]
fn stress_in_both_modes_on_4_cpus_accounts_for_every_event() {
    let mut machine = boot_with_cpus(4);
    let report = machine.run("stress both 1000");
    for (mode, lost) in [("overwrite", "overrun"), ("discard", "dropped")] {
        assert!(report.contains(&format!("stress {mode}: PASS")), "{mode} did not pass:\n{report}");
        let section: Vec<&str> = report
            .split(&format!("stress {mode}: 4 CPU(s)"))
            .nth(1)
            .expect("a section per mode")
            .lines()
            .filter(|l| l.starts_with("cpu"))
            .take(4)
            .collect();
        assert_eq!(section.len(), 4, "{mode}: one line per CPU:\n{report}");
        for line in &section {
            assert!(line.ends_with("invariant ok"), "{mode}: {line}");
            let c = stress_counts(line);
            assert_eq!(
                c["written"],
                c["entries"] + c["read"] + c["overrun"] + c["dropped"],
                "{mode}: {line}"
            );
            assert_eq!(
                c["written"],
                c["thread"] + c["timer"] + c["ipi"] + c["nmi"],
                "{mode}: {line}"
            );
            assert!(c["timer"] > 0, "{mode}: no nested timer events: {line}");
        }
        for line in &section[1..] {
            let c = stress_counts(line);
            assert!(c[lost] > 0, "{mode}: the ring never filled: {line}");
            assert!(c["ipi"] > 0 && c["nmi"] > 0, "{mode}: no nested IPI/NMI events: {line}");
        }
    }
    assert_eq!(
        machine.run("stress sideways").trim(),
        "stress: usage: stress [overwrite|discard|both] [MS] [cycle N [functions]] [panic]"
    );
    assert_eq!(machine.run("stress 0").trim(), "stress: a duration is 1 to 10000 ms");
    assert_eq!(machine.run("stress 10 cycle 0").trim(), "stress: cycles are 1 to 100000");
    assert!(machine.run("stress 10 cycle x").starts_with("stress: usage:"));
    assert!(machine.run("stress 10 cycle 2 functionz").starts_with("stress: usage:"));
    assert_eq!(machine.run_to_exit("poweroff"), Outcome::Success);
}

#[test]
fn stress_runs_on_a_single_cpu() {
    let mut machine = boot_with_cpus(1);
    let report = machine.run("stress overwrite 200");
    assert!(report.contains("stress overwrite: PASS"), "{report}");
}

/// The heavy memory barrier (an IPI every other CPU acknowledges) run by every CPU at
/// once: each waits for the others while they wait for it, so a CPU that stopped
/// serving barrier IPIs while waiting would deadlock the run.
#[test]
fn memory_barriers_run_by_every_cpu_at_once_all_complete() {
    let mut machine = boot_with_cpus(4);
    let report = machine.run("barrier 500");
    let counts: Vec<u64> = report
        .lines()
        .filter_map(|l| l.trim().strip_prefix("cpu")?.split_whitespace().nth(1)?.parse().ok())
        .collect();
    assert_eq!(counts.len(), 4, "one count per CPU:\n{report}");
    assert!(counts.iter().all(|&n| n > 0), "every CPU completed barriers:\n{report}");
    assert!(report.contains("barrier: ok"), "{report}");
    assert!(!machine.transcript().contains("has not acknowledged"), "no CPU was late");
    // Control operations wait for grace periods through the same barrier.
    for round in 0..3 {
        assert_eq!(machine.run(&format!("mkdir instances/b{round}")).trim(), "");
        assert_eq!(machine.run("echo 1 > snapshot").trim(), "");
        assert_eq!(machine.run(&format!("rmdir instances/b{round}")).trim(), "");
    }
    assert_eq!(machine.run("barrier 0").trim(), "barrier: a duration is 1 to 10000 ms");
    assert_eq!(machine.run("barrier 1 2").trim(), "barrier: usage: barrier [MS]");
    assert_eq!(machine.run_to_exit("poweroff"), Outcome::Success);
}

/// A `hist` trigger on the stress event, keyed on where it was written, counts every
/// event the stress run wrote, from threads, timer interrupts, IPIs and NMIs on 4
/// CPUs at once: each (source, CPU) entry is the run's own count of its writes (or
/// less by what `Dropped` counts, a claim the table gave up waiting for).
#[test]
fn a_histogram_counts_every_stress_event_from_every_context() {
    let mut machine = boot_with_cpus(4);
    let trigger = "events/stress/event/trigger";
    machine.run(&format!("echo 'hist:keys=source,CPU:size=128' > {trigger}"));
    let report = machine.run("stress overwrite 500");
    assert!(report.contains("stress overwrite: PASS"), "{report}");
    let hist = machine.run("cat events/stress/event/hist");
    let mut counted = std::collections::HashMap::new();
    for line in hist.lines().filter(|l| l.starts_with("{ ")) {
        let words: Vec<&str> = line.split([' ', ',', '{', '}']).filter(|w| !w.is_empty()).collect();
        // source: S common_cpu: C hitcount: N
        let (source, cpu, hits) = (words[1], words[3], words[5]);
        counted
            .insert((source.parse::<u8>().unwrap(), cpu.to_string()), hits.parse::<u64>().unwrap());
    }
    let total = |name: &str| -> u64 {
        let line = hist.lines().find_map(|l| l.trim().strip_prefix(name)).expect(name);
        line.trim().parse().unwrap()
    };
    let (hits, dropped) = (total("Hits:"), total("Dropped:"));
    let mut written = 0;
    for line in report.lines().filter(|l| l.starts_with("cpu")).take(4) {
        let c = stress_counts(line);
        let cpu = line.split(':').next().unwrap().trim_start_matches("cpu").to_string();
        for (source, name) in ["thread", "timer", "ipi", "nmi"].iter().enumerate() {
            let mine = counted.get(&(source as u8, cpu.clone())).copied().unwrap_or(0);
            assert!(mine <= c[*name], "cpu{cpu} {name}: {mine} > {}\n{hist}\n{report}", c[*name]);
            if dropped == 0 {
                assert_eq!(mine, c[*name], "cpu{cpu} {name}\n{hist}\n{report}");
            }
        }
        assert!(c["nmi"] > 0 || cpu == "0", "cpu{cpu}: no NMI events: {line}");
        written += c["written"];
    }
    assert_eq!(hits, written, "every event the run wrote fired the histogram\n{hist}");
    assert_eq!(hits, counted.values().sum::<u64>() + dropped, "{hist}");
}

/// The hard lockup detector: a CPU hung with interrupts off (on another CPU, then
/// on the shell's own) takes no timer interrupt; the CPU watching it records
/// `lockup:hard_lockup` once the threshold has passed and stops it by NMI, and it
/// panics there: the panic names where it was stuck and the dump carries the trace
/// up to the hang. Bad settings are refused and change nothing.
#[test]
fn a_cpu_hung_with_interrupts_off_is_stopped_by_nmi_and_its_trace_dumped() {
    let symbols = boot::report::Symbols::read(std::path::Path::new(boot::KERNEL_ELF)).unwrap();
    for (command, cpu, stuck_in, caller) in [
        ("lockup spin 2", 2, "kernel::smp::on_call_interrupt+", "kernel::arch::idt::call+"),
        ("lockup spin", 0, "kernel::lockup::spin+", "kernel::shell::run+"),
    ] {
        let mut m = boot_with_cpus(4);
        wait_for_every_cpus_tick(&mut m);
        let status = m.run("lockup");
        assert!(status.starts_with("threshold: 10000 ms\n"), "{status}");
        assert!(status.contains("\ncpu1 watches cpu2: no timer interrupt for "), "{status}");
        for bad in ["lockup threshold 600001", "lockup threshold x", "lockup spin 9", "lockup up"] {
            assert!(!m.run(bad).is_empty(), "{bad} is refused");
        }
        for cpu in ["lockup spin 9", "lockup spin nmi 4"] {
            assert_eq!(m.run(cpu), "lockup: no such CPU: the CPUs are 0 to 3\n", "{cpu}");
        }
        assert_eq!(
            m.run("lockup threshold 49"),
            "lockup: a threshold is 0 (off) or 50 to 600000 ms (at least five timer ticks)\n"
        );
        assert!(m.run("lockup").starts_with("threshold: 10000 ms\n"));
        let status = m.run("lockup threshold 500");
        let mut lines = status.lines();
        assert_eq!(lines.next(), Some("threshold: 500 ms"));
        let every = "cpu0 watches every cpu by NMI: no timer interrupt on any for 0 ms";
        assert_eq!(lines.next_back(), Some(every), "{status}");
        for (watcher, line) in lines.enumerate() {
            let buddy = (watcher + 1) % 4;
            let prefix = format!("cpu{watcher} watches cpu{buddy}: no timer interrupt for ");
            let ms = line.strip_prefix(&prefix).and_then(|ms| ms.strip_suffix(" ms"));
            let ms = ms.and_then(|ms| ms.parse::<u64>().ok());
            assert!(ms.is_some_and(|ms| ms < 500), "{status}");
        }
        assert_eq!(m.run_to_exit(command), Outcome::KernelFailure, "{command}");
        let transcript = m.transcript();
        let panic = format!("KERNEL PANIC on cpu {cpu}: ");
        assert!(transcript.lines().any(|l| l.starts_with(&panic)), "{command}: the panic");
        let message = format!("\nhard LOCKUP on cpu {cpu}: no timer interrupt for ");
        assert!(transcript.contains(&message), "{command}: the panic's message");
        let rip = transcript.lines().find_map(|l| l.strip_prefix("RIP: ")).expect("a RIP line");
        assert!(rip.starts_with(stuck_in), "{command}: {rip}");
        // The call trace goes from the NMI's handler on into the stuck code's callers.
        let frames = call_trace(&transcript);
        let handler = frames.iter().position(|f| f.starts_with("kernel::arch::idt::nmi+"));
        let stuck = frames.iter().position(|f| *f == rip);
        assert!(handler.is_some_and(|h| stuck == Some(h + 1)), "{command}: {frames:#?}");
        assert!(
            frames.iter().skip(handler.unwrap() + 2).any(|f| f.starts_with(caller)),
            "{frames:#?}"
        );
        assert!(transcript.contains("panic: stopped 3 of 3 other CPU(s)"), "{command}");

        let dump = m.dumps().pop().expect("the panic dump");
        assert!(dump.problems.is_empty(), "{:?}", dump.problems);
        symbols.check(dump.symbols).unwrap();
        let top = dump.sections().into_iter().find(|t| t.instance == "top").unwrap();
        let named = |e: &&trace::dump::Event, name: &str| {
            top.descriptor(e.id).is_some_and(|d| d.name == name)
        };
        let found: Vec<_> = top.events.iter().filter(|e| named(e, "hard_lockup")).collect();
        let [found] = found[..] else { panic!("one hard_lockup event: {found:?}") };
        let watcher = (cpu + 3) % 4;
        assert_eq!(found.cpu, watcher, "{command}: recorded by the CPU watching it");
        let trace::dump::Value::Unsigned(stalled) = found.values[1] else { panic!() };
        let text = top.texts().text(found);
        assert!(text.starts_with(&format!("cpu={cpu} stalled=")) && stalled >= 500);
        // The hung CPU recorded where it was stuck (`--elf` names it).
        let mut symbolized = top.clone();
        symbols.symbolize(&mut symbolized);
        let stack = |e: &&trace::dump::Event| {
            e.cpu == cpu && symbolized.descriptor(e.id).is_some_and(|d| d.name == "kernel_stack")
        };
        let last = symbolized.events.iter().rfind(stack).expect("the hung CPU's stack");
        let text = symbolized.texts().text(last);
        let frames: Vec<&str> = text.lines().skip(1).map(|l| &l[4..]).collect();
        assert!(text.starts_with("depth=") && frames.first() == Some(&rip), "{last:?}");
        assert!(frames.iter().any(|f| f.starts_with(caller)), "{command}: {frames:?}");
        // The hung CPU's last tick is long before the report (the threshold counts
        // the watcher's ticks, which a loaded host can bunch up: half of it here).
        let last_tick = top.events.iter().rfind(|e| e.cpu == cpu && named(e, "tick"));
        let last_tick = last_tick.expect("the hung CPU's ticks");
        assert!(found.ts - last_tick.ts >= 250_000_000, "{command}: {last_tick:?} {found:?}");
    }
}

/// A CPU hung in an NMI handler takes no NMI either: its watcher, once the NMI it
/// sent has not stopped it a second past the threshold, panics in its place, and
/// the dump is written without it.
#[test]
fn a_cpu_that_takes_no_nmi_is_reported_by_its_watcher() {
    let mut m = boot_with_cpus(4);
    assert!(m.run("lockup threshold 500").starts_with("threshold: 500 ms"));
    // `bench` keeps interrupts on between its batches: a measurement that takes
    // longer than the threshold (five rounds of 150000 calls traced by
    // `function_graph`, about a second under TCG) is no lockup.
    let long = m.run("bench 150000");
    assert!(long.contains("call, traced by function_graph"), "{long}");
    assert!(!m.run("lockup spin nmi 0").is_empty(), "the shell's own CPU is refused");
    assert_eq!(m.run_to_exit("lockup spin nmi 2"), Outcome::KernelFailure);
    let transcript = m.transcript();
    assert!(transcript.contains("cpu2: spinning in an NMI handler"), "{transcript}");
    assert!(transcript.lines().any(|l| l.starts_with("KERNEL PANIC on cpu 1: ")), "{transcript}");
    let message = "\nhard LOCKUP on cpu 2: no timer interrupt for ";
    let rest = transcript.split(message).nth(1).expect("the watcher's message");
    let ms = rest.split(" ms").next().and_then(|ms| ms.parse::<u64>().ok());
    assert!(ms.is_some_and(|ms| ms >= 1500), "{rest}");
    assert!(rest.contains("it took no NMI (NMIs blocked there): cpu 1 panics in its place"));
    assert!(transcript.contains("panic: stopped 2 of 3 other CPU(s)"), "{transcript}");
    let dump = m.dumps().pop().expect("the panic dump");
    assert!(dump.problems.is_empty(), "{:?}", dump.problems);
    assert_eq!(dump.panic.as_ref().map(|p| p.cpu), Some(1));
}

/// The watch over every CPU at once: when every CPU hangs with interrupts off (no
/// buddy is left to see it), or the one CPU of a machine that has one, the RTC's
/// periodic NMI on the boot CPU panics there once no CPU has taken a timer
/// interrupt for the threshold. The panic names where the boot CPU was stuck, stops
/// the others (each one's NMI backtrace shows where it spun) and dumps the trace up
/// to the hang.
#[test]
fn every_cpu_hung_at_once_is_caught_by_the_periodic_nmi() {
    for (cpus, command) in [(4, "lockup spin all"), (1, "lockup spin")] {
        let mut m = boot_with_cpus(cpus);
        wait_for_every_cpus_tick(&mut m);
        let status = m.run("lockup threshold 1000");
        let every = "cpu0 watches every cpu by NMI: no timer interrupt on any for 0 ms";
        assert_eq!(status.lines().last(), Some(every), "{cpus} CPUs: {status}");
        assert_eq!(m.run_to_exit(command), Outcome::KernelFailure, "{command}");
        let transcript = m.transcript();
        assert!(transcript.lines().any(|l| l.starts_with("KERNEL PANIC on cpu 0: ")), "{command}");
        let message = "\nhard LOCKUP on every cpu: no timer interrupt on any for ";
        let ms = transcript.split(message).nth(1).and_then(|rest| rest.split(" ms\n").next());
        let ms = ms.and_then(|ms| ms.parse::<u64>().ok());
        assert!(ms.is_some_and(|ms| ms >= 1000), "{command}: the panic's message");
        let rip = transcript.lines().find_map(|l| l.strip_prefix("RIP: ")).expect("a RIP line");
        assert!(rip.starts_with("kernel::lockup::spin+"), "{command}: {rip}");
        let frames = call_trace(&transcript);
        let handler = frames.iter().position(|f| f.starts_with("kernel::arch::idt::nmi+"));
        let stuck = frames.iter().position(|f| *f == rip);
        assert!(handler.is_some_and(|h| stuck == Some(h + 1)), "{command}: {frames:#?}");
        assert!(frames.iter().any(|f| f.starts_with("kernel::shell::run+")), "{frames:#?}");
        if cpus > 1 {
            assert!(transcript.contains("panic: stopped 3 of 3 other CPU(s)"), "{command}");
            for cpu in 1..cpus {
                let spun =
                    format!("NMI backtrace for cpu {cpu}:\nRIP: kernel::smp::on_call_interrupt+");
                assert!(transcript.contains(&spun), "{command}: cpu{cpu}'s backtrace");
            }
        }

        let dump = m.dumps().pop().expect("the panic dump");
        assert!(dump.problems.is_empty(), "{:?}", dump.problems);
        let top = dump.sections().into_iter().find(|t| t.instance == "top").unwrap();
        let named = |e: &&trace::dump::Event, name: &str| {
            top.descriptor(e.id).is_some_and(|d| d.name == name)
        };
        let found: Vec<_> = top.events.iter().filter(|e| named(e, "hard_lockup")).collect();
        let [found] = found[..] else { panic!("one hard_lockup event: {found:?}") };
        assert_eq!(found.cpu, 0, "{command}: recorded by the CPU the NMI goes to");
        assert!(top.texts().text(found).starts_with("cpu=0 stalled="), "{found:?}");
        // No CPU took a timer interrupt for at least two half periods of the NMI (a
        // check counts once at most every 250 ms), whatever the host's pace.
        for cpu in 0..cpus as usize {
            let last_tick = top.events.iter().rfind(|e| e.cpu == cpu && named(e, "tick"));
            let last_tick = last_tick.expect("every CPU's ticks");
            assert!(found.ts - last_tick.ts >= 500_000_000, "cpu{cpu}: {last_tick:?} {found:?}");
        }
    }
}

/// A panic's dump on the boot CPU takes seconds with full rings: the periodic NMI
/// that watches every CPU keeps coming to that CPU meanwhile, and must neither park
/// it (as the NMI that stops the other CPUs does) nor find a lockup, though no CPU
/// takes a timer interrupt for longer than the threshold. The dump ends, whole.
#[test]
fn a_long_panic_dump_on_the_cpu_the_periodic_nmi_goes_to_is_not_cut() {
    let mut m = boot_with_cpus(4);
    assert_eq!(m.run("echo 512 > buffer_size_kb"), "");
    assert!(m.run("lockup threshold 1000").starts_with("threshold: 1000 ms\n"));
    assert_eq!(m.run("echo function > current_tracer"), "");
    assert!(m.run("stress 300").contains("PASS"));
    let started = std::time::Instant::now();
    assert_eq!(m.run_to_exit("panic"), Outcome::KernelFailure);
    let took = started.elapsed();
    let dump = m.dumps().pop().expect("the panic dump");
    assert!(dump.problems.is_empty(), "{:?}", dump.problems);
    assert_eq!(dump.panic.as_ref().map(|p| p.cpu), Some(0));
    let top = dump.sections().into_iter().find(|t| t.instance == "top").unwrap();
    for cpu in 0..4 {
        let events = top.events.iter().filter(|e| e.cpu == cpu).count() as u64;
        assert_eq!(events, top.stats[cpu].entries, "cpu{cpu}");
    }
    // Long enough for the NMI to come in it (every 500 ms), and for the threshold to
    // pass: the function tracer fills at least the shell CPU's 512 KiB, a dump of
    // about 5.5 s on a machine of two cores (2 s with the rings a run of `stress`
    // alone leaves, which a loaded host made shorter).
    assert!(took.as_millis() > 2000, "the dump took {took:?}");
}

/// `backtrace` (Linux's sysrq-l): every other CPU's call chain, taken by NMI,
/// stopping nothing: the idle ones in their loop, one hung with interrupts off
/// where it spins (the detector off, so that it stays hung).
#[test]
fn backtrace_shows_every_other_cpus_call_chain_by_nmi() {
    let mut m = boot_with_cpus(4);
    let chain = |out: &str, cpu: usize| -> Vec<String> {
        let at = out.find(&format!("NMI backtrace for cpu {cpu}:\n"));
        let lines = out[at.unwrap_or_else(|| panic!("cpu {cpu}: {out}"))..].lines().skip(1);
        let frames = lines.take_while(|l| l.starts_with("RIP: ") || l.starts_with(" => "));
        frames.map(|l| l[4..].trim_start().to_string()).collect()
    };
    let out = m.run("backtrace");
    assert!(out.ends_with("3 of 3 other CPU(s) answered\n"), "{out}");
    for cpu in 1..4 {
        let frames = chain(&out, cpu);
        assert!(frames.iter().any(|f| f.starts_with("kernel::smp::ap_main+")), "{out}");
    }
    m.run("lockup threshold 0");
    assert_eq!(m.run("lockup spin 2"), "cpu2: interrupts off, spinning\n");
    let out = m.run("backtrace");
    let frames = chain(&out, 2);
    assert!(frames[0].starts_with("kernel::smp::on_call_interrupt+"), "{out}");
    assert!(frames.iter().any(|f| f.starts_with("kernel::smp::ap_main+")), "{out}");
    assert!(m.run("backtrace x").contains("usage"));
    // A CPU that takes no NMI (spinning in one) gives no answer, and is named.
    assert_eq!(m.run("lockup spin nmi 3"), "cpu3: spinning in an NMI handler, NMIs blocked\n");
    let out = m.run("backtrace");
    assert!(out.contains("cpu 3: no answer\n"), "{out}");
    assert!(out.ends_with("2 of 3 other CPU(s) answered\n"), "{out}");
    assert_eq!(m.run_to_exit("poweroff"), Outcome::Success);
}
