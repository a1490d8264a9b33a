"""sbagent — helpers for the tests of runs, sessions and what a run touches
(tools, approvals, compaction, AGENTS.md, MCP, workers, the chat terminal,
bounded memory), shared by the integration tests so that no test file
imports another (docs/testing.md). The bus, the server and the processes
themselves are sbtest's; gwtest has the gateway's helpers; sbllm the llm
actor's.

The model is tests/llm_server.py scripted per test (LLM); a server on it is
llm_server(); call() is one request on the control client; new_session,
prompt, wait_run and tape are the usual steps of a run."""

import fcntl
import json
import os
import pty
import random
import re
import select
import signal
import socket
import string
import struct
import subprocess
import termios
import threading
import urllib.request
import zlib

import zmq

import sbtest

from sbtest import (_SANITIZER, ROOT, SB_BIN, Client, Proc, Server, TestFailure, check, context, make_header,
                    pack, read_jsonl, skip, tmpdir, unpack, wait_for)


# ---------------------------------------------------------------------------
# runs: the scripted model, a server on it, requests, the tape

PY = "/usr/bin/python3"
LLM_SERVER = os.path.join(ROOT, "tests", "llm_server.py")
FIXTURES = os.environ.get("SB_FIXTURES") or os.path.join(ROOT, "tests", "fixtures", "llm")
FINAL = ("completed", "failed", "cancelled", "expired", "interrupted")


