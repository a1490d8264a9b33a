#!/usr/bin/python3
"""The interact actor (issue 10, docs/approvals.md), driven over the bus as an
outside client does, and through its CLI.

  - an interaction is committed, then announced on the session's tape
    (approval.requested), and asking again for the same (run, call) gives the
    same interaction whatever its status;
  - two clients racing to resolve: exactly one wins, the other gets conflict
    naming the winner; a retry under the winner's command_id gets the same
    reply; unknown and malformed ids get not_found;
  - deadlines: a 2 s deadline expires to the declared default with
    resolved_by "deadline" and a tape entry; one that passed while the server
    was down expires at startup, before a client can ask;
  - SIGKILL with a pending interaction: still pending after the restart, its
    announcement on the tape once; an announcement the session actor could not
    take before the kill reaches the tape after the restart;
  - list filters, newest-first order, cursors and id prefixes;
  - `interactions`, `interaction ID`, `resolve ID` and their exit codes.
"""
import json
import os
import random
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import (Client, Server, check, cli, new_id, now_ms, run_tests, tmpdir,  # noqa: E402
                    wait_for)

ARGS = json.dumps({"command": "rm -rf build && make"})


def new_session(client, ws=None):
    r = client.request("session.create", {"workspace": ws or tmpdir()})
    check(r.type == "session.create.ok", "session.create: %r", r.body)
    return r.body["session"]["session_id"]


def ask(client, sid, run_id=None, call_id="call_1", **extra):
    body = {"session_id": sid, "run_id": run_id or new_id(), "call_id": call_id, "tool": "shell",
            "arguments": ARGS, "summary": "rm -rf build && make"}
    body.update(extra)
    r = client.request("interact.request", body)
    check(r.type == "interact.request.ok", "interact.request: %r", r.body)
    check(r.body["interaction_id"] == r.body["interaction"]["interaction_id"], "ids differ: %r", r.body)
    return r.body["interaction"]


def get(client, iid):
    r = client.request("interact.get", {"interaction_id": iid})
    check(r.type == "interact.get.ok", "interact.get %s: %r", iid, r.body)
    return r.body["interaction"]


def resolve(client, iid, decision="approve", **extra):
    body = {"interaction_id": iid, "decision": decision}
    body.update(extra)
    return client.request("interact.resolve", body)


def tape(client, sid):
    r = client.request("session.events", {"session_id": sid, "limit": 5000})
    check(r.type == "session.events.ok", "session.events: %r", r.body)
    return r.body["events"]


def entries(client, sid, kind, iid=None):
    return [e for e in tape(client, sid)
            if e["kind"] == kind and (iid is None or e["body"].get("interaction_id") == iid)]


def wait_entry(client, sid, kind, iid, timeout=5):
    return wait_for(lambda: entries(client, sid, kind, iid), timeout, "%s of %s on the tape" % (kind, iid))


# ---------------------------------------------------------------------------

def test_request_is_persisted_then_announced_and_idempotent():
    with Server() as srv:
        c = Client(srv.endpoint())
        sid = new_session(c)
        rid = new_id()
        t0 = now_ms()
        ia = ask(c, sid, rid, "call_1", risk="high", diff="--- a/x\n+++ b/x\n", default_outcome="approve",
                 deadline_s=600)
        iid = ia["interaction_id"]
        check(iid.startswith("ia_") and len(iid) == 29, "id %r", iid)
        check(ia["status"] == "pending" and ia["session_id"] == sid and ia["run_id"] == rid
              and ia["call_id"] == "call_1" and ia["tool"] == "shell" and ia["arguments"] == ARGS
              and ia["risk"] == "high" and ia["default_outcome"] == "approve", "record %r", ia)
        check("decision" not in ia and "resolved_by" not in ia and "command_id" not in ia, "record %r", ia)
        check(t0 <= ia["created_at"] <= now_ms(), "created_at %r", ia)
        check(ia["deadline_at"] == ia["created_at"] + 600000, "deadline_at %r", ia)
        check(get(c, iid) == ia, "get differs from the request's reply")

        # announced on the tape, with the run, after the commit
        e = wait_entry(c, sid, "approval.requested", iid)
        check(len(e) == 1 and e[0]["run_id"] == rid, "entries %r", e)
        b = e[0]["body"]
        check(b["call_id"] == "call_1" and b["tool"] == "shell" and b["arguments"] == ARGS
              and b["summary"] == "rm -rf build && make" and b["diff"].startswith("--- a/x")
              and b["risk"] == "high" and b["deadline_at"] == ia["deadline_at"]
              and b["default_outcome"] == "approve", "announcement %r", b)

        # asking again for the same run and call: the same interaction
        again = ask(c, sid, rid, "call_1", arguments="{}")
        check(again == ia, "a second ask made %r", again)
        check(resolve(c, iid, "reject", feedback="no").type == "interact.resolve.ok", "resolve failed")
        after = ask(c, sid, rid, "call_1")
        check(after["interaction_id"] == iid and after["status"] == "rejected", "after resolving: %r", after)
        # the same run and call under another session is not that interaction
        other = new_session(c)
        r = c.request("interact.request", {"session_id": other, "run_id": rid, "call_id": "call_1",
                                           "tool": "shell", "arguments": "{}"})
        check(r.is_error() and r.code == "conflict", "another session's ask: %r", r.body)
        # another call of the run is another interaction
        check(ask(c, sid, rid, "call_2")["interaction_id"] != iid, "call_2 got the same id")
        check(len(entries(c, sid, "approval.requested", iid)) == 1, "announced twice")


