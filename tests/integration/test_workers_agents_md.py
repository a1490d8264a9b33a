#!/usr/bin/python3
"""A worker that ran runs with an AGENTS.md exits clean (under ASan, with
leak detection, a leak of its text fails the exit status).

(Found by trying switchboard: each test fails on the code before its fix.)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Server, check, run_tests, tmpdir  # noqa: E402
from sbagent import LLM, LLM_ENV, llm_args, new_session, session_prompt, start_worker, wait_run  # noqa: E402


def test_a_worker_frees_each_runs_agents_md():
    ws = tmpdir()
    with open(os.path.join(ws, "AGENTS.md"), "w") as f:
        f.write("WORKER-RULE: keep it short\n")
    llm = LLM()
    llm.script("wmd", [{"text": "one"}, {"text": "two"}])
    env = dict(LLM_ENV, XDG_CONFIG_HOME=tmpdir())
    srv = Server(args=llm_args(llm, "wmd"), env=env).start()
    w = start_worker(srv, "wmd1")
    try:
        sid = new_session(srv, ws, approval_policy="yolo", target="worker:p")
        for text in ("first", "second"):
            r = wait_run(srv, session_prompt(srv, sid, text), timeout=30)
            check(r["status"] == "completed", "run: %r\nworker log:\n%s", r, w.log())
        reqs = llm.requests("wmd")
        check(len(reqs) == 2 and all("WORKER-RULE" in q["body"] for q in reqs), "the runs lack AGENTS.md")
        rc = w.stop()
        check(rc == 0, "the worker exited %r (under ASan: a leak?):\n%s", rc, w.log()[-3000:])
    finally:
        w.stop()
        srv.stop()
        llm.stop()


if __name__ == "__main__":
    run_tests(globals())
