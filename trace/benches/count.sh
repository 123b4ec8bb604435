#!/usr/bin/env bash
# Instructions per event for each mode of benches/instructions.rs, counted exactly by
# cachegrind: (total at 200k iterations - total at 100k) / 100k.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$(cargo bench -p trace-benches --bench instructions --no-run --message-format=json 2>/dev/null |
    grep -o '"executable":"[^"]*instructions[^"]*"' | cut -d'"' -f4)
total() {
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$bin" "$1" "$2" 2>&1 |
        awk '/I *refs:/ { gsub(",", "", $NF); print $NF }'
}
for mode in floor disabled raw enabled enabled2 filter-pass filter-reject trigger-idle hist unpromised; do
    a=$(total "$mode" 100000)
    b=$(total "$mode" 200000)
    echo "$mode: $(( (b - a) / 100000 )) instructions per event"
done
echo "locked instructions in the tracer's record path:"
objdump -d --no-show-raw-insn -C "$bin" |
    awk '/^[0-9a-f]+ <.*Dispatch>::record/,/^$/' | grep -c 'lock ' || true
