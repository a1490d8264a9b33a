"""Memory in total (docs/gateway.md, limits; docs/operations.md, bounded
queues): peers that ask and never read cannot grow serve past bounds
derived from its configured limits, however many of them there are.

- WebSockets that pipeline large calls and never read: each connection's
  queue holds at most --http-out-max (every byte counted, replies to
  pipelined calls too), all of them together --http-out-total; a reply
  past a bound becomes `overloaded` for its call, so every call is still
  answered exactly once.
- Bus peers that never read: each holds at most the per-peer bound, all
  of them together SWITCHBOARD_BUS_QUEUE_TOTAL_BYTES (four per-peer
  bounds by default)."""

import json
import os
import socket
import sys


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Client, check, make_header, pack, run_tests, wait_for  # noqa: E402
from sbagent import fill_session, hostile_dealer, rss_anon, sanitized, type_count  # noqa: E402
from gwtest import Gateway, websocket  # noqa: E402

MiB = 1 << 20


def metrics(gw):
    _, _, data = gw.http("GET", "/metrics")
    return {l.split()[0]: int(l.split()[1]) for l in data.decode().splitlines()
            if l.startswith("sb_gateway_") and len(l.split()) == 2}


def test_websockets_that_pipeline_and_never_read():
    out_max, out_total, conns, calls, bus_q = 1 * MiB, 4 * MiB, 10, 130, 8 * MiB
    # the gateway is one bus peer: the replies the broker holds for it are
    # bounded by the bus's per-peer bound, set here so that the bound below
    # is derived from it (by default it is 64 MiB)
    gw = Gateway(args=["--http-out-max", str(out_max), "--http-out-total", str(out_total)],
                 env={"SWITCHBOARD_BUS_QUEUE_BYTES": str(bus_q)})
    sid = fill_session(gw.srv, 1200)
    page = {"session_id": sid, "limit": 100}        # about 1 MB of JSON each
    pid = gw.pid()
    base = rss_anon(pid)
    answered0 = type_count(gw.srv, "session.events.ok")
    calls0 = metrics(gw).get("sb_gateway_calls_total", 0)
    socks = []
    for c in range(conns):
        w = websocket.create_connection("ws://127.0.0.1:%d/ws?token=%s" % (gw.port, gw.token),
                                        origin=gw.origin, timeout=30, skip_utf8_validation=True,
                                        sockopt=[(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)])
        for k in range(calls):
            w.send(json.dumps({"op": "call", "tx": k, "type": "session.events", "body": page}))
        socks.append(w)
    # the gateway reads calls until its bounds pause it; wait until the
    # session service has answered every call the gateway passed on
    peak = [0]

    def all_answered():
        peak[0] = max(peak[0], rss_anon(pid) - base)
        sent = metrics(gw).get("sb_gateway_calls_total", 0) - calls0
        return sent >= conns and type_count(gw.srv, "session.events.ok") - answered0 >= sent
    wait_for(all_answered, 120, "the session service to answer every call the gateway sent", interval=0.2)
    m = metrics(gw)
    grew = max(peak[0], rss_anon(pid) - base)
    # the bound: every connection's queue (out_total), the answers on their
    # way to them (out_total), the broker's queue for the gateway (bus_q),
    # one frame being written per connection, and what the allocator and
    # the session service keep
    bound = 2 * out_total + bus_q + conns * (out_max + 2 * MiB) + 48 * MiB
    print("  %d WebSockets x %d pipelined 1 MB calls, never read: serve's RssAnon grew %.1f MiB (bound %.0f), "
          "%d bytes queued, %d at most in the handoff, %d replies dropped"
          % (conns, calls, grew / MiB, bound / MiB, m.get("sb_gateway_ws_queued_bytes", -1),
             m.get("sb_gateway_handoff_peak_bytes", -1), m.get("sb_gateway_ws_replies_dropped_total", -1)))
    check(sanitized() or grew < bound, "serve grew by %.1f MiB (bound %.1f MiB)", grew / MiB, bound / MiB)
    check(0 < m.get("sb_gateway_handoff_peak_bytes", 0) <= out_total,
          "%r bytes of answers on their way to the connections at most (bound %d)",
          m.get("sb_gateway_handoff_peak_bytes"), out_total)
    check(m.get("sb_gateway_ws_queued_bytes", out_total + 1) <= out_total,
          "%r bytes queued for all WebSockets (bound %d)", m.get("sb_gateway_ws_queued_bytes"), out_total)
    check(m.get("sb_gateway_ws_replies_dropped_total", 0) > 0, "no reply was refused: %r", m)
    # one client reads at last: every call is answered exactly once, a
    # reply or `overloaded`
    w = socks[0]
    w.settimeout(30)
    seen = {}
    while len(seen) < calls:
        f = json.loads(w.recv())
        if f.get("tx") is not None:
            check(f["tx"] not in seen, "tx %r answered twice", f["tx"])
            check(f["op"] == "reply" or f.get("code") == "overloaded", "answer %r", {k: f[k] for k in f if k != "body"})
            seen[f["tx"]] = f["op"]
    check(sorted(seen) == list(range(calls)), "answers for %d calls", len(seen))
    print("  the reader got %d replies and %d overloaded" % (list(seen.values()).count("reply"),
                                                            list(seen.values()).count("error")))
    for w in socks:
        w.close()
    # every byte counted in is counted out: the total comes back to 0
    wait_for(lambda: metrics(gw).get("sb_gateway_ws_queued_bytes") == 0, 30, "the WebSocket queues to empty")
    check(gw.alive(), "the gateway no longer answers")


