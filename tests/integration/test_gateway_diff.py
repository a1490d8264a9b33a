"""exec.diff (docs/gateway.md): the changes panel's data, served by the
exec actor (it owns the workspace) and reached through the gateway."""

import os
import subprocess

from sbtest import check, new_id, run_tests, tmpdir
from gwtest import Gateway


def _git(ws, *args):
    subprocess.run(["git", "-C", ws] + list(args), check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def _session(gw, ws):
    status, body = gw.api("POST", "/api/sessions", {"workspace": ws})
    check(status == 200, "create: %d %r", status, body)
    return body["session"]["session_id"]


def test_diff_of_a_git_workspace():
    gw = Gateway()
    ws = tmpdir()
    _git(ws, "init", "-q")
    _git(ws, "config", "user.email", "t@example.com")
    _git(ws, "config", "user.name", "t")
    with open(os.path.join(ws, "keep.txt"), "w") as f:
        f.write("one\ntwo\n")
    with open(os.path.join(ws, "old.txt"), "w") as f:
        f.write("bye\n")
    _git(ws, "add", ".")
    _git(ws, "commit", "-qm", "init")
    sid = _session(gw, ws)
    status, body = gw.api("GET", "/api/sessions/%s/diff" % sid)
    check(status == 200 and body["git"] and body["files"] == [] and not body["truncated"], "clean: %r", body)
    with open(os.path.join(ws, "keep.txt"), "a") as f:
        f.write("three\n")
    os.unlink(os.path.join(ws, "old.txt"))
    with open(os.path.join(ws, "new.txt"), "wb") as f:
        f.write(b"caf\xc3\xa9 \xff\xfe raw\n")
    w = gw.ws()
    r = w.call("exec.diff", {"session_id": sid})
    check(r["op"] == "reply" and r["type"] == "exec.diff.ok", "exec.diff over WS: %r", r)
    files = {f["path"]: f for f in r["body"]["files"]}
    check(sorted(files) == ["keep.txt", "new.txt", "old.txt"], "files: %r", sorted(files))
    check(files["keep.txt"]["status"] == "modified" and files["keep.txt"]["additions"] == 1
          and "+three" in files["keep.txt"]["diff"], "keep.txt: %r", files["keep.txt"])
    check(files["old.txt"]["status"] == "deleted" and files["old.txt"]["deletions"] == 1, "old.txt: %r",
          files["old.txt"])
    check(files["new.txt"]["status"] == "added" and "café" in files["new.txt"]["diff"], "new.txt: %r",
          files["new.txt"])
    # the real index is untouched: git status still sees nothing staged
    out = subprocess.run(["git", "-C", ws, "diff", "--cached", "--name-only"], stdout=subprocess.PIPE).stdout
    check(out == b"", "the real index changed: %r", out)


def test_diff_outside_git_and_errors():
    gw = Gateway()
    ws = tmpdir()
    with open(os.path.join(ws, "a.txt"), "w") as f:
        f.write("x\n")
    sid = _session(gw, ws)
    status, body = gw.api("GET", "/api/sessions/%s/diff" % sid)
    check(status == 200 and body["git"] is False and body["files"] == [], "outside git: %d %r", status, body)
    status, body = gw.api("GET", "/api/sessions/%s/diff" % new_id())
    check(status == 404 and body["error"]["code"] == "not_found", "unknown session: %d %r", status, body)


run_tests(globals())
