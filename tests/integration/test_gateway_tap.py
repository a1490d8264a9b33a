"""The bus tap over the WebSocket (docs/gateway.md, issue 11): op tap
streams every bus message as `switchboard tap --json` renders it, a
filter keeps a type or topic prefix, untap stops it, a reader that reads
nothing loses its tap with a resync, and only a connection with the token
gets one."""

import json
import os
import socket

from sbtest import Client, check, run_tests, tmpdir, wait_for
from gwtest import Gateway, append_batches, websocket


def _taps(w, pred, timeout=10, what="tap frame"):
    return w.wait(lambda f: f.get("op") == "tap" and pred(f), timeout, what)


def heartbeats(gw):
    """How many heartbeats the broker has seen."""
    return gw.srv.stats().get("types", {}).get("bus.heartbeat", 0)


def metric(gw, name):
    """The gateway's counter sb_gateway_NAME from /metrics."""
    status, _, body = gw.http("GET", "/metrics")
    check(status == 200, "/metrics answered %d", status)
    for line in body.decode().splitlines():
        if line.startswith("sb_gateway_" + name + " "):
            return float(line.split()[1])
    raise AssertionError("no sb_gateway_%s in /metrics" % name)


def test_tap_shows_calls():
    gw = Gateway()
    w = gw.ws()
    r = w.call_op("tap", {})
    check(r["op"] == "reply" and r["type"] == "tapping" and r["body"] == {"filter": ""}, "tap: %r", r)
    r = w.call("session.list", {"limit": 3})
    check(r["type"] == "session.list.ok", "list: %r", r)
    req = _taps(w, lambda f: f["header"]["type"] == "session.list", what="session.list on the tap")
    check(req["plane"] == "cmd" and "peer" in req and req["body"] == {"limit": 3}, "request: %r", req)
    check(isinstance(req["size"], int) and req["size"] > 0 and req["ts"] > 1e12, "size/ts: %r", req)
    ok = _taps(w, lambda f: f["header"]["type"] == "session.list.ok", what="the reply on the tap")
    check(ok["header"]["corr"] == req["header"]["id"], "corr: %r / %r", ok["header"], req["header"])
    # heartbeats are hidden, as `switchboard tap` hides them: two pass the
    # broker while we tap, and a call after them shows on the tap (which
    # keeps the broker's order) before the backlog is read
    beats0 = heartbeats(gw)
    wait_for(lambda: heartbeats(gw) >= beats0 + 2, 10, "two heartbeats through the broker")
    w.call("session.list", {"limit": 5})
    _taps(w, lambda f: f["header"]["type"] == "session.list" and f["body"] == {"limit": 5},
          what="the call after the heartbeats on the tap")
    beats = [f for f in w.backlog if f.get("op") == "tap" and "heartbeat" in f["header"]["type"]]
    check(not beats, "heartbeats on the tap: %r", beats[:2])
    # untap stops the stream
    r = w.call_op("untap", {})
    check(r["type"] == "untapped" and r["body"]["was_tapping"] is True, "untap: %r", r)
    w.backlog.clear()
    # a second connection still taps: once it has the call's reply, any tap
    # frame for the first would have been queued, and a ping brings it
    witness = gw.ws()
    witness.call_op("tap", {"filter": "session.list"})
    w.call("session.list", {"limit": 4})
    req = _taps(witness, lambda f: f["header"]["type"] == "session.list" and f["body"] == {"limit": 4},
                what="the call after untap on another connection's tap")
    _taps(witness, lambda f: f["header"]["type"] == "session.list.ok" and f["header"]["corr"] == req["header"]["id"],
          what="its reply on another connection's tap")
    w.call_op("ping", {})
    left = [f for f in w.backlog if f.get("op") == "tap" and f["header"]["type"] == "session.list"
            and f["body"] == {"limit": 4}]
    check(not left, "tap frames after untap: %r", left)
    r = w.call_op("untap", {})
    check(r["body"]["was_tapping"] is False, "untap twice: %r", r)


