"""Box geometry, vectorised with numpy: format and coordinate conversion, IoU, GIoU, DIoU, CIoU.

Every function works on arrays of shape ``(..., 4)`` and broadcasts, so one call computes a
whole ``N × M`` matrix (``a[:, None]`` against ``b[None, :]``) or ``N`` pairs at once.

Degenerate boxes never raise. A box is *invalid* when a coordinate is not finite or when
``x2 < x1`` or ``y2 < y1`` (after conversion to ``xyxy``); a pair involving an invalid box gets
the metric's lower bound (:data:`LOWER_BOUND`). Zero-area boxes are valid but have IoU 0 with
everything (the union of two zero-area boxes is empty, and 0/0 is defined as 0 here).
Coordinates so large that areas overflow float64 (above about 1e154) also give the lower bound.
"""
from __future__ import annotations

import numpy as np

FORMATS = ("xyxy", "xywh", "cxcywh")
METRICS = ("iou", "giou", "diou", "ciou")
COORDS = ("pixel", "normalized", "qwen1000")

#: Value of a pair involving an invalid box (or an overflow): the bottom of each metric's range.
LOWER_BOUND = {"iou": 0.0, "giou": -1.0, "diou": -1.0, "ciou": -1.0}


def to_xyxy(boxes: np.ndarray, fmt: str = "xyxy") -> np.ndarray:
    """Boxes in ``fmt`` (``xyxy``, ``xywh`` = COCO, ``cxcywh`` = DETR/YOLO) as float64 ``xyxy``."""
    b = np.asarray(boxes, dtype=np.float64)
    if b.shape[-1:] != (4,):
        raise ValueError(f"boxes must have 4 numbers each, got shape {b.shape}")
    if fmt == "xyxy":
        return b.copy()
    if fmt == "xywh":
        return np.concatenate([b[..., :2], b[..., :2] + b[..., 2:]], axis=-1)
    if fmt == "cxcywh":
        half = b[..., 2:] / 2
        return np.concatenate([b[..., :2] - half, b[..., :2] + half], axis=-1)
    raise ValueError(f"unknown box format {fmt!r}; use one of {FORMATS}")


def to_pixels(boxes: np.ndarray, coords: str, image_size: tuple[float, float] | None) -> np.ndarray:
    """``xyxy`` boxes in ``coords`` (``pixel``, ``normalized`` 0–1, Qwen-VL's ``qwen1000`` grid)
    as pixel coordinates of an image of ``image_size = (width, height)``."""
    if coords == "pixel":
        return boxes
    if coords not in COORDS:
        raise ValueError(f"unknown coordinate convention {coords!r}; use one of {COORDS}")
    if image_size is None:
        raise ValueError(f"{coords} coordinates need the image size: give `image_size: "
                         "[width, height]` in the reference or the sample's metadata")
    w, h = float(image_size[0]), float(image_size[1])
    grid = 1.0 if coords == "normalized" else 1000.0
    return boxes * np.array([w, h, w, h]) / grid


