#!/usr/bin/python3
"""Compaction (issue 15, docs/compaction.md): no session dies of its own
length.

The provider is tests/llm_server.py with a 150 kB window (window=150000 in
its base URL): it refuses any request whose body is longer, with the
provider's own overflow error, so "no request exceeded the window" is the
server's word, not ours. Every scripted turn reports input_tokens = body
bytes / 4, and the server is started with --context-window 37500 (the same
window in tokens).

  - twelve 30 kB tool outputs in one run: the run completes, the tape holds
    context.compacted (elided, then summarized), no request went over the
    window, a second prompt completes, and `events` still returns every
    entry from seq 1 with each output whole;
  - the provider answers the overflow error first: one compaction, one
    retry, then success; a second overflow fails the run saying so, and
    the next prompt works;
  - a prompt larger than the window: the run fails saying so, before any
    request, and the next prompt works (the big one is summarized away);
  - SIGKILL during the summary call: after a restart the session works and
    the next run compacts again;
  - `switchboard compact`: refused while a run is active, then a summary,
    with the sizes before and after in its output;
  - a compaction in progress is cancelled like any run: no entry, and the
    next prompt works;
  - a prompt given during a compaction waits in the queue, and its run
    starts from the summary.
"""
import json
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Server, check, cli, run_tests, tmpdir, wait_for  # noqa: E402
from sbagent import (LLM, LLM_ENV, OUTPUT, SUMMARY, WINDOW, call, check_window, compactions, new_session,  # noqa: E402
                     prompt, tape, wait_run, with_tools, workspace)

TOKENS = WINDOW // 4            # the same, in tokens, for --context-window


def serve(llm, script, data=None, kind="responses"):
    url = "http://127.0.0.1:%d/script=%s/window=%d/v1" % (llm.port, script, WINDOW)
    env = dict(LLM_ENV, ANTHROPIC_API_KEY="sk-ant-test")
    return Server(data=data, args=["--llm", kind, "--llm-url", url, "--model", "m",
                                   "--context-window", str(TOKENS)], env=env).start()


def script(llm, name, turns, no_tools=None):
    body = {"op": "script", "name": name, "turns": turns}
    if no_tools is not None:
        body["no_tools"] = no_tools
    llm.control(body)


def model_requests(llm, name):
    return llm.requests(name)


def check_whole_tape(entries):
    seqs = [e["seq"] for e in entries]
    check(seqs == list(range(1, len(seqs) + 1)), "the tape is not every seq from 1: %r", seqs[:20])


# ---------------------------------------------------------------------------

