"""The end-of-run summary of a scoring job: count, mean, std, histogram, errors by kind."""
from __future__ import annotations

import math
from array import array
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass
class Summary:
    """Streaming statistics over the rewards of a run (errors counted by ``error_kind``)."""

    reward: str
    count: int = 0
    errors: Counter = field(default_factory=Counter)
    error_examples: dict = field(default_factory=dict)  # error_kind -> its first message
    reasons: Counter = field(default_factory=Counter)  # why scored rows got what they got
    values: array = field(default_factory=lambda: array("d"))  # 8 bytes a row
    raw_totals: array = field(default_factory=lambda: array("d"))  # before normalisation
    resumed: int = 0
    elapsed_s: float = 0.0
    already_complete: bool = False

    def add(self, value: Any, info: Mapping[str, Any]) -> None:
        self.count += 1
        if "error" in info:
            kind = str(info.get("error_kind") or "error")
            self.errors[kind] += 1
            self.error_examples.setdefault(kind, str(info["error"])[:300])
        else:
            self._count_reasons(info)
        raw = info.get("raw_total")
        if isinstance(raw, (int, float)) and not math.isnan(raw):
            self.raw_totals.append(float(raw))
        if isinstance(value, (int, float)) and not math.isnan(value):
            self.values.append(float(value))

    def _count_reasons(self, info: Mapping[str, Any]) -> None:
        """Count verdict reasons (``too_large``, ``timeout``, ``unparsable``, ...): a row that was
        not read at all must show in the summary even though it is not an error. A composition
        keeps each component's info under the component's name."""
        reason = info.get("reason")
        if isinstance(reason, str):
            self.reasons[reason] += 1
        for name, sub in info.items():
            if isinstance(sub, Mapping) and isinstance(sub.get("reason"), str):
                self.reasons[f"{name}: {sub['reason']}"] += 1

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    @property
    def error_fraction(self) -> float:
        return self.error_count / self.count if self.count else 0.0

    @property
    def mean(self) -> float:
        return sum(self.values) / len(self.values) if self.values else float("nan")

    @property
    def std(self) -> float:
        n = len(self.values)
        if n < 2:
            return 0.0
        m = self.mean
        return math.sqrt(sum((v - m) ** 2 for v in self.values) / n)

    def histogram(self, bins: int = 10) -> list[tuple[str, int]]:
        """(label, count) pairs: one per distinct value when there are few, else equal bins."""
        if not self.values:
            return []
        distinct = Counter(self.values)
        if len(distinct) <= bins:
            return [(f"{v:g}", c) for v, c in sorted(distinct.items())]
        lo, hi = min(self.values), max(self.values)
        width = (hi - lo) / bins
        counts = [0] * bins
        for v in self.values:
            counts[min(int((v - lo) / width), bins - 1)] += 1
        return [(f"[{lo + i * width:.3g}, {lo + (i + 1) * width:.3g})", c)
                for i, c in enumerate(counts)]

    def to_dict(self) -> dict[str, Any]:
        return {"reward": self.reward, "count": self.count, "mean": self.mean, "std": self.std,
                "min": min(self.values) if self.values else None,
                "max": max(self.values) if self.values else None,
                "histogram": self.histogram(), "errors": dict(self.errors),
                "error_examples": dict(self.error_examples), "reasons": dict(self.reasons),
                "raw_total_mean": (sum(self.raw_totals) / len(self.raw_totals)
                                   if self.raw_totals else None),
                "resumed_rows": self.resumed, "elapsed_s": self.elapsed_s}

    def format(self) -> str:
        scored_now = self.count - self.resumed
        lines = [f"reward: {self.reward}"]
        if self.already_complete:
            lines.append("output already complete: nothing to do (use --overwrite to redo)")
        lines.append(f"rows: {self.count}" + (f" ({self.resumed} from an earlier run)"
                                               if self.resumed else ""))
        if self.elapsed_s and scored_now:
            lines.append(f"time: {self.elapsed_s:.2f} s ({scored_now / self.elapsed_s:,.0f} rows/s)")
        if self.values:
            lines.append(f"mean: {self.mean:.4f}  std: {self.std:.4f}  "
                         f"min: {min(self.values):g}  max: {max(self.values):g}")
            if self.raw_totals:
                lines.append(f"raw total (before normalisation) mean: "
                             f"{sum(self.raw_totals) / len(self.raw_totals):.4f}")
            hist = self.histogram()
            top = max(c for _, c in hist)
            width = max(len(label) for label, _ in hist)
            lines.append("histogram:")
            for label, c in hist:
                lines.append(f"  {label:>{width}} | {'#' * round(30 * c / top):<30} {c}")
        if self.reasons:
            lines.append("reasons: " + ", ".join(f"{k}: {v}" for k, v in self.reasons.most_common()))
        total_errors = self.error_count
        lines.append(f"errors: {total_errors}" + (
            " (" + ", ".join(f"{k}: {v}" for k, v in self.errors.most_common()) + ")"
            if total_errors else ""))
        for kind, _ in self.errors.most_common(3):
            lines.append(f"  first {kind}: {self.error_examples[kind]}")
        return "\n".join(lines)
