//! The function tracers, for the top-level instance: `function` records each traced
//! function's entry and its caller; `function_graph` its entry and its return, with
//! the call depth and the time it took.
//!
//! The kernel and the driver crate are built with a 5-byte NOP at every function's
//! entry (`memory::text::function_sites`). At boot [`init`] keeps the sites of the
//! functions that may be traced ([`traceable`]: not the tracer's own code, the
//! patcher, the interrupt entry paths or the panic path) and leaves them all NOPs. A
//! tracer other than `nop` patches the selected sites (`set_ftrace_filter`,
//! `set_ftrace_notrace`) into calls to `arch::ftrace`'s trampoline, by the same int3
//! protocol as the static keys; `nop` restores every NOP.
//!
//! From any context, NMIs included: a per-CPU `busy` flag stops recursion (what the
//! recording path calls is never recorded), and `function_graph` keeps each hooked
//! call's return address on a per-CPU shadow stack, pushed and popped only with
//! `busy` set, so an NMI never interleaves with a push or a pop.

use crate::arch::{MAX_CPUS, ftrace, percpu, stack};
use crate::memory::text::{self, ENTRY_NOP};
use crate::{barrier, clock, symbols};
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering::Relaxed};
use core::sync::atomic::{Ordering::SeqCst, compiler_fence};
use spin::{Mutex, Once};
use trace::tracer::{FUNCGRAPH_ENTRY, FUNCGRAPH_EXIT, FUNCTION};

/// Deepest `function_graph` nesting a CPU records (deeper calls are not hooked).
pub const MAX_DEPTH: usize = 64;

/// What `current_tracer` selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// No function tracing: every entry is its NOP.
    Nop,
    /// Each traced function's entry, with its caller.
    Function,
    /// Each traced function's entry and return, nested, with durations.
    Graph,
}

impl Kind {
    /// Every tracer, as `available_tracers` lists them.
    pub const ALL: [Kind; 3] = [Kind::Graph, Kind::Function, Kind::Nop];

