//! The bounded buffer: `head + dropped + tail == total`, the cap holds,
//! kept text is a prefix and a suffix of the stream, and successive reads
//! see every byte and every character exactly once (as text or as a
//! counted gap).
#![no_main]

use libfuzzer_sys::fuzz_target;
use shell_runtime::{BufferLimits, OutputBuffer, StreamPosition};

fuzz_target!(|input: (u8, u8, Vec<(String, bool)>)| {
    let (head, tail, pushes) = input;
    let limits = BufferLimits {
        head_bytes: usize::from(head),
        tail_bytes: usize::from(tail),
    };
    let mut buffer = OutputBuffer::new(limits);
    let mut whole = String::new();
    let mut cursor = StreamPosition::default();
    let mut seen = 0u64;
    let mut seen_chars = 0u64;
    for (text, read) in pushes {
        buffer.push(&text);
        whole.push_str(&text);
        assert_eq!(
            buffer.head_len() as u64 + buffer.dropped_bytes() + buffer.tail_len() as u64,
            buffer.total_bytes()
        );
        assert!(buffer.head_len() <= limits.head_bytes && buffer.tail_len() <= limits.tail_bytes);
        if read {
            let (slice, next) = buffer.read_since(cursor);
            seen += (slice.before_gap.len() + slice.after_gap.len()) as u64 + slice.dropped;
            seen_chars += (slice.before_gap.chars().count() + slice.after_gap.chars().count())
                as u64
                + slice.dropped_chars;
            cursor = next;
        }
    }
    let (slice, _) = buffer.read_since(cursor);
    seen += (slice.before_gap.len() + slice.after_gap.len()) as u64 + slice.dropped;
    seen_chars += (slice.before_gap.chars().count() + slice.after_gap.chars().count()) as u64
        + slice.dropped_chars;
    assert_eq!(seen, buffer.total_bytes());
    assert_eq!(seen_chars, whole.chars().count() as u64);
    assert_eq!(buffer.total_bytes(), whole.len() as u64);
    let snapshot = buffer.snapshot();
    assert!(whole.starts_with(&snapshot.before_gap));
    assert!(whole.ends_with(&snapshot.after_gap));
});
