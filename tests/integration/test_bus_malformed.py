"""Hostile input: 10,000 random and malformed messages on each plane leave
the broker alive and routing, every one is counted under the right kind,
and the log lines about them are rate-limited.

Every message sent here is malformed by construction (random bytes that
happen to decode as a valid header or body are replaced), so the broker
must count at least as many as were sent."""

import collections
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import (Client, Pub, Server, Sub, check, make_header, new_id, pack,  # noqa: E402
                    run_tests, session_event, start_actor, unpack, wait_for)

N = int(os.environ.get("SB_MALFORMED_N", "10000"))

# Crafted msgpack that declares far more than it holds, nests too deep or
# is cut short: each is invalid as a header and as a body.
HOSTILE = [
    b"",
    b"\xdf\xff\xff\xff\xff",                # map32 of 4 billion entries, 5 bytes
    b"\xdd\xff\xff\xff\xff",                # array32 of 4 billion
    b"\xdb\xff\xff\xff\xff" + b"x" * 8,     # str32 of 4 GB
    b"\xc6\xff\xff\xff\xff",                # bin32 of 4 GB
    b"\xde\xff\xff",                        # map16 of 65535, empty
    b"\x91" * 64 + b"\x80",                 # 64 levels of nesting
    b"\x81" * 40,                           # nested maps cut short
    b"\x81\xa4type",                        # a map cut after its first key
    b"\xc1",                                # the never-used byte
    b"\x80\x80",                            # trailing garbage after a map
    b"\xa5hello",                           # not a map
    b"\xd9\x05abc",                         # str8 shorter than declared
    b"\x92\xa1a",                           # array missing an element
]


def random_bytes(max_len=200):
    return bytes(random.getrandbits(8) for _ in range(random.randint(1, max_len)))


def decodes_as(buf, keys=()):
    """True when buf is one complete msgpack map holding `keys`."""
    try:
        v = unpack(buf)
    except Exception:
        return False
    return isinstance(v, dict) and all(isinstance(v.get(k), str) and v.get(k) for k in keys)


def bad_blob(must_not_be_map=True):
    """A random or crafted byte string that is not a valid msgpack map."""
    while True:
        b = random.choice(HOSTILE) if random.random() < 0.3 else random_bytes()
        if not (must_not_be_map and decodes_as(b)):
            return b


def bad_header():
    while True:
        b = bad_blob(must_not_be_map=False)
        if not decodes_as(b, ("type", "id")):
            return b


def cmd_plane_messages(n):
    """n malformed DEALER messages: (expected kind, frames)."""
    out = []
    for _ in range(n):
        r = random.random()
        if r < 0.15:        # one frame: the broker sees [id][x]
            out.append(("frames", [bad_blob()]))
        elif r < 0.25:      # four or more frames: [id] + 4..7
            out.append(("frames", [bad_blob() for _ in range(random.randint(4, 7))]))
        elif r < 0.35:      # three frames, looks like a reply from a stranger
            out.append(("unmatched_reply", [random_bytes(8), pack(make_header("echo.ping.ok")),
                                            pack({"instance": "x"})]))
        elif r < 0.60:      # [garbage header][body]
            out.append(("header", [bad_header(), pack({})]))
        elif r < 0.85:      # a valid header and a garbage body
            t = random.choice(["echo.ping", "echo.note", "echo.stream", "bus.stats"])
            out.append(("body", [pack(make_header(t)), bad_blob()]))
        elif r < 0.90:      # a body over its type's limits
            out.append(("body", [pack(make_header("echo.ping")),
                                 pack({"text": "x" * random.choice([65537, 2 << 20])})]))
        elif r < 0.95:      # a type nobody knows
            out.append(("unknown_type", [pack(make_header("zz%d.nope" % random.randint(0, 99))),
                                         pack({})]))
        else:               # a reply or event type sent as a request
            t = random.choice(["echo.ping.ok", "session.event", "echo.stream.chunk"])
            out.append(("kind", [pack(make_header(t)), pack({})]))
    return out


