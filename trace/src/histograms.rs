//! Histograms over a dump's events, on the host (`report --hist`): the kernel's
//! `hist` trigger lines, filters, variables and actions included, run over a
//! section's decoded records in the dump's order (time order), each record's time
//! as `common_timestamp`, the time it was recorded, as Linux's histograms take it.
//! So a crash dump answers "how long did each interrupt handler take" after the
//! fact. It sits above [`crate::tracer`] (the histograms) and [`crate::dump`] (the
//! records).

use crate::dump::{Decoded, Section};
use crate::event::format_file::Origin;
use crate::field::Field;
use crate::symtab::SymbolTable;
use crate::tracer::hist::{Hist, HistHost, HistReason};
use crate::tracer::{Trigger, TriggerCommand, TriggerError};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// A section's histograms: one per spec, each on the event its spec names.
pub struct Histograms {
    hists: Vec<(u16, Trigger)>,
}

impl Histograms {
    /// Parses `specs`, each `EVENT:hist:ATTRIBUTES[ if FILTER]` (EVENT is
    /// `SYSTEM/EVENT` or `EVENT`; the rest a line the kernel's `trigger` file takes),
    /// against `section`'s events, and binds each `$NAME` to the one other spec that
    /// defines it. `.function` filters and `.sym` keys use `symbols`. An error names
    /// the spec and the rule, at a position in the spec. Nothing is taken from the
    /// kernel's own histograms: only the dump's records are counted.
    pub fn new(
        section: &Section,
        specs: &[String],
        symbols: Option<&SymbolTable<'_>>,
    ) -> Result<Histograms, String> {
        let mut hists: Vec<(u16, Trigger)> = Vec::new();
        for spec in specs {
            let refused = |rule: &str| format!("--hist '{spec}': {rule}");
            let (event, line) = spec
                .split_once(':')
                .ok_or_else(|| refused("a histogram is EVENT:hist:ATTRIBUTES[ if FILTER]"))?;
            let (system, name) = event.split_once('/').map_or((None, event), |(s, n)| (Some(s), n));
            let named = |d: &&crate::dump::DumpDescriptor| {
                d.name == name && system.is_none_or(|s| s == d.system)
            };
            let descriptor = section.descriptors.values().find(named);
            let descriptor = descriptor
                .ok_or_else(|| refused(&format!("no event of the dump is named {event}")))?;
            let fields: Vec<Field<'_>> =
                descriptor.fields.iter().map(|f| Field { name: &f.name, kind: f.kind }).collect();
            let at = |pos: usize| event.len() + 1 + pos;
            let error = |e: TriggerError| {
                refused(&format!("{}", TriggerError { pos: at(e.pos), reason: e.reason }))
            };
            let command = Trigger::parse(line, &fields, |_, _| None, symbols).map_err(error)?;
            let mut trigger = match command {
                TriggerCommand::Add(trigger) if trigger.hist().is_some() => trigger,
                _ => {
                    return Err(refused(
                        "takes one histogram: hist:keys=... (no !, :pause, :cont, :clear)",
                    ));
                }
            };
            let hist = trigger.hist().map(|h| (h.keys_stack(), h.takes_snapshots()));
            if hist.is_some_and(|(stack, snapshot)| stack || snapshot) {
                return Err(refused("a dump has no stacks to key on and no snapshot to take"));
            }
            trigger.allocate().map_err(|reason| error(TriggerError { pos: 0, reason }))?;
            hists.push((descriptor.id, trigger));
        }
        // Each reference to another spec's variable, bound to the one defining it.
        for i in 0..hists.len() {
            let unbound = hists[i].1.hist().map(|h| h.unbound_vars()).unwrap_or_default();
            for (name, pos) in unbound {
                let refused = |rule: String| format!("--hist '{}': {rule}", specs[i]);
                let at = specs[i].find(':').map_or(pos, |event| event + 1 + pos);
                let others = hists.iter().enumerate().filter(|&(j, _)| j != i);
                let others = others.filter_map(|(j, (_, t))| Some((j, t.hist()?)));
                let (j, _) = Hist::definer(others, &name).map_err(|reason| {
                    let rule = match reason {
                        HistReason::AmbiguousVariable => "more than one spec",
                        _ => "no other spec",
                    };
                    refused(format!("at {at}: {rule} defines ${name}"))
                })?;
                let (first, second) = hists.split_at_mut(i.max(j));
                let (reader, definer) = if i < j {
                    (&mut first[i].1, &second[0].1)
                } else {
                    (&mut second[0].1, &first[j].1)
                };
                let definer =
                    definer.hist().ok_or_else(|| refused(String::from("no histogram")))?;
                reader
                    .bind_var(&name, at, definer)
                    .map_err(|(at, reason)| refused(format!("at {at}: {reason}")))?;
            }
        }
        Ok(Histograms { hists })
    }