def test_twelve_large_outputs_compact_and_the_session_goes_on():
    llm = LLM()
    ws = workspace(12)
    turns = [{"text": "Reading file %d. " % i + "Notes on what I saw. " * 150,
              "tool_calls": [{"name": "read_file", "arguments": {"path": "f%02d.txt" % i}}]}
             for i in range(12)]
    turns.append({"text": "I read all twelve files."})
    turns.append({"text": "Second prompt answered."})
    turns.append({"text": "Third prompt answered."})
    script(llm, "big", turns, no_tools={"text": SUMMARY})
    data = tmpdir()
    srv = serve(llm, "big", data=data)
    try:
        info = call(srv, "llm.info", {})
        check(info["context_window"] == TOKENS and info["source"] == "flag", "llm.info: %r", info)
        sid = new_session(srv, ws, approval_policy="yolo")
        run1 = prompt(srv, sid, "Read every file f00.txt to f11.txt and tell me about them.")
        r = wait_run(srv, run1, timeout=60)
        check(r["status"] == "completed", "run 1 ended %s: %s", r["status"], r.get("reason"))
        entries = tape(srv, sid)
        comp = compactions(entries)
        check(comp, "no context.compacted on the tape")
        methods = [c["body"]["method"] for c in comp]
        check("elide" in methods and "summary" in methods, "methods: %r", methods)
        for c in comp:
            b = c["body"]
            check(b["tokens_after"] < b["tokens_before"], "a compaction grew the context: %r", b)
        summ = [c for c in comp if c["body"]["method"] == "summary"][0]
        check(summ["body"]["summary"].startswith(SUMMARY), "summary: %r", summ["body"]["summary"][:200])
        # the person's request survives any summary, word for word
        check("Read every file f00.txt" in summ["body"]["summary"], "the prompt is not in the summary")
        reqs = model_requests(llm, "big")
        check_window(reqs)
        print("  figure: requests=%d largest_request_bytes=%d window_bytes=%d compactions=%s tape_bytes_of_outputs=%d"
              % (len(reqs), max(len(r["body"].encode()) for r in reqs), WINDOW, ",".join(methods),
                 12 * OUTPUT))
        check(len(with_tools(reqs)) == 13, "%d model requests with tools", len(with_tools(reqs)))
        check(len(reqs) - len(with_tools(reqs)) >= 1, "no summary request was made")
        # usage entries carry the estimate and the window
        usage = [e["body"] for e in entries if e["kind"] == "usage"]
        check(usage and all(u.get("context_window") == TOKENS and u.get("context_tokens") for u in usage),
              "usage lacks context_tokens/context_window: %r", usage[:2])

        run2 = prompt(srv, sid, "And now a second question.")
        r = wait_run(srv, run2, timeout=30)
        check(r["status"] == "completed", "run 2 ended %s: %s", r["status"], r.get("reason"))
        check_window(model_requests(llm, "big"))
        last = with_tools(model_requests(llm, "big"))[-1]
        check(SUMMARY in last["body"], "the last request does not start from the summary")

        # nothing was deleted: every entry from seq 1, every output whole
        entries = tape(srv, sid)
        check_whole_tape(entries)
        outs = [e["body"]["output"] for e in entries if e["kind"] == "tool.result"]
        check(len(outs) == 12 and all(len(o) >= OUTPUT - 16 for o in outs), "tool results on the tape: %r",
              [len(o) for o in outs])
        rc, out, err = cli(srv, "events", "--session", sid, "--json")
        check(rc == 0, "events exited %d: %s", rc, err)
        lines = [json.loads(x) for x in out.splitlines() if x.strip()]
        check(lines and lines[0]["seq"] == 1 and len(lines) == len(entries), "events: %d lines of %d",
              len(lines), len(entries))

        # a restarted server (no cached context) starts from the newest summary
        newest = [c for c in compactions(entries) if c["body"]["method"] == "summary"][-1]
        rec = call(srv, "session.get", {"session_id": sid})["session"]
        check(rec.get("compacted_seq") == newest["seq"], "compacted_seq %r, newest summary at %d",
              rec.get("compacted_seq"), newest["seq"])
        srv.stop()
        srv = serve(llm, "big", data=data)
        r = wait_run(srv, prompt(srv, sid, "A third question, after a restart."), timeout=30)
        check(r["status"] == "completed", "run 3 ended %s: %s", r["status"], r.get("reason"))
        check("context starts from the summary at seq %d" % newest["seq"] in srv.log(),
              "the restarted executor did not start from the summary")
        reqs = with_tools(model_requests(llm, "big"))
        check(SUMMARY in reqs[-1]["body"]
              and "Second prompt answered." in reqs[-1]["body"], "the third request lacks the context")
        check(len(reqs[-1]["body"]) < len(reqs[-2]["body"]) + 2000,
              "the third request (%d bytes) is not the second's context (%d) and a prompt",
              len(reqs[-1]["body"]), len(reqs[-2]["body"]))
        check_window(model_requests(llm, "big"))
    finally:
        srv.stop()
        llm.stop()


