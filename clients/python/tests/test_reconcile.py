"""client.reconcile: the agent runs the lookup, Handover's reconciler rules
decide. A lost confirmation is found and confirmed, and the next perform
replays the recorded result without sending anything."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

import handover_client as hc
from conftest import OTHER_TOKEN, Destination, Gateway, shipper

ROOM = {"room": "101", "nights": 2}


def lookup_at(dest: Destination) -> Any:
    """What an agent writes: find the record by the destination key, map
    its fields back into the approved form."""

    def lookup(due: hc.Due) -> hc.LookupResult:
        r = httpx.get(f"{dest.url}/shipments", params={"key": due.destination_key}, timeout=10)
        r.raise_for_status()
        found = r.json()["data"]
        if not found:
            return hc.NotFound()
        return [hc.Found(params={k: rec.get(k) for k in due.params}, result=rec) for rec in found]

    return lookup


def lose_confirmation(gw: Gateway, dest: Destination, action: str, key: str, params: Any = ROOM) -> None:
    dest.mode = "drop"
    with gw.client() as c:
        out = c.perform(action, key, params, shipper(dest))
    assert isinstance(out, hc.Unresolved) and out.owner == "reconciler", out
    dest.mode = "ok"


def test_a_found_record_confirms_and_the_next_perform_replays_it(
    fresh_gateway: Gateway, destination: Destination, key: str
) -> None:
    lose_confirmation(fresh_gateway, destination, "book_room", key)
    with fresh_gateway.client(OTHER_TOKEN) as other:
        assert other.reconcile(lookup_at(destination)) == [], "another scope leases nothing"
    with fresh_gateway.client() as c:
        done = c.reconcile(lookup_at(destination))
        assert [(r.key, r.reconciliation, r.state) for r in done] == [(key, "confirmed", "confirmed")]
        again = c.perform("book_room", key, ROOM, shipper(destination))
        assert isinstance(again, hc.Replayed) and again.done, again
        assert again.result == destination.effects[next(iter(destination.effects))]
        assert c.reconcile(lookup_at(destination)) == [], "nothing left to look up"
    assert len(destination.requests) == 1, "sent once"


def test_a_record_with_other_parameters_goes_to_review(
    fresh_gateway: Gateway, destination: Destination, key: str
) -> None:
    lose_confirmation(fresh_gateway, destination, "book_room", key)

    def wrong(due: hc.Due) -> hc.LookupResult:
        return hc.Found(params={**due.params, "nights": 3}, result={"id": "other"})

    with fresh_gateway.client() as c:
        assert [r.reconciliation for r in c.reconcile(wrong)] == ["diverged"]
        rec = c.get(key)
        assert rec.state == "unknown" and rec.raw["state"]["owner"] == "review"
        assert isinstance(c.perform("book_room", key, ROOM, shipper(destination)), hc.Unresolved)
    assert len(destination.requests) == 1


def test_nothing_found_inside_the_visibility_lag_proves_nothing(
    fresh_gateway: Gateway, destination: Destination, key: str
) -> None:
    lose_confirmation(fresh_gateway, destination, "book_room", key)
    with fresh_gateway.client() as c:
        done = c.reconcile(lambda due: hc.NotFound())
        assert [(r.reconciliation, r.state) for r in done] == [("still_unknown", "unknown")]


def test_nothing_found_after_the_visibility_lag_rejects_and_is_replayed(
    fresh_gateway: Gateway, destination: Destination, key: str
) -> None:
    def fails_before_sending(ctx: hc.Dispatch) -> Any:
        raise OSError("connection reset")  # the destination never got it: nothing to find

    with fresh_gateway.client() as c:
        out = c.perform("book_table", key, ROOM, fails_before_sending)
        assert isinstance(out, hc.Unresolved)
        done = c.reconcile(lookup_at(destination))
        assert [(r.reconciliation, r.state) for r in done] == [("rejected", "rejected")]
        again = c.perform("book_table", key, ROOM, shipper(destination))
        assert isinstance(again, hc.Replayed) and again.outcome == "rejected"
    assert destination.requests == []


def test_a_lookup_that_raises_proves_nothing(fresh_gateway: Gateway, destination: Destination, key: str) -> None:
    lose_confirmation(fresh_gateway, destination, "book_room", key)

    def broken(due: hc.Due) -> hc.LookupResult:
        raise ConnectionError("lookup service down")

    with fresh_gateway.client() as c:
        done = c.reconcile(broken)
        assert [(r.reconciliation, r.state) for r in done] == [("still_unknown", "unknown")]
        assert isinstance(done[0].error, ConnectionError)


def test_a_lookup_answering_something_else_is_loud(
    fresh_gateway: Gateway, destination: Destination, key: str
) -> None:
    lose_confirmation(fresh_gateway, destination, "book_room", key)
    with fresh_gateway.client() as c:
        with pytest.raises(TypeError, match="Found"):
            c.reconcile(lambda due: {"found": True})  # type: ignore[arg-type, return-value]
        assert c.get(key).state == "unknown"
        with pytest.raises(TypeError, match="callable"):
            c.reconcile(None)  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_the_async_client_reconciles_with_an_async_lookup(
    fresh_gateway: Gateway, destination: Destination, key: str
) -> None:
    lose_confirmation(fresh_gateway, destination, "book_room", key)
    sync_lookup = lookup_at(destination)

    async def lookup(due: hc.Due) -> hc.LookupResult:
        result: hc.LookupResult = sync_lookup(due)
        return result

    async with fresh_gateway.async_client() as c:
        done = await c.reconcile(lookup)
        assert [r.reconciliation for r in done] == ["confirmed"]
        assert isinstance(await c.perform("book_room", key, ROOM, shipper(destination)), hc.Replayed)
    assert len(destination.requests) == 1
