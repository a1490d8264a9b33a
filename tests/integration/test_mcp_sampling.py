#!/usr/bin/python3
"""MCP sampling (docs/mcp.md, "Sampling"): a server's sampling/createMessage,
sent inside a tool call by tests/mcp/http_server.py (its `sample` tool),
in a served run on the scripted model of tests/llm_server.py:

  - a session that does not allow it (no mcp_sampling): the client does
    not declare the capability, the request is refused as not supported,
    nobody is asked and the model is not called;
  - allowed and approved: the capability is declared, a person is asked
    (the summary names the server and shows the request), the session's
    model gets the server's system prompt and messages and nothing else,
    the server receives its text as the specification's result, and the
    call's usage entry is on the tape, naming the server;
  - the same over stdio (tests/mcp/hostile_server.py's `sample` tool);
  - allowed and rejected: the server gets the user-rejection error, and
    the model is not called;
  - an image the server sends goes to the model as a person's do (sniffed,
    bounded, downscaled when over what models take); a model that takes
    no images refuses it, the server hears why and the run goes on;
  - a request outside the bounds (maxTokens 0, audio, an image that is
    not one, or not the type it says) is refused as invalid params before
    anyone is asked.
"""
import base64
import json
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import ROOT, Server, check, cli, read_jsonl, run_tests, tmpdir  # noqa: E402
from sbagent import (LLM, LLM_ENV, calls, llm_args, new_session, pending, prompt, resolve, results, tape,  # noqa: E402
                     wait_run, png)
from sbmcp import HttpMcp, mcp_config  # noqa: E402
from sbllm import provider, write_providers  # noqa: E402

ANSWER = "Paris is the capital of France."
HOSTILE = os.path.join(ROOT, "tests", "mcp", "hostile_server.py")


class Sampling:
    """serve with the HTTP MCP server as `h` and a model that calls
    mcp__h__sample (with `args`), answers the sampling call with ANSWER,
    then says done."""

    def __init__(self, name, args=None, turns=None, stdio=False, server_conf=None, images=True, **session):
        """stdio: tests/mcp/hostile_server.py over stdio instead (its
        `sample` tool, its messages in self.stdio_log); server_conf: more
        fields of the server's config; images=False: the model is one the
        providers file says takes no images."""
        self.llm = LLM()
        self.mcp = None if stdio else HttpMcp()
        self.stdio_log = os.path.join(tmpdir(), "hostile.jsonl")
        server = ({"command": "/usr/bin/python3", "args": [HOSTILE], "env": {"HOSTILE_LOG": self.stdio_log}}
                  if stdio else {"url": self.mcp.url})
        server.update(server_conf or {})
        self.name = name
        self.llm.script(name, turns or [calls(("c_s", "mcp__h__sample", args or {})), {"text": ANSWER},
                                        {"text": "done"}])
        model = llm_args(self.llm, name) if images else ["--providers", write_providers([provider(
            "blind", "responses", self.llm.url(name), model="m", key_env="OPENAI_API_KEY", images=False)])]
        self.srv = Server(args=model + ["--mcp-config", mcp_config({"h": server})], env=LLM_ENV).start()
        self.sid = new_session(self.srv, tmpdir(), approval_policy="yolo", **session)
        self.run_id = prompt(self.srv, self.sid, "go")

    def finish(self, call_id="c_s"):
        r = wait_run(self.srv, self.run_id, timeout=40)
        check(r["status"] == "completed", "the run ended %s: %s", r["status"], r.get("reason"))
        self.entries = tape(self.srv, self.sid)
        out = results(self.entries)
        check(call_id in out, "no tool result for %s: %r", call_id, out)
        return json.loads(out[call_id]["output"])

    def answer(self, decision="approve"):
        """Waits for the person's question and answers it; returns it."""
        ia = pending(self.srv, self.sid, timeout=20)
        resolve(self.srv, ia["interaction_id"], decision)
        return ia

    def initializes(self):
        msgs = read_jsonl(self.stdio_log) if not self.mcp else [r.get("msg", {}) for r in self.mcp.log()]
        return [m["params"]["capabilities"] for m in msgs if m.get("method") == "initialize"]

    def capabilities(self):
        return self.initializes()[-1]

    def model_requests(self):
        return self.llm.requests(self.name)

    def stop(self):
        self.srv.stop()
        self.llm.stop()
        if self.mcp:
            self.mcp.stop()


def test_not_allowed_is_refused_as_not_supported():
    t = Sampling("s_off")
    try:
        ans = t.finish()
        check(ans["error"]["code"] == -32601 and "not supported" in ans["error"]["message"], "the answer: %r", ans)
        check("sampling" not in t.capabilities(), "sampling declared: %r", t.capabilities())
        check(not [e for e in t.entries if e["kind"] == "approval.requested"], "a person was asked")
        check(len(t.model_requests()) == 2, "the model was called %d times", len(t.model_requests()))
    finally:
        t.stop()


