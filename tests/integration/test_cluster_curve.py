#!/usr/bin/python3
"""test_cluster_curve — a worker over CURVE TCP given the nodes of a
cluster, each with a server key of its own (docs/scale-out.md, "Workers
and the CLI with several endpoints"; docs/workers.md):

  - two `serve --store postgres://...` nodes on one schema, each on its
    own --bus tcp://127.0.0.1:PORT with CURVE, each with the key pair
    serve made in its own DATA/certs (so two different server keys); a
    worker key made on A and allowed on B too (its public file copied);
  - `worker --connect tcp://A,tcp://B --server-key A/certs/server,B/certs/server`
    registers and runs a run through A; A is killed (kill -9): the
    worker's bus fails over to B with B's server key, registers there and
    runs a run of B's; a worker given A's key only (one --server-key, as
    before) fails over too but never gets through B's handshake;
  - a run the worker is running when A dies goes on through B: B's
    broker never saw the claim, and grants it from the run actor's answer
    to the worker's first heartbeat there, which names its worker_id; a
    key naming another worker's claim is refused, and the run completes
    once, on one tape with no gap;
  - an approval the worker's run asked for through A is answered through
    B after A died: B's broker lets the worker read it once its reply
    shows it is of the run B granted;
  - bad lists are usage errors (exit 2) naming what is wrong: two keys
    for three endpoints, an empty name in the list, more than 16; the
    same for `actor`.

Skips only when PostgreSQL's server binaries are absent (sbpg.py).
"""
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import SB_BIN, Proc, Server, check, run_tests, sb, tmpdir, wait_for  # noqa: E402
from sbagent import (LLM, LLM_ENV, CurveClient, call, cert_keys, check_tape_contiguous, forbidden,  # noqa: E402
                     free_port, get_run, llm_args, new_session, shell, tape, wait_run)
from sbpg import with_postgres  # noqa: E402

LEASE_MS = 1500
BEAT_MS = 250
ENV = {"SWITCHBOARD_SHARD_LEASE_MS": str(LEASE_MS), "SWITCHBOARD_SHARD_HEARTBEAT_MS": str(BEAT_MS)}


def node(pg, llm, script):
    """A started node on the schema `cc`, CURVE on a free tcp port (its
    clients here use its ipc endpoints)."""
    port = free_port()
    srv = Server(args=["--store", pg.url() + "?schema=cc", "--bus", "tcp://127.0.0.1:%d" % port]
                 + llm_args(llm, script), env=dict(os.environ, **dict(ENV, **LLM_ENV))).start(timeout=30)
    srv.tcp = "tcp://127.0.0.1:%d" % port
    return srv


def settled(srv_a, srv_b):
    wait_for(lambda: sorted(s.stats()["node"]["shards"] for s in (srv_a, srv_b)) == [32, 32], 20,
             "the nodes to hold 32 shards each", interval=0.1)


def worker(a, b, wid, pool, server_key):
    """A worker given both nodes' tcp endpoints, with `server_key`."""
    rc, out, err = sb("keys", "new", wid, "--pool", pool, "--data", a.data)
    check(rc == 0, "keys new: %d %s %s", rc, out, err)
    secret = out.strip().splitlines()[-1]
    # the worker key is allowed on both nodes
    shutil.copy(os.path.join(a.data, "certs", "clients", wid), os.path.join(b.data, "certs", "clients", wid))
    return Proc([SB_BIN, "worker", "--connect", "%s,%s" % (a.tcp, b.tcp), "--id", wid, "--pool", pool,
                 "--lease", "6", "--cert", secret, "--server-key", server_key],
                os.path.join(tmpdir(), "worker-%s.log" % wid), env={"OPENAI_API_KEY": ""})


def worker_on_both(a, b, wid):
    """Once the nodes settled, a worker of pool p given both nodes and
    both server keys, registered through A: (its Proc, B's server key)."""
    settled(a, b)
    ka, kb = (os.path.join(s.data, "certs", "server") for s in (a, b))
    w = worker(a, b, wid, "p", "%s,%s" % (ka, kb))
    wait_for(lambda: a.control().request("worker.get", {"worker_id": wid}).type == "worker.get.ok",
             15, "%s to register through A over CURVE" % wid)
    return w, kb


def registrations(w):
    return w.log().count("registered worker=")


