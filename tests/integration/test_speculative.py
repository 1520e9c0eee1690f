"""Speculative decoding (--speculative ngram) on the real server and model: outputs equal those
of a server without it (greedy and seeded sampling, alone and concurrent, unary, streaming and
HTTP, stop strings), drafts are proposed and accepted on input-grounded prompts, a request can
opt out, the metrics are exported, and bad settings are refused at start-up."""
import concurrent.futures
import json
import subprocess
import time
import urllib.request

import pytest

from strata_server import BATCH_INVARIANT, Server, build_dir, greedy, model_path, pb, sanitized

MODEL = "gemma-3-270m-q4_k_m"
PASSAGE = ("The lighthouse keeper climbed the hundred and twelve steps every evening at dusk. "
           "He trimmed the wick, polished the great lens with a soft cloth, and wrote the "
           "weather in a leather book: wind from the south-west, a light swell, rain by "
           "midnight. Ships passing the headland never saw him, only the beam that swept the "
           "water every nine seconds, as it had for ninety years.")
GROUNDED = [
    [{"role": "user", "content": "Repeat the following text exactly.\n\n" + PASSAGE}],
    [{"role": "user", "content": "Rewrite this text, replacing 'lighthouse keeper' with "
                                 "'old sailor':\n\n" + PASSAGE}],
]
FREE = ["Write a short story about a fox who learns to sing.",
        "Explain why the sky is blue in two sentences.",
        "List five uses for a paper clip."]
# Under the sanitizers (several times slower) shorter outputs; the release run does the whole.
SCALE = 0.35 if sanitized() else 1.0


def tokens(n: int) -> int:
    return max(8, int(n * SCALE))


@pytest.fixture(scope="module")
def servers():
    # Speculative outputs must equal plain ones: verifying a draft multiplies several tokens at
    # once, so these servers need the same bits at any token count (BATCH_INVARIANT).
    plain = Server("--max-model-len", "2048", *BATCH_INVARIANT)
    # Fixed-length drafts whenever there is a match: the most verification to get wrong.
    spec = Server("--max-model-len", "2048", "--speculative", "ngram",
                  "--speculative-adaptive", "false", "--speculative-tokens", "6", *BATCH_INVARIANT)
    plain.wait_serving()
    spec.wait_serving()
    yield plain, spec
    assert plain.stop() == 0, plain.log()
    assert spec.stop() == 0, spec.log()


def chat(messages):
    return pb.ChatMessages(messages=[pb.ChatMessage(role=m["role"], content=m["content"])
                                     for m in messages])


def run(server, sampling, *, prompt=None, messages=None, **fields):
    req = pb.GenerateRequest(sampling=sampling, **fields)
    if prompt is not None:
        req.prompt = prompt
    else:
        req.chat.CopyFrom(chat(messages))
    return server.stub.Generate(req, timeout=300)


def counters(server, proposer="ngram"):
    label = f'proposer="{proposer}"'
    return (server.metric("strata_speculative_proposed_tokens_total", label),
            server.metric("strata_speculative_accepted_tokens_total", label))


def test_greedy_outputs_equal_and_grounded_drafts_are_accepted(servers):
    plain, spec = servers
    proposed0, accepted0 = counters(spec)
    for messages in GROUNDED:
        a = run(plain, greedy(tokens(160)), messages=messages)
        b = run(spec, greedy(tokens(160)), messages=messages)
        assert list(b.token_ids) == list(a.token_ids)
        assert b.text == a.text
    proposed1, accepted1 = counters(spec)
    assert proposed1 > proposed0
    # Copying a passage: most drafts are right.
    assert accepted1 - accepted0 > 0.5 * (proposed1 - proposed0), (proposed1, accepted1)
    for prompt in FREE:
        a = run(plain, greedy(tokens(96)), prompt=prompt)
        b = run(spec, greedy(tokens(96)), prompt=prompt)
        assert list(b.token_ids) == list(a.token_ids), prompt


def test_concurrent_requests_give_the_sequential_outputs(servers):
    plain, spec = servers
    jobs = [dict(messages=GROUNDED[i % 2]) if i % 2 == 0 else dict(prompt=FREE[i % 3])
            for i in range(8)]
    expected = [list(run(plain, greedy(tokens(64)), **job).token_ids) for job in jobs]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda job: list(run(spec, greedy(tokens(64)), **job).token_ids), jobs))
    assert got == expected


def test_seeded_sampling_gives_the_same_tokens(servers):
    plain, spec = servers
    sampling = pb.SamplingParams(max_tokens=tokens(80), temperature=0.8, top_p=0.95, top_k=40,
                                 repetition_penalty=1.1, seed=1234, ignore_eos=True)
    for messages in GROUNDED:
        a = run(plain, sampling, messages=messages)
        b = run(spec, sampling, messages=messages)
        assert list(b.token_ids) == list(a.token_ids)


def test_streaming_with_a_stop_string_matches(servers):
    plain, spec = servers
    full = run(plain, greedy(120), messages=GROUNDED[0]).text
    words = full.split()
    assert len(words) > 12, full
    stop = " ".join(words[8:10])
    req = pb.GenerateRequest(chat=chat(GROUNDED[0]), sampling=greedy(120, stop=[stop]))
    chunks = list(spec.stub.GenerateStream(req, timeout=300))
    text = "".join(c.text for c in chunks)
    assert text == full[:full.index(stop)]
    assert chunks[-1].finish_reason == pb.FINISH_REASON_STOP


