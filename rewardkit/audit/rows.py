"""The user's rows as the audit reads them: one :class:`AuditRow` per distinct (prompt,
reference), the right answer as text, and the kind of reward being audited."""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ..dataio import Source, detect_format, get_field, read_rows
from ..scorer import Scorer, is_missing
from .answers import as_fraction
from .code_families import reference_tests
from .families import KINDS, AuditRow

LEARNED = {"reward_model", "process_reward", "implicit_reward", "ensemble", "shaped"}
"""Registered names of learned rewards: audited with content-free perturbations."""


class AuditInputError(ValueError):
    """The data cannot be audited as asked (no reference, no answer); the message says which
    flag fixes it."""


@dataclass(frozen=True)
class RowFields:
    """Which fields hold the prompt, the reference the reward reads, and the right answer
    the families write in other forms (default: read from the reference)."""

    prompt: str = "prompt"
    reference: str = "reference"
    answer: str | None = None


def read_audit_rows(input_path: str, fields: RowFields, input_format: str | None = None,
                    split: str | None = None, subset: str | None = None) -> list[dict[str, Any]]:
    """The input's rows, each distinct (prompt, reference) once: the audit writes its own
    completions, so several rollouts of one prompt are one row to it."""
    source = Source(input_path, detect_format(input_path, input_format), split, subset)
    seen: set[str] = set()
    out: list[dict[str, Any]] = []
    for row in read_rows(source):
        key = json.dumps([_get(row, fields.prompt), _get(row, fields.reference)],
                         sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            out.append(row)
    return out


def _get(row: Mapping[str, Any], path: str) -> Any:
    try:
        return get_field(row, path)
    except KeyError:
        return None


def sample_rows(rows: list[dict[str, Any]], count: int | None, seed: int) -> list[dict[str, Any]]:
    """``count`` rows picked at random (seeded), in input order; all rows when None."""
    if count is None or count >= len(rows):
        return rows
    keep = sorted(random.Random(seed).sample(range(len(rows)), count))
    return [rows[i] for i in keep]


def reward_names(scorer: Scorer) -> set[str]:
    """The scorer's name and, for a composition, its members' names, nested."""
    names = {getattr(scorer, "name", "")}
    for component in getattr(scorer, "components", None) or []:
        names |= reward_names(component.scorer)
    for member in getattr(scorer, "members", None) or []:
        if isinstance(member, Scorer):
            names |= reward_names(member)
    return names


def detect_kind(scorer: Scorer, rows: Iterable[dict[str, Any]], fields: RowFields) -> str:
    """The kind of reward: by its (members') registered names, else by the references."""
    names = reward_names(scorer)
    if names & LEARNED:
        return "learned"
    for kind in ("code", "math"):
        if kind in names:
            return kind
    references = [_get(r, fields.reference) for r in rows]
    if any(reference_tests(r) for r in references):
        return "code"
    texts = [r for r in references if isinstance(r, str)]
    if texts and all(as_fraction(math_answer(t)) is not None or "\\" in t for t in texts):
        return "math"
    return "text"


def math_answer(reference: str) -> str:
    """The final answer in a math reference: after GSM8K's ``####``, else its last
    ``\\boxed{}``, else the text itself."""
    if "####" in reference:
        return reference.rsplit("####", 1)[1].strip()
    start = reference.rfind("\\boxed{")
    if start < 0:
        return reference.strip()
    depth, i = 0, start + len("\\boxed")
    for j in range(i, len(reference)):
        depth += {"{": 1, "}": -1}.get(reference[j], 0)
        if depth == 0:
            return reference[i + 1:j].strip()
    return reference.strip()


def to_audit_row(row: dict[str, Any], fields: RowFields, kind: str) -> AuditRow:
    """An :class:`AuditRow` of an input row; a row without what ``kind`` needs is an
    :class:`AuditInputError` naming the flag that maps it."""
    if kind not in KINDS:
        raise AuditInputError(f"unknown reward kind {kind!r}; choose one of {', '.join(KINDS)}")
    prompt = _get(row, fields.prompt)
    reference = _get(row, fields.reference)
    if prompt is None:
        prompt = ""
    if fields.answer is not None:
        answer = _get(row, fields.answer)
        if is_missing(answer):
            raise AuditInputError(f"field {fields.answer!r} is missing in a row (choose the field "
                                  "holding the right answer with --answer-field)")
        return AuditRow(prompt, reference, str(answer), row)
    if kind == "code":
        raise AuditInputError("a code audit needs a reference solution: name its field with "
                              "--answer-field (HumanEval: canonical_solution)")
    if isinstance(reference, (list, tuple)) and reference and isinstance(reference[0], str):
        reference_text = reference[0]
    elif isinstance(reference, (str, int, float)) and not is_missing(reference):
        reference_text = str(reference)
    else:
        raise AuditInputError(
            f"field {fields.reference!r} holds no reference text in a row (got "
            f"{type(reference).__name__}); choose it with --reference-field, or name the field "
            "holding the right answer with --answer-field")
    answer = math_answer(reference_text) if kind == "math" else reference_text
    return AuditRow(prompt, reference, answer, row)
