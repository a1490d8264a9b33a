"""sbpg — a real PostgreSQL for the integration tests, in a temporary folder.

Starts Debian's PostgreSQL server as an unprivileged user (nobody, when
the test runs as root; the caller otherwise) in a fresh folder: initdb,
then postgres on a free loopback port with its socket in that folder, and
one database; restart() stops it at once and starts it again on the same
folder and port. `with_postgres(body)` runs body(pg) and stops the server
after, passed or failed, showing the end of its log on a failure.
Used by test_store_postgres.py and test_serve_postgres.py.
"""
import glob
import os
import pwd
import re
import signal
import socket
import subprocess

from sbtest import ROOT, SB_BIN, check, tmpdir, wait_for

BUILD = os.path.dirname(SB_BIN)

USER = "nobody"         # when run as root: the server refuses to run as root
DB = "sbstore"
SUPER = "sbtest"        # the cluster's superuser, trusted on the loopback


def pg_bindir():
    """The newest installed server's bin folder, or None."""
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"),
                  key=lambda p: int(re.sub(r"\D", "", p.split("/")[4]) or 0))
    return os.path.dirname(dirs[-1]) if dirs else None


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Postgres:
    """One PostgreSQL cluster in a temporary folder, owned by USER when the
    test runs as root (as CI does), by the caller otherwise."""

    def __init__(self, durable=False):
        self.bindir = pg_bindir()
        self.durable = durable
        self.dir = tmpdir()
        self.data = os.path.join(self.dir, "data")
        self.sock = os.path.join(self.dir, "sock")
        self.log = os.path.join(self.dir, "postgres.log")
        self.port = None
        self.proc = None
        self.as_root = os.geteuid() == 0
        os.mkdir(self.data, 0o700)
        os.mkdir(self.sock, 0o700)
        if self.as_root:
            # the folder tmpdir() made is root's and 0700: USER must get through it
            os.chmod(self.dir, 0o711)
            pw = pwd.getpwnam(USER)
            for d in (self.data, self.sock):
                os.chown(d, pw.pw_uid, pw.pw_gid)

    def _argv(self, prog, *args):
        argv = [os.path.join(self.bindir, prog)] + list(args)
        return (["runuser", "-u", USER, "--"] + argv) if self.as_root else argv

    def start(self):
        out = subprocess.run(self._argv("initdb", "-D", self.data, "-U", SUPER, "--auth=trust",
                                        "-E", "UTF8", "--no-sync", "--no-instructions"),
                             cwd=self.dir, capture_output=True, text=True, timeout=120)
        check(out.returncode == 0, "initdb failed: %s", (out.stdout + out.stderr)[-2000:])
        self.port = free_port()
        self._launch()
        out = subprocess.run([os.path.join(self.bindir, "createdb"), "-h", "127.0.0.1",
                              "-p", str(self.port), "-U", SUPER, DB],
                             capture_output=True, text=True, timeout=60)
        check(out.returncode == 0, "createdb failed: %s", out.stderr)

    def restart(self):
        """Stops the server at once (as a crash would) and starts it again
        on the same folder and port; returns once it accepts connections."""
        self.stop()
        self._launch()

    def _launch(self):
        # fsync off: the test is about the store's logic, not the disk's
        # (durable: on, for a benchmark against LMDB's durable commits);
        # the server's own log goes to a file of the test's folder
        log = open(self.log, "ab")
        self.proc = subprocess.Popen(
            self._argv("postgres", "-D", self.data, "-k", self.sock,
                       "-c", "listen_addresses=127.0.0.1", "-p", str(self.port),
                       "-c", "fsync=%s" % ("on" if self.durable else "off"), "-c", "max_connections=50"),
            cwd=self.dir, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()

        def ready():
            check(self.proc.poll() is None, "postgres exited: %s", self.tail())
            return subprocess.run([os.path.join(self.bindir, "pg_isready"), "-q", "-h", "127.0.0.1",
                                   "-p", str(self.port)]).returncode == 0
        wait_for(ready, 60, "postgres to accept connections", interval=0.1)

    def url(self):
        return "postgresql://%s@127.0.0.1:%d/%s" % (SUPER, self.port, DB)

    def tail(self, n=20):
        try:
            with open(self.log, errors="replace") as f:
                return "\n".join(f.read().splitlines()[-n:])
        except OSError:
            return "(no log)"

    def stop(self):
        """Immediate shutdown (SIGQUIT to the postmaster, which ends its
        backends), then SIGKILL if it lingers; runuser is not trusted to
        pass a signal on, so the postmaster's pid comes from its pid file."""
        pid = None
        try:
            with open(os.path.join(self.data, "postmaster.pid")) as f:
                pid = int(f.readline().strip())
        except (OSError, ValueError):
            pass
        for sig in (signal.SIGQUIT, signal.SIGKILL):
            if pid:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            if self.proc:
                try:
                    self.proc.wait(timeout=10)
                    break
                except subprocess.TimeoutExpired:
                    if sig == signal.SIGKILL:
                        self.proc.kill()

    def psql(self, sql):
        """Runs SQL on the database as the superuser; returns its output
        (unaligned, tuples only)."""
        out = subprocess.run([os.path.join(self.bindir, "psql"), "-h", "127.0.0.1", "-p", str(self.port),
                              "-U", SUPER, "-d", DB, "-v", "ON_ERROR_STOP=1", "-At", "-c", sql],
                             capture_output=True, text=True, timeout=60)
        check(out.returncode == 0, "psql %r failed: %s", sql, out.stderr)
        return out.stdout


def with_postgres(body):
    pg = Postgres()
    try:
        pg.start()
        return body(pg)
    except Exception:
        print("--- postgres log (last lines):\n" + pg.tail())
        raise
    finally:
        pg.stop()


def run_unit(pg, name, min_tests):
    """Runs one Criterion binary against the database; checks its summary."""
    binary = os.path.join(BUILD, "tests", name)
    check(os.access(binary, os.X_OK), "no %s (run make units first)", binary)
    env = dict(os.environ, SB_TEST_STORE_URL=pg.url())
    out = subprocess.run([binary, "--jobs", "2", "--verbose"], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    text = out.stdout + out.stderr
    m = re.search(r"Synthesis: Tested: (\d+) \| Passing: (\d+) \| Failing: (\d+) \| Crashing: (\d+)",
                  text)
    check(m, "%s printed no summary (exit %d): %s", name, out.returncode, text[-3000:])
    tested, passing, failing, crashing = map(int, m.groups())
    check(out.returncode == 0 and failing == 0 and crashing == 0 and passing == tested,
          "%s failed against PostgreSQL: %s\n%s", name, m.group(0), text[-4000:])
    check(tested >= min_tests, "%s ran only %d tests against PostgreSQL", name, tested)
    return text
