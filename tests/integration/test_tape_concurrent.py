#!/usr/bin/python3
"""Concurrent appenders: 8 clients, each appending to its own session and
to one shared session, some with single appends and some with batches,
each with several appends in flight. Every session's seqs stay contiguous
from 1, every acknowledged entry is on the tape at its acknowledged seq,
nothing is there twice, and one client's entries keep their order."""
import os
import re
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Client, Server, Sub, check, run_tests, tmpdir, unpack  # noqa: E402

CLIENTS = 8
PER_SESSION = 600       # entries each client appends to each of its two sessions
WINDOW = 16
BATCH = 8               # entries per request for the batching clients


def create_session(cli, workspace, title):
    m = cli.request("session.create", {"workspace": workspace, "title": title}, timeout=10)
    check(m.type == "session.create.ok", "create answered %r", m)
    return m.body["session"]["session_id"]


def read_tape(cli, sid):
    out, after = [], 0
    while True:
        m = cli.request("session.events", {"session_id": sid, "after_seq": after}, timeout=10)
        check(m.type == "session.events.ok", "events answered %r", m)
        out.extend(m.body["events"])
        after = m.body["next_after"]
        if not m.body["more"]:
            return out, m.body["last_seq"]


class Appender(threading.Thread):
    """One client: alternates between its own session and the shared one,
    keeping up to WINDOW requests in flight."""

    def __init__(self, endpoint, n, own, shared):
        super().__init__(daemon=True)
        self.endpoint, self.n, self.own, self.shared = endpoint, n, own, shared
        self.batching = n % 2 == 1
        self.acked = []         # (session, seq, client, index)
        self.error = None

    def requests(self):
        step = BATCH if self.batching else 1
        for i in range(0, PER_SESSION, step):
            for sid in (self.own, self.shared):
                idx = list(range(i, min(i + step, PER_SESSION)))
                yield sid, idx

    def run(self):
        cli = Client(self.endpoint, name="appender-%d" % self.n)
        try:
            pending = {}
            todo = self.requests()
            exhausted = False
            deadline = time.monotonic() + 120
            while not exhausted or pending:
                check(time.monotonic() < deadline, "client %d stalled", self.n)
                while not exhausted and len(pending) < WINDOW:
                    try:
                        sid, idx = next(todo)
                    except StopIteration:
                        exhausted = True
                        break
                    if self.batching:
                        body = {"session_id": sid, "run_id": "%026d" % self.n,
                                "entries": [{"kind": "note", "body": {"c": self.n, "i": i}} for i in idx]}
                    else:
                        body = {"session_id": sid, "kind": "note", "body": {"c": self.n, "i": idx[0]}}
                    pending[cli.send("session.append", body)] = (sid, idx)
                if not pending:
                    break
                m = cli.recv(timeout=10)
                check(m is not None, "client %d: no reply within 10 s", self.n)
                sid, idx = pending.pop(m.corr)
                check(m.type == "session.append.ok", "client %d: append answered %r", self.n, m)
                if self.batching:
                    first, last = m.body["first_seq"], m.body["last_seq"]
                    check(last - first + 1 == len(idx), "batch of %d got seqs %d..%d", len(idx), first, last)
                    seqs = range(first, last + 1)
                else:
                    seqs = [m.body["seq"]]
                for seq, i in zip(seqs, idx):
                    self.acked.append((sid, seq, self.n, i))
        except Exception as e:     # reported by the main thread
            self.error = e
        finally:
            cli.close()


