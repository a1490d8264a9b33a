#!/usr/bin/python3
"""bench_queue — what the queue and the steers cost (issue 14).

    SB_BIN=build/switchboard /usr/bin/python3 bench/bench_queue.py [--prompts 20] [--takes 2000] [--reps 5]

Each repetition starts a fresh `switchboard serve` with the built-in demo
model, and measures:

  queue_handoff_ms   PROMPTS prompts sent back to back to one session: the
                     first starts a run, the others queue. For each queued
                     one, the time from the tape's `run.status completed` of
                     the run before it to its own run's `run.status queued`
                     (tape timestamps, ms): what the queue adds between two
                     turns. Median over the prompts, then over repetitions.
                     It holds three durable commits (the session's, the run
                     coordinator's run and its tape append) and two bus
                     round trips; the baseline is one durable append
                     (session.append, median round trip from this client).
  steer_take_us      the round trip of session.steer.take with no steer
                     pending, from this client: the cost the executor pays
                     at every step boundary. Baseline: session.get.

One JSON line per figure on stdout (value, unit, baseline, ratio, samples);
progress on stderr. Needs Debian's python3-zmq and python3-msgpack.
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

from sbtest import Server, tmpdir, wait_for  # noqa: E402


def call(server, type, body, timeout=15):
    m = server.control().request(type, body, timeout=timeout)
    if m.type != type + ".ok":
        raise SystemExit("bench_queue: %s answered %s %r" % (type, m.type, m.body))
    return m.body


def tape(server, sid):
    out, after = [], 0
    while True:
        b = call(server, "session.events", {"session_id": sid, "after_seq": after, "limit": 1000})
        out.extend(b["events"])
        after = b["next_after"]
        if not b["more"]:
            return out


def round_trips(server, type, body, n):
    """Median round trip of n requests, in µs."""
    ctl = server.control()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        m = ctl.request(type, body, timeout=10)
        times.append((time.perf_counter() - t0) * 1e6)
        if m.type != type + ".ok":
            raise SystemExit("bench_queue: %s answered %s %r" % (type, m.type, m.body))
    return statistics.median(times)


def one_rep(args):
    server = Server().start()
    try:
        sid = call(server, "session.create", {"workspace": tmpdir(), "approval_policy": "yolo"})["session"]["session_id"]
        ctl = server.control()
        ids = [ctl.send("session.prompt", {"session_id": sid, "text": "look around %d" % k})
               for k in range(args.prompts)]
        for i in ids:
            m = ctl.wait_reply(i, 15)
            if m.type != "session.prompt.ok":
                raise SystemExit("bench_queue: session.prompt answered %s %r" % (m.type, m.body))

        def all_done():
            runs = call(server, "run.list", {"session_id": sid, "limit": 1000})["runs"]
            return len(runs) == args.prompts and all(r["status"] == "completed" for r in runs)
        wait_for(all_done, 120, "%d runs to complete" % args.prompts, interval=0.05)
        entries = tape(server, sid)
        gaps, last_done = [], None
        for e in entries:
            if e["kind"] != "run.status":
                continue
            st = e["body"]["status"]
            if st == "completed":
                last_done = e["ts"]
            elif st == "queued" and last_done is not None:
                gaps.append(e["ts"] - last_done)
                last_done = None
        if len(gaps) != args.prompts - 1:
            raise SystemExit("bench_queue: %d handoffs seen, want %d" % (len(gaps), args.prompts - 1))
        # the per-step cost, and the baselines, on the now idle session
        run_id = call(server, "run.list", {"session_id": sid, "limit": 1})["runs"][0]["run_id"]
        take = round_trips(server, "session.steer.take", {"session_id": sid, "run_id": run_id, "step": 1}, args.takes)
        get = round_trips(server, "session.get", {"session_id": sid}, args.takes)
        append = round_trips(server, "session.append", {"session_id": sid, "kind": "note", "body": {}}, 200)
        return {"handoff_ms": statistics.median(gaps), "take_us": take, "get_us": get, "append_ms": append / 1000}
    finally:
        server.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prompts", type=int, default=20)
    ap.add_argument("--takes", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    reps = []
    for k in range(args.reps):
        r = one_rep(args)
        reps.append(r)
        sys.stderr.write("bench_queue: rep %d: handoff %.1f ms (append %.2f ms), steer.take %.0f µs (get %.0f µs)\n"
                         % (k + 1, r["handoff_ms"], r["append_ms"], r["take_us"], r["get_us"]))
        sys.stderr.flush()

    def fig(name, key, unit, base_key, nd):
        vals = [r[key] for r in reps]
        base = statistics.median(r[base_key] for r in reps)
        value = statistics.median(vals)
        print(json.dumps({"bench": name, "value": round(value, nd), "unit": unit, "baseline": round(base, nd),
                          "ratio": round(value / base, 2) if base else None, "reps": len(reps),
                          "samples": [round(v, nd) for v in vals], "load1": round(os.getloadavg()[0], 2)}))
    fig("queue_handoff_ms", "handoff_ms", "ms", "append_ms", 2)
    fig("steer_take_us", "take_us", "us", "get_us", 0)


if __name__ == "__main__":
    main()
