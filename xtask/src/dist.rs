//! Release artefacts (docs/decisions/0026-release-artefacts.md): static
//! musl binaries, their SBOMs, the npm packages and the wheels, with their
//! checksums, into `target/dist/` (`cargo xtask dist`); the install test of
//! each from those files alone (`cargo xtask dist-test`); the crates.io
//! metadata check (`cargo xtask publish-check`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use cargo_metadata::semver::VersionReq;
use cargo_metadata::{DependencyKind, Metadata, MetadataCommand, Package, PackageId};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

/// One platform the release covers.
pub(crate) struct Platform {
    /// The Rust target triple.
    triple: &'static str,
    /// npm's `os`/`cpu` pair, also the platform package's suffix.
    npm: (&'static str, &'static str),
    /// The wheel's compressed platform tag: the binary is static, so it
    /// runs on glibc (manylinux) and musl (musllinux) systems alike.
    wheel: &'static str,
    /// How to run it on this (`x86_64`) machine: directly, or under qemu.
    runner: &'static [&'static str],
}

const PLATFORMS: [Platform; 2] = [
    Platform {
        triple: "x86_64-unknown-linux-musl",
        npm: ("linux", "x64"),
        wheel: "manylinux_2_17_x86_64.manylinux2014_x86_64.musllinux_1_1_x86_64",
        runner: &[],
    },
    Platform {
        triple: "aarch64-unknown-linux-musl",
        npm: ("linux", "arm64"),
        wheel: "manylinux_2_17_aarch64.manylinux2014_aarch64.musllinux_1_1_aarch64",
        runner: &["qemu-aarch64"],
    },
];

/// The npm scope of the per-platform packages.
const NPM_SCOPE: &str = "@agent-exec";

impl Platform {
    fn npm_package(&self) -> String {
        format!("{NPM_SCOPE}/{}-{}", self.npm.0, self.npm.1)
    }

    fn binary_name(&self) -> String {
        format!("agent-exec-{}", self.triple)
    }

    /// Whether this machine runs the binary natively.
    fn is_host(&self) -> bool {
        self.runner.is_empty()
    }
}

/// The workspace's metadata, dependencies resolved.
fn metadata(root: &Path) -> anyhow::Result<Metadata> {
    MetadataCommand::new()
        .manifest_path(root.join("Cargo.toml"))
        .exec()
        .context("cargo metadata")
}

/// The platforms `--only TRIPLE` leaves (all of them without it).
pub(crate) fn platforms(only: Option<&str>) -> anyhow::Result<Vec<&'static Platform>> {
    let chosen: Vec<&Platform> = PLATFORMS
        .iter()
        .filter(|platform| only.is_none_or(|triple| platform.triple == triple))
        .collect();
    ensure!(
        !chosen.is_empty(),
        "no release platform {only:?}; there are: {}",
        PLATFORMS.map(|platform| platform.triple).join(", ")
    );
    Ok(chosen)
}

/// `cargo xtask dist [--only TRIPLE]`: builds and assembles the artefacts
/// (of every platform, or of one) into `target/dist/`.
pub(crate) fn dist(root: &Path, platforms: &[&Platform]) -> anyhow::Result<()> {
    let metadata = metadata(root)?;
    let version = agent_exec(&metadata)?.version.to_string();
    let out = root.join("target/dist");
    if out.exists() {
        std::fs::remove_dir_all(&out).with_context(|| format!("removing {}", out.display()))?;
    }
    std::fs::create_dir_all(&out)?;
    let work = root.join("target/dist-work");
    if work.exists() {
        std::fs::remove_dir_all(&work)?;
    }
    for platform in platforms {
        let started = Instant::now();
        let built = build(root, platform)?;
        let binary = out.join(platform.binary_name());
        std::fs::copy(&built, &binary).with_context(|| format!("copying {}", built.display()))?;
        println!(
            "dist: {} built in {:.0} s, {} bytes",
            platform.triple,
            started.elapsed().as_secs_f64(),
            std::fs::metadata(&binary)?.len()
        );
        let sbom = sbom(root, platform, &version)?;
        std::fs::write(
            out.join(format!("{}.cdx.json", platform.binary_name())),
            serde_json::to_string_pretty(&sbom)? + "\n",
        )?;
        npm_platform_package(root, &work, &out, platform, &binary, &version)?;
        wheel(root, &out, platform, &binary, &version)?;
    }
    npm_launcher_package(root, &work, &out, &version)?;
    let sums = checksums(&out)?;
    std::fs::write(out.join("SHA256SUMS"), &sums)?;
    print!("{sums}");
    println!("dist: artefacts in {}", out.display());
    Ok(())
}

