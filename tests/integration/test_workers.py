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
from sbtest import Client, Instance, Server, check, new_id, now_ms, run_tests, tmpdir, wait_for  # noqa: E402
from sbagent import call, get_run, new_session, tape  # noqa: E402


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


class Worker:
    """An outside worker speaking the protocol over the command plane."""

    def __init__(self, server, worker_id, pool="p", **extra):
        self.c = Client(server.endpoint("cmd"), name=worker_id)
        self.worker_id, self.pool = worker_id, pool
        self.instance_id = "i" + new_id()[-10:].lower()
        body = {"worker_id": worker_id, "instance_id": self.instance_id, "pid": os.getpid(),
                "hostname": "testhost", "pool": pool, "workspace_sync": "same_path"}
        body.update(extra)
        self.registered = self.ok("worker.register", body)["worker"]

    def req(self, type, body, timeout=10):
        return self.c.request(type, body, timeout=timeout)

    def ok(self, type, body, timeout=10):
        m = self.req(type, body, timeout)
        check(m.type == type + ".ok", "%s answered %s %r", type, m.type, m.body)
        return m.body

    def claim(self, lease_s=30, wait_ms=0, timeout=10):
        return self.ok("run.claim", {"worker_id": self.worker_id, "pool": self.pool, "lease_s": lease_s,
                                     "wait_ms": wait_ms}, timeout=timeout)

    def heartbeat(self, run_id, fence, **kw):
        body = {"run_id": run_id, "fence": fence}
        body.update(kw)
        return self.req("run.heartbeat", body)

    def append(self, sid, run_id, fence, text):
        return self.req("session.append", {"session_id": sid, "run_id": run_id, "fence": fence,
                                           "kind": "note", "body": {"text": text}})

    def complete(self, run_id, fence, status="completed", **kw):
        body = {"run_id": run_id, "fence": fence, "status": status}
        body.update(kw)
        return self.req("run.complete", body)

    def close(self):
        self.c.close()


def worker_run(server, sid, pool="p", text="do it"):
    return call(server, "run.request", {"session_id": sid, "input": text,
                                        "target": {"executor": "worker", "pool": pool}})["run"]


def statuses(server, sid, run_id=None):
    return [e["body"]["status"] for e in tape(server, sid)
            if e["kind"] == "run.status" and (run_id is None or e["body"]["run_id"] == run_id)]


def test_claim_heartbeat_complete():
    server = Server().start()
    sid = new_session(server, tmpdir(), approval_policy="yolo")
    w = Worker(server, "w1", capabilities={"gpu": "none"})
    check(w.registered["status"] == "idle" and w.registered["capabilities"] == {"gpu": "none"},
          "registered: %r", w.registered)
    check(w.claim() == {}, "a claim with nothing queued is answered {}")

    run = worker_run(server, sid)
    c = w.claim()
    check(c.get("run_id") == run["run_id"] and c.get("session_id") == sid, "claim: %r", c)
    check(c["fence"] >= 1 and c["lease_ms"] == 30000 and c["config"]["approval_policy"] == "yolo", "claim: %r", c)
    info = get_run(server, run["run_id"])
    check(info["status"] == "claimed" and info["worker_id"] == "w1" and info["instance_id"] == w.instance_id,
          "run-info after the claim: %r", info)
    check(info["fence"] == c["fence"], "fence: %r vs %r", info, c)
    check(statuses(server, sid) == ["queued", "claimed"], "the claim answered before `claimed` was on the tape")
    check(w.claim() == {}, "a claimed run was handed out twice")

    hb = w.heartbeat(run["run_id"], c["fence"], phase="model", steps=1)
    check(hb.type == "run.heartbeat.ok" and hb.body["cancel_requested"] is False, "heartbeat: %r", hb.body)
    check(get_run(server, run["run_id"])["status"] == "running", "the first heartbeat did not make it running")
    check(statuses(server, sid) == ["queued", "claimed", "running"],
          "the first heartbeat answered before `running` was on the tape")
    wk = call(server, "worker.get", {"worker_id": "w1"})["worker"]
    check(wk["status"] == "running" and wk["current_run_id"] == run["run_id"] and "lease_expires_at" in wk,
          "worker.get while running: %r", wk)

    m = w.append(sid, run["run_id"], c["fence"], "from the worker")
    check(m.type == "session.append.ok", "append with the fence: %s %r", m.type, m.body)
    m = w.complete(run["run_id"], c["fence"], steps=1, usage={"input_tokens": 5, "output_tokens": 2})
    check(m.type == "run.complete.ok" and m.body["run"]["status"] == "completed", "complete: %r", m.body)
    # each answer comes once the tape holds what it announces
    check(statuses(server, sid) == ["queued", "claimed", "running", "completed"], "tape: %r", statuses(server, sid))
    notes = [e for e in tape(server, sid) if e["kind"] == "note"]
    check(len(notes) == 1 and notes[0]["run_id"] == run["run_id"], "the worker's note: %r", notes)
    wk = call(server, "worker.get", {"worker_id": "w1"})["worker"]
    check(wk["status"] == "idle" and "current_run_id" not in wk, "worker after completion: %r", wk)
    ws = call(server, "worker.list", {})["workers"]
    check([x["worker_id"] for x in ws] == ["w1"], "worker.list: %r", ws)
    m = server.control().request("worker.get", {"worker_id": "nobody"})
    check(m.is_error() and m.body["code"] == "not_found", "unknown worker: %r", m.body)
    # an unregistered worker cannot claim
    m = server.control().request("run.claim", {"worker_id": "ghost", "pool": "p"})
    check(m.is_error() and m.body["code"] == "not_found", "claim by an unregistered worker: %r", m.body)
    w.close()
    server.stop()


