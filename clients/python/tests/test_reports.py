"""Whatever the executor hands back after the destination acted is
recorded, and ``perform`` never raises for it: a definitive refusal is
recorded ``rejected`` whatever its reason looks like, and an answer the
client cannot turn into a confirmed report is recorded ``unknown`` with a
reason, the answer kept on the ``Unresolved``. Real `handover serve`, and a
real destination counting what it received and applied."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

import handover_client as hc
from conftest import BACKENDS, MAX_BODY, Destination, Gateway, serving, shipper

PARAMS = {"order_id": 1042, "sku": "MUG-CERAMIC-12", "qty": 1}
NO_REASON = "rejected by the destination (no reason given)"
CUT_NOTE = " … [cut: longer than 64 KiB]"


def post(dest: Destination, ctx: hc.Dispatch) -> httpx.Response:
    return httpx.post(f"{dest.url}/shipments", json=ctx.params, headers=ctx.headers, timeout=ctx.timeout)


def refuse_with(dest: Destination, reason: Callable[[httpx.Response], Any]) -> Callable[[hc.Dispatch], Any]:
    """An executor whose destination refuses (422); it rejects with
    ``reason(response)``."""

    def ship(ctx: hc.Dispatch) -> Any:
        r = post(dest, ctx)
        assert r.status_code == 422
        return ctx.reject(reason(r), evidence=f"HTTP {r.status_code}")

    return ship


# -- an answer that is not a confirmation is recorded unknown, never raised --


def test_a_result_holding_a_lone_surrogate_is_unknown_and_kept(
    gateway: Gateway, destination: Destination, key: str
) -> None:
    destination.mode = "surrogate"  # applies, then answers {"label": "LBL-\ud800", ...}
    with gateway.client() as c:
        out = c.perform("create_shipment", key, PARAMS, shipper(destination))
        assert isinstance(out, hc.Unresolved), out
        assert not out.done and out.recorded
        assert "lone surrogate" in out.reason and "cannot be recorded" in out.reason, out.reason
        effect = next(iter(destination.effects.values()))
        assert out.executor_result == {**effect, "label": "LBL-\ud800"}, "the answer is kept"
        assert isinstance(out.cause, TypeError)
        rec = c.get(key)
        assert (rec.state, rec.reason) == ("unknown", out.reason)
        again = c.perform("create_shipment", key, PARAMS, shipper(destination))
        assert isinstance(again, hc.Unresolved), again
    assert len(destination.requests) == 1 and len(destination.effects) == 1


@pytest.mark.asyncio
async def test_the_async_client_records_a_lone_surrogate_unknown_too(
    gateway: Gateway, destination: Destination, key: str
) -> None:
    destination.mode = "surrogate"

    async def ship(ctx: hc.Dispatch) -> Any:
        async with httpx.AsyncClient() as http:
            r = await http.post(f"{destination.url}/shipments", json=ctx.params, headers=ctx.headers)
        r.raise_for_status()
        return r.json()

    async with gateway.async_client() as c:
        out = await c.perform("create_shipment", key, PARAMS, ship)
        assert isinstance(out, hc.Unresolved), out
        assert out.executor_result is not None and out.executor_result["label"] == "LBL-\ud800"
        assert (await c.get(key)).state == "unknown"
    assert len(destination.effects) == 1


def test_a_result_too_deep_to_encode_is_unknown_not_raised(
    gateway: Gateway, destination: Destination, key: str
) -> None:
    returned: list[Any] = []

    def ship(ctx: hc.Dispatch) -> Any:
        shipper(destination)(ctx)
        deep: list[Any] = []
        for _ in range(100_000):  # past any recursion limit of json.dumps
            deep = [deep]
        returned.append(deep)
        return deep

    with gateway.client() as c:
        out = c.perform("create_shipment", key, PARAMS, ship)
        assert isinstance(out, hc.Unresolved), out
        assert out.executor_result is returned[0], "the answer is kept"
        assert c.get(key).state == "unknown"
    assert len(destination.effects) == 1


def test_a_result_larger_than_the_gateway_takes_is_unknown_not_left_dispatched(
    gateway: Gateway, destination: Destination, key: str
) -> None:
    def ship(ctx: hc.Dispatch) -> Any:
        return {**shipper(destination)(ctx), "label_pdf": "z" * MAX_BODY}

    with gateway.client() as c:
        out = c.perform("create_shipment", key, PARAMS, ship)
        assert isinstance(out, hc.Unresolved), out
        assert out.recorded and isinstance(out.cause, hc.PayloadTooLargeError)
        assert out.executor_result is not None and out.executor_result["id"] == "shp-1"
        assert c.get(key).state == "unknown", "recorded now, not when the lease passes"
    assert len(destination.effects) == 1


@pytest.mark.parametrize("mode", ["reject", "ok"])
def test_an_executor_that_returns_false_is_unknown_never_done(
    gateway: Gateway, destination: Destination, key: str, mode: str
) -> None:
    destination.mode = mode

    def ship(ctx: hc.Dispatch) -> bool:
        return post(destination, ctx).status_code == 200  # 201 and 422 both give False

    with gateway.client() as c:
        out = c.perform("create_shipment", key, PARAMS, ship)
        assert isinstance(out, hc.Unresolved), out
        assert not out.done and "being verified" in out.text
        assert "returned False" in out.reason and "ctx.reject" in out.reason, out.reason
        assert isinstance(out.cause, TypeError)
        assert c.get(key).state == "unknown", "False is no confirmation"
    assert len(destination.requests) == 1


# -- a definitive refusal is recorded rejected, whatever its reason looks like --


@pytest.mark.parametrize(
    ("reason", "recorded"),
    [
        (lambda r: r.json(), '{"error": "address is not deliverable"}'),
        (lambda r: r.status_code, "422"),
        (lambda r: r.content, '{"error": "address is not deliverable"}'),
        (lambda r: "   ", NO_REASON),
        (lambda r: "", NO_REASON),
        (lambda r: None, NO_REASON),
        (lambda r: "not deliverable: \ud800", "not deliverable: \ufffd"),
    ],
    ids=["dict", "int", "bytes", "blank", "empty", "none", "surrogate"],
)
def test_a_definitive_refusal_is_rejected_whatever_its_reason_is(
    gateway: Gateway,
    destination: Destination,
    key: str,
    reason: Callable[[httpx.Response], Any],
    recorded: str,
) -> None:
    destination.mode = "reject"
    with gateway.client() as c:
        out = c.perform("create_shipment", key, PARAMS, refuse_with(destination, reason))
        assert isinstance(out, hc.Rejected), out
        assert out.reason == recorded and not out.done
        rec = c.get(key)
        assert (rec.state, rec.reason) == ("rejected", recorded)
        again = c.perform("create_shipment", key, PARAMS, shipper(destination))
        assert isinstance(again, hc.Replayed) and again.outcome == "rejected"
    assert len(destination.requests) == 1 and not destination.effects


def test_evidence_that_is_not_text_is_recorded_as_text(
    gateway: Gateway, destination: Destination, key: str
) -> None:
    destination.mode = "reject"

    def ship(ctx: hc.Dispatch) -> Any:
        r = post(destination, ctx)
        return ctx.reject("not deliverable", evidence=r.content + b"\xff")

    with gateway.client() as c:
        assert isinstance(c.perform("create_shipment", key, PARAMS, ship), hc.Rejected)
        state = c.get(key).raw["state"]
        assert state["evidence"] == '{"error": "address is not deliverable"}\ufffd'
    assert not destination.effects


def _long_refusal(destination: Destination, chars: int) -> str:
    # 1 + 2 x chars UTF-8 bytes: the cut must find a character boundary.
    destination.mode, destination.refusal = "reject", {"error": "x" + "é" * chars}
    return str(destination.refusal["error"])


def test_a_reason_past_the_gateways_body_limit_is_cut_until_it_is_recorded(
    gateway: Gateway, destination: Destination, key: str
) -> None:
    # The session's gateway takes bodies of 32 KiB: even a reason cut to
    # 64 KiB is refused (413) as too large.
    text = _long_refusal(destination, MAX_BODY)
    with gateway.client() as c:
        out = c.perform("create_shipment", key, PARAMS, refuse_with(destination, lambda r: r.json()["error"]))
        assert isinstance(out, hc.Rejected), out
        kept, note = out.reason.split(" … ", 1)
        assert note == "[cut: longer than the gateway accepts]", out.reason[-80:]
        assert text.startswith(kept) and len(out.reason.encode()) <= 4096
        assert c.get(key).state == "rejected"
    assert len(destination.requests) == 1 and not destination.effects


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_reason_past_64_kib_is_cut_there_and_recorded_rejected(
    backend: str, tmp_path: Path, destination: Destination, key: str
) -> None:
    # 2.2 MB of reason: past this gateway's body limit (2 MiB), so it can
    # only be recorded cut.
    text = _long_refusal(destination, 1_100_000)
    with serving(backend, tmp_path, max_body=2 * 1024 * 1024) as gw, gw.client() as c:
        out = c.perform("create_shipment", key, PARAMS, refuse_with(destination, lambda r: r.json()["error"]))
        assert isinstance(out, hc.Rejected), out
        assert out.reason.endswith(CUT_NOTE) and text.startswith(out.reason[: -len(CUT_NOTE)])
        assert 65536 - 1 <= len(out.reason.encode()) <= 65536, "cut at 64 KiB, on a character boundary"
        rec = c.get(key)
        assert (rec.state, rec.reason) == ("rejected", out.reason)
    assert len(destination.requests) == 1 and not destination.effects
