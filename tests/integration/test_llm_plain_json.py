#!/usr/bin/python3
"""A provider that answers plain JSON to a stream request (each of
anthropic, chat, responses) fails the call once, with one clear line,
without retries.

(Found by trying switchboard: each test fails on the code before its fix.)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Server, check, run_tests, tmpdir  # noqa: E402
from sbagent import LLM, new_session, prompt, wait_run  # noqa: E402


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


if __name__ == "__main__":
    run_tests(globals())
