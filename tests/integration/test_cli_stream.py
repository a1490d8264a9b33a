#!/usr/bin/python3
"""Readable streams (issue 8, section 3): how `prompt --follow`, `run` and
`events --text` show a session's tape to people.

  - `events --text` prints the transcript with deltas merged, thinking
    marked "thinking:", tool results as head and tail around a
    "… N lines …" marker, refusals with their policy and fix, and a line
    when every change of a run was refused; checked exactly, on a tape
    built with session.append; the raw tape stays the default;
  - a pipe or NO_COLOR gets no escape codes, a terminal (a pty) gets them;
  - a long tool call shows a status line with its elapsed seconds on a
    terminal, cleared when the result arrives, and nothing of it on a pipe;
  - `prompt --follow` over a scripted model: thinking, text, a 30-line
    result (exact, but for the durations);
  - Ctrl-C in `prompt --follow` detaches, leaves the run going and says
    how to re-attach in its last line (exit 130);
  - a run whose every write is refused says so in its last line, with
    the fix (the tool.result contract: refused, policy, fix, mutating).
"""
import errno
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import SB_BIN, Proc, Server, check, new_id, run_tests, sb, tmpdir, wait_for  # noqa: E402
from sbagent import LLM, call, get_run, llm_server, new_session, wait_run  # noqa: E402

ESC = "\x1b"


