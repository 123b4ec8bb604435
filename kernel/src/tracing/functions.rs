//! The function tracers' kernel half: the functions that may be traced, the
//! patching of their entries, and the hooks the trampolines call. Each instance's
//! tracer and lists live in `trace` (`Instance::set_function_tracer`,
//! `Instance::set_function_list`): `function` records each traced function's entry
//! and its caller; `function_graph` its entry and its return, with the call depth
//! and the time it took.
//!
//! The kernel and the driver crate are built with a 5-byte NOP at every function's
//! entry (`memory::text::function_sites`). At boot [`init`] keeps the sites of the
//! functions that may be traced ([`traceable`]: not the tracer's own code, the
//! patcher, the interrupt entry paths or the panic path), leaves them all NOPs and
//! registers them with the tracer. The tracer has an entry patched ([`patch`]) into
//! a call to `arch::ftrace`'s trampoline while some instance traces it, by the same
//! int3 protocol as the static keys, and restored once none does.
//!
//! From any context, NMIs included: a per-CPU `busy` flag stops recursion (what the
//! recording path calls is never recorded), and `function_graph` keeps each hooked
//! call's return address on a per-CPU shadow stack, pushed and popped only with
//! `busy` set, so an NMI never interleaves with a push or a pop.

use super::KernelPlatform;
use crate::arch::{MAX_CPUS, ftrace, irq, percpu, stack};
use crate::memory::text::{self, ENTRY_NOP};
use crate::{barrier, clock, symbols};
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use core::sync::atomic::{Ordering::SeqCst, compiler_fence};
use spin::Once;
use trace::Instance;
use trace::tracer::{FunctionCommand, GraphScope, HookError, StackEntry, TriggerError};
pub use trace::tracer::{FunctionList as List, FunctionTracer as Kind};

/// Deepest `function_graph` nesting a CPU records (deeper calls are not hooked).
pub const MAX_DEPTH: usize = 64;

/// `max_graph_depth`: how deep `function_graph` follows calls (0: up to [`MAX_DEPTH`]).
static MAX_GRAPH_DEPTH: AtomicUsize = AtomicUsize::new(0);

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

/// Set on the panic path: the hooks record nothing more.
static STOPPED: AtomicBool = AtomicBool::new(false);

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
    /// The instances that record its return.
    graph: AtomicU64,
    /// The function's index plus one if the profiler times the call, else 0.
    profiled: AtomicU64,
    /// The CPU's graph scope before the call, restored at its return.
    inside: AtomicU64,
    muted: AtomicU64,
}

/// A CPU's function tracing state; only that CPU touches it.
struct Cpu {
    /// Inside a hook: calls are not recorded.
    busy: AtomicBool,
    /// Hooked calls on [`Cpu::frames`].
    depth: AtomicUsize,
    frames: [Frame; MAX_DEPTH],
    /// The graph scope of the innermost hooked call (`trace::tracer::GraphScope`).
    inside: AtomicU64,
    muted: AtomicU64,
    /// Calls not hooked because the shadow stack was full.
    overflow: AtomicU64,
    /// The call the entry hook is in (the function's address and the call's return
    /// address, as loaded), for a function command's stack trace.
    hooked: [AtomicU64; 2],
}

impl Cpu {
    /// The CPU's graph scope.
    fn scope(&self) -> GraphScope {
        GraphScope { inside: self.inside.load(Relaxed), muted: self.muted.load(Relaxed) }
    }

    /// Makes `scope` the CPU's graph scope.
    fn set_scope(&self, scope: GraphScope) {
        self.inside.store(scope.inside, Relaxed);
        self.muted.store(scope.muted, Relaxed);
    }
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
                graph: AtomicU64::new(0),
                profiled: AtomicU64::new(0),
                inside: AtomicU64::new(0),
                muted: AtomicU64::new(0),
            }
        }; MAX_DEPTH],
        inside: AtomicU64::new(0),
        muted: AtomicU64::new(0),
        overflow: AtomicU64::new(0),
        hooked: [const { AtomicU64::new(0) }; 2],
    }
}; MAX_CPUS];

