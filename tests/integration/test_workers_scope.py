#!/usr/bin/python3
"""A worker key reaches only the sessions it holds a claim on (issue 12,
"Identity"; docs/workers.md, "Security on TCP"), with Debian's
python3-zmq over CURVE TCP as the worker:

  - without a claim, a worker key cannot read a session (session.get,
    session.events), append to it, ask for an approval in it, read an
    interaction, or use the model (llm.*): `forbidden`;
  - a claim granted to the key (the run.claim reply the broker forwards
    to it) opens its run's session, and that session only; the grant
    ends with run.complete, with a `fenced` reply, and when the lease
    lapses;
  - a worker key cannot subscribe to the event plane or the tap (both
    show every session): the handshake is refused, while a client key
    gets in on both;
  - a real `switchboard worker` over CURVE TCP still asks for an approval
    in its run and learns the answer (by polling interact.get, since it
    may not subscribe), and its log shows no refusal.
"""
import os
import sys
import time

import zmq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import SB_BIN, Proc, Server, check, context, now_ms, run_tests, sb, tmpdir, wait_for  # noqa: E402
from sbagent import (LLM, LLM_ENV, CurveClient, call, cert_keys, forbidden, free_port, get_run, llm_args,  # noqa: E402
                     new_session, wait_run)


def handshake(endpoint, server_key, keys, prefix=b""):
    """Connects a SUB with `keys` and waits for the handshake's outcome:
    'ok' or 'refused' (ZAP said no)."""
    s = context().socket(zmq.SUB)
    s.setsockopt(zmq.LINGER, 0)
    s.curve_serverkey = server_key
    s.curve_publickey, s.curve_secretkey = keys
    mon = s.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_HANDSHAKE_FAILED_AUTH
                               | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL)
    s.setsockopt(zmq.SUBSCRIBE, prefix)
    s.connect(endpoint)
    outcome = None
    try:
        while outcome is None and mon.poll(20000):
            f = mon.recv_multipart()
            ev = int.from_bytes(f[0][:2], "little")
            if ev == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                outcome = "ok"
            elif ev in (zmq.EVENT_HANDSHAKE_FAILED_AUTH, zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL):
                outcome = "refused"
    finally:
        s.disable_monitor()
        mon.close(0)
        s.close(0)
    check(outcome is not None, "no handshake outcome on %s", endpoint)
    return outcome


