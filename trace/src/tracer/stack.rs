//! The stack tracer (ftrace's `stack_trace`): at the entry of each function it
//! checks, the stack in use on the CPU's kernel stack; the deepest seen, and the
//! call chain that used it. The platform's entry hook measures the stack and walks
//! the chain ([`Tracer::check_stack`]); the tracer has the entries of the functions
//! it checks patched while it is on, beside those the function tracers want.
//!
//! A new maximum is stored under a lock that writers only try: a writer that finds
//! it held (another CPU storing its own maximum, or the CPU it interrupted reading
//! the chain) gives up that one sample. Writers never wait, so the check runs in
//! any context, NMIs included.

use super::Tracer;
use super::function::{Control, FunctionError, Functions, listed};
use crate::platform::Platform;
use crate::symtab::SymbolTable;
use crate::sync::{AtomicBool, AtomicU64, Ordering::Relaxed};
use alloc::vec::Vec;
use core::fmt::{self, Write};

/// Most functions a maximum's call chain keeps.
pub const MAX_STACK_ENTRIES: usize = 64;

/// One function of the deepest call chain.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StackEntry {
    /// An address in the function: where it calls the next one in (a return
    /// address), or for the first entry the checked function's own address. As the
    /// platform gives it (the kernel: an ELF address).
    pub ip: u64,
    /// Bytes of the stack in use from its top down to that call, the function's own
    /// frame included (`Depth` in `stack_trace`).
    pub depth: u64,
}

/// The deepest stack seen, as `stack_max_size` and `stack_trace` show it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StackMax {
    /// Whether the stack tracer is on.
    pub on: bool,
    /// Bytes in use at the deepest function entry seen (`stack_max_size`).
    pub size: u64,
    /// Its call chain, the checked function first (empty until one was seen).
    pub entries: Vec<StackEntry>,
}

impl StackMax {
    /// Writes the chain as ftrace's `stack_trace` file shows it: a header, then per
    /// entry its index, its depth, its size (its depth less the next entry's; the
    /// last entry's whole depth) and its location, named with `symbols` when given
    /// (`function+0xoffset`), as an address otherwise. Off with nothing seen, the
    /// header says how to turn it on.
    pub fn write(&self, out: &mut dyn Write, symbols: Option<&SymbolTable<'_>>) -> fmt::Result {
        write_chain(out, self.on, self.size, &self.entries, symbols)
    }
}

/// [`StackMax::write`] over its parts.
fn write_chain(
    out: &mut dyn Write,
    on: bool,
    size: u64,
    entries: &[StackEntry],
    symbols: Option<&SymbolTable<'_>>,
) -> fmt::Result {
    writeln!(out, "        Depth    Size   Location    ({} entries)", entries.len())?;
    writeln!(out, "        -----    ----   --------")?;
    if !on && size == 0 {
        out.write_str(DISABLED)?;
    }
    for (i, entry) in entries.iter().enumerate() {
        let next = entries.get(i + 1).map_or(0, |e| e.depth);
        let size = entry.depth.saturating_sub(next);
        write!(out, "{i:3}) {:8}   {size:5}   ", entry.depth)?;
        match symbols {
            // The checked function's own address; the others are return addresses.
            Some(table) if i == 0 => table.write_address(out, entry.ip)?,
            Some(table) => table.write_frame(out, entry.ip)?,
            None => write!(out, "{:#x}", entry.ip)?,
        }
        writeln!(out)?;
    }
    Ok(())
}

/// What `stack_trace` says while the stack tracer is off and has seen nothing.
const DISABLED: &str = "\
#
#  Stack tracer disabled
#
# To enable the stack tracer: echo 1 > stack_tracer_enabled
#
";

/// A call chain as the lock holds it.
struct Chain {
    len: usize,
    entries: [StackEntry; MAX_STACK_ENTRIES],
}

/// The stack tracer's state, part of [`Functions`].
pub(super) struct StackTracer {
    /// Whether it is on.
    on: AtomicBool,
    /// Per function: whether its entry is checked (on, and `stack_trace_filter`
    /// lists it or is empty).
    checked: Vec<AtomicBool>,
    /// `stack_max_size`: a function entry is stored only if it uses more.
    max: AtomicU64,
    chain: spin::Mutex<Chain>,
}

impl StackTracer {
    /// Off, over `count` functions.
    pub(super) fn new(count: usize) -> StackTracer {
        StackTracer {
            on: AtomicBool::new(false),
            checked: (0..count).map(|_| AtomicBool::new(false)).collect(),
            max: AtomicU64::new(0),
            chain: spin::Mutex::new(Chain {
                len: 0,
                entries: [StackEntry::default(); MAX_STACK_ENTRIES],
            }),
        }
    }

    /// Whether function `index`'s entry is checked.
    #[inline]
    pub(super) fn checks(&self, index: usize) -> bool {
        self.checked.get(index).is_some_and(|c| c.load(Relaxed))
    }

    /// Publishes which functions are checked: all of `filter`'s (every function if it
    /// lists none) while `on`, none otherwise.
    fn publish(&self, on: bool, filter: &[bool]) {
        let all = !filter.contains(&true);
        for (checked, &listed) in self.checked.iter().zip(filter) {
            checked.store(on && (all || listed), Relaxed);
        }
        self.on.store(on, Relaxed);
    }
}

