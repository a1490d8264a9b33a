#!/usr/bin/python3
"""A streamable-HTTP MCP server for tests/integration/test_mcp_http_errors.py
(stdlib only), one that does what real servers may: ask the client things
in the middle of a call, forget its sessions, want authorization.

    http_server.py --port 0 --portfile FILE --log FILE [--token T]

Tools:
  ok        answers "fine"
  ping_me   sends a ping to the client inside the call's SSE stream, waits
            for the answer (POSTed back), and answers with it and the time
  ask       the same with elicitation/create, sampling/createMessage and
            roots/list, one after the other, and answers with what came back
  forget    answers, then forgets every session: the next request that
            names one gets 404, as after a server restart
  cut       opens the call's SSE stream with an event id and `retry: 300`,
            then closes it before the answer (a stream cut mid-call); the
            answer comes on the GET that resumes it with Last-Event-ID
  cut_forget  the same, but forgets every session at the cut: the GET gets
            404 (the call was taken: the client must not send it again)
  elicit    sends elicitation/create inside the call's SSE stream with the
            call's arguments {"message", "requestedSchema"} (a schema with
            a default of each type when none), answers with the answer
  elicit_get  the same on the session's standalone GET stream (--standalone),
            as the MCP SDKs send it; "no standalone stream" when none is open
  via_standalone  answers on the session's standalone stream and holds the
            call's own stream open (no answer there) for 10 s
  sample    sends sampling/createMessage inside the call's SSE stream with
            the call's arguments as its params (SAMPLE when none), answers
            with the answer
  progress  sends {"n": N} (default 5) notifications/progress with the call's
            _meta.progressToken, {"gap_ms": MS} apart (default 50), and one
            that goes back (to be ignored), then answers "done"

With --standalone a GET without Last-Event-ID opens the session's
(after --get-delay-ms, as on a loaded host)
standalone stream (an event with an id and `retry: 300` first), which
carries elicit_get's request; without it such a GET gets 405.

With --token T every request without "Authorization: Bearer T" gets 401.
Every JSON-RPC message received is appended to --log as one JSON line
{"session": ..., "msg": ...}; every 404 and 401 as {"status": N}; the
cut as {"cut": MS} and each GET as {"get": LAST_EVENT_ID, "ms": MS}
(wall-clock milliseconds).
"""
import argparse
import json
import os
import threading
import time
import uuid
from http.server import ThreadingHTTPServer

from jsonhttp import JsonHandler

TOOLS = ["ok", "ping_me", "ask", "forget", "cut", "cut_forget", "elicit", "elicit_get", "via_standalone", "progress",
         "sample"]
SAMPLE = {"messages": [{"role": "user", "content": {"type": "text", "text": "What is the capital of France?"}}],
          "systemPrompt": "You are a geography helper.", "maxTokens": 50,
          "modelPreferences": {"hints": [{"name": "claude-3-sonnet"}], "intelligencePriority": 0.8}}
DEFAULT_SCHEMA = {"type": "object", "required": ["name"], "properties": {
    "name": {"type": "string", "default": "Ada"}, "age": {"type": "integer", "default": 36},
    "score": {"type": "number", "default": 9.5}, "ok": {"type": "boolean", "default": True},
    "color": {"type": "string", "enum": ["red", "green"], "default": "green"}}}
lock = threading.Lock()
sessions = set()
waiting = {}                    # server request id -> [Event, answer]
pending = {}                    # session -> the answer a resumed stream brings
standalone = {}                 # session -> the Handler of its open standalone stream
args = None


def log(rec):
    with lock, open(args.log, "a") as f:
        f.write(json.dumps(rec) + "\n")