def test_worker_key_reaches_only_its_claimed_session():
    port = free_port()
    tcp = "tcp://127.0.0.1:%d" % port
    server = Server(args=["--bus", tcp]).start()
    certs = os.path.join(server.data, "certs")
    server_key, _ = cert_keys(os.path.join(certs, "server"))
    rc, out, err = sb("keys", "new", "w1", "--pool", "p", "--data", server.data)
    check(rc == 0, "keys new w1: %r", err)
    wk = cert_keys(out.strip().splitlines()[-1])
    rc, out, err = sb("keys", "new", "c1", "--client", "--data", server.data)
    check(rc == 0, "keys new c1: %r", err)
    ck = cert_keys(out.strip().splitlines()[-1])
    w = CurveClient(tcp, server_key, wk)
    try:
        other = new_session(server, tmpdir(), approval_policy="yolo")
        call(server, "session.append", {"session_id": other, "kind": "note", "body": {"text": "private"}})

        # no claim: nothing of any session, nor the model
        for type, body in (("session.get", {"session_id": other}),
                           ("session.events", {"session_id": other}),
                           ("session.append", {"session_id": other, "kind": "note", "body": {"text": "x"},
                                               "fence": 1}),
                           ("session.steer.take", {"session_id": other, "run_id": "r", "step": 1}),
                           ("interact.request", {"session_id": other, "run_id": "r", "call_id": "c",
                                                 "tool": "shell", "arguments": "{}"}),
                           ("interact.get", {"interaction_id": "ia_01ARZ3NDEKTSV4RRFFQ69G5FAV"}),
                           ("llm.models", {}),
                           ("run.heartbeat", {"run_id": "r", "fence": 1})):
            r = w.request(type, body)
            check(forbidden(r), "a worker key without a claim: %s answered %r", type, r)

        # a claim opens its run's session, and only that one
        r = w.request("worker.register", {"worker_id": "w1", "instance_id": "i1", "pool": "p",
                                          "workspace_sync": "same_path"})
        check(r[0] == "worker.register.ok", "register: %r", r)
        mine = new_session(server, tmpdir(), approval_policy="yolo", target="worker:p")
        run_id = call(server, "session.prompt", {"session_id": mine, "text": "hi"})["run_id"]
        r = w.request("run.claim", {"worker_id": "w1", "pool": "p", "lease_s": 30, "wait_ms": 5000})
        check(r[0] == "run.claim.ok" and r[1].get("run_id") == run_id, "claim: %r", r)
        fence = r[1]["fence"]
        r = w.request("session.get", {"session_id": mine})
        check(r[0] == "session.get.ok", "its own session: %r", r)
        r = w.request("session.events", {"session_id": mine})
        check(r[0] == "session.events.ok", "its own session's events: %r", r)
        r = w.request("session.get", {"session_id": other})
        check(forbidden(r), "another session while holding a claim: %r", r)
        r = w.request("session.append", {"session_id": other, "kind": "note", "body": {"text": "x"},
                                         "fence": fence})
        check(forbidden(r), "an append to another session: %r", r)
        r = w.request("session.append", {"session_id": mine, "run_id": "run_someone_else", "kind": "note",
                                         "body": {"text": "x"}, "fence": fence})
        check(forbidden(r), "an append naming another run: %r", r)
        r = w.request("run.heartbeat", {"run_id": run_id, "fence": fence})
        check(r[0] == "run.heartbeat.ok", "heartbeat: %r", r)
        r = w.request("session.append", {"session_id": mine, "run_id": run_id, "kind": "note",
                                         "body": {"text": "from w1"}, "fence": fence})
        check(r[0] == "session.append.ok", "its own append: %r", r)
        r = w.request("interact.request", {"session_id": mine, "run_id": run_id, "call_id": "c1",
                                           "tool": "shell", "arguments": "{\"command\": \"ls\"}"})
        check(r[0] == "interact.request.ok", "its approval request: %r", r)
        ia = r[1]["interaction"]["interaction_id"]
        r = w.request("interact.get", {"interaction_id": ia})
        check(r[0] == "interact.get.ok", "its interaction: %r", r)
        r = w.request("interact.resolve", {"interaction_id": ia, "decision": "approve"})
        check(forbidden(r), "a worker resolving an approval: %r", r)
        r = w.request("llm.models", {})
        check(not forbidden(r), "the model while holding a claim: %r", r)

        # run.complete ends the grant
        r = w.request("run.complete", {"run_id": run_id, "fence": fence, "status": "completed"})
        check(r[0] == "run.complete.ok", "complete: %r", r)
        for type, body in (("session.get", {"session_id": mine}), ("interact.get", {"interaction_id": ia}),
                           ("llm.models", {})):
            r = w.request(type, body)
            check(forbidden(r), "after run.complete: %s answered %r", type, r)

        # a lapsed lease ends it: claim with a 1 s lease and let it lapse
        run2 = call(server, "session.prompt", {"session_id": mine, "text": "again"})["run_id"]
        r = w.request("run.claim", {"worker_id": "w1", "pool": "p", "lease_s": 1, "wait_ms": 5000})
        check(r[0] == "run.claim.ok" and r[1].get("run_id") == run2, "claim 2: %r", r)
        fence2 = r[1]["fence"]
        r = w.request("session.get", {"session_id": mine})
        check(r[0] == "session.get.ok", "its session under claim 2: %r", r)
        wait_run(server, run2, ("expired",), timeout=15)
        r = w.request("session.get", {"session_id": mine})
        check(forbidden(r), "after the lease lapsed: %r", r)
        r = w.request("run.heartbeat", {"run_id": run2, "fence": fence2})
        check(forbidden(r), "a heartbeat after the lease lapsed: %r", r)

        # a fenced reply ends it: claim the resumed run, then take the
        # session's fence away from under it (a later claim of the session)
        run3 = call(server, "run.resume", {"run_id": run2})["run"]["run_id"]
        r = w.request("run.claim", {"worker_id": "w1", "pool": "p", "lease_s": 30, "wait_ms": 5000})
        check(r[0] == "run.claim.ok" and r[1].get("run_id") == run3, "claim 3: %r", r)
        fence3 = r[1]["fence"]
        r = w.request("session.append", {"session_id": mine, "run_id": run3, "kind": "note",
                                         "body": {"text": "x"}, "fence": fence3 + 1})
        check(r[0] == "error" and r[1]["code"] == "fenced", "an append with a fence ahead: %r", r)
        r = w.request("session.get", {"session_id": mine})
        check(forbidden(r), "after a fenced reply: %r", r)
        check(get_run(server, run3)["status"] in ("claimed", "running", "expired"), "run 3 %r",
              get_run(server, run3))

        # a heartbeat's reply extends the grant past the claim's lease
        mine2 = new_session(server, tmpdir(), approval_policy="yolo", target="worker:p")
        run4 = call(server, "session.prompt", {"session_id": mine2, "text": "hb"})["run_id"]
        r = w.request("run.claim", {"worker_id": "w1", "pool": "p", "lease_s": 2, "wait_ms": 5000})
        check(r[0] == "run.claim.ok" and r[1].get("run_id") == run4, "claim 4: %r", r)
        c4 = r[1]
        while True:
            r = w.request("run.heartbeat", {"run_id": run4, "fence": c4["fence"]})
            check(r[0] == "run.heartbeat.ok", "heartbeat of run 4: %r", r)
            if now_ms() > c4["lease_expires_at"] + 200:
                break
            time.sleep(0.2)     # pacing the heartbeats, as a worker does (lease/3 at most)
        r = w.request("session.get", {"session_id": mine2})
        check(r[0] == "session.get.ok", "past the claim's lease, heartbeats kept the grant: %r", r)
        r = w.request("run.complete", {"run_id": run4, "fence": c4["fence"], "status": "completed"})
        check(r[0] == "run.complete.ok", "complete 4: %r", r)

        # the event plane and the tap: a client key gets in, a worker key not
        pub = "tcp://127.0.0.1:%d" % (port + 1)
        tap = "tcp://127.0.0.1:%d" % (port + 2)
        check(handshake(pub, server_key, ck, b"session/") == "ok", "a client key on the event plane")
        check(handshake(pub, server_key, wk, b"session/") == "refused", "a worker key got onto the event plane")
        check(handshake(tap, server_key, ck) == "ok", "a client key on the tap")
        check(handshake(tap, server_key, wk) == "refused", "a worker key got onto the tap")
        wait_for(lambda: server.control().request("bus.stats", {}).type == "bus.stats.ok", 5, "the server")
    finally:
        w.close()
        server.stop()


