//! Bounded capture of one output stream: a head, a tail ring and counts.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::pool::{Chunk, MemoryPool, Reserved, Tally};

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

/// Bytes of a stream in pool chunks: a run of consecutive bytes that loses
/// bytes at the front (read, or dropped from the ring) and, for the head
/// when the pool needs room, at the back. Every chunk but the last is full.
#[derive(Debug)]
struct Segment {
    /// The pool's chunk size.
    chunk_bytes: usize,
    chunks: VecDeque<Chunk>,
    /// Bytes at the start of the first chunk that are no longer part of it.
    front: usize,
    len: usize,
}

impl Segment {
    fn new(chunk_bytes: usize) -> Self {
        Self {
            chunk_bytes,
            chunks: VecDeque::new(),
            front: 0,
            len: 0,
        }
    }

    /// Chunks that appending `len` bytes takes.
    fn chunks_needed(&self, len: usize) -> usize {
        let room = self.chunks.back().map_or(0, Chunk::room);
        len.saturating_sub(room).div_ceil(self.chunk_bytes)
    }

    /// Appends `bytes`; false, with nothing appended, when the chunks it
    /// needs cannot be had.
    fn push(&mut self, bytes: &[u8], reserved: &mut Reserved, tally: &Arc<Tally>) -> bool {
        let needed = self.chunks_needed(bytes.len());
        let room = self.chunks.back().map_or(0, Chunk::room);
        let mut fresh = Vec::with_capacity(needed);
        let mut left = bytes.len().saturating_sub(room);
        for _ in 0..needed {
            match reserved.chunk(tally, left.min(self.chunk_bytes)) {
                Some(chunk) => fresh.push(chunk),
                None => return false,
            }
            left = left.saturating_sub(self.chunk_bytes);
        }
        let mut rest = bytes;
        if let Some(last) = self.chunks.back_mut() {
            let fits = last.room().min(rest.len());
            last.extend(&rest[..fits]);
            rest = &rest[fits..];
        }
        for mut chunk in fresh {
            let fits = self.chunk_bytes.min(rest.len());
            chunk.extend(&rest[..fits]);
            rest = &rest[fits..];
            self.chunks.push_back(chunk);
        }
        self.len += bytes.len();
        true
    }

    /// Removes the first `count` bytes, freeing the chunks they emptied.
    fn pop_front(&mut self, count: usize) {
        let count = count.min(self.len);
        self.len -= count;
        self.front += count;
        while let Some(first) = self.chunks.front() {
            if self.front < first.bytes.len() {
                break;
            }
            self.front -= first.bytes.len();
            self.chunks.pop_front();
        }
        if self.len == 0 {
            self.clear();
        }
    }

    /// Keeps the first `len` bytes, freeing the chunks after them.
    fn truncate(&mut self, len: usize) {
        let mut remove = self.len.saturating_sub(len);
        while remove > 0 {
            let only = self.chunks.len() == 1;
            let Some(last) = self.chunks.back_mut() else {
                break;
            };
            let in_last = if only {
                last.bytes.len() - self.front
            } else {
                last.bytes.len()
            };
            if in_last <= remove {
                self.chunks.pop_back();
                remove -= in_last;
            } else {
                let keep = last.bytes.len() - remove;
                last.bytes.truncate(keep);
                remove = 0;
            }
        }
        self.len = len.min(self.len);
        if self.len == 0 {
            self.clear();
        }
    }

    fn clear(&mut self) {
        self.chunks.clear();
        self.front = 0;
        self.len = 0;
    }

    /// Bytes of the segment in its first chunk.
    fn first_run(&self) -> usize {
        self.chunks
            .front()
            .map_or(0, |first| (first.bytes.len() - self.front).min(self.len))
    }

    /// Bytes of the segment in its last chunk.
    fn last_run(&self) -> usize {
        match self.chunks.len() {
            0 => 0,
            1 => self.len,
            _ => self.chunks.back().map_or(0, |last| last.bytes.len()),
        }
    }

    /// The byte at `index` (below `len`).
    fn byte_at(&self, index: usize) -> u8 {
        let at = self.front + index;
        self.chunks
            .get(at / self.chunk_bytes)
            .and_then(|chunk| chunk.bytes.get(at % self.chunk_bytes))
            .copied()
            .unwrap_or(0)
    }

