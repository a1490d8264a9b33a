#!/usr/bin/python3
"""Images on queued and steered prompts (issue 27, docs/images.md, docs/queue.md).

A real `serve` on the scripted loopback provider (tests/llm_server.py,
Responses): the first run waits in a shell tool for a gate file, so the
session is busy while the test prompts it.

  - `switchboard prompt SESSION TEXT --image FILE` while busy queues the
    prompt with its image; the queue lists it, prompt.queued names it,
    and the run it starts sends the provider the file's bytes;
  - a steer with an image is in the running run's next model request,
    with the steer's text, and prompt.steered names it;
  - a queued image prompt survives a SIGKILL and restart (the queue is
    durable) and starts with its image after `queue resume`;
  - removing a queued image prompt lets the blob be collected, while a
    blob another waiting prompt or the tape names stays;
  - the queue's byte limit counts the image references.
"""
import base64
import hashlib
import json
import os
import signal
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Server, check, cli, run_tests, tmpdir, wait_for  # noqa: E402
from sbagent import (LLM, LLM_ENV, call, llm_args, llm_server, new_session, prompt_call, prompt_ok,  # noqa: E402
                     queue_list, runs_of, tape, wait_run, gate, shell_turn, open_gate, wait_file, png, write_bytes)


def blob_files(data):
    """The blobs stored under DATA/blobs (not tmp/, refs/ or .sent files)."""
    root = os.path.join(data, "blobs")
    return sorted(d + f for d in os.listdir(root) if len(d) == 2
                  for f in os.listdir(os.path.join(root, d)) if len(f) == 62)


def images_of(item):
    """The (mime, bytes) of the images a Responses input message carries."""
    out = []
    for p in item.get("content") or []:
        if isinstance(p, dict) and p.get("type") == "input_image":
            u = p["image_url"]
            check(u.startswith("data:") and ";base64," in u, "not a data URL: %.80s", u)
            out.append((u[5:u.index(";")], base64.b64decode(u[u.index(",") + 1:], validate=True)))
    return out


def user_items(body):
    return [i for i in body["input"] if i.get("role") == "user"]


def text_of(item):
    c = item.get("content")
    if isinstance(c, list):
        return "".join(p.get("text", "") for p in c if isinstance(p, dict) and p.get("type") == "input_text")
    return c


def put(server, sid, name, data):
    return call(server, "blob.put", {"session_id": sid, "name": name, "data": data})["blob"]["sha256"]


def busy_session(llm, script, turns):
    """A server, a session and its first run, waiting in its gate."""
    ws = tmpdir()
    llm.script(script, [shell_turn("c1", gate("go", mark="in"))] + turns)
    server = llm_server(llm, script)
    sid = new_session(server, ws, approval_policy="yolo")
    run_a = prompt_ok(server, sid, "long job")["run_id"]
    wait_file(ws, "in")
    return server, ws, sid, run_a


# ---------------------------------------------------------------------------

def test_queued_prompt_with_an_image_reaches_the_provider():
    llm = LLM()
    server, ws, sid, run_a = busy_session(llm, "qimg", [{"text": "first done"}, {"text": "saw it"}])
    try:
        pic = png(40, 30, seed=3)
        f = write_bytes(os.path.join(tmpdir(), "shot.png"), pic)
        sha = hashlib.sha256(pic).hexdigest()
        rc, out, err = cli(server, "prompt", sid, "what is in this picture?", "--image", f, "--json", timeout=30)
        check(rc == 0, "prompt --image while busy: %d %s %s", rc, out, err)
        ans = json.loads(out)
        check(ans.get("queued") == 1 and ans.get("prompt_id", "").startswith("pr_") and "run_id" not in ans,
              "prompt --image answered %r", ans)
        q = queue_list(server, sid)
        check(len(q["prompts"]) == 1 and [(i["sha256"], i["name"], i["mime"], i["width"], i["height"])
                                          for i in q["prompts"][0].get("images", [])]
              == [(sha, "shot.png", "image/png", 40, 30)], "the queue lists %r", q)
        queued = [e for e in tape(server, sid) if e["kind"] == "prompt.queued"]
        check(len(queued) == 1 and [i["sha256"] for i in queued[0]["body"].get("images", [])] == [sha],
              "prompt.queued %r", queued)
        open_gate(ws, "go")
        check(wait_run(server, run_a, timeout=30)["status"] == "completed", "run A did not complete")
        wait_for(lambda: len(runs_of(server, sid)) == 2, 20, "the queued prompt's run")
        run_b = runs_of(server, sid)[1]["run_id"]
        check(wait_run(server, run_b, timeout=30)["status"] == "completed", "run B did not complete")
        body = llm.requests("qimg")[-1]["json"]
        last = user_items(body)[-1]
        check(text_of(last) == "what is in this picture?", "the last user message %r", last)
        check(images_of(last) == [("image/png", pic)], "the provider did not get the file's bytes")
        prompts = [e for e in tape(server, sid) if e["kind"] == "prompt" and e.get("run_id") == run_b]
        check(len(prompts) == 1 and [i["sha256"] for i in prompts[0]["body"].get("images", [])] == [sha],
              "run B's prompt entry %r", prompts)
        check(queue_list(server, sid)["prompts"] == [], "the queue still holds %r", queue_list(server, sid))
    finally:
        open_gate(ws, "go")
        server.stop()
        llm.stop()


