"""What the tests of MCP over streamable HTTP share
(test_mcp_http_errors.py, test_mcp_elicit.py): tests/mcp/http_server.py
on a loopback port, an mcpServers file, a served run that uses it."""
import contextlib
import json
import os

from sbtest import ROOT, Proc, Server, check, read_jsonl, tmpdir, wait_for
from sbagent import LLM, LLM_ENV, llm_args, new_session, prompt, tape, wait_run

HTTP_MCP = os.path.join(ROOT, "tests", "mcp", "http_server.py")


class HttpMcp:
    """tests/mcp/http_server.py on an ephemeral loopback port (standalone:
    it offers the standalone GET stream, after get_delay_ms)."""

    def __init__(self, token=None, standalone=False, get_delay_ms=0):
        d = tmpdir()
        self.portfile, self.logfile = os.path.join(d, "port"), os.path.join(d, "mcp.jsonl")
        argv = ["/usr/bin/python3", HTTP_MCP, "--portfile", self.portfile, "--log", self.logfile]
        argv += (["--token", token] if token else []) + (["--standalone"] if standalone else [])
        argv += ["--get-delay-ms", str(get_delay_ms)] if get_delay_ms else []
        self.proc = Proc(argv, os.path.join(d, "mcp.log"))
        wait_for(lambda: os.path.exists(self.portfile), 10, "the HTTP MCP server to listen")
        with open(self.portfile) as f:
            self.url = "http://127.0.0.1:%s/mcp" % f.read().strip()

    def log(self):
        return read_jsonl(self.logfile)

    def stop(self):
        self.proc.stop()


def mcp_config(servers):
    path = os.path.join(tmpdir(), "mcp.json")
    with open(path, "w") as f:
        json.dump({"mcpServers": servers}, f)
    return path


@contextlib.contextmanager
def http_run(mcp, name, steps, text="go"):
    """serve with the HTTP MCP server as `h` and a model that plays
    `steps`; one prompt run to completion. Yields (srv, sid, tape); stops
    the server, the model and the MCP server after."""
    llm = LLM()
    llm.script(name, steps)
    srv = None
    try:
        srv = Server(args=llm_args(llm, name) + ["--mcp-config", mcp_config({"h": {"url": mcp.url}})],
                     env=LLM_ENV).start()
        sid = new_session(srv, tmpdir(), approval_policy="yolo")
        r = wait_run(srv, prompt(srv, sid, text), timeout=40)
        check(r["status"] == "completed", "the run ended %s: %s", r["status"], r.get("reason"))
        yield srv, sid, tape(srv, sid)
    finally:
        if srv:
            srv.stop()
        llm.stop()
        mcp.stop()