    /// The bytes from `from` to the end, as text: the segment holds whole
    /// characters and `from` is a boundary, so this never replaces any.
    fn text_from(&self, from: usize) -> String {
        let mut bytes = Vec::with_capacity(self.len.saturating_sub(from));
        let mut at = self.front + from.min(self.len);
        let end = self.front + self.len;
        while at < end {
            let Some(chunk) = self.chunks.get(at / self.chunk_bytes) else {
                break;
            };
            let offset = at % self.chunk_bytes;
            let upto = chunk.bytes.len().min(offset + (end - at));
            if upto <= offset {
                break;
            }
            bytes.extend_from_slice(&chunk.bytes[offset..upto]);
            at += upto - offset;
        }
        match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(error) => String::from_utf8_lossy(error.as_bytes()).into_owned(),
        }
    }
}

/// The decoded text of one stream, bounded: the first `head_bytes`, the last
/// `tail_bytes`, and counts of everything in between. The bytes live in
/// chunks of a [`MemoryPool`]: one shared by every shell of a server, or
/// one of its own without a limit ([`OutputBuffer::new`]). When a shared
/// pool is spent, the buffer holding the most loses its oldest bytes: the
/// ring's first, then the head's last, so the gap stays one.
///
/// Invariant: `head_len + dropped + released + tail_len == total_bytes`,
/// and the kept bytes never exceed [`BufferLimits::capacity`]. Both parts
/// always hold whole characters.
#[derive(Debug)]
pub struct OutputBuffer {
    limits: BufferLimits,
    pool: MemoryPool,
    tally: Arc<Tally>,
    head: Segment,
    /// Where the head starts in the stream: 0 until a reader has read it
    /// all and it was freed ([`OutputBuffer::release_before`]).
    head_start: u64,
    /// Bytes ever put in the head: it takes `head_bytes` at most in all.
    head_taken: usize,
    /// Set once a character did not fit in the head: everything after goes to the tail.
    head_closed: bool,
    /// Valid UTF-8 as a whole; only ever cut at character boundaries.
    tail: Segment,
    total_bytes: u64,
    total_chars: u64,
    dropped: u64,
    released: u64,
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
    /// An empty buffer with a pool of its own, without a limit.
    pub fn new(limits: BufferLimits) -> Self {
        let pool = MemoryPool::unbounded();
        let tally = Tally::new(&pool);
        Self::in_pool(limits, pool, tally)
    }

    /// An empty buffer whose chunks count against `tally` in `pool`.
    pub(crate) fn in_pool(limits: BufferLimits, pool: MemoryPool, tally: Arc<Tally>) -> Self {
        let chunk_bytes = pool.chunk_bytes();
        Self {
            limits,
            pool,
            tally,
            head: Segment::new(chunk_bytes),
            head_start: 0,
            head_taken: 0,
            head_closed: limits.head_bytes == 0,
            tail: Segment::new(chunk_bytes),
            total_bytes: 0,
            total_chars: 0,
            dropped: 0,
            released: 0,
        }
    }

    /// Appends decoded text. When the pool is spent, this buffer's own
    /// oldest bytes make room (a buffer used on its own has no other to
    /// take from; shells sharing a pool reserve before they lock, see
    /// [`MemoryPool`]).
    pub fn push(&mut self, text: &str) {
        let mut reserved = loop {
            let wanted = self.chunks_needed(text);
            if let Some(reserved) = self.pool.try_reserve(wanted) {
                break reserved;
            }
            if self.drop_oldest() == 0 {
                break self.pool.reserve_up_to(wanted);
            }
        };
        self.push_reserved(text, &mut reserved);
    }

    /// New chunks [`push_reserved`](Self::push_reserved) takes for `text`
    /// before the ring lets go of its oldest.
    pub(crate) fn chunks_needed(&self, text: &str) -> usize {
        let mut rest = text;
        let mut needed = 0;
        if !self.head_closed {
            let room = self.limits.head_bytes - self.head_taken;
            let cut = if rest.len() <= room {
                rest.len()
            } else {
                floor_char_boundary(rest, room)
            };
            needed += self.head.chunks_needed(cut);
            rest = &rest[cut..];
        }
        if rest.is_empty() {
            return needed;
        }
        if rest.len() >= self.limits.tail_bytes {
            // The ring is emptied first and keeps the text's end.
            needed + self.limits.tail_bytes.div_ceil(self.pool.chunk_bytes())
        } else {
            needed + self.tail.chunks_needed(rest.len())
        }
    }

