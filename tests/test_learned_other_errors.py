"""benchmarks/learned_other_errors.py builds the mistakes its docstring names, on problems
that are in no shipped file."""
from __future__ import annotations

import random
import re
from pathlib import Path

from tests.conftest import load_script

ROOT = Path(__file__).resolve().parents[1]


def _script():
    return load_script(ROOT / "benchmarks" / "learned_other_errors.py", "learned_other_errors")


def _steps(text: str) -> list[tuple[int, int, int]]:
    return [tuple(map(int, re.fullmatch(r"(\d+)\+(\d+)=(\d+)", s).groups()))
            for s in text.split("\n")]


def test_each_kind_is_the_mistake_it_names():
    script = _script()
    pairs = script.build_pairs(40, seed=5)
    assert {p.subset for p in pairs} == set(script.KINDS)
    for p in pairs:
        right, wrong = _steps(p.chosen), _steps(p.rejected)
        ops = list(map(int, re.findall(r"\d+", p.prompt)))
        assert all(a + b == c for a, b, c in right) and p.chosen != p.rejected
        bad = [i for i, (a, b, c) in enumerate(wrong) if a + b != c]
        if p.subset == "operand_skipped":
            assert not bad and len(wrong) == len(right) - 1
            assert sorted(b for _, b, _ in wrong) != sorted(ops[1:])
        elif p.subset == "operand_miscopied":
            assert not bad  # every sum right, one addend not the prompt's
            assert [b for _, b, _ in wrong] != ops[1:]
        else:
            assert len(bad) == 1  # one step wrong, later steps carry it on correctly
            a, b, c = wrong[bad[0]]
            if p.subset == "off_by_one":
                assert abs(c - (a + b)) == 1
            elif p.subset == "transposed":
                assert sorted(str(c)) == sorted(str(a + b))
            else:
                assert c == script.no_carry(a, b) and c != a + b


def test_no_problem_is_in_a_shipped_file():
    script = _script()
    shipped = script.shipped_problems()
    pairs = script.build_pairs(20, seed=1)
    assert not {"+".join(re.findall(r"\d+", p.prompt)) for p in pairs} & shipped


def test_no_carry_adds_digit_by_digit():
    script = _script()
    assert script.no_carry(58, 67) == 15 and script.no_carry(97, 8) == 95
    assert script.no_carry(12, 34) == 46
    rng = random.Random(0)
    for _ in range(50):
        a, b = rng.randint(0, 999), rng.randint(0, 99)
        assert script.no_carry(a, b) % 10 == (a + b) % 10
