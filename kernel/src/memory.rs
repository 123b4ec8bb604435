//! Physical memory as the kernel sees it: the bootloader maps all of it (at least the
//! first 4 GiB, so MMIO too) at one offset.

use spin::Once;
use x86_64::VirtAddr;
use x86_64::structures::paging::{OffsetPageTable, PageTable, Translate};

static PHYSICAL_MEMORY_OFFSET: Once<u64> = Once::new();

/// Records where the bootloader mapped physical memory. Called once at boot.
pub fn init(offset: u64) {
    PHYSICAL_MEMORY_OFFSET.call_once(|| offset);
}

/// The virtual address at which physical address `phys` is mapped.
pub fn phys_to_virt(phys: u64) -> VirtAddr {
    let offset = *PHYSICAL_MEMORY_OFFSET.get().expect("memory::init runs first");
    VirtAddr::new(offset + phys)
}

/// Whether `addr` is mapped in the current address space.
pub fn is_mapped(addr: VirtAddr) -> bool {
    let (level_4, _) = x86_64::registers::control::Cr3::read();
    let table = phys_to_virt(level_4.start_address().as_u64()).as_mut_ptr::<PageTable>();
    let offset = phys_to_virt(0);
    // SAFETY: CR3 holds the active level-4 table, which lies in physical memory mapped
    // at `offset`; the mapper only reads the tables here, and this CPU does not change
    // them concurrently (the kernel never edits its page tables after boot).
    let mapper = unsafe { OffsetPageTable::new(&mut *table, offset) };
    mapper.translate_addr(addr).is_some()
}
