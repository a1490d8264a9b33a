"""What the llm actor sends to providers, as llm_server.py records it, and
how it answers requests it cannot serve.

For each provider (responses, chat, anthropic) a two-turn tool loop: the
first turn streams the provider's fixture, the second gives back what the
first produced (its tool calls, their outputs, and the reasoning_state
chunks verbatim) and the test reads the second request's body: tools in
the provider's shape, tool outputs paired with their call_id, the previous
turn's reasoning sent back (Responses: the reasoning item with
encrypted_content; Anthropic: the thinking block with its signature), the
options, and the headers with the right key. Then llm.models (GET
{base}/models, and the configured list when the provider fails), an
unknown provider (not_found), malformed llm.stream bodies (invalid, with
the field named), and a key file readable by others (serve refuses it)."""

import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import SB_BIN, Client, Proc, check, run_tests, tmpdir  # noqa: E402
from sbllm import LlmServer, provider, serve_llm, stream, stream_body, user, write_providers  # noqa: E402

KEYS = {"RESP_KEY": "sk-resp-KEY-1", "ANT_KEY": "sk-ant-KEY-2"}
CHAT_KEY = "sk-chat-KEY-3"      # from a 0600 key file

SHELL_SCHEMA = {"type": "object", "properties": {"command": {"type": "string"},
                                                 "timeout_s": {"type": "integer"}},
                "required": ["command"]}
READ_SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}

TOOLS = [
    {"name": "shell", "description": "Run a shell command", "parameters": json.dumps(SHELL_SCHEMA)},
    {"name": "read_file", "description": "Read a file", "parameters": json.dumps(READ_SCHEMA)},
]
INSTRUCTIONS = "You are terse."


def setup():
    llm = LlmServer()
    d = tmpdir()
    key_file = os.path.join(d, "chat.key")
    with open(key_file, "w") as f:
        f.write(CHAT_KEY + "\n")
    os.chmod(key_file, 0o600)
    provs = [
        provider("resp-1", "responses", llm.base(fixture="responses-reasoning-tool", tag="r1"),
                 model="m-resp", key_env="RESP_KEY"),
        provider("resp-2", "responses", llm.base(gen=2, tag="r2", models="gpt-a+gpt-b"),
                 model="m-resp", key_env="RESP_KEY"),
        provider("chat-1", "chat", llm.base(fixture="chat-tools", tag="c1"), model="m-chat",
                 key_file=key_file),
        provider("chat-2", "chat", llm.base(gen=2, tag="c2"), model="m-chat", key_file=key_file),
        provider("ant-1", "anthropic", llm.base(fixture="anthropic-thinking-tool", tag="a1"),
                 model="m-ant", key_env="ANT_KEY"),
        provider("ant-2", "anthropic", llm.base(gen=2, tag="a2", models="claude-x"),
                 model="m-ant", key_env="ANT_KEY"),
        # the provider refuses our key (key= wants another one): models falls back
        provider("refuses", "responses", llm.base(gen=2, key="another-key", tag="rf"),
                 model="m-ref", models=["conf-1", "conf-2"], key_env="RESP_KEY"),
        provider("nowhere", "chat", "http://127.0.0.1:9/v1", model="m-nw",
                 models=["local-1"], connect_timeout_ms=500),
    ]
    srv = serve_llm(provs, env=KEYS, default="resp-2")
    return llm, srv, Client(srv.endpoint())


