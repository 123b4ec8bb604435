//! A panic's dump must not need the allocator: its lock may be held by the code that
//! panicked or by a CPU the panic stopped. `Tracer::write_dump` reads with scratch
//! allocated with the tracer; these tests count the allocations it makes.

use std::alloc::{GlobalAlloc, Layout as AllocLayout, System};
use std::cell::Cell;
use std::fmt::{self, Write};
use trace::dump::{self, PanicHeader};
use trace::tracer::DumpSelection;
use trace::{HostPlatform, InstanceConfig, Limits, Mode, Tracer};

/// The system allocator, counting the allocations of threads that armed it.
struct Counting;

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
    static COUNT: Cell<usize> = const { Cell::new(0) };
}

fn note() {
    if ARMED.with(Cell::get) {
        COUNT.with(|c| c.set(c.get() + 1));
    }
}

// SAFETY: every call is passed on to `System` unchanged; counting touches only
// const-initialised thread-locals, which do not allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: AllocLayout) -> *mut u8 {
        note();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: AllocLayout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: AllocLayout, size: usize) -> *mut u8 {
        note();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// How many allocations `f` makes on this thread.
fn allocations(f: impl FnOnce()) -> usize {
    COUNT.with(|c| c.set(0));
    ARMED.with(|a| a.set(true));
    f();
    ARMED.with(|a| a.set(false));
    COUNT.with(Cell::get)
}

trace::event! {
    /// An event with a string, which the text part formats.
    pub NAMED = "test":"named" { n: u64, name: &str } => "n={n} name={name}";
}

/// A tracer of two CPUs with events, markers and a snapshot in two instances.
fn traced() -> &'static Tracer<HostPlatform> {
    let limits = Limits { max_instances: 4, max_total_bytes: 1 << 20 };
    let config = InstanceConfig { bytes_per_cpu: 4096, mode: Mode::Overwrite, snapshot: false };
    let tracer = Tracer::new(HostPlatform, 2, trace::linked_events!(), limits, config).unwrap();
    let tracer: &'static Tracer<HostPlatform> = Box::leak(Box::new(tracer));
    trace::install(tracer).unwrap();
    tracer.top().set_event(Some("test"), Some("named"), true).unwrap();
    let net = tracer.get_or_create("net", InstanceConfig { snapshot: true, ..config }).unwrap();
    net.set_event(Some("test"), Some("named"), true).unwrap();
    for cpu in [0, 1, 0] {
        HostPlatform::set_cpu(cpu);
        trace::emit!(NAMED, cpu as u64, "eth0");
        tracer.top().write_marker("top").unwrap();
    }
    net.snapshot_take().unwrap();
    net.write_marker("after").unwrap();
    HostPlatform::set_cpu(0);
    tracer
}

/// A console that keeps what it is given in room reserved beforehand, and, the
/// first time it is written to, starts a dump into `inner` (a panic while dumping).
struct Console<'a> {
    text: String,
    inner: Option<(&'a Tracer<HostPlatform>, Box<Console<'a>>)>,
}

impl<'a> Console<'a> {
    /// A console with `nested` dumps to start, each inside the one before.
    fn new(tracer: &'a Tracer<HostPlatform>, nested: usize) -> Self {
        let inner = (nested > 0).then(|| (tracer, Box::new(Console::new(tracer, nested - 1))));
        Console { text: String::with_capacity(1 << 20), inner }
    }

    /// The events of each dump, this one's first, then those started inside it.
    fn events(&self) -> Vec<usize> {
        let dumps = dump::parse(&self.text);
        assert_eq!(dumps.len(), 1, "{}", self.text);
        assert!(dumps[0].problems.is_empty(), "{:?}", dumps[0].problems);
        let mut events = vec![dumps[0].sections().iter().map(|s| s.events.len()).sum()];
        if let Some((_, inner)) = &self.inner {
            events.extend(inner.events());
        }
        events
    }
}

impl Write for Console<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if let Some((tracer, inner)) = &mut self.inner
            && inner.text.is_empty()
        {
            tracer.write_dump(&DumpSelection::all(2), None, &mut **inner);
        }
        assert!(self.text.len() + s.len() <= self.text.capacity(), "the console's room ran out");
        self.text.push_str(s);
        Ok(())
    }
}

/// Every record of [`traced`]: top, 3 events and 3 markers; net, the snapshot's 3
/// events and the live marker.
const EVENTS: usize = 10;

#[test]
fn a_dump_allocates_nothing_even_inside_another_and_a_third_allocates_its_own() {
    let tracer = traced();
    let panic =
        PanicHeader { cpu: 1, message: "boom", location: "a.rs:1:2", nested: None, other: None };
    let mut console = Console::new(tracer, 0);
    let made = allocations(|| tracer.write_dump(&DumpSelection::all(2), Some(panic), &mut console));
    assert_eq!(made, 0, "the dump allocated:\n{}", console.text);
    assert_eq!(console.events(), [EVENTS]);
    assert!(console.text.contains("n=1 name=eth0"), "{}", console.text);
    // A panic during a live dump: the second scratch.
    let mut console = Console::new(tracer, 1);
    let made = allocations(|| tracer.write_dump(&DumpSelection::all(2), None, &mut console));
    assert_eq!(made, 0, "the dump inside the dump allocated");
    assert_eq!(console.events(), [EVENTS; 2]);
    // Both scratches in use: a third dump allocates its own, and reads every record.
    let mut console = Console::new(tracer, 2);
    let made = allocations(|| tracer.write_dump(&DumpSelection::all(2), None, &mut console));
    assert!(made > 0, "both scratches were in use: the third allocates");
    assert_eq!(console.events(), [EVENTS; 3]);
}
