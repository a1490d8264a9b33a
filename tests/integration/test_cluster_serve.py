#!/usr/bin/python3
"""test_cluster_serve — several `switchboard serve --store postgres://...`
nodes on one schema of one real PostgreSQL (sbpg.py), each with its own
data folder and its own --bus tcp://127.0.0.1:PORT (docs/scale-out.md,
"A node in serve"). Small leases (SWITCHBOARD_SHARD_LEASE_MS, _HEARTBEAT_MS)
keep the waits short.
  - two nodes join with no flag but --store: both in the nodes table with
    their endpoints and CURVE keys, 32 shards each and none unowned
    (`switchboard nodes`); `stats` and /metrics give each its role, its
    shards and its store's latency; three nodes settle at 22/22/20;
  - a session made through A is in one of A's shards; B lists it and
    reads its tape (lists and reads go to the database), B forwards its
    writes (session.append) to A over the node-to-node bus (CURVE, keys
    from the nodes table) and relays the answer; the same command_id sent
    to both does one thing, and a node forwards from its first moment (a
    forward refused because the owner has not allowed its key yet is sent
    again); run.request through B is forwarded too;
  - a person works a run of A's session through B alone: approves it,
    follows it on B's event plane, lists its runs and cancels one; the
    same approval resolved through A and B at once has one winner (the
    other is answered conflict naming it), and what a dead owner's
    forward waited for is answered by the survivor;
  - runs on both nodes at once (the demo model) each complete, with one
    run.status entry each on their tapes (each node's outbox is its own);
  - a follower on A's event plane of a session B owns sees what is
    appended through B, live, in seq order, once each (B's events are
    relayed by A), with the latency from B's ack to A's follower;
  - the fence: A stopped (SIGSTOP) past its lease, B takes every shard;
    A, woken, cannot write A's session any more, B can, and the tape
    holds nothing of A's after B took over;
  - kill -9 of A while clients append: B serves A's sessions within
    lease + heartbeat (+ slack), every acknowledged entry is on the tape
    and the seqs are 1..N without a gap;
  - the database down for longer than a lease, then back: both nodes give
    up their shards (writes refused, never acknowledged), then reconnect,
    share the shards again and go on on the same tapes without a gap;
  - a worker given both nodes (--connect A,B) whose node is killed during
    its run goes on through B, and the run completes; the CLI given the
    dead node first answers through B;
  - on LMDB, stats says the node is standalone.

Skips only when the server's binaries are absent (scripts/deps.sh --tests
installs the postgresql package).
"""
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Client, Server, Sub, check, run_tests, sb, tmpdir, unpack, wait_for  # noqa: E402
from sbagent import (LLM, LLM_ENV, Appenders, call, check_tape_contiguous, free_port, get_run,  # noqa: E402
                     llm_args, new_session, pending, prompt, prompt_ok, queue_list, resolve, runs_of, shell,
                     start_worker, tape, tool, wait_run)
from sbpg import with_postgres  # noqa: E402
from gwtest import Gateway  # noqa: E402

LEASE_MS = 1500
BEAT_MS = 250
ENV = {"SWITCHBOARD_SHARD_LEASE_MS": str(LEASE_MS), "SWITCHBOARD_SHARD_HEARTBEAT_MS": str(BEAT_MS)}


def store_url(pg, schema="cl"):
    return pg.url() + "?schema=" + schema


def node(pg, schema="cl", llm=None, script=None):
    """A started serve node on the schema, with a CURVE bus on a free port
    and its gateway (srv.gw) for /metrics; its model is the loopback
    model's `script` when given, else the demo model."""
    port = free_port()
    env = dict(os.environ, **ENV)
    env.update(LLM_ENV if llm else {})
    gw = Gateway(args=["--store", store_url(pg, schema), "--bus", "tcp://127.0.0.1:%d" % port]
                 + (llm_args(llm, script) if llm else []), env=env)
    gw.srv.port = port
    gw.srv.gw = gw
    return gw.srv


