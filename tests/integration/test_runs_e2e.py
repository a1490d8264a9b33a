#!/usr/bin/python3
"""Runs end to end (issue 5): a scripted model against the loopback
provider (tests/llm_server.py) drives the real agent loop and real tools.

  - `switchboard run` (one-shot) with a scripted model that writes a file,
    then reads it back with the shell, then answers: the file exists, the
    second request paired the tool output with its call_id, the tape holds
    the expected kinds in order, exit 0;
  - the same through `serve` + `sessions new` + `prompt --follow`;
  - the built-in demo model completes `run --goal "look around"`;
  - approval auto: write_file and shell ask a person; unanswered within the
    session's 1 s approval deadline they are refused naming the policy, and
    read_file runs unasked;
  - a prompt while a run is active waits in the session's queue (exit 0,
    with its position; test_queue.py covers the queue), and `run-info` of a
    queued worker run says what it waits for.

The helpers (LLM, tape reading, run waiting) are sbagent's, shared with
the other tests of runs.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Server, check, run_tests, sb, tmpdir  # noqa: E402
from sbagent import (LLM, LLM_ENV, call, check_e2e, e2e_turns, get_run, git_repo, kinds, llm_args,  # noqa: E402
                     llm_server, new_session, prompt, results, tape, wait_run)


# ---------------------------------------------------------------------------
# tests

def test_oneshot_run_scripted_model():
    llm = LLM()
    llm.script("e2e1", e2e_turns())
    ws = tmpdir()
    data = tmpdir()
    rc, out, err = sb("run", "--goal", "write hello.txt then show it", "--repo", ws, "--approval", "yolo",
                      "--data", data, "--json", *llm_args(llm, "e2e1"), timeout=60, env=LLM_ENV)
    check(rc == 0, "switchboard run exited %d\nstdout:\n%s\nstderr:\n%s", rc, out, err)
    entries = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    check(entries and entries[0]["kind"] == "prompt" and entries[0]["body"]["text"].startswith("write hello"),
          "--json did not start with the prompt: %r", entries[:1])
    check_e2e(llm, "e2e1", entries, ws)
    # the request carried the goal as the user's input
    first = llm.requests("e2e1")[0]["json"]
    check("write hello.txt then show it" in json.dumps(first["input"]), "goal not in the first request")
    check(any(t.get("name") == "write_file" for t in first.get("tools", [])), "no tool definitions sent")

    # human output: the tool calls, their results and a final summary line
    llm.script("e2e1", e2e_turns())
    os.unlink(os.path.join(ws, "hello.txt"))
    rc, out, err = sb("run", "--goal", "again", "--ephemeral", "--repo", ws, "--approval", "yolo",
                      *llm_args(llm, "e2e1"), timeout=60, env=LLM_ENV)
    check(rc == 0, "switchboard run (human) exited %d\n%s\n%s", rc, out, err)
    check("write_file" in out and "cat hello.txt" in out and "done" in out, "human output: %s", out)
    last = out.strip().splitlines()[-1]
    check("completed" in last and "steps 3" in last and "tokens 180 in / 16 out" in last,
          "summary line: %r", last)


def test_oneshot_run_fails_with_exit_1_when_the_model_fails():
    llm = LLM()
    llm.script("bad", [{"status": 400}])
    rc, out, err = sb("run", "--goal", "x", "--ephemeral", "--repo", tmpdir(), "--approval", "yolo",
                      *llm_args(llm, "bad"), timeout=60, env=LLM_ENV)
    check(rc == 1, "a failed run exited %d: %s %s", rc, out, err)
    check("failed" in out.strip().splitlines()[-1], "summary: %s", out)


def test_serve_sessions_new_prompt_follow():
    llm = LLM()
    llm.script("e2e2", e2e_turns())
    ws = tmpdir()
    server = llm_server(llm, "e2e2")
    rc, out, err = sb("sessions", "new", "--workspace", ws, "--approval", "yolo", "--json",
                      "--data", server.data)
    check(rc == 0, "sessions new: %d %s", rc, err)
    sid = json.loads(out)["session_id"]
    rc, out, err = sb("prompt", sid, "write hello.txt then show it", "--follow", "--data", server.data,
                      timeout=60)
    check(rc == 0, "prompt --follow exited %d\n%s\n%s", rc, out, err)
    check("→ write_file" in out and "→ shell" in out and "completed" in out.strip().splitlines()[-1],
          "prompt --follow output:\n%s", out)
    entries = tape(server, sid)
    check(entries[0]["kind"] == "session.created", "tape starts with %r", entries[0]["kind"])
    check_e2e(llm, "e2e2", entries[1:], ws)
    run_id = entries[-1]["body"]["run_id"]
    run = get_run(server, run_id)
    check(run["status"] == "completed" and run["steps"] == 3 and run["input_tokens"] == 180
          and run["output_tokens"] == 16, "run record %r", run)
    # `runs` lists it; `run-info` shows it
    rc, out, _ = sb("runs", "--session", sid, "--data", server.data)
    check(rc == 0 and run_id in out and "completed" in out, "runs: %s", out)
    rc, out, _ = sb("run-info", run_id, "--json", "--data", server.data)
    check(rc == 0 and json.loads(out)["status"] == "completed", "run-info: %s", out)

    # a second prompt of the same session sees the whole conversation
    llm.script("e2e2", [{"text": "still here"}])
    rc, out, err = sb("prompt", sid, "and now?", "--follow", "--data", server.data, timeout=60)
    check(rc == 0 and "still here" in out, "second prompt: %d %s %s", rc, out, err)
    items = llm.requests("e2e2")[-1]["json"]["input"]
    text = json.dumps(items)
    check("write hello.txt then show it" in text and "and now?" in text and "call_shell_2" in text,
          "the second run's request lacks the first run's conversation: %s", text[:2000])
    check(server.stop() == 0, "serve did not stop cleanly")


def test_demo_model_look_around():
    repo = git_repo()
    rc, out, err = sb("run", "--goal", "look around", "--ephemeral", "--repo", repo, "--approval", "yolo", timeout=60)
    check(rc == 0, "demo run exited %d\nstdout:\n%s\nstderr:\n%s", rc, out, err)
    check("demo" in out.lower(), "the final text does not mention the demo:\n%s", out)
    check("completed" in out.strip().splitlines()[-1], "summary: %s", out)
    rc, out, err = sb("run", "--goal", "look around", "--ephemeral", "--repo", repo, "--approval", "yolo", "--json",
                      timeout=60)
    check(rc == 0, "demo run --json exited %d: %s", rc, err)
    entries = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    done = [e["body"]["text"] for e in entries if e["kind"] == "text.done"]
    check(done and "demo" in done[-1].lower(), "final text.done: %r", done)
    check(any(e["kind"] == "tool.result" and e["body"]["ok"] for e in entries), "the demo used no tool")


def test_approval_auto_asks_for_write_allows_read():
    llm = LLM()
    llm.script("auto", [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "new.txt", "content": "x"},
                         "call_id": "c_write"},
                        {"name": "read_file", "arguments": {"path": "present.txt"}, "call_id": "c_read"}]},
        {"tool_calls": [{"name": "shell", "arguments": {"command": "touch made_by_shell"},
                         "call_id": "c_shell"}]},
        {"text": "ok"},
    ])
    ws = tmpdir()
    with open(os.path.join(ws, "present.txt"), "w") as f:
        f.write("present content\n")
    server = llm_server(llm, "auto")
    sid = new_session(server, ws, approval_policy="auto", approval_deadline_s=1)
    run_id = prompt(server, sid, "try")
    run = wait_run(server, run_id)
    check(run["status"] == "completed", "run %r", run)
    res = results(tape(server, sid))
    w = res["c_write"]
    check(w["ok"] is False and "auto" in w["output"] and "polic" in w["output"] and "expired" in w["output"]
          and w.get("interaction_id", "").startswith("ia_"), "write_file: %r", w)
    check(not os.path.exists(os.path.join(ws, "new.txt")), "write_file ran under auto")
    s = res["c_shell"]
    check(s["ok"] is False and "auto" in s["output"], "shell: %r", s)
    check(not os.path.exists(os.path.join(ws, "made_by_shell")), "shell ran under auto")
    r = res["c_read"]
    check(r["ok"] is True and "present content" in r["output"], "read_file: %r", r)
    # the model was told: the refusal is the function_call_output
    outs = [i for i in llm.requests("auto")[1]["json"]["input"] if i.get("type") == "function_call_output"]
    check(any(i["call_id"] == "c_write" and "auto" in str(i.get("output")) for i in outs),
          "the refusal did not reach the model: %r", outs)
    server.stop()


def test_prompt_while_active_queues_and_worker_run_waits():
    server = Server().start()           # the demo model; nothing here reaches it
    sid = new_session(server, tmpdir(), approval_policy="yolo")
    rc, out, err = sb("call", "run.request",
                      json.dumps({"session_id": sid, "input": "for the pool",
                                  "target": {"executor": "worker", "pool": "p"}}),
                      "--data", server.data)
    check(rc == 0, "call run.request: %d %s %s", rc, out, err)
    run_id = json.loads(out)["run"]["run_id"]
    check(json.loads(out)["run"]["status"] == "queued", "worker run: %s", out)

    rc, out, err = sb("run-info", run_id, "--data", server.data)
    check(rc == 0, "run-info: %d %s", rc, err)
    check("queued" in out, "run-info: %s", out)
    waiting = [line for line in out.splitlines() if line.startswith("waiting for")]
    check(waiting and "worker" in waiting[0] and "pool p" in waiting[0],
          "run-info does not say what the run waits for:\n%s", out)
    rc, out, _ = sb("run-info", run_id, "--json", "--data", server.data)
    check("pool p" in json.loads(out).get("waiting_for", ""), "run-info --json: %s", out)

    # one run at a time: the queued run is active, so the prompt waits
    rc, out, err = sb("prompt", sid, "another", "--data", server.data)
    check(rc == 0, "prompt while a run is active exited %d: %s %s", rc, out, err)
    check("queued at position 1" in out, "the prompt does not say it waits: %r", out)
    runs = call(server, "run.list", {"session_id": sid})["runs"]
    check(len(runs) == 1, "the waiting prompt created a run: %r", runs)
    ks = kinds(tape(server, sid))
    check(ks.count("prompt") == 1 and ks.count("prompt.queued") == 1, "tape: %r", ks)

    # malformed targets are refused at request time
    for target, word in (({"executor": "moon"}, "moon"), ({"executor": "worker"}, "pool")):
        rc, out, err = sb("call", "run.request", json.dumps({"session_id": sid, "input": "x", "target": target}),
                          "--data", server.data)
        check(rc == 1 and "invalid" in (out + err) and word in (out + err), "target %r: %d %s %s",
              target, rc, out, err)

    # cancelling the queued run frees the session, and pauses its queue:
    # a new prompt runs at once, the waiting one waits for `queue resume`
    rc, out, err = sb("cancel", run_id, "--data", server.data)
    check(rc == 0 and "cancelled" in out, "cancel of a queued run: %d %s %s", rc, out, err)
    q = call(server, "session.queue.list", {"session_id": sid})
    check(q["paused"] is True and [p["text"] for p in q["prompts"]] == ["another"], "queue: %r", q)
    rc, out, err = sb("prompt", sid, "now it may", "--follow", "--data", server.data, timeout=60)
    check(rc == 0, "prompt after the cancel: %d %s %s", rc, out, err)
    server.stop()


if __name__ == "__main__":
    run_tests(globals())
