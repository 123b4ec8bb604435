//! A binary that declares no event yet: `linked_events!` still links (the linker
//! defines the section's bounds only if something is in it) and gives the tracer's
//! own descriptors.

use trace::{HostPlatform, InstanceConfig, Limits, Tracer};

#[test]
fn a_binary_without_events_links_and_builds_a_tracer() {
    let linked = trace::linked_events!();
    assert!(linked.iter().all(|d| d.system == "ftrace"), "only the tracer's own");
    let limits = Limits { max_instances: 2, max_total_bytes: 1 << 20 };
    let tracer =
        Tracer::new(HostPlatform, 1, linked, limits, InstanceConfig::default()).expect("tracer");
    let names: Vec<_> = tracer.events().iter().map(|d| (d.system, d.name)).collect();
    assert!(names.contains(&("ftrace", "print")), "{names:?}");
    assert_eq!(names.iter().filter(|&&n| n == ("ftrace", "print")).count(), 1, "{names:?}");
}
