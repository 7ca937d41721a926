"""The arithmetic learned-reward data (rewardkit/models/arithmetic.py): a slip's direction and
digit position are drawn before the problem, so no slice leaves a direction shortcut."""
from __future__ import annotations

import collections
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from rewardkit.models import arithmetic  # noqa: E402
from rewardkit.models import arithmetic_out_of_kind as out_of_kind  # noqa: E402
from rewardkit.models.data import read_pairs  # noqa: E402
from rewardkit.models.heuristics import pair_heuristics  # noqa: E402

LEARNED = Path(__file__).resolve().parents[1] / "data" / "learned"


def _build(out: Path, *args: str) -> None:
    """``data/learned/build.py`` into ``out``: the data files and the broad base's problems,
    without training a base."""
    subprocess.run([sys.executable, str(LEARNED / "build.py"), "--out", str(out), "--no-base",
                    "--lm-spec", "broad", *args], check=True, capture_output=True)


def _rows(name: str, n: int = 600, seed: int = 0) -> list[dict]:
    spec = arithmetic.SLICES[name]
    return arithmetic.preference_rows(arithmetic.problem_stream(spec, seed), seed + 1, spec,
                                      name, n=n)


@pytest.mark.parametrize("name", ["in_distribution", "hundreds_slip", "units_slip",
                                  "larger_operands"])
def test_direction_is_balanced_within_every_digit_position(name):
    """A leading hundreds digit 1 cannot be slipped down; drawing the direction first and then
    the first position that could move made hundreds slips mostly upward."""
    rows = _rows(name)
    by_position = collections.defaultdict(collections.Counter)
    for r in rows:
        by_position[r["slip_position"]][r["direction"]] += 1
    for position, counts in by_position.items():
        share = counts["above"] / sum(counts.values())
        assert 0.4 < share < 0.6, (name, position, counts)


def test_no_trivial_rule_separates_the_hundreds_slip_slice(tmp_path):
    path = tmp_path / "hundreds.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _rows("hundreds_slip", n=800)))
    report = pair_heuristics(read_pairs(str(path)))["hundreds_slip"]
    assert set(report["defeats"]) == {"shorter", "longer", "smaller", "larger", "overlap"}, \
        {k: v["accuracy"] for k, v in report.items() if isinstance(v, dict)}


def test_a_slip_is_exactly_the_drawn_kind_and_wrong_only_at_its_step():
    rng = __import__("random").Random(0)
    ops = [152, 47, 90]            # sums 199, 289
    kind = arithmetic.SlipKind(up=False, position=2)
    steps, meta = arithmetic.slip(ops, kind, rng)
    assert meta == {"slip_step": 1, "slip_position": 2, "direction": "below"}  # 199 cannot
    left, result = steps[1].split("=")
    assert int(result) < 289 and str(int(result))[1:] == "89"   # only the hundreds digit
    assert arithmetic.slip([12, 5], kind, rng) is None          # no hundreds digit at all


def test_streams_give_exactly_n_rows_and_positions_follow_the_spec():
    rows = _rows("in_distribution", n=250)
    assert len(rows) == 250
    assert {r["slip_position"] for r in rows} == {0, 1, 2}
    assert arithmetic.Spec(start=(1, 30), addend_digits=(1,)).slip_positions() == (0, 1)
    assert arithmetic.SLICES["units_slip"].slip_positions() == (0,)


def _within(ops: list[int], spec: arithmetic.Spec) -> bool:
    return (spec.start[0] <= ops[0] <= spec.start[1]
            and spec.steps[0] <= len(ops) - 1 <= spec.steps[1]
            and all(len(str(x)) in spec.addend_digits for x in ops[1:]))


def test_a_mixture_holds_each_part_in_its_stated_share_and_draws_it_from_that_parts_spec():
    parts = [(arithmetic.TRAIN, 0.5), (arithmetic.SLICES["larger_operands"], 0.3),
             (arithmetic.SLICES["more_steps"], 0.2)]
    taken = {"1+2+3"}
    problems = arithmetic.mixed_problems(1000, parts, seed=3, exclude=taken)
    counts = collections.Counter(pb.meta["part"] for pb in problems)
    assert [counts[i] for i in range(3)] == [500, 300, 200]
    for pb in problems:
        assert _within(pb.ops, parts[pb.meta["part"]][0]), pb
    keys = ["+".join(map(str, pb.ops)) for pb in problems]
    assert len(set(keys)) == 1000 and "1+2+3" not in keys and set(keys) <= taken
    # shuffled together: every stretch of a tenth holds every part, as a training batch would
    assert all(len({pb.meta["part"] for pb in problems[i:i + 100]}) == 3
               for i in range(0, 1000, 100))


@pytest.mark.parametrize("shares", [(0.5, 0.4), (0.7, 0.7), (1.2, -0.2)])
def test_a_mixture_whose_shares_are_not_a_split_of_the_whole_is_refused(shares):
    parts = [(arithmetic.TRAIN, shares[0]), (arithmetic.SLICES["more_steps"], shares[1])]
    with pytest.raises(ValueError, match="add up to 1"):
        arithmetic.mixed_problems(10, parts, seed=0)


def _ops(solution: str) -> str:
    steps = solution.split("\n")
    return "+".join([steps[0].split("+")[0]] + [s.split("=")[0].split("+")[1] for s in steps])


