#!/usr/bin/python3
"""Runs end to end (issue 5): a scripted model against the loopback
provider (tests/llm_server.py) drives the real agent loop and real tools.

  - `switchboard run` (one-shot) with a scripted model that writes a file,
    then reads it back with the shell, then answers: the file exists, the
    second request paired the tool output with its call_id, the tape holds
    the expected kinds in order, exit 0;
  - the same through `serve` + `sessions new` + `prompt --follow`;
  - the built-in demo model completes `run --goal "look around"`;
  - approval auto: write_file and shell ask a person; unanswered within the
    session's 1 s approval deadline they are refused naming the policy, and
    read_file runs unasked;
  - a prompt while a run is active waits in the session's queue (exit 0,
    with its position; test_queue.py covers the queue), and `run-info` of a
    queued worker run says what it waits for.

The helpers at the top (LLM, tape reading, run waiting) are shared by the
other test_runs_*.py scripts, which import this file.
"""
import json
import os
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import (ROOT, Proc, Server, TestFailure, check, read_jsonl, run_tests, sb, tmpdir,  # noqa: E402
                    wait_for)

PY = "/usr/bin/python3"
LLM_SERVER = os.path.join(ROOT, "tests", "llm_server.py")
FIXTURES = os.environ.get("SB_FIXTURES") or os.path.join(ROOT, "tests", "fixtures", "llm")
FINAL = ("completed", "failed", "cancelled", "expired", "interrupted")


# ---------------------------------------------------------------------------
# shared helpers

