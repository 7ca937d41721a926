"""Persistent worker processes with a deadline per task, usable from any thread.

Why not ``signal.alarm``: it works only in the main thread, and reward servers and trainers call
rewards from worker threads. Why not ``concurrent.futures.ProcessPoolExecutor``: it cannot stop one
task that overruns, only abandon the whole pool. Here each worker is a plain subprocess (so this
also works inside daemonic processes, where ``multiprocessing`` may not start children) speaking
length-prefixed pickles over its pipes; a task that passes its deadline gets its worker killed and
replaced, and the task scores ``timeout``. Workers run tasks of a batch in parallel.
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
        self._cond = threading.Condition()
        self._closed = False
        self._finalizer = weakref.finalize(self, _kill_all, self._all)

    def _acquire(self, want: int) -> list[_Worker]:
        with self._cond:
            while True:
                if self._closed:
                    raise RuntimeError("the math verifier was closed; create a new one")
                got = [self._idle.pop() for _ in range(min(want, len(self._idle)))]
                while len(got) < want and len(self._all) < self.size:
                    w = _Worker(self.memory_limit_mb)
                    self._all.append(w)
                    got.append(w)
                if got:
                    return got
                self._cond.wait()

    def _replace(self, dead: _Worker) -> _Worker:
        dead.kill()
        with self._cond:
            if dead in self._all:
                self._all.remove(dead)
            fresh = _Worker(self.memory_limit_mb)
            self._all.append(fresh)
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
        """Run ``(key, payload)`` tasks; each payload is judged by one worker within ``timeout``
        seconds of being handed to it. Returns key -> result (``on_timeout(key)`` for a task past
        its deadline, ``on_crash(key)`` for one whose worker died)."""
        queue = deque(tasks)
        results: dict[Hashable, Any] = {}
        workers = self._acquire(min(self.size, len(tasks)))
        busy: dict[_Worker, tuple[Hashable, float]] = {}
        try:
            while queue or busy:
                for w in workers:
                    if queue and w.ready and w not in busy:
                        key, payload = queue.popleft()
                        if w.send((key, *payload)):
                            busy[w] = (key, time.monotonic() + timeout)
                        else:
                            queue.appendleft((key, payload))
                            workers[workers.index(w)] = self._replace(w)
                now = time.monotonic()
                waits = [d - now for _, d in busy.values()]
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
                            key, _ = busy.pop(w)
                            results[key] = on_crash(key)
                        workers[workers.index(w)] = self._replace(w)
                now = time.monotonic()
                for w in list(workers):
                    if w in busy and busy[w][1] < now:
                        key, _ = busy.pop(w)
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

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._cond.notify_all()
        for w in idle:
            w.kill()
            if w in self._all:
                self._all.remove(w)
