//! The function profiler (ftrace's `function_profile_enabled` and
//! `trace_stat/functionN`): per CPU and per function, the calls, their total time and
//! the sum of its squares. The functions it profiles are those the top-level
//! instance's `set_ftrace_filter` and `set_ftrace_notrace` select; their entries are
//! patched while it is on. The platform's entry hook counts a call
//! ([`Tracer::profile_entry`]) and, for a call whose return it follows, adds the
//! time at the return ([`Tracer::profile_return`]). Each counter is one atomic add,
//! so the profile is exact from any context, NMIs included.

use super::Tracer;
use super::function::{Control, FunctionError, Functions};
use crate::platform::Platform;
use crate::sync::{AtomicBool, AtomicU64, Ordering::Relaxed};
use crate::text::write_graph_duration;
use alloc::vec::Vec;
use core::fmt::{self, Write};

/// One function's profile on one CPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FunctionStat {
    /// The function's index among those registered.
    pub index: usize,
    /// Calls counted.
    pub hits: u64,
    /// Nanoseconds the calls whose return was followed took, their callees included.
    pub time: u64,
    /// The sum of the squares of those times (ns²).
    pub time_squared: u128,
}

impl FunctionStat {
    /// Writes the table of one CPU's `stats` as ftrace's `trace_stat/functionN`:
    /// per function its name (`name` gives it; the column widens to the longest
    /// name where Linux cuts names to 30 characters), calls, total and average time,
    /// and the sample variance `s^2` (in µs², printed as Linux prints it), in the
    /// order given.
    pub fn write_table(
        out: &mut dyn Write,
        stats: &[FunctionStat],
        name: &dyn Fn(usize) -> Option<&'static str>,
    ) -> fmt::Result {
        let name = |stat: &FunctionStat| name(stat.index).unwrap_or("?");
        let width = stats.iter().map(|stat| name(stat).chars().count()).max().unwrap_or(0).max(30);
        let pad = width - 30;
        writeln!(
            out,
            "  Function{:pad$}                               Hit    Time            Avg             s^2",
            ""
        )?;
        writeln!(
            out,
            "  --------{:pad$}                               ---    ----            ---             ---",
            ""
        )?;
        for stat in stats {
            write!(out, "  {:<width$}  {:>10}    ", name(stat), stat.hits)?;
            let avg = stat.time / stat.hits.max(1);
            let variance = match u128::from(stat.hits) {
                n @ 2.. => {
                    let time = u128::from(stat.time);
                    let spread = n.saturating_mul(stat.time_squared).saturating_sub(time * time);
                    spread / n.saturating_mul(n - 1).saturating_mul(1000)
                }
                _ => 0,
            };
            write_graph_duration(out, u128::from(stat.time))?;
            out.write_str("    ")?;
            write_graph_duration(out, u128::from(avg))?;
            out.write_str("    ")?;
            write_graph_duration(out, variance)?;
            out.write_str("\n")?;
        }
        Ok(())
    }
}

/// The profiler's state, part of [`Functions`].
pub(super) struct Profile {
    /// Whether it is on.
    on: AtomicBool,
    /// Per function: whether it is profiled (on, and the top level's lists select
    /// it).
    profiled: Vec<AtomicBool>,
    /// Per CPU, then per function: calls, time, and the time's squares summed (low
    /// and high words: the high word takes the carry of the low one).
    stats: Vec<[AtomicU64; 4]>,
}

impl Profile {
    /// Off, over `count` functions on `cpus` CPUs.
    pub(super) fn new(count: usize, cpus: usize) -> Profile {
        let counters = || [0; 4].map(AtomicU64::new);
        Profile {
            on: AtomicBool::new(false),
            profiled: (0..count).map(|_| AtomicBool::new(false)).collect(),
            stats: (0..count * cpus).map(|_| counters()).collect(),
        }
    }

    /// Whether the profiler is on.
    #[inline]
    pub(super) fn is_on(&self) -> bool {
        self.on.load(Relaxed)
    }

    /// Whether function `index` is profiled.
    #[inline]
    pub(super) fn profiles(&self, index: usize) -> bool {
        self.profiled.get(index).is_some_and(|p| p.load(Relaxed))
    }

