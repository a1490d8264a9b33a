#!/usr/bin/python3
"""Budgets that pause and ask (docs/usage.md): a session's budgets in tokens,
dollars, steps and minutes hold for each of its runs; at 50 % and 80 % the
run writes budget.warning, and at 100 % it stops before its next model call,
waits in phase waiting_budget and asks a person with an interaction of kind
budget. Approve raises the budget (by its amount, or by raise) and the run
goes on; reject ends it with reason budget and pauses the queue. A question
survives a SIGKILL of serve, and no model call is made twice. A provider
that reports no token counts leaves a token budget unenforced, and the
session and `usage` say so.

The scripted provider is tests/llm_server.py on loopback, with known usage
per call; a minute is made 100 ms for the minutes budget
(SWITCHBOARD_BUDGET_MINUTE_MS, docs/testing.md)."""
import json
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import SB_BIN, Proc, Server, check, cli, run_tests, sb, tmpdir, wait_for  # noqa: E402
from sbagent import (LLM, LLM_ENV, RECORD, SUMMARY, WINDOW, call, compactions, get_run, hooks_file,  # noqa: E402
                     new_session, pending, prompt_ok, Term, queue_list, recorded, resolve, rest, session_prompt,
                     start_worker, stop, tape, tool, wait_run, workspace)

PRICES = {"input": 2.5, "output": 10}


def providers(llm, script, kind="responses", prices=PRICES):
    path = os.path.join(tmpdir(), "providers.json")
    m = {"name": "priced-1"}
    if prices:
        m["prices"] = prices
    with open(path, "w") as f:
        json.dump({"providers": [{"name": "fx", "kind": kind, "base_url": llm.url(script), "model": "priced-1",
                                  "models": [m], "key_env": "OPENAI_API_KEY"}]}, f)
    return path


def serve(llm, script, data=None, env=None, extra=(), **kw):
    e = dict(LLM_ENV)
    e.update(env or {})
    return Server(data=data, args=["--providers", providers(llm, script, **kw)] + list(extra), env=e).start()


def step(n, inp, out, **extra):
    """A model call that reads a file (the run goes on) and reports usage."""
    t = {"tool_calls": [tool("list_dir", "c%d" % n, path=".")], "usage": {"input_tokens": inp, "output_tokens": out}}
    t.update(extra)
    return t


def done(inp=1, out=1):
    return {"text": "done", "usage": {"input_tokens": inp, "output_tokens": out}}


def bodies(srv, sid, kind):
    return [e["body"] for e in tape(srv, sid) if e["kind"] == kind]


def waiting_budget(srv, run_id):
    return wait_for(lambda: (lambda r: r if r.get("phase") == "waiting_budget" else None)(get_run(srv, run_id)),
                    15, "run %s to wait at its budget" % run_id)


def test_tokens_warn_at_50_and_80_then_ask_and_approve_raises_by_the_amount():
    llm = LLM()
    # 300 tokens a call against 1000: 30, 60, 90, 120 %; raised to 2000: 150, 180 %
    llm.script("tok", [step(1, 200, 100), step(2, 200, 100), step(3, 200, 100), step(4, 200, 100),
                       step(5, 200, 100), done(200, 100)])
    srv = serve(llm, "tok")
    try:
        sid = new_session(srv, tmpdir(), budget={"tokens": 1000})
        rec = call(srv, "session.get", {"session_id": sid})["session"]
        check(rec.get("budget") == {"tokens": 1000}, "the record: %r", rec)
        rid = session_prompt(srv, sid, "go")
        waiting_budget(srv, rid)
        ia = pending(srv, sid)
        check(ia.get("kind") == "budget" and ia.get("budget") == "tokens" and ia.get("spent") == 1200
              and ia.get("limit") == 1000 and ia.get("default_outcome") == "reject", "the question: %r", ia)
        check(len(llm.requests("tok")) == 4, "model calls before the answer: %d", len(llm.requests("tok")))
        warns = bodies(srv, sid, "budget.warning")
        check([(w["budget"], w["percent"], w["spent"]) for w in warns] == [("tokens", 50, 600), ("tokens", 80, 900)],
              "warnings: %r", warns)
        # the transcript says them, and asks
        rc, out, err = cli(srv, "events", "--session", sid, "--text")
        check(rc == 0 and "50 % of the tokens budget spent" in out and "80 % of the tokens budget" in out
              and "budget reached: tokens spent 1200 tokens of 1000 tokens" in out, "transcript:\n%s%s", out, err)
        # interactions lists it, its tool is "budget"
        rc, out, err = cli(srv, "interactions", "--session", sid, "--status", "pending")
        check(rc == 0 and ia["interaction_id"] in out and "budget" in out, "interactions: %s %s", out, err)
        rc, out, err = cli(srv, "resolve", ia["interaction_id"], "--approve")
        check(rc == 0, "resolve: %s %s", out, err)
        run = wait_run(srv, rid)
        check(run["status"] == "completed", "the run: %r", run)
        raised = bodies(srv, sid, "budget.raised")
        check([(r["budget"], r["limit"], r["spent"]) for r in raised] == [("tokens", 2000, 1200)], "raised: %r", raised)
        check(len(llm.requests("tok")) == 6, "model calls: %d", len(llm.requests("tok")))
        asked = bodies(srv, sid, "approval.requested")
        check(len(asked) == 1 and asked[0].get("kind") == "budget", "asked: %r", asked)
    finally:
        stop(srv)
        llm.stop()


