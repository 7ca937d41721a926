"""benchmarks/learned_wider_base.py: the problems each ``--range`` learns from hold the ranges
docs/learned.md says that base saw, and none it calls held out."""
from __future__ import annotations

import collections
from pathlib import Path

import pytest

from tests.conftest import load_script

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]


def _script():
    return load_script(ROOT / "benchmarks" / "learned_wider_base.py", "learned_wider_base")


def test_the_whole_range_mixes_the_broad_range_with_each_wider_one_in_its_share():
    problems = _script().training_problems("whole", 1200, seed=0)
    shares = collections.Counter(pb.meta["part"] for pb in problems)
    assert [shares[i] for i in range(4)] == [600, 200, 200, 200]
    first = [pb.ops[0] for pb in problems]
    steps = [len(pb.ops) - 1 for pb in problems]
    small = [pb for pb in problems if pb.ops[0] <= 499 and len(pb.ops) <= 7
             and max(pb.ops[1:]) <= 99]
    assert len(small) >= 600  # the broad base's own range, half of what it learns from
    # the ranges of first_500_999, steps_7_8 and addends_100_999 are in it
    assert sum(500 <= x <= 999 for x in first) >= 200
    assert sum(s in (7, 8) for s in steps) >= 200
    assert sum(min(pb.ops[1:]) >= 100 for pb in problems) >= 200


def test_the_whole_range_keeps_first_numbers_past_999_and_the_spaced_format_out():
    problems = _script().training_problems("whole", 3000, seed=1)
    assert max(pb.ops[0] for pb in problems) <= 999
    assert not any(" + " in pb.prompt or " = " in pb.prompt for pb in problems)


def test_the_all_range_adds_first_numbers_past_999_and_the_spaced_format_in_a_sixth_each():
    problems = _script().training_problems("all", 1800, seed=0)
    shares = collections.Counter(pb.meta["part"] for pb in problems)
    assert [shares[i] for i in range(6)] == [600, 200, 200, 200, 300, 300]
    assert sum(pb.ops[0] >= 1000 for pb in problems) == 300
    spaced = [pb for pb in problems if pb.template == "spaced"]
    assert len(spaced) == 300
    # written as the spaced slice is: "12 + 7 + 30 =", every step "12 + 7 = 19"
    assert all(pb.prompt == " + ".join(map(str, pb.ops)) + " =" for pb in spaced)
    from rewardkit.models import arithmetic
    steps = arithmetic.worked_solution(spaced[0]).split("\n")
    assert steps == [s.replace("+", " + ").replace("=", " = ")
                     for s in arithmetic.solve(spaced[0].ops)]


def test_the_addends_probe_learns_only_3_digit_addends_in_the_slices_range():
    problems = _script().training_problems("addends", 1000, seed=0)
    assert all(100 <= x <= 999 for pb in problems for x in pb.ops[1:])
    assert all(1 <= pb.ops[0] <= 999 and 2 <= len(pb.ops) - 1 <= 6 for pb in problems)
    assert len({pb.template for pb in problems}) == 4


def test_no_range_learns_a_problem_of_a_shipped_file():
    script = _script()
    shipped = script.shipped_problems()
    for kind in ("wide", "whole", "all", "addends"):
        keys = {"+".join(map(str, pb.ops)) for pb in script.training_problems(kind, 2000, 0)}
        assert not keys & shipped, kind
