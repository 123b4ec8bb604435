//! Splitting a command line into words, with quotes, output redirection
//! (`echo VALUE > FILE`, `echo VALUE >> FILE`) and pipes (`cat trace | head`).

use alloc::string::String;
use alloc::vec::Vec;

/// Where a command's output goes instead of the console.
#[derive(Debug, PartialEq, Eq)]
pub struct Redirect {
    /// The file.
    pub path: String,
    /// `>>` (append) rather than `>` (replace).
    pub append: bool,
    /// The file's name as a glob pattern, if it holds one (as
    /// [`CommandLine::globs`]).
    pub glob: Option<String>,
}

/// A parsed command line.
#[derive(Debug, PartialEq, Eq)]
pub struct CommandLine {
    /// The command and its arguments, quotes removed.
    pub words: Vec<String>,
    /// For each of `words`, its glob pattern if it holds an unquoted `*`, `?` or
    /// `[`: the word with its quoted `*`, `?`, `[` and `]` made literal (`[*]`), for
    /// [`expand`](crate::expand) to match paths with.
    pub globs: Vec<Option<String>>,
    /// The redirection, if any.
    pub redirect: Option<Redirect>,
    /// The commands after each `|`, in order, each its words.
    pub pipeline: Vec<Vec<String>>,
}

/// Parses a line: words separated by blanks; `'...'` and `"..."` quote (a
/// backslash in double quotes escapes `"`, `\`, `$` and `` ` ``, as a POSIX shell's:
/// `"...-\$ts0"` is a histogram's variable, as Linux's scripts write it); `>` and
/// `>>` outside quotes redirect to the next word; `|` outside quotes starts the next
/// command of a pipe.
/// A word with `*`, `?` or `[` outside quotes is a glob ([`CommandLine::globs`]).
pub fn parse(line: &str) -> Result<CommandLine, &'static str> {
    let mut words = Vec::new();
    let mut globs = Vec::new();
    let mut pipeline: Vec<Vec<String>> = Vec::new();
    let mut redirect: Option<(bool, Option<Redirect>)> = None;
    let mut chars = line.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_ascii_whitespace()).is_some() {}
        let Some(&c) = chars.peek() else { break };
        if c == '|' {
            chars.next();
            if redirect.is_some() {
                return Err("syntax error: a command cannot both redirect and pipe");
            }
            if pipeline.last().unwrap_or(&words).is_empty() {
                return Err("syntax error: empty command before '|'");
            }
            pipeline.push(Vec::new());
            continue;
        }
        if c == '>' {
            if !pipeline.is_empty() {
                return Err("syntax error: a command cannot both redirect and pipe");
            }
            chars.next();
            let append = chars.next_if_eq(&'>').is_some();
            if redirect.is_some() {
                return Err("syntax error: more than one redirection");
            }
            redirect = Some((append, None));
            continue;
        }
        let mut word = String::new();
        // The word as a glob pattern, and whether it holds an unquoted `*?[`.
        let mut pattern = String::new();
        let mut glob = false;
        while let Some(&c) = chars.peek() {
            match c {
                c if c.is_ascii_whitespace() || c == '>' || c == '|' => break,
                '\'' => {
                    chars.next();
                    loop {
                        match chars.next() {
                            Some('\'') => break,
                            Some(c) => {
                                word.push(c);
                                quoted(&mut pattern, c);
                            }
                            None => return Err("syntax error: unterminated quote"),
                        }
                    }
                }
                '"' => {
                    chars.next();
                    loop {
                        match chars.next() {
                            Some('"') => break,
                            Some('\\') if matches!(chars.peek(), Some('"' | '\\' | '$' | '`')) => {
                                let c = chars.next().unwrap_or('\\');
                                word.push(c);
                                quoted(&mut pattern, c);
                            }
                            Some(c) => {
                                word.push(c);
                                quoted(&mut pattern, c);
                            }
                            None => return Err("syntax error: unterminated quote"),
                        }
                    }
                }
                c => {
                    chars.next();
                    word.push(c);
                    pattern.push(c);
                    glob |= matches!(c, '*' | '?' | '[');
                }
            }
        }
        let pattern = glob.then_some(pattern);
        match &mut redirect {
            Some((append, target @ None)) => {
                *target = Some(Redirect { path: word, append: *append, glob: pattern })
            }
            _ => match pipeline.last_mut() {
                Some(command) => command.push(word),
                None => {
                    words.push(word);
                    globs.push(pattern);
                }
            },
        }
    }
    let redirect = match redirect {
        None => None,
        Some((_, None)) => return Err("syntax error: missing file after redirection"),
        Some((_, Some(redirect))) => Some(redirect),
    };
    if pipeline.last().is_some_and(Vec::is_empty) {
        return Err("syntax error: empty command after '|'");
    }
    Ok(CommandLine { words, globs, redirect, pipeline })
}

