"""sbgit — git workspaces for the checkpoint and rewind tests: git run
with no system config and a HOME of its own, the tree `git add -A` makes
of a work tree (through a throwaway index, the real one untouched), and
a repository with tracked, untracked and ignored files; the checkpoint
and rewound entries of a tape, and a POST to the REST gateway."""
import json
import os
import subprocess

from sbagent import LLM, LLM_ENV, git_repo, llm_args, new_session, prompt, tape, wait_run
import sbtest
from sbtest import Server, check, tmpdir


def git(ws, *args, env=None, git_dir=None):
    e = {"PATH": os.environ["PATH"], "GIT_CONFIG_NOSYSTEM": "1", "HOME": ws}
    if git_dir:
        e.update(GIT_DIR=git_dir, GIT_WORK_TREE=ws)
    e.update(env or {})
    r = subprocess.run(["git", "-C", ws] + list(args), capture_output=True, env=e)
    check(r.returncode == 0, "git %s: %s", " ".join(args), r.stderr.decode(errors="replace"))
    return r.stdout.decode()


def disk_tree(ws, git_dir=None):
    """The work tree as `git add -A` stages it, through a throwaway index."""
    env = {"GIT_INDEX_FILE": os.path.join(tmpdir(), "index")}
    git(ws, "add", "-A", env=env, git_dir=git_dir)
    return git(ws, "write-tree", env=env, git_dir=git_dir).strip()


def names(ws, tree, git_dir=None):
    return sorted(git(ws, "ls-tree", "-r", "-z", "--name-only", tree, git_dir=git_dir).split("\0")[:-1])


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def read(path):
    with open(path) as f:
        return f.read()


def git_workspace():
    """A repository with a.txt and .gitignore committed, the person's
    untracked notes.txt, and an ignored ignored.log."""
    ws = git_repo()
    write(os.path.join(ws, ".gitignore"), "ignored.log\n")
    write(os.path.join(ws, "a.txt"), "alpha\n")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e"}
    git(ws, "add", ".gitignore", "a.txt")
    git(ws, "commit", "-qm", "a", env=env)
    write(os.path.join(ws, "notes.txt"), "the person's untracked notes\n")
    write(os.path.join(ws, "ignored.log"), "ignored\n")
    return ws


def checkpoints(entries):
    """The bodies of a tape's checkpoint entries."""
    return [e["body"] for e in entries if e["kind"] == "checkpoint"]


def rewound(entries):
    """The bodies of a tape's session.rewound entries."""
    return [e["body"] for e in entries if e["kind"] == "session.rewound"]


def json_lines(out):
    return [json.loads(x) for x in out.splitlines() if x.startswith("{")]


def rest_post(srv, path, body):
    """POST a JSON body to the server's REST gateway with its token:
    (status, parsed reply)."""
    return sbtest.rest(srv, "POST", path, body)


def two_runs(script, turns, ws, first="first prompt", second="second prompt"):
    """A server whose model is `turns` (the script `script`) and a yolo
    session on ws with two completed runs: (llm, server, sid, at), at the
    seq of the first run's last entry (a step boundary)."""
    llm = LLM()
    llm.script(script, turns)
    server = Server(args=llm_args(llm, script), env=LLM_ENV).start()
    sid = new_session(server, ws, approval_policy="yolo")
    r1 = prompt(server, sid, first)
    check(wait_run(server, r1, timeout=30)["status"] == "completed", "run 1")
    check(wait_run(server, prompt(server, sid, second), timeout=30)["status"] == "completed", "run 2")
    at = max(e["seq"] for e in tape(server, sid) if e.get("run_id") == r1)
    return llm, server, sid, at
