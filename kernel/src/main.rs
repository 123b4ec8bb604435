//! A small x86_64 kernel that uses the `trace` flight recorder for real: interrupts,
//! timer, SMP, serial console shell. `unsafe` lives in `arch` (the hardware) and
//! `memory` (page tables, physical memory, the heap allocator and the ACPI mapping
//! handler); every other module denies it. The `trace` crate's macros (`event!`,
//! `emit!`, `linked_events!`, `linked_keys!`) expand to that crate's `unsafe` (the
//! linker-section walks, the patchable site's `asm goto`), argued in its DESIGN.md.
#![no_std]
#![no_main]
#![feature(abi_x86_interrupt)]

extern crate alloc;

mod arch;
#[deny(unsafe_code)]
mod barrier;
#[deny(unsafe_code)]
mod clock;
#[deny(unsafe_code)]
mod dump;
#[deny(unsafe_code)]
mod events;
#[deny(unsafe_code)]
mod firmware;
#[deny(unsafe_code)]
mod keys;
#[deny(unsafe_code)]
mod lockup;
mod memory;
#[deny(unsafe_code)]
mod panic;
#[deny(unsafe_code)]
mod persist;
#[deny(unsafe_code)]
mod selftest;
#[deny(unsafe_code)]
mod serial;
#[deny(unsafe_code)]
mod shell;
#[deny(unsafe_code)]
mod smp;
#[deny(unsafe_code)]
mod symbols;
#[deny(unsafe_code)]
mod sync;
#[deny(unsafe_code)]
mod timer;
#[deny(unsafe_code)]
mod tracing;
#[deny(unsafe_code)]
mod watchdog;

use arch::apic::{self, IoApic};
use arch::percpu;
use bootloader_api::config::{BootloaderConfig, Mapping};
use bootloader_api::{BootInfo, entry_point};

/// Asks the bootloader for a recursive entry in the level-4 table (through which
/// `memory` maps the physical memory the machine has) and for a kernel stack large
/// enough for the shell and the panic path.
const BOOTLOADER_CONFIG: BootloaderConfig = {
    let mut config = BootloaderConfig::new_default();
    config.mappings.page_table_recursive = Some(Mapping::Dynamic);
    config.kernel_stack_size = 256 * 1024;
    config
};

entry_point!(kernel_main, config = &BOOTLOADER_CONFIG);

/// The I/O APIC that serves global system interrupt `gsi`, mapped.
fn io_apic_for(machine: &firmware::Machine, gsi: u32) -> Option<IoApic> {
    machine
        .io_apics
        .iter()
        .filter(|(_, gsi_base)| *gsi_base <= gsi)
        .max_by_key(|(_, gsi_base)| *gsi_base)
        .map(|&(phys, gsi_base)| IoApic { base: map_registers(phys).as_u64(), gsi_base })
}

/// The page of device registers at physical `phys`, mapped.
fn map_registers(phys: u64) -> x86_64::VirtAddr {
    memory::map_device(phys, 4096)
        .unwrap_or_else(|reason| panic!("device registers at {phys:#x}: {reason}"))
}

/// ISA interrupt line of COM1.
const COM1_IRQ: u8 = 4;