    /// Appends decoded text into chunks from `reserved`. Should the chunks
    /// run out, what does not fit is dropped and counted, never held.
    pub(crate) fn push_reserved(&mut self, text: &str, reserved: &mut Reserved) {
        if text.is_empty() {
            return;
        }
        self.total_bytes += text.len() as u64;
        self.total_chars += text.chars().count() as u64;
        let mut rest = text;
        if !self.head_closed {
            let room = self.limits.head_bytes - self.head_taken;
            let cut = if rest.len() <= room {
                rest.len()
            } else {
                floor_char_boundary(rest, room)
            };
            let part = &rest[..cut];
            if self.head.push(part.as_bytes(), reserved, &self.tally) {
                self.head_taken += part.len();
            } else {
                self.dropped += part.len() as u64;
                self.head_closed = true;
            }
            rest = &rest[cut..];
            if rest.is_empty() {
                return;
            }
            self.head_closed = true;
        }
        self.push_tail(rest, reserved);
    }

    fn push_tail(&mut self, text: &str, reserved: &mut Reserved) {
        let cap = self.limits.tail_bytes;
        if text.len() >= cap {
            // The new text alone fills the ring: keep only its end.
            self.dropped += self.tail.len as u64;
            self.tail.clear();
            let start = ceil_char_boundary(text, text.len() - cap);
            self.dropped += start as u64;
            self.store_tail(&text[start..], reserved);
            return;
        }
        self.store_tail(text, reserved);
        let excess = self.tail.len.saturating_sub(cap);
        if excess > 0 {
            let mut removed = excess;
            // Never keep half a character at the front.
            while removed < self.tail.len && is_continuation(self.tail.byte_at(removed)) {
                removed += 1;
            }
            self.tail.pop_front(removed);
            self.dropped += removed as u64;
        }
    }

    fn store_tail(&mut self, text: &str, reserved: &mut Reserved) {
        if !self.tail.push(text.as_bytes(), reserved, &self.tally) {
            self.dropped += (self.tail.len + text.len()) as u64;
            self.tail.clear();
        }
    }

    /// Drops the oldest bytes this buffer may lose, at least the rest of
    /// a chunk when it holds one: the ring's first bytes, or once the ring
    /// is empty the head's last (the start of a stream is what a reader
    /// most needs, and the gap stays one). Returns the bytes dropped.
    pub(crate) fn drop_oldest(&mut self) -> u64 {
        if self.tail.len > 0 {
            let mut count = self.tail.first_run();
            while count < self.tail.len && is_continuation(self.tail.byte_at(count)) {
                count += 1;
            }
            self.tail.pop_front(count);
            self.dropped += count as u64;
            return count as u64;
        }
        if self.head.len > 0 {
            let mut keep = self.head.len - self.head.last_run();
            while keep > 0 && is_continuation(self.head.byte_at(keep)) {
                keep -= 1;
            }
            let count = self.head.len - keep;
            self.head.truncate(keep);
            self.head_closed = true;
            self.dropped += count as u64;
            return count as u64;
        }
        0
    }

