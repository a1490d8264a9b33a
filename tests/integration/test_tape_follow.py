#!/usr/bin/python3
"""`switchboard events --follow`, started while appends are flowing,
prints every seq exactly once and in order: the replay and the live
stream meet without a gap and without a duplicate."""
import json
import os
import signal
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import SB_BIN, Client, Server, check, run_tests, tmpdir, wait_for  # noqa: E402

WINDOW = 4


class Writer(threading.Thread):
    """Appends to one session until told to stop, a few in flight, mixing
    single appends and small batches."""

    def __init__(self, endpoint, sid):
        super().__init__(daemon=True)
        self.endpoint, self.sid = endpoint, sid
        self.stop = threading.Event()
        self.acked = 0
        self.head = 0
        self.error = None

    def run(self):
        cli = Client(self.endpoint, name="writer")
        try:
            pending, n = set(), 0
            while not self.stop.is_set() or pending:
                while not self.stop.is_set() and len(pending) < WINDOW:
                    if n % 5 == 4:
                        body = {"session_id": self.sid, "entries": [
                            {"kind": "text.delta", "body": {"text": "b%d.%d" % (n, k)}} for k in range(3)]}
                    else:
                        body = {"session_id": self.sid, "kind": "text.delta", "body": {"text": "s%d\nline" % n}}
                    pending.add(cli.send("session.append", body))
                    n += 1
                m = cli.recv(timeout=10)
                check(m is not None and m.type == "session.append.ok", "append answered %r", m)
                pending.discard(m.corr)
                self.head = max(self.head, m.body.get("seq") or m.body.get("last_seq"))
                self.acked += 1
        except Exception as e:
            self.error = e
        finally:
            cli.close()