fn kernel_main(boot_info: &'static mut BootInfo) -> ! {
    // The local APIC id is not known before ACPI; 0 until `percpu` is set again below.
    percpu::init_this_cpu(0, 0);
    // The boot CPU's thread never idles: it starts the kernel, then runs the shell.
    arch::irq::set_busy(true);
    arch::stack::set_boot_stack(BOOTLOADER_CONFIG.kernel_stack_size);
    arch::stack::set_image_offset(boot_info.kernel_image_offset);
    serial::init();
    arch::gdt::init_this_cpu(0);
    arch::idt::init_this_cpu();
    let recursive = boot_info.recursive_index.into_option();
    let recursive = recursive.expect("the bootloader maps the page tables (BOOTLOADER_CONFIG)");
    memory::init(recursive, &boot_info.memory_regions)
        .unwrap_or_else(|reason| panic!("physical-memory window: {reason}"));
    let low_page = memory::low_page(&boot_info.memory_regions);
    let persistent = memory::persistent_region(&boot_info.memory_regions);
    let heap_bytes = memory::heap::init(&boot_info.memory_regions);
    let ramdisk = memory::ramdisk(boot_info.ramdisk_addr.into_option(), boot_info.ramdisk_len);
    match ramdisk.map(symbols::init) {
        Some(Ok(functions)) => println!("symbols: {functions} functions"),
        Some(Err(error)) => println!("symbols: none: the boot ramdisk's table: {error}"),
        None => println!("symbols: none: no boot ramdisk"),
    }
    let rsdp = boot_info.rsdp_addr.into_option().expect("the bootloader finds the ACPI RSDP");
    let machine = firmware::discover(rsdp).unwrap_or_else(|reason| panic!("ACPI: {reason}"));

    arch::pic::disable();
    apic::set_base(map_registers(machine.local_apic).as_u64());
    apic::init_this_cpu();
    percpu::init_this_cpu(0, apic::id());
    let (apic_timer_hz, tsc_hz) = apic::calibrate_timer_and_tsc();
    clock::init(tsc_hz);
    timer::init(apic_timer_hz).expect("the timer interrupt takes a hook");
    timer::start_this_cpu();

    let com1 = machine.isa_route(COM1_IRQ);
    let io_apic = io_apic_for(&machine, com1.gsi).expect("an I/O APIC serves COM1's interrupt");
    io_apic.route(com1, apic::SERIAL_VECTOR, apic::id());
    smp::init().expect("the call IPI and the NMI take hooks");
    selftest::init().expect("the timer, the test IPI and the NMI take the self-tests' hooks");
    lockup::init().expect("the timer and the NMI take the lockup detector's hooks");
    // The tracer starts before the other CPUs and with interrupts off, for every CPU
    // the firmware lists that the kernel runs: the default events' sites are patched
    // while no other code can run them (no CPU meets an `int3`; see `arch::patch`). A
    // site that is not the NOP `emit!` wrote means a broken build: no event could be
    // armed.
    let sites = keys::init().unwrap_or_else(|reason| panic!("static keys: {reason}"));
    println!("keys: {sites} tracepoint sites, each a 5-byte NOP until its event is armed");
    let tracer = tracing::init(machine.cpus.len().min(arch::MAX_CPUS));
    match tracing::functions::init() {
        Ok((traceable, sites)) => {
            println!("functions: {traceable} of {sites} entry sites traceable, each a NOP")
        }
        Err(reason) => println!("functions: no function tracer: {reason}"),
    }
    x86_64::instructions::interrupts::enable();

    match low_page {
        Some(page) => {
            smp::start_application_processors(&machine.cpus, page);
        }
        None => println!("smp: no free page below 1 MiB; running on the boot CPU only"),
    }
    for cpu in 0..smp::online() {
        let apic_id = percpu::get(cpu).map_or(0, |c| c.apic_id());
        println!("cpu{cpu}: online (APIC id {apic_id})");
    }
    // The lockup detector's watch over every CPU at once: the RTC's periodic
    // interrupt, as an NMI to this CPU, once every CPU's timer runs.
    let rtc = machine.isa_route(arch::rtc::IRQ);
    match io_apic_for(&machine, rtc.gsi) {
        Some(io_apic) if !rtc.level_triggered => {
            lockup::watch_every_cpu();
            arch::rtc::start_periodic();
            io_apic.route_nmi(rtc, apic::id());
        }
        _ => println!(
            "lockup: the RTC's interrupt cannot be an NMI; a hang of every CPU goes unseen"
        ),
    }
    match tracer {
        Ok(tracer) => {
            println!("trace: {} events, {} CPU(s)", tracer.events().len(), tracer.cpus());
            persist::init(tracer, persistent);
            dump::init();
            if let Err(error) = watchdog::init() {
                println!("latency watchdog: not started: {error}");
            }
        }
        Err(error) => println!("trace: disabled: {error}"),
    }
    println!(
        "\nflight recorder kernel ({} build): {} of {} CPU(s) online, heap {} MiB, TSC {} MHz, timer {} Hz",
        if cfg!(debug_assertions) { "debug" } else { "release" },
        smp::online(),
        machine.cpus.len(),
        heap_bytes >> 20,
        tsc_hz / 1_000_000,
        timer::HZ
    );
    shell::run()
}
