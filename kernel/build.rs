//! Gives the kernel its build id: a hash of the sources of every crate of the image
//! that is part of this repository (kernel, trace, latency-watchdog) and of the build
//! profile. The persistent trace saved by one build is only read back by the same
//! build: event ids and formats are those of the sources.

use std::fs;
use std::path::Path;

/// FNV-1a over `bytes`.
fn fnv(hash: &mut u64, bytes: impl IntoIterator<Item = u8>) {
    for b in bytes {
        *hash = (*hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
}

/// Hashes a file, or every file under a directory in name order, with their paths
/// relative to `root`.
fn hash_path(root: &Path, path: &Path, hash: &mut u64) {
    if path.is_dir() {
        let Ok(entries) = fs::read_dir(path) else { return };
        let mut paths: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        paths.sort();
        for path in paths {
            hash_path(root, &path, hash);
        }
    } else if let Ok(bytes) = fs::read(path) {
        let name = path.strip_prefix(root).unwrap_or(path).to_string_lossy().into_owned();
        fnv(hash, name.into_bytes().into_iter().chain(bytes));
    }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for part in ["src", "build.rs", "Cargo.toml", "latency-watchdog/src", "../trace/src"] {
        let path = root.join(part);
        println!("cargo:rerun-if-changed={}", path.display());
        hash_path(root, &path, &mut hash);
    }
    for var in ["PROFILE", "OPT_LEVEL", "DEBUG"] {
        println!("cargo:rerun-if-env-changed={var}");
        fnv(&mut hash, std::env::var(var).unwrap_or_default().into_bytes());
    }
    let out = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("build_id.rs");
    fs::write(out, format!("const BUILD_ID: u64 = {hash:#018x};\n")).expect("OUT_DIR is writable");
}
