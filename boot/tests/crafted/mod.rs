//! Dumps crafted byte by byte, with valid checksums, whose contents are absurd:
//! each once crashed the report tool (or made it take seconds and gigabytes).
//! Shared by the test binaries, each of which uses part of it.
#![allow(dead_code, reason = "each test binary uses part of it")]

use trace::dump::{BEGIN, END, encode_chunk};

/// Item kinds of the dump format.
const HEADER: u8 = 1;
const DESCRIPTOR: u8 = 2;
const SECTION: u8 = 3;
const CPU_STATS: u8 = 4;
const RECORDS: u8 = 5;
const SKIPPED: u8 = 6;

/// Appends `v` as a LEB128 varint.
pub fn varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        out.push(byte | if v != 0 { 0x80 } else { 0 });
        if v == 0 {
            return;
        }
    }
}

/// An item: kind, length, body made of `numbers` as varints.
fn item(kind: u8, numbers: &[u64]) -> Vec<u8> {
    let mut body = Vec::new();
    for &n in numbers {
        varint(&mut body, n);
    }
    let mut out = vec![kind];
    varint(&mut out, body.len() as u64);
    out.extend(body);
    out
}

/// A log holding one dump of a single chunk made of `items`.
fn log(items: &[Vec<u8>]) -> String {
    let chunk = items.concat();
    format!("{BEGIN}\n{}\n{END} chunks=1>>>\n", encode_chunk(0, &chunk))
}

/// The top-level instance's live buffer: section 0, an empty name.
fn top() -> Vec<u8> {
    item(SECTION, &[0, 0])
}

/// A raw record item of instance 0: CPU, timestamp, event id 1, empty payload.
fn record(cpu: u64) -> Vec<u8> {
    item(RECORDS, &[0, cpu, 1000, 1 << 1, 0])
}

/// A CPU-statistics item of instance 0.
fn stats(cpu: u64) -> Vec<u8> {
    item(CPU_STATS, &[0, cpu, 5, 3, 2, 0, 0, 0])
}

/// A crafted log, what it once did, and the rule its refusal names.
pub struct Crasher {
    /// What the log once did to the report tool.
    pub name: &'static str,
    /// The log.
    pub log: String,
    /// Part of the problem the reader reports.
    pub refused: &'static str,
}

