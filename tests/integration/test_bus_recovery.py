"""Heartbeats both ways: an instance that was frozen past its expiry
registers again and serves; a restarted broker is re-learned by the
running actors."""

import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Client, Server, check, run_tests, start_actor, wait_for  # noqa: E402


def ping_from(c, instance, timeout=5.0):
    m = c.request("echo.ping", {"text": "are you there"}, to=instance, timeout=timeout)
    check(m.type == "echo.ping.ok" and m.body["instance"] == instance, "ping to %s: %r", instance, m)


def test_frozen_instance_registers_again():
    """SIGSTOP an echo actor until the broker expires it, SIGCONT it: the
    broker answers its next heartbeat with not_registered (or the actor
    notices the silence itself), it sends bus.ready again and serves."""
    with Server() as srv:
        e = start_actor(srv, instance="e-frozen")
        c = Client(srv.endpoint())
        ping_from(c, "e-frozen")
        e.send_signal(signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            wait_for(lambda: "e-frozen" not in srv.instances("echo"), 6, "the frozen actor to expire")
            print("    frozen actor expired after %.2f s" % (time.monotonic() - t0))
            # while it is gone its requests fail fast
            m = c.request("echo.ping", {"text": "x"}, to="e-frozen", timeout=1)
            check(m.code == "no_service", "request to an expired instance: %r", m)
        finally:
            e.send_signal(signal.SIGCONT)
        t1 = time.monotonic()
        wait_for(lambda: "e-frozen" in srv.instances("echo"), 5, "the thawed actor to register again")
        print("    thawed actor registered again after %.2f s" % (time.monotonic() - t1))
        check(srv.instances("echo") == ["e-frozen"], "instances %r", srv.instances("echo"))
        ping_from(c, "e-frozen")
        check(e.alive(), "the actor died")
        log = e.log()
        check("registering again" in log or "reconnecting" in log,
              "the actor's log does not say it registered again:\n%s", log)
        c.close()


def test_broker_restart_actors_register_again():
    srv = Server().start()
    try:
        e = start_actor(srv, instance="e-survivor")
        c = Client(srv.endpoint())
        ping_from(c, "e-survivor")
        c.close()
        check(srv.stop(signal.SIGTERM) == 0, "serve did not stop cleanly:\n%s", srv.log())
        check(e.alive(), "the actor died with the broker")
        t0 = time.monotonic()
        srv.start()
        wait_for(lambda: "e-survivor" in srv.instances("echo"), 6, "the actor to register with the new broker")
        dt = time.monotonic() - t0
        print("    re-registered %.2f s after the restart" % dt)
        check(dt <= 5.0, "re-registration took %.2f s", dt)
        c = Client(srv.endpoint())
        ping_from(c, "e-survivor")
        # and keeps serving: it heartbeats the new broker
        n = 50
        ids = [c.send("echo.ping", {"text": str(k)}) for k in range(n)]
        for k, id in enumerate(ids):
            m = c.wait_reply(id)
            check(m.type == "echo.ping.ok" and m.body["text"] == str(k), "after restart %d: %r", k, m)
        c.close()
        check(e.alive(), "the actor died")
    finally:
        srv.stop()


def test_broker_restart_twice_with_two_actors():
    """Both actors come back after each of two restarts, and share work."""
    srv = Server().start()
    try:
        start_actor(srv, instance="e-one")
        start_actor(srv, instance="e-two")
        for round in range(2):
            check(srv.stop() == 0, "stop %d", round)
            srv.start()
            srv.wait_instances("echo", {"e-one", "e-two"}, timeout=6)
            c = Client(srv.endpoint())
            served = set()
            for k in range(20):
                m = c.request("echo.ping", {"text": "r%d" % round})
                check(m.type == "echo.ping.ok", "round %d: %r", round, m)
                served.add(m.body["instance"])
            check(served == {"e-one", "e-two"}, "round %d served by %r", round, served)
            c.close()
    finally:
        srv.stop()


def test_serve_frozen_past_expiry_recovers():
    """Ctrl-Z on serve for longer than the 3 s expiry, then fg: every
    service that was live before is live again, in-process actors and an
    external one alike, and requests are served."""
    with Server() as srv:
        ext = start_actor(srv, instance="e-outside")
        before = {name: sorted(v["instances"]) for name, v in srv.stats()["services"].items()
                  if v["instances"]}
        srv.close_control()
        srv.proc.send_signal(signal.SIGSTOP)
        try:
            # The external actor sees the broker fall silent after 3 s: by
            # then every heartbeat deadline inside serve has passed too.
            wait_for(lambda: "broker silent" in ext.log(), 8, "the external actor to notice the silence")
        finally:
            srv.proc.send_signal(signal.SIGCONT)

        def services():
            st = srv.stats()["services"]
            now = {name: sorted(v["instances"]) for name, v in st.items() if v["instances"]}
            return now == before and now
        try:
            wait_for(services, 6, "every service to be live again")
        except AssertionError:
            now = {name: sorted(v["instances"]) for name, v in srv.stats()["services"].items()}
            raise AssertionError("services before the freeze %r, after %r" % (before, now))
        c = Client(srv.endpoint())
        m = c.request("echo.ping", {"text": "after fg"}, to="e-outside")
        check(m.type == "echo.ping.ok", "the external actor does not serve: %r", m)
        c.close()


if __name__ == "__main__":
    run_tests(globals())
