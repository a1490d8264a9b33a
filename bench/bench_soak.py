#!/usr/bin/python3
"""bench_soak — hostile clients against one serve at once (issue 9).

    /usr/bin/python3 bench/bench_soak.py

Starts a fresh `switchboard serve` whose model is tests/llm_server.py, and
for SB_SOAK_SECONDS runs four loads together:

  readers   SB_SOAK_READERS DEALERs with a tiny receive buffer (RCVBUF 4 KiB,
            RCVHWM 1) that send `session.events {limit: 5000}` on a session
            of SB_SOAK_NOTES 8 KB notes, SB_SOAK_READER_RATE requests a
            second in all (at most SB_SOAK_READER_REQUESTS each), and never
            read a reply;
  subs      two SUB subscribers to that session's topic, same tiny buffers,
            that never read while a writer appends SB_SOAK_NOTE_RATE 8 KB
            notes a second (it reads its own acks);
  tool      a run whose model calls `shell` with
            `head -c SB_SOAK_TOOL_MB*1e6 /dev/zero | tr '\\0' y` in a yolo
            session;
  hostile   a DEALER sending SB_SOAK_HOSTILE_RATE malformed messages a
            second: garbage msgpack, bodies of the wrong types, huge
            declared counts, unknown types, wrong frame counts, headers
            whose deadline is past int64 (counted apart: they are valid
            today), and one ~8 MiB oversized body a second. It reads (and
            drops) its replies, so it is not a slow reader too.

It samples serve's /proc/PID/status every 100 ms. If VmRSS passes
SB_SOAK_RSS_CEILING_MB (default 2048) the loads stop early, so an unbounded
server cannot take the machine down with it; the figures say so
(ceiling_hit).

Figures, one JSON line each:

  soak_serve_peak_rss        VmHWM of serve at the end of the load, MiB
  soak_serve_rss_anon_end    RssAnon at the end of the load, MiB
  soak_serve_rss_anon_after  RssAnon once every load's sockets are closed, MiB
                             (memory returned when the peers go away)
  soak_tape_growth           growth of DATA/session over the load, MiB
                             (notes_mib: what the note writer appended)
  soak_tool_output_tape      bytes of tool.output text on the tape for the
                             big call (entries: how many)
  soak_dropped               the messages every drop counter of bus.stats
                             counts (found by name), summed; each counter,
                             and the bytes queued at the end, alongside
  soak_serve_answers         1 when serve still answers bus.stats and a
                             session.append after the load (an error reply
                             counts: past a session quota it is one), else 0

Knobs (environment; defaults of the bench): SB_SOAK_SECONDS (60),
SB_SOAK_READERS (8), SB_SOAK_READER_RATE (10/s), SB_SOAK_READER_REQUESTS
(400 each), SB_SOAK_NOTES (1800), SB_SOAK_NOTE_RATE (100/s),
SB_SOAK_TOOL_MB (100), SB_SOAK_HOSTILE_RATE (200/s),
SB_SOAK_RSS_CEILING_MB (2048), SB_SOAK_SERVE_ARGS (extra serve flags, split
on spaces, e.g. the limits of docs/operations.md), SB_SOAK_SERVE_ENV
(NAME=VALUE words added to serve's environment, e.g.
SWITCHBOARD_SESSION_QUOTA=67108864); SB_BIN, SB_ROOT,
SB_FIXTURES as for the tests. Exits 1 when serve died or stopped
answering. The smoke variant is tests/integration/test_soak_smoke.py,
which calls soak() below with a smaller load.

Needs Debian's python3-zmq and python3-msgpack (run with /usr/bin/python3).
"""
import json
import os
import random
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("SB_ROOT") or os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

import sbtest  # noqa: E402
from sbtest import Client, Server, make_header, pack, tmpdir, wait_for  # noqa: E402
from test_runs_e2e import LLM, LLM_ENV, llm_args  # noqa: E402

import zmq  # noqa: E402  (sbtest has checked it loads)

