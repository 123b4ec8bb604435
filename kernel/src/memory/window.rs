//! The physical-memory window: physical memory mapped at one offset with 2 MiB pages,
//! built by the kernel at boot over what the machine has (its RAM, the first 2 MiB,
//! and firmware tables and device registers as they are found) rather than
//! by the bootloader over the whole first 4 GiB. Each page-table write is a trap
//! where the hypervisor shadows page tables (a nested or software KVM): the
//! bootloader's 2,048 entries for 4 GiB took two minutes of a boot there, the 130 or
//! so for a 256 MiB machine take seconds.
//!
//! The window is built through the recursive entry the bootloader installs in the
//! level-4 table; its own page tables come from a pool in the kernel's `.bss`, as the
//! heap lies in the window and cannot exist before it.

use core::cell::UnsafeCell;
use spin::Mutex;
use x86_64::structures::paging::mapper::MapToError;
use x86_64::structures::paging::{
    FrameAllocator, Mapper, Page, PageTable, PageTableFlags, PageTableIndex, PhysFrame,
    RecursivePageTable, Size2MiB, Size4KiB, Translate,
};
use x86_64::{PhysAddr, VirtAddr};

/// Page tables the window may take: one for its level-3 table, one per GiB of
/// physical address space it covers.
const POOL_TABLES: usize = 32;

/// The pool's storage: page-aligned tables only ever written through the recursive
/// mapping, never through this static.
#[repr(C, align(4096))]
struct Pool(UnsafeCell<[[u8; 4096]; POOL_TABLES]>);

// SAFETY: the pool's bytes are never accessed through the static (only its address is
// taken); the page tables made of them are edited under `WINDOW`'s lock.
unsafe impl Sync for Pool {}

static POOL: Pool = Pool(UnsafeCell::new([[0; 4096]; POOL_TABLES]));

/// The window's state: the recursive index, its offset, and its page-table pool.
struct Window {
    recursive: PageTableIndex,
    offset: u64,
    pool: PoolFrames,
}

static WINDOW: Mutex<Option<Window>> = Mutex::new(None);

/// Page-table frames from [`POOL`], in order: their physical frames, and how many
/// are handed out.
struct PoolFrames {
    frames: [Option<PhysFrame>; POOL_TABLES],
    used: usize,
}

impl PoolFrames {
    /// The pool's frames, found through `table`.
    fn new(table: &RecursivePageTable<'_>) -> Self {
        let base = POOL.0.get().cast::<[u8; 4096]>();
        let frames = core::array::from_fn(|i| {
            let virt = VirtAddr::from_ptr(base.wrapping_add(i));
            table.translate_addr(virt).and_then(|phys| PhysFrame::from_start_address(phys).ok())
        });
        Self { frames, used: 0 }
    }
}

// SAFETY: each frame is a distinct, page-aligned 4 KiB block of `POOL` (the kernel's
// own memory, kept for the kernel's lifetime and used by nothing else), handed out
// once.
unsafe impl FrameAllocator<Size4KiB> for PoolFrames {
    fn allocate_frame(&mut self) -> Option<PhysFrame<Size4KiB>> {
        let frame = (*self.frames.get(self.used)?)?;
        self.used += 1;
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
/// in it, and returns its offset. Called once at boot, by the boot CPU alone.
pub fn init(recursive: u16, ranges: impl Iterator<Item = (u64, u64)>) -> Result<u64, &'static str> {
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
    let pool = PoolFrames::new(&table);
    let new = window.insert(Window { recursive, offset: (slot as u64) << 39, pool });
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
    if end > 1 << 39 {
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
            let mapped = unsafe { table.map_to(page, frame, flags, &mut window.pool) };
            match mapped {
                Ok(flush) => flush.flush(),
                Err(MapToError::FrameAllocationFailed) => {
                    return Err("the window's page-table pool is used up");
                }
                Err(_) => return Err("the window's page is mapped already"),
            }
        }
        phys += 2 << 20;
    }
    Ok(())
}
