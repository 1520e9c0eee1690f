"""The CPU backend's logits against an exact float64 reference and against llama.cpp.

Two oracles on the same GGUF files:
- reference_model.py, a float64 numpy implementation of the graphs (weights through gguf's
  dequantizer, no int8/fp16 shortcuts): the exactness oracle. Strata must agree with it to
  cosine >= 0.99999 at every position, and its greedy continuations must be the reference's.
- llama.cpp (llama-cpp-python), the peer. llama.cpp quantizes activations to int8 and rounds
  attention inputs to fp16, which moves its logits up to ~1.6% (cosine 0.984) away from the
  exact values on the real model (measured against the same float64 reference), so the peer
  comparison uses the tolerances of that noise: top-1 >= 97%, cosine >= 0.98, perplexity
  within 1%.
Real model: Gemma 3 270M Q4_K_M, 20 prompts, a 700-token text across the 512-token sliding
window, and >= 2,000 tokens of the GPL-3 text (Debian's base-files) for perplexity.
Synthetic llama / qwen2 / gemma3 files (random weights, make_synthetic_model.py) too.
"""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import tool
from reference_model import ReferenceModel

HERE = Path(__file__).resolve().parent
THREADS = 2
GPL = Path("/usr/share/common-licenses/GPL-3")

PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea,",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Photosynthesis is the process by which plants",
    "Translate to German: The weather is nice today.",
    "1, 1, 2, 3, 5, 8, 13, 21,",
    "The three primary colors are",
    "In 1969, Neil Armstrong",
    "SELECT name, COUNT(*) FROM users GROUP BY",
    "Le chat est assis sur",
    "Water boils at a temperature of",
    "Here is a haiku about autumn:\n",
    "The quick brown fox jumps over the lazy dog. The quick brown fox",
    "Question: What is 12 times 12?\nAnswer:",
    "東京は日本の首都です。大阪は",
    "The mitochondria is often called the",
    "<start_of_turn>user\nWrite a short greeting.<end_of_turn>\n<start_of_turn>model\n",
    "Dear Sir or Madam,\n\nI am writing to",
    "import numpy as np\nx = np.arange(10)\nprint(",
    "The most important rule of cooking pasta is",
]


def llama(model_path, n_ctx=512):
    import llama_cpp

    return llama_cpp.Llama(model_path=str(model_path), n_ctx=n_ctx, n_batch=512,
                           logits_all=True, n_threads=THREADS, verbose=False)


def reference_logits(llm, tokens):
    llm.reset()
    llm.eval(tokens)
    return np.array(llm.scores[: len(tokens)], dtype=np.float32)


def strata(build_dir, model_path, tokens, mode="logits", steps=0, chunk=256, kv_dtype="f16"):
    cmd = [str(tool(build_dir, "strata-logits")), str(model_path), "--tokens",
           " ".join(map(str, tokens)), "--mode", mode, "--threads", str(THREADS),
           "--chunk", str(chunk), "--kv-dtype", kv_dtype]
    if mode == "greedy":
        cmd += ["--steps", str(steps)]
    proc = subprocess.run(cmd, capture_output=True, timeout=900)
    assert proc.returncode == 0, proc.stderr.decode()
    if mode == "greedy":
        return [int(t) for t in proc.stdout.split()]
    return np.frombuffer(proc.stdout, dtype=np.float32)


def compare_logits(ours, ref, label):
    cos = np.sum(ours * ref, axis=1) / (np.linalg.norm(ours, axis=1) * np.linalg.norm(ref, axis=1))
    top1 = np.argmax(ours, axis=1) == np.argmax(ref, axis=1)
    worst = int(np.argmin(cos))
    return top1, cos, f"{label}: min cosine {cos[worst]:.6f} at position {worst}"


def check_against_reference(build_dir, model_path, ref, prompts_tokens, min_cos=0.99999):
    top1_all = []
    for i, tokens in enumerate(prompts_tokens):
        want = ref.forward(tokens, ref.new_cache())
        ours = strata(build_dir, model_path, tokens, chunk=7 if i % 3 == 0 else 256)
        ours = ours.reshape(len(tokens), -1)
        top1, cos, msg = compare_logits(ours, want, f"prompt {i}")
        print(msg, f"top1 {top1.mean():.3f}")
        assert cos.min() >= min_cos, msg
        top1_all.append(top1)
    rate = np.concatenate(top1_all).mean()
    print(f"top-1 agreement with the float64 reference: {rate:.4f}")
    assert rate >= 0.99


def greedy_is_reference_argmax(ref, prompt, generated, tie=1e-4):
    """True when every generated token is the reference's argmax given the same prefix (a
    near-tie within `tie` logits accepts either token): then the reference's own greedy
    decoding produces the same continuation."""
    logits = ref.forward(prompt + generated, ref.new_cache())
    for k, token in enumerate(generated):
        row = logits[len(prompt) - 1 + k]
        if row[token] < row.max() - tie:
            return False, k
    return True, len(generated)


@pytest.fixture(scope="module")
def gemma_ref(model_path):
    return ReferenceModel(model_path)


@pytest.fixture(scope="module")
def gemma(model_path):
    return llama(model_path, n_ctx=2560)


@pytest.fixture(scope="module")
def prompt_tokens(gemma):
    return [gemma.tokenize(p.encode(), add_bos=True, special=True) for p in PROMPTS]


