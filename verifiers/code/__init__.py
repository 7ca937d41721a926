"""The ``code`` reward: the completion's code against the reference's tests, run so that the
candidate cannot forge or reach the verdict (see ``docs/code.md``).

Names are imported lazily: the judge processes import :mod:`.harness` from this package and
must not pay for (or depend on) the sandbox layer.
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "CodeVerifier": ".verifier", "CodeOptions": ".verifier", "CompareOptions": ".compare",
    "CodeReference": ".references", "parse_reference": ".references",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
