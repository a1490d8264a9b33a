#!/usr/bin/python3
"""Tools, MCP servers and hooks run in a sandbox by default (docs/sandbox.md).

Each attack is a real tool call of a scripted model through a session: a
shell tool runs tests/fixtures/sandbox_attack.py, which tries to read
DATA/token, DATA/mcp.json, /proc/<serve>/environ and mem, to connect to
the bus's socket and to a Unix socket standing for the host's, and scans
the environment and the memory of serve and what it started (of every
process it can see, in a box) for the provider key, the MCP server's
secret and the gateway token (the needles reach it encoded, so that no
other process holds them in the clear).

  - root serve, default sandbox: nothing succeeds; the same call with
    --sandbox none (the control) does find the secrets, so the check can
    fail;
  - serve as an unprivileged user (nobody, on a data folder of its own):
    the same; and a `switchboard worker`'s tool the same;
  - a data folder inside the workspace: neither the shell nor the file
    tools read it;
  - the network: a tool cannot connect to a TCP listener of the test on
    127.0.0.1 by default, and can once `sessions update --network on`;
    `sessions show` says which;
  - a root serve hands a tool to the workspace's owner when it is not
    root, and keeps root without capabilities otherwise;
  - a hook runs in the box too (network on): it cannot read DATA/token;
  - a tool's leftovers are killed inside the box (timeout);
  - where bubblewrap cannot run (SWITCHBOARD_BWRAP=/bin/false) serve falls
    back to Landlock and the attacks still fail; with no Landlock either
    (SWITCHBOARD_NO_LANDLOCK=1) serve refuses to start unless --sandbox
    none, which the banner then shows as a warning.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import threading

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import SB_BIN, Proc, Server, TestFailure, check, cli, run_tests, skip, tmpdir, wait_for  # noqa: E402
from sbagent import LLM, llm_args, new_session, prompt, results, tape, wait_run  # noqa: E402
from gwtest import Ws  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ATTACK = os.path.join(ROOT, "tests", "fixtures", "sandbox_attack.py")
HOSTILE = os.path.join(ROOT, "tests", "mcp", "hostile_server.py")
KEY = "sk-proj-SANDBOX-provider-5e3b9"
MCP_SECRET = "mcp-SANDBOX-secret-81c2"
NOBODY = 65534


def need_bwrap():
    if os.geteuid() != 0:
        skip("skipped: the tests run serve as root and as nobody, so they need root")
    bw = shutil.which("bwrap")
    if not bw:
        skip("skipped: bubblewrap is not installed (scripts/deps.sh)")
    r = subprocess.run([bw, "--unshare-pid", "--unshare-net", "--ro-bind", "/", "/", "--proc", "/proc",
                        "--dev", "/dev", "true"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
    if r.returncode != 0:
        skip("skipped: bubblewrap cannot run here: %s" % r.stdout.decode(errors="replace")[:200])


def encode(needle):
    return needle[::-1].encode().hex()


class Setup:
    """A folder for one serve: data, workspace, the MCP config (the hostile
    server with a secret in its environment), owned by `uid`."""

    def __init__(self, uid=0):
        self.dir = tmpdir()
        self.data = os.path.join(self.dir, "data")
        self.ws = os.path.join(self.dir, "ws")
        os.makedirs(self.data, mode=0o700)
        os.makedirs(self.ws)
        shutil.copy(ATTACK, os.path.join(self.ws, "attack.py"))
        # the MCP server lives in /tmp (as a checkout there would): the
        # person's own program must still run in its box
        os.makedirs(os.path.join(self.dir, "mcp"))
        server = shutil.copy(HOSTILE, os.path.join(self.dir, "mcp", "hostile_server.py"))
        with open(os.path.join(self.data, "mcp.json"), "w") as f:
            json.dump({"mcpServers": {"h": {"command": "/usr/bin/python3", "args": [server],
                                            "env": {"HOSTILE_TOKEN": MCP_SECRET}}}}, f)
        if uid:
            for d, _, files in os.walk(self.dir):
                os.chown(d, uid, uid)
                for n in files:
                    os.chown(os.path.join(d, n), uid, uid)

    def needles(self, token):
        with open(os.path.join(self.ws, "needles.hex"), "w") as f:
            f.write(" ".join(encode(n) for n in (KEY, MCP_SECRET, token)))


def start_serve(setup, llm, script, args=(), uid=0, env=None):
    """serve on setup.data (as `uid` through setpriv when not 0)."""
    argv = [SB_BIN, "serve", "--data", setup.data, "--http", "127.0.0.1:0"] + llm_args(llm, script) + list(args)
    if uid:
        argv = ["setpriv", "--reuid", str(uid), "--regid", str(uid), "--clear-groups"] + argv
    full = {"OPENAI_API_KEY": KEY, "SWITCHBOARD_LLM_MAX_ATTEMPTS": "1", "HOME": setup.dir}
    full.update(env or {})
    server = Server(data=setup.data)
    server.proc = Proc(argv, os.path.join(setup.dir, "serve.log"), env=full)

    def up():
        if not server.proc.alive():
            raise TestFailure("serve exited with %s during startup:\n%s" % (server.proc.p.returncode,
                                                                              server.proc.log()))
        if not os.path.exists(os.path.join(setup.data, "bus-cmd")):
            return False
        try:
            return server.stats(timeout=0.5) is not None
        except TestFailure:
            return False
    wait_for(up, 20, "serve to answer bus.stats")
    # the gateway writes its token and port after the bus is up
    wait_for(lambda: all(os.path.exists(os.path.join(setup.data, n)) for n in ("token", "http.port")),
             20, "the gateway's token and port")
    return server


def start_worker(server, setup, args=()):
    """`switchboard worker` of pool p on the server's data folder, as root;
    returns once the run actor lists it."""
    p = Proc([SB_BIN, "worker", "--data", setup.data, "--id", "w1", "--pool", "p"] + list(args),
             os.path.join(setup.dir, "worker.log"), env={"OPENAI_API_KEY": ""})

    def up():
        if not p.alive():
            raise TestFailure("the worker exited: %s" % p.log())
        return server.control().request("worker.get", {"worker_id": "w1"}).type == "worker.get.ok"
    wait_for(up, 20, "the worker to register")
    return p


def attack(uid=0, sandbox_args=(), env=None, worker_args=None):
    """Runs the attack as a tool call (of a `switchboard worker` with
    worker_args, when not None); returns (findings, the log of serve or
    the worker, the pid of the process whose /proc it aims at)."""
    setup = Setup(uid)
    llm = LLM()
    script = "attack-%d-%s" % (uid, "-".join(sandbox_args) or "default")
    server = start_serve(setup, llm, script, sandbox_args, uid, env)
    worker = start_worker(server, setup, worker_args) if worker_args is not None else None
    target = worker or server.proc
    host = None
    try:
        with open(os.path.join(setup.data, "token")) as f:
            token = f.read().strip()
        check(len(token) >= 32, "no gateway token in DATA/token: %r", token)
        setup.needles(token)
        # a listening Unix socket, as the host's /run has (in the workspace:
        # the tests make nothing outside their folder)
        host = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        host.bind(os.path.join(setup.ws, "host.sock"))
        os.chmod(os.path.join(setup.ws, "host.sock"), 0o777)
        host.listen(8)
        cmd = "python3 attack.py %s %d" % (setup.data, target.pid)
        calls = [{"name": "shell", "arguments": {"command": cmd, "timeout_s": 120}, "call_id": "c_attack"}]
        if not worker:          # a worker has no MCP config
            calls.insert(0, {"name": "mcp__h__ok", "arguments": {}, "call_id": "c_mcp"})
        llm.script(script, [{"tool_calls": calls}, {"text": "done"}])
        extra = {"target": "worker:p"} if worker else {}
        sid = new_session(server, setup.ws, approval_policy="yolo", **extra)
        run = wait_run(server, prompt(server, sid, "go"), timeout=150)
        check(run["status"] == "completed", "run %r\n%s", run, target.log()[-3000:])
        check(not worker or run.get("worker_id") == "w1", "the worker did not run it: %r", run)
        res = results(tape(server, sid))
        check(worker or res["c_mcp"]["ok"], "the MCP server did not answer: %r", res.get("c_mcp"))
        out = res["c_attack"]["output"]
        findings = []
        for line in out.splitlines():
            if line.startswith("{"):
                findings.append(json.loads(line))
        check(any(f["what"] == "done" for f in findings), "the attack did not finish:\n%s", out[-3000:])
        for secret in (KEY, MCP_SECRET, token):
            check(secret not in out, "a secret is in the tool's output in the clear")
        return findings, target.log(), target.pid
    finally:
        if host:
            host.close()
        if worker:
            worker.stop()
        server.stop()
        llm.stop()


def successes(findings):
    return [f for f in findings if f.get("ok")]


def check_nothing_read(findings):
    got = successes(findings)
    check(not got, "the sandboxed tool got at secrets:\n%s", "\n".join(json.dumps(f) for f in got))
    # it did try: the reads were refused, not skipped
    tried = {f["what"] for f in findings}
    for what in ("read:token", "read:mcp.json", "connect:bus", "connect:host-socket", "open:environ", "open:mem",
                 "scan"):
        check(what in tried, "the attack did not try %s: %r", what, sorted(tried))


def test_root_serve_tools_read_no_secret():
    need_bwrap()
    findings, log, _ = attack()
    check_nothing_read(findings)
    check("tools, MCP servers and hooks run in a bwrap sandbox" in log, "serve did not pick bwrap:\n%s", log[-2000:])


def test_root_serve_control_without_sandbox_finds_the_secrets():
    """The control: the same attack with --sandbox none reads the token,
    the MCP config and serve's memory, and finds the key in serve's memory
    and the MCP secret in its server's environment. Without it the test
    above could pass by an attack that never works."""
    need_bwrap()
    findings, log, serve_pid = attack(sandbox_args=["--sandbox", "none"])
    check("WITHOUT a sandbox" in log, "serve did not warn about --sandbox none:\n%s", log[-2000:])
    got = {f["what"]: f for f in successes(findings)}
    for what in ("read:token", "read:mcp.json", "connect:bus", "connect:host-socket", "open:environ", "open:mem"):
        check(what in got, "the control could not %s: %r", what, findings)
    hits = {(f["needle"], f["where"], f["pid"] == serve_pid) for f in successes(findings) if f["what"] == "hit"}
    check((0, "mem", True) in hits, "the control found no provider key in serve's memory: %r", hits)
    check((1, "environ", False) in hits, "the control found no MCP secret in an environment: %r", hits)


def test_nobody_serve_tools_read_no_secret():
    need_bwrap()
    findings, log, _ = attack(uid=NOBODY)
    check_nothing_read(findings)
    check("bwrap sandbox" in log, "serve (as nobody) did not pick bwrap:\n%s", log[-2000:])


def test_nobody_serve_control_without_sandbox_reads_the_token():
    need_bwrap()
    findings, _, _ = attack(uid=NOBODY, sandbox_args=["--sandbox", "none"])
    got = {f["what"] for f in successes(findings)}
    check({"read:token", "read:mcp.json", "connect:bus", "connect:host-socket"} <= got,
          "the control (as nobody) got only %r", got)
    hits = {(f["needle"], f["where"]) for f in successes(findings) if f["what"] == "hit"}
    check((1, "environ") in hits, "the control (as nobody) found no MCP secret: %r", hits)


def test_a_worker_s_tools_read_no_secret():
    """A worker on the server's data folder: its tools see neither the
    folder (the token, the bus) nor the worker's /proc."""
    need_bwrap()
    findings, log, _ = attack(worker_args=[])
    check_nothing_read(findings)
    check("bwrap sandbox" in log, "the worker did not pick bwrap:\n%s", log[-2000:])
    findings, log, _ = attack(worker_args=["--sandbox", "none"])
    got = {f["what"] for f in successes(findings)}
    check({"read:token", "connect:bus", "open:environ"} <= got, "the worker's control got only %r", got)


