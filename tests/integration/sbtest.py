"""sbtest — shared helpers for switchboard's integration tests.

Run test scripts with /usr/bin/python3: Debian's python3-zmq and
python3-msgpack load only under Debian's interpreter.

What is here:

  skip(reason)              exit 77 with the reason as the last line
  wait_for(cond, timeout)   poll a condition with a deadline (never sleep)
  read_jsonl(path)          the whole lines of a JSON-lines file being written
  new_id(), now_ms()        ULID-like ids and wall-clock ms
  pack(obj), unpack(buf)    msgpack with str/bin kept apart
  Proc                      a child process with its output in a log file
  Server                    `switchboard serve` on a fresh short data dir
  start_actor(...)          `switchboard actor NAME` attached to a Server
  Client                    a DEALER speaking the bus as an outside client
  Instance                  a Client registered as a service instance
  Sub, Tap                  event-plane and tap subscribers
  run_tests(globals())      run every test_* function, report, exit

Everything that starts a process registers it, and run_tests (or atexit)
kills whatever is still running, so a failing test never leaves a server
behind. Data dirs are short (/tmp/sbXXXX) so ipc paths stay far below the
107-byte sun_path limit; each process logs to a file in its data dir, and
a failing test prints the tail of every log it made.

Environment: SB_BIN (the binary; default ROOT/build/switchboard), SB_ROOT,
SB_SEED (repeat a run's random choices), SB_KEEP_DATA=1 (keep the data
dirs and logs after the run). Name tests on the command line to run only
those: /usr/bin/python3 tests/integration/test_bus_routing.py test_x.

The wire format these helpers speak (docs/protocol.md):
  client DEALER -> broker           [header][body]
  broker -> client DEALER           [header][body]       (replies carry corr)
  broker -> instance DEALER         [route][header][body]
  instance DEALER -> broker         [route][header][body]
  event plane (PUB to bus-in, SUB to bus-pub)  [topic][header][body]
  tap (SUB to bus-tap)              [plane][peer or topic][header][body]
Headers and bodies are msgpack maps.
"""

import atexit
import http.client
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

try:
    import msgpack
    import zmq
except ImportError as e:  # pragma: no cover - depends on the interpreter
    print("python3-zmq and python3-msgpack are needed (run with /usr/bin/python3): %s" % e)
    sys.exit(77)

ROOT = os.environ.get("SB_ROOT") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
SB_BIN = os.environ.get("SB_BIN") or os.path.join(ROOT, "build", "switchboard")
PROTOCOL = 1
HEARTBEAT_S = 1.0

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# lines by which AddressSanitizer, LeakSanitizer and UBSan report a bug
_SANITIZER = re.compile(r"ERROR: (AddressSanitizer|LeakSanitizer)|runtime error: |WARNING: ThreadSanitizer")
_procs = []         # every Proc started, for the final cleanup
_tmpdirs = []       # every data dir made, removed at exit


class TestFailure(AssertionError):
    pass


def skip(reason):
    """Skips the whole script: exit 77 with the reason as the last line."""
    sys.stdout.flush()
    print(reason)
    sys.stdout.flush()
    _cleanup()
    os._exit(77)


def check(cond, fmt, *args):
    """assert that survives python -O and formats lazily."""
    if not cond:
        raise TestFailure(fmt % args if args else fmt)


def now_ms():
    return int(time.time() * 1000)


def new_id():
    """A 26-character ULID: 48 bits of ms time, 80 random bits."""
    n = (now_ms() << 80) | random.getrandbits(80)
    return "".join(_CROCKFORD[(n >> (5 * (25 - k))) & 31] for k in range(26))


def pack(obj):
    return msgpack.packb(obj, use_bin_type=True)


def unpack(buf, strict=True):
    """Decodes msgpack. strict: a str that is not UTF-8 raises, as it
    would in any outside client; otherwise its bad bytes are escaped."""
    return msgpack.unpackb(buf, raw=False, strict_map_key=False,
                           unicode_errors="strict" if strict else "surrogateescape")


