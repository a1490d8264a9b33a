#!/usr/bin/python3
"""Workspace checkpoints tied to the tape (issue 24, docs/checkpoints.md),
each driven by a scripted model through the real server:

  - a run that writes (write_file), edits (edit_file), deletes and renames
    (the shell) in a git work tree leaves one checkpoint before its first
    step and one after each step that ran a tool that is not read-only;
    each names the paths that step changed, its tree holds what was on
    disk then (untracked files in, ignored files out), the last one equals
    the work tree as `git add -A` stages it, the chain's ref keeps them
    all, and the person's index is untouched;
  - a workspace outside git goes to the shadow repository in DATA;
  - a file over SWITCHBOARD_CHECKPOINT_MAX_FILE is in no tree and the
    entry names it with its size and hash;
  - a worker's run checkpoints its git workspace too (the kind is one a
    worker key may append), its private index in the git dir;
  - `switchboard checkpoints` lists them, as text and as JSON.
"""
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Server, check, cli, run_tests, tmpdir  # noqa: E402
from sbgit import checkpoints, disk_tree, git, git_workspace, names, write  # noqa: E402
from sbagent import (LLM, LLM_ENV, llm_args, new_session, prompt, session_prompt, shell,  # noqa: E402
                     start_worker, tape, tool, wait_run)


def scripted(turns, ws, env=None, script="ckpt"):
    llm = LLM()
    llm.script(script, turns)
    server = Server(args=llm_args(llm, script), env=dict(LLM_ENV, **(env or {}))).start()
    sid = new_session(server, ws, approval_policy="yolo")
    run = wait_run(server, prompt(server, sid, "go"), timeout=30)
    check(run["status"] == "completed", "run %r", run)
    return server, sid, run, tape(server, sid)


def edit_run_turns():
    return [
        {"tool_calls": [tool("write_file", "c_write", path="new.txt", content="one\n")]},
        {"tool_calls": [tool("edit_file", "c_edit", path="a.txt", old="alpha", new="omega")]},
        {"tool_calls": [shell("rm notes.txt && mv new.txt moved.txt", "c_shell")]},
        {"tool_calls": [tool("read_file", "c_read", path="a.txt")]},
        {"text": "done"},
    ]


