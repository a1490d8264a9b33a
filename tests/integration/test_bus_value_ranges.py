#!/usr/bin/python3
"""Values from outside that the server cannot hold (issue 9, items 9 and 10):

  - a header `deadline` of 2^63 and `run.request {limits: {timeout_s: 2^62}}`
    were signed overflows (UBSan aborted; the release build failed the run
    at once): each is answered `invalid`, naming the field, and the server
    goes on; so are other huge integers (steps, tokens, seqs, fences);
  - a `note` whose body holds \\xed\\xa0\\x80, \\xff\\xfe, a\\0b, a bin
    value, NaN, infinity or a non-string key was stored, and a strict client
    then failed to decode the page: each is refused `invalid`, nothing is
    stored, and a good note after them appends and reads back strictly.
"""
import math
import os
import sys

import msgpack

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import (Client, Server, check, make_header, now_ms, pack, run_tests,  # noqa: E402
                    start_actor, tmpdir)


def raw_request(c, type, body_bytes, timeout=5.0, **hdr):
    """Sends a hand-encoded body; returns the final answer."""
    h = make_header(type, frm=c.name, **hdr)
    c.send_frames([pack(h), body_bytes])
    return c.wait_reply(h["id"], timeout)


def expect_invalid(m, *words):
    check(m.is_error() and m.code == "invalid", "expected invalid, got %s %r", m.type, m.body)
    for w in words:
        check(w in m.body["message"], "error %r does not name %r", m.body["message"], w)


def test_header_deadline_past_int64_is_invalid_and_the_server_goes_on():
    with Server() as srv:
        start_actor(srv, instance="e-deadline")
        c = Client(srv.endpoint(), name="values")
        for deadline in (2 ** 63, 2 ** 64 - 1, 2 ** 63 - 1, 253402300800000):
            m = c.request("echo.ping", {"text": "x"}, deadline=deadline)
            expect_invalid(m, "deadline", "out of range")
        # a chunk seq and a ts far past any clock are refused the same way
        expect_invalid(c.request("echo.ping", {"text": "x"}, ts=2 ** 63), "ts")
        # a real deadline still works, and so does no deadline
        m = c.request("echo.ping", {"text": "after"}, deadline=now_ms() + 5000)
        check(m.type == "echo.ping.ok" and m.body["text"] == "after", "answer %r", m)
        m = c.request("echo.ping", {"text": "plain"})
        check(m.type == "echo.ping.ok", "answer %r", m)
        expect_invalid(c.request("echo.ping", {"sleep_ms": 2 ** 62}), "sleep_ms")
        check(srv.proc.alive(), "serve died")
        c.close()


def test_run_limits_past_their_range_are_invalid_and_create_nothing():
    with Server() as srv:
        c = Client(srv.endpoint(), name="values")
        m = c.request("session.create", {"workspace": tmpdir()})
        check(m.type == "session.create.ok", "create %r", m)
        sid = m.body["session"]["session_id"]
        cases = [
            ({"timeout_s": 2 ** 62}, "limits.timeout_s"),
            ({"timeout_s": 2 ** 64 - 1}, "limits.timeout_s"),
            ({"timeout_s": 0}, "limits.timeout_s"),
            ({"max_steps": 2 ** 62}, "limits.max_steps"),
            ({"max_output_tokens": 2 ** 64 - 1}, "limits.max_output_tokens"),
        ]
        for limits, field in cases:
            m = c.request("run.request", {"session_id": sid, "input": "hi", "limits": limits}, timeout=10)
            expect_invalid(m, field, "out of range")
        runs = c.request("run.list", {"session_id": sid})
        check(runs.type == "run.list.ok" and runs.body["runs"] == [], "runs were created: %r", runs.body)
        # other integers that reach arithmetic: seqs and fences
        expect_invalid(c.request("session.events", {"session_id": sid, "after_seq": 2 ** 64 - 1}), "after_seq")
        expect_invalid(c.request("session.fence", {"session_id": sid, "fence": 2 ** 63}), "fence")
        m = c.request("session.events", {"session_id": sid, "after_seq": 0})
        check(m.type == "session.events.ok", "events %r", m)
        check(srv.proc.alive(), "serve died")
        c.close()


BAD_BODIES = [
    ("surrogate", {b"text": b"\xed\xa0\x80"}, False, "not valid UTF-8"),
    ("ff fe", {b"text": b"\xff\xfe"}, False, "not valid UTF-8"),
    ("NUL", {"text": "a\0b"}, True, "NUL"),
    ("bin", {"text": b"\x00\x01\x02"}, True, "binary"),
    ("NaN", {"x": math.nan}, True, "not finite"),
    ("infinity", {"x": [1, {"y": -math.inf}]}, True, "not finite"),
    ("integer key", {1: "one"}, True, "map key is not a string"),
    ("bad key", {b"\xff": 1}, False, "not valid UTF-8"),
    ("nested", {"list": [{"deep": [b"\xc0\xaf"]}]}, False, "not valid UTF-8"),
]


def append_body(sid, body, bin_type, batch=False):
    """session.append of a note with `body`, encoded by hand: with
    bin_type False, bytes go out as msgpack str (any bytes at all)."""
    if batch:
        msg = {"session_id": sid, "entries": [{"kind": "note", "body": {"ok": 1}},
                                              {"kind": "note", "body": body}]}
    else:
        msg = {"session_id": sid, "kind": "note", "body": body}
    return msgpack.packb(msg, use_bin_type=bin_type)


def test_bad_note_bodies_are_refused_and_nothing_is_stored():
    with Server() as srv:
        c = Client(srv.endpoint(), name="values")      # strict: every reply must decode
        m = c.request("session.create", {"workspace": tmpdir()})
        sid = m.body["session"]["session_id"]
        head = c.request("session.get", {"session_id": sid}).body["session"]["last_seq"]
        for what, body, bin_type, words in BAD_BODIES:
            for batch in (False, True):
                m = raw_request(c, "session.append", append_body(sid, body, bin_type, batch))
                check(m.is_error() and m.code == "invalid",
                      "%s%s: appended (%s %r)", what, " in a batch" if batch else "", m.type, m.body)
                check(words in m.body["message"], "%s: message %r lacks %r", what, m.body["message"], words)
        now = c.request("session.get", {"session_id": sid}).body["session"]["last_seq"]
        check(now == head, "the tape grew from %d to %d" % (head, now))

        # a good note after them: stored, and every page reads strictly
        good = {"text": "grüße 👋", "n": -1, "f": 0.5, "list": [None, True, "é"], "m": {"k": "v"}}
        m = c.request("session.append", {"session_id": sid, "kind": "note", "body": good})
        check(m.type == "session.append.ok", "good note: %r", m)
        page = c.request("session.events", {"session_id": sid, "after_seq": 0})
        check(page.type == "session.events.ok", "events %r", page)
        notes = [e["body"] for e in page.body["events"] if e["kind"] == "note"]
        check(notes == [good], "notes on the tape: %r", notes)
        c.close()


if __name__ == "__main__":
    run_tests(globals())
