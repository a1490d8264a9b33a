#!/usr/bin/python3
"""Refusals say how to proceed (issue 8): a tool refused by the approval
policy tells the model and the person which policy refused it and the exact
command that changes it.

  - under `auto`, a scripted model calls write_file and read_file: the
    write asks a person, nobody answers within the session's 1 s approval
    deadline, and it is refused: its tool.result carries refused, policy,
    fix (a rule that allows exactly this call) and mutating; the read runs
    and is marked not mutating;
  - the model's tool output names the policy and the command;
  - the command works: run as given, the next prompt's write goes through
    without asking anyone.
"""
import os
import shlex
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import check, run_tests, sb, tmpdir  # noqa: E402
from sbagent import LLM, llm_server, new_session, prompt, results, tape, wait_run  # noqa: E402


def test_a_refused_write_names_the_policy_and_the_fix():
    ws = tmpdir()
    with open(os.path.join(ws, "present.txt"), "w") as f:
        f.write("present\n")
    llm = LLM()
    llm.script("refuse", [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "new.txt", "content": "x"},
                         "call_id": "c_write"},
                        {"name": "read_file", "arguments": {"path": "present.txt"}, "call_id": "c_read"}]},
        {"text": "could not write"},
        # after the fix: the same write again
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "new.txt", "content": "x"},
                         "call_id": "c_write2"}]},
        {"text": "wrote it"},
    ])
    server = llm_server(llm, "refuse")
    sid = new_session(server, ws, approval_policy="auto", approval_deadline_s=1)
    run = wait_run(server, prompt(server, sid, "write new.txt"), timeout=30)
    check(run["status"] == "completed", "run %r", run)

    fix = "switchboard sessions update %s --rule 'write_file:new.txt:allow'" % sid
    res = results(tape(server, sid))
    w = res["c_write"]
    check(w["ok"] is False and w.get("refused") is True, "write_file was not refused: %r", w)
    check(w.get("policy") == "auto", "policy: %r", w)
    check(w.get("fix") == fix, "fix: %r", w.get("fix"))
    check(w.get("mutating") is True, "write_file is not marked mutating: %r", w)
    check("auto" in w["output"] and fix in w["output"], "the output does not say how to proceed: %r", w["output"])
    check(not os.path.exists(os.path.join(ws, "new.txt")), "write_file ran under auto")
    r = res["c_read"]
    check(r["ok"] is True and r.get("mutating") is False, "read_file: %r", r)
    check("refused" not in r and "policy" not in r and "fix" not in r, "read_file carries refusal fields: %r", r)

    # the model was told the same, as the tool's output
    outs = {i["call_id"]: str(i.get("output")) for i in llm.requests("refuse")[1]["json"]["input"]
            if i.get("type") == "function_call_output"}
    check("'auto'" in outs.get("c_write", "") and fix in outs["c_write"],
          "the model's output lacks the policy or the command: %r", outs)

    # the command, run as given, lets the next write through
    argv = shlex.split(fix)
    check(argv[0] == "switchboard", "the fix is not a switchboard command: %r", fix)
    rc, out, err = sb(*argv[1:], "--data", server.data)
    check(rc == 0, "the fix exited %d: %s %s", rc, out, err)
    run = wait_run(server, prompt(server, sid, "try again"), timeout=30)
    check(run["status"] == "completed", "run after the fix %r", run)
    w2 = results(tape(server, sid))["c_write2"]
    check(w2["ok"] is True and "refused" not in w2 and w2.get("mutating") is True, "after the fix: %r", w2)
    check("interaction_id" not in w2, "the allowed write asked a person: %r", w2)
    check(os.path.exists(os.path.join(ws, "new.txt")), "the write did not happen after the fix")
    server.stop()


if __name__ == "__main__":
    run_tests(globals())
