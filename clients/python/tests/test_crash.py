"""kill -9 of the agent process after the destination applied the action:
the operation is never re-executed, and it turns unknown once the dead
holder's lease has passed."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import handover_client as hc
from conftest import CLIENT_TOKEN, Destination, Gateway, config, shipper, start_serve, stop_serve

AGENT = """
import os, signal, sys, httpx
import handover_client as hc

gateway, token, key, shop = sys.argv[1:5]

def ship_then_die(ctx):
    httpx.post(shop + "/shipments", json=ctx.params, headers=ctx.headers, timeout=10)
    os.kill(os.getpid(), signal.SIGKILL)  # after the effect, before the outcome is written

hc.Client(gateway, token).perform("cancel_order", key, {"order_id": 7}, ship_then_die)
"""


def test_an_agent_killed_after_the_effect_never_causes_a_second_one(
    gateway: Gateway, destination: Destination, key: str
) -> None:
    agent = subprocess.run(
        [sys.executable, "-c", AGENT, gateway.url, CLIENT_TOKEN, key, destination.url],
        timeout=60, capture_output=True, text=True,
    )
    assert agent.returncode == -signal.SIGKILL, agent.stderr
    assert len(destination.effects) == 1

    with gateway.client() as c:
        # Dispatched, or unknown if the 1 s lease already ran out (a slow machine).
        assert c.get(key).state in ("dispatched", "unknown")
        held = c.perform("cancel_order", key, {"order_id": 7}, shipper(destination))
        if isinstance(held, hc.InProgress):
            # The dead holder's lease is still running: wait until the
            # instant the server named, then ask again.
            assert held.lease_until is not None
            time.sleep(max(0.0, held.lease_until / 1000 - time.time()) + 0.05)
            held = c.perform("cancel_order", key, {"order_id": 7}, shipper(destination))
        assert isinstance(held, hc.Unresolved), held
        assert c.get(key).state == "unknown"
    assert len(destination.requests) == 1, "never re-executed"


def test_serve_killed_while_the_executor_runs_leaves_nothing_claimable(
    tmp_path: Path, destination: Destination, key: str
) -> None:
    text = config(f'[ledger]\nbackend = "sqlite"\npath = "{tmp_path / "ledger.db"}"\n', "crash")
    proc, url = start_serve(text, tmp_path, {})

    def ship_while_serve_dies(ctx: hc.Dispatch) -> Any:
        done = shipper(destination)(ctx)
        proc.kill()  # kill -9: the outcome cannot be written
        proc.wait(timeout=30)
        return done

    with hc.Client(url, CLIENT_TOKEN, timeout=5) as c:
        out = c.perform("cancel_order", key, {"order_id": 7}, ship_while_serve_dies)
    assert isinstance(out, hc.Unresolved), out
    assert not out.recorded and isinstance(out.cause, hc.APIConnectionError)
    assert "being verified" in out.text

    proc, url = start_serve(text, tmp_path, {})  # a fresh process on the same ledger file
    try:
        with hc.Client(url, CLIENT_TOKEN) as c:
            # Durable either way: still dispatched, or (the 1 s lease ran out
            # while the machine was slow to restart serve) unknown. A claim
            # whose dispatch was lost would read otherwise.
            assert c.get(key).state in ("dispatched", "unknown"), "the dispatch was durable"
            again = c.perform("cancel_order", key, {"order_id": 7}, shipper(destination))
            if isinstance(again, hc.InProgress):
                assert again.lease_until is not None
                time.sleep(max(0.0, again.lease_until / 1000 - time.time()) + 0.05)
                again = c.perform("cancel_order", key, {"order_id": 7}, shipper(destination))
            assert isinstance(again, hc.Unresolved), again
    finally:
        stop_serve(proc)
    assert len(destination.requests) == 1, "never re-executed"