    /// Frees what comes before `read` (a position a read returned), which
    /// its one consuming reader has seen: the head once it was read whole,
    /// and the ring up to `read`. A reader still behind `read` finds that
    /// part in its gap.
    pub fn release_before(&mut self, read: StreamPosition) {
        let read = read.bytes.min(self.total_bytes);
        let head_end = self.head_start + self.head.len as u64;
        if self.head.len > 0 && read >= head_end {
            self.released += self.head.len as u64;
            self.head.clear();
            self.head_start = head_end;
        }
        let tail_start = self.total_bytes - self.tail.len as u64;
        if read > tail_start {
            let count = to_index(read - tail_start);
            self.tail.pop_front(count);
            self.released += count as u64;
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

    /// Bytes freed after their reader read them.
    pub fn released_bytes(&self) -> u64 {
        self.released
    }

    /// Bytes held in the head.
    pub fn head_len(&self) -> usize {
        self.head.len
    }

    /// Bytes held in the tail ring.
    pub fn tail_len(&self) -> usize {
        self.tail.len
    }

    /// Pool chunks held.
    pub fn held_chunks(&self) -> usize {
        self.head.chunks.len() + self.tail.chunks.len()
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
        let head_end = self.head_start + self.head.len as u64;
        let tail_start = self.total_bytes - self.tail.len as u64;
        let cursor = from.bytes.min(self.total_bytes);
        let before_gap = if cursor >= self.head_start && cursor < head_end {
            // Cursors are only ever 0 or a former total, so this is a char boundary.
            self.head.text_from(to_index(cursor - self.head_start))
        } else {
            String::new()
        };
        let after_gap = self
            .tail
            .text_from(to_index(cursor.max(tail_start) - tail_start));
        // Whatever of the stream after `from` is not in the two texts was
        // dropped (or freed after its reader read it).
        let dropped =
            (self.total_bytes - cursor).saturating_sub((before_gap.len() + after_gap.len()) as u64);
        // Counted here, not as bytes leave the ring, so that capture pays
        // nothing for it.
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
mod pool_tests;

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

    /// A buffer whose chunks are `chunk` bytes, so that short texts cross
    /// chunk boundaries as long output does.
    fn chunked(limits: BufferLimits, chunk: usize) -> OutputBuffer {
        let pool = MemoryPool::with_chunk_bytes(u64::MAX, chunk);
        let tally = Tally::new(&pool);
        OutputBuffer::in_pool(limits, pool, tally)
    }

    fn assert_invariants(buffer: &OutputBuffer) {
        assert_eq!(
            buffer.head_len() as u64
                + buffer.dropped_bytes()
                + buffer.released_bytes()
                + buffer.tail_len() as u64,
            buffer.total_bytes()
        );
        assert!(buffer.head_len() <= buffer.limits().head_bytes);
        assert!(buffer.tail_len() <= buffer.limits().tail_bytes);
    }

    #[test]
    fn making_room_takes_the_ring_first_then_the_head_from_its_end() {
        let mut buffer = chunked(limits(8, 8), 4);
        buffer.push("abcdefgh0123456789");
        assert_eq!(
            buffer.snapshot().render(),
            "abcdefgh\n[... 2 bytes dropped ...]\n23456789"
        );
        assert_eq!(buffer.held_chunks(), 4);
        assert_eq!(buffer.drop_oldest(), 4);
        assert_eq!(buffer.drop_oldest(), 4);
        assert_eq!(buffer.drop_oldest(), 4);
        assert_eq!(buffer.held_chunks(), 1);
        assert_eq!(
            buffer.snapshot().render(),
            "abcd\n[... 14 bytes dropped ...]\n"
        );
        // The head is closed: what comes next goes to the ring.
        buffer.push("xy");
        assert_eq!(
            buffer.snapshot().render(),
            "abcd\n[... 14 bytes dropped ...]\nxy"
        );
        assert_invariants(&buffer);
    }

    #[test]
    fn a_character_is_never_cut_when_making_room() {
        let mut buffer = chunked(limits(0, 64), 4);
        buffer.push("ééé");
        // The first chunk ends inside the second "é": it goes too.
        assert_eq!(buffer.drop_oldest(), 4);
        assert_eq!(buffer.snapshot().after_gap, "é");
        let mut head = chunked(limits(64, 0), 4);
        head.push("aéé");
        assert_eq!(head.drop_oldest(), 2);
        assert_eq!(head.snapshot().before_gap, "aé");
    }

    #[test]
    fn what_the_reader_read_is_freed() {
        let mut buffer = chunked(limits(4, 8), 4);
        buffer.push("abcdef");
        let (first, at) = buffer.read_since(StreamPosition::default());
        assert_eq!(first.render(), "abcdef");
        buffer.release_before(at);
        assert_eq!(buffer.held_chunks(), 0);
        assert_eq!(buffer.released_bytes(), 6);
        buffer.push("gh");
        let (second, _) = buffer.read_since(at);
        assert_eq!(second.render(), "gh");
        // A reader behind finds the freed part in its gap, counted.
        let whole = buffer.snapshot();
        assert_eq!((whole.dropped, whole.dropped_chars), (6, 6));
        assert_eq!(whole.after_gap, "gh");
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
            chunk in 4usize..40,
        ) {
            let mut buffer = chunked(limits(head, tail), chunk);
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
            chunk in 4usize..40,
        ) {
            let mut buffer = chunked(limits(head, tail), chunk);
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
            chunk in 4usize..40,
        ) {
            let mut buffer = chunked(limits(16, 16), chunk);
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
