#!/usr/bin/python3
"""`switchboard worker`'s dead ends say what they are (issue 21;
docs/workers.md):

  - started without CURVE keys against a tcp:// bus served with CURVE, it
    says, after its 10 s wait, that the endpoint needs keys and how to
    make them (`keys new`, --cert, --server-key);
  - refused for its id (a key made for w1, --id w2), it ends with the
    server's reason, not with "no server answered".
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Server, check, run_tests, sb  # noqa: E402
from sbagent import free_port  # noqa: E402


def test_worker_without_keys_and_refused_for_its_id_say_why():
    port = free_port()
    server = Server(args=["--bus", "tcp://127.0.0.1:%d" % port]).start()
    try:
        tcp = "tcp://127.0.0.1:%d" % port
        certs = os.path.join(server.data, "certs")
        # no keys: the server never answers a plain client; the worker says why
        rc, out, err = sb("worker", "--connect", tcp, "--id", "w0", timeout=40)
        last = err.strip().splitlines()[-1] if err.strip() else ""
        check(rc == 1, "exit %d: %r", rc, err)
        check("no server answered worker.register" in last and "keys new" in last and "--cert" in last
              and "--server-key" in last and "CURVE" in last, "no hint at keys: %r", err)
        # a key for w1, used as w2: refused, and the last line is the reason
        rc, out, err = sb("keys", "new", "w1", "--data", server.data)
        check(rc == 0, "keys new: %d %r", rc, err)
        secret = out.strip().splitlines()[-1]
        rc, out, err = sb("worker", "--connect", tcp, "--id", "w2", "--cert", secret,
                          "--server-key", os.path.join(certs, "server"), timeout=40)
        last = err.strip().splitlines()[-1] if err.strip() else ""
        check(rc == 1, "exit %d: %r", rc, err)
        check("no server answered" not in err, "a refusal said 'no server answered': %r", err)
        check("refused worker.register for id 'w2'" in last and "forbidden" in last and "w1" in last,
              "the last line is not the reason: %r", err)
    finally:
        server.stop()


if __name__ == "__main__":
    run_tests(globals())
