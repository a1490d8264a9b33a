#!/usr/bin/python3
"""llm_server.py — a loopback LLM provider for tests and benchmarks (stdlib only).

It speaks the three wire formats of the llm actor over plain HTTP/1.1 with
chunked transfer encoding, the way real providers stream, so that tests run
the real libcurl code path. Run it with Debian's interpreter:

    /usr/bin/python3 tests/llm_server.py --port 0 --fixtures tests/fixtures/llm \\
        --portfile /tmp/llm.port --log /tmp/llm.log [--host 127.0.0.1] [--verbose] \\
        [--processes N]

--processes N serves from N forked processes that share the listening socket,
for benchmarks: one Python process writes about 200k small events a second.
Each process keeps its own state, so use it only with gen=/fixture= plain
replays, not with 429, 500x2, 401 or scripts.

It writes its bound port to --portfile (atomically, once it listens) and
appends every request it receives to --log as one JSON line:

    {"seq": 1, "ts": 1764400000.1, "pid": 4242, "method": "POST", "path": "/fixture=x/v1/responses",
     "endpoint": "responses", "params": {"fixture": "x"}, "scenario": "/fixture=x/v1",
     "headers": {"authorization": "Bearer k", ...}, "body": "<raw text>",
     "json": {...parsed body or null...}, "status": 200}

Choosing what it replies: the URL path
---------------------------------------
The product is the client, so nothing can be asked of it beyond a base URL.
The scenario therefore rides in the base URL, as key=value path segments
before the API path the provider appends:

    base URL  http://127.0.0.1:PORT/fixture=chat-tools/variant=crlf/tag=t7/v1
    request   POST http://127.0.0.1:PORT/fixture=chat-tools/variant=crlf/tag=t7/v1/chat/completions

Endpoints (matched at the end of the path, whatever comes before):
    POST .../responses  .../chat/completions  .../messages   a streamed reply
    GET  .../models                                          a model list
    POST .../oauth/token                                     a token refresh
    POST /_control, GET /_control                            see "Control" below

Parameters (path segments; "+" joins several values):
    fixture=NAME     replay the SSE file NAME (or NAME.sse) from --fixtures as written
    script=NAME      reply with the next turn of a script (see "Scripts")
    gen=N            generate N text deltas, in the format of the endpoint that was hit
    delta=TEXT       text of each generated delta (default "tok "; URL-decoded)
    stamp=1          gen: each delta's text is "T<CLOCK_MONOTONIC in µs>;" taken right
                     before its write, so a client can measure write-to-receipt latency
    batch=K          gen: K delta events per write (default 1). Without stamp, delay_ms
                     and variants, a generated stream is built once and cached, which
                     is the fastest way to feed a throughput benchmark
    delay_ms=D       sleep D ms between events
    variant=V[+V]    how to deliver; see below (default plain)
    key=K            require "Authorization: Bearer K" or "x-api-key: K", else 401
    status=NNN       answer every request with HTTP NNN and an error body of the format
    retry_after_ms=N with variant 429: also send retry-after-ms: N
    models=a+b       ids for GET .../models (default test-model-1+test-model-2)
    ratelimit=K      streamed replies carry rate-limit headers: x-ratelimit-* (anthropic-
                     ratelimit-* on .../messages) with limits 1000 requests and 200000 tokens,
                     K requests and K*100 tokens remaining, and retry-after: 7
    tag=X            anything; makes the scenario distinct (see "State")
    refresh=fail     on .../oauth/token: refuse the refresh with 400 invalid_grant
    window=BYTES     a context window: a streamed request whose body is longer gets the
                     provider's real overflow error (400; OpenAI context_length_exceeded on
                     responses, Anthropic "prompt is too long" on messages, llama.cpp's
                     exceed_context_size_error on chat/completions), counting a token per
                     4 bytes; and a scripted turn without "usage" reports input_tokens =
                     body bytes / 4, as a provider would

Variants (delivery of a successful reply, and failures before it):
    plain       as written, one write per event
    crlf, cr    line endings turned into CRLF or CR
    bytes       one byte per write (TCP_NODELAY is on)
    cut         stop before the terminal event (response.completed/failed/incomplete,
                error, message_stop, data: [DONE]) and end the HTTP body cleanly
    cutclose    stop there and close the connection without ending the chunked body
    silent      send the headers and the first event, then hang until the client goes
    429         the first request of the scenario gets 429 with retry-after: 1
                (rate_limit_exceeded / rate_limit_error body); later ones succeed
    500x2       the first two requests get 500; later ones succeed
    401         401 unless the bearer token was issued by .../oauth/token; so the
                first request fails and the one after a refresh succeeds
    401always   401 whatever the token
    json        200 with Content-Type application/json and one whole, non-streamed
                answer of the format (a server that ignores "stream": true)
Failure variants combine with delivery ones: variant=429+crlf+bytes.

State: counters for 429/500x2 are kept per scenario, the path before the
endpoint. Give each test its own tag=..., or POST /_control {"op":"reset"}.

Scripts: the scripted model turns of an end-to-end agent test
-------------------------------------------------------------
Register with POST /_control {"op": "script", "name": "e2e", "turns": [...]},
or put {"turns": [...]} in <fixtures>/<name>.json. Each request to
.../script=e2e/v1/responses (or /chat/completions, /messages) takes the next
turn and streams it in the format of that endpoint:

    {"text": "done",                       # streamed in pieces of "piece" chars (default 4)
     "reasoning": "Let me think",          # summary / thinking; reasoning state with
                                           # encrypted_content "enc-<n>" / signature "sig-<n>"
     "tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt"},  # object or string
                     "call_id": "call_1"}],                                 # optional
     "usage": {"input_tokens": 10, "output_tokens": 5},   # false: chat streams send none;
                                           # responses also takes cached_tokens, reasoning_tokens
     "variant": "cut",                     # optional, as above, for this turn only
     "status": 500, "retry_after": 1,      # optional: fail this turn with HTTP status instead
     "overflow": true}                     # optional: fail it with the context overflow error
                                           # of the format (see window= above)

A request after the last turn gets 400 script_exhausted (so a test cannot
pass by looping). {"repeat_last": true} beside "turns" repeats the last turn.
{"no_tools": {turn}} beside "turns" answers every request that offers no
tools (a compaction's summary request, say) with that turn, without taking
one of "turns".

Control
-------
POST /_control with a JSON object:
    {"op": "script", "name": N, "turns": [...], "repeat_last": false, "no_tools": {turn}}
    {"op": "reset"}      forget counters, issued tokens and script positions
    {"op": "stats"}      (also GET /_control) {"requests": n, "scenarios": {key: n}, ...}
"""

