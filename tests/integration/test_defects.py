#!/usr/bin/python3
"""Defects found by trying switchboard (task i20): each test reproduces one
with real processes (tests/llm_server.py over HTTP, the real MCP servers of
tests/mcp) and fails on the code before its fix.

  - compaction after a provider's overflow, with a provider whose token
    count is far below bytes / 4 (Anthropic counts cached tokens apart):
    the run completes, every token figure is in range;
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Server, check, cli, run_tests, tmpdir, wait_for  # noqa: E402
from test_runs_e2e import LLM, LLM_ENV, call, new_session, prompt, tape, wait_run  # noqa: E402
from test_compaction import OUTPUT, SUMMARY, WINDOW, check_window, compactions, with_tools, workspace  # noqa: E402

MAX_TOKENS = 1 << 40            # schemas: a token figure above this is refused


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


if __name__ == "__main__":
    run_tests(globals())