def test_the_replay_file_holds_none_of_the_held_out_or_training_problems(tmp_path):
    """build.py --replay-rows: right solutions of the lm base's own problems, none shared with
    any other file (so replaying it never shows a held-out problem)."""
    _build(tmp_path, "--train", "300", "--test", "40", "--lm-problems", "500", "--replay-rows",
           "200")
    replay = [json.loads(line) for line in open(tmp_path / "lm_replay.jsonl")]
    assert len(replay) == 200 and set(replay[0]) == {"prompt", "completion"}
    others = set()
    for name in ("rm_train", "rm_test", "rm_slices"):
        others |= {_ops(json.loads(line)["chosen"]) for line in open(tmp_path / f"{name}.jsonl")}
    for name in ("prm_train", "prm_test", "prm_slices"):
        others |= {_ops("\n".join(json.loads(line)["completions"]))
                   for line in open(tmp_path / f"{name}.jsonl")}
    keys = [_ops(r["completion"]) for r in replay]
    assert not set(keys) & others
    for r in replay:  # the completion is the prompt's right worked solution
        ops = [int(x) for x in _ops(r["completion"]).split("+")]
        assert r["completion"] == "\n".join(arithmetic.solve(ops))
    # the broad spec: first numbers past the training data's 99 are in it
    assert max(int(k.split("+")[0]) for k in keys) > 99


def test_the_shipped_data_files_are_what_build_py_writes(tmp_path):
    """Every shipped reward and held-out file, and the broad base's replay file, come out of
    ``build.py`` byte for byte (the figures in docs/learned.md were measured on them)."""
    _build(tmp_path, "--replay-rows", "10000")
    for name in ("rm_train", "rm_test", "rm_slices", "prm_train", "prm_test", "prm_slices",
                 "rm_out_of_kind", "prm_out_of_kind"):
        assert (tmp_path / f"{name}.jsonl").read_bytes() == \
            (LEARNED / f"{name}.jsonl").read_bytes(), name
    assert (tmp_path / "lm_replay.jsonl").read_bytes() == \
        (LEARNED / "broad" / "lm_replay.jsonl").read_bytes()


def _jsonl(name: str) -> list[dict]:
    return [json.loads(line) for line in open(LEARNED / name)]


def test_out_of_kind_pairs_leave_every_trivial_rule_at_a_coin_in_both_forms():
    """Directions alternate and every result keeps its length, so per slice and form the
    length and size rules cannot tell at all (exactly 0.5)."""
    rows = _jsonl("rm_out_of_kind.jsonl")
    report = pair_heuristics(read_pairs(str(LEARNED / "rm_out_of_kind.jsonl")))
    subsets = {r["subset"] for r in rows}
    assert len(subsets) == 2 * len(out_of_kind.SLICES)
    for subset in subsets:
        assert report[subset]["shorter"]["n"] == 150
        for rule in ("shorter", "longer", "smaller", "larger"):
            assert report[subset][rule]["accuracy"] == 0.5, (subset, rule)
        assert abs(report[subset]["overlap"]["accuracy"] - 0.5) < 0.05, subset
    bare = [r for r in rows if r["form"] == "bare"]
    assert all(r["chosen"].isdigit() and r["rejected"].isdigit() for r in bare)


def _problem(row: dict) -> list[int]:
    steps = [s.replace(" ", "") for s in row["completions"]]
    return [int(x) for x in _ops("\n".join(steps)).split("+")]


def test_slices_named_in_range_are_in_the_broad_bases_range_and_the_others_are_not():
    """No slice the base learned from is called out of kind: the broad base saw first numbers
    1-499, addends of 1-2 digits, 2-6 steps, never spaced."""
    broad = arithmetic.LM_SPECS["broad"]
    for row in _jsonl("prm_out_of_kind.jsonl"):
        ops = _problem(row)
        inside = (broad.start[0] <= ops[0] <= broad.start[1] and all(x < 100 for x in ops[1:])
                  and broad.steps[0] <= len(ops) - 1 <= broad.steps[1]
                  and " + " not in row["prompt"])
        assert inside == row["in_range"] == out_of_kind.SLICES[row["subset"]].in_range, row


def test_each_mistake_is_the_kind_its_slice_names():
    for row in _jsonl("prm_out_of_kind.jsonl"):
        if row["label"] < 0:
            continue
        ops, at = _problem(row), row["label"]
        total = sum(ops[:at + 1])
        right, wrong = total + ops[at + 1], int(row["completions"][at].split("=")[1])
        kind = out_of_kind.SLICES[row["subset"]].mistake
        if kind == "units_off_1_3":
            assert 1 <= abs(wrong - right) <= 3 and wrong // 10 == right // 10
        elif kind == "carry":
            carries = total % 10 + ops[at + 1] % 10 >= 10
            assert wrong - right == (-10 if carries else 10)
        elif kind == "transposed":
            a, b = str(right), str(wrong)
            swapped = [i for i in range(len(a)) if a[i] != b[i]]
            assert len(swapped) == 2 and swapped[1] == swapped[0] + 1
            assert a[swapped[0]] == b[swapped[1]] and a[swapped[1]] == b[swapped[0]]
        else:
            differ = [i for i, (x, y) in enumerate(zip(str(right), str(wrong))) if x != y]
            assert len(str(right)) == len(str(wrong)) and len(differ) == 1
