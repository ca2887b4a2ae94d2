"""A two-turn tool loop with the official `openai` client, written as agent
code writes it: the assistant message goes back as the client got it.

Usage: python tool_call_fields.py BASE_URL TOKEN
For each policy (an OpenAI-compatible Gemini endpoint, native Gemini) and
each way of reading the answer (whole, the SDK's stream helper), prints one
JSON line: what the client kept of each call's other members and the
second turn's answer. The Rust test (tests/gateway/tool_call_fields.rs) checks
what the upstreams received.
"""

import json
import sys

from openai import OpenAI

base_url, token = sys.argv[1], sys.argv[2]
client = OpenAI(base_url=base_url + "/v1", api_key=token, max_retries=0, timeout=30)
TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": {arg: {"type": "integer"}}}}}
    for name, arg in [("fa", "a"), ("fb", "b")]
]
USER = {"role": "user", "content": "Do fa and fb."}


def first_turn(model, streamed):
    if not streamed:
        return client.chat.completions.create(model=model, messages=[USER], tools=TOOLS)
    with client.chat.completions.stream(model=model, messages=[USER], tools=TOOLS) as s:
        return s.get_final_completion()


for model in ["compat", "gem"]:
    for streamed in [False, True]:
        message = first_turn(model, streamed).choices[0].message
        kept = [(c.model_extra or {}).get("extra_content") for c in message.tool_calls]
        results = [{"role": "tool", "tool_call_id": c.id, "content": "ok"} for c in message.tool_calls]
        answer = client.chat.completions.create(
            model=model, messages=[USER, message, *results], tools=TOOLS
        )
        print(json.dumps({
            "scenario": f"{model}_{'stream' if streamed else 'plain'}",
            "kept": kept,
            "answer": answer.choices[0].message.content,
        }), flush=True)
