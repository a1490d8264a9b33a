#!/usr/bin/python3
"""The one-shot keeps its history (issue 8, section 3).

  - with no server running, `switchboard run` keeps its state in the
    default data folder ($SWITCHBOARD_DATA here): twice against one
    workspace, then a `serve` on that folder answers `sessions show` and
    `run-info` for every printed id;
  - with a server running on the data folder, the one-shot uses it: the
    run shows up in that server's `runs`; model flags are then a usage
    error, since that server has its own model;
  - `--ephemeral` keeps the old throwaway folder, and leaves the default
    one untouched;
  - the closing lines say what changed in the workspace: in a git work
    tree as `git diff --stat` (edits made before the run are not claimed),
    outside git as created / modified / deleted files;
  - Ctrl-C cancels the one-shot's run and says so in the last line;
  - a run whose every write is refused says so in its last line, with the
    fix (the exec side of the tool.result contract).
"""
import os
import re
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import SB_BIN, Proc, Server, check, run_tests, sb, tmpdir, wait_for  # noqa: E402
from sbagent import LLM, LLM_ENV, git_repo, llm_args, llm_server  # noqa: E402

IDS = re.compile(r"^session (\w{26}), run (\w{26}), workspace ", re.M)


def ids(err):
    m = IDS.search(err)
    check(m is not None, "no session and run ids on stderr:\n%s", err)
    return m.group(1), m.group(2)


def write_turns(path, content, call_id):
    return [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": content},
                         "call_id": call_id}],
         "usage": {"input_tokens": 3, "output_tokens": 1}},
        {"text": "wrote " + path, "usage": {"input_tokens": 4, "output_tokens": 1}},
    ]


def oneshot(llm, script, ws, *extra, env=None, timeout=60):
    full = dict(LLM_ENV)
    full.update(env or {})
    return sb("run", "--goal", "write a file", "--repo", ws, "--approval", "yolo", *extra,
              *llm_args(llm, script), env=full, timeout=timeout)


def git(ws, *args):
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
    subprocess.run(["git"] + list(args), cwd=ws, check=True, env=env, stdout=subprocess.DEVNULL)


# ---------------------------------------------------------------------------

def test_oneshot_keeps_history_in_the_default_data_folder():
    llm = LLM()
    ws = git_repo()
    data = os.path.join(tmpdir(), "state")
    env = {"SWITCHBOARD_DATA": data}
    llm.script("w1", write_turns("hello.txt", "hi\nthere\n", "call_w1"))
    rc, out, err = oneshot(llm, "w1", ws, env=env)
    check(rc == 0, "first run: %d\n%s\n%s", rc, out, err)
    first = ids(err)
    check(", data %s" % data in err, "stderr does not name the data folder: %s", err)
    lines = out.strip().splitlines()
    check(lines[-1].startswith("run %s completed" % first[1]), "last line: %r", lines[-1])
    # as git diff --stat shows it, before the summary line
    check(lines[-4:-1] == ["changed in the workspace:", " hello.txt | 2 ++",
                           " 1 file changed, 2 insertions(+)"], "change summary:\n%s", out)

    llm.script("w2", write_turns("hello.txt", "hi\n", "call_w2"))
    rc, out, err = oneshot(llm, "w2", ws, env=env)
    check(rc == 0, "second run: %d\n%s\n%s", rc, out, err)
    second = ids(err)
    check(" hello.txt | 1 -\n 1 file changed, 1 deletion(-)\n" in out,
          "second change summary:\n%s", out)
    check(first != second, "the same ids twice: %r", first)

    # no server runs now; a serve on the same folder knows both
    check(not os.path.exists(os.path.join(data, "bus-cmd")), "the embedded server left its socket")
    server = Server(data=data).start()
    for sid, rid in (first, second):
        rc, out, err = sb("sessions", "show", sid, env=env)
        check(rc == 0 and sid in out and ws in out, "sessions show %s: %d %s %s", sid, rc, out, err)
        rc, out, err = sb("run-info", rid, env=env)
        check(rc == 0 and "completed" in out, "run-info %s: %d %s %s", rid, rc, out, err)
    server.stop()