def test_oldest_queued_first_and_long_poll():
    server = Server().start()
    w = Worker(server, "w1")
    sids = [new_session(server, tmpdir(), approval_policy="yolo") for _ in range(3)]
    runs = [worker_run(server, sid) for sid in sids]
    other = worker_run(server, new_session(server, tmpdir()), pool="elsewhere")
    got = [w.claim()["run_id"] for _ in range(3)]
    check(got == [r["run_id"] for r in runs], "claims out of age order: %r vs %r", got, runs)
    check(w.claim() == {}, "a run of another pool was claimed")
    check(get_run(server, other["run_id"])["status"] == "queued", "the other pool's run moved")

    # long-poll: the claim waits for a run and gets it as soon as it is queued
    sid = new_session(server, tmpdir(), approval_policy="yolo")
    seen = call(server, "worker.get", {"worker_id": "w1"})["worker"]["last_seen_at"]
    wait_for(lambda: call(server, "worker.get", {"worker_id": "w1"})["worker"]["last_seen_at"] > seen
             or now_ms() > seen, 2, "a millisecond to pass")
    cid = w.c.send("run.claim", {"worker_id": "w1", "pool": "p", "lease_s": 30, "wait_ms": 10000})
    # the claim reached the run actor (it marks the worker seen) and waits there
    wait_for(lambda: call(server, "worker.get", {"worker_id": "w1"})["worker"]["last_seen_at"] > seen, 5,
             "the claim to arrive")
    t0 = time.monotonic()
    run = worker_run(server, sid)
    m = w.c.wait_reply(cid, timeout=5)
    dt = time.monotonic() - t0
    check(m.type == "run.claim.ok" and m.body.get("run_id") == run["run_id"], "long-poll: %r", m.body)
    check(dt < 1.0, "the waiting claim took %.3f s to get the run", dt)
    # a long-poll with nothing to do is answered {} after its wait
    t0 = time.monotonic()
    check(w.claim(wait_ms=600) == {}, "empty long-poll")
    dt = time.monotonic() - t0
    check(0.5 < dt < 2.0, "an empty long-poll of 600 ms answered after %.3f s", dt)
    w.close()
    server.stop()


def test_fencing_refusals():
    server = Server().start()
    sid = new_session(server, tmpdir(), approval_policy="yolo")
    w = Worker(server, "w1")
    run = worker_run(server, sid)
    c = w.claim()
    f = c["fence"]
    for bad in (f - 1, f + 1, f + 1000):
        m = w.heartbeat(run["run_id"], bad)
        check(m.is_error() and m.body["code"] == "fenced", "heartbeat with fence %d: %r", bad, m.body)
        m = w.append(sid, run["run_id"], bad, "stale")
        check(m.is_error() and m.body["code"] == "fenced", "append with fence %d: %r", bad, m.body)
        m = w.complete(run["run_id"], bad)
        check(m.is_error() and m.body["code"] == "fenced", "complete with fence %d: %r", bad, m.body)
    check(not [e for e in tape(server, sid) if e["kind"] == "note"], "a refused append reached the tape")
    check(get_run(server, run["run_id"])["status"] == "claimed", "a refused call changed the run")
    w.close()
    server.stop()