    /// Publishes which functions are profiled: while `on`, those the top level's
    /// `filter` lists (every function if it lists none), less its `notrace` list.
    pub(super) fn publish(&self, on: bool, filter: &[bool], notrace: &[bool]) {
        let all = !filter.contains(&true);
        for ((profiled, &listed), &never) in self.profiled.iter().zip(filter).zip(notrace) {
            profiled.store(on && (all || listed) && !never, Relaxed);
        }
        self.on.store(on, Relaxed);
    }

    /// Every counter of every function and CPU.
    fn counters_all(&self) -> impl Iterator<Item = &AtomicU64> {
        self.stats.iter().flatten()
    }

    /// The counters of function `index` on `cpu`.
    #[inline]
    fn counters(&self, cpu: usize, index: usize) -> Option<&[AtomicU64; 4]> {
        self.stats.get(cpu.checked_mul(self.profiled.len())?.checked_add(index)?)
    }
}

impl<P: Platform> Tracer<P> {
    /// The profiler's count of a call of function `index`, from the platform's entry
    /// hook, in any context: returns whether the function is profiled, and then the
    /// platform follows the call's return and hands its time to
    /// [`Tracer::profile_return`].
    #[inline]
    pub fn profile_entry(&self, index: usize) -> bool {
        let Some(profile) = self.functions.get().map(|f| &f.profile) else { return false };
        if !profile.profiles(index) {
            return false;
        }
        if let Some(counters) = profile.counters(self.platform.cpu(), index) {
            counters[0].fetch_add(1, Relaxed);
        }
        true
    }

    /// Adds the time of a profiled call of function `index` (`duration` ns, its
    /// callees included) to this CPU's profile, from the platform's exit hook, while
    /// the profiler is on.
    pub fn profile_return(&self, index: usize, duration: u64) {
        let Some(profile) = self.functions.get().map(|f| &f.profile) else { return };
        let cpu = self.platform.cpu();
        let Some(counters) = profile.counters(cpu, index).filter(|_| profile.is_on()) else {
            return;
        };
        counters[1].fetch_add(duration, Relaxed);
        let square = u128::from(duration) * u128::from(duration);
        let low = square as u64;
        let carry = counters[2].fetch_add(low, Relaxed).checked_add(low).is_none();
        counters[3].fetch_add((square >> 64) as u64 + u64::from(carry), Relaxed);
    }

    /// Whether the profiler is on (`function_profile_enabled`).
    pub fn function_profile(&self) -> bool {
        self.functions.get().is_some_and(|f| f.profile.is_on())
    }

    /// Turns the profiler on (its counts start from zero) or off (they stay to be
    /// read). The entries of the functions it profiles become calls, or their NOPs
    /// again where nothing else wants them. Needs a context that may wait; a refused
    /// patch changes nothing.
    pub fn set_function_profile(&self, on: bool) -> Result<(), FunctionError> {
        self.change_patched(|functions, control| {
            let profile = &functions.profile;
            let was = profile.is_on();
            // The counts kept from before, put back if the patch is refused.
            let kept: Vec<u64> = profile.counters_all().map(|c| c.load(Relaxed)).collect();
            if on && !was {
                profile.counters_all().for_each(|counter| counter.store(0, Relaxed));
            }
            let (filter, notrace) = control.top_lists();
            profile.publish(on, &filter, &notrace);
            Ok(move |functions: &Functions, _: &mut Control| {
                let profile = &functions.profile;
                profile.publish(was, &filter, &notrace);
                profile.counters_all().zip(kept).for_each(|(c, count)| c.store(count, Relaxed));
            })
        })
    }

    /// CPU `cpu`'s profile: each function called since the profiler was turned on,
    /// the longest total time first (ties: the most calls first, then by index).
    pub fn function_stats(&self, cpu: usize) -> Vec<FunctionStat> {
        let Some(profile) = self.functions.get().map(|f| &f.profile) else { return Vec::new() };
        let mut stats: Vec<FunctionStat> = (0..profile.profiled.len())
            .filter_map(|index| {
                let [hits, time, low, high] = profile.counters(cpu, index)?;
                let hits = hits.load(Relaxed);
                let square = |w: &AtomicU64| u128::from(w.load(Relaxed));
                let time_squared = square(low) | square(high) << 64;
                (hits > 0).then(|| FunctionStat {
                    index,
                    hits,
                    time: time.load(Relaxed),
                    time_squared,
                })
            })
            .collect();
        stats.sort_by(|a, b| {
            b.time.cmp(&a.time).then(b.hits.cmp(&a.hits)).then(a.index.cmp(&b.index))
        });
        stats
    }
}