    /// Adds `section`'s events to the histograms of their event, in order.
    pub fn add(&self, section: &Section) {
        for event in &section.events {
            let origin = Origin { context: event.context, cpu: event.cpu };
            let fields = Decoded(&event.values);
            for (_, trigger) in self.hists.iter().filter(|(id, _)| *id == event.id) {
                trigger.fire_fields(&fields, origin, &RecordedAt(event.ts));
            }
        }
    }

    /// Writes each histogram as the kernel's `hist` file shows it (`.sym` keys
    /// named from `symbols`), a blank line between two.
    pub fn write(
        &self,
        symbols: Option<&SymbolTable<'_>>,
        out: &mut dyn fmt::Write,
    ) -> fmt::Result {
        for (n, (_, trigger)) in self.hists.iter().enumerate() {
            if n > 0 {
                out.write_str("\n\n")?;
            }
            if let Some(hist) = trigger.hist() {
                hist.write(trigger, symbols, out)?;
            }
        }
        Ok(())
    }
}

/// What a histogram asks of a dump's record: its time; no stack, no snapshot.
struct RecordedAt(u64);

impl HistHost for RecordedAt {
    fn stack_frames(&self, frames: &mut [u64]) {
        frames.fill(0);
    }

    fn now(&self) -> u64 {
        self.0
    }