def two_nodes(pg, **kw):
    """Nodes A and B on one schema, once they hold 32 shards each."""
    a, b = node(pg, **kw), node(pg, **kw)
    settled(pg, [32, 32])
    return a, b


def nodes(pg, schema="cl"):
    rc, out, err = sb("nodes", "--store", store_url(pg, schema), "--json")
    check(rc == 0, "nodes: %d %s %s", rc, out, err)
    return json.loads(out)


def node_id(srv):
    return srv.stats()["node"]["node_id"]


def shards_of(srv):
    return srv.stats()["node"]["shards"]


def settled(pg, want):
    """Waits until the live nodes hold `want` (a sorted list of counts)
    and nothing is unowned; returns the nodes document."""
    doc = {}

    def ok():
        doc.update(nodes(pg))
        counts = sorted(len(n["shards"]) for n in doc["nodes"] if n["alive"])
        return counts == want and doc["unowned_count"] == 0
    wait_for(ok, 20, "shards held %r" % want, interval=0.1)
    return doc


def request(srv, type, body, timeout=5):
    c = Client(srv.endpoint("cmd"), name="cl-%d" % os.getpid())
    try:
        return c.request(type, body, timeout=timeout)
    finally:
        c.close()


def metrics(srv):
    status, _, text = srv.gw.http("GET", "/metrics")
    check(status == 200, "/metrics answered %d", status)
    return text.decode()


def relay_on(owner, sub, sid):
    """Appends probes to sid through its owner until one reaches `sub`, a
    follower on another node's event plane: the relay subscribes within a
    refresh, and an entry until then may be missed (a follower fills it
    from the tape)."""
    def relayed():
        call(owner, "session.append", {"session_id": sid, "kind": "note", "body": {"text": "probe"}})
        return sub.recv_frames(timeout=0.3) is not None
    wait_for(relayed, 10, "the relay of %s's events" % node_id(owner), interval=0)


# ---------------------------------------------------------------------------

def test_two_nodes_join_and_share_the_shards():
    def body(pg):
        a = node(pg)
        b = node(pg)
        doc = settled(pg, [32, 32])
        ids = {node_id(a), node_id(b)}
        rows = {n["node_id"]: n for n in doc["nodes"]}
        check(set(rows) == ids, "nodes %r, want %r", sorted(rows), sorted(ids))
        for srv in (a, b):
            row = rows[node_id(srv)]
            check(row["bus_endpoint"] == "tcp://127.0.0.1:%d" % srv.port
                  and row["event_endpoint"] == "tcp://127.0.0.1:%d" % (srv.port + 1),
                  "endpoints registered %r", row)
            with open(os.path.join(srv.data, "certs", "server")) as f:
                check(row["curve_public"] and row["curve_public"] in f.read(),
                      "the node's CURVE public key %r is not its server certificate's", row["curve_public"])
        mine = set(rows[node_id(a)]["shards"])
        check(not mine & set(rows[node_id(b)]["shards"]), "a shard held twice: %r", doc)
        # stats and /metrics: the role, the shards, the store's latency
        new_session(a, tmpdir())
        st = a.stats()
        check(st["node"]["role"] == "member" and st["node"]["shards"] == 32
              and st["node"]["beats"] > 0 and st["node"]["cluster"] == "cl_cluster", "stats node %r", st["node"])
        check(st["store"]["cl_session"]["writes"] >= 1 and st["store"]["cl_session"]["write_p50_us"] > 0,
              "stats store %r", st["store"])
        rc, out, err = sb("stats", "--data", a.data)
        check(rc == 0 and "role member" in out and "shards 32 of 64" in out, "stats text: %s %s", out, err)
        m = metrics(a)
        check('sb_node_role{role="member",node="%s"} 1' % node_id(a) in m, "metrics role:\n%s", m[-1500:])
        check('sb_bus_node{key="shards"} 32' in m, "metrics shards:\n%s", m[-1500:])
        check('sb_bus_store_write_p99_us{key="cl_session"}' in m, "metrics store latency:\n%s", m[-1500:])
        # a third node: 22/22/20
        c = node(pg)
        settled(pg, [20, 22, 22])
        # one leaves cleanly: its row goes and the other two take its share
        c.stop()
        doc = settled(pg, [32, 32])
        check(len(doc["nodes"]) == 2, "the stopped node is still listed: %r", doc["nodes"])
    with_postgres(body)


