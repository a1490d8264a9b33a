"""The gateway runs nothing it refuses (docs/gateway.md, "Who can reach the
gateway, and what stops them"): every REST route, with every way of being
refused (no token, a wrong one, a foreign Host, a foreign Origin, a
cross-site fetch, the cookie without X-Switchboard) and every framing of
the body (Content-Length, Content-Length: 0 with query arguments, chunked,
a body sent after the refusal came back), leaves the sessions, their tapes
and their runs as they were. An admitted POST runs once, also with
Content-Length: 0. The cookie carries the port in its name."""

import json
import socket
import time

from sbtest import check, new_id, run_tests, tmpdir, wait_for
from gwtest import Gateway


def raw(gw, method, path, headers, body=b"", framing="length", timeout=10):
    """One request on a fresh socket, framed as asked: `length` (the body
    with its Content-Length), `zero` (Content-Length: 0, no body), `chunked`
    (Transfer-Encoding: chunked), `late` (Content-Length sent, the body only
    after the answer came back). Returns (status, parsed JSON or None)."""
    s = socket.create_connection(("127.0.0.1", gw.port), timeout=timeout)
    lines = ["%s %s HTTP/1.1" % (method, path)]
    h = {"Host": "127.0.0.1:%d" % gw.port}
    h.update(headers)
    if method == "POST":
        if framing == "chunked":
            h["Transfer-Encoding"] = "chunked"
        else:
            h["Content-Length"] = "0" if framing == "zero" else str(len(body))
    lines += ["%s: %s" % kv for kv in h.items() if kv[1] is not None]
    head = ("\r\n".join(lines) + "\r\n\r\n").encode()
    if method != "POST" or framing == "zero":
        s.sendall(head)
    elif framing == "chunked":
        s.sendall(head + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n")
    elif framing == "late":
        s.sendall(head)
    else:
        s.sendall(head + body)
    data = b""
    status, answer = None, None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            break
        if not chunk:
            break
        data += chunk
        if b"\r\n\r\n" in data:
            top, rest = data.split(b"\r\n\r\n", 1)
            fields = dict(l.split(b":", 1) for l in top.split(b"\r\n")[1:] if b":" in l)
            n = int(fields.get(b"content-length", b"0").strip() or 0)
            if len(rest) >= n:
                status = int(top.split()[1])
                try:
                    answer = json.loads(rest[:n]) if n else None
                except ValueError:
                    answer = rest[:n]
                break
    if framing == "late" and method == "POST":
        # then a second request on the same connection: its answer (or the
        # close) says the server has dealt with the late body
        try:
            s.sendall(body + b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            s.settimeout(timeout)
            more = b""
            while b"ok\n" not in more:
                chunk = s.recv(65536)
                if not chunk:
                    break
                more += chunk
        except OSError:
            pass
    s.close()
    return status, answer


def state(gw):
    """What a refused request must not change: every session, its tape and
    its runs, and the interactions."""
    status, body = gw.api("GET", "/api/sessions?limit=200")
    check(status == 200, "sessions: %d %r", status, body)
    out = {"sessions": body["sessions"]}
    for s in body["sessions"]:
        sid = s["session_id"]
        _, ev = gw.api("GET", "/api/sessions/%s/events?limit=1000" % sid)
        _, runs = gw.api("GET", "/api/runs?session=" + sid)
        out[sid] = (ev, runs)
    out["interactions"] = gw.api("GET", "/api/interactions")[1]
    return out


def routes(sid, rid, iid, ws):
    """Every REST route of docs/gateway.md, with a body that would do harm."""
    harm = {"workspace": "/", "approval_policy": "yolo"}
    return [
        ("POST", "/api/sessions", harm),
        ("POST", "/api/call/session.create", harm),
        ("POST", "/api/sessions?workspace=%s&approval_policy=yolo" % ws, None),
        ("POST", "/api/sessions/%s/prompt" % sid, {"text": "run id"}),
        ("POST", "/api/sessions/%s/prompt?text=id" % sid, None),
        ("POST", "/api/sessions/%s/update" % sid, {"approval_policy": "yolo"}),
        ("POST", "/api/sessions/%s/update?approval_policy=yolo" % sid, None),
        ("POST", "/api/sessions/%s/compact" % sid, {}),
        ("POST", "/api/sessions/%s/close" % sid, {}),
        ("POST", "/api/sessions/%s/delete" % sid, {}),
        ("POST", "/api/call/session.prompt", {"session_id": sid, "text": "id"}),
        ("POST", "/api/call/session.update", {"session_id": sid, "approval_policy": "yolo"}),
        ("POST", "/api/runs/%s/cancel" % rid, {}),
        ("POST", "/api/runs/%s/resume" % rid, {}),
        ("POST", "/api/interactions/%s/resolve" % iid, {"decision": "allow"}),
        ("GET", "/api/sessions", None),
        ("GET", "/api/sessions/" + sid, None),
        ("GET", "/api/sessions/%s/events?after=0" % sid, None),
        ("GET", "/api/sessions/%s/queue" % sid, None),
        ("GET", "/api/sessions/%s/diff" % sid, None),
        ("GET", "/api/runs?session=" + sid, None),
        ("GET", "/api/runs/" + rid, None),
        ("GET", "/api/interactions", None),
        ("GET", "/api/interactions/" + iid, None),
        ("GET", "/api/workers", None),
        ("GET", "/api/models", None),
        ("GET", "/metrics", None),
    ]


def refusals(gw):
    """(name, headers, the statuses that refuse) for each way to be refused."""
    good = "Bearer " + gw.token
    cookie = "sb_token_%d=%s" % (gw.port, gw.token)
    return [
        ("no token", {}, (401,)),
        ("wrong token", {"Authorization": "Bearer " + "0" * 64}, (401,)),
        ("old cookie name", {"Cookie": "sb_token=" + gw.token, "X-Switchboard": "1"}, (401,)),
        ("bad Host", {"Authorization": good, "Host": "evil.example"}, (403,)),
        ("foreign Origin", {"Cookie": cookie, "X-Switchboard": "1", "Origin": "http://127.0.0.1:1"}, (403,)),
        ("foreign Origin, bearer", {"Authorization": good, "Origin": "http://evil.example"}, (403,)),
        ("cross-site fetch", {"Cookie": cookie, "X-Switchboard": "1", "Sec-Fetch-Site": "same-site"}, (403,)),
    ]


def test_refused_requests_change_nothing():
    gw = Gateway()
    ws = tmpdir()
    status, body = gw.api("POST", "/api/sessions", {"workspace": ws, "title": "victim"})
    check(status == 200, "create: %d %r", status, body)
    sid = body["session"]["session_id"]
    before = state(gw)
    rid, iid = new_id(), new_id()
    tried, wrong = 0, []
    for name, headers, want in refusals(gw):
        for method, path, body in routes(sid, rid, iid, ws):
            data = json.dumps(body).encode() if body is not None else b""
            for framing in (("length", "zero", "chunked", "late") if method == "POST" else ("length",)):
                status, answer = raw(gw, method, path, headers, data, framing)
                if status not in want + (411,):
                    wrong.append("%s %s %s (%s): %r %r" % (name, method, path, framing, status, answer))
                tried += 1
    # the cookie alone never writes, even from our own origin
    cookie = {"Cookie": "sb_token_%d=%s" % (gw.port, gw.token), "Origin": gw.origin}
    for method, path, body in routes(sid, rid, iid, ws):
        if method == "POST":
            data = json.dumps(body).encode() if body is not None else b""
            for framing in ("length", "zero", "late"):
                status, answer = raw(gw, method, path, cookie, data, framing)
                if status != 403:
                    wrong.append("cookie without X-Switchboard: %s (%s): %r %r" % (path, framing, status, answer))
                tried += 1
    after = state(gw)
    check(after == before, "refused requests changed the state (%d sessions before, %d after):\nbefore %r\n"
          "after  %r", len(before["sessions"]), len(after["sessions"]), before, after)
    check(not wrong, "%d of %d refusals answered wrongly, the first: %s", len(wrong), tried, wrong[:3])
    _, _, metrics = gw.http("GET", "/metrics")
    text = metrics.decode()
    for counter in ("auth_failures_total", "host_refused_total", "origin_refused_total", "csrf_refused_total"):
        line = [l for l in text.splitlines() if l.startswith("sb_gateway_" + counter + " ")]
        check(line and int(line[0].split()[1]) > 0, "/metrics counts %s: %r", counter, line)
    print("  %d refused requests, nothing changed" % tried)


def test_a_post_runs_once():
    gw = Gateway()
    ws = tmpdir()
    auth = {"Authorization": "Bearer " + gw.token}
    status, body = raw(gw, "POST", "/api/sessions?workspace=%s" % ws, auth, b"", "zero")
    check(status == 200, "create with Content-Length: 0: %r %r", status, body)
    sid = body["session"]["session_id"]
    status, body = gw.api("GET", "/api/sessions")
    check(len(body["sessions"]) == 1, "Content-Length: 0 created %d sessions", len(body["sessions"]))
    status, body = raw(gw, "POST", "/api/sessions/%s/prompt?text=hello" % sid, auth, b"", "zero")
    check(status == 200 and body.get("run_id"), "prompt with Content-Length: 0: %r %r", status, body)
    status, runs = gw.api("GET", "/api/runs?session=" + sid)
    status, queue = gw.api("GET", "/api/sessions/%s/queue" % sid)
    check(len(runs["runs"]) + len(queue.get("items", queue.get("queue", []))) == 1,
          "one prompt with Content-Length: 0 made %r and queued %r", runs, queue)
    # with the body as usual, once too
    status, body = raw(gw, "POST", "/api/sessions", auth, json.dumps({"workspace": ws}).encode(), "length")
    check(status == 200, "create: %r %r", status, body)
    status, body = gw.api("GET", "/api/sessions")
    check(len(body["sessions"]) == 2, "two creates made %d sessions", len(body["sessions"]))
    # a chunked body (lws cannot read one) is refused, not half-read
    status, body = raw(gw, "POST", "/api/sessions", auth, json.dumps({"workspace": ws}).encode(), "chunked")
    check(status == 411, "chunked: %r %r", status, body)
    status, body = gw.api("GET", "/api/sessions")
    check(len(body["sessions"]) == 2, "the chunked create ran: %d sessions", len(body["sessions"]))


def test_the_browser_way():
    """The cookie (named with the port) with X-Switchboard from our own
    origin writes; the page load sets that cookie."""
    gw = Gateway()
    ws = tmpdir()
    status, h, _ = gw.http("GET", "/?token=" + gw.token, token=None)
    name = "sb_token_%d" % gw.port
    check(status == 303 and h.get("set-cookie", "").startswith("%s=%s;" % (name, gw.token)),
          "page load: %d %r", status, h)
    headers = {"Cookie": "%s=%s" % (name, gw.token), "X-Switchboard": "1", "Origin": gw.origin,
               "Sec-Fetch-Site": "same-origin"}
    status, body = raw(gw, "POST", "/api/sessions", headers, json.dumps({"workspace": ws}).encode())
    check(status == 200, "a write of our own page: %r %r", status, body)
    status, body = raw(gw, "GET", "/api/sessions", {"Cookie": "%s=%s" % (name, gw.token)})
    check(status == 200 and len(body["sessions"]) == 1, "a read with the cookie: %r %r", status, body)


if __name__ == "__main__":
    run_tests(globals())
