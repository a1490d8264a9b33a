#!/usr/bin/python3
"""Bounded tape under a tool that prints without end (issue 9, item 2):

  - a shell command printing 20 MB, with the tape's share of one call set to
    64 KiB (SWITCHBOARD_TOOL_OUTPUT_TAPE), leaves at most 64 KiB of
    tool.output text for the call: its head and its tail, and between them
    ONE entry naming how many bytes were elided. The command is still
    drained to its end, and the run completes;
  - with the default (1 MiB) the head, the tail and its pieces are cut
    between characters, never inside one;
  - a session with a small tape quota (SWITCHBOARD_SESSION_QUOTA) refuses
    the append that would pass it with too_large and a message naming the
    quota and how to raise it, and writes a single tape.quota entry however
    many appends are refused; the session's record counts its tape bytes;
  - a run that reaches the quota fails with that reason at once (its
    command is stopped), and its final status still reaches the tape; a
    later run of the full session fails alike, and other sessions' runs
    are not held up;
  - the flags --tool-output-tape and --session-quota are taken by serve.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Server, TestFailure, check, run_tests, sb, tmpdir  # noqa: E402
from sbagent import LLM, LLM_ENV, call, kinds, llm_args, new_session, prompt, results, tape, wait_run  # noqa: E402

CAP = 64 * 1024
OUTPUT = 20 * 1000 * 1000
# What the command prints: HEAD, OUTPUT bytes of "y\n", TAIL.
COMMAND = "printf HEAD; yes | head -c %d; printf TAIL" % OUTPUT
PRINTED = OUTPUT + 8


def serve(llm, script, env=None, args=()):
    e = dict(LLM_ENV)
    e.update(env or {})
    return Server(args=llm_args(llm, script) + list(args), env=e).start()


def output_entries(entries, call_id):
    return [e for e in entries if e["kind"] == "tool.output" and e["body"]["call_id"] == call_id]


def shell_turns(call_id, command):
    return [{"tool_calls": [{"name": "shell", "arguments": {"command": command}, "call_id": call_id}]},
            {"text": "done"}]


def check_bounded_output(entries, call_id, cap):
    outs = output_entries(entries, call_id)
    elisions = [e for e in outs if "elided" in e["body"]]
    kept = [e for e in outs if "elided" not in e["body"]]
    kept_bytes = sum(len(e["body"]["text"].encode()) for e in kept)
    check(kept_bytes <= cap, "%d bytes of tool.output kept on the tape for one call, cap %d "
          "(%d entries)", kept_bytes, cap, len(outs))
    check(len(elisions) == 1, "%d elision entries, want 1", len(elisions))
    el = elisions[0]["body"]
    check(el["elided"] == PRINTED - kept_bytes, "elided %r, want %d (printed %d, kept %d)",
          el["elided"], PRINTED - kept_bytes, PRINTED, kept_bytes)
    check(str(el["elided"]) in el["text"], "the elision entry's text %r names the count", el["text"])
    check(kept[0]["body"]["text"].startswith("HEAD"), "the head is kept: %r", kept[0]["body"]["text"][:16])
    check(kept[-1]["body"]["text"].endswith("TAIL"), "the tail is kept: %r", kept[-1]["body"]["text"][-16:])
    # head, then the elision, then the tail
    pos = outs.index(elisions[0])
    check(0 < pos < len(outs) - 1, "the elision entry sits between head and tail (at %d of %d)",
          pos, len(outs))
    check(kept_bytes >= cap // 2, "only %d bytes kept with a cap of %d", kept_bytes, cap)


def test_tool_output_is_bounded_on_the_tape():
    llm = LLM()
    llm.script("yes", shell_turns("call_yes", COMMAND))
    server = serve(llm, "yes", env={"SWITCHBOARD_TOOL_OUTPUT_TAPE": str(CAP)})
    sid = new_session(server, tmpdir(), approval_policy="yolo")
    run = wait_run(server, prompt(server, sid, "print a lot"), timeout=40)
    check(run["status"] == "completed", "run %r", run)
    entries = tape(server, sid)
    check_bounded_output(entries, "call_yes", CAP)
    res = results(entries)["call_yes"]
    check(res["ok"] and res.get("exit_code") == 0, "the command ran to its end: %r",
          {k: res.get(k) for k in ("ok", "exit_code")})
    server.stop()
    llm.stop()


def test_default_cap_cuts_between_characters():
    # "x", then "é\n" a million times: 3,000,001 bytes, so that with the
    # default 1 MiB the head's end, the tail's start and the tail's 64 KiB
    # pieces all fall inside a two-byte character.
    llm = LLM()
    llm.script("utf8", shell_turns("call_u", "printf x; yes é | head -n 1000000"))
    server = serve(llm, "utf8")
    sid = new_session(server, tmpdir(), approval_policy="yolo")
    run = wait_run(server, prompt(server, sid, "print accents"), timeout=40)
    check(run["status"] == "completed", "run %r", run)
    outs = output_entries(tape(server, sid), "call_u")
    kept = [e["body"]["text"] for e in outs if "elided" not in e["body"]]
    elided = [e["body"]["elided"] for e in outs if "elided" in e["body"]]
    kept_bytes = sum(len(t.encode()) for t in kept)
    check(kept_bytes <= 1 << 20, "%d bytes kept with the default cap of 1 MiB", kept_bytes)
    check(elided == [3000001 - kept_bytes], "elided %r, kept %d of 3000001", elided, kept_bytes)
    check(not any("\ufffd" in t for t in kept), "a character was cut: U+FFFD on the tape")
    joined = "".join(kept)
    check(joined.startswith("xé\n") and joined.endswith("é\n") and set(joined[1:]) == {"é", "\n"},
          "the kept text is whole characters: %r ... %r", joined[:8], joined[-8:])


def test_session_quota_refuses_with_one_tape_quota_entry():
    quota = 16 * 1024
    server = Server(env={"SWITCHBOARD_SESSION_QUOTA": str(quota)}).start()
    sid = new_session(server, tmpdir())
    note = {"text": "n" * 1000}
    refused = []
    for k in range(40):
        m = server.control().request("session.append", {"session_id": sid, "kind": "note", "body": note})
        if m.type == "error":
            refused.append(m.body)
    check(refused, "no append was refused with a quota of %d bytes and 40 KB of notes", quota)
    first = refused[0]
    check(first["code"] == "too_large", "refused with %r", first)
    check(str(quota) in first["message"] and "--session-quota" in first["message"]
          and "SWITCHBOARD_SESSION_QUOTA" in first["message"],
          "the message names the quota and how to raise it: %r", first["message"])
    check(len(refused) >= 20, "only %d of 40 appends refused", len(refused))
    entries = tape(server, sid)
    quotas = [e for e in entries if e["kind"] == "tape.quota"]
    check(len(quotas) == 1, "%d tape.quota entries, want 1: %r", len(quotas), kinds(entries)[-5:])
    q = quotas[0]["body"]
    check(q["quota"] == quota and q["used"] <= quota, "tape.quota body %r", q)
    rec = call(server, "session.get", {"session_id": sid})["session"]
    check(rec.get("tape_bytes", 0) <= quota and rec.get("tape_bytes", 0) > quota - 2000,
          "tape_bytes %r with quota %d", rec.get("tape_bytes"), quota)
    # nobody but the session service writes tape.quota
    m = server.control().request("session.append", {"session_id": sid, "kind": "tape.quota",
                                                     "body": {"quota": 1, "used": 1}})
    check(m.type == "error" and m.body["code"] == "invalid", "a client's tape.quota: %s %r", m.type, m.body)
    # the count survives a restart
    server.stop()
    server.start()
    m = server.control().request("session.append", {"session_id": sid, "kind": "note", "body": note})
    check(m.type == "error" and m.body["code"] == "too_large", "after a restart: %s %r", m.type, m.body)
    check(len([e for e in tape(server, sid) if e["kind"] == "tape.quota"]) == 1, "one tape.quota")
    server.stop()


def test_updates_count_against_the_quota():
    """session.update writes a session.updated entry each time: a client
    updating in a loop must not grow the tape past the quota either."""
    quota = 16 * 1024
    server = Server(env={"SWITCHBOARD_SESSION_QUOTA": str(quota)}).start()
    sid = new_session(server, tmpdir())
    refused = None
    for k in range(200):
        m = server.control().request("session.update", {"session_id": sid, "title": "t%d %s" % (k, "x" * 200)})
        if m.type == "error":
            refused = (k, m.body)
            break
    check(refused is not None, "200 updates were all accepted with a quota of %d", quota)
    check(refused[1]["code"] == "too_large" and "--session-quota" in refused[1]["message"],
          "refused with %r", refused[1])
    size_before = len(tape(server, sid))
    m = server.control().request("session.update", {"session_id": sid, "title": "again"})
    check(m.type == "error" and len(tape(server, sid)) == size_before, "a later update wrote: %s", m.type)
    server.stop()


def test_run_past_the_quota_fails_with_the_reason():
    # `yes` never ends by itself: the run stops it once the tape refuses.
    llm = LLM()
    llm.script("quota", shell_turns("call_q", "yes"))
    server = serve(llm, "quota", env={"SWITCHBOARD_SESSION_QUOTA": str(100 * 1024)})
    sid = new_session(server, tmpdir(), approval_policy="yolo")
    run = wait_run(server, prompt(server, sid, "fill the tape"), timeout=30)
    check(run["status"] == "failed" and "quota" in run.get("reason", ""), "run %r", run)
    entries = tape(server, sid)
    ks = kinds(entries)
    check(ks.count("tape.quota") == 1, "tape.quota entries: %d", ks.count("tape.quota"))
    last = entries[-1]
    check(last["kind"] == "run.status" and last["body"]["status"] == "failed"
          and "quota" in last["body"].get("reason", ""), "the last entry %r", last)
    rec = call(server, "session.get", {"session_id": sid})["session"]
    check(rec["turn_status"] == "idle", "turn_status %r", rec["turn_status"])
    server.stop()
    llm.stop()


def test_a_session_past_its_quota_does_not_hold_up_the_others():
    # The run actor's outbox writes each run's prompt and statuses in order,
    # for every session; a refusal for a full session must not stop it.
    llm = LLM()
    llm.script("full", shell_turns("call_f", "yes | head -c 400000"), repeat_last=True)
    server = serve(llm, "full", env={"SWITCHBOARD_SESSION_QUOTA": str(100 * 1024)})
    full = new_session(server, tmpdir(), approval_policy="yolo")
    run = wait_run(server, prompt(server, full, "fill the tape"), timeout=30)
    check(run["status"] == "failed", "run %r", run)
    again = wait_run(server, prompt(server, full, "x" * 4000), timeout=30)
    again["input"] = again["input"][:20]
    check(again["status"] == "failed" and "quota" in again.get("reason", ""), "a run past the quota: %r", again)
    other = new_session(server, tmpdir(), approval_policy="yolo")
    ok = wait_run(server, prompt(server, other, "say done", limits={"max_steps": 1}), timeout=30)
    entries = tape(server, other)
    check(entries[-1]["kind"] == "run.status" and entries[-1]["body"]["status"] == ok["status"],
          "the other session's tape ends %r, its run is %s", entries[-1], ok["status"])
    rec = call(server, "session.get", {"session_id": full})["session"]
    check(rec["turn_status"] == "idle", "the full session's turn_status %r", rec["turn_status"])
    check(rec["tape_bytes"] <= 100 * 1024 + 64 * 1024, "tape_bytes %d", rec["tape_bytes"])
    server.stop()
    llm.stop()


def test_serve_takes_the_flags():
    llm = LLM()
    llm.script("flags", shell_turns("call_f", COMMAND))
    server = serve(llm, "flags", args=["--tool-output-tape", str(CAP), "--session-quota", "1073741824"])
    sid = new_session(server, tmpdir(), approval_policy="yolo")
    run = wait_run(server, prompt(server, sid, "print a lot"), timeout=40)
    check(run["status"] == "completed", "run %r", run)
    check_bounded_output(tape(server, sid), "call_f", CAP)
    server.stop()
    llm.stop()
    rc, _, err = sb("serve", "--data", tmpdir(), "--tool-output-tape", "lots")
    check(rc == 2 and "--tool-output-tape" in err, "a bad value: %d %r", rc, err)


if __name__ == "__main__":
    try:
        sys.exit(run_tests(globals()))
    except TestFailure as e:
        print(e)
        sys.exit(1)
