#!/usr/bin/python3
"""Run accounting (docs/runs.md): with a provider that sends no usage, the
summary of `prompt --follow`, run-info and the tape say the model calls
made and that the tokens are unknown; a provider with usage still reports
its tokens; a compaction run counts its model call; a run resumed after a
restart keeps the calls it made before, and one interrupted by a crash
says them too.

(Found by trying switchboard: each test fails on the code before its fix.)
"""
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Server, check, cli, run_tests, sb, tmpdir, wait_for  # noqa: E402
from sbagent import (LLM, LLM_ENV, SUMMARY, call, get_run, llm_args, llm_server, new_session, prompt,  # noqa: E402
                     tape, wait_run)


def final_status(entries, run_id):
    st = [e["body"] for e in entries if e["kind"] == "run.status" and e["body"]["run_id"] == run_id]
    return st[-1] if st else {}


def test_a_provider_without_usage_counts_steps_and_says_tokens_are_unknown():
    llm = LLM()
    llm.script("nou", [{"tool_calls": [{"name": "read_file", "arguments": {"path": "."}}], "usage": False},
                       {"text": "looked", "usage": False}])
    srv = Server(args=["--llm", "chat", "--llm-url", llm.url("nou"), "--model", "m"], env=LLM_ENV).start()
    try:
        sid = new_session(srv, tmpdir(), approval_policy="yolo")
        rc, out, err = sb("prompt", sid, "look around", "--follow", "--data", srv.data, timeout=60)
        check(rc == 0, "prompt --follow exited %d: %s %s", rc, out, err)
        summary = [x for x in out.splitlines() if x.startswith("run ")][-1]
        check("steps 2" in summary and "tokens unknown" in summary and "0 in" not in summary,
              "the summary line: %r", summary)
        run_id = summary.split()[1]
        run = get_run(srv, run_id)
        check(run["steps"] == 2 and "input_tokens" not in run and "output_tokens" not in run,
              "the run record: %r", run)
        rc, out, err = cli(srv, "run-info", run_id)
        check(rc == 0 and "steps       2" in out and "tokens      unknown" in out, "run-info:\n%s%s", out, err)
        entries = tape(srv, sid)
        usage = [e["body"] for e in entries if e["kind"] == "usage"]
        check(len(usage) == 2 and not any("input_tokens" in u for u in usage), "usage entries: %r", usage)
        st = final_status(entries, run_id)
        check(st.get("steps") == 2 and "input_tokens" not in st, "the final run.status: %r", st)
    finally:
        srv.stop()
        llm.stop()


def test_a_provider_with_usage_still_reports_its_tokens():
    llm = LLM()
    llm.script("u", [{"text": "hi", "usage": {"input_tokens": 30, "output_tokens": 7}}])
    srv = llm_server(llm, "u")
    try:
        sid = new_session(srv, tmpdir())
        rc, out, err = sb("prompt", sid, "hi", "--follow", "--data", srv.data, timeout=60)
        summary = [x for x in out.splitlines() if x.startswith("run ")][-1]
        check(rc == 0 and "steps 1 · tokens 30 in / 7 out" in summary, "the summary line: %r", summary)
        run = get_run(srv, summary.split()[1])
        check(run["steps"] == 1 and run["input_tokens"] == 30 and run["output_tokens"] == 7, "run: %r", run)
        st = final_status(tape(srv, sid), run["run_id"])
        check(st.get("steps") == 1 and st.get("input_tokens") == 30, "the final run.status: %r", st)
    finally:
        srv.stop()
        llm.stop()


def test_a_compaction_run_counts_its_model_call():
    llm = LLM()
    llm.control({"op": "script", "name": "cr", "turns": [{"text": "one"}, {"text": "two"}],
                 "no_tools": {"text": SUMMARY, "usage": {"input_tokens": 40, "output_tokens": 12}}})
    # a small window: the first turn is not within the recent context kept
    srv = Server(args=llm_args(llm, "cr") + ["--context-window", "4000"], env=LLM_ENV).start()
    try:
        sid = new_session(srv, tmpdir())
        for text in ("first " + "a" * 3000, "second " + "b" * 3000):
            r = wait_run(srv, prompt(srv, sid, text), timeout=30)
            check(r["status"] == "completed", "run: %r", r)
        rc, out, err = cli(srv, "compact", sid, "--json")
        check(rc == 0, "compact exited %d: %s %s", rc, out, err)
        runs = [e["body"]["run_id"] for e in tape(srv, sid) if e["kind"] == "run.status"]
        run = get_run(srv, runs[-1])
        check(run.get("kind") == "compact" and run["status"] == "completed", "the compaction run: %r", run)
        check(run["steps"] == 1 and run.get("input_tokens") == 40 and run.get("output_tokens") == 12,
              "the compaction run's accounting: %r", run)
    finally:
        srv.stop()
        llm.stop()


