//! The application processors: bringing them up, asking them to do things through
//! the call IPI, taking their call chains by NMI (`backtrace`), and stopping them
//! all (by NMI) when one CPU panics.

use crate::arch::apic::{self, Destination, Ipi};
use crate::arch::hooks::Hooks;
use crate::arch::{irq, percpu};
use crate::{arch, clock, memory, timer};
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// Stack size of each application processor.
const AP_STACK_SIZE: usize = 128 * 1024;
/// How long a starting CPU has to report in.
const START_TIMEOUT_NS: u64 = 1_000_000_000;
/// How long another CPU has to answer an NMI (stop, backtrace, spin): a host may not
/// run a virtual CPU for tens of milliseconds. (Linux's x86 stop waits 1 s for its
/// IPI, then 10 ms for the NMI it sends those that did not stop.) A CPU that cannot
/// take the NMI (one held in an NMI handler) costs that second.
const ANSWER_NS: u64 = 1_000_000_000;
// The spin aids' errors name it.
const _: () = assert!(ANSWER_NS == 1_000_000_000);

/// CPUs running, the boot CPU included.
static ONLINE: AtomicUsize = AtomicUsize::new(1);
/// The index of the CPU the boot CPU is waiting for, until that CPU arrives or the
/// boot CPU gives up on it (`usize::MAX`): whichever takes it first. A CPU that
/// arrives too late stops at once, so no CPU runs kernel code (or writes a trace)
/// before it is online but while the boot CPU waits for it.
static ARRIVING: AtomicUsize = AtomicUsize::new(usize::MAX);
/// CPUs stopped by the panic NMI.
static STOPPED: AtomicUsize = AtomicUsize::new(0);
/// Set once a CPU panics: any NMI from then on stops the CPU that takes it, but
/// the one that panics ([`STOPPER`]).
static STOPPING: AtomicBool = AtomicBool::new(false);
/// The CPU that stops the others (the lockup detector's periodic NMI may reach it
/// while it dumps).
static STOPPER: AtomicUsize = AtomicUsize::new(usize::MAX);
/// Frames of a CPU's call chain kept by its backtrace NMI.
const BACKTRACE_FRAMES: usize = 24;
/// Per CPU: its call chain where its last backtrace NMI (the panic's stop, or
/// [`request_backtraces`]) found it, from the address the NMI interrupted outward
/// (ELF addresses; 0 after the last).
static BACKTRACES: [[AtomicU64; BACKTRACE_FRAMES]; arch::MAX_CPUS] =
    [const { [const { AtomicU64::new(0) }; BACKTRACE_FRAMES] }; arch::MAX_CPUS];
/// Hooks each CPU the panic stops runs before it parks, with its call chain (from
/// where the NMI struck outward; the tracing layer records it).
pub static STOP: Hooks<fn(&[u64]), 1> = Hooks::new();
/// Per CPU: spinning with interrupts off for [`spin()`].
static SPINNING: [AtomicBool; arch::MAX_CPUS] = [const { AtomicBool::new(false) }; arch::MAX_CPUS];
/// Per CPU: to hang in its next NMI, NMIs blocked ([`spin_in_nmi`]).
static SPIN_IN_NMI: [AtomicBool; arch::MAX_CPUS] =
    [const { AtomicBool::new(false) }; arch::MAX_CPUS];
/// Per CPU: hanging there, to panic once another CPU's panic stops the others.
static PANIC_WHEN_STOPPED: [AtomicBool; arch::MAX_CPUS] =
    [const { AtomicBool::new(false) }; arch::MAX_CPUS];
/// Per CPU: asked for its call chain at its next NMI.
static WANTED: [AtomicBool; arch::MAX_CPUS] = [const { AtomicBool::new(false) }; arch::MAX_CPUS];

/// Requests one CPU can post to another (see [`call`]), carried out by the target's
/// call IPI handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Request {
    /// Panic on purpose (to test the panic path on an application processor).
    Panic = 1,
    /// Hang with interrupts off, for good (to test the hard lockup detector).
    Spin = 2,
}

/// Number of CPUs running.
pub fn online() -> usize {
    ONLINE.load(Ordering::Acquire)
}