class LLM:
    """tests/llm_server.py on an ephemeral loopback port, with its request log."""

    def __init__(self):
        d = tmpdir()
        self.portfile = os.path.join(d, "port")
        self.logfile = os.path.join(d, "requests.jsonl")
        self.proc = Proc([PY, LLM_SERVER, "--port", "0", "--portfile", self.portfile,
                          "--log", self.logfile, "--fixtures", FIXTURES],
                         os.path.join(d, "llm_server.log"))

        def up():
            if not self.proc.alive():
                raise TestFailure("llm_server exited: %s" % self.proc.log())
            return os.path.exists(self.portfile)
        wait_for(up, 10, "llm_server to listen")
        with open(self.portfile) as f:
            self.port = int(f.read().strip())

    def url(self, script):
        """The base URL that selects the script `script`."""
        return "http://127.0.0.1:%d/script=%s/v1" % (self.port, script)

    def control(self, req):
        r = urllib.request.Request("http://127.0.0.1:%d/_control" % self.port,
                                   data=json.dumps(req).encode(),
                                   headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(r, timeout=10) as resp:
            return json.loads(resp.read())

    def script(self, name, turns, repeat_last=False):
        """Registers (or replaces, position 0) the script `name`."""
        return self.control({"op": "script", "name": name, "turns": turns, "repeat_last": repeat_last})

    def requests(self, script=None):
        """Every model request logged so far (parsed), optionally of one script."""
        out = []
        for rec in read_jsonl(self.logfile):
            if rec.get("endpoint") not in ("responses", "chat", "anthropic"):
                continue
            if script is None or rec.get("params", {}).get("script") == script:
                out.append(rec)
        return out

    def stop(self):
        self.proc.stop()


def llm_args(llm, script):
    """serve/run flags for the Responses provider on `script`."""
    return ["--llm", "responses", "--llm-url", llm.url(script), "--model", "m"]


LLM_ENV = {"OPENAI_API_KEY": "sk-test", "SWITCHBOARD_LLM_MAX_ATTEMPTS": "1"}


def llm_server(llm, script, data=None):
    """A started `serve` whose model is the script `script` of `llm`."""
    return Server(data=data, args=llm_args(llm, script), env=LLM_ENV).start()


def call(server, type, body, timeout=10):
    """Request over the server's control client; returns the ok body,
    raises TestFailure on an error reply."""
    m = server.control().request(type, body, timeout=timeout)
    check(m.type == type + ".ok", "%s answered %s %r", type, m.type, m.body)
    return m.body


def rest(server, path, raw=False, method="GET", body=None):
    """One request to the server's gateway with its token: (status, JSON
    answer, or the text when raw); sbtest.rest with a GET by default."""
    return sbtest.rest(server, method, path, body, raw)


def new_session(server, workspace, **kw):
    body = {"workspace": workspace}
    body.update(kw)
    return call(server, "session.create", body)["session"]["session_id"]


def tape(server, sid, after=0):
    """The session's tape after `after`, every page, as a list of dicts."""
    out = []
    while True:
        b = call(server, "session.events", {"session_id": sid, "after_seq": after, "limit": 1000})
        out.extend(b["events"])
        after = b["next_after"]
        if not b["more"]:
            return out


def get_run(server, run_id):
    return call(server, "run.get", {"run_id": run_id})["run"]


def wait_run(server, run_id, statuses=FINAL, timeout=20):
    """Waits until the run's status is one of `statuses`; returns the run."""
    box = {}

    def reached():
        box["run"] = get_run(server, run_id)
        return box["run"]["status"] in statuses
    try:
        wait_for(reached, timeout, "run %s to reach %s" % (run_id, "|".join(statuses)), interval=0.02)
    except TestFailure:
        raise TestFailure("run %s is %s (%s), not %s" % (run_id, box["run"]["status"],
                                                         box["run"].get("reason"), statuses))
    return box["run"]


def prompt(server, sid, text, **kw):
    body = {"session_id": sid, "input": text}
    body.update(kw)
    return call(server, "run.request", body)["run"]["run_id"]


def prompt_call(server, sid, text, **kw):
    """session.prompt: the raw reply message."""
    body = {"session_id": sid, "text": text}
    body.update(kw)
    return server.control().request("session.prompt", body, timeout=15)


def prompt_ok(server, sid, text, **kw):
    """session.prompt, which must be accepted: the reply's body."""
    m = prompt_call(server, sid, text, **kw)
    check(m.type == "session.prompt.ok", "session.prompt answered %s %r", m.type, m.body)
    return m.body


def queue_list(server, sid):
    return call(server, "session.queue.list", {"session_id": sid})


def runs_of(server, sid):
    """The session's runs, oldest first."""
    return list(reversed(call(server, "run.list", {"session_id": sid})["runs"]))


def check_tape_contiguous(entries, what):
    seqs = [e["seq"] for e in entries]
    check(seqs == list(range(1, len(seqs) + 1)), "%s: seqs are not 1..%d: %r", what, len(seqs),
          seqs[:5] + ["..."] + seqs[-5:])


def appender(server, sid, k, acked, stop_at, errors):
    """Appends notes to sid one at a time until serve dies or stop_at is set;
    records (seq, text) of what was acknowledged in acked, refusals in errors."""
    c = Client(server.endpoint("cmd"), name="appender%d" % k)
    try:
        i = 0
        while not stop_at.is_set():
            text = "w%d-%d" % (k, i)
            try:
                m = c.request("session.append", {"session_id": sid, "kind": "note", "body": {"text": text}},
                              timeout=2)
            except Exception:
                return
            if m.type == "session.append.ok":
                acked.append((m.body["seq"], text))
            else:
                errors.append(m.body)
            i += 1
    finally:
        c.close()


class Appenders:
    """n appender threads on session sid of server, started at once;
    acked holds (seq, text) of each acknowledged append, errors the
    refusals; stop() ends them (after the server died, or to stop)."""

    def __init__(self, server, sid, n=4, first=0):
        """Appenders first .. first+n-1 (their texts are wK-I: a second
        set on the same session takes another `first`)."""
        self.acked, self.errors, self.stop_at = [], [], threading.Event()
        self.threads = [threading.Thread(target=appender, args=(server, sid, k, self.acked, self.stop_at,
                                                                  self.errors)) for k in range(first, first + n)]
        for t in self.threads:
            t.start()

    def stop(self):
        self.stop_at.set()
        for t in self.threads:
            t.join(10)


def kinds(entries):
    return [e["kind"] for e in entries]


def results(entries):
    """tool.result bodies by call_id."""
    return {e["body"]["call_id"]: e["body"] for e in entries if e["kind"] == "tool.result"}


def check_subsequence(seq, want, what="tape"):
    """Each item of `want` appears in `seq`, in that order."""
    i = 0
    for k in seq:
        if i < len(want) and k == want[i]:
            i += 1
    check(i == len(want), "%s lacks %r (after %r) in order: %r", what, want[i] if i < len(want) else None,
          want[:i], seq)


def pid_gone(pid):
    """True once kill(pid, 0) fails. A zombie still answers kill(pid, 0), so a
    child that nobody reaped counts as present."""
    try:
        os.kill(pid, 0)
        return False
    except ProcessLookupError:
        return True
    except PermissionError:
        return False


def git_repo():
    d = tmpdir()
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
    with open(os.path.join(d, "README.md"), "w") as f:
        f.write("hello from the test repo\n")
    for argv in (["git", "init", "-q"], ["git", "add", "README.md"], ["git", "commit", "-qm", "init"]):
        subprocess.run(argv, cwd=d, check=True, env=env, stdout=subprocess.DEVNULL)
    return d


def e2e_turns():
    return [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "hello.txt", "content": "hi"},
                         "call_id": "call_write_1"}],
         "usage": {"input_tokens": 50, "output_tokens": 7}},
        {"tool_calls": [{"name": "shell", "arguments": {"command": "cat hello.txt"},
                         "call_id": "call_shell_2"}],
         "usage": {"input_tokens": 60, "output_tokens": 8}},
        {"text": "done", "usage": {"input_tokens": 70, "output_tokens": 1}},
    ]


