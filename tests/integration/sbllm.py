"""sbllm — helpers for the tests of the llm actor (test_llm_*.py): a
loopback provider (tests/llm_server.py) with its request log, a server on
it, and one streamed llm.request over the bus, read as the chunks a
requester sees.

Importing this module removes from the environment the provider keys and
llm settings of whoever runs the tests: the actor would pick them up and
the header checks would depend on the caller."""

import json
import os
import urllib.request

from sbtest import ROOT, Proc, Server, TestFailure, check, read_jsonl, tmpdir, wait_for

FIXTURES = os.environ.get("SB_FIXTURES") or os.path.join(ROOT, "tests", "fixtures", "llm")
LLM_SERVER = os.path.join(ROOT, "tests", "llm_server.py")
PY = "/usr/bin/python3"

# Keys the actor might pick up from the caller's environment would make
# the header checks depend on who runs the tests.
for _var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "SWITCHBOARD_LLM_KEY",
             "SWITCHBOARD_LLM_KEY_FILE", "SWITCHBOARD_LLM_IDLE_TIMEOUT_S",
             "SWITCHBOARD_LLM_MAX_ATTEMPTS", "SWITCHBOARD_LLM_BACKOFF_MS",
             "SWITCHBOARD_CODEX_TOKEN_FILE", "SWITCHBOARD_CODEX_TOKEN_URL"):
    os.environ.pop(_var, None)


class LlmServer:
    """tests/llm_server.py on an ephemeral loopback port, with its request
    log (one JSON object per request) and its own stderr log."""

    def __init__(self, fixtures=FIXTURES, verbose=False):
        self.dir = tmpdir()
        self.portfile = os.path.join(self.dir, "port")
        self.log_path = os.path.join(self.dir, "requests.jsonl")
        argv = [PY, LLM_SERVER, "--port", "0", "--fixtures", fixtures,
                "--portfile", self.portfile, "--log", self.log_path]
        if verbose:
            argv.append("--verbose")
        self.proc = Proc(argv, os.path.join(self.dir, "stderr.log"))

        def up():
            if not self.proc.alive():
                raise TestFailure("llm_server.py exited: %s" % self.proc.log())
            return os.path.exists(self.portfile)
        wait_for(up, 10, "llm_server.py to listen")
        with open(self.portfile) as f:
            self.port = int(f.read().strip())

    def base(self, *segments, **params):
        """A base URL whose path carries the scenario: base(fixture="x",
        variant="crlf", tag="t1") -> http://127.0.0.1:P/fixture=x/variant=crlf/tag=t1/v1"""
        parts = list(segments) + ["%s=%s" % (k, v) for k, v in params.items()]
        return "http://127.0.0.1:%d/%s/v1" % (self.port, "/".join(parts))

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def requests(self, endpoint=None, tag=None):
        """The logged requests, optionally only those of one endpoint kind
        (responses, chat, anthropic, models, token) and one tag."""
        out = read_jsonl(self.log_path)
        if endpoint is not None:
            out = [r for r in out if r.get("endpoint") == endpoint]
        if tag is not None:
            out = [r for r in out if r.get("params", {}).get("tag") == tag]
        return out

    def log_text(self):
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def stderr(self):
        return self.proc.log()

    def connections(self):
        """Established or half-closed TCP connections held by the server
        process on its listening port (its side of each client socket)."""
        inodes = set()
        fd_dir = "/proc/%d/fd" % self.proc.pid
        for fd in os.listdir(fd_dir):
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
        n = 0
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                with open(table) as f:
                    lines = f.read().splitlines()[1:]
            except OSError:
                continue
            for line in lines:
                cols = line.split()
                local_port = int(cols[1].split(":")[1], 16)
                state = cols[3]
                if local_port == self.port and state != "0A" and cols[9] in inodes:
                    n += 1
        return n

    def control(self, op, **kw):
        body = json.dumps(dict(kw, op=op)).encode()
        req = urllib.request.Request(self.url("/_control"), data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read())

    def stop(self):
        self.proc.stop()


def write_providers(providers, default=None, mode=0o600):
    """Writes a --providers file; returns its path."""
    path = os.path.join(tmpdir(), "providers.json")
    doc = {"providers": providers}
    if default:
        doc["default"] = default
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    os.chmod(path, mode)
    return path


def provider(name, kind, base_url, model="m-test", **kw):
    p = {"name": name, "kind": kind, "base_url": base_url, "model": model}
    p.update(kw)
    return p


def serve_llm(providers, env=None, default=None, extra=()):
    """`switchboard serve --actors broker,llm --providers FILE`, started and
    answering; returns the sbtest.Server."""
    path = write_providers(providers, default)
    srv = Server(args=["--actors", "broker,llm", "--providers", path] + list(extra), env=env)
    return srv.start()


def user(text):
    return {"role": "user", "content": text}


def stream_body(provider=None, messages=None, **kw):
    body = {"messages": messages or [user("hello")]}
    if provider:
        body["provider"] = provider
    body.update(kw)
    return body


def check_chunks(rid, final):
    """Checks the framing of a streamed reply: the chunks' seq run 1..n
    without a gap, the first is {kind: open, stream_id: rid}, every chunk
    comes from one instance. Returns the normalized chunks after "open"."""
    chunks = final.chunks
    check(chunks, "no chunk before the final %s %r", final.type, final.body)
    seqs = [c.header.get("seq") for c in chunks]
    check(seqs == list(range(1, len(chunks) + 1)), "chunk seqs %r", seqs)
    check(chunks[0].body == {"kind": "open", "stream_id": rid},
          "first chunk %r (want open with stream_id %s)", chunks[0].body, rid)
    senders = {c.header.get("from") for c in chunks} | {final.header.get("from")}
    check(len(senders) == 1, "chunks from several senders: %r", senders)
    check(all(c.type == "llm.stream.chunk" for c in chunks), "chunk types %r",
          [c.type for c in chunks])
    return [normalize(c.body) for c in chunks[1:]]


def normalize(chunk):
    """A chunk body with its reasoning_state data parsed, so that JSON key
    order and spacing don't matter."""
    c = dict(chunk)
    if c.get("kind") == "reasoning_state":
        c["data"] = json.loads(c["data"])
    return c


def stream(client, body, timeout=10.0, **hdr):
    """Sends llm.stream and waits for the final answer; returns
    (final Msg, normalized chunks after "open")."""
    rid = client.send("llm.stream", body, **hdr)
    final = client.wait_reply(rid, timeout)
    return final, check_chunks(rid, final)


def texts(chunks):
    return "".join(c["text"] for c in chunks if c["kind"] == "text")
