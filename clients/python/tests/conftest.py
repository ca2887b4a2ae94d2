"""A real `handover serve` (the binary cargo built) on a SQLite file and on
PostgreSQL, and a real HTTP destination that counts its effects.

``HANDOVER_BIN`` names the binary (the cargo test that runs this suite sets
it); PostgreSQL runs when ``HANDOVER_TEST_POSTGRES_URL`` is set, and fails,
not skips, when it is set but unreachable.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

import handover_client as hc

CLIENT_TOKEN = "python-client-token"
OTHER_TOKEN = "python-other-client-token"
OPERATOR_TOKEN = "python-operator-token"
MAX_BODY = 32768


def _sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


NO_PROVIDERS = """
[providers.local]
kind = "openai_compatible"
base_url = "http://127.0.0.1:9/v1"
model = "m"

[policies.default]
chain = ["local"]
"""


def config(ledger: str, scope: str, providers: str = NO_PROVIDERS, max_body: int = MAX_BODY) -> str:
    """A serve configuration: actions with different write contracts, two
    clients with their own scopes, one operator; request bodies up to
    ``max_body`` bytes."""
    return f"""{ledger}
{providers}

[actions.create_shipment]   # no idempotency contract: an unknown blocks every re-send
block = "operation"
timeout = "1s"

[actions.create_label]      # the destination deduplicates on Idempotency-Key for 24h
block = "operation"
[actions.create_label.idempotency]
header = "Idempotency-Key"
retention = "24h"

[actions.refund]            # one unknown refund holds every refund of the scope
block = "scope"

[actions.cancel_order]      # a short lease: a vanished holder is found out quickly
block = "operation"
lease = "1s"
timeout = "1s"              # the lease must cover the destination call

[actions.book_room]         # the agent runs the lookup (pull API); absence proves nothing for an hour
block = "operation"
[actions.book_room.lookup]
visibility_lag = "1h"
check_every = "1ms"

[actions.book_table]        # the agent runs the lookup; absence is proof once a dispatch has surely ended
block = "operation"
timeout = "1ms"             # ...which is its executor timeout plus the lag after it was sent
[actions.book_table.lookup]
visibility_lag = "1ms"
check_every = "1ms"

[actions.hold_room]         # a short lease, the agent runs the lookup: an executor that outlives
block = "operation"         # its lease can find the operation already decided
lease = "1s"
timeout = "1s"
[actions.hold_room.lookup]
visibility_lag = "1ms"
check_every = "1ms"

[gateway]
listen = "127.0.0.1:0"
max_body_bytes = {max_body}

[gateway.clients.app]
token_sha256 = "{_sha(CLIENT_TOKEN)}"
scope = "{scope}"

[gateway.clients.other]
token_sha256 = "{_sha(OTHER_TOKEN)}"
scope = "{scope}-other"

[gateway.operators.ops]
token_sha256 = "{_sha(OPERATOR_TOKEN)}"
"""


@dataclass
class Gateway:
    """A running `handover serve`."""

    backend: str
    url: str
    scope: str

    def client(self, token: str = CLIENT_TOKEN, **kw: Any) -> hc.Client:
        return hc.Client(self.url, token, **kw)

    def async_client(self, token: str = CLIENT_TOKEN, **kw: Any) -> hc.AsyncClient:
        return hc.AsyncClient(self.url, token, **kw)


def _binary() -> str:
    path = os.environ.get("HANDOVER_BIN")
    if not path:
        pytest.fail("HANDOVER_BIN must name the `handover` binary (cargo test sets it)")
    return path


def start_serve(text: str, tmp: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    """Starts `handover serve` with this configuration; returns it and its URL."""
    cfg = tmp / "handover.toml"
    cfg.write_text(text)
    proc = subprocess.Popen(
        [_binary(), "serve", "--config", str(cfg)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:  # the readiness signal: the line naming the address
        seen.append(line)
        if "listening on " in line:
            url = line.split("listening on ", 1)[1].split()[0]
            break
    else:
        proc.wait(timeout=30)
        pytest.fail(f"handover serve exited before listening ({proc.returncode}):\n{''.join(seen)}")
    # Keep reading its log so the pipe never fills.
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()  # type: ignore[union-attr]
    return proc, url


def stop_serve(proc: subprocess.Popen[str]) -> None:
    """SIGINT, and it must exit cleanly."""
    proc.send_signal(signal.SIGINT)
    try:
        assert proc.wait(timeout=30) == 0, "serve did not stop cleanly"
    finally:
        if proc.poll() is None:
            proc.kill()


BACKENDS = ["sqlite", "postgres"]


def postgres_url() -> str:
    """The test database's URL (skips when none is set)."""
    pg = os.environ.get("HANDOVER_TEST_POSTGRES_URL")
    if not pg:
        pytest.skip("HANDOVER_TEST_POSTGRES_URL is not set")
    return pg


