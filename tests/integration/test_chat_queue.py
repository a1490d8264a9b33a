#!/usr/bin/python3
"""`switchboard chat` while a run streams (issue 14's chat part): a typed line
is queued and runs after the current run; a line starting with '!' steers the
running run, and the model's next request carries it.

It needs the prompt queue (session.prompt modes, session.queue.*): on a build
without it, the script is skipped and says so.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import check, run_tests, sb, skip, tmpdir, wait_for  # noqa: E402
from sbagent import LLM, Term, call, llm_server, new_session, wait_run  # noqa: E402


def test_queue_and_steer_while_a_run_streams():
    llm = LLM()
    llm.script("q", [
        {"text": "working on it", "tool_calls": [{"name": "shell", "arguments": {"command": "sleep 3"},
                                                  "call_id": "c1"}]},
        {"text": "first run done"},
        {"text": "second run done"}])
    srv = llm_server(llm, "q")
    sid = new_session(srv, tmpdir(), approval_policy="yolo")
    t = Term(srv, sid)
    try:
        t.expect(r"> ")
        t.type("first task\r")
        t.expect(r"working on it")
        t.expect(r"queue> ")
        t.type("!also mention the README\r")
        t.expect(r"steering: the model reads it before its next step")
        t.type("second task\r")
        t.expect(r"queued \(#1\)")
        t.expect(r"first run done")
        first = call(srv, "run.list", {"session_id": sid})["runs"][-1]
        t.expect(r"run %s completed" % first["run_id"])
        # the queued prompt starts its own run, shown from its prompt
        t.expect(r"> second task")
        t.expect(r"second run done")
        runs = wait_for(lambda: [r for r in call(srv, "run.list", {"session_id": sid})["runs"]
                                 if r["status"] == "completed"] if len(call(srv, "run.list", {"session_id": sid})
                                                                       ["runs"]) == 2 else None,
                        20, "two runs")
        for r in runs:
            wait_run(srv, r["run_id"])
        reqs = llm.requests("q")
        check(len(reqs) == 3, "%d model requests", len(reqs))
        check("also mention the README" in json.dumps(reqs[1]["json"]), "the steer did not reach the model: %s",
              json.dumps(reqs[1]["json"])[:2000])
        check("second task" in json.dumps(reqs[2]["json"]), "the queued prompt did not run")
        t.type(b"\x04")
        check(t.wait_exit() == 0, "exit %r", t.code)
    finally:
        t.kill()
        srv.stop()
        llm.stop()


if __name__ == "__main__":
    rc, out, _ = sb("schemas")
    if rc == 0 and "session.queue.list" not in out:
        skip("this build has no prompt queue yet (session.prompt modes and session.queue.*, issue 14's "
             "queue part); nothing here could queue or steer")
    run_tests(globals())
