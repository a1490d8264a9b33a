#!/usr/bin/python3
"""`make run` builds in parallel and installs only what running needs
(issue 21): the test-only packages (Criterion, clang, Chromium, the npm
test modules) belong to `make test`, `make asan` and `make fuzz`.

What make would do is read with `make -n` (nothing is built: the build
folder is the test's own, and -n runs no recipe); what each make target
would install is asked of scripts/deps.sh with --list, which installs
nothing.
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import ROOT, check, run_tests, skip, tmpdir  # noqa: E402

TEST_ONLY = ("libcriterion-dev", "clang", "libclang-rt-14-dev", "chromium", "nodejs", "python3-zmq")


def _make_n(target):
    p = subprocess.run(["make", "-n", "-C", ROOT, target, "BUILD=%s" % os.path.join(tmpdir(), "build")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    check(p.returncode == 0, "make -n %s: %d\n%s", target, p.returncode, p.stdout[-2000:])
    return p.stdout


def _deps_list(*args):
    p = subprocess.run(["bash", os.path.join(ROOT, "scripts", "deps.sh")] + list(args) + ["--list"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    check(p.returncode == 0, "deps.sh %s --list: %d %s", " ".join(args), p.returncode, p.stderr)
    return p.stdout.split()


def _deps_calls(out):
    return [ln.split("scripts/deps.sh", 1)[1].split() for ln in out.splitlines() if "scripts/deps.sh" in ln]


def test_make_run_builds_in_parallel_and_installs_only_what_running_needs():
    out = _make_n("run")
    nproc = subprocess.run(["nproc"], stdout=subprocess.PIPE, text=True).stdout.strip()
    builds = [ln for ln in out.splitlines() if re.search(r"\bmake\b.*\ball\b", ln)]
    check(builds and ("-j%s" % nproc) in builds[0], "make run does not build with -j%s:\n%s", nproc, out[:2000])
    calls = _deps_calls(out)
    check(calls and all(c == [] for c in calls), "make run installs with %r", calls)
    run_pkgs = _deps_list()
    check("libzmq3-dev" in run_pkgs and "libedit-dev" in run_pkgs, "run packages %r", run_pkgs)
    extra = [p for p in TEST_ONLY if p in run_pkgs]
    check(not extra, "make run would install the test-only %r", extra)
    check("npm:" not in run_pkgs, "make run would install npm modules")


def test_the_test_targets_install_what_the_tests_need():
    for target in ("test", "asan"):
        calls = _deps_calls(_make_n(target))
        check(["--tests"] in calls, "make %s does not install the test packages: %r", target, calls)
    test_pkgs = _deps_list("--tests")
    missing = [p for p in TEST_ONLY if p not in test_pkgs]
    check(not missing, "deps.sh --tests misses %r", missing)
    check("npm:" in test_pkgs and "tests/browser" in test_pkgs and "tests/mcp" in test_pkgs,
          "deps.sh --tests does not install the npm test modules: %r", test_pkgs)
    for p in _deps_list():
        check(p in test_pkgs, "deps.sh --tests lacks %s, which running needs", p)
    calls = _deps_calls(_make_n("fuzz"))
    check(["--fuzz"] in calls, "make fuzz does not install clang: %r", calls)
    check("clang" in _deps_list("--fuzz"), "deps.sh --fuzz without clang")


if __name__ == "__main__":
    if subprocess.run(["which", "make"], stdout=subprocess.PIPE).returncode != 0:
        skip("no make on this machine")
    run_tests(globals())
