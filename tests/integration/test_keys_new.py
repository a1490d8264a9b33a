#!/usr/bin/python3
"""`switchboard keys new` on a data folder that does not exist yet makes
it.

(Found by trying switchboard: each test fails on the code before its fix.)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import check, run_tests, sb, tmpdir  # noqa: E402


def test_keys_new_makes_a_data_folder_that_does_not_exist():
    data = os.path.join(tmpdir(), "not", "yet")
    rc, out, err = sb("keys", "new", "w1", "--data", data)
    check(rc == 0, "keys new exited %d: %s %s", rc, out, err)
    check(os.stat(data).st_mode & 0o777 == 0o700, "DATA has mode %o", os.stat(data).st_mode & 0o777)
    for f in ("certs/clients/w1", "certs/clients/w1_secret", "certs/server", "certs/server_secret"):
        check(os.path.isfile(os.path.join(data, f)), "%s was not made", f)
    check(os.stat(os.path.join(data, "certs/clients/w1_secret")).st_mode & 0o077 == 0, "the secret is readable by others")
    check(out.splitlines()[-1] == os.path.join(data, "certs/clients/w1_secret"), "the last line: %r", out)


if __name__ == "__main__":
    run_tests(globals())
