//! Output capture: one reader task per stream decodes the pipe's bytes as
//! UTF-8, replaces secrets, and pushes the text into the stream's
//! [`OutputBuffer`] and, once the stream outgrows memory, its spill file.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::io::AsyncReadExt;

use super::{ShellProcess, Stream};
use crate::buffer::{BufferLimits, OutputBuffer, OutputSlice};
use crate::decode::Utf8Decoder;
use crate::redact::StreamReplacer;
use crate::spec::SpillFile;

const READ_CHUNK: usize = 64 * 1024;

/// What the spill file of a stream holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpillReport {
    /// The file.
    pub file: SpillFile,
    /// Whether the file exists: it is made only when the stream outgrows
    /// memory, or on [`ShellProcess::ensure_spill_file`].
    pub on_disk: bool,
    /// Bytes the file holds.
    pub written: u64,
    /// Why the file does not hold the whole stream, if it does not.
    pub shortfall: Option<SpillShortfall>,
}

impl SpillReport {
    /// Whether the file holds the whole stream.
    pub fn is_whole(&self) -> bool {
        self.shortfall.is_none()
    }
}

/// Why a spill file lacks part of its stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpillShortfall {
    /// The stream was longer than the file's cap; the file holds its start.
    Cap,
    /// The budget the file shares with others was spent; the file holds
    /// the start of the stream.
    Budget,
    /// Creating or writing the file failed (a full disk, say); the file
    /// holds what was written before.
    WriteFailed(std::io::ErrorKind),
}

impl SpillShortfall {
    /// Why, in a few words: `the per-command cap was reached`,
    /// `the disk is full`, or the error.
    pub fn reason(self) -> String {
        match self {
            Self::Cap => "the per-command cap was reached".to_owned(),
            Self::Budget => "the server's budget for output files was reached".to_owned(),
            Self::WriteFailed(
                std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded,
            ) => "the disk is full".to_owned(),
            Self::WriteFailed(kind) => format!("writing it failed ({kind})"),
        }
    }
}

/// The copy of a stream on disk. It is created only once the stream
/// outgrows what memory keeps (or someone asks for the file): until then
/// memory holds every byte, and most commands never need the file.
pub(super) struct Spill {
    file: SpillFile,
    opened: bool,
    writer: Option<BufWriter<File>>,
    written: u64,
    shortfall: Option<SpillShortfall>,
    /// The stream has ended: a file made now is written whole and closed
    /// at once, so a finished shell holds no descriptor.
    stream_ended: bool,
}

/// The longest start of `text` of at most `bytes` bytes that ends on a
/// character boundary, so a file cut there stays valid UTF-8.
fn cut_at_char(text: &str, bytes: u64) -> &str {
    let mut cut = usize::try_from(bytes).unwrap_or(usize::MAX).min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    &text[..cut]
}

impl Spill {
    fn new(file: &SpillFile) -> Self {
        Self {
            file: file.clone(),
            opened: false,
            writer: None,
            written: 0,
            shortfall: None,
            stream_ended: false,
        }
    }

    /// Creates the file and writes `so_far`, the whole stream until now.
    fn open(&mut self, so_far: &OutputSlice) {
        self.opened = true;
        match File::create(&self.file.path) {
            Ok(file) => self.writer = Some(BufWriter::with_capacity(READ_CHUNK, file)),
            Err(error) => self.fail(&error),
        }
        self.write(&so_far.before_gap);
        self.write(&so_far.after_gap);
    }

    fn write(&mut self, text: &str) {
        let Some(writer) = self.writer.as_mut() else {
            return;
        };
        let room = self.file.cap_bytes.saturating_sub(self.written);
        let mut part = text;
        let mut short = None;
        if part.len() as u64 > room {
            part = cut_at_char(part, room);
            short = Some(SpillShortfall::Cap);
        }
        if let Some(budget) = &self.file.budget {
            let granted = budget.take(part.len() as u64);
            if granted < part.len() as u64 {
                part = cut_at_char(part, granted);
                // A cut inside a character leaves a byte or three unused.
                budget.give_back(granted - part.len() as u64);
                short = Some(SpillShortfall::Budget);
            }
        }
        if short.is_some() {
            self.shortfall = short;
        }
        // Spill files live on a local disk or tmpfs: a blocking write of a
        // buffered chunk costs microseconds, less than a blocking-pool hop.
        if let Err(error) = writer.write_all(part.as_bytes()) {
            if let Some(budget) = &self.file.budget {
                budget.give_back(part.len() as u64);
            }
            self.fail(&error);
            return;
        }
        self.written += part.len() as u64;
        if self.shortfall.is_some() {
            self.finish();
        }
    }

