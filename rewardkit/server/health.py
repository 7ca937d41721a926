"""What ``/health`` says about one served reward, from what its batcher has seen.

A reward is *degraded* — ``/health`` answers ``503`` and names why — as soon as the evidence
says it cannot score, not after a long run of failed samples (a server with little traffic, or
a load balancer probing just after a crash loop began, would otherwise never see it):

- two scoring calls in a row failed (the worker crashed, or the Scorer raised past its own
  error handling): the call after a crash runs on a fresh worker, so this is also a worker that
  died before its first reply. One crash whose retry scores is a poisonous sample, not a
  broken reward;
- the last scoring call ran past ``batch_timeout_s`` (a hung Scorer: its worker was replaced,
  or for a thread, abandoned);
- the worker was replaced :data:`RESTARTS_LIMIT` times within :data:`RESTARTS_WINDOW_S`
  seconds with no call scored since (processes found dead between batches and replaced count
  here, though no call failed);
- each of the last :data:`SAMPLES_WINDOW` samples came back as an error.

Each clears as soon as a call scores again (the samples rule once samples are scored again).
"""
from __future__ import annotations

import time
from collections import deque
from typing import Iterable

from ..types import Score

SAMPLES_WINDOW = 32
"""How many recent samples are looked at: all of them errors is a degraded reward."""

RESTARTS_LIMIT = 3
RESTARTS_WINDOW_S = 60.0


class RewardHealth:
    """Counts the outcomes of one reward's scoring calls and says why it is degraded."""

    def __init__(self) -> None:
        self._failed_calls = 0          # scoring calls failed in a row
        self._last_failure = ""         # what the last failed call said
        self._timed_out = False         # the last call ran past its deadline
        self._restarts: deque[float] = deque()
        self._samples: deque[tuple[bool, object]] = deque(maxlen=SAMPLES_WINDOW)

    def call_scored(self) -> None:
        """A scoring call returned its Scores (each may still be a sample's own error)."""
        self._failed_calls = 0
        self._timed_out = False
        self._restarts.clear()

    def samples_answered(self, scores: Iterable[Score]) -> None:
        """Scores given to a request, whichever way they came (scored, or errors)."""
        self._samples.extend((s.ok, s.info.get("error_kind")) for s in scores)

    def call_failed(self, why: str, *, timed_out: bool = False) -> None:
        self._failed_calls += 1
        self._last_failure = why
        self._timed_out = timed_out

    def restarted(self, count: int = 1, now: float | None = None) -> None:
        """The worker was replaced ``count`` times (a crash, a hang, found dead)."""
        now = time.monotonic() if now is None else now
        self._restarts.extend([now] * count)

    def problem(self, now: float | None = None) -> str | None:
        """Why the reward is degraded, or None."""
        now = time.monotonic() if now is None else now
        while self._restarts and self._restarts[0] < now - RESTARTS_WINDOW_S:
            self._restarts.popleft()
        if self._timed_out:
            return f"its last scoring call did not return in time ({self._last_failure})"
        if self._failed_calls >= 2:
            return (f"its last {self._failed_calls} scoring calls failed "
                    f"({self._last_failure})")
        if len(self._restarts) >= RESTARTS_LIMIT:
            return (f"its worker was replaced {len(self._restarts)} times in the last "
                    f"{RESTARTS_WINDOW_S:g} s")
        if len(self._samples) == SAMPLES_WINDOW and not any(ok for ok, _ in self._samples):
            kinds = sorted({str(kind) for _, kind in self._samples})
            return (f"the last {SAMPLES_WINDOW} samples were all errors "
                    f"(error_kind: {', '.join(kinds)})")
        return None
