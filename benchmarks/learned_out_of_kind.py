"""Language models of right answers read as rewards (``implicit_reward``) on slices out of their
base's range in kind and on bare final answers: the figures docs/learned.md quotes for
data/learned/rm_out_of_kind.jsonl and prm_out_of_kind.jsonl, into one JSON file, the docs'
tables rendered from it (tests/test_learned_out_of_kind.py checks the two agree).

    python benchmarks/learned_out_of_kind.py \\
        --model "train rm, replay recipe"=runs/out_of_kind/rm_replay_s0/final,runs/out_of_kind/rm_replay_s2/final \\
        --model "TRL SFTTrainer, replay recipe"=runs/out_of_kind/trl_sft_replay_s0/final \\
        [--json docs/learned_out_of_kind.json] [--write-docs]

Every model (``NAME=DIR[,DIR...]``: several folders are seeds, shown as mean (min–max)) is
read with ``verify: generate`` (a bare answer by the model's own greedy worked solution; a worked
one by its likelihood, as before), and its bare answers once more with ``verify: likelihood``
(the answer's own likelihood, the reading without the option); PRM F1 per slice uses the step
threshold picked on prm_train.jsonl (benchmarks/learned_figures.py's rule). The shipped bases,
``lm_base`` (first numbers 1–99, 2–4 steps) and ``lm_base_broad`` (1–499, 2–6 steps), are
always read: the two points of accuracy against the range a base saw. A run already in
``--json`` with the same weights, data and options is not read again, nor one whose folder is
gone (its figures are kept as they were measured, if its data and options still match).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its siblings, when loaded by path
from learned_figures import _sha256, eval_implicit  # noqa: E402
from learned_training import DATA, ROOT  # noqa: E402

DOCS = ROOT / "docs" / "learned.md"
JSON = ROOT / "docs" / "learned_out_of_kind.json"
START, END = "<!-- out-of-kind-figures:start -->", "<!-- out-of-kind-figures:end -->"
RM_FILE, PRM_FILE = "rm_out_of_kind.jsonl", "prm_out_of_kind.jsonl"
BASES = {"`lm_base` (saw 1–99, 2–4 steps)": [DATA / "lm_base"],
         "`broad/lm_base` (saw 1–499, 2–6 steps)": [DATA / "broad" / "lm_base"]}
GENERATE = {"verify": "generate", "num_solutions": 1}


def read_run(model: Path, cached: dict[str, Any]) -> dict[str, Any]:
    """One model's pair accuracy per ``SLICE/FORM`` (bare answers by ``verify: generate`` and
    by likelihood alone) and PRM F1 per slice; ``cached`` is returned when it was computed
    from the same weights, data and options, and also when the model's folder is gone (a run
    measured earlier keeps its figures; the data and options must still match)."""
    data = {"rm": _sha256(DATA / RM_FILE), "prm": _sha256(DATA / PRM_FILE), "options": GENERATE}
    weights = model / "model.safetensors"
    if not weights.is_file() and cached:
        if any(cached["key"].get(k) != v for k, v in data.items()):
            raise SystemExit(f"{model} is gone and its figures in --json were read from other "
                             "data or options; train it again or leave it out")
        print(f"{model}: no weights here, its figures kept from --json", flush=True)
        return cached
    key = {"weights": _sha256(weights), **data}
    if cached.get("key") == key:
        return cached
    import rewardkit
    from rewardkit.models.data import read_pairs
    from rewardkit.models.evaluation import evaluate_reward_model

    got = eval_implicit(model, GENERATE, RM_FILE, PRM_FILE)
    bare = [p for p in read_pairs(str(DATA / RM_FILE)) if p.subset.endswith("/bare")]
    plain = evaluate_reward_model(rewardkit.load("implicit_reward", model=str(model),
                                                 device="cpu"), bare, heuristics=False)
    by = got["prm"]["by_threshold"][str(got["prm"]["threshold_on_train_rows"])]
    return {"key": key, "model": str(model.relative_to(ROOT) if model.is_relative_to(ROOT)
                                      else model),
            "pairs": {s: b["accuracy"] for s, b in got["rm"]["slices"].items()},
            "bare_likelihood": {s: b["accuracy"] for s, b in plain["subsets"].items()},
            "prm_f1": {s: b["f1"] for s, b in by["slices"].items()},
            "prm_threshold": got["prm"]["threshold_on_train_rows"]}


def _stats(values: list[float]) -> dict[str, float]:
    return {"mean": statistics.fmean(values), "min": min(values), "max": max(values)}


def aggregate(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean, min and max over a model's runs (seeds) of every figure."""
    return {what: {s: _stats([r[what][s] for r in runs]) for s in runs[0][what]}
            for what in ("pairs", "bare_likelihood", "prm_f1")}