def test_a_raise_below_what_was_spent_asks_again_at_the_new_limit():
    llm = LLM()
    llm.script("small", [step(1, 200, 100), done()])
    srv = serve(llm, "small")
    try:
        sid = new_session(srv, tmpdir(), budget={"tokens": 100})
        rid = session_prompt(srv, sid, "go")
        limits, seen = [], set()

        def fresh():
            r = call(srv, "interact.list", {"session_id": sid, "status": "pending"})["interactions"]
            return r[0] if r and r[0]["interaction_id"] not in seen else None
        for raise_by in (50, None, 1000):       # 100 -> 150 -> 250 (its own amount) -> 1250
            ia = wait_for(fresh, 15, "the next question")
            seen.add(ia["interaction_id"])
            limits.append(ia["limit"])
            resolve(srv, ia["interaction_id"], **({"raise": raise_by} if raise_by else {}))
        run = wait_run(srv, rid)
        check(run["status"] == "completed", "the run: %r", run)
        check(limits == [100, 150, 250], "the limits asked at: %r", limits)
        check([r["limit"] for r in bodies(srv, sid, "budget.raised")] == [150, 250, 1250], "raised")
        check(len(llm.requests("small")) == 2, "model calls: %d", len(llm.requests("small")))
    finally:
        stop(srv)
        llm.stop()


def test_steps_reject_ends_the_run_with_reason_budget_and_pauses_the_queue():
    llm = LLM()
    llm.script("st", [step(1, 10, 10), step(2, 10, 10), step(3, 10, 10), done()])
    # the hooks' approval.requested fires for a budget question too
    hooked = tmpdir()
    hooks = hooks_file({"approval.requested": [{"command": RECORD, "timeout_s": 10, "env": {"OUT": hooked},
                                                "writable": [hooked]}]})
    srv = serve(llm, "st", extra=["--hooks", hooks])
    try:
        sid = new_session(srv, tmpdir())
        rc, out, err = cli(srv, "sessions", "update", sid, "--budget-steps", "2", "--json")
        check(rc == 0 and json.loads(out)["budget"] == {"steps": 2}, "update: %s %s", out, err)
        rid = session_prompt(srv, sid, "first")
        waiting_budget(srv, rid)
        rc, out, err = cli(srv, "runs", "--session", sid)
        check(rc == 0 and "waiting_budget: " in out, "runs: %s %s", out, err)
        queued = prompt_ok(srv, sid, "second")
        check(queued.get("queued") == 1, "the second prompt: %r", queued)
        ia = pending(srv, sid)
        check(ia["budget"] == "steps" and ia["spent"] == 2 and ia["limit"] == 2, "the question: %r", ia)
        wait_for(lambda: recorded(hooked, "approval.requested"), 10, "the approval.requested hook")
        ev = recorded(hooked, "approval.requested")[0][0]
        check(ev["body"].get("kind") == "budget" and ev["body"].get("budget") == "steps"
              and ev["body"]["interaction_id"] == ia["interaction_id"] and ev["run_id"] == rid, "the hook's event: %r", ev)
        rc, out, err = cli(srv, "resolve", ia["interaction_id"], "--reject", "--feedback", "enough")
        check(rc == 0, "resolve: %s %s", out, err)
        run = wait_run(srv, rid)
        check(run["status"] == "failed" and run["reason"].startswith("budget:") and "steps" in run["reason"],
              "the run: %r", run)
        check(len(llm.requests("st")) == 2, "model calls: %d", len(llm.requests("st")))
        q = wait_for(lambda: (lambda q: q if q.get("paused") else None)(queue_list(srv, sid)), 10, "the queue to pause")
        check(q.get("reason") == "budget" and len(q.get("prompts", q.get("items", []))) == 1, "the queue: %r", q)
        # --raise goes with a budget question approved only
        rc, out, err = cli(srv, "resolve", ia["interaction_id"], "--reject", "--raise", "3")
        check(rc == 2 and "--raise goes with --approve" in err, "raise with reject: %d %s", rc, err)
    finally:
        stop(srv)
        llm.stop()


