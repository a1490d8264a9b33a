#!/usr/bin/python3
"""The run actor never waits on the disk (issue 12, "The run actor never
waits on the bus"; docs/workers.md).

A durable LMDB commit costs milliseconds. The run actor used to commit
inline about five times per starting run (the run, its outbox entry's
delete, its fence, `claimed`, that entry's delete), and a heartbeat that
came in meanwhile waited behind the syncs. It now gathers what each turn
of its loop writes into one batch, commits it on a committer thread, and
lets landed outbox deletes ride with a later batch.

- test_commits_per_started_run: N runs start at once (an exec instance of
  this test accepts every exec.start); the run store's transaction count
  (LMDB's last txn id, read with mdb_stat) grows by far fewer than the
  five commits per run of the inline code. Counting commits, not timing
  them, keeps the check deterministic on a loaded machine; the heartbeat
  round trips meanwhile are printed.
- test_acknowledged_runs_survive_sigkill: every run.request that was
  answered names a run that is there after a SIGKILL of the server: a
  reply never goes out before its batch is committed.
"""
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Client, Instance, Server, TestFailure, check, run_tests, skip, tmpdir, wait_for  # noqa: E402

N_RUNS = 40
N_KILL = 100


def txn_id(data):
    """The run store's last committed transaction id."""
    out = subprocess.run(["mdb_stat", "-e", os.path.join(data, "run")], capture_output=True, text=True,
                         timeout=10)
    check(out.returncode == 0, "mdb_stat: %s", out.stderr)
    for line in out.stdout.splitlines():
        if "Last transaction ID:" in line:
            return int(line.split(":")[1])
    raise TestFailure("mdb_stat printed no transaction id: %r" % out.stdout)


def call(c, type, body, timeout=30):
    m = c.request(type, body, timeout=timeout)
    check(m.type == type + ".ok", "%s answered %s %r", type, m.type, m.body)
    return m.body


def pct(vals, p):
    vals = sorted(vals)
    return vals[min(len(vals) - 1, int(round(p / 100.0 * (len(vals) - 1))))]


class FakeExec:
    """An exec instance that accepts every exec.start at once, on its own
    thread, so the run actor's own work is what is measured."""

    def __init__(self, server):
        self.inst = Instance(server.endpoint("cmd"), name="lat-exec")
        self.inst.register("exec", "lat-exec")
        self.started = set()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.th = threading.Thread(target=self.loop, daemon=True)
        self.th.start()

    def loop(self):
        beat = 0.0
        while not self.stop.is_set():
            # an instance that misses 3 heartbeats is forgotten by the broker
            if time.monotonic() - beat > 0.5:
                self.inst.heartbeat()
                beat = time.monotonic()
            req = self.inst.next_request(timeout=0.1)
            if req is None:
                continue
            if req.type == "exec.start":
                self.inst.reply(req, body={"instance": "lat-exec"})
                with self.lock:
                    self.started.add(req.body.get("run_id"))
            else:
                self.inst.reply(req, body={"found": False})

    def count(self):
        with self.lock:
            return len(self.started)

    def close(self):
        self.stop.set()
        self.th.join()
        self.inst.close()


