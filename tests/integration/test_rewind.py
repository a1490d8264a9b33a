#!/usr/bin/python3
"""Rewind of a session's work tree to a checkpoint (issue 24,
docs/checkpoints.md), each driven by a scripted model through the real
server:

  - after a run that wrote (write_file), edited (edit_file), deleted,
    renamed and made files and a symlink out of the workspace (the
    shell), `rewind --to SEQ` puts back the first checkpoint's tree:
    changed and deleted files come back, later ones go, the symlink goes
    and what it pointed at stays; the session.rewound entry lists it
    all, and the calls that may have had effects outside; the person's
    index and HEAD are untouched; `--undo` puts the work tree back;
  - a seq between checkpoints takes the latest at or before it;
  - a seq before the first checkpoint is invalid, naming the first;
  - refused (conflict) while a run is active; --undo refused after a
    prompt; the REST route;
  - a session bound to a worker pool rewinds on the worker (a real
    `switchboard worker` process), where its workspace is;
  - `--conversation`: the work tree untouched, the next model request
    (as the fixture server saw it) ends at SEQ and the prompt, also after
    a restart; `--undo` before the next prompt brings the cut entries
    back; `events` still returns everything;
  - both by default, `--code` the work tree only; a seq of 0, past the
    tape or before the first checkpoint is invalid at once (no run);
  - the person's own edits (between runs, and after the last one) are
    left alone and named, the agent's after SEQ go back;
  - SIGKILL during a rewind: after the restart the rewind runs again to
    its end, and the tape (session.rewound, tree_before) and the work
    tree agree.
"""
import json
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Server, check, cli, run_tests, tmpdir, wait_for  # noqa: E402
from sbgit import (checkpoints, disk_tree, git, git_workspace, json_lines, read, rest_post,  # noqa: E402
                   rewound, write)
from sbagent import (LLM, LLM_ENV, call, llm_args, new_session, prompt, session_prompt, shell,  # noqa: E402
                     start_worker, tape, tool, wait_run)


MANY = 5000      # files the run makes and the rewind removes


def start(turns, ws, script="rw"):
    llm = LLM()
    llm.script(script, turns)
    server = Server(args=llm_args(llm, script), env=LLM_ENV).start()
    sid = new_session(server, ws, approval_policy="yolo")
    return server, sid


