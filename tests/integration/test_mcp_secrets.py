#!/usr/bin/python3
"""An MCP server's secret is redacted in every encoding (docs/mcp.md), with
the reference @modelcontextprotocol/server-everything (tests/mcp) and a
secret in its env that holds `"` and `\\`:

  - get-env prints the server's environment as JSON, so the secret comes
    back JSON-escaped; neither the plain value, its JSON-escaped form
    (once or twice), nor its percent-encoded forms reach the tape, the
    tap, serve's log or the provider's requests, and the result still
    names the variable with *** in place of the value;
  - echo given the percent-encoded secret answers it redacted too.
"""
import json
import os
import re
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import check, run_tests, tmpdir  # noqa: E402
from sbagent import (LLM, TapCli, config, everything, need_everything, new_session, prompt, results,  # noqa: E402
                     serve_mcp, tape, wait_run)

SECRET = 'sk-mcp"quo\\te-7f3a9c21'


def forms(secret):
    j = json.dumps(secret)[1:-1]
    return {
        "plain": secret,
        "json": j,
        "json twice": json.dumps(j)[1:-1],
        "url": urllib.parse.quote(secret, safe=""),
        "url lower": re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), urllib.parse.quote(secret, safe="")),
    }


def test_json_escaped_and_url_encoded_secrets_are_redacted():
    need_everything()
    f = forms(SECRET)
    check(f["json"] != SECRET and f["url"] != SECRET, "the secret has nothing to escape")
    llm = LLM()
    llm.script("enc", [{"tool_calls": [
        {"name": "mcp__every__get-env", "arguments": {}, "call_id": "c_env"},
        {"name": "mcp__every__echo", "arguments": {"message": "u=" + f["url"]}, "call_id": "c_url"}]},
        {"text": "done"}])
    server = serve_mcp(llm, "enc", config({"every": everything(env={"SECRET_TOKEN": SECRET})}))
    tap = TapCli(server)
    try:
        tap.mark()
        sid = new_session(server, tmpdir(), approval_policy="yolo")
        run = wait_run(server, prompt(server, sid, "use the tools"), timeout=40)
        tap.mark()
        check(run["status"] == "completed", "run %r", run)
        entries = tape(server, sid)
        res = results(entries)
        env_out = res["c_env"]["output"]
        check("SECRET_TOKEN" in env_out and "***" in env_out, "get-env did not show the variable: %r",
              env_out[:400])
        check(res["c_url"]["output"].startswith("Echo: u=***"), "echo: %r", res["c_url"]["output"])
        reqs = llm.requests("enc")
        check(len(reqs) == 2, "%d model requests", len(reqs))
        where = {
            "the tape": json.dumps(entries),
            "the tool results": "\n".join(r["output"] for r in res.values()),
            "the tap": tap.text(),
            "serve's log": server.log(),
            "the provider's requests": "\n".join(r.get("body") or "" for r in reqs),
        }
        for wname, text in where.items():
            for fname, form in f.items():
                if wname == "the provider's requests" and fname.startswith("url"):
                    continue        # the model's own tool call carries it (u=...): not the server's output
                if wname in ("the tape", "the tap") and fname.startswith("url"):
                    continue        # the same call, on the tape and the tap
                i = text.find(form)
                check(i < 0, "%s holds the secret (%s): ...%s...", wname, fname, text[max(0, i - 120):i + 60])
        out = "\n".join(r["output"] for r in res.values())
        check(f["url"] not in out and f["url lower"] not in out, "a tool result holds the url-encoded secret")
    finally:
        tap.close()
        server.stop()
        llm.stop()


if __name__ == "__main__":
    run_tests(globals())
