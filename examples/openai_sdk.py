#!/usr/bin/env python3
"""Strata through its OpenAI-compatible HTTP API with the official `openai` SDK: the model
list, a chat completion, a streamed chat completion and a text completion.

    strata-server --model models/gemma-3-270m-q4_k_m.gguf --http-port 8000
    pip install openai
    python examples/openai_sdk.py [BASE_URL]    # default: $STRATA_OPENAI_BASE_URL or
                                                # http://localhost:8000/v1
"""
import os
import sys

from openai import OpenAI


def main() -> int:
    base_url = sys.argv[1] if len(sys.argv) > 1 else os.environ.get(
        "STRATA_OPENAI_BASE_URL", "http://localhost:8000/v1")
    # Strata does not check the key; the SDK insists on one.
    client = OpenAI(base_url=base_url, api_key=os.environ.get("OPENAI_API_KEY", "unused"))

    model = client.models.list().data[0].id
    print(f"model: {model}")

    chat = client.chat.completions.create(
        model=model, temperature=0, max_tokens=48,
        messages=[{"role": "user", "content": "Write a haiku about the sea."}])
    print(f"\n[chat] {chat.choices[0].message.content!r}")
    print(f"  finish_reason={chat.choices[0].finish_reason} usage={chat.usage}")

    print("\n[chat, streamed] ", end="", flush=True)
    stream = client.chat.completions.create(
        model=model, max_tokens=48, stream=True, seed=7,
        stream_options={"include_usage": True},  # a last chunk with usage and no choices
        messages=[{"role": "user", "content": "Name three colors."}])
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            print(chunk.choices[0].delta.content, end="", flush=True)
        if chunk.usage is not None:
            print(f"\n  usage={chunk.usage}")

    completion = client.completions.create(model=model, prompt="Once upon a time,",
                                           max_tokens=32, temperature=0)
    print(f"\n[completion] {completion.choices[0].text!r}")
    print(f"  finish_reason={completion.choices[0].finish_reason}")

    print("\n[completion, streamed] ", end="", flush=True)
    for chunk in client.completions.create(model=model, prompt="The sea is", max_tokens=24,
                                           temperature=0, stream=True):
        if chunk.choices:
            print(chunk.choices[0].text, end="", flush=True)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
