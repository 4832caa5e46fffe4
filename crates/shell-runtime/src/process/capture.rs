//! Output capture: one reader task per stream decodes the pipe's bytes as
//! UTF-8, replaces secrets, and pushes the text into the stream's
//! [`OutputBuffer`] and, once the stream outgrows memory, its spill file.

use std::fs::File;
use std::io::Write;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::Poll;

use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};

use super::{ShellProcess, Stream};
use crate::buffer::{BufferLimits, OutputBuffer, OutputSlice, StreamPosition};
use crate::decode::Utf8Decoder;
use crate::pool::{Account, Holder, MemoryPool, Tally};
use crate::redact::StreamReplacer;
use crate::spec::SpillFile;
use crate::terminal_text::TerminalText;

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
/// outgrows what memory keeps, memory must drop part of it, or someone asks
/// for the file: until then memory holds every byte, and most commands
/// never need the file. Written without a buffer of its own: the pieces
/// are a read's worth already, and an idle stream holds no write buffer.
pub(super) struct Spill {
    file: SpillFile,
    opened: bool,
    writer: Option<File>,
    /// Bytes handed over and not written yet: a read's worth at most, and
    /// freed when the stream goes idle.
    pending: Vec<u8>,
    written: u64,
    shortfall: Option<SpillShortfall>,
    /// The stream has ended: a file made now is written whole and closed
    /// at once, so a finished shell holds no descriptor.
    stream_ended: bool,
    /// For a terminal's stream: the file gets its text cleaned, then
    /// redacted again (a secret drawn in pieces, `SEC\e[0mRET`, is whole
    /// only once the sequences are gone).
    terminal: Option<TerminalFile>,
}

/// How a terminal's text reaches its file: cleaned, then redacted.
struct TerminalFile {
    cleaner: TerminalText,
    replacer: StreamReplacer,
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
    /// A spill file for `file`; `terminal` (the stream's redactions) when
    /// the stream is a terminal's, whose file holds cleaned text.
    fn new(file: &SpillFile, terminal: Option<StreamReplacer>) -> Self {
        Self {
            terminal: terminal.map(|replacer| TerminalFile {
                cleaner: TerminalText::new(),
                replacer,
            }),
            file: file.clone(),
            opened: false,
            writer: None,
            pending: Vec::new(),
            written: 0,
            shortfall: None,
            stream_ended: false,
        }
    }

    /// Creates the file and writes `so_far`, the whole stream until now.
    fn open(&mut self, so_far: &OutputSlice) {
        self.opened = true;
        match File::create(&self.file.path) {
            Ok(file) => self.writer = Some(file),
            Err(error) => self.fail(&error),
        }
        self.feed(&so_far.before_gap);
        self.feed(&so_far.after_gap);
        if self.stream_ended {
            self.end_text();
        }
    }

    /// Hands the stream's next text to the file: as is, or for a terminal
    /// cleaned and redacted (what a cleaner or a replacer holds back comes
    /// with a later piece or at the end).
    fn feed(&mut self, text: &str) {
        if self.writer.is_none() {
            return;
        }
        let Some(terminal) = self.terminal.as_mut() else {
            self.write(text);
            return;
        };
        let mut cleaned = String::new();
        terminal.cleaner.push(text, &mut cleaned);
        let mut redacted = String::new();
        terminal.replacer.push(&cleaned, &mut redacted);
        self.write(&redacted);
    }

    /// The stream ended: what a terminal's cleaner and replacer held back
    /// goes to the file.
    fn end_text(&mut self) {
        let Some(terminal) = self.terminal.as_mut() else {
            return;
        };
        let mut cleaned = String::new();
        terminal.cleaner.finish(&mut cleaned);
        let mut redacted = String::new();
        terminal.replacer.push(&cleaned, &mut redacted);
        terminal.replacer.finish(&mut redacted);
        if self.writer.is_some() {
            self.write(&redacted);
        }
    }

    /// The stream ended: the rest of the text is written and the file
    /// closed; a file made later is written whole and closed at once.
    fn end_stream(&mut self) {
        self.end_text();
        self.finish();
        self.stream_ended = true;
    }