def test_overflow_error_first_compacts_once_and_retries():
    # each provider's own overflow error: OpenAI's context_length_exceeded,
    # llama.cpp's exceed_context_size_error, Anthropic's "prompt is too long"
    for kind in ("responses", "chat", "anthropic"):
        s_overflow_first(kind)


def s_overflow_first(kind):
    llm = LLM()
    ws = workspace(2)
    script(llm, "ovf", [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "f00.txt"}}]},
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "f01.txt"}}]},
        {"text": "read both"},
        {"overflow": True},
        {"text": "answered after the retry"},
    ], no_tools={"text": SUMMARY})
    srv = serve(llm, "ovf", kind=kind)
    try:
        sid = new_session(srv, ws, approval_policy="yolo")
        r = wait_run(srv, prompt(srv, sid, "read f00 and f01"), timeout=30)
        check(r["status"] == "completed", "run 1 ended %s: %s", r["status"], r.get("reason"))
        check(not compactions(tape(srv, sid)), "compacted below the threshold")
        r = wait_run(srv, prompt(srv, sid, "what was in them?"), timeout=30)
        check(r["status"] == "completed", "%s: run 2 ended %s: %s", kind, r["status"], r.get("reason"))
        comp = compactions(tape(srv, sid))
        check(len(comp) == 1, "%d compactions, not one: %r", len(comp), [c["body"]["method"] for c in comp])
        reqs = with_tools(model_requests(llm, "ovf"))
        refused = [q for q in reqs if q["status"] == 400]
        check(len(refused) == 1, "%d overflow answers", len(refused))
        after = reqs[reqs.index(refused[0]) + 1:]
        check(len(after) == 1 and after[0]["status"] == 200, "not one retry after the overflow: %r",
              [q["status"] for q in after])
        check(len(after[0]["body"]) < len(refused[0]["body"]) * 3 // 4,
              "the retry (%d bytes) is not smaller than the refused request (%d)",
              len(after[0]["body"]), len(refused[0]["body"]))
    finally:
        srv.stop()
        llm.stop()


def test_a_second_overflow_fails_the_run_clearly_and_the_session_goes_on():
    llm = LLM()
    ws = workspace(1)
    script(llm, "ovf2", [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "f00.txt"}}]},
        {"text": "read it"},
        {"overflow": True},
        {"overflow": True},
        {"text": "fine now"},
    ], no_tools={"text": SUMMARY})
    srv = serve(llm, "ovf2")
    try:
        sid = new_session(srv, ws, approval_policy="yolo")
        r = wait_run(srv, prompt(srv, sid, "read f00"), timeout=30)
        check(r["status"] == "completed", "run 1 ended %s: %s", r["status"], r.get("reason"))
        r = wait_run(srv, prompt(srv, sid, "again"), timeout=30)
        check(r["status"] == "failed" and "even after compaction" in r.get("reason", "")
              and "--context-window" in r.get("reason", ""), "run 2: %s: %s", r["status"], r.get("reason"))
        reqs = with_tools(model_requests(llm, "ovf2"))
        check([q["status"] for q in reqs] == [200, 200, 400, 400], "requests: %r", [q["status"] for q in reqs])
        r = wait_run(srv, prompt(srv, sid, "and now?"), timeout=30)
        check(r["status"] == "completed", "run 3 ended %s: %s", r["status"], r.get("reason"))
    finally:
        srv.stop()
        llm.stop()


def test_prompt_larger_than_the_window_fails_clearly_and_the_next_works():
    llm = LLM()
    ws = workspace(0)
    script(llm, "huge", [{"text": "small prompt answered"}], no_tools={"text": SUMMARY})
    srv = serve(llm, "huge")
    try:
        sid = new_session(srv, ws)
        r = wait_run(srv, prompt(srv, sid, "x" * (WINDOW + 50000)), timeout=30)
        check(r["status"] == "failed" and "does not fit the model's context window" in r.get("reason", ""),
              "the huge prompt's run: %s: %s", r["status"], r.get("reason"))
        check(not with_tools(model_requests(llm, "huge")), "the huge prompt was sent anyway")
        r = wait_run(srv, prompt(srv, sid, "a small prompt"), timeout=30)
        check(r["status"] == "completed", "the next run ended %s: %s", r["status"], r.get("reason"))
        check([c["body"]["method"] for c in compactions(tape(srv, sid))] == ["summary"],
              "not one summary compaction")
        check_window(model_requests(llm, "huge"))
    finally:
        srv.stop()
        llm.stop()


