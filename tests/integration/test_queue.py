#!/usr/bin/python3
"""Queue and steer (issue 14): a person keeps talking while the agent works.

  - steer: a scripted model calls a slow shell tool three times; a steer
    sent during the first tool is a user message in the very next model
    request, right after that tool's output, in the same run, and the tape
    holds prompt.steered;
  - queue: two prompts back to back; the second runs as the next run,
    after the first completes, with its text as the run's input;
  - crash: SIGKILL with one prompt queued and one steer pending; after the
    restart the queue is paused and holds both, in order; `queue resume`
    runs each exactly once;
  - cancel: a cancel with a steer pending puts the steer back in the queue
    (paused), and nothing starts by surprise;
  - idempotency: the same command_id twice queues once (and starts once);
  - queue rm, exit codes and --json of prompt / queue;
  - with a fake executor: session.steer.take refuses a stale fence and
    takes only its own run's steers; a steer a completed run did not take
    runs next;
  - the crash window between a queued prompt's run being made and
    prompt.dequeued: resuming gets the same run back, never a second;
  - the queue's bounds (overloaded) and bad fields.

The slow tool waits for a gate file the test creates, so nothing here
sleeps to wait: every wait is for a condition with a deadline.
"""
import json
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import SB_BIN, Instance, Server, check, cli, run_tests, tmpdir, wait_for  # noqa: E402
from sbagent import (LLM, call, kinds, llm_server, new_session, prompt_call, prompt_ok, queue_list,  # noqa: E402
                     runs_of, tape, wait_run, gate, shell_turn, open_gate, wait_file)


def user_texts(items):
    """The user messages of a Responses request's input, in order."""
    out = []
    for i in items:
        if i.get("role") != "user":
            continue
        c = i.get("content")
        if isinstance(c, list):
            c = "".join(p.get("text", "") for p in c if isinstance(p, dict))
        out.append(c)
    return out


# ---------------------------------------------------------------------------

def test_steer_joins_the_running_run_at_the_next_step():
    llm = LLM()
    ws = tmpdir()
    llm.script("steer", [shell_turn("c1", gate("go1", mark="in1")), shell_turn("c2", gate("go2")),
                         shell_turn("c3", gate("go3")), {"text": "all done"}])
    server = llm_server(llm, "steer")
    try:
        sid = new_session(server, ws, approval_policy="yolo")
        first = prompt_ok(server, sid, "start the work")
        run_id = first["run_id"]
        check(first.get("run", {}).get("run_id") == run_id, "no run in %r", first)
        wait_file(ws, "in1")
        # the first tool runs: a steer now joins at the next step
        st = prompt_ok(server, sid, "actually, use JWT, not sessions", mode="steer")
        check(st.get("steered") is True and st.get("prompt_id", "").startswith("pr_") and "run_id" not in st,
              "steer answered %r", st)
        q = queue_list(server, sid)
        check(q["prompts"] == [] and [s["prompt_id"] for s in q["steers"]] == [st["prompt_id"]]
              and q["steers"][0]["run_id"] == run_id, "queue while the steer waits: %r", q)
        open_gate(ws, "go1")
        wait_for(lambda: len(llm.requests("steer")) >= 2, 20, "the second model request")
        items = llm.requests("steer")[1]["json"]["input"]
        outs = [k for k, i in enumerate(items) if i.get("type") == "function_call_output"]
        users = [k for k, i in enumerate(items) if i.get("role") == "user"]
        check(len(outs) == 1 and items[outs[0]].get("call_id") == "c1", "outputs of request 2: %r", items)
        check(user_texts(items) == ["start the work", "actually, use JWT, not sessions"],
              "the user messages of request 2: %r", user_texts(items))
        check(users[-1] == outs[0] + 1, "the steer is not right after the first tool's output: %r", items)
        open_gate(ws, "go2")
        open_gate(ws, "go3")
        run = wait_run(server, run_id, timeout=30)
        check(run["status"] == "completed", "run %r", run)
        # the same run took it; no other run started
        check([r["run_id"] for r in runs_of(server, sid)] == [run_id], "runs %r", runs_of(server, sid))
        entries = tape(server, sid)
        steered = [e for e in entries if e["kind"] == "prompt.steered"]
        check(len(steered) == 1 and steered[0]["run_id"] == run_id and steered[0]["body"]["step"] == 2
              and steered[0]["body"]["prompt_id"] == st["prompt_id"]
              and steered[0]["body"]["text"] == "actually, use JWT, not sessions", "prompt.steered %r", steered)
        ks = kinds(entries)
        check(ks.index("prompt.queued") < ks.index("prompt.steered"), "tape %r", ks)
        # after the first tool's result, before the second model call's entries
        res1 = [k for k, e in enumerate(entries) if e["kind"] == "tool.result" and e["body"]["call_id"] == "c1"][0]
        call2 = [k for k, e in enumerate(entries) if e["kind"] == "tool.call" and e["body"]["call_id"] == "c2"][0]
        check(res1 < ks.index("prompt.steered") < call2, "prompt.steered is not between c1's result and c2: %r", ks)
        # the later requests keep it, once
        last = llm.requests("steer")[-1]["json"]["input"]
        check(user_texts(last).count("actually, use JWT, not sessions") == 1, "last request %r", user_texts(last))
        check(queue_list(server, sid)["steers"] == [], "the steer is still pending")
    finally:
        for g in ("go1", "go2", "go3"):
            open_gate(ws, g)
        server.stop()
        llm.stop()


