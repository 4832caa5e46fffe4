//! The JSON-RPC framing in front of rmcp: newline-delimited messages read
//! with a size cap, protocol errors answered here, and the ids of requests
//! in flight tracked so a duplicate never reaches rmcp.
//!
//! rmcp's own stdio codec drops what it cannot parse (invalid JSON, a line
//! over its cap) with at most a log line, and keys its request bookkeeping
//! by id, so a second request with an id already in flight overwrites the
//! first one's entry. This transport answers all three instead, as JSON-RPC
//! 2.0 says:
//!
//! - invalid JSON: `-32700` with id `null`, for the first bad line of a
//!   run only, and nothing shaped as an answer is answered, so a peer
//!   that reacts to our errors with bad lines cannot start an error storm
//!   (docs/decisions/0020-answering-invalid-json.md);
//! - a line longer than [`MAX_LINE`]: `-32600` with the id found in its
//!   first [`ID_WINDOW`] bytes (else `null`); the rest of the line is read
//!   and thrown away, never held;
//! - well-formed JSON that is no JSON-RPC message: `-32600` with its id;
//! - a request for a method this server serves whose params cannot be
//!   read (`tools/call` with none): `-32602` with its id;
//! - a request whose id is in flight: `-32600` with that id; the first
//!   request goes on untouched.
//!
//! Each `tools/call` gets its arrival number here, where requests are seen
//! in the order they came (rmcp runs each on a task of its own, which may
//! reach a question in any order): a `Bash` call holds its place in the
//! [`ArrivalLine`] until it has asked or decided not to, so questions are
//! put in the order the calls came.
//!
//! Every line written (rmcp's messages and these answers) goes out whole
//! under one lock, so two never interleave. A write that fails (EPIPE: the
//! client closed its end of stdout) is the client leaving, as the end of
//! stdin is. Stdin is read as before, with
//! tokio's blocking stdin (docs/decisions/0005-blocking-stdio-for-mcp.md).

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::RoleServer;
use rmcp::model::{
    ClientNotification, ClientRequest, ErrorData, JsonRpcMessage, ProtocolVersion, RequestId,
    ServerConfig, ServerResult,
};
use rmcp::service::{
    NotificationContext, RequestContext, RxJsonRpcMessage, Service, TxJsonRpcMessage,
};
use rmcp::transport::Transport;
use serde::de::{Deserialize, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tool_core::ArrivalLine;

/// The longest line taken as a message, without its newline: 16 MiB.
pub const MAX_LINE: usize = 16 << 20;

/// A line over this (1 MiB) is a large message: once it has been
/// answered (or refused), the memory it took is given back to the system,
/// which glibc would otherwise keep for the next one.
const LARGE_LINE: usize = 1 << 20;

/// How much of an over-long line is kept to find its `"id"`: 64 KiB.
pub const ID_WINDOW: usize = 64 << 10;

/// The read buffer: one blocking read fills at most this much.
const READ_CHUNK: usize = 64 << 10;

/// JSON-RPC 2.0: the text is not JSON.
const PARSE_ERROR: i64 = -32700;

/// JSON-RPC 2.0: the JSON is not a valid request.
const INVALID_REQUEST: i64 = -32600;

/// JSON-RPC 2.0: the method exists but its params are missing or wrong.
const INVALID_PARAMS: i64 = -32602;

/// Methods this server serves whose params rmcp must be able to read: a
/// request for one of them that rmcp could only take as a custom request
/// had params it could not read, which is not an unknown method.
const SERVED_METHODS: &[&str] = &["initialize", "tools/call", "tools/list", "ping"];

/// The tools whose calls may ask the person before anything runs: each
/// holds its place in the order calls came until it has asked or decided
/// not to. `WriteStdin` asks only after waiting for a program to read its
/// terminal (up to `wait_ms`), so it holds no place: its questions wait
/// for earlier calls' like any other, but hold none of the later back.
const ORDERED_TOOLS: &[&str] = &["Bash"];

/// One step of the line reader.
#[derive(Debug)]
enum Frame {
    /// A whole line, without its `\n`.
    Line(Vec<u8>),
    /// A line longer than the cap, read to its end and dropped; the id
    /// found in its head, or `null`.
    Oversized(Value),
    /// The peer closed its side (a last line without `\n` is dropped).
    Eof,
    /// Reading failed.
    Failed(std::io::Error),
}

#[cfg(test)]
impl PartialEq for Frame {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Line(a), Self::Line(b)) => a == b,
            (Self::Oversized(a), Self::Oversized(b)) => a == b,
            (Self::Eof, Self::Eof) => true,
            (Self::Failed(a), Self::Failed(b)) => a.kind() == b.kind(),
            _ => false,
        }
    }
}

/// Whether the reader is inside a line or throwing away the rest of one
/// that grew past the cap.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Reading,
    Discarding,
}

/// Newline-delimited lines, each at most `max_line` bytes held; the head of
/// a longer one (`id_window` bytes) is all that stays while the rest is
/// skipped.
///
/// Cancellation safe: `fill_buf` consumes nothing when dropped, and every
/// copy into `line` happens together with its `consume`, so `next` may be
/// dropped at its await and called again without losing a byte (rmcp polls
/// `receive` inside a `select!`).
struct LineReader<R> {
    read: BufReader<R>,
    line: Vec<u8>,
    mode: Mode,
    max_line: usize,
    id_window: usize,
    /// The largest the line buffer has been.
    #[cfg(test)]
    peak: usize,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    fn new(read: R, max_line: usize, id_window: usize) -> Self {
        Self {
            read: BufReader::with_capacity(READ_CHUNK, read),
            line: Vec::new(),
            mode: Mode::Reading,
            max_line,
            id_window,
            #[cfg(test)]
            peak: 0,
        }
    }

