#!/usr/bin/python3
"""Approval policies applied by the executor (issue 10, docs/approvals.md),
with the loopback provider (tests/llm_server.py) scripting the tool calls:

  - each mode: yolo runs everything unasked; auto runs the read-only tools
    and asks for a write (the run waits, phase waiting_approval in run.get
    and `switchboard runs`, the request carries the command or path and the
    diff the write would make); interactive asks for a read too;
  - each rule kind: deny answers the model with a refusal without asking
    (even in yolo), allow runs unasked in interactive, ask asks in yolo;
  - a rule added while a run waits decides the run's next call;
  - a rejection with feedback: the model's next request holds the feedback;
  - a 2 s deadline: the interaction expires rejected, the model is told;
  - scope session: the next identical call runs unasked, another call asks;
  - scope always: a rule on the session, still there after a restart, and
    the identical call runs unasked in the next run;
  - SIGKILL while a run waits: after the restart the interaction is still
    pending (`interactions --status pending`), the same run is re-queued and
    waits again; `resolve --approve` lets it finish, and a counter file in
    the workspace proves the tool ran exactly once;
  - cancel while waiting: the interaction is rejected by "cancel", the run
    is cancelled and the tool never runs.
"""
import json
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import check, run_tests, sb, tmpdir, wait_for  # noqa: E402
from sbagent import (LLM, asked, call, get_run, llm_server, new_session, pending, prompt, resolve,  # noqa: E402
                     results, shell, stop, tape, tool, wait_run)

COUNT = "echo run >> counter.txt"


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def outputs(llm, script, n):
    """The tool outputs the model was given in its n-th request, by call_id."""
    items = llm.requests(script)[n]["json"]["input"]
    return {i["call_id"]: str(i.get("output")) for i in items if i.get("type") == "function_call_output"}


def test_modes():
    ws = tmpdir()
    with open(os.path.join(ws, "notes.txt"), "w") as f:
        f.write("one\ntwo\nthree\n")
    llm = LLM()
    one_write = [
        {"tool_calls": [tool("read_file", "c_read", path="notes.txt"),
                        tool("write_file", "c_write", path="notes.txt", content="one\n2\nthree\n")]},
        {"text": "done"},
    ]
    llm.script("yolo", one_write)
    llm.script("auto", one_write)
    llm.script("interactive", one_write)
    server = llm_server(llm, "yolo")
    # yolo: both run, nobody is asked
    sid = new_session(server, ws, approval_policy="yolo")
    run = wait_run(server, prompt(server, sid, "edit"), timeout=30)
    check(run["status"] == "completed", "yolo run %r", run)
    res = results(tape(server, sid))
    check(res["c_read"]["ok"] and res["c_write"]["ok"], "yolo results %r", res)
    check(not asked(server, sid), "yolo asked: %r", asked(server, sid))
    stop(server)

    # auto: the read runs, the write waits for a person
    with open(os.path.join(ws, "notes.txt"), "w") as f:
        f.write("one\ntwo\nthree\n")
    server = llm_server(llm, "auto", data=server.data)
    sid = new_session(server, ws, approval_policy="auto")
    run_id = prompt(server, sid, "edit")
    ia = pending(server, sid)
    check(ia["tool"] == "write_file" and ia["call_id"] == "c_write" and ia["run_id"] == run_id, "ia %r", ia)
    check(ia["summary"] == "notes.txt", "summary %r", ia.get("summary"))
    check("-two\n+2\n" in ia.get("diff", "") and "--- a/notes.txt" in ia["diff"], "diff %r", ia.get("diff"))
    check(read(os.path.join(ws, "notes.txt")) == "one\ntwo\nthree\n", "the write ran before approval")
    check(results(tape(server, sid)).get("c_read", {}).get("ok") is True, "the read did not run unasked")
    wait_for(lambda: get_run(server, run_id).get("phase") == "waiting_approval", 10, "phase waiting_approval")
    rc, out, err = sb("runs", "--data", server.data)
    check(rc == 0 and "waiting_approval" in out, "runs does not show the phase: %s %s", out, err)
    rc, out, err = sb("run-info", run_id, "--data", server.data)
    check(rc == 0 and "waiting_approval" in out, "run-info does not show the phase: %s %s", out, err)
    resolve(server, ia["interaction_id"])
    run = wait_run(server, run_id, timeout=30)
    check(run["status"] == "completed", "auto run %r", run)
    check(read(os.path.join(ws, "notes.txt")) == "one\n2\nthree\n", "the approved write did not happen")
    w = results(tape(server, sid))["c_write"]
    check(w["ok"] and w.get("interaction_id") == ia["interaction_id"] and "refused" not in w, "result %r", w)
    stop(server)

    # interactive: even the read asks
    server = llm_server(llm, "interactive", data=server.data)
    sid = new_session(server, ws, approval_policy="interactive")
    run_id = prompt(server, sid, "edit")
    ia = pending(server, sid)
    check(ia["tool"] == "read_file" and ia["risk"] == "low", "interactive asked first for %r", ia)
    resolve(server, ia["interaction_id"])
    ia2 = wait_for(lambda: [i for i in call(server, "interact.list", {"session_id": sid, "status": "pending"})
                            ["interactions"]], 10, "the second ask")[0]
    check(ia2["tool"] == "write_file", "second ask %r", ia2)
    resolve(server, ia2["interaction_id"], "reject")
    run = wait_run(server, run_id, timeout=30)
    check(run["status"] == "completed", "interactive run %r", run)
    w = results(tape(server, sid))["c_write"]
    check(w["ok"] is False and w.get("refused") is True and w.get("policy") == "interactive", "rejected %r", w)
    check("rejected by test" in w["output"], "rejection output %r", w["output"])
    stop(server)


