#!/usr/bin/python3
"""An OAuth-protected streamable-HTTP MCP server and its authorization
server, on one loopback port (stdlib only), for
tests/integration/test_mcp_oauth.py.

    oauth_server.py --portfile FILE --log FILE [--ttl S] [--no-revocation]

Authorization server (RFC 8414 metadata, RFC 7591 registration, PKCE S256
checked, RFC 8707 resource checked): /authorize approves at once and
redirects to the redirect_uri with a code (the person's approval is the
test's GET of the URL). Tokens live --ttl seconds (default 3600); refresh
tokens rotate (a used one is refused, and logged). The MCP server at /mcp wants a valid bearer token with the
scope `mcp:read` (401 with resource_metadata otherwise), and, once
/admin/step-up was posted, `mcp:write` too for tools/call (403
insufficient_scope). POST /admin/revoke revokes every token. /revoke is
the RFC 7009 revocation endpoint (its metadata names it unless
--no-revocation): it forgets the token posted, and logs it.

Tools: `whoami` answers "call N ok"; `leak` answers the Authorization
header it got (a server that echoes its credentials).

Every token request, issued token, authorization and refusal is appended
to --log as one JSON line.
"""
import argparse
import os
import base64
import hashlib
import json
import secrets
import threading
import time
import urllib.parse
from http.server import ThreadingHTTPServer

from jsonhttp import JsonHandler

lock = threading.Lock()
clients = {}                    # client_id -> redirect_uris
codes = {}                      # code -> {challenge, scope, resource, redirect_uri}
access = {}                     # token -> {scope, expires}
refresh = {}                    # token -> scope
state = {"step_up": False, "calls": 0}
args = None
base = ""


def log(rec):
    with lock, open(args.log, "a") as f:
        f.write(json.dumps(rec) + "\n")


def issue(scope):
    a, r = "at-" + secrets.token_urlsafe(24), "rt-" + secrets.token_urlsafe(24)
    with lock:
        access[a] = {"scope": scope, "expires": time.time() + args.ttl}
        refresh[r] = scope
    log({"issued": [a, r], "scope": scope})
    return {"access_token": a, "token_type": "Bearer", "expires_in": args.ttl, "refresh_token": r, "scope": scope}