def wait_for(cond, timeout, what="condition", interval=0.01):
    """Calls cond() until it returns something truthy, and returns that.
    Raises TestFailure after `timeout` seconds. The interval is a polling
    step, not a guess at how long something takes."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise TestFailure("timed out after %.1f s waiting for %s" % (timeout, what))
        time.sleep(interval)


def read_jsonl(path):
    """The JSON lines another process appends to `path`, parsed. A last
    line without its newline is still being written (a reader can see
    half of a write): it is left for the next read. Missing file: []."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    out = []
    for line in data.split(b"\n")[:-1]:
        if line.strip():
            out.append(json.loads(line.decode("utf-8", "replace")))
    return out


def tmpdir():
    """A short, fresh directory under /tmp, removed at exit."""
    d = tempfile.mkdtemp(prefix="sb", dir="/tmp")
    _tmpdirs.append(d)
    return d


# ---------------------------------------------------------------------------
# processes

class Proc:
    """A child process whose stdout and stderr go to one log file."""

    def __init__(self, argv, log_path, env=None):
        self.argv = list(argv)
        self.log_path = log_path
        self._log = open(log_path, "ab")
        full_env = dict(os.environ)
        if env:
            full_env.update(env)
        self.p = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, env=full_env)
        self.pid = self.p.pid
        _procs.append(self)

    def alive(self):
        return self.p.poll() is None

    def send_signal(self, sig):
        if self.alive():
            os.kill(self.pid, sig)

    def wait(self, timeout):
        """Waits for exit; returns the exit code, or None on timeout."""
        try:
            return self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, sig=signal.SIGTERM, timeout=10):
        """Signals the process and waits; kills it if it hangs. Returns the
        exit code (negative: killed by that signal)."""
        if self.alive():
            self.p.send_signal(sig)
            try:
                os.kill(self.pid, signal.SIGCONT)   # a stopped process must run to exit
            except ProcessLookupError:
                pass
            if self.wait(timeout) is None:
                self.p.kill()
                self.p.wait()
        if not self._log.closed:
            self._log.close()
        return self.p.returncode

    def kill(self):
        if self.alive():
            # SIGCONT first so a stopped process can take the SIGKILL at once
            try:
                os.kill(self.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            self.p.kill()
            self.p.wait()
        if not self._log.closed:
            self._log.close()

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""


def run(argv, timeout=10, env=None):
    """Runs a command to completion: (exit code, stdout, stderr)."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL, timeout=timeout, env=full_env)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def sb(*args, **kw):
    """Runs `switchboard ARGS...`: (exit code, stdout, stderr)."""
    return run([SB_BIN] + [str(a) for a in args], **kw)


def cli(srv, *args, **kw):
    """Runs `switchboard ARGS... --data DIR` against a Server."""
    return sb(*(list(args) + ["--data", srv.data]), **kw)


def rest(srv, method, path, body=None, raw=False):
    """One REST call to a Server's gateway (serve --http), with its token:
    (HTTP status, the JSON answer, or its text when raw)."""
    with open(os.path.join(srv.data, "http.port")) as f:
        port = int(f.read().strip())
    with open(os.path.join(srv.data, "token")) as f:
        token = f.read().strip()
    headers = {"Host": "127.0.0.1:%d" % port, "Authorization": "Bearer " + token}
    if body is not None:
        headers["Content-Type"] = "application/json"
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
    r = conn.getresponse()
    text = r.read()
    out = (r.status, text.decode() if raw else json.loads(text))
    conn.close()
    return out


def cli_session(srv, ws, *extra):
    """`sessions new --workspace WS` through the CLI; the new session id."""
    rc, out, err = cli(srv, "sessions", "new", "--workspace", ws, "--json", *extra)
    check(rc == 0, "sessions new exited %d: %s", rc, err)
    return json.loads(out)["session_id"]


def cli_wait_run(srv, run_id, timeout=30):
    """Waits, through `run-info`, until the run reaches a final status."""
    def final():
        rc, out, _ = cli(srv, "run-info", run_id, "--json")
        st = json.loads(out)["status"] if rc == 0 else None
        return st if st in ("completed", "failed", "cancelled", "expired", "interrupted") else None
    return wait_for(final, timeout, "run %s to end" % run_id, interval=0.05)


class Server:
    """`switchboard serve --data DIR` on a fresh data dir (or a given one).

    start() returns once the external endpoints answer bus.stats, so a
    test can use the bus at once."""

    def __init__(self, data=None, args=(), env=None):
        self.data = data or tmpdir()
        self.args = list(args)
        self.env = env
        self.proc = None
        self._ctl = None
        self.starts = 0

    def endpoint(self, which="cmd"):
        return "ipc://%s/bus-%s" % (self.data, which)

    def start(self, timeout=10):
        self.starts += 1
        log = os.path.join(self.data, "serve-%d.log" % self.starts)
        self.proc = Proc([SB_BIN, "serve", "--data", self.data, "--http", "127.0.0.1:0"] + self.args,
                         log, env=self.env)

        def up():
            if not self.proc.alive():
                raise TestFailure("serve exited with %s during startup:\n%s"
                                  % (self.proc.p.returncode, self.proc.log()))
            if not os.path.exists(os.path.join(self.data, "bus-cmd")):
                return False
            try:
                return self.stats(timeout=0.5) is not None
            except TestFailure:
                return False
        wait_for(up, timeout, "serve to answer bus.stats")
        return self

    def control(self):
        """A Client kept open for stats and ad-hoc calls."""
        if self._ctl is None:
            self._ctl = Client(self.endpoint("cmd"), name="sbtest-ctl")
        return self._ctl

    def stats(self, timeout=3.0):
        """The bus.stats.ok body (a dict)."""
        m = self.control().request("bus.stats", {}, timeout=timeout)
        check(m.type == "bus.stats.ok", "bus.stats answered %s %r", m.type, m.body)
        return m.body

    def instances(self, service, timeout=3.0):
        """Names of the live instances of `service`, as the broker lists them."""
        svc = self.stats(timeout).get("services", {}).get(service) or {}
        return list(svc.get("instances", []))

    def wait_instances(self, service, want, timeout=5.0):
        """Waits until the instances of `service` are exactly the set `want`."""
        want = set(want)
        return wait_for(lambda: set(self.instances(service)) == want, timeout,
                        "%s instances == %s" % (service, sorted(want)))

    def close_control(self):
        if self._ctl is not None:
            self._ctl.close()
            self._ctl = None

    def stop(self, sig=signal.SIGTERM, timeout=10):
        """Stops serve with `sig`; returns its exit code."""
        self.close_control()
        if self.proc is None:
            return None
        return self.proc.stop(sig, timeout)

    def log(self):
        return self.proc.log() if self.proc else ""

    def __enter__(self):
        return self.start()

    def __exit__(self, exc_type, *exc):
        # A clean stop after a passing test, so shutdown and exit-time
        # checks (LeakSanitizer) run; a kill after a failing one.
        self.close_control()
        if self.proc:
            if exc_type is None:
                self.proc.stop(signal.SIGTERM, 10)
            else:
                self.proc.kill()


def start_actor(server, name="echo", instance=None, wait=True, timeout=5.0):
    """Starts `switchboard actor NAME` on server's data dir. With wait, it
    returns once the broker lists the instance."""
    instance = instance or "%s-%s" % (name, new_id()[-6:].lower())
    log = os.path.join(server.data, "actor-%s.log" % instance)
    p = Proc([SB_BIN, "actor", name, "--data", server.data, "--instance", instance], log)
    p.instance = instance
    if wait:
        def up():
            if not p.alive():
                raise TestFailure("actor %s exited with %s:\n%s" % (instance, p.p.returncode, p.log()))
            return instance in server.instances(name)
        wait_for(up, timeout, "%s to register" % instance)
    return p


# ---------------------------------------------------------------------------
# the bus, as an outside client speaks it

_ctx = None


def context():
    global _ctx
    if _ctx is None:
        _ctx = zmq.Context()
    return _ctx


class Msg:
    """A received bus message: type, header, body (dicts), plus the route
    when it is a request delivered to an instance, and for a streamed
    reply the chunks that came before it."""

    def __init__(self, header, body, route=None, raw=None):
        self.header = header
        self.body = body
        self.route = route
        self.raw = raw
        self.chunks = []

    @property
    def type(self):
        return self.header.get("type")

    @property
    def corr(self):
        return self.header.get("corr")

    def is_error(self):
        return self.type == "error"

    @property
    def code(self):
        return self.body.get("code") if self.is_error() and isinstance(self.body, dict) else None

    def __repr__(self):
        return "Msg(%s %r)" % (self.header, self.body)


def make_header(type, id=None, frm="sbtest", **fields):
    h = {"type": type, "id": id or new_id(), "ts": now_ms(), "from": frm}
    for k, v in fields.items():
        if v is not None:
            h[k] = v
    return h


class Client:
    """A DEALER on the command plane: sends [header][body], receives
    [header][body] replies. Works against any switchboard broker."""

    def __init__(self, endpoint, name="sbtest", identity=None, strict=True):
        """strict: replies must be valid UTF-8 msgpack (see unpack)."""
        self.name = name
        self.strict = strict
        self.sock = context().socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.SNDHWM, 0)
        self.sock.setsockopt(zmq.RCVHWM, 0)
        if identity:
            self.sock.setsockopt(zmq.IDENTITY, identity)
        self.sock.connect(endpoint)
        self.backlog = []       # messages read while waiting for something else

    def close(self):
        self.sock.close(0)

    def send_frames(self, frames):
        """Sends raw frames as one multipart message (for malformed input)."""
        self.sock.send_multipart(frames, copy=True)

    def send(self, type, body=None, id=None, **hdr):
        """Sends [header][body]; returns the id. Extra header fields
        (deadline, key, to, ...) go in as keywords."""
        h = make_header(type, id=id, frm=self.name, **hdr)
        self.sock.send_multipart([pack(h), pack({} if body is None else body)])
        return h["id"]

    def _parse(self, frames):
        route = None
        if len(frames) == 3:
            route = frames[0]
            frames = frames[1:]
        if len(frames) != 2:
            raise TestFailure("broker sent %d frames: %r" % (len(frames), frames))
        return Msg(unpack(frames[0], self.strict), unpack(frames[1], self.strict),
                   route=route, raw=frames)

    def recv(self, timeout=5.0):
        """The next message (backlog first), or None after timeout s."""
        if self.backlog:
            return self.backlog.pop(0)
        if self.sock.poll(int(timeout * 1000)) == 0:
            return None
        return self._parse(self.sock.recv_multipart())

    def drain(self):
        """Reads and returns everything already waiting."""
        out = list(self.backlog)
        self.backlog = []
        while self.sock.poll(0):
            out.append(self._parse(self.sock.recv_multipart()))
        return out

    def wait_reply(self, id, timeout=5.0):
        """Waits for the final answer to request `id`, collecting its
        chunks in .chunks in arrival order. Other messages are kept in the
        backlog. Raises TestFailure on timeout."""
        deadline = time.monotonic() + timeout
        chunks = []
        kept = []
        pending = self.backlog
        self.backlog = []
        try:
            while True:
                if pending:
                    m = pending.pop(0)
                else:
                    left = deadline - time.monotonic()
                    if left <= 0 or self.sock.poll(int(left * 1000) + 1) == 0:
                        raise TestFailure("no answer to %s within %.1f s" % (id, timeout))
                    m = self._parse(self.sock.recv_multipart())
                if m.corr != id:
                    kept.append(m)
                    continue
                if m.type.endswith(".chunk"):
                    chunks.append(m)
                    continue
                m.chunks = chunks
                return m
        finally:
            self.backlog = kept + pending + self.backlog

    def request(self, type, body=None, timeout=5.0, **hdr):
        """Sends a request and returns its final answer (.ok or error)."""
        return self.wait_reply(self.send(type, body, **hdr), timeout)


class Instance(Client):
    """A Client registered as an instance of a service. Requests arrive
    as [route][header][body]; answer them with reply()."""

    def register(self, service, instance, protocol=PROTOCOL, timeout=5.0, **body):
        """Sends bus.ready and returns the broker's answer (a Msg)."""
        self.service, self.instance = service, instance
        b = {"service": service, "instance": instance, "protocol": protocol}
        b.update(body)
        return self.request("bus.ready", b, timeout=timeout)

    def heartbeat(self):
        self.send("bus.heartbeat", {})

    def next_request(self, timeout=5.0):
        """The next request delivered to this instance, or None. Broker
        heartbeats are skipped; other messages go to the backlog."""
        deadline = time.monotonic() + timeout
        for i, m in enumerate(self.backlog):
            if m.route is not None:
                return self.backlog.pop(i)
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or self.sock.poll(int(left * 1000) + 1) == 0:
                return None
            m = self._parse(self.sock.recv_multipart())
            if m.route is not None:
                return m
            if m.type != "bus.heartbeat":
                self.backlog.append(m)

    def reply(self, req, type=None, body=None, seq=None):
        """Answers `req` on its route: type defaults to <type>.ok."""
        h = make_header(type or req.type + ".ok", frm=self.instance, corr=req.header["id"], seq=seq)
        self.sock.send_multipart([req.route, pack(h), pack({} if body is None else body)])


class Sub:
    """A SUB socket on the event plane (bus-pub): frames [topic][header][body]."""

    def __init__(self, endpoint, prefix=b""):
        self.sock = context().socket(zmq.SUB)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.RCVHWM, 0)
        self.sock.setsockopt(zmq.SUBSCRIBE, prefix if isinstance(prefix, bytes) else prefix.encode())
        self.sock.connect(endpoint)

    def recv_frames(self, timeout=1.0):
        if self.sock.poll(int(timeout * 1000)) == 0:
            return None
        return self.sock.recv_multipart()

    def close(self):
        self.sock.close(0)


