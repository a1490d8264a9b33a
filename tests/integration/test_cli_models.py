#!/usr/bin/python3
"""The provider and model of every session, in the CLI and chat (issue 21):
the effective pair (the session's own, else the server's default provider,
resolved by name to that provider's default model), never a dash.

  - llm.info lists every configured provider with its kind and default
    model (what the UI's header and New-session dialog choose among);
  - `sessions` shows PROVIDER/MODEL for each session: a session with none
    of its own shows the server's default provider and its model, one with
    a provider its model, one with a model that model;
  - `sessions show` says which came from the defaults;
  - chat's banner names them instead of "the server's default".
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Server, check, cli, run_tests, tmpdir  # noqa: E402
from sbagent import Term, call  # noqa: E402


def _server():
    d = tmpdir()
    path = os.path.join(d, "providers.json")
    with open(path, "w") as f:
        json.dump({"default": "demo", "providers": [
            {"name": "demo", "kind": "demo", "model": "demo"},
            {"name": "other", "kind": "chat", "base_url": "http://127.0.0.1:9/v1", "model": "big-1",
             "models": ["big-1", "small-2"]}]}, f)
    return Server(args=["--providers", path]).start()


def _new(srv, *args):
    rc, out, err = cli(srv, "sessions", "new", "--workspace", tmpdir(), "--json", *args)
    check(rc == 0, "sessions new %r: %d %s", args, rc, err)
    return json.loads(out)["session_id"]


def test_the_effective_provider_and_model_in_the_cli_and_chat():
    srv = _server()
    t = None
    try:
        info = call(srv, "llm.info", {})
        check(info["provider"] == "demo", "the default provider: %r", info)
        got = [(p["provider"], p["kind"], p["model"]) for p in info.get("providers", [])]
        check(got == [("demo", "demo", "demo"), ("other", "chat", "big-1")], "llm.info's providers: %r", got)

        plain = _new(srv)
        other = _new(srv, "--provider", "other")
        mine = _new(srv, "--model", "mine")
        rc, out, err = cli(srv, "sessions")
        check(rc == 0, "sessions: %d %s", rc, err)
        rows = {ln.split()[0]: ln.split() for ln in out.splitlines()[1:]}
        check(rows[plain][2] == "demo/demo", "a session with no model of its own shows %r", rows[plain])
        check(rows[other][2] == "other/big-1", "a session on provider other shows %r", rows[other])
        check(rows[mine][2] == "demo/mine", "a session with its own model shows %r", rows[mine])

        rc, out, err = cli(srv, "sessions", "show", plain)
        check(rc == 0 and "provider   demo (the server's default)" in out
              and "model      demo (the server's default)" in out, "sessions show: %r", out)
        rc, out, err = cli(srv, "sessions", "show", other)
        check("provider   other\n" in out and "model      big-1 (the provider's default)" in out,
              "sessions show of provider other: %r", out)

        t = Term(srv, other)
        t.expect(r"provider other · model big-1 \(the provider's default\)")
        t.expect(r"> ")
        t.type(b"\x04")
        check(t.wait_exit() == 0, "exit %r", t.code)
        t.kill()
        t = Term(srv, plain)
        t.expect(r"provider demo · model demo \(the server's default\)")
        t.expect(r"> ")
        t.type(b"\x04")
        check(t.wait_exit() == 0, "exit %r", t.code)
    finally:
        if t:
            t.kill()
        srv.stop()


if __name__ == "__main__":
    run_tests(globals())
