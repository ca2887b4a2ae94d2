"""The official MCP Python client (`mcp`) for Handover's tests.

Usage:
  python mcp_client.py fidelity COMMAND [ARGS...]
      list tools, prompts and resources, call the read-only tool, get the
      prompt and read the resource; print one JSON object per line.
  python mcp_client.py calls CALLS_JSON COMMAND [ARGS...]
      in one session, call each {"tool", "arguments", "meta", "retry_while",
      "retry_while_owner"} of CALLS_JSON and print each (last) result as one
      JSON line.
  python mcp_client.py refused COMMAND_OR_URL
      connect and list tools, expecting a refusal; print the error.
COMMAND is the MCP server to start over stdio (the shipping server
directly, or `handover mcp` in front of it), or an http:// URL of a
Streamable HTTP endpoint (`handover mcp --listen`), called with the bearer
token in $MCP_TOKEN (if set) and the client mode in $MCP_MODE ("auto", the
SDK's default: the 2026-07-28 probe, no session; or "legacy": the
initialize handshake and an Mcp-Session-Id). The Rust tests compare and
assert; this script only drives the client.
"""

import asyncio
import json
import os
import sys

from mcp import Client as SdkClient
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


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
            # JSON-RPC id) while the answer has that status, for up to 30 s;
            # "retry_while_owner": while the unknown's owner is that one.
            for _ in range(300):
                result = await client.call_tool(call["tool"], call.get("arguments"), meta=call.get("meta"))
                sc = result.structured_content if isinstance(result.structured_content, dict) else {}
                waiting = ("retry_while" in call and sc.get("status") == call["retry_while"]) or (
                    "retry_while_owner" in call and sc.get("owner") == call["retry_while_owner"]
                )
                if not waiting:
                    break
                await asyncio.sleep(0.1)
            dump("call", result)


def server(command):
    if command[0].startswith("http://"):
        token = os.environ.get("MCP_TOKEN")
        headers = {"authorization": f"Bearer {token}"} if token else {}
        return streamable_http_client(command[0], http_client=create_mcp_http_client(headers=headers))
    # The SDK passes only a few safe variables to the server by default; the
    # test's own (ledger path, shipping log and mode) must reach it.
    return StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))


def Client(params, **kwargs):  # noqa: N802 - the SDK's Client with the test's mode
    return SdkClient(params, mode=os.environ.get("MCP_MODE", "auto"), **kwargs)


def messages(e):
    if isinstance(e, BaseExceptionGroup):
        return [m for sub in e.exceptions for m in messages(sub)]
    return [f"{type(e).__name__}: {e}"]


async def refused(params):
    try:
        async with Client(params, read_timeout_seconds=30) as client:
            await client.list_tools()
    except Exception as e:  # the refusal, whatever the SDK wraps it in
        print(json.dumps({"kind": "error", "value": " | ".join(messages(e))}), flush=True)
        return
    sys.exit("expected a refusal, got a session")


def main():
    mode = sys.argv[1]
    if mode == "fidelity":
        command = sys.argv[2:]
        asyncio.run(fidelity(server(command)))
    elif mode == "refused":
        asyncio.run(refused(server(sys.argv[2:])))
    elif mode == "calls":
        plan = json.loads(sys.argv[2])
        command = sys.argv[3:]
        asyncio.run(calls(server(command), plan))
    else:
        sys.exit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
