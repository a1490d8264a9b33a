#!/usr/bin/python3
"""The diff between two checkpoints of a session (exec.checkpoint_diff,
docs/checkpoints.md) and their list (exec.checkpoints), through the real
server and a scripted model:

  - after a run that wrote (write_file), edited (edit_file) and renamed
    and deleted (the shell) in a git work tree, the diff between its
    first and its last checkpoint is git's own diff of the two trees
    (each file's status, counts and unified diff), from the bus, from
    `switchboard checkpoints SESSION --diff A B` (text, --stat, --json)
    and from GET /api/sessions/{id}/checkpoint_diff?from=A&to=B; a seq
    between checkpoints takes the latest at or before it; the reverse
    direction is the reverse diff;
  - a workspace outside git is compared in its shadow repository;
  - a seq before the first checkpoint is invalid, naming the first; a
    tree no longer in the store is not_found; a session without
    checkpoints is not_found; the CLI's usage errors;
  - exec.checkpoints lists the checkpoint entries as the tape holds them,
    in pages (limit, after_seq, more, next_after), over the bus and GET
    /api/sessions/{id}/checkpoints.
"""
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Server, check, cli, rest, run_tests, tmpdir  # noqa: E402
from sbgit import git, git_workspace, write  # noqa: E402
from sbagent import LLM, LLM_ENV, llm_args, new_session, prompt, shell, tape, tool, wait_run  # noqa: E402


def checkpoints(server, sid):
    return [e["body"] for e in tape(server, sid) if e["kind"] == "checkpoint"]


def scripted(turns, ws, script):
    llm = LLM()
    llm.script(script, turns)
    server = Server(args=llm_args(llm, script), env=LLM_ENV).start()
    sid = new_session(server, ws, approval_policy="yolo")
    run = wait_run(server, prompt(server, sid, "go"), timeout=30)
    check(run["status"] == "completed", "run %r", run)
    return server, sid


def diff_call(server, sid, a, b):
    m = server.control().request("exec.checkpoint_diff", {"session_id": sid, "from_seq": a, "to_seq": b},
                                 timeout=20)
    return m.type, m.body


TURNS = [
    {"tool_calls": [tool("write_file", "c_write", path="new.txt", content="one\ntwo\n")]},
    {"tool_calls": [tool("edit_file", "c_edit", path="a.txt", old="alpha", new="omega")]},
    {"tool_calls": [shell("rm notes.txt && mv new.txt moved.txt", "c_shell")]},
    {"text": "done"},
]


