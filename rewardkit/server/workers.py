"""Where batches are scored: off the event loop, in threads or in worker processes.

A *worker* takes a batch made of groups (one group per request, or per chunk of one) and returns
one list of Scores per group. Both kinds build their Scorer from a
:class:`~rewardkit.server.config.RewardSource` when they start, never at import:

- :class:`ThreadWorker` scores in threads of this process: verifiers that run their own pools
  (``code``'s sandbox, ``math``'s time-limited checks) need nothing more.
- :class:`PipeWorker` scores in one process (``workers: 1``, and a reward that runs a model
  under ``workers: auto``) that the event loop feeds through a pipe itself; :class:`ProcessWorker`
  in a pool of processes (``workers: N``, N > 1). Both are for rewards whose Python code holds the
  GIL — a model's forward pass takes the GIL back after each operator, so in a thread it stalls
  while the event loop is busy. A process that dies (killed, out of memory, a crash in native
  code) is replaced (a broken pool replaced whole), and the batcher retries the samples once.
"""
from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import functools
import logging
import multiprocessing
import multiprocessing.connection
import multiprocessing.process
import os
import queue
import threading
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Protocol

from ..scorer import Scorer
from ..types import Sample, Score
from .config import RewardSource

log = logging.getLogger("rewardkit.server")


class WorkerCrashed(RuntimeError):
    """The worker died or raised past the Scorer's own error handling."""


class WorkerStuck(WorkerCrashed):
    """The worker takes no work: its threads are stuck in calls past their deadline."""


class CallTimedOut(WorkerCrashed):
    """A scoring call ran past its deadline; the worker stuck in it was replaced."""

    def __init__(self, timeout_s: float, what: str) -> None:
        super().__init__(f"a scoring call ran past batch_timeout_s ({timeout_s:g} s): {what}")


def score_groups(scorer: Scorer, groups: list[list[Sample]],
                 batch_independent: bool) -> list[list[Score]]:
    """Score the groups of a batch: in one Scorer call when samples do not influence each other
    (a full batch for a model), else one call per group (batch/group normalisation)."""
    if not batch_independent or len(groups) == 1:
        return [scorer.score(g) for g in groups]
    flat = [s for g in groups for s in g]
    scores = scorer.score(flat)
    out, i = [], 0
    for g in groups:
        out.append(scores[i:i + len(g)])
        i += len(g)
    return out


class Worker(Protocol):
    restarts: int
    """Times the worker replaced its process(es), whatever the cause."""

    async def start(self) -> None: ...
    async def run(self, groups: list[list[Sample]],
                  timeout_s: float | None = None) -> list[list[Score]]:
        """Score ``groups``; past ``timeout_s`` of scoring (not counting the start of a
        replacement worker) raise :class:`CallTimedOut`, the stuck worker replaced."""
        ...
    async def close(self) -> None: ...


class _Job:
    """One call handed to a scoring thread; ``lock`` orders its return against its abandonment."""

    __slots__ = ("fn", "args", "future", "loop", "lock", "started", "returned", "abandoned")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...],
                 loop: asyncio.AbstractEventLoop) -> None:
        self.fn, self.args, self.loop = fn, args, loop
        self.future: asyncio.Future = loop.create_future()
        self.lock = threading.Lock()
        self.started = self.returned = self.abandoned = False


