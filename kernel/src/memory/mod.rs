//! Physical memory as the kernel sees it: the window maps what the machine has at
//! one offset ([`window`]), device registers as they are found. Also the other page
//! table edits the kernel makes: an identity mapping for the application processors'
//! start-up page, and their stacks, each with unmapped space below it; and the
//! persistent trace region, a fixed physical range kept out of every other use.

pub mod acpi;
pub mod heap;
pub mod text;
pub mod window;

use alloc::boxed::Box;
use bootloader_api::info::{MemoryRegionKind, MemoryRegions};
use core::ops::Range;
use core::sync::atomic::AtomicU64;
use spin::Once;
use x86_64::structures::paging::{
    FrameAllocator, Mapper, OffsetPageTable, Page, PageTable, PageTableFlags, PhysFrame, Size4KiB,
    Translate,
};
use x86_64::{PhysAddr, VirtAddr};

static PHYSICAL_MEMORY_OFFSET: Once<u64> = Once::new();

/// The RAM the physical-memory window's page tables take, kept out of [`usable`].
static WINDOW_TABLES: Once<Range<u64>> = Once::new();

/// Builds the physical-memory window over the RAM of the boot memory map (usable,
/// and the bootloader's: the kernel, its page tables, the ramdisk) through the
/// bootloader's recursive entry `recursive`. Firmware ranges (ACPI tables) and
/// device registers are mapped when they are found. The window's page tables take
/// the top of the largest usable range. Called once at boot, by the boot CPU alone.
pub fn init(recursive: u16, regions: &MemoryRegions) -> Result<(), &'static str> {
    let ram = || {
        regions
            .iter()
            .filter(|r| matches!(r.kind, MemoryRegionKind::Usable | MemoryRegionKind::Bootloader))
            .map(|r| (r.start, r.end))
    };
    let bytes = window::reserve_bytes(ram())?;
    let largest = largest_usable(regions).ok_or("the boot memory map has no usable memory")?;
    let end = largest.end & !0xfff;
    let start = end
        .checked_sub(bytes)
        .filter(|&start| start >= largest.start)
        .ok_or("no usable range holds the window's page tables")?;
    let reserve = WINDOW_TABLES.call_once(|| start..end).clone();
    // SAFETY: the reserve is page-aligned usable RAM (the bootloader's map says so),
    // outside the persistent trace region, and `usable`, the only source of memory
    // for the heap and the start-up page, leaves it out from now on.
    let offset = unsafe { window::init(recursive, reserve, ram())? };
    PHYSICAL_MEMORY_OFFSET.call_once(|| offset);
    Ok(())
}

/// Maps the firmware's or a device's physical `[phys, phys + len)` into the window
/// and returns its virtual address. Boot code.
pub fn map_device(phys: u64, len: u64) -> Result<VirtAddr, &'static str> {
    window::map(phys, phys.checked_add(len).ok_or("a device range past the address space")?)?;
    Ok(phys_to_virt(phys))
}

/// The virtual address at which physical address `phys` is mapped (RAM, the first
/// 2 MiB, or what [`map_device`] mapped).
pub fn phys_to_virt(phys: u64) -> VirtAddr {
    let offset = *PHYSICAL_MEMORY_OFFSET.get().expect("memory::init runs first");
    VirtAddr::new(offset + phys)
}

/// The active page tables, seen through the physical-memory window.
///
/// # Safety
/// The caller must not let two of these coexist, and must not edit mappings that
/// other CPUs rely on.
unsafe fn active_page_table() -> OffsetPageTable<'static> {
    let (level_4, _) = x86_64::registers::control::Cr3::read();
    let table = phys_to_virt(level_4.start_address().as_u64()).as_mut_ptr::<PageTable>();
    // SAFETY: CR3 holds the active level-4 table, which lies in physical memory mapped
    // at the window's offset; the caller guarantees exclusive use.
    unsafe { OffsetPageTable::new(&mut *table, phys_to_virt(0)) }
}

