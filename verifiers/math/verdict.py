"""The verdict of one sample, decided in one place: :func:`decide`.

Given the gold and the completion's answers in normal form (stage 2), it applies what an answer
states before any value is compared (a tautology, a chain that asserts something false, another
unknown's value), compares each answer (stage 3: :mod:`.compare`, and :mod:`.symbolic` in a worker
when needed), combines several answers (all must hold, or the completion hedged), and refuses an
answer that restates the problem's own expression. The calling process runs it with no sympy
path and gets None when a worker is needed; the worker runs the very same function with the
sympy path plugged in, so a Score never depends on whether, or how many, workers ran.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from .cleaning import canonical_string
from .compare import compare
from .config import MathOptions
from .leftover import leftover_work
from .normal_form import PERCENT_QUESTION, Answer, Gold
from .restatement import restates_prompt
from .units import unit_mismatch
from .verdict_record import REASONS, verdict

__all__ = ["REASONS", "verdict", "decide", "combine"]

Compare = Callable[[Gold, Answer, MathOptions, bool], Optional[dict]]


def _statement_check(gold: Gold, answer: Answer, opts: MathOptions) -> dict[str, Any] | None:
    """What an equation states before its value is compared: ``b = 4`` against the gold
    ``a = 4`` gives another unknown; ``5 = 5`` is a tautology, no answer; and, where final
    values are required, a chain whose members differ (``x = 4 = 5``) asserts something false."""
    norm = answer.norm
    if answer.problem or "=" not in (norm.written or ""):
        return None
    shown = canonical_string(norm.written or norm.text)
    if norm.tautology:
        return verdict(False, "structural", shown, gold.shown,
                       detail="an equation whose sides are the same states no answer")
    if norm.chain_conflict and opts.final_form:
        return verdict(False, "structural", shown, gold.shown,
                       detail="an equation chain whose members have different values")
    if gold.norm.name is not None and norm.name is not None and norm.name != gold.norm.name:
        return verdict(False, "structural", f"{norm.name}={norm.text}", gold.raw,
                       detail=f"the answer gives {norm.name}, the question asks for "
                       f"{gold.norm.name}")
    return None


def combine(verdicts: list[dict[str, Any]]) -> dict[str, Any]:
    """One verdict from those of several distinct candidates: all must hold, or the completion
    hedged (``conflicting``). A single size problem decides for the whole completion."""
    if len(verdicts) == 1:
        return verdicts[0]
    for v in verdicts:
        if v.get("reason") in ("too_large", "timeout"):
            return v
    if all(v["equivalent"] for v in verdicts):
        return dict(verdicts[0], candidates=len(verdicts))
    return verdict(False, "structural", [v["pred_normalized"] for v in verdicts],
                   verdicts[0]["gold_normalized"], "conflicting",
                   detail=f"{len(verdicts)} different final answers")


def decide(gold: Gold, answers: list[Answer], opts: MathOptions, prompt: str = "",
           slow: Compare | None = None) -> dict[str, Any] | None:
    """The verdict over all distinct answers of a completion; None when some answer needs the
    sympy path (``slow``) and none was given."""
    percent_question = bool(prompt) and PERCENT_QUESTION.search(prompt[:20_000]) is not None
    verdicts = []
    for answer in answers:
        v = _statement_check(gold, answer, opts)
        if v is None:
            v = compare(gold, answer, opts, percent_question)
        if v is None:
            if slow is None:
                return None
            v = slow(gold, answer, opts, percent_question)
        if v["equivalent"] and (wrong_unit := unit_mismatch(answer.norm.unit, gold.norm.unit,
                                                            prompt)):
            v = verdict(False, "structural", v.get("pred_normalized"), v.get("gold_normalized"),
                        detail=wrong_unit)
        verdicts.append(v)
    result = combine(verdicts)
    if (result["equivalent"] and opts.final_form and len(answers) == 1
            and gold.kind in ("value", "structured")
            and (undone := leftover_work(answers[0].canonical, gold.canonical))):
        return verdict(False, "final_form", result.get("pred_normalized"),
                       result.get("gold_normalized"), detail=f"work left undone: {undone}")
    if (result["equivalent"] and opts.final_form and prompt and len(answers) == 1
            and gold.kind in ("value", "structured") and restates_prompt(prompt, answers[0], opts)):
        return verdict(False, "final_form", result.get("pred_normalized"),
                       result.get("gold_normalized"),
                       detail="the prediction restates an expression of the prompt instead of "
                       "evaluating it")
    return result