def slice_notes() -> dict[str, dict[str, Any]]:
    from rewardkit.models.arithmetic_out_of_kind import SLICES

    return {name: {"in_range": s.in_range, "notes": s.notes} for name, s in SLICES.items()}


def _cell(block: dict[str, float] | None, seeds: int) -> str:
    if block is None:
        return "—"
    if seeds == 1:
        return f"{block['mean']:.3f}"
    return f"{block['mean']:.3f} ({block['min']:.3f}–{block['max']:.3f})"


def render_tables(figures: dict[str, Any]) -> str:
    """Four tables, a row per model and a column per slice (in range, then out of kind): pair
    accuracy of bare answers with ``verify: generate``, of worked solutions, of bare answers
    read by likelihood alone, and PRM F1."""
    models = figures["models"]
    notes = figures["slices"]
    header = "| model | " + " | ".join(
        f"{name} ({'in range' if note['in_range'] else '**out of kind**'})"
        for name, note in notes.items()) + " |"
    rows: list[str] = []

    def table(title: str, what: str, form: str) -> None:
        rows.extend([f"**{title}**", "", header, "|---|" + "---|" * len(notes)])
        for model, entry in models.items():
            seeds = len(entry["runs"])
            cells = [_cell(entry["aggregate"][what].get(f"{name}/{form}" if form else name),
                           seeds) for name in notes]
            label = model + (f", {seeds} seeds" if seeds > 1 else "")
            rows.append(f"| {label} | " + " | ".join(cells) + " |")
        rows.append("")

    table("Pair accuracy, bare answers (verify: generate)", "pairs", "bare")
    table("Pair accuracy, worked solutions", "pairs", "worked")
    table("Bare answers read by likelihood alone (verify: likelihood)", "bare_likelihood", "bare")
    table("PRM F1 (step threshold picked on prm_train.jsonl)", "prm_f1", "")
    return "\n".join(rows[:-1])


def write_docs(figures: dict[str, Any], docs: Path = DOCS) -> None:
    text = docs.read_text()
    head, rest = text.split(START, 1)
    docs.write_text(head + START + "\n" + render_tables(figures) + "\n" + END +
                    rest.split(END, 1)[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", default=[], metavar="NAME=DIR[,DIR...]",
                        help="a model to read; several folders are its seeds")
    parser.add_argument("--json", type=Path, default=JSON)
    parser.add_argument("--write-docs", action="store_true",
                        help="render the tables into docs/learned.md between its markers")
    args = parser.parse_args()
    models = dict(BASES)
    for item in args.model:
        name, _, where = item.partition("=")
        if not where:
            parser.error(f"--model takes NAME=DIR[,DIR...], got {item!r}")
        models[name] = [Path(d).resolve() for d in where.split(",")]
    old = json.loads(args.json.read_text()) if args.json.is_file() else {"models": {}}
    cached = {r["model"]: r for entry in old["models"].values() for r in entry["runs"]}
    figures: dict[str, Any] = {
        "command": "python benchmarks/learned_out_of_kind.py " + " ".join(sys.argv[1:]),
        "slices": slice_notes(), "models": {}}
    for name, dirs in models.items():
        runs = []
        for d in dirs:
            where = str(d.relative_to(ROOT) if d.is_relative_to(ROOT) else d)
            runs.append(read_run(d, cached.get(where, {})))
            print(f"{name} {where}: {runs[-1]['pairs']}", flush=True)
        figures["models"][name] = {"runs": runs, "aggregate": aggregate(runs)}
    args.json.write_text(json.dumps(figures, indent=1))
    print(render_tables(figures))
    if args.write_docs:
        write_docs(figures)
        print(f"updated {DOCS}")


if __name__ == "__main__":
    main()
