#!/usr/bin/python3
"""test_cluster_claims — what a dead node leaves in its outbox, on two
`switchboard serve --store postgres://...` nodes of one real PostgreSQL
(sbpg.py), as test_cluster_serve.py starts them (docs/scale-out.md,
"A node in serve"):
  - kill -9 of a node with an entry of its outbox not yet on the tape
    (a row 'o' ITS_ID n of the run store's outbox, as a node that died
    between its commit and its append leaves it): the node that takes
    the session's shard appends it, once, and deletes the row; a copy of
    the entry (same command_id) that a second dead node left lands once
    too (the session actor does one append per command_id).

Skips only when the server's binaries are absent (scripts/deps.sh --tests
installs the postgresql package).
"""
import json
import os
import secrets
import struct
import sys
import time

import msgpack

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import check, run_tests, sb, tmpdir, wait_for  # noqa: E402
from sbagent import free_port, new_session, tape  # noqa: E402
from sbpg import with_postgres  # noqa: E402
from gwtest import Gateway  # noqa: E402

SCHEMA = "cl"
LEASE_MS = 1500
BEAT_MS = 250
ENV = {"SWITCHBOARD_SHARD_LEASE_MS": str(LEASE_MS), "SWITCHBOARD_SHARD_HEARTBEAT_MS": str(BEAT_MS)}


def store_url(pg):
    return pg.url() + "?schema=" + SCHEMA


def node(pg):
    """A started serve node on the schema, with a CURVE bus on a free port
    (the demo model)."""
    port = free_port()
    gw = Gateway(args=["--store", store_url(pg), "--bus", "tcp://127.0.0.1:%d" % port],
                 env=dict(os.environ, **ENV))
    gw.srv.port = port
    gw.srv.gw = gw
    return gw.srv


def nodes(pg):
    rc, out, err = sb("nodes", "--store", store_url(pg), "--json")
    check(rc == 0, "nodes: %d %s %s", rc, out, err)
    return json.loads(out)


def settled(pg, want):
    """Waits until the live nodes hold `want` (a sorted list of counts)
    and nothing is unowned."""
    def ok():
        doc = nodes(pg)
        counts = sorted(len(n["shards"]) for n in doc["nodes"] if n["alive"])
        return counts == want and doc["unowned_count"] == 0
    wait_for(ok, 20, "shards held %r" % want, interval=0.1)


def two_nodes(pg):
    """Nodes A and B on one schema, once they hold 32 shards each."""
    a, b = node(pg), node(pg)
    settled(pg, [32, 32])
    return a, b


def node_id(srv):
    return srv.stats()["node"]["node_id"]


def shards_of(srv):
    return srv.stats()["node"]["shards"]


def outbox_key(node, n):
    """sb_outbox_key on a node of a cluster: 'o', the node id, its NUL, n
    big-endian."""
    return b"o" + node.encode() + b"\0" + struct.pack(">Q", n)


def put_outbox(pg, key, entry):
    pg.psql("INSERT INTO %s_run.outbox (key, val) VALUES ('\\x%s', '\\x%s')"
            % (SCHEMA, key.hex(), msgpack.packb(entry, use_bin_type=True).hex()))


def outbox_rows(pg, node):
    prefix = b"o" + node.encode() + b"\0"
    out = pg.psql("SELECT count(*) FROM %s_run.outbox WHERE substring(key from 1 for %d) = '\\x%s'"
                  % (SCHEMA, len(prefix), prefix.hex()))
    return int(out.strip())


def test_a_dead_nodes_outbox_is_sent_by_the_new_owner():
    def body(pg):
        a, b = two_nodes(pg)
        sid = new_session(a, tmpdir())
        a_id = node_id(a)
        text = "left in the outbox of " + a_id
        cmd = "test:" + secrets.token_hex(16)
        entry = {"session_id": sid, "command_id": cmd,
                 "entries": [{"kind": "note", "body": {"text": text}}]}
        a.proc.kill()
        t_kill = time.monotonic()
        # what A committed and had not appended when it died; the same
        # entry left by a second node that died too (both go: once)
        put_outbox(pg, outbox_key(a_id, 1 << 40), entry)
        put_outbox(pg, outbox_key("ghost-node", 7), entry)
        check(shards_of(b) == 32, "B took A's shards before the entry was written; the test proves nothing")

        def landed():
            return [e for e in tape(b, sid) if e["kind"] == "note" and e["body"].get("text") == text]
        got = wait_for(landed, 15, "the dead node's outbox entry on the tape", interval=0.1)
        took = time.monotonic() - t_kill
        check(took <= (LEASE_MS + 2 * BEAT_MS) / 1000.0 + 2.5, "sent %.2f s after the kill", took)
        wait_for(lambda: outbox_rows(pg, a_id) == 0 and outbox_rows(pg, "ghost-node") == 0, 10,
                 "the sent entries deleted")
        time.sleep(0.5)
        check(len(landed()) == 1, "the entry landed %d times: %r", len(landed()), got)
        settled(pg, [64])
        print("kill -9 with an outbox entry pending: the new owner appended it %.2f s after the kill" % took)
    with_postgres(body)


if __name__ == "__main__":
    run_tests(globals())
