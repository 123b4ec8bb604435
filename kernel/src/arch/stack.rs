//! The return addresses of the running call chain, by walking saved frame pointers
//! (the kernel's crates are built with `-C force-frame-pointers=yes`, see
//! `.cargo/config.toml`). The walk reads only the stack the caller runs on and, from
//! an interrupt stack (the NMI's, the double fault's), the part of the CPU's kernel
//! stack the interrupted code had in use, so it cannot fault, whatever the frames
//! hold. A return address the function tracer hooked reads as the one it kept
//! ([`super::ftrace::original_return`]). The kernel is position-independent and
//! the bootloader relocates it, so the addresses are given as in the kernel ELF (the
//! image's load offset subtracted): `report --elf` and `addr2line -e` read them as
//! they are.

use super::{MAX_CPUS, gdt, percpu};
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Each CPU's kernel stack: its lowest address and one past its highest (0, 0 until
/// recorded).
static KERNEL_STACKS: [[AtomicU64; 2]; MAX_CPUS] =
    [const { [AtomicU64::new(0), AtomicU64::new(0)] }; MAX_CPUS];

/// How far the bootloader moved the kernel image from the addresses of its ELF.
static IMAGE_OFFSET: AtomicU64 = AtomicU64::new(0);

/// Per CPU: where its last fatal exception struck, as an address in the kernel ELF
/// (0: none).
static FAULT_IP: [AtomicU64; MAX_CPUS] = [const { AtomicU64::new(0) }; MAX_CPUS];

/// Per CPU: where the interrupt frame of its last fatal exception with an error code
/// lies on the stack (0: none). The handler's frame then holds the error code where
/// a return address would be, and the interrupted address above it.
static ERROR_CODE_FRAME: [AtomicU64; MAX_CPUS] = [const { AtomicU64::new(0) }; MAX_CPUS];

/// Per CPU: the stack pointer its last fatal exception interrupted (0: none).
static FAULT_SP: [AtomicU64; MAX_CPUS] = [const { AtomicU64::new(0) }; MAX_CPUS];

/// Per CPU: the runtime address and the stack pointer the NMI it is handling (or
/// handled last) interrupted.
static NMI_FRAME: [[AtomicU64; 2]; MAX_CPUS] =
    [const { [AtomicU64::new(0), AtomicU64::new(0)] }; MAX_CPUS];

/// Notes that an NMI interrupted this CPU at the runtime address `ip`, its stack
/// pointer at `rsp` (the NMI entry calls it, before the hooks).
pub fn note_nmi(ip: u64, rsp: u64) {
    if let Some([at, sp]) = NMI_FRAME.get(percpu::index()) {
        at.store(ip, Relaxed);
        sp.store(rsp, Relaxed);
    }
}

/// Where a walk on CPU `cpu` at `rsp` goes on when its chain leaves the stack it
/// runs on: on an interrupt stack, the kernel stack above the stack pointer its
/// handler interrupted (the NMI's, or the fatal exception's on the double fault's
/// stack), as lowest address and one past the highest, if that stack pointer is
/// below the kernel stack's top. It may lie below the stack's bottom, in the guard
/// page, when the exception is the stack's overflow; the walk stays within the
/// stack all the same.
fn interrupted_stack(cpu: usize, rsp: u64) -> Option<(u64, u64)> {
    let stacks = gdt::interrupt_stacks(cpu);
    let on = |stack: usize| (stacks[stack].0..stacks[stack].1).contains(&rsp);
    let sp = if on(gdt::NMI_STACK) {
        NMI_FRAME.get(cpu)?[1].load(Relaxed)
    } else if on(gdt::DOUBLE_FAULT_STACK) {
        FAULT_SP.get(cpu)?.load(Relaxed)
    } else {
        return None;
    };
    let [low, high] = KERNEL_STACKS.get(cpu)?;
    let (low, high) = (low.load(Relaxed), high.load(Relaxed));
    (sp < high).then_some((sp.max(low), high))
}