def _settle(future: asyncio.Future, result: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class ThreadWorker:
    """Scores in ``concurrency`` threads sharing one Scorer.

    A call that runs past its deadline (the batcher cancels it) cannot be stopped — Python has
    no way to kill a thread — so its thread is abandoned and a fresh one takes its place. The
    threads are daemon threads started here rather than a ``concurrent.futures`` pool because
    that pool joins its threads at interpreter exit, where a stuck one would hold the process up
    for good. At most ``concurrency`` threads may be stuck at once: past that the reward takes no
    more work (its calls fail with :class:`WorkerStuck`) until one returns, rather than pile up
    threads without bound. A reward that can hang belongs in a worker process (``workers: 1``),
    which is killed and replaced instead.
    """

    def __init__(self, source: RewardSource, concurrency: int) -> None:
        self.source = source
        self.concurrency = concurrency
        self.scorer: Scorer | None = None
        self.error_value = 0.0
        self.restarts = 0  # threads replaced after a call was abandoned
        self.stuck = 0     # abandoned calls still running
        self._jobs: queue.SimpleQueue[_Job | None] | None = None

    async def start(self) -> None:
        self._jobs = queue.SimpleQueue()
        for _ in range(self.concurrency):
            self._add_thread()
        self.scorer = await self._call(self.source.build)
        self.error_value = float(getattr(self.scorer, "error_value", 0.0))

    def _add_thread(self) -> None:
        threading.Thread(target=self._serve, args=(self._jobs,), name="rewardkit-score",
                         daemon=True).start()

    def _serve(self, jobs: queue.SimpleQueue) -> None:
        while (job := jobs.get()) is not None:
            with job.lock:
                if job.abandoned:  # cancelled before it started
                    continue
                job.started = True
            try:
                result, error = job.fn(*job.args), None
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
                result, error = None, exc
            with job.lock:
                job.returned = True
                abandoned = job.abandoned
            try:
                if abandoned:  # a fresh thread took this one's place: leave
                    job.loop.call_soon_threadsafe(self._stuck_returned)
                    return
                job.loop.call_soon_threadsafe(_settle, job.future, result, error)
            except RuntimeError:  # the event loop has closed: the server is gone
                return

    def _stuck_returned(self) -> None:
        self.stuck -= 1

    async def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        assert self._jobs is not None, "worker not started"
        job = _Job(fn, args, asyncio.get_running_loop())
        self._jobs.put(job)
        try:
            return await job.future
        except asyncio.CancelledError:  # past its deadline, or the server stops
            with job.lock:
                job.abandoned = not job.returned
                stuck = job.abandoned and job.started
            if stuck:
                self.stuck += 1
                self.restarts += 1
                self._add_thread()
            raise

    async def run(self, groups: list[list[Sample]],
                  timeout_s: float | None = None) -> list[list[Score]]:
        assert self.scorer is not None, "worker not started"
        if self.stuck >= self.concurrency:
            raise WorkerStuck(self.problem() or "")
        try:
            return await asyncio.wait_for(self._call(
                score_groups, self.scorer, groups, self.source.batch_independent), timeout_s)
        except asyncio.TimeoutError:
            raise CallTimedOut(timeout_s or 0, "its thread, which cannot be stopped, was left "
                               "behind and another started") from None
        except Exception as exc:  # noqa: BLE001 - the Scorer broke its contract: retry upstream
            raise WorkerCrashed(f"{type(exc).__name__}: {exc}") from exc

    def problem(self) -> str | None:
        if self._jobs is None:
            return "not started"
        if self.stuck >= self.concurrency:
            return (f"{self.stuck} of its scoring threads are stuck in calls past "
                    "batch_timeout_s and a thread cannot be stopped: it takes no more work "
                    "until one returns (serve it with workers: 1 to have a stuck call's "
                    "process replaced)")
        return None

    async def close(self) -> None:
        if self._jobs is not None:
            for _ in range(self.concurrency):
                self._jobs.put(None)
        if self.scorer is not None:
            self.scorer.close()


# A pool process builds its Scorer once, in the pool's initializer, and keeps it here. This is
# state of the worker process only (the app and its parent process hold none).
_process_scorer: Scorer | None = None
_process_independent = True
_build_error: str | None = None


def _init_process(source: RewardSource, server_pid: int) -> None:
    global _process_scorer, _process_independent, _build_error
    exit_with(server_pid)
    _process_independent = source.batch_independent
    try:
        _process_scorer = source.build()
    except Exception as exc:  # noqa: BLE001 - kept to be raised, with its message, to the server
        # (an initializer that raises only breaks the pool, and the cause is lost on the way)
        _build_error = f"{type(exc).__name__}: {exc}"


def _built() -> Scorer:
    if _process_scorer is None:
        raise RuntimeError(_build_error or "the reward was not built in this worker process")
    return _process_scorer


def _score_in_process(groups: list[list[Sample]]) -> list[list[Score]]:
    return score_groups(_built(), groups, _process_independent)


def _pid_and_error_value() -> tuple[int, float]:
    return os.getpid(), float(getattr(_built(), "error_value", 0.0))


def exit_with(pid: int) -> None:
    """End this process as soon as process ``pid`` (the server) ends, even by SIGKILL.

    A pool process is a child of multiprocessing's fork server, not of the server, so the
    kernel's parent-death signal would not fire when the server dies; and the fork server itself
    waits for its children. A thread blocks on a pidfd of the server (readable when it exits) —
    no polling — and then ends this process, whose own helpers (sandbox servers, math workers)
    follow it through their parent-death signal or their closed pipes.
    """
    import select

    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # no pidfd (old kernel, not Linux): poll the pid
        def watch() -> None:
            import time

            while True:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    os._exit(1)
                except PermissionError:
                    pass
                time.sleep(0.5)
    else:
        def watch() -> None:
            select.select([fd], [], [])
            os._exit(1)

    threading.Thread(target=watch, name="rewardkit-exit-with-server", daemon=True).start()


class ProcessWorker:
    """Scores in a pool of ``processes`` worker processes, each with its own Scorer."""

    def __init__(self, source: RewardSource, processes: int) -> None:
        self.source = source
        self.processes = processes
        self.error_value = 0.0
        self.restarts = 0  # pools replaced after a process died
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None

    def _new_pool(self) -> concurrent.futures.ProcessPoolExecutor:
        # forkserver: children start from a clean process, not a fork of this threaded server.
        context = multiprocessing.get_context("forkserver")
        return concurrent.futures.ProcessPoolExecutor(
            self.processes, mp_context=context, initializer=_init_process,
            initargs=(self.source, os.getpid()))

    async def start(self) -> None:
        self._pool = self._new_pool()
        loop = asyncio.get_running_loop()
        try:  # start the processes now, so that a reward that cannot be built fails the startup
            started = await asyncio.gather(*(loop.run_in_executor(
                self._pool, _pid_and_error_value) for _ in range(self.processes)))
        except BrokenProcessPool as exc:
            self._pool.shutdown(wait=False, cancel_futures=True)
            raise RuntimeError(f"the reward could not be built in a worker process: {exc}; "
                               "run `rewardkit score` with it to see the error") from exc
        except RuntimeError as exc:
            self._pool.shutdown(wait=False, cancel_futures=True)
            raise RuntimeError(f"the reward could not be built in a worker process: {exc}"
                               ) from None
        self.error_value = started[0][1]

    def pids(self) -> list[int]:
        """Process ids of the live pool processes (for monitoring and fault tests)."""
        processes = getattr(self._pool, "_processes", None) or {}
        return list(processes)

    def problem(self) -> str | None:
        """Why the pool cannot score now (None when it can)."""
        pool = self._pool
        if pool is None:
            return "not started"
        if getattr(pool, "_broken", False):
            return (f"its worker process pool is broken ({pool._broken}); it is replaced on "
                    "the next batch")
        processes = getattr(pool, "_processes", None) or {}
        if processes and not any(p.is_alive() for p in processes.values()):
            return "none of its worker processes is alive"
        return None

    async def run(self, groups: list[list[Sample]],
                  timeout_s: float | None = None) -> list[list[Score]]:
        pool = self._pool
        assert pool is not None, "worker not started"
        loop = asyncio.get_running_loop()
        try:
            return await asyncio.wait_for(loop.run_in_executor(pool, _score_in_process, groups),
                                          timeout_s)
        except (asyncio.CancelledError, asyncio.TimeoutError) as exc:  # past its deadline, or
            # the server stops: a process is stuck in it, and a pool cannot stop one task
            if self._pool is pool:
                self._kill_pool()
            if isinstance(exc, asyncio.TimeoutError):
                raise CallTimedOut(timeout_s or 0, "the worker processes were killed and "
                                   "replaced") from None
            raise
        except BrokenProcessPool as exc:
            # Several batches may see the same dead pool: only the first replaces it.
            if self._pool is pool:
                self._pool = self._new_pool()
                self.restarts += 1
                pool.shutdown(wait=False, cancel_futures=True)
            raise WorkerCrashed(f"a worker process died: {exc}") from exc
        except Exception as exc:  # noqa: BLE001 - pickling or Scorer failure: retry upstream
            raise WorkerCrashed(f"{type(exc).__name__}: {exc}") from exc

    def _kill_pool(self) -> None:
        """Kill the pool's processes and start a new pool (the batches still in the old one
        see it broken and are retried)."""
        pool = self._pool
        assert pool is not None
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            process.kill()
        pool.shutdown(wait=False, cancel_futures=True)
        self._pool = self._new_pool()
        self.restarts += 1

    async def close(self) -> None:
        if self._pool is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._pool.shutdown, True)


