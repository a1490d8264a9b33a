#!/usr/bin/python3
"""bench_runs — many concurrent agent runs end to end (issue 5).

    /usr/bin/python3 bench/bench_runs.py [--bin build/switchboard] [--runs 200] [--reps 5]

For each repetition it starts a fresh `switchboard serve` whose model is a
loopback provider (tests/llm_server.py's Responses stream generator, run by
this script in a child process), creates RUNS sessions, each on its own
workspace, and starts one run in each at once. Every run takes 5 steps: the
model calls write_file, read_file, write_file, read_file, then answers with
text deltas. The provider picks a turn from the request itself (how many
function_call_output items it holds), so 200 interleaved runs each get
exactly their 5 turns.

Figures, one JSON line each, the median of the repetitions:

  runs_per_second        RUNS / (last run's completion - first request),
                         completions seen on the event plane
  runs_chunk_to_tape_p99 for every text delta of the final answers: the
                         provider stamps CLOCK_MONOTONIC into the delta's text
                         right before writing it to the socket; a subscriber on
                         bus-pub takes CLOCK_MONOTONIC when the text.delta
                         session.event carrying it arrives. p99 over all
                         deltas of the repetition (p50 alongside). This
                         includes exec's coalescing window (<= 20 ms).
  runs_serve_peak_rss    VmHWM of the serve process after the repetition

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
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))

N_DELTAS = 8          # text deltas in each final answer, each stamped


# ---------------------------------------------------------------------------
# the provider (child process)

def provider_main(portfile):
    import llm_server as ls

    plan = [("write_file", {"path": "a.txt", "content": "alpha\n"}),
            ("read_file", {"path": "a.txt"}),
            ("write_file", {"path": "b.txt", "content": "beta\n"}),
            ("read_file", {"path": "b.txt"})]

    class BenchHandler(ls.Handler):
        def do_POST(self):
            scenario, endpoint, params = ls.parse_params(self.path)
            if "bench" not in params or endpoint != "responses":
                return super().do_POST()
            body = json.loads(self.read_body() or b"{}")
            done = sum(1 for i in body.get("input", []) if i.get("type") == "function_call_output")
            if done < len(plan):
                name, args = plan[done]
                turn = ls.Turn(tool_calls=[{"name": name, "arguments": json.dumps(args),
                                            "call_id": "call_%d" % done}],
                               usage={"input_tokens": 100 + done, "output_tokens": 10}, n=done + 1)
            else:
                # lazy: each stamp is taken when its event is built, right before its write
                texts = ("T%d;" % (time.monotonic_ns() // 1000) for _ in range(N_DELTAS))
                turn = ls.Turn(texts, usage={"input_tokens": 200, "output_tokens": N_DELTAS}, n=done + 1)
            self.stream(ls.gen_responses(turn), {"plain"}, 0, 1)

    server = ls.Server(("127.0.0.1", 0), BenchHandler)
    server.state = ls.State(os.path.join(ROOT, "tests", "fixtures", "llm"), None, False)
    tmp = portfile + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % server.server_address[1])
    os.replace(tmp, portfile)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server.serve_forever(poll_interval=0.2)


# ---------------------------------------------------------------------------
# the driver

def wait_for(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise RuntimeError("timed out waiting for " + what)
        time.sleep(0.02)


class Bus:
    def __init__(self, data):
        import msgpack
        import zmq
        self.zmq, self.msgpack = zmq, msgpack
        self.ctx = zmq.Context.instance()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.SNDHWM, 0)
        self.sock.setsockopt(zmq.RCVHWM, 0)
        self.sock.connect("ipc://%s/bus-cmd" % data)
        self.n = 0

    def send(self, type, body):
        self.n += 1
        rid = "%026d" % self.n
        h = {"type": type, "id": rid, "ts": int(time.time() * 1000), "from": "bench"}
        self.sock.send_multipart([self.msgpack.packb(h, use_bin_type=True),
                                  self.msgpack.packb(body, use_bin_type=True)])
        return rid

    def recv(self, timeout):
        if not self.sock.poll(int(timeout * 1000)):
            raise RuntimeError("no reply within %.0f s" % timeout)
        h, b = self.sock.recv_multipart()
        return self.msgpack.unpackb(h, raw=False), self.msgpack.unpackb(b, raw=False)

    def calls(self, type, bodies, timeout=60):
        """Sends every request at once; returns the replies in order."""
        ids = [self.send(type, b) for b in bodies]
        got = {}
        while len(got) < len(ids):
            h, b = self.recv(timeout)
            if h.get("type") == "error":
                raise RuntimeError("%s failed: %r" % (type, b))
            got[h["corr"]] = b
        return [got[i] for i in ids]

    def close(self):
        self.sock.close(0)


class Subscriber(threading.Thread):
    """Records (CLOCK_MONOTONIC ns, frames) of every session event."""

    def __init__(self, data):
        super().__init__(daemon=True)
        import zmq
        self.zmq = zmq
        self.sock = zmq.Context.instance().socket(zmq.SUB)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.RCVHWM, 0)
        self.sock.setsockopt(zmq.SUBSCRIBE, b"session/")
        self.sock.connect("ipc://%s/bus-pub" % data)
        self.events = []
        self.stop = threading.Event()

    def run(self):
        recv, mono, out = self.sock.recv_multipart, time.monotonic_ns, self.events
        poller = self.zmq.Poller()
        poller.register(self.sock, self.zmq.POLLIN)
        while not self.stop.is_set():
            if poller.poll(100):
                while True:
                    try:
                        frames = recv(self.zmq.NOBLOCK)
                    except self.zmq.Again:
                        break
                    out.append((mono(), frames))
        self.sock.close(0)


def vm_hwm_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def cpu_s(pid):
    """User + system CPU seconds of a process so far."""
    with open("/proc/%d/stat" % pid) as f:
        st = f.read()
    fields = st[st.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(sorted_vals, q):
    if not sorted_vals:
        return float("nan")
    k = min(len(sorted_vals) - 1, max(0, int(round(q * (len(sorted_vals) - 1)))))
    return sorted_vals[k]


def one_rep(args, port, provider_pid):
    import msgpack
    data = tempfile.mkdtemp(prefix="sbbr", dir="/tmp")
    wsroot = tempfile.mkdtemp(prefix="sbbw", dir="/tmp")
    env = dict(os.environ, OPENAI_API_KEY="sk-bench", SWITCHBOARD_LOG="warn")
    log = open(os.path.join(data, "serve.log"), "wb")
    serve = subprocess.Popen([args.bin, "serve", "--data", data, "--http", "127.0.0.1:0",
                              "--llm", "responses", "--llm-url", "http://127.0.0.1:%d/bench=1/v1" % port,
                              "--model", "m"], stdout=log, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, env=env)
    bus = sub = None
    try:
        wait_for(lambda: os.path.exists(os.path.join(data, "bus-cmd")) or serve.poll() is not None,
                 20, "serve to bind its bus")
        if serve.poll() is not None:
            raise RuntimeError("serve exited %d" % serve.returncode)
        bus = Bus(data)
        bus.calls("bus.stats", [{}], timeout=10)
        workspaces = []
        for k in range(args.runs):
            d = os.path.join(wsroot, "w%d" % k)
            os.mkdir(d)
            workspaces.append(d)
        sessions = bus.calls("session.create", [{"workspace": w, "approval_policy": "yolo"}
                                                for w in workspaces])
        sids = [s["session"]["session_id"] for s in sessions]
        sub = Subscriber(data)
        sub.start()
        # the subscription must be live before the runs start
        probe = sids[0]
        bus.calls("session.append", [{"session_id": probe, "kind": "note", "body": {"text": "probe"}}])
        wait_for(lambda: sub.events, 10, "the subscription to propagate")

        cpu0 = (cpu_s(serve.pid), cpu_s(provider_pid))
        t0 = time.monotonic_ns()
        runs = bus.calls("run.request", [{"session_id": s, "input": "do the file work"} for s in sids])
        run_ids = {r["run"]["run_id"] for r in runs}

        final = {}
        running = {}

        def scan():
            # incremental scan of what the subscriber recorded
            while scan.pos < len(sub.events):
                t, frames = sub.events[scan.pos]
                scan.pos += 1
                body = msgpack.unpackb(frames[2], raw=False)
                if body.get("kind") == "run.status":
                    st = body["body"]["status"]
                    rid = body["body"]["run_id"]
                    if st == "running" and rid in run_ids:
                        running.setdefault(rid, t)
                    if st in ("completed", "failed", "cancelled", "expired", "interrupted") and rid in run_ids:
                        final[rid] = (t, st, body["body"].get("reason"))
            return len(final) == len(run_ids)
        scan.pos = 0
        deadline = time.monotonic() + args.timeout
        last_poll = time.monotonic()
        while not scan():
            if time.monotonic() > deadline:
                raise RuntimeError("only %d of %d runs finished" % (len(final), len(run_ids)))
            if time.monotonic() - last_poll > 2:
                # pub/sub may drop: fill from the run records
                last_poll = time.monotonic()
                listed = bus.calls("run.list", [{"limit": 1000}])[0]["runs"]
                now = time.monotonic_ns()
                for r in listed:
                    if r["run_id"] in run_ids and r["status"] in ("completed", "failed", "cancelled",
                                                                  "expired", "interrupted"):
                        final.setdefault(r["run_id"], (now, r["status"], r.get("reason")))
            time.sleep(0.01)
        t1 = max(t for t, _, _ in final.values())
        bad = [(rid, st, why) for rid, (t, st, why) in final.items() if st != "completed"]
        if bad:
            raise RuntimeError("%d runs did not complete, e.g. %r" % (len(bad), bad[:3]))
        listed = bus.calls("run.list", [{"limit": 1000}])[0]["runs"]
        steps = sorted({r["steps"] for r in listed if r["run_id"] in run_ids})
        if steps != [5]:
            raise RuntimeError("runs took %r steps, not 5" % steps)
        rss_kib = vm_hwm_kib(serve.pid)
        cpu = (cpu_s(serve.pid) - cpu0[0], cpu_s(provider_pid) - cpu0[1])

        lat = []
        for t, frames in sub.events:
            if b"text.delta" not in frames[2]:
                continue
            body = msgpack.unpackb(frames[2], raw=False)
            if body.get("kind") != "text.delta":
                continue
            for piece in body["body"]["text"].split(";"):
                if piece.startswith("T"):
                    lat.append((t - int(piece[1:]) * 1000) / 1e6)
        lat.sort()
        expected = args.runs * N_DELTAS
        return {"rps": args.runs / ((t1 - t0) / 1e9), "wall_s": (t1 - t0) / 1e9,
                "p99_ms": percentile(lat, 0.99), "p50_ms": percentile(lat, 0.50),
                "max_ms": lat[-1] if lat else float("nan"), "deltas": len(lat), "expected_deltas": expected,
                "last_running_s": (max(running.values()) - t0) / 1e9 if running else float("nan"),
                "rss_mib": rss_kib / 1024.0, "serve_cpu_s": cpu[0], "provider_cpu_s": cpu[1]}
    finally:
        if sub:
            sub.stop.set()
            sub.join(5)
        if bus:
            bus.close()
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
        shutil.rmtree(wsroot, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.environ.get("SB_BIN") or os.path.join(ROOT, "build", "switchboard"))
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--provider", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--portfile", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.provider:
        provider_main(args.portfile)
        return
    try:
        import msgpack  # noqa: F401
        import zmq  # noqa: F401
    except ImportError as e:
        sys.exit("bench_runs: python3-zmq and python3-msgpack are needed (use /usr/bin/python3): %s" % e)
    if not os.access(args.bin, os.X_OK):
        sys.exit("bench_runs: no switchboard binary at %s (run make)" % args.bin)

    pdir = tempfile.mkdtemp(prefix="sbbp", dir="/tmp")
    portfile = os.path.join(pdir, "port")
    plog = open(os.path.join(pdir, "provider.log"), "wb")
    provider = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--provider", "--portfile", portfile],
                                stdout=plog, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: os.path.exists(portfile) or provider.poll() is not None, 20, "the provider")
        if provider.poll() is not None:
            sys.exit("bench_runs: the provider exited %d" % provider.returncode)
        with open(portfile) as f:
            port = int(f.read())
        reps = []
        for k in range(args.reps):
            r = one_rep(args, port, provider.pid)
            reps.append(r)
            sys.stderr.write("bench_runs: rep %d: %.1f runs/s (%.2f s), chunk->tape p50 %.1f ms p99 %.1f ms "
                             "max %.1f ms (%d/%d deltas), serve VmHWM %.1f MiB, cpu serve %.1f s provider %.1f s, "
                             "last run running at %.2f s\n"
                             % (k + 1, r["rps"], r["wall_s"], r["p50_ms"], r["p99_ms"], r["max_ms"],
                                r["deltas"], r["expected_deltas"], r["rss_mib"], r["serve_cpu_s"],
                                r["provider_cpu_s"], r["last_running_s"]))
            sys.stderr.flush()
        common = {"runs": args.runs, "steps": 5, "reps": len(reps), "load1": round(os.getloadavg()[0], 2),
                  "cpus": os.cpu_count()}

        def fig(name, key, unit, nd, **extra):
            vals = [r[key] for r in reps]
            line = {"bench": name, "value": round(statistics.median(vals), nd), "unit": unit}
            line.update(common)
            line.update(extra)
            line["samples"] = [round(v, nd) for v in vals]
            print(json.dumps(line))
        fig("runs_per_second", "rps", "runs/s", 1,
            serve_cpu_s=round(statistics.median(r["serve_cpu_s"] for r in reps), 2),
            provider_cpu_s=round(statistics.median(r["provider_cpu_s"] for r in reps), 2))
        fig("runs_chunk_to_tape_p99", "p99_ms", "ms", 2,
            p50_ms=round(statistics.median(r["p50_ms"] for r in reps), 2),
            deltas_seen=min(r["deltas"] for r in reps), deltas_expected=args.runs * N_DELTAS)
        fig("runs_serve_peak_rss", "rss_mib", "MiB", 1)
    finally:
        provider.send_signal(signal.SIGTERM)
        try:
            provider.wait(10)
        except subprocess.TimeoutExpired:
            provider.kill()
        plog.close()
        shutil.rmtree(pdir, ignore_errors=True)


if __name__ == "__main__":
    main()
