//! A throwaway jail for running dangerous command lines for real, so that a
//! policy can be judged by what a line does rather than by what it says.
//!
//! Each [`Jail::spawn`] builds a fresh one:
//! - a tmpfs on a host temp dir (size capped) holds the overlay's upper and
//!   work dirs and a copy of the caller's canary layer;
//! - in a private mount namespace (`unshare -m`), an overlay whose lower
//!   layers are the canary layer over the host root: the host root is never
//!   written (an overlay does not write its lower layers), every write lands
//!   in the tmpfs. Nested host mounts (`/proc`, `/dev`, `/sys`, the tmpfs
//!   itself) are not part of it;
//! - bubblewrap on that merged tree with every namespace unshared, a user
//!   namespace included (so the root inside holds no capability over the
//!   host: no `mknod` of a disk, no mount of the host's devices), no
//!   network, a fresh `/proc`, a minimal `/dev`, `--new-session` and
//!   `--die-with-parent`;
//! - a pids and a memory cgroup of its own and a wall-clock deadline after
//!   which it is killed (by pid: bwrap's own, whose death takes the PID
//!   namespace, then whatever the cgroups still hold).
//!
//! Debian 12's bwrap (0.8.0) has no `--overlay` options, hence the mount by
//! hand. After the jail ends, the upper layer says exactly what the lines
//! changed: [`Finished::damage`] lists each file present before that was
//! deleted, replaced or modified.
//!
//! [`Jail::self_check`] proves the walls before anything else runs in them:
//! writes to `/`, `/usr`, `/etc` and `$HOME` land in the tmpfs, a host
//! canary cannot be deleted, the host's loopback is unreachable and the
//! host's processes are not in `/proc`. [`Weakness`] opens one hole on
//! purpose so that the self-check can be seen refusing.
//!
//! Needs root, `unshare`, `mount`, `bwrap`, `getfattr` and cgroups;
//! [`Jail::new`] says which is missing.

use crate::is_root;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Where the jail sees the binary it was given.
pub const JAIL_BINARY: &str = "/opt/agent-exec-jail/agent-exec";

/// Top-level names whose changes are not damage: scratch places, kernel
/// views and the jail's own mount points.
const SCRATCH: &[&str] = &[
    "tmp",
    "var/tmp",
    "proc",
    "sys",
    "dev",
    "run",
    "opt/agent-exec-jail",
];

/// A hole opened on purpose, for the self-check's own tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Weakness {
    /// The host's temp dir bound writable into the jail.
    WritableHostTemp,
    /// The host's network namespace shared.
    SharedNetwork,
    /// The host's `/proc` bound in place of a fresh one.
    HostProc,
}

/// How a jail is made; each [`Jail::spawn`] makes a fresh one from it.
#[derive(Clone, Debug)]
pub struct Jail {
    binary: PathBuf,
    layer: Option<PathBuf>,
    env: Vec<(String, String)>,
    cwd: String,
    masked: Vec<PathBuf>,
    pids_max: u32,
    memory_bytes: u64,
    tmpfs_bytes: u64,
    timeout: Duration,
    weakness: Option<Weakness>,
    fake_disks: Vec<String>,
    canary_process: bool,
}

/// What each fake disk holds at first: this pattern, then zeros (sparse)
/// up to [`FAKE_DISK_BYTES`].
const FAKE_DISK_HEAD: &[u8] = b"agent-exec jail: a fake disk, a canary\n";
/// The size of each fake disk (big enough for `mkfs.ext4`).
const FAKE_DISK_BYTES: u64 = 4 << 20;
/// How many times the pattern is repeated at the start of a fake disk.
const FAKE_DISK_REPEATS: usize = 1024;
/// The canary process's argument: a `sleep` nobody else starts.
const CANARY_SLEEP: &str = "86399.5";

static JAILS: AtomicU64 = AtomicU64::new(0);

impl Jail {
    /// A jail that shows `binary` at [`JAIL_BINARY`], or why none can be
    /// made here (not root, a program or the cgroups missing).
    ///
    /// # Errors
    /// The reason, in one sentence.
    pub fn new(binary: &Path) -> Result<Self, String> {
        if !is_root() {
            return Err("the jail needs root (mounts and cgroups)".to_owned());
        }
        for program in ["bwrap", "unshare", "mount", "getfattr", "cp"] {
            if find_program(program).is_none() {
                return Err(format!("`{program}` is not installed"));
            }
        }
        if cgroup_dirs("probe").is_none() {
            return Err("no writable pids and memory cgroups".to_owned());
        }
        Ok(Self {
            binary: binary.to_owned(),
            layer: None,
            env: vec![(
                "PATH".to_owned(),
                "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin".to_owned(),
            )],
            cwd: "/".to_owned(),
            masked: Vec::new(),
            pids_max: 256,
            memory_bytes: 512 << 20,
            tmpfs_bytes: 256 << 20,
            timeout: Duration::from_secs(30),
            weakness: None,
            fake_disks: Vec::new(),
            canary_process: false,
        })
    }

