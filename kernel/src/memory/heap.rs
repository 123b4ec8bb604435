//! The kernel heap: a linked-list allocator over the largest usable region of the
//! boot memory map. Its lock is taken with interrupts off, so interrupt handlers may
//! allocate (NMI handlers must not). Once a panic starts, an allocation that finds
//! the lock held comes from a reserve of its own, so that the dump's readers still
//! get their buffers.

use crate::memory;
use crate::sync::{IrqMutex, IrqMutexGuard};
use bootloader_api::info::MemoryRegions;
use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicBool, Ordering};
use linked_list_allocator::Heap;

struct KernelHeap(IrqMutex<Heap>);

#[global_allocator]
static HEAP: KernelHeap = KernelHeap(IrqMutex::new(Heap::empty()));

/// Bytes of the reserve: a panic dump's readers take a record's worth (4 KiB) per
/// CPU at a time, freed after each buffer, so this holds them several times over.
const RESERVE_BYTES: usize = 256 << 10;

/// The reserve's memory, in the kernel image's zeroed data.
#[repr(align(4096))]
struct ReserveMemory(UnsafeCell<[u8; RESERVE_BYTES]>);

// SAFETY: only `RESERVE`'s heap touches the memory, through a pointer taken once at
// `init`, under its lock.
unsafe impl Sync for ReserveMemory {}

static RESERVE_MEMORY: ReserveMemory = ReserveMemory(UnsafeCell::new([0; RESERVE_BYTES]));

/// What a panic allocates from when the heap's lock is held (by the code that
/// panicked, or by a CPU the panic stopped): nothing else uses it.
static RESERVE: IrqMutex<Heap> = IrqMutex::new(Heap::empty());

/// Set once a panic starts: from then on the heap never waits for its lock.
static NEVER_WAIT: AtomicBool = AtomicBool::new(false);

/// Makes the heap never wait for its lock again (the panic path: the lock may be
/// held by the panicking code or by a stopped CPU): an allocation that would wait
/// comes from the reserve instead (and fails if that is exhausted or held: a nested
/// panic), and a free that would wait leaks.
pub fn stop_waiting() {
    NEVER_WAIT.store(true, Ordering::SeqCst);
}

impl KernelHeap {
    /// The heap, locked; `None` if it is held and [`stop_waiting`] was called.
    fn lock(&self) -> Option<IrqMutexGuard<'_, Heap>> {
        if NEVER_WAIT.load(Ordering::Relaxed) { self.0.try_lock() } else { Some(self.0.lock()) }
    }
}

/// Whether `ptr` lies in the reserve.
fn in_reserve(ptr: *mut u8) -> bool {
    let start = RESERVE_MEMORY.0.get() as usize;
    (start..start + RESERVE_BYTES).contains(&(ptr as usize))
}

// SAFETY: `Heap` hands out disjoint, correctly aligned blocks from memory it owns
// exclusively, and a mutex serialises every access to each of the two heaps; a block
// goes back to the heap whose memory holds it.
unsafe impl GlobalAlloc for KernelHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = match self.lock() {
            Some(mut heap) => heap.allocate_first_fit(layout),
            None => RESERVE.try_lock().ok_or(()).and_then(|mut r| r.allocate_first_fit(layout)),
        };
        let ptr = ptr.map_or(ptr::null_mut(), NonNull::as_ptr);
        trace::emit!(
            crate::events::KMALLOC,
            ptr as u64,
            layout.size() as u64,
            layout.align() as u64
        );
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let heap = if in_reserve(ptr) { RESERVE.try_lock() } else { self.lock() };
        let Some(mut heap) = heap else { return };
        // SAFETY: the caller passes a pointer this allocator returned for `layout`,
        // which is therefore non-null, from the heap whose memory holds it.
        unsafe { heap.deallocate(NonNull::new_unchecked(ptr), layout) };
        trace::emit!(crate::events::KFREE, ptr as u64, layout.size() as u64);
    }
}

/// Panics while holding the heap's lock (tests that a panic's dump does not need it).
pub fn panic_holding_lock() -> ! {
    let _heap = HEAP.0.lock();
    panic!("deliberate panic while holding the heap lock")
}

/// Gives the heap the largest usable range of `regions` (outside the persistent trace
/// region); returns its size in bytes.
pub fn init(regions: &MemoryRegions) -> u64 {
    let largest = memory::largest_usable(regions).expect("the boot memory map has usable memory");
    let start = memory::phys_to_virt(largest.start);
    let size = largest.end - largest.start;
    // SAFETY: the bootloader reports the range as usable (not used by the kernel
    // image, its stack, the page tables or boot info), it is mapped writable in the
    // physical-memory window, and nothing else in the kernel uses it (`usable` leaves
    // the persistent trace region out).
    unsafe { HEAP.0.lock().init(start.as_mut_ptr(), size as usize) };
    // SAFETY: the reserve's memory is a static of its own, which nothing else uses,
    // handed over once (`init` runs once, at boot).
    unsafe { RESERVE.lock().init(RESERVE_MEMORY.0.get().cast(), RESERVE_BYTES) };
    size
}

/// Bytes in use and bytes in total.
pub fn usage() -> (usize, usize) {
    let heap = HEAP.0.lock();
    (heap.used(), heap.size())
}