def test_validation():
    with Server() as srv:
        c = Client(srv.endpoint())
        sid = new_session(c)
        base = {"session_id": sid, "run_id": new_id(), "call_id": "c", "tool": "shell", "arguments": "{}"}
        for bad, field in (({"default_outcome": "maybe"}, "default_outcome"), ({"risk": "extreme"}, "risk"),
                           ({"deadline_s": 604801}, "deadline_s"), ({"session_id": "x"}, "session_id"),
                           ({"call_id": ""}, "call_id"), ({"tool": ""}, "tool")):
            body = dict(base)
            body.update(bad)
            r = c.request("interact.request", body)
            check(r.is_error() and r.code == "invalid" and field in r.body["message"],
                  "request with %r: %r", bad, r.body)
        body = dict(base)
        del body["arguments"]
        r = c.request("interact.request", body)
        check(r.is_error() and r.code == "invalid", "request without arguments: %r", r.body)
        iid = ask(c, sid)["interaction_id"]
        for bad, field in (({"decision": "yes"}, "decision"), ({"scope": "forever"}, "scope"),
                           ({"resolved_by": "deadline"}, "resolved_by"), ({"resolved_by": ""}, "resolved_by")):
            body = {"interaction_id": iid, "decision": "approve"}
            body.update(bad)
            r = c.request("interact.resolve", body)
            check(r.is_error() and r.code == "invalid" and field in r.body["message"],
                  "resolve with %r: %r", bad, r.body)
        check(get(c, iid)["status"] == "pending", "a refused resolve changed the interaction")
        for bad in ({"status": "done"}, {"session_id": "nope"}, {"cursor": "ia_123"}, {"id_prefix": "ia_U"},
                    {"limit": 0}, {"limit": 1001}):
            r = c.request("interact.list", bad)
            check(r.is_error() and r.code == "invalid", "list with %r: %r", bad, r.body)


def test_unknown_and_malformed_ids_are_not_found():
    with Server() as srv:
        c = Client(srv.endpoint())
        sid = new_session(c)
        real = ask(c, sid)["interaction_id"]
        unknown = "ia_" + new_id()
        for iid in (unknown, "", "nope", "ia_", real.lower(), real + "0", real[3:], "ia_" + "Z" * 26,
                    "ia_" + "U" * 26, "x" * 500, "ia_\u00e9" + "0" * 25):
            for r in (c.request("interact.get", {"interaction_id": iid}),
                      resolve(c, iid, "approve"), resolve(c, iid, "reject", command_id="k")):
                check(r.is_error() and r.code == "not_found", "%r: %r", iid, r.body)
        check(get(c, real)["status"] == "pending", "the real one changed")
        check(entries(c, sid, "approval.resolved") == [], "a not_found resolve reached the tape")


