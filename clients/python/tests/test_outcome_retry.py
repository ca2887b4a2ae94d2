"""The ledger stops answering right after the destination confirmed: the
outcome is retried — the same report, the same epoch — while the claim's
lease holds (docs/gateway.md, "When the ledger does not answer"), and
when the lease passes first, the executor's result stays with the
caller. Real `handover serve` on a SQLite file and on PostgreSQL, locked
from another connection (`BEGIN EXCLUSIVE`; `LOCK TABLE operations`), and
a real destination counting its effects."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import httpx
import pytest

import handover_client as hc
from conftest import BACKENDS, Destination, Gateway, postgres_url, serving, shipper

PARAMS = {"order_id": 1042, "sku": "MUG-CERAMIC-12", "qty": 1}


class LedgerLock(Protocol):
    def hold(self) -> None: ...
    def release(self) -> None: ...


class SqliteLock:
    """An open `BEGIN EXCLUSIVE` on the ledger file: `serve`'s writes wait
    out its busy timeout (5 s) and answer 503; reads go on (WAL)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._con: sqlite3.Connection | None = None

    def hold(self) -> None:
        self._con = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        self._con.execute("BEGIN EXCLUSIVE")

    def release(self) -> None:
        if self._con is not None:
            self._con.execute("COMMIT")
            self._con.close()
            self._con = None


