#!/usr/bin/python3
"""Workers on other "hosts" (issue 12; docs/workers.md): three network
namespaces joined by veth pairs, `cp` (serve: broker, session, run, llm,
exec, and the scripted model on cp's loopback), `w1` and `w2` (a
`switchboard worker` each, reaching cp's bus over TCP on their own
addresses). The test drives cp over ipc (a path-bound socket, reachable
from every namespace).

  - both workers serve: runs of the pool run on w1 and on w2, and each
    session's events reach a subscriber in cp with contiguous seqs;
  - lease expiry: SIGKILL the worker mid-run: the run is `expired` within
    lease + 1 s, and `resume` runs it on the other worker;
  - cancel from cp reaches the worker through its heartbeat: `cancelled`
    within 2 heartbeats.

The TCP bus uses CURVE: each worker has its own key (`keys new`);
test_curve.py checks the refusals (unknown key, no CURVE) on loopback.
Skipped (77) when not root or `ip netns` is unavailable.
"""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import (ROOT, SB_BIN, Client, Proc, Sub, TestFailure, check, run_tests, sb, skip, tmpdir,  # noqa: E402
                    unpack, wait_for)
from sbagent import FIXTURES, LLM_ENV, PY, call, get_run, new_session, tape, wait_run  # noqa: E402

TAG = "%04d" % (os.getpid() % 10000)
NS = {"cp": "sbcp" + TAG, "w1": "sbw1" + TAG, "w2": "sbw2" + TAG}
ADDR = {"w1": ("10.77.1.1", "10.77.1.2"), "w2": ("10.77.2.1", "10.77.2.2")}
PORT = 5555
LEASE = 3


def ipx(*args):
    r = subprocess.run(["ip"] + list(args), capture_output=True, text=True, timeout=10)
    if r.returncode != 0:
        raise TestFailure("ip %s: %s" % (" ".join(args), r.stderr.strip()))


def netns_up():
    for n in NS.values():
        ipx("netns", "add", n)
        ipx("-n", n, "link", "set", "lo", "up")
    for w in ("w1", "w2"):
        a, b = "sbv%s%s" % (w[1], TAG), "sbp%s%s" % (w[1], TAG)
        ipx("link", "add", a, "type", "veth", "peer", "name", b)
        ipx("link", "set", a, "netns", NS["cp"])
        ipx("link", "set", b, "netns", NS[w])
        ipx("-n", NS["cp"], "addr", "add", ADDR[w][0] + "/24", "dev", a)
        ipx("-n", NS[w], "addr", "add", ADDR[w][1] + "/24", "dev", b)
        ipx("-n", NS["cp"], "link", "set", a, "up")
        ipx("-n", NS[w], "link", "set", b, "up")


def netns_down():
    for n in NS.values():
        subprocess.run(["ip", "netns", "del", n], capture_output=True, timeout=10)


def in_ns(ns, argv):
    return ["ip", "netns", "exec", NS[ns]] + argv


class World:
    """cp's server and model, and the two workers. The model replays
    `script_turns`, or, with `scenario`, that llm_server scenario (for
    instance gen=N, which bench/bench_netns.py uses)."""

    def __init__(self, script_turns, scenario=None):
        self.data = tmpdir()
        d = tmpdir()
        portfile = os.path.join(d, "port")
        self.llm = Proc(in_ns("cp", [PY, os.path.join(ROOT, "tests", "llm_server.py"), "--port", "0",
                                     "--portfile", portfile, "--fixtures", FIXTURES]),
                        os.path.join(d, "llm.log"))
        wait_for(lambda: os.path.exists(portfile), 10, "llm_server in cp")
        with open(portfile) as f:
            self.llm_port = int(f.read().strip())
        if script_turns is not None:
            self.script("s", script_turns)
        url = "http://127.0.0.1:%d/%s/v1" % (self.llm_port, scenario or "script=s")
        for name in ("w1", "w2"):
            rc, out, err = sb("keys", "new", name, "--pool", "p", "--data", self.data)
            check(rc == 0, "keys new %s: %s", name, err)
        self.serve = Proc(in_ns("cp", [SB_BIN, "serve", "--data", self.data, "--http", "127.0.0.1:0",
                                       "--bus", "tcp://0.0.0.0:%d" % PORT,
                                       "--llm", "responses", "--llm-url", url, "--model", "m"]),
                          os.path.join(self.data, "serve.log"), env=LLM_ENV)
        self.endpoint = "ipc://%s/bus-cmd" % self.data
        self.ctl = None

        def up():
            if not self.serve.alive():
                raise TestFailure("serve exited: %s" % self.serve.log())
            if not os.path.exists(os.path.join(self.data, "bus-cmd")):
                return False
            if self.ctl is None:
                self.ctl = Client(self.endpoint, name="netns-ctl")
            try:
                return self.ctl.request("bus.stats", {}, timeout=0.5).type == "bus.stats.ok"
            except TestFailure:
                return False
        wait_for(up, 15, "serve in cp")
        self.workers = {}

    def script(self, name, turns):
        # the model's control endpoint lives in cp: ask from there
        import json
        body = json.dumps({"op": "script", "name": name, "turns": turns, "repeat_last": True})
        r = subprocess.run(in_ns("cp", [PY, "-c",
                                        "import sys,urllib.request;"
                                        "r=urllib.request.Request(sys.argv[1],data=sys.argv[2].encode(),"
                                        "headers={'Content-Type':'application/json'});"
                                        "print(urllib.request.urlopen(r,timeout=10).read().decode())",
                                        "http://127.0.0.1:%d/_control" % self.llm_port, body]),
                           capture_output=True, text=True, timeout=20)
        check(r.returncode == 0, "script: %s", r.stderr)

    # the helpers of test_runs_e2e take a server with control()
    def control(self):
        return self.ctl

    def start_worker(self, name, lease=LEASE):
        cp_addr = ADDR[name][0]
        p = Proc(in_ns(name, [SB_BIN, "worker", "--connect", "tcp://%s:%d" % (cp_addr, PORT), "--id", name,
                              "--pool", "p", "--lease", str(lease),
                              "--cert", os.path.join(self.data, "certs", "clients", name + "_secret"),
                              "--server-key", os.path.join(self.data, "certs", "server")]),
                 os.path.join(self.data, "worker-%s.log" % name), env={"OPENAI_API_KEY": ""})
        self.workers[name] = p

        def up():
            if not p.alive():
                raise TestFailure("worker %s exited: %s" % (name, p.log()))
            return self.ctl.request("worker.get", {"worker_id": name}).type == "worker.get.ok"
        wait_for(up, 15, "worker %s to register over TCP" % name)
        return p

    def close(self):
        for p in self.workers.values():
            p.kill()
        if self.ctl:
            self.ctl.close()
        self.serve.stop()
        self.llm.kill()