def test_racing_resolves_one_winner():
    with Server() as srv:
        setup = Client(srv.endpoint())
        sid = new_session(setup)
        ids = [ask(setup, sid, call_id="race_%d" % k)["interaction_id"] for k in range(20)]
        a, b = Client(srv.endpoint(), name="alice"), Client(srv.endpoint(), name="bob")
        # Both clients send every resolve before either reads a reply, the
        # pair of each interaction in a random order, on two connections:
        # the broker and the actor see two interleaved streams.
        sent = {"alice": {}, "bob": {}}
        for iid in ids:
            pair = [(a, "alice", "approve"), (b, "bob", "reject")]
            random.shuffle(pair)
            for client, who, decision in pair:
                sent[who][iid] = client.send("interact.resolve", {"interaction_id": iid, "decision": decision,
                                                                  "resolved_by": who, "command_id": who + iid})
        replies = {"alice": {iid: a.wait_reply(mid, 10) for iid, mid in sent["alice"].items()},
                   "bob": {iid: b.wait_reply(mid, 10) for iid, mid in sent["bob"].items()}}
        wins = {"alice": 0, "bob": 0}
        for iid in ids:
            ra, rb = replies["alice"][iid], replies["bob"][iid]
            ok = [r for r in (ra, rb) if r.type == "interact.resolve.ok"]
            lost = [r for r in (ra, rb) if r.is_error()]
            check(len(ok) == 1 and len(lost) == 1, "%s: %r / %r", iid, ra.body, rb.body)
            winner = ok[0].body["interaction"]
            wins[winner["resolved_by"]] += 1
            check(lost[0].code == "conflict", "the loser got %r", lost[0].body)
            d = lost[0].body["detail"]
            check(d["resolved_by"] == winner["resolved_by"] and d["status"] == winner["status"]
                  and d["decision"] == winner["decision"] and d["interaction_id"] == iid,
                  "conflict detail %r for winner %r", d, winner)
            check(winner["resolved_by"] in lost[0].body["message"], "message %r", lost[0].body["message"])
            check(get(setup, iid) == winner, "the stored record is not the winner's")
            # the winner's retry (same command_id) gets the same reply; the
            # loser's retry still gets conflict
            w = winner["resolved_by"]
            again = resolve(setup, iid, winner["decision"], command_id=w + iid, resolved_by=w)
            check(again.type == "interact.resolve.ok" and again.body["interaction"] == winner,
                  "winner's retry: %r", again.body)
            l = "bob" if w == "alice" else "alice"
            again = resolve(setup, iid, "approve", command_id=l + iid, resolved_by=l)
            check(again.is_error() and again.code == "conflict", "loser's retry: %r", again.body)
        print("  racing: alice won %(alice)d, bob %(bob)d" % wins)
        # exactly one announcement of each answer
        wait_for(lambda: len(entries(setup, sid, "approval.resolved")) == len(ids), 5, "20 approval.resolved")
        res = entries(setup, sid, "approval.resolved")
        check(sorted(e["body"]["interaction_id"] for e in res) == sorted(ids), "resolved entries %r", res)
        for e in res:
            check(e["body"]["resolved_by"] == get(setup, e["body"]["interaction_id"])["resolved_by"],
                  "tape and record disagree: %r", e)


def test_command_id_is_idempotent():
    with Server() as srv:
        c = Client(srv.endpoint())
        sid = new_session(c)
        iid = ask(c, sid)["interaction_id"]
        first = resolve(c, iid, "reject", feedback="use make clean", scope="session", resolved_by="web:ann",
                        command_id="cmd-1")
        check(first.type == "interact.resolve.ok", "first: %r", first.body)
        ia = first.body["interaction"]
        check(ia["status"] == "rejected" and ia["decision"] == "reject" and ia["scope"] == "session"
              and ia["feedback"] == "use make clean" and ia["resolved_by"] == "web:ann"
              and ia["resolved_at"] >= ia["created_at"], "resolved %r", ia)
        for _ in range(3):
            again = resolve(c, iid, "reject", feedback="use make clean", scope="session", resolved_by="web:ann",
                            command_id="cmd-1")
            check(again.type == "interact.resolve.ok" and again.body["interaction"] == ia, "retry: %r", again.body)
        for extra in ({"command_id": "cmd-2"}, {}):
            r = resolve(c, iid, "reject", **extra)
            check(r.is_error() and r.code == "conflict" and r.body["detail"]["resolved_by"] == "web:ann",
                  "%r: %r", extra, r.body)
        wait_entry(c, sid, "approval.resolved", iid)
        res = entries(c, sid, "approval.resolved", iid)
        check(len(res) == 1, "resolved %d times on the tape", len(res))
        b = res[0]["body"]
        check(b == {"interaction_id": iid, "call_id": "call_1", "status": "rejected", "decision": "reject",
                    "scope": "session", "resolved_by": "web:ann", "feedback": "use make clean"},
              "announcement %r", b)
        # an answer without resolved_by is signed "api"
        iid2 = ask(c, sid, call_id="c2")["interaction_id"]
        r = resolve(c, iid2, "approve")
        check(r.body["interaction"]["resolved_by"] == "api" and r.body["interaction"]["scope"] == "once",
              "defaults %r", r.body)