def test_tap_filter():
    gw = Gateway()
    w = gw.ws()
    r = w.call_op("tap", {"filter": "session.create"})
    check(r["type"] == "tapping" and r["body"]["filter"] == "session.create", "tap: %r", r)
    w.call("session.list", {})
    r = w.call("session.create", {"workspace": tmpdir(), "title": "tap"})
    check(r["type"] == "session.create.ok", "create: %r", r)
    f = _taps(w, lambda f: f["header"]["type"] == "session.create.ok", what="session.create.ok")
    check(f["body"]["session"]["title"] == "tap", "create.ok: %r", f)
    w.call_op("ping", {})
    types = {f["header"]["type"] for f in w.backlog if f.get("op") == "tap"}
    check(all(t.startswith("session.create") for t in types), "filtered: %r", types)
    # a topic prefix matches event-plane messages too
    sid = r["body"]["session"]["session_id"]
    r = w.call_op("tap", {"filter": "session/"})
    check(r["type"] == "tapping", "retap: %r", r)
    bus = Client(gw.srv.endpoint("cmd"), name="taptest")
    append_batches(bus, sid, 1, batch=1)
    f = _taps(w, lambda f: f["plane"] == "evt", what="an event on session/")
    check(f["topic"] == "session/" + sid, "topic: %r", f)
    bus.close()
    for bad in (42, "x" * 65):
        r = w.call_op("tap", {"filter": bad})
        check(r["op"] == "error" and r["code"] == "invalid", "filter %r: %r", bad, r)


def test_tapping_means_the_tap_is_live():
    """The `tapping` reply comes once the gateway's subscription to the
    broker's tap is in force: a call made right after it is on the tap,
    every time, also when no one tapped before (the subscription is made
    then) and after the last tap ended (it was dropped)."""
    gw = Gateway()
    w = gw.ws()
    for k in range(20):
        r = w.call_op("tap", {"filter": "session.list"})
        check(r["op"] == "reply" and r["type"] == "tapping", "tap: %r", r)
        w.call("session.list", {"limit": 100 + k})
        _taps(w, lambda f: f["header"]["type"] == "session.list" and f["body"] == {"limit": 100 + k},
              timeout=5, what="the call made right after `tapping` (round %d)" % k)
        r = w.call_op("untap", {})
        check(r["type"] == "untapped", "untap: %r", r)


def test_tap_needs_the_token():
    gw = Gateway()
    for token in (None, "f" * 64):
        try:
            w = gw.ws(token=token)
            w.send({"op": "tap", "tx": 1})
            check(False, "a WebSocket without the token could tap")
        except websocket.WebSocketBadStatusException as e:
            check(e.status_code == 401, "no token: %r", e)


def test_slow_tap_reader_gets_resync():
    gw = Gateway(args=["--http-out-max", "1048576"])
    slow = websocket.create_connection("ws://127.0.0.1:%d/ws?token=%s" % (gw.port, gw.token),
                                       origin=gw.origin, timeout=10,
                                       sockopt=[(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)])
    slow.send(json.dumps({"op": "tap", "tx": 1}))
    w = gw.ws()
    r = w.call("session.create", {"workspace": tmpdir(), "title": "slow"})
    sid = r["body"]["session"]["session_id"]
    bus = Client(gw.srv.endpoint("cmd"), name="taptest")
    base = gw.rss_kb()
    for k in range(40):
        append_batches(bus, sid, 10, size=16000, batch=10)
    # the gateway dropped the reader's tap, and has read all the tap carried
    # (a call made after the appends shows on another connection's tap)
    wait_for(lambda: metric(gw, "ws_resyncs_total") >= 1, 20, "the slow tap reader's resync")
    w.call_op("tap", {"filter": "session.list"})
    w.call("session.list", {"limit": 6})
    _taps(w, lambda f: f["header"]["type"] == "session.list" and f["body"] == {"limit": 6},
          what="a call after the appends on the tap")
    grown = gw.rss_kb() - base
    print("  serve grew by %d KiB with a tap reader that reads nothing" % grown)
    # under AddressSanitizer freed memory waits in its quarantine (256 MiB)
    bound = (16 + (320 if os.environ.get("SB_ASAN") else 0)) * 1024
    check(grown < bound, "the server grew by %d KiB for one slow tap reader", grown)
    slow.settimeout(20)
    seen = 0
    while True:
        f = json.loads(slow.recv())
        if f.get("op") == "resync":
            break
        seen += 1
    check(f == {"op": "resync", "reason": "slow_reader", "tap": True}, "resync: %r", f)
    print("  %d frames before the resync" % seen)
    # the connection is still good, and it may tap again
    slow.send(json.dumps({"op": "tap", "tx": 2}))
    while True:
        f = json.loads(slow.recv())
        if f.get("tx") == 2:
            break
    check(f["type"] == "tapping", "tap again: %r", f)
    slow.close()
    bus.close()
    check(gw.alive(), "the server still answers")


run_tests(globals())
