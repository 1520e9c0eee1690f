#!/usr/bin/env python3
"""strata_client, blocking: a greedy completion, a chat turn streamed as it is generated, the
tokenizer, and an error as an exception.

    pip install ./clients/python
    python examples/python_client.py [HOST:PORT]      # default: $STRATA_ADDR or localhost:50051
"""
import os
import sys

import strata_client


def main() -> int:
    target = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("STRATA_ADDR",
                                                                  "localhost:50051")
    with strata_client.Client(target, timeout=120) as client:
        if not client.is_serving(timeout=10):
            print(f"no Strata server serving at {target}", file=sys.stderr)
            return 1
        info = client.model_info()
        print(f"{info.name} ({info.architecture}, {info.quantization}) on {info.backend}")

        completion = client.generate("Once upon a time,", max_tokens=32, temperature=0)
        print(f"\n[generate] {completion.text!r}")
        print(f"  finish_reason={completion.finish_reason.value} usage={completion.usage}")

        print("\n[stream] ", end="", flush=True)
        with client.stream(messages=[{"role": "user", "content": "Write a haiku about the sea."}],
                           max_tokens=64, temperature=0.7, seed=42) as stream:
            for chunk in stream:
                print(chunk.text, end="", flush=True)
        print(f"\n  finish_reason={stream.finish_reason.value} usage={stream.usage}")

        ids = client.tokenize("Hello world")
        print(f"\n[tokenize] {ids} -> {client.detokenize(ids)!r}")

        try:
            client.generate("Hi", temperature=-1)
        except strata_client.InvalidRequestError as e:
            print(f"\n[error] {type(e).__name__} field={e.field}: {e.message}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
