"""The model's-eye test: what the model reads of each answer, through the
clients people use.

Claude Code and Codex run headless against a loopback fake of their model's
API (tests/interop/model_eye/fake_api.py) that plays a script of tool calls
through `agent-exec mcp` and records the tool results each client sends
back; the MCP Python and TypeScript SDKs and the MCP Inspector CLI play the
same calls and read the text. Every case (tests/interop/model_eye/cases.py)
is checked on what the model, or the SDK's caller, received.

    python3 tests/interop/model_eye.py target/debug/agent-exec [--only NAME,...] [--keep]

The clients are the pinned npm packages under target/interop-node
(AGENT_EXEC_INTEROP_NODE) and the Python SDK's venv target/interop-venv
(AGENT_EXEC_INTEROP_VENV), which `.ci/run`'s interop-clients phase installs.
A missing client is skipped with a message, or fails the run under CI=true.
HOME, XDG dirs and every config are in a temp dir; telemetry and updates are
off, and the fake API is every client's proxy: a request for anywhere else
fails the run. What each client sent back is in target/model-eye/.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "model_eye"))

import cases  # noqa: E402
from fake_api import FakeApi, Script  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
PROMPT = "Run the agent-exec checks."
CLIENT_TIMEOUT = 240


class Skip(Exception):
    """A client that is not installed."""


def node_prefix():
    return os.environ.get("AGENT_EXEC_INTEROP_NODE", os.path.join(REPO, "target", "interop-node"))


def npm_version(package):
    try:
        with open(os.path.join(node_prefix(), "node_modules", package, "package.json")) as file:
            return json.load(file)["version"]
    except (OSError, ValueError, KeyError):
        return None


def node_bin(name, package):
    path = os.path.join(node_prefix(), "node_modules", ".bin", name)
    if not os.path.exists(path) or npm_version(package) is None:
        raise Skip(f"{package} is not installed under {node_prefix()}")
    return path


class Session:
    """A temp dir with a fresh HOME, a project directory and the policy."""

    def __init__(self, root, name, binary):
        self.dir = tempfile.mkdtemp(prefix=f"{name}-", dir=root)
        self.home = os.path.join(self.dir, "home")
        self.project = os.path.join(self.dir, "project")
        for path in (self.home, self.project):
            os.makedirs(path)
        self.policy = os.path.join(self.dir, "policy.toml")
        with open(self.policy, "w") as file:
            file.write(cases.POLICY)
        self.approval_file = os.path.join(self.project, "approved-by-nobody")
        self.binary = binary
        self.server_args = ["mcp", "--cwd", self.project, "--root", self.project, "--policy", self.policy]

    def base_env(self, api=None):
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": self.home,
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "XDG_CONFIG_HOME": os.path.join(self.home, ".config"),
            "XDG_CACHE_HOME": os.path.join(self.home, ".cache"),
            "XDG_DATA_HOME": os.path.join(self.home, ".local", "share"),
            "XDG_STATE_HOME": os.path.join(self.home, ".local", "state"),
            "TMPDIR": os.path.join(self.dir, "tmp"),
        }
        os.makedirs(env["TMPDIR"], exist_ok=True)
        for key in ("SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS"):
            if key in os.environ:
                env[key] = os.environ[key]
        if api is not None:
            # Anything not for the fake API reaches it as a proxy request,
            # which it refuses and logs.
            for key in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
                env[key] = api.url
            env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
        return env

    def ours_running(self):
        """Pids of agent-exec processes serving this session."""
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as file:
                    argv = file.read().split(b"\0")
                with open(f"/proc/{entry}/stat") as file:
                    state = file.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state in ("Z", "X"):
                continue
            name = os.path.basename(self.binary).encode()
            if self.project.encode() in argv and os.path.basename(argv[0]) == name:
                found.append(int(entry))
        return found


def stop_group(process):
    """Ends a client and everything it started (its own process group)."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait(timeout=5)


