//! Code addresses as `function+0xoffset`, from the symbol table of the kernel ELF
//! (`report --elf`), and the `ftrace:kernel_stack` and function tracer events of a
//! [`Section`] rewritten with them.
//!
//! The kernel records stack frames as addresses in its ELF (it subtracts the load
//! offset the bootloader chose), so they are looked up as they are. A frame is a
//! return address: the instruction after a call, which may be the first byte past
//! the calling function when the call was its last instruction. A frame is therefore
//! looked up one byte earlier and printed with its offset from the function's start,
//! as Linux prints stack traces (`%pB`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use trace::symtab::SymbolTable;

use trace::dump::{Section, Value};
use trace::event::DescriptorKind;
use trace::field::FieldKind;

/// Largest ELF file read (the kernel's is a few MiB): a bound on what a wrong path
/// can make the report allocate.
pub const MAX_ELF_BYTES: u64 = 1 << 30;

/// The functions of an ELF, for looking addresses up: the table the kernel embeds
/// ([`trace::symtab`]), built from the ELF the report is given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Symbols {
    /// A [`trace::symtab`] table (empty: no functions).
    table: Vec<u8>,
}

impl Symbols {
    /// Reads the ELF at `path` (at most [`MAX_ELF_BYTES`]); the error names the file
    /// and what is wrong with it.
    pub fn read(path: &Path) -> Result<Symbols, String> {
        let name = path.display();
        let too_big = || format!("{name}: an ELF of more than {MAX_ELF_BYTES} bytes is refused");
        let file = std::fs::File::open(path).map_err(|e| format!("{name}: {e}"))?;
        let size = file.metadata().map_err(|e| format!("{name}: {e}"))?.len();
        if size > MAX_ELF_BYTES {
            return Err(too_big());
        }
        // Only an ELF is read whole.
        let mut data = Vec::new();
        let mut file = file.take(MAX_ELF_BYTES + 1);
        (&mut file).take(4).read_to_end(&mut data).map_err(|e| format!("{name}: {e}"))?;
        crate::elf::check_magic(&data).map_err(|e| format!("{name}: {e}"))?;
        file.read_to_end(&mut data).map_err(|e| format!("{name}: {e}"))?;
        if data.len() as u64 > MAX_ELF_BYTES {
            return Err(too_big());
        }
        Symbols::parse(&data).map_err(|e| format!("{name}: {e}"))
    }

    /// The functions of an ELF64 image (see [`crate::elf::symbol_table`]).
    pub fn parse(data: &[u8]) -> Result<Symbols, String> {
        Ok(Symbols { table: crate::elf::symbol_table(data)? })
    }

