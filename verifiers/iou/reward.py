"""The ``iou`` reward: grounding and detection rewards for vision-language RL."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from rewardkit.scorer import RewardInputError, Scorer, require_reference
from rewardkit.types import Sample, Score

from .boxes import COORDS, FORMATS, METRICS, batched_pairwise, to_pixels, to_xyxy
from .matching import COCO_THRESHOLDS, average_precision, hungarian, linear_sum_assignment
from .parse import parse_boxes

MODES = ("mean", "hit_rate", "f1", "map", "confidence")

#: V-Triune's dynamic IoU threshold (Ma et al. 2025, arXiv:2505.18129): loose early, strict
#: later, as ``(fraction of training done, threshold)`` steps.
VTRIUNE_SCHEDULE = ((0.0, 0.85), (0.1, 0.95), (0.25, 0.99))


@dataclass(frozen=True)
class Gold:
    boxes: np.ndarray  # pixel xyxy (or the gold's own coordinates when no image size is known)
    labels: list[str] | None
    coords: str
    image_size: tuple[float, float] | None


def _image_size(value: Any, where: str) -> tuple[float, float] | None:
    if value is None:
        return None
    if isinstance(value, Mapping):
        value = (value.get("width"), value.get("height"))
    try:
        w, h = (float(v) for v in value)
    except (TypeError, ValueError):
        raise RewardInputError(f"{where} image_size must be [width, height], got {value!r}") from None
    if not (w > 0 and h > 0 and math.isfinite(w) and math.isfinite(h)):
        raise RewardInputError(f"{where} image_size must be two positive numbers, got {value!r}")
    return w, h


def _refuse_unmatchable(boxes: np.ndarray, given: np.ndarray, fmt: str) -> None:
    """A gold box no prediction can match — a coordinate that is not a finite number, or no
    area (``x2 <= x1`` or ``y2 <= y1`` in ``xyxy``, or one so large it overflows, which
    :mod:`.boxes` scores as the lower bound too) — is a broken reference, not a prediction
    worth the metric's lower bound: every completion of the prompt would get that value and
    a trainer would learn from a reward that says nothing (fail closed: the Score is an
    error)."""
    # Plain floats, not numpy: a sample has a few boxes, and this runs for every sample
    # scored (NaN compares False, inf - inf is NaN, an overflowing product is inf).
    for i, (x1, y1, x2, y2) in enumerate(boxes.tolist()):
        w, h = x2 - x1, y2 - y1
        if w > 0 and h > 0 and w * h < math.inf:
            continue
        box = given[i].tolist()
        if not all(map(math.isfinite, (x1, y1, x2, y2))):
            raise RewardInputError(f"reference box {i} {box} has a coordinate that is not a "
                                   "finite number")
        if w > 0 and h > 0:
            raise RewardInputError(f"reference box {i} {box} has an area too large for "
                                   "float64: no prediction can match it")
        raise RewardInputError(
            f"reference box {i} {box} has no area in format {fmt!r} (x2 <= x1 or y2 <= y1 in "
            "xyxy): no prediction can match it; fix the data or give the reference's format")


def read_gold(reference: Any, metadata: Mapping[str, Any] | None) -> Gold:
    """The gold boxes of a reference ``{"boxes": [...], "labels", "format", "coords",
    "image_size"}`` (a bare list of boxes is accepted too)."""
    ref = {"boxes": reference} if isinstance(reference, (list, tuple)) else reference
    if not isinstance(ref, Mapping) or "boxes" not in ref:
        raise RewardInputError(
            "the iou reward needs a reference {'boxes': [[x1, y1, x2, y2], ...], 'labels': "
            f"optional, 'format': 'xyxy', 'image_size': optional}}, got {type(reference).__name__}")
    raw = ref["boxes"]
    if isinstance(raw, (list, tuple)) and len(raw) == 4 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in raw):
        raw = [raw]  # one box given flat
    try:
        arr = np.asarray(raw, dtype=np.float64).reshape(-1, 4) if len(raw) else np.zeros((0, 4))
    except (TypeError, ValueError):
        raise RewardInputError(f"reference boxes must be lists of 4 numbers, got {str(raw)[:80]}") from None
    fmt = ref.get("format", "xyxy")
    if fmt not in FORMATS:
        raise RewardInputError(f"reference format {fmt!r} is not one of {FORMATS}")
    coords = ref.get("coords", "pixel")
    if coords not in COORDS:
        raise RewardInputError(f"reference coords {coords!r} is not one of {COORDS}")
    size = _image_size(ref.get("image_size"), "reference")
    if size is None and metadata:
        size = _image_size(metadata.get("image_size"), "metadata")
        if size is None and "width" in metadata and "height" in metadata:
            size = _image_size((metadata["width"], metadata["height"]), "metadata")
    labels = ref.get("labels")
    if labels is not None and len(labels) != len(arr):
        raise RewardInputError(f"reference has {len(arr)} boxes but {len(labels)} labels")
    boxes = to_xyxy(arr, fmt)
    _refuse_unmatchable(boxes, arr, fmt)
    if size is not None:
        boxes = to_pixels(boxes, coords, size)
        coords = "pixel"
    return Gold(boxes, [str(x) for x in labels] if labels is not None else None, coords, size)


class IoUReward(Scorer):
    """Grounding / detection reward: boxes parsed from the completion against gold boxes.

    Args:
        mode: ``mean`` (default): the mean ``metric`` of Hungarian-matched pairs over
            ``max(#predicted, #gold)``, so extra and missing boxes count 0; ``hit_rate``: the
            fraction of gold boxes matched with ``metric >= threshold``; ``f1``: F1 of those
            hits; ``map``: COCO-style mAP of the image over IoU 0.5:0.95; ``confidence``:
            Visual-RFT's confidence reward (Liu et al. 2025, arXiv:2503.01785), the mean over
            predicted boxes of ``c`` if the box hits a gold box, else ``1 - c``.
        metric: ``iou``, ``giou``, ``diou`` or ``ciou`` (matching and value).
        threshold: the hit threshold of ``hit_rate``, ``f1`` and ``confidence``.
        threshold_schedule: a dynamic threshold, as in V-Triune: ``"vtriune"`` or a list of
            ``[start, threshold]`` pairs; ``start`` is a fraction of ``total_steps`` (<= 1) or a
            step number. The step is read from ``metadata["step"]`` (or ``global_step``).
        total_steps: the length of training, for a fractional schedule (else
            ``metadata["total_steps"]``).
        pred_format: how the model writes boxes: ``xyxy``, ``xywh`` or ``cxcywh``.
        pred_coords: ``pixel``, ``normalized`` (0–1) or ``qwen1000`` (Qwen-VL's 0–1000 grid);
            the image size comes from the reference or ``metadata["image_size"]``.
        use_labels: match per label when the gold and every predicted box have labels.
        over_enumeration_penalty: subtracted as ``p · (#pred - #gold) / #pred`` when the model
            lists more boxes than exist (VLM-R1's object-detection reward punishes this too).
        empty_value: the value when both the gold and the completion have no boxes.
        max_boxes: boxes read from one completion at most.
    """

    name = "iou"

    def __init__(self, mode: str = "mean", metric: str = "iou", threshold: float = 0.5,
                 threshold_schedule: str | Sequence[Sequence[float]] | None = None,
                 total_steps: int | None = None, pred_format: str = "xyxy",
                 pred_coords: str = "pixel", use_labels: bool = True,
                 over_enumeration_penalty: float = 0.0, empty_value: float = 1.0,
                 max_boxes: int = 100, answer_tag: bool = True,
                 error_value: float = 0.0) -> None:
        if mode not in MODES:
            raise ValueError(f"iou mode must be one of {MODES}, got {mode!r}")
        if metric not in METRICS:
            raise ValueError(f"iou metric must be one of {METRICS}, got {metric!r}")
        if pred_format not in FORMATS:
            raise ValueError(f"pred_format must be one of {FORMATS}, got {pred_format!r}")
        if pred_coords not in COORDS:
            raise ValueError(f"pred_coords must be one of {COORDS}, got {pred_coords!r}")
        if not 0.0 <= float(threshold) <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {threshold}")
        if over_enumeration_penalty < 0:
            raise ValueError("over_enumeration_penalty must be >= 0")
        if max_boxes < 1:
            raise ValueError("max_boxes must be at least 1")
        if threshold_schedule == "vtriune":
            threshold_schedule = VTRIUNE_SCHEDULE
        self.schedule: list[tuple[float, float]] | None = None
        if threshold_schedule is not None:
            try:
                self.schedule = sorted((float(s), float(t)) for s, t in threshold_schedule)
            except (TypeError, ValueError):
                raise ValueError("threshold_schedule must be 'vtriune' or a list of "
                                 "[start, threshold] pairs") from None
            if not self.schedule:
                raise ValueError("threshold_schedule is empty")
        linear_sum_assignment()  # fail at build time, not on the first batch, without scipy
        self.mode, self.metric, self.threshold = mode, metric, float(threshold)
        self.total_steps = total_steps
        self.pred_format, self.pred_coords = pred_format, pred_coords
        self.use_labels = use_labels
        self.over_enumeration_penalty = float(over_enumeration_penalty)
        self.empty_value = float(empty_value)
        self.max_boxes = int(max_boxes)
        self.answer_tag = answer_tag
        self.error_value = error_value

    def threshold_at(self, metadata: Mapping[str, Any] | None) -> float:
        """The hit threshold for this sample: fixed, or from the schedule at its step."""
        if self.schedule is None:
            return self.threshold
        meta = metadata or {}
        step = meta.get("step", meta.get("global_step"))
        if step is None:
            raise RewardInputError("threshold_schedule needs the training step in "
                                   "metadata['step']")
        step = float(step)
        fractional = all(s <= 1.0 for s, _ in self.schedule)
        if fractional:
            total = self.total_steps or meta.get("total_steps")
            if not total:
                raise RewardInputError("a fractional threshold_schedule needs total_steps "
                                       "(option or metadata['total_steps'])")
            step = step / float(total)
        current = self.schedule[0][1]
        for start, thr in self.schedule:
            if step >= start:
                current = thr
        return current

    def score_batch(self, samples: list[Sample]) -> list[Score]:
        """Parse and convert each sample alone (a bad one becomes its error Score), then compute
        every metric matrix of the batch in one vectorised call."""
        prepared: list[Score | _Pending] = []
        for sample in samples:
            try:
                prepared.append(self._prepare(sample))
            except Exception as exc:  # noqa: BLE001 - the contract: errors become Scores
                prepared.append(Score.from_error(exc, self.error_value))
        pending = [p for p in prepared if isinstance(p, _Pending)]
        if pending and self.mode != "map":
            matrices = batched_pairwise([p.pred for p in pending], [p.gold for p in pending],
                                        self.metric)
        else:
            matrices = [None] * len(pending)
        done = iter(matrices)
        out = []
        for p in prepared:
            if isinstance(p, Score):
                out.append(p)
                continue
            try:
                out.append(self._finish(p, next(done)))
            except Exception as exc:  # noqa: BLE001
                out.append(Score.from_error(exc, self.error_value))
        return out

    def _prepare(self, sample: Sample) -> Score | _Pending:
        gold = read_gold(require_reference(sample, self.name), sample.metadata)
        threshold = self.threshold_at(sample.metadata)
        parsed = parse_boxes(sample.completion_text, self.max_boxes, answer_tag=self.answer_tag)
        info: dict[str, Any] = {"n_pred": len(parsed), "n_gold": len(gold.boxes)}
        if self.schedule is not None:
            info["threshold"] = threshold
        if not parsed:
            if not len(gold.boxes):
                return Score(self.empty_value, info=info)
            return Score(0.0, info={**info, "reason": "no boxes found in the completion"})
        pred = to_xyxy(np.array([p.box for p in parsed]), self.pred_format)
        if self.pred_coords != gold.coords:
            if gold.image_size is None:
                raise RewardInputError(
                    f"predictions are in {self.pred_coords} coordinates and the gold in "
                    f"{gold.coords}; give image_size in the reference or metadata")
            pred = to_pixels(pred, self.pred_coords, gold.image_size)
        if not len(gold.boxes):
            return Score(0.0, info={**info, "reason": "the gold has no boxes"})
        pred_labels = [p.label for p in parsed]
        labelled = self.use_labels and gold.labels is not None and all(pred_labels)
        info["labels_used"] = labelled
        return _Pending(pred, gold.boxes, pred_labels if labelled else None,
                        gold.labels if labelled else None, [p.confidence for p in parsed],
                        threshold, info)

    def _finish(self, p: _Pending, matrix: np.ndarray | None) -> Score:
        value = self._value(p, matrix)
        n_pred, n_gold = len(p.pred), len(p.gold)
        if self.over_enumeration_penalty and n_pred > n_gold:
            penalty = self.over_enumeration_penalty * (n_pred - n_gold) / n_pred
            p.info["over_enumeration_penalty"] = penalty
            value -= penalty
        return Score(float(value), info=p.info)

    def _value(self, p: _Pending, matrix: np.ndarray | None) -> float:
        n_pred, n_gold = len(p.pred), len(p.gold)
        if self.mode == "map":
            c = [x if x is not None else -i * 1e-9 for i, x in enumerate(p.conf)]  # listing order
            return average_precision(p.pred, p.gold, c, p.pred_labels, p.gold_labels,
                                     COCO_THRESHOLDS) or 0.0
        m = hungarian(p.pred, p.gold, self.metric, p.pred_labels, p.gold_labels, matrix)
        p.info["matched"] = [round(float(v), 6) for v in m.values]
        if self.mode == "mean":
            return float(m.values.sum()) / max(n_pred, n_gold)
        hits = m.values >= p.threshold
        if self.mode == "hit_rate":
            return float(hits.sum()) / n_gold
        if self.mode == "f1":
            return 2.0 * float(hits.sum()) / (n_pred + n_gold)
        # confidence (Visual-RFT)
        if any(c is None for c in p.conf):
            p.info["reason"] = "confidence mode needs a confidence for every box"
            return 0.0
        hit_pred = set(m.pred[hits].tolist())
        c = np.clip(np.asarray(p.conf, dtype=np.float64), 0.0, 1.0)
        return float(np.mean([c[i] if i in hit_pred else 1.0 - c[i] for i in range(n_pred)]))


@dataclass
class _Pending:
    """A sample parsed and converted, waiting for its metric matrix."""

    pred: np.ndarray
    gold: np.ndarray
    pred_labels: list | None
    gold_labels: list | None
    conf: list[float | None]
    threshold: float
    info: dict[str, Any]
