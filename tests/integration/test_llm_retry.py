"""The llm actor's resilience, end to end over loopback HTTP: retries
(429 with retry-after, retry-after-ms, two 500s, connection refused), what
is not retried (400, attempts spent), the idle timeout, a request's
deadline, and the codex provider's one token refresh on 401 (the token
file rewritten atomically with mode 0600), a second 401 and a refused
refresh. Timings come from llm_server.py's request log."""

import json
import os
import stat
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Client, check, now_ms, run_tests, tmpdir, wait_for  # noqa: E402
from sbllm import LlmServer, provider, serve_llm, stream, stream_body, texts  # noqa: E402

KEY = {"OPENAI_API_KEY": "sk-retry", "ANTHROPIC_API_KEY": "sk-ant-retry"}


class Env:
    """An llm_server and a serve with the given providers (a function of the
    llm_server, which must exist first to have a port)."""

    def __init__(self, make_providers, env=KEY):
        self.llm = LlmServer()
        self.srv = serve_llm(make_providers(self.llm), env=env)
        self.client = Client(self.srv.endpoint())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.client.close()
        self.srv.stop()
        self.llm.stop()


def statuses(reqs):
    return [r["status"] for r in reqs]


def test_429_retry_after_is_honoured():
    """The first request gets 429 with retry-after: 1; the second comes
    >= 1 s later and the stream succeeds (attempts=2). With retry-after-ms
    too, that one wins."""
    def provs(llm):
        return [provider("ra", "responses", llm.base(gen=5, variant="429", tag="ra"),
                         backoff_base_ms=5000),
                provider("ms", "chat", llm.base(gen=5, variant="429", retry_after_ms=250, tag="ms"),
                         backoff_base_ms=5000)]
    with Env(provs) as e:
        r1 = e.client.send("llm.stream", stream_body("ra"))
        r2 = e.client.send("llm.stream", stream_body("ms"))
        for rid, tag, lo, hi in ((r1, "ra", 0.98, 2.5), (r2, "ms", 0.24, 0.9)):
            final = e.client.wait_reply(rid, 10)
            check(final.type == "llm.stream.ok", "%s: %s %r", tag, final.type, final.body)
            check(final.body.get("attempts") == 2, "%s: attempts %r", tag, final.body)
            check(texts([c.body for c in final.chunks[1:]]) == "tok " * 5, "%s: text", tag)
            reqs = e.llm.requests(tag=tag)
            check(statuses(reqs) == [429, 200], "%s: statuses %r", tag, statuses(reqs))
            gap = reqs[1]["ts"] - reqs[0]["ts"]
            # backoff_base_ms=5000 would wait 2.5..5 s: the header decided
            check(lo <= gap <= hi, "%s: the retry came %.3f s after the 429, want %.2f..%.2f",
                  tag, gap, lo, hi)
            check(reqs[0]["body"] == reqs[1]["body"], "%s: the retry sent another body", tag)


def test_two_500s_then_success():
    def provs(llm):
        return [provider("p", "anthropic", llm.base(gen=7, variant="500x2", tag="a"),
                         backoff_base_ms=20)]
    with Env(provs) as e:
        final, chunks = stream(e.client, stream_body(), timeout=10)
        check(final.type == "llm.stream.ok" and final.body.get("attempts") == 3,
              "final %s %r", final.type, final.body)
        check(texts(chunks) == "tok " * 7, "text %r", texts(chunks))
        check(statuses(e.llm.requests("anthropic", "a")) == [500, 500, 200],
              "statuses %r", statuses(e.llm.requests("anthropic", "a")))


def test_attempts_spent_is_retryable_error():
    """max_attempts=2 against two 500s: an error that says it may be
    retried later, with the HTTP status; only two requests went out."""
    def provs(llm):
        return [provider("p", "responses", llm.base(gen=3, variant="500x2", tag="b"),
                         max_attempts=2, backoff_base_ms=20)]
    with Env(provs) as e:
        final, chunks = stream(e.client, stream_body(), timeout=10)
        b = final.body
        check(final.type == "error" and b.get("retryable") is True, "final %r", b)
        check(b.get("code") == "provider" and b.get("detail", {}).get("http_status") == 500,
              "error %r", b)
        check(chunks == [], "chunks %r", chunks)
        check(statuses(e.llm.requests("responses", "b")) == [500, 500], "statuses %r",
              statuses(e.llm.requests("responses", "b")))


