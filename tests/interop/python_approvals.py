"""Approvals with the official MCP Python SDK (mcp==2.3.0): a ClientSession
with an elicitation callback is asked about an `ask` command (accept,
remember, decline, progress while waiting); one without is answered by the
fallback. The high-level Client in its default `auto` mode (2026-07-28) is
asked through an input-required result and its answers are honoured.
Usage:

    python tests/interop/python_approvals.py path/to/agent-exec
"""

import os
import sys
import tempfile

import anyio
import mcp_types as types
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

POLICY = """
[[rule]]
id = "touch-asks"
decision = "ask"
program = "touch"
reason = "touching files needs a nod"
"""


def text(result) -> str:
    return result.content[0].text if result.content else ""


async def with_person(binary: str, workdir: str, policy: str) -> None:
    asked = []
    answers = []

    async def person(context, params):
        asked.append(params)
        action, remember, delay = answers.pop(0)
        await anyio.sleep(delay)
        if action == "accept":
            return types.ElicitResult(action="accept", content={"remember": remember})
        return types.ElicitResult(action=action)

    params = StdioServerParameters(
        command=binary, args=["mcp", "--cwd", workdir, "--policy", policy]
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, elicitation_callback=person) as session:
            await session.initialize()

            answers.append(("accept", False, 0))
            ran = await session.call_tool("Bash", {"command": "touch one"})
            assert ran.is_error is False, text(ran)
            assert ran.structured_content["approved_by"] == "user"
            assert os.path.exists(os.path.join(workdir, "one"))
            question = asked[-1]
            assert question.mode == "form", question
            for needle in ("touch one", workdir, "touch-asks", "touching files needs a nod"):
                assert needle in question.message, (needle, question.message)
            schema = question.requested_schema
            assert list(schema["properties"]) == ["remember", "save"], schema
            assert schema["properties"]["remember"]["type"] == "boolean", schema
            assert schema["properties"]["save"]["type"] == "boolean", schema

            answers.append(("accept", True, 0))
            first = await session.call_tool("Bash", {"command": "touch two"})
            assert first.structured_content["approved_by"] == "user", text(first)
            again = await session.call_tool("Bash", {"command": "touch two"})
            assert again.structured_content["approved_by"] == "remembered", text(again)
            assert len(asked) == 2

            for action in ("decline", "cancel"):
                answers.append((action, False, 0))
                refused = await session.call_tool("Bash", {"command": "touch three"})
                assert refused.is_error is True
                assert "blocked" in text(refused) and "declined" in text(refused), text(refused)
                assert not os.path.exists(os.path.join(workdir, "three"))

            updates = []

            async def on_progress(progress, total, message):
                updates.append(message)

            answers.append(("accept", False, 2.2))
            slow = await session.call_tool(
                "Bash", {"command": "touch slow", "timeout": 1000}, progress_callback=on_progress
            )
            assert slow.is_error is False, text(slow)
            assert updates.count("waiting for approval") >= 2, updates


