#!/usr/bin/python3
"""test_serve_postgres — `switchboard serve --store postgres://...` on one
node (docs/scale-out.md, "One node on PostgreSQL"), against a real
PostgreSQL started by sbpg.py:
  - end to end: a session, a prompt run by the loopback model
    (tests/llm_server.py) whose write waits for an approval, a second
    prompt queued behind it, the approval given, both runs completed;
    `events --follow` prints the tape live; nothing of the state is in
    the data folder (no DATA/session, DATA/run, DATA/interact), the
    schemas NAME_session, NAME_run, NAME_interact and NAME_cluster are in the
    database; `stats` and /metrics show the store section (backend
    postgresql, writes, write p50 and p99); SWITCHBOARD_STORE does what
    --store does, and --store wins over it;
  - without --store (and SWITCHBOARD_STORE empty) it is LMDB as before:
    DATA/session, DATA/run, DATA/interact, and stats says lmdb;
  - the demo model on PostgreSQL, and a restart: the session and its tape
    are there after it;
  - kill -9 of serve while four clients append, with an approval pending
    and two prompts queued, then a restart on the same database: every
    acknowledged entry is there with its text, the seqs are 1..N without
    a gap, the approval is still pending under its id, the queue holds
    both prompts (paused by the restart), and resolving and resuming runs
    each to completion;
  - two serves on two schemas of one database are two clusters that
    share nothing (two on one schema: test_cluster_serve.py);
  - the clear errors: a database that refuses connections, one that
    accepts and never answers (connect_timeout), a wrong password, a
    schema of another version, a --store that is no URL: each one line
    naming the URL without its password, exit code 1 (2 for the usage
    error), within seconds, and the password nowhere in the output;
  - a password in the URL reaches no log, no tape, no stats, no /metrics;
    one in ~/.pgpass is used, and a tool that reads the file sees nothing;
  - PostgreSQL restarted under a running serve: serve stays up, writes
    refused during the outage are answered with an error (never
    acknowledged), and writes succeed again once the database is back,
    on the same tape, without a gap.

Skips only when the server's binaries are absent (scripts/deps.sh --tests
installs the postgresql package).
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import SB_BIN, Client, Proc, Server, check, cli, run_tests, sb, skip, tmpdir, wait_for  # noqa: E402
from sbagent import (LLM, LLM_ENV, Appenders, call, check_tape_contiguous, kinds, llm_args,  # noqa: E402
                     new_session, pending, prompt, prompt_ok, queue_list, resolve, runs_of, tape, tool,
                     wait_run)
from sbpg import pg_bindir, with_postgres  # noqa: E402
from gwtest import Gateway  # noqa: E402

SECRET = "s3cret-Pa55word"
PW_USER = "sbpw"


def store_url(pg, schema):
    return pg.url() + "?schema=" + schema


def pg_serve(url, llm=None, script=None, data=None, env=None):
    """A started serve on `url`, with the loopback model's `script` when given."""
    args = ["--store", url] + (llm_args(llm, script) if llm else [])
    e = dict(LLM_ENV)
    e.update(env or {})
    return Server(data=data, args=args, env=e).start(timeout=30)


def schemas(pg, prefix):
    out = pg.psql("SELECT nspname FROM pg_namespace WHERE nspname LIKE '%s%%' ORDER BY 1" % prefix)
    return out.split()


def password_role(pg):
    """A role that must give its password (SECRET) over TCP: a line in
    front of pg_hba.conf's trust lines, then a reload."""
    pg.psql("CREATE ROLE %s LOGIN SUPERUSER PASSWORD '%s'" % (PW_USER, SECRET))
    hba = os.path.join(pg.data, "pg_hba.conf")
    with open(hba) as f:
        text = f.read()
    with open(hba, "w") as f:
        f.write("host all %s 127.0.0.1/32 scram-sha-256\n" % PW_USER + text)
    pg.psql("SELECT pg_reload_conf()")
    return "postgresql://%s:%s@127.0.0.1:%d/%s" % (PW_USER, SECRET, pg.port, "sbstore")


# ---------------------------------------------------------------------------