def test_approved_goes_to_the_model_and_back():
    t = Sampling("s_yes", mcp_sampling=True)
    try:
        ia = t.answer()
        check(ia["tool"] == "mcp_sampling", "the interaction: %r", ia)
        check("MCP server h" in ia["summary"] and "capital of France?" in ia["summary"]
              and "claude-3-sonnet" in ia["summary"] and "50 tokens" in ia["summary"], "the summary: %r", ia["summary"])
        check(json.loads(ia["arguments"])["systemPrompt"] == "You are a geography helper.", "the arguments: %r",
              ia["arguments"])
        ans = t.finish()
        res = ans.get("result")
        check(res == {"role": "assistant", "content": {"type": "text", "text": ANSWER}, "model": res and res["model"],
                      "stopReason": "endTurn"} and res["model"], "the answer: %r", ans)
        check("sampling" in t.capabilities(), "sampling not declared: %r", t.capabilities())
        reqs = t.model_requests()
        check(len(reqs) == 3, "the model was called %d times", len(reqs))
        body = reqs[1]["json"]
        check(body.get("instructions") == "You are a geography helper.", "the sampling request: %r", body)
        texts = json.dumps(body.get("input"))
        check("What is the capital of France?" in texts, "the sampling request's input: %s", texts)
        check("mcp__h__sample" not in texts and len(body.get("input")) == 1,
              "the session's conversation reached the sampling call: %s", texts)
        check(body.get("max_output_tokens") == 50, "maxTokens not passed: %r", body.get("max_output_tokens"))
        usage = [e for e in t.entries if e["kind"] == "usage" and e["body"].get("mcp_server") == "h"]
        check(len(usage) == 1, "no usage entry for the sampling call: %r",
              [e for e in t.entries if e["kind"] == "usage"])
    finally:
        t.stop()


def test_approved_over_stdio():
    t = Sampling("s_stdio", stdio=True, mcp_sampling=True,
                 turns=[calls(("c_s", "mcp__h__sample", {})), {"text": "Blue."}, {"text": "done"}])
    try:
        check("Name a colour, over stdio." in t.answer()["summary"], "the summary does not show the request")
        ans = t.finish()
        check(ans.get("result", {}).get("content") == {"type": "text", "text": "Blue."}, "the answer: %r", ans)
        check("sampling" in t.capabilities(), "sampling not declared: %r", t.capabilities())
    finally:
        t.stop()


def test_a_slow_approval_does_not_time_the_call_out():
    # The call's timeout_s (2 s) counts the server's time, not the
    # person's: approved after 3.5 s, the answer still reaches the server,
    # whose answer to the call is read.
    t = Sampling("s_slow", stdio=True, mcp_sampling=True, server_conf={"timeout_s": 2},
                 turns=[calls(("c_s", "mcp__h__sample", {})), {"text": "Green."}, {"text": "done"}])
    try:
        ia = pending(t.srv, t.sid, timeout=20)
        time.sleep(3.5)
        resolve(t.srv, ia["interaction_id"], "approve")
        ans = t.finish()
        check(ans.get("result", {}).get("content") == {"type": "text", "text": "Green."}, "the answer: %r", ans)
    finally:
        t.stop()


def test_rejected_is_the_user_rejection_error():
    t = Sampling("s_no", mcp_sampling=True)
    try:
        t.answer("reject")
        ans = t.finish()
        check(ans["error"]["code"] == -1 and "rejected" in ans["error"]["message"], "the answer: %r", ans)
        check(len(t.model_requests()) == 2, "the model was called %d times", len(t.model_requests()))
    finally:
        t.stop()


def test_allowed_by_an_update_between_runs():
    """sessions update --mcp-sampling on: shown by sessions show; the
    server, initialized without the capability, starts again declaring it
    at the next run, whose request is asked and answered."""
    t = Sampling("s_upd", turns=[calls(("c_s", "mcp__h__sample", {})), {"text": "done"},
                                 calls(("c_t", "mcp__h__sample", {})), {"text": ANSWER}, {"text": "done"}])
    try:
        check(t.finish()["error"]["code"] == -32601, "the first run's request was not refused")
        rc, out, err = cli(t.srv, "sessions", "update", t.sid, "--mcp-sampling", "on")
        check(rc == 0, "sessions update failed (%d): %s", rc, err)
        rc, out, err = cli(t.srv, "sessions", "show", t.sid)
        check(rc == 0 and "sampling   on" in out, "sessions show: %s%s", out, err)
        rc, out, err = cli(t.srv, "sessions", "update", t.sid, "--mcp-sampling", "maybe")
        check(rc == 2 and "--mcp-sampling takes on or off" in err, "a bad value: %d %s", rc, err)
        t.run_id = prompt(t.srv, t.sid, "again")
        t.answer()
        ans = t.finish("c_t")
        check(ans.get("result", {}).get("content", {}).get("text") == ANSWER, "the answer: %r", ans)
        caps = t.initializes()
        check(len(caps) == 2 and "sampling" not in caps[0] and "sampling" in caps[1], "initialize: %r", caps)
    finally:
        t.stop()