def test_a_worker_fails_over_to_a_node_with_another_server_key():
    """Two workers, each given A then B: w-two with A's and B's server
    keys, w-one with A's only (what one --server-key gives). Both work
    through A. After A's kill -9 both fail over to B; w-two gets through
    B's handshake, registers there and runs B's run; w-one never gets
    through."""
    def body(pg):
        llm = LLM()
        llm.script("cv", [{"text": "worker done"}], repeat_last=True)
        a, b = node(pg, llm, "cv"), node(pg, llm, "cv")
        w2 = w1 = None
        try:
            settled(a, b)
            ka, kb = (os.path.join(s.data, "certs", "server") for s in (a, b))
            check(cert_keys(ka)[0] != cert_keys(kb)[0], "the two nodes share a server key")
            w2 = worker(a, b, "w-two", "p", "%s,%s" % (ka, kb))
            w1 = worker(a, b, "w-one", "q", ka)
            for wid, pool in (("w-two", "p"), ("w-one", "q")):
                wait_for(lambda: a.control().request("worker.get", {"worker_id": wid}).type == "worker.get.ok",
                         15, "%s to register through A over CURVE" % wid)
                sid = new_session(a, tmpdir(), approval_policy="yolo")
                run_id = call(a, "run.request", {"session_id": sid, "input": "through A",
                                                 "target": {"executor": "worker", "pool": pool}})["run"]["run_id"]
                run = wait_run(a, run_id, timeout=30)
                check(run["status"] == "completed" and run["worker_id"] == wid, "%s's run through A: %r", wid, run)
            a.proc.kill()
            # each worker's next long-poll claim (at most 5 s) finds A gone
            for w in (w2, w1):
                wait_for(lambda: "going on through %s" % b.tcp in w.log(), 20, "the worker to fail over to B")
            # B does not know w-two's session to its bus: the claim is
            # answered not_found, and it registers again, through B
            wait_for(lambda: registrations(w2) >= 2, 20, "w-two to register again, through B")
            sid = new_session(b, tmpdir(), approval_policy="yolo")
            run_id = call(b, "run.request", {"session_id": sid, "input": "through B",
                                             "target": {"executor": "worker", "pool": "p"}})["run"]["run_id"]
            run = wait_run(b, run_id, timeout=30)
            check(run["status"] == "completed" and run["worker_id"] == "w-two", "w-two's run through B: %r\n%s",
                  run, w2.log()[-3000:])
            check("worker done" in json.dumps(tape(b, sid)), "the model's answer is not on B's tape")
            # w-one trusts A's key only: B's handshake never completes
            check(registrations(w1) == 1 and w1.alive(), "w-one registered through B with A's key: %s",
                  w1.log()[-2000:])
            check("forbidden" not in w2.log(), "B refused w-two: %s", w2.log()[-3000:])
        finally:
            for w in (w2, w1):
                if w:
                    w.kill()
            b.stop()
            a.stop()
    with_postgres(body)


def test_a_run_in_flight_goes_on_through_the_other_node():
    """A worker over CURVE runs a run of A's session (a tool that sleeps
    4 s); A is killed mid-tool. The worker's buses fail over to B, whose
    broker never forwarded the claim: the first heartbeat there names the
    worker, the run actor finds the claim is that worker's with that
    fence, and the reply grants it, so the tool's result, the model's
    answer and the completion all land through B."""
    def body(pg):
        llm = LLM()
        llm.script("fl", [{"tool_calls": [shell("echo $$ > started; sleep 4; echo slept > slept.txt", "c_sl")]},
                          {"text": "worker done"}], repeat_last=True)
        a, b = node(pg, llm, "fl"), node(pg, llm, "fl")
        w = None
        try:
            w, kb = worker_on_both(a, b, "w-fly")
            ws = tmpdir()
            sid = new_session(a, ws, approval_policy="yolo")
            run_id = call(a, "run.request", {"session_id": sid, "input": "sleep on the worker",
                                             "target": {"executor": "worker", "pool": "p"}})["run"]["run_id"]
            wait_for(lambda: os.path.exists(os.path.join(ws, "started")), 20, "the tool to start on the worker")
            r = get_run(a, run_id)
            check(r["worker_id"] == "w-fly", "the run is not on the worker: %r", r)
            # another worker key that knows the run and its fence gets no grant on B
            rc, out, err = sb("keys", "new", "w-evil", "--pool", "p", "--data", a.data)
            check(rc == 0, "keys new: %d %s %s", rc, out, err)
            shutil.copy(os.path.join(a.data, "certs", "clients", "w-evil"),
                        os.path.join(b.data, "certs", "clients", "w-evil"))
            evil = CurveClient(b.tcp, cert_keys(kb)[0], cert_keys(out.strip().splitlines()[-1]))
            try:
                beat = {"run_id": run_id, "fence": r["fence"]}
                for wid, why in (("w-evil", "not claimed by worker w-evil"), ("w-fly", "worker_id w-evil only")):
                    t, reply = evil.request("run.heartbeat", dict(beat, worker_id=wid), timeout=15)
                    check(forbidden((t, reply)) and why in reply["message"], "w-evil's heartbeat as %s: %s %r",
                          wid, t, reply)
                t, reply = evil.request("session.append", {"session_id": sid, "run_id": run_id, "fence": r["fence"],
                                                           "kind": "text", "body": {"text": "evil"}})
                check(forbidden((t, reply)), "w-evil appended after its refused heartbeats: %s %r", t, reply)
            finally:
                evil.close()
            a.proc.kill()
            run = wait_run(b, run_id, timeout=40)
            check(run["status"] == "completed", "the worker's run after its node died: %r\n%s", run,
                  w.log()[-3000:])
            check(os.path.exists(os.path.join(ws, "slept.txt")), "the tool did not finish")
            check("going on through %s" % b.tcp in w.log(), "the worker did not fail over to B: %s", w.log()[-2000:])
            check("forbidden" not in w.log(), "B refused the worker: %s", w.log()[-3000:])
            entries = tape(b, sid)
            check_tape_contiguous(entries, "the session's tape")
            done = [e for e in entries if e["kind"] == "run.status" and e["body"]["status"] == "completed"]
            check(len(done) == 1, "completed entries %r", done)
            check("worker done" in json.dumps(entries), "the model's answer is not on the tape")
            check("evil" not in [e["body"].get("text") for e in entries], "w-evil's text is on the tape")
        finally:
            if w:
                w.kill()
            b.stop()
            a.stop()
    with_postgres(body)


