#!/usr/bin/python3
"""MCP elicitation and progress notifications (docs/mcp.md), against
tests/mcp/http_server.py through `switchboard mcp probe`, and progress in
a served run:

  - with --elicit-accept-defaults the client declares elicitation and
    answers an elicitation/create, on the call's stream or on the
    standalone GET stream it opens after initialize, with the schema's
    defaults; an answer to a call that comes on that stream ends the call;
    without it, it declares nothing, opens no GET and refuses;
  - a requested schema outside the specification's restriction (a nested
    object) is refused with the reason, never answered;
  - a call's progress notifications become its live output: probe prints
    them, a run writes them as tool.output; a flood is bounded in rate and
    one that goes back is not shown;
  - under serve, an elicitation/create during a run's tool call is an
    interaction of kind elicitation: `resolve --json` accepts it (the
    schema's defaults fill the rest), content that fails the schema is
    refused `invalid` naming the field, `--decline` and `--cancel` answer
    so, and one pending when serve restarts is expired as cancelled.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import SB_BIN, Server, check, cli, run, run_tests, tmpdir, wait_for  # noqa: E402
from sbagent import (LLM, LLM_ENV, Term, calls, call, llm_args, new_session, pending, prompt, results, tape,  # noqa: E402
                     wait_run)
from sbmcp import HttpMcp, http_run, mcp_config  # noqa: E402

DEFAULTS = {"name": "Ada", "age": 36, "score": 9.5, "ok": True, "color": "green"}


def probe(mcp, tool, args=None, elicit=True):
    """mcp probe against `mcp`, calling `tool`: (exit status, stdout)."""
    argv = [SB_BIN, "mcp", "probe", mcp.url, "--call", tool, "--args", json.dumps(args or {}), "--timeout", "10"]
    rc, out, err = run(argv + (["--elicit-accept-defaults"] if elicit else []), timeout=30)
    return rc, out + err


def answer_of(out):
    """The elicitation answer the server echoed in its result line."""
    line = [x for x in out.splitlines() if x.startswith("result ")]
    check(line, "no result line in:\n%s", out)
    return json.loads(line[0][len("result "):])


def initialize_capabilities(mcp):
    return [r["msg"]["params"]["capabilities"] for r in mcp.log()
            if r.get("msg", {}).get("method") == "initialize"][0]


def test_elicitation_on_the_call_stream_is_accepted_with_the_defaults():
    mcp = HttpMcp()
    try:
        rc, out = probe(mcp, "elicit")
        check(rc == 0, "probe failed (%d):\n%s", rc, out)
        ans = answer_of(out)
        check(ans.get("result") == {"action": "accept", "content": DEFAULTS}, "the answer: %r", ans)
        check("elicitation" in initialize_capabilities(mcp), "elicitation not declared: %r",
              initialize_capabilities(mcp))
    finally:
        mcp.stop()


def test_elicitation_on_the_standalone_stream_is_answered():
    mcp = HttpMcp(standalone=True)
    try:
        rc, out = probe(mcp, "elicit_get")
        check(rc == 0, "probe failed (%d):\n%s", rc, out)
        ans = answer_of(out)
        check(ans.get("result") == {"action": "accept", "content": DEFAULTS}, "the answer: %r", ans)
        gets = [r for r in mcp.log() if "get" in r]
        check(gets and gets[0]["get"] is None, "no standalone GET was opened: %r", gets)
    finally:
        mcp.stop()


def test_a_slow_standalone_stream_is_open_before_the_first_call():
    """The GET is answered 700 ms late, as on a loaded host: the client
    waits for it after initialize, so the call's elicitation finds it."""
    mcp = HttpMcp(standalone=True, get_delay_ms=700)
    try:
        rc, out = probe(mcp, "elicit_get")
        check(rc == 0, "probe failed (%d):\n%s", rc, out)
        check("no standalone stream" not in out, "the call came before the stream was open:\n%s", out)
        check(answer_of(out).get("result", {}).get("action") == "accept", "the answer:\n%s", out)
    finally:
        mcp.stop()


