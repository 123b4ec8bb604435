//! The periodic tick from each CPU's local APIC timer. Drivers and self-tests that
//! want the tick add a hook to [`TICK`].

use crate::arch::hooks::Hooks;
use crate::arch::{apic, idt, percpu};
use core::sync::atomic::{AtomicU64, Ordering};

/// Timer interrupts per second on each CPU.
pub const HZ: u64 = 100;

/// The local APIC timer's rate (after its divider), measured once at boot; every
/// CPU's timer runs at the same rate.
static APIC_TIMER_HZ: AtomicU64 = AtomicU64::new(0);

/// One timer interrupt, as the tick hooks see it.
#[derive(Clone, Copy, Debug)]
pub struct Tick {
    /// The CPU that took it.
    pub cpu: usize,
    /// Timer interrupts this CPU has taken, this one included.
    pub count: u64,
    /// Nanoseconds since this CPU's previous one.
    pub interval_ns: u64,
}

/// Hooks run on every CPU's timer interrupt, in the order added.
pub static TICK: Hooks<fn(Tick), 4> = Hooks::new();

/// Records the APIC timer rate measured at boot and takes the timer interrupt.
pub fn init(apic_timer_hz: u64) -> Result<(), &'static str> {
    APIC_TIMER_HZ.store(apic_timer_hz, Ordering::Relaxed);
    idt::TIMER.add(on_tick)
}

/// Starts this CPU's periodic tick.
pub fn start_this_cpu() {
    let period = APIC_TIMER_HZ.load(Ordering::Relaxed) / HZ;
    apic::start_periodic_timer(u32::try_from(period).unwrap_or(u32::MAX));
}

/// The timer interrupt handler's work.
fn on_tick() {
    let cpu = percpu::current();
    let count = cpu.ticks.fetch_add(1, Ordering::Relaxed) + 1;
    let now = crate::clock::now_ns();
    let interval_ns = now - cpu.last_tick_ns.swap(now, Ordering::Relaxed);
    trace::emit!(crate::events::TIMER_TICK, count, interval_ns);
    let tick = Tick { cpu: percpu::index(), count, interval_ns };
    TICK.for_each(|hook| hook(tick));
}

/// Timer interrupts taken by CPU `cpu` since boot.
pub fn ticks(cpu: usize) -> u64 {
    percpu::get(cpu).map_or(0, |c| c.ticks.load(Ordering::Relaxed))
}