    async fn next(&mut self) -> Frame {
        loop {
            let available = match self.read.fill_buf().await {
                Ok(available) => available,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(error) => return Frame::Failed(error),
            };
            if available.is_empty() {
                return self.at_eof();
            }
            let newline = available.iter().position(|byte| *byte == b'\n');
            let take = newline.map_or(available.len(), |at| at + 1);
            let ended = newline.is_some();
            match self.mode {
                Mode::Discarding => {}
                Mode::Reading => {
                    let content = newline.unwrap_or(available.len());
                    if self.line.len().saturating_add(content) > self.max_line {
                        // Keep the head for the id, give the rest back.
                        self.line.truncate(self.id_window);
                        let room = self.id_window - self.line.len();
                        self.line.extend_from_slice(&available[..content.min(room)]);
                        self.line.shrink_to(self.id_window);
                        self.mode = Mode::Discarding;
                    } else {
                        reserve_within(&mut self.line, take, self.max_line + 1);
                        self.line.extend_from_slice(&available[..take]);
                    }
                    #[cfg(test)]
                    {
                        self.peak = self.peak.max(self.line.capacity());
                    }
                }
            }
            self.read.consume(take);
            if ended {
                return self.line_ended();
            }
        }
    }

    /// The line that just got its `\n`, or the answer for an over-long one.
    fn line_ended(&mut self) -> Frame {
        match std::mem::replace(&mut self.mode, Mode::Reading) {
            Mode::Discarding => Frame::Oversized(id_in_head(&std::mem::take(&mut self.line))),
            Mode::Reading => {
                // Taken, not cleared: a big message's buffer goes with it.
                let mut line = std::mem::take(&mut self.line);
                line.pop();
                Frame::Line(line)
            }
        }
    }

    fn at_eof(&mut self) -> Frame {
        match std::mem::replace(&mut self.mode, Mode::Reading) {
            // Over the cap already: it gets its answer like any other.
            Mode::Discarding => Frame::Oversized(id_in_head(&std::mem::take(&mut self.line))),
            Mode::Reading => {
                if !self.line.is_empty() {
                    tracing::warn!(
                        bytes = self.line.len(),
                        "stdin ended inside a line; the incomplete message is dropped"
                    );
                    self.line = Vec::new();
                }
                Frame::Eof
            }
        }
    }
}

/// Grows `line` for `more` bytes by doubling, never past `cap` (a plain
/// `extend` could double a 16 MiB buffer to 32 MiB).
fn reserve_within(line: &mut Vec<u8>, more: usize, cap: usize) {
    let needed = line.len() + more;
    if needed > line.capacity() {
        let target = (line.capacity() * 2).max(needed).min(cap.max(needed));
        line.reserve_exact(target - line.len());
    }
}

/// The top-level `"id"` of the JSON object that `head` begins, when it
/// appears whole in `head` as a number or a string; `null` otherwise. Reads
/// only as far as the id, so the object may be cut anywhere after it.
pub(crate) fn id_in_head(head: &[u8]) -> Value {
    let head = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    let ended = Cell::new(false);
    let mut id = None;
    let mut deserializer = serde_json::Deserializer::from_reader(HeadReader {
        rest: head,
        ended: &ended,
    });
    // The head is cut: the parse fails after the id (or before it), and
    // what was found by then is the answer.
    let _ = HeadId {
        id: &mut id,
        ended: &ended,
    }
    .deserialize(&mut deserializer);
    id.unwrap_or(Value::Null)
}

/// The head as `serde_json` reads it, one byte at a time, noting whether it
/// has been read to its end: a number the parse ends on may have been cut
/// (`12` of `123`), one followed by a byte may not.
struct HeadReader<'a> {
    rest: &'a [u8],
    ended: &'a Cell<bool>,
}

impl std::io::Read for HeadReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.rest.is_empty() && !buf.is_empty() {
            self.ended.set(true);
        }
        self.rest.read(buf)
    }
}

/// The message head seen as a map of which only `id` is read: every other
/// value is skipped with [`IgnoredAny`] (checked for syntax, never built),
/// and the walk stops at the first `id`. The id found goes to `id`, not to
/// the result, because the parse of a cut head fails after it.
struct HeadId<'a> {
    id: &'a mut Option<Value>,
    /// Whether the head has been read to its end.
    ended: &'a Cell<bool>,
}

impl<'de> DeserializeSeed<'de> for HeadId<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for HeadId<'_> {
    type Value = ();

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("a JSON-RPC message")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<HeadKey>()? {
            match key {
                HeadKey::Id => {
                    let id = map.next_value::<Value>()?;
                    // A number is whole only when a byte came after it.
                    let whole = !(id.is_number() && self.ended.get());
                    if whole && (id.is_number() || id.is_string()) {
                        *self.id = Some(id);
                    }
                    return Ok(());
                }
                HeadKey::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// A key of the message head: `id` or another, compared without being
/// copied.
enum HeadKey {
    Id,
    Other,
}

impl<'de> Deserialize<'de> for HeadKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = HeadKey;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("a key")
            }

            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<HeadKey, E> {
                Ok(if key == "id" {
                    HeadKey::Id
                } else {
                    HeadKey::Other
                })
            }
        }
        deserializer.deserialize_identifier(KeyVisitor)
    }
}

/// One JSON-RPC error answer, as the line to write.
struct ErrorLine {
    line: Vec<u8>,
    /// It answers no request the client can name (id `null`): a line of
    /// the kind that can start an error storm (decision 0020).
    id_less: bool,
}

/// One JSON-RPC error answer as a line.
fn error_line(code: i64, message: &str, id: &Value) -> ErrorLine {
    let mut line = json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": code, "message": message },
    })
    .to_string()
    .into_bytes();
    line.push(b'\n');
    ErrorLine {
        line,
        id_less: id.is_null(),
    }
}

/// What became of one line.
#[expect(
    clippy::large_enum_variant,
    reason = "one lives for one line and moves straight on to rmcp; a box would allocate per message"
)]
enum Outcome {
    /// A message for rmcp.
    Deliver(RxJsonRpcMessage<RoleServer>),
    /// An error answered here, as a line to write.
    Answer(ErrorLine),
    /// Nothing to do (an empty line, a notification rmcp would not know,
    /// something shaped as an answer).
    Skip,
}

