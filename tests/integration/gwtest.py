"""gwtest — helpers for the gateway's tests (docs/gateway.md).

A Gateway wraps an sbtest.Server with the port (DATA/http.port) and token
(DATA/token) the server wrote; http() makes one HTTP request; Ws is a
WebSocket client (Debian's python3-websocket) that keeps frames it read
while waiting for another one."""

import http.client
import json
import os
import socket
import sys
import time

from sbtest import Server, check, skip, wait_for

try:
    import websocket
except ImportError as e:  # pragma: no cover - depends on the machine
    print("python3-websocket is needed (scripts/deps.sh installs it): %s" % e)
    sys.exit(77)


class Gateway:
    def __init__(self, args=(), ui=None, env=None):
        extra = list(args)
        if ui:
            extra += ["--ui", ui]
        self.srv = Server(args=extra, env=env).start()
        path = os.path.join(self.srv.data, "http.port")
        wait_for(lambda: os.path.exists(path), 10, "DATA/http.port")
        with open(path) as f:
            self.port = int(f.read().strip())
        with open(os.path.join(self.srv.data, "token")) as f:
            self.token = f.read().strip()
        self.origin = "http://127.0.0.1:%d" % self.port

    def http(self, method, path, body=None, token=True, headers=None, raw=None, timeout=10):
        """(status, headers dict lowercased, body bytes)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = {"Host": "127.0.0.1:%d" % self.port}
        if token is True:
            h["Authorization"] = "Bearer " + self.token
        elif token:
            h["Authorization"] = "Bearer " + token
        if headers:
            h.update(headers)
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        conn.request(method, path, body=data, headers=h)
        r = conn.getresponse()
        out = (r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
        conn.close()
        return out

    def api(self, method, path, body=None, **kw):
        """(status, parsed JSON)."""
        status, _, data = self.http(method, path, body, **kw)
        try:
            return status, json.loads(data)
        except ValueError:
            raise AssertionError("%s %s answered %d with non-JSON %r" % (method, path, status, data[:200]))

    def ws(self, **kw):
        return Ws(self, **kw)

    def pid(self):
        return self.srv.proc.pid

    def rss_kb(self):
        with open("/proc/%d/status" % self.pid()) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def alive(self):
        """The server still answers a ping on a fresh WebSocket."""
        w = self.ws()
        r = w.call_op("ping", {})
        w.close()
        return r.get("type") == "pong"


class Ws:
    def __init__(self, gw, token=True, origin=True, path="/ws", cookie=None, timeout=10):
        url = "ws://127.0.0.1:%d%s" % (gw.port, path)
        if token is True:
            url += "?token=" + gw.token
        elif token:
            url += "?token=" + token
        # the pure-Python UTF-8 check of websocket-client reads 2 MB/s;
        # the server sends valid UTF-8 (tests/fuzz covers its JSON)
        kw = {"timeout": timeout, "skip_utf8_validation": True}
        if origin is True:
            kw["origin"] = gw.origin
        elif origin:
            kw["origin"] = origin
        else:
            kw["suppress_origin"] = True
        if cookie:
            kw["cookie"] = cookie
        self.sock = websocket.create_connection(url, **kw)
        self.backlog = []
        self.tx = 0

    def close(self):
        try:
            self.sock.close()
        except Exception:
            pass

    def send(self, obj):
        self.sock.send(json.dumps(obj) if not isinstance(obj, (str, bytes)) else obj)

    def recv(self, timeout=10):
        if self.backlog:
            return self.backlog.pop(0)
        self.sock.settimeout(timeout)
        data = self.sock.recv()
        return json.loads(data)

    def next_tx(self):
        self.tx += 1
        return self.tx

    def wait(self, pred, timeout=10, what="frame"):
        """The first frame (from the backlog, then the socket) for which
        pred is true; frames read meanwhile stay in the backlog."""
        for i, f in enumerate(self.backlog):
            if pred(f):
                return self.backlog.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            check(left > 0, "no %s within %ss", what, timeout)
            self.sock.settimeout(left)
            f = json.loads(self.sock.recv())
            if pred(f):
                return f
            self.backlog.append(f)

    def call_op(self, op, fields, timeout=10):
        tx = self.next_tx()
        msg = {"op": op, "tx": tx}
        msg.update(fields)
        self.send(msg)
        return self.wait(lambda f: f.get("tx") == tx and f.get("op") in ("reply", "error"), timeout,
                         "answer to %s tx %d" % (op, tx))

    def call(self, type, body=None, timeout=10):
        return self.call_op("call", {"type": type, "body": body or {}}, timeout)


def append_notes(client, sid, n, text="note", size=0):
    """Appends n note entries through the bus (session.append is internal:
    the gateway refuses it, the bus does not). Returns the last seq."""
    last = 0
    pad = "x" * size
    for i in range(n):
        m = client.request("session.append", {"session_id": sid, "kind": "note",
                                              "body": {"text": "%s %d %s" % (text, i, pad)}})
        check(m.type == "session.append.ok", "append answered %s %r", m.type, m.body)
        last = m.body["seq"]
    return last


def append_batches(client, sid, n, size=0, batch=50):
    """Appends n notes in batches (one commit each). Returns the last seq."""
    last = 0
    pad = "x" * size
    for start in range(0, n, batch):
        entries = [{"kind": "note", "body": {"text": "batch %d %s" % (start + i, pad)}}
                   for i in range(min(batch, n - start))]
        m = client.request("session.append", {"session_id": sid, "entries": entries}, timeout=20)
        check(m.type == "session.append.ok", "append answered %s %r", m.type, m.body)
        last = m.body["last_seq"]
    return last


def make_ui(tmp):
    os.makedirs(tmp, exist_ok=True)
    with open(os.path.join(tmp, "index.html"), "w") as f:
        f.write("<!doctype html><title>switchboard</title><script type=module src=app.js></script>")
    with open(os.path.join(tmp, "app.js"), "w") as f:
        f.write("console.log('ok');\n")
    return tmp
