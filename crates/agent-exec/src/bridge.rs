//! One generic bridge from a tool registry to MCP: every registered tool is
//! served with its own name, description and schema; nothing here knows
//! which tools exist.

use std::collections::HashMap;
use std::io::Read as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ServerCapabilities, Tool, ToolAnnotations,
};
use rmcp::model::{
    CancelledNotificationParam, ClientCapabilities, ClientResult, ElicitRequest,
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema, InputRequest,
    InputRequests, InputRequiredResult, InputResponses, ProtocolVersion, RequestId, ServerRequest,
};
use rmcp::service::{Peer, PeerRequestOptions, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tool_core::{
    Approval, Approver, Arrival, ExecutedCall, ExecutionContext, ExecutorError, Principal,
    ProgressSink, ProgressUpdate, Session, ToolExecutor,
};

/// The call's place in the order calls came (the framing's, in the
/// request's extensions): its questions are put in that order.
fn arrival_of(context: &RequestContext<RoleServer>) -> Option<Arrival> {
    context.extensions.get::<Arrival>().cloned()
}

/// Who makes the call: the principal `serve` authenticated and put in the
/// HTTP request's extensions (rmcp hands the request's parts on), else the
/// one principal of a stdio server.
fn principal_of(context: &RequestContext<RoleServer>) -> Principal {
    context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Principal>())
        .cloned()
        .unwrap_or_default()
}

/// The server side of one MCP connection (an rmcp `ServerHandler`).
#[derive(Clone)]
pub struct Bridge {
    executor: Arc<ToolExecutor>,
    tools: Arc<Vec<Tool>>,
    working_dir: PathBuf,
    dry_run: bool,
    /// One session per server: `cd` and `export` carry over between calls.
    session: Arc<Session>,
    /// Under `serve`, one session per principal other than the local one,
    /// so that one token's `cd` and `export` never reach another's calls.
    sessions: Arc<Mutex<HashMap<Principal, Arc<Session>>>>,
    /// Calls whose question went out in an input-required result
    /// (protocol 2026-07-28), by the request state that binds the retry.
    pending: Arc<Mutex<HashMap<String, Pending>>>,
}

impl Bridge {
    /// A bridge serving `executor`'s tools; calls run in `working_dir`.
    pub fn new(executor: ToolExecutor, working_dir: PathBuf, dry_run: bool) -> Self {
        let tools = executor
            .registry()
            .definitions()
            .into_iter()
            .map(mcp_tool)
            .collect();
        Self {
            executor: Arc::new(executor),
            tools: Arc::new(tools),
            working_dir,
            dry_run,
            session: Arc::new(Session::new()),
            sessions: Arc::default(),
            pending: Arc::default(),
        }
    }
}

/// A tool definition as MCP lists it: schemas, title and hints.
fn mcp_tool(definition: tool_core::ToolDefinition) -> Tool {
    let object = |schema: Value| match schema {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    };
    let hints = definition.annotations;
    let mut tool = Tool::new(
        definition.name,
        definition.description,
        object(definition.input_schema),
    );
    if let Some(schema) = definition.output_schema {
        tool = tool.with_raw_output_schema(Arc::new(object(schema)));
    }
    if let Some(title) = &hints.title {
        tool = tool.with_title(title.clone());
    }
    if !hints.is_empty() {
        tool = tool.with_annotations(ToolAnnotations::from_raw(
            hints.title,
            hints.read_only_hint,
            hints.destructive_hint,
            hints.idempotent_hint,
            hints.open_world_hint,
        ));
    }
    tool
}

/// Whether a client's capabilities let it be asked a form question.
/// Form mode: declared, or implied by a bare `elicitation: {}` (the
/// 2025-06-18 shape). rmcp's own check sits behind its `elicitation`
/// feature, which would add a URL parser we do not need.
fn can_answer_forms(capabilities: Option<&ClientCapabilities>) -> bool {
    capabilities
        .and_then(|capabilities| capabilities.elicitation.as_ref())
        .is_some_and(|capability| capability.form.is_some() || capability.url.is_none())
}

/// The question as an `elicitation/create` request: the message and two
/// optional booleans, `remember` and `save`. The same for both ways of
/// asking.
fn question(message: String) -> Option<ElicitRequest> {
    let schema = ElicitationSchema::builder()
        .optional_bool_with("remember", |schema| {
            schema.with_default(false).description(
                "Run this command unasked from now on while it runs the same programs and scripts (same text, directory and environment)",
            )
        })
        .optional_bool_with("save", |schema| {
            schema.with_default(false).description(
                "Also save it as an allow rule in the policy file, so it runs unasked after restarts too",
            )
        })
        .build()
        .ok()?;
    Some(ElicitRequest::new(
        ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema: schema,
        },
    ))
}