def session(world):
    return new_session(world, tmpdir(), approval_policy="yolo", target="worker:p")


def prompt(world, sid, text):
    return call(world, "session.prompt", {"session_id": sid, "text": text})["run_id"]


def test_two_workers_serve_expiry_resume_and_cancel():
    if os.geteuid() != 0:
        skip("needs root to create network namespaces")
    try:
        subprocess.run(["ip", "netns", "list"], check=True, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        skip("ip netns is unavailable")
    netns_down()
    try:
        netns_up()
    except TestFailure as e:
        netns_down()
        skip("cannot create network namespaces here: %s" % e)
    world = None
    try:
        # every model call: a short shell step, then the answer
        world = World([{"tool_calls": [{"name": "shell", "arguments": {"command": "sleep 0.4; echo step"}}]},
                       {"text": "done"}])
        world.start_worker("w1")
        world.start_worker("w2")
        sub = Sub("ipc://%s/bus-pub" % world.data, "session/")

        # both workers serve; events reach cp with contiguous seqs
        sids = [session(world) for _ in range(4)]
        runs = [prompt(world, s, "step") for s in sids]
        done = [wait_run(world, r, timeout=40) for r in runs]
        check(all(d["status"] == "completed" for d in done), "runs: %r", done)
        by = {d["worker_id"] for d in done}
        check(by == {"w1", "w2"}, "the runs ran on %r, not on both workers", by)
        seen = {}
        while True:
            f = sub.recv_frames(timeout=0.5)
            if f is None:
                break
            b = unpack(f[2])
            seen.setdefault(b.get("session_id"), []).append(b["seq"])
        for s in sids:
            seqs = sorted(seen.get(s, []))
            check(seqs and seqs == list(range(seqs[0], seqs[0] + len(seqs))),
                  "session %s: seqs seen in cp %r", s, seqs)
            tseqs = [e["seq"] for e in tape(world, s)]
            check(tseqs == list(range(1, len(tseqs) + 1)), "tape seqs %r", tseqs)

        # lease expiry: SIGKILL the worker mid-run, resume on the other
        world.script("s", [{"tool_calls": [{"name": "shell", "arguments": {"command": "sleep 30"}}]},
                           {"text": "resumed"}])
        sid = session(world)
        rid = prompt(world, sid, "long")
        wait_for(lambda: get_run(world, rid)["status"] == "running" and
                 "tool.call" in [e["kind"] for e in tape(world, sid)], 20, "the long tool to start")
        holder = get_run(world, rid)["worker_id"]
        other = "w2" if holder == "w1" else "w1"
        world.workers[holder].send_signal(signal.SIGKILL)
        t0 = time.monotonic()
        r = wait_run(world, rid, ("expired",), timeout=15)
        took = time.monotonic() - t0
        print("  SIGKILL -> expired in %.0f ms (lease %d s)" % (took * 1000, LEASE))
        check(took < LEASE + 1.0, "expired %.3f s after the kill (lease %d s)", took, LEASE)
        check(r["reason"] == "lease_expired", "reason %r", r)
        new = call(world, "run.resume", {"run_id": rid})["run"]
        d = wait_run(world, new["run_id"], timeout=40)
        check(d["status"] == "completed" and d["worker_id"] == other, "resumed run: %r", d)

        # cancel from cp, through the heartbeat (every lease/3 = 1 s)
        world.script("s", [{"tool_calls": [{"name": "shell", "arguments": {"command": "sleep 600"}}]}])
        sid = session(world)
        rid = prompt(world, sid, "forever")
        wait_for(lambda: "tool.call" in [e["kind"] for e in tape(world, sid)], 20, "the tool to start")
        t0 = time.monotonic()
        call(world, "run.cancel", {"run_id": rid})
        r = wait_run(world, rid, timeout=10)
        took = time.monotonic() - t0
        print("  cancel -> %s in %.0f ms (heartbeat %d ms)" % (r["status"], took * 1000, LEASE * 1000 // 3))
        check(r["status"] == "cancelled" and took < 2 * LEASE / 3.0 + 0.5, "cancel: %.3f s %r", took, r)
        sub.close()
    finally:
        if world:
            world.close()
        netns_down()


if __name__ == "__main__":
    run_tests(globals())