def test_the_diff_between_two_checkpoints_in_git():
    ws = git_workspace()
    server, sid = scripted(TURNS, ws, "cd")
    cps = checkpoints(server, sid)
    check(len(cps) == 4, "checkpoints: %r", cps)
    first, last = cps[0], cps[-1]

    kind, body = diff_call(server, sid, first["seq_of"], last["seq_of"])
    check(kind == "exec.checkpoint_diff.ok", "%s %r", kind, body)
    check(body["from"] == {"seq_of": first["seq_of"], "tree": first["tree"]}, "from: %r", body["from"])
    check(body["to"] == {"seq_of": last["seq_of"], "tree": last["tree"]}, "to: %r", body["to"])
    check(body["store"] == "repository" and body["truncated"] is False, "%r", body)
    files = {f["path"]: f for f in body["files"]}
    check(sorted(files) == ["a.txt", "moved.txt", "notes.txt"], "files: %r", body["files"])
    check(files["a.txt"]["status"] == "modified" and files["a.txt"]["additions"] == 1
          and files["a.txt"]["deletions"] == 1, "a.txt: %r", files["a.txt"])
    check("-alpha\n+omega\n" in files["a.txt"]["diff"], "a.txt diff: %r", files["a.txt"]["diff"])
    check(files["moved.txt"]["status"] == "added" and "+one\n+two\n" in files["moved.txt"]["diff"], "%r",
          files["moved.txt"])
    check(files["notes.txt"]["status"] == "deleted" and files["notes.txt"]["deletions"] == 1, "%r",
          files["notes.txt"])
    # git's own diff of the two trees, file by file
    want = git(ws, "diff", "--no-color", "-M", first["tree"], last["tree"])
    check("".join(f["diff"] for f in body["files"]) == want + ("\n" if not want.endswith("\n") else ""),
          "not git's diff:\n%s\n---\n%s", "".join(f["diff"] for f in body["files"]), want)

    # the second checkpoint (after the write) against the third (after
    # the edit): a seq between checkpoints takes the latest at or before
    kind, body = diff_call(server, sid, cps[1]["seq_of"] + 1, cps[2]["seq_of"])
    check(kind == "exec.checkpoint_diff.ok", "%s %r", kind, body)
    check(body["from"]["seq_of"] == cps[1]["seq_of"], "from: %r", body["from"])
    check([f["path"] for f in body["files"]] == ["a.txt"], "between: %r", body["files"])
    # the other way round: the reverse diff, and the rename seen as one
    kind, body = diff_call(server, sid, last["seq_of"], cps[1]["seq_of"])
    rev = {f["path"]: f for f in body["files"]}
    check(rev["a.txt"]["diff"].find("-omega\n+alpha\n") > 0, "reverse: %r", rev["a.txt"])
    check(rev["new.txt"]["status"] == "renamed" and rev["new.txt"]["old_path"] == "moved.txt", "%r", rev)

    # the CLI: the diff, --stat, --json
    rc, out, err = cli(server, "checkpoints", sid, "--diff", str(first["seq_of"]), str(last["seq_of"]))
    check(rc == 0, "--diff: %d %s %s", rc, out, err)
    check(out.startswith("checkpoint %d -> %d (repository): 3 files\n" % (first["seq_of"], last["seq_of"])),
          "head line: %r", out)
    check("-alpha\n+omega\n" in out and "diff --git a/notes.txt b/notes.txt" in out, "text: %r", out)
    rc, out, err = cli(server, "checkpoints", sid, "--diff", str(first["seq_of"]), str(last["seq_of"]), "--stat")
    check(rc == 0 and out.splitlines()[1:] == ["M +1 -1 a.txt", "A +2 -0 moved.txt", "D +0 -1 notes.txt"],
          "--stat: %d %r %s", rc, out, err)
    rc, out, err = cli(server, "checkpoints", sid, "--diff", str(first["seq_of"]), str(last["seq_of"]), "--json")
    check(rc == 0 and [f["path"] for f in json.loads(out)["files"]] == ["a.txt", "moved.txt", "notes.txt"],
          "--json: %d %r %s", rc, out, err)

    # REST
    status, answer = rest(server, "GET", "/api/sessions/%s/checkpoint_diff?from=%d&to=%d"
                          % (sid, first["seq_of"], last["seq_of"]))
    check(status == 200 and [f["path"] for f in answer["files"]] == ["a.txt", "moved.txt", "notes.txt"],
          "REST: %d %r", status, answer)
    status, answer = rest(server, "GET", "/api/sessions/%s/checkpoint_diff?from=1&to=%d" % (sid, last["seq_of"]))
    check(status == 400 and answer["error"]["code"] == "invalid", "REST before the first: %d %r", status, answer)

    # a seq before the first checkpoint names the first valid one
    kind, body = diff_call(server, sid, 1, last["seq_of"])
    check(kind == "error" and body["code"] == "invalid"
          and "the first valid seq is %d" % first["seq_of"] in body["message"], "%s %r", kind, body)
    rc, out, err = cli(server, "checkpoints", sid, "--diff", "1", str(last["seq_of"]))
    check(rc == 1 and "the first valid seq is %d" % first["seq_of"] in err, "CLI before the first: %d %r", rc, err)
    server.stop()


