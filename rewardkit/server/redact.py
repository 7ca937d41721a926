"""Reward specs as ``GET /v1/rewards`` publishes them: secrets replaced by a placeholder.

A served reward's options may hold credentials (a rubric judge's ``api_key``, a ``remote``
member's ``token``, a URL with a password in it). The listing tells clients which rewards exist
and how they are configured; it never hands out what the operator configured them with.
"""
from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

REDACTED = "<redacted>"

_SECRET_KEY = re.compile(
    r"(?:^|[_\-.])(?:api[_\-]?key|key|token|secret|password|passwd|pwd|auth|authorization|"
    r"bearer|credentials?|cookie|private[_\-]?key|access[_\-]?key|session)$", re.IGNORECASE)
"""Option names whose values are secrets: ``api_key``, ``token``, ``hf_token``,
``client_secret``, ``Authorization``... (matched on the last word, so ``max_tokens`` and
``tokenizer`` stay visible)."""

_NOT_SECRET = frozenset({"pad_token", "bos_token", "eos_token", "unk_token", "sep_token",
                         "cls_token", "mask_token", "step_token", "sort_key"})
"""Names that end like a secret but name a tokenizer's special token or an ordering."""


def redacted(value: Any, key: str | None = None) -> Any:
    """``value`` with every secret-looking option replaced by :data:`REDACTED`, at any depth,
    and the password of any URL in it removed."""
    if key is not None and key.lower() not in _NOT_SECRET and _SECRET_KEY.search(key):
        return REDACTED if value is not None else None
    if isinstance(value, dict):
        return {k: redacted(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redacted(v) for v in value]
    if isinstance(value, str) and "@" in value and "://" in value:
        return _without_userinfo(value)
    return value


def _without_userinfo(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return REDACTED
    if parts.password is None and parts.username is None:
        return url
    host = parts.hostname or ""
    netloc = f"{REDACTED}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))
