"""Checks JSON documents against the official `openai` SDK's Responses types.

Usage: python responses_shapes.py < DOCUMENTS
Each stdin line is {"name", "kind", "body"}: kind "request" is validated as
`ResponseCreateParams` (streaming or not, by its `stream`) with unknown keys
forbidden at every level; "response" as the `Response` model; "event" as a
`ResponseStreamEvent`. Prints one JSON line {"name", "ok", "error"} each;
the Rust test (tests/providers/responses.rs) fails on any error.
"""

import importlib
import json
import pkgutil
import sys

import pydantic
import typing_extensions

import openai.types as types

# The SDK's request types are TypedDicts, which pydantic checks with
# unknown keys ignored; forbid them, so a misspelt or misplaced field fails.
for info in pkgutil.walk_packages(types.__path__, types.__name__ + "."):
    try:
        module = importlib.import_module(info.name)
    except Exception:  # optional extras the SDK imports lazily
        continue
    for obj in vars(module).values():
        if typing_extensions.is_typeddict(obj) and obj.__module__ == module.__name__:
            obj.__pydantic_config__ = {"extra": "forbid"}

from openai.types.responses import Response, ResponseStreamEvent  # noqa: E402
from openai.types.responses import response_create_params as params  # noqa: E402

REQUEST = {
    False: pydantic.TypeAdapter(params.ResponseCreateParamsNonStreaming),
    True: pydantic.TypeAdapter(params.ResponseCreateParamsStreaming),
}
EVENT = pydantic.TypeAdapter(ResponseStreamEvent)


def consume(value):
    """Walks a validated value: `Iterable` fields validate lazily, item by item."""
    if isinstance(value, dict):
        return {k: consume(v) for k, v in value.items()}
    if isinstance(value, (str, bytes, int, float, bool)) or value is None:
        return value
    return [consume(v) for v in value]


def check(kind, body):
    if kind == "request":
        consume(REQUEST[bool(body.get("stream"))].validate_python(body))
    elif kind == "response":
        Response.model_validate(body)
    elif kind == "event":
        EVENT.validate_python(body)
    else:
        raise ValueError(f"unknown kind {kind!r}")


for line in sys.stdin:
    doc = json.loads(line)
    try:
        check(doc["kind"], doc["body"])
        error = None
    except Exception as e:  # reported; the Rust test fails on it
        error = f"{type(e).__name__}: {e}"
    print(json.dumps({"name": doc["name"], "ok": error is None, "error": error}), flush=True)
