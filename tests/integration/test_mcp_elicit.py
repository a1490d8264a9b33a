#!/usr/bin/python3
"""MCP elicitation and progress notifications (docs/mcp.md), against
tests/mcp/http_server.py through `switchboard mcp probe`, and progress in
a served run:

  - with --elicit-accept-defaults the client declares elicitation and
    answers an elicitation/create, on the call's stream or on the
    standalone GET stream it opens after initialize, with the schema's
    defaults; an answer to a call that comes on that stream ends the call;
    without it, it declares nothing, opens no GET and refuses;
  - a requested schema outside the specification's restriction (a nested
    object) is refused with the reason, never answered;
  - a call's progress notifications become its live output: probe prints
    them, a run writes them as tool.output; a flood is bounded in rate and
    one that goes back is not shown.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import SB_BIN, check, run, run_tests  # noqa: E402
from sbagent import calls, results  # noqa: E402
from sbmcp import HttpMcp, http_run  # noqa: E402

DEFAULTS = {"name": "Ada", "age": 36, "score": 9.5, "ok": True, "color": "green"}


def probe(mcp, tool, args=None, elicit=True):
    """mcp probe against `mcp`, calling `tool`: (exit status, stdout)."""
    argv = [SB_BIN, "mcp", "probe", mcp.url, "--call", tool, "--args", json.dumps(args or {}), "--timeout", "10"]
    rc, out, err = run(argv + (["--elicit-accept-defaults"] if elicit else []), timeout=30)
    return rc, out + err


def answer_of(out):
    """The elicitation answer the server echoed in its result line."""
    line = [x for x in out.splitlines() if x.startswith("result ")]
    check(line, "no result line in:\n%s", out)
    return json.loads(line[0][len("result "):])


def initialize_capabilities(mcp):
    return [r["msg"]["params"]["capabilities"] for r in mcp.log()
            if r.get("msg", {}).get("method") == "initialize"][0]


def test_elicitation_on_the_call_stream_is_accepted_with_the_defaults():
    mcp = HttpMcp()
    try:
        rc, out = probe(mcp, "elicit")
        check(rc == 0, "probe failed (%d):\n%s", rc, out)
        ans = answer_of(out)
        check(ans.get("result") == {"action": "accept", "content": DEFAULTS}, "the answer: %r", ans)
        check("elicitation" in initialize_capabilities(mcp), "elicitation not declared: %r",
              initialize_capabilities(mcp))
    finally:
        mcp.stop()


def test_elicitation_on_the_standalone_stream_is_answered():
    mcp = HttpMcp(standalone=True)
    try:
        rc, out = probe(mcp, "elicit_get")
        check(rc == 0, "probe failed (%d):\n%s", rc, out)
        ans = answer_of(out)
        check(ans.get("result") == {"action": "accept", "content": DEFAULTS}, "the answer: %r", ans)
        gets = [r for r in mcp.log() if "get" in r]
        check(gets and gets[0]["get"] is None, "no standalone GET was opened: %r", gets)
    finally:
        mcp.stop()


def test_an_answer_on_the_standalone_stream_ends_the_call():
    mcp = HttpMcp(standalone=True)
    try:
        t0 = time.monotonic()
        rc, out = probe(mcp, "via_standalone")
        took = time.monotonic() - t0
        check(rc == 0 and "result answered on the standalone stream" in out, "probe (%d):\n%s", rc, out)
        check(took < 5, "the call waited for its own stream: %.1f s", took)
    finally:
        mcp.stop()


def test_without_an_elicitor_nothing_is_declared_and_it_is_refused():
    mcp = HttpMcp(standalone=True)
    try:
        rc, out = probe(mcp, "elicit", elicit=False)
        ans = answer_of(out)
        check(ans.get("error", {}).get("code") == -32601, "not refused: %r", ans)
        check("elicitation" not in initialize_capabilities(mcp), "declared: %r", initialize_capabilities(mcp))
        rc, out = probe(mcp, "elicit_get", elicit=False)
        check("no standalone stream" in out, "a standalone stream was opened without elicitation:\n%s", out)
    finally:
        mcp.stop()


def test_a_schema_outside_the_restriction_is_refused_with_the_reason():
    mcp = HttpMcp()
    try:
        nested = {"type": "object", "properties": {"who": {"type": "object", "properties": {}}}}
        for schema, why in ((nested, "property 'who': not a string, number, integer or boolean"),
                            ({"type": "object", "properties": {"n": {"type": "integer", "default": "x"}}},
                             "its default is not an integer"),
                            ({"type": "array"}, "not an object with properties")):
            rc, out = probe(mcp, "elicit", {"requestedSchema": schema})
            ans = answer_of(out)
            err = ans.get("error", {})
            check(err.get("code") == -32602 and why in err.get("message", ""), "schema %r: %r", schema, ans)
    finally:
        mcp.stop()


def test_progress_notifications_are_the_calls_live_output():
    mcp = HttpMcp()
    try:
        rc, out = probe(mcp, "progress", {"n": 4, "gap_ms": 300}, elicit=False)
        lines = [x for x in out.splitlines() if x.startswith("progress: ")]
        check(lines == ["progress: %d/4 step %d" % (k, k) for k in range(1, 5)], "progress lines:\n%s", out)
        check("result done" in out, "no result:\n%s", out)
        # a flood: 60 in about 0.6 s, at most one each 250 ms shown
        rc, out = probe(mcp, "progress", {"n": 60, "gap_ms": 10}, elicit=False)
        lines = [x for x in out.splitlines() if x.startswith("progress: ")]
        check(1 <= len(lines) <= 10 and lines[0] == "progress: 1/60 step 1", "flood lines:\n%s", out)
        check("back" not in out, "a progress that went back was shown:\n%s", out)
        print("  figure: 60 progress notifications in ~0.6 s shown as %d lines" % len(lines))
    finally:
        mcp.stop()


def test_progress_in_a_run_is_written_as_tool_output():
    steps = [calls(("c_p", "mcp__h__progress", {"n": 3, "gap_ms": 300})), {"text": "done"}]
    with http_run(HttpMcp(), "progress", steps) as (srv, sid, entries):
        check(results(entries)["c_p"]["output"] == "done", "the call: %r", results(entries)["c_p"])
        live = "".join(e["body"].get("text", "") for e in entries
                       if e["kind"] == "tool.output" and e["body"].get("call_id") == "c_p")
        check("progress: 1/3 step 1\n" in live and "progress: 3/3 step 3\n" in live,
              "the tool.output of the call: %r", live)


if __name__ == "__main__":
    run_tests(globals())