import argparse
import base64
import json
import os
import select
import signal
import socket
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ENDPOINTS = (
    ("/chat/completions", "chat"),
    ("/responses", "responses"),
    ("/messages", "anthropic"),
    ("/models", "models"),
    ("/oauth/token", "token"),
)

TERMINAL_EVENTS = {"response.completed", "response.failed", "response.incomplete",
                   "error", "message_stop"}


class State:
    """Everything shared between request threads, under one lock."""

    def __init__(self, fixtures, log_path, verbose):
        self.fixtures = fixtures
        self.log_path = log_path
        self.verbose = verbose
        self.lock = threading.Lock()
        self.seq = 0
        self.counts = {}          # scenario -> requests seen
        self.tokens = set()       # access tokens issued by /oauth/token
        self.token_seq = 0
        self.scripts = {}         # name -> {"turns": [...], "repeat_last": bool, "pos": int}
        self.log_file = open(log_path, "a", buffering=1) if log_path else None

    def log(self, record):
        with self.lock:
            self.seq += 1
            record["seq"] = self.seq
            if self.log_file:
                self.log_file.write(json.dumps(record, ensure_ascii=False) + "\n")
                self.log_file.flush()

    def count(self, scenario):
        """Returns how many requests this scenario had before this one."""
        with self.lock:
            n = self.counts.get(scenario, 0)
            self.counts[scenario] = n + 1
            return n

    def issue_token(self):
        with self.lock:
            self.token_seq += 1
            token = "at-%d-%s" % (self.token_seq, base64.b32encode(os.urandom(5)).decode().lower())
            self.tokens.add(token)
            return token, "rt-%d" % self.token_seq

    def token_ok(self, token):
        with self.lock:
            return token in self.tokens

    def set_script(self, name, turns, repeat_last, no_tools=None):
        with self.lock:
            self.scripts[name] = {"turns": turns, "repeat_last": bool(repeat_last), "pos": 0,
                                  "no_tools": no_tools}

    def next_turn(self, name, tools=True):
        """Returns (turn, index) or (None, n) when exhausted or unknown."""
        with self.lock:
            script = self.scripts.get(name)
            if script is not None and not tools and script.get("no_tools"):
                return script["no_tools"], script["pos"]
            if script is None:
                path = os.path.join(self.fixtures, name + ".json")
                if not os.path.isfile(path):
                    return None, -1
                with open(path) as f:
                    spec = json.load(f)
                script = {"turns": spec["turns"], "repeat_last": spec.get("repeat_last", False),
                          "pos": 0}
                self.scripts[name] = script
            pos = script["pos"]
            turns = script["turns"]
            if pos >= len(turns):
                if script["repeat_last"] and turns:
                    return turns[-1], len(turns) - 1
                return None, pos
            script["pos"] = pos + 1
            return turns[pos], pos

    def reset(self):
        with self.lock:
            self.counts.clear()
            self.tokens.clear()
            for script in self.scripts.values():
                script["pos"] = 0

    def stats(self):
        with self.lock:
            return {"requests": self.seq, "scenarios": dict(self.counts),
                    "tokens_issued": self.token_seq,
                    "scripts": {k: v["pos"] for k, v in self.scripts.items()}}


