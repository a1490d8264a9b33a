#!/usr/bin/python3
"""AGENTS.md that a run must not trust (docs/agents.md, "What is read"):

  - an AGENTS.md that is a FIFO (a real one, os.mkfifo) is skipped without
    blocking: the run completes at once with the other files, and the FIFO
    is not among instructions.loaded's paths;
  - the walk up to the project root stops at an ownership boundary, as
    git's safe.directory does: a parent folder owned by another uid (a real
    chown in the test's folder) with its .git and AGENTS.md does not reach
    the model's instructions; nor does a .git of another uid make a root,
    nor is an AGENTS.md of another uid read, in a folder of the
    workspace's owner.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import check, run_tests, skip, tmpdir  # noqa: E402
from sbagent import LLM, loaded, new_session, prompt, serve_agents_md, tape, wait_run, write  # noqa: E402

OTHER_UID = 54321


def run_once(server, llm, script, ws):
    """One run in a session on ws: (its instructions.loaded paths, the
    model's instructions)."""
    sid = new_session(server, ws, approval_policy="yolo")
    run_id = prompt(server, sid, "hello")
    run = wait_run(server, run_id, timeout=20)
    check(run["status"] == "completed", "run %r", run)
    reqs = llm.requests(script)
    ent = loaded(tape(server, sid), run_id)
    paths = ent[0]["body"]["paths"] if ent else []
    return paths, reqs[-1]["json"]["instructions"]


def test_fifo_agents_md_is_skipped_without_blocking():
    root = os.path.realpath(tmpdir())
    os.mkdir(os.path.join(root, ".git"))
    write(os.path.join(root, "AGENTS.md"), "ROOT-RULE: still read\n")
    ws = os.path.join(root, "ws")
    os.mkdir(ws)
    fifo = os.path.join(ws, "AGENTS.md")
    os.mkfifo(fifo)
    llm = LLM()
    llm.script("fifo", [{"text": "ok"}], repeat_last=True)
    server = serve_agents_md(llm, "fifo")
    try:
        paths, ins = run_once(server, llm, "fifo", ws)
        check("ROOT-RULE" in ins, "the root's AGENTS.md is missing: %s", ins[:400])
        check(paths == [os.path.join(root, "AGENTS.md")], "paths %r", paths)
    finally:
        # an executor blocked in open() on the FIFO (the old code) is let go
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
        except OSError:
            pass
        server.stop()
        llm.stop()


def test_walk_stops_at_an_ownership_boundary():
    if os.geteuid() != 0:
        skip("chown to another uid needs root")
    me = os.geteuid()
    # 1. a parent folder of another uid, with its .git and AGENTS.md
    foreign = os.path.realpath(tmpdir())
    os.mkdir(os.path.join(foreign, ".git"))
    write(os.path.join(foreign, "AGENTS.md"), "FOREIGN-RULE: must not be read\n")
    ws1 = os.path.join(foreign, "ws")
    write(os.path.join(ws1, "AGENTS.md"), "WS1-RULE: mine\n")
    for p in (foreign, os.path.join(foreign, ".git"), os.path.join(foreign, "AGENTS.md")):
        os.chown(p, OTHER_UID, OTHER_UID)
    check(os.stat(ws1).st_uid == me, "the workspace is not mine")
    # 2. a folder of mine whose .git is another uid's
    mine = os.path.realpath(tmpdir())
    os.mkdir(os.path.join(mine, ".git"))
    os.chown(os.path.join(mine, ".git"), OTHER_UID, OTHER_UID)
    write(os.path.join(mine, "AGENTS.md"), "PLANTED-GIT-RULE: must not be read\n")
    ws2 = os.path.join(mine, "ws")
    write(os.path.join(ws2, "AGENTS.md"), "WS2-RULE: mine\n")
    # 3. a project of mine with one AGENTS.md of another uid on the way down
    proj = os.path.realpath(tmpdir())
    os.mkdir(os.path.join(proj, ".git"))
    write(os.path.join(proj, "AGENTS.md"), "PROJ-RULE: mine\n")
    write(os.path.join(proj, "sub", "AGENTS.md"), "PLANTED-FILE-RULE: must not be read\n")
    os.chown(os.path.join(proj, "sub", "AGENTS.md"), OTHER_UID, OTHER_UID)
    ws3 = os.path.join(proj, "sub", "ws")
    write(os.path.join(ws3, "AGENTS.md"), "WS3-RULE: mine\n")

    llm = LLM()
    llm.script("own", [{"text": "ok"}], repeat_last=True)
    server = serve_agents_md(llm, "own")
    try:
        paths, ins = run_once(server, llm, "own", ws1)
        check("WS1-RULE" in ins and "FOREIGN-RULE" not in ins, "another uid's parent was read:\n%s", ins)
        check(paths == [os.path.join(ws1, "AGENTS.md")], "paths %r", paths)
        paths, ins = run_once(server, llm, "own", ws2)
        check("WS2-RULE" in ins and "PLANTED-GIT-RULE" not in ins, "another uid's .git made a root:\n%s", ins)
        check(paths == [os.path.join(ws2, "AGENTS.md")], "paths %r", paths)
        paths, ins = run_once(server, llm, "own", ws3)
        check("PROJ-RULE" in ins and "WS3-RULE" in ins and "PLANTED-FILE-RULE" not in ins,
              "another uid's AGENTS.md was read:\n%s", ins)
        check(paths == [os.path.join(proj, "AGENTS.md"), os.path.join(ws3, "AGENTS.md")], "paths %r", paths)
    finally:
        server.stop()
        llm.stop()


if __name__ == "__main__":
    run_tests(globals())
