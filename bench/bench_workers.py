#!/usr/bin/python3
"""bench_workers — the run coordinator under load, and the worker protocol
(issue 12; docs/workers.md).

    /usr/bin/python3 bench/bench_workers.py [--bin build/switchboard] [--runs 200] [--reps 3]

Each repetition starts a fresh `switchboard serve --actors llm,session,run`
whose only executor is this script's exec instance (it accepts every
exec.start at once, so the run actor's own work is what is measured), and
an outside worker (pyzmq) registered in pool `bench`.

Figures, one JSON line each, the median of the repetitions:

  workers_calls_per_second  claims and heartbeats answered per second by
                            the run actor while RUNS runs start at once
                            (bursts of RUNS starts are repeated, up to 8,
                            until 600 heartbeats are sampled)
                            (session.get, outbox appends, session.fence and
                            exec.start for each, all in flight together);
                            one caller, each call sent when the previous
                            one is answered
  workers_heartbeat_p99     p99 of a heartbeat's round trip meanwhile, ms
                            (target < 5 ms; p50 alongside)
  workers_heartbeat_p99_idle  the control: p99 of a heartbeat's round trip
                            with nothing else going on (p50 alongside)
  workers_run_commits_per_start  the run store's durable commits per
                            started run (LMDB's txn id, read with mdb_stat;
                            -1 without it): the inline code made 5
  workers_claim_to_event    a waiting long-poll claim: from run.request to
                            the first entry the worker appends after its
                            claim reaching a subscriber on the event plane
                            (ipc), ms, median of 20
  workers_claim_to_event_curve  the same with the worker on CURVE TCP
                            (loopback), the ipc figure beside
  workers_lapse_to_expired  a lease of 1 s: from the worker's last
                            heartbeat to `expired` on the event plane, ms,
                            median of 5 (bound: lease + 1 s)

Needs Debian's python3-zmq and python3-msgpack (run with /usr/bin/python3).
"""
import argparse
import json
import os
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))


MIN_SAMPLES = 600      # heartbeats sampled during the starts, at least...
MAX_BURSTS = 8         # ...unless this many bursts of RUNS starts gave fewer


def pct(vals, p):
    vals = sorted(vals)
    return vals[min(len(vals) - 1, int(round(p / 100.0 * (len(vals) - 1))))]


