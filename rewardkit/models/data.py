"""Preference and stepwise data sets in TRL's formats (and ProcessBench's), read into plain
records the trainer and the evaluators share.

* Preference rows: ``prompt``, ``chosen``, ``rejected`` — strings or chat messages. Without a
  ``prompt`` column the prompt is implicit: for messages, the longest common leading run of
  messages of ``chosen`` and ``rejected`` (TRL's ``maybe_extract_prompt``); for strings, empty.
  Optional ``margin`` (float) and ``subset`` (RewardBench's grouping column).
* Completion rows (replayed language-model text): ``prompt`` and ``completion`` (TRL's
  prompt-completion format), or preference rows, whose ``chosen`` side is the completion.
* Stepwise rows: TRL's ``prompt``, ``completions`` (list of steps), ``labels`` (list of bools);
  or ProcessBench's ``problem``, ``steps``, ``label`` (index of the first wrong step, -1 when
  all are right).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from ..compose import ConfigError
from ..dataio import Source, detect_format, read_rows
from ..types import Text


@dataclass
class Pair:
    prompt: Text
    chosen: Text
    rejected: Text
    margin: float = 0.0
    subset: str = "all"


@dataclass
class Completion:
    prompt: Text
    completion: Text


@dataclass
class Solution:
    prompt: Text
    steps: list[str]
    labels: list[bool]
    subset: str = "all"

    @property
    def first_wrong(self) -> int:
        """ProcessBench's label: index of the first wrong step, -1 if every step is right."""
        return next((i for i, ok in enumerate(self.labels) if not ok), -1)


def read(location: str) -> Iterable[dict[str, Any]]:
    try:
        return list(read_rows(Source(location, detect_format(location))))
    except FileNotFoundError as exc:
        raise ConfigError(f"data file {location!r} not found") from exc


def _text(value: Any, what: str, row: int) -> Text:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(m, dict) and "content" in m for m in value):
        return value
    raise ConfigError(f"row {row}: {what} must be a string or a list of chat messages, got "
                      f"{type(value).__name__}")


def to_pair(row: dict[str, Any], index: int, margin_field: str = "margin") -> Pair:
    missing = [k for k in ("chosen", "rejected") if k not in row]
    if missing:
        raise ConfigError(f"row {index}: preference rows need 'chosen' and 'rejected' (TRL's "
                          f"format); missing {missing}; its keys are {sorted(row)}")
    chosen = _text(row["chosen"], "chosen", index)
    rejected = _text(row["rejected"], "rejected", index)
    prompt = row.get("prompt")
    if prompt is None:
        prompt, chosen, rejected = _implicit_prompt(chosen, rejected)
    margin = row.get(margin_field, 0.0)
    if margin is None:
        margin = 0.0
    if not isinstance(margin, (int, float)) or isinstance(margin, bool):
        raise ConfigError(f"row {index}: {margin_field} must be a number, got {margin!r}")
    return Pair(_text(prompt, "prompt", index), chosen, rejected, float(margin),
                str(row.get("subset", "all")))


def _implicit_prompt(chosen: Text, rejected: Text) -> tuple[Text, Text, Text]:
    if isinstance(chosen, str) or isinstance(rejected, str):
        return "", chosen, rejected
    n = 0
    while n < min(len(chosen), len(rejected)) - 1 and chosen[n] == rejected[n]:
        n += 1
    return list(chosen[:n]), list(chosen[n:]), list(rejected[n:])


def to_solution(row: dict[str, Any], index: int) -> Solution:
    if "completions" in row:
        steps, labels = row["completions"], row.get("labels")
        prompt = row.get("prompt", "")
        if not isinstance(labels, list) or len(labels) != len(steps):
            raise ConfigError(f"row {index}: 'labels' must be a list of bools, one per step of "
                              "'completions' (TRL's stepwise format)")
        labels = [bool(x) for x in labels]
    elif "steps" in row:
        steps, first = row["steps"], row.get("label")
        prompt = row.get("problem", row.get("prompt", ""))
        if not isinstance(first, int) or not -1 <= first < len(steps):
            raise ConfigError(f"row {index}: ProcessBench's 'label' must be the index of the "
                              f"first wrong step or -1, got {first!r}")
        labels = [first == -1 or i < first for i in range(len(steps))]
    else:
        raise ConfigError(f"row {index}: stepwise rows need 'completions' and 'labels' (TRL) or "
                          f"'steps' and 'label' (ProcessBench); its keys are {sorted(row)}")
    if not isinstance(steps, list) or not steps or not all(isinstance(s, str) for s in steps):
        raise ConfigError(f"row {index}: the steps must be a non-empty list of strings")
    return Solution(_text(prompt, "prompt", index), list(steps), labels,
                    str(row.get("subset", "all")))


def read_pairs(location: str, margin_field: str = "margin") -> list[Pair]:
    pairs = [to_pair(r, i, margin_field) for i, r in enumerate(read(location))]
    if not pairs:
        raise ConfigError(f"{location!r} holds no preference rows")
    return pairs


def read_solutions(location: str) -> list[Solution]:
    rows = [to_solution(r, i) for i, r in enumerate(read(location))]
    if not rows:
        raise ConfigError(f"{location!r} holds no stepwise rows")
    return rows


def read_completions(location: str) -> list[Completion]:
    """Prompt-completion rows; a preference row gives its ``chosen`` side."""
    out = []
    for i, row in enumerate(read(location)):
        if "completion" in row:
            out.append(Completion(_text(row.get("prompt", ""), "prompt", i),
                                  _text(row["completion"], "completion", i)))
        elif "chosen" in row:
            pair = to_pair({**row, "rejected": row.get("rejected", row["chosen"])}, i)
            out.append(Completion(pair.prompt, pair.chosen))
        else:
            raise ConfigError(f"row {i} of {location!r}: completion rows need 'completion' "
                              f"(and 'prompt'), or preference rows a 'chosen' side; its keys "
                              f"are {sorted(row)}")
    if not out:
        raise ConfigError(f"{location!r} holds no completion rows")
    return out
