"""The example agent loop (examples/agent_loop.py) end to end: the official
openai SDK through `handover serve`, two scripted OpenAI-compatible
providers, a shipping API that applies then drops the answer. The primary
fails mid-conversation, the fallback re-proposes the shipment under a new
tool-call id, and nothing is sent twice."""

from __future__ import annotations

import importlib.util
import json
import threading
import uuid
from pathlib import Path
from typing import Any

import handover_client as hc
from conftest import CLIENT_TOKEN, Destination, config, http_server, read_json, reply, serve

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "agent_loop.py"
SHIPMENT = {"order_id": 1042, "sku": "MUG-CERAMIC-12", "qty": 1}


def _load_example() -> Any:
    spec = importlib.util.spec_from_file_location("agent_loop", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:8]}",
        "object": "chat.completion",
        "created": 1,
        "model": "scripted",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _proposes_shipment(call_id: str) -> dict[str, Any]:
    call = {"id": call_id, "type": "function",
            "function": {"name": "create_shipment", "arguments": json.dumps(SHIPMENT)}}
    return _completion({"content": None, "tool_calls": [call]}, "tool_calls")


class Model:
    """An OpenAI-compatible provider that plays a script: each request gets
    the next reply (a completion, or an HTTP status for a failure)."""

    def __init__(self, script: list[dict[str, Any] | int]) -> None:
        self.script, self.received, self.lock = list(script), list[Any](), threading.Lock()

    def handle(self, h: Any) -> None:
        body = read_json(h)
        with self.lock:
            self.received.append(body)
            step = self.script.pop(0) if self.script else 500
        if isinstance(step, int):
            reply(h, step, {"error": {"message": "overloaded", "type": "server_error", "code": None}})
        else:
            reply(h, 200, step)


def test_the_example_agent_falls_back_mid_conversation_without_shipping_twice(
    tmp_path: Path, destination: Destination
) -> None:
    example = _load_example()
    destination.mode = "drop"  # the shipment is created, its confirmation lost
    primary = Model([_proposes_shipment("call_oa_7Hq2Lw"), 503, 503])
    fallback = Model([
        _proposes_shipment("call_ds_c41f9e"),
        _completion({"content": "Your replacement is being verified; I have not sent a second one."}, "stop"),
    ])
    asked: list[tuple[str, Any]] = []

    def ask(action: str, params: Any) -> bool:
        asked.append((action, params))
        return True

    with http_server(primary.handle) as p_url, http_server(fallback.handle) as f_url:
        providers = f"""
[providers.primary]
kind = "openai_compatible"
base_url = "{p_url}/v1"
model = "gpt-4o-mini"

[providers.fallback]
kind = "openai_compatible"
base_url = "{f_url}/v1"
model = "deepseek-chat"

[policies.default]
chain = ["primary", "fallback"]
"""
        ledger = f'[ledger]\nbackend = "sqlite"\npath = "{tmp_path / "ledger.db"}"\n'
        with serve(config(ledger, "example", providers), tmp_path) as gateway:
            messages = example.run(
                gateway, CLIENT_TOKEN, destination.url,
                "Order 1042 arrived broken. Please send a replacement.",
                ask=ask,
            )
            with hc.Client(gateway, CLIENT_TOKEN) as c:
                unknown = c.list("unknown")

    tools = [json.loads(m["content"]) for m in messages if m["role"] == "tool"]
    assert [t["status"] for t in tools] == ["unresolved", "unresolved"], tools
    assert "being verified" in tools[1]["message"]
    assert len(destination.requests) == 1 and len(destination.effects) == 1, "shipped once"
    assert asked == [("create_shipment", SHIPMENT)], "approved once; the re-proposal used the same key"
    assert [(op.action, op.params) for op in unknown] == [("create_shipment", SHIPMENT)]

    # The fallback answered after the primary failed, and it saw the
    # pending-verification result of the first proposal.
    assert len(primary.received) == 3 and len(fallback.received) == 2
    seen = [m for m in fallback.received[1]["messages"] if m["role"] == "tool"]
    assert [json.loads(m["content"])["status"] for m in seen] == ["unresolved", "unresolved"]
    assert messages[-1]["content"].startswith("Your replacement is being verified")

