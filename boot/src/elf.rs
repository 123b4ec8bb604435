//! The function symbols of a kernel ELF, demangled: what `report --elf` looks stack
//! frames up in, and what the build embeds in the boot image for the kernel's own
//! lookups ([`trace::symtab`]). Shared by the crate and its build script.

use core::fmt::{self, Write as _};
use object::read::elf::ElfFile64;
use object::{
    Endianness, Object, ObjectSection, ObjectSymbol, SectionFlags, SectionKind, SymbolKind,
};
use trace::symtab::MAX_NAME;

/// The [`trace::symtab`] table of the ELF64 image `data` (see [`functions`]).
pub fn symbol_table(data: &[u8]) -> Result<Vec<u8>, String> {
    let functions = functions(data)?;
    Ok(trace::symtab::encode(
        functions.iter().map(|(start, end, name)| (*start, *end, name.as_str())),
    ))
}

/// Most bytes the names of an ELF's functions may take in all (a kernel's take a few
/// hundred KiB): the symbol table built from them is held in memory.
pub const MAX_NAMES_BYTES: usize = 64 << 20;

/// Checks that `start`, the first bytes of a file (4 at least), begin an ELF file.
pub fn check_magic(start: &[u8]) -> Result<(), String> {
    match start.starts_with(b"\x7fELF") {
        true => Ok(()),
        false => Err("not an ELF file (no \\x7fELF magic)".into()),
    }
}

/// A demangled name, cut to the [`MAX_NAME`] bytes the symbol table keeps of a
/// name (whole characters): neither the mangled name read nor the one written
/// is longer.
fn demangled(raw: &str) -> String {
    /// A string that takes at most [`MAX_NAME`] bytes, then refuses the rest.
    struct Capped(String);
    impl fmt::Write for Capped {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            let room = MAX_NAME - self.0.len();
            let cut = (0..=room.min(s.len())).rev().find(|&i| s.is_char_boundary(i));
            self.0.push_str(&s[..cut.unwrap_or(0)]);
            if s.len() > room { Err(fmt::Error) } else { Ok(()) }
        }
    }
    let cut = (0..=raw.len().min(MAX_NAME)).rev().find(|&i| raw.is_char_boundary(i));
    let mut name = Capped(String::new());
    let _ = write!(name, "{:#}", rustc_demangle::demangle(&raw[..cut.unwrap_or(0)]));
    name.0
}

/// The functions of an ELF64 image: its `STT_FUNC` symbols, and its untyped
/// symbols in code sections (assembly labels), their names demangled (at most
/// [`MAX_NAME`] bytes, [`MAX_NAMES_BYTES`] in all). A symbol of size 0 reaches to the next one or the end of
/// its section, whichever comes first; one of size 0 outside any section covers
/// nothing.
pub fn functions(data: &[u8]) -> Result<Vec<(u64, u64, String)>, String> {
    const HEADER: usize = 64;
    check_magic(data)?;
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
    let (mut found, mut names) = (Vec::new(), 0usize);
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
        let name = demangled(raw);
        names += name.len();
        if names > MAX_NAMES_BYTES {
            return Err(format!(
                "its function names take more than {} MiB, more than a kernel's symbol table \
                 is given room for",
                MAX_NAMES_BYTES >> 20
            ));
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A little-endian ELF64 with a NOBITS `.text` at 0x1000 and a symbol table of
    /// `count` functions of 16 bytes, each named `name`.
    fn elf(name: &str, count: u64) -> Vec<u8> {
        let mut symtab = vec![0u8; 24];
        for i in 0..count {
            symtab.extend(1u32.to_le_bytes()); // st_name
            symtab.extend([0x12, 0]); // STB_GLOBAL | STT_FUNC, st_other
            symtab.extend(1u16.to_le_bytes()); // st_shndx: .text
            symtab.extend((0x1000 + 16 * i).to_le_bytes());
            symtab.extend(16u64.to_le_bytes());
        }
        let strtab = [&[0][..], name.as_bytes(), &[0]].concat();
        let shstrtab = b"\0.text\0.symtab\0.strtab\0.shstrtab\0";
        let mut data = vec![0u8; 64];
        let mut add = |bytes: &[u8]| {
            data.resize(data.len().next_multiple_of(8), 0);
            data.extend(bytes);
            (data.len() - bytes.len()) as u64
        };
        let (o_sym, o_str, o_shs) = (add(&symtab), add(&strtab), add(shstrtab));
        data.resize(data.len().next_multiple_of(8), 0);
        let shoff = data.len() as u64;
        // name, type, flags, address, offset, size, link, info, entry size.
        let sections = [
            [0, 0, 0, 0, 0, 0, 0, 0, 0],
            [1, 8, 6, 0x1000, 0, 0x1000_0000, 0, 0, 0],
            [7, 2, 0, 0, o_sym, symtab.len() as u64, 3, 1, 24],
            [15, 3, 0, 0, o_str, strtab.len() as u64, 0, 0, 0],
            [23, 3, 0, 0, o_shs, shstrtab.len() as u64, 0, 0, 0],
        ];
        for [name, kind, flags, addr, offset, size, link, info, entsize] in sections {
            for word in [name, kind] {
                data.extend((word as u32).to_le_bytes());
            }
            data.extend([flags, addr, offset, size].iter().flat_map(|v| v.to_le_bytes()));
            for word in [link, info] {
                data.extend((word as u32).to_le_bytes());
            }
            data.extend([1, entsize].iter().flat_map(|v: &u64| v.to_le_bytes())); // align 1
        }
        let mut header = b"\x7fELF\x02\x01\x01".to_vec();
        header.resize(16, 0);
        header.extend(2u16.to_le_bytes()); // ET_EXEC
        header.extend(0x3eu16.to_le_bytes()); // x86-64
        header.extend(1u32.to_le_bytes());
        header.extend([0x1000u64, 0, shoff].iter().flat_map(|v| v.to_le_bytes()));
        header.extend(0u32.to_le_bytes());
        header.extend([64u16, 0, 0, 64, 5, 4].iter().flat_map(|v| v.to_le_bytes()));
        data[..64].copy_from_slice(&header);
        data
    }

    /// Names longer than the symbol table keeps are cut to it when read, however
    /// many symbols share one: memory is bounded by the table, not by the name.
    #[test]
    fn names_are_cut_to_what_the_symbol_table_keeps() {
        let found = functions(&elf("f", 3)).unwrap();
        assert_eq!(
            found,
            [
                (0x1000, 0x1010, "f".into()),
                (0x1010, 0x1020, "f".into()),
                (0x1020, 0x1030, "f".into())
            ]
        );
        let long = format!("{}é", "a".repeat(MAX_NAME - 1));
        let found = functions(&elf(&long, 2)).unwrap();
        assert!(
            found.iter().all(|(_, _, name)| *name == long[..MAX_NAME - 1]),
            "{}",
            found[0].2.len()
        );
        let many = functions(&elf(&long, (MAX_NAMES_BYTES / (MAX_NAME - 1) + 1) as u64));
        assert_eq!(
            many,
            Err("its function names take more than 64 MiB, more than a kernel's symbol table is \
                 given room for"
                .into())
        );
        assert_eq!(check_magic(b"\x7fELF\x02"), Ok(()));
        assert!(check_magic(b"\x7fEL").is_err());
    }
}
