"""Issue 9, item 1: a peer that never reads cannot make the server grow.

High-water marks count messages, not bytes: a DEALER with a tiny receive
buffer that asked for many 8 MiB pages of the tape and never read grew
serve by every page it asked for, and subscribers that never read pinned
every event. Now the broker bounds in bytes what ZeroMQ holds per peer on
the command plane and per plane on the event plane and the tap
(SWITCHBOARD_BUS_QUEUE_BYTES); past the bound a reply becomes an
`overloaded` error and an event is dropped, each counted in bus.stats,
and the bytes come back when the peer goes away."""

import os
import sys

import zmq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import (Client, Server, check, context, make_header, pack, run_tests, start_actor, unpack,  # noqa: E402
                    wait_for)
from sbagent import NOTE, fill_session, hostile_dealer, ok_body, rss_anon, sanitized, type_count  # noqa: E402

REQUESTS = 100              # pages asked for and never read: 800 MB before the bound
MiB = 1 << 20


def test_client_that_never_reads_pages():
    with Server() as srv:
        sid = fill_session(srv, 1200)            # 9.6 MB: every page is the 8 MiB cap
        pid = srv.proc.p.pid
        base = rss_anon(pid)
        answered0 = type_count(srv, "session.events.ok")
        d = hostile_dealer(srv.endpoint("cmd"))
        try:
            for _ in range(REQUESTS):
                d.send_multipart([pack(make_header("session.events", frm="hostile", key=sid)),
                                  pack({"session_id": sid, "limit": 5000})])
            # the session service answers every one; the broker decides
            wait_for(lambda: type_count(srv, "session.events.ok") - answered0 >= REQUESTS, 40,
                     "the session service to answer %d pages" % REQUESTS)
            grew = rss_anon(pid) - base
            st = srv.stats()
            q, dropped = st["queues"], st.get("dropped", {})
            limit = q.get("queue_bytes_limit", 0)
            print("  %d unread 8 MiB pages: serve's RssAnon grew %.1f MiB (limit %.0f MiB per peer), "
                  "%d replies dropped (%.1f MiB)"
                  % (REQUESTS, grew / MiB, limit / MiB, dropped.get("cmd", 0),
                     dropped.get("cmd_bytes", 0) / MiB))
            # a page is 8 MiB: what the server holds is the bound, plus
            # what its actors and allocator keep, far from 800 MB
            check(sanitized() or grew < 64 * MiB + 96 * MiB, "serve grew by %d bytes", grew)
            check(limit == 64 * MiB, "the default bound is 64 MiB, got %d", limit)
            check(q["cmd_queued_bytes"] <= limit + 2 * SLACK, "%d bytes queued", q["cmd_queued_bytes"])
            check(dropped.get("cmd", 0) > 0, "no reply counted as dropped: %r", dropped)
            # someone else is still answered
            c = Client(srv.endpoint("cmd"), name="bystander")
            try:
                ok_body(c.request("session.events", {"session_id": sid, "limit": 1}, timeout=5), "bystander")
            finally:
                c.close()
            # the peer that reads at last gets its first pages, then a
            # clear error for each dropped one
            d.setsockopt(zmq.RCVHWM, 1000)
            pages = errors = 0
            while d.poll(2000):
                h, b = d.recv_multipart()
                h = unpack(h)
                if h["type"] == "session.events.ok":
                    pages += 1
                else:
                    b = unpack(b)
                    check(h["type"] == "error" and b["code"] == "overloaded", "got %r %r", h, b)
                    errors += 1
                if pages + errors == REQUESTS:
                    break
            check(pages + errors == REQUESTS, "%d pages + %d errors for %d requests", pages, errors, REQUESTS)
            check(pages >= 1 and errors >= 1, "%d pages, %d errors", pages, errors)
        finally:
            d.close(0)
        # the peer is gone: nothing stays queued for it
        wait_for(lambda: srv.stats()["queues"]["cmd_queued_bytes"] < MiB, 10,
                 "the gone peer's queue to be released")


SLACK = MiB


def test_stream_to_a_client_that_never_reads():
    # A streamed reply past the bound: one `overloaded` error, then the
    # rest of the stream goes nowhere, quietly (not as malformed replies),
    # and the request is forgotten when the stream ends.
    bound = MiB
    with Server(env=dict(os.environ, SWITCHBOARD_BUS_QUEUE_BYTES=str(bound))) as srv:
        start_actor(srv, instance="e-stream")
        before = srv.stats()
        d = hostile_dealer(srv.endpoint("cmd"))
        try:
            h = make_header("echo.stream", frm="hostile")
            d.send_multipart([pack(h), pack({"count": 100, "text": "s" * 60000})])
            wait_for(lambda: srv.stats()["types"].get("echo.stream.ok", 0) >= 1, 20, "the stream to end")
            st = srv.stats()
            check(st["queues"]["pending_requests"] == 0, "the request is still pending: %r", st["queues"])
            check(st["malformed"]["unmatched_reply"] == before["malformed"]["unmatched_reply"],
                  "the dropped stream was counted as malformed: %r", st["malformed"])
            check(st["dropped"]["cmd"] > 0, "nothing counted as dropped: %r", st["dropped"])
            d.setsockopt(zmq.RCVHWM, 1000)
            got = []
            while d.poll(1000):
                rh, rb = d.recv_multipart()
                rh = unpack(rh)
                got.append(rh["type"] if rh["type"] != "error" else "error:" + unpack(rb)["code"])
            chunks = got.count("echo.stream.chunk")
            print("  a 6 MB stream to a client that never reads: %d chunks, then %r" % (chunks, got[chunks:]))
            check(0 < chunks < 100 and got[chunks:] == ["error:overloaded"], "the client got %r", got)
        finally:
            d.close(0)


