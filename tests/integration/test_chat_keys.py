#!/usr/bin/python3
"""`switchboard chat` on a pseudo-terminal, a first day's details (issue 21):

  - at an approval's question one key answers, without Enter (y n a s f),
    and what was typed after it ("yes" typed by habit) answers nothing
    else; /exit and Ctrl-D leave from the question too;
  - a run's queued, claimed and running statuses are one line, and the
    queue's entries are said in words, never as JSON.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import check, cli, run_tests, tmpdir, wait_for  # noqa: E402
from sbagent import LLM, Term, ask_approval, call, interaction, llm_server, new_session  # noqa: E402


def _sleeping_run(name):
    """A server whose model starts a shell that outlasts the test, so that
    the run is going while the test asks and queues."""
    llm = LLM()
    llm.script(name, [
        {"text": "starting", "tool_calls": [{"name": "shell", "arguments": {"command": "sleep 600"},
                                             "call_id": "c_sleep"}]},
        {"text": "all done"}, {"text": "second done"}])
    srv = llm_server(llm, name)
    sid = new_session(srv, tmpdir(), approval_policy="yolo")
    return llm, srv, sid


def _start(srv, sid):
    t = Term(srv, sid)
    t.expect(r"> ")
    t.type("please work\r")
    t.expect(r"starting")
    run_id = wait_for(lambda: (call(srv, "run.list", {"session_id": sid})["runs"] or [{}])[0].get("run_id"),
                      15, "the run")
    return t, run_id


def test_one_key_answers_and_typeahead_answers_nothing_else():
    llm, srv, sid = _sleeping_run("keys")
    t = None
    try:
        t, run_id = _start(srv, sid)
        one = ask_approval(srv, sid, run_id, "k1", "make install")
        t.expect(r"approval needed\s+%s" % one)
        t.expect(r"\[y\]es / \[n\]o / \[a\]lways / \[s\]ession / \[f\]eedback > ")
        # y alone, no Enter: approved at once
        t.type("y")
        t.expect(r"approved %s \(once\)" % one)
        check(interaction(srv, one)["status"] == "approved", "%r", interaction(srv, one))
        # two questions; "yes" typed in one go answers the first only: the
        # 's' after it must not approve the second for the session
        two = ask_approval(srv, sid, run_id, "k2", "make test")
        three = ask_approval(srv, sid, run_id, "k3", "make lint")
        t.expect(r"approval needed\s+%s" % three)
        t.type("yes")
        t.expect(r"approved %s \(once\)" % two)
        t.expect(r"\[f\]eedback > ")
        got = interaction(srv, three)
        check(got["status"] == "pending", "the typeahead answered the next question: %r", got)
        # n alone rejects it
        t.type("n")
        t.expect(r"rejected %s \(once\)" % three)
        check(interaction(srv, three)["status"] == "rejected", "%r", interaction(srv, three))
        # /exit at the question leaves (the run goes on in the server)
        four = ask_approval(srv, sid, run_id, "k4", "make dist")
        t.expect(r"approval needed\s+%s" % four)
        t.expect(r"\[f\]eedback > ")
        t.type("/exit\r")
        check(t.wait_exit() == 0, "exit %r after /exit at the question", t.code)
        check(interaction(srv, four)["status"] == "pending", "/exit answered it: %r", interaction(srv, four))
        t.kill()
        # and Ctrl-D at the question leaves too
        t = Term(srv, sid)
        t.expect(r"approval needed\s+%s" % four)
        t.expect(r"\[f\]eedback > ")
        t.type(b"\x04")
        check(t.wait_exit() == 0, "exit %r after Ctrl-D at the question", t.code)
        check(interaction(srv, four)["status"] == "pending", "Ctrl-D answered it: %r", interaction(srv, four))
    finally:
        if t:
            t.kill()
        srv.stop()
        llm.stop()


def test_run_statuses_fold_into_one_line_and_the_queue_speaks_words():
    llm, srv, sid = _sleeping_run("words")
    t = None
    try:
        t, run_id = _start(srv, sid)
        t.expect(r"queue> ")
        t.type("second task\r")
        t.expect(r"queued \(#1\), to run when this run ends: second task")
        t.type("!look at the README\r")
        t.expect(r"steering: the model reads it before its next step: look at the README")
        screen = t.text()
        # one status line, grown as the statuses come, for this run
        m = re.search(r"\[run %s queued → claimed → running\]" % run_id, screen)
        check(m, "no folded status line for %s:\n%s", run_id, screen[-3000:])
        lone = re.findall(r"^\[run \S+ (?:queued|claimed|running)\]$", screen, re.M)
        check(not lone, "statuses on lines of their own %r:\n%s", lone, screen[-3000:])
        check(not re.search(r"\[(?:prompt|queue)\.\w+\]|\"prompt_id\"|\"mode\"", screen), "a queue entry as JSON:\n%s",
              screen[-3000:])
        t.type(b"\x04")
        check(t.wait_exit() == 0, "exit %r", t.code)
        # the transcript of `events --text` (and `prompt --follow`) says the
        # same entries in words too
        rc, text, err = cli(srv, "events", "--session", sid, "--text", timeout=30)
        check(rc == 0, "events --text exited %d: %s", rc, err)
        check("queued (#1), to run when this run ends: second task" in text, "no queued words:\n%s", text[-3000:])
        check(not re.search(r"\[(?:prompt|queue)\.\w+\]|\"prompt_id\"", text), "a queue entry as JSON:\n%s",
              text[-3000:])
    finally:
        if t:
            t.kill()
        srv.stop()
        llm.stop()


if __name__ == "__main__":
    run_tests(globals())
