"""Parity of Strata's WordPiece tokenizer with the `tokenizers` package on all-MiniLM-L6-v2.

Both read the same tokenizer.json (models/all-minilm-l6-v2, from scripts/setup); Strata runs
through `strata-embed --tokenize` / `--words`. Checked:
  - ids: every valid-UTF-8 string of data/tokenizer_corpus.jsonl (English, code, numbers,
    emoji, CJK and other scripts, whitespace runs, special-token text, random Unicode, long
    texts) and the BERT-specific strings below (accents, control characters, [SEP]-like text,
    words over 100 characters, long inputs), cut at 512 (the model's positions), 256
    (sentence-transformers') and 16 tokens: identical to `Tokenizer.encode(text).ids` with
    truncation at the same length and no padding.
  - invalid UTF-8 (the corpus's byte strings that do not decode): refused with
    INVALID_ARGUMENT (the library only takes str, so there is nothing to compare).
  - words: the normalizer and pre-tokenizer on every code point (U+0000..U+10FFFF less the
    surrogates) in "a{c}b {c}": identical to `pre_tokenize_str(normalize_str(text))`, except
    for the code points listed in data/wordpiece_unicode_divergence.json (624 of 1,112,064),
    which must differ exactly there. `tokenizers` classifies punctuation, nonspacing marks
    and format characters with the `unicode_categories` crate's Unicode 8-era tables and
    lowercases with Rust's (Unicode 16+) char::to_lowercase; Strata uses the repository's
    Unicode 15.1 tables and Python 3.11's (Unicode 14) lowercase mappings
    (scripts/gen_unicode_tables.py). So characters assigned or recategorised after Unicode 8
    (new Arabic, Indic and historic-script marks, a few punctuation signs) are split or
    stripped differently, and letters of scripts cased after Unicode 14 (Garay, Latin
    additions) are lowercased only there. Rerun with --write-divergence to rewrite the list
    after either side changes:
        .venv/bin/python tests/fidelity/test_embedding_tokenizer.py --write-divergence
Environment: STRATA_BUILD_DIR, STRATA_EMBEDDING_MODEL.
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from conftest import tool

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "data" / "tokenizer_corpus.jsonl"
DIVERGENCE = HERE / "data" / "wordpiece_unicode_divergence.json"

BERT_STRINGS = [
    "Hello, World! How are you?",
    "HELLO hello HeLLo",
    "naïve café résumé façade coöperate Ångström Øre İstanbul ǅungla ẞtraße",
    "Crème brûlée à la mode, jalapeño, piñata, Zürich, São Paulo, Kraków",
    "Ελληνικά: Καλημέρα κόσμε, ΣΊΣΥΦΟΣ ΟΔΥΣΣΕΎΣ",
    "Русский текст с Ёлкой и йогуртом",
    "中文分词测试：我爱北京天安门。",
    "日本語のテキスト、ひらがなとカタカナ。",
    "한국어 텍스트입니다",
    "Emoji: 😀 🎉👍🏽 👨‍👩‍👧‍👦 ❤️ 🇫🇷 a😀b",
    "tabs\tand\nnewlines\r\nand\u00a0nbsp\u2003em\u3000ideographic",
    "zero\u200bwidth\u200cjoin\u200dsoft\u00adhyphen\ufeffbom",
    "controls \x00 \x01 \x07 \x1b \x1c \x7f \x85 \ufffd end",
    "private \ue000\U000f0000 unassigned \u0378\U000e0080",
    "[CLS] [SEP] [PAD] [MASK] [UNK] [cls] [ SEP ] [SEP][SEP]x[MASK]y",
    "don't won't can't it's y'all rock'n'roll",
    "$100 + 5% = £3.50 < ¥1000 > €2 | a^b ~ `code` @user #tag",
    "e-mail: someone@example.com, URL: https://example.org/path?q=1&r=2#frag",
    "numbers 3.14159 1,000,000 -42 1e-9 0x1F ½ ² ①",
    "a" * 99 + " " + "b" * 100 + " " + "c" * 101,
    "supercalifragilisticexpialidocious " * 3,
    "é" * 150,
    "antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
    "",
    " ",
    "\n\n\n",
    "!!!???...",
    "x",
    "Ⅻ ﬁ ﬀ Å ℃ ㎏ ｆｕｌｌｗｉｄｔｈ",
    "ß SS ẞ Σσς",
    "The quick brown fox jumps over the lazy dog. " * 80,
    " ".join(f"word{i}" for i in range(700)),
]
MAX_TOKENS = [512, 256, 16]


def run_embed(build_dir, model_dir, lines, *flags):
    out = subprocess.run([tool(build_dir, "strata-embed"), model_dir, "--jsonl", *flags],
                         input="".join(json.dumps(line) + "\n" for line in lines),
                         capture_output=True, text=True, check=True).stdout.split("\n")[:-1]
    assert len(out) == len(lines)
    return [json.loads(line) for line in out]


def reference(model_dir, max_tokens=None):
    t = Tokenizer.from_file(str(Path(model_dir) / "tokenizer.json"))
    t.no_padding()
    if max_tokens is None:
        t.no_truncation()
    else:
        t.enable_truncation(max_length=max_tokens)
    return t


def corpus():
    """(valid texts, invalid byte strings) of the shared tokenizer corpus."""
    valid, invalid = [], []
    for line in CORPUS.read_text(encoding="utf-8").split("\n"):
        if not line:
            continue
        entry = json.loads(line)
        if "text" in entry:
            valid.append(entry["text"])
            continue
        raw = bytes.fromhex(entry["text_hex"])
        try:
            valid.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            invalid.append(raw)
    return valid, invalid


def divergent_code_points():
    ranges = json.loads(DIVERGENCE.read_text())["ranges"]
    return {c for first, last in ranges for c in range(first, last + 1)}


def sweep_texts():
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    return cps, [f"a{chr(c)}b {chr(c)}" for c in cps]


def sweep_mismatches(build_dir, model_dir):
    cps, texts = sweep_texts()
    ours = run_embed(build_dir, model_dir, [{"text": t} for t in texts], "--words")
    t = reference(model_dir)
    theirs = [[w for w, _ in t.pre_tokenizer.pre_tokenize_str(t.normalizer.normalize_str(s))]
              for s in texts]
    return {c for c, a, b in zip(cps, ours, theirs) if a != b}


@pytest.mark.parametrize("max_tokens", MAX_TOKENS)
def test_ids_equal_the_tokenizers_package(build_dir, embedding_model_dir, max_tokens):
    valid, _ = corpus()
    diverge = divergent_code_points()
    texts = [s for s in valid + BERT_STRINGS if not diverge.intersection(map(ord, s))]
    assert len(texts) >= len(valid + BERT_STRINGS) - 10, "the divergent list covers the corpus"
    ours = run_embed(build_dir, embedding_model_dir, [{"text": s} for s in texts],
                     "--tokenize", "--max-tokens", str(max_tokens))
    theirs = reference(embedding_model_dir, max_tokens).encode_batch(texts)
    bad = [(s, a, b.ids) for s, a, b in zip(texts, ours, theirs) if a != b.ids]
    assert not bad, f"{len(bad)} of {len(texts)} differ; first: {bad[0]!r}"
    # The corpus exercises what it should.
    assert any(len(b.ids) == max_tokens for b in theirs), "nothing was cut"
    assert any(100 in b.ids for b in theirs), "no [UNK]"
    assert any(102 in b.ids[1:-1] for b in theirs), "no [SEP] text"


def test_invalid_utf8_is_refused(build_dir, embedding_model_dir):
    _, invalid = corpus()
    assert len(invalid) >= 20
    ours = run_embed(build_dir, embedding_model_dir, [{"text_hex": b.hex()} for b in invalid],
                     "--tokenize")
    for raw, out in zip(invalid, ours):
        assert isinstance(out, dict) and out["error"].startswith("INVALID_ARGUMENT"), raw


def test_normalized_words_agree_on_every_code_point(build_dir, embedding_model_dir):
    mismatches = sweep_mismatches(build_dir, embedding_model_dir)
    expected = divergent_code_points()
    assert len(expected) < 1000
    new = sorted(mismatches - expected)
    gone = sorted(expected - mismatches)
    assert not new, f"{len(new)} new differences, first {[hex(c) for c in new[:20]]}"
    assert not gone, f"{len(gone)} listed differences are gone, first {[hex(c) for c in gone[:20]]}"


def write_divergence(build_dir, model_dir):
    ranges = []
    for c in sorted(sweep_mismatches(build_dir, model_dir)):
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    DIVERGENCE.write_text(json.dumps({
        "about": "Code points whose BERT normalization or pre-tokenization differs between "
                 "Strata (Unicode 15.1 tables, Unicode 14 lowercase) and the tokenizers "
                 "package (Unicode 8-era unicode_categories tables, Rust's lowercase); see "
                 "test_embedding_tokenizer.py.",
        "ranges": ranges}, indent=None) + "\n")
    print(f"{sum(b - a + 1 for a, b in ranges)} code points in {len(ranges)} ranges")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write-divergence"]:
        sys.exit("usage: test_embedding_tokenizer.py --write-divergence")
    root = HERE.parents[1]
    write_divergence(root / "build", root / "models" / "all-minilm-l6-v2")
