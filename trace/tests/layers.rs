//! The crate's layers call down only: no module below the tracer names the tracer
//! or the host-side histograms, and the tracer does not name the histograms (which
//! sit above it). Test code is exempt; doc comments are not code.

use std::fs;
use std::path::{Path, PathBuf};

/// Paths that a module of layer `layer` may not name, and the root re-exports of
/// the tracer (read from `lib.rs`, so that a new one is covered).
fn forbidden(layer: &str, tracer_exports: &[String]) -> Vec<String> {
    let mut paths = vec!["crate::histograms".to_string()];
    if layer != "tracer" {
        paths.push("crate::tracer".into());
        paths.extend(tracer_exports.iter().map(|name| format!("crate::{name}")));
    }
    paths
}

/// The names `lib.rs` re-exports from `tracer` (`pub use tracer::{...};`).
fn tracer_exports(lib: &str) -> Vec<String> {
    let start = lib.find("pub use tracer::{").expect("lib.rs re-exports the tracer") + 17;
    let end = start + lib[start..].find('}').expect("a closed list");
    lib[start..end].split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect()
}

/// The code of `source`: comment lines dropped, and everything from the first
/// `#[cfg(test)]` on (every module keeps its tests last).
fn code(source: &str) -> String {
    let end = source.find("#[cfg(test)]").unwrap_or(source.len());
    source[..end]
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Whether `code` names `path` as a path (not as the prefix of a longer name).
fn names(code: &str, path: &str) -> bool {
    code.match_indices(path).any(|(at, _)| {
        let next = code[at + path.len()..].chars().next();
        !next.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

#[test]
fn layers_call_down_only() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let exports = tracer_exports(&fs::read_to_string(src.join("lib.rs")).unwrap());
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut upward = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let layer = relative.iter().next().unwrap().to_str().unwrap().trim_end_matches(".rs");
        if matches!(layer, "lib" | "tests" | "histograms") {
            continue;
        }
        let code = code(&fs::read_to_string(file).unwrap());
        for path in forbidden(layer, &exports) {
            // `$crate::` in a macro is the same path, expanded in the caller.
            if names(&code, &path) {
                upward.push(format!("{} names {path}", relative.display()));
            }
        }
    }
    assert!(files.len() > 40, "found the sources ({} files)", files.len());
    assert!(upward.is_empty(), "upward references:\n{}", upward.join("\n"));
}
