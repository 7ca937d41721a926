"""Grounding and detection rewards for vision-language RL: parse boxes from model text, match
them one-to-one with the gold (Hungarian, per label) and score IoU / GIoU / DIoU / CIoU, hit
rate, F1, mAP or Visual-RFT's confidence reward. ``rewardkit.load("iou", mode=..., ...)``;
options are documented on :class:`IoUReward` and in ``docs/iou.md``.

Needs the ``iou`` extra (scipy).
"""
from .boxes import batched_pairwise, box_metric, pairwise, to_pixels, to_xyxy
from .matching import average_precision, hungarian
from .parse import ParsedBox, parse_boxes
from .reward import IoUReward, read_gold

__all__ = ["IoUReward", "ParsedBox", "average_precision", "batched_pairwise", "box_metric", "hungarian", "pairwise",
           "parse_boxes", "read_gold", "to_pixels", "to_xyxy"]
