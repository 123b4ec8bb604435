//! trace-cmd's `trace.dat`, file format version 6 (trace-cmd.dat.v6(5)), for
//! `trace-cmd report` and KernelShark.
//!
//! The file, little endian with 8-byte longs and 4096-byte pages:
//!
//! 1. the magic, `tracing`, `6`, the endianness, the long size and the page size;
//! 2. `header_page` and `header_event`, and every event's `format` file (the `ftrace`
//!    system's in their own section, the others by system), as the kernel's tracefs
//!    shows them ([`trace::event::format_file`]); the kernel's functions as kallsyms
//!    when the report has its ELF (`--elf`: trace-cmd then names the function
//!    tracers' addresses itself), empty printk formats; the saved command lines;
//! 3. the CPU count and options: the trace clock (the kernel's `local`: nanoseconds
//!    since boot) and each CPU's ring statistics (`trace-cmd report --stat`);
//! 4. `flyrecord`, each CPU's data offset and size, the trace clock again;
//! 5. each CPU's pages, page-aligned: a 64-bit timestamp, a 64-bit commit (bytes
//!    used), then records with a 32-bit header (5-bit type/length, 27-bit time
//!    delta), time-extend records where a delta needs more than 27 bits.
//!
//! Records are converted to the ftrace layout their format files describe. An event
//! whose records do not all match its descriptor's fields (a printk call site, whose
//! arguments carry their own types, or a record that did not decode), and an event
//! id without a descriptor, is written as a *text event*: its one string field holds
//! the text our own report prints (printk call sites, `ftrace:bprint`, as
//! `ftrace:printk`: libtraceevent reads `bprint` records as binary printk
//! arguments). An event of a name trace-cmd prints its own way, without the fields it
//! reads there, is written under another (`CLAIMED`); each event's system and name is
//! its own (`name_uniquely`).
//! Lost events start a new page flagged with the
//! count, which trace-cmd reports as `[N EVENTS DROPPED]`; past `EXACT_LOSSES`
//! such pages on a CPU, a loss where the open page is less than a quarter full joins
//! that page's mark instead (a dump of many losses would take a page per record).
//!
//! `ftrace:funcgraph_exit`, `ftrace:kernel_stack` and `ftrace:print` are written in
//! Linux's layout, which trace-cmd's function graph and stack displays and its
//! `print fmt` read ([`format_file::Linux`]): a marker prints as Linux's,
//! `tracing_mark_write: TEXT`, its ip named by the kallsyms.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::{self, Write};

use trace::event::format_file::{self, LayoutError, Linux};
use trace::{Clock, text};

use trace::dump::{BufferKind, DumpDescriptor, Event, MAX_CPUS, Section, Texts, Value, hex_dump};

use super::{MAX_TS, Symbols};

/// Bytes of a page of CPU data.
pub const PAGE_SIZE: usize = 4096;
/// Bytes of a page's header (timestamp, commit).
const PAGE_HEADER: usize = 16;
/// Bytes of records a page holds.
const PAGE_DATA: usize = PAGE_SIZE - PAGE_HEADER;
/// Commit flag: events were lost before this page.
const MISSING_EVENTS: u64 = 1 << 31;
/// Commit flag: the lost count is stored after the page's data.
const MISSING_STORED: u64 = 1 << 30;
/// The largest lost count a page's mark shows: trace-cmd reads it as a C `int`.
const MAX_MARK: u64 = i32::MAX as u64;
/// Bits of a record header's time delta.
const DELTA_BITS: u32 = 27;
/// Largest type/length value that is itself the data length in words.
const MAX_TYPE_LEN: usize = 28;
/// Type of a time-extend record.
const TIME_EXTEND: u32 = 30;
/// Largest record (ftrace layout) written: with its header, a time extend and a lost
/// count it fits an empty page. Longer texts are cut.
const MAX_RECORD: usize = 2048;
/// The trace clock, as the kernel's `trace_clock` file shows it: every clock, the
/// first buffer's in brackets (a trace.dat of this version has one clock for all its
/// buffers; `trace-cmd` prints a clock's values as seconds only for clocks in ns).
fn trace_clock(traces: &[Section]) -> String {
    let current = traces.first().map_or(Clock::Local, |t| t.clock);
    let names = Clock::ALL.map(|c| match c == current {
        true => format!("[{}]", c.name()),
        false => c.name().to_string(),
    });
    names.join(" ") + "\n"
}

/// What trace.dat cannot keep of `traces`' clocks, a line for each buffer whose
/// clock is not the first's: the file has one clock, and trace-cmd shows every
/// buffer's times as that clock's.
pub fn clock_notes(traces: &[Section]) -> Vec<String> {
    let Some(first) = traces.first() else { return Vec::new() };
    let other = traces.iter().filter(|t| t.clock != first.clock);
    other
        .map(|t| {
            format!(
                "trace.dat has one clock, {} (buffer {}'s): buffer {}'s times are {}'s, \
                 shown as {}'s",
                first.clock.name(),
                buffer_name(first),
                buffer_name(t),
                t.clock.name(),
                first.clock.name()
            )
        })
        .collect()
}

/// How an event id's records are written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// In the layout of the descriptor's fields.
    Fields,
    /// As a text event.
    Text,
}

/// An event as trace.dat declares it.
struct Declared<'a> {
    system: String,
    name: String,
    shape: Shape,
    descriptor: Option<&'a DumpDescriptor>,
    /// Linux's layout, which its records are converted to, for an event trace-cmd
    /// displays its own way.
    linux: Option<Linux>,
}

