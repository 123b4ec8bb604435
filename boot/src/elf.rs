//! The function symbols of a kernel ELF, demangled: what `report --elf` looks stack
//! frames up in, and what the build embeds in the boot image for the kernel's own
//! lookups ([`trace::symtab`]). Shared by the crate and its build script.

use object::read::elf::ElfFile64;
use object::{
    Endianness, Object, ObjectSection, ObjectSymbol, SectionFlags, SectionKind, SymbolKind,
};

/// The [`trace::symtab`] table of the ELF64 image `data` (see [`functions`]).
pub fn symbol_table(data: &[u8]) -> Result<Vec<u8>, String> {
    let functions = functions(data)?;
    Ok(trace::symtab::encode(
        functions.iter().map(|(start, end, name)| (*start, *end, name.as_str())),
    ))
}

/// The functions of an ELF64 image: its `STT_FUNC` symbols, and its untyped
/// symbols in code sections (assembly labels). A symbol of size 0 reaches to the
/// next one or the end of its section, whichever comes first; one of size 0
/// outside any section covers nothing.
pub fn functions(data: &[u8]) -> Result<Vec<(u64, u64, String)>, String> {
    const HEADER: usize = 64;
    if data.len() < 4 || data[..4] != *b"\x7fELF" {
        return Err("not an ELF file (no \\x7fELF magic)".into());
    }
    if data.get(4) != Some(&2) {
        return Err("not a 64-bit ELF file (ELFCLASS64 expected)".into());
    }
    if data.len() < HEADER {
        return Err(format!(
            "truncated: {} bytes, shorter than an ELF64 header ({HEADER})",
            data.len()
        ));
    }
    let elf =
        ElfFile64::<Endianness>::parse(data).map_err(|e| format!("damaged ELF64 file: {e}"))?;
    if elf.symbol_table().is_none() {
        return Err("no symbol table (.symtab): the ELF was stripped".into());
    }
    let mut found = Vec::new();
    for symbol in elf.symbols() {
        let section = symbol.section_index().and_then(|i| elf.section_by_index(i).ok());
        let code = match symbol.kind() {
            SymbolKind::Text => true,
            // Code by its flags: a split debug file (`objcopy --only-keep-debug`)
            // keeps the section headers, not the bytes, so its `.text` is NOBITS.
            SymbolKind::Unknown => section.as_ref().is_some_and(|s| {
                s.kind() == SectionKind::Text
                    || matches!(s.flags(), SectionFlags::Elf { sh_flags }
                        if sh_flags & u64::from(object::elf::SHF_EXECINSTR) != 0)
            }),
            _ => false,
        };
        if !code || symbol.is_undefined() {
            continue;
        }
        let raw = symbol.name().map_err(|e| format!("damaged symbol table: {e}"))?;
        if raw.is_empty() {
            continue;
        }
        let name = format!("{:#}", rustc_demangle::demangle(raw));
        let sized = symbol.size() > 0;
        let size = match (symbol.size(), section) {
            // Up to the next symbol, within its section.
            (0, Some(s)) => s.address().saturating_add(s.size()).saturating_sub(symbol.address()),
            (size, _) => size,
        };
        found.push((symbol.address(), sized, size, name));
    }
    if found.is_empty() {
        return Err("no function symbols in the symbol table".into());
    }
    // Aliases at one address: a sized one (a function rather than a label),
    // the largest, then the first name.
    found.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(b.2.cmp(&a.2)));
    found.dedup_by_key(|f| f.0);
    // Each function is cut where the next one starts by the table's encoder.
    Ok(found
        .into_iter()
        .map(|(start, _, size, name)| (start, start.saturating_add(size), name))
        .collect())
}
