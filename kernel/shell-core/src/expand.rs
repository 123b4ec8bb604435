//! Glob expansion of path arguments, as a POSIX shell's: a word holding an unquoted
//! `*`, `?` or `[...]` stands for the paths it matches, found one component at a time
//! in the tree's directory listings; a word that matches nothing stays as it is (the
//! command then says `No such file or directory`).
//!
//! [`parse`](crate::parse::parse) gives each such word's pattern, with its quoted
//! pattern characters made literal; components are matched by
//! [`trace::event::glob`], the filters' and `set_ftrace_filter`'s matcher.
//!
//! The paths come in the order the directories list their entries, as `ls` shows
//! them. A line's globs expand to at most [`MAX_EXPANSIONS`] paths, and a component's
//! candidates are bounded alike: a pattern that would give more is refused, not cut.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use trace::event::glob;

/// The most paths a line's globs expand to (and the most candidates a pattern's
/// component keeps on the way).
pub const MAX_EXPANSIONS: usize = 1024;

/// Why a line's globs were not expanded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExpandError {
    /// The word's glob, or the line's, matches more than [`MAX_EXPANSIONS`] paths.
    TooMany(String),
    /// A redirection's glob matches more than one file (bash's "ambiguous
    /// redirect"): the word and how many it matches (`None`: more than
    /// [`MAX_EXPANSIONS`]).
    Ambiguous(String, Option<usize>),
}

impl fmt::Display for ExpandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExpandError::TooMany(word) => write!(
                f,
                "{word}: too many matches (a line's globs expand to at most {MAX_EXPANSIONS} paths)"
            ),
            ExpandError::Ambiguous(word, count) => {
                let count = match count {
                    Some(n) => format!("{n}"),
                    None => format!("more than {MAX_EXPANSIONS}"),
                };
                write!(
                    f,
                    "{word}: ambiguous redirect (a glob in a redirection must match one file; \
                     it matches {count})"
                )
            }
        }
    }
}

/// Whether a pattern's component needs matching against a listing.
fn is_glob(component: &str) -> bool {
    component.contains(['*', '?', '['])
}

/// The paths `pattern` matches, at most `limit` (`None`: more). `list(dir)` gives
/// the entries of the directory `dir` (absolute, or relative to the working
/// directory, `.` for it), directories with a trailing `/`; `None` if `dir` is not a
/// directory.
fn matches(
    pattern: &str,
    limit: usize,
    list: &mut impl FnMut(&str) -> Option<Vec<String>>,
) -> Option<Vec<String>> {
    let (root, rest) = match pattern.strip_prefix('/') {
        Some(rest) => ("/", rest),
        None => ("", pattern),
    };
    let components: Vec<&str> = rest.split('/').collect();
    // Each candidate: the path so far (ending in `/` but for the last component)
    // and whether it is known to be a directory.
    let mut paths: Vec<(String, bool)> = alloc::vec![(String::from(root), true)];
    let mut matched_one = false;
    for (i, &component) in components.iter().enumerate() {
        let last = i + 1 == components.len();
        let mut next = Vec::new();
        for (path, is_dir) in paths {
            let dir = if path.is_empty() { "." } else { path.as_str() };
            let found: Vec<(String, bool)> = if is_glob(component) {
                // A listing: each entry the component matches (a directory only,
                // unless the component is the last).
                let Some(entries) = list(dir) else { continue };
                entries
                    .iter()
                    .map(|entry| match entry.strip_suffix('/') {
                        Some(name) => (name, true),
                        None => (entry.as_str(), false),
                    })
                    .filter(|&(name, entry_is_dir)| (last || entry_is_dir) && glob(component, name))
                    .map(|(name, entry_is_dir)| (String::from(name), entry_is_dir))
                    .collect()
            } else if !matched_one {
                // Before the first glob the path is taken as it is: the listing of
                // the glob's directory checks it.
                alloc::vec![(String::from(component), true)]
            } else if matches!(component, "" | "." | "..") {
                // After one, each component must exist: `.`, `..` and an empty one
                // (`//`, a trailing `/`) in a directory.
                if !is_dir {
                    continue;
                }
                alloc::vec![(String::from(component), true)]
            } else {
                let Some(entries) = list(dir) else { continue };
                let entry = entries.into_iter().find_map(|entry| match entry.strip_suffix('/') {
                    Some(name) => (name == component).then_some(true),
                    None => (entry == component).then_some(false),
                });
                match entry {
                    Some(entry_is_dir) => alloc::vec![(String::from(component), entry_is_dir)],
                    None => continue,
                }
            };
            for (name, entry_is_dir) in found {
                if next.len() == limit {
                    return None;
                }
                let mut path = path.clone();
                path.push_str(&name);
                if !last {
                    path.push('/');
                }
                next.push((path, entry_is_dir));
            }
        }
        matched_one |= is_glob(component);
        paths = next;
    }
    Some(paths.into_iter().map(|(path, _)| path).collect())
}