/// The `agent-exec` package of the workspace.
fn agent_exec(metadata: &Metadata) -> anyhow::Result<&Package> {
    metadata
        .workspace_packages()
        .into_iter()
        .find(|package| package.name.as_str() == "agent-exec")
        .context("no agent-exec package in the workspace")
}

/// The tools the CI installs into `target/dist-venv` (cargo-zigbuild and
/// zig, docs/decisions/0026) come first on `PATH` when that venv exists.
fn tool_path(root: &Path) -> std::ffi::OsString {
    let venv = root.join("target/dist-venv/bin");
    let mut paths = Vec::new();
    if venv.is_dir() {
        paths.push(venv);
    }
    if let Some(path) = std::env::var_os("PATH") {
        paths.extend(std::env::split_paths(&path));
    }
    std::env::join_paths(paths).unwrap_or_default()
}

/// The flags that keep the build machine out of the binary: the checkout's
/// and cargo's home paths are mapped to fixed ones, so two checkouts of
/// one commit build the same bytes.
fn rustflags(root: &Path) -> String {
    let cargo_home = std::env::var_os("CARGO_HOME").map_or_else(
        || std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")),
        |home| Some(PathBuf::from(home)),
    );
    let mut flags = format!("--remap-path-prefix={}=/agent-exec", root.display());
    if let Some(cargo_home) = cargo_home {
        let _ = write!(
            flags,
            " --remap-path-prefix={}=/cargo",
            cargo_home.display()
        );
    }
    flags
}

/// Builds the static binary for one platform with cargo-zigbuild (zig as
/// the linker and as the C compiler of the dependencies that need one).
#[allow(
    clippy::disallowed_methods,
    reason = "xtask drives cargo, as a developer would"
)]
fn build(root: &Path, platform: &Platform) -> anyhow::Result<PathBuf> {
    let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .current_dir(root)
        .env("PATH", tool_path(root))
        .env("RUSTFLAGS", rustflags(root))
        .args([
            "zigbuild",
            "--locked",
            "--profile",
            "dist",
            "-p",
            "agent-exec",
        ])
        .args(["--bin", "agent-exec", "--target", platform.triple])
        .status()
        .context("running cargo zigbuild (is cargo-zigbuild installed? .ci/run installs it)")?;
    ensure!(
        status.success(),
        "cargo zigbuild for {} failed",
        platform.triple
    );
    Ok(root
        .join("target")
        .join(platform.triple)
        .join("dist/agent-exec"))
}

