//! The sandbox as shell-runtime hands it out: the spawn crate's
//! confinement, with its pids cgroup made under this server's own parent
//! cgroup (the cgroup bookkeeping lives here, the system calls there).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use ::spawn::ConfineError;

use crate::spec::ConfinementSpec;

/// A confinement prepared once per server and applied to every command
/// (see the spawn crate's `Confinement`, which this dereferences to).
#[derive(Debug)]
pub struct Confinement(Arc<::spawn::Confinement>);

impl Confinement {
    /// Checks what the kernel can enforce and prepares `spec`.
    pub fn prepare(spec: &ConfinementSpec) -> Result<Self, ConfineError> {
        ::spawn::Confinement::prepare(spec, cgroup_parent).map(|inner| Self(Arc::new(inner)))
    }

    /// The spawn code's confinement, shared: the spawner process knows a
    /// confinement it was sent once by this `Arc`.
    #[cfg(target_os = "linux")]
    pub(crate) fn shared(&self) -> &Arc<::spawn::Confinement> {
        &self.0
    }
}

impl std::ops::Deref for Confinement {
    type Target = ::spawn::Confinement;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

/// This server's parent cgroup under `base`, once the cgroups of servers
/// that are gone are removed.
fn cgroup_parent(base: &Path) -> io::Result<PathBuf> {
    crate::cgroup::remove_stale(base);
    crate::cgroup::claim_parent(base)
}
