"""A loopback stand-in for a model's API that plays a script of tool calls.

One server answers both wire formats the clients speak: Anthropic Messages
(`POST /v1/messages`, Claude Code) and OpenAI Responses (`POST
/v1/responses`, Codex), streaming (SSE) when the request asks for it. It is
stateless about the conversation: the number of our tool calls already in
the request's history says which step of the script comes next, and the
tool results in it are what the client handed the model, recorded per step.

It is also every client's HTTP(S) proxy: a request for anywhere else (a
CONNECT, an absolute URL, telemetry, an update check) is refused and logged
as stray, so a run can assert that nothing tried to leave loopback.
"""

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Our tools as a client offers them to the model: Claude Code names them
# `mcp__agent-exec__Bash`, Codex `mcp__agent_exec__Bash` or similar.
OUR_TOOL = re.compile(r"agent[-_]?exec.*?(Bash|BashOutput|KillShell|WriteStdin)$")


class Script:
    """The steps one session plays: each `(case, tool, args)`, where args may be
    a function of the results received so far (a shell id read from one)."""

    def __init__(self, steps):
        self.steps = steps
        self.received = {}  # step index -> raw tool result text as sent back
        self.tools_offered = []
        self.lock = threading.Lock()

    def args_for(self, index):
        _case, _tool, args = self.steps[index]
        return args(self.received) if callable(args) else args