def test_sigkill_during_the_summary_leaves_the_session_usable():
    llm = LLM()
    ws = workspace(0)
    big = "y" * 60000           # two of these pass the threshold, one fits
    script(llm, "kill", [{"text": "first answered"}, {"text": "never reached"}],
           no_tools={"text": "hang", "variant": "silent"})
    data = tmpdir()
    srv = serve(llm, "kill", data=data)
    try:
        sid = new_session(srv, ws)
        r = wait_run(srv, prompt(srv, sid, "first " + big), timeout=30)
        check(r["status"] == "completed", "run 1 ended %s: %s", r["status"], r.get("reason"))
        prompt(srv, sid, "second " + big)
        wait_for(lambda: len(model_requests(llm, "kill")) > len(with_tools(model_requests(llm, "kill"))),
                 20, "the summary request")
        srv.stop(signal.SIGKILL)
        srv = serve(llm, "kill", data=data)
        check(not compactions(tape(srv, sid)), "a compaction was recorded by the killed run")
        script(llm, "kill", [{"text": "third answered"}], no_tools={"text": SUMMARY})
        r = wait_run(srv, prompt(srv, sid, "third, small"), timeout=30)
        check(r["status"] == "completed", "the run after the restart ended %s: %s", r["status"], r.get("reason"))
        comp = compactions(tape(srv, sid))
        check(len(comp) == 1 and comp[0]["body"]["method"] == "summary", "compactions after restart: %r", comp)
        check_window(model_requests(llm, "kill")[-2:])
        check_whole_tape(tape(srv, sid))
    finally:
        srv.stop()
        llm.stop()


def test_manual_compact_is_refused_while_busy_then_summarizes():
    llm = LLM()
    ws = workspace(1)
    script(llm, "man", [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "f00.txt"}}]},
        {"text": "read it"},
        {"text": "slow answer", "delay_ms": 40, "piece": 1},
        {"text": "after the compaction"},
    ], no_tools={"text": SUMMARY})
    srv = serve(llm, "man")
    try:
        sid = new_session(srv, ws, approval_policy="yolo")
        r = wait_run(srv, prompt(srv, sid, "read f00"), timeout=30)
        check(r["status"] == "completed", "run 1 ended %s: %s", r["status"], r.get("reason"))
        busy = prompt(srv, sid, "answer slowly")
        m = srv.control().request("session.compact", {"session_id": sid}, timeout=10)
        check(m.type == "error" and m.body["code"] == "conflict", "compact while busy: %s %r", m.type, m.body)
        wait_run(srv, busy, timeout=30)

        rc, out, err = cli(srv, "compact", sid, timeout=30)
        check(rc == 0, "compact exited %d: %s %s", rc, out, err)
        check("context compacted (summarized)" in out and "→" in out, "compact printed: %r", out)
        comp = compactions(tape(srv, sid))
        check(len(comp) == 1 and comp[0]["body"]["method"] == "summary", "compactions: %r", comp)
        r = wait_run(srv, prompt(srv, sid, "go on"), timeout=30)
        check(r["status"] == "completed", "the run after compact ended %s: %s", r["status"], r.get("reason"))
        last = with_tools(model_requests(llm, "man"))[-1]["body"]
        check(SUMMARY in last and "f00.txt" not in last.split(SUMMARY)[0],
              "the run after compact does not start from the summary")
    finally:
        srv.stop()
        llm.stop()