# The subsequence of kinds every scripted e2e run's tape must hold. Between
# them there may be more (run.status running, usage, tool.output, ...).
E2E_KINDS = ["prompt", "run.status", "run.status", "turn.begin",
             "tool.call", "tool.result", "tool.call", "tool.result",
             "text.delta", "text.done", "usage", "turn.end", "run.status"]


def check_e2e(llm, script, entries, workspace):
    """The assertions shared by the one-shot and the serve variants."""
    path = os.path.join(workspace, "hello.txt")
    check(os.path.isfile(path), "hello.txt was not written")
    with open(path) as f:
        check(f.read() == "hi", "hello.txt holds the wrong text")

    # the tape, in order
    ks = kinds(entries)
    check_subsequence(ks, E2E_KINDS)
    statuses = [e["body"]["status"] for e in entries if e["kind"] == "run.status"]
    check(statuses[0] == "queued" and statuses[-1] == "completed", "run.status sequence %r", statuses)
    check(statuses[1] in ("claimed", "running"), "second run.status is %r: %r", statuses[1], statuses)
    # queued, then claimed/running, before the executor's first entry
    first_begin = ks.index("turn.begin")
    check(ks[:first_begin].count("run.status") >= 2,
          "turn.begin came before the run was claimed: %r", ks[:first_begin + 1])
    check(ks.index("prompt") < ks.index("run.status"), "prompt after run.status: %r", ks)
    check(ks[-1] == "run.status" and ks[-2] == "turn.end", "the tape does not end with turn.end, "
          "run.status: %r", ks[-4:])
    calls = [e["body"] for e in entries if e["kind"] == "tool.call"]
    check([c["name"] for c in calls] == ["write_file", "shell"], "tool calls %r", calls)
    check(calls[0]["call_id"] == "call_write_1", "first call id %r", calls[0]["call_id"])
    res = results(entries)
    check(res["call_write_1"]["ok"] is True, "write_file result %r", res["call_write_1"])
    check(res["call_shell_2"]["ok"] is True and res["call_shell_2"].get("exit_code") == 0
          and res["call_shell_2"]["output"].strip() == "hi", "shell result %r", res["call_shell_2"])
    text = "".join(e["body"]["text"] for e in entries if e["kind"] == "text.delta")
    done = [e["body"]["text"] for e in entries if e["kind"] == "text.done"]
    check(text == "done" and done == ["done"], "text deltas %r, text.done %r", text, done)
    seqs = [e["seq"] for e in entries]
    check(seqs == sorted(seqs) and len(set(seqs)) == len(seqs), "seqs not increasing: %r", seqs)

    # the model saw the tool output paired with its call
    reqs = llm.requests(script)
    check(len(reqs) == 3, "%d model requests, want 3", len(reqs))
    items = reqs[1]["json"]["input"]
    fc = [i for i in items if i.get("type") == "function_call"]
    out = [i for i in items if i.get("type") == "function_call_output"]
    check(any(i.get("call_id") == "call_write_1" and i.get("name") == "write_file" for i in fc),
          "second request lacks the function_call call_write_1: %r", items)
    check(len(out) == 1 and out[0].get("call_id") == "call_write_1",
          "second request's function_call_output is not paired with call_write_1: %r", out)
    check(items.index(out[0]) > items.index(fc[0]), "output before its call: %r", items)
    out3 = [i for i in reqs[2]["json"]["input"] if i.get("type") == "function_call_output"]
    check([i["call_id"] for i in out3] == ["call_write_1", "call_shell_2"]
          and "hi" in str(out3[1].get("output")), "third request's outputs: %r", out3)


