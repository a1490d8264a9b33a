#!/usr/bin/python3
"""tests/run_all.sh tells what failed in the last lines CI shows.

CI keeps only the tail of a long log: a failed file's block must end with
its failed tests and their messages, after any server log, and the run
must end with the same lines before the "N passed, N failed, N skipped"
summary. A passing file stays one line.

The runner is run on a small tree of its own (a copy of run_all.sh and
sbtest.py, the real binary, scripted unit and integration tests), so
this checks the real script without running the suite inside itself.
"""
import os
import shutil
import stat
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import ROOT, SB_BIN, check, run_tests, tmpdir  # noqa: E402

# A Python test file with a passing test, one that raises, one whose
# wait_for times out, and last one that fails with a two-line message
# while a real server runs, so that the server's log is printed after it.
PY_FAILING = r'''
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Server, check, run_tests, wait_for

def test_passes():
    pass

def test_raises():
    {}["missing key"]

def test_waits_in_vain():
    wait_for(lambda: False, 0.05, "a condition that never holds")

def test_check_fails():
    with Server():
        check(1 + 1 == 3, "one and one made %d\nnot three", 1 + 1)

run_tests(globals())
'''

PY_PASSING = r'''
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import run_tests

def test_one():
    print("chatter that a passing run does not show")

run_tests(globals())
'''

# Hangs in its only test until the runner's time limit ends it.
PY_HANGING = r'''
import os, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import run_tests

def test_hangs():
    while True:
        time.sleep(0.05)

run_tests(globals())
'''

SH_FAILING = '''echo "some output"
echo "FAIL: the shell test saw nothing"
echo "trailing chatter"
exit 1
'''

# What a Criterion binary prints for one failed assertion.
UNIT_FAILING = '''#!/bin/sh
echo "[----] tests/unit/test_fake.c:42: Assertion Failed"
echo "[----]   "
echo "[----]   the fake value is 7, want 8"
echo "[----]   "
echo "[FAIL] fake::value: (0.00s)"
echo "[====] Synthesis: Tested: 2 | Passing: 1 | Failing: 1 | Crashing: 0 "
exit 1
'''

UNIT_PASSING = '''#!/bin/sh
echo "[====] Synthesis: Tested: 3 | Passing: 3 | Failing: 0 | Crashing: 0 "
'''


def make_tree(files):
    """A root with tests/run_all.sh, tests/integration/sbtest.py, the
    binary as build/switchboard and `files` ({relative path: text})."""
    root = tmpdir()
    os.makedirs(os.path.join(root, "tests", "integration"))
    os.makedirs(os.path.join(root, "build", "tests"))
    shutil.copy(os.path.join(ROOT, "tests", "run_all.sh"), os.path.join(root, "tests"))
    shutil.copy(os.path.join(ROOT, "tests", "integration", "sbtest.py"),
                os.path.join(root, "tests", "integration"))
    os.symlink(os.path.realpath(SB_BIN), os.path.join(root, "build", "switchboard"))
    for rel, text in files.items():
        path = os.path.join(root, rel)
        with open(path, "w") as f:
            f.write(text)
        if rel.startswith("build/"):
            os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return root


def run_all(root, what, timeout_s=None):
    env = dict(os.environ)
    for k in ("SB_BIN", "SB_ROOT", "SB_ASAN"):
        env.pop(k, None)
    if timeout_s:
        env["SB_TEST_TIMEOUT"] = str(timeout_s)
    p = subprocess.run(["bash", os.path.join(root, "tests", "run_all.sh"), "build", what],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=120)
    return p.returncode, p.stdout.decode("utf-8", "replace")


def block(out, name):
    """The lines of one file's block: its PASS/FAIL line and what follows,
    up to the next file or section."""
    lines = out.splitlines()
    start = next((k for k, l in enumerate(lines) if l.split()[1:2] == [name]), None)
    check(start is not None, "no line for %s in:\n%s", name, out)
    end = start + 1
    while end < len(lines) and lines[end].startswith("        "):
        end += 1
    return lines[start:end]