def test_end_to_end_with_approval_and_queue():
    def body(pg):
        llm = LLM()
        ws = tmpdir()
        llm.script("e2e", [{"tool_calls": [tool("write_file", "c_write", path="out.txt", content="pg\n")]},
                           {"text": "first done"}, {"text": "second done"}])
        url = store_url(pg, "e2e")
        # the environment names another schema: --store wins
        server = pg_serve(url, llm, "e2e", env={"SWITCHBOARD_STORE": store_url(pg, "notthis")})
        follow = None
        try:
            sid = new_session(server, ws, approval_policy="auto")
            follow = Proc([SB_BIN, "events", "--session", sid, "--follow", "--json", "--data", server.data],
                          os.path.join(tmpdir(), "follow.log"))
            first = prompt_ok(server, sid, "write the file")
            ia = pending(server, sid)
            check(ia["run_id"] == first["run_id"], "the approval is of run %r, not %r", ia["run_id"],
                  first["run_id"])
            second = prompt_ok(server, sid, "then say so")
            check(second.get("queued") == 1 and "run_id" not in second, "second prompt answered %r", second)
            check([p["text"] for p in queue_list(server, sid)["prompts"]] == ["then say so"],
                  "queue %r", queue_list(server, sid))
            resolve(server, ia["interaction_id"], "approve")
            done = wait_run(server, first["run_id"], timeout=30)
            check(done["status"] == "completed", "first run %r", done)
            wait_for(lambda: len(runs_of(server, sid)) == 2, 20, "the queued prompt's run")
            last = wait_run(server, runs_of(server, sid)[1]["run_id"], timeout=30)
            check(last["status"] == "completed" and last["input"] == "then say so", "second run %r", last)
            with open(os.path.join(ws, "out.txt")) as f:
                check(f.read() == "pg\n", "out.txt holds the wrong text")
            entries = tape(server, sid)
            check_tape_contiguous(entries, "e2e tape")
            ks = kinds(entries)
            for k in ("approval.requested", "prompt.queued", "prompt.dequeued", "tool.result"):
                check(k in ks, "no %s on the tape: %r", k, ks)

            # events --follow printed every entry, live, in order
            def followed():
                lines = [json.loads(x) for x in follow.log().splitlines() if x.startswith("{")]
                return lines if len(lines) >= len(entries) else None
            lines = wait_for(followed, 15, "events --follow to print the tape")
            check([e["seq"] for e in lines[:len(entries)]] == [e["seq"] for e in entries],
                  "events --follow printed %r", [e["seq"] for e in lines])

            # the state is in the database, not in the data folder
            for d in ("session", "run", "interact"):
                check(not os.path.exists(os.path.join(server.data, d)), "DATA/%s exists on PostgreSQL", d)
            check(schemas(pg, "e2e") == ["e2e_cluster", "e2e_interact", "e2e_run", "e2e_session"], "schemas %r",
                  schemas(pg, "e2e"))
            check(schemas(pg, "notthis") == [], "SWITCHBOARD_STORE won over --store")
            n = int(pg.psql("SELECT count(*) FROM e2e_session.tape").strip() or 0)
            check(n >= len(entries), "%d rows in e2e_session.tape for %d entries", n, len(entries))

            # stats: the store section
            st = server.stats()["store"]
            check(set(st) == {"e2e_session", "e2e_run", "e2e_interact"}, "stats store %r", st)
            for name, s in st.items():
                check(s["backend"] == "postgresql", "%s backend %r", name, s)
            s = st["e2e_session"]
            check(s["writes"] > 5 and 0 < s["write_p50_us"] <= s["write_p99_us"], "session store %r", s)
            rc, out, err = cli(server, "stats")
            line = [x for x in out.splitlines() if x.strip().startswith("e2e_session")]
            check(rc == 0 and line and "postgresql" in line[0] and "p99" in line[0], "stats printed %r",
                  out[-800:])
            print("session store on PostgreSQL: %d writes, p50 %.3f ms, p99 %.3f ms"
                  % (s["writes"], s["write_p50_us"] / 1000.0, s["write_p99_us"] / 1000.0))
        finally:
            if follow:
                follow.stop()
            server.stop()
            llm.stop()
    with_postgres(body)


def test_demo_model_and_restart_from_the_environment():
    def body(pg):
        url = store_url(pg, "demo")
        server = Server(env={"SWITCHBOARD_STORE": url}).start(timeout=30)
        try:
            sid = new_session(server, tmpdir())
            run = wait_run(server, prompt(server, sid, "hello"), timeout=30)
            check(run["status"] == "completed", "demo run %r", run)
            before = tape(server, sid)
            check("text.done" in kinds(before), "demo tape %r", kinds(before))
            server.stop()
            server.start(timeout=30)
            after = tape(server, sid)
            check(after[:len(before)] == before, "the tape changed across a restart")
            check_tape_contiguous(after, "demo tape")
            run2 = wait_run(server, prompt(server, sid, "again"), timeout=30)
            check(run2["status"] == "completed", "second demo run %r", run2)
            check(schemas(pg, "demo") == ["demo_cluster", "demo_interact", "demo_run", "demo_session"], "schemas %r",
                  schemas(pg, "demo"))
        finally:
            server.stop()
    with_postgres(body)


