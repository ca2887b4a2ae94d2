"""The official MCP Python client (`mcp`) for Handover's tests.

Usage:
  python mcp_client.py fidelity COMMAND [ARGS...]
      list tools, prompts and resources, call the read-only tool, get the
      prompt and read the resource; print one JSON object per line.
  python mcp_client.py calls CALLS_JSON COMMAND [ARGS...]
      in one session, call each {"tool", "arguments", "meta", "retry_while"}
      of CALLS_JSON and print each (last) result as one JSON line.
COMMAND is the MCP server to start over stdio (the shipping server
directly, or `handover mcp` in front of it). The Rust tests compare and
assert; this script only drives the client.
"""

import asyncio
import json
import os
import sys

from mcp import Client
from mcp.client.stdio import StdioServerParameters


def dump(kind, model):
    print(json.dumps({"kind": kind, "value": model.model_dump(mode="json", by_alias=True, exclude_none=True)}), flush=True)


async def fidelity(params):
    async with Client(params, read_timeout_seconds=30) as client:
        dump("tools", await client.list_tools())
        dump("prompts", await client.list_prompts())
        dump("resources", await client.list_resources())
        dump("rate", await client.call_tool("get_rate", {"sku": "KETTLE", "qty": 2}))
        dump("prompt", await client.get_prompt("shipping_note", {"order_id": "A-1"}))
        dump("resource", await client.read_resource("shipping://carriers"))


async def calls(params, plan):
    async with Client(params, read_timeout_seconds=30) as client:
        for call in plan:
            # "retry_while": an agent that keeps retrying (same arguments, new
            # JSON-RPC id) while the answer has that status, at most 50 times.
            for _ in range(50):
                result = await client.call_tool(call["tool"], call.get("arguments"), meta=call.get("meta"))
                status = (result.structured_content or {}).get("status") if isinstance(result.structured_content, dict) else None
                if "retry_while" not in call or status != call["retry_while"]:
                    break
                await asyncio.sleep(0.1)
            dump("call", result)


def server(command):
    # The SDK passes only a few safe variables to the server by default; the
    # test's own (ledger path, shipping log and mode) must reach it.
    return StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))


def main():
    mode = sys.argv[1]
    if mode == "fidelity":
        command = sys.argv[2:]
        asyncio.run(fidelity(server(command)))
    elif mode == "calls":
        plan = json.loads(sys.argv[2])
        command = sys.argv[3:]
        asyncio.run(calls(server(command), plan))
    else:
        sys.exit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
