"""A float64 reference of the transformer graphs Strata runs (gemma3, llama, qwen2), in numpy.

Independent of Strata's code: weights come from the `gguf` package's reader and dequantizer,
every operation is a plain textbook formula evaluated in float64, and there are no integer or
fp16 shortcuts. It is the exactness oracle of the fidelity tests: llama.cpp itself quantizes
activations to int8 and rounds attention inputs to fp16, so it sits ~1e-3..1e-2 (cosine) away
from the exact logits, while a correct implementation sits ~1e-6 away.

    model = ReferenceModel("model.gguf")
    cache = model.new_cache()
    logits = model.forward(tokens, cache)     # [len(tokens), vocab]; appends to the cache
"""
import numpy as np
import gguf


class ReferenceModel:
    def __init__(self, path):
        reader = gguf.GGUFReader(str(path))
        self.fields = reader.fields
        self.arch = self._str("general.architecture")
        a = self.arch + "."
        self.n_embd = self._int(a + "embedding_length")
        self.n_layers = self._int(a + "block_count")
        self.n_heads = self._int(a + "attention.head_count")
        self.n_kv = self._int(a + "attention.head_count_kv", self.n_heads)
        self.head_dim = self._int(a + "attention.key_length", self.n_embd // self.n_heads)
        self.rope_dim = self._int(a + "rope.dimension_count", self.head_dim)
        self.eps = self._float(a + "attention.layer_norm_rms_epsilon")
        self.rope_base = self._float(a + "rope.freq_base", 10000.0)
        factor = self._float(a + "rope.scaling.factor", 0.0)
        self.freq_scale = 1.0 / factor if factor else 1.0
        self.window = self._int(a + "attention.sliding_window", 0) if self.arch == "gemma3" else 0
        self.gemma = self.arch == "gemma3"
        self.scale = 1.0 / np.sqrt(self.head_dim)
        self.tensors = {t.name: t for t in reader.tensors}
        self._cache = {}
        self.emb = self.w("token_embd.weight")
        self.vocab = self.emb.shape[0]
        self.out = self.w("output.weight") if "output.weight" in self.tensors else self.emb
        self.rope_freqs = self.w("rope_freqs.weight") if "rope_freqs.weight" in self.tensors else None

    def _field(self, key):
        f = self.fields.get(key)
        return None if f is None else f.parts[f.data[0]]

    def _str(self, key):
        return bytes(self._field(key)).decode()

    def _int(self, key, default=None):
        v = self._field(key)
        if v is None:
            if default is None:
                raise KeyError(key)
            return default
        return int(v[0])

    def _float(self, key, default=None):
        v = self._field(key)
        if v is None:
            if default is None:
                raise KeyError(key)
            return default
        return float(v[0])

    def w(self, name):
        if name not in self._cache:
            t = self.tensors[name]
            a = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64)
            shape = [int(x) for x in reversed(t.shape)]
            self._cache[name] = a.reshape(shape) if len(shape) > 1 else a.reshape(-1)
        return self._cache[name]

    def has(self, name):
        return name in self.tensors

    def new_cache(self):
        return {"k": [np.zeros((0, self.n_kv, self.head_dim))] * self.n_layers,
                "v": [np.zeros((0, self.n_kv, self.head_dim))] * self.n_layers, "pos": 0}

    def _rms(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def _sliding(self, il):
        return self.window > 0 and il % 6 < 5

    def _rope(self, x, pos, il):
        if self.gemma and self._sliding(il):
            base, scale = 10000.0, 1.0
        else:
            base, scale = self.rope_base, self.freq_scale
        half = self.rope_dim // 2
        inv = base ** (-2.0 * np.arange(half) / self.rope_dim)
        if self.rope_freqs is not None:
            inv = inv / self.rope_freqs
        ang = (pos[:, None] * scale * inv[None, :])[:, None, :]
        c, s = np.cos(ang), np.sin(ang)
        x = x.copy()
        if self.arch == "llama":  # adjacent pairs
            a, b = x[..., 0:self.rope_dim:2].copy(), x[..., 1:self.rope_dim:2].copy()
            x[..., 0:self.rope_dim:2] = a * c - b * s
            x[..., 1:self.rope_dim:2] = a * s + b * c
        else:  # neox halves
            a, b = x[..., :half].copy(), x[..., half:self.rope_dim].copy()
            x[..., :half] = a * c - b * s
            x[..., half:self.rope_dim] = a * s + b * c
        return x

    def forward(self, tokens, cache):
        n = len(tokens)
        start = cache["pos"]
        pos = np.arange(start, start + n, dtype=np.float64)
        x = self.emb[np.asarray(tokens)]
        if self.gemma:
            x = x * np.sqrt(self.n_embd)
        H, KV, D = self.n_heads, self.n_kv, self.head_dim
        for il in range(self.n_layers):
            p = f"blk.{il}."
            h = self._rms(x, self.w(p + "attn_norm.weight"))
            q = h @ self.w(p + "attn_q.weight").T
            k = h @ self.w(p + "attn_k.weight").T
            v = h @ self.w(p + "attn_v.weight").T
            if self.has(p + "attn_q.bias"):
                q, k, v = q + self.w(p + "attn_q.bias"), k + self.w(p + "attn_k.bias"), v + self.w(p + "attn_v.bias")
            q, k, v = q.reshape(n, H, D), k.reshape(n, KV, D), v.reshape(n, KV, D)
            if self.gemma:
                q = self._rms(q, self.w(p + "attn_q_norm.weight"))
                k = self._rms(k, self.w(p + "attn_k_norm.weight"))
            q, k = self._rope(q, pos, il), self._rope(k, pos, il)
            K = np.concatenate([cache["k"][il], k])
            V = np.concatenate([cache["v"][il], v])
            cache["k"][il], cache["v"][il] = K, V
            kpos = np.arange(K.shape[0])
            mask = kpos[None, :] <= pos[:, None]
            if self.window and self._sliding(il):
                mask &= kpos[None, :] > pos[:, None] - self.window
            out = np.empty((n, H, D))
            for hh in range(H):
                g = hh // (H // KV)
                s = (q[:, hh, :] @ K[:, g, :].T) * self.scale
                s = np.where(mask, s, -np.inf)
                pr = np.exp(s - s.max(axis=1, keepdims=True))
                pr /= pr.sum(axis=1, keepdims=True)
                out[:, hh, :] = pr @ V[:, g, :]
            o = out.reshape(n, H * D) @ self.w(p + "attn_output.weight").T
            if self.gemma:
                o = self._rms(o, self.w(p + "post_attention_norm.weight"))
            x = x + o
            h = self._rms(x, self.w(p + "ffn_norm.weight"))
            gate = h @ self.w(p + "ffn_gate.weight").T
            up = h @ self.w(p + "ffn_up.weight").T
            if self.gemma:
                act = 0.5 * gate * (1 + np.tanh(np.sqrt(2 / np.pi) * (gate + 0.044715 * gate ** 3)))
            else:
                act = gate / (1 + np.exp(-gate))
            d = (act * up) @ self.w(p + "ffn_down.weight").T
            if self.gemma:
                d = self._rms(d, self.w(p + "post_ffw_norm.weight"))
            x = x + d
        cache["pos"] = start + n
        x = self._rms(x, self.w("output_norm.weight"))
        return x @ self.out.T

    def greedy(self, tokens, steps):
        cache = self.new_cache()
        logits = self.forward(tokens, cache)[-1]
        out = []
        for _ in range(steps):
            out.append(int(np.argmax(logits)))
            logits = self.forward([out[-1]], cache)[-1]
        return out