/// What an elicitation answer means for the command.
fn approval_of(result: &ElicitResult) -> Approval {
    match result.action {
        ElicitationAction::Accept => {
            let chose = |name: &str| {
                result
                    .content
                    .as_ref()
                    .and_then(|content| content.get(name))
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
            };
            if chose("save") {
                Approval::Save
            } else {
                Approval::Accept {
                    remember: chose("remember"),
                }
            }
        }
        ElicitationAction::Decline => Approval::Decline,
        // Cancel, and any action a later revision adds.
        _ => Approval::Cancel,
    }
}

/// Asks the person behind the client with `elicitation/create` (form
/// mode, one optional boolean `remember`). Only made for clients that
/// declared the capability on a protocol that lets a server send requests
/// (before 2026-07-28, where rmcp refuses server-to-client requests; that
/// revision is asked by `InputRequiredApprover`).
struct ElicitationApprover {
    peer: Peer<RoleServer>,
}

impl ElicitationApprover {
    /// An approver for the client of `context`, when it can be asked by
    /// a request of ours (protocols before 2026-07-28).
    fn for_client(context: &RequestContext<RoleServer>) -> Option<Arc<dyn Approver>> {
        let version = context.protocol_version()?;
        if version >= ProtocolVersion::V_2026_07_28
            || !can_answer_forms(context.client_capabilities().as_ref())
        {
            return None;
        }
        Some(Arc::new(Self {
            peer: context.peer.clone(),
        }))
    }
}

/// Withdraws an open question (`notifications/cancelled`) unless disarmed:
/// the ask future was dropped (the call was cancelled, or `--ask-timeout`
/// passed) before the person answered.
struct Withdraw {
    peer: Peer<RoleServer>,
    id: Option<RequestId>,
}

impl Drop for Withdraw {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            let peer = self.peer.clone();
            tokio::spawn(async move {
                let _ = peer
                    .notify_cancelled(CancelledNotificationParam::new(
                        Some(id),
                        Some("the question is no longer needed".to_owned()),
                    ))
                    .await;
            });
        }
    }
}

#[async_trait::async_trait]
impl Approver for ElicitationApprover {
    async fn ask(&self, message: String) -> Approval {
        let Some(request) = question(message) else {
            return Approval::Unavailable;
        };
        let Ok(handle) = self
            .peer
            .send_request_with_option(
                ServerRequest::ElicitRequest(request),
                PeerRequestOptions::no_options(),
            )
            .await
        else {
            return Approval::Unavailable;
        };
        let mut withdraw = Withdraw {
            peer: self.peer.clone(),
            id: Some(handle.id.clone()),
        };
        let answer = handle.await_response().await;
        withdraw.id = None;
        match answer {
            Ok(ClientResult::ElicitResult(result)) => approval_of(&result),
            _ => Approval::Unavailable,
        }
    }
}

/// The key of the question in an input-required result's `inputRequests`
/// (and of its answer in the retry's `inputResponses`).
const QUESTION_KEY: &str = "approval";

/// How long after its question went out a call that has ended unanswered
/// (its `--ask-timeout` passed) is kept: a late retry still gets the
/// `timed out` refusal rather than an unknown state.
const PENDING_KEEP: Duration = Duration::from_secs(3600);

/// A question the call's task puts to the bridge, and where its answer goes.
struct Question {
    message: String,
    answer: oneshot::Sender<Approval>,
}

/// Asks the person behind a client on protocol 2026-07-28, where a server
/// may not send requests: the question goes to the bridge, which answers
/// the request with an input-required result and hands over the answer
/// the client's retry carries. Dropping the ask (cancellation,
/// `--ask-timeout`) drops the answer's receiver, so a late answer is lost.
struct InputRequiredApprover {
    questions: mpsc::UnboundedSender<Question>,
}

#[async_trait::async_trait]
impl Approver for InputRequiredApprover {
    async fn ask(&self, message: String) -> Approval {
        let (answer, answered) = oneshot::channel();
        if self.questions.send(Question { message, answer }).is_err() {
            return Approval::Unavailable;
        }
        answered.await.unwrap_or(Approval::Unavailable)
    }
}