def test_a_run_in_git_leaves_a_checkpoint_per_changing_step():
    ws = git_workspace()
    index_before = git(ws, "ls-files", "-s")
    server, sid, run, entries = scripted(edit_run_turns(), ws)
    cps = [e for e in entries if e["kind"] == "checkpoint"]
    check(len(cps) == 4, "checkpoints: %r", [c["body"] for c in cps])
    bodies = [c["body"] for c in cps]
    check(bodies[0].get("first") is True and bodies[0]["changed"] == [], "first: %r", bodies[0])
    check(all(b["run_id"] == run["run_id"] and b["store"] == "repository" for b in bodies), "%r", bodies)
    check(bodies[1]["changed"] == ["new.txt"], "after write_file: %r", bodies[1])
    check(bodies[2]["changed"] == ["a.txt"], "after edit_file: %r", bodies[2])
    check(sorted(bodies[3]["changed"]) == ["moved.txt", "new.txt", "notes.txt"], "after the shell: %r", bodies[3])
    check(all(b["files"] == len(b["changed"]) and b["truncated"] is False for b in bodies), "%r", bodies)
    # each checkpoint follows its step's last entry
    by_seq = {e["seq"]: e for e in entries}
    for c in cps:
        check(c["body"]["seq_of"] == c["seq"] - 1, "seq_of %r at seq %d", c["body"]["seq_of"], c["seq"])
    check(by_seq[cps[1]["seq"] - 1]["kind"] == "tool.result", "before the 2nd: %r", by_seq[cps[1]["seq"] - 1])
    # no checkpoint after the read-only step
    read_seq = [e["seq"] for e in entries if e["kind"] == "tool.result" and e["body"]["call_id"] == "c_read"][0]
    check(all(c["seq"] < read_seq for c in cps), "a checkpoint after read_file")

    # the trees hold what was on disk: untracked in, ignored out
    base = [".gitignore", "README.md", "a.txt"]
    check(names(ws, bodies[0]["tree"]) == sorted(base + ["notes.txt"]), "first tree: %r", names(ws, bodies[0]["tree"]))
    check(names(ws, bodies[1]["tree"]) == sorted(base + ["new.txt", "notes.txt"]), "%r", names(ws, bodies[1]["tree"]))
    check(git(ws, "show", bodies[1]["tree"] + ":a.txt") == "alpha\n", "a.txt before the edit")
    check(git(ws, "show", bodies[2]["tree"] + ":a.txt") == "omega\n", "a.txt after the edit")
    check(names(ws, bodies[3]["tree"]) == sorted(base + ["moved.txt"]), "%r", names(ws, bodies[3]["tree"]))
    check(bodies[3]["tree"] == disk_tree(ws), "the last checkpoint is not the work tree")

    # the chain keeps them reachable; the person's index is as it was
    ref = "refs/switchboard/checkpoints/" + sid
    check(git(ws, "rev-parse", ref).strip() == bodies[3]["commit"], "the ref is not the last checkpoint")
    check(git(ws, "rev-list", "--count", ref).strip() == "4", "the chain: %s", git(ws, "log", "--oneline", ref))
    check(git(ws, "ls-files", "-s") == index_before, "the real index changed")
    check(os.path.exists(os.path.join(server.data, "checkpoints", sid + ".index")), "no private index in DATA")
    git(ws, "gc", "-q", "--prune=now")
    check(git(ws, "cat-file", "-t", bodies[0]["tree"]).strip() == "tree", "gc pruned the first checkpoint")

    # the listing
    rc, out, err = cli(server, "checkpoints", sid)
    check(rc == 0, "checkpoints: %d %s", rc, err)
    lines = out.strip().splitlines()
    check(len(lines) == 5 and lines[0].split()[:2] == ["SEQ", "RUN"], "listing: %r", out)
    check(lines[4].split()[0] == str(bodies[3]["seq_of"]) and "3 files" in lines[4] and "moved.txt" in lines[4],
          "last line: %r", lines[4])
    check("(first)" in lines[1], "first line: %r", lines[1])
    rc, out, err = cli(server, "checkpoints", sid, "--json")
    check(rc == 0, "checkpoints --json: %d %s", rc, err)
    rows = [json.loads(x) for x in out.splitlines()]
    check([r["seq"] for r in rows] == [c["seq"] for c in cps], "json seqs: %r", rows)
    check(rows[2]["checkpoint"]["changed"] == ["a.txt"] and rows[2]["ts"] > 0, "json row: %r", rows[2])
    server.stop()


def test_a_second_run_records_the_persons_edits_between_runs():
    ws = git_workspace()
    llm = LLM()
    llm.script("two", [{"tool_calls": [tool("write_file", "c1", path="x.txt", content="x\n")]}, {"text": "a"},
                       {"tool_calls": [tool("read_file", "c2", path="x.txt")]}, {"text": "b"}])
    server = Server(args=llm_args(llm, "two"), env=LLM_ENV).start()
    sid = new_session(server, ws, approval_policy="yolo")
    wait_run(server, prompt(server, sid, "one"), timeout=30)
    write(os.path.join(ws, "mine.txt"), "the person wrote this between runs\n")
    r2 = wait_run(server, prompt(server, sid, "two"), timeout=30)
    cps = checkpoints(tape(server, sid))
    check(len(cps) == 3, "checkpoints: %r", cps)
    check(cps[2]["run_id"] == r2["run_id"] and cps[2]["changed"] == ["mine.txt"], "second run's first: %r", cps[2])
    server.stop()