def ensure_no_server_left(session):
    deadline = time.monotonic() + 10
    while session.ours_running() and time.monotonic() < deadline:
        time.sleep(0.1)
    left = session.ours_running()
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return left


# ---- the clients that talk to a model -------------------------------------


def run_model_client(name, session, argv, env, api, log_dir):
    script = Script(cases.steps(session.approval_file))
    api.script = script
    out_path = os.path.join(log_dir, f"{name}.out")
    with open(out_path, "wb") as out:
        process = subprocess.Popen(
            argv, cwd=session.project, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        timed_out = False
        try:
            process.wait(timeout=CLIENT_TIMEOUT)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            stop_group(process)
    if timed_out:
        print(f"model-eye: {name} did not finish within {CLIENT_TIMEOUT}s (ended; its output is in {out_path})")
    received = {}
    for index, (case, _tool, _args) in enumerate(script.steps):
        answer = script.received.get(index)
        received[case] = answer["text"] if answer else None
    return received, script, process.returncode, out_path


def claude(session, api, log_dir):
    binary = node_bin("claude", "@anthropic-ai/claude-code")
    config = os.path.join(session.dir, "mcp.json")
    with open(config, "w") as file:
        json.dump({"mcpServers": {"agent-exec": {"command": session.binary, "args": session.server_args}}}, file)
    env = session.base_env(api)
    env.update(
        ANTHROPIC_BASE_URL=api.url,
        ANTHROPIC_API_KEY="sk-ant-fake-model-eye",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_TELEMETRY="1",
        DISABLE_ERROR_REPORTING="1",
        DISABLE_BUG_COMMAND="1",
        MCP_TIMEOUT="30000",
    )
    argv = [
        binary,
        "-p",
        PROMPT,
        "--mcp-config",
        config,
        "--strict-mcp-config",
        "--allowedTools",
        "mcp__agent-exec",
        "--disallowedTools",
        "Bash",
        "--output-format",
        "json",
    ]
    return run_model_client("claude-code", session, argv, env, api, log_dir)


def codex(session, api, log_dir):
    binary = node_bin("codex", "@openai/codex")
    codex_home = os.path.join(session.home, ".codex")
    os.makedirs(codex_home)
    server_args = ", ".join(json.dumps(arg) for arg in session.server_args)
    with open(os.path.join(codex_home, "config.toml"), "w") as file:
        file.write(
            f"""
model = "fake-model"
model_provider = "fake"
approval_policy = "never"
check_for_update_on_startup = false

[analytics]
enabled = false

web_search = "disabled"

# Its own shell tools off: the model's only shell is ours. Plugins, apps and
# their marketplaces off: they fetch from the internet at start.
[features]
shell_tool = false
unified_exec = false
plugins = false
remote_plugin = false
plugin_sharing = false
apps = false
tool_suggest = false
image_generation = false
in_app_updates = false

[model_providers.fake]
name = "fake"
base_url = "{api.url}/v1"
wire_api = "responses"
env_key = "FAKE_MODEL_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[mcp_servers.agent-exec]
command = {json.dumps(session.binary)}
args = [{server_args}]
default_tools_approval_mode = "approve"
tool_timeout_sec = 120
"""
        )
    env = session.base_env(api)
    env.update(CODEX_HOME=codex_home, FAKE_MODEL_API_KEY="fake-model-eye", OPENAI_API_KEY="fake-model-eye")
    argv = [binary, "exec", "--skip-git-repo-check", "--cd", session.project, PROMPT]
    return run_model_client("codex", session, argv, env, api, log_dir)


# ---- the clients that read the text ---------------------------------------


def play_driver(session, argv, env):
    """Plays the script through a driver that speaks JSON lines."""
    steps = cases.steps(session.approval_file)
    received = {}
    answers = {}
    process = subprocess.Popen(
        argv, cwd=session.project, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=sys.stderr,
        text=True, start_new_session=True,
    )
    try:
        for index, (case, tool, args) in enumerate(steps):
            args = args(answers) if callable(args) else args
            process.stdin.write(json.dumps({"tool": tool, "args": args}) + "\n")
            process.stdin.flush()
            line = process.stdout.readline()
            if not line:
                break
            answer = json.loads(line)
            answers[index] = answer
            received[case] = answer["text"]
        process.stdin.close()
        process.wait(timeout=30)
    finally:
        stop_group(process)
    for case, *_ in steps:
        received.setdefault(case, None)
    return received, answers


def python_sdk(session, _api, _log_dir):
    venv = os.environ.get("AGENT_EXEC_INTEROP_VENV", os.path.join(REPO, "target", "interop-venv"))
    python = os.path.join(venv, "bin", "python")
    probe = subprocess.run(
        [python, "-c", "import importlib.metadata as m; print(m.version('mcp'))"], capture_output=True, text=True
    ) if os.path.exists(python) else None
    if probe is None or probe.returncode != 0:
        raise Skip(f"no venv with the MCP Python SDK at {venv}")
    received, _ = play_driver(
        session, [python, os.path.join(HERE, "model_eye", "py_driver.py"), session.binary, *session.server_args], session.base_env()
    )
    return received, probe.stdout.strip()


def typescript_sdk(session, _api, _log_dir):
    version = npm_version("@modelcontextprotocol/sdk")
    if version is None:
        raise Skip(f"@modelcontextprotocol/sdk is not installed under {node_prefix()}")
    argv = ["node", os.path.join(HERE, "model_eye", "ts_driver.mjs"), node_prefix(), session.binary, *session.server_args]
    received, _ = play_driver(session, argv, session.base_env())
    return received, version


def inspector(session, _api, _log_dir):
    binary = node_bin("mcp-inspector", "@modelcontextprotocol/inspector")
    config = os.path.join(session.dir, "inspector.json")
    with open(config, "w") as file:
        json.dump({"mcpServers": {"agent-exec": {"command": session.binary, "args": session.server_args}}}, file)
    received = {}
    env = session.base_env()
    for case, tool, args in cases.steps(session.approval_file):
        if case in cases.STATEFUL:
            continue
        argv = [binary, "--cli", "--config", config, "--server", "agent-exec", "--method", "tools/call", "--tool-name", tool]
        for key, value in args.items():
            argv += ["--tool-arg", f"{key}={value if isinstance(value, str) else json.dumps(value)}"]
        process = subprocess.Popen(
            argv, cwd=session.project, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, start_new_session=True,
        )
        try:
            out, err = process.communicate(timeout=120)
        finally:
            stop_group(process)
        try:
            result = json.loads(out)
            received[case] = "".join(item.get("text", "") for item in result.get("content", []))
        except ValueError:
            print(f"inspector: {case}: no JSON result: {out[:500]!r} {err[:500]!r}")
            received[case] = None
    return received, npm_version("@modelcontextprotocol/inspector")


CLIENTS = {
    "claude-code": (claude, True),
    "codex": (codex, True),
    "python-sdk": (python_sdk, False),
    "typescript-sdk": (typescript_sdk, False),
    "inspector": (inspector, False),
}


def short(text, limit=300):
    if text is None:
        return "(nothing)"
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else f"{text[:limit // 2]} ... {text[-limit // 2:]}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--only", help="comma-separated: " + ",".join(CLIENTS))
    parser.add_argument("--keep", action="store_true", help="keep the temp dirs")
    options = parser.parse_args()
    binary = os.path.realpath(options.binary)
    in_ci = os.environ.get("CI") == "true"
    names = options.only.split(",") if options.only else list(CLIENTS)
    log_dir = os.path.join(REPO, "target", "model-eye")
    os.makedirs(log_dir, exist_ok=True)
    # Outside the repository: the clients would read its git status.
    root = tempfile.mkdtemp(prefix="agent-exec-model-eye-")
    api = FakeApi().start()
    summary = {}
    failed = []
    try:
        for name in names:
            function, talks_to_model = CLIENTS[name]
            session = Session(root, name, binary)
            api.script = None
            stray_before = len(api.stray)
            started = time.monotonic()
            try:
                result = function(session, api, log_dir)
            except Skip as skip:
                if in_ci:
                    failed.append((name, "installed", str(skip), ""))
                print(f"model-eye: {name}: {'FAILED' if in_ci else 'skipped'}: {skip}")
                continue
            if talks_to_model:
                received, script, code, out_path = result
                version = npm_version({"claude-code": "@anthropic-ai/claude-code", "codex": "@openai/codex"}[name])
                info = {
                    "exit": code,
                    "tools_offered": script.tools_offered,
                    "client_output": out_path,
                    # What the client told the model about isError (Claude
                    # Code's `is_error`; None where the wire has no such field).
                    "is_error": {
                        case: (script.received.get(index) or {}).get("is_error")
                        for index, (case, _tool, _args) in enumerate(script.steps)
                    },
                }
            else:
                received, version = result
                info = {}
            left = ensure_no_server_left(session)
            if left:
                failed.append((name, "no agent-exec process left", f"pids {left}", ""))
            if talks_to_model:
                # The client's own shell must be off, so that the model's only
                # shell is ours.
                own = {"Bash", "shell", "local_shell", "exec_command", "write_stdin"} & set(script.tools_offered)
                if own:
                    failed.append((name, "its own shell tools are off", f"offered: {sorted(own)}", ""))
            strays = api.stray[stray_before:]
            if strays:
                failed.append((name, "no request left loopback", json.dumps(strays[:5]), ""))
            if os.path.exists(session.approval_file):
                failed.append((name, "the approval-needing command did not run", session.approval_file, ""))
            codex_cut = name == "codex"
            for case, what, text in cases.evaluate(received, cut_middle=codex_cut):
                failed.append((name, f"{case}: {what}", short(text), ""))
            summary[name] = {
                "version": version,
                "seconds": round(time.monotonic() - started, 1),
                "forwarded": {case: (cases.form(text) if text is not None else None) for case, text in received.items()},
                "lengths": {case: (len(text) if text is not None else None) for case, text in received.items()},
                "approval": cases.approval_outcome(received.get("approval")),
                "received": received,
                **info,
            }
            ok = not any(entry[0] == name for entry in failed)
            print(f"model-eye: {name} {version}: {'ok' if ok else 'FAILED'} in {summary[name]['seconds']}s")
        with open(os.path.join(log_dir, "summary.json"), "w") as file:
            json.dump(summary, file, indent=1)
        with open(os.path.join(log_dir, "requests.jsonl"), "w") as file:
            for entry in api.log:
                file.write(json.dumps(entry) + "\n")
    finally:
        api.stop()
        if not options.keep:
            shutil.rmtree(root, ignore_errors=True)
    for name, what, detail, _ in failed:
        print(f"model-eye: FAILED {name}: {what}: {detail}")
    for name, info in summary.items():
        by_form = {}
        for case, form in info["forwarded"].items():
            if form:
                by_form.setdefault(form, []).append(case)
        forms = "; ".join(f"{form}: {', '.join(cases_)}" for form, cases_ in sorted(by_form.items()))
        print(f"model-eye: {name} forwarded {forms}")
        print(f"model-eye: {name} approval: {info['approval']}")
        long = info["received"].get("truncation")
        if long is not None:
            cut = re.search(r"…\d+ \w+ truncated…", long)
            print(
                f"model-eye: {name} long answer: {len(long)} characters reached the model, "
                f"our [Output truncated line {'kept' if '[Output truncated' in long else 'cut out'}"
                + (f", the client cut the middle at {long.index(cut.group(0))} ({cut.group(0)})" if cut else "")
            )
    failed_names = {entry[0] for entry in failed}
    passed = len([name for name in summary if name not in failed_names])
    skipped = len(names) - len(summary) - len(failed_names - set(summary))
    print(f"model-eye: {passed} passed, {len(failed_names)} failed, {skipped} skipped")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
