//! Bounded capture of one output stream: a head, a tail ring and counts.

use std::collections::VecDeque;

/// How much of a stream is kept in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferLimits {
    /// Bytes kept from the start of the stream (the command line, the first error).
    pub head_bytes: usize,
    /// Bytes kept from the end of the stream (where build logs put their errors).
    pub tail_bytes: usize,
}

impl BufferLimits {
    /// 256 KiB of head and 1 MiB of tail: far more than an agent reads at once,
    /// small enough that a thousand idle shells stay cheap.
    pub const DEFAULT: Self = Self {
        head_bytes: 256 * 1024,
        tail_bytes: 1024 * 1024,
    };

    /// The most bytes a buffer with these limits holds.
    pub fn capacity(self) -> usize {
        self.head_bytes.saturating_add(self.tail_bytes)
    }
}

impl Default for BufferLimits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The decoded text of one stream, bounded: the first `head_bytes`, the last
/// `tail_bytes`, and counts of everything in between.
///
/// Invariant: `head_len + dropped + tail_len == total_bytes`, and the kept
/// bytes never exceed [`BufferLimits::capacity`]. Both parts always hold
/// whole characters.
#[derive(Debug, Clone)]
pub struct OutputBuffer {
    limits: BufferLimits,
    head: String,
    /// Set once a character did not fit in the head: everything after goes to the tail.
    head_closed: bool,
    /// Valid UTF-8 as a whole; only ever cut at character boundaries.
    tail: VecDeque<u8>,
    total_bytes: u64,
    total_chars: u64,
    dropped: u64,
}

/// A place in a stream: how many bytes and characters come before it. A
/// reader keeps the one its last read returned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamPosition {
    /// Bytes before this place.
    pub bytes: u64,
    /// Characters (Unicode scalar values) before this place.
    pub chars: u64,
}

/// What a reader gets: the text it had not seen, and how much of it was
/// dropped before it could be read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutputSlice {
    /// Text before the gap (from the head), or all of it when nothing was dropped.
    pub before_gap: String,
    /// Bytes the reader never saw because the buffer overflowed.
    pub dropped: u64,
    /// The same gap counted in characters.
    pub dropped_chars: u64,
    /// Text after the gap (from the tail).
    pub after_gap: String,
}

impl OutputSlice {
    /// True when there is neither text nor a gap.
    pub fn is_empty(&self) -> bool {
        self.before_gap.is_empty() && self.dropped == 0 && self.after_gap.is_empty()
    }

    /// The text with one `[... N bytes dropped ...]` line where the gap is.
    pub fn render(&self) -> String {
        if self.dropped == 0 {
            let mut text = self.before_gap.clone();
            text.push_str(&self.after_gap);
            return text;
        }
        let mut text = String::with_capacity(self.before_gap.len() + self.after_gap.len() + 40);
        text.push_str(&self.before_gap);
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("[... {} bytes dropped ...]\n", self.dropped));
        text.push_str(&self.after_gap);
        text
    }
}

impl OutputBuffer {
    /// An empty buffer.
    pub fn new(limits: BufferLimits) -> Self {
        Self {
            limits,
            head: String::new(),
            head_closed: limits.head_bytes == 0,
            tail: VecDeque::new(),
            total_bytes: 0,
            total_chars: 0,
            dropped: 0,
        }
    }

    /// Appends decoded text.
    pub fn push(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.total_bytes += text.len() as u64;
        self.total_chars += text.chars().count() as u64;
        let mut rest = text;
        if !self.head_closed {
            let room = self.limits.head_bytes - self.head.len();
            if rest.len() <= room {
                self.head.push_str(rest);
                return;
            }
            let cut = floor_char_boundary(rest, room);
            self.head.push_str(&rest[..cut]);
            rest = &rest[cut..];
            self.head_closed = true;
        }
        self.push_tail(rest);
    }

    fn push_tail(&mut self, text: &str) {
        let cap = self.limits.tail_bytes;
        if text.len() >= cap {
            // The new text alone fills the ring: keep only its end.
            self.dropped += self.tail.len() as u64;
            self.tail.clear();
            let start = ceil_char_boundary(text, text.len() - cap);
            self.dropped += start as u64;
            self.tail.extend(&text.as_bytes()[start..]);
            return;
        }
        self.tail.extend(text.as_bytes());
        let excess = self.tail.len().saturating_sub(cap);
        if excess > 0 {
            self.tail.drain(..excess);
            let mut removed = excess;
            // Never keep half a character at the front.
            while self.tail.front().is_some_and(|byte| is_continuation(*byte)) {
                self.tail.pop_front();
                removed += 1;
            }
            self.dropped += removed as u64;
        }
    }

    /// Bytes of text pushed so far.
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// Characters (Unicode scalar values) pushed so far.
    pub fn total_chars(&self) -> u64 {
        self.total_chars
    }

    /// Bytes dropped between head and tail.
    pub fn dropped_bytes(&self) -> u64 {
        self.dropped
    }

    /// Bytes held in the head.
    pub fn head_len(&self) -> usize {
        self.head.len()
    }