/// Makes the NMI this CPU is handling fatal: records the address it interrupted as
/// where the fault struck (the panic's `RIP:` line), as [`record_fault`] does for an
/// exception.
pub fn record_nmi_as_fault() {
    if let Some([ip, sp]) = NMI_FRAME.get(percpu::index()) {
        record_fault(ip.load(Relaxed), sp.load(Relaxed), None);
    }
}

/// The address the NMI this CPU is handling interrupted, as an address in the
/// kernel ELF (a walk from the NMI meets it as the first frame past the NMI's own).
pub fn nmi_ip() -> u64 {
    NMI_FRAME.get(percpu::index()).map_or(0, |[ip, _]| elf_address(ip.load(Relaxed)))
}

/// Records that a fatal exception struck this CPU at the runtime address `ip`, its
/// stack pointer at `rsp`; `error_code_frame`: the address of its interrupt frame,
/// if the CPU pushed an error code below it.
pub fn record_fault(ip: u64, rsp: u64, error_code_frame: Option<u64>) {
    let cpu = percpu::index();
    if let (Some(fault), Some(sp), Some(frame)) =
        (FAULT_IP.get(cpu), FAULT_SP.get(cpu), ERROR_CODE_FRAME.get(cpu))
    {
        fault.store(elf_address(ip), Relaxed);
        sp.store(rsp, Relaxed);
        frame.store(error_code_frame.unwrap_or(0), Relaxed);
    }
}

/// Where the last fatal exception of CPU `cpu` struck, as an address in the kernel
/// ELF, if one did.
pub fn fault_ip(cpu: usize) -> Option<u64> {
    FAULT_IP.get(cpu).map(|ip| ip.load(Relaxed)).filter(|&ip| ip != 0)
}

/// The kernel ELF's address of `addr`, an address in the running kernel image.
pub fn elf_address(addr: u64) -> u64 {
    addr.wrapping_sub(IMAGE_OFFSET.load(Relaxed))
}

/// Records the kernel image's load offset (the bootloader's `kernel_image_offset`).
pub fn set_image_offset(offset: u64) {
    IMAGE_OFFSET.store(offset, Relaxed);
}

/// Records that CPU `cpu` runs on the kernel stack `[low, high)`.
pub fn set_kernel_stack(cpu: usize, low: u64, high: u64) {
    if let Some([l, h]) = KERNEL_STACKS.get(cpu) {
        l.store(low, Relaxed);
        h.store(high, Relaxed);
    }
}

/// Records the boot CPU's kernel stack of `size` bytes; called on it, near the top
/// of that stack. The bootloader maps the stack up to a page boundary, so it ends at
/// the end of the page the stack pointer is in.
pub fn set_boot_stack(size: u64) {
    let high = (stack_pointer() & !0xfff) + 0x1000;
    set_kernel_stack(0, high - size, high);
}

fn stack_pointer() -> u64 {
    let rsp: u64;
    // SAFETY: reads the stack pointer into a register; no memory is touched.
    unsafe {
        core::arch::asm!("mov {}, rsp", out(reg) rsp, options(nomem, nostack, preserves_flags))
    };
    rsp
}

/// One past the highest address of the stack holding `rsp` on this CPU: its kernel
/// stack or one of its interrupt stacks; `None` if `rsp` is in none of them.
fn stack_end(rsp: u64) -> Option<u64> {
    let cpu = percpu::index();
    let [low, high] = KERNEL_STACKS.get(cpu)?;
    let kernel = (low.load(Relaxed), high.load(Relaxed));
    core::iter::once(kernel)
        .chain(gdt::interrupt_stacks(cpu))
        .find(|&(low, high)| (low..high).contains(&rsp))
        .map(|(_, high)| high)
}

/// Fills `frames` with the return addresses of the call chain, innermost first (this
/// function's caller's return address first), as addresses in the kernel ELF, and
/// returns how many it wrote (see [`walk`]).
#[inline(never)]
pub fn stack_trace(frames: &mut [u64]) -> usize {
    let mut depth = 0;
    walk(|ret, _| match frames.get_mut(depth) {
        Some(frame) => {
            *frame = ret;
            depth += 1;
            depth < frames.len()
        }
        None => false,
    });
    depth
}