class PostgresLock:
    """`LOCK TABLE operations IN ACCESS EXCLUSIVE MODE` held by `psql`:
    every ledger call waits out `statement_timeout` and answers 503."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._psql: subprocess.Popen[str] | None = None

    def hold(self) -> None:
        psql = shutil.which("psql")
        assert psql, "psql is needed to lock the PostgreSQL ledger"
        self._psql = subprocess.Popen(
            [psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", self._url],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        assert self._psql.stdin is not None and self._psql.stdout is not None
        self._psql.stdin.write(
            "SET lock_timeout = '10s';\nBEGIN;\nLOCK TABLE operations IN ACCESS EXCLUSIVE MODE;\n\\echo locked\n"
        )
        self._psql.stdin.flush()
        assert self._psql.stdout.readline().strip() == "locked", "could not lock the ledger"

    def release(self) -> None:
        if self._psql is not None and self._psql.stdin is not None:
            self._psql.stdin.write("COMMIT;\n")
            self._psql.stdin.close()
            assert self._psql.wait(timeout=30) == 0
            self._psql = None


@contextlib.contextmanager
def _locked(backend: str, tmp_path: Path, pg_options: str) -> Iterator[tuple[Gateway, LedgerLock]]:
    lock: LedgerLock
    if backend == "sqlite":
        options, lock = "", SqliteLock(tmp_path / "ledger.db")
    else:
        options, lock = pg_options, PostgresLock(postgres_url())
    with serving(backend, tmp_path, options) as gw:
        try:
            yield gw, lock
        finally:
            lock.release()


@pytest.fixture(params=BACKENDS)
def locked_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Gateway, LedgerLock]]:
    """A `handover serve` of this test's own and a lock on its ledger
    (PostgreSQL: a short `statement_timeout`, so a locked call answers
    503 quickly)."""
    with _locked(request.param, tmp_path, 'statement_timeout = "300ms"\n') as locked:
        yield locked


@pytest.fixture(params=BACKENDS)
def slow_locked_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Gateway, LedgerLock]]:
    """The same, with a ledger that waits long for the lock before it
    answers 503: SQLite's busy timeout (5 s), a PostgreSQL
    `statement_timeout` of 10 s."""
    with _locked(request.param, tmp_path, 'statement_timeout = "10s"\ncall_timeout = "20s"\n') as locked:
        yield locked


class Watch:
    """What `perform` sent: the begin's lease and each outcome answer's
    status (an httpx response hook)."""

    def __init__(self, on_outcome: Callable[[int], None] = lambda status: None) -> None:
        self.outcomes: list[int] = []
        self.lease_until = 0
        self._on_outcome = on_outcome

    def __call__(self, resp: httpx.Response) -> None:
        if resp.request.method != "POST":
            return
        if resp.request.url.path == "/v1/operations" and resp.status_code == 201:
            resp.read()
            self.lease_until = resp.json()["claim"]["lease_until"]
        elif resp.request.url.path.endswith("/outcome"):
            self.outcomes.append(resp.status_code)
            self._on_outcome(resp.status_code)


def ship_then_lock(dest: Destination, lock: LedgerLock) -> Callable[[hc.Dispatch], Any]:
    """The destination applies and answers; then the ledger stops answering."""

    def ship(ctx: hc.Dispatch) -> Any:
        result = shipper(dest)(ctx)
        lock.hold()
        return result

    return ship


def test_a_confirmed_outcome_is_retried_while_the_ledger_does_not_answer(
    locked_ledger: tuple[Gateway, LedgerLock], destination: Destination, key: str
) -> None:
    gw, lock = locked_ledger
    # The ledger answers again once it has refused the outcome once.
    watch = Watch(on_outcome=lambda status: lock.release() if status == 503 else None)
    with httpx.Client(event_hooks={"response": [watch]}, timeout=30) as http, gw.client(http_client=http) as c:
        out = c.perform("create_shipment", key, PARAMS, ship_then_lock(destination, lock))
        assert isinstance(out, hc.Confirmed), out
        assert watch.outcomes == [503, 200], "the same outcome, sent again"
        assert out.result == next(iter(destination.effects.values()))
        assert c.get(key).state == "confirmed"
        again = c.perform("create_shipment", key, PARAMS, shipper(destination))
        assert isinstance(again, hc.Replayed) and again.result == out.result
    assert len(destination.requests) == 1 and len(destination.effects) == 1


@pytest.mark.asyncio
async def test_the_async_client_retries_the_outcome_too(
    locked_ledger: tuple[Gateway, LedgerLock], destination: Destination, key: str
) -> None:
    gw, lock = locked_ledger
    watch = Watch(on_outcome=lambda status: lock.release() if status == 503 else None)

    async def hook(resp: httpx.Response) -> None:
        if resp.request.url.path == "/v1/operations":
            await resp.aread()
        watch(resp)

    async with httpx.AsyncClient(event_hooks={"response": [hook]}, timeout=30) as http:
        async with gw.async_client(http_client=http) as c:
            out = await c.perform("create_shipment", key, PARAMS, ship_then_lock(destination, lock))
            assert isinstance(out, hc.Confirmed), out
            assert watch.outcomes == [503, 200], "the same outcome, sent again"
            assert (await c.get(key)).state == "confirmed"
    assert len(destination.requests) == 1


def test_past_the_lease_the_executors_result_stays_with_the_caller(
    locked_ledger: tuple[Gateway, LedgerLock], destination: Destination, key: str
) -> None:
    gw, lock = locked_ledger
    watch = Watch()
    sent_at: list[float] = []

    def sending(req: httpx.Request) -> None:
        if req.url.path.endswith("/outcome"):
            sent_at.append(time.time() * 1000)
        elif req.method == "GET":
            lock.release()  # the client gave up writing and reads back: the ledger answers again

    hooks: dict[str, list[Callable[[Any], None]]] = {"request": [sending], "response": [watch]}
    with httpx.Client(event_hooks=hooks, timeout=30) as http, gw.client(http_client=http) as c:
        # cancel_order: a 1 s lease, shorter than the ledger's silence.
        out = c.perform("cancel_order", key, {"order_id": 7}, ship_then_lock(destination, lock))
        assert isinstance(out, hc.Unresolved), out
        assert not out.done and "being verified" in out.text
        assert out.executor_result == next(iter(destination.effects.values())), "the result is kept"
        assert "shp-1" not in out.tool_result(), "an unconfirmed result is not shown to the model"
        # A try the server answers only past the lease's margin gets no answer.
        assert sent_at and set(watch.outcomes) <= {503}
        assert max(sent_at) < watch.lease_until, "no retry after the lease"
        assert c.get(key).state in ("dispatched", "unknown"), "never confirmed, never claimable"
        again = c.perform("cancel_order", key, {"order_id": 7}, shipper(destination))
        assert isinstance(again, (hc.InProgress, hc.Unresolved)), again
    assert len(destination.requests) == 1


def test_perform_answers_about_when_the_lease_ends_however_long_the_ledger_waits(
    slow_locked_ledger: tuple[Gateway, LedgerLock], destination: Destination, key: str
) -> None:
    gw, lock = slow_locked_ledger
    watch = Watch()
    # The HTTP client's own timeout (30 s) is far past the lease; the
    # ledger answers 503 only after 5 s (SQLite) or 10 s (PostgreSQL).
    with httpx.Client(event_hooks={"response": [watch]}, timeout=30) as http, gw.client(http_client=http) as c:
        began = time.monotonic()
        # cancel_order: a 1 s lease.
        out = c.perform("cancel_order", key, {"order_id": 7}, ship_then_lock(destination, lock))
        took = time.monotonic() - began
        assert isinstance(out, hc.Unresolved), out
        assert not out.done and out.executor_result == next(iter(destination.effects.values()))
        # The lease (1 s), then at most a margin for the outcome and one
        # for the read-back.
        assert took < 4.0, f"perform took {took:.1f}s on a 1 s lease"
        lock.release()
        assert c.get(key).state in ("dispatched", "unknown", "confirmed"), "never claimable again"
    assert len(destination.requests) == 1
