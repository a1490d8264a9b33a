#!/usr/bin/python3
"""Tools run only what they should (issue 9, items 6 and 7).

  - the read-only git tools (git_status, git_diff) under the `auto` policy
    run no program named by the repository: a clean/smudge filter, a
    long-running filter process, textconv, an external diff (diff.external
    and a diff driver's command), fsmonitor, hooks, a pager and a credential
    helper each write a marker file if run; no marker may appear, whether
    the keys sit in .git/config or in a file it includes;
  - a double-forked daemon (fork, setsid, fork, execve `sleep 604` with an
    empty environment) does not outlive the shell command that started it,
    on the cgroup path and on the subreaper fallback
    (SWITCHBOARD_NO_CGROUP=1); the result tells the model what was killed,
    and nothing is left once serve stops;
  - a serve SIGKILLed during a call leaves its tool's processes in the
    call's cgroup, and the next serve to start kills them.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Server, check, run_tests, sb, tmpdir, wait_for  # noqa: E402
from sbagent import (LLM, LLM_ENV, git_repo, llm_args, new_session, pid_gone, prompt, results, tape,  # noqa: E402
                     wait_run)

GIT_ENV = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")


def serve(llm, script, env=None, args=()):
    e = dict(LLM_ENV)
    e.update(env or {})
    return Server(args=llm_args(llm, script) + list(args), env=e).start()


def run_turns(turns, ws, policy="yolo", env=None, script="harden", args=()):
    llm = LLM()
    llm.script(script, turns)
    server = serve(llm, script, env, args)
    sid = new_session(server, ws, approval_policy=policy)
    run = wait_run(server, prompt(server, sid, "go"), timeout=40)
    return server, llm, run, tape(server, sid)


# ---------------------------------------------------------------------------
# item 6: repository config runs nothing

VECTORS = ["clean", "smudge", "process", "textconv", "extdiff", "diffcmd", "fsmonitor",
           "hook", "pager", "credential", "included"]


def marker_cmd(markers, name):
    # a program that leaves proof it ran, then behaves like `cat`
    return "sh -c 'echo ran >> %s/%s; cat'" % (markers, name)


def hostile_repo():
    """A repository whose config names a program for every hook git has,
    and a dirty, racily-clean worktree so that status and diff must read
    file contents. Returns (workspace, markers directory)."""
    ws = git_repo()
    markers = tmpdir()
    git = ["git", "-C", ws]
    with open(os.path.join(ws, "a.txt"), "w") as f:
        f.write("one\n")
    with open(os.path.join(ws, "b.bin"), "w") as f:
        f.write("two\n")
    subprocess.run(git + ["add", "a.txt", "b.bin"], check=True, env=GIT_ENV)
    subprocess.run(git + ["commit", "-qm", "files"], check=True, env=GIT_ENV)
    with open(os.path.join(ws, ".gitattributes"), "w") as f:
        f.write("*.txt filter=evil diff=evil\n*.bin filter=evilproc diff=evilcmd\n")
    inc = os.path.join(tmpdir(), "included.cfg")
    with open(inc, "w") as f:
        f.write("[filter \"inc\"]\n\tclean = %s\n\trequired = true\n" % marker_cmd(markers, "included"))
    cfg = [
        ("filter.evil.clean", marker_cmd(markers, "clean")),
        ("filter.evil.smudge", marker_cmd(markers, "smudge")),
        ("filter.evil.required", "true"),
        ("filter.evilproc.process", marker_cmd(markers, "process")),
        ("diff.evil.textconv", marker_cmd(markers, "textconv")),
        ("diff.evilcmd.command", marker_cmd(markers, "diffcmd")),
        ("diff.external", marker_cmd(markers, "extdiff")),
        ("core.fsmonitor", marker_cmd(markers, "fsmonitor")),
        ("core.pager", marker_cmd(markers, "pager")),
        ("pager.status", "true"),
        ("pager.diff", "true"),
        ("credential.helper", "!" + marker_cmd(markers, "credential")),
        ("core.hooksPath", os.path.join(ws, ".git", "evilhooks")),
        ("include.path", inc),
    ]
    for k, v in cfg:
        subprocess.run(git + ["config", "--add", k, v], check=True)
    hooks = os.path.join(ws, ".git", "evilhooks")
    os.makedirs(hooks)
    for h in ("post-index-change", "pre-commit", "post-checkout", "reference-transaction",
              "fsmonitor-watchman", "pre-auto-gc"):
        p = os.path.join(hooks, h)
        with open(p, "w") as f:
            f.write("#!/bin/sh\necho %s >> %s/hook\n" % (h, markers))
        os.chmod(p, 0o755)
    with open(os.path.join(ws, ".gitattributes"), "a") as f:
        f.write("*.inc filter=inc\n")
    with open(os.path.join(ws, "c.inc"), "w") as f:
        f.write("three\n")
    # modified files, untracked files, and a racy index (mtime == index
    # mtime) so that git has to hash contents through the filters
    with open(os.path.join(ws, "a.txt"), "w") as f:
        f.write("one changed\n")
    with open(os.path.join(ws, "b.bin"), "w") as f:
        f.write("two changed\n")
    idx = os.path.join(ws, ".git", "index")
    st = os.stat(idx)
    for name in ("a.txt", "b.bin", "c.inc", "README.md"):
        os.utime(os.path.join(ws, name), (st.st_atime, st.st_mtime))
    # the setup itself must not have left a marker (git add ran filters
    # before the config existed)
    for m in os.listdir(markers):
        os.remove(os.path.join(markers, m))
    return ws, markers


def test_sanity_the_hostile_repo_does_run_programs_under_plain_git():
    # The vectors are real: plain git runs the clean filter and textconv.
    ws, markers = hostile_repo()
    subprocess.run(["git", "-C", ws, "diff"], env=dict(GIT_ENV, GIT_PAGER="cat"),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ran = sorted(os.listdir(markers))
    check("clean" in ran or "textconv" in ran or "extdiff" in ran,
          "plain git ran none of the repository's programs (%r): the test repository is not hostile", ran)


def test_read_only_git_tools_run_no_program_from_the_repository():
    ws, markers = hostile_repo()
    calls = [("c_status", "git_status", {}), ("c_diff", "git_diff", {}),
             ("c_diff_a", "git_diff", {"path": "a.txt"}), ("c_diff_b", "git_diff", {"path": "b.bin"}),
             ("c_status2", "git_status", {})]
    turns = [{"tool_calls": [{"name": n, "arguments": a, "call_id": c}]} for c, n, a in calls]
    turns.append({"text": "looked"})
    server, llm, run, entries = run_turns(turns, ws, policy="auto")
    check(run["status"] == "completed", "run %r", run)
    res = results(entries)
    ran = sorted(os.listdir(markers))
    details = {m: open(os.path.join(markers, m)).read() for m in ran}
    check(not ran, "the read-only git tools ran programs named by the repository: %r", details)
    check(res["c_status"]["ok"] is True, "git_status failed: %r", res["c_status"])
    out = res["c_status"]["output"]
    check("a.txt" in out and "b.bin" in out, "git_status does not list the changes: %r", out)
    d = res["c_diff"]["output"]
    check(res["c_diff"]["ok"] is True and "+one changed" in d and "+two changed" in d,
          "git_diff does not show the plain diff: %r", res["c_diff"])
    check("+one changed" in res["c_diff_a"]["output"], "git_diff a.txt: %r", res["c_diff_a"])
    server.stop()


def test_the_changes_panel_and_summary_run_no_program_from_the_repository():
    """exec.diff, the baseline each run takes of the work tree, and the
    one-shot run's change summary stage the work tree with git (`git add`
    runs clean and process filters, an index refresh runs fsmonitor, diff
    runs textconv): none may run a program the repository names."""
    ws, markers = hostile_repo()
    turns = [{"tool_calls": [{"name": "write_file", "arguments": {"path": "new.txt", "content": "x\n"},
                              "call_id": "c_w"}]}, {"text": "wrote"}]
    llm = LLM()
    llm.script("panel", turns)
    server = serve(llm, "panel")
    sid = new_session(server, ws, approval_policy="yolo")
    m = server.control().request("exec.diff", {"session_id": sid}, timeout=30)
    check(m.type == "exec.diff.ok" and m.body.get("git") is True, "exec.diff before a run: %r", m.body)
    run = wait_run(server, prompt(server, sid, "go"), timeout=40)
    check(run["status"] == "completed", "run %r", run)
    m = server.control().request("exec.diff", {"session_id": sid}, timeout=30)
    check(m.type == "exec.diff.ok" and m.body.get("base") == "session"
          and "new.txt" in [f["path"] for f in m.body.get("files", [])], "exec.diff after the run: %r", m.body)
    server.stop()
    ran = sorted(os.listdir(markers))
    check(not ran, "exec.diff or the run's baseline ran programs named by the repository: %r",
          {n: open(os.path.join(markers, n)).read() for n in ran})
    # the one-shot's summary of what changed
    llm.script("panel", [{"tool_calls": [{"name": "write_file", "arguments": {"path": "other.txt",
                                                                               "content": "y\n"},
                                          "call_id": "c_w2"}]}, {"text": "wrote"}])
    rc, out, err = sb("run", "--goal", "go", "--repo", ws, "--approval", "yolo", "--ephemeral",
                      *llm_args(llm, "panel"), env=LLM_ENV, timeout=60)
    check(rc == 0 and " other.txt | 1 +" in out, "run: %d\n%s\n%s", rc, out, err)
    ran = sorted(os.listdir(markers))
    check(not ran, "the one-shot's change summary ran programs named by the repository: %r",
          {n: open(os.path.join(markers, n)).read() for n in ran})
    llm.stop()


# ---------------------------------------------------------------------------
# item 7: a double-forked daemon dies with its command

# fork; the child calls setsid, forks again and execve's sleep 604 with an
# empty environment; the grandchild's pid goes to a file; the command then
# returns at once.
DAEMON = r"""/usr/bin/python3 -c '
import os, sys
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    pid = os.fork()
    if pid == 0:
        # w is not inherited: it closes when execve succeeds, and the
        # reader sees EOF only once the process is `sleep 604` (a write
        # before execve let the tool kill it while it was still python)
        os.close(r)
        for fd in (0, 1, 2):
            os.close(fd)
        os.execve("/bin/sleep", ["sleep", "604"], {})
    open("daemon.pid", "w").write(str(pid))
    os._exit(0)
