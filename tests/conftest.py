"""Shared fixtures."""
from __future__ import annotations

import json
from typing import Any, Callable

import pytest


@pytest.fixture(scope="session")
def math_verifier() -> Callable[..., Any]:
    """``math_verifier(**options)``: one `math` verifier (and one worker pool) per distinct
    option set for the whole session, closed at its end."""
    import rewardkit

    built: dict[str, Any] = {}

    def get(**options: Any) -> Any:
        key = json.dumps(options, sort_keys=True)
        if key not in built:
            built[key] = rewardkit.load("math", workers=2, **options)
        return built[key]

    yield get
    for verifier in built.values():
        verifier.close()