def test_400_and_401_are_not_retried():
    def provs(llm):
        return [provider("bad", "chat", llm.base(gen=3, status=400, tag="c400")),
                provider("auth", "responses", llm.base(gen=3, status=401, tag="c401")),
                provider("ant", "anthropic", llm.base(gen=3, status=403, tag="c403"))]
    with Env(provs) as e:
        for name, tag, code, http in (("bad", "c400", "provider", 400), ("auth", "c401", "auth", 401),
                                      ("ant", "c403", "auth", 403)):
            final, chunks = stream(e.client, stream_body(name))
            b = final.body
            check(final.type == "error" and b.get("code") == code and b.get("retryable") is False,
                  "%s: %r", name, b)
            check(b.get("detail", {}).get("http_status") == http, "%s: detail %r", name, b)
            check(len(e.llm.requests(tag=tag)) == 1, "%s: %d requests", name,
                  len(e.llm.requests(tag=tag)))


def test_connection_refused_is_retried():
    """Nothing listens at the base URL: every attempt fails to connect,
    then a retryable unavailable error."""
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()           # nothing listens there now

    def provs(llm):
        return [provider("gone", "responses", "http://127.0.0.1:%d/v1" % port,
                         max_attempts=3, backoff_base_ms=30)]
    with Env(provs) as e:
        t0 = time.monotonic()
        final, chunks = stream(e.client, stream_body(), timeout=10)
        elapsed = time.monotonic() - t0
        b = final.body
        check(final.type == "error" and b.get("code") == "unavailable" and b.get("retryable") is True,
              "final %r", b)
        # two backoffs of base 30 and 60 ms, each with jitter >= half
        check(elapsed >= 0.04, "gave up after %.3f s: it did not back off", elapsed)
        check("retrying stream" in e.srv.log() and e.srv.log().count("retrying stream") == 2,
              "want two retries logged:\n%s", e.srv.log())


def test_idle_timeout():
    """The provider sends the headers and one event, then nothing: with
    idle_timeout_s=1 the stream fails with timeout after about a second,
    and the connection is closed (the server sees it go)."""
    def provs(llm):
        return [provider("quiet", "responses", llm.base(fixture="responses-text", variant="silent",
                                                        tag="q"),
                         idle_timeout_s=1, max_attempts=1)]
    with Env(provs) as e:
        t0 = time.monotonic()
        final, chunks = stream(e.client, stream_body(), timeout=10)
        elapsed = time.monotonic() - t0
        b = final.body
        check(final.type == "error" and b.get("code") == "timeout", "final %r", b)
        check(b.get("retryable") is True, "an idle timeout may be retried: %r", b)
        check("idle" in b.get("message", ""), "message %r", b.get("message"))
        check(0.9 <= elapsed <= 4.0, "idle timeout after %.2f s, want about 1-2 s", elapsed)
        wait_for(lambda: e.llm.connections() == 0, 5, "the server to see the connection closed")


def test_idle_timeout_retries_when_nothing_was_sent():
    """Silent before any chunk: the timeout is retried (max_attempts=2)."""
    def provs(llm):
        return [provider("quiet", "anthropic", llm.base(fixture="anthropic-thinking-tool",
                                                        variant="silent", tag="q2"),
                         idle_timeout_s=1, max_attempts=2, backoff_base_ms=10)]
    with Env(provs) as e:
        final, _ = stream(e.client, stream_body(), timeout=10)
        check(final.type == "error" and final.body.get("code") == "timeout", "final %r", final.body)
        check(len(e.llm.requests("anthropic", "q2")) == 2, "%d requests",
              len(e.llm.requests("anthropic", "q2")))


def test_deadline_ends_a_stream():
    """A request whose header deadline passes gets timeout, even while the
    provider is still streaming."""
    def provs(llm):
        return [provider("slow", "chat", llm.base(gen=200, delay_ms=20, tag="d"))]
    with Env(provs) as e:
        t0 = time.monotonic()
        final, chunks = stream(e.client, stream_body(), timeout=10, deadline=now_ms() + 600)
        elapsed = time.monotonic() - t0
        check(final.type == "error" and final.body.get("code") == "timeout", "final %r", final.body)
        check(0.5 <= elapsed <= 1.5, "deadline of 600 ms fired after %.2f s", elapsed)
        check(0 < len(chunks) < 200, "%d chunks before the deadline", len(chunks))
        wait_for(lambda: e.llm.connections() == 0, 5, "the server to see the connection closed")


# ---------------------------------------------------------------------------
# codex: one token refresh on 401

def write_token_file(path, access="at-stale", refresh="rt-0", account="acct-42"):
    doc = {"auth_mode": "chatgpt", "tokens": {"access_token": access, "refresh_token": refresh,
                                              "account_id": account, "id_token": "x.y.z"},
           "last_refresh": "2025-01-01T00:00:00Z"}
    with open(path, "w") as f:
        json.dump(doc, f)
    os.chmod(path, 0o600)