def turn_two(client, llm, first, second, options):
    """Streams the first provider's fixture, then sends its output back to
    the second provider; returns (turn-1 chunks, the second request's
    logged record)."""
    final, chunks = stream(client, stream_body(first, [user("Look around")]))
    check(final.type == "llm.stream.ok", "turn 1 on %s: %r", first, final.body)
    calls = [{"call_id": c["call_id"], "name": c["name"], "arguments": c["arguments"]}
             for c in chunks if c["kind"] == "tool_call"]
    states = [c for c in final.chunks[1:] if c.body["kind"] == "reasoning_state"]
    check(calls, "turn 1 on %s made no tool call", first)
    assistant = {"role": "assistant", "tool_calls": calls}
    text = "".join(c["text"] for c in chunks if c["kind"] == "text")
    if text:
        assistant["content"] = text
    if states:
        # given back verbatim, as the chunk carried it
        check(len(states) == 1, "several reasoning states %r", states)
        assistant["reasoning_state"] = states[0].body["data"]
    messages = [user("Look around"), assistant]
    for c in calls:
        messages.append({"role": "tool", "call_id": c["call_id"], "content": "out of " + c["call_id"]})
    before = len(llm.requests())
    final, chunks2 = stream(client, stream_body(second, messages, instructions=INSTRUCTIONS,
                                                 tools=TOOLS, options=options))
    check(final.type == "llm.stream.ok", "turn 2 on %s: %r", second, final.body)
    check("".join(c.get("text", "") for c in chunks2) == "tok tok ", "turn 2 text %r", chunks2)
    reqs = llm.requests()[before:]
    check(len(reqs) == 1, "turn 2 made %d requests", len(reqs))
    check(reqs[0]["json"] is not None, "turn 2 body is not JSON: %r", reqs[0]["body"][:200])
    return chunks, reqs[0]


def test_responses_body_and_headers():
    llm, srv, client = setup()
    try:
        chunks, req = turn_two(client, llm, "resp-1", "resp-2",
                               {"reasoning_effort": "low", "max_output_tokens": 512,
                                "temperature": 0.25})
        check(req["path"].endswith("/v1/responses") and req["method"] == "POST", "path %r", req["path"])
        h = req["headers"]
        check(h.get("authorization") == "Bearer " + KEYS["RESP_KEY"], "authorization %r",
              h.get("authorization"))
        check("x-api-key" not in h, "x-api-key sent to an OpenAI provider")
        check(h.get("content-type") == "application/json" and "text/event-stream" in h.get("accept", ""),
              "headers %r", h)
        b = req["json"]
        check(b["model"] == "m-resp" and b["instructions"] == INSTRUCTIONS, "model/instructions %r", b)
        check(b["stream"] is True and b["store"] is False, "stream/store %r", b)
        check(b.get("include") == ["reasoning.encrypted_content"], "include %r", b.get("include"))
        check(b.get("reasoning", {}).get("effort") == "low", "reasoning %r", b.get("reasoning"))
        check(b.get("max_output_tokens") == 512 and b.get("temperature") == 0.25, "options %r", b)
        # function tools are flat
        check([t["name"] for t in b["tools"]] == ["shell", "read_file"], "tools %r", b["tools"])
        for t, want in zip(b["tools"], (SHELL_SCHEMA, READ_SCHEMA)):
            check(t["type"] == "function" and "function" not in t, "tool not flat: %r", t)
            check(t["parameters"] == want and t["description"], "tool %r", t)
        items = b["input"]
        kinds = [i.get("type") for i in items]
        check(kinds == ["message", "reasoning", "function_call", "function_call", "function_call_output",
                        "function_call_output"], "input item types %r", kinds)
        check(items[0]["role"] == "user" and items[0]["content"][0]["text"] == "Look around",
              "user item %r", items[0])
        # the previous turn's reasoning, with its encrypted_content, before its calls
        r = items[1]
        check(r["encrypted_content"] == "gAAAAB-opaque2", "reasoning item %r", r)
        check(r["summary"] == [{"type": "summary_text",
                                "text": "**Looking around**\n\nI should list the workspace first."}],
              "reasoning summary %r", r["summary"])
        calls = [(i["call_id"], i["name"], json.loads(i["arguments"])) for i in items[2:4]]
        check(calls == [("call_7Qx", "shell", {"command": "ls -la", "timeout_s": 30}),
                        ("call_8Ry", "read_file", {"path": "README.md"})], "function calls %r", calls)
        outs = [(i["call_id"], i["output"]) for i in items[4:]]
        check(outs == [("call_7Qx", "out of call_7Qx"), ("call_8Ry", "out of call_8Ry")],
              "function_call_output items %r", outs)
    finally:
        client.close()
        srv.stop()
        llm.stop()


