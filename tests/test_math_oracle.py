"""Agreement with outside material: Math-Verify's own test suite (restated in
data/math_verify_suite.jsonl), completions written as models write them
(data/math_realistic.jsonl), and a list of reward hacks (data/math_hacks.jsonl)."""
from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import pytest
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


_DELIMITED = re.compile(r"^\s*(?:\$\$?|\\\(|\\\[)(.*?)(?:\$\$?|\\\)|\\\])\s*$", re.DOTALL)


def _suite_scores(math_verifier, rows: list[dict], preset: str) -> list[float]:
    """Math-Verify's suite as its benchmark runs it: a bare answer boxed, the case's precision as
    ``rel_tol``, and Math-Verify's own 5-second budget as ``timeout``: this measures the rules,
    not the time limit (a few cases, e.g. sums of products, need about a CPU second; on a slow
    machine they passed the default 1 s and scored 0 with reason ``timeout``)."""
    cases = []
    for r in rows:
        text = r["prediction"]
        if r["bare"]:
            m = _DELIMITED.match(text)
            text = "\\boxed{" + (m.group(1) if m else text).replace("$", " ").strip() + "}"
        cases.append(dict(r, completion=text, options={"rel_tol": r["rel_tol"], "timeout": 5.0}))
    return _scores(math_verifier, cases, preset)


@pytest.mark.parametrize("preset,least", [("eval", 0.97), ("default", 0.90)])
def test_math_verify_suite_agrees_outside_documented_policy(math_verifier, preset, least):
    rows = _rows("math_verify_suite.jsonl")
    assert len(rows) >= 260
    scores = _suite_scores(math_verifier, rows, preset)
    policy = [r.get("policy") or (r.get("policy_default") if preset == "default" else None)
              for r in rows]
    wrong = [r["id"] for r, s, p in zip(rows, scores, policy) if s != r["expected"] and not p]
    assert wrong == []
    assert sum(s == r["expected"] for r, s in zip(rows, scores)) >= least * len(rows)


@pytest.mark.parametrize("preset", ["eval", "default"])
def test_every_policy_difference_is_documented_and_really_differs(math_verifier, preset):
    rows = _rows("math_verify_suite.jsonl")
    docs = (ROOT / "docs" / "math.md").read_text()
    names = {r["id"]: r.get("policy") or (r.get("policy_default") if preset == "default" else None)
             for r in rows}
    rows = [r for r in rows if names[r["id"]]]
    scores = _suite_scores(math_verifier, rows, preset)
    for row, score in zip(rows, scores):
        assert f"`{names[row['id']]}`" in docs, names[row["id"]]
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