def test_rules():
    ws = tmpdir()
    llm = LLM()
    llm.script("rules", [
        {"tool_calls": [shell("rm -rf build", "c_rm"), shell("git --version", "c_git"),
                        tool("write_file", "c_lock", path="deps/Cargo.lock", content="x")]},
        {"text": "the model saw the refusals"},
    ])
    llm.script("ask", [
        {"tool_calls": [shell("git push origin main", "c_push")]},
        {"text": "pushed"},
    ])
    server = llm_server(llm, "rules")
    # yolo with a deny rule, interactive with an allow rule: rules win over modes
    rc, out, err = sb("sessions", "new", "--workspace", ws, "--approval", "interactive",
                      "--rule", "shell:*:deny", "--rule", "shell:git *:allow", "--rule", "*_file:*.lock:deny",
                      "--json", "--data", server.data)
    check(rc == 0, "sessions new: %s %s", out, err)
    sid = json.loads(out)["session_id"]
    check([r["action"] for r in json.loads(out)["rules"]] == ["deny", "allow", "deny"], "rules %s", out)
    run = wait_run(server, prompt(server, sid, "clean"), timeout=30)
    check(run["status"] == "completed", "run %r", run)
    res = results(tape(server, sid))
    check(not asked(server, sid), "a rule-decided call asked a person: %r", asked(server, sid))
    rm = res["c_rm"]
    check(rm["ok"] is False and rm.get("refused") is True, "deny rule: %r", rm)
    check("rule #1 (shell:*:deny)" in rm["output"] and "--rule" in rm.get("fix", ""), "deny output %r", rm)
    check(res["c_git"]["ok"] is True, "allow rule: %r", res["c_git"])
    check(res["c_lock"]["ok"] is False and "rule #3" in res["c_lock"]["output"], "glob deny %r", res["c_lock"])
    check(not os.path.exists(os.path.join(ws, "deps")), "the denied write ran")
    outs = outputs(llm, "rules", 1)
    check("denies shell" in outs.get("c_rm", ""), "the model was not told: %r", outs)
    stop(server)

    # an ask rule asks even in yolo
    server = llm_server(llm, "ask", data=server.data)
    rc, out, err = sb("sessions", "update", sid, "--approval", "yolo", "--clear-rules", "--rule",
                      "shell:git push*:ask", "--json", "--data", server.data)
    check(rc == 0 and len(json.loads(out)["rules"]) == 1, "update: %s %s", out, err)
    run_id = prompt(server, sid, "push")
    ia = pending(server, sid)
    check(ia["summary"] == "git push origin main" and ia["risk"] == "high", "ask rule: %r", ia)
    resolve(server, ia["interaction_id"], "reject")
    check(wait_run(server, run_id, timeout=30)["status"] == "completed", "run after reject")
    stop(server)


def test_a_rule_added_while_a_run_waits_decides_its_next_call():
    ws = tmpdir()
    llm = LLM()
    llm.script("midrun", [
        {"tool_calls": [shell("touch a.txt", "c1")]},
        {"tool_calls": [shell("touch b.txt", "c2")]},
        {"text": "made"},
    ])
    server = llm_server(llm, "midrun")
    sid = new_session(server, ws, approval_policy="auto")
    run_id = prompt(server, sid, "make")
    ia = pending(server, sid)
    rc, out, err = sb("sessions", "update", sid, "--rule", "shell:touch *.txt:allow", "--data", server.data)
    check(rc == 0, "sessions update: %s %s", out, err)
    resolve(server, ia["interaction_id"])
    check(wait_run(server, run_id, timeout=30)["status"] == "completed", "run")
    check([a["body"]["call_id"] for a in asked(server, sid)] == ["c1"], "asked %r", asked(server, sid))
    check(sorted(os.listdir(ws)) == ["a.txt", "b.txt"], "made %r", os.listdir(ws))
    stop(server)


