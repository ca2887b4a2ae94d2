"""A small shipping MCP server (official Python SDK) for Handover's tests.

Every applied shipment is appended to the JSON-lines file $SHIPPING_LOG
before anything is answered, so tests count effects where they happen.
$SHIPPING_MODE decides what happens after a shipment is applied:
  ok      answer normally
  drop    the process dies before answering (the confirmation is lost)
  stall   never answer (the caller's deadline passes)
  reject  answer isError without applying anything
  raise   fail after applying (the SDK answers isError: the carrier call
          timed out after the shipment was written)
  hold    never apply and never answer (the call arrived; nothing was done)
  release wait until a line can be read from the FIFO $SHIPPING_RELEASE,
          then apply and answer (a call held while the test acts)
If $SHIPPING_APPLIED names a FIFO, the server writes its pid there once a
shipment is applied, or in `hold` and `release` modes once the call arrived (a test's
signal that the effect exists, or that the call is being held).
`charge` (an integer-keyed action) applies a charge to the same log, and
so do `charge_ref`, `charge_opt` and `charge_tier`, whose `order_no` is a
pydantic RootModel[int], an optional one and an IntEnum (the SDK's schemas
give them a `$ref`, an `anyOf` of a `$ref` and null, a `$ref` to an
`enum`; pydantic reads "01" as 1 for each).
Modes `list-error`, `list-slow`, `list-omit` and `list-loop` make the
server's `tools/list` answer an error, never answer, leave `charge` out,
or page forever (a `nextCursor` on every page); tools work as in `ok`.
With `--http PORT` it serves Streamable HTTP on 127.0.0.1:PORT/mcp instead
of stdio.
"""

import enum
import json
import os

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ListToolsResult
from pydantic import RootModel

LOG = os.environ["SHIPPING_LOG"]
MODE = os.environ.get("SHIPPING_MODE", "ok")


class Shipping(MCPServer):
    """The SDK's server, with a `tools/list` that misbehaves in `list-*` modes."""

    async def _handle_list_tools(self, ctx, params):
        tools = await self.list_tools()
        if MODE == "list-error":
            raise ToolError("the tool registry is unavailable")
        if MODE == "list-slow":
            await anyio.sleep(3600)
        if MODE == "list-omit":
            tools = [t for t in tools if t.name != "charge"]
        if MODE == "list-loop":
            return ListToolsResult(tools=tools, next_cursor="again")
        return ListToolsResult(tools=tools)


server = Shipping("shipping", instructions="Creates and finds shipments.")


def records():
    try:
        with open(LOG) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


@server.tool()
async def create_shipment(order_id: str, sku: str, qty: int, reference: str | None = None) -> dict:
    """Create a shipment (an effect in the world)."""
    if MODE == "reject":
        raise ToolError(f"sku {sku} is not shippable")
    if MODE == "hold":
        signal()
        await anyio.sleep(3600)
    if MODE == "release":
        signal()
        await anyio.to_thread.run_sync(wait_for_release)
    record = {
        "shipment_id": f"SHP-{len(records()) + 1}",
        "order_id": order_id,
        "sku": sku,
        "qty": qty,
        "reference": reference,
    }
    with open(LOG, "a") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())
    if MODE != "release":  # its signal was the call's arrival
        signal()
    if MODE == "drop":
        os._exit(0)
    if MODE == "raise":
        raise ToolError("carrier API timed out after the shipment was created")
    if MODE == "stall":
        await anyio.sleep(3600)
    return record


def wait_for_release():
    with open(os.environ["SHIPPING_RELEASE"]) as fifo:
        fifo.readline()


def signal():
    if os.environ.get("SHIPPING_APPLIED"):
        with open(os.environ["SHIPPING_APPLIED"], "w") as fifo:
            fifo.write(f"{os.getpid()}\n")


def apply_charge(tool, order_no, amount_cents):
    record = {"charge_id": f"CHG-{len(records()) + 1}", "tool": tool, "order_no": order_no, "amount_cents": amount_cents}
    with open(LOG, "a") as f:
        f.write(json.dumps(record) + "\n")
    return record


@server.tool()
def charge(order_no: int, amount_cents: int) -> dict:
    """Charge an order (an effect; `order_no` is an integer, read leniently as the SDK does)."""
    return apply_charge("charge", order_no, amount_cents)


class OrderNo(RootModel[int]):
    pass


class Tier(enum.IntEnum):
    ONE = 1
    TWO = 2


@server.tool()
def charge_ref(order_no: OrderNo, amount_cents: int) -> dict:
    """Charge an order whose number is a model of its own (a `$ref` in the schema)."""
    return apply_charge("charge_ref", order_no.root, amount_cents)


@server.tool()
def charge_opt(order_no: OrderNo | None, amount_cents: int) -> dict:
    """Charge an order whose number may be left out (`anyOf` of a `$ref` and null)."""
    return apply_charge("charge_opt", None if order_no is None else order_no.root, amount_cents)


@server.tool()
def charge_tier(order_no: Tier, amount_cents: int) -> dict:
    """Charge one of the numbered tiers (a `$ref` to an integer `enum`)."""
    return apply_charge("charge_tier", int(order_no), amount_cents)


@server.tool()
def find_shipment(reference: str) -> dict:
    """Find shipments by the reference they were created with (read-only)."""
    return {"records": [r for r in records() if r.get("reference") == reference]}


@server.tool()
def find_by_order(order_id: str) -> dict:
    """Find shipments by order id (read-only; takes no reference)."""
    return {"records": [r for r in records() if r.get("order_id") == order_id]}


@server.tool()
def find_by_order_and_ref(order_id: str, reference: str | None = None) -> dict:
    """Find shipments by order id (read-only; declares a reference, but does not search by it)."""
    return {"records": [r for r in records() if r.get("order_id") == order_id]}


@server.tool()
def get_rate(sku: str, qty: int = 1) -> dict:
    """Quote a shipping rate (read-only)."""
    return {"sku": sku, "qty": qty, "price_cents": 499 * qty, "currency": "EUR"}


@server.prompt()
def shipping_note(order_id: str) -> str:
    """A note to attach to an order's shipment."""
    return f"Please ship order {order_id} with care."


@server.resource("shipping://carriers")
def carriers() -> str:
    """Carriers this server ships with."""
    return json.dumps(["DHL", "UPS"])


if __name__ == "__main__":
    import sys

    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
