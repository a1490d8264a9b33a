"""An outside client speaks the bus with nothing but python3-zmq and
python3-msgpack (docs/protocol.md): a request and its reply, a subscription
that receives a published session.event, and the tap decoded, with the
client's own request on it. Uses raw pyzmq here on purpose, not the
sbtest helpers, so this file is also the reference for such a client."""

import os
import sys
import time
import uuid

import msgpack
import zmq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Server, check, new_id, run_tests, start_actor  # noqa: E402


def header(type, **kw):
    h = {"type": type, "id": new_id(), "ts": int(time.time() * 1000), "from": "outside"}
    h.update(kw)
    return h


def recv_until(sock, pred, timeout):
    """Reads multipart messages until pred(frames) is true; returns those
    frames or None at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not sock.poll(int(left * 1000) + 1):
            return None
        frames = sock.recv_multipart()
        if pred(frames):
            return frames


def test_request_and_reply():
    with Server() as srv:
        start_actor(srv, instance="e-out")
        ctx = zmq.Context.instance()
        d = ctx.socket(zmq.DEALER)
        d.setsockopt(zmq.LINGER, 0)
        d.connect("ipc://%s/bus-cmd" % srv.data)
        try:
            h = header("echo.ping", deadline=int(time.time() * 1000) + 5000)
            d.send_multipart([msgpack.packb(h), msgpack.packb({"text": "ünïcode ok"})])
            frames = recv_until(d, lambda f: msgpack.unpackb(f[0])["corr"] == h["id"], 5)
            check(frames is not None, "no reply")
            check(len(frames) == 2, "a reply is [header][body], got %d frames", len(frames))
            rh, rb = msgpack.unpackb(frames[0]), msgpack.unpackb(frames[1])
            check(rh["type"] == "echo.ping.ok", "reply header %r", rh)
            check(rh["corr"] == h["id"] and rh["id"] != h["id"] and len(rh["id"]) == 26, "ids %r", rh)
            check(isinstance(rh["ts"], int) and abs(rh["ts"] - h["ts"]) < 60000, "ts %r", rh)
            check(rb == {"text": "ünïcode ok", "instance": "e-out"}, "reply body %r", rb)
            # a non-ULID id of up to 32 characters is fine too
            h2 = header("echo.ping", id=uuid.uuid4().hex)
            d.send_multipart([msgpack.packb(h2), msgpack.packb({"text": "b"})])
            frames = recv_until(d, lambda f: msgpack.unpackb(f[0])["corr"] == h2["id"], 5)
            check(frames and msgpack.unpackb(frames[1])["text"] == "b", "reply to a uuid id")
        finally:
            d.close(0)


def test_subscription_receives_published_event():
    with Server() as srv:
        ctx = zmq.Context.instance()
        sub = ctx.socket(zmq.SUB)
        pub = ctx.socket(zmq.PUB)
        other = ctx.socket(zmq.SUB)
        for s in (sub, pub, other):
            s.setsockopt(zmq.LINGER, 0)
        sid = new_id()
        sub.setsockopt(zmq.SUBSCRIBE, ("session/%s" % sid).encode())
        other.setsockopt(zmq.SUBSCRIBE, b"session/SOMEONE-ELSE")
        sub.connect("ipc://%s/bus-pub" % srv.data)
        other.connect("ipc://%s/bus-pub" % srv.data)
        pub.connect("ipc://%s/bus-in" % srv.data)
        try:
            # Pub/sub drops until the subscriptions have propagated through
            # the broker, so publish until the first one arrives.
            topic = ("session/%s" % sid).encode()
            seq = 0
            got = None
            deadline = time.monotonic() + 5
            while got is None and time.monotonic() < deadline:
                seq += 1
                h = header("session.event", key=sid)
                body = {"session_id": sid, "seq": seq, "ts": int(time.time() * 1000), "kind": "note",
                        "body": {"n": seq}}
                pub.send_multipart([topic, msgpack.packb(h), msgpack.packb(body)])
                got = recv_until(sub, lambda f: True, 0.05)
            check(got is not None, "no event arrived in 5 s")
            check(len(got) == 3 and got[0] == topic, "event frames %r", got)
            eh, eb = msgpack.unpackb(got[1]), msgpack.unpackb(got[2])
            check(eh["type"] == "session.event" and eh["key"] == sid, "event header %r", eh)
            check(eb["session_id"] == sid and eb["kind"] == "note" and eb["body"]["n"] == eb["seq"],
                  "event body %r", eb)
            # now that it flows, a burst arrives complete and in order
            first = eb["seq"]
            base = seq
            for k in range(1, 101):
                h = header("session.event", key=sid)
                pub.send_multipart([topic, msgpack.packb(h), msgpack.packb(
                    {"session_id": sid, "seq": base + k, "ts": 0, "kind": "note"})])
            seen = [first]
            while True:
                f = recv_until(sub, lambda f: True, 2)
                if f is None:
                    break
                seen.append(msgpack.unpackb(f[2])["seq"])
                if seen[-1] == base + 100:
                    break
            burst = [s for s in seen if s > base]
            check(burst == list(range(base + 1, base + 101)), "burst arrived as %r", burst[:10])
            # an event that does not validate is not forwarded
            bad = header("session.event", key=sid)
            pub.send_multipart([topic, msgpack.packb(bad), msgpack.packb({"session_id": sid})])
            marker = header("session.event", key=sid)
            pub.send_multipart([topic, msgpack.packb(marker), msgpack.packb(
                {"session_id": sid, "seq": 999999, "ts": 0, "kind": "note"})])
            f = recv_until(sub, lambda f: True, 2)
            check(f is not None and msgpack.unpackb(f[1])["id"] == marker["id"],
                  "an invalid event was forwarded: %r", f and msgpack.unpackb(f[2]))
            # prefix subscriptions filter
            check(other.poll(0) == 0, "a subscriber to another session received an event")
            st = srv.stats()
            check(st["types"].get("session.event", 0) >= 102, "event counts %r", st["types"])
            check(st["malformed"]["event_body"] >= 1, "the bad event was not counted")
        finally:
            for s in (sub, pub, other):
                s.close(0)


def test_tap_shows_own_request():
    with Server() as srv:
        start_actor(srv, instance="e-tap")
        ctx = zmq.Context.instance()
        tap = ctx.socket(zmq.SUB)
        d = ctx.socket(zmq.DEALER)
        pub = ctx.socket(zmq.PUB)
        for s in (tap, d, pub):
            s.setsockopt(zmq.LINGER, 0)
        tap.setsockopt(zmq.SUBSCRIBE, b"")
        tap.connect("ipc://%s/bus-tap" % srv.data)
        d.connect("ipc://%s/bus-cmd" % srv.data)
        pub.connect("ipc://%s/bus-in" % srv.data)
        try:
            # until the tap subscription reaches the broker, nothing is
            # copied: ping until our own request shows up on the tap
            mine = None
            deadline = time.monotonic() + 5
            while mine is None and time.monotonic() < deadline:
                h = header("echo.ping")
                d.send_multipart([msgpack.packb(h), msgpack.packb({"text": "on tap"})])
                mine = recv_until(tap, lambda f: len(f) == 4 and msgpack.unpackb(f[2])["id"] == h["id"],
                                  0.1)
            check(mine is not None, "own request never seen on the tap")
            plane, peer, th, tb = mine[0], mine[1], msgpack.unpackb(mine[2]), msgpack.unpackb(mine[3])
            check(plane == b"cmd", "plane %r", plane)
            check(len(peer) > 0, "the cmd plane names the peer identity")
            check(th["type"] == "echo.ping" and th["from"] == "outside", "tap header %r", th)
            check(tb == {"text": "on tap"}, "tap body %r", tb)
            # and the reply to it, sent by the echo instance
            reply = recv_until(tap, lambda f: msgpack.unpackb(f[2]).get("corr") == h["id"], 3)
            check(reply is not None, "the reply is not on the tap")
            check(msgpack.unpackb(reply[2])["type"] == "echo.ping.ok", "tap reply %r", reply)
            check(msgpack.unpackb(reply[3])["instance"] == "e-tap", "tap reply body %r", reply)
            check(reply[1] != peer, "the reply's peer is the instance, not the requester")
            # events appear on the tap with plane "evt" and their topic
            sid = new_id()
            seen = None
            deadline = time.monotonic() + 5
            while seen is None and time.monotonic() < deadline:
                eh = header("session.event", key=sid)
                pub.send_multipart([("session/%s" % sid).encode(), msgpack.packb(eh), msgpack.packb(
                    {"session_id": sid, "seq": 1, "ts": 0, "kind": "note"})])
                seen = recv_until(tap, lambda f: f[0] == b"evt" and msgpack.unpackb(f[2])["id"] == eh["id"],
                                  0.1)
            check(seen is not None, "event never seen on the tap")
            check(seen[1] == ("session/%s" % sid).encode(), "evt tap topic %r", seen[1])
            # every tap message decodes as [plane][peer][msgpack header][msgpack body]
            while tap.poll(0):
                f = tap.recv_multipart()
                check(len(f) == 4 and f[0] in (b"cmd", b"evt"), "tap frames %r", f)
                check("type" in msgpack.unpackb(f[2]) and isinstance(msgpack.unpackb(f[3]), dict),
                      "tap message does not decode: %r", f)
        finally:
            for s in (tap, d, pub):
                s.close(0)


if __name__ == "__main__":
    run_tests(globals())