    /// The tracer's name in `current_tracer`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Nop => "nop",
            Kind::Function => "function",
            Kind::Graph => "function_graph",
        }
    }

    /// The tracer named `name`.
    pub fn parse(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// A function that may be traced.
pub struct Function {
    /// Its entry NOP's address (the function's address).
    pub site: usize,
    /// Its name in the kernel's symbol table.
    pub name: &'static str,
}

/// Module paths whose functions are never traced: the tracer's own code and what it
/// calls, the patcher, the interrupt entry paths, the per-CPU set-up, the panic path.
const NOTRACE: [&str; 11] = [
    "kernel::arch::",
    "kernel::memory::",
    "kernel::tracing::",
    "kernel::keys::",
    "kernel::panic",
    "kernel::symbols::",
    "kernel::barrier::",
    "kernel::sync::",
    "kernel::clock::",
    "kernel::smp::",
    "kernel::dump::",
];

/// Whether the function named `name` may be traced: one of the kernel's or the
/// driver's own (not an instance of another crate's generic code), outside
/// [`NOTRACE`].
pub fn traceable(name: &str) -> bool {
    let path = name.trim_start_matches('<');
    let ours = path.starts_with("kernel::") || path.starts_with("latency_watchdog::");
    ours && !NOTRACE.iter().any(|m| path.starts_with(m))
}

/// The traceable functions, in address order, once [`init`] ran.
static FUNCTIONS: Once<Vec<Function>> = Once::new();

/// Which tracer records (a [`Kind`] as `u8`): the hooks' view.
static MODE: AtomicU8 = AtomicU8::new(Kind::Nop as u8);

/// The selection: each list indexed like [`functions`].
struct Selection {
    current: Kind,
    /// `set_ftrace_filter` (none set: every function).
    filter: Vec<bool>,
    /// `set_ftrace_notrace`.
    notrace: Vec<bool>,
    /// Which sites are calls now.
    patched: Vec<bool>,
}

static SELECTION: Mutex<Selection> = Mutex::new(Selection {
    current: Kind::Nop,
    filter: Vec::new(),
    notrace: Vec::new(),
    patched: Vec::new(),
});

/// A hooked call on a CPU's shadow stack.
struct Frame {
    /// Where the call returns to.
    ret: AtomicU64,
    /// Where that return address lay on the stack.
    slot: AtomicU64,
    /// The function (ELF address).
    func: AtomicU64,
    /// When it was entered (ns).
    start: AtomicU64,
}

/// A CPU's function tracing state; only that CPU touches it.
struct Cpu {
    /// Inside a hook: calls are not recorded.
    busy: AtomicBool,
    /// Hooked calls on [`Cpu::frames`].
    depth: AtomicUsize,
    frames: [Frame; MAX_DEPTH],
    /// Calls not hooked because the shadow stack was full.
    overflow: AtomicU64,
}

static CPUS: [Cpu; MAX_CPUS] = [const {
    Cpu {
        busy: AtomicBool::new(false),
        depth: AtomicUsize::new(0),
        frames: [const {
            Frame {
                ret: AtomicU64::new(0),
                slot: AtomicU64::new(0),
                func: AtomicU64::new(0),
                start: AtomicU64::new(0),
            }
        }; MAX_DEPTH],
        overflow: AtomicU64::new(0),
    }
}; MAX_CPUS];

/// Collects the traceable functions (the symbol table names them) and registers
/// the trampolines' hooks. Returns how many functions may be traced, and how many
/// entry sites the build has. Once, at boot, after `symbols::init`.
pub fn init() -> Result<(usize, usize), &'static str> {
    let table = symbols::table().ok_or("no symbol table: functions cannot be named")?;
    let sites = text::function_sites();
    if sites.is_empty() {
        return Err("the kernel was built without patchable function entries");
    }
    let mut functions: Vec<Function> = sites
        .iter()
        .filter(|&&site| text::site_bytes(site) == Some(ENTRY_NOP))
        .filter_map(|&site| {
            let (name, offset) = table.lookup(stack::elf_address(site as u64))?;
            (offset == 0 && traceable(name)).then_some(Function { site, name })
        })
        .collect();
    functions.sort_by_key(|f| f.site);
    functions.dedup_by_key(|f| f.site);
    if functions.len() > crate::arch::patch::MAX_SITES - crate::keys::sites().len() {
        return Err("more function sites than the patcher tracks");
    }
    let count = functions.len();
    let mut selection = SELECTION.lock();
    selection.filter = alloc::vec![false; count];
    selection.notrace = alloc::vec![false; count];
    selection.patched = alloc::vec![false; count];
    FUNCTIONS.call_once(|| functions);
    ftrace::set_hooks(ftrace::Hooks { entry: on_entry, exit: on_exit });
    Ok((count, sites.len()))
}

/// The traceable functions, in address order (none before [`init`]).
pub fn functions() -> &'static [Function] {
    FUNCTIONS.get().map_or(&[], Vec::as_slice)
}

/// The tracer `current_tracer` shows.
pub fn current() -> Kind {
    SELECTION.lock().current
}

/// Why a function tracer change was refused; nothing changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FunctionError {
    /// [`init`] found no functions to trace.
    Unavailable,
    /// A glob of a filter write matched no traceable function.
    NoMatch,
    /// The patcher refused (it tracks no more sites).
    Patch(&'static str),
    /// A function tracer is on (for [`with_only`]).
    Busy,
}

/// Makes `kind` the current tracer: patches the selected sites into calls, or
/// (`Nop`) restores every NOP. Thread context, interrupts on.
pub fn set_current(kind: Kind) -> Result<(), FunctionError> {
    if kind != Kind::Nop && functions().is_empty() {
        return Err(FunctionError::Unavailable);
    }
    change(&mut SELECTION.lock(), |selection| selection.current = kind)
}

/// Runs `body` with `kind` recording only the function at `site` (into the
/// top-level instance), then restores its NOP; the filter files are left as they
/// are. Thread context, interrupts on; refused while a tracer is on.
pub fn with_only(site: usize, kind: Kind, body: impl FnOnce()) -> Result<(), FunctionError> {
    let selection = SELECTION.lock();
    if selection.current != Kind::Nop {
        return Err(FunctionError::Busy);
    }
    if !functions().iter().any(|f| f.site == site) {
        return Err(FunctionError::NoMatch);
    }
    text::patch_entries(&[(site, true)], barrier::all_cpus).map_err(FunctionError::Patch)?;
    MODE.store(kind as u8, Relaxed);
    body();
    MODE.store(Kind::Nop as u8, Relaxed);
    text::patch_entries(&[(site, false)], barrier::all_cpus).map_err(FunctionError::Patch)
}

