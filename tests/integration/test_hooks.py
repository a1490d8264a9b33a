#!/usr/bin/python3
"""Hooks (issue 16): the person's commands run on session events.

  - session.created, run.finished, run.failed and approval.requested each
    run their hook with the event's JSON on stdin and SWITCHBOARD_EVENT
    set; a completed run fires run.finished only, a failed one both;
  - the hook's environment is the minimal one of tools: no provider key;
  - a hung hook is killed at its timeout, with what it started, and counted
    (hooks.stats); a failing one is counted, never fatal;
  - a slow hook delays nothing: the session and its run go on at once;
  - a bad hooks file stops serve with a clear message.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Server, check, run_tests, tmpdir, wait_for  # noqa: E402
from sbagent import (LLM, LLM_ENV, RECORD, call, hooks_file, llm_args, new_session, pid_gone, prompt,  # noqa: E402
                     recorded, wait_run)

def procs_with_env(var):
    """Host pids of live processes whose environment holds `var` (NAME=VALUE).
    A hook runs in the sandbox's PID namespace: the pids it prints are not
    the host's, so its processes are found by their environment."""
    want = var.encode()
    found = []
    for p in os.listdir("/proc"):
        try:
            with open("/proc/%s/environ" % p, "rb") as f:
                if p.isdigit() and want in f.read().split(b"\0"):
                    found.append(int(p))
        except OSError:
            pass
    return found


def read_pid(path):
    """The pid in `path`, or None while it is missing or not yet written."""
    try:
        with open(path) as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def stats(server):
    return call(server, "hooks.stats", {})


def test_hooks_run_with_the_event_json_and_a_minimal_env():
    out = tmpdir()
    # OUT is writable in the hook's sandbox (docs/sandbox.md)
    rec = {"command": RECORD, "timeout_s": 10, "env": {"OUT": out}, "writable": [out]}
    path = hooks_file({e: [rec] for e in ("session.created", "run.finished", "run.failed", "approval.requested")})
    llm = LLM()
    llm.script("hooks1", [{"text": "done"}, {"status": 400}])
    server = Server(args=llm_args(llm, "hooks1") + ["--hooks", path], env=LLM_ENV).start()
    ws = tmpdir()
    sid = new_session(server, ws, approval_policy="yolo")
    r1 = prompt(server, sid, "one")
    check(wait_run(server, r1)["status"] == "completed", "first run")
    r2 = prompt(server, sid, "two")
    check(wait_run(server, r2)["status"] == "failed", "second run should fail")
    # an approval asked of the interact actor, as an executor asks it
    ia = call(server, "interact.request", {"session_id": sid, "run_id": r2, "call_id": "c1", "tool": "shell",
                                           "arguments": "{\"command\":\"make\"}", "summary": "make"})
    check(ia["interaction_id"].startswith("ia_"), "interact.request: %r", ia)
    wait_for(lambda: len(recorded(out, "run.finished")) == 2 and len(recorded(out, "approval.requested")) == 1
             and len(recorded(out, "session.created")) == 1 and len(recorded(out, "run.failed")) == 1,
             10, "every hook to run")
    created = recorded(out, "session.created")[0][0]
    check(created["event"] == "session.created" and created["session_id"] == sid
          and created["body"]["session"]["workspace"] == os.path.realpath(ws), "session.created: %r", created)
    finished = sorted((e for e, _ in recorded(out, "run.finished")), key=lambda e: e["seq"])
    check([e["body"]["status"] for e in finished] == ["completed", "failed"]
          and [e["run_id"] for e in finished] == [r1, r2], "run.finished: %r", finished)
    failed = recorded(out, "run.failed")[0][0]
    check(failed["run_id"] == r2 and failed["kind"] == "run.status" and failed["body"]["status"] == "failed",
          "run.failed: %r", failed)
    appr, env = recorded(out, "approval.requested")[0]
    check(appr["body"]["tool"] == "shell" and appr["body"]["summary"] == "make" and appr["run_id"] == r2
          and appr["body"]["interaction_id"] == ia["interaction_id"], "approval.requested: %r", appr)
    check("SWITCHBOARD_EVENT=approval.requested" in env and "SWITCHBOARD_SESSION_ID=" + sid in env,
          "the hook's env lacks the event: %s", env)
    for _, env in recorded(out, "run.finished") + recorded(out, "approval.requested"):
        check("OPENAI_API_KEY" not in env and "sk-test" not in env, "a provider key reached a hook:\n%s", env)
    wait_for(lambda: stats(server)["ok"] == 5, 5, "the hooks to be counted")
    st = stats(server)
    check(st["hooks"] == 4 and st["fired"] == 5 and st["failed"] == 0, "stats %r", st)
    server.stop()
    llm.stop()