# ---------------------------------------------------------------------------
# SSE event builders. Each yields (terminal, bytes); bytes end in "\n\n".

def sse(event, data):
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    if event:
        return ("event: %s\ndata: %s\n\n" % (event, payload)).encode()
    return ("data: %s\n\n" % payload).encode()


def pieces(text, size):
    size = max(1, int(size))
    return [text[i:i + size] for i in range(0, len(text), size)] if text else []


def norm_args(arguments):
    if arguments is None:
        return "{}"
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


class Turn:
    """A model turn to stream: generated deltas or a scripted turn."""

    def __init__(self, text_pieces=(), reasoning="", tool_calls=(), usage=None, n=1, piece=4):
        self.text_pieces = text_pieces        # iterable of str (may be lazy)
        self.reasoning = reasoning
        self.tool_calls = list(tool_calls)
        self.no_usage = usage is False        # chat: no usage chunk, as many local servers
        self.usage = usage or {}
        self.n = n                            # turn number, for ids
        self.piece = piece

    @classmethod
    def from_script(cls, spec, n):
        piece = spec.get("piece", 4)
        calls = []
        for i, call in enumerate(spec.get("tool_calls", [])):
            calls.append({"name": call["name"], "arguments": norm_args(call.get("arguments")),
                          "call_id": call.get("call_id", "call_%d_%d" % (n, i))})
        return cls(pieces(spec.get("text", ""), piece), spec.get("reasoning", ""), calls,
                   spec.get("usage"), n, piece)

    def tokens(self):
        return (self.usage.get("input_tokens", 10), self.usage.get("output_tokens", 5))


def gen_responses(turn):
    rid = "resp_%d" % turn.n
    yield False, sse("response.created", {"type": "response.created", "response": {
        "id": rid, "object": "response", "status": "in_progress", "model": "llm-server"}})
    index = 0
    if turn.reasoning:
        item_id = "rs_%d" % turn.n
        yield False, sse("response.output_item.added", {
            "type": "response.output_item.added", "output_index": index,
            "item": {"id": item_id, "type": "reasoning", "summary": []}})
        yield False, sse("response.reasoning_summary_part.added", {
            "type": "response.reasoning_summary_part.added", "item_id": item_id,
            "output_index": index, "summary_index": 0, "part": {"type": "summary_text", "text": ""}})
        for p in pieces(turn.reasoning, turn.piece):
            yield False, sse("response.reasoning_summary_text.delta", {
                "type": "response.reasoning_summary_text.delta", "item_id": item_id,
                "output_index": index, "summary_index": 0, "delta": p})
        yield False, sse("response.output_item.done", {
            "type": "response.output_item.done", "output_index": index,
            "item": {"id": item_id, "type": "reasoning", "encrypted_content": "enc-%d" % turn.n,
                     "summary": [{"type": "summary_text", "text": turn.reasoning}]}})
        index += 1
    text = []
    started = False
    msg_id = "msg_%d" % turn.n
    # The benchmark's hot path: a template, not a dict per delta.
    pre = ('event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
           '"item_id":"%s","output_index":%d,"content_index":0,"delta":' % (msg_id, index)).encode()
    for p in turn.text_pieces:
        if not started:
            started = True
            yield False, sse("response.output_item.added", {
                "type": "response.output_item.added", "output_index": index,
                "item": {"id": msg_id, "type": "message", "status": "in_progress",
                         "role": "assistant", "content": []}})
        text.append(p)
        yield False, pre + json.dumps(p, ensure_ascii=False).encode() + b"}\n\n"
    if started:
        full = "".join(text)
        yield False, sse("response.output_text.done", {
            "type": "response.output_text.done", "item_id": msg_id, "output_index": index,
            "content_index": 0, "text": full})
        yield False, sse("response.output_item.done", {
            "type": "response.output_item.done", "output_index": index,
            "item": {"id": msg_id, "type": "message", "status": "completed", "role": "assistant",
                     "content": [{"type": "output_text", "text": full, "annotations": []}]}})
        index += 1
    for i, call in enumerate(turn.tool_calls):
        fc_id = "fc_%d_%d" % (turn.n, i)
        item = {"id": fc_id, "type": "function_call", "status": "in_progress",
                "call_id": call["call_id"], "name": call["name"], "arguments": ""}
        yield False, sse("response.output_item.added", {
            "type": "response.output_item.added", "output_index": index, "item": item})
        for p in pieces(call["arguments"], max(turn.piece, 8)):
            yield False, sse("response.function_call_arguments.delta", {
                "type": "response.function_call_arguments.delta", "item_id": fc_id,
                "output_index": index, "delta": p})
        yield False, sse("response.function_call_arguments.done", {
            "type": "response.function_call_arguments.done", "item_id": fc_id,
            "output_index": index, "arguments": call["arguments"]})
        done = dict(item, status="completed", arguments=call["arguments"])
        yield False, sse("response.output_item.done", {
            "type": "response.output_item.done", "output_index": index, "item": done})
        index += 1
    inp, out = turn.tokens()
    yield True, sse("response.completed", {"type": "response.completed", "response": {
        "id": rid, "object": "response", "status": "completed",
        "usage": {"input_tokens": inp, "input_tokens_details": {"cached_tokens": turn.usage.get("cached_tokens", 0)},
                  "output_tokens": out,
                  "output_tokens_details": {"reasoning_tokens": turn.usage.get("reasoning_tokens", 0)},
                  "total_tokens": inp + out}}})


