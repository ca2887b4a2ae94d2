"""An agent loop whose tool calls go through Handover.

The model is reached with the official ``openai`` SDK through ``handover
serve`` (which retries and falls back between providers); every tool call
with a real effect goes through :meth:`handover_client.Client.perform`. So
when the shipping API applies a shipment but its answer is lost, and the
conversation moves to a fallback model that proposes the shipment again
under a new tool-call id, nothing is sent twice and the model is told the
shipment is being verified.

    handover serve --config handover.toml           # with [actions.create_shipment]
    python agent_loop.py --gateway http://127.0.0.1:8787 --token example-client-token \\
        --shop http://127.0.0.1:9000 "Order 1042 arrived broken. Please send a replacement."

The operation key is chosen when the user approves the action, never from
the model's tool-call id: a fallback model re-proposing the action maps to
the same key, and changed parameters get a conflict instead of an execution.
"""

from __future__ import annotations

import argparse
import json
import uuid
from collections.abc import Callable
from typing import Any

import httpx
from openai import OpenAI

import handover_client as hc

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "create_shipment",
            "description": "Send a replacement shipment for an order.",
            "parameters": {
                "type": "object",
                "properties": {
                    "order_id": {"type": "integer"},
                    "sku": {"type": "string"},
                    "qty": {"type": "integer"},
                },
                "required": ["order_id", "sku", "qty"],
            },
        },
    }
]

SYSTEM = (
    "You are a support agent. Use create_shipment to send replacements. A tool result "
    "with status 'unresolved' means the action may have happened and is being verified: "
    "never propose it again, and tell the user it is being verified."
)


class Approvals:
    """The user's approvals in this conversation: one operation key per
    approved action, recorded in Handover when the user says yes."""

    def __init__(self, client: hc.Client, ask: Callable[[str, dict[str, Any]], bool]) -> None:
        self._client, self._ask, self._keys = client, ask, dict[str, str]()

    def key_for(self, action: str, params: dict[str, Any]) -> str | None:
        """The key the user approved for ``action``; asks them the first time."""
        if action not in self._keys:
            if not self._ask(action, params):
                return None
            key = f"K-{uuid.uuid4().hex[:8]}"
            self._client.approve(action, key, params)  # binds exactly these params to the key
            self._keys[action] = key
        return self._keys[action]


def shipper(shop_url: str) -> hc.Executor:
    """Calls the shipping API once Handover recorded the dispatch."""

    def create_shipment(ctx: hc.Dispatch) -> Any:
        r = httpx.post(f"{shop_url}/shipments", json=ctx.params, headers=ctx.headers, timeout=ctx.timeout)
        if r.status_code in (400, 404, 422):  # the API's definitive "not applied"
            return ctx.reject(f"HTTP {r.status_code}: {r.text[:200]}")
        r.raise_for_status()  # anything else: an exception, so the outcome is unknown
        return r.json()

    return create_shipment


def run(
    gateway: str,
    token: str,
    shop_url: str,
    request: str,
    *,
    model: str = "default",
    ask: Callable[[str, dict[str, Any]], bool] = lambda action, params: True,
    max_turns: int = 6,
) -> list[dict[str, Any]]:
    """Runs one user request to the end; returns the conversation."""
    task = f"task-{uuid.uuid4().hex[:12]}"  # one budget for the whole user task
    llm = OpenAI(base_url=f"{gateway}/v1", api_key=token, max_retries=0, timeout=60)
    executors = {"create_shipment": shipper(shop_url)}
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": request},
    ]
    with hc.Client(gateway, token, task=task) as handover:
        approvals = Approvals(handover, ask)
        for _ in range(max_turns):
            reply = llm.chat.completions.create(
                model=model, messages=messages, tools=TOOLS,  # type: ignore[arg-type]
                extra_headers={hc.TASK_HEADER: task},
            )
            msg = reply.choices[0].message
            messages.append(msg.model_dump(exclude_none=True))
            if not msg.tool_calls:
                return messages
            for call in msg.tool_calls:
                text = _tool_call(call, approvals, handover, executors)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
    return messages


def _tool_call(call: Any, approvals: Approvals, handover: hc.Client, executors: dict[str, hc.Executor]) -> str:
    """The tool message for one call: the outcome's text, whichever model asked."""
    fn = getattr(call, "function", None)
    if fn is None or fn.name not in executors:
        return json.dumps({"status": "error", "message": "unknown tool"})
    params = json.loads(fn.arguments)
    key = approvals.key_for(fn.name, params)
    if key is None:
        return json.dumps({"status": "declined", "message": "The user did not approve it."})
    return handover.perform(fn.name, key, params, executors[fn.name]).tool_result()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gateway", default="http://127.0.0.1:8787")
    p.add_argument("--token", required=True)
    p.add_argument("--shop", required=True, help="base URL of the shipping API")
    p.add_argument("--model", default="default")
    p.add_argument("request")
    a = p.parse_args()

    def ask(action: str, params: dict[str, Any]) -> bool:
        return input(f"Approve {action} {json.dumps(params)}? [y/N] ").strip().lower() == "y"

    for m in run(a.gateway, a.token, a.shop, a.request, model=a.model, ask=ask):
        print(f"{m['role']:>9}: {m.get('content') or m.get('tool_calls')}")


if __name__ == "__main__":
    main()
