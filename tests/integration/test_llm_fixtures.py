"""The llm actor end to end, on every fixture: a client on the bus ->
broker -> llm actor -> libcurl -> tests/llm_server.py -> back.

For each fixture in $SB_FIXTURES and each way of delivering it (as written,
CRLF, CR, one byte per write, CRLF in one-byte writes, cut before the
terminal event, cut with an abrupt close) it asserts the exact normalized
chunk sequence that reaches the requester, with contiguous seq from 1 and
the "open" chunk first, and the final reply. The chunks must be the same
in every variant; a cut stream ends in incomplete_stream, retryable.

This file also holds the helpers the other test_llm_* files import
(LlmServer, serve_llm, stream, ...), so they live next to the tests that
use them most."""

import json
import os
import socket
import stat
import sys
import time
import urllib.request

sys.dont_write_bytecode = True   # the other test_llm_* files import this one
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import (ROOT, Client, Proc, Server, TestFailure, check, read_jsonl, run_tests,  # noqa: E402
                    tmpdir, wait_for)

FIXTURES = os.environ.get("SB_FIXTURES") or os.path.join(ROOT, "tests", "fixtures", "llm")
LLM_SERVER = os.path.join(ROOT, "tests", "llm_server.py")
PY = "/usr/bin/python3"

# Keys the actor might pick up from the caller's environment would make
# the header checks depend on who runs the tests.
for _var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "SWITCHBOARD_LLM_KEY",
             "SWITCHBOARD_LLM_KEY_FILE", "SWITCHBOARD_LLM_IDLE_TIMEOUT_S",
             "SWITCHBOARD_LLM_MAX_ATTEMPTS", "SWITCHBOARD_LLM_BACKOFF_MS",
             "SWITCHBOARD_CODEX_TOKEN_FILE", "SWITCHBOARD_CODEX_TOKEN_URL"):
    os.environ.pop(_var, None)


# ---------------------------------------------------------------------------
# helpers shared by the test_llm_* files

class LlmServer:
    """tests/llm_server.py on an ephemeral loopback port, with its request
    log (one JSON object per request) and its own stderr log."""

    def __init__(self, fixtures=FIXTURES, verbose=False):
        self.dir = tmpdir()
        self.portfile = os.path.join(self.dir, "port")
        self.log_path = os.path.join(self.dir, "requests.jsonl")
        argv = [PY, LLM_SERVER, "--port", "0", "--fixtures", fixtures,
                "--portfile", self.portfile, "--log", self.log_path]
        if verbose:
            argv.append("--verbose")
        self.proc = Proc(argv, os.path.join(self.dir, "stderr.log"))

        def up():
            if not self.proc.alive():
                raise TestFailure("llm_server.py exited: %s" % self.proc.log())
            return os.path.exists(self.portfile)
        wait_for(up, 10, "llm_server.py to listen")
        with open(self.portfile) as f:
            self.port = int(f.read().strip())

    def base(self, *segments, **params):
        """A base URL whose path carries the scenario: base(fixture="x",
        variant="crlf", tag="t1") -> http://127.0.0.1:P/fixture=x/variant=crlf/tag=t1/v1"""
        parts = list(segments) + ["%s=%s" % (k, v) for k, v in params.items()]
        return "http://127.0.0.1:%d/%s/v1" % (self.port, "/".join(parts))

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def requests(self, endpoint=None, tag=None):
        """The logged requests, optionally only those of one endpoint kind
        (responses, chat, anthropic, models, token) and one tag."""
        out = read_jsonl(self.log_path)
        if endpoint is not None:
            out = [r for r in out if r.get("endpoint") == endpoint]
        if tag is not None:
            out = [r for r in out if r.get("params", {}).get("tag") == tag]
        return out

    def log_text(self):
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def stderr(self):
        return self.proc.log()

    def connections(self):
        """Established or half-closed TCP connections held by the server
        process on its listening port (its side of each client socket)."""
        inodes = set()
        fd_dir = "/proc/%d/fd" % self.proc.pid
        for fd in os.listdir(fd_dir):
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
        n = 0
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                with open(table) as f:
                    lines = f.read().splitlines()[1:]
            except OSError:
                continue
            for line in lines:
                cols = line.split()
                local_port = int(cols[1].split(":")[1], 16)
                state = cols[3]
                if local_port == self.port and state != "0A" and cols[9] in inodes:
                    n += 1
        return n

    def control(self, op, **kw):
        body = json.dumps(dict(kw, op=op)).encode()
        req = urllib.request.Request(self.url("/_control"), data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read())

    def stop(self):
        self.proc.stop()