def slow_sub(srv, which, prefix):
    """A SUB with a tiny receive buffer that will never read."""
    s = context().socket(zmq.SUB)
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.RCVBUF, 4096)
    s.setsockopt(zmq.RCVHWM, 1)
    s.setsockopt(zmq.SUBSCRIBE, prefix)
    s.connect(srv.endpoint(which))
    return s


def subscribe_and_write(srv, sid, subs, batches):
    """Waits until every SUB in `subs` gets events, then appends `batches`
    batches of 400 8 KB notes (3.2 MB each)."""
    def subscribed():
        api = Client(srv.endpoint("cmd"), name="probe")
        try:
            ok_body(api.request("session.append", {"session_id": sid, "kind": "note", "body": {}}), "probe")
        finally:
            api.close()
        return all(s.poll(200) for s in subs)
    wait_for(subscribed, 10, "the subscriptions to reach the broker")
    base = rss_anon(srv.proc.p.pid)
    api = Client(srv.endpoint("cmd"), name="writer")
    try:
        for _ in range(batches):
            entries = [{"kind": "note", "body": {"text": NOTE}} for _ in range(400)]
            ok_body(api.request("session.append", {"session_id": sid, "entries": entries}, timeout=30), "append")
    finally:
        api.close()
    return base


def test_subscribers_that_never_read():
    bound = 4 * MiB
    with Server(env=dict(os.environ, SWITCHBOARD_BUS_QUEUE_BYTES=str(bound))) as srv:
        sid = fill_session(srv, 1)
        topic = ("session/%s" % sid).encode()
        subs = [slow_sub(srv, "pub", topic), slow_sub(srv, "pub", topic)]
        # and a tap observer that never reads either
        subs.append(slow_sub(srv, "tap", b""))
        pid = srv.proc.p.pid
        try:
            base = subscribe_and_write(srv, sid, subs, 24)     # 77 MB of events
            st = srv.stats()
            q, dropped = st["queues"], st.get("dropped", {})
            grew = rss_anon(pid) - base
            print("  2 unread subscribers and a tap, 77 MB of events: serve's RssAnon grew %.1f MiB; "
                  "event plane holds %.1f MiB (bound %.0f MiB), %d events dropped"
                  % (grew / MiB, q.get("evt_queued_bytes", -1) / MiB, bound / MiB, dropped.get("evt", 0)))
            check(sanitized() or grew < 48 * MiB, "serve grew by %d bytes", grew)
            check(q.get("queue_bytes_limit") == bound, "the bound is not configurable")
            check(q["evt_queued_bytes"] <= bound + 64 * 1024, "%d bytes held", q["evt_queued_bytes"])
            check(dropped.get("evt", 0) > 0, "no event counted as dropped: %r", dropped)
            check(q["tap_queued_bytes"] <= bound + 64 * 1024, "%d bytes held for the tap", q["tap_queued_bytes"])
            check(dropped.get("tap", 0) > 0, "no tap copy counted as dropped: %r", dropped)
        finally:
            for s in subs:
                s.close(0)
        # the subscribers are gone: the plane holds nothing for them
        wait_for(lambda: srv.stats()["queues"]["evt_queued_bytes"] < 64 * 1024, 10,
                 "the gone subscribers' events to be released")
        wait_for(lambda: srv.stats()["queues"]["tap_queued_bytes"] < 64 * 1024, 10,
                 "the gone tap observer's copies to be released")


def test_reader_unaffected_by_subscribers_that_never_read():
    # Under the default bound, subscribers that never read pin at most
    # their HWM of events each; a subscriber that reads still gets every
    # event, and nothing is dropped for it.
    with Server() as srv:
        sid = fill_session(srv, 1)
        topic = ("session/%s" % sid).encode()
        slow = [slow_sub(srv, "pub", topic), slow_sub(srv, "pub", topic)]
        reader = context().socket(zmq.SUB)
        reader.setsockopt(zmq.LINGER, 0)
        reader.setsockopt(zmq.RCVHWM, 0)
        reader.setsockopt(zmq.SUBSCRIBE, topic)
        reader.connect(srv.endpoint("pub"))
        try:
            subscribe_and_write(srv, sid, slow + [reader], 12)
            last = srv.stats()
            seqs = set()
            while reader.poll(1000):
                seqs.add(unpack(reader.recv_multipart()[2])["seq"])
            head = ok_body(Client(srv.endpoint("cmd"), name="head").request(
                "session.get", {"session_id": sid}), "get")["session"]["last_seq"]
            missing = [n for n in range(head - 4800 + 1, head + 1) if n not in seqs]
            print("  reader: %d of 4800 events; dropped %r; queues %r" % (4800 - len(missing), last.get("dropped"), last["queues"]))
            check(not missing, "the reader missed %d of 4800 events, first %r", len(missing), missing[:5])
            check(last.get("dropped", {}).get("evt", 0) == 0, "events dropped: %r", last.get("dropped"))
        finally:
            for s in slow + [reader]:
                s.close(0)


if __name__ == "__main__":
    run_tests(globals())
