//! Declares the `loom` cfg so that `--cfg loom` builds are lint-clean.
fn main() {
    println!("cargo::rustc-check-cfg=cfg(loom)");
}