/// A `CycloneDX` 1.5 SBOM of what the binary for `platform` is built from:
/// the packages reached from agent-exec by normal dependencies on that
/// target (build scripts and proc-macros run at build time only and are
/// left out). No timestamp or serial number, so it is reproducible too.
fn sbom(root: &Path, platform: &Platform, version: &str) -> anyhow::Result<Value> {
    let metadata = MetadataCommand::new()
        .manifest_path(root.join("Cargo.toml"))
        .other_options(vec![
            "--filter-platform".to_owned(),
            platform.triple.to_owned(),
        ])
        .exec()
        .context("cargo metadata --filter-platform")?;
    let resolve = metadata
        .resolve
        .as_ref()
        .context("cargo metadata without a resolve graph")?;
    let packages: BTreeMap<&PackageId, &Package> = metadata
        .packages
        .iter()
        .map(|package| (&package.id, package))
        .collect();
    let nodes: BTreeMap<&PackageId, _> =
        resolve.nodes.iter().map(|node| (&node.id, node)).collect();
    let root_id = &agent_exec(&metadata)?.id;
    let in_binary = |id: &PackageId| {
        packages.get(id).is_some_and(|package| {
            !package
                .targets
                .iter()
                .all(cargo_metadata::Target::is_proc_macro)
        })
    };
    let mut reached: BTreeSet<&PackageId> = BTreeSet::new();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut pending = vec![root_id];
    while let Some(id) = pending.pop() {
        if !reached.insert(id) {
            continue;
        }
        let node = nodes
            .get(id)
            .context("a package outside the resolve graph")?;
        let from = purl(packages[id]);
        let targets = edges.entry(from).or_default();
        for dependency in &node.deps {
            let normal = dependency
                .dep_kinds
                .iter()
                .any(|kind| kind.kind == DependencyKind::Normal);
            if normal && in_binary(&dependency.pkg) {
                targets.insert(purl(packages[&dependency.pkg]));
                pending.push(&dependency.pkg);
            }
        }
    }
    let mut components: Vec<Value> = reached
        .iter()
        .filter(|id| **id != root_id)
        .map(|id| component(packages[*id], "library"))
        .collect();
    components.sort_by_key(|component| component["bom-ref"].as_str().map(str::to_owned));
    let dependencies: Vec<Value> = edges
        .into_iter()
        .map(|(from, to)| json!({ "ref": from, "dependsOn": to }))
        .collect();
    let mut main = component(agent_exec(&metadata)?, "application");
    main["properties"] = json!([{ "name": "target", "value": platform.triple }]);
    Ok(json!({
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "version": 1,
        "metadata": {
            "tools": { "components": [{ "type": "application", "name": "cargo xtask dist", "version": version }] },
            "component": main,
        },
        "components": components,
        "dependencies": dependencies,
    }))
}

fn purl(package: &Package) -> String {
    format!("pkg:cargo/{}@{}", package.name.as_str(), package.version)
}

fn component(package: &Package, kind: &str) -> Value {
    let mut component = json!({
        "type": kind,
        "bom-ref": purl(package),
        "name": package.name.as_str(),
        "version": package.version.to_string(),
        "purl": purl(package),
    });
    if let Some(license) = &package.license {
        component["licenses"] = json!([{ "expression": license }]);
    }
    if let Some(description) = &package.description {
        component["description"] = json!(description);
    }
    component
}

/// The per-platform npm package (the binary and a package.json that names
/// its os and cpu), packed into `out`.
fn npm_platform_package(
    root: &Path,
    work: &Path,
    out: &Path,
    platform: &Platform,
    binary: &Path,
    version: &str,
) -> anyhow::Result<()> {
    let (os, cpu) = platform.npm;
    let dir = work.join(format!("npm-{os}-{cpu}"));
    std::fs::create_dir_all(dir.join("bin"))?;
    let launcher = launcher_manifest(root)?;
    let manifest = json!({
        "name": platform.npm_package(),
        "version": version,
        "description": format!("The agent-exec binary for {os} {cpu} (installed by the agent-exec package)."),
        "license": launcher["license"],
        "repository": launcher["repository"],
        "os": [os],
        "cpu": [cpu],
        "files": ["bin/agent-exec"],
    });
    std::fs::write(
        dir.join("package.json"),
        serde_json::to_string_pretty(&manifest)? + "\n",
    )?;
    std::fs::copy(binary, dir.join("bin/agent-exec"))?;
    set_executable(&dir.join("bin/agent-exec"))?;
    npm_pack(&dir, out)
}

