#!/usr/bin/python3
"""MCP tool servers (issue 16), client side, against a real third-party
server: the reference @modelcontextprotocol/server-everything from npm
(installed by scripts/deps.sh into tests/mcp/node_modules), run with
`node … stdio` and `node … streamableHttp`; and hostile servers of ours
(tests/mcp/hostile_server.py).

  - a scripted model calls the server's echo and get-sum tools through a
    run (yolo); the model saw them as mcp__every__<tool> with their input
    schemas; the results reached the model and the tape;
  - a secret in the server's env never reaches the tape or the log, even
    when the server prints its environment (get-env), nor when a server
    that crashes at start prints it to stderr;
  - (under auto and interactive an MCP tool asks whatever its readOnlyHint
    says: test_mcp_approvals.py);
  - a session's --mcp list limits its servers; `switchboard mcp list`
    shows servers, state and tools;
  - hostile: a server that dies mid-call (a tool error, then restarted once
    for the next call of the run), one that hangs (timed out, the run goes
    on), one that floods stdout (memory stays bounded), one that asks the
    client for ping, roots/list (the workspace) and sampling (refused as
    not supported) during a call, over stdio.
  - the same echo over streamable HTTP.
"""
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import (ROOT, Proc, Server, TestFailure, check, cli, read_jsonl, run_tests, sb, tmpdir,  # noqa: E402
                    wait_for)
from sbagent import (EVERYTHING, LLM, LLM_ENV, MCP_SECRET, call, calls, config, everything, llm_args,  # noqa: E402
                     need_everything, new_session, pid_gone, prompt, results, serve_mcp, tape, wait_run)

HOSTILE = os.path.join(ROOT, "tests", "mcp", "hostile_server.py")


def hostile(**extra):
    s = {"command": "/usr/bin/python3", "args": [HOSTILE], "env": {"HOSTILE_TOKEN": MCP_SECRET}}
    s.update(extra)
    return s


def run_one(server, sid, policy=None, timeout=40):
    kw = {"approval_policy": policy} if policy else {}
    run_id = prompt(server, sid, "use the tools", **kw)
    return wait_run(server, run_id, timeout=timeout)


def no_secret(server, sid):
    dump = json.dumps(tape(server, sid))
    check(MCP_SECRET not in dump, "the secret reached the tape")
    check(MCP_SECRET not in server.log(), "the secret reached the log")


def test_everything_echo_and_sum_through_a_run():
    need_everything()
    llm = LLM()
    llm.script("mcp1", [calls(("c_echo", "mcp__every__echo", {"message": "hello mcp"}),
                              ("c_sum", "mcp__every__get-sum", {"a": 2, "b": 40}),
                              ("c_env", "mcp__every__get-env", {})),
                        {"text": "done"}])
    server = serve_mcp(llm, "mcp1", config({"every": everything()}))
    sid = new_session(server, tmpdir(), approval_policy="yolo")
    run = run_one(server, sid)
    check(run["status"] == "completed", "run %r", run)
    reqs = llm.requests("mcp1")
    check(len(reqs) == 2, "%d model requests", len(reqs))
    tools = {t["name"]: t for t in reqs[0]["json"]["tools"]}
    check("mcp__every__echo" in tools and "mcp__every__get-sum" in tools, "tools offered: %r", sorted(tools))
    check("read_file" in tools, "the built-in tools are gone: %r", sorted(tools))
    params = tools["mcp__every__echo"].get("parameters")
    check("message" in json.dumps(params), "echo's input schema is not offered: %r", params)
    res = results(tape(server, sid))
    check(res["c_echo"]["ok"] is True and res["c_echo"]["output"] == "Echo: hello mcp", "echo: %r", res["c_echo"])
    check(res["c_sum"]["ok"] is True and "42" in res["c_sum"]["output"], "sum: %r", res["c_sum"])
    check(res["c_echo"]["mutating"] is True, "an MCP tool counted as read-only: %r", res["c_echo"])
    env_out = res["c_env"]["output"]
    check("SECRET_TOKEN" in env_out and "***" in env_out, "get-env: %r", env_out[:400])
    outs = {i["call_id"]: str(i.get("output")) for i in reqs[1]["json"]["input"]
            if i.get("type") == "function_call_output"}
    check("Echo: hello mcp" in outs.get("c_echo", ""), "the model did not get the echo: %r", outs)
    check(MCP_SECRET not in json.dumps(reqs[1]["json"]), "the secret reached the model")
    no_secret(server, sid)
    # mcp list: the server, its state and its tools
    rc, out, err = cli(server, "mcp", "list", "--json")
    check(rc == 0, "mcp list exited %d: %s", rc, err)
    srv = [json.loads(line) for line in out.splitlines() if line.strip()]
    check(len(srv) == 1 and srv[0]["name"] == "every" and srv[0]["state"] == "running", "mcp list: %r", srv)
    echo = [t for t in srv[0]["tools"] if t["name"] == "mcp__every__echo"]
    check(echo and echo[0]["read_only_hint"] is True and echo[0]["description"].startswith("Echoes"),
          "mcp list tools: %r", srv[0]["tools"])
    check(MCP_SECRET not in out, "mcp list shows the secret")
    rc, out, err = cli(server, "mcp", "list")
    check(rc == 0 and "every" in out and "running" in out and "mcp__every__echo" in out, "mcp list:\n%s", out)
    server.stop()
    llm.stop()