/// Collects the traceable functions (the symbol table names them), registers them
/// with the tracer and the trampolines' hooks. Returns how many functions may be
/// traced, and how many entry sites the build has. Once, at boot, after
/// `symbols::init` and `tracing::init`.
pub fn init() -> Result<(usize, usize), &'static str> {
    let tracer = super::tracer().ok_or("no tracer")?;
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
    FUNCTIONS.call_once(|| functions);
    ftrace::set_hooks(ftrace::Hooks { entry: on_entry, exit: on_exit, kept: kept_return });
    if !tracer.set_functions(count) {
        return Err("the tracer has its functions already");
    }
    irq::set_irqs_off_hooks(irq::IrqsOffHooks { off: irqs_off, on: irqs_on });
    Ok((count, sites.len()))
}

/// The traceable functions, in address order (none before [`init`]).
pub fn functions() -> &'static [Function] {
    FUNCTIONS.get().map_or(&[], Vec::as_slice)
}

/// The index among [`functions`] of the function whose entry is at `site`.
fn index_of(site: usize) -> Option<usize> {
    functions().binary_search_by_key(&site, |f| f.site).ok()
}

/// Patches the entries of the functions `changes` lists (index, into a call or
/// back to the NOP): the tracer's [`trace::Platform::patch_functions`]. Thread
/// context, interrupts on.
pub fn patch(changes: &[(usize, bool)]) -> Result<(), &'static str> {
    let functions = functions();
    let sites: Vec<(usize, bool)> = changes
        .iter()
        .map(|&(i, call)| functions.get(i).map(|f| (f.site, call)))
        .collect::<Option<_>>()
        .ok_or("no such function")?;
    text::patch_entries(&sites, barrier::all_cpus)
}

/// Why a function tracer change was refused; nothing changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FunctionError {
    /// A glob of a filter write matched no traceable function.
    NoMatch,
    /// A function tracer is on in some instance (for [`with_only`]).
    Busy,
    /// The tracer refused.
    Tracer(trace::tracer::FunctionError),
    /// A command written to a list other than `set_ftrace_filter`.
    CommandElsewhere,
    /// A function command was refused.
    Command(trace::tracer::HookError),
}

impl From<trace::tracer::FunctionError> for FunctionError {
    fn from(error: trace::tracer::FunctionError) -> Self {
        FunctionError::Tracer(error)
    }
}

/// Runs `body` with `kind` recording only the function at `site` into the
/// top-level instance, then restores its NOP and the top level's lists. Thread
/// context, interrupts on; refused while an instance traces functions.
pub fn with_only(site: usize, kind: Kind, body: impl FnOnce()) -> Result<(), FunctionError> {
    let tracer = super::tracer().ok_or(trace::tracer::FunctionError::Unavailable)?;
    if tracer.functions_traced() {
        return Err(FunctionError::Busy);
    }
    let index = index_of(site).ok_or(FunctionError::NoMatch)?;
    let top = tracer.top();
    let lists = List::ALL.map(|list| selection(&top, list).map(|bits| (list, bits)));
    let lists: Vec<(List, Vec<bool>)> = lists.into_iter().collect::<Result<_, _>>()?;
    let mut only = alloc::vec![false; functions().len()];
    for list in List::ALL {
        top.set_function_list(list, &alloc::vec![false; only.len()])?;
    }
    only[index] = true;
    top.set_function_list(List::Filter, &only)?;
    let traced = top.set_function_tracer(kind);
    if traced.is_ok() {
        body();
    }
    let off = top.set_function_tracer(Kind::Nop);
    for (list, bits) in lists {
        top.set_function_list(list, &bits)?;
    }
    Ok(traced.and(off)?)
}