def test_session_made_on_a_is_used_on_b():
    def body(pg):
        a, b = two_nodes(pg)
        doc = nodes(pg)
        held = {n["node_id"]: set(n["shards"]) for n in doc["nodes"]}
        sids = [new_session(a, tmpdir()) for _ in range(6)]
        for sid in sids:
            call(a, "session.append", {"session_id": sid, "kind": "note", "body": {"text": "on a"}})
        # every session made through A is in one of A's shards, and B
        # forwards its writes to A
        for sid in sids:
            m = request(b, "session.append", {"session_id": sid, "kind": "note", "body": {"text": "on b"}})
            check(m.type == "session.append.ok" and m.body["seq"] == 3, "a write of A's session through B: %s %r %r",
                  m.type, m.body, [(e["seq"], e["kind"], e.get("body")) for e in tape(a, sid)])
            m = request(a, "session.append", {"session_id": sid, "kind": "note", "body": {"text": "x"}})
            check(m.type == "session.append.ok", "on A %r", m.body)
        check(all(sb_shard(sid) in held[node_id(a)] for sid in sids), "sessions made on A not in A's shards")
        # B lists them and reads their tapes: the database is shared
        listed = {s["session_id"] for s in call(b, "session.list", {"limit": 100})["sessions"]}
        check(set(sids) <= listed, "B lists %r, not all of %r", listed, sids)
        for sid in sids:
            texts = [e["body"].get("text") for e in tape(b, sid) if e["kind"] == "note"]
            check(texts == ["on a", "on b", "x"], "B reads %s's tape %r", sid, texts)
        # the same command_id through both nodes does one thing
        body = {"session_id": sids[0], "kind": "note", "body": {"text": "once"}, "command_id": "cmd-both-1"}
        ra = request(a, "session.append", body)
        rb = request(b, "session.append", body)
        check(ra.type == "session.append.ok" and rb.type == "session.append.ok"
              and rb.body["seq"] == ra.body["seq"], "the same command_id: A %r, B %r", ra.body, rb.body)
        texts = [e["body"].get("text") for e in tape(a, sids[0]) if e["kind"] == "note"]
        check(texts == ["on a", "on b", "x", "once"], "tape after the same command_id twice %r", texts)
        # a prompt through B runs on A (the demo model), and B reads the run
        sent = prompt_ok(b, sids[1], "hello through b")
        run = wait_run(b, sent["run_id"], timeout=30)
        check(run["status"] == "completed", "the prompt through B: %r", run)
        done = [e for e in tape(a, sids[1]) if e["kind"] == "run.status" and e["body"]["status"] == "completed"]
        check(len(done) == 1, "the prompt's run on A's tape: %r", done)
        # the run service forwards too: a run.request of A's session through B
        # is A's run, and B reads it
        run_id = prompt(b, sids[2], "run.request through b")
        check(wait_run(b, run_id, timeout=30)["status"] == "completed", "run.request through B")
        check(any(e["kind"] == "run.status" and e["run_id"] == run_id for e in tape(a, sids[2])),
              "the run requested through B is not on A's tape")
    with_postgres(body)