def test_a_cancel_while_the_question_waits_ends_the_run_and_answers_it():
    llm = LLM()
    llm.script("cx", [step(1, 10, 10), done()])
    srv = serve(llm, "cx")
    try:
        sid = new_session(srv, tmpdir(), budget={"steps": 1})
        rid = session_prompt(srv, sid, "go")
        waiting_budget(srv, rid)
        ia = pending(srv, sid)
        call(srv, "run.cancel", {"run_id": rid})
        run = wait_run(srv, rid)
        check(run["status"] == "cancelled" and "budget" in run["reason"], "the run: %r", run)
        ia = call(srv, "interact.get", {"interaction_id": ia["interaction_id"]})["interaction"]
        check(ia["status"] == "rejected" and ia["resolved_by"] == "cancel", "the question after the cancel: %r", ia)
        check(len(llm.requests("cx")) == 1, "model calls: %d", len(llm.requests("cx")))
    finally:
        stop(srv)
        llm.stop()


def test_a_summary_call_inside_the_run_counts_against_its_token_budget():
    llm = LLM()
    ws = workspace(12)
    # twelve reads of 30 kB fill a 150 kB window: the run summarizes on its
    # way; its calls report 20 tokens each, the summary 100,000
    turns = [{"text": "Reading file %d. " % i, "tool_calls": [tool("read_file", "r%d" % i, path="f%02d.txt" % i)],
              "usage": {"input_tokens": 10, "output_tokens": 10}} for i in range(12)]
    turns += [step(100, 10, 10), step(101, 10, 10), done()]
    llm.control({"op": "script", "name": "cpb", "turns": turns,
                 "no_tools": {"text": SUMMARY, "usage": {"input_tokens": 100000, "output_tokens": 10}}})
    url = "http://127.0.0.1:%d/script=cpb/window=%d/v1" % (llm.port, WINDOW)
    srv = Server(args=["--llm", "responses", "--llm-url", url, "--model", "m", "--context-window", str(WINDOW // 4)],
                 env=LLM_ENV).start()
    try:
        sid = new_session(srv, ws, approval_policy="yolo", budget={"tokens": 5000})
        rid = session_prompt(srv, sid, "read every file")
        ia = pending(srv, sid, timeout=60)
        check(ia["budget"] == "tokens" and ia["spent"] >= 100000, "the question: %r", ia)
        entries = tape(srv, sid)
        summary = [e["seq"] for e in compactions(entries) if e["body"]["method"] == "summary"]
        asked = [e["seq"] for e in entries if e["kind"] == "approval.requested"]
        check(summary and asked and summary[0] < asked[0], "the summary %r and the question %r", summary, asked)
        resolve(srv, ia["interaction_id"], "reject")
        run = wait_run(srv, rid, timeout=30)
        check(run["status"] == "failed" and run["reason"].startswith("budget:"), "the run: %r", run)
    finally:
        stop(srv)
        llm.stop()


def test_usd_budget_from_the_cli_and_a_raise_amount():
    llm = LLM()
    # 1000 in x 2.5 + 500 out x 10 = 7500 micro-dollars a call, against $0.01
    llm.script("usd", [step(1, 1000, 500), step(2, 1000, 500), step(3, 1000, 500), done(1000, 500)])
    srv = serve(llm, "usd")
    try:
        ws = tmpdir()
        rc, out, err = cli(srv, "sessions", "new", "--workspace", ws, "--budget-usd", "0.01", "--json")
        check(rc == 0, "sessions new: %s %s", out, err)
        sid = json.loads(out)["session_id"]
        rc, out, err = cli(srv, "sessions", "show", sid)
        check(rc == 0 and "budget     $0.010000 (per run)" in out, "sessions show:\n%s%s", out, err)
        rid = session_prompt(srv, sid, "go")
        ia = pending(srv, sid)
        check(ia["budget"] == "cost" and ia["spent"] == 15000 and ia["limit"] == 10000, "the question: %r", ia)
        warns = bodies(srv, sid, "budget.warning")
        check([(w["percent"], w["spent"]) for w in warns] == [(50, 7500)], "warnings: %r", warns)
        rc, out, err = cli(srv, "resolve", ia["interaction_id"], "--approve", "--raise", "0.02", "--json")
        check(rc == 0 and json.loads(out).get("raise") == 20000, "resolve --raise: %s %s", out, err)
        run = wait_run(srv, rid)
        check(run["status"] == "completed", "the run: %r", run)
        raised = bodies(srv, sid, "budget.raised")
        check([r["limit"] for r in raised] == [30000], "raised: %r", raised)
        check(len(llm.requests("usd")) == 4, "model calls: %d", len(llm.requests("usd")))
        # bad values are refused, on the CLI and on the bus
        rc, out, err = cli(srv, "sessions", "update", sid, "--budget-usd", "0.0000001")
        check(rc == 2 and "at most 6 decimals" in err, "a sub-micro-dollar: %d %s", rc, err)
        rc, out, err = cli(srv, "sessions", "update", sid, "--budget-steps", "10001")
        check(rc == 2 and "0 to 10000" in err, "too many steps: %d %s", rc, err)
        m = srv.control().request("session.update", {"session_id": sid, "budget": {"minutes": 20000}})
        check(m.type == "error" and m.body["code"] == "invalid" and "minutes" in m.body["message"],
              "minutes out of range: %r", m.body)
        # 0 removes one budget, the others stay
        call(srv, "session.update", {"session_id": sid, "budget": {"steps": 5}})
        rec = call(srv, "session.update", {"session_id": sid, "budget": {"cost_microusd": 0}})["session"]
        check(rec.get("budget") == {"steps": 5}, "after removing the cost budget: %r", rec)
    finally:
        stop(srv)
        llm.stop()


def test_minutes_budget_asks_and_the_deadline_rejects():
    llm = LLM()
    # each call streams for about 300 ms; a minute is 100 ms here
    llm.script("min", [step(1, 10, 10, delay_ms=100, text="slow call")], repeat_last=True)
    srv = serve(llm, "min", env={"SWITCHBOARD_BUDGET_MINUTE_MS": "100"})
    try:
        sid = new_session(srv, tmpdir(), budget={"minutes": 2}, approval_deadline_s=1)
        rid = session_prompt(srv, sid, "go")
        ia = pending(srv, sid)
        check(ia["budget"] == "minutes" and ia["spent"] >= 2 and ia["limit"] == 2 and ia.get("deadline_at"),
              "the question: %r", ia)
        # nobody answers: the deadline's default is reject
        run = wait_run(srv, rid, timeout=20)
        check(run["status"] == "failed" and run["reason"].startswith("budget: the minutes budget")
              and "nobody answered" in run["reason"], "the run: %r", run)
        ia = call(srv, "interact.get", {"interaction_id": ia["interaction_id"]})["interaction"]
        check(ia["status"] == "expired" and ia["decision"] == "reject", "after the deadline: %r", ia)
    finally:
        stop(srv)
        llm.stop()


def test_sigkill_while_a_budget_question_waits_then_approve_makes_no_call_twice():
    llm = LLM()
    llm.script("kill", [step(1, 10, 10), step(2, 10, 10), step(3, 10, 10), done()])
    srv = serve(llm, "kill")
    try:
        sid = new_session(srv, tmpdir(), budget={"steps": 2})
        rid = session_prompt(srv, sid, "go")
        fence = waiting_budget(srv, rid)["fence"]
        ia = pending(srv, sid)
        check(len(llm.requests("kill")) == 2, "calls before the kill: %d", len(llm.requests("kill")))
        srv.close_control()
        srv.proc.send_signal(signal.SIGKILL)
        check(srv.proc.wait(10) == -signal.SIGKILL, "serve did not die of SIGKILL")
        srv.start()
        # the same run waits again on the same question, under a new fence
        run = waiting_budget(srv, rid)
        check(run["status"] == "running" and run["fence"] > fence, "the run after the restart: %r", run)
        again = pending(srv, sid)
        check(again["interaction_id"] == ia["interaction_id"], "asked anew: %r vs %r", again, ia)
        check(len(llm.requests("kill")) == 2, "calls after the restart: %d", len(llm.requests("kill")))
        # answered over REST, with a raise of 3 steps: the limit goes from 2 to 5
        status, body = rest(srv, "/api/interactions/%s/resolve" % ia["interaction_id"], method="POST",
                            body={"decision": "approve", "raise": 3, "resolved_by": "rest"})
        check(status == 200 and body["interaction"]["raise"] == 3, "REST resolve: %d %r", status, body)
        run = wait_run(srv, rid, timeout=30)
        check(run["status"] == "completed", "the run: %r", run)
        check(len(llm.requests("kill")) == 4, "model calls: %d", len(llm.requests("kill")))
        entries = tape(srv, sid)
        check(sum(1 for e in entries if e["kind"] == "approval.requested") == 1, "announced twice")
        check(sum(1 for e in entries if e["kind"] == "turn.begin") == 1, "the run began twice")
        check([e["body"]["limit"] for e in entries if e["kind"] == "budget.raised"] == [5], "raised: %r",
              [e["body"] for e in entries if e["kind"] == "budget.raised"])
    finally:
        stop(srv)
        llm.stop()


def test_the_one_shot_run_takes_budgets():
    rc, out, err = sb("run", "--goal", "x", "--budget-usd", "two")
    check(rc == 2 and "--budget-usd takes dollars" in err, "a bad --budget-usd: %d %s", rc, err)
    rc, out, err = sb("run", "--help")
    check(rc == 0 and "--budget-tokens N" in out and "--budget-minutes N" in out, "run --help: %s", out)
    llm = LLM()
    llm.script("one", [step(1, 10, 10), step(2, 10, 10), done()])
    srv = serve(llm, "one")
    try:
        log = os.path.join(tmpdir(), "run.log")
        p = Proc([SB_BIN, "run", "--goal", "list the folder", "--repo", tmpdir(), "--budget-steps", "1",
                  "--data", srv.data], log)
        box = {}

        def asked():
            r = call(srv, "interact.list", {"status": "pending"})["interactions"]
            box["ia"] = r[0] if r else None
            return bool(r)
        wait_for(asked, 20, "the one-shot's run to ask at its budget")
        ia = box["ia"]
        rec = call(srv, "session.get", {"session_id": ia["session_id"]})["session"]
        check(rec.get("budget") == {"steps": 1} and ia["budget"] == "steps" and ia["limit"] == 1,
              "the one-shot's session %r, question %r", rec, ia)
        resolve(srv, ia["interaction_id"], "reject")
        code = p.wait(20)
        with open(log) as f:
            text = f.read()
        check(code == 1 and "budget" in text, "the one-shot exited %r:\n%s", code, text)
    finally:
        stop(srv)
        llm.stop()


def test_chat_asks_the_budget_question_and_y_goes_on():
    llm = LLM()
    llm.script("chat", [step(1, 200, 100), step(2, 200, 100), {"text": "finished reading",
                                                                "usage": {"input_tokens": 1, "output_tokens": 1}}])
    srv = serve(llm, "chat")
    sid = new_session(srv, tmpdir(), budget={"tokens": 500})
    t = Term(srv, sid)
    try:
        t.expect(r"> ")
        t.type("read it all\r")
        t.expect(r"budget reached\s+(ia_\w+)")
        t.expect(r"tokens: the run spent 600 tokens of its 500 tokens")
        t.expect(r"go on past the budget\? \[y\]es / \[n\]o, stop the run > ")
        t.type("y")
        t.expect(r"approved ia_\w+")
        t.expect(r"finished reading")
        t.expect(r"completed")
        raised = bodies(srv, sid, "budget.raised")
        check([r["limit"] for r in raised] == [1000], "raised: %r", raised)
        t.type(b"\x04")
        check(t.wait_exit() == 0, "exit %r", t.code)
    finally:
        t.kill()
        stop(srv)
        llm.stop()


def test_a_provider_without_token_counts_cannot_enforce_a_token_budget():
    llm = LLM()
    llm.script("nou", [{"tool_calls": [tool("list_dir", "c1", path=".")], "usage": False},
                       {"text": "done", "usage": False}])
    srv = serve(llm, "nou", kind="chat")
    try:
        sid = new_session(srv, tmpdir(), budget={"tokens": 10})
        run = wait_run(srv, session_prompt(srv, sid, "go"))
        check(run["status"] == "completed", "the run: %r", run)
        rec = call(srv, "session.get", {"session_id": sid})["session"]
        notice = rec.get("budget_notice", "")
        check("token budget cannot be enforced" in notice, "the record: %r", rec)
        check(call(srv, "session.usage", {"session_id": sid}).get("budget_notice") == notice, "session.usage")
        rc, out, err = cli(srv, "usage", sid)
        check(rc == 0 and "NOT ENFORCED: the token budget cannot be enforced" in out, "usage:\n%s%s", out, err)
        rc, out, err = cli(srv, "usage", sid, "--json")
        check(rc == 0 and json.loads(out).get("budget_notice") == notice, "usage --json: %s", out)
        rc, out, err = cli(srv, "sessions", "show", sid)
        check(rc == 0 and "NOT ENFORCED" in out, "sessions show:\n%s", out)
        check(not bodies(srv, sid, "approval.requested"), "asked about a budget it cannot measure")
    finally:
        stop(srv)
        llm.stop()


def test_a_workers_run_keeps_its_budgets_too():
    llm = LLM()
    llm.script("wk", [step(1, 200, 100), step(2, 200, 100), done()])
    srv = serve(llm, "wk")
    w = start_worker(srv, "wb")
    try:
        sid = new_session(srv, tmpdir(), budget={"tokens": 500}, target="worker:p")
        rid = session_prompt(srv, sid, "go")
        ia = pending(srv, sid)
        check(ia["budget"] == "tokens" and ia["spent"] == 600 and ia["limit"] == 500, "the question: %r", ia)
        waiting_budget(srv, rid)    # the worker's heartbeats say it
        # the worker's key appended the warning (a kind an executor writes)
        check([w["percent"] for w in bodies(srv, sid, "budget.warning")] == [50], "warnings")
        resolve(srv, ia["interaction_id"])
        run = wait_run(srv, rid, timeout=30)
        check(run["status"] == "completed" and run.get("worker_id") == "wb", "the run: %r\n%s", run, w.log())
        check([r["limit"] for r in bodies(srv, sid, "budget.raised")] == [1000], "raised")
    finally:
        w.send_signal(signal.SIGTERM)
        w.wait(10)
        stop(srv)
        llm.stop()


def test_a_model_without_a_price_cannot_enforce_a_cost_budget():
    llm = LLM()
    llm.script("np", [step(1, 1000, 1000), done()])
    srv = serve(llm, "np", prices=None)
    try:
        sid = new_session(srv, tmpdir(), budget={"cost_microusd": 1})
        run = wait_run(srv, session_prompt(srv, sid, "go"))
        check(run["status"] == "completed", "the run: %r", run)
        notice = call(srv, "session.get", {"session_id": sid})["session"].get("budget_notice", "")
        check("cost budget cannot be enforced" in notice and "priced-1" in notice, "the notice: %r", notice)
        # a change of the budgets clears it, to be judged again
        rec = call(srv, "session.update", {"session_id": sid, "budget": {"steps": 9}})["session"]
        check("budget_notice" not in rec, "after an update: %r", rec)
    finally:
        stop(srv)
        llm.stop()


if __name__ == "__main__":
    run_tests(globals())
