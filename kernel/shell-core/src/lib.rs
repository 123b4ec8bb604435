//! The kernel shell's pure logic, kept apart from the kernel so it is unit-tested on
//! the host: the line editor ([`line`](mod@line)), the command-line parser
//! ([`parse`]), path normalisation ([`path`]), glob expansion of path arguments
//! ([`expand`]), `grep`'s patterns ([`pattern`]) and the tracefs tree's path
//! resolution ([`tree`]). No I/O: the kernel feeds bytes in and writes what comes out
//! to the serial console.
#![no_std]

extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod expand;
pub mod line;
pub mod parse;
pub mod path;
pub mod pattern;
pub mod tree;
