#!/usr/bin/python3
"""Run limits and cancel (issue 5), in the real server with a scripted model:

  - max_steps: a model that keeps calling tools, with max_steps 2, ends
    `failed` with a reason naming max_steps, after exactly 2 model calls
    (through run.request limits and through `switchboard run --max-steps`);
  - timeout_s and max_output_tokens end the run `failed`, naming the limit;
  - `switchboard cancel RUN` during `sleep 600` reaches `cancelled` within
    1 s (measured from the command's start), and no process of the tool is
    left: not the shell, not its background sleep, nothing with its cwd in
    the workspace;
  - cancel during a model stream that hangs also reaches `cancelled` in 1 s.
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import SB_BIN, Server, TestFailure, check, run_tests, sb, tmpdir, wait_for  # noqa: E402
from sbagent import (LLM, LLM_ENV, call, kinds, llm_args, llm_server, new_session, pid_gone, prompt,  # noqa: E402
                     results, tape, wait_run)


def procs_in(workspace):
    """Pids of processes whose cwd is inside `workspace`."""
    real = os.path.realpath(workspace)
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cwd = os.readlink("/proc/%s/cwd" % pid)
        except OSError:
            continue
        if cwd == real or cwd.startswith(real + "/"):
            out.append(int(pid))
    return out


def describe(pids):
    """`pid state ppid name` of each live pid, for failure messages."""
    out = []
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                st = f.read()
            name = st[st.index("(") + 1:st.rindex(")")]
            state, ppid = st[st.rindex(")") + 2:].split()[:2]
            out.append("%d %s ppid %s %s" % (pid, state, ppid, name))
        except OSError:
            pass
    return "; ".join(out) or "none"


def read_pid(path):
    try:
        with open(path) as f:
            s = f.read().strip()
        return int(s) if s else None
    except (OSError, ValueError):
        return None


def cancel_steps(server, sid, wall0):
    """Where a cancel's time went, from the tape's timestamps (ms of wall
    clock since the test started `switchboard cancel`): when the run was
    marked cancelling and when cancelled. What is left of the measured
    time is the command's start, the reply and the test's polling."""
    marks = ["%s at +%d ms" % (e["body"]["status"], e["ts"] - wall0 * 1000) for e in tape(server, sid)
             if e["kind"] == "run.status" and e["body"]["status"] in ("cancelling", "cancelled")]
    return ", ".join(marks) or "no cancelling/cancelled entry"


def test_max_steps_fails_the_run_naming_the_limit():
    llm = LLM()
    looping = {"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]}
    llm.script("loop", [looping], repeat_last=True)
    server = llm_server(llm, "loop")
    sid = new_session(server, tmpdir(), approval_policy="yolo")
    run = wait_run(server, prompt(server, sid, "loop forever", limits={"max_steps": 2}))
    check(run["status"] == "failed" and "max_steps" in run.get("reason", ""), "run %r", run)
    check(run["steps"] == 2, "steps %r", run["steps"])
    check(len(llm.requests("loop")) == 2, "%d model calls with max_steps 2", len(llm.requests("loop")))
    entries = tape(server, sid)
    last = entries[-1]
    check(last["kind"] == "run.status" and last["body"]["status"] == "failed"
          and "max_steps" in last["body"].get("reason", ""), "last tape entry %r", last)
    check(kinds(entries).count("tool.result") == 2, "tool results %r", kinds(entries))
    server.stop()

    # the one-shot: --max-steps, exit 1, the summary names the limit
    llm.script("loop", [looping], repeat_last=True)
    rc, out, err = sb("run", "--goal", "loop", "--ephemeral", "--repo", tmpdir(), "--approval", "yolo", "--max-steps", "2",
                      *llm_args(llm, "loop"), timeout=60, env=LLM_ENV)
    last = out.strip().splitlines()[-1] if out.strip() else ""
    check(rc == 1 and "failed" in last and "max_steps" in last, "run --max-steps 2: %d %r %s", rc, last, err)


def test_timeout_s_and_max_output_tokens_fail_naming_the_limit():
    llm = LLM()
    llm.script("slow", [{"tool_calls": [{"name": "shell", "arguments": {"command": "sleep 30"}}]},
                        {"text": "never asked"}])
    llm.script("wordy", [{"tool_calls": [{"name": "list_dir", "arguments": {}}],
                          "usage": {"input_tokens": 10, "output_tokens": 100}},
                         {"text": "never asked"}])
    server = llm_server(llm, "slow")
    ws = tmpdir()
    sid = new_session(server, ws, approval_policy="yolo")
    t0 = time.monotonic()
    run = wait_run(server, prompt(server, sid, "slow", limits={"timeout_s": 1}))
    took = time.monotonic() - t0
    check(run["status"] == "failed" and "timeout_s" in run.get("reason", ""), "run %r", run)
    check(took < 5, "a 1 s run timeout took %.1f s", took)
    check(len(llm.requests("slow")) == 1, "the model was asked again after the timeout")
    wait_for(lambda: not procs_in(ws), 5, "the timed-out sleep to be gone")
    server.stop()

    server = llm_server(llm, "wordy")
    sid = new_session(server, tmpdir(), approval_policy="yolo")
    run = wait_run(server, prompt(server, sid, "wordy", limits={"max_output_tokens": 50}))
    check(run["status"] == "failed" and "max_output_tokens" in run.get("reason", ""), "run %r", run)
    check(len(llm.requests("wordy")) == 1, "the model was asked again past max_output_tokens")
    first = llm.requests("wordy")[0]["json"]
    check(first.get("max_output_tokens") == 50, "the limit was not passed to the provider: %r",
          {k: v for k, v in first.items() if k != "input"})
    server.stop()


def test_cancel_during_sleep_600_within_1s_no_orphan():
    cmd = "echo $$ > sh.pid; sleep 600 & echo $! > bg.pid; sleep 600"
    llm = LLM()
    llm.script("sleepy", [{"tool_calls": [{"name": "shell", "arguments": {"command": cmd},
                                           "call_id": "c_sleep"}]}])
    ws = tmpdir()
    # unsandboxed: the check reads the host pids the command writes, which
    # the sandbox's PID namespace renumbers (test_sandbox.py cancels in the box)
    server = Server(args=llm_args(llm, "sleepy") + ["--sandbox", "none"], env=LLM_ENV).start()
    sid = new_session(server, ws, approval_policy="yolo")
    run_id = prompt(server, sid, "sleep")
    pids = []
    try:
        # bg.pid is written before the shell forks its foreground sleep:
        # wait for all three processes, not just the two pid files
        wait_for(lambda: read_pid(os.path.join(ws, "sh.pid")) and read_pid(os.path.join(ws, "bg.pid"))
                 and len(procs_in(ws)) >= 3, 10, "the tool to start its sleeps")
        pids = [read_pid(os.path.join(ws, "sh.pid")), read_pid(os.path.join(ws, "bg.pid"))]
        check(all(not pid_gone(p) for p in pids) and len(procs_in(ws)) >= 3,
              "the sleeps are not running: %r %r", pids, procs_in(ws))
        t0, wall0 = time.monotonic(), time.time()
        p = subprocess.Popen([SB_BIN, "cancel", run_id, "--data", server.data],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        run = wait_run(server, run_id, ("cancelled", "failed", "completed"), timeout=10)
        took = time.monotonic() - t0
        out, err = p.communicate(timeout=10)
        check(p.returncode == 0 and b"cancel" in out, "switchboard cancel: %d %r %r", p.returncode, out, err)
        check(run["status"] == "cancelled", "run %r", run)
        print("  cancel -> cancelled in %.0f ms (target 1000): %s" % (took * 1000, cancel_steps(server, sid, wall0)))
        check(took < 1.0, "cancel took %.3f s (target < 1 s): %s", took, cancel_steps(server, sid, wall0))
        try:
            wait_for(lambda: all(pid_gone(x) for x in pids) and not procs_in(ws), 2,
                     "no process of the cancelled tool to be left")
        except TestFailure as e:
            raise TestFailure("%s: %s" % (e, describe(pids + procs_in(ws))))
        entries = tape(server, sid)
        statuses = [e["body"]["status"] for e in entries if e["kind"] == "run.status"]
        check(statuses[-2:] == ["cancelling", "cancelled"], "statuses %r", statuses)
        r = results(entries).get("c_sleep")
        check(r is not None and r["ok"] is False, "the cancelled call's result: %r", r)
        check(kinds(entries)[-2] == "turn.end", "tape end %r", kinds(entries)[-3:])
        # a cancelled run can be cancelled no more; the session is free again
        m = server.control().request("run.cancel", {"run_id": run_id})
        check(m.code == "conflict", "second cancel answered %r", m)
        check(call(server, "session.get", {"session_id": sid})["session"]["turn_status"] != "running",
              "the session still looks busy")
        server.stop()
    finally:
        for x in pids + procs_in(ws):
            try:
                os.kill(x, 9)
            except OSError:
                pass


def test_cancel_during_a_hanging_model_stream_within_1s():
    llm = LLM()
    llm.script("hang", [{"text": "this stream never ends", "variant": "silent"}])
    server = llm_server(llm, "hang")
    sid = new_session(server, tmpdir(), approval_policy="yolo")
    run_id = prompt(server, sid, "talk")
    wait_for(lambda: llm.requests("hang"), 10, "the model request")
    # the stream has begun: wait for its first chunk to be on the tape or
    # the executor to be inside the stream
    t0, wall0 = time.monotonic(), time.time()
    rc, out, err = sb("cancel", run_id, "--data", server.data)
    check(rc == 0, "cancel: %d %s", rc, err)
    run = wait_run(server, run_id, ("cancelled", "failed", "completed"), timeout=10)
    took = time.monotonic() - t0
    check(run["status"] == "cancelled", "run %r", run)
    print("  cancel of a hanging stream -> cancelled in %.0f ms: %s" % (took * 1000, cancel_steps(server, sid, wall0)))
    check(took < 1.0, "cancel took %.3f s (target < 1 s): %s", took, cancel_steps(server, sid, wall0))
    server.stop()


if __name__ == "__main__":
    run_tests(globals())