/// Whether `addr` is mapped in the current address space.
pub fn is_mapped(addr: VirtAddr) -> bool {
    // SAFETY: the table is only read, and dropped before returning.
    unsafe { active_page_table() }.translate_addr(addr).is_some()
}

/// Where the byte at `addr` (mapped, e.g. kernel text) is writable: the same
/// physical byte in the physical-memory window. `None` if `addr` is not mapped.
pub fn writable_alias(addr: VirtAddr) -> Option<*mut u8> {
    // SAFETY: the table is only read, and dropped before returning.
    let phys = unsafe { active_page_table() }.translate_addr(addr)?;
    Some(phys_to_virt(phys.as_u64()).as_mut_ptr())
}

/// The ramdisk the bootloader loaded with the kernel (`addr`, `len` from the boot
/// information), as bytes that live as long as the kernel; `None` without one, or
/// if it is not mapped where the boot information says.
pub fn ramdisk(addr: Option<u64>, len: u64) -> Option<&'static [u8]> {
    let start = addr.filter(|_| len > 0)?;
    let last = start.checked_add(len - 1)?;
    let (first_page, last_page) = (start & !0xfff, last & !0xfff);
    let mapped = (first_page..=last_page)
        .step_by(4096)
        .all(|page| VirtAddr::try_new(page).is_ok_and(is_mapped));
    if !mapped {
        return None;
    }
    let len = usize::try_from(len).ok()?;
    // SAFETY: every page of [start, start + len) is mapped (checked above); the
    // bootloader loaded the ramdisk there into frames it marks as its own in the
    // memory map (so neither the heap nor the persistent region takes them), and
    // nothing in the kernel writes (the mapping is writable: nothing may) or unmaps
    // them, so the bytes stay as they are for the kernel's lifetime.
    Some(unsafe { core::slice::from_raw_parts(start as *const u8, len) })
}

/// Bytes of the persistent trace region per CPU slot.
const PERSIST_BYTES_PER_CPU: u64 = 256 * 1024;
/// The persistent trace region: a header page, then one ring per possible CPU. It
/// lies at 224 MiB, below the top of a 256 MiB machine (where the firmware keeps its
/// ACPI tables) and far above where the bootloader loads the kernel and builds its
/// page tables, so the same range is usable memory on every boot.
const PERSIST: Range<u64> = {
    let start = 0x0e00_0000;
    let bytes = (trace::ring::persist::HEADER_WORDS as u64) * 8
        + PERSIST_BYTES_PER_CPU * crate::arch::MAX_CPUS as u64;
    start..start + bytes
};

/// The usable ranges of the boot memory map, without the persistent trace region and
/// the window's page tables: all that the heap and the start-up page may take.
pub fn usable(regions: &MemoryRegions) -> impl Iterator<Item = Range<u64>> + '_ {
    let tables = WINDOW_TABLES.get().cloned().unwrap_or(0..0);
    regions
        .iter()
        .filter(|region| region.kind == MemoryRegionKind::Usable)
        .flat_map(|region| without(region.start..region.end, &PERSIST))
        .flat_map(move |range| without(range, &tables))
        .filter(|range| range.start < range.end)
}

/// The largest range [`usable`] gives.
pub fn largest_usable(regions: &MemoryRegions) -> Option<Range<u64>> {
    usable(regions).max_by_key(|range| range.end - range.start)
}

/// What is left of `range` below and above `hole` (either may be empty).
fn without(range: Range<u64>, hole: &Range<u64>) -> [Range<u64>; 2] {
    [range.start..range.end.min(hole.start), range.start.max(hole.end)..range.end]
}