os.close(w)
os.read(r, 1)
os.wait()
print("daemon started")
'"""


def sleepers_604():
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                if f.read() == b"sleep\x00604\x00":
                    out.append(int(d))
        except OSError:
            pass
    return out


def cgroup_usable():
    """Whether this machine lets serve make a cgroup v2 per tool call: a
    writable cgroup2 mount with cgroup.kill in a child of ours."""
    path = None
    with open("/proc/self/cgroup") as f:
        for line in f:
            if line.startswith("0::"):
                path = line[3:].strip()
    mnt = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            sep = parts.index("-")
            if parts[sep + 1] == "cgroup2":
                mnt = parts[4]
                break
    if not path or not mnt:
        return False
    probe = os.path.join(mnt + path.rstrip("/"), "sbtest-probe-%d" % os.getpid())
    try:
        os.mkdir(probe)
    except OSError:
        return False
    ok = os.path.exists(os.path.join(probe, "cgroup.kill"))
    os.rmdir(probe)
    return ok


def daemon_case(env, cgroup):
    ws = tmpdir()
    turns = [{"tool_calls": [{"name": "shell", "arguments": {"command": DAEMON}, "call_id": "c_d"}]},
             {"tool_calls": [{"name": "shell", "arguments": {"command": "cat /proc/self/cgroup"},
                              "call_id": "c_after"}]},
             {"text": "done"}]
    before = set(sleepers_604())
    pid = None
    try:
        # unsandboxed: the check reads the daemon's host pid and the tool's
        # cgroup, which a PID and a cgroup namespace hide (test_sandbox.py
        # checks the kill in the box)
        server, llm, run, entries = run_turns(turns, ws, env=env, args=["--sandbox", "none"])
        check(run["status"] == "completed", "run %r", run)
        r = results(entries)["c_d"]
        check("daemon started" in r["output"], "the daemon did not start: %r", r)
        cg = results(entries)["c_after"]["output"]
        check(("/switchboard-" in cg) == cgroup, "the tool ran %s a cgroup of its own: %r",
              "outside" if cgroup else "in", cg)
        with open(os.path.join(ws, "daemon.pid")) as f:
            pid = int(f.read())
        # gone (and reaped) by the time the tool returned: the next tool
        # call ran after it
        check(pid_gone(pid), "the double-forked daemon %d outlived its command (left: %r)", pid,
              sorted(set(sleepers_604()) - before))
        check(not set(sleepers_604()) - before, "sleep 604 left running: %r", set(sleepers_604()) - before)
        out = r["output"]
        check("killed" in out and "sleep 604" in out,
              "the result does not tell the model what was killed: %r", out)
        outs = [str(i.get("output")) for i in llm.requests("harden")[1]["json"]["input"]
                if i.get("type") == "function_call_output"]
        check(any("sleep 604" in o and "killed" in o for o in outs), "the model was not told: %r", outs)
        server.stop()
        check(not set(sleepers_604()) - before, "sleep 604 left after serve stopped")
    finally:
        for p in set(sleepers_604()) - before:
            try:
                os.kill(p, 9)
            except OSError:
                pass


