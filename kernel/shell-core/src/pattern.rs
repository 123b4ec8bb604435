//! `grep`'s patterns: the part of POSIX basic regular expressions a console needs.
//!
//! `^` at the start and `$` at the end anchor the match (elsewhere they are
//! literal); `.` is any character; `[abc]`, `[a-z]` and `[^...]` are classes (`]`
//! first in a class is literal); `*` repeats the element before it (at the start it
//! is literal); `\` makes the next special character literal; `\|` separates
//! alternatives (as GNU grep's), each with its own anchors. Any other character
//! matches itself, so a fixed string matches as it did before patterns existed
//! unless it holds one of `^ $ . * [ \`. Groups, intervals, back references and
//! class names (`\(`, `\{`, `\1`, `[:digit:]`) are refused, not read another way.
//!
//! A line is matched in one pass that keeps the set of the pattern's positions
//! reached (its automaton, simulated, never backtracking): the time is at most the
//! line's length times the pattern's, whatever the pattern, and matching allocates
//! nothing.

use alloc::vec::Vec;
use core::fmt;
use core::iter::Peekable;
use core::str::CharIndices;

/// Most elements (characters, classes, `.`) a pattern holds.
pub const MAX_ELEMENTS: usize = 255;

/// Words of the position sets: a bit per position, `0..=MAX_ELEMENTS`.
const WORDS: usize = (MAX_ELEMENTS + 1).div_ceil(64);

/// What one element matches.
enum Atom {
    Char(char),
    Any,
    /// Inclusive ranges; `negated`: any character outside them.
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

impl Atom {
    fn matches(&self, c: char) -> bool {
        match self {
            Atom::Char(x) => *x == c,
            Atom::Any => true,
            Atom::Class { negated, ranges } => {
                ranges.iter().any(|&(lo, hi)| (lo..=hi).contains(&c)) != *negated
            }
        }
    }
}

/// An element and whether `*` follows it.
struct Element {
    atom: Atom,
    repeated: bool,
}

/// A compiled pattern: its alternatives.
pub struct Pattern {
    branches: Vec<Branch>,
}

/// One alternative.
struct Branch {
    elements: Vec<Element>,
    /// Anchored at the line's start (`^`) / end (`$`).
    start: bool,
    end: bool,
}

/// Why a pattern was refused: the byte offset in it and the rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PatternError {
    /// Byte offset of the offending part.
    pub at: usize,
    /// The rule it breaks.
    pub reason: &'static str,
}

impl fmt::Display for PatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at {}: {}", self.at, self.reason)
    }
}

fn refuse<T>(at: usize, reason: &'static str) -> Result<T, PatternError> {
    Err(PatternError { at, reason })
}

/// The pattern's characters still to parse, with their byte offsets.
type Chars<'a> = Peekable<CharIndices<'a>>;

impl Pattern {
    /// Compiles `text`, or names where and why it is refused.
    pub fn parse(text: &str) -> Result<Pattern, PatternError> {
        let mut chars = text.char_indices().peekable();
        let mut branches = Vec::new();
        loop {
            let (branch, more) = Branch::parse(&mut chars)?;
            branches.push(branch);
            if !more {
                return Ok(Pattern { branches });
            }
        }
    }

    /// Whether `line` holds a match of one of the alternatives.
    pub fn matches(&self, line: &str) -> bool {
        self.branches.iter().any(|branch| branch.matches(line))
    }
}

/// Whether `\|` comes next.
fn alternation_next(chars: &Chars<'_>) -> bool {
    let mut ahead = chars.clone().map(|(_, c)| c);
    ahead.next() == Some('\\') && ahead.next() == Some('|')
}

impl Branch {
    /// Parses one alternative, up to a `\|` (then `true`: another follows) or the
    /// pattern's end.
    fn parse(chars: &mut Chars<'_>) -> Result<(Branch, bool), PatternError> {
        let start = chars.next_if(|&(_, c)| c == '^').is_some();
        let mut elements: Vec<Element> = Vec::new();
        let mut end = false;
        while let Some((at, c)) = chars.next() {
            let atom = match c {
                '$' if chars.peek().is_none() || alternation_next(chars) => {
                    end = true;
                    continue;
                }
                '.' => Atom::Any,
                '*' => match elements.last_mut() {
                    Some(element) => {
                        element.repeated = true;
                        continue;
                    }
                    None => Atom::Char('*'),
                },
                '[' => class(chars, at)?,
                '\\' => match chars.next() {
                    Some((_, '|')) => return Ok((Branch { elements, start, end }, true)),
                    Some((_, c @ ('.' | '*' | '[' | ']' | '^' | '$' | '\\'))) => Atom::Char(c),
                    Some(_) => {
                        return refuse(
                            at,
                            "\\ makes one of . * [ ] ^ $ \\ literal, or \\| separates \
                             alternatives (no groups, intervals, back references or escapes)",
                        );
                    }
                    None => return refuse(at, "\\ ends the pattern"),
                },
                c => Atom::Char(c),
            };
            if elements.len() == MAX_ELEMENTS {
                return refuse(at, "too long: a pattern holds at most 255 elements");
            }
            elements.push(Element { atom, repeated: false });
        }
        Ok((Branch { elements, start, end }, false))
    }

