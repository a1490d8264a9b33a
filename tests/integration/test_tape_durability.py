#!/usr/bin/python3
"""The tape survives a crash: nothing acknowledged is lost, nothing doubles.

Five times, with different kill points: a client pipelines up to 20,000
appends to one session through the bus and records every acknowledged
seq; the server is SIGKILLed at a random moment while appends are in
flight; after a restart every acknowledged entry is on the tape, intact,
at the seq it was acknowledged with, the seqs run from 1 without a gap,
no entry appears twice, and the next append continues the sequence.
"""
import os
import random
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Client, Server, check, run_tests, tmpdir  # noqa: E402

TOTAL = 20000
WINDOW = 128        # appends in flight at once
ROUNDS = 5


def create_session(cli, workspace):
    m = cli.request("session.create", {"workspace": workspace, "title": "crash"}, timeout=10)
    check(m.type == "session.create.ok", "create answered %r", m)
    return m.body["session"]["session_id"]


def read_tape(cli, sid):
    """Every entry of the tape, paged through session.events."""
    out, after = [], 0
    while True:
        m = cli.request("session.events", {"session_id": sid, "after_seq": after, "limit": 5000},
                        timeout=10)
        check(m.type == "session.events.ok", "events answered %r", m)
        out.extend(m.body["events"])
        after = m.body["next_after"]
        if not m.body["more"]:
            return out, m.body["last_seq"]


def append_until_killed(server, sid, kill_after):
    """Pipelines appends; SIGKILLs the server after kill_after acks, with
    requests still in flight. Returns {seq: index} of what was acked."""
    cli = Client(server.endpoint("cmd"), name="crash-writer")
    pending = {}        # request id -> index
    acked = {}          # seq -> index
    sent = 0
    killed = False
    deadline = time.monotonic() + 120
    try:
        while not killed and (sent < TOTAL or pending):
            check(time.monotonic() < deadline, "appends stalled: %d sent, %d acked", sent, len(acked))
            while sent < TOTAL and len(pending) < WINDOW:
                rid = cli.send("session.append", {"session_id": sid, "kind": "note",
                                                  "body": {"i": sent, "pad": "x" * (sent % 50)}})
                pending[rid] = sent
                sent += 1
            m = cli.recv(timeout=10)
            check(m is not None, "no reply within 10 s (%d in flight)", len(pending))
            i = pending.pop(m.corr, None)
            check(i is not None, "reply to an unknown request: %r", m)
            check(m.type == "session.append.ok", "append %d answered %r", i, m)
            seq = m.body["seq"]
            check(seq not in acked, "seq %d acknowledged twice (%d and %d)", seq, acked.get(seq, -1), i)
            acked[seq] = i
            if len(acked) >= kill_after:
                # In flight right now: up to WINDOW appends, some of which
                # may be committed but not yet acknowledged.
                server.proc.send_signal(signal.SIGKILL)
                killed = True
    finally:
        cli.close()
    check(killed or len(acked) == TOTAL, "ended with %d acks and no kill", len(acked))
    if not killed:
        server.proc.send_signal(signal.SIGKILL)
    server.proc.wait(10)
    server.close_control()
    return acked, sent


def one_round(round_no, data, workspace):
    server = Server(data=data)
    server.start()
    cli = Client(server.endpoint("cmd"), name="crash-check")
    sid = create_session(cli, workspace)
    cli.close()
    kill_after = random.randint(200, TOTAL - 200)
    acked, sent = append_until_killed(server, sid, kill_after)
    check(server.proc.p.returncode == -signal.SIGKILL, "server was not SIGKILLed: %s",
          server.proc.p.returncode)

    server.start()
    cli = Client(server.endpoint("cmd"), name="crash-check")
    entries, head = read_tape(cli, sid)
    seqs = [e["seq"] for e in entries]
    check(seqs == list(range(1, len(seqs) + 1)), "seqs are not contiguous from 1 (round %d)", round_no)
    check(head == len(seqs), "head %d but %d entries", head, len(seqs))
    check(entries[0]["kind"] == "session.created", "seq 1 is %s", entries[0]["kind"])
    seen = {}
    for e in entries[1:]:
        check(e["kind"] == "note" and e["session_id"] == sid, "foreign entry %r", e)
        i = e["body"]["i"]
        check(e["body"]["pad"] == "x" * (i % 50), "entry %d damaged: %r", e["seq"], e)
        check(i not in seen, "append %d is on the tape twice (seq %d and %d)", i, seen.get(i), e["seq"])
        check(0 <= i < sent, "entry %d carries index %d, never sent", e["seq"], i)
        seen[i] = e["seq"]
    by_seq = {e["seq"]: e for e in entries}
    for seq, i in acked.items():
        check(seq in by_seq, "acknowledged seq %d (append %d) is lost", seq, i)
        check(by_seq[seq]["body"]["i"] == i, "seq %d holds append %d, acknowledged for %d",
              seq, by_seq[seq]["body"]["i"], i)
    # Committed but never acknowledged is allowed (the kill came between
    # the commit and the reply); acknowledged but missing is not.
    unacked = len(entries) - 1 - len(acked)
    check(0 <= unacked <= WINDOW, "%d entries beyond the acknowledged ones", unacked)

    m = cli.request("session.append", {"session_id": sid, "kind": "note", "body": {"i": -1}})
    check(m.type == "session.append.ok" and m.body["seq"] == head + 1,
          "the next append got %r, want seq %d", m, head + 1)
    cli.close()
    server.stop()
    print("  round %d: killed after %d acks (%d sent); tape head %d, %d committed unacknowledged"
          % (round_no, len(acked), sent, head, unacked))
    return sid


def test_crash_keeps_every_acknowledged_entry():
    workspace = tmpdir()
    for round_no in range(1, ROUNDS + 1):
        one_round(round_no, tmpdir(), workspace)


def test_crash_rounds_on_one_data_dir():
    """Kills on the same data folder, across several sessions: each restart
    finds every earlier session whole."""
    workspace, data = tmpdir(), tmpdir()
    done = []
    for round_no in range(1, 3):
        done.append(one_round(round_no, data, workspace))
    server = Server(data=data).start()
    cli = Client(server.endpoint("cmd"))
    for sid in done:
        entries, head = read_tape(cli, sid)
        check([e["seq"] for e in entries] == list(range(1, head + 1)), "session %s has gaps", sid)
    cli.close()
    server.stop()


if __name__ == "__main__":
    run_tests(globals())
