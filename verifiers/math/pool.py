"""Persistent worker processes with a deadline per task, usable from any thread.

Why not ``signal.alarm``: it works only in the main thread, and reward servers and trainers call
rewards from worker threads. Why not ``concurrent.futures.ProcessPoolExecutor``: it cannot stop one
task that overruns, only abandon the whole pool. Here each worker is a plain subprocess (so this
also works inside daemonic processes, where ``multiprocessing`` may not start children) speaking
length-prefixed pickles over its pipes; a task that passes its deadline gets its worker killed and
replaced, and the task scores ``timeout``. Workers run tasks of a batch in parallel.

**A sample is bounded by its own compute.** The deadline counts the CPU time the worker spent on
the task (read from ``/proc/<pid>/stat``), not the wall time, so a verdict does not change with
the machine's load or with how long the sample waited for a worker; a wall-clock backstop
(:data:`WALL_FACTOR` times the timeout, plus :data:`WALL_SLACK`) still ends a worker that makes no
progress at all. Where ``/proc`` is missing the deadline is wall time.

**Restarts stay off the critical path.** The pool keeps :data:`SPARES` started worker that takes
the place of a killed one at once (its sympy import already done); a new spare then starts in
the background.

**Batches get workers in the order they asked.** Batches from several threads share the pool
(a reward server runs one batch per slot); a batch waiting for a worker is served before any
batch that asked after it. A condition variable alone wakes every waiter and lets whichever
thread runs first take the freed worker, so under load a newcomer's one-sample batch could lose
that race to another client's later batches again and again.
"""
from __future__ import annotations

import os
import pickle
import select
import subprocess
import sys
import threading
import time
import weakref
from collections import deque
from typing import Any, Callable, Hashable, Iterable

from .worker import HEADER, write_frame

#: Seconds a new worker may take to import sympy and warm up before it is declared broken.
START_TIMEOUT = 120.0
#: Started workers kept in reserve to replace a killed one without waiting for its imports.
SPARES = 1
#: Wall-clock backstop of a task: ``WALL_FACTOR * timeout + WALL_SLACK`` seconds.
WALL_FACTOR = 10.0
WALL_SLACK = 10.0
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (Linux ``/proc``), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2:].split()
    try:
        return (int(fields[11]) + int(fields[12])) / _TICK
    except (IndexError, ValueError):
        return None


class WorkerStartError(RuntimeError):
    """A worker process could not be started."""


class _Worker:
    def __init__(self, memory_limit_mb: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rewardkit.verifiers.math.worker", str(memory_limit_mb)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            close_fds=True, start_new_session=True,
        )
        self.fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        self.buf = bytearray()
        self.ready = False
        self.started = time.monotonic()

    def send(self, obj: Any) -> bool:
        try:
            write_frame(self.proc.stdin, obj)  # type: ignore[arg-type]
            return True
        except (BrokenPipeError, OSError):
            return False

    def receive(self) -> tuple[list[Any], bool]:
        """Frames now available, and whether the worker is still alive."""
        try:
            data = os.read(self.fd, 1 << 16)
        except OSError:
            data = b""
        if not data:
            return [], False
        self.buf += data
        frames = []
        while len(self.buf) >= HEADER.size:
            (n,) = HEADER.unpack_from(self.buf)
            if len(self.buf) < HEADER.size + n:
                break
            frames.append(pickle.loads(bytes(self.buf[HEADER.size:HEADER.size + n])))
            del self.buf[:HEADER.size + n]
        return frames, True

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()  # type: ignore[union-attr]
            except OSError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def _kill_all(workers: list[_Worker]) -> None:
    for w in list(workers):
        w.kill()


