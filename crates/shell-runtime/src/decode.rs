//! Incremental UTF-8 decoding that never splits a character across reads.

/// Decodes a byte stream arriving in arbitrary chunks. The text produced
/// over a whole stream equals `String::from_utf8_lossy` of all its bytes:
/// a character cut by a chunk boundary is held back until its remaining
/// bytes arrive, and each invalid sequence becomes one U+FFFD.
#[derive(Debug, Default, Clone)]
pub struct Utf8Decoder {
    /// Bytes of an incomplete character at the end of the last chunk (at most 3).
    pending: Vec<u8>,
}

impl Utf8Decoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes `chunk`, appending complete characters to `out`.
    pub fn decode(&mut self, chunk: &[u8], out: &mut String) {
        if self.pending.is_empty() {
            self.decode_bytes(chunk, out);
        } else {
            // A character was cut at the last boundary: decode it together
            // with this chunk. (Copies the chunk only when a cut happened.)
            let mut joined = std::mem::take(&mut self.pending);
            joined.extend_from_slice(chunk);
            self.decode_bytes(&joined, out);
        }
    }

    /// Ends the stream: a character left incomplete becomes U+FFFD.
    pub fn finish(&mut self, out: &mut String) {
        if !self.pending.is_empty() {
            self.pending.clear();
            out.push(char::REPLACEMENT_CHARACTER);
        }
    }

    fn decode_bytes(&mut self, mut bytes: &[u8], out: &mut String) {
        loop {
            match std::str::from_utf8(bytes) {
                Ok(text) => {
                    out.push_str(text);
                    return;
                }
                Err(error) => {
                    let (valid, rest) = bytes.split_at(error.valid_up_to());
                    // `valid_up_to` marks a prefix that is valid UTF-8, so this never falls back.
                    out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                    match error.error_len() {
                        Some(len) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            bytes = &rest[len..];
                        }
                        None => {
                            // An incomplete character at the end: hold it back.
                            self.pending.extend_from_slice(rest);
                            return;
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode_chunks(chunks: &[&[u8]]) -> String {
        let mut decoder = Utf8Decoder::new();
        let mut out = String::new();
        for chunk in chunks {
            decoder.decode(chunk, &mut out);
        }
        decoder.finish(&mut out);
        out
    }

    #[test]
    fn split_character_is_held_back() {
        let euro = "€".as_bytes();
        assert_eq!(decode_chunks(&[&euro[..1], &euro[1..2], &euro[2..]]), "€");
        assert_eq!(decode_chunks(&[b"a", &euro[..2], &[euro[2], b'b']]), "a€b");
    }

    #[test]
    fn invalid_bytes_become_replacement_characters() {
        assert_eq!(decode_chunks(&[b"a\xffb"]), "a\u{fffd}b");
        assert_eq!(decode_chunks(&[b"\xe2\x82", b"x"]), "\u{fffd}x");
        assert_eq!(decode_chunks(&[b"\xe2\x82"]), "\u{fffd}");
    }

    proptest! {
        /// Any chunking of any bytes decodes to `from_utf8_lossy` of the whole.
        #[test]
        fn any_chunking_matches_lossy_decoding(
            bytes in prop::collection::vec(any::<u8>(), 0..64),
            cuts in prop::collection::vec(0usize..64, 0..8),
        ) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
            cuts.sort_unstable();
            let mut chunks = Vec::new();
            let mut start = 0;
            for cut in cuts {
                chunks.push(&bytes[start..cut]);
                start = cut;
            }
            chunks.push(&bytes[start..]);
            prop_assert_eq!(decode_chunks(&chunks), String::from_utf8_lossy(&bytes).into_owned());
        }

        /// Valid UTF-8 cut anywhere decodes to itself.
        #[test]
        fn valid_text_survives_any_chunking(text in "\\PC{0,40}", cut in 0usize..200) {
            let bytes = text.as_bytes();
            let cut = cut.min(bytes.len());
            prop_assert_eq!(decode_chunks(&[&bytes[..cut], &bytes[cut..]]), text);
        }
    }
}
