//! Interop with a client nobody here wrote: rmcp's own client side drives
//! the server through initialize, tools/list, foreground and background
//! calls, progress, cancellation and shutdown.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, ClientRequest, ProgressNotificationParam, Request, ServerResult,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::{ClientHandler, RoleClient};
use serde_json::json;

use test_support::{gone, read_pid};

use crate::rmcp_support::{arguments, call, mcp_command, serve, text};

#[derive(Clone, Default)]
struct Client {
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Client {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().expect("lock").push(params);
    }
}

async fn connect(dir: &std::path::Path) -> (RunningService<RoleClient, Client>, Client, u32) {
    let client = Client::default();
    // Without containment: the workflow reads its commands' pids from the host.
    let mut command = mcp_command(dir);
    command.args(["--sandbox", "off"]);
    let (running, pid) = serve(client.clone(), command).await;
    (running, client, pid)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rmcp_client_runs_the_whole_workflow() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (client, handler, server_pid) = connect(dir.path()).await;

    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "Bash",
            "BashOutput",
            "KillShell",
            "ListShells",
            "WriteStdin"
        ]
    );

    // Foreground.
    let fg = call(&client, "Bash", json!({ "command": "echo hello from $0" })).await;
    assert_eq!(text(&fg), "hello from bash\n");
    assert_eq!(fg.is_error, Some(false));
    assert_eq!(
        fg.structured_content.as_ref().expect("metadata")["exit_code"],
        0
    );

    // Background, read, kill.
    let started = call(
        &client,
        "Bash",
        json!({ "command": "echo ready; sleep 300", "run_in_background": true }),
    )
    .await;
    let id = started.structured_content.as_ref().expect("metadata")["bash_id"]
        .as_str()
        .expect("bash_id")
        .to_owned();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let read = call(&client, "BashOutput", json!({ "bash_id": id })).await;
        if text(&read).contains("ready") {
            assert!(text(&read).starts_with("Status: running"));
            break;
        }
        assert!(Instant::now() < deadline, "no output from {id}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let killed = call(&client, "KillShell", json!({ "shell_id": id })).await;
    assert_eq!(text(&killed), format!("Shell {id} terminated"));
    let after = call(&client, "BashOutput", json!({ "bash_id": id })).await;
    assert!(
        text(&after).starts_with("Status: killed"),
        "{}",
        text(&after)
    );

    // Progress: the request carries a progress token, the server reports.
    let handle = client
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(
                CallToolRequestParams::new("Bash").with_arguments(arguments(
                    json!({ "command": "echo tick; sleep 2.2; echo tock" }),
                )),
            )),
            PeerRequestOptions::no_options(),
        )
        .await
        .expect("sent");
    let response = handle.await_response().await.expect("answered");
    let ServerResult::CallToolResult(result) = response else {
        panic!("not a tool result: {response:?}")
    };
    assert_eq!(text(&result), "tick\ntock\n");
    let progress = handler.progress.lock().expect("lock").clone();
    assert!(progress.len() >= 2, "{progress:?}");
    assert_eq!(progress[0].message.as_deref(), Some("tick"));

    // Cancellation: SIGINT first, then the tree is ended.
    let pid_file = dir.path().join("pid");
    let handle = client
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(CallToolRequestParams::new("Bash").with_arguments(
                arguments(json!({ "command": format!("sleep 300 & echo $! > {}; wait", pid_file.display()) })),
            ))),
            PeerRequestOptions::no_options(),
        )
        .await
        .expect("sent");
    let pid = read_pid(&pid_file).await;
    handle.cancel(Some("test".into())).await.expect("cancelled");
    assert!(gone(pid).await, "{pid} is still running");

    // A background shell left running ends with the server.
    let pid_file = dir.path().join("bg-pid");
    call(
        &client,
        "Bash",
        json!({
            "command": format!("sleep 300 & echo $! > {}; wait", pid_file.display()),
            "run_in_background": true
        }),
    )
    .await;
    let pid = read_pid(&pid_file).await;
    client.cancel().await.expect("closed");
    assert!(gone(pid).await, "{pid} is still running");
    assert!(gone(server_pid).await, "{server_pid} is still running");
}
