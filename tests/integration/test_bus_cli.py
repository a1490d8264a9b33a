"""The binary's command line: --help everywhere, usage errors exit 2, the
data-folder lock, clean shutdown on SIGTERM and SIGINT, and the `tap`,
`stats` and `call` commands against a live server."""

import json
import os
import re
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import (SB_BIN, Client, Proc, Server, check, run_tests, sb,  # noqa: E402
                    start_actor, tmpdir, wait_for)

SOCKETS = ("bus-cmd", "bus-in", "bus-pub", "bus-tap")


def commands():
    """The subcommands `switchboard --help` lists."""
    rc, out, err = sb("--help")
    check(rc == 0, "switchboard --help exited %d: %s", rc, err)
    section = out.split("commands:", 1)
    check(len(section) == 2, "--help lists no commands:\n%s", out)
    names = re.findall(r"^  ([a-z][a-z-]*)\s", section[1], re.M)
    check(len(names) >= 5, "--help lists %r", names)
    return names


def test_help_for_every_command():
    rc, out, _ = sb("--help")
    check(rc == 0 and out.startswith("usage: switchboard"), "top-level --help: %d %r", rc, out[:80])
    for flag in ("-h", "help"):
        rc, out2, _ = sb(flag)
        check(rc == 0 and out2 == out, "switchboard %s differs from --help", flag)
    names = commands()
    for must in ("serve", "tap", "stats"):
        check(must in names, "%s missing from --help: %r", must, names)
    for name in names:
        for flag in ("--help", "-h"):
            rc, out, err = sb(name, flag)
            check(rc == 0, "switchboard %s %s exited %d: %s", name, flag, rc, err)
            check(out.startswith("usage: switchboard %s" % name),
                  "switchboard %s %s does not start with its usage line: %r", name, flag, out[:80])
    rc, out, _ = sb("--version")
    check(rc == 0 and re.match(r"switchboard \d+\.\d+", out), "--version: %d %r", rc, out)


def test_usage_errors_exit_2():
    rc, _, err = sb()
    check(rc == 2 and "usage" in err, "no command: %d %r", rc, err)
    rc, _, err = sb("frobnicate")
    check(rc == 2, "unknown command exited %d", rc)
    check(len(err.strip().splitlines()) == 1 and "frobnicate" in err, "unknown command: %r", err)
    # one line, naming the command and the offending option (not getopt's
    # own message followed by ours)
    for name in commands():
        rc, out, err = sb(name, "--no-such-option")
        check(rc == 2, "switchboard %s --no-such-option exited %d", name, rc)
        lines = err.strip().splitlines()
        check(len(lines) == 1, "switchboard %s --no-such-option: %d lines on stderr: %r",
              name, len(lines), err)
        check(lines[0].startswith("switchboard %s:" % name) and "--no-such-option" in lines[0],
              "switchboard %s: the error does not name the command and option: %r", name, err)
    rc, _, err = sb("stats", "--data", tmpdir(), "extra-arg")
    check(rc == 2, "an unexpected argument exited %d", rc)
    rc, _, err = sb("tap", "--count", "zero")
    check(rc == 2, "tap --count zero exited %d", rc)
    rc, _, err = sb("serve", "--bus", "ipc:///tmp/x")
    check(rc == 2, "serve --bus ipc:// exited %d", rc)
    rc, _, err = sb("serve", "--actors", "nosuch", "--data", tmpdir())
    check(rc == 2 and "nosuch" in err, "serve --actors nosuch: %d %r", rc, err)


def test_second_serve_on_same_data_exits_1():
    with Server() as srv:
        rc, out, err = sb("serve", "--data", srv.data, "--http", "127.0.0.1:0", timeout=10)
        check(rc == 1, "the second serve exited %d", rc)
        check("already running" in err and srv.data in err, "unclear message: %r", err)
        check(str(srv.proc.pid) in err, "the message does not name the running pid: %r", err)
        # the first one is unharmed: its sockets are still there and it serves
        for s in SOCKETS:
            check(os.path.exists(os.path.join(srv.data, s)), "%s removed by the second serve", s)
        check(srv.stats()["uptime_ms"] > 0, "the first serve stopped answering")