def test_oneshot_uses_the_running_server():
    llm = LLM()
    llm.script("srv", write_turns("made.txt", "a\nb\nc\n", "call_srv"))
    server = llm_server(llm, "srv")
    ws = tmpdir()
    rc, out, err = sb("run", "--goal", "make it", "--repo", ws, "--approval", "yolo", "--data", server.data,
                      timeout=60)
    check(rc == 0, "run on the server: %d\n%s\n%s", rc, out, err)
    sid, rid = ids(err)
    rc, listing, _ = sb("runs", "--data", server.data)
    check(rc == 0 and rid in listing and sid in listing, "the server's runs lack %s:\n%s", rid, listing)
    check(os.path.isfile(os.path.join(ws, "made.txt")), "the server's executor did not write")
    check("changed in the workspace (not a git work tree):\n created   made.txt\n" in out,
          "change summary:\n%s", out)
    # the server has its own model
    rc, out, err = sb("run", "--goal", "x", "--repo", ws, "--data", server.data, "--model", "m")
    check(rc == 2 and "a server is running on %s" % server.data in err and "--ephemeral" in err,
          "model flags with a running server: %d %s", rc, err)
    server.stop()


def test_oneshot_ephemeral_leaves_no_state():
    data = os.path.join(tmpdir(), "never")
    ws = tmpdir()
    before = {d for d in os.listdir("/tmp") if d.startswith("switchboard-run-")}
    # yolo: the demo model's shell call would otherwise wait for a person
    rc, out, err = sb("run", "--goal", "look around", "--repo", ws, "--ephemeral", "--approval", "yolo",
                      env={"SWITCHBOARD_DATA": data}, timeout=60)
    check(rc == 0, "ephemeral run: %d\n%s\n%s", rc, out, err)
    check("ephemeral: removed at exit" in err, "stderr: %s", err)
    check(not os.path.exists(data), "--ephemeral created the default data folder")
    after = {d for d in os.listdir("/tmp") if d.startswith("switchboard-run-")}
    check(not (after - before), "left a temporary folder: %r", after - before)
    rc, _, err = sb("run", "--goal", "x", "--ephemeral", "--data", data)
    check(rc == 2, "--ephemeral with --data: %d %s", rc, err)


def test_oneshot_changes_in_git_ignore_earlier_edits():
    llm = LLM()
    ws = git_repo()
    # before the run: an edit, an untracked file, a deletion to come
    with open(os.path.join(ws, "README.md"), "a") as f:
        f.write("edited before\n")
    with open(os.path.join(ws, "draft.txt"), "w") as f:
        f.write("untracked before\n")
    with open(os.path.join(ws, "gone.txt"), "w") as f:
        f.write("1\n2\n3\n")
    git(ws, "add", "gone.txt")
    git(ws, "commit", "-qm", "gone")
    llm.script("g", [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "src/new.c", "content": "int x;\n"},
                         "call_id": "call_g1"},
                        {"name": "shell", "arguments": {"command": "rm gone.txt && echo more >> draft.txt"},
                         "call_id": "call_g2"}]},
        {"text": "done"},
    ])
    rc, out, err = oneshot(llm, "g", ws, "--ephemeral")
    check(rc == 0, "run: %d\n%s\n%s", rc, out, err)
    want = ("changed in the workspace:\n"
            " draft.txt | 1 +\n"
            " gone.txt  | 3 ---\n"
            " src/new.c | 1 +\n"
            " 3 files changed, 2 insertions(+), 3 deletions(-)\n")
    check(want in out, "change summary:\n%s\nwant:\n%s", out, want)
    check("README.md" not in out.split("changed in the workspace:")[1], "claimed an earlier edit:\n%s", out)
    # the real index is untouched
    status = subprocess.run(["git", "status", "--porcelain"], cwd=ws, stdout=subprocess.PIPE).stdout.decode()
    check(" M README.md" in status and "?? draft.txt" in status and "?? src/" in status,
          "git status after the run:\n%s", status)


def test_oneshot_data_folder_inside_the_workspace_is_no_change():
    llm = LLM()
    for in_git in (True, False):
        ws = git_repo() if in_git else tmpdir()
        data = os.path.join(ws, "state")
        llm.script("in", write_turns("hello.txt", "hi\n", "call_in_%d" % in_git))
        rc, out, err = oneshot(llm, "in", ws, env={"SWITCHBOARD_DATA": data})
        check(rc == 0, "run: %d\n%s\n%s", rc, out, err)
        check(os.path.isdir(os.path.join(data, "session")), "the state is not in %s", data)
        tail = out.split("changed in the workspace")[1].splitlines()
        want = ([":", " hello.txt | 1 +", " 1 file changed, 1 insertion(+)"] if in_git else
                [" (not a git work tree):", " created   hello.txt",
                 " 1 file changed: 1 created, 0 modified, 0 deleted"])
        check(tail[:3] == want, "the data folder counted as a change:\n%s", out)


