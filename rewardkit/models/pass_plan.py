"""How a batch of token rows is cut into forward passes, by what a pass costs on this machine.

Rows are sorted longest first and padded to the longest row of their pass. One pass wastes
compute on pad tokens; several passes each pay a fixed cost (on a CPU, the per-operator overhead
of the framework: for a small model it is most of what a one-row pass costs). The best cut
depends on the ratio of the two, which varies by orders of magnitude with the model's size and
the machine, so it is measured, not guessed:

* :class:`PassCost` fits each pass's time against its padded tokens as passes run (least squares,
  recent passes weighted more), giving the fixed cost in padded tokens;
* :func:`plan_passes` then finds the cut of the sorted rows that costs least in those units
  (dynamic programming over the distinct lengths), within the token budget and row limit;
* :func:`forward_passes` is what the scorers iterate over: the planned cut once the cost is
  known, the fixed-share rule of :func:`encoding.token_budget_batches` before that, and it times
  each pass for the fit.

Why written here: inference servers plan batches by a token budget (vLLM) or group rows by
length (HF Trainer's length-grouped sampler); neither picks the cut by a measured per-pass cost,
which is what decides it for small models on a CPU (a probe on the bundled reward model: 8-12%
less time a sample in batches of 32 and 64 than the 10% rule).
"""
from __future__ import annotations

import math
import threading
import time
from typing import Iterator, Sequence

from . import encoding
from .loading import ModelLoadError

MAX_FIXED_TOKENS = 4096.0
"""The largest fixed cost a fit may report, in padded tokens (a noisy fit cannot make every
batch one pass of any width)."""

AUTO_MAX_PADDING = 0.1
"""The share of padding that starts another pass before the cost of a pass is measured."""


def check_max_padding(max_padding: object) -> None:
    """Refuse a ``max_padding`` that is not a fraction in [0, 1), ``auto`` or None."""
    if max_padding in ("auto", None):
        return
    if (isinstance(max_padding, bool) or not isinstance(max_padding, (int, float))
            or not 0 <= max_padding < 1):
        raise ModelLoadError(f"max_padding must be a fraction in [0, 1), auto or None, got "
                             f"{max_padding!r}")


def padding_policy(max_padding: object, device: object) -> tuple[float | None, PassCost | None]:
    """``(share, cost)`` for :func:`forward_passes`: ``auto`` on a CPU measures what a pass
    costs (the 10% rule until it has), ``auto`` elsewhere is one pass per token budget (on a
    GPU padding is nearly free), and a fraction or None is the fixed rule, unmeasured."""
    check_max_padding(max_padding)
    if max_padding == "auto":
        return (AUTO_MAX_PADDING, PassCost()) if str(device) == "cpu" else (None, None)
    return (None if max_padding is None else float(max_padding)), None  # type: ignore[arg-type]


class PassCost:
    """Seconds of a forward pass ≈ ``fixed + per_token × padded tokens``, fitted online.

    Exponentially weighted least squares (``decay`` per pass) over the passes seen so far;
    :attr:`fixed_tokens` is ``fixed / per_token`` — what one more pass costs, in pad tokens —
    or None until ``min_passes`` passes of different sizes give a fit with a positive slope.
    Thread-safe (a server scores one model from several threads)."""

    def __init__(self, decay: float = 0.97, min_passes: int = 4) -> None:
        self.decay = decay
        self.min_passes = min_passes
        self.passes = 0
        self._sums = [0.0] * 5  # weight, t, t², y, t·y
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:  # a Scorer that holds one pickles (a lock does not)
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def observe(self, tokens: int, seconds: float) -> None:
        if tokens <= 0 or not seconds > 0 or not math.isfinite(seconds):
            return
        with self._lock:
            d = self.decay
            w, t, tt, y, ty = self._sums
            self._sums = [d * w + 1, d * t + tokens, d * tt + tokens * tokens, d * y + seconds,
                          d * ty + tokens * seconds]
            self.passes += 1

    @property
    def fixed_tokens(self) -> float | None:
        with self._lock:
            if self.passes < self.min_passes:
                return None
            w, t, tt, y, ty = self._sums
        mean_t, mean_y = t / w, y / w
        var = tt / w - mean_t * mean_t
        if var <= (0.05 * mean_t) ** 2:  # all passes about the same size: nothing to fit
            return None
        slope = (ty / w - mean_t * mean_y) / var
        if slope <= 0:
            return None
        fixed = mean_y - slope * mean_t
        return min(MAX_FIXED_TOKENS, max(0.0, fixed / slope))


def plan_passes(lengths: Sequence[int], fixed_tokens: float, batch_tokens: int,
                max_batch_size: int | None = None, window: int = 256) -> list[list[int]]:
    """Indices cut into passes, longest rows first, minimising ``passes × fixed_tokens +
    padded tokens``: each pass holds at most ``batch_tokens`` padded tokens (a row longer than
    that is a pass of its own) and ``max_batch_size`` rows.

    A cut inside a run of equal lengths never lowers the cost (the rows after it are padded
    to the same width anyway), so the search runs over the distinct lengths — a group of them
    too big for one pass is split into full passes — looking back at most ``window`` lengths."""
    if not lengths:
        return []
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    width = [max(1, lengths[i]) for i in order]
    bounds = [0] + [k for k in range(1, len(width)) if width[k] != width[k - 1]] + [len(width)]

    def per_pass(w: int) -> int:
        rows = max(1, batch_tokens // w)
        return rows if max_batch_size is None else max(1, min(rows, max_batch_size))

    m = len(bounds) - 1
    best = [0.0] + [math.inf] * m
    back = [0] * (m + 1)
    for b in range(1, m + 1):
        for a in range(b - 1, max(-1, b - 1 - window), -1):
            w = width[bounds[a]]
            rows = bounds[b] - bounds[a]
            cost = best[a] + -(-rows // per_pass(w)) * fixed_tokens + w * rows
            if cost < best[b]:
                best[b], back[b] = cost, a
    groups = []
    b = m
    while b > 0:
        groups.append((bounds[back[b]], bounds[b]))
        b = back[b]
    passes = []
    for start, end in reversed(groups):
        step = per_pass(width[start])
        passes += [order[k:min(k + step, end)] for k in range(start, end, step)]
    return passes


def forward_passes(lengths: Sequence[int], batch_tokens: int, max_batch_size: int | None,
                   max_padding: float | None, cost: PassCost | None) -> Iterator[list[int]]:
    """The passes a scorer runs for rows of these lengths: cut by :func:`plan_passes` when
    ``cost`` has measured a pass, else by :func:`encoding.token_budget_batches` with
    ``max_padding``. With a ``cost``, the time between handing out a pass and asking for the
    next — the caller's forward pass — is observed."""
    fixed = cost.fixed_tokens if cost is not None else None
    if fixed is not None:
        plan: Iterator[list[int]] | list[list[int]] = plan_passes(
            lengths, fixed, batch_tokens, max_batch_size)
    else:
        plan = encoding.token_budget_batches(lengths, batch_tokens, max_batch_size, max_padding)
    for idx in plan:
        start = time.perf_counter()
        yield idx
        if cost is not None:
            cost.observe(len(idx) * max(max(1, lengths[i]) for i in idx),
                         time.perf_counter() - start)