def test_command_id_names_one_answer():
    # the winner's command_id replays only the same answer (in any field
    # order); another answer under it is told who won, as any later one is
    with Server() as srv:
        c = Client(srv.endpoint())
        sid = new_session(c)
        iid = ask(c, sid)["interaction_id"]
        first = resolve(c, iid, "approve", scope="session", resolved_by="web:ann", command_id="cmd-9")
        check(first.type == "interact.resolve.ok", "first: %r", first.body)
        again = c.request("interact.resolve", {"command_id": "cmd-9", "resolved_by": "web:ann", "scope": "session",
                                               "decision": "approve", "interaction_id": iid})
        check(again.type == "interact.resolve.ok" and again.body == first.body, "reordered retry: %r", again.body)
        for other in ({"decision": "reject"}, {"scope": "once"}, {"resolved_by": "web:bob"},
                      {"feedback": "not this one"}):
            body = dict(scope="session", resolved_by="web:ann", command_id="cmd-9")
            body.update(other)
            decision = body.pop("decision", "approve")
            r = resolve(c, iid, decision, **body)
            check(r.is_error() and r.code == "conflict" and r.body["detail"]["resolved_by"] == "web:ann",
                  "%r: %r", other, r.body)


def test_a_forgotten_command_id_still_replays_the_same_answer():
    # past SWITCHBOARD_COMMAND_TTL_S the id is forgotten; the record still
    # names it, so a retry of the same answer gets the record, not conflict
    # (also what a resolve from before the ids were remembered apart gets)
    with Server(env={"SWITCHBOARD_COMMAND_TTL_S": "1"}) as srv:
        c = Client(srv.endpoint())
        sid = new_session(c)
        iid = ask(c, sid)["interaction_id"]
        first = resolve(c, iid, "approve", scope="session", resolved_by="web:ann", command_id="cmd-7")
        check(first.type == "interact.resolve.ok", "first: %r", first.body)
        time.sleep(1.2)     # the TTL, in seconds, is the unit under test
        again = resolve(c, iid, "approve", scope="session", resolved_by="web:ann", command_id="cmd-7")
        check(again.type == "interact.resolve.ok" and again.body["interaction"]["status"] == "approved"
              and again.body["interaction"]["resolved_by"] == "web:ann", "retry after the TTL: %r", again.body)
        other = resolve(c, iid, "reject", resolved_by="web:ann", command_id="cmd-7")
        check(other.is_error() and other.code == "conflict", "another answer after the TTL: %r", other.body)


def test_deadline_expires_to_the_default():
    with Server() as srv:
        c = Client(srv.endpoint())
        sid = new_session(c)
        rej = ask(c, sid, call_id="r", deadline_s=2)
        app = ask(c, sid, call_id="a", deadline_s=2, default_outcome="approve")
        never = ask(c, sid, call_id="n", deadline_s=0)
        check("deadline_at" not in never, "deadline 0 gave %r", never)
        check(rej["deadline_at"] == rej["created_at"] + 2000, "deadline_at %r", rej)
        for ia, decision in ((rej, "reject"), (app, "approve")):
            got = wait_for(lambda: get(c, ia["interaction_id"])["status"] != "pending" and get(c, ia["interaction_id"]),
                           6, "the deadline of %s" % ia["interaction_id"])
            check(got["status"] == "expired" and got["decision"] == decision and got["resolved_by"] == "deadline"
                  and got["scope"] == "once", "expired %r", got)
            late = got["resolved_at"] - got["deadline_at"]
            check(0 <= late <= 250 + 100, "resolved %d ms after the deadline", late)
            e = wait_entry(c, sid, "approval.resolved", ia["interaction_id"])
            check(e[0]["body"]["status"] == "expired" and e[0]["body"]["decision"] == decision
                  and e[0]["body"]["resolved_by"] == "deadline", "tape %r", e)
            r = resolve(c, ia["interaction_id"], "approve")
            check(r.is_error() and r.code == "conflict" and r.body["detail"]["resolved_by"] == "deadline"
                  and r.body["detail"]["status"] == "expired", "resolve after expiry: %r", r.body)
        check(get(c, never["interaction_id"])["status"] == "pending", "no deadline, yet %r",
              get(c, never["interaction_id"]))


