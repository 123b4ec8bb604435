#!/usr/bin/env bash
# Installs what is missing, then runs every check and test: formatting, clippy on the
# host crates, the fuzz targets and the kernel target, the documentation's links, the trace crate's unit/property/stress tests,
# its loom models and Miri, the host tool's tests, and the QEMU end-to-end tests
# (dev build, plus the release build's tracepoint-section and optimisation checks).
set -euo pipefail
cd "$(dirname "$0")/.."
boot/setup.sh
# Builds as CI does, without incremental compilation: its codegen units differ, and
# so does what the compiler inlines, which the kernel's stack traces show.
export CARGO_INCREMENTAL=0

# Prints each section's heading with the seconds the run has taken so far.
section() { echo "== [${SECONDS}s] $*"; }
# A run that stops early stops the background Miri run too.
trap 'jobs -p | xargs -r kill 2>/dev/null; echo "== [${SECONDS}s] finished"' EXIT

section "cargo fmt --check"
cargo fmt --all -- --check
# Miri interprets on one core: it runs in the background beside the next four
# sections, and its output is shown (and its status checked) before the QEMU tests,
# which get both cores to themselves.
section "Miri on the trace crate's unit, property and stress tests: started in the background"
miri_log=$(mktemp)
CARGO_TARGET_DIR=target/miri cargo miri test -q -p trace --lib >"$miri_log" 2>&1 &
miri=$!
section "cargo clippy (host crates, the fuzz targets and the x86_64-unknown-none kernel)"
cargo clippy --workspace --all-targets -- -D warnings
# The cargo-fuzz targets are not workspace members (they need the fuzzer's runtime):
# checked here so that they keep building against the crate's API.
cargo clippy -q --manifest-path trace/fuzz/Cargo.toml --bins -- -D warnings
section "rustdoc: every crate's documentation, private items too, builds with its links checked"
RUSTDOCFLAGS="-D warnings" cargo doc -q --workspace --no-deps --document-private-items
section "loom models of the ring's protocols"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -q -p trace --release --lib loom
section "release kernel keeps the tracepoint section, and every crate of it is built optimised"
cargo test -q --release -p e2e -- section optimised
section "host unit tests"
cargo test --workspace --exclude e2e
section "Miri on the trace crate's unit, property and stress tests: its output"
miri_status=0
wait "$miri" || miri_status=$?
cat "$miri_log"
rm -f "$miri_log"
if [ "$miri_status" -ne 0 ]; then
    echo "Miri failed (exit status $miri_status)"
    exit "$miri_status"
fi
section "QEMU end-to-end tests"
cargo test -p e2e
