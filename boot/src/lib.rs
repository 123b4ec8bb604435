//! Host side of the flight recorder: the disk image, the QEMU command line, and how
//! QEMU's exit status maps to the kernel's verdict (shared by the `boot` runner and
//! the end-to-end tests, so both boot the kernel the same way); the serial log's
//! reader, the dumps' outputs and the kernel ELF's symbols, for `report`.

pub mod elf;
pub mod log;
pub mod qemu;
pub mod report;

/// Path of the BIOS disk image built from the kernel (by `build.rs`).
pub const BIOS_IMAGE: &str = env!("BIOS_IMAGE");
/// Path of the kernel ELF the image was built from (with its symbols: what `report
/// --elf` reads).
pub const KERNEL_ELF: &str = env!("KERNEL_ELF");
/// Path of the kernel ELF the image carries: [`KERNEL_ELF`] without the sections it
/// does not load (its symbol table), or the same file if it could not be stripped.
pub const BOOTED_KERNEL: &str = env!("BOOTED_KERNEL");
