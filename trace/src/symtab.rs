//! A kernel's function symbols as a flat table the kernel can search without
//! allocating (in the panic path too), and the host builds from the kernel's ELF.
//! One definition of the format, used on both sides: the build writes the table, the
//! kernel reads it to print stack frames as `function+0xoffset` in `trace`, and the
//! host tool reads the same table to symbolise dumps.
//!
//! # Format
//!
//! All integers little-endian:
//!
//! | bytes | what |
//! |---|---|
//! | 8 | [`MAGIC`] |
//! | 4 | the number of functions, `n` |
//! | 16 × n | per function, by ascending start: start address (8), size (4), offset of its name in the name area (4) |
//! | rest | the name area: each name a 2-byte length, then that many bytes of UTF-8 |
//!
//! Functions do not overlap. [`SymbolTable::parse`] checks the layout, the order
//! and the overlaps once, without allocating; a name is checked when a lookup
//! returns it (a damaged name makes the lookup find nothing rather than fail).

use alloc::vec::Vec;
use core::fmt::{self, Write};

/// The first bytes of a table.
pub const MAGIC: [u8; 8] = *b"KSYMTAB1";
/// Bytes per function entry.
const ENTRY: usize = 16;
/// Bytes before the entries.
const HEADER: usize = MAGIC.len() + 4;
/// Longest name kept, in bytes (the format's limit; longer names are cut at a
/// character boundary). Rust's generic instances have names of kilobytes.
pub const MAX_NAME: usize = u16::MAX as usize;

/// Why a table was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SymtabError {
    /// The bytes do not start with [`MAGIC`] and a count.
    NotATable,
    /// The entries run past the end of the bytes.
    Truncated,
    /// Entry `index` starts before the end of the one before it.
    Unordered(usize),
    /// Entry `index` has its name outside the name area.
    BadName(usize),
}

impl core::error::Error for SymtabError {}

impl fmt::Display for SymtabError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SymtabError::NotATable => write!(f, "not a symbol table (no KSYMTAB1 header)"),
            SymtabError::Truncated => write!(f, "the function entries run past the table's end"),
            SymtabError::Unordered(i) => {
                write!(f, "function {i} overlaps or precedes the one before it")
            }
            SymtabError::BadName(i) => write!(f, "the name of function {i} lies outside the table"),
        }
    }
}

/// A validated table (see the module documentation), borrowed.
#[derive(Clone, Copy, Debug)]
pub struct SymbolTable<'a> {
    entries: &'a [u8],
    names: &'a [u8],
}

/// One entry: start, end (exclusive), name offset.
#[derive(Clone, Copy)]
struct Entry {
    start: u64,
    end: u64,
    name: usize,
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(word)
}