def test_rewind_puts_the_first_checkpoint_back_and_undo_returns():
    ws, outside = git_workspace(), tmpdir()
    write(os.path.join(outside, "victim.txt"), "outside\n")
    turns = [
        {"tool_calls": [tool("write_file", "c_write", path="new.txt", content="one\n")]},
        {"tool_calls": [tool("edit_file", "c_edit", path="a.txt", old="alpha", new="omega")]},
        {"tool_calls": [shell("rm notes.txt && mv new.txt moved.txt && mkdir sub && echo s > sub/s.txt"
                              " && ln -s %s escape" % outside, "c_shell")]},
        {"tool_calls": [tool("read_file", "c_read", path="a.txt")]},
        {"text": "done"},
    ]
    server, sid = start(turns, ws)
    head, index = git(ws, "rev-parse", "HEAD"), git(ws, "ls-files", "-s")
    run = wait_run(server, prompt(server, sid, "go"), timeout=30)
    check(run["status"] == "completed", "run %r", run)
    cps = checkpoints(tape(server, sid))
    check(len(cps) == 4, "checkpoints: %r", cps)
    now = disk_tree(ws)

    rc, out, err = cli(server, "rewind", sid, "--to", str(cps[0]["seq_of"]), "--json")
    check(rc == 0, "rewind: %d %s %s", rc, out, err)
    rows = [r for r in json_lines(out) if r.get("kind") == "session.rewound"]
    check(len(rows) == 1, "--json gives the session.rewound entry: %r", out)
    body = rows[0]["body"]
    check(body["checkpoint_seq"] == cps[0]["seq_of"] and body["to_seq"] == cps[0]["seq_of"], "%r", body)
    check(read(os.path.join(ws, "a.txt")) == "alpha\n", "a.txt not restored")
    check(read(os.path.join(ws, "notes.txt")) == "the person's untracked notes\n", "notes.txt not restored")
    for p in ("new.txt", "moved.txt", "sub", "escape"):
        check(not os.path.lexists(os.path.join(ws, p)), "%s is still there", p)
    check(read(os.path.join(outside, "victim.txt")) == "outside\n", "the symlink was followed")
    check(read(os.path.join(ws, "ignored.log")) == "ignored\n", "an ignored file was touched")
    check(disk_tree(ws) == cps[0]["tree"], "the work tree is not the checkpoint's")
    check(sorted(body["restored"]) == ["a.txt", "notes.txt"], "restored: %r", body)
    check(sorted(body["removed"]) == ["escape", "moved.txt", "sub/s.txt"], "removed: %r", body)
    check(body["not_restored"] == [], "not restored: %r", body)
    check(body["tree_before"] == now and body["tree_after"] == cps[0]["tree"], "trees: %r", body)
    check([f["call_id"] for f in body["effects"]] == ["c_write", "c_edit", "c_shell"], "effects: %r", body)
    check(git(ws, "rev-parse", "HEAD") == head and git(ws, "ls-files", "-s") == index, "the index or HEAD moved")
    # nothing is deleted from the tape
    check(len(checkpoints(tape(server, sid))) == 4, "checkpoints went")

    rc, out, err = cli(server, "rewind", sid, "--undo")
    check(rc == 0, "undo: %d %s %s", rc, out, err)
    check("rewind undone" in out, "undo text: %r", out)
    check(disk_tree(ws) == now, "undo did not put the work tree back")
    check(os.path.islink(os.path.join(ws, "escape")) and read(os.path.join(ws, "moved.txt")) == "one\n", "undo")

    # between checkpoints: the latest at or before
    rc, out, err = cli(server, "rewind", sid, "--to", str(cps[1]["seq_of"] + 1))
    check(rc == 0, "rewind: %d %s %s", rc, out, err)
    check("rewound to the checkpoint after seq %d" % cps[1]["seq_of"] in out, "text: %r", out)
    check(disk_tree(ws) == cps[1]["tree"], "not the second checkpoint's tree")
    check(git(ws, "rev-parse", "HEAD") == head and git(ws, "ls-files", "-s") == index, "the index or HEAD moved")
    server.stop()


def test_a_seq_before_the_first_checkpoint_is_invalid():
    ws = git_workspace()
    server, sid = start([{"tool_calls": [tool("write_file", "c1", path="x.txt", content="x\n")]},
                         {"text": "done"}], ws)
    wait_run(server, prompt(server, sid, "go"), timeout=30)
    first = checkpoints(tape(server, sid))[0]["seq_of"]
    rc, out, err = cli(server, "rewind", sid, "--to", "1")
    check(rc == 1, "rewind --to 1: %d %s %s", rc, out, err)
    check("invalid" in out + err and "first valid seq is %d" % first in out + err, "message: %r %r", out, err)
    check(os.path.exists(os.path.join(ws, "x.txt")), "the work tree changed")
    rc, out, err = cli(server, "rewind", sid, "--undo")
    check(rc == 1 and "no rewind to undo" in out + err, "undo without a rewind: %d %r %r", rc, out, err)
    rc, out, err = cli(server, "rewind", sid)
    check(rc == 2, "no --to nor --undo: %d", rc)
    # the REST route starts the same run
    status, body = rest_post(server, "/api/sessions/%s/rewind" % sid, {"to_seq": first})
    check(status == 200 and body.get("run_id"), "POST rewind: %d %r", status, body)
    run = wait_run(server, body["run_id"], timeout=30)
    check(run["status"] == "completed" and not os.path.exists(os.path.join(ws, "x.txt")), "REST rewind: %r", run)
    rc, out, err = cli(server, "rewind", "--help")
    check(rc == 0 and "--undo" in out, "help: %r", out)
    server.stop()


