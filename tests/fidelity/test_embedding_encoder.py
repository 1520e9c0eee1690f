"""Strata's sentence embeddings (strata-embed) against a float64 numpy reference.

The reference (bert_reference.py) reads model.safetensors with numpy alone and runs
all-MiniLM-L6-v2's pipeline in float64 on the ids of the `tokenizers` package, cut at 256
tokens as sentence-transformers does (sentence_bert_config.json). Strata runs its own
tokenizer and its fp32 encoder in batches of mixed lengths. For every text: cosine >= 0.9999
and every component within 1e-5 (a correct fp32 pipeline lands near 1e-7). Also: batching does
not change an embedding beyond fp32 rounding, and the embeddings mean something (a paraphrase
scores above an unrelated sentence, for Strata as for the reference).
Environment: STRATA_BUILD_DIR, STRATA_EMBEDDING_MODEL.
"""
import json
import subprocess

import numpy as np
import pytest
from tokenizers import Tokenizer

from bert_reference import BertReference
from conftest import tool

MAX_TOKENS = 256  # sentence_bert_config.json's max_seq_length

TEXTS = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
    "Someone in a gorilla costume is playing a set of drums.",
    "The new movie is awesome",
    "The cat sits outside",
    "How do I reset my password?",
    "I forgot my password, how can I change it?",
    "What is the capital of France?",
    "Paris is the capital and most populous city of France.",
    "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)",
    "SELECT name, COUNT(*) FROM users GROUP BY name HAVING COUNT(*) > 1;",
    "Crème brûlée à la mode, jalapeño, piñata, Zürich, São Paulo",
    "Привет, как дела? Всё хорошо.",
    "我爱北京天安门。今天天气很好。",
    "東京は日本の首都です。",
    "Emoji 😀🎉👍🏽 and [SEP] and [MASK] in the text",
    "",
    "x",
    "supercalifragilisticexpialidocious " * 4,
    # Past 256 tokens: cut as sentence-transformers cuts.
    "The quick brown fox jumps over the lazy dog. " * 40,
    " ".join(f"item{i}" for i in range(300)),
]
PARAPHRASES = [
    ("How do I reset my password?", "I forgot my password, how can I change it?",
     "What is the capital of France?"),
    ("A man is eating food.", "A man is eating a piece of bread.", "A monkey is playing drums."),
    ("What is the capital of France?", "Paris is the capital and most populous city of France.",
     "The cat sits outside"),
]


def embed(build_dir, model_dir, texts, *flags):
    out = subprocess.run([tool(build_dir, "strata-embed"), model_dir, "--jsonl", *flags],
                         input="".join(json.dumps({"text": t}) + "\n" for t in texts),
                         capture_output=True, text=True, check=True).stdout.split("\n")[:-1]
    assert len(out) == len(texts)
    return np.array([json.loads(line) for line in out], dtype=np.float64)


@pytest.fixture(scope="module")
def reference_embeddings(embedding_model_dir):
    tokenizer = Tokenizer.from_file(str(embedding_model_dir / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    model = BertReference(embedding_model_dir)
    ids = [e.ids for e in tokenizer.encode_batch(TEXTS)]
    assert max(len(i) for i in ids) == MAX_TOKENS
    return np.array([model.embed(i) for i in ids])


@pytest.fixture(scope="module")
def strata_embeddings(build_dir, embedding_model_dir):
    return embed(build_dir, embedding_model_dir, TEXTS, "--batch", "7")


def cosine(a, b):
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_embeddings_match_the_float64_reference(strata_embeddings, reference_embeddings):
    assert strata_embeddings.shape == (len(TEXTS), 384)
    cosines = [cosine(a, b) for a, b in zip(strata_embeddings, reference_embeddings)]
    worst = int(np.argmin(cosines))
    print(f"1 - min cosine {1 - min(cosines):.3e} (text {worst}), "
          f"max |diff| {np.abs(strata_embeddings - reference_embeddings).max():.3e}")
    assert min(cosines) >= 0.9999, f"text {worst} ({TEXTS[worst][:40]!r}): {cosines[worst]}"
    diff = np.abs(strata_embeddings - reference_embeddings)
    text, dim = np.unravel_index(np.argmax(diff), diff.shape)
    assert diff.max() <= 1e-5, f"worst element: text {text}, dimension {dim}: {diff.max()}"
    np.testing.assert_allclose(np.linalg.norm(strata_embeddings, axis=1), 1.0, atol=1e-6)


def test_batching_does_not_change_an_embedding(build_dir, embedding_model_dir,
                                               strata_embeddings):
    alone = embed(build_dir, embedding_model_dir, TEXTS, "--batch", "1", "--threads", "1")
    np.testing.assert_allclose(alone, strata_embeddings, atol=1e-6)


def test_paraphrases_score_above_unrelated_sentences(build_dir, embedding_model_dir,
                                                     reference_embeddings):
    index = {t: i for i, t in enumerate(TEXTS)}
    ours = embed(build_dir, embedding_model_dir, TEXTS)
    for anchor, paraphrase, unrelated in PARAPHRASES:
        for vectors in (ours, reference_embeddings):
            a, p, u = (vectors[index[t]] for t in (anchor, paraphrase, unrelated))
            assert cosine(a, p) > cosine(a, u) + 0.2, (anchor, cosine(a, p), cosine(a, u))