impl<'a> SymbolTable<'a> {
    /// Checks `bytes` as a table: header, entries in bounds, ascending and not
    /// overlapping, names in the name area. Linear in the entries; allocates nothing.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, SymtabError> {
        if bytes.len() < HEADER || bytes[..MAGIC.len()] != MAGIC {
            return Err(SymtabError::NotATable);
        }
        let count = u32_at(bytes, MAGIC.len()) as usize;
        let size = count.checked_mul(ENTRY).ok_or(SymtabError::Truncated)?;
        let rest = &bytes[HEADER..];
        if rest.len() < size {
            return Err(SymtabError::Truncated);
        }
        let (entries, names) = rest.split_at(size);
        let table = SymbolTable { entries, names };
        let mut end = 0;
        for index in 0..count {
            let e = table.entry(index);
            if index > 0 && e.start < end {
                return Err(SymtabError::Unordered(index));
            }
            if e.name.checked_add(2).is_none_or(|n| n > names.len()) {
                return Err(SymtabError::BadName(index));
            }
            end = e.end;
        }
        Ok(table)
    }

    /// The number of functions.
    pub fn len(&self) -> usize {
        self.entries.len() / ENTRY
    }

    /// Whether the table has no functions.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn entry(&self, index: usize) -> Entry {
        let at = index * ENTRY;
        let mut start = [0; 8];
        start.copy_from_slice(&self.entries[at..at + 8]);
        let start = u64::from_le_bytes(start);
        let size = u32_at(self.entries, at + 8);
        Entry {
            start,
            end: start.saturating_add(u64::from(size)),
            name: u32_at(self.entries, at + 12) as usize,
        }
    }

    /// The name at `offset` of the name area, if it is whole and UTF-8.
    fn name(&self, offset: usize) -> Option<&'a str> {
        let len = self.names.get(offset..offset.checked_add(2)?)?;
        let len = usize::from(u16::from_le_bytes([len[0], len[1]]));
        let bytes = self.names.get(offset + 2..offset + 2 + len)?;
        core::str::from_utf8(bytes).ok()
    }

    /// The entry of the function holding `addr`.
    fn holding(&self, addr: u64) -> Option<Entry> {
        let (mut lo, mut hi) = (0, self.len());
        // The first entry starting after `addr`.
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.entry(mid).start <= addr {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let e = self.entry(lo.checked_sub(1)?);
        (addr < e.end).then_some(e)
    }

    /// The function holding `addr`, and the offset of `addr` in it.
    pub fn lookup(&self, addr: u64) -> Option<(&'a str, u64)> {
        let e = self.holding(addr)?;
        Some((self.name(e.name)?, addr - e.start))
    }

    /// The start and end of the function holding `addr`.
    pub fn range_at(&self, addr: u64) -> Option<(u64, u64)> {
        self.holding(addr).map(|e| (e.start, e.end))
    }

    /// The addresses of the first function named `name`: its start and its end
    /// (exclusive). A scan of the table: for control paths, not writers.
    pub fn range_of(&self, name: &str) -> Option<(u64, u64)> {
        self.functions().find(|f| f.2 == Some(name)).map(|(start, end, _)| (start, end))
    }

    /// Writes the code address `addr` as `function+0xoffset`, or as `0x...` when no
    /// function holds it.
    pub fn write_address(&self, out: &mut dyn Write, addr: u64) -> fmt::Result {
        match self.lookup(addr) {
            Some((name, off)) => write!(out, "{name}+{off:#x}"),
            None => write!(out, "{addr:#x}"),
        }
    }

    /// Writes the return address `ret` as `function+0xoffset`, or as `0x...` when no
    /// function holds it. A return address is the instruction after a call, which
    /// may be the first byte past the calling function when the call was its last
    /// instruction: it is looked up one byte earlier, as Linux prints stack traces.
    /// A frame may also be where an interrupt struck, which can be a function's first
    /// instruction: when no function holds the byte before it, `ret` itself is looked
    /// up (`function+0x0`).
    pub fn write_frame(&self, out: &mut dyn Write, ret: u64) -> fmt::Result {
        match ret.checked_sub(1).and_then(|a| self.lookup(a)) {
            Some((name, off)) => write!(out, "{name}+{:#x}", off + 1),
            None => self.write_address(out, ret),
        }
    }

    /// Writes a recorded stack as the `trace` file shows an `ftrace:kernel_stack`
    /// event: `depth=N`, then a ` => frame` line for each of the first `depth` return
    /// addresses of `frames` (see [`SymbolTable::write_frame`]).
    pub fn write_stack(&self, out: &mut dyn Write, depth: usize, frames: &[u64]) -> fmt::Result {
        write_stack_lines(out, depth, frames, |out, &ret| self.write_frame(out, ret))
    }

    /// A fingerprint of the table: FNV-1a (64-bit) over its entries and names. Two
    /// kernels with the same functions at the same addresses share it; a dump
    /// carries the kernel's, so that the host tool can tell whether an ELF is the
    /// kernel that wrote the dump. Linear in the table; allocates nothing.
    pub fn fingerprint(&self) -> u64 {
        const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
        const PRIME: u64 = 0x0000_0100_0000_01b3;
        self.entries
            .iter()
            .chain(self.names)
            .fold(OFFSET, |hash, &byte| (hash ^ u64::from(byte)).wrapping_mul(PRIME))
    }

    /// The functions, by ascending start: start, end (exclusive) and name (`None`
    /// where the name is damaged).
    pub fn functions(&self) -> impl Iterator<Item = (u64, u64, Option<&'a str>)> + '_ {
        (0..self.len()).map(|i| {
            let e = self.entry(i);
            (e.start, e.end, self.name(e.name))
        })
    }
}

/// Writes a stack in the layout of an `ftrace:kernel_stack` event in the `trace`
/// file: `depth=N`, then a ` => frame` line for each of the first `depth` of
/// `frames`, each written by `frame` (a return address named, or a name already
/// looked up).
pub fn write_stack_lines<T>(
    out: &mut dyn Write,
    depth: usize,
    frames: &[T],
    frame: impl Fn(&mut dyn Write, &T) -> fmt::Result,
) -> fmt::Result {
    write!(out, "depth={depth}")?;
    for each in frames.iter().take(depth) {
        out.write_str("\n => ")?;
        frame(out, each)?;
    }
    Ok(())
}

/// Encodes `functions` (start, end exclusive, name) as a table. They are sorted by
/// start; of functions starting at one address the first is kept; a function is cut
/// where the next one starts; sizes beyond `u32::MAX` and names beyond [`MAX_NAME`]
/// bytes are cut.
pub fn encode<'n>(functions: impl IntoIterator<Item = (u64, u64, &'n str)>) -> Vec<u8> {
    let mut functions: Vec<(u64, u64, &str)> = functions.into_iter().collect();
    functions.sort_by_key(|f| f.0);
    functions.dedup_by_key(|f| f.0);
    let mut names = Vec::new();
    let mut out = Vec::with_capacity(HEADER + functions.len() * ENTRY);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&(functions.len() as u32).to_le_bytes());
    for (i, &(start, end, name)) in functions.iter().enumerate() {
        let end = functions.get(i + 1).map_or(end, |next| end.min(next.0));
        let size = u32::try_from(end.saturating_sub(start)).unwrap_or(u32::MAX);
        let mut cut = name.len().min(MAX_NAME);
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        out.extend_from_slice(&start.to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
        out.extend_from_slice(&(names.len() as u32).to_le_bytes());
        names.extend_from_slice(&(cut as u16).to_le_bytes());
        names.extend_from_slice(&name.as_bytes()[..cut]);
    }
    out.extend_from_slice(&names);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;

    fn frame(t: &SymbolTable<'_>, ret: u64) -> String {
        let mut s = String::new();
        t.write_frame(&mut s, ret).unwrap();
        s
    }

    #[test]
    fn lookup_covers_each_function_and_nothing_else() {
        let bytes = encode([(0x200, 0x210, "b"), (0x100, 0x120, "a"), (0x100, 0x130, "alias")]);
        let t = SymbolTable::parse(&bytes).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t.lookup(0xff), None);
        assert_eq!(t.lookup(0x100), Some(("a", 0)));
        assert_eq!(t.lookup(0x11f), Some(("a", 0x1f)));
        assert_eq!(t.lookup(0x120), None);
        assert_eq!(t.lookup(0x20f), Some(("b", 0xf)));
        assert_eq!(t.lookup(0x210), None);
        assert_eq!(t.lookup(u64::MAX), None);
        assert_eq!(frame(&t, 0x120), "a+0x20");
        // Where an interrupt struck a function's first instruction (nothing before it).
        assert_eq!(frame(&t, 0x100), "a+0x0");
        assert_eq!(frame(&t, 0x200), "b+0x0");
        assert_eq!(frame(&t, 0x121), "0x121");
        assert_eq!(frame(&t, 0), "0x0");
        let mut at = String::new();
        t.write_address(&mut at, 0x100).unwrap();
        t.write_address(&mut at, 0x120).unwrap();
        assert_eq!(at, "a+0x00x120");
        let mut stack = String::new();
        t.write_stack(&mut stack, 2, &[0x120, 0x201, 0x100]).unwrap();
        assert_eq!(stack, "depth=2\n => a+0x20\n => b+0x1");
        let empty = encode([]);
        assert_eq!(frame(&SymbolTable::parse(&empty).unwrap(), 0x200), "0x200");
    }

    #[test]
    fn the_fingerprint_changes_with_any_address_size_or_name() {
        let print = |functions: &[(u64, u64, &str)]| {
            SymbolTable::parse(&encode(functions.iter().copied())).unwrap().fingerprint()
        };
        let base = [(0x100, 0x120, "a"), (0x200, 0x210, "b")];
        assert_eq!(print(&base), print(&base));
        // The known FNV-1a value of no bytes: an empty table.
        assert_eq!(print(&[]), 0xcbf2_9ce4_8422_2325);
        for other in [
            [(0x100, 0x120, "a"), (0x208, 0x218, "b")],
            [(0x100, 0x121, "a"), (0x200, 0x210, "b")],
            [(0x100, 0x120, "a"), (0x200, 0x210, "c")],
            [(0x100, 0x120, "b"), (0x200, 0x210, "a")],
        ] {
            assert_ne!(print(&base), print(&other), "{other:?}");
        }
    }

    #[test]
    fn overlapping_functions_are_cut_and_long_names_kept_whole_up_to_the_cap() {
        let long = "x".repeat(MAX_NAME + 9);
        // Two-byte characters: MAX_NAME (odd) falls inside one.
        let wide = "é".repeat(MAX_NAME / 2 + 1);
        let bytes =
            encode([(0x100, 0x300, long.as_str()), (0x200, 0x210, "b"), (0x400, 0x401, &wide)]);
        let t = SymbolTable::parse(&bytes).unwrap();
        assert_eq!(t.lookup(0x1ff).unwrap().0.len(), MAX_NAME);
        assert_eq!(t.lookup(0x200), Some(("b", 0)));
        assert_eq!(t.lookup(0x400).unwrap().0, &wide[..MAX_NAME - 1]);
    }

    #[test]
    fn damaged_tables_are_refused_with_the_reason() {
        let good = encode([(0x100, 0x120, "a"), (0x200, 0x210, "b")]);
        assert_eq!(SymbolTable::parse(b"").unwrap_err(), SymtabError::NotATable);
        assert_eq!(SymbolTable::parse(&good[..HEADER - 1]).unwrap_err(), SymtabError::NotATable);
        assert_eq!(
            SymbolTable::parse(&good[..HEADER + ENTRY]).unwrap_err(),
            SymtabError::Truncated
        );
        let mut huge = good.clone();
        huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(SymbolTable::parse(&huge).unwrap_err(), SymtabError::Truncated);
        let mut unordered = good.clone();
        unordered[HEADER + ENTRY..HEADER + ENTRY + 8].copy_from_slice(&0x110u64.to_le_bytes());
        assert_eq!(SymbolTable::parse(&unordered).unwrap_err(), SymtabError::Unordered(1));
        let mut far = good.clone();
        far[HEADER + 12..HEADER + 16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(SymbolTable::parse(&far).unwrap_err(), SymtabError::BadName(0));
        // A name whose length runs past the table: found nothing, no panic.
        let mut long = good.clone();
        let names = HEADER + 2 * ENTRY;
        long[names..names + 2].copy_from_slice(&u16::MAX.to_le_bytes());
        assert_eq!(SymbolTable::parse(&long).unwrap().lookup(0x100), None);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: if cfg!(miri) { 8 } else { 500 },
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        #[test]
        fn any_bytes_parse_or_are_refused_and_lookups_never_panic(
            mut bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
            addrs in proptest::collection::vec(proptest::prelude::any::<u64>(), 0..8),
            count in 0u32..12,
        ) {
            // Half the cases start like a table, so that parsing gets past the header.
            if bytes.len() > HEADER && bytes[0] & 1 == 0 {
                bytes[..8].copy_from_slice(&MAGIC);
                bytes[8..12].copy_from_slice(&count.to_le_bytes());
            }
            if let Ok(t) = SymbolTable::parse(&bytes) {
                for a in addrs {
                    let mut s = String::new();
                    t.write_frame(&mut s, a).unwrap();
                }
                let _ = t.functions().count();
            }
        }
    }
}
