//! The ask tier through the tools with an `Approver` of our own: accept,
//! remember (scoped to text, directory and variable values), decline,
//! `--ask-timeout`, a cancelled call, progress while waiting, dry runs,
//! and the fallback when nobody can be asked.
#![allow(clippy::expect_used, clippy::unwrap_used, reason = "tests")]

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use common::{World, meta_str};
use exec_policy::Policy;
use exec_tools::AskFallback;
use serde_json::json;
use tool_core::{Approval, Approver, ExecutionContext, ProgressSink, ToolResult};

/// Answers every question with the next answer (or never, when none left).
#[derive(Default)]
struct Person {
    answers: Mutex<Vec<Approval>>,
    asked: Mutex<Vec<String>>,
}

#[async_trait]
impl Approver for Person {
    async fn ask(&self, message: String) -> Approval {
        self.asked.lock().unwrap().push(message);
        let next = self.answers.lock().unwrap().pop();
        match next {
            Some(answer) => answer,
            None => std::future::pending().await,
        }
    }
}

fn world(fallback: AskFallback, timeout: Duration) -> World {
    let policy = Policy::parse(
        "[[rule]]\nid = \"touch-asks\"\ndecision = \"ask\"\nprogram = \"touch\"\nreason = \"a nod first\"\n",
        Path::new("policy.toml"),
    )
    .unwrap();
    World::with(|mut config| {
        config.analyzer.rules = policy.analyzer.rules;
        config.ask_fallback = fallback;
        config.ask_timeout = timeout;
        config
    })
}

async fn touch(world: &World, context: &ExecutionContext, name: &str) -> ToolResult {
    world
        .call_in(
            context,
            "Bash",
            json!({ "command": format!("touch \"$D\"{name}") }),
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_person_decides_and_a_remembered_approval_is_scoped() {
    let world = world(AskFallback::Deny, Duration::from_secs(60));
    let person = Arc::new(Person::default());
    let context = world.context.clone().with_approver(person.clone());
    assert!(world.bash("export D=x").await.success);

    person
        .answers
        .lock()
        .unwrap()
        .push(Approval::Accept { remember: true });
    let ran = touch(&world, &context, "1").await;
    assert!(ran.success, "{}", ran.text());
    assert_eq!(meta_str(&ran, "approved_by"), "user");
    assert!(world.root().join("x1").exists());
    let question = person.asked.lock().unwrap()[0].clone();
    assert!(
        question.contains("touch-asks") && question.contains("a nod first"),
        "{question}"
    );
    assert!(
        question.contains(world.root().to_str().unwrap()),
        "{question}"
    );

    let again = touch(&world, &context, "1").await;
    assert_eq!(meta_str(&again, "approved_by"), "remembered");
    assert_eq!(person.asked.lock().unwrap().len(), 1);

    // Another value of $D is another approval.
    assert!(world.bash("export D=y").await.success);
    person.answers.lock().unwrap().push(Approval::Decline);
    let declined = touch(&world, &context, "1").await;
    assert!(!declined.success);
    assert!(declined.text().contains("blocked") && declined.text().contains("declined"));
    assert!(!world.root().join("y1").exists());

    person.answers.lock().unwrap().push(Approval::Cancel);
    let cancelled = touch(&world, &context, "1").await;
    assert!(
        cancelled.text().contains("declined"),
        "{}",
        cancelled.text()
    );

    // A client that refuses the request: the fallback decides.
    person.answers.lock().unwrap().push(Approval::Unavailable);
    let refused = touch(&world, &context, "2").await;
    let text = refused.text();
    assert!(
        text.contains("blocked") && text.contains("approval") && text.contains("cannot be asked"),
        "{text}"
    );
    assert!(
        !text.contains("declined") && !text.contains("timed out"),
        "{text}"
    );

    // A dry run never asks.
    let asked = person.asked.lock().unwrap().len();
    let dry = touch(&world, &context.clone().with_dry_run(true), "3").await;
    assert!(dry.text().contains("approval"), "{}", dry.text());
    assert_eq!(person.asked.lock().unwrap().len(), asked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_reports_progress_times_out_and_yields_to_cancellation() {
    let world = world(AskFallback::Allow, Duration::from_millis(1500));
    let person = Arc::new(Person::default());
    let updates = Arc::new(Mutex::new(Vec::new()));
    let sink = {
        let updates = Arc::clone(&updates);
        ProgressSink::new(move |update| updates.lock().unwrap().push(update.message))
    };
    let context = world
        .context
        .clone()
        .with_approver(person.clone())
        .with_progress(sink);
    let timed_out = touch(&world, &context, "late").await;
    assert!(
        timed_out.text().contains("blocked")
            && timed_out.text().contains("timed out")
            && !timed_out.text().contains("declined"),
        "{}",
        timed_out.text()
    );
    let waiting = updates
        .lock()
        .unwrap()
        .iter()
        .filter(|m| m.as_deref() == Some("waiting for approval"))
        .count();
    assert!(waiting >= 2, "{waiting}");

    let cancel = tool_core::CancellationToken::new();
    let cancelled_context = context.clone().with_cancellation(cancel.clone());
    let call = tokio::spawn({
        let world_context = cancelled_context.clone();
        let env = Arc::clone(&world.env);
        async move {
            let mut registry = tool_core::ToolRegistry::new();
            exec_tools::register_execution_tools(&mut registry, &env).unwrap();
            let executor = tool_core::ToolExecutor::new(Arc::new(registry));
            executor
                .execute("Bash", &world_context, json!({ "command": "touch never" }))
                .await
                .unwrap()
                .result
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    cancel.cancel();
    let result = call.await.unwrap();
    assert_eq!(
        meta_str(&result, "status"),
        "cancelled",
        "{}",
        result.text()
    );
    assert!(!world.root().join("never").exists());

    // Nobody to ask, fallback allow: it runs.
    let ran = world
        .call("Bash", json!({ "command": "touch fallback" }))
        .await;
    assert_eq!(meta_str(&ran, "approved_by"), "fallback", "{}", ran.text());
}

/// Answers accept after a delay, counting the questions open at once.
#[derive(Default)]
struct SlowPerson {
    open: Mutex<(usize, usize)>,
}

#[async_trait]
impl Approver for SlowPerson {
    async fn ask(&self, _message: String) -> Approval {
        {
            let mut open = self.open.lock().unwrap();
            open.0 += 1;
            open.1 = open.1.max(open.0);
        }
        tokio::time::sleep(Duration::from_millis(1000)).await;
        self.open.lock().unwrap().0 -= 1;
        Approval::Accept { remember: false }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_question_at_a_time_and_the_timeout_counts_from_when_it_is_put() {
    // Each answer takes 1 s; the second question waits for the first, so
    // it is answered 2 s after its call began, past a 1.5 s timeout
    // counted from the call, within one counted from the question.
    let world = world(AskFallback::Deny, Duration::from_millis(1500));
    let person = Arc::new(SlowPerson::default());
    let context = world.context.clone().with_approver(person.clone());
    let (first, second) = tokio::join!(
        touch(&world, &context, "first"),
        touch(&world, &context, "second")
    );
    for result in [&first, &second] {
        assert!(result.success, "{}", result.text());
        assert_eq!(meta_str(result, "approved_by"), "user");
    }
    assert_eq!(person.open.lock().unwrap().1, 1, "questions open at once");
}
