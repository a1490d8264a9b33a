#!/usr/bin/python3
"""Defects found by trying switchboard (task i20): each test reproduces one
with real processes (tests/llm_server.py over HTTP, the real MCP servers of
tests/mcp) and fails on the code before its fix.

  - compaction after a provider's overflow, with a provider whose token
    count is far below bytes / 4 (Anthropic counts cached tokens apart):
    the run completes, every token figure is in range;
  - an MCP server over streamable HTTP (tests/mcp/http_server.py) that
    pings the client inside a tools/call gets its answer at once, and its
    elicitation, sampling and roots requests get "method not found";
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import ROOT, Proc, Server, check, cli, read_jsonl, run_tests, tmpdir, wait_for  # noqa: E402
from test_runs_e2e import LLM, LLM_ENV, call, llm_args, new_session, prompt, results, tape, wait_run  # noqa: E402
from test_compaction import OUTPUT, SUMMARY, WINDOW, check_window, compactions, with_tools, workspace  # noqa: E402

MAX_TOKENS = 1 << 40            # schemas: a token figure above this is refused
HTTP_MCP = os.path.join(ROOT, "tests", "mcp", "http_server.py")


class HttpMcp:
    """tests/mcp/http_server.py on an ephemeral loopback port."""

    def __init__(self, token=None):
        d = tmpdir()
        self.portfile, self.logfile = os.path.join(d, "port"), os.path.join(d, "mcp.jsonl")
        argv = ["/usr/bin/python3", HTTP_MCP, "--portfile", self.portfile, "--log", self.logfile]
        self.proc = Proc(argv + (["--token", token] if token else []), os.path.join(d, "mcp.log"))
        wait_for(lambda: os.path.exists(self.portfile), 10, "the HTTP MCP server to listen")
        with open(self.portfile) as f:
            self.url = "http://127.0.0.1:%s/mcp" % f.read().strip()

    def log(self):
        return read_jsonl(self.logfile)

    def stop(self):
        self.proc.stop()


def mcp_config(servers):
    path = os.path.join(tmpdir(), "mcp.json")
    with open(path, "w") as f:
        json.dump({"mcpServers": servers}, f)
    return path


def tool_turn(*specs):
    return {"tool_calls": [{"name": n, "arguments": a, "call_id": c} for c, n, a in specs]}


# ---------------------------------------------------------------------------
# 1. compaction figures

def test_overflow_with_a_low_token_count_compacts_and_completes():
    llm = LLM()
    ws = workspace(6)
    # each turn reports 2,000 input tokens, far below its bytes / 4: the
    # calibrated estimate is smaller than what eliding saves
    usage = {"input_tokens": 2000, "output_tokens": 5}
    turns = [{"tool_calls": [{"name": "read_file", "arguments": {"path": "f%02d.txt" % i}}], "usage": usage}
             for i in range(6)]
    turns.append({"text": "read all six", "usage": usage})
    llm.control({"op": "script", "name": "low", "turns": turns, "no_tools": {"text": SUMMARY}})
    url = "http://127.0.0.1:%d/script=low/window=%d/v1" % (llm.port, WINDOW)
    # no --context-window: the window is taken as the default, much larger
    # than the server's, so only the provider's overflow error says so
    srv = Server(args=["--llm", "responses", "--llm-url", url, "--model", "m"], env=LLM_ENV).start()
    try:
        sid = new_session(srv, ws, approval_policy="yolo")
        r = wait_run(srv, prompt(srv, sid, "Read f00.txt to f05.txt."), timeout=60)
        check(r["status"] == "completed", "the run ended %s: %s", r["status"], r.get("reason"))
        reqs = with_tools(llm.requests("low"))
        check(any(q["status"] == 400 for q in reqs), "the provider never overflowed: %r",
              [q["status"] for q in reqs])
        comp = compactions(tape(srv, sid))
        check(comp, "no compaction on the tape")
        for c in comp:
            b = c["body"]
            check(0 < b["tokens_after"] < MAX_TOKENS and 0 < b["tokens_before"] < MAX_TOKENS,
                  "token figures out of range: %r", {k: b[k] for k in ("tokens_before", "tokens_after", "method")})
            check(b["tokens_after"] <= b["tokens_before"], "a compaction grew the context: %r",
                  {k: b[k] for k in ("tokens_before", "tokens_after", "method")})
        for e in tape(srv, sid):
            if e["kind"] == "usage":
                ct = e["body"].get("context_tokens", 0)
                check(ct < MAX_TOKENS, "usage context_tokens out of range: %r", e["body"])
        print("  figure: compactions=%s" % [(c["body"]["method"], c["body"]["tokens_before"], c["body"]["tokens_after"])
                                          for c in comp])
    finally:
        srv.stop()
        llm.stop()


# ---------------------------------------------------------------------------
# 2. server-to-client requests over streamable HTTP

def test_http_mcp_server_requests_are_answered_during_a_call():
    mcp = HttpMcp()
    llm = LLM()
    llm.script("ping", [tool_turn(("c_ping", "mcp__h__ping_me", {}), ("c_ask", "mcp__h__ask", {})),
                        {"text": "done"}])
    srv = Server(args=llm_args(llm, "ping") + ["--mcp-config", mcp_config({"h": {"url": mcp.url}})],
                 env=LLM_ENV).start()
    try:
        sid = new_session(srv, tmpdir(), approval_policy="yolo")
        r = wait_run(srv, prompt(srv, sid, "ping"), timeout=40)
        check(r["status"] == "completed", "the run ended %s: %s", r["status"], r.get("reason"))
        res = results(tape(srv, sid))
        ping = res["c_ping"]
        check(ping["ok"] is True and 'ping answer {"jsonrpc": "2.0", "result": {}}' in ping["output"],
              "ping: %r", ping)
        ms = int(ping["output"].rsplit(" in ", 1)[1].split()[0])
        check(ms < 5000, "the ping took %d ms to be answered", ms)
        ask = res["c_ask"]
        for method in ("elicitation/create", "sampling/createMessage", "roots/list"):
            check("%s: -32601" % method in ask["output"], "%s not refused as unknown: %r", method, ask)
        print("  figure: ping answered in %d ms; %s" % (ms, ask["output"]))
    finally:
        srv.stop()
        llm.stop()
        mcp.stop()


if __name__ == "__main__":
    run_tests(globals())