impl<P: Platform> Tracer<P> {
    /// The stack tracer's check at the entry of function `index` (at `ip`), from the
    /// platform's entry hook, in any context: if the function is checked, `depth`
    /// gives the bytes of the kernel stack in use at its entry (`None`: not on a
    /// kernel stack), and if that is a new maximum, `walk` fills the entries after
    /// the first with the callers' return addresses and depths, innermost first,
    /// and returns how many it wrote.
    #[inline]
    pub fn check_stack(
        &self,
        index: usize,
        ip: u64,
        depth: impl FnOnce() -> Option<u64>,
        walk: impl FnOnce(&mut [StackEntry]) -> usize,
    ) {
        // What every hooked entry pays while the function is not checked.
        if let Some(stack) = self.functions.get().map(|f| &f.stack).filter(|s| s.checks(index)) {
            stack.check(ip, depth, walk);
        }
    }
}

impl StackTracer {
    /// [`Tracer::check_stack`] for a function it checks.
    #[inline(never)]
    fn check(
        &self,
        ip: u64,
        depth: impl FnOnce() -> Option<u64>,
        walk: impl FnOnce(&mut [StackEntry]) -> usize,
    ) {
        let Some(depth) = depth().filter(|&d| d > self.max.load(Relaxed)) else { return };
        // The walk fills a copy, so the lock is held only to store it: a stack
        // overflow in the walk leaves the chain stored before readable.
        let mut entries = [StackEntry::default(); MAX_STACK_ENTRIES];
        entries[0] = StackEntry { ip, depth };
        let walked = walk(&mut entries[1..]).min(MAX_STACK_ENTRIES - 1);
        // Never wait: a writer that finds the lock held gives up this sample.
        let Some(mut chain) = self.chain.try_lock() else { return };
        if depth <= self.max.load(Relaxed) {
            return;
        }
        chain.entries = entries;
        chain.len = 1 + walked;
        self.max.store(depth, Relaxed);
    }
}

impl<P: Platform> Tracer<P> {
    /// Whether the stack tracer is on.
    pub fn stack_tracer(&self) -> bool {
        self.functions.get().is_some_and(|f| f.stack.on.load(Relaxed))
    }

    /// Turns the stack tracer on or off: the entries of the functions it checks
    /// become calls (or their NOPs again, where no function tracer wants them).
    /// Needs a context that may wait; a refused patch changes nothing.
    pub fn set_stack_tracer(&self, on: bool) -> Result<(), FunctionError> {
        self.change_stack(|stack_on, _| {
            *stack_on = on;
            Ok(())
        })
    }

    /// The functions `stack_trace_filter` lists (indices, in order; none: every
    /// function is checked). Needs a context that may wait, as the setters.
    pub fn stack_filter(&self) -> Result<Vec<usize>, FunctionError> {
        let Some(functions) = self.waitable_functions()? else { return Ok(Vec::new()) };
        Ok(listed(&functions.control.lock().stack_filter))
    }

    /// Replaces `stack_trace_filter` with `selected` (one entry per function; none
    /// set: every function). Patches what that changes while the stack tracer is
    /// on. Needs a context that may wait.
    pub fn set_stack_filter(&self, selected: &[bool]) -> Result<(), FunctionError> {
        self.change_stack(|_, filter| {
            if filter.len() != selected.len() {
                return Err(FunctionError::WrongLength);
            }
            filter.copy_from_slice(selected);
            Ok(())
        })
    }

    /// The deepest stack seen and its call chain. Needs a context that may wait
    /// (it takes the chain's lock: [`Tracer::write_stack_max_now`] does not).
    pub fn stack_max(&self) -> Result<StackMax, FunctionError> {
        let Some(stack) = self.waitable_functions()?.map(|f| &f.stack) else {
            return Ok(StackMax::default());
        };
        let chain = stack.chain.lock();
        let entries = chain.entries[..chain.len].to_vec();
        Ok(StackMax { on: stack.on.load(Relaxed), size: stack.max.load(Relaxed), entries })
    }

    /// Writes `stack_trace` as [`StackMax::write`] does, from any context, without
    /// waiting or allocating (the panic path): `Ok(false)`, with nothing written,
    /// while a CPU holds the chain (it stopped while storing or reading it).
    pub fn write_stack_max_now(
        &self,
        out: &mut dyn Write,
        symbols: Option<&SymbolTable<'_>>,
    ) -> Result<bool, fmt::Error> {
        let Some(stack) = self.functions.get().map(|f| &f.stack) else { return Ok(false) };
        let Some(chain) = stack.chain.try_lock() else { return Ok(false) };
        let (on, size) = (stack.on.load(Relaxed), stack.max.load(Relaxed));
        write_chain(out, on, size, &chain.entries[..chain.len], symbols)?;
        Ok(true)
    }

    /// Sets `stack_max_size`: only a function entry with more of the stack in use is
    /// stored from now on (`0`: the next one checked). The chain shown stays until
    /// then, as in ftrace. Needs a context that may wait.
    pub fn set_stack_max_size(&self, size: u64) -> Result<(), FunctionError> {
        let functions = self.waitable_functions()?.ok_or(FunctionError::Unavailable)?;
        let _chain = functions.stack.chain.lock();
        functions.stack.max.store(size, Relaxed);
        Ok(())
    }

    /// Edits whether the stack tracer is on and its filter, publishes the functions
    /// checked and patches; if patching is refused, everything is as it was.
    fn change_stack(
        &self,
        edit: impl FnOnce(&mut bool, &mut Vec<bool>) -> Result<(), FunctionError>,
    ) -> Result<(), FunctionError> {
        self.change_patched(|functions, control| {
            let was = functions.stack.on.load(Relaxed);
            let (mut on, mut filter) = (was, control.stack_filter.clone());
            edit(&mut on, &mut filter)?;
            functions.stack.publish(on, &filter);
            let before = core::mem::replace(&mut control.stack_filter, filter);
            Ok(move |functions: &Functions, control: &mut Control| {
                functions.stack.publish(was, &before);
                control.stack_filter = before;
            })
        })
    }
}
