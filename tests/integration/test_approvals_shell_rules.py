#!/usr/bin/python3
"""Approval rules a shell cannot fool (issue 20, docs/approvals.md "Shell
commands" and "File rules"), each through a real session with the
loopback model replaying the attacker's tool calls:

  - under `shell:git status*:allow` and `shell:git diff*:allow` (auto), a
    plain `git status` runs unasked, and each trick that ran a marker
    command without asking (`;`, `&&`, `$( )`, backquotes, a newline,
    `| sh -c`, GIT_CONFIG_* setting core.fsmonitor, `git diff --output`)
    now asks a person; rejected, no marker appears;
  - under the deny rule `*rm *` (yolo), `rm` behind a tab, `r''m`, and an
    `rm` after 5 KiB of padding are denied without asking; the victims stay;
  - a session-scope "yes" to a command longer than 4 KiB does not cover a
    different command with the same first 4 KiB: that one asks;
  - scope always for a compound command (which no allow rule can match)
    adds no rule and counts for the session, across a restart;
  - under `write_file:src/*:allow`, writes through the in-workspace
    symlinks src/hooks -> ../.git/hooks and src/up -> .. ask, and nothing
    lands in .git;
  - under `read_file:.env:deny`, read_file through a symlink to .env is
    denied, grep leaves .env's lines out, list_dir leaves .env out: the
    secret reaches neither the tape nor the model.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import check, run_tests, tmpdir  # noqa: E402
from sbagent import (LLM, asked, call, git_repo, llm_server, new_session, pending, prompt, resolve,  # noqa: E402
                     results, shell, stop, tape, tool, wait_run)


def rule(tool_glob, pattern, action):
    return {"tool": tool_glob, "pattern": pattern, "action": action}


def reject_each(server, sid, run_id, want, ws, markers):
    """Answers the run's questions in order, rejecting each; checks that
    each call in `want` was asked before any marker appeared."""
    for call_id in want:
        ia = pending(server, sid, timeout=20)
        check(ia["call_id"] == call_id, "asked for %s, not %s: %r", ia["call_id"], call_id, ia)
        made = [m for m in markers if os.path.exists(os.path.join(ws, m))]
        check(not made, "a marker appeared before %s was answered: %r", call_id, made)
        resolve(server, ia["interaction_id"], "reject")
    return wait_run(server, run_id, timeout=40)


def test_allow_rules_match_one_plain_command():
    ws = git_repo()
    tricks = [
        ("c_semi", "git status; touch m1"),
        ("c_and", "git status && touch m2"),
        ("c_subst", "git status $(touch m3)"),
        ("c_tick", "git status `touch m4`"),
        ("c_newline", "git status\ntouch m5"),
        ("c_pipe", "git status | sh -c 'touch m6'"),
        ("c_gitcfg", "git status && GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor "
                     "GIT_CONFIG_VALUE_0='touch m7; false' git status"),
        ("c_output", "git diff --output=m8"),
    ]
    markers = ["m%d" % k for k in range(1, 9)]
    llm = LLM()
    llm.script("tricks", [
        {"tool_calls": [shell("git status --short", "c_plain")] + [shell(cmd, cid) for cid, cmd in tricks]},
        {"text": "tried"},
    ])
    server = llm_server(llm, "tricks")
    sid = new_session(server, ws, approval_policy="auto",
                      rules=[rule("shell", "git status*", "allow"), rule("shell", "git diff*", "allow")])
    run_id = prompt(server, sid, "look")
    run = reject_each(server, sid, run_id, [cid for cid, _ in tricks], ws, markers)
    check(run["status"] == "completed", "run %r", run)
    res = results(tape(server, sid))
    check(res["c_plain"]["ok"] is True, "the plain git status: %r", res["c_plain"])
    check([a["body"]["call_id"] for a in asked(server, sid)] == [cid for cid, _ in tricks],
          "asked: %r", [a["body"]["call_id"] for a in asked(server, sid)])
    for cid, _ in tricks:
        check(res[cid].get("refused") is True, "%s was not refused: %r", cid, res[cid])
    made = [m for m in markers if os.path.exists(os.path.join(ws, m))]
    check(not made, "markers made: %r", made)
    stop(server)


def test_deny_rules_see_every_command_unquoted():
    ws = tmpdir()
    for v in ("v1", "v2", "v3", "v4"):
        with open(os.path.join(ws, v), "w") as f:
            f.write("keep\n")
    llm = LLM()
    llm.script("deny", [
        {"tool_calls": [shell("rm\tv1", "c_tab"), shell("r''m v2", "c_quote"),
                        shell("echo " + "x" * 5000 + "; rm v3", "c_long"),
                        shell("sh -c 'cd . && rm v4'", "c_sh"), shell("echo fine", "c_ok")]},
        {"text": "denied"},
    ])
    server = llm_server(llm, "deny")
    sid = new_session(server, ws, approval_policy="yolo", rules=[rule("shell", "*rm *", "deny")])
    run = wait_run(server, prompt(server, sid, "clean"), timeout=40)
    check(run["status"] == "completed", "run %r", run)
    res = results(tape(server, sid))
    for cid in ("c_tab", "c_quote", "c_long", "c_sh"):
        check(res[cid]["ok"] is False and res[cid].get("refused") is True and "rule #1" in res[cid]["output"],
              "%s was not denied: %r", cid, res[cid])
    check(res["c_ok"]["ok"] is True, "echo fine: %r", res["c_ok"])
    check(not asked(server, sid), "a deny asked: %r", asked(server, sid))
    gone = [v for v in ("v1", "v2", "v3", "v4") if not os.path.exists(os.path.join(ws, v))]
    check(not gone, "removed: %r", gone)
    stop(server)


def test_a_session_grant_covers_the_whole_command():
    ws = tmpdir()
    a = "echo " + "x" * 5000
    b = a[:4096] + "; touch marker; echo " + "y" * 100
    llm = LLM()
    llm.script("grant", [
        {"tool_calls": [shell(a, "c_a")]},
        {"tool_calls": [shell(b, "c_b")]},
        {"text": "granted"},
    ])
    server = llm_server(llm, "grant")
    sid = new_session(server, ws, approval_policy="auto")
    run_id = prompt(server, sid, "echo")
    ia = pending(server, sid)
    check(ia["call_id"] == "c_a", "asked %r", ia)
    check(ia["summary"].endswith("more bytes not shown here: read the whole command in the arguments]")
          and len(ia["summary"]) <= 4000, "a cut summary does not say so: %r", ia["summary"][-200:])
    resolve(server, ia["interaction_id"], scope="session")
    run = reject_each(server, sid, run_id, ["c_b"], ws, ["marker"])
    check(run["status"] == "completed", "run %r", run)
    check(not os.path.exists(os.path.join(ws, "marker")), "the other command ran")
    check(results(tape(server, sid))["c_a"]["ok"] is True, "the granted command did not run")
    stop(server)


def test_scope_always_for_a_compound_command_counts_for_the_session():
    ws = tmpdir()
    both = "echo a >> log.txt && echo b >> log.txt"
    llm = LLM()
    llm.script("always", [
        {"tool_calls": [shell(both, "c1")]},
        {"text": "once"},
        {"tool_calls": [shell(both, "c2")]},
        {"text": "again"},
    ])
    server = llm_server(llm, "always")
    sid = new_session(server, ws, approval_policy="auto")
    run_id = prompt(server, sid, "log")
    ia = pending(server, sid)
    resolve(server, ia["interaction_id"], scope="always")
    check(wait_run(server, run_id, timeout=30)["status"] == "completed", "first run")
    rules = call(server, "session.get", {"session_id": sid})["session"].get("rules", [])
    check(rules == [], "a rule that no allow can honour was added: %r", rules)
    stop(server)
    server.start()
    run = wait_run(server, prompt(server, sid, "again"), timeout=30)
    check(run["status"] == "completed", "second run %r", run)
    check(len(asked(server, sid)) == 1, "the identical command asked again: %r", asked(server, sid))
    check(open(os.path.join(ws, "log.txt")).read() == "a\nb\na\nb\n", "log %r",
          open(os.path.join(ws, "log.txt")).read())
    stop(server)


def test_file_rules_match_the_resolved_path():
    ws = git_repo()
    os.makedirs(os.path.join(ws, "src"))
    os.symlink("../.git/hooks", os.path.join(ws, "src", "hooks"))
    os.symlink("..", os.path.join(ws, "src", "up"))
    hook = os.path.join(ws, ".git", "hooks", "pre-commit")
    exclude = os.path.join(ws, ".git", "info", "exclude")
    before = open(exclude).read() if os.path.exists(exclude) else None
    llm = LLM()
    llm.script("files", [
        {"tool_calls": [tool("write_file", "c_src", path="src/a.c", content="int a;\n"),
                        tool("write_file", "c_hook", path="src/hooks/pre-commit", content="#!/bin/sh\ntouch m\n"),
                        tool("write_file", "c_up", path="src/up/.git/info/exclude", content="*\n"),
                        tool("edit_file", "c_cfg", path="src/up/.git/config", old="[core]", new="[core]\n\tx = 1")]},
        {"text": "written"},
    ])
    server = llm_server(llm, "files")
    sid = new_session(server, ws, approval_policy="auto",
                      rules=[rule("write_file", "src/*", "allow"), rule("edit_file", "*", "allow")])
    run_id = prompt(server, sid, "write")
    run = reject_each(server, sid, run_id, ["c_hook", "c_up", "c_cfg"], ws, [])
    check(run["status"] == "completed", "run %r", run)
    res = results(tape(server, sid))
    check(res["c_src"]["ok"] is True, "src/a.c: %r", res["c_src"])
    ia = [a["body"] for a in asked(server, sid)]
    check([b.get("summary") for b in ia] == [".git/hooks/pre-commit", ".git/info/exclude", ".git/config"],
          "what the person was shown: %r", [b.get("summary") for b in ia])
    check(not os.path.exists(hook), "the hook was written")
    check((open(exclude).read() if os.path.exists(exclude) else None) == before, "info/exclude was written")
    check("x = 1" not in open(os.path.join(ws, ".git", "config")).read(), ".git/config was edited")
    stop(server)


def test_a_read_deny_covers_grep_list_dir_and_symlinks():
    ws = tmpdir()
    secret = "hunter2-" + os.urandom(4).hex()
    with open(os.path.join(ws, ".env"), "w") as f:
        f.write("TOKEN=%s\n" % secret)
    with open(os.path.join(ws, "notes.txt"), "w") as f:
        f.write("TOKEN is in the env file\n")
    os.makedirs(os.path.join(ws, "src"))
    os.symlink("../.env", os.path.join(ws, "src", "env"))
    llm = LLM()
    llm.script("reads", [
        {"tool_calls": [tool("read_file", "c_read", path=".env"), tool("read_file", "c_link", path="src/env"),
                        tool("grep", "c_grep", pattern="TOKEN"), tool("grep", "c_grep_link", pattern="TOKEN",
                                                                       path="src/env"),
                        tool("grep", "c_grep_only", pattern="hunter2"),
                        tool("list_dir", "c_list", path=".", depth=2)]},
        {"text": "read"},
    ])
    server = llm_server(llm, "reads")
    sid = new_session(server, ws, approval_policy="auto", rules=[rule("read_file", ".env", "deny")])
    run = wait_run(server, prompt(server, sid, "read"), timeout=40)
    check(run["status"] == "completed", "run %r", run)
    entries = tape(server, sid)
    res = results(entries)
    for cid in ("c_read", "c_link", "c_grep_link"):
        check(res[cid].get("refused") is True and "deny" in res[cid]["output"], "%s not denied: %r", cid, res[cid])
    check(res["c_grep"]["ok"] is True and "notes.txt:1:TOKEN is in" in res["c_grep"]["output"],
          "grep: %r", res["c_grep"])
    check(res["c_grep_only"]["output"].strip() == "no matches", "grep of the secret: %r", res["c_grep_only"])
    check(res["c_list"]["ok"] is True and "notes.txt" in res["c_list"]["output"]
          and ".env" not in res["c_list"]["output"], "list_dir: %r", res["c_list"])
    check(secret not in json.dumps(entries), "the secret is on the tape")
    check(secret not in json.dumps(llm.requests("reads")), "the secret reached the model")
    check(not asked(server, sid), "asked: %r", asked(server, sid))
    stop(server)


if __name__ == "__main__":
    run_tests(globals())
