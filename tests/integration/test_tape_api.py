#!/usr/bin/python3
"""The session service and its CLI, request by request: create, get,
list, update, close, delete, append, events; bad input refused with a
clear error that changes nothing; idempotent retries; command ids that
expire; deletion of long tapes; restarts; the environment readable by
mdb_stat and mdb_dump; the schema version check."""
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import (SB_BIN, Client, Server, check, new_id, run_tests, sb, skip, tmpdir,  # noqa: E402
                    wait_for)


def ok(m, what):
    check(m.type.endswith(".ok"), "%s answered %s %r", what, m.type, m.body)
    return m.body


def err(m, code, *words):
    """Checks an error reply: its code, and words its message must name."""
    check(m.is_error(), "expected error %s, got %s %r", code, m.type, m.body)
    check(m.code == code, "expected error %s, got %s: %s", code, m.code, m.body.get("message"))
    for w in words:
        check(w in m.body["message"], "error message %r does not name %r", m.body["message"], w)
    return m.body["message"]


class Api:
    def __init__(self, server):
        self.cli = Client(server.endpoint("cmd"), name="tape-api")

    def call(self, type, body, timeout=10):
        return self.cli.request(type, body, timeout=timeout)

    def create(self, workspace, **kw):
        kw["workspace"] = workspace
        return ok(self.call("session.create", kw), "create")["session"]

    def get(self, sid):
        return ok(self.call("session.get", {"session_id": sid}), "get")["session"]

    def append(self, sid, kind="note", body=None, **kw):
        b = {"session_id": sid, "kind": kind, "body": body if body is not None else {}}
        b.update(kw)
        return ok(self.call("session.append", b), "append")

    def events(self, sid, after=0, limit=None):
        b = {"session_id": sid, "after_seq": after}
        if limit:
            b["limit"] = limit
        return ok(self.call("session.events", b), "events")

    def tape(self, sid):
        out, after = [], 0
        while True:
            page = self.events(sid, after, 5000)
            out.extend(page["events"])
            after = page["next_after"]
            if not page["more"]:
                return out

    def close(self):
        self.cli.close()


