#!/usr/bin/python3
"""bench_ws — WebSocket fan-out of one session's tape (issue 11).

    /usr/bin/python3 bench/bench_ws.py [--bin build/switchboard] [--events 20000]
                                       [--clients 1,100,1000] [--reps 3]

For each client count it starts a fresh `switchboard serve`, creates a
session, connects N WebSocket clients (bench/node/ws_clients.js, Node.js
with the `ws` package) that subscribe to it, and appends EVENTS note
entries through the bus in batches of 20 (each text carries the epoch µs
of its batch). The same run then does it again with the baseline: a
minimal Node.js relay (bench/node/ws_relay.js, `ws`) fed the same events
by a subscriber of the event plane (this script, as a child process), and
the same clients connected to it.

Figures, one JSON line each per client count, the median of the reps:

  ws.fanout.N.events_per_s   events delivered to all clients / (last - first
                             delivery); baseline: the relay's
  ws.fanout.N.p99_us         append -> client latency, p99 (p50 beside), from
                             every 8th frame of each client, in a second pass
                             at a steady --rate (1000 events/s, 3000 events):
                             at full speed it would measure the clients' backlog
  ws.fanout.N.cpu_us_per_msg server CPU time per delivered message: for
                             switchboard, serve's CPU in the gateway run minus
                             serve's CPU in the relay run (the same appends
                             and commits, gateway idle); for the relay, the
                             relay's and its feeder's CPU

The clients share the machine's cores with the servers, so the CPU figure
is the fair one. Needs Node.js and bench/node/node_modules/ws
(bench/ws_deps.sh installs them), python3-zmq and python3-msgpack.
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
NODE_DIR = os.path.join(HERE, "node")
BATCH = 20


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def wait_for(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise RuntimeError("timed out waiting for " + what)
        time.sleep(0.02)


def cpu_s(pid):
    """utime + stime of a process, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Bus:
    def __init__(self, data):
        import msgpack
        import zmq
        self.zmq, self.msgpack = zmq, msgpack
        self.sock = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect("ipc://%s/bus-cmd" % data)
        self.n = 0

    def call(self, type, body, timeout=30):
        self.n += 1
        rid = "%026d" % self.n
        h = {"type": type, "id": rid, "ts": int(time.time() * 1000), "from": "bench"}
        self.sock.send_multipart([self.msgpack.packb(h, use_bin_type=True),
                                  self.msgpack.packb(body, use_bin_type=True)])
        while True:
            if not self.sock.poll(int(timeout * 1000)):
                raise RuntimeError("no reply to %s" % type)
            hb, bb = self.sock.recv_multipart()
            rh = self.msgpack.unpackb(hb, raw=False)
            if rh.get("corr") == rid:
                b = self.msgpack.unpackb(bb, raw=False)
                if rh["type"] == "error":
                    raise RuntimeError("%s: %r" % (type, b))
                return b

    def close(self):
        self.sock.close(0)


def feeder_main(data, sid):
    """Child process: the relay's feed, event plane -> JSON lines on stdout."""
    import msgpack
    import zmq
    sock = zmq.Context.instance().socket(zmq.SUB)
    sock.setsockopt(zmq.RCVHWM, 0)     # the relay must not lose what it relays
    sock.connect("ipc://%s/bus-pub" % data)
    sock.setsockopt(zmq.SUBSCRIBE, ("session/" + sid).encode())
    out = sys.stdout
    print("ready", file=sys.stderr, flush=True)
    while True:
        frames = sock.recv_multipart()
        ev = {"op": "event"}
        ev.update(msgpack.unpackb(frames[2], raw=False))
        out.write(json.dumps(ev, separators=(",", ":")) + "\n")
        out.flush()


def produce(bus, sid, events, rate=0):
    """Appends in batches of BATCH; at `rate` events/s when rate > 0."""
    t0 = time.monotonic()
    for start in range(0, events, BATCH):
        if rate:
            ahead = t0 + start / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
        t = time.time_ns() // 1000
        entries = [{"kind": "note", "body": {"text": "bench %d t=%d" % (start + k, t)}}
                   for k in range(min(BATCH, events - start))]
        bus.call("session.append", {"session_id": sid, "entries": entries})


def run_clients(url, n, mode, sid, events, origin):
    p = subprocess.Popen(["node", os.path.join(NODE_DIR, "ws_clients.js"), url, str(n), mode, sid,
                          str(events), origin], stdout=subprocess.PIPE, cwd=NODE_DIR)
    line = p.stdout.readline().decode().strip()
    if line != "ready":
        p.kill()
        raise RuntimeError("clients did not get ready: %r" % line)
    return p


