"""Four agent stacks against the upstream directly and through the gateway.

Usage: python frameworks.py UPSTREAM_BASE GATEWAY_BASE TOKEN
Each case runs once per base URL ("direct", "gateway"; cases that need the
Responses API run through the gateway only, the plain upstream speaks Chat
Completions) and prints one JSON line {"case", "via", "result"}; the Rust
test (tests/gateway/frameworks_python.rs) compares them and the upstream's requests.
"""

import asyncio
import json
import sys
import traceback

from pydantic import BaseModel

upstream, gateway, token = sys.argv[1], sys.argv[2], sys.argv[3]
# The gateway already retried and fell back under the task's budget.
RETRIES = 0


class Place(BaseModel):
    city: str
    country: str


def get_weather(city: str, country: str) -> str:
    """Get the weather in a city."""
    return f"sunny in {city}, {country}"


def emit(case, via, result):
    print(json.dumps({"case": case, "via": via, "result": result}, default=str), flush=True)


def run(case, fn, vias=("direct", "gateway")):
    for via in vias:
        base, key = (upstream, "upstream-key") if via == "direct" else (gateway, token)
        try:
            result = fn(base, key)
        except Exception as e:  # reported, and the Rust test fails on it
            result = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}
        emit(case, via, result)


# ---- the official openai SDK ----

def openai_client(base, key):
    from openai import OpenAI

    return OpenAI(base_url=base, api_key=key, max_retries=RETRIES, timeout=30)


def openai_parse(base, key):
    c = openai_client(base, key).chat.completions.parse(
        model="default",
        messages=[{"role": "user", "content": "Where is the fjord?"}],
        response_format=Place,
    )
    return {"parsed": c.choices[0].message.parsed.model_dump(), "refusal": c.choices[0].message.refusal}


def openai_stream_helper(base, key):
    deltas = []
    with openai_client(base, key).chat.completions.stream(
        model="default",
        messages=[{"role": "user", "content": "Where is the fjord?"}],
        response_format=Place,
    ) as stream:
        for event in stream:
            if event.type == "content.delta":
                deltas.append(event.delta)
        final = stream.get_final_completion()
    return {"deltas": deltas, "parsed": final.choices[0].message.parsed.model_dump()}


def openai_strict_tools(base, key):
    import openai

    c = openai_client(base, key).chat.completions.parse(
        model="default",
        messages=[{"role": "user", "content": "CASE:tool weather in Oslo?"}],
        tools=[openai.pydantic_function_tool(Place, name="get_weather")],
    )
    call = c.choices[0].message.tool_calls[0]
    return {"name": call.function.name, "parsed": call.function.parsed_arguments.model_dump()}


def openai_reasoning_effort(base, key):
    c = openai_client(base, key).chat.completions.create(
        model="default",
        messages=[{"role": "user", "content": "Think, then answer."}],
        reasoning_effort="low",
    )
    return {"content": c.choices[0].message.content, "model": c.model, "usage": c.usage.total_tokens}


def openai_logprobs(base, key):
    c = openai_client(base, key).chat.completions.create(
        model="default",
        messages=[{"role": "user", "content": "hi"}],
        logprobs=True,
        top_logprobs=1,
    )
    return {
        "content": c.choices[0].message.content,
        "tokens": [t.token for t in c.choices[0].logprobs.content],
        "fingerprint": c.system_fingerprint,
        "id": c.id,
    }


def openai_stream_chunks(base, key, **kwargs):
    """Every chunk whole (but for the gateway's own `handover` object on the
    first): ids, model, fingerprint, logprobs, usage, in order."""
    stream = openai_client(base, key).chat.completions.create(
        model="default",
        messages=[{"role": "user", "content": kwargs.pop("prompt", "hi")}],
        stream=True,
        stream_options={"include_usage": True},
        **(kwargs or {"logprobs": True, "top_logprobs": 1}),
    )
    chunks = []
    for chunk in stream:
        d = chunk.model_dump(exclude_none=True)
        d.pop("handover", None)
        chunks.append(d)
    return chunks


def openai_stream_tool_chunks(base, key):
    tool = {"type": "function", "function": {"name": "get_weather", "strict": True, "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
        "required": ["city", "country"], "additionalProperties": False}}}
    return openai_stream_chunks(base, key, prompt="CASE:tool weather in Oslo?", tools=[tool],
                                parallel_tool_calls=False)


# ---- the OpenAI Agents SDK ----

def agents_run(base, key, *, responses, output_type=None, prompt):
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        OpenAIResponsesModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=base, api_key=key, max_retries=RETRIES, timeout=30)
    model_cls = OpenAIResponsesModel if responses else OpenAIChatCompletionsModel
    kwargs = {"output_type": output_type} if output_type else {"tools": [function_tool(get_weather)]}
    agent = Agent(
        name="assistant",
        instructions="Answer briefly.",
        model=model_cls(model="default", openai_client=client),
        **kwargs,
    )
    result = asyncio.run(Runner.run(agent, prompt))
    out = result.final_output
    return out.model_dump() if isinstance(out, BaseModel) else out