    /// A tree laid over the host root (its `home/agent` appears at
    /// `/home/agent`): the canaries, copied fresh into each jail.
    #[must_use]
    pub fn with_layer(mut self, dir: &Path) -> Self {
        self.layer = Some(dir.to_owned());
        self
    }

    /// One variable of the jail's environment (which starts with `PATH` only).
    #[must_use]
    pub fn with_env(mut self, name: &str, value: &str) -> Self {
        self.env.retain(|(have, _)| have != name);
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    /// The directory the jail's program starts in.
    #[must_use]
    pub fn with_cwd(mut self, dir: &str) -> Self {
        dir.clone_into(&mut self.cwd);
        self
    }

    /// A host directory hidden under an empty tmpfs in the jail (a checkout
    /// and its build tree are many files nobody's line is about).
    #[must_use]
    pub fn masking(mut self, dir: &Path) -> Self {
        self.masked.push(dir.to_owned());
        self
    }

    /// The wall-clock time after which the jail is killed.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Regular files of the scratch tmpfs bound at `/dev/NAME` for each
    /// name (`sda`, `mapper/root`...), so that writes meant for a disk
    /// land somewhere they can be seen: one changed is damage.
    #[must_use]
    pub fn with_fake_disks(mut self, names: &[&str]) -> Self {
        self.fake_disks = names.iter().map(|&name| name.to_owned()).collect();
        self
    }

    /// A canary process (`sleep`, detached, a child of the jail's init)
    /// started before the jail's program: one killed is damage (a kill of
    /// every process, a reboot or a shutdown reached it).
    #[must_use]
    pub fn with_canary_process(mut self) -> Self {
        self.canary_process = true;
        self
    }

    /// The same jail with one hole opened (tests of the self-check only).
    #[must_use]
    pub fn weakened(mut self, weakness: Weakness) -> Self {
        self.weakness = Some(weakness);
        self
    }

    /// Starts `argv` in a fresh jail, stdin and stdout piped, stderr
    /// collected.
    ///
    /// # Panics
    /// When the scratch tmpfs, the cgroups or the launcher cannot be made.
    #[expect(clippy::disallowed_methods, reason = "the jail's launcher is a shell")]
    pub fn spawn(&self, argv: &[&str]) -> Confined {
        let scratch = Scratch::new(self);
        let mut bwrap: Vec<String> = ["bwrap", "--bind"].map(str::to_owned).to_vec();
        bwrap.push(scratch.dir.join("merged").display().to_string());
        bwrap.push("/".to_owned());
        if self.weakness == Some(Weakness::HostProc) {
            bwrap.extend(["--bind", "/proc", "/proc"].map(str::to_owned));
        } else {
            bwrap.extend(["--proc", "/proc"].map(str::to_owned));
        }
        bwrap.extend(["--dev", "/dev"].map(str::to_owned));
        for name in &self.fake_disks {
            bwrap.push("--bind".to_owned());
            bwrap.push(scratch.dir.join("disks").join(name).display().to_string());
            bwrap.push(format!("/dev/{name}"));
        }
        for dir in &self.masked {
            bwrap.push("--tmpfs".to_owned());
            bwrap.push(dir.display().to_string());
        }
        if self.weakness == Some(Weakness::WritableHostTemp) {
            let temp = std::env::temp_dir().display().to_string();
            bwrap.extend(["--bind".to_owned(), temp.clone(), temp]);
        }
        bwrap.extend([
            "--ro-bind".to_owned(),
            self.binary.display().to_string(),
            JAIL_BINARY.to_owned(),
        ]);
        bwrap.extend(
            [
                "--unshare-all",
                "--unshare-user",
                "--uid",
                "0",
                "--gid",
                "0",
                "--cap-add",
                "ALL",
                "--die-with-parent",
                "--new-session",
                "--clearenv",
                "--hostname",
                "jail",
            ]
            .map(str::to_owned),
        );
        if self.weakness == Some(Weakness::SharedNetwork) {
            bwrap.push("--share-net".to_owned());
        }
        for (name, value) in &self.env {
            bwrap.extend(["--setenv".to_owned(), name.clone(), value.clone()]);
        }
        bwrap.extend(["--chdir".to_owned(), self.cwd.clone(), "--".to_owned()]);
        if self.canary_process {
            // Detached twice: the canary is the jail init's child, not the
            // program's, so only a kill that reaches the whole jail ends it.
            bwrap.extend(
                [
                    "bash",
                    "-c",
                    &format!(
                        "(setsid sleep {CANARY_SLEEP} </dev/null >/dev/null 2>&1 &); exec \"$@\""
                    ),
                    "bash",
                ]
                .map(str::to_owned),
            );
        }
        bwrap.extend(argv.iter().map(|&word| word.to_owned()));
        // Joins the cgroups, then mounts the overlay in a mount namespace of
        // its own (gone with its last process) and becomes bwrap.
        let launcher = r#"for procs in $JAIL_CGROUP_PROCS; do echo $$ > "$procs" || exit 125; done
exec unshare --mount --propagation private -- sh -c 'mount -t overlay overlay -o "lowerdir=$JAIL_DIR/layer:/,upperdir=$JAIL_DIR/upper,workdir=$JAIL_DIR/work" "$JAIL_DIR/merged" || exit 125; exec "$@"' sh "$@""#;
        let procs: Vec<String> = scratch
            .cgroups
            .iter()
            .map(|dir| dir.join("cgroup.procs").display().to_string())
            .collect();
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg(launcher)
            .arg("sh")
            .args(&bwrap)
            .env_clear()
            .env(
                "PATH",
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            )
            .env("JAIL_DIR", &scratch.dir)
            .env("JAIL_CGROUP_PROCS", procs.join(" "))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("the jail's launcher starts");
        let stderr = child.stderr.take().map(|mut pipe| {
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = pipe.read_to_string(&mut text);
                text
            })
        });
        Confined {
            child,
            deadline: Instant::now() + self.timeout,
            stderr,
            scratch,
        }
    }

    /// Proves the walls before any line runs in them (see the module
    /// documentation).
    ///
    /// # Errors
    /// Each wall that did not hold, in one message.
    pub fn self_check(&self) -> Result<(), String> {
        let canary_dir = tempfile_dir("jail-canary");
        let canary = canary_dir.join("canary");
        std::fs::write(&canary, "canary\n").expect("the canary is written");
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback listener");
        let port = listener.local_addr().expect("its port").port();
        let token = format!(
            "{}-{}",
            std::process::id(),
            JAILS.fetch_add(1, Ordering::Relaxed)
        );
        let script = format!(
            r#"for dir in / /usr /etc "$HOME"; do echo probe > "$dir/.jail-probe-{token}" || echo "FAIL write $dir"; done
rm -rf {canary_dir} 2>/dev/null; echo gone >> {canary} 2>/dev/null
if (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null; then echo "FAIL network: the host's 127.0.0.1:{port} answered"; fi
if [ -e /proc/{host_pid} ]; then echo "FAIL proc: the host's pid {host_pid} is in /proc"; fi
echo DONE"#,
            canary_dir = crate::single_quoted(&canary_dir.display().to_string()),
            canary = crate::single_quoted(&canary.display().to_string()),
            host_pid = std::process::id(),
        );
        let mut jail = self.spawn(&["bash", "-c", &script]);
        drop(jail.stdin());
        let mut out = String::new();
        if let Some(mut stdout) = jail.stdout() {
            let _ = stdout.read_to_string(&mut out);
        }
        let finished = jail.finish(Duration::from_secs(5));
        let mut failures: Vec<String> = out
            .lines()
            .filter_map(|line| line.strip_prefix("FAIL "))
            .map(str::to_owned)
            .collect();
        if !out.lines().any(|line| line == "DONE") {
            failures.push(format!(
                "the self-check did not finish (status {:?}; stderr {:?})",
                finished.status,
                finished.stderr.trim()
            ));
        }
        let upper = finished.upper();
        let home = self
            .env
            .iter()
            .find(|(name, _)| name == "HOME")
            .map_or("/", |(_, value)| value.as_str());
        for dir in ["/", "/usr", "/etc", home] {
            let probe = Path::new(dir).join(format!(".jail-probe-{token}"));
            if probe.exists() {
                failures.push(format!("a write to {dir} reached the host"));
                let _ = std::fs::remove_file(&probe);
            }
            let relative = probe.strip_prefix("/").unwrap_or(&probe);
            if !upper.join(relative).is_file() {
                failures.push(format!("a write to {dir} is not in the tmpfs"));
            }
        }
        if std::fs::read_to_string(&canary).ok().as_deref() != Some("canary\n") {
            failures.push(format!(
                "the host canary {} was changed or deleted",
                canary.display()
            ));
        }
        drop(finished);
        let _ = std::fs::remove_dir_all(&canary_dir);
        drop(listener);
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("; "))
        }
    }
}