def test_steer_with_an_image_joins_the_next_model_call():
    llm = LLM()
    server, ws, sid, run_a = busy_session(llm, "simg", [{"text": "done, with the picture"}])
    try:
        pic = png(24, 24, seed=9)
        sha = put(server, sid, "diagram.png", pic)
        st = prompt_ok(server, sid, "use this diagram", mode="steer", images=[{"sha256": sha, "name": "diagram.png"}])
        check(st.get("steered") is True, "the steer answered %r", st)
        check([i["sha256"] for i in queue_list(server, sid)["steers"][0].get("images", [])] == [sha],
              "the pending steer %r", queue_list(server, sid))
        open_gate(ws, "go")
        check(wait_run(server, run_a, timeout=30)["status"] == "completed", "run A did not complete")
        reqs = llm.requests("simg")
        check(len(reqs) == 2, "%d model requests", len(reqs))
        last = user_items(reqs[1]["json"])[-1]
        check(text_of(last) == "use this diagram", "the steer's message %r", last)
        check(images_of(last) == [("image/png", pic)], "the steer's image did not reach the provider")
        check(images_of(user_items(reqs[0]["json"])[-1]) == [], "the first request carried an image")
        steered = [e for e in tape(server, sid) if e["kind"] == "prompt.steered"]
        check(len(steered) == 1 and steered[0]["run_id"] == run_a
              and [i["sha256"] for i in steered[0]["body"].get("images", [])] == [sha], "prompt.steered %r", steered)
        check(len(runs_of(server, sid)) == 1, "a second run started")
    finally:
        open_gate(ws, "go")
        server.stop()
        llm.stop()


def test_queued_image_prompt_survives_a_restart():
    llm = LLM()
    ws = tmpdir()
    llm.script("rimg", [shell_turn("c1", gate("never", mark="in")), {"text": "saw it after the restart"}])
    server = llm_server(llm, "rimg")
    try:
        sid = new_session(server, ws, approval_policy="yolo")
        prompt_ok(server, sid, "long job")
        wait_file(ws, "in")
        pic = png(32, 20, seed=4)
        sha = put(server, sid, "a.png", pic)
        q1 = prompt_ok(server, sid, "look after the restart", images=[{"sha256": sha, "name": "a.png"}])
        check(q1.get("queued") == 1, "queued %r", q1)
        server.stop(signal.SIGKILL)
        server.start()
        q = queue_list(server, sid)
        check(q["paused"] is True and [[i["sha256"] for i in p.get("images", [])] for p in q["prompts"]] == [[sha]],
              "the queue after the restart %r", q)
        check(blob_files(server.data) == [sha], "blobs after the restart %r", blob_files(server.data))
        rc, out, err = cli(server, "queue", "resume", sid)
        check(rc == 0, "queue resume: %d %s %s", rc, out, err)
        wait_for(lambda: len(runs_of(server, sid)) == 2, 20, "the queued prompt's run")
        run_b = runs_of(server, sid)[1]["run_id"]
        check(wait_run(server, run_b, timeout=30)["status"] == "completed", "run B did not complete")
        last = user_items(llm.requests("rimg")[-1]["json"])[-1]
        check(text_of(last) == "look after the restart" and images_of(last) == [("image/png", pic)],
              "the restarted queue's run sent %r", text_of(last))
    finally:
        open_gate(ws, "never")
        server.stop()
        llm.stop()


def test_queue_bytes_count_the_image_references():
    llm = LLM()
    ws = tmpdir()
    llm.script("bimg", [shell_turn("c1", gate("go", mark="in")), {"text": "done"}], repeat_last=True)
    # the least the queue may hold (1 MiB): a prompt fills all but 100
    # bytes; a short text then fits, a one-byte text with an image does
    # not (its reference alone, hash, type, size and name, is over 100)
    limit = 1 << 20
    server = Server(args=llm_args(llm, "bimg"), env=dict(LLM_ENV, SWITCHBOARD_QUEUE_BYTES=str(limit))).start()
    try:
        sid = new_session(server, ws, approval_policy="yolo")
        prompt_ok(server, sid, "long job")
        wait_file(ws, "in")
        sha = put(server, sid, "b.png", png(8, 8, seed=1))
        one = prompt_ok(server, sid, "x" * (limit - 100))
        check(one.get("queued") == 1, "the big prompt %r", one)
        m = prompt_call(server, sid, "y", images=[{"sha256": sha, "name": "b.png"}])
        check(m.is_error() and m.code == "overloaded" and "image references" in m.body["message"],
              "the image prompt past the limit answered %s %r", m.type, m.body)
        m = prompt_call(server, sid, "z" * 50)
        check(m.type == "session.prompt.ok", "the text prompt within the limit answered %s %r", m.type, m.body)
        # an image the session does not hold is refused at once, busy or not
        m = prompt_call(server, sid, "w", images=[{"sha256": "0" * 64, "name": "none.png"}])
        check(m.is_error() and m.code == "invalid" and "holds no such blob" in m.body["message"],
              "an unknown image answered %s %r", m.type, m.body)
    finally:
        open_gate(ws, "go")
        server.stop()
        llm.stop()


if __name__ == "__main__":
    run_tests(globals())
