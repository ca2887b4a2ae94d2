"""A Streamable HTTP MCP upstream (Python's standard library only) that
answers `tools/call` with 404, for Handover's tests of what a 404 to a
session id proves. No SDK answers a call both ways, so this one is made
by hand; it speaks just enough MCP for the proxy: `initialize` (assigning
a session id), notifications (202), `tools/list` (`charge` with an
integer `order_no`) and `tools/call` of `charge`.

Every applied charge is appended to the JSON-lines file $SHIPPING_LOG
before anything is answered. What a call of order N does is
$UPSTREAM_404_MODE:
  result   apply, then answer 404 whose body is the call's JSON-RPC result
  error    apply nothing, forget the session, answer 404 with a JSON-RPC
           error body (what the SDKs send for a session they do not know)
  race     order 2 answers as `error` once order 1 has arrived; order 1
           waits for a line on the FIFO $UPSTREAM_RELEASE, then applies and
           is answered 200 (a call in flight when another gets its 404)
  ok       apply, answer 200
It prints the port it listens on (127.0.0.1), then serves until killed.
"""

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG = os.environ["SHIPPING_LOG"]
MODE = os.environ.get("UPSTREAM_404_MODE", "ok")
SCHEMA = {"type": "object", "properties": {"order_no": {"type": "integer"}}, "required": ["order_no"]}
sessions = set()
first_arrived = threading.Event()


def apply(order_no):
    with open(LOG, "a") as f:
        f.write(json.dumps({"tool": "charge", "order_no": order_no}) + "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body=None, headers=None):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def do_DELETE(self):
        sessions.discard(self.headers.get("mcp-session-id"))
        self.reply(200)

    def do_GET(self):
        self.reply(405)

    def do_POST(self):
        message = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
        session, method, rid = self.headers.get("mcp-session-id"), message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method == "initialize":
            sessions.add(f"s{len(sessions) + 1}")
            result = {"protocolVersion": params.get("protocolVersion"), "capabilities": {"tools": {}},
                      "serverInfo": {"name": "http-404", "version": "1"}}
            return self.reply(200, {"jsonrpc": "2.0", "id": rid, "result": result},
                              {"mcp-session-id": f"s{len(sessions)}"})
        if session not in sessions:
            return self.not_found()
        if rid is None:
            return self.reply(202)
        if method == "tools/list":
            tools = [{"name": "charge", "inputSchema": SCHEMA}]
            return self.reply(200, {"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}})
        if method == "tools/call":
            return self.call(session, rid, params["arguments"]["order_no"])
        self.reply(200, {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no such method"}})

    def not_found(self):
        self.reply(404, {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": "Session not found"}})

    def call(self, session, rid, order_no):
        result = {"jsonrpc": "2.0", "id": rid,
                  "result": {"content": [{"type": "text", "text": f"charged {order_no}"}], "isError": False}}
        mode = MODE
        if MODE == "race" and order_no == 1:
            first_arrived.set()
            with open(os.environ["UPSTREAM_RELEASE"]) as release:
                release.readline()
            mode = "ok"
        elif MODE == "race":
            if not first_arrived.wait(30):
                return self.reply(500)
            mode = "error"
        if mode == "error":
            sessions.discard(session)
            return self.not_found()
        apply(order_no)
        self.reply(404 if mode == "result" else 200, result)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
sys.stdout.close()
server.serve_forever()