/// A running jail.
#[derive(Debug)]
pub struct Confined {
    child: Child,
    deadline: Instant,
    stderr: Option<std::thread::JoinHandle<String>>,
    scratch: Scratch,
}

impl Confined {
    /// The jail's stdin (once).
    pub fn stdin(&mut self) -> Option<ChildStdin> {
        self.child.stdin.take()
    }

    /// The jail's stdout (once).
    pub fn stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    /// When the jail is killed at the latest.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether the canary process (see [`Jail::with_canary_process`]) is
    /// alive, found by its arguments among the jail's cgroup's processes.
    pub fn canary_alive(&self) -> bool {
        self.scratch.pids().iter().any(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmdline| cmdline == format!("sleep\0{CANARY_SLEEP}\0").as_bytes())
        })
    }

    /// Waits up to `grace` (never past the deadline) for the jail to end,
    /// kills it if it has not, and hands back what it left.
    pub fn finish(mut self, grace: Duration) -> Finished {
        let until = (Instant::now() + grace).min(self.deadline);
        let mut status = None;
        while status.is_none() && Instant::now() < until {
            status = self.child.try_wait().ok().flatten();
            if status.is_none() {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        let killed = status.is_none();
        let process_cap_reached = self.scratch.process_cap_reached();
        if killed {
            // bwrap's death takes the PID namespace (--die-with-parent on its
            // init); the cgroup sweep below catches anything else.
            let _ = self.child.kill();
            status = self.child.wait().ok();
        }
        self.scratch.sweep_cgroups();
        let stderr = self
            .stderr
            .take()
            .and_then(|handle| handle.join().ok())
            .unwrap_or_default();
        Finished {
            status,
            killed,
            process_cap_reached,
            stderr,
            scratch: self.scratch,
        }
    }
}

/// What an ended jail left: its status and its upper layer, for as long as
/// this lives.
#[derive(Debug)]
pub struct Finished {
    /// The launcher's exit status (`None` if it could not be read).
    pub status: Option<ExitStatus>,
    /// Whether the jail was killed at its deadline or after the grace.
    pub killed: bool,
    /// Everything the jail wrote on stderr.
    pub stderr: String,
    /// How many forks the jail's process cap refused (a fork bomb's mark).
    pub process_cap_reached: u64,
    scratch: Scratch,
}

impl Finished {
    /// The overlay's upper layer: every write the jail made.
    pub fn upper(&self) -> PathBuf {
        self.scratch.dir.join("upper")
    }

    /// Whether the launcher died of a signal (killed) rather than exiting.
    pub fn signalled(&self) -> bool {
        self.status.is_some_and(|status| status.signal().is_some())
    }

    /// Every file, directory or link that existed before the jail (in the
    /// canary layer or on the host) and was deleted, replaced, emptied or
    /// modified (content, mode or owner) inside it, outside the scratch
    /// places (`/tmp`, `/var/tmp`, `/run`, `/proc`, `/sys`, `/dev`) and
    /// the masked directories. New files are not damage.
    pub fn damage(&self) -> Vec<String> {
        let upper = self.upper();
        let layer = self.scratch.dir.join("layer");
        let opaque = opaque_dirs(&upper);
        let mut found = Vec::new();
        walk(
            &upper,
            Path::new(""),
            &layer,
            &opaque,
            &self.scratch.masked,
            &mut found,
        );
        for (name, blocks) in &self.scratch.fake_disks {
            if !fake_disk_intact(&self.scratch.dir.join("disks").join(name), *blocks) {
                found.push(format!("wrote the fake disk /dev/{name}"));
            }
        }
        if self.process_cap_reached > 0 {
            found.push(format!(
                "reached the jail's process cap ({} forks refused)",
                self.process_cap_reached
            ));
        }
        found
    }
}

/// The directories of `upper` marked opaque (their lower contents hidden).
#[expect(
    clippy::disallowed_methods,
    reason = "getfattr reads the overlay's trusted xattrs"
)]
fn opaque_dirs(upper: &Path) -> Vec<PathBuf> {
    let output = std::process::Command::new("getfattr")
        .args([
            "-R",
            "-P",
            "--absolute-names",
            "-m",
            r"^trusted\.overlay\.opaque$",
            "-d",
        ])
        .arg(upper)
        .stderr(Stdio::null())
        .output()
        .expect("getfattr runs");
    let text = String::from_utf8_lossy(&output.stdout);
    let mut dirs = Vec::new();
    let mut current = None;
    for line in text.lines() {
        if let Some(path) = line.strip_prefix("# file: ") {
            current = Some(PathBuf::from(path));
        } else if line.starts_with("trusted.overlay.opaque=\"y\"") {
            dirs.extend(current.take());
        }
    }
    dirs
}