impl Declared<'_> {
    /// Appends an event's record in the ftrace layout of its declared fields
    /// (Linux's where it has them); `Err` without fields.
    fn encode(&self, ev: &Event, out: &mut Vec<u8>) -> Result<(), LayoutError> {
        let d = self.descriptor.ok_or(LayoutError::Count)?;
        let values: Vec<trace::field::Value<'_>> = ev.values.iter().map(Value::borrowed).collect();
        let start = out.len();
        match self.linux {
            Some(linux) => linux.encode(ev.id, origin(ev), &values, ev.ts, out)?,
            None => format_file::encode_record(ev.id, origin(ev), &d.fields(), &values, out)?,
        }
        if out.len() - start > MAX_RECORD {
            out.truncate(start);
            return Err(LayoutError::TooLong);
        }
        Ok(())
    }
}

/// Why a trace cannot be written as trace.dat.
fn too_many_cpus(cpu: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("an event names CPU {cpu}; trace.dat takes CPUs below {MAX_CPUS}"),
    )
}

/// An event trace-cmd prints its own way (libtraceevent, its plugins, trace-cmd's
/// function graph), from the fields named (`ftrace:bprint` records carry a binary
/// printk format and arguments, which no event of ours has), and the name written
/// instead for an event of that name that lacks one of them (else its name and
/// `_`): trace-cmd then prints it with its own `print fmt`, where it printed
/// `<CANT FIND FIELD ...>`.
type Claimed = (&'static str, &'static str, &'static [&'static str], Option<&'static str>);

/// The events trace-cmd 3.1 and its plugins print their own way, or whose fields its
/// `report --profile` reads (it stops at an event of the name without them)
/// ([`Claimed`]).
const CLAIMED: [Claimed; 21] = [
    ("ftrace", "bprint", &["ip", "fmt", "buf"], Some("printk")),
    ("ftrace", "kernel_stack", &["size", "caller"], Some("stacktrace")),
    ("ftrace", "function", &["ip", "parent_ip"], None),
    ("ftrace", "func_repeats", &["ip", "parent_ip", "count", "top_delta_ts"], None),
    ("ftrace", "funcgraph_entry", &["func", "depth"], None),
    ("ftrace", "funcgraph_exit", &["func", "depth", "calltime", "rettime"], None),
    ("ftrace", "print", &["ip", "buf"], None),
    ("ftrace", "raw_data", &["id", "buf"], None),
    ("timer", "hrtimer_expire_entry", &["hrtimer", "function"], None),
    ("timer", "hrtimer_start", &["hrtimer", "function", "expires", "softexpires"], None),
    (
        "sched",
        "sched_switch",
        &["prev_comm", "prev_pid", "prev_prio", "prev_state", "next_comm", "next_pid", "next_prio"],
        None,
    ),
    ("sched", "sched_wakeup", &["comm", "pid", "prio"], None),
    ("sched", "sched_wakeup_new", &["comm", "pid", "prio"], None),
    ("tlb", "tlb_flush", &["pages", "reason"], None),
    ("irq", "irq_handler_entry", &["irq"], None),
    ("irq", "irq_handler_exit", &["irq"], None),
    ("irq", "softirq_entry", &["vec"], None),
    ("irq", "softirq_exit", &["vec"], None),
    ("irq", "softirq_raise", &["vec"], None),
    ("raw_syscalls", "sys_enter", &["id"], None),
    ("raw_syscalls", "sys_exit", &["id"], None),
];

/// The name an event (of `system`, as a C name) whose format file declares `fields`
/// is written under: its own as a C name, or the one [`CLAIMED`] gives it instead.
fn unclaimed_name(system: &str, name: &str, fields: &[String]) -> String {
    let name = c_name(name);
    let claimed = CLAIMED.iter().find(|c| (c.0, c.1) == (system, name.as_str()));
    match claimed {
        Some((.., wanted, instead)) if !wanted.iter().all(|w| fields.iter().any(|f| f == w)) => {
            instead.map_or_else(|| format!("{name}_"), String::from)
        }
        _ => name,
    }
}

/// `system` or `name` as libtraceevent reads a name ([`format_file::c_name`]).
fn c_name(name: &str) -> String {
    format_file::c_name(name).to_string()
}

/// The saved command lines: `PID NAME` for each task id the events carry (pid 0
/// is `<idle>` to trace-cmd without one).
fn cmdlines(traces: &[Section]) -> String {
    let tasks: BTreeMap<u32, text::Task> = traces
        .iter()
        .flat_map(|trace| &trace.events)
        .map(|ev| text::Task::of(ev.context, ev.cpu))
        .filter(|task| task.pid != 0)
        .map(|task| (task.pid, task))
        .collect();
    tasks.iter().fold(String::new(), |mut out, (pid, task)| {
        let _ = writeln!(out, "{pid} {task}");
        out
    })
}

/// Where an event was written, for its record's common fields.
fn origin(ev: &Event) -> format_file::Origin {
    format_file::Origin { context: ev.context, cpu: ev.cpu }
}

/// The text our report prints for an event (after its name), rendered by `texts`.
fn event_text(d: Option<&DumpDescriptor>, texts: &Texts<'_>, ev: &Event) -> String {
    match d {
        Some(_) => texts.text(ev),
        None => hex_dump(&ev.values),
    }
}

/// Every event id of the trace with how it is declared: each descriptor, and each
/// id without one (as `unknown:id_N`).
fn declarations(traces: &[Section]) -> BTreeMap<u16, Declared<'_>> {
    let mut declared: BTreeMap<u16, Declared<'_>> = traces
        .iter()
        .flat_map(|trace| trace.descriptors.iter())
        .map(|(&id, d)| {
            let linux = Linux::of(&d.system, &d.name, &d.fields());
            // A printk site's records are its text (their arguments are tagged,
            // not fields), whether or not the trace holds one.
            let shape = match d.kind {
                trace::event::DescriptorKind::Printk => Shape::Text,
                _ => Shape::Fields,
            };
            let declared = Declared {
                system: c_name(&d.system),
                name: d.name.clone(),
                shape,
                descriptor: Some(d),
                linux,
            };
            (id, declared)
        })
        .collect();
    let mut scratch = Vec::new();
    for ev in traces.iter().flat_map(|trace| &trace.events) {
        let entry = declared.entry(ev.id).or_insert_with(|| Declared {
            system: "unknown".into(),
            name: format!("id_{}", ev.id),
            shape: Shape::Text,
            descriptor: None,
            linux: None,
        });
        if entry.shape == Shape::Fields {
            scratch.clear();
            if entry.encode(ev, &mut scratch).is_err() {
                entry.shape = Shape::Text;
            }
        }
    }
    for d in declared.values_mut() {
        let fields = match (d.shape, d.descriptor) {
            (Shape::Fields, Some(desc)) => {
                format_file::field_names(&desc.system, &d.name, &desc.fields())
            }
            _ => vec![format_file::TEXT_FIELD.to_string()],
        };
        d.name = unclaimed_name(&d.system, &d.name, &fields);
    }
    name_uniquely(&mut declared);
    declared
}