/// Which list a filter write changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum List {
    /// `set_ftrace_filter`: only these are traced (none: all).
    Filter,
    /// `set_ftrace_notrace`: these are never traced.
    Notrace,
}

/// Writes `text` to a list, as ftrace does: whitespace-separated globs over the
/// functions' names, each adding what it matches, or with a leading `!` removing
/// it; without `append` (`>`) the list is emptied first. A glob that matches
/// nothing refuses the whole write. Patches what changed if a tracer is on.
pub fn write_list(list: List, text: &str, append: bool) -> Result<(), FunctionError> {
    let functions = functions();
    let mut selection = SELECTION.lock();
    let mut new = match list {
        List::Filter => selection.filter.clone(),
        List::Notrace => selection.notrace.clone(),
    };
    if !append {
        new.iter_mut().for_each(|b| *b = false);
    }
    for word in text.split_ascii_whitespace() {
        let (set, glob) = match word.strip_prefix('!') {
            Some(glob) => (false, glob),
            None => (true, word),
        };
        let mut matched = false;
        for (bit, function) in new.iter_mut().zip(functions) {
            if trace::event::glob(glob, function.name) {
                *bit = set;
                matched = true;
            }
        }
        if !matched {
            return Err(FunctionError::NoMatch);
        }
    }
    change(&mut selection, |selection| match list {
        List::Filter => selection.filter = new,
        List::Notrace => selection.notrace = new,
    })
}

/// Calls `each` with every function on `list`, in address order.
pub fn for_each_listed(list: List, mut each: impl FnMut(&Function)) {
    let selection = SELECTION.lock();
    let bits = match list {
        List::Filter => &selection.filter,
        List::Notrace => &selection.notrace,
    };
    functions().iter().zip(bits).filter(|(_, on)| **on).for_each(|(f, _)| each(f));
}

/// Stops recording (the panic path): sites stay patched, the hooks return at once,
/// and hooked returns still go back where they belong.
pub fn stop() {
    MODE.store(Kind::Nop as u8, Relaxed);
}

/// Edits `selection` and patches what the edit changed; if patching is refused,
/// the selection and the hooks' mode are as they were (the patcher changed nothing).
fn change(
    selection: &mut Selection,
    edit: impl FnOnce(&mut Selection),
) -> Result<(), FunctionError> {
    let before = (selection.current, selection.filter.clone(), selection.notrace.clone());
    edit(selection);
    apply(selection).inspect_err(|_| {
        (selection.current, selection.filter, selection.notrace) = before;
        MODE.store(selection.current as u8, Relaxed);
    })
}

/// Patches the sites whose state differs from what `selection` wants, and tells
/// the hooks which tracer records. A tracer turned off stops recording before its
/// sites are restored; one turned on records once they are patched.
fn apply(selection: &mut Selection) -> Result<(), FunctionError> {
    let on = selection.current != Kind::Nop;
    if !on {
        MODE.store(Kind::Nop as u8, Relaxed);
    }
    let all = !selection.filter.iter().any(|b| *b);
    let mut changes = Vec::new();
    let mut wanted = Vec::with_capacity(selection.patched.len());
    for (i, function) in functions().iter().enumerate() {
        let want = on && (all || selection.filter[i]) && !selection.notrace[i];
        wanted.push(want);
        if want != selection.patched[i] {
            changes.push((function.site, want));
        }
    }
    text::patch_entries(&changes, barrier::all_cpus).map_err(FunctionError::Patch)?;
    selection.patched = wanted;
    MODE.store(selection.current as u8, Relaxed);
    Ok(())
}

/// The current CPU's state.
fn this_cpu() -> Option<&'static Cpu> {
    CPUS.get(percpu::index())
}

