//! What the firmware tells us about the machine: the ACPI MADT's local APIC address,
//! I/O APICs, ISA interrupt overrides and processors.

use crate::arch::apic::Route;
use crate::memory;
use acpi::InterruptModel;
use acpi::platform::interrupt::{Polarity, TriggerMode};
use alloc::vec::Vec;

/// The interrupt hardware and processors of this machine.
pub struct Machine {
    /// Physical address of the local APIC registers.
    pub local_apic: u64,
    /// I/O APICs: physical register address and first GSI.
    pub io_apics: Vec<(u64, u32)>,
    /// ISA IRQ overrides: (ISA IRQ, route).
    isa_overrides: Vec<(u8, Route)>,
    /// Local APIC ids of the processors, boot processor first.
    pub cpus: Vec<u32>,
}

impl Machine {
    /// How ISA interrupt `irq` reaches the I/O APIC (identity unless overridden).
    pub fn isa_route(&self, irq: u8) -> Route {
        self.isa_overrides.iter().find(|(isa, _)| *isa == irq).map_or(
            Route { gsi: u32::from(irq), active_low: false, level_triggered: false },
            |(_, route)| *route,
        )
    }
}

/// Reads the MADT through the RSDP the bootloader found.
pub fn discover(rsdp: u64) -> Result<Machine, &'static str> {
    let tables = memory::acpi::tables(rsdp)?;
    let platform = tables.platform_info().map_err(|_| "the MADT cannot be read")?;
    let InterruptModel::Apic(apic) = platform.interrupt_model else {
        return Err("the machine has no APIC");
    };
    let isa_overrides = apic
        .interrupt_source_overrides
        .iter()
        .map(|o| {
            let route = Route {
                gsi: o.global_system_interrupt,
                active_low: matches!(o.polarity, Polarity::ActiveLow),
                level_triggered: matches!(o.trigger_mode, TriggerMode::Level),
            };
            (o.isa_source, route)
        })
        .collect();
    let mut cpus = Vec::new();
    if let Some(info) = &platform.processor_info {
        cpus.push(info.boot_processor.local_apic_id);
        cpus.extend(info.application_processors.iter().map(|p| p.local_apic_id));
    }
    Ok(Machine {
        local_apic: apic.local_apic_address,
        io_apics: apic
            .io_apics
            .iter()
            .map(|io| (u64::from(io.address), io.global_system_interrupt_base))
            .collect(),
        isa_overrides,
        cpus,
    })
}
