//! Background shells belong to the principal that started them: the tools
//! find a shell by id only for its owner, and list only the caller's. To
//! anyone else a shell answers exactly as an id nobody knows (`not
//! found`), so a handle reveals nothing about another principal's work.
//! A stdio server has one principal, so there nothing changes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use shell_runtime::{ManagerError, ReservedId, ShellId, ShellProcess};
use tool_core::Principal;

use crate::environment::ExecEnvironment;

/// Who started each background shell, by id. An id is recorded under the
/// same lock that looks it up, before the manager hands it out, so no
/// lookup ever sees a shell without its owner; a shell with none (started
/// past the tools, by an embedder) belongs to nobody.
#[derive(Debug, Default)]
pub(crate) struct ShellOwners(Mutex<HashMap<ShellId, Principal>>);

impl ShellOwners {
    fn lock(&self) -> MutexGuard<'_, HashMap<ShellId, Principal>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ExecEnvironment {
    /// [`ShellManager::reserve_id`](shell_runtime::ShellManager::reserve_id),
    /// the id recorded as `principal`'s.
    pub(crate) fn reserve_shell_id(&self, principal: &Principal) -> ReservedId<'_> {
        let mut owners = self.owners.lock();
        self.forget_owners_of_gone_shells(&mut owners);
        let reserved = self.manager.reserve_id();
        owners.insert(reserved.id().to_owned(), principal.clone());
        reserved
    }

    /// [`ShellManager::adopt`](shell_runtime::ShellManager::adopt), the new
    /// id recorded as `principal`'s.
    pub(crate) fn adopt_shell(
        &self,
        shell: &Arc<ShellProcess>,
        principal: &Principal,
    ) -> Result<ShellId, ManagerError> {
        let mut owners = self.owners.lock();
        self.forget_owners_of_gone_shells(&mut owners);
        let id = self.manager.adopt(shell)?;
        owners.insert(id.clone(), principal.clone());
        Ok(id)
    }

    /// The shell `id`, if `principal` started it.
    pub(crate) fn shell_for(&self, id: &str, principal: &Principal) -> Option<Arc<ShellProcess>> {
        let owners = self.owners.lock();
        if owners.get(id) != Some(principal) {
            return None;
        }
        self.manager.get(id)
    }

    /// The tracked shells `principal` started, oldest first.
    pub(crate) fn shells_of(&self, principal: &Principal) -> Vec<(ShellId, Arc<ShellProcess>)> {
        let owners = self.owners.lock();
        self.manager
            .list()
            .into_iter()
            .filter(|(id, _)| owners.get(id) == Some(principal))
            .collect()
    }

    /// Keeps the map no larger than the shells the manager still knows
    /// (it forgets finished ones past its limit), checked only once the
    /// map outgrows that limit.
    fn forget_owners_of_gone_shells(&self, owners: &mut HashMap<ShellId, Principal>) {
        if owners.len() >= shell_runtime::MAX_TRACKED_SHELLS {
            owners.retain(|id, _| self.manager.is_known(id));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;
    use tool_core::{ExecutionContext, Principal, ToolExecutor, ToolRegistry};

    use crate::environment::{ExecConfig, ExecEnvironment};

    /// One server, two principals: each sees, reads, types into and kills
    /// only its own shells; the other's answer exactly as an unknown id.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn another_principals_shell_answers_as_an_unknown_id() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let mut config = ExecConfig::new(vec![dir.path().to_path_buf()], dir.path().to_path_buf());
        config
            .env
            .vars
            .insert("PATH".to_owned(), std::env::var("PATH").unwrap_or_default());
        let env = Arc::new(ExecEnvironment::new(config));
        let mut registry = ToolRegistry::new();
        crate::register_execution_tools(&mut registry, &env).expect("the tools register");
        let executor = ToolExecutor::new(Arc::new(registry));
        let alice = ExecutionContext::new(dir.path()).with_principal(Principal::named("alice"));
        let bob = ExecutionContext::new(dir.path()).with_principal(Principal::named("bob"));
        let started = executor
            .execute(
                "Bash",
                &alice,
                json!({ "command": "echo secret-work; sleep 60", "run_in_background": true }),
            )
            .await
            .expect("Bash answers");
        let id = started.result.metadata["bash_id"]
            .as_str()
            .expect("a background shell")
            .to_owned();
        let unknown = executor
            .execute("BashOutput", &bob, json!({ "bash_id": "shell_00000000" }))
            .await
            .expect("BashOutput answers");
        let expected = unknown.result.text().replace("shell_00000000", &id);
        assert_eq!(
            expected,
            format!("Shell {id} not found. No background shells are known.")
        );
        for (tool, arguments) in [
            ("BashOutput", json!({ "bash_id": id })),
            (
                "WriteStdin",
                json!({ "bash_id": id, "input": "x\n", "wait_ms": 0 }),
            ),
            ("KillShell", json!({ "shell_id": id })),
        ] {
            let answer = executor
                .execute(tool, &bob, arguments)
                .await
                .expect("the tool answers");
            assert!(!answer.result.success, "{tool}: {answer:?}");
            assert_eq!(answer.result.text(), expected, "{tool}");
        }
        // Alice's shell still runs, and she reads it.
        let read = executor
            .execute(
                "BashOutput",
                &alice,
                json!({ "bash_id": id, "until": { "regex": "secret-work" }, "wait_ms": 20000 }),
            )
            .await
            .expect("BashOutput answers");
        assert!(read.result.success, "{read:?}");
        assert!(read.result.text().contains("secret-work"), "{read:?}");
        assert_eq!(read.result.metadata["status"], "running");
        // Her unknown-id listing names it; Bob's stays empty.
        let listing = executor
            .execute("BashOutput", &alice, json!({ "bash_id": "shell_00000000" }))
            .await
            .expect("BashOutput answers");
        assert!(listing.result.text().contains(&id), "{listing:?}");
        let killed = executor
            .execute("KillShell", &alice, json!({ "shell_id": id }))
            .await
            .expect("KillShell answers");
        assert!(killed.result.success, "{killed:?}");
        env.shutdown().await;
    }
}