def test_without_store_it_is_lmdb():
    server = Server(env={"SWITCHBOARD_STORE": ""}).start()
    try:
        sid = new_session(server, tmpdir())
        check(wait_run(server, prompt(server, sid, "hello"), timeout=30)["status"] == "completed", "demo run")
        for d in ("session", "run", "interact"):
            check(os.path.isdir(os.path.join(server.data, d)), "no DATA/%s on LMDB", d)
        st = server.stats()["store"]
        check(set(st) == {"session", "run", "interact"} and all(v["backend"] == "lmdb" for v in st.values()),
              "stats store on LMDB %r", st)
        check(st["session"]["writes"] > 0 and st["session"]["write_p99_us"] > 0, "session store %r",
              st["session"])
        print("session store on LMDB: %d writes, p50 %.3f ms, p99 %.3f ms"
              % (st["session"]["writes"], st["session"]["write_p50_us"] / 1000.0,
                 st["session"]["write_p99_us"] / 1000.0))
    finally:
        server.stop()


def test_kill9_with_appends_approval_and_queue():
    def body(pg):
        llm = LLM()
        ws = tmpdir()
        llm.script("k9", [{"tool_calls": [tool("write_file", "c_w", path="k.txt", content="k\n")]},
                          {"text": "approved run done"}, {"text": "queued one done"},
                          {"text": "queued two done"}], repeat_last=True)
        url = store_url(pg, "k9")
        server = pg_serve(url, llm, "k9")
        try:
            sid = new_session(server, ws, approval_policy="auto")
            first = prompt_ok(server, sid, "write k")
            ia = pending(server, sid)
            q1 = prompt_ok(server, sid, "queued one")
            q2 = prompt_ok(server, sid, "queued two")
            check(q1.get("queued") == 1 and q2.get("queued") == 2, "queued %r %r", q1, q2)
            notes = new_session(server, tmpdir())
            w = Appenders(server, notes)
            acked = w.acked
            wait_for(lambda: len(acked) >= 400, 60, "400 acknowledged appends")
            server.proc.kill()          # SIGKILL, mid-append
            w.stop()
            check(not w.errors, "appends refused before the kill: %r", w.errors[:3])
            n_acked = len(acked)
            server.start(timeout=30)
            entries = tape(server, notes)
            check_tape_contiguous(entries, "notes tape")
            by_seq = {e["seq"]: e["body"].get("text") for e in entries if e["kind"] == "note"}
            lost = [(s, t) for s, t in acked if by_seq.get(s) != t]
            check(not lost, "%d of %d acknowledged entries lost or changed: %r", len(lost), n_acked, lost[:5])
            print("kill -9 during appends: %d acknowledged, %d on the tape after the restart, 0 lost"
                  % (n_acked, len(by_seq)))
            # the approval and the queue survived
            again = pending(server, sid)
            check(again["interaction_id"] == ia["interaction_id"], "pending after the restart %r, was %r",
                  again, ia)
            q = queue_list(server, sid)
            check([p["prompt_id"] for p in q["prompts"]] == [q1["prompt_id"], q2["prompt_id"]]
                  and q["paused"] is True, "queue after the restart %r", q)
            resolve(server, ia["interaction_id"], "approve")
            wait_for(lambda: get_status(server, first["run_id"]) in ("completed", "interrupted"), 30,
                     "the approved run to end")
            rc, out, err = cli(server, "queue", "resume", sid)
            check(rc == 0, "queue resume: %d %s %s", rc, out, err)
            wait_for(lambda: [r.get("input") for r in runs_of(server, sid)
                              if r["status"] == "completed"][-2:] == ["queued one", "queued two"],
                     40, "both queued prompts to run")
            check(queue_list(server, sid)["prompts"] == [], "queue not empty")
            check_tape_contiguous(tape(server, sid), "approval session's tape")
        finally:
            server.stop()
            llm.stop()
    with_postgres(body)


def get_status(server, run_id):
    return call(server, "run.get", {"run_id": run_id})["run"]["status"]