def test_failed_python_file_ends_with_its_failures():
    root = make_tree({"tests/integration/test_fail.py": PY_FAILING,
                      "tests/integration/test_ok.py": PY_PASSING,
                      "tests/integration/test_shell.sh": SH_FAILING})
    rc, out = run_all(root, "integration")
    check(rc == 1, "run_all exited %d:\n%s", rc, out)
    b = block(out, "integration/test_fail.py")
    check(b[0].lstrip().startswith("FAIL"), "block head %r", b[0])
    # the server's log is there for context, and the failures come after it
    logs = [k for k, l in enumerate(b) if "|   | " in l]      # a line of serve's log
    fails = [k for k, l in enumerate(b) if "> FAILED " in l]
    check(logs and fails and logs[-1] < fails[0], "the failures do not follow the log:\n%s", "\n".join(b))
    tail = [l.strip() for l in b[fails[0]:]]
    check(len(tail) == 4, "want the 3 failed tests (one with 2 lines) last, got:\n%s", "\n".join(b))
    check(tail[0].startswith("> FAILED test_raises: KeyError: 'missing key'  [test_fail.py:"),
          "KeyError line %r", tail[0])
    check(tail[1].startswith("> FAILED test_waits_in_vain: timed out after 0.1 s waiting for a condition")
          or tail[1].startswith("> FAILED test_waits_in_vain: timed out after 0.0 s waiting for a condition"),
          "wait_for line %r", tail[1])
    check(tail[2].startswith("> FAILED test_check_fails: one and one made 2  [test_fail.py:")
          and tail[2].endswith("in test_check_fails]"), "check line %r", tail[2])
    check(tail[3] == "> FAILED     not three", "second line of the message %r", tail[3])
    # a passing file: one line, none of its output
    ok = block(out, "integration/test_ok.py")
    check(len(ok) == 1 and ok[0].lstrip().startswith("PASS"), "passing block %r", ok)
    # a shell test's own FAIL: line closes its block
    sh = block(out, "integration/test_shell.sh")
    check(sh[-1].strip() == "> FAIL: the shell test saw nothing", "shell block:\n%s", "\n".join(sh))
    # the run ends with every failure again, then the summary
    lines = out.rstrip().splitlines()
    check(lines[-1] == "1 passed, 2 failed, 0 skipped", "summary %r", lines[-1])
    recap = lines[lines.index("failed: integration/test_fail.py integration/test_shell.sh") + 1:-1]
    want = ["integration/test_fail.py: FAILED test_raises", "integration/test_fail.py: FAILED test_waits_in_vain",
            "integration/test_fail.py: FAILED test_check_fails", "integration/test_fail.py: FAILED     not three",
            "integration/test_shell.sh: FAIL: the shell test saw nothing"]
    check(len(recap) == len(want) and all(r.strip().startswith(w) for r, w in zip(recap, want)),
          "the closing recap:\n%s", "\n".join(recap))


def test_failed_unit_binary_ends_with_its_assertion():
    root = make_tree({"build/tests/test_fake": UNIT_FAILING, "build/tests/test_good": UNIT_PASSING})
    rc, out = run_all(root, "unit")
    check(rc == 1, "run_all exited %d:\n%s", rc, out)
    b = [l.strip() for l in block(out, "unit/test_fake")]
    check(b[-4:] == ["> [----] tests/unit/test_fake.c:42: Assertion Failed",
                     "> [----]   the fake value is 7, want 8", "> [FAIL] fake::value: (0.00s)"][-4:]
          or b[-3:] == ["> [----] tests/unit/test_fake.c:42: Assertion Failed",
                        "> [----]   the fake value is 7, want 8", "> [FAIL] fake::value: (0.00s)"],
          "unit block:\n%s", "\n".join(b))
    good = block(out, "unit/test_good")
    check(len(good) == 2 and "Synthesis" in good[1], "a passing binary keeps its one Synthesis line: %r", good)
    check(out.rstrip().splitlines()[-1] == "1 passed, 1 failed, 0 skipped", "summary:\n%s", out)


def test_a_hung_file_names_the_test_that_hung():
    root = make_tree({"tests/integration/test_hang.py": PY_HANGING})
    # long enough for Python to start and import zmq on a loaded machine:
    # the handler that names the test is set once the tests run
    rc, out = run_all(root, "integration", timeout_s=8)
    check(rc == 1, "run_all exited %d:\n%s", rc, out)
    b = [l.strip() for l in block(out, "integration/test_hang.py")]
    check("(exit 1)" in b[0] or "(exit 124)" in b[0], "block head %r", b[0])
    check(any(l.startswith("> FAILED test_hangs: terminated by SIGTERM") for l in b),
          "the hung test is not named:\n%s", "\n".join(b))
    check(b[-1] == "> timed out after 8 s", "the time limit is not the last line:\n%s", "\n".join(b))


if __name__ == "__main__":
    run_tests(globals())