/// The persistent trace region as words, if the boot memory map reports all of it
/// usable (then [`usable`] keeps everyone else out of it). Its content is whatever
/// the previous boot left there.
pub fn persistent_region(regions: &MemoryRegions) -> Result<&'static [AtomicU64], &'static str> {
    let covered = regions.iter().any(|region| {
        region.kind == MemoryRegionKind::Usable
            && region.start <= PERSIST.start
            && PERSIST.end <= region.end
    });
    if !covered {
        return Err("its physical range is not usable memory on this machine");
    }
    let words = ((PERSIST.end - PERSIST.start) / 8) as usize;
    let start = phys_to_virt(PERSIST.start).as_ptr::<AtomicU64>();
    // SAFETY: 1. the range is usable RAM (checked above), mapped writable in the
    // physical-memory window, 8-byte aligned; 2. nothing else uses it: `usable`, the
    // only source of memory for the heap and the start-up page, leaves it out, and
    // the bootloader reported it usable, so it holds none of its own data; 3. it is
    // only ever accessed through these atomics (any bit pattern is a valid
    // `AtomicU64`), and shared references to atomics may alias.
    Ok(unsafe { core::slice::from_raw_parts(start, words) })
}

/// A usable 4 KiB page below 1 MiB (above the real-mode IVT and BDA), for code that
/// must start in real mode. The heap never takes low memory.
pub fn low_page(regions: &MemoryRegions) -> Option<PhysAddr> {
    usable(regions).find_map(|range| {
        let start = range.start.max(0x1000).next_multiple_of(0x1000);
        (start + 0x1000 <= range.end.min(0x10_0000)).then(|| PhysAddr::new(start))
    })
}

/// Page-table frames for new mappings, taken from the heap (which lies in the
/// physical-memory window, so a heap address converts back to a physical one).
struct HeapFrames;

// SAFETY: each frame is a fresh, zeroed, page-aligned heap allocation that is leaked,
// so it is never handed out twice nor freed while the page tables use it.
unsafe impl FrameAllocator<Size4KiB> for HeapFrames {
    fn allocate_frame(&mut self) -> Option<PhysFrame<Size4KiB>> {
        heap_frame(Box::leak(Box::new(PageTable::new())))
    }
}

/// The physical frame of a page-aligned heap block (the heap lies in the
/// physical-memory window); `None` if it is not page-aligned.
fn heap_frame<T>(block: &T) -> Option<PhysFrame<Size4KiB>> {
    let phys = VirtAddr::from_ptr(block).as_u64() - phys_to_virt(0).as_u64();
    PhysFrame::from_start_address(PhysAddr::new(phys)).ok()
}

/// Maps the 4 KiB page at physical `page` at the same virtual address (writable,
/// executable), so code there keeps running when paging turns on. Called at boot by
/// the boot CPU only, before other CPUs run.
fn identity_map(page: PhysAddr) -> Result<(), &'static str> {
    let frame = PhysFrame::<Size4KiB>::from_start_address(page).map_err(|_| "page not aligned")?;
    let flags = PageTableFlags::PRESENT | PageTableFlags::WRITABLE;
    if is_mapped(VirtAddr::new(page.as_u64())) {
        return Err("the identity address is already mapped");
    }
    // SAFETY: only the boot CPU runs; the new mapping covers an unused low page that
    // nothing else maps at that address (checked above).
    let mut table = unsafe { active_page_table() };
    // SAFETY: the frame is a usable page that only the caller uses; mapping it at its
    // own address creates no alias that Rust code uses.
    let flush = unsafe { table.identity_map(frame, flags, &mut HeapFrames) }
        .map_err(|_| "cannot map the identity page")?;
    flush.flush();
    Ok(())
}

/// Identity-maps the low page at `page` (found by [`low_page`], used by nothing
/// else) and installs the application processors' start-up trampoline in it.
pub fn install_trampoline(page: PhysAddr) -> Result<crate::arch::smp::Trampoline, &'static str> {
    identity_map(page)?;
    let window = phys_to_virt(page.as_u64()).as_mut_ptr();
    // SAFETY: the low page is usable memory that nothing else uses, mapped writable in
    // the physical-memory window at `window` and now identity-mapped too.
    Ok(unsafe { crate::arch::smp::Trampoline::install(page, window) })
}

/// Virtual space each stack [`guarded_stack`] maps takes: the stack at its top, and
/// below it unmapped space, the guard an overflow faults in.
const STACK_SPACE: u64 = 1 << 20;