def agents_responses_tool(base, key):
    return agents_run(base, key, responses=True, prompt="CASE:gateway_only CASE:tool weather in Oslo?")


def agents_responses_output_type(base, key):
    return agents_run(base, key, responses=True, output_type=Place, prompt="CASE:gateway_only where is it?")


def agents_responses_streamed(base, key):
    from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=base, api_key=key, max_retries=RETRIES, timeout=30)
    agent = Agent(
        name="assistant",
        instructions="Answer briefly.",
        model=OpenAIResponsesModel(model="default", openai_client=client),
        tools=[function_tool(get_weather)],
    )

    async def go():
        result = Runner.run_streamed(agent, "CASE:gateway_only CASE:tool weather in Oslo?")
        kinds = set()
        async for ev in result.stream_events():
            if ev.type == "raw_response_event":
                kinds.add(ev.data.type)
        return {"output": result.final_output, "saw_text_delta": "response.output_text.delta" in kinds,
                "saw_args_delta": "response.function_call_arguments.delta" in kinds}

    return asyncio.run(go())


def openai_responses_parse(base, key):
    r = openai_client(base, key).responses.parse(
        model="default", input="CASE:gateway_only where is it?", text_format=Place
    )
    return {"parsed": r.output_parsed.model_dump(), "store": r.store}


def agents_chat_tool(base, key):
    return agents_run(base, key, responses=False, prompt="CASE:tool weather in Oslo?")


def agents_chat_output_type(base, key):
    return agents_run(base, key, responses=False, output_type=Place, prompt="where is it?")


# ---- pydantic-ai ----

def pydantic_ai_run(base, key, output):
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=base, api_key=key, max_retries=RETRIES, timeout=30)
    model = OpenAIChatModel("default", provider=OpenAIProvider(openai_client=client))
    return Agent(model, output_type=output).run_sync("Where is the fjord?").output.model_dump()


def pydantic_ai_native(base, key):
    from pydantic_ai import NativeOutput

    return pydantic_ai_run(base, key, NativeOutput(Place))


def pydantic_ai_prompted(base, key):
    from pydantic_ai import PromptedOutput

    return pydantic_ai_run(base, key, PromptedOutput(Place))


def pydantic_ai_tool(base, key):
    from pydantic_ai import ToolOutput

    return pydantic_ai_run(base, key, ToolOutput(Place))


# ---- langchain-openai ----

def chat_openai(base, key):
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model="default", base_url=base, api_key=key, max_retries=RETRIES, timeout=30)


def langchain_structured(method):
    def case(base, key):
        llm = chat_openai(base, key).with_structured_output(Place, method=method)
        return llm.invoke("Where is the fjord? Answer in JSON.").model_dump()

    return case


def langchain_bind_tools(base, key):
    msg = chat_openai(base, key).bind_tools([get_weather]).invoke("CASE:tool weather in Oslo?")
    return [{"name": c["name"], "args": c["args"], "id": c["id"]} for c in msg.tool_calls]


def langchain_stream(base, key):
    chunks = list(chat_openai(base, key).stream("hi"))
    return {
        "content": [c.content for c in chunks],
        "models": sorted({c.response_metadata.get("model_name", "") for c in chunks} - {""}),
    }


run("openai_parse", openai_parse)
run("openai_stream_helper", openai_stream_helper)
run("openai_strict_tools", openai_strict_tools)
run("openai_reasoning_effort", openai_reasoning_effort)
run("openai_logprobs", openai_logprobs)
run("openai_stream_chunks", openai_stream_chunks)
run("openai_stream_tool_chunks", openai_stream_tool_chunks)
run("agents_responses_tool", agents_responses_tool, vias=("gateway",))
run("agents_responses_output_type", agents_responses_output_type, vias=("gateway",))
run("agents_responses_streamed", agents_responses_streamed, vias=("gateway",))
run("openai_responses_parse", openai_responses_parse, vias=("gateway",))
run("agents_chat_tool", agents_chat_tool)
run("agents_chat_output_type", agents_chat_output_type)
run("pydantic_ai_native", pydantic_ai_native)
run("pydantic_ai_prompted", pydantic_ai_prompted)
run("pydantic_ai_tool", pydantic_ai_tool)
run("langchain_json_schema", langchain_structured("json_schema"))
run("langchain_function_calling", langchain_structured("function_calling"))
run("langchain_json_mode", langchain_structured("json_mode"))
run("langchain_bind_tools", langchain_bind_tools)
run("langchain_stream", langchain_stream)