class LLM:
    """tests/llm_server.py on an ephemeral loopback port, with its request log."""

    def __init__(self):
        d = tmpdir()
        self.portfile = os.path.join(d, "port")
        self.logfile = os.path.join(d, "requests.jsonl")
        self.proc = Proc([PY, LLM_SERVER, "--port", "0", "--portfile", self.portfile,
                          "--log", self.logfile, "--fixtures", FIXTURES],
                         os.path.join(d, "llm_server.log"))

        def up():
            if not self.proc.alive():
                raise TestFailure("llm_server exited: %s" % self.proc.log())
            return os.path.exists(self.portfile)
        wait_for(up, 10, "llm_server to listen")
        with open(self.portfile) as f:
            self.port = int(f.read().strip())

    def url(self, script):
        """The base URL that selects the script `script`."""
        return "http://127.0.0.1:%d/script=%s/v1" % (self.port, script)

    def control(self, req):
        r = urllib.request.Request("http://127.0.0.1:%d/_control" % self.port,
                                   data=json.dumps(req).encode(),
                                   headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(r, timeout=10) as resp:
            return json.loads(resp.read())

    def script(self, name, turns, repeat_last=False):
        """Registers (or replaces, position 0) the script `name`."""
        return self.control({"op": "script", "name": name, "turns": turns, "repeat_last": repeat_last})

    def requests(self, script=None):
        """Every model request logged so far (parsed), optionally of one script."""
        out = []
        for rec in read_jsonl(self.logfile):
            if rec.get("endpoint") not in ("responses", "chat", "anthropic"):
                continue
            if script is None or rec.get("params", {}).get("script") == script:
                out.append(rec)
        return out

    def stop(self):
        self.proc.stop()


def llm_args(llm, script):
    """serve/run flags for the Responses provider on `script`."""
    return ["--llm", "responses", "--llm-url", llm.url(script), "--model", "m"]


LLM_ENV = {"OPENAI_API_KEY": "sk-test", "SWITCHBOARD_LLM_MAX_ATTEMPTS": "1"}


def llm_server(llm, script, data=None):
    """A started `serve` whose model is the script `script` of `llm`."""
    return Server(data=data, args=llm_args(llm, script), env=LLM_ENV).start()


def call(server, type, body, timeout=10):
    """Request over the server's control client; returns the ok body,
    raises TestFailure on an error reply."""
    m = server.control().request(type, body, timeout=timeout)
    check(m.type == type + ".ok", "%s answered %s %r", type, m.type, m.body)
    return m.body


def new_session(server, workspace, **kw):
    body = {"workspace": workspace}
    body.update(kw)
    return call(server, "session.create", body)["session"]["session_id"]


def tape(server, sid, after=0):
    """The session's tape after `after`, every page, as a list of dicts."""
    out = []
    while True:
        b = call(server, "session.events", {"session_id": sid, "after_seq": after, "limit": 1000})
        out.extend(b["events"])
        after = b["next_after"]
        if not b["more"]:
            return out


def get_run(server, run_id):
    return call(server, "run.get", {"run_id": run_id})["run"]


def wait_run(server, run_id, statuses=FINAL, timeout=20):
    """Waits until the run's status is one of `statuses`; returns the run."""
    box = {}

    def reached():
        box["run"] = get_run(server, run_id)
        return box["run"]["status"] in statuses
    try:
        wait_for(reached, timeout, "run %s to reach %s" % (run_id, "|".join(statuses)), interval=0.02)
    except TestFailure:
        raise TestFailure("run %s is %s (%s), not %s" % (run_id, box["run"]["status"],
                                                         box["run"].get("reason"), statuses))
    return box["run"]


def prompt(server, sid, text, **kw):
    body = {"session_id": sid, "input": text}
    body.update(kw)
    return call(server, "run.request", body)["run"]["run_id"]


def kinds(entries):
    return [e["kind"] for e in entries]


def results(entries):
    """tool.result bodies by call_id."""
    return {e["body"]["call_id"]: e["body"] for e in entries if e["kind"] == "tool.result"}


def check_subsequence(seq, want, what="tape"):
    """Each item of `want` appears in `seq`, in that order."""
    i = 0
    for k in seq:
        if i < len(want) and k == want[i]:
            i += 1
    check(i == len(want), "%s lacks %r (after %r) in order: %r", what, want[i] if i < len(want) else None,
          want[:i], seq)


def pid_gone(pid):
    """True once kill(pid, 0) fails. A zombie still answers kill(pid, 0), so a
    child that nobody reaped counts as present."""
    try:
        os.kill(pid, 0)
        return False
    except ProcessLookupError:
        return True
    except PermissionError:
        return False


def git_repo():
    d = tmpdir()
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
    with open(os.path.join(d, "README.md"), "w") as f:
        f.write("hello from the test repo\n")
    for argv in (["git", "init", "-q"], ["git", "add", "README.md"], ["git", "commit", "-qm", "init"]):
        subprocess.run(argv, cwd=d, check=True, env=env, stdout=subprocess.DEVNULL)
    return d


# ---------------------------------------------------------------------------
# the scripted end-to-end model

def e2e_turns():
    return [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "hello.txt", "content": "hi"},
                         "call_id": "call_write_1"}],
         "usage": {"input_tokens": 50, "output_tokens": 7}},
        {"tool_calls": [{"name": "shell", "arguments": {"command": "cat hello.txt"},
                         "call_id": "call_shell_2"}],
         "usage": {"input_tokens": 60, "output_tokens": 8}},
        {"text": "done", "usage": {"input_tokens": 70, "output_tokens": 1}},
    ]


# The subsequence of kinds every scripted e2e run's tape must hold. Between
# them there may be more (run.status running, usage, tool.output, ...).
E2E_KINDS = ["prompt", "run.status", "run.status", "turn.begin",
             "tool.call", "tool.result", "tool.call", "tool.result",
             "text.delta", "text.done", "usage", "turn.end", "run.status"]