def test_real_worker_over_curve_asks_for_an_approval():
    llm = LLM()
    llm.script("ap", [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "made.txt", "content": "approved\n"},
                         "call_id": "c_write"}]},
        {"text": "written"},
    ])
    port = free_port()
    tcp = "tcp://127.0.0.1:%d" % port
    server = Server(args=llm_args(llm, "ap") + ["--bus", tcp], env=LLM_ENV).start()
    w = None
    try:
        rc, out, err = sb("keys", "new", "wa", "--pool", "p", "--data", server.data)
        check(rc == 0, "keys new wa: %r", err)
        w = Proc([SB_BIN, "worker", "--connect", tcp, "--id", "wa", "--pool", "p", "--cert",
                  out.strip().splitlines()[-1], "--server-key", os.path.join(server.data, "certs", "server")],
                 os.path.join(server.data, "worker-wa.log"), env={"OPENAI_API_KEY": ""})
        wait_for(lambda: server.control().request("worker.get", {"worker_id": "wa"}).type == "worker.get.ok", 15,
                 "the worker to register over CURVE")
        ws = tmpdir()
        sid = new_session(server, ws, approval_policy="auto", target="worker:p")
        run_id = call(server, "session.prompt", {"session_id": sid, "text": "write it"})["run_id"]
        box = {}

        def pending():
            ias = call(server, "interact.list", {"session_id": sid, "status": "pending"})["interactions"]
            box["ia"] = ias[0]["interaction_id"] if ias else None
            return box["ia"] is not None
        wait_for(pending, 30, "the worker's approval request")
        call(server, "interact.resolve", {"interaction_id": box["ia"], "decision": "approve"})
        run = wait_run(server, run_id, timeout=30)
        check(run["status"] == "completed" and run["worker_id"] == "wa", "run: %r\n%s", run, w.log())
        with open(os.path.join(ws, "made.txt")) as f:
            check(f.read() == "approved\n", "the approved write did not happen")
        check("forbidden" not in w.log() and "refused" not in server.log(), "a refusal in the logs:\n%s\n%s",
              w.log(), server.log())
    finally:
        if w:
            w.stop()
        server.stop()
        llm.stop()


if __name__ == "__main__":
    run_tests(globals())
