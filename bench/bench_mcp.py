#!/usr/bin/python3
"""bench_mcp — what the agent's ecosystem costs a run (issue 16).

    /usr/bin/python3 bench/bench_mcp.py [--reps 5] [--calls 50]

Each repetition starts a fresh `switchboard serve` whose model is the
scripted loopback provider (tests/llm_server.py) and whose MCP config holds
the reference server @modelcontextprotocol/server-everything (stdio, node)
and our stdlib python server (tests/mcp/hostile_server.py), plus a hook on
run.finished. Figures, one JSON line each, the median of the repetitions:

  mcp_echo_call_ms       one tools/call of server-everything's echo and its
                         tool.result on the tape (JSON-RPC over the pipe,
                         node's handling, our parsing, capping and the
                         fenced append): the span of CALLS results of one
                         step over CALLS-1. Baseline: the same for the
                         python server's `ok` tool.
  mcp_first_run_ms       wall time of a session's first run (one echo
                         call): it starts both servers (spawn, node or
                         python, initialize, tools/list). Baseline: the second run
                         of the same session, whose server is running.
  hook_start_ms          from a run.finished entry's ts to its hook's first
                         instruction (the hook writes its clock): the event
                         plane, the hooks actor's queue and the spawn.

Needs node and tests/mcp/node_modules (scripts/deps.sh --tests).
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
os.environ.setdefault("SB_ROOT", ROOT)
os.environ.setdefault("SB_BIN", os.path.join(ROOT, "build", "switchboard"))

from sbtest import Server, tmpdir, wait_for  # noqa: E402
from test_runs_e2e import LLM, LLM_ENV, llm_args, new_session, prompt, tape, wait_run  # noqa: E402

EVERYTHING = os.path.join(ROOT, "tests", "mcp", "node_modules", "@modelcontextprotocol", "server-everything",
                          "dist", "index.js")
HOSTILE = os.path.join(ROOT, "tests", "mcp", "hostile_server.py")


def calls(name, n, args):
    return {"tool_calls": [{"name": name, "arguments": args, "call_id": "c%d" % k} for k in range(n)]}


def per_call(entries, after):
    """ms per call: the span of the step's tool.result entries (wall-clock
    ms stamps) over the calls between them; each includes its append."""
    ts = [e["ts"] for e in entries if e["kind"] == "tool.result" and e["seq"] > after and e["body"]["ok"]]
    return (ts[-1] - ts[0]) / (len(ts) - 1)


def one_rep(ncalls):
    d = tmpdir()
    cfg = os.path.join(d, "mcp.json")
    with open(cfg, "w") as f:
        json.dump({"mcpServers": {"every": {"command": "node", "args": [EVERYTHING, "stdio"]},
                                  "py": {"command": "/usr/bin/python3", "args": [HOSTILE]}}}, f)
    stamps = os.path.join(d, "stamps")
    os.mkdir(stamps)
    hooks = os.path.join(d, "hooks.json")
    with open(hooks, "w") as f:
        json.dump({"hooks": {"run.finished": [{"command": [
            "/bin/sh", "-c", 'date +%s%N > "$OUT/$SWITCHBOARD_RUN_ID.t"; mv "$OUT/$SWITCHBOARD_RUN_ID.t" '
            '"$OUT/$SWITCHBOARD_RUN_ID"'], "env": {"OUT": stamps}}]}}, f)
    llm = LLM()
    llm.script("b", [calls("mcp__every__echo", 1, {"message": "x"}), {"text": "a"},
                     calls("mcp__every__echo", 1, {"message": "x"}), {"text": "b"},
                     calls("mcp__every__echo", ncalls, {"message": "x"}), {"text": "c"},
                     calls("mcp__py__ok", ncalls, {}), {"text": "d"}])
    server = Server(args=llm_args(llm, "b") + ["--mcp-config", cfg, "--hooks", hooks], env=LLM_ENV).start()
    try:
        sid = new_session(server, tmpdir(), approval_policy="yolo")
        walls, runs = [], []
        for _ in range(2):
            t0 = time.monotonic()
            rid = prompt(server, sid, "go")
            wait_run(server, rid, timeout=60)
            walls.append((time.monotonic() - t0) * 1000)
            runs.append(rid)
        last = tape(server, sid)[-1]["seq"]
        rid = prompt(server, sid, "echo")
        wait_run(server, rid, timeout=120)
        echo = per_call(tape(server, sid), last)
        last = tape(server, sid)[-1]["seq"]
        rid = prompt(server, sid, "ok")
        wait_run(server, rid, timeout=120)
        ok = per_call(tape(server, sid), last)
        runs.append(rid)
        entries = tape(server, sid)
        finished = {e["run_id"]: e["ts"] for e in entries
                    if e["kind"] == "run.status" and e["body"]["status"] == "completed"}
        wait_for(lambda: all(os.path.exists(os.path.join(stamps, r)) for r in runs), 10, "the hooks")
        # the entry's ts is wall-clock ms; the hook's date is wall-clock ns
        hook = [int(open(os.path.join(stamps, r)).read()) / 1e6 - finished[r] for r in runs]
        return {"echo": echo, "ok": ok, "first": walls[0],
                "second": walls[1], "hook": statistics.median(hook)}
    finally:
        if os.environ.get("BENCH_MCP_LOG"):
            print("\n".join(l for l in server.log().splitlines() if "mcp" in l or "run " in l or "hook" in l),
                  file=sys.stderr)
        server.stop()
        llm.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--calls", type=int, default=50)   # at most 64: the calls of one step
    a = ap.parse_args()
    if not os.path.exists(EVERYTHING):
        print("bench_mcp: tests/mcp/node_modules is missing (bash scripts/deps.sh --tests)", file=sys.stderr)
        return 1
    reps = []
    for k in range(a.reps):
        r = one_rep(a.calls)
        print("rep %d: %s" % (k + 1, json.dumps(r)), file=sys.stderr)
        reps.append(r)

    def med(key):
        return statistics.median(r[key] for r in reps)

    for name, value, base, extra in (
            ("mcp_echo_call_ms", med("echo"), med("ok"), {"baseline_is": "python server's ok tool"}),
            ("mcp_first_run_ms", med("first"), med("second"), {"baseline_is": "the session's second run"}),
            ("hook_start_ms", med("hook"), None, {})):
        line = {"bench": name, "value": round(value, 2), "unit": "ms", "reps": a.reps}
        if base:
            line.update({"baseline": round(base, 2), "ratio": round(value / base, 2)})
        line.update(extra)
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
