"""Listing in pages: a full page continues with ``after=page[-1].key``, and
following the pages lists every operation of the client's scope once, in
order (the server's `after_key` cursor)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from conftest import CLIENT_TOKEN, Destination, Gateway, serving, shipper


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


def test_a_page_the_server_ends_by_size_is_followed_to_the_limit(tmp_path: Path) -> None:
    """Operations of 60 KB each: the server ends its pages near 4 MiB (with
    ``next``), and ``list`` follows them, so a page shorter than ``limit``
    still means the end and following ``after=page[-1].key`` lists each
    operation once."""
    blob = "x" * 30_000
    keys = [f"B-{i:03}" for i in range(80)]
    with serving("sqlite", tmp_path, max_body=256 * 1024) as gw, gw.client() as c:
        for key in keys:
            out = c.perform("create_shipment", key, {"blob": blob}, lambda ctx: {"blob": blob})
            assert out.done, out
        page = c.list("all", limit=1000)
        assert [op.key for op in page] == keys
        first = c.list("all", limit=50)
        rest = c.list("all", limit=1000, after=first[-1].key)
        assert [op.key for op in first + rest] == keys
        raw = httpx.get(
            f"{gw.url}/v1/operations",
            params={"state": "all", "limit": "1000"},
            headers={"Authorization": f"Bearer {CLIENT_TOKEN}"},
        ).json()
        assert 0 < len(raw["operations"]) < len(keys), "the server ended the page by size"
        assert raw["next"] == {"after_key": raw["operations"][-1]["id"]["key"]}
    with pytest.raises(TypeError, match="limit"):
        c.list("all", limit="5")  # type: ignore[arg-type]