/// The entry hook (see `arch::ftrace::Hooks`): records the call, and with
/// `function_graph` pushes it on the shadow stack and asks for its return.
fn on_entry(function: u64, ret: u64, slot: u64) -> bool {
    let mode = MODE.load(Relaxed);
    if mode == Kind::Nop as u8 {
        return false;
    }
    let Some(cpu) = this_cpu() else { return false };
    if cpu.busy.load(Relaxed) {
        return false;
    }
    cpu.busy.store(true, Relaxed);
    compiler_fence(SeqCst);
    let hooked = record_entry(cpu, mode, function, ret, slot);
    compiler_fence(SeqCst);
    cpu.busy.store(false, Relaxed);
    hooked
}

/// [`on_entry`]'s work, with `busy` set.
fn record_entry(cpu: &Cpu, mode: u8, function: u64, ret: u64, slot: u64) -> bool {
    let Some(tracer) = super::tracer() else { return false };
    let func = stack::elf_address(function);
    if mode == Kind::Function as u8 {
        tracer.record_function(&FUNCTION, &[func, stack::elf_address(ret)]);
        return false;
    }
    let depth = cpu.depth.load(Relaxed);
    let Some(frame) = cpu.frames.get(depth) else {
        cpu.overflow.fetch_add(1, Relaxed);
        return false;
    };
    frame.ret.store(ret, Relaxed);
    frame.slot.store(slot, Relaxed);
    frame.func.store(func, Relaxed);
    frame.start.store(clock::now_ns(), Relaxed);
    cpu.depth.store(depth + 1, Relaxed);
    tracer.record_function(&FUNCGRAPH_ENTRY, &[func, depth as u64]);
    true
}

/// The exit hook: pops the call that returned, records its return with
/// `function_graph`, and gives back its return address. A return that is not the
/// shadow stack's top means the stack was corrupted: the kernel cannot go on.
fn on_exit(slot: u64) -> u64 {
    let cpu = this_cpu().expect("a hooked return on a CPU without tracing state");
    let was_busy = cpu.busy.load(Relaxed);
    cpu.busy.store(true, Relaxed);
    compiler_fence(SeqCst);
    let depth = cpu.depth.load(Relaxed);
    let top = depth.checked_sub(1).and_then(|d| cpu.frames.get(d));
    let Some(frame) = top.filter(|f| f.slot.load(Relaxed) == slot) else {
        panic!(
            "function_graph: a return at {slot:#x} is not the shadow stack's top (depth {depth})"
        );
    };
    let ret = frame.ret.load(Relaxed);
    if MODE.load(Relaxed) == Kind::Graph as u8
        && let Some(tracer) = super::tracer()
    {
        let func = frame.func.load(Relaxed);
        let took = clock::now_ns().saturating_sub(frame.start.load(Relaxed));
        tracer.record_function(&FUNCGRAPH_EXIT, &[func, depth as u64 - 1, took]);
    }
    cpu.depth.store(depth - 1, Relaxed);
    compiler_fence(SeqCst);
    cpu.busy.store(was_busy, Relaxed);
    ret
}

/// Puts back the return addresses `function_graph` hooked in a stack walk of this
/// CPU (ELF addresses, innermost first): each of the trampoline's stands for the
/// next hooked call from the shadow stack's top.
pub fn restore_returns(frames: &mut [u64]) {
    let trampoline = stack::elf_address(ftrace::return_address());
    let Some(cpu) = this_cpu() else { return };
    let depth = cpu.depth.load(Relaxed);
    let mut nth = 0;
    for frame in frames.iter_mut().filter(|f| **f == trampoline) {
        nth += 1;
        if let Some(hooked) = depth.checked_sub(nth).and_then(|d| cpu.frames.get(d)) {
            *frame = stack::elf_address(hooked.ret.load(Relaxed));
        }
    }
}

/// Hooked calls that have not returned yet, on every CPU.
pub fn hooked_calls() -> usize {
    CPUS.iter().map(|c| c.depth.load(Relaxed)).sum()
}

/// Calls not hooked on each CPU because its shadow stack was full.
pub fn overflows() -> u64 {
    CPUS.iter().map(|c| c.overflow.load(Relaxed)).sum()
}
