"""Reading boxes from what a vision-language model writes.

Forms, tried in this order (the first that yields a box decides):

1. JSON anywhere in the text (code fences allowed): a list ``[x1, y1, x2, y2]``, a list of
   them, or objects such as Qwen2.5-VL's ``{"bbox_2d": [...], "label": "cat"}`` (keys ``bbox_2d``,
   ``bbox``, ``box``, ``boxes``, ``coordinates``; label from ``label``/``name``/``category``/
   ``class``; confidence from ``confidence``/``score``/``conf``);
2. Qwen-VL tags: ``<ref>cat</ref><box>(x1,y1),(x2,y2)</box>`` and Qwen2-VL's
   ``<|object_ref_start|>cat<|object_ref_end|><|box_start|>(x1,y1),(x2,y2)<|box_end|>``;
3. point pairs ``(x1, y1), (x2, y2)``;
4. bracketed quadruples ``[x1, y1, x2, y2]``, optionally preceded by ``label:``.

When the completion has an ``<answer>…</answer>`` block, only its last one is read (R1-style
outputs reason about other boxes first). Text longer than ``max_chars`` is cut; at most
``max_boxes`` boxes are read. All scanning is linear in the text length.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"  # unambiguous: no backtracking blow-up
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
_QWEN_TAG = re.compile(
    r"(?:(?:<ref>|<\|object_ref_start\|>)(?P<label>[^<]{0,200}?)(?:</ref>|<\|object_ref_end\|>)\s*)?"
    r"(?:<box>|<\|box_start\|>)(?P<body>[^<]{0,400}?)(?:</box>|<\|box_end\|>)")
_LABEL_WORDS = r"[A-Za-z][\w\-]{0,30}(?: [A-Za-z][\w\-]{0,30})?"  # one or two words
_PAIR = re.compile(rf"\(\s*({_NUM})\s*,\s*({_NUM})\s*\)\s*,?\s*\(\s*({_NUM})\s*,\s*({_NUM})\s*\)")
_QUAD = re.compile(rf"\[\s*({_NUM})\s*,\s*({_NUM})\s*,\s*({_NUM})\s*,\s*({_NUM})\s*\]")
_NUMS = re.compile(_NUM)
_OPEN = re.compile(r"[\[{]")
_LABEL_BEFORE = re.compile(rf"({_LABEL_WORDS})\s*[:=]\s*$")
_BOX_KEYS = ("bbox_2d", "bbox", "box", "boxes", "bbox_xyxy", "coordinates", "coords")
_LABEL_KEYS = ("label", "name", "category", "class", "object")
_CONF_KEYS = ("confidence", "score", "conf", "probability")


@dataclass(frozen=True)
class ParsedBox:
    """One box as written (4 numbers, convention not yet applied), with its label and
    confidence when the model gave them."""

    box: tuple[float, float, float, float]
    label: str | None = None
    confidence: float | None = None


def _number(x: Any) -> float | None:
    if type(x) is float or type(x) is int:  # the common case first; bool is excluded
        return float(x)
    if isinstance(x, str):
        try:
            return float(x.strip())
        except ValueError:
            return None
    return None


def _quad(x: Any) -> tuple[float, float, float, float] | None:
    if not isinstance(x, (list, tuple)) or len(x) != 4:
        return None
    a, b, c, d = x
    if all(type(v) is float or type(v) is int for v in x):
        return float(a), float(b), float(c), float(d)
    nums = [_number(v) for v in x]
    if all(n is not None for n in nums):
        return tuple(nums)  # type: ignore[return-value]
    return None


def _first(obj: dict, keys: tuple[str, ...], read: Any) -> Any:
    for k in keys:
        if k in obj:
            value = read(obj[k])
            if value is not None:
                return value
    return None


def _label(x: Any) -> str | None:
    return str(x) if isinstance(x, (str, int)) and not isinstance(x, bool) else None


def _from_json(obj: Any, out: list[ParsedBox], limit: int, depth: int = 0,
               label: str | None = None, conf: float | None = None) -> None:
    if len(out) >= limit or depth > 8:
        return
    if isinstance(obj, (list, tuple)):
        quad = _quad(obj)
        if quad is not None:
            out.append(ParsedBox(quad, label, conf))
            return
        for item in obj:
            _from_json(item, out, limit, depth + 1, label, conf)
        return
    if not isinstance(obj, dict):
        return
    lab = _first(obj, _LABEL_KEYS, _label) or label
    c = _first(obj, _CONF_KEYS, _number)
    c = conf if c is None else c
    for key in _BOX_KEYS:
        if key in obj:
            _from_json(obj[key], out, limit, depth + 1, lab, c)
            return
    if "x1" in obj and "y1" in obj and "x2" in obj and "y2" in obj:
        quad = _quad([obj["x1"], obj["y1"], obj["x2"], obj["y2"]])
        if quad is not None:
            out.append(ParsedBox(quad, lab, c))
        return
    for key, value in obj.items():  # {"cat": [x1, y1, x2, y2], ...}
        if isinstance(value, (list, tuple, dict)):
            _from_json(value, out, limit, depth + 1,
                       key if _quad(value) is not None else lab, c)


def _label_before(text: str, pos: int) -> str | None:
    """The ``label:`` written just before a box (looked up in a short window: linear time)."""
    m = _LABEL_BEFORE.search(text[max(0, pos - 48):pos])
    return m.group(1).strip() if m else None


def _json_boxes(text: str, limit: int) -> list[ParsedBox]:
    decoder = json.JSONDecoder()
    out: list[ParsedBox] = []
    pos, tries = 0, 0
    max_starts = limit + 64  # failed starts are bounded too: hostile text stays cheap
    while tries < max_starts and len(out) < limit:
        m = _OPEN.search(text, pos)
        if m is None:
            break
        tries += 1
        try:
            obj, end = decoder.raw_decode(text, m.start())
        except (ValueError, RecursionError):
            pos = m.start() + 1
            continue
        before = len(out)
        label = _label_before(text, m.start()) if _quad(obj) is not None else None
        _from_json(obj, out, limit, label=label)  # "cat: [x1, y1, x2, y2]" keeps its label
        pos = end if len(out) > before else m.start() + 1
    return out


def _regex_boxes(text: str, limit: int) -> list[ParsedBox]:
    out: list[ParsedBox] = []
    for m in _QWEN_TAG.finditer(text):
        nums = [float(n) for n in _NUMS.findall(m.group("body"))]
        if len(nums) == 4:
            label = m.group("label")
            out.append(ParsedBox(tuple(nums), label.strip() if label else None))  # type: ignore[arg-type]
        if len(out) >= limit:
            return out
    if out:
        return out
    for m in _PAIR.finditer(text):
        out.append(ParsedBox(tuple(float(g) for g in m.groups())))  # type: ignore[arg-type]
        if len(out) >= limit:
            return out
    if out:
        return out
    for m in _QUAD.finditer(text):
        out.append(ParsedBox(tuple(float(g) for g in m.groups()),  # type: ignore[arg-type]
                             _label_before(text, m.start())))
        if len(out) >= limit:
            break
    return out


def parse_boxes(text: str, max_boxes: int = 100, max_chars: int = 20_000,
                answer_tag: bool = True) -> list[ParsedBox]:
    """Every box the completion states, in the order written (see the module docstring)."""
    text = text[:max_chars]
    if answer_tag:
        answers = _ANSWER.findall(text)
        if answers:
            text = answers[-1]
    fenced = _FENCE.findall(text)
    for chunk in ([*fenced, text] if fenced else [text]):
        boxes = _json_boxes(chunk, max_boxes)
        if boxes:
            return boxes
    return _regex_boxes(text, max_boxes)
