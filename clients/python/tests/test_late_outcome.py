"""An executor that outlives its lease: while it runs, the lease passes,
the operation turns unknown and a lookup that finds nothing rejects it;
then the executor's request creates the record and it returns. The
caller must not be told "nothing was performed", and the late report is
kept where a reviewer sees it. The async client does not wait for a
plain function past its timeout: it answers unknown then, and reports
the function's answer late when it comes. Real `handover serve`, real
SQLite file (and PostgreSQL), a real destination counting its effects."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

import handover_client as hc
from conftest import CLIENT_TOKEN, Destination, Gateway, shipper

ROOM = {"room": "101", "nights": 2}
PARAMS = {"order_id": 1042, "sku": "MUG-CERAMIC-12", "qty": 1}


def outlives_its_lease(gw: Gateway, dest: Destination, key: str) -> Callable[[hc.Dispatch], Any]:
    """A sync executor (no timeout of its own) that sends only after the
    ledger has rejected the operation."""

    def slow(ctx: hc.Dispatch) -> Any:
        with gw.client() as other:
            lease_until = other.get(key).raw["state"]["lease_until"]
            # The lease is the server's clock: wait until it has passed.
            time.sleep(max(0.0, lease_until / 1000 - time.time()) + 0.05)
            assert other.get(key).state == "unknown"
            done = other.reconcile(lambda due: hc.NotFound())
            assert [(r.key, r.reconciliation) for r in done] == [(key, "rejected")], done
        return shipper(dest)(ctx)

    return slow


def assert_needs_review(out: hc.Outcome, gw: Gateway, dest: Destination, key: str) -> None:
    assert isinstance(out, hc.Unresolved), out
    assert out.diverged and not out.done and out.owner == "review"
    assert "Nothing was performed" not in out.text and "review" in out.text, out.text
    assert "another key" in out.text
    assert "after the ledger had closed the dispatch as rejected" in out.reason, out.reason
    assert "past its 1s timeout" in out.reason, out.reason
    assert len(dest.effects) == 1 and len(dest.requests) == 1, "the effect exists, once"
    shown = httpx.get(
        f"{gw.url}/v1/operations/{key}", headers={"Authorization": f"Bearer {CLIENT_TOKEN}"}, timeout=10
    ).json()
    assert shown["operation"]["state"]["state"] == "rejected", "a decided operation stays decided"
    late = [a for a in shown["attempts"] if (a.get("metadata") or {}).get("late_report")]
    assert len(late) == 1, shown["attempts"]
    assert late[0]["outcome"] == "confirmed"
    assert late[0]["metadata"]["result"] == next(iter(dest.effects.values())), "the result is kept"
    assert "rejected" in late[0]["evidence"] and "review" in late[0]["evidence"]


def test_a_result_after_the_ledger_rejected_is_not_reported_as_not_done(
    fresh_gateway: Gateway, destination: Destination, key: str
) -> None:
    with fresh_gateway.client() as c:
        out = c.perform("hold_room", key, ROOM, outlives_its_lease(fresh_gateway, destination, key))
    assert_needs_review(out, fresh_gateway, destination, key)


@pytest.mark.asyncio
async def test_the_async_client_answers_at_a_sync_executors_timeout_and_keeps_its_late_result(
    gateway: Gateway, destination: Destination, key: str
) -> None:
    # A plain function (no timeout of its own) that blocks past the action's
    # 1 s timeout, until the test lets it send.
    go = threading.Event()

    def blocking(ctx: hc.Dispatch) -> Any:
        assert go.wait(timeout=30), "never let go"
        return shipper(destination)(ctx)

    outcomes: list[int] = []
    late_reported = asyncio.Event()

    async def watch(resp: httpx.Response) -> None:
        if resp.request.method == "POST" and resp.request.url.path.endswith("/outcome"):
            outcomes.append(resp.status_code)
            if len(outcomes) == 2:
                late_reported.set()

    async with httpx.AsyncClient(event_hooks={"response": [watch]}, timeout=30) as http:
        async with gateway.async_client(http_client=http) as c:
            out = await c.perform("create_shipment", key, PARAMS, blocking)
            # Answered at the timeout, while the executor still runs.
            assert isinstance(out, hc.Unresolved) and out.recorded and not out.done, out
            assert isinstance(out.cause, TimeoutError), out.cause
            assert "TimeoutError" in out.reason
            assert (await c.get(key)).state == "unknown"
            assert destination.requests == []

            go.set()  # the executor sends now, and returns the destination's answer
            await asyncio.wait_for(late_reported.wait(), 30)
            shown = (await http.get(
                f"{gateway.url}/v1/operations/{key}", headers={"Authorization": f"Bearer {CLIENT_TOKEN}"}
            )).json()
    assert outcomes == [200, 409], "the late result was refused: the dispatch was closed as unknown"
    assert shown["operation"]["state"]["state"] == "unknown", "a late result never confirms it"
    late = [a for a in shown["attempts"] if (a.get("metadata") or {}).get("late_report")]
    assert len(late) == 1 and late[0]["outcome"] == "confirmed", shown["attempts"]
    assert late[0]["metadata"]["result"] == next(iter(destination.effects.values())), "kept for review"
    assert len(destination.requests) == 1


def test_an_executor_that_raises_after_the_ledger_rejected_is_not_reported_as_not_done(
    fresh_gateway: Gateway, destination: Destination, key: str
) -> None:
    send = outlives_its_lease(fresh_gateway, destination, key)

    def sends_then_raises(ctx: hc.Dispatch) -> Any:
        send(ctx)
        raise OSError("connection reset")  # the answer was lost; the request had arrived

    with fresh_gateway.client() as c:
        out = c.perform("hold_room", key, ROOM, sends_then_raises)
    assert isinstance(out, hc.Unresolved) and out.diverged and not out.done, out
    assert "could not confirm" in out.reason, out.reason
    assert len(destination.effects) == 1
