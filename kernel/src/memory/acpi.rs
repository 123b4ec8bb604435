//! ACPI tables through the physical-memory window: the `acpi` crate's handler, and
//! the one call that trusts the firmware's root pointer.

use super::map_device;
use acpi::{AcpiHandler, AcpiTables, PhysicalMapping};
use core::ptr::NonNull;

/// Maps ACPI tables through the physical-memory window (where the boot memory map
/// lists them, or mapped on demand); nothing to unmap.
#[derive(Clone, Copy)]
pub struct PhysicalWindow;

impl AcpiHandler for PhysicalWindow {
    unsafe fn map_physical_region<T>(
        &self,
        physical: usize,
        size: usize,
    ) -> PhysicalMapping<Self, T> {
        let virt = map_device(physical as u64, size as u64)
            .unwrap_or_else(|reason| panic!("ACPI tables cannot be mapped: {reason}"))
            .as_mut_ptr::<T>();
        // SAFETY: `[physical, physical + size)` is mapped at the window's offset (just
        // ensured), so `virt` is valid and non-null for `size`.
        unsafe { PhysicalMapping::new(physical, NonNull::new_unchecked(virt), size, size, *self) }
    }

    fn unmap_physical_region<T>(_region: &PhysicalMapping<Self, T>) {}
}

/// The ACPI tables found from the RSDP at physical address `rsdp`, which must be the
/// one the bootloader reported.
pub fn tables(rsdp: u64) -> Result<AcpiTables<PhysicalWindow>, &'static str> {
    // SAFETY: the bootloader passes the address of a valid RSDP, and the handler maps
    // physical memory through the window.
    unsafe { AcpiTables::from_rsdp(PhysicalWindow, rsdp as usize) }
        .map_err(|_| "ACPI tables are invalid")
}
