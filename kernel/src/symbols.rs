//! The kernel's function symbols: the table the build puts in the boot ramdisk
//! (`trace::symtab`), so that `trace` prints recorded stacks as
//! `function+0xoffset`, in the panic dump too (lookups do not allocate).

use core::fmt::{self, Write};
use spin::Once;
use trace::symtab::{SymbolTable, SymtabError};

static TABLE: Once<(SymbolTable<'static>, u64)> = Once::new();

/// Takes the table in `bytes` (the boot ramdisk) and its fingerprint; returns how
/// many functions it names. Called once at boot.
pub fn init(bytes: &'static [u8]) -> Result<usize, SymtabError> {
    let table = SymbolTable::parse(bytes)?;
    Ok(TABLE.call_once(|| (table, table.fingerprint())).0.len())
}

/// The kernel's symbol table, once [`init`] took one.
pub fn table() -> Option<&'static SymbolTable<'static>> {
    TABLE.get().map(|(table, _)| table)
}

/// The table's [`SymbolTable::fingerprint`], which dumps carry so that the host
/// tool can tell whether an ELF is this kernel.
pub fn fingerprint() -> Option<u64> {
    TABLE.get().map(|&(_, fingerprint)| fingerprint)
}

/// Writes the code address `addr` (an address in the kernel ELF) as
/// `function+0xoffset`, or as `0x...` without the table or a function holding it.
pub fn write_address(out: &mut dyn Write, addr: u64) -> fmt::Result {
    match table() {
        Some(table) => table.write_address(out, addr),
        None => write!(out, "{addr:#x}"),
    }
}

/// Writes the return address `ret` as [`write_address`] does, looked up one byte
/// earlier (see [`SymbolTable::write_frame`]).
fn write_frame(out: &mut dyn Write, ret: u64) -> fmt::Result {
    match table() {
        Some(table) => table.write_frame(out, ret),
        None => write!(out, "{ret:#x}"),
    }
}

/// Writes `RIP: ` and where a CPU stood, `ip` (see [`write_address`]), as a line.
pub fn write_rip(out: &mut dyn Write, ip: u64) -> fmt::Result {
    out.write_str("RIP: ")?;
    write_address(out, ip)?;
    out.write_str("\n")
}

/// Writes a ` => frame` line per return address of `frames` (see [`write_frame`]).
pub fn write_frames(out: &mut dyn Write, mut frames: impl Iterator<Item = u64>) -> fmt::Result {
    frames.try_for_each(|ret| {
        out.write_str(" => ")?;
        write_frame(out, ret)?;
        out.write_str("\n")
    })
}

/// Writes a CPU's call chain as an oops shows it: its first address as
/// [`write_rip`] does, then the return addresses as [`write_frames`] does. Nothing
/// for an empty chain.
pub fn write_chain(out: &mut dyn Write, mut chain: impl Iterator<Item = u64>) -> fmt::Result {
    let Some(ip) = chain.next() else { return Ok(()) };
    write_rip(out, ip)?;
    write_frames(out, chain)
}
