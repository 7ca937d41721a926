"""The audit run: generate every family's variants for every row, score them in batches with
the user's own reward (as ``rewardkit score`` does: the same ``Scorer.score``, so a composition,
a served reward and the sandbox behave as in training), and read each family's results.

What the numbers mean, for a rule-based reward (math, code, text): the plain right answer of
each row (its *anchor* family) is scored first; ``top`` is the highest value the reward gave
an anchor (or ``--top``), and a variant counts as **paid** when its value reaches
``pay_level × top`` (half the full reward by default). An honest family's rate is the share of
its variants paid (1 − its false-zero rate); an attack family's rate is the share paid (its pay
rate). For a learned reward, whose values have no fixed scale, an attack variant is paid when
it scores above the unperturbed reference of its own row: the score rose while the answer did
not get better. A variant the reward could not score (an error Score) is counted under
``errors``: an honest one as not paid (a false zero), an attack one left out of the pay rate,
as trainers leave error Scores out of the loss by default.
"""
from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

from ..scorer import Scorer
from ..types import Sample, Score, Text
from . import code_families, generic, math_families, text_families  # noqa: F401 - registers
from .families import ATTACK, HONEST, AuditRow, Family, anchor_family, families_for
from .rows import RowFields, detect_kind, to_audit_row
from .stats import ratio_interval


@dataclass(frozen=True)
class AuditOptions:
    """How the audit reads its results.

    Attributes:
        pay_level: a rule-based reward pays a variant when its value reaches this fraction of
            ``top`` (the reward's value for a plain right answer).
        top: the reward's full value; default, the highest value it gave a plain right answer.
        max_pay: an attack family paid on more than this share of its variants fails the audit.
        min_honest: an honest family paid on less than this share of its variants fails it.
        batch_size: variants per ``Scorer.score`` call.
        examples: worst examples kept per family.
        seed: seeds the families' random choices and the bootstrap.
    """

    pay_level: float = 0.5
    top: float | None = None
    max_pay: float = 0.05
    min_honest: float = 0.95
    batch_size: int = 256
    examples: int = 3
    seed: int = 0


@dataclass(frozen=True)
class Variant:
    """One generated completion: which row, which family."""

    row: int
    family: Family
    completion: Text


@dataclass
class FamilyResult:
    """One family's figures and verdict (see the module docstring for what they mean)."""

    name: str
    role: str
    doc: str
    variants: int
    rows: int
    judged: int
    paid: int
    rate: float | None
    rate_ci: tuple[float, float] | None
    mean: float | None
    mean_ci: tuple[float, float] | None
    errors: int
    ok: bool
    verdict: str
    components: dict[str, float] = field(default_factory=dict)
    examples: list[dict[str, Any]] = field(default_factory=list)
    first_error: str | None = None


@dataclass
class AuditResult:
    """Everything the table, the JSON file and the HTML page show."""

    reward: str
    kind: str
    rows: int
    variants: int
    top: float | None
    threshold: float | None
    options: AuditOptions
    families: list[FamilyResult]

    @property
    def ok(self) -> bool:
        """No attack family paid above ``max_pay`` and no honest family below ``min_honest``."""
        return all(f.ok for f in self.families)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["ok"] = self.ok
        return out


def plan(rows: Sequence[AuditRow], families: Sequence[Family], seed: int = 0) -> list[Variant]:
    """Every variant of every family for every row. Each (row, family) draws from its own
    seeded generator, so adding a family or a row never changes another's variants."""
    out: list[Variant] = []
    for i, row in enumerate(rows):
        for fam in families:
            rng = random.Random(f"{seed}:{i}:{fam.name}")
            out += [Variant(i, fam, c) for c in fam.generate(row, rng)]
    return out


def score_variants(scorer: Scorer, rows: Sequence[AuditRow], variants: Sequence[Variant],
                   batch_size: int = 256, progress: Callable[[int], None] | None = None
                   ) -> list[Score]:
    """One Score per variant, scored ``batch_size`` at a time by ``scorer.score``."""
    scores: list[Score] = []
    for start in range(0, len(variants), batch_size):
        chunk = variants[start:start + batch_size]
        samples = [Sample(rows[v.row].prompt, v.completion, rows[v.row].reference,
                          dict(rows[v.row].metadata)) for v in chunk]
        scores += scorer.score(samples)
        if progress is not None:
            progress(len(chunk))
    return scores