def collect(p):
    out = p.stdout.readline().decode()
    p.wait(30)
    r = json.loads(out)
    lat = sorted(r["lat_us"])
    span = max(r["last_ms"] - r["first_ms"], 1e-3) / 1000
    return {"delivered": r["delivered"], "eps": r["delivered"] / span,
            "p50": lat[len(lat) // 2] if lat else None,
            "p99": lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else None}


def one_rep(sb_bin, n, events, rate=0):
    data = tempfile.mkdtemp(prefix="sbws", dir="/tmp")
    serve = subprocess.Popen([sb_bin, "serve", "--data", data, "--http", "127.0.0.1:0",
                              "--http-max-conns", str(n + 64), "--http-max-per-addr", str(n + 64)],
                             stdout=subprocess.DEVNULL, stderr=open(os.path.join(data, "serve.log"), "w"))
    relay = feeder = None
    try:
        wait_for(lambda: os.path.exists(os.path.join(data, "http.port")), 20, "serve")
        port = int(open(os.path.join(data, "http.port")).read())
        token = open(os.path.join(data, "token")).read().strip()
        bus = Bus(data)
        ws_dir = os.path.join(data, "ws")
        os.mkdir(ws_dir)
        res = {}

        # switchboard's gateway
        sid = bus.call("session.create", {"workspace": ws_dir})["session"]["session_id"]
        origin = "http://127.0.0.1:%d" % port
        clients = run_clients("ws://127.0.0.1:%d/ws?token=%s" % (port, token), n, "sb", sid, events, origin)
        c0 = cpu_s(serve.pid)
        produce(bus, sid, events, rate)
        res["sb"] = collect(clients)
        res["sb"]["serve_cpu"] = cpu_s(serve.pid) - c0

        # the baseline: the same appends, relayed by Node
        sid = bus.call("session.create", {"workspace": ws_dir})["session"]["session_id"]
        feeder = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--feeder", data, sid],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        feeder.stderr.readline()
        relay = subprocess.Popen(["node", os.path.join(NODE_DIR, "ws_relay.js")], stdin=feeder.stdout,
                                 stdout=subprocess.PIPE, cwd=NODE_DIR)
        rport = int(relay.stdout.readline())
        clients = run_clients("ws://127.0.0.1:%d/" % rport, n, "relay", sid, events, origin)
        c0, r0, f0 = cpu_s(serve.pid), cpu_s(relay.pid), cpu_s(feeder.pid)
        produce(bus, sid, events, rate)
        res["relay"] = collect(clients)
        res["relay"]["serve_cpu"] = cpu_s(serve.pid) - c0
        res["relay"]["relay_cpu"] = (cpu_s(relay.pid) - r0) + (cpu_s(feeder.pid) - f0)
        bus.close()
        return res
    finally:
        for p in (relay, feeder):
            if p:
                p.kill()
                p.wait()
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(20)
        except subprocess.TimeoutExpired:
            serve.kill()
        shutil.rmtree(data, ignore_errors=True)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--feeder":
        return feeder_main(sys.argv[2], sys.argv[3])
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.environ.get("SB_BIN", os.path.join(ROOT, "build", "switchboard")))
    ap.add_argument("--events", type=int, default=int(os.environ.get("BENCH_WS_EVENTS", "20000")))
    ap.add_argument("--clients", default=os.environ.get("BENCH_WS_CLIENTS", "1,100,1000"))
    ap.add_argument("--reps", type=int, default=int(os.environ.get("BENCH_WS_REPS", "3")))
    ap.add_argument("--rate", type=int, default=int(os.environ.get("BENCH_WS_RATE", "1000")),
                    help="events/s of the latency pass")
    ap.add_argument("--latency-events", type=int, default=int(os.environ.get("BENCH_WS_LAT_EVENTS", "3000")))
    a = ap.parse_args()
    if not shutil.which("node") or not os.path.exists(os.path.join(NODE_DIR, "node_modules", "ws")):
        print(json.dumps({"bench": "ws.fanout", "skipped": "Node.js or the ws package is missing "
                          "(bash bench/ws_deps.sh installs them)"}))
        return 0
    for n in [int(x) for x in a.clients.split(",")]:
        reps = [one_rep(a.bin, n, a.events) for _ in range(a.reps)]
        for r in reps:
            log("  clients %d: sb %r | relay %r" % (n, r["sb"], r["relay"]))
        # latency at a steady rate the clients can follow: at full speed
        # it would measure the clients' backlog, not the server
        lat_reps = [one_rep(a.bin, n, a.latency_events, a.rate) for _ in range(a.reps)]
        for r in lat_reps:
            log("  clients %d at %d/s: sb %r | relay %r" % (n, a.rate, r["sb"], r["relay"]))
        med = lambda side, key: statistics.median(r[side][key] for r in reps)
        eps, eps_b = med("sb", "eps"), med("relay", "eps")
        lmed = lambda side, key: statistics.median(r[side][key] for r in lat_reps)
        p99, p99_b = lmed("sb", "p99"), lmed("relay", "p99")
        # the gateway's own CPU: serve's CPU beyond what the same appends
        # cost it when the gateway had nothing to send
        gw_cpu = statistics.median(max(r["sb"]["serve_cpu"] - r["relay"]["serve_cpu"], 0) / r["sb"]["delivered"]
                                   for r in reps) * 1e6
        relay_cpu = statistics.median(r["relay"]["relay_cpu"] / max(r["relay"]["delivered"], 1)
                                      for r in reps) * 1e6
        common = {"clients": n, "events": a.events, "reps": a.reps}
        print(json.dumps(dict(bench="ws.fanout.%d.events_per_s" % n, value=round(eps), unit="events/s",
                              baseline=round(eps_b), ratio=round(eps / eps_b, 3), **common)), flush=True)
        print(json.dumps(dict(bench="ws.fanout.%d.p99_us" % n, value=round(p99), unit="us",
                              baseline=round(p99_b), ratio=round(p99 / p99_b, 3),
                              p50=round(lmed("sb", "p50")), baseline_p50=round(lmed("relay", "p50")),
                              rate=a.rate, latency_events=a.latency_events, **common)), flush=True)
        print(json.dumps(dict(bench="ws.fanout.%d.cpu_us_per_msg" % n, value=round(gw_cpu, 3), unit="us",
                              baseline=round(relay_cpu, 3), ratio=round(gw_cpu / relay_cpu, 3) if relay_cpu else None,
                              **common)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
