"""Cancel and concurrency in the llm actor, end to end.

- Cancel mid-stream: llm.cancel, sent to the instance that holds the stream
  (header to = the chunks' header.from), ends it with llm.stream.ok
  {stop_reason: cancelled} within 100 ms, no chunk follows, and the
  provider sees its connection closed (the transfer was freed). With two
  llm instances, each cancel reaches the one that streams.
- 500 concurrent streams through one actor all complete, each with its own
  content (20 providers with distinct delta texts and counts), contiguous
  seqs, and the usage the server reported."""

import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import SB_BIN, Client, Proc, check, run_tests, unpack, wait_for  # noqa: E402
from sbllm import LlmServer, provider, serve_llm, stream_body, texts, write_providers  # noqa: E402

KEY = {"OPENAI_API_KEY": "sk-cancel", "ANTHROPIC_API_KEY": "sk-ant-cancel"}


class Recorder:
    """Everything a client receives, grouped by the request it answers."""

    def __init__(self, client):
        self.client = client
        self.by_corr = {}

    def pump_until(self, cond, timeout, what):
        deadline = time.monotonic() + timeout
        while not cond():
            m = self.client.recv(timeout=max(0.0, deadline - time.monotonic()))
            check(m is not None, "timed out waiting for %s", what)
            self.by_corr.setdefault(m.corr, []).append(m)

    def chunks(self, rid):
        return [m for m in self.by_corr.get(rid, []) if m.type == "llm.stream.chunk"]

    def final(self, rid):
        for m in self.by_corr.get(rid, []):
            if m.type != "llm.stream.chunk":
                return m
        return None

    def start(self, provider_name, n_text=3):
        """Starts a stream and returns its id once n_text text chunks came."""
        rid = self.client.send("llm.stream", stream_body(provider_name))

        def enough():
            check(self.final(rid) is None, "stream ended early: %r", self.final(rid))
            return sum(1 for c in self.chunks(rid) if c.body.get("kind") == "text") >= n_text
        self.pump_until(enough, 10, "%d text chunks" % n_text)
        return rid

    def instance(self, rid):
        return self.chunks(rid)[0].header["from"]

    def cancel(self, rid, tag):
        """Cancels at the stream's instance; checks the final reply came
        within 100 ms, the seqs had no gap and nothing followed it."""
        chunks = self.chunks(rid)
        check(chunks[0].body == {"kind": "open", "stream_id": rid}, "open chunk %r", chunks[0].body)
        instance = chunks[0].header["from"]
        t0 = time.monotonic()
        cid = self.client.send("llm.cancel", {"stream_id": rid}, to=instance)
        self.pump_until(lambda: self.final(rid) is not None, 5, "the cancelled stream's final reply")
        dt = time.monotonic() - t0
        ok = self.final(rid)
        check(ok.type == "llm.stream.ok" and ok.body.get("stop_reason") == "cancelled",
              "%s: final %s %r", tag, ok.type, ok.body)
        check(ok.header.get("from") == instance, "%s: answered by %r, not %r", tag,
              ok.header.get("from"), instance)
        check(dt <= 0.100, "%s: cancelled after %.1f ms, want <= 100 ms", tag, dt * 1000)
        seqs = [c.header["seq"] for c in self.chunks(rid)]
        check(seqs == list(range(1, len(seqs) + 1)), "%s: seqs %r", tag, seqs)
        self.pump_until(lambda: self.final(cid) is not None, 5, "llm.cancel.ok")
        reply = self.final(cid)
        check(reply.type == "llm.cancel.ok" and reply.body == {"cancelled": True},
              "%s: cancel reply %r", tag, reply.body)

    def nothing_after_final(self, rid):
        msgs = self.by_corr.get(rid, [])
        check(msgs and msgs[-1].type != "llm.stream.chunk", "a chunk after the final reply of %s: %r",
              rid, msgs[-1:])


def test_cancel_mid_stream():
    llm = LlmServer()
    srv = serve_llm([provider("slow", "responses", llm.base(gen=2000, delay_ms=20, tag="slow")),
                     provider("quick", "chat", llm.base(gen=3, tag="quick"))], env=KEY)
    client = Client(srv.endpoint())
    rec = Recorder(client)
    try:
        rid = rec.start("slow")
        check(llm.connections() == 1, "the server holds %d connections mid-stream", llm.connections())
        rec.cancel(rid, "slow")
        wait_for(lambda: llm.connections() == 0, 3, "the server to see the connection closed")
        # nothing of the stream comes after its final reply
        for m in client.drain():
            rec.by_corr.setdefault(m.corr, []).append(m)
        rec.nothing_after_final(rid)
        again = client.request("llm.cancel", {"stream_id": rid}, to=rec.instance(rid))
        check(again.type == "llm.cancel.ok" and again.body == {"cancelled": False},
              "a second cancel %r", again.body)
        # the actor serves on
        final = client.wait_reply(client.send("llm.stream", stream_body("quick")), 5)
        check(final.type == "llm.stream.ok" and texts([c.body for c in final.chunks[1:]]) == "tok " * 3,
              "a stream after the cancel: %r", final.body)
    finally:
        client.close()
        srv.stop()
        llm.stop()