    /// The table (none without functions).
    pub fn table(&self) -> Option<SymbolTable<'_>> {
        SymbolTable::parse(&self.table).ok()
    }

    /// The table's [`SymbolTable::fingerprint`]: what a kernel built from this ELF
    /// writes in its dumps' headers.
    pub fn fingerprint(&self) -> u64 {
        self.table().map_or(0, |t| t.fingerprint())
    }

    /// Refuses to name the addresses of a dump that another kernel wrote: one whose
    /// header carries a fingerprint ([`SymbolTable::fingerprint`]) other than this
    /// table's. Its addresses would be named after the wrong functions. A dump
    /// without one (its kernel had no symbol table, or the dump is older than the
    /// fingerprint) is taken as it is.
    pub fn check(&self, written_by: Option<u64>) -> Result<(), String> {
        let ours = self.fingerprint();
        match written_by {
            Some(theirs) if theirs != ours => Err(format!(
                "the ELF is not the kernel that wrote this dump: its functions' fingerprint is \
                 {ours:#018x}, the dump's kernel's {theirs:#018x} (a rebuilt kernel moves its \
                 functions; give the ELF of the kernel that ran, or leave out --elf to see \
                 addresses)"
            )),
            _ => Ok(()),
        }
    }

    /// The function holding `addr` and the offset of `addr` in it.
    pub fn lookup(&self, addr: u64) -> Option<(&str, u64)> {
        self.table()?.lookup(addr)
    }

    /// The functions: start address and name (damaged names left out).
    pub fn functions(&self) -> Vec<(u64, &str)> {
        let table = self.table();
        table
            .iter()
            .flat_map(|t| t.functions())
            .filter_map(|(start, _, name)| Some((start, name?)))
            .collect()
    }

    /// A return address as `function+0xoffset` (looked up one byte earlier, see the
    /// module documentation), or as `0x...` when no function holds it.
    pub fn frame(&self, ret: u64) -> String {
        let mut frame = String::new();
        let _ = match self.table() {
            Some(table) => table.write_frame(&mut frame, ret),
            None => write!(frame, "{ret:#x}"),
        };
        frame
    }

    /// Rewrites the function tracer's events (`ftrace:function`,
    /// `ftrace:funcgraph_entry`, `ftrace:funcgraph_exit`) of `trace` with symbols:
    /// their address fields become function names (a caller's looked up one byte
    /// earlier), and their text reads as the kernel's `trace` file shows them
    /// (`function <-caller`).
    fn symbolize_functions(&self, table: &SymbolTable<'_>, trace: &mut Section) {
        use trace::tracer::{FUNCGRAPH_ENTRY, FUNCGRAPH_EXIT, FUNCTION};
        let ours = [&FUNCTION, &FUNCGRAPH_ENTRY, &FUNCGRAPH_EXIT];
        let ids: Vec<(u16, bool)> = trace
            .descriptors
            .values()
            .filter(|d| ours.iter().any(|o| o.system == d.system && o.name == d.name))
            .map(|d| (d.id, d.name == FUNCTION.name))
            .collect();
        for &(id, function) in &ids {
            let Some(d) = Arc::make_mut(&mut trace.descriptors).get_mut(&id) else { continue };
            for f in d
                .fields
                .iter_mut()
                .filter(|f| matches!(f.name.as_str(), "ip" | "parent_ip" | "func"))
            {
                f.kind = FieldKind::Str;
                d.format =
                    d.format.replace(&format!("{{{}:#x}}", f.name), &format!("{{{}}}", f.name));
            }
            // Its two names, whatever its fields are called.
            if function {
                d.format = "{} <-{}".into();
            }
        }
        let name = |addr: u64| table.lookup(addr).map_or(format!("{addr:#x}"), |(n, _)| n.into());
        for ev in trace.events.iter_mut() {
            let Some(&(_, function)) = ids.iter().find(|(id, _)| *id == ev.id) else { continue };
            let mut addrs = ev.values.iter().map(|v| match v {
                Value::Unsigned(a) => *a,
                _ => 0,
            });
            let (first, second) = (addrs.next().unwrap_or(0), addrs.next().unwrap_or(0));
            if function {
                ev.values =
                    vec![Value::Str(name(first)), Value::Str(name(second.saturating_sub(1)))];
            } else if let Some(v) = ev.values.first_mut() {
                *v = Value::Str(name(first));
            }
        }
    }

    /// Rewrites the code addresses of `trace` (the fields an event's format prints
    /// with `:sym`, as `ftrace:irqsoff` does `start` and `end`, and the arguments a
    /// printk call site's format prints so) with symbols: each becomes a string,
    /// `function+0xoffset`, and the text reads as the kernel's `trace` file shows it.
    fn symbolize_addresses(&self, table: &SymbolTable<'_>, trace: &mut Section) {
        // Per event (printk call sites aside: their arguments carry their own types):
        // the fields its format prints with `:sym`, which become strings.
        let mut events: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
        for d in Arc::make_mut(&mut trace.descriptors)
            .values_mut()
            .filter(|d| d.kind != DescriptorKind::Printk)
        {
            let found = trace::event::format::address_fields(&d.format, &d.fields());
            for &i in &found {
                if let Some(field) = d.fields.get_mut(i) {
                    field.kind = FieldKind::Str;
                }
            }
            if !found.is_empty() {
                events.insert(d.id, found);
            }
        }
        for ev in &mut trace.events {
            let Some(d) = trace.descriptors.get(&ev.id) else { continue };
            let printk = d.kind == DescriptorKind::Printk;
            let arguments;
            let found = if printk {
                arguments =
                    trace::event::format::address_fields(&d.format, &argument_fields(&ev.values));
                &arguments
            } else {
                match events.get(&ev.id) {
                    Some(found) => found,
                    None => continue,
                }
            };
            if found.is_empty() {
                continue;
            }
            for &i in found {
                let Some(value) = ev.values.get_mut(i) else { continue };
                if let Value::Unsigned(addr) = *value {
                    let mut place = String::new();
                    let _ = table.write_address(&mut place, addr);
                    *value = Value::Str(place);
                }
            }
        }
    }

    /// Rewrites the `ftrace:kernel_stack` and the function tracer's events of
    /// `trace` with symbols: a stack's `ipN` fields become strings
    /// (`function+0xoffset`, empty past `depth`), and its text lists the frames as
    /// ftrace does, one ` => frame` line each ([`trace::dump::Texts`]). Without a
    /// table (an ELF without functions) the section is left as it is.
    pub fn symbolize(&self, trace: &mut Section) {
        let Some(table) = self.table() else { return };
        self.symbolize_functions(&table, trace);
        self.symbolize_addresses(&table, trace);
        let stack = &trace::tracer::STACK_TRACE;
        let ids = trace.ids_of(stack.system, stack.name);
        for id in &ids {
            let Some(d) = Arc::make_mut(&mut trace.descriptors).get_mut(id) else { continue };
            let mut format = String::from("depth={depth}");
            for f in d.fields.iter_mut().filter(|f| f.name != "depth") {
                f.kind = FieldKind::Str;
                format.push_str(&format!(" {{{}}}", f.name));
            }
            d.format = format;
        }
        for ev in trace.events.iter_mut().filter(|e| ids.contains(&e.id)) {
            let depth = match ev.values.first() {
                Some(Value::Unsigned(d)) => usize::try_from(*d).unwrap_or(usize::MAX),
                _ => 0,
            };
            for (i, v) in ev.values.iter_mut().skip(1).enumerate() {
                let mut frame = String::new();
                if i < depth {
                    let ip = match v {
                        Value::Unsigned(ip) => *ip,
                        _ => 0,
                    };
                    let _ = table.write_frame(&mut frame, ip);
                }
                *v = Value::Str(frame);
            }
        }
    }
}