def test_chat_body_and_headers():
    llm, srv, client = setup()
    try:
        chunks, req = turn_two(client, llm, "chat-1", "chat-2",
                               {"max_output_tokens": 300, "temperature": 0.5})
        check(req["path"].endswith("/v1/chat/completions"), "path %r", req["path"])
        h = req["headers"]
        check(h.get("authorization") == "Bearer " + CHAT_KEY, "authorization from the key file %r",
              h.get("authorization"))
        b = req["json"]
        check(b["model"] == "m-chat" and b["stream"] is True, "body %r", b)
        check(b.get("stream_options") == {"include_usage": True}, "stream_options %r",
              b.get("stream_options"))
        check(b.get("max_tokens") == 300 or b.get("max_completion_tokens") == 300, "max tokens %r", b)
        check(b.get("temperature") == 0.5, "temperature %r", b.get("temperature"))
        tools = b["tools"]
        check([t["type"] for t in tools] == ["function", "function"], "tools %r", tools)
        check([t["function"]["name"] for t in tools] == ["shell", "read_file"]
              and tools[0]["function"]["parameters"] == SHELL_SCHEMA
              and tools[0]["function"]["description"] == "Run a shell command", "tools %r", tools)
        msgs = b["messages"]
        check([m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "tool"],
              "roles %r", [m["role"] for m in msgs])
        check(msgs[0]["content"] == INSTRUCTIONS and msgs[1]["content"] == "Look around",
              "system/user %r", msgs[:2])
        a = msgs[2]
        check(a.get("content") == "Let me look.", "assistant content %r", a)
        calls = [(c["id"], c["type"], c["function"]["name"], json.loads(c["function"]["arguments"]))
                 for c in a["tool_calls"]]
        check(calls == [("call_w1", "function", "list_dir", {"path": "."}),
                        ("call_w2", "function", "grep", {"pattern": "TODO"})], "tool_calls %r", calls)
        outs = [(m["tool_call_id"], m["content"]) for m in msgs[3:]]
        check(outs == [("call_w1", "out of call_w1"), ("call_w2", "out of call_w2")],
              "tool messages %r", outs)
    finally:
        client.close()
        srv.stop()
        llm.stop()


def test_anthropic_body_and_headers():
    llm, srv, client = setup()
    try:
        chunks, req = turn_two(client, llm, "ant-1", "ant-2",
                               {"max_output_tokens": 700, "temperature": 0.3})
        check(req["path"].endswith("/v1/messages"), "path %r", req["path"])
        h = req["headers"]
        check(h.get("x-api-key") == KEYS["ANT_KEY"], "x-api-key %r", h.get("x-api-key"))
        check(h.get("anthropic-version") == "2023-06-01", "anthropic-version %r",
              h.get("anthropic-version"))
        check("authorization" not in h, "Authorization sent to Anthropic: %r", h.get("authorization"))
        b = req["json"]
        check(b["model"] == "m-ant" and b["stream"] is True and b["system"] == INSTRUCTIONS,
              "body %r", b)
        check(b["max_tokens"] == 700 and b.get("temperature") == 0.3, "max_tokens/temperature %r", b)
        check([(t["name"], t["input_schema"]) for t in b["tools"]]
              == [("shell", SHELL_SCHEMA), ("read_file", READ_SCHEMA)], "tools %r", b["tools"])
        check(all("type" not in t or t["type"] != "function" for t in b["tools"]),
              "OpenAI-shaped tool sent to Anthropic: %r", b["tools"])
        msgs = b["messages"]
        check([m["role"] for m in msgs] == ["user", "assistant", "user"], "roles %r",
              [m["role"] for m in msgs])
        check(msgs[0]["content"] == [{"type": "text", "text": "Look around"}], "user %r", msgs[0])
        blocks = msgs[1]["content"]
        check([x["type"] for x in blocks] == ["thinking", "text", "tool_use"], "assistant blocks %r",
              blocks)
        # the previous turn's thinking block, signature and all, first
        check(blocks[0] == {"type": "thinking", "thinking": "The user wants the tests run.",
                            "signature": "EqQBCgIYAhIM-opaque"}, "thinking block %r", blocks[0])
        check(blocks[1]["text"] == "Running the tests now.", "text block %r", blocks[1])
        check(blocks[2] == {"type": "tool_use", "id": "toolu_01Ab", "name": "shell",
                            "input": {"command": "make test"}}, "tool_use %r", blocks[2])
        check(msgs[2]["content"] == [{"type": "tool_result", "tool_use_id": "toolu_01Ab",
                                      "content": "out of toolu_01Ab"}], "tool_result %r", msgs[2])
    finally:
        client.close()
        srv.stop()
        llm.stop()


