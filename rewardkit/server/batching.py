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
flow's samples go out in chunks sized to finish within ``batch_quantum_s``. A flow of a
rule-based reward starts at one sample whatever came before: its samples may each spin for
their full time limit, and nothing that other requests' batches cost says otherwise. A flow of
a learned model starts at what fits at the reward's recent cost per sample (the estimate rises
at once on a slow batch and decays slowly), or at twice the largest batch recently seen to
finish within the quantum if that is larger: a model's sample costs what its tokens cost, and
on a GPU far more per sample in small batches than in large ones. Then the chunk doubles while
the flow's batches stay within the quantum and shrinks to fit it when samples are slow.

**Newcomers first, in turn.** A request is answered when its batch is done, so a newcomer's
fast sample batched with another request's slow ones waits for them. For a rule-based reward
the queued flows fall in two groups: the *newcomers* (flows not yet served that have the fewest
samples: a one-sample request before the first sample of a 16-sample one, whose request one
sample does not finish) and the rest (flows already served, and larger unserved ones). When
both wait, batches take one group at a time, in turn: the newcomers' batch goes first, and the
rest are owed the next batch, so a stream of newcomers cannot starve the requests already
served. **The bound:** a newcomer's first sample waits behind the samples being scored when it
arrives (at most one batch per slot), at most one batch of the rest (when a batch of other
newcomers just went), and the other newcomers of its size in its own batch; in any batch a
request has at most its chunk (what fits in the quantum at its measured cost: one sample while
its samples take the quantum). So with one other client's two requests of slow samples and two
slots, a newcomer that comes while their first batches run waits behind at most 4 of their
slow samples, and its own batch holds none. Each request's count is exported as
the ``rewardkit_samples_ahead`` histogram (:attr:`Flow.behind`), a figure that does not depend
on the machine's load. A model's requests are batched together as they come, newcomers or not
(for a model, batching is the point; its wait is about two quanta).

**Deadlines.** A scoring call still running after ``batch_timeout_s`` is abandoned: its samples
get ``error_kind="timeout"`` (not retried: a retry would wait as long again), the worker stuck in
it is replaced (see :mod:`~rewardkit.server.workers`), and ``/health`` reports the reward
degraded (:mod:`~rewardkit.server.health`). When the server stops, :meth:`Batcher.drain_within`
answers what is not scored by the graceful timeout with ``error_kind="shutdown"``.

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
from .health import RewardHealth
from .metrics import ServerMetrics
from .workers import (CallTimedOut, PipeWorker, ProcessWorker, ThreadWorker, WorkerCrashed,
                      WorkerStuck)

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

    __slots__ = ("samples", "scores", "future", "enqueued", "next", "left", "chunk", "behind",
                 "mark")

    def __init__(self, samples: list[Sample], future: asyncio.Future, enqueued: float,
                 chunk: int) -> None:
        self.samples = samples
        self.scores: list[Optional[Score]] = [None] * len(samples)
        self.future = future
        self.enqueued = enqueued
        self.next = 0              # first sample not yet handed to a worker
        self.left = len(samples)   # samples without a Score yet
        self.chunk = chunk         # most samples of this flow per batch (see module docstring)
        #: other requests' samples its first sample waited behind: being scored when it arrived,
        #: handed to a worker before it, or in its batch (set when its first sample goes out)
        self.behind = 0
        self.mark = 0              # the batcher's count of samples handed out when it arrived

    @property
    def waiting(self) -> int:
        return len(self.samples) - self.next


SHUTDOWN = "the server stopped before this sample was scored (its graceful timeout passed)"

# One piece of a batch: (flow, start, end) — samples[start:end] of that flow.
Segment = tuple[Flow, int, int]