def _serve_fails(url, want, data=None, timeout=20):
    """serve --store url must exit 1 within seconds with a line holding
    every string of `want`; returns that output."""
    data = data or tmpdir()
    t0 = time.monotonic()
    p = subprocess.run([SB_BIN, "serve", "--data", data, "--http", "127.0.0.1:0", "--store", url],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                       timeout=timeout)
    took = time.monotonic() - t0
    out = p.stdout.decode("utf-8", "replace")
    check(p.returncode == 1, "serve --store %s exited %d, not 1:\n%s", url, p.returncode, out[-2000:])
    lines = [x for x in out.splitlines() if all(w in x for w in want)]
    check(lines, "no line holds %r:\n%s", want, out[-2000:])
    check(SECRET not in out, "the password is in serve's output:\n%s", out[-2000:])
    check("Sanitizer" not in out and "runtime error" not in out, "serve crashed:\n%s", out[-2000:])
    print("%.1f s, exit 1: %s" % (took, lines[0][-220:]))
    return took


def test_clear_errors():
    def body(pg):
        # refused: a loopback port nobody listens on
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
        s.close()
        _serve_fails("postgresql://u:%s@127.0.0.1:%d/db" % (SECRET, closed),
                     ["postgresql://127.0.0.1:%d/db" % closed, "Connection refused"])
        # a listener that never answers: the default connect_timeout ends it
        mute = socket.socket()
        mute.bind(("127.0.0.1", 0))
        mute.listen(8)
        try:
            port = mute.getsockname()[1]
            took = _serve_fails("postgresql://u:%s@127.0.0.1:%d/db" % (SECRET, port),
                                ["postgresql://127.0.0.1:%d/db" % port, "timeout"])
            check(took < 12, "serve took %.1f s to give up on a mute database", took)
        finally:
            mute.close()
        # a wrong password
        good = password_role(pg)
        bad = good.replace(SECRET, SECRET + "x")
        _serve_fails(bad, ["postgresql://127.0.0.1:%d/sbstore" % pg.port, "password authentication failed"])
        # a schema of another version: the session store's record says 99
        server = pg_serve(store_url(pg, "ver"))
        server.stop()
        pg.psql("UPDATE ver_session.meta SET val = '\\x00000063'::bytea WHERE key = 'schema_version'::bytea")
        _serve_fails(store_url(pg, "ver"), ["ver_session", "schema version 99"])
        # not a URL: a usage error, exit 2
        rc, out, err = sb("serve", "--data", tmpdir(), "--store", "/tmp/somewhere")
        check(rc == 2 and "postgres://" in err, "--store /tmp/somewhere: %d %r", rc, err)
    with_postgres(body)


def test_two_servers_two_schemas():
    """Two serves on one schema are two nodes of one cluster
    (test_cluster_serve.py); on two schemas of one database they are two
    clusters that share nothing: each holds all 64 shards of its own."""
    def body(pg):
        one = pg_serve(store_url(pg, "one"))
        two = pg_serve(store_url(pg, "two"))
        try:
            for srv, name in ((one, "one"), (two, "two")):
                node = srv.stats()["node"]
                check(node["role"] == "member" and node["cluster"] == name + "_cluster"
                      and node["shards"] == 64, "%s: node %r", name, node)
            sid = new_session(two, tmpdir())
            check(call(two, "session.get", {"session_id": sid})["session"]["session_id"] == sid,
                  "the second server's session")
            m = one.control().request("session.get", {"session_id": sid})
            check(m.is_error() and m.code == "not_found", "schema one sees schema two's session: %r", m.body)
        finally:
            two.stop()
            one.stop()
        # a node that stopped left: its leases went with it
        rows = pg.psql("SELECT count(*) FROM one_cluster.nodes").split()
        check(rows == ["0"], "node rows left after a clean stop: %r", rows)
    with_postgres(body)


def test_password_reaches_no_log_tape_or_stats():
    def body(pg):
        url = password_role(pg) + "?schema=pw"
        gw = Gateway(args=["--store", url])
        server = gw.srv
        try:
            sid = new_session(server, tmpdir())
            run = wait_run(server, prompt(server, sid, "hello"), timeout=30)
            check(run["status"] == "completed", "run %r", run)
            st = server.stats()
            status, _, metrics = gw.http("GET", "/metrics")
            check(status == 200, "/metrics answered %d", status)
            text = metrics.decode()
            check('sb_store_backend{key="pw_session",backend="postgresql"} 1' in text,
                  "/metrics has no store backend: %s", text[-1500:])
            check('sb_bus_store_write_p99_us{key="pw_session"}' in text, "/metrics has no store latency")
            blobs = {"stats": json.dumps(st), "metrics": text, "tape": json.dumps(tape(server, sid)),
                     "log": server.log()}
            rc, out, err = cli(server, "stats", "--json")
            blobs["stats --json"] = out + err
            for name, blob in blobs.items():
                check(SECRET not in blob, "the password is in %s", name)
            check("pw_session" in server.log(), "the log does not name the store")
        finally:
            server.stop()
    with_postgres(body)