class Tap(Sub):
    """A SUB on the tap (bus-tap): frames [plane][peer or topic][header][body]."""

    def recv(self, timeout=1.0):
        """(plane, peer_or_topic, header dict, body) or None."""
        f = self.recv_frames(timeout)
        if f is None:
            return None
        check(len(f) == 4, "tap sent %d frames", len(f))
        return f[0].decode(), f[1], unpack(f[2]), unpack(f[3])


class Pub:
    """A PUB socket on the event plane's publishing side (bus-in)."""

    def __init__(self, endpoint):
        self.sock = context().socket(zmq.PUB)
        self.sock.setsockopt(zmq.LINGER, 0)
        # never drop on our side: the malformed-input test counts every frame
        self.sock.setsockopt(zmq.SNDHWM, 0)
        self.sock.connect(endpoint)

    def send_frames(self, frames):
        self.sock.send_multipart(frames)

    def publish(self, topic, type, body, **hdr):
        h = make_header(type, **hdr)
        self.sock.send_multipart([topic.encode(), pack(h), pack(body)])
        return h["id"]

    def close(self):
        self.sock.close(0)


def session_event(session_id, seq, kind="note", body=None):
    """A valid session.event body (schemas/types_session.c)."""
    e = {"session_id": session_id, "seq": seq, "ts": now_ms(), "kind": kind}
    if body is not None:
        e["body"] = body
    return e


