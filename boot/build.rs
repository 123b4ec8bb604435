//! Builds the BIOS disk image from the kernel artifact and tells the crate where it is.

use bootloader::{BiosBoot, BootConfig};
use std::path::PathBuf;

fn main() {
    let kernel = PathBuf::from(
        std::env::var_os("CARGO_BIN_FILE_KERNEL_kernel")
            .expect("cargo sets the kernel artifact path"),
    );
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let image = out_dir.join("bios.img");
    // Drawing the bootloader's log on the framebuffer is slow under TCG and nobody
    // sees it (QEMU runs headless); its log still goes to the serial line.
    let mut config = BootConfig::default();
    config.frame_buffer_logging = false;
    BiosBoot::new(&kernel)
        .set_boot_config(&config)
        .create_disk_image(&image)
        .expect("building the BIOS disk image");
    println!("cargo:rustc-env=BIOS_IMAGE={}", image.display());
    println!("cargo:rustc-env=KERNEL_ELF={}", kernel.display());
}