    /// Bytes held in the tail ring.
    pub fn tail_len(&self) -> usize {
        self.tail.len()
    }

    /// The limits this buffer was made with.
    pub fn limits(&self) -> BufferLimits {
        self.limits
    }

    /// Where the stream ends now: where the next read starts.
    pub fn end(&self) -> StreamPosition {
        StreamPosition {
            bytes: self.total_bytes,
            chars: self.total_chars,
        }
    }

    /// Everything kept, with the gap between head and tail.
    pub fn snapshot(&self) -> OutputSlice {
        self.read_from(StreamPosition::default())
    }

    /// The text after `from` (a position an earlier read returned, or the
    /// default, the start), and the position to read from next time.
    pub fn read_since(&self, from: StreamPosition) -> (OutputSlice, StreamPosition) {
        (self.read_from(from), self.end())
    }

    fn read_from(&self, from: StreamPosition) -> OutputSlice {
        let head_len = self.head.len() as u64;
        let tail_start = self.total_bytes - self.tail.len() as u64;
        let cursor = from.bytes.min(self.total_bytes);
        let before_gap = if cursor < head_len {
            // Cursors are only ever 0 or a former total, so this is a char boundary.
            self.head
                .get(to_index(cursor)..)
                .unwrap_or_default()
                .to_owned()
        } else {
            String::new()
        };
        let gap_from = cursor.max(head_len);
        let dropped = tail_start.saturating_sub(gap_from);
        let start = to_index(cursor.max(tail_start) - tail_start);
        let after_gap = self.tail_text(start);
        // Counted here, not as bytes leave the ring, so that capture pays
        // nothing for it: whatever of the stream after `from` is not in the
        // two texts was dropped.
        let dropped_chars = if dropped == 0 {
            0
        } else {
            let unread = self.total_chars.saturating_sub(from.chars);
            let kept = (before_gap.chars().count() + after_gap.chars().count()) as u64;
            unread.saturating_sub(kept)
        };
        OutputSlice {
            before_gap,
            dropped,
            dropped_chars,
            after_gap,
        }
    }

    fn tail_text(&self, from: usize) -> String {
        let (first, second) = self.tail.as_slices();
        let mut bytes = Vec::with_capacity(self.tail.len().saturating_sub(from));
        if from < first.len() {
            bytes.extend_from_slice(&first[from..]);
            bytes.extend_from_slice(second);
        } else {
            bytes.extend_from_slice(&second[from - first.len()..]);
        }
        // The ring holds whole characters and `from` is a boundary, so this
        // never allocates a replacement.
        match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(error) => String::from_utf8_lossy(error.as_bytes()).into_owned(),
        }
    }
}

fn to_index(offset: u64) -> usize {
    usize::try_from(offset).unwrap_or(usize::MAX)
}

fn is_continuation(byte: u8) -> bool {
    byte & 0b1100_0000 == 0b1000_0000
}

