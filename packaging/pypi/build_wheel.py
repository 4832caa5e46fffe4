"""Assembles the agent-exec wheel for one platform from its built binary.

The wheel holds the static binary as a script (pip and uv put it on the
venv's PATH as `agent-exec`); nothing is compiled here, so the wheel is as
reproducible as the binary: fixed timestamps, sorted entries, one
compression level. Usage:

    python3 build_wheel.py BINARY VERSION PLATFORM_TAG README OUT_DIR

PLATFORM_TAG may be a compressed tag set (`manylinux_2_17_x86_64.musllinux_1_1_x86_64`).
"""

import base64
import hashlib
import sys
import zipfile
from pathlib import Path

NAME = "agent_exec"
SUMMARY = (
    "A shell an LLM agent can trust: an MCP server (Bash, BashOutput, KillShell, "
    "WriteStdin) with dangerous commands blocked, secrets scrubbed and every process ended."
)


def digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def main() -> None:
    binary, version, platform_tag, readme, out_dir = sys.argv[1:6]
    tags = [f"py3-none-{platform}" for platform in platform_tag.split(".")]
    dist_info = f"{NAME}-{version}.dist-info"
    metadata = "\n".join(
        [
            "Metadata-Version: 2.1",
            "Name: agent-exec",
            f"Version: {version}",
            f"Summary: {SUMMARY}",
            "License: MIT OR Apache-2.0",
            "Keywords: mcp,shell,llm,agent,sandbox",
            "Classifier: Operating System :: POSIX :: Linux",
            "Description-Content-Type: text/markdown",
            "",
            Path(readme).read_text(encoding="utf-8"),
        ]
    )
    wheel = "\n".join(
        ["Wheel-Version: 1.0", "Generator: agent-exec xtask dist", "Root-Is-Purelib: false"]
        + [f"Tag: {tag}" for tag in tags]
        + [""]
    )
    entries = [
        (f"{NAME}-{version}.data/scripts/agent-exec", Path(binary).read_bytes(), 0o755),
        (f"{dist_info}/METADATA", metadata.encode(), 0o644),
        (f"{dist_info}/WHEEL", wheel.encode(), 0o644),
    ]
    record = "".join(f"{name},{digest(data)},{len(data)}\n" for name, data, _ in entries)
    record += f"{dist_info}/RECORD,,\n"
    entries.append((f"{dist_info}/RECORD", record.encode(), 0o644))

    path = Path(out_dir) / f"{NAME}-{version}-py3-none-{platform_tag}.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data, mode in entries:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data, compresslevel=9)
    print(path)


if __name__ == "__main__":
    main()
