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

from sbtest import Client, Server, tmpdir  # noqa: E402
from sbpg import Postgres, pg_bindir  # noqa: E402

PROCS, THREADS = 8, 8


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


def serve(url=None, env=None):
    args = ["--actors", "session"] + (["--store", url] if url else [])
    return Server(args=args, env=dict(os.environ, SWITCHBOARD_LOG="warn", **(env or {}))).start(timeout=60)


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
    try:
        pg.start()
        for r in range(a.reps):
            s = serve()
            rows["lmdb"].append(closed64([s], a.seconds))
            s.stop()
            s = serve(pg.url() + "?schema=one%d" % r)
            rows["pg1"].append(closed64([s], a.seconds))
            s.stop()
            n1 = serve(pg.url() + "?schema=two%d" % r)
            n2 = serve(pg.url() + "?schema=two%d" % r)
            wait_shards([n1, n2], [32, 32])
            rows["pg2"].append(closed64([n1, n2], a.seconds))
            n2.stop()
            n1.stop()
            print("r%d: %r" % (r, {k: v[-1] for k, v in rows.items()}), file=sys.stderr)
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
        took = [kill9(pg, "k9_%d" % r) for r in range(a.reps)]
        print(json.dumps({"bench": "cluster.failover.kill9", "value": round(statistics.median(t[0] for t in took), 3),
                          "unit": "s", "lease_ms": took[0][1], "heartbeat_ms": took[0][2],
                          "bound_s": (took[0][1] + took[0][2]) / 1000.0, "reps": a.reps}))
    finally:
        pg.stop()


if __name__ == "__main__":
    main()
