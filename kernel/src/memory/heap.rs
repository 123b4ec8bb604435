//! The kernel heap: a linked-list allocator over the largest usable region of the
//! boot memory map. Its lock is taken with interrupts off, so interrupt handlers may
//! allocate (NMI handlers must not). Once a panic starts, it never waits for its
//! lock: the panicking code or a CPU the panic stopped may hold it. The panic's dump
//! allocates nothing.

use crate::memory;
use crate::sync::{IrqMutex, IrqMutexGuard};
use bootloader_api::info::MemoryRegions;
use core::alloc::{GlobalAlloc, Layout};
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicBool, Ordering};
use linked_list_allocator::Heap;

struct KernelHeap(IrqMutex<Heap>);

#[global_allocator]
static HEAP: KernelHeap = KernelHeap(IrqMutex::new(Heap::empty()));

/// Set once a panic starts: from then on the heap never waits for its lock.
static NEVER_WAIT: AtomicBool = AtomicBool::new(false);

/// Makes the heap never wait for its lock again (the panic path: the lock may be
/// held by the panicking code or by a stopped CPU): an allocation that would wait
/// fails, and a free that would wait leaks.
pub fn stop_waiting() {
    NEVER_WAIT.store(true, Ordering::SeqCst);
}

impl KernelHeap {
    /// The heap, locked; `None` if it is held and [`stop_waiting`] was called.
    fn lock(&self) -> Option<IrqMutexGuard<'_, Heap>> {
        if NEVER_WAIT.load(Ordering::Relaxed) { self.0.try_lock() } else { Some(self.0.lock()) }
    }
}

// SAFETY: `Heap` hands out disjoint, correctly aligned blocks from memory it owns
// exclusively, and a mutex serialises every access to it.
unsafe impl GlobalAlloc for KernelHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = self.lock().ok_or(()).and_then(|mut heap| heap.allocate_first_fit(layout));
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
        let Some(mut heap) = self.lock() else { return };
        // SAFETY: the caller passes a pointer this allocator returned for `layout`,
        // which is therefore non-null.
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
    size
}

/// Bytes in use and bytes in total.
pub fn usage() -> (usize, usize) {
    let heap = HEAP.0.lock();
    (heap.used(), heap.size())
}