/// The entry `relative` had before the jail: the canary layer's, else the
/// host's.
fn lower(layer: &Path, relative: &Path) -> Option<(PathBuf, std::fs::Metadata)> {
    [layer.join(relative), Path::new("/").join(relative)]
        .into_iter()
        .find_map(|path| {
            std::fs::symlink_metadata(&path)
                .ok()
                .map(|meta| (path, meta))
        })
}

fn lower_names(layer: &Path, relative: &Path) -> Vec<std::ffi::OsString> {
    let mut names = Vec::new();
    for dir in [layer.join(relative), Path::new("/").join(relative)] {
        if let Ok(entries) = std::fs::read_dir(dir) {
            names.extend(entries.flatten().map(|entry| entry.file_name()));
        }
    }
    names
}

fn walk(
    upper_root: &Path,
    relative: &Path,
    layer: &Path,
    opaque: &[PathBuf],
    masked: &[PathBuf],
    found: &mut Vec<String>,
) {
    let Ok(entries) = std::fs::read_dir(upper_root.join(relative)) else {
        return;
    };
    for entry in entries.flatten() {
        let rel = relative.join(entry.file_name());
        let shown = Path::new("/").join(&rel);
        let rel_text = rel.display().to_string();
        if SCRATCH.contains(&rel_text.as_str()) || masked.iter().any(|dir| shown.starts_with(dir)) {
            continue;
        }
        let Ok(meta) = entry.path().symlink_metadata() else {
            continue;
        };
        let Some((before_path, before)) = lower(layer, &rel) else {
            continue;
        };
        let kind = meta.file_type();
        let shown = shown.display();
        if kind.is_char_device() && meta.rdev() == 0 {
            found.push(format!("deleted {shown}"));
        } else if kind.is_dir() {
            if !before.is_dir() {
                found.push(format!("replaced {shown}"));
                continue;
            }
            if opaque.contains(&entry.path()) {
                let now: Vec<_> = std::fs::read_dir(entry.path())
                    .map(|entries| entries.flatten().map(|entry| entry.file_name()).collect())
                    .unwrap_or_default();
                if lower_names(layer, &rel)
                    .iter()
                    .any(|name| !now.contains(name))
                {
                    found.push(format!("emptied {shown}"));
                }
            }
            if owner_or_mode_differs(&meta, &before) {
                found.push(format!("changed {shown}"));
            }
            walk(upper_root, &rel, layer, opaque, masked, found);
        } else if kind.is_symlink() {
            let same = before.file_type().is_symlink()
                && std::fs::read_link(entry.path()).ok() == std::fs::read_link(&before_path).ok();
            if !same {
                found.push(format!("replaced {shown}"));
            }
        } else if kind.is_file() {
            if !before.is_file() {
                found.push(format!("replaced {shown}"));
            } else if owner_or_mode_differs(&meta, &before) {
                found.push(format!("changed {shown}"));
            } else if meta.len() != before.len()
                || std::fs::read(entry.path()).ok() != std::fs::read(&before_path).ok()
            {
                found.push(format!("modified {shown}"));
            }
        } else {
            found.push(format!("replaced {shown}"));
        }
    }
}

