#!/usr/bin/env python3
"""Builds vocab-only byte-level BPE GGUFs for the BPE tokenizer fidelity tests.

No BPE model ships with Strata, so we train a small byte-level BPE with the HF `tokenizers`
package on text this script assembles (several scripts, code, digits, whitespace runs) and
write it with gguf's GGUFWriter the way convert_hf_to_gguf.py writes a Llama 3 / Qwen2 vocab:
tokenizer.ggml.model = "gpt2", the pre-tokenizer name, tokens, token types, merges and the
special token ids. llama.cpp loads such a file with vocab_only=True (no hparams or tensors
are read then), which is all the tokenizer comparison needs.

Usage: make_bpe_vocab.py OUT_DIR
  -> OUT_DIR/bpe-{llama-bpe,qwen2,gpt-2,default,qwen2-holes}.gguf

Deterministic: the training text comes from a seeded RNG and the trainer is single-threaded
over a fixed input, so the same package versions give byte-identical files.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys

import gguf
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

VOCAB_SIZE = 8192

# Control tokens (tokenizer.ggml.token_type = CONTROL): recognised only with parse_special.
CONTROL_TOKENS = [
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|eot_id|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
]
# User-defined tokens: llama.cpp splits them out of the text even without parse_special.
USER_DEFINED_TOKENS = ["<custom_ud>", "[[TOOL]]"]

# Normal tokens that no merge produces. With llama3's ignore_merges a word equal to one of
# them becomes that single token; without it (qwen2, gpt-2) the merges decide.
UNMERGED_TOKENS = [" zyxwvut", "qqqqqqqq", "\n\n\n\n\n", "9876543"]

# Pre-tokenizer regexes for training, as in the models' tokenizer.json.
LLAMA3_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# (file stem, general.architecture, tokenizer.ggml.pre, bos, eos, add_bos, holes)
# With `holes`, a tenth of the merged tokens are left out of the vocab while every merge stays:
# merges then build texts that are not tokens and name parts that are not tokens, which drives
# llama.cpp's fallback paths (byte tokens, dropped bytes).
VARIANTS = [
    ("bpe-llama-bpe", "llama", "llama-bpe", "<|begin_of_text|>", "<|end_of_text|>", True, False),
    ("bpe-qwen2", "qwen2", "qwen2", "<|endoftext|>", "<|im_end|>", False, False),
    ("bpe-gpt-2", "gpt2", "gpt-2", "<|endoftext|>", "<|endoftext|>", False, False),
    ("bpe-default", "llama", "default", "<|begin_of_text|>", "<|end_of_text|>", True, False),
    ("bpe-qwen2-holes", "qwen2", "qwen2", "<|endoftext|>", "<|im_end|>", False, True),
]

ENGLISH = (
    "the of and to in is was that for it with as his on be at by had are but from or have an "
    "they which one you were her all she there would their we him been has when who will more "
    "no if out so said what up its about into than them can only other new some could time "
    "these two may then do first any my now such like our over man me even most made after "
    "also did many before must through back years where much your way well down should because "
    "each just those people how too little state good very make world still own see men work "
    "long get here between both life being under never day same another know while last might "
    "us great old year off come since against go came right used take three tokenizer model "
    "server request latency throughput batch kernel memory cache prefix token sequence"
).split()
CONTRACTIONS = ["don't", "it's", "we're", "they've", "I'm", "you'll", "she'd", "DON'T",
                "IT'S", "We'Re", "THEY'VE", "I'M", "YOU'LL", "can't", "o'clock", "rock'n'roll"]
SCRIPTS = [
    "Привет мир, как дела? Съешь же ещё этих мягких французских булок.",
    "Γειά σου κόσμε· ξεσκεπάζω την ψυχοφθόρα βδελυγμία.",
    "你好，世界！今天天气很好。我们一起去公园散步吧。机器学习模型的推理服务。",
    "こんにちは世界。カタカナとひらがなと漢字を混ぜた文章です。",
    "안녕하세요 세계. 다람쥐 헌 쳇바퀴에 타고파.",
    "مرحبا بالعالم. هذا نص عربي للاختبار.",
    "नमस्ते दुनिया। यह एक परीक्षण वाक्य है।",
    "שלום עולם, זה משפט בעברית.",
    "สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "Ünïcödé àccents: café naïve résumé façade Ærøskøbing Łódź Dvořák",
    "Emoji 😀😃😄 👍🏽 🇫🇷 ❤️ 👨‍👩‍👧 ✨🚀",
    "Math ∑∫√∞ ≤≥≠ ½ ¾ ² ³ ⅓ Ⅻ ① ٣٤٥ ۱۲۳",
]
CODE = [
    "def forward(self, x: torch.Tensor) -> torch.Tensor:\n    return self.proj(x) + 1\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\n",
    "if __name__ == '__main__':\n    main()\n",
    "#include <vector>\nstd::vector<int> v{1, 2, 3};\n",
    "SELECT id, name FROM users WHERE age >= 21 ORDER BY name;\n",
    "{\"key\": [1, 2.5, -3e10], \"ok\": true, \"s\": \"a\\nb\"}\n",
    "x = a && b || !c; y = (p != q) ? p->r : q.s;  // comment\n",
    "<html><body class=\"main\"><p>Hello &amp; welcome</p></body></html>\n",
    "$ ls -la /usr/local/bin | grep -E '^d' > out.txt 2>&1\n",
]


SYLLABLES = {
    "latin": "ka ro mi ten sal ver dun gor pli sta tra ent ion ing ous ble men tur qua xen".split(),
    "cyrillic": "ка ро ми тен сал вер дун гор пли ста тра ент ния ость ский про".split(),
    "greek": "κα ρο μι τεν σαλ βερ δυν γορ πλη στα τρα ος ια ων".split(),
}


def pseudo_word(rng: random.Random) -> str:
    """A made-up word, so the vocab grows past what a fixed word list can give."""
    kind = rng.randrange(5)
    if kind < 3:
        syllables = SYLLABLES[("latin", "cyrillic", "greek")[kind]]
        word = "".join(rng.choice(syllables) for _ in range(rng.randrange(1, 5)))
        return word.capitalize() if rng.random() < 0.2 else word
    if kind == 3:  # CJK ideographs from the common block
        return "".join(chr(0x4E00 + rng.randrange(400)) for _ in range(rng.randrange(1, 5)))
    return "".join(chr(0xAC00 + rng.randrange(300)) for _ in range(rng.randrange(1, 4)))


def training_text(rng: random.Random) -> list[str]:
    lines = []
    for _ in range(30000):
        kind = rng.randrange(11)
        if kind == 10:
            lines.append(" ".join(pseudo_word(rng) for _ in range(rng.randrange(3, 12))))
        elif kind < 4:
            words = [rng.choice(ENGLISH) for _ in range(rng.randrange(4, 16))]
            if rng.random() < 0.3:
                words.insert(rng.randrange(len(words) + 1), rng.choice(CONTRACTIONS))
            if rng.random() < 0.5:
                words[0] = words[0].capitalize()
            lines.append(" ".join(words) + rng.choice([".", "!", "?", ",", ";", "..."]))
        elif kind == 4:
            lines.append(rng.choice(SCRIPTS))
        elif kind == 5:
            lines.append(rng.choice(CODE))
        elif kind == 6:
            nums = [str(rng.randrange(10 ** rng.randrange(1, 9)))
                    for _ in range(rng.randrange(1, 6))]
            lines.append(" ".join(nums) + rng.choice(["", "%", " km", ".5", ",000"]))
        elif kind == 7:
            ws = rng.choice([" ", "  ", "    ", "\t", "\n", "\n\n", " \n", "\r\n", "\u3000"])
            lines.append(ws * rng.randrange(1, 5) + rng.choice(ENGLISH) + ws)
        elif kind == 8:
            lines.append("".join(rng.choice("!?.,;:-_=+*/\\|<>()[]{}'\"`~@#$%^&") for _ in
                                 range(rng.randrange(1, 8))))
        else:
            s = rng.choice(SCRIPTS)
            i = rng.randrange(len(s))
            lines.append(s[i:] + " " + rng.choice(ENGLISH) + str(rng.randrange(1000)))
    return lines


def train() -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=CONTROL_TOKENS + USER_DEFINED_TOKENS,
    )
    tok.train_from_iterator(training_text(random.Random(20240607)), trainer=trainer)
    return tok


def byte_level(text: str) -> str:
    """GPT-2's bytes_to_unicode applied to the UTF-8 bytes of `text`."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, cs))
    return "".join(chr(table[b]) for b in text.encode("utf-8"))