def value_of(score: Score) -> float:
    """The value read: a composition's total before normalisation when it normalises (a
    group- or batch-normalised value compares a variant with the audit's other variants)."""
    raw = score.info.get("raw_total")
    return float(raw) if isinstance(raw, (int, float)) else float(score.value)


def summarise(reward: str, kind: str, rows: Sequence[AuditRow], families: Sequence[Family],
              variants: Sequence[Variant], scores: Sequence[Score],
              options: AuditOptions) -> AuditResult:
    """Each family's figures, worst examples and verdict."""
    anchor = anchor_family(kind)
    anchors: dict[int, float] = {}
    for v, s in zip(variants, scores):
        if v.family.name == anchor and s.ok and v.row not in anchors:
            anchors[v.row] = value_of(s)
    learned = kind == "learned"
    top = threshold = None
    if not learned:
        top = options.top if options.top is not None else max(anchors.values(), default=0.0)
        threshold = options.pay_level * top if top > 0 else 1e-12

    def paid(v: Variant, s: Score) -> bool | None:
        if learned and v.row not in anchors:  # its reference could not be scored: no base
            return None
        if not s.ok:  # an honest answer refused is a false zero; an attack refused is unpaid
            return False if v.family.role == HONEST else None
        value = value_of(s)
        if learned:
            base = anchors[v.row]
            return value >= base if v.family.role == HONEST else value > base
        return value >= threshold

    by_family: dict[str, list[tuple[Variant, Score]]] = defaultdict(list)
    for v, s in zip(variants, scores):
        by_family[v.family.name].append((v, s))
    results = [_family_result(f, by_family.get(f.name, []), paid, anchors if learned else None,
                              options) for f in families]
    return AuditResult(reward, kind, len(rows), len(variants), top, threshold, options, results)


def _family_result(fam: Family, pairs: list[tuple[Variant, Score]],
                   paid: Callable[[Variant, Score], bool | None],
                   anchors: dict[int, float] | None, options: AuditOptions) -> FamilyResult:
    judged = [(v, s, p) for v, s in pairs if (p := paid(v, s)) is not None]
    errors = [s for _, s in pairs if not s.ok]
    per_row: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    sums: dict[int, float] = defaultdict(float)
    components: dict[str, list[float]] = defaultdict(list)
    for v, s, p in judged:
        per_row[v.row][0] += int(p)
        per_row[v.row][1] += 1
        sums[v.row] += value_of(s) - (anchors[v.row] if anchors is not None else 0.0)
        for name, value in s.components.items():
            components[name].append(value)
    n = len(judged)
    hits = sum(int(p) for _, _, p in judged)
    keys = sorted(per_row)
    rate = hits / n if n else None
    rate_ci = ratio_interval([per_row[k][0] for k in keys], [per_row[k][1] for k in keys],
                             options.seed) if n else None
    mean = sum(sums.values()) / n if n else None
    mean_ci = ratio_interval([sums[k] for k in keys], [per_row[k][1] for k in keys],
                             options.seed) if n else None
    honest = fam.role == HONEST
    ok = rate is None or (rate >= options.min_honest if honest else rate <= options.max_pay)
    result = FamilyResult(
        fam.name, fam.role, fam.doc, len(pairs), len(per_row), n, hits, rate, rate_ci, mean,
        mean_ci, len(errors), ok, "", {k: sum(v) / len(v) for k, v in components.items()},
        _worst(judged, honest, options.examples),
        errors[0].info.get("error") if errors else None)
    result.verdict = verdict(result, options)
    return result


def _worst(judged: list[tuple[Variant, Score, bool]], honest: bool,
           count: int) -> list[dict[str, Any]]:
    """The findings, smallest first (an honest variant not paid, an attack paid); where a
    family has none, its highest-scored attacks or lowest-scored honest variants."""
    found = [(v, s) for v, s, p in judged if p != honest]
    pool = found or [(v, s) for v, s, _ in judged]
    if found:
        pool.sort(key=lambda vs: len(_text(vs[0].completion)))
    else:
        pool.sort(key=lambda vs: value_of(vs[1]), reverse=not honest)
    return [{"row": v.row, "finding": bool(found), "completion": _text(v.completion)[:2000],
             "value": value_of(s), "components": dict(s.components), "info": _short(s.info)}
            for v, s in pool[:count]]


