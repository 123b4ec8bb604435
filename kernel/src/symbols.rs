//! The kernel's function symbols: the table the build puts in the boot ramdisk
//! (`trace::symtab`), so that `trace` prints recorded stacks as
//! `function+0xoffset`, in the panic dump too (lookups do not allocate).

use spin::Once;
use trace::symtab::{SymbolTable, SymtabError};

static TABLE: Once<SymbolTable<'static>> = Once::new();

/// Takes the table in `bytes` (the boot ramdisk); returns how many functions it
/// names. Called once at boot.
pub fn init(bytes: &'static [u8]) -> Result<usize, SymtabError> {
    let table = SymbolTable::parse(bytes)?;
    Ok(TABLE.call_once(|| table).len())
}

/// The kernel's symbol table, once [`init`] took one.
pub fn table() -> Option<&'static SymbolTable<'static>> {
    TABLE.get()
}
