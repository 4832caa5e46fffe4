// Plays tool calls through the official MCP TypeScript SDK: one JSON line
// {"tool", "args"} in, one {"text", "is_error", "structured"} out, over one
// session. Usage: node ts_driver.mjs NODE_PREFIX AGENT_EXEC ARGS...
// (NODE_PREFIX: where `npm install --prefix` put the pinned SDK).
import { createRequire } from "node:module";
import path from "node:path";
import readline from "node:readline";

const [prefix, binary, ...args] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(prefix), "package.json"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");

const client = new Client({ name: "model-eye-ts", version: "1.0.0" });
const transport = new StdioClientTransport({ command: binary, args, stderr: "inherit" });
await client.connect(transport);

const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
  if (!line.trim()) continue;
  const call = JSON.parse(line);
  const result = await client.callTool({ name: call.tool, arguments: call.args }, undefined, {
    timeout: 120000,
  });
  const text = (result.content ?? [])
    .filter((item) => item.type === "text")
    .map((item) => item.text)
    .join("");
  process.stdout.write(
    JSON.stringify({ text, is_error: result.isError ?? false, structured: result.structuredContent ?? null }) + "\n",
  );
}
await client.close();
