"""REST on the gateway (docs/gateway.md): the conventional routes, the
generic POST /api/call/<type>, JSON errors with the status that fits,
body limits, and /metrics in Prometheus text."""

import json

from sbtest import check, new_id, run_tests, tmpdir, wait_for
from gwtest import Gateway


def test_sessions_runs_and_events():
    gw = Gateway()
    ws = tmpdir()
    status, body = gw.api("POST", "/api/sessions", {"workspace": ws, "title": "rest", "approval_policy": "yolo"})
    check(status == 200 and body["session"]["title"] == "rest", "create: %d %r", status, body)
    sid = body["session"]["session_id"]
    status, body = gw.api("GET", "/api/sessions")
    check(status == 200 and [s["session_id"] for s in body["sessions"]] == [sid], "list: %d %r", status, body)
    status, body = gw.api("GET", "/api/sessions?limit=1&status=active")
    check(status == 200 and len(body["sessions"]) == 1, "list with a query: %d %r", status, body)
    status, body = gw.api("GET", "/api/sessions/" + sid)
    check(status == 200 and body["session"]["session_id"] == sid, "get: %d %r", status, body)
    status, body = gw.api("POST", "/api/sessions/%s/prompt" % sid, {"text": "hello"})
    check(status == 200 and body["run_id"], "prompt: %d %r", status, body)
    run_id = body["run_id"]
    status, body = gw.api("GET", "/api/runs/" + run_id)
    check(status == 200 and body["run"]["run_id"] == run_id, "run: %d %r", status, body)

    def finished():
        s, b = gw.api("GET", "/api/runs/" + run_id)
        return b["run"]["status"] in ("completed", "failed", "cancelled")
    wait_for(finished, 30, "the demo run to finish")
    status, body = gw.api("GET", "/api/runs?session=" + sid)
    check(status == 200 and [r["run_id"] for r in body["runs"]] == [run_id], "runs of the session: %d %r",
          status, body)
    status, body = gw.api("GET", "/api/sessions/%s/events?after=1&limit=2" % sid)
    check(status == 200 and [e["seq"] for e in body["events"]] == [2, 3] and body["more"], "events: %d %r",
          status, body)
    status, body = gw.api("POST", "/api/runs/%s/cancel" % run_id)
    check(status in (200, 409), "cancel of a finished run: %d %r", status, body)
    status, body = gw.api("POST", "/api/call/session.get", {"session_id": sid})
    check(status == 200 and body["session"]["session_id"] == sid, "generic call: %d %r", status, body)
    status, body = gw.api("GET", "/api/models")
    check(status == 200 and "models" in body, "models: %d %r", status, body)


def test_errors_and_statuses():
    gw = Gateway()
    cases = [
        ("GET", "/api/sessions/" + new_id(), None, 404, "not_found"),
        ("GET", "/api/sessions/not-an-id", None, None, None),
        ("GET", "/api/runs/" + new_id(), None, 404, "not_found"),
        ("GET", "/api/nothing", None, 404, "not_found"),
        ("DELETE", "/api/sessions", None, 405, "invalid"),
        ("PUT", "/api/sessions", None, 405, "invalid"),
        ("GET", "/api/sessions/%s/prompt" % new_id(), None, 405, "invalid"),
        ("POST", "/api/sessions", {"title": "no workspace"}, 400, "invalid"),
        ("POST", "/api/sessions", {"workspace": tmpdir(), "colour": "red"}, 400, "invalid"),
        ("POST", "/api/call/session.append", {}, 403, "forbidden"),
        ("POST", "/api/call/no.such", {}, 404, "unknown_type"),
        ("GET", "/api/call/session.list", None, 405, "invalid"),
        ("GET", "/api/sessions?limit=0", None, 400, "invalid"),
        ("GET", "/api/sessions?limit=abc", None, 400, "invalid"),
    ]
    for method, path, body, want, code in cases:
        status, data = gw.api(method, path, body)
        check("error" in data and data["error"]["code"] and data["error"]["message"], "%s %s: %r",
              method, path, data)
        if want:
            check(status == want and data["error"]["code"] == code, "%s %s: %d %r (want %d %s)",
                  method, path, status, data, want, code)
        else:
            check(400 <= status < 500, "%s %s: %d %r", method, path, status, data)
    status, _, data = gw.http("POST", "/api/sessions", raw=b"{not json")
    check(status == 400 and json.loads(data)["error"]["code"] == "invalid", "bad JSON: %d %r", status, data)
    status, _, data = gw.http("POST", "/api/sessions", raw=b"[" * 40 + b"]" * 40)
    check(status == 400, "40 deep: %d %r", status, data)
    status, _, data = gw.http("POST", "/api/sessions", raw=b'{"workspace": "' + b"x" * (1024 * 1024) + b'"}')
    check(status == 413 and json.loads(data)["error"]["code"] == "too_large", "over 1 MiB: %d %r", status, data[:200])
    # the connection limit of HTTP does not leak: many requests in a row
    for _ in range(200):
        status, _ = gw.api("GET", "/api/sessions")
        check(status == 200, "request in a row: %d", status)


def test_metrics():
    gw = Gateway()
    gw.api("GET", "/api/sessions")
    status, h, data = gw.http("GET", "/metrics")
    text = data.decode()
    check(status == 200 and h["content-type"].startswith("text/plain"), "metrics: %d %r", status, h)
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    check(values.get("sb_gateway_http_requests_total", 0) >= 2, "http requests: %r", values)
    check("sb_bus_uptime_ms" in values, "the broker's counters are there: %s", text[-500:])
    check(any(k.startswith("sb_bus_types") for k in values), "per-type counters: %s", list(values)[:40])
    check("# TYPE sb_gateway_ws_connections gauge" in text, "gauge types")


run_tests(globals())
