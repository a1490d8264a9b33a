#!/usr/bin/python3
"""MCP servers over streamable HTTP (tests/mcp/http_server.py) and MCP
errors (docs/mcp.md), each a defect found by trying switchboard:

  - a server that pings the client inside a tools/call gets its answer at
    once, its roots/list the session's workspace, its sampling request
    "method not found" with the reason, and its elicitation with a schema
    that is not an object with properties "invalid params" (serve asks a
    person, but only what the restriction allows);
  - a call's SSE stream cut before its answer is resumed with
    Last-Event-ID after the server's retry, and the call completes; one
    whose resumption is refused (404) fails, and is never sent again;
  - a server that forgot our session (404) gets a new one and the call once
    more; one that wants authorization (401) says so; a server that dies
    during a call is named in a sentence that reads.

(Found by trying switchboard: each test fails on the code before its fix.)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import ROOT, Server, check, cli, run_tests, tmpdir  # noqa: E402
from sbagent import LLM, LLM_ENV, calls, llm_args, new_session, prompt, results, tape, wait_run  # noqa: E402
from sbmcp import HttpMcp, http_run, mcp_config  # noqa: E402


def test_http_mcp_server_requests_are_answered_during_a_call():
    steps = [calls(("c_ping", "mcp__h__ping_me", {}), ("c_ask", "mcp__h__ask", {})), {"text": "done"}]
    with http_run(HttpMcp(), "ping", steps, "ping") as (srv, sid, entries):
        res = results(entries)
        ping = res["c_ping"]
        check(ping["ok"] is True and 'ping answer {"jsonrpc": "2.0", "result": {}}' in ping["output"],
              "ping: %r", ping)
        ms = int(ping["output"].rsplit(" in ", 1)[1].split()[0])
        check(ms < 5000, "the ping took %d ms to be answered", ms)
        ask = res["c_ask"]
        check("sampling/createMessage: -32601" in ask["output"], "sampling not refused as unknown: %r", ask)
        check("elicitation/create: -32602" in ask["output"], "a schema without properties not refused: %r", ask)
        check('roots/list: [{"uri": "file://' in ask["output"] and '"name": "workspace"' in ask["output"],
              "roots/list not answered with the workspace: %r", ask)
        print("  figure: ping answered in %d ms; %s" % (ms, ask["output"]))


def test_http_mcp_stream_cut_mid_call_is_resumed_and_the_call_completes():
    mcp = HttpMcp()
    steps = [calls(("c_cut", "mcp__h__cut", {})), {"text": "done"}]
    with http_run(mcp, "cut", steps) as (srv, sid, entries):
        res = results(entries)["c_cut"]
        check(res["ok"] is True and res["output"] == "resumed", "the cut call: %r", res)
        log = mcp.log()
        cut = [x["cut"] for x in log if "cut" in x]
        # serve declares elicitation, so it opens the standalone stream
        # too (a GET without Last-Event-ID); the resumption is the other
        gets = [x for x in log if x.get("get")]
        check(len(cut) == 1 and len(gets) == 1 and gets[0]["get"] == "cut-1",
              "one cut, one GET with Last-Event-ID cut-1: %r", log[-4:])
        waited = gets[0]["ms"] - cut[0]
        check(waited >= 250, "resumed %d ms after the cut, before the server's retry of 300 ms", waited)
        print("  figure: resumed %d ms after the cut (retry: 300)" % waited)


def test_http_mcp_stream_whose_resumption_is_refused_is_not_sent_again():
    mcp = HttpMcp()
    steps = [calls(("c_cut", "mcp__h__cut_forget", {})), {"text": "done"}]
    with http_run(mcp, "cutf", steps) as (srv, sid, entries):
        res = results(entries)["c_cut"]
        check(res["ok"] is False and "HTTP 404 on resuming the stream" in res["output"]
              and "not retried" in res["output"], "the call: %r", res)
        sent = [x for x in mcp.log() if x.get("msg", {}).get("method") == "tools/call"]
        check(len(sent) == 1, "tools/call sent %d times after a refused resumption", len(sent))


def test_http_mcp_session_forgotten_is_initialized_again_and_the_call_retried_once():
    mcp = HttpMcp()
    steps = [calls(("c_forget", "mcp__h__forget", {})), calls(("c_ok", "mcp__h__ok", {})), {"text": "done"}]
    with http_run(mcp, "fg", steps) as (srv, sid, entries):
        res = results(entries)
        check(res["c_ok"]["ok"] is True and res["c_ok"]["output"] == "fine", "the call after the 404: %r",
              res["c_ok"])
        log = mcp.log()
        inits = [x for x in log if x.get("msg", {}).get("method") == "initialize"]
        oks = [x for x in log if x.get("msg", {}).get("method") == "tools/call"
               and x["msg"]["params"]["name"] == "ok"]
        check(len(inits) == 2 and len(oks) == 2 and any(x.get("status") == 404 for x in log),
              "initialize %d times, ok sent %d times: %r", len(inits), len(oks), log[-6:])


def test_http_mcp_server_that_needs_authorization_says_so():
    steps = [calls(("c_ok", "mcp__h__ok", {})), {"text": "done"}]
    with http_run(HttpMcp(token="tok-7"), "au", steps) as (srv, sid, entries):
        notes = [e["body"].get("text", "") for e in entries if e["kind"] == "note"]
        check(any("needs authorization" in n and "went away" not in n for n in notes), "the notes: %r", notes)
        out = results(entries)["c_ok"]["output"]
        check("needs authorization" in out and "went away" not in out, "the call: %r", out)
        rc, lst, err = cli(srv, "mcp", "list")
        check("needs authorization" in lst, "mcp list:\n%s", lst)


def test_a_server_that_dies_during_a_call_is_named_in_a_sentence():
    hostile = os.path.join(ROOT, "tests", "mcp", "hostile_server.py")
    llm = LLM()
    llm.script("die", [calls(("c_die", "mcp__conf__die", {})), {"text": "done"}])
    cfg = mcp_config({"conf": {"command": "/usr/bin/python3", "args": [hostile]}})
    srv = Server(args=llm_args(llm, "die") + ["--mcp-config", cfg], env=LLM_ENV).start()
    try:
        sid = new_session(srv, tmpdir(), approval_policy="yolo")
        r = wait_run(srv, prompt(srv, sid, "go"), timeout=40)
        check(r["status"] == "completed", "the run ended %s: %s", r["status"], r.get("reason"))
        out = results(tape(srv, sid))["c_die"]["output"]
        check(out.startswith("the MCP server conf went away during the call") and "effect is unknown" in out
              and "conf it" not in out, "the call's error: %r", out)
        body = llm.requests("die")[1]["body"]
        check("error: the MCP server conf went away" in body and "error: error" not in body,
              "the model reads: %r", body[body.find("went away") - 80:body.find("went away") + 40])
    finally:
        srv.stop()
        llm.stop()


if __name__ == "__main__":
    run_tests(globals())
