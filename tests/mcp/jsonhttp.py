"""What the HTTP servers of tests/mcp (http_server.py, oauth_server.py)
share: a request handler that answers JSON, stdlib only."""
import json
from http.server import BaseHTTPRequestHandler


class JsonHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"   # the body ends when we close

    def log_message(self, *a):
        pass

    def answer(self, status, body=None, headers=()):
        """Answers `status` with `body` as JSON (none when None) and the
        (name, value) pairs of `headers`."""
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
