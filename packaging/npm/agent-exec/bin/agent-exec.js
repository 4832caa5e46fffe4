#!/usr/bin/env node
// Runs the agent-exec binary from this platform's package. Each platform's
// binary is an optional dependency that declares its os and cpu, so npm
// installs only the one that fits (the pattern esbuild and Codex use).
"use strict";

const { spawn } = require("node:child_process");

const PACKAGES = {
  "linux-x64": "@agent-exec/linux-x64",
  "linux-arm64": "@agent-exec/linux-arm64",
};

function binary() {
  const platform = `${process.platform}-${process.arch}`;
  const name = PACKAGES[platform];
  if (name === undefined) {
    throw new Error(
      `agent-exec has no prebuilt binary for ${platform} (there are: ${Object.keys(PACKAGES).join(", ")}); ` +
        "build it from source with `cargo install --locked agent-exec`",
    );
  }
  try {
    return require.resolve(`${name}/bin/agent-exec`);
  } catch {
    throw new Error(
      `${name} is not installed: npm skips optional dependencies under --omit=optional ` +
        "or --no-optional; install again without it",
    );
  }
}

let path;
try {
  path = binary();
} catch (error) {
  process.stderr.write(`agent-exec: ${error.message}\n`);
  process.exit(1);
}

// The binary owns the terminal and stdio (an MCP client speaks to it over
// stdin and stdout); this process only passes signals on and reports how
// the binary ended, as if it had been started directly.
const child = spawn(path, process.argv.slice(2), { stdio: "inherit" });
const forwarded = ["SIGINT", "SIGTERM", "SIGHUP"];
for (const signal of forwarded) {
  process.on(signal, () => child.kill(signal));
}
child.on("error", (error) => {
  process.stderr.write(`agent-exec: cannot start ${path}: ${error.message}\n`);
  process.exit(1);
});
child.on("exit", (code, signal) => {
  if (signal !== null) {
    for (const name of forwarded) {
      process.removeAllListeners(name);
    }
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code ?? 1);
});
