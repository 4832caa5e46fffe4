//! Background shells belong to the principal that started them: the tools
//! find a shell by id only for its owner, and list only the caller's. To
//! anyone else a shell answers exactly as an id nobody knows (`not
//! found`), so a handle reveals nothing about another principal's work.
//! A stdio server has one principal, so there nothing changes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use shell_runtime::{ManagerError, ReservedId, ShellId, ShellManager, ShellProcess};
use tool_core::Principal;

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

    /// [`ShellManager::reserve_id`](ShellManager::reserve_id),
    /// the id recorded as `principal`'s.
    pub(crate) fn reserve<'m>(
        &self,
        manager: &'m ShellManager,
        principal: &Principal,
    ) -> ReservedId<'m> {
        let mut owners = self.lock();
        forget_gone(manager, &mut owners);
        let reserved = manager.reserve_id();
        owners.insert(reserved.id().to_owned(), principal.clone());
        reserved
    }

    /// [`ShellManager::adopt`](ShellManager::adopt), the new
    /// id recorded as `principal`'s.
    pub(crate) fn adopt(
        &self,
        manager: &ShellManager,
        shell: &Arc<ShellProcess>,
        principal: &Principal,
    ) -> Result<ShellId, ManagerError> {
        let mut owners = self.lock();
        forget_gone(manager, &mut owners);
        let id = manager.adopt(shell)?;
        owners.insert(id.clone(), principal.clone());
        Ok(id)
    }

    /// The shell `id`, if `principal` started it.
    pub(crate) fn shell(
        &self,
        manager: &ShellManager,
        id: &str,
        principal: &Principal,
    ) -> Option<Arc<ShellProcess>> {
        let owners = self.lock();
        if owners.get(id) != Some(principal) {
            return None;
        }
        manager.get(id)
    }

    /// The tracked shells `principal` started, oldest first.
    pub(crate) fn shells_of(
        &self,
        manager: &ShellManager,
        principal: &Principal,
    ) -> Vec<(ShellId, Arc<ShellProcess>)> {
        let owners = self.lock();
        manager
            .list()
            .into_iter()
            .filter(|(id, _)| owners.get(id) == Some(principal))
            .collect()
    }
}

/// Keeps the map no larger than the shells the manager still knows (it
/// forgets finished ones past its limit), checked only once the map
/// outgrows that limit.
fn forget_gone(manager: &ShellManager, owners: &mut HashMap<ShellId, Principal>) {
    if owners.len() >= shell_runtime::MAX_TRACKED_SHELLS {
        owners.retain(|id, _| manager.is_known(id));
    }
}
