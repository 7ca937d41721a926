"""Box metrics against outside oracles: pycocotools' IoU and COCOeval's AP, and GIoU/DIoU/CIoU
against the papers' formulas written out per box; degenerate boxes give defined values."""
import contextlib
import io
import math

import numpy as np
import pytest

pytest.importorskip("scipy")

from rewardkit.verifiers.iou import average_precision, box_metric, hungarian, pairwise, to_xyxy  # noqa: E402
from rewardkit.verifiers.iou.boxes import LOWER_BOUND  # noqa: E402

N = 12_000


def _random_xywh(rng, n, allow_zero=True):
    xy = rng.uniform(0, 100, size=(n, 2))
    wh = rng.uniform(0, 60, size=(n, 2))
    if allow_zero:
        wh[rng.random(n) < 0.02, 0] = 0.0  # some zero-width boxes
    return np.concatenate([xy, wh], axis=1)


def test_iou_matches_pycocotools_on_12000_random_pairs():
    mask = pytest.importorskip("pycocotools.mask")
    rng = np.random.default_rng(0)
    dt, gt = _random_xywh(rng, N), _random_xywh(rng, N)
    gt[: N // 2] = dt[: N // 2] + rng.normal(0, 5, size=(N // 2, 4)).clip(-4, 4)  # near misses
    gt[:, 2:] = np.abs(gt[:, 2:])
    ours = box_metric(to_xyxy(dt, "xywh"), to_xyxy(gt, "xywh"), "iou")
    theirs = np.array([mask.iou(dt[i:i + 1], gt[i:i + 1], [0])[0, 0] for i in range(N)])
    diff = np.abs(ours - theirs).max()
    print(f"IoU vs pycocotools, {N} pairs: max abs difference {diff:.3g}")
    assert diff < 1e-12
    assert (theirs > 0).sum() > N // 2  # the cases overlap often enough to mean something


def test_pairwise_matrix_matches_pycocotools():
    mask = pytest.importorskip("pycocotools.mask")
    rng = np.random.default_rng(1)
    dt, gt = _random_xywh(rng, 120), _random_xywh(rng, 100)
    ours = pairwise(to_xyxy(dt, "xywh"), to_xyxy(gt, "xywh"))
    theirs = mask.iou(dt, gt, [0] * 100)
    assert ours.shape == (120, 100)
    assert np.abs(ours - theirs).max() < 1e-12


def _paper_formulas(a, b):
    """GIoU (Rezatofighi et al. 2019), DIoU and CIoU (Zheng et al. 2020), one pair, plain math."""
    ax1, ay1, ax2, ay2 = a
    bx1, by1, bx2, by2 = b
    area_a = (ax2 - ax1) * (ay2 - ay1)
    area_b = (bx2 - bx1) * (by2 - by1)
    inter = max(0.0, min(ax2, bx2) - max(ax1, bx1)) * max(0.0, min(ay2, by2) - max(ay1, by1))
    union = area_a + area_b - inter
    iou = inter / union if union > 0 else 0.0
    c_w = max(ax2, bx2) - min(ax1, bx1)
    c_h = max(ay2, by2) - min(ay1, by1)
    giou = iou - (c_w * c_h - union) / (c_w * c_h)
    rho2 = ((ax1 + ax2) / 2 - (bx1 + bx2) / 2) ** 2 + ((ay1 + ay2) / 2 - (by1 + by2) / 2) ** 2
    diou = iou - rho2 / (c_w ** 2 + c_h ** 2)
    v = 4 / math.pi ** 2 * (math.atan((bx2 - bx1) / (by2 - by1))
                            - math.atan((ax2 - ax1) / (ay2 - ay1))) ** 2
    alpha = v / ((1 - iou) + v) if v > 0 else 0.0
    return giou, diou, diou - alpha * v


def test_giou_diou_ciou_match_the_papers_formulas_on_12000_pairs():
    rng = np.random.default_rng(2)
    a = to_xyxy(_random_xywh(rng, N, allow_zero=False) + [0, 0, 0.1, 0.1], "xywh")
    b = to_xyxy(_random_xywh(rng, N, allow_zero=False) + [0, 0, 0.1, 0.1], "xywh")
    expected = np.array([_paper_formulas(a[i], b[i]) for i in range(N)])
    worst = {}
    for k, metric in enumerate(("giou", "diou", "ciou")):
        worst[metric] = np.abs(box_metric(a, b, metric) - expected[:, k]).max()
    print("max abs difference vs the papers' formulas:", worst)
    assert max(worst.values()) < 1e-12
    assert (expected[:, 0] < 0).sum() > 100  # disjoint pairs, where GIoU differs from IoU


def test_conventions_convert_to_the_same_box():
    xyxy = np.array([[10.0, 20.0, 50.0, 80.0]])
    assert np.allclose(to_xyxy([[10, 20, 40, 60]], "xywh"), xyxy)
    assert np.allclose(to_xyxy([[30, 50, 40, 60]], "cxcywh"), xyxy)
    with pytest.raises(ValueError, match="unknown box format"):
        to_xyxy(xyxy, "yxyx")


@pytest.mark.parametrize("metric", ["iou", "giou", "diou", "ciou"])
def test_degenerate_boxes_give_defined_values(metric):
    good = np.array([0.0, 0.0, 10.0, 10.0])
    cases = {
        "nan": [np.nan, 0, 5, 5],
        "inf": [0, 0, np.inf, 5],
        "inverted": [10, 10, 0, 0],
        "huge": [0, 0, 1e200, 1e200],
    }
    for name, box in cases.items():
        value = float(box_metric(np.array(box, dtype=float), good, metric))
        assert math.isfinite(value), name
        if name != "huge":
            assert value == LOWER_BOUND[metric], name
    zero = np.array([5.0, 5.0, 5.0, 5.0])
    assert float(box_metric(zero, zero, "iou")) == 0.0  # empty union: defined as 0
    assert math.isfinite(float(box_metric(zero, zero, metric)))
    assert float(box_metric(good, good, metric)) == pytest.approx(1.0)


def test_hungarian_is_one_to_one_and_per_label():
    gold = np.array([[0, 0, 10, 10], [0, 0, 10, 9]], dtype=float)
    pred = np.array([[0, 0, 10, 10]], dtype=float)
    m = hungarian(pred, gold)
    assert len(m.values) == 1 and m.values[0] == 1.0
    # greedy per prediction would give both predictions the first gold box
    pred2 = np.array([[0, 0, 10, 9.5], [0, 0, 10, 10]], dtype=float)
    m2 = hungarian(pred2, gold)
    assert sorted(m2.gold.tolist()) == [0, 1]
    # labels: a perfect box with the wrong label is not matched to it
    m3 = hungarian(pred, gold[:1], pred_labels=["dog"], gold_labels=["cat"])
    assert len(m3.values) == 0


def _cocoeval_ap(dets, gts):
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    gt = COCO()
    gt.dataset = {"images": [{"id": 1}], "categories": [{"id": 1}],
                  "annotations": [{"id": i + 1, "image_id": 1, "category_id": 1, "bbox": list(b),
                                   "area": float(b[2] * b[3]), "iscrowd": 0}
                                  for i, b in enumerate(gts)]}
    with contextlib.redirect_stdout(io.StringIO()):
        gt.createIndex()
        dt = gt.loadRes([{"image_id": 1, "category_id": 1, "bbox": list(b), "score": float(s)}
                         for b, s in dets])
        ev = COCOeval(gt, dt, "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return ev.stats[0]


def test_map_matches_cocoeval_on_random_images():
    pytest.importorskip("pycocotools")
    rng = np.random.default_rng(3)
    diffs = []
    for _ in range(25):
        n_gold, n_pred = rng.integers(1, 6), rng.integers(1, 8)
        gts = _random_xywh(rng, n_gold, allow_zero=False) + [0, 0, 5, 5]
        # predictions: jittered gold boxes plus random ones, distinct scores
        base = gts[rng.integers(0, n_gold, size=n_pred)]
        preds = base + rng.normal(0, 3, size=base.shape) * [1, 1, 0.5, 0.5]
        preds[:, 2:] = np.abs(preds[:, 2:]) + 1
        scores = rng.permutation(n_pred) / n_pred + 0.01
        ours = average_precision(to_xyxy(preds, "xywh"), to_xyxy(gts, "xywh"), scores)
        theirs = _cocoeval_ap(list(zip(preds, scores)), gts)
        diffs.append(abs(ours - theirs))
    print(f"mAP vs COCOeval, 25 images: max abs difference {max(diffs):.3g}")
    assert max(diffs) < 1e-9
