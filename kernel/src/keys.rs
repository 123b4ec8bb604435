//! Static keys: every tracepoint site of the kernel and its crates is a 5-byte NOP
//! (`trace::event::key`) until the tracer arms its event; then [`set`] patches it
//! into a jump to the site's recording path (`memory::text`, by `arch::patch`'s
//! int3 protocol), and back to the NOP once no instance fires the event.

use crate::{barrier, memory};
use alloc::vec::Vec;
use spin::Once;
use trace::event::EventDescriptor;
use trace::event::key::{KeySite, NOP};

/// The sites, once [`init`] checked them.
static SITES: Once<&'static [KeySite]> = Once::new();

/// Checks every site the linker collected: it is the NOP, in mapped text, and its
/// jump reaches its recording path. Returns how many there are. Called once at boot,
/// before any event is enabled; a site that fails means the build is broken.
pub fn init() -> Result<usize, &'static str> {
    let sites: &'static [KeySite] = trace::linked_keys!();
    if sites.len() > crate::arch::patch::MAX_SITES {
        return Err("more tracepoint sites than the patcher tracks");
    }
    for site in sites {
        if site.jump().is_none() {
            return Err("a tracepoint site's recording path is out of a jump's reach");
        }
        if memory::text::site_bytes(site.site) != Some(NOP) {
            return Err("a tracepoint site is not a 5-byte NOP in mapped text");
        }
    }
    Ok(SITES.call_once(|| sites).len())
}

/// Whether [`init`] found the sites sound: only then may the tracer arm events.
pub fn ready() -> bool {
    SITES.get().is_some()
}

/// Every site (none before [`init`]).
pub fn sites() -> &'static [KeySite] {
    SITES.get().copied().unwrap_or_default()
}

/// The sites of `event`.
pub fn sites_of(event: &'static EventDescriptor) -> Vec<&'static KeySite> {
    sites().iter().filter(|s| core::ptr::eq(s.event, event)).collect()
}

/// Makes every site of `event` a jump to its recording path (`armed`) or the NOP,
/// and returns once every CPU executes the new bytes. Thread context, interrupts on
/// (the tracer calls it where its platform may wait).
pub fn set(event: &'static EventDescriptor, armed: bool) {
    let patched = memory::text::patch_keys(&sites_of(event), armed, barrier::all_cpus);
    // `init` refused more sites than the patcher tracks, so this does not fail.
    if let Err(reason) = patched {
        crate::println!("keys: {}:{} not patched: {reason}", event.system, event.name);
    }
}