def _clean_shutdown(sig):
    srv = Server().start()
    start_actor(srv, instance="e-shutdown")
    c = Client(srv.endpoint())
    check(c.request("echo.ping", {"text": "x"}).type == "echo.ping.ok", "ping before shutdown")
    c.close()
    t0 = time.monotonic()
    rc = srv.stop(sig, timeout=10)
    dt = time.monotonic() - t0
    check(rc == 0, "serve exited %s on %s:\n%s", rc, sig.name, srv.log())
    check(dt < 5, "serve took %.1f s to stop on %s", dt, sig.name)
    left = [s for s in SOCKETS if os.path.exists(os.path.join(srv.data, s))]
    check(not left, "sockets left behind after %s: %r", sig.name, left)
    check("shutting down" in srv.log() and "stopped" in srv.log(), "no shutdown log lines")
    # the lock is free again: a new serve starts on the same data
    srv2 = Server(data=srv.data).start()
    check(srv2.stop() == 0, "restart on the same data")


def test_sigterm_shuts_down_cleanly():
    _clean_shutdown(signal.SIGTERM)


def test_sigint_shuts_down_cleanly():
    _clean_shutdown(signal.SIGINT)


def test_data_dir_is_0700_and_long_paths_fail_clearly():
    with Server() as srv:
        mode = os.stat(srv.data).st_mode & 0o777
        check(mode == 0o700, "data dir mode %o", mode)
    long_dir = "/tmp/" + "d" * 120
    rc, _, err = sb("serve", "--data", long_dir)
    check(rc != 0 and "too long" in err, "an over-long data dir: %d %r", rc, err)
    check(not os.path.exists(long_dir), "serve created %s anyway", long_dir)


def test_stats_and_call_commands():
    with Server() as srv:
        start_actor(srv, instance="e-cli")
        rc, out, err = sb("call", "echo.ping", '{"text":"via cli"}', "--data", srv.data)
        check(rc == 0, "call exited %d: %s", rc, err)
        check(json.loads(out) == {"text": "via cli", "instance": "e-cli"}, "call printed %r", out)
        rc, out, err = sb("call", "echo.ping", '{"text":"x"}', "--data", srv.data, "--timeout", "2000",
                          "--connect", "ipc://%s/bus-cmd" % srv.data)
        check(rc == 0, "call --connect exited %d: %s", rc, err)
        rc, out, err = sb("stats", "--data", srv.data, "--json")
        check(rc == 0, "stats exited %d: %s", rc, err)
        st = json.loads(out)
        check(st["services"]["echo"]["instances"] == ["e-cli"], "stats services %r", st["services"])
        check(st["types"].get("echo.ping", 0) >= 2, "per-type counts %r", st["types"])
        for section in ("planes", "malformed", "queues"):
            check(isinstance(st.get(section), dict), "stats lacks %s", section)
        rc, out, err = sb("stats", "--data", srv.data)
        check(rc == 0 and "e-cli" in out and "malformed" in out, "plain stats: %d %r", rc, out)
        # no server: a clear error, exit 1
        rc, _, err = sb("stats", "--data", tmpdir())
        check(rc == 1 and "no server" in err, "stats without a server: %d %r", rc, err)


def test_tap_command_prints_json_lines():
    with Server() as srv:
        start_actor(srv, instance="e-tap")
        log = os.path.join(srv.data, "tap.log")
        tap = Proc([SB_BIN, "tap", "--data", srv.data, "--json", "--count", "2", "--filter", "echo.ping"],
                   log)
        c = Client(srv.endpoint(), name="tapper")
        # the tap's subscription takes a moment to reach the broker: ping
        # until the tap has seen two messages and exits
        sent = []
        def done():
            sent.append(c.request("echo.ping", {"text": "seen by tap"}).header["corr"])
            return not tap.alive()
        wait_for(done, 5, "tap --count 2 to exit", interval=0.05)
        check(tap.wait(5) == 0, "tap exited %s", tap.p.returncode)
        lines = [l for l in tap.log().splitlines() if l.startswith("{")]
        check(len(lines) == 2, "tap printed %r", tap.log())
        recs = [json.loads(l) for l in lines]
        req = next((r for r in recs if r["header"]["type"] == "echo.ping"), None)
        check(req is not None, "no echo.ping request on the tap: %r", recs)
        check(req["plane"] == "cmd" and req["header"]["from"] == "tapper", "tap record %r", req)
        check(req["header"]["id"] in sent and req["body"]["text"] == "seen by tap", "tap record %r", req)
        for r in recs:
            check(r["header"]["type"].startswith("echo.ping"), "filter let through %r", r)
        c.close()


if __name__ == "__main__":
    run_tests(globals())