NOTE_BYTES = 8192
BIG_CALL = "c_soak_big"
OVERSIZED = 8 * 1024 * 1024 + 4096      # just past the 8 MB body limit of session.append
SAMPLE_S = 0.1


def config(**defaults):
    """The soak's parameters: the bench's defaults, then `defaults` (the
    smoke test's), then SB_SOAK_<NAME> from the environment, which wins."""
    cfg = {"seconds": 60.0, "readers": 8, "reader_rate": 10.0, "reader_requests": 400,
           "notes": 1800, "note_rate": 100.0, "tool_mb": 100, "hostile_rate": 200.0,
           "rss_ceiling_mb": 2048, "serve_args": "", "serve_env": ""}
    cfg.update(defaults)
    for k, v in list(cfg.items()):
        e = os.environ.get("SB_SOAK_" + k.upper())
        if e is not None:
            cfg[k] = type(v)(e)
    return cfg


def log(fmt, *args):
    sys.stderr.write("bench_soak: " + (fmt % args if args else fmt) + "\n")
    sys.stderr.flush()


# ---------------------------------------------------------------------------
# measuring serve

def proc_status(pid):
    """VmRSS, VmHWM and RssAnon of pid in KiB (a dict; empty once it is gone)."""
    out = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM", "RssAnon"):
                    out[k] = int(v.split()[0])
    except OSError:
        pass
    return out


def disk_bytes(path):
    """Bytes allocated on disk under path (LMDB files can be sparse)."""
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                pass
    return total


def drops(stats):
    """Every counter in bus.stats whose key names a drop (or an eviction,
    shedding, overflow): {dotted.path: n}. Read by name, so the per-plane
    counters are found wherever the broker files them."""
    out = {}

    def walk(prefix, v):
        if isinstance(v, dict):
            for k, x in v.items():
                walk(prefix + "." + str(k) if prefix else str(k), x)
        elif isinstance(v, int) and not isinstance(v, bool) and \
                any(w in prefix for w in ("drop", "evict", "shed", "overflow")):
            out[prefix] = v
    walk("", stats)
    return out


class Sampler(threading.Thread):
    """Reads serve's memory every SAMPLE_S; sets `over` past the ceiling."""

    def __init__(self, pid, ceiling_kib):
        super().__init__(daemon=True)
        self.pid, self.ceiling = pid, ceiling_kib
        self.peak_rss = self.peak_anon = 0
        self.over = threading.Event()
        self.stop = threading.Event()
        self.last = {}

    def run(self):
        while not self.stop.is_set():
            s = proc_status(self.pid)
            if not s:
                return
            self.last = s
            self.peak_rss = max(self.peak_rss, s.get("VmRSS", 0))
            self.peak_anon = max(self.peak_anon, s.get("RssAnon", 0))
            if s.get("VmRSS", 0) > self.ceiling:
                self.over.set()
            self.stop.wait(SAMPLE_S)


# ---------------------------------------------------------------------------
# the loads; each thread owns its sockets and stops on `halt`

def tiny_socket(kind, endpoint, prefix=None):
    """A socket that takes almost nothing off the wire: the peer's queues
    are what fill."""
    s = sbtest.context().socket(kind)
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.RCVHWM, 1)
    s.setsockopt(zmq.RCVBUF, 4096)
    if prefix is not None:
        s.setsockopt(zmq.SUBSCRIBE, prefix)
    s.connect(endpoint)
    return s


class Load(threading.Thread):
    def __init__(self, name, halt):
        super().__init__(daemon=True, name=name)
        self.halt = halt
        self.counts = {}
        self.error = None

    def count(self, key, n=1):
        self.counts[key] = self.counts.get(key, 0) + n

    def run(self):
        try:
            self.body()
        except Exception as e:      # reported, never hangs the soak
            self.error = "%s: %r" % (self.name, e)
            log("%s", self.error)


def paced(halt, rate):
    """Yields the number of actions due since the last step, at `rate`
    per second, until `halt` is set."""
    t0 = time.monotonic()
    done = 0
    while not halt.is_set():
        due = int((time.monotonic() - t0) * rate) - done
        if due > 0:
            done += due
            yield due
        else:
            halt.wait(min(0.05, 1.0 / rate))