# ---------------------------------------------------------------------------
# workers (`switchboard worker`)

def start_worker(server, wid, pool="p", lease=None, extra=()):
    """`switchboard worker` on the server's ipc endpoint, with no provider
    key in its environment; returns once the run actor lists it."""
    log = os.path.join(server.data, "worker-%s.log" % wid)
    args = [SB_BIN, "worker", "--data", server.data, "--id", wid, "--pool", pool] + list(extra)
    if lease:
        args += ["--lease", str(lease)]
    env = {"OPENAI_API_KEY": "", "ANTHROPIC_API_KEY": ""}
    p = Proc(args, log, env=env)

    def up():
        if not p.alive():
            raise AssertionError("worker %s exited: %s" % (wid, p.log()))
        m = server.control().request("worker.get", {"worker_id": wid})
        return m.type == "worker.get.ok"
    wait_for(up, 10, "worker %s to register" % wid)
    return p


def session_prompt(server, sid, text):
    return call(server, "session.prompt", {"session_id": sid, "text": text})["run_id"]


# ---------------------------------------------------------------------------
# approvals: tool calls of a script, interactions

def shell(cmd, call_id):
    return {"name": "shell", "arguments": {"command": cmd}, "call_id": call_id}


# images: a real PNG built here, and a file written

def png(width, height, seed=0, noisy=False):
    """A real RGB PNG: noisy pixels do not compress (a large file)."""
    rows = []
    for y in range(height):
        if noisy:
            row = os.urandom(width * 3)
        else:
            row = bytes(((x * 7 + y * 3 + seed) & 0xFF) for x in range(width)) * 3
            row = row[:width * 3]
        rows.append(b"\0" + row)
    raw = b"".join(rows)

    def chunk(kind, data):
        c = kind + data
        return struct.pack(">I", len(data)) + c + struct.pack(">I", zlib.crc32(c) & 0xFFFFFFFF)
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
            + chunk(b"IDAT", zlib.compress(raw, 0 if noisy else 6)) + chunk(b"IEND", b""))


def write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


# gated runs: a shell tool that waits for a file the test writes

def gate(name, mark=None):
    """A shell command that waits (at most 60 s) for the file `name` in the
    workspace; with mark, it first creates the file `mark`."""
    pre = "touch %s; " % mark if mark else ""
    return pre + "for i in $(seq 1200); do [ -f %s ] && break; sleep 0.05; done; echo passed %s" % (name, name)


def shell_turn(call_id, command):
    return {"tool_calls": [{"name": "shell", "arguments": {"command": command}, "call_id": call_id}]}


def open_gate(ws, name):
    with open(os.path.join(ws, name), "w") as f:
        f.write("go\n")


def wait_file(ws, name, timeout=20):
    wait_for(lambda: os.path.exists(os.path.join(ws, name)), timeout, "%s in the workspace" % name)


def tool(name, call_id, **args):
    return {"name": name, "arguments": args, "call_id": call_id}


def pending(server, sid, timeout=15):
    """Waits for the session's pending interaction; returns it."""
    box = {}

    def found():
        r = call(server, "interact.list", {"session_id": sid, "status": "pending"})["interactions"]
        box["ia"] = r[0] if r else None
        return bool(r)
    wait_for(found, timeout, "a pending interaction on session %s" % sid, interval=0.02)
    return box["ia"]


def resolve(server, iid, decision="approve", **kw):
    body = {"interaction_id": iid, "decision": decision, "resolved_by": "test"}
    body.update(kw)
    return call(server, "interact.resolve", body)["interaction"]


def stop(server):
    """Stops serve and checks it stopped cleanly (under ASan: no leak)."""
    log = server.log
    rc = server.stop()
    check(rc == 0, "serve exited %r:\n%s", rc, log()[-3000:])


def asked(server, sid):
    return [e for e in tape(server, sid) if e["kind"] == "approval.requested"]


# ---------------------------------------------------------------------------
# context compaction: a 150 kB window, large tool outputs

WINDOW = 150000                 # bytes, the server's
OUTPUT = 30000                  # bytes of each tool output
SUMMARY = "SUMMARY: the agent read files and noted their sizes; nothing remains to do."


