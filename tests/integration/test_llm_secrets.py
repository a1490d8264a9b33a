"""Provider keys stay inside the llm actor (docs/llm.md): they go into
HTTP headers and nowhere else.

The actor runs with distinctive fake keys (from the environment and from a
0600 key file) against llm_server.py, through successful streams, HTTP 401
replies (status=401, and key= refusing our key), llm.models and its
fallback, and in-stream errors whose provider message echoes the key (as
OpenAI does: "Incorrect API key provided: sk-..."). `switchboard tap
--json` records the bus meanwhile. Then no key appears in any chunk or
reply, in the tap's output, in serve's log or in llm_server's stderr —
while llm_server's request log, which records the headers a provider
receives, holds each key (so the search would find one)."""

import os
import shutil
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import SB_BIN, Client, Proc, check, run_tests, tmpdir, wait_for  # noqa: E402
from sbllm import FIXTURES, LlmServer, provider, serve_llm, stream, stream_body  # noqa: E402

OPENAI = "sk-test-SECRET-123"
ANTHROPIC = "sk-ant-SECRET-456"
FILEKEY = "sk-file-SECRET-789"
# a key of no known shape (a local server's): only the actor knows it is one
PLAIN = "LOCAL4242SECRETWORD"
SECRETS = (OPENAI, ANTHROPIC, FILEKEY, PLAIN, "SECRET")


def leak_fixtures(d):
    """The fixtures of tests/fixtures/llm plus streams whose error event echoes a key."""
    for n in os.listdir(FIXTURES):
        if n.endswith(".sse"):
            shutil.copy(os.path.join(FIXTURES, n), d)

    def write(name, text):
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    write("leak-responses.sse",
          'event: response.created\ndata: {"type":"response.created","response":{"id":"r1"}}\n\n'
          'event: error\ndata: {"type":"error","error":{"type":"invalid_request_error",'
          '"code":"invalid_api_key","message":"Incorrect API key provided: %s. You can find '
          'your API key at https://platform.openai.com/account/api-keys."}}\n\n' % OPENAI)
    write("leak-anthropic.sse",
          'event: message_start\ndata: {"type":"message_start","message":{"id":"m1","usage":'
          '{"input_tokens":1,"output_tokens":1}}}\n\n'
          'event: error\ndata: {"type":"error","error":{"type":"authentication_error",'
          '"message":"invalid x-api-key: %s"}}\n\n' % ANTHROPIC)
    for name, key in (("leak-chat.sse", FILEKEY), ("leak-plain.sse", PLAIN)):
        write(name, 'data: {"error":{"message":"The key %s is not valid here","type":'
                    '"invalid_request_error","code":"invalid_api_key"}}\n\n' % key)


class Scene:
    def __init__(self):
        d = tmpdir()
        fx = os.path.join(d, "fixtures")
        os.mkdir(fx)
        leak_fixtures(fx)
        self.llm = LlmServer(fixtures=fx, verbose=True)
        key_file = os.path.join(d, "chat.key")
        with open(key_file, "w") as f:
            f.write(FILEKEY + "\n")
        os.chmod(key_file, 0o600)
        b = self.llm.base
        provs = [
            provider("oa", "responses", b(fixture="responses-text", tag="oa")),
            provider("oa401", "responses", b(gen=2, status=401, tag="oa401")),
            provider("oakey", "responses", b(gen=2, key="not-our-key", tag="oakey"),
                     models=["conf-a"]),
            provider("oaleak", "responses", b(fixture="leak-responses", tag="oaleak")),
            provider("ant", "anthropic", b(fixture="anthropic-thinking-tool", tag="ant")),
            provider("ant401", "anthropic", b(gen=2, status=401, tag="ant401")),
            provider("antleak", "anthropic", b(fixture="leak-anthropic", tag="antleak")),
            provider("chat", "chat", b(fixture="chat-tools", tag="chat"), key_file=key_file),
            provider("chatleak", "chat", b(fixture="leak-chat", tag="chatleak"), key_file=key_file),
            provider("plain", "chat", b(gen=2, tag="plain"), key_env="PLAIN_KEY"),
            provider("plainleak", "chat", b(fixture="leak-plain", tag="plainleak"), key_env="PLAIN_KEY"),
        ]
        self.srv = serve_llm(provs, env={"OPENAI_API_KEY": OPENAI, "ANTHROPIC_API_KEY": ANTHROPIC,
                                         "PLAIN_KEY": PLAIN})
        self.client = Client(self.srv.endpoint())
        self.tap_out = os.path.join(d, "tap.jsonl")
        self.tap = Proc([SB_BIN, "tap", "--json", "--data", self.srv.data], self.tap_out)
        self.replies = []       # every message the client received

    def tap_text(self):
        with open(self.tap_out, encoding="utf-8", errors="replace") as f:
            return f.read()

    def mark(self, word):
        """A request the tap will show; returns once it has shown it, so
        everything the broker saw before is in the tap's output."""
        def seen():
            m = self.client.request("llm.models", {"provider": "marker-" + word}, timeout=5)
            self.replies.append(m)
            return ("marker-" + word) in self.tap_text()
        wait_for(seen, 10, "the tap to show marker-%s" % word, interval=0.05)

    def stream(self, name):
        final, chunks = stream(self.client, stream_body(name), timeout=10)
        self.replies.append(final)
        self.replies.extend(final.chunks)
        return final, chunks

    def close(self):
        self.client.close()
        self.tap.kill()
        self.srv.stop()
        self.llm.stop()


