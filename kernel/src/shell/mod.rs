//! The serial console shell: a line editor feeding a table of commands.

mod commands;
mod line;

use crate::{print, println, serial};
use line::{Input, LineEditor, MAX_LINE};

/// The prompt; tests wait for it to know a command has finished.
const PROMPT: &str = "tracefs:/# ";

/// Why a command failed; printed as `NAME: MESSAGE`.
pub enum CommandError {
    /// The arguments do not fit the command; the usage line is printed.
    Usage,
    /// The command ran and refused, with this reason.
    Failed(&'static str),
}

/// A shell command: its name, argument synopsis, one-line help and body.
pub struct Command {
    /// What the user types.
    pub name: &'static str,
    /// Argument synopsis shown by `help` and on a usage error.
    pub usage: &'static str,
    /// One line of help.
    pub help: &'static str,
    /// The body, given the arguments after the name.
    pub run: fn(&[&str]) -> Result<(), CommandError>,
}

/// Runs one command line.
fn execute(line: &str) {
    let mut words = line.split_ascii_whitespace();
    let Some(name) = words.next() else { return };
    let mut args = [""; MAX_LINE / 2];
    let mut argc = 0;
    for word in words {
        args[argc] = word;
        argc += 1;
    }
    let Some(command) = commands::COMMANDS.iter().find(|c| c.name == name) else {
        println!("{name}: command not found (type 'help' for the list)");
        return;
    };
    match (command.run)(&args[..argc]) {
        Ok(()) => {}
        Err(CommandError::Usage) => println!("{name}: usage: {} {}", command.name, command.usage),
        Err(CommandError::Failed(reason)) => println!("{name}: {reason}"),
    }
}

/// Runs the shell on the console for ever.
pub fn run() -> ! {
    let mut editor = LineEditor::new();
    println!("Type 'help' for the commands.");
    print!("{PROMPT}");
    loop {
        let byte = serial::read_byte();
        match editor.feed(byte, &mut serial::Console) {
            Input::Pending => continue,
            Input::Line(line) => execute(line),
            Input::Cancelled => {}
            Input::TooLong => println!("error: line too long (at most {MAX_LINE} characters)"),
        }
        print!("{PROMPT}");
    }
}
