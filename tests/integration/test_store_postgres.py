#!/usr/bin/python3
"""test_store_postgres — the store's unit tests against a real PostgreSQL.

Starts Debian's PostgreSQL server as an unprivileged user in a fresh
temporary folder (initdb, then postgres on a free loopback port with its
socket in that folder), makes a database, and runs build/tests/test_store
and build/tests/test_store_pg with SB_TEST_STORE_URL naming it: every
backend-independent test of the store on PostgreSQL, the LMDB-only ones
skipped with their reason, and what only PostgreSQL has (conflicting
writers, paged scans, a foreign schema, a lost connection). PostgreSQL is
stopped at the end of each test, passed or failed, and its folder goes with
the test's.

Skips only when the server's binaries are absent (scripts/deps.sh --tests
installs the postgresql package).
"""
import os

from sbpg import pg_bindir, run_unit, with_postgres  # noqa: E402
from sbtest import SB_BIN, check, run_tests, skip

BUILD = os.path.dirname(SB_BIN)
USER = "nobody"         # when run as root: the server refuses to run as root
DB = "sbstore"
SUPER = "sbtest"        # the cluster's superuser, trusted on the loopback


def test_store_units_on_postgres():
    def body(pg):
        text = run_unit(pg, "test_store", 12)
        # the LMDB-only tests say why they did not run
        check("LMDB only: the map and its growth" in text, "no skip reason shown: %s", text[-2000:])
    with_postgres(body)


def test_store_pg_units():
    def body(pg):
        text = run_unit(pg, "test_store_pg", 7)
        check("[SKIP]" not in text, "a PostgreSQL test skipped with a server there: %s", text[-2000:])
    with_postgres(body)


if __name__ == "__main__":
    if not pg_bindir():
        skip("PostgreSQL's server is not installed (scripts/deps.sh --tests installs postgresql)")
    run_tests(globals())