class Handler(JsonHandler):

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def do_GET(self):
        u = urllib.parse.urlparse(self.path)
        q = dict(urllib.parse.parse_qsl(u.query))
        if u.path == "/.well-known/oauth-protected-resource/mcp":
            return self.answer(200, {"resource": base + "/mcp", "authorization_servers": [base],
                                     "scopes_supported": ["mcp:read"]})
        if u.path == "/.well-known/oauth-authorization-server":
            return self.answer(200, {
                "issuer": base, "authorization_endpoint": base + "/authorize", "token_endpoint": base + "/token",
                "registration_endpoint": base + "/register", "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "code_challenge_methods_supported": ["S256"], "token_endpoint_auth_methods_supported": ["none"],
                "scopes_supported": ["mcp:read", "mcp:write", "offline_access"],
                **({} if args.no_revocation else {"revocation_endpoint": base + "/revoke"})})
        if u.path == "/authorize":
            log({"authorize": q})
            ok = (q.get("client_id") in clients and q.get("redirect_uri") in clients[q["client_id"]]
                  and q.get("code_challenge_method") == "S256" and q.get("resource") == base + "/mcp")
            if not ok:
                return self.answer(400, {"error": "invalid_request"})
            code = secrets.token_urlsafe(16)
            with lock:
                codes[code] = {"challenge": q["code_challenge"], "scope": q.get("scope", ""),
                               "redirect_uri": q["redirect_uri"]}
            back = q["redirect_uri"] + "?" + urllib.parse.urlencode({"code": code, "state": q.get("state", "")})
            return self.answer(302, None, [("Location", back)])
        return self.answer(404, {"error": "not_found"})

    def do_POST(self):
        u = urllib.parse.urlparse(self.path)
        raw = self.body()
        if u.path == "/register":
            req = json.loads(raw)
            cid = "client-" + secrets.token_hex(4)
            with lock:
                clients[cid] = req.get("redirect_uris", [])
            log({"registered": cid, "grant_types": req.get("grant_types")})
            return self.answer(201, {"client_id": cid, "redirect_uris": clients[cid],
                                     "token_endpoint_auth_method": "none"})
        if u.path == "/token":
            f = dict(urllib.parse.parse_qsl(raw.decode()))
            log({"token": f.get("grant_type"), "resource": f.get("resource")})
            if f.get("resource") != base + "/mcp":
                return self.answer(400, {"error": "invalid_target"})
            if f.get("grant_type") == "authorization_code":
                with lock:
                    c = codes.pop(f.get("code", ""), None)
                verifier = f.get("code_verifier", "").encode()
                want = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=").decode()
                if not c or c["challenge"] != want or c["redirect_uri"] != f.get("redirect_uri"):
                    return self.answer(400, {"error": "invalid_grant"})
                return self.answer(200, issue(c["scope"]))
            if f.get("grant_type") == "refresh_token":
                with lock:
                    scope = refresh.pop(f.get("refresh_token", ""), None)
                if scope is None:
                    log({"refused_refresh": True})
                    return self.answer(400, {"error": "invalid_grant", "error_description": "revoked"})
                return self.answer(200, issue(scope))
            return self.answer(400, {"error": "unsupported_grant_type"})
        if u.path == "/revoke" and not args.no_revocation:
            f = dict(urllib.parse.parse_qsl(raw.decode()))
            tok = f.get("token", "")
            with lock:
                known = access.pop(tok, None) is not None or refresh.pop(tok, None) is not None
                client = f.get("client_id") in clients
            log({"revoke": f.get("token_type_hint"), "known": known, "client": client})
            return self.answer(200 if client else 401, {} if client else {"error": "invalid_client"})
        if u.path == "/admin/revoke":
            with lock:
                access.clear()
                refresh.clear()
            log({"revoked": True})
            return self.answer(200, {})
        if u.path == "/admin/step-up":
            state["step_up"] = True
            return self.answer(200, {})
        if u.path == "/mcp":
            return self.mcp(json.loads(raw))
        return self.answer(404, {"error": "not_found"})

    def do_DELETE(self):
        self.answer(200)

    def mcp(self, msg):
        meta = 'resource_metadata="%s/.well-known/oauth-protected-resource/mcp"' % base
        auth = self.headers.get("Authorization", "")
        tok = auth[7:] if auth.startswith("Bearer ") else None
        with lock:
            t = access.get(tok)
        if not t or t["expires"] < time.time():
            log({"refused": 401, "expired": bool(t), "method": msg.get("method")})
            return self.answer(401, {"error": "invalid_token"},
                               [("WWW-Authenticate", 'Bearer error="invalid_token", scope="mcp:read", ' + meta)])
        have = t["scope"].split()
        need = ["mcp:read"] + (["mcp:write"] if state["step_up"] and msg.get("method") == "tools/call" else [])
        if not all(s in have for s in need):
            log({"refused": 403, "method": msg.get("method")})
            return self.answer(403, {"error": "insufficient_scope"}, [(
                "WWW-Authenticate", 'Bearer error="insufficient_scope", scope="%s", %s' % (" ".join(need), meta))])
        m, mid = msg.get("method"), msg.get("id")
        if mid is None:
            return self.answer(202)
        if m == "initialize":
            res = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                   "serverInfo": {"name": "oauth-test", "version": "1"}}
        elif m == "tools/list":
            res = {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in ("whoami", "leak")]}
        elif m == "tools/call":
            state["calls"] += 1
            text = auth if msg["params"]["name"] == "leak" else "call %d ok" % state["calls"]
            res = {"content": [{"type": "text", "text": text}]}
        else:
            res = {}
        return self.answer(200, {"jsonrpc": "2.0", "id": mid, "result": res})


def main():
    global args, base
    p = argparse.ArgumentParser()
    p.add_argument("--portfile", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--ttl", type=int, default=3600)
    p.add_argument("--no-revocation", action="store_true")
    args = p.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    base = "http://127.0.0.1:%d" % srv.server_address[1]
    with open(args.portfile + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(args.portfile + ".tmp", args.portfile)
    srv.serve_forever()


if __name__ == "__main__":
    main()