def test_a_node_forwards_from_its_first_moment():
    """A node that just joined holds no shard and forwards everything; its
    first forwards may reach the owner before the owner allowed its key
    (within a beat), and are sent again once it has."""
    def body(pg):
        a = node(pg)
        sid = new_session(a, tmpdir())
        b = node(pg)
        m = request(b, "session.append", {"session_id": sid, "kind": "note", "body": {"text": "at once"}},
                    timeout=10)
        check(m.type == "session.append.ok" and m.body["seq"] == 2, "the first forward: %s %r", m.type, m.body)
        refused = "refused this node's bus key" in b.log()
        print("the first forward %s" % ("was refused once, then sent again" if refused else "went through"))
    with_postgres(body)


def test_runs_and_approvals_through_the_other_node():
    """run.* and interact.* requests of A's session sent to B are forwarded
    to A: a person approves, follows, lists and cancels through B, and two
    nodes resolving one approval give one winner."""
    def body(pg):
        llm = LLM()
        llm.script("ap", [{"tool_calls": [tool("write_file", "c_w", path="f.txt", content="f\n")]},
                          {"text": "written"},
                          {"tool_calls": [tool("write_file", "c_w2", path="g.txt", content="g\n")]}],
                   repeat_last=True)
        a, b = two_nodes(pg, llm=llm, script="ap")
        ws = tmpdir()
        sid = new_session(a, ws, approval_policy="auto")
        held = {n["node_id"]: set(n["shards"]) for n in nodes(pg)["nodes"]}
        check(sb_shard(sid) in held[node_id(a)], "the session is not in A's shards")
        sub = Sub(b.endpoint("pub"), "session/" + sid)
        try:
            relay_on(a, sub, sid)
            run_id = prompt(b, sid, "write f")
            ia = pending(b, sid)
            # one approval, resolved through both nodes at once: one winner
            ca = Client(a.endpoint("cmd"), name="res-a")
            cb = Client(b.endpoint("cmd"), name="res-b")
            try:
                ida = ca.send("interact.resolve", {"interaction_id": ia["interaction_id"], "decision": "approve",
                                                   "resolved_by": "alice"})
                idb = cb.send("interact.resolve", {"interaction_id": ia["interaction_id"], "decision": "reject",
                                                   "resolved_by": "bob"})
                ra, rb = ca.wait_reply(ida, timeout=10), cb.wait_reply(idb, timeout=10)
            finally:
                ca.close()
                cb.close()
            oks = [r for r in (ra, rb) if r.type == "interact.resolve.ok"]
            lost = [r for r in (ra, rb) if r.is_error()]
            check(len(oks) == 1 and len(lost) == 1 and lost[0].code == "conflict",
                  "two resolves of one approval: A %s %r, B %s %r", ra.type, ra.body, rb.type, rb.body)
            winner = oks[0].body["interaction"]
            check(winner["resolved_by"] in lost[0].body["message"], "the loser is not told who won: %r",
                  lost[0].body)
            resolved = call(b, "interact.get", {"interaction_id": ia["interaction_id"]})["interaction"]
            check(resolved["status"] == winner["status"] and resolved["resolved_by"] == winner["resolved_by"],
                  "the stored interaction %r, the winner %r", resolved, winner)
            run = wait_run(b, run_id, timeout=30)
            check(run["status"] in ("completed", "failed"), "the run after the resolve: %r", run)
            # B's follower saw the run's status entries, in seq order
            seen = []
            while True:
                f = sub.recv_frames(timeout=0.5)
                if f is None:
                    break
                seen.append(unpack(f[2]))
            statuses = [e["body"]["status"] for e in seen if e["kind"] == "run.status" and e["run_id"] == run_id]
            check(run["status"] in statuses, "B's follower saw the run's statuses %r", statuses)
            seqs = [e["seq"] for e in seen]
            check(seqs == sorted(set(seqs)), "B's follower saw %r", seqs)
            if winner["resolved_by"] == "alice":
                check(os.path.exists(os.path.join(ws, "f.txt")), "approved through A, f.txt not written")
            # a run cancelled through B, and B lists the session's runs
            second = prompt(b, sid, "again")
            pending(b, sid)
            m = request(b, "run.cancel", {"run_id": second})
            check(m.type == "run.cancel.ok", "run.cancel through B: %s %r", m.type, m.body)
            check(wait_run(b, second, timeout=30)["status"] == "cancelled", "the run cancelled through B")
            listed = [r["run_id"] for r in runs_of(b, sid)]
            check(listed == [run_id, second], "run.list through B %r", listed)
        finally:
            sub.close()
    with_postgres(body)


