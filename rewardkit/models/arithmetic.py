"""Checkable data for learned rewards, from the project's arithmetic task, built so that no
cheap rule separates right from wrong.

A problem adds 3 to 5 numbers; its worked solution adds them one at a time, one step per line
(``"72+45=117"``, ``"117+8=125"``). A wrong solution has one slipped step: one digit of that
step's result is replaced by a larger or a smaller digit, and the later steps carry the wrong
value on correctly, so only the slipped step is wrong *locally* and a process reward model must
find it, as ProcessBench asks (Zheng et al. 2024). Labels follow Math-Shepherd/TRL: steps before
the slip are right, the slip and everything after it wrong.

Why the slips look like this: a reward model learns whatever separates its pairs most cheaply.
When every wrong answer was the right one +10, +20 or +30, "the smaller answer is better"
scored 0.66 and the model learned it. Here, by construction:

* the wrong answer is above or below the right one with probability ½ each;
* the slip's direction and digit position (units, tens, hundreds) are drawn uniformly
  *before* the problem is looked at, and a problem that cannot take them is dropped, so no
  position is safe to ignore and position says nothing about direction;
* a digit is replaced, never added or removed, so the slipped result keeps its length (a
  later sum carrying it may still cross a power of ten);
* operands range from 1 to 2 digits (running sums reach 3) and problems from 2 to 4 steps;
  the prompt comes in several templates.

Held-out *slices* (:data:`SLICES`) then move one thing at a time outside what training saw:
more steps, larger operands, templates never trained on. Their heuristic baselines
(:mod:`rewardkit.models.heuristics`) show which shortcut each slice defeats.
"""
from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

STEP_TOKEN = "<step>"
"""The step mark of the ``step_token`` layout in the arithmetic base models."""
TEMPLATE_WORDS = ("what", "is", "sum", "of", "add", "and", " ", ",", "?", ":")
"""Word tokens the base's tokenizer gets so prompts can come in several templates (the
arithmetic policy's own alphabet is digits and ``+-=``)."""
TRAIN_TEMPLATES = ("expr", "what_is", "sum_of")
HELD_OUT_TEMPLATES = ("add_and",)
SPACED_TEMPLATE = "spaced"
"""``"12 + 7 + 30 ="`` with steps ``"12 + 7 = 19"``: the out-of-kind ``spaced`` slice's format,
in no shipped base's data (a wider base may learn it, ``benchmarks/learned_wider_base.py``)."""
MAX_POSITIONS = 256
"""Positions of the base (RoPE: no learned position table); the longest sequence of the shipped
slices is 90 tokens (``more_steps``, prompt + completion + EOS), so none is cut."""


def spaced(text: str) -> str:
    """``"12+7=19"`` written ``"12 + 7 = 19"``."""
    return text.replace("+", " + ").replace("=", " = ").strip()


def render_prompt(ops: list[int], template: str) -> str:
    """The problem in one of the prompt templates."""
    expr = "+".join(map(str, ops))
    if template == "expr":
        return expr + "="
    if template == SPACED_TEMPLATE:
        return spaced(expr + "=")
    if template == "what_is":
        return f"what is {expr}?"
    if template == "sum_of":
        return "sum of " + ",".join(map(str, ops)) + ":"
    if template == "add_and":
        return "add " + " and ".join(map(str, ops)) + ":"
    raise ValueError(f"unknown template {template!r}")