def test_refused_while_a_run_is_active_and_undo_after_a_prompt():
    ws = git_workspace()
    server, sid = start([{"tool_calls": [tool("write_file", "c1", path="x.txt", content="x\n")]},
                         {"text": "one"},
                         {"tool_calls": [shell("sleep 30", "c_sleep")]},
                         {"text": "two"},
                         {"text": "three"}], ws)
    wait_run(server, prompt(server, sid, "go"), timeout=30)
    first = checkpoints(tape(server, sid))[0]["seq_of"]
    rid = prompt(server, sid, "sleep")
    wait_for(lambda: any(e["kind"] == "tool.call" for e in tape(server, sid) if e.get("run_id") == rid), 20,
             "the sleep to start")
    m = server.control().request("session.rewind", {"session_id": sid, "to_seq": first})
    check(m.type == "error" and m.body.get("code") == "conflict" and rid in m.body.get("message", ""),
          "while a run is active: %s %r", m.type, m.body)
    call(server, "run.cancel", {"run_id": rid})
    wait_run(server, rid, timeout=30)
    rc, out, err = cli(server, "rewind", sid, "--to", str(first))
    check(rc == 0 and not os.path.exists(os.path.join(ws, "x.txt")), "rewind: %d %s %s", rc, out, err)
    wait_run(server, prompt(server, sid, "after"), timeout=30)
    rc, out, err = cli(server, "rewind", sid, "--undo")
    check(rc == 1 and "prompt was sent after the rewind" in out + err, "undo after a prompt: %d %r %r", rc, out, err)
    check(len(rewound(tape(server, sid))) == 1, "one rewind on the tape")
    server.stop()


def inputs(llm, script):
    """The conversation each model request of `script` sent, as one text."""
    return [json.dumps(r["json"].get("input")) for r in llm.requests(script) if r.get("json")]


def two_runs(ws, more):
    """A session with two runs, the first writing new.txt, the second
    renaming it and deleting a.txt; the model's turns go on with `more`."""
    llm = LLM()
    llm.script("cv", [
        {"tool_calls": [tool("write_file", "c_write", path="new.txt", content="one\n")]},
        {"text": "first answer"},
        {"tool_calls": [shell("mv new.txt moved.txt && rm a.txt", "c_shell")]},
        {"text": "second answer"},
    ] + more)
    server = Server(args=llm_args(llm, "cv"), env=LLM_ENV).start()
    sid = new_session(server, ws, approval_policy="yolo")
    r1 = prompt(server, sid, "first prompt")
    check(wait_run(server, r1, timeout=30)["status"] == "completed", "run 1")
    check(wait_run(server, prompt(server, sid, "second prompt"), timeout=30)["status"] == "completed", "run 2")
    at = max(e["seq"] for e in tape(server, sid) if e.get("run_id") == r1)
    return llm, server, sid, at


