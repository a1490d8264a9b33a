#!/usr/bin/python3
"""bench_approval — from a person's answer to the tool starting (issue 10).

    /usr/bin/python3 bench/bench_approval.py [--approvals 200] [--reps 3]

Each repetition starts a fresh `switchboard serve` whose model is the
loopback provider (tests/llm_server.py) scripted with APPROVALS turns, each
a `write_file` of its own file m/K.txt (distinct, so no scope applies), and
one session under `auto`: every call asks. A subscriber on the session's
topic sees each approval.requested; the bench takes CLOCK_REALTIME and sends
interact.resolve approve at once. The tool's first act is to write its file,
whose mtime marks the tool starting: the latency of one approval is that
mtime minus the moment the resolve was sent. The kernel stamps files from
its coarse real-time clock (one tick, 4 ms here, behind), so the send time
is read from the same clock (CLOCK_REALTIME_COARSE): the figures are
unbiased, each within one tick. It
includes the resolve's commit in DATA/interact, the approval.resolved
append to the tape and its publication, and the executor's wake-up. (A
`shell` tool adds the spawn of /bin/sh on top, which this leaves out.)

Figures (median of the repetitions, one JSON line each):
  approval_resolve_to_tool_p50   ms
  approval_resolve_to_tool_p99   ms   (target: 10 ms)

Needs Debian's python3-zmq and python3-msgpack (run with /usr/bin/python3).
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
os.environ.setdefault("SB_ROOT", ROOT)
os.environ.setdefault("SB_BIN", os.path.join(ROOT, "build", "switchboard"))

from sbtest import Client, Sub, unpack, tmpdir, wait_for  # noqa: E402
from test_runs_e2e import LLM, llm_server, new_session, prompt, wait_run  # noqa: E402


CLOCK_REALTIME_COARSE = 5      # linux/time.h; Python 3.11 has no name for it


def pct(vals, p):
    s = sorted(vals)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


def one_rep(llm, n, rep):
    name = "bench%d" % rep
    turns = [{"tool_calls": [{"name": "write_file", "arguments": {"path": "m/%d.txt" % k, "content": "x"},
                              "call_id": "c%d" % k}]} for k in range(n)]
    turns.append({"text": "done"})
    llm.script(name, turns)
    ws = tmpdir()
    server = llm_server(llm, name)
    try:
        sid = new_session(server, ws, approval_policy="auto", max_steps=min(10000, n + 5))
        sub = Sub(server.endpoint("pub"), ("session/%s" % sid).encode())
        time.sleep(0.2)             # the subscription reaches the broker before the first event
        client = Client(server.endpoint("cmd"), name="bench-approval")
        run_id = prompt(server, sid, "count")
        sent = []
        announced = {}          # interaction id -> CLOCK_REALTIME ns its approval.resolved arrived
        ids = []
        seen = set()
        deadline = time.monotonic() + 60 + n * 0.5
        while len(sent) < n and time.monotonic() < deadline:
            frames = sub.recv_frames(timeout=5.0)
            if not frames:
                continue
            body = unpack(frames[2])
            if body.get("kind") == "approval.resolved":
                announced.setdefault(body["body"]["interaction_id"], time.clock_gettime_ns(CLOCK_REALTIME_COARSE))
            if body.get("kind") != "approval.requested":
                continue
            iid = body["body"]["interaction_id"]
            if iid in seen:
                continue
            seen.add(iid)
            t0 = time.clock_gettime_ns(CLOCK_REALTIME_COARSE)
            client.send("interact.resolve", {"interaction_id": iid, "decision": "approve",
                                             "resolved_by": "bench"})
            sent.append(t0)
            ids.append(iid)
            client.drain()
        run = wait_run(server, run_id, timeout=60)
        if run["status"] != "completed":
            sys.exit("bench_approval: the run ended %s (%s)" % (run["status"], run.get("reason")))
        stamps = [os.stat(os.path.join(ws, "m", "%d.txt" % k)).st_mtime_ns for k in range(n)
                  if os.path.exists(os.path.join(ws, "m", "%d.txt" % k))]
        if len(stamps) != len(sent) or len(sent) != n:
            sys.exit("bench_approval: %d approvals sent, %d tools ran, %d wanted" % (len(sent), len(stamps), n))
        lat = [(s - t) / 1e6 for s, t in zip(stamps, sent)]
        # the share of it until the announcement reached a subscriber
        ann = [(announced[i] - t) / 1e6 for i, t in zip(ids, sent) if i in announced]
        sub.close()
        client.close()
        return lat, ann
    finally:
        server.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--approvals", type=int, default=200)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    llm = LLM()
    reps = []
    try:
        for k in range(args.reps):
            lat, ann = one_rep(llm, args.approvals, k)
            r = {"p50": pct(lat, 50), "p99": pct(lat, 99), "max": max(lat), "min": min(lat),
                 "ann_p50": pct(ann, 50) if ann else -1, "ann_p99": pct(ann, 99) if ann else -1}
            reps.append(r)
            sys.stderr.write("bench_approval: rep %d: %d approvals, resolve->tool p50 %.2f ms p99 %.2f ms "
                             "min %.2f max %.2f; of which resolve->approval.resolved on the event plane "
                             "p50 %.2f ms p99 %.2f ms (%d seen)\n"
                             % (k + 1, len(lat), r["p50"], r["p99"], r["min"], r["max"], r["ann_p50"],
                                r["ann_p99"], len(ann)))
            sys.stderr.flush()
    finally:
        llm.stop()
    common = {"approvals": args.approvals, "reps": len(reps), "load1": round(os.getloadavg()[0], 2),
              "cpus": os.cpu_count()}
    for key, target in (("p50", None), ("p99", 10.0)):
        vals = [r[key] for r in reps]
        line = {"bench": "approval_resolve_to_tool_%s" % key, "value": round(statistics.median(vals), 2),
                "unit": "ms", "samples": [round(v, 2) for v in vals]}
        if target:
            line["target"] = target
        line["announce_ms"] = round(statistics.median(r["ann_" + key] for r in reps), 2)
        line.update(common)
        print(json.dumps(line))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
