"""Interop with the official MCP Python SDK (mcp==2.3.0).

Drives `agent-exec mcp` through initialize, tools/list, a foreground call,
a background shell read with BashOutput and stopped with KillShell,
progress notifications, cancellation, and shutdown, then checks that no
process the server started is left. Usage:

    python tests/interop/python_client.py path/to/agent-exec
"""

import os
import sys
import tempfile
import time

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (FileNotFoundError, IndexError):
        return False


async def wait_gone(pid: int) -> None:
    deadline = time.monotonic() + 10
    while alive(pid):
        assert time.monotonic() < deadline, f"{pid} is still running"
        await anyio.sleep(0.02)


def marker_pid(marker: str) -> int | None:
    """The host pid of `sleep MARKER`: a contained command's `$!` is a pid
    of its own PID namespace, not one the host's /proc knows."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as file:
                words = file.read().split(b"\0")
        except OSError:
            continue
        if len(words) >= 2 and words[0].endswith(b"sleep") and words[1] == marker.encode():
            return int(entry)
    return None


async def read_pid(path: str, marker: str) -> int:
    """Waits until the command wrote `path` (its sleep has started), then
    finds that sleep's host pid by its marker."""
    deadline = time.monotonic() + 10
    while True:
        try:
            with open(path) as file:
                if file.read().strip():
                    pid = marker_pid(marker)
                    if pid is not None:
                        return pid
        except FileNotFoundError:
            pass
        assert time.monotonic() < deadline, f"no sleep {marker} after {path}"
        await anyio.sleep(0.01)


def text(result) -> str:
    return result.content[0].text if result.content else ""


async def main(binary: str) -> None:
    workdir = tempfile.mkdtemp(prefix="agent-exec-interop-")
    params = StdioServerParameters(command=binary, args=["mcp", "--cwd", workdir])
    left_running: list[int] = []
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            assert init.server_info.name == "agent-exec", init

            tools = await session.list_tools()
            assert [tool.name for tool in tools.tools] == ["Bash", "BashOutput", "KillShell", "ListShells", "WriteStdin"]

            result = await session.call_tool("Bash", {"command": "echo hello; echo oops >&2"})
            assert text(result) == "hello\n\n[stderr]\noops\n", text(result)
            assert result.is_error is False
            assert result.structured_content["exit_code"] == 0

            failed = await session.call_tool("Bash", {"command": "exit 7"})
            assert failed.is_error is True
            assert text(failed) == "Command failed with exit code 7"

            invalid = await session.call_tool("Bash", {"command": ""})
            assert invalid.is_error is True and "command" in text(invalid)

            started = await session.call_tool(
                "Bash", {"command": "echo ready; sleep 300", "run_in_background": True}
            )
            shell_id = started.structured_content["bash_id"]
            assert text(started).startswith(f"Started background shell: {shell_id}")
            deadline = time.monotonic() + 10
            while True:
                read_result = await session.call_tool("BashOutput", {"bash_id": shell_id})
                if "ready" in text(read_result):
                    assert text(read_result).startswith("Status: running")
                    break
                assert time.monotonic() < deadline, "no output from the background shell"
                await anyio.sleep(0.05)
            killed = await session.call_tool("KillShell", {"shell_id": shell_id})
            assert text(killed) == f"Shell {shell_id} terminated", text(killed)
            again = await session.call_tool("KillShell", {"shell_id": shell_id})
            assert again.structured_content["already_stopped"] is True

            # A REPL under a terminal: the call answers at its prompt.
            repl = await session.call_tool("Bash", {"command": "python3 -q", "tty": True})
            repl_id = repl.structured_content["bash_id"]
            assert repl.structured_content["waiting_for_input"] is True, text(repl)
            assert text(repl).endswith(f"Waiting for input: {repl_id}"), text(repl)
            answer = await session.call_tool(
                "WriteStdin", {"bash_id": repl_id, "input": "print(6*7)\n", "wait_ms": 5000}
            )
            assert "42" in text(answer), text(answer)
            ended = await session.call_tool(
                "WriteStdin", {"bash_id": repl_id, "keys": ["Ctrl-D"], "wait_ms": 5000}
            )
            assert text(ended).startswith("Status: completed"), text(ended)

            updates = []

            async def on_progress(progress, total, message):
                updates.append((progress, total, message))

            result = await session.call_tool(
                "Bash",
                {"command": "echo tick; sleep 2.2; echo tock"},
                progress_callback=on_progress,
            )
            assert text(result) == "tick\ntock\n"
            assert len(updates) >= 2, updates
            assert updates[0][2] == "tick", updates

            # Cancellation: the SDK sends notifications/cancelled when the
            # caller's scope is cancelled.
            pid_file = os.path.join(workdir, "pid")
            marker = f"300.{os.getpid()}1"
            with anyio.move_on_after(30) as scope:
                async with anyio.create_task_group() as group:

                    async def slow_call():
                        await session.call_tool(
                            "Bash", {"command": f"sleep {marker} & echo $! > {pid_file}; wait"}
                        )

                    group.start_soon(slow_call)
                    pid = await read_pid(pid_file, marker)
                    group.cancel_scope.cancel()
            assert not scope.cancelled_caught, "the cancellation did not finish"
            await wait_gone(pid)

            bg_pid_file = os.path.join(workdir, "bg-pid")
            bg_marker = f"300.{os.getpid()}2"
            await session.call_tool(
                "Bash",
                {"command": f"sleep {bg_marker} & echo $! > {bg_pid_file}; wait", "run_in_background": True},
            )
            left_running.append(await read_pid(bg_pid_file, bg_marker))
    # The client closed the server's stdin: everything it started is gone.
    for pid in left_running:
        await wait_gone(pid)
    print("python interop: ok")


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
