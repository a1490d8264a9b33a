#!/usr/bin/python3
"""A session's last activity and last prompt (issue 8, "Lists"): what the
session list shows so that sessions on one folder can be told apart.

  - a new session's last_activity_at is its creation, and it has no
    last_prompt;
  - after a prompt and its run (the built-in demo model), session.get
    shows the prompt's first line and the time of the run's last status;
    a later run moves last_activity_at forward;
  - last_prompt skips leading blank lines, stops at the first line break,
    and is cut to 200 bytes on a UTF-8 boundary;
  - entries other than prompts and run statuses leave both alone;
  - both survive a restart (they are written with the entry that moved
    them);
  - session.list is newest first.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Client, Server, check, now_ms, run_tests, tmpdir, wait_for  # noqa: E402

FINAL = ("completed", "failed", "cancelled", "expired", "interrupted")


class Api:
    def __init__(self, server):
        self.cli = Client(server.endpoint("cmd"), name="tape-activity")

    def ok(self, type, body, timeout=10):
        m = self.cli.request(type, body, timeout=timeout)
        check(m.type == type + ".ok", "%s answered %s %r", type, m.type, m.body)
        return m.body

    def create(self, workspace, **kw):
        kw["workspace"] = workspace
        return self.ok("session.create", kw)["session"]

    def get(self, sid):
        return self.ok("session.get", {"session_id": sid})["session"]

    def tape(self, sid):
        out, after = [], 0
        while True:
            page = self.ok("session.events", {"session_id": sid, "after_seq": after, "limit": 5000})
            out.extend(page["events"])
            after = page["next_after"]
            if not page["more"]:
                return out

    def prompt(self, sid, text):
        """Gives the session a prompt and waits for its run to end."""
        run_id = self.ok("session.prompt", {"session_id": sid, "text": text})["run_id"]
        box = {}

        def done():
            box["run"] = self.ok("run.get", {"run_id": run_id})["run"]
            return box["run"]["status"] in FINAL
        wait_for(done, 30, "run %s to end" % run_id, interval=0.02)
        # the session's record follows the run's last status on the tape
        wait_for(lambda: self.get(sid)["turn_status"] == "idle", 10, "the session to be idle")
        return run_id

    def close(self):
        self.cli.close()


def last_ts(tape, *kinds):
    return max(e["ts"] for e in tape if e["kind"] in kinds)


def test_prompt_and_run_move_last_activity():
    server = Server().start()           # the demo model
    api = Api(server)
    ws = tmpdir()
    s = api.create(ws, approval_policy="yolo")
    sid = s["session_id"]
    check(s["last_activity_at"] == s["created_at"], "a new session's last activity: %r", s)
    check("last_prompt" not in s, "a new session has a last prompt: %r", s)

    before = now_ms()
    api.prompt(sid, "look around the workspace\nand say what you see")
    s1 = api.get(sid)
    tape = api.tape(sid)
    check(s1["last_prompt"] == "look around the workspace", "last_prompt: %r", s1.get("last_prompt"))
    check(s1["last_activity_at"] >= before, "last_activity_at %d is before the prompt %d",
          s1["last_activity_at"], before)
    check(s1["last_activity_at"] == last_ts(tape, "prompt", "run.status"),
          "last_activity_at %d is not the last run status's %d", s1["last_activity_at"],
          last_ts(tape, "prompt", "run.status"))

    wait_for(lambda: now_ms() > s1["last_activity_at"], 1, "the clock to move")
    api.prompt(sid, "now list the files")
    s2 = api.get(sid)
    check(s2["last_activity_at"] > s1["last_activity_at"], "a later run did not move last_activity_at: %d, %d",
          s1["last_activity_at"], s2["last_activity_at"])
    check(s2["last_prompt"] == "now list the files", "last_prompt after the second run: %r", s2.get("last_prompt"))
    check(s2["last_activity_at"] == last_ts(api.tape(sid), "prompt", "run.status"),
          "last_activity_at is not the last run status's")

    # the list shows them too, newest session first
    other = api.create(ws)["session_id"]
    rows = api.ok("session.list", {})["sessions"]
    check([r["session_id"] for r in rows] == [other, sid], "list order: %r", [r["session_id"] for r in rows])
    check(rows[1]["last_prompt"] == "now list the files" and rows[1]["last_activity_at"] == s2["last_activity_at"],
          "the list does not carry the activity: %r", rows[1])

    # written with the entries that moved them: a restart keeps them
    api.close()
    server.stop()
    server = Server(data=server.data).start()
    api = Api(server)
    s3 = api.get(sid)
    check(s3["last_prompt"] == s2["last_prompt"] and s3["last_activity_at"] == s2["last_activity_at"],
          "after a restart: %r", s3)
    api.close()
    server.stop()


def test_last_prompt_first_line_cut_on_utf8():
    server = Server().start()
    api = Api(server)
    sid = api.create(tmpdir())["session_id"]
    run = "0" * 26

    def append(*entries):
        return api.ok("session.append", {"session_id": sid, "run_id": run,
                                         "entries": [{"kind": k, "body": b} for k, b in entries]})

    # leading blank lines are skipped; the line stops at \r or \n
    append(("prompt", {"text": "\n \n  fix the login bug\r\nthen run the tests"}),
           ("run.status", {"run_id": run, "status": "queued"}))
    check(api.get(sid)["last_prompt"] == "fix the login bug", "first line: %r", api.get(sid))

    # 3-byte characters: 200 bytes would split the 67th, so 66 are kept
    append(("prompt", {"text": "\u20ac" * 100 + "\nmore"}))
    got = api.get(sid)["last_prompt"]
    check(got == "\u20ac" * 66 and len(got.encode()) == 198, "cut: %d bytes %r", len(got.encode()), got)
    # ASCII is cut at exactly 200 bytes
    append(("prompt", {"text": "a" * 300}))
    check(api.get(sid)["last_prompt"] == "a" * 200, "ascii cut: %r", api.get(sid)["last_prompt"])

    # other entries move neither
    s = api.get(sid)
    wait_for(lambda: now_ms() > s["last_activity_at"], 1, "the clock to move")
    append(("note", {}), ("text.done", {"text": "not a prompt"}))
    s2 = api.get(sid)
    check(s2["last_activity_at"] == s["last_activity_at"] and s2["last_prompt"] == s["last_prompt"],
          "a note moved the activity: %r -> %r", s, s2)
    # a run status alone does
    append(("run.status", {"run_id": run, "status": "completed"}))
    s3 = api.get(sid)
    check(s3["last_activity_at"] > s2["last_activity_at"] and s3["last_prompt"] == s["last_prompt"],
          "run.status: %r -> %r", s2, s3)
    # a prompt of blank lines only leaves no last prompt rather than a stale one
    append(("prompt", {"text": "\n\n"}))
    check("last_prompt" not in api.get(sid), "blank prompt: %r", api.get(sid))
    api.close()
    server.stop()


def test_list_newest_first_in_pages():
    server = Server().start()
    api = Api(server)
    ws = tmpdir()
    ids = [api.create(ws)["session_id"] for _ in range(5)]
    got, cursor = [], None
    while True:
        b = {"limit": 2}
        if cursor:
            b["cursor"] = cursor
        page = api.ok("session.list", b)
        check(len(page["sessions"]) <= 2, "page too long: %r", page)
        got += [s["session_id"] for s in page["sessions"]]
        cursor = page.get("next_cursor")
        if not cursor:
            break
    check(got == ids[::-1], "paged list %r, want %r", got, ids[::-1])
    # an exact page has no next_cursor
    page = api.ok("session.list", {"limit": 5})
    check(len(page["sessions"]) == 5 and "next_cursor" not in page, "exact page: %r", page)
    api.close()
    server.stop()


if __name__ == "__main__":
    run_tests(globals())
