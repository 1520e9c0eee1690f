"""Parity of Strata's SentencePiece tokenizer with llama.cpp on the real Gemma 3 vocab.

For every string of data/tokenizer_corpus.jsonl and every (add_special, parse_special) pair:
  - ids: identical to llama-cpp-python's Llama.tokenize;
  - decode: identical to llama.cpp's llama_detokenize (remove_special=False, unparse_special as
    asked) for those ids, and to Llama.detokenize except where that wrapper's own quirks apply
    (it drops pieces longer than its 32-byte buffer and strips one space after a leading BOS);
  - streaming: IncrementalDetokenizer's deltas joined equal the decode with invalid UTF-8
    replaced by U+FFFD;
  - round trip: decode(encode(s)) == s for valid UTF-8 wherever llama.cpp's own round trip holds.
Random id sequences check decoding on its own, byte tokens and partial characters included.
The Gemma 3 chat template is checked against its Jinja source rendered by jinja2.

Environment: STRATA_BUILD_DIR (with src/tools/strata-tokenize), STRATA_MODEL (the Gemma GGUF).
"""

import ctypes
import json
import os
import pathlib
import random
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
CORPUS = pathlib.Path(__file__).resolve().parent / "data" / "tokenizer_corpus.jsonl"
MODES = [(True, False), (False, True), (True, True), (False, False)]
WRAPPER_PIECE_BUFFER = 32  # llama_cpp._internals.LlamaModel.detokenize's buffer size


def _model_path():
    path = pathlib.Path(os.environ.get("STRATA_MODEL", REPO / "models" / "gemma-3-270m-q4_k_m.gguf"))
    if not path.exists():
        pytest.fail(f"model {path} is missing: run scripts/setup to fetch it")
    return path


def _tool_path():
    build = pathlib.Path(os.environ.get("STRATA_BUILD_DIR", REPO / "build"))
    tool = build / "src" / "tools" / "strata-tokenize"
    if not tool.exists():
        pytest.fail(f"{tool} is missing: build the strata-tokenize target (STRATA_BUILD_DIR={build})")
    return tool


@pytest.fixture(scope="module")
def corpus():
    items = []
    # Split on "\n" only: texts may hold U+2028 and other characters splitlines() breaks at.
    for line in CORPUS.read_text(encoding="utf-8").split("\n"):
        if not line:
            continue
        entry = json.loads(line)
        if "text_hex" in entry:
            data = bytes.fromhex(entry["text_hex"])
        else:
            data = entry["text"].encode("utf-8")
        items.append((entry["id"], entry["category"], data))
    assert len(items) >= 1200
    return items


@pytest.fixture(scope="module")
def llm():
    llama_cpp = pytest.importorskip("llama_cpp")
    return llama_cpp.Llama(model_path=str(_model_path()), vocab_only=True, verbose=False)