def test_double_forked_daemon_dies_with_its_command_on_the_subreaper_path():
    daemon_case({"SWITCHBOARD_NO_CGROUP": "1"}, False)


def test_double_forked_daemon_dies_with_its_command_in_a_cgroup():
    if not cgroup_usable():
        print("SKIP: no writable cgroup v2 with cgroup.kill here")
        return
    daemon_case({}, True)


def sleepers(arg):
    want = ("sleep\x00%s\x00" % arg).encode()
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    if f.read() == want:
                        out.append(int(d))
            except OSError:
                pass
    return out


def test_a_serve_killed_mid_call_leaves_nothing_running_after_the_next_start():
    # SIGKILL gives serve no chance to clean up; what its tool started
    # stays in the call's cgroup, and the next serve to start kills it.
    if not cgroup_usable():
        print("SKIP: no writable cgroup v2 with cgroup.kill here")
        return
    ws = tmpdir()
    turns = [{"tool_calls": [{"name": "shell", "arguments": {
        "command": "setsid sleep 607 </dev/null >/dev/null 2>&1 & sleep 608", "timeout_s": 600},
        "call_id": "c_long"}]}, {"text": "never"}]
    llm = LLM()
    llm.script("killed", turns)
    before = set(sleepers(607))
    # unsandboxed: in the box, the sandbox dies with serve (--die-with-parent
    # and its PID namespace) and leaves nothing for the next serve to clean
    server = serve(llm, "killed", args=["--sandbox", "none"])
    second = None
    try:
        sid = new_session(server, ws, approval_policy="yolo")
        prompt(server, sid, "go")
        wait_for(lambda: set(sleepers(607)) - before and sleepers(608), 20, "the tool's sleeps to start")
        server.proc.kill()
        left = set(sleepers(607)) - before
        check(left, "nothing was left to clean up: the test proves nothing")
        second = serve(llm, "killed")
        wait_for(lambda: not set(sleepers(607)) - before and not sleepers(608), 10,
                 "the next serve to kill what the killed one left in its cgroups")
        second.stop()
    finally:
        for p in (set(sleepers(607)) - before) | set(sleepers(608)):
            try:
                os.kill(p, 9)
            except OSError:
                pass


if __name__ == "__main__":
    run_tests(globals())