def mdb_stat(data):
    """Entries per dbi of DATA/session, read by Debian's mdb_stat."""
    p = subprocess.run(["mdb_stat", "-a", os.path.join(data, "session")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
    check(p.returncode == 0, "mdb_stat failed: %s", p.stderr.decode())
    counts, name = {}, None
    for line in p.stdout.decode().splitlines():
        m = re.match(r"Status of (.*)$", line)
        if m:
            name = m.group(1)
        m = re.match(r"\s+Entries: (\d+)", line)
        if m and name:
            counts[name] = int(m.group(1))
    return counts


def setup():
    if not shutil.which("mdb_stat") or not shutil.which("mdb_dump"):
        skip("lmdb-utils (mdb_stat, mdb_dump) are not installed")
    server = Server().start()
    return server, Api(server), tmpdir()


# ---------------------------------------------------------------------------

def test_create_get_update_close():
    server, api, ws = setup()
    os.mkdir(os.path.join(ws, "sub"))
    s = api.create(ws + "/sub/../sub/", title="t1", model="m1", approval_policy="auto", max_steps=30,
                   labels={"team": "core"})
    sid = s["session_id"]
    check(len(sid) == 26, "session id %r", sid)
    check(s["workspace"] == os.path.realpath(ws + "/sub"), "workspace stored as %r", s["workspace"])
    check(s["status"] == "active" and s["last_seq"] == 1 and s["turn_status"] == "idle", "record %r", s)
    check(s["labels"] == {"team": "core"} and s["max_steps"] == 30, "record %r", s)
    check(api.get(sid) == s, "get differs from create")
    tape = api.tape(sid)
    check(len(tape) == 1 and tape[0]["kind"] == "session.created" and tape[0]["body"]["session"] == s,
          "seq 1 is %r", tape)

    u = ok(api.call("session.update", {"session_id": sid, "title": "t2", "approval_policy": "yolo",
                                       "model": ""}), "update")["session"]
    check(u["title"] == "t2" and u["approval_policy"] == "yolo" and "model" not in u, "updated %r", u)
    check(u["last_seq"] == 2 and u["config_version"] == 2, "updated %r", u)
    e = api.tape(sid)[1]
    check(e["kind"] == "session.updated" and sorted(e["body"]["changed"]) == ["approval_policy", "model", "title"],
          "update entry %r", e)
    # An update that changes nothing writes nothing.
    same = ok(api.call("session.update", {"session_id": sid, "title": "t2"}), "update")["session"]
    check(same["last_seq"] == 2, "a no-op update appended: %r", same)

    c = ok(api.call("session.close", {"session_id": sid}), "close")["session"]
    check(c["status"] == "closed" and c["last_seq"] == 3, "closed %r", c)
    c2 = ok(api.call("session.close", {"session_id": sid}), "close again")["session"]
    check(c2["last_seq"] == 3, "closing twice appended: %r", c2)
    err(api.call("session.append", {"session_id": sid, "kind": "note", "body": {}}), "conflict", "closed")
    err(api.call("session.update", {"session_id": sid, "title": "x"}), "conflict", "closed")
    check(api.get(sid)["last_seq"] == 3, "a refused append changed the head")
    server.stop()


def test_config_errors_name_the_field():
    server, api, ws = setup()
    f = os.path.join(ws, "file")
    open(f, "w").close()
    err(api.call("session.create", {"workspace": ws + "/nope"}), "invalid", "workspace", "No such file")
    err(api.call("session.create", {"workspace": f}), "invalid", "workspace", "not a directory")
    err(api.call("session.create", {"workspace": ws, "approval_policy": "sometimes"}), "invalid",
        "approval_policy: 'sometimes' is not one of", "yolo | auto | interactive")
    err(api.call("session.create", {"workspace": ws, "max_steps": 0}), "invalid", "max_steps")
    err(api.call("session.create", {"workspace": ws, "max_steps": 10001}), "invalid", "max_steps")
    err(api.call("session.create", {"workspace": ws, "labels": {"k": 5}}), "invalid", "labels.k")
    err(api.call("session.create", {"title": "no workspace"}), "invalid", "workspace")
    err(api.call("session.get", {"session_id": "not-a-ulid"}), "invalid", "session_id")
    err(api.call("session.get", {"session_id": new_id()}), "not_found", "no session")
    err(api.call("session.list", {"status": "sleeping"}), "invalid", "status")
    err(api.call("session.events", {"session_id": new_id()}), "not_found")
    check(mdb_stat(server.data).get("sessions") == 0, "a refused create left a record")
    server.stop()


def test_bad_appends_change_nothing():
    server, api, ws = setup()
    sid = api.create(ws)["session_id"]
    api.append(sid, "prompt", {"text": "hello"})
    before_tape = api.tape(sid)
    before_counts = mdb_stat(server.data)

    # a body over its limits: text.delta's text is capped at 1 MiB
    m = err(api.call("session.append", {"session_id": sid, "kind": "text.delta",
                                        "body": {"text": "x" * (1024 * 1024 + 1)}}), "invalid", "text")
    check("limit" in m, "no limit named in %r", m)
    # a body missing a required field, and one with a field of the wrong type
    err(api.call("session.append", {"session_id": sid, "kind": "tool.result",
                                    "body": {"call_id": "c", "ok": True}}), "invalid", "output")
    err(api.call("session.append", {"session_id": sid, "kind": "prompt", "body": {"text": 5}}),
        "invalid", "text")
    # an unknown kind, in both forms; a kind only the service itself writes
    err(api.call("session.append", {"session_id": sid, "kind": "telepathy", "body": {}}),
        "invalid", "telepathy")
    err(api.call("session.append", {"session_id": sid, "kind": "session.created", "body": {}}),
        "invalid", "session.created")
    # a batch with one bad entry is refused whole, naming the entry
    batch = [{"kind": "note", "body": {"n": k}} for k in range(5)]
    batch[3] = {"kind": "usage", "body": {"input_tokens": -1}}
    err(api.call("session.append", {"session_id": sid, "entries": batch}), "invalid",
        "entries[3]", "input_tokens")
    batch[3] = {"kind": "nope"}
    err(api.call("session.append", {"session_id": sid, "entries": batch}), "invalid", "entries[3]", "nope")
    err(api.call("session.append", {"session_id": sid, "entries": []}), "invalid", "entries")
    err(api.call("session.append", {"session_id": sid, "kind": "note", "entries": batch[:1]}), "invalid")
    err(api.call("session.append", {"session_id": sid}), "invalid", "kind")
    # a session id of 10 KB, refused by the schema at the broker
    m = api.call("session.append", {"session_id": "A" * 10240, "kind": "note", "body": {}})
    check(m.is_error() and m.code in ("too_large", "invalid") and "session_id" in m.body["message"],
          "10 KB session id answered %r", m.body)
    m = api.call("session.events", {"session_id": "A" * 10240})
    check(m.is_error() and "session_id" in m.body["message"], "10 KB session id answered %r", m.body)
    # a message over session.append's 8 MB
    m = api.call("session.append", {"session_id": sid, "kind": "note", "body": {"t": "y" * (9 << 20)}})
    check(m.is_error() and m.code == "too_large", "9 MB append answered %r", m.body)

    check(api.tape(sid) == before_tape, "a refused append changed the tape")
    after_counts = mdb_stat(server.data)
    check(after_counts == before_counts, "refused appends changed the store: %r -> %r",
          before_counts, after_counts)
    # the service still works
    check(api.append(sid, "note", {})["seq"] == 3, "append after the refusals")
    server.stop()


def test_fenced_appends():
    server, api, ws = setup()
    sid = api.create(ws)["session_id"]
    check(api.append(sid, fence=0)["seq"] == 2, "an append with fence 0 on an unfenced session")
    check(ok(api.call("session.fence", {"session_id": sid, "fence": 5}), "fence") == {"fence": 5}, "fence")
    err(api.call("session.append", {"session_id": sid, "kind": "note", "body": {}, "fence": 4}),
        "fenced", "4", "5")
    err(api.call("session.append", {"session_id": sid, "entries": [{"kind": "note"}], "fence": 1}), "fenced")
    check(api.append(sid, fence=5)["seq"] == 3, "an append with the current fence")
    # a fence never handed out is refused too: a writer whose lease lapsed
    # cannot get back in by guessing ahead (issue 12)
    err(api.call("session.append", {"session_id": sid, "kind": "note", "body": {}, "fence": 9}),
        "fenced", "9", "5")
    check(api.append(sid)["seq"] == 4, "an append without a fence")
    # fences only go up
    check(ok(api.call("session.fence", {"session_id": sid, "fence": 2}), "fence") == {"fence": 5}, "fence down")
    check(api.get(sid)["fence"] == 5, "record fence")
    err(api.call("session.fence", {"session_id": new_id(), "fence": 1}), "not_found")
    check(len(api.tape(sid)) == 4, "a fenced append reached the tape")
    server.stop()


def test_events_paging_and_cursor_past_the_end():
    server, api, ws = setup()
    sid = api.create(ws)["session_id"]
    r = ok(api.call("session.append", {"session_id": sid, "run_id": "R" * 26,
                                       "entries": [{"kind": "text.delta", "body": {"text": str(k)}}
                                                   for k in range(1000)]}), "batch")
    check(r == {"first_seq": 2, "last_seq": 1001}, "batch reply %r", r)
    check(api.get(sid)["last_run_id"] == "R" * 26, "last_run_id not kept")
    page = api.events(sid)
    check(len(page["events"]) == 500 and page["more"] and page["next_after"] == 500
          and page["last_seq"] == 1001, "default page: %d events, %r", len(page["events"]),
          {k: v for k, v in page.items() if k != "events"})
    page = api.events(sid, 990, 5)
    check([e["seq"] for e in page["events"]] == [991, 992, 993, 994, 995] and page["next_after"] == 995,
          "page after 990: %r", [e["seq"] for e in page["events"]])
    check(page["events"][0]["run_id"] == "R" * 26 and page["events"][0]["body"] == {"text": "989"},
          "entry %r", page["events"][0])
    page = api.events(sid, 1001)
    check(page == {"events": [], "next_after": 1001, "last_seq": 1001, "more": False}, "at the head: %r", page)
    page = api.events(sid, 10 ** 12)
    check(page["events"] == [] and not page["more"] and page["last_seq"] == 1001,
          "cursor beyond the end: %r", page)
    err(api.call("session.events", {"session_id": sid, "limit": 5001}), "invalid", "limit")
    # the byte cap: big entries make short pages, each with at least one
    big = {"text": "z" * 900000}
    for _ in range(12):
        api.append(sid, "text.done", big)
    pages, after = 0, 1001
    while True:
        page = api.events(sid, after, 5000)
        check(page["events"], "an empty page before the end")
        after, pages = page["next_after"], pages + 1
        if not page["more"]:
            break
    check(after == 1013 and pages >= 2, "12 big entries came in %d pages ending at %d", pages, after)
    server.stop()


def test_idempotent_retries():
    server, api, ws = setup()
    sid = api.create(ws, command_id="create-1")["session_id"]
    again = api.create(ws, command_id="create-1")
    check(again["session_id"] == sid, "a retried create made a second session")
    s1 = api.append(sid, "note", {"a": 1}, command_id="cmd-1")
    s2 = api.append(sid, "note", {"a": 1}, command_id="cmd-1")
    check(s1 == s2 == {"seq": 2}, "retry answered %r then %r", s1, s2)
    b1 = ok(api.call("session.append", {"session_id": sid, "command_id": "cmd-2",
                                        "entries": [{"kind": "note"}, {"kind": "note"}]}), "batch")
    b2 = ok(api.call("session.append", {"session_id": sid, "command_id": "cmd-2",
                                        "entries": [{"kind": "note"}, {"kind": "note"}]}), "batch")
    check(b1 == b2 == {"first_seq": 3, "last_seq": 4}, "batch retry %r %r", b1, b2)
    # in one drain: both requests sent before either is answered
    ids = [api.cli.send("session.append", {"session_id": sid, "kind": "note", "command_id": "cmd-3"})
           for _ in range(3)]
    seqs = [ok(api.cli.wait_reply(i), "pipelined retry")["seq"] for i in ids]
    check(seqs == [5, 5, 5], "pipelined retries got %r", seqs)
    check(api.get(sid)["last_seq"] == 5 and len(api.tape(sid)) == 5, "retries appended")
    err(api.call("session.close", {"session_id": sid, "command_id": "cmd-1"}), "conflict", "cmd-1")
    c1 = ok(api.call("session.close", {"session_id": sid, "command_id": "close-1"}), "close")
    c2 = ok(api.call("session.close", {"session_id": sid, "command_id": "close-1"}), "close")
    check(c1 == c2, "close retry differs")
    n = len(ok(api.call("session.list", {}), "list")["sessions"])
    check(n == 1, "%d sessions after retried creates", n)
    # remembered across a restart
    server.stop()
    server.start()
    api = Api(server)
    check(api.append(sid, "note", {"a": 1}, command_id="cmd-1") == {"seq": 2}, "forgotten across a restart")
    server.stop()


def test_command_ids_expire_and_are_swept():
    if not shutil.which("mdb_stat"):
        skip("mdb_stat is not installed")
    server = Server(env={"SWITCHBOARD_COMMAND_TTL_S": "1"}).start()
    api, ws = Api(server), tmpdir()
    sid = api.create(ws)["session_id"]
    for k in range(300):
        api.cli.send("session.append", {"session_id": sid, "kind": "note", "command_id": "c%d" % k})
    for _ in range(300):
        check(api.cli.recv(10) is not None, "no reply")
    check(api.append(sid, command_id="c0")["seq"] == 2, "retry within the ttl appended")
    # swept in the background, in small batches, once expired
    wait_for(lambda: mdb_stat(server.data).get("commands") == 0 and mdb_stat(server.data).get("expiry") == 0,
             15, "the expired command ids to be swept")
    check(api.append(sid, command_id="c0")["seq"] == 302, "an expired command id still answered")
    server.stop()


def test_list_pages_and_status_filter():
    server, api, ws = setup()
    ids = [api.create(ws, title="s%d" % k)["session_id"] for k in range(7)]
    ok(api.call("session.close", {"session_id": ids[2]}), "close")
    ok(api.call("session.close", {"session_id": ids[5]}), "close")
    got, cursor = [], None
    while True:
        b = {"limit": 3}
        if cursor:
            b["cursor"] = cursor
        page = ok(api.call("session.list", b), "list")
        got += [s["session_id"] for s in page["sessions"]]
        cursor = page.get("next_cursor")
        if not cursor:
            break
    check(got == ids[::-1], "paged list %r, want %r (newest first)", got, ids[::-1])
    closed = [s["session_id"] for s in ok(api.call("session.list", {"status": "closed"}), "list")["sessions"]]
    check(closed == [ids[5], ids[2]], "closed: %r", closed)
    # a cursor pages on to the older sessions
    active = ok(api.call("session.list", {"status": "active", "limit": 2, "cursor": ids[6]}), "list")
    check([s["session_id"] for s in active["sessions"]] == [ids[4], ids[3]] and active["next_cursor"] == ids[3],
          "active before cursor: %r", active)
    last = ok(api.call("session.list", {"status": "active", "limit": 2, "cursor": ids[1]}), "list")
    check([s["session_id"] for s in last["sessions"]] == [ids[0]] and "next_cursor" not in last,
          "the last page: %r", last)
    err(api.call("session.list", {"limit": 1001}), "invalid", "limit")
    server.stop()


def test_delete_removes_tape_and_index_entries():
    server, api, ws = setup()
    keep = api.create(ws)["session_id"]
    api.append(keep, "note", {})
    base = mdb_stat(server.data)
    sid = api.create(ws)["session_id"]
    # longer than one purge chunk, so that the rest goes in the background
    for k in range(25):
        ok(api.call("session.append", {"session_id": sid, "entries": [{"kind": "note", "body": {"k": k}}] * 1000}),
           "batch")
    grown = mdb_stat(server.data)
    check(grown["tape"] == base["tape"] + 25001 and grown["sessions"] == base["sessions"] + 1,
          "%r -> %r", base, grown)
    r = ok(api.call("session.delete", {"session_id": sid}), "delete")
    check(r == {"session_id": sid, "deleted_events": 25001}, "delete answered %r", r)
    err(api.call("session.events", {"session_id": sid}), "not_found")
    err(api.call("session.get", {"session_id": sid}), "not_found")
    err(api.call("session.append", {"session_id": sid, "kind": "note", "body": {}}), "not_found")
    err(api.call("session.delete", {"session_id": sid}), "not_found")
    wait_for(lambda: mdb_stat(server.data) == base, 20, "the tape, record and index entries to be gone")
    check(len(api.tape(keep)) == 2, "the other session was touched")
    check(api.append(keep, "note", {})["seq"] == 3, "the other session still appends")
    server.stop()


def test_delete_resumes_purging_after_a_crash():
    server, api, ws = setup()
    # what the purge must bring back; meta gains the write-ahead log's
    # applied LSN at the first commit (docs/sessions.md), so it is left out
    base = mdb_stat(server.data)
    base.pop("meta", None)
    sid = api.create(ws)["session_id"]
    for k in range(30):
        ok(api.call("session.append", {"session_id": sid, "entries": [{"kind": "note"}] * 1000}), "batch")
    ok(api.call("session.delete", {"session_id": sid}), "delete")
    server.proc.kill()          # SIGKILL, perhaps in the middle of the purge
    server.close_control()
    server.start()
    wait_for(lambda: {k: v for k, v in mdb_stat(server.data).items() if k != "meta"} == base, 20,
             "the purge to finish after the restart")
    server.stop()


def test_restart_keeps_everything():
    server, api, ws = setup()
    sid = api.create(ws, title="kept")["session_id"]
    for k in range(50):
        api.append(sid, "prompt", {"text": "p%d" % k})
    tape, rec = api.tape(sid), api.get(sid)
    check(server.stop() == 0, "serve did not stop cleanly")
    server.start()
    api = Api(server)
    check(api.get(sid) == rec and api.tape(sid) == tape, "changed across a restart")
    check(api.append(sid)["seq"] == 52, "the sequence did not continue")
    server.stop()


def test_mdb_tools_read_the_environment():
    server, api, ws = setup()
    sid = api.create(ws, title="dumped")["session_id"]
    api.append(sid, "prompt", {"text": "visible-in-the-dump"})
    env = os.path.join(server.data, "session")
    counts = mdb_stat(server.data)
    for name in ("sessions", "tape", "status", "commands", "expiry", "purge", "meta"):
        check(name in counts, "mdb_stat does not list %s: %r", name, counts)
    check(counts["sessions"] == 1 and counts["tape"] == 2 and counts["status"] == 1, "counts %r", counts)
    p = subprocess.run(["mdb_dump", "-p", "-a", env], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
    check(p.returncode == 0, "mdb_dump failed: %s", p.stderr.decode())
    out = p.stdout.decode("latin-1")
    check(sid in out and "visible-in-the-dump" in out, "mdb_dump output lacks the session and entry")
    check("schema_version" in out, "mdb_dump shows no schema version")
    # and while the server is stopped
    server.stop()
    p = subprocess.run(["mdb_stat", "-e", env], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
    check(p.returncode == 0 and "Map size" in p.stdout.decode(), "mdb_stat -e: %s", p.stderr.decode())


def test_unknown_schema_version_is_refused():
    if not shutil.which("mdb_load"):
        skip("mdb_load is not installed")
    data = tmpdir()
    env = os.path.join(data, "session")
    os.makedirs(env)
    dump = ("VERSION=3\nformat=bytevalue\ntype=btree\nHEADER=END\n"
            " %s\n 00000063\nDATA=END\n" % "schema_version".encode().hex())
    p = subprocess.run(["mdb_load", "-s", "meta", env], input=dump.encode(), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=20)
    check(p.returncode == 0, "mdb_load: %s", p.stderr.decode())
    server = Server(data=data)
    try:
        server.start(timeout=10)
        started = True
    except Exception:
        started = False
    check(not started, "serve started on an environment of an unknown schema version")
    rc = server.proc.wait(10)
    log = server.log()
    check(rc == 1, "serve ended with %s, not exit 1", rc)
    check("schema version 99 is unknown to this build (expects 1)" in log, "no clear message: %s", log[-2000:])


def test_cli_sessions_and_events():
    server, api, ws = setup()
    d = ["--data", server.data]
    rc, out, e = sb("sessions", "new", "--workspace", ws, "--title", "from cli", "--approval", "auto",
                    "--max-steps", "12", "--json", *d)
    check(rc == 0, "sessions new: %d %s", rc, e)
    s = json.loads(out)
    sid = s["session_id"]
    check(s["title"] == "from cli" and s["max_steps"] == 12 and s["approval_policy"] == "auto", "%r", s)
    # a relative workspace is the caller's, not the server's
    p = subprocess.run([SB_BIN, "sessions", "new", "--workspace", ".", "--json"] + d, cwd=ws,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
    check(p.returncode == 0 and json.loads(p.stdout)["workspace"] == os.path.realpath(ws),
          "sessions new --workspace . gave %r %r", p.stdout, p.stderr)
    rc, out, e = sb("sessions", "show", sid, *d)
    check(rc == 0 and re.search(r"^title\s+from cli$", out, re.M) and re.search(r"^last_seq\s+1$", out, re.M),
          "show: %s", out)
    rc, out, e = sb("sessions", "update", sid, "--model", "m2", "--json", *d)
    check(rc == 0 and json.loads(out)["model"] == "m2", "update: %s %s", out, e)
    rc, out, e = sb("sessions", *d)
    check(rc == 0 and sid in out and "m2" in out and out.splitlines()[0].startswith("SESSION"),
          "list: %s", out)
    rc, out, e = sb("sessions", "list", "--json", *d)
    rows = [json.loads(line) for line in out.splitlines()]
    # newest first: the session made second, in the workspace, comes first
    check(rc == 0 and len(rows) == 2 and rows[1]["session_id"] == sid, "list --json: %s", out)
    api.append(sid, "tool.call", {"call_id": "c1", "name": "shell", "arguments": '{"cmd":"ls"}'},
               run_id="0" * 26)
    rc, out, e = sb("events", "--session", sid, *d)
    lines = out.splitlines()
    check(rc == 0 and len(lines) == 3, "events: %s %s", out, e)
    check(lines[2].split()[0] == "3" and "tool.call" in lines[2] and "shell" in lines[2] and "0" * 26 in lines[2],
          "events line: %r", lines[2])
    rc, out, e = sb("events", "--session", sid, "--after", "1", "--json", *d)
    check(rc == 0 and [json.loads(x)["seq"] for x in out.splitlines()] == [2, 3], "events --after: %s", out)
    rc, out, e = sb("sessions", "close", sid, *d)
    check(rc == 0 and "closed" in out, "close: %s %s", out, e)
    rc, out, e = sb("sessions", "list", "--status", "closed", "--json", *d)
    check(rc == 0 and [json.loads(x)["session_id"] for x in out.splitlines()] == [sid], "closed list: %s", out)
    rc, out, e = sb("sessions", "delete", sid, *d)
    check(rc == 0 and "deleted" in out, "delete: %s %s", out, e)

    # failures: exit 1, one clear line on stderr
    for args, words in [
        (["sessions", "show", sid], "not_found"),
        (["sessions", "new", "--workspace", ws + "/missing"], "workspace"),
        (["events", "--session", sid], "not_found"),
    ]:
        rc, out, e = sb(*(args + d))
        check(rc == 1 and words in e and len(e.strip().splitlines()) == 1, "%r: exit %d, stderr %r", args, rc, e)
    # usage errors: exit 2
    for args in (["sessions", "frobnicate"], ["sessions", "show", "nonsense"], ["sessions", "show"],
                 ["sessions", "new", "--workspace", ws, "--approval", "bold"],
                 ["sessions", "update", sid], ["sessions", "new", "--workspace", ws, "--max-steps", "many"],
                 ["sessions", "show", sid, "--title", "x"], ["sessions", "--status", "asleep"],
                 ["events"], ["events", "--session", sid, "--after", "-3"], ["sessions", "--bogus"]):
        rc, out, e = sb(*(args + d))
        check(rc == 2 and "switchboard" in e, "%r: exit %d, stderr %r", args, rc, e)
    for args in (["sessions", "--help"], ["events", "--help"]):
        rc, out, e = sb(*args)
        check(rc == 0 and out.startswith("usage: switchboard"), "%r: %d %s", args, rc, out)
    # no server
    rc, out, e = sb("sessions", "--data", tmpdir())
    check(rc == 1 and "no server" in e, "without a server: %d %r", rc, e)
    server.stop()


if __name__ == "__main__":
    run_tests(globals())