/// Bytes of this CPU's kernel stack in use down to `addr` (from the stack's top to
/// `addr`, the word at `addr` included); `None` if `addr` is not on that stack.
pub fn kernel_stack_used(addr: u64) -> Option<u64> {
    let [low, high] = KERNEL_STACKS.get(percpu::index())?;
    let (low, high) = (low.load(Relaxed), high.load(Relaxed));
    (low..high).contains(&addr).then(|| high - addr)
}

/// Walks the call chain from the function this is inlined into outward: calls
/// `visit` with each return address (an address in the kernel ELF) and the stack
/// address it lies at, innermost first, until `visit` returns `false` or the chain
/// ends. Through the handler of a fatal exception the chain goes on at the
/// interrupted address (for an exception with an error code, found through the frame
/// [`record_fault`] noted). Each frame pointer followed must lie above the previous
/// one and within the current stack, so the walk ends and never reads outside that
/// stack; from an interrupt stack it goes on once into the code the interrupt
/// interrupted, within the kernel stack above the stack pointer noted for it (by
/// the NMI entry, or for a fatal exception on the double fault's stack, such as a
/// stack overflow's, by [`record_fault`]). A return address hooked by the function
/// tracer is given as the one it kept ([`super::ftrace::original_return`]).
#[inline(always)]
pub fn walk(mut visit: impl FnMut(u64, u64) -> bool) {
    let (rsp, mut fp): (u64, u64);
    // SAFETY: copies the stack and frame pointers into registers; no memory is
    // touched.
    unsafe {
        core::arch::asm!(
            "mov {}, rsp", "mov {}, rbp",
            out(reg) rsp, out(reg) fp,
            options(nomem, nostack, preserves_flags)
        );
    }
    let Some(mut end) = stack_end(rsp) else { return };
    let offset = IMAGE_OFFSET.load(Relaxed);
    let cpu = percpu::index();
    let error_code_frame = ERROR_CODE_FRAME.get(cpu).map_or(0, |frame| frame.load(Relaxed));
    let mut beyond = interrupted_stack(cpu, rsp);
    let mut low = rsp;
    loop {
        // The handler of an exception with an error code: between its saved frame
        // pointer and the interrupt frame lie the error code (and an alignment
        // word), so the interrupted address is the frame's first word, not the word
        // above the saved frame pointer.
        let ret_at = match error_code_frame.wrapping_sub(fp) {
            gap @ 16..=32 if gap % 8 == 0 => gap / 8,
            _ => 1,
        };
        let fits = |low: u64, end: u64| {
            fp >= low && fp % 8 == 0 && fp.checked_add(8 * (ret_at + 1)).is_some_and(|e| e <= end)
        };
        if !fits(low, end) {
            match beyond.take() {
                Some((interrupted, top)) if fits(interrupted, top) => end = top,
                _ => break,
            }
        }
        // SAFETY: `[fp, fp + 8 * (ret_at + 1))` lies within the part of the current
        // stack at and above this function's frame, or, once the chain has left an
        // interrupt stack, within the part of this CPU's kernel stack at and above
        // the stack pointer the NMI or fatal exception this runs in interrupted
        // (`fits` checked one or the other). Both are mapped, and not written while
        // this function runs (interrupts write only below `rsp`; the code an NMI
        // interrupted waits for it, and the code a fatal exception interrupted never
        // resumes).
        let (next, ret) = unsafe {
            let frame = fp as *const u64;
            (frame.read_volatile(), frame.add(ret_at as usize).read_volatile())
        };
        let at = fp + 8 * ret_at;
        let ret = super::ftrace::original_return(ret, at);
        if ret == 0 || !visit(ret.wrapping_sub(offset), at) {
            break;
        }
        low = fp + 16;
        fp = next;
    }
}
