#!/usr/bin/python3
"""Defects found by trying switchboard (task i20): each test reproduces one
with real processes (tests/llm_server.py over HTTP, the real MCP servers of
tests/mcp) and fails on the code before its fix.

  - compaction after a provider's overflow, with a provider whose token
    count is far below bytes / 4 (Anthropic counts cached tokens apart):
    the run completes, every token figure is in range;
  - an MCP server over streamable HTTP (tests/mcp/http_server.py) that
    pings the client inside a tools/call gets its answer at once, and its
    elicitation, sampling and roots requests get "method not found";
  - run accounting: with a provider that sends no usage, the summary of
    `prompt --follow`, run-info and the tape say the model calls made and
    that the tokens are unknown; a compaction run counts its model call;
    a run resumed after a restart keeps the calls it made before, and one
    interrupted by a crash says them too;
  - a call to a tool the session does not offer is answered at once with
    "unknown tool" and the tools it has, never put to a person;
  - `keys new` on a data folder that does not exist yet makes it;
  - `compact` says why nothing was compacted truly, and gives one figure
    for the size after;
  - MCP errors: an HTTP server that forgot our session (404) gets a new one
    and the call once more; one that wants authorization (401) says so; a
    server that dies during a call is named in a sentence that reads;
    a provider that answers plain JSON to a stream request fails the call
    once, with one clear line, without retries;
  - the run coordinator's remembered command_ids expire
    (SWITCHBOARD_COMMAND_TTL_S) and are swept;
  - the changes panel's exec.diff states its base, takes the one asked
    for, and lists a file the agent wrote even when it shows no change
    (it had been deleted outside switchboard and was written back);
  - a worker that ran runs with an AGENTS.md exits clean (under ASan, with
    leak detection, a leak of its text fails the exit status).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import re
import signal

from sbtest import ROOT, Proc, Server, check, cli, read_jsonl, run_tests, sb, tmpdir, wait_for  # noqa: E402
from sbagent import (LLM, LLM_ENV, SUMMARY, WINDOW, call, compactions, get_run, llm_args, llm_server,  # noqa: E402
                     new_session, prompt, results, tape, wait_run, with_tools, workspace)

MAX_TOKENS = 1 << 40            # schemas: a token figure above this is refused
HTTP_MCP = os.path.join(ROOT, "tests", "mcp", "http_server.py")


class HttpMcp:
    """tests/mcp/http_server.py on an ephemeral loopback port."""

    def __init__(self, token=None):
        d = tmpdir()
        self.portfile, self.logfile = os.path.join(d, "port"), os.path.join(d, "mcp.jsonl")
        argv = ["/usr/bin/python3", HTTP_MCP, "--portfile", self.portfile, "--log", self.logfile]
        self.proc = Proc(argv + (["--token", token] if token else []), os.path.join(d, "mcp.log"))
        wait_for(lambda: os.path.exists(self.portfile), 10, "the HTTP MCP server to listen")
        with open(self.portfile) as f:
            self.url = "http://127.0.0.1:%s/mcp" % f.read().strip()

    def log(self):
        return read_jsonl(self.logfile)

    def stop(self):
        self.proc.stop()


def mcp_config(servers):
    path = os.path.join(tmpdir(), "mcp.json")
    with open(path, "w") as f:
        json.dump({"mcpServers": servers}, f)
    return path


def tool_turn(*specs):
    return {"tool_calls": [{"name": n, "arguments": a, "call_id": c} for c, n, a in specs]}


# ---------------------------------------------------------------------------
# 1. compaction figures

def test_overflow_with_a_low_token_count_compacts_and_completes():
    llm = LLM()
    ws = workspace(6)
    # each turn reports 2,000 input tokens, far below its bytes / 4: the
    # calibrated estimate is smaller than what eliding saves
    usage = {"input_tokens": 2000, "output_tokens": 5}
    turns = [{"tool_calls": [{"name": "read_file", "arguments": {"path": "f%02d.txt" % i}}], "usage": usage}
             for i in range(6)]
    turns.append({"text": "read all six", "usage": usage})
    llm.control({"op": "script", "name": "low", "turns": turns, "no_tools": {"text": SUMMARY}})
    url = "http://127.0.0.1:%d/script=low/window=%d/v1" % (llm.port, WINDOW)
    # no --context-window: the window is taken as the default, much larger
    # than the server's, so only the provider's overflow error says so
    srv = Server(args=["--llm", "responses", "--llm-url", url, "--model", "m"], env=LLM_ENV).start()
    try:
        sid = new_session(srv, ws, approval_policy="yolo")
        r = wait_run(srv, prompt(srv, sid, "Read f00.txt to f05.txt."), timeout=60)
        check(r["status"] == "completed", "the run ended %s: %s", r["status"], r.get("reason"))
        reqs = with_tools(llm.requests("low"))
        check(any(q["status"] == 400 for q in reqs), "the provider never overflowed: %r",
              [q["status"] for q in reqs])
        comp = compactions(tape(srv, sid))
        check(comp, "no compaction on the tape")
        for c in comp:
            b = c["body"]
            check(0 < b["tokens_after"] < MAX_TOKENS and 0 < b["tokens_before"] < MAX_TOKENS,
                  "token figures out of range: %r", {k: b[k] for k in ("tokens_before", "tokens_after", "method")})
            check(b["tokens_after"] <= b["tokens_before"], "a compaction grew the context: %r",
                  {k: b[k] for k in ("tokens_before", "tokens_after", "method")})
        for e in tape(srv, sid):
            if e["kind"] == "usage":
                ct = e["body"].get("context_tokens", 0)
                check(ct < MAX_TOKENS, "usage context_tokens out of range: %r", e["body"])
        print("  figure: compactions=%s" % [(c["body"]["method"], c["body"]["tokens_before"], c["body"]["tokens_after"])
                                          for c in comp])
    finally:
        srv.stop()
        llm.stop()


# ---------------------------------------------------------------------------
# 2. server-to-client requests over streamable HTTP

def test_http_mcp_server_requests_are_answered_during_a_call():
    mcp = HttpMcp()
    llm = LLM()
    llm.script("ping", [tool_turn(("c_ping", "mcp__h__ping_me", {}), ("c_ask", "mcp__h__ask", {})),
                        {"text": "done"}])
    srv = Server(args=llm_args(llm, "ping") + ["--mcp-config", mcp_config({"h": {"url": mcp.url}})],
                 env=LLM_ENV).start()
    try:
        sid = new_session(srv, tmpdir(), approval_policy="yolo")
        r = wait_run(srv, prompt(srv, sid, "ping"), timeout=40)
        check(r["status"] == "completed", "the run ended %s: %s", r["status"], r.get("reason"))
        res = results(tape(srv, sid))
        ping = res["c_ping"]
        check(ping["ok"] is True and 'ping answer {"jsonrpc": "2.0", "result": {}}' in ping["output"],
              "ping: %r", ping)
        ms = int(ping["output"].rsplit(" in ", 1)[1].split()[0])
        check(ms < 5000, "the ping took %d ms to be answered", ms)
        ask = res["c_ask"]
        for method in ("elicitation/create", "sampling/createMessage", "roots/list"):
            check("%s: -32601" % method in ask["output"], "%s not refused as unknown: %r", method, ask)
        print("  figure: ping answered in %d ms; %s" % (ms, ask["output"]))
    finally:
        srv.stop()
        llm.stop()
        mcp.stop()


# ---------------------------------------------------------------------------
# 4. run accounting

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


# ---------------------------------------------------------------------------
# 5. a tool the session does not offer

def test_an_unknown_tool_is_answered_at_once_and_never_asked_about():
    llm = LLM()
    llm.script("unk", [{"tool_calls": [{"name": "mcp__fs__list_directory", "arguments": {"path": "."},
                                        "call_id": "c_unk"},
                                       {"name": "made_up_tool", "arguments": {}, "call_id": "c_made"}]},
                       {"text": "sorry"}])
    srv = llm_server(llm, "unk")
    try:
        sid = new_session(srv, tmpdir(), approval_policy="auto", mcp_servers=[])
        rc, out, err = sb("prompt", sid, "list the folder", "--follow", "--data", srv.data, timeout=60)
        check(rc == 0, "prompt --follow exited %d:\n%s%s", rc, out, err)
        entries = tape(srv, sid)
        check(not [e for e in entries if e["kind"] == "approval.requested"], "a person was asked about it")
        res = results(entries)
        for cid, name in (("c_unk", "mcp__fs__list_directory"), ("c_made", "made_up_tool")):
            r = res[cid]
            check(r["ok"] is False and ("unknown tool %s" % name) in r["output"] and "read_file" in r["output"]
                  and not r.get("refused") and r.get("mutating") is False, "the result of %s: %r", name, r)
        # the model was told, in its next request
        outs = [i for i in llm.requests("unk")[1]["json"]["input"] if i.get("type") == "function_call_output"]
        check(len(outs) == 2 and all("unknown tool" in str(o.get("output")) for o in outs), "the model got %r", outs)
        check("error: error" not in out and "error: error" not in llm.requests("unk")[1]["body"],
              "an error said twice:\n%s", out)
        check(out.count("unknown tool mcp__fs__list_directory") == 1, "the error is not printed once:\n%s", out)
    finally:
        srv.stop()
        llm.stop()


# ---------------------------------------------------------------------------
# 6. keys before the first serve

def test_keys_new_makes_a_data_folder_that_does_not_exist():
    data = os.path.join(tmpdir(), "not", "yet")
    rc, out, err = sb("keys", "new", "w1", "--data", data)
    check(rc == 0, "keys new exited %d: %s %s", rc, out, err)
    check(os.stat(data).st_mode & 0o777 == 0o700, "DATA has mode %o", os.stat(data).st_mode & 0o777)
    for f in ("certs/clients/w1", "certs/clients/w1_secret", "certs/server", "certs/server_secret"):
        check(os.path.isfile(os.path.join(data, f)), "%s was not made", f)
    check(os.stat(os.path.join(data, "certs/clients/w1_secret")).st_mode & 0o077 == 0, "the secret is readable by others")
    check(out.splitlines()[-1] == os.path.join(data, "certs/clients/w1_secret"), "the last line: %r", out)


# ---------------------------------------------------------------------------
# 7. what `compact` says

def test_compact_says_what_is_true_and_one_after_figure():
    llm = LLM()
    llm.control({"op": "script", "name": "cm", "turns": [{"text": "one"}, {"text": "two"}, {"text": "three"},
                                                        {"text": "four"}],
                 "no_tools": {"text": SUMMARY}})
    srv = Server(args=llm_args(llm, "cm") + ["--context-window", "4000"], env=LLM_ENV).start()
    try:
        sid = new_session(srv, tmpdir())
        for text in ("first", "second"):
            check(wait_run(srv, prompt(srv, sid, text), timeout=30)["status"] == "completed", "a short run")
        rc, out, err = cli(srv, "compact", sid)
        check(rc == 0, "compact exited %d: %s %s", rc, out, err)
        check("only the newest turn" not in out and "fits in the recent turns" in out,
              "compact on two short turns says:\n%s", out)
        # large turns: a summary, and the same figure after it everywhere
        for text in ("third " + "c" * 3000, "fourth " + "d" * 3000):
            check(wait_run(srv, prompt(srv, sid, text), timeout=30)["status"] == "completed", "a long run")
        rc, out, err = cli(srv, "compact", sid)
        check(rc == 0, "compact exited %d: %s %s", rc, out, err)
        m = re.search(r"context compacted \(summarized\): (\d+) → (\d+) tokens", out)
        check(m, "no compaction line:\n%s", out)
        figures = set(re.findall(r"about (\d+) tokens", out))
        check(figures == {m.group(2)}, "after figures %r besides the compaction's %s:\n%s", figures, m.group(2), out)
    finally:
        srv.stop()
        llm.stop()


# ---------------------------------------------------------------------------
# 9. MCP errors

def test_http_mcp_session_forgotten_is_initialized_again_and_the_call_retried_once():
    mcp = HttpMcp()
    llm = LLM()
    llm.script("fg", [tool_turn(("c_forget", "mcp__h__forget", {})), tool_turn(("c_ok", "mcp__h__ok", {})),
                      {"text": "done"}])
    srv = Server(args=llm_args(llm, "fg") + ["--mcp-config", mcp_config({"h": {"url": mcp.url}})],
                 env=LLM_ENV).start()
    try:
        sid = new_session(srv, tmpdir(), approval_policy="yolo")
        r = wait_run(srv, prompt(srv, sid, "go"), timeout=40)
        check(r["status"] == "completed", "the run ended %s: %s", r["status"], r.get("reason"))
        res = results(tape(srv, sid))
        check(res["c_ok"]["ok"] is True and res["c_ok"]["output"] == "fine", "the call after the 404: %r",
              res["c_ok"])
        log = mcp.log()
        inits = [x for x in log if x.get("msg", {}).get("method") == "initialize"]
        oks = [x for x in log if x.get("msg", {}).get("method") == "tools/call"
               and x["msg"]["params"]["name"] == "ok"]
        check(len(inits) == 2 and len(oks) == 2 and any(x.get("status") == 404 for x in log),
              "initialize %d times, ok sent %d times: %r", len(inits), len(oks), log[-6:])
    finally:
        srv.stop()
        llm.stop()
        mcp.stop()


def test_http_mcp_server_that_needs_authorization_says_so():
    mcp = HttpMcp(token="tok-7")
    llm = LLM()
    llm.script("au", [tool_turn(("c_ok", "mcp__h__ok", {})), {"text": "done"}])
    srv = Server(args=llm_args(llm, "au") + ["--mcp-config", mcp_config({"h": {"url": mcp.url}})],
                 env=LLM_ENV).start()
    try:
        sid = new_session(srv, tmpdir(), approval_policy="yolo")
        r = wait_run(srv, prompt(srv, sid, "go"), timeout=40)
        check(r["status"] == "completed", "the run ended %s: %s", r["status"], r.get("reason"))
        entries = tape(srv, sid)
        notes = [e["body"].get("text", "") for e in entries if e["kind"] == "note"]
        check(any("needs authorization" in n and "went away" not in n for n in notes), "the notes: %r", notes)
        out = results(entries)["c_ok"]["output"]
        check("needs authorization" in out and "went away" not in out, "the call: %r", out)
        rc, lst, err = cli(srv, "mcp", "list")
        check("needs authorization" in lst, "mcp list:\n%s", lst)
    finally:
        srv.stop()
        llm.stop()
        mcp.stop()


def test_a_server_that_dies_during_a_call_is_named_in_a_sentence():
    hostile = os.path.join(ROOT, "tests", "mcp", "hostile_server.py")
    llm = LLM()
    llm.script("die", [tool_turn(("c_die", "mcp__conf__die", {})), {"text": "done"}])
    cfg = mcp_config({"conf": {"command": "/usr/bin/python3", "args": [hostile]}})
    srv = Server(args=llm_args(llm, "die") + ["--mcp-config", cfg], env=LLM_ENV).start()
    try:
        sid = new_session(srv, tmpdir(), approval_policy="yolo")
        r = wait_run(srv, prompt(srv, sid, "go"), timeout=40)
        check(r["status"] == "completed", "the run ended %s: %s", r["status"], r.get("reason"))
        out = results(tape(srv, sid))["c_die"]["output"]
        check(out.startswith("the MCP server conf went away during the call") and "effect is unknown" in out
              and "conf it" not in out, "the call's error: %r", out)
        body = llm.requests("die")[1]["body"]
        check("error: the MCP server conf went away" in body and "error: error" not in body,
              "the model reads: %r", body[body.find("went away") - 80:body.find("went away") + 40])
    finally:
        srv.stop()
        llm.stop()


def test_a_provider_answering_plain_json_fails_once_and_clearly():
    for kind in ("anthropic", "chat", "responses"):
        llm = LLM()
        url = "http://127.0.0.1:%d/variant=json/tag=%s/v1" % (llm.port, kind)
        env = {"OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "sk-ant-test", "SWITCHBOARD_LLM_BACKOFF_MS": "10"}
        srv = Server(args=["--llm", kind, "--llm-url", url, "--model", "m"], env=env).start()
        try:
            sid = new_session(srv, tmpdir())
            r = wait_run(srv, prompt(srv, sid, "hi"), timeout=30)
            reason = r.get("reason", "")
            check(r["status"] == "failed" and "not an event stream" in reason, "%s: the run ended %s: %s", kind,
                  r["status"], reason)
            check(reason.count("stream") <= 3 and "without" not in reason, "%s: the reason: %s", kind, reason)
            check(len(llm.requests()) == 1, "%s: %d requests: retried", kind, len(llm.requests()))
        finally:
            srv.stop()
            llm.stop()


# ---------------------------------------------------------------------------
# 11. found by reading the code

def test_the_run_coordinators_command_ids_expire():
    llm = LLM()
    llm.script("ttl", [{"text": "done"}], repeat_last=True)
    srv = Server(args=llm_args(llm, "ttl"), env=dict(LLM_ENV, SWITCHBOARD_COMMAND_TTL_S="1")).start()
    try:
        sid = new_session(srv, tmpdir())
        req = {"session_id": sid, "input": "hi", "command_id": "cmd-ttl-1"}
        first = call(srv, "run.request", req)["run"]["run_id"]
        check(wait_run(srv, first)["status"] == "completed", "the first run did not complete")
        again = call(srv, "run.request", req)["run"]["run_id"]
        # at once it is the same request (unless a slow machine let a second pass)
        box = {}

        def new_run():
            box["r"] = call(srv, "run.request", req)["run"]["run_id"]
            return box["r"] != first
        wait_for(new_run, 15, "the command_id to be forgotten after its 1 s")
        check(again in (first, box["r"]), "a retry within the ttl made another run")
        wait_for(lambda: "expired command_ids" in srv.log(), 15, "the sweep of expired command_ids")
    finally:
        srv.stop()
        llm.stop()


def test_a_worker_frees_each_runs_agents_md():
    from sbagent import session_prompt, start_worker
    ws = tmpdir()
    with open(os.path.join(ws, "AGENTS.md"), "w") as f:
        f.write("WORKER-RULE: keep it short\n")
    llm = LLM()
    llm.script("wmd", [{"text": "one"}, {"text": "two"}])
    env = dict(LLM_ENV, XDG_CONFIG_HOME=tmpdir())
    srv = Server(args=llm_args(llm, "wmd"), env=env).start()
    w = start_worker(srv, "wmd1")
    try:
        sid = new_session(srv, ws, approval_policy="yolo", target="worker:p")
        for text in ("first", "second"):
            r = wait_run(srv, session_prompt(srv, sid, text), timeout=30)
            check(r["status"] == "completed", "run: %r\nworker log:\n%s", r, w.log())
        reqs = llm.requests("wmd")
        check(len(reqs) == 2 and all("WORKER-RULE" in q["body"] for q in reqs), "the runs lack AGENTS.md")
        rc = w.stop()
        check(rc == 0, "the worker exited %r (under ASan: a leak?):\n%s", rc, w.log()[-3000:])
    finally:
        w.stop()
        srv.stop()
        llm.stop()


# ---------------------------------------------------------------------------
# 8. the changes panel never hides an agent's write

def test_the_changes_of_a_session_state_their_base_and_never_hide_a_write():
    import subprocess

    def git(*args):
        subprocess.run(["git", "-C", ws] + list(args), check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    ws = tmpdir()
    git("init", "-q")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    with open(os.path.join(ws, "f.txt"), "w") as f:
        f.write("x\n")
    git("add", ".")
    git("commit", "-qm", "init")
    llm = LLM()
    llm.script("ch", [tool_turn(("c1", "write_file", {"path": "other.txt", "content": "new\n"})), {"text": "one"},
                      tool_turn(("c2", "write_file", {"path": "./f.txt", "content": "x\n"})), {"text": "two"}])
    srv = llm_server(llm, "ch")
    try:
        sid = new_session(srv, ws, approval_policy="yolo")
        d = call(srv, "exec.diff", {"session_id": sid, "base": "session"})
        check(d["base"] == "head" and d["session_base"] is False and d["written"] == [],
              "before any run, asked for the session's base: %r", d)
        check(wait_run(srv, prompt(srv, sid, "one"))["status"] == "completed", "run one")
        os.unlink(os.path.join(ws, "f.txt"))           # a person deletes it outside switchboard
        check(wait_run(srv, prompt(srv, sid, "two"))["status"] == "completed", "run two")
        d = call(srv, "exec.diff", {"session_id": sid})
        paths = sorted(f["path"] for f in d["files"])
        check(d["base"] == "session" and d["session_base"] is True and paths == ["other.txt"],
              "against the session's base: %r", {k: d[k] for k in ("base", "session_base", "written")})
        check(d["written"] == ["f.txt"], "the agent's write of f.txt is hidden: %r", d["written"])
        h = call(srv, "exec.diff", {"session_id": sid, "base": "head"})
        check(h["base"] == "head" and h["session_base"] is True and h["written"] == ["f.txt"]
              and sorted(f["path"] for f in h["files"]) == ["other.txt"], "against HEAD: %r", h)
    finally:
        srv.stop()
        llm.stop()


if __name__ == "__main__":
    run_tests(globals())