def test_lease_expiry_fences_first_and_resume_on_another_worker():
    server = Server().start()
    sid = new_session(server, tmpdir(), approval_policy="yolo")
    w1, w2 = Worker(server, "w1"), Worker(server, "w2")
    run = worker_run(server, sid)
    c = w1.claim(lease_s=1)
    check(c["lease_ms"] == 1000, "lease: %r", c)
    check(w1.heartbeat(run["run_id"], c["fence"]).type == "run.heartbeat.ok", "heartbeat")
    last_hb = time.monotonic()
    check(w1.append(sid, run["run_id"], c["fence"], "before").type == "session.append.ok", "append before")
    # the worker stops heartbeating
    r = wait_for(lambda: (lambda x: x if x["status"] == "expired" else None)(get_run(server, run["run_id"])),
                 5, "the run to expire", interval=0.02)
    took = time.monotonic() - last_hb
    check(took < 1.0 + 1.0, "expired %.3f s after the last heartbeat (lease 1 s)", took)
    check(r["reason"] == "lease_expired" and r["fence"] > c["fence"], "expired run: %r", r)
    sess = call(server, "session.get", {"session_id": sid})["session"]
    check(sess["fence"] == r["fence"], "the session's fence %r is not the run's %r", sess.get("fence"), r["fence"])

    # the lapsed worker wakes up: everything it sends is refused
    seq_expired = [e["seq"] for e in tape(server, sid) if e["kind"] == "run.status"
                   and e["body"]["status"] == "expired"][0]
    m = w1.append(sid, run["run_id"], c["fence"], "after")
    check(m.is_error() and m.body["code"] == "fenced", "late append: %r", m.body)
    m = w1.heartbeat(run["run_id"], c["fence"])
    check(m.is_error() and m.body["code"] == "fenced", "late heartbeat: %r", m.body)
    m = w1.complete(run["run_id"], c["fence"])
    check(m.is_error() and m.body["code"] == "fenced", "late completion: %r", m.body)
    after = [e for e in tape(server, sid) if e["seq"] > seq_expired]
    check(after == [], "the tape holds entries after the expiry: %r", after)
    check(call(server, "worker.get", {"worker_id": "w1"})["worker"]["status"] == "idle", "w1 still holds the run")

    # resume: a new run of the pool, which the other worker takes
    new = call(server, "run.resume", {"run_id": run["run_id"]})["run"]
    check(new["target"] == {"executor": "worker", "pool": "p"} and new["resume_from"] == run["run_id"],
          "resumed: %r", new)
    c2 = w2.claim()
    check(c2["run_id"] == new["run_id"] and c2["config"]["resume_from"] == run["run_id"], "claim: %r", c2)
    check(c2["fence"] > r["fence"], "the resumed run's fence %r is not above %r", c2["fence"], r["fence"])
    check(w2.complete(new["run_id"], c2["fence"]).type == "run.complete.ok", "complete")
    info = get_run(server, new["run_id"])
    check(info["worker_id"] == "w2" and info["instance_id"] == w2.instance_id, "run-info: %r", info)
    w1.close()
    w2.close()
    server.stop()


def test_cancel_reaches_the_worker_through_the_heartbeat():
    server = Server().start()
    sid = new_session(server, tmpdir(), approval_policy="yolo")
    w = Worker(server, "w1")
    run = worker_run(server, sid)
    c = w.claim()
    check(w.heartbeat(run["run_id"], c["fence"]).body["cancel_requested"] is False, "no cancel yet")
    check(call(server, "run.cancel", {"run_id": run["run_id"]})["run"]["status"] == "cancelling", "cancel")
    hb = w.heartbeat(run["run_id"], c["fence"])
    check(hb.body["cancel_requested"] is True, "the heartbeat after a cancel: %r", hb.body)
    m = w.complete(run["run_id"], c["fence"], status="cancelled")
    check(m.type == "run.complete.ok" and m.body["run"]["status"] == "cancelled", "complete: %r", m.body)
    check(statuses(server, sid)[-2:] == ["cancelling", "cancelled"], "tape: %r", statuses(server, sid))
    w.close()
    server.stop()


def test_no_worker_reason_and_session_target():
    server = Server(env={"SWITCHBOARD_WORKER_STALE_S": "1"}).start()
    ws = tmpdir()
    m = server.control().request("session.create", {"workspace": ws, "target": "worker:"})
    check(m.is_error() and m.body["code"] == "invalid", "target worker: (no pool): %r", m.body)
    m = server.control().request("session.create", {"workspace": ws, "target": "remote"})
    check(m.is_error() and m.body["code"] == "invalid", "target remote: %r", m.body)
    sid = new_session(server, ws, approval_policy="yolo", target="worker:gpu")
    check(call(server, "session.get", {"session_id": sid})["session"]["target"] == "worker:gpu", "target kept")
    # a prompt goes to the session's target
    p = call(server, "session.prompt", {"session_id": sid, "text": "for the gpu pool"})
    run = p["run"]
    check(run["target"] == {"executor": "worker", "pool": "gpu"}, "prompt's run: %r", run)
    r = wait_for(lambda: (lambda x: x if x.get("waiting_for") else None)(get_run(server, run["run_id"])), 5,
                 "run-info to say why it waits")
    check("no worker of pool gpu has registered" in r["waiting_for"] and r["status"] == "queued",
          "waiting_for: %r", r)
    # a registered worker turns the reason; then it claims the run
    w = Worker(server, "g1", pool="gpu")
    r = wait_for(lambda: (lambda x: x if "registered" in x.get("waiting_for", "") and "no worker" not in
                          x.get("waiting_for", "") else None)(get_run(server, run["run_id"])), 5, "the reason to change")
    c = w.claim()
    check(c["run_id"] == run["run_id"], "claim: %r", c)
    w.complete(run["run_id"], c["fence"])
    # stale after SWITCHBOARD_WORKER_STALE_S without being heard
    wait_for(lambda: call(server, "worker.get", {"worker_id": "g1"})["worker"]["status"] == "stale", 5,
             "g1 to become stale")
    # update moves the session back to local
    call(server, "session.update", {"session_id": sid, "target": "local"})
    check(call(server, "session.get", {"session_id": sid})["session"]["target"] == "local", "updated target")
    w.close()
    server.stop()


if __name__ == "__main__":
    run_tests(globals())
