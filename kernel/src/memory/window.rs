//! The physical-memory window: physical memory mapped at one offset with 2 MiB pages,
//! built by the kernel at boot over what the machine has (its RAM, the first 2 MiB,
//! and firmware tables and device registers as they are found) rather than
//! by the bootloader over the whole first 4 GiB. Each page-table write is a trap
//! where the hypervisor shadows page tables (a nested or software KVM): the
//! bootloader's 2,048 entries for 4 GiB took two minutes of a boot there, the 130 or
//! so for a 256 MiB machine take seconds.
//!
//! The window is built through the recursive entry the bootloader installs in the
//! level-4 table; its own page tables are frames of a reserve of RAM the caller sets
//! aside (written through the recursive mapping, so they need no mapping of their
//! own), as the heap lies in the window and cannot exist before it.

use core::ops::Range;
use spin::Mutex;
use x86_64::structures::paging::mapper::MapToError;
use x86_64::structures::paging::{
    FrameAllocator, Mapper, Page, PageTable, PageTableFlags, PageTableIndex, PhysFrame,
    RecursivePageTable, Size2MiB, Size4KiB,
};
use x86_64::{PhysAddr, VirtAddr};

/// Page tables the reserve holds beyond what the RAM needs, for firmware tables and
/// device registers mapped later (a PC's lie in the fourth GiB, beside RAM or below).
const SPARE_TABLES: u64 = 4;

/// The highest physical address the window covers: one level-4 slot.
const LIMIT: u64 = 1 << 39;

/// The window's state: the recursive index, its offset, and its page-table reserve.
struct Window {
    recursive: PageTableIndex,
    offset: u64,
    reserve: Reserve,
}

static WINDOW: Mutex<Option<Window>> = Mutex::new(None);

/// Bytes of page tables the window needs to map `ranges` and the first 2 MiB: a
/// level-3 table, a level-2 table per GiB they touch, and [`SPARE_TABLES`].
pub fn reserve_bytes(ranges: impl Iterator<Item = (u64, u64)>) -> Result<u64, &'static str> {
    let mut touched = [0u64; (LIMIT >> 30) as usize / 64];
    for (start, end) in core::iter::once((0, 2 << 20)).chain(ranges).filter(|(s, e)| s < e) {
        if end > LIMIT {
            return Err("physical memory beyond 512 GiB");
        }
        for gib in (start >> 30)..=((end - 1) >> 30) {
            touched[(gib / 64) as usize] |= 1 << (gib % 64);
        }
    }
    let level_2: u64 = touched.iter().map(|word| u64::from(word.count_ones())).sum();
    Ok((1 + level_2 + SPARE_TABLES) * 4096)
}

/// Page-table frames from the reserve, in address order.
struct Reserve(Range<u64>);

// SAFETY: the reserve is RAM the caller of `init` keeps out of every other use (its
// guarantee); each frame is a distinct, page-aligned 4 KiB block of it, handed out
// once and never freed.
unsafe impl FrameAllocator<Size4KiB> for Reserve {
    fn allocate_frame(&mut self) -> Option<PhysFrame<Size4KiB>> {
        let frame = PhysFrame::from_start_address(PhysAddr::new(self.0.start)).ok()?;
        let next = self.0.start.checked_add(4096).filter(|&next| next <= self.0.end)?;
        self.0.start = next;
        Some(frame)
    }
}

/// The active level-4 table through the recursive mapping at `index`.
///
/// # Safety
/// `index` must be the level-4 table's recursive entry, and the caller must hold
/// [`WINDOW`]'s lock (no other view of the tables edits them meanwhile).
unsafe fn recursive_table(index: PageTableIndex) -> RecursivePageTable<'static> {
    let table = Page::<Size4KiB>::from_page_table_indices(index, index, index, index);
    // SAFETY: through its recursive entry the active level-4 table is mapped at that
    // address (the caller guarantees the index), writable, and nothing else holds a
    // reference to it while the lock is held.
    let table = unsafe { &mut *table.start_address().as_mut_ptr::<PageTable>() };
    // SAFETY: as above, the table is the active one and `index` its recursive entry.
    unsafe { RecursivePageTable::new_unchecked(table, index) }
}

/// Creates the window through the level-4 table's recursive entry `recursive` (the
/// bootloader's) at the first unused level-4 slot, maps `ranges` and the first 2 MiB
/// in it, and returns its offset. Its page tables are frames of `reserve`
/// ([`reserve_bytes`] of them for `ranges`). Called once at boot, by the boot CPU
/// alone.
///
/// # Safety
/// `reserve` must be page-aligned RAM that nothing else uses, now or later.
pub unsafe fn init(
    recursive: u16,
    reserve: Range<u64>,
    ranges: impl Iterator<Item = (u64, u64)>,
) -> Result<u64, &'static str> {
    let recursive = PageTableIndex::new_truncate(recursive);
    if u16::from(recursive) == 511 {
        return Err("the recursive entry is the last level-4 slot");
    }
    let mut window = WINDOW.lock();
    if window.is_some() {
        return Err("the window exists already");
    }
    // SAFETY: the bootloader installed `recursive` as the recursive entry; the lock is
    // held.
    let table = unsafe { recursive_table(recursive) };
    let slot = (1..256)
        .find(|&i| table.level_4_table()[i].is_unused())
        .ok_or("no unused level-4 slot for the window")?;
    // A slot's base is canonical below the higher half.
    let new =
        window.insert(Window { recursive, offset: (slot as u64) << 39, reserve: Reserve(reserve) });
    map_locked(new, 0, 2 << 20)?;
    for (start, end) in ranges {
        map_locked(new, start, end)?;
    }
    Ok(new.offset)
}

/// Maps physical `[start, end)` into the window (2 MiB pages, writable, not
/// executable), leaving what is mapped already. Boot code only: other CPUs may run
/// meanwhile, as new entries need no shootdown, but nothing unmaps.
pub fn map(start: u64, end: u64) -> Result<(), &'static str> {
    let mut window = WINDOW.lock();
    map_locked(window.as_mut().ok_or("the window does not exist yet")?, start, end)
}

/// [`map`] with the lock held.
fn map_locked(window: &mut Window, start: u64, end: u64) -> Result<(), &'static str> {
    if end > LIMIT {
        return Err("physical memory beyond 512 GiB");
    }
    // SAFETY: `window.recursive` is the recursive entry `init` was given; the caller
    // holds the lock.
    let mut table = unsafe { recursive_table(window.recursive) };
    let flags = PageTableFlags::PRESENT | PageTableFlags::WRITABLE | PageTableFlags::NO_EXECUTE;
    let mut phys = start & !((2 << 20) - 1);
    while phys < end {
        let page = Page::<Size2MiB>::containing_address(VirtAddr::new(window.offset + phys));
        if table.translate_page(page).is_err() {
            let frame = PhysFrame::<Size2MiB>::containing_address(PhysAddr::new(phys));
            // SAFETY: the page lies in the window's level-4 slot, which nothing else
            // uses; mapping it makes no reference (whoever reads or writes through
            // the window argues for its own accesses).
            let mapped = unsafe { table.map_to(page, frame, flags, &mut window.reserve) };
            match mapped {
                Ok(flush) => flush.flush(),
                Err(MapToError::FrameAllocationFailed) => {
                    return Err("the window's page-table reserve is used up");
                }
                Err(_) => return Err("the window's page is mapped already"),
            }
        }
        phys += 2 << 20;
    }
    Ok(())
}