/// packaging/npm/agent-exec/package.json as JSON.
fn launcher_manifest(root: &Path) -> anyhow::Result<Value> {
    let path = root.join("packaging/npm/agent-exec/package.json");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    Ok(serde_json::from_str(&text)?)
}

/// The launcher package, at the workspace's version and depending on each
/// platform package at that version, packed into `out`.
fn npm_launcher_package(root: &Path, work: &Path, out: &Path, version: &str) -> anyhow::Result<()> {
    let dir = work.join("npm-agent-exec");
    std::fs::create_dir_all(dir.join("bin"))?;
    let mut manifest = launcher_manifest(root)?;
    manifest["version"] = json!(version);
    let optional: serde_json::Map<String, Value> = PLATFORMS
        .iter()
        .map(|platform| (platform.npm_package(), json!(version)))
        .collect();
    ensure!(
        manifest["optionalDependencies"].as_object() == Some(&optional),
        "packaging/npm/agent-exec/package.json's optionalDependencies must name one package per platform: {optional:?}"
    );
    std::fs::write(
        dir.join("package.json"),
        serde_json::to_string_pretty(&manifest)? + "\n",
    )?;
    let launcher = dir.join("bin/agent-exec.js");
    std::fs::copy(
        root.join("packaging/npm/agent-exec/bin/agent-exec.js"),
        &launcher,
    )?;
    set_executable(&launcher)?;
    std::fs::copy(root.join("README.md"), dir.join("README.md"))?;
    npm_pack(&dir, out)
}

fn set_executable(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}

#[allow(
    clippy::disallowed_methods,
    reason = "xtask drives npm, as a developer would"
)]
fn npm_pack(dir: &Path, out: &Path) -> anyhow::Result<()> {
    let status = Command::new("npm")
        .current_dir(dir)
        .args(["pack", "--silent", "--pack-destination"])
        .arg(out)
        .stdout(Stdio::null())
        .status()
        .context("running npm pack")?;
    ensure!(status.success(), "npm pack in {} failed", dir.display());
    Ok(())
}

/// The platform's wheel, assembled from the built binary by
/// `packaging/pypi/build_wheel.py` (maturin would build the binary again).
#[allow(
    clippy::disallowed_methods,
    reason = "xtask drives python, as a developer would"
)]
fn wheel(
    root: &Path,
    out: &Path,
    platform: &Platform,
    binary: &Path,
    version: &str,
) -> anyhow::Result<()> {
    let status = Command::new("python3")
        .arg(root.join("packaging/pypi/build_wheel.py"))
        .arg(binary)
        .args([version, platform.wheel])
        .arg(root.join("README.md"))
        .arg(out)
        .stdout(Stdio::null())
        .status()
        .context("running python3 packaging/pypi/build_wheel.py")?;
    ensure!(
        status.success(),
        "assembling the {} wheel failed",
        platform.triple
    );
    Ok(())
}

/// `sha256sum`'s format over every file in `dir`, sorted by name.
fn checksums(dir: &Path) -> anyhow::Result<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .map(|entry| Ok(entry?.file_name().to_string_lossy().into_owned()))
        .collect::<anyhow::Result<_>>()?;
    names.sort();
    let mut sums = String::new();
    for name in names.iter().filter(|name| *name != "SHA256SUMS") {
        let digest = Sha256::digest(std::fs::read(dir.join(name))?);
        let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
        let _ = writeln!(sums, "{hex}  {name}");
    }
    Ok(sums)
}