def test_the_diff_in_a_shadow_repository_and_a_tree_gone():
    ws = tmpdir()
    write(os.path.join(ws, "keep.txt"), "keep\n")
    turns = [{"tool_calls": [tool("write_file", "c_w", path="keep.txt", content="kept\n")]}, {"text": "ok"}]
    server, sid = scripted(turns, ws, "cds")
    cps = checkpoints(server, sid)
    check(len(cps) == 2 and cps[0]["store"] == "shadow", "checkpoints: %r", cps)
    kind, body = diff_call(server, sid, cps[0]["seq_of"], cps[1]["seq_of"])
    check(kind == "exec.checkpoint_diff.ok" and body["store"] == "shadow", "%s %r", kind, body)
    check([(f["path"], f["status"]) for f in body["files"]] == [("keep.txt", "modified")], "%r", body["files"])
    check("-keep\n+kept\n" in body["files"][0]["diff"], "%r", body["files"][0])
    check(not os.path.exists(os.path.join(ws, ".git")), "the workspace got a .git")

    # the shadow repository gone: the trees are not found, and said so
    shutil.rmtree(os.path.join(server.data, "checkpoints", sid + ".git"))
    kind, body = diff_call(server, sid, cps[0]["seq_of"], cps[1]["seq_of"])
    check(kind == "error" and body["code"] == "not_found" and cps[0]["tree"] in body["message"], "%s %r", kind, body)
    server.stop()


def test_the_list_of_checkpoints_in_pages():
    ws = git_workspace()
    server, sid = scripted(TURNS, ws, "cl")
    entries = [e for e in tape(server, sid) if e["kind"] == "checkpoint"]
    check(len(entries) == 4, "checkpoints: %r", entries)
    want = [{"seq": e["seq"], "ts": e["ts"], "run_id": e["run_id"], "checkpoint": e["body"]} for e in entries]
    m = server.control().request("exec.checkpoints", {"session_id": sid}, timeout=20)
    check(m.type == "exec.checkpoints.ok" and m.body["checkpoints"] == want and m.body["more"] is False,
          "all: %s %r", m.type, m.body)
    # pages of three: the next one starts after next_after
    m = server.control().request("exec.checkpoints", {"session_id": sid, "limit": 3}, timeout=20)
    check(m.body["checkpoints"] == want[:3] and m.body["more"] is True and m.body["next_after"] == want[2]["seq"],
          "page 1: %r", m.body)
    m = server.control().request("exec.checkpoints", {"session_id": sid, "limit": 3,
                                                      "after_seq": m.body["next_after"]}, timeout=20)
    check(m.body["checkpoints"] == want[3:] and m.body["more"] is False, "page 2: %r", m.body)
    status, answer = rest(server, "GET", "/api/sessions/%s/checkpoints?after=%d" % (sid, want[0]["seq"]))
    check(status == 200 and answer["checkpoints"] == want[1:], "REST: %d %r", status, answer)
    for bad in ({"session_id": sid, "limit": 0}, {"session_id": sid, "limit": 1001}, {"session_id": sid, "after_seq": -1}):
        m = server.control().request("exec.checkpoints", bad, timeout=20)
        check(m.type == "error" and m.body["code"] == "invalid", "%r: %s %r", bad, m.type, m.body)
    m = server.control().request("exec.checkpoints", {"session_id": "01JZZZZZZZZZZZZZZZZZZZZZZZ"}, timeout=20)
    check(m.type == "error" and m.body["code"] == "not_found", "unknown session: %s %r", m.type, m.body)
    server.stop()


def test_no_checkpoints_and_usage():
    server = Server().start()
    sid = new_session(server, tmpdir())
    kind, body = diff_call(server, sid, 1, 2)
    check(kind == "error" and body["code"] == "not_found" and "no checkpoint" in body["message"], "%s %r", kind, body)
    kind, body = diff_call(server, "01JZZZZZZZZZZZZZZZZZZZZZZZ", 1, 2)
    check(kind == "error" and body["code"] == "not_found", "unknown session: %s %r", kind, body)
    rc, out, err = cli(server, "checkpoints", "--help")
    check(rc == 0 and "--diff A B" in out, "--help: %r", out)
    for args in (["--diff", "1"], ["--diff", "x", "2"], ["--stat"], ["--diff", "1", "2", "3"]):
        rc, out, err = cli(server, "checkpoints", sid, *args)
        check(rc == 2, "%r: %d %r", args, rc, err)
    server.stop()


if __name__ == "__main__":
    run_tests(globals())
