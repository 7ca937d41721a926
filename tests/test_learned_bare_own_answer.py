"""``benchmarks/learned_bare_own_answer.py``: bare pairs split by what the model's own solution
ended on, each part's pairs counted with how many the reward ranked right."""
from __future__ import annotations

from pathlib import Path

import pytest

from rewardkit.models.data import Pair
from rewardkit.types import Score
from tests.conftest import load_script

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    return load_script(ROOT / "benchmarks" / "learned_bare_own_answer.py",
                       "learned_bare_own_answer")


def _own(value: float, own: str) -> Score:
    return Score(value, info={"own_answers": [own]})


def test_pairs_are_split_by_the_models_own_answer_and_counted_as_ranked(bench):
    rows = [Pair("p", "97", "96"), Pair("p", "97", "96"), Pair("p", "50", "60"),
            Pair("p", "12", "13"), Pair("p", "12", "13")]
    chosen = [_own(-1.0, "97"), _own(-5.0, "97"), _own(-1.0, "60"), _own(-1.0, "14"),
              Score(0.0, info={"own_answers": ["12"], "error": "no own solution ended"})]
    rejected = [Score(-3.0), Score(-2.0), Score(-4.0), Score(-0.5), Score(-9.0)]
    split = bench.split_by_own_answer(rows, chosen, rejected)
    assert split == {"right": {"n": 3, "ranked": 1.0},   # the error Score counts as wrong
                     "wrong": {"n": 1, "ranked": 1.0},
                     "other": {"n": 1, "ranked": 0.0}}
    # a tie counts half, as in the pair accuracy
    tie = bench.split_by_own_answer(rows[:1], [_own(-2.0, "97")], [Score(-2.0)])
    assert tie["right"] == {"n": 1, "ranked": 0.5}


def test_rows_and_scores_of_different_lengths_are_refused(bench):
    with pytest.raises(ValueError):
        bench.split_by_own_answer([Pair("p", "1", "2")], [], [])