fn owner_or_mode_differs(now: &std::fs::Metadata, before: &std::fs::Metadata) -> bool {
    now.mode() != before.mode() || now.uid() != before.uid() || now.gid() != before.gid()
}

/// The tmpfs, its directories and the cgroups of one jail; all removed
/// when dropped.
#[derive(Debug)]
struct Scratch {
    dir: PathBuf,
    cgroups: Vec<PathBuf>,
    masked: Vec<PathBuf>,
    /// Each fake disk's name and the blocks it had when made.
    fake_disks: Vec<(String, u64)>,
}

/// A fresh fake disk at `path`.
fn make_fake_disk(path: &Path) {
    std::fs::create_dir_all(path.parent().expect("a disk has a parent")).expect("the disks dir");
    let file = std::fs::File::create(path).expect("a fake disk");
    let mut writer = std::io::BufWriter::new(&file);
    for _ in 0..FAKE_DISK_REPEATS {
        writer
            .write_all(FAKE_DISK_HEAD)
            .expect("a fake disk's pattern");
    }
    writer.flush().expect("a fake disk's pattern");
    drop(writer);
    file.set_len(FAKE_DISK_BYTES).expect("a fake disk's size");
}

/// Whether the fake disk at `path` is as made: same size, the same
/// blocks allocated (`blocks`, read when it was made: a write to its sparse
/// tail allocates some, even of zeros), and the same pattern at its start.
/// Nothing is written to check it: the tmpfs may be full.
fn fake_disk_intact(path: &Path, blocks: u64) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    let mut head = vec![0; FAKE_DISK_HEAD.len() * FAKE_DISK_REPEATS];
    let read = std::fs::File::open(path).and_then(|mut file| file.read_exact(&mut head));
    meta.len() == FAKE_DISK_BYTES
        && meta.blocks() == blocks
        && read.is_ok()
        && head
            .chunks(FAKE_DISK_HEAD.len())
            .all(|chunk| chunk == FAKE_DISK_HEAD)
}

