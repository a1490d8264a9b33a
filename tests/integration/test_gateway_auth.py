"""The gateway's doors (docs/gateway.md): the token (DATA/token, bearer,
cookie, ?token= with its 303), the Host allowlist, Origin on the
WebSocket upgrade, the security headers, static files, and the flags
that bind beyond loopback."""

import os
import stat

from sbtest import check, run_tests, sb, tmpdir
from gwtest import Gateway, make_ui, websocket


def test_token_file_and_bearer():
    gw = Gateway()
    st = os.stat(os.path.join(gw.srv.data, "token"))
    check(stat.S_IMODE(st.st_mode) == 0o600, "DATA/token has mode %o", stat.S_IMODE(st.st_mode))
    check(len(gw.token) == 64, "token %r", gw.token)
    status, body = gw.api("GET", "/api/sessions", token=None)
    check(status == 401 and body["error"]["code"] == "unauthorized", "no token: %d %r", status, body)
    status, body = gw.api("GET", "/api/sessions", token="0" * 64)
    check(status == 401, "wrong token: %d %r", status, body)
    status, body = gw.api("GET", "/api/sessions", token=gw.token[:-1])
    check(status == 401, "a prefix of the token: %d %r", status, body)
    status, body = gw.api("GET", "/api/sessions")
    check(status == 200 and body == {"sessions": []}, "right token: %d %r", status, body)
    # ?token= is for page loads only: an API call must not leak it into logs
    status, body = gw.api("GET", "/api/sessions?token=" + gw.token, token=None)
    check(status == 401, "?token= on the API: %d %r", status, body)
    status, _, data = gw.http("GET", "/healthz", token=None)
    check(status == 200 and data == b"ok\n", "healthz: %d %r", status, data)
    status, _, data = gw.http("GET", "/metrics", token=None)
    check(status == 401, "metrics without a token: %d", status)
    # the same token after a restart
    token = gw.token
    check(gw.srv.stop() == 0, "serve did not stop cleanly")
    gw.srv.start()
    with open(os.path.join(gw.srv.data, "token")) as f:
        check(f.read().strip() == token, "the token changed across a restart")


def test_cookie_redirect_and_static():
    ui = make_ui(os.path.join(tmpdir(), "ui"))
    gw = Gateway(ui=ui)
    status, h, _ = gw.http("GET", "/?token=%s&view=x%%20y" % gw.token, token=None)
    check(status == 303, "page load with the token: %d", status)
    check(h.get("location") == "/?view=x%20y", "the redirect keeps the rest of the query: %r", h.get("location"))
    cookie = h.get("set-cookie", "")
    check(cookie.startswith("sb_token_%d=%s;" % (gw.port, gw.token)) and "HttpOnly" in cookie and "SameSite=Strict" in cookie,
          "cookie %r", cookie)
    status, h, _ = gw.http("GET", "/?token=" + "1" * 64, token=None)
    check(status == 401 and "set-cookie" not in h, "wrong token on a page load: %d %r", status, h)
    status, h, data = gw.http("GET", "/", token=None, headers={"Cookie": "a=b; sb_token_%d=%s" % (gw.port, gw.token)})
    check(status == 200 and b"<title>switchboard</title>" in data, "index with the cookie: %d %r", status, data)
    check(h.get("content-type", "").startswith("text/html"), "content-type %r", h.get("content-type"))
    csp = h.get("content-security-policy", "")
    check("default-src 'self'" in csp and "unsafe-inline" not in csp, "CSP %r", csp)
    check(h.get("x-content-type-options") == "nosniff", "nosniff: %r", h)
    check(h.get("referrer-policy") == "no-referrer", "referrer-policy: %r", h)
    status, h, data = gw.http("GET", "/app.js")
    check(status == 200 and h["content-type"].startswith("text/javascript"), "app.js: %d %r", status, h)
    status, _, _ = gw.http("GET", "/app.js", token=None)
    check(status == 401, "static file without a token: %d", status)
    for bad in ("/../token", "/..%2Ftoken", "/.hidden", "/nope.js", "/%2e%2e/token"):
        status, _, data = gw.http("GET", bad)
        check(status == 404, "%s: %d %r", bad, status, data[:100])


def test_host_allowlist():
    gw = Gateway(args=["--allow-host", "box.lan"])
    for host, want in (("evil.example", 403), ("evil.example:%d" % gw.port, 403), ("127.0.0.1.evil", 403),
                       ("localhost:%d" % gw.port, 200), ("127.0.0.1", 200), ("[::1]:%d" % gw.port, 200),
                       ("LOCALHOST", 200), ("box.lan:%d" % gw.port, 200)):
        status, body = gw.api("GET", "/api/sessions", headers={"Host": host})
        check(status == want, "Host %s: %d %r (want %d)", host, status, body, want)
    try:
        websocket.create_connection("ws://127.0.0.1:%d/ws?token=%s" % (gw.port, gw.token),
                                    host="evil.example", origin="http://evil.example", timeout=5)
        check(False, "a WebSocket with a foreign Host was accepted")
    except websocket.WebSocketBadStatusException as e:
        check(e.status_code == 403, "foreign Host upgrade: %r", e)


