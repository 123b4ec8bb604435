//! Static keys: each tracepoint site is a 5-byte NOP in kernel text while no
//! instance fires its event, and a jump to its recording path while one does; the
//! sites are patched while every CPU runs them.

use e2e::{Machine, STEP_TIMEOUT};
use std::time::Duration;

/// One line of `keys`: the site's address, state, bytes, function and target.
#[derive(Debug, PartialEq)]
struct Site {
    address: String,
    state: String,
    bytes: Vec<u8>,
    function: String,
    target: String,
}

/// The sites `keys EVENT` lists.
fn sites(machine: &mut Machine, event: &str) -> Vec<Site> {
    let listing = machine.run(&format!("keys {event}"));
    let sites: Vec<Site> = listing
        .lines()
        .filter(|l| l.starts_with("0x"))
        .map(|line| {
            let words: Vec<&str> = line.split(' ').collect();
            assert_eq!(words.len(), 11, "{line}");
            assert_eq!(words[1], event, "{line}");
            assert_eq!(words[9], "->", "{line}");
            Site {
                address: words[0].to_string(),
                state: words[2].to_string(),
                bytes: words[3..8].iter().map(|b| u8::from_str_radix(b, 16).unwrap()).collect(),
                function: words[8].to_string(),
                target: words[10].to_string(),
            }
        })
        .collect();
    assert!(!sites.is_empty(), "{event} has sites:\n{listing}");
    let summary = format!("# {} sites, ", sites.len());
    assert!(listing.contains(&summary), "{listing}");
    sites
}

const NOP: [u8; 5] = [0x0f, 0x1f, 0x44, 0x00, 0x00];

/// The function part of `function+0xoffset`.
fn function(at: &str) -> &str {
    at.rsplit_once('+').map_or(at, |(f, _)| f)
}

fn assert_nops(sites: &[Site]) {
    for site in sites {
        assert_eq!((site.state.as_str(), &site.bytes[..]), ("nop", &NOP[..]), "{site:?}");
    }
}

fn assert_jumps(sites: &[Site]) {
    for site in sites {
        assert_eq!(site.state, "jmp", "{site:?}");
        assert_eq!(site.bytes[0], 0xe9, "a jmp rel32: {site:?}");
        // The recording path is the site's own out-of-line block.
        assert_eq!(function(&site.function), function(&site.target), "{site:?}");
        // The kernel's code: a function of its, or a method of one of its types
        // (`<kernel::...>::name`, where the build keeps the site's caller out of line).
        let path = site.function.trim_start_matches('<');
        assert!(path.starts_with("kernel::"), "{site:?}");
    }
}

#[test]
fn a_site_is_a_nop_while_its_event_is_off_and_a_jump_while_any_instance_fires_it() {
    let mut machine = Machine::boot();
    assert!(machine.transcript().contains("keys: "), "the boot checks the sites");
    // stress:cycled is off everywhere at boot.
    let off = sites(&mut machine, "stress:cycled");
    assert_nops(&off);
    machine.run("mkdir instances/a");
    machine.run("echo 1 > instances/a/events/stress/cycled/enable");
    let on = sites(&mut machine, "stress:cycled");
    assert_jumps(&on);
    // A second instance: still a jump; the first turns it off: still a jump.
    machine.run("echo 1 > events/stress/cycled/enable");
    machine.run("echo 0 > instances/a/events/stress/cycled/enable");
    assert_eq!(sites(&mut machine, "stress:cycled"), on);
    // The last instance to fire it goes: every site is its NOP again, byte for byte.
    machine.run("echo 0 > events/stress/cycled/enable");
    assert_eq!(sites(&mut machine, "stress:cycled"), off);
    // Removing an instance that fires it disarms it too.
    machine.run("echo 1 > instances/a/events/stress/cycled/enable");
    assert_jumps(&sites(&mut machine, "stress:cycled"));
    machine.run("rmdir instances/a");
    assert_eq!(sites(&mut machine, "stress:cycled"), off);
    // An event that fires records once armed: the shell's own commands.
    let command = sites(&mut machine, "shell:command");
    assert_jumps(&command);
    assert!(machine.run("cat trace").contains(" command: keys shell:command"), "armed, it records");
    // A pattern that fits no event is refused, naming it; one that fits is listed.
    let typo = machine.run("keys irq:nosuch");
    assert!(typo.contains("no event matches irq:nosuch (SYSTEM:EVENT"), "{typo}");
    assert!(!typo.contains(" sites, "), "nothing is listed: {typo}");
    assert!(machine.run("keys stress:cycle*").contains("stress:cycled nop"));
}

