#!/usr/bin/python3
"""Usage and cost (docs/usage.md): every model call's usage entry says its
tokens as the provider reported them, the provider, the model and the cost
from a price table; the session actor keeps totals per run, session and
day as the entries are written, which survive a restart and which
session.usage, `switchboard usage` and REST report; a provider that
reports no usage leaves the totals unknown, not 0; rate-limit headers are
recorded on the entry and in llm.info."""
import datetime
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Server, check, cli, run_tests, tmpdir  # noqa: E402
from sbagent import LLM, LLM_ENV, call, new_session, prompt, rest, tape, wait_run  # noqa: E402

# dollars per million tokens; the exact micro-dollars each call costs are
# worked out by hand below (a call is rounded once, half up)
PRICES = {"input": 2.5, "cached_input": 1.25, "output": 10}


def providers(llm, script, kind="responses", model="priced-1", prices=PRICES, url=None):
    d = tmpdir()
    path = os.path.join(d, "providers.json")
    m = {"name": model}
    if prices:
        m["prices"] = prices
    with open(path, "w") as f:
        json.dump({"providers": [{"name": "fx", "kind": kind, "base_url": url or llm.url(script),
                                  "model": model, "models": [m], "key_env": "OPENAI_API_KEY"}]}, f)
    return path


def serve(path, data=None):
    return Server(data=data, args=["--providers", path], env=LLM_ENV).start()


def run_prompt(srv, sid, text):
    rid = prompt(srv, sid, text)
    run = wait_run(srv, rid)
    check(run["status"] == "completed", "run %s: %r", rid, run)
    return rid


def usage(srv, **body):
    return call(srv, "session.usage", body)


def turn(text, inp, out, cached, reasoning):
    return {"text": text, "usage": {"input_tokens": inp, "output_tokens": out,
                                    "cached_tokens": cached, "reasoning_tokens": reasoning}}


# (input, output, cached, reasoning) of each scripted call, and its cost:
# (input - cached) x 2.5 + cached x 1.25 + output x 10, over 1e6, in micro-dollars
CALLS = [(1234, 77, 111, 5), (5000, 321, 4000, 0), (17, 3, 0, 1), (999, 1001, 998, 7)]



def _cost(inp, out, cached):
    pico = (inp - cached) * 2500000 + cached * 1250000 + out * 10000000
    return (pico + 500000) // 1000000


def test_totals_and_cost_exact_over_runs_and_sessions():
    llm = LLM()
    llm.script("tot", [turn("c%d" % i, *c) for i, c in enumerate(CALLS)])
    srv = serve(providers(llm, "tot"))
    try:
        a = new_session(srv, tmpdir())
        b = new_session(srv, tmpdir())
        r1 = run_prompt(srv, a, "one")
        r2 = run_prompt(srv, a, "two")
        r3 = run_prompt(srv, b, "three")
        r4 = run_prompt(srv, b, "four")
        costs = [_cost(i, o, c) for i, o, c, _ in CALLS]
        check(costs[0] == 3716 and costs[2] == 73, "the hand-worked costs: %r", costs)
        # the entries themselves
        ents = [e["body"] for e in tape(srv, a) if e["kind"] == "usage"]
        check(len(ents) == 2, "usage entries of a: %r", ents)
        e0 = ents[0]
        check(e0.get("provider") == "fx" and e0.get("model") == "priced-1" and e0.get("cost_microusd") == costs[0]
              and e0.get("input_tokens") == 1234 and e0.get("cached_tokens") == 111
              and e0.get("reasoning_tokens") == 5 and e0.get("output_tokens") == 77, "the entry: %r", e0)
        ua = usage(srv, session_id=a)
        t = ua["totals"]
        check(t == {"calls": 2, "input_tokens": 1234 + 5000, "output_tokens": 77 + 321,
                    "cached_input_tokens": 111 + 4000, "reasoning_tokens": 5,
                    "cost_microusd": costs[0] + costs[1]}, "session a: %r", ua)
        runs = {r["run_id"]: r["totals"] for r in ua["runs"]}
        check(runs.get(r1, {}).get("cost_microusd") == costs[0] and runs.get(r2, {}).get("input_tokens") == 5000
              and set(runs) == {r1, r2}, "a's runs: %r", ua["runs"])
        ub = usage(srv, session_id=b)
        check(ub["totals"]["calls"] == 2 and ub["totals"]["cost_microusd"] == costs[2] + costs[3]
              and {r["run_id"] for r in ub["runs"]} == {r3, r4}, "session b: %r", ub)
        every = usage(srv)["totals"]
        check(every["calls"] == 4 and every["input_tokens"] == sum(c[0] for c in CALLS)
              and every["cost_microusd"] == sum(costs), "all sessions: %r", every)
        # the CLI, as JSON and as text
        rc, out, err = cli(srv, "usage", a, "--json")
        check(rc == 0, "usage --json: %s %s", out, err)
        j = json.loads(out)
        check(j["calls"] == 2 and j["input_tokens"] == 6234 and j["cached_input_tokens"] == 4111
              and j["cost_usd"] == (costs[0] + costs[1]) / 1e6 and ('"cost_usd":0.%06d,' % (costs[0] + costs[1])) in out,
              "usage --json: %s", out)
        rc, out, err = cli(srv, "usage", a)
        check(rc == 0 and ("cost_usd             0.%06d" % (costs[0] + costs[1])) in out and "input_tokens         6234" in out
              and r1 in out, "usage text:\n%s%s", out, err)
        rc, out, err = cli(srv, "usage", "--json")
        check(rc == 0 and json.loads(out)["calls"] == 4, "usage --json of all: %s %s", out, err)
        # REST
        status, body = rest(srv, "/api/sessions/%s/usage" % b)
        check(status == 200 and body["totals"]["cost_microusd"] == costs[2] + costs[3], "REST: %d %r", status, body)
        status, body = rest(srv, "/api/usage")
        check(status == 200 and body["totals"]["calls"] == 4, "REST all: %d %r", status, body)
    finally:
        srv.stop()
        llm.stop()


