#!/usr/bin/env python3
"""The session store's write-ahead log under a real serve (docs/sessions.md,
"Durability: the log"): appenders on the bus, serve killed at each point of
a commit and of a checkpoint (SWITCHBOARD_TEST_WAL_CRASH, which makes serve
_exit there), and by SIGKILL in a loop; after each restart every
acknowledged entry is on the tape exactly once, in order, with its text,
the tape is contiguous, and an entry nobody acknowledged is whole (a note
of an appender's, once) or absent. And a torn last record of the log ends
its replay cleanly.

Checkpoints come every 16 KiB of records here (SWITCHBOARD_WAL_CHECKPOINT_KB)
so that a run of a few hundred appends crosses several.
"""
import os
import re
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Server, check, run_tests, wait_for  # noqa: E402
from sbagent import Appenders, call, check_tape_contiguous, new_session, tape  # noqa: E402
from sbtest import tmpdir  # noqa: E402

ENV = {"SWITCHBOARD_WAL_CHECKPOINT_KB": "16"}
TEXT = re.compile(r"^(w\d+-\d+|after)$")

# store/wal.h: two header slots of 64 KiB, then records of a 16-byte head
# (u32 len, u32 crc, u64 lsn) and their bodies.
WAL_DATA = 2 * 64 * 1024


def check_after_restart(server, sid, acked, once=True):
    """The tape against what was acknowledged: returns the number of entries.
    `once`: every text is on the tape once (one generation of appenders,
    whose texts are unique)."""
    entries = tape(server, sid)
    check_tape_contiguous(entries, "the tape after the restart")
    notes = [(e["seq"], (e.get("body") or {}).get("text")) for e in entries if e["kind"] == "note"]
    by_seq = dict(notes)
    lost = [(s, t) for s, t in acked if by_seq.get(s) != t]
    check(not lost, "%d of %d acknowledged entries lost or changed: %r", len(lost), len(acked), lost[:5])
    texts = [t for _, t in notes]
    check(not once or len(texts) == len(set(texts)), "an entry is on the tape twice")
    bad = [t for t in texts if not (isinstance(t, str) and TEXT.match(t))]
    check(not bad, "entries that no appender wrote (half there?): %r", bad[:5])
    seqs = [s for s, _ in acked]
    check(seqs == sorted(seqs) or sorted(seqs) == sorted(set(seqs)), "acks out of order")
    # and the tape goes on where it ends
    m = call(server, "session.append", {"session_id": sid, "kind": "note", "body": {"text": "after"}})
    check(m["seq"] == len(entries) + 1, "the next append got seq %r after %d entries", m["seq"], len(entries))
    return len(entries)


def crash_at(point, nth):
    data = tmpdir()
    env = dict(ENV, SWITCHBOARD_TEST_WAL_CRASH="%s:%d" % (point, nth))
    server = Server(data=data, env=env).start(timeout=30)
    try:
        sid = new_session(server, tmpdir())
        w = Appenders(server, sid)
        wait_for(lambda: not server.proc.alive(), 60, "serve to reach %s:%d" % (point, nth))
        w.stop()
        rc = server.proc.p.wait(10)
        check(rc == 86, "serve exited %r, not at the crash point (86):\n%s", rc, server.log()[-2000:])
        check(not w.errors, "appends refused before the crash: %r", w.errors[:3])
        acked = list(w.acked)
        check(len(acked) > 20, "only %d appends acknowledged before %s", len(acked), point)
        server.env = dict(ENV)
        server.start(timeout=30)
        n = check_after_restart(server, sid, acked)
        print("%s:%d: %d acknowledged, %d on the tape after the restart, 0 lost"
              % (point, nth, len(acked), n))
    finally:
        server.stop()


# after_flush / after_apply count commits of the whole process (its three
# stores); in_checkpoint / in_truncate count checkpoints, three of which
# come at start (one per store, after the replay).
def test_crash_after_the_flush():
    crash_at("after_flush", 150)


def test_crash_after_the_apply_before_the_ack():
    crash_at("after_apply", 150)


def test_crash_in_a_checkpoint():
    crash_at("in_checkpoint", 8)


def test_crash_in_the_truncate():
    crash_at("in_truncate", 8)


def test_kill9_loop():
    data = tmpdir()
    server = Server(data=data, env=ENV).start(timeout=30)
    try:
        sid = new_session(server, tmpdir())
        acked = []
        for i in range(3):
            w = Appenders(server, sid)
            wait_for(lambda: len(w.acked) >= 100, 60, "100 acknowledged appends")
            server.proc.kill()
            w.stop()
            check(not w.errors, "appends refused before the kill: %r", w.errors[:3])
            acked.extend(w.acked)
            server.start(timeout=30)
            n = check_after_restart(server, sid, acked, once=False)
            acked.append((n + 1, "after"))
            print("kill -9 #%d: %d acknowledged in all, %d on the tape, 0 lost" % (i + 1, len(acked), n + 1))
    finally:
        server.stop()


def records(path):
    """(offset, length) of each record of a log, as the replay reads them
    (the checksum aside: a flipped byte is the unit tests' matter)."""
    out = []
    with open(path, "rb") as f:
        f.seek(WAL_DATA)
        buf = f.read()
    at, expect = 0, None
    while at + 16 <= len(buf):
        n, _crc, lsn = struct.unpack_from("<IIQ", buf, at)
        if n == 0 or at + 16 + n > len(buf) or (expect is not None and lsn != expect):
            break
        out.append((WAL_DATA + at, 16 + n))
        expect = lsn + 1
        at += 16 + n
    return out


def test_a_torn_last_record_ends_the_replay():
    data = tmpdir()
    server = Server(data=data, env=ENV).start(timeout=30)
    try:
        sid = new_session(server, tmpdir())
        w = Appenders(server, sid, n=1)
        wait_for(lambda: len(w.acked) >= 30, 60, "30 acknowledged appends")
        w.stop()
        acked = list(w.acked)
        server.proc.kill()
        server.proc.p.wait(10)
        log = os.path.join(data, "session", "log.wal")
        recs = records(log)
        check(recs, "no records in %s", log)
        off, n = recs[-1]
        # The last record's last bytes never reached the disk.
        with open(log, "r+b") as f:
            f.seek(off + n - 4)
            f.write(b"\0\0\0\0")
        server.start(timeout=30)
        entries = tape(server, sid)
        check_tape_contiguous(entries, "the tape after a torn record")
        by_seq = {e["seq"]: (e.get("body") or {}).get("text") for e in entries if e["kind"] == "note"}
        check(len(entries) >= len(acked) - 1, "more than the torn record's entry is gone: %d of %d",
              len(entries), len(acked))
        wrong = [(s, t) for s, t in acked if s in by_seq and by_seq[s] != t]
        check(not wrong, "entries changed: %r", wrong[:3])
        m = call(server, "session.append", {"session_id": sid, "kind": "note", "body": {"text": "after"}})
        check(m["seq"] == len(entries) + 1, "the next append got seq %r after %d", m["seq"], len(entries))
        print("torn last record: %d acknowledged, %d on the tape after the restart"
              % (len(acked), len(entries)))
    finally:
        server.stop()


if __name__ == "__main__":
    run_tests(globals())
