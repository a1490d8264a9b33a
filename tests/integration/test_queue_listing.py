#!/usr/bin/python3
"""A full queue can be listed (docs/queue.md, "Listing"): the queue may hold
16 MiB, one reply 2 MiB, so session.queue.list answers a page at a time.

  - a session whose run waits (its pool has no worker) gets two steers and
    17 queued prompts of 960,000 bytes each (16.3 MB); session.queue.list
    answers, with `more` and `next_after`, and following next_after gives
    every steer (first) and every prompt, in order, each once, every page
    under the 2 MiB reply bound;
  - `limit` cuts pages by count (5 at a time) the same way;
  - `switchboard queue SESSION` and `--json` list every page: 17 prompts
    and 2 steers;
  - a small queue's reply is as before: no `more`.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Server, check, cli, run_tests, tmpdir  # noqa: E402
from sbagent import call, new_session  # noqa: E402

BIG = 960000
N = 17


def pages(server, sid, **kw):
    """Every page of the queue: (steer ids, prompt ids, number of pages)."""
    steers, prompts, n, after = [], [], 0, None
    while True:
        body = {"session_id": sid}
        body.update(kw)
        if after is not None:
            body["after"] = after
        m = server.control().request("session.queue.list", body, timeout=15)
        check(m.type == "session.queue.list.ok", "page %d: %s %r", n, m.type, str(m.body)[:300])
        n += 1
        steers += [s["prompt_id"] for s in m.body["steers"]]
        prompts += [p["prompt_id"] for p in m.body["prompts"]]
        check(m.body["steers"] or m.body["prompts"] or not m.body.get("more"), "an empty page with more")
        if not m.body.get("more"):
            return steers, prompts, n
        check(after is None or m.body["next_after"] > after, "the cursor did not move: %r", m.body["next_after"])
        after = m.body["next_after"]
        check(n < 100, "too many pages")


def test_a_full_queue_is_listed_page_by_page():
    server = Server().start()
    try:
        sid = new_session(server, tmpdir(), approval_policy="yolo", target="worker:nobody")
        first = call(server, "session.prompt", {"session_id": sid, "text": "first"})
        check(first.get("run_id"), "the first prompt did not start a run: %r", first)
        small = call(server, "session.queue.list", {"session_id": sid})
        check(small == {"prompts": [], "steers": [], "paused": False}, "an empty queue: %r", small)
        steer_ids = [call(server, "session.prompt", {"session_id": sid, "text": "steer %d" % k, "mode": "steer"})
                     ["prompt_id"] for k in range(2)]
        ids = []
        for k in range(N):
            text = ("%02d" % k) + "q" * (BIG - 2)
            ids.append(call(server, "session.prompt", {"session_id": sid, "text": text, "mode": "queue"},
                            timeout=20)["prompt_id"])
        m = server.control().request("session.queue.list", {"session_id": sid}, timeout=15)
        check(m.type == "session.queue.list.ok", "the first page of a full queue: %s %r", m.type, str(m.body)[:300])
        check(m.body.get("more") is True and isinstance(m.body.get("next_after"), int), "no more: %r",
              {k: v for k, v in m.body.items() if k not in ("prompts", "steers")})
        steers, prompts, n = pages(server, sid)
        check(steers == steer_ids, "steers %r, want %r", steers, steer_ids)
        check(prompts == ids, "prompts over %d pages: %d of %d, in order %s", n, len(prompts), len(ids),
              prompts == sorted(prompts, key=ids.index))
        check(n >= N * BIG // (2 << 20), "only %d pages for %d bytes", n, N * BIG)
        steers, prompts, n = pages(server, sid, limit=5)
        check(steers == steer_ids and prompts == ids, "with limit 5: %d steers, %d prompts", len(steers),
              len(prompts))
        check(n >= (N + 2 + 4) // 5, "limit 5 made %d pages", n)
        # the CLI lists every page
        rc, out, err = cli(server, "queue", sid, "--json")
        check(rc == 0, "queue --json exited %d: %s", rc, err[-500:])
        q = json.loads(out)
        check([p["prompt_id"] for p in q["prompts"]] == ids and [s["prompt_id"] for s in q["steers"]] == steer_ids,
              "queue --json: %d prompts, %d steers", len(q["prompts"]), len(q["steers"]))
        check("more" not in q and "next_after" not in q, "the merged listing has a cursor: %r", list(q))
        rc, out, err = cli(server, "queue", sid)
        check(rc == 0 and ("%d queued" % N) in out.splitlines()[0], "queue: %d %r", rc, out[:300])
        for pid in ids + steer_ids:
            check(pid in out, "queue does not show %s", pid)
        m = server.control().request("session.queue.list", {"session_id": sid, "limit": 0})
        check(m.type == "error" and m.body["code"] == "invalid", "limit 0: %s %r", m.type, m.body)
    finally:
        server.stop()


if __name__ == "__main__":
    run_tests(globals())
