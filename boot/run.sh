#!/usr/bin/env bash
# Installs what is missing, builds the kernel image and boots it in QEMU with the
# serial console on this terminal. Arguments go to the runner (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
boot/setup.sh
exec cargo run --quiet -- "$@"