def test_a_run_resumed_after_a_restart_keeps_its_steps():
    ws = tmpdir()
    llm = LLM()
    llm.script("rs", [
        {"tool_calls": [{"name": "shell", "arguments": {"command": "echo hi > out.txt"}, "call_id": "c1"}],
         "usage": {"input_tokens": 100, "output_tokens": 10}},
        {"text": "wrote it", "usage": {"input_tokens": 200, "output_tokens": 20}},
    ])
    srv = llm_server(llm, "rs")
    try:
        sid = new_session(srv, ws, approval_policy="interactive")
        run_id = prompt(srv, sid, "write")
        wait_for(lambda: get_run(srv, run_id).get("phase") == "waiting_approval", 15, "waiting_approval")
        srv.close_control()
        srv.proc.send_signal(signal.SIGKILL)
        check(srv.proc.wait(10) == -signal.SIGKILL, "serve did not die of SIGKILL")
        srv.start()
        wait_for(lambda: get_run(srv, run_id).get("phase") == "waiting_approval", 15, "the run to wait again")
        ia = call(srv, "interact.list", {"session_id": sid, "status": "pending"})["interactions"][0]
        call(srv, "interact.resolve", {"interaction_id": ia["interaction_id"], "decision": "approve",
                                       "resolved_by": "test"})
        run = wait_run(srv, run_id, timeout=30)
        check(run["status"] == "completed", "run: %r", run)
        check(len(llm.requests("rs")) == 2, "%d model calls", len(llm.requests("rs")))
        check(run["steps"] == 2 and run["input_tokens"] == 300 and run["output_tokens"] == 30,
              "after the restart the run says %r", {k: run.get(k) for k in ("steps", "input_tokens", "output_tokens")})
    finally:
        srv.stop()
        llm.stop()


def test_a_run_interrupted_by_a_crash_keeps_its_steps():
    ws = tmpdir()
    gate = "for i in $(seq 600); do [ -e go ] && break; sleep 0.1; done"
    llm = LLM()
    llm.script("ic", [
        {"tool_calls": [{"name": "shell", "arguments": {"command": "echo one"}, "call_id": "c1"}],
         "usage": {"input_tokens": 100, "output_tokens": 10}},
        {"tool_calls": [{"name": "shell", "arguments": {"command": gate}, "call_id": "c2"}],
         "usage": {"input_tokens": 200, "output_tokens": 20}},
    ])
    srv = llm_server(llm, "ic")
    try:
        sid = new_session(srv, ws, approval_policy="yolo")
        run_id = prompt(srv, sid, "go")
        wait_for(lambda: (lambda r: r.get("steps") == 2 and r.get("phase") == "tool")(get_run(srv, run_id)), 20,
                 "the second call's tool to run")
        # two heartbeats after the one that said steps 2: its write is durable
        seen = [get_run(srv, run_id)["lease_expires_at"]]

        def renewed():
            e = get_run(srv, run_id)["lease_expires_at"]
            if e > seen[-1]:
                seen.append(e)
            return len(seen) >= 3
        wait_for(renewed, 20, "two lease renewals")
        srv.close_control()
        srv.proc.send_signal(signal.SIGKILL)
        check(srv.proc.wait(10) == -signal.SIGKILL, "serve did not die of SIGKILL")
        srv.start()
        run = wait_run(srv, run_id, timeout=20)
        check(run["status"] == "interrupted", "after the crash: %r", run)
        check(run["steps"] == 2 and run.get("input_tokens") == 300 and run.get("output_tokens") == 30,
              "the interrupted run says %r", {k: run.get(k) for k in ("steps", "input_tokens", "output_tokens")})
    finally:
        open(os.path.join(ws, "go"), "w").close()
        srv.stop()
        llm.stop()


if __name__ == "__main__":
    run_tests(globals())
