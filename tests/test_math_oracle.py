"""Agreement with outside material: Math-Verify's own test cases (restated in
data/math_oracle_cases.jsonl), completions written as models write them
(data/math_realistic.jsonl), and a list of reward hacks (data/math_hacks.jsonl)."""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path


from rewardkit import Sample

ROOT = Path(__file__).resolve().parents[1]


def _rows(name: str) -> list[dict]:
    return [json.loads(x) for x in (ROOT / "data" / name).read_text().splitlines() if x.strip()]


def _scores(math_verifier, rows: list[dict], preset: str) -> list[float]:
    groups: dict[str, list[int]] = defaultdict(list)
    for k, r in enumerate(rows):
        groups[json.dumps(r.get("options", {}), sort_keys=True)].append(k)
    out = [0.0] * len(rows)
    for options, idx in groups.items():
        scores = math_verifier(preset=preset, **json.loads(options)).score([
            Sample(rows[k].get("prompt", ""), rows[k]["completion"], rows[k]["gold"]) for k in idx])
        for k, s in zip(idx, scores):
            assert s.ok, (rows[k]["id"], s.info)
            out[k] = s.value
    return out


def test_math_verify_suite_agreement_outside_documented_policy(math_verifier):
    rows = _rows("math_oracle_cases.jsonl")
    scores = _scores(math_verifier, rows, "eval")
    plain = [(r, s) for r, s in zip(rows, scores) if not r["policy"]]
    wrong = [r["id"] for r, s in plain if s != r["expected"]]
    assert len(plain) >= 150
    assert len(wrong) <= 0.05 * len(plain), wrong


def test_every_policy_difference_is_documented_and_really_differs(math_verifier):
    rows = [r for r in _rows("math_oracle_cases.jsonl") if r["policy"]]
    docs = (ROOT / "docs" / "math.md").read_text()
    scores = _scores(math_verifier, rows, "eval")
    for row, score in zip(rows, scores):
        assert f"`{row['policy']}`" in docs, row["policy"]
        assert score != row["expected"], row["id"]  # a policy row that agrees is no policy


def test_realistic_completions_agree_with_their_labels(math_verifier):
    rows = _rows("math_realistic.jsonl")
    assert len(rows) >= 200
    assert sum("<think>" in r["completion"] for r in rows) >= 30
    scores = _scores(math_verifier, rows, "default")
    assert [r["id"] for r, s in zip(rows, scores) if s != r["expected"]] == []


def test_every_hack_is_refused(math_verifier):
    rows = _rows("math_hacks.jsonl")
    scores = _scores(math_verifier, rows, "default")
    assert [r["kind"] for r, s in zip(rows, scores) if s != 0.0] == []