def evt_plane_messages(n):
    """n malformed PUB messages: (expected kind, frames)."""
    out = []
    sid = new_id()
    for _ in range(n):
        r = random.random()
        topic = ("session/%s" % sid).encode() if random.random() < 0.7 else random_bytes(40)
        if r < 0.25:
            k = random.choice([1, 2, 4, 5, 6])
            out.append(("event_frames", [topic] + [bad_blob() for _ in range(k - 1)]))
        elif r < 0.5:
            out.append(("event_header", [topic, bad_header(), pack(session_event(sid, 1))]))
        elif r < 0.8:       # garbage body, or a session.event missing fields
            body = bad_blob() if random.random() < 0.7 else pack({"session_id": sid})
            out.append(("event_body", [topic, pack(make_header("session.event")), body]))
        elif r < 0.9:       # not an event type: commands may not enter here
            t = random.choice(["echo.ping", "bus.ready", "session.create"])
            out.append(("event_body", [topic, pack(make_header(t)), pack({})]))
        else:
            out.append(("event_body", [topic, pack(make_header("zz.unknown")), pack({})]))
    return out


def malformed(srv):
    return srv.stats()["malformed"]


def assert_counted(srv, before, expected, what):
    """Waits until every kind has grown by at least its expected count."""
    def done():
        now = malformed(srv)
        return all(now[k] - before[k] >= v for k, v in expected.items()) and now
    try:
        now = wait_for(done, 30, "the broker to count %s" % what, interval=0.05)
    except AssertionError:
        now = malformed(srv)
        raise AssertionError("%s: counted %r, sent %r" % (
            what, {k: now[k] - before[k] for k in expected}, dict(expected)))
    total = now["total"] - before["total"]
    check(total >= sum(expected.values()), "%s: total grew by %d for %d sent",
          what, total, sum(expected.values()))
    print("    %s: sent %d, counted %r" % (what, sum(expected.values()),
                                          {k: now[k] - before[k] for k in expected}))


def assert_routing(srv, c):
    m = c.request("echo.ping", {"text": "still here"}, timeout=5)
    check(m.type == "echo.ping.ok" and m.body["text"] == "still here", "ping after the flood: %r", m)
    check(srv.proc.alive(), "serve died")


def test_command_plane_flood():
    with Server() as srv:
        start_actor(srv, instance="e-flood")
        c = Client(srv.endpoint())
        assert_routing(srv, c)
        before = malformed(srv)
        msgs = cmd_plane_messages(N)
        expected = collections.Counter(k for k, _ in msgs)
        # not strict: error replies may quote the fuzzer's bytes (see
        # test_error_replies_and_logs_quote_peer_bytes_safely)
        bad = Client(srv.endpoint(), name="fuzzer", strict=False)
        replies = 0
        t0 = time.monotonic()
        for k, (_, frames) in enumerate(msgs):
            bad.send_frames(frames)
            if k % 100 == 0:
                replies += len(bad.drain())
        assert_counted(srv, before, expected, "command plane")
        print("    %d messages in %.2f s" % (N, time.monotonic() - t0))
        assert_routing(srv, c)
        # the malformed messages that carried a usable header got an error
        got = [replies]

        def answered():
            got[0] += len(bad.drain())
            return got[0] >= want
        # body errors on requests, unknown types and wrong kinds all answer
        want = expected["unknown_type"] + expected["kind"]
        wait_for(answered, 5, "error replies to invalid requests")
        # a ROUTER cannot drop a peer: the fuzzer's socket still works
        m = bad.request("echo.ping", {"text": "reformed"})
        check(m.type == "echo.ping.ok", "the fuzzing peer cannot talk any more: %r", m)
        warns = [l for l in srv.log().splitlines() if "malformed" in l]
        check(len(warns) < 100, "%d log lines for malformed input: not rate-limited", len(warns))
        bad.close()
        c.close()