def test_a_request_can_opt_out(servers):
    _, spec = servers
    before = spec.settled(counters)
    out = run(spec, greedy(60), messages=GROUNDED[0], speculative=False)
    assert len(out.token_ids) > 0
    body = {"model": MODEL, "messages": GROUNDED[0], "max_tokens": 40, "temperature": 0,
            "speculative": False}
    req = urllib.request.Request(f"http://127.0.0.1:{spec.http_port}/v1/chat/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        assert json.load(r)["usage"]["completion_tokens"] > 0
    assert spec.settled(counters) == before
    # The same request without the opt-out is drafted for.
    run(spec, greedy(60), messages=GROUNDED[0])
    assert spec.settled(counters)[0] > before[0]


def test_metrics_describe_acceptance(servers):
    _, spec = servers
    run(spec, greedy(60), messages=GROUNDED[1])
    text = spec.metrics_text()
    assert 'strata_speculative_acceptance_length_bucket{proposer="ngram",le="0"}' in text
    assert 'strata_speculative_tokens_per_step_count{proposer="ngram"}' in text
    # A scrape collects one family after another while the engine may still publish the last
    # step: the two agree once it has (within a few scrapes of the reply).
    deadline = time.monotonic() + 10
    while True:
        verifications = spec.metric("strata_speculative_verifications_total", 'proposer="ngram"')
        per_step = spec.metric("strata_speculative_tokens_per_step_count", 'proposer="ngram"')
        if per_step == verifications or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert verifications > 0 and per_step == verifications


def test_a_draft_model_gives_the_same_outputs(servers):
    plain, _ = servers
    # The target as its own draft: not faster, but every greedy draft token is accepted, which
    # shows the draft model's KV bookkeeping (catch-up, rollback, batching) is right.
    draft = Server("--max-model-len", "2048", "--speculative", "draft",
                   "--speculative-draft-model", str(model_path()),
                   "--speculative-adaptive", "false", "--speculative-tokens", "4",
                   *BATCH_INVARIANT)
    try:
        draft.wait_serving()
        jobs = [dict(messages=GROUNDED[0]), dict(prompt=FREE[0]), dict(prompt=FREE[1])]
        expected = [list(run(plain, greedy(48), **job).token_ids) for job in jobs]
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            got = list(pool.map(lambda job: list(run(draft, greedy(48), **job).token_ids),
                                jobs))
        assert got == expected
        # Two scrapes: the engine may publish the last step between them, so read once settled.
        proposed, accepted = draft.settled(lambda s: counters(s, "draft"))
        assert proposed > 0 and accepted == proposed, (proposed, accepted)
    finally:
        assert draft.stop() == 0, draft.log()


def test_self_speculation_calibrates_and_gives_the_same_outputs(servers):
    plain, _ = servers
    # Measured choice of the draft's layers at start-up (logged), then fixed-length drafts
    # from a fixed depth: outputs are the plain ones either way.
    auto = Server("--max-model-len", "2048", "--speculative", "self")
    try:
        auto.wait_serving(timeout=300)
        assert "self-speculation candidate" in auto.log()
        assert "self-speculation draft" in auto.log()
    finally:
        assert auto.stop() == 0, auto.log()
    fixed = Server("--max-model-len", "2048", "--speculative", "self",
                   "--speculative-self-layers", "9", "--speculative-adaptive", "false",
                   "--speculative-tokens", "3", *BATCH_INVARIANT)
    try:
        fixed.wait_serving()
        for job in (dict(messages=GROUNDED[1]), dict(prompt=FREE[2])):
            assert (list(run(fixed, greedy(32), **job).token_ids) ==
                    list(run(plain, greedy(32), **job).token_ids))
        assert fixed.metric("strata_speculative_proposed_tokens_total", 'proposer="self"') > 0
    finally:
        assert fixed.stop() == 0, fixed.log()


@pytest.mark.parametrize("flags, message, code", [
    (["--speculative", "medusa"], "speculative", 2),
    (["--speculative-tokens", "0"], "speculative_tokens", 2),
    (["--speculative-ngram-min", "5", "--speculative-ngram-max", "3"], "speculative_ngram_min",
     2),
    (["--speculative", "draft"], "speculative_draft_model", 2),
    # Found when the model loads: the server exits with 1, naming the flag.
    (["--speculative", "self", "--speculative-self-layers", "18"], "speculative-self-layers", 1),
    (["--speculative", "draft", "--speculative-draft-model", "/nonexistent.gguf"],
     "speculative-draft-model", 1),
])
def test_bad_settings_are_refused(flags, message, code):
    binary = build_dir() / "src" / "tools" / "strata-server"
    r = subprocess.run([str(binary), "--model", str(model_path()), "--host", "127.0.0.1",
                        "--grpc-port", "0", "--metrics-port", "0", "--http-port", "0", *flags],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == code, r.stderr
    assert message in r.stderr + r.stdout