def test_pgpass_is_used_and_hidden_from_tools():
    def body(pg):
        password_role(pg)
        # not under /tmp, which tools see as a private folder of their own:
        # a home like a real one, which they see read-only but for secrets
        home = tempfile.mkdtemp(prefix="sbhome", dir="/var/tmp")
        try:
            _pgpass_run(pg, home)
        finally:
            shutil.rmtree(home, ignore_errors=True)
    with_postgres(body)


def _pgpass_run(pg, home):
    pgpass = os.path.join(home, ".pgpass")
    with open(pgpass, "w") as f:
        f.write("127.0.0.1:%d:*:%s:%s\n" % (pg.port, PW_USER, SECRET))
    os.chmod(pgpass, 0o600)
    llm = LLM()
    ws = tmpdir()
    llm.script("pgpass", [{"tool_calls": [tool("shell", "c_cat", command="cat %s; echo end" % pgpass)]},
                          {"text": "done"}])
    url = "postgresql://%s@127.0.0.1:%d/sbstore?schema=pgp" % (PW_USER, pg.port)
    server = pg_serve(url, llm, "pgpass", env={"HOME": home, "SWITCHBOARD_STORE": ""})
    try:
        sid = new_session(server, ws, approval_policy="yolo")
        run = wait_run(server, prompt(server, sid, "look"), timeout=30)
        check(run["status"] == "completed", "run %r", run)
        res = [e["body"] for e in tape(server, sid) if e["kind"] == "tool.result"]
        check(res and "end" in res[0].get("output", ""), "the tool did not run: %r", res)
        print("the tool read: %r" % res[0].get("output", "")[:200])
        check(SECRET not in json.dumps(tape(server, sid)), "a tool read the password file: %r", res)
        check(SECRET not in json.dumps(llm.requests("pgpass")), "the model was sent the password")
    finally:
        server.stop()
        llm.stop()


def test_postgres_restart_under_a_running_serve():
    def body(pg):
        server = pg_serve(store_url(pg, "rs"))
        c = Client(server.endpoint("cmd"), name="rs")
        try:
            sid = new_session(server, tmpdir())
            acked = []

            def append(text, timeout=5):
                m = c.request("session.append", {"session_id": sid, "kind": "note", "body": {"text": text}},
                              timeout=timeout)
                if m.type == "session.append.ok":
                    acked.append((m.body["seq"], text))
                return m
            for i in range(20):
                check(append("before %d" % i).type == "session.append.ok", "append before the restart")
            pg.stop()
            m = append("during", timeout=15)
            check(m.type == "error", "an append with the database down answered %s %r", m.type, m.body)
            print("with the database down, an append answers %s: %s" % (m.body.get("code"),
                                                                        m.body.get("message", "")[:120]))
            check(server.proc.alive(), "serve died with the database")
            pg._launch()
            t0 = time.monotonic()
            wait_for(lambda: append("after").type == "session.append.ok", 30,
                     "an append to succeed after the database came back", interval=0.2)
            print("first append acknowledged %.1f s after the database came back" % (time.monotonic() - t0))
            for i in range(20):
                check(append("after %d" % i).type == "session.append.ok", "append after the restart")
            entries = tape(server, sid)
            check_tape_contiguous(entries, "tape across the database restart")
            by_seq = {e["seq"]: e["body"].get("text") for e in entries if e["kind"] == "note"}
            lost = [(s, t) for s, t in acked if by_seq.get(s) != t]
            check(not lost, "acknowledged entries lost: %r", lost[:5])
            run = wait_run(server, prompt(server, sid, "hello"), timeout=30)
            check(run["status"] == "completed", "a run after the database restart %r", run)
        finally:
            c.close()
            server.stop()
    with_postgres(body)


if __name__ == "__main__":
    if not pg_bindir():
        skip("no PostgreSQL server binaries (scripts/deps.sh --tests installs postgresql)")
    run_tests(globals())
