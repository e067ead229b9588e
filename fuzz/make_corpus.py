#!/usr/bin/env python3
"""Writes the seed corpus of relay_lines from the recorded ACP sessions in the repository.

Each seed is the target's 10-byte header (profile, keep flag, buffer capacity, line limit, and
the mask saying which lines come from the agent) followed by the session's lines as they crossed
the wire. Run from anywhere; rewrites fuzz/corpus/relay_lines/seed-*.
"""
import glob
import json
import os
import struct

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
out_dir = os.path.join(here, "corpus", "relay_lines")
os.makedirs(out_dir, exist_ok=True)
for old in glob.glob(os.path.join(out_dir, "seed-*")):
    os.remove(old)

PROFILES = {"claude": 0, "codex": 1, "gemini": 2}


def seed(name, lines, profile=3, keep=False, cap=31, limit=255, crlf=False):
    """lines: (from_agent, bytes) pairs, at most 64."""
    lines = lines[:64]
    mask = 0
    for i, (from_agent, _) in enumerate(lines):
        if from_agent:
            mask |= 1 << i
    flags = profile | (4 if keep else 0) | (cap << 3)
    end = b"\r\n" if crlf else b"\n"
    body = b"".join(line + end for _, line in lines)
    with open(os.path.join(out_dir, "seed-" + name), "wb") as f:
        f.write(bytes([flags, limit]) + struct.pack("<Q", mask) + body)


def compact(msg):
    return json.dumps(msg, separators=(",", ":"), ensure_ascii=False).encode()


# Sessions recorded against real agents: {"dir": "out"|"in", "msg": ...}.
for path in sorted(glob.glob(os.path.join(root, "tests", "fixtures", "*-direct*.jsonl"))):
    base = os.path.basename(path)[: -len(".jsonl")]
    if base.endswith(".mock"):
        continue
    profile = PROFILES.get(base.split("-")[0], 3)
    lines = []
    with open(path, "rb") as f:
        for raw in f:
            rec = json.loads(raw)
            lines.append((rec["dir"] == "in", compact(rec["msg"])))
    seed(base, lines, profile=profile)
    seed(base + "-generic-small-buffer", lines, profile=3, cap=6)
    seed(base + "-keep", lines, profile=profile, keep=True, cap=30)

# A recording made by --record: {"dir": "editor_to_agent"|"agent_to_editor", "line": "..."}.
for path in sorted(glob.glob(os.path.join(root, "crates", "acp-usage", "tests", "fixtures", "*.jsonl"))):
    base = os.path.basename(path)[: -len(".jsonl")]
    lines = []
    with open(path, "rb") as f:
        for raw in f:
            rec = json.loads(raw)
            if "line" in rec:
                lines.append((rec["dir"] != "editor_to_agent", rec["line"].encode()))
    if lines:
        seed("recorded-" + base, lines)

# An agent's stream as it is, all from the agent.
stream = os.path.join(root, "crates", "acp-usage", "tests", "fixtures", "agent_stream.ndjson")
with open(stream, "rb") as f:
    agent_lines = [(True, raw.rstrip(b"\n")) for raw in f if raw.strip()]
seed("agent-stream", agent_lines, cap=2)
seed("agent-stream-crlf", agent_lines, crlf=True, cap=13)

# What the relay must pass untouched.
odd = [
    (True, b"\xff\xfe\x80 not utf-8 \xc3\x28"),
    (False, b"[1,2,{\"a\":3}]"),
    (True, b""),
    (False, b"garbage between messages }{"),
    (True, b"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}"),
    (False, b"{\"jsonrpc\":\"2.0\",\"id\":\"7\",\"method\":\"session/prompt\",\"params\":{\"sessionId\":\"s\",\"prompt\":[]}}"),
    (True, b"{\"jsonrpc\":\"2.0\",\"id\":\"\\u0037\",\"result\":{\"stopReason\":\"end_turn\"}}"),
    (True, b"   \t "),
]
seed("odd-lines", odd, cap=1, limit=1)

# The agent's usage_update with an invalid UTF-8 byte in a field the envelope view skips: it is
# rewritten, and the rewrite keeps the byte (found by the first fuzzing run, an expected case).
seed("usage-update-invalid-utf8", [
    (False, b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}'),
    (True, b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}'),
    (True, b'{"jsonrpc":"2.\xff","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"usage_update","used":11,"size":200000}}}'),
])
