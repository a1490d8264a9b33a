"""Images in prompts, on the blob store (docs/images.md).

A real `serve` with three providers on tests/llm_server.py (Responses,
Chat Completions, Anthropic): `switchboard prompt SESSION TEXT --image
FILE` puts the file with blob.put and the model's request carries it in
the provider's own form, its bytes equal to the file's. Then: the same
image twice is stored once; a file named .png that is text is refused;
a model the providers file says takes no images fails before any HTTP
request; a 20 MB image is sent downscaled and the tape records both;
the session quota; a SIGKILL while blobs are written leaves no half blob
referenced; a deleted session's blobs are swept."""

import base64
import hashlib
import json
import os
import signal
import struct
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Client, Server, check, cli, run_tests, tmpdir, wait_for  # noqa: E402
from sbllm import LlmServer, provider, write_providers  # noqa: E402
from sbagent import call, get_run, new_session, png, tape, wait_run, write_bytes  # noqa: E402


def blob_files(data):
    """The blobs stored under DATA/blobs (not tmp/, refs/ or .sent files)."""
    out = []
    root = os.path.join(data, "blobs")
    for d in os.listdir(root):
        if len(d) != 2:
            continue
        for f in os.listdir(os.path.join(root, d)):
            if len(f) == 62:
                out.append(d + f)
    return sorted(out)


def start(env=None, extra_providers=()):
    llm = LlmServer()
    provs = [
        provider("resp", "responses", llm.base(gen=1, tag="r"), model="m-resp", key_env="K"),
        provider("chat", "chat", llm.base(gen=1, tag="c"), model="m-chat", key_env="K"),
        provider("ant", "anthropic", llm.base(gen=1, tag="a"), model="m-ant", key_env="K"),
        provider("blind", "chat", llm.base(gen=1, tag="b"), model="m-blind", key_env="K", images=False),
    ] + list(extra_providers)
    path = write_providers(provs, default="resp")
    e = {"K": "sk-test", "SWITCHBOARD_LLM_MAX_ATTEMPTS": "1"}
    e.update(env or {})
    srv = Server(args=["--providers", path], env=e).start()
    return llm, srv


def prompt_image(srv, sid, files, text="What is in this picture?", ok=True):
    args = ["prompt", sid, text, "--json"]
    for f in files:
        args += ["--image", f]
    rc, out, err = cli(srv, *args, timeout=60)
    if ok:
        check(rc == 0, "prompt --image failed: %s %s", out, err)
        return json.loads(out)["run_id"]
    check(rc != 0, "prompt --image should have failed: %s", out)
    return err


def last_request(llm, endpoint, tag):
    reqs = llm.requests(endpoint, tag)
    check(reqs, "no %s request with tag %s", endpoint, tag)
    return reqs[-1]["json"]