@dataclass(frozen=True)
class Spec:
    """How the problems of one split or slice are drawn."""

    start: tuple[int, int] = (1, 99)
    """Range of the first number."""
    addend_digits: tuple[int, ...] = (1, 2)
    """Each addend has one of these digit counts (equally likely), then a uniform value."""
    steps: tuple[int, int] = (2, 4)
    """Range of the number of steps (operands − 1)."""
    templates: tuple[str, ...] = TRAIN_TEMPLATES
    direction: str = "both"
    """``both`` (half the wrong answers above, half below), ``above`` or ``below``."""
    positions: tuple[int, ...] | None = None
    """Digit positions a slip may hit (0 = units), drawn uniformly; None = every position the
    spec's largest sum has."""
    notes: str = ""

    def slip_positions(self) -> tuple[int, ...]:
        """The digit positions slips are drawn from."""
        if self.positions is not None:
            return self.positions
        largest = self.start[1] + self.steps[1] * (10 ** max(self.addend_digits) - 1)
        return tuple(range(len(str(largest))))


TRAIN = Spec(notes="in distribution: start 1-99, addends of 1-2 digits, 2-4 steps, "
                   "3 templates, slips above/below in every digit position")
SLICES: dict[str, Spec] = {
    "in_distribution": TRAIN,
    "more_steps": Spec(steps=(5, 6), notes="5-6 steps (training has 2-4)"),
    "larger_operands": Spec(start=(100, 499), addend_digits=(2,),
                            notes="first number 100-499 (training: 1-99), every addend 2 "
                                  "digits"),
    "held_out_template": Spec(templates=HELD_OUT_TEMPLATES,
                              notes="prompt 'add a and b and c:', never trained on"),
    "units_slip": Spec(positions=(0,), notes="the slip is in the units digit"),
    "hundreds_slip": Spec(positions=(2,), notes="the slip is in the hundreds digit"),
    "rejected_above": Spec(direction="above", notes="the wrong answer is larger"),
    "rejected_below": Spec(direction="below", notes="the wrong answer is smaller"),
}
"""Held-out slices: each moves one property away from training (or isolates one)."""
LM_SPECS: dict[str, Spec] = {
    "train": TRAIN,
    "broad": Spec(start=(1, 499), steps=(2, 6), templates=TRAIN_TEMPLATES + HELD_OUT_TEMPLATES,
                  notes="first number 1-499, 2-6 steps, all four templates: what the "
                        "larger_operands, more_steps and held_out_template slices move to"),
}
"""Problems whose right worked solutions a language-model base (``data/learned/lm_base``) is
trained on: ``train`` is the reward data's own distribution, so every slice stays held out from
the base too; ``broad`` covers the slices' distributions (never their problems), as a
pretrained LLM has seen more arithmetic than any reward data set holds."""


@dataclass
class Problem:
    ops: list[int]
    template: str
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def prompt(self) -> str:
        return render_prompt(self.ops, self.template)


def problem_stream(spec: Spec, seed: int, exclude: set[str] | None = None
                   ) -> Iterator[Problem]:
    """Distinct problems drawn as ``spec`` says, without end, none whose expression is in
    ``exclude``; each problem is added to ``exclude`` as it is drawn, so splits drawn in turn
    never share a problem."""
    rng = random.Random(seed)
    seen = exclude if exclude is not None else set()
    while True:
        n_steps = rng.randint(*spec.steps)
        ops = [rng.randint(*spec.start)]
        for _ in range(n_steps):
            digits = rng.choice(spec.addend_digits)
            ops.append(rng.randint(10 ** (digits - 1), 10 ** digits - 1))
        key = "+".join(map(str, ops))
        if key in seen:
            continue
        seen.add(key)
        yield Problem(ops, rng.choice(spec.templates))


def make_problems(n: int, spec: Spec, seed: int, exclude: set[str] | None = None
                  ) -> list[Problem]:
    """The first ``n`` problems of :func:`problem_stream`."""
    return list(itertools.islice(problem_stream(spec, seed, exclude), n))


