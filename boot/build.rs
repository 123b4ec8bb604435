//! Builds the BIOS disk image from the kernel artifact, with the kernel's function
//! symbols as the boot ramdisk (the kernel's `trace` prints stack frames with them),
//! and tells the crate where the image and the kernel are.

#[path = "src/elf.rs"]
mod elf;

use bootloader::{BiosBoot, BootConfig};
use std::path::PathBuf;

fn main() {
    let kernel = PathBuf::from(
        std::env::var_os("CARGO_BIN_FILE_KERNEL_kernel")
            .expect("cargo sets the kernel artifact path"),
    );
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let image = out_dir.join("bios.img");
    let symbols = out_dir.join("kernel.symtab");
    // Drawing the bootloader's log on the framebuffer is slow under TCG and nobody
    // sees it (QEMU runs headless); its log still goes to the serial line.
    let mut config = BootConfig::default();
    config.frame_buffer_logging = false;
    let mut builder = BiosBoot::new(&kernel);
    builder.set_boot_config(&config);
    // A kernel without symbols (stripped) still boots: its stacks show addresses.
    let elf = std::fs::read(&kernel).expect("reading the kernel ELF");
    match elf::symbol_table(&elf) {
        Ok(table) => {
            std::fs::write(&symbols, table).expect("writing the kernel's symbol table");
            builder.set_ramdisk(&symbols);
        }
        Err(e) => {
            println!("cargo:warning=no symbol table in the image (stacks show addresses): {e}")
        }
    }
    builder.create_disk_image(&image).expect("building the BIOS disk image");
    println!("cargo:rustc-env=BIOS_IMAGE={}", image.display());
    println!("cargo:rustc-env=KERNEL_ELF={}", kernel.display());
}
