#!/usr/bin/python3
"""`switchboard chat` in a pseudo-terminal, as a person types (issue 10, "The
terminal"; docs/approvals.md).

  - a prompt streams its run; an approval appears inline with the command;
    `y` approves it at once (one key, no Enter), `f` then words rejects it with feedback, one resolved
    elsewhere leaves the prompt and says who answered;
  - (test_chat_approvals.py: the same with a real run that asks before a
    write_file;)
  - Ctrl-C cancels the running run, a second Ctrl-C leaves (130); Ctrl-D
    leaves (0);
  - attached to a session whose run is going, it shows the run from its
    start, then live, each entry once;
  - with no SESSION it opens one on the current folder with `sessions new`'s
    options; usage errors exit 2.
"""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import SB_BIN, check, cli, run_tests, tmpdir, wait_for  # noqa: E402
from sbagent import LLM, Term, ask_approval, call, interaction, llm_server, new_session, tape, wait_run  # noqa: E402


def test_approvals_inline_answers_and_resolved_elsewhere():
    llm = LLM()
    llm.script("inline", [
        # the run must still be going when the test's Ctrl-C cancels it,
        # however slowly the steps before it run: the sleep outlasts them
        {"text": "starting", "tool_calls": [{"name": "shell", "arguments": {"command": "sleep 600"},
                                             "call_id": "c_sleep"}]},
        {"text": "all done"}])
    srv = llm_server(llm, "inline")
    sid = new_session(srv, tmpdir(), approval_policy="yolo")
    t = Term(srv, sid)
    try:
        t.expect(r"> ")
        t.type("please work\r")
        t.expect(r"starting")
        t.expect(r"shell")
        run_id = call(srv, "run.list", {"session_id": sid})["runs"][0]["run_id"]
        # a question appears inline with its command; y approves it
        one = ask_approval(srv, sid, run_id, "c1", "make install")
        t.expect(r"approval needed\s+%s" % one)
        t.expect(r"\$ make install")
        t.expect(r"\[y\]es / \[n\]o / \[a\]lways / \[s\]ession / \[f\]eedback > ")
        t.type("y")
        t.expect(r"approved %s \(once\)" % one)
        got = interaction(srv, one)
        check(got["status"] == "approved" and got["resolved_by"].startswith("chat:") and "@" in got["resolved_by"],
              "approved %r", got)
        # f, then the words: a rejection with feedback
        two = ask_approval(srv, sid, run_id, "c2", "rm -rf /tmp/x")
        t.expect(r"approval needed\s+%s" % two)
        t.type("f")
        t.expect(r"feedback for the model > ")
        t.type("use the build folder instead\r")
        t.expect(r"rejected %s \(once\): use the build folder instead" % two)
        got = interaction(srv, two)
        check(got["status"] == "rejected" and got["feedback"] == "use the build folder instead", "rejected %r", got)
        # n alone, and s (session scope): one key each
        three = ask_approval(srv, sid, run_id, "c3", "curl example.com")
        t.expect(r"approval needed\s+%s" % three)
        t.type("n")
        t.expect(r"rejected %s \(once\)" % three)
        four = ask_approval(srv, sid, run_id, "c4", "make test")
        t.expect(r"approval needed\s+%s" % four)
        t.type("s")
        t.expect(r"approved %s \(session\)" % four)
        # a key that is no answer says which are
        five = ask_approval(srv, sid, run_id, "c5", "git push")
        t.expect(r"approval needed\s+%s" % five)
        t.type("x")
        t.expect(r"press y \(approve\)")
        # resolved elsewhere: the question goes, and says who
        rc, out, err = cli(srv, "resolve", five, "--reject", "--feedback", "not today")
        check(rc == 0, "resolve: %d %s %s", rc, out, err)
        m = t.expect(r"resolved elsewhere: %s rejected by (cli:\S+): not today" % five)
        check(m.group(1) == interaction(srv, five)["resolved_by"], "named %r", m.group(1))
        t.expect(r"queue> ")
        # Ctrl-C cancels the run, a second Ctrl-C leaves
        t.type(b"\x03")
        t.expect(r"cancelling run %s" % run_id)
        wait_run(srv, run_id, ("cancelled",), timeout=15)
        t.expect(r"run %s cancelled" % run_id)
        t.type(b"\x03")
        check(t.wait_exit() == 130, "exit %r", t.code)
        # every question reached the tape once, every answer once
        ents = tape(srv, sid)
        req = [e["body"]["interaction_id"] for e in ents if e["kind"] == "approval.requested"]
        res = [e["body"]["interaction_id"] for e in ents if e["kind"] == "approval.resolved"]
        check(sorted(req) == sorted([one, two, three, four, five]) and sorted(res) == sorted(req),
              "tape %r %r", req, res)
        check(t.text().count("approval needed") == 5, "questions shown %d times", t.text().count("approval needed"))
    finally:
        t.kill()
        srv.stop()
        llm.stop()