def write_providers(providers, default=None, mode=0o600):
    """Writes a --providers file; returns its path."""
    path = os.path.join(tmpdir(), "providers.json")
    doc = {"providers": providers}
    if default:
        doc["default"] = default
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    os.chmod(path, mode)
    return path


def provider(name, kind, base_url, model="m-test", **kw):
    p = {"name": name, "kind": kind, "base_url": base_url, "model": model}
    p.update(kw)
    return p


def serve_llm(providers, env=None, default=None, extra=()):
    """`switchboard serve --actors broker,llm --providers FILE`, started and
    answering; returns the sbtest.Server."""
    path = write_providers(providers, default)
    srv = Server(args=["--actors", "broker,llm", "--providers", path] + list(extra), env=env)
    return srv.start()


def user(text):
    return {"role": "user", "content": text}


def stream_body(provider=None, messages=None, **kw):
    body = {"messages": messages or [user("hello")]}
    if provider:
        body["provider"] = provider
    body.update(kw)
    return body


def check_chunks(rid, final):
    """Checks the framing of a streamed reply: the chunks' seq run 1..n
    without a gap, the first is {kind: open, stream_id: rid}, every chunk
    comes from one instance. Returns the normalized chunks after "open"."""
    chunks = final.chunks
    check(chunks, "no chunk before the final %s %r", final.type, final.body)
    seqs = [c.header.get("seq") for c in chunks]
    check(seqs == list(range(1, len(chunks) + 1)), "chunk seqs %r", seqs)
    check(chunks[0].body == {"kind": "open", "stream_id": rid},
          "first chunk %r (want open with stream_id %s)", chunks[0].body, rid)
    senders = {c.header.get("from") for c in chunks} | {final.header.get("from")}
    check(len(senders) == 1, "chunks from several senders: %r", senders)
    check(all(c.type == "llm.stream.chunk" for c in chunks), "chunk types %r",
          [c.type for c in chunks])
    return [normalize(c.body) for c in chunks[1:]]


def normalize(chunk):
    """A chunk body with its reasoning_state data parsed, so that JSON key
    order and spacing don't matter."""
    c = dict(chunk)
    if c.get("kind") == "reasoning_state":
        c["data"] = json.loads(c["data"])
    return c


def stream(client, body, timeout=10.0, **hdr):
    """Sends llm.stream and waits for the final answer; returns
    (final Msg, normalized chunks after "open")."""
    rid = client.send("llm.stream", body, **hdr)
    final = client.wait_reply(rid, timeout)
    return final, check_chunks(rid, final)


def texts(chunks):
    return "".join(c["text"] for c in chunks if c["kind"] == "text")


# ---------------------------------------------------------------------------
# the fixtures: what each must give, whatever the delivery

def usage(i, o, cached=0, reasoning=0):
    return {"kind": "usage", "input_tokens": i, "output_tokens": o,
            "cached_tokens": cached, "reasoning_tokens": reasoning}


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
        usage(21, 19),
    ], ("ok", "end")),
    "anthropic-thinking-tool.sse": ("anthropic", [
        {"kind": "thinking", "text": "The user wants the tests run."},
        {"kind": "reasoning_state", "data": {
            "type": "thinking", "thinking": "The user wants the tests run.",
            "signature": "EqQBCgIYAhIM-opaque"}},
        {"kind": "text", "text": "Running the tests now."},
        {"kind": "tool_call", "call_id": "toolu_01Ab", "name": "shell",
         "arguments": '{"command": "make test"}'},
        usage(465, 88),
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
