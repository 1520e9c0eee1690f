"""Parity of Strata's byte-level BPE tokenizer with llama.cpp.

No BPE model ships with Strata, so make_bpe_vocab.py trains a small byte-level BPE and writes
it as vocab-only GGUFs that differ only in tokenizer.ggml.pre: "llama-bpe" (Llama 3 split,
ignore_merges), "qwen2", "gpt-2" and "default", plus "qwen2-holes", whose vocab lacks some
merged tokens (llama.cpp's fallback paths). For every string of
data/tokenizer_corpus.jsonl plus the BPE-specific strings below, and every
(add_special, parse_special) pair:
  - ids: identical to llama-cpp-python's Llama.tokenize;
  - decode: identical to the concatenation of llama_token_to_piece (what llama.cpp's server
    streams); llama_detokenize additionally applies clean_up_tokenization_spaces for the
    vocabs that ask for it (all here but qwen2), so it must equal our decode put through a
    port of that pass;
  - streaming: IncrementalDetokenizer's deltas joined equal the decode with invalid UTF-8
    replaced by U+FFFD;
  - round trip: decode(encode(s)) == s for valid UTF-8 when special text is not parsed.
Random id sequences check decoding on its own.

llama.cpp aborts (an uncaught std::invalid_argument) on a four-byte UTF-8 form whose value lies
above U+10FFFF, which byte-level BPE re-encodes; Strata decodes its lead byte as U+FFFD. For the
strings that hold one, the reference is llama.cpp on the string with each such lead byte
replaced by U+FFFD's bytes, which must give the same ids.

Environment: STRATA_BUILD_DIR (with src/tools/strata-tokenize).
"""

import ctypes
import json
import os
import pathlib
import random
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).resolve().parent
CORPUS = HERE / "data" / "tokenizer_corpus.jsonl"
MODES = [(True, False), (False, True), (True, True), (False, False)]
# GGUF variant (make_bpe_vocab.py) -> whether llama_detokenize cleans up spaces for its
# tokenizer.ggml.pre (llama-vocab.cpp). "qwen2-holes" lacks a tenth of its merged tokens.
VARIANTS = {"llama-bpe": True, "qwen2": False, "gpt-2": True, "default": True,
            "qwen2-holes": False}

BPE_STRINGS = [
    # Contractions in odd case: llama3/qwen2 match them case-insensitively, gpt-2 does not.
    "'S 'LL 'Ve 'RE 'M 'D 'T",
    "I'M HERE, YOU'LL SEE, WE'RE DONE, THEY'VE GONE, SHE'D KNOW, IT'S TRUE",
    "don't DON'T Don'T o'clock rock'n'roll ''s '''ll",
    "x's y'S z'lL w'Ll",
    "'",
    "''",
    "'s",
    "a'",
    # Digit runs of 1 to 7 digits and mixed with other numbers.
    "1", "12", "123", "1234", "12345", "123456", "1234567",
    "1 22 333 4444 55555 666666 7777777",
    "3.14159265 2,718,281 1e-10 0x1F -42 +7 100%",
    "\u0663\u0664\u0665\u0666\u0667 \u00b2\u00b3 \u2163\u2164 \u2460\u2461",
    "abc123def4567ghi",
    # CJK runs.
    "\u4f60\u597d\u4e16\u754c\u4eca\u5929\u5929\u6c14\u5f88\u597d",
    "\u4f60\u597d\uff0c\u4e16\u754c\uff01\u6211\u4eec\u4e00\u8d77\u53bb\u516c\u56ed\u3002",
    "\u65e5\u672c\u8a9e\u306e\u6587\u7ae0\u3068\u30ab\u30bf\u30ab\u30ca",
    "\ud55c\uad6d\uc5b4 \ubb38\uc7a5 \ud14c\uc2a4\ud2b8",
    "mixed\u4e2d\u6587and English\u6587\u5b57",
    # Whitespace runs, with trailing newlines.
    "a  b   c    d",
    "line\n",
    "line\n\n",
    "line\n\n\n",
    "  \n\n",
    "\t\t\tindented\n\t\n",
    "trailing spaces   ",
    "trailing spaces and newline   \n",
    "\r\n\r\nwindows\r\n",
    " \u3000 \u00a0 \u2003x",
    "\n",
    " ",
    "   ",
    # Punctuation clusters.
    "!!!???...,,,;;;:::",
    "wait...what?!?! (really) [yes] {no} <maybe>",
    "a+b=c; x<=y>=z; p!=q && r||s -> t => u",
    "#!/bin/bash\necho \"$HOME\" | grep -E '^/' > /dev/null 2>&1\n",
    "def f(x):\n    return x**2 + 1  # comment\n",
    "---===***~~~^^^|||```",
    "\u00bf\u00a1Hola!? \u00abquote\u00bb \u201csmart\u201d \u2014 dash \u2026",
    # Special and user-defined tokens of the test vocab, and near misses.
    "<|begin_of_text|>Hello<|eot_id|>",
    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    "text <custom_ud> more [[TOOL]] end",
    "<|eot_id|<|eot_id|>|>",
    "<custom_ud><custom_ud>",
    # Words that are whole tokens without a merge path (ignore_merges matters for llama-bpe).
    " zyxwvut", "zyxwvut", "qqqqqqqq", "\n\n\n\n\n", "9876543",
]