def test_server_default_deadline():
    with Server(args=["--approval-deadline", "1"]) as srv:
        c = Client(srv.endpoint())
        sid = new_session(c)
        ia = ask(c, sid)
        check(ia["deadline_at"] == ia["created_at"] + 1000, "server default: %r", ia)
        ia = ask(c, sid, call_id="own", deadline_s=30)
        check(ia["deadline_at"] == ia["created_at"] + 30000, "own deadline: %r", ia)
    with Server(args=["--approval-deadline", "0"]) as srv:
        c = Client(srv.endpoint())
        check("deadline_at" not in ask(c, new_session(c)), "--approval-deadline 0 set a deadline")
    with Server() as srv:
        c = Client(srv.endpoint())
        ia = ask(c, new_session(c))
        check(ia["deadline_at"] == ia["created_at"] + 900000, "the default is not 900 s: %r", ia)
    for bad in ("-1", "604801", "x", ""):
        rc, out, err = cli(Server(), "serve", "--approval-deadline", bad)
        check(rc == 2 and "--approval-deadline" in err, "serve --approval-deadline %r: %d %s", bad, rc, err)


def test_deadline_passed_while_down_expires_at_startup():
    srv = Server().start()
    c = Client(srv.endpoint())
    sid = new_session(c)
    ia = ask(c, sid, deadline_s=1)
    keep = ask(c, sid, call_id="keep", deadline_s=3600)
    wait_entry(c, sid, "approval.requested", ia["interaction_id"])
    c.close()
    check(srv.stop() == 0, "serve did not stop cleanly")
    wait_for(lambda: now_ms() > ia["deadline_at"] + 50, 5, "the deadline to pass while the server is down")
    srv.start()
    c = Client(srv.endpoint())
    # the first answer after the restart already says expired: it expired
    # before the server bound its endpoints
    got = get(c, ia["interaction_id"])
    check(got["status"] == "expired" and got["resolved_by"] == "deadline" and got["decision"] == "reject",
          "after the restart: %r", got)
    check(got["resolved_at"] > ia["deadline_at"], "resolved_at %r", got)
    check(get(c, keep["interaction_id"])["status"] == "pending", "the far deadline expired too")
    e = wait_entry(c, sid, "approval.resolved", ia["interaction_id"])
    check(len(e) == 1 and e[0]["body"]["status"] == "expired", "tape %r", e)
    srv.stop()


def test_sigkill_with_a_pending_interaction():
    srv = Server().start()
    c = Client(srv.endpoint())
    sid = new_session(c)
    rid = new_id()
    ia = ask(c, sid, rid, deadline_s=0)
    wait_entry(c, sid, "approval.requested", ia["interaction_id"])
    c.close()
    srv.close_control()
    srv.proc.send_signal(signal.SIGKILL)
    check(srv.proc.wait(10) == -signal.SIGKILL, "serve did not die of SIGKILL")
    srv.start()
    c = Client(srv.endpoint())
    check(get(c, ia["interaction_id"]) == ia, "changed across the kill: %r", get(c, ia["interaction_id"]))
    r = c.request("interact.list", {"status": "pending"})
    check([x["interaction_id"] for x in r.body["interactions"]] == [ia["interaction_id"]], "pending %r", r.body)
    # the executor asks again after its restart: the same interaction
    check(ask(c, sid, rid) == ia, "a re-ask after the restart made a new interaction")
    check(len(entries(c, sid, "approval.requested")) == 1, "announced twice across the kill")
    check(resolve(c, ia["interaction_id"], "approve").type == "interact.resolve.ok", "resolve after restart")
    wait_entry(c, sid, "approval.resolved", ia["interaction_id"])
    srv.stop()


def test_announcement_waits_in_the_outbox_across_a_kill():
    # The session actor is not there when the interaction is committed: its
    # announcement waits in the outbox, is still there after a SIGKILL, and
    # reaches the tape, once, when the server comes back whole.
    srv = Server().start()
    c = Client(srv.endpoint())
    sid = new_session(c)
    c.close()
    check(srv.stop() == 0, "serve did not stop cleanly")
    srv.args = ["--actors", "interact"]
    srv.start()
    c = Client(srv.endpoint())
    ia = ask(c, sid, deadline_s=0)
    r = resolve(c, ia["interaction_id"], "reject", feedback="not now")
    check(r.type == "interact.resolve.ok", "resolve without a session actor: %r", r.body)
    wait_for(lambda: "tape append from the outbox failed" in srv.log(), 5, "a failed append in the log")
    c.close()
    srv.close_control()
    srv.proc.send_signal(signal.SIGKILL)
    srv.proc.wait(10)
    srv.args = []
    srv.start()
    c = Client(srv.endpoint())
    wait_entry(c, sid, "approval.resolved", ia["interaction_id"])
    t = tape(c, sid)
    kinds = [e["kind"] for e in t if e["kind"].startswith("approval.")]
    check(kinds == ["approval.requested", "approval.resolved"], "tape %r", kinds)
    check(t[-1]["body"]["feedback"] == "not now", "resolved %r", t[-1])
    srv.stop()