def test_cancel_reaches_the_instance_that_streams():
    """Two llm instances (serve's and a standalone `actor llm`): two
    streams land on both, and each cancel, addressed with header.to, ends
    its own stream and only that. A cancel sent to the other instance
    cancels nothing."""
    llm = LlmServer()
    provs = [provider("slow", "anthropic", llm.base(gen=2000, delay_ms=20, tag="two"))]
    srv = serve_llm(provs, env=KEY)
    path = write_providers(provs)
    extra = Proc([SB_BIN, "actor", "llm", "--data", srv.data, "--instance", "llm-extra",
                  "--providers", path], os.path.join(srv.data, "actor-llm.log"), env=KEY)
    client = Client(srv.endpoint())
    rec = Recorder(client)
    try:
        wait_for(lambda: len(srv.instances("llm")) == 2, 5, "two llm instances")
        a = rec.start("slow")
        b = rec.start("slow")
        ia, ib = rec.instance(a), rec.instance(b)
        check(ia != ib, "both streams went to %s (the broker should spread them)", ia)
        check(llm.connections() == 2, "connections %d", llm.connections())
        rec.cancel(a, "first")
        wait_for(lambda: llm.connections() == 1, 3, "the first stream's connection to close")
        # the other stream still runs
        n = len(rec.chunks(b))
        rec.pump_until(lambda: len(rec.chunks(b)) > n + 3, 5, "the second stream to go on")
        check(rec.final(b) is None, "the second stream ended: %r", rec.final(b))
        rec.cancel(b, "second")
        wait_for(lambda: llm.connections() == 0, 3, "both connections closed")
        c = rec.start("slow")
        other = ib if rec.instance(c) == ia else ia
        wrong = client.request("llm.cancel", {"stream_id": c}, to=other)
        check(wrong.type == "llm.cancel.ok" and wrong.body == {"cancelled": False},
              "cancel at the wrong instance %r", wrong.body)
        check(llm.connections() == 1, "the stream should still run")
        # request() kept the stream's messages in the client's backlog
        for m in client.drain():
            rec.by_corr.setdefault(m.corr, []).append(m)
        rec.cancel(c, "third")
        for m in client.drain():
            rec.by_corr.setdefault(m.corr, []).append(m)
        for rid in (a, b):
            rec.nothing_after_final(rid)
    finally:
        client.close()
        extra.kill()
        srv.stop()
        llm.stop()


def test_500_concurrent_streams():
    N, P = 500, 20
    llm = LlmServer()
    provs = []
    want = {}
    for k in range(P):
        name = "p%02d" % k
        gen = 40 + k
        delta = "w%02d_" % k
        provs.append(provider(name, ("responses", "chat", "anthropic")[k % 3],
                              llm.base(gen=gen, delta=delta, tag=name)))
        want[name] = (delta * gen, gen)
    srv = serve_llm(provs, env=KEY)
    client = Client(srv.endpoint())
    try:
        ids = {}
        t0 = time.monotonic()
        for i in range(N):
            name = "p%02d" % (i % P)
            ids[client.send("llm.stream", stream_body(name))] = name
        finals, chunks = {}, {rid: [] for rid in ids}
        deadline = time.monotonic() + 60
        sock = client.sock
        while len(finals) < N:
            left = deadline - time.monotonic()
            check(left > 0 and sock.poll(int(left * 1000)), "only %d of %d streams ended", len(finals), N)
            h, b = sock.recv_multipart()
            h, b = unpack(h), unpack(b)
            rid = h.get("corr")
            check(rid in ids, "a message for no stream of ours: %r", h)
            if h["type"] == "llm.stream.chunk":
                check(rid not in finals, "a chunk after the final reply of %s", rid)
                chunks[rid].append((h, b))
            else:
                finals[rid] = (h, b)
        elapsed = time.monotonic() - t0
        senders = set()
        for rid, name in ids.items():
            h, b = finals[rid]
            check(h["type"] == "llm.stream.ok", "%s (%s): %s %r", rid, name, h["type"], b)
            seqs = [c[0]["seq"] for c in chunks[rid]]
            check(seqs == list(range(1, len(seqs) + 1)), "%s: seqs not contiguous", rid)
            check(chunks[rid][0][1] == {"kind": "open", "stream_id": rid}, "%s: first chunk %r", rid,
                  chunks[rid][0][1])
            text, gen = want[name]
            got = texts([c[1] for c in chunks[rid][1:]])
            check(got == text, "%s (%s): text %r..., want %r...", rid, name, got[:40], text[:40])
            check(b.get("usage", {}).get("output_tokens") == gen and b.get("attempts") == 1,
                  "%s: final %r", rid, b)
            senders |= {c[0]["from"] for c in chunks[rid]} | {h["from"]}
        check(len(senders) == 1, "streams served by %r; one actor expected", senders)
        check(len(llm.requests()) == N, "the server saw %d requests", len(llm.requests()))
        print("  500 streams, %d chunks in %.2f s" % (sum(len(v) for v in chunks.values()), elapsed))
    finally:
        client.close()
        srv.stop()
        llm.stop()


if __name__ == "__main__":
    run_tests(globals())