def workspace(nfiles):
    d = tmpdir()
    rnd = random.Random(15)
    for i in range(nfiles):
        # lines of letters: what a source file looks like to read_file
        lines, size = [], 0
        while size < OUTPUT:
            line = "".join(rnd.choice(string.ascii_lowercase + " ") for _ in range(79))
            lines.append(line)
            size += 80
        with open(os.path.join(d, "f%02d.txt" % i), "w") as f:
            f.write("\n".join(lines)[:OUTPUT])
    return d


def with_tools(reqs):
    return [r for r in reqs if (r.get("json") or {}).get("tools")]


def check_window(reqs):
    """The server refused none for length, and none was over the window."""
    for r in reqs:
        check(len(r["body"].encode()) <= WINDOW and r["status"] == 200,
              "request seq %d has %d bytes, status %d (window %d)", r["seq"], len(r["body"].encode()),
              r["status"], WINDOW)


def compactions(entries):
    return [e for e in entries if e["kind"] == "context.compacted"]


# ---------------------------------------------------------------------------
# AGENTS.md

def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def serve_agents_md(llm, script, xdg=None):
    env = dict(LLM_ENV)
    env["XDG_CONFIG_HOME"] = xdg or tmpdir()
    return Server(args=llm_args(llm, script), env=env).start()


def loaded(entries, run_id):
    return [e for e in entries if e["kind"] == "instructions.loaded" and e.get("run_id") == run_id]


# ---------------------------------------------------------------------------
# MCP tool servers: the reference server-everything (npm)

EVERYTHING = os.path.join(ROOT, "tests", "mcp", "node_modules", "@modelcontextprotocol", "server-everything",
                          "dist", "index.js")
MCP_SECRET = "sk-mcp-secret-7f3a9c21d4"


def need_everything():
    if not os.path.exists(EVERYTHING):
        skip("the reference MCP server is not installed (scripts/deps.sh installs it with npm into tests/mcp)")


def config(servers):
    d = tmpdir()
    path = os.path.join(d, "mcp.json")
    with open(path, "w") as f:
        json.dump({"mcpServers": servers}, f)
    return path


def everything(**extra):
    s = {"command": "node", "args": [EVERYTHING, "stdio"], "env": {"SECRET_TOKEN": MCP_SECRET}}
    s.update(extra)
    return s


def serve_mcp(llm, script, cfg):
    return Server(args=llm_args(llm, script) + ["--mcp-config", cfg], env=LLM_ENV).start()


def calls(*specs):
    return {"tool_calls": [{"name": n, "arguments": a, "call_id": c} for c, n, a in specs]}


# ---------------------------------------------------------------------------
# CURVE over TCP (workers on other machines)

def free_port():
    """A port P with P+1 and P+2 free too."""
    for _ in range(50):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        p = s.getsockname()[1]
        s.close()
        if p > 60000:
            continue
        ok = True
        for q in (p + 1, p + 2):
            t = socket.socket()
            try:
                t.bind(("127.0.0.1", q))
            except OSError:
                ok = False
            t.close()
        if ok:
            return p
    raise AssertionError("no free port triple")


def cert_keys(path):
    with open(path) as f:
        text = f.read()
    pub = re.search(r'public-key = "(.{40})"', text)
    sec = re.search(r'secret-key = "(.{40})"', text)
    return (pub.group(1).encode() if pub else None, sec.group(1).encode() if sec else None)


class CurveClient:
    """A DEALER over CURVE TCP: one connection, many requests."""

    def __init__(self, endpoint, server_key, keys):
        self.sock = context().socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.curve_serverkey = server_key
        self.sock.curve_publickey, self.sock.curve_secretkey = keys
        self.sock.connect(endpoint)

    def request(self, type, body, timeout=10.0):
        h = make_header(type)
        self.sock.send_multipart([pack(h), pack(body)])
        deadline = timeout * 1000
        while self.sock.poll(int(deadline)):
            f = self.sock.recv_multipart()
            rh = unpack(f[0])
            if rh.get("corr") == h["id"]:
                return rh["type"], unpack(f[1])
        raise AssertionError("no answer to %s within %.0f s" % (type, timeout))

    def close(self):
        self.sock.close(0)


def forbidden(r):
    return r[0] == "error" and r[1]["code"] == "forbidden"


# ---------------------------------------------------------------------------
# the tap, as `switchboard tap --json` shows it