def gen_chat(turn):
    base = {"id": "chatcmpl-%d" % turn.n, "object": "chat.completion.chunk",
            "created": int(time.time()), "model": "llm-server"}

    def chunk(delta, finish=None):
        return sse(None, dict(base, choices=[{"index": 0, "delta": delta,
                                              "finish_reason": finish}]))
    yield False, chunk({"role": "assistant", "content": ""})
    for p in pieces(turn.reasoning, turn.piece):
        yield False, chunk({"reasoning_content": p})
    pre = ("data: " + json.dumps(base, separators=(",", ":"))[:-1]
           + ',"choices":[{"index":0,"delta":{"content":').encode()
    for p in turn.text_pieces:
        yield False, pre + json.dumps(p, ensure_ascii=False).encode() + b'},"finish_reason":null}]}\n\n'
    for i, call in enumerate(turn.tool_calls):
        yield False, chunk({"tool_calls": [{"index": i, "id": call["call_id"], "type": "function",
                                            "function": {"name": call["name"], "arguments": ""}}]})
        for p in pieces(call["arguments"], max(turn.piece, 8)):
            yield False, chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]})
    yield False, chunk({}, "tool_calls" if turn.tool_calls else "stop")
    inp, out = turn.tokens()
    if not turn.no_usage:
        yield False, sse(None, dict(base, choices=[], usage={
            "prompt_tokens": inp, "completion_tokens": out, "total_tokens": inp + out}))
    yield True, b"data: [DONE]\n\n"


