//! Live patching of 5-byte instructions in kernel text while every CPU runs it
//! (the static keys' NOP <-> `jmp`), by the int3 protocol:
//!
//! 1. record each site's new bytes where the breakpoint handler finds them: one
//!    word per site, so the handler reads them whole;
//! 2. write `int3` over each site's first byte, and make every CPU serialise;
//! 3. write each site's other four bytes, and serialise everywhere;
//! 4. write each site's new first byte, and serialise everywhere.
//!
//! At every moment a CPU executes either the old instruction, the new one, or the
//! `int3`, whose handler emulates the instruction the site is getting or has, as
//! Linux's does: a NOP, the jump, or the call (a function entry's: its return
//! address pushed, then on at the target). QEMU's TCG can run a stale block
//! translated from the `int3` long after the patch, even during a later patch of
//! other sites: every call of a function whose entry became a call then meets it,
//! and is traced only because the call is emulated. So the handler may run at any
//! time, and reads nothing that a later patch rewrites for another site: a site's
//! word is only ever replaced by newer bytes of the same site. (Sites and their
//! bytes once lay in a batch table that each patch rewrote: a late `int3` read a
//! site from one batch and the bytes of the site at the same place in the next, and
//! jumped into `.rodata`.) "Serialise everywhere" is the caller's `sync`: an IPI
//! each other CPU acknowledges (its `iret` serialises) and a serialising
//! instruction here.
//!
//! The handler returns from a patch site without `iret`, with `popfq; ret` on the
//! interrupted stack: an `iret` would end the NMI-blocking of an NMI handler that hit
//! a site, and a second NMI would then overwrite the first's frame on the NMI stack.
//! Text stays read-only: the bytes are written through the physical-memory window.

use super::irq::HandlerGuard;
use super::percpu;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, compiler_fence};
use spin::Mutex;
use trace::event::key::{CALL, JMP};
use x86_64::structures::idt::InterruptStackFrame;

/// Bytes a site holds.
pub const SITE_LEN: usize = 5;
/// The `int3` opcode.
const INT3: u8 = 0xcc;

/// One patch at a time.
static PATCHING: Mutex<()> = Mutex::new(());
/// Whether a patch is in progress (for [`traps`]).
static IN_PATCH: AtomicBool = AtomicBool::new(false);
/// Most distinct sites this module patches in a boot.
pub const MAX_SITES: usize = 4096;
/// Every site ever patched (the first [`KNOWN_LEN`]); an entry never changes.
static KNOWN: [AtomicU64; MAX_SITES] = [const { AtomicU64::new(0) }; MAX_SITES];
/// The bytes each site of [`KNOWN`] holds, or is getting while it is patched
/// (little-endian in the low five bytes).
static BYTES: [AtomicU64; MAX_SITES] = [const { AtomicU64::new(0) }; MAX_SITES];
static KNOWN_LEN: AtomicUsize = AtomicUsize::new(0);
/// `int3`s taken at a site while a patch ran, and while none did.
static TRAPS: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];

/// How many CPUs met a site's `int3` while a patch ran, and while none did (a stale
/// block, see the module documentation).
pub fn traps() -> (u64, u64) {
    (TRAPS[0].load(Ordering::Relaxed), TRAPS[1].load(Ordering::Relaxed))
}

/// One site to patch: where it is executed, where its bytes can be written, and
/// what it becomes.
#[derive(Clone, Copy, Debug)]
pub struct Poke {
    /// The site's address in kernel text.
    pub site: u64,
    /// Where each of its bytes is writable (the physical-memory window).
    pub alias: [*mut u8; SITE_LEN],
    /// Its new bytes.
    pub bytes: [u8; SITE_LEN],
}