def test_an_answer_on_the_standalone_stream_ends_the_call():
    mcp = HttpMcp(standalone=True)
    try:
        t0 = time.monotonic()
        rc, out = probe(mcp, "via_standalone")
        took = time.monotonic() - t0
        check(rc == 0 and "result answered on the standalone stream" in out, "probe (%d):\n%s", rc, out)
        check(took < 5, "the call waited for its own stream: %.1f s", took)
    finally:
        mcp.stop()


def test_without_an_elicitor_nothing_is_declared_and_it_is_refused():
    mcp = HttpMcp(standalone=True)
    try:
        rc, out = probe(mcp, "elicit", elicit=False)
        ans = answer_of(out)
        check(ans.get("error", {}).get("code") == -32601, "not refused: %r", ans)
        check("elicitation" not in initialize_capabilities(mcp), "declared: %r", initialize_capabilities(mcp))
        rc, out = probe(mcp, "elicit_get", elicit=False)
        check("no standalone stream" in out, "a standalone stream was opened without elicitation:\n%s", out)
    finally:
        mcp.stop()


def test_a_schema_outside_the_restriction_is_refused_with_the_reason():
    mcp = HttpMcp()
    try:
        nested = {"type": "object", "properties": {"who": {"type": "object", "properties": {}}}}
        for schema, why in ((nested, "property 'who': not a string, number, integer or boolean"),
                            ({"type": "object", "properties": {"n": {"type": "integer", "default": "x"}}},
                             "its default is not an integer"),
                            ({"type": "array"}, "not an object with properties")):
            rc, out = probe(mcp, "elicit", {"requestedSchema": schema})
            ans = answer_of(out)
            err = ans.get("error", {})
            check(err.get("code") == -32602 and why in err.get("message", ""), "schema %r: %r", schema, ans)
    finally:
        mcp.stop()


def test_progress_notifications_are_the_calls_live_output():
    mcp = HttpMcp()
    try:
        rc, out = probe(mcp, "progress", {"n": 4, "gap_ms": 300}, elicit=False)
        lines = [x for x in out.splitlines() if x.startswith("progress: ")]
        check(lines == ["progress: %d/4 step %d" % (k, k) for k in range(1, 5)], "progress lines:\n%s", out)
        check("result done" in out, "no result:\n%s", out)
        # a flood: 60 in about 0.6 s, at most one each 250 ms shown
        rc, out = probe(mcp, "progress", {"n": 60, "gap_ms": 10}, elicit=False)
        lines = [x for x in out.splitlines() if x.startswith("progress: ")]
        check(1 <= len(lines) <= 10 and lines[0] == "progress: 1/60 step 1", "flood lines:\n%s", out)
        check("back" not in out, "a progress that went back was shown:\n%s", out)
        print("  figure: 60 progress notifications in ~0.6 s shown as %d lines" % len(lines))
    finally:
        mcp.stop()


def test_progress_in_a_run_is_written_as_tool_output():
    steps = [calls(("c_p", "mcp__h__progress", {"n": 3, "gap_ms": 300})), {"text": "done"}]
    with http_run(HttpMcp(), "progress", steps) as (srv, sid, entries):
        check(results(entries)["c_p"]["output"] == "done", "the call: %r", results(entries)["c_p"])
        live = "".join(e["body"].get("text", "") for e in entries
                       if e["kind"] == "tool.output" and e["body"].get("call_id") == "c_p")
        check("progress: 1/3 step 1\n" in live and "progress: 3/3 step 3\n" in live,
              "the tool.output of the call: %r", live)


def served(mcp, name, steps, server=None, **session):
    """serve with `mcp` as server h (its config's `server` fields too) and
    a model playing `steps`, a session (yolo, and `session`'s fields) and
    its prompt: (llm, srv, sid, run_id)."""
    llm = LLM()
    llm.script(name, steps)
    conf = dict({"url": mcp.url}, **(server or {}))
    srv = Server(args=llm_args(llm, name) + ["--mcp-config", mcp_config({"h": conf})],
                 env=LLM_ENV).start()
    sid = new_session(srv, tmpdir(), approval_policy="yolo", **session)
    return llm, srv, sid, prompt(srv, sid, "go")