class WorkerPool:
    """Up to ``size`` worker processes, started on first use and kept for later batches.

    Args:
        size: most worker processes alive at once.
        memory_limit_mb: ``RLIMIT_AS`` of each worker.
    """

    def __init__(self, size: int, memory_limit_mb: int) -> None:
        self.size = size
        self.memory_limit_mb = memory_limit_mb
        self._idle: list[_Worker] = []
        self._all: list[_Worker] = []
        self._spares: list[_Worker] = []
        self._cond = threading.Condition()
        self._asking: deque[object] = deque()  # batches waiting for workers, first come first
        self._closed = False
        self._finalizer = weakref.finalize(self, _kill_all, self._all)
        self._spare_finalizer = weakref.finalize(self, _kill_all, self._spares)
        #: workers replaced after a timeout or crash (for tests and monitoring)
        self.replacements = 0
        #: replacements served by an already started spare
        self.spares_used = 0

    def _acquire(self, want: int) -> list[_Worker]:
        """Up to ``want`` workers (at least one), once every batch that asked earlier has
        its own."""
        turn = object()
        with self._cond:
            self._asking.append(turn)
            try:
                while True:
                    if self._closed:
                        raise RuntimeError("the math verifier was closed; create a new one")
                    if self._asking[0] is turn:
                        got = [self._idle.pop() for _ in range(min(want, len(self._idle)))]
                        while len(got) < want and len(self._all) < self.size:
                            w = _Worker(self.memory_limit_mb)
                            self._all.append(w)
                            got.append(w)
                        if got:
                            self._top_up_spares()
                            return got
                    self._cond.wait()
            finally:
                self._asking.remove(turn)
                self._cond.notify_all()  # the next in line may find a worker left

    def _top_up_spares(self) -> None:
        """Start spares up to :data:`SPARES` (called with the lock held; Popen returns at once,
        the child imports sympy on its own)."""
        while len(self._spares) < SPARES and not self._closed:
            self._spares.append(_Worker(self.memory_limit_mb))

    def _replace(self, dead: _Worker) -> _Worker:
        dead.kill()
        with self._cond:
            if dead in self._all:
                self._all.remove(dead)
            self.replacements += 1
            alive = [w for w in self._spares if w.proc.poll() is None]
            for w in self._spares:
                if w not in alive:
                    w.kill()
            self._spares[:] = alive
            if self._spares:
                fresh = self._spares.pop(0)
                self.spares_used += 1
            else:
                fresh = _Worker(self.memory_limit_mb)
            self._all.append(fresh)
            self._top_up_spares()
            return fresh

    def _release(self, workers: Iterable[_Worker]) -> None:
        with self._cond:
            for w in workers:
                if self._closed or w.proc.poll() is not None:
                    w.kill()
                    if w in self._all:
                        self._all.remove(w)
                else:
                    self._idle.append(w)
            self._cond.notify_all()

    def run(self, tasks: list[tuple[Hashable, tuple[Any, ...]]], timeout: float,
            on_timeout: Callable[[Hashable], Any], on_crash: Callable[[Hashable], Any]
            ) -> dict[Hashable, Any]:
        """Run ``(key, payload)`` tasks; each payload is decided by one worker within ``timeout``
        seconds of being handed to it. Returns key -> result (``on_timeout(key)`` for a task past
        its deadline, ``on_crash(key)`` for one whose worker died)."""
        queue = deque(tasks)
        results: dict[Hashable, Any] = {}
        workers = self._acquire(min(self.size, len(tasks)))
        # worker -> (key, wall backstop, CPU seconds at start or None, next CPU check)
        busy: dict[_Worker, tuple[Hashable, float, float | None, float]] = {}
        backstop = WALL_FACTOR * timeout + WALL_SLACK
        try:
            while queue or busy:
                for w in workers:
                    if queue and w.ready and w not in busy:
                        key, payload = queue.popleft()
                        cpu0 = _cpu_seconds(w.proc.pid)
                        if w.send((key, *payload)):
                            now = time.monotonic()
                            busy[w] = (key, now + (backstop if cpu0 is not None else timeout),
                                       cpu0, now + timeout)
                        else:
                            queue.appendleft((key, payload))
                            workers[workers.index(w)] = self._replace(w)
                now = time.monotonic()
                # CPU time cannot grow faster than wall time: sleep until the earliest moment a
                # task could have spent its budget, then look at its CPU time
                waits = [min(b[1], b[3]) - now for b in busy.values()]
                waits += [w.started + START_TIMEOUT - now for w in workers if not w.ready]
                watched = [w for w in workers if w in busy or not w.ready]
                if not watched:
                    continue
                readable, _, _ = select.select([w.fd for w in watched], [], [],
                                               max(0.0, min(waits)))
                by_fd = {w.fd: w for w in watched}
                for fd in readable:
                    w = by_fd[fd]
                    frames, alive = w.receive()
                    for frame in frames:
                        if frame[0] == "ready":
                            w.ready = True
                        elif frame[0] == "result" and w in busy and busy[w][0] == frame[1]:
                            results[frame[1]] = frame[2]
                            del busy[w]
                    if not alive:
                        if not w.ready:
                            raise WorkerStartError(
                                "a math worker exited while starting; run `python -m "
                                "rewardkit.verifiers.math.worker` to see why")
                        if w in busy:
                            key = busy.pop(w)[0]
                            results[key] = on_crash(key)
                        workers[workers.index(w)] = self._replace(w)
                now = time.monotonic()
                for w in list(workers):
                    if w not in busy:
                        pass
                    elif busy[w][1] <= now or self._over_budget(w, busy, timeout, now):
                        key = busy.pop(w)[0]
                        results[key] = on_timeout(key)
                        workers[workers.index(w)] = self._replace(w)
                    elif not w.ready and w.started + START_TIMEOUT < now:
                        w.kill()
                        raise WorkerStartError(
                            f"a math worker did not start within {START_TIMEOUT:.0f}s; check that "
                            "`python -m rewardkit.verifiers.math.worker` runs in this environment"
                        )
        finally:
            self._release(workers)
        return results

    @staticmethod
    def _over_budget(w: _Worker, busy: dict, timeout: float, now: float) -> bool:
        """Whether the task on ``w`` has used ``timeout`` CPU seconds; schedules the next look."""
        key, wall, cpu0, check = busy[w]
        if cpu0 is None or now < check:
            return False
        cpu = _cpu_seconds(w.proc.pid)
        if cpu is None:
            return False
        used = cpu - cpu0
        if used >= timeout:
            return True
        busy[w] = (key, wall, cpu0, now + max(0.01, timeout - used))
        return False

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            idle += self._spares
            self._spares.clear()
            self._cond.notify_all()
        for w in idle:
            w.kill()
            if w in self._all:
                self._all.remove(w)
