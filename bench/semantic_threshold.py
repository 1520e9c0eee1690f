#!/usr/bin/env python3
"""Chooses the semantic response cache's similarity threshold on a labelled set of prompt pairs.

The semantic cache answers a request with an earlier request's answer when the cosine similarity
of the two texts' sentence embeddings (all-MiniLM-L6-v2, unit length) is at or above a threshold
AND the semantic guard allows the pair: a lexical check that the numbers, symbols, names, quoted
strings and polarity words (not, before, older, ascending, ...) agree, that shared anchors keep
their order, and that near-identical texts do not differ by a swapped content word
(include/strata/embedding/semantic_guard.h). A wrong hit is much worse than a miss, so the
threshold is chosen for precision first.

The set (bench/data/semantic_pairs.jsonl) holds one pair a line:
    {"a": "...", "b": "...", "same": true|false, "kind": "paraphrase|near_miss|related"}
`same: true` means one answer is correct for both texts. `near_miss` pairs differ in one entity,
number, direction, negation, language, format or constraint, so one answer is wrong for the
other; `related` pairs share a topic but ask different things.

All pairs go through one `strata-embed MODEL --pairs` call, which gives each pair's cosine and
the guard's verdict from the same C++ code the server runs (so what is measured is what serves).
For each threshold t in 0.70..0.99 (steps of 0.01) the script scores two predictors of "same":
cosine >= t alone, and cosine >= t with the guard; for each, precision (1.0 when nothing is
predicted same), recall, F1 and the near-miss and related false positives. The recommended
threshold (cosine + guard) is the lowest that serves no `same: false` pair at all with precision
>= --min-precision; failing that, the lowest with precision >= --min-precision and no near-miss
false positive; failing that, the lowest with precision >= --min-precision (it says which).

Run from the repository root with the .venv's Python (numpy), after scripts/setup and
scripts/build (`.venv/bin/python bench/semantic_threshold.py ...`, or as below with the .venv
active):
    bench/semantic_threshold.py                          # both tables on stdout
    bench/semantic_threshold.py --markdown docs/benchmarks/semantic-threshold.md
    bench/semantic_threshold.py --check 0.85             # exit 1 unless cosine >= 0.85 + guard
                                                         # meets the bar
    bench/semantic_threshold.py --json                   # the tables (and each pair) as JSON
Default paths are taken from the repository root; paths given on the command line from the
current folder.
"""
import argparse
import collections
import datetime
import json
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("paraphrase", "near_miss", "related")
GRID = [round(0.70 + 0.01 * i, 2) for i in range(30)]  # 0.70 .. 0.99
SUMMARY_THRESHOLDS = (0.80, 0.85, 0.90, 0.95)
HARD_CASES = 10
# The guard's rules, in the order it checks them (GuardVetoName in semantic_guard.h).
RULES = ("numbers", "symbols", "names", "quotes", "polarity", "order", "reordered",
         "swapped_word")
# Guard variants measured from the vetoes of the full guard: a variant allows a pair when none
# of its rules is among the pair's vetoes.
VARIANTS = (
    ("anchors: numbers, symbols, names, quotes, polarity", RULES[:5]),
    ("anchors + order + reordered", RULES[:7]),
    ("full guard (anchors + order + reordered + swapped word)", RULES),
)


def load_pairs(path: Path) -> list:
    pairs = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            where = f"{path}:{number}"
            for key in ("a", "b"):
                if not isinstance(row.get(key), str) or not row[key].strip():
                    raise ValueError(f"{where}: '{key}' must be a non-empty string")
            if not isinstance(row.get("same"), bool):
                raise ValueError(f"{where}: 'same' must be true or false")
            if row.get("kind") not in KINDS:
                raise ValueError(f"{where}: 'kind' must be one of {', '.join(KINDS)}")
            if row["same"] != (row["kind"] == "paraphrase"):
                raise ValueError(f"{where}: only 'paraphrase' pairs are same: true")
            pairs.append(row)
    if not pairs:
        raise ValueError(f"{path} holds no pairs")
    return pairs