/// The arguments `words` stand for: each word whose `globs` entry is a pattern
/// (as [`parse`](crate::parse::parse) gives them) becomes the paths it matches, or
/// stays as it is if it matches none; `list` as [`expand_redirect`]'s.
pub fn expand(
    words: &[String],
    globs: &[Option<String>],
    mut list: impl FnMut(&str) -> Option<Vec<String>>,
) -> Result<Vec<String>, ExpandError> {
    let mut expanded: Vec<String> = Vec::new();
    // The paths globs gave so far.
    let mut paths = 0;
    for (i, word) in words.iter().enumerate() {
        let Some(Some(pattern)) = globs.get(i) else {
            expanded.push(word.clone());
            continue;
        };
        let room = MAX_EXPANSIONS - paths;
        let matched =
            matches(pattern, room, &mut list).ok_or_else(|| ExpandError::TooMany(word.clone()))?;
        paths += matched.len();
        match matched.is_empty() {
            true => expanded.push(word.clone()),
            false => expanded.extend(matched),
        }
    }
    Ok(expanded)
}

/// The file a redirection to `word` writes: with a pattern (`glob`), the one file it
/// matches, or `word` itself if it matches none; more than one is refused. `list(dir)`
/// gives the entries of the directory `dir` (absolute, or relative to the working
/// directory, `.` for it), directories with a trailing `/`, or `None` if `dir` is
/// not a directory.
pub fn expand_redirect(
    word: &str,
    glob: Option<&str>,
    mut list: impl FnMut(&str) -> Option<Vec<String>>,
) -> Result<String, ExpandError> {
    let Some(pattern) = glob else { return Ok(String::from(word)) };
    match matches(pattern, MAX_EXPANSIONS, &mut list) {
        None => Err(ExpandError::Ambiguous(String::from(word), None)),
        Some(paths) if paths.len() > 1 => {
            Err(ExpandError::Ambiguous(String::from(word), Some(paths.len())))
        }
        Some(mut paths) => Ok(paths.pop().unwrap_or_else(|| String::from(word))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse;
    use crate::path::normalize;
    use alloc::string::ToString;
    use alloc::vec;

    /// A small tree: the working directory is `/events`.
    fn list(dir: &str) -> Option<Vec<String>> {
        let entries: &[&str] = match normalize("/events", dir).join("/").as_str() {
            "" => &["README", "events/", "trace", "trace_pipe"],
            "events" => &["enable", "irq/", "sched/", "timer/"],
            "events/irq" => &["enable", "irq_handler_entry/", "irq_handler_exit/", "nmi/"],
            "events/sched" => &["enable", "switch/"],
            "events/timer" => &["enable", "tick/"],
            "events/irq/irq_handler_entry"
            | "events/irq/irq_handler_exit"
            | "events/irq/nmi"
            | "events/sched/switch"
            | "events/timer/tick" => &["enable", "id"],
            _ => return None,
        };
        Some(entries.iter().map(|e| e.to_string()).collect())
    }

    /// A line's arguments after expansion.
    fn args(line: &str) -> Result<Vec<String>, ExpandError> {
        let line = parse(line).unwrap();
        expand(&line.words, &line.globs, list)
    }

    #[test]
    fn globs_expand_one_component_at_a_time_in_listing_order() {
        assert_eq!(
            args("cat irq/*/enable").unwrap(),
            [
                "cat",
                "irq/irq_handler_entry/enable",
                "irq/irq_handler_exit/enable",
                "irq/nmi/enable"
            ]
        );
        assert_eq!(args("ls /events/ir*").unwrap(), ["ls", "/events/irq"]);
        assert_eq!(args("ls ../e?ents/i[a-s]q").unwrap(), ["ls", "../events/irq"]);
        assert_eq!(args("ls /t*").unwrap(), ["ls", "/trace", "/trace_pipe"]);
        assert_eq!(
            args("ls */enable").unwrap(),
            ["ls", "irq/enable", "sched/enable", "timer/enable"]
        );
        assert_eq!(
            args("ls [!i]*/*/id x").unwrap(),
            ["ls", "sched/switch/id", "timer/tick/id", "x"]
        );
        // A component before the slash matches directories only.
        assert_eq!(args("ls *").unwrap(), ["ls", "enable", "irq", "sched", "timer"]);
        assert_eq!(args("ls */").unwrap(), ["ls", "irq/", "sched/", "timer/"]);
        assert_eq!(
            args("ls ./s*/./switch/../switch").unwrap(),
            ["ls", "./sched/./switch/../switch"]
        );
    }

    #[test]
    fn a_glob_that_matches_nothing_stays_as_it_is() {
        assert_eq!(args("cat nosuch*/enable").unwrap(), ["cat", "nosuch*/enable"]);
        assert_eq!(args("cat irq/*/nonesuch").unwrap(), ["cat", "irq/*/nonesuch"]);
        assert_eq!(args("cat irq/*/enable/*").unwrap(), ["cat", "irq/*/enable/*"]);
        assert_eq!(args("cat enable/*").unwrap(), ["cat", "enable/*"], "a file has no entries");
        assert_eq!(args("cat irq/enable*/x").unwrap(), ["cat", "irq/enable*/x"]);
        assert_eq!(args("cat nosuch/ir*").unwrap(), ["cat", "nosuch/ir*"]);
    }

    #[test]
    fn quoted_pattern_characters_are_literal() {
        assert_eq!(args("cat 'irq/*/enable'").unwrap(), ["cat", "irq/*/enable"]);
        assert_eq!(args("cat \"i?q\"/enable").unwrap(), ["cat", "i?q/enable"]);
        assert_eq!(args("ls \"ir\"*").unwrap(), ["ls", "irq"], "the unquoted * expands");
        assert_eq!(args("ls 'ir'q'*'").unwrap(), ["ls", "irq*"]);
        assert_eq!(args("ls i'['r]q").unwrap(), ["ls", "i[r]q"]);
    }

    #[test]
    fn redirections_take_one_file() {
        let target = |line: &str| {
            let line = parse(line).unwrap();
            let redirect = line.redirect.unwrap();
            expand_redirect(&redirect.path, redirect.glob.as_deref(), list)
        };
        assert_eq!(target("echo 1 > irq/n*/enable").unwrap(), "irq/nmi/enable");
        assert_eq!(target("echo 1 > irq/x*/enable").unwrap(), "irq/x*/enable");
        assert_eq!(target("echo 1 > 'irq/*/enable'").unwrap(), "irq/*/enable");
        let ambiguous = target("echo 1 > irq/irq_handler_*/enable").unwrap_err();
        assert_eq!(ambiguous, ExpandError::Ambiguous("irq/irq_handler_*/enable".into(), Some(2)));
        assert_eq!(
            ambiguous.to_string(),
            "irq/irq_handler_*/enable: ambiguous redirect (a glob in a redirection must \
             match one file; it matches 2)"
        );
    }

    #[test]
    fn expansions_are_bounded() {
        // A directory of 600 entries: one glob of it fits, two do not.
        let mut big = |dir: &str| match dir {
            "." => Some((0..600).map(|i| alloc::format!("f{i}")).collect()),
            _ => None,
        };
        let words = |n: usize| -> (Vec<String>, Vec<Option<String>>) {
            (vec!["f*".to_string(); n], vec![Some("f*".to_string()); n])
        };
        let (w, g) = words(1);
        assert_eq!(expand(&w, &g, &mut big).unwrap().len(), 600);
        let (w, g) = words(2);
        let error = expand(&w, &g, &mut big).unwrap_err();
        assert_eq!(error, ExpandError::TooMany("f*".into()));
        assert_eq!(
            error.to_string(),
            "f*: too many matches (a line's globs expand to at most 1024 paths)"
        );
        // Words without a glob (which the line's length bounds) do not count.
        let (mut w, mut g) = words(1);
        w.extend(vec!["x".to_string(); MAX_EXPANSIONS]);
        g.extend(vec![None; MAX_EXPANSIONS]);
        assert_eq!(expand(&w, &g, &mut big).unwrap().len(), 600 + MAX_EXPANSIONS);
        let error = expand_redirect("f*", Some("f*"), &mut big).unwrap_err();
        assert_eq!(error, ExpandError::Ambiguous("f*".into(), Some(600)));
        let mut huge = |dir: &str| match dir {
            "." => Some((0..2000).map(|i| alloc::format!("f{i}")).collect()),
            _ => None,
        };
        let error = expand_redirect("f*", Some("f*"), &mut huge).unwrap_err();
        assert!(error.to_string().ends_with("it matches more than 1024)"), "{error}");
    }
}