def test_a_conversation_rewind_cuts_the_next_context_and_undo_brings_it_back():
    ws = git_workspace()
    llm, server, sid, at = two_runs(ws, [{"text": "after the undo"}, {"text": "after the cut"},
                                         {"text": "after the restart"}])
    now, n = disk_tree(ws), len(tape(server, sid))
    rc, out, err = cli(server, "rewind", sid, "--to", str(at), "--conversation", "--json")
    check(rc == 0, "rewind --conversation: %d %s %s", rc, out, err)
    body = [r for r in json_lines(out) if r.get("kind") == "session.rewound"][0]["body"]
    check(body["to_seq"] == at and body.get("code") is False and body.get("conversation") is True, "%r", body)
    check("tree_before" not in body and body["restored"] == [] and body["removed"] == [], "%r", body)
    check([f["call_id"] for f in body["effects"]] == ["c_shell"], "effects: %r", body["effects"])
    check(disk_tree(ws) == now, "--conversation touched the work tree")
    rec = call(server, "session.get", {"session_id": sid})["session"]
    cut_at = rewound(tape(server, sid))[-1]
    cut_seq = [e["seq"] for e in tape(server, sid) if e["kind"] == "session.rewound"][-1]
    check(rec.get("context_cuts") == [{"after": at, "before": cut_seq}], "record: %r %r", rec, cut_at)

    # the undo, before any prompt: the cut is lifted
    rc, out, err = cli(server, "rewind", sid, "--undo", "--json")
    check(rc == 0, "undo: %d %s %s", rc, out, err)
    ub = [r for r in json_lines(out) if r.get("kind") == "session.rewound"][0]["body"]
    check(ub.get("undo") is True and ub.get("conversation") is True and ub.get("code") is False, "undo: %r", ub)
    check(disk_tree(ws) == now, "the undo touched the work tree")
    check(not call(server, "session.get", {"session_id": sid})["session"].get("context_cuts"), "cut not lifted")
    before = len(inputs(llm, "cv"))
    check(wait_run(server, prompt(server, sid, "third prompt"), timeout=30)["status"] == "completed", "run 3")
    sent = inputs(llm, "cv")[before]
    check("second prompt" in sent and "second answer" in sent and "third prompt" in sent,
          "after the undo the context lacks run 2: %s", sent[:300])

    # cut again: the next request ends at `at`, then the prompt
    rc, out, err = cli(server, "rewind", sid, "--to", str(at), "--conversation")
    check(rc == 0, "rewind --conversation: %d %s %s", rc, out, err)
    before = len(inputs(llm, "cv"))
    check(wait_run(server, prompt(server, sid, "fourth prompt"), timeout=30)["status"] == "completed", "run 4")
    sent = inputs(llm, "cv")[before]
    check("first prompt" in sent and "first answer" in sent and "fourth prompt" in sent, "context: %s", sent[:300])
    for gone in ("second prompt", "second answer", "c_shell", "third prompt", "after the undo"):
        check(gone not in sent, "the context still holds %r after the cut: %s", gone, sent[:600])
    rc, out, err = cli(server, "rewind", sid, "--undo")
    check(rc == 1 and "prompt was sent after the rewind" in out + err, "undo after a prompt: %d %r", rc, out + err)
    # nothing was deleted: events still return everything
    entries = tape(server, sid)
    check(len(entries) > n and [e["seq"] for e in entries] == list(range(1, len(entries) + 1)), "the tape lost entries")
    check(any(e["kind"] == "prompt" and e["body"]["text"] == "second prompt" for e in entries), "run 2 went")
    # a restarted server (no cached context) builds the same cut context
    data = server.data
    server.stop()
    server = Server(data=data, args=llm_args(llm, "cv"), env=LLM_ENV).start()
    before = len(inputs(llm, "cv"))
    check(wait_run(server, prompt(server, sid, "fifth prompt"), timeout=30)["status"] == "completed", "run 5")
    sent = inputs(llm, "cv")[before]
    check("fourth prompt" in sent and "first answer" in sent and "second prompt" not in sent,
          "after a restart: %s", sent[:600])
    server.stop()
    llm.stop()


def test_rewinding_both_and_bad_seqs_are_invalid_at_once():
    ws = git_workspace()
    llm, server, sid, at = two_runs(ws, [{"text": "after both"}])
    cp = [c for c in checkpoints(tape(server, sid)) if c["seq_of"] <= at][-1]
    last = tape(server, sid)[-1]["seq"]
    runs = len(call(server, "run.list", {"session_id": sid}).get("runs", []))
    for body, words in (({"to_seq": 0}, "at least 1"), ({"to_seq": last + 10}, "beyond the tape"),
                        ({"to_seq": 1}, "first valid seq is"),
                        ({"to_seq": at, "code": False, "conversation": False}, "nothing to rewind"),
                        ({"undo": True, "code": False}, "takes no code")):
        body["session_id"] = sid
        m = server.control().request("session.rewind", body)
        check(m.type == "error" and m.body.get("code") == "invalid" and words in m.body.get("message", ""),
              "%r: %r", body, m.body)
    check(len(call(server, "run.list", {"session_id": sid}).get("runs", [])) == runs, "a refused rewind made a run")
    # --conversation alone on seq 1 is fine: no checkpoint is needed
    rc, out, err = cli(server, "rewind", sid, "--to", str(at), "--code", "--conversation")
    check(rc == 2, "--code with --conversation: %d", rc)
    # the default rewinds both
    rc, out, err = cli(server, "rewind", sid, "--to", str(at), "--json")
    check(rc == 0, "rewind: %d %s %s", rc, out, err)
    body = [r for r in json_lines(out) if r.get("kind") == "session.rewound"][0]["body"]
    check(body.get("conversation") is True and body.get("code", True) and body["checkpoint_seq"] == cp["seq_of"],
          "%r", body)
    check(disk_tree(ws) == cp["tree"] and read(os.path.join(ws, "new.txt")) == "one\n", "the work tree")
    before = len(inputs(llm, "cv"))
    wait_run(server, prompt(server, sid, "next"), timeout=30)
    sent = inputs(llm, "cv")[before]
    check("first answer" in sent and "second prompt" not in sent, "the context after both: %s", sent[:400])
    # --code keeps the conversation
    rc, out, err = cli(server, "rewind", sid, "--to", str(cp["seq_of"]), "--code", "--json")
    body = [r for r in json_lines(out) if r.get("kind") == "session.rewound"][0]["body"]
    check(rc == 0 and "conversation" not in body, "--code: %d %r", rc, body)
    server.stop()
    llm.stop()


