//! End-to-end tests: each boots the real image in QEMU and drives the serial shell.

mod dump;
mod image;
mod instances;
mod shell;
mod smp;
mod tracefs;
