#!/usr/bin/env python3
"""Writes the seed corpus of the safetensors fuzz target: small files, valid (every dtype,
scalars, empty tensors, metadata, unaligned data) and a few broken at one spot. Standard
library only; deterministic. scripts/fuzz runs it before each fuzzing run (the files are not
kept in git):

    .venv/bin/python tests/fuzz/make_safetensors_seeds.py fuzz-out/seeds/safetensors
"""
import json
import struct
import sys
from pathlib import Path

SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2,
         "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "F64": 8, "I64": 8, "U64": 8}


def build(tensors, metadata=None, pad=True):
    """tensors: [(name, dtype, shape)]; data filled with a byte pattern."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape in tensors:
        n = SIZES[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + n]}
        data += bytes((len(data) + i) % 251 for i in range(n))
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def main(out_dir):
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    seeds = {
        "empty_header": build([]),
        "every_dtype": build([(f"t.{d.lower()}", d, [2, 3]) for d in SIZES],
                             metadata={"format": "pt"}),
        "bert_like": build([("embeddings.word_embeddings.weight", "F32", [8, 4]),
                            ("embeddings.position_ids", "I64", [1, 8]),
                            ("encoder.layer.0.attention.self.query.bias", "F16", [4])]),
        "scalar_and_empty": build([("s", "BF16", []), ("e", "F32", [0, 5]), ("z", "U8", [3])]),
        "unaligned": build([("a", "U8", [3]), ("b", "F32", [2])], pad=False),
    }
    broken = bytearray(seeds["bert_like"])
    broken[40] ^= 0x20
    seeds["flipped_byte"] = bytes(broken)
    seeds["truncated"] = seeds["every_dtype"][:-7]
    for name, data in seeds.items():
        (out / f"{name}.safetensors").write_bytes(data)


if __name__ == "__main__":
    main(sys.argv[1])
