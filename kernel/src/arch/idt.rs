//! The interrupt descriptor table: CPU exceptions, device interrupts and the local
//! APIC's own vectors. Fatal exceptions are reported (name, vector, error code, RIP,
//! and CR2 for page faults) and then panic, so they reach the panic path. What a
//! device interrupt, an IPI or an NMI does is up to the code above `arch`: it adds
//! its hooks to [`TIMER`], [`SERIAL`], [`CALL`], [`TEST`] and [`NMI`].

use super::gdt::{DOUBLE_FAULT_IST_INDEX, NMI_IST_INDEX};
use super::hooks::Hooks;
use super::irq::HandlerGuard;
use super::pic::PIC_BASE_VECTOR;
use super::{apic, membarrier, patch, percpu};
use crate::events;
use core::fmt;
use spin::Lazy;
use x86_64::VirtAddr;
use x86_64::registers::control::Cr2;
use x86_64::structures::idt::{InterruptDescriptorTable, InterruptStackFrame, PageFaultErrorCode};

/// Hooks of the local APIC timer's interrupt.
pub static TIMER: Hooks<fn(), 1> = Hooks::new();
/// Hooks of the serial line's receive interrupt.
pub static SERIAL: Hooks<fn(), 1> = Hooks::new();
/// Hooks of the call IPI (another CPU's request).
pub static CALL: Hooks<fn(), 1> = Hooks::new();
/// Hooks of the test IPI ([`apic::TEST_VECTOR`]).
pub static TEST: Hooks<fn(), 2> = Hooks::new();
/// Hooks of the non-maskable interrupt, run in the order added.
pub static NMI: Hooks<fn(), 8> = Hooks::new();

/// What the CPU told us about an exception.
struct Exception<'a> {
    name: &'static str,
    vector: u8,
    error_code: Option<u64>,
    frame: &'a InterruptStackFrame,
    /// The faulting address, for page faults.
    cr2: Option<u64>,
}

impl fmt::Display for Exception<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EXCEPTION: {} (vector {}) on cpu {}:", self.name, self.vector, percpu::index())?;
        if let Some(code) = self.error_code {
            write!(f, " error_code={code:#x}")?;
        }
        write!(f, " rip={:#x}", self.frame.instruction_pointer.as_u64())?;
        if let Some(cr2) = self.cr2 {
            write!(f, " cr2={cr2:#x}")?;
        }
        write!(f, " rsp={:#x}", self.frame.stack_pointer.as_u64())
    }
}

fn fatal(exception: Exception<'_>) -> ! {
    let _handler = HandlerGuard::enter();
    let ip = exception.frame.instruction_pointer.as_u64();
    let rsp = exception.frame.stack_pointer.as_u64();
    let frame = core::ptr::from_ref(exception.frame) as u64;
    super::stack::record_fault(ip, rsp, exception.error_code.map(|_| frame));
    let ip = super::stack::elf_address(ip);
    match exception.cr2 {
        Some(address) => {
            let error_code = exception.error_code.unwrap_or(0);
            trace::emit!(events::PAGE_FAULT, address, error_code, ip);
        }
        None => trace::emit!(events::EXCEPTION, exception.vector, ip),
    }
    panic!("{exception}")
}

/// Runs a device or IPI interrupt's work between its entry and exit tracepoints,
/// then signals end-of-interrupt.
#[inline(always)]
fn device_interrupt(vector: u8, work: impl FnOnce()) {
    let _handler = HandlerGuard::enter();
    trace::emit!(events::IRQ_ENTRY, vector);
    work();
    trace::emit!(events::IRQ_EXIT, vector);
    apic::eoi();
}

/// Generates a handler that reports a fatal exception.
macro_rules! fatal_handler {
    ($handler:ident, $name:literal, $vector:literal) => {
        extern "x86-interrupt" fn $handler(frame: InterruptStackFrame) {
            fatal(Exception {
                name: $name,
                vector: $vector,
                error_code: None,
                frame: &frame,
                cr2: None,
            })
        }
    };
    ($handler:ident, $name:literal, $vector:literal, error_code) => {
        extern "x86-interrupt" fn $handler(frame: InterruptStackFrame, code: u64) {
            let error_code = Some(code);
            fatal(Exception { name: $name, vector: $vector, error_code, frame: &frame, cr2: None })
        }
    };
}

fatal_handler!(divide_error, "DIVIDE ERROR", 0);
fatal_handler!(overflow, "OVERFLOW", 4);
fatal_handler!(bound_range_exceeded, "BOUND RANGE EXCEEDED", 5);
fatal_handler!(invalid_opcode, "INVALID OPCODE", 6);
fatal_handler!(device_not_available, "DEVICE NOT AVAILABLE", 7);
fatal_handler!(invalid_tss, "INVALID TSS", 10, error_code);
fatal_handler!(segment_not_present, "SEGMENT NOT PRESENT", 11, error_code);
fatal_handler!(stack_segment_fault, "STACK SEGMENT FAULT", 12, error_code);
fatal_handler!(general_protection_fault, "GENERAL PROTECTION FAULT", 13, error_code);
fatal_handler!(x87_floating_point, "X87 FLOATING POINT", 16);
fatal_handler!(alignment_check, "ALIGNMENT CHECK", 17, error_code);
fatal_handler!(simd_floating_point, "SIMD FLOATING POINT", 19);
fatal_handler!(virtualization, "VIRTUALIZATION", 20);

