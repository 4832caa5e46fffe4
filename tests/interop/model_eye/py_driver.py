"""Plays tool calls through the official MCP Python SDK (mcp==2.3.0): one JSON
line `{"tool", "args"}` in, one `{"text", "is_error", "structured"}` out,
over one session. Usage: py_driver.py AGENT_EXEC ARGS... (the server's
arguments after the binary)."""

import json
import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main(binary, args):
    params = StdioServerParameters(command=binary, args=args)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            while True:
                line = await anyio.to_thread.run_sync(sys.stdin.readline)
                if not line:
                    break
                call = json.loads(line)
                result = await session.call_tool(call["tool"], call["args"])
                text = "".join(item.text for item in result.content if getattr(item, "text", None) is not None)
                answer = {"text": text, "is_error": result.is_error, "structured": result.structured_content}
                sys.stdout.write(json.dumps(answer) + "\n")
                sys.stdout.flush()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2:])