def sb_shard(sid):
    """sb_cluster_shard_of: FNV-1a 32 of the id's bytes, modulo 64."""
    h = 2166136261
    for c in sid.encode():
        h = ((h ^ c) * 16777619) & 0xffffffff
    return h % 64


def test_runs_on_both_nodes_at_once():
    """Each node runs its own sessions' prompts (the demo model) at the same
    time: the run and interact stores are shared, so each node's outbox is
    its own ('o' NODE_ID n), and every run's status reaches its tape once."""
    def body(pg):
        a, b = two_nodes(pg)
        work = []
        for srv in (a, b, a, b):
            sid = new_session(srv, tmpdir())
            work.append((srv, sid, prompt(srv, sid, "hello from %s" % node_id(srv))))
        for srv, sid, run_id in work:
            run = wait_run(srv, run_id, timeout=30)
            check(run["status"] == "completed", "run on %s: %r", node_id(srv), run)
        for srv, sid, run_id in work:
            entries = tape(srv, sid)
            check_tape_contiguous(entries, "run tape")
            done = [e for e in entries if e["kind"] == "run.status" and e["body"]["status"] == "completed"]
            check(len(done) == 1 and done[0]["run_id"] == run_id, "completed entries on %s's tape: %r",
                  sid, done)
            # the other node reads the run from the shared database
            other = b if srv is a else a
            check(get_run(other, run_id)["status"] == "completed", "the other node's run.get")
        # landed entries are deleted with a later batch (or the next tick)
        wait_for(lambda: pg.psql("SELECT count(*) FROM cl_run.outbox").split() == ["0"], 10,
                 "every run outbox entry to be deleted once landed")
    with_postgres(body)


def test_a_follower_on_a_sees_what_b_appends():
    """A follower of B's session on A's event plane sees every entry
    appended through B, live, in seq order, once each."""
    def body(pg):
        a, b = two_nodes(pg)
        sid = new_session(b, tmpdir())
        sub = Sub(a.endpoint("pub"), "session/" + sid)
        try:
            relay_on(b, sub, sid)
            while sub.recv_frames(timeout=0.2):
                pass
            first = tape(b, sid)[-1]["seq"] + 1
            lat, seqs = [], []
            c = Client(b.endpoint("cmd"), name="follow-b")
            for i in range(200):
                t0 = time.monotonic()
                m = c.request("session.append", {"session_id": sid, "kind": "note", "body": {"text": "n%d" % i}})
                check(m.type == "session.append.ok", "append %r", m.body)
                f = sub.recv_frames(timeout=5)
                check(f is not None, "entry %d did not reach the follower on A", m.body["seq"])
                lat.append(time.monotonic() - t0)
                seqs.append(unpack(f[2])["seq"])
            c.close()
            check(seqs == list(range(first, first + 200)), "the follower on A saw %r", seqs[:5] + seqs[-5:])
            check(sub.recv_frames(timeout=0.5) is None, "an entry came twice")
            lat.sort()
            print("append on B to the follower on A: p50 %.2f ms p99 %.2f ms (200 appends, one at a time)"
                  % (lat[100] * 1000, lat[197] * 1000))
        finally:
            sub.close()
    with_postgres(body)


