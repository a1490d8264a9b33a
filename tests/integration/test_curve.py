#!/usr/bin/python3
"""CURVE on the bus's TCP endpoints (issue 12; docs/workers.md), with
Debian's python3-zmq as the outside client:

  - `serve --bus tcp://127.0.0.1:P` turns CURVE on: the server's key pair
    is made in DATA/certs (secret 0600); `keys new NAME` writes an allowed
    client key and prints its secret file's path last;
  - a `switchboard worker` with that key registers over TCP and runs a
    run of its pool end to end (every socket of its process uses the key);
  - a client with an unknown key, or without CURVE, gets no answer; an
    allowed key is checked on every message: a client key (`--client`)
    may call the public types only, a worker key only the worker protocol
    for its own worker_id (others are `forbidden`);
  - a remote `actor` registers over CURVE with an actor key;
  - `--insecure-tcp` serves plain TCP and says so in the log.
"""
import os
import sys

import zmq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import (SB_BIN, Proc, Server, check, context, make_header, pack, run_tests, sb, tmpdir,  # noqa: E402
                    unpack, wait_for)
from sbagent import call, cert_keys, free_port, new_session, wait_run  # noqa: E402


def ask(endpoint, server_key=None, keys=None, timeout=1.5, type="bus.stats", body=None):
    """One request over a DEALER on `endpoint`: (reply type, body), or
    None when nothing answers."""
    s = context().socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    if server_key:
        pub, sec = keys
        s.curve_serverkey = server_key
        s.curve_publickey = pub
        s.curve_secretkey = sec
    s.connect(endpoint)
    s.send_multipart([pack(make_header(type)), pack(body or {})])
    got = None
    if s.poll(int(timeout * 1000)):
        f = s.recv_multipart()
        got = (unpack(f[0])["type"], unpack(f[1]))
    s.close(0)
    return got


def test_curve_keys_worker_and_refusals():
    port = free_port()
    server = Server(args=["--bus", "tcp://127.0.0.1:%d" % port]).start()
    certs = os.path.join(server.data, "certs")
    st = os.stat(os.path.join(certs, "server_secret"))
    check(st.st_mode & 0o777 == 0o600, "server_secret mode %o", st.st_mode & 0o777)
    rc, out, err = sb("keys", "new", "w1", "--pool", "p", "--data", server.data)
    secret = out.strip().splitlines()[-1]
    check(rc == 0 and secret == os.path.join(certs, "clients", "w1_secret"), "keys new: %d %r %r", rc, out, err)
    check(os.stat(secret).st_mode & 0o777 == 0o600, "the secret file is not 0600")
    rc, out, err = sb("keys", "new", "w1", "--data", server.data)
    check(rc == 1 and "exists" in err, "a second keys new w1: %d %r", rc, err)

    server_key, _ = cert_keys(os.path.join(certs, "server"))
    tcp = "tcp://127.0.0.1:%d" % port
    # an unknown key, and no CURVE at all, are not served
    check(ask(tcp, server_key, zmq.curve_keypair()) is None, "a client with an unknown key was answered")
    check(ask(tcp) is None, "a client without CURVE was answered")
    # an allowed key is served, within what its role may do: a client key
    # the public types; a worker key only the worker protocol, for itself
    rc, out, err = sb("keys", "new", "c1", "--client", "--data", server.data)
    check(rc == 0 and "role client" in out, "keys new --client: %r %r", out, err)
    ck = cert_keys(out.strip().splitlines()[-1])
    wk = cert_keys(secret)
    r = ask(tcp, server_key, ck, timeout=5, type="run.list")
    check(r and r[0] == "run.list.ok", "a client key's run.list: %r", r)
    r = ask(tcp, server_key, ck, timeout=5, type="run.claim", body={"worker_id": "c1", "pool": "p"})
    check(r and r[0] == "error" and r[1]["code"] == "forbidden", "a client key's run.claim: %r", r)
    r = ask(tcp, server_key, wk, timeout=5, type="session.create", body={"workspace": tmpdir()})
    check(r and r[0] == "error" and r[1]["code"] == "forbidden", "a worker key's session.create: %r", r)
    r = ask(tcp, server_key, wk, timeout=5, type="run.list")
    check(r and r[0] == "error" and r[1]["code"] == "forbidden", "a worker key's run.list: %r", r)
    r = ask(tcp, server_key, wk, timeout=5, type="worker.register",
            body={"worker_id": "someone-else", "instance_id": "i1"})
    check(r and r[0] == "error" and r[1]["code"] == "forbidden" and "w1" in r[1]["message"],
          "a worker key registering another worker_id: %r", r)

    # a worker with the key registers over TCP and runs its pool's run
    w = Proc([SB_BIN, "worker", "--connect", tcp, "--id", "w1", "--pool", "p", "--cert", secret,
              "--server-key", os.path.join(certs, "server")], os.path.join(server.data, "worker.log"))
    wait_for(lambda: server.control().request("worker.get", {"worker_id": "w1"}).type == "worker.get.ok", 10,
             "the worker to register over CURVE")
    sid = new_session(server, tmpdir(), approval_policy="yolo", target="worker:p")
    run_id = call(server, "session.prompt", {"session_id": sid, "text": "look around"})["run_id"]
    run = wait_run(server, run_id, timeout=30)
    check(run["status"] == "completed" and run["worker_id"] == "w1", "run over CURVE: %r\n%s", run, w.log())
    # a worker with a key the server does not know never registers
    # a worker that trusts the wrong server key never gets through
    rc, out, err = sb("worker", "--connect", tcp, "--id", "w2", "--cert", secret, "--server-key", secret,
                      timeout=30)
    check(rc == 1 and "no server answered" in err, "a worker with the wrong server key: %d %r", rc, err)
    check(server.control().request("worker.get", {"worker_id": "w2"}).is_error(), "w2 registered")
    # a remote actor needs an actor key: with it, it registers over CURVE
    rc, out, err = sb("keys", "new", "remote-echo", "--actor", "--data", server.data)
    akey = out.strip().splitlines()[-1]
    a = Proc([SB_BIN, "actor", "echo", "--connect", tcp, "--instance", "echo-remote", "--cert", akey,
              "--server-key", os.path.join(certs, "server")], os.path.join(server.data, "actor.log"))
    server.wait_instances("echo", ["echo-remote"], timeout=10)
    a.stop()
    w.stop()
    server.stop()


def test_insecure_tcp_is_plain_and_warned():
    port = free_port()
    server = Server(args=["--bus", "tcp://127.0.0.1:%d" % port, "--insecure-tcp"]).start()
    r = ask("tcp://127.0.0.1:%d" % port, timeout=5)
    check(r and r[0] == "bus.stats.ok", "plain TCP was not served: %r", r)
    check("plain TCP without CURVE" in server.log(), "no warning in the log")
    server.stop()


if __name__ == "__main__":
    run_tests(globals())
