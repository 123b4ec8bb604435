//! Static keys: tracepoint sites that cost a 5-byte NOP while their event is off.
//!
//! With the `static-keys` feature, on a bare-metal x86_64 target, each
//! [`emit!`](crate::emit) site compiles to a 5-byte NOP ([`NOP`]) and a [`KeySite`]
//! in the `trace_keys` linker section: where the NOP is, where the site's recording
//! path starts, and the event. The kernel patches a site's NOP into a `jmp` to that
//! path while the event is armed ([`crate::Platform::set_key`]; the tracer says when,
//! see `Tracer::keep_armed`), and back. The recording path still tests the event's
//! mask, so a site that jumps while the event is off only costs that test. Without
//! the feature (the host, or a kernel that does not patch its text) a site is the
//! mask's load and a branch.

use crate::event::EventDescriptor;

/// Whether `emit!` sites are keyed in this build (the `static-keys` feature, on
/// bare-metal x86_64); without, [`linked_keys!`](crate::linked_keys) is empty.
pub const KEYED: bool =
    cfg!(all(feature = "static-keys", target_arch = "x86_64", target_os = "none"));

/// The 5-byte NOP a site holds while its event is off (`nopl 0x0(%rax,%rax,1)`).
pub const NOP: [u8; 5] = [0x0f, 0x1f, 0x44, 0x00, 0x00];

/// The opcode of `jmp rel32`.
pub const JMP: u8 = 0xe9;
/// The opcode of `call rel32`.
pub const CALL: u8 = 0xe8;

/// The 5-byte instruction `opcode rel32` at `site` that goes to `target` (`jmp` or
/// `call`); `None` if `target` is out of a `rel32`'s reach.
pub fn rel32(opcode: u8, site: usize, target: usize) -> Option<[u8; 5]> {
    let next = site.wrapping_add(5);
    let offset = i32::try_from(target.wrapping_sub(next) as isize).ok()?;
    let [a, b, c, d] = offset.to_le_bytes();
    Some([opcode, a, b, c, d])
}

/// One tracepoint site, as [`emit!`](crate::emit) records it in the `trace_keys`
/// section (three words, in this order).
#[repr(C)]
#[derive(Debug)]
pub struct KeySite {
    /// Address of the site's 5 bytes.
    pub site: usize,
    /// Address of the site's recording path, the target of its jump.
    pub target: usize,
    /// The event the site records.
    pub event: &'static EventDescriptor,
}

impl KeySite {
    /// The site's bytes while its event is armed: `jmp rel32` to the recording path;
    /// `None` if that is out of a `rel32`'s reach (never, within one binary).
    pub fn jump(&self) -> Option<[u8; 5]> {
        rel32(JMP, self.site, self.target)
    }

    /// The site's bytes for `armed`.
    pub fn bytes(&self, armed: bool) -> Option<[u8; 5]> {
        if armed { self.jump() } else { Some(NOP) }
    }
}

/// The sites the linker collected in the `trace_keys` section of the calling
/// binary: every keyed [`emit!`](crate::emit) of every crate linked in. Expands to
/// the section's one `unsafe` walk, in the caller's crate (it relies on the linker's
/// `__start_`/`__stop_` symbols, which exist once a site does). Empty where sites
/// are not keyed ([`KEYED`]).
#[cfg(all(feature = "static-keys", target_arch = "x86_64", target_os = "none"))]
#[macro_export]
macro_rules! linked_keys {
    () => {{
        unsafe extern "C" {
            static __start_trace_keys: u8;
            static __stop_trace_keys: u8;
        }
        let start = (&raw const __start_trace_keys).cast::<$crate::event::key::KeySite>();
        let stop = (&raw const __stop_trace_keys).cast::<$crate::event::key::KeySite>();
        // SAFETY: `emit!` puts only 8-aligned three-word `KeySite`s in the
        // `trace_keys` section (the third word the address of an `Event`, whose
        // descriptor is its first field), contiguously between these two symbols;
        // nothing writes the section, which lives as long as the program.
        unsafe { core::slice::from_raw_parts(start, stop.offset_from(start) as usize) }
    }};
}

/// No keyed sites in this build ([`KEYED`]).
#[cfg(not(all(feature = "static-keys", target_arch = "x86_64", target_os = "none")))]
#[macro_export]
macro_rules! linked_keys {
    () => {{
        let sites: &'static [$crate::event::key::KeySite] = &[];
        sites
    }};
}

/// A keyed site: a NOP the platform patches into a jump to `$body` (see the module
/// documentation). `$body` runs outside the `unsafe` block, as a closure.
#[cfg(all(feature = "static-keys", target_arch = "x86_64", target_os = "none"))]
#[doc(hidden)]
#[macro_export]
macro_rules! key_site {
    ($event:path, $body:block) => {{
        let record = || $body;
        // SAFETY: the template is a 5-byte NOP, which touches no register, flag or
        // memory, and a `trace_keys` entry (data, in its own section) naming it, the
        // label's code and the event. The platform only ever swaps the NOP for a
        // `jmp` to that label, which the label operand makes a valid target.
        unsafe {
            ::core::arch::asm!(
                "2: .byte 0x0f, 0x1f, 0x44, 0x00, 0x00",
                // `R`: kept by the linker's garbage collection, as `#[used]` keeps
                // `trace_events` (nothing refers to the section but its bounds).
                ".pushsection trace_keys, \"awR\"",
                ".balign 8",
                ".quad 2b, {target}, {event}",
                ".popsection",
                target = label { record() },
                event = sym $event,
                options(nostack, preserves_flags),
            )
        }
    }};
}

/// An unkeyed site: the recording path behind the mask's test, in line.
#[cfg(not(all(feature = "static-keys", target_arch = "x86_64", target_os = "none")))]
#[doc(hidden)]
#[macro_export]
macro_rules! key_site {
    ($event:path, $body:block) => {
        $body
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{DescriptorKind, EventDescriptor};

    static EVENT: EventDescriptor =
        EventDescriptor::new("test", "key", "", &[], DescriptorKind::Event);

    #[test]
    fn a_site_jumps_to_its_recording_path_or_is_the_nop() {
        let forward = KeySite { site: 0x1000, target: 0x1100, event: &EVENT };
        assert_eq!(forward.bytes(false), Some(NOP));
        assert_eq!(forward.bytes(true), Some([0xe9, 0xfb, 0x00, 0x00, 0x00]));
        let backward = KeySite { site: 0x1000, target: 0x0ff0, event: &EVENT };
        assert_eq!(backward.jump(), Some([0xe9, 0xeb, 0xff, 0xff, 0xff]));
        let far = KeySite { site: 0x1000, target: 0x1_0000_1000, event: &EVENT };
        assert_eq!(far.jump(), None);
    }
}