def test_session_mcp_list_limits_servers():
    need_everything()
    llm = LLM()
    llm.script("mcp3", [{"text": "ok"}])
    server = serve_mcp(llm, "mcp3", config({"every": everything(), "hostile": hostile()}))
    rc, out, err = cli(server, "sessions", "new", "--workspace", tmpdir(), "--mcp", "hostile", "--json")
    check(rc == 0, "sessions new --mcp exited %d: %s", rc, err)
    sess = json.loads(out)
    check(sess.get("mcp_servers") == ["hostile"], "the session record: %r", sess)
    run = run_one(server, sess["session_id"])
    check(run["status"] == "completed", "run %r", run)
    names = [t["name"] for t in llm.requests("mcp3")[0]["json"]["tools"]]
    check("mcp__hostile__ok" in names and not any(n.startswith("mcp__every__") for n in names),
          "tools offered: %r", names)
    rc, _, err = cli(server, "sessions", "new", "--workspace", tmpdir(), "--mcp", "bad name!")
    check(rc == 2, "a bad --mcp name exited %d: %s", rc, err)
    server.stop()
    llm.stop()


def test_server_dies_mid_call_then_restarts_once():
    llm = LLM()
    llm.script("mcp4", [calls(("c_die", "mcp__h__die", {})), calls(("c_ok", "mcp__h__ok", {})),
                        calls(("c_die2", "mcp__h__die", {})), calls(("c_ok2", "mcp__h__ok", {})),
                        {"text": "ok"}])
    server = serve_mcp(llm, "mcp4", config({"h": hostile()}))
    sid = new_session(server, tmpdir(), approval_policy="yolo")
    run = run_one(server, sid)
    check(run["status"] == "completed", "the run did not go on: %r", run)
    res = results(tape(server, sid))
    check(res["c_die"]["ok"] is False and "went away" in res["c_die"]["output"], "die: %r", res["c_die"])
    check(res["c_ok"]["ok"] is True and res["c_ok"]["output"] == "fine", "not restarted: %r", res["c_ok"])
    # a second death in the same run: no second restart
    check(res["c_die2"]["ok"] is False, "die2: %r", res["c_die2"])
    check(res["c_ok2"]["ok"] is False and "not available" in res["c_ok2"]["output"],
          "restarted twice in one run: %r", res["c_ok2"])
    no_secret(server, sid)
    # the next run starts it again
    llm.script("mcp4", [calls(("c_ok3", "mcp__h__ok", {})), {"text": "ok"}])
    run = run_one(server, sid)
    check(results(tape(server, sid))["c_ok3"]["ok"] is True, "the next run did not start it again")
    server.stop()
    llm.stop()


