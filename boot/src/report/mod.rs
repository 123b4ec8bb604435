//! Output side of `cargo run -- report`: renders a decoded dump ([`Trace`]) as
//! `trace-cmd report`-style text, a `--stat` summary, Chrome Trace Event JSON for
//! ui.perfetto.dev, or a CTF 1.8 trace directory for babeltrace2.

pub mod ctf;
pub mod model;
pub mod perfetto;
pub mod stat;
pub mod text;

#[cfg(test)]
mod sample;

pub use ctf::write_ctf;
pub use model::{
    CpuStats, Descriptor, Event, FieldDesc, FieldKind, PanicInfo, Trace, Value, format_ts, hex_dump,
};
pub use perfetto::{perfetto_json, write_perfetto};
pub use stat::{CpuSummary, Summary, summarize, write_stat};
pub use text::write_text;
