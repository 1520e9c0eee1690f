#!/usr/bin/env python3
"""Writes the seed corpus of the GGUF fuzz target: small, valid GGUF files that cover every
metadata value type, nested arrays, both tokenizer kinds and every tensor format the reader
knows how to dequantize. Deterministic; scripts/fuzz runs it before each fuzzing run (the
files are not kept in git):

    .venv/bin/python tests/fuzz/make_gguf_seeds.py fuzz-out/seeds/gguf
"""
import sys
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

BLOCK = {  # (elements per block, bytes per block)
    Q.F32: (1, 4), Q.F16: (1, 2), Q.BF16: (1, 2), Q.Q8_0: (32, 34), Q.Q4_0: (32, 18),
    Q.Q4_1: (32, 20), Q.Q5_0: (32, 22), Q.Q5_1: (32, 24), Q.Q2_K: (256, 84),
    Q.Q3_K: (256, 110), Q.Q4_K: (256, 144), Q.Q5_K: (256, 176), Q.Q6_K: (256, 210),
}


def raw_tensor(writer, rng, name, qtype, rows, cols):
    if qtype == Q.F32:
        writer.add_tensor(name, rng.standard_normal((rows, cols)).astype(np.float32))
        return
    if qtype == Q.F16:
        writer.add_tensor(name, rng.standard_normal((rows, cols)).astype(np.float16))
        return
    per_block, block_bytes = BLOCK[qtype]
    row_bytes = cols // per_block * block_bytes
    data = rng.integers(0, 256, size=(rows, row_bytes), dtype=np.uint8)
    writer.add_tensor(name, data, raw_dtype=qtype)


def spm_model(path, rng):
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(1)
    w.add_context_length(64)
    w.add_embedding_length(32)
    w.add_head_count(2)
    tokens = ["<unk>", "<s>", "</s>", "<start_of_turn>", "<end_of_turn>", "\u2581", "\u2581a", "b",
              "ab", "\u2581ab", "\n", "\n\n"] + [f"<0x{i:02X}>" for i in range(256)]
    types = [2, 3, 3, 3, 3] + [1] * 5 + [4, 4] + [6] * 256
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([-float(i) for i in range(len(tokens))])
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_space_prefix(False)
    for qtype in (Q.F32, Q.F16, Q.Q8_0, Q.Q4_K):
        raw_tensor(w, rng, f"t.{qtype.name.lower()}", qtype, 1, 256)
    return w


def bpe_model(path, rng):
    w = gguf.GGUFWriter(str(path), "qwen2")
    w.add_block_count(1)
    w.add_context_length(64)
    byte_chars = [chr(c) for c in range(33, 127)] + ["\u0120", "\u010a", "\u0109"]
    tokens = byte_chars + ["\u0120t", "he", "\u0120the", "<|im_start|>", "<|im_end|>"]
    types = [1] * (len(tokens) - 2) + [3, 3]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(["\u0120 t", "h e", "\u0120t he"])
    w.add_bos_token_id(len(tokens) - 2)
    w.add_eos_token_id(len(tokens) - 1)
    for qtype in (Q.BF16, Q.Q6_K, Q.Q5_K):
        raw_tensor(w, rng, f"t.{qtype.name.lower()}", qtype, 1, 256)
    return w


def all_types(path, rng):
    w = gguf.GGUFWriter(str(path), "test")
    w.add_uint8("t.u8", 7)
    w.add_int8("t.i8", -7)
    w.add_uint16("t.u16", 700)
    w.add_int16("t.i16", -700)
    w.add_uint32("t.u32", 70000)
    w.add_int32("t.i32", -70000)
    w.add_float32("t.f32", 0.25)
    w.add_uint64("t.u64", 1 << 40)
    w.add_int64("t.i64", -(1 << 40))
    w.add_float64("t.f64", 0.125)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "h\u00e9llo \U0001F600")
    w.add_array("t.arr_int", [1, 2, 3])
    w.add_array("t.arr_str", ["a", "bc", ""])
    w.add_array("t.arr_nested", [[1, 2], [3]])
    for qtype in (Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q2_K, Q.Q3_K):
        raw_tensor(w, rng, f"t.{qtype.name.lower()}", qtype, 2, 256)
    return w


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "fuzz-out/seeds/gguf")
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(20261202)
    for name, make in (("spm", spm_model), ("bpe", bpe_model), ("all_types", all_types)):
        path = out / f"{name}.gguf"
        w = make(path, rng)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        print(f"{path}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
