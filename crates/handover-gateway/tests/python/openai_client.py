"""The official `openai` Python client against a running Handover gateway.

Usage: python openai_client.py BASE_URL TOKEN
Runs every scenario and prints one JSON object per line; the Rust test
(tests/gateway/openai_python.rs) arranged the providers and checks the results.
"""

import json
import sys

import openai
from openai import OpenAI

base_url, token = sys.argv[1], sys.argv[2]
# The gateway already retried and fell back under the task's budget;
# it also says `x-should-retry: false` on failures. No SDK retries on top.
client = OpenAI(base_url=base_url + "/v1", api_key=token, max_retries=0, timeout=30)
MESSAGES = [{"role": "user", "content": "hi"}]


def emit(scenario, **fields):
    print(json.dumps({"scenario": scenario, **fields}), flush=True)


def plain(model, scenario):
    raw = client.chat.completions.with_raw_response.create(model=model, messages=MESSAGES)
    completion = raw.parse()
    emit(
        scenario,
        content=completion.choices[0].message.content,
        finish_reason=completion.choices[0].finish_reason,
        model=completion.model,
        total_tokens=completion.usage.total_tokens,
        provider=raw.headers.get("x-handover-provider"),
        attempts=raw.headers.get("x-handover-attempts"),
    )


def streamed(model, scenario):
    text, finish, usage, error = "", None, None, None
    try:
        stream = client.chat.completions.create(
            model=model,
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
        )
        for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage.total_tokens
            for choice in chunk.choices:
                text += choice.delta.content or ""
                finish = choice.finish_reason or finish
    except openai.APIError as e:
        error = {"class": type(e).__name__, "message": e.message, "code": getattr(e, "code", None)}
    emit(scenario, content=text, finish_reason=finish, total_tokens=usage, error=error)


plain("plain", "non_streaming")
plain("fallback", "fallback_after_503")
streamed("stream", "streaming")
streamed("cut-before", "cut_before_commit")
streamed("cut-after", "cut_after_commit")
try:
    client.chat.completions.create(model="no-such-model", messages=MESSAGES)
    emit("unknown_model", error=None)
except openai.NotFoundError as e:
    emit("unknown_model", error={"class": type(e).__name__, "code": e.code})
try:
    OpenAI(base_url=base_url + "/v1", api_key="wrong", max_retries=0).models.list()
    emit("bad_token", error=None)
except openai.AuthenticationError as e:
    emit("bad_token", error={"class": type(e).__name__, "code": e.code})
emit("models", ids=[m.id for m in client.models.list()])
emit("retrieve", ids=[client.models.retrieve(m).id for m in ["plain", "plain/plain-model"]])
try:
    client.models.retrieve("no-such-model")
    emit("retrieve_unknown", error=None)
except openai.NotFoundError as e:
    emit("retrieve_unknown", error={"class": type(e).__name__, "code": e.code})