/// The largest char boundary at or below `index`.
fn floor_char_boundary(text: &str, index: usize) -> usize {
    let mut index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

/// The smallest char boundary at or above `index`.
fn ceil_char_boundary(text: &str, index: usize) -> usize {
    let mut index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index += 1;
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn limits(head: usize, tail: usize) -> BufferLimits {
        BufferLimits {
            head_bytes: head,
            tail_bytes: tail,
        }
    }

    fn assert_invariants(buffer: &OutputBuffer) {
        assert_eq!(
            buffer.head_len() as u64 + buffer.dropped_bytes() + buffer.tail_len() as u64,
            buffer.total_bytes()
        );
        assert!(buffer.head_len() <= buffer.limits().head_bytes);
        assert!(buffer.tail_len() <= buffer.limits().tail_bytes);
    }

    #[test]
    fn small_output_is_kept_whole() {
        let mut buffer = OutputBuffer::new(limits(8, 8));
        buffer.push("hello");
        assert_eq!(buffer.snapshot().render(), "hello");
        assert_eq!(buffer.dropped_bytes(), 0);
    }

    #[test]
    fn overflow_keeps_head_and_tail_with_a_marker() {
        let mut buffer = OutputBuffer::new(limits(4, 4));
        buffer.push("abcdefghijkl");
        let snapshot = buffer.snapshot();
        assert_eq!(snapshot.before_gap, "abcd");
        assert_eq!(snapshot.dropped, 4);
        assert_eq!(snapshot.after_gap, "ijkl");
        assert_eq!(snapshot.render(), "abcd\n[... 4 bytes dropped ...]\nijkl");
        assert_invariants(&buffer);
    }

    #[test]
    fn cursor_reads_only_new_text_and_reports_what_it_missed() {
        let mut buffer = OutputBuffer::new(limits(4, 4));
        buffer.push("ab");
        let (first, cursor) = buffer.read_since(StreamPosition::default());
        assert_eq!(first.render(), "ab");
        let (nothing, cursor) = buffer.read_since(cursor);
        assert!(nothing.is_empty());
        buffer.push("cdefghijkl");
        let (second, cursor) = buffer.read_since(cursor);
        assert_eq!(second.before_gap, "cd");
        assert_eq!(second.dropped, 4);
        assert_eq!(second.after_gap, "ijkl");
        buffer.push("m");
        let (third, _) = buffer.read_since(cursor);
        assert_eq!(third.render(), "m");
    }

    #[test]
    fn a_reader_past_the_head_gets_the_newest_text() {
        let mut buffer = OutputBuffer::new(limits(2, 3));
        buffer.push("ab");
        let (_, cursor) = buffer.read_since(StreamPosition::default());
        buffer.push("0123456789");
        let (slice, _) = buffer.read_since(cursor);
        assert_eq!(slice.before_gap, "");
        assert_eq!(slice.dropped, 7);
        assert_eq!(slice.after_gap, "789");
    }

    #[test]
    fn characters_are_never_cut() {
        let mut buffer = OutputBuffer::new(limits(5, 5));
        buffer.push("ééééé");
        let snapshot = buffer.snapshot();
        assert_eq!(snapshot.before_gap, "éé");
        assert_eq!(snapshot.after_gap, "éé");
        assert_eq!(buffer.total_chars(), 5);
        assert_invariants(&buffer);
    }

    #[test]
    fn dropped_characters_are_counted_not_bytes() {
        let mut buffer = OutputBuffer::new(limits(4, 4));
        buffer.push("ab");
        let (_, cursor) = buffer.read_since(StreamPosition::default());
        // 2 + 10 characters, 2 + 30 bytes: the ring keeps the last "€".
        buffer.push("cd€€€€€€€€€€");
        let (slice, next) = buffer.read_since(cursor);
        assert_eq!(slice.before_gap, "cd");
        assert_eq!(slice.after_gap, "€");
        assert_eq!(slice.dropped, 27);
        assert_eq!(slice.dropped_chars, 9);
        assert_eq!(
            next,
            StreamPosition {
                bytes: 34,
                chars: 14
            }
        );
        let whole = buffer.snapshot();
        assert_eq!((whole.dropped, whole.dropped_chars), (27, 9));
    }

    fn text_strategy() -> impl Strategy<Value = Vec<String>> {
        proptest::collection::vec("(?s).{0,40}", 0..30)
    }

    proptest! {
        #[test]
        fn counts_add_up_and_the_cap_holds(
            pieces in text_strategy(),
            head in 0usize..32,
            tail in 0usize..32,
        ) {
            let mut buffer = OutputBuffer::new(limits(head, tail));
            let mut whole = String::new();
            for piece in &pieces {
                buffer.push(piece);
                whole.push_str(piece);
                assert_invariants(&buffer);
            }
            prop_assert_eq!(buffer.total_chars(), whole.chars().count() as u64);
            let snapshot = buffer.snapshot();
            prop_assert!(whole.starts_with(&snapshot.before_gap));
            prop_assert!(whole.ends_with(&snapshot.after_gap));
            if snapshot.dropped == 0 {
                prop_assert_eq!(snapshot.render(), whole);
            }
        }

        #[test]
        fn every_read_counts_the_characters_it_missed(
            pieces in text_strategy(),
            reads in proptest::collection::vec(any::<bool>(), 0..30),
            head in 0usize..24,
            tail in 0usize..24,
        ) {
            let mut buffer = OutputBuffer::new(limits(head, tail));
            let mut whole = String::new();
            let mut cursor = StreamPosition::default();
            let check = |buffer: &OutputBuffer, whole: &str, cursor: &mut StreamPosition| {
                let unread = &whole[to_index(cursor.bytes)..];
                let (slice, next) = buffer.read_since(*cursor);
                let shown = slice.before_gap.chars().count() + slice.after_gap.chars().count();
                prop_assert_eq!(
                    slice.dropped_chars,
                    (unread.chars().count() - shown) as u64
                );
                prop_assert_eq!(
                    slice.dropped,
                    (unread.len() - slice.before_gap.len() - slice.after_gap.len()) as u64
                );
                prop_assert_eq!(next.chars, whole.chars().count() as u64);
                *cursor = next;
                Ok(())
            };
            for (index, piece) in pieces.iter().enumerate() {
                buffer.push(piece);
                whole.push_str(piece);
                if reads.get(index).copied().unwrap_or(false) {
                    check(&buffer, &whole, &mut cursor)?;
                }
            }
            check(&buffer, &whole, &mut cursor)?;
        }

        #[test]
        fn successive_reads_see_every_byte_once(
            pieces in text_strategy(),
            reads in proptest::collection::vec(any::<bool>(), 0..30),
        ) {
            let mut buffer = OutputBuffer::new(limits(16, 16));
            let mut cursor = StreamPosition::default();
            let mut seen = 0u64;
            for (index, piece) in pieces.iter().enumerate() {
                buffer.push(piece);
                if reads.get(index).copied().unwrap_or(true) {
                    let (slice, next) = buffer.read_since(cursor);
                    seen += (slice.before_gap.len() + slice.after_gap.len()) as u64 + slice.dropped;
                    cursor = next;
                }
            }
            let (slice, _) = buffer.read_since(cursor);
            seen += (slice.before_gap.len() + slice.after_gap.len()) as u64 + slice.dropped;
            prop_assert_eq!(seen, buffer.total_bytes());
        }
    }
}
