//! The trace that survives a warm reboot. `instances/boot_map` records every boot
//! into the persistent region (a fixed physical range, see [`crate::memory`]); a
//! `reboot`, or a panic with `panic_reboot` on, saves its positions there before the
//! reset. The next boot validates what the region holds before `boot_map` records
//! again, and keeps a valid trace as the read-only instance `instances/last_boot`.

use crate::tracing::{self, KernelPlatform};
use crate::{arch, clock, println, smp};
use alloc::sync::Arc;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use spin::Once;
use trace::ring::persist::Region;
use trace::ring::{Buffer, Recorder};
use trace::{Mode, Tracer};

include!(concat!(env!("OUT_DIR"), "/build_id.rs"));

/// The instance that records this boot into the region.
pub const BOOT_MAP: &str = "boot_map";
/// The read-only instance holding the previous boot's trace.
pub const LAST_BOOT: &str = "last_boot";

/// The region, once [`init`] found it usable.
static REGION: Once<Region<'static>> = Once::new();
/// `boot_map`'s recorder (its live set is over the region, and is never replaced:
/// such a set cannot be resized nor given a snapshot).
static BOOT_MAP_RECORDER: Once<Arc<Recorder<KernelPlatform>>> = Once::new();
/// Whether a panic reboots (warm) after its dump, saving `boot_map` first.
static PANIC_REBOOT: AtomicBool = AtomicBool::new(false);

/// Validates the region's previous content and keeps it as `last_boot` if valid,
/// then starts `boot_map` over the region. Prints one line about the previous trace
/// and one about `boot_map`.
pub fn init(tracer: &'static Tracer<KernelPlatform>, words: Result<&'static [AtomicU64], &str>) {
    let region = match words.map(|words| Region::new(words, arch::MAX_CPUS)) {
        Ok(Ok(region)) => REGION.call_once(|| region),
        Ok(Err(error)) => return println!("trace: no persistent region: {error}"),
        Err(error) => return println!("trace: no persistent region: {error}"),
    };
    let start = clock::now_ns();
    let checked = region.validate(BUILD_ID);
    let micros = (clock::now_ns() - start) / 1000;
    match checked {
        Ok(saved) => {
            let kept = region
                .restore(&saved, KernelPlatform)
                .map_err(trace::InstanceError::from)
                .and_then(|buffer| tracer.create_over(LAST_BOOT, buffer));
            match kept {
                Ok(_) => println!(
                    "trace: previous boot's trace: {} events on {} CPU(s), validated in {}.{:03} ms: instances/{LAST_BOOT}",
                    saved.events(),
                    saved.cpus(),
                    micros / 1000,
                    micros % 1000
                ),
                Err(error) => println!("trace: previous boot's trace valid but not kept: {error}"),
            }
        }
        Err(reason) if reason.is_absent() => {
            println!("trace: no previous boot's trace: {reason}")
        }
        Err(reason) => println!(
            "trace: previous boot's trace discarded: {reason} (checked in {}.{:03} ms)",
            micros / 1000,
            micros % 1000
        ),
    }
    region.forget();
    let started = Buffer::over(KernelPlatform, Mode::Overwrite, region.rings(tracer.cpus()))
        .map_err(trace::InstanceError::from)
        .and_then(|buffer| tracer.create_over(BOOT_MAP, buffer));
    match started {
        Ok(instance) => {
            tracing::default_events(&instance);
            BOOT_MAP_RECORDER.call_once(|| instance.recorder());
            println!(
                "trace: instances/{BOOT_MAP} records this boot ({} KB per CPU, reserved memory)",
                region.ring_words() * 8 / 1024
            );
        }
        Err(error) => println!("trace: instances/{BOOT_MAP} not started: {error}"),
    }
}

/// Saves `boot_map` into the region (recording stops). The other CPUs must be
/// stopped first, so none overwrites what is saved.
fn save() -> Result<(), &'static str> {
    let (Some(region), Some(recorder)) = (REGION.get(), BOOT_MAP_RECORDER.get()) else {
        return Err("no instances/boot_map");
    };
    region.save(recorder.live(), BUILD_ID).map_err(|_| "boot_map is not over the region")
}

/// Warm reboot: stops the other CPUs, saves `boot_map`, resets the machine keeping
/// its memory.
pub fn reboot() -> ! {
    stop_save_reset(|| {})
}

/// Stops the other CPUs, saves `boot_map` (saying so if it cannot), runs `then`,
/// and resets the machine keeping its memory.
fn stop_save_reset(then: impl FnOnce()) -> ! {
    x86_64::instructions::interrupts::disable();
    smp::stop_other_cpus();
    if let Err(error) = save() {
        crate::emergency_println!("reboot: trace not saved: {error}");
    }
    then();
    crate::emergency_println!("reboot: resetting");
    arch::reset()
}

/// Whether a panic reboots after its dump.
pub fn panic_reboot() -> bool {
    PANIC_REBOOT.load(Relaxed)
}

/// Sets whether a panic reboots after its dump.
pub fn set_panic_reboot(on: bool) {
    PANIC_REBOOT.store(on, Relaxed);
}

/// The panic path's save when [`panic_reboot`] is on, once the other CPUs are
/// stopped and before the dump (a dump that fails leaves the trace saved): saves
/// `boot_map` for the boot after the reset, and says so.
pub fn panic_save() {
    match save() {
        Ok(()) => crate::emergency_println!("panic: trace saved; rebooting after the dump"),
        Err(error) => crate::emergency_println!("panic: trace not saved ({error}); rebooting"),
    }
}

/// Test aid: saves `boot_map` as `reboot` does, overwrites CPU `cpu`'s ring in the
/// region with a pattern, and resets, so that the next boot finds the saved trace
/// damaged. Returns (without doing anything) why it cannot.
pub fn scribble_and_reboot(cpu: usize) -> Result<core::convert::Infallible, &'static str> {
    let region = REGION.get().ok_or("no persistent region")?;
    let ring = region.ring(cpu).filter(|_| cpu < smp::online()).ok_or("no such CPU")?;
    BOOT_MAP_RECORDER.get().ok_or("no instances/boot_map")?;
    stop_save_reset(|| {
        for word in ring {
            word.store(0xdead_beef_dead_beef, Relaxed);
        }
        crate::emergency_println!("scribble: cpu{cpu}'s saved ring overwritten");
    })
}
