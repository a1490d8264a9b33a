#!/usr/bin/python3
"""`switchboard worker`, the external worker, end to end over ipc (issue 12;
docs/workers.md), against a scripted model on loopback:

  - a session targeted at worker:p has its prompt run by a worker process
    with exec's agent loop: the file is written in the workspace, the tape
    holds the same kinds as a local run with contiguous seqs, run-info and
    `workers` / `worker-status` name the worker; the worker's environment
    holds no provider key (the model is reached through the bus);
  - a worker frozen with SIGSTOP past its lease: the run is expired within
    lease + 1 s, and once thawed (SIGCONT) nothing it sends reaches the
    tape after the expiry; `resume` runs the run on the other worker;
  - cancel from the control plane reaches the worker through its
    heartbeat's reply: cancelled within 2 heartbeats.
"""
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import check, run_tests, sb, tmpdir, wait_for  # noqa: E402
from sbagent import (LLM, call, check_e2e, e2e_turns, get_run, kinds, llm_server, new_session,  # noqa: E402
                     session_prompt, start_worker, tape, wait_run)


def test_worker_runs_the_agent_loop():
    llm = LLM()
    llm.script("w1", e2e_turns())
    server = llm_server(llm, "w1")
    ws = tmpdir()
    w = start_worker(server, "wa", extra=["--capability", "os=linux"])
    sid = new_session(server, ws, approval_policy="yolo", target="worker:p")
    run_id = session_prompt(server, sid, "write hello.txt then show it")
    run = wait_run(server, run_id, timeout=30)
    check(run["status"] == "completed", "run: %r\nworker log:\n%s", run, w.log())
    check(run["worker_id"] == "wa" and run.get("instance_id"), "run-info: %r", run)
    entries = tape(server, sid)
    check_e2e(llm, "w1", entries, ws)
    seqs = [e["seq"] for e in entries]
    check(seqs == list(range(1, len(seqs) + 1)), "seqs are not contiguous: %r", seqs)

    rc, out, err = sb("run-info", run_id, "--data", server.data)
    check(rc == 0 and "worker      wa (instance" in out and "target      worker:p" in out, "run-info: %s %s",
          out, err)
    rc, out, err = sb("workers", "--json", "--data", server.data)
    rows = [json.loads(x) for x in out.splitlines()]
    check(rc == 0 and [r["worker_id"] for r in rows] == ["wa"] and rows[0]["status"] == "idle"
          and rows[0]["capabilities"] == {"os": "linux"} and rows[0]["workspace_sync"] == "same_path",
          "workers --json: %s %s", out, err)
    rc, out, err = sb("worker-status", "wa", "--data", server.data)
    check(rc == 0 and "status      idle" in out and "os=linux" in out, "worker-status: %s %s", out, err)
    rc, out, err = sb("worker-status", "nobody", "--data", server.data)
    check(rc == 1 and "no worker nobody" in err, "worker-status of nobody: %d %s %s", rc, out, err)
    w.send_signal(signal.SIGTERM)
    check(w.wait(10) == 0, "the worker did not stop cleanly: %s", w.log())
    server.stop()
    llm.stop()


def test_sigstop_past_the_lease_then_resume_on_the_other_worker():
    llm = LLM()
    llm.script("frozen", [{"tool_calls": [{"name": "shell", "arguments": {"command": "sleep 3; echo late"},
                                           "call_id": "c_sleep"}]},
                          {"text": "done after resume"}])
    server = llm_server(llm, "frozen")
    ws = tmpdir()
    w1 = start_worker(server, "w1", lease=3)
    sid = new_session(server, ws, approval_policy="yolo", target="worker:p")
    run_id = session_prompt(server, sid, "sleep a while")
    wait_for(lambda: "tool.call" in kinds(tape(server, sid)), 15, "the tool to start")
    check(get_run(server, run_id)["worker_id"] == "w1", "w1 does not hold the run")
    w1.send_signal(signal.SIGSTOP)
    t0 = time.monotonic()
    run = wait_run(server, run_id, ("expired",), timeout=10)
    took = time.monotonic() - t0
    print("  SIGSTOP -> expired in %.0f ms (lease 3000 ms)" % (took * 1000))
    check(took < 3.0 + 1.0, "expired %.3f s after the worker froze (lease 3 s)", took)
    check(run["reason"] == "lease_expired", "reason: %r", run)
    expired_seq = [e["seq"] for e in tape(server, sid) if e["kind"] == "run.status"
                   and e["body"]["status"] == "expired"][0]

    # thawed: its heartbeat and its appends are refused; it gives the run up
    w1.send_signal(signal.SIGCONT)
    wait_for(lambda: "run ended run=%s" % run_id in w1.log(), 15, "the thawed worker to give the run up")
    after = [e for e in tape(server, sid) if e["seq"] > expired_seq]
    check(after == [], "the lapsed worker wrote after the expiry: %r", after)

    # resume runs on the other worker (w1 is gone, and so is its waiting
    # claim: a claim whose worker died would be granted and then expire)
    w1.kill()
    wait_for(lambda: not call(server, "worker.get", {"worker_id": "w1"})["worker"]["claiming"], 10,
             "w1's last long-poll to lapse")
    w2 = start_worker(server, "w2", lease=3)
    rc, out, err = sb("resume", run_id, "--data", server.data)
    check(rc == 0, "resume: %d %s %s", rc, out, err)
    new = call(server, "run.list", {"session_id": sid, "limit": 1})["runs"][0]
    check(new["resume_from"] == run_id, "the resumed run: %r", new)
    done = wait_run(server, new["run_id"], timeout=20)
    check(done["status"] == "completed" and done["worker_id"] == "w2", "resumed run: %r\n%s", done, w2.log())
    w2.stop()
    server.stop()
    llm.stop()


def test_cancel_through_the_heartbeat_within_two_heartbeats():
    llm = LLM()
    llm.script("long", [{"tool_calls": [{"name": "shell", "arguments": {"command": "sleep 600"},
                                         "call_id": "c_long"}]}])
    server = llm_server(llm, "long")
    ws = tmpdir()
    w = start_worker(server, "wc", lease=3)     # heartbeats every 1 s
    sid = new_session(server, ws, approval_policy="yolo", target="worker:p")
    run_id = session_prompt(server, sid, "sleep for long")
    wait_for(lambda: "tool.call" in kinds(tape(server, sid)), 15, "the tool to start")
    t0 = time.monotonic()
    rc, out, err = sb("cancel", run_id, "--data", server.data)
    check(rc == 0, "cancel: %d %s %s", rc, out, err)
    run = wait_run(server, run_id, timeout=10)
    took = time.monotonic() - t0
    print("  cancel -> cancelled in %.0f ms (heartbeat 1000 ms)" % (took * 1000))
    check(run["status"] == "cancelled", "run: %r\n%s", run, w.log())
    if os.environ.get("SB_DEBUG_CANCEL"):
        print(w.log(), server.log())
    check(took < 2.0, "cancelled %.3f s after the cancel (2 heartbeats = 2 s)\n%s\n%s", took, w.log(),
          server.log())
    w.stop()
    server.stop()
    llm.stop()


if __name__ == "__main__":
    run_tests(globals())