class Readers(Load):
    """(a) DEALERs that ask for big pages and never read them."""

    def __init__(self, halt, endpoint, sid, cfg):
        super().__init__("readers", halt)
        self.endpoint, self.sid, self.cfg = endpoint, sid, cfg

    def body(self):
        socks = [tiny_socket(zmq.DEALER, self.endpoint) for _ in range(self.cfg["readers"])]
        cap = self.cfg["readers"] * self.cfg["reader_requests"]
        if not socks:
            return
        k = 0
        try:
            for due in paced(self.halt, self.cfg["reader_rate"]):
                for _ in range(due):
                    if k >= cap:
                        break
                    h = make_header("session.events", frm="soak-reader")
                    try:
                        socks[k % len(socks)].send_multipart(
                            [pack(h), pack({"session_id": self.sid, "after_seq": 0, "limit": 5000})],
                            zmq.NOBLOCK)
                        self.count("sent")
                    except zmq.Again:
                        self.count("send_blocked")
                    k += 1
        finally:
            for s in socks:
                s.close(0)


class Notes(Load):
    """(b) the writer whose notes fill the two subscribers that never read."""

    def __init__(self, halt, endpoint, sid, cfg):
        super().__init__("notes", halt)
        self.endpoint, self.sid, self.cfg = endpoint, sid, cfg

    def body(self):
        c = Client(self.endpoint, name="soak-notes")
        inflight = set()
        text = "n" * NOTE_BYTES
        try:
            for due in paced(self.halt, self.cfg["note_rate"]):
                for _ in range(due):
                    if len(inflight) >= 64:
                        self.count("throttled")
                        break
                    inflight.add(c.send("session.append", {"session_id": self.sid, "kind": "note",
                                                           "body": {"text": text}}))
                for m in c.drain():
                    if m.corr in inflight:
                        inflight.discard(m.corr)
                        self.count("errors." + str(m.code) if m.is_error() else "acked")
        finally:
            c.close()


def hostile_messages():
    """Each kind of malformed message the hostile DEALER sends, as a
    function returning the frames."""
    def garbage():
        return [bytes(random.getrandbits(8) for _ in range(random.randint(1, 200))),
                bytes(random.getrandbits(8) for _ in range(random.randint(1, 200)))]

    def wrong_types():
        return [pack(make_header("session.events", frm="soak-hostile")),
                pack({"session_id": 42, "after_seq": "zero", "limit": [5000]})]

    def huge_counts():
        return [pack(make_header("session.append", frm="soak-hostile")),
                random.choice([b"\xdf\xff\xff\xff\xff", b"\xdd\xff\xff\xff\xff",
                               b"\xdb\xff\xff\xff\xffxxxxxxxx", b"\xc6\xff\xff\xff\xff",
                               b"\x81\xa4text\xdb\x7f\xff\xff\xff"])]

    def unknown_type():
        return [pack(make_header("soak.no.such.type", frm="soak-hostile")), pack({})]

    def frame_count():
        return random.choice([[pack(make_header("bus.stats"))], [b"a", b"b", b"c", b"d"]])

    def bad_header():
        return [pack({"type": 7, "id": None}), pack({})]

    def huge_ints():
        # a deadline past int64 (issue 9, item 9), on a session nobody has
        h = make_header("session.events", frm="soak-hostile", deadline=random.choice([2**63, 2**64 - 1]))
        return [pack(h), pack({"session_id": "0" * 26, "limit": 10})]
    return [garbage, wrong_types, huge_counts, unknown_type, frame_count, bad_header, huge_ints]