/// A tool call running on a task of its own, so that it can wait for an
/// answer across requests: the input-required result ends one request and
/// the client's retry, a new request, picks the call up again.
struct Call {
    /// The tool and arguments the call was made with: a retry must carry
    /// the same.
    tool: String,
    arguments: Value,
    task: tokio::task::JoinHandle<Result<CallToolResult, ErrorData>>,
    questions: mpsc::UnboundedReceiver<Question>,
    /// The call's own cancellation: each request that follows it links its
    /// token here.
    cancel: CancellationToken,
    /// Where the call's progress goes: the sink of the request following it.
    progress: Arc<Mutex<ProgressSink>>,
}

/// A call whose question went out, waiting for the retry with the answer.
struct Pending {
    answer: oneshot::Sender<Approval>,
    call: Call,
    shown: Instant,
}

/// An unguessable request state: 128 bits from the system's generator.
fn new_request_state() -> Option<String> {
    let mut bytes = [0_u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut file| file.read_exact(&mut bytes))
        .ok()?;
    Some(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

/// The answer a retry's `inputResponses` holds; anything but an
/// elicitation result for our question counts as dismissed.
fn answer_of(responses: Option<&InputResponses>) -> Approval {
    responses
        .and_then(|responses| responses.get(QUESTION_KEY))
        .and_then(|value| serde_json::from_value::<ElicitResult>(value.clone()).ok())
        .map_or(Approval::Cancel, |result| approval_of(&result))
}

/// A progress sink that forwards reports, in order, as
/// `notifications/progress` for `token`.
fn progress_sink(context: &RequestContext<RoleServer>) -> ProgressSink {
    let Some(token) = context.meta.get_progress_token() else {
        return ProgressSink::none();
    };
    let (sender, mut receiver) = mpsc::unbounded_channel::<tool_core::ProgressUpdate>();
    let peer = context.peer.clone();
    tokio::spawn(async move {
        while let Some(update) = receiver.recv().await {
            let mut param = ProgressNotificationParam::new(token.clone(), update.progress);
            if let Some(total) = update.total {
                param = param.with_total(total);
            }
            if let Some(message) = update.message {
                param = param.with_message(message);
            }
            if peer.notify_progress(param).await.is_err() {
                break;
            }
        }
    });
    ProgressSink::new(move |update| {
        let _ = sender.send(update);
    })
}

impl ServerHandler for Bridge {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("agent-exec", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Shell tools: Bash runs commands (foreground or background, or under a terminal \
                 with `tty`), BashOutput reads a background shell's new output, KillShell stops \
                 one, WriteStdin types into a tty shell.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|tool| tool.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        if self.executor.registry().get(&name).is_none() {
            // -32602, as the MCP specification's own example does.
            return Err(ErrorData::invalid_params(
                format!("Unknown tool: {name}"),
                None,
            ));
        }
        let arguments = request.arguments.map_or(Value::Null, Value::Object);
        let modern = context
            .protocol_version()
            .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28);
        if modern {
            if let Some(state) = request.request_state {
                return self
                    .resume(
                        &state,
                        &name,
                        &arguments,
                        request.input_responses.as_ref(),
                        &context,
                    )
                    .await;
            }
            if can_answer_forms(context.client_capabilities().as_ref()) {
                let call = self.start(
                    name,
                    arguments,
                    arrival_of(&context),
                    principal_of(&context),
                );
                return self.follow(call, &context).await;
            }
        }
        let call_context = self
            .call_context(principal_of(&context))
            .with_cancellation(context.ct.clone())
            .with_progress(progress_sink(&context));
        let call_context = match arrival_of(&context) {
            Some(arrival) => call_context.with_arrival(arrival),
            None => call_context,
        };
        let call_context = match ElicitationApprover::for_client(&context) {
            Some(approver) => call_context.with_approver(approver),
            None => call_context,
        };
        let started = Instant::now();
        let executed = self.executor.execute(&name, &call_context, arguments).await;
        answer(&name, executed, started).map(Into::into)
    }
}

impl Bridge {
    /// The context every call of `principal` starts from.
    fn call_context(&self, principal: Principal) -> ExecutionContext {
        let session = if principal == Principal::local() {
            Arc::clone(&self.session)
        } else {
            let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(sessions.entry(principal.clone()).or_default())
        };
        ExecutionContext::new(self.working_dir.clone())
            .with_dry_run(self.dry_run)
            .with_session(session)
            .with_principal(principal)
    }

