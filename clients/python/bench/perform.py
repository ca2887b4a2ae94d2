"""What the Python client costs over driving the protocol by hand.

    HANDOVER_BIN=target/debug/handover python clients/python/bench/perform.py [--ops N] [--backend sqlite|postgres]

Starts `handover serve` (like the tests), then runs the same operation
lifecycle — begin, dispatch, a no-op executor, confirmed outcome — two ways,
interleaved call by call so machine noise hits both alike: ``baseline`` is
the three requests written out with one shared ``httpx.Client``; the
measured series is ``Client.perform`` over its own ``httpx.Client``. Prints
one JSON line in the workspace's benchmark format.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import handover_client as hc  # noqa: E402
from conftest import CLIENT_TOKEN, config, start_serve, stop_serve  # noqa: E402

PARAMS = {"order_id": 1042, "sku": "MUG-CERAMIC-12", "qty": 1}


def by_hand(http: httpx.Client, url: str, key: str) -> None:
    auth = {"Authorization": f"Bearer {CLIENT_TOKEN}"}
    r = http.post(f"{url}/v1/operations", json={"action": "create_shipment", "params": PARAMS},
                  headers={**auth, "Idempotency-Key": key})
    epoch = r.json()["claim"]["epoch"]
    assert r.status_code == 201
    r = http.post(f"{url}/v1/operations/{key}/dispatch", json={"epoch": epoch}, headers=auth)
    assert r.status_code == 200
    r = http.post(f"{url}/v1/operations/{key}/outcome",
                  json={"epoch": epoch, "outcome": "confirmed", "result": {"id": key}}, headers=auth)
    assert r.status_code == 200


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, default=300)
    ap.add_argument("--backend", default="sqlite", choices=["sqlite", "postgres"])
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    env: dict[str, str] = {}
    if a.backend == "sqlite":
        ledger = f'[ledger]\nbackend = "sqlite"\npath = "{tmp / "ledger.db"}"\n'
    else:
        env["HANDOVER_PY_LEDGER_URL"] = os.environ["HANDOVER_TEST_POSTGRES_URL"]
        ledger = '[ledger]\nbackend = "postgres"\nurl_env = "HANDOVER_PY_LEDGER_URL"\n'
    proc, url = start_serve(config(ledger, f"bench-{uuid.uuid4().hex[:8]}"), tmp, env)
    base: list[float] = []
    ours: list[float] = []
    try:
        with httpx.Client() as http, hc.Client(url, CLIENT_TOKEN) as client:
            def confirm(ctx: hc.Dispatch) -> Any:
                return {"id": ctx.key}

            for i in range(a.ops + 20):  # the first 20 of each warm up
                for series in ((0, 1) if i % 2 else (1, 0)):
                    key = f"B-{uuid.uuid4().hex[:16]}"
                    t = time.perf_counter()
                    if series == 0:
                        by_hand(http, url, key)
                    else:
                        assert isinstance(client.perform("create_shipment", key, PARAMS, confirm), hc.Confirmed)
                    dt = (time.perf_counter() - t) * 1e6
                    if i >= 20:
                        (base if series == 0 else ours).append(dt)
    finally:
        stop_serve(proc)
    p50, p99, b50, b99 = pct(ours, 0.5), pct(ours, 0.99), pct(base, 0.5), pct(base, 0.99)
    print(json.dumps({
        "bench": "python_perform", "backend": a.backend, "concurrency": 1,
        "ops_per_s": round(1e6 / statistics.mean(ours), 1),
        "p50_us": round(p50, 1), "p99_us": round(p99, 1),
        "baseline_p50_us": round(b50, 1), "baseline_p99_us": round(b99, 1),
        "ratio_p50": round(p50 / b50, 3), "ratio_p99": round(p99 / b99, 3),
    }))


if __name__ == "__main__":
    main()
