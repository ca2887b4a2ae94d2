"""One budget per user task, through the gateway, with the official `openai` client.

Usage: python task_budget.py BASE_URL TOKEN_A TOKEN_B
Every call of one user task names it in `x-handover-task`. Prints one JSON
object per call; the Rust test (tests/gateway/task_budget.rs) arranged the
providers, counts the requests they received and checks the results.
"""

import json
import sys
import time

import openai
from openai import OpenAI

base_url, token_a, token_b = sys.argv[1], sys.argv[2], sys.argv[3]
MESSAGES = [{"role": "user", "content": "hi"}]


def client(token, task):
    # No SDK retries: the gateway says `x-should-retry: false` on failures anyway.
    return OpenAI(
        base_url=base_url + "/v1",
        api_key=token,
        max_retries=0,
        timeout=30,
        default_headers={"x-handover-task": task},
    )


def emit(scenario, **fields):
    print(json.dumps({"scenario": scenario, **fields}), flush=True)


def failure(e):
    return {
        "status": e.status_code,
        "code": e.code,
        "param": getattr(e, "param", None),
        "message": e.message,
        "remaining": e.response.headers.get("x-handover-budget-remaining"),
        "should_retry": e.response.headers.get("x-should-retry"),
    }


def call(scenario, c, model="tasked"):
    try:
        raw = c.chat.completions.with_raw_response.create(model=model, messages=MESSAGES)
        completion = raw.parse()
        emit(
            scenario,
            status=raw.status_code,
            content=completion.choices[0].message.content,
            attempts=raw.headers.get("x-handover-attempts"),
            remaining=raw.headers.get("x-handover-budget-remaining"),
        )
    except openai.APIStatusError as e:
        emit(scenario, **failure(e))


def streamed(scenario, c, model):
    text, error, started = "", None, time.monotonic()
    remaining = None
    try:
        with c.chat.completions.with_streaming_response.create(
            model=model, messages=MESSAGES, stream=True
        ) as raw:
            remaining = raw.headers.get("x-handover-budget-remaining")
            for chunk in raw.parse():
                for choice in chunk.choices:
                    text += choice.delta.content or ""
    except openai.APIStatusError as e:
        error = failure(e)
    except openai.APIError as e:
        error = {"class": type(e).__name__, "code": getattr(e, "code", None)}
    emit(scenario, content=text, error=error, remaining=remaining,
         seconds=time.monotonic() - started)


# Three calls under one task (max_requests = 3, primary failing), then a fourth.
trip = client(token_a, "trip-1")
for n in (1, 2, 3, 4):
    call(f"trip_call_{n}", trip)
# Another task id of the same client: its own budget.
call("other_task", client(token_a, "trip-2"))
# Another client naming the same task id: its own task, in its own scope.
call("other_client", client(token_b, "trip-1"))
# The first call's policy sticks: another policy under the task is refused.
call("policy_mismatch", trip, model="plain")
# A task id that is not 1..=255 bytes of visible ASCII.
call("bad_task_header", client(token_a, "x" * 256))

# The first call's deadline bounds every later call, streaming included.
slow = client(token_a, "slow-1")
started = time.monotonic()
call("slow_first", slow, model="short")
streamed("slow_stream", slow, model="short")
call("slow_after_deadline", slow, model="short")
emit("slow_total", seconds=time.monotonic() - started)
