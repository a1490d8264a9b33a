#!/usr/bin/python3
"""A hostile MCP stdio server for tests/integration/test_mcp.py (stdlib only).

Tools: ok (answers "fine"), die (exits in the middle of the call), hang
(never answers), flood (writes FLOOD_MB MiB without a newline, then a
newline and its real answer), flood_forever (writes without end), big
(answers with 1 MiB of text), ask (asks the client for ping, roots/list
and sampling/createMessage during the call, and answers with the JSON of
what came back), sample (asks sampling/createMessage with one question
and answers with what came back). With HOSTILE_CRASH_AT_START=1 it prints its
environment to stderr and exits before answering initialize. With
HOSTILE_LOG=FILE it appends every message it receives to FILE; with
HOSTILE_PIDFILE=FILE, its pid at start.
"""
import json
import os
import sys

TOOLS = ["ok", "die", "hang", "flood", "flood_forever", "big", "ask", "sample"]
out = sys.stdout.buffer


def send(msg):
    out.write(json.dumps(msg).encode() + b"\n")
    out.flush()


if os.environ.get("HOSTILE_CRASH_AT_START") == "1":
    sys.stderr.write("crashing at start; my env: %s\n" % dict(os.environ))
    sys.stderr.flush()
    sys.exit(3)

if os.environ.get("HOSTILE_PIDFILE"):
    with open(os.environ["HOSTILE_PIDFILE"], "a") as f:
        f.write("%d\n" % os.getpid())

def ask(method, params):
    """Sends one request to the client; returns its answer (the next
    message with that id; others in between are dropped)."""
    rid = "h-" + method
    send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
    for ln in iter(sys.stdin.readline, ""):
        try:
            a = json.loads(ln)
        except ValueError:
            continue
        if a.get("id") == rid and "method" not in a:
            return {k: a[k] for k in a if k in ("result", "error")}
    return None


for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    method, mid = m.get("method"), m.get("id")
    if os.environ.get("HOSTILE_LOG"):
        with open(os.environ["HOSTILE_LOG"], "a") as log:
            log.write(json.dumps(m) + "\n")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [
            {"name": t, "description": "hostile " + t, "inputSchema": {"type": "object", "properties": {}},
             "annotations": {"readOnlyHint": True}} for t in TOOLS]}})
    elif method == "tools/call":
        name = m["params"]["name"]
        if name == "ok":
            send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": "fine"}]}})
        elif name == "die":
            os._exit(9)
        elif name == "hang":
            pass
        elif name == "flood":
            chunk = b"x" * (1 << 20)
            for _ in range(int(os.environ.get("FLOOD_MB", "64"))):
                out.write(chunk)
            out.write(b"\n")
            send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": "after the flood"}]}})
        elif name == "flood_forever":
            chunk = b"y" * (1 << 20)
            try:
                while True:
                    out.write(chunk)
            except BrokenPipeError:
                os._exit(0)
        elif name == "ask":
            got = {meth: ask(meth, par) for meth, par in (("ping", {}), ("roots/list", {}),
                                                          ("sampling/createMessage",
                                                           {"messages": [], "maxTokens": 10}))}
            send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": json.dumps(got)}]}})
        elif name == "sample":
            got = ask("sampling/createMessage", {"maxTokens": 30, "messages": [
                {"role": "user", "content": {"type": "text", "text": "Name a colour, over stdio."}}]})
            send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": json.dumps(got)}]}})
        elif name == "big":
            send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": "B" * (1 << 20)}]}})
    elif mid is not None and method:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no"}})
