"""Cutting a batch into forward passes by a measured per-pass cost: the plan is the cheapest
cut within the limits, the cost fit recovers what a pass costs, and scorers use both on CPU."""
from __future__ import annotations

import itertools
import random

import pytest

from rewardkit.models.encoding import token_budget_batches
from rewardkit.models.pass_plan import (MAX_FIXED_TOKENS, PassCost, forward_passes,
                                        plan_passes)


def _cost(lengths, passes, fixed):
    return sum(fixed + len(p) * max(max(1, lengths[i]) for i in p) for p in passes)


def _brute_force(lengths, fixed, batch_tokens, max_batch_size):
    """The cheapest cut of the longest-first order into contiguous passes, by trying all."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    best = None
    for cuts in itertools.product((False, True), repeat=len(order) - 1):
        passes, start = [], 0
        for k, cut in enumerate(cuts, 1):
            if cut:
                passes.append(order[start:k])
                start = k
        passes.append(order[start:])
        if any(len(p) > 1 and (len(p) * max(lengths[i] for i in p) > batch_tokens
                               or (max_batch_size and len(p) > max_batch_size))
               for p in passes):
            continue
        cost = _cost(lengths, passes, fixed)
        best = cost if best is None else min(best, cost)
    return best


@pytest.mark.parametrize("seed", range(40))
def test_the_plan_is_the_cheapest_cut_within_the_limits(seed):
    rng = random.Random(seed)
    lengths = [rng.choice([3, 5, 8, 8, 12, 20, 21, 40]) for _ in range(rng.randint(1, 10))]
    fixed = rng.choice([0.0, 4.0, 30.0, 200.0])
    batch_tokens = rng.choice([40, 100, 10**6])
    max_batch_size = rng.choice([None, 2, 3])
    passes = plan_passes(lengths, fixed, batch_tokens, max_batch_size)
    flat = [i for p in passes for i in p]
    assert sorted(flat) == list(range(len(lengths)))
    assert [lengths[i] for i in flat] == sorted(lengths, reverse=True)  # longest first
    for p in passes:
        width = max(lengths[i] for i in p)
        assert len(p) == 1 or width * len(p) <= batch_tokens
        assert max_batch_size is None or len(p) <= max_batch_size
    assert _cost(lengths, passes, fixed) == pytest.approx(
        _brute_force(lengths, fixed, batch_tokens, max_batch_size))


def test_a_costly_pass_keeps_a_batch_whole_and_a_free_one_cuts_it_by_length():
    lengths = [60, 58, 55, 40, 30, 30, 22]
    assert len(plan_passes(lengths, 10_000, 10**6)) == 1
    free = plan_passes(lengths, 0, 10**6)
    assert all(len({lengths[i] for i in p}) == 1 for p in free)  # no padding at all
    assert plan_passes([], 10, 100) == []
    assert plan_passes([500, 3], 0, 100) == [[0], [1]]  # a row over the budget is alone


def test_pass_cost_recovers_the_fixed_cost_of_a_pass_in_pad_tokens():
    cost = PassCost()
    rng = random.Random(0)
    assert cost.fixed_tokens is None
    for _ in range(60):  # 4 ms a pass + 0.04 ms a token, with 5% noise
        tokens = rng.randint(20, 3000)
        cost.observe(tokens, (0.004 + 0.00004 * tokens) * rng.uniform(0.95, 1.05))
    assert cost.fixed_tokens == pytest.approx(100, rel=0.25)


def test_pass_cost_pickles_with_what_it_has_measured():
    import pickle

    cost = PassCost()
    for tokens in (100, 400, 1600, 3200):
        cost.observe(tokens, 0.004 + 0.00004 * tokens)
    copy = pickle.loads(pickle.dumps(cost))
    assert copy.fixed_tokens == pytest.approx(cost.fixed_tokens)
    copy.observe(800, 0.036)  # and goes on measuring
    assert copy.passes == 5


def test_pass_cost_gives_no_estimate_it_cannot_fit():
    same = PassCost()
    for _ in range(20):
        same.observe(1000, 0.05)  # every pass the same size: no slope to read
    assert same.fixed_tokens is None
    few = PassCost(min_passes=4)
    few.observe(10, 0.01)
    few.observe(1000, 0.05)
    assert few.fixed_tokens is None
    backwards = PassCost()
    for tokens in (10, 100, 1000, 2000, 3000):  # bigger passes faster: noise, not a cost
        backwards.observe(tokens, 1.0 / tokens)
    assert backwards.fixed_tokens is None
    huge = PassCost()
    for tokens in (10, 20, 30, 40):
        huge.observe(tokens, 10.0 + 1e-6 * tokens)
    assert huge.fixed_tokens == MAX_FIXED_TOKENS
    for bad in (float("nan"), float("inf"), 0.0, -1.0):
        huge.observe(100, bad)
    assert huge.passes == 4


def test_forward_passes_times_each_pass_and_then_plans_by_the_fit():
    lengths = [50, 48, 47, 30, 29, 10, 9, 9]
    cost = PassCost(min_passes=2)
    first = list(forward_passes(lengths, 10**6, None, 0.1, cost))
    assert first == list(token_budget_batches(lengths, 10**6, None, 0.1))  # not measured yet
    assert cost.passes == len(first)
    cost = PassCost(min_passes=2)  # a machine where a pass costs nothing but its tokens
    for tokens in (100, 400, 800, 1600):
        cost.observe(tokens, tokens * 1e-5)
    planned = list(forward_passes(lengths, 10**6, None, 0.1, cost))
    assert planned == plan_passes(lengths, 0.0, 10**6)
    assert list(forward_passes(lengths, 10**6, None, None, None)) == [
        sorted(range(8), key=lambda i: -lengths[i])]  # no cost, no share: one pass


torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


def test_a_reward_model_on_cpu_times_its_passes_and_scores_as_in_one_pass(tmp_path):
    import rewardkit
    from rewardkit import Sample
    from rewardkit.testing import make_tiny_reward_model

    path = str(make_tiny_reward_model(tmp_path / "rm"))
    rng = random.Random(1)
    samples = [Sample("p", "x " * rng.randint(1, 60)) for _ in range(48)]
    auto = rewardkit.load("reward_model", model=path, device="cpu")
    assert auto.pass_cost is not None
    for k in range(0, 48, 8):
        auto.score(samples[k:k + 8])
    assert auto.pass_cost.passes >= 6  # every forward pass timed
    whole = rewardkit.load("reward_model", model=path, device="cpu", max_padding=None)
    assert whole.pass_cost is None
    assert [s.value for s in auto.score(samples)] == pytest.approx(
        [s.value for s in whole.score(samples)], abs=1e-4)
    assert rewardkit.load("reward_model", model=path, device="cpu",
                          max_padding=0.2).pass_cost is None


def test_a_reward_model_cuts_its_passes_by_the_measured_cost(tmp_path):
    import rewardkit
    from rewardkit import Sample
    from rewardkit.testing import make_tiny_reward_model

    scorer = rewardkit.load("reward_model", model=str(make_tiny_reward_model(tmp_path / "rm")),
                            device="cpu")
    samples = [Sample("p", "x " * n) for n in random.Random(2).sample(range(1, 41), 40)]
    lengths = [len(e.ids) for e in scorer.encode_many(samples)]
    rows_per_pass: list[int] = []
    forward = scorer.forward_logits
    scorer.forward_logits = lambda rows: rows_per_pass.append(len(rows)) or forward(rows)
    for fixed_s in (0.0, 1.0):  # a pass costs nothing but its tokens / far more than them
        scorer.pass_cost = PassCost(min_passes=2)
        scorer.pass_cost.observe(100, fixed_s + 100e-6)
        scorer.pass_cost.observe(1000, fixed_s + 1000e-6)
        expected = plan_passes(lengths, scorer.pass_cost.fixed_tokens, scorer.batch_tokens)
        rows_per_pass.clear()
        scorer.score(samples)
        assert rows_per_pass == [len(p) for p in expected]
    assert rows_per_pass == [40]  # one pass when a pass costs more than all the padding


def test_a_process_reward_model_plans_its_passes_and_scores_as_in_one_pass(tmp_path):
    import rewardkit
    from rewardkit import Sample
    from rewardkit.models.loading import ModelLoadError
    from rewardkit.testing import make_tiny_reward_model

    path = str(make_tiny_reward_model(tmp_path / "prm", head="token"))
    rng = random.Random(3)
    samples = [Sample("q", "\n\n".join("step " * rng.randint(1, 12)
                                       for _ in range(rng.randint(1, 4)))) for _ in range(24)]
    auto = rewardkit.load("process_reward", model=path, device="cpu")
    assert auto.pass_cost is not None
    for k in range(0, 24, 6):
        auto.score(samples[k:k + 6])
    assert auto.pass_cost.passes >= 4
    auto.pass_cost = PassCost(min_passes=2)  # a pass costs nothing: cut at every length
    auto.pass_cost.observe(100, 100e-6)
    auto.pass_cost.observe(1000, 1000e-6)
    whole = rewardkit.load("process_reward", model=path, device="cpu", max_padding=None)
    assert whole.pass_cost is None
    a, b = auto.score(samples), whole.score(samples)
    assert [s.steps for s in a] == [pytest.approx(s.steps, abs=1e-4) for s in b]
    for bad in (1.5, -0.1, True, "half"):
        with pytest.raises(ModelLoadError, match="max_padding must be a fraction"):
            rewardkit.load("process_reward", model=path, device="cpu", max_padding=bad)
