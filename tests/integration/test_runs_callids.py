#!/usr/bin/python3
"""No turn can poison a session (issue 8): a chat-completions model that
repeats tool-call ids, as some local servers do (call_0 at every turn, and
twice within one turn), against the real server and the loopback provider
(tests/llm_server.py).

  - the run completes: every request the provider gets names each call
    once, and pairs each tool message with the call it answers;
  - the tape keeps ids unique in the session, and the provider's own id
    beside a renamed one (provider_call_id);
  - the session stays usable: the next prompt completes, and so does a
    `resume` of a run that failed after the repeats.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Server, check, run_tests, tmpdir  # noqa: E402
from sbagent import LLM, LLM_ENV, call, new_session, prompt, tape, wait_run  # noqa: E402


def chat_server(llm, script):
    args = ["--llm", "chat", "--llm-url", llm.url(script), "--model", "m"]
    return Server(args=args, env=LLM_ENV).start()


def call0(name, arguments):
    return {"name": name, "arguments": arguments, "call_id": "call_0"}


def check_provider_view(requests):
    """Each chat request names every call once, and each tool message
    answers a call made before it."""
    for n, req in enumerate(requests):
        seen = set()
        for m, msg in enumerate(req["json"]["messages"]):
            for tc in msg.get("tool_calls") or []:
                check(tc["id"] not in seen, "request %d, messages[%d]: call id %s repeated", n, m, tc["id"])
                seen.add(tc["id"])
            if msg.get("role") == "tool":
                check(msg.get("tool_call_id") in seen, "request %d, messages[%d]: output for unknown call %r",
                      n, m, msg.get("tool_call_id"))


def tool_outputs(request):
    """{tool_call_id: content} of one chat request's tool messages."""
    return {m["tool_call_id"]: m["content"] for m in request["json"]["messages"] if m.get("role") == "tool"}


def test_repeated_call_ids_never_poison_the_session():
    ws = tmpdir()
    with open(os.path.join(ws, "a.txt"), "w") as f:
        f.write("alpha\n")
    with open(os.path.join(ws, "b.txt"), "w") as f:
        f.write("beta\n")
    llm = LLM()
    llm.script("ids", [
        # within one turn: two calls named call_0
        {"tool_calls": [call0("read_file", {"path": "a.txt"}), call0("read_file", {"path": "b.txt"})]},
        # across turns: call_0 again
        {"tool_calls": [call0("list_dir", {})]},
        {"text": "first done"},
        # the next prompt: call_0 once more
        {"tool_calls": [call0("read_file", {"path": "a.txt"})]},
        {"text": "second done"},
    ])
    server = chat_server(llm, "ids")
    sid = new_session(server, ws, approval_policy="auto")

    run = wait_run(server, prompt(server, sid, "read both"), timeout=30)
    check(run["status"] == "completed", "the first run: %r", run)
    run = wait_run(server, prompt(server, sid, "once more"), timeout=30)
    check(run["status"] == "completed", "the next prompt: %r", run)

    entries = tape(server, sid)
    calls = [e["body"] for e in entries if e["kind"] == "tool.call"]
    ids = [c["call_id"] for c in calls]
    check(len(ids) == 4 and len(set(ids)) == 4, "tape call ids are not unique: %r", ids)
    check(ids[0] == "call_0" and "provider_call_id" not in calls[0], "the first call: %r", calls[0])
    for c in calls[1:]:
        check(c.get("provider_call_id") == "call_0", "a renamed call lacks the provider's id: %r", c)
    results = [e["body"] for e in entries if e["kind"] == "tool.result"]
    check([r["call_id"] for r in results] == ids, "results %r for calls %r", [r["call_id"] for r in results], ids)
    check("alpha" in results[0]["output"] and "beta" in results[1]["output"], "results: %r", results[:2])

    reqs = llm.requests("ids")
    check(len(reqs) == 5, "%d model requests", len(reqs))
    check_provider_view(reqs)
    # the second request pairs each output with its own call
    outs = tool_outputs(reqs[1])
    check("alpha" in outs[ids[0]] and "beta" in outs[ids[1]], "the model saw %r", outs)
    server.stop()


def test_resume_after_repeated_ids():
    ws = tmpdir()
    llm = LLM()
    llm.script("resume", [
        {"tool_calls": [call0("list_dir", {}), call0("list_dir", {})]},
        {"tool_calls": [call0("list_dir", {})]},
        {"status": 400},            # the run fails here, after the repeats
        {"text": "resumed fine"},
    ])
    server = chat_server(llm, "resume")
    sid = new_session(server, ws, approval_policy="auto")
    first = wait_run(server, prompt(server, sid, "look"), timeout=30)
    check(first["status"] == "failed", "the first run should fail on the 400: %r", first)
    resumed = call(server, "run.resume", {"run_id": first["run_id"]})["run"]["run_id"]
    run = wait_run(server, resumed, timeout=30)
    check(run["status"] == "completed", "the resumed run: %r", run)
    reqs = llm.requests("resume")
    check(len(reqs) == 4, "%d model requests", len(reqs))
    check_provider_view(reqs)
    server.stop()


if __name__ == "__main__":
    run_tests(globals())