def test_a_worker_session_rewinds_on_the_worker():
    ws = git_workspace()
    llm = LLM()
    llm.script("wk", [{"tool_calls": [tool("write_file", "c1", path="x.txt", content="x\n")]},
                      {"text": "one"},
                      {"tool_calls": [shell("echo y > x.txt && rm a.txt", "c2")]},
                      {"text": "two"}])
    server = Server(args=llm_args(llm, "wk"), env=LLM_ENV).start()
    w = start_worker(server, "wr")
    sid = new_session(server, ws, approval_policy="yolo", target="worker:p")
    r1 = session_prompt(server, sid, "go")
    check(wait_run(server, r1, timeout=30)["worker_id"] == "wr", "run 1 was not the worker's")
    wait_run(server, session_prompt(server, sid, "more"), timeout=30)
    at = max(e["seq"] for e in tape(server, sid) if e.get("run_id") == r1)
    cp = [c for c in checkpoints(tape(server, sid)) if c["seq_of"] <= at][-1]
    check(read(os.path.join(ws, "x.txt")) == "y\n" and not os.path.exists(os.path.join(ws, "a.txt")), "run 2")
    m = server.control().request("session.rewind", {"session_id": sid, "to_seq": at})
    check(m.type == "session.rewind.ok", "rewind: %r", m.body)
    run = wait_run(server, m.body["run_id"], timeout=30)
    check(run["status"] == "completed" and run["worker_id"] == "wr", "the rewind did not run on the worker: %r\n%s",
          run, w.log())
    check(disk_tree(ws) == cp["tree"] and read(os.path.join(ws, "x.txt")) == "x\n", "the work tree")
    body = rewound(tape(server, sid))[-1]
    check(body.get("conversation") is True and body["checkpoint_seq"] == cp["seq_of"], "%r", body)
    check(call(server, "session.get", {"session_id": sid})["session"]["context_cuts"][0]["after"] == at, "no cut")
    w.stop()
    server.stop()
    llm.stop()