def test_stdio_server_requests_ping_roots_sampling_are_answered():
    llm = LLM()
    llm.script("mcpask", [calls(("c_ask", "mcp__h__ask", {})), {"text": "ok"}])
    server = serve_mcp(llm, "mcpask", config({"h": hostile()}))
    ws = tmpdir()
    sid = new_session(server, ws, approval_policy="yolo")
    run = run_one(server, sid)
    check(run["status"] == "completed", "the run: %r", run)
    res = results(tape(server, sid))["c_ask"]
    check(res["ok"] is True, "ask: %r", res)
    got = json.loads(res["output"])
    check(got["ping"] == {"result": {}}, "ping: %r", got["ping"])
    roots = got["roots/list"].get("result", {}).get("roots")
    check(roots == [{"uri": "file://" + os.path.realpath(ws), "name": "workspace"}]
          or roots == [{"uri": "file://" + ws, "name": "workspace"}], "roots/list: %r (workspace %s)", roots, ws)
    err = got["sampling/createMessage"].get("error", {})
    check(err.get("code") == -32601 and "not supported" in err.get("message", ""), "sampling: %r", err)
    server.stop()
    llm.stop()


def test_server_that_hangs_is_timed_out():
    llm = LLM()
    llm.script("mcp5", [calls(("c_hang", "mcp__h__hang", {})), calls(("c_ok", "mcp__h__ok", {})), {"text": "ok"}])
    server = serve_mcp(llm, "mcp5", config({"h": hostile(timeout_s=2)}))
    sid = new_session(server, tmpdir(), approval_policy="yolo")
    t0 = time.monotonic()
    run = run_one(server, sid)
    took = time.monotonic() - t0
    check(run["status"] == "completed", "run %r", run)
    res = results(tape(server, sid))
    check(res["c_hang"]["ok"] is False and "did not answer within 2 s" in res["c_hang"]["output"],
          "hang: %r", res["c_hang"])
    check(res["c_ok"]["ok"] is True, "after the hang: %r", res["c_ok"])
    check(took < 20, "the run took %.1f s", took)
    server.stop()
    llm.stop()


def test_cancel_during_a_call_tells_the_server():
    # the server runs in the sandbox, where only the session's workspace
    # is writable: its log goes there
    ws = tmpdir()
    log = os.path.join(ws, "received.jsonl")
    llm = LLM()
    llm.script("mcp9", [calls(("c_hang", "mcp__h__hang", {})), {"text": "never"}])
    server = serve_mcp(llm, "mcp9", config({"h": hostile(timeout_s=60, env={"HOSTILE_LOG": log})}))
    sid = new_session(server, ws, approval_policy="yolo")
    run_id = prompt(server, sid, "hang")

    def calling():
        return any(e["kind"] == "tool.call" for e in tape(server, sid))
    wait_for(calling, 20, "the call to start")
    wait_for(lambda: os.path.exists(log) and "tools/call" in open(log).read(), 10, "the server to get the call")
    t0 = time.monotonic()
    call(server, "run.cancel", {"run_id": run_id})
    run = wait_run(server, run_id, timeout=20)
    check(run["status"] == "cancelled", "run %r", run)
    check(time.monotonic() - t0 < 5, "the cancel took %.1f s", time.monotonic() - t0)
    # the executor writes the notification before it ends the run; the
    # server logs it when it reads it, which may be later
    try:
        wait_for(lambda: any(m.get("method") == "notifications/cancelled" for m in read_jsonl(log)), 10,
                 "the server to log notifications/cancelled")
    except TestFailure:
        pass                # the check below says what the server got
    msgs = read_jsonl(log)
    call_id = [m["id"] for m in msgs if m.get("method") == "tools/call"][0]
    cancels = [m for m in msgs if m.get("method") == "notifications/cancelled"]
    check(cancels and cancels[0]["params"]["requestId"] == call_id, "the server was not told: %r", msgs[-3:])
    r = results(tape(server, sid))["c_hang"]
    check(r["ok"] is False and "cancelled" in r["output"], "result %r", r)
    server.stop()
    llm.stop()