def _tool_path():
    build = pathlib.Path(os.environ.get("STRATA_BUILD_DIR", REPO / "build"))
    tool = build / "src" / "tools" / "strata-tokenize"
    if not tool.exists():
        pytest.fail(f"{tool} is missing: build the strata-tokenize target "
                    f"(STRATA_BUILD_DIR={build})")
    return tool


@pytest.fixture(scope="module")
def vocab_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("bpe_vocab")
    subprocess.run([sys.executable, str(HERE / "make_bpe_vocab.py"), str(out)], check=True,
                   capture_output=True, timeout=600)
    return out


@pytest.fixture(scope="module")
def texts():
    items = []
    # Split on "\n" only: texts may hold U+2028 and other characters splitlines() breaks at.
    for line in CORPUS.read_text(encoding="utf-8").split("\n"):
        if not line:
            continue
        entry = json.loads(line)
        data = bytes.fromhex(entry["text_hex"]) if "text_hex" in entry else entry["text"].encode()
        items.append((f"corpus#{entry['id']}", entry["category"], data))
    assert len(items) >= 1000
    for i, s in enumerate(BPE_STRINGS):
        items.append((f"bpe#{i}", "bpe", s.encode("utf-8")))
    return items


def _utf8_sequence(data, i):
    """(code point, length) of the sequence at data[i] as llama.cpp decodes it; None if invalid."""
    lead = data[i]
    if lead < 0x80:
        return lead, 1
    forms = ((0xC0, 0xE0, 2, 0x1F), (0xE0, 0xF0, 3, 0x0F), (0xF0, 0xF8, 4, 0x07))
    for low, high, size, mask in forms:
        if low <= lead < high:
            tail = data[i + 1:i + size]
            if len(tail) != size - 1 or any(b & 0xC0 != 0x80 for b in tail):
                return None
            cp = lead & mask
            for b in tail:
                cp = cp << 6 | (b & 0x3F)
            return cp, size
    return None


def llama_safe(data):
    """`data` with the lead byte of every sequence above U+10FFFF replaced by U+FFFD's bytes."""
    out = bytearray()
    i = 0
    while i < len(data):
        seq = _utf8_sequence(data, i)
        if seq is None:
            out.append(data[i])
            i += 1
        elif seq[0] > 0x10FFFF:
            out += "\ufffd".encode()
            i += 1
        else:
            out += data[i:i + seq[1]]
            i += seq[1]
    return bytes(out)


def test_llama_safe():
    assert llama_safe(b"a\xf4\x90\x80\x80b") == b"a\xef\xbf\xbd\x90\x80\x80b"
    assert llama_safe(b"\xf4\x8f\xbf\xbf\xff\xf5\x80") == b"\xf4\x8f\xbf\xbf\xff\xf5\x80"


