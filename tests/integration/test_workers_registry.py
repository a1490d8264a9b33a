#!/usr/bin/python3
"""The worker registry survives a restart (issue 12; docs/workers.md,
"Worker status"): it lives in the run actor's store, so after `serve`
restarts `switchboard workers` still lists every worker with its
metadata, its last_seen_at and an honest status by the clock, and a run's
worker_id and instance_id stay in run-info.

  - two workers register (one with capabilities), one claims a run and
    heartbeats: after a clean restart both are listed as they were,
    last_seen_at exactly as the server last reported it, the one that held
    a run is not `running` (recovery interrupted its run), and the run
    still names the worker and its instance;
  - a worker that was restored from the store may claim without
    registering again;
  - with short thresholds, the restored workers turn stale and then
    offline by the clock, since nobody hears from them.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Server, check, cli, run_tests, tmpdir, wait_for  # noqa: E402
from sbagent import call, get_run, new_session  # noqa: E402


def workers(server):
    return {w["worker_id"]: w for w in call(server, "worker.list", {})["workers"]}


def register(server, wid, instance, **kw):
    body = {"worker_id": wid, "instance_id": instance, "pid": 4242, "hostname": "host-" + wid, "pool": "p",
            "workspace_sync": "same_path"}
    body.update(kw)
    return call(server, "worker.register", body)["worker"]


def test_registry_survives_a_restart():
    server = Server().start()
    data = server.data
    try:
        register(server, "w1", "inst-1", capabilities={"gpu": "a100", "arch": "x86_64"})
        register(server, "w2", "inst-2")
        sid = new_session(server, tmpdir(), approval_policy="yolo", target="worker:p")
        run_id = call(server, "session.prompt", {"session_id": sid, "text": "hi"})["run_id"]
        claim = call(server, "run.claim", {"worker_id": "w1", "pool": "p", "lease_s": 60, "wait_ms": 5000})
        check(claim.get("run_id") == run_id, "claim: %r", claim)
        hb = call(server, "run.heartbeat", {"run_id": run_id, "fence": claim["fence"]})
        check(hb["cancel_requested"] is False, "heartbeat: %r", hb)
        before = workers(server)
        check(before["w1"]["status"] == "running" and before["w1"]["current_run_id"] == run_id,
              "w1 before the restart: %r", before["w1"])
        check(before["w2"]["status"] == "idle", "w2 before the restart: %r", before["w2"])
        server.stop()

        server = Server(data=data).start()
        after = workers(server)
        check(set(after) == {"w1", "w2"}, "workers after the restart: %r", sorted(after))
        for wid in ("w1", "w2"):
            a, b = after[wid], before[wid]
            for field in ("instance_id", "hostname", "pid", "pool", "workspace_sync", "registered_at",
                          "last_seen_at"):
                check(a.get(field) == b.get(field), "%s %s after the restart: %r, before %r", wid, field,
                      a.get(field), b.get(field))
        check(after["w1"].get("capabilities") == {"gpu": "a100", "arch": "x86_64"}, "w1 capabilities: %r",
              after["w1"])
        # the run it held was interrupted by recovery: w1 holds nothing now
        run = get_run(server, run_id)
        check(run["status"] == "interrupted", "the held run after the restart: %r", run)
        check(run.get("worker_id") == "w1" and run.get("instance_id") == "inst-1", "run-info: %r", run)
        check(after["w1"]["status"] in ("idle", "stale") and "current_run_id" not in after["w1"],
              "w1 after the restart: %r", after["w1"])
        # the CLI lists them too
        rc, out, err = cli(server, "workers", "--json")
        check(rc == 0, "workers --json: %d %r", rc, err)
        listed = {json.loads(line)["worker_id"] for line in out.splitlines() if line.strip()}
        check(listed == {"w1", "w2"}, "switchboard workers --json: %r", out)
        rc, out, err = cli(server, "run-info", run_id)
        check(rc == 0 and "w1" in out and "inst-1" in out, "run-info: %d %r %r", rc, out, err)
        # a restored worker claims without registering again
        run2 = call(server, "session.prompt", {"session_id": sid, "text": "again"})["run_id"]
        claim = call(server, "run.claim", {"worker_id": "w2", "pool": "p", "lease_s": 60, "wait_ms": 5000})
        check(claim.get("run_id") == run2, "a restored worker's claim: %r", claim)
        call(server, "run.complete", {"run_id": run2, "fence": claim["fence"], "status": "completed"})
        server.stop()

        # nobody is heard from: stale, then offline, by the clock
        server = Server(data=data, env={"SWITCHBOARD_WORKER_STALE_S": "1",
                                        "SWITCHBOARD_WORKER_OFFLINE_S": "2"}).start()
        check(set(workers(server)) == {"w1", "w2"}, "workers after the second restart")
        wait_for(lambda: all(w["status"] == "offline" for w in workers(server).values()), 20,
                 "the restored workers to go offline")
        check(get_run(server, run2).get("worker_id") == "w2", "run 2's worker after a restart")
    finally:
        server.stop()


if __name__ == "__main__":
    run_tests(globals())