def host_pid_of(pidfile):
    """The host pid of the hostile server that writes `pidfile`: the pid it
    writes is its PID namespace's (it runs in the sandbox)."""
    want = ("HOSTILE_PIDFILE=" + pidfile).encode()
    for p in os.listdir("/proc"):
        try:
            with open("/proc/%s/environ" % p, "rb") as f:
                if p.isdigit() and want in f.read().split(b"\0"):
                    return int(p)
        except OSError:
            pass
    raise TestFailure("no process on the host has %s" % want)


def test_unused_server_is_stopped_and_started_again():
    ws = tmpdir()               # writable in the server's sandbox
    pids = os.path.join(ws, "pids")
    llm = LLM()
    llm.script("mcp11", [calls(("c1", "mcp__h__ok", {})), {"text": "a"}, calls(("c2", "mcp__h__ok", {})),
                         {"text": "b"}])
    env = dict(LLM_ENV, SWITCHBOARD_MCP_IDLE_S="1")
    server = Server(args=llm_args(llm, "mcp11") + ["--mcp-config", config({"h": hostile(
        env={"HOSTILE_PIDFILE": pids})})], env=env).start()
    sid = new_session(server, ws, approval_policy="yolo")
    run_one(server, sid)
    check(open(pids).read().split(), "the server wrote no pid")
    first = host_pid_of(pids)

    def state():
        rc, out, _ = cli(server, "mcp", "list", "--json")
        return json.loads(out.splitlines()[0])["state"] if rc == 0 else None
    wait_for(lambda: state() == "not started" and pid_gone(first), 10, "the unused server to be stopped")
    run_one(server, sid)
    res = results(tape(server, sid))
    check(res["c1"]["ok"] and res["c2"]["ok"], "calls %r", res)
    check(len(open(pids).read().split()) == 2, "the server was not started again")
    server.stop()
    llm.stop()


