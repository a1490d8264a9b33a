#!/usr/bin/python3
"""Secrets that cannot be read back (issue 9, items 4 and 5).

  - A provider key read from serve's environment is gone from the
    process's environment memory: a shell tool running
    `tr '\\0' '\\n' < /proc/$PPID/environ | grep OPENAI` (and the same over
    every /proc/*/environ it can see) does not print it, with and without
    `--sandbox bwrap`. The key's value appears nowhere: tool results, the
    tape, the tap, serve's log, the bodies of later provider requests,
    /proc/<serve>/environ read from outside (the tests run as root, which
    reads it whatever the dumpable flag says). The provider still receives
    it in the Authorization header, so the key was read before the scrub.
    A key named by a providers file's key_env is scrubbed the same way.
  - serve is non-dumpable: another process of its user cannot open its
    /proc/PID/environ or mem (checked as nobody: root reads them anyway).
  - Credentials in --llm-url (userinfo and key-like query parameters) show
    in no log line, banner, llm.models reply, error, tape entry, tap line,
    nor in /proc/<serve>/cmdline, while the redacted URL is still named.
"""
import json
import os
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import SB_BIN, Client, Proc, Server, check, run_tests, tmpdir, wait_for  # noqa: E402
from sbagent import LLM, TapCli, new_session, prompt, results, tape, wait_run  # noqa: E402

KEY = "sk-proj-HARDEN9-environ-7d1f"
FILE_KEY = "sk-named-HARDEN9-keyenv-42aa"
URL_USER_SECRET = "sk-secret123"
URL_QUERY_SECRET = "sk-q"

PPID_CMD = "tr '\\0' '\\n' < /proc/$PPID/environ | grep OPENAI"
ALL_CMD = "for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f 2>/dev/null; done | grep -a _KEY"


