#!/usr/bin/python3
"""Workers and the run coordinator (issue 12; docs/workers.md), over ipc,
with Debian's python3-zmq as the outside executor or worker:

  - the run actor never waits on the bus: while an exec instance sits on
    an exec.start without answering, the run actor keeps answering
    run.get and heartbeats at once (it used to stall for the whole 5 s
    call timeout, and every lease with it).
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Instance, Server, check, new_id, run_tests, tmpdir, wait_for  # noqa: E402
from test_runs_e2e import call, get_run, new_session  # noqa: E402


def test_run_actor_answers_while_exec_start_is_pending():
    # no built-in exec: this test's instance is the only executor, and
    # holds the exec.start it gets
    server = Server(args=["--actors", "llm,session,run"]).start()
    ex = Instance(server.endpoint("cmd"), name="fake-exec")
    m = ex.register("exec", "fake-exec")
    check(m.type == "bus.ready.ok", "register: %s %r", m.type, m.body)
    sid = new_session(server, tmpdir(), approval_policy="yolo")
    other = new_session(server, tmpdir(), approval_policy="yolo")
    run_id = call(server, "run.request", {"session_id": sid, "input": "hi"})["run"]["run_id"]
    start = ex.next_request(timeout=5)
    check(start is not None and start.type == "exec.start", "no exec.start came: %r", start)

    # exec.start is unanswered: the run actor must still serve at once
    for _ in range(20):
        t0 = time.monotonic()
        run = get_run(server, run_id)
        dt = time.monotonic() - t0
        check(dt < 0.5, "run.get took %.3f s while exec.start was pending", dt)
    check(run["status"] == "queued", "run before exec.start answered: %r", run)
    t0 = time.monotonic()
    run2 = call(server, "run.request", {"session_id": other, "input": "second"})["run"]
    check(time.monotonic() - t0 < 0.5, "run.request waited %.3f s behind the pending exec.start",
          time.monotonic() - t0)
    # the second run's exec.start arrives too, before the first is answered
    start2 = ex.next_request(timeout=5)
    check(start2 is not None and start2.type == "exec.start" and start2.body["run_id"] == run2["run_id"],
          "the second exec.start waited behind the first: %r", start2)

    # the first is answered now: the run is claimed by the instance
    ex.reply(start, body={"instance": "fake-exec"})
    wait_for(lambda: get_run(server, run_id)["status"] == "claimed", 5, "the run to be claimed")
    check(get_run(server, run_id).get("owner") == "fake-exec", "owner: %r", get_run(server, run_id))
    # a heartbeat with its fence makes it running, answered at once
    t0 = time.monotonic()
    hb = call(server, "run.heartbeat", {"run_id": run_id, "fence": start.body["fence"], "phase": "model"})
    check(time.monotonic() - t0 < 0.5 and hb["cancel_requested"] is False, "heartbeat: %r", hb)
    check(get_run(server, run_id)["status"] == "running", "the first heartbeat did not make it running")
    ex.close()
    server.stop()


if __name__ == "__main__":
    run_tests(globals())