def test_a_node_that_lost_its_lease_cannot_write():
    def body(pg):
        a, b = two_nodes(pg)
        sid = new_session(a, tmpdir())
        call(a, "session.append", {"session_id": sid, "kind": "note", "body": {"text": "before"}})
        # A stalls past its lease: B takes every shard at a new epoch
        a.proc.send_signal(signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            wait_for(lambda: shards_of(b) == 64, 10, "B to hold every shard", interval=0.05)
            took = time.monotonic() - t0
        finally:
            a.proc.send_signal(signal.SIGCONT)
        check(took <= (LEASE_MS + 2 * BEAT_MS) / 1000.0 + 1.0, "B took %.2f s to take A's shards", took)
        # A, awake, never writes at its old epoch. Either its cache has not
        # caught up, and the fence refuses the write (not_owner), or it has,
        # and A forwards the write to B, the owner, which appends it.
        m = request(a, "session.append", {"session_id": sid, "kind": "note", "body": {"text": "stale"}})
        forwarded = m.type == "session.append.ok"
        check(forwarded or (m.is_error() and m.code == "not_owner"), "a stale node's write: %s %r", m.type, m.body)
        # B writes the session on from where it was
        ok = call(b, "session.append", {"session_id": sid, "kind": "note", "body": {"text": "after"}})
        entries = tape(b, sid)
        check_tape_contiguous(entries, "tape across the takeover")
        texts = [e["body"].get("text") for e in entries if e["kind"] == "note"]
        want = ["before", "stale", "after"] if forwarded else ["before", "after"]
        check(texts == want and entries[-1]["seq"] == ok["seq"], "tape %r (forwarded: %s)", texts, forwarded)
        if forwarded:
            check(m.body["seq"] == ok["seq"] - 1, "the forwarded write's seq %r, B's next %r", m.body, ok)
        # A comes back into the cluster: the shares settle again
        settled(pg, [32, 32])
        check(a.stats()["node"]["shards_lost"] >= 32, "A's stats %r", a.stats()["node"])
        print("takeover after a stall: %.2f s (lease %d ms, heartbeat %d ms)" % (took, LEASE_MS, BEAT_MS))
    with_postgres(body)


def test_kill9_of_a_node_during_appends():
    def body(pg):
        a, b = two_nodes(pg)
        sid = new_session(a, tmpdir())
        w = Appenders(a, sid)
        acked = w.acked
        wait_for(lambda: len(acked) >= 200, 60, "200 acknowledged appends")
        a.proc.kill()
        t_kill = time.monotonic()
        w.stop()
        check(not w.errors, "appends refused before the kill: %r", w.errors[:3])

        # B serves A's session once A's leases lapse
        def served():
            m = request(b, "session.append", {"session_id": sid, "kind": "note", "body": {"text": "on b"}},
                        timeout=2)
            return m.type == "session.append.ok" and m.body
        last = wait_for(served, 15, "B to serve the dead node's session", interval=0.05)
        took = time.monotonic() - t_kill
        check(took <= (LEASE_MS + 2 * BEAT_MS) / 1000.0 + 1.5, "kill -9 to served again: %.2f s", took)
        entries = tape(b, sid)
        check_tape_contiguous(entries, "tape after kill -9")
        by_seq = {e["seq"]: e["body"].get("text") for e in entries if e["kind"] == "note"}
        lost = [(s, t) for s, t in acked if by_seq.get(s) != t]
        check(not lost, "%d of %d acknowledged entries lost: %r", len(lost), len(acked), lost[:5])
        check(by_seq.get(last["seq"]) == "on b" and last["seq"] == entries[-1]["seq"], "B's entry %r", last)
        settled(pg, [64])
        print("kill -9 of a node: %d acknowledged, 0 lost; served again by the other after %.2f s "
              "(lease %d ms, heartbeat %d ms)" % (len(acked), took, LEASE_MS, BEAT_MS))
    with_postgres(body)


def test_kill9_of_a_node_during_a_run_with_an_approval_pending_and_a_prompt_queued():
    """The other node takes the dead node's sessions as a restart would:
    the run that was inside a tool ends interrupted, the run that waited
    for a person goes back to the queue and waits again for the same
    approval, the prompt queued behind it is still there; approving
    through the survivor finishes both."""
    def body(pg):
        llm = LLM()
        # one script, called in this order: the sleeper's run, the asker's
        # run (a write that waits for approval), then after the approval
        # the asker's run again, then its queued prompt
        sleep_cmd = "echo $$ > sleep.pid; exec sleep 30"
        llm.script("k9", [{"tool_calls": [shell(sleep_cmd, "c_sleep")]},
                          {"tool_calls": [tool("write_file", "c_w", path="k.txt", content="k\n")]},
                          {"text": "approved run done"}, {"text": "queued one done"}], repeat_last=True)
        a, b = two_nodes(pg, llm=llm, script="k9")
        ws = tmpdir()
        sleeper = new_session(a, ws, approval_policy="yolo")
        running = prompt(a, sleeper, "sleep")
        wait_for(lambda: os.path.exists(os.path.join(ws, "sleep.pid")), 15, "the sleep tool to start")
        asker = new_session(a, tmpdir(), approval_policy="auto")
        first = prompt_ok(a, asker, "write k")
        ia = pending(a, asker)
        q1 = prompt_ok(a, asker, "queued one")
        check(q1.get("queued") == 1, "queued %r", q1)
        a.proc.kill()
        t0 = time.monotonic()
        run = wait_run(b, running, ("interrupted",), timeout=15)
        took = time.monotonic() - t0
        check(run["reason"] == "server_restart", "the interrupted run %r", run)
        check(took <= (LEASE_MS + 2 * BEAT_MS) / 1000.0 + 2.5, "interrupted %.2f s after the kill", took)
        again = pending(b, asker)
        check(again["interaction_id"] == ia["interaction_id"], "pending on B %r, was %r", again, ia)
        q = queue_list(b, asker)
        check([p["prompt_id"] for p in q["prompts"]] == [q1["prompt_id"]], "queue on B %r", q)
        resolve(b, ia["interaction_id"], "approve")
        wait_run(b, first["run_id"], ("completed",), timeout=30)
        wait_for(lambda: [r.get("input") for r in runs_of(b, asker) if r["status"] == "completed"]
                 == ["write k", "queued one"], 30, "the queued prompt to run on B")
        check_tape_contiguous(tape(b, sleeper), "the sleeper's tape")
        check_tape_contiguous(tape(b, asker), "the asker's tape")
        print("kill -9 during a run: interrupted by the other node after %.2f s" % took)
        try:
            os.kill(int(open(os.path.join(ws, "sleep.pid")).read()), signal.SIGKILL)
        except (OSError, ValueError):
            pass
    with_postgres(body)


def test_a_worker_whose_node_dies_goes_on_through_another():
    """A worker given both nodes (--connect A,B) is connected to A; A is
    killed (kill -9) while the worker runs a run of A's session: the
    worker's bus fails over to B, B takes the session and keeps the run's
    lease (a takeover does not end a worker's run), and the run completes."""
    def body(pg):
        llm = LLM()
        llm.script("wk", [{"tool_calls": [shell("echo $$ > started; sleep 4; echo slept > slept.txt", "c_sl")]},
                          {"text": "worker done"}], repeat_last=True)
        a, b = two_nodes(pg, llm=llm, script="wk")
        ws = tmpdir()
        sid = new_session(a, ws, approval_policy="yolo")
        eps = "ipc://%s/bus-cmd,ipc://%s/bus-cmd" % (a.data, b.data)
        worker = start_worker(a, "w-fail", lease=6, extra=["--connect", eps])
        try:
            run_id = call(a, "run.request", {"session_id": sid, "input": "sleep on the worker",
                                             "target": {"executor": "worker", "pool": "p"}})["run"]["run_id"]
            wait_for(lambda: os.path.exists(os.path.join(ws, "started")), 20, "the tool to start on the worker")
            check(get_run(a, run_id)["worker_id"] == "w-fail", "the run is not on the worker: %r", get_run(a, run_id))
            a.proc.kill()
            run = wait_run(b, run_id, timeout=40)
            check(run["status"] == "completed", "the worker's run after its node died: %r", run)
            check(os.path.exists(os.path.join(ws, "slept.txt")), "the tool did not finish")
            check(worker.alive(), "the worker exited: %s" % worker.log()[-2000:])
            check("going on through ipc://%s/bus-cmd" % b.data in worker.log(),
                  "the worker's bus did not fail over to B: %s" % worker.log()[-2000:])
            entries = tape(b, sid)
            check_tape_contiguous(entries, "the session's tape")
            done = [e for e in entries if e["kind"] == "run.status" and e["body"]["status"] == "completed"]
            check(len(done) == 1, "completed entries %r", done)
            # the CLI given both, the dead one first, goes on through B;
            # $SWITCHBOARD_BUS takes the same list
            rc, out, err = sb("sessions", "--connect", eps, "--json")
            check(rc == 0 and sid in out, "sessions --connect A,B after A died: %d %s %s", rc, out, err)
            rc, out, err = sb("sessions", "--json", env={"SWITCHBOARD_BUS": eps})
            check(rc == 0 and sid in out, "sessions with SWITCHBOARD_BUS=A,B after A died: %d %s %s", rc, out, err)
        finally:
            worker.kill()
    with_postgres(body)


def test_a_database_down_longer_than_the_lease_then_back():
    """Both nodes give up their shards once a lease passes without a
    renewal (writes are refused, never acknowledged), reconnect when the
    database is back, share the shards again, and serve their sessions on
    the same tapes, without a gap or a lost entry."""
    def body(pg):
        a, b = two_nodes(pg)
        sids = {a: new_session(a, tmpdir()), b: new_session(b, tmpdir())}
        acked = {a: [], b: []}

        def append(srv, text, timeout=5):
            m = request(srv, "session.append", {"session_id": sids[srv], "kind": "note", "body": {"text": text}},
                        timeout=timeout)
            if m.type == "session.append.ok":
                acked[srv].append((m.body["seq"], text))
            return m
        for i in range(10):
            for srv in (a, b):
                check(append(srv, "before %d" % i).type == "session.append.ok", "append before")
        pg.stop()
        time.sleep((LEASE_MS + 3 * BEAT_MS) / 1000.0)
        for srv in (a, b):
            check(srv.proc.alive(), "a node died with the database")
            m = append(srv, "during", timeout=15)
            check(m.type == "error", "an append with the database down answered %s %r", m.type, m.body)
            check(srv.stats()["node"]["shards"] == 0, "a node kept shards without renewing: %r",
                  srv.stats()["node"])
        pg._launch()
        t0 = time.monotonic()
        for srv in (a, b):
            wait_for(lambda: append(srv, "after").type == "session.append.ok", 30,
                     "an append to succeed after the database came back", interval=0.1)
        took = time.monotonic() - t0
        settled(pg, [32, 32])
        for srv in (a, b):
            entries = tape(srv, sids[srv])
            check_tape_contiguous(entries, "tape across the database restart")
            by_seq = {e["seq"]: e["body"].get("text") for e in entries if e["kind"] == "note"}
            lost = [(q, t) for q, t in acked[srv] if by_seq.get(q) != t]
            check(not lost, "acknowledged entries lost: %r", lost[:5])
        print("database down %.1f s: both nodes served again %.2f s after it came back"
              % ((LEASE_MS + 3 * BEAT_MS) / 1000.0, took))
    with_postgres(body)


def test_lmdb_serve_is_standalone():
    srv = Server().start()
    try:
        st = srv.stats()
        check(st["node"] == {"role": "standalone"}, "stats node on LMDB %r", st.get("node"))
    finally:
        srv.stop()


if __name__ == "__main__":
    run_tests(globals())