/// One request read and not yet answered.
#[derive(Default)]
struct Call {
    /// The client cancelled it: its answer is not sent.
    cancelled: bool,
    /// Its line was over [`LARGE_LINE`]: once it is answered, the memory
    /// it took is given back to the system.
    large: bool,
    /// The token its handler watches, once the handler has started.
    token: Option<CancellationToken>,
}

/// The requests read and not yet answered, by id.
///
/// A cancelled request stays here until its handler has finished and its
/// (unsent) answer has come through [`Framed::send`]: rmcp keys its own
/// bookkeeping by id, so a request reusing the id before then would be
/// taken for the cancelled one (it would never run, and the cancelled
/// call's answer would go out under its id).
#[derive(Default)]
pub(crate) struct InFlight(Mutex<HashMap<RequestId, Call>>);

impl InFlight {
    fn calls(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, Call>> {
        // The map stays consistent across a panic: each use is one call.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// False when `id` is in flight already.
    fn begin(&self, id: &RequestId, large: bool) -> bool {
        match self.calls().entry(id.clone()) {
            Entry::Occupied(_) => false,
            Entry::Vacant(vacant) => {
                vacant.insert(Call {
                    large,
                    ..Call::default()
                });
                true
            }
        }
    }

    /// Cancels the request `id` when it is in flight (its handler's token
    /// now or as soon as it starts); false when it is not.
    fn cancel(&self, id: &RequestId) -> bool {
        let mut calls = self.calls();
        let Some(call) = calls.get_mut(id) else {
            return false;
        };
        call.cancelled = true;
        if let Some(token) = &call.token {
            token.cancel();
        }
        true
    }

    /// The token the handler of `id` watches: a child of rmcp's own
    /// (server shutdown still reaches it), cancelled by [`Self::cancel`].
    fn watch(&self, id: &RequestId, parent: &CancellationToken) -> CancellationToken {
        let token = parent.child_token();
        if let Some(call) = self.calls().get_mut(id) {
            if call.cancelled {
                token.cancel();
            }
            call.token = Some(token.clone());
        }
        token
    }

    /// Frees `id`, and returns what was known of its request.
    fn end(&self, id: &RequestId) -> Option<Call> {
        self.calls().remove(id)
    }
}

/// The server's service with its requests' cancellation tracked by the
/// framing (its map of the requests in flight): each handler watches a
/// token that `notifications/cancelled` cancels, while rmcp keeps the
/// request as in flight until its handler has finished.
pub struct Tracked<S> {
    inner: S,
    in_flight: Arc<InFlight>,
}

impl<S: Service<RoleServer>> Service<RoleServer> for Tracked<S> {
    fn handle_request(
        &self,
        request: ClientRequest,
        mut context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<ServerResult, ErrorData>> + Send + '_ {
        context.ct = self.in_flight.watch(&context.id, &context.ct);
        self.inner.handle_request(request, context)
    }

    fn handle_notification(
        &self,
        notification: ClientNotification,
        context: NotificationContext<RoleServer>,
    ) -> impl Future<Output = Result<(), ErrorData>> + Send + '_ {
        self.inner.handle_notification(notification, context)
    }

    fn get_info(&self) -> ServerConfig {
        self.inner.get_info()
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        self.inner.supported_protocol_versions()
    }
}

/// The one writer: a line goes out whole under the lock, then is flushed.
struct Writer<W> {
    out: tokio::sync::Mutex<Option<W>>,
    /// Cancelled when a write fails: stdout is broken (EPIPE when the
    /// client closed its end), so the client has left as surely as when
    /// stdin ends, and nothing the server does can reach it any more.
    left: CancellationToken,
}

impl<W: AsyncWrite + Unpin> Writer<W> {
    async fn write_line(&self, line: &[u8]) -> std::io::Result<()> {
        let mut writer = self.out.lock().await;
        let Some(writer) = writer.as_mut() else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                "the transport is closed",
            ));
        };
        let written = async {
            writer.write_all(line).await?;
            writer.flush().await
        }
        .await;
        if let Err(error) = &written
            && !self.left.is_cancelled()
        {
            tracing::info!(%error, "writing stdout failed: the client has left");
            self.left.cancel();
        }
        written
    }
}

/// The server's transport over a byte stream pair (stdin and stdout in the
/// binary): rmcp's newline-delimited JSON with the framing above.
pub struct Framed<R, W> {
    lines: LineReader<R>,
    writer: Arc<Writer<W>>,
    in_flight: Arc<InFlight>,
    /// The order `tools/call` requests came in.
    arrivals: Arc<ArrivalLine>,
    /// The write of the last error answered here: the next line is read
    /// only once it is out, so a flood of bad lines cannot queue answers
    /// without bound.
    answering: Option<JoinHandle<()>>,
    /// An error answer with id `null` has gone out since the last message
    /// was delivered: another one is not written until a message is
    /// (decision 0020: one answer per run of bad lines, so a peer that
    /// answers our error lines with bad lines cannot start a storm).
    quiet: bool,
    closed: CancellationToken,
    /// Run (on a blocking thread) before any message but `initialize`
    /// reaches rmcp: start-up work the `initialize` answer need not wait
    /// for, but every call must (the janitor).
    gate: Option<fn()>,
    /// A message read while the gate runs, delivered once it is done (kept
    /// here so `receive` stays cancellation safe).
    held: Option<(RxJsonRpcMessage<RoleServer>, JoinHandle<()>)>,
}

