//! Turning a parsed dump (`trace::dump`) into the report model, one [`Trace`] per
//! section (an instance's live buffer or its snapshot). Fields are decoded and rendered with the dump's own descriptors.

use super::model::{CpuStats, Descriptor, Event, FieldDesc, PanicInfo, Trace, Value};
use std::collections::BTreeMap;
use trace::dump::{Dump, DumpDescriptor};
use trace::event::DescriptorKind;

fn value(value: trace::field::Value<'_>) -> Value {
    match value {
        trace::field::Value::Unsigned(v) => Value::Unsigned(v),
        trace::field::Value::Signed(v) => Value::Signed(v),
        trace::field::Value::Bool(v) => Value::Bool(v),
        trace::field::Value::Char(v) => Value::Char(v),
        trace::field::Value::Bytes(v) => Value::Bytes(v.to_vec()),
        trace::field::Value::Str(v) => Value::Str(v.into()),
    }
}

fn descriptor(d: &DumpDescriptor) -> Descriptor {
    Descriptor {
        id: d.id,
        system: d.system.clone(),
        name: d.name.clone(),
        format: d.format.clone(),
        fields: d
            .fields
            .iter()
            .map(|(name, kind)| FieldDesc { name: name.clone(), kind: *kind })
            .collect(),
        timeline: d.timeline.clone(),
    }
}

/// Decodes a payload: its values and its text (`<...>` where it does not decode).
fn decode(d: Option<&DumpDescriptor>, payload: &[u8]) -> (Vec<Value>, String) {
    let Some(d) = d else { return (Vec::new(), String::new()) };
    let mut text = String::new();
    let mut values = Vec::new();
    match d.kind {
        DescriptorKind::Event => {
            let mut decoder = trace::field::Decoder::new(payload);
            for (_, k) in &d.fields {
                match decoder.value(*k) {
                    Ok(v) => values.push(value(v)),
                    Err(_) => break,
                }
            }
            let _ = trace::event::format::render(&mut text, &d.format, &d.fields(), payload);
        }
        DescriptorKind::Printk => {
            let mut decoder = trace::field::Decoder::new(payload);
            while let Ok((_, v)) = decoder.tagged() {
                values.push(value(v));
            }
            let _ = trace::event::format::render_tagged(&mut text, &d.format, payload);
        }
    }
    (values, text)
}

/// The sections of `dump` (each instance's live buffer, and its snapshot if the
/// dump carries one), each as a [`Trace`], in the dump's order.
pub fn traces(dump: &Dump) -> Vec<Trace> {
    let descriptors: BTreeMap<u16, Descriptor> =
        dump.descriptors.iter().map(|(id, d)| (*id, descriptor(d))).collect();
    let panic = dump.panic.as_ref().map(|p| PanicInfo {
        cpu: p.cpu,
        message: p.message.clone(),
        location: p.location.clone(),
    });
    dump.instances
        .values()
        .map(|instance| {
            let max_cpu = instance
                .stats
                .keys()
                .chain(instance.records.iter().map(|r| &r.cpu))
                .max()
                .map_or(0, |c| c.saturating_add(1));
            let cpus = dump.cpus.unwrap_or(max_cpu).max(max_cpu);
            // The parser keeps CPU numbers below `MAX_CPUS`; a dump built otherwise
            // loses the stats of CPUs beyond it rather than sizing memory by them.
            let mut stats = vec![CpuStats::default(); cpus.min(trace::dump::MAX_CPUS)];
            for (&cpu, s) in &instance.stats {
                if let Some(slot) = stats.get_mut(cpu) {
                    *slot = *s;
                }
            }
            let events = instance
                .records
                .iter()
                .map(|r| {
                    let (values, text) = decode(dump.descriptors.get(&r.id), &r.payload);
                    Event {
                        cpu: r.cpu,
                        ts: r.ts,
                        id: r.id,
                        context: r.context,
                        values,
                        lost_before: 0,
                        text,
                    }
                })
                .collect();
            Trace {
                instance: if instance.name.is_empty() {
                    "top".into()
                } else {
                    instance.name.clone()
                },
                buffer: instance.buffer,
                cpus,
                descriptors: descriptors.clone(),
                events,
                skipped: instance.skipped,
                stats,
                panic: panic.clone(),
            }
        })
        .collect()
}
