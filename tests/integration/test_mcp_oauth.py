#!/usr/bin/python3
"""OAuth for HTTP MCP servers, through serve (docs/mcp.md, "Authorization"):
`switchboard mcp login` with the person's browser (here: urllib, which
follows the authorization server's redirect to the gateway's
/oauth/callback), against tests/mcp/oauth_server.py (an authorization
server and a protected MCP server on loopback). What the conformance
suite does not cover: tokens that expire and are refreshed during a
session, a revoked token, a step-up in the middle of a session, and
tokens that reach no log, tape, tap or file of the data folder.
"""
import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import ROOT, SB_BIN, Proc, Server, check, cli, read_jsonl, run_tests, sb, tmpdir, wait_for  # noqa: E402
from sbagent import LLM, LLM_ENV, TapCli, calls, llm_args, new_session, prompt, results, tape, wait_run  # noqa: E402

OAUTH_MCP = os.path.join(ROOT, "tests", "mcp", "oauth_server.py")


class OAuthMcp:
    """tests/mcp/oauth_server.py on an ephemeral loopback port."""

    def __init__(self, ttl=3600, revocation=True):
        d = tmpdir()
        self.portfile, self.logfile = os.path.join(d, "port"), os.path.join(d, "oauth.jsonl")
        self.proc = Proc(["/usr/bin/python3", OAUTH_MCP, "--portfile", self.portfile, "--log", self.logfile,
                          "--ttl", str(ttl)] + ([] if revocation else ["--no-revocation"]),
                         os.path.join(d, "oauth.log"))
        wait_for(lambda: os.path.exists(self.portfile), 10, "the OAuth MCP server to listen")
        with open(self.portfile) as f:
            self.base = "http://127.0.0.1:%s" % f.read().strip()
        self.url = self.base + "/mcp"

    def log(self):
        return read_jsonl(self.logfile) if os.path.exists(self.logfile) else []

    def admin(self, what):
        urllib.request.urlopen(urllib.request.Request(self.base + "/admin/" + what, data=b"{}"), timeout=5).read()

    def tokens(self):
        return [t for rec in self.log() for t in rec.get("issued", [])]

    def stop(self):
        self.proc.stop()


@contextlib.contextmanager
def oauth_serve(name, runs, ttl=3600, revocation=True):
    """serve with the OAuth MCP server as `o`, a session, and a model that
    plays one whoami call per run (`runs` of them). Yields (srv, sid, mcp)."""
    mcp, llm = OAuthMcp(ttl, revocation), LLM()
    steps = []
    for k in range(runs):
        steps += [calls(("c%d" % k, "mcp__o__whoami", {})), {"text": "done %d" % k}]
    llm.script(name, steps)
    cfg = os.path.join(tmpdir(), "mcp.json")
    with open(cfg, "w") as f:
        json.dump({"mcpServers": {"o": {"url": mcp.url}}}, f)
    srv = None
    try:
        srv = Server(args=llm_args(llm, name) + ["--mcp-config", cfg], env=LLM_ENV).start()
        yield srv, new_session(srv, tmpdir(), approval_policy="yolo"), mcp
    finally:
        if srv:
            srv.stop()
        llm.stop()
        mcp.stop()


def run_call(srv, sid, k):
    """Run k of the session (its whoami call): the call's result."""
    r = wait_run(srv, prompt(srv, sid, "run %d" % k), timeout=40)
    check(r["status"] == "completed", "run %d ended %s: %s", k, r["status"], r.get("reason"))
    return results(tape(srv, sid))["c%d" % k]