    fn snapshot(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Context;
    use crate::dump::{DumpDescriptor, DumpField, Event, Value};
    use crate::event::{DescriptorKind, Timeline};
    use crate::field::FieldKind;
    use alloc::string::ToString;
    use alloc::vec;

    /// Entries (id 1) and exits (id 2) of interrupt vectors 48 and 49 on two CPUs.
    fn section() -> Section {
        let mut section = Section::default();
        for (id, name) in [(1, "entry"), (2, "exit")] {
            let fields = vec![DumpField { name: "vector".into(), kind: FieldKind::U8 }];
            let (system, name, format) = ("irq".into(), name.into(), "vector=%u".into());
            let (kind, timeline) = (DescriptorKind::Event, Timeline::Instant);
            let d = DumpDescriptor { id, kind, system, name, format, fields, timeline };
            alloc::sync::Arc::make_mut(&mut section.descriptors).insert(id, d);
        }
        let event = |cpu, ts, id, vector| Event {
            cpu,
            ts,
            id,
            context: Context::TASK,
            values: vec![Value::Unsigned(vector)],
            lost_before: 0,
            error: crate::field::DecodeError::Truncated,
        };
        section.events = vec![
            event(0, 1000, 1, 48),
            event(0, 1500, 1, 49),
            event(0, 1700, 2, 49),
            event(0, 3000, 2, 48),
            // An exit whose entry is not in the dump: not counted.
            event(0, 3500, 2, 48),
            event(1, 4000, 1, 48),
            event(1, 4100, 2, 48),
        ];
        section
    }

    fn text(specs: &[&str]) -> Result<String, String> {
        let section = section();
        let specs: Vec<String> = specs.iter().map(|s| s.to_string()).collect();
        let hists = Histograms::new(&section, &specs, None)?;
        hists.add(&section);
        let mut out = String::new();
        hists.write(None, &mut out).unwrap();
        Ok(out)
    }

    /// (Each table the smallest, `size=128`: Miri interprets each slot's creation.)
    #[test]
    fn a_dumps_records_time_each_pair_of_events() {
        let out = text(&[
            "irq/entry:hist:keys=vector,CPU:t0=common_timestamp:size=128",
            "exit:hist:keys=vector,CPU:vals=$lat:lat=common_timestamp-$t0:sort=vector,CPU:\
             onmax($lat).save(CPU):size=128 if vector < 200",
        ])
        .unwrap();
        let exits = out.split("\n\n\n").nth(1).unwrap_or_else(|| panic!("{out}"));
        for row in [
            "{ vector:         48, common_cpu:          0 } hitcount:          1  lat:       2000\n\
             \tmax:       2000  CPU:          0\n",
            "{ vector:         48, common_cpu:          1 } hitcount:          1  lat:        100\n",
            "{ vector:         49, common_cpu:          0 } hitcount:          1  lat:        200\n",
        ] {
            assert!(exits.contains(row), "{row}\n{exits}");
        }
        assert!(exits.contains("Hits: 3\n    Entries: 3\n"), "{exits}");
        assert!(
            out.contains("{ vector:         48, common_cpu:          0 } hitcount:          1\n")
        );
    }

    #[test]
    fn a_bad_spec_is_refused_with_the_rule_at_its_place() {
        for (spec, error) in [
            ("nope:hist:keys=vector", "no event of the dump is named nope"),
            ("exit", "a histogram is EVENT:hist:ATTRIBUTES[ if FILTER]"),
            ("exit:traceoff", "takes one histogram"),
            ("exit:hist:keys=common_stacktrace", "no stacks to key on"),
            ("exit:hist:keys=vector:onmax($x).snapshot():x=vector", "no snapshot to take"),
            ("exit:hist:keys=vectr", "parse error at 15: no such field"),
            (
                "exit:hist:keys=vector:l=common_timestamp-$t9:size=128",
                "at 41: no other spec defines $t9",
            ),
        ] {
            let refused = text(&[spec]).unwrap_err();
            assert!(refused.starts_with(&format!("--hist '{spec}': ")), "{refused}");
            assert!(refused.contains(error), "{spec}: {refused}");
        }
        // The smallest tables: Miri interprets each slot's creation.
        let keyed =
            ["entry:hist:keys=CPU:t=vector:size=128", "exit:hist:keys=vector,CPU:x=$t:size=128"];
        let keyed = text(&keyed);
        assert!(keyed.unwrap_err().contains("the variable's histogram has other keys"));
        // Time in µs less time in ns: at the line's start, when the reference binds.
        let units = [
            "entry:hist:keys=vector:t=common_timestamp:size=128",
            "exit:hist:keys=vector:x=common_timestamp.usecs-$t:size=128",
        ];
        let units = text(&units).unwrap_err();
        assert!(units.contains("at 0: an operator's operands count time in different units"));
    }

    /// A dump's string in a key cannot forge a line of the report: its control
    /// characters print as `\u{..}`.
    #[test]
    fn a_string_keys_control_characters_are_escaped() {
        let mut section = section();
        let fields = vec![DumpField { name: "who".into(), kind: FieldKind::Str }];
        let (system, name, format) = ("x".into(), "named".into(), "who=%s".into());
        let (kind, timeline) = (DescriptorKind::Event, Timeline::Instant);
        let d = DumpDescriptor { id: 3, kind, system, name, format, fields, timeline };
        alloc::sync::Arc::make_mut(&mut section.descriptors).insert(3, d);
        section.events.push(Event {
            cpu: 0,
            ts: 5000,
            id: 3,
            context: Context::TASK,
            values: vec![Value::Str("a\n{ who: x } hitcount: 9\x1b[2J".into())],
            lost_before: 0,
            error: crate::field::DecodeError::Truncated,
        });
        let specs = ["named:hist:keys=who:size=128".to_string()];
        let hists = Histograms::new(&section, &specs, None).unwrap();
        hists.add(&section);
        let mut out = String::new();
        hists.write(None, &mut out).unwrap();
        assert!(out.contains("{ who: a\\u{a}{ who: x } hitcount: 9\\u{1b}[2J "), "{out}");
        assert!(!out.contains('\x1b') && !out.contains("\n{ who: x"), "{out}");
    }
}
