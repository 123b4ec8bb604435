//! Fuzzes the dump parser: any text, however damaged, must parse without panicking.
//! Inputs are seeded with a valid dump marker so the fuzzer reaches the chunk and
//! item decoders quickly.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = trace::dump::parse(&text);
    let framed = format!("{}\n{text}\n{} chunks=3>>>\n", trace::dump::BEGIN, trace::dump::END);
    let _ = trace::dump::parse(&framed);
});
