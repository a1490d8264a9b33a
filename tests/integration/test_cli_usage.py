"""Exit codes and messages people and scripts rely on: 2 for a usage error,
an invalid enum value included; 1 for a failed operation; with --json an
error is {"error":{"code","message"}} on stderr. Also: providers are
checked when a session names one, --llm needs --model, `tap` hides
heartbeats and takes --exclude, the serve banner, `prompt --help`."""

import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import (SB_BIN, Client, cli, Proc, Server, check, run_tests, sb,  # noqa: E402
                    start_actor, tmpdir, wait_for)

SB_ROOT = os.environ.get("SB_ROOT", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def json_error(err):
    lines = err.strip().splitlines()
    check(len(lines) == 1, "not one line on stderr: %r", err)
    obj = json.loads(lines[0])
    check(set(obj) == {"error"} and set(obj["error"]) == {"code", "message"}, "error object %r", obj)
    return obj["error"]


def test_invalid_enum_values_are_usage_errors():
    data = tmpdir()
    for args in (("sessions", "new", "--approval", "maybe"),
                 ("sessions", "update", "01ABC", "--approval", "always"),
                 ("sessions", "list", "--status", "sleeping"),
                 ("runs", "--status", "bogus"),
                 ("run", "--goal", "x", "--approval", "maybe"),
                 ("serve", "--llm", "gpt"),
                 ("serve", "--sandbox", "docker"),
                 ("actor", "exec", "--sandbox", "docker"),
                 ("worker", "--sandbox", "docker"),
                 ("run", "--goal", "x", "--sandbox", "docker"),
                 ("sessions", "new", "--network", "maybe"),
                 ("tap", "--count", "5x"),
                 ("call", "echo.ping", "--timeout", "soon")):
        rc, out, err = sb(*(list(args) + ["--data", data]))
        check(rc == 2, "%s exited %d, want 2: %s", " ".join(args), rc, err)
        bad = args[-1]
        check(bad in err, "%s: the message does not name '%s': %r", " ".join(args), bad, err)
        if args[0] in ("serve", "actor", "call", "worker"):
            continue    # no --json: they print no JSON
        rc, out, err = sb(*(list(args) + ["--data", data, "--json"]))
        e = json_error(err)
        check(rc == 2 and e["code"] == "usage" and bad in e["message"], "%s --json: %d %r", " ".join(args), rc, e)
    # options that belong to other commands
    for args in (("cancel", "01ABC", "--follow"), ("prompt", "01ABC", "x", "--status", "running")):
        rc, _, err = sb(*(list(args) + ["--data", data]))
        check(rc == 2, "%s exited %d, want 2: %s", " ".join(args), rc, err)


def test_llm_without_model_is_a_usage_error_with_the_fix():
    data = tmpdir()
    for args in (("serve", "--llm", "chat"), ("run", "--goal", "x", "--llm", "responses"),
                 ("actor", "llm", "--llm", "anthropic")):
        rc, _, err = sb(*(list(args) + ["--data", data]))
        check(rc == 2, "%s exited %d, want 2: %s", " ".join(args), rc, err)
        check("--model" in err and len(err.strip().splitlines()) == 1, "%s: no one-line fix: %r",
              " ".join(args), err)
    check(not os.path.exists(os.path.join(data, "lock")), "serve started before refusing")
    # the demo needs no model
    with Server(args=["--llm", "demo"]) as srv:
        check(srv.stats()["uptime_ms"] >= 0, "serve --llm demo")


def test_json_errors_for_failures():
    with Server() as srv:
        # a full id of no session: the server's not_found, exit 1
        rc, _, err = cli(srv, "sessions", "show", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "--json")
        e = json_error(err)
        check(rc == 1 and e["code"] == "not_found", "show a missing session --json: %d %r", rc, e)
        rc, _, err = cli(srv, "run-info", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "--json")
        e = json_error(err)
        check(rc == 1 and e["code"] == "not_found", "run-info a missing run --json: %d %r", rc, e)
        rc, _, err = cli(srv, "sessions", "new", "--workspace", "/no/such/folder", "--json")
        e = json_error(err)
        check(rc == 1 and e["code"] == "invalid", "new on a missing folder --json: %d %r", rc, e)
        # and without --json, one plain line naming the code
        rc, _, err = cli(srv, "sessions", "show", "01ARZ3NDEKTSV4RRFFQ69G5FAV")
        check(rc == 1 and err.startswith("switchboard sessions: not_found"), "plain: %d %r", rc, err)
    # no server at all
    rc, _, err = sb("sessions", "--data", tmpdir(), "--json")
    e = json_error(err)
    check(rc == 1 and e["code"] == "unavailable" and "no server" in e["message"], "no server --json: %d %r", rc, e)
    rc, _, err = sb("tap", "--data", tmpdir(), timeout=5)
    check(rc == 1 and "no server" in err, "tap without a server: %d %r", rc, err)
    rc, _, err = sb("nosuchcommand", "--json")
    check(rc == 2 and json_error(err)["code"] == "usage", "unknown command --json: %d %r", rc, err)


def test_provider_must_be_configured():
    with Server() as srv:
        ws = tmpdir()
        rc, _, err = cli(srv, "sessions", "new", "--workspace", ws, "--provider", "nosuch")
        check(rc == 1 and "nosuch" in err and "configured: 'demo'" in err, "new --provider nosuch: %d %r", rc, err)
        rc, out, err = cli(srv, "sessions", "--json")
        check(out.strip() == "", "a session was created anyway: %r", out)
        rc, out, err = cli(srv, "sessions", "new", "--workspace", ws, "--provider", "demo", "--json")
        check(rc == 0 and json.loads(out)["provider"] == "demo", "new --provider demo: %d %r %s", rc, out, err)
        # an empty value clears, as for every string field
        rc, out, err = cli(srv, "sessions", "update", "last", "--approval", "yolo", "--json")
        check(rc == 0 and json.loads(out)["approval_policy"] == "yolo", "update --approval: %d %s", rc, err)
        rc, out, err = cli(srv, "sessions", "update", "last", "--approval", "", "--provider", "", "--json")
        check(rc == 0 and "approval_policy" not in json.loads(out) and "provider" not in json.loads(out),
              "update --approval '' --provider '': %d %r %s", rc, out, err)
        rc, _, err = cli(srv, "sessions", "update", "last", "--provider", "other", "--json")
        e = json_error(err)
        check(rc == 1 and e["code"] == "not_found" and "other" in e["message"], "update --provider: %d %r", rc, e)


def test_tap_hides_heartbeats_and_takes_exclude():
    with Server() as srv:
        start_actor(srv, instance="e-hb")
        quiet_log = os.path.join(srv.data, "tap-quiet.log")
        quiet = Proc([SB_BIN, "tap", "--data", srv.data, "--json", "--exclude", "echo.ping.ok",
                      "--exclude", "bus.stats"], quiet_log)
        c = Client(srv.endpoint(), name="hb")

        def seen_ping():
            c.request("echo.ping", {"text": "x"})
            return '"echo.ping"' in quiet.log()
        wait_for(seen_ping, 5, "the tap to see a ping", interval=0.05)
        # a second tap, started now, waits for a heartbeat: once it has one,
        # the first tap was subscribed when that heartbeat went by
        loud = Proc([SB_BIN, "tap", "--data", srv.data, "--json", "--heartbeats", "--filter", "bus.heartbeat",
                     "--count", "1"], os.path.join(srv.data, "tap-loud.log"))
        check(loud.wait(10) == 0, "tap --heartbeats saw no heartbeat: %s", loud.log())
        c.request("echo.ping", {"text": "after"})
        wait_for(lambda: '"after"' in quiet.log(), 5, "the last ping on the tap")
        quiet.stop()
        c.close()
        recs = [json.loads(l) for l in open(quiet_log).read().splitlines() if l.startswith("{")]
        types = set(r["header"]["type"] for r in recs)
        check("echo.ping" in types, "no echo.ping: %r", types)
        check(not [t for t in types if "heartbeat" in t], "heartbeats shown without --heartbeats: %r", types)
        check("echo.ping.ok" not in types and "bus.stats" not in types, "--exclude ignored: %r", types)
        loud_recs = [json.loads(l) for l in loud.log().splitlines() if l.startswith("{")]
        check(loud_recs and loud_recs[0]["header"]["type"] == "bus.heartbeat", "loud tap: %r", loud_recs)


def test_serve_banner_names_model_and_binary():
    with Server() as srv:
        wait_for(lambda: "Stop with Ctrl-C" in srv.log(), 5, "the banner")
        banner = srv.log()
        check(os.path.realpath(SB_BIN) in banner, "the binary's path is not in the banner:\n%s", banner)
        check(re.search(r"model\s+demo", banner), "no model line:\n%s", banner)
        for dev in ("not built yet", "issue", "reserved"):
            check(dev not in banner, "developer talk %r in the banner:\n%s", dev, banner)
    with Server(args=["--llm", "chat", "--model", "m-test", "--llm-url", "http://127.0.0.1:9/v1"]) as srv:
        wait_for(lambda: "Stop with Ctrl-C" in srv.log(), 5, "the banner")
        line = [l for l in srv.log().splitlines() if l.strip().startswith("model")]
        check(line and "m-test" in line[0] and "chat" in line[0], "model line %r", line)


def test_prompt_help_says_what_ctrl_c_does():
    rc, out, _ = sb("prompt", "--help")
    check(rc == 0 and "Ctrl-C" in out and "the run goes on" in out and "cancel" in out,
          "prompt --help: %r", out)


def test_client_sources_do_not_include_server_internals():
    # the client commands talk to the server over the bus only
    for name in ("sessions.c", "runs.c", "common.c", "ids.c", "tap.c", "follow.c"):
        path = os.path.join(SB_ROOT, "cli", name)
        if not os.path.exists(path):
            continue
        includes = re.findall(r'^#include "([^"]+)"', open(path).read(), re.M)
        inside = [i for i in includes if i.startswith("actors/")]
        check(not inside, "cli/%s includes %r", name, inside)


if __name__ == "__main__":
    run_tests(globals())
