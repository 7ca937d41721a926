"""The reward server's wire format, shared by the server and its clients: samples and Scores as
JSON values. Kept apart from both so the client needs no FastAPI and the server no HTTP client."""
from __future__ import annotations

from typing import Any

from rewardkit.dataio import json_default
from rewardkit.types import Sample, Score

__all__ = ["json_default", "sample_to_json", "score_from_json"]


def sample_to_json(sample: Sample) -> dict[str, Any]:
    """A Sample as one item of ``/v1/score``'s ``samples``."""
    return {"prompt": sample.prompt, "completion": sample.completion,
            "reference": sample.reference, "metadata": sample.metadata}


def score_from_json(d: dict[str, Any]) -> Score:
    """A Score from one item of ``/v1/score``'s ``scores`` (:meth:`Score.to_dict`'s form)."""
    return Score(float(d["value"]), dict(d.get("components") or {}), d.get("steps"),
                 d.get("uncertainty"), dict(d.get("info") or {}))