def test_queue_runs_the_second_prompt_next():
    llm = LLM()
    ws = tmpdir()
    llm.script("queue", [shell_turn("c1", gate("go", mark="in")), {"text": "first done"},
                         {"text": "second done"}])
    server = llm_server(llm, "queue")
    try:
        sid = new_session(server, ws, approval_policy="yolo")
        # back to back: the second comes before the first run is on the tape
        id1 = server.control().send("session.prompt", {"session_id": sid, "text": "first prompt"})
        id2 = server.control().send("session.prompt", {"session_id": sid, "text": "then fix the tests"})
        a = server.control().wait_reply(id1, 15)
        b = server.control().wait_reply(id2, 15)
        check(a.type == "session.prompt.ok" and a.body.get("run_id"), "first answered %s %r", a.type, a.body)
        check(b.type == "session.prompt.ok" and b.body.get("queued") == 1 and "run_id" not in b.body,
              "second answered %s %r", b.type, b.body)
        q = queue_list(server, sid)
        check([p["text"] for p in q["prompts"]] == ["then fix the tests"] and q["paused"] is False,
              "queue %r", q)
        check(q["prompts"][0]["prompt_id"] == b.body["prompt_id"] and q["prompts"][0]["mode"] == "queue", "queue %r", q)
        wait_file(ws, "in")
        check(len(runs_of(server, sid)) == 1, "a second run started while the first runs: %r", runs_of(server, sid))
        open_gate(ws, "go")
        wait_run(server, a.body["run_id"], timeout=30)
        wait_for(lambda: len(runs_of(server, sid)) == 2, 20, "the queued prompt's run")
        second = runs_of(server, sid)[1]
        check(second["input"] == "then fix the tests", "second run %r", second)
        done = wait_run(server, second["run_id"], timeout=30)
        check(done["status"] == "completed", "second run %r", done)
        entries = tape(server, sid)
        ks = kinds(entries)
        deq = [e for e in entries if e["kind"] == "prompt.dequeued"]
        check(len(deq) == 1 and deq[0]["body"] == {"prompt_id": b.body["prompt_id"], "run_id": second["run_id"]},
              "prompt.dequeued %r", deq)
        first_end = [k for k, e in enumerate(entries) if e["kind"] == "run.status"
                     and e["body"]["status"] == "completed"][0]
        second_prompt = [k for k, e in enumerate(entries) if e["kind"] == "prompt"][1]
        check(first_end < second_prompt, "the second prompt started before the first run ended: %r", ks)
        check(ks.count("prompt") == 2 and ks.count("prompt.queued") == 1, "tape %r", ks)
        # the model saw the second prompt as the user's latest words
        reqs = llm.requests("queue")
        check(len(reqs) == 3 and user_texts(reqs[2]["json"]["input"])[-1] == "then fix the tests",
              "third request %r", reqs[-1]["json"]["input"] if reqs else None)
        check(queue_list(server, sid)["prompts"] == [], "the queue is not empty")
    finally:
        open_gate(ws, "go")
        server.stop()
        llm.stop()