def test_an_approval_asked_through_the_dead_node_is_answered_through_the_other():
    def body(pg):
        llm = LLM()
        llm.script("fa", [{"tool_calls": [{"name": "write_file", "arguments": {"path": "made.txt",
                                                                                "content": "approved\n"},
                                           "call_id": "c_write"}]},
                          {"text": "written"}])
        a, b = node(pg, llm, "fa"), node(pg, llm, "fa")
        w = None
        try:
            w, kb = worker_on_both(a, b, "w-ask")
            ws = tmpdir()
            sid = new_session(a, ws, approval_policy="auto", target="worker:p")
            run_id = call(a, "session.prompt", {"session_id": sid, "text": "write it"})["run_id"]
            box = {}

            def pending():
                ias = call(a, "interact.list", {"session_id": sid, "status": "pending"})["interactions"]
                box["ia"] = ias[0]["interaction_id"] if ias else None
                return box["ia"] is not None
            wait_for(pending, 30, "the worker's approval request through A")
            a.proc.kill()
            # answered through B at once, while A's shard lease (1.5 s) has
            # not lapsed: B's interact actor forwards the answer to A, and
            # the forward goes to B itself once B takes A's shards, well
            # within a client's wait (not at the forward's 30 s deadline)
            check(b.stats()["node"]["shards"] == 32, "B took A's shards before the answer was sent")
            t0 = time.monotonic()
            m = b.control().request("interact.resolve", {"interaction_id": box["ia"], "decision": "approve"},
                                    timeout=10)
            check(m.type == "interact.resolve.ok", "resolve through B: %s %r", m.type, m.body)
            check(time.monotonic() - t0 < LEASE_MS / 1000.0 + 3, "the answer took %.1f s", time.monotonic() - t0)
            wait_for(lambda: "going on through %s" % b.tcp in w.log(), 20, "the worker to fail over to B")
            run = wait_run(b, run_id, timeout=40)
            check(run["status"] == "completed" and run["worker_id"] == "w-ask", "run: %r\n%s", run, w.log()[-3000:])
            with open(os.path.join(ws, "made.txt")) as f:
                check(f.read() == "approved\n", "the approved write did not happen")
            check("forbidden" not in w.log(), "B refused the worker: %s", w.log()[-3000:])
        finally:
            if w:
                w.kill()
            b.stop()
            a.stop()
    with_postgres(body)


def test_server_key_lists_that_do_not_fit_are_usage_errors():
    d = tmpdir()
    cert = os.path.join(d, "k")
    open(cert, "w").close()
    cases = [
        (["--connect", "tcp://127.0.0.1:1,tcp://127.0.0.1:3,tcp://127.0.0.1:5", "--server-key", "s1,s2"],
         "2 server keys for 3 endpoints"),
        (["--connect", "tcp://127.0.0.1:1,tcp://127.0.0.1:3", "--server-key", "s1,,s2"], "not 's1,,s2'"),
        (["--connect", "tcp://127.0.0.1:1,tcp://127.0.0.1:3", "--server-key", "s1,"], "not 's1,'"),
        (["--connect", "tcp://127.0.0.1:1", "--server-key", ",".join("s%d" % k for k in range(17))],
         "more than 16"),
    ]
    for cmd in (["worker", "--id", "w"], ["actor", "echo"]):
        for args, want in cases:
            rc, out, err = sb(*(cmd + args + ["--cert", cert]), timeout=20)
            check(rc == 2 and want in err, "%s %s: %d %r", cmd[0], args, rc, err)
    # one key for any number of endpoints is what it was: the file is read
    rc, out, err = sb("worker", "--connect", "tcp://127.0.0.1:1,tcp://127.0.0.1:3", "--cert", cert,
                      "--server-key", os.path.join(d, "absent"), timeout=20)
    check(rc == 1 and "cannot read" in err, "one key for two endpoints: %d %r", rc, err)
    rc, out, err = sb("worker", "--help")
    check(rc == 0 and "FILE1,FILE2" in out, "worker --help: %r", out)


if __name__ == "__main__":
    run_tests(globals())
