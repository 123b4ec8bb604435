//! The crate's tests: unit tests, the model-based property tests, the multi-threaded
//! stress test (normal builds), and the loom models (`--cfg loom`).

#[cfg(not(loom))]
mod basic;
#[cfg(not(loom))]
mod filter;
#[cfg(not(loom))]
mod function;
#[cfg(not(loom))]
mod hist;
#[cfg(not(loom))]
mod inject;
#[cfg(not(loom))]
mod instance_ops;
#[cfg(not(loom))]
mod keys;
#[cfg(all(loom, test))]
mod loom;
#[cfg(not(loom))]
mod misuse;
#[cfg(not(loom))]
mod model;
#[cfg(not(loom))]
mod persist;
#[cfg(not(loom))]
mod regress;
#[cfg(not(loom))]
mod seal;
#[cfg(not(loom))]
mod stress;
#[cfg(not(loom))]
mod trigger;

#[cfg(not(loom))]
pub(crate) mod util {
    std::thread_local! {
        /// Whether the calling thread plays a context that may wait: what
        /// [`Probe::may_wait`] says (false: an interrupt's context).
        pub(crate) static MAY_WAIT: core::cell::Cell<bool> = const { core::cell::Cell::new(true) };
        /// What [`Probe`]'s grace-period barrier runs on this thread, if anything:
        /// another CPU's writer during a grace period.
        pub(crate) static DURING_GRACE: RefCell<Option<Box<dyn FnMut()>>> =
            const { RefCell::new(None) };
    }

    use crate::event::EventDescriptor;
    use crate::event::format_file::Origin;
    use crate::sync::{Point, hook};
    use crate::{Context, CpuPromise, HostPlatform, Mode, Platform, ring::Buffer, ring::Config};
    use core::cell::{Cell, RefCell};
    use std::boxed::Box;
    use std::rc::Rc;
    use std::sync::{Arc, Mutex};
    use std::vec::Vec;

    /// The points of a write where the property and stress tests strike it with a
    /// nested write (every point a plain write passes, but the counters' `Bump`).
    pub(crate) const STRUCK_AT: [Point; 6] = [
        Point::Entered,
        Point::Reserving,
        Point::Reserved,
        Point::Filled,
        Point::Publishing,
        Point::Committed,
    ];

    /// The `set_key` calls a [`Probe`] saw: event name, armed.
    pub(crate) type KeyLog = Mutex<Vec<(&'static str, bool)>>;

    /// The host platform for tests of the control side: a context that may not
    /// wait on demand ([`MAY_WAIT`]), a hook in the grace period's barrier
    /// ([`DURING_GRACE`]), and, given a log, static keys whose `set_key` calls it
    /// records.
    #[derive(Clone, Default)]
    pub(crate) struct Probe {
        /// Where `set_key` calls go; `None`: no keys.
        pub(crate) keys: Option<Arc<KeyLog>>,
    }

    impl Platform for Probe {
        // Each test's threads take indices of their own, as a kernel's CPUs have.
        const PROMISE: Option<CpuPromise<Self>> = Some(CpuPromise::for_tests());

        fn cpu(&self) -> usize {
            HostPlatform.cpu()
        }

        fn now(&self) -> u64 {
            HostPlatform.now()
        }

        fn may_wait(&self) -> bool {
            MAY_WAIT.with(Cell::get)
        }

        fn heavy_barrier(&self) {
            core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
            DURING_GRACE.with(|hook| hook.borrow_mut().as_mut().map(|during| during()));
        }

        fn has_keys(&self) -> bool {
            self.keys.is_some()
        }

        fn set_key(&self, event: &'static EventDescriptor, armed: bool) {
            if let Some(log) = &self.keys {
                log.lock().unwrap().push((event.name, armed));
            }
        }
    }

    /// A property test's configuration: `cases` cases, and no file of failures
    /// written into the source tree (a failure prints its input).
    pub(crate) fn cases(cases: u32) -> proptest::prelude::ProptestConfig {
        proptest::prelude::ProptestConfig {
            cases,
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        }
    }

    /// Where the unit tests' events are written, for filters: CPU 0's thread.
    pub(crate) const HERE: Origin = Origin { context: Context::TASK, cpu: 0 };

    /// A host buffer set whose writers nest like a kernel's (the [`Probe`] platform);
    /// the calling thread is CPU 0 with a manual clock.
    pub(crate) fn buffer(cpus: usize, bytes: usize, mode: Mode) -> Buffer<Probe> {
        HostPlatform::set_cpu(0);
        HostPlatform::set_clock(1_000);
        Buffer::new(Probe::default(), Config { cpus, bytes_per_cpu: bytes, mode }).unwrap()
    }

    /// Arms an interrupt that, at the next `Reserved` point, writes one record (id
    /// `100 + level`) at `level` and arms the next level inside it, up to `last`.
    pub(crate) fn nest(b: Rc<Buffer<Probe>>, level: u16, last: u16) {
        if level <= last {
            hook::once(Point::Reserved, move || {
                nest(b.clone(), level + 1, last);
                let _ = b.write(100 + level, &[level as u8]);
            });
        }
    }

    /// (id, payload) of every event of `cpu`, oldest first, not consuming.
    pub(crate) fn events<P: Platform>(b: &Buffer<P>, cpu: usize) -> Vec<(u16, Vec<u8>)> {
        let mut it = b.iter(cpu).unwrap();
        let mut v = Vec::new();
        while let Some(r) = it.next_record() {
            v.push((r.id, r.payload.to_vec()));
        }
        v
    }

    /// (id, payload, lost) of every event of `cpu`, consuming.
    pub(crate) fn consume<P: Platform>(b: &Buffer<P>, cpu: usize) -> Vec<(u16, Vec<u8>, u64)> {
        let mut c = b.consumer(cpu).unwrap();
        let mut v = Vec::new();
        while let Some(r) = c.next_record().unwrap() {
            v.push((r.id, r.payload.to_vec(), r.lost));
        }
        v
    }
}