extern "x86-interrupt" fn debug(frame: InterruptStackFrame) {
    let _handler = HandlerGuard::enter();
    crate::emergency_println!(
        "{}",
        Exception { name: "DEBUG", vector: 1, error_code: None, frame: &frame, cr2: None }
    );
}

extern "x86-interrupt" fn nmi(frame: InterruptStackFrame) {
    let _handler = HandlerGuard::enter_nmi();
    super::stack::note_nmi(frame.instruction_pointer.as_u64(), frame.stack_pointer.as_u64());
    NMI.for_each(|hook| hook());
}

extern "x86-interrupt" fn double_fault(frame: InterruptStackFrame, code: u64) -> ! {
    let error_code = Some(code);
    fatal(Exception { name: "DOUBLE FAULT", vector: 8, error_code, frame: &frame, cr2: None })
}

extern "x86-interrupt" fn machine_check(frame: InterruptStackFrame) -> ! {
    fatal(Exception {
        name: "MACHINE CHECK",
        vector: 18,
        error_code: None,
        frame: &frame,
        cr2: None,
    })
}

extern "x86-interrupt" fn page_fault(frame: InterruptStackFrame, code: PageFaultErrorCode) {
    let cr2 = Some(Cr2::read_raw());
    let error_code = Some(code.bits());
    fatal(Exception { name: "PAGE FAULT", vector: 14, error_code, frame: &frame, cr2 })
}

extern "x86-interrupt" fn timer(_frame: InterruptStackFrame) {
    device_interrupt(apic::TIMER_VECTOR, || TIMER.for_each(|hook| hook()));
}

extern "x86-interrupt" fn serial(_frame: InterruptStackFrame) {
    device_interrupt(apic::SERIAL_VECTOR, || SERIAL.for_each(|hook| hook()));
}

extern "x86-interrupt" fn call(_frame: InterruptStackFrame) {
    let _handler = HandlerGuard::enter();
    // Signals end-of-interrupt first: a requested panic does not return.
    apic::eoi();
    trace::emit!(events::IRQ_ENTRY, apic::CALL_VECTOR);
    CALL.for_each(|hook| hook());
    trace::emit!(events::IRQ_EXIT, apic::CALL_VECTOR);
}

extern "x86-interrupt" fn test_ipi(_frame: InterruptStackFrame) {
    device_interrupt(apic::TEST_VECTOR, || TEST.for_each(|hook| hook()));
}

extern "x86-interrupt" fn apic_error(_frame: InterruptStackFrame) {
    let _handler = HandlerGuard::enter();
    crate::emergency_println!("local APIC error on cpu {}", percpu::index());
    apic::eoi();
}

/// Spurious interrupts (local APIC, or the masked PICs' IRQ 7/15) need no EOI.
extern "x86-interrupt" fn spurious(_frame: InterruptStackFrame) {}

static IDT: Lazy<InterruptDescriptorTable> = Lazy::new(|| {
    let mut idt = InterruptDescriptorTable::new();
    idt.divide_error.set_handler_fn(divide_error);
    idt.debug.set_handler_fn(debug);
    idt.overflow.set_handler_fn(overflow);
    idt.bound_range_exceeded.set_handler_fn(bound_range_exceeded);
    idt.invalid_opcode.set_handler_fn(invalid_opcode);
    idt.device_not_available.set_handler_fn(device_not_available);
    idt.invalid_tss.set_handler_fn(invalid_tss);
    idt.segment_not_present.set_handler_fn(segment_not_present);
    idt.stack_segment_fault.set_handler_fn(stack_segment_fault);
    idt.general_protection_fault.set_handler_fn(general_protection_fault);
    idt.page_fault.set_handler_fn(page_fault);
    idt.x87_floating_point.set_handler_fn(x87_floating_point);
    idt.alignment_check.set_handler_fn(alignment_check);
    idt.machine_check.set_handler_fn(machine_check);
    idt.simd_floating_point.set_handler_fn(simd_floating_point);
    idt.virtualization.set_handler_fn(virtualization);
    // SAFETY: the breakpoint entry is `patch`'s, an interrupt handler that follows
    // the CPU's frame layout (it resumes a CPU that met a site being patched); it runs
    // on the interrupted stack, so an `int3` in an NMI handler nests. The IST indices
    // name stacks that `gdt::init_this_cpu` installs in every CPU's TSS before that
    // CPU loads this IDT, and no other handler uses them.
    unsafe {
        idt.breakpoint.set_handler_addr(VirtAddr::new(patch::breakpoint_entry as *const () as u64));
        idt.double_fault.set_handler_fn(double_fault).set_stack_index(DOUBLE_FAULT_IST_INDEX);
        idt.non_maskable_interrupt.set_handler_fn(nmi).set_stack_index(NMI_IST_INDEX);
    }
    idt[apic::TIMER_VECTOR].set_handler_fn(timer);
    idt[apic::SERIAL_VECTOR].set_handler_fn(serial);
    idt[apic::CALL_VECTOR].set_handler_fn(call);
    idt[apic::TEST_VECTOR].set_handler_fn(test_ipi);
    idt[membarrier::VECTOR].set_handler_fn(membarrier::interrupt);
    idt[apic::ERROR_VECTOR].set_handler_fn(apic_error);
    idt[apic::SPURIOUS_VECTOR].set_handler_fn(spurious);
    idt[PIC_BASE_VECTOR + 7].set_handler_fn(spurious);
    idt[PIC_BASE_VECTOR + 15].set_handler_fn(spurious);
    idt
});

/// Loads the (shared) IDT on this CPU.
pub fn init_this_cpu() {
    IDT.load();
}