    /// Whether `line` holds a match.
    pub fn matches(&self, line: &str) -> bool {
        let last = self.elements.len();
        let mut states = [0u64; WORDS];
        self.reach(&mut states, 0);
        for c in line.chars() {
            if has(&states, last) && !self.end {
                return true;
            }
            let mut next = [0u64; WORDS];
            for (i, element) in self.elements.iter().enumerate() {
                if has(&states, i) && element.atom.matches(c) {
                    self.reach(&mut next, if element.repeated { i } else { i + 1 });
                }
            }
            // Unanchored, a match may also start at the next character.
            if !self.start {
                self.reach(&mut next, 0);
            } else if next == [0; WORDS] {
                return false;
            }
            states = next;
        }
        has(&states, last)
    }

    /// Adds position `i` to `set`, and the positions after it that repeated
    /// elements (which may match nothing) let a match skip to.
    fn reach(&self, set: &mut [u64; WORDS], mut i: usize) {
        loop {
            set[i / 64] |= 1 << (i % 64);
            match self.elements.get(i) {
                Some(element) if element.repeated => i += 1,
                _ => return,
            }
        }
    }
}

fn has(set: &[u64; WORDS], i: usize) -> bool {
    set[i / 64] & (1 << (i % 64)) != 0
}

/// Parses a class after its `[` (at byte `open`), up to and with its `]`.
fn class(chars: &mut Chars<'_>, open: usize) -> Result<Atom, PatternError> {
    const UNCLOSED: &str = "[ without its ]";
    let negated = chars.next_if(|&(_, c)| c == '^').is_some();
    let mut ranges = Vec::new();
    let mut first = true;
    loop {
        let Some((_, lo)) = chars.next() else { return refuse(open, UNCLOSED) };
        match lo {
            ']' if !first => return Ok(Atom::Class { negated, ranges }),
            '[' if matches!(chars.peek(), Some((_, ':' | '=' | '.'))) => {
                return refuse(open, "class names ([:digit:], [=a=], [.a.]) are not supported");
            }
            _ => {}
        }
        first = false;
        let mut hi = lo;
        if chars.next_if(|&(_, c)| c == '-').is_some() {
            match chars.peek() {
                // `-` last in the class is literal.
                Some(&(_, ']')) => ranges.push(('-', '-')),
                Some(&(_, c)) => {
                    chars.next();
                    if c < lo {
                        return refuse(open, "a range in [...] runs from low to high");
                    }
                    hi = c;
                }
                None => return refuse(open, UNCLOSED),
            }
        }
        ranges.push((lo, hi));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;
    use proptest::prelude::*;

    fn grep(pattern: &str, line: &str) -> bool {
        Pattern::parse(pattern).expect("pattern").matches(line)
    }

    #[test]
    fn fixed_strings_match_anywhere() {
        assert!(grep("irq", "  shell-1 irq_handler_entry"));
        assert!(!grep("irq", "timer tick"));
        assert!(grep("", "anything"));
        assert!(grep("", ""));
        assert!(grep("+0x", "=> f+0x12"));
    }

    #[test]
    fn anchors_hold_at_the_ends_only() {
        assert!(grep("^#", "# tracer: nop"));
        assert!(!grep("^#", "   shell-1 #"));
        assert!(grep("tick$", "timer: tick"));
        assert!(!grep("tick$", "tick: interval"));
        assert!(grep("^$", ""));
        assert!(!grep("^$", " "));
        assert!(grep("a^b$c", "a^b$c"), "^ and $ inside are literal");
        assert!(grep("^*x", "*x"), "* after ^ is literal");
    }

    #[test]
    fn dot_star_and_classes() {
        assert!(grep("a.c", "abc"));
        assert!(!grep("a.c", "ac"));
        assert!(grep("ab*c", "ac") && grep("ab*c", "abbbc") && !grep("ab*c", "adc"));
        assert!(grep("*x", "a*x") && !grep("*x", "ax"), "a leading * is literal");
        assert!(grep("irq=[0-9][0-9]*$", "irq=48") && !grep("irq=[0-9][0-9]*$", "irq=x"));
        assert!(grep("[^ ]", "  x") && !grep("[^ ]", "   "));
        assert!(grep("[]a]", "]") && grep("[a-]", "-") && !grep("[a-]", "b"));
        assert!(grep("^[a-c]*$", "abcabc") && !grep("^[a-c]*$", "abd"));
    }

    #[test]
    fn escapes_make_specials_literal() {
        assert!(grep("a\\.c", "a.c") && !grep("a\\.c", "abc"));
        assert!(grep("\\$$", "cost $") && grep("\\^", "x^y") && grep("\\\\", "a\\b"));
        assert!(grep("\\[x]", "[x]") && !grep("\\[x]", "x"));
    }

    #[test]
    fn alternatives_match_each_with_its_anchors() {
        assert!(grep("irq\\|tick", "timer tick") && grep("irq\\|tick", "irq_handler"));
        assert!(!grep("irq\\|tick", "rx: byte"));
        assert!(grep("^a\\|b$", "ax") && grep("^a\\|b$", "xb") && !grep("^a\\|b$", "xa"));
        assert!(grep("x\\|", "anything"), "an empty alternative matches every line");
        assert!(grep("a$\\|^b", "xa") && grep("a$\\|^b", "bx") && !grep("a$\\|^b", "ab!"));
        assert!(grep("[\\|]", "|") && !grep("[\\|]", "a"), "\\ in a class is itself");
        assert!(grep("a\\\\|b", "a\\|b") && !grep("a\\\\|b", "b"), "\\\\| is \\ then |");
    }

    #[test]
    fn unsupported_syntax_is_refused_with_its_place() {
        let refused = |p: &str| Pattern::parse(p).err().map(|e| e.at);
        assert_eq!(refused("ab\\(c\\)"), Some(2));
        assert_eq!(refused("a\\{2\\}"), Some(1));
        assert_eq!(refused("x\\1"), Some(1));
        assert_eq!(refused("x\\"), Some(1));
        assert_eq!(refused("ab[cd"), Some(2));
        assert_eq!(refused("[z-a]"), Some(0));
        assert_eq!(refused("[[:digit:]]"), Some(0));
        assert_eq!(refused("[a-"), Some(0));
        let long: String = core::iter::repeat_n('a', MAX_ELEMENTS + 1).collect();
        assert_eq!(refused(&long), Some(MAX_ELEMENTS));
        assert_eq!(refused(&long[1..]), None);
    }

    #[test]
    fn many_stars_cost_one_pass() {
        // A backtracking matcher takes exponential time here.
        let pattern: String = "a*".repeat(100) + "b";
        let line: String = "a".repeat(250);
        assert!(!grep(&pattern, &line));
        assert!(grep(&pattern, &(line + "b")));
    }

    /// One element of a generated pattern: its text here and in the `regex` crate's
    /// syntax.
    fn element() -> impl Strategy<Value = (&'static str, &'static str)> {
        prop::sample::select(
            &[
                ("a", "a"),
                ("b", "b"),
                (".", "."),
                ("[ab]", "[ab]"),
                ("[^a]", "[^a]"),
                ("[]a-]", "[\\]a-]"),
                ("\\.", "\\."),
                ("\\^", "\\^"),
                ("\\$", "\\$"),
                ("\\*", "\\*"),
            ][..],
        )
    }

    proptest! {
        /// Agrees with the `regex` crate on patterns of literals, `.`, classes,
        /// escapes, `*` and anchors.
        #[test]
        fn agrees_with_a_regex_engine(
            start in any::<bool>(),
            pieces in prop::collection::vec((element(), any::<bool>()), 0..8),
            end in any::<bool>(),
            line in "[ab.^$*\\]-]{0,12}",
        ) {
            let anchor = |on: bool, text: &'static str| if on { text } else { "" };
            let star = |on: bool| if on { "*" } else { "" };
            let ours: String = [anchor(start, "^")]
                .into_iter()
                .chain(pieces.iter().flat_map(|&((text, _), s)| [text, star(s)]))
                .chain([anchor(end, "$")])
                .collect();
            let theirs: String = [anchor(start, "^")]
                .into_iter()
                .chain(pieces.iter().flat_map(|&((_, regex), s)| [regex, star(s)]))
                .chain([anchor(end, "$")])
                .collect();
            let expected = regex::Regex::new(&theirs).expect("regex").is_match(&line);
            prop_assert_eq!(grep(&ours, &line), expected, "{} on {:?}", ours, line);
        }
    }
}
