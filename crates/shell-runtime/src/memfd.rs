//! Files no path names: what a server hands a command to write back to,
//! when a path (one the command could replace or point elsewhere) will not do.

use std::io;

/// A new, empty file in memory that no path names (a memfd, close-on-exec
/// here: only a [`SpawnSpec::inherit`](crate::SpawnSpec::inherit) entry
/// hands it on). Its pages are charged to whoever writes them. Linux only:
/// elsewhere an `Unsupported` error.
pub fn anonymous_file(name: &str) -> io::Result<std::fs::File> {
    #[cfg(target_os = "linux")]
    {
        use nix::sys::memfd::{MFdFlags, memfd_create};
        memfd_create(name, MFdFlags::MFD_CLOEXEC)
            .map(std::fs::File::from)
            .map_err(io::Error::from)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = name;
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "files without a path need Linux (memfd)",
        ))
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::anonymous_file;
    use std::io::{Read, Seek, Write};

    #[test]
    fn an_anonymous_file_reads_back_what_was_written_and_has_no_path() {
        let mut file = anonymous_file("test").expect("memfd");
        file.write_all(b"hello").expect("write");
        file.rewind().expect("rewind");
        let mut text = String::new();
        file.read_to_string(&mut text).expect("read");
        assert_eq!(text, "hello");
        let link = std::fs::read_link(format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&file)
        ))
        .expect("link");
        assert!(
            link.to_string_lossy().starts_with("/memfd:test"),
            "{link:?}"
        );
    }
}