def test_a_compaction_in_progress_is_cancelled_like_a_run():
    llm = LLM()
    ws = workspace(1)
    script(llm, "cnl", [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "f00.txt"}}]},
        {"text": "read it"},
        {"text": "after the cancelled compaction"},
    ], no_tools={"text": "hang", "variant": "silent"})
    srv = serve(llm, "cnl")
    try:
        sid = new_session(srv, ws, approval_policy="yolo")
        r = wait_run(srv, prompt(srv, sid, "read f00"), timeout=30)
        check(r["status"] == "completed", "run 1 ended %s: %s", r["status"], r.get("reason"))
        run = call(srv, "session.compact", {"session_id": sid})["run"]
        check(run.get("kind") == "compact", "not a compact run: %r", run)
        wait_for(lambda: len(model_requests(llm, "cnl")) > len(with_tools(model_requests(llm, "cnl"))),
                 20, "the summary request")
        call(srv, "run.cancel", {"run_id": run["run_id"]})
        r = wait_run(srv, run["run_id"], timeout=20)
        check(r["status"] == "cancelled", "the compaction ended %s: %s", r["status"], r.get("reason"))
        check(not compactions(tape(srv, sid)), "a cancelled compaction left an entry")
        m = srv.control().request("run.resume", {"run_id": run["run_id"]}, timeout=10)
        check(m.type == "error" and m.body["code"] == "conflict" and "compact" in m.body["message"],
              "resuming a compaction: %s %r", m.type, m.body)
        r = wait_run(srv, prompt(srv, sid, "go on"), timeout=30)
        check(r["status"] == "completed", "the next run ended %s: %s", r["status"], r.get("reason"))
    finally:
        srv.stop()
        llm.stop()


def test_a_prompt_during_a_compaction_waits_in_the_queue():
    llm = LLM()
    ws = workspace(1)
    script(llm, "q", [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "f00.txt"}}]},
        {"text": "read it"},
        {"text": "queued prompt answered"},
    ], no_tools={"text": SUMMARY, "piece": 2, "delay_ms": 20})
    srv = serve(llm, "q")
    try:
        sid = new_session(srv, ws, approval_policy="yolo")
        r = wait_run(srv, prompt(srv, sid, "read f00"), timeout=30)
        check(r["status"] == "completed", "run 1 ended %s: %s", r["status"], r.get("reason"))
        run = call(srv, "session.compact", {"session_id": sid})["run"]
        m = srv.control().request("session.prompt", {"session_id": sid, "text": "after the compaction"},
                                  timeout=10)
        check(m.type == "session.prompt.ok" and m.body.get("queued"), "prompt during compaction: %s %r",
              m.type, m.body)
        r = wait_run(srv, run["run_id"], timeout=30)
        check(r["status"] == "completed", "the compaction ended %s: %s", r["status"], r.get("reason"))

        def next_run():
            runs = call(srv, "run.list", {"session_id": sid})["runs"]
            return [x for x in runs if x["run_id"] != run["run_id"] and x.get("input") == "after the compaction"]
        queued = wait_for(next_run, 20, "the queued prompt's run")[0]
        r = wait_run(srv, queued["run_id"], timeout=30)
        check(r["status"] == "completed", "the queued run ended %s: %s", r["status"], r.get("reason"))
        kinds_seen = [e["kind"] for e in tape(srv, sid)]
        check("prompt.queued" in kinds_seen and kinds_seen.index("prompt.queued") < kinds_seen.index("context.compacted"),
              "the prompt was not queued during the compaction: %r", kinds_seen[-20:])
        last = with_tools(model_requests(llm, "q"))[-1]["body"]
        check(SUMMARY in last and "after the compaction" in last, "the queued run does not start from the summary")
    finally:
        srv.stop()
        llm.stop()


if __name__ == "__main__":
    run_tests(globals())
