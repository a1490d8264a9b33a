"""`sessions` and `runs` list newest first, in one column style; the
sessions list shows model, policy, last activity and the last prompt's
first line ("-" while absent); `sessions new` defaults --workspace to the
current folder."""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import cli, cli_session as new_session, cli_wait_run as wait_final, SB_BIN, Server, check, run_tests, sb, tmpdir, wait_for  # noqa: E402


def rows(out):
    lines = out.splitlines()
    check(len(lines) >= 1, "no header: %r", out)
    return lines[0], lines[1:]


def test_sessions_newest_first_with_model_policy_activity_prompt():
    with Server() as srv:
        ws = tmpdir()
        ids = [new_session(srv, ws, "--title", "s%d" % k) for k in range(4)]
        new_session(srv, ws, "--title", "closed one")
        rc, out, err = cli(srv, "sessions", "update", ids[1], "--model", "gpt-test", "--approval", "yolo")
        check(rc == 0, "update exited %d: %s", rc, err)
        rc, out, err = cli(srv, "prompt", ids[2], "first line of the prompt\nsecond line", "--json")
        check(rc == 0, "prompt exited %d: %s", rc, err)
        wait_final(srv, json.loads(out)["run_id"])

        rc, out, err = cli(srv, "sessions", "--json")
        check(rc == 0, "sessions --json exited %d: %s", rc, err)
        listed = [json.loads(l)["session_id"] for l in out.splitlines()]
        check(listed[1:] == ids[::-1], "sessions --json order %r, want newest first %r", listed, ids[::-1])

        rc, out, err = cli(srv, "sessions")
        check(rc == 0, "sessions exited %d: %s", rc, err)
        header, body = rows(out)
        for col in ("SESSION", "STATUS", "MODEL", "POLICY", "LAST ACTIVITY", "WORKSPACE", "LAST PROMPT"):
            check(col in header, "no %s column: %r", col, header)
        check([r.split()[0] for r in body][1:] == ids[::-1], "plain order: %r", body)
        by_id = {r.split()[0]: r for r in body}
        check("gpt-test" in by_id[ids[1]] and "yolo" in by_id[ids[1]], "model/policy: %r", by_id[ids[1]])
        check("second line" not in out, "a prompt's second line is listed: %r", out)
        rec = json.loads(cli(srv, "sessions", "show", ids[2], "--json")[1])
        if "last_prompt" in rec:
            check("first line of the prompt" in by_id[ids[2]], "last prompt not shown: %r", by_id[ids[2]])
        else:
            check(by_id[ids[2]].rstrip().endswith("-"), "an absent last prompt is not '-': %r", by_id[ids[2]])
        # a session never prompted shows '-' for both activity and prompt,
        # until the server records activity at creation
        fresh = by_id[ids[3]]
        check(fresh.rstrip().endswith("-"), "a fresh session's prompt is not '-': %r", fresh)

        # --limit N: the newest N
        rc, out, err = cli(srv, "sessions", "--limit", "2", "--json")
        check([json.loads(l)["session_id"] for l in out.splitlines()] == listed[:2], "--limit 2: %r", out)
        # --status keeps the order
        cli(srv, "sessions", "close", ids[0])
        rc, out, err = cli(srv, "sessions", "--status", "active", "--json")
        got = [json.loads(l)["session_id"] for l in out.splitlines()]
        check(got == listed[:-1], "--status active: %r, want %r", got, listed[:-1])


def test_sessions_list_pages_through_everything():
    # more than one server page: the newest comes first all the same
    with Server() as srv:
        ws = tmpdir()
        c = srv.control()
        ids = []
        for k in range(105):
            m = c.request("session.create", {"workspace": ws})
            check(m.type == "session.create.ok", "create: %r", m.body)
            ids.append(m.body["session"]["session_id"])
        rc, out, err = cli(srv, "sessions", "--json")
        check(rc == 0, "sessions exited %d: %s", rc, err)
        got = [json.loads(l)["session_id"] for l in out.splitlines()]
        check(got == ids[::-1], "105 sessions: got %d, first %r", len(got), got[:2])
        rc, out, err = cli(srv, "sessions", "show", "last", "--json")
        check(json.loads(out)["session_id"] == ids[-1], "last across pages: %r", out)


def test_runs_newest_first_in_the_same_columns():
    with Server() as srv:
        ws = tmpdir()
        sid = new_session(srv, ws)
        runs = []
        for text in ("one", "two"):
            rc, out, err = cli(srv, "prompt", sid, text, "--json")
            check(rc == 0, "prompt exited %d: %s", rc, err)
            runs.append(json.loads(out)["run_id"])
            wait_final(srv, runs[-1])
        rc, out, err = cli(srv, "runs")
        check(rc == 0, "runs exited %d: %s", rc, err)
        header, body = rows(out)
        for col in ("RUN", "STATUS", "SESSION", "STEPS", "UPDATED"):
            check(col in header, "no %s column: %r", col, header)
        check([r.split()[0] for r in body] == runs[::-1], "runs order: %r", body)
        check(all(sid in r for r in body), "session column: %r", body)
        # a completed run shows what it was asked
        check(body[0].rstrip().endswith("two") and body[1].rstrip().endswith("one"), "input column: %r", body)
        # the session list's timestamps and the run list's are alike
        rc, sout, _ = cli(srv, "sessions")
        check(header.index("STATUS") == rows(sout)[0].index("STATUS"), "STATUS columns differ:\n%s\n%s",
              header, rows(sout)[0])


def test_sessions_new_defaults_to_the_current_folder():
    with Server() as srv:
        ws = tmpdir()
        os.mkdir(os.path.join(ws, "sub"))
        p = subprocess.run([SB_BIN, "sessions", "new", "--json", "--data", srv.data], cwd=os.path.join(ws, "sub"),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=10)
        rc, out, err = p.returncode, p.stdout.decode(), p.stderr.decode()
        check(rc == 0, "sessions new without --workspace exited %d: %s", rc, err)
        check(json.loads(out)["workspace"] == os.path.realpath(os.path.join(ws, "sub")),
              "workspace %r", json.loads(out)["workspace"])


if __name__ == "__main__":
    run_tests(globals())
