"""perform() against a real `handover serve` and a real destination: one
effect, unknown when the answer is lost, nothing sent twice."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

import handover_client as hc
from conftest import Destination, Gateway, async_shipper, shipper

PARAMS = {"order_id": 1042, "sku": "MUG-CERAMIC-12", "qty": 1}


def test_a_lost_answer_is_unknown_and_no_later_perform_sends_again(
    gateway: Gateway, destination: Destination, key: str
) -> None:
    destination.mode = "drop"
    with gateway.client() as c:
        first = c.perform("create_shipment", key, PARAMS, shipper(destination))
        assert isinstance(first, hc.Unresolved), first
        assert not first.done
        assert "being verified" in first.text and "another key" in first.text
        assert first.owner == "review"
        assert len(destination.effects) == 1, "the destination applied it once"

        assert c.get(key).state == "unknown"
        again = c.perform("create_shipment", key, PARAMS, shipper(destination))
        assert isinstance(again, hc.Unresolved)
        assert len(destination.requests) == 1, "the second perform sent nothing"


@pytest.mark.asyncio
async def test_the_async_client_also_refuses_to_send_an_unknown_operation_again(
    gateway: Gateway, destination: Destination, key: str
) -> None:
    destination.mode = "drop"
    async with gateway.async_client() as c:
        first = await c.perform("create_shipment", key, PARAMS, async_shipper(destination))
        assert isinstance(first, hc.Unresolved), first
        again = await c.perform("create_shipment", key, PARAMS, async_shipper(destination))
        assert isinstance(again, hc.Unresolved)
    assert len(destination.requests) == 1
    assert len(destination.effects) == 1


def test_a_confirmed_operation_replays_the_recorded_result(
    gateway: Gateway, destination: Destination, key: str
) -> None:
    def ship(ctx: hc.Dispatch) -> Any:
        return {**shipper(destination)(ctx), "weight_kg": 10.0}

    with gateway.client() as c:
        first = c.perform("create_shipment", key, PARAMS, ship)
        assert isinstance(first, hc.Confirmed), first
        assert first.done and first.text.startswith("Done:")
        assert first.result["id"] == "shp-1"
        assert first.result["weight_kg"] == 10  # the recorded (canonical) form

        again = c.perform("create_shipment", key, PARAMS, ship)
        assert isinstance(again, hc.Replayed), again
        assert again.done and again.outcome == "confirmed"
        assert again.result == first.result, "a replay returns exactly what the first caller got"
        assert "not performed again" in again.text
    assert len(destination.requests) == 1


def test_the_destination_is_called_only_after_the_dispatch_is_recorded(
    gateway: Gateway, destination: Destination, key: str
) -> None:
    observed: list[str] = []
    with gateway.client() as watcher:
        destination.on_request = lambda _: observed.append(watcher.get(key).state)
        with gateway.client() as c:
            out = c.perform("create_shipment", key, PARAMS, shipper(destination))
    assert isinstance(out, hc.Confirmed)
    assert observed == ["dispatched"], "the ledger said dispatched when the first byte arrived"


@pytest.mark.parametrize("call_first", [True, False])
def test_an_exception_after_dispatch_is_unknown_never_rejected(
    gateway: Gateway, destination: Destination, key: str, call_first: bool
) -> None:
    def ship(ctx: hc.Dispatch) -> Any:
        if call_first:
            shipper(destination)(ctx)
        raise RuntimeError("could not parse the carrier's answer")

    with gateway.client() as c:
        out = c.perform("create_shipment", key, PARAMS, ship)
        assert isinstance(out, hc.Unresolved), out
        assert isinstance(out.cause, RuntimeError)
        assert "RuntimeError" in out.reason
        assert "carrier" not in out.reason, "the exception's text is not stored, only its type"
        rec = c.get(key)
        assert rec.state == "unknown", "never rejected: the effect may have happened"
    assert len(destination.effects) == (1 if call_first else 0)


@pytest.mark.parametrize("mode", ["ok", "reject"])
def test_an_executor_that_returns_nothing_is_unknown_never_done(
    gateway: Gateway, destination: Destination, key: str, mode: str
) -> None:
    destination.mode = mode

    def forgets_to_return(ctx: hc.Dispatch) -> None:
        # The request went out; whatever came back (201 or 422) was dropped.
        httpx.post(f"{destination.url}/shipments", json=ctx.params, headers=ctx.headers, timeout=ctx.timeout)

    with gateway.client() as c:
        out = c.perform("create_shipment", key, PARAMS, forgets_to_return)
        assert isinstance(out, hc.Unresolved), out
        assert not out.done and "being verified" in out.text
        assert "returned None" in out.reason and "ctx.reject" in out.reason, out.reason
        assert isinstance(out.cause, TypeError)
        assert c.get(key).state == "unknown", "no answer is no confirmation"
    assert len(destination.requests) == 1


def test_a_value_that_is_not_json_is_not_reported_as_done(
    gateway: Gateway, destination: Destination, key: str
) -> None:
    with gateway.client() as c:
        out = c.perform("create_shipment", key, PARAMS, lambda ctx: object())
        assert isinstance(out, hc.Unresolved), out
        assert c.get(key).state == "unknown"


@pytest.mark.asyncio
async def test_an_async_executor_past_the_action_timeout_is_unknown(gateway: Gateway, key: str) -> None:
    never = asyncio.Event()

    async def stalls(ctx: hc.Dispatch) -> Any:
        assert ctx.timeout == 1.0
        await never.wait()

    async with gateway.async_client() as c:
        out = await c.perform("create_shipment", key, PARAMS, stalls)
        assert isinstance(out, hc.Unresolved), out
        assert isinstance(out.cause, TimeoutError)
        assert (await c.get(key)).state == "unknown"


def test_a_declared_rejection_is_recorded_and_replayed(
    gateway: Gateway, destination: Destination, key: str
) -> None:
    destination.mode = "reject"
    with gateway.client() as c:
        out = c.perform("create_shipment", key, PARAMS, shipper(destination))
        assert isinstance(out, hc.Rejected), out
        assert out.reason == "address is not deliverable" and not out.done
        again = c.perform("create_shipment", key, PARAMS, shipper(destination))
        assert isinstance(again, hc.Replayed) and again.outcome == "rejected" and not again.done
        assert again.reason == "address is not deliverable"
    assert len(destination.requests) == 1 and not destination.effects


def test_an_approved_key_runs_only_the_approved_parameters(
    gateway: Gateway, destination: Destination, key: str
) -> None:
    with gateway.client() as c:
        assert c.approve("create_shipment", key, PARAMS).status == "planned"
        assert c.approve("create_shipment", key, dict(reversed(PARAMS.items()))).status == "already_approved"
        with pytest.raises(hc.UnprocessableEntityError) as e:
            c.approve("create_shipment", key, {**PARAMS, "qty": 5})
        assert e.value.code == "params_mismatch" and e.value.status_code == 422

        changed = c.perform("create_shipment", key, {**PARAMS, "qty": 5}, shipper(destination))
        assert isinstance(changed, hc.Conflict), changed
        assert "different parameters" in changed.text
        assert destination.requests == []

        approved = c.perform("create_shipment", key, PARAMS, shipper(destination))
        assert isinstance(approved, hc.Confirmed)
    assert len(destination.requests) == 1


def test_an_unknown_operation_suspends_the_rest_of_its_block(
    gateway: Gateway, destination: Destination, key: str
) -> None:
    destination.mode = "drop"
    with gateway.client() as c:
        assert isinstance(c.perform("refund", key, {"order_id": 7}, shipper(destination)), hc.Unresolved)
        destination.mode = "ok"
        out = c.perform("refund", key + "-b", {"order_id": 7}, shipper(destination))
        assert isinstance(out, hc.Suspended), out
        assert out.blocked_by == key
        assert "Nothing was performed" in out.text
    assert len(destination.requests) == 1


def test_an_operation_that_became_unknown_after_the_claim_suspends_the_dispatch(
    fresh_gateway: Gateway, destination: Destination, key: str
) -> None:
    # refund: block = "scope". Y is claimed while no refund of the scope is
    # unresolved; between Y's begin and its dispatch, refund X becomes unknown.
    gateway = fresh_gateway
    blocker = key + "-x"

    def x_becomes_unknown(resp: httpx.Response) -> None:
        if resp.request.url.path == "/v1/operations" and resp.request.headers.get("Idempotency-Key") == key:
            assert resp.status_code == 201, "Y holds its claim"
            with gateway.client() as other:
                x = other.perform("refund", blocker, {"order_id": 7}, lost_answer)
                assert isinstance(x, hc.Unresolved) and other.get(blocker).state == "unknown", x

    def lost_answer(ctx: hc.Dispatch) -> Any:
        raise TimeoutError("the refund API did not answer")

    with httpx.Client(event_hooks={"response": [x_becomes_unknown]}, timeout=30) as http:
        with gateway.client(http_client=http) as c:
            out = c.perform("refund", key, {"order_id": 8}, shipper(destination))
            assert isinstance(out, hc.Suspended), out
            assert out.blocked_by == blocker and not out.done
            assert "Nothing was performed" in out.text
            assert c.get(key).state == "planned", "the claim was given back"
    assert destination.requests == [], "nothing was sent for Y"


def test_an_operation_held_by_another_caller_is_in_progress(
    gateway: Gateway, destination: Destination, key: str
) -> None:
    inner: list[hc.Outcome] = []
    with gateway.client() as c, gateway.client() as other:

        def ship(ctx: hc.Dispatch) -> Any:
            inner.append(other.perform("create_shipment", key, PARAMS, shipper(destination)))
            return shipper(destination)(ctx)

        out = c.perform("create_shipment", key, PARAMS, ship)
    assert isinstance(out, hc.Confirmed)
    assert isinstance(inner[0], hc.InProgress), inner
    assert inner[0].lease_until is not None
    assert len(destination.requests) == 1


def test_a_resend_inside_the_idempotency_window_reuses_the_destination_key(
    gateway: Gateway, destination: Destination, key: str
) -> None:
    destination.mode = "drop"
    seen: list[hc.Dispatch] = []

    def ship(ctx: hc.Dispatch) -> Any:
        seen.append(ctx)
        return shipper(destination)(ctx)

    with gateway.client() as c:
        assert isinstance(c.perform("create_label", key, PARAMS, ship), hc.Unresolved)
        destination.mode = "ok"
        out = c.perform("create_label", key, PARAMS, ship)
        assert isinstance(out, hc.Confirmed), out
    assert [s.resend for s in seen] == [False, True]
    assert seen[0].destination_key == seen[1].destination_key
    assert [r["key"] for r in destination.requests] == [seen[0].destination_key] * 2
    assert len(destination.effects) == 1, "the destination deduplicated the re-send"


def test_the_tool_decorator_performs_with_named_parameters(
    gateway: Gateway, destination: Destination, key: str
) -> None:
    import inspect

    with gateway.client() as c:

        @c.tool("create_shipment")
        def create_shipment(ctx: hc.Dispatch, order_id: int, sku: str, qty: int = 1) -> Any:
            return shipper(destination)(ctx)

        assert list(inspect.signature(create_shipment).parameters) == ["key", "order_id", "sku", "qty"]
        out = create_shipment(key, 1042, sku="MUG-CERAMIC-12")
        assert isinstance(out, hc.Confirmed), out
        again = create_shipment(key, order_id=1042, sku="MUG-CERAMIC-12", qty=1)
        assert isinstance(again, hc.Replayed), "the default is part of the approved parameters"
        assert isinstance(create_shipment(key, 1042, "MUG-CERAMIC-12", 2), hc.Conflict)
    assert destination.requests[0]["body"] == PARAMS
    assert len(destination.requests) == 1

    with pytest.raises(TypeError, match="named parameter"):

        @c.tool("create_shipment")
        def loose(ctx: hc.Dispatch, *items: Any) -> None: ...


@pytest.mark.asyncio
async def test_the_async_tool_decorator(gateway: Gateway, destination: Destination, key: str) -> None:
    async with gateway.async_client() as c:

        @c.tool("create_shipment")
        async def create_shipment(ctx: hc.Dispatch, order_id: int, sku: str, qty: int = 1) -> Any:
            return await async_shipper(destination)(ctx)

        out = await create_shipment(key, 1042, "MUG-CERAMIC-12")
        assert isinstance(out, hc.Confirmed), out
        assert isinstance(await create_shipment(key, 1042, "MUG-CERAMIC-12"), hc.Replayed)
    assert len(destination.requests) == 1