def test_a_data_folder_inside_the_workspace_stays_hidden():
    """serve --data WS/data: neither the shell nor the file tools (which run
    inside serve) read the token; the rest of the workspace is there."""
    need_bwrap()
    setup = Setup()
    data = os.path.join(setup.ws, "data")
    setup.data = data
    os.makedirs(data, mode=0o700)
    llm = LLM()
    llm.script("inws", [{"tool_calls": [
        {"name": "shell", "arguments": {"command": "ls data; cat data/token; ls attack.py"}, "call_id": "c_sh"},
        {"name": "read_file", "arguments": {"path": "data/token"}, "call_id": "c_read"},
        {"name": "list_dir", "arguments": {"path": "data"}, "call_id": "c_list"},
        {"name": "write_file", "arguments": {"path": "data/token", "content": "0" * 64}, "call_id": "c_write"},
        {"name": "read_file", "arguments": {"path": "attack.py"}, "call_id": "c_ok"}]}, {"text": "done"}])
    server = start_serve(setup, llm, "inws")
    try:
        with open(os.path.join(data, "token")) as f:
            token = f.read().strip()
        sid = new_session(server, setup.ws, approval_policy="yolo")
        run = wait_run(server, prompt(server, sid, "go"), timeout=60)
        check(run["status"] == "completed", "run %r", run)
        res = results(tape(server, sid))
        dump = json.dumps(res)
        check(token not in dump, "a tool read the token of a data folder inside the workspace: %s", dump[:2000])
        check("attack.py" in res["c_sh"]["output"] and "bus-cmd" not in res["c_sh"]["output"],
              "the shell: %r", res["c_sh"])
        for c in ("c_read", "c_list", "c_write"):
            check(not res[c]["ok"] and "secret paths" in res[c]["output"], "%s was not refused: %r", c, res[c])
        check(res["c_ok"]["ok"], "read_file of the workspace failed: %r", res["c_ok"])
        with open(os.path.join(data, "token")) as f:
            check(f.read().strip() == token, "a tool rewrote the token")
    finally:
        server.stop()
        llm.stop()