def test_attach_mid_run_shows_it_from_its_start_once():
    llm = LLM()
    llm.script("attach", [
        {"text": "first words before the tool", "tool_calls": [
            {"name": "shell", "arguments": {"command": "echo marker-$((40+2))"}, "call_id": "c1"}]},
        {"text": "the end of the run"}])
    srv = llm_server(llm, "attach")
    ws = tmpdir()
    sid = new_session(srv, ws, approval_policy="yolo")
    # an earlier run: not shown when attaching to the next one
    rc, out, err = cli(srv, "prompt", sid, "an older prompt")
    check(rc == 0, "prompt: %s %s", out, err)
    old_run = json.loads(cli(srv, "run-info", "last", "--json")[1])["run_id"]
    wait_run(srv, old_run)
    # The tool waits for a file the test makes once the chat is attached:
    # a fixed sleep could end before a slow chat attaches, and the run
    # would no longer be going.
    gate = os.path.join(ws, "attached")
    llm.script("attach", [
        {"text": "first words before the tool", "tool_calls": [
            {"name": "shell", "arguments": {"command": "echo marker-$((40+2)); "
                                                       "while [ ! -e %s ]; do sleep 0.05; done" % gate},
             "call_id": "c1"}]},
        {"text": "the end of the run"}])
    rc, out, err = cli(srv, "prompt", sid, "the running prompt")
    run_id = json.loads(cli(srv, "run-info", "last", "--json")[1])["run_id"]
    wait_for(lambda: any(e["kind"] == "tool.call" for e in tape(srv, sid) if e.get("run_id") == run_id), 15,
             "the tool to start")
    t = Term(srv, "last")
    try:
        t.expect(r"A run is going")
        t.expect(r"> the running prompt")
        t.expect(r"first words before the tool")
        # attached: the rest of the run comes live
        with open(gate, "w"):
            pass
        t.expect(r"marker-42")
        t.expect(r"the end of the run")
        t.expect(r"run %s completed" % run_id)
        t.expect(r"\n> ")
        text = t.text()
        for s in ("the running prompt", "first words before the tool", "marker-42", "the end of the run"):
            check(text.count(s) == 1, "%r shown %d times:\n%s", s, text.count(s), text)
        check("an older prompt" not in text, "the older run was shown:\n%s", text)
        t.type(b"\x04")
        check(t.wait_exit() == 0, "Ctrl-D exit %r", t.code)
    finally:
        t.kill()
        srv.stop()
        llm.stop()


def test_new_session_on_the_current_folder_and_usage():
    llm = LLM()
    llm.script("new", [{"text": "hello from the model"}])
    srv = llm_server(llm, "new")
    ws = tmpdir()
    t = Term(srv, "--approval", "yolo", "--title", "from chat", cwd=ws)
    try:
        t.expect(r"session (\w{26}) · %s · approval yolo" % re.escape(os.path.realpath(ws)))
        t.type("hi\r")
        t.expect(r"hello from the model")
        t.expect(r"completed")
        t.type(b"\x03")
        t.expect(r"\(Ctrl-C again or Ctrl-D to leave\)")
        t.type("/exit\r")
        check(t.wait_exit() == 0, "/exit %r", t.code)
        s = call(srv, "session.list", {})["sessions"][0]
        check(s["workspace"] == os.path.realpath(ws) and s["title"] == "from chat"
              and s["approval_policy"] == "yolo", "session %r", s)
    finally:
        t.kill()
    sid = call(srv, "session.list", {})["sessions"][0]["session_id"]
    # without a terminal: lines from a pipe, output as it comes, and the
    # end of the pipe leaves once the run it started has ended
    llm.script("new", [{"text": "piped answer"}])
    p = subprocess.run([SB_BIN, "chat", sid, "--data", srv.data], input=b"from a pipe\n",
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    rc, out, err = p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    check(rc == 0 and "piped answer" in out and "completed" in out and "\x1b" not in out,
          "chat in a pipe: %d %r %r", rc, out, err)
    for args in (["--bogus"], [sid, "--model", "x"], [sid, sid], ["--approval", "sometimes"],
                 ["--max-steps", "0"], ["not-an-id!"]):
        rc, out, err = cli(srv, "chat", *args)
        check(rc == 2, "chat %r exited %d: %s %s", args, rc, out, err)
    rc, out, err = cli(srv, "chat", "--help")
    check(rc == 0 and out.startswith("usage: switchboard chat") and "[y]" not in out and "f  reject" in out,
          "--help: %d %s", rc, out)
    rc, out, err = cli(srv, "chat", "7ZZZZZZZ")
    check(rc == 1, "unknown session: %d %s %s", rc, out, err)
    srv.stop()
    llm.stop()


if __name__ == "__main__":
    run_tests(globals())