def test_crash_pauses_the_queue_and_resume_runs_each_once():
    llm = LLM()
    ws = tmpdir()
    llm.script("crash", [shell_turn("c1", gate("never", mark="in")), {"text": "steer ran"},
                         {"text": "queued ran"}])
    server = llm_server(llm, "crash")
    try:
        sid = new_session(server, ws, approval_policy="yolo")
        run_a = prompt_ok(server, sid, "long job")["run_id"]
        wait_file(ws, "in")
        q1 = prompt_ok(server, sid, "queued prompt", mode="queue")
        s1 = prompt_ok(server, sid, "steer prompt", mode="steer")
        check(q1.get("queued") == 1 and s1.get("steered") is True, "answers %r %r", q1, s1)
        server.stop(signal.SIGKILL)
        server.start()
        q = queue_list(server, sid)
        check(q["paused"] is True and q.get("reason") == "server_restart", "queue after the restart %r", q)
        check([(p["prompt_id"], p["text"]) for p in q["prompts"]]
              == [(s1["prompt_id"], "steer prompt"), (q1["prompt_id"], "queued prompt")]
              and q["steers"] == [], "queue after the restart %r", q)
        check(get_status(server, run_a) == "interrupted", "run A is %s", get_status(server, run_a))
        check(len(runs_of(server, sid)) == 1, "a run started by surprise: %r", runs_of(server, sid))
        ks = kinds(tape(server, sid))
        check("queue.paused" in ks, "no queue.paused on the tape: %r", ks)
        rc, out, err = cli(server, "queue", "resume", sid)
        check(rc == 0 and "resumed" in out, "queue resume: %d %s %s", rc, out, err)
        wait_for(lambda: len(runs_of(server, sid)) == 3
                 and all(r["status"] == "completed" for r in runs_of(server, sid)[1:]), 30,
                 "both queued prompts to run")
        runs = runs_of(server, sid)
        check([r.get("input") for r in runs] == ["long job", "steer prompt", "queued prompt"], "runs %r", runs)
        check(queue_list(server, sid) == {"prompts": [], "steers": [], "paused": False}, "queue %r",
              queue_list(server, sid))
        # exactly once: a restart now (the queue is empty) starts nothing more
        server.stop(signal.SIGKILL)
        server.start()
        check(len(runs_of(server, sid)) == 3, "runs after a second restart %r", runs_of(server, sid))
        deq = [e["body"]["prompt_id"] for e in tape(server, sid) if e["kind"] == "prompt.dequeued"]
        check(deq == [s1["prompt_id"], q1["prompt_id"]], "prompt.dequeued %r", deq)
    finally:
        open_gate(ws, "never")
        server.stop()
        llm.stop()


def get_status(server, run_id):
    return call(server, "run.get", {"run_id": run_id})["run"]["status"]