/// Starts every processor the firmware lists besides the boot CPU, one at a time,
/// through a trampoline at `low_page`. Returns how many came up.
pub fn start_application_processors(apic_ids: &[u32], low_page: x86_64::PhysAddr) -> usize {
    let ids: Vec<u32> = apic_ids.iter().copied().filter(|&id| id != apic::id()).collect();
    if ids.is_empty() {
        return 0;
    }
    let trampoline = match memory::install_trampoline(low_page) {
        Ok(trampoline) => trampoline,
        Err(reason) => {
            crate::println!("smp: cannot start other CPUs: {reason}");
            return 0;
        }
    };
    if ids.len() >= arch::MAX_CPUS {
        crate::println!(
            "smp: {} CPUs found; this kernel runs at most {} and leaves the others off",
            ids.len() + 1,
            arch::MAX_CPUS
        );
    }
    let mut started = 0;
    for apic_id in ids.into_iter().take(arch::MAX_CPUS - 1) {
        let index = online();
        let stack = match memory::guarded_stack(index, AP_STACK_SIZE) {
            Ok(stack) => stack,
            Err(reason) => {
                crate::println!("smp: no stack for cpu {index}: {reason}");
                break;
            }
        };
        percpu::get(index).expect("index below MAX_CPUS").request.store(0, Ordering::Relaxed);
        arch::stack::set_kernel_stack(index, stack.start, stack.end);
        ARRIVING.store(index, Ordering::Relaxed);
        trampoline.start_cpu(apic_id, ap_main, index, stack.end, clock::delay_us);
        let deadline = clock::now_ns() + START_TIMEOUT_NS;
        while online() == index && clock::now_ns() < deadline {
            core::hint::spin_loop();
        }
        // Too late: the CPU, if it ever arrives, finds it given up. Arrived meanwhile:
        // it comes online without waiting for anything, and is waited for (it runs
        // kernel code already, so nothing else may start before it is online).
        let given_up = ARRIVING
            .compare_exchange(index, usize::MAX, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok();
        let mut warned = false;
        while !given_up && online() == index {
            if !warned && clock::now_ns() > deadline + START_TIMEOUT_NS {
                warned = true;
                crate::println!("smp: cpu {index} started but is not online yet; still waiting");
            }
            core::hint::spin_loop();
        }
        if given_up {
            // Back to waiting for a startup IPI, where it runs nothing: stopped in
            // `ap_main` it would have no IDT, and the panic's NMI to every other
            // CPU would triple-fault it (and reset the machine).
            apic::send_ipi(Destination::Apic(apic_id), Ipi::Init);
            crate::println!("smp: cpu with APIC id {apic_id} did not start");
            break;
        }
        started += 1;
    }
    started
}

/// Where an application processor arrives from the trampoline.
extern "C" fn ap_main(index: usize) -> ! {
    if ARRIVING.compare_exchange(index, usize::MAX, Ordering::AcqRel, Ordering::Relaxed).is_err() {
        // The boot CPU gave up on this CPU (and started no other after it): it must
        // not run, or trace, outside what the tracer's barrier reaches.
        arch::halt_forever();
    }
    percpu::init_this_cpu(index, apic::id());
    arch::gdt::init_this_cpu(index);
    arch::idt::init_this_cpu();
    apic::init_this_cpu();
    timer::start_this_cpu();
    // Release: everything this CPU set up happens-before the boot CPU sees it online.
    ONLINE.fetch_add(1, Ordering::Release);
    let cpu = percpu::current();
    loop {
        let work = cpu.work.lock().take();
        match work {
            Some(work) => {
                x86_64::instructions::interrupts::enable();
                irq::set_busy(true);
                work();
                irq::set_busy(false);
                // Release: what the work wrote comes before its being counted done.
                cpu.works_done.fetch_add(1, Ordering::Release);
            }
            None => irq::wait_for_interrupt_unless(|| cpu.work.lock().is_some()),
        }
    }
}

/// Makes every application processor run `work` once, in thread context with
/// interrupts enabled, from its idle loop. Fails if a CPU still has work pending
/// (the CPUs before it have theirs posted).
pub fn post_work(work: fn()) -> Result<(), &'static str> {
    (1..online()).try_for_each(|index| post_work_to(index, work))
}

/// Runs `work` on every CPU online: posted to each application processor (as
/// [`post_work`]), then here; returns once each has finished it. `Err` if a CPU had
/// work pending, or one did not finish within `timeout_ns` of this CPU's (its work
/// may still run later). Thread context, interrupts on.
pub fn run_everywhere(work: fn(), timeout_ns: u64) -> Result<(), &'static str> {
    let done = |index| percpu::get(index).map_or(0, |cpu| cpu.works_done.load(Ordering::Acquire));
    let before: Vec<(usize, u64)> = (1..online()).map(|index| (index, done(index))).collect();
    post_work(work)?;
    work();
    let give_up = clock::now_ns().saturating_add(timeout_ns);
    for &(index, was) in &before {
        while done(index) == was {
            if clock::now_ns() > give_up {
                return Err("a CPU did not finish its work in time");
            }
            core::hint::spin_loop();
        }
    }
    Ok(())
}