/// A printk call site's arguments as the format renderer takes its fields: unnamed,
/// each of its value's kind, in the order the format's placeholders take them.
fn argument_fields(values: &[Value]) -> Vec<trace::field::Field<'static>> {
    values.iter().map(|v| trace::field::Field { name: "", kind: kind_of(v) }).collect()
}

/// The kind of field a decoded value fits: a printk argument's, which carries its
/// own type.
fn kind_of(value: &Value) -> FieldKind {
    match value {
        Value::Unsigned(_) => FieldKind::U64,
        Value::Signed(_) => FieldKind::I64,
        Value::Bool(_) => FieldKind::Bool,
        Value::Char(_) => FieldKind::Char,
        Value::Bytes(bytes) => FieldKind::Bytes(u16::try_from(bytes.len()).unwrap_or(u16::MAX)),
        Value::Str(_) => FieldKind::Str,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace::dump::DumpField;

    #[test]
    fn frames_are_looked_up_in_the_table() {
        let s = Symbols { table: trace::symtab::encode([(0x100, 0x120, "a")]) };
        assert_eq!(s.lookup(0x11f), Some(("a", 0x1f)));
        assert_eq!(s.lookup(0x120), None);
        // A return address one past a function's last byte still names it.
        assert_eq!(s.frame(0x120), "a+0x20");
        // Where an interrupt struck a function's first instruction.
        assert_eq!(s.frame(0x100), "a+0x0");
        assert_eq!(s.frame(0x121), "0x121");
        assert_eq!(Symbols::default().frame(0x200), "0x200");
        assert_eq!(Symbols::default().lookup(0x100), None);
    }

    #[test]
    fn sym_fields_and_printk_arguments_are_named() {
        use trace::Context;
        use trace::dump::{DumpDescriptor, Event};
        use trace::event::Timeline;
        let s = Symbols { table: trace::symtab::encode([(0x100, 0x120, "a")]) };
        let descriptor = |id, kind, format: &str, fields: Vec<DumpField>| DumpDescriptor {
            id,
            kind,
            system: "s".into(),
            name: format!("e{id}"),
            format: format.into(),
            fields,
            timeline: Timeline::Instant,
        };
        let field = |name: &str, kind| DumpField { name: name.into(), kind };
        let event = |id, values: Vec<Value>| Event {
            cpu: 0,
            ts: 1,
            id,
            context: Context::TASK,
            values,
            lost_before: 0,
            error: trace::field::DecodeError::Truncated,
        };
        let mut section = Section::default();
        let fields = vec![field("n", FieldKind::U64), field("ip", FieldKind::U64)];
        let d = descriptor(1, DescriptorKind::Event, "n={n} at {ip:sym}", fields);
        Arc::make_mut(&mut section.descriptors).insert(1, d);
        let d = descriptor(2, DescriptorKind::Printk, "{} at {:sym} {:#x}", Vec::new());
        Arc::make_mut(&mut section.descriptors).insert(2, d);
        section.events = vec![
            event(1, vec![Value::Unsigned(0x104), Value::Unsigned(0x104)]),
            event(1, vec![Value::Unsigned(1), Value::Unsigned(0x200)]),
            event(2, vec![Value::Signed(-1), Value::Unsigned(0x11f), Value::Unsigned(0x104)]),
        ];
        s.symbolize(&mut section);
        let texts: Vec<String> = section.events.iter().map(|e| section.texts().text(e)).collect();
        assert_eq!(texts, ["n=260 at a+0x4", "n=1 at 0x200", "-1 at a+0x1f 0x104"]);
        assert_eq!(section.events[0].values[1], Value::Str("a+0x4".into()));
        assert_eq!(section.descriptors[&1].fields[1].kind, FieldKind::Str);
        assert_eq!(section.events[2].values[2], Value::Unsigned(0x104), "not a code address");
    }

    #[test]
    fn bad_files_are_refused_with_the_reason() {
        let no = |data: &[u8]| Symbols::parse(data).unwrap_err();
        assert!(no(b"").contains("not an ELF file"));
        assert!(no(b"#!/bin/sh\n").contains("not an ELF file"));
        assert!(no(b"\x7fELF\x01\x01\x01").contains("not a 64-bit ELF"));
        assert!(no(b"\x7fELF\x02\x01\x01").contains("truncated: 7 bytes"));
    }
}