/// One of `instance`'s lists, one entry per function.
fn selection(
    instance: &Instance<'_, KernelPlatform>,
    list: List,
) -> Result<Vec<bool>, FunctionError> {
    let mut bits = alloc::vec![false; functions().len()];
    for i in instance.function_list(list)? {
        bits[i] = true;
    }
    Ok(bits)
}

/// Writes `text` to one of `instance`'s lists, as ftrace does: whitespace-separated
/// globs over the functions' names (or numbers, lines of `available_filter_functions`
/// from 1), each adding what it matches, or with a leading `!` removing it; `GLOB:mod:CRATE` matches only the functions of crate `CRATE`
/// (`kernel`, `latency_watchdog`: a crate is this kernel's module; `CRATE` is a glob,
/// `!CRATE` every other crate, and an empty glob or crate is `*`). Without
/// `append` (`>`) the list is emptied first. A glob that matches nothing refuses the
/// whole write. Patches what changed if the instance traces functions.
///
/// `set_ftrace_filter` also takes commands, `[!]GLOB:COMMAND[:COUNT]` (ftrace's
/// "filter commands": `traceon`, `traceoff`, `snapshot`, `stacktrace`,
/// `enable_event:SYSTEM:EVENT`, `disable_event:SYSTEM:EVENT`), which act each time
/// one of the functions is called, add up whether written with `>` or `>>`, and are
/// removed with `!` ([`trace::Instance::set_function_command`]). The write is one
/// change ([`trace::Instance::edit_functions`]): refused whole, it changes nothing.
pub fn write_list(
    instance: &Instance<'_, KernelPlatform>,
    list: List,
    text: &str,
    append: bool,
) -> Result<(), FunctionError> {
    let mut new = match append {
        true => selection(instance, list)?,
        false => alloc::vec![false; functions().len()],
    };
    let commands = apply_globs(text, &mut new, list == List::Filter)?;
    let change: Vec<FunctionCommand<'_>> =
        commands.iter().map(|(matching, line, _)| (&matching[..], &line[..])).collect();
    instance.edit_functions(Some((list, &new)), &change).map_err(|refused| {
        match refused.command.map(|i| commands[i].2) {
            Some(at) => FunctionError::Command(shifted(refused.error, at)),
            None => match refused.error {
                HookError::Function(error) => FunctionError::Tracer(error),
                error => FunctionError::Command(error),
            },
        }
    })
}

/// A function command of a filter write: its functions, its line, and where its
/// line's text lies in the written text (its errors' positions are the line's).
type Command = (Vec<usize>, alloc::string::String, usize);

/// Applies the whitespace-separated entries of `text` to `list` (one entry per
/// function): each glob sets what it matches, or with a leading `!` clears it;
/// `GLOB:mod:CRATE` matches only that crate's functions. Returns the function
/// commands (`GLOB:COMMAND`), which only `commands` allows. A glob that matches
/// nothing refuses the whole text.
fn apply_globs(
    text: &str,
    list: &mut [bool],
    commands: bool,
) -> Result<Vec<Command>, FunctionError> {
    let functions = functions();
    let mut found = Vec::new();
    for word in text.split_ascii_whitespace() {
        let (set, entry) = match word.strip_prefix('!') {
            Some(entry) => (false, entry),
            None => (true, word),
        };
        let (glob, command) = split_command(entry);
        let krate = command.and_then(|c| c.strip_prefix("mod:"));
        // As Linux's module globbing: an empty glob or crate is `*`, and `!CRATE`
        // is every crate but those.
        let glob = if krate.is_some() && glob.is_empty() { "*" } else { glob };
        let in_crate = |name: &str| {
            krate.is_none_or(|k| {
                let (outside, k) = k.strip_prefix('!').map_or((false, k), |k| (true, k));
                let k = if k.is_empty() { "*" } else { k };
                trace::event::glob(k, crate_of(name)) != outside
            })
        };
        // As Linux's, a number is the function on that line (from 1) of
        // `available_filter_functions`, which lists them in this order.
        let line = glob.parse::<usize>().ok().filter(|_| glob.bytes().all(|b| b.is_ascii_digit()));
        let matching: Vec<usize> = match line.filter(|_| krate.is_none()) {
            Some(line) => {
                line.checked_sub(1).filter(|&i| i < functions.len()).into_iter().collect()
            }
            None => (functions.iter().enumerate())
                .filter(|(_, f)| trace::event::glob(glob, f.name) && in_crate(f.name))
                .map(|(i, _)| i)
                .collect(),
        };
        if matching.is_empty() {
            return Err(FunctionError::NoMatch);
        }
        match command.filter(|_| krate.is_none()) {
            None => matching.iter().for_each(|&i| list[i] = set),
            Some(_) if !commands => return Err(FunctionError::CommandElsewhere),
            Some(command) => {
                let line = if set { command.into() } else { alloc::format!("!{command}") };
                // The line's `command` is where the word's is; a `!` before both.
                let at = command.as_ptr() as usize - text.as_ptr() as usize;
                found.push((matching, line, at - usize::from(!set)));
            }
        }
    }
    Ok(found)
}