def test_reject_with_feedback_reaches_the_model():
    ws = tmpdir()
    llm = LLM()
    llm.script("fb", [
        {"tool_calls": [tool("write_file", "c_w", path="a.py", content="x = 1\n")]},
        {"text": "understood"},
    ])
    server = llm_server(llm, "fb")
    sid = new_session(server, ws, approval_policy="auto")
    run_id = prompt(server, sid, "write")
    ia = pending(server, sid)
    rc, out, err = sb("resolve", ia["interaction_id"], "--reject", "--feedback", "use tabs, not spaces",
                      "--data", server.data)
    check(rc == 0, "resolve: %s %s", out, err)
    check(wait_run(server, run_id, timeout=30)["status"] == "completed", "run did not go on after the rejection")
    got = outputs(llm, "fb", 1).get("c_w", "")
    check("use tabs, not spaces" in got and "rejected" in got, "the model's next request: %r", got)
    check(not os.path.exists(os.path.join(ws, "a.py")), "the rejected write ran")
    stop(server)


def test_deadline_expires_and_the_model_sees_it():
    ws = tmpdir()
    llm = LLM()
    llm.script("dl", [{"tool_calls": [shell(COUNT, "c_dl")]}, {"text": "ok, it expired"}])
    server = llm_server(llm, "dl")
    sid = new_session(server, ws, approval_policy="auto", approval_deadline_s=2)
    run_id = prompt(server, sid, "count")
    ia = pending(server, sid)
    check(ia.get("deadline_at", 0) - ia["created_at"] in range(1500, 2600), "deadline_at %r", ia)
    run = wait_run(server, run_id, timeout=30)
    check(run["status"] == "completed", "run %r", run)
    r = results(tape(server, sid))["c_dl"]
    check(r["ok"] is False and "expired" in r["output"], "result %r", r)
    check("expired" in outputs(llm, "dl", 1).get("c_dl", ""), "the model was not told")
    check(read(os.path.join(ws, "counter.txt")) is None, "the expired call ran")
    stop(server)


def test_scope_session_then_always_across_a_restart():
    ws = tmpdir()
    llm = LLM()
    llm.script("scope", [
        {"tool_calls": [shell(COUNT, "c1")]},
        {"tool_calls": [shell(COUNT, "c2")]},                       # identical: unasked
        {"tool_calls": [shell("echo other >> counter.txt", "c3")]},  # another: asks
        {"text": "scoped"},
        # the next run: approve always
        # (a redirection is not a plain command: the rule runs it through sh -c)
        {"tool_calls": [shell("sh -c 'echo always >> counter.txt'", "c4")]},
        {"text": "ruled"},
        # after the restart, the identical call
        {"tool_calls": [shell("sh -c 'echo always >> counter.txt'", "c5")]},
        {"text": "ruled again"},
    ])
    server = llm_server(llm, "scope")
    sid = new_session(server, ws, approval_policy="auto")
    run_id = prompt(server, sid, "count")
    ia = pending(server, sid)
    resolve(server, ia["interaction_id"], scope="session")
    ia3 = wait_for(lambda: [i for i in call(server, "interact.list", {"session_id": sid, "status": "pending"})
                            ["interactions"]], 15, "the ask for the other command")[0]
    check(ia3["call_id"] == "c3", "asked for %r", ia3)
    resolve(server, ia3["interaction_id"])
    check(wait_run(server, run_id, timeout=30)["status"] == "completed", "scope run")
    check([a["body"]["call_id"] for a in asked(server, sid)] == ["c1", "c3"], "asked: %r",
          [a["body"]["call_id"] for a in asked(server, sid)])
    check(read(os.path.join(ws, "counter.txt")) == "run\nrun\nother\n", "counter %r",
          read(os.path.join(ws, "counter.txt")))

    run_id = prompt(server, sid, "always")
    ia = pending(server, sid)
    check(ia["call_id"] == "c4", "asked for %r", ia)
    rc, out, err = sb("resolve", ia["interaction_id"], "--approve", "--scope", "always", "--data", server.data)
    check(rc == 0, "resolve: %s %s", out, err)
    check(wait_run(server, run_id, timeout=30)["status"] == "completed", "always run")
    stop(server)
    server.start()
    rc, out, err = sb("sessions", "show", sid, "--json", "--data", server.data)
    rules = json.loads(out).get("rules", [])
    check(rules == [{"tool": "shell", "pattern": "sh -c 'echo always >> counter.txt'", "action": "allow"}],
          "the rule after a restart: %r", rules)
    run_id = prompt(server, sid, "again")
    check(wait_run(server, run_id, timeout=30)["status"] == "completed", "run after the restart")
    check(len(asked(server, sid)) == 3, "the ruled call asked again: %r", asked(server, sid))
    check(read(os.path.join(ws, "counter.txt")).count("always") == 2, "counter %r",
          read(os.path.join(ws, "counter.txt")))
    stop(server)