def score_pairs(pairs: list, embed_binary: Path, model_dir: Path) -> tuple:
    """(cosine [n] float64, guard [n] bool, vetoes: list of rule-name lists), one per pair."""
    stdin = "".join(json.dumps({"a": p["a"], "b": p["b"]}, ensure_ascii=False) + "\n"
                    for p in pairs)
    proc = subprocess.run([str(embed_binary), str(model_dir), "--pairs"], input=stdin.encode(),
                          capture_output=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{embed_binary} --pairs failed ({proc.returncode}): "
                           f"{proc.stderr.decode(errors='replace').strip()}")
    rows = [json.loads(line) for line in proc.stdout.decode().splitlines() if line.strip()]
    if len(rows) != len(pairs):
        raise RuntimeError(f"{embed_binary} --pairs printed {len(rows)} lines for {len(pairs)} "
                           "pairs")
    for row in rows:
        if row["guard"] != (not row["vetoes"]):
            raise RuntimeError(f"{embed_binary} --pairs: guard and vetoes disagree: {row}")
    return (np.array([r["cosine"] for r in rows], dtype=np.float64),
            np.array([r["guard"] for r in rows], dtype=bool),
            [r["vetoes"] for r in rows])


def metrics(pairs: list, cos: np.ndarray, threshold: float, allowed=None) -> dict:
    """Scores of "predicted same = cosine >= threshold (and allowed)" against the labels."""
    same = np.array([p["same"] for p in pairs])
    kind = np.array([p["kind"] for p in pairs])
    predicted = cos >= threshold
    if allowed is not None:
        predicted &= allowed
    tp = int(np.sum(predicted & same))
    fp = int(np.sum(predicted & ~same))
    fn = int(np.sum(~predicted & same))
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"threshold": threshold, "precision": precision, "recall": recall, "f1": f1,
            "tp": tp, "fp": fp, "fn": fn,
            "near_miss_fp": int(np.sum(predicted & (kind == "near_miss"))),
            "related_fp": int(np.sum(predicted & (kind == "related")))}


def allowed_by(vetoes: list, rules) -> np.ndarray:
    """Which pairs a guard made of `rules` allows, from the full guard's vetoes."""
    return np.array([not set(v) & set(rules) for v in vetoes], dtype=bool)


def meets_bar(row: dict, min_precision: float) -> bool:
    return row["precision"] >= min_precision and row["near_miss_fp"] == 0


def recommend(table: list, min_precision: float) -> tuple:
    """(row, rule): the lowest threshold (cosine + guard) that meets the bar, and which bar."""
    span = f"{GRID[0]:.2f}..{GRID[-1]:.2f}"
    for row in table:
        if row["precision"] >= min_precision and row["fp"] == 0:
            return row, "the lowest threshold at which no `same: false` pair is served"
    for row in table:
        if meets_bar(row, min_precision):
            return row, f"no threshold in {span} serves no `same: false` pair; lowest with " \
                        f"precision >= {min_precision} and no near-miss false positive"
    for row in table:
        if row["precision"] >= min_precision:
            return row, f"no threshold in {span} has zero near-miss false positives; lowest " \
                        f"threshold with precision >= {min_precision}"
    best = max(table, key=lambda row: (row["precision"] if row["tp"] else 0.0, row["recall"]))
    return None, f"no threshold in {span} reaches precision >= {min_precision}; the highest " \
                 f"with a true positive is {best['precision']:.3f} at {best['threshold']:.2f}"


def text_table(cosine_table: list, guard_table: list, recommended: dict) -> str:
    lines = ["           cosine alone                     cosine + guard",
             "threshold  precision recall f1    nm_fp     precision recall f1    tp   fp   fn  "
             " near_miss_fp related_fp"]
    for c, g in zip(cosine_table, guard_table):
        mark = "  <- recommended" if recommended and g["threshold"] == recommended["threshold"] \
            else ""
        lines.append(f"{g['threshold']:.2f}       {c['precision']:.3f}     {c['recall']:.3f}  "
                     f"{c['f1']:.3f} {c['near_miss_fp']:<9} {g['precision']:.3f}     "
                     f"{g['recall']:.3f}  {g['f1']:.3f} {g['tp']:<4} {g['fp']:<4} {g['fn']:<4} "
                     f"{g['near_miss_fp']:<12} {g['related_fp']}{mark}")
    return "\n".join(lines)


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def rule_rows(pairs: list, vetoes: list) -> list:
    """Per rule: how many pairs of each kind it vetoes, and how many only it vetoes."""
    rows = []
    for rule in RULES:
        row = {"rule": rule}
        for kind in KINDS:
            hits = [v for p, v in zip(pairs, vetoes) if p["kind"] == kind and rule in v]
            row[kind] = len(hits)
            row[kind + "_only"] = sum(1 for v in hits if v == [rule])
        rows.append(row)
    return rows


