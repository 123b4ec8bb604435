//! A tracer's dump, as a panic handler writes it: every chosen buffer's records as
//! ftrace's text lines merged in time order, then the same records as the compact,
//! checksummed block of [`crate::dump`] that the host tool reads. Takes no lock
//! (the instances are visited inside the calling CPU's section), so it is fit for a
//! panic with other CPUs stopped anywhere.

use super::{InstanceView, TraceWriter, Tracer};
use crate::dump::{BufferKind, DumpWriter, OtherPanic, PanicHeader};
use crate::platform::Platform;
use crate::ring::{Buffer, ReadScratch, RecordRef, RingStats};
use crate::text::{Layout, UnreadWrites};
use core::fmt::Write;
use core::ops::Range;
use spin::Mutex;

/// What a dump carries.
#[derive(Clone)]
pub struct DumpSelection<'a> {
    /// The CPUs whose records and statistics it carries (below the tracer's count).
    pub cpus: Range<usize>,
    /// Each chosen instance's live buffer.
    pub live: bool,
    /// Each chosen instance's snapshot, if one is allocated and was written to.
    pub snapshot: bool,
    /// At most this many of the newest records per buffer (`None`: all).
    pub last: Option<u64>,
    /// Which instances, by name (empty for the top-level one).
    pub instances: &'a dyn Fn(&str) -> bool,
    /// How the text lines are laid out (each buffer's clock is its own).
    pub layout: Layout,
}

/// Every instance, for [`DumpSelection::all`].
fn every_instance(_: &str) -> bool {
    true
}

impl DumpSelection<'static> {
    /// Everything of a tracer of `cpus` CPUs: every instance's live buffer and
    /// snapshot, every record, the text in ftrace's default layout with timestamps in
    /// nanoseconds.
    pub fn all(cpus: usize) -> Self {
        DumpSelection {
            cpus: 0..cpus,
            live: true,
            snapshot: true,
            last: None,
            instances: &every_instance,
            layout: Layout { nanoseconds: true, ..Layout::DEFAULT },
        }
    }
}

/// One buffer of an instance, as a dump section.
struct Section<'a, P: Platform> {
    view: &'a InstanceView<'a, P>,
    kind: BufferKind,
    buffer: &'a Buffer<P>,
}

impl<P: Platform> Section<'_, P> {
    /// CPU `cpu`'s statistics: the instance's own for the live buffer (events refused
    /// for a bad CPU count there), the snapshot ring's for the snapshot.
    fn stats(&self, cpu: usize) -> Result<RingStats, crate::Error> {
        match self.kind {
            BufferKind::Live => self.view.stats(cpu),
            BufferKind::Snapshot => self.buffer.stats(cpu),
        }
    }

    /// The name it goes by in the text part, in two pieces: `top`, ``; `latency`,
    /// ` (snapshot)`.
    fn heading(&self) -> (&str, &'static str) {
        let name = if self.view.name.is_empty() { "top" } else { self.view.name };
        match self.kind {
            BufferKind::Live => (name, ""),
            BufferKind::Snapshot => (name, " (snapshot)"),
        }
    }
}