@contextlib.contextmanager
def serving(
    backend: str, tmp: Path, ledger_options: str = "", max_body: int = MAX_BODY
) -> Iterator[Gateway]:
    """`handover serve` on ``backend`` with a scope of its own, so runs that
    share a PostgreSQL database never see each other's operations.
    ``ledger_options``: more lines for its `[ledger]` table."""
    env: dict[str, str] = {}
    if backend == "sqlite":
        ledger = f'[ledger]\nbackend = "sqlite"\npath = "{tmp / "ledger.db"}"\n'
    else:
        ledger = '[ledger]\nbackend = "postgres"\nurl_env = "HANDOVER_PY_LEDGER_URL"\n'
        env["HANDOVER_PY_LEDGER_URL"] = postgres_url()
    scope = f"py-{uuid.uuid4().hex[:12]}"
    with serve(config(ledger + ledger_options, scope, max_body=max_body), tmp, env) as url:
        yield Gateway(backend, url, scope)


@pytest.fixture(scope="session", params=BACKENDS)
def gateway(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """`handover serve` on each ledger backend, shared by the session."""
    with serving(request.param, tmp_path_factory.mktemp(request.param)) as gw:
        yield gw


@pytest.fixture(params=BACKENDS)
def fresh_gateway(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Gateway]:
    """A `handover serve` of this test's own (for tests that lease every due
    operation of their scope)."""
    with serving(request.param, tmp_path) as gw:
        yield gw


@dataclass
class Destination:
    """A shipping API that deduplicates on ``Idempotency-Key`` and counts
    what it received and what it applied.

    ``mode``: ``ok`` applies and answers 201; ``drop`` applies, then closes
    the connection without answering (the lost confirmation); ``reject``
    refuses with 422 (``refusal`` as its JSON body) and applies nothing;
    ``surrogate`` applies and answers 201 with JSON that holds an escaped
    lone surrogate (``"\\ud800"``: valid JSON, which Python's ``json``
    reads into a ``str`` no UTF-8 document can carry).
    """

    url: str = ""
    mode: str = "ok"
    refusal: Any = field(default_factory=lambda: {"error": "address is not deliverable"})
    requests: list[dict[str, Any]] = field(default_factory=list)
    effects: dict[str, dict[str, Any]] = field(default_factory=dict)
    on_request: Callable[[dict[str, Any]], None] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        if h.command == "GET":  # the lookup: records by idempotency key
            key = parse_qs(urlsplit(h.path).query).get("key", [""])[0]
            with self.lock:
                found = [self.effects[key]] if key in self.effects else []
            return reply(h, 200, {"data": found})
        body = read_json(h)
        seen = {"path": h.path, "key": h.headers.get("Idempotency-Key"), "body": body}
        if self.on_request is not None:
            self.on_request(seen)
        with self.lock:
            self.requests.append(seen)
            if self.mode == "reject":
                return reply(h, 422, self.refusal)
            record = self.effects.get(seen["key"] or "")
            if record is None:
                record = {"id": f"shp-{len(self.effects) + 1}", **(body or {})}
                self.effects[seen["key"] or f"none-{len(self.effects)}"] = record
        if self.mode == "drop":
            h.close_connection = True
            h.connection.shutdown(socket.SHUT_RDWR)
            return None
        if self.mode == "surrogate":
            return reply(h, 201, {**record, "label": "LBL-\ud800"})
        return reply(h, 201, record)


def read_json(h: BaseHTTPRequestHandler) -> Any:
    """The request's JSON body (None when empty)."""
    return json.loads(h.rfile.read(int(h.headers.get("Content-Length", "0"))) or b"null")


def reply(h: BaseHTTPRequestHandler, status: int, doc: Any) -> None:
    """Answers with ``doc`` as JSON."""
    data = json.dumps(doc).encode()
    h.send_response(status)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(data)))
    h.end_headers()
    h.wfile.write(data)


@contextlib.contextmanager
def http_server(handle: Callable[[BaseHTTPRequestHandler], None]) -> Iterator[str]:
    """A real HTTP server on a free loopback port calling ``handle`` for
    each POST; yields its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            handle(self)

        def do_GET(self) -> None:  # noqa: N802
            handle(self)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    # shutdown() waits for serve_forever's next poll: 0.5 s by default, paid
    # by every test that has a destination.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def serve(text: str, tmp: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """`handover serve` with this configuration; yields its base URL."""
    proc, url = start_serve(text, tmp, env or {})
    try:
        yield url
    finally:
        stop_serve(proc)


@pytest.fixture
def destination() -> Iterator[Destination]:
    dest = Destination()
    with http_server(dest.handle) as url:
        dest.url = url
        yield dest


@pytest.fixture
def key() -> str:
    """A fresh operation key per test."""
    return f"K-{uuid.uuid4().hex[:10]}"


def shipper(dest: Destination) -> Callable[[hc.Dispatch], Any]:
    """The executor a user would write: one POST with the destination key."""

    def ship(ctx: hc.Dispatch) -> Any:
        r = httpx.post(f"{dest.url}/shipments", json=ctx.params, headers=ctx.headers, timeout=ctx.timeout)
        if r.status_code == 422:
            return ctx.reject(r.json()["error"], evidence=f"HTTP {r.status_code}")
        r.raise_for_status()
        return r.json()

    return ship


def async_shipper(dest: Destination) -> Callable[[hc.Dispatch], Any]:
    async def ship(ctx: hc.Dispatch) -> Any:
        async with httpx.AsyncClient() as http:
            r = await http.post(f"{dest.url}/shipments", json=ctx.params, headers=ctx.headers)
        r.raise_for_status()
        return r.json()

    return ship