/// Every crafted log.
pub fn crashers() -> Vec<Crasher> {
    vec![
        Crasher {
            name: "a header CPU count of 2^64-1 (capacity overflow)",
            log: log(&[item(HEADER, &[1, u64::MAX, 0]), top(), record(0)]),
            refused: "the header gives 18446744073709551615 CPUs; a dump covers 1 to 256",
        },
        Crasher {
            name: "a record CPU of 2^40 (a 52 TB allocation)",
            log: log(&[item(HEADER, &[1, 2, 0]), top(), record(1 << 40)]),
            refused: "CPU 1099511627776 out of range (the header says the dump covers 2 CPUs)",
        },
        Crasher {
            name: "a stats CPU of u64::MAX (overflow of the CPU count)",
            log: log(&[item(HEADER, &[1, 2, 0]), top(), stats(u64::MAX)]),
            refused: "CPU 18446744073709551615 out of range",
        },
        Crasher {
            name: "a 60-byte dump whose stats name CPU 10^7 (20 s, 5.2 GB)",
            log: log(&[top(), stats(10_000_000)]),
            refused: "CPU 10000000 out of range (a dump covers at most 256 CPUs)",
        },
        Crasher {
            name: "a panic CPU beyond the CPU count",
            log: log(&[item(HEADER, &[1, 2, 1, 7, 0, 0]), top(), record(1)]),
            refused: "CPU 7 out of range (the header says the dump covers 2 CPUs)",
        },
        Crasher {
            name: "a section number of 2^64-1",
            log: log(&[item(HEADER, &[1, 2, 0]), item(SECTION, &[u64::MAX, 0])]),
            refused: "section number 18446744073709551615 out of range",
        },
        Crasher {
            name: "a snapshot section numbered at the bound on sections",
            log: log(&[item(HEADER, &[2, 2, 0]), item(SECTION, &[128, 0, 1]), record(0)]),
            refused: "section number 128 out of range (a dump holds at most 128)",
        },
        Crasher {
            name: "a section whose buffer is 2^64-1",
            log: log(&[item(HEADER, &[2, 2, 0]), item(SECTION, &[0, 0, u64::MAX]), record(0)]),
            refused: "unknown buffer 18446744073709551615 (0 live, 1 snapshot)",
        },
        Crasher {
            name: "a snapshot section whose stats name CPU 10^7",
            log: log(&[item(SECTION, &[0, 0, 1]), stats(10_000_000)]),
            refused: "CPU 10000000 out of range (a dump covers at most 256 CPUs)",
        },
        Crasher {
            name: "a header of a format version to come",
            log: log(&[item(HEADER, &[u64::MAX, 2, 0]), top(), record(0)]),
            refused: "dump format version 18446744073709551615; this tool reads versions 1 to",
        },
        Crasher {
            name: "a chunk longer than a chunk can be (decoded whatever its length)",
            log: log(&[vec![item(HEADER, &[2, 1, 0]), top()], vec![record(0); 100]].concat()),
            refused: "chunk 0: longer than a chunk can be (384 bytes); chunk skipped",
        },
        Crasher {
            name: "a second header whose CPU count replaced the first's",
            log: log(&[item(HEADER, &[2, 1, 0]), item(HEADER, &[2, 200, 0]), top(), record(150)]),
            refused: "a second header item (a dump has one); it is ignored",
        },
        Crasher {
            name: "counts of records left out that overflow when added",
            log: log(&[top(), item(SKIPPED, &[0, u64::MAX]), item(SKIPPED, &[0, 2])]),
            refused: "the count of records left out overflows",
        },
        Crasher {
            name: "an event of two 64 KiB byte arrays (CTF wrote each record of it, 4 bytes \
                   in the dump, as 128 KiB: 470 MB for one log line of them)",
            // Id 1, an event, empty system, name and format; two unnamed fields of
            // tag 12 (a byte array) and length 65535.
            log: log(&[
                item(DESCRIPTOR, &[1, 0, 0, 0, 0, 2, 0, 12, 65535, 0, 12, 65535]),
                top(),
                record(0),
            ]),
            refused: "event 1's fields take at least 131070 bytes, more than a record holds (4095)",
        },
        Crasher {
            name: "two sections naming the top level's live buffer (the second's records \
                   were left out of CTF and Perfetto without a word)",
            log: log(&[top(), record(0), item(SECTION, &[1, 0]), item(RECORDS, &[1, 0, 9, 2, 0])]),
            refused: "section 1 names the live buffer of \"\" as section 0 does; its records \
                      are reported as instance \"#1\"",
        },
        Crasher {
            name: "an instance named top beside the top level (reports merged the two, and \
                   CTF converted the instance for the top level)",
            // Section 1: the live buffer of "top"; a record in each.
            log: log(&[
                top(),
                record(0),
                item(SECTION, &[1, 3, u64::from(b't'), u64::from(b'o'), u64::from(b'p')]),
                item(RECORDS, &[1, 0, 9, 2, 0]),
            ]),
            refused: "section 1 names the live buffer of \"top\" (instance names are 1 to 32 \
                      characters of A-Z a-z 0-9 _ - ., not . or .., nor top, which names the top \
                      level in reports); its records are reported as instance \"#1\"",
        },
        Crasher {
            name: "an instance named x:snapshot beside x's snapshot (trace.dat gave both \
                   one buffer name)",
            // Section 1: the live buffer of "x:snapshot"; section 2: x's snapshot.
            log: log(&[
                top(),
                item(SECTION, &[1, 10, 120, 58, 115, 110, 97, 112, 115, 104, 111, 116]),
                item(RECORDS, &[1, 0, 9, 2, 0]),
                item(SECTION, &[2, 1, 120, 1]),
                item(RECORDS, &[2, 0, 9, 2, 0]),
            ]),
            refused: "section 1 names the live buffer of \"x:snapshot\" (instance names are",
        },
        Crasher {
            name: "a field type tag of 257 (cut to 8 bits, it was taken as a u8)",
            // Id 1, an event, empty system, name and format; one unnamed field.
            log: log(&[item(DESCRIPTOR, &[1, 0, 0, 0, 0, 1, 0, 257]), top(), record(0)]),
            refused: "unknown field type tag 257",
        },
        Crasher {
            name: "two descriptors of one id, differently (the second replaced the first \
                   without a word)",
            // Id 1, an event, system "s", names "a" then "b", no format, no field.
            log: log(&[
                item(DESCRIPTOR, &[1, 0, 1, u64::from(b's'), 1, u64::from(b'a'), 0, 0]),
                item(DESCRIPTOR, &[1, 0, 1, u64::from(b's'), 1, u64::from(b'b'), 0, 0]),
                top(),
                record(0),
            ]),
            refused: "event 1 described again as s:b, differently; the first, s:a, is kept",
        },
        Crasher {
            name: "a compact record whose fields expand past an event's 256 bytes (its \
                   string was cut short without a word)",
            log: log(&[
                // Id 1: system "s", name "e", no format; a 200-byte array and a string.
                item(
                    DESCRIPTOR,
                    &[1, 0, 1, u64::from(b's'), 1, u64::from(b'e'), 0, 2, 0, 12, 200, 0, 11],
                ),
                top(),
                // Section 0, CPU 0, time 1000, id 1 compact: 200 zero bytes, then a
                // string of 100 'a's.
                item(
                    RECORDS,
                    &[&[0, 0, 1000, 1 << 1 | 1][..], &[0; 200], &[100], &[u64::from(b'a'); 100]]
                        .concat(),
                ),
            ]),
            refused: "record of s:e: its fields take more than an event's 256 bytes",
        },
    ]
}
