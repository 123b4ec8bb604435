//! The local APIC (xAPIC, memory-mapped) and the I/O APIC: interrupt acknowledgement,
//! the per-CPU timer, and routing of device interrupts.

use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, Ordering};
use volatile::VolatilePtr;

/// Vector of the local APIC timer.
pub const TIMER_VECTOR: u8 = 0x30;
/// Vector of the COM1 receive interrupt.
pub const SERIAL_VECTOR: u8 = 0x31;
/// Vector of the "look at your request slot" IPI.
pub const CALL_VECTOR: u8 = 0xf0;
/// The test IPI: free for self-tests to hammer CPUs with (they add its hooks).
pub const TEST_VECTOR: u8 = 0xf1;
/// Vector of local APIC errors.
pub const ERROR_VECTOR: u8 = 0xfe;
/// Vector of spurious local APIC interrupts (low nibble all ones, as required).
pub const SPURIOUS_VECTOR: u8 = 0xff;

/// The local APIC's registers: byte offsets in its xAPIC MMIO page.
mod reg {
    pub const ID: usize = 0x20;
    pub const TPR: usize = 0x80;
    pub const EOI: usize = 0xb0;
    pub const SVR: usize = 0xf0;
    pub const LVT_TIMER: usize = 0x320;
    pub const LVT_ERROR: usize = 0x370;
    pub const ESR: usize = 0x280;
    pub const TIMER_INITIAL: usize = 0x380;
    pub const TIMER_CURRENT: usize = 0x390;
    pub const TIMER_DIVIDE: usize = 0x3e0;
    pub const ICR_LOW: usize = 0x300;
    pub const ICR_HIGH: usize = 0x310;
}

const SVR_ENABLE: u32 = 1 << 8;
const LVT_MASKED: u32 = 1 << 16;
/// A redirection entry's delivery mode field (bits 8-10) for an NMI.
const DELIVERY_NMI: u32 = 0b100 << 8;
const LVT_TIMER_PERIODIC: u32 = 1 << 17;
/// Divide configuration "by 16".
const TIMER_DIVIDE_16: u32 = 0b0011;

/// Virtual address of the local APIC's register page (the same on every CPU).
static LAPIC_BASE: AtomicU64 = AtomicU64::new(0);

/// One 32-bit APIC register.
fn lapic_reg(offset: usize) -> VolatilePtr<'static, u32> {
    let base = LAPIC_BASE.load(Ordering::Relaxed);
    assert!(base != 0, "local APIC used before apic::init");
    let ptr = (base as usize + offset) as *mut u32;
    // SAFETY: `base` is the mapped, page-aligned local APIC register page (set by
    // `init`), and every offset used here is an aligned register inside that page.
    // Registers are accessed only through volatile reads and writes.
    unsafe { VolatilePtr::new(NonNull::new_unchecked(ptr)) }
}

/// Records where the local APIC's register page is mapped (the same virtual address
/// on every CPU). Called once, by the boot CPU.
pub fn set_base(base: u64) {
    LAPIC_BASE.store(base, Ordering::Relaxed);
}

/// Enables this CPU's local APIC, with the spurious and error vectors set.
pub fn init_this_cpu() {
    lapic_reg(reg::TPR).write(0);
    lapic_reg(reg::LVT_ERROR).write(ERROR_VECTOR as u32);
    lapic_reg(reg::ESR).write(0);
    lapic_reg(reg::SVR).write(SVR_ENABLE | SPURIOUS_VECTOR as u32);
}

/// This CPU's local APIC id.
pub fn id() -> u32 {
    lapic_reg(reg::ID).read() >> 24
}

/// Signals end-of-interrupt to this CPU's local APIC.
pub fn eoi() {
    lapic_reg(reg::EOI).write(0);
}

/// Measures the local APIC timer's tick rate (after its divide-by-16) against the PIT,
/// together with the TSC's: returns `(apic_ticks_per_second, tsc_ticks_per_second)`.
pub fn calibrate_timer_and_tsc() -> (u64, u64) {
    const MICROS: u64 = 20_000;
    lapic_reg(reg::TIMER_DIVIDE).write(TIMER_DIVIDE_16);
    lapic_reg(reg::LVT_TIMER).write(LVT_MASKED | TIMER_VECTOR as u32);
    lapic_reg(reg::TIMER_INITIAL).write(u32::MAX);
    let sample = || (lapic_reg(reg::TIMER_CURRENT).read(), super::rdtsc());
    let ((apic0, tsc0), (apic1, tsc1)) = super::pit::measure(MICROS, sample, sample);
    lapic_reg(reg::TIMER_INITIAL).write(0);
    let per_second = |delta: u64| delta * 1_000_000 / MICROS;
    (per_second(u64::from(apic0 - apic1)), per_second(tsc1 - tsc0))
}

/// Starts this CPU's local APIC timer: an interrupt on [`TIMER_VECTOR`] every
/// `ticks` timer ticks (divide-by-16 ticks, as measured by the calibration).
pub fn start_periodic_timer(ticks: u32) {
    lapic_reg(reg::TIMER_DIVIDE).write(TIMER_DIVIDE_16);
    lapic_reg(reg::LVT_TIMER).write(LVT_TIMER_PERIODIC | TIMER_VECTOR as u32);
    lapic_reg(reg::TIMER_INITIAL).write(ticks.max(1));
}