class TapCli:
    """`switchboard tap --json` on a server, with a way to know it has seen
    everything the broker saw up to now."""

    def __init__(self, server):
        self.server = server
        self.out = os.path.join(tmpdir(), "tap.jsonl")
        self.proc = Proc([SB_BIN, "tap", "--json", "--data", server.data], self.out)
        self.client = Client(server.endpoint())
        self.n = 0

    def text(self):
        with open(self.out, encoding="utf-8", errors="replace") as f:
            return f.read()

    def mark(self):
        self.n += 1
        word = "tapmark-%d" % self.n

        def seen():
            self.client.request("llm.models", {"provider": word}, timeout=5)
            return word in self.text()
        wait_for(seen, 10, "the tap to show " + word, interval=0.05)

    def close(self):
        self.client.close()
        self.proc.kill()


# ---------------------------------------------------------------------------
# `switchboard chat` in a pseudo-terminal

CSI = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z@])")
COLS = 200


class Screen:
    """Just enough of a terminal to read what a person sees: rows that
    \r, \b, erase (ESC[K, ESC[2K, ESC[J) and cursor moves (ESC[A/B/C/D)
    rewrite, with no scrollback limit; other escapes are ignored."""

    def __init__(self):
        self.rows = [[]]
        self.r = self.c = 0

    def _put(self, ch):
        if self.c >= COLS:
            self.r, self.c = self.r + 1, 0
        while len(self.rows) <= self.r:
            self.rows.append([])
        row = self.rows[self.r]
        while len(row) < self.c:
            row.append(" ")
        if self.c < len(row):
            row[self.c] = ch
        else:
            row.append(ch)
        self.c += 1

    def feed(self, text):
        k = 0
        while k < len(text):
            ch = text[k]
            m = CSI.match(text, k) if ch == "\x1b" else None
            if m:
                arg, op = m.group(1), m.group(2)
                n = int(arg) if arg.isdigit() else 1
                if op == "K":
                    row = self.rows[self.r]
                    if arg == "2":
                        self.rows[self.r] = []
                    else:
                        del row[self.c:]
                elif op == "J":
                    del self.rows[self.r][self.c:]
                    del self.rows[self.r + 1:]
                elif op == "A":
                    self.r = max(0, self.r - n)
                elif op == "B":
                    self.r += n
                elif op == "C":
                    self.c += n
                elif op == "D":
                    self.c = max(0, self.c - n)
                k = m.end()
                continue
            if ch == "\x1b":
                k += 2          # a two-byte escape
                continue
            if ch == "\n":
                self.r += 1
                while len(self.rows) <= self.r:
                    self.rows.append([])
            elif ch == "\r":
                self.c = 0
            elif ch == "\b":
                self.c = max(0, self.c - 1)
            elif ch == "\x07":
                pass
            elif ch >= " ":
                self._put(ch)
            k += 1

    def text(self):
        # the cursor's row keeps its trailing blanks: a prompt ends in one
        return "\n".join("".join(r) if k == self.r else "".join(r).rstrip() for k, r in enumerate(self.rows))


class Term:
    """`switchboard chat ARGS` on a pseudo-terminal: what it printed, with
    escape codes taken out, and keys typed as a person types them."""

    def __init__(self, srv, *args, cwd=None):
        self.out = b""
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            try:
                if cwd:
                    os.chdir(cwd)
                env = dict(os.environ, TERM="xterm")
                os.execve(SB_BIN, [SB_BIN, "chat"] + list(args) + ["--data", srv.data], env)
            finally:
                os._exit(127)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, COLS, 0, 0))
        self.code = None
        self.pos = 0            # expect() looks after what it matched before

    def pump(self, timeout=0.05):
        r, _, _ = select.select([self.fd], [], [], timeout)
        if r:
            try:
                self.out += os.read(self.fd, 65536)
            except OSError:
                pass

    def text(self):
        """What the terminal shows now, every row since the start."""
        scr = Screen()
        scr.feed(self.out.decode("utf-8", "replace"))
        return scr.text()

    def expect(self, pattern, timeout=15):
        """Waits for `pattern` (a regex) from the row of the last match on;
        returns the match."""
        rx = re.compile(pattern)

        def seen():
            self.pump()
            text = self.text()
            m = rx.search(text, self.pos)
            if m:
                # the next search starts at the row of this match: the
                # input line at the bottom is rewritten as output comes
                self.pos = text.rfind("\n", 0, m.end()) + 1
            return m
        try:
            return wait_for(seen, timeout, "%r on the terminal" % pattern, interval=0)
        except TestFailure:
            raise TestFailure("%r not on the terminal; it shows:\n%s" % (pattern, self.text()[-3000:]))

    def type(self, keys):
        os.write(self.fd, keys.encode() if isinstance(keys, str) else keys)

    def wait_exit(self, timeout=10):
        def gone():
            self.pump()
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.code = os.waitstatus_to_exitcode(status)
                return True
            return False
        wait_for(gone, timeout, "chat to exit", interval=0)
        while True:             # what it wrote last, up to the end of the terminal
            r, _, _ = select.select([self.fd], [], [], 0.2)
            try:
                chunk = os.read(self.fd, 65536) if r else b""
            except OSError:
                chunk = b""
            if not chunk:
                break
            self.out += chunk
        # the chat is no sbtest.Proc: its sanitizer reports (make asan) are here
        raw = self.out.decode("utf-8", "replace")
        m = _SANITIZER.search(raw)
        check(not m, "sanitizer report from chat:\n%s", raw[m.start():m.start() + 3000] if m else "")
        return self.code

    def kill(self):
        if self.code is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except OSError:
                pass
        os.close(self.fd)


