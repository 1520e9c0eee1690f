#!/usr/bin/env python3
"""Writes synthetic GGUF models with random weights, for architecture coverage and sizing.

    make_synthetic_model.py --arch {llama,qwen2,gemma3} --out FILE [--ftype f32|f16|q8_0|q4_k_m]
                            [--embd N --layers N --heads N --kv-heads N --head-dim N --ff N
                             --vocab N --context N --window N --seed N]

The weights are drawn from N(0, 1/cols) so activations stay O(1) through the layers and the
logits have a real spread; norms are near 1. The file is written in F32 with the `gguf`
package, then, for other ftypes, quantized by llama.cpp's own quantizer (llama-cpp-python),
so K-quant blocks are the ones a real converter makes. The vocabulary is a small
SentencePiece-style one (byte fallback) that llama.cpp accepts.
"""
import argparse
import os
import sys
import tempfile

import numpy as np
import gguf

FTYPES = {"f32": 0, "f16": 1, "q8_0": 7, "q4_0": 2, "q4_k_m": 15, "q5_k_m": 17, "q6_k": 18}


def vocab(n):
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    types = [2, 3, 3] + [6] * 256
    pieces = []
    letters = "abcdefghijklmnopqrstuvwxyz"
    for a in letters:
        pieces.append("\u2581" + a)
        pieces.append(a)
    for a in letters:
        for b in "aeiou":
            pieces.append(a + b)
            pieces.append("\u2581" + a + b)
    pieces = [p for p in dict.fromkeys(pieces)]
    while len(tokens) < n:
        tokens.append(pieces.pop(0) if pieces else f"<extra_{len(tokens)}>")
        types.append(1 if not tokens[-1].startswith("<extra") else 4)
    scores = [0.0] * 259 + [-float(i) for i in range(n - 259)]
    return tokens[:n], scores[:n], types[:n]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", choices=["llama", "qwen2", "gemma3"], required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ftype", default="f32", choices=sorted(FTYPES))
    ap.add_argument("--embd", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--ff", type=int, default=512)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--context", type=int, default=4096)
    ap.add_argument("--window", type=int, default=64, help="gemma3 sliding window")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    arch = a.arch
    E, H, KV, D, F, V = a.embd, a.heads, a.kv_heads, a.head_dim, a.ff, a.vocab

    def mat(rows, cols, std=None):
        std = (1.0 / np.sqrt(cols)) if std is None else std
        return (rng.standard_normal((rows, cols)) * std).astype(np.float32)

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    f32_path = a.out if a.ftype == "f32" else a.out + ".f32.tmp"
    w = gguf.GGUFWriter(f32_path, arch)
    w.add_name(f"synthetic-{arch}")
    w.add_context_length(a.context)
    w.add_embedding_length(E)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(F)
    w.add_head_count(H)
    w.add_head_count_kv(KV)
    w.add_key_length(D)
    w.add_value_length(D)
    w.add_rope_dimension_count(D)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(10000.0 if arch != "gemma3" else 1000000.0)
    if arch == "gemma3":
        w.add_sliding_window(a.window)
    w.add_file_type(0)
    toks, scores, types = vocab(V)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_space_prefix(arch != "gemma3")

    w.add_tensor("token_embd.weight", mat(V, E, std=1.0))
    w.add_tensor("output_norm.weight", norm(E))
    if arch == "llama":
        w.add_tensor("output.weight", mat(V, E))
        # llama3-style frequency factors: longer wavelengths stretched.
        ff = np.where(np.arange(D // 2) < D // 4, 1.0, 4.0).astype(np.float32)
        w.add_tensor("rope_freqs.weight", ff)
    for il in range(a.layers):
        p = f"blk.{il}."
        w.add_tensor(p + "attn_norm.weight", norm(E))
        w.add_tensor(p + "attn_q.weight", mat(H * D, E))
        w.add_tensor(p + "attn_k.weight", mat(KV * D, E))
        w.add_tensor(p + "attn_v.weight", mat(KV * D, E))
        w.add_tensor(p + "attn_output.weight", mat(E, H * D))
        if arch == "qwen2":
            w.add_tensor(p + "attn_q.bias", (0.1 * rng.standard_normal(H * D)).astype(np.float32))
            w.add_tensor(p + "attn_k.bias", (0.1 * rng.standard_normal(KV * D)).astype(np.float32))
            w.add_tensor(p + "attn_v.bias", (0.1 * rng.standard_normal(KV * D)).astype(np.float32))
        if arch == "gemma3":
            w.add_tensor(p + "attn_q_norm.weight", norm(D))
            w.add_tensor(p + "attn_k_norm.weight", norm(D))
            w.add_tensor(p + "post_attention_norm.weight", norm(E))
            w.add_tensor(p + "post_ffw_norm.weight", norm(E))
        w.add_tensor(p + "ffn_norm.weight", norm(E))
        w.add_tensor(p + "ffn_gate.weight", mat(F, E))
        w.add_tensor(p + "ffn_up.weight", mat(F, E))
        w.add_tensor(p + "ffn_down.weight", mat(E, F))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    if a.ftype != "f32":
        import llama_cpp

        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = FTYPES[a.ftype]
        params.nthread = os.cpu_count() or 2
        rc = llama_cpp.llama_model_quantize(f32_path.encode(), a.out.encode(), params)
        os.unlink(f32_path)
        if rc != 0:
            sys.exit(f"llama.cpp's quantizer failed with {rc}")
    print(a.out)


if __name__ == "__main__":
    main()
