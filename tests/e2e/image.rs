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

/// The crate whose code `name` (demangled, no hash) is: its first path segment,
/// for a trait implementation the type's (`<trace::X as core::fmt::Debug>::fmt` is
/// `trace`'s code; `core::ptr::drop_in_place<trace::X>` and `<[T]>::f` are
/// `core`'s, instantiated).
fn crate_of(name: &str) -> &str {
    let path = name.trim_start_matches(|c: char| !(c.is_alphanumeric() || c == '_'));
    path.split("::").next().unwrap_or(path)
}

/// Crates built with the toolchain, at its own opt-level, not by this workspace.
const PREBUILT: &[&str] = &["core", "alloc", "compiler_builtins"];

/// Unoptimised code calls the one-line wrappers of the atomic operations
/// (`Atomic::load`, `atomic_load`, ...) instead of inlining them; optimised code never
/// does. So in an image built at the kernel's opt-level no function of the
/// workspace's or its dependencies' crates calls one (`trace`, the kernel, `spin`,
/// ... were built optimised: each is named in the workspace's Cargo.toml profiles).
#[test]
fn the_kernels_code_is_built_optimised() {
    let bytes = std::fs::read(boot::KERNEL_ELF).expect("the kernel ELF the runner was built with");
    let elf = ElfFile::new(&bytes).expect("the kernel is an ELF file");
    let functions = functions(&elf);
    let trace: Vec<&Function<'_>> =
        functions.iter().filter(|f| crate_of(&f.name) == "trace").collect();
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
    let unoptimised: Vec<&str> = functions
        .iter()
        .filter(|f| !PREBUILT.contains(&crate_of(&f.name)))
        .filter(|f| !calls_into(f, &atomics).is_empty())
        .map(|f| f.name.as_str())
        .collect();
    let crates: HashSet<&str> = unoptimised.iter().map(|name| crate_of(name)).collect();
    assert!(
        unoptimised.is_empty(),
        "crates of the kernel image built unoptimised: {crates:?}; {} functions call atomic \
         operations out of line, e.g. {:?}. Every crate of the kernel image must be built at \
         the kernel's opt-level (its profile entries in the workspace's Cargo.toml).",
        unoptimised.len(),
        &unoptimised[..unoptimised.len().min(5)]
    );
}

/// The crates the workspace's `Cargo.toml` names under `[profile.PROFILE.package.*]`
/// with `opt-level = LEVEL`.
fn named_at(manifest: &str, profile: &str, level: &str) -> HashSet<String> {
    let header = format!("[profile.{profile}.package.");
    let mut named = HashSet::new();
    let mut current = None;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            current = line.strip_prefix(&header).and_then(|rest| rest.strip_suffix(']'));
        } else if let Some(name) = current
            && line.replace(' ', "") == format!("opt-level={level}")
        {
            named.insert(name.trim_matches('"').to_string());
        }
    }
    named
}

/// Cargo would build a crate of the kernel image that the workspace does not name in
/// its profiles with the `build-override` profile, unoptimised: every crate of the
/// kernel's dependency tree is named, at opt-level 2 in dev and 3 in release, and
/// nothing else is.
#[test]
fn every_crate_of_the_kernel_image_is_named_optimised_in_both_profiles() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let tree = std::process::Command::new(env!("CARGO"))
        .args(["tree", "--offline", "-p", "kernel", "--target", "x86_64-unknown-none"])
        .args(["-e", "normal,no-proc-macro", "--prefix", "none", "--format", "{p}"])
        .current_dir(root)
        .output()
        .expect("cargo tree runs");
    assert!(tree.status.success(), "cargo tree: {}", String::from_utf8_lossy(&tree.stderr));
    let crates: HashSet<String> = String::from_utf8_lossy(&tree.stdout)
        .lines()
        .filter_map(|line| line.split(' ').next())
        .map(|name| name.replace('_', "-"))
        .collect();
    assert!(crates.contains("trace") && crates.len() >= 10, "the kernel's crates: {crates:?}");
    let manifest = std::fs::read_to_string(format!("{root}/Cargo.toml")).expect("Cargo.toml");
    for (profile, level) in [("dev", "2"), ("release", "3")] {
        let named: HashSet<String> =
            named_at(&manifest, profile, level).iter().map(|n| n.replace('_', "-")).collect();
        let missing: Vec<_> = crates.difference(&named).collect();
        let extra: Vec<_> = named.difference(&crates).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "[profile.{profile}.package.*] with opt-level {level}: missing {missing:?}, not \
             in the kernel {extra:?}"
        );
    }
}

/// The kernel the image carries is the ELF's loaded bytes without its symbol table:
/// every loadable segment's place, size, flags and bytes are the same (but the ELF
/// header's, which says where the section headers are), and the sections the
/// bootloader and the kernel look up by name are kept.
#[test]
fn the_booted_kernel_is_the_elf_without_its_symbols() {
    let full = std::fs::read(boot::KERNEL_ELF).expect("the kernel ELF");
    let booted = std::fs::read(boot::BOOTED_KERNEL).expect("the kernel the image carries");
    let (full, booted) = (ElfFile::new(&full).unwrap(), ElfFile::new(&booted).unwrap());
    let loads = |elf: &ElfFile<'_>| -> Vec<(u64, u64, u64, Vec<u8>)> {
        elf.program_iter()
            .filter(|ph| ph.get_type() == Ok(xmas_elf::program::Type::Load))
            .map(|ph| {
                let bytes = &elf.input[ph.offset() as usize..][..ph.file_size() as usize];
                let header = if ph.offset() == 0 { 64 } else { 0 };
                (ph.virtual_addr(), ph.mem_size(), ph.flags().0.into(), bytes[header..].to_vec())
            })
            .collect()
    };
    assert!(!loads(&full).is_empty());
    assert!(loads(&full) == loads(&booted), "the loadable segments differ");
    for name in [".bootloader-config", "trace_events", "trace_keys", ".dynamic"] {
        assert!(booted.find_section_by_name(name).is_some(), "{name} missing");
    }
    assert!(full.find_section_by_name(".symtab").is_some(), "the ELF has its symbols");
    assert!(booted.find_section_by_name(".symtab").is_none(), "the booted kernel has symbols");
    assert!(booted.input.len() < full.input.len() * 4 / 5, "not a fifth smaller");
}
