#!/usr/bin/python3
"""The session actor's committer thread (actors/store/committer.c).

The actor hands each drain's write transaction and fsync to a committer
thread and, meanwhile, takes and checks the next drain. What must hold:

- a read sent after a write sees it: a session.get sent right behind an
  append (before its ack) answers after the ack, with the append in its
  last_seq, whichever drain each landed in;
- requests that wait for the commit's end (session.steer.take, which
  reads the store) are answered, and nothing behind them stalls;
- SIGKILL with commits in flight loses no acknowledged entry: every ack
  is on the tape at its seq after a restart, each session's seqs run from
  1 without a gap, and each client's entries keep the order it sent them;
- SWITCHBOARD_SESSION_COMMITTER=0 (commits on the actor's thread) keeps
  the same guarantees.
"""
import os
import random
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Client, Server, check, run_tests, tmpdir  # noqa: E402

CLIENTS = 4
WINDOW = 24             # requests in flight per client


def create_session(cli, workspace, title):
    m = cli.request("session.create", {"workspace": workspace, "title": title}, timeout=10)
    check(m.type == "session.create.ok", "create answered %r", m)
    return m.body["session"]["session_id"]


def read_tape(cli, sid):
    out, after = [], 0
    while True:
        m = cli.request("session.events", {"session_id": sid, "after_seq": after, "limit": 5000},
                        timeout=10)
        check(m.type == "session.events.ok", "events answered %r", m)
        out.extend(m.body["events"])
        after = m.body["next_after"]
        if not m.body["more"]:
            return out, m.body["last_seq"]


class Writer:
    """One client on its own session: appends (single and batched), each
    followed at once by a session.get, and now and then a steer.take."""

    def __init__(self, server, n, sid, rnd, rnd_round=0, acked=None):
        self.cli = Client(server.endpoint("cmd"), name="writer-%d" % n)
        self.n, self.sid, self.rnd, self.round = n, sid, rnd, rnd_round
        self.next_idx = 0
        self.pending = {}       # request id -> (what, detail)
        self.acked = {} if acked is None else acked    # seq -> (round, idx), every round's
        self.mine = {}          # seq -> idx, this round's
        self.max_acked = 0      # the highest seq acknowledged so far
        self.gets = 0
        self.steers = 0

    def fill(self):
        while len(self.pending) < WINDOW:
            k = self.rnd.randint(1, 8) if self.rnd.random() < 0.5 else 1
            idx = list(range(self.next_idx, self.next_idx + k))
            self.next_idx += k
            if k == 1:
                body = {"session_id": self.sid, "kind": "note",
                        "body": {"c": self.n, "r": self.round, "i": idx[0]}}
            else:
                body = {"session_id": self.sid,
                        "entries": [{"kind": "note", "body": {"c": self.n, "r": self.round, "i": i}}
                                    for i in idx]}
            self.pending[self.cli.send("session.append", body)] = ("append", idx)
            # sent before the append's ack: must see the append
            self.pending[self.cli.send("session.get", {"session_id": self.sid})] = ("get", idx[-1])
            if self.rnd.random() < 0.05:
                rid = self.cli.send("session.steer.take", {"session_id": self.sid, "run_id": "0" * 26,
                                                           "step": 1})
                self.pending[rid] = ("steer", None)

    def on_reply(self, m):
        what, detail = self.pending.pop(m.corr)
        if what == "append":
            check(m.type == "session.append.ok", "writer %d: append answered %r", self.n, m)
            if "seq" in m.body:
                seqs = [m.body["seq"]]
            else:
                seqs = list(range(m.body["first_seq"], m.body["last_seq"] + 1))
            check(len(seqs) == len(detail), "writer %d: %d seqs for %d entries", self.n, len(seqs), len(detail))
            for s, i in zip(seqs, detail):
                self.acked[s] = (self.round, i)
                self.mine[s] = i
            self.max_acked = max(self.max_acked, seqs[-1])
        elif what == "get":
            check(m.type == "session.get.ok", "writer %d: get answered %r", self.n, m)
            last = m.body["session"]["last_seq"]
            # the append before it was acknowledged first, and is in it
            want = max((s for s, i in self.mine.items() if i <= detail), default=None)
            check(want is not None, "writer %d: a get came back before the append sent ahead of it",
                  self.n)
            check(last >= want, "writer %d: a get sent after the append of seq %d saw last_seq %d",
                  self.n, want, last)
            self.gets += 1
        else:
            check(m.type == "session.steer.take.ok" or m.is_error,
                  "writer %d: steer.take answered %r", self.n, m)
            self.steers += 1


