//! Kernel text as data: reading a patchable site's bytes, the function entry sites
//! the linker collected, and patching sites (`arch::patch`) through the
//! physical-memory window, where they are writable while the text mapping stays
//! read-only.

use super::{is_mapped, writable_alias};
use crate::arch::ftrace;
use crate::arch::patch::{self, Poke, SITE_LEN};
use alloc::vec::Vec;
use trace::event::key::{CALL, KeySite, NOP, rel32};
use x86_64::VirtAddr;

/// The bytes the 5-byte site at `site` holds now, if its text is mapped.
pub fn site_bytes(site: usize) -> Option<[u8; SITE_LEN]> {
    let mut bytes = [0; SITE_LEN];
    for (i, byte) in bytes.iter_mut().enumerate() {
        let addr = VirtAddr::try_new(site.checked_add(i)? as u64).ok()?;
        if !is_mapped(addr) {
            return None;
        }
        // SAFETY: the byte is mapped (just checked) and readable (kernel text is);
        // `patch` changes it only by whole-byte writes.
        *byte = unsafe { addr.as_ptr::<u8>().read_volatile() };
    }
    Some(bytes)
}

/// The address of every function's entry NOP, as the compiler listed them in the
/// `__patchable_function_entries` section (`-Z patchable-function-entry=5,0`, for
/// the kernel and the driver crate) and the loader relocated them. Empty in a
/// kernel built without patchable entries.
pub fn function_sites() -> &'static [usize] {
    let (start, stop): (*const usize, *const usize);
    // SAFETY: takes the addresses of the section's bounds, which the linker defines
    // when the section exists; declared weak, both are the same address otherwise.
    // No memory is touched.
    unsafe {
        core::arch::asm!(
            ".weak __start___patchable_function_entries",
            ".weak __stop___patchable_function_entries",
            "lea {start}, [rip + __start___patchable_function_entries]",
            "lea {stop}, [rip + __stop___patchable_function_entries]",
            start = out(reg) start,
            stop = out(reg) stop,
            options(nomem, nostack, preserves_flags)
        );
    }
    if start == stop || !start.is_aligned() {
        return &[];
    }
    // SAFETY: the section holds only 8-byte addresses, contiguously between its two
    // bounds; the loader relocated them before the kernel ran, and nothing writes
    // them since.
    unsafe { core::slice::from_raw_parts(start, stop.offset_from(start) as usize) }
}

/// Makes each tracepoint site of `sites` a jump to its recording path (`armed`) or
/// its NOP, and returns once every CPU executes the new bytes. `Err` (nothing
/// changed) for a site that is not one of `trace::linked_keys!()`'s holding its NOP
/// or its jump, or if the patcher cannot track more sites. Thread context,
/// interrupts on.
pub fn patch_keys(sites: &[&KeySite], armed: bool, sync: impl Fn()) -> Result<(), &'static str> {
    let linked: &'static [KeySite] = trace::linked_keys!();
    let mut pokes = Vec::new();
    for site in sites {
        let jump = site.jump().ok_or("a recording path out of a jump's reach")?;
        let now = site_bytes(site.site);
        let ours = linked.iter().any(|l| core::ptr::eq(l, *site));
        if !ours || (now != Some(NOP) && now != Some(jump)) {
            return Err("not a tracepoint site");
        }
        pokes.push((site.site, if armed { jump } else { NOP }));
    }
    // SAFETY: each site is one the linker collected from `emit!`, holding its NOP or
    // its jump (just checked), and gets one of the two.
    unsafe { patch_sites(&pokes, sync) }
}

/// Makes each site (`(address, bytes)`) hold its new bytes, and returns once every
/// CPU executes them; `sync` makes every other CPU take an interrupt (see
/// `arch::patch`). Sites whose text is not mapped are left alone; `Err` if the
/// patcher cannot track more sites (nothing changed). Thread context, interrupts on.
///
/// # Safety
/// Each site must be a 5-byte patchable site the linker collected (a keyed `emit!`'s,
/// `trace::linked_keys!`, or a function entry's, [`function_sites`]) and its bytes
/// one of the two instructions that site takes: its NOP, or the jump (keys) or the
/// call (functions) that its owner computed.
unsafe fn patch_sites(
    sites: &[(usize, [u8; SITE_LEN])],
    sync: impl Fn(),
) -> Result<(), &'static str> {
    let aliases = |site: usize| -> Option<[*mut u8; SITE_LEN]> {
        let mut alias = [core::ptr::null_mut(); SITE_LEN];
        for (i, slot) in alias.iter_mut().enumerate() {
            *slot = writable_alias(VirtAddr::try_new((site + i) as u64).ok()?)?;
        }
        Some(alias)
    };
    let pokes: Vec<Poke> = sites
        .iter()
        .filter_map(|&(site, bytes)| Some(Poke { site: site as u64, alias: aliases(site)?, bytes }))
        .collect();
    // SAFETY: the caller guarantees each site only ever holds one of its two
    // 5-byte instructions, both of which the code may run there; each alias is the
    // physical-memory window's writable view of its byte.
    unsafe { patch::patch(&pokes, sync) }
}

/// The NOP the compiler puts at each function's entry (`nopl 0x8(%rax,%rax,1)`).
pub const ENTRY_NOP: [u8; SITE_LEN] = [0x0f, 0x1f, 0x44, 0x00, 0x08];

/// Makes each function entry of `entries` (`(site, traced)`) a call to the function
/// tracer's trampoline (`traced`) or its NOP again, and returns once every CPU
/// executes the new bytes. `Err` (nothing changed) for a site that is not one of
/// [`function_sites`] holding its NOP or that call, or if the patcher cannot track
/// more sites. Thread context, interrupts on.
pub fn patch_entries(entries: &[(usize, bool)], sync: impl Fn()) -> Result<(), &'static str> {
    let target = ftrace::entry_address() as usize;
    let listed = function_sites();
    let mut sites = Vec::new();
    for &(site, traced) in entries {
        let call = rel32(CALL, site, target).ok_or("the trampoline is out of a call's reach")?;
        let now = site_bytes(site);
        if !listed.contains(&site) || (now != Some(ENTRY_NOP) && now != Some(call)) {
            return Err("not a function entry site");
        }
        sites.push((site, if traced { call } else { ENTRY_NOP }));
    }
    // SAFETY: each site is a function entry the compiler listed, holding its NOP or
    // the call to the trampoline (just checked), and gets one of the two.
    unsafe { patch_sites(&sites, sync) }
}