/// Where the stacks [`guarded_stack`] maps lie: the base of a level-4 slot of the
/// lower half that was unused when the first was mapped.
static STACK_AREA: Once<u64> = Once::new();

/// A page of stack, as the heap hands it out.
#[derive(Clone, Copy)]
#[repr(C, align(4096))]
struct StackPage([u8; 4096]);

/// Maps a stack of `bytes` (whole pages) for CPU `cpu` in the stack area, with at
/// least the rest of its [`STACK_SPACE`] unmapped below it, so an overflow faults
/// (a double fault, on the CPU's IST stack) instead of writing over the heap. Its
/// memory is taken from the heap, for good (also on an error, with what was mapped
/// of it). Returns the stack's lowest address and one past its highest. Boot code:
/// the boot CPU starting the others, while they run nothing but their idle loops
/// (so no other view of the page tables exists); refused on another CPU.
pub fn guarded_stack(cpu: usize, bytes: usize) -> Result<Range<u64>, &'static str> {
    let pages = bytes / 4096;
    if pages == 0 || !bytes.is_multiple_of(4096) || bytes as u64 >= STACK_SPACE {
        return Err("a stack is whole pages, and leaves unmapped space below it");
    }
    if crate::arch::percpu::index() != 0 {
        return Err("stacks are mapped by the boot CPU");
    }
    let memory: &'static mut [StackPage] = alloc::vec![StackPage([0; 4096]); pages].leak();
    // SAFETY: the boot CPU alone edits page tables, at boot, and no other view of
    // them lives meanwhile (see above); the new mappings lie in a level-4 slot
    // nothing else uses, and adding a mapping needs no shootdown on the CPUs
    // already running.
    let mut table = unsafe { active_page_table() };
    let area = *STACK_AREA.try_call_once(|| {
        let unused = (1..256).rev().find(|&i| table.level_4_table()[i].is_unused());
        unused.map(|slot| (slot as u64) << 39).ok_or("no unused level-4 slot for the stacks")
    })?;
    let top = (cpu as u64 + 1)
        .checked_mul(STACK_SPACE)
        .filter(|&end| end <= 1 << 39)
        .ok_or("no room in the stack area for that CPU")?
        + area;
    let low = top - bytes as u64;
    if table.translate_addr(VirtAddr::new(low)).is_some() {
        return Err("that CPU's stack is mapped already");
    }
    let flags = PageTableFlags::PRESENT | PageTableFlags::WRITABLE | PageTableFlags::NO_EXECUTE;
    for (i, backing) in memory.iter().enumerate() {
        let frame = heap_frame(backing).ok_or("a stack page is not page-aligned")?;
        let page = Page::<Size4KiB>::containing_address(VirtAddr::new(low + i as u64 * 4096));
        // SAFETY: the frame is a leaked heap page that nothing else uses (its window
        // alias is never touched), and the page is an unused address of the stack
        // area, so the mapping aliases nothing Rust code holds.
        let flush = unsafe { table.map_to(page, frame, flags, &mut HeapFrames) }
            .map_err(|_| "cannot map a stack page")?;
        flush.flush();
    }
    Ok(low..top)
}

/// Reads `addr` if it is canonical and unmapped, which raises a page fault (the
/// `fault page` command): the handler reports it and panics. `before` runs just
/// before the read. Never inlined, so the fault report names this function.
#[inline(never)]
pub fn read_unmapped(addr: u64, before: impl FnOnce(VirtAddr)) -> Result<(), &'static str> {
    let addr = VirtAddr::try_new(addr).map_err(|_| "address is not canonical")?;
    if is_mapped(addr) {
        return Err("address is mapped; it would not fault");
    }
    before(addr);
    // SAFETY: deliberately faults: the address was just checked to be unmapped, so the
    // read raises #PF and the handler does not return.
    unsafe { core::ptr::read_volatile(addr.as_ptr::<u64>()) };
    Ok(())
}