    /// Records a failed create, write or flush and stops writing. What the
    /// file holds is then its length on disk: a buffered writer may have
    /// written part of what it was given.
    fn fail(&mut self, error: &std::io::Error) {
        self.shortfall = Some(SpillShortfall::WriteFailed(error.kind()));
        let handed_over = self.written;
        if let Some(writer) = self.writer.take() {
            // Dropping the writer would try to flush again; its buffer is
            // what could not be written.
            let (file, _unwritten) = writer.into_parts();
            self.written = file.metadata().map_or(0, |meta| meta.len());
        } else {
            self.written = std::fs::metadata(&self.file.path).map_or(0, |meta| meta.len());
        }
        if let Some(budget) = &self.file.budget {
            budget.give_back(handed_over.saturating_sub(self.written));
        }
    }

    /// Flushes what was written so far, keeping the file open for more.
    fn flush(&mut self) {
        if let Some(writer) = self.writer.as_mut()
            && let Err(error) = writer.flush()
        {
            self.fail(&error);
        }
    }

    fn finish(&mut self) {
        self.flush();
        self.writer = None;
    }

    pub(super) fn report(&self) -> SpillReport {
        SpillReport {
            file: self.file.clone(),
            on_disk: self.opened,
            written: self.written,
            shortfall: self.shortfall,
        }
    }
}

/// One captured stream.
pub(super) struct Capture {
    buffer: Mutex<OutputBuffer>,
    spill: Mutex<Option<Spill>>,
}

impl Capture {
    pub(super) fn new(limits: BufferLimits, spill: Option<&SpillFile>) -> Self {
        Self {
            buffer: Mutex::new(OutputBuffer::new(limits)),
            spill: Mutex::new(spill.map(Spill::new)),
        }
    }

    pub(super) fn buffer(&self) -> MutexGuard<'_, OutputBuffer> {
        self.buffer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn spill(&self) -> MutexGuard<'_, Option<Spill>> {
        self.spill.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, text: &str) {
        let mut buffer = self.buffer();
        if let Some(spill) = self.spill().as_mut() {
            if !spill.opened
                && buffer.total_bytes() + text.len() as u64 > buffer.limits().capacity() as u64
            {
                // Nothing was dropped yet, so the buffer holds the whole stream.
                spill.open(&buffer.snapshot());
            }
            if spill.opened {
                spill.write(text);
            }
        }
        buffer.push(text);
    }

    pub(super) fn ensure_spill_file(&self) -> Option<SpillReport> {
        let buffer = self.buffer();
        let mut spill = self.spill();
        let spill = spill.as_mut()?;
        if !spill.opened {
            spill.open(&buffer.snapshot());
            if spill.stream_ended {
                spill.finish();
            } else {
                spill.flush();
            }
        }
        Some(spill.report())
    }
}

pub(super) async fn read_stream(
    shell: Arc<ShellProcess>,
    stream: Stream,
    mut pipe: crate::spawn::Pipe,
    mut replacer: StreamReplacer,
) {
    let capture = shell.capture(stream);
    let mut decoder = Utf8Decoder::new();
    let mut bytes = vec![0u8; READ_CHUNK];
    let mut text = String::with_capacity(READ_CHUNK + 4);
    loop {
        match pipe.read(&mut bytes).await {
            Ok(0) | Err(_) => break,
            Ok(read) => {
                if stream == Stream::Stdout {
                    shell.feed_screen(&bytes[..read]);
                }
                text.clear();
                decoder.decode(&bytes[..read], &mut text);
                replacer.push_to(&text, |piece| capture.push(piece));
                shell.notify_output();
            }
        }
    }
    text.clear();
    decoder.finish(&mut text);
    replacer.push_to(&text, |piece| capture.push(piece));
    replacer.finish_to(|piece| capture.push(piece));
    if let Some(spill) = capture.spill().as_mut() {
        spill.finish();
        spill.stream_ended = true;
    }
    shell.notify_output();
}