class Hostile(Load):
    """(d) malformed input, and one oversized body a second."""

    def __init__(self, halt, endpoint, sid, cfg):
        super().__init__("hostile", halt)
        self.endpoint, self.sid, self.cfg = endpoint, sid, cfg

    def body(self):
        s = sbtest.context().socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.connect(self.endpoint)
        kinds = hostile_messages()
        big = pack({"session_id": self.sid, "kind": "note", "body": {"text": "z" * OVERSIZED}})
        last_big = 0.0
        try:
            for due in paced(self.halt, self.cfg["hostile_rate"]):
                for _ in range(due):
                    fn = random.choice(kinds)
                    try:
                        s.send_multipart(fn(), zmq.NOBLOCK)
                        self.count(fn.__name__ if fn.__name__ == "huge_ints" else "sent")
                    except zmq.Again:
                        self.count("send_blocked")
                if time.monotonic() - last_big >= 1.0:
                    last_big = time.monotonic()
                    try:
                        s.send_multipart([pack(make_header("session.append", frm="soak-hostile")), big],
                                         zmq.NOBLOCK)
                        self.count("oversized")
                    except zmq.Again:
                        self.count("send_blocked")
                while s.poll(0):
                    s.recv_multipart()
                    self.count("replies")
            self.barrier(s)
        finally:
            s.close(0)

    def barrier(self, s, timeout=10.0):
        """A valid request, answered: the broker takes one peer's messages
        in order, so every malformed one sent before it has been counted
        (and none is lost when the socket closes with LINGER 0). Without
        this, a bus.stats right after the load may count fewer than sent."""
        h = make_header("bus.stats", frm="soak-hostile")
        s.send_multipart([pack(h), pack({})])
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not s.poll(int(left * 1000) + 1):
                self.count("barrier_timeout")
                return
            frames = s.recv_multipart()
            self.count("replies")
            try:
                if len(frames) == 2 and sbtest.unpack(frames[0], strict=False).get("corr") == h["id"]:
                    return
            except Exception:
                pass


# ---------------------------------------------------------------------------
# the soak

def call(c, type, body, timeout=30):
    m = c.request(type, body, timeout=timeout)
    if m.type != type + ".ok":
        raise RuntimeError("%s answered %s %r" % (type, m.type, m.body))
    return m.body


def tool_output_on_tape(c, sid):
    """(text bytes, entries) of tool.output for BIG_CALL on sid's tape."""
    after, size, n = 0, 0, 0
    while True:
        b = call(c, "session.events", {"session_id": sid, "after_seq": after, "limit": 1000}, timeout=60)
        for e in b["events"]:
            if e.get("kind") == "tool.output" and (e.get("body") or {}).get("call_id") == BIG_CALL:
                size += len(e["body"].get("text", "").encode())
                n += 1
        after = b["next_after"]
        if not b["more"]:
            return size, n


