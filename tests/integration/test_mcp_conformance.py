#!/usr/bin/python3
"""The official MCP conformance suite (@modelcontextprotocol/conformance,
pinned with the Node 22 it needs in tests/mcp-conformance) against
switchboard's MCP client: `switchboard mcp probe` through
tests/mcp-conformance/client.sh. Every client scenario of the suite runs;
the test holds the result of each against the lists below:

  PASS         must pass (a check that fails is a regression);
  VACUOUS      passes only because of what the client lacks: reported
               apart, never counted as passed; still must pass;
  UNSUPPORTED  not yet supported, each with the reason: reported as
               such; one that starts passing fails the test, so that the
               lists stay true (move it to PASS).

A scenario the suite has and the lists do not name fails the test too.
Skips when the suite is not installed (scripts/deps.sh --tests).
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import ROOT, SB_BIN, check, run, run_tests, skip, tmpdir  # noqa: E402

DIR = os.path.join(ROOT, "tests", "mcp-conformance")
NODE = os.path.join(DIR, "node_modules", ".bin", "node")
SUITE = os.path.join(DIR, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
CLIENT = os.path.join(DIR, "client.sh")

PASS = ["initialize", "tools_call", "sse-retry", "elicitation-sep1034-client-defaults"] + ["auth/" + _name for _name in (
    "metadata-default", "metadata-var1", "metadata-var2", "metadata-var3", "basic-cimd",
    "scope-from-www-authenticate", "scope-from-scopes-supported", "scope-omitted-when-undefined",
    "scope-step-up", "scope-retry-limit", "token-endpoint-auth-basic", "token-endpoint-auth-post",
    "token-endpoint-auth-none", "pre-registration", "2025-03-26-oauth-metadata-backcompat",
    "2025-03-26-oauth-endpoint-fallback", "offline-access-scope", "offline-access-not-supported",
    "client-credentials-jwt", "client-credentials-basic", "resource-mismatch", "cross-app-access-complete-flow")]

VACUOUS = {}

UNSUPPORTED = {}


def scenario_results(out_dir):
    """{scenario: [check, ...]} from the suite's results folder, where each
    scenario's checks.json is in NAME-TIMESTAMP/ (auth/NAME-TIMESTAMP/)."""
    found = {}
    for dirpath, dirs, files in os.walk(out_dir):
        if "checks.json" not in files:
            continue
        rel = os.path.relpath(dirpath, out_dir)
        name = re.sub(r"-\d{4}-\d\d-\d\dT[\d-]+Z$", "", rel)
        with open(os.path.join(dirpath, "checks.json")) as f:
            found[name] = json.load(f)
    return found


def sanitizer_reports(out_dir):
    """The scenarios whose client (under make asan) reported to stderr."""
    bad = []
    for dirpath, dirs, files in os.walk(out_dir):
        if "stderr.txt" in files:
            with open(os.path.join(dirpath, "stderr.txt"), errors="replace") as f:
                text = f.read()
            if "Sanitizer" in text or "runtime error:" in text:
                bad.append(os.path.relpath(dirpath, out_dir))
    return bad


def verdict(checks):
    """'pass' when some check succeeded and none failed, else 'fail' with
    the first failure's message."""
    failed = [c for c in checks if c.get("status") == "FAILURE"]
    if failed:
        c = failed[0]
        return "fail", "%s: %s" % (c.get("id"), c.get("errorMessage") or c.get("description"))
    if not any(c.get("status") == "SUCCESS" for c in checks):
        return "fail", "no check succeeded"
    return "pass", ""


def test_the_client_scenarios_of_the_conformance_suite():
    if not (os.access(NODE, os.X_OK) and os.path.exists(SUITE)):
        skip("the MCP conformance suite is not installed in tests/mcp-conformance (scripts/deps.sh --tests)")
    out = tmpdir()
    env = {"PATH": os.path.dirname(NODE) + ":" + os.environ.get("PATH", ""), "SB_BIN": SB_BIN}
    rc, stdout, stderr = run([NODE, SUITE, "client", "--command", CLIENT, "--suite", "all", "--timeout", "20000",
                              "-o", out], timeout=110, env=env)
    results = scenario_results(out)
    check(results, "the suite wrote no results (exit %d):\n%s\n%s", rc, stdout[-1500:], stderr[-1500:])
    reports = sanitizer_reports(out)
    check(not reports, "the client under test reported sanitizer errors in: %s", reports)
    verdicts = {name: verdict(checks) for name, checks in results.items()}
    unknown = sorted(set(verdicts) - set(PASS) - set(VACUOUS) - set(UNSUPPORTED))
    check(not unknown, "scenarios the test does not list (add each to PASS or UNSUPPORTED): %s", unknown)
    missing = sorted((set(PASS) | set(VACUOUS)) - set(verdicts))
    check(not missing, "scenarios the suite did not run: %s", missing)
    for name in sorted(verdicts):
        v, why = verdicts[name]
        label = ("passed" if v == "pass" else "FAILED") if name in PASS \
            else ("passes vacuously" if v == "pass" else "FAILED") if name in VACUOUS \
            else ("not yet supported" if v == "fail" else "NOW PASSES")
        reason = why if v == "fail" and name not in UNSUPPORTED else UNSUPPORTED.get(name, VACUOUS.get(name, ""))
        print("  %-44s %-18s %s" % (name, label, reason[:110]))
    broken = [n for n in PASS + list(VACUOUS) if verdicts[n][0] != "pass"]
    check(not broken, "scenarios that must pass failed: %s",
          "; ".join("%s (%s)" % (n, verdicts[n][1]) for n in broken))
    fixed = sorted(n for n in UNSUPPORTED if n in verdicts and verdicts[n][0] == "pass")
    check(not fixed, "listed as not yet supported, yet they pass (move them to PASS): %s", fixed)
    print("  figure: passed: %d scenarios; passes vacuously: %d; not yet supported: %d scenarios"
          % (len(PASS), len(VACUOUS), len([n for n in UNSUPPORTED if n in verdicts])))


if __name__ == "__main__":
    run_tests(globals())