def test_since_counts_from_a_day():
    llm = LLM()
    llm.script("since", [turn("x", 10, 20, 0, 0)], repeat_last=True)
    srv = serve(providers(llm, "since"))
    try:
        sid = new_session(srv, tmpdir())
        run_prompt(srv, sid, "one")
        run_prompt(srv, sid, "two")
        other = new_session(srv, tmpdir())
        run_prompt(srv, other, "three")
        today = datetime.datetime.now(datetime.timezone.utc).date()
        u = usage(srv, since=today.isoformat())
        check(u["totals"]["calls"] == 3 and u["days"][0]["totals"]["input_tokens"] == 30, "all since today: %r", u)
        tomorrow = (today + datetime.timedelta(days=1)).isoformat()
        u = usage(srv, session_id=sid, since=today.isoformat())
        check(u["totals"]["calls"] == 2 and u["totals"]["output_tokens"] == 40
              and [d["day"] for d in u["days"]] == [today.isoformat()], "since today: %r", u)
        u = usage(srv, since=tomorrow)
        check(u["totals"] == {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cached_input_tokens": 0,
                              "reasoning_tokens": 0, "cost_microusd": 0} and u["days"] == [], "since tomorrow: %r", u)
        rc, out, err = cli(srv, "usage", sid, "--since", tomorrow, "--json")
        check(rc == 0 and json.loads(out)["calls"] == 0, "usage --since tomorrow: %s %s", out, err)
        rc, out, err = cli(srv, "usage", "--since", today.isoformat())
        check(rc == 0 and "calls                3" in out, "usage --since today:\n%s%s", out, err)
        rc, out, err = cli(srv, "usage", "--since", "2026-13-01")
        check(rc != 0 and "YYYY-MM-DD" in err, "a bad date: %d %s %s", rc, out, err)
    finally:
        srv.stop()
        llm.stop()


def test_a_provider_without_usage_leaves_totals_unknown():
    llm = LLM()
    llm.script("nou", [{"text": "a", "usage": False}, {"text": "b", "usage": False}])
    srv = serve(providers(llm, "nou", kind="chat"))
    try:
        sid = new_session(srv, tmpdir())
        run_prompt(srv, sid, "one")
        run_prompt(srv, sid, "two")
        ents = [e["body"] for e in tape(srv, sid) if e["kind"] == "usage"]
        check(len(ents) == 2 and not any("input_tokens" in e or "cost_microusd" in e for e in ents),
              "the entries: %r", ents)
        t = usage(srv, session_id=sid)["totals"]
        check(t == {"calls": 2}, "totals: %r", t)
        rc, out, err = cli(srv, "usage", sid, "--json")
        j = json.loads(out)
        check(rc == 0 and j["calls"] == 2 and j["input_tokens"] is None and j["cost_usd"] is None,
              "usage --json: %s", out)
        rc, out, err = cli(srv, "usage", sid)
        check(rc == 0 and "input_tokens         unknown" in out and "cost_usd             unknown" in out
              and " 0\n" not in out.split("RUN")[0], "usage text:\n%s", out)
    finally:
        srv.stop()
        llm.stop()


def test_a_model_without_a_price_has_no_cost_and_a_known_one_has_the_table_price():
    llm = LLM()
    llm.script("np", [turn("a", 100, 10, 0, 0)])
    llm.script("tp", [turn("a", 1000000, 1000000, 500000, 0)])
    srv = serve(providers(llm, "np", model="no-such-model", prices=None))
    try:
        sid = new_session(srv, tmpdir())
        run_prompt(srv, sid, "one")
        t = usage(srv, session_id=sid)["totals"]
        check(t.get("input_tokens") == 100 and "cost_microusd" not in t, "unpriced: %r", t)
    finally:
        srv.stop()
    # gpt-4o-mini's list price in the table: 0.15 in, 0.075 cached, 0.60 out
    srv = serve(providers(llm, "tp", model="gpt-4o-mini", prices=None))
    try:
        sid = new_session(srv, tmpdir())
        run_prompt(srv, sid, "one")
        t = usage(srv, session_id=sid)["totals"]
        check(t.get("cost_microusd") == 75000 + 37500 + 600000, "table price: %r", t)
        info = call(srv, "llm.info", {})
        check(info.get("prices") == {"input": 150000, "cached_input": 75000, "output": 600000}, "llm.info: %r", info)
    finally:
        srv.stop()
        llm.stop()