def test_the_person_s_own_edits_beside_the_agent_s_are_left_alone():
    ws = git_workspace()
    llm = LLM()
    llm.script("own", [{"tool_calls": [tool("write_file", "c1", path="new.txt", content="one\n")]},
                       {"text": "one"},
                       {"tool_calls": [shell("echo agent > new.txt && echo made > agent2.txt && rm notes.txt",
                                             "c2")]},
                       {"text": "two"}])
    server = Server(args=llm_args(llm, "own"), env=LLM_ENV).start()
    sid = new_session(server, ws, approval_policy="yolo")
    r1 = prompt(server, sid, "go")
    wait_run(server, r1, timeout=30)
    at = max(e["seq"] for e in tape(server, sid) if e.get("run_id") == r1)
    # the person, between the runs and after the last one
    write(os.path.join(ws, "a.txt"), "the person's alpha\n")
    write(os.path.join(ws, "mine.txt"), "mine\n")
    wait_run(server, prompt(server, sid, "more"), timeout=30)
    write(os.path.join(ws, "late.txt"), "late\n")
    now = disk_tree(ws)
    rc, out, err = cli(server, "rewind", sid, "--to", str(at), "--json")
    check(rc == 0, "rewind: %d %s %s", rc, out, err)
    body = [r for r in json_lines(out) if r.get("kind") == "session.rewound"][0]["body"]
    # the agent's changes after `at` go back
    check(read(os.path.join(ws, "new.txt")) == "one\n" and not os.path.exists(os.path.join(ws, "agent2.txt"))
          and read(os.path.join(ws, "notes.txt")) == "the person's untracked notes\n", "the agent's changes")
    check(sorted(body["restored"]) == ["new.txt", "notes.txt"] and body["removed"] == ["agent2.txt"], "%r", body)
    # the person's stay, and are named
    check(read(os.path.join(ws, "a.txt")) == "the person's alpha\n" and read(os.path.join(ws, "mine.txt")) == "mine\n"
          and read(os.path.join(ws, "late.txt")) == "late\n", "the person's edits were undone")
    left = sorted(n["path"] for n in body["not_restored"] if "person" in n["why"])
    check(left == ["a.txt", "late.txt", "mine.txt"], "not_restored: %r", body["not_restored"])
    rc, out, err = cli(server, "rewind", sid, "--undo")
    check(rc == 0 and disk_tree(ws) == now, "undo: %d %s %s", rc, out, err)
    server.stop()
    llm.stop()


def test_sigkill_during_a_rewind_leaves_the_tape_and_the_work_tree_agreeing():
    ws = git_workspace()
    llm = LLM()
    # a run that makes many files, so that putting the tree back takes a
    # while and the kill lands inside it
    llm.script("kill", [{"tool_calls": [tool("write_file", "c1", path="x.txt", content="x\n")]},
                        {"text": "one"},
                        {"tool_calls": [shell("mkdir many && cd many && seq 1 %d | xargs touch" % MANY, "c2")]},
                        {"text": "two"}])
    server = Server(args=llm_args(llm, "kill"), env=LLM_ENV).start()
    sid = new_session(server, ws, approval_policy="yolo")
    r1 = prompt(server, sid, "go")
    wait_run(server, r1, timeout=30)
    wait_run(server, prompt(server, sid, "many"), timeout=60)
    at = max(e["seq"] for e in tape(server, sid) if e.get("run_id") == r1)
    cp = [c for c in checkpoints(tape(server, sid)) if c["seq_of"] <= at][-1]
    now = disk_tree(ws)
    m = server.control().request("session.rewind", {"session_id": sid, "to_seq": at})
    check(m.type == "session.rewind.ok", "rewind: %r", m.body)
    rid = m.body["run_id"]
    ref = "refs/switchboard/checkpoints/" + sid
    wait_for(lambda: "before the rewind" in git(ws, "log", "-n1", "--format=%s", ref), 30, "the rewind to start")
    server.stop(sig=signal.SIGKILL)
    left = len(os.listdir(os.path.join(ws, "many"))) if os.path.isdir(os.path.join(ws, "many")) else 0
    print("  killed with %d of %d files left to remove" % (left, MANY))
    server = Server(data=server.data, args=llm_args(llm, "kill"), env=LLM_ENV).start()
    run = wait_run(server, rid, timeout=60)
    check(run["status"] == "completed", "the rewind after the restart: %r", run)
    check("rewind run=%s started again" % rid in server.log(), "the rewind was not run again after the kill "
          "(it ended before it: make MANY larger)")
    body = rewound(tape(server, sid))
    check(len(body) == 1 and body[0]["tree_before"] == now and body[0]["tree_after"] == cp["tree"],
          "session.rewound after the restart: %r (before %s, checkpoint %s)", body, now, cp["tree"])
    check(disk_tree(ws) == cp["tree"] and not os.path.exists(os.path.join(ws, "many")), "the work tree does not "
          "agree with the tape")
    # the undo gives back the tree the rewind found, not a half one
    rc, out, err = cli(server, "rewind", sid, "--undo")
    check(rc == 0 and disk_tree(ws) == now, "undo after the restart: %d %s %s", rc, out, err)
    server.stop()
    llm.stop()


if __name__ == "__main__":
    run_tests(globals())
