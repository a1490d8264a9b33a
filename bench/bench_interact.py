#!/usr/bin/python3
"""bench_interact — from an answer to the executor hearing it (issue 10).

    /usr/bin/python3 bench/bench_interact.py [--bin build/switchboard] [--n 200] [--reps 5]

An executor that waits on an approval learns the answer from the session's
tape: it is subscribed to session/<id> and waits for approval.resolved. This
measures that path as the executor sees it: for each of N interactions (asked
with interact.request, its approval.requested seen first, so nothing else is
in flight), the time from sending interact.resolve to the approval.resolved
session.event arriving on bus-pub: the interact actor's durable commit, its
reply, the outbox's session.append, the session actor's durable commit and
the publication. The tool starts right after (the policy half of the issue
measures that last step inside exec).

Figures, one JSON line each, the median of the repetitions:

  interact_resolve_to_tape_p99   p99 over the N answers (p50 alongside)
  interact_resolve_reply_p50     the resolver's own reply (one commit)

Baseline: the same disk's fdatasync of a 4 KiB write, median of 50, times
the two durable commits the path holds (interact, then session).

Needs Debian's python3-zmq and python3-msgpack (run with /usr/bin/python3).
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))


def fsync_ms(folder, n=50):
    """Median fdatasync of a 4 KiB write in `folder`, in ms."""
    path = os.path.join(folder, "fsync-probe")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    times = []
    try:
        for k in range(n):
            os.pwrite(fd, os.urandom(4096), (k % 16) * 4096)
            t0 = time.perf_counter()
            os.fdatasync(fd)
            times.append((time.perf_counter() - t0) * 1000)
    finally:
        os.close(fd)
        os.unlink(path)
    return statistics.median(times)


def pct(vals, p):
    s = sorted(vals)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


def one_rep(args):
    import sbtest
    data = tempfile.mkdtemp(prefix="sbbi", dir="/tmp")
    ws = tempfile.mkdtemp(prefix="sbbw", dir="/tmp")
    log = open(os.path.join(data, "serve.log"), "wb")
    serve = subprocess.Popen([args.bin, "serve", "--data", data, "--http", "127.0.0.1:0"],
                             stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    c = sub = None
    try:
        sbtest.wait_for(lambda: os.path.exists(os.path.join(data, "bus-cmd")) or serve.poll() is not None,
                        20, "serve")
        c = sbtest.Client("ipc://%s/bus-cmd" % data, name="bench")
        sbtest.wait_for(lambda: c.request("bus.stats", {}, timeout=1).type == "bus.stats.ok", 20, "bus.stats")
        sid = c.request("session.create", {"workspace": ws}).body["session"]["session_id"]
        sub = sbtest.Sub("ipc://%s/bus-pub" % data, "session/" + sid)
        run_id = sbtest.new_id()

        def wait_event(kind, iid, timeout=10):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                f = sub.recv_frames(timeout=0.5)
                if f is None:
                    continue
                ev = sbtest.unpack(f[2])
                if ev.get("kind") == kind and ev.get("body", {}).get("interaction_id") == iid:
                    return time.perf_counter()
            raise RuntimeError("no %s for %s" % (kind, iid))

        # the subscription is live once an event arrives on it
        first = c.request("interact.request", {"session_id": sid, "run_id": run_id, "call_id": "warm",
                                               "tool": "shell", "arguments": "{}"}).body["interaction_id"]
        wait_event("approval.requested", first)
        to_tape, reply = [], []
        for k in range(args.n + 10):
            iid = c.request("interact.request", {"session_id": sid, "run_id": run_id, "call_id": "c%d" % k,
                                                 "tool": "shell", "arguments": '{"command":"make"}',
                                                 "deadline_s": 0}).body["interaction_id"]
            wait_event("approval.requested", iid)
            t0 = time.perf_counter()
            mid = c.send("interact.resolve", {"interaction_id": iid, "decision": "approve", "resolved_by": "bench"})
            r = c.wait_reply(mid, 10)
            t1 = time.perf_counter()
            if r.type != "interact.resolve.ok":
                raise RuntimeError("resolve: %r" % r.body)
            t2 = wait_event("approval.resolved", iid)
            if k >= 10:         # the first ones warm the caches
                reply.append((t1 - t0) * 1000)
                to_tape.append((t2 - t0) * 1000)
        return {"p50": pct(to_tape, 50), "p99": pct(to_tape, 99), "max": max(to_tape),
                "reply_p50": pct(reply, 50), "fsync_ms": fsync_ms(data)}
    finally:
        if sub:
            sub.close()
        if c:
            c.close()
        if serve.poll() is None:
            serve.send_signal(signal.SIGTERM)
            try:
                serve.wait(30)
            except subprocess.TimeoutExpired:
                serve.kill()
                serve.wait()
        log.close()
        if not os.environ.get("SB_KEEP_DATA"):
            shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(ws, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.environ.get("SB_BIN") or os.path.join(ROOT, "build", "switchboard"))
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    try:
        import msgpack  # noqa: F401 (checked here, used by sbtest)
        import zmq  # noqa: F401
    except ImportError as e:
        sys.exit("bench_interact: python3-zmq and python3-msgpack are needed (use /usr/bin/python3): %s" % e)
    if not os.access(args.bin, os.X_OK):
        sys.exit("bench_interact: no switchboard binary at %s (run make)" % args.bin)
    reps = []
    for k in range(args.reps):
        r = one_rep(args)
        reps.append(r)
        sys.stderr.write("bench_interact: rep %d: resolve -> approval.resolved p50 %.2f ms p99 %.2f ms max %.2f ms, "
                         "resolve reply p50 %.2f ms, fdatasync %.2f ms\n"
                         % (k + 1, r["p50"], r["p99"], r["max"], r["reply_p50"], r["fsync_ms"]))
        sys.stderr.flush()
    fs = statistics.median(r["fsync_ms"] for r in reps)
    common = {"n": args.n, "reps": len(reps), "load1": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(),
              "fsync_ms": round(fs, 3)}

    def fig(name, key, baseline, **extra):
        vals = [r[key] for r in reps]
        v = statistics.median(vals)
        line = {"bench": name, "value": round(v, 3), "unit": "ms", "baseline": round(baseline, 3),
                "ratio": round(v / baseline, 2) if baseline > 0 else None}
        line.update(common)
        line.update(extra)
        line["samples"] = [round(x, 3) for x in vals]
        print(json.dumps(line))
        sys.stdout.flush()
    fig("interact_resolve_to_tape_p99", "p99", 2 * fs, p50_ms=round(statistics.median(r["p50"] for r in reps), 3),
        target_ms=10)
    fig("interact_resolve_reply_p50", "reply_p50", fs)


if __name__ == "__main__":
    main()