class Listener:
    """A TCP listener on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.stop = False
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        self.sock.settimeout(0.2)
        while not self.stop:
            try:
                c, _ = self.sock.accept()
                self.accepted += 1
                c.close()
            except socket.timeout:
                continue
            except OSError:
                return

    def close(self):
        self.stop = True
        self.thread.join(5)
        self.sock.close()


def test_network_is_off_by_default_and_on_when_the_session_allows_it():
    need_bwrap()
    lis = Listener()
    setup = Setup()
    llm = LLM()
    connect = ("python3 -c \"import socket; socket.create_connection(('127.0.0.1', %d), timeout=5); "
               "print('CONNECTED')\"" % lis.port)
    shell = {"name": "shell", "arguments": {"command": connect}}
    llm.script("net", [{"tool_calls": [dict(shell, call_id="c_off")]}, {"text": "off"},
                       {"tool_calls": [dict(shell, call_id="c_on")]}, {"text": "on"}])
    server = start_serve(setup, llm, "net")
    try:
        sid = new_session(server, setup.ws, approval_policy="yolo")
        rc, out, err = cli(server, "sessions", "show", sid)
        check(rc == 0 and "network    off" in out, "sessions show: %r %r", out, err)
        run = wait_run(server, prompt(server, sid, "try"), timeout=60)
        check(run["status"] == "completed", "run %r", run)
        off = results(tape(server, sid))["c_off"]
        check(not off["ok"] and "CONNECTED" not in off["output"], "the tool reached the network: %r", off)
        check(lis.accepted == 0, "the listener accepted %d connections from the box", lis.accepted)

        rc, out, err = cli(server, "sessions", "update", sid, "--network", "on")
        check(rc == 0, "sessions update --network on: %r %r", out, err)
        rc, out, err = cli(server, "sessions", "show", sid)
        check(rc == 0 and "network    on" in out, "sessions show after the update: %r", out)
        run = wait_run(server, prompt(server, sid, "again"), timeout=60)
        check(run["status"] == "completed", "run %r", run)
        on = results(tape(server, sid))["c_on"]
        check(on["ok"] and "CONNECTED" in on["output"], "the tool could not connect with network on: %r", on)
        wait_for(lambda: lis.accepted == 1, 5, "the listener to count the connection")
        rc, out, err = cli(server, "sessions", "update", sid, "--network", "maybe")
        check(rc == 2 and "--network takes on or off" in err, "a bad --network value: %r %r", rc, err)
        # the UI's switch: session.update through the gateway
        ws = Ws(gateway_of(setup.data))
        f = ws.call("session.update", {"session_id": sid, "network": False})
        ws.close()
        check(f.get("op") == "reply" and not f["body"]["session"].get("network"), "session.update: %r", f)
        rc, out, err = cli(server, "sessions", "show", sid)
        check(rc == 0 and "network    off" in out, "sessions show after the UI's update: %r", out)
    finally:
        server.stop()
        llm.stop()
        lis.close()


def who_runs_the_tool(ws_uid, env=None):
    setup = Setup()
    os.chown(setup.ws, ws_uid, ws_uid)
    llm = LLM()
    cmd = ("id -u; grep CapEff /proc/self/status; touch made; stat -c owner=%u made; "
           "grep NoNewPrivs /proc/self/status; echo home=$HOME")
    # what write_file makes (inside serve, as root) the shell can change
    # (as the workspace's owner)
    append = "echo more >> sub/dir/new.txt && touch sub/dir/other && stat -c %u sub sub/dir sub/dir/new.txt"
    llm.script("who", [{"tool_calls": [{"name": "shell", "arguments": {"command": cmd}, "call_id": "c"},
                                       {"name": "write_file", "arguments": {"path": "sub/dir/new.txt",
                                                                            "content": "new\n"}, "call_id": "w"},
                                       {"name": "shell", "arguments": {"command": append}, "call_id": "a"}]},
                       {"text": "ok"}])
    server = start_serve(setup, llm, "who", env=env)
    try:
        sid = new_session(server, setup.ws, approval_policy="yolo")
        run = wait_run(server, prompt(server, sid, "who"), timeout=60)
        check(run["status"] == "completed", "run %r", run)
        res = results(tape(server, sid))
        r = res["c"]
        check(r["ok"], "the tool failed: %r", r)
        check(res["w"]["ok"] and res["a"]["ok"], "the shell cannot change what write_file made: %r %r",
              res["w"], res["a"])
        check(res["a"]["output"].split() == [str(ws_uid)] * 3, "write_file's folders and file belong to %r",
              res["a"]["output"])
        with open(os.path.join(setup.ws, "sub", "dir", "new.txt")) as f:
            check(f.read() == "new\nmore\n", "the file is not what both tools wrote")
        return r["output"].split() + [setup.dir]
    finally:
        server.stop()
        llm.stop()


def test_root_serve_runs_tools_as_the_workspace_owner_without_capabilities():
    need_bwrap()
    for env in ({}, {"SWITCHBOARD_BWRAP": "/bin/false"}):     # bwrap, then Landlock
        check_who(env)


def check_who(env):
    out = who_runs_the_tool(NOBODY, env)
    check(out[0] == str(NOBODY), "the tool ran as uid %s, not the workspace's owner: %r", out[0], out)
    check(out[1:3] == ["CapEff:", "0000000000000000"], "the tool has capabilities: %r", out)
    check(out[3] == "owner=%d" % NOBODY, "the tool's file belongs to %r", out[3])
    check(out[4:6] == ["NoNewPrivs:", "1"], "the tool may gain privileges: %r", out)
    check(out[6] == "home=/tmp", "nobody's HOME (its passwd home does not exist): %r", out)
    out = who_runs_the_tool(0, env)
    check(out[0] == "0", "a root-owned workspace: the tool ran as uid %s: %r", out[0], out)
    check(out[1:3] == ["CapEff:", "0000000000000000"], "root in the box kept capabilities: %r", out)
    check(out[4:6] == ["NoNewPrivs:", "1"], "root in the box may gain privileges: %r", out)
    check(out[6] == "home=" + out[7], "root's HOME is not serve's: %r", out)


def test_a_hook_runs_in_the_box():
    """A hook cannot read DATA/token, and has the network (a webhook)."""
    need_bwrap()
    setup = Setup()
    lis = Listener()
    out = os.path.join(setup.dir, "hookout")
    os.makedirs(out)
    hooks = os.path.join(setup.dir, "hooks.json")
    cmd = ("python3 -c \"import socket; socket.create_connection(('127.0.0.1', %d), timeout=5)\" > net.txt 2>&1; "
           "echo net=$? >> net.txt; cat %s/token > hook.txt 2>&1; echo rc=$? >> hook.txt" % (lis.port, setup.data))
    with open(hooks, "w") as f:
        json.dump({"hooks": {"session.created": [{"command": ["sh", "-c", cmd], "writable": [out]}]}}, f)
    llm = LLM()
    server = start_serve(setup, llm, "hook", ["--hooks", hooks])
    try:
        new_session(server, setup.ws)
        path = os.path.join(out, "hook.txt")
        text = wait_for(lambda: os.path.exists(path) and "rc=" in open(path).read() and open(path).read(),
                        20, "the hook to write " + path)
        with open(os.path.join(setup.data, "token")) as f:
            token = f.read().strip()
        check(token not in text and "rc=1" in text, "the hook read DATA/token: %r", text)
        net = open(os.path.join(out, "net.txt")).read()
        check("net=0" in net, "the hook could not reach the network: %r", net)
        wait_for(lambda: lis.accepted == 1, 5, "the listener to count the hook's connection")
    finally:
        server.stop()
        llm.stop()
        lis.close()


def test_a_hook_s_writable_folders_must_exist():
    setup = Setup()
    for bad in (["relative"], [os.path.join(setup.dir, "missing")], "notalist", [os.path.join(setup.dir, "f")] * 9):
        hooks = os.path.join(setup.dir, "hooks.json")
        with open(hooks, "w") as f:
            json.dump({"hooks": {"run.finished": [{"command": ["true"], "writable": bad}]}}, f)
        rc, out, err = sb_run("serve", "--data", setup.data, "--http", "127.0.0.1:0", "--hooks", hooks)
        check(rc == 1 and "run.finished[0].writable" in out + err, "serve took writable %r: %d %s %s",
              bad, rc, out, err)


def test_a_timed_out_tool_leaves_nothing_in_the_box():
    need_bwrap()
    setup = Setup()
    llm = LLM()
    cmd = "sleep 3171 & setsid sleep 3172 & sleep 3173"
    llm.script("kill", [{"tool_calls": [{"name": "shell", "arguments": {"command": cmd, "timeout_s": 1},
                                         "call_id": "c"}]}, {"text": "ok"}])
    for env in ({}, {"SWITCHBOARD_NO_CGROUP": "1"}):
        server = start_serve(setup, llm, "kill", env=env)
        try:
            llm.script("kill", [{"tool_calls": [{"name": "shell", "arguments": {"command": cmd, "timeout_s": 1},
                                                 "call_id": "c"}]}, {"text": "ok"}])
            sid = new_session(server, setup.ws, approval_policy="yolo")
            run = wait_run(server, prompt(server, sid, "sleep"), timeout=60)
            check(run["status"] == "completed", "run %r", run)
            r = results(tape(server, sid))["c"]
            check("timed out after 1 s" in r["output"], "no timeout: %r", r)

            def left():
                found = []
                for pid in os.listdir("/proc"):
                    try:
                        with open("/proc/%s/cmdline" % pid, "rb") as f:
                            if f.read().split(b"\0")[:2] in ([b"sleep", b"3171"], [b"sleep", b"3172"],
                                                            [b"sleep", b"3173"]):
                                found.append(pid)
                    except OSError:
                        pass
                return found
            wait_for(lambda: not left(), 10, "the box's sleeps to be gone (%r)" % env)
        finally:
            server.stop()
    llm.stop()


def sleepers(*args):
    """Host pids of `sleep N` for each N in args."""
    want = [[b"sleep", str(a).encode()] for a in args]
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if f.read().split(b"\0")[:2] in want:
                    found.append(int(pid))
        except OSError:
            pass
    return found


def test_a_cancelled_tool_leaves_nothing_in_the_box():
    need_bwrap()
    setup = Setup()
    llm = LLM()
    llm.script("cancel", [{"tool_calls": [{"name": "shell", "arguments": {
        "command": "sleep 3181 & setsid sleep 3182 & sleep 3183"}, "call_id": "c"}]}])
    server = start_serve(setup, llm, "cancel")
    try:
        sid = new_session(server, setup.ws, approval_policy="yolo")
        run_id = prompt(server, sid, "sleep")
        wait_for(lambda: len(sleepers(3181, 3182, 3183)) == 3, 20, "the box's sleeps to start")
        cli(server, "cancel", run_id)
        run = wait_run(server, run_id, ("cancelled", "failed", "completed"), timeout=10)
        check(run["status"] == "cancelled", "run %r", run)
        wait_for(lambda: not sleepers(3181, 3182, 3183), 5, "the cancelled box's sleeps to be gone")
    finally:
        server.stop()
        llm.stop()
        for p in sleepers(3181, 3182, 3183):
            os.kill(p, 9)


def test_without_bwrap_landlock_keeps_the_secrets():
    need_bwrap()
    for uid in (0, NOBODY):
        findings, log, _ = attack(uid=uid, env={"SWITCHBOARD_BWRAP": "/bin/false"})
        check("run in a landlock sandbox" in log, "serve (uid %d) did not fall back to Landlock:\n%s", uid,
              log[-2000:])
        check_nothing_read(findings)


def sb_run(*args):
    """`switchboard ARGS` to its end: (exit code, stdout, stderr)."""
    p = subprocess.run([SB_BIN] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def gateway_of(data):
    """What gwtest.Ws needs of a gateway: its port, token and origin."""
    class G:
        pass
    g = G()
    with open(os.path.join(data, "http.port")) as f:
        g.port = int(f.read().strip())
    with open(os.path.join(data, "token")) as f:
        g.token = f.read().strip()
    g.origin = "http://127.0.0.1:%d" % g.port
    return g


def test_with_no_sandbox_at_all_serve_refuses_unless_sandbox_none():
    need_bwrap()
    setup = Setup()
    llm = LLM()
    env = {"SWITCHBOARD_BWRAP": "/bin/false", "SWITCHBOARD_NO_LANDLOCK": "1"}
    argv = [SB_BIN, "serve", "--data", setup.data, "--http", "127.0.0.1:0"] + llm_args(llm, "none")
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60,
                       env=dict(os.environ, **env))
    out = p.stdout.decode(errors="replace")
    check(p.returncode == 1 and "no sandbox can run here" in out and "--sandbox none" in out,
          "serve without any sandbox: rc %d\n%s", p.returncode, out[-2000:])
    server = start_serve(setup, llm, "none", ["--sandbox", "none"], env=env)
    try:
        wait_for(lambda: "sandbox  NONE" in server.log(), 10, "the banner's sandbox line")
        check("WARNING" in server.log(), "the banner does not warn:\n%s", server.log()[-2000:])
        # what the UI asks through the gateway, to show its warning
        ws = Ws(gateway_of(setup.data))
        f = ws.call("exec.info")
        ws.close()
        check(f.get("op") == "reply" and f.get("body", {}).get("sandbox") == "none", "exec.info: %r", f)
    finally:
        server.stop()
        llm.stop()


if __name__ == "__main__":
    run_tests(globals())
