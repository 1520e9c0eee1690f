"""A float64 reference of a sentence-transformers BERT encoder, in numpy only.

Independent of Strata's code: the safetensors file is read with the standard library and
numpy (no safetensors or torch package), and every operation is the textbook formula of
Hugging Face's BertModel (post-LN blocks, exact erf GELU, LayerNorm with config.json's eps),
evaluated in float64 on one text at a time (no padding, so no attention mask is needed), then
sentence-transformers' mean pooling and L2 normalization.

    model = BertReference("models/all-minilm-l6-v2")
    vector = model.embed(ids)        # ids: [CLS] ... [SEP] from the `tokenizers` package
"""
import json
import math
import struct
from pathlib import Path

import numpy as np

DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64,
          "I32": np.int32, "U8": np.uint8}


def read_safetensors(path):
    """{name: float64 array} for the floating-point tensors of a .safetensors file."""
    data = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    base = 8 + n
    out = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        raw = data[base + begin:base + end]
        if info["dtype"] == "BF16":
            bits = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
            array = bits.view(np.float32)
        else:
            array = np.frombuffer(raw, dtype=DTYPES[info["dtype"]])
        out[name] = array.reshape(info["shape"]).astype(np.float64)
    return out


def erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


class BertReference:
    def __init__(self, model_dir):
        model_dir = Path(model_dir)
        config = json.loads((model_dir / "config.json").read_text())
        self.layers = config["num_hidden_layers"]
        self.heads = config["num_attention_heads"]
        self.hidden = config["hidden_size"]
        self.eps = config["layer_norm_eps"]
        self.w = read_safetensors(model_dir / "model.safetensors")

    def layer_norm(self, x, prefix):
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self.eps) * self.w[prefix + ".weight"] + \
            self.w[prefix + ".bias"]

    def linear(self, x, prefix):
        return x @ self.w[prefix + ".weight"].T + self.w[prefix + ".bias"]

    def hidden_states(self, ids):
        """The last hidden state, [len(ids), hidden]."""
        w = self.w
        n = len(ids)
        x = (w["embeddings.word_embeddings.weight"][ids] +
             w["embeddings.position_embeddings.weight"][:n] +
             w["embeddings.token_type_embeddings.weight"][0])
        x = self.layer_norm(x, "embeddings.LayerNorm")
        dh = self.hidden // self.heads
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            q = self.linear(x, p + "attention.self.query").reshape(n, self.heads, dh)
            k = self.linear(x, p + "attention.self.key").reshape(n, self.heads, dh)
            v = self.linear(x, p + "attention.self.value").reshape(n, self.heads, dh)
            scores = np.einsum("qhd,khd->hqk", q, k) / math.sqrt(dh)
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            probs = scores / scores.sum(axis=-1, keepdims=True)
            context = np.einsum("hqk,khd->qhd", probs, v).reshape(n, self.hidden)
            x = self.layer_norm(x + self.linear(context, p + "attention.output.dense"),
                                p + "attention.output.LayerNorm")
            h = self.linear(x, p + "intermediate.dense")
            h = 0.5 * h * (1.0 + erf(h / math.sqrt(2.0)))
            x = self.layer_norm(x + self.linear(h, p + "output.dense"), p + "output.LayerNorm")
        return x

    def embed(self, ids):
        pooled = self.hidden_states(ids).mean(axis=0)
        return pooled / max(np.linalg.norm(pooled), 1e-12)