/// The crate a function's name starts with (`kernel` of `<kernel::A as B>::f`).
fn crate_of(name: &str) -> &str {
    let path = name.trim_start_matches('<');
    path.split_once("::").map_or(path, |(krate, _)| krate)
}

/// Writes `text` to `stack_trace_filter` (`append` for `>>`): globs as
/// [`write_list`] takes them, without commands; empty, the stack tracer checks
/// every function. Patches what changed while the stack tracer is on.
pub fn write_stack_filter(text: &str, append: bool) -> Result<(), FunctionError> {
    let tracer = super::tracer().ok_or(trace::tracer::FunctionError::Unavailable)?;
    let mut new = alloc::vec![false; functions().len()];
    if append {
        tracer.stack_filter()?.into_iter().for_each(|i| new[i] = true);
    }
    apply_globs(text, &mut new, false)?;
    Ok(tracer.set_stack_filter(&new)?)
}

/// The functions `stack_trace_filter` lists, in address order.
pub fn stack_filtered() -> Result<Vec<&'static Function>, FunctionError> {
    let Some(tracer) = super::tracer() else { return Ok(Vec::new()) };
    Ok(at_indices(tracer.stack_filter()?))
}

/// The functions at `indices`.
fn at_indices(indices: Vec<usize>) -> Vec<&'static Function> {
    let functions = functions();
    indices.into_iter().filter_map(|i| functions.get(i)).collect()
}

/// `error` with its position (a trigger's) moved `at` bytes on.
fn shifted(error: HookError, at: usize) -> HookError {
    match error {
        HookError::Trigger(e) => HookError::Trigger(TriggerError { pos: e.pos + at, ..e }),
        error => error,
    }
}

/// Splits `GLOB:COMMAND` at its first lone `:` (a function's path holds `::`).
fn split_command(entry: &str) -> (&str, Option<&str>) {
    let bytes = entry.as_bytes();
    let lone = (0..bytes.len()).find(|&i| {
        bytes[i] == b':' && bytes.get(i + 1) != Some(&b':') && (i == 0 || bytes[i - 1] != b':')
    });
    match lone {
        Some(i) => (&entry[..i], Some(&entry[i + 1..])),
        None => (entry, None),
    }
}

/// Every function command of `instance`, in address order: the function and the
/// command as `set_ftrace_filter` lists it.
pub fn commands(
    instance: &Instance<'_, KernelPlatform>,
) -> Result<Vec<(&'static Function, String)>, FunctionError> {
    let functions = functions();
    let commands = instance.function_commands()?.into_iter();
    Ok(commands.filter_map(|(index, command)| Some((functions.get(index)?, command))).collect())
}