/// Patches `pokes` by the int3 protocol (module documentation); `sync` must return
/// once every other CPU has taken an interrupt after the call began. Thread
/// context, interrupts on (`sync` waits for the other CPUs).
///
/// # Safety
/// Each poke's site must be the start of a 5-byte instruction that every CPU may
/// execute and that is only ever replaced by another 5-byte instruction, each byte's
/// alias must map the same physical byte writable, and the new bytes must be an
/// instruction the code may run in the site's place.
pub unsafe fn patch(pokes: &[Poke], sync: impl Fn()) -> Result<(), &'static str> {
    let _one = PATCHING.lock();
    for poke in pokes {
        remember(poke.site)?;
    }
    IN_PATCH.store(true, Ordering::Relaxed);
    for poke in pokes {
        let mut word = [0; 8];
        word[..SITE_LEN].copy_from_slice(&poke.bytes);
        // Every site is known by now: this finds it.
        let index = remember(poke.site)?;
        BYTES[index].store(u64::from_le_bytes(word), Ordering::Relaxed);
    }
    // The words are stored before any `int3` below (x86 keeps stores in order; this
    // keeps the compiler from moving them): a CPU that meets one, and then takes the
    // trap, reads the site's new bytes.
    compiler_fence(Ordering::SeqCst);
    let write = |at: *mut u8, byte: u8| {
        // SAFETY: the caller guarantees `at` maps a byte of a site writable; every
        // CPU sees one of the protocol's states of the site meanwhile.
        unsafe { at.write_volatile(byte) }
    };
    pokes.iter().for_each(|p| write(p.alias[0], INT3));
    serialise_everywhere(&sync);
    for poke in pokes {
        (1..SITE_LEN).for_each(|i| write(poke.alias[i], poke.bytes[i]));
    }
    serialise_everywhere(&sync);
    pokes.iter().for_each(|p| write(p.alias[0], p.bytes[0]));
    serialise_everywhere(&sync);
    IN_PATCH.store(false, Ordering::Relaxed);
    Ok(())
}

/// Adds `site` to [`KNOWN`] unless it is there; returns where it is (the caller
/// holds [`PATCHING`]).
fn remember(site: u64) -> Result<usize, &'static str> {
    if let Some(index) = known_index(site) {
        return Ok(index);
    }
    let len = KNOWN_LEN.load(Ordering::Relaxed);
    let slot = KNOWN.get(len).ok_or("too many patched sites")?;
    slot.store(site, Ordering::Relaxed);
    KNOWN_LEN.store(len + 1, Ordering::Release);
    Ok(len)
}

/// Where `site` is in [`KNOWN`], if it was ever patched.
fn known_index(site: u64) -> Option<usize> {
    let known = KNOWN_LEN.load(Ordering::Acquire).min(MAX_SITES);
    KNOWN[..known].iter().position(|s| s.load(Ordering::Relaxed) == site)
}

/// Makes every CPU execute a serialising instruction after the call began.
fn serialise_everywhere(sync: &impl Fn()) {
    // `cpuid` serialises this CPU before it runs code that may hold a site (the
    // IPI's own tracepoint).
    core::arch::x86_64::__cpuid(0);
    sync();
}

/// Where a CPU that hit a site's `int3` goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Resume {
    /// At this address.
    At(u64),
    /// At `target`, as the site's `call` goes: with `ret`, the site's end, pushed as
    /// the return address.
    Call { target: u64, ret: u64 },
}

/// Where a CPU that hit the `int3` ending at `address` resumes: as the patched
/// site's instruction leads, the one it is getting or has ([`BYTES`]). `None`: not a
/// site's `int3`.
fn resume_at(address: u64) -> Option<Resume> {
    let site = address.checked_sub(1)?;
    let word = BYTES[known_index(site)?].load(Ordering::Relaxed).to_le_bytes();
    let mut bytes = [0; SITE_LEN];
    bytes.copy_from_slice(&word[..SITE_LEN]);
    TRAPS[usize::from(!IN_PATCH.load(Ordering::Relaxed))].fetch_add(1, Ordering::Relaxed);
    Some(emulate(site, bytes))
}