def _pipe_main(conn: multiprocessing.connection.Connection, source: RewardSource,
               server_pid: int) -> None:
    """A :class:`PipeWorker`'s process: build the Scorer, say whether it is ready, then score
    each batch that arrives until the pipe closes or ``None`` arrives."""
    exit_with(server_pid)
    try:
        scorer = source.build()
    except Exception as exc:  # noqa: BLE001 - the server reports it at startup
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", float(getattr(scorer, "error_value", 0.0))))
    while True:
        try:
            groups = conn.recv()
        except EOFError:
            return
        if groups is None:
            return
        try:
            reply = ("ok", score_groups(scorer, groups, source.batch_independent))
        except Exception as exc:  # noqa: BLE001 - the Scorer broke its contract: retry upstream
            reply = ("error", f"{type(exc).__name__}: {exc}")
        try:
            conn.send(reply)  # pickled whole before anything is written
        except Exception as exc:  # noqa: BLE001 - a Score that cannot be pickled
            conn.send(("error", f"the Scores could not be sent back: {type(exc).__name__}: {exc}"))


def _end_worker(conn: multiprocessing.connection.Connection,
                process: multiprocessing.process.BaseProcess) -> None:
    """Ask a :class:`PipeWorker`'s process to end, and end it if it does not. Also run at
    interpreter exit, where multiprocessing joins its non-daemon children (a worker must not be
    a daemon: ``math`` and ``code`` start processes of their own) and would otherwise wait for
    one that waits for its next batch."""
    try:
        conn.send(None)
    except (OSError, ValueError):
        pass
    conn.close()
    process.join(10)
    if process.is_alive():
        process.kill()
        process.join(5)