    fn write(&mut self, text: &str) {
        if self.writer.is_none() {
            return;
        }
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
        self.pending.extend_from_slice(part.as_bytes());
        self.written += part.len() as u64;
        if self.pending.len() >= READ_CHUNK {
            self.flush();
        }
        if self.shortfall.is_some() {
            self.finish();
        }
    }

    /// Records a failed create, write or flush and stops writing. What the
    /// file holds is then its length on disk: a write may have written
    /// part of what it was given.
    fn fail(&mut self, error: &std::io::Error) {
        self.shortfall = Some(SpillShortfall::WriteFailed(error.kind()));
        self.pending = Vec::new();
        let handed_over = self.written;
        if let Some(file) = self.writer.take() {
            self.written = file.metadata().map_or(0, |meta| meta.len());
        } else {
            self.written = std::fs::metadata(&self.file.path).map_or(0, |meta| meta.len());
        }
        if let Some(budget) = &self.file.budget {
            budget.give_back(handed_over.saturating_sub(self.written));
        }
    }

    /// Writes what was handed over so far, keeping the file open for more.
    /// Spill files live on a local disk or tmpfs: a blocking write of a
    /// read's worth costs microseconds, less than a blocking-pool hop.
    fn flush(&mut self) {
        if let Some(writer) = self.writer.as_mut()
            && !self.pending.is_empty()
        {
            let written = writer.write_all(&self.pending);
            self.pending.clear();
            if let Err(error) = written {
                self.fail(&error);
            }
        }
    }

    /// The stream has nothing to read for now: writes what is pending and
    /// frees the buffer, so an idle shell holds none.
    fn idle(&mut self) {
        self.flush();
        self.pending = Vec::new();
    }

    fn finish(&mut self) {
        self.idle();
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

/// One captured stream. Its buffer's chunks come from the server's
/// [`MemoryPool`], which may drop its oldest output to make room for
/// another shell's (after copying it to the spill file, so the file still
/// has it).
pub(super) struct Capture {
    buffer: Mutex<OutputBuffer>,
    spill: Mutex<Option<Spill>>,
    pool: MemoryPool,
    tally: Arc<Tally>,
}

impl Capture {
    /// A capture counted in `account` (its shell's) for as long as it lives.
    /// `terminal` holds the stream's redactions when it is a terminal's:
    /// its spill file then gets cleaned text (escape sequences removed,
    /// redraws collapsed), redacted once more.
    pub(super) fn new(
        limits: BufferLimits,
        spill: Option<&SpillFile>,
        terminal: Option<StreamReplacer>,
        account: &Account,
    ) -> Arc<Self> {
        let pool = account.pool();
        let tally = account.tally();
        let capture = Arc::new(Self {
            buffer: Mutex::new(OutputBuffer::in_pool(
                limits,
                pool.clone(),
                Arc::clone(&tally),
            )),
            spill: Mutex::new(spill.map(|file| Spill::new(file, terminal))),
            pool,
            tally,
        });
        let holder: Arc<dyn Holder> = capture.clone();
        account.register(Arc::downgrade(&holder));
        capture
    }

    pub(super) fn buffer(&self) -> MutexGuard<'_, OutputBuffer> {
        self.buffer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn spill(&self) -> MutexGuard<'_, Option<Spill>> {
        self.spill.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, text: &str) {
        if text.is_empty() {
            return;
        }
        let (mut buffer, mut reserved) = self
            .pool
            .reserve_locked(&self.buffer, |buffer| buffer.chunks_needed(text));
        if let Some(spill) = self.spill().as_mut() {
            if !spill.opened
                && buffer.total_bytes() + text.len() as u64 > buffer.limits().capacity() as u64
            {
                // Nothing was dropped yet, so the buffer holds the whole stream.
                spill.open(&buffer.snapshot());
            }
            if spill.opened {
                spill.feed(text);
            }
        }
        buffer.push_reserved(text, &mut reserved);
    }

    /// Frees what the shell's consuming reader has read, up to `read`,
    /// unless the stream has a spill file not made yet: then memory is
    /// the only copy, and the file, once made, must have it all.
    pub(super) fn release_before(&self, read: StreamPosition) {
        let mut buffer = self.buffer();
        let spill = self.spill();
        if spill.as_ref().is_some_and(|spill| !spill.opened) {
            return;
        }
        buffer.release_before(read);
    }

    /// Makes the spill file (if the spec asked for one) from what memory
    /// holds, which is the whole stream so far: nothing was dropped yet.
    fn open_spill(buffer: &OutputBuffer, spill: &mut Spill) {
        spill.open(&buffer.snapshot());
        if spill.stream_ended {
            spill.finish();
        } else {
            spill.flush();
        }
    }

    pub(super) fn ensure_spill_file(&self) -> Option<SpillReport> {
        let buffer = self.buffer();
        let mut spill = self.spill();
        let spill = spill.as_mut()?;
        if !spill.opened {
            Self::open_spill(&buffer, spill);
        }
        Some(spill.report())
    }
}

impl Holder for Capture {
    fn held_chunks(&self) -> usize {
        self.tally.held()
    }