def mixed_problems(n: int, parts: Sequence[tuple[Spec, float]], seed: int,
                   exclude: set[str] | None = None) -> list[Problem]:
    """``n`` distinct problems, each part's share of them drawn from its spec, shuffled
    together, ``meta["part"]`` the index of the part each came from. A base trained on them
    learns every range at once: trained on a wider range after the one it knew, it overwrote
    the small sums (docs/learned.md, out of kind). Counts are ``round(share * n)``, the last
    part taking the rest, so they add up to ``n``."""
    shares = [share for _, share in parts]
    if not parts or min(shares) < 0 or abs(sum(shares) - 1) > 1e-9:
        raise ValueError(f"a mixture's shares must be non-negative and add up to 1, got "
                         f"{shares}; give each part the fraction of the problems it should hold")
    counts = [round(share * n) for share in shares[:-1]]
    counts.append(n - sum(counts))
    if counts[-1] < 0:
        raise ValueError(f"shares {shares} of {n} problems round to more than {n}; give fewer "
                         "parts or more problems")
    seen = exclude if exclude is not None else set()
    problems = []
    for i, ((spec, _), count) in enumerate(zip(parts, counts)):
        for pb in make_problems(count, spec, seed + i, seen):
            pb.meta["part"] = i
            problems.append(pb)
    random.Random(seed).shuffle(problems)
    return problems


def worked_solution(pb: Problem) -> str:
    """The right worked steps of ``pb``, one a line, spaced when its template is."""
    steps = solve(pb.ops)
    if pb.template == SPACED_TEMPLATE:
        steps = [spaced(s) for s in steps]
    return "\n".join(steps)


def solve(ops: list[int], slip_at: int | None = None, delta: int = 0) -> list[str]:
    """The worked steps; with ``slip_at`` that step's result is off by ``delta`` and later
    steps carry it on."""
    total, steps = ops[0], []
    for i, x in enumerate(ops[1:]):
        result = total + x + (delta if i == slip_at else 0)
        steps.append(f"{total}+{x}={result}")
        total = result
    return steps


@dataclass(frozen=True)
class SlipKind:
    """What a slip will be, drawn before the problem is looked at."""

    up: bool
    """The wrong digit is larger (True) or smaller."""
    position: int
    """Digit position (0 = units)."""


def draw_slip_kind(rng: random.Random, spec: Spec = TRAIN) -> SlipKind:
    """A direction and a digit position, each uniform over what ``spec`` allows, drawn
    *before* any problem is seen: a problem that cannot take them is dropped, never given
    another kind, so direction and position stay independent of each other and of the
    problem (drawing the direction and then the first position that can move that way made
    hundreds slips mostly upward: a leading 1 cannot go down)."""
    up = rng.random() < 0.5 if spec.direction == "both" else spec.direction == "above"
    return SlipKind(up, rng.choice(spec.slip_positions()))


def digit_slip(value: int, kind: SlipKind, rng: random.Random) -> int | None:
    """``value`` with the digit at ``kind.position`` replaced by a uniformly drawn larger
    (``kind.up``) or smaller one; None when ``value`` has no such digit or it cannot move that
    way. The leading digit never becomes 0, so the length is kept."""
    digits = str(value)
    p = kind.position
    if p >= len(digits):
        return None
    d = int(digits[len(digits) - 1 - p])
    low = 1 if (p == len(digits) - 1 and len(digits) > 1) else 0
    choices = list(range(d + 1, 10)) if kind.up else list(range(low, d))
    if not choices:
        return None
    return value + (rng.choice(choices) - d) * 10 ** p


def slip(ops: list[int], kind: SlipKind, rng: random.Random
         ) -> tuple[list[str], dict[str, Any]] | None:
    """A wrong solution with a slip of ``kind`` at a step drawn uniformly from the steps that
    can take it, and what was slipped (step, digit position, direction); None when no step of
    this problem can take that kind."""
    at_order = list(range(len(ops) - 1))
    rng.shuffle(at_order)
    for at in at_order:
        right = sum(ops[:at + 2])
        wrong = digit_slip(right, kind, rng)
        if wrong is not None:
            return solve(ops, at, wrong - right), {
                "slip_step": at, "slip_position": kind.position,
                "direction": "above" if kind.up else "below"}
    return None