class PipeWorker:
    """Scores in one worker process that the event loop feeds through a pipe itself.

    :class:`ProcessWorker` hands each batch to its processes through two helper threads (the
    executor's manager and its queue's feeder), and those need the GIL while the event loop is
    answering the previous batch's requests: measured on a 2-core CPU, 2.7–4.4 ms from submit
    to the worker starting a ~34 ms batch of a reward model. Here the event loop pickles a batch
    and writes it to the pipe, and reads the reply when the pipe turns readable
    (``loop.add_reader``): no thread stands between them. One batch at a time. A process that
    dies is replaced, and the batcher retries its samples once.
    """

    def __init__(self, source: RewardSource) -> None:
        self.source = source
        self.error_value = 0.0
        self.restarts = 0  # processes replaced, after a crash or found ended between batches
        self._process: multiprocessing.process.BaseProcess | None = None
        self._conn: multiprocessing.connection.Connection | None = None
        self._lock: asyncio.Lock | None = None
        self._at_exit: functools.partial | None = None
        self._stale = False  # its process was killed in a call: replace it before the next

    async def start(self) -> None:
        self._lock = asyncio.Lock()
        status, value = await self._spawn()
        if status != "ready":
            await self._stop()
            raise RuntimeError(f"the reward could not be built in a worker process: {value}")
        self.error_value = value

    async def _spawn(self) -> tuple[str, object]:
        # forkserver: the child starts from a clean process, not a fork of this threaded server.
        context = multiprocessing.get_context("forkserver")
        ours, theirs = context.Pipe()
        process = context.Process(target=_pipe_main, args=(theirs, self.source, os.getpid()),
                                  name="rewardkit-model-worker")
        process.start()
        theirs.close()
        self._process, self._conn, self._stale = process, ours, False
        self._at_exit = functools.partial(_end_worker, ours, process)
        atexit.register(self._at_exit)
        try:
            return await self._receive()
        except (EOFError, OSError) as exc:
            return "error", f"the worker process ended while starting ({exc})"

    async def _receive(self) -> tuple[str, object]:
        """The next message from the worker, read when the pipe turns readable."""
        assert self._conn is not None
        conn, loop = self._conn, asyncio.get_running_loop()
        reply: asyncio.Future = loop.create_future()

        def readable() -> None:
            loop.remove_reader(conn.fileno())
            if reply.done():
                return
            try:
                reply.set_result(conn.recv())
            except (EOFError, OSError) as exc:  # the process died: its end of the pipe closed
                reply.set_exception(exc)

        loop.add_reader(conn.fileno(), readable)
        try:
            return await reply
        finally:
            if not conn.closed:
                loop.remove_reader(conn.fileno())

    async def _replace(self) -> None:
        await self._stop()
        self.restarts += 1
        status, value = await self._spawn()
        if status != "ready":
            raise WorkerCrashed(f"the replacement worker process failed to start: {value}")

    async def run(self, groups: list[list[Sample]],
                  timeout_s: float | None = None) -> list[list[Score]]:
        assert self._lock is not None, "worker not started"
        async with self._lock:
            if self._stale:
                await self._replace()
            elif self._process is None or not self._process.is_alive():
                log.warning("the worker process of %r had ended (exit code %s) between batches; "
                            "starting another", self.source.spec,
                            getattr(self._process, "exitcode", None))
                await self._replace()
            assert self._conn is not None
            try:
                self._conn.send(groups)
                status, value = await asyncio.wait_for(self._receive(), timeout_s)
            except (asyncio.CancelledError, asyncio.TimeoutError) as exc:  # past its deadline,
                # or the server stops: the process is stuck in the call; end it now, the next
                # batch starts another
                if self._process is not None:
                    self._process.kill()
                self._stale = True
                if isinstance(exc, asyncio.TimeoutError):
                    raise CallTimedOut(timeout_s or 0, "the worker process was killed and is "
                                       "replaced") from None
                raise
            except (EOFError, OSError) as exc:
                await self._replace()
                raise WorkerCrashed(f"the worker process died: {exc!r}") from exc
            except Exception as exc:  # noqa: BLE001 - e.g. a sample that cannot be pickled
                raise WorkerCrashed(f"{type(exc).__name__}: {exc}") from exc
            if status != "ok":
                raise WorkerCrashed(str(value))
            return value  # type: ignore[return-value]

    def pids(self) -> list[int]:
        """The live worker process's id (for monitoring and fault tests)."""
        process = self._process
        return [process.pid] if process is not None and process.is_alive() and process.pid \
            else []

    def problem(self) -> str | None:
        if self._process is None:
            return "not started"
        if not self._process.is_alive():
            return "its worker process is not alive; it is replaced on the next batch"
        return None

    async def _stop(self) -> None:
        conn, process, at_exit = self._conn, self._process, self._at_exit
        self._conn = self._process = self._at_exit = None
        if at_exit is not None:
            atexit.unregister(at_exit)
        if conn is not None and process is not None:
            await asyncio.get_running_loop().run_in_executor(None, _end_worker, conn, process)

    async def close(self) -> None:
        if self._lock is None:
            return
        async with self._lock:
            await self._stop()


def make_worker(source: RewardSource, concurrency: int, processes: int
                ) -> ThreadWorker | ProcessWorker | PipeWorker:
    """Threads (0 processes), one process fed by the event loop (1), or a process pool (N)."""
    if processes == 1:
        return PipeWorker(source)
    return ProcessWorker(source, processes) if processes > 1 else ThreadWorker(source, concurrency)
