#!/usr/bin/python3
"""MCP tools under each approval policy (issue 16, with approvals of
issue 10): a real MCP server's tool (server-everything's echo, which its
server calls read-only) is never run without a person's yes under `auto`
and `interactive`:

  - auto: the call asks (approval.requested names mcp__every__echo); an
    approval runs it, and the run completes with its result;
  - interactive: a rejection does not run it; the run goes on;
  - a session rule `mcp__every__*` allow runs it without asking.

Skipped, saying why, on a build whose executor does not ask yet.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import check, run_tests, skip, tmpdir, wait_for  # noqa: E402
from sbagent import (EVERYTHING, LLM, call, calls, config, everything, need_everything, new_session,  # noqa: E402
                     prompt, results, serve_mcp, tape, wait_run)


def asked_or_done(server, sid, run_id):
    """The approval.requested of the run, or None when the run ended
    without asking (an executor that does not ask)."""
    box = {}

    def cond():
        for e in tape(server, sid):
            if e["kind"] == "approval.requested" and e.get("run_id") == run_id:
                box["ask"] = e
                return True
        run = call(server, "run.get", {"run_id": run_id})["run"]
        return run["status"] in ("completed", "failed", "cancelled")
    wait_for(cond, 30, "the run to ask or end")
    return box.get("ask")


def test_mcp_tools_ask_under_auto_and_interactive():
    need_everything()
    llm = LLM()
    server = serve_mcp(llm, "mcpa", config({"every": everything()}))
    for policy, decision in (("auto", "approve"), ("interactive", "reject")):
        cid = "c_" + policy
        llm.script("mcpa", [calls((cid, "mcp__every__echo", {"message": "asked " + policy})), {"text": "ok"}])
        sid = new_session(server, tmpdir(), approval_policy=policy)
        run_id = prompt(server, sid, "echo")
        ask = asked_or_done(server, sid, run_id)
        if ask is None:
            r = results(tape(server, sid)).get(cid)
            check(r and r["ok"] is False, "%s ran an MCP tool without asking: %r", policy, r)
            skip("the executor does not ask for approvals yet (the policy part of issue 10): "
                 "MCP tools are refused under auto and interactive, as test_mcp.py checks")
        check(ask["body"]["tool"] == "mcp__every__echo", "asked about %r", ask["body"])
        check("says it is read-only" in ask["body"].get("summary", ""),
              "the server's readOnlyHint is not shown to the person: %r", ask["body"])
        call(server, "interact.resolve", {"interaction_id": ask["body"]["interaction_id"], "decision": decision})
        run = wait_run(server, run_id, timeout=30)
        check(run["status"] == "completed", "run %r", run)
        r = results(tape(server, sid))[cid]
        if decision == "approve":
            check(r["ok"] is True and r["output"] == "Echo: asked auto", "approved: %r", r)
        else:
            check(r["ok"] is False and "Echo:" not in r["output"], "rejected yet run: %r", r)
    server.stop()
    llm.stop()


def test_rule_allows_a_servers_tools():
    need_everything()
    llm = LLM()
    llm.script("mcpr", [calls(("c_rule", "mcp__every__echo", {"message": "by rule"})), {"text": "ok"}])
    server = serve_mcp(llm, "mcpr", config({"every": everything()}))
    m = server.control().request("session.create", {"workspace": tmpdir(), "approval_policy": "auto",
                                                     "rules": [{"tool": "mcp__every__*", "pattern": "*",
                                                                "action": "allow"}]})
    if m.type != "session.create.ok":
        skip("sessions have no approval rules yet (the policy part of issue 10): %s" % json.dumps(m.body))
    sid = m.body["session"]["session_id"]
    run = wait_run(server, prompt(server, sid, "echo"), timeout=30)
    check(run["status"] == "completed", "run %r", run)
    entries = tape(server, sid)
    check(not any(e["kind"] == "approval.requested" for e in entries), "a rule-allowed call asked")
    r = results(entries)["c_rule"]
    check(r["ok"] is True and r["output"] == "Echo: by rule", "rule: %r", r)
    server.stop()
    llm.stop()


if __name__ == "__main__":
    check(EVERYTHING, "no server path")
    run_tests(globals())
