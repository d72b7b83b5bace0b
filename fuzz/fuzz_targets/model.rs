#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| solidgraph_fuzzcheck::model::model(data));