impl<R, W> Framed<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// The transport, and a token cancelled once the client has left: the
    /// input ended (end of file or a read error), before rmcp starts
    /// draining its responses, or a write to the output failed.
    pub fn new(read: R, write: W) -> (Self, CancellationToken) {
        Self::with_limits(read, write, MAX_LINE, ID_WINDOW)
    }

    /// [`Self::new`] with a smaller line cap and id window, so a test or
    /// the fuzz target reaches the over-long line with short input.
    pub fn with_limits(
        read: R,
        write: W,
        max_line: usize,
        id_window: usize,
    ) -> (Self, CancellationToken) {
        let closed = CancellationToken::new();
        let framed = Self {
            lines: LineReader::new(read, max_line, id_window),
            writer: Arc::new(Writer {
                out: tokio::sync::Mutex::new(Some(write)),
                left: closed.clone(),
            }),
            in_flight: Arc::default(),
            arrivals: ArrivalLine::new(),
            answering: None,
            quiet: false,
            closed: closed.clone(),
            gate: None,
            held: None,
        };
        (framed, closed)
    }

    /// Runs `gate` once, before the first message after `initialize` is
    /// delivered: the `initialize` answer does not wait for it, calls do.
    pub fn with_gate(mut self, gate: fn()) -> Self {
        self.gate = Some(gate);
        self
    }

    /// `service` with its requests' cancellation handled by this
    /// transport: what `serve` must be given (the framing keeps an id in
    /// flight until its handler has finished).
    pub fn track<S: Service<RoleServer>>(&self, service: S) -> Tracked<S> {
        Tracked {
            inner: service,
            in_flight: Arc::clone(&self.in_flight),
        }
    }

    /// The gate, taken, when `message` must wait for it: the first
    /// message that is not `initialize`.
    fn gate_for(&mut self, message: &RxJsonRpcMessage<RoleServer>) -> Option<fn()> {
        let initialize = matches!(
            message,
            JsonRpcMessage::Request(request)
                if matches!(request.request, ClientRequest::InitializeRequest(_))
        );
        if initialize { None } else { self.gate.take() }
    }

    /// The held message once its gate has run; `None` when none is held.
    async fn release_held(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        let (_, waiting) = self.held.as_mut()?;
        // A gate that panicked has nothing left to wait for.
        let _ = waiting.await;
        self.held.take().map(|(message, _)| message)
    }

    fn classify(&self, line: &[u8]) -> Outcome {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return Outcome::Skip;
        }
        match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) {
            Ok(message) => self.admit(message, line.len() > LARGE_LINE),
            Err(error) if error.is_syntax() || error.is_eof() => {
                tracing::debug!(%error, "invalid JSON on stdin");
                Outcome::Answer(error_line(
                    PARSE_ERROR,
                    &format!("Parse error: {error}"),
                    &Value::Null,
                ))
            }
            Err(error) => invalid_message(line, &error),
        }
    }

    /// Registers a request's id, refusing one already in flight; a
    /// cancellation of a request in flight is handled here (see
    /// [`InFlight`]), never by rmcp.
    fn admit(&self, mut message: RxJsonRpcMessage<RoleServer>, large: bool) -> Outcome {
        match &message {
            JsonRpcMessage::Request(request) => {
                if let ClientRequest::CustomRequest(custom) = &request.request
                    && SERVED_METHODS.contains(&custom.method.as_str())
                {
                    return Outcome::Answer(error_line(
                        INVALID_PARAMS,
                        &format!(
                            "Invalid params: `{}` needs params of its own shape (MCP specification)",
                            custom.method
                        ),
                        &json!(request.id),
                    ));
                }
                if !self.in_flight.begin(&request.id, large) {
                    tracing::warn!(id = %request.id, "refused a request whose id is in flight");
                    return Outcome::Answer(error_line(
                        INVALID_REQUEST,
                        &format!("Invalid Request: id {} is already in flight", request.id),
                        &json!(request.id),
                    ));
                }
            }
            JsonRpcMessage::Notification(notification) => {
                if let ClientNotification::CancelledNotification(cancelled) =
                    &notification.notification
                    && let Some(id) = &cancelled.params.request_id
                    && self.in_flight.cancel(id)
                {
                    tracing::info!(%id, reason = ?cancelled.params.reason, "cancelled");
                    return Outcome::Skip;
                }
            }
            JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_) => {}
        }
        // Its place, taken now that nothing can refuse it: in the order
        // the lines came (it reaches the bridge in the request's
        // extensions, and is given up when the call is done with it).
        if let JsonRpcMessage::Request(request) = &mut message
            && let ClientRequest::CallToolRequest(call) = &mut request.request
        {
            let holds = ORDERED_TOOLS.contains(&call.params.name.as_ref());
            call.extensions.insert(self.arrivals.arrive(holds));
        }
        Outcome::Deliver(message)
    }

    /// Starts writing an answer of ours; `receive` waits for it before the
    /// next line. An answer with id `null` is written only for the first
    /// bad line of a run (the `quiet` field says why).
    fn answer(&mut self, ErrorLine { line, id_less }: ErrorLine) {
        if id_less {
            if self.quiet {
                tracing::debug!("not answered: a bad line right after an answered one");
                return;
            }
            self.quiet = true;
        }
        let writer = Arc::clone(&self.writer);
        // A task of its own: `receive` may be dropped at any await, and a
        // line cut off half-written would corrupt the stream.
        self.answering = Some(tokio::spawn(async move {
            if let Err(error) = writer.write_line(&line).await {
                tracing::warn!(%error, "could not write an error answer");
            }
        }));
    }
}

/// Gives the allocator's free pages back to the system, on a blocking
/// thread: after a large message, glibc would keep what it took resident
/// (its threshold for returning big blocks at once grows with each one).
fn release_memory() {
    drop(tokio::task::spawn_blocking(
        shell_runtime::release_free_memory,
    ));
}

