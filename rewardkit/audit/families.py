"""Variant families: small generator functions that turn one audited row into completions.

A family is a plain function ``generate(row, rng) -> list[completion]`` registered with
:func:`family`, in the manner of Hypothesis's strategies: each reads only the row it is given
(its prompt, its reference and the right answer as text), so the same family works on any
dataset, and a new family plugs in as one decorated function. A family is either **honest** (a
right answer written the way real models write it: a reward should pay it as it pays the plain
answer) or an **attack** (what an optimiser finds: a reward should refuse it). Families are
grouped by the kind of reward they address (``math``, ``code``, ``text``, ``learned``); the
``generic`` ones apply to every kind.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ..types import Text

HONEST = "honest"
ATTACK = "attack"
KINDS = ("math", "code", "text", "learned")
"""Reward kinds an audit knows; ``generic`` families join each of them."""


@dataclass(frozen=True)
class AuditRow:
    """One row of the user's data as the families see it.

    Attributes:
        prompt: the prompt (text or chat messages), as the reward reads it.
        reference: the row's reference, handed to the reward unchanged (gold, tests, ...).
        answer: the right answer as text: the gold (math), the reference solution (code), the
            reference text or completion (text, learned).
        metadata: the input row, for families that need more (e.g. a code reference's
            ``entry_point``).
    """

    prompt: Text
    reference: Any
    answer: str
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def prompt_text(self) -> str:
        """The prompt as text (the last user message of a chat)."""
        if isinstance(self.prompt, str):
            return self.prompt
        users = [m for m in self.prompt if m.get("role") == "user"] or list(self.prompt)
        return str(users[-1].get("content", "")) if users else ""


Generator = Callable[[AuditRow, random.Random], list]


@dataclass(frozen=True)
class Family:
    """A named generator of completions for one kind of reward.

    Attributes:
        name: short, unique, used in the report and by ``--families``.
        role: :data:`HONEST` or :data:`ATTACK`.
        kinds: the reward kinds it addresses (of :data:`KINDS`, or ``generic`` for all).
        doc: one line: what it imitates and why a reward should pay or refuse it.
        generate: ``(row, rng) -> completions``; an empty list where the row offers nothing
            to build on (e.g. no import line to drop).
    """

    name: str
    role: str
    kinds: tuple[str, ...]
    doc: str
    generate: Generator


FAMILIES: dict[str, Family] = {}
"""Every registered family by name, in registration order."""


def family(name: str, role: str, kinds: str | tuple[str, ...], doc: str
           ) -> Callable[[Generator], Generator]:
    """Register ``generate`` as a family (decorator). The function stays callable as is."""
    kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)
    if role not in (HONEST, ATTACK):
        raise ValueError(f"family {name!r}: role must be {HONEST!r} or {ATTACK!r}, got {role!r}")
    wrong = [k for k in kinds if k not in (*KINDS, "generic")]
    if wrong or not kinds:
        raise ValueError(f"family {name!r}: kinds must be among {KINDS + ('generic',)}, "
                         f"got {kinds!r}")

    def deco(fn: Generator) -> Generator:
        if name in FAMILIES:
            raise ValueError(f"a family named {name!r} is already registered")
        FAMILIES[name] = Family(name, role, kinds, doc, fn)
        return fn

    return deco


def families_for(kind: str, names: list[str] | None = None) -> list[Family]:
    """The families that audit a reward of ``kind`` (its own and the generic ones), or those
    named in ``names`` (an unknown name is an error naming the known ones)."""
    if kind not in KINDS:
        raise ValueError(f"unknown reward kind {kind!r}; choose one of {', '.join(KINDS)}")
    chosen = [f for f in FAMILIES.values() if kind in f.kinds or "generic" in f.kinds]
    if not names:
        return chosen
    known = {f.name: f for f in chosen}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown family {', '.join(map(repr, unknown))} for a {kind} reward; "
                         f"known: {', '.join(known)}")
    return [known[n] for n in names]


def anchor_family(kind: str) -> str:
    """The honest family whose variant is the row's plain right answer: the value a reward
    gives it is what the other variants of the row are read against."""
    return {"math": "boxed", "code": "continuation", "text": "plain",
            "learned": "plain"}[kind]
