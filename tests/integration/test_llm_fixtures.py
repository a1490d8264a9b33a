"""The llm actor end to end, on every fixture: a client on the bus ->
broker -> llm actor -> libcurl -> tests/llm_server.py -> back.

For each fixture in $SB_FIXTURES and each way of delivering it (as written,
CRLF, CR, one byte per write, CRLF in one-byte writes, cut before the
terminal event, cut with an abrupt close) it asserts the exact normalized
chunk sequence that reaches the requester, with contiguous seq from 1 and
the "open" chunk first, and the final reply. The chunks must be the same
in every variant; a cut stream ends in incomplete_stream, retryable.

The helpers (LlmServer, serve_llm, stream, ...) are sbllm's."""

import os
import sys
import time

sys.dont_write_bytecode = True   # importing sbllm leaves no __pycache__ in the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Client, check, run_tests  # noqa: E402
from sbllm import FIXTURES, LlmServer, check_chunks, provider, serve_llm, stream, stream_body  # noqa: E402


# ---------------------------------------------------------------------------
# the fixtures: what each must give, whatever the delivery

def usage(i, o, cached=0, reasoning=0):
    """None: the provider did not say (unknown), so the chunk leaves it out."""
    u = {"kind": "usage", "input_tokens": i, "output_tokens": o,
         "cached_tokens": cached, "reasoning_tokens": reasoning}
    return {k: v for k, v in u.items() if v is not None}


# file -> (provider kind, chunks, final). final is ("ok", stop_reason) or
# ("error", code, provider_code, retryable). "cut" keeps the chunks that
# come before the terminal event, which here is every chunk but usage.
EXPECT = {
    "responses-text.sse": ("responses", [
        {"kind": "text", "text": "The repository"},
        {"kind": "text", "text": " has 3 files: ünïcödé ✓"},
        usage(41, 12),
    ], ("ok", "end")),
    "responses-reasoning-tool.sse": ("responses", [
        {"kind": "thinking", "text": "**Looking around**\n\nI should list"},
        {"kind": "thinking", "text": " the workspace first."},
        {"kind": "reasoning_state", "data": {
            "id": "rs_b2", "type": "reasoning", "encrypted_content": "gAAAAB-opaque2",
            "summary": [{"type": "summary_text",
                         "text": "**Looking around**\n\nI should list the workspace first."}]}},
        {"kind": "tool_call", "call_id": "call_7Qx", "name": "shell",
         "arguments": '{"command":"ls -la","timeout_s":30}'},
        {"kind": "tool_call", "call_id": "call_8Ry", "name": "read_file",
         "arguments": '{"path":"README.md"}'},
        usage(78, 219, 0, 150),
    ], ("ok", "tool_calls")),
    "responses-error.sse": ("responses", [], ("error", "provider", "insufficient_quota", False)),
    "responses-rate-limited.sse": ("responses", [],
                                   ("error", "provider", "rate_limit_exceeded", True)),
    "chat-tools.sse": ("chat", [
        {"kind": "text", "text": "Let me look."},
        {"kind": "tool_call", "call_id": "call_w1", "name": "list_dir",
         "arguments": '{"path": "."}'},
        {"kind": "tool_call", "call_id": "call_w2", "name": "grep",
         "arguments": '{"pattern": "TODO"}'},
        usage(120, 31),
    ], ("ok", "tool_calls")),
    # Mistral streams its reasoning models with delta.content as a list of
    # parts: thinking (its own list of text parts) and text
    "chat-content-parts.sse": ("chat", [
        {"kind": "thinking", "text": "The person wants "},
        {"kind": "thinking", "text": "a greeting."},
        {"kind": "text", "text": "Hello"},
        {"kind": "text", "text": ", world."},
        {"kind": "text", "text": " Plain too."},
        usage(21, 19, None, None),
    ], ("ok", "end")),
    "anthropic-thinking-tool.sse": ("anthropic", [
        {"kind": "thinking", "text": "The user wants the tests run."},
        {"kind": "reasoning_state", "data": {
            "type": "thinking", "thinking": "The user wants the tests run.",
            "signature": "EqQBCgIYAhIM-opaque"}},
        {"kind": "text", "text": "Running the tests now."},
        {"kind": "tool_call", "call_id": "toolu_01Ab", "name": "shell",
         "arguments": '{"command": "make test"}'},
        usage(465, 88, 0, None),
    ], ("ok", "tool_calls")),
}

# Variants of a whole reply, and whether the stream is cut short.
VARIANTS = [("plain", False), ("crlf", False), ("cr", False), ("bytes", False),
            ("crlf+bytes", False), ("cut", True), ("cutclose", True)]

MAX_ATTEMPTS = 2


def fixture_files():
    names = sorted(n for n in os.listdir(FIXTURES) if n.endswith(".sse"))
    check(names, "no .sse fixture in %s", FIXTURES)
    return names


def test_every_fixture_has_an_expectation():
    """A new fixture must get its expected chunks here, or this fails."""
    missing = [n for n in fixture_files() if n not in EXPECT]
    check(not missing, "fixtures without expected chunks in this test: %s", missing)


