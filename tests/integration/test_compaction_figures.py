#!/usr/bin/python3
"""Compaction's figures (docs/compaction.md), each a defect found by trying
switchboard and failing on the code before its fix:

  - compaction after a provider's overflow, with a provider whose token
    count is far below bytes / 4 (Anthropic counts cached tokens apart):
    the run completes, every token figure is in range;
  - `compact` says why nothing was compacted truly, and gives one figure
    for the size after.

(Found by trying switchboard: each test fails on the code before its fix.)
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Server, check, cli, run_tests, tmpdir  # noqa: E402
from sbagent import (LLM, LLM_ENV, SUMMARY, WINDOW, compactions, llm_args, new_session, prompt, tape,  # noqa: E402
                     wait_run, with_tools, workspace)


MAX_TOKENS = 1 << 40            # schemas: a token figure above this is refused


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


def test_compact_says_what_is_true_and_one_after_figure():
    llm = LLM()
    llm.control({"op": "script", "name": "cm", "turns": [{"text": "one"}, {"text": "two"}, {"text": "three"},
                                                        {"text": "four"}],
                 "no_tools": {"text": SUMMARY}})
    srv = Server(args=llm_args(llm, "cm") + ["--context-window", "4000"], env=LLM_ENV).start()
    try:
        sid = new_session(srv, tmpdir())
        for text in ("first", "second"):
            check(wait_run(srv, prompt(srv, sid, text), timeout=30)["status"] == "completed", "a short run")
        rc, out, err = cli(srv, "compact", sid)
        check(rc == 0, "compact exited %d: %s %s", rc, out, err)
        check("only the newest turn" not in out and "fits in the recent turns" in out,
              "compact on two short turns says:\n%s", out)
        # large turns: a summary, and the same figure after it everywhere
        for text in ("third " + "c" * 3000, "fourth " + "d" * 3000):
            check(wait_run(srv, prompt(srv, sid, text), timeout=30)["status"] == "completed", "a long run")
        rc, out, err = cli(srv, "compact", sid)
        check(rc == 0, "compact exited %d: %s %s", rc, out, err)
        m = re.search(r"context compacted \(summarized\): (\d+) → (\d+) tokens", out)
        check(m, "no compaction line:\n%s", out)
        figures = set(re.findall(r"about (\d+) tokens", out))
        check(figures == {m.group(2)}, "after figures %r besides the compaction's %s:\n%s", figures, m.group(2), out)
    finally:
        srv.stop()
        llm.stop()


if __name__ == "__main__":
    run_tests(globals())
