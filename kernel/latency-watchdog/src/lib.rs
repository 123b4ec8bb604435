//! A demo driver that uses the tracer's in-kernel API as a driver author would: it
//! watches for an anomaly it can really detect (a periodic timer tick that arrives
//! late), keeps its own instance so other events cannot overwrite its records, turns
//! on more events when the anomaly happens, and after a window of ticks turns them
//! off and takes a snapshot, so the records around the anomaly are kept while the
//! live buffer goes on.
//!
//! The driver depends only on `trace`: the kernel names the events it records
//! ([`Events`]) and calls [`Watchdog::on_tick`] from its timer interrupt, which does
//! it all: the snapshot too, into the buffer the probe allocated, without waiting.
#![no_std]

use core::sync::atomic::{AtomicU8, AtomicU64, Ordering::Relaxed};
use trace::{Instance, InstanceConfig, InstanceError, Mode, Platform, Tracer};

trace::event! {
    /// A timer tick arrived later than the threshold.
    pub ANOMALY = "latency":"anomaly"
        { tick: u64, interval_ns: u64, threshold_ns: u64 } => "tick={tick} interval={interval_ns}ns threshold={threshold_ns}ns";
    /// The watchdog froze its window in a snapshot.
    pub CAPTURED = "latency":"captured" { anomaly_tick: u64, window_ticks: u64 } => "anomaly_tick={anomaly_tick} window={window_ticks} ticks";
}

/// The name of the driver's instance.
pub const INSTANCE: &str = "latency";
/// The kernel's events the driver records, each as (system, event), `"*"` for every
/// event of the system. The driver's own (`latency:*`) are always in the baseline.
#[derive(Clone, Copy, Debug)]
pub struct Events {
    /// Recorded all the time (the flight recorder before an anomaly).
    pub baseline: &'static [(&'static str, &'static str)],
    /// Added for the window after an anomaly.
    pub window: &'static [(&'static str, &'static str)],
}

/// The driver's own events.
const OWN: &[(&str, &str)] = &[("latency", "*")];

const WATCHING: u8 = 0;
const CAPTURING: u8 = 1;
const SNAPSHOT_PENDING: u8 = 2;
const CAPTURED_STATE: u8 = 3;
const NO_SNAPSHOT: u8 = 4;

/// What the watchdog is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Waiting for a late tick.
    Watching,
    /// Recording the window after an anomaly; this many ticks to go.
    Capturing(u64),
    /// The window is closed, but the snapshot could not be taken (a control
    /// operation was changing the buffers): it is tried again at the next tick.
    SnapshotPending,
    /// The snapshot holds the window; `rearm` to watch again.
    Captured,
    /// The window is closed, but it has no snapshot to go into (freed, or the
    /// `irqsoff` tracer's); `rearm` to watch again.
    NoSnapshot,
}

/// The watchdog.
pub struct Watchdog<P: Platform> {
    instance: Instance<'static, P>,
    state: AtomicU8,
    threshold_ns: AtomicU64,
    window_ticks: u64,
    events: Events,
    ticks_left: AtomicU64,
    anomalies: AtomicU64,
    anomaly_tick: AtomicU64,
    worst_ns: AtomicU64,
}

impl<P: Platform> Watchdog<P> {
    /// Probes the driver (thread context): creates (or takes over) its instance with a
    /// snapshot buffer, and starts recording the baseline events there. An event of
    /// `events` the tracer does not have is left out.
    pub fn probe(
        tracer: &'static Tracer<P>,
        threshold_ns: u64,
        window_ticks: u64,
        events: Events,
    ) -> Result<Self, InstanceError> {
        let config =
            InstanceConfig { bytes_per_cpu: 64 * 1024, mode: Mode::Overwrite, snapshot: true };
        let instance = tracer.get_or_create(INSTANCE, config)?;
        // An instance taken over keeps its configuration: the snapshot buffer the
        // timer interrupt swaps into is allocated here, where it may be.
        instance.snapshot_alloc()?;
        let watchdog = Watchdog {
            instance,
            state: AtomicU8::new(WATCHING),
            threshold_ns: AtomicU64::new(threshold_ns),
            window_ticks,
            events,
            ticks_left: AtomicU64::new(0),
            anomalies: AtomicU64::new(0),
            anomaly_tick: AtomicU64::new(0),
            worst_ns: AtomicU64::new(0),
        };
        watchdog.enable_baseline();
        // The window's events are enabled from the timer interrupt, where their
        // tracepoints cannot be patched: they stay armed.
        for (system, event) in events.window {
            let _ = tracer.keep_armed(Some(system), Some(event));
        }
        Ok(watchdog)
    }