def interaction(srv, iid):
    return call(srv, "interact.get", {"interaction_id": iid})["interaction"]


def ask_approval(srv, sid, run_id, call_id, command):
    """What an executor does before a shell call its policy does not allow."""
    return call(srv, "interact.request", {"session_id": sid, "run_id": run_id, "call_id": call_id,
                                          "tool": "shell", "arguments": json.dumps({"command": command}),
                                          "summary": command})["interaction_id"]


# ---------------------------------------------------------------------------
# bounded memory: peers that never read, RSS

NOTE = "n" * 8000           # an 8 KB note, as in the report


def sanitized():
    """True for an AddressSanitizer build, whose allocator keeps freed
    memory in quarantine: RSS says nothing about our bounds there, so only
    the broker's own counters are checked."""
    with open(SB_BIN, "rb") as f:
        return b"__asan_init" in f.read()


def rss_anon(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) << 10
    return 0


def ok_body(m, what):
    check(not m.is_error(), "%s failed: %r", what, m)
    return m.body


def fill_session(srv, notes):
    """A session holding `notes` 8 KB notes; returns its id."""
    api = Client(srv.endpoint("cmd"), name="filler")
    try:
        sid = ok_body(api.request("session.create", {"workspace": tmpdir()}, timeout=10),
                 "create")["session"]["session_id"]
        left = notes
        while left:
            n = min(left, 800)
            entries = [{"kind": "note", "body": {"text": NOTE}} for _ in range(n)]
            ok_body(api.request("session.append", {"session_id": sid, "entries": entries}, timeout=30),
               "append")
            left -= n
        return sid
    finally:
        api.close()


def hostile_dealer(endpoint):
    d = context().socket(zmq.DEALER)
    d.setsockopt(zmq.LINGER, 0)
    d.setsockopt(zmq.RCVBUF, 4096)
    d.setsockopt(zmq.RCVHWM, 1)
    d.setsockopt(zmq.SNDHWM, 0)
    d.connect(endpoint)
    return d


def type_count(srv, name):
    return srv.stats().get("types", {}).get(name, 0)


# ---------------------------------------------------------------------------
# hooks: a hook that records the events it is given (docs/hooks.md)

# Writes stdin and the environment to OUT/<event>.<unique>.{json,env}
# (renamed into place, the .env last, so that a reader sees whole files).
# Not $$: each hook has a PID namespace of its own, where pids repeat.
RECORD = ['/bin/sh', '-c', 'f=$(mktemp -u "$OUT/$SWITCHBOARD_EVENT.XXXXXXXX"); cat > "$f.t"; env > "$f.e"; '
          'mv "$f.t" "$f.json"; mv "$f.e" "$f.env"']


def hooks_file(hooks):
    path = os.path.join(tmpdir(), "hooks.json")
    with open(path, "w") as f:
        json.dump({"hooks": hooks}, f)
    return path


def recorded(out, event):
    """[(event json, env text)] recorded for `event`."""
    got = []
    for name in sorted(os.listdir(out)):
        if name.startswith(event + ".") and name.endswith(".env"):
            base = os.path.join(out, name[:-4])
            with open(base + ".json") as f:
                body = f.read()
            with open(base + ".env") as f:
                got.append((json.loads(body), f.read()))
    return got