    /// Starts a call on a task of its own, asking through input-required
    /// results.
    fn start(
        &self,
        name: String,
        arguments: Value,
        arrival: Option<Arrival>,
        principal: Principal,
    ) -> Call {
        let (sender, questions) = mpsc::unbounded_channel();
        let cancel = CancellationToken::new();
        let progress = Arc::new(Mutex::new(ProgressSink::none()));
        let forward = Arc::clone(&progress);
        let call_context = self
            .call_context(principal)
            .with_cancellation(cancel.clone())
            .with_progress(ProgressSink::new(move |update: ProgressUpdate| {
                let sink = forward
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                sink.report(update);
            }))
            .with_approver(Arc::new(InputRequiredApprover { questions: sender }));
        let call_context = match arrival {
            Some(arrival) => call_context.with_arrival(arrival),
            None => call_context,
        };
        let executor = Arc::clone(&self.executor);
        let (tool, given) = (name.clone(), arguments.clone());
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let executed = executor.execute(&name, &call_context, arguments).await;
            answer(&name, executed, started)
        });
        Call {
            tool,
            arguments: given,
            task,
            questions,
            cancel,
            progress,
        }
    }

    /// Follows `call` for the request of `context` until it ends (its
    /// answer) or asks (an input-required result whose request state binds
    /// the retry to this call); the request's cancellation ends the call.
    async fn follow(
        &self,
        mut call: Call,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        *call.progress.lock().unwrap_or_else(PoisonError::into_inner) = progress_sink(context);
        // A request dropped while following (rmcp stopping, the client
        // gone) ends the call as its cancellation would; disarmed when the
        // call ends or is handed over to the retry.
        let abandon = call.cancel.clone().drop_guard();
        let mut cancelled = false;
        loop {
            let asked = tokio::select! {
                biased;
                ended = &mut call.task => {
                    abandon.disarm();
                    return ended
                        .unwrap_or_else(|error| {
                            Err(ErrorData::internal_error(
                                format!("the call ended abnormally: {error}"),
                                None,
                            ))
                        })
                        .map(Into::into);
                }
                Some(asked) = call.questions.recv() => asked,
                () = context.ct.cancelled(), if !cancelled => {
                    // The call ends as cancelled; its answer is awaited.
                    cancelled = true;
                    call.cancel.cancel();
                    continue;
                }
            };
            let (Some(state), Some(request)) = (new_request_state(), question(asked.message))
            else {
                let _ = asked.answer.send(Approval::Unavailable);
                continue;
            };
            *call.progress.lock().unwrap_or_else(PoisonError::into_inner) = ProgressSink::none();
            abandon.disarm();
            let requests = InputRequests::from([(
                QUESTION_KEY.to_owned(),
                InputRequest::Elicitation(request),
            )]);
            let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            // Calls that ended unanswered long ago: nobody will come back.
            pending.retain(|_, waiting| {
                !(waiting.call.task.is_finished() && waiting.shown.elapsed() > PENDING_KEEP)
            });
            pending.insert(
                state.clone(),
                Pending {
                    answer: asked.answer,
                    call,
                    shown: Instant::now(),
                },
            );
            return Ok(InputRequiredResult::new(Some(requests), Some(state)).into());
        }
    }

    /// A retry of a call whose question went out: the request state must be
    /// one we issued and not yet used, for the same tool and arguments;
    /// then the answer goes to the call, which is followed again.
    async fn resume(
        &self,
        state: &str,
        tool: &str,
        arguments: &Value,
        responses: Option<&InputResponses>,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let waiting = {
            let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            let Some(waiting) = pending.remove(state) else {
                return Err(ErrorData::invalid_params(
                    "Unknown, expired or already used requestState: nothing ran. Call the tool \
                     again without requestState to be asked again.",
                    None,
                ));
            };
            if waiting.call.tool != tool || waiting.call.arguments != *arguments {
                // The question stays open for the call it belongs to.
                pending.insert(state.to_owned(), waiting);
                return Err(ErrorData::invalid_params(
                    "This requestState belongs to a call with another tool or other arguments: \
                     nothing ran. A retry must repeat the call it answers.",
                    None,
                ));
            }
            waiting
        };
        // A call whose question timed out meanwhile has dropped the receiver.
        let _ = waiting.answer.send(answer_of(responses));
        self.follow(waiting.call, context).await
    }
}

/// The MCP answer for a call's outcome.
fn answer(
    name: &str,
    executed: Result<ExecutedCall, ExecutorError>,
    started: Instant,
) -> Result<CallToolResult, ErrorData> {
    let result = executed
        .map_err(|error| ErrorData::invalid_params(error.to_string(), None))?
        .result;
    log_call(name, &result, started);
    let success = result.success;
    let (text, structured) = structured_content(result);
    let content = vec![ContentBlock::text(text)];
    let mut answer = if success {
        CallToolResult::success(content)
    } else {
        CallToolResult::error(content)
    };
    answer.structured_content = Some(structured);
    Ok(answer)
}

