#!/usr/bin/env python3
"""strata_client with asyncio: several prompts generated concurrently (the server batches
them), then one streamed with `async for`.

    pip install ./clients/python
    python examples/async_client.py [HOST:PORT]       # default: $STRATA_ADDR or localhost:50051
"""
import asyncio
import os
import sys

import strata_client

PROMPTS = ["The capital of France is", "Water boils at", "The largest planet is"]


async def main(target: str) -> int:
    async with strata_client.AsyncClient(target, timeout=120) as client:
        if not await client.is_serving(timeout=10):
            print(f"no Strata server serving at {target}", file=sys.stderr)
            return 1
        completions = await asyncio.gather(
            *(client.generate(p, max_tokens=16, temperature=0) for p in PROMPTS))
        for prompt, completion in zip(PROMPTS, completions):
            print(f"[generate] {prompt}{completion.text!r} ({completion.finish_reason.value})")

        print("\n[stream] ", end="", flush=True)
        async with client.stream("Once upon a time,", max_tokens=48, temperature=0) as stream:
            async for chunk in stream:
                print(chunk.text, end="", flush=True)
        print(f"\n  finish_reason={stream.finish_reason.value} usage={stream.usage}")
    return 0


if __name__ == "__main__":
    address = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("STRATA_ADDR",
                                                                   "localhost:50051")
    sys.exit(asyncio.run(main(address)))
