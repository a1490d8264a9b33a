"""Idle WebSockets (docs/gateway.md, Limits): with `serve --http-idle S` the
gateway pings a WebSocket that has been quiet for S seconds and closes it
when no pong came S seconds later. A client that answers pings stays open
through many intervals; one that completed the handshake and then never
reads or answers is closed within 2*S, and the connection count drops."""

import base64
import os
import re
import socket
import threading
import time

from sbtest import check, run_tests, sb, wait_for
from gwtest import Gateway, websocket

IDLE_S = 2
# the bound is 2*IDLE_S; what a loaded machine adds to the server's timer
# and to this test's polling comes on top (the measured figure is printed)
SLACK_S = 15


def _metric(gw, name):
    status, _, data = gw.http("GET", "/metrics")
    check(status == 200, "metrics: %d", status)
    m = re.search(rb"^sb_gateway_%s (\d+)$" % name.encode(), data, re.M)
    check(m, "no sb_gateway_%s in /metrics", name)
    return int(m.group(1))


def _ws_connections(gw):
    return _metric(gw, "ws_connections")


def _raw_handshake(gw):
    """A TCP socket that completes the WebSocket handshake; the caller then
    never reads from it nor answers anything."""
    s = socket.create_connection(("127.0.0.1", gw.port), timeout=10)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall(("GET /ws?token=%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nOrigin: %s\r\n"
               "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
               "Sec-WebSocket-Version: 13\r\n\r\n" % (gw.token, gw.port, gw.origin, key)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        check(chunk, "the server closed during the handshake: %r", head)
        head += chunk
    check(head.startswith(b"HTTP/1.1 101"), "handshake: %r", head[:200])
    return s, head.split(b"\r\n\r\n", 1)[1]


def test_idle_client_that_answers_stays_dead_one_is_closed():
    gw = Gateway(args=["--http-idle", str(IDLE_S)])
    check(_ws_connections(gw) == 0, "no WebSocket yet")

    # the live client: websocket-client answers each ping with a pong as
    # it reads; the thread counts the pings it saw
    live = gw.ws()
    pings = []
    stop = threading.Event()
    failed = []

    def read_live():
        try:
            live.sock.settimeout(1)
            while not stop.is_set():
                try:
                    op, _ = live.sock.recv_data_frame(control_frame=True)
                except websocket.WebSocketTimeoutException:
                    continue
                if op == websocket.ABNF.OPCODE_PING:
                    pings.append(time.monotonic())
                elif op == websocket.ABNF.OPCODE_CLOSE:
                    failed.append("closed by the server")
                    return
        except Exception as e:  # the connection went: the check below says so
            failed.append(repr(e))

    reader = threading.Thread(target=read_live, daemon=True)
    reader.start()

    # the dead client: handshake, then silence
    t0 = time.monotonic()       # before the handshake: the server's timer starts after it
    dead, _ = _raw_handshake(gw)
    # a counter that only grows: a check that comes late cannot miss it
    wait_for(lambda: _metric(gw, "ws_opened_total") == 2, 10, "both WebSockets to be counted")
    wait_for(lambda: _ws_connections(gw) == 1, 2 * IDLE_S + SLACK_S,
             "the dead WebSocket to be closed", interval=0.05)
    took = time.monotonic() - t0
    print("  the dead WebSocket was closed after %.2f s (bound %d s)" % (took, 2 * IDLE_S))
    # lws's timers never fire early: the first ping is due after IDLE_S,
    # the close IDLE_S later
    check(took >= 2 * IDLE_S - 0.1, "closed after %.2f s, before the bound of %d s", took, 2 * IDLE_S)
    # what the dead client was sent: at least one ping (opcode 0x89), then
    # the end of the stream
    dead.settimeout(10)
    got = b""
    try:
        while True:
            chunk = dead.recv(65536)
            if not chunk:
                break
            got += chunk
    except ConnectionResetError:
        pass
    dead.close()
    check(got[:1] == b"\x89", "the dead client was sent %r, not a ping", got[:16])

    # the live one outlives several intervals, pinged and answering
    wait_for(lambda: len(pings) >= 3 or failed, 3 * IDLE_S + SLACK_S, "three pings to the live client")
    check(not failed, "the live client: %s", failed)
    stop.set()
    reader.join(10)
    check(not reader.is_alive(), "the reader thread did not stop")
    r = live.call_op("ping", {})
    check(r.get("type") == "pong", "the live client still answers: %r", r)
    check(_ws_connections(gw) == 1, "the live client is still counted")
    print("  the live client was pinged %d times in %.1f s and stayed open"
          % (len(pings), time.monotonic() - t0))
    live.close()
    wait_for(lambda: _ws_connections(gw) == 0, 10, "the live client's close to be counted")


def test_http_idle_is_checked():
    for bad in ("0", "3601", "x", "-1"):
        rc, _, err = sb("serve", "--http-idle", bad)
        check(rc == 2, "--http-idle %s: exit %d", bad, rc)
        check("--http-idle" in err, "--http-idle %s: %r", bad, err)


if __name__ == "__main__":
    run_tests(globals())