/// Gives each event a system and name no other event of the trace has (libtraceevent
/// finds an event by its name, for `trace-cmd report -F` and KernelShark's lists):
/// names the same as C names (`a-b`, `a_b`), a name written instead of a claimed
/// one ([`CLAIMED`]), or `unknown:id_N` for an id whose descriptor is missing. An event whose name
/// is its descriptor's keeps it (the first by id of several); the others take the
/// first of `_2`, `_3`, ... after theirs that is free.
fn name_uniquely(declared: &mut BTreeMap<u16, Declared<'_>>) {
    let own = |d: &Declared<'_>| d.descriptor.is_some_and(|desc| desc.name == d.name);
    let mut taken = BTreeSet::new();
    let kept: BTreeSet<u16> = declared
        .iter()
        .filter(|(_, d)| own(d) && taken.insert((d.system.clone(), d.name.clone())))
        .map(|(&id, _)| id)
        .collect();
    // The next suffix to try after each name, so that many events of one name take
    // a try each, not one per name before theirs.
    let mut next: BTreeMap<(String, String), u32> = BTreeMap::new();
    for (_, d) in declared.iter_mut().filter(|(id, _)| !kept.contains(id)) {
        let base = (d.system.clone(), d.name.clone());
        let n = next.entry(base.clone()).or_insert(2);
        while !taken.insert((d.system.clone(), d.name.clone())) {
            d.name = format!("{}_{n}", base.1);
            *n += 1;
        }
    }
}

/// The `format` file of an id.
fn format_file(id: u16, declared: &Declared<'_>) -> String {
    let mut text = String::new();
    // Writing to a String cannot fail.
    let _ = match (declared.shape, declared.descriptor) {
        (Shape::Fields, Some(d)) => {
            let name = &declared.name;
            format_file::write_event_format(&mut text, &d.system, name, id, &d.fields(), &d.format)
        }
        _ => format_file::write_text_format(&mut text, &declared.name, id),
    };
    text
}

/// Pages a CPU may open to mark a loss where its open page is less than a quarter
/// full. Past them such a loss joins the open page's mark (shown before that page's
/// first record, at most a quarter page early; Linux's own marks are per page), so
/// that a dump of many losses cannot make the file a page per record.
const EXACT_LOSSES: u32 = 64;

/// One CPU's pages being filled: the open page in memory, each written out once
/// full (memory holds a page, not the CPU's data).
#[derive(Default)]
struct Pages {
    /// The open page, [`PAGE_SIZE`] bytes while one is open.
    page: Vec<u8>,
    /// Whether a page is open.
    open: bool,
    /// Record bytes on the open page.
    used: usize,
    /// Events lost before the open page.
    lost: u64,
    /// Timestamp the next delta is taken from.
    last_ts: u64,
    /// Pages opened for a loss where the open page was less than a quarter full.
    early: u32,
    /// Bytes of pages written out.
    written: u64,
}

impl Pages {
    /// Completes the open page, if any, and writes it to `out`.
    fn close(&mut self, out: &mut dyn Write) -> io::Result<()> {
        if !std::mem::take(&mut self.open) {
            return Ok(());
        }
        let mut commit = self.used as u64;
        if self.lost > 0 {
            commit |= MISSING_EVENTS | MISSING_STORED;
            let at = PAGE_HEADER + self.used;
            self.page[at..at + 8].copy_from_slice(&self.lost.min(MAX_MARK).to_le_bytes());
        }
        self.page[8..16].copy_from_slice(&commit.to_le_bytes());
        out.write_all(&self.page)?;
        self.written += PAGE_SIZE as u64;
        Ok(())
    }

    fn open(&mut self, out: &mut dyn Write, ts: u64, lost: u64) -> io::Result<()> {
        self.close(out)?;
        self.page.clear();
        self.page.resize(PAGE_SIZE, 0);
        self.page[..8].copy_from_slice(&ts.to_le_bytes());
        self.open = true;
        self.used = 0;
        self.lost = lost;
        self.last_ts = ts;
        Ok(())
    }

    fn put(&mut self, bytes: &[u8]) {
        let at = PAGE_HEADER + self.used;
        self.page[at..at + bytes.len()].copy_from_slice(bytes);
        self.used += bytes.len();
    }

