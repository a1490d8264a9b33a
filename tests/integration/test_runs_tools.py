#!/usr/bin/python3
"""Tools inside the real server (issue 5), each driven by a scripted model:

  - confinement: read_file of ../../etc/passwd, of /etc/passwd and of a
    symlink in the workspace that points outside are refused with a clear
    tool error; the run goes on and completes;
  - descriptors: `ls /proc/self/fd` run by the shell tool lists only 0 1 2
    and the one ls opened, while the server holds LMDB and sockets; the
    shell's environment does not carry the provider key;
  - shell timeout kills the whole process group, background children and a
    setsid grandchild included: no orphan is left;
  - output over the 64 KiB cap is truncated, with its size noted.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Server, check, run_tests, tmpdir, wait_for  # noqa: E402
from sbagent import LLM, LLM_ENV, kinds, llm_args, new_session, pid_gone, prompt, results, tape, wait_run  # noqa: E402

# The two kill tests read the pids the command prints and look for them on
# the host; in the sandbox's PID namespace those numbers are not the
# host's, so they run unsandboxed. test_sandbox.py checks the kill in the box.
UNBOXED = ["--sandbox", "none"]


def scripted_run(turns, workspace=None, policy="yolo", script="tools", args=()):
    """Starts an llm_server and a serve, runs one prompt against `turns`
    and returns (server, llm, session id, run, tape)."""
    llm = LLM()
    llm.script(script, turns)
    ws = workspace or tmpdir()
    server = Server(args=llm_args(llm, script) + list(args), env=LLM_ENV).start()
    sid = new_session(server, ws, approval_policy=policy)
    run = wait_run(server, prompt(server, sid, "go"), timeout=30)
    return server, llm, sid, run, tape(server, sid)


def test_confinement_refuses_escapes_and_the_run_goes_on():
    ws = tmpdir()
    with open(os.path.join(ws, "inside.txt"), "w") as f:
        f.write("inside\n")
    os.symlink("/etc/passwd", os.path.join(ws, "link"))
    os.symlink("/etc", os.path.join(ws, "etcdir"))
    calls = [
        ("c_dotdot", "read_file", {"path": "../../etc/passwd"}),
        ("c_abs", "read_file", {"path": "/etc/passwd"}),
        ("c_link", "read_file", {"path": "link"}),
        ("c_linkdir", "read_file", {"path": "etcdir/passwd"}),
        ("c_write_link", "write_file", {"path": "link", "content": "pwned"}),
        ("c_abs_in", "read_file", {"path": os.path.join(ws, "inside.txt")}),
        ("c_list_out", "list_dir", {"path": ".."}),
    ]
    turns = [{"tool_calls": [{"name": n, "arguments": a, "call_id": c} for c, n, a in calls]},
             {"tool_calls": [{"name": "read_file", "arguments": {"path": "inside.txt"}, "call_id": "c_after"}]},
             {"text": "finished"}]
    server, llm, sid, run, entries = scripted_run(turns, ws)
    check(run["status"] == "completed", "run %r", run)
    res = results(entries)
    for cid in ("c_dotdot", "c_abs", "c_link", "c_linkdir", "c_write_link", "c_list_out"):
        r = res[cid]
        check(r["ok"] is False, "%s was not refused: %r", cid, r)
        check("root:" not in r["output"], "%s leaked /etc/passwd: %r", cid, r["output"][:200])
        check("workspace" in r["output"] and ("escape" in r["output"] or "outside" in r["output"]),
              "%s: the error does not say why: %r", cid, r["output"])
    check("symlink" in res["c_link"]["output"], "symlink refusal does not name it: %r", res["c_link"])
    with open("/etc/passwd") as f:
        check("pwned" not in f.read(), "write_file went through the symlink")
    check(os.path.islink(os.path.join(ws, "link")), "the symlink was replaced")
    # an absolute path inside the workspace is fine
    check(res["c_abs_in"]["ok"] is True and "inside" in res["c_abs_in"]["output"], "abs inside: %r",
          res["c_abs_in"])
    # the run went on: the next step ran and the model saw every refusal
    check(res["c_after"]["ok"] is True, "the step after the refusals: %r", res["c_after"])
    reqs = llm.requests("tools")
    check(len(reqs) == 3, "%d model requests", len(reqs))
    outs = {i["call_id"]: str(i.get("output")) for i in reqs[1]["json"]["input"]
            if i.get("type") == "function_call_output"}
    check(set(outs) == {c for c, _, _ in calls}, "the model did not get every result: %r", sorted(outs))
    check("escapes the workspace" in outs["c_dotdot"], "model saw %r", outs["c_dotdot"])
    server.stop()


def test_shell_sees_no_server_descriptors_nor_secrets():
    turns = [{"tool_calls": [
        {"name": "shell", "arguments": {"command": "ls /proc/self/fd"}, "call_id": "c_fd"},
        {"name": "shell", "arguments": {"command": "ls -l /proc/self/fd; env; pwd"}, "call_id": "c_env"}]},
        {"text": "ok"}]
    ws = tmpdir()
    server, llm, sid, run, entries = scripted_run(turns, ws)
    check(run["status"] == "completed", "run %r", run)
    # the test means something only if the server holds what must not leak
    links = []
    for fd in os.listdir("/proc/%d/fd" % server.proc.pid):
        try:
            links.append(os.readlink("/proc/%d/fd/%s" % (server.proc.pid, fd)))
        except OSError:
            pass
    check(any(link.endswith(".mdb") for link in links) and any(link.startswith("socket:") for link in links),
          "the server holds no LMDB or socket descriptor? %r", links)
    res = results(entries)
    fds = res["c_fd"]["output"].split()
    check(res["c_fd"]["ok"] is True and sorted(fds) == ["0", "1", "2", "3"],
          "the shell sees descriptors %r (want 0 1 2 and ls's own 3):\n%s", fds, res["c_env"]["output"])
    out = res["c_env"]["output"]
    check(".mdb" not in out and "socket:" not in out and "bus-" not in out,
          "a server descriptor leaked into the tool:\n%s", out)
    check("sk-test" not in out and "OPENAI_API_KEY" not in out, "the provider key leaked into the tool env")
    check(out.rstrip().splitlines()[-1] == os.path.realpath(ws), "the shell's cwd is not the workspace:\n%s", out)
    server.stop()


def test_shell_timeout_kills_the_group_with_no_orphan():
    # a background sleep, a setsid grandchild (its own session: only the
    # subreaper catches it) and a foreground sleep, each printing its pid
    cmd = ("sleep 300 & echo bg=$!; "
           "setsid sh -c 'echo gc=$$; exec sleep 300' & "
           "echo sh=$$; sleep 300")
    turns = [{"tool_calls": [{"name": "shell", "arguments": {"command": cmd, "timeout_s": 1},
                              "call_id": "c_sleep"}]},
             {"text": "timed out, as planned"}]
    pids = []
    try:
        server, llm, sid, run, entries = scripted_run(turns, args=UNBOXED)
        check(run["status"] == "completed", "the run did not go on after the timeout: %r", run)
        r = results(entries)["c_sleep"]
        pids = [int(p) for p in re.findall(r"\b(?:bg|gc|sh)=(\d+)", r["output"])]
        check(len(pids) == 3, "the command did not print its three pids: %r", r["output"])
        check(r["ok"] is False and "timed out after 1 s" in r["output"], "timeout result: %r", r)
        check(r["duration_ms"] < 5000, "the timeout took %d ms", r["duration_ms"])
        wait_for(lambda: all(pid_gone(p) for p in pids), 5,
                 "every process of the timed-out command to be gone (pids %r)" % pids)
        server.stop()
    finally:
        for p in pids:
            try:
                os.kill(p, 9)
            except OSError:
                pass


def test_a_daemon_left_by_a_tool_is_reaped_when_it_exits():
    # An unmarked process (env -i) in its own session, whose parent (the
    # tool's shell) has exited, cannot be attributed to the tool, so the
    # spawn leaves it running; the server, as subreaper, inherits it and
    # must reap it when it exits, or zombies pile up. The daemon writes its
    # pid to a file (its stdout is closed, so the tool does not wait on it).
    cmd = ("env -i /usr/bin/setsid /bin/sh -c 'echo $$ > d.pid; exec /bin/sleep 0.5' "
           "</dev/null >/dev/null 2>&1 & while [ ! -s d.pid ]; do sleep 0.01; done; echo started")
    turns = [{"tool_calls": [{"name": "shell", "arguments": {"command": cmd}, "call_id": "c_d"}]},
             {"text": "left a daemon"}]
    pid = None
    ws = tmpdir()
    try:
        server, llm, sid, run, entries = scripted_run(turns, workspace=ws, args=UNBOXED)
        check(run["status"] == "completed", "run %r", run)
        out = results(entries)["c_d"]["output"]
        check("started" in out, "the command did not finish its wait: %r", out)
        text = open(os.path.join(ws, "d.pid")).read().strip()
        check(text.isdigit(), "the daemon did not write its pid: %r", text)
        pid = int(text)
        wait_for(lambda: pid_gone(pid), 5, "the exited daemon %d to be reaped (not left a zombie)" % pid)
        server.stop()
    finally:
        if pid:
            try:
                os.kill(pid, 9)
            except OSError:
                pass


def test_shell_output_over_the_cap_is_truncated_with_its_size():
    n = 200000
    cmd = "head -c %d /dev/zero | tr '\\0' a; echo; echo END" % n
    turns = [{"tool_calls": [{"name": "shell", "arguments": {"command": cmd}, "call_id": "c_big"}]},
             {"text": "big"}]
    server, llm, sid, run, entries = scripted_run(turns)
    check(run["status"] == "completed", "run %r", run)
    r = results(entries)["c_big"]
    out = r["output"]
    total = n + 1 + 4
    check(r["ok"] is True and r.get("exit_code") == 0, "result %r", {k: v for k, v in r.items() if k != "output"})
    check("truncated" in out and str(total) in out, "the truncation note lacks the size %d: %r", total,
          out[60000:70000] if len(out) > 70000 else out[-500:])
    check(len(out.encode()) <= 66 * 1024, "the kept output is %d bytes (cap 64 KiB)", len(out.encode()))
    check(out.startswith("aaaa") and out.rstrip().endswith("END"), "head or tail missing: %r ... %r",
          out[:20], out[-20:])
    # what reached the model is the capped output too
    outs = [i for i in llm.requests("tools")[1]["json"]["input"] if i.get("type") == "function_call_output"]
    check(len(str(outs[0]["output"])) <= 66 * 1024 and str(total) in str(outs[0]["output"]),
          "the model got %d chars", len(str(outs[0]["output"])))
    # streamed output entries exist, each small
    chunks = [e for e in entries if e["kind"] == "tool.output"]
    check(chunks, "no tool.output entries for a long output: %r", kinds(entries))
    server.stop()


if __name__ == "__main__":
    run_tests(globals())