def codex_env(llm_params, token_params=()):
    d = tmpdir()
    token_file = os.path.join(d, "auth.json")
    write_token_file(token_file)

    def provs(llm):
        return [provider("cx", "codex", llm.base(**llm_params), model="gpt-5-codex",
                         token_file=token_file,
                         token_url=llm.url("/%soauth/token" % "".join(s + "/" for s in token_params)),
                         client_id="app_test", backoff_base_ms=10)]
    return Env(provs, env={}), token_file


def test_codex_refreshes_once_on_401():
    e, token_file = codex_env({"gen": 4, "variant": "401", "tag": "cx1"})
    with e:
        ino = os.stat(token_file).st_ino
        final, chunks = stream(e.client, stream_body(), timeout=10)
        check(final.type == "llm.stream.ok", "final %s %r", final.type, final.body)
        check(texts(chunks) == "tok " * 4, "text %r", texts(chunks))
        reqs = e.llm.requests()
        kinds = [(r["endpoint"], r["status"]) for r in reqs]
        check(kinds == [("responses", 401), ("token", 200), ("responses", 200)],
              "requests %r", kinds)
        first, refresh, second = reqs
        check(first["headers"].get("authorization") == "Bearer at-stale", "first auth %r",
              first["headers"].get("authorization"))
        check(first["headers"].get("chatgpt-account-id") == "acct-42", "account header %r",
              first["headers"])
        check(refresh["method"] == "POST", "refresh %r", refresh)
        sent = refresh["json"] or {}
        check(sent.get("grant_type") == "refresh_token" and sent.get("refresh_token") == "rt-0"
              and sent.get("client_id") == "app_test", "refresh body %r", refresh["body"])
        # the file now holds what the token endpoint issued, written by rename
        st = os.stat(token_file)
        check(stat.S_IMODE(st.st_mode) == 0o600, "token file mode %o", stat.S_IMODE(st.st_mode))
        check(st.st_ino != ino, "the token file was rewritten in place, not replaced atomically")
        with open(token_file) as f:
            doc = json.load(f)
        tokens = doc.get("tokens", {})
        check(tokens.get("access_token", "").startswith("at-1-") and tokens.get("refresh_token") == "rt-1",
              "token file after refresh %r", doc)
        check(tokens.get("account_id") == "acct-42" and doc.get("auth_mode") == "chatgpt",
              "the refresh lost other fields: %r", doc)
        check(second["headers"].get("authorization") == "Bearer " + tokens["access_token"],
              "retry used %r", second["headers"].get("authorization"))
        leftovers = [n for n in os.listdir(os.path.dirname(token_file)) if n != "auth.json"]
        check(not leftovers, "temp files left beside the token file: %r", leftovers)
        # the next stream reads the new token and needs no refresh
        final, _ = stream(e.client, stream_body(), timeout=10)
        check(final.type == "llm.stream.ok", "second stream %r", final.body)
        check([r["endpoint"] for r in e.llm.requests()][3:] == ["responses"],
              "second stream requests %r", [r["endpoint"] for r in e.llm.requests()])
        for secret in (tokens["access_token"], "at-stale", "rt-0", "rt-1"):
            check(secret not in e.srv.log(), "the serve log holds a token: %s", secret)


def test_codex_second_401_is_an_auth_error():
    e, token_file = codex_env({"gen": 4, "variant": "401always", "tag": "cx2"})
    with e:
        final, chunks = stream(e.client, stream_body(), timeout=10)
        b = final.body
        check(final.type == "error" and b.get("code") == "auth" and b.get("retryable") is False,
              "final %r", b)
        check(b.get("detail", {}).get("http_status") == 401, "detail %r", b)
        check(chunks == [], "chunks %r", chunks)
        kinds = [(r["endpoint"], r["status"]) for r in e.llm.requests()]
        check(kinds == [("responses", 401), ("token", 200), ("responses", 401)],
              "one refresh, then give up: %r", kinds)


def test_codex_refused_refresh():
    e, token_file = codex_env({"gen": 4, "variant": "401", "tag": "cx3"}, token_params=["refresh=fail"])
    with e:
        before = open(token_file).read()
        final, _ = stream(e.client, stream_body(), timeout=10)
        b = final.body
        check(final.type == "error" and b.get("code") == "auth" and b.get("retryable") is False,
              "final %r", b)
        check("sign in" in b.get("message", "") or "refresh" in b.get("message", ""),
              "the message should say the refresh failed: %r", b.get("message"))
        check(open(token_file).read() == before, "a refused refresh changed the token file")
        kinds = [(r["endpoint"], r["status"]) for r in e.llm.requests()]
        check(kinds == [("responses", 401), ("token", 400)], "requests %r", kinds)


if __name__ == "__main__":
    run_tests(globals())