def _columns(boxes: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per box, computed once: x1, y1, x2, y2, width, height, area, validity."""
    b = np.asarray(boxes, dtype=np.float64)
    x1, y1, x2, y2 = (np.array(b[..., i]) for i in range(4))  # contiguous copies
    with np.errstate(all="ignore"):
        w, h = x2 - x1, y2 - y1
        valid = np.isfinite(b).all(-1) & (w >= 0) & (h >= 0)
        area = w * h
    return x1, y1, x2, y2, w, h, area, valid


def _metric(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...], metric: str) -> np.ndarray:
    ax1, ay1, ax2, ay2, wa, ha, area_a, valid_a = a
    bx1, by1, bx2, by2, wb, hb, area_b, valid_b = b
    with np.errstate(all="ignore"):
        # in-place steps: on millions of pairs, fewer temporaries is most of the speed
        inter = np.asarray(np.minimum(ax2, bx2))  # 0-d stays an array for out=
        inter -= np.maximum(ax1, bx1)
        np.maximum(inter, 0.0, out=inter)
        ih = np.asarray(np.minimum(ay2, by2))
        ih -= np.maximum(ay1, by1)
        np.maximum(ih, 0.0, out=ih)
        inter *= ih
        union = np.asarray(area_a + area_b)
        union -= inter
        positive = union > 0
        iou = np.divide(inter, union, out=np.zeros(union.shape), where=positive)
        if metric == "iou":
            out = iou
        else:
            cw = np.maximum(ax2, bx2) - np.minimum(ax1, bx1)
            ch = np.maximum(ay2, by2) - np.minimum(ay1, by1)
            if metric == "giou":
                c_area = cw * ch
                out = iou - np.where(c_area > 0,
                                     (c_area - union) / np.where(c_area > 0, c_area, 1.0), 0.0)
            else:
                diag = cw ** 2 + ch ** 2
                rho = ((ax1 + ax2 - bx1 - bx2) ** 2 + (ay1 + ay2 - by1 - by2) ** 2) / 4
                out = iou - np.where(diag > 0, rho / np.where(diag > 0, diag, 1.0), 0.0)
                if metric == "ciou":
                    # arctan2(w, h) is atan(w/h) for h > 0 and stays defined for h == 0
                    v = (4 / np.pi ** 2) * (np.arctan2(wb, hb) - np.arctan2(wa, ha)) ** 2
                    denom = (1 - iou) + v
                    alpha = np.where(denom > 0, v / np.where(denom > 0, denom, 1.0), 0.0)
                    out = out - alpha * v
        ok = valid_a & valid_b & np.isfinite(out)
    return np.where(ok, out, LOWER_BOUND[metric])


def box_metric(a: np.ndarray, b: np.ndarray, metric: str = "iou") -> np.ndarray:
    """``metric`` between ``xyxy`` boxes ``a`` and ``b`` (broadcast over leading dimensions).

    - IoU: intersection / union.
    - GIoU (Rezatofighi et al., CVPR 2019): ``IoU - (C - U) / C``, C the smallest enclosing box.
    - DIoU (Zheng et al., AAAI 2020): ``IoU - ρ² / c²``, ρ the distance between centres and c
      the diagonal of the enclosing box.
    - CIoU (same paper): ``DIoU - α v``, ``v = 4/π² (atan(w_b/h_b) - atan(w_a/h_a))²`` and
      ``α = v / ((1 - IoU) + v)``.
    """
    if metric not in METRICS:
        raise ValueError(f"unknown box metric {metric!r}; use one of {METRICS}")
    return _metric(_columns(a), _columns(b), metric)


def pairwise(a: np.ndarray, b: np.ndarray, metric: str = "iou") -> np.ndarray:
    """The ``len(a) × len(b)`` matrix of ``metric`` between two sets of ``xyxy`` boxes."""
    if metric not in METRICS:
        raise ValueError(f"unknown box metric {metric!r}; use one of {METRICS}")
    ca = _columns(np.asarray(a, dtype=np.float64).reshape(-1, 4))
    cb = _columns(np.asarray(b, dtype=np.float64).reshape(-1, 4))
    return _metric(tuple(c[:, None] for c in ca), tuple(c[None, :] for c in cb), metric)


def batched_pairwise(preds: list[np.ndarray], golds: list[np.ndarray],
                     metric: str = "iou", chunk: int = 1024) -> list[np.ndarray]:
    """Each sample's ``len(preds[i]) × len(golds[i])`` matrix, all computed in one vectorised
    call: per-sample numpy calls on a few boxes cost more in call overhead than in arithmetic."""
    if len(preds) != len(golds):
        raise ValueError(f"{len(preds)} prediction sets but {len(golds)} gold sets")
    if not preds:
        return []
    if len(preds) > chunk:  # bounded temporaries: a few MB per chunk stays in cache
        out: list[np.ndarray] = []
        for i in range(0, len(preds), chunk):
            out.extend(batched_pairwise(preds[i:i + chunk], golds[i:i + chunk], metric, chunk))
        return out
    p_n = np.fromiter((len(p) for p in preds), dtype=np.int64, count=len(preds))
    g_n = np.fromiter((len(g) for g in golds), dtype=np.int64, count=len(golds))
    if metric not in METRICS:
        raise ValueError(f"unknown box metric {metric!r}; use one of {METRICS}")
    cp = _columns(np.concatenate(preds, axis=0, dtype=np.float64).reshape(-1, 4))
    cg = _columns(np.concatenate(golds, axis=0, dtype=np.float64).reshape(-1, 4))
    # pair j of sample s pairs pred row r (repeated once per gold box of s) with gold box
    # (j - first pair of row r) + first gold box of s; built with repeat/arange, no division
    g_per_row = np.repeat(g_n, p_n)
    row_start = np.cumsum(g_per_row) - g_per_row
    gold_start = np.repeat(np.cumsum(g_n) - g_n, p_n)
    p_idx = np.repeat(np.arange(len(g_per_row)), g_per_row)
    g_idx = np.arange(int(g_per_row.sum())) + np.repeat(gold_start - row_start, g_per_row)
    ends = np.cumsum(p_n * g_n)
    need = range(8) if metric == "ciou" else (0, 1, 2, 3, 6, 7)  # widths only for CIoU
    flat = _metric(tuple(c[p_idx] if k in need else None for k, c in enumerate(cp)),
                   tuple(c[g_idx] if k in need else None for k, c in enumerate(cg)), metric)
    return [m.reshape(a, b) for m, a, b in zip(np.split(flat, ends[:-1]), p_n, g_n)]
