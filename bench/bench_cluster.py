#!/usr/bin/python3
"""bench_cluster — several serve nodes on one PostgreSQL schema, beside one
node on LMDB and one on PostgreSQL, in the same run (docs/scale-out.md,
"A node in serve").

    SB_BIN=build/switchboard /usr/bin/python3 bench/bench_cluster.py [--reps 3] [--seconds 3]

Starts Debian's PostgreSQL in a temporary folder (tests/integration/sbpg.py,
fsync on), then, REPS times in alternation:

  - a closed loop of 64 appenders (one session.append in flight each, each
    on its own session, spread evenly over the nodes, each appender on the
    node that owns its session) against `serve --actors session` on LMDB,
    on PostgreSQL with one node, and on PostgreSQL with two nodes;
  - one event's latency to a follower: 200 appends one at a time, from
    the append's send to its entry's arrival at a follower of the session
    on an event plane; on LMDB and on PostgreSQL with one node the
    follower is on the node appended through, with two nodes (each on a
    --bus tcp:// port, so that they relay each other's events) it is on
    the other node;
  - a run's start to its first tape events (the demo model, `serve` with
    every actor, a session of its own per run, 8 runs one after another),
    on LMDB and on PostgreSQL with one node: from the send of run.request
    to its prompt entry, to `run.status running`, to the executor's first
    entry (`turn.begin`) and to the model's first (its first usage,
    tool.call or text.delta); then the run is cancelled;
  - kill -9 of one of two nodes (the default lease and heartbeat, or
    SWITCHBOARD_SHARD_LEASE_MS / _HEARTBEAT_MS): the time until the other
    node accepts an append to a session the dead node owned.

The clients are Python (8 processes of 8 threads), so the loop measures
the servers only while they are slower than the clients: the LMDB figure
here is the clients' ceiling, not LMDB's (bench_tape's C clients give
that). One JSON line per figure on stdout, medians over the repetitions:

  cluster.closed64.lmdb         appends/s, p50_us, p99_us
  cluster.closed64.pg1          the same on PostgreSQL, one node; ratio to lmdb
  cluster.closed64.pg2          the same on two nodes; ratio to lmdb and to pg1
  cluster.follow.lmdb           append -> follower on the same node: p50_us
                                (the value), p99_us
  cluster.follow.pg1            the same on PostgreSQL, one node
  cluster.follow.pg2            append through B -> a follower on A
  cluster.run_start.lmdb        run.request -> the executor's first entry,
                                ms (the value); to_prompt_ms,
                                to_running_ms, to_model_ms beside it
  cluster.run_start.pg1         the same on PostgreSQL, one node; ratio
  cluster.failover.kill9        seconds from kill -9 to served again, with
                                the lease and heartbeat in use

Without PostgreSQL's binaries one line says the bench is skipped.
"""
import argparse
import json
import multiprocessing
import os
import signal
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

from sbtest import Client, Server, Sub, tmpdir, unpack  # noqa: E402
from sbagent import free_port  # noqa: E402
from sbpg import Postgres, pg_bindir  # noqa: E402

PROCS, THREADS = 8, 8
FOLLOW_N = 200          # appends per repetition of the follower's latency
RUNS = 8                # runs per repetition of a run's start
MODEL_KINDS = ("usage", "tool.call", "text.delta")