def test_real_model_logits_match_float64_reference(build_dir, model_path, gemma_ref,
                                                   prompt_tokens):
    check_against_reference(build_dir, model_path, gemma_ref, prompt_tokens)


def test_real_model_greedy_continuations_are_the_reference_ones(build_dir, model_path,
                                                                gemma_ref, prompt_tokens):
    same = 0
    for i, tokens in enumerate(prompt_tokens):
        ours = strata(build_dir, model_path, tokens, mode="greedy", steps=64)
        ok, agree = greedy_is_reference_argmax(gemma_ref, tokens, ours)
        print(f"prompt {i}: reference argmax for {agree} of 64 tokens")
        same += ok
    print(f"{same}/20 greedy continuations are the reference's")
    assert same >= 18


def test_real_model_sliding_window_matches_reference(build_dir, model_path, gemma_ref, gemma):
    # 700 positions: the local layers' 512-token window slides; log-probabilities of the
    # actual next tokens must match the exact ones.
    tokens = gemma.tokenize(GPL.read_bytes(), add_bos=True, special=False)[:700]
    want = gemma_ref.forward(tokens, gemma_ref.new_cache())
    m = want.max(axis=1, keepdims=True)
    want_lp = (want - m - np.log(np.exp(want - m).sum(axis=1, keepdims=True)))
    want_lp = want_lp[np.arange(len(tokens) - 1), tokens[1:]]
    # fp32 KV is exact up to fp32 rounding; fp16 KV (the default) adds the storage rounding.
    for kv_dtype, bound in (("f32", 1e-3), ("f16", 5e-2)):
        ours_lp = strata(build_dir, model_path, tokens, mode="nll", chunk=300,
                         kv_dtype=kv_dtype).astype(np.float64)
        err = np.abs(ours_lp - want_lp)
        print(f"KV {kv_dtype}: max |log p| error {err.max():.2e} at position "
              f"{int(err.argmax())}, median {np.median(err):.1e}")
        assert err.max() < bound, kv_dtype


def test_real_model_agrees_with_llama_cpp(build_dir, model_path, gemma, prompt_tokens):
    tops = []
    worst = 1.0
    same_greedy = 0
    for i, tokens in enumerate(prompt_tokens):
        ref = reference_logits(gemma, tokens)
        ours = strata(build_dir, model_path, tokens).reshape(len(tokens), -1)
        top1, cos, msg = compare_logits(ours, ref, f"prompt {i} vs llama.cpp")
        print(msg)
        tops.append(top1)
        worst = min(worst, float(cos.min()))
    rate = np.concatenate(tops).mean()
    print(f"vs llama.cpp: top-1 {rate:.4f}, worst cosine {worst:.5f}")
    assert rate >= 0.97
    assert worst >= 0.98


def test_real_model_perplexity_matches_llama_cpp(build_dir, model_path, gemma):
    tokens = gemma.tokenize(GPL.read_bytes(), add_bos=True, special=False)[:2400]
    assert len(tokens) >= 2000
    gemma.reset()
    gemma.eval(tokens)
    ref_nll = []
    for start in range(0, len(tokens) - 1, 128):  # row blocks: the full matrix is 2.5 GB
        stop = min(start + 128, len(tokens) - 1)
        rows = np.asarray(gemma.scores[start:stop], dtype=np.float64)
        m = rows.max(axis=1, keepdims=True)
        lse = m[:, 0] + np.log(np.exp(rows - m).sum(axis=1))
        ref_nll.extend(lse - rows[np.arange(stop - start), tokens[start + 1:stop + 1]])
    ours_lp = strata(build_dir, model_path, tokens, mode="nll", chunk=512).astype(np.float64)
    ref_ppl = float(np.exp(np.mean(ref_nll)))
    ours_ppl = float(np.exp(-np.mean(ours_lp)))
    print(f"perplexity over {len(tokens)} tokens: strata {ours_ppl:.4f}, llama.cpp {ref_ppl:.4f}")
    assert abs(ours_ppl - ref_ppl) / ref_ppl <= 0.01


@pytest.mark.parametrize("arch,ftype", [("llama", "q4_k_m"), ("qwen2", "q8_0"),
                                        ("gemma3", "q4_k_m"), ("gemma3", "f16"),
                                        ("llama", "q4_0"), ("qwen2", "q5_k_m")])
def test_synthetic_models_match_reference_and_llama_cpp(build_dir, tmp_path, arch, ftype):
    path = tmp_path / f"{arch}-{ftype}.gguf"
    subprocess.run([sys.executable, str(HERE / "make_synthetic_model.py"), "--arch", arch,
                    "--ftype", ftype, "--out", str(path)], check=True, capture_output=True)
    rng = np.random.default_rng(7)
    # 150 positions: past gemma3's synthetic sliding window of 64, across KV blocks.
    prompts = [[1] + rng.integers(3, 512, size=n).tolist() for n in (5, 40, 150)]
    check_against_reference(build_dir, path, ReferenceModel(path), prompts)
    llm = llama(path, n_ctx=512)
    for tokens in prompts:
        top1, cos, msg = compare_logits(
            strata(build_dir, path, tokens).reshape(len(tokens), -1),
            reference_logits(llm, tokens), "vs llama.cpp")
        print(msg, f"top1 {top1.mean():.3f}")
        assert top1.mean() >= 0.9 and cos.min() >= 0.98, msg