def test_models():
    llm, srv, client = setup()
    try:
        m = client.request("llm.models", {"provider": "resp-2"}, timeout=10)
        # each model with its limits (docs/compaction.md): unknown names get the defaults
        limits = [{"model": n, "context_window": 128000, "max_output_tokens": 16384, "source": "default"}
                  for n in ("gpt-a", "gpt-b")]
        check(m.type == "llm.models.ok" and m.body == {"provider": "resp-2", "models": ["gpt-a", "gpt-b"],
                                                      "source": "provider", "limits": limits},
              "resp-2 models %r", m.body)
        got = llm.requests("models", "r2")
        check(len(got) == 1 and got[0]["method"] == "GET" and got[0]["path"].endswith("/v1/models"),
              "models request %r", got)
        check(got[0]["headers"].get("authorization") == "Bearer " + KEYS["RESP_KEY"],
              "models auth %r", got[0]["headers"])
        m = client.request("llm.models", {"provider": "ant-2"}, timeout=10)
        check(m.type == "llm.models.ok" and m.body["models"] == ["claude-x"]
              and m.body["source"] == "provider", "ant-2 models %r", m.body)
        h = llm.requests("models", "a2")[0]["headers"]
        check(h.get("x-api-key") == KEYS["ANT_KEY"] and h.get("anthropic-version") == "2023-06-01",
              "anthropic models headers %r", h)
        # no provider named: the default (resp-2)
        m = client.request("llm.models", {}, timeout=10)
        check(m.type == "llm.models.ok" and m.body["provider"] == "resp-2", "default models %r", m.body)
        # the provider refuses (401) or cannot be reached: the configured list
        m = client.request("llm.models", {"provider": "refuses"}, timeout=10)
        check(m.type == "llm.models.ok" and m.body == {"provider": "refuses", "models": ["conf-1", "conf-2"],
                                                      "source": "configured",
                                                      "limits": [dict(x, model=n) for x, n in
                                                                 zip(limits, ("conf-1", "conf-2"))]},
              "fallback %r", m.body)
        check([r["status"] for r in llm.requests("models", "rf")] == [401],
              "the provider was asked first: %r", llm.requests("models", "rf"))
        m = client.request("llm.models", {"provider": "nowhere"}, timeout=10)
        check(m.type == "llm.models.ok" and m.body["models"] == ["local-1"]
              and m.body["source"] == "configured", "unreachable fallback %r", m.body)
    finally:
        client.close()
        srv.stop()
        llm.stop()