def elicitation(srv, sid, seen=()):
    """The session's pending elicitation (not one of `seen`)."""
    ia = pending(srv, sid, timeout=20)
    check(ia["interaction_id"] not in seen, "the same interaction again: %r", ia)
    check(ia.get("kind") == "elicitation" and ia.get("summary") == "who are you?", "not an elicitation: %r", ia)
    check(json.loads(ia["schema"])["properties"]["age"]["default"] == 36, "its schema: %r", ia.get("schema"))
    return ia


def echoed(result):
    """The answer the server echoed as the call's output, without "jsonrpc"."""
    ans = json.loads(result["output"])
    ans.pop("jsonrpc", None)
    return ans


def test_under_serve_a_person_accepts_declines_and_cancels():
    mcp = HttpMcp()
    steps = [calls(("c_a", "mcp__h__elicit", {})), calls(("c_d", "mcp__h__elicit", {})),
             calls(("c_c", "mcp__h__elicit", {})), {"text": "done"}]
    llm, srv, sid, rid = served(mcp, "elicit_serve", steps)
    try:
        ia = elicitation(srv, sid)
        check("elicitation" in initialize_capabilities(mcp), "serve did not declare elicitation")
        iid = ia["interaction_id"]
        rc, out, err = cli(srv, "interaction", iid)
        check(rc == 0 and "who are you?" in out and "age" in out and "36" in out, "interaction (%d):\n%s%s",
              rc, out, err)
        # content that fails the schema: refused, the field named, still pending
        for bad, why in (('{"age": "old"}', "'age' is not an integer"), ('{"who": 1}', "'who' is not one of"),
                         ('{"color": "blue"}', "'color' is not one of its choices")):
            rc, out, err = cli(srv, "resolve", iid, "--json", bad)
            check(rc != 0 and why in out + err, "content %s (%d):\n%s%s", bad, rc, out, err)
        check(call(srv, "interact.get", {"interaction_id": iid})["interaction"]["status"] == "pending",
              "a refused answer resolved it")
        rc, out, err = cli(srv, "resolve", iid, "--json", '{"name": "Bob", "ok": false}')
        check(rc == 0, "resolve --json (%d):\n%s%s", rc, out, err)
        got = call(srv, "interact.get", {"interaction_id": iid})["interaction"]
        want = dict(DEFAULTS, name="Bob", ok=False)
        check(got["action"] == "accept" and json.loads(got["content"]) == want, "the record: %r", got)
        ia2 = elicitation(srv, sid, seen=(iid,))
        rc, out, err = cli(srv, "resolve", ia2["interaction_id"], "--decline")
        check(rc == 0, "resolve --decline (%d):\n%s%s", rc, out, err)
        ia3 = elicitation(srv, sid, seen=(iid, ia2["interaction_id"]))
        rc, out, err = cli(srv, "resolve", ia3["interaction_id"], "--cancel")
        check(rc == 0, "resolve --cancel (%d):\n%s%s", rc, out, err)
        r = wait_run(srv, rid, timeout=40)
        check(r["status"] == "completed", "the run ended %s: %s", r["status"], r.get("reason"))
        entries = tape(srv, sid)
        res = results(entries)
        check(echoed(res["c_a"]) == {"result": {"action": "accept", "content": want}},
              "accepted: %r", res["c_a"])
        check(echoed(res["c_d"]) == {"result": {"action": "decline"}}, "declined: %r", res["c_d"])
        check(echoed(res["c_c"]) == {"result": {"action": "cancel"}}, "cancelled: %r", res["c_c"])
        resolved = [e["body"] for e in entries if e["kind"] == "approval.resolved"]
        check([b.get("action") for b in resolved] == ["accept", "decline", "cancel"], "the tape: %r", resolved)
        check(json.loads(resolved[0]["content"]) == want, "the tape's content: %r", resolved[0])
    finally:
        srv.stop()
        llm.stop()
        mcp.stop()


