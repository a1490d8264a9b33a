#!/usr/bin/python3
"""The changes panel shows what the session's runs changed (docs/gateway.md,
exec.diff): the work tree as the session's first run found it is its
baseline, so edits a person had left uncommitted before the session are
not shown as the agent's, and a file the agent edits on top of such an
edit shows the agent's lines only."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import check, run_tests, tmpdir  # noqa: E402
from sbagent import LLM, call, llm_server, new_session, prompt, wait_run  # noqa: E402


def _git(ws, *args):
    return subprocess.run(["git", "-C", ws] + list(args), check=True, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL).stdout.decode()


def _repo():
    ws = tmpdir()
    _git(ws, "init", "-q")
    _git(ws, "config", "user.email", "t@example.com")
    _git(ws, "config", "user.name", "t")
    with open(os.path.join(ws, "notes.txt"), "w") as f:
        f.write("one\n")
    _git(ws, "add", ".")
    _git(ws, "commit", "-qm", "init")
    return ws


def _write(call_id, path, content):
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": content},
                            "call_id": call_id}]}


def test_the_diff_is_the_sessions_not_what_was_there_before():
    ws = _repo()
    # a person's uncommitted work, there before the session
    with open(os.path.join(ws, "notes.txt"), "a") as f:
        f.write("mine, not the agent's\n")
    with open(os.path.join(ws, "draft.txt"), "w") as f:
        f.write("an untracked draft\n")
    llm = LLM()
    llm.script("w", [_write("c1", "agent.txt", "written by the agent\n"), {"text": "done"},
                     _write("c2", "notes.txt", "one\nmine, not the agent's\nthe agent's line\n"),
                     {"text": "done"}])
    server = llm_server(llm, "w")
    sid = new_session(server, ws, approval_policy="yolo")
    before = call(server, "exec.diff", {"session_id": sid})
    check(before["git"] and before.get("base") == "head", "before any run: against HEAD: %r", before)
    check(sorted(f["path"] for f in before["files"]) == ["draft.txt", "notes.txt"], "before: %r", before)

    run = wait_run(server, prompt(server, sid, "write a file"))
    check(run["status"] == "completed", "run %r", run)
    d = call(server, "exec.diff", {"session_id": sid})
    check(d.get("base") == "session", "after a run: against the session's baseline: %r", d.get("base"))
    files = {f["path"]: f for f in d["files"]}
    check(sorted(files) == ["agent.txt"], "the session changed agent.txt only: %r", sorted(files))
    check(files["agent.txt"]["status"] == "added", "agent.txt %r", files["agent.txt"])

    # a second run edits the file the person had edited: only its own line shows
    run = wait_run(server, prompt(server, sid, "edit notes"))
    check(run["status"] == "completed", "run %r", run)
    d = call(server, "exec.diff", {"session_id": sid})
    files = {f["path"]: f for f in d["files"]}
    check(sorted(files) == ["agent.txt", "notes.txt"], "files %r", sorted(files))
    n = files["notes.txt"]
    check(n["additions"] == 1 and n["deletions"] == 0 and "+the agent's line" in n["diff"]
          and "+mine, not the agent's" not in n["diff"], "notes.txt shows the agent's line only: %r", n)
    # the real index is untouched, and the baseline survives a restart
    check(_git(ws, "diff", "--cached", "--name-only") == "", "the real index changed")
    data = server.data
    server.stop()
    server = llm_server(llm, "w", data=data)
    d2 = call(server, "exec.diff", {"session_id": sid})
    check(d2.get("base") == "session" and sorted(f["path"] for f in d2["files"]) == ["agent.txt", "notes.txt"],
          "after a restart: %r", d2)
    # another session on the same folder has its own baseline
    other = new_session(server, ws, approval_policy="yolo")
    d3 = call(server, "exec.diff", {"session_id": other})
    check(d3.get("base") == "head", "a new session has no baseline yet: %r", d3.get("base"))
    server.stop()


def test_a_pruned_baseline_falls_back_to_head():
    ws = _repo()
    llm = LLM()
    llm.script("w", [_write("c1", "a.txt", "a\n"), {"text": "done"}])
    server = llm_server(llm, "w")
    sid = new_session(server, ws, approval_policy="yolo")
    wait_run(server, prompt(server, sid, "write"))
    path = _git(ws, "rev-parse", "--git-path", "switchboard/base-" + sid).strip()
    path = path if path.startswith("/") else os.path.join(ws, path)
    check(os.path.exists(path), "no baseline file at %s", path)
    with open(path, "w") as f:
        f.write("0" * 40 + "\n")           # a tree a gc has pruned
    d = call(server, "exec.diff", {"session_id": sid})
    check(d.get("base") == "head" and [f["path"] for f in d["files"]] == ["a.txt"], "fallback: %r", d)
    with open(path, "w") as f:
        f.write("../../etc/passwd\n")      # not a tree id at all
    d = call(server, "exec.diff", {"session_id": sid})
    check(d.get("base") == "head", "a malformed baseline is ignored: %r", d)
    server.stop()


run_tests(globals())
