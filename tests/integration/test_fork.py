#!/usr/bin/python3
"""Fork of a session at a seq (issue 24, docs/checkpoints.md), driven by a
scripted model through the real server:

  - `fork --at SEQ` after a run that wrote, edited and renamed files: the
    fork's record names its source, its tape begins with session.forked
    and holds the source's entries up to SEQ at the same seqs (`events`
    of the fork), it is idle with nothing queued and no usage, and its
    next model request holds the source's conversation up to SEQ and
    nothing after it;
  - `--workspace DIR`: a git worktree at the checkpoint of SEQ (its files
    are the checkpoint's tree; the source's work tree is untouched), and
    outside git a copy of the checkpoint's files;
  - a cut inside a tool call or with an approval pending is refused
    (invalid) with the nearest valid seqs, on the bus and over REST; a
    seq past the tape is invalid; a retry with the same command_id gives
    the same fork;
  - deleting a session removes its checkpoint ref, private index and
    shadow repository; a fork's chain starts at the checkpoint of its seq,
    so it still rewinds to the checkpoints it copied once its source is
    gone, in git and outside it.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Server, check, cli, run_tests, tmpdir  # noqa: E402
from sbgit import checkpoints, disk_tree, git, git_workspace, read, rest_post, two_runs, write  # noqa: E402
from sbagent import (LLM, LLM_ENV, call, llm_args, new_session, pending, prompt, shell, tape,  # noqa: E402
                     tool, wait_run)


def start(turns, script="fk"):
    llm = LLM()
    llm.script(script, turns)
    server = Server(args=llm_args(llm, script), env=LLM_ENV).start()
    return llm, server


def fork(server, sid, at, **kw):
    body = {"session_id": sid, "at": at}
    body.update(kw)
    return server.control().request("session.fork", body, timeout=30)


def last_of_run(entries, rid):
    return max(e["seq"] for e in entries if e.get("run_id") == rid)


def inputs(llm, script):
    """The conversation each model request sent, as one text."""
    return [json.dumps(r["json"].get("input")) for r in llm.requests(script) if r.get("json")]


def test_fork_copies_the_history_up_to_seq_and_the_context_ends_there():
    ws = git_workspace()
    turns = [
        {"tool_calls": [tool("write_file", "c_write", path="new.txt", content="one\n")]},
        {"tool_calls": [tool("edit_file", "c_edit", path="a.txt", old="alpha", new="omega")]},
        {"text": "first answer"},
        {"tool_calls": [shell("mv new.txt moved.txt && rm a.txt", "c_shell")]},
        {"text": "second answer"},
        {"text": "the fork's answer"},
    ]
    llm, server = start(turns)
    sid = new_session(server, ws, approval_policy="yolo", title="src", budget={"steps": 50}, mcp_sampling=True)
    r1 = prompt(server, sid, "first prompt")
    check(wait_run(server, r1, timeout=30)["status"] == "completed", "run 1")
    r2 = prompt(server, sid, "second prompt")
    check(wait_run(server, r2, timeout=30)["status"] == "completed", "run 2")
    src = tape(server, sid)
    at = last_of_run(src, r1)
    cps = [c for c in checkpoints(src) if c["seq_of"] <= at]

    rc, out, err = cli(server, "fork", sid, "--at", str(at), "--json")
    check(rc == 0, "fork: %d %s %s", rc, out, err)
    reply = json.loads(out.strip().splitlines()[-1])
    rec = reply["session"]
    fid = rec["session_id"]
    check(fid != sid and reply["forked_from"] == {"session_id": sid, "seq": at}, "reply: %r", reply)
    check(rec["forked_from"] == {"session_id": sid, "seq": at} and rec["workspace"] == os.path.realpath(ws),
          "record: %r", rec)
    check(rec["turn_status"] == "idle" and rec["last_seq"] == at and rec.get("title") == "src", "record: %r", rec)
    # the budgets are config, as the step limit is: the fork has them too
    check(rec.get("budget") == {"steps": 50}, "the fork's budgets: %r", rec.get("budget"))
    check(rec.get("mcp_sampling") is True, "the fork lets its MCP servers sample: %r", rec.get("mcp_sampling"))
    got = call(server, "session.get", {"session_id": fid})["session"]
    check(got["last_seq"] == at and got.get("last_prompt") == "first prompt", "stored record: %r", got)

    # events of the fork: session.forked, then the source's entries 2..at
    fe = tape(server, fid)
    check(fe[0]["seq"] == 1 and fe[0]["kind"] == "session.forked", "first entry: %r", fe[0])
    check(fe[0]["body"]["forked_from"] == {"session_id": sid, "seq": at}, "session.forked: %r", fe[0]["body"])
    want = [(e["seq"], e["kind"], e.get("run_id"), json.dumps(e.get("body"), sort_keys=True)) for e in src[1:at]]
    have = [(e["seq"], e["kind"], e.get("run_id"), json.dumps(e.get("body"), sort_keys=True)) for e in fe[1:]]
    check(have == want, "the fork's entries 2..%d are not the source's", at)
    check(all(e["session_id"] == fid for e in fe), "an entry names another session")
    rc, out, err = cli(server, "events", "--session", fid, "--json")
    lines = [json.loads(x) for x in out.splitlines() if x.strip()]
    check(rc == 0 and [x["seq"] for x in lines] == list(range(1, at + 1)), "events of the fork: %d %r", rc, err)
    rc, out, err = cli(server, "events", "--session", fid)
    check(rc == 0 and "session.forked" in out and "workspace=%s" % os.path.realpath(ws) in out, "events: %r", out[:300])
    # nothing queued, no usage
    q = call(server, "session.queue.list", {"session_id": fid})
    check(not q.get("prompts"), "the fork's queue: %r", q)
    u = call(server, "session.usage", {"session_id": fid})
    check(not u.get("input_tokens") and not u.get("runs"), "the fork's usage: %r", u)
    # the source is as it was
    check(len(tape(server, sid)) == len(src), "the source's tape changed")

    # the fork's next model request: the source's conversation up to at
    before = len(llm.requests("fk"))
    r3 = prompt(server, fid, "fork prompt")
    check(wait_run(server, r3, timeout=30)["status"] == "completed", "the fork's run")
    sent = inputs(llm, "fk")[before:]
    check(sent, "no model request of the fork")
    check("first prompt" in sent[0] and "first answer" in sent[0] and "fork prompt" in sent[0],
          "the fork's context lacks the history: %s", sent[0][:400])
    check("second prompt" not in sent[0] and "c_shell" not in sent[0], "the fork's context holds what came "
          "after its seq: %s", sent[0][:600])
    check(read(os.path.join(ws, "moved.txt")) == "one\n", "the shared workspace changed")

    # a retry with the same command_id is the same fork
    m1 = fork(server, sid, at, command_id="fork-1")
    m2 = fork(server, sid, at, command_id="fork-1")
    check(m1.type == "session.fork.ok" and m2.type == "session.fork.ok", "forks: %r %r", m1.body, m2.body)
    check(m1.body["session"]["session_id"] == m2.body["session"]["session_id"], "the retry made another fork")
    # REST
    status, body = rest_post(server, "/api/sessions/%s/fork" % sid, {"at": at})
    check(status == 200 and body["forked_from"] == {"session_id": sid, "seq": at}
          and body["session"]["session_id"] not in (fid, m1.body["session"]["session_id"]), "POST fork: %d %r",
          status, body)
    check(cps, "no checkpoint before %d", at)
    server.stop()
    llm.stop()


def test_a_cut_inside_a_step_is_refused_with_the_nearest_valid_seqs():
    ws = git_workspace()
    llm, server = start([{"tool_calls": [tool("write_file", "c1", path="x.txt", content="x\n")]},
                         {"text": "done"},
                         {"tool_calls": [shell("touch y.txt", "c_ask")]},
                         {"text": "after"}])
    sid = new_session(server, ws, approval_policy="yolo")
    rid = prompt(server, sid, "go")
    wait_run(server, rid, timeout=30)
    entries = tape(server, sid)
    call_seq = [e["seq"] for e in entries if e["kind"] == "tool.call"][0]
    result_seq = [e["seq"] for e in entries if e["kind"] == "tool.result"][0]
    m = fork(server, sid, call_seq)
    check(m.type == "error" and m.body.get("code") == "invalid" and "tool call" in m.body.get("message", ""),
          "inside a tool call: %r", m.body)
    d = m.body.get("detail") or {}
    check(d.get("valid_before", 0) < call_seq and d.get("valid_after") == result_seq, "detail: %r", d)
    check(str(d["valid_before"]) in m.body["message"] and str(result_seq) in m.body["message"], "%r", m.body)
    status, body = rest_post(server, "/api/sessions/%s/fork" % sid, {"at": call_seq})
    check(status == 400 and body["error"]["code"] == "invalid" and body["error"]["detail"] == d,
          "REST refusal: %d %r", status, body)
    rc, out, err = cli(server, "fork", sid, "--at", str(call_seq))
    check(rc == 1 and "not a step boundary" in out + err, "cli: %d %r %r", rc, out, err)
    last = entries[-1]["seq"]
    m = fork(server, sid, last + 5)
    check(m.type == "error" and m.body.get("code") == "invalid" and "beyond the tape" in m.body["message"],
          "past the tape: %r", m.body)
    rc, out, err = cli(server, "fork", sid)
    check(rc == 2, "no --at: %d", rc)
    rc, out, err = cli(server, "fork", "--help")
    check(rc == 0 and "--workspace" in out and "idle" in out, "help: %r", out)

    # an approval pending: the cut after approval.requested is refused
    call(server, "session.update", {"session_id": sid, "approval_policy": "interactive"})
    rid = prompt(server, sid, "ask")
    pending(server, sid)
    entries = tape(server, sid)
    asked = [e["seq"] for e in entries if e["kind"] == "approval.requested"][-1]
    m = fork(server, sid, asked)
    check(m.type == "error" and m.body.get("code") == "invalid" and "approval" in m.body["message"],
          "with an approval pending: %r", m.body)
    check((m.body.get("detail") or {}).get("valid_before", 0) < asked, "detail: %r", m.body)
    call(server, "run.cancel", {"run_id": rid})
    wait_run(server, rid, timeout=30)
    server.stop()
    llm.stop()


def test_fork_with_a_workspace_makes_the_checkpoint_s_work_tree():
    ws = git_workspace()
    llm, server, sid, at = two_runs("fk", [{"tool_calls": [tool("write_file", "c_write", path="new.txt", content="one\n")]},
                         {"text": "one"},
                         {"tool_calls": [shell("mv new.txt moved.txt && echo changed > a.txt", "c_shell")]},
                         {"text": "two"}], ws)
    src = tape(server, sid)
    cp = [c for c in checkpoints(src) if c["seq_of"] <= at][-1]
    head = git(ws, "rev-parse", "HEAD")
    now = disk_tree(ws)
    dest = os.path.join(tmpdir(), "forked")
    rc, out, err = cli(server, "fork", sid, "--at", str(at), "--workspace", dest, "--json")
    check(rc == 0, "fork --workspace: %d %s %s", rc, out, err)
    rec = json.loads(out.strip().splitlines()[-1])["session"]
    check(rec["workspace"] == os.path.realpath(dest), "workspace: %r", rec)
    check(git(dest, "rev-parse", "--is-inside-work-tree").strip() == "true", "not a git worktree")
    check(read(os.path.join(dest, "new.txt")) == "one\n" and read(os.path.join(dest, "a.txt")) == "alpha\n"
          and not os.path.exists(os.path.join(dest, "moved.txt")), "the fork's files are not the checkpoint's")
    check(read(os.path.join(dest, "notes.txt")) == "the person's untracked notes\n", "untracked files missing")
    check(disk_tree(dest) == cp["tree"], "the fork's work tree is not the checkpoint's tree")
    check(disk_tree(ws) == now and git(ws, "rev-parse", "HEAD") == head, "the source's work tree changed")
    # an existing folder that is not empty is refused, and nothing is made
    m = fork(server, sid, at, workspace=dest)
    check(m.type == "error" and m.body.get("code") == "invalid" and "not an empty folder" in m.body["message"],
          "a used folder: %r", m.body)
    # the fork's run works in its own tree
    wait_run(server, prompt(server, rec["session_id"], "in the fork"), timeout=30)
    check(read(os.path.join(ws, "a.txt")) == "changed\n", "the source's work tree changed")

    # outside git: a copy of the checkpoint's files from the shadow repository
    plain = tmpdir()
    write(os.path.join(plain, "p.txt"), "plain\n")
    llm.script("fk", [{"tool_calls": [tool("write_file", "c_p", path="q.txt", content="q\n")]},
                      {"text": "ok"},
                      {"tool_calls": [shell("rm p.txt", "c_rm")]},
                      {"text": "ok"}])
    psid = new_session(server, plain, approval_policy="yolo")
    p1 = prompt(server, psid, "go")
    wait_run(server, p1, timeout=30)
    wait_run(server, prompt(server, psid, "rm"), timeout=30)
    pat = last_of_run(tape(server, psid), p1)
    pdest = os.path.join(tmpdir(), "copy")
    m = fork(server, psid, pat, workspace=pdest)
    check(m.type == "session.fork.ok", "fork outside git: %r", m.body)
    check(read(os.path.join(pdest, "p.txt")) == "plain\n" and read(os.path.join(pdest, "q.txt")) == "q\n",
          "the copy lacks the checkpoint's files")
    check(not os.path.exists(os.path.join(pdest, ".git")), "the copy got a .git")
    check(not os.path.exists(os.path.join(plain, "p.txt")), "the source was touched")
    server.stop()
    llm.stop()


def test_deleting_a_session_removes_its_checkpoints_and_a_fork_keeps_its_own():
    ws = git_workspace()
    llm, server, sid, at = two_runs("fk", [{"tool_calls": [tool("write_file", "c_write", path="new.txt", content="one\n")]},
                         {"text": "one"},
                         {"tool_calls": [shell("echo two > new.txt && rm a.txt", "c_shell")]},
                         {"text": "two"},
                         {"tool_calls": [shell("echo fork > new.txt && echo f > f.txt", "c_fork")]},
                         {"text": "the fork's"}], ws)
    src = tape(server, sid)
    cp = [c for c in checkpoints(src) if c["seq_of"] <= at][-1]
    ref = "refs/switchboard/checkpoints/"
    index = os.path.join(server.data, "checkpoints", sid + ".index")
    check(git(ws, "rev-parse", ref + sid).strip() and os.path.exists(index), "no ref or index before the delete")
    m = fork(server, sid, at)
    check(m.type == "session.fork.ok", "fork: %r", m.body)
    fid = m.body["session"]["session_id"]
    check(git(ws, "rev-parse", ref + fid).strip() == cp["commit"], "the fork's chain does not start at the "
          "checkpoint of its seq")
    call(server, "session.delete", {"session_id": sid})
    refs = git(ws, "for-each-ref", "--format=%(refname)", ref)
    check(ref + sid not in refs and ref + fid in refs, "refs after the delete: %r", refs)
    check(not os.path.exists(index), "the private index is still there")
    # the fork's own run in the shared workspace, then a rewind to a
    # checkpoint it copied, its source gone: its own changes go back (what
    # the source's second run did is not on the fork's tape: left alone)
    wait_run(server, prompt(server, fid, "in the fork"), timeout=30)
    rc, out, err = cli(server, "rewind", fid, "--to", str(cp["seq_of"]))
    check(rc == 0 and read(os.path.join(ws, "new.txt")) == "one\n" and not os.path.exists(os.path.join(ws, "f.txt")),
          "the fork's rewind: %d %s %s", rc, out, err)
    check(not os.path.exists(os.path.join(ws, "a.txt")), "the source's change was undone by the fork")
    call(server, "session.delete", {"session_id": fid})
    check(ref + fid not in git(ws, "for-each-ref", "--format=%(refname)", ref), "the fork's ref is still there")

    # outside git: the shadow repository goes
    plain = tmpdir()
    write(os.path.join(plain, "p.txt"), "plain\n")
    llm.script("fk", [{"tool_calls": [tool("write_file", "c_p", path="q.txt", content="q\n")]}, {"text": "ok"},
                      {"tool_calls": [shell("rm q.txt", "c_rm")]}, {"text": "ok"}])
    psid = new_session(server, plain, approval_policy="yolo")
    wait_run(server, prompt(server, psid, "go"), timeout=30)
    shadow = os.path.join(server.data, "checkpoints", psid + ".git")
    check(os.path.isdir(shadow), "no shadow repository")
    pat = tape(server, psid)[-1]["seq"]
    m = fork(server, psid, pat)
    pfid = m.body["session"]["session_id"]
    call(server, "session.delete", {"session_id": psid})
    check(not os.path.exists(shadow) and not os.path.exists(os.path.join(server.data, "checkpoints", psid + ".index")),
          "the shadow repository or index is still there")
    check(os.path.isdir(os.path.join(server.data, "checkpoints", pfid + ".git")), "the fork's shadow went too")
    wait_run(server, prompt(server, pfid, "rm"), timeout=30)
    check(not os.path.exists(os.path.join(plain, "q.txt")), "the fork's run did not remove q.txt")
    first = [c for c in checkpoints(tape(server, pfid)) if c["seq_of"] <= pat][-1]["seq_of"]
    rc, out, err = cli(server, "rewind", pfid, "--to", str(first))
    check(rc == 0 and read(os.path.join(plain, "q.txt")) == "q\n", "the fork's rewind outside git: %d %s %s",
          rc, out, err)
    server.stop()
    llm.stop()


if __name__ == "__main__":
    run_tests(globals())