/// The functions on one of `instance`'s lists, in address order.
pub fn listed(
    instance: &Instance<'_, KernelPlatform>,
    list: List,
) -> Result<Vec<&'static Function>, FunctionError> {
    Ok(at_indices(instance.function_list(list)?))
}

/// Stops recording (the panic path): sites stay patched, the hooks return at once,
/// and hooked returns still go back where they belong.
pub fn stop() {
    STOPPED.store(true, Relaxed);
}

/// The call whose entry hook this CPU runs, if it runs one: (an address in the
/// function, after its entry's `call`; the call's return address), ELF addresses,
/// as a stack walk from inside the hook would find them but cannot (the hook runs
/// before the function's frame exists).
pub fn hooked_call() -> Option<[u64; 2]> {
    let cpu = this_cpu().filter(|cpu| cpu.busy.load(Relaxed))?;
    let [function, ret] = cpu.hooked.each_ref().map(|word| word.load(Relaxed));
    Some([stack::elf_address(function + 5), stack::elf_address(ret)])
}

/// The current CPU's state.
fn this_cpu() -> Option<&'static Cpu> {
    CPUS.get(percpu::index())
}

/// The irqs-off hook (see `arch::irq::IrqsOffHooks`): the `irqsoff` tracer's
/// [`trace::Tracer::irqs_off`].
fn irqs_off(ip: u64) -> bool {
    super::tracer().is_some_and(|tracer| tracer.irqs_off(stack::elf_address(ip)))
}

/// The irqs-on hook: the `irqsoff` tracer's [`trace::Tracer::irqs_on`].
fn irqs_on(ip: u64) {
    if let Some(tracer) = super::tracer() {
        tracer.irqs_on(stack::elf_address(ip));
    }
}

/// The entry hook (see `arch::ftrace::Hooks`): records the call, and with
/// `function_graph` pushes it on the shadow stack and asks for its return.
fn on_entry(function: u64, ret: u64, slot: u64) -> bool {
    if STOPPED.load(Relaxed) {
        return false;
    }
    let Some(cpu) = this_cpu() else { return false };
    if cpu.busy.load(Relaxed) {
        return false;
    }
    cpu.busy.store(true, Relaxed);
    cpu.hooked[0].store(function, Relaxed);
    cpu.hooked[1].store(ret, Relaxed);
    compiler_fence(SeqCst);
    let hooked = record_entry(cpu, function, ret, slot);
    compiler_fence(SeqCst);
    cpu.busy.store(false, Relaxed);
    hooked
}

/// [`on_entry`]'s work, with `busy` set: checks the stack for the stack tracer,
/// records the entry in the instances tracing the function, counts it for the
/// profiler, and pushes the call if some instance records it with `function_graph`,
/// it changes the CPU's graph scope, or the profiler times it.
fn record_entry(cpu: &Cpu, function: u64, ret: u64, slot: u64) -> bool {
    let Some(tracer) = super::tracer() else { return false };
    let Some(index) = index_of(function as usize) else { return false };
    let func = stack::elf_address(function);
    let depth = cpu.depth.load(Relaxed);
    let frame = cpu.frames.get(depth);
    let parent = stack::elf_address(ret);
    let scope = cpu.scope();
    let used = || stack::kernel_stack_used(slot);
    tracer.check_stack(index, func, used, |entries| callers(slot, ret, entries));
    // A call `max_graph_depth` deep or deeper is not followed: `function_graph`
    // skips it as when the shadow stack is full, and it is not pushed, so its
    // callees are as deep and skipped too.
    let max = MAX_GRAPH_DEPTH.load(Relaxed);
    let followed = max == 0 || depth < max;
    let at = frame.filter(|_| followed).map(|_| depth as u64);
    let (graph, callee) = tracer.record_function_entry(index, func, parent, at, scope);
    let profiled = tracer.profile_entry(index);
    if !followed || (graph == 0 && callee == scope && !profiled) {
        return false;
    }
    let Some(frame) = frame else {
        cpu.overflow.fetch_add(1, Relaxed);
        return false;
    };
    frame.ret.store(ret, Relaxed);
    frame.slot.store(slot, Relaxed);
    frame.func.store(func, Relaxed);
    frame.start.store(clock::now_ns(), Relaxed);
    frame.graph.store(graph, Relaxed);
    frame.profiled.store(if profiled { index as u64 + 1 } else { 0 }, Relaxed);
    frame.inside.store(scope.inside, Relaxed);
    frame.muted.store(scope.muted, Relaxed);
    cpu.set_scope(callee);
    cpu.depth.store(depth + 1, Relaxed);
    true
}

