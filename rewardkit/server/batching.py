"""Dynamic batching with fair shares: concurrent requests for one reward coalesced into batches.

Each request is a *flow* of samples. Whenever a worker slot is free, the batcher builds a batch
of up to ``max_batch_samples`` by taking samples from the queued flows in turn (round robin), so
64 one-sample requests become one batch of 64 for a learned model, and a one-sample request is
never queued behind the whole of another client's 32 slow samples: it is served in the next
batch. While all slots are busy the queue keeps growing, so under load a model sees full batches
without any waiting; a lone request is never held back (``max_wait_ms`` > 0 holds a batch back
for that long when a slot is free, to fill it further under light load). When a batch is done,
the next one is taken and handed to the worker before the done batch's requests are answered,
so that the model computes while the event loop writes the replies. This is the dynamic
batching of inference servers such as NVIDIA Triton (``max_queue_delay``) and Ray Serve
(``@serve.batch``), plus the per-flow fairness of a round-robin scheduler.

**Time-bounded batches.** A batch holds its slot until its slowest sample is done, and rule-based
rewards (``math``, ``code``) run a batch on their own pool, which a second batch waits for. So a
flow's samples go out in chunks sized to finish within ``batch_quantum_s``: a flow's first chunk
is what fits at the reward's recent cost per sample (one sample on a fresh server; the estimate
rises at once on a slow batch and decays slowly), or twice the largest batch recently seen to
finish within the quantum if that is larger (a model on a GPU costs far more per sample in small
batches than in large ones), then the chunk doubles while batches stay within
the quantum and shrinks to fit it when samples are slow (one sample of math that spins for its
full time limit costs a second): a small request waits at most about one quantum, or one slow
sample, behind a big one. Fast samples reach ``max_batch_samples`` after a few chunks. (After a
long run of fast samples, a burst of slow ones is taken in one batch of the recent size before
the estimate catches up.)

Loss-free: every flow's future is resolved exactly once — with its Scores, or with error Scores
after a worker crash and one retry (``error_kind="worker_crashed"``). The queue is bounded:
:meth:`Batcher.submit` raises :class:`QueueFull` instead of growing without limit.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import Optional

from ..types import Sample, Score
from .metrics import ServerMetrics
from .workers import PipeWorker, ProcessWorker, ThreadWorker, WorkerCrashed

log = logging.getLogger("rewardkit.server")


class QueueFull(RuntimeError):
    """The reward's queue holds ``max_queue_samples``; the client should retry later."""

    def __init__(self, reward: str, queued: int, limit: int, retry_after_s: int = 1) -> None:
        super().__init__(f"reward {reward!r} has {queued} samples queued (limit {limit}); "
                         f"retry after {retry_after_s} s")
        self.retry_after_s = retry_after_s


class Flow:
    """One request's samples on their way through the batcher.

    ``future`` resolves with every Score once all are in; after a timeout the caller reads the
    ones already scored from :attr:`scores` (None where not scored yet).
    """

    __slots__ = ("samples", "scores", "future", "enqueued", "next", "left", "chunk")

    def __init__(self, samples: list[Sample], future: asyncio.Future, enqueued: float,
                 chunk: int) -> None:
        self.samples = samples
        self.scores: list[Optional[Score]] = [None] * len(samples)
        self.future = future
        self.enqueued = enqueued
        self.next = 0              # first sample not yet handed to a worker
        self.left = len(samples)   # samples without a Score yet
        self.chunk = chunk         # most samples of this flow per batch (see module docstring)

    @property
    def waiting(self) -> int:
        return len(self.samples) - self.next


HEALTH_WINDOW = 32
"""How many recent samples ``/health`` looks at: all of them errors is a degraded reward."""

# One piece of a batch: (flow, start, end) — samples[start:end] of that flow.
Segment = tuple[Flow, int, int]