class Handler(JsonHandler):

    def do_DELETE(self):
        with lock:
            sessions.discard(self.headers.get("Mcp-Session-Id"))
        self.answer(200)

    def do_GET(self):
        sid, last = self.headers.get("Mcp-Session-Id"), self.headers.get("Last-Event-ID")
        log({"get": last, "ms": int(time.time() * 1000)})
        with lock:
            known = sid in sessions
        if not known:
            log({"status": 404})
            return self.answer(404)
        if last is None and args.standalone:
            time.sleep(args.get_delay_ms / 1000.0)  # a slow host: the client's next POST may come first
            return self.stream(sid)
        with lock:
            answer = pending.pop(sid, None) if last == "cut-1" else None
        if answer is None:
            return self.answer(405)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(b"id: cut-2\n")
        self.event(answer)

    def do_POST(self):
        if args.token and self.headers.get("Authorization") != "Bearer " + args.token:
            log({"status": 401})
            return self.answer(401, {"error": "unauthorized"},
                               [("WWW-Authenticate", 'Bearer resource_metadata="http://127.0.0.1/.well-known"')])
        n = int(self.headers.get("Content-Length") or 0)
        msg = json.loads(self.rfile.read(n))
        sid = self.headers.get("Mcp-Session-Id")
        log({"session": sid, "msg": msg})
        method, mid = msg.get("method"), msg.get("id")
        if method == "initialize":
            sid = uuid.uuid4().hex
            with lock:
                sessions.add(sid)
            return self.answer(200, {"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                "serverInfo": {"name": "http-test", "version": "1"}}}, [("Mcp-Session-Id", sid)])
        with lock:
            known = sid in sessions
        if not known:
            log({"status": 404})
            return self.answer(404, {"jsonrpc": "2.0", "id": None,
                                     "error": {"code": -32001, "message": "Session not found"}})
        if method is None:
            # the client's answer to one of our requests
            with lock:
                w = waiting.get(mid)
            if w:
                w[1] = msg
                w[0].set()
            return self.answer(202)
        if mid is None:
            return self.answer(202)
        if method == "tools/list":
            return self.answer(200, {"jsonrpc": "2.0", "id": mid, "result": {"tools": [
                {"name": t, "description": "test " + t, "inputSchema": {"type": "object", "properties": {}}}
                for t in TOOLS]}})
        if method == "tools/call":
            p = msg["params"]
            return self.call(mid, p["name"], sid, p.get("arguments"), (p.get("_meta") or {}).get("progressToken"))
        return self.answer(200, {"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no"}})

    def event(self, msg):
        self.wfile.write(b"event: message\ndata: " + json.dumps(msg).encode() + b"\n\n")
        self.wfile.flush()

    def stream(self, sid):
        """The session's standalone stream: open until the client leaves
        or the session ends; others write their events into it."""
        self.gone = threading.Event()
        with lock:              # before the headers: the client may call as soon as it has them
            standalone[sid] = self
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(b"id: s-1\nretry: 300\ndata: \n\n")
        self.wfile.flush()
        while not self.gone.wait(0.5):
            with lock:
                if sid not in sessions:
                    break
        with lock:
            if standalone.get(sid) is self:
                del standalone[sid]

    def ask(self, method, params, on=None):
        """Sends one request to the client in this stream; returns (answer, ms)."""
        rid = "srv-" + uuid.uuid4().hex[:8]
        w = [threading.Event(), None]
        with lock:
            waiting[rid] = w
        t0 = time.monotonic()
        try:
            (on or self).event({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        except OSError:
            on.gone.set()
            return None, 0
        w[0].wait(60)
        with lock:
            waiting.pop(rid, None)
        return w[1], int((time.monotonic() - t0) * 1000)

    def call(self, mid, name, sid, msg_args=None, token=None):
        def result(text):
            return {"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": text}]}}
        if name in ("cut", "cut_forget"):
            with lock:
                pending[sid] = result("resumed")
                if name == "cut_forget":
                    sessions.clear()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.write(b"id: cut-1\nretry: 300\ndata: \n\n")
            self.wfile.flush()
            log({"cut": int(time.time() * 1000)})
            self.close_connection = True
            return
        if name in ("ok", "forget"):
            self.answer(200, result("fine"))
            if name == "forget":
                with lock:
                    sessions.clear()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        if name in ("elicit", "elicit_get"):
            with lock:
                on = standalone.get(sid) if name == "elicit_get" else self
            if on is None:
                return self.event(result("no standalone stream"))
            a = msg_args or {}
            ans, ms = self.ask("elicitation/create", {"message": a.get("message", "who are you?"),
                                                      "requestedSchema": a.get("requestedSchema", DEFAULT_SCHEMA)}, on)
            return self.event(result(json.dumps(ans and {k: ans[k] for k in ans if k != "id"})))
        if name == "sample":
            ans, ms = self.ask("sampling/createMessage", msg_args or SAMPLE)
            return self.event(result(json.dumps(ans and {k: ans[k] for k in ans if k != "id"})))
        if name == "via_standalone":
            with lock:
                on = standalone.get(sid)
            if on is None:
                return self.event(result("no standalone stream"))
            self.wfile.write(b"id: v-1\ndata: \n\n")
            self.wfile.flush()
            time.sleep(0.3)     # the client is waiting on both streams by then
            on.event(result("answered on the standalone stream"))
            time.sleep(10)
            return
        if name == "progress":
            a = msg_args or {}
            for k in range(1, a.get("n", 5) + 1):
                self.event({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
                    "progressToken": token, "progress": k, "total": a.get("n", 5), "message": "step %d" % k}})
                time.sleep(a.get("gap_ms", 50) / 1000)
            self.event({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
                "progressToken": token, "progress": 1, "message": "back"}})
            return self.event(result("done"))
        if name == "ping_me":
            ans, ms = self.ask("ping", {})
            self.event(result("ping answer %s in %d ms" % (json.dumps(ans and {k: ans[k] for k in ans if k != "id"}),
                                                          ms)))
        else:
            out = []
            for method, params in (("elicitation/create", {"message": "name?", "requestedSchema": {"type": "object"}}),
                                   ("sampling/createMessage", {"messages": [], "maxTokens": 10}),
                                   ("roots/list", {})):
                ans, ms = self.ask(method, params)
                code = ans and ans.get("error", {}).get("code")
                roots = ans and ans.get("result", {}).get("roots")
                out.append("%s: %s in %d ms" % (method, code or json.dumps(roots), ms))
            self.event(result("; ".join(out)))


def main():
    global args
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--portfile", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--token")
    p.add_argument("--standalone", action="store_true")
    p.add_argument("--get-delay-ms", type=int, default=0)
    args = p.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    srv.daemon_threads = True
    tmp = args.portfile + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, args.portfile)
    srv.serve_forever()


if __name__ == "__main__":
    main()