def run_writers(server, sids, until, seed, rnd_round=0, acked=None):
    rnd = random.Random(seed)
    writers = [Writer(server, n, sids[n], random.Random(rnd.random()), rnd_round,
                      acked[n] if acked else None) for n in range(CLIENTS)]
    deadline = time.monotonic() + 60
    while True:
        check(time.monotonic() < deadline, "writers stalled: %r",
              [(len(w.mine), len(w.pending)) for w in writers])
        for w in writers:
            w.fill()
        if until(writers):      # with every writer's window full
            break
        got = False
        for w in writers:
            for m in w.cli.drain():
                w.on_reply(m)
                got = True
        if not got:
            # wait for any reply, on any writer
            for w in writers:
                if w.cli.sock.poll(5):
                    break
    return writers


def check_tapes(cli, writers):
    for w in writers:
        entries, head = read_tape(cli, w.sid)
        seqs = [e["seq"] for e in entries]
        check(seqs == list(range(1, head + 1)), "session %s: seqs are not 1..%d", w.sid, head)
        notes = [e for e in entries if e["kind"] == "note"]
        order = [(e["body"]["r"], e["body"]["i"]) for e in notes]
        check(order == sorted(order) and len(set(order)) == len(order),
              "writer %d: its entries are out of order or doubled", w.n)
        by_seq = {e["seq"]: e for e in entries}
        for s, (r, i) in w.acked.items():
            e = by_seq.get(s)
            check(e is not None and e["kind"] == "note" and e["body"] == {"c": w.n, "r": r, "i": i},
                  "writer %d: acknowledged seq %d (round %d entry %d) is not on the tape: %r",
                  w.n, s, r, i, e)


def sessions(server):
    cli = Client(server.endpoint("cmd"))
    ws = tmpdir()
    sids = [create_session(cli, ws, "commit %d" % n) for n in range(CLIENTS)]
    return cli, sids


def read_your_writes(env=None):
    with Server(env=env) as srv:
        cli, sids = sessions(srv)
        writers = run_writers(srv, sids, lambda ws: all(w.gets >= 600 for w in ws), 1)
        # let the last requests in flight finish
        deadline = time.monotonic() + 20
        while any(w.pending for w in writers):
            check(time.monotonic() < deadline, "requests left unanswered")
            for w in writers:
                m = w.cli.recv(timeout=0.05)
                if m is not None:
                    w.on_reply(m)
        check(sum(w.steers for w in writers) > 0, "no steer.take was sent")
        check_tapes(cli, writers)
        print("    %d appends acknowledged, %d gets, %d steer.takes"
              % (sum(len(w.acked) for w in writers), sum(w.gets for w in writers),
                 sum(w.steers for w in writers)))
        for w in writers:
            w.cli.close()
        cli.close()


def test_a_read_sent_after_a_write_sees_it():
    read_your_writes()


def test_the_same_without_the_committer_thread():
    read_your_writes(env={"SWITCHBOARD_SESSION_COMMITTER": "0"})


def test_sigkill_with_commits_in_flight_loses_no_ack():
    rnd = random.Random(int(os.environ.get("SB_SEED", "0") or 0) or None)
    data = tmpdir()
    srv = Server(data=data).start()
    cli, sids = sessions(srv)
    cli.close()
    acked = [dict() for _ in range(CLIENTS)]    # every round's acks, per writer
    for rnd_round in range(3):
        kill_after = rnd.randint(300, 3000)
        writers = run_writers(srv, sids, lambda ws: sum(len(w.mine) for w in ws) >= kill_after,
                              rnd.random(), rnd_round, acked)
        in_flight = sum(len(w.pending) for w in writers)
        srv.stop(signal.SIGKILL)
        for w in writers:
            w.cli.close()
        srv = Server(data=data).start()
        cli = Client(srv.endpoint("cmd"))
        check_tapes(cli, writers)
        heads = [read_tape(cli, sid)[1] for sid in sids]
        print("    round %d: killed after %d acks with %d requests in flight; heads %r"
              % (rnd_round + 1, sum(len(w.mine) for w in writers), in_flight, heads))
        cli.close()
    srv.stop()


if __name__ == "__main__":
    sys.exit(run_tests(globals()))
