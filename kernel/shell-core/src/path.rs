//! Paths of the shell's tracefs tree.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// Joins `path` to `cwd` (unless it is absolute) and removes `.`, `..` and empty
/// components; `..` at the root stays at the root.
pub fn normalize(cwd: &str, path: &str) -> Vec<String> {
    let mut parts: Vec<String> = Vec::new();
    let joined = if path.starts_with('/') { path.to_string() } else { format!("{cwd}/{path}") };
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part.to_string()),
        }
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_join_and_lose_dots() {
        let n = |cwd, path| normalize(cwd, path).join("/");
        assert_eq!(n("/", "trace"), "trace");
        assert_eq!(n("/instances/a", "trace"), "instances/a/trace");
        assert_eq!(n("/instances/a", "/trace"), "trace");
        assert_eq!(n("/instances/a", "../b/./trace"), "instances/b/trace");
        assert_eq!(n("/", "../../.."), "");
        assert_eq!(n("/events//irq/", "enable"), "events/irq/enable");
    }
}