/// Where the 5-byte instruction `bytes` at `site` leads: the jump's target, the
/// call's (its return address, the site's end, pushed), or the site's end (the NOP).
fn emulate(site: u64, bytes: [u8; SITE_LEN]) -> Resume {
    let after = site + SITE_LEN as u64;
    let target = |rel: [u8; 4]| after.wrapping_add_signed(i32::from_le_bytes(rel).into());
    match bytes {
        [JMP, rel @ ..] => Resume::At(target(rel)),
        [CALL, rel @ ..] => Resume::Call { target: target(rel), ret: after },
        _ => Resume::At(after),
    }
}

/// [`breakpoint_trap`]'s answer to its entry: return with `iretq`.
const IRET: u64 = 0;
/// [`breakpoint_trap`]'s answer to its entry: resume at the frame's instruction
/// pointer without `iret`. Any other answer is a return address to push on the
/// interrupted stack first (an emulated call).
const RESUME: u64 = 1;

/// The breakpoint handler's body: resumes past a site's `int3` as [`resume_at`]
/// says ([`RESUME`], or the return address an emulated call pushes), or reports a
/// breakpoint and returns to the code after it ([`IRET`]).
extern "C" fn breakpoint_trap(frame: &mut InterruptStackFrame) -> u64 {
    if let Some(resume) = resume_at(frame.instruction_pointer.as_u64()) {
        let (at, answer) = match resume {
            Resume::At(at) => (at, RESUME),
            Resume::Call { target, ret } => (target, ret),
        };
        // SAFETY: only the return address changes: to the end of the 5-byte site the
        // `int3` stands for (the next instruction after its NOP), or to the target of
        // the jump or the call the site holds or is getting, both instructions the
        // code may run there; the entry pushes the call's return address.
        unsafe { frame.as_mut().update(|f| f.instruction_pointer = x86_64::VirtAddr::new(at)) };
        return answer;
    }
    let _handler = HandlerGuard::enter();
    crate::emergency_println!(
        "EXCEPTION: BREAKPOINT (vector 3) on cpu {}: rip={:#x} rsp={:#x} (recovered)",
        percpu::index(),
        frame.instruction_pointer.as_u64(),
        frame.stack_pointer.as_u64()
    );
    IRET
}

/// The breakpoint (#BP) entry, installed without an IST stack (so frames nest): saves
/// the registers the C ABI lets [`breakpoint_trap`] clobber, calls it, and returns
/// with `iretq`, or, at a patch site, with `popfq; ret` on the interrupted stack.
#[unsafe(naked)]
pub(super) extern "C" fn breakpoint_entry() {
    core::arch::naked_asm!(
        // The CPU pushed RIP, CS, RFLAGS, RSP, SS (40 bytes, below a 16-aligned RSP):
        // nine pushes leave RSP 16-aligned for the call.
        super::push_scratch!(),
        "lea rdi, [rsp + 72]",
        "call {trap}",
        // IRET (0): `iretq`. Otherwise resume without `iret`: push the answer unless
        // it is RESUME (1) on the interrupted stack, as the emulated call's return
        // address; put RFLAGS and RIP below it (no red zone in the kernel; this
        // overwrites at most the frame's RFLAGS, RSP and SS slots, the first two read
        // first, SS unused) and keep that stack pointer in the frame's CS slot. ZF
        // tells the `jz` after the pops which return to take: no instruction from
        // the last `test` to there writes the flags.
        "test rax, rax",
        "jz 2f",
        "mov rcx, [rsp + 72]",
        "mov rdx, [rsp + 88]",
        "mov rsi, [rsp + 96]",
        "cmp rax, {resume}",
        "je 1f",
        "lea rsi, [rsi - 8]",
        "mov [rsi], rax",
        "1:",
        "lea rsi, [rsi - 16]",
        "mov [rsi + 8], rcx",
        "mov [rsi], rdx",
        "mov [rsp + 80], rsi",
        "test rax, rax",
        "2:",
        super::pop_scratch!(),
        "jz 3f",
        // Switch to that stack, `popfq`, `ret`.
        "mov rsp, [rsp + 8]",
        "popfq",
        "ret",
        "3:",
        "iretq",
        trap = sym breakpoint_trap,
        resume = const RESUME,
    )
}