def gen_anthropic(turn):
    inp, out = turn.tokens()
    yield False, sse("message_start", {"type": "message_start", "message": {
        "id": "msg_%d" % turn.n, "type": "message", "role": "assistant", "model": "llm-server",
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": inp, "output_tokens": 1}}})
    index = 0
    if turn.reasoning:
        yield False, sse("content_block_start", {"type": "content_block_start", "index": index,
                         "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
        for p in pieces(turn.reasoning, turn.piece):
            yield False, sse("content_block_delta", {"type": "content_block_delta", "index": index,
                             "delta": {"type": "thinking_delta", "thinking": p}})
        yield False, sse("content_block_delta", {"type": "content_block_delta", "index": index,
                         "delta": {"type": "signature_delta", "signature": "sig-%d" % turn.n}})
        yield False, sse("content_block_stop", {"type": "content_block_stop", "index": index})
        index += 1
    yield False, sse("ping", {"type": "ping"})
    started = False
    pre = ('event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,'
           '"delta":{"type":"text_delta","text":' % index).encode()
    for p in turn.text_pieces:
        if not started:
            started = True
            yield False, sse("content_block_start", {"type": "content_block_start", "index": index,
                             "content_block": {"type": "text", "text": ""}})
        yield False, pre + json.dumps(p, ensure_ascii=False).encode() + b"}}\n\n"
    if started:
        yield False, sse("content_block_stop", {"type": "content_block_stop", "index": index})
        index += 1
    for call in turn.tool_calls:
        yield False, sse("content_block_start", {"type": "content_block_start", "index": index,
                         "content_block": {"type": "tool_use", "id": call["call_id"],
                                           "name": call["name"], "input": {}}})
        for p in pieces(call["arguments"], max(turn.piece, 8)):
            yield False, sse("content_block_delta", {"type": "content_block_delta", "index": index,
                             "delta": {"type": "input_json_delta", "partial_json": p}})
        yield False, sse("content_block_stop", {"type": "content_block_stop", "index": index})
        index += 1
    yield False, sse("message_delta", {"type": "message_delta", "delta": {
        "stop_reason": "tool_use" if turn.tool_calls else "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": out}})
    yield True, sse("message_stop", {"type": "message_stop"})


GENERATORS = {"responses": gen_responses, "chat": gen_chat, "anthropic": gen_anthropic}

# variant=json: what a server that does not stream answers, in each format
WHOLE_ANSWERS = {
    "chat": {"id": "chatcmpl-w", "object": "chat.completion", "model": "llm-server", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "whole"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}},
    "responses": {"id": "resp_w", "object": "response", "status": "completed", "output": [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "whole"}]}]},
    "anthropic": {"id": "msg_w", "type": "message", "role": "assistant", "model": "llm-server",
                  "content": [{"type": "text", "text": "whole"}], "stop_reason": "end_turn",
                  "usage": {"input_tokens": 3, "output_tokens": 1}},
}


def fixture_events(body):
    """Splits a fixture into (terminal, bytes) event blocks, as written."""
    text = body.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    blocks = [b for b in text.split(b"\n\n") if b.strip()]
    for block in blocks:
        event, data = None, []
        for line in block.split(b"\n"):
            if line.startswith(b"event:"):
                event = line[6:].strip().decode(errors="replace")
            elif line.startswith(b"data:"):
                data.append(line[5:].lstrip(b" "))
        payload = b"\n".join(data).strip()
        kind = event
        if kind is None and payload.startswith(b"{"):
            try:
                kind = json.loads(payload).get("type")
            except (ValueError, AttributeError):
                kind = None
        terminal = kind in TERMINAL_EVENTS or payload == b"[DONE]"
        yield terminal, block + b"\n\n"


# ---------------------------------------------------------------------------
# Error bodies, in each provider's shape.

def error_body(fmt, status, code=None, message=None):
    if fmt == "anthropic":
        kind = {400: "invalid_request_error", 401: "authentication_error",
                403: "permission_error", 404: "not_found_error", 429: "rate_limit_error",
                529: "overloaded_error"}.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message or kind}}
    if code is None:
        code = {401: "invalid_api_key", 429: "rate_limit_exceeded"}.get(status)
    kind = "server_error" if status >= 500 else "invalid_request_error"
    if status == 429:
        kind = "requests"
    return {"error": {"message": message or ("HTTP %d from llm_server" % status),
                      "type": kind, "param": None, "code": code}}


def overflow_body(fmt, size, window):
    """The provider's own answer to a request longer than its window."""
    tokens, limit = size // 4, window // 4
    if fmt == "anthropic":
        return {"type": "error", "error": {"type": "invalid_request_error",
                "message": "prompt is too long: %d tokens > %d maximum" % (tokens, limit)}}
    if fmt == "chat":
        return {"error": {"code": 400, "type": "exceed_context_size_error",
                "message": "the request exceeds the available context size, try increasing it",
                "n_prompt_tokens": tokens, "n_ctx": limit}}
    return {"error": {"message": "This model's maximum context length is %d tokens. However, your "
                      "messages resulted in %d tokens. Please reduce the length of the messages."
                      % (limit, tokens), "type": "invalid_request_error", "param": "messages",
                      "code": "context_length_exceeded"}}


