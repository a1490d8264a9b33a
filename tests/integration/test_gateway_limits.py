"""The gateway under hostile or slow clients (docs/gateway.md): a frame
over 1 MiB closes the connection and nothing else; 10,000 bad frames get
10,000 errors on an open connection; a reader that stops gets resync
while the server's memory stays flat; a client that floods calls is
paused with lws_rx_flow_control and loses no reply; connection limits."""

import json
import os
import socket
import threading

from sbtest import Client, check, run_tests, tmpdir, wait_for
from gwtest import Gateway, append_batches, websocket


def _session(gw):
    status, body = gw.api("POST", "/api/sessions", {"workspace": tmpdir()})
    check(status == 200, "create: %d %r", status, body)
    return body["session"]["session_id"]


def test_frame_over_1mib_closes_and_server_lives():
    gw = Gateway()
    w = gw.ws()
    ok = json.dumps({"op": "ping", "tx": 1, "pad": "x" * (1024 * 1024 - 100)})
    check(len(ok) < 1024 * 1024, "a frame just under 1 MiB")
    w.send(ok)
    r = w.wait(lambda f: f.get("tx") == 1)
    check(r["type"] == "pong", "just under 1 MiB is served: %r", r)
    w.send("x" * (1024 * 1024 + 1))
    closed = False
    try:
        w.sock.settimeout(10)
        op, data = w.sock.recv_data(control_frame=True)
        closed = op == websocket.ABNF.OPCODE_CLOSE
        if closed:
            code = int.from_bytes(data[:2], "big")
            check(code == 1009, "close code %d", code)
    except (websocket.WebSocketConnectionClosedException, ConnectionError):
        closed = True
    check(closed, "a frame over 1 MiB did not close the connection")
    check(gw.alive(), "the server died")


def test_ten_thousand_bad_frames():
    gw = Gateway()
    w = gw.ws()
    deep = "[" * 40 + "]" * 40
    bad = [
        ("not json at all", "invalid"),
        ('{"op": "call", "tx": 1, "type": 42}', "invalid"),
        ('{"op": 7}', "invalid"),
        ('{"op": "dance", "tx": 2}', "invalid"),
        ('{"op": "call", "tx": 3, "type": "session.get", "body": []}', "invalid"),
        ('{"op": "call", "tx": 4, "type": "session.get", "body": {"x": ' + deep + '}}', "invalid"),
        ('[1, 2, 3]', "invalid"),
        ('{"op": "subscribe", "tx": 5, "session_id": "short"}', "invalid"),
        ('{"op": "call", "tx": {"a": 1}, "type": "session.list"}', "invalid"),
        ('{"op": "call", "tx": 6, "type": "run.heartbeat", "body": {}}', "forbidden"),
        ('\u00ff\u00fe{"op":', "invalid"),
        ('{"a": 1, "a": 2}', "invalid"),
    ]
    n = 10000
    got = {"errors": 0, "other": []}

    def reader():
        while got["errors"] + len(got["other"]) < n:
            f = w.recv(timeout=30)
            if f.get("op") == "error":
                got["errors"] += 1
            else:
                got["other"].append(f)

    t = threading.Thread(target=reader)
    t.start()
    for k in range(n):
        text, _ = bad[k % len(bad)]
        w.send(text)
    t.join(60)
    check(got["errors"] == n and not got["other"], "errors %d of %d, other %r", got["errors"], n, got["other"][:3])
    check(w.call_op("ping", {})["type"] == "pong", "the same connection still answers")
    # binary frames are answered too
    w.sock.send_binary(b"\x00\x01")
    r = w.wait(lambda f: f.get("op") == "error")
    check(r["code"] == "invalid" and "text" in r["message"], "binary: %r", r)
    status, _, data = gw.http("GET", "/metrics")
    text = data.decode()
    check("sb_gateway_ws_bad_frames_total" in text, "metrics: %s", text[:300])