class Batcher:
    """The queue and batch loop of one served reward."""

    def __init__(self, name: str, worker: ThreadWorker | ProcessWorker | PipeWorker, *,
                 max_batch_samples: int,
                 max_wait_ms: float, concurrency: int, max_queue_samples: int,
                 batch_independent: bool, metrics: ServerMetrics,
                 batch_quantum_s: float = 1.0) -> None:
        self.name = name
        self.worker = worker
        self.max_batch_samples = max_batch_samples
        self.max_wait_s = max_wait_ms / 1000.0
        self.slots = concurrency
        self.max_queue_samples = max_queue_samples
        self.batch_independent = batch_independent
        self.batch_quantum_s = batch_quantum_s
        self.metrics = metrics
        self.error_value = 0.0
        self.pending = 0  # samples queued or being scored
        self._flows: deque[Flow] = deque()  # flows with samples not yet handed out
        self._waiting = 0  # samples not yet handed out
        self._free = concurrency
        self._wakeup = asyncio.Event()
        self._closing = False
        self._loop_task: asyncio.Task | None = None
        self._running: set[asyncio.Task] = set()
        self._recent: deque[tuple[bool, object]] = deque(maxlen=HEALTH_WINDOW)
        self._per_sample_s: float | None = None  # rises at once, decays slowly
        self._fits = 1  # what fits in the quantum at the recent cost per sample
        self._proven = 1  # twice the largest batch recently seen to finish within the quantum
        self._restarts_seen = 0  # the worker's replacements already exported

    async def start(self) -> None:
        await self.worker.start()
        self.error_value = self.worker.error_value
        self._loop_task = asyncio.create_task(self._run(), name=f"rewardkit-batcher-{self.name}")

    def submit(self, samples: list[Sample]) -> Flow:
        """Queue a request's samples; the returned flow's future resolves with their Scores."""
        n = len(samples)
        if self._closing:
            raise QueueFull(self.name, self.pending, self.max_queue_samples)
        if self.pending + n > self.max_queue_samples and self.pending > 0:
            raise QueueFull(self.name, self.pending, self.max_queue_samples)
        loop = asyncio.get_running_loop()
        flow = Flow(samples, loop.create_future(), loop.time(),
                    max(self._fits, self._proven) if self.batch_independent else max(n, 1))
        self._flows.append(flow)
        self._waiting += n
        self.pending += n
        self.metrics.queue_depth.labels(self.name).set(self.pending)
        self._wakeup.set()
        return flow

    def problem(self) -> str | None:
        """Why this reward cannot score now (None when it can): its worker processes are gone,
        or each of the last :data:`HEALTH_WINDOW` samples came back as an error."""
        dead = self.worker.problem()
        if dead:
            return dead
        if len(self._recent) == self._recent.maxlen and not any(ok for ok, _ in self._recent):
            kinds = sorted({str(kind) for _, kind in self._recent})
            return (f"the last {len(self._recent)} samples were all errors "
                    f"(error_kind: {', '.join(kinds)})")
        return None

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
    def _drop_done(self) -> None:
        """Forget flows whose request gave up (timeout, disconnect): their samples leave."""
        if any(f.future.done() for f in self._flows):
            kept: deque[Flow] = deque()
            for flow in self._flows:
                if flow.future.done():
                    self._waiting -= flow.waiting
                    self._release(flow.waiting)
                    flow.next = len(flow.samples)
                else:
                    kept.append(flow)
            self._flows = kept

    def _release(self, n: int) -> None:
        self.pending -= n
        self.metrics.queue_depth.labels(self.name).set(self.pending)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._drop_done()
            if not self._flows:
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
                deadline = self._flows[0].enqueued + self.max_wait_s
                while self._waiting < self.max_batch_samples:
                    delay = deadline - loop.time()
                    if delay <= 0:
                        break
                    self._wakeup.clear()
                    try:
                        await asyncio.wait_for(self._wakeup.wait(), delay)
                    except asyncio.TimeoutError:
                        break
                self._drop_done()
                if not self._flows:
                    continue
            batch = self._take()
            if batch:
                self._start(batch)

    def _start(self, batch: list[Segment]) -> None:
        self._free -= 1
        task = asyncio.create_task(self._dispatch(batch))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    def _take(self) -> list[Segment]:
        """A batch: whole requests in order when samples must be scored together, else samples
        taken from the flows in turn, each flow at most its chunk."""
        budget = self.max_batch_samples
        taken: dict[Flow, int] = {}
        if not self.batch_independent:
            while self._flows and (not taken or budget >= self._flows[0].waiting):
                flow = self._flows.popleft()
                taken[flow] = flow.waiting
                budget -= flow.waiting
        else:
            active = list(self._flows)
            while budget > 0 and active:
                share = max(1, budget // len(active))
                still = []
                for flow in active:
                    room = min(flow.chunk, flow.waiting) - taken.get(flow, 0)
                    k = min(share, room, budget)
                    if k > 0:
                        taken[flow] = taken.get(flow, 0) + k
                        budget -= k
                    if room - k > 0:
                        still.append(flow)
                    if budget == 0:
                        break
                active = still
            # Round robin: the flows served now queue up behind the others for the next batch.
            served = [f for f in self._flows if f in taken]
            self._flows = deque([f for f in self._flows if f not in taken])
            self._flows.extend(f for f in served if f.waiting > taken[f])
        segments = []
        # Within the batch, the flow that has had the least service goes first: a scorer that
        # works through its batch in order reaches a newcomer's sample before a big flow's.
        for flow, k in sorted(taken.items(), key=lambda fk: fk[0].next):
            segments.append((flow, flow.next, flow.next + k))
            flow.next += k
            self._waiting -= k
        return segments

    async def _dispatch(self, batch: list[Segment]) -> None:
        n = sum(end - start for _, start, end in batch)
        started = time.perf_counter()
        freed = False
        try:
            try:
                results = await self.worker.run([f.samples[a:b] for f, a, b in batch])
            except WorkerCrashed as exc:
                self._crashed(exc)
                await self._retry(batch)
            else:
                self._adapt(batch, (time.perf_counter() - started) / max(n, 1))
                freed = True
                self._hand_on()
                for segment, scores in zip(batch, results):
                    self._deliver(segment, scores)
        except Exception as exc:  # noqa: BLE001 - never leave a request waiting forever
            log.exception("batch of reward %r failed", self.name)
            for segment in batch:
                self._deliver(segment, [Score.from_error(exc, self.error_value, kind="server")
                                        for _ in range(segment[2] - segment[1])])
        finally:
            self._count_restarts()
            self.metrics.batch_size.labels(self.name).observe(n)
            self.metrics.batch_latency.labels(self.name).observe(time.perf_counter() - started)
            self._release(n)
            if not freed:
                self._free += 1
            self._wakeup.set()

    def _hand_on(self) -> None:
        """Free this batch's slot and, when samples are queued and no batch is held back to
        fill (``max_wait_ms`` 0), start the next batch now, before this one's results are
        delivered: its worker then scores while the event loop answers this batch's requests,
        instead of waiting for them and for the batch loop's turn."""
        self._free += 1
        if self.max_wait_s > 0 or self._closing:
            return
        self._drop_done()
        batch = self._take() if self._flows else []
        if batch:
            self._start(batch)

    def _adapt(self, batch: list[Segment], per_sample_s: float) -> None:
        """Each flow's next chunk: doubled while a batch stays within the quantum, else what
        fits in it (at least one sample)."""
        if not self.batch_independent:
            return
        fits = (int(self.batch_quantum_s / per_sample_s) if per_sample_s > 0
                else self.max_batch_samples)
        known = self._per_sample_s
        self._per_sample_s = (per_sample_s if known is None or per_sample_s > known
                              else 0.9 * known + 0.1 * per_sample_s)
        self._fits = max(1, min(self.max_batch_samples,
                                int(self.batch_quantum_s / max(self._per_sample_s, 1e-9))))
        # A model on a GPU costs far more per sample in a small batch than in a large one, and
        # its first batches pay for loading kernels: the per-sample estimate alone would keep
        # new flows in small chunks long after large batches were seen to be fast. So a new
        # flow may also start at twice the largest batch that finished within the quantum (the
        # doubling a flow's own chunks follow); a batch that overran it brings that back to
        # what fits at its own cost.
        size = sum(end - start for _, start, end in batch)
        if per_sample_s * size <= self.batch_quantum_s:
            self._proven = min(self.max_batch_samples, max(self._proven, 2 * size))
        else:
            self._proven = max(1, min(self.max_batch_samples, fits))
        for flow, _, _ in batch:
            flow.chunk = max(1, min(self.max_batch_samples, 2 * flow.chunk, fits))

    def _crashed(self, exc: WorkerCrashed) -> None:
        log.warning("reward %r: scoring worker failed (%s); retrying its samples once",
                    self.name, exc)

    def _count_restarts(self) -> None:
        """Export the worker's replacements: those a batch saw as a crash, and a process found
        ended between batches and replaced before the next one was sent."""
        restarts = self.worker.restarts
        if restarts > self._restarts_seen:
            self.metrics.worker_restarts.labels(self.name).inc(restarts - self._restarts_seen)
            self._restarts_seen = restarts

    async def _retry(self, batch: list[Segment]) -> None:
        """Retry each sample once, alone (or each request whole, when samples of a request must
        be scored together), so one poisonous sample only fails itself."""
        for flow, start, end in batch:
            if flow.future.done():
                continue
            units = ([(i, i + 1) for i in range(start, end)] if self.batch_independent
                     else [(start, end)])
            for a, b in units:
                try:
                    scores = (await self.worker.run([flow.samples[a:b]]))[0]
                except WorkerCrashed as exc:
                    self._crashed(exc)
                    scores = [Score.from_error(
                        f"the scoring worker failed on this sample twice: {exc}",
                        self.error_value, kind="worker_crashed") for _ in range(a, b)]
                self._deliver((flow, a, b), scores)

    def _deliver(self, segment: Segment, scores: list[Score]) -> None:
        flow, start, end = segment
        if flow.future.done():  # the request gave up (timeout, disconnect): nothing to count
            return
        self.metrics.samples.labels(self.name).inc(len(scores))
        for s in scores:
            if not s.ok:
                self.metrics.errors.labels(self.name, str(s.info.get("error_kind"))).inc()
        self._recent.extend((s.ok, s.info.get("error_kind")) for s in scores)
        flow.scores[start:end] = scores
        flow.left -= end - start
        if flow.left == 0:
            flow.future.set_result(flow.scores)