async def without_person(binary: str, workdir: str, policy: str) -> None:
    params = StdioServerParameters(
        command=binary, args=["mcp", "--cwd", workdir, "--policy", policy]
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            refused = await session.call_tool("Bash", {"command": "touch nobody"})
            assert refused.is_error is True
            message = text(refused)
            assert "blocked" in message and "approval" in message, message
            assert "--ask-fallback allow" in message, message
            assert not os.path.exists(os.path.join(workdir, "nobody"))


async def high_level_auto(binary: str, workdir: str, policy: str) -> None:
    """The SDK's high-level Client in its default `auto` mode reaches protocol
    2026-07-28 through `server/discover`, where a server may not send
    requests: the question comes back as an input-required result, the
    Client hands it to its elicitation callback and retries with the answer."""
    asked = []
    answers = []

    async def person(context, params):
        asked.append(params)
        action, remember, delay = answers.pop(0)
        await anyio.sleep(delay)
        if action == "accept":
            return types.ElicitResult(action="accept", content={"remember": remember})
        return types.ElicitResult(action=action)

    params = StdioServerParameters(
        command=binary, args=["mcp", "--cwd", workdir, "--policy", policy]
    )
    async with Client(params, elicitation_callback=person) as client:
        answers.append(("accept", False, 0))
        ran = await client.call_tool("Bash", {"command": "touch auto"})
        assert ran.is_error is False, text(ran)
        assert ran.structured_content["approved_by"] == "user", ran.structured_content
        assert os.path.exists(os.path.join(workdir, "auto"))
        question = asked[-1]
        assert question.mode == "form", question
        for needle in ("touch auto", workdir, "touch-asks", "touching files needs a nod"):
            assert needle in question.message, (needle, question.message)
        schema = question.requested_schema
        assert list(schema["properties"]) == ["remember", "save"], schema
        assert schema["properties"]["remember"]["type"] == "boolean", schema
        assert schema["properties"]["save"]["type"] == "boolean", schema

        answers.append(("accept", True, 0))
        first = await client.call_tool("Bash", {"command": "touch auto-two"})
        assert first.structured_content["approved_by"] == "user", text(first)
        again = await client.call_tool("Bash", {"command": "touch auto-two"})
        assert again.structured_content["approved_by"] == "remembered", text(again)
        assert len(asked) == 2

        for action in ("decline", "cancel"):
            answers.append((action, False, 0))
            refused = await client.call_tool("Bash", {"command": "touch auto-three"})
            assert refused.is_error is True
            assert "blocked" in text(refused) and "declined" in text(refused), text(refused)
            assert not os.path.exists(os.path.join(workdir, "auto-three"))
        assert len(asked) == 4

    # `--ask-timeout` counts from when the input-required result is sent: a
    # person slower than it is answered `timed out`, and nothing runs.
    params = StdioServerParameters(
        command=binary,
        args=["mcp", "--cwd", workdir, "--policy", policy, "--ask-timeout", "500"],
    )
    async with Client(params, elicitation_callback=person) as client:
        answers.append(("accept", False, 1.5))
        late = await client.call_tool("Bash", {"command": "touch auto-late"})
        assert late.is_error is True, text(late)
        assert "timed out" in text(late) and "declined" not in text(late), text(late)
        assert not os.path.exists(os.path.join(workdir, "auto-late"))

    # Without an elicitation callback the Client declares no elicitation:
    # it cannot be asked, and the fallback answers.
    params = StdioServerParameters(
        command=binary, args=["mcp", "--cwd", workdir, "--policy", policy]
    )
    async with Client(params) as client:
        refused = await client.call_tool("Bash", {"command": "touch auto-nobody"})
        assert refused.is_error is True, text(refused)
        message = text(refused)
        assert "blocked" in message and "approval" in message, message
        assert "cannot be asked" in message, message
        assert not os.path.exists(os.path.join(workdir, "auto-nobody"))
    params = StdioServerParameters(
        command=binary,
        args=["mcp", "--cwd", workdir, "--policy", policy, "--ask-fallback", "allow"],
    )
    async with Client(params) as client:
        ran = await client.call_tool("Bash", {"command": "touch auto-fallback"})
        assert ran.is_error is False, text(ran)
        assert ran.structured_content["approved_by"] == "fallback"
        assert os.path.exists(os.path.join(workdir, "auto-fallback"))
    # `legacy` starts with initialize: the person is asked by elicitation/create.
    params = StdioServerParameters(
        command=binary, args=["mcp", "--cwd", workdir, "--policy", policy]
    )
    async with Client(params, mode="legacy", elicitation_callback=person) as client:
        answers.append(("accept", False, 0))
        ran = await client.call_tool("Bash", {"command": "touch legacy"})
        assert ran.is_error is False, text(ran)
        assert ran.structured_content["approved_by"] == "user"
        assert len(asked) == 6


async def main(binary: str) -> None:
    workdir = os.path.realpath(tempfile.mkdtemp(prefix="agent-exec-approvals-"))
    policy = os.path.join(workdir, "policy.toml")
    with open(policy, "w") as file:
        file.write(POLICY)
    await with_person(binary, workdir, policy)
    await without_person(binary, workdir, policy)
    await high_level_auto(binary, workdir, policy)
    print("python approvals: ok")


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