def check_e2e(llm, script, entries, workspace):
    """The assertions shared by the one-shot and the serve variants."""
    path = os.path.join(workspace, "hello.txt")
    check(os.path.isfile(path), "hello.txt was not written")
    with open(path) as f:
        check(f.read() == "hi", "hello.txt holds the wrong text")

    # the tape, in order
    ks = kinds(entries)
    check_subsequence(ks, E2E_KINDS)
    statuses = [e["body"]["status"] for e in entries if e["kind"] == "run.status"]
    check(statuses[0] == "queued" and statuses[-1] == "completed", "run.status sequence %r", statuses)
    check(statuses[1] in ("claimed", "running"), "second run.status is %r: %r", statuses[1], statuses)
    # queued, then claimed/running, before the executor's first entry
    first_begin = ks.index("turn.begin")
    check(ks[:first_begin].count("run.status") >= 2,
          "turn.begin came before the run was claimed: %r", ks[:first_begin + 1])
    check(ks.index("prompt") < ks.index("run.status"), "prompt after run.status: %r", ks)
    check(ks[-1] == "run.status" and ks[-2] == "turn.end", "the tape does not end with turn.end, "
          "run.status: %r", ks[-4:])
    calls = [e["body"] for e in entries if e["kind"] == "tool.call"]
    check([c["name"] for c in calls] == ["write_file", "shell"], "tool calls %r", calls)
    check(calls[0]["call_id"] == "call_write_1", "first call id %r", calls[0]["call_id"])
    res = results(entries)
    check(res["call_write_1"]["ok"] is True, "write_file result %r", res["call_write_1"])
    check(res["call_shell_2"]["ok"] is True and res["call_shell_2"].get("exit_code") == 0
          and res["call_shell_2"]["output"].strip() == "hi", "shell result %r", res["call_shell_2"])
    text = "".join(e["body"]["text"] for e in entries if e["kind"] == "text.delta")
    done = [e["body"]["text"] for e in entries if e["kind"] == "text.done"]
    check(text == "done" and done == ["done"], "text deltas %r, text.done %r", text, done)
    seqs = [e["seq"] for e in entries]
    check(seqs == sorted(seqs) and len(set(seqs)) == len(seqs), "seqs not increasing: %r", seqs)

    # the model saw the tool output paired with its call
    reqs = llm.requests(script)
    check(len(reqs) == 3, "%d model requests, want 3", len(reqs))
    items = reqs[1]["json"]["input"]
    fc = [i for i in items if i.get("type") == "function_call"]
    out = [i for i in items if i.get("type") == "function_call_output"]
    check(any(i.get("call_id") == "call_write_1" and i.get("name") == "write_file" for i in fc),
          "second request lacks the function_call call_write_1: %r", items)
    check(len(out) == 1 and out[0].get("call_id") == "call_write_1",
          "second request's function_call_output is not paired with call_write_1: %r", out)
    check(items.index(out[0]) > items.index(fc[0]), "output before its call: %r", items)
    out3 = [i for i in reqs[2]["json"]["input"] if i.get("type") == "function_call_output"]
    check([i["call_id"] for i in out3] == ["call_write_1", "call_shell_2"]
          and "hi" in str(out3[1].get("output")), "third request's outputs: %r", out3)


# ---------------------------------------------------------------------------
# tests

def test_oneshot_run_scripted_model():
    llm = LLM()
    llm.script("e2e1", e2e_turns())
    ws = tmpdir()
    data = tmpdir()
    rc, out, err = sb("run", "--goal", "write hello.txt then show it", "--repo", ws, "--approval", "yolo",
                      "--data", data, "--json", *llm_args(llm, "e2e1"), timeout=60, env=LLM_ENV)
    check(rc == 0, "switchboard run exited %d\nstdout:\n%s\nstderr:\n%s", rc, out, err)
    entries = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    check(entries and entries[0]["kind"] == "prompt" and entries[0]["body"]["text"].startswith("write hello"),
          "--json did not start with the prompt: %r", entries[:1])
    check_e2e(llm, "e2e1", entries, ws)
    # the request carried the goal as the user's input
    first = llm.requests("e2e1")[0]["json"]
    check("write hello.txt then show it" in json.dumps(first["input"]), "goal not in the first request")
    check(any(t.get("name") == "write_file" for t in first.get("tools", [])), "no tool definitions sent")

    # human output: the tool calls, their results and a final summary line
    llm.script("e2e1", e2e_turns())
    os.unlink(os.path.join(ws, "hello.txt"))
    rc, out, err = sb("run", "--goal", "again", "--ephemeral", "--repo", ws, "--approval", "yolo",
                      *llm_args(llm, "e2e1"), timeout=60, env=LLM_ENV)
    check(rc == 0, "switchboard run (human) exited %d\n%s\n%s", rc, out, err)
    check("write_file" in out and "cat hello.txt" in out and "done" in out, "human output: %s", out)
    last = out.strip().splitlines()[-1]
    check("completed" in last and "steps 3" in last and "tokens 180 in / 16 out" in last,
          "summary line: %r", last)


