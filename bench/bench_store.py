#!/usr/bin/python3
"""bench_store — the tape on PostgreSQL against the tape on LMDB, in the
same run (docs/scale-out.md, "One node on PostgreSQL").

    SB_BIN=build/switchboard /usr/bin/python3 bench/bench_store.py [--reps 3]

Starts Debian's PostgreSQL in a temporary folder (tests/integration/sbpg.py,
with fsync on, so that its commits are as durable as LMDB's), then runs
build/bench/bench_tape's closed loop (SB_BENCH_ONLY=closed64: 64 appenders,
each waiting for its ack before its next append, for 1.5 s) against
`serve --actors session` on LMDB and on PostgreSQL (SB_BENCH_STORE), in
alternation, REPS times each, with the 64 appenders on one session and
on 64 sessions. One JSON line per figure on stdout:

  store.pg.closed64.one      appends/s on PostgreSQL, one session; baseline
                             the same on LMDB, ratio = PostgreSQL / LMDB;
                             p50_us, p99_us: append->ack latency on each
  store.pg.closed64.many     the same, each appender on its own session

Medians over the repetitions. Without PostgreSQL's binaries one line says
the bench is skipped.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

from sbtest import SB_BIN  # noqa: E402
from sbpg import Postgres, pg_bindir  # noqa: E402

LINE = re.compile(r"closed64: (\d+) entries/s p50 (\d+) us p99 (\d+) us")


def closed64(sessions, store=None):
    bench = os.path.join(os.path.dirname(SB_BIN), "bench", "bench_tape")
    env = dict(os.environ, SB_BIN=SB_BIN, SB_BENCH_ONLY="closed64", SB_BENCH_SESSIONS=str(sessions))
    env.pop("SB_BENCH_STORE", None)
    if store:
        env["SB_BENCH_STORE"] = store
    out = subprocess.run([bench], env=env, capture_output=True, text=True, timeout=300)
    m = LINE.search(out.stderr)
    if out.returncode != 0 or not m:
        sys.exit("bench_tape failed (exit %d): %s" % (out.returncode, out.stderr[-2000:]))
    return tuple(int(x) for x in m.groups())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    if not pg_bindir():
        print(json.dumps({"bench": "store.pg", "skipped": "no PostgreSQL server binaries"}))
        return
    pg = Postgres(durable=True)
    try:
        pg.start()
        for name, sessions in (("one", 1), ("many", 64)):
            lm, pq = [], []
            for r in range(a.reps):
                lm.append(closed64(sessions))
                pq.append(closed64(sessions, pg.url() + "?schema=bench%d_%s" % (r, name)))
                print("%s r%d: lmdb %r postgresql %r" % (name, r, lm[-1], pq[-1]), file=sys.stderr)
            med = lambda rows, k: statistics.median(x[k] for x in rows)  # noqa: E731
            v, b = med(pq, 0), med(lm, 0)
            print(json.dumps({"bench": "store.pg.closed64.%s" % name, "value": v, "unit": "appends/s",
                              "baseline": b, "ratio": round(v / b, 3) if b else None,
                              "sessions": sessions, "appenders": 64,
                              "p50_us": med(pq, 1), "p99_us": med(pq, 2),
                              "lmdb_p50_us": med(lm, 1), "lmdb_p99_us": med(lm, 2), "reps": a.reps}))
            sys.stdout.flush()
    finally:
        pg.stop()


if __name__ == "__main__":
    main()