def test_a_workspace_outside_git_goes_to_the_shadow_repository():
    ws = tmpdir()
    write(os.path.join(ws, "keep.txt"), "kept\n")
    write(os.path.join(ws, ".gitignore"), "*.tmp\n")
    write(os.path.join(ws, "scratch.tmp"), "ignored\n")
    turns = [{"tool_calls": [tool("write_file", "c_w", path="sub/new.txt", content="n\n")]},
             {"tool_calls": [shell("rm keep.txt", "c_rm")]},
             {"text": "done"}]
    server, sid, run, entries = scripted(turns, ws, script="shadow")
    bodies = checkpoints(entries)
    check(len(bodies) == 3, "checkpoints: %r", bodies)
    check(all(b["store"] == "shadow" for b in bodies), "%r", bodies)
    shadow = os.path.join(server.data, "checkpoints", sid + ".git")
    check(os.path.isdir(shadow), "no shadow repository at %s", shadow)
    check(not os.path.exists(os.path.join(ws, ".git")), "a .git appeared in the workspace")
    check(names(ws, bodies[0]["tree"], git_dir=shadow) == [".gitignore", "keep.txt"], "first: %r",
          names(ws, bodies[0]["tree"], git_dir=shadow))
    check(bodies[1]["changed"] == ["sub/new.txt"] and bodies[2]["changed"] == ["keep.txt"], "%r", bodies)
    check(bodies[2]["tree"] == disk_tree(ws, git_dir=shadow), "the last checkpoint is not the work tree")
    server.stop()


def test_a_large_file_is_recorded_by_size_and_hash():
    ws = git_workspace()
    turns = [{"tool_calls": [shell("head -c 10000 /dev/zero > big.bin && echo small > small.txt", "c_big")]},
             {"text": "done"}]
    server, sid, run, entries = scripted(turns, ws, env={"SWITCHBOARD_CHECKPOINT_MAX_FILE": "4096"}, script="big")
    bodies = checkpoints(entries)
    check(len(bodies) == 2, "checkpoints: %r", bodies)
    b = bodies[1]
    blake = hashlib.blake2b(b"\0" * 10000, digest_size=32).hexdigest()
    check(b["skipped"] == [{"path": "big.bin", "size": 10000, "blake2b": blake}] and b["max_file"] == 4096,
          "skipped: %r", b)
    check(b["changed"] == ["small.txt"], "changed: %r", b)
    check("big.bin" not in names(ws, b["tree"]) and "small.txt" in names(ws, b["tree"]), "%r", names(ws, b["tree"]))
    rc, out, err = cli(server, "checkpoints", sid)
    check(rc == 0 and "skipped big.bin (10000 bytes)" in out, "listing: %d %r %s", rc, out, err)
    server.stop()


def test_a_worker_run_checkpoints_its_workspace():
    ws = git_workspace()
    llm = LLM()
    llm.script("wk", edit_run_turns())
    server = Server(args=llm_args(llm, "wk"), env=LLM_ENV).start()
    w = start_worker(server, "wc")
    sid = new_session(server, ws, approval_policy="yolo", target="worker:p")
    run = wait_run(server, session_prompt(server, sid, "go"), timeout=30)
    check(run["status"] == "completed" and run["worker_id"] == "wc", "run: %r\nworker log:\n%s", run, w.log())
    bodies = checkpoints(tape(server, sid))
    check(len(bodies) == 4 and all(b["store"] == "repository" for b in bodies), "checkpoints: %r", bodies)
    check(sorted(bodies[3]["changed"]) == ["moved.txt", "new.txt", "notes.txt"], "after the shell: %r", bodies[3])
    check(bodies[3]["tree"] == disk_tree(ws), "the last checkpoint is not the work tree")
    check(os.path.exists(os.path.join(ws, ".git", "switchboard", "checkpoints-%s.index" % sid)),
          "no private index in the git dir")
    check(git(ws, "rev-parse", "refs/switchboard/checkpoints/" + sid).strip() == bodies[3]["commit"], "the ref")
    w.stop()
    server.stop()


def test_the_listing_cli_help_and_usage():
    server = Server().start()
    rc, out, err = cli(server, "checkpoints", "--help")
    check(rc == 0 and "usage: switchboard checkpoints SESSION" in out, "--help: %d %r", rc, out)
    rc, out, err = cli(server, "checkpoints")
    check(rc == 2, "no session: %d %r", rc, err)
    sid = new_session(server, tmpdir())
    rc, out, err = cli(server, "checkpoints", sid)
    check(rc == 0 and out.strip() == "no checkpoints", "empty: %d %r %s", rc, out, err)
    server.stop()


if __name__ == "__main__":
    run_tests(globals())