    /// The driver's own events and the kernel's baseline on.
    fn enable_baseline(&self) {
        self.enable(OWN);
        self.enable(self.events.baseline);
    }

    /// Turns `events` on in the driver's instance.
    fn enable(&self, events: &[(&str, &str)]) {
        for (system, event) in events {
            // An event the kernel does not have is simply not recorded.
            let _ = self.instance.set_event(Some(system), Some(event), true);
        }
    }

    /// The timer interrupt of the watched CPU: tick number and time since the last
    /// one. Interrupt context: only atomic operations and lock-free tracing.
    pub fn on_tick(&self, tick: u64, interval_ns: u64) {
        match self.state.load(Relaxed) {
            WATCHING => {
                let threshold = self.threshold_ns.load(Relaxed);
                if tick > 1 && interval_ns > threshold {
                    trace::emit!(ANOMALY, tick, interval_ns, threshold);
                    trace::printk!(
                        self.instance,
                        "tick {} arrived {} ns late",
                        tick,
                        interval_ns - threshold
                    );
                    self.anomalies.fetch_add(1, Relaxed);
                    self.anomaly_tick.store(tick, Relaxed);
                    self.worst_ns.fetch_max(interval_ns, Relaxed);
                    self.enable(self.events.window);
                    self.ticks_left.store(self.window_ticks, Relaxed);
                    self.state.store(CAPTURING, Relaxed);
                }
            }
            // Close the window: nothing more goes into the instance, and the snapshot
            // keeps it.
            CAPTURING if self.ticks_left.fetch_sub(1, Relaxed) <= 1 => {
                let _ = self.instance.set_event(None, None, false);
                self.capture();
            }
            SNAPSHOT_PENDING => self.capture(),
            _ => {}
        }
    }

    /// Takes the snapshot from the timer interrupt (a swap into the buffer the probe
    /// allocated, without waiting), or leaves it to the next tick if a control
    /// operation is changing the buffers.
    fn capture(&self) {
        match self.instance.snapshot_take() {
            Ok(()) => {
                self.state.store(CAPTURED_STATE, Relaxed);
                trace::emit!(CAPTURED, self.anomaly_tick.load(Relaxed), self.window_ticks);
                // Recorded in the live buffer: the snapshot holds the window itself. A
                // buffer that takes no record (its recording off) loses this note only.
                let _ = self.instance.write_marker("latency watchdog: snapshot taken");
            }
            Err(InstanceError::Buffer(trace::Error::Busy)) => {
                self.state.store(SNAPSHOT_PENDING, Relaxed);
            }
            // No snapshot buffer (someone freed it) or not ours to take: the window
            // stays in the live buffer, its events off.
            Err(_) => {
                self.state.store(NO_SNAPSHOT, Relaxed);
                let _ = self.instance.write_marker("latency watchdog: no snapshot to take");
            }
        }
    }

    /// Watches again after a capture, or a window that had no snapshot to go into
    /// (thread context): baseline events back on.
    pub fn rearm(&self) {
        if matches!(self.state.load(Relaxed), CAPTURED_STATE | NO_SNAPSHOT) {
            self.enable_baseline();
            self.state.store(WATCHING, Relaxed);
        }
    }

    /// Sets the lateness threshold.
    pub fn set_threshold(&self, threshold_ns: u64) {
        self.threshold_ns.store(threshold_ns, Relaxed);
    }

    /// The current state.
    pub fn state(&self) -> State {
        match self.state.load(Relaxed) {
            WATCHING => State::Watching,
            CAPTURING => State::Capturing(self.ticks_left.load(Relaxed)),
            SNAPSHOT_PENDING => State::SnapshotPending,
            CAPTURED_STATE => State::Captured,
            _ => State::NoSnapshot,
        }
    }

    /// Anomalies seen, the tick of the last one, the worst interval, the threshold.
    pub fn counters(&self) -> (u64, u64, u64, u64) {
        (
            self.anomalies.load(Relaxed),
            self.anomaly_tick.load(Relaxed),
            self.worst_ns.load(Relaxed),
            self.threshold_ns.load(Relaxed),
        )
    }
}
