#!/usr/bin/python3
"""The run coordinator's remembered command_ids expire
(SWITCHBOARD_COMMAND_TTL_S) and are swept.

(Found by trying switchboard: each test fails on the code before its fix.)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Server, check, run_tests, tmpdir, wait_for  # noqa: E402
from sbagent import LLM, LLM_ENV, call, llm_args, new_session, wait_run  # noqa: E402


def test_the_run_coordinators_command_ids_expire():
    llm = LLM()
    llm.script("ttl", [{"text": "done"}], repeat_last=True)
    srv = Server(args=llm_args(llm, "ttl"), env=dict(LLM_ENV, SWITCHBOARD_COMMAND_TTL_S="1")).start()
    try:
        sid = new_session(srv, tmpdir())
        req = {"session_id": sid, "input": "hi", "command_id": "cmd-ttl-1"}
        first = call(srv, "run.request", req)["run"]["run_id"]
        check(wait_run(srv, first)["status"] == "completed", "the first run did not complete")
        again = call(srv, "run.request", req)["run"]["run_id"]
        # at once it is the same request (unless a slow machine let a second pass)
        box = {}

        def new_run():
            box["r"] = call(srv, "run.request", req)["run"]["run_id"]
            return box["r"] != first
        wait_for(new_run, 15, "the command_id to be forgotten after its 1 s")
        check(again in (first, box["r"]), "a retry within the ttl made another run")
        wait_for(lambda: "expired command_ids" in srv.log(), 15, "the sweep of expired command_ids")
    finally:
        srv.stop()
        llm.stop()


if __name__ == "__main__":
    run_tests(globals())
