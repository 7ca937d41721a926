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
    values: array = field(default_factory=lambda: array("d"))  # 8 bytes a row
    resumed: int = 0
    elapsed_s: float = 0.0
    already_complete: bool = False

    def add(self, value: Any, info: Mapping[str, Any]) -> None:
        self.count += 1
        if "error" in info:
            self.errors[str(info.get("error_kind") or "error")] += 1
        if isinstance(value, (int, float)) and not math.isnan(value):
            self.values.append(float(value))

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
            hist = self.histogram()
            top = max(c for _, c in hist)
            width = max(len(label) for label, _ in hist)
            lines.append("histogram:")
            for label, c in hist:
                lines.append(f"  {label:>{width}} | {'#' * round(30 * c / top):<30} {c}")
        total_errors = sum(self.errors.values())
        lines.append(f"errors: {total_errors}" + (
            " (" + ", ".join(f"{k}: {v}" for k, v in self.errors.most_common()) + ")"
            if total_errors else ""))
        return "\n".join(lines)
