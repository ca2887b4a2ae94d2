"""Listing in pages: a full page continues with ``after=page[-1].key``, and
following the pages lists every operation of the client's scope once, in
order (the server's `after_key` cursor)."""

from __future__ import annotations

import pytest

from conftest import Destination, Gateway, shipper


def test_pages_list_every_operation_once_in_order(
    fresh_gateway: Gateway, destination: Destination
) -> None:
    with fresh_gateway.client() as c:
        keys = [f"L-{i}" for i in range(5)]
        for i, key in enumerate(keys):
            c.perform("create_shipment", key, {"order_id": i}, shipper(destination))
        seen: list[str] = []
        after = None
        while True:
            page = c.list("all", limit=2, after=after)
            seen.extend(op.key for op in page)
            if len(page) < 2:
                break
            after = page[-1].key
    assert seen == keys
    assert len(destination.effects) == 5


def test_after_must_be_a_key(gateway: Gateway) -> None:
    with gateway.client() as c, pytest.raises(TypeError, match="after"):
        c.list("all", after=3)  # type: ignore[arg-type]
