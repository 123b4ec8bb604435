//! Static keys from the tracer's side: which events it arms and disarms through the
//! platform, and when it refuses to enable an event it cannot arm.

use super::util::{KeyLog as Log, MAY_WAIT, Probe};
use crate::event::{DescriptorKind, EventDescriptor};
use crate::{InstanceConfig, InstanceError, Limits, Mode, Tracer};
use std::sync::{Arc, Mutex};
use std::vec::Vec;

/// A tracer over `events` (statics of the calling test alone: arming is a state of
/// the descriptor) and the log of its platform's `set_key` calls.
fn tracer(events: &[&'static EventDescriptor]) -> (Tracer<Probe>, Arc<Log>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let top = InstanceConfig { bytes_per_cpu: 4096, mode: Mode::Overwrite, snapshot: false };
    let tracer = Tracer::new(
        Probe { keys: Some(log.clone()) },
        1,
        events,
        Limits { max_instances: 4, max_total_bytes: 1 << 20 },
        top,
    )
    .unwrap();
    (tracer, log)
}

fn take(log: &Log) -> Vec<(&'static str, bool)> {
    std::mem::take(&mut *log.lock().unwrap())
}

#[test]
fn an_event_is_armed_while_any_instance_fires_it() {
    static A: EventDescriptor = EventDescriptor::new("k1", "a", "", &[], DescriptorKind::Event);
    static B: EventDescriptor = EventDescriptor::new("k1", "b", "", &[], DescriptorKind::Event);
    let (tracer, log) = tracer(&[&A, &B]);
    assert!(take(&log).is_empty() && !A.is_armed(), "nothing is armed at first");
    let top = tracer.top();
    top.set_event(Some("k1"), Some("a"), true).unwrap();
    assert_eq!(take(&log), [("a", true)]);
    assert!(A.is_armed() && !B.is_armed());
    let config = InstanceConfig { bytes_per_cpu: 4096, mode: Mode::Overwrite, snapshot: false };
    let other = tracer.get_or_create("other", config).unwrap();
    other.set_event(Some("k1"), None, true).unwrap();
    assert_eq!(take(&log), [("b", true)], "a was armed already");
    top.set_event(None, None, false).unwrap();
    assert!(take(&log).is_empty(), "the other instance still fires both");
    tracer.destroy(other).unwrap();
    let mut disarmed = take(&log);
    disarmed.sort();
    assert_eq!(disarmed, [("a", false), ("b", false)]);
    assert!(!A.is_armed() && !B.is_armed());
}

#[test]
fn enabling_an_unarmed_event_where_patching_cannot_wait_is_refused() {
    static C: EventDescriptor = EventDescriptor::new("k2", "c", "", &[], DescriptorKind::Event);
    static D: EventDescriptor = EventDescriptor::new("k2", "d", "", &[], DescriptorKind::Event);
    let (tracer, log) = tracer(&[&C, &D]);
    let top = tracer.top();
    MAY_WAIT.with(|w| w.set(false));
    assert_eq!(top.set_event(Some("k2"), None, true), Err(InstanceError::NotArmed));
    assert!(!top.event_enabled(&C) && !top.event_enabled(&D), "nothing changed");
    MAY_WAIT.with(|w| w.set(true));
    assert_eq!(tracer.keep_armed(Some("k2"), Some("c")), Ok(1));
    assert_eq!(take(&log), [("c", true)]);
    MAY_WAIT.with(|w| w.set(false));
    assert_eq!(top.set_event(Some("k2"), Some("c"), true), Ok(1));
    assert!(top.event_enabled(&C));
    assert_eq!(top.set_event(Some("k2"), Some("c"), false), Ok(1));
    MAY_WAIT.with(|w| w.set(true));
    top.set_event(None, None, false).unwrap();
    assert!(take(&log).is_empty() && C.is_armed(), "a held event stays armed while off");
}

#[test]
fn a_triggers_target_is_armed_while_the_trigger_exists() {
    static FIRES: EventDescriptor =
        EventDescriptor::new("k3", "fires", "", &[], DescriptorKind::Event);
    static TARGET: EventDescriptor =
        EventDescriptor::new("k3", "target", "", &[], DescriptorKind::Event);
    let (tracer, log) = tracer(&[&FIRES, &TARGET]);
    let top = tracer.top();
    top.set_trigger(&FIRES, "enable_event:k3:target").unwrap();
    let mut armed = take(&log);
    armed.sort();
    // The event with the trigger fires for it; its target can be enabled from the
    // trigger's context.
    assert_eq!(armed, [("fires", true), ("target", true)]);
    top.set_trigger(&FIRES, "!enable_event:k3:target").unwrap();
    let mut disarmed = take(&log);
    disarmed.sort();
    assert_eq!(disarmed, [("fires", false), ("target", false)]);
}