def test_ws_token_and_origin():
    gw = Gateway()
    try:
        gw.ws(token=None)
        check(False, "a WebSocket without the token was accepted")
    except websocket.WebSocketBadStatusException as e:
        check(e.status_code == 401, "no token: %r", e)
    try:
        gw.ws(token="f" * 64)
        check(False, "a WebSocket with a wrong token was accepted")
    except websocket.WebSocketBadStatusException as e:
        check(e.status_code == 401, "wrong token: %r", e)
    for origin in ("http://evil.example", "http://127.0.0.1:%d.evil" % gw.port, "null",
                   "https://127.0.0.1:%d" % gw.port, "http://127.0.0.1:1"):
        try:
            gw.ws(origin=origin)
            check(False, "Origin %s was accepted" % origin)
        except websocket.WebSocketBadStatusException as e:
            check(e.status_code == 403, "Origin %s: %r", origin, e)
    # the browser's way: the cookie set by the page load, and its own origin
    w = gw.ws(token=None, cookie="sb_token_%d=%s" % (gw.port, gw.token))
    check(w.call_op("ping", {})["type"] == "pong", "ping over a cookie-authenticated socket")
    w.close()
    # not a browser: no Origin, the token in the URL
    w = gw.ws(origin=None)
    check(w.call_op("ping", {})["type"] == "pong", "ping without Origin")
    w.close()
    try:
        gw.ws(path="/elsewhere")
        check(False, "an upgrade outside /ws was accepted")
    except websocket.WebSocketBadStatusException as e:
        check(e.status_code == 404, "upgrade at /elsewhere: %r", e)


def test_binding_beyond_loopback_needs_tls_or_a_flag():
    d = tmpdir()
    rc, out, err = sb("serve", "--data", d, "--http", "0.0.0.0:0", timeout=10)
    check(rc == 2 and "--insecure-http" in err and "--tls-cert" in err, "0.0.0.0 without TLS: %d %r", rc, err)
    rc, out, err = sb("serve", "--data", d, "--http", "127.0.0.1:0", "--tls-cert", "/nonexistent", timeout=10)
    check(rc == 2 and "--tls-key" in err, "half a TLS pair: %d %r", rc, err)
    gw = Gateway(args=["--http", "0.0.0.0:0", "--insecure-http"])
    status, body = gw.api("GET", "/api/sessions")
    check(status == 200, "0.0.0.0 with --insecure-http: %d %r", status, body)


def test_tls():
    import http.client
    import shutil
    import ssl
    import subprocess
    if not shutil.which("openssl"):
        return print("  (openssl is missing: TLS not checked)")
    d = tmpdir()
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=localhost"], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    gw = Gateway(args=["--tls-cert", cert, "--tls-key", key])
    ctx = ssl.create_default_context(cafile=cert)
    ctx.check_hostname = False
    conn = http.client.HTTPSConnection("127.0.0.1", gw.port, context=ctx, timeout=10)
    conn.request("GET", "/?token=" + gw.token, headers={"Host": "localhost:%d" % gw.port})
    r = conn.getresponse()
    r.read()
    check(r.status == 303 and "Secure" in (r.getheader("set-cookie") or ""), "TLS page load: %d %r",
          r.status, r.getheaders())
    conn.request("GET", "/api/sessions", headers={"Host": "localhost", "Authorization": "Bearer " + gw.token})
    r = conn.getresponse()
    check(r.status == 200 and r.read() == b'{"sessions":[]}', "TLS API: %d", r.status)
    conn.close()
    w = websocket.create_connection("wss://127.0.0.1:%d/ws?token=%s" % (gw.port, gw.token),
                                    origin="https://localhost:%d" % gw.port, host="localhost:%d" % gw.port,
                                    sslopt={"cert_reqs": ssl.CERT_NONE}, timeout=10)
    w.send('{"op":"ping","tx":1}')
    check('"pong"' in w.recv(), "ping over wss")
    w.close()


def test_port_taken_is_an_error_when_explicit():
    gw = Gateway()
    d = tmpdir()
    rc, out, err = sb("serve", "--data", d, "--http", "127.0.0.1:%d" % gw.port, timeout=15)
    check(rc == 1 and "gateway" in err + out, "a taken explicit port: %d %r %r", rc, out[-300:], err[-300:])


run_tests(globals())
