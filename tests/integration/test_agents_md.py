#!/usr/bin/python3
"""AGENTS.md (issue 16): the executor reads the project's AGENTS.md files at
the start of each run and adds them to the model's instructions.

  - nested files: the personal one ($XDG_CONFIG_HOME/switchboard/AGENTS.md)
    first, then the project root's (the folder with .git), then each folder
    down to the workspace, the nearest last; all of them in the model
    request that tests/llm_server.py recorded, in that order, and on the
    tape as instructions.loaded {paths, bytes}; `run-info` shows the paths;
  - a file changed between runs is read again by the next run;
  - a symlinked AGENTS.md that leads out of the project is not followed;
  - the files are capped at 32 KiB in all, with a note where it cut.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import check, cli, run_tests, tmpdir  # noqa: E402
from sbagent import LLM, loaded, new_session, prompt, serve_agents_md, tape, wait_run, write  # noqa: E402

CAP = 32 * 1024


def project():
    """root/.git, root/AGENTS.md, root/sub/AGENTS.md, root/sub/ws/AGENTS.md;
    the workspace is root/sub/ws. Returns (root, workspace)."""
    root = os.path.realpath(tmpdir())
    os.mkdir(os.path.join(root, ".git"))
    write(os.path.join(root, "AGENTS.md"), "ROOT-RULE: run make test\n")
    write(os.path.join(root, "sub", "AGENTS.md"), "SUB-RULE: sub uses tabs\n")
    ws = os.path.join(root, "sub", "ws")
    write(os.path.join(ws, "AGENTS.md"), "WS-RULE: the nearest one\n")
    return root, ws


def test_nested_files_in_order_in_the_request_and_on_the_tape():
    root, ws = project()
    xdg = tmpdir()
    write(os.path.join(xdg, "switchboard", "AGENTS.md"), "PERSONAL-RULE: answer briefly\n")
    llm = LLM()
    llm.script("agents", [{"text": "ok"}])
    server = serve_agents_md(llm, "agents", xdg)
    sid = new_session(server, ws, approval_policy="yolo")
    run_id = prompt(server, sid, "hello")
    run = wait_run(server, run_id)
    check(run["status"] == "completed", "run %r", run)
    reqs = llm.requests("agents")
    check(len(reqs) == 1, "%d model requests", len(reqs))
    ins = reqs[0]["json"]["instructions"]
    marks = ["PERSONAL-RULE", "ROOT-RULE", "SUB-RULE", "WS-RULE"]
    pos = [ins.find(m) for m in marks]
    check(all(p >= 0 for p in pos), "instructions miss a file: %r\n%s", pos, ins)
    check(pos == sorted(pos), "files not in order personal, root, sub, ws: %r", pos)
    check(ins.find("coding agent") < pos[0], "AGENTS.md comes before the base instructions")
    want = [os.path.join(xdg, "switchboard", "AGENTS.md"), os.path.join(root, "AGENTS.md"),
            os.path.join(root, "sub", "AGENTS.md"), os.path.join(ws, "AGENTS.md")]
    ent = loaded(tape(server, sid), run_id)
    check(len(ent) == 1, "instructions.loaded entries: %r", ent)
    body = ent[0]["body"]
    check(body["paths"] == want, "paths %r, want %r", body["paths"], want)
    check(0 < body["bytes"] <= CAP and not body.get("truncated"), "body %r", body)
    # run-info shows the paths
    rc, out, err = cli(server, "run-info", run_id)
    check(rc == 0, "run-info exited %d: %s", rc, err)
    for p in want:
        check(p in out, "run-info does not show %s:\n%s", p, out)
    server.stop()
    llm.stop()


def test_changed_file_is_read_again_and_symlink_out_not_followed():
    root, ws = project()
    secret_dir = tmpdir()
    write(os.path.join(secret_dir, "AGENTS.md"), "SECRET-OUTSIDE: must never be read\n")
    os.remove(os.path.join(ws, "AGENTS.md"))
    os.symlink(os.path.join(secret_dir, "AGENTS.md"), os.path.join(ws, "AGENTS.md"))
    # a folder symlink that leads out of the project, on the way down
    llm = LLM()
    llm.script("agents2", [{"text": "one"}, {"text": "two"}])
    server = serve_agents_md(llm, "agents2")
    sid = new_session(server, ws, approval_policy="yolo")
    r1 = prompt(server, sid, "first")
    check(wait_run(server, r1)["status"] == "completed", "first run failed")
    write(os.path.join(root, "AGENTS.md"), "ROOT-RULE-V2: changed between runs\n")
    r2 = prompt(server, sid, "second")
    check(wait_run(server, r2)["status"] == "completed", "second run failed")
    reqs = llm.requests("agents2")
    check(len(reqs) == 2, "%d model requests", len(reqs))
    i1, i2 = reqs[0]["json"]["instructions"], reqs[1]["json"]["instructions"]
    check("ROOT-RULE: run make test" in i1 and "V2" not in i1, "first run: %s", i1)
    check("ROOT-RULE-V2" in i2 and "run make test" not in i2, "the changed file was not re-read: %s", i2)
    for i in (i1, i2):
        check("SECRET-OUTSIDE" not in i, "a symlink out of the project was followed:\n%s", i)
    entries = tape(server, sid)
    for rid in (r1, r2):
        ent = loaded(entries, rid)
        check(len(ent) == 1, "run %s: %r", rid, ent)
        check(all(not p.startswith(secret_dir) for p in ent[0]["body"]["paths"]) and
              os.path.join(ws, "AGENTS.md") not in ent[0]["body"]["paths"],
              "the symlink is listed: %r", ent[0]["body"]["paths"])
    server.stop()
    llm.stop()


def test_cap_cuts_with_a_note():
    root, ws = project()
    # 40 KiB in the root file alone: the nearer files are past the cap
    write(os.path.join(root, "AGENTS.md"), "BIG-START\n" + ("x" * 63 + "\n") * 640 + "BIG-END\n")
    llm = LLM()
    llm.script("agents3", [{"text": "ok"}])
    server = serve_agents_md(llm, "agents3")
    sid = new_session(server, ws, approval_policy="yolo")
    run_id = prompt(server, sid, "go")
    check(wait_run(server, run_id)["status"] == "completed", "run failed")
    ins = llm.requests("agents3")[0]["json"]["instructions"]
    check("BIG-START" in ins and "BIG-END" not in ins, "the cap did not cut the big file")
    check("cut at 32 KiB" in ins, "no note where it cut: ...%s", ins[-300:])
    ent = loaded(tape(server, sid), run_id)
    check(len(ent) == 1, "entries %r", ent)
    body = ent[0]["body"]
    check(body.get("truncated") is True, "truncated not recorded: %r", body)
    check(CAP <= body["bytes"] <= CAP + 200, "bytes %d not at the cap", body["bytes"])
    server.stop()
    llm.stop()


def test_no_agents_md_no_entry():
    ws = tmpdir()
    llm = LLM()
    llm.script("agents4", [{"text": "ok"}])
    server = serve_agents_md(llm, "agents4")
    sid = new_session(server, ws, approval_policy="yolo")
    run_id = prompt(server, sid, "go")
    check(wait_run(server, run_id)["status"] == "completed", "run failed")
    check(loaded(tape(server, sid), run_id) == [], "an entry without any file")
    check("AGENTS.md" not in llm.requests("agents4")[0]["json"]["instructions"], "instructions mention AGENTS.md")
    server.stop()
    llm.stop()


if __name__ == "__main__":
    run_tests(globals())
