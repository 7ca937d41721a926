"""The batching-share benchmark (benchmarks/server_share.py) reads each side's rate from short
interleaved bursts, so that a machine whose speed drifts during a pair does not decide the
pair: checked on sides with known costs under a simulated drift."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import load_script

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def share():
    return load_script(ROOT / "benchmarks" / "server_share.py", "server_share")


class DriftingMachine:
    """Sides with a fixed cost a sample, on a machine that gets slower as time goes on: a burst
    started at time t takes cost × samples × (1 + t / slowdown)."""

    def __init__(self, costs: dict[str, float], slowdown: float) -> None:
        self.costs, self.slowdown, self.now = costs, slowdown, 0.0
        self.order: list[str] = []

    def side(self, name: str, samples: int):
        def burst() -> tuple[float, list[float]]:
            took = self.costs[name] * samples * (1 + self.now / self.slowdown)
            self.now += took
            self.order.append(name)
            return took, [0.0] * samples
        return burst


COSTS = {"in1": 4.0, "in64": 1.0, "off": 5.0, "on": 1.5}  # ceiling 4x, server gain 3.33x


def test_interleaved_pair_reads_the_true_ratios_on_a_drifting_machine(share):
    # the machine is about 2.5 times slower at the end of the pair than at its start
    machine = DriftingMachine(COSTS, slowdown=3000.0)
    bursts = {name: machine.side(name, 64) for name in COSTS}
    rates, each = share.measure_pair(bursts, rounds=4, burst=64)
    assert machine.now > 1.4 * 3000.0
    assert rates["in64"] / rates["in1"] == pytest.approx(4.0, rel=0.05)
    assert rates["on"] / rates["off"] == pytest.approx(5.0 / 1.5, rel=0.05)
    assert all(len(r) == 4 for r in each.values())
    # the same drift read one side after the other (each side's bursts in a row, as a side run
    # whole in its turn is) is off by a fifth or more: the interleaving is what holds the ratio
    machine = DriftingMachine(COSTS, slowdown=3000.0)
    seconds = {name: sum(machine.side(name, 64)()[0] for _ in range(4)) for name in COSTS}
    assert (seconds["in1"] / seconds["in64"]) / 4.0 < 0.85
    assert (seconds["off"] / seconds["on"]) / (5.0 / 1.5) < 0.85


def test_the_order_rotates_every_round(share):
    machine = DriftingMachine(COSTS, slowdown=1e9)
    share.measure_pair({name: machine.side(name, 64) for name in COSTS}, rounds=4, burst=64)
    rounds = [machine.order[i:i + 4] for i in range(0, 16, 4)]
    assert [r[0] for r in rounds] == ["in1", "in64", "off", "on"]
    assert all(sorted(r) == sorted(COSTS) for r in rounds)


def test_a_side_that_scores_the_wrong_number_of_samples_is_an_error(share):
    machine = DriftingMachine(COSTS, slowdown=1e9)
    bursts = {name: machine.side(name, 64 if name != "on" else 63) for name in COSTS}
    with pytest.raises(RuntimeError, match="on: 63 values for 64 samples"):
        share.measure_pair(bursts, rounds=1, burst=64)


def test_sides_that_score_differently_are_an_error(share):
    same = [0.1, 0.2, 0.3]
    share._check_same({"in1": same, "in64": same, "off": same, "on": same})
    with pytest.raises(AssertionError, match="off and on"):
        share._check_same({"in1": same, "in64": same, "off": same, "on": [0.1, 0.2, 0.4]})


@pytest.mark.parametrize("fastest, seconds, expected", [(900.0, 1.5, 1408), (60.0, 1.5, 256),
                                                       (171.0, 2.0, 384)])
def test_a_burst_lasts_the_given_seconds_on_the_fastest_side(share, fastest, seconds, expected):
    size = share.burst_size({"in1": 10.0, "on": fastest}, seconds)
    assert size == expected
    assert size % 64 == 0 and size >= share.MIN_BURST


def test_a_server_burst_is_read_at_its_steady_rate(share):
    # 64 slow responses while connections open and the first batch fills, 200 a second in the
    # middle, 64 slow ones while the last batch drains
    start = [0.05 * i for i in range(64)]
    middle = [start[-1] + 0.005 * (i + 1) for i in range(300)]
    end = [middle[-1] + 0.05 * (i + 1) for i in range(64)]
    assert share.steady_rate(start + middle + end, 64) == pytest.approx(200.0)
    with pytest.raises(ValueError, match="no steady part"):
        share.steady_rate(start + end, 64)