    fn drop_oldest(&self) -> u64 {
        let mut buffer = self.buffer();
        if let Some(spill) = self.spill().as_mut()
            && !spill.opened
        {
            // The output file keeps what memory drops.
            Self::open_spill(&buffer, spill);
        }
        buffer.drop_oldest()
    }
}

/// Reads what the pipe has now, without waiting: `None` when it has
/// nothing yet.
async fn read_now(
    pipe: &mut crate::spawn::Pipe,
    bytes: &mut [u8],
) -> Option<std::io::Result<usize>> {
    std::future::poll_fn(|context| {
        let mut buf = ReadBuf::new(&mut *bytes);
        match Pin::new(&mut *pipe).poll_read(context, &mut buf) {
            Poll::Ready(Ok(())) => Poll::Ready(Some(Ok(buf.filled().len()))),
            Poll::Ready(Err(error)) => Poll::Ready(Some(Err(error))),
            Poll::Pending => Poll::Ready(None),
        }
    })
    .await
}

pub(super) async fn read_stream(
    shell: Arc<ShellProcess>,
    stream: Stream,
    mut pipe: crate::spawn::Pipe,
    mut replacer: StreamReplacer,
) {
    let capture = shell.capture(stream);
    let mut decoder = Utf8Decoder::new();
    'stream: loop {
        // Idle, the stream waits for its next byte holding no buffer: a
        // shell that prints and then sleeps costs no read buffers.
        let mut first = [0u8; 1];
        if !matches!(pipe.read(&mut first).await, Ok(1..)) {
            break;
        }
        // Active, it reads what the pipe has, and drops its buffers (and
        // the spill file's) when the pipe is empty again.
        let mut bytes = vec![0u8; READ_CHUNK];
        let mut text = String::with_capacity(READ_CHUNK + 4);
        bytes[0] = first[0];
        let mut pending = 1;
        loop {
            let (read, ended) = match read_now(&mut pipe, &mut bytes[pending..]).await {
                Some(Ok(0) | Err(_)) => (0, true),
                Some(Ok(read)) => (read, false),
                None => (0, false),
            };
            pending += read;
            if pending > 0 {
                if stream == Stream::Stdout {
                    shell.feed_screen(&bytes[..pending]);
                }
                text.clear();
                decoder.decode(&bytes[..pending], &mut text);
                replacer.push_to(&text, |piece| capture.push(piece));
                shell.notify_output();
                pending = 0;
            }
            if ended {
                break 'stream;
            }
            if read == 0 {
                if let Some(spill) = capture.spill().as_mut() {
                    spill.idle();
                }
                break;
            }
        }
    }
    let mut text = String::new();
    decoder.finish(&mut text);
    replacer.push_to(&text, |piece| capture.push(piece));
    replacer.finish_to(|piece| capture.push(piece));
    if let Some(spill) = capture.spill().as_mut() {
        spill.end_stream();
    }
    shell.notify_output();
}
