"""kill -9 of the agent process after the destination applied the action:
the operation is never re-executed, and it turns unknown once the dead
holder's lease has passed."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import handover_client as hc
from conftest import CLIENT_TOKEN, Destination, Gateway, shipper

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
        assert c.get(key).state == "dispatched"
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