def test_slow_reader_gets_resync_and_memory_stays_flat():
    gw = Gateway(args=["--http-out-max", "1048576"])
    sid = _session(gw)
    bus = Client(gw.srv.endpoint("cmd"), name="gwtest")
    # a client that subscribes and then reads nothing, on a small socket buffer
    slow = websocket.create_connection("ws://127.0.0.1:%d/ws?token=%s" % (gw.port, gw.token),
                                       origin=gw.origin, timeout=10,
                                       sockopt=[(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)])
    slow.send(json.dumps({"op": "subscribe", "tx": 1, "session_id": sid, "after_seq": 0}))
    fast = gw.ws()
    check(fast.call_op("subscribe", {"session_id": sid, "after_seq": 0})["type"] == "subscribed", "fast")
    seqs = []

    def read_fast():
        while not seqs or seqs[-1] < 1501:
            f = fast.recv(timeout=30)
            if f.get("op") == "event":
                seqs.append(f["seq"])

    reader = threading.Thread(target=read_fast)
    reader.start()
    base = gw.rss_kb()
    # 24 MB of tape through a reader that reads nothing, while another
    # keeps up (each batch waits until the fast one has it)
    last = 1
    for k in range(150):
        last = append_batches(bus, sid, 10, size=16000, batch=10)
        wait_for(lambda: seqs and seqs[-1] >= last, 20, "the fast reader to reach %d" % last)
    check(last == 1501, "appends: %d", last)
    grown = gw.rss_kb() - base
    # under AddressSanitizer freed memory waits in its quarantine (256 MiB)
    bound = (16 + (320 if os.environ.get("SB_ASAN") else 0)) * 1024
    check(grown < bound, "the server grew by %d KiB for one slow reader", grown)
    print("  serve grew by %d KiB while 24 MB went past a reader that reads nothing" % grown)
    reader.join(60)
    # the fast reader got everything, in order
    check(seqs == list(range(1, 1502)), "the fast reader: %d events", len(seqs))
    # the slow one, once it reads, finds a resync after what was queued
    slow.settimeout(20)
    frames = []
    while True:
        f = json.loads(slow.recv())
        frames.append(f)
        if f.get("op") == "resync":
            break
    events = [f["seq"] for f in frames if f.get("op") == "event"]
    check(frames[-1] == {"op": "resync", "session_id": sid, "reason": "slow_reader"}, "resync: %r", frames[-1])
    check(events == list(range(1, len(events) + 1)) and len(events) < 1501,
          "before the resync: %d events in order", len(events))
    # it resubscribes from its cursor and catches up exactly
    slow.send(json.dumps({"op": "subscribe", "tx": 2, "session_id": sid, "after_seq": events[-1]}))
    more = []
    while not more or more[-1] < 1501:
        f = json.loads(slow.recv())
        if f.get("op") == "event":
            more.append(f["seq"])
    check(more == list(range(events[-1] + 1, 1502)), "after resubscribing: %s..%s", more[:2], more[-2:])
    slow.close()
    bus.close()


def test_flooding_client_is_paused_not_resynced():
    gw = Gateway()
    sid = _session(gw)
    w = gw.ws()
    n = 3000
    # calls sent without reading a reply: the server stops reading from
    # this client for a while instead of queueing without end
    for k in range(n):
        w.send({"op": "call", "tx": k, "type": "session.get", "body": {"session_id": sid}})
    seen = set()
    while len(seen) < n:
        f = w.recv(timeout=30)
        check(f.get("op") == "reply" and f["type"] == "session.get.ok", "flood answer: %r", f)
        seen.add(f["tx"])
    check(seen == set(range(n)), "every call answered once")
    _, _, data = gw.http("GET", "/metrics")
    metrics = dict(line.split(" ", 1) for line in data.decode().splitlines() if line and not line.startswith("#"))
    check(int(metrics["sb_gateway_ws_flow_paused_total"]) > 0, "reading was never paused: %r",
          metrics.get("sb_gateway_ws_flow_paused_total"))
    check(int(metrics["sb_gateway_ws_resyncs_total"]) == 0, "a flooding client got resync")


def test_connection_limits():
    gw = Gateway(args=["--http-max-conns", "6", "--http-max-per-addr", "4"])
    held = [gw.ws() for _ in range(4)]
    try:
        gw.ws()
        check(False, "a fifth connection from one address was accepted")
    except websocket.WebSocketBadStatusException as e:
        check(e.status_code == 503, "per-address limit: %r", e)
    held.pop().close()
    # the slot comes back once the server has seen the close
    def reconnect():
        try:
            held.append(gw.ws())
            return True
        except websocket.WebSocketBadStatusException:
            return False
    wait_for(reconnect, 10, "the freed slot to come back")
    for w in held:
        check(w.call_op("ping", {})["type"] == "pong", "a held connection")
        w.close()


run_tests(globals())