def test_a_person_may_answer_after_the_call_s_own_timeout():
    # The call's timeout_s (2 s here) counts the server's time, not the
    # person's: an answer after 3.5 s still reaches the server, which
    # then answers the call.
    mcp = HttpMcp()
    steps = [calls(("c_slow", "mcp__h__elicit", {})), {"text": "done"}]
    llm, srv, sid, rid = served(mcp, "elicit_slow", steps, server={"timeout_s": 2})
    try:
        ia = elicitation(srv, sid)
        time.sleep(3.5)
        rc, out, err = cli(srv, "resolve", ia["interaction_id"], "--decline")
        check(rc == 0, "resolve --decline (%d):\n%s%s", rc, out, err)
        r = wait_run(srv, rid, timeout=40)
        check(r["status"] == "completed", "the run ended %s: %s", r["status"], r.get("reason"))
        res = results(tape(srv, sid))["c_slow"]
        check(res.get("ok") is not False and echoed(res) == {"result": {"action": "decline"}},
              "the call after a slow answer: %r", res)
    finally:
        srv.stop()
        llm.stop()
        mcp.stop()


def test_chat_asks_field_by_field_with_the_defaults():
    mcp = HttpMcp()
    llm, srv, sid, rid = served(mcp, "elicit_chat", [calls(("c_t", "mcp__h__elicit", {})), {"text": "done"}])
    t = Term(srv, sid)
    try:
        t.expect(r"question from an MCP server\s+(ia_\w+)")
        t.expect(r"who are you\?")
        t.expect(r"name \(string, Enter: \"Ada\"\) > ")
        t.type("Grace\r")
        t.expect(r"age \(integer, Enter: 36\) > ")
        t.type("old\r")
        t.expect(r"age takes a whole number")
        t.type("\r")
        t.expect(r"score \(number, Enter: 9.5\) > ")
        t.type("\r")
        t.expect(r"ok \(boolean, Enter: true\) > ")
        t.type("n\r")
        t.expect(r'color \(string of \["red","green"\], Enter: "green"\) > ')
        t.type("blue\r")
        # the schema refuses it at interact: said, and asked again from the top
        t.expect(r"not taken: content: 'color' is not one of its choices")
        t.expect(r"name \(string")
        for answer in ("Grace", "", "", "n", "red"):
            t.type(answer + "\r")
        t.expect(r"approved ia_\w+: accept")
        r = wait_run(srv, rid, timeout=40)
        check(r["status"] == "completed", "the run ended %s", r["status"])
        want = dict(DEFAULTS, name="Grace", ok=False, color="red")
        check(echoed(results(tape(srv, sid))["c_t"]) == {"result": {"action": "accept", "content": want}},
              "the server got: %r", results(tape(srv, sid))["c_t"])
    finally:
        t.kill()
        srv.stop()
        llm.stop()
        mcp.stop()


def test_nobody_answers_before_the_deadline_and_the_server_hears_cancel():
    mcp = HttpMcp()
    llm, srv, sid, rid = served(mcp, "elicit_deadline", [calls(("c_x", "mcp__h__elicit", {})), {"text": "done"}],
                                approval_deadline_s=1)
    try:
        iid = elicitation(srv, sid)["interaction_id"]
        r = wait_run(srv, rid, timeout=40)
        check(r["status"] == "completed", "the run ended %s", r["status"])
        got = call(srv, "interact.get", {"interaction_id": iid})["interaction"]
        check(got["status"] == "expired" and got["action"] == "cancel" and got["resolved_by"] == "deadline",
              "at the deadline: %r", got)
        check(echoed(results(tape(srv, sid))["c_x"]) == {"result": {"action": "cancel"}}, "the server got: %r",
              results(tape(srv, sid))["c_x"])
    finally:
        srv.stop()
        llm.stop()
        mcp.stop()


def test_a_run_cancelled_while_it_waits_cancels_its_elicitation():
    mcp = HttpMcp()
    llm, srv, sid, rid = served(mcp, "elicit_cancel", [calls(("c_k", "mcp__h__elicit", {})), {"text": "done"}])
    try:
        iid = elicitation(srv, sid)["interaction_id"]
        call(srv, "run.cancel", {"run_id": rid})
        wait_run(srv, rid, timeout=40)
        got = call(srv, "interact.get", {"interaction_id": iid})["interaction"]
        check(got["status"] == "rejected" and got["action"] == "cancel" and got["resolved_by"] == "cancel",
              "after the run's cancel: %r", got)
    finally:
        srv.stop()
        llm.stop()
        mcp.stop()


