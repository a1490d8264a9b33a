#!/usr/bin/python3
"""The docs match the code (issue 21):

  - docs/llm.md's table of environment variables lists every SWITCHBOARD_*
    variable the sources read (a name in a string literal of a C file, less
    the ones the server sets for the processes it starts);
  - a bad providers file stops `serve` with the file and the entry named,
    as docs/llm.md says;
  - `run --help` explains --llm, --model, --llm-url and --providers;
  - the global options work before the command (`switchboard --data DIR
    runs`, `--connect EP`), and one given after it wins.
"""
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import ROOT, Server, check, cli_session, run_tests, sb, tmpdir  # noqa: E402

#  what the server sets for hooks and tools, not what it reads
SET_FOR_CHILDREN = {"SWITCHBOARD_EVENT", "SWITCHBOARD_SESSION_ID", "SWITCHBOARD_RUN_ID", "SWITCHBOARD_TOOL_ID"}


def _read_in_sources():
    names = {}
    for d in ("actors", "bus", "cli", "cluster", "common", "gateway", "sandbox", "schemas", "store", "workers"):
        for path in glob.glob(os.path.join(ROOT, d, "**", "*.[ch]"), recursive=True):
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            # a whole name in a string literal, not NAME=... nor a prefix
            for m in re.finditer(r'"(SWITCHBOARD_[A-Z0-9_]*[A-Z0-9])"', text):
                names.setdefault(m.group(1), os.path.relpath(path, ROOT))
    return names


def test_the_environment_table_lists_every_variable_the_code_reads():
    names = _read_in_sources()
    check(len(names) > 20, "found only %d variables: is ROOT (%s) the source tree?", len(names), ROOT)
    with open(os.path.join(ROOT, "docs", "llm.md"), encoding="utf-8") as f:
        doc = f.read()
    table = doc[doc.index("## Environment variables"):]
    listed = set(re.findall(r"^\| `(SWITCHBOARD_[A-Z0-9_]+\*?)`", table, re.M))
    missing = sorted("%s (%s)" % (n, p) for n, p in names.items()
                     if n not in SET_FOR_CHILDREN and n not in listed)
    check(not missing, "docs/llm.md's environment table misses %s", ", ".join(missing))
    for n in ("SWITCHBOARD_APPROVAL_DEADLINE", "SWITCHBOARD_MCP_IDLE_S", "SWITCHBOARD_WORKER_STALE_S",
              "SWITCHBOARD_WORKER_OFFLINE_S"):
        check(n in names, "%s is no longer read: the scan of the sources is broken", n)


def test_a_bad_providers_file_names_the_file_and_the_entry():
    d = tmpdir()
    path = os.path.join(d, "providers.json")
    with open(path, "w") as f:
        json.dump({"providers": [{"name": "local", "kind": "chatt", "model": "m"}]}, f)
    rc, out, err = sb("serve", "--data", os.path.join(d, "data"), "--providers", path, "--http", "127.0.0.1:0",
                      timeout=60)
    check(rc != 0, "serve started with a bad providers file: %d", rc)
    want = "bad provider configuration in %s, entry local: unknown provider kind 'chatt'" % path
    check(want in err, "%r not in serve's output:\n%s", want, err[-2000:])
    # an entry without a name is named by its place
    with open(path, "w") as f:
        json.dump({"providers": [{"name": "ok", "kind": "demo"}, {"kind": "chat"}]}, f)
    rc, out, err = sb("serve", "--data", os.path.join(d, "data2"), "--providers", path, "--http", "127.0.0.1:0",
                      timeout=60)
    want = "bad provider configuration in %s, entry providers[1]: " % path
    check(rc != 0 and want in err, "%r not in serve's output (%d):\n%s", want, rc, err[-2000:])


def test_run_help_explains_the_model_options():
    rc, out, err = sb("run", "--help")
    check(rc == 0, "run --help: %d %s", rc, err)
    for opt in ("--llm", "--model", "--llm-url", "--providers"):
        lines = [ln for ln in out.splitlines() if re.match(r"\s+%s\b" % re.escape(opt), ln)]
        check(lines and len(lines[0].split(None, 1)) == 2 and len(lines[0].split(None, 1)[1]) > 10,
              "run --help does not explain %s:\n%s", opt, out)


def test_global_options_before_the_command():
    srv = Server().start()
    try:
        sid = cli_session(srv, tmpdir())
        rc, out, err = sb("--data", srv.data, "sessions", "--json")
        check(rc == 0 and sid in out, "--data before the command: %d %r %r", rc, out[-500:], err)
        rc, out, err = sb("--data=%s" % srv.data, "sessions", "--json")
        check(rc == 0 and sid in out, "--data=DIR before the command: %d %r", rc, err)
        rc, out, err = sb("--connect", "ipc://%s/bus-cmd" % srv.data, "sessions", "--json")
        check(rc == 0 and sid in out, "--connect before the command: %d %r", rc, err)
        # after the command, its own --data wins over the global one
        rc, out, err = sb("--data", tmpdir(), "sessions", "--json", "--data", srv.data)
        check(rc == 0 and sid in out, "the command's own --data did not win: %d %r", rc, err)
        rc, out, err = sb("--data")
        check(rc == 2 and "--data takes a value" in err, "a bare --data: %d %r", rc, err)
    finally:
        srv.stop()


if __name__ == "__main__":
    run_tests(globals())
