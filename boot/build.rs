//! Builds the BIOS disk image from the kernel artifact, with the kernel's function
//! symbols as the boot ramdisk (the kernel's `trace` prints stack frames with them),
//! and tells the crate where the image and the kernel are. The image carries the
//! kernel without its ELF symbol table, which nothing reads at run time (the
//! ramdisk holds what the kernel looks up): the BIOS reads a quarter less.

#[path = "src/elf.rs"]
mod elf;

use bootloader::{BiosBoot, BootConfig};
use std::path::{Path, PathBuf};
use std::process::Command;

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
    let booted = out_dir.join("kernel");
    let booted = match strip(&kernel, &booted) {
        Ok(()) => booted,
        Err(e) => {
            println!("cargo:warning=the image carries the kernel with its symbols: {e}");
            kernel.clone()
        }
    };
    let mut builder = BiosBoot::new(&booted);
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
    println!("cargo:rustc-env=BOOTED_KERNEL={}", booted.display());
}

/// Writes `kernel` without its symbol table and other sections it does not load to
/// `out`, with the toolchain's `llvm-objcopy` (the `llvm-tools` component).
fn strip(kernel: &Path, out: &Path) -> Result<(), String> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let sysroot = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| format!("rustc --print sysroot: {e}"))?;
    let sysroot = String::from_utf8_lossy(&sysroot.stdout).trim().to_string();
    let host = std::env::var("HOST").map_err(|e| format!("HOST: {e}"))?;
    let objcopy = Path::new(&sysroot).join("lib/rustlib").join(host).join("bin/llvm-objcopy");
    let status = Command::new(&objcopy)
        .arg("--strip-all")
        .arg(kernel)
        .arg(out)
        .status()
        .map_err(|e| format!("{}: {e}", objcopy.display()))?;
    if status.success() { Ok(()) } else { Err(format!("{}: {status}", objcopy.display())) }
}