def parse_params(path):
    """Returns (scenario prefix, endpoint kind, params dict) for a request path."""
    raw = urllib.parse.urlsplit(path).path
    endpoint, scenario = None, raw
    for suffix, kind in ENDPOINTS:
        if raw.endswith(suffix):
            endpoint, scenario = kind, raw[: -len(suffix)]
            break
    params = {}
    for seg in scenario.split("/"):
        if "=" in seg:
            k, _, v = seg.partition("=")
            params[urllib.parse.unquote(k)] = urllib.parse.unquote(v)
    return scenario, endpoint, params


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "llm_server/1"

    def log_message(self, fmt, *args):
        if self.server.state.verbose:
            sys.stderr.write("llm_server: " + (fmt % args) + "\n")

    # -- plumbing ------------------------------------------------------------

    def read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def record(self, endpoint, scenario, params, body, status):
        text = body.decode("utf-8", errors="replace")
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = None
        self.server.state.log({
            "ts": time.time(), "pid": os.getpid(), "method": self.command, "path": self.path,
            "endpoint": endpoint, "scenario": scenario, "params": params,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": text, "json": parsed, "status": status})

    def send_json(self, status, obj, headers=None):
        self.started = True
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def bearer(self):
        auth = self.headers.get("Authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[7:].strip()
        return self.headers.get("x-api-key", "").strip()

    def write_chunk(self, data):
        if data:
            self.connection.sendall(b"%x\r\n%s\r\n" % (len(data), data))

    def wait_for_disconnect(self, limit_s=600):
        """Hangs until the client closes the connection (or the limit)."""
        deadline = time.monotonic() + limit_s
        sock = self.connection
        while time.monotonic() < deadline:
            ready, _, _ = select.select([sock], [], [], 0.5)
            if ready:
                try:
                    if not sock.recv(4096):
                        return
                except OSError:
                    return

    # -- requests ------------------------------------------------------------

    def do_GET(self):
        scenario, endpoint, params = parse_params(self.path)
        if self.path.startswith("/_control"):
            self.send_json(200, self.server.state.stats())
            return
        if self.path.startswith("/_health"):
            self.send_json(200, {"ok": True})
            return
        if endpoint != "models":
            self.record(endpoint, scenario, params, b"", 404)
            self.send_json(404, {"error": {"message": "llm_server: no such path", "code": "not_found"}})
            return
        if "key" in params and self.bearer() != params["key"]:
            self.record(endpoint, scenario, params, b"", 401)
            self.send_json(401, error_body("responses", 401, message="llm_server: wrong key"))
            return
        ids = params.get("models", "test-model-1+test-model-2").split("+")
        # One shape that OpenAI-style and Anthropic-style clients both read.
        data = [{"id": i, "object": "model", "type": "model", "display_name": i,
                 "created": 1764400000, "created_at": "2025-11-29T00:00:00Z",
                 "owned_by": "llm_server"} for i in ids]
        self.record(endpoint, scenario, params, b"", 200)
        self.send_json(200, {"object": "list", "data": data, "has_more": False,
                             "first_id": ids[0], "last_id": ids[-1]})

    def do_POST(self):
        self.started = False
        try:
            self.post()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except (ValueError, KeyError, TypeError, OSError) as e:
            # A bad parameter or script: say so, if the reply has not begun.
            self.close_connection = True
            if not self.started:
                self.send_json(400, {"error": {"message": "llm_server: %s: %s"
                                               % (type(e).__name__, e), "code": "bad_scenario"}})
            else:
                sys.stderr.write("llm_server: %s: %s\n" % (type(e).__name__, e))

    def post(self):
        body = self.read_body()
        scenario, endpoint, params = parse_params(self.path)
        state = self.server.state
        if self.path.startswith("/_control"):
            self.control(body)
            return
        if endpoint == "token":
            self.token(scenario, params, body)
            return
        if endpoint not in GENERATORS:
            self.record(endpoint, scenario, params, body, 404)
            self.send_json(404, {"error": {"message": "llm_server: no such path", "code": "not_found"}})
            return
        fmt = endpoint
        variants = set(filter(None, params.get("variant", "plain").split("+")))
        attempt = state.count(scenario)

        if "key" in params and self.bearer() != params["key"]:
            return self.fail(fmt, scenario, params, body, 401, message="llm_server: wrong key")
        if "status" in params:
            return self.fail(fmt, scenario, params, body, int(params["status"]))
        if "429" in variants and attempt == 0:
            headers = {"retry-after": "1"}
            if "retry_after_ms" in params:
                headers["retry-after-ms"] = params["retry_after_ms"]
            return self.fail(fmt, scenario, params, body, 429, headers=headers,
                             message="Rate limit reached for llm-server. Please try again in 1s.")
        if "500x2" in variants and attempt < 2:
            return self.fail(fmt, scenario, params, body, 500)
        if "401always" in variants or ("401" in variants and not state.token_ok(self.bearer())):
            return self.fail(fmt, scenario, params, body, 401, code="token_expired",
                             message="Your authentication token has expired.")

        if "json" in variants:
            self.record(endpoint, scenario, params, body, 200)
            return self.send_json(200, WHOLE_ANSWERS[fmt])

        window = int(params["window"]) if "window" in params else 0
        if window and len(body) > window:
            return self.overflow(fmt, scenario, params, body, window)
        delay = float(params.get("delay_ms", 0)) / 1000.0
        if "fixture" in params:
            events = self.fixture(params["fixture"])
            if events is None:
                return self.fail(fmt, scenario, params, body, 404, code="no_fixture",
                                 message="llm_server: no fixture %s" % params["fixture"])
        elif "script" in params:
            try:
                offers_tools = bool(json.loads(body or b"{}").get("tools"))
            except (ValueError, AttributeError):
                offers_tools = True
            spec, n = state.next_turn(params["script"], offers_tools)
            if spec is None:
                return self.fail(fmt, scenario, params, body, 400, code="script_exhausted",
                                 message="llm_server: script %s has no turn %d"
                                 % (params["script"], n))
            if "status" in spec:
                headers = {"retry-after": str(spec["retry_after"])} if "retry_after" in spec else {}
                return self.fail(fmt, scenario, params, body, int(spec["status"]), headers=headers)
            if spec.get("overflow"):
                return self.overflow(fmt, scenario, params, body, window or len(body) // 2)
            variants |= set(filter(None, spec.get("variant", "").split("+")))
            delay = float(spec.get("delay_ms", params.get("delay_ms", 0))) / 1000.0
            turn = Turn.from_script(spec, n + 1)
            if window and "usage" not in spec:
                turn.usage = {"input_tokens": len(body) // 4, "output_tokens": 5}
            events = GENERATORS[fmt](turn)
        elif "gen" in params:
            if params.get("stamp") != "1" and not delay and variants <= {"plain"}:
                self.record(endpoint, scenario, params, body, 200)
                self.stream_cached(fmt, params)
                return
            events = GENERATORS[fmt](self.generated(params))
        else:
            return self.fail(fmt, scenario, params, body, 400, code="no_scenario",
                             message="llm_server: say fixture=, script= or gen= in the base URL")
        self.record(endpoint, scenario, params, body, 200)
        self.ratelimit = (fmt, params.get("ratelimit"))
        self.stream(events, variants, delay, int(params.get("batch", 1)))

    def overflow(self, fmt, scenario, params, body, window):
        self.record(fmt, scenario, params, body, 400)
        self.send_json(400, overflow_body(fmt, len(body), window))

    def fail(self, fmt, scenario, params, body, status, code=None, message=None, headers=None):
        self.record(fmt, scenario, params, body, status)
        self.send_json(status, error_body(fmt, status, code, message), headers)

    def fixture(self, name):
        base = self.server.state.fixtures
        for candidate in (name, name + ".sse"):
            path = os.path.join(base, candidate)
            if os.path.isfile(path) and os.path.realpath(path).startswith(os.path.realpath(base)):
                with open(path, "rb") as f:
                    return list(fixture_events(f.read()))
        return None

    def generated(self, params):
        count = int(params["gen"])
        text = params.get("delta", "tok ")
        if params.get("stamp") == "1":
            # Lazy: each stamp is taken when its event is built, just before the write.
            texts = ("T%d;" % (time.monotonic_ns() // 1000) for _ in range(count))
        else:
            texts = (text for _ in range(count))
        return Turn(texts, usage={"input_tokens": 10, "output_tokens": count})

    def stream_cached(self, fmt, params):
        """The benchmark's fast path: the same stream every time, framed once."""
        key = (fmt, int(params["gen"]), params.get("delta", "tok "), int(params.get("batch", 1)))
        cache = self.server.cache
        frames = cache.get(key)
        if frames is None:
            events = [data for _, data in GENERATORS[fmt](self.generated(params))]
            batch = max(1, key[3])
            frames = []
            for i in range(0, len(events), batch):
                data = b"".join(events[i:i + batch])
                frames.append(b"%x\r\n%s\r\n" % (len(data), data))
            frames.append(b"0\r\n\r\n")
            cache[key] = frames
        self.started = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        sendall = self.connection.sendall
        try:
            for frame in frames:
                sendall(frame)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def ratelimit_headers(self):
        """ratelimit=K: the rate-limit headers of the endpoint's provider, K requests left."""
        fmt, left = getattr(self, "ratelimit", (None, None))
        if left is None:
            return
        left = int(left)
        if fmt == "anthropic":
            names = ("anthropic-ratelimit-requests-limit", "anthropic-ratelimit-requests-remaining",
                     "anthropic-ratelimit-tokens-limit", "anthropic-ratelimit-tokens-remaining")
        else:
            names = ("x-ratelimit-limit-requests", "x-ratelimit-remaining-requests",
                     "x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens")
        for name, value in zip(names, (1000, left, 200000, left * 100)):
            self.send_header(name, str(value))
        self.send_header("retry-after", "7")

    def stream(self, events, variants, delay, batch):
        self.started = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.ratelimit_headers()
        self.end_headers()
        self.wfile.flush()
        eol = b"\r\n" if "crlf" in variants else b"\r" if "cr" in variants else None
        cut = "cut" in variants or "cutclose" in variants
        pending = []
        try:
            for i, (terminal, data) in enumerate(events):
                if terminal and cut:
                    break
                if eol:
                    data = data.replace(b"\n", eol)
                if "silent" in variants:
                    self.write_chunk(data)
                    self.wait_for_disconnect()
                    self.close_connection = True
                    return
                if "bytes" in variants:
                    for b in range(len(data)):
                        self.write_chunk(data[b:b + 1])
                else:
                    pending.append(data)
                    if len(pending) >= batch:
                        self.write_chunk(b"".join(pending))
                        pending = []
                if delay:
                    time.sleep(delay)
            self.write_chunk(b"".join(pending))
            if "cutclose" in variants:
                # Abrupt end: no terminating chunk, the connection just goes.
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.connection.sendall(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True

    def token(self, scenario, params, body):
        fields = {}
        text = body.decode("utf-8", errors="replace")
        try:
            fields = json.loads(text) if text.strip().startswith("{") else \
                dict(urllib.parse.parse_qsl(text))
        except ValueError:
            pass
        if params.get("refresh") == "fail" or not fields.get("refresh_token"):
            self.record("token", scenario, params, body, 400)
            self.send_json(400, {"error": "invalid_grant",
                                 "error_description": "llm_server: refresh refused"})
            return
        access, refresh = self.server.state.issue_token()
        claims = {"https://api.openai.com/auth": {"chatgpt_account_id": "acct-llm-server"}}
        seg = lambda o: base64.urlsafe_b64encode(json.dumps(o).encode()).rstrip(b"=").decode()
        id_token = "%s.%s.sig" % (seg({"alg": "none"}), seg(claims))
        self.record("token", scenario, params, body, 200)
        self.send_json(200, {"access_token": access, "refresh_token": refresh,
                             "id_token": id_token, "token_type": "Bearer", "expires_in": 3600})

    def control(self, body):
        state = self.server.state
        try:
            req = json.loads(body or b"{}")
            op = req.get("op", "stats")
            if op == "script":
                if not isinstance(req.get("turns"), list):
                    raise ValueError("turns must be a list")
                state.set_script(req["name"], req["turns"], req.get("repeat_last"), req.get("no_tools"))
            elif op == "reset":
                state.reset()
            elif op != "stats":
                raise ValueError("unknown op %r" % op)
        except (ValueError, KeyError, AttributeError) as e:
            self.send_json(400, {"error": {"message": "llm_server: %s" % e, "code": "bad_control"}})
            return
        self.send_json(200, state.stats())


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # The benchmark opens 500 streams at once; the default backlog of 5
    # would make most of them wait for SYN retries.
    request_queue_size = 1024
    cache = {}      # generated streams without stamps, by (format, n, text, batch)

    def get_request(self):
        sock, addr = super().get_request()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock, addr


def main():
    ap = argparse.ArgumentParser(description="loopback LLM provider for tests")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--fixtures", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                       "fixtures", "llm"))
    ap.add_argument("--portfile")
    ap.add_argument("--log")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--processes", type=int, default=1,
                    help="serve from N processes sharing the socket (generator mode only)")
    args = ap.parse_args()

    server = Server((args.host, args.port), Handler)
    server.state = State(os.path.abspath(args.fixtures), args.log, args.verbose)
    port = server.server_address[1]
    children = []
    for _ in range(max(1, args.processes) - 1):
        # Forked before any thread exists; each child accepts on the shared
        # socket and has its own GIL, which is the point.
        pid = os.fork()
        if pid == 0:
            s_die_with_parent()
            signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
            try:
                server.serve_forever(poll_interval=0.2)
            finally:
                os._exit(0)
        children.append(pid)
    if args.portfile:
        tmp = args.portfile + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.replace(tmp, args.portfile)
    sys.stderr.write("llm_server: listening on %s:%d\n" % (args.host, port))
    sys.stderr.flush()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        for pid in children:
            try:
                os.kill(pid, signal.SIGTERM)
                os.waitpid(pid, 0)
            except OSError:
                pass
        server.server_close()


def s_die_with_parent():
    """A child must not outlive the server a test started and then killed."""
    try:
        import ctypes
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


if __name__ == "__main__":
    main()
