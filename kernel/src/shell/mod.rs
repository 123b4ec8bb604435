//! The serial console shell: a line editor (history, completion) feeding a table of
//! commands, over a tracefs-like tree of the tracer's instances.

mod commands;
mod pipe;
pub mod tracefs;

use crate::{print, println, serial};
use alloc::string::String;
use alloc::vec::Vec;
use pipe::{Output, Stopped};
use shell_core::expand;
use shell_core::line::{Input, LineEditor, MAX_LINE};
use shell_core::parse::{self, CommandLine, Redirect};

// The longest filter and trigger fit on one line, with room for `echo '...' > PATH`.
const _: () = assert!(
    MAX_LINE >= trace::event::MAX_FILTER_LEN + 512
        && MAX_LINE >= trace::tracer::MAX_TRIGGER_LEN + 512
);

/// Why a command failed; printed as `NAME: MESSAGE`.
pub enum CommandError {
    /// The arguments do not fit the command; the usage line is printed.
    Usage,
    /// The command ran and refused, with this reason.
    Failed(String),
}

impl From<&str> for CommandError {
    fn from(reason: &str) -> Self {
        CommandError::Failed(reason.into())
    }
}

/// A command's body: the shell, the arguments after the name, the redirection, and
/// where its output goes (errors go to the console).
pub type CommandFn =
    fn(&mut Shell, &[&str], Option<&Redirect>, &mut Output) -> Result<(), CommandError>;

/// A shell command: its name, argument synopsis, one-line help and body.
pub struct Command {
    /// What the user types.
    pub name: &'static str,
    /// Argument synopsis shown by `help` and on a usage error.
    pub usage: &'static str,
    /// One line of help.
    pub help: &'static str,
    /// Whether the command takes `> FILE` / `>> FILE`.
    pub redirects: bool,
    /// Whether the command's arguments are paths: a glob among them stands for the
    /// paths it matches ([`expand`]).
    pub paths: bool,
    /// Whether the command writes its output to the [`Output`] it is given, and so
    /// can be piped.
    pub pipes: bool,
    /// The body, given the shell, the arguments after the name, and the redirection.
    pub run: CommandFn,
}

/// The shell's state: the working directory in the tracing tree.
pub struct Shell {
    cwd: String,
}

impl Shell {
    /// The working directory.
    pub fn cwd(&self) -> &str {
        &self.cwd
    }

    fn prompt(&self) -> String {
        alloc::format!("tracefs:{}# ", self.cwd)
    }

    /// Runs one command line.
    fn execute(&mut self, line: &str) {
        let CommandLine { words, globs, redirect, pipeline } = match parse::parse(line) {
            Ok(parsed) => parsed,
            Err(reason) => return println!("{reason}"),
        };
        let Some((name, args)) = words.split_first() else { return };
        let Some(command) = commands::COMMANDS.iter().find(|c| c.name == name) else {
            println!("{name}: command not found (type 'help' for the list)");
            return;
        };
        if redirect.is_some() && !command.redirects {
            println!("{name}: output redirection is not supported");
            return;
        }
        if !pipeline.is_empty() && !command.pipes {
            println!("{name}: its output cannot be piped");
            return;
        }
        // Globs expand before anything runs: a refused one changes nothing.
        let list = |dir: &str| {
            let located = tracefs::resolve(&self.cwd, dir).ok()?;
            tracefs::list(&located).ok()
        };
        let expanded = match command.paths {
            true => expand::expand(args, &globs[1..], list),
            false => Ok(args.to_vec()),
        };
        let args = match expanded {
            Ok(args) => args,
            Err(reason) => return println!("{name}: {reason}"),
        };
        let redirect = match redirect {
            Some(Redirect { path, append, glob }) => {
                match expand::expand_redirect(&path, glob.as_deref(), list) {
                    Ok(path) => Some(Redirect { path, append, glob: None }),
                    Err(reason) => return println!("{name}: {reason}"),
                }
            }
            None => None,
        };
        let mut out = match Output::new(&pipeline) {
            Ok(out) => out,
            Err(reason) => return println!("{reason}"),
        };
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        trace::emit!(crate::events::SHELL_COMMAND, line);
        let start = crate::clock::now_ns();
        let result = (command.run)(self, &args, redirect.as_ref(), &mut out);
        out.finish();
        trace::emit!(crate::events::SHELL_DONE, result.is_ok(), crate::clock::now_ns() - start);
        if out.stopped() == Some(Stopped::Interrupted) {
            return println!("^C");
        }
        match result {
            Ok(()) => {}
            Err(CommandError::Usage) if command.usage.is_empty() => {
                println!("{name}: usage: {} (no arguments)", command.name)
            }
            Err(CommandError::Usage) => {
                println!("{name}: usage: {} {}", command.name, command.usage)
            }
            Err(CommandError::Failed(reason)) => println!("{name}: {reason}"),
        }
    }

    /// Completions for the word being typed at the end of `line`: command names for
    /// the first word, paths in the tracing tree for the others.
    fn complete(&self, line: &str) -> Vec<String> {
        let word_start = line.rfind(' ').map_or(0, |i| i + 1);
        let word = &line[word_start..];
        if word_start == 0 {
            return commands::COMMANDS
                .iter()
                .filter(|c| c.name.starts_with(word))
                .map(|c| c.name.into())
                .collect();
        }
        let (dir, prefix) = match word.rfind('/') {
            Some(i) => (&word[..=i], &word[i + 1..]),
            None => ("", word),
        };
        let Ok(located) = tracefs::resolve(&self.cwd, if dir.is_empty() { "." } else { dir })
        else {
            return Vec::new();
        };
        let Ok(names) = tracefs::list(&located) else { return Vec::new() };
        names
            .into_iter()
            .filter(|n| n.starts_with(prefix))
            .map(|n| alloc::format!("{dir}{n}"))
            .collect()
    }
}

/// Runs the shell on the console for ever.
pub fn run() -> ! {
    let mut shell = Shell { cwd: String::from("/") };
    let mut editor = LineEditor::new();
    println!("Type 'help' for the commands.");
    print!("{}", shell.prompt());
    loop {
        let byte = serial::read_byte();
        let input =
            editor.feed(byte, &mut serial::Console, &|line| shell.complete(line), &shell.prompt());
        match input {
            Input::Pending => continue,
            Input::Line(line) => {
                let line = String::from(line);
                shell.execute(&line);
            }
            Input::Cancelled => {}
            Input::TooLong => println!("error: line too long (at most {MAX_LINE} characters)"),
        }
        print!("{}", shell.prompt());
    }
}
