//! Starting the application processors: INIT-SIPI-SIPI into a real-mode trampoline
//! that climbs to long mode on the kernel's page tables and calls a Rust entry point
//! on its own stack.

use super::apic::{self, Destination, Ipi};
use x86_64::PhysAddr;

core::arch::global_asm!(
    r#"
    .section .text.ap_trampoline, "ax"
    .global ap_trampoline_start
    .global ap_trampoline_end
    .global ap_trampoline_gdt_base
    .global ap_trampoline_protected_target
    .global ap_trampoline_long_target
    .global ap_trampoline_cr3
    .global ap_trampoline_stack_top
    .global ap_trampoline_argument
    .global ap_trampoline_entry
    .global ap_trampoline_gdt
    .global ap_trampoline_protected
    .global ap_trampoline_long
    .code16
ap_trampoline_start:
    cli
    cld
    movw %cs, %ax
    movw %ax, %ds
    xorl %ebx, %ebx
    movw %ax, %bx
    shll $4, %ebx
    lgdtl (ap_trampoline_gdt_pointer - ap_trampoline_start)
    movl %cr0, %eax
    orl $1, %eax
    movl %eax, %cr0
    ljmpl *(ap_trampoline_protected_target - ap_trampoline_start)

    .code32
ap_trampoline_protected:
    movw $0x10, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    movl %cr4, %eax
    orl $0x20, %eax
    movl %eax, %cr4
    movl (ap_trampoline_cr3 - ap_trampoline_start)(%ebx), %eax
    movl %eax, %cr3
    movl $0xc0000080, %ecx
    rdmsr
    orl $0x900, %eax
    wrmsr
    movl %cr0, %eax
    orl $0x80010001, %eax
    movl %eax, %cr0
    ljmpl *(ap_trampoline_long_target - ap_trampoline_start)(%ebx)

    .code64
ap_trampoline_long:
    movl %ebx, %ebx
    movq (ap_trampoline_stack_top - ap_trampoline_start)(%rbx), %rsp
    movq (ap_trampoline_argument - ap_trampoline_start)(%rbx), %rdi
    movq (ap_trampoline_entry - ap_trampoline_start)(%rbx), %rax
    xorl %ebp, %ebp
    pushq $0
    jmpq *%rax

    .balign 8
ap_trampoline_gdt:
    .quad 0
    .quad 0x00cf9a000000ffff
    .quad 0x00cf92000000ffff
    .quad 0x00af9a000000ffff
ap_trampoline_gdt_pointer:
    .word 31
ap_trampoline_gdt_base:
    .long 0
ap_trampoline_protected_target:
    .long 0
    .word 0x08
ap_trampoline_long_target:
    .long 0
    .word 0x18
    .balign 8
ap_trampoline_cr3:
    .quad 0
ap_trampoline_stack_top:
    .quad 0
ap_trampoline_argument:
    .quad 0
ap_trampoline_entry:
    .quad 0
ap_trampoline_end:
    .text
    "#,
    options(att_syntax)
);

// SAFETY: these are labels of the `global_asm!` block above (bytes of kernel text,
// never written through these names); only their addresses are taken.
unsafe extern "C" {
    static ap_trampoline_start: u8;
    static ap_trampoline_end: u8;
    static ap_trampoline_gdt: u8;
    static ap_trampoline_gdt_base: u8;
    static ap_trampoline_protected: u8;
    static ap_trampoline_protected_target: u8;
    static ap_trampoline_long: u8;
    static ap_trampoline_long_target: u8;
    static ap_trampoline_cr3: u8;
    static ap_trampoline_stack_top: u8;
    static ap_trampoline_argument: u8;
    static ap_trampoline_entry: u8;
}

/// Offset of a trampoline symbol from the trampoline's start.
fn offset(symbol: *const u8) -> usize {
    symbol as usize - (&raw const ap_trampoline_start) as usize
}

/// The trampoline, copied to a page below 1 MiB that is identity-mapped.
pub struct Trampoline {
    phys: PhysAddr,
    /// Where the page is mapped in the physical-memory window.
    window: *mut u8,
}

impl Trampoline {
    /// Copies the trampoline code to `phys` (a usable, identity-mapped page below
    /// 1 MiB, seen at `window`) and fills in the addresses that depend on it.
    ///
    /// # Safety
    /// `window` must map `phys` writable, and nothing else may use that page.
    pub unsafe fn install(phys: PhysAddr, window: *mut u8) -> Self {
        let (start, end) = (&raw const ap_trampoline_start, &raw const ap_trampoline_end);
        let len = end as usize - start as usize;
        assert!(len <= 4096 && phys.as_u64() < 0x10_0000);
        // SAFETY: `start..end` is readable kernel text; `window` is a page of our own.
        unsafe { core::ptr::copy_nonoverlapping(start, window, len) };
        let trampoline = Self { phys, window };
        let base = phys.as_u64() as u32;
        let address = |symbol: *const u8| base + offset(symbol) as u32;
        trampoline
            .patch_u32(&raw const ap_trampoline_gdt_base, address(&raw const ap_trampoline_gdt));
        trampoline.patch_u32(
            &raw const ap_trampoline_protected_target,
            address(&raw const ap_trampoline_protected),
        );
        trampoline.patch_u32(
            &raw const ap_trampoline_long_target,
            address(&raw const ap_trampoline_long),
        );
        let (cr3, _) = x86_64::registers::control::Cr3::read();
        trampoline.patch_u64(&raw const ap_trampoline_cr3, cr3.start_address().as_u64());
        trampoline
    }

    fn patch_u32(&self, field: *const u8, value: u32) {
        // SAFETY: `field` lies inside the trampoline, so its offset is inside our page;
        // the field is 4 bytes, unaligned writes are used.
        unsafe { self.window.add(offset(field)).cast::<u32>().write_unaligned(value) }
    }

    fn patch_u64(&self, field: *const u8, value: u64) {
        // SAFETY: as for `patch_u32`, with an 8-byte field.
        unsafe { self.window.add(offset(field)).cast::<u64>().write_unaligned(value) }
    }

    /// Starts the CPU with local APIC id `apic_id`: it will call `entry(argument)` on
    /// the stack ending at `stack_top`. Returns once the IPIs are sent; the caller
    /// waits for the CPU to report in before starting another (the trampoline's
    /// fields are shared). `delay_us` busy-waits.
    pub fn start_cpu(
        &self,
        apic_id: u32,
        entry: extern "C" fn(usize) -> !,
        argument: usize,
        stack_top: u64,
        delay_us: impl Fn(u64),
    ) {
        self.patch_u64(&raw const ap_trampoline_stack_top, stack_top);
        self.patch_u64(&raw const ap_trampoline_argument, argument as u64);
        self.patch_u64(&raw const ap_trampoline_entry, entry as usize as u64);
        let page = (self.phys.as_u64() >> 12) as u8;
        apic::send_ipi(Destination::Apic(apic_id), Ipi::Init);
        delay_us(10_000);
        apic::send_ipi(Destination::Apic(apic_id), Ipi::Startup(page));
        delay_us(200);
        apic::send_ipi(Destination::Apic(apic_id), Ipi::Startup(page));
    }
}
