//! The function tracer's trampolines. A traced function's entry NOP, patched into
//! `call` [`entry_trampoline`], hands the function and its return address to the
//! entry hook the layers above registered ([`set_hooks`]). A hook that asks for the
//! return keeps the return address; the function then returns into
//! [`return_trampoline`], which asks the exit hook where to go back to; a stack walk
//! asks the same hooks where such a call returns ([`original_return`]).
//!
//! The trampolines keep every register the function may hold an argument or a
//! return value in (the kernel uses no SSE), and call the hooks with the stack
//! aligned as the ABI wants.

use spin::Once;

/// What the layers above do at a traced function's entry and at its return.
pub struct Hooks {
    /// At a traced function's entry: its address, its return address, and where
    /// that return address lies on the stack. Returns whether to hook the return:
    /// then the hook keeps the return address, and the function returns into
    /// [`return_trampoline`] instead.
    pub entry: fn(function: u64, ret: u64, slot: u64) -> bool,
    /// At a hooked return: where the return address lay. Returns the return address
    /// the entry hook kept for that slot.
    pub exit: fn(slot: u64) -> u64,
    /// For a stack walk on this CPU: the return address the entry hook kept for
    /// `slot`, if a hooked call whose return address lay there has not returned.
    pub kept: fn(slot: u64) -> Option<u64>,
}

static HOOKS: Once<Hooks> = Once::new();

/// Registers the hooks; once per boot (later calls change nothing). Sites are
/// patched to call [`entry_trampoline`] only after this.
pub fn set_hooks(hooks: Hooks) {
    HOOKS.call_once(|| hooks);
}

/// Where a traced function's entry calls: [`entry_trampoline`]'s address.
pub fn entry_address() -> u64 {
    entry_trampoline as *const () as u64
}

/// Where a hooked function returns: [`return_trampoline`]'s address, which a
/// stack walk meets in place of the caller's.
fn return_address() -> u64 {
    return_trampoline as *const () as u64
}

/// The return address a stack walk on this CPU shows for `ret`, read at `slot`:
/// for a hooked call's (`ret` is [`return_address`]), the caller's address the
/// entry hook kept, as Linux's `ftrace_graph_ret_addr` finds it; else `ret`.
pub fn original_return(ret: u64, slot: u64) -> u64 {
    if ret != return_address() {
        return ret;
    }
    HOOKS.get().and_then(|hooks| (hooks.kept)(slot)).unwrap_or(ret)
}

/// Called from a traced function's first instruction: `[rsp]` is the address after
/// that 5-byte `call`, `[rsp + 8]` the function's return address.
#[unsafe(naked)]
extern "C" fn entry_trampoline() {
    core::arch::naked_asm!(
        // The argument and scratch registers (nine words): with the call's return
        // address, rsp is 8 mod 16 (the function's entry was 8 mod 16 too).
        super::push_scratch!(),
        "mov rdi, [rsp + 72]",
        "lea rsi, [rsp + 80]",
        "sub rsp, 8",
        "call {entry}",
        "add rsp, 8",
        super::pop_scratch!(),
        "ret",
        entry = sym entry,
    )
}

/// A hooked function returns here, with its return value in rax:rdx and rsp just
/// above the slot that held its return address (0 mod 16, as after any return).
#[unsafe(naked)]
extern "C" fn return_trampoline() {
    core::arch::naked_asm!(
        "push rax",
        "push rdx",
        "lea rdi, [rsp + 8]",
        "call {exit}",
        "mov r11, rax",
        "pop rdx",
        "pop rax",
        "jmp r11",
        exit = sym exit,
    )
}

/// [`entry_trampoline`]'s Rust half: `after` is the address after the site's
/// `call`, `slot` where the function's return address lies.
extern "C" fn entry(after: u64, slot: *mut u64) {
    let Some(hooks) = HOOKS.get() else { return };
    // SAFETY: `slot` is the word above the trampoline's own return address: the
    // traced function's return address, on this CPU's current stack, which nothing
    // else writes while the function runs.
    let ret = unsafe { slot.read() };
    if (hooks.entry)(after - 5, ret, slot as u64) {
        // SAFETY: the same word; the entry hook kept `ret`, which the exit hook
        // gives back when the function returns into the trampoline.
        unsafe { slot.write(return_address()) };
    }
}

/// [`return_trampoline`]'s Rust half: returns where the hooked function's caller
/// resumes.
extern "C" fn exit(slot: u64) -> u64 {
    // A return is only hooked once the hooks are set.
    let hooks = HOOKS.get().expect("a hooked return without hooks");
    (hooks.exit)(slot)
}