def test_unknown_provider_is_not_found():
    llm, srv, client = setup()
    try:
        for type, body in (("llm.stream", stream_body("no-such-provider")),
                           ("llm.models", {"provider": "no-such-provider"})):
            m = client.request(type, body, timeout=5)
            check(m.type == "error" and m.body.get("code") == "not_found", "%s: %r", type, m.body)
            check("no-such-provider" in m.body.get("message", ""), "%s: message %r", type, m.body)
            check(m.chunks == [], "%s: chunks before the error %r", type, m.chunks)
        check(llm.requests() == [], "a request went to the provider: %r", llm.requests())
        m = client.request("llm.cancel", {"stream_id": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}, timeout=5)
        check(m.type == "llm.cancel.ok" and m.body == {"cancelled": False}, "cancel unknown %r", m.body)
    finally:
        client.close()
        srv.stop()
        llm.stop()


def test_malformed_stream_is_invalid_naming_the_field():
    llm, srv, client = setup()
    bad_args = {"role": "assistant", "tool_calls": [{"call_id": "c1", "name": "shell",
                                                     "arguments": "{not json"}]}
    cases = [
        ("no messages", {"provider": "resp-2"}, "messages"),
        ("messages not an array", {"messages": "hello"}, "messages"),
        ("message without role", {"messages": [{"content": "hi"}]}, "role"),
        ("unknown role", {"messages": [{"role": "robot", "content": "hi"}]}, "role"),
        ("role not a string", {"messages": [{"role": 7, "content": "hi"}]}, "role"),
        ("tool without name", {"messages": [user("hi")], "tools": [{"description": "x"}]}, "name"),
        ("tool output without call_id", {"messages": [user("hi"), {"role": "tool", "content": "x"}]},
         "call_id"),
        ("tool parameters not JSON", {"messages": [user("hi")],
                                      "tools": [{"name": "t", "parameters": "{oops"}]}, "parameters"),
        ("options.temperature a string", {"messages": [user("hi")], "options": {"temperature": "hot"}},
         "temperature"),
        ("anthropic tool arguments not JSON", {"provider": "ant-2", "messages": [user("hi"), bad_args]},
         "arguments"),
    ]
    try:
        for what, body, field in cases:
            m = client.request("llm.stream", body, timeout=5)
            check(m.type == "error" and m.body.get("code") == "invalid",
                  "%s: want invalid, got %s %r", what, m.type, m.body)
            check(field in m.body.get("message", ""), "%s: the message %r does not name %s",
                  what, m.body.get("message"), field)
            check(not any(c.body.get("kind") != "open" for c in m.chunks), "%s: chunks %r", what, m.chunks)
        check(llm.requests() == [], "a malformed request reached the provider: %r",
              [r["path"] for r in llm.requests()])
        # and the actor still serves
        final, _ = stream(client, stream_body("resp-2"))
        check(final.type == "llm.stream.ok", "after the bad requests: %r", final.body)
    finally:
        client.close()
        srv.stop()
        llm.stop()


def test_key_file_readable_by_others_is_refused():
    d = tmpdir()
    key_file = os.path.join(d, "open.key")
    with open(key_file, "w") as f:
        f.write("sk-open-KEY\n")
    os.chmod(key_file, 0o644)
    path = write_providers([provider("p", "responses", "http://127.0.0.1:9/v1", key_file=key_file)])
    data = tmpdir()
    p = Proc([SB_BIN, "serve", "--data", data, "--http", "127.0.0.1:0", "--actors", "broker,llm",
              "--providers", path], os.path.join(d, "serve.log"))
    try:
        rc = p.wait(5)
        log = p.log()
        check(rc is not None, "serve kept running without its llm actor (bad key file):\n%s", log)
        check(rc != 0, "serve exited 0 with a world-readable key file")
        check("600" in log and "open.key" in log, "no clear message: %s", log)
        check("sk-open-KEY" not in log, "the key was printed")
        check(not os.path.exists(os.path.join(data, "bus-cmd")),
              "serve bound its endpoints although an actor failed to start")
    finally:
        p.kill()

if __name__ == "__main__":
    run_tests(globals())
