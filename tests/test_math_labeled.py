"""The math verifier agrees with every row of the labeled equivalence set."""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from rewardkit import Sample

DATA = Path(__file__).resolve().parents[1] / "data" / "math_equivalence.jsonl"
ROWS = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]


def test_labeled_set_is_large_and_covers_every_category():
    categories = {r["category"] for r in ROWS}
    assert len(ROWS) >= 300
    assert {"integer", "gsm8k", "fraction_decimal", "radical_pi", "notation_units",
            "complex_infinity", "set_interval", "inequality", "tuple_list", "matrix", "equation",
            "symbolic", "text", "multiple_choice", "extraction", "conflicting", "final_form",
            "pathological", "last_number"} <= categories
    assert {r["expected"] for r in ROWS} == {0, 1}


def test_verifier_agrees_with_every_label(math_verifier):
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in ROWS:
        groups[json.dumps(row["options"], sort_keys=True)].append(row)
    wrong = []
    for options, rows in groups.items():
        verifier = math_verifier(**json.loads(options))  # shared with the session's other tests
        scores = verifier.score([Sample("", r["completion"], r["gold"]) for r in rows])
        for row, score in zip(rows, scores):
            assert score.ok, (row["id"], score.info)
            if score.value != row["expected"] or (
                    "reason" in row and score.info.get("reason") != row["reason"]):
                wrong.append((row["id"], row["category"], row["gold"][:40], score.value,
                              score.info.get("reason")))
    assert wrong == [], f"{len(wrong)} of {len(ROWS)} rows disagree: {wrong[:10]}"