def test_list_filters_order_and_cursor():
    with Server() as srv:
        c = Client(srv.endpoint())
        s1, s2 = new_session(c), new_session(c)
        r1, r2, r3 = new_id(), new_id(), new_id()
        made = []       # oldest first
        for k in range(5):
            made.append(ask(c, s1, r1, "a%d" % k))
        for k in range(3):
            made.append(ask(c, s1, r2, "b%d" % k))
        for k in range(4):
            made.append(ask(c, s2, r3, "c%d" % k))
        ids = [m["interaction_id"] for m in made]
        for iid in ids[1:12:3]:
            resolve(c, iid, "approve")
        resolve(c, ids[2], "reject")

        def listed(**q):
            out, cursor, pages = [], None, 0
            while True:
                body = dict(q)
                if cursor:
                    body["cursor"] = cursor
                r = c.request("interact.list", body)
                check(r.type == "interact.list.ok", "list %r: %r", body, r.body)
                out += r.body["interactions"]
                pages += 1
                cursor = r.body.get("next_cursor")
                check(pages < 50, "paging does not end")
                if not cursor:
                    return out, pages

        def want(pred):
            return [m["interaction_id"] for m in reversed(made) if pred(get(c, m["interaction_id"]))]
        everything, _ = listed()
        check([x["interaction_id"] for x in everything] == ids[::-1], "not newest first")
        for q, pred in (({"session_id": s1}, lambda x: x["session_id"] == s1),
                        ({"session_id": s2}, lambda x: x["session_id"] == s2),
                        ({"run_id": r2}, lambda x: x["run_id"] == r2),
                        ({"status": "pending"}, lambda x: x["status"] == "pending"),
                        ({"status": "approved"}, lambda x: x["status"] == "approved"),
                        ({"status": "rejected"}, lambda x: x["status"] == "rejected"),
                        ({"status": "expired"}, lambda x: False),
                        ({"session_id": s1, "status": "pending"},
                         lambda x: x["session_id"] == s1 and x["status"] == "pending"),
                        ({"session_id": s2, "run_id": r1}, lambda x: False),
                        ({"run_id": new_id()}, lambda x: False)):
            for limit in (None, 1, 2, 1000):
                qq = dict(q)
                if limit:
                    qq["limit"] = limit
                got, pages = listed(**qq)
                check([x["interaction_id"] for x in got] == want(pred), "list %r: %r", qq,
                      [x["interaction_id"] for x in got])
                if limit == 1 and got:
                    check(pages == len(got), "limit 1 took %d pages for %d", pages, len(got))
        # the last page has no next_cursor; a full page followed by nothing neither
        r = c.request("interact.list", {"limit": len(ids)})
        check(len(r.body["interactions"]) == len(ids) and "next_cursor" not in r.body, "full page %r",
              r.body.get("next_cursor"))
        # id prefixes, in either case, with or without ia_
        target = ids[7]
        for p in (target, target[3:], target.lower(), target[:20], target[3:20].lower()):
            norm = "ia_" + (p[3:] if p.lower().startswith("ia_") else p).upper()
            got = [x["interaction_id"] for x in listed(id_prefix=p)[0]]
            check(target in got and all(x.startswith(norm) for x in got), "id_prefix %r: %r", p, got)
        got, _ = listed(id_prefix=target, session_id=s1)
        check([x["interaction_id"] for x in got] == [target], "id_prefix with a session: %r", got)
        got, _ = listed(id_prefix=ids[0][:-1] + ("Z" if ids[0][-1] != "Z" else "Y"))
        check(got == [], "a prefix matching nothing: %r", got)


