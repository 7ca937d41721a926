"""Options of the math verifier, as one frozen dataclass, and named presets.

Every option is documented on :class:`MathOptions`; ``docs/math.md`` explains when to change each.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

#: Extraction sources, strongest first. The first source that finds anything decides the answer.
SOURCES = ("boxed", "answer_tag", "gsm8k", "answer_phrase", "choice", "last_number", "last_math")


@dataclass(frozen=True)
class MathOptions:
    """How answers are extracted, compared and bounded.

    Attributes:
        boxed: read ``\\boxed{...}`` / ``\\fbox{...}`` (nested braces). Every box counts: two boxes
            with different values are *conflicting*.
        answer_tag: read ``<answer>...</answer>`` (the last one).
        gsm8k: read the GSM8K marker ``#### 72`` (the last one).
        answer_phrase: read "the (final) answer is ..." / "Answer: ..." (the last one).
        choice: when the gold is a multiple-choice letter (``B``, ``(B)``), also accept a
            completion whose only cue is a letter such as "(B)" as its last parenthesised letter.
        last_number: fall back to the last number in the completion when no other source found
            an answer. Off by default (it rewards answers that were never stated); the ``gsm8k``
            preset turns it on.
        last_math: fall back to the last inline or display math (``$9$``, ``\\[9\\]``,
            ``$$9$$``) when no other source found an answer; with ``last_number`` too, whichever
            comes last in the text. On in the ``eval`` preset.
        final_form: a prediction must be a final value, not an expression left for the grader to
            evaluate (``123 \\cdot 456``, ``3+4``, ``2^{10}``, ``\\sqrt{16}``, ``\\frac{84}{2}``
            score 0.0). Applied only when the gold itself is in final form. On by default: in RL
            the policy otherwise learns to let the grader do its arithmetic.
        rel_tol: relative tolerance for comparing a decimal with a value it cannot represent
            exactly (``0.333333`` vs ``\\frac{1}{3}``, ``1.4142136`` vs ``\\sqrt{2}``). Exact
            values (integers, fractions, finite decimals) are compared exactly.
        strip_units: drop trailing units and words after a number (``5 \\text{ cm}``,
            ``12 apples``, ``\\$30``) to compare the value. The unit is kept: a known unit other
            than the one the gold or the problem names is another answer (:mod:`.units`).
        complex_i: read a lone ``i`` as the imaginary unit.
        timeout: CPU seconds the sympy path may spend on one sample (parsing + comparison);
            past it the sample scores 0.0 with reason ``timeout``. Counted as the worker's own
            CPU time, so a verdict does not depend on the machine's load or on queueing; a
            wall-clock backstop of ``10 * timeout + 10`` seconds ends a worker that makes no
            progress. Enforced by killing the worker process, so it holds from any thread.
        workers: worker processes for symbolic work (None: ``min(4, cpu count)``). Plain numbers
            never leave the calling process.
        memory_limit_mb: address-space limit of each worker process (``RLIMIT_AS``).
        max_answer_chars: longer extracted answers (or golds) are ``too_large``.
        max_completion_chars: longer completions are ``too_large`` without being read.
        max_depth: deeper nesting of brackets/braces is ``too_large``.
        max_digits: a number whose size is estimated above this many digits (power towers,
            factorials, long literals) is ``too_large``, detected before any evaluation.
    """

    boxed: bool = True
    answer_tag: bool = True
    gsm8k: bool = True
    answer_phrase: bool = True
    choice: bool = True
    last_number: bool = False
    last_math: bool = False
    final_form: bool = True
    rel_tol: float = 1e-6
    strip_units: bool = True
    complex_i: bool = True
    timeout: float = 1.0
    workers: int | None = None
    memory_limit_mb: int = 1024
    max_answer_chars: int = 1000
    max_completion_chars: int = 1_000_000
    max_depth: int = 20
    max_digits: int = 10_000

    def __post_init__(self) -> None:
        if not self.timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {self.timeout!r}")
        if not 0 <= self.rel_tol < 1:
            raise ValueError(f"rel_tol must be in [0, 1), got {self.rel_tol!r}")
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"workers must be >= 1 (or None for automatic), got {self.workers!r}")
        if self.memory_limit_mb < 256:
            raise ValueError(
                f"memory_limit_mb must be >= 256 (a worker needs room for sympy), got "
                f"{self.memory_limit_mb!r}"
            )
        for name in ("max_answer_chars", "max_completion_chars", "max_depth", "max_digits"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)!r}")

    @property
    def n_workers(self) -> int:
        return self.workers or max(1, min(4, os.cpu_count() or 1))

    def comparison_key(self) -> tuple[Any, ...]:
        """The options a worker needs to compare (hashable, picklable)."""
        return (self.final_form, self.rel_tol, self.strip_units, self.complex_i, self.choice,
                self.max_answer_chars, self.max_depth, self.max_digits)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: Named presets: ``MathVerifier(preset="gsm8k")`` or ``rewardkit.load("math", preset="gsm8k")``.
PRESETS: dict[str, MathOptions] = {
    # RL on MATH-style data: explicit answers only, final form required.
    "default": MathOptions(),
    # GSM8K: "#### 72" or a box; the last number is accepted when nothing else is stated.
    "gsm8k": MathOptions(last_number=True),
    # Grading a fixed evaluation set: accept unevaluated expressions that are equal in value, and
    # an answer given only as the last number or the last math of the text.
    "eval": MathOptions(final_form=False, last_number=True, last_math=True),
}

OPTION_NAMES = tuple(f.name for f in fields(MathOptions))


def make_options(preset: str = "default", **overrides: Any) -> MathOptions:
    """A preset with some options replaced; unknown names raise a TypeError listing the valid
    ones."""
    if preset not in PRESETS:
        raise ValueError(f"unknown math preset {preset!r}; choose one of {sorted(PRESETS)}")
    unknown = sorted(set(overrides) - set(OPTION_NAMES))
    if unknown:
        raise TypeError(
            f"unknown math option(s) {unknown}; valid options: preset, {', '.join(OPTION_NAMES)}"
        )
    return replace(PRESETS[preset], **overrides)
