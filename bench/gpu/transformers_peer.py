#!/usr/bin/env python3
"""The transformers peer of strata-bench-gpu: the same Llama-3-8B shape in PyTorch.

A LlamaForCausalLM built from a LlamaConfig with Llama-3-8B's dimensions, random weights in
bf16 on the GPU (nothing is downloaded), run eagerly with SDPA attention:
  decode   one decode step at each --batches size with a KV cache already holding --context
           tokens (StaticCache when this transformers version has a usable one, else
           DynamicCache): ms per step and tokens/s, best of the timed steps' mean.
  prefill  one --prefill-tokens chunk, then --prefill-batch such chunks in one batch, through
           the decoder stack (no lm_head): TFLOP/s counted as strata-bench-gpu counts them
           (2 flops per weight per token plus causal attention).

Output: one JSON object per measurement per line, then a markdown table (lines starting with
'|'). Exits 0 with a message when torch, transformers or a CUDA device is missing, so a check
script records "skipped" rather than a failure; exits 1 when a measurement failed.
"""
import argparse
import json
import sys
import time


def emit(obj):
    print(json.dumps(obj), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,8,32,128")
    parser.add_argument("--context", type=int, default=512)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--prefill-tokens", type=int, default=2048)
    parser.add_argument("--prefill-batch", type=int, default=4)
    parser.add_argument("--layers", type=int, default=32, help="fewer for a quick try")
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",") if b]

    try:
        import torch
        import transformers
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError as e:
        print(f"transformers_peer: skipped: {e}")
        return 0
    if not torch.cuda.is_available():
        print("transformers_peer: skipped: no CUDA device")
        return 0

    emit({"test": "env", "torch": torch.__version__, "transformers": transformers.__version__,
          "device": torch.cuda.get_device_name(0)})
    hidden, ff, heads, kv_heads, vocab = 4096, 14336, 32, 8, 128256
    config = LlamaConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=ff,
        num_hidden_layers=args.layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
        max_position_embeddings=8192, rope_theta=500000.0, rms_norm_eps=1e-5,
        tie_word_embeddings=False, torch_dtype=torch.bfloat16)
    config._attn_implementation = "sdpa"

    t0 = time.perf_counter()
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config)
    torch.set_default_dtype(torch.float32)
    model.eval()
    torch.cuda.synchronize()
    emit({"test": "init", "seconds": round(time.perf_counter() - t0, 2),
          "parameters": sum(p.numel() for p in model.parameters())})

    failed = False
    rows = []
    gen = torch.Generator(device="cuda").manual_seed(1)

    def tokens(b, n):
        return torch.randint(3, vocab, (b, n), device="cuda", generator=gen)

    def make_cache(b, length):
        """A StaticCache for b sequences of `length` tokens, or None to use DynamicCache."""
        try:
            from transformers import StaticCache
        except ImportError:
            return None, "DynamicCache"
        attempts = [
            dict(config=config, max_batch_size=b, max_cache_len=length, device="cuda",
                 dtype=torch.bfloat16),
            dict(config=config, batch_size=b, max_cache_len=length, device="cuda",
                 dtype=torch.bfloat16),
            dict(config=config, max_cache_len=length),
        ]
        for kwargs in attempts:
            try:
                return StaticCache(**kwargs), "StaticCache"
            except TypeError:
                continue
        return None, "DynamicCache"

    warmup = 3
    with torch.inference_mode():
        for b in batches:
            try:
                from transformers import DynamicCache
                cache, kind = make_cache(b, args.context + warmup + args.steps + 1)
                if cache is None:
                    cache = DynamicCache()
                prompt = tokens(b, args.context)
                # The context is prefilled through the decoder stack only: no [b, n, vocab]
                # logits, which at batch 128 would take 16 GiB.
                model.model(input_ids=prompt, past_key_values=cache, use_cache=True,
                            cache_position=torch.arange(args.context, device="cuda"))
                pos = args.context
                times = []
                for step in range(warmup + args.steps):
                    ids = tokens(b, 1)
                    torch.cuda.synchronize()
                    t = time.perf_counter()
                    out = model(input_ids=ids, past_key_values=cache, use_cache=True,
                                cache_position=torch.tensor([pos], device="cuda"))
                    out.logits[:, -1, :].argmax(-1).cpu()  # the step ends with the host
                    dt = time.perf_counter() - t
                    pos += 1
                    if step >= warmup:
                        times.append(dt)
                step_s = sum(times) / len(times)
                emit({"test": "decode", "batch": b, "context": args.context, "cache": kind,
                      "ms_per_step": step_s * 1e3, "tokens_per_s": b / step_s})
                rows.append(("decode step", f"batch {b} @ ctx {args.context}",
                             f"{step_s * 1e3:.2f} ms, {b / step_s:.0f} tok/s", kind))
                del cache
            except Exception as e:  # one failure (e.g. out of memory) must not stop the rest
                failed = True
                emit({"test": "decode", "batch": b, "error": f"{type(e).__name__}: {e}"[:300]})
                rows.append(("decode step", f"batch {b}", "FAILED", str(e)[:60]))
            torch.cuda.empty_cache()

        n = args.prefill_tokens
        layer_elems = args.layers * (hidden * (hidden + 2 * (hidden // heads) * kv_heads)
                                     + hidden * hidden + 3 * hidden * ff)
        for seqs in sorted({1, args.prefill_batch}):
            try:
                ids = tokens(seqs, n)
                best = float("inf")
                for rep in range(3):
                    torch.cuda.synchronize()
                    t = time.perf_counter()
                    model.model(input_ids=ids, use_cache=False)
                    torch.cuda.synchronize()
                    if rep > 0:
                        best = min(best, time.perf_counter() - t)
                flops = seqs * (2 * layer_elems * n
                                + 4 * args.layers * hidden * n * (n + 1) / 2)
                tflops = flops / best / 1e12
                emit({"test": "prefill", "seqs": seqs, "tokens_each": n, "seconds": best,
                      "tokens_per_s": seqs * n / best, "tflops": tflops})
                rows.append(("prefill", f"{seqs} x {n} tokens", f"{tflops:.1f} TFLOP/s",
                             f"{seqs * n / best:.0f} tok/s"))
            except Exception as e:
                failed = True
                emit({"test": "prefill", "seqs": seqs, "error": f"{type(e).__name__}: {e}"[:300]})
                rows.append(("prefill", f"{seqs} x {n}", "FAILED", str(e)[:60]))
            torch.cuda.empty_cache()

    print()
    print("| test | shape | result | note |")
    print("|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