def markdown(args, pairs: list, cos: np.ndarray, guard: np.ndarray, vetoes: list,
             cosine_table: list, guard_table: list, recommended: dict, rule: str) -> str:
    counts = collections.Counter(p["kind"] for p in pairs)
    command = ".venv/bin/python bench/semantic_threshold.py " + shlex.join(sys.argv[1:])
    out = [
        "## Semantic cache threshold: all-MiniLM-L6-v2 cosine and the semantic guard on the "
        "shipped prompt pairs",
        "",
        f"- Date: {datetime.datetime.now(datetime.timezone.utc).date().isoformat()}",
        f"- Command: `{command.strip()}`",
        f"- Model: `{Path(args.model).name}` (sentence embeddings from `strata-embed --pairs`, "
        "mean pooled, unit length)",
        f"- Pairs: `{display_path(args.pairs)}`: {len(pairs)} pairs, "
        f"{counts['paraphrase']} paraphrase (same: true), {counts['near_miss']} near_miss and "
        f"{counts['related']} related (same: false)",
        "- Predicted same: cosine >= threshold, alone or together with the semantic guard. "
        "Precision is 1.0 when nothing is predicted same.",
        "",
        "**The semantic guard** (`include/strata/embedding/semantic_guard.h`, "
        "`SemanticGuardAllows`) is a lexical check a semantic hit must also pass; it only ever "
        "vetoes. It tokenizes both texts (lowercased words, numbers with decimals and number "
        "words, operator symbols) and vetoes the pair when",
        "",
        "- **numbers** or **symbols** differ (as multisets: `3x + 4` / `3x - 4`, 87 / 89);",
        "- a **name** (a word capitalized away from a sentence start) of one text is not a word "
        "of the other (France / Germany, Python / JavaScript);",
        "- a **quoted** string of one text is not a run of tokens of the other;",
        "- the **polarity** words differ (not, no, never, without, except, avoid, more, less, "
        "most, least, than, over, under, above, below, first, last, older, newer, ascending, "
        "descending, increase, decrease, before, after, within, up, down, off, ...);",
        "- the numbers and names both hold come in another **order** (London -> New York / New "
        "York -> London);",
        "- the texts hold the same tokens in another order (**reordered**: number -> string / "
        "string -> number);",
        "- the texts are near-duplicates (a common subsequence covers half the tokens) and each "
        "has a content word the other lacks, spelling variants and shared stems aside "
        "(**swapped word**: high / low in iron, soft / hard yolk).",
        "",
        "Other words that appear on only one side are allowed: paraphrases use synonyms.",
        "",
    ]
    if recommended:
        out.append(f"**Recommended threshold: {recommended['threshold']:.2f}** with the guard "
                   f"({rule}): precision {recommended['precision']:.3f}, recall "
                   f"{recommended['recall']:.3f}, F1 {recommended['f1']:.3f}, "
                   f"{recommended['near_miss_fp']} near-miss and {recommended['related_fp']} "
                   "related false positives.")
    else:
        out.append(f"**No recommended threshold**: {rule}.")
    served = [float(c) for c, p, g in zip(cos, pairs, guard) if g and not p["same"]]
    if served:
        out += ["", "Two limits. The guard's rules and word lists were chosen on these pairs, so "
                "its near-miss figures are optimistic for requests it has not seen. And it does "
                "little against `related` pairs (same topic, another question, worded apart): "
                "the threshold alone keeps those out; the highest-cosine `same: false` pair the "
                f"guard allows scores {max(served):.3f}."]
    near = cos[[i for i, p in enumerate(pairs) if p["kind"] == "near_miss"]]
    same = cos[[i for i, p in enumerate(pairs) if p["same"]]]
    out += ["", "Cosine alone does not tell a reworded request from one a word apart: "
            f"{np.mean(near >= np.median(same)):.0%} of the near-miss pairs score at or above "
            f"the median paraphrase ({np.median(same):.3f}), and no threshold reaches precision "
            f">= {args.min_precision} without the guard. The guard vetoes "
            f"{int(np.sum(~guard[[i for i, p in enumerate(pairs) if p['kind'] == 'near_miss']]))}"
            f" of the {counts['near_miss']} near-miss pairs at any cosine; its price is the "
            f"{int(np.sum(~guard[[i for i, p in enumerate(pairs) if p['same']]]))} of "
            f"{counts['paraphrase']} paraphrases it vetoes too.",
            "", "Cosine by kind:", "", "| kind | pairs | min | p10 | median | p90 | max |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for kind in KINDS:
        values = cos[[i for i, p in enumerate(pairs) if p["kind"] == kind]]
        if len(values):
            q = np.percentile(values, [0, 10, 50, 90, 100])
            out.append(f"| {kind} | {len(values)} | " + " | ".join(f"{v:.3f}" for v in q) + " |")

    out += ["", "### At a glance", "",
            "| threshold | predictor | precision | recall | F1 | near-miss FP | related FP |",
            "| ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    by_threshold = {r["threshold"]: (c, r) for c, r in zip(cosine_table, guard_table)}
    shown = sorted(set(SUMMARY_THRESHOLDS) | ({recommended["threshold"]} if recommended
                                               else set()))
    for t in shown:
        c, g = by_threshold[t]
        mark = " (recommended)" if recommended and t == recommended["threshold"] else ""
        for name, r in (("cosine alone", c), ("cosine + guard", g)):
            out.append(f"| {t:.2f}{mark} | {name} | {r['precision']:.3f} | {r['recall']:.3f} | "
                       f"{r['f1']:.3f} | {r['near_miss_fp']} | {r['related_fp']} |")

    out += ["", "### Guard variants", "",
            "The same vetoes, with only some of the rules (a variant allows a pair when none of "
            "its rules vetoes it), at the thresholds above:", "",
            "| variant | " + " | ".join(f"{t:.2f}: P / R / near-miss FP" for t in shown) + " |",
            "| --- | " + " | ".join("---:" for _ in shown) + " |"]
    rows = [("cosine alone", None)] + [(name, allowed_by(vetoes, rules))
                                       for name, rules in VARIANTS]
    for name, allowed in rows:
        cells = []
        for t in shown:
            r = metrics(pairs, cos, t, allowed)
            cells.append(f"{r['precision']:.3f} / {r['recall']:.3f} / {r['near_miss_fp']}")
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    out += ["", "Each rule on its own, at any cosine: the pairs it vetoes, and in brackets those "
            "no other rule vetoes (what removing it would let through, or give back):", "",
            "| rule | near_miss | paraphrase | related |", "| --- | ---: | ---: | ---: |"]
    for r in rule_rows(pairs, vetoes):
        out.append(f"| {r['rule']} | {r['near_miss']} ({r['near_miss_only']}) | "
                   f"{r['paraphrase']} ({r['paraphrase_only']}) | {r['related']} "
                   f"({r['related_only']}) |")

    for title, table in (("Cosine alone", cosine_table), ("Cosine + guard", guard_table)):
        out += ["", f"### {title}", "",
                "| threshold | precision | recall | F1 | TP | FP | FN | near-miss FP | "
                "related FP |", "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for r in table:
            t = f"{r['threshold']:.2f}"
            if recommended and table is guard_table and r["threshold"] == recommended["threshold"]:
                t = f"**{t}**"
            out.append(f"| {t} | {r['precision']:.3f} | {r['recall']:.3f} | {r['f1']:.3f} | "
                       f"{r['tp']} | {r['fp']} | {r['fn']} | {r['near_miss_fp']} | "
                       f"{r['related_fp']} |")

    order = np.argsort(-cos)
    served = [i for i in order if not pairs[i]["same"] and guard[i]][:HARD_CASES]
    caught = [i for i in order if not pairs[i]["same"] and not guard[i]][:HARD_CASES]
    missed = [i for i in order if pairs[i]["same"] and not guard[i]][:HARD_CASES]
    sections = (
        (f"The {HARD_CASES} highest-cosine `same: false` pairs the guard allows (the wrong hits "
         "a low threshold would still serve)", served, False),
        (f"The {HARD_CASES} highest-cosine `same: false` pairs and the rules that veto them",
         caught, True),
        (f"The {HARD_CASES} highest-cosine paraphrases the guard vetoes (the recall it costs)",
         missed, True),
    )
    for title, rows_, with_rules in sections:
        out += ["", f"{title}:", ""]
        if not rows_:
            out.append("(none)")
            continue
        out += ["| cosine | kind | " + ("vetoes | " if with_rules else "") + "a | b |",
                "| ---: | --- | " + ("--- | " if with_rules else "") + "--- | --- |"]
        for i in rows_:
            p = pairs[i]
            rules = f"{', '.join(vetoes[i])} | " if with_rules else ""
            out.append(f"| {cos[i]:.3f} | {p['kind']} | {rules}{cell(p['a'])} | {cell(p['b'])} |")
    return "\n".join(out) + "\n"


def display_path(path: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return Path(path).name


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embed", type=Path, default=ROOT / "build" / "src" / "tools" /
                        "strata-embed", help="strata-embed binary [build/src/tools/strata-embed]")
    parser.add_argument("--model", type=Path, default=ROOT / "models" / "all-minilm-l6-v2",
                        help="embedding model folder [models/all-minilm-l6-v2]")
    parser.add_argument("--pairs", type=Path,
                        default=ROOT / "bench" / "data" / "semantic_pairs.jsonl",
                        help="labelled pairs [bench/data/semantic_pairs.jsonl]")
    parser.add_argument("--markdown", type=Path, help="write the results as markdown here")
    parser.add_argument("--json", action="store_true",
                        help="print the tables, the recommendation and each pair's cosine and "
                        "guard verdict as JSON")
    parser.add_argument("--check", type=float, metavar="T",
                        help="exit 1 unless cosine >= T with the guard has precision >= "
                        "--min-precision and no near-miss false positive")
    parser.add_argument("--min-precision", type=float, default=0.95,
                        help="precision the threshold must reach [0.95]")
    args = parser.parse_args()

    for path, what in ((args.embed, "strata-embed"), (args.model, "the embedding model"),
                       (args.pairs, "the pairs file")):
        if not path.exists():
            print(f"semantic_threshold: {what} {path} is missing (scripts/setup and scripts/build "
                  "make it)", file=sys.stderr)
            return 2
    pairs = load_pairs(args.pairs)
    cos, guard, vetoes = score_pairs(pairs, args.embed, args.model)
    cosine_table = [metrics(pairs, cos, t) for t in GRID]
    guard_table = [metrics(pairs, cos, t, guard) for t in GRID]
    recommended, rule = recommend(guard_table, args.min_precision)

    if args.json:
        print(json.dumps({
            "model": Path(args.model).name, "pairs_file": display_path(args.pairs),
            "counts": dict(collections.Counter(p["kind"] for p in pairs)),
            "min_precision": args.min_precision, "thresholds_cosine": cosine_table,
            "thresholds_guard": guard_table, "recommended": recommended, "rule": rule,
            "pairs": [{**p, "cosine": float(c), "guard": bool(g), "vetoes": v}
                      for p, c, g, v in zip(pairs, cos, guard, vetoes)]}, indent=1))
    else:
        print(text_table(cosine_table, guard_table, recommended))
        print(f"recommended: {recommended['threshold']:.2f} with the guard ({rule})"
              if recommended else f"recommended: none ({rule})")
    if args.markdown:
        args.markdown.write_text(markdown(args, pairs, cos, guard, vetoes, cosine_table,
                                          guard_table, recommended, rule), encoding="utf-8")

    if args.check is not None:
        r = metrics(pairs, cos, args.check, guard)
        problems = []
        if r["precision"] < args.min_precision:
            problems.append(f"precision {r['precision']:.3f} < {args.min_precision}")
        if r["near_miss_fp"]:
            problems.append(f"{r['near_miss_fp']} near-miss pairs score >= {args.check} and pass "
                            "the guard")
        summary = (f"threshold {args.check} with the guard: precision {r['precision']:.3f}, "
                   f"recall {r['recall']:.3f}, F1 {r['f1']:.3f}, near-miss false positives "
                   f"{r['near_miss_fp']}, related false positives {r['related_fp']}")
        if problems:
            best = f"{recommended['threshold']:.2f}" if recommended else "none"
            print(f"semantic_threshold: FAIL: {summary}: {'; '.join(problems)} (recommended: "
                  f"{best})", file=sys.stderr)
            return 1
        print(f"semantic_threshold: OK: {summary}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