/// Makes application processor `index` run `work` once, as [`post_work`] does.
/// Fails if there is no such application processor (the boot CPU is not one) or it
/// has work pending.
pub fn post_work_to(index: usize, work: fn()) -> Result<(), &'static str> {
    if index == 0 || index >= online() {
        return Err("no such application processor");
    }
    let cpu = percpu::get(index).ok_or("no such CPU")?;
    let mut slot = cpu.work.lock();
    if slot.is_some() {
        return Err("that CPU has work pending");
    }
    *slot = Some(work);
    drop(slot);
    apic::send_ipi(Destination::Apic(cpu.apic_id()), Ipi::Fixed(apic::CALL_VECTOR));
    Ok(())
}

/// Posts `request` to CPU `index` and interrupts it. Fails if there is no such CPU
/// or it has a request pending.
pub fn call(index: usize, request: Request) -> Result<(), &'static str> {
    if index >= online() {
        return Err("no such CPU");
    }
    let cpu = percpu::get(index).ok_or("no such CPU")?;
    cpu.request
        .compare_exchange(0, request as u32, Ordering::AcqRel, Ordering::Relaxed)
        .map_err(|_| "that CPU has a request pending")?;
    apic::send_ipi(Destination::Apic(cpu.apic_id()), Ipi::Fixed(apic::CALL_VECTOR));
    Ok(())
}

/// Adds the call IPI's and the NMI's hooks (before any other NMI hook: a CPU told
/// to stop parks first).
pub fn init() -> Result<(), &'static str> {
    arch::idt::CALL.add(on_call_interrupt)?;
    arch::idt::NMI.add(on_nmi)
}

/// The call IPI's handler: carries out this CPU's pending request.
fn on_call_interrupt() {
    let request = percpu::current().request.swap(0, Ordering::AcqRel);
    if request == Request::Panic as u32 {
        panic!("deliberate panic requested on cpu {}", percpu::index());
    }
    if request == Request::Spin as u32 {
        // Interrupts are off in the handler: only an NMI gets this CPU out.
        SPINNING[percpu::index()].store(true, Ordering::SeqCst);
        loop {
            core::hint::spin_loop();
        }
    }
}

/// Hangs CPU `index` with interrupts off, for good ([`Request::Spin`]), and waits
/// (up to [`ANSWER_NS`]) until it spins. Fails if there is no such CPU, it has a request
/// pending, or it does not start.
pub fn spin(index: usize) -> Result<(), &'static str> {
    call(index, Request::Spin)?;
    spinning(index, "the CPU did not start spinning within 1 s")
}

/// Waits (up to [`ANSWER_NS`]) until CPU `index` says it spins; `Err(late)` if it
/// does not.
fn spinning(index: usize, late: &'static str) -> Result<(), &'static str> {
    let deadline = clock::now_ns() + ANSWER_NS;
    while !SPINNING[index].load(Ordering::SeqCst) {
        if clock::now_ns() > deadline {
            return Err(late);
        }
        core::hint::spin_loop();
    }
    Ok(())
}

/// Hangs CPU `index` (not this one) in an NMI handler: NMIs stay blocked there, so
/// not even an NMI gets it out (a test aid for the hard lockup detector), for good
/// or, with `panic_when_stopped`, until another CPU's panic stops the others, when
/// it panics too (a test aid for two panics at once). Waits (up to [`ANSWER_NS`]) until it
/// spins; fails if there is no such CPU or it does not start.
pub fn spin_in_nmi(index: usize, panic_when_stopped: bool) -> Result<(), &'static str> {
    if index == percpu::index() {
        return Err("not this CPU: the shell would hang with it");
    }
    let flag = SPIN_IN_NMI.get(index).ok_or("no such CPU")?;
    PANIC_WHEN_STOPPED[index].store(panic_when_stopped, Ordering::SeqCst);
    flag.store(true, Ordering::SeqCst);
    nmi(index).inspect_err(|_| flag.store(false, Ordering::SeqCst))?;
    // Once the NMI is sent it spins there, whenever it takes it: a CPU slow to
    // say so is spinning all the same.
    spinning(index, "the NMI was sent, but the CPU did not say it spins within 1 s")
}

/// Sends an NMI to CPU `index`. Fails if there is no such CPU.
pub fn nmi(index: usize) -> Result<(), &'static str> {
    let cpu = percpu::get(index).filter(|_| index < online()).ok_or("no such CPU")?;
    apic::send_ipi(Destination::Apic(cpu.apic_id()), Ipi::Nmi);
    Ok(())
}

