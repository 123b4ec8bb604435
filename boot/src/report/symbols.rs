//! Code addresses as `function+0xoffset`, from the symbol table of the kernel ELF
//! (`report --elf`), and the `ftrace:kernel_stack` events of a [`Section`] rewritten
//! with them.
//!
//! The kernel records stack frames as addresses in its ELF (it subtracts the load
//! offset the bootloader chose), so they are looked up as they are. A frame is a
//! return address: the instruction after a call, which may be the first byte past
//! the calling function when the call was its last instruction. A frame is therefore
//! looked up one byte earlier and printed with its offset from the function's start,
//! as Linux prints stack traces (`%pB`).

use object::read::elf::ElfFile64;
use object::{Endianness, Object, ObjectSection, ObjectSymbol, SectionKind, SymbolKind};
use std::io::Read;
use std::path::Path;

use trace::dump::{Section, Value};
use trace::field::FieldKind;

/// Largest ELF file read (the kernel's is a few MiB): a bound on what a wrong path
/// can make the report allocate.
pub const MAX_ELF_BYTES: u64 = 1 << 30;

/// One function: its address range and demangled name.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Function {
    start: u64,
    end: u64,
    name: String,
}

/// The functions of an ELF, for looking addresses up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Symbols {
    /// Sorted by start, non-overlapping.
    functions: Vec<Function>,
}

impl Symbols {
    /// Reads the ELF at `path` (at most [`MAX_ELF_BYTES`]); the error names the file
    /// and what is wrong with it.
    pub fn read(path: &Path) -> Result<Symbols, String> {
        let name = path.display();
        let too_big = || format!("{name}: an ELF of more than {MAX_ELF_BYTES} bytes is refused");
        let file = std::fs::File::open(path).map_err(|e| format!("{name}: {e}"))?;
        let size = file.metadata().map_err(|e| format!("{name}: {e}"))?.len();
        if size > MAX_ELF_BYTES {
            return Err(too_big());
        }
        let mut data = Vec::new();
        file.take(MAX_ELF_BYTES + 1).read_to_end(&mut data).map_err(|e| format!("{name}: {e}"))?;
        if data.len() as u64 > MAX_ELF_BYTES {
            return Err(too_big());
        }
        Symbols::parse(&data).map_err(|e| format!("{name}: {e}"))
    }

    /// The functions of an ELF64 image: its `STT_FUNC` symbols, and its untyped
    /// symbols in code sections (assembly labels). A symbol of size 0 reaches to the
    /// next one or the end of its section, whichever comes first; one of size 0
    /// outside any section covers nothing.
    pub fn parse(data: &[u8]) -> Result<Symbols, String> {
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
                SymbolKind::Unknown => {
                    section.as_ref().is_some_and(|s| s.kind() == SectionKind::Text)
                }
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
                (0, Some(s)) => {
                    s.address().saturating_add(s.size()).saturating_sub(symbol.address())
                }
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
        let starts: Vec<u64> = found.iter().map(|f| f.0).collect();
        let functions = found
            .into_iter()
            .enumerate()
            .map(|(i, (start, _, size, name))| {
                let next = starts.get(i + 1).copied().unwrap_or(u64::MAX);
                let end = start.saturating_add(size).min(next);
                Function { start, end, name }
            })
            .collect();
        Ok(Symbols { functions })
    }

    /// The function holding `addr` and the offset of `addr` in it.
    pub fn lookup(&self, addr: u64) -> Option<(&str, u64)> {
        let at = self.functions.partition_point(|f| f.start <= addr).checked_sub(1)?;
        let f = &self.functions[at];
        (addr < f.end).then(|| (f.name.as_str(), addr - f.start))
    }

    /// A return address as `function+0xoffset` (looked up one byte earlier, see the
    /// module documentation), or as `0x...` when no function holds it.
    pub fn frame(&self, ret: u64) -> String {
        match ret.checked_sub(1).and_then(|a| self.lookup(a)) {
            Some((name, off)) => format!("{name}+{:#x}", off + 1),
            None => format!("{ret:#x}"),
        }
    }

    /// Rewrites the `ftrace:kernel_stack` events of `trace` with symbols: their
    /// `ipN` fields become strings (`function+0xoffset`, empty past `depth`), and
    /// their text lists the frames as ftrace does, one ` => frame` line each.
    pub fn symbolize(&self, trace: &mut Section) {
        let (system, name) = (trace::tracer::STACK_TRACE.system, trace::tracer::STACK_TRACE.name);
        let ids: Vec<u16> = trace
            .descriptors
            .values()
            .filter(|d| d.system == system && d.name == name)
            .map(|d| d.id)
            .collect();
        for id in &ids {
            let Some(d) = trace.descriptors.get_mut(id) else { continue };
            let mut format = String::from("depth={depth}");
            for f in d.fields.iter_mut().filter(|f| f.name != "depth") {
                f.kind = FieldKind::Str;
                format.push_str(&format!(" {{{}}}", f.name));
            }
            d.format = format;
        }
        for ev in trace.events.iter_mut().filter(|e| ids.contains(&e.id)) {
            let depth = match ev.values.first() {
                Some(Value::Unsigned(d)) => usize::try_from(*d).unwrap_or(usize::MAX),
                _ => 0,
            };
            let mut text = format!("depth={depth}");
            for (i, v) in ev.values.iter_mut().skip(1).enumerate() {
                let frame = match *v {
                    Value::Unsigned(ip) if i < depth => self.frame(ip),
                    _ => String::new(),
                };
                if !frame.is_empty() {
                    text.push_str("\n => ");
                    text.push_str(&frame);
                }
                *v = Value::Str(frame);
            }
            ev.text = text;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(functions: &[(u64, u64, &str)]) -> Symbols {
        Symbols {
            functions: functions
                .iter()
                .map(|&(start, end, name)| Function { start, end, name: name.into() })
                .collect(),
        }
    }

    #[test]
    fn lookup_covers_each_function_and_nothing_else() {
        let s = table(&[(0x100, 0x120, "a"), (0x200, 0x210, "b")]);
        assert_eq!(s.lookup(0xff), None);
        assert_eq!(s.lookup(0x100), Some(("a", 0)));
        assert_eq!(s.lookup(0x11f), Some(("a", 0x1f)));
        assert_eq!(s.lookup(0x120), None);
        assert_eq!(s.lookup(0x20f), Some(("b", 0xf)));
        assert_eq!(s.lookup(u64::MAX), None);
        // A return address one past a function's last byte still names it.
        assert_eq!(s.frame(0x120), "a+0x20");
        assert_eq!(s.frame(0x100), "0x100");
        assert_eq!(s.frame(0), "0x0");
        assert_eq!(Symbols::default().frame(0x200), "0x200");
    }

    #[test]
    fn bad_files_are_refused_with_the_reason() {
        let no = |data: &[u8]| Symbols::parse(data).unwrap_err();
        assert!(no(b"").contains("not an ELF file"));
        assert!(no(b"#!/bin/sh\n").contains("not an ELF file"));
        assert!(no(b"\x7fELF\x01\x01\x01").contains("not a 64-bit ELF"));
        assert!(no(b"\x7fELF\x02\x01\x01").contains("truncated: 7 bytes"));
    }
}
