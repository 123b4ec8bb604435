//! The kernel's function symbols: the table the build puts in the boot ramdisk
//! (`trace::symtab`), so that `trace` prints recorded stacks as
//! `function+0xoffset`, in the panic dump too (lookups do not allocate).

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
