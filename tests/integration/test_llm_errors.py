"""What a person reads when a model call fails, and what serve says at start.

Every error a stream ends with names the provider, its URL and the model,
so that a run's failure reason tells several providers apart: an HTTP
error (401 from responses, 400 from anthropic), an unreachable server,
a URL with credentials in it (left out, as the key is), and a run that
fails on a 401. The key's value never appears.

At start, serve warns once for each provider that needs a key and has
none, naming the variable to set; with the key set it says nothing, and
the key's value is never logged."""

import os
import socket
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Client, Server, check, run_tests, wait_for  # noqa: E402
from sbllm import LlmServer, provider, serve_llm, stream, stream_body  # noqa: E402

WRONG = "sk-wrong-KEY-0451"
# serve's environment adds to the test's: an empty variable is no key
NO_KEYS = {"OPENAI_API_KEY": "", "ANTHROPIC_API_KEY": "", "SWITCHBOARD_LLM_KEY": "",
           "SWITCHBOARD_LLM_KEY_FILE": ""}


def origin(name, url, model):
    return 'provider "%s" (%s, model %s): ' % (name, url, model)


def error_of(client, body):
    final, _ = stream(client, body, timeout=15)
    check(final.type == "error", "want an error, got %s %r", final.type, final.body)
    return final.body


def test_http_error_names_provider_url_and_model():
    llm = LlmServer()
    resp_url = llm.base(key="sk-right", tag="e1")
    ant_url = llm.base(status=400, tag="e2")
    srv = serve_llm([provider("resp", "responses", resp_url, model="gpt-test", key_env="RESP_KEY"),
                     provider("ant", "anthropic", ant_url, model="claude-test", key_env="ANT_KEY",
                              max_attempts=1)],
                    env={"RESP_KEY": WRONG, "ANT_KEY": WRONG})
    c = Client(srv.endpoint())
    b = error_of(c, stream_body("resp"))
    want = origin("resp", resp_url, "gpt-test") + "HTTP 401"
    check(b.get("code") == "auth", "code %r", b)
    check(b["message"].startswith(want), "message %r, want it to start with %r", b["message"], want)
    b = error_of(c, stream_body("ant", model="claude-other"))
    want = origin("ant", ant_url, "claude-other") + "HTTP 400"
    check(b.get("code") == "provider", "code %r", b)
    check(b["message"].startswith(want), "message %r, want it to start with %r", b["message"], want)
    c.close()
    srv.stop()
    check(WRONG not in srv.log(), "the key is in serve's log")


def test_unreachable_provider_is_named():
    # a port nobody listens on: bind one, note it, close it
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    url = "http://127.0.0.1:%d/v1" % port
    srv = serve_llm([provider("down", "chat", url, max_attempts=1)])
    c = Client(srv.endpoint())
    b = error_of(c, stream_body("down"))
    want = origin("down", url, "m-test") + "cannot reach the provider"
    check(b.get("code") == "unavailable", "code %r", b)
    check(b["message"].startswith(want), "message %r, want it to start with %r", b["message"], want)
    c.close()


def test_credentials_in_the_url_are_left_out():
    llm = LlmServer()
    base = llm.base(status=500, tag="e3")
    with_creds = base.replace("http://", "http://user:pw-SECRET-77@")
    srv = serve_llm([provider("creds", "chat", with_creds, max_attempts=1)])
    c = Client(srv.endpoint())
    b = error_of(c, stream_body("creds"))
    check(b["message"].startswith(origin("creds", base, "m-test") + "HTTP 500"),
          "message %r", b["message"])
    check("pw-SECRET-77" not in repr(b), "the URL's password is in the error %r", b)
    c.close()


def test_run_failure_reason_names_provider_url_and_model():
    """What the person sees: the failed run's reason, through exec."""
    from sbagent import LLM, llm_server, new_session, prompt, wait_run
    llm = LLM()
    llm.script("refused", [{"status": 401}])
    srv = llm_server(llm, "refused")
    rid = prompt(srv, new_session(srv, srv.data), "hello")
    run = wait_run(srv, rid)
    want = origin("responses", llm.url("refused"), "m") + "HTTP 401"
    check(run["status"] == "failed", "run %r", run)
    check(want in run.get("reason", ""), "reason %r, want it to hold %r", run.get("reason"), want)
    check("sk-test" not in run.get("reason", ""), "the key is in the reason")


# ---------------------------------------------------------------------------
# serve's warnings at start

def serve_log(env, *args):
    """Starts serve with the llm actor and the given flags, waits for the
    llm instance, stops it, and returns its log."""
    srv = Server(args=["--actors", "broker,llm"] + list(args), env=dict(NO_KEYS, **env))
    srv.start()
    wait_for(lambda: srv.instances("llm"), 10, "the llm instance")
    srv.stop()
    return srv.log()


def warnings(log, word):
    return [l for l in log.splitlines() if " warn " in l and word in l]


def test_serve_warns_when_a_key_is_missing():
    log = serve_log({}, "--llm", "responses", "--model", "m")
    w = warnings(log, "OPENAI_API_KEY")
    check(len(w) == 1, "want one warning naming OPENAI_API_KEY, got %r in:\n%s", w, log)
    check('provider "responses"' in w[0], "the warning does not name the provider: %r", w[0])


def test_serve_is_quiet_when_the_key_is_set():
    key = "sk-set-KEY-9182"
    log = serve_log({"OPENAI_API_KEY": key}, "--llm", "responses", "--model", "m")
    check(not warnings(log, "KEY"), "a key warning with the key set:\n%s", log)
    check(key not in log, "the key's value is in serve's log")


def test_serve_warns_for_each_provider_of_a_file():
    llm = LlmServer()
    srv = serve_llm([provider("cloud", "anthropic", "https://api.anthropic.com/v1"),
                     provider("named", "responses", "https://example.invalid/v1", key_env="MY_KEY"),
                     provider("local", "chat", llm.base(gen=1)),
                     provider("set", "responses", "https://example.invalid/v1", key_env="SET_KEY")],
                    env=dict(NO_KEYS, SET_KEY="sk-file-KEY-5"))
    srv.stop()
    log = srv.log()
    check(len(warnings(log, "ANTHROPIC_API_KEY")) == 1, "no warning for cloud:\n%s", log)
    check(len(warnings(log, "MY_KEY")) == 1, "no warning naming key_env MY_KEY:\n%s", log)
    check(not warnings(log, '"local"'), "a loopback provider needs no key:\n%s", log)
    check(not warnings(log, '"set"'), "a warning for a provider whose key is set:\n%s", log)
    check("sk-file-KEY-5" not in log, "the key's value is in serve's log")


if __name__ == "__main__":
    run_tests(globals())