/// Well-formed JSON that is no message rmcp takes: a notification it does
/// not know is skipped (notifications are never answered); anything else
/// is an invalid request, answered with its id when it has one.
fn invalid_message(line: &[u8], error: &serde_json::Error) -> Outcome {
    let Ok(value) = serde_json::from_slice::<Value>(line) else {
        return Outcome::Answer(error_line(
            PARSE_ERROR,
            &format!("Parse error: {error}"),
            &Value::Null,
        ));
    };
    let id = value.get("id");
    if id.is_none() && value.get("method").is_some_and(Value::is_string) {
        tracing::debug!(%error, "skipped a notification");
        return Outcome::Skip;
    }
    // Shaped as an answer (no method; a result or an error): answers are
    // never answered (JSON-RPC 2.0), or two peers could answer each
    // other's answers forever.
    if value.get("method").is_none()
        && (value.get("result").is_some() || value.get("error").is_some())
    {
        tracing::debug!(%error, "skipped a malformed answer");
        return Outcome::Skip;
    }
    let id = match id {
        Some(id @ (Value::Number(_) | Value::String(_))) => id.clone(),
        _ => Value::Null,
    };
    tracing::debug!(%error, "invalid JSON-RPC message on stdin");
    Outcome::Answer(error_line(
        INVALID_REQUEST,
        &format!("Invalid Request: {error}"),
        &id,
    ))
}