def one_rep(sbt, nruns):
    from sbtest import Client, Instance, Server, Sub, sb, tmpdir, unpack, context
    import re
    import zmq
    sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
    from test_curve import free_port
    port = free_port()
    server = Server(args=["--actors", "llm,session,run", "--bus", "tcp://127.0.0.1:%d" % port]).start()
    api = Client(server.endpoint("cmd"), name="bench-api")

    def call(c, type, body, timeout=30):
        m = c.request(type, body, timeout=timeout)
        if m.type != type + ".ok":
            raise RuntimeError("%s answered %s %r" % (type, m.type, m.body))
        return m.body

    # the executor: answers every exec.start at once, on its own thread
    ex = Instance(server.endpoint("cmd"), name="bench-exec")
    ex.register("exec", "bench-exec")
    stop = threading.Event()
    started = [0]
    fences = {}                 # run_id -> fence of every exec.start accepted

    def exec_loop():
        # an instance that misses 3 heartbeats is forgotten by the broker
        beat = 0.0
        while not stop.is_set():
            if time.monotonic() - beat > 0.5:
                ex.heartbeat()
                beat = time.monotonic()
            req = ex.next_request(timeout=0.1)
            if req is not None:
                ex.reply(req, body={"instance": "bench-exec"} if req.type == "exec.start" else {"found": False})
                if req.type == "exec.start":
                    fences[req.body.get("run_id")] = req.body.get("fence")
                    started[0] += 1
    th = threading.Thread(target=exec_loop, daemon=True)
    th.start()

    # a worker holding one run, to heartbeat it
    wk = Client(server.endpoint("cmd"), name="bench-worker")
    call(wk, "worker.register", {"worker_id": "bw", "instance_id": "bi", "pool": "bench"})
    hsid = call(api, "session.create", {"workspace": tmpdir(), "approval_policy": "yolo"})["session"]["session_id"]
    call(api, "run.request", {"session_id": hsid, "input": "hb", "target": {"executor": "worker", "pool": "bench"}})
    claim = call(wk, "run.claim", {"worker_id": "bw", "pool": "bench", "lease_s": 60})
    hb = {"run_id": claim["run_id"], "fence": claim["fence"]}

    # the control: heartbeats with nothing else going on, so the figure
    # under load can be told from the machine's own scheduling noise
    call(wk, "run.heartbeat", hb)
    idle = []
    for _ in range(300):
        a = time.monotonic()
        wk.request("run.heartbeat", hb, timeout=10)
        idle.append((time.monotonic() - a) * 1000)

    # the run store's commits while the runs start (mdb_stat, when there)
    def txn_id():
        try:
            import subprocess
            p = subprocess.run(["mdb_stat", "-e", os.path.join(server.data, "run")], capture_output=True,
                               text=True, timeout=10)
            for line in p.stdout.splitlines():
                if "Last transaction ID:" in line:
                    return int(line.split(":")[1])
        except (OSError, ValueError):
            pass
        return None
    txns = 0
    # bursts of nruns starts, each on fresh sessions (made outside the
    # timed window), until there are MIN_SAMPLES heartbeats to take a p99
    # of: a fast start leaves few samples in one burst
    rtts, calls, wall, bursts = [], 0, 0.0, 0
    while bursts < MAX_BURSTS and (bursts == 0 or len(rtts) < MIN_SAMPLES):
        sids = [call(api, "session.create", {"workspace": tmpdir(), "approval_policy": "yolo"})["session"]["session_id"]
                for _ in range(nruns)]
        target = started[0] + nruns
        txn0 = txn_id()
        # every request sent at once, answers collected later
        t0 = time.monotonic()
        for s in sids:
            api.send("run.request", {"session_id": s, "input": "go"})
        deadline = t0 + 60
        k = 0
        # until the executor has accepted every run (each was fetched, queued,
        # put on the tape, fenced and started by the run actor meanwhile)
        while time.monotonic() < deadline and started[0] < target:
            a = time.monotonic()
            if k % 2 == 0:
                m = wk.request("run.heartbeat", hb, timeout=10)
                rtts.append((time.monotonic() - a) * 1000)
            else:
                m = wk.request("run.claim", {"worker_id": "bw", "pool": "bench", "lease_s": 60}, timeout=10)
            if m.is_error():
                raise RuntimeError("%s" % m.body)
            calls += 1
            k += 1
        if started[0] < target:
            lg = server.log(); sys.stderr.write("\n".join(l for l in lg.splitlines() if " info " not in l)[-3000:] + "\nclaimed lines: %d, queued lines: %d\n" % (lg.count("status=claimed"), lg.count("status=queued")))
            raise RuntimeError("only %d of %d runs started in 60 s" % (started[0] - target + nruns, nruns))
        wall += time.monotonic() - t0
        bursts += 1
        api.drain()
        # every start's writes are committed once run.list answers (it
        # waits for them): the commits of the burst's starts
        call(api, "run.list", {"limit": 1})
        txn1 = txn_id()
        txns = txns + txn1 - txn0 if txns is not None and txn0 is not None and txn1 is not None else None
        # the burst's runs finish (outside the timed window), so each burst
        # starts with the same few active runs
        done = list(fences.items())
        fences.clear()
        fids = [api.send("run.finish", {"run_id": r, "fence": f, "status": "completed"}) for r, f in done]
        for i in fids:
            api.wait_reply(i, timeout=30)
    out = {"cps": calls / wall, "hb_p99": pct(rtts, 99), "hb_p50": pct(rtts, 50), "wall_s": wall / bursts,
           "heartbeats": len(rtts), "bursts": bursts, "hb_idle_p99": pct(idle, 99), "hb_idle_p50": pct(idle, 50)}
    out["commits"] = txns / float(nruns * bursts) if txns is not None else -1.0

    # claim to first event: a waiting claim, then a run for it
    api.drain()
    sub = Sub(server.endpoint("pub"), "session/")
    def claim_to_event(w, worker_id, pool):
        """20 runs through a waiting long-poll claim of `w`: the medians of
        run.request -> the claim's reply, and -> the worker's first entry
        at the subscriber, ms."""
        lat, qlat = [], []
        for i in range(20):
            sid = call(api, "session.create", {"workspace": tmpdir(), "approval_policy": "yolo"})["session"]["session_id"]
            cid = w.send("run.claim", {"worker_id": worker_id, "pool": pool, "lease_s": 60, "wait_ms": 10000})
            time.sleep(0.02)        # the claim is waiting in the run actor
            a = time.monotonic()
            call(api, "run.request", {"session_id": sid, "input": "x", "target": {"executor": "worker", "pool": pool}})
            c = w.wait_reply(cid, timeout=10).body
            qlat.append((time.monotonic() - a) * 1000)
            w.request("session.append", {"session_id": sid, "run_id": c["run_id"], "fence": c["fence"],
                                         "kind": "note", "body": {"text": "first"}})
            while True:
                f = sub.recv_frames(timeout=5)
                if f is None:
                    raise RuntimeError("no event")
                body = unpack(f[2])
                if body.get("kind") == "note" and body.get("session_id") == sid:
                    break
            lat.append((time.monotonic() - a) * 1000)
            w.request("run.complete", {"run_id": c["run_id"], "fence": c["fence"], "status": "completed"})
        return statistics.median(lat), statistics.median(qlat)

    out["claim_event"], out["claim_reply"] = claim_to_event(wk, "bw", "bench")

    # the same over CURVE TCP: a worker key, the worker's socket on tcp
    rc, kout, kerr = sb("keys", "new", "bt", "--pool", "tcp", "--data", server.data)
    if rc != 0:
        raise RuntimeError("keys new: %s" % kerr)

    def keys(path):
        text = open(path).read()
        sk = re.search(r'secret-key = "(.{40})"', text)
        return (re.search(r'public-key = "(.{40})"', text).group(1).encode(), sk.group(1).encode() if sk else None)
    pub, sec = keys(kout.strip().splitlines()[-1])
    spub, _ = keys(os.path.join(server.data, "certs", "server"))
    wt = Client.__new__(Client)
    wt.name, wt.strict, wt.backlog = "bench-tcp", True, []
    wt.sock = context().socket(zmq.DEALER)
    wt.sock.setsockopt(zmq.LINGER, 0)
    wt.sock.curve_serverkey, wt.sock.curve_publickey, wt.sock.curve_secretkey = spub, pub, sec
    wt.sock.connect("tcp://127.0.0.1:%d" % port)
    call(wt, "worker.register", {"worker_id": "bt", "instance_id": "bti", "pool": "tcp"})
    out["claim_event_tcp"], _ = claim_to_event(wt, "bt", "tcp")
    wt.close()

    # heartbeat lapse to expired, seen on the event plane
    lapses = []
    for i in range(5):
        sid = call(api, "session.create", {"workspace": tmpdir(), "approval_policy": "yolo"})["session"]["session_id"]
        call(api, "run.request", {"session_id": sid, "input": "x", "target": {"executor": "worker", "pool": "bench"}})
        c = call(wk, "run.claim", {"worker_id": "bw", "pool": "bench", "lease_s": 1})
        call(wk, "run.heartbeat", {"run_id": c["run_id"], "fence": c["fence"]})
        a = time.monotonic()
        while True:
            f = sub.recv_frames(timeout=5)
            if f is None:
                raise RuntimeError("no expiry")
            body = unpack(f[2])
            if (body.get("session_id") == sid and body.get("kind") == "run.status"
                    and body.get("body", {}).get("status") == "expired"):
                break
        lapses.append((time.monotonic() - a) * 1000)
    out["lapse"] = statistics.median(lapses)

    stop.set()
    th.join()
    sub.close()
    for c in (api, wk, ex):
        c.close()
    server.stop()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.environ.get("SB_BIN") or os.path.join(ROOT, "build", "switchboard"))
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    os.environ["SB_BIN"] = os.path.abspath(args.bin)
    os.environ.setdefault("SB_ROOT", ROOT)
    import sbtest
    reps = []
    for k in range(args.reps):
        r = one_rep(sbtest, args.runs)
        reps.append(r)
        sys.stderr.write("bench_workers: rep %d: %.0f calls/s, %.2f s per burst (%d bursts, %d heartbeats), heartbeat p50 %.2f ms "
                         "p99 %.2f ms (idle p99 %.2f ms), %.2f commits/run, claim->event %.2f ms ipc, %.2f ms curve tcp (claim reply %.2f ms), "
                         "lapse->expired %.0f ms\n"
                         % (k + 1, r["cps"], r["wall_s"], r["bursts"], r["heartbeats"], r["hb_p50"], r["hb_p99"],
                            r["hb_idle_p99"], r["commits"],
                            r["claim_event"], r["claim_event_tcp"], r["claim_reply"], r["lapse"]))
        sys.stderr.flush()
    common = {"runs": args.runs, "reps": len(reps), "load1": round(os.getloadavg()[0], 2), "cpus": os.cpu_count()}

    def fig(name, key, unit, nd, **extra):
        vals = [r[key] for r in reps]
        line = {"bench": name, "value": round(statistics.median(vals), nd), "unit": unit}
        line.update(common)
        line.update(extra)
        line["samples"] = [round(v, nd) for v in vals]
        print(json.dumps(line))
        sys.stdout.flush()
    fig("workers_calls_per_second", "cps", "calls/s", 0)
    fig("workers_heartbeat_p99", "hb_p99", "ms", 2, target=5,
        p50=round(statistics.median(r["hb_p50"] for r in reps), 2))
    fig("workers_heartbeat_p99_idle", "hb_idle_p99", "ms", 2,
        p50=round(statistics.median(r["hb_idle_p50"] for r in reps), 2))
    fig("workers_run_commits_per_start", "commits", "commits/run", 2)
    fig("workers_claim_to_event", "claim_event", "ms", 2, transport="ipc",
        claim_reply=round(statistics.median(r["claim_reply"] for r in reps), 2))
    fig("workers_claim_to_event_curve", "claim_event_tcp", "ms", 2, transport="tcp+curve",
        ipc_ms=round(statistics.median(r["claim_event"] for r in reps), 2))
    fig("workers_lapse_to_expired", "lapse", "ms", 0, lease_ms=1000, bound_ms=2000)


if __name__ == "__main__":
    main()
