//! The kernel image as built, read from its ELF file (no boot).

use std::collections::HashSet;
use xmas_elf::ElfFile;
use xmas_elf::sections::SectionData;
use xmas_elf::symbol_table::{Entry, Type};

/// A function of the kernel image: demangled name (no hash) and machine code.
struct Function<'a> {
    name: String,
    address: u64,
    code: &'a [u8],
}

/// Every function symbol of the kernel ELF that has code.
fn functions<'a>(elf: &ElfFile<'a>) -> Vec<Function<'a>> {
    let symtab = elf.find_section_by_name(".symtab").expect("the kernel keeps its symbols");
    let Ok(SectionData::SymbolTable64(symbols)) = symtab.get_data(elf) else {
        panic!("the kernel's .symtab is a 64-bit symbol table");
    };
    symbols
        .iter()
        .enumerate()
        .filter(|(_, s)| s.get_type() == Ok(Type::Func) && s.size() > 0)
        .filter_map(|(index, s)| {
            let section = s.get_section_header(elf, index).ok()?;
            let start = usize::try_from(s.value().checked_sub(section.address())?).ok()?;
            let code = section.raw_data(elf).get(start..start + s.size() as usize)?;
            let name = format!("{:#}", rustc_demangle::demangle(s.get_name(elf).ok()?));
            Some(Function { name, address: s.value(), code })
        })
        .collect()
}

/// Targets of the direct calls (`call rel32`, opcode E8) in `f` that land on one of
/// `targets`. Scanning bytes rather than decoding instructions: an E8 byte inside
/// another instruction whose next four bytes happen to name a target exactly is
/// vanishingly unlikely.
fn calls_into(f: &Function<'_>, targets: &HashSet<u64>) -> Vec<u64> {
    (0..f.code.len().saturating_sub(4))
        .filter(|&i| f.code[i] == 0xe8)
        .filter_map(|i| {
            let rel = i32::from_le_bytes(f.code[i + 1..i + 5].try_into().expect("four bytes"));
            let target = (f.address + i as u64 + 5).wrapping_add_signed(i64::from(rel));
            targets.contains(&target).then_some(target)
        })
        .collect()
}

/// Whether `name` is a function of the `trace` crate (its own code, not another
/// crate's generic instantiated for a `trace` type).
fn of_trace(name: &str) -> bool {
    name.starts_with("trace::") || name.starts_with("<trace::")
}

/// Unoptimised code calls the one-line wrappers of the atomic operations
/// (`Atomic::load`, `atomic_load`, ...) instead of inlining them; optimised code never
/// does. So in an image built at the kernel's opt-level no `trace` function calls
/// one: `trace` was built optimised. (Cargo builds the image's crates with the
/// `build-override` profile: see the workspace's Cargo.toml.)
#[test]
fn the_kernels_trace_code_is_built_optimised() {
    let bytes = std::fs::read(boot::KERNEL_ELF).expect("the kernel ELF the runner was built with");
    let elf = ElfFile::new(&bytes).expect("the kernel is an ELF file");
    let functions = functions(&elf);
    let trace: Vec<&Function<'_>> = functions.iter().filter(|f| of_trace(&f.name)).collect();
    assert!(
        trace.len() >= 10,
        "the kernel links the trace crate's code ({} functions)",
        trace.len()
    );

    // The scan itself works: trace's functions call functions of the image.
    let everything: HashSet<u64> = functions.iter().map(|f| f.address).collect();
    let resolved: usize = trace.iter().map(|f| calls_into(f, &everything).len()).sum();
    assert!(resolved >= 10, "only {resolved} calls from trace's code were found");

    let atomics: HashSet<u64> = functions
        .iter()
        .filter(|f| {
            f.name.starts_with("core::sync::atomic::")
                || f.name.starts_with("<core::sync::atomic::Atomic")
        })
        .map(|f| f.address)
        .collect();
    let unoptimised: Vec<&str> = trace
        .iter()
        .filter(|f| !calls_into(f, &atomics).is_empty())
        .map(|f| f.name.as_str())
        .collect();
    assert!(
        unoptimised.is_empty(),
        "the kernel's trace crate is built unoptimised: {} of its functions call atomic \
         operations out of line, e.g. {:?}. Every crate of the kernel image must be built at \
         the kernel's opt-level (the build-override profile in Cargo.toml).",
        unoptimised.len(),
        &unoptimised[..unoptimised.len().min(5)]
    );
}
