"""A cheap look at a request body before it is parsed: UTF-8, nesting depth, list lengths, and
how much memory the parsed body will take.

Parsing a 32 MiB body of a million tiny samples builds a million objects (seconds of a blocked
event loop, hundreds of MB) before any limit on their number could be checked, and JSON nested
100,000 levels deep exhausts the parser's recursion. So the raw bytes are checked first: one regular
expression steps over whole strings and stops at each structural byte, and one pass tracks the
depth and counts the items of each list directly inside the top-level object (``samples``,
OpenRLHF's ``query``...), stopping at the first limit crossed — so its cost is bounded by the
limits, not by the body, and it holds no copy of it. No JSON library offers a bounded pre-check like this (a streaming parser
would still build each sample), hence this small one; the real parse follows unchanged.

The same pass counts the values the parse will build, for :func:`parsed_bytes`: a body of tiny
nested values (``[[],[],...]``, ``{"a":0.5,...}``) parses to some 20–30 times its bytes, so a
budget on raw bytes would bound memory that much less than it says.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},]')
"""A JSON string (skipped whole) or one structural byte."""


CONTAINER_BYTES = 80
"""A parsed list or dict (CPython: 56–64 bytes empty, plus its slot in its parent), rounded up."""
STRING_BYTES = 64
"""A parsed string beyond its characters (49 bytes of header, a slot in its parent, an object
key's hash-table entry)."""
SEPARATED_BYTES = 80
"""Per comma, the separator of every value but a container's last: a parsed number, ``true``,
``false`` or ``null`` (a float is 24 bytes) and the value's slot, or entry in an object's hash
table (which grows by half again when full)."""
SAMPLE_BYTES = 2048
"""One top-level item as the server holds it after validation: the request model's object, the
Sample built from it and the copies of its fields."""


INLINE_BYTES = 16 * 1024
"""Bodies up to this size are scanned and parsed on the event loop (tens of microseconds, less
than a hop to a thread); larger ones in a thread, so that one request's bytes never hold up the
others (a 32 MB body of tiny values takes seconds to scan and parse)."""


@dataclass(frozen=True)
class Refusal:
    status: int
    reason: str   # metric label
    message: str  # what was wrong and what to do


@dataclass(frozen=True)
class Scan:
    """What the pre-scan counted: the body's containers, strings, commas and top-level items."""

    containers: int = 0
    strings: int = 0
    commas: int = 0
    items: int = 0

    def parsed_bytes(self, body_bytes: int) -> int:
        """An upper estimate of the memory the body takes once parsed and validated, the raw
        bytes included (held too, and a long string is copied once on the way): what a body
        holds of the server's budget. Measured against tracemalloc for the shapes in
        ``tests/test_server_security.py``."""
        return (3 * body_bytes + CONTAINER_BYTES * self.containers
                + STRING_BYTES * self.strings + SEPARATED_BYTES * self.commas
                + SAMPLE_BYTES * self.items)


def prescan(body: bytes, max_items: int, max_depth: int) -> Refusal | Scan:
    """Why the body must be refused before parsing, or what it holds."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Refusal(422, "not_utf8", f"the request body is not UTF-8 (byte {exc.start}: "
                                        f"{exc.reason}); send JSON encoded as UTF-8")
    depth = 0
    items = 0
    containers = strings = commas = total_items = 0
    for match in _TOKEN.finditer(body):
        token = match.group()
        if token[0] == 0x22:  # a string
            strings += 1
        elif token == b",":
            commas += 1
            if depth == 2:
                items += 1
                if items >= max_items:
                    return Refusal(413, "too_many_samples", _too_many(max_items))
        elif token in (b"[", b"{"):
            containers += 1
            depth += 1
            if depth > max_depth:
                return Refusal(422, "too_deep", f"the request body nests deeper than {max_depth} "
                                                "levels; flatten references and metadata")
            if depth == 2:
                items = 0
        elif token in (b"]", b"}"):
            if depth == 2:
                total_items += items + 1
                items = 0
            depth -= 1
    return Scan(containers, strings, commas, total_items)


def _too_many(limit: int) -> str:
    return (f"more than {limit} samples in one request; the limit is {limit} "
            "(serve.max_request_samples): split the batch")