/// An inter-processor interrupt.
#[derive(Clone, Copy, Debug)]
pub enum Ipi {
    /// INIT: puts the target into wait-for-SIPI.
    Init,
    /// Start-up: the target starts in real mode at `page << 12`.
    Startup(u8),
    /// A fixed interrupt on `vector`.
    Fixed(u8),
    /// A non-maskable interrupt.
    Nmi,
}

/// Who receives an IPI.
#[derive(Clone, Copy, Debug)]
pub enum Destination {
    /// The CPU with this local APIC id.
    Apic(u32),
    /// Every CPU but the sender.
    AllButSelf,
}

const ICR_DELIVERY_PENDING: u32 = 1 << 12;

/// The `target_apic` an `smp:ipi_send` record gives an IPI to every CPU but the
/// sender (the panic's and the lockup detector's NMIs, the memory barrier's IPI).
const ALL_BUT_SELF: u32 = u32::MAX;

/// Sends `ipi` to `destination` and waits until the local APIC has accepted it.
pub fn send_ipi(destination: Destination, ipi: Ipi) {
    let low = match ipi {
        Ipi::Init => 0b101 << 8 | 1 << 14,
        Ipi::Startup(page) => 0b110 << 8 | 1 << 14 | u32::from(page),
        Ipi::Fixed(vector) => u32::from(vector),
        Ipi::Nmi => 0b100 << 8 | 1 << 14,
    };
    let (high, shorthand) = match destination {
        Destination::Apic(id) => (id << 24, 0),
        Destination::AllButSelf => (0, 0b11 << 18),
    };
    let kind = match ipi {
        Ipi::Init => "init",
        Ipi::Startup(_) => "startup",
        Ipi::Fixed(_) => "fixed",
        Ipi::Nmi => "nmi",
    };
    // Every CPU but the sender: no APIC id, which 0 would claim (the boot CPU's).
    let target = match destination {
        Destination::Apic(id) => id,
        Destination::AllButSelf => ALL_BUT_SELF,
    };
    trace::emit!(crate::events::IPI_SEND, target, kind);
    while lapic_reg(reg::ICR_LOW).read() & ICR_DELIVERY_PENDING != 0 {
        core::hint::spin_loop();
    }
    lapic_reg(reg::ICR_HIGH).write(high);
    lapic_reg(reg::ICR_LOW).write(low | shorthand);
    while lapic_reg(reg::ICR_LOW).read() & ICR_DELIVERY_PENDING != 0 {
        core::hint::spin_loop();
    }
}

/// Routing of one I/O APIC input, as the MADT's interrupt source overrides describe it.
#[derive(Clone, Copy, Debug)]
pub struct Route {
    /// Global system interrupt number.
    pub gsi: u32,
    /// Active low (ISA default: active high).
    pub active_low: bool,
    /// Level triggered (ISA default: edge).
    pub level_triggered: bool,
}

/// An I/O APIC whose registers are mapped at `base`, serving GSIs from `gsi_base`.
#[derive(Clone, Copy, Debug)]
pub struct IoApic {
    /// Virtual address of the register window.
    pub base: u64,
    /// First global system interrupt this I/O APIC serves.
    pub gsi_base: u32,
}

impl IoApic {
    fn write(&self, index: u32, value: u32) {
        let select = self.base as *mut u32;
        let window = (self.base + 0x10) as *mut u32;
        // SAFETY: `base` is the mapped register window of an I/O APIC found in the
        // MADT; IOREGSEL (offset 0) and IOWIN (offset 0x10) are its two registers.
        // Callers hold no other access to this I/O APIC concurrently (routes are set
        // once, at boot, by the boot CPU).
        unsafe {
            VolatilePtr::new(NonNull::new_unchecked(select)).write(index);
            VolatilePtr::new(NonNull::new_unchecked(window)).write(value);
        }
    }

    /// Delivers `route` as `vector` to the local APIC `apic_id`, unmasked.
    pub fn route(&self, route: Route, vector: u8, apic_id: u32) {
        self.program(route, u32::from(vector), apic_id);
    }

    /// Delivers `route` to the local APIC `apic_id` as an NMI, unmasked. The line
    /// must be edge triggered (an NMI has no end-of-interrupt).
    pub fn route_nmi(&self, route: Route, apic_id: u32) {
        self.program(route, DELIVERY_NMI, apic_id);
    }

    /// Programs `route`'s redirection entry: `low` (vector or delivery mode) with
    /// the route's polarity and trigger mode, to the local APIC `apic_id`.
    fn program(&self, route: Route, mut low: u32, apic_id: u32) {
        let pin = route.gsi - self.gsi_base;
        if route.active_low {
            low |= 1 << 13;
        }
        if route.level_triggered {
            low |= 1 << 15;
        }
        self.write(0x10 + 2 * pin, LVT_MASKED);
        self.write(0x11 + 2 * pin, apic_id << 24);
        self.write(0x10 + 2 * pin, low);
    }
}