def _appenders(endpoints, seconds, out):
    """One client process: THREADS appenders, each on a session of its own
    made on its node; puts (count, latencies in us) on `out`."""
    lat, count = [], [0]
    lock = threading.Lock()
    t_end = [0.0]

    def one(ep):
        c = Client(ep, name="bench-%d-%d" % (os.getpid(), threading.get_ident() % 100000))
        sid = c.request("session.create", {"workspace": "/tmp"}, timeout=30).body["session"]["session_id"]
        mine = []
        while time.monotonic() < t_end[0]:
            t0 = time.monotonic()
            m = c.request("session.append", {"session_id": sid, "kind": "note", "body": {"text": "x"}},
                          timeout=30)
            if m.type == "session.append.ok":
                mine.append(int((time.monotonic() - t0) * 1e6))
        c.close()
        with lock:
            lat.extend(mine)
            count[0] += len(mine)
    t_end[0] = time.monotonic() + seconds
    ts = [threading.Thread(target=one, args=(endpoints[k % len(endpoints)],)) for k in range(THREADS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    out.put((count[0], lat))


def closed64(servers, seconds):
    """appends/s, p50 us, p99 us of 64 closed-loop appenders over `servers`."""
    eps = [s.endpoint("cmd") for s in servers]
    q = multiprocessing.Queue()
    # process k's threads go round the nodes from k, so each node gets 32 of 64
    ps = [multiprocessing.Process(target=_appenders, args=(eps[k % len(eps):] + eps[:k % len(eps)], seconds, q))
          for k in range(PROCS)]
    t0 = time.monotonic()
    for p in ps:
        p.start()
    results = [q.get(timeout=seconds + 120) for _ in ps]
    for p in ps:
        p.join()
    took = time.monotonic() - t0
    lat = sorted(x for _, l in results for x in l)
    n = sum(c for c, _ in results)
    # the window is `seconds`; session creation is outside it
    return (n / seconds if took else 0, lat[len(lat) // 2] if lat else 0,
            lat[min(len(lat) - 1, len(lat) * 99 // 100)] if lat else 0)


def serve(url=None, env=None, bus=False, actors="session"):
    """A started serve: only the session actor unless `actors` is None
    (every actor, the demo model); with `bus`, on a tcp port of its own
    (CURVE), which a node needs for others to reach it."""
    args = (["--actors", actors] if actors else []) + (["--store", url] if url else [])
    if bus:
        args += ["--bus", "tcp://127.0.0.1:%d" % free_port()]
    return Server(args=args, env=dict(os.environ, SWITCHBOARD_LOG="warn", **(env or {}))).start(timeout=60)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, len(xs) * p // 100)] if xs else 0


def follow(writer, follower):
    """p50, p99 (us) from a session.append's send through `writer` to its
    entry at a follower on `follower`'s event plane (the session is
    made through the writer, so its node owns it)."""
    c = Client(writer.endpoint("cmd"), name="bench-follow")
    sid = c.request("session.create", {"workspace": "/tmp"}, timeout=10).body["session"]["session_id"]
    sub = Sub(follower.endpoint("pub"), "session/" + sid)
    arrived, stop = {}, [False]

    def reader():
        while not stop[0]:
            f = sub.recv_frames(timeout=0.1)
            if f:
                arrived.setdefault(unpack(f[2])["seq"], time.monotonic())
    # the follower's subscription (and, on another node, the relay's)
    # is made within a refresh: probe until an entry gets through
    t_end = time.monotonic() + 20
    while True:
        c.request("session.append", {"session_id": sid, "kind": "note", "body": {"text": "probe"}}, timeout=10)
        if sub.recv_frames(timeout=0.3) or time.monotonic() > t_end:
            break
    while sub.recv_frames(timeout=0.2):
        pass
    t = threading.Thread(target=reader)
    t.start()
    sent = {}
    for i in range(FOLLOW_N):
        t0 = time.monotonic()
        m = c.request("session.append", {"session_id": sid, "kind": "note", "body": {"text": "f%d" % i}},
                      timeout=10)
        if m.type == "session.append.ok":
            sent[m.body["seq"]] = t0
    t_end = time.monotonic() + 5
    while len([q for q in sent if q in arrived]) < len(sent) and time.monotonic() < t_end:
        time.sleep(0.01)
    stop[0] = True
    t.join()
    sub.close()
    c.close()
    lat = [int((arrived[q] - t0) * 1e6) for q, t0 in sent.items() if q in arrived]
    if len(lat) < len(sent):
        print("follow: %d of %d entries did not reach the follower" % (len(sent) - len(lat), len(sent)),
              file=sys.stderr)
    return pct(lat, 50), pct(lat, 99), len(sent) - len(lat)


def run_start(srv):
    """Medians (ms) over RUNS runs, each in a session of its own, from
    run.request's send to its prompt entry, to run.status running, to the
    executor's first entry and to the model's first."""
    c = Client(srv.endpoint("cmd"), name="bench-run")
    got = {"prompt": [], "running": [], "first": [], "model": []}
    for i in range(RUNS):
        sid = c.request("session.create", {"workspace": tmpdir(), "approval_policy": "yolo"},
                        timeout=10).body["session"]["session_id"]
        sub = Sub(srv.endpoint("pub"), "session/" + sid)
        time.sleep(0.2)                         # the subscription reaches the broker
        t0 = time.monotonic()
        m = c.request("run.request", {"session_id": sid, "input": "look around"}, timeout=10)
        if m.type != "run.request.ok":
            sys.exit("run.request answered %s %r" % (m.type, m.body))
        run_id = m.body["run"]["run_id"]
        seen, t_end = {}, time.monotonic() + 30
        while "model" not in seen and time.monotonic() < t_end:
            f = sub.recv_frames(timeout=1)
            if not f:
                continue
            e, now = unpack(f[2]), time.monotonic()
            kind, body = e.get("kind"), e.get("body") or {}
            if kind == "prompt":
                seen.setdefault("prompt", now)
            elif kind == "run.status" and body.get("status") == "running":
                seen.setdefault("running", now)
            elif kind == "turn.begin":
                seen.setdefault("first", now)
            elif kind in MODEL_KINDS:
                seen.setdefault("model", now)
        if len(seen) < 4:
            sys.exit("run %s: only %r of its first entries came within 30 s" % (run_id, sorted(seen)))
        for k in got:
            got[k].append((seen[k] - t0) * 1000)
        c.request("run.cancel", {"run_id": run_id}, timeout=10)
        t_end = time.monotonic() + 15
        while time.monotonic() < t_end:
            f = sub.recv_frames(timeout=1)
            if f and unpack(f[2]).get("kind") == "run.status" and \
                    (unpack(f[2]).get("body") or {}).get("status") in ("completed", "cancelled", "failed"):
                break
        sub.close()
    c.close()
    return {k: statistics.median(v) for k, v in got.items()}


def wait_shards(servers, want, timeout=60):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if sorted(s.stats()["node"]["shards"] for s in servers) == want:
            return
        time.sleep(0.05)
    sys.exit("the nodes did not settle at %r" % want)


def kill9(pg, schema):
    """Seconds from kill -9 of one node to the other serving its session."""
    a = serve(pg.url() + "?schema=" + schema)
    b = serve(pg.url() + "?schema=" + schema)
    try:
        wait_shards([a, b], [32, 32])
        c = Client(a.endpoint("cmd"), name="bench-k9")
        sid = c.request("session.create", {"workspace": "/tmp"}, timeout=10).body["session"]["session_id"]
        c.request("session.append", {"session_id": sid, "kind": "note", "body": {"text": "a"}}, timeout=10)
        c.close()
        lease = a.stats()["node"]["lease_ms"]
        a.proc.kill()
        t0 = time.monotonic()
        cb = Client(b.endpoint("cmd"), name="bench-k9b")
        while True:
            m = cb.request("session.append", {"session_id": sid, "kind": "note", "body": {"text": "b"}},
                           timeout=10)
            if m.type == "session.append.ok":
                break
            time.sleep(0.01)
        took = time.monotonic() - t0
        cb.close()
        return took, lease, b.stats()["node"]["heartbeat_ms"]
    finally:
        b.stop()
        a.stop(signal.SIGKILL)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0)
    a = ap.parse_args()
    # the clients are processes of their own: no ZeroMQ context crosses a fork
    multiprocessing.set_start_method("spawn")
    if not pg_bindir():
        print(json.dumps({"bench": "cluster", "skipped": "no PostgreSQL server binaries"}))
        return
    pg = Postgres(durable=True)
    rows = {"lmdb": [], "pg1": [], "pg2": []}
    fol = {"lmdb": [], "pg1": [], "pg2": []}
    runs = {"lmdb": [], "pg1": []}
    try:
        pg.start()
        for r in range(a.reps):
            s = serve()
            rows["lmdb"].append(closed64([s], a.seconds))
            fol["lmdb"].append(follow(s, s))
            s.stop()
            s = serve(pg.url() + "?schema=one%d" % r)
            rows["pg1"].append(closed64([s], a.seconds))
            fol["pg1"].append(follow(s, s))
            s.stop()
            n1 = serve(pg.url() + "?schema=two%d" % r, bus=True)
            n2 = serve(pg.url() + "?schema=two%d" % r, bus=True)
            wait_shards([n1, n2], [32, 32])
            rows["pg2"].append(closed64([n1, n2], a.seconds))
            fol["pg2"].append(follow(n2, n1))
            n2.stop()
            n1.stop()
            s = serve(actors=None)
            runs["lmdb"].append(run_start(s))
            s.stop()
            s = serve(pg.url() + "?schema=run%d" % r, actors=None)
            runs["pg1"].append(run_start(s))
            s.stop()
            print("r%d: %r" % (r, {k: v[-1] for k, v in list(rows.items()) + [("follow_" + k, v) for k, v in fol.items()]
                                   + [("run_" + k, v) for k, v in runs.items()]}), file=sys.stderr)
        med = lambda k, i: statistics.median(x[i] for x in rows[k])  # noqa: E731
        for k in ("lmdb", "pg1", "pg2"):
            line = {"bench": "cluster.closed64.%s" % k, "value": round(med(k, 0)), "unit": "appends/s",
                    "p50_us": med(k, 1), "p99_us": med(k, 2), "appenders": 64, "sessions": 64,
                    "reps": a.reps}
            if k != "lmdb":
                line["ratio_to_lmdb"] = round(med(k, 0) / med("lmdb", 0), 3)
            if k == "pg2":
                line["ratio_to_pg1"] = round(med(k, 0) / med("pg1", 0), 3)
            print(json.dumps(line))
            sys.stdout.flush()
        for k in ("lmdb", "pg1", "pg2"):
            m50 = statistics.median(x[0] for x in fol[k])
            line = {"bench": "cluster.follow.%s" % k, "value": m50, "unit": "us", "p50_us": m50,
                    "p99_us": statistics.median(x[1] for x in fol[k]), "appends": FOLLOW_N,
                    "missed": sum(x[2] for x in fol[k]), "follower": "other node" if k == "pg2" else "same node",
                    "reps": a.reps}
            if k != "lmdb":
                line["ratio_to_lmdb"] = round(m50 / statistics.median(x[0] for x in fol["lmdb"]), 2)
            print(json.dumps(line))
        for k in ("lmdb", "pg1"):
            med_r = lambda f: round(statistics.median(x[f] for x in runs[k]), 2)  # noqa: E731
            line = {"bench": "cluster.run_start.%s" % k, "value": med_r("first"), "unit": "ms",
                    "to_prompt_ms": med_r("prompt"), "to_running_ms": med_r("running"),
                    "to_model_ms": med_r("model"), "runs": RUNS, "model": "demo", "reps": a.reps}
            if k != "lmdb":
                line["ratio_to_lmdb"] = round(med_r("first") / statistics.median(x["first"] for x in runs["lmdb"]), 2)
            print(json.dumps(line))
            sys.stdout.flush()
        took = [kill9(pg, "k9_%d" % r) for r in range(a.reps)]
        print(json.dumps({"bench": "cluster.failover.kill9", "value": round(statistics.median(t[0] for t in took), 3),
                          "unit": "s", "lease_ms": took[0][1], "heartbeat_ms": took[0][2],
                          "bound_s": (took[0][1] + took[0][2]) / 1000.0, "reps": a.reps}))
    finally:
        pg.stop()


if __name__ == "__main__":
    main()