def _run_tool(model, requests):
    stdin = "".join(json.dumps(r) + "\n" for r in requests)
    proc = subprocess.run([str(_tool_path()), str(model), "--jsonl"], input=stdin.encode(),
                          capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    answers = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert len(answers) == len(requests)
    for answer in answers:
        assert "error" not in answer, answer
    return answers


class Reference:
    """llama.cpp through llama-cpp-python, on one GGUF."""

    def __init__(self, path):
        self.llama_cpp = pytest.importorskip("llama_cpp")
        self.llm = self.llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        self.vocab = self.llama_cpp.llama_model_get_vocab(self.llm.model)
        self.buf = ctypes.create_string_buffer(1 << 16)

    def tokenize(self, data, add_special, parse_special):
        return self.llm.tokenize(data, add_bos=add_special, special=parse_special)

    def pieces(self, ids, special):
        out = []
        for t in ids:
            n = self.llama_cpp.llama_token_to_piece(self.vocab, t, self.buf, len(self.buf), 0,
                                                    special)
            assert n >= 0
            out.append(self.buf.raw[:n])
        return b"".join(out)

    def detokenize(self, ids, special):
        arr = (self.llama_cpp.llama_token * max(1, len(ids)))(*ids)
        size = 64 + 64 * len(ids)
        while True:
            buf = ctypes.create_string_buffer(size)
            n = self.llama_cpp.llama_detokenize(self.vocab, arr, len(ids), buf, size, False,
                                                special)
            if n >= 0:
                return buf.raw[:n]
            size = -n + 1


def clean_spaces(text):
    """Port of the clean_spaces passes of llama_vocab::impl::detokenize, in place like the C."""
    t = bytearray(text)
    sp, apos = ord(" "), ord("'")
    # First pass: " ?", " !", " .", " ," lose the space.
    total1, total = len(t), 1 if t else 0
    for i in range(1, total1):
        x = t[i]
        if t[i - 1] == sp and x in b"?!.,":
            total -= 1
        t[total] = x
        total += 1
    # Second pass: a lone apostrophe between spaces loses both spaces.
    total2, total = total, 1 if total else 0
    i = 1
    while i < total2:
        x = t[i]
        if x == apos and i + 1 < total2 and t[i - 1] == sp and t[i + 1] == sp:
            total -= 1
            i += 1
            t[i] = 0
        t[total] = x
        total += 1
        i += 1
    # Third pass: " 's", " 'm", " 're", " 've" lose the space.
    total3, total = total, 1 if total else 0
    for i in range(1, total3):
        x = t[i]
        if t[i - 1] == sp and x == apos and i + 1 < total3:
            x1 = t[i + 1]
            if x1 in b"sm":
                total -= 1
            elif i + 2 < total3:
                x2 = t[i + 2]
                if (x1, x2) in ((ord("r"), ord("e")), (ord("v"), ord("e"))):
                    total -= 1
        t[total] = x
        total += 1
    return bytes(t[:total])


def test_clean_spaces_port():
    assert clean_spaces(b"Hello , world ! ok .") == b"Hello, world! ok."
    assert clean_spaces(b"it ' s") == b"it's"
    assert clean_spaces(b"we 're here , they 've 'd 'll") == b"we're here, they've 'd 'll"
    assert clean_spaces(b"") == b""


@pytest.mark.parametrize("pre", list(VARIANTS))
def test_encode_decode_parity_with_llama_cpp(pre, vocab_dir, texts):
    path = vocab_dir / f"bpe-{pre}.gguf"
    ref = Reference(path)
    requests = [{"text_hex": data.hex(), "add_special": a, "parse_special": p}
                for _, _, data in texts for a, p in MODES]
    answers = _run_tool(path, requests)

    counts = {"strings": len(texts), "cases": 0, "id_mismatch": 0, "decode_mismatch": 0,
              "detokenize_mismatch": 0, "stream_mismatch": 0, "roundtrip_checked": 0,
              "roundtrip_fail": 0, "llama_abort_substituted": 0}
    failures = []
    k = 0
    for sid, category, data in texts:
        for add_special, parse_special in MODES:
            answer = answers[k]
            k += 1
            counts["cases"] += 1
            where = (f"{pre} {sid} [{category}] {data[:60]!r} add_special={add_special} "
                     f"parse_special={parse_special}")
            safe = llama_safe(data)
            counts["llama_abort_substituted"] += safe != data
            expected = ref.tokenize(safe, add_special, parse_special)
            if answer["ids"] != expected:
                counts["id_mismatch"] += 1
                failures.append(f"ids {where}:\n  ours  {answer['ids'][:40]}\n"
                                f"  llama {expected[:40]}")
                continue
            for special, key in ((False, "decode_hex"), (True, "decode_special_hex")):
                decoded = bytes.fromhex(answer[key])
                pieces = ref.pieces(expected, special)
                if decoded != pieces:
                    counts["decode_mismatch"] += 1
                    failures.append(f"decode(special={special}) {where}:\n  ours  {decoded[:80]!r}"
                                    f"\n  llama {pieces[:80]!r}")
                    continue
                detok = ref.detokenize(expected, special)
                want = clean_spaces(decoded) if VARIANTS[pre] else decoded
                if detok != want:
                    counts["detokenize_mismatch"] += 1
                    failures.append(f"llama_detokenize(special={special}) {where}:\n"
                                    f"  ours  {want[:80]!r}\n  llama {detok[:80]!r}")
                streamed = bytes.fromhex(answer[key.replace("decode", "stream")])
                if streamed != decoded.decode("utf-8", errors="replace").encode("utf-8"):
                    counts["stream_mismatch"] += 1
                    failures.append(f"stream(special={special}) {where}: {streamed[:80]!r}")
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            if parse_special or pre.endswith("-holes"):  # holes drop bytes, as llama.cpp does
                continue
            counts["roundtrip_checked"] += 1
            if bytes.fromhex(answer["decode_hex"]) != data:
                counts["roundtrip_fail"] += 1
                failures.append(f"round trip {where}: {bytes.fromhex(answer['decode_hex'])[:80]!r}")

    print(f"\nBPE tokenizer parity vs llama.cpp (pre={pre}):", json.dumps(counts))
    assert not failures, f"{len(failures)} failures; first ones:\n" + "\n".join(failures[:20])
    assert counts["roundtrip_checked"] > len(texts) or pre.endswith("-holes")


@pytest.mark.parametrize("pre", ["llama-bpe", "qwen2"])
def test_decode_of_random_id_sequences_matches_llama_cpp(pre, vocab_dir):
    path = vocab_dir / f"bpe-{pre}.gguf"
    ref = Reference(path)
    rng = random.Random(11)
    n_vocab = ref.llm.n_vocab()
    special_ids = list(range(8)) + [n_vocab - 1]
    sequences = []
    for _ in range(300):
        seq = []
        for _ in range(rng.randint(0, 30)):
            seq.append(rng.choice(special_ids) if rng.random() < 0.15 else rng.randrange(n_vocab))
        sequences.append(seq)
    answers = _run_tool(path, [{"ids": seq} for seq in sequences])
    mismatches = 0
    for seq, answer in zip(sequences, answers):
        for special, key in ((False, "decode_hex"), (True, "decode_special_hex")):
            decoded = bytes.fromhex(answer[key])
            assert decoded == ref.pieces(seq, special), (seq, special)
            want = clean_spaces(decoded) if VARIANTS[pre] else decoded
            assert ref.detokenize(seq, special) == want, (seq, special)
            streamed = bytes.fromhex(answer[key.replace("decode", "stream")])
            mismatches += streamed != decoded.decode("utf-8", errors="replace").encode("utf-8")
    print(f"\nrandom id sequences ({pre}): {len(sequences)}, stream mismatches: {mismatches}")
    assert mismatches == 0
