//! Instance names: what the tracer takes and what a dump's reader trusts as a
//! kernel's.

/// Longest instance name.
pub const MAX_NAME: usize = 32;

/// Whether `name` is an instance's: 1 to [`MAX_NAME`] characters of
/// `A-Z a-z 0-9 _ - .`, not `.` or `..`, nor `top`, the top level's name in dumps'
/// reports and in `record`, where an instance of that name could not be told from it.
pub(crate) fn valid(name: &str) -> bool {
    (1..=MAX_NAME).contains(&name.len())
        && !matches!(name, "." | ".." | "top")
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
}

/// The rule an instance name is held to, for errors.
pub const RULE: &str = "instance names are 1 to 32 characters of A-Z a-z 0-9 _ - ., not . or .., \
                        nor top, which names the top level in reports";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_says_what_valid_checks() {
        assert!(RULE.contains(&alloc::format!("1 to {MAX_NAME} characters")));
        for name in ["a", "last_boot", "a-b.c_9", &"n".repeat(MAX_NAME)] {
            assert!(valid(name), "{name}");
        }
        for name in ["", ".", "..", "top", "x:snapshot", "a b", "a\nb", &"n".repeat(MAX_NAME + 1)] {
            assert!(!valid(name), "{name}");
        }
    }
}