def test_oneshot_run_fails_with_exit_1_when_the_model_fails():
    llm = LLM()
    llm.script("bad", [{"status": 400}])
    rc, out, err = sb("run", "--goal", "x", "--ephemeral", "--repo", tmpdir(), "--approval", "yolo",
                      *llm_args(llm, "bad"), timeout=60, env=LLM_ENV)
    check(rc == 1, "a failed run exited %d: %s %s", rc, out, err)
    check("failed" in out.strip().splitlines()[-1], "summary: %s", out)


def test_serve_sessions_new_prompt_follow():
    llm = LLM()
    llm.script("e2e2", e2e_turns())
    ws = tmpdir()
    server = llm_server(llm, "e2e2")
    rc, out, err = sb("sessions", "new", "--workspace", ws, "--approval", "yolo", "--json",
                      "--data", server.data)
    check(rc == 0, "sessions new: %d %s", rc, err)
    sid = json.loads(out)["session_id"]
    rc, out, err = sb("prompt", sid, "write hello.txt then show it", "--follow", "--data", server.data,
                      timeout=60)
    check(rc == 0, "prompt --follow exited %d\n%s\n%s", rc, out, err)
    check("→ write_file" in out and "→ shell" in out and "completed" in out.strip().splitlines()[-1],
          "prompt --follow output:\n%s", out)
    entries = tape(server, sid)
    check(entries[0]["kind"] == "session.created", "tape starts with %r", entries[0]["kind"])
    check_e2e(llm, "e2e2", entries[1:], ws)
    run_id = entries[-1]["body"]["run_id"]
    run = get_run(server, run_id)
    check(run["status"] == "completed" and run["steps"] == 3 and run["input_tokens"] == 180
          and run["output_tokens"] == 16, "run record %r", run)
    # `runs` lists it; `run-info` shows it
    rc, out, _ = sb("runs", "--session", sid, "--data", server.data)
    check(rc == 0 and run_id in out and "completed" in out, "runs: %s", out)
    rc, out, _ = sb("run-info", run_id, "--json", "--data", server.data)
    check(rc == 0 and json.loads(out)["status"] == "completed", "run-info: %s", out)

    # a second prompt of the same session sees the whole conversation
    llm.script("e2e2", [{"text": "still here"}])
    rc, out, err = sb("prompt", sid, "and now?", "--follow", "--data", server.data, timeout=60)
    check(rc == 0 and "still here" in out, "second prompt: %d %s %s", rc, out, err)
    items = llm.requests("e2e2")[-1]["json"]["input"]
    text = json.dumps(items)
    check("write hello.txt then show it" in text and "and now?" in text and "call_shell_2" in text,
          "the second run's request lacks the first run's conversation: %s", text[:2000])
    check(server.stop() == 0, "serve did not stop cleanly")


def test_demo_model_look_around():
    repo = git_repo()
    rc, out, err = sb("run", "--goal", "look around", "--ephemeral", "--repo", repo, "--approval", "yolo", timeout=60)
    check(rc == 0, "demo run exited %d\nstdout:\n%s\nstderr:\n%s", rc, out, err)
    check("demo" in out.lower(), "the final text does not mention the demo:\n%s", out)
    check("completed" in out.strip().splitlines()[-1], "summary: %s", out)
    rc, out, err = sb("run", "--goal", "look around", "--ephemeral", "--repo", repo, "--approval", "yolo", "--json",
                      timeout=60)
    check(rc == 0, "demo run --json exited %d: %s", rc, err)
    entries = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    done = [e["body"]["text"] for e in entries if e["kind"] == "text.done"]
    check(done and "demo" in done[-1].lower(), "final text.done: %r", done)
    check(any(e["kind"] == "tool.result" and e["body"]["ok"] for e in entries), "the demo used no tool")