def login(srv, mcp):
    """`mcp login o`, with urllib as the person's browser: opens the URL it
    prints, follows the redirect to the gateway's /oauth/callback. Returns
    (what the callback answered, what mcp login printed)."""
    p = subprocess.Popen([SB_BIN, "mcp", "login", "o", "--data", srv.data, "--wait", "20"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = []
    try:
        for line in p.stdout:
            out.append(line)
            if line.startswith("  http"):
                break
        url = out[-1].strip() if out else ""
        check(url.startswith(mcp.base + "/authorize?"), "mcp login printed no authorization URL: %r %s", out,
              p.stderr.read() if p.poll() is not None else "")
        with urllib.request.urlopen(url, timeout=15) as resp:
            answer = resp.read().decode()
        # The rest through the same file object: communicate() reads the
        # pipe itself and would lose what the line loop already buffered
        # (the "waiting for the approval" line, printed just after the URL).
        rest = p.stdout.read()
        err = p.stderr.read()
        p.wait(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    printed = "".join(out) + rest
    check(p.returncode == 0 and "o is authorized" in printed, "mcp login exited %s:\n%s%s", p.returncode,
          printed, err)
    return answer, printed


def callback(srv, query):
    """GET /oauth/callback QUERY on the gateway, without its token, as a
    browser lands there: (status, headers, the page)."""
    with open(os.path.join(srv.data, "http.port")) as f:
        url = "http://127.0.0.1:%s/oauth/callback%s" % (f.read().strip(), query)
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.headers, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def last_state(mcp):
    return [x["authorize"]["state"] for x in mcp.log() if "authorize" in x][-1]


def test_mcp_login_connects_a_server_and_tokens_are_refreshed_before_they_expire():
    with oauth_serve("refresh", 3, ttl=2) as (srv, sid, mcp):
        before = run_call(srv, sid, 0)
        check(not before["ok"] and "run switchboard mcp login o" in before["output"],
              "before the login the call says what to do: %r", before)
        answer, printed = login(srv, mcp)
        check("<p>connected o: you can close this tab.</p>" in answer, "the callback answered %r", answer)
        check("waiting for the approval" in printed, "mcp login shows its progress:\n%s", printed)
        # The callback's state is used once; parameters the authorization
        # server adds are dropped, not refused.
        code, _, page = callback(srv, "?state=%s&code=again&session_state=x" % last_state(mcp))
        check(code == 404 and "no login is waiting for this state" in page, "a used state: %d %r", code, page)
        rc, lst, err = cli(srv, "mcp", "list")
        check(rc == 0 and "authorized (OAuth tokens stored)" in lst, "mcp list:\n%s%s", lst, err)
        first = run_call(srv, sid, 1)
        check(first["ok"] and first["output"].endswith(" ok"), "the call after the login: %r", first)
        time.sleep(2.5)         # the access token (2 s) has expired
        second = run_call(srv, sid, 2)
        check(second["ok"], "the call after the token expired: %r", second)
        log = mcp.log()
        grants = [x["token"] for x in log if "token" in x]
        check(grants[0] == "authorization_code" and "refresh_token" in grants,
              "the token requests: %r", grants)
        check(all(x.get("resource") == mcp.url for x in log if "token" in x),
              "every token request names the resource: %r", [x for x in log if "token" in x])
        expired = [x for x in log if x.get("refused") == 401 and x.get("expired")]
        check(not expired, "an expired token was sent instead of refreshed first: %r", expired)
        regs = [x for x in log if "registered" in x]
        check(len(regs) == 1 and "refresh_token" in regs[0]["grant_types"], "registrations: %r", regs)
        print("  figure: %d token requests (%s) for 2 calls over %d s" % (len(grants), ", ".join(grants), 3))


def test_sessions_sharing_a_server_take_the_token_another_one_refreshed():
    # Each session has its copy of the server; refresh tokens rotate, so
    # the second session must take what the first saved, not spend its own.
    # A lifetime of 6 s refreshes in its last 1.5 s: the first calls come
    # well before that, the third in it, and the fourth within 4.5 s of the
    # refresh, even on a loaded machine (with 2 s, a slow fourth call
    # rightly refreshed a second time).
    with oauth_serve("shared", 4, ttl=6) as (srv, sid, mcp):
        other = new_session(srv, tmpdir(), approval_policy="yolo")
        login(srv, mcp)
        check(run_call(srv, sid, 0)["ok"] and run_call(srv, other, 1)["ok"], "the first calls failed")
        time.sleep(5.0)
        check(run_call(srv, sid, 2)["ok"], "the first session's call after expiry failed")
        check(run_call(srv, other, 3)["ok"], "the second session's call after the first one refreshed failed")
        log = mcp.log()
        check(not any(x.get("refused_refresh") for x in log), "a spent refresh token was sent: %r", log[-6:])
        check([x["token"] for x in log if "token" in x] == ["authorization_code", "refresh_token"],
              "token requests: %r", [x for x in log if "token" in x])


def logged_in_then(srv, sid, mcp, what):
    """mcp login, a first call that passes, then the server's `what`."""
    login(srv, mcp)
    check(run_call(srv, sid, 0)["ok"], "the first call failed")
    mcp.admin(what)


def test_a_revoked_token_fails_the_call_until_the_person_logs_in_again():
    with oauth_serve("revoke", 3) as (srv, sid, mcp):
        logged_in_then(srv, sid, mcp, "revoke")
        revoked = run_call(srv, sid, 1)
        check(not revoked["ok"] and "needs authorization: run switchboard mcp login o" in revoked["output"]
              and "went away" not in revoked["output"], "the call with a revoked token: %r", revoked)
        log = mcp.log()
        after = log[[i for i, x in enumerate(log) if x.get("revoked")][0]:]
        check(any(x.get("token") == "refresh_token" for x in after), "no refresh was tried: %r", after)
        login(srv, mcp)
        again = run_call(srv, sid, 2)
        check(again["ok"], "the call after logging in again: %r", again)


def test_a_step_up_in_the_middle_of_a_session_asks_for_the_wider_scope():
    with oauth_serve("stepup", 3) as (srv, sid, mcp):
        logged_in_then(srv, sid, mcp, "step-up")
        refused = run_call(srv, sid, 1)
        check(not refused["ok"] and "more scope (mcp:read mcp:write)" in refused["output"]
              and "mcp login o" in refused["output"], "the call the server wants more scope for: %r", refused)
        login(srv, mcp)
        scopes = [x["authorize"].get("scope", "") for x in mcp.log() if "authorize" in x]
        check(len(scopes) == 2 and "mcp:write" not in scopes[0] and
              {"mcp:read", "mcp:write"} <= set(scopes[1].split()), "the scopes asked for: %r", scopes)
        again = run_call(srv, sid, 2)
        check(again["ok"], "the call after the step-up: %r", again)
        print("  figure: scopes asked for: %s" % " | ".join(scopes))


def start_login(srv, mcp):
    """`mcp login o --no-wait`: the state of the login it left waiting."""
    rc, out, err = cli(srv, "mcp", "login", "o", "--no-wait")
    url = [line.strip() for line in out.splitlines() if line.startswith("  http")]
    check(rc == 0 and url, "mcp login --no-wait: %d %r %r", rc, out, err)
    return urllib.parse.parse_qs(urllib.parse.urlparse(url[0]).query)["state"][0]


def page_headers_ok(headers):
    check(headers["Content-Type"] == "text/html; charset=utf-8", "Content-Type: %r", headers["Content-Type"])
    csp = headers["Content-Security-Policy"]
    check(csp.startswith("default-src 'none'") and "script-src" not in csp and "unsafe" not in csp,
          "Content-Security-Policy: %r", csp)
    check(headers["X-Content-Type-Options"] == "nosniff" and headers["Cache-Control"] == "no-store",
          "the headers: %r", dict(headers))


def test_the_oauth_callback_answers_a_page_with_every_value_escaped():
    with oauth_serve("page", 0) as (srv, sid, mcp):
        # A refusal by the authorization server, its description hostile.
        state = start_login(srv, mcp)
        hostile = "<script>alert(1)</script>\"'&"
        code, headers, page = callback(srv, "?" + urllib.parse.urlencode(
            {"state": state, "error": "access_denied<img src=x>", "error_description": hostile}))
        check(code >= 400, "a refused authorization: HTTP %d %r", code, page)
        page_headers_ok(headers)
        check("<script" not in page and "<img" not in page, "markup from the query reached the page: %r", page)
        check("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;" in page
              and "access_denied&lt;img src=x&gt;" in page and "was not connected" in page,
              "the page says what the authorization server said, escaped: %r", page)
        # A state no login waits for (that one was used by the refusal).
        code, headers, page = callback(srv, "?state=%s&code=c" % state)
        check(code == 404 and "no login is waiting for this state" in page, "a used state: %d %r", code, page)
        page_headers_ok(headers)
        # A query the schema refuses is a page too.
        code, headers, page = callback(srv, "?code=c")
        check(code == 400 and page.startswith("<!doctype html>") and "state" in page, "no state: %d %r", code, page)
        page_headers_ok(headers)
        # The approval.
        answer, _ = login(srv, mcp)
        check("<title>Connected o - switchboard</title>" in answer, "the page of an approval: %r", answer)


def needs_login(result):
    return not result["ok"] and "needs authorization: run switchboard mcp login o" in result["output"]


def test_mcp_logout_revokes_the_tokens_and_the_next_call_needs_login_again():
    with oauth_serve("logout", 3) as (srv, sid, mcp):
        login(srv, mcp)
        check(run_call(srv, sid, 0)["ok"], "the first call failed")
        rc, out, err = cli(srv, "mcp", "logout", "o")
        check(rc == 0 and out.startswith("o is logged out (the refresh and access tokens were revoked at %s/revoke)"
                                         % mcp.base), "mcp logout exited %d:\n%s%s", rc, out, err)
        revokes = [x for x in mcp.log() if "revoke" in x]
        check([(x["revoke"], x["known"], x["client"]) for x in revokes]
              == [("refresh_token", True, True), ("access_token", True, True)],
              "the revocation endpoint saw %r", revokes)
        check(not os.path.exists(os.path.join(srv.data, "mcp-oauth", "o")), "the stored tokens are still there")
        rc, lst, err = cli(srv, "mcp", "list")
        check(rc == 0 and "authorized" not in lst, "mcp list after the logout:\n%s%s", lst, err)
        # The session's copy of the server, which held the token, asks for
        # a login too; no refresh is tried with what was revoked.
        mark = len(mcp.log())
        refused = run_call(srv, sid, 1)
        check(needs_login(refused), "the call after the logout: %r", refused)
        check(not any("token" in x for x in mcp.log()[mark:]), "a token request after the logout: %r",
              mcp.log()[mark:])
        rc, out, err = cli(srv, "mcp", "logout", "o")
        check(rc == 1 and not out and err.strip().count("\n") == 0 and "o is not logged in" in err,
              "a second logout: %d %r %r", rc, out, err)
        rc, out, err = cli(srv, "mcp", "logout", "nosuch")
        check(rc == 1 and "no MCP server is named nosuch" in err, "an unknown server: %d %r %r", rc, out, err)
        # The registered client went with the tokens: the next login
        # registers again.
        login(srv, mcp)
        check(run_call(srv, sid, 2)["ok"], "the call after logging in again failed")
        check(len([x for x in mcp.log() if "registered" in x]) == 2, "registrations: %r",
              [x for x in mcp.log() if "registered" in x])


def test_mcp_logout_without_a_revocation_endpoint_says_so_and_forgets_the_tokens():
    with oauth_serve("norevoke", 2, revocation=False) as (srv, sid, mcp):
        login(srv, mcp)
        check(run_call(srv, sid, 0)["ok"], "the first call failed")
        rc, out, err = cli(srv, "mcp", "logout", "o")
        check(rc == 0 and ("o is logged out (not revoked: %s has no revocation endpoint)" % mcp.base) in out,
              "mcp logout exited %d:\n%s%s", rc, out, err)
        # The token still works at the server: only forgetting it here
        # makes the next call ask for a login.
        refused = run_call(srv, sid, 1)
        check(needs_login(refused), "the call after the logout: %r", refused)


def test_mcp_logout_usage():
    rc, out, err = sb("mcp", "logout", "--help")
    check(rc == 0 and out.startswith("usage: switchboard mcp logout SERVER") and "revocation" in out,
          "mcp logout --help: %d %r", rc, out)
    rc, out, err = sb("mcp", "logout")
    check(rc == 2 and "one SERVER" in err, "mcp logout without SERVER: %d %r", rc, err)
    rc, out, err = sb("mcp", "logout", "o", "--session", "s1")
    check(rc == 2 and "shared by every session" in err, "mcp logout --session: %d %r", rc, err)


def test_tokens_reach_no_log_tape_tap_or_file_of_the_data_folder():
    mcp, llm = OAuthMcp(), LLM()
    llm.script("leak", [calls(("c0", "mcp__o__whoami", {}), ("c1", "mcp__o__leak", {})), {"text": "done"}])
    cfg = os.path.join(tmpdir(), "mcp.json")
    with open(cfg, "w") as f:
        json.dump({"mcpServers": {"o": {"url": mcp.url}}}, f)
    srv = tap = None
    try:
        srv = Server(args=llm_args(llm, "leak") + ["--mcp-config", cfg], env=LLM_ENV).start()
        tap = TapCli(srv)
        sid = new_session(srv, tmpdir(), approval_policy="yolo")
        login(srv, mcp)
        r = wait_run(srv, prompt(srv, sid, "go"), timeout=40)
        check(r["status"] == "completed", "the run ended %s", r["status"])
        entries = tape(srv, sid)
        res = results(entries)
        check(res["c0"]["ok"] and res["c1"]["output"] == "Bearer ***", "the results: %r", res)
        tap.mark()
        tokens = mcp.tokens()
        check(len(tokens) >= 2, "the authorization server issued %r", tokens)
        places = {"the tape": json.dumps(entries), "the tap": tap.text()}
        for dirpath, dirs, files in os.walk(srv.data):
            for name in files:
                path = os.path.join(dirpath, name)
                if os.path.isfile(path):
                    with open(path, "rb") as f:
                        places[os.path.relpath(path, srv.data)] = f.read().decode("latin-1")
        found = ["%s in %s" % (t[:6], where) for t in tokens for where, text in places.items() if t in text]
        check(not found, "tokens found: %s", found)
        key = os.path.join(srv.data, "mcp-oauth", "key")
        check(os.stat(key).st_mode & 0o777 == 0o600 and os.path.exists(os.path.join(srv.data, "mcp-oauth", "o")),
              "the store: key %o", os.stat(key).st_mode)
        print("  figure: %d tokens, absent from %d places (tape, tap, %d files of DATA)"
              % (len(tokens), len(places), len(places) - 2))
    finally:
        if tap:
            tap.close()
        if srv:
            srv.stop()
        llm.stop()
        mcp.stop()


if __name__ == "__main__":
    run_tests(globals())
