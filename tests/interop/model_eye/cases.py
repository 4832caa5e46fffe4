"""The cases every client plays, and what the model must read in each answer.

A step is `(case, tool, args)`; args may be a function of what earlier
steps received (the shell id of a background start). A check is
`(what, predicate)` over the *view* of an answer: the text the client sent
back, plus, when that text is JSON (a client that forwards
`structuredContent`), each key and value with the JSON escapes undone, so
`"output":"1\\n2\\n"` reads as the model reads it. Nothing is credited for
a key's name alone: `exit_code` counts only with its value.
"""

import json
import re

POLICY = """
[[rule]]
id = "touch-asks"
decision = "ask"
program = "touch"
reason = "touching files needs a nod"
"""

SHELL_ID = re.compile(r"shell_[0-9a-f]{8,}")
# Where the whole of a cut output is kept, as the answer names it.
OUTPUT_FILE = re.compile(r"(?:full output in |\"output_file\":\s*\")(/[^\s\"\]]+)")


def _shell_id(received, step):
    answer = received.get(step)
    match = SHELL_ID.search(answer["text"]) if answer else None
    return match.group(0) if match else "shell_00000000"


def steps(approval_file):
    """The script: one tool call per model turn, in this order. Each output
    the checks look for is printed so that the command's own text does not
    hold it: `structuredContent` carries `command`, and a check must not
    pass on that alone."""
    return [
        ("success", "Bash", {"command": "seq 1 5"}),
        ("failure", "Bash", {"command": "printf 'out-%s\\n' before-failing; printf 'oops-%s\\n' on-stderr >&2; exit 3"}),
        ("timeout", "Bash", {"command": "printf 'sta%s\\n' rted; sleep 5", "timeout": 1000}),
        ("truncation", "Bash", {"command": "seq 1 200000"}),
        ("background-start", "Bash", {"command": "printf 'rea%s\\n' dy; sleep 300", "run_in_background": True}),
        ("background-output", "BashOutput", lambda r: {"bash_id": _shell_id(r, 4), "wait_ms": 1500}),
        ("background-kill", "KillShell", lambda r: {"shell_id": _shell_id(r, 4)}),
        ("tty-start", "Bash", {"command": "python3 -q", "tty": True}),
        ("tty-write", "WriteStdin", lambda r: {"bash_id": _shell_id(r, 7), "input": "print(6*7)\n", "wait_ms": 5000}),
        ("tty-end", "WriteStdin", lambda r: {"bash_id": _shell_id(r, 7), "keys": ["Ctrl-D"], "wait_ms": 5000}),
        ("refusal", "Bash", {"command": "rm -rf /"}),
        ("approval", "Bash", {"command": f"touch {approval_file}"}),
    ]


# Steps that need one server across calls; the Inspector CLI starts a new
# server per call, so it plays only the others.
STATEFUL = {"background-start", "background-output", "background-kill", "tty-start", "tty-write", "tty-end"}
# Answers that are failures (isError true) when the tool answers as it should.
ERRORS = {"failure", "timeout", "refusal", "approval"}


def _unescape(text):
    return text.replace("\\n", "\n").replace('\\"', '"').replace("\\t", "\t").replace("\\\\", "\\")


def _json_part(text):
    """The JSON object in an answer: all of it, or what follows a client's
    own preamble (Codex puts `Wall time: ...\nOutput:\n` first)."""
    start = text.find("{")
    if start < 0:
        return None
    try:
        return json.loads(text[start:])
    except ValueError:
        return None


def view(text):
    """What the model reads of one answer (see the module doc)."""
    parts = [text, _unescape(text)]
    value = _json_part(text)
    if isinstance(value, dict):
        for key, item in value.items():
            parts.append(f"{key}: {item if isinstance(item, str) else json.dumps(item)}")
    return "\n".join(parts)


def form(text):
    """Whether an answer reached the model as structuredContent or as text."""
    start = text.find("{")
    head = text[start:start + 2000] if 0 <= start < 200 else ""
    if re.search(r"\"(status|exit_code|bash_id|shell_id|command|output)\"", head):
        return "structuredContent"
    return "text"


def has(needle):
    return (f"contains {needle!r}", lambda v: needle in v)


def matches(pattern, what=None):
    return (what or f"matches /{pattern}/", lambda v: re.search(pattern, v) is not None)


def checks(cut_middle=False):
    """Per case, what the model must read. `cut_middle`: the client keeps only
    the head and tail of a long result (Codex), so the truncation line in the
    middle may be gone; the model must still see that the output was cut
    (the metadata at the head) and where the whole is."""
    truncation = [
        has("199999\n200000"),
        matches(r"(?:full output in |\"output_file\":\s*\")/\S+", "names the file holding the whole output"),
    ]
    if cut_middle:
        truncation.append(
            matches(r"\[Output truncated|\"truncated\":\s*true", "says the output was cut ([Output truncated or truncated: true)")
        )
    else:
        truncation.append(has("[Output truncated"))
    return {
        "success": [has("1\n2\n3\n4\n5")],
        "failure": [
            matches(r"exit code 3|\"exit_code\":\s*3\b", "the exit code 3"),
            has("oops-on-stderr"),
            has("out-before-failing"),
        ],
        "timeout": [has("timed out"), has("started")],
        "truncation": truncation,
        "background-start": [matches(SHELL_ID.pattern, "the shell id")],
        "background-output": [has("ready"), matches(r"(?i)status\"?:\s*\"?running", "status running")],
        "background-kill": [has("terminated"), matches(SHELL_ID.pattern, "the shell id")],
        "tty-start": [matches(r"Waiting for input|\"waiting_for_input\":\s*true", "waiting for input"), matches(SHELL_ID.pattern, "the shell id")],
        "tty-write": [has("42")],
        "tty-end": [matches(r"(?i)status\"?:\s*\"?completed", "status completed")],
        "refusal": [has("Command blocked"), has("dangerous command")],
        # Headless clients cannot ask the person: the model must read the
        # refusal that says how to allow it.
        "approval": [
            has("approval"),
            matches(
                r"--ask-fallback allow|declined|cannot be asked",
                "the refusal says how to allow it, or that the question was declined",
            ),
        ],
    }


def approval_outcome(text):
    """How an `ask` command was answered, as the model read it."""
    if text is None:
        return None
    if "declined" in text:
        return "asked; the client declined"
    if "--ask-fallback" in text or "cannot be asked" in text:
        return "not asked; the fallback refused"
    return "other"


def evaluate(received_by_case, cut_middle=False):
    """Returns a list of failures `(case, what, text)`; `received_by_case` maps
    a case to the text the model got (None when it got nothing)."""
    failures = []
    table = checks(cut_middle)
    for case, answer in received_by_case.items():
        if answer is None:
            failures.append((case, "an answer reached the model", ""))
            continue
        seen = view(answer)
        for what, predicate in table[case]:
            if not predicate(seen):
                failures.append((case, what, answer))
    return failures
