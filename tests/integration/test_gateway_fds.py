"""File descriptors (docs/gateway.md, limits): serve raises its soft limit
to the hard one, and the gateway keeps its connections below the limit
less a reserve, so that more clients than the limit allows (trickling
their headers, never finishing) leave serve able to answer `switchboard
stats`, start a run, and log a refused accept only a few times; and it
closes those half-open requests by itself."""

import os
import socket
import stat
import time

import sbtest
from sbtest import check, cli, cli_session, cli_wait_run, run_tests, tmpdir, wait_for
from gwtest import Gateway

SOFT, HARD = 256, 512


def limited_gateway():
    """A Gateway whose serve starts with `ulimit -n` SOFT:HARD (prlimit in
    a wrapper that execs serve, so the pid is serve's)."""
    real = sbtest.SB_BIN
    wrapper = os.path.join(tmpdir(), "serve-limited")
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\nexec prlimit --nofile=%d:%d %s \"$@\"\n" % (SOFT, HARD, real))
    os.chmod(wrapper, stat.S_IRWXU)
    sbtest.SB_BIN = wrapper
    try:
        return Gateway()
    finally:
        sbtest.SB_BIN = real


def backlog(port):
    """Connections waiting in the listen queue of 127.0.0.1:port."""
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            cols = line.split()
            if cols[3] == "0A" and int(cols[1].split(":")[1], 16) == port:
                return int(cols[4].split(":")[1], 16)
    return 0


def settle(port, fds):
    """Until serve has taken from its listen queue all it will: the queue
    is empty, or its descriptors stayed the same for 3 s (a serve that
    cannot accept any more)."""
    deadline = time.monotonic() + 60
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        n = fds()
        if n != last:
            last, since = n, time.monotonic()
        if backlog(port) == 0 or time.monotonic() - since > 3:
            return
        time.sleep(0.1)


def nofile(pid):
    with open("/proc/%d/limits" % pid) as f:
        for line in f:
            if line.startswith("Max open files"):
                return tuple(int(x) for x in line.split()[3:5])


def test_more_clients_than_descriptors():
    gw = limited_gateway()
    limits = nofile(gw.pid())
    socks = []
    # more connections than serve has descriptors, each an unfinished request
    for i in range(HARD + 200):
        try:
            s = socket.create_connection(("127.0.0.1", gw.port), timeout=5)
            s.sendall(b"GET / HTTP/1.1\r\nHo")
            socks.append(s)
        except OSError:
            pass
    fds = lambda: len(os.listdir("/proc/%d/fd" % gw.pid()))
    settle(gw.port, fds)
    print("  %d connections held, serve has %d descriptors open" % (len(socks), fds()))
    check(fds() < HARD - 64, "serve holds %d descriptors of %d: no reserve left", fds(), HARD)
    # the rest of serve still works: the bus, a new session, a run
    rc, out, err = cli(gw.srv, "stats", timeout=20)
    check(rc == 0, "switchboard stats while the gateway is full: %d %s", rc, err)
    sid = cli_session(gw.srv, tmpdir())
    rc, out, err = cli(gw.srv, "prompt", sid, "hello", "--json", timeout=30)
    check(rc == 0, "prompt while the gateway is full: %d %s %s", rc, out, err)
    check(gw.srv.proc.alive(), "serve died:\n%s", gw.srv.log()[-2000:])
    # the clients go on trickling their headers a byte at a time; the
    # gateway closes each within its header deadline (10 s) all the same
    open_socks = list(socks)

    def all_closed():
        for s in list(open_socks):
            try:
                s.setblocking(False)
                s.send(b"s")
                if s.recv(4096) == b"":
                    open_socks.remove(s)
            except BlockingIOError:
                pass
            except OSError:
                open_socks.remove(s)
        return not open_socks
    wait_for(all_closed, 60, "the gateway to close the unfinished requests", interval=0.5)
    for s in socks:
        s.close()
    # and the gateway serves again once the clients are gone
    def answers():
        try:
            return gw.api("GET", "/api/sessions", timeout=2)[0] == 200
        except OSError:
            return False        # refused at accept until serve has seen the closes
    wait_for(answers, 30, "the gateway to answer again")
    status, _, metrics = gw.http("GET", "/metrics")
    refused = [l for l in metrics.decode().splitlines() if l.startswith("sb_gateway_fd_refused_total ")]
    check(refused and int(refused[0].split()[1]) > 0, "fd_refused_total: %r", refused)
    accepts = gw.srv.log().count("accept: errno")
    check(accepts < 20, "the log has %d accept failures", accepts)
    check(gw.srv.proc.alive(), "serve died:\n%s", gw.srv.log()[-2000:])
    check(limits == (HARD, HARD), "serve's limit %r: the soft one was not raised to %d", limits, HARD)


if __name__ == "__main__":
    run_tests(globals())
