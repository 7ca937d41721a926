"""Dynamic batching: concurrent requests for one reward coalesced into batches for its Scorer.

Requests put their samples in a queue (as *items*: a whole request, or chunks of
``max_batch_samples`` when the reward scores each sample independently). Whenever a worker slot
is free, the batcher takes items up to ``max_batch_samples`` and hands them to the worker as one
batch; while all slots are busy the queue keeps growing, so the next batch is bigger — under load
a learned reward model sees full batches without any waiting, and a lone request is never held
back (``max_wait_ms`` > 0 holds a batch back for that long when a slot is free, to fill it
further under light load). This is the dynamic batching of inference servers such as NVIDIA
Triton (``max_queue_delay``) and Ray Serve (``@serve.batch``), applied to rewards.

Loss-free: every item's future is resolved exactly once — with its Scores, or with error Scores
after a worker crash and one retry (``error_kind="worker_crashed"``). The queue is bounded:
:meth:`Batcher.submit` raises :class:`QueueFull` instead of growing without limit.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass

from ..types import Sample, Score
from .metrics import ServerMetrics
from .workers import ProcessWorker, ThreadWorker, WorkerCrashed

log = logging.getLogger("rewardkit.server")


class QueueFull(RuntimeError):
    """The reward's queue holds ``max_queue_samples``; the client should retry later."""

    def __init__(self, reward: str, queued: int, limit: int, retry_after_s: int = 1) -> None:
        super().__init__(f"reward {reward!r} has {queued} samples queued (limit {limit}); "
                         f"retry after {retry_after_s} s")
        self.retry_after_s = retry_after_s


@dataclass
class _Item:
    samples: list[Sample]
    future: asyncio.Future
    enqueued: float


