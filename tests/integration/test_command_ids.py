#!/usr/bin/python3
"""command_id is scoped and internal ids cannot be pre-empted (issue 9,
item 8; docs/sessions.md, "Idempotency"):

  - an append to session B with the command_id that was used on session A
    writes to B (never A's reply);
  - a command_id reused on the same session with a different request is
    `conflict`; the same id with the same request is the first reply again,
    and one write;
  - the same for session.create (scoped to its requester), update, and
    for run.request, run.resume and session.prompt (the run coordinator's
    own memory of command ids);
  - a client that appends with the ids the run actor's outbox used to use
    (`run:<run_id>:<status>:<fence>`) cannot break a run: its tape ends with
    the real final status and the session's turn_status settles.

The last test drives the run with a fake executor (an outside instance of
`exec`), so that it knows the run id and fence before the run moves on.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Client, Instance, Server, TestFailure, check, run_tests, tmpdir, wait_for  # noqa: E402
from sbagent import call, get_run, new_session, tape  # noqa: E402


def append(server, body):
    return server.control().request("session.append", body)


def last_seq(server, sid):
    return call(server, "session.get", {"session_id": sid})["session"]["last_seq"]


def test_append_id_is_scoped_to_the_session():
    with Server() as server:
        ws = tmpdir()
        a, b = new_session(server, ws), new_session(server, ws)
        m = append(server, {"session_id": a, "kind": "note", "body": {"text": "on A"}, "command_id": "c-1"})
        check(m.type == "session.append.ok" and m.body["seq"] == 2, "append to A: %s %r", m.type, m.body)
        m = append(server, {"session_id": b, "kind": "note", "body": {"text": "on B"}, "command_id": "c-1"})
        check(m.type == "session.append.ok", "append to B with A's id answered %s %r", m.type, m.body)
        notes = [e["body"]["text"] for e in tape(server, b) if e["kind"] == "note"]
        check(notes == ["on B"], "B's tape holds notes %r: the append was answered with A's reply", notes)
        check(last_seq(server, b) == 2 and last_seq(server, a) == 2, "last_seq A=%d B=%d",
              last_seq(server, a), last_seq(server, b))
        # a retry on B is B's own reply, and writes nothing more
        m2 = append(server, {"session_id": b, "kind": "note", "body": {"text": "on B"}, "command_id": "c-1"})
        check(m2.type == "session.append.ok" and m2.body == m.body, "retry on B: %r, first %r", m2.body, m.body)
        check(last_seq(server, b) == 2, "the retry on B wrote again")


def test_reused_id_with_another_body_is_conflict():
    with Server() as server:
        sid = new_session(server, tmpdir())
        first = {"session_id": sid, "kind": "note", "body": {"text": "one"}, "command_id": "c-2"}
        m1 = append(server, first)
        check(m1.type == "session.append.ok", "first append: %s %r", m1.type, m1.body)
        # the same id and the same request: the first reply, one write
        m2 = append(server, dict(first))
        check(m2.type == "session.append.ok" and m2.body == m1.body, "replay %r != %r", m2.body, m1.body)
        check(last_seq(server, sid) == 2, "the replay wrote again: last_seq %d", last_seq(server, sid))
        # the same id with another body: conflict, and nothing written
        m3 = append(server, dict(first, body={"text": "two"}))
        check(m3.is_error() and m3.code == "conflict", "reuse with another body answered %s %r", m3.type, m3.body)
        check("c-2" in m3.body.get("message", ""), "the refusal does not name the id: %r", m3.body)
        # as a batch, too: another shape of the request is another request
        m4 = append(server, {"session_id": sid, "entries": [{"kind": "note", "body": {"text": "one"}}],
                             "command_id": "c-2"})
        check(m4.is_error() and m4.code == "conflict", "reuse as a batch answered %s %r", m4.type, m4.body)
        notes = [e["body"]["text"] for e in tape(server, sid) if e["kind"] == "note"]
        check(notes == ["one"], "tape notes %r", notes)

        # update and close are scoped and compared alike
        u = {"session_id": sid, "title": "t1", "command_id": "c-3"}
        m = server.control().request("session.update", u)
        check(m.type == "session.update.ok", "update: %s %r", m.type, m.body)
        m = server.control().request("session.update", dict(u, title="t2"))
        check(m.is_error() and m.code == "conflict", "update reuse answered %s %r", m.type, m.body)
        check(call(server, "session.get", {"session_id": sid})["session"]["title"] == "t1", "title changed")


def test_create_id_with_another_body_is_conflict():
    with Server() as server:
        ws = tmpdir()
        body = {"workspace": ws, "title": "first", "command_id": "c-4"}
        s1 = call(server, "session.create", body)["session"]["session_id"]
        s2 = call(server, "session.create", dict(body))["session"]["session_id"]
        check(s1 == s2, "a retried create made a second session %s %s", s1, s2)
        m = server.control().request("session.create", dict(body, title="second"))
        check(m.is_error() and m.code == "conflict", "create with a reused id and another title answered %s %r",
              m.type, m.body)
        # create has no session to scope its id: it is scoped to the requester
        other = Client(server.endpoint(), name="another-client")
        m = other.request("session.create", dict(body))
        check(m.type == "session.create.ok" and m.body["session"]["session_id"] != s1,
              "another requester's create with the same id answered %s %r", m.type, m.body)
        other.close()
        sessions = call(server, "session.list", {})["sessions"]
        check(len(sessions) == 2, "sessions: %r", [s["title"] for s in sessions])


def test_run_request_id_is_scoped_to_the_session():
    with Server() as server:
        ws = tmpdir()
        a, b = new_session(server, ws), new_session(server, ws)
        worker = {"executor": "worker", "pool": "p"}
        r1 = call(server, "run.request", {"session_id": a, "input": "x", "target": worker,
                                          "command_id": "r-1"})["run"]
        m = server.control().request("run.request", {"session_id": b, "input": "x", "target": worker,
                                                     "command_id": "r-1"})
        check(m.type == "run.request.ok", "run.request on B answered %s %r", m.type, m.body)
        check(m.body["run"]["session_id"] == b and m.body["run"]["run_id"] != r1["run_id"],
              "run.request on B with A's id got A's run: %r", m.body["run"])
        rb = m.body["run"]
        # the same request again on A: A's run; another input: conflict
        again = call(server, "run.request", {"session_id": a, "input": "x", "target": worker,
                                             "command_id": "r-1"})["run"]
        check(again["run_id"] == r1["run_id"], "a retried run.request made run %s, not %s",
              again["run_id"], r1["run_id"])
        m = server.control().request("run.request", {"session_id": a, "input": "y", "target": worker,
                                                     "command_id": "r-1"})
        check(m.is_error() and m.code == "conflict", "run.request reuse with another input answered %s %r",
              m.type, m.body)
        # run.resume is scoped to the session of the run it resumes
        for r in (r1, rb):
            call(server, "run.cancel", {"run_id": r["run_id"]})
        ra2 = call(server, "run.resume", {"run_id": r1["run_id"], "command_id": "r-2"})["run"]
        again = call(server, "run.resume", {"run_id": r1["run_id"], "command_id": "r-2"})["run"]
        check(again["run_id"] == ra2["run_id"], "a retried run.resume made run %s, not %s",
              again["run_id"], ra2["run_id"])
        rb2 = call(server, "run.resume", {"run_id": rb["run_id"], "command_id": "r-2"})["run"]
        check(rb2["session_id"] == b and rb2["resume_from"] == rb["run_id"],
              "run.resume on B with A's id answered %r", rb2)
        # session.prompt rides on run.request: scoped alike
        c = new_session(server, ws)
        m = server.control().request("session.prompt", {"session_id": c, "text": "x", "command_id": "r-1"})
        check(m.type == "session.prompt.ok" and m.body["run"]["session_id"] == c,
              "session.prompt on C with A's id answered %s %r", m.type, m.body)


def test_outbox_ids_cannot_be_preempted():
    server = Server(args=["--actors", "session,run"]).start()
    fake = Instance(server.endpoint(), name="fake-exec")
    m = fake.register("exec", "fake-exec")
    check(m.type == "bus.ready.ok", "register: %s %r", m.type, m.body)
    sid = new_session(server, tmpdir(), approval_policy="yolo")
    ctl = server.control()
    rid = ctl.send("run.request", {"session_id": sid, "input": "hello"})
    start = fake.next_request(timeout=5)
    check(start is not None and start.type == "exec.start", "no exec.start: %r", start)
    fake.reply(start, body={"instance": "fake-exec"})
    run = ctl.wait_reply(rid)
    check(run.type == "run.request.ok", "run.request: %s %r", run.type, run.body)
    run_id, fence = start.body["run_id"], start.body["fence"]
    wait_for(lambda: get_run(server, run_id)["status"] == "claimed", 5, "the run to be claimed")

    # a client writes first under every id the outbox would use from now on
    for status in ("running", "completed", "failed", "cancelling", "cancelled"):
        for f in (fence, fence + 1):
            cmd = "run:%s:%s:%d" % (run_id, status, f)
            m = append(server, {"session_id": sid, "kind": "note", "body": {"text": "pre-empted " + cmd},
                                "command_id": cmd})
            check(m.type == "session.append.ok", "pre-empting append: %s %r", m.type, m.body)

    fake.heartbeat()
    hb = fake.request("run.heartbeat", {"run_id": run_id, "fence": fence, "phase": "model"})
    check(hb.type == "run.heartbeat.ok", "heartbeat: %s %r", hb.type, hb.body)
    fin = fake.request("run.finish", {"run_id": run_id, "fence": fence, "status": "completed"})
    check(fin.type == "run.finish.ok" and fin.body["run"]["status"] == "completed", "finish: %s %r",
          fin.type, fin.body)

    # the outbox flushes right after the finish is stored; give it a moment
    # to land, then hold the tape and the record to what the run said
    def settled():
        return tape(server, sid)[-1]["kind"] == "run.status" and \
            tape(server, sid)[-1]["body"]["status"] == "completed"
    try:
        wait_for(settled, 5, "the final run.status on the tape")
    except TestFailure:
        pass                    # the checks below say what the tape holds
    statuses = [e["body"]["status"] for e in tape(server, sid) if e["kind"] == "run.status"]
    check(statuses == ["queued", "claimed", "running", "completed"],
          "the run said completed, its tape says %r", statuses)
    rec = call(server, "session.get", {"session_id": sid})["session"]
    check(rec["turn_status"] == "idle", "turn_status stayed %s", rec["turn_status"])
    fake.close()
    server.stop()


if __name__ == "__main__":
    run_tests(globals())
