"""The batcher's chunk sizes. For a learned model a new request may start at twice the largest
batch recently seen to finish within the quantum, so a model whose cost per sample falls with
the batch size (a GPU) is not held to small chunks by its first, slow batches; a batch that
overruns the quantum still brings the chunks back down. For a rule-based reward, whose samples
may each spin for their full time limit whatever came before, a new request starts at one
sample, so a newcomer never waits behind a large batch of another client's slow samples."""
from __future__ import annotations

import asyncio

from rewardkit import Sample, Score
from rewardkit.server.batching import Batcher
from rewardkit.server.metrics import ServerMetrics


class FixedCostWorker:
    """A batch costs ``cost(batch_number, size)`` seconds, however many samples it holds."""

    error_value = 0.0
    restarts = 0

    def __init__(self, cost) -> None:  # noqa: ANN001
        self.cost = cost
        self.sizes: list[int] = []

    async def start(self) -> None:
        pass

    async def run(self, groups: list[list[Sample]],
                  timeout_s: float | None = None) -> list[list[Score]]:
        size = sum(len(g) for g in groups)
        self.sizes.append(size)
        await asyncio.sleep(self.cost(len(self.sizes), size))
        return [[Score(1.0) for _ in g] for g in groups]

    async def close(self) -> None:
        pass

    def problem(self) -> None:
        return None


def _batches_per_request(cost, requests: int = 3, size: int = 64) -> list[list[int]]:
    async def main() -> list[list[int]]:
        worker = FixedCostWorker(cost)
        batcher = Batcher("r", worker, max_batch_samples=size, max_wait_ms=0, concurrency=1,
                          max_queue_samples=10_000, batch_independent=True,
                          metrics=ServerMetrics(), batch_quantum_s=0.1, cost_follows_size=True)
        await batcher.start()
        out = []
        try:
            for r in range(requests):
                before = len(worker.sizes)
                flow = batcher.submit([Sample("q", f"r{r}s{i}") for i in range(size)])
                scores = await flow.future
                assert len(scores) == size
                out.append(worker.sizes[before:])
        finally:
            await batcher.close()
        return out
    return asyncio.run(main())


def test_after_a_slow_first_batch_large_fast_batches_set_the_next_requests_chunk():
    # GPU-like: the first batch loads kernels (0.3 s, past the 0.1 s quantum), then any batch
    # takes 5 ms whatever its size
    per_request = _batches_per_request(lambda n, size: 0.3 if n == 1 else 0.005)
    assert sum(per_request[0]) == 64 and len(per_request[0]) > 2  # the first grows from 1
    assert per_request[1] == [64] and per_request[2] == [64], per_request


def test_samples_that_overrun_the_quantum_still_bring_the_chunk_down():
    # fast batches first (the second request goes in one batch of 64), then every sample costs
    # 50 ms: the third request's batch of 64 overruns the 0.1 s quantum, and the fourth starts
    # from what fits (2 samples), not from 64
    per_request = _batches_per_request(lambda n, size: 0.002 if n <= 8 else 0.05 * size,
                                       requests=4)
    assert per_request[1] == [64] and per_request[2] == [64], per_request
    assert per_request[3][0] <= 2 and max(per_request[3]) <= 2, per_request


class OnePoolWorker:
    """Scores each batch's samples one after another on one shared process (a lock taken in
    turn), as ``math`` and ``code`` run every batch on their own pool: a sample whose completion
    starts with ``slow`` costs 50 ms, the others nothing. Records the order samples finish in."""

    error_value = 0.0
    restarts = 0

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.finished: list[str] = []

    async def start(self) -> None:
        pass

    async def run(self, groups: list[list[Sample]],
                  timeout_s: float | None = None) -> list[list[Score]]:
        async with self.lock:
            for group in groups:
                for s in group:
                    await asyncio.sleep(0.05 if s.completion.startswith("slow") else 0)
                    self.finished.append(s.completion)
        return [[Score(1.0) for _ in g] for g in groups]

    async def close(self) -> None:
        pass

    def problem(self) -> None:
        return None


def test_a_newcomer_waits_behind_few_slow_samples_whatever_batches_came_before():
    """After large batches of fast samples (which proved batches of 64), one client sends two
    requests of 16 slow samples and another client one sample: at most one slow sample of each
    of the two requests in each of the two batches in flight (4) finishes before the
    newcomer's request is answered. Before, the slow requests went out whole, in one batch of
    32; and a newcomer batched with slow samples waited for them too (6)."""
    async def main() -> list[str]:
        worker = OnePoolWorker()
        batcher = Batcher("r", worker, max_batch_samples=64, max_wait_ms=0, concurrency=2,
                          max_queue_samples=10_000, batch_independent=True,
                          metrics=ServerMetrics(), batch_quantum_s=0.05)
        await batcher.start()
        try:
            for r in range(4):  # history: fast batches up to 64
                await batcher.submit([Sample("q", f"fast{r}-{i}") for i in range(64)]).future
            slow = [batcher.submit([Sample("q", f"slow{r}-{i}") for i in range(16)])
                    for r in range(2)]
            await asyncio.sleep(0.01)  # the slow requests' first batches are out
            await batcher.submit([Sample("q", "newcomer")]).future
            answered = list(worker.finished)
            await asyncio.gather(*(f.future for f in slow))
        finally:
            await batcher.close()
        return answered

    answered = asyncio.run(main())
    slow_first = [c for c in answered if c.startswith("slow")]
    assert len(slow_first) <= 4, slow_first
