"""The workloads of bench/speculative.py: input-grounded prompts (a passage from
bench/data/grounded_passages.jsonl and an instruction to repeat it, rewrite it replacing one word,
or quote one paragraph) and free generation (open-ended prompts and random words to continue),
split into (workload, streams) cells whose requests no other cell shares."""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path


FREE_TOPICS = [
    "a lighthouse keeper", "the water cycle", "a lost dog finding its way home", "volcanoes",
    "how bread rises", "a robot learning to paint", "the Roman roads", "black holes",
    "a village that builds a bridge", "honey bees", "how compilers work", "the first snowfall",
    "a chess tournament", "tides and the Moon", "a journey on a night train", "coral reefs",
    "the printing press", "a detective who cannot smell", "how vaccines work", "desert caravans",
    "a clock that runs backwards", "the history of maps", "photosynthesis", "a market at dawn",
    "glaciers", "an astronaut's first day in orbit", "the invention of the telephone", "mushrooms",
    "a girl who collects sounds", "how earthquakes happen", "the Silk Road", "a garden in a city",
    "electric motors", "a storm at sea", "the migration of birds", "a baker's apprentice",
    "how the internet routes a message", "an old map found in an attic", "wind turbines",
    "a musician who loses her hearing", "the life of a river", "submarines", "a town without cars",
]
FREE_FORMS = [
    "Write a short story about {t}.",
    "Explain {t} to a curious twelve-year-old, with examples.",
    "Write an essay on {t}: its history, how it works, and why it matters.",
    "Tell me everything you know about {t}.",
    "Continue this story: It was the strangest thing I had ever seen about {t}.",
]
RANDOM_WORDS = (
    "apple river stone window quiet orange mountain paper candle forest silver engine garden "
    "winter bridge shadow thunder harbor lantern meadow copper whisper ladder island feather "
    "market circle velvet signal marble canyon pocket rocket tunnel violin basket compass "
    "pepper castle anchor blanket cactus dragon echo falcon glacier hammer igloo jacket kettle "
    "lemon magnet needle ocean pillow quartz ribbon saddle ticket umbrella valley wagon yellow "
    "zebra button cotton desert eagle fossil guitar helmet iron jungle kitten ladder mirror "
    "nickel orchard parrot rabbit spider tomato vessel walnut"
).split()

REPEAT_INSTRUCTIONS = [
    "Repeat the following text exactly, word for word. Do not add anything before or after it.",
    "Copy out the text below without changing a single word.",
    "Write this passage out again exactly as it is, with nothing added.",
]
REPLACE_INSTRUCTION = ("Rewrite the following text, replacing every occurrence of \"{x}\" with "
                       "\"{y}\". Change nothing else and add no comment.")
QUOTE_INSTRUCTION = ("Quote, word for word, the paragraph of the following text that is about "
                     "{topic}. Output only that paragraph.")


@dataclass
class Request:
    key: str  # "<workload>/c<streams>/<index>": the same request in every server
    workload: str
    kind: str  # repeat, replace, quote, natural, random
    prompt: str


def load_passages(path: Path) -> list[dict]:
    passages = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not passages:
        raise SystemExit(f"no passages in {path}")
    return passages


def grounded_tasks(passages: list[dict], seed: int) -> list[tuple[str, str]]:
    """Every (kind, prompt) the passages allow: each repeat wording, each replacement, each
    paragraph quote; shuffled within a kind, then the kinds taken in turn, so that every cell
    gets a mix."""
    by_kind: dict[str, list[str]] = {"repeat": [], "replace": [], "quote": []}
    for p in passages:
        text = p["text"]
        by_kind["repeat"] += [f"{i}\n\n{text}" for i in REPEAT_INSTRUCTIONS]
        by_kind["replace"] += [REPLACE_INSTRUCTION.format(x=x, y=y) + f"\n\n{text}"
                               for x, y in p["replacements"]]
        by_kind["quote"] += [QUOTE_INSTRUCTION.format(topic=t) + f"\n\n{text}"
                             for t in p["paragraph_topics"]]
    rng = random.Random(seed)
    for prompts in by_kind.values():
        rng.shuffle(prompts)
    tasks = []
    for i in range(max(len(v) for v in by_kind.values())):
        tasks += [(kind, prompts[i]) for kind, prompts in by_kind.items() if i < len(prompts)]
    return tasks


def free_tasks(count: int, seed: int) -> list[tuple[str, str]]:
    """count distinct open-ended prompts: natural ones, and one in four of random words."""
    rng = random.Random(seed)
    natural = [f.format(t=t) for t in FREE_TOPICS for f in FREE_FORMS]
    rng.shuffle(natural)
    tasks = []
    for i in range(count):
        if i % 4 == 3:
            words = " ".join(rng.choice(RANDOM_WORDS) for _ in range(40))
            tasks.append(("random", f"Continue this text:\n\n{words}"))
            continue
        n = i - i // 4  # natural prompts so far
        prompt = natural[n % len(natural)]
        if n >= len(natural):  # more requests than prompts: keep them distinct
            prompt = f"(Version {n // len(natural) + 1}) {prompt}"
        tasks.append(("natural", prompt))
    return tasks


def requests_per_cell(args, streams: int) -> int:
    return max(args.requests, 2 * streams) if not args.quick else max(2, streams)


def build_cells(args, passages: list[dict]) -> dict[tuple[str, int], list[Request]]:
    """The requests of every (workload, streams) cell; no prompt appears in two cells."""
    cells: dict[tuple[str, int], list[Request]] = {}
    for workload in args.workloads:
        total = sum(requests_per_cell(args, c) for c in args.concurrency)
        if workload == "grounded":
            pool = grounded_tasks(passages, args.seed)
            if total > len(pool):  # more requests than distinct tasks: number the repeats
                pool = [(k, p if i < len(pool) else f"(Task {i + 1}) {p}")
                        for i, (k, p) in enumerate(pool * (total // len(pool) + 1))]
        else:
            pool = free_tasks(total, args.seed)
        taken = 0
        for c in args.concurrency:
            n = requests_per_cell(args, c)
            cells[(workload, c)] = [
                Request(f"{workload}/c{c}/{i}", workload, kind, prompt)
                for i, (kind, prompt) in enumerate(pool[taken:taken + n])]
            taken += n
    return cells
