#!/usr/bin/python3
"""The changes panel's exec.diff (docs/gateway.md) states its base, takes
the one asked for, and lists a file the agent wrote even when it shows no
change (it had been deleted outside switchboard and was written back).

(Found by trying switchboard: each test fails on the code before its fix.)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import check, run_tests, tmpdir  # noqa: E402
from sbagent import LLM, call, calls, llm_server, new_session, prompt, wait_run  # noqa: E402


def test_the_changes_of_a_session_state_their_base_and_never_hide_a_write():
    import subprocess

    def git(*args):
        subprocess.run(["git", "-C", ws] + list(args), check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    ws = tmpdir()
    git("init", "-q")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    with open(os.path.join(ws, "f.txt"), "w") as f:
        f.write("x\n")
    git("add", ".")
    git("commit", "-qm", "init")
    llm = LLM()
    llm.script("ch", [calls(("c1", "write_file", {"path": "other.txt", "content": "new\n"})), {"text": "one"},
                      calls(("c2", "write_file", {"path": "./f.txt", "content": "x\n"})), {"text": "two"}])
    srv = llm_server(llm, "ch")
    try:
        sid = new_session(srv, ws, approval_policy="yolo")
        d = call(srv, "exec.diff", {"session_id": sid, "base": "session"})
        check(d["base"] == "head" and d["session_base"] is False and d["written"] == [],
              "before any run, asked for the session's base: %r", d)
        check(wait_run(srv, prompt(srv, sid, "one"))["status"] == "completed", "run one")
        os.unlink(os.path.join(ws, "f.txt"))           # a person deletes it outside switchboard
        check(wait_run(srv, prompt(srv, sid, "two"))["status"] == "completed", "run two")
        d = call(srv, "exec.diff", {"session_id": sid})
        paths = sorted(f["path"] for f in d["files"])
        check(d["base"] == "session" and d["session_base"] is True and paths == ["other.txt"],
              "against the session's base: %r", {k: d[k] for k in ("base", "session_base", "written")})
        check(d["written"] == ["f.txt"], "the agent's write of f.txt is hidden: %r", d["written"])
        h = call(srv, "exec.diff", {"session_id": sid, "base": "head"})
        check(h["base"] == "head" and h["session_base"] is True and h["written"] == ["f.txt"]
              and sorted(f["path"] for f in h["files"]) == ["other.txt"], "against HEAD: %r", h)
    finally:
        srv.stop()
        llm.stop()


if __name__ == "__main__":
    run_tests(globals())
