"""Failure messages of bounded size: never the repr of a whole huge value the candidate
returned (a reply can be megabytes; its repr would cost the checker as much again)."""
from __future__ import annotations

import reprlib
import traceback
from typing import Any


def printable(text: str) -> str:
    """``text`` with every lone surrogate escaped (``\\ud800``). A candidate chooses the text
    of its exceptions and values, and JSON carries a lone surrogate across the channel; left
    in, it would make every UTF-8 writer of the Score (a results file, a server reply, a log)
    fail on the row."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def failure_message(exc: BaseException, test: str) -> str:
    """A failure's message; a bare ``assert`` is named by its line of the test."""
    if isinstance(exc, AssertionError) and not str(exc):
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == "<test>"]
        lines = test.splitlines()
        if frames and frames[-1].lineno and 0 < frames[-1].lineno <= len(lines):
            return f"assertion failed (test line {frames[-1].lineno}): " \
                   f"{lines[frames[-1].lineno - 1].strip()[:300]}"
        return "assertion failed"
    return f"{type(exc).__name__}: {exception_text(exc)}"[:2000]


def exception_text(exc: BaseException) -> str:
    """``str(exc)`` without building a huge text first (an exception may carry a huge value
    that the candidate returned)."""
    args = exc.args
    if len(args) == 1 and isinstance(args[0], str):
        return args[0][:2000]
    if not args:
        return ""
    return ", ".join(short_repr(a, 500) for a in args[:5])


class _ShortRepr(reprlib.Repr):
    """``reprlib`` with the two types it would render whole: a huge int (whose decimal text
    costs quadratic time and is refused past 4,300 digits) and bytes."""

    def __init__(self) -> None:
        super().__init__()
        self.maxstring = self.maxother = 120
        self.maxlong = 60
        self.maxlevel = 4

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 10_000:
            return f"<int of {x.bit_length()} bits>"
        return super().repr_int(x, level)

    def repr_bytes(self, x: bytes, level: int) -> str:
        text = repr(x[:self.maxstring])
        return text if len(x) <= self.maxstring else text + "..."


_SHORT = _ShortRepr()


def short_repr(value: Any, limit: int = 120) -> str:
    """A bounded repr for a failure message: never the repr of a whole huge value."""
    text = _SHORT.repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