def vm(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def test_server_that_floods_stdout_stays_bounded():
    llm = LLM()
    llm.script("mcp6", [calls(("c_ok", "mcp__h__ok", {})),
                        calls(("c_flood", "mcp__h__flood", {})),
                        calls(("c_forever", "mcp__h__flood_forever", {})),
                        calls(("c_big", "mcp__h__big", {})),
                        {"text": "ok"}])
    server = serve_mcp(llm, "mcp6", config({"h": hostile(timeout_s=3, env={"FLOOD_MB": "200"})}))
    sid = new_session(server, tmpdir(), approval_policy="yolo")
    run = run_one(server, sid, timeout=60)
    check(run["status"] == "completed", "run %r", run)
    res = results(tape(server, sid))
    check(res["c_flood"]["ok"] is True and res["c_flood"]["output"] == "after the flood",
          "the answer after a 200 MiB line: %r", res["c_flood"])
    check(res["c_forever"]["ok"] is False and "did not answer" in res["c_forever"]["output"],
          "flood_forever: %r", res["c_forever"])
    big = res["c_big"]["output"]
    check(res["c_big"]["ok"] is True and len(big) < 70 * 1024 and "truncated" in big,
          "a 1 MiB result is not capped: %d bytes", len(big))
    # 200 MiB and more went through; the server held at most one line (8 MiB)
    hwm = vm(server.proc.pid, "VmHWM")
    check(hwm < 150 * 1024 * 1024, "serve's peak RSS is %d MiB", hwm >> 20)
    server.stop()
    llm.stop()


def test_server_that_cannot_start_is_noted_without_its_secret():
    llm = LLM()
    llm.script("mcp7", [calls(("c_ok", "mcp__h__ok", {})), {"text": "ok"}])
    server = serve_mcp(llm, "mcp7", config({"h": hostile(env={"HOSTILE_CRASH_AT_START": "1",
                                                          "HOSTILE_TOKEN": MCP_SECRET})}))
    sid = new_session(server, tmpdir(), approval_policy="yolo")
    run = run_one(server, sid)
    check(run["status"] == "completed", "run %r", run)
    entries = tape(server, sid)
    notes = [e["body"].get("text", "") for e in entries if e["kind"] == "note"]
    check(any("MCP server h is not available" in n for n in notes), "no note: %r", notes)
    check(any("***" in n for n in notes), "the note does not show the redacted stderr: %r", notes)
    r = results(entries)["c_ok"]
    check(r["ok"] is False and "not available" in r["output"], "call: %r", r)
    no_secret(server, sid)
    server.stop()
    llm.stop()


def test_oneshot_run_takes_mcp_config_and_hooks():
    out = tmpdir()
    hooks = os.path.join(tmpdir(), "hooks.json")
    with open(hooks, "w") as f:
        json.dump({"hooks": {"run.finished": [{"command": ["/bin/sh", "-c", 'cat > "$OUT/finished"'],
                                               "env": {"OUT": out}, "writable": [out]}]}}, f)
    llm = LLM()
    llm.script("mcp10", [calls(("c_ok", "mcp__h__ok", {})), {"text": "done"}])
    rc, stdout, err = sb("run", "--goal", "call ok", "--repo", tmpdir(), "--approval", "yolo", "--ephemeral",
                         "--json", "--mcp-config", config({"h": hostile()}), "--hooks", hooks,
                         *llm_args(llm, "mcp10"), timeout=60, env=LLM_ENV)
    check(rc == 0, "run exited %d\n%s\n%s", rc, stdout, err)
    entries = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    r = results(entries).get("c_ok")
    check(r and r["ok"] is True and r["output"] == "fine", "the MCP call in a one-shot run: %r", r)
    check(MCP_SECRET not in stdout + err, "the secret reached the output")
    # (the one-shot takes --hooks too; its hook may be stopped with it, so
    # what the hook did is test_hooks.py's to check)
    data = tmpdir()
    rc, _, err = sb("run", "--goal", "x", "--repo", tmpdir(), "--data", data, "--mcp-config", "/nonexistent.json",
                    timeout=30)
    check(rc != 0 and "nonexistent" in err + _, "a missing --mcp-config: %d %s", rc, err)


def test_bad_config_fails_serve_clearly():
    path = config({"bad name": {"command": "x"}})
    srv = Server(args=["--mcp-config", path])
    try:
        srv.start(timeout=5)
    except Exception:
        pass
    check(srv.proc.wait(10) not in (None, 0), "serve started with a bad MCP config")
    check("bad name" in srv.log(), "the error does not name the server:\n%s", srv.log())


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_everything_over_streamable_http():
    need_everything()
    port = free_port()
    node = Proc(["node", EVERYTHING, "streamableHttp"], os.path.join(tmpdir(), "node.log"),
                env={"PORT": str(port)})

    def up():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            return False
    wait_for(up, 20, "server-everything to listen over HTTP")
    llm = LLM()
    llm.script("mcp8", [calls(("c_echo", "mcp__web__echo", {"message": "over http"})), {"text": "ok"}])
    server = serve_mcp(llm, "mcp8", config({"web": {"url": "http://127.0.0.1:%d/mcp" % port,
                                                "headers": {"Authorization": "Bearer " + MCP_SECRET}}}))
    sid = new_session(server, tmpdir(), approval_policy="yolo")
    run = run_one(server, sid)
    check(run["status"] == "completed", "run %r", run)
    r = results(tape(server, sid))["c_echo"]
    check(r["ok"] is True and r["output"] == "Echo: over http", "echo over http: %r", r)
    no_secret(server, sid)
    server.stop()
    llm.stop()
    node.stop()


if __name__ == "__main__":
    run_tests(globals())