/// Keeps this CPU's call chain where the NMI it is handling found it: the frames
/// from the address the NMI interrupted outward (the NMI's own left out), at most
/// [`BACKTRACE_FRAMES`]. Returns them and how many there are.
fn note_backtrace() -> ([u64; BACKTRACE_FRAMES], usize) {
    let mut frames = [0u64; 2 * BACKTRACE_FRAMES];
    let depth = arch::stack::stack_trace(&mut frames);
    let interrupted = arch::stack::nmi_ip();
    let from = frames[..depth].iter().position(|&f| f == interrupted).unwrap_or(depth);
    let mut chain = [0u64; BACKTRACE_FRAMES];
    let len = chain.iter_mut().zip(&frames[from..depth]).map(|(slot, &f)| *slot = f).count();
    if let Some(kept) = BACKTRACES.get(percpu::index()) {
        kept.iter().zip(chain).for_each(|(slot, frame)| slot.store(frame, Ordering::Relaxed));
    }
    (chain, len)
}

/// The call chain of CPU `cpu` where its last backtrace NMI found it, from the
/// address the NMI interrupted outward (ELF addresses); empty for a CPU that took
/// none.
pub fn backtrace(cpu: usize) -> impl Iterator<Item = u64> {
    let kept = BACKTRACES.get(cpu).into_iter().flatten();
    kept.map(|frame| frame.load(Ordering::Relaxed)).take_while(|&frame| frame != 0)
}

/// Asks every other CPU for its call chain by NMI, as Linux's `sysrq-l` does, and
/// waits (up to [`ANSWER_NS`]) for them: each keeps it ([`backtrace`]) and goes on.
/// Returns how many answered.
pub fn request_backtraces() -> usize {
    let this = percpu::index();
    let others: Vec<usize> = (0..online()).filter(|&cpu| cpu != this).collect();
    for &cpu in &others {
        // A CPU that does not answer shows no chain, not an old one.
        BACKTRACES[cpu][0].store(0, Ordering::SeqCst);
        WANTED[cpu].store(true, Ordering::SeqCst);
        let _ = nmi(cpu);
    }
    let deadline = clock::now_ns() + ANSWER_NS;
    let pending = || others.iter().filter(|&&cpu| WANTED[cpu].load(Ordering::SeqCst)).count();
    while pending() > 0 && clock::now_ns() < deadline {
        core::hint::spin_loop();
    }
    others.len() - pending()
}

/// Stops every other CPU with an NMI and waits (up to [`ANSWER_NS`]) until they have,
/// each keeping its call chain ([`backtrace`]). Returns how many stopped. For the
/// panic path.
pub fn stop_other_cpus() -> usize {
    // A CPU that does not stop shows no chain, not one an earlier request left
    // (cleared before any CPU can stop and keep its own).
    for cpu in (0..online()).filter(|&cpu| cpu != percpu::index()) {
        BACKTRACES[cpu][0].store(0, Ordering::SeqCst);
    }
    STOPPER.store(percpu::index(), Ordering::SeqCst);
    STOPPING.store(true, Ordering::SeqCst);
    let others = online() - 1;
    if others == 0 {
        return 0;
    }
    apic::send_ipi(Destination::AllButSelf, Ipi::Nmi);
    let deadline = clock::now_ns() + ANSWER_NS;
    while STOPPED.load(Ordering::Acquire) < others && clock::now_ns() < deadline {
        core::hint::spin_loop();
    }
    STOPPED.load(Ordering::Acquire)
}

/// The NMI handler's work: once a CPU panics, an NMI parks any other CPU that
/// takes it (which keeps its call chain first) and leaves the panicking one's
/// trace alone; otherwise it keeps the chain if asked, and the NMI is traced.
fn on_nmi() {
    if STOPPING.load(Ordering::SeqCst) {
        if STOPPER.load(Ordering::SeqCst) == percpu::index() {
            return;
        }
        let (chain, len) = note_backtrace();
        STOP.for_each(|hook| hook(&chain[..len]));
        STOPPED.fetch_add(1, Ordering::Release);
        arch::halt_forever();
    }
    if SPIN_IN_NMI.get(percpu::index()).is_some_and(|spin| spin.load(Ordering::SeqCst)) {
        SPINNING[percpu::index()].store(true, Ordering::SeqCst);
        let panics = PANIC_WHEN_STOPPED[percpu::index()].load(Ordering::SeqCst);
        while !(panics && STOPPING.load(Ordering::SeqCst)) {
            core::hint::spin_loop();
        }
        panic!("deliberate panic on cpu {}, in an NMI, during another's panic", percpu::index());
    }
    if WANTED.get(percpu::index()).is_some_and(|wanted| wanted.load(Ordering::SeqCst)) {
        note_backtrace();
        WANTED[percpu::index()].store(false, Ordering::SeqCst);
    }
    trace::emit!(crate::events::NMI, false);
}