def test_event_plane_flood():
    with Server() as srv:
        start_actor(srv, instance="e-flood")
        c = Client(srv.endpoint())
        pub = Pub(srv.endpoint("in"))
        sub = Sub(srv.endpoint("pub"), "session/")
        sid = new_id()
        # wait until the PUB has the broker's subscription (pub/sub drops
        # before that), by publishing valid events until one comes through
        seq = [0]

        def through():
            seq[0] += 1
            pub.publish("session/" + sid, "session.event", session_event(sid, seq[0]))
            return sub.recv_frames(timeout=0.05)
        wait_for(through, 5, "the event plane to carry a valid event")
        while sub.recv_frames(timeout=0.05):
            pass
        before = malformed(srv)
        msgs = evt_plane_messages(N)
        expected = collections.Counter(k for k, _ in msgs)
        t0 = time.monotonic()
        for _, frames in msgs:
            pub.send_frames(frames)
        assert_counted(srv, before, expected, "event plane")
        print("    %d messages in %.2f s" % (N, time.monotonic() - t0))
        # nothing malformed reached a subscriber
        leaked = []
        while True:
            f = sub.recv_frames(timeout=0.1)
            if f is None:
                break
            leaked.append(f)
        check(not leaked, "%d malformed events reached a subscriber, first %r", len(leaked),
              leaked[:1])
        # the plane still carries valid events, and commands still route
        marker = pub.publish("session/" + sid, "session.event", session_event(sid, 424242))
        f = sub.recv_frames(timeout=5)
        check(f is not None and unpack(f[1])["id"] == marker, "valid event after the flood: %r", f)
        assert_routing(srv, c)
        warns = [l for l in srv.log().splitlines() if "malformed" in l]
        check(len(warns) < 100, "%d log lines for malformed input: not rate-limited", len(warns))
        for s in (pub, sub, c):
            s.close()


def test_error_replies_and_logs_quote_peer_bytes_safely():
    """An error reply quotes what the peer sent (a type name, a field
    path). Those bytes come from a stranger: the reply must still be valid
    UTF-8 msgpack that any client decodes, and a newline in them must not
    forge a line in the server's log."""
    with Server() as srv:
        c = Client(srv.endpoint(), strict=False)
        forged = "zz.x\n2099-01-01T00:00:00.000Z error broker FORGED LINE"
        # a type whose bytes are not UTF-8 (a str8 built by hand:
        # msgpack-python would pack bytes as bin) makes the header itself
        # malformed: it is counted and dropped, with no reply to quote it
        before = srv.stats()["malformed"]["header"]
        c.send_frames([b"\x82\xa4type\xa7zz\xff\xfe.xy\xa2id" + pack(new_id()), pack({})])
        wait_for(lambda: srv.stats()["malformed"]["header"] > before, 3, "the bad header to be counted")
        check(c.recv(timeout=0.3) is None, "a malformed header got a reply")
        cases = [
            # a body whose map key is not UTF-8, followed by a bad value
            ("field path", [pack(make_header("echo.ping")), b"\x81\xa3\xff\xfe\xba\xd9\x5eabc"]),
            # a type that carries a newline and a fake log line
            ("newline", [pack(make_header(forged)), pack({})]),
        ]
        problems = []
        for what, frames in cases:
            c.send_frames(frames)
            m = c.recv(timeout=3)
            check(m is not None and m.type == "error", "%s: no error reply", what)
            try:
                unpack(m.raw[0])
                unpack(m.raw[1])
            except UnicodeDecodeError as e:
                problems.append("%s: the error reply is not valid UTF-8 (%s): %r" % (what, e, m.raw[1]))
        wait_for(lambda: "FORGED" in srv.log() or srv.stats()["malformed"]["unknown_type"] >= 1, 3,
                 "the broker to log the bad type")
        for line in srv.log().splitlines():
            if line.startswith("2099-01-01"):
                problems.append("a peer forged a log line: %r" % line)
        check(not problems, "\n".join(problems))
        c.close()


def test_strings_that_are_not_utf8_are_refused():
    """msgpack str is UTF-8. A str field with other bytes is invalid input:
    passed on, it would reach actors, the tape and every client (a JSON
    gateway cannot even express it)."""
    with Server() as srv:
        start_actor(srv, instance="e-utf8")
        c = Client(srv.endpoint(), strict=False)
        c.send_frames([pack(make_header("echo.ping")), b"\x81\xa4text\xa2\xff\xfe"])
        m = c.recv(timeout=3)
        check(m is not None, "no answer")
        check(m.type == "error" and m.code == "invalid",
              "a text field of bytes ff fe was accepted: %s %r", m.type, m.raw[1])
        check(c.request("echo.ping", {"text": "grüße 👋"}).body["text"] == "grüße 👋",
              "valid UTF-8 must pass")
        c.close()


if __name__ == "__main__":
    run_tests(globals())