impl<R, W> Transport<RoleServer> for Framed<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // The id is free once its answer is on its way: the client may
        // reuse it as soon as it reads the answer.
        let id = match &item {
            JsonRpcMessage::Response(response) => Some(&response.id),
            JsonRpcMessage::Error(error) => error.id.as_ref(),
            _ => None,
        };
        let call = id.and_then(|id| self.in_flight.end(id));
        let cancelled = call.as_ref().is_some_and(|call| call.cancelled);
        let large = call.as_ref().is_some_and(|call| call.large);
        if cancelled {
            // A cancelled request gets no answer (MCP); its id is free now
            // that its handler has finished.
            tracing::debug!(id = ?id, "dropped the answer of a cancelled request");
        }
        let line = (!cancelled).then(|| {
            serde_json::to_vec(&item).map(|mut line| {
                line.push(b'\n');
                line
            })
        });
        let writer = Arc::clone(&self.writer);
        async move {
            let written = match line {
                Some(line) => writer.write_line(&line?).await,
                None => Ok(()),
            };
            if large {
                release_memory();
            }
            written
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if let Some(message) = self.release_held().await {
                return Some(message);
            }
            if let Some(answering) = self.answering.as_mut() {
                // A write task that panicked has nothing left to wait for.
                let _ = answering.await;
                self.answering = None;
            }
            match self.lines.next().await {
                Frame::Line(line) => {
                    let outcome = self.classify(&line);
                    // A large request gives its memory back once answered
                    // (in `send`); anything else large, now.
                    let large = line.len() > LARGE_LINE;
                    drop(line);
                    match outcome {
                        Outcome::Deliver(message) => {
                            self.quiet = false;
                            let Some(gate) = self.gate_for(&message) else {
                                return Some(message);
                            };
                            // Held in `self`: `receive` may be dropped while
                            // the gate runs.
                            self.held = Some((message, tokio::task::spawn_blocking(gate)));
                        }
                        Outcome::Answer(answer) => {
                            self.answer(answer);
                            if large {
                                release_memory();
                            }
                        }
                        Outcome::Skip => {
                            if large {
                                release_memory();
                            }
                        }
                    }
                }
                Frame::Oversized(id) => {
                    let max_line = self.lines.max_line;
                    tracing::warn!(%id, "refused a line over {max_line} bytes");
                    self.answer(error_line(
                        INVALID_REQUEST,
                        &format!(
                            "Invalid Request: the line is longer than {max_line} bytes and was discarded"
                        ),
                        &id,
                    ));
                    release_memory();
                }
                Frame::Eof => {
                    self.closed.cancel();
                    return None;
                }
                Frame::Failed(error) => {
                    tracing::error!(%error, "reading stdin failed");
                    self.closed.cancel();
                    return None;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let mut writer = self.writer.out.lock().await;
        if let Some(mut writer) = writer.take() {
            writer.flush().await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use proptest::prelude::*;
    use rmcp::model::{EmptyResult, ServerResult};
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, DuplexStream};

    use super::*;

    async fn frames(input: &[u8], max_line: usize, id_window: usize) -> Vec<Frame> {
        let mut reader = LineReader::new(input, max_line, id_window);
        let mut frames = Vec::new();
        loop {
            let frame = reader.next().await;
            let done = matches!(frame, Frame::Eof | Frame::Failed(_));
            frames.push(frame);
            if done {
                return frames;
            }
        }
    }

    fn line(text: &str) -> Frame {
        Frame::Line(text.as_bytes().to_vec())
    }

    #[tokio::test]
    async fn lines_come_whole_and_a_last_line_without_newline_is_dropped() {
        let got = frames(b"{\"a\":1}\n\n{\"b\":2}\r\nhalf", 64, 16).await;
        assert_eq!(
            got,
            [line("{\"a\":1}"), line(""), line("{\"b\":2}\r"), Frame::Eof]
        );
    }

    #[tokio::test]
    async fn an_oversized_line_is_skipped_to_its_end_with_the_id_of_its_head() {
        let long = format!("{{\"id\":7,\"x\":\"{}\"}}\n{{\"ok\":1}}\n", "y".repeat(200));
        let got = frames(long.as_bytes(), 64, 16).await;
        assert_eq!(
            got,
            [Frame::Oversized(json!(7)), line("{\"ok\":1}"), Frame::Eof]
        );
        // The id past the window is not read: null.
        let late = format!("{{\"x\":\"{}\",\"id\":7}}\n", "y".repeat(200));
        let got = frames(late.as_bytes(), 64, 16).await;
        assert_eq!(got, [Frame::Oversized(Value::Null), Frame::Eof]);
        // Exactly at the cap is still a line; one more byte is not.
        let at_cap = "z".repeat(64);
        let got = frames(format!("{at_cap}\n{at_cap}z\n").as_bytes(), 64, 16).await;
        assert_eq!(
            got,
            [line(&at_cap), Frame::Oversized(Value::Null), Frame::Eof]
        );
        // Ended by EOF instead of a newline, it is still answered.
        let got = frames(format!("{{\"id\":\"s\",{at_cap}").as_bytes(), 64, 16).await;
        assert_eq!(got, [Frame::Oversized(json!("s")), Frame::Eof]);
    }

    /// A 17 MiB line in 64 KiB reads: the buffer never grows past the cap,
    /// and only the window is kept once it is passed.
    #[tokio::test]
    async fn the_line_buffer_stays_within_the_cap() {
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let writing = tokio::spawn(async move {
            client
                .write_all(b"{\"id\":3,\"p\":\"")
                .await
                .expect("write");
            let chunk = vec![b'x'; 1 << 20];
            for _ in 0..17 {
                client.write_all(&chunk).await.expect("write");
            }
            client.write_all(b"\"}\n").await.expect("write");
        });
        let mut reader = LineReader::new(server, MAX_LINE, ID_WINDOW);
        let frame = reader.next().await;
        writing.await.expect("writer");
        assert_eq!(frame, Frame::Oversized(json!(3)));
        assert!(
            reader.peak <= MAX_LINE + 1,
            "the buffer grew to {} bytes",
            reader.peak
        );
        assert!(reader.peak >= MAX_LINE / 2, "{}", reader.peak);
        assert!(reader.line.capacity() <= ID_WINDOW);
    }

    #[test]
    fn the_id_is_read_from_the_head_of_the_object() {
        for (head, id) in [
            (
                r#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"#,
                json!(42),
            ),
            (r#" {"id" : "abc" , "#, json!("abc")),
            (
                r#"{"params":{"id":1,"a":[1,{"b":"}"}]},"id":-5,"x""#,
                json!(-5),
            ),
            (r#"{"s":"quote \" and \\","id":"x\"y"}"#, json!("x\"y")),
            ("\u{feff}{\"id\":1}", json!(1)),
            (r#"{"params":{"id":1},"method":"x""#, Value::Null),
            (r#"{"id":null,"#, Value::Null),
            (r#"{"id":[1],"#, Value::Null),
            (r#"{"id":12"#, Value::Null),
            (r#"{"id":12 "#, json!(12)),
            (r#"{"id":1.5e"#, Value::Null),
            (r#"{"\u0069d":7,"#, json!(7)),
            (r#"{"a":tru,"id":1}"#, Value::Null),
            (r#"[{"id":1}]"#, Value::Null),
            ("not json", Value::Null),
            ("", Value::Null),
        ] {
            assert_eq!(id_in_head(head.as_bytes()), id, "{head}");
        }
    }

    proptest! {
        /// Whatever comes before it, a top-level id that fits in the head
        /// is found, at any cut after it; no input makes the scan panic.
        #[test]
        fn the_id_is_found_at_any_cut_after_it(
            before in proptest::collection::btree_map("[a-z\"\\\\{}]{0,6}", any::<i32>(), 0..4),
            id in prop_oneof![any::<i64>().prop_map(|n| json!(n)), "[ -~]{0,8}".prop_map(|s| json!(s))],
            cut in 0usize..40,
        ) {
            let mut text = String::from("{");
            for (key, value) in &before {
                if key != "id" {
                    text.push_str(&format!("{}:{{\"n\":[{value}]}},", json!(key)));
                }
            }
            text.push_str(&format!("\"id\":{id},\"rest\":\"{}\"}}", "r".repeat(40)));
            let through_id = text.find(",\"rest\"").expect("rest") + 1;
            let cut = (through_id + cut).min(text.len());
            prop_assert_eq!(id_in_head(&text.as_bytes()[..cut]), id);
        }

        #[test]
        fn any_bytes_scan_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = id_in_head(&bytes);
        }

        /// On any valid message, cut anywhere after its id (and the byte
        /// that ends it), the head gives the id serde_json's full parse
        /// gives; cut before that, `null`.
        #[test]
        fn the_head_agrees_with_the_full_parse(
            before in proptest::collection::btree_map("[a-z_\"\\\\]{0,6}", json_value(), 0..4),
            after in proptest::collection::btree_map("[a-z_]{0,6}", json_value(), 0..4),
            id in json_value(),
            space in "[ \t\r]{0,2}",
            cut in any::<proptest::sample::Index>(),
        ) {
            let mut text = String::from("{");
            for (key, value) in before.iter().filter(|(key, _)| *key != "id") {
                text.push_str(&format!("{}{space}:{value},", json!(key)));
            }
            text.push_str(&format!("\"id\"{space}:{space}{id}"));
            let id_end = text.len();
            for (key, value) in after.iter().filter(|(key, _)| *key != "id") {
                text.push_str(&format!(",{}:{value}", json!(key)));
            }
            text.push('}');
            let full: Value = serde_json::from_str(&text).expect("valid JSON");
            let expected = match &full["id"] {
                id @ (Value::Number(_) | Value::String(_)) => id.clone(),
                _ => Value::Null,
            };
            let cut = cut.index(text.len() + 1);
            let head = &text.as_bytes()[..cut];
            if cut > id_end {
                prop_assert_eq!(id_in_head(head), expected, "{}", text);
            } else if cut < id_end {
                prop_assert_eq!(id_in_head(head), Value::Null, "{}", text);
            }
        }
    }

    /// Any JSON value, nested a little.
    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<u64>().prop_map(|n| json!(n)),
            (-1e6f64..1e6).prop_map(|n| json!(n)),
            "(?s).{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[a-z\"]{0,4}", inner, 0..4)
                    .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }

    type Reads = tokio::io::ReadHalf<DuplexStream>;
    type Writes = tokio::io::WriteHalf<DuplexStream>;
    type Answers = tokio::io::Lines<BufReader<Reads>>;

    /// The transport over an in-memory pipe, and the client's end of it.
    fn transport() -> (Framed<Reads, Writes>, CancellationToken, Writes, Answers) {
        let (client, server) = tokio::io::duplex(1 << 16);
        let (server_read, server_write) = tokio::io::split(server);
        let (client_read, client_write) = tokio::io::split(client);
        let (framed, closed) = Framed::with_limits(server_read, server_write, 256, 32);
        (
            framed,
            closed,
            client_write,
            BufReader::new(client_read).lines(),
        )
    }

    async fn answer(lines: &mut Answers) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .expect("an answer in time")
            .expect("read")
            .expect("a line");
        serde_json::from_str(&line).expect("JSON")
    }

    /// The arrival a delivered `tools/call` carries.
    fn arrival_of(message: &RxJsonRpcMessage<RoleServer>) -> tool_core::Arrival {
        match message {
            JsonRpcMessage::Request(request) => match &request.request {
                ClientRequest::CallToolRequest(call) => call
                    .extensions
                    .get::<tool_core::Arrival>()
                    .expect("an arrival")
                    .clone(),
                other => panic!("not a call: {other:?}"),
            },
            other => panic!("not a request: {other:?}"),
        }
    }

    #[tokio::test]
    async fn calls_are_numbered_as_they_come_and_a_bash_call_holds_its_place() {
        let (mut framed, _closed, mut client, _lines) = transport();
        for (id, tool) in [(7, "Bash"), (3, "BashOutput"), (5, "Bash")] {
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{{}}}}}}"#
            );
            client
                .write_all(format!("{line}\n").as_bytes())
                .await
                .expect("write");
        }
        let mut arrivals = Vec::new();
        for _ in 0..3 {
            let message = tokio::time::timeout(Duration::from_secs(10), framed.receive())
                .await
                .expect("a message in time")
                .expect("a message");
            arrivals.push(arrival_of(&message));
        }
        let numbers: Vec<u64> = arrivals.iter().map(tool_core::Arrival::number).collect();
        assert_eq!(numbers, [1, 2, 3]);
        let last = arrivals.pop().expect("three");
        let waiting = tokio::spawn(async move { last.first().await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "the first Bash call still decides");
        // The first Bash call done with its place lets the last one ask:
        // the BashOutput call between them (still going) holds nothing.
        let _output_call = arrivals.pop().expect("BashOutput");
        arrivals.pop().expect("the first").pass();
        tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("its turn comes")
            .expect("no panic");
    }

    #[tokio::test]
    async fn protocol_errors_are_answered_and_reading_goes_on() {
        let (mut framed, closed, mut client, mut lines) = transport();
        let input = [
            "not json".to_owned(),
            r#"{"jsonrpc":"2.0","id":9,"nope":true}"#.to_owned(),
            r#"{"jsonrpc":"2.0","method":"notifications/unknown"}"#.to_owned(),
            format!(
                r#"{{"jsonrpc":"2.0","id":"big","method":"ping","params":{{"x":"{}"}}}}"#,
                "x".repeat(300)
            ),
            "[1,2]".to_owned(),
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call"}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"arguments":{}}}"#
                .to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#.to_owned(),
        ];
        for line in &input {
            client
                .write_all(format!("{line}\n").as_bytes())
                .await
                .expect("write");
        }
        let mut delivered = Vec::new();
        for _ in 0..2 {
            let message = tokio::time::timeout(Duration::from_secs(10), framed.receive())
                .await
                .expect("a message in time")
                .expect("a message");
            delivered.push(message);
        }
        // The unknown notification is rmcp's to ignore; then the ping.
        assert!(
            matches!(&delivered[0], JsonRpcMessage::Notification(_)),
            "{delivered:?}"
        );
        assert!(
            matches!(&delivered[1], JsonRpcMessage::Request(request) if request.id == RequestId::Number(1)),
            "{delivered:?}"
        );
        let parse = answer(&mut lines).await;
        assert_eq!(parse["error"]["code"], PARSE_ERROR);
        assert_eq!(parse["id"], Value::Null);
        assert!(parse.as_object().expect("object").contains_key("id"));
        let shape = answer(&mut lines).await;
        assert_eq!(
            (shape["error"]["code"].clone(), shape["id"].clone()),
            (json!(INVALID_REQUEST), json!(9))
        );
        let big = answer(&mut lines).await;
        assert_eq!(
            (big["error"]["code"].clone(), big["id"].clone()),
            (json!(INVALID_REQUEST), json!("big"))
        );
        let batch = answer(&mut lines).await;
        assert_eq!(
            (batch["error"]["code"].clone(), batch["id"].clone()),
            (json!(INVALID_REQUEST), Value::Null)
        );
        for id in [2, 3] {
            let params = answer(&mut lines).await;
            assert_eq!(
                (params["error"]["code"].clone(), params["id"].clone()),
                (json!(INVALID_PARAMS), json!(id))
            );
        }
        assert!(!closed.is_cancelled());
        client.shutdown().await.expect("closed");
        assert!(framed.receive().await.is_none());
        assert!(closed.is_cancelled());
    }

    /// Decision 0020: a run of bad lines gets one answer with id `null`,
    /// an answer is never answered, and a delivered message starts the
    /// count again; answers to requests with an id are never held back.
    #[tokio::test]
    async fn a_run_of_bad_lines_gets_one_answer_and_answers_get_none() {
        let (mut framed, _closed, mut client, mut lines) = transport();
        let input = [
            "junk 1",
            "junk 2",
            "[1,2]",
            r#"{"jsonrpc":"2.0","id":4,"error":"not an error object"}"#,
            r#"{"jsonrpc":"2.0","id":5,"result":1,"error":{}}"#,
            r#"{"jsonrpc":"2.0","id":9,"nope":true}"#,
            r#"{"jsonrpc":"2.0","id":10,"nope":true}"#,
            "junk 3",
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            "junk 4",
            r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#,
        ];
        for line in input {
            client
                .write_all(format!("{line}\n").as_bytes())
                .await
                .expect("write");
        }
        for id in [1, 2] {
            let message = tokio::time::timeout(Duration::from_secs(10), framed.receive())
                .await
                .expect("a message in time")
                .expect("a message");
            assert!(
                matches!(&message, JsonRpcMessage::Request(request) if request.id == RequestId::Number(id)),
                "{message:?}"
            );
        }
        let mut answered = Vec::new();
        for _ in 0..4 {
            let line = answer(&mut lines).await;
            answered.push((line["error"]["code"].clone(), line["id"].clone()));
        }
        assert_eq!(
            answered,
            [
                (json!(PARSE_ERROR), Value::Null),
                (json!(INVALID_REQUEST), json!(9)),
                (json!(INVALID_REQUEST), json!(10)),
                (json!(PARSE_ERROR), Value::Null),
            ]
        );
        // Nothing else was written: the next line is the ping's answer.
        framed
            .send(JsonRpcMessage::response(
                ServerResult::EmptyResult(EmptyResult {}),
                RequestId::Number(1),
            ))
            .await
            .expect("sent");
        assert_eq!(answer(&mut lines).await["id"], 1);
    }

    static GATE_RAN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

    fn slow_gate() {
        std::thread::sleep(Duration::from_millis(300));
        GATE_RAN.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// `initialize` goes through at once; the next message waits for the
    /// gate (the janitor in the binary), and is not lost when `receive` is
    /// dropped while the gate runs.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn messages_after_initialize_wait_for_the_gate() {
        let (framed, _closed, mut client, _lines) = transport();
        let mut framed = framed.with_gate(slow_gate);
        let initialize = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
        let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        client
            .write_all(format!("{initialize}\n{ping}\n").as_bytes())
            .await
            .expect("write");
        let first = framed.receive().await.expect("initialize");
        assert!(matches!(first, JsonRpcMessage::Request(ref r) if r.id == RequestId::Number(0)));
        assert!(
            !GATE_RAN.load(std::sync::atomic::Ordering::SeqCst),
            "initialize waited"
        );
        // Dropped while the gate runs: the ping is held, not lost.
        let early = tokio::time::timeout(Duration::from_millis(50), framed.receive()).await;
        assert!(early.is_err(), "delivered before the gate ran");
        let next = framed.receive().await.expect("the ping");
        assert!(GATE_RAN.load(std::sync::atomic::Ordering::SeqCst));
        assert!(matches!(next, JsonRpcMessage::Request(ref r) if r.id == RequestId::Number(1)));
    }

    #[test]
    fn a_cancel_reaches_the_handler_whether_it_started_or_not() {
        let in_flight = InFlight::default();
        let parent = CancellationToken::new();
        let early = RequestId::Number(1);
        assert!(in_flight.begin(&early, false));
        assert!(!in_flight.begin(&early, false));
        assert!(in_flight.cancel(&early));
        assert!(in_flight.watch(&early, &parent).is_cancelled());
        let late = RequestId::Number(2);
        assert!(in_flight.begin(&late, true));
        let token = in_flight.watch(&late, &parent);
        assert!(!token.is_cancelled());
        assert!(in_flight.cancel(&late));
        assert!(token.is_cancelled());
        // Not in flight: left to rmcp.
        assert!(!in_flight.cancel(&RequestId::Number(3)));
        let ended = in_flight.end(&late).expect("in flight");
        assert!(ended.cancelled && ended.large);
        assert!(in_flight.begin(&late, false));
        // Server shutdown reaches a handler through rmcp's token.
        let token = in_flight.watch(&late, &parent);
        parent.cancel();
        assert!(token.is_cancelled());
        assert!(!in_flight.end(&late).expect("in flight").cancelled);
    }

    #[tokio::test]
    async fn an_id_in_flight_is_refused_until_its_answer_is_sent() {
        let (mut framed, _closed, mut client, mut lines) = transport();
        let ping = |id: u32| format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}\n");
        for id in [7, 7, 8] {
            client.write_all(ping(id).as_bytes()).await.expect("write");
        }
        let first = framed.receive().await.expect("the first 7");
        assert!(matches!(first, JsonRpcMessage::Request(ref r) if r.id == RequestId::Number(7)));
        let next = framed.receive().await.expect("8");
        assert!(matches!(next, JsonRpcMessage::Request(ref r) if r.id == RequestId::Number(8)));
        let refused = answer(&mut lines).await;
        assert_eq!(refused["id"], 7);
        assert_eq!(refused["error"]["code"], INVALID_REQUEST);
        // Answered, 7 may come again.
        framed
            .send(JsonRpcMessage::response(
                ServerResult::EmptyResult(EmptyResult {}),
                RequestId::Number(7),
            ))
            .await
            .expect("sent");
        assert_eq!(answer(&mut lines).await["result"], json!({}));
        client.write_all(ping(7).as_bytes()).await.expect("write");
        let again = framed.receive().await.expect("7 again");
        assert!(matches!(again, JsonRpcMessage::Request(ref r) if r.id == RequestId::Number(7)));
        // A cancellation is handled here, not by rmcp: the id stays in
        // flight until the cancelled handler's answer comes through, and
        // that answer is not sent.
        client
            .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":7}}\n")
            .await
            .expect("write");
        client.write_all(ping(7).as_bytes()).await.expect("write");
        client.write_all(ping(9).as_bytes()).await.expect("write");
        let nine = framed.receive().await.expect("9");
        assert!(matches!(nine, JsonRpcMessage::Request(ref r) if r.id == RequestId::Number(9)));
        let refused = answer(&mut lines).await;
        assert_eq!(refused["id"], 7);
        assert_eq!(refused["error"]["code"], INVALID_REQUEST);
        framed
            .send(JsonRpcMessage::response(
                ServerResult::EmptyResult(EmptyResult {}),
                RequestId::Number(7),
            ))
            .await
            .expect("dropped");
        framed
            .send(JsonRpcMessage::response(
                ServerResult::EmptyResult(EmptyResult {}),
                RequestId::Number(9),
            ))
            .await
            .expect("sent");
        // 9's answer is the next line: 7's was not written.
        assert_eq!(answer(&mut lines).await["id"], 9);
        client.write_all(ping(7).as_bytes()).await.expect("write");
        assert!(matches!(
            framed.receive().await,
            Some(JsonRpcMessage::Request(ref r)) if r.id == RequestId::Number(7)
        ));
        framed.close().await.expect("closed");
        assert!(
            framed
                .send(JsonRpcMessage::response(
                    ServerResult::EmptyResult(EmptyResult {}),
                    RequestId::Number(8),
                ))
                .await
                .is_err()
        );
    }
}