/// Adds a quoted character to a glob pattern: `*`, `?`, `[` and `]` as one-character
/// classes, which match only themselves.
fn quoted(pattern: &mut String, c: char) {
    match c {
        '*' | '?' | '[' | ']' => pattern.extend(['[', c, ']']),
        c => pattern.push(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn words(line: &str) -> Vec<String> {
        parse(line).unwrap().words
    }

    #[test]
    fn words_split_on_blanks_and_quotes_hold_them_together() {
        assert_eq!(words("  echo   hello  "), ["echo", "hello"]);
        assert_eq!(words("echo 'a b' \"c d\" e'f g'h"), ["echo", "a b", "c d", "ef gh"]);
        assert_eq!(words(r#"echo "say \"hi\" \\ \n""#), ["echo", r#"say "hi" \ \n"#]);
        assert_eq!(words(r#"echo "-\$ts0 \` \x" '\$'"#), ["echo", r#"-$ts0 ` \x"#, r"\$"]);
        assert_eq!(words("echo 'x > y | z'"), ["echo", "x > y | z"]);
        assert!(words("").is_empty());
    }

    #[test]
    fn words_with_unquoted_pattern_characters_are_globs() {
        let line = parse(r#"ls a b* 'c*' "d?"e[f] g'[x]'? h\* | grep *"#).unwrap();
        assert_eq!(line.words, ["ls", "a", "b*", "c*", "d?e[f]", "g[x]?", "h\\*"]);
        let globs: Vec<Option<&str>> = line.globs.iter().map(Option::as_deref).collect();
        assert_eq!(
            globs,
            [None, None, Some("b*"), None, Some("d[?]e[f]"), Some("g[[]x[]]?"), Some("h\\*")]
        );
        assert_eq!(line.pipeline, [vec!["grep", "*"]], "pipe commands have no globs");
        assert!(parse("echo '*' \"?\" '[a]'").unwrap().globs.iter().all(Option::is_none));
    }

    #[test]
    fn redirections_and_pipes() {
        let line = parse("echo 1 > tracing_on").unwrap();
        assert_eq!(line.words, ["echo", "1"]);
        let redirect = |path: &str, append, glob: Option<&str>| {
            Some(Redirect { path: path.into(), append, glob: glob.map(String::from) })
        };
        assert_eq!(line.redirect, redirect("tracing_on", false, None));
        let line = parse("echo irq:*>>set_event").unwrap();
        assert_eq!(line.redirect, redirect("set_event", true, None));
        let line = parse("echo 1 > 'a*'/b*").unwrap();
        assert_eq!(line.redirect, redirect("a*/b*", false, Some("a[*]/b*")));
        let line = parse("cat trace | grep -v tick | head -n 3").unwrap();
        assert_eq!(line.words, ["cat", "trace"]);
        assert_eq!(line.pipeline, [vec!["grep", "-v", "tick"], vec!["head", "-n", "3"]]);
    }

    #[test]
    fn bad_lines_name_the_rule() {
        let error = |line| parse(line).unwrap_err();
        assert_eq!(error("echo 'open"), "syntax error: unterminated quote");
        assert_eq!(error("echo \"open"), "syntax error: unterminated quote");
        assert_eq!(error("echo x >"), "syntax error: missing file after redirection");
        assert_eq!(error("echo x > a > b"), "syntax error: more than one redirection");
        assert_eq!(error("| head"), "syntax error: empty command before '|'");
        assert_eq!(error("cat trace |"), "syntax error: empty command after '|'");
        assert_eq!(error("cat trace | | head"), "syntax error: empty command before '|'");
        let both = "syntax error: a command cannot both redirect and pipe";
        assert_eq!(error("cat trace > f | head"), both);
        assert_eq!(error("cat trace | head > f"), both);
    }
}
