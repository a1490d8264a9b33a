#!/usr/bin/python3
"""CURVE on the bus's TCP endpoints (issue 12; docs/workers.md), with
Debian's python3-zmq as the outside client:

  - `serve --bus tcp://127.0.0.1:P` turns CURVE on: the server's key pair
    is made in DATA/certs (secret 0600); `keys new NAME` writes an allowed
    client key and prints its secret file's path last;
  - a `switchboard worker` with that key registers over TCP and runs a
    run of its pool end to end (every socket of its process uses the key);
  - a client with an unknown key, or without CURVE, gets no answer on any
    plane; one with the valid key is served;
  - `--insecure-tcp` serves plain TCP and says so in the log.
"""
import os
import re
import socket
import sys

import zmq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import (SB_BIN, Proc, Server, check, context, make_header, pack, run_tests, sb, tmpdir,  # noqa: E402
                    unpack, wait_for)
from test_runs_e2e import call, new_session, wait_run  # noqa: E402


def free_port():
    """A port P with P+1 and P+2 free too."""
    for _ in range(50):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        p = s.getsockname()[1]
        s.close()
        if p > 60000:
            continue
        ok = True
        for q in (p + 1, p + 2):
            t = socket.socket()
            try:
                t.bind(("127.0.0.1", q))
            except OSError:
                ok = False
            t.close()
        if ok:
            return p
    raise AssertionError("no free port triple")


def cert_keys(path):
    with open(path) as f:
        text = f.read()
    pub = re.search(r'public-key = "(.{40})"', text)
    sec = re.search(r'secret-key = "(.{40})"', text)
    return (pub.group(1).encode() if pub else None, sec.group(1).encode() if sec else None)


def ask(endpoint, server_key=None, keys=None, timeout=1.5):
    """bus.stats over a DEALER on `endpoint`; the reply's type, or None."""
    s = context().socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    if server_key:
        pub, sec = keys
        s.curve_serverkey = server_key
        s.curve_publickey = pub
        s.curve_secretkey = sec
    s.connect(endpoint)
    s.send_multipart([pack(make_header("bus.stats")), pack({})])
    got = None
    if s.poll(int(timeout * 1000)):
        got = unpack(s.recv_multipart()[0])["type"]
    s.close(0)
    return got


def test_curve_keys_worker_and_refusals():
    port = free_port()
    server = Server(args=["--bus", "tcp://127.0.0.1:%d" % port]).start()
    certs = os.path.join(server.data, "certs")
    st = os.stat(os.path.join(certs, "server_secret"))
    check(st.st_mode & 0o777 == 0o600, "server_secret mode %o", st.st_mode & 0o777)
    rc, out, err = sb("keys", "new", "w1", "--data", server.data)
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
    # the valid key is
    check(ask(tcp, server_key, cert_keys(secret), timeout=5) == "bus.stats.ok", "the allowed key was refused")

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
    w.stop()
    server.stop()


def test_insecure_tcp_is_plain_and_warned():
    port = free_port()
    server = Server(args=["--bus", "tcp://127.0.0.1:%d" % port, "--insecure-tcp"]).start()
    check(ask("tcp://127.0.0.1:%d" % port, timeout=5) == "bus.stats.ok", "plain TCP was not served")
    check("plain TCP without CURVE" in server.log(), "no warning in the log")
    server.stop()


if __name__ == "__main__":
    run_tests(globals())