def test_totals_survive_a_restart():
    llm = LLM()
    llm.script("rs", [turn("x", 300, 30, 100, 3)], repeat_last=True)
    path = providers(llm, "rs")
    srv = serve(path)
    data = srv.data
    try:
        sid = new_session(srv, tmpdir())
        rid = run_prompt(srv, sid, "one")
        before = usage(srv, session_id=sid)
    finally:
        srv.stop()
    srv = serve(path, data=data)
    try:
        after = usage(srv, session_id=sid)
        check(after == before and after["totals"]["calls"] == 1 and after["runs"][0]["run_id"] == rid,
              "after a restart: %r, before: %r", after, before)
        run_prompt(srv, sid, "two")
        t = usage(srv, session_id=sid)["totals"]
        check(t["calls"] == 2 and t["input_tokens"] == 600 and t["cost_microusd"] == 2 * _cost(300, 30, 100),
              "after one more run: %r", t)
    finally:
        srv.stop()
        llm.stop()


def test_a_compaction_call_is_priced_and_counted():
    llm = LLM()
    llm.control({"op": "script", "name": "cp", "turns": [turn("one", 100, 10, 0, 0), turn("two", 200, 20, 0, 0)],
                 "no_tools": {"text": "SUMMARY of the older turns", "usage": {"input_tokens": 40, "output_tokens": 12}}})
    # a small window: the first turn is not within the recent context kept
    srv = Server(args=["--providers", providers(llm, "cp"), "--context-window", "4000"], env=LLM_ENV).start()
    try:
        sid = new_session(srv, tmpdir())
        run_prompt(srv, sid, "first " + "a" * 3000)
        run_prompt(srv, sid, "second " + "b" * 3000)
        rc, out, err = cli(srv, "compact", sid, "--json")
        check(rc == 0, "compact exited %d: %s %s", rc, out, err)
        ents = [e["body"] for e in tape(srv, sid) if e["kind"] == "usage"]
        check(len(ents) == 3 and ents[-1].get("cost_microusd") == _cost(40, 12, 0)
              and ents[-1].get("model") == "priced-1", "the entries: %r", ents)
        t = usage(srv, session_id=sid)["totals"]
        check(t["calls"] == 3 and t["input_tokens"] == 340 and t["output_tokens"] == 42
              and t["cost_microusd"] == _cost(100, 10, 0) + _cost(200, 20, 0) + _cost(40, 12, 0), "totals: %r", t)
    finally:
        srv.stop()
        llm.stop()


def test_rate_limit_headers_are_recorded():
    llm = LLM()
    llm.script("rl", [turn("x", 10, 1, 0, 0)])
    url = "http://127.0.0.1:%d/script=rl/ratelimit=42/v1" % llm.port
    srv = serve(providers(llm, "rl", url=url))
    try:
        sid = new_session(srv, tmpdir())
        run_prompt(srv, sid, "one")
        e = [e["body"] for e in tape(srv, sid) if e["kind"] == "usage"][0]
        want = {"ratelimit_requests_limit": 1000, "ratelimit_requests_remaining": 42,
                "ratelimit_tokens_limit": 200000, "ratelimit_tokens_remaining": 4200, "retry_after_s": 7}
        check(all(e.get(k) == v for k, v in want.items()), "the entry: %r", e)
        info = call(srv, "llm.info", {})
        check(info.get("ratelimit") == want and info["providers"][0].get("ratelimit") == want,
              "llm.info: %r", info)
        # and on /metrics, per provider (a second call of the scrape)
        status, text = rest(srv, "/metrics", raw=True)
        lines = [x for x in text.splitlines() if x.startswith("sb_llm_ratelimit{")]
        got = {x.split('field="')[1].split('"')[0]: int(x.rsplit(" ", 1)[1]) for x in lines
               if 'provider="fx"' in x}
        check(status == 200 and got == want and "sb_gateway_http_requests_total" in text, "/metrics: %d %s",
              status, "\n".join(lines) or text[-2000:])
    finally:
        srv.stop()
        llm.stop()


def test_a_bad_price_is_refused_naming_file_and_entry():
    path = providers(None, "x", url="http://127.0.0.1:9/v1", prices={"input": -1, "output": 2})
    d = tmpdir()
    from sbtest import sb  # noqa: E402
    rc, out, err = sb("serve", "--data", d, "--providers", path, timeout=10)
    check(rc != 0 and path in err and "priced-1" in err and "prices.input" in err, "serve: %d %s", rc, err)


if __name__ == "__main__":
    run_tests(globals())