def soak(cfg):
    """Runs the soak with `cfg` (see config()); returns the figures as a
    dict. Everything it starts is stopped before it returns."""
    llm = LLM()
    tool_cmd = "head -c %d /dev/zero | tr '\\0' y" % (cfg["tool_mb"] * 1000000)
    llm.script("soak", [{"tool_calls": [{"name": "shell", "arguments": {"command": tool_cmd},
                                         "call_id": BIG_CALL}]},
                        {"text": "soaked"}])
    ws = tmpdir()
    env = dict(LLM_ENV)
    env.update(w.split("=", 1) for w in cfg["serve_env"].split())
    server = Server(args=llm_args(llm, "soak") + cfg["serve_args"].split(), env=env)
    server.start(timeout=20)
    pid = server.proc.pid
    cmd = server.endpoint("cmd")
    halt = threading.Event()
    loads, subs = [], []
    sampler = Sampler(pid, cfg["rss_ceiling_mb"] * 1024)
    res = {"cfg": dict(cfg)}
    try:
        ctl = server.control()
        notes_sid = call(ctl, "session.create", {"workspace": ws})["session"]["session_id"]
        run_sid = call(ctl, "session.create", {"workspace": ws, "approval_policy": "yolo"})["session"]["session_id"]
        # the notes the readers page through, in batches (8 MB per append)
        text = "n" * NOTE_BYTES
        left = cfg["notes"]
        while left > 0:
            k = min(left, 900)
            m = ctl.request("session.append", {"session_id": notes_sid,
                                               "entries": [{"kind": "note", "body": {"text": text}}] * k},
                            timeout=30)
            if m.type != "session.append.ok":
                # a session quota smaller than the notes: soak with what fits
                log("setup stopped with %d notes left: %s %r", left, m.type, m.body)
                break
            left -= k
        res["notes_setup"] = cfg["notes"] - left
        tape0 = disk_bytes(os.path.join(server.data, "session"))
        data0 = disk_bytes(server.data)
        base = proc_status(pid)
        log("setup: %d notes, tape %.1f MiB, serve RSS %.1f MiB", res["notes_setup"], tape0 / 2**20,
            base.get("VmRSS", 0) / 1024)

        sampler.start()
        for _ in range(2):
            subs.append(tiny_socket(zmq.SUB, server.endpoint("pub"), ("session/" + notes_sid).encode()))
        loads = [Readers(halt, cmd, notes_sid, cfg), Notes(halt, cmd, notes_sid, cfg),
                 Hostile(halt, cmd, notes_sid, cfg)]
        t0 = time.monotonic()
        for t in loads:
            t.start()
        run_id = call(ctl, "run.request", {"session_id": run_sid, "input": "make noise"})["run"]["run_id"]
        run_status, run_done_s, next_log = "queued", None, t0 + 5
        while time.monotonic() - t0 < cfg["seconds"] and not sampler.over.is_set():
            if not server.proc.alive():
                break
            if run_done_s is None:
                try:
                    m = ctl.request("run.get", {"run_id": run_id}, timeout=30)
                except sbtest.TestFailure:
                    m = None        # a busy serve; the figures tell
                if m and m.type == "run.get.ok":
                    run_status = m.body["run"]["status"]
                    if run_status in ("completed", "failed", "cancelled", "expired", "interrupted"):
                        run_done_s = time.monotonic() - t0
            if time.monotonic() >= next_log:
                next_log += 5
                s = sampler.last
                log("%4.0f s: serve RSS %.0f MiB (anon %.0f), run %s", time.monotonic() - t0,
                    s.get("VmRSS", 0) / 1024, s.get("RssAnon", 0) / 1024, run_status)
            halt.wait(0.25)
        res["elapsed_s"] = time.monotonic() - t0
        res["ceiling_hit"] = sampler.over.is_set()
        halt.set()
        for t in loads:
            t.join(30)
        end = proc_status(pid)
        res["alive"] = bool(end) and server.proc.alive()
        res["peak_rss_mib"] = max(end.get("VmHWM", 0), sampler.peak_rss) / 1024
        res["rss_anon_end_mib"] = end.get("RssAnon", 0) / 1024
        res["peak_anon_mib"] = sampler.peak_anon / 1024
        res["base_rss_mib"] = base.get("VmRSS", 0) / 1024
        res["run_status"], res["run_done_s"] = run_status, run_done_s
        res["loads"] = {t.name: t.counts for t in loads}
        res["load_errors"] = [t.error for t in loads if t.error]

        # does serve still answer, to a peer that did nothing wrong?
        answers = False
        stats = {}
        if res["alive"]:
            fresh = Client(cmd, name="soak-after")
            try:
                m = fresh.request("bus.stats", {}, timeout=10)
                if m and m.type == "bus.stats.ok":
                    stats = m.body
                    # any reply counts: past a session quota it is an error
                    a = fresh.request("session.append", {"session_id": notes_sid, "kind": "note",
                                                         "body": {"text": "after"}}, timeout=10)
                    res["append_after"] = a.code or a.type
                    answers = True
            except sbtest.TestFailure as e:
                log("serve does not answer after the load: %s", e)
            finally:
                fresh.close()
        res["answers"] = answers
        res["drops"] = drops(stats)
        res["queued"] = {k: v for k, v in (stats.get("queues") or {}).items()
                         if k.endswith("bytes") or k.endswith("bytes_limit")}
        res["malformed"] = (stats.get("malformed") or {}).get("total", 0)
        res["tape_growth_mib"] = (disk_bytes(os.path.join(server.data, "session")) - tape0) / 2**20
        res["data_growth_mib"] = (disk_bytes(server.data) - data0) / 2**20
        res["notes_mib"] = res["loads"]["notes"].get("acked", 0) * NOTE_BYTES / 2**20

        # the peers go away: what does serve give back?
        for s in subs:
            s.close(0)
        subs = []
        res["rss_anon_after_mib"] = res["rss_anon_end_mib"]
        if answers:
            settle = {"prev": -1}

            def settled():
                call(ctl, "bus.stats", {}, timeout=10)
                now = proc_status(pid).get("RssAnon", 0)
                same = abs(now - settle["prev"]) < 1024
                settle["prev"] = now
                return same
            try:
                wait_for(settled, 10, "serve's memory to settle", interval=0.5)
            except sbtest.TestFailure:
                pass
            res["rss_anon_after_mib"] = settle["prev"] / 1024
            res["tool_output_bytes"], res["tool_output_entries"] = tool_output_on_tape(ctl, run_sid)
        else:
            res["tool_output_bytes"], res["tool_output_entries"] = None, None
        return res
    finally:
        halt.set()
        sampler.stop.set()
        for t in loads:
            t.join(30)
        for s in subs:
            s.close(0)
        server.stop(signal.SIGTERM, 30)
        llm.stop()