def test_cli_commands_and_exit_codes():
    with Server() as srv:
        c = Client(srv.endpoint())
        ws = tmpdir()
        sid = new_session(c, ws)
        rid = new_id()
        a = ask(c, sid, rid, "a")
        b = ask(c, sid, rid, "b", tool="write_file",
                arguments=json.dumps({"path": "src/x.c", "content": "int x;\n"}),
                summary="src/x.c", diff="--- a/src/x.c\n+++ b/src/x.c\n@@ -0,0 +1 @@\n+int x;\n")
        rc, out, err = cli(srv, "interactions")
        check(rc == 0 and a["interaction_id"] in out and b["interaction_id"] in out and "pending" in out,
              "interactions: %d %s %s", rc, out, err)
        lines = out.strip().splitlines()
        check(lines[0].startswith("INTERACTION") and b["interaction_id"] in lines[1], "order %r", lines)
        rc, out, err = cli(srv, "interactions", "--json", "--session", sid[:12], "--status", "pending")
        got = [json.loads(l) for l in out.splitlines()]
        check(rc == 0 and [x["interaction_id"] for x in got] == [b["interaction_id"], a["interaction_id"]],
              "interactions --json: %d %s %s", rc, out, err)
        rc, out, err = cli(srv, "interactions", "--run", rid, "--limit", "1", "--json")
        check(rc == 0 and len(out.splitlines()) == 1, "--limit 1: %s", out)

        rc, out, err = cli(srv, "interaction", b["interaction_id"])
        check(rc == 0 and "pending" in out and "+int x;" in out and "src/x.c" in out
              and "switchboard resolve" in out, "interaction: %d %s %s", rc, out, err)
        # a prefix of a's id that b's does not share (ids made in the same
        # millisecond share their time part and most of the rest)
        ia, ib = a["interaction_id"], b["interaction_id"]
        common = next((k for k in range(len(ia)) if ia[k] != ib[k]), len(ia))
        rc, out, err = cli(srv, "interaction", ia[3:max(15, common + 1)].lower(), "--json")
        check(rc == 0 and json.loads(out) == a, "interaction PREFIX --json: %d %s %s", rc, out, err)
        rc, out, err = cli(srv, "interaction", "last", "--json")
        check(rc == 0 and json.loads(out)["interaction_id"] == b["interaction_id"], "last: %s %s", out, err)
        rc, out, err = cli(srv, "interaction", a["interaction_id"])
        check(rc == 0 and "$ rm -rf build && make" in out, "a shell call shows its command: %s", out)

        # resolve: the outcome, then the conflict naming who answered first
        rc, out, err = cli(srv, "resolve", a["interaction_id"], "--reject", "--feedback", "not on main",
                           "--scope", "session")
        check(rc == 0 and "rejected" in out and a["interaction_id"] in out and "not on main" in out,
              "resolve: %d %s %s", rc, out, err)
        got = get(c, a["interaction_id"])
        check(got["resolved_by"].startswith("cli:") and "@" in got["resolved_by"] and got["scope"] == "session"
              and got["feedback"] == "not on main", "resolved %r", got)
        rc, out, err = cli(srv, "resolve", a["interaction_id"], "--approve")
        check(rc == 1 and "conflict" in err and got["resolved_by"] in err and "rejected" in err,
              "second resolve: %d %s %s", rc, out, err)
        rc, out, err = cli(srv, "resolve", a["interaction_id"], "--approve", "--json")
        e = json.loads(err.strip().splitlines()[-1])["error"]
        check(rc == 1 and e["code"] == "conflict" and e["detail"]["resolved_by"] == got["resolved_by"],
              "--json conflict: %s", err)
        rc, out, err = cli(srv, "resolve", ib[:max(14, common + 1)], "--approve", "--json")
        check(rc == 0 and json.loads(out)["status"] == "approved", "resolve PREFIX: %d %s %s", rc, out, err)

        # not found: 1
        for bad in ("ia_" + new_id(), "nope!", "ia_" + "Z" * 26, "7ZZZZ"):
            rc, out, err = cli(srv, "resolve", bad, "--approve")
            check(rc == 1 and ("not_found" in err or "no interaction" in err), "resolve %s: %d %s %s",
                  bad, rc, out, err)
            rc, out, err = cli(srv, "interaction", bad, "--json")
            check(rc == 1 and json.loads(err)["error"]["code"] == "not_found", "interaction %s: %d %s %s",
                  bad, rc, out, err)
        # usage: 2
        iid = ask(c, sid, rid, "c")["interaction_id"]
        for args in (["resolve", iid], ["resolve", iid, "--approve", "--reject"], ["resolve", "--approve"],
                     ["resolve", iid, "--approve", "--scope", "forever"], ["resolve", iid, iid, "--approve"],
                     ["interactions", "--status", "done"], ["interactions", "--limit", "0"],
                     ["interactions", "extra"], ["interaction"], ["interaction", iid, "--approve"],
                     ["interactions", "--session", "not-an-id!"], ["resolve", iid, "--approve", "--bogus"]):
            rc, out, err = cli(srv, *args)
            check(rc == 2, "%r exited %d: %s %s", args, rc, out, err)
        check(get(c, iid)["status"] == "pending", "a usage error resolved it")
        for cmd in ("interactions", "interaction", "resolve"):
            rc, out, err = cli(srv, cmd, "--help")
            check(rc == 0 and out.startswith("usage: switchboard " + cmd), "%s --help: %d %s", cmd, rc, out)
        # the transcript (prompt --follow, events --text) says what is asked and how to answer
        rc, out, err = cli(srv, "events", "--session", sid, "--text")
        check(rc == 0 and "approval needed: shell: rm -rf build && make" in out
              and "switchboard resolve %s --approve|--reject" % a["interaction_id"] in out
              and "approval %s rejected by %s: not on main" % (a["interaction_id"], got["resolved_by"]) in out,
              "events --text:\n%s", out)
        rc, out, err = cli(srv, "interactions", "--status", "expired")
        check(rc == 0 and out == "" and "no interactions" in err, "empty list: %d %r %r", rc, out, err)


