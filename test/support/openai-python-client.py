"""Drive the gateway's /v1 with the official Python `openai` client (test/v1-real-clients.test.ts).

Reads HERMES_BASE_URL and HERMES_API_KEY; prints one JSON object with what each call saw; the
test asserts on it. The local model server behind the gateway answers "echo: <last message>"
word by word, an upstream 500 for a message that says FAIL.
"""
import inspect
import json
import os
import sys

import openai
from openai import OpenAI

client = OpenAI(base_url=os.environ["HERMES_BASE_URL"], api_key=os.environ["HERMES_API_KEY"], max_retries=0)
out = {"version": openai.__version__}


def error_of(call):
    try:
        call()
    except openai.APIError as e:
        return {
            "class": type(e).__name__,
            "status": getattr(e, "status_code", None),
            "code": getattr(e, "code", None),
            "param": getattr(e, "param", None),
            "message": e.message,
        }
    return None


# Chat, plain.
chat = client.chat.completions.create(model="hermes-agent", messages=[{"role": "user", "content": "hello python"}])
out["chat"] = {"content": chat.choices[0].message.content, "finish_reason": chat.choices[0].finish_reason, "total_tokens": chat.usage.total_tokens}

# Chat, streamed with usage: every chunk but the last has usage None; the last has no choices.
text, usages, empty_choices = "", [], []
for chunk in client.chat.completions.create(
    model="hermes-agent", messages=[{"role": "user", "content": "stream python"}], stream=True, stream_options={"include_usage": True}
):
    usages.append(chunk.usage.total_tokens if chunk.usage else None)
    empty_choices.append(len(chunk.choices) == 0)
    if chunk.choices:
        text += chunk.choices[0].delta.content or ""
out["chat_stream"] = {"text": text, "usages": usages, "empty_choices": empty_choices}

# Responses, plain, then continued server-side.
first = client.responses.create(model="hermes-agent", instructions="Be brief.", input="responses python")
second = client.responses.create(model="hermes-agent", input="and then?", previous_response_id=first.id)
out["responses"] = {
    "id": first.id, "status": first.status, "output_text": first.output_text, "input_tokens": first.usage.input_tokens,
    "second_output_text": second.output_text, "second_previous": second.previous_response_id,
}
out["retrieve"] = client.responses.retrieve(first.id).output_text

# Responses, streamed: the raw events, and the stream helper's final response.
types, deltas = [], []
for event in client.responses.create(model="hermes-agent", input="streamed python", stream=True):
    types.append(event.type)
    if event.type == "response.output_text.delta":
        deltas.append(event.delta)
with client.responses.stream(model="hermes-agent", input="helper python") as stream:
    helper_deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
    final = stream.get_final_response()
out["responses_stream"] = {"types": types, "deltas": deltas, "helper_deltas": helper_deltas, "helper_text": final.output_text}

# Errors: an unknown model, a parameter the agent cannot honour, the caller's tools, a failing upstream.
out["errors"] = {
    "model": error_of(lambda: client.chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "x"}])),
    "param": error_of(lambda: client.chat.completions.create(model="hermes-agent", messages=[{"role": "user", "content": "x"}], logprobs=True)),
    "tools": error_of(lambda: client.chat.completions.create(
        model="hermes-agent", messages=[{"role": "user", "content": "x"}],
        tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    )),
    "responses_tools": error_of(lambda: client.responses.create(
        model="hermes-agent", input="x", tools=[{"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": False}],
    )),
    "upstream": error_of(lambda: client.chat.completions.create(model="hermes-agent", messages=[{"role": "user", "content": "FAIL"}])),
    "upstream_stream": error_of(lambda: [c for c in client.chat.completions.create(
        model="hermes-agent", messages=[{"role": "user", "content": "FAIL"}], stream=True,
    )]),
}
# What Codex-style clients send: store=False, answered and not kept (retrieving it is 404).
unstored = client.responses.create(model="hermes-agent", input="unstored python", store=False)
out["store_false"] = {
    "status": unstored.status, "output_text": unstored.output_text, "store": unstored.to_dict().get("store"),
    "retrieve": error_of(lambda: client.responses.retrieve(unstored.id)),
}

# A chat completion with the fields clients send that change nothing here (the parameter table ignores them).
ignored = client.chat.completions.create(
    model="hermes-agent", messages=[{"role": "user", "content": "ignored python"}],
    metadata={"ticket": "T-1"}, parallel_tool_calls=False, service_tier="flex", prompt_cache_key="tenant-7", store=True,
)
out["chat_ignored"] = ignored.choices[0].message.content
out["errors"]["refused"] = error_of(lambda: client.responses.create(model="hermes-agent", input="x", prompt={"id": "pmpt_123"}))

# The fields this client's create() methods declare, for the test to find each in the parameter table.
TRANSPORT = {"self", "extra_headers", "extra_query", "extra_body", "timeout"}
out["declared"] = {
    name: [p for p in inspect.signature(create).parameters if p not in TRANSPORT]
    for name, create in (("chat", client.chat.completions.create), ("responses", client.responses.create))
}

failed_types = []
for event in client.responses.create(model="hermes-agent", input="FAIL", stream=True):
    failed_types.append(event.type)
    if event.type == "error":
        out["responses_stream_error"] = {"code": event.code, "message": event.message}
out["responses_stream_failed_types"] = failed_types

json.dump(out, sys.stdout)