/// `cargo xtask dist-test [--only TRIPLE]`: the artefacts in `target/dist/` match their
/// checksums, each binary answers `--version` and an MCP `initialize` (the
/// aarch64 one under `qemu-aarch64`), and the npm packages and this
/// machine's wheel install from those files alone and run the same way;
/// the Python SDK interop test runs against the wheel's entry point.
pub(crate) fn dist_test(root: &Path, platforms: &[&Platform]) -> anyhow::Result<()> {
    let out = root.join("target/dist");
    let version = agent_exec(&metadata(root)?)?.version.to_string();
    let recorded = std::fs::read_to_string(out.join("SHA256SUMS"))
        .context("no target/dist/SHA256SUMS: run `cargo xtask dist` first")?;
    ensure!(
        recorded == checksums(&out)?,
        "target/dist/ does not match its SHA256SUMS"
    );
    let scratch = root.join("target/dist-test");
    if scratch.exists() {
        std::fs::remove_dir_all(&scratch)?;
    }
    std::fs::create_dir_all(&scratch)?;
    for platform in platforms {
        let mut program: Vec<PathBuf> = platform.runner.iter().map(PathBuf::from).collect();
        program.push(out.join(platform.binary_name()));
        smoke(
            &format!("binary {}", platform.triple),
            &program,
            &scratch,
            &version,
        )?;
    }
    let host = platforms
        .iter()
        .copied()
        .find(|platform| platform.is_host())
        .context("no platform runs natively here")?;
    npm_install_test(&out, &scratch, host, &version)?;
    wheel_install_test(root, &out, &scratch, host, &version)?;
    println!("dist-test: every artefact installs and runs");
    Ok(())
}

/// `--version` names the release and an MCP `initialize` is answered.
fn smoke(label: &str, program: &[PathBuf], cwd: &Path, version: &str) -> anyhow::Result<()> {
    let started = Instant::now();
    let (stdout, _) = run_bounded(program, &["--version"], cwd, None)?;
    let expected = format!("agent-exec {version}");
    ensure!(
        stdout.trim() == expected,
        "{label}: --version printed {stdout:?}, not {expected:?}"
    );
    let (answer, _) = run_bounded(program, &["mcp"], cwd, Some(&initialize_request()))?;
    let answer: Value = serde_json::from_str(answer.lines().next().unwrap_or(""))
        .with_context(|| format!("{label}: the answer to initialize is not JSON: {answer:?}"))?;
    ensure!(
        answer["result"]["serverInfo"]["name"] == "agent-exec",
        "{label}: initialize answered {answer}"
    );
    println!(
        "dist-test: {label}: --version and initialize in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn initialize_request() -> String {
    json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": { "name": "xtask-dist-test", "version": "0" },
        },
    })
    .to_string()
        + "\n"
}

/// How long a start under qemu or through npx may take.
const RUN_LIMIT: Duration = Duration::from_secs(120);

/// Runs `program args` in its own process group with `input` on stdin (then
/// closed), and returns the first line of stdout once there is one (or all
/// of it when `input` is `None`) and whether it ended by itself. Closing
/// stdin ends the MCP server; the group is killed after `RUN_LIMIT`, and
/// nothing of it may be left either way.
#[allow(
    clippy::disallowed_methods,
    reason = "xtask starts the artefacts it tests, as a user would"
)]
fn run_bounded(
    program: &[PathBuf],
    args: &[&str],
    cwd: &Path,
    input: Option<&str>,
) -> anyhow::Result<(String, bool)> {
    use std::os::unix::process::CommandExt as _;
    let (first, rest) = program.split_first().context("an empty command")?;
    let mut child = Command::new(first)
        .args(rest)
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .with_context(|| format!("starting {}", first.display()))?;
    let group = child.id();
    let mut stdin = child.stdin.take();
    if let (Some(stdin), Some(input)) = (stdin.as_mut(), input) {
        stdin.write_all(input.as_bytes())?;
    }
    let stdout = child.stdout.take().context("a piped stdout")?;
    let whole = input.is_none();
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut text = String::new();
        let read = if whole {
            std::io::Read::read_to_string(&mut reader, &mut text)
        } else {
            reader.read_line(&mut text)
        };
        let _ = sender.send(read.map(|_| text));
    });
    let output = receiver.recv_timeout(RUN_LIMIT);
    drop(stdin);
    let deadline = Instant::now() + RUN_LIMIT;
    let mut ended = false;
    while Instant::now() < deadline {
        if child.try_wait()?.is_some() {
            ended = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if !ended {
        kill_group(group);
        child.wait()?;
    }
    let left = wait_group_gone(group);
    ensure!(
        left.is_empty(),
        "{} left processes {left:?} running",
        first.display()
    );
    ensure!(
        ended,
        "{} {args:?} did not end within {RUN_LIMIT:?} of its stdin closing",
        first.display()
    );
    let output = output
        .map_err(|_| {
            anyhow::anyhow!(
                "{} {args:?} wrote nothing within {RUN_LIMIT:?}",
                first.display()
            )
        })?
        .context("reading its stdout")?;
    Ok((output, ended))
}

#[allow(
    clippy::disallowed_methods,
    reason = "kill(1) ends the group this test started, by its id"
)]
fn kill_group(group: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{group}")])
        .status();
}

