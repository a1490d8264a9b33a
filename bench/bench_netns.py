#!/usr/bin/python3
"""bench_netns — tape events streamed from external workers across network
namespaces (issue 12; docs/workers.md, docs/bench.md).

    /usr/bin/python3 bench/bench_netns.py [--bin build/switchboard] [--runs 50] [--deltas 40] [--reps 3]

The setup of tests/integration/test_netns.py: three network namespaces
joined by veth pairs, `cp` (serve with every actor, the bus on TCP with
CURVE, and tests/llm_server.py on cp's loopback), `w1` and `w2` (a
`switchboard worker` each, with its own key, reaching cp's bus over TCP).
The model is llm_server's gen=N: every model call streams N text deltas
of 520 bytes (past exec's 512-byte coalescing bound, so about one tape
entry each) and ends; a run is one model call.

Each repetition makes 2 x RUNS sessions targeted at the workers' pool and
prompts them all at once; the two workers claim them one run at a time.
A subscriber on cp's event plane (the ipc endpoint of cp's serve) counts
the `session/` events from the first prompt until every run's final
`run.status`, and checks that each session's seqs came contiguous from 1
and match its tape.

Figure, one JSON line, the median of the repetitions:

  netns_tape_events_per_s   tape events that reached the subscriber in cp
                            per second, first prompt to last final status
                            (runs_per_s and events per run beside)

Skipped, with a `skipped` line saying why, when not root or when `ip
netns` is unavailable. BENCH_NETNS_REPS / _RUNS / _DELTAS shorten a run.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
NAME = "netns_tape_events_per_s"
DELTA = "x" * 520
DELAY_MS = 2             # between deltas: they reach the worker one by one, not in one burst
FINAL = ("completed", "failed", "cancelled", "expired", "interrupted")


def log(msg):
    sys.stderr.write("bench_netns: %s\n" % msg)
    sys.stderr.flush()


def skipped(why):
    print(json.dumps({"bench": NAME, "skipped": why}))
    sys.stdout.flush()
    return 0


def one_rep(nruns, deltas):
    import test_netns as tn
    from sbtest import Sub, tmpdir, unpack
    from test_runs_e2e import call, get_run, new_session, tape
    tn.netns_down()
    tn.netns_up()
    world = None
    try:
        world = tn.World(None, scenario="gen=%d/delay_ms=%d/delta=%s" % (deltas, DELAY_MS, DELTA))
        world.start_worker("w1", lease=10)
        world.start_worker("w2", lease=10)
        sids = [new_session(world, tmpdir(), approval_policy="yolo", target="worker:p") for _ in range(2 * nruns)]
        want = set(sids)
        sub = Sub("ipc://%s/bus-pub" % world.data, "session/")
        # the subscription is live once an event of ours comes through
        probe = sids[0]
        deadline = time.monotonic() + 10
        while True:
            call(world, "session.append", {"session_id": probe, "kind": "note", "body": {"text": "probe"}})
            f = sub.recv_frames(timeout=0.2)
            if f is not None and unpack(f[2]).get("session_id") == probe:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the subscriber in cp sees nothing")
        while sub.recv_frames(timeout=0.05) is not None:
            pass
        base = {s: len(tape(world, s)) for s in sids}
        seen = {s: [] for s in sids}
        done = set()
        t0 = time.monotonic()
        run_ids = [call(world, "session.prompt", {"session_id": s, "text": "stream"})["run_id"] for s in sids]
        last = t0
        deadline = t0 + 60 + nruns * 2
        while len(done) < len(sids):
            if time.monotonic() > deadline:
                raise RuntimeError("%d of %d runs ended in time" % (len(done), len(sids)))
            f = sub.recv_frames(timeout=1.0)
            if f is None:
                continue
            b = unpack(f[2])
            s = b.get("session_id")
            if s not in want or b["seq"] <= base[s]:
                continue
            last = time.monotonic()
            seen[s].append(b["seq"])
            body = b.get("body") or {}
            if b.get("kind") == "run.status" and body.get("status") in FINAL:
                if body.get("status") != "completed":
                    raise RuntimeError("a run ended %s: %r" % (body.get("status"), body))
                done.add(s)
        wall = last - t0
        total = 0
        for s in sids:
            tseqs = [e["seq"] for e in tape(world, s) if e["seq"] > base[s]]
            got = seen[s]
            if got != list(range(base[s] + 1, base[s] + 1 + len(got))) or got != tseqs[:len(got)]:
                raise RuntimeError("session %s: seqs seen in cp %r, tape %r" % (s, got[:20], tseqs[:20]))
            total += len(got)
        sub.close()
        by_worker = {}
        for r in run_ids:
            w = get_run(world, r).get("worker_id") or "?"
            by_worker[w] = by_worker.get(w, 0) + 1
        runs = len(sids)
        return {"eps": total / wall, "events": total, "wall_s": wall, "runs_per_s": runs / wall,
                "per_run": total / float(runs), "by_worker": by_worker}
    finally:
        if world:
            world.close()
        tn.netns_down()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.environ.get("SB_BIN") or os.path.join(ROOT, "build", "switchboard"))
    ap.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_NETNS_RUNS", "50")),
                    help="runs per worker")
    ap.add_argument("--deltas", type=int, default=int(os.environ.get("BENCH_NETNS_DELTAS", "40")),
                    help="text deltas per model call")
    ap.add_argument("--reps", type=int, default=int(os.environ.get("BENCH_NETNS_REPS", "3")))
    a = ap.parse_args()
    os.environ["SB_BIN"] = os.path.abspath(a.bin)
    os.environ.setdefault("SB_ROOT", ROOT)
    if os.geteuid() != 0:
        return skipped("needs root to create network namespaces")
    try:
        subprocess.run(["ip", "netns", "list"], check=True, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return skipped("ip netns is unavailable")
    import test_netns as tn
    from sbtest import TestFailure
    try:
        tn.netns_down()
        tn.netns_up()
    except TestFailure as e:
        tn.netns_down()
        return skipped("cannot create network namespaces here: %s" % e)
    tn.netns_down()
    reps = []
    for k in range(a.reps):
        r = one_rep(a.runs, a.deltas)
        reps.append(r)
        log("rep %d: %d events in %.2f s = %.0f events/s, %.1f runs/s, %.1f events/run, runs by worker %r"
            % (k + 1, r["events"], r["wall_s"], r["eps"], r["runs_per_s"], r["per_run"], r["by_worker"]))
    line = {"bench": NAME, "value": round(statistics.median(r["eps"] for r in reps)), "unit": "events/s",
            "workers": 2, "runs": 2 * a.runs, "deltas_per_run": a.deltas,
            "events_per_run": round(statistics.median(r["per_run"] for r in reps), 1),
            "runs_per_s": round(statistics.median(r["runs_per_s"] for r in reps), 2),
            "transport": "tcp+curve across network namespaces", "reps": len(reps),
            "load1": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(),
            "samples": [round(r["eps"]) for r in reps]}
    print(json.dumps(line))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