def run_fixture(name):
    kind, want, final_want = EXPECT[name]
    fixture = name[:-len(".sse")]
    llm = LlmServer()
    provs = []
    for variant, _ in VARIANTS:
        tag = "%s-%s" % (fixture, variant.replace("+", "-"))
        provs.append(provider(tag, kind, llm.base(fixture=fixture, variant=variant, tag=tag),
                              max_attempts=MAX_ATTEMPTS, backoff_base_ms=20))
    srv = serve_llm(provs, env={"OPENAI_API_KEY": "sk-fixture", "ANTHROPIC_API_KEY": "sk-ant-fixture"})
    client = Client(srv.endpoint())
    try:
        # every variant at once: they share one actor, and the rate-limit
        # fixture's retry delays overlap instead of adding up
        ids = {}
        for p in provs:
            ids[p["name"]] = client.send("llm.stream", stream_body(p["name"], model="fx-model"))
        for (variant, cut), p in zip(VARIANTS, provs):
            tag = p["name"]
            rid = ids[tag]
            final = client.wait_reply(rid, 15)
            got = check_chunks(rid, final)
            what = "%s / %s" % (name, variant)
            # a usage chunk names who answered (docs/usage.md); no price here
            for c in got:
                if c["kind"] == "usage":
                    check(c.pop("provider", None) == tag and c.pop("model", None) == "fx-model"
                          and "cost_microusd" not in c, "%s: usage chunk %r", what, c)
            sent = llm.requests(kind, tag)
            if cut:
                # the chunks before the terminal event, then a retryable
                # incomplete_stream; retried only when nothing was sent yet
                partial = [c for c in want if c["kind"] != "usage"]
                check(got == partial, "%s: chunks\n got  %r\n want %r", what, got, partial)
                check(final.type == "error", "%s: final %s %r", what, final.type, final.body)
                check(final.body.get("code") == "incomplete_stream" and final.body.get("retryable") is True,
                      "%s: want incomplete_stream retryable, got %r", what, final.body)
                want_requests = 1 if partial else MAX_ATTEMPTS
                check(len(sent) == want_requests, "%s: %d requests, want %d (retried only "
                      "when no chunk was sent)", what, len(sent), want_requests)
                continue
            check(got == want, "%s: chunks\n got  %r\n want %r", what, got, want)
            if final_want[0] == "ok":
                check(final.type == "llm.stream.ok", "%s: final %s %r", what, final.type, final.body)
                b = final.body
                check(b.get("stop_reason") == final_want[1], "%s: stop_reason %r", what, b)
                u = dict(want[-1])
                del u["kind"]
                check(b.get("usage") == u, "%s: usage %r want %r", what, b.get("usage"), u)
                check(b.get("provider") == tag and b.get("model") == "fx-model" and b.get("attempts") == 1,
                      "%s: provider/model/attempts %r", what, b)
                check(len(sent) == 1, "%s: %d requests", what, len(sent))
            else:
                _, code, pcode, retryable = final_want
                b = final.body
                check(final.type == "error", "%s: final %s %r", what, final.type, b)
                check(b.get("code") == code and b.get("retryable") is retryable,
                      "%s: error %r, want code %s retryable %s", what, b, code, retryable)
                detail = b.get("detail") or {}
                check(detail.get("provider_code") == pcode and detail.get("provider") == tag,
                      "%s: detail %r", what, detail)
                check(isinstance(b.get("message"), str) and b["message"], "%s: no message", what)
                want_requests = MAX_ATTEMPTS if retryable else 1
                check(len(sent) == want_requests, "%s: %d requests, want %d", what, len(sent),
                      want_requests)
            # the request was a real one of this provider's format
            body = sent[0]["json"]
            check(body and body.get("model") == "fx-model" and body.get("stream") is True,
                  "%s: request body %r", what, sent[0]["body"][:300])
    finally:
        client.close()
        srv.stop()
        llm.stop()


def test_responses_text():
    run_fixture("responses-text.sse")


def test_responses_reasoning_tool():
    run_fixture("responses-reasoning-tool.sse")


def test_responses_error():
    run_fixture("responses-error.sse")


def test_responses_rate_limited():
    run_fixture("responses-rate-limited.sse")


def test_chat_tools():
    run_fixture("chat-tools.sse")


def test_chat_content_parts():
    run_fixture("chat-content-parts.sse")


def test_anthropic_thinking_tool():
    run_fixture("anthropic-thinking-tool.sse")


def test_rate_limited_waits_as_told():
    """responses-rate-limited.sse says "try again in 1.054s" inside a 200
    stream, before any chunk: the actor retries, after >= 1.054 s, and
    gives up retryable once its attempts are spent."""
    llm = LlmServer()
    p = provider("rl", "responses", llm.base(fixture="responses-rate-limited", tag="rl"),
                 max_attempts=3, backoff_base_ms=10)
    srv = serve_llm([p], env={"OPENAI_API_KEY": "k"})
    client = Client(srv.endpoint())
    try:
        t0 = time.monotonic()
        final, got = stream(client, stream_body(), timeout=15)
        elapsed = time.monotonic() - t0
        check(final.type == "error" and final.body.get("code") == "provider"
              and final.body.get("retryable") is True
              and final.body.get("detail", {}).get("provider_code") == "rate_limit_exceeded",
              "final %r", final.body)
        check(got == [], "chunks %r", got)
        sent = llm.requests("responses", "rl")
        check(len(sent) == 3, "%d requests, want 3", len(sent))
        gaps = [b["ts"] - a["ts"] for a, b in zip(sent, sent[1:])]
        check(all(g >= 1.04 for g in gaps), "retry gaps %r, want >= 1.054 s each", gaps)
        check(all(g < 3.0 for g in gaps), "retry gaps %r: the hint was 1.054 s", gaps)
        check(elapsed >= 2.1, "the whole stream took %.2f s", elapsed)
    finally:
        client.close()
        srv.stop()
        llm.stop()


if __name__ == "__main__":
    run_tests(globals())