    /// Appends a record (ftrace layout, at most [`MAX_RECORD`] bytes) at `ts`, not
    /// before the last one's; a page it fills is written to `out`.
    fn push(
        &mut self,
        out: &mut dyn Write,
        ts: u64,
        lost_before: u64,
        record: &[u8],
    ) -> io::Result<()> {
        let len = record.len().next_multiple_of(4);
        let body = if len <= 4 * MAX_TYPE_LEN { 4 + len } else { 8 + len };
        let sparse = self.used < PAGE_DATA / 4;
        if !self.open {
            self.open(out, ts, lost_before)?;
        } else if lost_before > 0
            && sparse
            && self.early >= EXACT_LOSSES
            && self.lost.saturating_add(lost_before) <= MAX_MARK
        {
            // Room for the count: the page is less than a quarter full.
            self.lost += lost_before;
        } else if lost_before > 0 {
            self.early += u32::from(sparse);
            self.open(out, ts, lost_before)?;
        }
        let mut delta = ts - self.last_ts;
        let extend = if delta >> DELTA_BITS == 0 { 0 } else { 8 };
        let reserve = if self.lost > 0 { 8 } else { 0 };
        if self.used + extend + body + reserve > PAGE_DATA || delta >> (DELTA_BITS + 32) != 0 {
            self.open(out, ts, 0)?;
            delta = 0;
        }
        if delta >> DELTA_BITS != 0 {
            let low = (delta & ((1 << DELTA_BITS) - 1)) as u32;
            self.put(&(TIME_EXTEND | (low << 5)).to_le_bytes());
            self.put(&((delta >> DELTA_BITS) as u32).to_le_bytes());
            delta = 0;
        }
        let delta = (delta as u32) << 5;
        if len <= 4 * MAX_TYPE_LEN {
            self.put(&(delta | (len / 4) as u32).to_le_bytes());
        } else {
            self.put(&delta.to_le_bytes());
            self.put(&(len as u32 + 4).to_le_bytes());
        }
        self.put(record);
        self.put(&[0; 3][..len - record.len()]);
        self.last_ts = ts;
        Ok(())
    }
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// A size-prefixed (8 bytes) text.
fn put_sized(out: &mut Vec<u8>, text: &[u8]) {
    put_u64(out, text.len() as u64);
    out.extend_from_slice(text);
}

/// The kernel's functions in `/proc/kallsyms`' format (`ADDRESS t NAME`), which
/// trace-cmd names addresses with, and with `markers` Linux's function that writes
/// them at the address their records carry ([`format_file::MARK_WRITE_IP`]).
/// trace-cmd reads a name up to its first white space, which Rust's names have
/// (`<T as Trait>::f`, `f::<A, B>`): `, ` becomes `,` and other white space `_`.
fn kallsyms(symbols: Option<&Symbols>, markers: bool) -> String {
    let mut text = String::new();
    let marker = markers.then_some((format_file::MARK_WRITE_IP, text::MARK_WRITE));
    for (start, name) in symbols.into_iter().flat_map(Symbols::functions).chain(marker) {
        let name = name.replace(", ", ",");
        let name: String = name.chars().map(|c| if c.is_whitespace() { '_' } else { c }).collect();
        let _ = writeln!(text, "{start:016x} t {name}");
    }
    text
}

/// The name a section other than the first goes under in a trace.dat (a buffer
/// instance, as `trace-cmd record -B NAME` saves one): its instance's, with
/// `:snapshot` for the snapshot buffer (no instance name has a `:`; trace-cmd
/// prints a name from its last `/`).
pub fn buffer_name(trace: &Section) -> String {
    match trace.buffer {
        BufferKind::Live => trace.instance.clone(),
        BufferKind::Snapshot => format!("{}:snapshot", trace.instance),
    }
}

/// What trace.dat cannot show of `traces`' losses, a line for each CPU of a buffer
/// that has such: the events lost after its last record (a page's mark is shown
/// with the record after it), and losses above what a mark holds (a C `int`), which it shows
/// as that.
pub fn loss_notes(traces: &[Section]) -> Vec<String> {
    let mut notes = Vec::new();
    for trace in traces {
        let name = buffer_name(trace);
        for (cpu, lost) in trace.lost_after.iter().filter(|(_, lost)| **lost > 0) {
            notes.push(format!(
                "trace.dat has no place for the {lost} events CPU {cpu} of buffer {name} lost \
                 after its last record: trace-cmd does not show them"
            ));
        }
        let mut large: BTreeMap<usize, (u64, u64)> = BTreeMap::new();
        for ev in trace.events.iter().filter(|ev| ev.lost_before > MAX_MARK) {
            let (marks, lost) = large.entry(ev.cpu).or_default();
            *marks += 1;
            *lost = lost.saturating_add(ev.lost_before);
        }
        for (cpu, (marks, lost)) in large {
            let (losses, are) = if marks == 1 { ("loss", "is") } else { ("losses", "are each") };
            notes.push(format!(
                "trace-cmd reads at most {MAX_MARK} lost events a page: {marks} {losses} of CPU \
                 {cpu} of buffer {name}, {lost} events in all, {are} shown as that"
            ));
        }
    }
    notes
}

/// Writes each CPU's pages of a section's records to `out`, CPU after CPU, `cpus`
/// of them, and returns each CPU's bytes: each CPU's records in time order (a
/// stable sort: the dump's order among equal times), as a page's deltas only go
/// forward, their times clamped at [`MAX_TS`]. The same every time it is called:
/// a first call to [`io::sink`] sizes the data the file's CPU tables locate.
fn write_pages(
    trace: &Section,
    declared: &BTreeMap<u16, Declared<'_>>,
    cpus: usize,
    out: &mut dyn Write,
) -> io::Result<Vec<u64>> {
    let mut sizes = vec![0; cpus];
    let mut record = Vec::new();
    let texts = trace.texts();
    let mut events: Vec<&Event> = trace.events.iter().collect();
    events.sort_by_key(|ev| (ev.cpu, ev.ts.min(MAX_TS)));
    let mut pages = Pages::default();
    let mut cpu = None;
    for ev in events {
        let Some(entry) = declared.get(&ev.id) else { continue };
        if cpu != Some(ev.cpu)
            && let Some(done) = cpu.replace(ev.cpu)
        {
            pages.close(out)?;
            sizes[done] = std::mem::take(&mut pages).written;
        }
        record.clear();
        match entry.shape {
            Shape::Fields if entry.encode(ev, &mut record).is_ok() => {}
            _ => {
                let text = event_text(entry.descriptor, &texts, ev);
                let mut end = text.len().min(MAX_RECORD - 16);
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                format_file::encode_text_record(ev.id, origin(ev), &text[..end], &mut record);
            }
        }
        pages.push(out, ev.ts.min(MAX_TS), ev.lost_before, &record)?;
    }
    if let Some(done) = cpu {
        pages.close(out)?;
        sizes[done] = pages.written;
    }
    Ok(sizes)
}

/// Option kinds of the header (trace-cmd's `TRACECMD_OPTION_*`).
const OPTION_CPUSTAT: u16 = 2;
const OPTION_BUFFER: u16 = 3;
const OPTION_TRACECLOCK: u16 = 4;

/// Appends an option of `kind` holding `data`.
fn put_option(out: &mut Vec<u8>, kind: u16, data: &[u8]) {
    out.extend_from_slice(&kind.to_le_bytes());
    put_u32(out, data.len() as u32);
    out.extend_from_slice(data);
}

/// Appends the ring statistics of each CPU of `trace` that has some, as options
/// (`trace-cmd report --stat` prints them).
fn put_cpu_stats(out: &mut Vec<u8>, trace: &Section) {
    for cpu in trace.cpu_ids().into_iter().filter(|&c| c < MAX_CPUS) {
        let s = trace.cpu_stats(cpu);
        let stat = format!(
            "CPU: {cpu}\nentries: {}\noverrun: {}\ncommit overrun: {}\ndropped events: {}\n\
             read events: {}\n\0",
            s.entries, s.overrun, s.commit_overrun, s.dropped, s.read
        );
        put_option(out, OPTION_CPUSTAT, stat.as_bytes());
    }
}

/// Appends the `flyrecord` CPU table: each CPU's data, of `sizes` bytes, laid out
/// one after another from file offset `at`; returns the offset past their data.
fn put_cpu_table(out: &mut Vec<u8>, sizes: &[u64], mut at: u64) -> u64 {
    for &size in sizes {
        put_u64(out, at);
        put_u64(out, size);
        at += size;
    }
    at
}

/// Writes `traces` as a trace-cmd `trace.dat` (version 6), with the kernel's
/// functions from `symbols` as its kallsyms: the first as the file's buffer, each
/// other as a buffer instance named [`buffer_name`] (`trace-cmd report` prints
/// their records merged in time, each after its buffer's name). Nothing but the
/// first may be empty: without traces, the file holds an empty buffer.
pub fn write_tracedat(
    traces: &[Section],
    symbols: Option<&Symbols>,
    out: &mut impl Write,
) -> io::Result<()> {
    let events = traces.iter().flat_map(|t| &t.events);
    if let Some(cpu) = events.map(|e| e.cpu).find(|&cpu| cpu >= MAX_CPUS) {
        return Err(too_many_cpus(cpu));
    }
    let declared = declarations(traces);
    let cpu_ids = traces.iter().flat_map(Section::cpu_ids);
    let cpus = cpu_ids.filter(|&c| c < MAX_CPUS).max().map_or(1, |c| c + 1);
    // Each buffer's data is laid out twice: sized first, for the CPU tables before
    // it, then written (memory holds a page at a time, not the file's data).
    let sized = traces.iter().map(|t| write_pages(t, &declared, cpus, &mut io::sink()));
    let buffers: Vec<Vec<u64>> = sized.collect::<io::Result<_>>()?;

    let mut head = Vec::new();
    head.extend_from_slice(b"\x17\x08\x44tracing6\0");
    head.extend_from_slice(&[0, 8]); // little endian, 8-byte longs
    put_u32(&mut head, PAGE_SIZE as u32);
    let mut text = String::new();
    let _ = format_file::write_header_page(&mut text, PAGE_SIZE);
    head.extend_from_slice(b"header_page\0");
    put_sized(&mut head, text.as_bytes());
    text.clear();
    let _ = format_file::write_header_event(&mut text);
    head.extend_from_slice(b"header_event\0");
    put_sized(&mut head, text.as_bytes());

    let mut systems: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (&id, d) in &declared {
        systems.entry(&d.system).or_default().push(format_file(id, d));
    }
    let ftrace = systems.remove("ftrace").unwrap_or_default();
    put_u32(&mut head, ftrace.len() as u32);
    for format in &ftrace {
        put_sized(&mut head, format.as_bytes());
    }
    put_u32(&mut head, systems.len() as u32);
    for (system, formats) in &systems {
        head.extend_from_slice(system.as_bytes());
        head.push(0);
        put_u32(&mut head, formats.len() as u32);
        for format in formats {
            put_sized(&mut head, format.as_bytes());
        }
    }
    let markers =
        declared.values().any(|d| d.shape == Shape::Fields && d.linux == Some(Linux::Print));
    let kallsyms = kallsyms(symbols, markers);
    put_u32(&mut head, kallsyms.len() as u32);
    head.extend_from_slice(kallsyms.as_bytes());
    put_u32(&mut head, 0); // printk formats
    put_sized(&mut head, cmdlines(traces).as_bytes()); // saved command lines
    put_u32(&mut head, cpus as u32);

    head.extend_from_slice(b"options  \0");
    let clock = trace_clock(traces);
    put_option(&mut head, OPTION_TRACECLOCK, format!("{clock}\0").as_bytes());
    if let Some(main) = traces.first() {
        put_cpu_stats(&mut head, main);
    }
    // Each other buffer's statistics too, after a line naming it, as trace-cmd record
    // writes them: `trace-cmd report --stat` prints the file's, not its buffers'.
    for trace in traces.iter().skip(1) {
        put_option(
            &mut head,
            OPTION_CPUSTAT,
            format!("\nBuffer: {}\n\n\0", buffer_name(trace)).as_bytes(),
        );
        put_cpu_stats(&mut head, trace);
    }
    // Each other buffer's option: where its own options and CPU table are (filled
    // in below), and its name.
    let mut patches = Vec::new();
    for trace in traces.iter().skip(1) {
        let mut data = vec![0; 8];
        data.extend_from_slice(buffer_name(trace).as_bytes());
        data.push(0);
        put_option(&mut head, OPTION_BUFFER, &data);
        patches.push(head.len() - data.len());
    }
    head.extend_from_slice(&0u16.to_le_bytes());
    head.extend_from_slice(b"flyrecord\0");

    // The first buffer's CPU table and the trace clock follow; then its data,
    // page-aligned. Then each other buffer: its options (its CPUs' statistics),
    // `flyrecord` and CPU table, then its data, page-aligned.
    let table = 16 * cpus + 8 + clock.len();
    let data_start = (head.len() + table).next_multiple_of(PAGE_SIZE) as u64;
    let empty = Vec::new();
    let main = buffers.first().unwrap_or(&empty);
    let mut end = put_cpu_table(&mut head, main, data_start);
    put_sized(&mut head, clock.as_bytes());
    head.resize(data_start as usize, 0);
    let mut blocks = Vec::new();
    for ((trace, pages), patch) in traces.iter().zip(&buffers).skip(1).zip(&patches) {
        let block_start = end;
        head[*patch..*patch + 8].copy_from_slice(&block_start.to_le_bytes());
        let mut block = b"options  \0".to_vec();
        put_cpu_stats(&mut block, trace);
        block.extend_from_slice(&0u16.to_le_bytes());
        block.extend_from_slice(b"flyrecord\0");
        let start = (block_start as usize + block.len() + 16 * cpus).next_multiple_of(PAGE_SIZE);
        end = put_cpu_table(&mut block, pages, start as u64);
        block.resize(start - block_start as usize, 0);
        blocks.push(block);
    }

    let mut out = io::BufWriter::new(out);
    out.write_all(&head)?;
    let mut traces = traces.iter();
    if let Some(first) = traces.next() {
        write_pages(first, &declared, cpus, &mut out)?;
    }
    for (block, trace) in blocks.iter().zip(traces) {
        out.write_all(block)?;
        write_pages(trace, &declared, cpus, &mut out)?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample::task_event;
    use std::process::Command;
    use trace::dump::{DumpField, DumpStats};
    use trace::field::FieldKind;

    fn descriptor(
        id: u16,
        system: &str,
        name: &str,
        format: &str,
        fields: &[(&str, FieldKind)],
    ) -> DumpDescriptor {
        DumpDescriptor {
            kind: trace::event::DescriptorKind::Event,
            id,
            system: system.into(),
            name: name.into(),
            format: format.into(),
            fields: fields
                .iter()
                .map(|&(name, kind)| DumpField { name: name.into(), kind })
                .collect(),
            timeline: Default::default(),
        }
    }

    /// Every field kind, a printk-like event whose values its descriptor does not
    /// describe, an id without a descriptor, lost events, a gap needing a time
    /// extend, and enough events for several pages.
    fn trace() -> Section {
        let mut t = Section { cpus: 2, ..Section::default() };
        for d in [
            descriptor(
                1,
                "demo",
                "kinds",
                "pid={pid} comm={comm} ok={ok} c={c} len={len:x} head={head} delta={delta} at={at:#x}",
                &[
                    ("pid", FieldKind::I32),
                    ("comm", FieldKind::Str),
                    ("ok", FieldKind::Bool),
                    ("c", FieldKind::Char),
                    ("len", FieldKind::U16),
                    ("head", FieldKind::Bytes(4)),
                    ("delta", FieldKind::I64),
                    ("at", FieldKind::U64),
                ],
            ),
            DumpDescriptor {
                kind: trace::event::DescriptorKind::Printk,
                ..descriptor(2, "ftrace", "bprint", "tick {} late by {}", &[])
            },
            descriptor(3, "bench", "event", "", &[("a", FieldKind::U64), ("b", FieldKind::I8)]),
        ] {
            std::sync::Arc::make_mut(&mut t.descriptors).insert(d.id, d);
        }
        let kinds = vec![
            Value::Signed(-7),
            Value::Str("init \"x\" 100%".into()),
            Value::Bool(true),
            Value::Char('λ'),
            Value::Unsigned(1500),
            Value::Bytes(vec![0xde, 0xad, 0xbe, 0xef]),
            Value::Signed(-42),
            Value::Unsigned(0xffff_8000_0000_1000),
        ];
        t.events.push(task_event(0, 1_000, 1, kinds));
        t.events.push(task_event(1, 2_000, 2, vec![Value::Unsigned(3), Value::Unsigned(9)]));
        t.events.push(task_event(1, 3_000, 77, vec![Value::Bytes(vec![1, 2])]));
        for i in 0..600u64 {
            t.events.push(task_event(
                i as usize % 2,
                10_000 + i,
                3,
                vec![Value::Unsigned(i), Value::Signed(-1)],
            ));
        }
        // Ten seconds later: a time extend.
        let mut late = task_event(0, 10_000_010_000, 3, vec![Value::Unsigned(1), Value::Signed(2)]);
        late.lost_before = 17;
        t.events.push(late);
        t.stats = vec![DumpStats { entries: 302, ..DumpStats::default() }; 2];
        t
    }

    #[test]
    fn trace_cmd_reads_every_kind_of_field_and_record() {
        let t = trace();
        let (report, size) = trace_cmd(std::slice::from_ref(&t));
        let head: String = report.lines().take(4).collect::<Vec<_>>().join("\n");
        let lines: Vec<&str> = report.lines().skip(1).collect();
        assert_eq!(lines.len(), t.events.len() + 1, "every event and the drop:\n{report}");
        let fields = |line: &str| line.splitn(3, ": ").nth(2).unwrap_or("").trim().to_string();
        assert!(lines[0].contains("[000]     0.000001000: kinds:"), "{}", lines[0]);
        assert_eq!(fields(lines[0]), t.texts().text(&t.events[0]), "{head}");
        assert!(lines[1].contains("[001]     0.000002000: printk:"), "{}", lines[1]);
        assert_eq!(fields(lines[1]), "tick 3 late by 9");
        assert!(lines[2].contains("id_77:"), "{}", lines[2]);
        assert_eq!(fields(lines[2]), "01 02");
        assert_eq!(fields(lines[3]), "a=0 b=-1");
        assert_eq!(fields(lines[602]), "a=599 b=-1");
        assert_eq!(lines[603], "CPU:0 [17 EVENTS DROPPED]");
        assert!(lines[604].contains("[000]    10.000010000: event:"), "{}", lines[604]);
        assert_eq!(fields(lines[604]), "a=1 b=2");
        // Two CPUs of 300-odd 20-byte records: more than one page each.
        assert!(size >= 5 * PAGE_SIZE, "{size}");
    }

    /// A loss before every record: the first [`EXACT_LOSSES`] each open a page, the
    /// rest join the open page's mark, so the file stays a few pages; trace-cmd
    /// reports every record and every lost event.
    #[test]
    fn a_loss_before_every_record_does_not_take_a_page_each() {
        let mut t = trace();
        t.events.retain(|e| e.id == 3);
        for e in &mut t.events {
            e.cpu = 0;
            e.lost_before = 2;
        }
        let records = t.events.len();
        let (report, size) = trace_cmd(std::slice::from_ref(&t));
        let dropped: u64 = report
            .lines()
            .filter_map(|l| l.strip_prefix("CPU:0 [")?.strip_suffix(" EVENTS DROPPED]"))
            .map(|n| n.parse::<u64>().unwrap())
            .sum();
        assert_eq!(dropped, 2 * records as u64, "{report}");
        let shown = report.lines().filter(|l| l.contains(": event:")).count();
        assert_eq!(shown, records, "{report}");
        // 601 records of 24 bytes: 64 exact pages, then about one per quarter page
        // (a page each would be 601 pages).
        assert!(size < 100 * PAGE_SIZE, "{size} bytes for {records} records");
    }

    /// Writes `traces` as trace.dat and runs `trace-cmd report -t` on it: what it
    /// prints, and the file's size; fails on any complaint.
    fn trace_cmd(traces: &[Section]) -> (String, usize) {
        let path = std::env::temp_dir().join(format!(
            "boot-tracedat-unit-{}-{:?}.dat",
            std::process::id(),
            std::thread::current().id()
        ));
        let mut file = std::fs::File::create(&path).unwrap();
        write_tracedat(traces, None, &mut file).unwrap();
        drop(file);
        let out = Command::new("trace-cmd")
            .args(["report", "-t"])
            .arg(&path)
            .output()
            .expect("trace-cmd runs (boot/setup.sh installs it)");
        let size = std::fs::metadata(&path).unwrap().len() as usize;
        let _ = std::fs::remove_file(&path);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let report = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success() && stderr.trim().is_empty(),
            "{}: {stderr}{report}",
            out.status
        );
        (report, size)
    }

    /// [`trace_cmd`]'s lines after the CPU count's.
    fn report(traces: &[Section]) -> Vec<String> {
        trace_cmd(traces).0.lines().skip(1).map(String::from).collect()
    }

    /// Events that would be written under one name (their names are the same as C
    /// names, or one takes a name trace.dat gives another) each get their own: the
    /// one whose name is already its C name keeps it, the others take `_2`, `_3`.
    #[test]
    fn events_written_under_one_name_get_names_of_their_own() {
        let mut t = Section { cpus: 1, ..Section::default() };
        let a = |id, system, name| descriptor(id, system, name, "a={a}", &[("a", FieldKind::U8)]);
        for d in [
            a(1, "demo", "a-b"),
            a(2, "demo", "a_b"),
            a(3, "demo", "a.b"),
            a(4, "ftrace", "bprint"),
            a(5, "ftrace", "printk"),
            a(6, "unknown", "id_7"),
            a(8, "other", "a_b"),
        ] {
            std::sync::Arc::make_mut(&mut t.descriptors).insert(d.id, d);
        }
        for id in [1, 2, 3, 4, 5, 6, 7, 8] {
            let values = vec![Value::Unsigned(u64::from(id))];
            t.events.push(task_event(0, u64::from(id) * 1000, id, values));
        }
        let names: Vec<String> = report(&[t])
            .iter()
            .map(|line| line.split(": ").nth(1).unwrap_or_default().to_string())
            .collect();
        let expected = ["a_b_2", "a_b", "a_b_3", "printk_2", "printk", "id_7", "id_7_2", "a_b"]
            .map(String::from);
        assert_eq!(names, expected);
    }

    /// An event of a name trace-cmd prints its own way, without a field it reads
    /// there, is written under its name and `_`, and trace-cmd prints it by its own
    /// format (it printed `<CANT FIND FIELD prev_pid>!x=5`); one with them, or of a
    /// name whose fields trace-cmd does without (kmem's `call_site`), keeps its name.
    #[test]
    fn events_trace_cmd_claims_without_their_fields_are_renamed() {
        let mut t = Section { cpus: 1, ..Section::default() };
        let cases: [(&str, &str, &[&str], &str); 6] = [
            ("kmem", "kmalloc", &["ptr", "size"], "kmalloc"),
            ("sched", "sched_switch", &["prev", "next"], "sched_switch_"),
            ("ftrace", "function", &["x"], "function_"),
            ("timer", "hrtimer_start", &["x"], "hrtimer_start_"),
            ("ftrace", "funcgraph_entry", &["func", "depth"], "funcgraph_entry"),
            ("ftrace", "funcgraph_exit", &["func"], "funcgraph_exit_"),
        ];
        let text = |names: &[&str]| names.iter().map(|f| format!("{f}=5")).collect::<Vec<_>>();
        for (id, &(system, name, names, _)) in (1..).zip(&cases) {
            let format = names.iter().map(|f| format!("{f}={{{f}}}")).collect::<Vec<_>>();
            let fields: Vec<_> = names.iter().map(|&f| (f, FieldKind::U64)).collect();
            let d = descriptor(id, system, name, &format.join(" "), &fields);
            std::sync::Arc::make_mut(&mut t.descriptors).insert(id, d);
            let values = vec![Value::Unsigned(5); names.len()];
            t.events.push(task_event(0, u64::from(id) * 1000, id, values));
        }
        let lines = report(&[t]);
        for (line, &(_, _, names, written)) in lines.iter().zip(&cases) {
            let (name, shown) = line.split_once(": ").unwrap().1.split_once(": ").unwrap();
            assert_eq!((name, shown.trim()), (written, text(names).join(" ").as_str()));
        }
        assert_eq!(lines.len(), cases.len());
    }

    /// A format that ends in a backslash: libtraceevent reads `\\"` as an escaped
    /// quote (trace-cmd printed each record of such an event `[FAILED TO PARSE]`),
    /// so that last backslash is written as `\u{5c}`; one inside stays as it is.
    #[test]
    fn a_format_ending_in_a_backslash_still_parses() {
        let mut t = Section { cpus: 1, ..Section::default() };
        // Each format, whether it has the field `x`, and what trace-cmd prints.
        let cases = [
            ("x={x} \\", true, "x=7 \\u{5c}"),
            ("a\\b {x}", true, "a\\b 7"),
            ("\\", false, "\\u{5c}"),
        ];
        for (id, &(format, x, _)) in (1..).zip(&cases) {
            let fields = if x { &[("x", FieldKind::U8)][..] } else { &[] };
            let d = descriptor(id, "demo", &format!("e{id}"), format, fields);
            std::sync::Arc::make_mut(&mut t.descriptors).insert(id, d);
            let values = vec![Value::Unsigned(7); fields.len()];
            t.events.push(task_event(0, u64::from(id) * 1000, id, values));
        }
        let lines = report(&[t]);
        let shown: Vec<&str> =
            lines.iter().map(|l| l.splitn(3, ": ").nth(2).unwrap_or_default().trim()).collect();
        assert_eq!(shown, cases.map(|c| c.2));
    }

    /// A raw marker leaves in Linux's layout, its id then its bytes (and the
    /// record's padding, as Linux's), which trace-cmd prints its own way (it printed
    /// our layout's string offset and text as the data); one without an id goes
    /// under another name (trace-cmd printed `<CANT FIND FIELD id>`).
    #[test]
    fn raw_markers_leave_in_linux_layout() {
        let mut t = Section { cpus: 1, ..Section::default() };
        let raw = [("id", FieldKind::U32), ("buf", FieldKind::Str)];
        for (id, fields) in [(1, &raw[..]), (2, &raw[1..])] {
            let d = descriptor(id, "ftrace", "raw_data", "# {id:x} buf:{buf}", fields);
            std::sync::Arc::make_mut(&mut t.descriptors).insert(id, d);
        }
        let marker = |id, values| task_event(0, u64::from(id) * 1000, id, values);
        let data = || Value::Str(" 41 42 43".into());
        t.events.push(marker(1, vec![Value::Unsigned(0x1234), data()]));
        t.events.push(marker(2, vec![data()]));
        let lines = report(&[t]);
        let shown: Vec<&str> = lines.iter().map(|l| l.split_once(": ").unwrap().1).collect();
        let shown: Vec<String> =
            shown.iter().map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ")).collect();
        assert_eq!(
            shown,
            ["raw_data: # 1234 41 42 43 00", "raw_data_: buf= 41 42 43"],
            "{lines:?}"
        );
    }

    /// A loss above what trace-cmd reads (a C `int`) is marked as the most it
    /// reads, not cut to its low bits (2^33 + 4 showed as 4), and said so; so are
    /// losses after a CPU's last record, which trace.dat has no place for.
    #[test]
    fn losses_trace_dat_cannot_show_are_noted() {
        let mut t = Section { cpus: 2, instance: "top".into(), ..Section::default() };
        let d = descriptor(1, "demo", "e", "a={a}", &[("a", FieldKind::U8)]);
        std::sync::Arc::make_mut(&mut t.descriptors).insert(1, d);
        let mut huge = task_event(0, 1000, 1, vec![Value::Unsigned(1)]);
        huge.lost_before = (1 << 33) + 4;
        t.events.push(huge);
        t.lost_after.insert(1, 5);
        let lines = report(std::slice::from_ref(&t));
        assert_eq!(lines[0], "CPU:0 [2147483647 EVENTS DROPPED]", "{lines:?}");
        let notes = loss_notes(&[t]);
        assert_eq!(
            notes,
            [
                "trace.dat has no place for the 5 events CPU 1 of buffer top lost after its \
                 last record: trace-cmd does not show them",
                "trace-cmd reads at most 2147483647 lost events a page: 1 loss of CPU 0 of \
                 buffer top, 8589934596 events in all, is shown as that"
            ]
        );
    }

    /// A buffer on another clock than the first's is named, with both clocks.
    #[test]
    fn buffers_on_another_clock_are_noted() {
        let top = Section { instance: "top".into(), ..trace() };
        let other = Section { instance: "net".into(), clock: Clock::X86Tsc, ..trace() };
        assert_eq!(clock_notes(&[top.clone(), top.clone()]), Vec::<String>::new());
        assert_eq!(
            clock_notes(&[top, other]),
            ["trace.dat has one clock, local (buffer top's): buffer net's times are x86-tsc's, \
              shown as local's"]
        );
    }

    #[test]
    fn absurd_cpus_are_refused_with_the_limit() {
        let mut t = trace();
        t.events[0].cpu = MAX_CPUS;
        let error = write_tracedat(&[t], None, &mut Vec::new()).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("an event names CPU {MAX_CPUS}; trace.dat takes CPUs below {MAX_CPUS}")
        );
    }
}