def with_image(data, mime="image/png", role="user"):
    return {"messages": [{"role": "user", "content": {"type": "text", "text": "What is in this picture?"}},
                         {"role": role, "content": {"type": "image", "data": base64.b64encode(data).decode(),
                                                    "mimeType": mime}}], "maxTokens": 50}


def request_images(body):
    """(mime, bytes) of every input_image of a Responses request body."""
    out = []
    for item in body.get("input", []):
        for part in item.get("content", []) if isinstance(item.get("content"), list) else []:
            if part.get("type") == "input_image":
                url = part["image_url"]
                out.append((url[5:url.index(";")], base64.b64decode(url[url.index(",") + 1:], validate=True)))
    return out


def test_an_image_goes_to_the_model_as_a_persons_do():
    pic = png(8, 8)
    t = Sampling("s_img", with_image(pic), mcp_sampling=True)
    try:
        ia = t.answer()
        check("2 messages, 1 of them image" in ia["summary"] and "[an image: image/png 8x8, %d bytes]" % len(pic)
              in ia["summary"], "the summary: %r", ia["summary"])
        shown = json.loads(ia["arguments"])["messages"][1]
        check(shown == {"role": "user", "image": {"mimeType": "image/png", "width": 8, "height": 8, "bytes": len(pic)}},
              "the arguments show the image as %r", shown)
        ans = t.finish()
        check(ans.get("result", {}).get("content") == {"type": "text", "text": ANSWER}, "the answer: %r", ans)
        body = t.model_requests()[1]["json"]
        check(request_images(body) == [("image/png", pic)], "the model got %r",
              [(m, len(b)) for m, b in request_images(body)])
        check("What is in this picture?" in json.dumps(body["input"]), "the text did not reach the model")
    finally:
        t.stop()


def test_a_large_image_is_sent_downscaled():
    # Over SB_IMAGE_SEND_SIDE, small in bytes (the model's tool call
    # carries it to the server).
    pic = png(3000, 200)
    t = Sampling("s_big", with_image(pic), mcp_sampling=True)
    try:
        check("image/png 3000x200" in t.answer()["summary"], "the summary does not show the image as sent")
        check(t.finish().get("result"), "no result")
        images = request_images(t.model_requests()[1]["json"])
        check(len(images) == 1 and images[0][0] == "image/jpeg" and images[0][1][:2] == b"\xff\xd8"
              and len(images[0][1]) <= 3750 * 1024, "the model got %r", [(m, len(b)) for m, b in images])
        sof = images[0][1].find(b"\xff\xc0")
        h, w = struct.unpack(">HH", images[0][1][sof + 5:sof + 9])
        check(w == 2048 and h < 200, "downscaled to %dx%d", w, h)
        print("  figure: a %d-byte 3000x200 PNG reached the model as a %d-byte %dx%d JPEG"
              % (len(pic), len(images[0][1]), w, h))
    finally:
        t.stop()


def test_a_model_without_images_refuses_and_the_run_goes_on():
    t = Sampling("s_blind", with_image(png(8, 8)), images=False, mcp_sampling=True)
    try:
        t.answer()
        ans = t.finish()
        err = ans.get("error", {})
        check(err.get("code") == -32603 and "does not take images" in err.get("message", ""), "the answer: %r", ans)
        check(len(t.model_requests()) == 2, "the sampling request reached the provider: %d requests",
              len(t.model_requests()))
    finally:
        t.stop()


def test_a_request_out_of_bounds_is_refused_unasked():
    pic = png(4, 4)
    for args, why in (({"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 0},
                       "maxTokens"),
                      ({"messages": [{"role": "user", "content": {"type": "audio", "data": "AAAA",
                                                                  "mimeType": "audio/wav"}}], "maxTokens": 10},
                       "audio content is not supported"),
                      (with_image(b"GIF89a? no, text"), "not a PNG, JPEG, GIF or WebP image"),
                      (with_image(pic, mime="image/jpeg"), "its mimeType says image/jpeg, its bytes are image/png"),
                      (with_image(pic, role="assistant"), "taken from the user only")):
        t = Sampling("s_bad", args, mcp_sampling=True)
        try:
            ans = t.finish()
            check(ans["error"]["code"] == -32602 and why in ans["error"]["message"], "the answer: %r", ans)
            check(not [e for e in t.entries if e["kind"] == "approval.requested"], "a person was asked")
        finally:
            t.stop()


if __name__ == "__main__":
    run_tests(globals())