def bwrap_usable():
    bw = shutil.which("bwrap")
    if not bw:
        return "bwrap is not installed"
    r = subprocess.run([bw, "--die-with-parent", "--unshare-net", "--unshare-pid", "--ro-bind", "/", "/",
                        "--dev", "/dev", "--proc", "/proc", "true"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=10)
    if r.returncode != 0:
        return "bwrap cannot run here: %s" % r.stdout.decode(errors="replace").strip()[:200]
    return None


def serve_environ(server):
    with open("/proc/%d/environ" % server.proc.pid, "rb") as f:
        return f.read().decode(errors="replace")


def serve_cmdline(server):
    with open("/proc/%d/cmdline" % server.proc.pid, "rb") as f:
        return f.read().replace(b"\0", b" ").decode(errors="replace")


def check_nowhere(secret, where):
    for name, text in where.items():
        i = text.find(secret)
        check(i < 0, "%s holds the key %r:\n...%s...", name, secret, text[max(0, i - 200):i + 80])


def run_environ_tools(sandbox=None, providers=False):
    llm = LLM()
    script = "env-" + ("bwrap" if sandbox else "plain") + ("-prov" if providers else "")
    turns = [{"tool_calls": [{"name": "shell", "arguments": {"command": PPID_CMD}, "call_id": "c_ppid"},
                             {"name": "shell", "arguments": {"command": ALL_CMD}, "call_id": "c_all"}]},
             {"text": "done"}]
    llm.script(script, turns)
    env = {"OPENAI_API_KEY": KEY, "SWITCHBOARD_LLM_MAX_ATTEMPTS": "1"}
    if providers:
        # the key the provider uses comes from a variable only the providers
        # file names; OPENAI_API_KEY is set too, unused, and must go as well
        path = os.path.join(tmpdir(), "providers.json")
        with open(path, "w") as f:
            json.dump({"providers": [{"name": "p", "kind": "responses", "base_url": llm.url(script),
                                      "model": "m", "key_env": "HARDEN9_PROVIDER_KEY"}]}, f)
        os.chmod(path, 0o600)
        env["HARDEN9_PROVIDER_KEY"] = FILE_KEY
        args = ["--providers", path]
    else:
        args = ["--llm", "responses", "--llm-url", llm.url(script), "--model", "m"]
    # without a sandbox (--sandbox none) the tool sees serve's /proc: what
    # keeps the key from it then is the scrub this test is about
    args += ["--sandbox", sandbox or "none"]
    server = Server(args=args, env=env).start()
    tap = TapCli(server)
    try:
        tap.mark()
        ws = tmpdir()
        sid = new_session(server, ws, approval_policy="yolo")
        run = wait_run(server, prompt(server, sid, "go"), timeout=30)
        tap.mark()
        check(run["status"] == "completed", "run %r", run)
        entries = tape(server, sid)
        res = results(entries)
        check(set(res) == {"c_ppid", "c_all"}, "tool results %r", sorted(res))
        reqs = llm.requests(script)
        check(len(reqs) == 2, "%d model requests", len(reqs))
        # the provider got the key in its header: it was read before the scrub
        used = FILE_KEY if providers else KEY
        auth = reqs[0]["headers"].get("authorization", "")
        check(auth == "Bearer " + used, "the provider got %r, not the key", auth)
        # the tools did read something: the variables' names are still there
        # (only the values are wiped), so the command is not a no-op
        if not sandbox:
            check("OPENAI_API_KEY" in res["c_ppid"]["output"], "the tool read no environment: %r",
                  res["c_ppid"]["output"][:300])
        secrets = [KEY, FILE_KEY] if providers else [KEY]
        where = {
            "the c_ppid tool result": json.dumps(res["c_ppid"]),
            "the c_all tool result": json.dumps(res["c_all"]),
            "the tape": json.dumps(entries),
            "the tap": tap.text(),
            "serve's log": server.log(),
            "the provider request bodies": "\n".join(r.get("body") or "" for r in reqs),
            "/proc/<serve>/environ": serve_environ(server),
        }
        for s in secrets:
            check_nowhere(s, where)
    finally:
        tap.close()
        server.stop()
        llm.stop()


def test_a_tool_cannot_read_the_key_from_serve_environ():
    run_environ_tools()


def test_a_key_env_named_by_a_providers_file_is_scrubbed():
    run_environ_tools(providers=True)


def test_a_sandboxed_tool_cannot_read_the_key():
    why = bwrap_usable()
    if why:
        print("skipped: " + why)
        return
    run_environ_tools(sandbox="bwrap")


def test_serve_is_not_dumpable():
    """A process of serve's own user cannot open its /proc/PID/environ
    (nor mem), while it can open those of its other processes. Root
    reads them whatever the flag says, so serve and the reader run as
    nobody (setpriv); the key wipe above is what protects from root."""
    setpriv = shutil.which("setpriv")
    if not setpriv or os.geteuid() != 0:
        print("skipped: needs setpriv and root to run serve and a reader as nobody")
        return
    as_nobody = [setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups"]
    d = tmpdir()
    os.chown(d, 65534, 65534)
    data = os.path.join(d, "data")
    serve = Proc(as_nobody + [SB_BIN, "serve", "--data", data, "--http", "127.0.0.1:0", "--actors", "broker,llm"],
                 os.path.join(d, "serve.log"), env={"OPENAI_API_KEY": KEY})
    other = Proc(as_nobody + ["sleep", "600"], os.path.join(d, "other.log"))
    try:
        wait_for(lambda: os.path.exists(os.path.join(data, "bus-cmd")), 10, "serve (as nobody) to bind")

        def read(pid, what):
            return subprocess.run(as_nobody + ["cat", "/proc/%d/%s" % (pid, what)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=10)
        control = read(other.pid, "environ")
        check(control.returncode == 0, "nobody cannot read its own process's environ: %r", control.stderr)
        for what in ("environ", "mem"):
            r = read(serve.pid, what)
            check(r.returncode != 0 and b"Permission denied" in r.stderr,
                  "a process of serve's user opened its /proc/PID/%s (rc %d): %r",
                  what, r.returncode, (r.stdout[:100], r.stderr))
    finally:
        other.kill()
        serve.stop()


def test_llm_url_credentials_are_never_logged():
    llm = LLM()
    url = "http://u:%s@127.0.0.1:%d/script=nope/v1?api_key=%s" % (URL_USER_SECRET, llm.port, URL_QUERY_SECRET)
    server = Server(args=["--llm", "responses", "--llm-url", url, "--model", "m"],
                    env={"OPENAI_API_KEY": KEY, "SWITCHBOARD_LLM_MAX_ATTEMPTS": "1"}).start()
    tap = TapCli(server)
    try:
        tap.mark()
        c = Client(server.endpoint())
        replies = []
        m = c.request("llm.models", {}, timeout=15)
        replies.append(m)
        # a stream against it fails (the provider does not know that path)
        # and the error names the provider's URL
        from sbllm import stream, stream_body
        final, chunks = stream(c, stream_body(), timeout=15)
        replies.append(final)
        replies.extend(chunks)
        # a session and a run on it: its failure goes to the tape
        sid = new_session(server, tmpdir(), approval_policy="yolo")
        run = wait_run(server, prompt(server, sid, "go"), timeout=30)
        entries = tape(server, sid)
        tap.mark()
        c.close()
        log = server.log()
        # the URL is still named, without its credentials, where it was
        # named before: the llm actor's start line, the banner, the error
        shown = "http://127.0.0.1:%d/script=nope/v1?api_key=***" % llm.port
        check(("url=" + shown) in log, "the llm start line does not name %s:\n%s", shown, log)
        check(("model    m (provider responses, %s)" % shown) in log, "the banner does not name %s:\n%s",
              shown, log)
        check(shown in run.get("reason", ""), "the run's failure does not name %s: %r", shown, run)
        where = {
            "serve's log and banner": log,
            "the replies": "\n".join(repr(m.header) + repr(m.body) for m in replies),
            "the run": json.dumps(run),
            "the tape": json.dumps(entries),
            "the tap": tap.text(),
            # the arguments, which every user can read
            "/proc/<serve>/cmdline": serve_cmdline(server),
        }
        for s in (URL_USER_SECRET, URL_QUERY_SECRET):
            check_nowhere(s, where)
    finally:
        tap.close()
        server.stop()
        llm.stop()


if __name__ == "__main__":
    run_tests(globals())