def test_corpus_matches_its_generator():
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "make_tokenizer_corpus", pathlib.Path(__file__).with_name("make_tokenizer_corpus.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.build() == CORPUS.read_text(encoding="utf-8"), \
        "data/tokenizer_corpus.jsonl is stale: rerun tests/fidelity/make_tokenizer_corpus.py"


def _run_tool(requests):
    tool = _tool_path()
    stdin = "".join(json.dumps(r) + "\n" for r in requests)
    proc = subprocess.run([str(tool), str(_model_path()), "--jsonl"], input=stdin.encode(),
                          capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    answers = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert len(answers) == len(requests)
    for answer in answers:
        assert "error" not in answer, answer
    return answers


def _c_detokenize(llm, ids, special):
    """llama.cpp's own llama_detokenize, without the Python wrapper's post-processing."""
    import llama_cpp
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    arr = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
    size = 64 + 64 * len(ids)
    while True:
        buf = ctypes.create_string_buffer(size)
        n = llama_cpp.llama_detokenize(vocab, arr, len(ids), buf, size, False, special)
        if n >= 0:
            return buf.raw[:n]
        size = -n + 1


def _piece_len(llm, token, special):
    import llama_cpp
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    buf = ctypes.create_string_buffer(256)
    n = llama_cpp.llama_token_to_piece(vocab, token, buf, 256, 0, special)
    return abs(n)


def _wrapper_quirk_explains(llm, ids, special, ours, wrapper):
    if any(_piece_len(llm, t, special) > WRAPPER_PIECE_BUFFER for t in ids):
        return True
    return bool(ids) and ids[0] == llm.token_bos() and ours.startswith(b" ") and wrapper == ours[1:]


def test_encode_decode_parity_with_llama_cpp(corpus, llm):
    requests = []
    for _, _, data in corpus:
        for add_special, parse_special in MODES:
            requests.append({"text_hex": data.hex(), "add_special": add_special,
                             "parse_special": parse_special})
    answers = _run_tool(requests)

    counts = {"strings": len(corpus), "cases": 0, "id_mismatch": 0, "decode_mismatch": 0,
              "wrapper_decode_same": 0, "wrapper_quirk": 0, "wrapper_other": 0,
              "stream_mismatch": 0, "roundtrip_checked": 0, "roundtrip_fail": 0,
              "llama_roundtrip_fail": 0}
    failures = []
    llama_roundtrip_failures = []
    k = 0
    for sid, category, data in corpus:
        for add_special, parse_special in MODES:
            answer = answers[k]
            k += 1
            counts["cases"] += 1
            expected = llm.tokenize(data, add_bos=add_special, special=parse_special)
            ours = answer["ids"]
            where = f"#{sid} [{category}] {data[:60]!r} add_special={add_special} parse_special={parse_special}"
            if ours != expected:
                counts["id_mismatch"] += 1
                failures.append(f"ids {where}:\n  ours {ours[:40]}\n  llama {expected[:40]}")
                continue
            for special, key in ((False, "decode_hex"), (True, "decode_special_hex")):
                decoded = bytes.fromhex(answer[key])
                reference = _c_detokenize(llm, expected, special)
                if decoded != reference:
                    counts["decode_mismatch"] += 1
                    failures.append(f"decode(special={special}) {where}:\n  ours {decoded[:80]!r}\n"
                                    f"  llama {reference[:80]!r}")
                wrapper = llm.detokenize(expected, special=special)
                if wrapper == decoded:
                    counts["wrapper_decode_same"] += 1
                elif _wrapper_quirk_explains(llm, expected, special, decoded, wrapper):
                    counts["wrapper_quirk"] += 1
                else:
                    counts["wrapper_other"] += 1
                    failures.append(f"Llama.detokenize(special={special}) {where}:\n"
                                    f"  ours {decoded[:80]!r}\n  wrapper {wrapper[:80]!r}")
                stream_key = key.replace("decode", "stream")
                streamed = bytes.fromhex(answer[stream_key])
                if streamed != decoded.decode("utf-8", errors="replace").encode("utf-8"):
                    counts["stream_mismatch"] += 1
                    failures.append(f"stream(special={special}) {where}: {streamed[:80]!r}")
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            # parse_special=False: special text stays text, so decoding without rendering
            # specials must give it back; parse_special=True: it became tokens, rendered back.
            # The BOS that add_special put in front is not part of the text.
            render = parse_special
            body = expected[1:] if add_special and expected[:1] == [llm.token_bos()] else expected
            reference = _c_detokenize(llm, body, render)
            if reference != data:
                counts["llama_roundtrip_fail"] += 1
                llama_roundtrip_failures.append(where)
                continue
            counts["roundtrip_checked"] += 1
            decoded = bytes.fromhex(answer["decode_special_hex" if render else "decode_hex"])
            if len(body) < len(expected):
                bos_piece = _c_detokenize(llm, expected[:1], render)
                decoded = decoded[len(bos_piece):] if decoded.startswith(bos_piece) else b"?"
            if decoded != data:
                counts["roundtrip_fail"] += 1
                failures.append(f"round trip {where}: {decoded[:80]!r}")

    print("\nSPM tokenizer parity vs llama.cpp:", json.dumps(counts))
    print("llama.cpp's own round trip fails for:", *llama_roundtrip_failures[:40], sep="\n  ")
    assert not failures, f"{len(failures)} failures; first ones:\n" + "\n".join(failures[:20])
    assert counts["roundtrip_checked"] > len(corpus)


def test_decode_of_random_id_sequences_matches_llama_cpp(llm):
    rng = random.Random(7)
    n_vocab = llm.n_vocab()
    byte_ids = list(range(238, 238 + 256))  # <0x00>..<0xFF> in the Gemma vocab
    special_ids = [0, 1, 2, 3, 4, 5, 6, 105, 106, 107, 138, 168, 212, 255999, 256000, 262143]
    sequences = []
    for _ in range(400):
        n = rng.randint(0, 30)
        seq = []
        for _ in range(n):
            r = rng.random()
            if r < 0.4:
                seq.append(rng.choice(byte_ids))
            elif r < 0.55:
                seq.append(rng.choice(special_ids))
            else:
                seq.append(rng.randrange(n_vocab))
        sequences.append(seq)
    requests = []
    for seq in sequences:
        requests.append({"ids": seq})
    answers = _run_tool(requests)
    mismatches = 0
    for seq, answer in zip(sequences, answers):
        for special, key in ((False, "decode_hex"), (True, "decode_special_hex")):
            decoded = bytes.fromhex(answer[key])
            assert decoded == _c_detokenize(llm, seq, special), (seq, special)
            streamed = bytes.fromhex(answer[key.replace("decode", "stream")])
            expected_stream = decoded.decode("utf-8", errors="replace").encode("utf-8")
            mismatches += streamed != expected_stream
    print(f"\nrandom id sequences: {len(sequences)}, stream mismatches: {mismatches}")
    assert mismatches == 0


# The chat template of Gemma 3 instruction-tuned models (tokenizer_config.json, "chat_template").
GEMMA3_JINJA = (
    "{{ bos_token }}\n"
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- if messages[0]['content'] is string -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}\n"
    "    {%- else -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}\n"
    "    {%- endif -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n"
    "{%- else -%}\n"
    "    {%- set first_user_prefix = \"\" -%}\n"
    "    {%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}\n"
    "    {%- endif -%}\n"
    "    {%- if (message['role'] == 'assistant') -%}\n"
    "        {%- set role = \"model\" -%}\n"
    "    {%- else -%}\n"
    "        {%- set role = message['role'] -%}\n"
    "    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n"
    "        {{ message['content'] | trim }}\n"
    "    {%- elif message['content'] is iterable -%}\n"
    "        {%- for item in message['content'] -%}\n"
    "            {%- if item['type'] == 'image' -%}\n"
    "                {{ '<start_of_image>' }}\n"
    "            {%- elif item['type'] == 'text' -%}\n"
    "                {{ item['text'] | trim }}\n"
    "            {%- endif -%}\n"
    "        {%- endfor -%}\n"
    "    {%- else -%}\n"
    "        {{ raise_exception(\"Invalid content type\") }}\n"
    "    {%- endif -%}\n"
    "    {{ '<end_of_turn>\n' }}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    {{'<start_of_turn>model\n'}}\n"
    "{%- endif -%}\n"
)

CONVERSATIONS = [
    [("user", "Hello!")],
    [("user", "  padded question \n")],
    [("system", "You are a helpful assistant."), ("user", "What is 2+2?")],
    [("system", "  Keep the spaces.  "), ("user", "\u3000hi\u00a0")],
    [("user", "Hi"), ("assistant", "Hello! How can I help?"), ("user", "Tell me a joke.")],
    [("system", "Be brief."), ("user", "One"), ("assistant", " Two "), ("user", "Three")],
    [("user", "Use <start_of_turn> literally"), ("assistant", "<end_of_turn> too")],
    [("user", "多语言 — עברית — 😀👍🏽")],
    [("user", "")],
    [("user", "line1\nline2\n\n")],
]


def test_gemma_chat_template_matches_jinja():
    jinja2 = pytest.importorskip("jinja2")
    env = jinja2.Environment()

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env.globals["raise_exception"] = raise_exception
    template = env.from_string(GEMMA3_JINJA)
    requests = []
    expected = []
    for conversation in CONVERSATIONS:
        for add_generation_prompt in (True, False):
            messages = [{"role": r, "content": c} for r, c in conversation]
            expected.append(template.render(messages=messages, bos_token="<bos>",
                                            add_generation_prompt=add_generation_prompt))
            requests.append({"chat_template": "gemma", "roles": [r for r, _ in conversation],
                             "contents": [c for _, c in conversation], "bos_text": "<bos>",
                             "add_generation_prompt": add_generation_prompt})
    # A conversation the template rejects must be rejected by ours too.
    requests.append({"chat_template": "gemma", "roles": ["user", "user"], "contents": ["a", "b"]})
    tool = _tool_path()
    stdin = "".join(json.dumps(r) + "\n" for r in requests)
    proc = subprocess.run([str(tool), str(_model_path()), "--jsonl"], input=stdin.encode(),
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    answers = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert len(answers) == len(requests)
    for want, answer in zip(expected, answers):
        assert "error" not in answer, answer
        assert bytes.fromhex(answer["rendered_hex"]).decode("utf-8") == want
    assert "error" in answers[-1] and "alternate" in answers[-1]["error"]

    # llama.cpp's built-in "gemma" template agrees where it can: it merges a system message
    # differently (trimmed) and trims ASCII whitespace only, so compare the other cases.
    compared = 0
    for i, conversation in enumerate(CONVERSATIONS):
        if any(r == "system" for r, _ in conversation):
            continue
        if any(c.strip() != c.strip(" \t\n\r\v\f") for _, c in conversation):
            continue
        for j, add_generation_prompt in enumerate((True, False)):
            ours = bytes.fromhex(answers[2 * i + j]["rendered_hex"]).decode("utf-8")
            assert "<bos>" + _llama_cpp_builtin_chat("gemma", conversation,
                                                     add_generation_prompt) == ours
            compared += 1
    assert compared >= 10


def _llama_cpp_builtin_chat(name, conversation, add_generation_prompt):
    import llama_cpp
    keep = [(r.encode(), c.encode()) for r, c in conversation]
    messages = (llama_cpp.llama_chat_message * len(keep))(
        *[llama_cpp.llama_chat_message(role=r, content=c) for r, c in keep])
    size = 1024
    while True:
        buf = ctypes.create_string_buffer(size)
        n = llama_cpp.llama_chat_apply_template(name.encode(), messages, len(keep),
                                                add_generation_prompt, buf, size)
        assert n >= 0, f"llama_chat_apply_template({name}) failed"
        if n <= size:
            return buf.raw[:n].decode("utf-8")
        size = n + 1