def test_cancel_puts_a_pending_steer_back_in_the_queue():
    llm = LLM()
    ws = tmpdir()
    llm.script("cancel", [shell_turn("c1", gate("never", mark="in")), {"text": "the steer ran"}])
    server = llm_server(llm, "cancel")
    try:
        sid = new_session(server, ws, approval_policy="yolo")
        run_a = prompt_ok(server, sid, "long job")["run_id"]
        wait_file(ws, "in")
        s1 = prompt_ok(server, sid, "do this instead", mode="steer")
        rc, out, err = cli(server, "cancel", run_a)
        check(rc == 0, "cancel: %d %s %s", rc, out, err)
        run = wait_run(server, run_a, timeout=15)
        check(run["status"] == "cancelled", "run %r", run)
        q = queue_list(server, sid)
        check(q["paused"] is True and q.get("reason") == "cancelled"
              and [p["prompt_id"] for p in q["prompts"]] == [s1["prompt_id"]] and q["steers"] == [],
              "queue after the cancel %r", q)
        entries = tape(server, sid)
        back = [e for e in entries if e["kind"] == "prompt.queued" and e["body"]["prompt_id"] == s1["prompt_id"]]
        check(len(back) == 2 and back[1]["body"]["mode"] == "queue" and back[1]["body"]["position"] == 1
              and "cancel" in back[1]["body"]["reason"], "prompt.queued entries of the steer %r", back)
        check("prompt.steered" not in kinds(entries), "the cancelled run took the steer")
        check(len(runs_of(server, sid)) == 1, "a run started by surprise: %r", runs_of(server, sid))
        # `queue` shows it, paused
        rc, out, err = cli(server, "queue", sid)
        check(rc == 0 and "paused" in out and "do this instead" in out, "queue: %d %s %s", rc, out, err)
        # resume: the steer runs as the next run
        call(server, "session.queue.resume", {"session_id": sid})
        wait_for(lambda: len(runs_of(server, sid)) == 2, 20, "the steer's run")
        second = runs_of(server, sid)[1]
        check(second["input"] == "do this instead", "second run %r", second)
        check(wait_run(server, second["run_id"], timeout=30)["status"] == "completed", "second run")
    finally:
        open_gate(ws, "never")
        server.stop()
        llm.stop()


def test_same_command_id_queues_once():
    llm = LLM()
    ws = tmpdir()
    llm.script("idem", [shell_turn("c1", gate("go", mark="in")), {"text": "one"}, {"text": "two"}])
    server = llm_server(llm, "idem")
    try:
        sid = new_session(server, ws, approval_policy="yolo")
        a1 = prompt_ok(server, sid, "first", command_id="cmd-a")
        wait_file(ws, "in")
        # the retry of a prompt that started a run, while that run is active: the same run
        a2 = prompt_ok(server, sid, "first", command_id="cmd-a")
        check(a2.get("run_id") == a1["run_id"], "retry of the started prompt answered %r", a2)
        b1 = prompt_ok(server, sid, "second", command_id="cmd-b")
        b2 = prompt_ok(server, sid, "second", command_id="cmd-b")
        check(b1 == b2 and b1.get("queued") == 1, "retries answered %r and %r", b1, b2)
        m = prompt_call(server, sid, "another text", command_id="cmd-b")
        check(m.is_error() and m.code == "conflict", "reuse with another body answered %s %r", m.type, m.body)
        check(len(queue_list(server, sid)["prompts"]) == 1, "queue %r", queue_list(server, sid))
        check(kinds(tape(server, sid)).count("prompt.queued") == 1, "tape %r", kinds(tape(server, sid)))
        open_gate(ws, "go")
        wait_for(lambda: len(runs_of(server, sid)) == 2
                 and runs_of(server, sid)[1]["status"] == "completed", 30, "the queued run")
        check(len(runs_of(server, sid)) == 2, "runs %r", runs_of(server, sid))
    finally:
        open_gate(ws, "go")
        server.stop()
        llm.stop()