def test_commits_per_started_run():
    if not shutil.which("mdb_stat"):
        skip("mdb_stat (Debian's lmdb-utils, in scripts/deps.sh) is not installed")
    server = Server(args=["--actors", "llm,session,run"]).start()
    api = Client(server.endpoint("cmd"), name="lat-api")
    ex = FakeExec(server)
    wk = Client(server.endpoint("cmd"), name="lat-worker")
    try:
        # a worker holding one run, to heartbeat it meanwhile
        call(wk, "worker.register", {"worker_id": "lw", "instance_id": "li", "pool": "lat"})
        hsid = call(api, "session.create", {"workspace": tmpdir(), "approval_policy": "yolo"})["session"]["session_id"]
        call(api, "run.request", {"session_id": hsid, "input": "hb", "target": {"executor": "worker", "pool": "lat"}})
        claim = call(wk, "run.claim", {"worker_id": "lw", "pool": "lat", "lease_s": 60})
        hb = {"run_id": claim["run_id"], "fence": claim["fence"]}
        call(wk, "run.heartbeat", hb)       # claimed -> running
        sids = [call(api, "session.create", {"workspace": tmpdir(), "approval_policy": "yolo"})["session"]["session_id"]
                for _ in range(N_RUNS)]
        # the worker run's own writes are all answered for: quiet store
        call(api, "run.get", {"run_id": claim["run_id"]})
        before = txn_id(server.data)
        ids = [api.send("run.request", {"session_id": s, "input": "go"}) for s in sids]
        rtts = []
        deadline = time.monotonic() + 45
        while ex.count() < N_RUNS and time.monotonic() < deadline:
            a = time.monotonic()
            m = wk.request("run.heartbeat", hb, timeout=10)
            rtts.append((time.monotonic() - a) * 1000)
            check(not m.is_error(), "heartbeat answered %r", m.body)
        check(ex.count() == N_RUNS, "only %d of %d runs reached exec.start in 45 s", ex.count(), N_RUNS)
        run_ids = []
        for i in ids:
            m = api.wait_reply(i, timeout=30)
            check(m.type == "run.request.ok", "run.request answered %r", m.body)
            run_ids.append(m.body["run"]["run_id"])
        # every start is answered for (run.get waits for what it shows to
        # be committed and on the tape)
        wait_for(lambda: all(call(api, "run.get", {"run_id": r})["run"]["status"] == "claimed" for r in run_ids),
                 30, "every run to be claimed")
        after = txn_id(server.data)
        commits = after - before
        print("  %d runs started: %d run-store commits (%.2f per run; the inline code made 5 per run); "
              "%d heartbeats meanwhile: p50 %.2f ms, p99 %.2f ms, max %.2f ms"
              % (N_RUNS, commits, commits / float(N_RUNS), len(rtts), pct(rtts, 50), pct(rtts, 99), max(rtts)))
        # inline: 5 per run, whatever the load; grouped: at most 3 per run
        # (each step of a start in a turn of its own) and usually far fewer
        check(commits <= 4 * N_RUNS, "%d commits for %d started runs (bound %d)", commits, N_RUNS, 4 * N_RUNS)
        check(commits >= 1, "no commit at all for %d started runs", N_RUNS)
    finally:
        ex.close()
        api.close()
        wk.close()
        server.stop()


def test_acknowledged_runs_survive_sigkill():
    # no exec: the runs stay queued; only their records matter here
    server = Server(args=["--actors", "llm,session,run"]).start()
    api = Client(server.endpoint("cmd"), name="lat-api")
    sids = [call(api, "session.create", {"workspace": tmpdir(), "approval_policy": "yolo"})["session"]["session_id"]
            for _ in range(N_KILL)]
    for s in sids:
        api.send("run.request", {"session_id": s, "input": "go"})
    # the first answers, then SIGKILL while later ones are in flight
    acked = []
    deadline = time.monotonic() + 30
    while len(acked) < 5 and time.monotonic() < deadline:
        m = api.recv(timeout=1)
        if m is not None and m.type == "run.request.ok":
            acked.append(m.body["run"]["run_id"])
    check(len(acked) >= 5, "only %d run.request answers in 30 s", len(acked))
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait(10)
    # whatever else arrived before the kill was acknowledged too
    for m in api.drain():
        if m.type == "run.request.ok":
            acked.append(m.body["run"]["run_id"])
    api.close()
    server.close_control()
    server.start()
    api = Client(server.endpoint("cmd"), name="lat-api2")
    try:
        for r in acked:
            m = api.request("run.get", {"run_id": r}, timeout=10)
            check(m.type == "run.get.ok", "run %s was acknowledged, then lost by a SIGKILL: %r", r, m.body)
        print("  %d of %d requested runs acknowledged, all there after SIGKILL" % (len(acked), N_KILL))
    finally:
        api.close()
        server.stop()


if __name__ == "__main__":
    run_tests(globals())