# ---------------------------------------------------------------------------
# the runner

def _cleanup():
    for p in _procs:
        try:
            p.kill()
        except Exception:
            pass
    del _procs[:]
    if os.environ.get("SB_KEEP_DATA"):
        return
    for d in _tmpdirs:
        shutil.rmtree(d, ignore_errors=True)
    del _tmpdirs[:]


atexit.register(_cleanup)


def run_tests(ns, argv=None):
    """Runs every function named test_* in `ns` (in definition order), or
    only those named on the command line. After a passing test, whatever it
    left running is stopped with SIGTERM and every log it made is searched
    for sanitizer reports (a report fails the test); after a failing one
    they are killed and the tails of their logs printed. Exits 0 when all
    pass, 1 otherwise, 77 when a test calls skip()."""
    global _running
    argv = sys.argv[1:] if argv is None else argv
    tests = [(n, f) for n, f in ns.items() if n.startswith("test_") and callable(f)]
    if argv:
        tests = [(n, f) for n, f in tests if n in argv]
    # a concurrent `make` may be relinking the binary at this moment
    deadline = time.monotonic() + 5
    while not os.access(SB_BIN, os.X_OK) and time.monotonic() < deadline:
        time.sleep(0.1)
    if not os.access(SB_BIN, os.X_OK):
        skip("no switchboard binary at %s (run make first)" % SB_BIN)
    seed = int(os.environ.get("SB_SEED", str(int(time.time()))))
    print("seed %d (set SB_SEED to repeat)" % seed)
    # A runner's timeout (tests/run_all.sh) ends a hung script with
    # SIGTERM: raised inside the running test, it fails that test with
    # its traceback and logs instead of a silent death. Once only; the
    # runner's SIGKILL follows if cleanup hangs too.
    signal.signal(signal.SIGTERM, _on_sigterm)
    failed = []
    messages = {}
    for name, fn in tests:
        random.seed("%d:%s" % (seed, name))
        mark = len(_procs)
        t0 = time.monotonic()
        ok = False
        try:
            _running = name
            fn()
            ok = True
        except (Exception, _Terminated) as e:
            failed.append(name)
            messages[name] = _failure_message(e)
            _running = None
            print("  FAIL  %-40s %6.2fs" % (name, time.monotonic() - t0))
            traceback.print_exc(file=sys.stdout)
            for p in _procs[mark:]:
                print("  --- log of %s (last 30 lines):" % " ".join(p.argv[1:3]))
                for line in p.log().splitlines()[-30:]:
                    print("  | " + line)
        finally:
            _running = None
            procs = _procs[mark:]
            if ok:
                # Stop what the test left running, last started first, so
                # exit-time checks run; then read every log for sanitizer
                # reports (make asan), which fail a test that passed.
                for p in reversed(procs):
                    p.stop(signal.SIGTERM, 10)
                reports = []
                for p in procs:
                    lines = p.log().splitlines()
                    for i, line in enumerate(lines):
                        if _SANITIZER.search(line):
                            # the report itself: the stack frames after it
                            reports += ["%s: %s" % (" ".join(p.argv[1:3]), l) for l in lines[i:i + 40]]
                            break
                if reports:
                    failed.append(name)
                    messages[name] = ["sanitizer report: " + reports[0]]
                    print("  FAIL  %-40s %6.2fs (sanitizer)" % (name, time.monotonic() - t0))
                    for line in reports[:60]:
                        print("  | " + line)
                else:
                    print("  ok    %-40s %6.2fs" % (name, time.monotonic() - t0))
            for p in procs:
                p.kill()
            del _procs[mark:]
        sys.stdout.flush()
    _cleanup()
    print("%d of %d passed" % (len(tests) - len(failed), len(tests)))
    # The last lines of the output name each failed test with its message,
    # after every server log: CI shows only the tail (tests/run_all.sh
    # picks these "FAILED" lines out of the log of a failed file).
    for name in failed:
        lines = messages.get(name) or ["(no message)"]
        print("FAILED %s: %s" % (name, lines[0]))
        for line in lines[1:]:
            print("FAILED     " + line)
    sys.stdout.flush()
    sys.exit(1 if failed else 0)


