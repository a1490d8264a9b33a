#!/usr/bin/python3
"""`actor exec` scale-out (issue 12; docs/workers.md): two exec instances,
the server's own and a `switchboard actor exec` process; the second is
SIGKILLed mid-load.

  - no run that had not started on the killed instance is lost: the runs
    asked for after the kill (some of whose exec.start went to the dying
    instance) complete on the survivor;
  - the runs the killed instance had started become `expired` (its lease
    lapsed; SWITCHBOARD_LEASE_S=6 here) or `interrupted`, never silently
    lost: every run reaches a final status, on the record and the tape.
"""
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Server, check, run_tests, start_actor, tmpdir, wait_for  # noqa: E402
from sbagent import LLM, LLM_ENV, call, get_run, llm_args, new_session, tape, wait_run  # noqa: E402

N_FIRST, N_AFTER = 8, 4


def test_killing_one_of_two_exec_instances_loses_no_run():
    llm = LLM()
    # the first model calls run a 2 s tool, every later one answers
    llm.script("load", [{"tool_calls": [{"name": "shell", "arguments": {"command": "sleep 2"}}]}] * N_FIRST
               + [{"text": "done"}], repeat_last=True)
    env = dict(LLM_ENV, SWITCHBOARD_LEASE_S="6")
    server = Server(args=llm_args(llm, "load"), env=env).start()
    ex2 = start_actor(server, "exec", instance="ex2")
    check(len(server.instances("exec")) == 2, "two exec instances: %r", server.instances("exec"))

    sids = [new_session(server, tmpdir(), approval_policy="yolo") for _ in range(N_FIRST + N_AFTER)]
    first = [call(server, "run.request", {"session_id": s, "input": "load"})["run"]["run_id"]
             for s in sids[:N_FIRST]]

    def started_on_ex2():
        return [r for r in first if (lambda x: x.get("owner") == "ex2" and x["status"] in
                                     ("claimed", "running"))(get_run(server, r))]
    wait_for(lambda: started_on_ex2() and any(
        "tool.call" in [e["kind"] for e in tape(server, get_run(server, r)["session_id"])]
        for r in started_on_ex2()), 20, "a run to be running on ex2")
    ex2.send_signal(signal.SIGKILL)
    on_ex2 = set(started_on_ex2())
    # more runs right away: the broker still lists ex2 for a moment
    after = [call(server, "run.request", {"session_id": s, "input": "after the kill"})["run"]["run_id"]
             for s in sids[N_FIRST:]]

    final = {r: wait_run(server, r, timeout=40) for r in first + after}
    for r, run in final.items():
        if r in on_ex2:
            check(run["status"] in ("expired", "interrupted"), "a run started on the killed instance: %r", run)
        else:
            check(run["status"] == "completed", "run %s (not started on ex2) ended %s (%s), owner %s",
                  r, run["status"], run.get("reason"), run.get("owner"))
        last = [e["body"]["status"] for e in tape(server, run["session_id"]) if e["kind"] == "run.status"][-1]
        check(last == run["status"], "the tape of %s ends with %s, the record says %s", r, last, run["status"])
    print("  %d runs started on the killed instance -> %s; %d others completed"
          % (len(on_ex2), sorted({final[r]["status"] for r in on_ex2}), len(final) - len(on_ex2)))
    server.stop()
    llm.stop()


if __name__ == "__main__":
    run_tests(globals())
