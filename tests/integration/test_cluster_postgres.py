#!/usr/bin/python3
"""test_cluster_postgres — the cluster library (cluster/cluster.h) and
`switchboard nodes` against a real PostgreSQL.

Starts PostgreSQL as test_store_postgres.py does (the few helpers below
are a copy of its, until the integration tests share one module for
PostgreSQL), then:
  - runs build/tests/test_cluster with SB_TEST_STORE_URL naming the
    database: fair split of 64 shards over three nodes, takeover of a dead
    node's shards within a lease and a heartbeat, fencing of a node whose
    lease was taken (SB_STORE_FENCED through sb_store_write and
    sb_txn_guard, nothing committed), no shard taken back by a node that
    returns, a takeover that waits for a write holding the lease row, a
    write whose snapshot predates a takeover run again and fenced, a node
    that cannot reach the database giving up its shards within a lease, one
    owner for a shard two nodes race for (100 rounds);
  - registers three nodes (the test binary's cluster_fixture test: two
    alive with 32 shards each, one dead) and lists them with
    `switchboard nodes`, as text and as JSON, from --store and from
    SWITCHBOARD_STORE.

Skips only when the server's binaries are absent (scripts/deps.sh --tests
installs the postgresql package).
"""
import json
import os
import re
import subprocess

from sbpg import pg_bindir, run_unit, with_postgres  # noqa: E402
from sbtest import ROOT, SB_BIN, check, run_tests, sb, skip

BUILD = os.path.dirname(SB_BIN)
USER = "nobody"         # when run as root: the server refuses to run as root
DB = "sbcluster"
SUPER = "sbtest"        # the cluster's superuser, trusted on the loopback


def test_cluster_units():
    def body(pg):
        text = run_unit(pg, "test_cluster", 16)
        m = re.search(r"takeover of \d+ shards after (\d+) ms", text)
        check(m, "no takeover time printed: %s", text[-2000:])
        print("takeover after %s ms" % m.group(1))
        check("[SKIP]" not in text.replace("[SKIP] cluster_fixture", ""),
              "a PostgreSQL test skipped with a server there: %s", text[-2000:])
    with_postgres(body)


def _fixture(pg, url):
    binary = os.path.join(BUILD, "tests", "test_cluster")
    env = dict(os.environ, SB_TEST_STORE_URL=pg.url(), SB_TEST_CLUSTER_FIXTURE=url)
    out = subprocess.run([binary, "--jobs", "1", "--filter", "cluster_fixture/*"], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    text = out.stdout + out.stderr
    check(out.returncode == 0 and "Passing: 1" in text, "the fixture failed: %s", text[-2000:])


def test_nodes_lists_a_cluster():
    def body(pg):
        url = pg.url() + "?schema=nodes_cli"
        # nothing registered yet: an empty list, every shard unowned
        rc, out, err = sb("nodes", "--store", url, "--json")
        check(rc == 0, "nodes on an empty database: %d %s", rc, err)
        doc = json.loads(out)
        check(doc["nodes"] == [] and doc["unowned_count"] == 64, "empty: %s", out)

        _fixture(pg, url)
        rc, out, err = sb("nodes", "--store", url, "--json")
        check(rc == 0, "nodes --json: %d %s", rc, err)
        doc = json.loads(out)
        check(doc["schema"] == "nodes_cli_cluster" and doc["shards"] == 64, "%s", out)
        byid = {n["node_id"]: n for n in doc["nodes"]}
        check(sorted(byid) == ["n1", "n2", "n3"], "nodes: %s", out)
        for nid in ("n1", "n2"):
            n = byid[nid]
            check(n["alive"] and n["shard_count"] == 32 and len(n["shards"]) == 32, "%s: %s", nid, n)
            check(n["bus_endpoint"] == "tcp://192.0.2.%s:7001" % nid[1], "%s", n)
            check(n["event_endpoint"] == "tcp://192.0.2.%s:7002" % nid[1], "%s", n)
            check(n["lease_ms"] == 60000 and 0 <= n["heartbeat_age_ms"] < 60000, "%s", n)
            check(len(n["curve_public"]) == 40, "%s", n)
        check(not set(byid["n1"]["shards"]) & set(byid["n2"]["shards"]), "shared shards: %s", out)
        check(not byid["n3"]["alive"] and byid["n3"]["shard_count"] == 0
              and byid["n3"]["shard_ranges"] == "-", "n3: %s", byid["n3"])
        check(doc["unowned_count"] == 0 and doc["unowned"] == "-", "%s", out)

        # text, with the store from the environment
        env = dict(os.environ, SWITCHBOARD_STORE=url)
        out = subprocess.run([SB_BIN, "nodes"], env=env, capture_output=True, text=True, timeout=60)
        check(out.returncode == 0, "nodes: %d %s", out.returncode, out.stderr)
        lines = out.stdout.splitlines()
        check(lines[0].split() == ["NODE", "BUS", "EVENTS", "BEAT", "STATE", "SHARDS"], "%s", out.stdout)
        rows = {ln.split()[0]: ln for ln in lines[1:4]}
        check(re.search(r"tcp://192\.0\.2\.1:7001\s+tcp://192\.0\.2\.1:7002\s+\S+s ago\s+alive\s+32 \S+",
                        rows["n1"]), "%s", out.stdout)
        check(re.search(r"\s+dead\s+0 -$", rows["n3"]), "%s", out.stdout)
        check(lines[4] == "3 nodes; unowned shards: 0 -", "%s", out.stdout)
    with_postgres(body)


def test_nodes_usage_and_failures():
    rc, out, err = sb("nodes", "--help")
    check(rc == 0 and "--store URL" in out and "SWITCHBOARD_STORE" in out, "%d %s", rc, out)
    env = dict(os.environ)
    env.pop("SWITCHBOARD_STORE", None)
    out = subprocess.run([SB_BIN, "nodes"], env=env, capture_output=True, text=True, timeout=60)
    check(out.returncode == 2 and "no store" in out.stderr, "%d %s", out.returncode, out.stderr)
    rc, out, err = sb("nodes", "--store", "/var/lib/switchboard")
    check(rc == 2 and "postgres" in err, "a folder: %d %s", rc, err)
    rc, out, err = sb("nodes", "--store", "postgresql://u:hunter2@127.0.0.1:1/none", "--json")
    check(rc == 1, "unreachable: %d %s", rc, err)
    e = json.loads(err.strip().splitlines()[-1])["error"]
    check("cannot connect" in e["message"] and "hunter2" not in e["message"], "%s", err)


if __name__ == "__main__":
    if not pg_bindir():
        skip("PostgreSQL's server is not installed (scripts/deps.sh --tests installs postgresql)")
    run_tests(globals())