def run_pty(argv, env=None, timeout=60):
    """Runs argv with its stdout and stderr on a pseudo-terminal: (exit
    code, everything written, as text with the pty's \\r\\n kept)."""
    master, slave = pty.openpty()
    full_env = dict(os.environ)
    full_env.pop("NO_COLOR", None)
    full_env["TERM"] = "xterm"
    full_env.update(env or {})
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=full_env)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + timeout
    exited = False
    while time.monotonic() < deadline:
        r, _, _ = select.select([master], [], [], 0.2)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError as e:            # EIO: the child closed the pty
                if e.errno != errno.EIO:
                    raise
                chunk = b""
            if not chunk:
                break
            out += chunk
        elif exited:
            break
        else:
            # It may have written its last lines and exited after the
            # select above: one more select, with it gone, reads them.
            exited = p.poll() is not None
    os.close(master)
    try:
        rc = p.wait(timeout=max(1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        rc = None
    return rc, out.decode("utf-8", "replace")


def append(server, sid, kind, body, run_id=None):
    req = {"session_id": sid, "kind": kind, "body": body}
    if run_id:
        req["run_id"] = run_id
    return call(server, "session.append", req)["seq"]


def build_tape(server, ws):
    """A session whose tape holds one run of every kind the transcript
    shows; returns (session id, run id)."""
    sid = new_session(server, ws, approval_policy="auto")
    rid = new_id()
    append(server, sid, "prompt", {"text": "tidy up\nplease"}, rid)
    append(server, sid, "run.status", {"run_id": rid, "status": "queued"}, rid)
    append(server, sid, "run.status", {"run_id": rid, "status": "running"}, rid)
    append(server, sid, "turn.begin", {}, rid)
    append(server, sid, "thinking.delta", {"text": "Let me "}, rid)
    append(server, sid, "thinking.delta", {"text": "look first."}, rid)
    append(server, sid, "text.delta", {"text": "Listing "}, rid)
    append(server, sid, "text.delta", {"text": "the files."}, rid)
    append(server, sid, "text.done", {"text": "Listing the files."}, rid)
    append(server, sid, "tool.call", {"call_id": "c1", "name": "shell",
                                      "arguments": json.dumps({"command": "seq 1 25"})}, rid)
    append(server, sid, "tool.output", {"call_id": "c1", "text": "1\n2\n"}, rid)
    out = "".join("%d\n" % i for i in range(1, 26))
    append(server, sid, "tool.result", {"call_id": "c1", "ok": True, "output": out, "exit_code": 0,
                                        "duration_ms": 12, "mutating": True, "refused": False}, rid)
    append(server, sid, "tool.call", {"call_id": "c2", "name": "write_file",
                                      "arguments": json.dumps({"path": "a.txt", "content": "x"})}, rid)
    fix = "switchboard sessions update %s --approval yolo" % sid
    append(server, sid, "tool.result", {"call_id": "c2", "ok": False, "duration_ms": 0,
                                        "output": "not run: the approval policy 'auto' allows only read-only tools",
                                        "refused": True, "policy": "auto", "fix": fix, "mutating": True}, rid)
    append(server, sid, "tool.call", {"call_id": "c3", "name": "read_file",
                                      "arguments": json.dumps({"path": "b.txt"}, indent=1)}, rid)
    append(server, sid, "tool.result", {"call_id": "c3", "ok": True, "output": "one line\x1b[31m red\x07\n",
                                        "duration_ms": 1, "mutating": False, "refused": False}, rid)
    # two calls, then their results: each result names its tool
    append(server, sid, "tool.call", {"call_id": "c4", "name": "list_dir", "arguments": '{"path": "."}'}, rid)
    append(server, sid, "tool.call", {"call_id": "c5", "name": "grep", "arguments": '{"pattern": "x"}'}, rid)
    append(server, sid, "tool.result", {"call_id": "c4", "ok": True, "duration_ms": 2,
                                        "output": "a.txt\n" + "é" * 130 + "\n"}, rid)
    append(server, sid, "tool.result", {"call_id": "c5", "ok": True, "output": "", "duration_ms": 3}, rid)
    append(server, sid, "usage", {"input_tokens": 10, "output_tokens": 2}, rid)
    append(server, sid, "error", {"code": "unavailable", "message": "the model is busy"}, rid)
    append(server, sid, "turn.end", {}, rid)
    append(server, sid, "run.status", {"run_id": rid, "status": "completed", "reason": "end"}, rid)
    return sid, rid


def expected_text(sid, rid, ws):
    fix = "switchboard sessions update %s --approval yolo" % sid
    return "\n".join([
        "[session created: workspace %s, approval auto]" % ws,
        "> tidy up",
        "please",
        "[run %s queued]" % rid,
        "[run %s running]" % rid,
        "thinking: Let me look first.",
        "Listing the files.",
        '→ shell {"command": "seq 1 25"}',
        "  ← ok, exit 0, 12 ms",
        "    1", "    2", "    3", "    4", "    5",
        "    … 15 lines …",
        "    21", "    22", "    23", "    24", "    25",
        '→ write_file {"path": "a.txt", "content": "x"}',
        "  ← refused by the approval policy 'auto'",
        "    not run: the approval policy 'auto' allows only read-only tools",
        "    allow it: " + fix,
        '→ read_file {  "path": "b.txt" }',     # on one line
        "  ← ok, 1 ms",
        "    one line?[31m red?",
        '→ list_dir {"path": "."}',
        '→ grep {"pattern": "x"}',
        "  ← list_dir: ok, 2 ms",
        "    a.txt",
        "    " + "é" * 120 + "…",      # cut at 240 bytes, on a character
        "  ← grep: ok, 3 ms, no output",
        "error: unavailable: the model is busy",
        "[run %s completed: end]" % rid,
        # the shell call counts as mutating but was not refused: not every
        # change was refused, so no closing refusal line here
    ]) + "\n"


# ---------------------------------------------------------------------------

def test_events_text_transcript_exact():
    server = Server().start()
    ws = os.path.realpath(tmpdir())
    sid, rid = build_tape(server, ws)
    rc, out, err = sb("events", "--session", sid, "--text", "--data", server.data)
    check(rc == 0, "events --text: %d %s", rc, err)
    want = expected_text(sid, rid, ws)
    check(out == want, "events --text printed:\n%s\nwant:\n%s", out, want)
    check(ESC not in out and "\r" not in out, "escape codes on a pipe: %r", out)

    # the raw tape stays the default: one line per entry, kinds named
    rc, out, err = sb("events", "--session", sid, "--data", server.data)
    check(rc == 0, "events: %d %s", rc, err)
    lines = out.splitlines()
    check(len(lines) == 25, "raw tape has %d lines:\n%s", len(lines), out)
    check(sum(" text.delta " in ln for ln in lines) == 2, "raw tape lost its deltas:\n%s", out)
    rc, _, err = sb("events", "--session", sid, "--text", "--json", "--data", server.data)
    check(rc == 2, "--text with --json exited %d", rc)


def test_events_text_every_change_refused_line():
    server = Server().start()
    ws = tmpdir()
    sid = new_session(server, ws, approval_policy="auto")
    fix = "switchboard sessions update %s --approval yolo" % sid
    for k in range(2):
        rid = new_id()
        append(server, sid, "run.status", {"run_id": rid, "status": "running"}, rid)
        append(server, sid, "tool.call", {"call_id": "w", "name": "write_file", "arguments": "{}"}, rid)
        append(server, sid, "tool.result", {"call_id": "w", "ok": False, "output": "not run", "refused": True,
                                            "policy": "auto", "fix": fix, "mutating": True}, rid)
        # the second run also reads, which is not a change
        if k == 1:
            append(server, sid, "tool.result", {"call_id": "r", "ok": True, "output": "", "mutating": False},
                   rid)
        append(server, sid, "run.status", {"run_id": rid, "status": "completed"}, rid)
    rc, out, err = sb("events", "--session", sid, "--text", "--data", server.data)
    check(rc == 0, "events --text: %d %s", rc, err)
    note = ("every change this run tried (1) was refused by the approval policy 'auto'; "
            "to allow changes: " + fix)
    check(out.count(note) == 2, "want the refusal line after each run:\n%s", out)
    lines = out.splitlines()
    check(lines[-1] == note and lines[-2].endswith("completed]"), "refusal line not after the run:\n%s", out)


def test_events_text_color_only_on_a_terminal():
    server = Server().start()
    ws = os.path.realpath(tmpdir())
    sid, rid = build_tape(server, ws)
    argv = [SB_BIN, "events", "--session", sid, "--text", "--data", server.data]
    rc, out = run_pty(argv)
    check(rc == 0 and ESC + "[1m> tidy up" in out and ESC + "[2mthinking: " in out,
          "a terminal gets no attributes: %r", out)
    # no tool output reaches the terminal raw
    check(ESC + "[31m" not in out and "\x07" not in out, "tool output drove the terminal: %r", out)
    rc, out = run_pty(argv, env={"NO_COLOR": "1"})
    check(rc == 0 and ESC not in out, "NO_COLOR still got escape codes: %r", out)
    check(out.replace("\r\n", "\n") == expected_text(sid, rid, ws), "NO_COLOR text differs:\n%s", out)


def test_events_text_result_line_limits():
    server = Server().start()
    sid = new_session(server, tmpdir())
    rid = new_id()
    outputs = {
        "ten": "".join("l%d\n" % i for i in range(1, 11)),
        "eleven": "".join("l%d\n" % i for i in range(1, 12)),
        "crlf": "a\r\nb\r\n\r\n",
        "blank": "\n\n",
    }
    for name, out in outputs.items():
        append(server, sid, "tool.call", {"call_id": name, "name": "shell", "arguments": "{}"}, rid)
        append(server, sid, "tool.result", {"call_id": name, "ok": True, "output": out, "duration_ms": 1}, rid)
    rc, out, err = sb("events", "--session", sid, "--after", "1", "--text", "--data", server.data)
    check(rc == 0, "events --text: %d %s", rc, err)
    call = "→ shell {}\n  ← ok, 1 ms\n"
    want = (call + "".join("    l%d\n" % i for i in range(1, 11))
            + call + "".join("    l%d\n" % i for i in range(1, 6)) + "    … 1 line …\n"
            + "".join("    l%d\n" % i for i in range(7, 12))
            + call + "    a\n    b\n"
            + "→ shell {}\n  ← ok, 1 ms, no output\n")
    check(out == want, "events --text printed:\n%s\nwant:\n%s", out, want)


def thinking_turns():
    return [
        {"reasoning": "Counting is easy", "tool_calls": [
            {"name": "shell", "arguments": {"command": "seq 1 30"}, "call_id": "call_seq"}],
         "usage": {"input_tokens": 5, "output_tokens": 3}},
        {"text": "All 30 printed.", "usage": {"input_tokens": 9, "output_tokens": 4}},
    ]


def test_prompt_follow_plain_output():
    llm = LLM()
    llm.script("plain", thinking_turns())
    server = llm_server(llm, "plain")
    sid = new_session(server, tmpdir(), approval_policy="yolo")
    rc, out, err = sb("prompt", sid, "count to 30", "--follow", "--data", server.data, timeout=60)
    check(rc == 0, "prompt --follow: %d\n%s\n%s", rc, out, err)
    check(ESC not in out and "\r" not in out, "escape codes or a status line on a pipe: %r", out)
    norm = re.sub(r"\d+ ms", "N ms", out)
    norm = re.sub(r"\d+\.\d s\n", "S s\n", norm)
    # whether the run is seen "claimed" before "running" depends on timing
    norm = re.sub(r"\[run \w+ claimed\]\n", "", norm)
    rid = get_run_id(server, sid)
    want = "\n".join([
        "> count to 30",
        "[run %s queued]" % rid,
        "[run %s running]" % rid,
        "thinking: Counting is easy",
        '→ shell {"command":"seq 1 30"}',
        "  ← ok, exit 0, N ms",
        "    1", "    2", "    3", "    4", "    5",
        "    … 20 lines …",
        "    26", "    27", "    28", "    29", "    30",
        "All 30 printed.",
        "[run %s completed: end]" % rid,
        "run %s completed · steps 2 · tokens 14 in / 7 out · S s" % rid,
    ]) + "\n"
    check(norm == want, "prompt --follow printed:\n%s\nwant:\n%s", norm, want)


def get_run_id(server, sid):
    return call(server, "session.get", {"session_id": sid})["session"]["last_run_id"]


def sleepy_turns(seconds, call_id="call_sleep"):
    # distinct call ids: these tests are not about repeated ids
    return [
        {"tool_calls": [{"name": "shell", "arguments": {"command": "sleep %s; echo woke" % seconds},
                         "call_id": call_id}]},
        {"text": "rested"},
    ]


def test_long_tool_status_line_on_a_terminal_only():
    llm = LLM()
    llm.script("sleepy", sleepy_turns(3.5, "call_a"))
    server = llm_server(llm, "sleepy")
    sid = new_session(server, tmpdir(), approval_policy="yolo")
    rc, out = run_pty([SB_BIN, "prompt", sid, "rest", "--follow", "--data", server.data])
    check(rc == 0, "prompt --follow on a pty: %s\n%s", rc, out)
    # redrawn each second, in place, with what runs; then cleared
    check("\r" + ESC + "[2m  … shell: sleep 3.5; echo woke · 1s" in out
          and "· 2s" + ESC + "[0m" + ESC + "[K" in out, "no status line:\n%r", out)
    woke = out.index("  ← ok")
    check(out.rfind("\r" + ESC + "[K", 0, woke) > out.rfind("· 2s", 0, woke),
          "the status line was not cleared before the result:\n%r", out)

    # NO_COLOR: the same status line without escape codes, cleared with spaces
    llm.script("sleepy", sleepy_turns(2.5, "call_b"))
    rc, out = run_pty([SB_BIN, "prompt", sid, "rest again", "--follow", "--data", server.data],
                      env={"NO_COLOR": "1"})
    check(rc == 0 and ESC not in out, "NO_COLOR: %s %r", rc, out)
    line = "  … shell: sleep 2.5; echo woke · 1s"
    check("\r" + line in out and "\r" + " " * len(line) + "\r" in out, "NO_COLOR status line:\n%r", out)

    # a pipe: nothing of it
    llm.script("sleepy", sleepy_turns(1.6, "call_c"))
    rc, out, err = sb("prompt", sid, "and again", "--follow", "--data", server.data, timeout=60)
    check(rc == 0 and "\r" not in out and "…" not in out.split("→ shell")[1].split("← ok")[0],
          "status line on a pipe: %r", out)


def test_prompt_follow_ctrl_c_detaches():
    llm = LLM()
    llm.script("long", sleepy_turns(30))
    server = llm_server(llm, "long")
    sid = new_session(server, tmpdir(), approval_policy="yolo")
    d = tmpdir()
    p = Proc([SB_BIN, "prompt", sid, "wait", "--follow", "--data", server.data], os.path.join(d, "out"))
    wait_for(lambda: "→ shell" in p.log(), 20, "the shell call to stream")
    p.send_signal(signal.SIGINT)
    rc = p.wait(10)
    check(rc == 130, "prompt --follow exited %s after Ctrl-C:\n%s", rc, p.log())
    rid = get_run_id(server, sid)
    last = p.log().strip().splitlines()[-1]
    check(last.startswith("Ctrl-C: detached from run %s, which goes on" % rid)
          and "switchboard events --session %s --after " % sid in last and "--follow --text" in last
          and "switchboard cancel %s" % rid in last, "last line: %r", last)
    check(get_run(server, rid)["status"] == "running", "the run did not go on")
    call(server, "run.cancel", {"run_id": rid})
    wait_run(server, rid)


def test_prompt_follow_every_write_refused():
    """Needs the exec side of the tool.result contract (refused, policy,
    fix, mutating on every tool.result)."""
    llm = LLM()
    llm.script("refuse", [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "new.txt", "content": "x"},
                         "call_id": "c_write"},
                        {"name": "list_dir", "arguments": {"path": "."}, "call_id": "c_list"}]},
        {"text": "could not write"},
    ])
    server = llm_server(llm, "refuse")
    # auto asks a person for the write; nobody answers within 1 s
    sid = new_session(server, tmpdir(), approval_policy="auto", approval_deadline_s=1)
    rc, out, err = sb("prompt", sid, "write", "--follow", "--data", server.data, timeout=60)
    check(rc == 0, "prompt --follow: %d\n%s\n%s", rc, out, err)
    fix = "switchboard sessions update %s --rule 'write_file:new.txt:allow'" % sid
    check("← write_file: refused by the approval policy 'auto'" in out and "allow it: " + fix in out,
          "the refusal does not show its policy and fix:\n%s", out)
    lines = out.strip().splitlines()
    check("· 1 tool refused" in lines[-2], "summary: %r", lines[-2])
    check(lines[-1] == "every change this run tried (1) was refused by the approval policy 'auto'; "
          "to allow changes: " + fix, "last line: %r", lines[-1])


if __name__ == "__main__":
    run_tests(globals())
