"""IoU throughput: rewardkit's vectorised numpy vs a per-box Python loop vs pycocotools.

The work: N samples (default 10^5), each with 1–20 predicted and 1–20 gold boxes; compute every
sample's predicted × gold IoU matrix (what the `iou` reward matches on). Each contender does the
same work and the results are checked equal. Rounds alternate the order of the contenders; every
round is printed, then the medians and the ratios.

    python benchmarks/bench_iou.py [--samples 100000] [--rounds 3]

The peer named in the task, torchvision.ops.box_iou, is used too when torchvision imports.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from rewardkit.verifiers.iou.boxes import batched_pairwise, pairwise


def make_work(n: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        p, g = rng.integers(1, 21, size=2)
        xy = rng.uniform(0, 500, size=(p + g, 2))
        wh = rng.uniform(1, 200, size=(p + g, 2))
        boxes = np.concatenate([xy, xy + wh], axis=1)
        out.append((boxes[:p], boxes[p:]))
    return out


def python_loop(work):  # noqa: ANN001, ANN201
    """The straightforward version: one IoU at a time, plain floats."""
    out = []
    for pred, gold in work:
        pl, gl = pred.tolist(), gold.tolist()
        m = []
        for ax1, ay1, ax2, ay2 in pl:
            area_a = (ax2 - ax1) * (ay2 - ay1)
            row = []
            for bx1, by1, bx2, by2 in gl:
                iw = min(ax2, bx2) - max(ax1, bx1)
                ih = min(ay2, by2) - max(ay1, by1)
                inter = iw * ih if iw > 0 and ih > 0 else 0.0
                union = area_a + (bx2 - bx1) * (by2 - by1) - inter
                row.append(inter / union if union > 0 else 0.0)
            m.append(row)
        out.append(m)
    return out


def numpy_per_sample(work):  # noqa: ANN001, ANN201
    """rewardkit as the reward calls it: one broadcast matrix per sample."""
    return [pairwise(p, g) for p, g in work]


def numpy_batched(work):  # noqa: ANN001, ANN201
    """rewardkit on the whole batch: every (pred, gold) pair of every sample in one call."""
    return batched_pairwise([p for p, _ in work], [g for _, g in work])


def coco(work):  # noqa: ANN001, ANN201
    from pycocotools import mask

    out = []
    for p, g in work:
        pw = np.concatenate([p[:, :2], p[:, 2:] - p[:, :2]], axis=1)
        gw = np.concatenate([g[:, :2], g[:, 2:] - g[:, :2]], axis=1)
        out.append(mask.iou(pw, gw, [0] * len(gw)))
    return out


def torchvision_ops(work):  # noqa: ANN001, ANN201
    import torch
    from torchvision.ops import box_iou

    return [box_iou(torch.from_numpy(p), torch.from_numpy(g)).numpy() for p, g in work]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    work = make_work(args.samples)
    pairs = sum(len(p) * len(g) for p, g in work)
    print(f"{args.samples} samples, {pairs} box pairs")
    contenders = {"python loop": python_loop, "pycocotools": coco,
                  "rewardkit numpy per sample": numpy_per_sample,
                  "rewardkit numpy batched": numpy_batched}
    try:
        import torchvision.ops  # noqa: F401

        contenders["torchvision box_iou"] = torchvision_ops
    except Exception as exc:  # noqa: BLE001 - an optional peer
        print(f"torchvision not usable here ({type(exc).__name__}); skipped")
    reference = numpy_batched(work)
    for name, fn in contenders.items():
        got = fn(work[:2000])
        diff = max(float(np.abs(np.asarray(a) - b).max()) for a, b in zip(got, reference))
        print(f"  {name}: max abs difference vs rewardkit on 2000 samples {diff:.2e}")
    times: dict[str, list[float]] = {n: [] for n in contenders}
    names = list(contenders)
    for r in range(args.rounds):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            t0 = time.perf_counter()
            contenders[name](work)
            times[name].append(time.perf_counter() - t0)
        print(f"round {r + 1} ({'forward' if r % 2 == 0 else 'reverse'} order): "
              + ", ".join(f"{n} {times[n][-1]:.3f} s" for n in names))
    med = {n: statistics.median(t) for n, t in times.items()}
    base = med["rewardkit numpy batched"]
    print("\nmedian seconds, and how many times slower than rewardkit batched:")
    for n in names:
        print(f"  {n:28s} {med[n]:8.3f} s  {med[n] / base:7.2f}x  ({pairs / med[n] / 1e6:.1f} M pairs/s)")
    print(f"ratio python loop / rewardkit per sample: {med['python loop'] / med['rewardkit numpy per sample']:.2f}x")
    print(f"ratio pycocotools / rewardkit per sample: {med['pycocotools'] / med['rewardkit numpy per sample']:.2f}x")
    end_to_end(work[:10_000])


def end_to_end(work) -> None:  # noqa: ANN001
    """The whole `iou` reward (parse the text, match, score) on the first samples, for scale."""
    import json

    from rewardkit import Sample
    from rewardkit.verifiers.iou import IoUReward

    samples = [Sample("where?", json.dumps([{"bbox_2d": b} for b in p.round(1).tolist()]),
                      {"boxes": g.tolist()}) for p, g in work]
    reward = IoUReward()
    t0 = time.perf_counter()
    scores = reward.score(samples)
    dt = time.perf_counter() - t0
    assert all(s.ok for s in scores)
    print(f"\n`iou` reward end to end (JSON parse + Hungarian + value), {len(samples)} samples: "
          f"{dt:.3f} s, {len(samples) / dt:,.0f} samples/s")


if __name__ == "__main__":
    main()