def test_oneshot_changes_outside_git():
    llm = LLM()
    ws = tmpdir()
    for name in ("keep.txt", "edit.txt", "drop.txt"):
        with open(os.path.join(ws, name), "w") as f:
            f.write(name + "\n")
    llm.script("n", [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "edit.txt", "content": "longer now\n"},
                         "call_id": "call_n1"},
                        {"name": "write_file", "arguments": {"path": "d/new.txt", "content": "n\n"},
                         "call_id": "call_n2"},
                        {"name": "shell", "arguments": {"command": "rm drop.txt"}, "call_id": "call_n3"}]},
        {"text": "done"},
    ])
    rc, out, err = oneshot(llm, "n", ws, "--ephemeral")
    check(rc == 0, "run: %d\n%s\n%s", rc, out, err)
    want = ("changed in the workspace (not a git work tree):\n"
            " created   d/new.txt\n"
            " deleted   drop.txt\n"
            " modified  edit.txt\n"
            " 3 files changed: 1 created, 1 modified, 1 deleted\n")
    check(want in out, "change summary:\n%s\nwant:\n%s", out, want)


def test_oneshot_ctrl_c_cancels_the_run():
    llm = LLM()
    llm.script("slow", [{"tool_calls": [{"name": "shell", "arguments": {"command": "sleep 30"},
                                         "call_id": "call_slow"}]},
                        {"text": "never"}])
    d = tmpdir()
    data = os.path.join(d, "state")
    env = dict(LLM_ENV, SWITCHBOARD_DATA=data)
    p = Proc([SB_BIN, "run", "--goal", "wait", "--repo", tmpdir(), "--approval", "yolo"] + llm_args(llm, "slow"),
             os.path.join(d, "out"), env=env)
    wait_for(lambda: "→ shell" in p.log(), 20, "the shell call to stream")
    p.send_signal(signal.SIGINT)
    rc = p.wait(20)
    log = p.log()
    check(rc == 130, "run exited %s after Ctrl-C:\n%s", rc, log)
    sid, rid = ids(log)
    check("cancelling run %s (Ctrl-C again to stop waiting)" % rid in log, "no cancelling line:\n%s", log)
    lines = log.strip().splitlines()
    check(lines[-1] == "Ctrl-C: cancelled run %s; its history stays in session %s" % (rid, sid),
          "last line: %r", lines[-1])
    check(lines[-2].startswith("run %s cancelled" % rid), "summary: %r", lines[-2])
    Server(data=data).start()
    rc, out, err = sb("run-info", rid, env={"SWITCHBOARD_DATA": data})
    check(rc == 0 and "cancelled" in out, "run-info: %d %s %s", rc, out, err)


def test_oneshot_every_write_refused_last_line():
    """Needs the exec side of the tool.result contract (refused, policy,
    fix, mutating on every tool.result)."""
    llm = LLM()
    llm.script("ref", write_turns("no.txt", "x", "call_ref"))
    ws = tmpdir()
    # auto asks a person for the write; nobody answers within 1 s
    rc, out, err = sb("run", "--goal", "write", "--repo", ws, "--approval", "auto", "--ephemeral",
                      *llm_args(llm, "ref"), env=dict(LLM_ENV, SWITCHBOARD_APPROVAL_DEADLINE="1"), timeout=60)
    check(rc == 0, "run: %d\n%s\n%s", rc, out, err)
    sid, rid = ids(err)
    fix = "switchboard sessions update %s --rule 'write_file:no.txt:allow'" % sid
    lines = out.strip().splitlines()
    check("no changes in the workspace" in lines, "change summary:\n%s", out)
    check(lines[-2].startswith("run %s completed" % rid) and lines[-2].endswith(" · 1 tool refused"),
          "summary: %r", lines[-2])
    check(lines[-1] == "every change this run tried (1) was refused by the approval policy 'auto'; "
          "to allow changes: " + fix, "last line: %r", lines[-1])


if __name__ == "__main__":
    run_tests(globals())
