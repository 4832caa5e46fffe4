//! Blanking this process's own command-line arguments. The sandbox's init
//! runs in the server's memory (decision 0013), so `/proc/1/cmdline` inside
//! a command's PID namespace is the server's argument area: the server's
//! arguments (`run`'s command among them) would show there, and `pgrep -f`
//! or `pkill -f` inside would find PID 1. `unsafe` lives only in the spawn
//! code; this is the one write to memory the kernel, not Rust, owns.

#![allow(
    unsafe_code,
    reason = "writes the argument area the kernel set up at execve, which no Rust value owns"
)]

use std::io;

/// Overwrites with NUL bytes every argument after `argv[0]` in this
/// process's argument area, so that `/proc/PID/cmdline` (and with it `ps`,
/// `pgrep -f`, and `/proc/1/cmdline` of a sandbox's init) shows the
/// program name only. `std::env::args` reads that same memory on each call:
/// call this after the last of them (every argument afterwards reads as
/// empty). Fails, changing nothing, when `/proc` does not describe the area.
pub fn hide_arguments() -> io::Result<()> {
    let unreadable = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // proc(5) fields 48 and 49; the name (field 2) may hold spaces, so
    // count from the `)` that ends it, after which field 3 comes.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let field = |number: usize| {
        fields
            .get(number - 3)
            .and_then(|text| text.parse::<usize>().ok())
    };
    let (Some(start), Some(end)) = (field(48), field(49)) else {
        return Err(unreadable("no argument area in /proc/self/stat"));
    };
    let cmdline = std::fs::read("/proc/self/cmdline")?;
    // `argv[0]` and its NUL stay.
    let kept = cmdline
        .iter()
        .position(|byte| *byte == 0)
        .map_or(0, |at| at + 1);
    let Some(length) = end.checked_sub(start) else {
        return Err(unreadable("the argument area ends before it starts"));
    };
    // The kernel serves the area as it stands unless its last byte was
    // overwritten (a changed title), so an unchanged area reads whole.
    if kept == 0 || cmdline.len() != length || kept > length {
        return Err(unreadable("the argument area was changed already"));
    }
    // SAFETY: [start, end) is this process's argument area, which the
    // kernel placed at execve on the main thread's stack and keeps mapped
    // and writable for the life of the process; /proc/self/cmdline just
    // read `length` bytes of it, so the range is what the kernel describes.
    // No Rust reference points into it (std keeps raw argv pointers and
    // copies the strings out when asked), and `kept > 0` leaves `argv[0]`
    // and its NUL in place; the bytes written are NULs, so every argv
    // pointer still points to a terminated (empty) string.
    unsafe {
        std::ptr::write_bytes(
            std::ptr::with_exposed_provenance_mut::<u8>(start + kept),
            0,
            length - kept,
        );
    }
    Ok(())
}
