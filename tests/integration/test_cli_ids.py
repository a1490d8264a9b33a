"""Ids as people write them: every command that takes a session or run id
takes any unique prefix of one (in either case) or `last`; an ambiguous
prefix is a usage error (exit 2) that lists the matches, a malformed one
too, and a prefix that matches nothing fails (exit 1). Server side, the
`id_prefix` filter of session.list and run.list."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import cli, cli_session as new_session, cli_wait_run as wait_final, Server, check, run_tests, sb, tmpdir, wait_for  # noqa: E402


def common_prefix(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def call(srv, type, body):
    m = srv.control().request(type, body, timeout=10)
    return m


def test_session_prefix_in_every_command():
    with Server() as srv:
        ws = tmpdir()
        a = new_session(srv, ws, "--title", "first")
        b = new_session(srv, ws, "--title", "second")
        shared = common_prefix(a, b)
        check(len(shared) >= 1, "ids %s and %s share no prefix", a, b)
        ua, ub = a[:len(shared) + 1], b[:len(shared) + 1]

        # show: a unique prefix, in upper or lower case, and `last`
        for arg, want in ((ua, a), (ub.lower(), b), ("last", b), (a, a)):
            rc, out, err = cli(srv, "sessions", "show", arg, "--json")
            check(rc == 0, "sessions show %s exited %d: %s", arg, rc, err)
            check(json.loads(out)["session_id"] == want, "sessions show %s gave %s, want %s", arg, out, want)

        # ambiguous: exit 2, both matches listed
        rc, out, err = cli(srv, "sessions", "show", shared)
        check(rc == 2, "an ambiguous prefix exited %d", rc)
        check(a in err and b in err and "ambiguous" in err, "the matches are not listed: %r", err)
        rc, _, err = cli(srv, "sessions", "show", shared, "--json")
        e = json.loads(err)["error"]
        check(rc == 2 and e["code"] == "usage" and a in e["message"], "--json ambiguity: %d %r", rc, err)

        # update, events, prompt, runs --session, close, delete
        rc, out, err = cli(srv, "sessions", "update", ua, "--title", "renamed", "--json")
        check(rc == 0 and json.loads(out)["title"] == "renamed", "update by prefix: %d %s %s", rc, out, err)
        rc, out, err = cli(srv, "events", "--session", ua, "--json")
        check(rc == 0, "events --session prefix exited %d: %s", rc, err)
        check(all(json.loads(l)["session_id"] == a for l in out.splitlines()), "events of another session")
        rc, out, err = cli(srv, "prompt", ub, "say hi", "--json")
        check(rc == 0, "prompt by prefix exited %d: %s", rc, err)
        run = json.loads(out)
        check(run["session_id"] == b, "prompt went to %s, want %s", run["session_id"], b)
        wait_final(srv, run["run_id"])
        rc, out, err = cli(srv, "runs", "--session", ub.lower(), "--json")
        check(rc == 0 and [json.loads(l)["run_id"] for l in out.splitlines()] == [run["run_id"]],
              "runs --session prefix: %d %r %s", rc, out, err)
        rc, out, err = cli(srv, "runs", "--session", "last", "--json")
        check(rc == 0 and json.loads(out.splitlines()[0])["session_id"] == b, "runs --session last: %r", out)
        rc, out, err = cli(srv, "sessions", "close", ua)
        check(rc == 0 and a in out, "close by prefix: %d %r %s", rc, out, err)
        rc, out, err = cli(srv, "sessions", "delete", ua)
        check(rc == 0 and a in out, "delete by prefix: %d %r %s", rc, out, err)
        rc, out, err = cli(srv, "sessions", "show", ua)
        check(rc == 1 and "no session" in err, "a deleted session's prefix: %d %r", rc, err)


def test_malformed_and_unknown_ids():
    with Server() as srv:
        ws = tmpdir()
        new_session(srv, ws)
        # malformed: a usage error everywhere, before any call
        for args in (("sessions", "show", "not-an-id"), ("sessions", "close", "ILOU"),
                     ("events", "--session", "x" * 27), ("prompt", "bad id", "text"),
                     ("runs", "--session", "nope!"), ("run-info", "run-1"), ("cancel", "%%"),
                     ("resume", "lastrun")):
            rc, _, err = cli(srv, *args)
            check(rc == 2, "%s exited %d, want 2: %s", " ".join(args), rc, err)
            check("is not a" in err, "%s: unclear message %r", " ".join(args), err)
        # well formed, matching nothing: the operation fails
        for args in (("sessions", "show", "7ZZZ"), ("run-info", "7ZZZ"), ("runs", "--session", "7zzz")):
            rc, _, err = cli(srv, *args)
            check(rc == 1 and "7ZZZ" in err, "%s: %d %r", " ".join(args), rc, err)
        rc, _, err = cli(srv, "run-info", "last")
        check(rc == 1 and "no run" in err, "run-info last with no runs: %d %r", rc, err)
    # `last` with no session at all
    with Server() as srv:
        rc, _, err = cli(srv, "sessions", "show", "last", "--json")
        check(rc == 1 and json.loads(err)["error"]["code"] == "not_found", "last of none: %d %r", rc, err)


def test_run_prefix_in_every_command():
    with Server() as srv:
        ws = tmpdir()
        s1 = new_session(srv, ws)
        s2 = new_session(srv, ws)
        runs = []
        for sid in (s1, s2):
            rc, out, err = cli(srv, "prompt", sid, "hello", "--json")
            check(rc == 0, "prompt exited %d: %s", rc, err)
            runs.append(json.loads(out)["run_id"])
        for r in runs:
            wait_final(srv, r)
        r1, r2 = runs
        shared = common_prefix(r1, r2)
        u1 = r1[:len(shared) + 1]
        rc, out, err = cli(srv, "run-info", u1.lower(), "--json")
        check(rc == 0 and json.loads(out)["run_id"] == r1, "run-info prefix: %d %r %s", rc, out, err)
        rc, out, err = cli(srv, "run-info", "last", "--json")
        check(rc == 0 and json.loads(out)["run_id"] == r2, "run-info last: %d %r %s", rc, out, err)
        rc, _, err = cli(srv, "run-info", shared)
        check(rc == 2 and r1 in err and r2 in err, "ambiguous run prefix: %d %r", rc, err)
        # cancel and resume reach the server with the full id: it answers
        # about that run (a finished run cannot be cancelled)
        rc, _, err = cli(srv, "cancel", u1)
        check(rc == 1 and r1 in err, "cancel by prefix: %d %r", rc, err)
        rc, out, err = cli(srv, "resume", "last", "--json")
        check((rc == 0 and json.loads(out)["resume_from"] == r2) or (rc == 1 and r2 in err),
              "resume last: %d %r %r", rc, out, err)


def test_id_prefix_filter_on_the_bus():
    with Server() as srv:
        ws = tmpdir()
        ids = [new_session(srv, ws) for _ in range(5)]
        for k, sid in enumerate(ids):
            m = call(srv, "session.list", {"id_prefix": sid})
            check(m.type == "session.list.ok", "session.list: %r", m.body)
            check([s["session_id"] for s in m.body["sessions"]] == [sid], "id_prefix %s: %r", sid, m.body)
        shared = ids[0][:10]    # the time part: all five, probably
        want = [s for s in ids if s.startswith(shared)]
        got, cursor = [], None
        while True:
            b = {"id_prefix": shared, "limit": 2}
            if cursor:
                b["cursor"] = cursor
            m = call(srv, "session.list", b)
            got += [s["session_id"] for s in m.body["sessions"]]
            cursor = m.body.get("next_cursor")
            if not cursor:
                break
        # the page order is the server's; every match comes once
        check(sorted(got) == sorted(want) and len(set(got)) == len(got), "paged id_prefix list %r, want %r",
              got, want)
        m = call(srv, "session.list", {"id_prefix": "7ZZZZ"})
        check(m.body["sessions"] == [], "an unmatched prefix listed %r", m.body)
        m = call(srv, "session.list", {"id_prefix": ids[0][:12], "status": "active"})
        check(ids[0] in [s["session_id"] for s in m.body["sessions"]], "id_prefix with status: %r", m.body)
        for bad in ("not-an-id", "ilou", "9ABC", ""):
            m = call(srv, "session.list", {"id_prefix": bad})
            check(m.is_error() and m.code == "invalid", "session.list id_prefix %r: %r", bad, m.body)
            m = call(srv, "run.list", {"id_prefix": bad})
            check(m.is_error() and m.code == "invalid", "run.list id_prefix %r: %r", bad, m.body)

        runs = []
        for sid in ids[:2]:
            m = call(srv, "session.prompt", {"session_id": sid, "text": "hi"})
            check(m.type == "session.prompt.ok", "prompt: %r", m.body)
            runs.append(m.body["run_id"])
        for r in runs:
            wait_final(srv, r)
        for r in runs:
            m = call(srv, "run.list", {"id_prefix": r})
            check([x["run_id"] for x in m.body["runs"]] == [r], "run.list id_prefix %s: %r", r, m.body)
        m = call(srv, "run.list", {"id_prefix": runs[0], "session_id": ids[0]})
        check([x["run_id"] for x in m.body["runs"]] == [runs[0]], "with session_id: %r", m.body)
        m = call(srv, "run.list", {"id_prefix": runs[0], "session_id": ids[1]})
        check(m.body["runs"] == [], "another session's run matched: %r", m.body)
        m = call(srv, "run.list", {"id_prefix": common_prefix(*runs)})
        check([x["run_id"] for x in m.body["runs"]] == runs[::-1], "newest first: %r", m.body)


if __name__ == "__main__":
    run_tests(globals())
