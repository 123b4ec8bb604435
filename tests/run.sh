#!/usr/bin/env bash
# Installs what is missing, then runs every check and test: formatting, clippy on the
# host crates and the kernel target, host unit tests, and the QEMU end-to-end tests.
set -euo pipefail
cd "$(dirname "$0")/.."
boot/setup.sh

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy (host crates and the x86_64-unknown-none kernel)"
cargo clippy --workspace --all-targets -- -D warnings
echo "== host unit tests"
cargo test --workspace --exclude e2e
echo "== QEMU end-to-end tests"
cargo test -p e2e