class _Terminated(BaseException):
    """SIGTERM while a test runs; not an Exception, so no test's own
    `except Exception` swallows it."""


_running = None     # the name of the test running now, for _on_sigterm


def _on_sigterm(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if _running is None:
        return          # between tests: the cleanup ends soon, or SIGKILL does
    raise _Terminated("terminated by SIGTERM (the runner's time limit?) while this test ran")


def _failure_message(e, max_lines=12, max_chars=400):
    """The failure as a few short lines: the exception's type (unless it is
    a plain check), its message, and the test line that raised it."""
    text = str(e) or "(empty message)"
    if not isinstance(e, (TestFailure, _Terminated)):
        text = "%s: %s" % (type(e).__name__, text)
    lines = [l[:max_chars] for l in text.splitlines() if l.strip()] or [type(e).__name__]
    if len(lines) > max_lines:
        # the head says what failed, the tail is the newest of what it shows
        head, tail = max_lines // 3, max_lines - max_lines // 3 - 1
        lines = lines[:head] + ["... (%d lines, in full above)" % (len(lines) - head - tail)] + lines[-tail:]
    # where it failed: the line of the test function (its outermost frame
    # in a test script), after the innermost one if that is another
    frames = [fs for fs in traceback.extract_tb(e.__traceback__)
              if os.path.basename(fs.filename).startswith("test_")]
    where = ["%s:%d in %s" % (os.path.basename(fs.filename), fs.lineno, fs.name)
             for fs in (frames[-1:] + frames[:1] if len(frames) > 1 else frames)]
    where = " < ".join(where) if where else None
    if where:
        lines[0] = "%s  [%s]" % (lines[0], where)
    return lines
