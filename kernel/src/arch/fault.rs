//! Deliberate CPU exceptions, for the panic path's tests (the `fault` command). Each
//! handler reports the exception and panics, so none of these returns in practice.
//! None is inlined, so a fault report names the function that faulted whatever the
//! optimiser decides about its callers.

/// Raises #GP: reads a non-canonical address.
#[inline(never)]
pub fn general_protection() {
    // SAFETY: deliberately faults: the address is non-canonical, so the CPU raises #GP
    // before any memory is read.
    unsafe { core::ptr::read_volatile(0x8000_0000_0000_0000 as *const u64) };
}

/// Raises #UD: executes `ud2`.
#[inline(never)]
pub fn invalid_opcode() {
    // SAFETY: deliberately raises #UD; the handler does not return.
    unsafe { core::arch::asm!("ud2") };
}

/// Raises #DE: a 64-bit `div` by zero.
#[inline(never)]
pub fn divide_error() {
    // SAFETY: deliberately raises #DE; only registers are touched.
    unsafe {
        core::arch::asm!("div {0}", in(reg) 0u64, inout("rax") 1u64 => _, inout("rdx") 0u64 => _)
    };
}
