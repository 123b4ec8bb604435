//! Which events' keyed sites are jumps ([`crate::event::key`]): the tracer arms an
//! event when an instance starts firing it and disarms it when none does, through
//! [`Platform::set_key`].
//!
//! Patching waits for every CPU, so it happens only in a context that may wait;
//! yet an `enable_event` trigger (and a driver's interrupt handler) enables events
//! from any context. As ftrace does for a trigger's target (soft mode), such events
//! stay armed while off: a trigger's (or function command's) target for as long as
//! it exists, and any event a driver names with [`Tracer::keep_armed`]. Enabling an
//! event that is not armed from a context that may not wait is refused
//! ([`InstanceError::NotArmed`]) and changes nothing.

use super::{Registry, Tracer, TracerError, is_settable};
use crate::event::{DescriptorKind, EventDescriptor};
use crate::platform::Platform;
use crate::tracer::InstanceError;
use core::sync::atomic::{Ordering::SeqCst, fence};

/// Refuses a build whose sites are keyed (`keyed`: [`crate::event::key::KEYED`]) on
/// a platform that cannot patch them (`has_keys`): every site would stay a NOP.
pub(super) fn check_keys(keyed: bool, has_keys: bool) -> Result<(), TracerError> {
    if keyed && !has_keys { Err(TracerError::KeysNotPatched) } else { Ok(()) }
}

impl<P: Platform> Tracer<P> {
    /// Keeps the events whose system and name match (`None`: any; globs allowed)
    /// armed from now on, so that enabling them from interrupt context takes effect
    /// at once (a watchdog's events, enabled when it fires). Returns how many
    /// matched. Thread context: `Buffer(WouldDeadlock)` elsewhere.
    pub fn keep_armed(
        &self,
        system: Option<&str>,
        event: Option<&str>,
    ) -> Result<usize, InstanceError> {
        self.may_wait()?;
        let registry = self.registry.lock();
        let matched = self
            .events
            .iter()
            .filter(|d| d.kind == DescriptorKind::Event && d.matches(system, event))
            .map(|d| d.hold())
            .count();
        if matched == 0 {
            return Err(InstanceError::NoSuchEvent);
        }
        self.sync_keys(&registry);
        Ok(matched)
    }

    /// Whether setting `event`'s bits takes effect from the caller's context: the
    /// platform has no keys, or the event is armed, or the caller may patch.
    pub(super) fn may_enable(&self, event: &EventDescriptor) -> bool {
        !self.platform.has_keys() || event.is_armed() || self.may_wait().is_ok()
    }

    /// Arms and disarms events to match what fires them (the registry's lock
    /// serialises the calls), where the caller may wait; elsewhere it leaves that
    /// to the next control operation that may.
    pub(super) fn sync_keys(&self, registry: &Registry<P>) {
        if !self.platform.has_keys() || self.may_wait().is_err() {
            return;
        }
        let targeted = |event: &EventDescriptor| {
            let tables = registry.hooks.iter().flatten();
            let mut hooks = tables.flat_map(|table| table.iter().flatten());
            hooks.any(|h| h.targets(event)) || self.commands_target(None, event)
        };
        // Only tracepoints have sites: the events the tracer records itself do not.
        let sited = |d: &&&EventDescriptor| d.kind == DescriptorKind::Event && is_settable(d);
        for &event in self.events.iter().filter(sited) {
            let wanted = event.enabled_mask() != 0 || event.is_held() || targeted(event);
            if wanted == event.is_armed() {
                continue;
            }
            // Armed only once every CPU jumps; disarmed before the first CPU stops.
            if wanted {
                self.platform.set_key(event, true);
                event.set_armed(true);
                continue;
            }
            event.set_armed(false);
            // Pairs with the fence in `Instance::set_event`: an enabling that saw the
            // event armed set its bit before this load, or sees it disarmed after.
            fence(SeqCst);
            if event.enabled_mask() != 0 {
                event.set_armed(true);
            } else {
                self.platform.set_key(event, false);
            }
        }
    }

    /// [`Tracer::sync_keys`] under the registry's lock.
    pub(super) fn sync_keys_now(&self) {
        self.sync_keys(&self.registry.lock());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_sites_need_a_platform_that_patches_them() {
        assert!(matches!(check_keys(true, false), Err(TracerError::KeysNotPatched)));
        assert!(check_keys(true, true).is_ok());
        assert!(check_keys(false, false).is_ok());
        // Keys without keyed sites: nothing to patch, the mask's test still runs.
        assert!(check_keys(false, true).is_ok());
    }
}