def _slipped(problems: Iterable[Problem], rng: random.Random, spec: Spec, n: int | None
             ) -> Iterator[tuple[Problem, tuple[list[str], dict[str, Any]]]]:
    """The first ``n`` (None: all) problems that can take the slip kind drawn for them, each
    with its slipped solution; a problem that cannot is dropped and the kind waits for the next
    problem."""
    if n is not None and n <= 0:
        return
    kind = draw_slip_kind(rng, spec)
    kept = 0
    for pb in problems:
        got = slip(pb.ops, kind, rng)
        if got is None:
            continue
        yield pb, got
        kept += 1
        if n is not None and kept >= n:
            return
        kind = draw_slip_kind(rng, spec)


def preference_rows(problems: Iterable[Problem], seed: int, spec: Spec = TRAIN,
                    slice_name: str | None = None, n: int | None = None
                    ) -> list[dict[str, Any]]:
    """TRL preference rows ``{prompt, chosen, rejected, subset}``: the right worked solution
    against one with a slip; ``n`` rows at most (with :func:`problem_stream`, exactly ``n``).
    ``subset`` is the slice name when given, else the step count."""
    rng = random.Random(seed)
    rows = []
    for pb, (wrong, meta) in _slipped(problems, rng, spec, n):
        right = solve(pb.ops)
        rows.append({"prompt": pb.prompt, "chosen": "\n".join(right),
                     "rejected": "\n".join(wrong),
                     "subset": slice_name or f"{len(right)}_steps", "template": pb.template,
                     **meta})
    return rows


def stepwise_rows(problems: Iterable[Problem], seed: int, spec: Spec = TRAIN,
                  slice_name: str | None = None, wrong_fraction: float = 0.5,
                  n: int | None = None) -> list[dict[str, Any]]:
    """TRL stepwise rows ``{prompt, completions, labels, label, subset}``, ``n`` at most;
    ``label`` is the index of the first wrong step or -1 (ProcessBench's field). Every kept problem could take
    its slip, whether it is then shown clean or slipped, so clean and wrong solutions come from
    the same problems."""
    rng = random.Random(seed)
    rows = []
    for pb, (wrong, meta) in _slipped(problems, rng, spec, n):
        is_wrong = rng.random() < wrong_fraction
        steps, at = (wrong, meta["slip_step"]) if is_wrong else (solve(pb.ops), -1)
        labels = [at == -1 or i < at for i in range(len(steps))]
        rows.append({"prompt": pb.prompt, "completions": steps, "labels": labels,
                     "label": at, "subset": slice_name or f"{len(steps)}_steps",
                     "template": pb.template})
    return rows


POLICY_DIR = Path(__file__).resolve().parents[2] / "data" / "arithmetic" / "policy"
"""The shipped arithmetic policy (``data/arithmetic/policy``), the default base."""


def make_base(out_dir: str | Path, policy_dir: str | Path | None = None) -> Path:
    """The shipped arithmetic policy with a tokenizer that also knows ``"\\n"`` (the step
    separator), :data:`STEP_TOKEN` and the template words, with room for
    :data:`MAX_POSITIONS` tokens, saved as a causal LM to start reward models from (``train
    rm|prm`` put a fresh classification head on it)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = Path(policy_dir) if policy_dir else POLICY_DIR
    tokenizer = AutoTokenizer.from_pretrained(source)
    tokenizer.add_tokens(["\n", *TEMPLATE_WORDS])
    tokenizer.add_tokens([STEP_TOKEN], special_tokens=True)
    tokenizer.model_max_length = MAX_POSITIONS
    model = AutoModelForCausalLM.from_pretrained(source)
    torch.manual_seed(0)  # the new embedding rows
    model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    model.config.max_position_embeddings = MAX_POSITIONS
    out = Path(out_dir)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
