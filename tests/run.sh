#!/usr/bin/env bash
# Installs what is missing, then runs every check and test: formatting, clippy on the
# host crates and the kernel target, the trace crate's unit/property/stress tests,
# its loom models and Miri, the host tool's tests, and the QEMU end-to-end tests
# (dev build, plus the release build's tracepoint-section and optimisation checks).
set -euo pipefail
cd "$(dirname "$0")/.."
boot/setup.sh

# Prints each section's heading with the seconds the run has taken so far.
section() { echo "== [${SECONDS}s] $*"; }
trap 'echo "== [${SECONDS}s] finished"' EXIT

section "cargo fmt --check"
cargo fmt --all -- --check
section "cargo clippy (host crates and the x86_64-unknown-none kernel)"
cargo clippy --workspace --all-targets -- -D warnings
section "loom models of the ring's protocols"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -q -p trace --release --lib loom
section "Miri on the trace crate's unit, property and stress tests"
CARGO_TARGET_DIR=target/miri cargo miri test -q -p trace --lib
section "release kernel keeps the tracepoint section and has its trace code optimised"
cargo test -q --release -p e2e -- section optimised
section "host unit tests"
cargo test --workspace --exclude e2e
section "QEMU end-to-end tests"
cargo test -p e2e