/// The processes still in process group `group` after up to 10 s.
fn wait_group_gone(group: u32) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let members = group_members(group);
        if members.is_empty() || Instant::now() > deadline {
            return members;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Live (not zombie) processes whose process group is `group`, from /proc.
fn group_members(group: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            let fields: Vec<&str> = stat
                .rsplit_once(')')
                .map_or_else(Vec::new, |(_, rest)| rest.split_whitespace().collect());
            fields.first().is_some_and(|state| *state != "Z")
                && fields.get(2).and_then(|pgrp| pgrp.parse::<u32>().ok()) == Some(group)
        })
        .collect()
}

/// The launcher and this machine's platform package install into a fresh
/// prefix with npm offline, and `npx agent-exec` runs the binary.
#[allow(
    clippy::disallowed_methods,
    reason = "xtask drives npm, as a user would"
)]
fn npm_install_test(
    out: &Path,
    scratch: &Path,
    host: &Platform,
    version: &str,
) -> anyhow::Result<()> {
    let prefix = scratch.join("npm");
    std::fs::create_dir_all(&prefix)?;
    let (os, cpu) = host.npm;
    let status = Command::new("npm")
        .current_dir(&prefix)
        .args([
            "install",
            "--offline",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            "--prefix",
        ])
        .arg(&prefix)
        .arg(out.join(format!("agent-exec-{version}.tgz")))
        .arg(out.join(format!("agent-exec-{os}-{cpu}-{version}.tgz")))
        .status()
        .context("running npm install")?;
    ensure!(
        status.success(),
        "npm install --offline of the packed tarballs failed"
    );
    // `--no`: never fetch; `--`: `--version` is the binary's, not npx's.
    let npx = ["npx", "--no", "--", "agent-exec"].map(PathBuf::from);
    smoke("npm package through npx", &npx, &prefix, version)
}