def no_secret(where, text):
    for s in SECRETS:
        check(s not in text, "%s holds %r:\n%s", where, s, excerpt(text, s))


def excerpt(text, s):
    i = text.find(s)
    return text[max(0, i - 200):i + 100]


def test_keys_stay_in_the_actor():
    sc = Scene()
    try:
        sc.mark("start")
        expect = {
            "oa": ("llm.stream.ok", None), "ant": ("llm.stream.ok", None),
            "chat": ("llm.stream.ok", None), "plain": ("llm.stream.ok", None),
            "oa401": ("error", "auth"), "ant401": ("error", "auth"), "oakey": ("error", "auth"),
            "oaleak": ("error", None), "antleak": ("error", None), "chatleak": ("error", None),
        }
        for name, (type, code) in expect.items():
            final, _ = sc.stream(name)
            check(final.type == type, "%s: %s %r", name, final.type, final.body)
            if code:
                check(final.body.get("code") == code, "%s: %r", name, final.body)
        for name in ("oa", "ant", "oakey"):
            m = sc.client.request("llm.models", {"provider": name}, timeout=10)
            check(m.type == "llm.models.ok", "models %s: %r", name, m.body)
            sc.replies.append(m)
        sc.mark("end")

        # the provider got the keys, and the error events carried them
        log = sc.llm.log_text()
        for s in (OPENAI, ANTHROPIC, FILEKEY, PLAIN):
            check(s in log, "llm_server never received %s: the test proves nothing", s)
        tap = sc.tap_text()
        check("The repository" in tap and "Running the tests now." in tap,
              "the tap did not record the streams")
        # the echoed messages reached the requester, cleaned
        leak = [m for m in sc.replies if m.type == "error" and "Incorrect API key" in m.body.get("message", "")]
        check(leak, "the provider's own message was not passed on: %r",
              [m.body for m in sc.replies if m.type == "error"])

        for m in sc.replies:
            no_secret("a %s reply" % m.type, repr(m.header) + repr(m.body))
        no_secret("the tap's output", tap)
        no_secret("serve's log", sc.srv.log())
        no_secret("llm_server's stderr", sc.llm.stderr())
    finally:
        sc.close()


def test_a_key_of_no_known_shape_is_not_echoed():
    """The actor knows its keys: an echoed key is withheld even when it
    looks like no known key format."""
    sc = Scene()
    try:
        final, _ = sc.stream("plainleak")
        check(final.type == "error", "plainleak: %s %r", final.type, final.body)
        check("is not valid here" in final.body.get("message", ""), "message %r", final.body)
        check(PLAIN in sc.llm.log_text(), "the key was not sent")
        no_secret("the error reply", repr(final.body))
        no_secret("serve's log", sc.srv.log())
    finally:
        sc.close()


if __name__ == "__main__":
    run_tests(globals())
