//! The clocks a buffer set's timestamps can come from (ftrace's `trace_clock`).

use crate::platform::Platform;
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Where a buffer set's timestamps come from. `global` and `counter` keep one word
/// each, shared by every tracer as ftrace's are: plain `core` atomics, outside the
/// loom models' protocols.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Clock {
    /// The platform's clock, ns ([`Platform::now`]): monotonic on each CPU; across
    /// CPUs as far as their clocks agree (the TSC of one machine does).
    #[default]
    Local,
    /// The platform's clock made monotonic across CPUs: a reading is never below one
    /// taken before it on any CPU (each reading is a read-modify-write of one shared
    /// word, as ftrace's `global` takes a lock).
    Global,
    /// Not a clock: a count shared by every CPU, one step per record, so that records
    /// of different CPUs order exactly. Its values are not nanoseconds.
    Counter,
    /// The CPU's cycle counter as it is ([`Platform::cycles`]: the TSC on x86), not
    /// scaled to nanoseconds.
    X86Tsc,
    /// The kernel's timer ticks since boot ([`Platform::jiffies`]), a count, as
    /// ftrace's jiffies clock.
    Uptime,
    /// The platform's clock, as `local` (ftrace's `perf` is its `local` clock too).
    Perf,
    /// The kernel's monotonic clock: the platform's clock ([`Platform::now`]), which
    /// no time adjustment moves (ftrace's `ktime_get_mono_fast_ns`).
    Mono,
    /// The monotonic clock unadjusted: the same readings here, as nothing adjusts it.
    MonoRaw,
    /// The monotonic clock with the time suspended added: the same readings here, as
    /// the kernel never suspends.
    Boot,
}

/// The highest reading of [`Clock::Global`] so far.
static GLOBAL_LAST: AtomicU64 = AtomicU64::new(0);
/// The last value of [`Clock::Counter`].
static COUNTER: AtomicU64 = AtomicU64::new(0);

impl Clock {
    /// Every clock, in `trace_clock`'s order (ftrace's).
    pub const ALL: [Clock; 9] = [
        Clock::Local,
        Clock::Global,
        Clock::Counter,
        Clock::Uptime,
        Clock::Perf,
        Clock::Mono,
        Clock::MonoRaw,
        Clock::Boot,
        Clock::X86Tsc,
    ];

    /// Its name in `trace_clock`.
    pub const fn name(self) -> &'static str {
        match self {
            Clock::Local => "local",
            Clock::Global => "global",
            Clock::Counter => "counter",
            Clock::X86Tsc => "x86-tsc",
            Clock::Uptime => "uptime",
            Clock::Perf => "perf",
            Clock::Mono => "mono",
            Clock::MonoRaw => "mono_raw",
            Clock::Boot => "boot",
        }
    }

    /// The clock named `name`, if any.
    pub fn from_name(name: &str) -> Option<Clock> {
        Clock::ALL.into_iter().find(|c| c.name() == name)
    }

    /// Whether its readings are nanoseconds (printed as seconds), or counts (printed
    /// as they are, as ftrace prints them).
    pub const fn in_ns(self) -> bool {
        !matches!(self, Clock::Counter | Clock::X86Tsc | Clock::Uptime)
    }

    /// Its number in a dump (in the order the clocks came: a dump keeps its meaning).
    pub const fn code(self) -> u64 {
        match self {
            Clock::Local => 0,
            Clock::Global => 1,
            Clock::Counter => 2,
            Clock::X86Tsc => 3,
            Clock::Uptime => 4,
            Clock::Perf => 5,
            Clock::Mono => 6,
            Clock::MonoRaw => 7,
            Clock::Boot => 8,
        }
    }

    /// The clock numbered `code` in a dump, if any.
    pub fn from_code(code: u64) -> Option<Clock> {
        Clock::ALL.into_iter().find(|c| c.code() == code)
    }

    /// A reading for a record: `Counter` steps. The local clock is read inline, the
    /// others out of line.
    #[inline(always)]
    pub(crate) fn stamp<P: Platform>(self, platform: &P) -> u64 {
        match self {
            Clock::Local => platform.now(),
            _ => self.stamp_other(platform),
        }
    }

    /// [`Clock::stamp`] of a clock other than the local one.
    #[cold]
    #[inline(never)]
    fn stamp_other<P: Platform>(self, platform: &P) -> u64 {
        match self {
            Clock::Local | Clock::Perf | Clock::Mono | Clock::MonoRaw | Clock::Boot => {
                platform.now()
            }
            // The highest of the platform's reading and every reading before.
            Clock::Global => {
                let now = platform.now();
                now.max(GLOBAL_LAST.fetch_max(now, Relaxed))
            }
            Clock::Counter => COUNTER.fetch_add(1, Relaxed) + 1,
            Clock::X86Tsc => platform.cycles(),
            Clock::Uptime => platform.jiffies(),
        }
    }

    /// A reading that records nothing (a file's `now ts`): `Counter` does not step.
    pub fn now<P: Platform>(self, platform: &P) -> u64 {
        match self {
            Clock::Counter => COUNTER.load(Relaxed),
            _ => self.stamp(platform),
        }
    }
}