class Batcher:
    """The queue and batch loop of one served reward."""

    def __init__(self, name: str, worker: ThreadWorker | ProcessWorker | PipeWorker, *,
                 max_batch_samples: int,
                 max_wait_ms: float, concurrency: int, max_queue_samples: int,
                 batch_independent: bool, metrics: ServerMetrics,
                 batch_quantum_s: float = 1.0, batch_timeout_s: float | None = None,
                 cost_follows_size: bool = False) -> None:
        self.name = name
        self.worker = worker
        self.max_batch_samples = max_batch_samples
        self.max_wait_s = max_wait_ms / 1000.0
        self.slots = concurrency
        self.max_queue_samples = max_queue_samples
        self.batch_independent = batch_independent
        self.batch_quantum_s = batch_quantum_s
        self.batch_timeout_s = batch_timeout_s
        self.cost_follows_size = cost_follows_size
        self.metrics = metrics
        self.health = RewardHealth()
        self.error_value = 0.0
        self.pending = 0  # samples queued or being scored
        self._flows: deque[Flow] = deque()  # flows with samples not yet handed out
        self._waiting = 0  # samples not yet handed out
        self._free = concurrency
        self._wakeup = asyncio.Event()
        self._closing = False
        self._loop_task: asyncio.Task | None = None
        self._running: set[asyncio.Task] = set()
        self._aborting = False  # the server stops: what is left gets error Scores
        self._rest_owed = False  # a batch of newcomers went while other flows waited
        self._handed = 0  # samples handed to the worker so far
        self._abort_timer: asyncio.TimerHandle | None = None
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
        flow = Flow(samples, loop.create_future(), loop.time(), self._first_chunk(n))
        flow.behind, flow.mark = self.pending - self._waiting, self._handed  # being scored now
        self._flows.append(flow)
        self._waiting += n
        self.pending += n
        self.metrics.queue_depth.labels(self.name).set(self.pending)
        self._wakeup.set()
        return flow

    def _first_chunk(self, n: int) -> int:
        """A new flow's first chunk. A learned model's sample costs what its tokens cost, so
        what recent batches cost may size it (see :meth:`_adapt`); a rule-based reward's sample
        may spin for its whole time limit whatever came before, so its first chunk is one
        sample, and it grows only as this flow's own batches finish within the quantum."""
        if not self.batch_independent:
            return max(n, 1)
        return max(self._fits, self._proven) if self.cost_follows_size else 1

    def problem(self) -> str | None:
        """Why this reward cannot score now (None when it can): its worker cannot take work,
        or what its recent calls and samples say (:class:`~.health.RewardHealth`)."""
        problems = [p for p in (self.worker.problem(), self.health.problem()) if p]
        return "; ".join(problems) or None

    def drain_within(self, seconds: float) -> None:
        """The server is stopping: samples not scored within ``seconds`` get an error Score
        (``error_kind="shutdown"``) and calls still running are abandoned, so that every request
        is answered, and the server exits, within its graceful timeout even while a scoring call
        hangs."""
        loop = asyncio.get_running_loop()
        if self._abort_timer is None:
            self._abort_timer = loop.call_later(max(0.0, seconds), self._abort)

    def _abort(self) -> None:
        self._aborting = self._closing = True
        for flow in self._flows:
            if flow.waiting:
                self._deliver((flow, flow.next, len(flow.samples)), self._errors(
                    flow.waiting, SHUTDOWN, "shutdown"))
                self._release(flow.waiting)
                flow.next = len(flow.samples)
        self._flows.clear()
        self._waiting = 0
        for task in self._running:
            task.cancel()
        self._wakeup.set()

    def _errors(self, n: int, why: object, kind: str) -> list[Score]:
        return [Score.from_error(why, self.error_value, kind=kind) for _ in range(n)]

    async def close(self) -> None:
        """Score what is queued, wait for running batches, then stop the worker."""
        self._closing = True
        self._wakeup.set()
        if self._loop_task is not None:
            await self._loop_task
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)
        if self._abort_timer is not None:
            self._abort_timer.cancel()
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
            active = self._turn(list(self._flows))
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
        size = sum(taken.values())
        # Within the batch, the flow that has had the least service goes first: a scorer that
        # works through its batch in order reaches a newcomer's sample before a big flow's.
        for flow, k in sorted(taken.items(), key=lambda fk: fk[0].next):
            if flow.next == 0:  # its first sample goes out
                flow.behind += self._handed - flow.mark + size - k
                self.metrics.samples_ahead.labels(self.name).observe(flow.behind)
            segments.append((flow, flow.next, flow.next + k))
            flow.next += k
            self._waiting -= k
        self._handed += size
        return segments

    def _turn(self, flows: list[Flow]) -> list[Flow]:
        """The flows the next batch may take. For a rule-based reward, the newcomers (flows not
        yet served with the fewest samples) and the rest take batches in turn when both wait,
        the newcomers first (see the module docstring); a model's batch takes every flow."""
        if self.cost_follows_size:
            return flows
        fresh = [f for f in flows if f.next == 0]
        fewest = min((f.waiting for f in fresh), default=0)
        newcomers = {f for f in fresh if f.waiting == fewest}
        if not newcomers or len(newcomers) == len(flows):
            self._rest_owed = False
            return flows
        if self._rest_owed:
            self._rest_owed = False
            return [f for f in flows if f not in newcomers]
        self._rest_owed = True
        return [f for f in flows if f in newcomers]

    async def _dispatch(self, batch: list[Segment]) -> None:
        n = sum(end - start for _, start, end in batch)
        started = time.perf_counter()
        freed = False
        try:
            try:
                results = await self._call([f.samples[a:b] for f, a, b in batch])
            except (CallTimedOut, WorkerStuck) as exc:  # a retry would wait as long again
                for flow, a, b in batch:
                    self._deliver((flow, a, b), self._errors(b - a, exc, self._kind(exc)))
            except WorkerCrashed as exc:
                self._crashed(exc)
                await self._retry(batch)
            else:
                self._adapt(batch, (time.perf_counter() - started) / max(n, 1))
                freed = True
                self._hand_on()
                for segment, scores in zip(batch, results):
                    self._deliver(segment, scores)
        except asyncio.CancelledError:
            if not self._aborting:
                raise
            for flow, a, b in batch:  # the server stops: answer what this batch still owes
                for i in range(a, b):
                    if flow.scores[i] is None:
                        self._deliver((flow, i, i + 1), self._errors(1, SHUTDOWN, "shutdown"))
        except Exception as exc:  # noqa: BLE001 - never leave a request waiting forever
            log.exception("batch of reward %r failed", self.name)
            for segment in batch:
                self._deliver(segment, self._errors(segment[2] - segment[1], exc, "server"))
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

    async def _call(self, groups: list[list[Sample]]) -> list[list[Score]]:
        """One scoring call under ``batch_timeout_s`` (past it the worker replaces what is stuck
        in the call), its outcome told to :attr:`health`."""
        try:
            results = await self.worker.run(groups, self.batch_timeout_s)
        except CallTimedOut as exc:
            log.warning("reward %r: %s", self.name, exc)
            self.health.call_failed(str(exc), timed_out=True)
            raise
        except WorkerStuck:
            raise
        except WorkerCrashed as exc:
            self.health.call_failed(f"worker_crashed: {exc}")
            raise
        finally:
            self._count_restarts()
        self.health.call_scored()
        return results

    @staticmethod
    def _kind(exc: WorkerCrashed) -> str:
        return ("timeout" if isinstance(exc, CallTimedOut) else
                "worker_stuck" if isinstance(exc, WorkerStuck) else "worker_crashed")

    def _crashed(self, exc: WorkerCrashed) -> None:
        log.warning("reward %r: scoring worker failed (%s); retrying its samples once",
                    self.name, exc)

    def _count_restarts(self) -> None:
        """Export the worker's replacements: those a batch saw as a crash, and a process found
        ended between batches and replaced before the next one was sent."""
        restarts = self.worker.restarts
        if restarts > self._restarts_seen:
            self.metrics.worker_restarts.labels(self.name).inc(restarts - self._restarts_seen)
            self.health.restarted(restarts - self._restarts_seen)
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
                    scores = (await self._call([flow.samples[a:b]]))[0]
                except (CallTimedOut, WorkerStuck) as exc:
                    scores = self._errors(b - a, exc, self._kind(exc))
                except WorkerCrashed as exc:
                    self._crashed(exc)
                    scores = self._errors(
                        b - a, f"the scoring worker failed on this sample twice: {exc}",
                        "worker_crashed")
                self._deliver((flow, a, b), scores)

    def _deliver(self, segment: Segment, scores: list[Score]) -> None:
        flow, start, end = segment
        if flow.future.done():  # the request gave up (timeout, disconnect): nothing to count
            return
        self.metrics.samples.labels(self.name).inc(len(scores))
        for s in scores:
            if not s.ok:
                self.metrics.errors.labels(self.name, str(s.info.get("error_kind"))).inc()
        self.health.samples_answered(scores)
        flow.scores[start:end] = scores
        flow.left -= end - start
        if flow.left == 0:
            flow.future.set_result(flow.scores)