class Follower:
    """`switchboard events ARGS`, its stdout read line by line by a thread."""

    def __init__(self, data, *args, env=None):
        # stderr goes to a file: a pipe nobody reads could fill and stall it
        self.err = open(os.path.join(data, "events-%d.err" % id(self)), "w+b")
        self.p = subprocess.Popen([SB_BIN, "events", "--data", data] + list(args),
                                  stdout=subprocess.PIPE, stderr=self.err,
                                  stdin=subprocess.DEVNULL, env=dict(os.environ, **(env or {})))
        self.lines = []
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.append(line.decode("utf-8", "replace").rstrip("\n"))

    def stderr(self):
        self.err.seek(0)
        return self.err.read().decode("utf-8", "replace")

    def stop(self):
        """SIGTERM: a follower stops cleanly, with exit 0."""
        self.p.send_signal(signal.SIGTERM)
        try:
            rc = self.p.wait(10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            rc = None
        self.t.join(5)
        return rc, self.stderr()


def seq_of(line, json_mode):
    if json_mode:
        return json.loads(line)["seq"]
    return int(line.split()[0])


def follow_while_writing(json_mode, after=0):
    server = Server().start()
    cli = Client(server.endpoint("cmd"))
    m = cli.request("session.create", {"workspace": tmpdir()})
    sid = m.body["session"]["session_id"]
    writer = Writer(server.endpoint("cmd"), sid)
    writer.start()
    wait_for(lambda: writer.acked >= 300 or writer.error, 30, "300 appends before the follower starts")
    args = ["--session", sid, "--follow"] + (["--json"] if json_mode else []) + \
           (["--after", str(after)] if after else [])
    f = Follower(server.data, *args)
    start_head = writer.head
    # The follower must catch up AND see live entries while the writer runs.
    wait_for(lambda: (f.lines and seq_of(f.lines[-1], json_mode) > start_head + 1500) or writer.error
             or f.p.poll() is not None, 60, "the follower to print live entries")
    if f.p.poll() is not None:
        check(False, "follower exited with %s: %s", f.p.returncode, f.stderr())
    writer.stop.set()
    writer.join(30)
    check(writer.error is None, "writer failed: %r", writer.error)
    m = cli.request("session.events", {"session_id": sid, "after_seq": 0, "limit": 1})
    head = m.body["last_seq"]
    check(head == writer.head, "tape head %d, last acknowledged %d", head, writer.head)
    wait_for(lambda: f.lines and seq_of(f.lines[-1], json_mode) == head, 30,
             "the follower to print seq %d" % head)
    rc, err = f.stop()
    check(rc == 0, "follower exited with %s on SIGTERM: %s", rc, err)
    seqs = [seq_of(line, json_mode) for line in f.lines]
    check(seqs == list(range(after + 1, head + 1)),
          "follower printed %d lines, not seqs %d..%d once each in order (first bad at %s)",
          len(seqs), after + 1, head,
          next((k for k, s in enumerate(seqs) if s != after + 1 + k), None))
    cli.close()
    server.stop()
    print("  followed %d entries (%d live after a replay up to about %d)" % (len(seqs), head - start_head,
                                                                             start_head))
    return f.lines


def test_follow_json_prints_every_seq_once_in_order():
    lines = follow_while_writing(True)
    check('"kind":"text.delta"' in lines[-1], "json line lacks its kind: %s", lines[-1])


def test_follow_human_after_cursor():
    lines = follow_while_writing(False, after=100)
    # seq, time, kind, run, summary
    parts = lines[0].split(None, 5)
    check(parts[0] == "101" and parts[3] == "text.delta" and parts[4] == "-", "line: %r", lines[0])
    check("\\n" in lines[0] or lines[0].split()[-1].startswith("b"), "newline not escaped: %r", lines[0])


def test_follow_fills_what_pubsub_dropped():
    """A follower that stops reading while 300,000 entries are published
    overflows the high-water marks (100,000 at the broker's XPUB, and its
    SUB's), so pub/sub drops events; it must fill every gap from the tape
    and still print each seq exactly once, in order."""
    server = Server().start()
    cli = Client(server.endpoint("cmd"))
    sid = cli.request("session.create", {"workspace": tmpdir()}).body["session"]["session_id"]
    f = Follower(server.data, "--session", sid, "--follow", "--json", env={"SWITCHBOARD_LOG": "debug"})
    wait_for(lambda: f.lines, 10, "the replay of seq 1")
    def append_batches(n, tag):
        pending = set()
        for k in range(n):
            pending.add(cli.send("session.append", {"session_id": sid, "entries": [
                {"kind": "text.delta", "body": {"text": "%s%d.%d" % (tag, k, j)}} for j in range(1000)]}))
            while len(pending) >= (8 if k < n - 1 else 1):
                m = cli.recv(timeout=30)
                check(m is not None and m.type == "session.append.ok", "append answered %r", m)
                pending.discard(m.corr)

    f.p.send_signal(signal.SIGSTOP)
    try:
        append_batches(300, "a")
    finally:
        f.p.send_signal(signal.SIGCONT)
    # more while it works through what was queued, once there is room
    # again: these arrive live, right after the gap
    wait_for(lambda: f.lines and seq_of(f.lines[-1], True) >= 30000, 60, "the follower to resume")
    append_batches(5, "b")
    head = 305001
    wait_for(lambda: f.lines and seq_of(f.lines[-1], True) >= head, 120, "the follower to reach seq %d" % head)
    rc, err = f.stop()
    check(rc == 0, "follower exited with %s: %s", rc, err)
    seqs = [seq_of(line, True) for line in f.lines]
    check(seqs == list(range(1, head + 1)), "follower printed %d lines, not seqs 1..%d once each in order",
          len(seqs), head)
    # Whether the follower meets the loss as a gap in the live stream or as
    # a quiet tail depends on which of its threads runs first after SIGCONT;
    # either way it must have filled something from the tape.
    check("gap in the live stream" in err or "filled a dropped tail" in err,
          "no event was dropped, so nothing was filled: %s", err[-500:])
    cli.close()
    server.stop()


def test_follow_unknown_session_fails():
    server = Server().start()
    p = subprocess.run([SB_BIN, "events", "--data", server.data, "--session", "01" + "0" * 24, "--follow"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
    err = p.stderr.decode()
    check(p.returncode == 1, "exit %d for an unknown session", p.returncode)
    check("not_found" in err and len(err.strip().splitlines()) == 1, "stderr: %r", err)
    server.stop()


def test_follow_ends_when_the_session_is_deleted():
    server = Server().start()
    cli = Client(server.endpoint("cmd"))
    sid = cli.request("session.create", {"workspace": tmpdir()}).body["session"]["session_id"]
    f = Follower(server.data, "--session", sid, "--follow")
    wait_for(lambda: f.lines, 10, "the replay of seq 1")
    m = cli.request("session.delete", {"session_id": sid})
    check(m.type == "session.delete.ok", "delete answered %r", m)
    rc = f.p.wait(10)
    err = f.stderr()
    check(rc == 1 and "not_found" in err, "follower of a deleted session: exit %s, %r", rc, err)
    cli.close()
    server.stop()


if __name__ == "__main__":
    run_tests(globals())