def figures(res):
    """The JSON lines of a soak's result."""
    cfg = res["cfg"]
    common = {"seconds": round(res["elapsed_s"], 1), "ceiling_hit": res["ceiling_hit"],
              "readers": cfg["readers"], "notes": res["notes_setup"], "tool_mb": cfg["tool_mb"],
              "serve_args": cfg["serve_args"], "serve_env": cfg["serve_env"],
              "load1": round(os.getloadavg()[0], 2)}

    def line(name, value, unit, **extra):
        d = {"bench": name, "value": value, "unit": unit}
        d.update(common)
        d.update(extra)
        return json.dumps(d)
    r1 = lambda v: None if v is None else round(v, 1)  # noqa: E731
    return [
        line("soak_serve_peak_rss", r1(res["peak_rss_mib"]), "MiB", base_mib=r1(res["base_rss_mib"]),
             ceiling_mib=cfg["rss_ceiling_mb"]),
        line("soak_serve_rss_anon_end", r1(res["rss_anon_end_mib"]), "MiB", peak_anon_mib=r1(res["peak_anon_mib"])),
        line("soak_serve_rss_anon_after", r1(res["rss_anon_after_mib"]), "MiB"),
        line("soak_tape_growth", r1(res["tape_growth_mib"]), "MiB", notes_mib=r1(res["notes_mib"]),
             data_growth_mib=r1(res["data_growth_mib"])),
        line("soak_tool_output_tape", res["tool_output_bytes"], "bytes", entries=res["tool_output_entries"],
             run_status=res["run_status"], run_done_s=r1(res["run_done_s"])),
        line("soak_dropped", sum(v for k, v in res["drops"].items() if not k.endswith("bytes")), "messages",
             per_plane=res["drops"], queued_at_end=res["queued"], malformed=res["malformed"], loads=res["loads"]),
        line("soak_serve_answers", 1 if res["answers"] else 0, "bool", alive=res["alive"],
             append_after=res.get("append_after"),
             load_errors=res["load_errors"]),
    ]


def main():
    if not os.access(sbtest.SB_BIN, os.X_OK):
        sys.exit("bench_soak: no switchboard binary at %s (run make)" % sbtest.SB_BIN)
    cfg = config()
    log("%.0f s: %d readers, %d notes, %.0f notes/s, %d MB tool output, %.0f hostile/s",
        cfg["seconds"], cfg["readers"], cfg["notes"], cfg["note_rate"], cfg["tool_mb"], cfg["hostile_rate"])
    res = soak(cfg)
    for line in figures(res):
        print(line)
    sys.stdout.flush()
    if not res["answers"]:
        log("serve %s after the load", "stopped answering" if res["alive"] else "died")
        sys.exit(1)


if __name__ == "__main__":
    main()
