//! One generic bridge from a tool registry to MCP: every registered tool is
//! served with its own name, description and schema; nothing here knows
//! which tools exist.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ServerCapabilities, Tool, ToolAnnotations,
};
use rmcp::model::{
    CancelledNotificationParam, ClientResult, ElicitRequest, ElicitRequestParams,
    ElicitationAction, ElicitationSchema, ProtocolVersion, RequestId, ServerRequest,
};
use rmcp::service::{Peer, PeerRequestOptions, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;
use tokio::sync::mpsc;
use tool_core::{Approval, Approver, ExecutionContext, ProgressSink, Session, ToolExecutor};

/// The server side of one MCP connection (an rmcp `ServerHandler`).
#[derive(Clone)]
pub struct Bridge {
    executor: Arc<ToolExecutor>,
    tools: Arc<Vec<Tool>>,
    working_dir: PathBuf,
    dry_run: bool,
    /// One session per server: `cd` and `export` carry over between calls.
    session: Arc<Session>,
    /// Held while a question is open: one at a time, the others wait.
    asking: Arc<tokio::sync::Mutex<()>>,
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
            asking: Arc::new(tokio::sync::Mutex::new(())),
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

/// Asks the person behind the client with `elicitation/create` (form
/// mode, one optional boolean `remember`). Only made for clients that
/// declared the capability on a protocol that lets a server send requests
/// (before 2026-07-28: rmcp refuses server-to-client requests there and
/// does not drive that revision's input-required result for us).
struct ElicitationApprover {
    peer: Peer<RoleServer>,
    asking: Arc<tokio::sync::Mutex<()>>,
}

impl ElicitationApprover {
    /// An approver for the client of `context`, when it can be asked.
    fn for_client(
        context: &RequestContext<RoleServer>,
        asking: &Arc<tokio::sync::Mutex<()>>,
    ) -> Option<Arc<dyn Approver>> {
        let version = context.protocol_version()?;
        if version >= ProtocolVersion::V_2026_07_28 {
            return None;
        }
        // Form mode: declared, or implied by a bare `elicitation: {}` (the
        // 2025-06-18 shape). rmcp's own check sits behind its `elicitation`
        // feature, which would add a URL parser we do not need.
        let info = context.peer.peer_info()?;
        let capability = info.capabilities.elicitation.as_ref()?;
        if capability.form.is_none() && capability.url.is_some() {
            return None;
        }
        Some(Arc::new(Self {
            peer: context.peer.clone(),
            asking: Arc::clone(asking),
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
        let _turn = self.asking.lock().await;
        let Ok(schema) = ElicitationSchema::builder()
            .optional_bool_with("remember", |schema| {
                schema.with_default(false).description(
                    "Run this command unasked from now on (same text, directory and variables)",
                )
            })
            .build()
        else {
            return Approval::Unavailable;
        };
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(
            ElicitRequestParams::FormElicitationParams {
                meta: None,
                message,
                requested_schema: schema,
            },
        ));
        let Ok(handle) = self
            .peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
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
            Ok(ClientResult::ElicitResult(result)) => match result.action {
                ElicitationAction::Accept => Approval::Accept {
                    remember: result
                        .content
                        .as_ref()
                        .and_then(|content| content.get("remember"))
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                },
                ElicitationAction::Decline => Approval::Decline,
                // Cancel, and any action a later revision adds.
                _ => Approval::Cancel,
            },
            _ => Approval::Unavailable,
        }
    }
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
        let call_context = ExecutionContext::new(self.working_dir.clone())
            .with_dry_run(self.dry_run)
            .with_session(Arc::clone(&self.session))
            .with_cancellation(context.ct.clone())
            .with_progress(progress_sink(&context));
        let call_context = match ElicitationApprover::for_client(&context, &self.asking) {
            Some(approver) => call_context.with_approver(approver),
            None => call_context,
        };
        let started = Instant::now();
        let executed = self
            .executor
            .execute(&name, &call_context, arguments)
            .await
            .map_err(|error| ErrorData::invalid_params(error.to_string(), None))?;
        let result = executed.result;
        log_call(&name, &result, started);
        let success = result.success;
        let (text, structured) = structured_content(result);
        let content = vec![ContentBlock::text(text)];
        let mut answer = if success {
            CallToolResult::success(content)
        } else {
            CallToolResult::error(content)
        };
        answer.structured_content = Some(structured);
        Ok(answer.into())
    }
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