def _text_of(content):
    """The text of a tool result's content, whichever shape the client used."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict):
                if "text" in block:
                    parts.append(block["text"])
                else:
                    parts.append(json.dumps(block))
            else:
                parts.append(str(block))
        return "\n".join(parts)
    return json.dumps(content)


class FakeApi:
    """The server; `script` is set per session before a client starts."""

    def __init__(self):
        self.script = None
        self.log = []  # one dict per request
        self.stray = []  # requests for anywhere but us
        self.lock = threading.Lock()
        handler = _make_handler(self)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def record(self, entry):
        with self.lock:
            self.log.append(entry)

    # ---- the model's turn -------------------------------------------------

    def _our_tools(self, names):
        found = {}
        for name in names:
            match = OUR_TOOL.search(name)
            if match:
                found[match.group(1)] = name
        return found

    def anthropic_turn(self, body):
        """Returns (blocks, stop_reason) for a Messages request."""
        tools = [tool.get("name", "") for tool in body.get("tools", []) or []]
        ours = self._our_tools(tools)
        script = self.script
        if script is not None and not ours and "ToolSearch" in tools:
            # Claude Code defers MCP tools: only their names are in the
            # conversation until the model fetches them with ToolSearch.
            history = json.dumps(body.get("messages", []))
            deferred = sorted(set(re.findall(r"mcp__agent-exec__(?:Bash|BashOutput|KillShell|WriteStdin)\b", history)))
            if deferred and "toolu_search" not in history:
                query = "select:" + ",".join(deferred)
                return [{"type": "tool_use", "id": "toolu_search", "name": "ToolSearch", "input": {"query": query}}], "tool_use"
        if not ours or script is None:
            return [{"type": "text", "text": "ok"}], "end_turn"
        with script.lock:
            script.tools_offered = tools
            calls = 0
            for message in body.get("messages", []):
                content = message.get("content")
                if not isinstance(content, list):
                    continue
                for block in content:
                    if block.get("type") == "tool_use" and block.get("id", "").startswith("toolu_step"):
                        calls += 1
                    if block.get("type") == "tool_result":
                        step = _step_of(block.get("tool_use_id", ""))
                        if step is not None:
                            script.received[step] = {
                                "text": _text_of(block.get("content")),
                                "is_error": block.get("is_error", False),
                                "raw": block.get("content"),
                            }
            if calls >= len(script.steps):
                return [{"type": "text", "text": "done"}], "end_turn"
            _case, tool, _ = script.steps[calls]
            args = script.args_for(calls)
        block = {
            "type": "tool_use",
            "id": f"toolu_step{calls:03d}",
            "name": ours.get(tool, tool),
            "input": args,
        }
        return [block], "tool_use"

    def responses_turn(self, body):
        """Returns output items for a Responses request."""
        names = []
        namespaces = {}
        for tool in body.get("tools", []) or []:
            names.append(tool.get("name", ""))
            # Codex offers an MCP server's tools as one namespace
            # (`mcp__agent_exec`) that holds them; a call names both.
            for inner in tool.get("tools", []) or []:
                full = f"{tool.get('name', '')}__{inner.get('name', '')}"
                names.append(full)
                namespaces[full] = (tool.get("name", ""), inner.get("name", ""))
        ours = self._our_tools(names)
        script = self.script
        if not ours or script is None:
            return [_message_item("ok")]
        with script.lock:
            script.tools_offered = names
            calls = 0
            for item in body.get("input", []) or []:
                kind = item.get("type")
                if kind == "function_call" and item.get("call_id", "").startswith("call_step"):
                    calls += 1
                if kind == "function_call_output":
                    step = _step_of(item.get("call_id", ""))
                    if step is not None:
                        output = item.get("output")
                        script.received[step] = {"text": _text_of(output), "is_error": None, "raw": output}
            if calls >= len(script.steps):
                return [_message_item("done")]
            _case, tool, _ = script.steps[calls]
            args = script.args_for(calls)
        name = ours.get(tool, tool)
        item = {
            "type": "function_call",
            "id": f"fc_step{calls:03d}",
            "call_id": f"call_step{calls:03d}",
            "name": name,
            "arguments": json.dumps(args),
            "status": "completed",
        }
        if name in namespaces:
            item["namespace"], item["name"] = namespaces[name]
        return [item]


def _step_of(identifier):
    match = re.search(r"_step(\d+)", identifier)
    return int(match.group(1)) if match else None


def _message_item(text):
    return {
        "type": "message",
        "id": "msg_fake",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _sse(event, data):
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _make_handler(api):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format, *args):  # noqa: A002 - quiet
            pass

        def _body(self):
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if self.headers.get("Content-Encoding") == "zstd" or raw[:4] == b"\x28\xb5\x2f\xfd":
                return {"undecodable": "zstd"}
            try:
                return json.loads(raw or b"{}")
            except ValueError:
                return {"undecodable": raw[:200].decode("latin-1")}

        def _json(self, status, payload):
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _stray(self):
            entry = {"method": self.command, "path": self.path, "host": self.headers.get("Host")}
            with api.lock:
                api.stray.append(entry)
            api.record({"stray": True, **entry})
            self.send_response(403)
            self.send_header("Content-Length", "0")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True

        def do_CONNECT(self):  # noqa: N802
            self._stray()

        def do_GET(self):  # noqa: N802
            if not self.path.startswith("/"):
                return self._stray()
            api.record({"method": "GET", "path": self.path})
            if self.path.rstrip("/").endswith("/models"):
                return self._json(200, {"data": [], "models": [], "object": "list"})
            self._json(404, {"error": {"type": "not_found", "message": "fake API"}})

        def do_HEAD(self):  # noqa: N802
            if not self.path.startswith("/"):
                return self._stray()
            api.record({"method": "HEAD", "path": self.path})
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self):  # noqa: N802
            if not self.path.startswith("/"):
                self._body()
                return self._stray()
            body = self._body()
            path = self.path.split("?")[0]
            api.record({"method": "POST", "path": path, "body": body})
            if path.endswith("/messages/count_tokens"):
                return self._json(200, {"input_tokens": 100})
            if path.endswith("/messages"):
                return self._anthropic(body)
            if path.endswith("/responses"):
                return self._responses(body)
            self._json(404, {"error": {"type": "not_found", "message": "fake API"}})

        def _anthropic(self, body):
            blocks, stop = api.anthropic_turn(body)
            message = {
                "id": "msg_fake",
                "type": "message",
                "role": "assistant",
                "model": body.get("model", "fake"),
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 100, "output_tokens": 1},
            }
            if not body.get("stream"):
                message.update(content=blocks, stop_reason=stop)
                return self._json(200, message)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            out = [_sse("message_start", {"type": "message_start", "message": message})]
            for index, block in enumerate(blocks):
                if block["type"] == "text":
                    start = {"type": "text", "text": ""}
                    delta = {"type": "text_delta", "text": block["text"]}
                else:
                    start = {**block, "input": {}}
                    delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
                out.append(_sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": start}))
                out.append(_sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
                out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
            out.append(
                _sse(
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": stop, "stop_sequence": None},
                        "usage": {"output_tokens": 10},
                    },
                )
            )
            out.append(_sse("message_stop", {"type": "message_stop"}))
            self.wfile.write(b"".join(out))
            self.wfile.flush()
            self.close_connection = True

        def _responses(self, body):
            items = api.responses_turn(body)
            response = {
                "id": "resp_fake",
                "object": "response",
                "status": "in_progress",
                "model": body.get("model", "fake"),
                "output": [],
            }
            usage = {
                "input_tokens": 100,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 10,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 110,
            }
            if not body.get("stream"):
                return self._json(200, {**response, "status": "completed", "output": items, "usage": usage})
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            out = [_sse("response.created", {"type": "response.created", "response": response})]
            for index, item in enumerate(items):
                out.append(_sse("response.output_item.added", {"type": "response.output_item.added", "output_index": index, "item": item}))
                out.append(_sse("response.output_item.done", {"type": "response.output_item.done", "output_index": index, "item": item}))
            done = {**response, "status": "completed", "output": items, "usage": usage}
            out.append(_sse("response.completed", {"type": "response.completed", "response": done}))
            self.wfile.write(b"".join(out))
            self.wfile.flush()
            self.close_connection = True

    return Handler