def test_sigkill_while_waiting_then_approve_runs_exactly_once():
    ws = tmpdir()
    llm = LLM()
    llm.script("kill", [
        {"tool_calls": [tool("read_file", "c_read", path="."), shell(COUNT, "c_count")]},
        {"text": "counted once"},
    ])
    # interactive: the read asks too; approve it, then the count waits
    server = llm_server(llm, "kill")
    sid = new_session(server, ws, approval_policy="interactive")
    run_id = prompt(server, sid, "count")
    resolve(server, pending(server, sid)["interaction_id"])
    ia = wait_for(lambda: [i for i in call(server, "interact.list", {"session_id": sid, "status": "pending"})
                           ["interactions"]], 15, "the ask for the count")[0]
    check(ia["call_id"] == "c_count", "asked for %r", ia)
    wait_for(lambda: get_run(server, run_id).get("phase") == "waiting_approval", 10, "waiting_approval")
    fence = get_run(server, run_id)["fence"]

    server.close_control()
    server.proc.send_signal(signal.SIGKILL)
    check(server.proc.wait(10) == -signal.SIGKILL, "serve did not die of SIGKILL")
    server.start()

    rc, out, err = sb("interactions", "--status", "pending", "--json", "--data", server.data)
    lines = [json.loads(x) for x in out.splitlines() if x.strip()]
    check(rc == 0 and [x["interaction_id"] for x in lines] == [ia["interaction_id"]], "pending after restart: %s %s",
          out, err)
    # the same run waits again, under a new fence
    run = wait_for(lambda: (lambda r: r if r.get("phase") == "waiting_approval" else None)(get_run(server, run_id)),
                   15, "the run to wait again")
    check(run["status"] == "running" and run["fence"] > fence, "run after the restart %r", run)
    check(read(os.path.join(ws, "counter.txt")) is None, "the tool ran before approval")
    rc, out, err = sb("resolve", ia["interaction_id"], "--approve", "--data", server.data)
    check(rc == 0, "resolve: %s %s", out, err)
    run = wait_run(server, run_id, timeout=30)
    check(run["status"] == "completed", "run %r", run)
    check(read(os.path.join(ws, "counter.txt")) == "run\n", "the tool ran %r times",
          read(os.path.join(ws, "counter.txt")))
    entries = tape(server, sid)
    statuses = [e["body"]["status"] for e in entries if e["kind"] == "run.status"]
    check(statuses[-4:] == ["queued", "claimed", "running", "completed"], "statuses %r", statuses)
    r = [e["body"] for e in entries if e["kind"] == "tool.result" and e["body"]["call_id"] == "c_count"]
    check(len(r) == 1 and r[0]["ok"], "results of the count %r", r)
    check(sum(1 for e in entries if e["kind"] == "approval.requested"
              and e["body"]["interaction_id"] == ia["interaction_id"]) == 1, "announced twice")
    check(len(llm.requests("kill")) == 2, "the model was asked %d times", len(llm.requests("kill")))
    stop(server)


def test_cancel_while_waiting():
    ws = tmpdir()
    llm = LLM()
    llm.script("cancel", [{"tool_calls": [shell(COUNT, "c_c")]}, {"text": "never"}])
    server = llm_server(llm, "cancel")
    sid = new_session(server, ws, approval_policy="auto")
    run_id = prompt(server, sid, "count")
    ia = pending(server, sid)
    call(server, "run.cancel", {"run_id": run_id})
    run = wait_run(server, run_id, timeout=15)
    check(run["status"] == "cancelled", "run %r", run)
    got = call(server, "interact.get", {"interaction_id": ia["interaction_id"]})["interaction"]
    check(got["status"] == "rejected" and got["resolved_by"] == "cancel", "interaction %r", got)
    check(read(os.path.join(ws, "counter.txt")) is None, "the cancelled call ran")
    stop(server)


if __name__ == "__main__":
    run_tests(globals())
