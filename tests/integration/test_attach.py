"""The person attaches a file (docs/images.md): `switchboard attach
SESSION FILE` puts the bytes with blob.put and session.attach appends an
`artifact` entry with by "person"; `switchboard artifacts` lists it with
the origin "person" and `artifact get` gives the same bytes back. Then
the refusals: a missing file, a file over the blob cap, one over the
session's quota, an unknown session, a hash the session does not hold,
a closed session."""

import hashlib
import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Server, check, cli, run_tests, tmpdir  # noqa: E402
from sbagent import new_session, tape  # noqa: E402


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


def test_attach_lists_and_downloads():
    srv = Server().start()
    try:
        sid = new_session(srv, tmpdir())
        data = b"# Report\n\nline two\n"
        f = write(os.path.join(tmpdir(), "report.md"), data)
        want = hashlib.sha256(data).hexdigest()
        rc, out, err = cli(srv, "attach", sid, f, "--name", "the report.md", "--json")
        check(rc == 0, "attach: %s %s", out, err)
        rep = json.loads(out)
        check(rep["artifact"]["sha256"] == want and rep["artifact"]["bytes"] == len(data)
              and rep["artifact"]["mime"] == "text/plain" and rep["artifact"]["name"] == "the report.md"
              and rep["seq"] > 0, "reply %r", rep)
        entries = [e for e in tape(srv, sid) if e["kind"] == "artifact"]
        check(len(entries) == 1 and entries[0]["seq"] == rep["seq"] and entries[0]["body"]["by"] == "person"
              and entries[0]["body"]["artifact"]["sha256"] == want, "tape %r", entries)
        rc, out, err = cli(srv, "artifacts", sid, "--json")
        rows = [json.loads(line) for line in out.splitlines()]
        check(rc == 0 and len(rows) == 1 and rows[0]["origin"] == "person" and rows[0]["sha256"] == want
              and rows[0]["seq"] == rep["seq"], "artifacts %r %s", rows, err)
        rc, out, _ = cli(srv, "attach", sid, f)
        check(rc == 0 and want in out and "report.md" in out, "text output %r", out)
        dest = os.path.join(tmpdir(), "back.md")
        rc, _, err = cli(srv, "artifact", "get", want, "-o", dest, "--session", sid)
        check(rc == 0 and open(dest, "rb").read() == data, "artifact get: %s", err)
    finally:
        srv.stop()


def test_attach_refusals():
    srv = Server(env={"SWITCHBOARD_BLOB_MAX": "4096", "SWITCHBOARD_BLOB_SESSION_QUOTA": "6000"}).start()
    try:
        sid = new_session(srv, tmpdir())
        rc, out, _ = cli(srv, "attach", "--help")
        check(rc == 0 and "usage: switchboard attach" in out, "help %r", out)
        rc, _, err = cli(srv, "attach", sid)
        check(rc == 2, "no FILE is a usage error: %d %r", rc, err)
        rc, _, err = cli(srv, "attach", sid, os.path.join(tmpdir(), "nothere.txt"))
        check(rc == 1 and "cannot read" in err, "missing file: %d %r", rc, err)
        big = write(os.path.join(tmpdir(), "big.txt"), b"x" * 5000)
        rc, _, err = cli(srv, "attach", sid, big)
        check(rc == 1 and "too_large" in err, "over the blob cap: %d %r", rc, err)
        a = write(os.path.join(tmpdir(), "a.txt"), b"a" * 4000)
        b = write(os.path.join(tmpdir(), "b.txt"), b"b" * 4000)
        rc, _, err = cli(srv, "attach", sid, a)
        check(rc == 0, "first attach: %r", err)
        rc, _, err = cli(srv, "attach", sid, b)
        check(rc == 1 and "quota" in err, "over the session quota: %d %r", rc, err)
        rc, _, err = cli(srv, "attach", "01" * 13, a)
        check(rc == 1 and "not_found" in err, "unknown session: %d %r", rc, err)
        rc, _, err = cli(srv, "attach", "7ZZZ", a)
        check(rc == 1 and "no session id starts with 7ZZZ" in err, "unknown session prefix: %d %r", rc, err)
        m = srv.control().request("session.attach", {"session_id": sid, "sha256": "00" * 32}, timeout=10)
        check(m.type == "error" and m.body.get("code") == "not_found", "a hash not held: %s %r", m.type, m.body)
        check(len([e for e in tape(srv, sid) if e["kind"] == "artifact"]) == 1, "one artifact entry")
        closed = new_session(srv, tmpdir())
        check(srv.control().request("session.close", {"session_id": closed}, timeout=10).type == "session.close.ok",
              "close")
        rc, _, err = cli(srv, "attach", closed, a)
        check(rc == 1 and "conflict" in err and "closed" in err, "a closed session: %d %r", rc, err)
    finally:
        srv.stop()


def test_attach_through_the_gateway():
    """The UI's way: POST /api/blobs/SESSION stores the bytes, then
    session.attach over the WebSocket makes them an artifact; the
    download gives the same bytes, as an attachment, never as HTML."""
    from gwtest import Gateway
    gw = Gateway()
    try:
        sid = new_session(gw.srv, tmpdir())
        page = b"<img src=x onerror=alert(1)>\n<p>report</p>\n"
        name = "<img onerror=alert(1)>.html"
        status, _, body = gw.http("POST", "/api/blobs/%s?name=%s" % (sid, "x.html"), raw=page)
        check(status == 200, "upload: %d %r", status, body[:200])
        sha = json.loads(body)["blob"]["sha256"]
        ws = gw.ws()
        try:
            r = ws.call("session.attach", {"session_id": sid, "sha256": sha, "name": name})
            check(r.get("op") == "reply" and r["body"]["artifact"]["name"] == name
                  and r["body"]["artifact"]["mime"] == "text/plain", "ws session.attach %r", r)
        finally:
            ws.close()
        rc, out, err = cli(gw.srv, "artifacts", sid, "--json")
        rows = [json.loads(line) for line in out.splitlines()]
        check(rc == 0 and [(x["origin"], x["sha256"], x["name"]) for x in rows] == [("person", sha, name)],
              "artifacts %r %s", rows, err)
        status, h, got = gw.http("GET", "/api/blobs/%s/%s" % (sid, sha))
        check(status == 200 and got == page and "html" not in h.get("content-type", "")
              and h.get("content-disposition", "").startswith("attachment"), "download %d %r", status, h)
    finally:
        gw.srv.stop()


if __name__ == "__main__":
    run_tests(globals())