impl Scratch {
    #[expect(
        clippy::disallowed_methods,
        reason = "mount(8) and cp(1) make the scratch tree"
    )]
    fn new(jail: &Jail) -> Self {
        let dir = tempfile_dir("jail");
        let mounted = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={},mode=0755", jail.tmpfs_bytes),
                "jail",
            ])
            .arg(&dir)
            .status()
            .is_ok_and(|status| status.success());
        assert!(mounted, "the jail's tmpfs is mounted on {}", dir.display());
        let name = dir
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut scratch = Self {
            dir,
            cgroups: Vec::new(),
            masked: jail.masked.clone(),
            fake_disks: Vec::new(),
        };
        for name in &jail.fake_disks {
            let path = scratch.dir.join("disks").join(name);
            make_fake_disk(&path);
            let blocks = std::fs::metadata(&path).expect("a fake disk").blocks();
            scratch.fake_disks.push((name.clone(), blocks));
        }
        for sub in ["upper", "work", "merged", "layer"] {
            std::fs::create_dir(scratch.dir.join(sub)).expect("a scratch directory");
        }
        if let Some(layer) = &jail.layer {
            let copied = std::process::Command::new("cp")
                .arg("-a")
                .arg(layer.join("."))
                .arg(scratch.dir.join("layer"))
                .status()
                .is_ok_and(|status| status.success());
            assert!(copied, "the canary layer is copied");
        }
        let (pids, memory) = cgroup_dirs(&name).expect("the jail's cgroups can be made");
        // Under cgroup v2 both are one directory.
        let distinct = if pids == memory {
            vec![&pids]
        } else {
            vec![&pids, &memory]
        };
        for dir in distinct {
            std::fs::create_dir(dir).expect("a jail cgroup");
            scratch.cgroups.push(dir.clone());
        }
        std::fs::write(pids.join("pids.max"), jail.pids_max.to_string()).expect("pids.max");
        let memory_limit = if memory.join("memory.max").exists() {
            memory.join("memory.max")
        } else {
            memory.join("memory.limit_in_bytes")
        };
        std::fs::write(memory_limit, jail.memory_bytes.to_string()).expect("the memory limit");
        scratch
    }

    /// The pids the jail's cgroups hold.
    fn pids(&self) -> Vec<String> {
        self.cgroups
            .iter()
            .filter_map(|dir| std::fs::read_to_string(dir.join("cgroup.procs")).ok())
            .flat_map(|text| {
                text.split_whitespace()
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// How many forks the pids cgroup refused (`max` in `pids.events`).
    fn process_cap_reached(&self) -> u64 {
        self.cgroups
            .iter()
            .filter_map(|dir| std::fs::read_to_string(dir.join("pids.events")).ok())
            .flat_map(|text| {
                text.lines()
                    .filter_map(|line| line.strip_prefix("max "))
                    .filter_map(|count| count.trim().parse::<u64>().ok())
                    .collect::<Vec<_>>()
            })
            .sum()
    }

    /// Kills whatever the cgroups still hold, by pid, until they are empty.
    #[expect(clippy::disallowed_methods, reason = "kill(1) ends what the jail left")]
    fn sweep_cgroups(&self) {
        for _ in 0..100 {
            let pids = self.pids();
            if pids.is_empty() {
                return;
            }
            let _ = std::process::Command::new("kill")
                .arg("-KILL")
                .args(&pids)
                .stderr(Stdio::null())
                .status();
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Scratch {
    #[expect(
        clippy::disallowed_methods,
        reason = "umount(8) removes the scratch tmpfs"
    )]
    fn drop(&mut self) {
        self.sweep_cgroups();
        for dir in &self.cgroups {
            let _ = std::fs::remove_dir(dir);
        }
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.dir)
            .status();
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// A fresh, empty directory under the temp dir.
fn tempfile_dir(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "agent-exec-{what}-{}-{}",
        std::process::id(),
        JAILS.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir(&dir).expect("a scratch directory");
    dir
}

/// The pids and memory cgroup directories a jail named `name` would get
/// (beside this process's own), if their parents are writable.
fn cgroup_dirs(name: &str) -> Option<(PathBuf, PathBuf)> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let root = Path::new("/sys/fs/cgroup");
    let place = |controller: &str| -> Option<PathBuf> {
        let line = own.lines().find(|line| {
            line.split(':')
                .nth(1)
                .is_some_and(|list| list.split(',').any(|one| one == controller))
        })?;
        let path = line.splitn(3, ':').nth(2)?.trim_start_matches('/');
        let parent = root.join(controller).join(path);
        writable_dir(&parent).then(|| parent.join(format!("agent-exec-{name}")))
    };
    if root.join("cgroup.controllers").exists() {
        // cgroup v2: one tree; the jail's group needs both controllers
        // enabled in its parent.
        let line = own.lines().find(|line| line.starts_with("0::"))?;
        let parent = root.join(line.trim_start_matches("0::").trim_start_matches('/'));
        let enabled = std::fs::read_to_string(parent.join("cgroup.subtree_control")).ok()?;
        let both = ["pids", "memory"]
            .iter()
            .all(|want| enabled.split_whitespace().any(|have| have == *want));
        let dir = parent.join(format!("agent-exec-{name}"));
        return (both && writable_dir(&parent)).then(|| (dir.clone(), dir));
    }
    Some((place("pids")?, place("memory")?))
}

/// A cgroup directory root may make children in (its mode may say 0555:
/// root needs no write bit there).
fn writable_dir(dir: &Path) -> bool {
    is_root() && dir.is_dir() && dir.join("cgroup.procs").exists()
}

fn find_program(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    })
}

/// Writes `message` to a jail's stdin, newline-terminated and flushed.
///
/// # Errors
/// When the jail has closed its stdin.
pub fn send_line(stdin: &mut ChildStdin, message: &str) -> std::io::Result<()> {
    stdin.write_all(message.as_bytes())?;
    stdin.write_all(b"\n")?;
    stdin.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jail() -> Option<Jail> {
        match Jail::new(Path::new("/bin/true")) {
            Ok(jail) => Some(
                jail.with_env("HOME", "/root")
                    .with_timeout(Duration::from_secs(20)),
            ),
            Err(reason) => {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "the jail is unavailable under CI: {reason}"
                );
                eprintln!("skipped: no jail here: {reason}");
                None
            }
        }
    }

    #[test]
    fn the_self_check_passes_on_a_sound_jail() {
        let Some(jail) = jail() else { return };
        jail.self_check()
            .expect("a sound jail passes its self-check");
    }

    #[test]
    fn the_self_check_refuses_a_jail_with_a_writable_host_bind() {
        let Some(jail) = jail() else { return };
        let refusal = jail
            .weakened(Weakness::WritableHostTemp)
            .self_check()
            .expect_err("a writable host bind is refused");
        assert!(refusal.contains("canary"), "{refusal}");
    }

    #[test]
    fn the_self_check_refuses_a_jail_on_the_hosts_network() {
        let Some(jail) = jail() else { return };
        let refusal = jail
            .weakened(Weakness::SharedNetwork)
            .self_check()
            .expect_err("a shared network is refused");
        assert!(refusal.contains("network"), "{refusal}");
    }

    #[test]
    fn the_self_check_refuses_a_jail_that_sees_the_hosts_proc() {
        let Some(jail) = jail() else { return };
        let refusal = jail
            .weakened(Weakness::HostProc)
            .self_check()
            .expect_err("the host's /proc is refused");
        assert!(refusal.contains("proc"), "{refusal}");
    }

    #[test]
    fn damage_names_deletions_and_changes_but_not_new_files() {
        let Some(jail) = jail() else { return };
        let layer = tempfile_dir("jail-layer-test");
        std::fs::create_dir_all(layer.join("home/agent/keep")).unwrap();
        for name in ["a", "b", "c", "d"] {
            std::fs::write(layer.join("home/agent/keep").join(name), name).unwrap();
        }
        std::fs::create_dir_all(layer.join("home/agent/gone")).unwrap();
        std::fs::write(layer.join("home/agent/gone/x"), "x").unwrap();
        let jail = jail.with_layer(&layer).with_cwd("/home/agent/keep");
        let script = "rm a; echo changed > b; chmod 600 c; cat d >/dev/null; echo new > e; \
                      rm -r ../gone; mkdir ../gone; echo x > /etc/jail-new-file; \
                      echo scratch > /tmp/scratch-file";
        let mut running = jail.spawn(&["bash", "-c", script]);
        drop(running.stdin());
        let finished = running.finish(Duration::from_secs(10));
        assert!(!finished.killed, "{}", finished.stderr);
        let mut damage = finished.damage();
        damage.sort();
        assert_eq!(
            damage,
            [
                "changed /home/agent/keep/c",
                "deleted /home/agent/keep/a",
                "emptied /home/agent/gone",
                "modified /home/agent/keep/b",
            ]
        );
        drop(finished);
        std::fs::remove_dir_all(layer).unwrap();
    }

    #[test]
    fn a_write_to_a_fake_disk_is_damage_even_of_zeros_past_its_pattern_and_a_read_is_not() {
        let Some(jail) = jail() else { return };
        let jail = jail.with_fake_disks(&["sda", "sdb", "mapper/root"]);
        let script = "dd if=/dev/zero of=/dev/sda bs=4k count=1 conv=notrunc status=none; \
                      dd if=/dev/zero of=/dev/sdb bs=4k count=1 seek=500 conv=notrunc status=none; \
                      cat /dev/mapper/root > /dev/null";
        let mut running = jail.spawn(&["bash", "-c", script]);
        drop(running.stdin());
        let finished = running.finish(Duration::from_secs(10));
        assert_eq!(
            finished.damage(),
            [
                "wrote the fake disk /dev/sda",
                "wrote the fake disk /dev/sdb"
            ],
            "{}",
            finished.stderr
        );
    }

    /// Polls `check` for up to 10 s.
    fn eventually(check: impl Fn() -> bool) -> bool {
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if check() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    #[test]
    fn the_canary_process_lives_until_a_kill_of_every_process_reaches_it() {
        let Some(jail) = jail() else { return };
        let jail = jail.with_canary_process();
        let quiet = jail.spawn(&["sleep", "5"]);
        assert!(eventually(|| quiet.canary_alive()), "the canary starts");
        let finished = quiet.finish(Duration::ZERO);
        assert!(finished.killed);
        let storm = jail.spawn(&[
            "bash",
            "-c",
            "until pgrep -x sleep >/dev/null; do sleep 0.05; done; sleep 1; kill -9 -1; sleep 5",
        ]);
        assert!(eventually(|| storm.canary_alive()), "the canary starts");
        assert!(
            eventually(|| !storm.canary_alive()),
            "the canary was killed"
        );
        drop(storm.finish(Duration::ZERO));
    }

    #[test]
    fn a_fork_storm_reaches_the_process_cap_and_that_is_damage() {
        let Some(jail) = jail() else { return };
        let mut running = jail.spawn(&[
            "bash",
            "-c",
            "for i in $(seq 300); do sleep 5 & done 2>/dev/null; true",
        ]);
        drop(running.stdin());
        let finished = running.finish(Duration::from_secs(15));
        assert!(finished.process_cap_reached > 0, "{finished:?}");
        assert!(
            finished
                .damage()
                .iter()
                .any(|line| line.starts_with("reached the jail's process cap")),
            "{:?}",
            finished.damage()
        );
        let mut calm = jail.spawn(&[
            "bash",
            "-c",
            "for i in $(seq 20); do sleep 0.1 & done; wait",
        ]);
        drop(calm.stdin());
        assert!(calm.finish(Duration::from_secs(15)).damage().is_empty());
    }

    #[test]
    fn a_jail_past_its_deadline_is_killed_with_everything_in_it() {
        let Some(jail) = jail() else { return };
        let jail = jail.with_timeout(Duration::from_millis(500));
        let started = Instant::now();
        let running = jail.spawn(&["bash", "-c", "sleep 60 & sleep 60 & wait"]);
        let cgroups = running.scratch.cgroups.clone();
        let finished = running.finish(Duration::from_secs(60));
        assert!(finished.killed);
        assert!(started.elapsed() < Duration::from_secs(10));
        for dir in &cgroups {
            let left = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
            assert_eq!(left.trim(), "", "processes left in {}", dir.display());
        }
    }
}
