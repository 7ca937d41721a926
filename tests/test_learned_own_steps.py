"""``benchmarks/learned_own_steps.py``: a model's own solutions read step by step against the
right chain, the chance of the next step given a right start, and whole chains solved."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import load_script

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    return load_script(ROOT / "benchmarks" / "learned_own_steps.py", "learned_own_steps")


def test_the_right_chain_is_built_from_every_number_of_the_prompt_in_order(bench):
    assert bench.chain("what is 81+705+780?") == ["81+705=786", "786+780=1566"]
    assert bench.chain("add 5 and 7 and 9:") == ["5+7=12", "12+9=21"]


def test_steps_are_counted_up_to_the_first_wrong_one_and_a_chain_is_solved_only_whole(bench):
    prompt = "81+705+780+12="
    right = "81+705=786\n786+780=1566\n1566+12=1578"
    assert bench.read_steps(prompt, right) == (3, 3, True)
    spaced = right.replace("786+", "786 + ")
    assert bench.read_steps(prompt, spaced) == (3, 3, True)
    # the second step wrong: two read, one right; what follows is not read
    assert bench.read_steps(prompt, "81+705=786\n786+780=1466\n1466+12=1478") == (2, 1, False)
    # an operand skipped is a wrong step
    assert bench.read_steps(prompt, "81+705=786\n786+12=798") == (2, 1, False)
    # stopped early: the first missing step is read and wrong
    assert bench.read_steps(prompt, "81+705=786\n786+780=1566") == (3, 2, False)
    # a step added after the right chain: every step right, the chain not solved
    assert bench.read_steps(prompt, right + "\n1578+1=1579") == (3, 3, False)
    assert bench.read_steps(prompt, "1578") == (1, 0, False)


def test_a_slice_is_summarised_as_solved_share_and_conditional_step_accuracy(bench):
    prompts = ["1+2+3=", "10+20+30="]
    got = bench.summarise(prompts, ["1+2=3\n3+3=6", "10+20=31\n31+30=61"])
    assert got == {"n": 2, "solved": 0.5, "step": 2 / 3, "steps_read": 3,
                   "steps_per_problem": 2.0}
    with pytest.raises(ValueError):
        bench.summarise(prompts, ["1+2=3"])


def test_every_slice_of_the_shipped_file_has_prompts_to_read(bench):
    from rewardkit.models.arithmetic_out_of_kind import SLICES

    for name in SLICES:
        prompts = bench.slice_prompts(name)
        assert len(prompts) == len(set(prompts)) > 100
