//! The periodic tick from each CPU's local APIC timer.

use crate::arch::{apic, percpu};
use core::sync::atomic::{AtomicU64, Ordering};

/// Timer interrupts per second on each CPU.
pub const HZ: u64 = 100;

/// The local APIC timer's rate (after its divider), measured once at boot; every
/// CPU's timer runs at the same rate.
static APIC_TIMER_HZ: AtomicU64 = AtomicU64::new(0);

/// Records the APIC timer rate measured at boot.
pub fn init(apic_timer_hz: u64) {
    APIC_TIMER_HZ.store(apic_timer_hz, Ordering::Relaxed);
}

/// Starts this CPU's periodic tick.
pub fn start_this_cpu() {
    let period = APIC_TIMER_HZ.load(Ordering::Relaxed) / HZ;
    apic::start_periodic_timer(u32::try_from(period).unwrap_or(u32::MAX));
}

/// Set by `panic irq`: the boot CPU's next tick panics (in interrupt context).
static PANIC_ON_TICK: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// Makes the boot CPU's next timer interrupt panic.
pub fn panic_on_next_tick() {
    PANIC_ON_TICK.store(true, Ordering::Relaxed);
}

/// The timer interrupt handler's work.
pub fn on_tick() {
    let cpu = percpu::current();
    let tick = cpu.ticks.fetch_add(1, Ordering::Relaxed) + 1;
    let now = crate::clock::now_ns();
    let interval = now - cpu.last_tick_ns.swap(now, Ordering::Relaxed);
    trace::emit!(crate::events::TIMER_TICK, tick, interval);
    if percpu::index() == 0 {
        if PANIC_ON_TICK.swap(false, Ordering::Relaxed) {
            panic!("deliberate panic in the timer interrupt (tick {tick})");
        }
        crate::watchdog::on_tick(tick, interval);
    }
    crate::stress::on_timer();
}

/// Timer interrupts taken by CPU `cpu` since boot.
pub fn ticks(cpu: usize) -> u64 {
    percpu::get(cpu).map_or(0, |c| c.ticks.load(Ordering::Relaxed))
}