impl DumpSelection<'_> {
    /// Calls `each` with the sections of `view` the dump carries: its live buffer,
    /// then its snapshot if one is allocated and holds data (something was written).
    fn sections<P: Platform>(
        &self,
        view: &InstanceView<'_, P>,
        mut each: impl FnMut(&Section<'_, P>),
    ) {
        if !(self.instances)(view.name) {
            return;
        }
        if self.live {
            each(&Section { view, kind: BufferKind::Live, buffer: view.recorder.live() });
        }
        if self.snapshot
            && let Some(buffer) = view.recorder.snapshot()
            && (0..buffer.cpus()).any(|cpu| buffer.stats(cpu).is_ok_and(|s| s.written > 0))
        {
            each(&Section { view, kind: BufferKind::Snapshot, buffer });
        }
    }

    /// Calls `each` with every record of `section` to dump, read with `scratch`,
    /// oldest first: the CPUs chosen, merged in time order, the newest `last`.
    /// Returns how many older records were left out, or `None` if the records could
    /// not be read (no scratch: no memory).
    fn records<P: Platform>(
        &self,
        section: &Section<'_, P>,
        scratch: Option<&mut ReadScratch>,
        mut each: impl FnMut(&RecordRef<'_>),
    ) -> Option<u64> {
        if self.cpus.is_empty() {
            return Some(0);
        }
        let scratch = scratch?;
        let only = (self.cpus.len() == 1).then_some(self.cpus.start);
        // Counted before the window is fixed, and capped at `last` while listing:
        // events recorded in between (a live dump's interrupts) neither push records
        // out of the window listed nor make it longer than `last`.
        let total: u64 =
            self.cpus.clone().filter_map(|cpu| section.stats(cpu).ok()).map(|s| s.entries).sum();
        let skip = self.last.map_or(0, |last| total.saturating_sub(last));
        let mut seen = 0u64;
        let mut listed = 0u64;
        let read = section.buffer.for_each_record_with(
            scratch,
            only,
            || {},
            |record| {
                if seen >= skip {
                    each(record);
                    listed += 1;
                }
                seen += 1;
                self.last.is_none_or(|last| listed < last)
            },
        );
        read.ok()?;
        Some(skip.min(seen))
    }
}

impl<P: Platform> Tracer<P> {
    /// Writes the dump of what `selection` chooses to `out`, with `panic` in its
    /// header: the text part (a `#` header, then per buffer its name, each CPU's
    /// statistics and its records as `trace` lines), then the block
    /// ([`DumpWriter`]: the descriptors, each buffer as a section with its
    /// statistics and records, the descriptors again). Takes no lock and stops no
    /// writer: a panic handler calls [`Tracer::stop_all`] first, a live dump holds
    /// writes off ([`Buffer::with_writes_held`]) so that both parts agree. Reads
    /// with one of the two scratches allocated with the tracer, so that it allocates
    /// nothing, even in a panic during a live dump; a dump that finds both in use
    /// (two dumps it interrupted or that a panic stopped) allocates its own, and if
    /// it cannot, the text says so and the sections carry no record. Write errors are
    /// ignored: the dump goes on, as it must on a console.
    pub fn write_dump(
        &self,
        selection: &DumpSelection<'_>,
        panic: Option<PanicHeader<'_>>,
        out: &mut dyn Write,
    ) {
        // CPUs the tracer does not have are left out (none, if it has none of them).
        let end = selection.cpus.end.min(self.cpus);
        let cpus = selection.cpus.start.min(end)..end;
        let selection = &DumpSelection { cpus: cpus.clone(), ..selection.clone() };
        let mut held = self.dump_scratch.iter().find_map(Mutex::try_lock);
        let mut own;
        let mut scratch = match held.as_deref_mut() {
            Some(scratch) => Some(scratch),
            None => {
                own = ReadScratch::new(self.cpus).ok();
                own.as_mut()
            }
        };
        let _ = match cpus.is_empty() {
            true => writeln!(out, "# trace dump: {} CPU(s), records of none", self.cpus),
            false => writeln!(
                out,
                "# trace dump: {} CPU(s), records of CPU(s) {}..{}",
                self.cpus,
                cpus.start,
                cpus.end - 1
            ),
        };
        if let Some(PanicHeader { cpu, message, location, nested, other }) = panic {
            let _ = writeln!(out, "# panic on cpu {cpu} at {location}: {message}");
            if let Some((message, location)) = nested {
                let _ =
                    writeln!(out, "# nested panic while reporting it, at {location}: {message}");
            }
            if let Some(OtherPanic { cpu, message, location }) = other {
                let _ = writeln!(out, "# panic on cpu {cpu} too, at {location}: {message}");
            }
        }
        self.visit_instances(|view| {
            selection.sections(&view, |section| {
                self.write_section_text(selection, section, scratch.as_deref_mut(), out);
            });
        });
        let mut writer = DumpWriter::begin(|line: &str| {
            let _ = writeln!(out, "{line}");
        });
        let fingerprint = self.platform.symbols().map(|table| table.fingerprint());
        writer.header(self.cpus, panic, fingerprint);
        for descriptor in self.events() {
            writer.descriptor(descriptor);
        }
        let mut index = 0;
        self.visit_instances(|view| {
            selection.sections(&view, |section| {
                writer.section(index, view.name, section.kind, section.buffer.clock());
                for cpu in cpus.clone() {
                    if let Ok(stats) = section.stats(cpu) {
                        writer.cpu_stats(index, cpu, &stats);
                    }
                }
                let skipped = selection.records(section, scratch.as_deref_mut(), |r| {
                    writer.record(index, r, self.descriptor(r.id));
                });
                if let Some(skipped) = skipped.filter(|&s| s > 0) {
                    writer.skipped(index, skipped);
                }
                index += 1;
            });
        });
        // The descriptors again: a damaged chunk of the first copy costs no record.
        for descriptor in self.events() {
            writer.descriptor(descriptor);
        }
        writer.finish();
    }

    /// The text part of one section: its name, its CPUs' statistics and its records.
    fn write_section_text(
        &self,
        selection: &DumpSelection<'_>,
        section: &Section<'_, P>,
        scratch: Option<&mut ReadScratch>,
        out: &mut dyn Write,
    ) {
        let (name, buffer) = section.heading();
        let _ = match section.buffer.clock() {
            crate::Clock::Local => writeln!(out, "# instance {name}{buffer}"),
            clock => writeln!(out, "# instance {name}{buffer}, clock {}", clock.name()),
        };
        for cpu in selection.cpus.clone() {
            if let Ok(s) = section.stats(cpu) {
                let _ = writeln!(
                    out,
                    "# cpu{cpu}: written {} entries {} overrun {} dropped {} read {}",
                    s.written, s.entries, s.overrun, s.dropped, s.read
                );
                let notes = UnreadWrites {
                    cpu,
                    stopped: s.stopped,
                    unreadable: s.unreadable,
                    unpublished: s.unpublished,
                };
                let _ = write!(out, "{notes}");
            }
        }
        let layout = Layout { clock: section.buffer.clock(), ..selection.layout };
        let mut lines = TraceWriter::new(self, layout);
        let read = selection.records(section, scratch, |record| {
            let _ = lines.write(out, record);
        });
        let _ = lines.finish(out);
        match read {
            Some(0) => {}
            Some(skipped) => {
                let _ = writeln!(out, "# ({skipped} older records left out)");
            }
            None => {
                let _ = writeln!(out, "# (records unreadable: no memory)");
            }
        }
    }
}