/// The stack tracer's call chain for the call hooked at `slot` (returning to
/// `ret`): that return address, then those of the calls further out, each with the
/// kernel stack in use down to where it lies (see `trace::tracer::StackEntry`).
/// Returns how many entries it wrote.
fn callers(slot: u64, ret: u64, entries: &mut [StackEntry]) -> usize {
    let Some(first) = entries.first_mut() else { return 0 };
    // Where each return address lies, in `depth` until the end.
    *first = StackEntry { ip: stack::elf_address(ret), depth: slot };
    let mut count = 1;
    // The hook's own frames lie below `slot`; the callers' above it.
    stack::walk(|ip, at| {
        if at <= slot {
            return true;
        }
        let Some(entry) = entries.get_mut(count) else { return false };
        *entry = StackEntry { ip, depth: at };
        count += 1;
        true
    });
    for entry in &mut entries[..count] {
        entry.depth = stack::kernel_stack_used(entry.depth).unwrap_or(0);
    }
    count
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
    if !STOPPED.load(Relaxed)
        && let Some(tracer) = super::tracer()
    {
        let func = frame.func.load(Relaxed);
        let took = clock::now_ns().saturating_sub(frame.start.load(Relaxed));
        tracer.record_function_return(frame.graph.load(Relaxed), func, depth as u64 - 1, took);
        if let Some(index) = frame.profiled.load(Relaxed).checked_sub(1) {
            tracer.profile_return(index as usize, took);
        }
    }
    cpu.set_scope(GraphScope {
        inside: frame.inside.load(Relaxed),
        muted: frame.muted.load(Relaxed),
    });
    cpu.depth.store(depth - 1, Relaxed);
    compiler_fence(SeqCst);
    cpu.busy.store(was_busy, Relaxed);
    ret
}

/// `max_graph_depth`: how many nested calls `function_graph` follows on a CPU (0:
/// no limit but the shadow stack's [`MAX_DEPTH`]).
pub fn max_graph_depth() -> usize {
    MAX_GRAPH_DEPTH.load(Relaxed)
}

/// Sets [`max_graph_depth`]; takes effect at the next traced call (calls followed
/// already return as recorded).
pub fn set_max_graph_depth(depth: usize) {
    MAX_GRAPH_DEPTH.store(depth, Relaxed);
}

/// The stack walk's hook (see `arch::ftrace::Hooks`): the return address kept on
/// this CPU's shadow stack for the hooked call whose return address lay at `slot`,
/// if that call has not returned.
fn kept_return(slot: u64) -> Option<u64> {
    let cpu = this_cpu()?;
    let depth = cpu.depth.load(Relaxed).min(MAX_DEPTH);
    let hooked = cpu.frames[..depth].iter().rev().find(|f| f.slot.load(Relaxed) == slot)?;
    Some(hooked.ret.load(Relaxed))
}

/// Hooked calls that have not returned yet, on every CPU.
pub fn hooked_calls() -> usize {
    CPUS.iter().map(|c| c.depth.load(Relaxed)).sum()
}

/// Calls not hooked on each CPU because its shadow stack was full.
pub fn overflows() -> u64 {
    CPUS.iter().map(|c| c.overflow.load(Relaxed)).sum()
}