def test_concurrent_appenders_keep_every_tape_contiguous():
    workspace = tmpdir()
    server = Server().start()
    cli = Client(server.endpoint("cmd"))
    shared = create_session(cli, workspace, "shared")
    own = [create_session(cli, workspace, "client %d" % n) for n in range(CLIENTS)]
    # A subscriber on every session: what is published matches the tape.
    sub = Sub(server.endpoint("pub"), "session/")
    threads = [Appender(server.endpoint("cmd"), n, own[n], shared) for n in range(CLIENTS)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
        check(not t.is_alive(), "client %d did not finish", t.n)
        if t.error:
            raise t.error
    elapsed = time.monotonic() - t0

    acked = {}
    for t in threads:
        for sid, seq, c, i in t.acked:
            check((sid, seq) not in acked, "seq %d of %s acknowledged twice", seq, sid)
            acked[(sid, seq)] = (c, i)
    total = 2 * CLIENTS * PER_SESSION
    check(len(acked) == total, "%d acknowledged, want %d", len(acked), total)

    for sid in own + [shared]:
        entries, head = read_tape(cli, sid)
        seqs = [e["seq"] for e in entries]
        check(seqs == list(range(1, head + 1)), "session %s: seqs not contiguous from 1", sid)
        want = PER_SESSION * (CLIENTS if sid == shared else 1) + 1
        check(head == want, "session %s: head %d, want %d", sid, head, want)
        seen, last_i = set(), {}
        for e in entries[1:]:
            c, i = e["body"]["c"], e["body"]["i"]
            check(acked.get((sid, e["seq"])) == (c, i), "session %s seq %d holds %r, acknowledged for %r",
                  sid, e["seq"], (c, i), acked.get((sid, e["seq"])))
            check((c, i) not in seen, "entry %r twice in %s", (c, i), sid)
            seen.add((c, i))
            check(i > last_i.get(c, -1), "client %d's entries out of order in %s", c, sid)
            last_i[c] = i
            if c % 2 == 1:
                check(e.get("run_id") == "%026d" % c, "batch entry lost its run_id: %r", e)

    # Every published event was on the tape with the same content.
    published, seen_pub = 0, set()
    tapes = {sid: {e["seq"]: e for e in read_tape(cli, sid)[0]} for sid in own + [shared]}
    while True:
        f = sub.recv_frames(timeout=0.5)
        if f is None:
            break
        body = unpack(f[2])
        check(f[0].decode() == "session/" + body["session_id"], "topic %r for %s", f[0], body["session_id"])
        check(tapes[body["session_id"]][body["seq"]] == body, "published entry differs from the tape")
        key = (body["session_id"], body["seq"])
        check(key not in seen_pub, "seq %d of %s published twice", key[1], key[0])
        seen_pub.add(key)
        published += 1
    check(published > 0, "nothing was published")
    sub.close()
    cli.close()
    server.stop()
    print("  %d entries from %d clients in %.2f s (%.0f entries/s); %d published events checked"
          % (total, CLIENTS, elapsed, total / elapsed, published))


def test_map_growth_reruns_drains_cleanly():
    """From a 64 KiB map, drains keep hitting MDB_MAP_FULL: the store grows
    the map and runs the drain's transaction again. A re-run must not
    publish, acknowledge or remember anything twice."""
    workspace = tmpdir()
    server = Server(env={"SWITCHBOARD_SESSION_MAPSIZE": "65536"}).start()
    cli = Client(server.endpoint("cmd"))
    sub = Sub(server.endpoint("pub"), "session/")
    shared = create_session(cli, workspace, "shared")
    own = [create_session(cli, workspace, "client %d" % n) for n in range(CLIENTS)]
    threads = [Appender(server.endpoint("cmd"), n, own[n], shared) for n in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
        check(not t.is_alive(), "client %d did not finish", t.n)
        if t.error:
            raise t.error
    # retried command ids across grows: the same answer, nothing appended
    first = cli.request("session.append", {"session_id": shared, "kind": "note", "command_id": "grow-1",
                                           "body": {"pad": "p" * 200000}})
    again = cli.request("session.append", {"session_id": shared, "kind": "note", "command_id": "grow-1",
                                           "body": {"pad": "p" * 200000}})
    check(first.type == "session.append.ok" and first.body == again.body, "retry %r %r", first, again)
    tapes = {}
    for sid in own + [shared]:
        entries, head = read_tape(cli, sid)
        check([e["seq"] for e in entries] == list(range(1, head + 1)), "session %s has gaps", sid)
        tapes[sid] = {e["seq"]: e for e in entries}
    check(len(tapes[shared]) == CLIENTS * PER_SESSION + 2, "shared tape holds %d", len(tapes[shared]))
    seen = set()
    while True:
        f = sub.recv_frames(timeout=0.5)
        if f is None:
            break
        body = unpack(f[2])
        key = (body["session_id"], body["seq"])
        check(key not in seen, "seq %d of %s published twice", key[1], key[0])
        check(tapes[key[0]][key[1]] == body, "published entry differs from the tape")
        seen.add(key)
    check(len(seen) >= CLIENTS * PER_SESSION * 2, "only %d events published", len(seen))
    p = subprocess.run(["mdb_stat", "-e", os.path.join(server.data, "session")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
    if p.returncode == 0:
        size = int(re.search(r"Map size: (\d+)", p.stdout.decode()).group(1))
        check(size >= 65536 * 16, "the map did not grow: %d bytes", size)
    sub.close()
    cli.close()
    server.stop()


if __name__ == "__main__":
    run_tests(globals())
