//! Shell-style globs, as Linux's `glob_match`: `*` any run of characters, `?` any
//! one, `[abc]`, `[a-z]` and `[!...]` one of a class (`]` first in a class is one of
//! it; a `[` without its `]` is itself). Matched byte by byte, in time at most the
//! pattern's length times the text's (one `*` is resumed at a time, never a tree of
//! them), without allocating: filters run it from any context.

/// Whether `text` matches `pattern` whole.
pub fn glob(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti) = (0, 0);
    // Where to resume after the last `*`: the pattern after it, and the text it
    // took up to.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if p.get(pi) == Some(&b'*') {
            pi += 1;
            star = Some((pi, ti));
            continue;
        }
        if let Some(len) = p.get(pi..).and_then(|rest| one(rest, t[ti])) {
            pi += len;
            ti += 1;
            continue;
        }
        match star {
            Some((after, took)) => {
                pi = after;
                ti = took + 1;
                star = Some((after, took + 1));
            }
            None => return false,
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// If the pattern element at the start of `p` (not `*`) matches `c`, its length.
fn one(p: &[u8], c: u8) -> Option<usize> {
    let (&first, rest) = p.split_first()?;
    let (matched, len) = match first {
        b'?' => (true, 1),
        b'[' => class(rest, c).map_or((c == b'[', 1), |(m, len)| (m, len + 1)),
        x => (x == c, 1),
    };
    matched.then_some(len)
}

/// A class after its `[`: whether `c` is in it, and its length with the `]`; `None`
/// when it has no `]`.
fn class(p: &[u8], c: u8) -> Option<(bool, usize)> {
    let inverted = p.first() == Some(&b'!');
    let mut i = usize::from(inverted);
    let mut matched = false;
    let mut first = true;
    loop {
        let a = *p.get(i)?;
        if a == b']' && !first {
            return Some((matched != inverted, i + 1));
        }
        first = false;
        let b = match (p.get(i + 1), p.get(i + 2)) {
            (Some(b'-'), Some(&b)) if b != b']' => {
                i += 3;
                b
            }
            _ => {
                i += 1;
                a
            }
        };
        matched |= (a..=b).contains(&c);
    }
}

#[cfg(test)]
mod tests {
    use super::glob;
    use proptest::prelude::*;

    #[test]
    fn stars_marks_and_classes() {
        for (pattern, text, expected) in [
            ("*schedule", "kernel::schedule", true),
            ("*schedule", "schedule_now", false),
            ("*pin*lock", "spin_lock", true),
            ("f?o", "foo", true),
            ("f?o", "fooo", false),
            ("*", "", true),
            ("", "", true),
            ("", "a", false),
            ("kernel::s[eE]rial::*", "kernel::sErial::x", true),
            ("[Ss]y[Ss]_*", "sYs_x", false),
            ("[Ss]y[Ss]_*", "SyS_x", true),
            ("[a-c]x", "bx", true),
            ("[a-c]x", "dx", false),
            ("[!a-c]x", "dx", true),
            ("[!a-c]x", "ax", false),
            ("[]]", "]", true),
            ("[a-]", "-", true),
            ("[", "[", true),
            ("a[b", "a[b", true),
            ("[!]", "[!]", true),
        ] {
            assert_eq!(glob(pattern, text), expected, "{pattern} on {text}");
        }
    }

    /// A reference: every way of splitting the text, tried (exponential; small
    /// inputs only).
    fn reference(p: &[u8], t: &[u8]) -> bool {
        match p.split_first() {
            None => t.is_empty(),
            Some((b'*', rest)) => (0..=t.len()).any(|i| reference(rest, &t[i..])),
            Some(_) => match (super::one(p, *t.first().unwrap_or(&0)), t.is_empty()) {
                (Some(len), false) => reference(&p[len..], &t[1..]),
                _ => false,
            },
        }
    }

    proptest! {
        #[test]
        #[cfg_attr(miri, ignore = "single-threaded safe code, run natively")]
        fn agrees_with_trying_every_split(
            pattern in "[ab*?\\[\\]!-]{0,10}",
            text in "[ab\\[\\]!-]{0,10}",
        ) {
            let expected = reference(pattern.as_bytes(), text.as_bytes());
            prop_assert_eq!(glob(&pattern, &text), expected);
        }

        #[test]
        #[cfg_attr(miri, ignore = "single-threaded safe code, run natively")]
        fn a_class_is_one_of_its_members(members in "[a-e]{1,4}", c in "[a-f]") {
            let inside = members.contains(c.as_str());
            prop_assert_eq!(glob(&["[", &members, "]"].concat(), &c), inside);
            prop_assert_eq!(glob(&["[!", &members, "]"].concat(), &c), !inside);
        }
    }
}