#[test]
fn events_enabled_from_interrupt_context_stay_armed_while_off() {
    let mut machine = Machine::boot();
    // The latency watchdog enables the shell's events from the timer interrupt when
    // it fires, so they stay armed when no instance records them.
    machine.run("echo 0 > events/shell/enable");
    assert_jumps(&sites(&mut machine, "shell:command"));
    // An enable_event trigger's target too, for as long as the trigger exists: the
    // trigger fires in the timer interrupt and enables it there, at once.
    machine.run("echo 'enable_event:stress:cycled:1' > events/timer/tick/trigger");
    assert_jumps(&sites(&mut machine, "stress:cycled"));
    let enabled = (0..100).any(|_| machine.run("cat events/stress/cycled/enable").starts_with('1'));
    assert!(enabled, "the trigger enabled its target from the timer interrupt");
    machine.run("echo '!enable_event:stress:cycled:1' > events/timer/tick/trigger");
    assert_jumps(&sites(&mut machine, "stress:cycled"));
    machine.run("echo 0 > events/stress/cycled/enable");
    assert_nops(&sites(&mut machine, "stress:cycled"));
}

#[test]
fn arming_and_disarming_under_stress_on_4_cpus_keeps_every_count() {
    let _alone = e2e::busy_guest();
    let mut machine = Machine::boot();
    let before = sites(&mut machine, "stress:cycled");
    // Each cycle patches twice, each patch waits for every CPU three times: under
    // TCG the run lasts until the cycles are done.
    let command = "stress overwrite 1000 cycle 1000";
    machine.send(format!("{command}\r").as_bytes());
    machine.wait_for(&format!("{command}\r\n"), STEP_TIMEOUT);
    let report = machine.wait_for_prompt(Duration::from_secs(600));
    assert!(report.contains("stress overwrite: PASS"), "{report}");
    let cycled: Vec<&str> = report.lines().filter(|l| l.starts_with("keys: ")).collect();
    assert_eq!(cycled.len(), 1, "{report}");
    for line in cycled {
        assert!(line.contains("armed and disarmed 1000 of 1000 times"), "{line}");
        assert!(line.ends_with("invariant ok"), "{line}");
        let recorded: u64 =
            line.split(", ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
        assert!(recorded > 0, "events were recorded while armed: {line}");
    }
    assert_eq!(sites(&mut machine, "stress:cycled"), before, "every site is its NOP again");
    let listing = machine.run("keys");
    let traps = listing.lines().last().unwrap();
    println!("{traps}");
}

/// The patcher's int3 protocol watched between its steps (`midpatch`): every CPU
/// runs a tracepoint site and a traced function's entry before each patch and after
/// each of its three steps, in thread context and then in an NMI, and ran the old
/// instruction before the patch and the new one from the step that wrote the `int3`
/// on, through the breakpoint handler's emulation (a jump, a NOP, a call with its
/// return address) while the `int3` stood.
#[test]
fn every_cpu_runs_the_new_instruction_from_the_int3_on_while_a_site_is_patched() {
    const CPUS: usize = 4;
    const CALLEE: &str = "kernel::selftest::midpatch::callee";
    let mut m = Machine::boot();
    let refused = m.run("midpatch");
    assert!(refused.contains("enable selftest:midpatch in an instance first"), "{refused}");
    m.run("mkdir instances/midpatch");
    m.run("echo 1 > instances/midpatch/events/selftest/midpatch/enable");
    let refused = m.run("midpatch");
    assert!(refused.contains(&format!("trace {CALLEE} in an instance first")), "{refused}");
    assert_eq!(m.run(&format!("echo {CALLEE} > instances/midpatch/set_ftrace_filter")), "");
    assert_eq!(m.run("echo function > instances/midpatch/current_tracer"), "");
    assert!(m.run("midpatch now").contains("usage"));
    let out = m.run("midpatch");
    println!("{out}");
    let seen: Vec<&str> = out.lines().collect();
    let patches = [
        "selftest:midpatch's site, jmp -> nop",
        "selftest:midpatch's site, nop -> jmp",
        "callee's entry, call -> nop",
        "callee's entry, nop -> call",
    ];
    assert_eq!(seen.len(), patches.len(), "{out}");
    for (line, patch) in seen.iter().zip(patches) {
        let (name, rest) = line.split_once(": int3 met ").unwrap_or_else(|| panic!("{out}"));
        assert_eq!(name, patch, "{out}");
        let (counts, wrong) = rest.split_once(" times at steps 0-3; ").unwrap();
        // While the `int3` stands (steps 1 and 2) each CPU meets it at least twice
        // (thread, NMI). More, and some at the other steps, are a CPU running a block
        // TCG translated while an `int3` stood, in this patch or an earlier one
        // (`arch::patch`): the handler then emulates the site's bytes as they are, so
        // the trace below holds either way.
        let counts: Vec<u64> = counts.split(' ').map(|c| c.parse().unwrap()).collect();
        assert!(counts[1] >= 2 * CPUS as u64 && counts[2] >= 2 * CPUS as u64, "{line}");
        assert_eq!(wrong, "0 wrong returns", "every emulated call came back: {line}");
    }
    // Each CPU's records, in order, each step's twice (thread, then NMI): the event
    // where the site held its jump (or the `int3` emulating the jump), the function
    // where the entry held its call.
    let trace = m.run("cat instances/midpatch/trace");
    for cpu in 0..CPUS {
        let mut expected = Vec::new();
        for patch in 0..4 {
            for step in 0..4 {
                let new = step > 0;
                let armed = [!new, new, true, true][patch];
                let traced = [true, true, !new, new][patch];
                for context in ["thread", "nmi"] {
                    if armed {
                        expected.push(format!("{context} midpatch: patch={patch} step={step}"));
                    }
                    if traced {
                        expected
                            .push(format!("{context} {CALLEE} <-kernel::selftest::midpatch::fire"));
                    }
                }
            }
        }
        let lines = e2e::cpu_lines(&trace, cpu).join("\n");
        let records: Vec<String> = e2e::trace_lines(&lines)
            .into_iter()
            .map(|l| {
                // The flags' third column: `z` or `Z` in an NMI.
                let nmi = matches!(l.flags.chars().nth(2), Some('z' | 'Z'));
                let context = if nmi { "nmi" } else { "thread" };
                let shown = if l.fields.is_empty() { l.event } else { l.event + ": " + &l.fields };
                format!("{context} {shown}")
            })
            .collect();
        assert_eq!(records, expected, "cpu {cpu}:\n{trace}");
    }
    // The sites end as the instance's tracing left them, and the tracer puts them
    // back when it stops.
    assert_jumps(&sites(&mut m, "selftest:midpatch"));
    let entry = m.run(&format!("functions {CALLEE}"));
    assert!(entry.contains(" call e8 "), "{entry}");
    assert_eq!(m.run("rmdir instances/midpatch"), "");
    assert_nops(&sites(&mut m, "selftest:midpatch"));
    let entry = m.run(&format!("functions {CALLEE}"));
    assert!(entry.contains(" nop"), "{entry}");
}