/// The answer's `structuredContent`: the metadata, then `output`, the same
/// text as the content item. Claude Code, Codex, VS Code and opencode hand
/// the model this object instead of the text, so it must carry the output;
/// `output` goes last (`serde_json` keeps insertion order: `preserve_order`)
/// so a client that cuts the middle of a long result keeps the metadata.
/// Answers the text too, for the content item.
fn structured_content(result: tool_core::ToolResult) -> (String, Value) {
    let text = result.text().to_owned();
    let mut map = result.metadata;
    // Another key named `output` would otherwise keep its earlier place.
    map.shift_remove("output");
    map.insert("output".to_owned(), Value::String(text.clone()));
    (text, Value::Object(map))
}

/// One log line per tool call, at `info` (`RUST_LOG=info`), on stderr: what
/// an operator needs to follow an agent's session. Every value comes from
/// the answer's metadata, where the command is already redacted; it is
/// printed with `Debug` so a newline in it cannot start a second line.
fn log_call(tool: &str, result: &tool_core::ToolResult, started: Instant) {
    if !tracing::enabled!(tracing::Level::INFO) {
        return;
    }
    let metadata = result.metadata_value();
    let text = |key: &str| metadata.get(key).and_then(Value::as_str);
    let status = text("status");
    let exit_code = metadata.get("exit_code").and_then(Value::as_i64);
    // Refusals carry their decision; a call that ran was allowed; one that
    // neither ran nor names a decision was refused before the policy spoke
    // (bad arguments, a working directory outside the roots).
    let decision = match text("decision") {
        Some(decision) => decision,
        None if status == Some("blocked") => "deny",
        None if status.is_some() || exit_code.is_some() || result.success => "allow",
        None => "refused",
    };
    // Bound before the macro: inside it, `Value` names tracing's trait.
    let command = text("command").map(tracing::field::debug);
    let rule = text("rule");
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    tracing::info!(
        tool,
        command,
        decision,
        rule,
        status,
        exit_code,
        duration_ms,
        is_error = !result.success,
        "tool call"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_answer_is_read_from_its_key_and_anything_else_is_a_dismissal() {
        let responses = |value: Value| -> InputResponses {
            serde_json::from_value(serde_json::json!({ QUESTION_KEY: value })).unwrap_or_default()
        };
        let accept = serde_json::json!({ "action": "accept", "content": { "remember": true } });
        assert_eq!(
            answer_of(Some(&responses(accept))),
            Approval::Accept { remember: true }
        );
        let save = serde_json::json!({ "action": "accept", "content": { "save": true } });
        assert_eq!(answer_of(Some(&responses(save))), Approval::Save);
        let bare = serde_json::json!({ "action": "accept" });
        assert_eq!(
            answer_of(Some(&responses(bare))),
            Approval::Accept { remember: false }
        );
        let decline = serde_json::json!({ "action": "decline" });
        assert_eq!(answer_of(Some(&responses(decline))), Approval::Decline);
        let nonsense = serde_json::json!({ "action": 7 });
        assert_eq!(answer_of(Some(&responses(nonsense))), Approval::Cancel);
        assert_eq!(answer_of(None), Approval::Cancel);
        let other_key: InputResponses =
            serde_json::from_value(serde_json::json!({ "other": { "action": "accept" } }))
                .unwrap_or_default();
        assert_eq!(answer_of(Some(&other_key)), Approval::Cancel);
    }

    #[test]
    fn request_states_are_128_random_bits_in_hex() {
        let first = new_request_state().unwrap_or_default();
        let second = new_request_state().unwrap_or_default();
        assert_eq!(first.len(), 32, "{first}");
        assert!(first.bytes().all(|b| b.is_ascii_hexdigit()), "{first}");
        assert_ne!(first, second);
    }

    #[test]
    fn form_questions_need_form_mode_or_the_bare_capability() {
        let capabilities = |value: Value| -> ClientCapabilities {
            serde_json::from_value(value).unwrap_or_default()
        };
        let form = capabilities(serde_json::json!({ "elicitation": { "form": {} } }));
        let bare = capabilities(serde_json::json!({ "elicitation": {} }));
        let url_only = capabilities(serde_json::json!({ "elicitation": { "url": {} } }));
        let none = capabilities(serde_json::json!({}));
        assert!(can_answer_forms(Some(&form)));
        assert!(can_answer_forms(Some(&bare)));
        assert!(!can_answer_forms(Some(&url_only)));
        assert!(!can_answer_forms(Some(&none)));
        assert!(!can_answer_forms(None));
    }
}