def tool_calls(mcp):
    """The tools/call requests the server received."""
    return [r for r in mcp.log() if (r.get("msg") or {}).get("method") == "tools/call"]


def elicitations(srv, sid):
    return [ia for ia in call(srv, "interact.list", {"session_id": sid})["interactions"]
            if ia.get("kind") == "elicitation"]


def restarted_and_answered(how, answer_at_once=False):
    """An elicitation pending when serve stops (`how`: stop or kill -9):
    after the start it is still pending, the run is queued again and its
    executor calls the tool again; the server's question, asked again,
    finds the same interaction, and the person's answer (given once the
    question is back, or at once after the start) is what the server
    gets. One interaction in all; the call's result is the answer."""
    mcp = HttpMcp()
    llm, srv, sid, rid = served(mcp, "elicit_restart_" + how, [calls(("c_r", "mcp__h__elicit", {})),
                                                              {"text": "done"}])
    try:
        iid = elicitation(srv, sid)["interaction_id"]
        if how == "kill":
            srv.proc.kill()
            srv.proc.wait(10)
        else:
            srv.stop()
        srv.start()
        got = call(srv, "interact.get", {"interaction_id": iid})["interaction"]
        check(got["status"] == "pending", "after the restart: %r", got)
        if not answer_at_once:
            # the tool is called again, and asks again: the same interaction
            wait_for(lambda: len(tool_calls(mcp)) >= 2, 30, "the tool to be called again")
            check(elicitation(srv, sid)["interaction_id"] == iid, "another interaction")
        rc, out, err = cli(srv, "resolve", iid, "--json", '{"name": "Bob"}')
        check(rc == 0, "resolve --json after the restart (%d):\n%s%s", rc, out, err)
        r = wait_run(srv, rid, timeout=40)
        check(r["status"] == "completed", "the run ended %s: %s", r["status"], r.get("reason"))
        res = results(tape(srv, sid))["c_r"]
        check(echoed(res) == {"result": {"action": "accept", "content": dict(DEFAULTS, name="Bob")}},
              "the server got: %r", res)
        check([ia["interaction_id"] for ia in elicitations(srv, sid)] == [iid], "interactions: %r",
              elicitations(srv, sid))
        check(len(tool_calls(mcp)) == 2, "tools/call %d times", len(tool_calls(mcp)))
    finally:
        srv.stop()
        llm.stop()
        mcp.stop()


def test_an_elicitation_pending_at_a_clean_stop_is_answered_after_the_start():
    restarted_and_answered("stop")


def test_an_elicitation_pending_at_a_kill9_is_answered_after_the_start():
    restarted_and_answered("kill")


def test_an_answer_given_right_after_the_start_reaches_the_server():
    restarted_and_answered("stop", answer_at_once=True)


def test_a_deadline_that_passes_while_serve_is_down_expires_it():
    mcp = HttpMcp()
    llm, srv, sid, rid = served(mcp, "elicit_down", [calls(("c_z", "mcp__h__elicit", {})), {"text": "done"}],
                                approval_deadline_s=2)
    try:
        iid = elicitation(srv, sid)["interaction_id"]
        srv.stop()
        time.sleep(2.5)
        srv.start()
        got = call(srv, "interact.get", {"interaction_id": iid})["interaction"]
        check(got["status"] == "expired" and got["action"] == "cancel" and got["resolved_by"] == "deadline",
              "after a restart past the deadline: %r", got)
        rc, out, err = cli(srv, "resolve", iid, "--json", "{}")
        check(rc != 0 and '"code":"conflict"' in out + err, "a late answer (%d):\n%s%s", rc, out, err)
        r = wait_run(srv, rid, timeout=40)
        check(r["status"] in ("completed", "interrupted"), "the run ended %s: %s", r["status"], r.get("reason"))
        if r["status"] == "completed":
            check(echoed(results(tape(srv, sid))["c_z"]) == {"result": {"action": "cancel"}}, "the server got: %r",
                  results(tape(srv, sid))["c_z"])
    finally:
        srv.stop()
        llm.stop()
        mcp.stop()


if __name__ == "__main__":
    run_tests(globals())