def test_approval_auto_asks_for_write_allows_read():
    llm = LLM()
    llm.script("auto", [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "new.txt", "content": "x"},
                         "call_id": "c_write"},
                        {"name": "read_file", "arguments": {"path": "present.txt"}, "call_id": "c_read"}]},
        {"tool_calls": [{"name": "shell", "arguments": {"command": "touch made_by_shell"},
                         "call_id": "c_shell"}]},
        {"text": "ok"},
    ])
    ws = tmpdir()
    with open(os.path.join(ws, "present.txt"), "w") as f:
        f.write("present content\n")
    server = llm_server(llm, "auto")
    sid = new_session(server, ws, approval_policy="auto", approval_deadline_s=1)
    run_id = prompt(server, sid, "try")
    run = wait_run(server, run_id)
    check(run["status"] == "completed", "run %r", run)
    res = results(tape(server, sid))
    w = res["c_write"]
    check(w["ok"] is False and "auto" in w["output"] and "polic" in w["output"] and "expired" in w["output"]
          and w.get("interaction_id", "").startswith("ia_"), "write_file: %r", w)
    check(not os.path.exists(os.path.join(ws, "new.txt")), "write_file ran under auto")
    s = res["c_shell"]
    check(s["ok"] is False and "auto" in s["output"], "shell: %r", s)
    check(not os.path.exists(os.path.join(ws, "made_by_shell")), "shell ran under auto")
    r = res["c_read"]
    check(r["ok"] is True and "present content" in r["output"], "read_file: %r", r)
    # the model was told: the refusal is the function_call_output
    outs = [i for i in llm.requests("auto")[1]["json"]["input"] if i.get("type") == "function_call_output"]
    check(any(i["call_id"] == "c_write" and "auto" in str(i.get("output")) for i in outs),
          "the refusal did not reach the model: %r", outs)
    server.stop()


def test_prompt_while_active_queues_and_worker_run_waits():
    server = Server().start()           # the demo model; nothing here reaches it
    sid = new_session(server, tmpdir(), approval_policy="yolo")
    rc, out, err = sb("call", "run.request",
                      json.dumps({"session_id": sid, "input": "for the pool",
                                  "target": {"executor": "worker", "pool": "p"}}),
                      "--data", server.data)
    check(rc == 0, "call run.request: %d %s %s", rc, out, err)
    run_id = json.loads(out)["run"]["run_id"]
    check(json.loads(out)["run"]["status"] == "queued", "worker run: %s", out)

    rc, out, err = sb("run-info", run_id, "--data", server.data)
    check(rc == 0, "run-info: %d %s", rc, err)
    check("queued" in out, "run-info: %s", out)
    waiting = [line for line in out.splitlines() if line.startswith("waiting for")]
    check(waiting and "worker" in waiting[0] and "pool p" in waiting[0],
          "run-info does not say what the run waits for:\n%s", out)
    rc, out, _ = sb("run-info", run_id, "--json", "--data", server.data)
    check("pool p" in json.loads(out).get("waiting_for", ""), "run-info --json: %s", out)

    # one run at a time: the queued run is active, so the prompt waits
    rc, out, err = sb("prompt", sid, "another", "--data", server.data)
    check(rc == 0, "prompt while a run is active exited %d: %s %s", rc, out, err)
    check("queued at position 1" in out, "the prompt does not say it waits: %r", out)
    runs = call(server, "run.list", {"session_id": sid})["runs"]
    check(len(runs) == 1, "the waiting prompt created a run: %r", runs)
    ks = kinds(tape(server, sid))
    check(ks.count("prompt") == 1 and ks.count("prompt.queued") == 1, "tape: %r", ks)

    # malformed targets are refused at request time
    for target, word in (({"executor": "moon"}, "moon"), ({"executor": "worker"}, "pool")):
        rc, out, err = sb("call", "run.request", json.dumps({"session_id": sid, "input": "x", "target": target}),
                          "--data", server.data)
        check(rc == 1 and "invalid" in (out + err) and word in (out + err), "target %r: %d %s %s",
              target, rc, out, err)

    # cancelling the queued run frees the session, and pauses its queue:
    # a new prompt runs at once, the waiting one waits for `queue resume`
    rc, out, err = sb("cancel", run_id, "--data", server.data)
    check(rc == 0 and "cancelled" in out, "cancel of a queued run: %d %s %s", rc, out, err)
    q = call(server, "session.queue.list", {"session_id": sid})
    check(q["paused"] is True and [p["text"] for p in q["prompts"]] == ["another"], "queue: %r", q)
    rc, out, err = sb("prompt", sid, "now it may", "--follow", "--data", server.data, timeout=60)
    check(rc == 0, "prompt after the cancel: %d %s %s", rc, out, err)
    server.stop()


if __name__ == "__main__":
    run_tests(globals())
