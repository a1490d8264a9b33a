#!/usr/bin/python3
"""A call to a tool the session does not offer is answered at once with
"unknown tool" and the tools it has, never put to a person.

(Found by trying switchboard: each test fails on the code before its fix.)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import check, run_tests, sb, tmpdir  # noqa: E402
from sbagent import LLM, llm_server, new_session, results, tape  # noqa: E402


def test_an_unknown_tool_is_answered_at_once_and_never_asked_about():
    llm = LLM()
    llm.script("unk", [{"tool_calls": [{"name": "mcp__fs__list_directory", "arguments": {"path": "."},
                                        "call_id": "c_unk"},
                                       {"name": "made_up_tool", "arguments": {}, "call_id": "c_made"}]},
                       {"text": "sorry"}])
    srv = llm_server(llm, "unk")
    try:
        sid = new_session(srv, tmpdir(), approval_policy="auto", mcp_servers=[])
        rc, out, err = sb("prompt", sid, "list the folder", "--follow", "--data", srv.data, timeout=60)
        check(rc == 0, "prompt --follow exited %d:\n%s%s", rc, out, err)
        entries = tape(srv, sid)
        check(not [e for e in entries if e["kind"] == "approval.requested"], "a person was asked about it")
        res = results(entries)
        for cid, name in (("c_unk", "mcp__fs__list_directory"), ("c_made", "made_up_tool")):
            r = res[cid]
            check(r["ok"] is False and ("unknown tool %s" % name) in r["output"] and "read_file" in r["output"]
                  and not r.get("refused") and r.get("mutating") is False, "the result of %s: %r", name, r)
        # the model was told, in its next request
        outs = [i for i in llm.requests("unk")[1]["json"]["input"] if i.get("type") == "function_call_output"]
        check(len(outs) == 2 and all("unknown tool" in str(o.get("output")) for o in outs), "the model got %r", outs)
        check("error: error" not in out and "error: error" not in llm.requests("unk")[1]["body"],
              "an error said twice:\n%s", out)
        check(out.count("unknown tool mcp__fs__list_directory") == 1, "the error is not printed once:\n%s", out)
    finally:
        srv.stop()
        llm.stop()


if __name__ == "__main__":
    run_tests(globals())
