//! Per-CPU GDT and TSS. The TSS carries the interrupt stacks (IST) for double faults
//! and NMIs, so a kernel stack overflow or an NMI on a broken stack still has a good
//! stack to run on.

use super::MAX_CPUS;
use core::cell::UnsafeCell;
use spin::Once;
use x86_64::VirtAddr;
use x86_64::instructions::segmentation::{CS, DS, ES, SS, Segment};
use x86_64::instructions::tables::load_tss;
use x86_64::structures::gdt::{Descriptor, GlobalDescriptorTable, SegmentSelector};
use x86_64::structures::tss::TaskStateSegment;

/// IST slot used by the double-fault handler.
pub const DOUBLE_FAULT_IST_INDEX: u16 = 0;
/// IST slot used by the NMI handler.
pub const NMI_IST_INDEX: u16 = 1;

/// Large enough for the panic path and the trace dump, which a double fault runs.
const IST_STACK_SIZE: usize = 64 * 1024;

/// A statically allocated interrupt stack, written by the CPU when it switches to it.
#[repr(C, align(16))]
struct IstStack(UnsafeCell<[u8; IST_STACK_SIZE]>);

// SAFETY: Rust code never reads or writes an `IstStack` through a reference; only the
// CPU uses it as stack memory, each stack on exactly one CPU.
unsafe impl Sync for IstStack {}

impl IstStack {
    const fn new() -> Self {
        Self(UnsafeCell::new([0; IST_STACK_SIZE]))
    }

    fn top(&self) -> VirtAddr {
        VirtAddr::from_ptr(self.0.get()) + IST_STACK_SIZE as u64
    }
}

static DOUBLE_FAULT_STACKS: [IstStack; MAX_CPUS] = [const { IstStack::new() }; MAX_CPUS];
static NMI_STACKS: [IstStack; MAX_CPUS] = [const { IstStack::new() }; MAX_CPUS];

struct Selectors {
    code: SegmentSelector,
    data: SegmentSelector,
    tss: SegmentSelector,
}

/// The index of the double fault's stack in [`interrupt_stacks`].
pub const DOUBLE_FAULT_STACK: usize = 0;
/// The index of the NMI's stack in [`interrupt_stacks`].
pub const NMI_STACK: usize = 1;

static TSS: [Once<TaskStateSegment>; MAX_CPUS] = [const { Once::new() }; MAX_CPUS];
static GDT: [Once<(GlobalDescriptorTable, Selectors)>; MAX_CPUS] =
    [const { Once::new() }; MAX_CPUS];

/// CPU `cpu`'s interrupt stacks (double fault: [`DOUBLE_FAULT_STACK`], NMI:
/// [`NMI_STACK`]), each as its lowest address and one past its highest.
pub fn interrupt_stacks(cpu: usize) -> [(u64, u64); 2] {
    [&DOUBLE_FAULT_STACKS, &NMI_STACKS].map(|stacks| {
        let top = stacks[cpu].top().as_u64();
        (top - IST_STACK_SIZE as u64, top)
    })
}

/// Builds and loads CPU `cpu`'s GDT and TSS, and reloads the segment registers.
/// Called once on each CPU, on that CPU, before its IDT is loaded.
pub fn init_this_cpu(cpu: usize) {
    let tss = TSS[cpu].call_once(|| {
        let mut tss = TaskStateSegment::new();
        tss.interrupt_stack_table[DOUBLE_FAULT_IST_INDEX as usize] = DOUBLE_FAULT_STACKS[cpu].top();
        tss.interrupt_stack_table[NMI_IST_INDEX as usize] = NMI_STACKS[cpu].top();
        tss
    });
    let (gdt, selectors) = GDT[cpu].call_once(|| {
        let mut gdt = GlobalDescriptorTable::new();
        let code = gdt.append(Descriptor::kernel_code_segment());
        let data = gdt.append(Descriptor::kernel_data_segment());
        let tss = gdt.append(Descriptor::tss_segment(tss));
        (gdt, Selectors { code, data, tss })
    });
    gdt.load();
    // SAFETY: the selectors index descriptors of the GDT just loaded, which is static
    // and never changes again; the TSS descriptor points at a static TSS used by this
    // CPU only.
    unsafe {
        CS::set_reg(selectors.code);
        SS::set_reg(selectors.data);
        DS::set_reg(selectors.data);
        ES::set_reg(selectors.data);
        load_tss(selectors.tss);
    }
}