def test_hung_hook_is_killed_at_its_timeout_and_failures_are_counted():
    d = tmpdir()
    hung = {"command": ["/bin/sh", "-c", 'sleep 300 & echo $! > "$D/bg"; echo $$ > "$D/sh"; sleep 301'],
            "timeout_s": 1, "env": {"D": d}, "writable": [d]}
    failing = {"command": ["/bin/sh", "-c", 'echo "broken $HOOK_TOKEN" >&2; exit 3'],
               "env": {"HOOK_TOKEN": "hook-secret-4242"}}
    missing = {"command": ["/nonexistent/hook"]}
    path = hooks_file({"session.created": [hung, failing, missing]})
    server = Server(args=["--hooks", path]).start()
    t0 = time.monotonic()
    sid = new_session(server, tmpdir())
    check(time.monotonic() - t0 < 2, "session.create waited for its hooks")
    # the shell creates each file before echo writes the pid into it:
    # wait for both pids, not for the files
    wait_for(lambda: all(read_pid(os.path.join(d, n)) for n in ("bg", "sh")), 5, "the hung hook to start")
    pids = procs_with_env("D=" + d)
    check(len(pids) >= 2, "the hung hook's processes are not on the host: %r", pids)
    wait_for(lambda: stats(server)["timed_out"] == 1, 5, "the hung hook to be killed")
    wait_for(lambda: all(pid_gone(p) for p in pids) and not procs_with_env("D=" + d), 5,
             "the hook's processes to be gone")
    took = time.monotonic() - t0
    check(took < 5, "killed after %.1f s, its timeout is 1 s", took)
    st = stats(server)
    check(st["failed"] == 3 and st["ok"] == 0 and st["fired"] == 3, "stats %r", st)
    log = server.log()
    check("killed at its timeout" in log and "exit 3" in log and "did not start" in log, "log:\n%s", log)
    check("broken ***" in log and "hook-secret-4242" not in log, "the hook's env secret reached the log:\n%s", log)
    # the server is fine: another session, more hooks
    new_session(server, tmpdir())
    wait_for(lambda: stats(server)["fired"] == 6, 5, "the next hooks")
    server.stop()
    check(sid, "no session")


def test_slow_hook_delays_nothing():
    """The hooks hang until the test lets them go (a file), far past the
    time the session and both runs need: had anything waited for a hook,
    nothing would finish while they hang. No clock is involved, so a slow
    machine cannot fake a delay or hide one."""
    gdir = tmpdir()
    gate = os.path.join(gdir, "go")
    slow = {"command": ["/bin/sh", "-c", 'while [ ! -e "$GATE" ]; do sleep 0.05; done'], "timeout_s": 120,
            "env": {"GATE": gate}, "writable": [gdir]}
    path = hooks_file({"session.created": [slow], "run.finished": [slow]})
    llm = LLM()
    llm.script("hooks3", [{"text": "a"}, {"text": "b"}])
    server = Server(args=llm_args(llm, "hooks3") + ["--hooks", path], env=LLM_ENV).start()
    t0 = time.monotonic()
    sid = new_session(server, tmpdir(), approval_policy="yolo")
    for text in ("one", "two"):
        check(wait_run(server, prompt(server, sid, text))["status"] == "completed", "run")
    took = time.monotonic() - t0
    st = stats(server)
    check(st["running"] >= 1 and st["ok"] == 0 and st["timed_out"] == 0,
          "the runs ended, but not while the hooks hung: %r", st)
    print("  a session and two runs in %.2f s while their hooks hung" % took)
    with open(gate, "w"):
        pass
    wait_for(lambda: stats(server)["ok"] == 3, 10, "the released hooks to finish")
    server.stop()
    llm.stop()


def test_bad_hooks_file_stops_serve():
    path = hooks_file({"run.done": [{"command": ["true"]}]})
    srv = Server(args=["--hooks", path])
    try:
        srv.start(timeout=5)
    except Exception:
        pass
    check(srv.proc.wait(10) not in (None, 0), "serve started with a bad hooks file")
    check("unknown event" in srv.log() and "run.done" in srv.log(), "log:\n%s", srv.log())


if __name__ == "__main__":
    run_tests(globals())
