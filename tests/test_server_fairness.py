"""Fairness through the whole server: one client's request of slow samples does not hold back
another client's one-sample request, which is scored within about two slow samples of its
arrival (one in flight on each worker slot). The reward stands for a rule-based one, whose
batches wait for its own one-worker pool, served in the order they asked, as the math reward's
pool is (``tests/test_math_hardening.py`` checks that order on the pool itself)."""
from __future__ import annotations

import threading
import time
from collections import deque

import httpx
import pytest

import rewardkit
from rewardkit.server.testing import running_server
from tests.test_server_faults import _settings  # reward "r"

pytest.importorskip("fastapi")

ORDER: list[str] = []          # completions in the order SerialScorer scored them


class FifoLock:
    """A one-worker pool held for a whole batch, taken in the order batches asked (as math's
    pool is): ``threading.Lock`` lets whichever waiting thread runs first take it."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queue: deque[object] = deque()
        self._held = False

    def __enter__(self) -> None:
        turn = object()
        with self._cond:
            self._queue.append(turn)
            self._cond.wait_for(lambda: not self._held and self._queue[0] is turn)
            self._queue.popleft()
            self._held = True

    def __exit__(self, *exc) -> None:
        with self._cond:
            self._held = False
            self._cond.notify_all()


_POOL = FifoLock()             # SerialScorer's one-worker pool, held for a whole batch (like math's)


class SerialScorer(rewardkit.Scorer):
    name = "serial"

    def __init__(self, delay: float = 0.05) -> None:
        self.delay = delay

    def score_batch(self, samples):
        with _POOL:
            out = []
            for s in samples:
                time.sleep(self.delay)
                ORDER.append(s.completion)
                out.append(rewardkit.Score(float(len(s.completion))))
            return out



def test_one_sample_request_is_not_queued_behind_another_clients_slow_batch():
    ORDER.clear()
    # Samples of 0.1 s against a quantum of 0.1 s: as math's 1 s samples against the default 1 s.
    settings = _settings(f"{__name__}:SerialScorer", {"delay": 0.1}, concurrency=2,
                         batch_quantum_s=0.1)
    with running_server(settings) as (url, app):
        batcher = app.state.rewardkit.batchers["r"]
        submit = batcher.submit

        def marked(samples):  # note in ORDER when the small request reaches the queue
            if samples[0].completion == "small":
                ORDER.append("<small queued>")
            return submit(samples)

        batcher.submit = marked
        big = threading.Thread(target=lambda: httpx.post(url + "/v1/score", json={"samples": [
            {"completion": f"big{i}"} for i in range(24)]}, timeout=60))
        big.start()
        while len(ORDER) < 3:
            time.sleep(0.01)
        small = httpx.post(url + "/v1/score", json={"samples": [{"completion": "small"}]},
                           timeout=60)
        big.join(60)
    assert small.json()["scores"][0]["value"] == 5.0
    # Scored within about two slow samples of its arrival (one in flight on each worker slot),
    # not after all of the other request's samples.
    waited = ORDER.index("small") - ORDER.index("<small queued>") - 1
    assert waited <= 2, ORDER
