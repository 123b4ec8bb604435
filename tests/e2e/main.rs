//! End-to-end tests: each boots the real image in QEMU and drives the serial shell.

mod dump;
mod files;
mod filters;
mod format;
mod functions;
mod image;
mod instances;
mod keys;
mod kvm;
mod persist;
mod pipes;
mod shell;
mod smp;
mod stream;
mod tracefs;
