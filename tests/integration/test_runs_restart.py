#!/usr/bin/python3
"""A server killed during a run (issue 5, docs/architecture.md "Recovery at startup").

SIGKILL `serve` while a tool (`sleep 30`) runs, and start it again on the
same data folder:

  - the run is `interrupted`, reason server_restart, on the record and on
    the tape;
  - every tape entry acknowledged before the kill is still there, unchanged;
  - `switchboard resume RUN --follow` makes a new run (resume_from) that
    continues from the tape: the interrupted call gets a tool.result saying
    it was interrupted, the sleep is not started again, the model's next
    turn is served (and sees that result, paired with its call_id), and the
    new run completes.
"""
import json
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import check, run_tests, sb, tmpdir, wait_for  # noqa: E402
from sbagent import LLM, call, get_run, kinds, llm_server, new_session, prompt, results, tape, wait_run  # noqa: E402


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def test_sigkill_during_a_tool_then_resume():
    sleep_cmd = "echo started >> marker; echo $$ > sleep.pid; exec sleep 30"
    llm = LLM()
    llm.script("restart", [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "before the kill"},
                         "call_id": "c_write"}]},
        {"text": "now a long command", "tool_calls": [{"name": "shell", "arguments": {"command": sleep_cmd},
                                                        "call_id": "c_sleep"}]},
        {"text": "resumed fine"},
    ])
    ws = tmpdir()
    server = llm_server(llm, "restart")
    sleep_pid = None
    try:
        sid = new_session(server, ws, approval_policy="yolo")
        run_id = prompt(server, sid, "work, then sleep")
        wait_for(lambda: read(os.path.join(ws, "sleep.pid")).strip(), 15, "the sleep tool to start")
        sleep_pid = int(read(os.path.join(ws, "sleep.pid")))
        check(get_run(server, run_id)["status"] in ("claimed", "running"), "run not active")
        before = tape(server, sid)
        check("tool.call" in kinds(before) and before[-1]["kind"] in ("tool.call", "tool.output"),
              "the tape before the kill ends with %r", kinds(before)[-3:])
        check(results(before).get("c_write", {}).get("ok") is True, "write_file not done before the kill")

        server.close_control()
        server.proc.send_signal(signal.SIGKILL)
        check(server.proc.wait(10) == -signal.SIGKILL, "serve did not die of SIGKILL")
        server.start()

        run = wait_run(server, run_id, ("interrupted",), timeout=10)
        check(run["reason"] == "server_restart", "interrupted run %r", run)
        after = tape(server, sid)
        by_seq = {e["seq"]: e for e in after}
        for e in before:
            check(by_seq.get(e["seq"]) == e, "entry %d changed or lost across the kill: %r -> %r",
                  e["seq"], e, by_seq.get(e["seq"]))
        new = [e for e in after if e["seq"] > before[-1]["seq"]]
        statuses = [e["body"]["status"] for e in new if e["kind"] == "run.status"]
        check(statuses == ["interrupted"], "entries after the restart: %r", [(e["kind"], e["body"]) for e in new])
        check(read(os.path.join(ws, "marker")) == "started\n", "marker %r", read(os.path.join(ws, "marker")))

        # resume: a new run continues from the tape
        rc, out, err = sb("resume", run_id, "--follow", "--data", server.data, timeout=60)
        check(rc == 0, "resume --follow exited %d\n%s\n%s", rc, out, err)
        check("resumed fine" in out and "completed" in out.strip().splitlines()[-1], "resume output:\n%s", out)
        runs = call(server, "run.list", {"session_id": sid})["runs"]
        check(len(runs) == 2, "runs %r", runs)
        new_run = [r for r in runs if r["run_id"] != run_id][0]
        check(new_run.get("resume_from") == run_id and new_run["status"] == "completed", "new run %r", new_run)

        final = tape(server, sid)
        by_seq = {e["seq"]: e for e in final}
        for e in before:
            check(by_seq.get(e["seq"]) == e, "entry %d changed after the resume", e["seq"])
        tail = [e for e in final if e.get("run_id") == new_run["run_id"]
                or e["body"].get("run_id") == new_run["run_id"]]
        ks = kinds(tail)
        r = [e for e in tail if e["kind"] == "tool.result"]
        check(len(r) == 1 and r[0]["body"]["call_id"] == "c_sleep" and r[0]["body"]["ok"] is False
              and "interrupted" in r[0]["body"]["output"], "the interrupted call's result: %r", r)
        check(ks.index("turn.begin") < ks.index("tool.result") < ks.index("text.delta"),
              "order in the new run: %r", ks)
        check("tool.call" not in ks, "the resumed run called a tool: %r", ks)
        # the sleep was not started again
        check(read(os.path.join(ws, "marker")) == "started\n", "the interrupted tool ran again: %r",
              read(os.path.join(ws, "marker")))
        # the model's next turn saw the whole conversation and the result
        reqs = llm.requests("restart")
        check(len(reqs) == 3, "%d model requests", len(reqs))
        items = reqs[2]["json"]["input"]
        fc = [i for i in items if i.get("type") == "function_call" and i.get("call_id") == "c_sleep"]
        fo = [i for i in items if i.get("type") == "function_call_output" and i.get("call_id") == "c_sleep"]
        check(fc and fo and items.index(fo[0]) > items.index(fc[0]) and "interrupted" in str(fo[0]["output"]),
              "the resumed request does not pair the interrupted result with c_sleep: %s",
              json.dumps(items)[:1500])
        check("work, then sleep" in json.dumps(items), "the resumed request lacks the prompt")

        # a completed run cannot be resumed; neither can one that is active
        rc, out, err = sb("resume", new_run["run_id"], "--data", server.data)
        check(rc == 1 and "conflict" in err, "resume of a completed run: %d %s %s", rc, out, err)
        check(server.stop() == 0, "serve did not stop cleanly")
    finally:
        if sleep_pid:
            try:
                os.kill(sleep_pid, signal.SIGKILL)
            except OSError:
                pass


if __name__ == "__main__":
    run_tests(globals())
