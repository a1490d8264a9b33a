#!/usr/bin/python3
"""The run's state machine and the list limits, over the bus (issue 8,
section 4; schemas/run_status.h, docs/protocol.md):

  - the run actor refuses a transition its table lacks: a run no
    executor ever claimed (a queued worker run, fence 0) cannot be
    finished, and stays queued; run.list refuses a status filter that
    names no status;
  - a list request's `limit` outside the range its schema declares is
    refused with `invalid`, naming the field and the range, the same way
    for run.list, session.list and session.events.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Server, check, run_tests, tmpdir  # noqa: E402
from sbagent import call, get_run, new_session, tape  # noqa: E402


def test_a_run_never_claimed_cannot_finish():
    server = Server().start()
    sid = new_session(server, tmpdir(), approval_policy="yolo")
    run = call(server, "run.request", {"session_id": sid, "input": "for the pool",
                                       "target": {"executor": "worker", "pool": "p"}})["run"]
    check(run["status"] == "queued" and run["fence"] == 0, "worker run: %r", run)

    m = server.control().request("run.finish", {"run_id": run["run_id"], "fence": 0, "status": "completed"})
    check(m.is_error() and m.body.get("code") == "conflict", "finish of a queued run answered %s %r",
          m.type, m.body)
    check("queued" in m.body.get("message", "") and "completed" in m.body.get("message", ""),
          "the refusal does not name the transition: %r", m.body)
    check(get_run(server, run["run_id"])["status"] == "queued", "the refused finish was written")
    statuses = [e["body"]["status"] for e in tape(server, sid) if e["kind"] == "run.status"]
    check(statuses == ["queued"], "the refused finish reached the tape: %r", statuses)

    # a status filter names one of the statuses, or is refused
    m = server.control().request("run.list", {"status": "bogus"})
    check(m.is_error() and m.body.get("code") == "invalid" and "interrupted" in m.body.get("message", ""),
          "run.list {status: bogus} answered %s %r", m.type, m.body)
    runs = call(server, "run.list", {"status": "queued"})["runs"]
    check([r["run_id"] for r in runs] == [run["run_id"]], "run.list {status: queued}: %r", runs)

    # the legal move from queued still works
    run = call(server, "run.cancel", {"run_id": run["run_id"]})["run"]
    check(run["status"] == "cancelled", "cancel of a queued run: %r", run)
    server.stop()


def test_out_of_range_limits_are_refused_alike():
    server = Server().start()
    sid = new_session(server, tmpdir(), approval_policy="yolo")
    api = server.control()
    cases = (("run.list", {}, "1..1000"), ("session.list", {}, "1..1000"),
             ("session.events", {"session_id": sid}, "1..5000"))
    for type, body, rng in cases:
        for limit in (0, 5001 if type == "session.events" else 5000):
            m = api.request(type, dict(body, limit=limit))
            check(m.is_error() and m.body.get("code") == "invalid", "%s {limit: %d} answered %s %r",
                  type, limit, m.type, m.body)
            want = "limit: %d is out of range (%s)" % (limit, rng)
            check(want in m.body.get("message", ""), "%s: %r lacks %r", type, m.body, want)
    # in range, and absent (the schema's default), are served
    for type, body, _ in cases:
        for extra in ({"limit": 1}, {}):
            m = api.request(type, dict(body, **extra))
            check(m.type == type + ".ok", "%s %r answered %s %r", type, extra, m.type, m.body)
    server.stop()


if __name__ == "__main__":
    run_tests(globals())