class Batcher:
    """The queue and batch loop of one served reward."""

    def __init__(self, name: str, worker: ThreadWorker | ProcessWorker, *, max_batch_samples: int,
                 max_wait_ms: float, concurrency: int, max_queue_samples: int,
                 batch_independent: bool, metrics: ServerMetrics) -> None:
        self.name = name
        self.worker = worker
        self.max_batch_samples = max_batch_samples
        self.max_wait_s = max_wait_ms / 1000.0
        self.slots = concurrency
        self.max_queue_samples = max_queue_samples
        self.batch_independent = batch_independent
        self.metrics = metrics
        self.error_value = 0.0
        self.pending = 0  # samples queued or being scored
        self._queue: deque[_Item] = deque()
        self._queued = 0  # samples in the queue
        self._free = concurrency
        self._wakeup = asyncio.Event()
        self._closing = False
        self._loop_task: asyncio.Task | None = None
        self._running: set[asyncio.Task] = set()

    async def start(self) -> None:
        await self.worker.start()
        self.error_value = self.worker.error_value
        self._loop_task = asyncio.create_task(self._run(), name=f"rewardkit-batcher-{self.name}")

    def submit(self, samples: list[Sample]) -> list[tuple[asyncio.Future, int]]:
        """Queue a request's samples; returns (future, number of samples) per item."""
        n = len(samples)
        if self._closing:
            raise QueueFull(self.name, self.pending, self.max_queue_samples)
        if self.pending + n > self.max_queue_samples and self.pending > 0:
            raise QueueFull(self.name, self.pending, self.max_queue_samples)
        loop = asyncio.get_running_loop()
        now = loop.time()
        step = self.max_batch_samples if self.batch_independent else max(n, 1)
        out = []
        for i in range(0, n, step):
            item = _Item(samples[i:i + step], loop.create_future(), now)
            self._queue.append(item)
            out.append((item.future, len(item.samples)))
        self._queued += n
        self.pending += n
        self.metrics.queue_depth.labels(self.name).set(self.pending)
        self._wakeup.set()
        return out

    async def close(self) -> None:
        """Score what is queued, wait for running batches, then stop the worker."""
        self._closing = True
        self._wakeup.set()
        if self._loop_task is not None:
            await self._loop_task
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)
        await self.worker.close()

    # -- the loop --------------------------------------------------------------------------------
    def _drop_cancelled(self) -> None:
        while self._queue and self._queue[0].future.done():
            item = self._queue.popleft()
            self._queued -= len(item.samples)
            self._release(len(item.samples))

    def _release(self, n: int) -> None:
        self.pending -= n
        self.metrics.queue_depth.labels(self.name).set(self.pending)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._drop_cancelled()
            if not self._queue:
                if self._closing:
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            if self._free == 0:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            if self.max_wait_s > 0 and not self._closing:
                deadline = self._queue[0].enqueued + self.max_wait_s
                while self._queued < self.max_batch_samples:
                    delay = deadline - loop.time()
                    if delay <= 0:
                        break
                    self._wakeup.clear()
                    try:
                        await asyncio.wait_for(self._wakeup.wait(), delay)
                    except asyncio.TimeoutError:
                        break
                self._drop_cancelled()
                if not self._queue:
                    continue
            batch = self._take()
            self._free -= 1
            task = asyncio.create_task(self._dispatch(batch))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    def _take(self) -> list[_Item]:
        batch: list[_Item] = []
        size = 0
        while self._queue:
            item = self._queue[0]
            if item.future.done():  # its request timed out or went away
                self._queue.popleft()
                self._queued -= len(item.samples)
                self._release(len(item.samples))
                continue
            if batch and size + len(item.samples) > self.max_batch_samples:
                break
            self._queue.popleft()
            self._queued -= len(item.samples)
            batch.append(item)
            size += len(item.samples)
        return batch

    async def _dispatch(self, batch: list[_Item]) -> None:
        n = sum(len(it.samples) for it in batch)
        started = time.perf_counter()
        try:
            if batch:
                try:
                    results = await self.worker.run([it.samples for it in batch])
                except WorkerCrashed as exc:
                    self._crashed(exc)
                    await self._retry(batch)
                else:
                    for item, scores in zip(batch, results):
                        self._deliver(item, scores)
        except Exception as exc:  # noqa: BLE001 - never leave a request waiting forever
            log.exception("batch of reward %r failed", self.name)
            for item in batch:
                self._deliver(item, [Score.from_error(exc, self.error_value, kind="server")
                                     for _ in item.samples])
        finally:
            self.metrics.batch_size.labels(self.name).observe(n)
            self.metrics.batch_latency.labels(self.name).observe(time.perf_counter() - started)
            self._release(n)
            self._free += 1
            self._wakeup.set()

    def _crashed(self, exc: WorkerCrashed) -> None:
        log.warning("reward %r: scoring worker failed (%s); retrying its samples once",
                    self.name, exc)
        if exc.replaced:
            self.metrics.worker_restarts.labels(self.name).inc()

    async def _retry(self, batch: list[_Item]) -> None:
        """Retry each sample once, alone (or each request whole, when samples of a request must
        be scored together), so one poisonous sample only fails itself."""
        for item in batch:
            if item.future.done():
                continue
            units = [[s] for s in item.samples] if self.batch_independent else [item.samples]
            scores: list[Score] = []
            for unit in units:
                try:
                    scores.extend((await self.worker.run([unit]))[0])
                except WorkerCrashed as exc:
                    self._crashed(exc)
                    scores.extend(Score.from_error(
                        f"the scoring worker failed on this sample twice: {exc}",
                        self.error_value, kind="worker_crashed") for _ in unit)
            self._deliver(item, scores)

    def _deliver(self, item: _Item, scores: list[Score]) -> None:
        if item.future.done():  # the request gave up (timeout, disconnect): nothing to count
            return
        self.metrics.samples.labels(self.name).inc(len(scores))
        for s in scores:
            if not s.ok:
                self.metrics.errors.labels(self.name, str(s.info.get("error_kind"))).inc()
        item.future.set_result(scores)