def user_parts(body, endpoint):
    """The image bytes and text the request's last user message carries."""
    if endpoint == "responses":
        items = [i for i in body["input"] if i.get("role") == "user"]
        parts = items[-1]["content"]
        texts = [p["text"] for p in parts if p["type"] == "input_text"]
        urls = [p["image_url"] for p in parts if p["type"] == "input_image"]
    elif endpoint == "chat":
        msgs = [m for m in body["messages"] if m["role"] == "user"]
        parts = msgs[-1]["content"]
        texts = [p["text"] for p in parts if p["type"] == "text"]
        urls = [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
    else:
        msgs = [m for m in body["messages"] if m["role"] == "user"]
        parts = msgs[-1]["content"]
        texts = [p["text"] for p in parts if p["type"] == "text"]
        images = [p["source"] for p in parts if p["type"] == "image"]
        for s in images:
            check(s["type"] == "base64", "anthropic source %r", s)
        urls = ["data:%s;base64,%s" % (s["media_type"], s["data"]) for s in images]
    out = []
    for u in urls:
        check(u.startswith("data:") and ";base64," in u, "not a data URL: %.80s", u)
        mime = u[5:u.index(";")]
        out.append((mime, base64.b64decode(u[u.index(",") + 1:], validate=True)))
    return texts, out


def test_each_provider_gets_the_image_byte_for_byte():
    llm, srv = start()
    try:
        ws = tmpdir()
        pic = write_bytes(os.path.join(tmpdir(), "shot.png"), png(64, 48, seed=1))
        want = open(pic, "rb").read()
        for prov, endpoint, tag in (("resp", "responses", "r"), ("chat", "chat", "c"), ("ant", "anthropic", "a")):
            sid = new_session(srv, ws, provider=prov)
            rid = prompt_image(srv, sid, [pic])
            run = wait_run(srv, rid)
            check(run["status"] == "completed", "%s run %r", prov, run)
            texts, images = user_parts(last_request(llm, endpoint, tag), endpoint)
            check(texts == ["What is in this picture?"], "%s texts %r", prov, texts)
            check(images == [("image/png", want)], "%s: the image sent differs from the file (%d images, %r)",
                  prov, len(images), [(m, len(b)) for m, b in images])
            entries = [e for e in tape(srv, sid) if e["kind"] == "prompt"]
            refs = entries[-1]["body"]["images"]
            check(refs == [{"sha256": hashlib.sha256(want).hexdigest(), "mime": "image/png", "bytes": len(want),
                            "width": 64, "height": 48, "name": "shot.png"}], "tape reference %r", refs)
            check("data" not in json.dumps(entries[-1]["body"]), "the tape holds bytes: %r", entries[-1]["body"])
    finally:
        srv.stop()
        llm.stop()


def test_same_image_twice_stored_once_and_text_named_png_refused():
    llm, srv = start()
    try:
        ws = tmpdir()
        pic = write_bytes(os.path.join(tmpdir(), "a.png"), png(32, 32, seed=2))
        copy = write_bytes(os.path.join(tmpdir(), "b.png"), open(pic, "rb").read())
        sid = new_session(srv, ws)
        wait_run(srv, prompt_image(srv, sid, [pic, copy]))
        sid2 = new_session(srv, ws)
        wait_run(srv, prompt_image(srv, sid2, [pic]))
        check(blob_files(srv.data) == [hashlib.sha256(open(pic, "rb").read()).hexdigest()],
              "blobs stored: %r", blob_files(srv.data))
        _, images = user_parts(last_request(llm, "responses", "r"), "responses")
        check(len(images) == 1, "the second session's request has %d images", len(images))
        fake = write_bytes(os.path.join(tmpdir(), "notes.png"), b"this is text, not a picture\n")
        err = prompt_image(srv, sid, [fake], ok=False)
        check("not an image" in err and "text/plain" in err, "refusal: %r", err)
        # nor does a hash the session never put pass
        m = srv.control().request("session.prompt", {"session_id": sid, "text": "x",
                                                     "images": [{"sha256": "ab" * 32}]})
        check(m.is_error and m.code == "invalid" and "holds no such blob" in m.body["message"], "%r", m.body)
    finally:
        srv.stop()
        llm.stop()


def test_model_without_images_fails_before_the_call():
    llm, srv = start()
    try:
        sid = new_session(srv, tmpdir(), provider="blind")
        pic = write_bytes(os.path.join(tmpdir(), "x.png"), png(8, 8))
        run = wait_run(srv, prompt_image(srv, sid, [pic]))
        check(run["status"] == "failed" and "does not take images" in run.get("reason", ""), "run %r", run)
        check(not llm.requests("chat", "b"), "a request reached the provider: %r", llm.requests("chat", "b"))
    finally:
        srv.stop()
        llm.stop()


def test_large_image_downscaled_and_both_on_the_tape():
    llm, srv = start()
    try:
        sid = new_session(srv, tmpdir(), provider="ant")
        big = png(2600, 2600, noisy=True)
        check(len(big) > 20 * 1000 * 1000, "the test image is only %d bytes", len(big))
        pic = write_bytes(os.path.join(tmpdir(), "huge.png"), big)
        run = wait_run(srv, prompt_image(srv, sid, [pic]), timeout=60)
        check(run["status"] == "completed", "run %r", run)
        ref = [e for e in tape(srv, sid) if e["kind"] == "prompt"][-1]["body"]["images"][0]
        check(ref["sha256"] == hashlib.sha256(big).hexdigest() and ref["bytes"] == len(big)
              and ref["width"] == 2600, "original %r", ref)
        sent = ref.get("sent")
        check(sent and sent["mime"] == "image/jpeg" and max(sent["width"], sent["height"]) <= 2048
              and sent["bytes"] <= 3750 * 1024, "sent %r", sent)
        _, images = user_parts(last_request(llm, "anthropic", "a"), "anthropic")
        check(len(images) == 1 and images[0][0] == "image/jpeg"
              and hashlib.sha256(images[0][1]).hexdigest() == sent["sha256"], "request images %r",
              [(m, len(b)) for m, b in images])
        check(images[0][1][:3] == b"\xff\xd8\xff", "not a JPEG")
    finally:
        srv.stop()
        llm.stop()


def test_session_quota_and_stats():
    llm, srv = start(env={"SWITCHBOARD_BLOB_SESSION_QUOTA": "30000"})
    try:
        sid = new_session(srv, tmpdir())
        a = write_bytes(os.path.join(tmpdir(), "a.png"), png(100, 60, noisy=True))      # ~18 KB
        b = write_bytes(os.path.join(tmpdir(), "b.png"), png(100, 60, noisy=True))
        check(os.path.getsize(a) > 15000, "test image %d bytes", os.path.getsize(a))
        wait_run(srv, prompt_image(srv, sid, [a]))
        err = prompt_image(srv, sid, [b], ok=False)
        check("quota" in err and "too_large" in err, "refusal: %r", err)
        st = call(srv, "blob.stats", {})
        check(st["blobs"] == 1 and st["refused"] >= 1 and st["bytes"] == os.path.getsize(a), "stats %r", st)
        # the same figures in `switchboard stats` (bus.stats) and so in /metrics
        rc, out, err = cli(srv, "stats", "--json")
        check(rc == 0, "stats: %s", err)
        figs = json.loads(out).get("blobs", {})
        check(figs.get("stored") == 1 and figs.get("bytes") == os.path.getsize(a) and figs.get("refused", 0) >= 1,
              "stats blobs %r", figs)
    finally:
        srv.stop()
        llm.stop()


def test_sigkill_while_writing_leaves_no_half_blob():
    data = tmpdir()
    big = png(1500, 1500, noisy=True)       # ~6.7 MB: a write takes a while
    killed_during = 0
    attempts = 0
    for attempt in range(12):
        if attempt >= 4 and killed_during:
            break
        attempts += 1
        srv = Server(data=data).start()
        sid = call(srv, "session.create", {"workspace": tmpdir()})["session"]["session_id"]
        c = Client(srv.endpoint())
        # a distinct blob each round, so that each put writes
        body = big[:-12] + struct.pack(">I", attempt) + big[-8:]
        c.send("blob.put", {"session_id": sid, "name": "k.png", "data": body})
        # the kill comes as soon as the write's temporary file is there
        # (odd rounds: after a few ms more, deeper into the write), so that
        # a loaded machine's timing does not decide whether it proves anything
        tmpd = os.path.join(data, "blobs", "tmp")
        until = time.monotonic() + 3
        while time.monotonic() < until and not (os.path.isdir(tmpd) and os.listdir(tmpd)):
            time.sleep(0.0005)
        time.sleep(0.002 * (attempt % 2))
        srv.proc.send_signal(signal.SIGKILL)
        srv.proc.wait(10)
        c.close()
        tmp = os.listdir(os.path.join(data, "blobs", "tmp"))
        killed_during += bool(tmp)
    check(killed_during, "no kill of %d came while a blob was being written: the test proved nothing", attempts)
    srv = Server(data=data).start()
    try:
        check(os.listdir(os.path.join(data, "blobs", "tmp")) == [], "tmp/ kept a half blob after start")
        refs = os.path.join(data, "blobs", "refs")
        for name in os.listdir(refs):
            for line in open(os.path.join(refs, name)):
                h, size = line.split()[:2]
                path = os.path.join(data, "blobs", h[:2], h[2:])
                got = open(path, "rb").read()
                check(len(got) == int(size) and hashlib.sha256(got).hexdigest() == h,
                      "a referenced blob is not whole: %s", h)
        for h in blob_files(data):
            got = open(os.path.join(data, "blobs", h[:2], h[2:]), "rb").read()
            check(hashlib.sha256(got).hexdigest() == h, "a stored blob is not whole: %s", h)
        print("  (%d of %d kills came while a temp file was open)" % (killed_during, attempts))
    finally:
        srv.stop()


def test_deleted_session_blobs_swept():
    llm, srv = start()
    try:
        ws = tmpdir()
        keep = write_bytes(os.path.join(tmpdir(), "keep.png"), png(16, 16, seed=5))
        gone = write_bytes(os.path.join(tmpdir(), "gone.png"), png(16, 16, seed=6))
        s1, s2 = new_session(srv, ws), new_session(srv, ws)
        wait_run(srv, prompt_image(srv, s1, [keep, gone]))
        wait_run(srv, prompt_image(srv, s2, [keep]))
        check(len(blob_files(srv.data)) == 2, "blobs %r", blob_files(srv.data))
        call(srv, "session.delete", {"session_id": s1})
        want = [hashlib.sha256(open(keep, "rb").read()).hexdigest()]
        wait_for(lambda: blob_files(srv.data) == want, 10, "the deleted session's own blob to be swept")
        m = srv.control().request("blob.get", {"session_id": s1, "sha256": want[0]})
        check(m.is_error and m.code == "not_found", "a deleted session still reads: %r", m.type)
        m = srv.control().request("blob.get", {"session_id": s2, "sha256": want[0]})
        check(m.type == "blob.get.ok" and m.body["data"] == open(keep, "rb").read(), "blob.get %r", m.type)
    finally:
        srv.stop()
        llm.stop()


def test_artifacts_list_and_get():
    """`switchboard artifacts SESSION` lists the tape's images with their
    origin; `artifact get HASH -o FILE` writes the bytes back."""
    llm, srv = start()
    try:
        sid = new_session(srv, tmpdir())
        pic = write_bytes(os.path.join(tmpdir(), "diagram.png"), png(24, 12, seed=7))
        rid = prompt_image(srv, sid, [pic])
        wait_run(srv, rid)
        rc, out, err = cli(srv, "artifacts", sid, "--json")
        check(rc == 0, "artifacts: %s", err)
        rows = [json.loads(line) for line in out.splitlines()]
        want = hashlib.sha256(open(pic, "rb").read()).hexdigest()
        check(len(rows) == 1 and rows[0]["sha256"] == want and rows[0]["origin"] == "prompt"
              and rows[0]["run_id"] == rid and rows[0]["name"] == "diagram.png" and rows[0]["seq"] > 0,
              "rows %r", rows)
        rc, out, _ = cli(srv, "artifacts", sid)
        check(rc == 0 and want in out and "image/png 24x12" in out and "diagram.png" in out, "text %r", out)
        dest = os.path.join(tmpdir(), "back.png")
        rc, _, err = cli(srv, "artifact", "get", want, "-o", dest, "--session", sid)
        check(rc == 0 and open(dest, "rb").read() == open(pic, "rb").read(), "artifact get: %s", err)
        rc, _, err = cli(srv, "artifact", "get", "00" * 32, "-o", dest, "--session", sid)
        check(rc == 1 and "not_found" in err, "a hash the session lacks: %d %r", rc, err)
        rc, _, _ = cli(srv, "artifact", "get", "xyz")
        check(rc == 2, "a bad hash is a usage error: %d", rc)
    finally:
        srv.stop()
        llm.stop()


def test_chat_image_command():
    """chat's `/image PATH` gives the next prompt the image."""
    import subprocess
    from sbtest import SB_BIN
    llm, srv = start()
    try:
        sid = new_session(srv, tmpdir(), provider="chat")
        pic = write_bytes(os.path.join(tmpdir(), "board.png"), png(20, 20, seed=8))
        lines = b"/image %s\nwhat does the board say?\n" % pic.encode()
        p = subprocess.run([SB_BIN, "chat", sid, "--data", srv.data], input=lines, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        check(p.returncode == 0, "chat exited %d: %s %s", p.returncode, p.stdout[-400:], p.stderr[-400:])
        check(b"goes with the next prompt" in p.stdout, "chat said %r", p.stdout[-400:])
        texts, images = user_parts(last_request(llm, "chat", "c"), "chat")
        check(texts == ["what does the board say?"] and images == [("image/png", open(pic, "rb").read())],
              "the request: %r %r", texts, [(m, len(b)) for m, b in images])
    finally:
        srv.stop()
        llm.stop()


def test_worker_session_gets_the_image_by_hash():
    """A session whose runs go to an external worker: the worker has no
    DATA/blobs, so its executor reads the image with blob.get from the
    control plane, and the model still gets the file's bytes."""
    from sbagent import start_worker
    llm, srv = start()
    w = None
    try:
        w = start_worker(srv, "wimg")
        sid = new_session(srv, tmpdir(), approval_policy="yolo", target="worker:p", provider="ant")
        pic = write_bytes(os.path.join(tmpdir(), "remote.png"), png(30, 20, seed=11))
        run = wait_run(srv, prompt_image(srv, sid, [pic]), timeout=30)
        check(run["status"] == "completed" and run.get("worker_id") == "wimg", "run %r", run)
        _, images = user_parts(last_request(llm, "anthropic", "a"), "anthropic")
        check(images == [("image/png", open(pic, "rb").read())], "the worker's request: %r",
              [(m, len(b)) for m, b in images])
        types = srv.stats()["types"]
        check(any(k.startswith("blob.get") for k in types), "no blob.get crossed the bus: %r",
              sorted(k for k in types if k.startswith("blob")))
    finally:
        if w:
            w.stop()
        srv.stop()
        llm.stop()


def test_a_run_reads_only_its_sessions_blobs():
    """run.request naming another session's blob: the run's model gets
    no image (and is told one could not be read), as blob.get would."""
    llm, srv = start()
    try:
        ws = tmpdir()
        a, b = new_session(srv, ws), new_session(srv, ws)
        pic = png(12, 12, seed=13)
        ref = call(srv, "blob.put", {"session_id": a, "name": "secret.png", "data": pic})["blob"]
        rid = call(srv, "run.request", {"session_id": b, "input": "show me", "images": [ref]})["run"]["run_id"]
        wait_run(srv, rid)
        texts, images = user_parts(last_request(llm, "responses", "r"), "responses")
        check(images == [], "another session's image reached the model")
        check(texts and "could not be read" in texts[0], "the text does not say so: %r", texts)
    finally:
        srv.stop()
        llm.stop()


def prompt_to_completion(srv, ws, text):
    """A session on ws under the auto policy, prompted with text: its id and
    the run's, once the run completed."""
    sid = new_session(srv, ws, approval_policy="auto")
    rid = call(srv, "session.prompt", {"session_id": sid, "text": text})["run_id"]
    run = wait_run(srv, rid)
    check(run["status"] == "completed", "run %r", run)
    return sid, rid


def test_view_image_tool():
    """The model calls view_image on a screenshot in the workspace: the
    tool.result references the stored image, and the next request shows
    it to the model as a user message after the results; a path out of
    the workspace and a text file are refused."""
    from sbagent import LLM, llm_server
    llm = LLM()
    ws = tmpdir()
    shot = png(50, 40, seed=14)
    write_bytes(os.path.join(ws, "shot.png"), shot)
    write_bytes(os.path.join(ws, "notes.png"), b"not a picture\n")
    llm.script("vi", [
        {"tool_calls": [{"name": "view_image", "arguments": {"path": "shot.png"}, "call_id": "c1"},
                        {"name": "view_image", "arguments": {"path": "../etc/passwd"}, "call_id": "c2"},
                        {"name": "view_image", "arguments": {"path": "notes.png"}, "call_id": "c3"}]},
        {"text": "a red square"},
    ])
    srv = llm_server(llm, "vi")
    try:
        # auto: view_image is read-only, so it runs without asking
        sid, rid = prompt_to_completion(srv, ws, "what does the test screenshot show?")
        results = {e["body"]["call_id"]: e["body"] for e in tape(srv, sid) if e["kind"] == "tool.result"}
        ref = results["c1"].get("images", [{}])[0]
        check(results["c1"]["ok"] and ref.get("sha256") == hashlib.sha256(shot).hexdigest()
              and ref.get("width") == 50 and ref.get("name") == "shot.png", "c1 %r", results["c1"])
        check(not results["c2"]["ok"] and "images" not in results["c2"], "c2 %r", results["c2"])
        check(not results["c3"]["ok"] and "not an image" in results["c3"]["output"], "c3 %r", results["c3"])
        body = llm.requests("vi")[-1]["json"]
        items = body["input"]
        outs = [k for k, i in enumerate(items) if i.get("type") == "function_call_output"]
        users = [k for k, i in enumerate(items) if i.get("role") == "user"]
        check(users and outs and users[-1] > max(outs), "the image is not after the results: %r",
              [i.get("type") or i.get("role") for i in items])
        parts = items[users[-1]]["content"]
        urls = [p["image_url"] for p in parts if p["type"] == "input_image"]
        check(urls == ["data:image/png;base64," + base64.b64encode(shot).decode()], "the image sent: %r",
              [u[:40] for u in urls])
        # an artifact with its lineage: the run, the tool call, the seq
        rc, out, err = cli(srv, "artifacts", sid, "--json")
        rows = [json.loads(line) for line in out.splitlines()]
        check(rc == 0 and len(rows) == 1 and rows[0]["origin"] == "tool.result" and rows[0]["call_id"] == "c1"
              and rows[0]["run_id"] == rid and rows[0]["sha256"] == ref["sha256"], "artifacts %r %s", rows, err)
    finally:
        srv.stop()
        llm.stop()


def test_attach_file_tool():
    """The model attaches a report (any type, not an image) with attach_file:
    the blob store holds the bytes, the tool.result references them as the
    session's artifact with its name and description, `artifacts` lists it
    with its lineage and `artifact get` gives the same bytes back; a path
    out of the workspace and a name with a '/' are refused. attach_file is
    read-only for the policy: `auto` runs it without asking."""
    from sbagent import LLM, llm_server
    llm = LLM()
    ws = tmpdir()
    report = b"# Report\n\nAll 12 tests pass.\n" * 40
    os.mkdir(os.path.join(ws, "out"))
    write_bytes(os.path.join(ws, "out", "report.md"), report)
    llm.script("af", [
        {"tool_calls": [{"name": "attach_file", "call_id": "a1",
                         "arguments": {"path": "out/report.md", "name": "report.md", "description": "the results"}},
                        {"name": "attach_file", "arguments": {"path": "../../etc/passwd"}, "call_id": "a2"},
                        {"name": "attach_file", "arguments": {"path": "out/report.md", "name": "a/b"},
                         "call_id": "a3"}]},
        {"text": "attached"},
    ])
    srv = llm_server(llm, "af")
    try:
        sid, rid = prompt_to_completion(srv, ws, "attach the report")
        entries = tape(srv, sid)
        results = {e["body"]["call_id"]: e for e in entries if e["kind"] == "tool.result"}
        a1 = results["a1"]["body"]
        ref = a1.get("artifact", {})
        check(a1["ok"] and ref.get("sha256") == hashlib.sha256(report).hexdigest() and ref.get("mime") == "text/plain"
              and ref.get("bytes") == len(report) and ref.get("name") == "report.md"
              and a1.get("description") == "the results" and "images" not in a1, "a1 %r", a1)
        check(not results["a2"]["body"]["ok"] and "artifact" not in results["a2"]["body"], "a2 %r", results["a2"])
        check(not results["a3"]["body"]["ok"] and "no '/'" in results["a3"]["body"]["output"], "a3 %r", results["a3"])
        # the model is not shown the file: no user message after the results
        items = llm.requests("af")[-1]["json"]["input"]
        check(not any(i.get("role") == "user" and "attach_file" in json.dumps(i) for i in items),
              "the artifact was shown to the model: %r", items[-2:])
        rc, out, err = cli(srv, "artifacts", sid, "--json")
        rows = [json.loads(line) for line in out.splitlines()]
        check(rc == 0 and len(rows) == 1 and rows[0]["origin"] == "tool.result" and rows[0]["call_id"] == "a1"
              and rows[0]["run_id"] == rid and rows[0]["seq"] == results["a1"]["seq"]
              and rows[0]["sha256"] == ref["sha256"], "artifacts %r %s", rows, err)
        got = os.path.join(tmpdir(), "got.md")
        rc, out, err = cli(srv, "artifact", "get", ref["sha256"], "-o", got, "--session", sid)
        check(rc == 0 and open(got, "rb").read() == report, "artifact get rc=%d %s", rc, err)
    finally:
        srv.stop()
        llm.stop()


def test_one_shot_run_with_an_image():
    """`switchboard run --goal TEXT --image FILE`: the one-shot's model
    request carries the image."""
    from sbtest import sb
    llm = LlmServer()
    try:
        pic = write_bytes(os.path.join(tmpdir(), "ui.png"), png(26, 14, seed=12))
        rc, out, err = sb("run", "--goal", "what is wrong here?", "--image", pic, "--repo", tmpdir(),
                          "--llm", "responses", "--llm-url", llm.base(gen=1, tag="o"), "--model", "m",
                          "--data", tmpdir(), timeout=60, env={"OPENAI_API_KEY": "sk-test"})
        check(rc == 0, "run --image exited %d: %s", rc, err[-600:])
        _, images = user_parts(last_request(llm, "responses", "o"), "responses")
        check(images == [("image/png", open(pic, "rb").read())], "the request: %r", [(m, len(b)) for m, b in images])
    finally:
        llm.stop()


def test_gateway_upload_and_download():
    """POST /api/blobs/SESSION takes the raw bytes (bounded, authorised);
    GET /api/blobs/SESSION/SHA256 gives them back as a download: the
    sniffed type, Content-Disposition: attachment, nosniff; never HTML."""
    from gwtest import Gateway
    gw = Gateway()
    try:
        sid = call(gw.srv, "session.create", {"workspace": tmpdir()})["session"]["session_id"]
        pic = png(40, 30, seed=9)
        status, _, body = gw.http("POST", "/api/blobs/%s?name=shot.png" % sid, raw=pic,
                                  headers={"Content-Type": "application/octet-stream"})
        check(status == 200, "upload: %d %r", status, body[:200])
        blob = json.loads(body)["blob"]
        check(blob["sha256"] == hashlib.sha256(pic).hexdigest() and blob["mime"] == "image/png"
              and blob["width"] == 40 and blob["name"] == "shot.png", "blob %r", blob)
        status, h, got = gw.http("GET", "/api/blobs/%s/%s" % (sid, blob["sha256"]))
        check(status == 200 and got == pic, "download: %d, %d bytes", status, len(got))
        check(h.get("content-type") == "image/png", "content-type %r", h.get("content-type"))
        check(h.get("content-disposition", "").startswith("attachment"), "disposition %r", h)
        check(h.get("x-content-type-options") == "nosniff", "nosniff %r", h)
        # an HTML page is stored as text and served as text, to be saved
        page = b"<html><script>alert(1)</script></html>\n"
        status, _, body = gw.http("POST", "/api/blobs/%s?name=x.html" % sid, raw=page)
        h2 = json.loads(body)["blob"]["sha256"]
        status, h, got = gw.http("GET", "/api/blobs/%s/%s" % (sid, h2))
        check(status == 200 and "html" not in h.get("content-type", ""), "html served as %r", h.get("content-type"))
        # no token, another session, a body over the bound
        status, _, _ = gw.http("GET", "/api/blobs/%s/%s" % (sid, blob["sha256"]), token=False)
        check(status == 401, "no token: %d", status)
        other = call(gw.srv, "session.create", {"workspace": tmpdir()})["session"]["session_id"]
        status, _, body = gw.http("GET", "/api/blobs/%s/%s" % (other, blob["sha256"]))
        check(status == 404, "another session reads it: %d %r", status, body[:200])
        status, _, body = gw.http("POST", "/api/blobs/%s" % sid, raw=b"x" * (24 * 1024 * 1024 + 1))
        check(status == 413 and b"24 MiB" in body, "over the bound: %d %r", status, body[:200])
        status, _, body = gw.http("GET", "/metrics")
        check(status == 200 and b'sb_bus_blobs{key="stored"} 2' in body, "metrics: %r",
              [ln for ln in body.split(b"\n") if b"blobs" in ln])
    finally:
        gw.srv.stop()


def test_figure_prompt_image_to_request():
    """The figure: from `switchboard prompt --image` of a 2 MB PNG to the
    model's request reaching the provider (the request log's line seen),
    median of 5. Asserts only that each request carried the image."""
    llm, srv = start()
    try:
        ws = tmpdir()
        times = []
        for k in range(5):
            pic = write_bytes(os.path.join(tmpdir(), "two.png"), png(820, 820, noisy=True))
            check(1.9e6 < os.path.getsize(pic) < 2.2e6, "test image %d bytes", os.path.getsize(pic))
            sid = new_session(srv, ws)
            # the log grows when a request has been read whole: a stat, not
            # a parse of megabytes of logged bodies, while waiting
            size = os.path.getsize(llm.log_path) if os.path.exists(llm.log_path) else 0
            before = len(llm.requests("responses", "r"))
            t0 = time.monotonic()
            rc, out, err = cli(srv, "prompt", sid, "look", "--image", pic, "--json", timeout=60)
            check(rc == 0, "prompt: %s", err)
            wait_for(lambda: os.path.exists(llm.log_path) and os.path.getsize(llm.log_path) > size, 30,
                     "the model's request", interval=0.002)
            times.append(time.monotonic() - t0)
            wait_for(lambda: len(llm.requests("responses", "r")) > before, 10, "the request's whole log line")
            _, images = user_parts(last_request(llm, "responses", "r"), "responses")
            check(images and images[0][1] == open(pic, "rb").read(), "request %d lacks the image", k)
            wait_run(srv, json.loads(out)["run_id"])
        times.sort()
        print("  figure: prompt --image (2 MB PNG) to the model's request: median %.0f ms (min %.0f, max %.0f)"
              % (times[2] * 1000, times[0] * 1000, times[-1] * 1000))
    finally:
        srv.stop()
        llm.stop()


if __name__ == "__main__":
    run_tests(globals())
