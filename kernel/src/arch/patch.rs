//! Live patching of 5-byte instructions in kernel text while every CPU runs it
//! (the static keys' NOP <-> `jmp`), by the int3 protocol:
//!
//! 1. publish the batch of sites, so the breakpoint handler knows them;
//! 2. write `int3` over each site's first byte, and make every CPU serialise;
//! 3. write each site's other four bytes, and serialise everywhere;
//! 4. write each site's new first byte, and serialise everywhere; then withdraw the
//!    batch.
//!
//! At every moment a CPU executes either the old instruction, the new one, or the
//! `int3`, whose handler emulates the new one, as Linux's does: a NOP, the jump, or
//! the call (a function entry's: its return address pushed, then on at the
//! target). An `int3` taken after its patch ended emulates what the site holds by
//! then. QEMU's TCG can run a stale block translated from the `int3` long after the
//! patch: every call of a function whose entry became a call then meets it, and is
//! traced only because the call is emulated. "Serialise
//! everywhere" is the caller's `sync`: an IPI each other CPU acknowledges (its `iret`
//! serialises) and a serialising instruction here. A CPU acknowledges only with
//! interrupts on, so after step 4's no CPU is still in the handler for this batch.
//!
//! The handler returns from a patch site without `iret`, with `popfq; ret` on the
//! interrupted stack: an `iret` would end the NMI-blocking of an NMI handler that hit
//! a site, and a second NMI would then overwrite the first's frame on the NMI stack.
//! Text stays read-only: the bytes are written through the physical-memory window.

use super::irq::HandlerGuard;
use super::percpu;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use spin::Mutex;
use trace::event::key::{CALL, JMP};
use x86_64::structures::idt::InterruptStackFrame;

/// Bytes a site holds.
pub const SITE_LEN: usize = 5;
/// Most sites patched in one batch (a key with more is patched in several).
const MAX_BATCH: usize = 128;
/// The `int3` opcode.
const INT3: u8 = 0xcc;

/// The sites of the batch being patched (the breakpoint handler's view).
static BATCH: [AtomicU64; MAX_BATCH] = [const { AtomicU64::new(0) }; MAX_BATCH];
/// The new bytes of each site of [`BATCH`] (little-endian in the low five bytes).
static BATCH_BYTES: [AtomicU64; MAX_BATCH] = [const { AtomicU64::new(0) }; MAX_BATCH];
/// How many entries of [`BATCH`] are live (0: no patch in progress).
static BATCH_LEN: AtomicUsize = AtomicUsize::new(0);
/// One patch at a time.
static PATCHING: Mutex<()> = Mutex::new(());
/// Most distinct sites this module patches in a boot.
pub const MAX_SITES: usize = 4096;
/// Every site ever patched (the first [`KNOWN_LEN`]), for an `int3` taken late.
static KNOWN: [AtomicU64; MAX_SITES] = [const { AtomicU64::new(0) }; MAX_SITES];
static KNOWN_LEN: AtomicUsize = AtomicUsize::new(0);
/// `int3`s taken at a site while its patch ran, and after it ended.
static TRAPS: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];

/// How many CPUs met a site's `int3` while its patch ran, and after it ended (see
/// [`resume_at`]).
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
    for batch in pokes.chunks(MAX_BATCH) {
        for ((slot, bytes), poke) in BATCH.iter().zip(&BATCH_BYTES).zip(batch) {
            slot.store(poke.site, Ordering::Relaxed);
            let mut word = [0; 8];
            word[..SITE_LEN].copy_from_slice(&poke.bytes);
            bytes.store(u64::from_le_bytes(word), Ordering::Relaxed);
        }
        // Release: stores are seen in order (x86), so a CPU that meets an `int3`
        // written below, and then takes the trap (which serialises), sees the batch.
        BATCH_LEN.store(batch.len(), Ordering::Release);
        let write = |at: *mut u8, byte: u8| {
            // SAFETY: the caller guarantees `at` maps a byte of a site writable;
            // every CPU sees one of the protocol's states of the site meanwhile.
            unsafe { at.write_volatile(byte) }
        };
        batch.iter().for_each(|p| write(p.alias[0], INT3));
        serialise_everywhere(&sync);
        for poke in batch {
            (1..SITE_LEN).for_each(|i| write(poke.alias[i], poke.bytes[i]));
        }
        serialise_everywhere(&sync);
        batch.iter().for_each(|p| write(p.alias[0], p.bytes[0]));
        serialise_everywhere(&sync);
        BATCH_LEN.store(0, Ordering::Release);
    }
    Ok(())
}

/// Adds `site` to [`KNOWN`] (the caller holds [`PATCHING`]).
fn remember(site: u64) -> Result<(), &'static str> {
    let len = KNOWN_LEN.load(Ordering::Relaxed);
    if KNOWN[..len].iter().any(|s| s.load(Ordering::Relaxed) == site) {
        return Ok(());
    }
    let slot = KNOWN.get(len).ok_or("too many patched sites")?;
    slot.store(site, Ordering::Relaxed);
    KNOWN_LEN.store(len + 1, Ordering::Release);
    Ok(())
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

/// Where a CPU that hit the `int3` ending at `address` resumes: if a patch of that
/// site is in progress, as the site's new instruction leads; if it is a patched
/// site that holds a whole instruction, as that instruction leads. The latter is a
/// CPU that ran bytes fetched before the patch ended: QEMU's TCG can keep running a
/// block it translated from the `int3`, so the site is emulated rather than run
/// again. `None`: not a site's `int3`.
fn resume_at(address: u64) -> Option<Resume> {
    let site = address.checked_sub(1)?;
    let len = BATCH_LEN.load(Ordering::Acquire).min(MAX_BATCH);
    if let Some(i) = BATCH[..len].iter().position(|s| s.load(Ordering::Relaxed) == site) {
        TRAPS[0].fetch_add(1, Ordering::Relaxed);
        let word = BATCH_BYTES[i].load(Ordering::Relaxed).to_le_bytes();
        let mut bytes = [0; SITE_LEN];
        bytes.copy_from_slice(&word[..SITE_LEN]);
        return Some(emulate(site, bytes));
    }
    let known = KNOWN_LEN.load(Ordering::Acquire);
    if !KNOWN[..known].iter().any(|s| s.load(Ordering::Relaxed) == site) {
        return None;
    }
    // SAFETY: `site` is a patched site: 5 bytes of kernel text, mapped and readable;
    // `patch` changes them only by whole-byte writes.
    let bytes: [u8; SITE_LEN] =
        core::array::from_fn(|i| unsafe { (site as *const u8).add(i).read_volatile() });
    TRAPS[1].fetch_add(1, Ordering::Relaxed);
    Some(emulate(site, bytes))
}

/// Where the 5-byte instruction `bytes` at `site` leads: the jump's target, the
/// call's (its return address, the site's end, pushed), or the site's end (the
/// NOP; or, between two patches, the next one's `int3`: a NOP too).
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
