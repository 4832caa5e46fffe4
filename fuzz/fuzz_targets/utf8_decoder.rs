//! The incremental decoder under any chunking equals `from_utf8_lossy` of
//! the whole stream.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shell_runtime::Utf8Decoder;

fuzz_target!(|input: (Vec<u8>, Vec<u8>)| {
    let (bytes, cuts) = input;
    let mut decoder = Utf8Decoder::new();
    let mut text = String::new();
    let mut at = 0;
    for cut in cuts {
        let end = (at + usize::from(cut)).min(bytes.len());
        decoder.decode(&bytes[at..end], &mut text);
        at = end;
    }
    decoder.decode(&bytes[at..], &mut text);
    decoder.finish(&mut text);
    assert_eq!(text, String::from_utf8_lossy(&bytes));
});