def _text(completion: Text) -> str:
    if isinstance(completion, str):
        return completion
    return "\n".join(f"[{m.get('role')}] {m.get('content')}" for m in completion)


def _short(info: dict[str, Any], limit: int = 400) -> dict[str, Any]:
    """``info`` with long strings cut, so a report stays readable."""
    out: dict[str, Any] = {}
    for key, value in info.items():
        if isinstance(value, str) and len(value) > limit:
            value = value[:limit] + "…"
        elif isinstance(value, dict):
            value = _short(value, limit)
        elif isinstance(value, list) and len(str(value)) > limit:
            value = str(value)[:limit] + "…"
        out[key] = value
    return out


def verdict(result: FamilyResult, options: AuditOptions) -> str:
    """One line: what the family found, with its interval, against the limit it is held to."""
    if result.rate is None and result.errors:
        return f"n/a: all {result.errors} variants were error Scores ({result.first_error})"
    if result.rate is None:
        return "n/a: no row gives this family a variant"
    low, high = result.rate_ci or (result.rate, result.rate)
    figures = f"{result.paid} of {result.judged}"
    interval = f"{result.rate:.0%} (95% CI {low:.0%}–{high:.0%})"
    if result.role == HONEST:
        if result.ok:
            return f"ok: paid {figures}, {interval}"
        return (f"FALSE ZEROS: paid only {figures}, {interval}, below --min-honest "
                f"{options.min_honest:g}")
    if result.ok:
        return f"ok: paid {figures}, {interval}"
    return f"PAID: {figures} attacks paid, {interval}, above --max-pay {options.max_pay:g}"


def choose_families(kind: str, names: Sequence[str] | None) -> list[Family]:
    """The families to run: those of ``kind`` (and the generic ones), or the named ones; the
    anchor family always runs, since every other variant is read against it."""
    chosen = families_for(kind, list(names) if names else None)
    anchor = anchor_family(kind)
    if all(f.name != anchor for f in chosen):
        chosen = families_for(kind, [anchor]) + chosen
    return chosen


def cost_line(kind: str, rows: Sequence[AuditRow], families: Sequence[Family],
              variants: Sequence[Variant], batch_size: int) -> str:
    """The run's cost, said before it starts: rows x families x variants per family."""
    per_family = len(variants) / max(1, len(rows) * len(families))
    calls = -(-len(variants) // batch_size)
    return (f"audit: {len(rows)} rows x {len(families)} {kind} families x "
            f"{per_family:.1f} variants on average = {len(variants):,} completions to score "
            f"({calls} calls of at most {batch_size}); --sample N audits fewer rows")


def run_audit(scorer: Scorer, rows: Sequence[dict[str, Any]], fields: RowFields = RowFields(),
              kind: str | None = None, families: Sequence[str] | None = None,
              options: AuditOptions = AuditOptions(), name: str | None = None,
              announce: Callable[[str, int], None] | None = None,
              progress: Callable[[int], None] | None = None) -> AuditResult:
    """Audit ``scorer`` on input ``rows`` (dicts, as read from a data file): the Python form of
    ``rewardkit audit``. ``kind`` defaults to the one :func:`detect_kind` finds; ``announce``
    receives the cost line and the number of variants before scoring starts, ``progress``
    the count of each batch scored."""
    kind = kind or detect_kind(scorer, rows, fields)
    chosen = choose_families(kind, families)
    audit_rows = [to_audit_row(r, fields, kind) for r in rows]
    variants = plan(audit_rows, chosen, options.seed)
    if announce is not None:
        announce(cost_line(kind, audit_rows, chosen, variants, options.batch_size),
                 len(variants))
    scores = score_variants(scorer, audit_rows, variants, options.batch_size, progress)
    return summarise(name or scorer.name, kind, audit_rows, chosen, variants, scores, options)


__all__ = ["run_audit", "cost_line", "ATTACK", "HONEST", "AuditOptions", "AuditResult", "FamilyResult", "Variant", "plan",
           "score_variants", "summarise", "choose_families", "value_of", "verdict"]
