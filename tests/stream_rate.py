#!/usr/bin/env python3
"""Events per second over the serial line: `cat trace` (text) against
`cat trace_pipe_raw` (the binary stream), draining the same backlog.

Usage: IMAGE=path/to/the/bios.img python3 tests/stream_rate.py (the image
`cargo build -p boot` made, under target/; needs qemu-system-x86_64)."""
import os, re, subprocess, sys, tempfile, time, select


def boot():
    image = os.environ["IMAGE"]
    qemu = subprocess.Popen(
        ["qemu-system-x86_64", "-drive", f"format=raw,file={image},snapshot=on",
         "-display", "none", "-no-reboot", "-nic", "none", "-smp", "4", "-m", "256M",
         "-accel", "tcg", "-chardev", "stdio,id=console,signal=off",
         "-serial", "chardev:console", "-monitor", "none"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    return qemu


def read_until(q, done, quiet=None):
    """Reads until done(text) or, with quiet, until no byte came for that long;
    returns the text and the time the last byte arrived."""
    text, last = b"", time.monotonic()
    while not done(text):
        r, _, _ = select.select([q.stdout], [], [], quiet or 120)
        if not r:
            if quiet:
                break
            sys.exit("timed out")
        chunk = os.read(q.stdout.fileno(), 65536)
        if not chunk:
            sys.exit("QEMU exited")
        text += chunk
        last = time.monotonic()
    return text.decode(errors="replace"), last


def prompt(t):
    return t.rstrip(b" ").endswith(b"#") and b"tracefs:" in t.rsplit(b"\n", 1)[-1]


def run(q, line):
    q.stdin.write(line.encode() + b"\r")
    q.stdin.flush()
    return read_until(q, prompt)[0]


def backlog(q):
    run(q, "echo '*:*' > set_event")
    run(q, "stress overwrite 300")
    run(q, "echo 0 > tracing_on")
    stats = [run(q, f"cat per_cpu/cpu{c}/stats") for c in range(4)]
    return sum(int(re.search(r"^entries: (\d+)", s, re.M).group(1)) for s in stats)


def main():
    q = boot()
    read_until(q, prompt)
    print(f"backlog: {backlog(q)} events")
    start = time.monotonic()
    text = run(q, "cat trace")
    elapsed = time.monotonic() - start
    lines = sum(1 for l in text.splitlines() if re.match(r"\s*\S+-\d+\s+\[\d+\]", l))
    print(f"cat trace:          {lines} events in {elapsed:.2f} s = {lines / elapsed:.0f} events/s")
    run(q, "echo 1 > tracing_on")
    print(f"backlog: {backlog(q)} events")
    q.stdin.write(b"cat trace_pipe_raw\r")
    q.stdin.flush()
    start = time.monotonic()
    # The stream goes quiet once the backlog is drained (nothing new is recorded).
    text, last = read_until(q, lambda t: False, quiet=3)
    elapsed = last - start
    q.stdin.write(b"q")
    q.stdin.flush()
    rest, _ = read_until(q, prompt)
    with tempfile.NamedTemporaryFile("w", suffix=".log") as f:
        f.write(text + rest)
        f.flush()
        report = subprocess.run(["cargo", "run", "-q", "-p", "boot", "--", "report", "--stat",
                                 f.name], capture_output=True, text=True)
    counts = re.findall(r"^\s+\S+:\S+\s+(\d+)$", report.stdout, re.M)
    events = sum(map(int, counts))
    print(f"cat trace_pipe_raw: {events} events in {elapsed:.2f} s = {events / elapsed:.0f} events/s")
    q.kill()


main()