def test_bus_peers_that_never_read():
    per_peer = 8 * MiB
    gw = Gateway(env={"SWITCHBOARD_BUS_QUEUE_BYTES": str(per_peer)})
    srv = gw.srv
    sid = fill_session(srv, 1200)                   # every page of 5,000 is the 8 MiB cap
    pid = srv.proc.p.pid
    base = rss_anon(pid)
    answered0 = type_count(srv, "session.events.ok")
    peers, asks = 30, 3
    dealers = [hostile_dealer(srv.endpoint("cmd")) for _ in range(peers)]
    try:
        for d in dealers:
            for _ in range(asks):
                d.send_multipart([pack(make_header("session.events", frm="hostile", key=sid)),
                                  pack({"session_id": sid, "limit": 5000})])
        wait_for(lambda: type_count(srv, "session.events.ok") - answered0 >= peers * asks, 120,
                 "the session service to answer %d pages" % (peers * asks))
        grew = rss_anon(pid) - base
        st = srv.stats()
        q = st["queues"]
        total = q.get("queue_total_limit", 0)
        print("  %d peers x %d unread 8 MiB pages: serve's RssAnon grew %.1f MiB, %.1f MiB queued "
              "(limit %.0f MiB per peer, %.0f in all)"
              % (peers, asks, grew / MiB, q["cmd_queued_bytes"] / MiB, q["queue_bytes_limit"] / MiB, total / MiB))
        # the total, what the session service's pages and the allocator keep
        bound = 4 * per_peer + 96 * MiB
        check(sanitized() or grew < bound, "serve grew by %.1f MiB (bound %.0f MiB)", grew / MiB, bound / MiB)
        check(q["cmd_queued_bytes"] <= 4 * per_peer + 2 * MiB, "%d bytes queued (total bound %d)",
              q["cmd_queued_bytes"], 4 * per_peer)
        check(total == 4 * per_peer, "the total bound is four per-peer bounds: %r", q)
        # a bystander is still answered
        c = Client(srv.endpoint("cmd"), name="bystander")
        try:
            m = c.request("session.events", {"session_id": sid, "limit": 1}, timeout=10)
            check(not m.is_error(), "bystander: %r", m)
        finally:
            c.close()
    finally:
        for d in dealers:
            d.close(0)


if __name__ == "__main__":
    run_tests(globals())