/// This machine's wheel installs into a fresh venv with pip offline; its
/// entry point answers, and the Python SDK interop test passes against it.
#[allow(
    clippy::disallowed_methods,
    reason = "xtask drives pip, as a user would"
)]
fn wheel_install_test(
    root: &Path,
    out: &Path,
    scratch: &Path,
    host: &Platform,
    version: &str,
) -> anyhow::Result<()> {
    let venv = scratch.join("venv");
    let status = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()?;
    ensure!(status.success(), "python3 -m venv failed");
    let wheel = out.join(format!("agent_exec-{version}-py3-none-{}.whl", host.wheel));
    let status = Command::new(venv.join("bin/pip"))
        .args([
            "install",
            "--no-index",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .arg(&wheel)
        .status()?;
    ensure!(
        status.success(),
        "pip install --no-index {} failed",
        wheel.display()
    );
    let entry_point = venv.join("bin/agent-exec");
    smoke(
        "wheel through pip",
        std::slice::from_ref(&entry_point),
        scratch,
        version,
    )?;
    let python = root.join("target/interop-venv/bin/python");
    if !python.exists() {
        ensure!(
            std::env::var_os("CI").is_none(),
            "no target/interop-venv (the MCP Python SDK): .ci/run makes it"
        );
        println!("dist-test: no target/interop-venv, the Python SDK interop test is skipped");
        return Ok(());
    }
    let status = Command::new("timeout")
        .arg("300")
        .arg(&python)
        .arg(root.join("tests/interop/python_client.py"))
        .arg(&entry_point)
        .current_dir(root)
        .status()?;
    ensure!(
        status.success(),
        "the Python SDK interop test failed against the wheel's entry point"
    );
    println!("dist-test: the Python SDK interop test passed against the wheel's entry point");
    Ok(())
}

/// Whether a package may go to crates.io: `publish = false` reads as an
/// empty registry list.
fn publishable(package: &Package) -> bool {
    package
        .publish
        .as_ref()
        .is_none_or(|registries| !registries.is_empty())
}

/// What each publishable workspace member lacks for crates.io, one line per
/// gap naming the crate: its metadata fields, and a version on every normal
/// or build dependency given by path (crates.io refuses a path-only one).
/// Path-only dev-dependencies are fine: `cargo publish` drops them.
fn publish_gaps(metadata: &Metadata) -> Vec<String> {
    let mut gaps = Vec::new();
    for package in metadata.workspace_packages() {
        if !publishable(package) {
            continue;
        }
        let name = package.name.as_str();
        let missing = [
            ("description", package.description.is_none()),
            (
                "license",
                package.license.is_none() && package.license_file.is_none(),
            ),
            ("repository", package.repository.is_none()),
            ("readme", package.readme.is_none()),
            ("keywords", package.keywords.is_empty()),
            ("categories", package.categories.is_empty()),
            ("rust-version", package.rust_version.is_none()),
        ];
        for (field, absent) in missing {
            if absent {
                gaps.push(format!("{name}: no `{field}` in Cargo.toml"));
            }
        }
        for dependency in &package.dependencies {
            if dependency.path.is_some()
                && dependency.kind != DependencyKind::Development
                && dependency.req == VersionReq::STAR
            {
                gaps.push(format!(
                    "{name}: dependency `{}` is by path only (give it a version)",
                    dependency.name
                ));
            }
        }
        for dependency in &package.dependencies {
            let unpublished = metadata
                .workspace_packages()
                .into_iter()
                .any(|member| member.name.as_str() == dependency.name && !publishable(member));
            if unpublished && dependency.kind != DependencyKind::Development {
                gaps.push(format!(
                    "{name}: depends on `{}`, which is `publish = false`",
                    dependency.name
                ));
            }
        }
    }
    gaps
}

/// `cargo xtask publish-check`: fails naming every crate that lacks what
/// crates.io needs.
pub(crate) fn publish_check(root: &Path) -> anyhow::Result<()> {
    let gaps = publish_gaps(&metadata(root)?);
    if gaps.is_empty() {
        println!("publish-check: every publishable crate has its metadata");
        return Ok(());
    }
    anyhow::bail!("crates not ready for crates.io:\n  {}", gaps.join("\n  "))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SBOM lists what is linked into the binary: the normal
    /// dependencies, not the dev-dependencies nor the proc-macros.
    #[test]
    fn the_sbom_lists_what_the_binary_is_built_from() {
        let sbom = sbom(&crate::workspace_root(), &PLATFORMS[1], "0.0.0").expect("an SBOM");
        let names: Vec<&str> = sbom["components"]
            .as_array()
            .expect("components")
            .iter()
            .filter_map(|component| component["name"].as_str())
            .collect();
        for linked in [
            "tokio",
            "rmcp",
            "exec-tools",
            "shell-runtime",
            "seccompiler",
            "libc",
        ] {
            assert!(names.contains(&linked), "{linked} missing from {names:?}");
        }
        for not_linked in [
            "proptest",
            "pretty_assertions",
            "test-support",
            "serde_derive",
            "agent-exec",
        ] {
            assert!(
                !names.contains(&not_linked),
                "{not_linked} is not in the binary"
            );
        }
        assert_eq!(sbom["metadata"]["component"]["name"], "agent-exec");
        assert_eq!(sbom["bomFormat"], "CycloneDX");
        let refs = sbom["dependencies"].as_array().expect("dependencies");
        assert!(refs.iter().any(|entry| {
            entry["ref"]
                .as_str()
                .is_some_and(|purl| purl.starts_with("pkg:cargo/agent-exec@"))
        }));
    }

    #[test]
    fn checksums_are_in_sha256sums_format_and_skip_themselves() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        std::fs::write(dir.path().join("b"), "").expect("write");
        std::fs::write(dir.path().join("a"), "abc").expect("write");
        std::fs::write(dir.path().join("SHA256SUMS"), "old").expect("write");
        assert_eq!(
            checksums(dir.path()).expect("checksums"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  a\n\
             e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  b\n"
        );
    }

    #[test]
    fn the_launcher_depends_on_one_package_per_platform() {
        let manifest =
            launcher_manifest(&crate::workspace_root()).expect("the launcher's package.json");
        let optional = manifest["optionalDependencies"]
            .as_object()
            .expect("optionalDependencies");
        let names: Vec<&String> = optional.keys().collect();
        let expected: Vec<String> = PLATFORMS.iter().map(Platform::npm_package).collect();
        assert_eq!(names, expected.iter().collect::<Vec<_>>());
        let script = std::fs::read_to_string(
            crate::workspace_root().join("packaging/npm/agent-exec/bin/agent-exec.js"),
        )
        .expect("the launcher");
        for platform in &PLATFORMS {
            let (os, cpu) = platform.npm;
            assert!(
                script.contains(&format!("\"{os}-{cpu}\": \"{}\"", platform.npm_package())),
                "the launcher does not map {os}-{cpu}"
            );
        }
    }

    fn workspace_metadata() -> Metadata {
        metadata(&crate::workspace_root()).expect("cargo metadata of the workspace")
    }

    #[test]
    fn every_publishable_crate_has_its_crates_io_metadata() {
        let gaps = publish_gaps(&workspace_metadata());
        assert!(
            gaps.is_empty(),
            "add these to the crates' Cargo.toml:\n{}",
            gaps.join("\n")
        );
    }

    #[test]
    fn development_crates_are_not_published() {
        let metadata = workspace_metadata();
        for member in metadata.workspace_packages() {
            let expected = !matches!(member.name.as_str(), "xtask" | "test-support");
            assert_eq!(publishable(member), expected, "{}", member.name);
        }
    }

    /// The check names a crate that lost a field or whose internal
    /// dependency lost its version.
    #[test]
    fn the_publish_check_names_what_is_missing() {
        let mut value = serde_json::to_value(workspace_metadata()).expect("metadata as JSON");
        let packages = value["packages"].as_array_mut().expect("a package list");
        for package in packages.iter_mut() {
            if package["name"] == "agent-exec" && package["source"].is_null() {
                package["description"] = serde_json::Value::Null;
                package["keywords"] = serde_json::json!([]);
                for dependency in package["dependencies"]
                    .as_array_mut()
                    .expect("dependencies")
                {
                    if dependency["name"] == "exec-tools" {
                        dependency["req"] = serde_json::json!("*");
                    }
                }
            }
        }
        let broken: Metadata = serde_json::from_value(value).expect("metadata back");
        let gaps = publish_gaps(&broken);
        assert_eq!(
            gaps,
            [
                "agent-exec: no `description` in Cargo.toml",
                "agent-exec: no `keywords` in Cargo.toml",
                "agent-exec: dependency `exec-tools` is by path only (give it a version)",
            ]
        );
    }
}
