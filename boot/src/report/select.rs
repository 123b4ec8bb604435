//! `report --filter`: which events a report shows, as trace-cmd report's `-F`. Each
//! spec is `EVENTS[: FILTER]`: EVENTS a comma-separated list of `SYSTEM/EVENT` or
//! `EVENT` globs (`*`, `?`, `[...]`), FILTER the kernel's filter syntax (the event's fields and
//! the common fields: `CPU`, `comm`, `common_pid`, ...). Given specs, a report shows
//! the events some spec names and whose filter, if it has one, passes, and the
//! stack traces recorded for them.

use std::collections::BTreeMap;
use trace::dump::{DumpDescriptor, Section};
use trace::event::{Filter, glob};

use super::Symbols;

/// The parsed `--filter` specs (none: every event is shown).
#[derive(Debug, Default)]
pub struct Selection {
    specs: Vec<Spec>,
}

/// One `--filter` spec.
#[derive(Debug)]
struct Spec {
    /// As given, for errors.
    text: String,
    /// (system glob, event glob) pairs; the system glob is `*` when not given.
    events: Vec<(String, String)>,
    /// The filter text, if any.
    filter: Option<String>,
}

impl Selection {
    /// Parses the specs of `--filter`; an error names the spec and the rule.
    pub fn parse(specs: &[String]) -> Result<Selection, String> {
        let mut parsed = Vec::new();
        for text in specs {
            let (events, filter) = match text.split_once(':') {
                Some((events, filter)) => (events, Some(filter.trim())),
                None => (text.as_str(), None),
            };
            let mut globs = Vec::new();
            for event in events.split(',').map(str::trim) {
                let (system, name) = event.split_once('/').unwrap_or(("*", event));
                if system.is_empty() || name.is_empty() || name.contains('/') {
                    return Err(format!(
                        "--filter '{text}': an event is SYSTEM/EVENT or EVENT (globs allowed), \
                         events separated by ',', then ': FILTER' if any"
                    ));
                }
                globs.push((system.to_string(), name.to_string()));
            }
            let filter = filter.filter(|f| !f.is_empty()).map(str::to_string);
            parsed.push(Spec { text: text.clone(), events: globs, filter });
        }
        Ok(Selection { specs: parsed })
    }

    /// Keeps the events of `section` the specs select; losses reported before an
    /// event left out move to the same CPU's next event kept. An error: a spec that names
    /// no event of the dump, or whose filter fits none of the events it names (then
    /// the first one's error: position and reason).
    /// A filter's `.function` names are looked up in `symbols` (`--elf`).
    pub fn apply(&self, section: &mut Section, symbols: Option<&Symbols>) -> Result<(), String> {
        let table = symbols.and_then(Symbols::table);
        if self.specs.is_empty() {
            return Ok(());
        }
        // Per event id named: its filter in each spec that names it (`None`: the
        // spec has none).
        let mut chosen: BTreeMap<u16, Vec<Option<Filter>>> = BTreeMap::new();
        for spec in &self.specs {
            let named: Vec<&DumpDescriptor> =
                section.descriptors.values().filter(|d| spec.names(d)).collect();
            if named.is_empty() {
                return Err(format!("--filter '{}': no event of the dump is named so", spec.text));
            }
            let Some(text) = spec.filter.as_deref() else {
                named.iter().for_each(|d| chosen.entry(d.id).or_default().push(None));
                continue;
            };
            let (mut fitted, mut first_error) = (false, None);
            for d in named {
                match d.filter(text, table.as_ref()) {
                    Ok(filter) => {
                        chosen.entry(d.id).or_default().push(Some(filter));
                        fitted = true;
                    }
                    Err(e) => {
                        first_error.get_or_insert_with(|| format!("{}: {e}", d.full_name()));
                    }
                }
            }
            if let (false, Some(error)) = (fitted, first_error) {
                return Err(format!("--filter '{}': {error}", spec.text));
            }
        }
        // A stack trace (`ftrace:kernel_stack`, which a `stacktrace` trigger or option
        // records right after the event it was taken for, on the same CPU) goes with
        // that event: shown when the CPU's event before it is, as trace-cmd report -F
        // shows a stack after an event shown.
        let stack = &trace::tracer::STACK_TRACE;
        let stacks = section.ids_of(stack.system, stack.name);
        // Per CPU, whether its last event was shown.
        let mut last_shown: BTreeMap<usize, bool> = BTreeMap::new();
        let before = section.events.len();
        // Losses reported before an event left out, per CPU: told with the CPU's next
        // event shown (they happened before it too), so none goes unreported there.
        let mut unreported: BTreeMap<usize, u64> = BTreeMap::new();
        section.events.retain_mut(|event| {
            let named = chosen.get(&event.id).is_some_and(|filters| {
                filters.iter().any(|filter| filter.as_ref().is_none_or(|f| event.passes(f)))
            });
            // A stack after a loss is not the stack of the event shown before it.
            let follows = event.lost_before == 0
                && stacks.contains(&event.id)
                && last_shown.get(&event.cpu).copied().unwrap_or(false);
            let shown = named || follows;
            last_shown.insert(event.cpu, shown);
            let lost = unreported.remove(&event.cpu).unwrap_or(0);
            event.lost_before = event.lost_before.saturating_add(lost);
            if !shown && event.lost_before > 0 {
                unreported.insert(event.cpu, event.lost_before);
            }
            shown
        });
        // Those of the CPU's last events, told after its last event shown.
        for (cpu, lost) in unreported {
            let after = section.lost_after.entry(cpu).or_default();
            *after = after.saturating_add(lost);
        }
        section.filtered += (before - section.events.len()) as u64;
        Ok(())
    }
}

impl Spec {
    /// Whether the spec names the event `d`.
    fn names(&self, d: &DumpDescriptor) -> bool {
        self.events.iter().any(|(system, name)| glob(system, &d.system) && glob(name, &d.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample::{sample, task_event};
    use trace::dump::Value;

    fn apply(specs: &[&str], section: &mut Section) -> Result<(), String> {
        let specs: Vec<String> = specs.iter().map(|s| s.to_string()).collect();
        Selection::parse(&specs)?.apply(section, None)
    }

    #[test]
    fn a_loss_before_an_event_left_out_is_told_with_the_cpus_next_event_shown() {
        let mut section = sample();
        // CPU 1: `net:packet` (17 lost before it), then an interrupt.
        section.events.push(task_event(1, 3_000_000_000, 1, vec![Value::Unsigned(49)]));
        apply(&["irq/irq_handler_entry"], &mut section).unwrap();
        let shown: Vec<(usize, u16, u64)> =
            section.events.iter().map(|e| (e.cpu, e.id, e.lost_before)).collect();
        assert_eq!(shown, [(0, 1, 0), (0, 1, 0), (1, 1, 17)]);
        assert_eq!(section.filtered, 3);
    }

    #[test]
    fn a_loss_is_not_told_on_another_cpu() {
        let mut section = sample();
        apply(&["irq/*"], &mut section).unwrap();
        // CPU 1 shows nothing after its loss; CPU 0's events report none.
        assert!(section.events.iter().all(|e| e.cpu == 0 && e.lost_before == 0));
        assert_eq!(section.events.len(), 3);
    }
}