def test_cli_prompt_queue_rm_resume_exit_codes_and_json():
    llm = LLM()
    ws = tmpdir()
    llm.script("cli", [shell_turn("c1", gate("go", mark="in")), {"text": "first done"},
                       {"text": "second done"}, {"text": "follow done"}])
    server = llm_server(llm, "cli")
    try:
        sid = new_session(server, ws, approval_policy="yolo")
        rc, out, err = cli(server, "prompt", sid, "first", "--json")
        check(rc == 0 and json.loads(out).get("run_id"), "prompt: %d %s %s", rc, out, err)
        first_run = json.loads(out)["run_id"]
        wait_file(ws, "in")
        # without a flag it queues, and says so with the position
        rc, out, err = cli(server, "prompt", sid, "second")
        check(rc == 0 and "queued at position 1" in out and "pr_" in out, "prompt while busy: %d %s %s",
              rc, out, err)
        rc, out, err = cli(server, "prompt", sid, "third", "--queue", "--json")
        third = json.loads(out)
        check(rc == 0 and third.get("queued") == 2 and third["prompt_id"].startswith("pr_"),
              "prompt --queue --json: %d %s %s", rc, out, err)
        rc, out, err = cli(server, "prompt", sid, "steer me", "--steer", "--json")
        check(rc == 0 and json.loads(out).get("steered") is True, "prompt --steer --json: %d %s %s", rc, out, err)
        # --follow on a steer: waits until the run takes it, then streams that run
        ps = subprocess.Popen([SB_BIN, "prompt", sid, "steer me too", "--steer", "--follow", "--data", server.data],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wait_for(lambda: len(queue_list(server, sid)["steers"]) == 2, 10, "the followed steer to wait")
        rc, out, err = cli(server, "prompt", sid, "x", "--queue", "--steer")
        check(rc == 2 and "exclude" in err, "--queue --steer: %d %s", rc, err)
        rc, out, err = cli(server, "runs", "--queue")
        check(rc == 2, "runs --queue: %d %s", rc, err)
        # the queue, as one JSON document and as text
        rc, out, err = cli(server, "queue", sid, "--json")
        q = json.loads(out)
        check(rc == 0 and len(out.strip().splitlines()) == 1, "queue --json: %d %s %s", rc, out, err)
        check([p["text"] for p in q["prompts"]] == ["second", "third"]
              and [x["text"] for x in q["steers"]] == ["steer me", "steer me too"] and q["paused"] is False,
              "queue --json %r", q)
        rc, out, err = cli(server, "queue", "last")
        check(rc == 0 and "2 queued" in out and "third" in out and "steer me" in out, "queue: %d %s %s",
              rc, out, err)
        # rm: then it is gone, and removing it again fails
        rc, out, err = cli(server, "queue", "rm", sid, third["prompt_id"])
        check(rc == 0 and "removed" in out, "queue rm: %d %s %s", rc, out, err)
        rc, out, err = cli(server, "queue", "rm", sid, third["prompt_id"], "--json")
        check(rc == 1 and "not_found" in err, "queue rm again: %d %s %s", rc, out, err)
        for args in (("queue", "rm", sid, "bogus"), ("queue", "rm", sid), ("queue",), ("queue", "resume"),
                     ("queue", sid, "extra"), ("queue", "not-an-id!")):
            rc, out, err = cli(server, *args)
            check(rc == 2, "%r exited %d: %s", args, rc, err)
        rc, out, _ = cli(server, "queue", "--help")
        check(rc == 0 and "queue resume SESSION" in out, "queue --help: %d", rc)
        rc, out, _ = cli(server, "prompt", "--help")
        check(rc == 0 and "--steer" in out and "--queue" in out, "prompt --help: %d", rc)
        rc, out, err = cli(server, "queue", "resume", sid, "--json")
        check(rc == 0 and json.loads(out) == {"queued": 1, "paused": False}, "queue resume --json: %d %s %s",
              rc, out, err)
        # --follow on a queued prompt: waits for its run, then streams it
        p = subprocess.Popen([SB_BIN, "prompt", sid, "follow me", "--follow", "--data", server.data],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wait_for(lambda: len(queue_list(server, sid)["prompts"]) == 2, 10, "the followed prompt to be queued")
        open_gate(ws, "go")
        out, err = p.communicate(timeout=60)
        out = out.decode()
        check(p.returncode == 0, "prompt --follow of a queued prompt exited %d: %s %s", p.returncode, out, err)
        check("queued at position 2" in out and "started run" in out and "follow done" in out,
              "prompt --follow output: %s", out)
        out, err = ps.communicate(timeout=30)
        out = out.decode()
        check(ps.returncode == 0 and "steered: prompt pr_" in out and "joined run %s at step 2" % first_run in out
              and "first done" in out, "prompt --steer --follow exited %d: %s %s", ps.returncode, out, err)
        runs = runs_of(server, sid)
        check([r.get("input") for r in runs] == ["first", "second", "follow me"]
              and runs[0]["run_id"] == first_run, "runs %r", runs)
        steered = [e for e in tape(server, sid) if e["kind"] == "prompt.steered"]
        check(len(steered) == 2 and all(e["run_id"] == first_run for e in steered), "prompt.steered %r", steered)
    finally:
        open_gate(ws, "go")
        server.stop()
        llm.stop()


def test_steer_take_fences_and_a_completed_run_hands_its_untaken_steer_on():
    """With a fake executor, so that what it takes and when is the test's:
    session.steer.take refuses a stale fence and takes only its run's
    steers; a steer the run did not take before it completed is the next
    run, at once (a completed run does not pause the queue)."""
    server = Server(args=["--actors", "session,run"]).start()
    fake = Instance(server.endpoint(), name="fake-exec")
    try:
        check(fake.register("exec", "fake-exec").type == "bus.ready.ok", "register")
        sid = new_session(server, tmpdir(), approval_policy="yolo")
        ctl = server.control()
        pid = ctl.send("session.prompt", {"session_id": sid, "text": "first"})
        start = fake.next_request(timeout=5)
        check(start is not None and start.type == "exec.start", "no exec.start: %r", start)
        fake.reply(start, body={"instance": "fake-exec"})
        first = ctl.wait_reply(pid, 10)
        run_id, fence = start.body["run_id"], start.body["fence"]
        check(first.type == "session.prompt.ok" and first.body["run_id"] == run_id, "prompt: %r", first.body)
        hb = fake.request("run.heartbeat", {"run_id": run_id, "fence": fence, "phase": "model"})
        check(hb.type == "run.heartbeat.ok", "heartbeat %r", hb.body)
        wait_for(lambda: call(server, "session.get", {"session_id": sid})["session"]["turn_status"] == "running",
                 5, "the session to be running")
        s1 = prompt_ok(server, sid, "steer one", mode="steer")
        check(s1.get("steered") is True, "steer %r", s1)
        m = fake.request("session.steer.take", {"session_id": sid, "run_id": run_id, "fence": fence - 1, "step": 2})
        check(m.is_error() and m.code == "fenced", "a stale fence took steers: %s %r", m.type, m.body)
        m = fake.request("session.steer.take", {"session_id": sid, "run_id": "0" * 26, "fence": fence, "step": 2})
        check(m.type == "session.steer.take.ok" and m.body["taken"] == 0, "another run took it: %r", m.body)
        m = fake.request("session.steer.take", {"session_id": sid, "run_id": run_id, "fence": fence, "step": 2})
        check(m.type == "session.steer.take.ok" and m.body["taken"] == 1, "take: %s %r", m.type, m.body)
        m = fake.request("session.steer.take", {"session_id": sid, "run_id": run_id, "fence": fence, "step": 3})
        check(m.type == "session.steer.take.ok" and m.body["taken"] == 0, "a second take: %r", m.body)
        steered = [e for e in tape(server, sid) if e["kind"] == "prompt.steered"]
        check(len(steered) == 1 and steered[0]["run_id"] == run_id and steered[0]["body"]["step"] == 2,
              "prompt.steered %r", steered)
        # a steer the run never takes: it completes, and the steer runs next
        s2 = prompt_ok(server, sid, "steer two", mode="steer")
        fin = fake.request("run.finish", {"run_id": run_id, "fence": fence, "status": "completed"})
        check(fin.type == "run.finish.ok", "finish %r", fin.body)
        start2 = fake.next_request(timeout=10)
        check(start2 is not None and start2.type == "exec.start", "no second exec.start: %r", start2)
        fake.reply(start2, body={"instance": "fake-exec"})
        wait_for(lambda: len(runs_of(server, sid)) == 2
                 and "prompt.dequeued" in kinds(tape(server, sid)), 10, "the second run")
        second = runs_of(server, sid)[1]
        check(second["run_id"] == start2.body["run_id"] and second["input"] == "steer two", "second run %r", second)
        q = queue_list(server, sid)
        check(q == {"prompts": [], "steers": [], "paused": False}, "queue %r", q)
        back = [e["body"] for e in tape(server, sid) if e["kind"] == "prompt.queued"
                and e["body"]["prompt_id"] == s2["prompt_id"]]
        check(len(back) == 2 and "completed" in back[1]["reason"], "prompt.queued of the steer %r", back)
    finally:
        fake.close()
        server.stop()


def test_a_run_made_before_the_dequeue_is_not_made_twice():
    """The state a crash leaves between the run coordinator making a queued
    prompt's run and the session recording prompt.dequeued: the run exists
    (made here by sending the very run.request the session actor sends,
    command_id queue:<prompt_id>), the prompt still heads the paused
    queue. Resuming gets that run back: prompt.dequeued names it, and no
    second run is made."""
    server = Server(args=["--actors", "session,run"]).start()
    fake = Instance(server.endpoint(), name="fake-exec")
    try:
        check(fake.register("exec", "fake-exec").type == "bus.ready.ok", "register")
        sid = new_session(server, tmpdir())
        pid = server.control().send("session.prompt", {"session_id": sid, "text": "first"})
        start = fake.next_request(timeout=5)
        fake.reply(start, body={"instance": "fake-exec"})
        check(server.control().wait_reply(pid, 10).type == "session.prompt.ok", "first prompt")
        run_a, fence = start.body["run_id"], start.body["fence"]
        fake.request("run.heartbeat", {"run_id": run_a, "fence": fence, "phase": "model"})
        wait_for(lambda: call(server, "session.get", {"session_id": sid})["session"]["turn_status"] == "running",
                 5, "the session to be running")
        p = prompt_ok(server, sid, "second")
        fin = fake.request("run.finish", {"run_id": run_a, "fence": fence, "status": "failed", "reason": "boom"})
        check(fin.type == "run.finish.ok", "finish %r", fin.body)
        wait_for(lambda: queue_list(server, sid)["paused"], 5, "the failure to pause the queue")
        check(queue_list(server, sid).get("reason") == "failed", "queue %r", queue_list(server, sid))
        # the run the session actor would ask for, made before it records it
        rid = server.control().send("run.request", {"session_id": sid, "input": "second",
                                                    "command_id": "queue:" + p["prompt_id"]})
        start_b = fake.next_request(timeout=5)
        fake.reply(start_b, body={"instance": "fake-exec"})
        made = server.control().wait_reply(rid, 10)
        check(made.type == "run.request.ok", "run.request %r", made.body)
        run_b = made.body["run"]["run_id"]
        fin = fake.request("run.finish", {"run_id": run_b, "fence": start_b.body["fence"], "status": "completed"})
        check(fin.type == "run.finish.ok", "finish B %r", fin.body)
        check([x["prompt_id"] for x in queue_list(server, sid)["prompts"]] == [p["prompt_id"]], "queue %r",
              queue_list(server, sid))
        call(server, "session.queue.resume", {"session_id": sid})
        wait_for(lambda: "prompt.dequeued" in kinds(tape(server, sid)), 10, "prompt.dequeued")
        deq = [e for e in tape(server, sid) if e["kind"] == "prompt.dequeued"]
        check(len(deq) == 1 and deq[0]["body"]["run_id"] == run_b and deq[0]["run_id"] == run_b, "dequeued %r", deq)
        check(fake.next_request(timeout=0.5) is None, "a second run was handed to the executor")
        check([r["run_id"] for r in runs_of(server, sid)] == [run_a, run_b], "runs %r", runs_of(server, sid))
        check(queue_list(server, sid) == {"prompts": [], "steers": [], "paused": False}, "queue %r",
              queue_list(server, sid))
    finally:
        fake.close()
        server.stop()


def test_limits_and_bad_input():
    """A queue a client can fill has bounds (overloaded past them); bad
    fields are refused before anything is written."""
    server = Server(args=["--actors", "session,run"],
                    env={"SWITCHBOARD_QUEUE_MAX": "2", "SWITCHBOARD_QUEUE_STEERS": "1"}).start()
    fake = Instance(server.endpoint(), name="fake-exec")
    try:
        check(fake.register("exec", "fake-exec").type == "bus.ready.ok", "register")
        sid = new_session(server, tmpdir())
        for body, word in (({"text": "x", "mode": "later"}, "mode"), ({"text": ""}, "text"), ({"text": "a\x00b"}, "NUL"),
                           ({"text": "x", "approval_policy": "sometimes"}, "approval_policy")):
            body["session_id"] = sid
            m = server.control().request("session.prompt", body)
            check(m.is_error() and m.code == "invalid" and word in m.body["message"], "%r answered %r", body, m.body)
        for pid in ("", "pr_\x00abc", "p" * 41):
            m = server.control().request("session.queue.remove", {"session_id": sid, "prompt_id": pid})
            check(m.is_error() and m.code in ("invalid", "too_large"), "prompt_id %r answered %r", pid, m.body)
        m = server.control().request("session.queue.remove", {"session_id": sid, "prompt_id": "pr_" + "0" * 26})
        check(m.is_error() and m.code == "not_found", "an unknown prompt answered %r", m.body)
        m = server.control().request("session.queue.list", {"session_id": "0" * 26})
        check(m.is_error() and m.code == "not_found", "an unknown session answered %r", m.body)
        # a run, then the bounds
        pid = server.control().send("session.prompt", {"session_id": sid, "text": "run"})
        start = fake.next_request(timeout=5)
        fake.reply(start, body={"instance": "fake-exec"})
        check(server.control().wait_reply(pid, 10).type == "session.prompt.ok", "first prompt")
        run_id, fence = start.body["run_id"], start.body["fence"]
        fake.request("run.heartbeat", {"run_id": run_id, "fence": fence, "phase": "model"})
        wait_for(lambda: call(server, "session.get", {"session_id": sid})["session"]["turn_status"] == "running",
                 5, "the session to be running")
        check(prompt_ok(server, sid, "q1")["queued"] == 1 and prompt_ok(server, sid, "q2")["queued"] == 2, "queue")
        m = prompt_call(server, sid, "q3")
        check(m.is_error() and m.code == "overloaded" and "SWITCHBOARD_QUEUE_MAX" in m.body["message"],
              "a third queued prompt answered %r", m.body)
        check(prompt_ok(server, sid, "s1", mode="steer").get("steered") is True, "steer")
        m = prompt_call(server, sid, "s2", mode="steer")
        check(m.is_error() and m.code == "overloaded", "a second steer answered %r", m.body)
        q = queue_list(server, sid)
        check(len(q["prompts"]) == 2 and len(q["steers"]) == 1, "queue %r", q)
        # a closed session takes no prompts
        call(server, "session.close", {"session_id": sid})
        m = prompt_call(server, sid, "late")
        check(m.is_error() and m.code == "conflict" and "closed" in m.body["message"], "closed answered %r", m.body)
        # deleting the session deletes its queue
        call(server, "session.delete", {"session_id": sid})
        m = server.control().request("session.queue.list", {"session_id": sid})
        check(m.is_error() and m.code == "not_found", "the queue outlived its session: %r", m.body)
    finally:
        fake.close()
        server.stop()


if __name__ == "__main__":
    run_tests(globals())