SCHEMA = json.dumps({"type": "object", "required": ["name"], "properties": {
    "name": {"type": "string"}, "n": {"type": "integer", "minimum": 1, "default": 2}}})


def test_elicitation_requests_and_answers_are_checked():
    """An elicitation (an MCP server's question) carries a schema interact
    checks; its answers pair action with decision, and its content is
    checked against the schema, the defaults filled in."""
    srv = Server().start()
    c = Client(srv.endpoint())
    try:
        sid = new_session(c)
        for extra, why in (({}, "needs its schema"),
                           ({"schema": '{"type": "object", "properties": {"x": {"type": "array"}}}'},
                            "property 'x'"),
                           ({"schema": "[1"}, "schema: not JSON"),
                           ({"schema": SCHEMA, "default_outcome": "approve"}, "default_outcome is reject")):
            body = {"session_id": sid, "run_id": new_id(), "call_id": "e", "tool": "mcp__h__ask", "arguments": "{}",
                    "kind": "elicitation"}
            body.update(extra)
            r = c.request("interact.request", body)
            check(r.type == "error" and r.body["code"] == "invalid" and why in r.body["message"],
                  "%r: %r", extra, r.body)
        r = c.request("interact.request", {"session_id": sid, "run_id": new_id(), "call_id": "x", "tool": "shell",
                                           "arguments": ARGS, "schema": SCHEMA})
        check(r.type == "error" and "kind elicitation" in r.body["message"], "a schema on an approval: %r", r.body)
        ia = ask(c, sid, call_id="e1", tool="mcp__h__ask", arguments="{}", summary="who?", kind="elicitation",
                 schema=SCHEMA)
        check(ia["kind"] == "elicitation" and ia["schema"] == SCHEMA and "action" not in ia, "asked: %r", ia)
        iid = ia["interaction_id"]
        for decision, extra, why in (("approve", {"action": "decline"}, "action accept goes with decision approve"),
                                     ("reject", {"action": "accept"}, "action accept goes with decision approve"),
                                     ("reject", {"content": "{}"}, "content answers an accepted"),
                                     ("approve", {"scope": "session"}, "scope once"),
                                     ("approve", {"content": '{"n": 0, "name": "a"}'}, "'n' is outside its bounds"),
                                     ("approve", {"content": '{"n": 3}'}, "'name' is required"),
                                     ("approve", {"content": "[]"}, "not a JSON object")):
            r = resolve(c, iid, decision, **extra)
            check(r.type == "error" and r.body["code"] == "invalid" and why in r.body["message"],
                  "%s %r: %r", decision, extra, r.body)
        check(get(c, iid)["status"] == "pending", "a refused answer resolved it")
        r = resolve(c, iid, "approve", content='{"name": "Bob"}')
        check(r.type == "interact.resolve.ok", "accept: %r", r.body)
        got = r.body["interaction"]
        check(got["action"] == "accept" and json.loads(got["content"]) == {"name": "Bob", "n": 2}, "accepted: %r", got)
        # an approval's answer takes no action
        other = ask(c, sid, call_id="plain")
        r = resolve(c, other["interaction_id"], "reject", action="cancel")
        check(r.type == "error" and "answer an elicitation" in r.body["message"], "action on an approval: %r", r.body)
        # reject alone declines an elicitation
        ia2 = ask(c, sid, call_id="e2", tool="mcp__h__ask", arguments="{}", kind="elicitation", schema=SCHEMA)
        r = resolve(c, ia2["interaction_id"], "reject")
        check(r.type == "interact.resolve.ok" and r.body["interaction"]["action"] == "decline", "declined: %r", r.body)
        rc, out, err = cli(srv, "interactions", "--session", sid)
        check(rc == 0 and "[name, n]" in out, "interactions does not list the fields:\n%s%s", out, err)
    finally:
        c.close()
        srv.stop()


if __name__ == "__main__":
    run_tests(globals())
