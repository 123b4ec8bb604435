#!/usr/bin/env bash
# Installs whatever the project needs and this machine lacks: the pinned Rust
# toolchain (rust-toolchain.toml) and the host packages QEMU, babeltrace2,
# trace-cmd, protoc, and a C compiler with KernelShark's library.
# Idempotent; quick when everything is present.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v rustup >/dev/null; then
    echo "setup: rustup is required (https://rustup.rs)" >&2
    exit 1
fi
# Reads rust-toolchain.toml; RUSTUP_AUTO_INSTALL=0 machines need this explicit step.
rustup toolchain install >/dev/null

missing=()
command -v qemu-system-x86_64 >/dev/null || missing+=(qemu-system-x86)
# The tests check the CTF output with babeltrace2.
command -v babeltrace2 >/dev/null || missing+=(babeltrace2)
# And the trace.dat output with trace-cmd.
command -v trace-cmd >/dev/null || missing+=(trace-cmd)
# And the Perfetto protobuf output with protoc --decode.
command -v protoc >/dev/null || missing+=(protobuf-compiler)
# And that KernelShark's library (libkshark, what KernelShark loads a file with) reads
# the trace.dat output: a C compiler and the library to link a loader against.
command -v cc >/dev/null || missing+=(gcc)
# The fuzz targets' libFuzzer is C++ (the test command checks that they build).
command -v c++ >/dev/null || missing+=(g++)
dpkg -s libkshark-dev >/dev/null 2>&1 || missing+=(libkshark-dev)
if [ ${#missing[@]} -gt 0 ]; then
    sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    echo "setup: installing ${missing[*]}" >&2
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi
