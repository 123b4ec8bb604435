//! Kernel text as data: reading a tracepoint site's bytes, and patching sites
//! (`arch::patch`) through the physical-memory window, where they are writable while
//! the text mapping stays read-only.

use super::{is_mapped, writable_alias};
use crate::arch::patch::{self, Poke, SITE_LEN};
use alloc::vec::Vec;
use trace::event::key::KeySite;
use x86_64::VirtAddr;

/// The bytes `site` holds now, if its text is mapped.
pub fn site_bytes(site: &KeySite) -> Option<[u8; SITE_LEN]> {
    let mut bytes = [0; SITE_LEN];
    for (i, byte) in bytes.iter_mut().enumerate() {
        let addr = VirtAddr::try_new(site.site.checked_add(i)? as u64).ok()?;
        if !is_mapped(addr) {
            return None;
        }
        // SAFETY: the byte is mapped (just checked) and readable (kernel text is);
        // `patch` changes it only by whole-byte writes.
        *byte = unsafe { addr.as_ptr::<u8>().read_volatile() };
    }
    Some(bytes)
}

/// Makes each of `sites` hold its bytes for `armed` (`KeySite::bytes`), and returns
/// once every CPU executes them; `sync` makes every other CPU take an interrupt (see
/// `arch::patch`). Sites whose text is not mapped are left alone; `Err` if the
/// patcher cannot track more sites (nothing changed). Thread context, interrupts on.
///
/// # Safety
/// Each site must be one the linker collected from `emit!` (`trace::linked_keys!`):
/// a 5-byte NOP in kernel text, or the jump to its recording path this writes.
pub unsafe fn patch_sites(
    sites: &[&KeySite],
    armed: bool,
    sync: impl Fn(),
) -> Result<(), &'static str> {
    let aliases = |site: &KeySite| -> Option<[*mut u8; SITE_LEN]> {
        let mut alias = [core::ptr::null_mut(); SITE_LEN];
        for (i, slot) in alias.iter_mut().enumerate() {
            *slot = writable_alias(VirtAddr::try_new((site.site + i) as u64).ok()?)?;
        }
        Some(alias)
    };
    let pokes: Vec<Poke> = sites
        .iter()
        .filter_map(|s| {
            Some(Poke { site: s.site as u64, alias: aliases(s)?, bytes: s.bytes(armed)? })
        })
        .collect();
    // SAFETY: the caller guarantees each site is a keyed `emit!` site, which only
    // ever holds its NOP or its jump (both 5-byte instructions the code may run
    // there); each alias is the physical-memory window's writable view of its byte.
    unsafe { patch::patch(&pokes, sync) }
}
