//! Errors of the runtime: typed, never a panic.

use std::io;
use std::path::{Path, PathBuf};

/// Why a process could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The shell program does not exist or is not executable.
    #[error("cannot start `{program}`")]
    ProgramNotFound {
        /// The program as given.
        program: PathBuf,
        /// What the kernel said.
        #[source]
        source: io::Error,
    },
    /// The working directory is missing or not a directory.
    #[error("working directory `{path}` cannot be used")]
    BadWorkingDir {
        /// The directory as given.
        path: PathBuf,
        /// Why (`NotADirectory` for a file).
        #[source]
        source: io::Error,
    },
    /// Out of file descriptors, processes or memory (EMFILE, ENFILE, EAGAIN, ENOMEM).
    #[error("out of resources while starting a process: {0}")]
    ResourceExhausted(io::Error),
    /// Anything else the kernel refused.
    #[error("cannot start a process: {0}")]
    Io(io::Error),
}

impl SpawnError {
    pub(crate) fn from_io(error: io::Error, program: &Path) -> Self {
        match error.raw_os_error() {
            Some(code)
                if [libc_codes::ENOENT, libc_codes::EACCES, libc_codes::ENOEXEC]
                    .contains(&code) =>
            {
                Self::ProgramNotFound {
                    program: program.to_path_buf(),
                    source: error,
                }
            }
            Some(code)
                if [
                    libc_codes::EMFILE,
                    libc_codes::ENFILE,
                    libc_codes::EAGAIN,
                    libc_codes::ENOMEM,
                ]
                .contains(&code) =>
            {
                Self::ResourceExhausted(error)
            }
            _ => Self::Io(error),
        }
    }
}

mod libc_codes {
    use nix::errno::Errno;
    pub(super) const ENOENT: i32 = Errno::ENOENT as i32;
    pub(super) const EACCES: i32 = Errno::EACCES as i32;
    pub(super) const ENOEXEC: i32 = Errno::ENOEXEC as i32;
    pub(super) const EMFILE: i32 = Errno::EMFILE as i32;
    pub(super) const ENFILE: i32 = Errno::ENFILE as i32;
    pub(super) const EAGAIN: i32 = Errno::EAGAIN as i32;
    pub(super) const ENOMEM: i32 = Errno::ENOMEM as i32;
}

/// Why a [`ShellManager`](crate::ShellManager) call failed.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// No shell has this id (it never existed, or was evicted).
    #[error("shell `{0}` not found")]
    NotFound(String),
    /// Every tracked shell is still running.
    #[error(
        "too many running shells ({0}): wait for one to finish or kill one before starting another"
    )]
    TooManyShells(usize),
    /// A background shell would leave too few descriptors for foreground
    /// calls.
    #[error(
        "too many open files for another background shell: {open} of the limit of {limit} are open, and {reserve} are kept for foreground calls; kill a background shell (KillShell) or raise the open-file limit (ulimit -n) before the server starts"
    )]
    OutOfDescriptors {
        /// Descriptors open in the server.
        open: u64,
        /// The open-file (soft) limit.
        limit: u64,
        /// Descriptors kept free for foreground calls.
        reserve: u64,
    },
    /// The process could not be started.
    #[error(transparent)]
    Spawn(#[from] SpawnError),
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    /// Each message once: a printer that walks the chain (`{:#}` in anyhow,
    /// the tools' answers) must not show the kernel's words twice.
    #[test]
    fn a_missing_program_names_it_and_leaves_the_cause_to_source() {
        let error = SpawnError::from_io(io::Error::from_raw_os_error(2), Path::new("bash"));
        let cause = error.source().expect("the kernel's error is the source");
        assert_eq!(error.to_string(), "cannot start `bash`");
        assert!(!error.to_string().contains(&cause.to_string()));
    }

    /// The kernel's error stays an `io::Error`: its kind can be asked.
    #[test]
    fn a_bad_working_directory_carries_the_kernels_error() {
        let error = SpawnError::BadWorkingDir {
            path: PathBuf::from("/nowhere"),
            source: io::Error::from_raw_os_error(2),
        };
        let cause = error
            .source()
            .and_then(|source| source.downcast_ref::<io::Error>())
            .expect("the kernel's error is the source");
        assert_eq!(cause.kind(), io::ErrorKind::NotFound);
        assert_eq!(
            error.to_string(),
            "working directory `/nowhere` cannot be used"
        );
    }
}
