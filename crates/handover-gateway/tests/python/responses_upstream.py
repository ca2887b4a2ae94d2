"""The official `openai` SDK's `responses` API, straight against a
Responses-speaking upstream and through the gateway in front of it.

Usage: python responses_upstream.py UPSTREAM_BASE GATEWAY_BASE TOKEN
Each case runs once per base URL ("direct", "gateway"; the fallback case
through the gateway only) and prints one JSON line {"case", "via",
"result"}; the Rust test (tests/gateway/responses_python.rs) compares the results
and what the upstream received.
"""

import json
import sys
import traceback

from openai import OpenAI
from pydantic import BaseModel

upstream, gateway, token = sys.argv[1], sys.argv[2], sys.argv[3]

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
        "required": ["city", "country"],
        "additionalProperties": False,
    },
    "strict": True,
}


class Place(BaseModel):
    city: str
    country: str


def emit(case, via, result):
    print(json.dumps({"case": case, "via": via, "result": result}, default=str), flush=True)


def run(case, fn, vias=("direct", "gateway")):
    for via in vias:
        base, key = (upstream, "upstream-key") if via == "direct" else (gateway, token)
        client = OpenAI(base_url=base, api_key=key, max_retries=0, timeout=30)
        try:
            result = fn(client)
        except Exception as e:  # reported, and the Rust test fails on it
            result = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}
        emit(case, via, result)


def usage(u):
    return {
        "input": u.input_tokens,
        "cached": u.input_tokens_details.cached_tokens,
        "output": u.output_tokens,
        "reasoning": u.output_tokens_details.reasoning_tokens,
        "total": u.total_tokens,
    }


def plain(c):
    r = c.responses.create(model="default", instructions="Be brief.", input="Where is the fjord?",
                           max_output_tokens=64, temperature=0.5)
    return {"text": r.output_text, "status": r.status, "model": r.model, "usage": usage(r.usage)}


def streamed(c):
    deltas, final = [], None
    stream = c.responses.create(model="default", input="Where is the fjord?", stream=True)
    for event in stream:
        if event.type == "response.output_text.delta":
            deltas.append(event.delta)
        elif event.type == "response.completed":
            final = event.response
    return {"text": "".join(deltas), "final": final.output_text, "status": final.status,
            "usage": usage(final.usage)}


def tool(c):
    r = c.responses.create(model="default", input="CASE:tool weather in Oslo?", tools=[WEATHER])
    return [{"type": i.type, "name": i.name, "arguments": json.loads(i.arguments),
             "call_id": i.call_id} for i in r.output if i.type == "function_call"]


def tool_result(c):
    r = c.responses.create(model="default", tools=[WEATHER], input=[
        {"role": "user", "content": "CASE:tool weather in Oslo?"},
        {"type": "function_call", "call_id": "call_up_1", "name": "get_weather",
         "arguments": json.dumps({"city": "Oslo", "country": "Norway"})},
        {"type": "function_call_output", "call_id": "call_up_1", "output": "sunny"},
    ])
    return {"text": r.output_text, "status": r.status}


def streamed_tool(c):
    args, calls = [], []
    stream = c.responses.create(model="default", input="CASE:tool weather in Oslo?",
                                tools=[WEATHER], stream=True)
    for event in stream:
        if event.type == "response.function_call_arguments.delta":
            args.append(event.delta)
        elif event.type == "response.completed":
            calls = [{"name": i.name, "call_id": i.call_id} for i in event.response.output
                     if i.type == "function_call"]
    return {"arguments": json.loads("".join(args)), "calls": calls}


def parse(c):
    r = c.responses.parse(model="default", input="Where is the fjord?", text_format=Place)
    return {"parsed": r.output_parsed.model_dump(), "status": r.status}


def fallback(c):
    raw = c.responses.with_raw_response.create(model="fallback", input="Where is the fjord?")
    r = raw.parse()
    return {"text": r.output_text, "model": r.model,
            "provider": raw.headers.get("x-handover-provider"),
            "attempts": raw.headers.get("x-handover-attempts")}


run("plain", plain)
run("streamed", streamed)
run("tool", tool)
run("tool_result", tool_result)
run("streamed_tool", streamed_tool)
run("parse", parse)
run("fallback", fallback, vias=("gateway",))
