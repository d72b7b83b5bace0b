#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| solidgraph_fuzzcheck::rdf::rdf_wal(data));