def vocab_arrays(tok: Tokenizer) -> tuple[list[str], list[int], list[str]]:
    spec = json.loads(tok.to_str())
    vocab: dict[str, int] = spec["model"]["vocab"]
    tokens = [""] * len(vocab)
    for text, idx in vocab.items():
        tokens[idx] = text
    assert all(tokens), "token ids are not dense"
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
    for text in UNMERGED_TOKENS:
        encoded = byte_level(text)
        if encoded not in vocab:
            tokens.append(encoded)
    types = []
    for text in tokens:
        if text in CONTROL_TOKENS:
            types.append(gguf.TokenType.CONTROL)
        elif text in USER_DEFINED_TOKENS:
            types.append(gguf.TokenType.USER_DEFINED)
        else:
            types.append(gguf.TokenType.NORMAL)
    return tokens, types, merges


def with_holes(tokens: list[str], types: list[int]) -> tuple[list[str], list[int]]:
    rng = random.Random(3)
    first_merged = len(CONTROL_TOKENS) + len(USER_DEFINED_TOKENS) + 256
    keep = [i for i in range(len(tokens)) if i < first_merged or rng.random() >= 0.1]
    return [tokens[i] for i in keep], [types[i] for i in keep]


def write_gguf(path: str, arch: str, pre: str, tokens: list[str], types: list[int],
               merges: list[str], bos: str, eos: str, add_bos: bool) -> None:
    writer = gguf.GGUFWriter(path, arch)
    writer.add_name(f"strata-bpe-test-{pre}")
    # Only read by a full (not vocab-only) load; present so the file describes a plausible model.
    writer.add_context_length(2048)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(tokens.index(bos))
    writer.add_eos_token_id(tokens.index(eos))
    writer.add_add_bos_token(add_bos)
    writer.add_add_eos_token(False)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    tokens, types, merges = vocab_arrays(train())
    for stem, arch, pre, bos, eos, add_bos, holes in VARIANTS:
        path = os.path.join(args.out_dir, stem + ".gguf")
        variant_tokens, variant_types = with_holes(tokens, types) if holes else (tokens, types)
        write_gguf(path, arch, pre, variant_tokens, variant_types, merges, bos, eos, add_bos)
        print(f"{path}: {len(variant_tokens)} tokens, {len(merges)} merges, pre={pre}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
